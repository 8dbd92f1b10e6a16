"""The CPU backend's NumPy path: every pass kind of the move program through strided views of the bound word arrays,
the same bytes as the compiled kernels (used where they were not built, or with ``configure(cpu_kernels="numpy")``).
Each ``prepare_*`` builds its views once and returns a callable replaying them. Views never carry a stride for a
dimension of size 1 and positions are Python integers, so any valid plan is representable. UNFOLD and FOLD take one
view per combination of "looped" indices, looping over the smaller of window and blocks per axis (at most
prod(min(window, blocks)) views).
"""
from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...model.data_type import DataType
from ...plan import INDEX_REVERSE_LENGTH, INDEX_SKIP, FoldPlan, Scatter, ScatterPlan, UnfoldPlan, _span
from .. import alloc
from ..params import SUM_FLOAT, SUM_INTEGER

#: The float type of each element size, for FOLD's SUM_FLOAT.
FLOATS = {2: np.dtype(np.float16), 4: np.dtype(np.float32), 8: np.dtype(np.float64)}
#: FOLD's one NaN per accumulator size (quiet, sign +, payload 0; kernels.cu's SumOf says why): float32 0x7FC00000
#: (stored as float16 0x7E00), float64 0x7FF8000000000000.
CANONICAL_NAN = {4: np.uint32(0x7FC00000).view(np.float32), 8: np.uint64(0x7FF8000000000000).view(np.float64)}


def view(flat: np.ndarray, offset: int, sizes, strides) -> np.ndarray:
    """Element view of 1-D ``flat`` at element ``offset``, sizes and strides in elements (a size-1 or empty dimension
    gets stride 0)."""
    item = flat.itemsize
    sizes = tuple(sizes)
    if 0 in sizes:
        return flat[:0].reshape(sizes)
    return as_strided(flat[offset:], shape=sizes,
                      strides=tuple(t * item if s > 1 else 0 for s, t in zip(sizes, strides)))


# -- window operators --------------------------------------------------------------

def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _axis_pieces(size, window, stride, dilation, pad, blocks, blocks_first: bool):
    """The views' pieces along one spatial dimension (image size ``size``).

    Yields ``(k, b, free, lo, hi, count)``: k fixed (an int), b None and ``free`` "b": the blocks ``[lo, hi)`` of
    ``count`` (image position ``b*stride + k*dilation - pad``); or b fixed, k None and ``free`` "k": the window
    indices ``[lo, hi)`` of ``count``. Empty pieces (lo == hi) are yielded too, for UNFOLD's zero fill. Fixed k come in
    increasing order; fixed b in decreasing order where ``blocks_first`` (each image position's window index then
    increases from piece to piece, as FOLD's sum needs)."""
    if window <= blocks:
        for k in range(window):
            shift = k * dilation - pad          # position of block 0
            lo = min(blocks, max(0, _ceil_div(-shift, stride)))
            hi = min(blocks, max(lo, _ceil_div(size - shift, stride)))
            yield k, None, "b", lo, hi, blocks
    else:
        order = range(blocks - 1, -1, -1) if blocks_first else range(blocks)
        for b in order:
            shift = b * stride - pad            # position of window element 0
            lo = min(window, max(0, _ceil_div(-shift, dilation)))
            hi = min(window, max(lo, _ceil_div(size - shift, dilation)))
            yield None, b, "k", lo, hi, window


def _window_views(plan, blocks_first=False):
    """Every combination of an UnfoldPlan's or FoldPlan's pieces (``_axis_pieces`` per dimension, lexicographic)."""
    per_dim = [list(_axis_pieces(*args, blocks_first)) for args in
               zip(plan.spatial, plan.window, plan.strides, plan.dilations, plan.start_padding, plan.blocks)]
    return itertools.product(*per_dim)


def _image_walk(plan, pieces, strides) -> tuple[int, list]:
    """The image offset (``strides``: the image's, per spatial dimension) of the pieces' first valid elements, and the
    step along each free axis."""
    base, steps = 0, []
    for d, (k, b, free, lo, _, _) in enumerate(pieces):
        stride, dilation = plan.strides[d], plan.dilations[d]
        if free == "b":
            pos, step = lo * stride + k * dilation, stride
        else:
            pos, step = b * stride + lo * dilation, dilation
        base += (pos - plan.start_padding[d]) * strides[d]
        steps.append(step * strides[d])
    return base, steps


