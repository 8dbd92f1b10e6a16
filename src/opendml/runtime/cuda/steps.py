"""Launch planning of the move program on CUDA: which kernels run a ``MovePlan``, with which parameter blocks and
grids (``move_steps``; mirrored in C by ``runtime/native/cuda_move_spec.c``).

Every pass kind has one entry in ``PASS_STEPS``: ``Copy`` and ``Fill`` become canonical kernel passes (``_Pass``:
size-1 dimensions dropped, ordered by destination stride, neighbours merged) launched by ``_pass_step``; ``Windows``,
``WindowSums`` and ``SliceScatter`` keep their tuned launches (``tuned.py``); ``Gather`` and ``Scatter`` are
``index.py``'s. A padding program (PADDING/PADDING1: ``MovePlan.pad``) runs as one fused launch (``FUSE_PAD``).
"""
from __future__ import annotations

import math
import sys
import types

import numpy as np

from ...model.data_type import DataType
from ...model.errors import UnsupportedError
from ...plan import AxisMap, Copy, CopyPlan, Fill, Gather, MovePlan, Scatter, SliceScatter, Windows, WindowSums
from .. import params as P
from ..cpu.numpy_kernels import fill_bits
from ..config import SettingsModule
from .launch import _SCALAR, THREADS
from .tuned import _copy_launch, _fold_launch, _scatter_launch, _unfold_launch, word_plan

#: Plain passes (same type, no map, no scale/bias): "auto" (``_plain_step`` picks ``move_wcopy``, ``strided_copy``,
#: ``move_transpose`` or ``move_tile``); "strided_copy" or "move" forces one (benchmarks, tests).
MOVE_PLAIN_VIA = "auto"
#: How a padding program (PADDING/PADDING1's interior copy and border slabs) runs (layout.cu describes the kernels).
#: "padr": one ``move_padr`` launch (``PAD_ROWS``) where the output is contiguous and its rows at least
#: ``PADR_MIN_BYTES`` long, else as "words". "words": one ``move_padw`` launch (``PAD_WORDS``) where the output is
#: contiguous, else as "rows". "rows": one ``move_pad`` launch where the output's innermost dimension is contiguous on
#: both sides and at least ``PAD_ROWS_MIN`` elements long, else pass by pass. True: one ``move_vec`` pass over the
#: whole output with per-axis maps. False: pass by pass. The measurements behind this and every setting below (the
#: fastest on an H100 and an H200): benchmarks/RESULTS.md.
FUSE_PAD = "padr"
#: move_padr's (words a lane moves at once, minimum resident blocks per multiprocessor, flags: 2 each interior word
#: read as its elements where 4 bytes or more, no shuffles; 4 the row element by element, 4 x words elements a lane a
#: round, 2 x words of 8 bytes).
PAD_ROWS = (3, 8, 4)
#: move_padr's settings for 1- and 2-byte elements (their words realigned
#: through shuffles and funnel shifts: 40 registers would spill 48-64 bytes).
PAD_ROWS_SMALL = (2, 1, 0)
PADR_MIN_BYTES = 256
#: move_padw's (words per thread, minimum resident blocks per multiprocessor: __launch_bounds__(256, MINB)).
PAD_WORDS = (1, 8)
PAD_ROWS_MIN = 16
#: Contiguous one-dimensional conversion or scale/bias passes: ``move_cvt`` with this many V-element runs a thread
#: (loads first), where > 0; 0: ``move_vec``. Flags 2: a persistent grid.
CVT_UNROLL = 1
CVT_FLAGS = 0
#: Plain passes word_plan widens to aligned 16-byte words (no reversal) in ``WORD_COPY_MIN_RANK`` dimensions or more:
#: ``move_wcopy`` with this many words a thread, where > 0; else ``strided_copy``.
WORD_COPY = 2
WORD_COPY_MIN_RANK = 3
#: (most repeat dimensions, words a thread): a word copy with 1 to that many (at most 2) repeat dimensions (source
#: stride 0: TILE's repeats) takes them out of move_wcopy's index space, each thread storing its words at every
#: repeat (0 or 0 words: off).
WORD_REPEAT = (1, 1)
_MAP_CONSTANT = 5


