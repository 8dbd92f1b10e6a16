"""The index-driven passes of the move program (``plan.Gather``, ``plan.Scatter``) on CUDA: the kernels of
``index.cu`` (whose heading says what each does) and their launches.

``index_move_steps`` builds the ``MoveLaunch`` steps of a plan holding such passes: its ``Copy``/``Fill`` runs through
the move program's launches, each ``Gather``/``Scatter`` pass an ``IndexPass``, in order on the caller's stream. A
pass walks its outer positions (the leading dimensions that read an index, ``cpu.numpy_kernels.outer_count``; every
dimension where blocks of different destinations could overlap) and moves one block of inner words at each (widened
to 16-byte words where everything allows), ``ITEMS`` words a thread. Kernels are compiled per word size, index width
and exact counts of outer dimensions, index axes and inner dimensions. ``plan_pass`` picks the mode:

* gathers: ``ix_gather`` (element-wise ones ``ix_gather_positions``, ``ix_gather_row`` or ``ix_reverse_*``:
  ``_row``, ``_tile``, ``_pieces``, ``_rows``); ``last_only``: source blocks keyed (``ix_keys``) and sorted, a
  position not the last (row-major) of its run writing 0;
* a scatter of a constant, or whose positions all read one source block (ONE_HOT's on value), without accumulation:
  ``ix_scatter``, in any order;
* an overwriting scatter: ``ix_scatter_group`` where ``_group`` applies, else the owner pass (``ix_owner``, then
  ``ix_scatter`` where owners write) where its slot array is small enough (``OWNER_SLOTS``), else it sorts;
* an accumulating scatter sorts: ``ix_keys``, a stable sort by destination block, ``ix_apply`` (the CPU kernel's
  order and roundings, the same bytes).

Scratch (slots, keys, order) comes from CuPy's allocator on the caller's stream: a launch that sorts allocates device
memory (unlike the move program's) and cannot be captured into a CUDA graph.

Every access stays inside the bound ranges whatever the index values: the kernels keep each coordinate inside
``[0, bound)`` (index.cu), and ``record_move`` checked each pass's reach over those coordinates against the bound
element counts before anything runs. The launches made here leave each axis's flag (``IndexAxisParams.flag``,
``flag_offsets``: the C call cache's checked calls) 0: the route checks the indices before it launches.
"""
from __future__ import annotations

import ctypes
import math

from ...model.data_type import DataType
from ...model.errors import UnsupportedError
from ...plan import Gather, MovePlan, Scatter
from ..cpu.numpy_kernels import _distinct, fill_bits, outer_count
from .launch import _SCALAR, INDEX_KERNELS, _kernel  # noqa: F401 - index.cu, compiled as every kernel file is

#: Threads a CUDA block (index.cu's IX_THREADS); IX_RANK and IX_AXES.
THREADS = 256
RANK, AXES = 16, 8
#: An overwriting scatter takes the owner pass where its slot array (4 bytes a possible destination block) has at most
#: max(OWNER_SLOTS, 4 x positions) slots; else it sorts.
OWNER_SLOTS = 1 << 24
#: Overwriting scatters: "auto" (group where it applies, else as above), "owner" or "sort" (tests, benchmarks).
SCATTER_VIA = "auto"
#: Whether the C new-shape route (cuda_index_spec.c) runs the owner mode itself (its table from the framework's
#: allocator); False leaves it to IndexPass (the Python route).
OWNER_IN_C = True
#: Inner words a thread moves (where a block has at least this many).
ITEMS = 4
#: Positions a thread of an element-wise gather moves (1: ix_gather, one a thread) from POSITION_MIN positions on;
#: fewer move one a thread (a small call's kernel is on a checked call's clock: more, shorter threads).
POSITION_ITEMS = 4
POSITION_MIN = 1 << 18
#: Whether an element-wise reversal of subsequences walks columns (_column_walk), staged in shared memory where they
#: fit (_tile).
COLUMN_WALK = REVERSE_TILE = True
#: Bytes of a staged column set's row (``ix_reverse_tile``: whole lines of this width where the tile fits TILE_SMEM,
#: else halved down to 128 bytes, else 32-byte sectors); the widths and variants measured (clusters, bulk copies, half
#: sets: slower) are in benchmarks/RESULTS.md.
REVERSE_BYTES = 256
#: Shared memory a staging block may take (above 48 KiB the kernel opts in).
TILE_SMEM = 64 * 1024
#: Bytes of rows a block of a reversal along rows (a length a row) stages (``ix_reverse_rows``: whole rows, up to 64)
#: or moves in place (``ix_reverse_pieces``, rows under 32 words); 0: ``ix_gather_positions``. Sizes measured:
#: benchmarks/RESULTS.md.
REVERSE_ROWS = 32 * 1024
#: Whether an element-wise gather along a row runs a block a row (``ix_gather_row``, _row), staging the source row in
#: shared memory where it fits (ROW_STAGE).
GATHER_ROW = ROW_STAGE = True
#: Whether an accumulating pass widens its contiguous inner run to 2-16 byte words (added element by element).
WIDE_ACC = True
i64, u64 = ctypes.c_int64, ctypes.c_uint64


