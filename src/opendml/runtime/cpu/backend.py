"""CPU backend.

Plans run through opendml's compiled kernels (the C sources beside this file:
strided copy and UNFOLD gather, split over the CPU's cores with the GIL released) when the
extension was built at install time, and otherwise through NumPy strided views
and ``np.copyto``. Both move unsigned words of the element's size, never
values, so every bit pattern (float16 NaN payloads, negative zero) survives
exactly, and both give identical results (the tests run both).
``opendml.configure(cpu_kernels="numpy")`` (or ``OPENDML_CPU_KERNELS=numpy``)
selects the NumPy path.

Everything a dispatch needs (views, or addresses and a packed parameter block)
is built once per binding (``prepare``) and replayed by ``execute``.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...model.errors import UnsupportedError
from ...plan import CopyPlan, UnfoldPlan
from ..config import CACHE_MIN_BYTES, Config

WORDS = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}
ALIGNMENT = 64


def _load_native():
    try:
        from . import _native
    except ImportError:
        return None
    return _native


def apply_cache_limit(cfg: Config) -> None:
    """Give the compiled kernels' output-block cache the configured limit (at
    once: a limit of 0 frees the blocks held)."""
    mod = _load_native()
    if mod is not None:
        mod.cache_limit(cfg.output_cache_bytes if cfg.cpu_kernels == "compiled" else 0)


def _view(flat: np.ndarray, offset: int, sizes, strides) -> np.ndarray:
    """Element view of ``flat`` (1-D, word dtype) at element ``offset``."""
    item = flat.itemsize
    return as_strided(flat[offset:], shape=tuple(sizes), strides=tuple(t * item for t in strides))


class CpuBackend:
    """Runs plans with the settings of one ``Config`` (see ``opendml.configure``):
    the compiled kernels or NumPy, threads, and the output-block cache limit."""

    name = "cpu"

    def __init__(self, cfg: Config):
        self.config = cfg
        mod = _load_native() if cfg.cpu_kernels == "compiled" else None
        if cfg.cpu_kernels == "compiled" and mod is None:
            raise UnsupportedError("opendml's compiled CPU kernels are not installed "
                                   "(reinstall with a C compiler present)")
        self._native = mod
        self.threads = cfg.threads
        self.grain = cfg.thread_grain_bytes
        self.tile_stride = cfg.unfold_tile_stride
        self.tile_columns = cfg.unfold_tile_columns

    @property
    def kernels(self) -> str:
        """Which CPU kernels run plans: 'compiled' or 'numpy'."""
        return "compiled" if self._native is not None else "numpy"

    def _threads(self, nbytes: int) -> int:
        return int(max(1, min(self.threads, nbytes // self.grain)))

    # -- memory ----------------------------------------------------------------
    def allocate(self, nbytes: int) -> np.ndarray:
        raw = np.zeros(nbytes + ALIGNMENT, dtype=np.uint8)
        start = (-raw.ctypes.data) % ALIGNMENT
        return raw[start:start + nbytes]

    def write_bytes(self, storage: np.ndarray, offset: int, data: np.ndarray) -> None:
        storage[offset:offset + data.nbytes] = data.reshape(-1).view(np.uint8)

    def read_bytes(self, storage: np.ndarray, offset: int, nbytes: int) -> np.ndarray:
        return storage[offset:offset + nbytes].copy()

    def element_range(self, storage: np.ndarray, offset: int, nbytes: int, element_size: int) -> np.ndarray:
        """The bound byte range as a 1-D array of element-sized words."""
        count = nbytes // element_size
        return storage[offset:offset + count * element_size].view(WORDS[element_size])

    def synchronize(self) -> None:
        pass

    def cache_info(self) -> dict:
        """The output-block cache: {'limit', 'blocks', 'bytes', 'hits', 'misses'}."""
        if self._native is None:
            return {"limit": 0, "blocks": 0, "bytes": 0, "hits": 0, "misses": 0}
        return self._native.cache_info()

    def empty(self, shape, dtype) -> tuple[np.ndarray, bool]:
        """An uninitialised array for an array-API output, and whether its
        memory is fresh (never touched). With the compiled kernels, outputs of
        ``CACHE_MIN_BYTES`` and up come from the extension's output blocks:
        released outputs' pages are kept (up to ``cpu_output_cache``'s limit)
        and reused, already resident, by later outputs of a similar size."""
        dtype = np.dtype(dtype)
        count = math.prod(shape)
        nbytes = count * dtype.itemsize
        # Blocks only where a released one could be kept: otherwise NumPy's
        # allocator (which glibc lets reuse freed memory up to 32 MiB) is better.
        if self._native is not None and CACHE_MIN_BYTES <= nbytes <= self._native.cache_limit():
            block = self._native.Block(nbytes)
            return np.frombuffer(block, dtype=dtype, count=count).reshape(shape), block.fresh
        return np.empty(shape, dtype), True

    # -- execution --------------------------------------------------------------
    def prepare(self, plan, src: np.ndarray, dst: np.ndarray):
        """Return a callable that runs ``plan`` from ``src`` into ``dst`` (1-D word
        arrays whose element 0 is the plan's origin)."""
        if isinstance(plan, CopyPlan):
            if self._native is not None:
                return self._native_copy(plan, src, dst)
            return _prepare_copy(plan, src, dst)
        if isinstance(plan, UnfoldPlan):
            if self._native is not None:
                return self._native_unfold(plan, src, dst)
            return _prepare_unfold(plan, src, dst)
        raise TypeError(f"unknown plan {type(plan).__name__}")

    def _native_copy(self, plan: CopyPlan, src, dst):
        p = plan.canonical()
        es = p.element_size
        params = np.array([es, len(p.sizes), *p.sizes, *(t * es for t in p.out_strides),
                           *(t * es for t in p.in_strides)], dtype=np.int64).tobytes()
        d_addr = dst.ctypes.data + p.out_offset * dst.itemsize
        s_addr = src.ctypes.data + p.in_offset * src.itemsize
        threads = self._threads(2 * p.count * es)
        kernel = self._native.copy

        def run(keep=(src, dst)):
            kernel(d_addr, s_addr, params, threads)
        return run

    def _native_unfold(self, plan: UnfoldPlan, src, dst):
        es = plan.element_size
        D = len(plan.window)
        inner_step = abs(plan.strides[-1] * plan.in_strides[-1]) * es
        mode = 1 if inner_step > self.tile_stride and math.prod(plan.window) > 1 else 0
        on, orow, ocol = plan.out_strides
        head = [es, D, plan.batch, plan.channels, mode, self.tile_columns,
                on * es, orow * es, ocol * es, plan.in_strides[0] * es, plan.in_strides[1] * es]
        for d in range(D):
            head += [plan.spatial[d], plan.in_strides[2 + d] * es, plan.window[d], plan.strides[d],
                     plan.dilations[d], plan.start_padding[d], plan.blocks[d]]
        params = np.array(head, dtype=np.int64).tobytes()
        d_addr = dst.ctypes.data + plan.out_offset * dst.itemsize
        s_addr = src.ctypes.data + plan.in_offset * src.itemsize
        threads = self._threads(plan.out_count * es)
        kernel = self._native.unfold

        def run(keep=(src, dst)):
            kernel(d_addr, s_addr, params, threads)
        return run


def _prepare_copy(plan: CopyPlan, src, dst):
    p = plan.canonical()
    s = _view(src, p.in_offset, p.sizes, p.in_strides)
    d = _view(dst, p.out_offset, p.sizes, p.out_strides)

    def run():
        np.copyto(d, s, casting="no")
    return run


def _prepare_unfold(plan: UnfoldPlan, src, dst):
    """One strided copy per window position k: the blocks whose element k lies
    inside the input are copied, the border strips of blocks that fall into the
    padding are zeroed. No padded copy of the input is made."""
    D = len(plan.window)
    K = math.prod(plan.window)
    on, orow, ocol = plan.out_strides
    col_strides = [ocol * math.prod(plan.blocks[d + 1:]) for d in range(D)]
    n_s, c_s, *sp_s = plan.in_strides
    copies, zeros = [], []
    for kflat, k in enumerate(itertools.product(*(range(w) for w in plan.window))):
        ranges = [plan.valid_block_range(d, k[d]) for d in range(D)]
        base = plan.out_offset + kflat * orow
        out_sizes = (plan.batch, plan.channels, *plan.blocks)
        out_strides = (on, orow * K, *col_strides)
        for d, (lo, hi) in enumerate(ranges):
            for a, b in ((0, lo), (hi, plan.blocks[d])):
                if b > a:
                    sizes = list(out_sizes)
                    sizes[2 + d] = b - a
                    zeros.append(_view(dst, base + a * col_strides[d], sizes, out_strides))
        if any(hi <= lo for lo, hi in ranges):
            continue
        sizes = (plan.batch, plan.channels, *(hi - lo for lo, hi in ranges))
        out_base = base + sum(lo * cs for (lo, _), cs in zip(ranges, col_strides))
        in_base = plan.in_offset + sum(
            (lo * plan.strides[d] + k[d] * plan.dilations[d] - plan.start_padding[d]) * sp_s[d]
            for d, (lo, _) in enumerate(ranges))
        in_strides = (n_s, c_s, *(plan.strides[d] * sp_s[d] for d in range(D)))
        copies.append((_view(dst, out_base, sizes, out_strides), _view(src, in_base, sizes, in_strides)))

    def run():
        for z in zeros:
            z.fill(0)
        for d, s in copies:
            np.copyto(d, s, casting="no")
    return run