class _Pass:
    """One kernel's work: dims [size, src_stride, dst_stride, map mode, map shift, map size] (mode 0: no map)."""

    __slots__ = ("fill", "src", "dst", "dims", "src_offset", "dst_offset", "st", "dt", "sb", "fill_bits")

    def __init__(self, fill, src, dst, dims, src_offset, dst_offset, st, dt, sb=None, fill_bits=0):
        self.fill, self.src, self.dst, self.dims = fill, src, dst, dims
        self.src_offset, self.dst_offset, self.st, self.dt = src_offset, dst_offset, st, dt
        self.sb, self.fill_bits = sb, fill_bits

    @property
    def count(self) -> int:
        return math.prod(d[0] for d in self.dims)

def _map_source(mode: int, shift: int, n: int, d: int):
    """plan.AxisMap.source, with CONSTANT (None outside the input)."""
    if mode == _MAP_CONSTANT:
        return d - shift if 0 <= d - shift < n else None
    return AxisMap(mode, shift, n).source(d)


def _canonical(k: _Pass) -> _Pass:
    """``k`` canonical: size-1 dimensions dropped (a mapped one's source coordinate folded into the source offset; a
    CONSTANT one outside the input makes the pass a fill), the rest by destination stride (largest first), unmapped
    neighbours walking both sides as one merged."""
    kept, src_offset, fill = [], k.src_offset, k.fill
    for d in k.dims:
        n, ss, ds, mode, shift, msize = d
        if n == 1:
            if mode and not fill:
                i = _map_source(mode, shift, msize, 0)
                if i is None:
                    fill = True
                else:
                    src_offset += i * ss
            continue
        kept.append(list(d))
    if fill:
        kept = [[n, 0, ds, 0, 0, 0] for n, _, ds, *_ in kept]
    kept.sort(key=lambda d: d[2], reverse=True)
    merged: list = []
    for d in kept:
        if merged:
            o = merged[-1]
            if not o[3] and not d[3] and o[2] == d[2] * d[0] and o[1] == d[1] * d[0]:
                merged[-1] = [o[0] * d[0], d[1], d[2], 0, 0, 0]
                continue
        merged.append(d)
    if not merged:
        merged = [[1, 0, 0, 0, 0, 0]]
    return _Pass(fill, -1 if fill else k.src, k.dst, merged, src_offset, k.dst_offset, k.st, k.dt, k.sb,
                 k.fill_bits)


def _pad_program(plan: MovePlan):
    """``plan.pad`` ``(mode, fill value, start, end)``, set only by PADDING/PADDING1's lowering (``MovePlan.padded``;
    ``ops._move.pad_passes``: the interior copy, then per axis the start and end slabs, Fills for CONSTANT (mode 0)
    or Copies with AxisMaps); else None (pass by pass)."""
    pad = plan.pad
    if pad is None or len(plan.passes) < 2 or len(plan.in_types) != 1 or plan.in_types != plan.out_types:
        return None
    first = plan.passes[0]
    if not isinstance(first, Copy) or first.maps is not None or first.scale_bias is not None:
        return None
    return pad


