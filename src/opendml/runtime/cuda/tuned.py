"""The tuned launches of single-purpose passes (``kernels.cu``): each ``*_launch`` gives (kernel name, parameter
block, grid, dynamic shared memory bytes) of a plain copy (``CopyPlan``: ``strided_copy``, widened by ``word_plan``),
UNFOLD (``unfold_tile``, ``unfold1d_tile`` or ``unfold_gather``), FOLD (``fold1d_tile`` or ``fold_gather``: no
atomics, each image element's contributions summed in increasing window order, as on the CPU) or SLICE_GRAD
(``scatter``). ``runtime/native/cuda_spec.c`` mirrors these choices for the C new-shape route (``launch_spec``).
"""
from __future__ import annotations

import math

from ...model.errors import UnsupportedError
from ...plan import CopyPlan, FoldPlan, ScatterPlan, UnfoldPlan
from .. import params as P
from .launch import _SCALAR, THREADS

#: 1-D UNFOLDs whose neighbouring blocks lie this many elements apart or more in the input take unfold1d_tile.
TILE_MIN_STEP = 8
#: unfold_tile: output columns per box (one CUDA block's share), the longest box line in 2-D and up, and the shared
#: memory a box's region may use.
BOX_COLUMNS = 1024
BOX_LINE = 128
BOX_BYTES = 24 * 1024
#: 1-D FOLDs with at least this stride take fold1d_tile; the others fold_gather.
FOLD_TILE_MIN_STRIDE = 32
#: fold_gather: image positions a lane sums (V): the largest whose lanes stay this busy on the image's lines, unless
#: FOLD_LANES names one (1, 2 or 4: tests, sweeps).
FOLD_LANE_USE = 0.85
FOLD_LANES = None