def _column_walk(pieces, row_strides, col_strides) -> tuple[int, list]:
    """The offset in the columns (N, C*K, B) of the pieces' fixed window or
    block indices (``row_strides``: a window index's step per spatial
    dimension, ``col_strides`` a block index's), and the step along each free
    axis."""
    base, steps = 0, []
    for d, (k, b, free, _, _, _) in enumerate(pieces):
        base += k * row_strides[d] if free == "b" else b * col_strides[d]
        steps.append(col_strides[d] if free == "b" else row_strides[d])
    return base, steps


def prepare_unfold(plan: UnfoldPlan, src, dst):
    """Per combination of pieces, an output slab (N, C, one free axis per dimension): its padding strips zeroed, then
    its box of valid positions copied from the input (no padded copy of the input)."""
    D = len(plan.window)
    K = math.prod(plan.window)
    on, orow, ocol = plan.out_strides
    row_strides = [orow * math.prod(plan.window[d + 1:]) for d in range(D)]
    col_strides = [ocol * math.prod(plan.blocks[d + 1:]) for d in range(D)]
    n_s, c_s, *sp_s = plan.in_strides
    copies, zeros = [], []
    for pieces in _window_views(plan):
        base, free_strides = _column_walk(pieces, row_strides, col_strides)
        base += plan.out_offset
        out_sizes = [plan.batch, plan.channels, *(count for *_, count in pieces)]
        out_strides = [on, orow * K, *free_strides]
        if any(hi <= lo for _, _, _, lo, hi, _ in pieces):
            zeros.append(view(dst, base, out_sizes, out_strides))
            continue
        for d, (_, _, _, lo, hi, count) in enumerate(pieces):
            for a, e in ((0, lo), (hi, count)):
                if e > a:
                    sizes = list(out_sizes)
                    sizes[2 + d] = e - a
                    zeros.append(view(dst, base + a * free_strides[d], sizes, out_strides))
        sizes = (plan.batch, plan.channels, *(hi - lo for _, _, _, lo, hi, _ in pieces))
        out_base = base + sum(piece[3] * fs for piece, fs in zip(pieces, free_strides))
        in_base, in_steps = _image_walk(plan, pieces, sp_s)
        copies.append((view(dst, out_base, sizes, out_strides),
                       view(src, plan.in_offset + in_base, sizes, (n_s, c_s, *in_steps))))

    return _zero_then_copy(zeros, copies)


def fold_types(plan: FoldPlan) -> tuple[np.dtype, np.dtype]:
    """(element dtype to view the words as, accumulator dtype)."""
    es = plan.element_size
    if plan.sum_kind == SUM_INTEGER and es in (1, 2, 4, 8):
        word = np.dtype(f"u{es}")
        return word, word                      # unsigned words: sums wrap, any signedness
    if plan.sum_kind == SUM_FLOAT and es in FLOATS:
        t = FLOATS[es]
        return t, (np.dtype(np.float32) if es == 2 else t)
    raise ValueError(f"FoldPlan: sum_kind {plan.sum_kind} with element_size {es} is not a summable type")


def prepare_fold(plan: FoldPlan, src, dst):
    """FOLD as a gather: an accumulator image of zeros (float32 for float16, unsigned words for integers), then, window
    index by window index in increasing order, the strided view of the blocks landing inside the image added into the
    matching image positions; then one cast (float16: rounded once) into the output."""
    elem, acc_type = fold_types(plan)
    D = len(plan.window)
    N, C = plan.batch, plan.channels
    K = math.prod(plan.window)
    in_n, in_row, in_col = plan.in_strides
    row_strides = [in_row * math.prod(plan.window[d + 1:]) for d in range(D)]
    col_strides = [in_col * math.prod(plan.blocks[d + 1:]) for d in range(D)]
    acc_strides = [math.prod(plan.spatial[d + 1:]) for d in range(D)]
    src_e = src.view(elem)
    out = view(dst.view(elem), plan.out_offset, (N, C, *plan.spatial), plan.out_strides)
    adds = []
    if plan.out_count and all(plan.blocks):
        for pieces in _window_views(plan, blocks_first=True):
            if any(hi <= lo for _, _, _, lo, hi, _ in pieces):
                continue
            in_base, in_free = _column_walk(pieces, row_strides, col_strides)
            in_base += plan.in_offset + sum(piece[3] * fs for piece, fs in zip(pieces, in_free))
            acc_base, acc_free = _image_walk(plan, pieces, acc_strides)
            sizes = (N, C, *(hi - lo for _, _, _, lo, hi, _ in pieces))
            adds.append((acc_base, sizes, acc_free, view(src_e, in_base, sizes, (in_n, in_row * K, *in_free))))
    acc_shape = (N, C, *plan.spatial)
    acc_n, acc_c = C * math.prod(plan.spatial), math.prod(plan.spatial)
    floats = plan.sum_kind == SUM_FLOAT
    what = type(plan).__name__.removesuffix("Plan").upper()      # the operator, for an AllocationError

    def run():
        acc = alloc.output(what, acc_shape, acc_type, np.zeros, part="the sums")
        flat = acc.reshape(-1)
        with np.errstate(over="ignore", invalid="ignore"):   # IEEE results, as in the compiled kernels
            for base, sizes, strides, s in adds:
                a = view(flat, base, sizes, (acc_n, acc_c, *strides))
                np.add(a, s, out=a)
            if floats:
                # Every NaN sum becomes CANONICAL_NAN, as the C and CUDA kernels store it.
                nan = np.isnan(acc)
                if nan.any():
                    acc[nan] = CANONICAL_NAN[acc_type.itemsize]
            np.copyto(out, acc, casting="unsafe")   # float32 -> float16: NumPy's rounding, once
    return run


