"""Dask arrays: every operator chunk by chunk.

The array functions (``opendml.slice``, ``unfold``, ``pad``...) on a ``dask.array.Array`` (NumPy or CuPy chunks)
come here (``run``) and return a lazy ``dask.array.Array`` whose chunks come from opendml's own array functions run
inside the tasks. The call is validated on the whole arrays when the graph is built, by the descriptions the
in-memory calls use, so a bad argument raises its ``opendml.DmlError`` before anything is computed. Every result
equals the in-memory call on the whole array bit for bit. How the work is cut is the operator's declared
``chunking()`` (``opendml.ops._spec``):

* SLICE, SLICE1: one task per input chunk the slice touches, running the slice on that chunk alone; untouched chunks
  are never read. The result has one chunk per touched input chunk along each axis, in output order (a negative
  stride lists them last to first).
* UNFOLD (N, C, *spatial) -> (N, C x prod(W), BlockCount): output chunks follow the input's along N, and along
  BlockCount they are slabs of the first spatial axis (a range of first-axis blocks is a contiguous range of
  columns). A block belongs to the input chunk holding the first element it reads; each task reads its blocks'
  region, the slab plus a halo of ``Dilations x (WindowSizes - 1)`` elements from the following chunks, and pads
  inside the task, so no block is lost or computed twice. A slab whose output would pass Dask's ``array.chunk-size``
  is thinned; if one block row is already too big, N is split, then the rows (whole channels, then sub-windows),
  then the columns of a block row, so output chunks never grow with the window. Chunks along C or the later spatial
  axes work (a task gathers the part of every chunk it needs), at about the cost of ``x.rechunk({1: -1, 3: -1,
  ...})``: chunk along N and the first spatial axis for the cheapest graph.
* FOLD (N, C x prod(W), BlockCount) -> (N, C, *output_sizes): slabs of the first spatial axis (and along N and C
  when needed), each computed in one task from every block that touches it, so each element's sum runs in the
  in-memory order. Slabs follow the input's column chunks where those are whole block rows, thin enough that the
  slab and the blocks it reads stay near ``array.chunk-size`` (down to one row of one channel of one item).
* SLICE_GRAD: the output (zeros of ``input_sizes``) is cut where the gradient's chunks meet and at the window's
  edges, then to Dask's ``auto`` chunk size; chunks outside the window are plain zeros.
* Every other operator (``identity``, ``cast``, ``pad``, ...): one task per block, after the inputs are rechunked
  as ``chunking()`` asks (axes in one chunk, or cut at multiples of a size: PADDING's padded axes whole,
  SPACE_TO_DEPTH's spatial axes at multiples of ``BlockSize``...; several inputs take the first one's chunks there).
  The output's chunks follow from the operator's shape rule on the blocks; SPLIT's outputs share one task per block.

Setting up workers (``OPENDML_CPU_THREADS``, ``OPENDML_CPU_CACHE_BYTES``): the user guide's Dask page. Only this
module imports Dask, when a Dask array comes in.
"""
from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
import operator

import dask
import dask.array as da
import numpy as np
from dask.array.utils import meta_from_array
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph, MaterializedLayer
from dask.utils import parse_bytes

from ..ops._spec import GATHER, SCATTER, WINDOW_SUMS, WINDOWS
from ._dispatch import front

__all__ = ["run"]


# -- arguments and validation ---------------------------------------------------

def _dtype(x) -> np.dtype:
    """The dtype opendml computes in: the in-memory calls turn big-endian input around first, so the result is in
    native (little-endian) order."""
    dt = np.dtype(x.dtype)
    return dt.newbyteorder("=") if dt.byteorder == ">" else dt


def _target_bytes() -> int:
    """Dask's ``array.chunk-size``: what one output chunk should hold at most."""
    return max(1, parse_bytes(dask.config.get("array.chunk-size")))


# -- index arithmetic -------------------------------------------------------------

def _bounds(chunks) -> list[int]:
    """Chunk boundaries along one axis: [0, c0, c0 + c1, ..., size]."""
    return list(itertools.accumulate(map(int, chunks), initial=0))