class IndexAxisParams(ctypes.Structure):
    """Mirror of ``ix_axis`` (index.cu); ``flag``: 0, or (a checked call served from C) the address of the
    4-byte flag the kernels set where an index value lies outside its dimension."""
    _fields_ = [(n, i64) for n in ("type", "offset", "stride", "bound", "mode", "skip", "axis")] + [
        ("flag", u64), ("strides", i64 * RANK)]


class IndexParams(ctypes.Structure):
    """Mirror of ``ix_params`` (index.cu), same field order."""
    _fields_ = [(n, i64) for n in ("outer", "inner", "n_outer", "n_inner", "total", "groups", "src_offset",
                                   "dst_offset")] + [
        (n, i64 * RANK) for n in ("sizes", "src_strides", "dst_strides", "isizes", "isrc_strides", "idst_strides")] + [
        (n, i64) for n in ("naxes", "data_type", "has_value", "value_bits", "last_only", "key_base", "key_div",
                            "members")] + [
        ("axes", IndexAxisParams * AXES)] + [(n, u64) for n in ("src", "dst", "keys", "order", "aux")] + [
        ("idx", u64 * AXES), ("done", u64), ("count", u64)]


def flag_offsets(naxes: int) -> tuple:
    """Where the check's flag address goes in an ``IndexParams`` block of ``naxes`` index axes (one offset
    an axis: the C call cache patches it in per call, as calls.h's IX_FLAG_AT places it)."""
    return tuple(IndexParams.axes.offset + a * ctypes.sizeof(IndexAxisParams) + IndexAxisParams.flag.offset
                 for a in range(naxes))


def _disjoint(p, k: int) -> bool:
    """Whether the destination blocks of different outer positions never overlap: every destination element lies at
    one combination of the outer, index and inner coordinates."""
    dims = [(n, t) for n, t in zip(p.sizes[:k], p.dst_strides[:k]) if t]
    dims += [(ix.bound, ix.stride) for ix in p.indices if ix.stride]
    dims += list(zip(p.sizes[k:], p.dst_strides[k:]))
    return _distinct([n for n, _ in dims], [t for _, t in dims])


#: A group scatter's owner table (4 bytes a word of its segment) stays in a block's default shared memory.
GROUP_SLOTS = 12 * 1024


def _trailing_group(q, k: int) -> int:
    """Positions a group where an overwriting scatter of one word a position and one index axis can run as
    ``ix_scatter_group``, else 0: the trailing outer dimensions of destination stride 0 (the members, which reach one
    destination segment of ``bound`` words, differing only by the index coordinate), the leading ones and the index
    axis reaching distinct words (no two groups write one word), the segment at most GROUP_SLOTS."""
    if q.naxes != 1 or q.n_inner != 1 or not q.axes[0].stride or q.axes[0].bound > GROUP_SLOTS:
        return 0
    m = k
    while m > 0 and (q.dst_strides[m - 1] == 0 or q.sizes[m - 1] == 1):
        m -= 1
    members = math.prod(q.sizes[m:k])
    if not 2 <= members < 2**32 - 1 or q.n_outer // members > 2**31 - 1 or not _distinct(
            list(q.sizes[:m]) + [q.axes[0].bound], list(q.dst_strides[:m]) + [q.axes[0].stride]):
        return 0
    return members


