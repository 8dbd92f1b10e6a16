"""CPU backend: a move program (``plan.MovePlan``) runs pass by pass, each pass kind through its ``PASSES`` entry:
opendml's compiled kernels (the C sources beside this file, on the CPU's cores, GIL released) where built, else NumPy
strided views (``numpy_kernels``; ``configure(cpu_kernels="numpy")`` selects them). Copies move unsigned words, never
values (every bit pattern survives), and FOLD sums in one order: both paths give identical bytes. What a dispatch
needs is built once per binding (``prepare``) and replayed.
"""
from __future__ import annotations

import ctypes
import math
import struct

import numpy as np

from ...model.data_type import DataType
from ...model.errors import UnsupportedError
from ...plan import (Copy, CopyPlan, Fill, FoldPlan, Gather, MovePlan, Scatter, ScatterPlan, SliceScatter, UnfoldPlan,
                     Windows, WindowSums)
from .. import alloc
from ..config import CACHE_MIN_BYTES, Config
from ..params import MAX_RANK, _fields, copy_params, fold_params, i64, scatter_params, unfold_params
from . import numpy_kernels

WORDS = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}
ALIGNMENT = 64

#: move.h's ODML_MOVE_MAX_RANK: passes with more dimensions (once canonical) run through NumPy.
MOVE_MAX_RANK = 16


class MoveParams(ctypes.Structure):
    """ctypes mirror of ``odml_cpu_move_params`` (runtime/cpu/move.h), same field order, every field 64 bits."""
    _fields_ = _fields("kind", "src_type", "dst_type", "rank", "src_offset", "dst_offset", "has_scale_bias",
                       scale=ctypes.c_double, bias=ctypes.c_double, fill_bits=ctypes.c_uint64,
                       **dict.fromkeys(("sizes", "src_strides", "dst_strides", "map_mode", "map_shift", "map_size"),
                                       i64 * MOVE_MAX_RANK))


def canonical_move_pass(p):
    """A ``Copy`` or ``Fill`` pass as (sizes, src_strides, dst_strides, maps, src_offset): size-1 dimensions dropped (a
    mapped one's source index folded into the source offset), dimensions ordered by destination stride (largest
    first), unmapped neighbours walking memory as one merged."""
    n = len(p.sizes)
    is_copy = isinstance(p, Copy)
    src_strides = p.src_strides if is_copy else (0,) * n
    maps = (p.maps or (None,) * n) if is_copy else (None,) * n
    src_offset = p.src_offset if is_copy else 0
    dims = []
    for s, i, o, m in zip(p.sizes, src_strides, p.dst_strides, maps):
        if s == 1:
            if m is not None:
                src_offset += m.source(0) * i
            continue
        dims.append((s, i, o, m))
    dims.sort(key=lambda d: (d[2], abs(d[1])), reverse=True)
    merged: list = []
    for s, i, o, m in dims:
        if merged and m is None:
            ps, pi, po, pm = merged[-1]
            if pm is None and pi == i * s and po == o * s:
                merged[-1] = (ps * s, i, o, None)
                continue
        merged.append((s, i, o, m))
    if not merged:
        merged = [(1, 0, 0, None)]
    # A tiny innermost dimension (DEPTH_TO_SPACE's block column, say) under a long unmapped one: the long one becomes
    # the run (strided destination; the short one's rows still share cache lines), not one call per few elements.
    if len(merged) >= 2 and merged[-1][0] <= 4 and merged[-2][0] >= 4 * merged[-1][0] \
            and merged[-1][3] is None and merged[-2][3] is None:
        merged[-2], merged[-1] = merged[-1], merged[-2]
    sizes, ss, ds, ms = zip(*merged)
    return sizes, ss, ds, ms, src_offset


class IndexAxisParams(ctypes.Structure):
    """ctypes mirror of ``idx_axis`` (runtime/cpu/indexed/index.c)."""
    _fields_ = _fields("slot", "type", "offset", "stride", "bound", "mode", "out_of_range", "axis",
                       strides=i64 * MOVE_MAX_RANK)


#: index.c's IDX_MAX_AXES
INDEX_MAX_AXES = 8


class IndexParams(ctypes.Structure):
    """ctypes mirror of ``idx_params`` (runtime/cpu/indexed/index.h), same field order."""
    _fields_ = _fields("kind", "element_size", "data_type", "rank", "outer", "accumulate", "has_value",
                       value_bits=ctypes.c_uint64, src_offset=i64, dst_offset=i64,
                       **dict.fromkeys(("sizes", "src_strides", "dst_strides"), i64 * MOVE_MAX_RANK),
                       naxes=i64, axes=IndexAxisParams * INDEX_MAX_AXES)