def _split(lo: int, hi: int, most: int) -> list[tuple[int, int]]:
    """[lo, hi) cut into the fewest near-equal ranges of at most ``most``."""
    count = -(-(hi - lo) // max(1, most))
    base, extra = divmod(hi - lo, count)           # the first ``extra`` ranges one longer
    edges = [lo + i * base + min(i, extra) for i in range(count + 1)]
    return list(zip(edges, edges[1:]))


def _boxes(shape, most: int) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """A row-major index space of ``shape`` cut, in order, into boxes of at most ``most`` elements (at least one), each
    a contiguous range of flat indices: fixed indices before some axis m, a range on m, whole axes after."""
    shape = tuple(shape)
    m = next(j for j in range(len(shape)) if math.prod(shape[j + 1:]) <= most)
    inner = math.prod(shape[m + 1:])
    out = []
    for prefix in itertools.product(*(range(s) for s in shape[:m])):
        for a, b in _split(0, shape[m], max(1, most // inner)):
            out.append((prefix + (a,) + (0,) * len(shape[m + 1:]),
                        tuple(p + 1 for p in prefix) + (b,) + shape[m + 1:]))
    return out


def _hits(start: int, step: int, count: int, lo: int, hi: int) -> tuple[int, int]:
    """The range [j0, j1) of j in [0, count) whose position ``start + step*j`` lies in [lo, hi) (``step`` signed,
    non-zero); empty when j1 <= j0."""
    if step > 0:
        j0, j1 = -(-(lo - start) // step), -(-(hi - start) // step)
    else:
        t = -step
        j0, j1 = (start - hi) // t + 1, (start - lo) // t + 1
    return max(0, j0), min(count, j1)


# -- graph building -----------------------------------------------------------------

class _Graph:
    """One graph layer: output tasks plus the cuts they read from the input. A task that needs part of an input
    chunk depends on a small task that cuts (and copies) that part, as ``map_overlap`` does, so across machines only
    the part travels and the chunk can be released once cut."""

    def __init__(self, name: str, source, ndim: int, dtype):
        self.name, self.source = name, source
        self.meta = meta_from_array(source, ndim=ndim, dtype=dtype)       # the output's: NumPy or CuPy
        self.bounds = [_bounds(c) for c in source.chunks]
        self.tasks: dict = {}
        self._cuts: dict = {}

    def gather(self, region) -> tuple[list, tuple[int, ...]]:
        """Keys of the pieces that make up ``region`` (one non-empty (lo, hi) per axis of the source), in row-major
        order, and their grid's shape."""
        per_axis = [[(i, max(lo, b[i]) - b[i], min(hi, b[i + 1]) - b[i], b[i + 1] - b[i])     # the chunks it meets
                     for i in range(bisect.bisect_right(b, lo) - 1, bisect.bisect_left(b, hi))]
                    for (lo, hi), b in zip(region, self.bounds)]
        keys = []
        for combo in itertools.product(*per_axis):
            index = tuple(c[0] for c in combo)
            key = (self.source.name, *index)
            if any(a != 0 or z != n for _, a, z, n in combo):
                cut = _Cut(tuple((a, z) for _, a, z, _ in combo))
                key = self._cut(key, cut)
            keys.append(key)
        return keys, tuple(len(a) for a in per_axis)

    def _cut(self, key, cut):
        found = self._cuts.get((key, cut))
        if found is None:
            found = (self.name + "-cut", len(self._cuts))
            self._cuts[(key, cut)] = found
            self.tasks[found] = (cut, key)
        return found

    def zeros(self, key, shape) -> None:
        """The task ``key``: zeros of ``shape``, made like the output."""
        self.tasks[key] = (_Zeros(tuple(shape), self.meta.dtype.str), self.meta)

    def array(self, chunks):
        graph = HighLevelGraph.from_collections(self.name, self.tasks, dependencies=[self.source])
        return da.Array(graph, self.name, chunks, meta=self.meta)


@dataclasses.dataclass(frozen=True)
class _Cut:
    """A task: the part ``ranges`` ((lo, hi) per axis) of one chunk, copied so the chunk can be released."""
    ranges: tuple[tuple[int, int], ...]

    def __call__(self, chunk):
        return chunk[tuple(np.s_[a:z] for a, z in self.ranges)].copy()


def _assemble(pieces, grid):
    """The pieces (row-major over ``grid``) joined into one array."""
    if len(pieces) == 1:
        return pieces[0]
    parts = list(pieces)
    for axis in reversed(range(len(grid))):
        n = grid[axis]
        parts = [np.concatenate(parts[i:i + n], axis=axis) for i in range(0, len(parts), n)]
    return parts[0]


@dataclasses.dataclass(frozen=True)
class _Call:
    """A task: the array API's ``function`` on one chunk (``grid`` None) or on a region's pieces joined (row-major
    over ``grid``), given ``args``."""
    function: str
    args: tuple
    grid: tuple[int, ...] | None = None

    def __call__(self, chunk):
        x = chunk if self.grid is None else _assemble(chunk, self.grid)
        return getattr(front, self.function)(x, *self.args)


@dataclasses.dataclass(frozen=True)
class _Zeros:
    """A task: zeros of ``shape``, made like ``meta`` (NumPy or CuPy)."""
    shape: tuple[int, ...]
    dtype: str

    def __call__(self, meta):
        return np.zeros_like(meta, shape=self.shape, dtype=np.dtype(self.dtype))


# -- SLICE and SLICE1 ---------------------------------------------------------------

def _gather(x, dt, desc):
    """GATHER (SLICE, SLICE1): the lattice ``desc.gather_axes()`` ((start, signed step, count) per axis) read chunk by
    chunk, each chunk's task a SLICE1 of the chunk-local window that reaches its positions."""
    axes = desc.gather_axes()
    name = f"opendml-{desc.OPERATOR.lower()}-" + tokenize(x, axes)
    per_axis = []
    for (start, step, count), b in zip(axes, (_bounds(c) for c in x.chunks)):
        pieces = []   # (input chunk, local offset of the lowest position, j0, j1), in output order
        order = range(len(b) - 1) if step > 0 else reversed(range(len(b) - 1))
        for i in order:
            j0, j1 = _hits(start, step, count, b[i], b[i + 1])
            if j1 > j0:
                low = min(start + step * j0, start + step * (j1 - 1))
                pieces.append((i, low - b[i], j0, j1))
        per_axis.append(pieces)
    g = _Graph(name, x, x.ndim, dt)
    steps = tuple(s for _, s, _ in axes)
    for out_index in itertools.product(*(range(len(p)) for p in per_axis)):
        parts = [per_axis[a][o] for a, o in enumerate(out_index)]
        counts = tuple(j1 - j0 for _, _, j0, j1 in parts)
        op = _Call("slice1", (tuple(p[1] for p in parts), tuple(abs(t) * (n - 1) + 1 for t, n in zip(steps, counts)),
                              steps))
        g.tasks[(name, *out_index)] = (op, (x.name, *(p[0] for p in parts)))
    chunks = tuple(tuple(j1 - j0 for _, _, j0, j1 in p) for p in per_axis)
    return g.array(chunks)


# -- UNFOLD ---------------------------------------------------------------------------


def _windows(x, dt, desc):
    """WINDOWS (UNFOLD): slabs of block rows, each task reading its halo."""
    d = x.ndim - 2
    W, st, dil, sp = desc.window_sizes, desc.strides, desc.dilations, desc.start_padding
    blocks = tuple(desc.blocks_per_dimension)
    n_chunks, c_total, spatial = x.chunks[0], x.shape[1], x.shape[2:]
    n_parts, row_boxes, col_boxes = _unfold_chunking(
        n_chunks, c_total, W, blocks, _bounds(x.chunks[2]), st[0], sp[0], dt.itemsize, _target_bytes())

    name = "opendml-unfold-" + tokenize(x, W, st, dil, sp, desc.end_padding, _target_bytes())
    g = _Graph(name, x, 3, dt)
    chunks = (tuple(b - a for a, b in n_parts),
              tuple((c1 - c0) * math.prod(h - l for l, h in zip(wlo, whi)) for c0, c1, wlo, whi in row_boxes),
              tuple(math.prod(h - l for l, h in zip(blo, bhi)) for blo, bhi in col_boxes))
    for (ni, (n0, n1)), (ri, (c0, c1, wlo, whi)), (ci, (blo, bhi)) in itertools.product(
            enumerate(n_parts), enumerate(row_boxes), enumerate(col_boxes)):
        out_shape = (chunks[0][ni], chunks[1][ri], chunks[2][ci])
        # Along each spatial axis the blocks [blo, bhi) read, for window offsets [wlo, whi), the padded positions
        # [first, last); the task gets the input's part of that range and pads the rest itself.
        region, pad_lo, pad_hi = [], [], []
        for j in range(d):
            first = blo[j] * st[j] - sp[j] + wlo[j] * dil[j]
            last = (bhi[j] - 1) * st[j] - sp[j] + (whi[j] - 1) * dil[j] + 1
            lo, hi = max(first, 0), min(last, spatial[j])
            region.append((lo, hi))
            pad_lo.append(lo - first)
            pad_hi.append(last - hi)
        key = (name, ni, ri, ci)
        if any(hi <= lo for lo, hi in region):       # the blocks read padding only
            g.zeros(key, out_shape)
            continue
        keys, grid = g.gather([(n0, n1), (c0, c1)] + region)
        op = _Call("unfold", (tuple(h - l for l, h in zip(wlo, whi)), st, dil, tuple(pad_lo), tuple(pad_hi)), grid)
        g.tasks[key] = (op, keys)
    return g.array(chunks)


def _unfold_chunking(n_chunks, channels, window, blocks, first_bounds, stride0, pad0, itemsize, target):
    """UNFOLD's output chunks (preferred as the module docstring says): N ranges, row boxes (c0, c1, window lo, window
    hi) and column boxes (block lo, block hi), each output chunk at most ``target`` bytes (or one element)."""
    d = len(window)
    K = math.prod(window)
    per_block_row = math.prod(blocks[1:])            # columns in one first-axis block row
    all_rows = [(0, channels, (0,) * d, tuple(window))]
    n_parts = [(a, a + n) for a, n in zip(_bounds(n_chunks), n_chunks)]
    row_bytes = per_block_row * itemsize             # one output row of one block row
    unit = max(n_chunks) * channels * K * row_bytes   # one block row, all rows, one N chunk
    if unit <= target:
        groups = _first_axis_groups(blocks[0], first_bounds, stride0, pad0)
        most = target // unit
        cols = [((a,) + (0,) * (d - 1), (b,) + blocks[1:]) for lo, hi in groups for a, b in _split(lo, hi, most)]
        return n_parts, all_rows, cols
    cols = [((b,) + (0,) * (d - 1), (b + 1,) + blocks[1:]) for b in range(blocks[0])]
    items = target // (channels * K * row_bytes)
    if items >= 1:
        return [p for a, b in n_parts for p in _split(a, b, items)], all_rows, cols
    n_parts = [(i, i + 1) for i in range(sum(n_chunks))]
    rows = target // row_bytes
    if rows >= 1:
        return n_parts, _row_boxes(channels, window, rows), cols
    cols = _boxes(blocks, max(1, target // itemsize))
    return n_parts, _row_boxes(channels, window, 1), cols


def _first_axis_groups(count, bounds, stride, pad):
    """First-axis blocks [0, count) grouped by the input chunk holding the first element each reads (padding counts
    as part of the nearest chunk)."""
    first = np.clip(np.arange(count, dtype=np.int64) * stride - pad, 0, bounds[-1] - 1)
    owner = np.searchsorted(np.asarray(bounds[1:-1], dtype=np.int64), first, side="right")
    edges = [0, *(np.flatnonzero(np.diff(owner)) + 1).tolist(), count]
    return list(zip(edges, edges[1:]))


def _row_boxes(channels, window, most):
    """UNFOLD's rows (c x prod(window) + k) cut into boxes of (channels, *window) of at most ``most`` rows: (c0, c1,
    window lo, window hi)."""
    return [(lo[0], hi[0], lo[1:], hi[1:]) for lo, hi in _boxes((channels, *window), most)]


# -- FOLD -------------------------------------------------------------------------------


def _window_sums(x, dt, desc):
    """WINDOW_SUMS (FOLD): output slabs, each summing every block that reaches it."""
    out = desc.output_tensor
    channels = out.sizes[1]
    if x.ndim > 3:                                     # leading 1s, accepted as in opendml.fold
        x = x.reshape(x.shape[-3:])
    W, st, dil, sp, ep = desc.window_sizes, desc.strides, desc.dilations, desc.start_padding, desc.end_padding
    S = tuple(out.sizes[2:])
    d = len(S)
    blocks = tuple(desc.blocks_per_dimension)
    K = math.prod(W)
    per_block_row = math.prod(blocks[1:])

    n_parts, c_parts, slabs = _fold_chunking(x.chunks[0], channels, K, S, W[0], st[0], dil[0], sp[0], blocks,
                                             _bounds(x.chunks[2]), dt.itemsize, _target_bytes())
    name = "opendml-fold-" + tokenize(x, S, W, st, dil, sp, ep, _target_bytes())
    g = _Graph(name, x, 2 + d, dt)
    ext0 = dil[0] * (W[0] - 1)
    for (ni, (n0, n1)), (ci, (c0, c1)), (si, (p0, p1)) in itertools.product(
            enumerate(n_parts), enumerate(c_parts), enumerate(slabs)):
        out_shape = (n1 - n0, c1 - c0, p1 - p0, *S[1:])
        key = (name, ni, ci, si) + (0,) * (d - 1)
        # First-axis blocks [b0, b1) that reach the slab [p0, p1). b0 may be one block early (starting at or before
        # p0 and reaching nothing in the slab) so the slab's start padding is never negative.
        a = p0 + sp[0]
        b0 = max(0, min(-(-(a - ext0) // st[0]), a // st[0]))
        b1 = min(blocks[0], (p1 - 1 + sp[0]) // st[0] + 1)
        if b1 <= b0:                                   # no block reaches the slab
            g.zeros(key, out_shape)
            continue
        span = p1 + sp[0] - b0 * st[0]                 # slab size + its start padding
        pad_hi0 = max(0, (b1 - b0 - 1) * st[0] + ext0 + 1 - span)
        keys, grid = g.gather([(n0, n1), (c0 * K, c1 * K), (b0 * per_block_row, b1 * per_block_row)])
        op = _Call("fold", ((p1 - p0, *S[1:]), W, st, dil, (a - b0 * st[0], *sp[1:]), (pad_hi0, *ep[1:])), grid)
        g.tasks[key] = (op, keys)
    chunks = (tuple(b - a for a, b in n_parts), tuple(b - a for a, b in c_parts),
              tuple(b - a for a, b in slabs), *((s,) for s in S[1:]))
    return g.array(chunks)


def _fold_chunking(n_chunks, channels, K, S, w0, stride0, dil0, pad0, blocks, col_bounds, itemsize, target):
    """FOLD's output chunks: N ranges, channel ranges and first-axis slabs, so that a task's output and the blocks it
    reads each stay near ``target`` bytes (down to one row of one channel of one item)."""
    per_block_row = math.prod(blocks[1:])
    row = math.prod(S[1:]) * itemsize                  # one output row of one channel of one item
    ext0 = dil0 * (w0 - 1)

    def cost(items, chans, rows):
        reached = (rows - 1 + ext0) // stride0 + 2       # block rows a slab of `rows` can read
        return items * chans * max(rows * row, min(reached, blocks[0]) * per_block_row * K * itemsize)

    # Slab edges where the input's column chunks start whole block rows (the positions those rows start at), as
    # UNFOLD's slabs map back.
    edges = {0, S[0]}
    for c in col_bounds[1:-1]:
        if c % per_block_row == 0:
            edges.add(min(max((c // per_block_row) * stride0 - pad0, 0), S[0]))
    edges = sorted(edges)
    groups = [(a, b) for a, b in zip(edges, edges[1:]) if b > a]
    n_parts = [(a, a + n) for a, n in zip(_bounds(n_chunks), n_chunks)]
    items, chans = max(n_chunks), channels
    rows = _largest(lambda r: cost(items, chans, r) <= target, S[0])
    if rows == 0:
        rows = 1
        items = _largest(lambda n: cost(n, chans, 1) <= target, items)
        if items == 0:
            items = 1
            chans = max(1, _largest(lambda c: cost(1, c, 1) <= target, channels))
        n_parts = [p for a, b in n_parts for p in _split(a, b, items)]
    c_parts = _split(0, channels, chans)
    slabs = [s for a, b in groups for s in _split(a, b, rows)]
    return n_parts, c_parts, slabs


def _largest(ok, most: int) -> int:
    """The largest n in [1, most] with ok(n) (ok is monotone), or 0."""
    return bisect.bisect_left(range(1, most + 1), True, key=lambda n: not ok(n))


# -- SLICE_GRAD ---------------------------------------------------------------------------


def _scatter(grad, dt, desc):
    """SCATTER (SLICE_GRAD): zeros with the input written on the lattice ``desc.scatter_axes()``."""
    offsets, sizes, steps = desc.input_window_offsets, desc.input_window_sizes, desc.input_window_strides
    S = tuple(desc.output_tensor.sizes)
    starts = [start for start, _, _ in desc.scatter_axes()]

    # Cut each axis where the window starts and ends and where two gradient chunks meet, then to Dask's auto chunk
    # length along that axis.
    target = _target_bytes()
    previous = tuple(min(s, max(c) * abs(t)) for s, c, t in zip(S, grad.chunks, steps))
    auto = da.core.normalize_chunks("auto", shape=S, limit=target, dtype=dt, previous_chunks=previous)
    per_axis = []
    for s, start, t, n, chunks, longest in zip(S, starts, steps, grad.shape, grad.chunks, (max(c) for c in auto)):
        ends = (start, start + t * (n - 1))
        edges = {0, s, min(ends), max(ends) + 1}
        for j in _bounds(chunks)[1:-1]:
            edges.add(start + t * j if t > 0 else start + t * j + 1)
        edges = sorted(edges)
        per_axis.append([r for a, b in zip(edges, edges[1:]) for r in _split(a, b, longest)])

    name = "opendml-slice-grad-" + tokenize(grad, S, offsets, sizes, steps, target)
    g = _Graph(name, grad, len(S), dt)
    for out_index in itertools.product(*(range(len(p)) for p in per_axis)):
        ranges = [per_axis[a][i] for a, i in enumerate(out_index)]
        shape = tuple(b - a for a, b in ranges)
        hits = [_hits(start, t, n, a, b) for (a, b), start, t, n in zip(ranges, starts, steps, grad.shape)]
        key = (name, *out_index)
        if any(j1 <= j0 for j0, j1 in hits):           # nothing of the window lands here
            g.zeros(key, shape)
            continue
        local = tuple(min(start + t * j0, start + t * (j1 - 1)) - a
                      for (a, _), start, t, (j0, j1) in zip(ranges, starts, steps, hits))
        keys, grid_shape = g.gather(hits)
        op = _Call("slice_grad", (shape, local, tuple(abs(t) * (j1 - j0 - 1) + 1 for t, (j0, j1) in zip(steps, hits)),
                                  tuple(steps)), grid_shape)
        g.tasks[key] = (op, keys)
    return g.array(tuple(tuple(b - a for a, b in p) for p in per_axis))


# -- blockwise: every other operator ---------------------------------------------

def _aligned(chunks: tuple, m: int) -> tuple:
    """``chunks`` with every boundary moved down to a multiple of ``m`` (the total kept)."""
    edges = [0]
    for at in itertools.accumulate(chunks[:-1]):
        if at - at % m > edges[-1]:
            edges.append(at - at % m)
    edges.append(sum(chunks))
    return tuple(b - a for a, b in zip(edges, edges[1:]))


def _run_block(call, index, *blocks):
    outs = front.run_list(call, blocks)
    return outs if index is None else outs[index]


def _without_empty_chunks(x):
    """``x`` rechunked without its chunks of size 0 (the same array and graph where it has none)."""
    chunks = getattr(x, "chunks", None)
    if chunks is None or all(all(c) for c in chunks):
        return x
    return x.rechunk(tuple(tuple(n for n in c if n) or c for c in chunks))


def run(call, arrays) -> list:
    """The adapter's one route: ``call`` (a ``Call`` of the array API) on Dask arrays, validated on the whole arrays'
    shapes, then built lazily by the builder of the operator's declared ``chunking()``: a kind's (``_BUILDERS``),
    else ``_blockwise`` (a dict of axes; the contract's checks refused unknown chunk sizes before). Chunks of size 0
    (a boolean mask's result holds them) are merged away first: every builder describes its blocks, and DirectML's
    sizes are >= 1 (an axis of size 0 was refused before)."""
    arrays = [_without_empty_chunks(x) for x in arrays]
    dtypes = [_dtype(x) for x in arrays]
    desc = call.describe_arrays(dtypes, [x.shape for x in arrays])
    rules = desc.chunking()
    if type(rules) is str:
        return [_BUILDERS[rules](arrays[0], dtypes[0], desc)]
    return _blockwise(call, desc, arrays, dtypes, rules)


_BUILDERS = {GATHER: _gather, SCATTER: _scatter, WINDOWS: _windows, WINDOW_SUMS: _window_sums}


def _blockwise(call, desc, arrays, dtypes, rules) -> list:
    """One task per block of the inputs, rechunked as ``rules`` asks (axis -> 0: one chunk, m: cut at m's multiples)."""
    first = arrays[0]
    chunks = []
    for k, c in enumerate(first.chunks):
        rule = rules.get(k)
        chunks.append(c if rule is None else (sum(c),) if rule == 0 else _aligned(c, rule))
    inputs = []
    for x in arrays:
        want = tuple((x.shape[k],) if rules.get(k) == 0 else c for k, c in enumerate(chunks))
        inputs.append(x if x.chunks == want else x.rechunk(want))
    grid = [len(c) for c in inputs[0].chunks]
    # The output's chunks: the operator's shape rule on the blocks along each axis (block i of axis k, block 0
    # of the others).
    n_out = len(desc.outputs)
    out_chunks = [[[] for _ in grid] for _ in range(n_out)]
    for k, n in enumerate(grid):
        for i in range(n):
            d = call.describe_arrays(dtypes, [tuple(c[i if j == k else 0] for j, c in enumerate(x.chunks))
                                              for x in inputs])
            for o, t in enumerate(d.outputs):
                out_chunks[o][k].append(t.sizes[k])
    token = tokenize(call.name, desc, *inputs)
    raw = f"opendml-{call.name}-{token}"
    one = n_out == 1 and not call.multi
    names = [raw] if one else [f"opendml-{call.name}-{o}-{token}" for o in range(n_out)]
    tasks: dict = {}
    picks: list = [{} for _ in names]
    for index in np.ndindex(*grid):
        tasks[(raw, *index)] = (_run_block, call, 0 if one else None, *((x.name, *index) for x in inputs))
        if not one:
            for o, name in enumerate(names):
                picks[o][(name, *index)] = (operator.getitem, (raw, *index), o)
    graph = HighLevelGraph.from_collections(raw, tasks, dependencies=inputs)
    outs = []
    for o, name in enumerate(names):
        g = graph if name == raw else HighLevelGraph({**graph.layers, name: MaterializedLayer(picks[o])},
                                                     {**graph.dependencies, name: {raw}})
        t = desc.outputs[o]
        meta = meta_from_array(first._meta, len(t.sizes), t.data_type.numpy_dtype)
        outs.append(da.Array(g, name, tuple(tuple(c) for c in out_chunks[o]), meta=meta))
    return outs