def _group(q, k: int) -> int:
    """``_trailing_group``, else the same with the outer dimensions of destination stride 0 moved last
    (``scatter_elements`` along an axis before the last; ``q`` reordered where that groups): positions keep their
    source, destination and index, and the last in row-major order of those reaching one word stays last."""
    members = _trailing_group(q, k)
    moved = [d for d in range(k) if q.sizes[d] > 1 and not q.dst_strides[d]]
    if members or not moved or q.naxes != 1:
        return members
    w = IndexParams.from_buffer_copy(q)
    for i, d in enumerate([d for d in range(k) if d not in moved] + moved):
        w.sizes[i], w.src_strides[i], w.dst_strides[i] = q.sizes[d], q.src_strides[d], q.dst_strides[d]
        w.axes[0].strides[i] = q.axes[0].strides[d]
        if q.axes[0].axis == d:             # (the dimension a reversal's length runs along, moved with it)
            w.axes[0].axis = i
    members = _trailing_group(w, k)
    if members:
        ctypes.memmove(ctypes.addressof(q), ctypes.addressof(w), ctypes.sizeof(q))
    return members


def _tile(q, k: int, word: int) -> bool:
    """Whether a column-walked reversal (``_column_walk``'s order) runs as ``ix_reverse_tile``, a block staging in
    TILE_SMEM the whole reversed axis (k - 2) of the last dimension's lo words; sets ``q.members``, its positions."""
    if k < 2 or q.naxes != 1:
        return False
    ax, lo = q.axes[0], q.sizes[k - 1]
    if ax.mode != 1 or ax.axis != k - 2 or q.src_strides[k - 2] or not ax.stride or ax.bound != q.sizes[k - 2] or \
            ax.strides[k - 2] or THREADS % lo or ax.bound * lo * word > TILE_SMEM or \
            q.n_outer // (ax.bound * lo) > 2**31 - 1:
        return False
    q.members = ax.bound * lo
    return True


def _along_rows(q, k: int) -> bool:
    """Whether an element-wise gather reverses along the last outer
    dimension, one length a row."""
    if not REVERSE_ROWS or k < 1 or q.naxes != 1:
        return False
    ax = q.axes[0]
    return ax.mode == 1 and ax.axis == k - 1 and not q.src_strides[k - 1] and not ax.strides[k - 1] and \
        ax.bound == q.sizes[k - 1]