def kernel_passes(plan: MovePlan, fuse: bool | None = None) -> list[_Pass]:
    """The program's passes as kernel work, canonical (a padding program fused
    into one pass over the whole output where ``fuse``, default ``FUSE_PAD``)."""
    st_of, dt_of = plan.in_types, plan.out_types
    if (FUSE_PAD if fuse is None else fuse) is True:
        pad = _pad_program(plan)
        if pad is not None:
            mode, value, start, end = pad
            first = plan.passes[0]
            dims = []
            for a, s, e, ss, ds in zip(first.sizes, start, end, first.src_strides, first.dst_strides):
                m = (mode or _MAP_CONSTANT) if s or e else 0
                dims.append([a + s + e, ss, ds, m, s if m else 0, a if m else 0])
            bits = fill_bits(value, dt_of[0]) if mode == 0 else 0
            return [_canonical(_Pass(False, 0, 0, dims, first.src_offset, 0, st_of[0], dt_of[0], None, bits))]
    return [(_fill_pass if type(q) is Fill else _copy_pass)(q, plan) for q in plan.passes if q.count]


def _fill_pass(q: Fill, plan: MovePlan) -> _Pass:
    t = plan.out_types[q.dst]
    return _canonical(_Pass(True, -1, q.dst, [[n, 0, ds, 0, 0, 0] for n, ds in zip(q.sizes, q.dst_strides)], 0,
                            q.dst_offset, t, t, None, fill_bits(q.value, t)))


def _copy_pass(q: Copy, plan: MovePlan) -> _Pass:
    maps = q.maps or (None,) * len(q.sizes)
    dims = [[n, ss, ds, m.mode if m else 0, m.shift if m else 0, m.size if m else 0]
            for n, ss, ds, m in zip(q.sizes, q.src_strides, q.dst_strides, maps)]
    return _canonical(_Pass(False, q.src, q.dst, dims, q.src_offset, q.dst_offset, plan.in_types[q.src],
                            plan.out_types[q.dst], q.scale_bias))


def _magic(d: int) -> tuple[int, int]:
    """(multiplier, shift) of the 32-bit multiply-shift division by d
    (q = (umulhi(n, m) + n) >> s, exact for n < 2^31)."""
    s = 0
    while (1 << s) < d:
        s += 1
    return ((1 << 32) * ((1 << s) - d)) // d + 1, s


def _index(bound: int) -> str:
    """The kernels' index type I for flat indices (the grid's overshoot included) below ``bound``: 32-bit under 2^31."""
    return "u32" if bound < 2**31 else "u64"


def _i64(v: int) -> int:
    """An unsigned 64-bit pattern as the signed value a c_int64 field holds."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def move_params(k: _Pass) -> P.MoveParams:
    q = P.MoveParams(rank=len(k.dims), count=k.count, src_offset=k.src_offset, dst_offset=k.dst_offset,
                     src_type=k.st, dst_type=k.dt, scale_bias=1 if k.sb is not None else 0,
                     fill_bits=_i64(k.fill_bits))
    if k.sb is not None:
        q.scale32 = int(np.float32(k.sb[0]).view(np.uint32))
        q.bias32 = int(np.float32(k.sb[1]).view(np.uint32))
        q.scale64 = _i64(int(np.float64(k.sb[0]).view(np.uint64)))
        q.bias64 = _i64(int(np.float64(k.sb[1]).view(np.uint64)))
    for i, (n, ss, ds, mode, shift, msize) in enumerate(k.dims):
        d = q.dim[i]
        d.size, d.src_stride, d.dst_stride, d.map_mode, d.map_shift, d.map_size = n, ss, ds, mode, shift, msize
        d.div_magic, d.div_shift = _magic(n)
    return q


def _pad_words_ok(k: _Pass) -> bool:
    """Whether ``move_padw`` takes ``move_pad``'s fused padding pass ``k``: the output contiguous (offset 0, row-major
    strides), 32-bit indices with room for the grid's last words, sizes, map shifts and map sizes below 2^30."""
    if k.dst_offset != 0:
        return False
    stride = 1
    for n, ss, ds, mode, shift, msize in reversed(k.dims):
        if ds != stride or n >= 2**30 or abs(shift) >= 2**30 or msize >= 2**30:
            return False
        stride *= n
    return k.count + THREADS * 16 * 16 + 64 < 2**31