# -- SLICE_GRAD --------------------------------------------------------------------

def prepare_scatter(plan: ScatterPlan, src, dst):
    """The whole output zeroed, then the covered positions (``first + i*step``,
    ``i < taken``, in every dimension) copied from the input: one view each
    (2-4x faster than zeroing only the uncovered boxes view by view where the
    window steps, about 10% slower for a dense window; where output elements
    share memory the copy wins)."""
    p = plan.canonical(cpu=True)
    copies = []
    if all(p.taken):
        base = p.out_offset + sum(f * o for f, o in zip(p.first, p.out_strides))
        copies.append((view(dst, base, p.taken, [s * o for s, o in zip(p.step, p.out_strides)]),
                       view(src, p.in_offset, p.taken, p.in_strides)))
    return _zero_then_copy([view(dst, p.out_offset, p.sizes, p.out_strides)], copies)


def _zero_then_copy(zeros, copies):
    """A callable zero-filling the views ``zeros``, then copying each (destination, source) pair of ``copies``."""
    def run():
        for z in zeros:
            z.fill(0)
        for d, s in copies:
            np.copyto(d, s, casting="no")
    return run


# -- the move program (data-movement family) ----------------------------------------

def _dtype(type_value: int) -> np.dtype:
    return DataType(type_value).numpy_dtype


def convert_array(x: np.ndarray, dst: np.dtype) -> np.ndarray:
    """``x`` converted to ``dst`` by CAST's rules (``ops/cast.py``): float to integer truncates toward zero and
    saturates, NaN -> 0; integer to integer wraps; the rest rounds to nearest (NumPy's casts)."""
    dst = np.dtype(dst)
    if x.dtype == dst:
        return x
    with np.errstate(all="ignore"):
        if x.dtype.kind == "f" and dst.kind in "iu":
            info = np.iinfo(dst)
            t = np.trunc(x.astype(np.float64))
            hi = t >= float(info.max) + 1.0        # max + 1 is a power of two: exact in float64
            lo = t < float(info.min)
            nan = np.isnan(t)
            out = np.where(hi | lo | nan, 0.0, t).astype(dst)
            out[hi] = info.max
            out[lo] = info.min
            return out
        return x.astype(dst)


def _typed(flat: np.ndarray, type_value: int) -> np.ndarray:
    return flat.view(_dtype(type_value))


def fill_value(value, type_value: int):
    """A ``Fill`` pass's value as a NumPy scalar of the destination's type (the bits both CPU paths write)."""
    return convert_array(np.array([value]), _dtype(type_value))[0]


def fill_bits(value, type_value: int) -> int:
    """``fill_value``'s bits, an unsigned integer: the word the kernels store."""
    v = fill_value(value, type_value)
    return int(v.view(f"u{v.itemsize}"))


def _grid(offset: int, sizes, strides) -> np.ndarray:
    """The element offsets ``offset + sum(d*strides)`` over ``sizes``: an int64 array of that shape (Python integers
    first: no wrap)."""
    out = np.full(tuple(sizes), offset, dtype=np.int64)
    r = len(sizes)
    for k, (n, t) in enumerate(zip(sizes, strides)):
        if n > 1 and t:
            shape = [1] * r
            shape[k] = n
            out += (np.arange(n, dtype=np.int64) * t).reshape(shape)
    return out


