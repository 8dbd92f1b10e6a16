"""CPU backend: plans become NumPy strided views and ``np.copyto`` calls.

Data is copied as unsigned words of the element's size, never as values, so
every bit pattern (float16 NaN payloads, negative zero) survives exactly.
Views are built once per binding (``prepare``) and replayed by ``execute``,
which keeps a dispatch to a single call per copy.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..plan import CopyPlan, UnfoldPlan

WORDS = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}
ALIGNMENT = 64


def _view(flat: np.ndarray, offset: int, sizes, strides) -> np.ndarray:
    """Element view of ``flat`` (1-D, word dtype) at element ``offset``."""
    item = flat.itemsize
    return as_strided(flat[offset:], shape=tuple(sizes), strides=tuple(t * item for t in strides))


class NumpyBackend:
    name = "cpu"

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

    # -- execution --------------------------------------------------------------
    def prepare(self, plan, src: np.ndarray, dst: np.ndarray):
        """Return a callable that runs ``plan`` from ``src`` into ``dst`` (1-D word
        arrays whose element 0 is the plan's origin)."""
        if isinstance(plan, CopyPlan):
            return _prepare_copy(plan, src, dst)
        if isinstance(plan, UnfoldPlan):
            return _prepare_unfold(plan, src, dst)
        raise TypeError(f"unknown plan {type(plan).__name__}")


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