def index_params(plan: MovePlan, p) -> IndexParams | None:
    """index.c's parameters of a ``Gather``/``Scatter`` pass of ``plan`` (what the CPU backend runs and the call cache
    records), or None where the kernel does not take it: too many dimensions or index axes, or a last-only gather (a
    gradient's: NumPy's kernel)."""
    r = len(p.sizes)
    if r > MOVE_MAX_RANK or len(p.indices) > INDEX_MAX_AXES or getattr(p, "last_only", False):
        return None
    is_scatter = type(p) is Scatter
    out_t = plan.out_types[p.dst]
    params = IndexParams(kind=int(is_scatter), element_size=DataType(out_t).size, data_type=out_t, rank=r,
                         outer=numpy_kernels.outer_count(p), src_offset=p.src_offset, dst_offset=p.dst_offset,
                         naxes=len(p.indices))
    params.sizes[:r] = p.sizes
    params.src_strides[:r] = p.src_strides
    params.dst_strides[:r] = p.dst_strides
    if is_scatter:
        params.accumulate = int(bool(p.accumulate))
        if p.value is not None:
            params.has_value = 1
            params.value_bits = _fill_bits(p.value, out_t)
    for a, ix in enumerate(p.indices):
        ax = params.axes[a]
        ax.slot, ax.type, ax.offset, ax.stride, ax.bound = (ix.index, plan.in_types[ix.index], ix.index_offset,
                                                            ix.stride, ix.bound)
        ax.mode, ax.out_of_range, ax.axis = ix.mode, ix.out_of_range, ix.axis
        ax.strides[:r] = ix.index_strides
    return params


_FILL_BITS: dict = {}


def _fill_bits(value, out_t: int) -> int:
    """A ``Fill`` pass's bits as the NumPy path converts the value (``numpy_kernels.fill_value``), remembered for plain
    ints and floats (a float by its bits: -0.0 and NaN payloads stay apart)."""
    t = type(value)
    key = (out_t, value) if t is int else (out_t, struct.pack("<d", value)) if t is float else None
    bits = _FILL_BITS.get(key) if key is not None else None
    if bits is None:
        bits = numpy_kernels.fill_bits(value, out_t)
        if key is not None:
            if len(_FILL_BITS) >= 256:
                _FILL_BITS.clear()
            _FILL_BITS[key] = bits
    return bits


def _load_native():
    try:
        from . import _native
    except ImportError:
        return None
    return _native


class _Kernel:
    """One compiled kernel with its parameter bytes and thread count."""

    __slots__ = ("kernel", "blob", "threads")

    def __init__(self, kernel, blob: bytes, threads: int):
        self.kernel, self.blob, self.threads = kernel, blob, threads

    def __call__(self, src_addr: int, dst_addr: int) -> None:
        self.kernel(dst_addr, src_addr, self.blob, self.threads)


def apply_cache_limit(cfg: Config) -> None:
    """Give the compiled kernels' output-block cache the configured limit, at once (0 frees the blocks held)."""
    mod = _load_native()
    if mod is not None:
        mod.cache_limit(cfg.output_cache_bytes if cfg.cpu_kernels == "compiled" else 0)