def index_coordinates(ix, index_words: np.ndarray, index_type: int, sizes):
    """The coordinates an ``IndexAxis`` gives over ``sizes``: ``(c, valid)``, c an int64 array in ``[0, bound)``,
    valid the mask of positions whose value was in range (None: all, or the axis clamps). Values compare exactly:
    unsigned as uint64, signed as int64."""
    v = view(_typed(index_words, index_type), ix.index_offset, sizes, ix.index_strides)
    bound = ix.bound
    signed = v.dtype.kind == "i"
    if ix.mode == INDEX_REVERSE_LENGTH:
        if signed:
            length = np.clip(v.astype(np.int64), 0, bound)
        else:
            length = np.minimum(v.astype(np.uint64), np.uint64(bound)).astype(np.int64)
        shape = [1] * len(sizes)
        shape[ix.axis] = sizes[ix.axis]
        e = np.arange(sizes[ix.axis], dtype=np.int64).reshape(shape)
        return np.where(e < length, length - 1 - e, e), None
    if signed:
        w = v.astype(np.int64)
        w = np.where(w < 0, w + bound, w)          # w >= INT64_MIN, bound > 0: no overflow
        valid = (w >= 0) & (w < bound)
        c = np.clip(w, 0, bound - 1)
    else:
        w = v.astype(np.uint64)
        valid = w < np.uint64(bound)
        c = np.minimum(w, np.uint64(bound - 1)).astype(np.int64)
    return c, (valid if ix.out_of_range == INDEX_SKIP else None)


def outer_count(p) -> int:
    """How many leading dimensions of an indexed pass are "outer": the rest
    read no index, so each outer position moves one block of them. A
    ``Scatter`` whose inner block reaches an element twice has every
    dimension outer, so the last write (or add) in row-major order wins."""
    k = len(p.sizes)
    while k > 0:
        d = k - 1
        if any((ix.index_strides[d] and p.sizes[d] > 1) or (ix.mode == INDEX_REVERSE_LENGTH and ix.axis == d)
               for ix in p.indices):
            break
        k -= 1
    if isinstance(p, Scatter) and not _distinct(p.sizes[k:], p.dst_strides[k:]):
        return len(p.sizes)
    return k


def _distinct(sizes, strides) -> bool:
    """Whether the positions of ``sizes`` reach distinct elements through ``strides``: ordered by stride magnitude,
    each dimension of more than one position strides past the span of the ones before it."""
    span = 0
    for n, t in sorted(((n, abs(t)) for n, t in zip(sizes, strides) if n > 1), key=lambda d: d[1]):
        if t <= span:
            return False
        span += (n - 1) * t
    return True


def _indexed_offsets(plan, p, srcs, offset, strides, k):
    """The data offsets (int64) of an indexed pass over its first ``k`` dimensions, and the mask of the positions
    written (None: all)."""
    outer = p.sizes[:k]
    off = _grid(offset, outer, strides[:k])
    keep = None
    for ix in p.indices:
        ix = dataclasses.replace(ix, index_strides=ix.index_strides[:k])
        c, valid = index_coordinates(ix, srcs[ix.index], plan.in_types[ix.index], outer)
        off += c * ix.stride
        if valid is not None:
            keep = valid if keep is None else keep & valid
    return off, keep


def _blocks(flat: np.ndarray, sizes, strides):
    """``(V, lo)``: a view of 1-D ``flat`` whose row r is the block of ``sizes``/``strides`` (the pass's inner
    dimensions) with its origin at element ``r - lo``; its rows are exactly the blocks inside ``flat``, so NumPy
    raises for a row outside."""
    lo, hi = _span(0, sizes, strides)
    rows = flat.shape[0] - (hi - lo)
    item = flat.itemsize
    if rows <= 0:
        return flat[:0].reshape((0,) + tuple(sizes)), lo
    return as_strided(flat[-lo:], shape=(rows,) + tuple(sizes),
                      strides=(item,) + tuple(t * item if n > 1 else 0 for n, t in zip(sizes, strides))), lo


def prepare_gather_pass(plan, p, srcs, dsts):
    """A ``Gather`` pass: the outer positions' source offsets from the index tensors, then one bounds-checked fancy
    index of a view of the source's blocks (the inner dimensions)."""
    k = outer_count(p)

    def run():
        off, _ = _indexed_offsets(plan, p, srcs, p.src_offset, p.src_strides, k)
        d = view(dsts[p.dst], p.dst_offset, p.sizes, p.dst_strides)
        if k == len(p.sizes) and not p.last_only:     # one element per position
            d[...] = np.take(srcs[p.src], off)
            return
        blocks, lo = _blocks(srcs[p.src], p.sizes[k:], p.src_strides[k:])
        got = blocks[off + lo]
        if p.last_only and off.size:
            rows = off.reshape(-1)
            _, first = np.unique(rows[::-1], return_index=True)
            last = np.zeros(rows.shape, bool)
            last[rows.size - 1 - first] = True
            got.reshape((-1,) + got.shape[k:])[~last] = 0
        d[...] = got
    return run