def _pieces(q, k: int, word: int) -> int:
    """16-byte pieces a block (REVERSE_ROWS bytes) where a reversal along rows of whole 16-byte pieces, contiguous on
    both sides, under 32 words, runs as ``ix_reverse_pieces``; else 0."""
    if word not in (2, 4, 8) or not _along_rows(q, k) or q.sizes[k - 1] >= 32 or q.sizes[k - 1] * word % 16 or \
            q.axes[0].stride != 1 or q.dst_strides[k - 1] != 1:
        return 0
    per = max(1, REVERSE_ROWS // 16)
    return per if -(-(q.n_outer * word // 16) // per) <= 2**31 - 1 else 0


def _rows(q, k: int, word: int) -> int:
    """Rows a block (as many, padded to 16 bytes, as fit REVERSE_ROWS bytes, up to 64) where a reversal along rows of
    32 words or more runs as ``ix_reverse_rows``; else 0."""
    n = q.sizes[k - 1] if k >= 1 else 0
    if not _along_rows(q, k) or n < 32 or q.n_outer // n > 2**31 - 1:
        return 0
    padded = -(-n * word // 16) * 16
    return min(64, REVERSE_ROWS // padded, q.n_outer // n)


def _row(q, k: int, word: int) -> int:
    """How an element-wise gather runs a block a row (``ix_gather_row``): 0 not (not one clamping index axis, the last
    outer dimension reads the source, or rows too short for a block), 1 the source row's ``bound`` words staged in
    shared memory, 2 read in place. (A reversal, mode 1, keeps the faster ``ix_gather_positions``.)"""
    if not GATHER_ROW or k < 1 or q.naxes != 1 or q.axes[0].mode != 0 or q.src_strides[k - 1]:
        return 0
    n, bound = q.sizes[k - 1], q.axes[0].bound
    if n < 128 or q.n_outer // n > 2**31 - 1 or n >= 2**31 or bound >= 2**31:
        return 0
    return 1 if ROW_STAGE and bound * word <= 4 * GROUP_SLOTS and bound <= 4 * n else 2


def _column_walk(q, k: int, word: int, nbytes: int = 32) -> int:
    """Reorder (in ``q``) the outer dimensions of an element-wise gather that reverses subsequences along an outer
    dimension r before the last: r moves next to the last dimension, which splits into (n / lo, lo), lo words of
    ``nbytes`` bytes, where it divides, so a block's threads walk one narrow column set down the whole reversed axis.
    Each position still writes its own element, but the source elements of one 32-byte sector, read at different
    reversed rows by neighbouring columns of random lengths, are read by neighbouring blocks while the sector is in
    cache, not at rows far apart in time. Returns the new outer rank."""
    rs = {q.axes[a].axis for a in range(q.naxes) if q.axes[a].mode == 1}
    if len(rs) != 1 or not 0 <= (r := rs.pop()) < k - 1 or q.sizes[r] < 2:
        return k
    dims = [(q.sizes[d], q.src_strides[d], q.dst_strides[d], [q.axes[a].strides[d] for a in range(q.naxes)], d)
            for d in range(k)]
    n, ss, ds, xs, _ = dims[-1]
    lo = max(1, nbytes // word)
    if n > lo and n % lo == 0:
        tail = [(n // lo, ss * lo, ds * lo, [t * lo for t in xs], -1), dims[r], (lo, ss, ds, xs, -1)]
    else:
        tail = [dims[r], dims[-1]]
    order = [dims[d] for d in range(k - 1) if d != r] + tail
    if len(order) > RANK:
        return k
    for i, (size, a, b, ts, d) in enumerate(order):
        q.sizes[i], q.src_strides[i], q.dst_strides[i] = size, a, b
        for x in range(q.naxes):
            q.axes[x].strides[i] = ts[x]
            if q.axes[x].mode == 1 and d == r:
                q.axes[x].axis = i
    q.outer = len(order)
    return len(order)


def _inner(sizes, ss, ds):
    """The inner dimensions without size 1, by destination stride (largest
    first), neighbours that walk both sides as one merged."""
    dims = sorted(((n, a, b) for n, a, b in zip(sizes, ss, ds) if n > 1), key=lambda d: abs(d[2]), reverse=True)
    out: list = []
    for n, a, b in dims:
        if out and out[-1][1] == a * n and out[-1][2] == b * n:
            out[-1] = (out[-1][0] * n, a, b)
        else:
            out.append((n, a, b))
    return out


_STREAMS: dict = {}


def _stream(backend, ptr: int):
    """CuPy's stream object for the caller's stream ``ptr`` on ``backend``'s device (0: the legacy default stream),
    cached: the sorts' and slot arrays' scratch is allocated and ordered on it."""
    s = _STREAMS.get((backend.index, ptr))
    if s is None:
        if len(_STREAMS) > 64:
            _STREAMS.clear()
        cupy = backend.cupy
        s = _STREAMS[backend.index, ptr] = cupy.cuda.ExternalStream(ptr, backend.index) if ptr else \
            cupy.cuda.Stream.null
    return s


def plan_pass(plan: MovePlan, p, src_ptrs, dst_ptrs, s=None) -> "PassPlan":
    """How one ``Gather``/``Scatter`` pass of ``plan`` runs for these addresses (each slot's element 0): mode,
    ``IndexParams`` (no addresses), kernel names (the main one first), the main one's shared memory, word and key
    slots, set on ``s`` (default: a new ``PassPlan``). Pure: ``IndexPass`` compiles what it names, and the C mirror
    (``runtime/native/cuda_index_spec.c``) is tested against it."""
    s = PassPlan() if s is None else s
    scatter = type(p) is Scatter
    es = DataType(plan.out_types[p.dst]).size
    acc = scatter and bool(p.accumulate)
    const = scatter and p.value is not None
    last_only = not scatter and p.last_only
    if len(p.sizes) > RANK or len(p.indices) > AXES:
        raise UnsupportedError(f"the CUDA index kernels take at most {RANK} dimensions and {AXES} index axes; "
                               f"got {len(p.sizes)} and {len(p.indices)}")
    k = outer_count(p)
    if scatter and not (const and not acc) and not _disjoint(p, k):
        k = len(p.sizes)
    # an overwriting scatter whose positions all write one source block
    # (ONE_HOT's on value): repeats write the same bytes, in any order
    same = scatter and not acc and all(t == 0 for n, t in zip(p.sizes[:k], p.src_strides[:k]) if n > 1)
    inner = _inner(p.sizes[k:], p.src_strides[k:], p.dst_strides[k:])
    f = 1
    src_ptr = dst_ptrs[p.dst] if const else src_ptrs[p.src]
    if (WIDE_ACC or not acc) and not const and inner and inner[-1][1] == 1 and inner[-1][2] == 1:
        outer_t = [t for n, a, b in zip(p.sizes[:k], p.src_strides[:k], p.dst_strides[:k]) if n > 1
                   for t in (a, b)]
        rest = [t for _, a, b in inner[:-1] for t in (a, b)] + [ix.stride for ix in p.indices]
        for w in (16, 8, 4, 2):
            g = w // es
            if g > 1 and inner[-1][0] % g == 0 and src_ptr % w == 0 and dst_ptrs[p.dst] % w == 0 and all(
                    t % g == 0 for t in outer_t + rest + [p.src_offset, p.dst_offset]):
                f = g
                break
    word = es * f
    inner = [(n // f, 1, 1) if i == len(inner) - 1 and f > 1 else (n, a // f, b // f)
             for i, (n, a, b) in enumerate(inner)] or [(1, 0, 0)]
    q = IndexParams(outer=k, inner=len(inner), n_outer=math.prod(p.sizes[:k]),
                    n_inner=math.prod(n for n, _, _ in inner), src_offset=p.src_offset // f,
                    dst_offset=p.dst_offset // f, naxes=len(p.indices), data_type=plan.out_types[p.dst],
                    last_only=int(last_only))
    for d in range(k):
        q.sizes[d], q.src_strides[d], q.dst_strides[d] = p.sizes[d], p.src_strides[d] // f, p.dst_strides[d] // f
    for d, (n, a, b) in enumerate(inner):
        q.isizes[d], q.isrc_strides[d], q.idst_strides[d] = n, a, b
    if const:
        bits = fill_bits(p.value, plan.out_types[p.dst])
        q.has_value, q.value_bits = 1, bits - (1 << 64) if bits >= 1 << 63 else bits
    for a, ix in enumerate(p.indices):
        ax = q.axes[a]
        ax.type, ax.offset, ax.stride, ax.bound = plan.in_types[ix.index], ix.index_offset, ix.stride // f, ix.bound
        ax.mode, ax.skip, ax.axis = ix.mode, int(scatter and ix.out_of_range == 1), ix.axis if ix.mode else -1
        for d in range(k):
            ax.strides[d] = ix.index_strides[d]
    # the keyed side (a scatter's destination, a last-only gather's source): block origin = key_base + slot * key_div
    off, strides = (q.dst_offset, q.dst_strides) if scatter else (q.src_offset, q.src_strides)
    lo = hi = off
    div = 0
    for n, t in [*zip(p.sizes[:k], strides[:k]), *((ix.bound, ix.stride // f) for ix in p.indices)]:
        if n > 1 and t:
            lo, hi, div = lo + min(0, (n - 1) * t), hi + max(0, (n - 1) * t), math.gcd(div, abs(t))
    div = div or 1
    q.key_base, q.key_div = lo, div
    s.slots = (hi - lo) // div + 1
    n_outer = q.n_outer
    if not scatter:
        s.mode = "sort" if last_only else "direct"
    elif acc:
        s.mode = "sort"
    elif const or same:
        s.mode = "direct"
    elif SCATTER_VIA == "auto" and (members := _group(q, k)):
        s.mode, q.members = "group", members
    elif SCATTER_VIA != "sort" and n_outer < 2**32 - 1 and (
            SCATTER_VIA == "owner" or s.slots <= max(OWNER_SLOTS, 4 * n_outer)):
        s.mode = "owner"
    else:
        s.mode = "sort"
    positions = not scatter and not last_only and q.n_inner == 1
    tile = row = 0
    if positions and COLUMN_WALK:
        nbytes = REVERSE_BYTES     # whole lines where the tile fits (halved down to 128 bytes), else 32-byte sectors
        while not tile:
            wide = IndexParams.from_buffer_copy(q)
            kw = _column_walk(wide, k, word, nbytes)
            if REVERSE_TILE and _tile(wide, kw, word):
                q, k, tile = wide, kw, 1
            elif nbytes <= 128:
                k = _column_walk(q, k, word)
                break
            nbytes //= 2
    items = ITEMS if q.n_inner >= ITEMS else 1
    q.groups = -(-q.n_inner // items)
    q.total = n_outer * q.groups
    rows = pieces = 0
    if positions and not tile:
        row = 0 if (pieces := _pieces(q, k, word)) or (rows := _rows(q, k, word)) else _row(q, k, word)
    spread = positions and POSITION_ITEMS > 1 and n_outer >= POSITION_MIN
    if tile or (positions and COLUMN_WALK and REVERSE_TILE and _tile(q, k, word)):
        s.mode = "tile"                         # ix_reverse_tile: a block a column set
        s.smem = q.axes[0].bound * q.sizes[k - 1] * word
    elif pieces:
        s.mode, q.members = "pieces", pieces    # ix_reverse_pieces: a block `pieces` of the total 16-byte pieces
        q.total = n_outer * word // 16
    elif rows:
        s.mode, q.members = "rows", rows        # ix_reverse_rows: a block `rows` rows
        s.smem = rows * (-(-q.sizes[k - 1] * word // 16) * 16)
    elif row:
        s.mode = "row"                          # ix_gather_row: a block a row
    elif spread:                                # ix_gather_positions: POSITION_ITEMS positions a thread
        items, q.total = POSITION_ITEMS, -(-n_outer // POSITION_ITEMS)
    index = "u32" if max(q.total, n_outer, q.n_inner) + THREADS * max(items, 4) < 2**32 else "u64"   # (IX_BATCH)
    s.key_t = "u32" if s.slots < 2**32 - 1 else "u64"
    W, ranks = _SCALAR[word], f"{k}, {len(p.indices)}"
    shape = f"{ranks}, {len(inner)}, {items}"
    if s.mode in ("tile", "rows", "pieces"):
        main = f"ix_reverse_{s.mode}<{W}, {index}, {k}>"
    elif s.mode == "row":
        main = f"ix_gather_row<{W}, {index}, {k}, {int(row == 1)}>"
        s.smem = q.axes[0].bound * word if row == 1 else 0
    elif spread:
        main = f"ix_gather_positions<{W}, {index}, {ranks}, {items}>"
    elif not scatter:
        main = f"ix_gather<{W}, {index}, {shape}>"
    elif s.mode == "group":
        main = f"ix_scatter_group<{W}, {index}, {k}>"
    elif s.mode == "sort":
        main = f"ix_apply<{W}, {index}, {s.key_t}, {int(acc)}, {shape}>"
    else:
        main = f"ix_scatter<{W}, {index}, {int(s.mode == 'owner')}, {shape}>"
    names = [main]
    if s.mode == "owner":
        names.append(f"ix_owner<{index}, {ranks}>")
    if s.mode == "sort":
        names.append(f"ix_keys<{index}, {s.key_t}, {ranks}>")
    s.names = names
    s.main, s.params, s.const, s.word, s.scatter = main, q, const, word, scatter
    return s


class PassPlan:
    """``plan_pass``'s answer."""
    smem = 0

    def launches(self):
        """What the C mirror plans, ``(name, parameter bytes, grid, shared bytes, scratch, aux)`` a launch: a
        scratch-free mode's one launch (scratch 0, aux 0), or the owner mode's two (``ix_owner`` on ``slots`` zeroed
        32-bit words of scratch, then the scatter, both reading it through ``aux``: aux 1); None for the sort mode;
        () where nothing is launched."""
        q = self.params
        if q.n_outer == 0 or q.total == 0:
            return ()
        one = one_kernel(self.mode, q, self.smem)
        if one is not None:
            return ((self.main, bytes(q), -(-one[0] // THREADS), one[1], 0, 0),)
        if self.mode != "owner":
            return None
        return ((self.names[1], bytes(q), -(-q.n_outer // THREADS), 0, self.slots, 1),
                (self.main, bytes(q), -(-q.total // THREADS), 0, 0, 1))


def one_kernel(mode: str, q, smem: int):
    """``(threads, shared bytes)`` of a scratch-free mode's one launch, as the Python launch and the C call cache's
    record read it; None for the owner and sort modes."""
    if mode == "direct":
        return q.total, 0
    if mode in ("tile", "row"):
        return (q.n_outer // (q.members if mode == "tile" else q.sizes[q.outer - 1])) * THREADS, smem
    if mode == "rows":
        return -(-(q.n_outer // q.axes[0].bound) // q.members) * THREADS, smem
    if mode == "pieces":
        return -(-q.total // q.members) * THREADS, 0
    if mode == "group":
        return (q.n_outer // q.members) * THREADS, 4 * q.axes[0].bound
    return None


class IndexPass(PassPlan):
    """One ``Gather``/``Scatter`` pass's launches (its ``plan_pass``), queued by ``(src_ptrs, dst_ptrs, stream_ptr)``;
    ``via``: the C call cache records it through ``call_cache_step``."""

    via = "index"

    def __init__(self, backend, plan: MovePlan, p, src_ptrs, dst_ptrs):
        plan_pass(plan, p, src_ptrs, dst_ptrs, self)
        self.backend, self.pass_ = backend, p
        with backend.device:
            self.functions = {n: _kernel(backend.index, n).ptr for n in self.names}
            if self.smem > 48 * 1024:                  # above the default: the kernel opts in
                backend.cupy.cuda.driver.funcSetAttribute(self.functions[self.main], 8, self.smem)  # MAX_DYNAMIC_SHARED

    def call_cache_step(self, checked: bool = False):
        """This pass as the C call cache records it (``calls.put_move_cuda``): ``(function, grid, block, shared,
        parameter block, src, dst, self, (offsets of src, dst and idx in the block, the inputs the index axes read,
        the flag address's offsets where ``checked``, the array API's index check))``. The cache patches each call's
        addresses into a copy of the block and launches the kernel (a checked call then waits until its kernels have
        checked every index, ``ix_finish``, and reads the flag). Where the pass needs scratch (owner and sort modes)
        the function is 0 and the cache calls this object instead (no flag: ``put_move_cuda`` records no checked call
        holding one). None where it launches nothing."""
        p, q = self.pass_, self.params
        if q.n_outer == 0 or q.total == 0:
            return None
        at = (IndexParams.src.offset, IndexParams.dst.offset, IndexParams.idx.offset,
              tuple(ix.index for ix in p.indices), flag_offsets(len(p.indices)) if checked else ())
        src = -1 if self.const else p.src
        one = one_kernel(self.mode, q, self.smem)
        if one is None:
            return 0, 0, 0, 0, b"", src, p.dst, self, at[:4] + ((),)
        count, smem = one
        return self.functions[self.main], -(-count // THREADS), THREADS, smem, bytes(q), src, p.dst, self, at

    def _launch(self, name: str, count: int, q, stream_ptr: int, smem: int = 0) -> None:
        if count <= 0:
            return
        argv = (ctypes.c_void_p * 1)(ctypes.addressof(q))
        blocks = -(-count // THREADS)
        self.backend.cupy.cuda.driver.launchKernel(self.functions[name], blocks, 1, 1, THREADS, 1, 1, smem,
                                                   stream_ptr, ctypes.addressof(argv), 0)

    def __call__(self, src_ptrs, dst_ptrs, stream_ptr: int = 0) -> None:
        p, q = self.pass_, IndexParams.from_buffer_copy(self.params)
        if q.n_outer == 0 or q.total == 0:
            return
        q.dst = dst_ptrs[p.dst]
        q.src = q.dst if self.const else src_ptrs[p.src]
        for a, ix in enumerate(p.indices):
            q.idx[a] = src_ptrs[ix.index]
        backend = self.backend
        one = one_kernel(self.mode, q, self.smem)
        if one is not None:
            with backend.device:
                self._launch(self.main, one[0], q, stream_ptr, one[1])
            return
        cupy = backend.cupy
        with backend.device, _stream(backend, stream_ptr):
            if self.mode == "owner":
                slots = cupy.zeros(self.slots, dtype=cupy.uint32)
                q.aux = slots.data.ptr
                self._launch(self.names[1], q.n_outer, q, stream_ptr)
                self._launch(self.main, q.total, q, stream_ptr)
                return
            keys = cupy.empty(q.n_outer, dtype=cupy.uint32 if self.key_t == "u32" else cupy.uint64)
            q.keys = keys.data.ptr
            self._launch(self.names[1], q.n_outer, q, stream_ptr)
            order = cupy.argsort(keys)                 # stable: equal keys keep row-major order
            sk = keys[order]
            if not self.scatter:                       # last_only: the last position of each run
                last = cupy.empty(q.n_outer, dtype=cupy.bool_)
                last[-1] = True
                cupy.not_equal(sk[1:], sk[:-1], out=last[:-1])
                flags = cupy.empty(q.n_outer, dtype=cupy.uint8)
                flags[order] = last
                q.aux = flags.data.ptr
            else:
                q.keys, q.order = sk.data.ptr, order.data.ptr
            self._launch(self.main, q.total, q, stream_ptr)


def c_settings() -> tuple:
    """This module's settings as the C mirror of ``plan_pass`` (``runtime/native/cuda_index_spec.c``, newshape.h's
    odml_index_cuda_conf) reads them, anew at each call: 14 ints (the switches as 0 or 1, by truth, as this module
    reads them). A value C cannot read makes it decline the call, which then takes the Python route. (Conditional
    expressions, not ``int()`` calls and a dict: this runs at every never-seen index call.)"""
    return (THREADS, ITEMS, POSITION_ITEMS, 1 if COLUMN_WALK else 0, 1 if REVERSE_TILE else 0, REVERSE_BYTES,
            TILE_SMEM, REVERSE_ROWS, 1 if GATHER_ROW else 0, 1 if ROW_STAGE else 0, GROUP_SLOTS,
            (0 if SCATTER_VIA == "auto" else 1 if SCATTER_VIA == "owner" else 2) + (0 if OWNER_IN_C else 3),
            OWNER_SLOTS, POSITION_MIN)


def relaunch(device: int, function: int, grid: int, smem: int, params: bytes, stream: int) -> None:
    """Queue a launch of an index kernel C made (a ``call_cache_index_new`` entry on CUDA) whose own launch failed,
    addresses already in ``params``, with the device's context made current (a thread that never used CUDA); opendml's
    error names the CUDA error where it fails again."""
    import cupy
    block = ctypes.create_string_buffer(bytes(params), len(params))
    argv = (ctypes.c_void_p * 1)(ctypes.addressof(block))
    with cupy.cuda.Device(device):
        try:
            if smem > 48 * 1024:
                cupy.cuda.driver.funcSetAttribute(function, 8, smem)   # MAX_DYNAMIC_SHARED
            cupy.cuda.driver.launchKernel(function, grid, 1, 1, THREADS, 1, 1, smem, stream,
                                          ctypes.addressof(argv), 0)
        except cupy.cuda.driver.CUDADriverError as exc:
            raise RuntimeError(f"opendml CUDA: launching a cached index kernel (grid {grid}, {smem} bytes of shared "
                               f"memory) failed: {exc}") from None


def zero_words(device: int, ptr: int, words: int, stream: int) -> None:
    """Zero ``words`` 32-bit words at device address ``ptr`` on ``stream`` (an owner table of an entry C made, where
    the driver's memset failed or its library is missing), with the device's context made current; a failure raises
    opendml's error naming the CUDA error."""
    import cupy
    with cupy.cuda.Device(device):
        try:
            cupy.cuda.runtime.memsetAsync(ptr, 0, 4 * words, stream)
        except cupy.cuda.runtime.CUDARuntimeError as exc:
            raise RuntimeError(f"opendml CUDA: zeroing an owner table of {words} words failed: {exc}") from None


def index_move_steps(backend, plan: MovePlan, src_ptrs, dst_ptrs, plain) -> tuple:
    """The ``MoveLaunch`` steps of ``plan`` (checked against the bound ranges): each run of ``Copy``/``Fill`` passes
    as ``plain(sub_plan)`` (the backend's ``MoveLaunch``) gives them, each ``Gather``/``Scatter`` pass an
    ``IndexPass`` (source slot ``backend.INDEX_STEP``)."""
    steps: list = []
    run: list = []

    def flush():
        if run:
            steps.extend(plain(MovePlan(plan.in_types, plan.out_types, tuple(run))).steps)
            run.clear()
    for p in plan.passes:
        if type(p) is Gather or type(p) is Scatter:
            flush()
            if p.count:
                steps.append((IndexPass(backend, plan, p, src_ptrs, dst_ptrs), -2, p.dst))  # INDEX_STEP
        else:
            run.append(p)
    flush()
    return tuple(steps)


__all__ = ["IndexPass", "index_move_steps", "plan_pass", "c_settings", "relaunch", "zero_words",
           "flag_offsets"]