class CpuBackend:
    """Runs plans with one ``Config``'s settings (``opendml.configure``): the compiled kernels or NumPy, threads, and
    the output-block cache limit."""

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
        #: What calls.move_new (a new shape's C route) needs of this backend: (max threads, grain bytes, unfold tile
        #: stride, tile columns, the output size from which output blocks are used).
        self.plain_conf = (self.threads, self.grain, self.tile_stride, self.tile_columns, CACHE_MIN_BYTES)

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
        count = nbytes // element_size
        return storage[offset:offset + count * element_size].view(WORDS[element_size])

    def synchronize(self) -> None:
        pass

    def cache_info(self) -> dict:
        """The output-block cache: {'limit', 'blocks', 'bytes', 'hits', 'misses'}."""
        if self._native is None:
            return {"limit": 0, "blocks": 0, "bytes": 0, "hits": 0, "misses": 0}
        return self._native.cache_info()

    def empty(self, shape, dtype, what: str = "output") -> tuple[np.ndarray, bool]:
        """An uninitialised array for an array-API output, and whether its memory is fresh (never touched). With the
        compiled kernels, outputs of ``CACHE_MIN_BYTES`` and up come from the extension's output blocks: released
        outputs' pages are kept (up to ``cpu_output_cache``'s limit) and reused, resident, by later outputs of a
        similar size. ``alloc.AllocationError`` naming ``what`` (the operation), the shape and the bytes where the
        memory cannot be had."""
        dtype = np.dtype(dtype)
        count = math.prod(shape)
        nbytes = count * dtype.itemsize
        # Blocks only where a released one could be kept; else NumPy's allocator (glibc reuses freed memory up to
        # 32 MiB) is better.
        if self._native is not None and CACHE_MIN_BYTES <= nbytes <= self._native.cache_limit():
            block = alloc.output(what, shape, dtype, lambda *_: self._native.Block(nbytes))
            return np.frombuffer(block, dtype=dtype, count=count).reshape(shape), block.fresh
        return alloc.output(what, shape, dtype, np.empty), True

    # -- execution --------------------------------------------------------------

    def prepare(self, plan: MovePlan, srcs, dsts):
        """``Backend.prepare``: each pass through its kind's entry of ``PASSES``."""
        native = self._native is not None
        runs = []
        for p in plan.passes:
            if p.count == 0:
                continue
            entry = PASSES.get(type(p))
            if entry is None:
                raise TypeError(f"unknown pass {type(p).__name__}")
            run = entry[0](self, plan, p, srcs, dsts) if native else None
            runs.append(run if run is not None else entry[1](plan, p, srcs, dsts))
        if len(runs) == 1:
            return runs[0]

        def run():
            for r in runs:
                r()
        run.keep_alive = (srcs, dsts)
        return run

    def _native_move_pass(self, plan: MovePlan, p, srcs, dsts):
        """The compiled move kernel (move.c) for a ``Copy`` or ``Fill`` pass, its parameters packed in C
        (``move_params``), else by ``_python_move_pass``; None (NumPy runs it) for another kind or more than 16
        canonical dimensions."""
        if type(p) is not Copy and type(p) is not Fill:
            return None
        out_t = plan.out_types[p.dst]
        if type(p) is Fill:
            blob = self._native.move_params(1, 0, out_t, 0, p.dst_offset, p.sizes, None, p.dst_strides, None,
                                            None, _fill_bits(p.value, out_t))
        else:
            maps = None if p.maps is None else tuple(None if m is None else (m.mode, m.shift, m.size)
                                                     for m in p.maps)
            blob = self._native.move_params(0, plan.in_types[p.src], out_t, p.src_offset, p.dst_offset, p.sizes,
                                            p.src_strides, p.dst_strides, maps, p.scale_bias, 0)
        if blob is None:
            return CpuBackend._python_move_pass(self, plan, p, srcs, dsts)   # (self may be planner._Capture)
        return CpuBackend._move_launch(self, blob, p, srcs, dsts[p.dst])

    def _python_move_pass(self, plan: MovePlan, p, srcs, dsts):
        """``_native_move_pass``'s parameters built in Python (canonical_move_pass, MoveParams)."""
        sizes, ss, ds, maps, src_offset = canonical_move_pass(p)
        r = len(sizes)
        if r > MOVE_MAX_RANK:
            return None
        out_t = plan.out_types[p.dst]
        params = MoveParams(rank=r, dst_type=out_t, dst_offset=p.dst_offset)
        params.sizes[:r] = sizes
        params.dst_strides[:r] = ds
        if isinstance(p, Fill):
            params.kind = 1
            params.src_type = out_t
            params.fill_bits = _fill_bits(p.value, out_t)
        else:
            params.kind = 0
            params.src_type = plan.in_types[p.src]
            params.src_offset = src_offset
            params.src_strides[:r] = ss
            for k, m in enumerate(maps):
                if m is not None:
                    params.map_mode[k], params.map_shift[k], params.map_size[k] = m.mode, m.shift, m.size
            if p.scale_bias is not None:
                params.has_scale_bias = 1
                params.scale, params.bias = float(p.scale_bias[0]), float(p.scale_bias[1])
        return CpuBackend._move_launch(self, params, p, srcs, dsts[p.dst])

    def _move_launch(self, params, p, srcs, dst):
        """The move kernel's run of pass ``p`` (a Fill reads nothing: its source is ``dst``), its threads by the
        bytes it moves."""
        if isinstance(p, Fill):
            return self._launch(self._native.move, params, dst, dst, p.count * dst.itemsize)
        src = srcs[p.src]
        return self._launch(self._native.move, params, src, dst, p.count * (src.itemsize + dst.itemsize))

    def _index_pass(self, plan: MovePlan, p, srcs, dsts):
        """A compiled ``Gather``/``Scatter`` pass (index.c, one thread: a scatter
        writes in row-major order), or None (NumPy runs it)."""
        run_pass = self._native.index_run_pass
        params = index_params(plan, p)
        if params is None:
            return None                   # (a last-only gather, a gradient's: NumPy's kernel)
        dst = dsts[p.dst]
        src = dst if params.has_value else srcs[p.src]
        idx = [srcs[ix.index] for ix in p.indices]
        if not all(a.flags.aligned for a in (src, *idx)):
            return None                   # (misaligned words, which index.c's typed loads cannot read: NumPy's)
        args = (bytes(params), src.ctypes.data, src.shape[0], dst.ctypes.data, dst.shape[0],
                tuple(a.ctypes.data for a in idx), tuple(a.shape[0] for a in idx))

        def run():
            run_pass(*args)
        run.keep_alive = (src, dst, idx)
        return run

    def runner(self, plan: MovePlan):
        """A reusable ``run(src_addr, dst_addr)`` for a plan of one tuned pass (``MovePlan.kernel_plan``) with the
        compiled kernels; else None."""
        if self._native is None or plan.kernel_plan() is None:
            return None
        p = plan.passes[0]
        return PASSES[type(p)][0](self, plan, p, None, None)

    def _launch(self, kernel, params, src, dst, nbytes: int):
        """The callable running one compiled kernel on ``src``/``dst`` (both None:
        a ``_Kernel`` taking the addresses at each call)."""
        k = _Kernel(kernel, bytes(params), self._threads(nbytes))
        if src is None:
            return k
        d_addr, s_addr = dst.ctypes.data, src.ctypes.data

        def run():
            k(s_addr, d_addr)
        run.keep_alive = (src, dst)  # the addresses stay valid while the closure lives
        return run

    def _copy_pass(self, plan: MovePlan, p, srcs, dsts):
        """A plan of one plain ``Copy`` (SLICE's, SLICE1's) of at most ``MAX_RANK`` canonical dimensions runs the
        strided-copy kernel (copy.c); any other copy the move kernel (none for ``runner``)."""
        k = plan.kernel_plan()
        if k is not None and (len(k.sizes) <= MAX_RANK or len(k.canonical().sizes) <= MAX_RANK):
            return self._native_copy(k, None, None) if srcs is None else self._native_copy(k, srcs[p.src], dsts[p.dst])
        return None if srcs is None else self._native_move_pass(plan, p, srcs, dsts)

    def _native_copy(self, plan: CopyPlan, src, dst):
        blob = self._native.copy_params(plan.element_size, plan.sizes, plan.in_offset, plan.in_strides,
                                        plan.out_offset, plan.out_strides)
        if blob is None:                  # not plain 64-bit tuples: packed here
            blob = bytes(copy_params(plan.canonical()))
        count = _COUNT.unpack_from(blob, 16)[0]
        return self._launch(self._native.copy, blob, src, dst, 2 * count * plan.element_size)

    def _native_windows(self, plan: UnfoldPlan, src, dst):
        inner_step = abs(plan.strides[-1] * plan.in_strides[-1]) * plan.element_size
        tiles = 1 if inner_step > self.tile_stride and math.prod(plan.window) > 1 else 0
        params = unfold_params(plan, column_tiles=tiles, tile_columns=self.tile_columns)
        return self._launch(self._native.windows, params, src, dst, plan.out_count * plan.element_size)

    def _native_window_sums(self, plan: FoldPlan, src, dst):
        numpy_kernels.fold_types(plan)            # a summable type, or ValueError
        reads = plan.batch * plan.rows * plan.columns
        return self._launch(self._native.window_sums, fold_params(plan), src, dst,
                            (plan.out_count + reads) * plan.element_size)

    def _native_scatter(self, plan: ScatterPlan, src, dst):
        p = plan.canonical(cpu=True)
        return self._launch(self._native.scatter, scatter_params(p), src, dst,
                            (p.count + math.prod(p.taken)) * p.element_size)