def _move_items(src_bytes: int, dst_bytes: int) -> int:
    """move_vec's V: 16 bytes of the wider side (4 elements at least), twice that for a narrowing conversion where it
    fills 16 destination bytes (float32 -> float16: 8, two 16-byte loads, one 16-byte store)."""
    v = max(4, 16 // max(src_bytes, dst_bytes))
    if dst_bytes < src_bytes:
        v = max(v, min(16 // dst_bytes, 2 * v))
    return v


def _tile_pass(k: _Pass, es: int):
    """``(group pass, R, V, X, Y)`` where the plain pass ``k`` is a small transpose ``move_tile`` moves as R x V
    tiles, else None: X a dimension of at most 8 positions, Y one whose V positions (16 bytes) are consecutive on one
    side, X's on the other (SPACE_TO_DEPTH: X the block column, source stride 1, Y the output's innermost dimension,
    source stride R; DEPTH_TO_SPACE: X the output's innermost dimension, Y the next, source stride 1, destination
    stride R). The group pass: ``k`` without X, Y divided by V."""
    dims = k.dims
    nd = len(dims)
    V = max(2, 16 // es)
    if nd < 2 or nd + 1 > P.MAX_MOVE_RANK or dims[-1][2] != 1:
        return None
    L = nd - 1
    if 2 <= dims[L][0] <= 8 and dims[L - 1][1] == 1 and dims[L - 1][2] == dims[L][0]:
        pick = (L, L - 1)                                      # X innermost, Y the next
    else:
        pick = next(((x, L) for x in range(L) if 2 <= dims[x][0] <= 8 and dims[x][1] == 1
                     and dims[L][1] == dims[x][0]), None)
    if pick is None:
        return None
    x, y = pick
    if dims[y][0] % V:
        return None
    R = dims[x][0]
    group = [[d[0] // V, d[1] * V, d[2] * V, 0, 0, 0] if i == y else list(d) for i, d in enumerate(dims) if i != x]
    g = _Pass(False, k.src, k.dst, group, k.src_offset, k.dst_offset, k.st, k.dt)
    return g, R, V, dims[x], dims[y]


#: Plain passes that transpose (the destination's innermost dimension is not the source's: ``_transpose_pass``) go
#: through ``move_transpose`` in square tiles of this many elements a side (32 or 64; 0: off, the passes then take
#: strided_copy), where both transposed dimensions are at least ``TRANSPOSE_MIN`` long (move_tile takes the small
#: transposes of SPACE_TO_DEPTH and DEPTH_TO_SPACE). 64 measured fastest (benchmarks/RESULTS.md).
TRANSPOSE_TILE = 64
TRANSPOSE_MIN = 16


def _transpose_pass(k: _Pass):
    """``(outer pass, X, Y, tile)`` where the plain pass ``k`` is a transposing copy ``move_transpose`` moves in tiles,
    else None: X the destination's innermost dimension (source stride not 1), Y the one of source stride 1
    (destination stride not 1), both at least ``TRANSPOSE_MIN`` long; the outer pass holds the other dimensions (its
    count: the tiles' outer positions, 1 where none)."""
    dims = k.dims
    nd = len(dims)
    if not TRANSPOSE_TILE or nd < 2 or nd + 1 > P.MAX_MOVE_RANK or dims[-1][2] != 1 or dims[-1][1] == 1:
        return None
    X = dims[-1]
    y = next((i for i in range(nd - 1) if dims[i][1] == 1), None)
    if y is None or X[0] < TRANSPOSE_MIN or dims[y][0] < TRANSPOSE_MIN or dims[y][2] == 1:
        return None
    Y = dims[y]
    g = _Pass(False, k.src, k.dst, [list(d) for i, d in enumerate(dims[:-1]) if i != y], k.src_offset,
              k.dst_offset, k.st, k.dt)
    t = TRANSPOSE_TILE
    if g.count * -(-X[0] // t) * -(-Y[0] // t) >= 2**31:
        return None
    return g, X, Y, t


_FUSE_CODES = {"padr": 2, "words": 3, "rows": 4}
_VIA_CODES = {"strided_copy": 1, "move": 2}


_C_SETTINGS = None                      # c_settings()'s tuple, dropped when a setting is set (SettingsModule)


def c_settings() -> tuple:
    """This module's settings as the C mirror of ``move_steps`` (``runtime/native/cuda_move_spec.c``, newshape.h's
    odml_move_cuda_conf) reads them at each call: 20 ints, FUSE_PAD and MOVE_PLAIN_VIA as codes; a value C cannot
    read (not an int, a tuple of another length) makes it decline the call to the Python route. Kept until a setting
    is set (where the sequences are tuples: a list could change in place)."""
    global _C_SETTINGS
    got = _C_SETTINGS
    if type(got) is tuple:
        return got
    _C_SETTINGS = mark = object()           # (a setting set meanwhile replaces it: the tuple is not kept)
    fuse = 1 if FUSE_PAD is True else _FUSE_CODES.get(FUSE_PAD, 0) if type(FUSE_PAD) is str else 0
    via = _VIA_CODES.get(MOVE_PLAIN_VIA, 0) if type(MOVE_PLAIN_VIA) is str else 0
    got = (fuse, *PAD_ROWS, *PAD_ROWS_SMALL, PADR_MIN_BYTES, *PAD_WORDS, PAD_ROWS_MIN, CVT_UNROLL, CVT_FLAGS,
           WORD_COPY, WORD_COPY_MIN_RANK, via, TRANSPOSE_TILE, TRANSPOSE_MIN, *WORD_REPEAT)
    if type(PAD_ROWS) is tuple and type(PAD_ROWS_SMALL) is tuple and type(PAD_WORDS) is tuple \
            and type(WORD_REPEAT) is tuple and _C_SETTINGS is mark:
        _C_SETTINGS = got
    return got


def _extra_dims(g: _Pass, X, Y, magic: bool) -> P.MoveParams:
    """``move_params(g)`` with X and Y in the two dimensions after g's."""
    q = move_params(g)
    n = len(g.dims)
    for i, d in ((n, X), (n + 1, Y)):
        q.dim[i].size, q.dim[i].src_stride, q.dim[i].dst_stride = d[0], d[1], d[2]
        if magic:
            q.dim[i].div_magic, q.dim[i].div_shift = _magic(d[0])
    return q


def move_steps(plan: MovePlan, src_ptrs, src_elements, dst_ptrs, fuse=None, plain_via: str | None = None,
               sms: int | None = None, what: str = "the move program"):
    """Per kernel: (name, parameter block, grid, shared memory bytes, source slot or -1, destination slot): a padding
    program's one fused launch (``FUSE_PAD``), else one per non-empty pass (``PASS_STEPS``). ``plain_via`` overrides
    ``MOVE_PLAIN_VIA``; ``sms``: the device's multiprocessors, for persistent grids (None: a block per work block)."""
    # what a pass's launch depends on beside the pass
    slots = types.SimpleNamespace(plan=plan, src_ptrs=src_ptrs, src_elements=src_elements, dst_ptrs=dst_ptrs,
                                  via=plain_via or MOVE_PLAIN_VIA, sms=sms, what=what)
    how = FUSE_PAD if fuse is None else fuse
    if how in ("padr", "words", "rows"):
        step = _pad_step(plan, how, sms)
        if step is not None:
            return [step]
    elif how is True and _pad_program(plan) is not None:
        return [_pass_step(kernel_passes(plan, True)[0], slots)]
    return [PASS_STEPS[type(q)](q, slots) for q in plan.passes if q.count]


def _pad_step(plan: MovePlan, how: str, sms):
    """The one launch of a padding program (``FUSE_PAD`` "padr", "words" or "rows"), or None where none takes it:
    ``move_pad`` takes the program's fused pass where its innermost dimension has stride 1 on both sides and is at
    least ``PAD_ROWS_MIN`` long, the others fewer."""
    if _pad_program(plan) is None:
        return None
    k, = kernel_passes(plan, True)            # (a padding program fuses into one pass)
    if k.fill or k.st != k.dt or k.sb is not None or len(k.dims) >= P.MAX_MOVE_RANK:
        return None
    W, ss, ds = k.dims[-1][:3]
    if ss != 1 or ds != 1 or W < PAD_ROWS_MIN or W >= 2**31 - 64 or k.dims[-1][5] >= 2**31:
        return None
    rows = k.count // W
    es = DataType(k.dt).size
    nd = len(k.dims)
    if _pad_words_ok(k):
        if how == "padr" and W * es >= PADR_MIN_BYTES:
            U, minb, flags = PAD_ROWS if es >= 4 else PAD_ROWS_SMALL
            return (f"move_padr<{_SCALAR[es]}, {nd}, {U}, {minb}, {flags}>", move_params(k),
                    (math.ceil(rows / (THREADS // 32)),), 0, k.src, k.dst)
        if how in ("padr", "words"):
            U, minb = PAD_WORDS
            blocks = math.ceil((k.count // (16 // es) + 2) / (THREADS * U))
            return f"move_padw<{_SCALAR[es]}, {nd}, {U}, {minb}>", move_params(k), (blocks,), 0, k.src, k.dst
    return (f"move_pad<{_SCALAR[es]}, {nd}, {_index(rows + 8)}>", move_params(k),
            (math.ceil(rows / (THREADS // 32)),), 0, k.src, k.dst)


def _plain_step(k: _Pass, slots):
    """The launch of a plain pass (same type both sides, no map, no scale/bias), or None (move_vec): ``move_wcopy``
    where ``word_plan`` widens it to 16-byte words in 3 dimensions or more, ``strided_copy`` where it widens,
    reverses or picks otherwise, ``move_transpose`` / ``move_tile`` where it transposes, else ``strided_copy`` by
    element (SLICE's window at an odd column)."""
    es = DataType(k.st).size
    nd = len(k.dims)
    via = slots.via
    tile = _tile_pass(k, es)
    copy = via != "move" and nd <= P.MAX_RANK
    if copy:
        cp = CopyPlan(es, tuple(d[0] for d in k.dims), k.src_offset, tuple(d[1] for d in k.dims), k.dst_offset,
                      tuple(d[2] for d in k.dims))
        src_ptr, dst_ptr, src_n = slots.src_ptrs[k.src], slots.dst_ptrs[k.dst], slots.src_elements[k.src]
        w, rev, pick, wp = word_plan(cp, src_ptr, dst_ptr, src_n)
        if (via != "strided_copy" and WORD_COPY and w == 16 and not rev and not pick and not tile
                and WORD_COPY_MIN_RANK <= len(wp.sizes) <= P.MAX_MOVE_RANK):
            dims = [[n, a, b, 0, 0, 0] for n, a, b in zip(wp.sizes, wp.in_strides, wp.out_strides)]
            reps = [d for d in dims if d[1] == 0 and d[0] > 1]
            if not 0 < len(reps) <= min(WORD_REPEAT[0], 2) or WORD_REPEAT[1] < 1:
                reps = []
            U = WORD_REPEAT[1] if reps else WORD_COPY
            if reps:
                dims = _canonical(_Pass(False, k.src, k.dst, [d for d in dims if not any(d is r for r in reps)],
                                        0, 0, k.st, k.dt)).dims
            count = math.prod(d[0] for d in dims)
            q = move_params(_Pass(False, k.src, k.dst, dims + reps, wp.in_offset, wp.out_offset, k.st, k.dt))
            q.count = count
            return (f"move_wcopy<{len(dims)}, {_index(count + THREADS * U)}, {U}, {len(reps)}>", q,
                    (math.ceil(count / (THREADS * U)),), 0, k.src, k.dst)
        if via == "strided_copy" or (not tile and (w >= 16 or rev or pick)):
            return (*_copy_launch(cp, src_ptr, dst_ptr, src_n), k.src, k.dst)
    tr = _transpose_pass(k)
    if tr is not None:
        g, X, Y, t = tr
        blocks = g.count * -(-X[0] // t) * -(-Y[0] // t)
        return (f"move_transpose<{_SCALAR[es]}, {len(g.dims)}, {t}>", _extra_dims(g, X, Y, True), (blocks,), 0,
                k.src, k.dst)
    if tile is not None:
        g, R, V, X, Y = tile
        return (f"move_tile<{_SCALAR[es]}, {len(g.dims)}, {_index(g.count + THREADS)}, {R}, {V}>",
                _extra_dims(g, X, [0, *Y[1:]], False), (math.ceil(g.count / THREADS),), 0, k.src, k.dst)
    return (*_copy_launch(cp, src_ptr, dst_ptr, src_n), k.src, k.dst) if copy else None


def _pass_step(k: _Pass, slots):
    """The launch of a canonical kernel pass (a Copy's or a Fill's)."""
    count, nd = k.count, len(k.dims)
    des = DataType(k.dt).size
    if k.fill:
        items = _move_items(des, des)
        return (f"move_fill<{_SCALAR[des]}, {nd}, {_index(count + THREADS * items)}, {items}>", move_params(k),
                (math.ceil(count / (THREADS * items)),), 0, -1, k.dst)
    maps = any(d[3] for d in k.dims)
    conv = k.st != k.dt or k.sb is not None
    if not maps and not conv:
        step = _plain_step(k, slots)
        if step is not None:
            return step
    ses = DataType(k.st).size
    V = _move_items(ses, des)
    sb = int(k.sb is not None)
    if conv and not maps and CVT_UNROLL > 0 and nd == 1 and k.dims[0][1] == 1 and k.dims[0][2] == 1:
        U, flags = CVT_UNROLL, CVT_FLAGS
        index = _index(count + THREADS * V * U)
        grid = math.ceil(count / (THREADS * V * U))
        if flags & 2 and slots.sms:
            grid = min(grid, slots.sms * (8 if U <= 2 else 4))
        name = f"move_cvt<{_SCALAR[ses]}, {_SCALAR[des]}, {index}, {V}, {k.st}, {k.dt}, {sb}, {U}, {flags}>"
        return name, move_params(k), (grid,), 0, k.src, k.dst
    name = f"move_vec<{_SCALAR[ses]}, {_SCALAR[des]}, {nd}, {_index(count + THREADS * V)}, {V}, {k.st}, {k.dt}, {sb}"
    return f"{name}, {int(maps)}>", move_params(k), (math.ceil(count / (THREADS * V)),), 0, k.src, k.dst


def _index_step(q, slots):
    raise UnsupportedError(f"{slots.what}: index-driven passes ({type(q).__name__}) are launched by "
                           f"runtime/cuda/index.py (CudaBackend.record_move), not by move_steps")


#: The launch of each pass kind: ``PASS_STEPS[type(q)](q, slots)`` gives one
#: of ``move_steps``'s. Gather and Scatter: ``record_move`` hands plans with them to ``index.py``.
PASS_STEPS = {
    Copy: lambda q, s: _pass_step(_copy_pass(q, s.plan), s),
    Fill: lambda q, s: _pass_step(_fill_pass(q, s.plan), s),
    Windows: lambda q, s: (*_unfold_launch(q.plan), q.src, q.dst),
    WindowSums: lambda q, s: (*_fold_launch(q.plan), q.src, q.dst),
    SliceScatter: lambda q, s: (*_scatter_launch(q.plan, s.src_ptrs[q.src], s.dst_ptrs[q.dst]), q.src, q.dst),
    Gather: _index_step,
    Scatter: _index_step,
}


sys.modules[__name__].__class__ = SettingsModule