def prepare_scatter_pass(plan, p, srcs, dsts):
    """A ``Scatter`` pass: the outer positions' destination offsets from the index tensors, then bounds-checked writes
    of whole blocks (the inner dimensions) through a view of the destination's blocks. Overwriting keeps the last
    write in the pass's row-major order (each destination block written once, from the last source position reaching
    it); accumulating adds in that order (``np.add.at``, unbuffered and sequential)."""
    out_t = plan.out_types[p.dst]
    k = outer_count(p)
    inner = p.sizes[k:]
    constant = None if p.value is None else fill_value(p.value, out_t)

    def run():
        off, keep = _indexed_offsets(plan, p, srcs, p.dst_offset, p.dst_strides, k)
        dst = _typed(dsts[p.dst], out_t)
        blocks, lo = _blocks(dst, inner, p.dst_strides[k:])
        rows = (off + lo).reshape(-1)
        if keep is not None:
            rows = rows[keep.reshape(-1)]
        if constant is not None:
            blocks[rows] = constant
            return
        vals = view(_typed(srcs[p.src], out_t), p.src_offset, p.sizes, p.src_strides).reshape((-1,) + tuple(inner))
        if keep is not None:
            vals = vals[keep.reshape(-1)]
        if p.accumulate:
            with np.errstate(all="ignore"):
                np.add.at(blocks, rows, vals)
            return
        if rows.size and np.bincount(rows, minlength=blocks.shape[0]).max() > 1:
            # repeated positions: each written once, from the last source reaching it
            last, first = np.unique(rows[::-1], return_index=True)
            blocks[last] = vals[::-1][first]
        else:
            blocks[rows] = vals
    return run


def tuned(prepare):
    """A tuned pass's NumPy preparer: ``prepare(plan, source words, destination words)`` on the pass's ``plan``."""
    def prepare_pass(plan, p, srcs, dsts):
        return prepare(p.plan, srcs[p.src], dsts[p.dst])
    return prepare_pass


def prepare_fill_pass(plan, p, srcs, dsts):
    """A ``Fill`` pass: the value, of the destination's type, over a view."""
    out_t = plan.out_types[p.dst]
    dst_view = view(_typed(dsts[p.dst], out_t), p.dst_offset, p.sizes, p.dst_strides)
    value = fill_value(p.value, out_t)

    def fill():
        dst_view[...] = value
    return fill


def prepare_copy_pass(plan, p, srcs, dsts):
    """A ``Copy`` pass: one plain copy (``kernel_plan``) as words, canonical; any other through typed views, index
    maps (``np.take``), scale/bias and conversion."""
    k = plan.kernel_plan()
    if k is not None:
        k = k.canonical()
        s = view(srcs[p.src], k.in_offset, k.sizes, k.in_strides)
        d = view(dsts[p.dst], k.out_offset, k.sizes, k.out_strides)

        def copy_words():
            np.copyto(d, s, casting="no")
        return copy_words
    out_t = plan.out_types[p.dst]
    dst_view = view(_typed(dsts[p.dst], out_t), p.dst_offset, p.sizes, p.dst_strides)
    in_t = plan.in_types[p.src]
    maps = p.maps or (None,) * len(p.sizes)
    extent = tuple(m.size if m is not None else s for s, m in zip(p.sizes, maps))
    src_view = view(_typed(srcs[p.src], in_t), p.src_offset, extent, p.src_strides)
    indices = [(k, np.fromiter((m.source(d) for d in range(n)), dtype=np.intp, count=n))
               for k, (n, m) in enumerate(zip(p.sizes, maps)) if m is not None]
    sb = p.scale_bias
    out_dt = _dtype(out_t)

    def copy():
        x = src_view
        for k, idx in indices:
            x = np.take(x, idx, axis=k)
        if sb is not None:
            ct = np.float64 if x.dtype == np.float64 else np.float32
            with np.errstate(all="ignore"):
                y = x.astype(ct) * ct(sb[0])
                y = y + ct(sb[1])
            # A NaN result is the canonical NaN, for prepare_fold's reason.
            nan = np.isnan(y)
            if nan.any():
                y[nan] = CANONICAL_NAN[y.dtype.itemsize]
            x = y
        if x.dtype == out_dt and sb is None:
            np.copyto(dst_view, x, casting="no")
        else:
            np.copyto(dst_view, convert_array(x, out_dt), casting="unsafe")
    return copy