_COUNT = struct.Struct("<q")            # odml_copy_params' count, its third field (at byte 16)


def _tuned(kernel):
    """A tuned pass's preparer: ``kernel(backend, plan, source range, destination range)`` on the pass's ``plan``."""
    def prepare(backend, plan, p, srcs, dsts):       # (no srcs/dsts: runner's address-free kernel)
        return kernel(backend, p.plan, None, None) if srcs is None else \
            kernel(backend, p.plan, srcs[p.src], dsts[p.dst])
    return prepare


#: pass type -> (compiled preparer ``(backend, plan, pass, srcs, dsts)`` or None, NumPy preparer).
PASSES = {
    Copy: (CpuBackend._copy_pass, numpy_kernels.prepare_copy_pass),
    Fill: (CpuBackend._native_move_pass, numpy_kernels.prepare_fill_pass),
    # (looked up at each call: a test may replace the method with a model of another backend's kernels)
    Gather: (lambda *a: CpuBackend._index_pass(*a), numpy_kernels.prepare_gather_pass),
    Scatter: (lambda *a: CpuBackend._index_pass(*a), numpy_kernels.prepare_scatter_pass),
    Windows: (_tuned(CpuBackend._native_windows), numpy_kernels.tuned(numpy_kernels.prepare_unfold)),
    WindowSums: (_tuned(CpuBackend._native_window_sums), numpy_kernels.tuned(numpy_kernels.prepare_fold)),
    SliceScatter: (_tuned(CpuBackend._native_scatter), numpy_kernels.tuned(numpy_kernels.prepare_scatter)),
}