def items_per_thread(word_bytes: int) -> int:
    """Words per thread of strided_copy and scatter: one 16-byte word (benchmarks/sweep_copy.py on an H200: 1 about 2%
    faster than 2, 4 or 8), else at least four words and 16 bytes in flight."""
    return 1 if word_bytes >= 16 else max(4, 16 // word_bytes)


def launch_spec(plan, src_ptr: int, src_elements: int, dst_ptr: int):
    """(kernel name, parameter block, grid, dynamic shared memory bytes) of a ``CopyPlan`` (strided_copy),
    ``UnfoldPlan``, ``FoldPlan`` or ``ScatterPlan``, as ``runtime/native/cuda_spec.c`` mirrors it."""
    return {CopyPlan: lambda: _copy_launch(plan, src_ptr, dst_ptr, src_elements),
            UnfoldPlan: lambda: _unfold_launch(plan), FoldPlan: lambda: _fold_launch(plan),
            ScatterPlan: lambda: _scatter_launch(plan, src_ptr, dst_ptr)}[type(plan)]()


def _index_type(count: int, items: int = 16) -> str:
    return "u32" if count + THREADS * items < 2**32 else "u64"


# -- SLICE, SLICE1 ------------------------------------------------------------------

def word_plan(plan: CopyPlan, src_ptr: int, dst_ptr: int, src_len: int = 0):
    """Widen the copy to the largest word (up to 16 bytes) the innermost dimension, every offset, stride and pointer
    allow; a negative innermost stride becomes a word copy with the elements reversed inside each word; a stride-2
    innermost dimension becomes 8-byte output words, each the even elements of one 16-byte input word (the returned
    plan's input offsets and strides then count 16-byte words), where the element after the plan's last read is still
    inside the ``src_len`` bound elements (the word's unused tail). Returns (output word bytes, reversed element size
    or 0, picked element size or 0, plan in words)."""
    p = plan.canonical()
    es = p.element_size
    L, inner_in, inner_out = p.sizes[-1], p.in_strides[-1], p.out_strides[-1]
    outer_ok = lambda f: all(t % f == 0 for t in p.in_strides[:-1] + p.out_strides[:-1])  # noqa: E731
    if inner_out == 1 and inner_in == 2:
        f = 8 // es                       # output elements per 8-byte word
        if (L % f == 0 and p.in_offset % (2 * f) == 0 and p.out_offset % f == 0 and src_ptr % 16 == 0
                and dst_ptr % 8 == 0 and all(t % (2 * f) == 0 for t in p.in_strides[:-1])
                and all(t % f == 0 for t in p.out_strides[:-1]) and p.in_span[1] + 1 < src_len):
            wp = CopyPlan(8, p.sizes[:-1] + (L // f,), p.in_offset // (2 * f),
                          tuple(t // (2 * f) for t in p.in_strides[:-1]) + (1,),
                          p.out_offset // f, tuple(t // f for t in p.out_strides[:-1]) + (1,))
            return 8, 0, es, wp
    if inner_out != 1 or abs(inner_in) != 1:
        return es, 0, 0, p
    low = p.in_offset - (L - 1 if inner_in < 0 else 0)  # lowest element of a run at index 0
    for w in (16, 8, 4, 2):
        f = w // es
        if f <= 1:
            break
        if (L % f == 0 and low % f == 0 and p.out_offset % f == 0 and src_ptr % w == 0 and dst_ptr % w == 0
                and outer_ok(f)):
            first = low // f if inner_in > 0 else low // f + L // f - 1
            wp = CopyPlan(w, p.sizes[:-1] + (L // f,), first, tuple(t // f for t in p.in_strides[:-1]) + (inner_in,),
                          p.out_offset // f, tuple(t // f for t in p.out_strides[:-1]) + (1,))
            return w, (es if inner_in < 0 else 0), 0, wp
    return es, 0, 0, p


def _copy_launch(plan: CopyPlan, src_ptr: int, dst_ptr: int, src_len: int):
    w, rev, pick, p = word_plan(plan, src_ptr, dst_ptr, src_len)
    count = p.count
    nd = len(p.sizes)
    items = items_per_thread(w)
    name = f"strided_copy<{_SCALAR[w]}, {nd}, {rev}, {_index_type(count, items)}, {items}, {pick}>"
    grid = (math.ceil(count / (THREADS * items)),)
    return name, P.copy_params(p), grid, 0


# -- UNFOLD -------------------------------------------------------------------------

def unfold_box(plan: UnfoldPlan, columns: int = BOX_COLUMNS, line: int = BOX_LINE, budget: int = BOX_BYTES):
    """The box of blocks (t[0], ..., t[D-1]) one CUDA block of unfold_tile writes, and the extents of the input region
    it stages, or None where staging does not pay: the region would not fit ``budget`` bytes even for one column, would
    hold over twice the elements the box writes (strides far beyond the window), or there are 2^31 boxes or more."""
    D, nb = len(plan.window), plan.blocks
    if plan.out_count == 0:
        return None
    t = [1] * D
    t[-1] = min(nb[-1], line if D > 1 else columns)
    for d in range(D - 2, -1, -1):
        t[d] = min(nb[d], max(1, -(-columns // math.prod(t[d + 1:]))))

    def extents(t):
        return [(t[d] - 1) * plan.strides[d] + (plan.window[d] - 1) * plan.dilations[d] + 1 for d in range(D)]

    while math.prod(extents(t)) * plan.element_size > budget:
        d = next((d for d in range(D) if t[d] > 1), None)
        if d is None:
            return None
        t[d] = (t[d] + 1) // 2
    ext = extents(t)
    boxes = plan.batch * plan.channels * math.prod(-(-nb[d] // t[d]) for d in range(D))
    if math.prod(ext) > 2 * math.prod(t) * math.prod(plan.window) or boxes >= 2**31:
        return None
    return tuple(t), tuple(ext)


def tile_vectors(plan: UnfoldPlan, box) -> int:
    """unfold_tile's VEC argument: 1 where a box's output columns are one contiguous run per window element, rows a
    multiple of 16 bytes apart (columns contiguous, the box spanning every dimension but the first whole), so the
    kernel can write them with 16-byte stores (it checks the run's address itself); else 0, one-element stores alone
    (a kernel without the vector path, which would cost the others registers)."""
    _, orow, ocol = plan.out_strides
    whole = all(box[d] == plan.blocks[d] for d in range(1, len(plan.window)))
    return int(ocol == 1 and orow >= 0 and orow * plan.element_size % 16 == 0 and whole)


def _unfold_launch(plan: UnfoldPlan, box=None):
    """(kernel name, parameter block, grid, dynamic shared memory bytes)."""
    es = plan.element_size
    r = 2 if es >= 2 else 1          # vectors of 16 bytes per thread
    v = 16 // es * r                 # columns per thread
    B = plan.columns
    slots = plan.batch * plan.rows * math.ceil(B / v)
    D = len(plan.window)
    sp_s = plan.in_strides[2:]
    params = P.unfold_params(plan, slots)
    tiles = plan.batch * plan.channels * math.ceil(plan.window[0] / 32) * math.ceil(B / 32)
    if D == 1 and abs(plan.strides[0] * sp_s[0]) >= TILE_MIN_STEP and plan.window[0] >= 8 and tiles < 2**31:
        index = _index_type(max(tiles, plan.batch * plan.channels * plan.window[0], B) * 32)
        return f"unfold1d_tile<{_SCALAR[es]}, {index}>", params, (tiles,), 0
    box = unfold_box(plan) if box is None else box
    if box:
        t, ext = box
        nboxes = [-(-plan.blocks[d] // t[d]) for d in range(D)]
        params.work_items = plan.batch * plan.channels * math.prod(nboxes)
        for d in range(D):
            params.dim[d].box, params.dim[d].box_extent, params.dim[d].box_count = t[d], ext[d], nboxes[d]
        return (f"unfold_tile<{_SCALAR[es]}, {D}, {tile_vectors(plan, t)}>", params, (params.work_items,),
                math.prod(ext) * es)
    name = f"unfold_gather<{_SCALAR[es]}, {D}, {_index_type(slots * v)}, {r}>"
    return name, params, (math.ceil(slots / THREADS),), 0


# -- FOLD ---------------------------------------------------------------------------

def fold_tile_residues(plan: FoldPlan) -> int:
    """fold1d_tile's residues per CUDA block (RC): 128 (H100 overlap-add, benchmarks/sweep_fold.py: 0.280 ms against
    0.297 with 256), halved while at least twice the stride, down to 32."""
    rc = 128
    while rc > 32 and rc >= 2 * plan.strides[0]:
        rc //= 2
    return rc


def fold_lanes(plan: FoldPlan) -> int:
    """fold_gather's image positions per lane (V): the largest of 4, 2, 1 whose warps' runs of 32*V positions keep
    FOLD_LANE_USE of an image line's lanes busy."""
    width = plan.spatial[-1]
    for v in (4, 2):
        if width / (math.ceil(width / (32 * v)) * 32 * v) >= FOLD_LANE_USE:
            return v
    return 1


def _fold_launch(plan: FoldPlan, variant=None):
    """(kernel name, parameter block, grid, 0); ``variant`` ("tile", RC) or ("gather", V) forces a kernel (tests,
    sweeps)."""
    es, D = plan.element_size, len(plan.window)
    flt = 1 if plan.sum_kind == P.SUM_FLOAT else 0
    if flt and es == 1:
        raise UnsupportedError("FOLD: no 1-byte floating-point type")
    if variant is None:
        variant = ("gather", FOLD_LANES or fold_lanes(plan))
        if D == 1 and plan.strides[0] >= FOLD_TILE_MIN_STRIDE:
            rc = fold_tile_residues(plan)
            if _fold_tiles(plan, rc) < 2**31:
                variant = ("tile", rc)
    if plan.out_count == 0:
        return f"fold_gather<{_SCALAR[es]}, {flt}, {D}, u32, 1>", P.fold_params(plan, 0), (0,), 0
    kind, arg = variant
    if kind == "tile":
        blocks = _fold_tiles(plan, arg)
        return f"fold1d_tile<{_SCALAR[es]}, {flt}, {arg}>", P.fold_params(plan, blocks), (blocks,), 0
    v = arg
    width = plan.spatial[-1]
    warps = plan.batch * plan.channels * math.prod(plan.spatial[:-1]) * math.ceil(width / (32 * v))
    name = f"fold_gather<{_SCALAR[es]}, {flt}, {D}, {_index_type(warps * 32)}, {v}>"
    return name, P.fold_params(plan, warps), (math.ceil(warps * 32 / THREADS),), 0


def _fold_tiles(plan: FoldPlan, rc: int) -> int:
    s, pad, width = plan.strides[0], plan.start_padding[0], plan.spatial[0]
    hops = (pad + width - 1) // s - pad // s + 1
    return plan.batch * plan.channels * math.ceil(hops / 32) * math.ceil(s / rc)


# -- SLICE_GRAD ---------------------------------------------------------------------

def scatter_word_plan(plan: ScatterPlan, src_ptr: int, dst_ptr: int):
    """Widen SLICE_GRAD to the largest word (up to 16 bytes) where the innermost dimension is contiguous in output and
    input (+1, or -1: elements reversed inside each word) and the window's first position and size, every offset,
    stride and pointer allow. Returns (word bytes, reversed element size or 0, plan in words)."""
    p = plan.canonical()
    es = p.element_size
    L, first, step, taken, is_, os_ = (p.sizes[-1], p.first[-1], p.step[-1], p.taken[-1], p.in_strides[-1],
                                       p.out_strides[-1])
    if os_ != 1 or step != 1 or abs(is_) != 1:
        return es, 0, p
    for w in (16, 8, 4, 2):
        f = w // es
        if f <= 1:
            break
        low = p.in_offset if is_ > 0 else p.in_offset - (f - 1)   # lowest element of the first input word
        if (L % f == 0 and first % f == 0 and taken % f == 0 and low % f == 0 and p.out_offset % f == 0
                and src_ptr % w == 0 and dst_ptr % w == 0
                and all(t % f == 0 for t in p.in_strides[:-1] + p.out_strides[:-1])):
            wp = ScatterPlan(w, p.sizes[:-1] + (L // f,), p.out_offset // f,
                             tuple(t // f for t in p.out_strides[:-1]) + (1,), p.first[:-1] + (first // f,),
                             p.step, p.taken[:-1] + (taken // f,), low // f,
                             tuple(t // f for t in p.in_strides[:-1]) + (is_,))
            return w, (es if is_ < 0 else 0), wp
    return es, 0, p


def _scatter_launch(plan: ScatterPlan, src_ptr: int, dst_ptr: int):
    w, rev, p = scatter_word_plan(plan, src_ptr, dst_ptr)
    count = p.count
    items = items_per_thread(w)
    name = f"scatter<{_SCALAR[w]}, {len(p.sizes)}, {rev}, {_index_type(count, items)}, {items}>"
    return name, P.scatter_params(p), (math.ceil(count / (THREADS * items)),), 0

