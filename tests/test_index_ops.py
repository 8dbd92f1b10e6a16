"""The index-driven operators (GATHER, GATHER_ELEMENTS, GATHER_ND(1),
SCATTER_ELEMENTS, SCATTER_ND, ONE_HOT, REVERSE_SUBSEQUENCES): the array API
against the independent reference (tests/index_reference.py) over the 11
data types, the 4 index types, ranks and layouts (packed, padded, negative
strides, broadcast) on every CPU path; hostile indices (huge, negative, out
of range, int64/uint64 extremes) with the check off, through the array API
and the DirectML flow; the index check's message; random descriptions give
opendml errors only; the rules' messages; the support tables per level."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import opendml as dml
from opendml import jsonform
from opendml.model.errors import DmlError
from opendml.model.tensor_desc import TensorDesc

from . import index_reference as ref
from .conftest import n_examples

TYPES = [np.float32, np.float16, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
         np.uint32, np.uint64]
INDEX_TYPES = [np.int32, np.int64, np.uint32, np.uint64]
SETTINGS = settings(max_examples=n_examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                         HealthCheck.too_slow])
F32, U32, I32, I64, U64 = (dml.DataType.FLOAT32, dml.DataType.UINT32, dml.DataType.INT32, dml.DataType.INT64,
                           dml.DataType.UINT64)


def _layout(draw, x):
    """``x``'s values in one of four layouts (a 0-d array as it is: indexing
    it with ``()`` would give a NumPy scalar, which is not an array)."""
    layout = draw(st.sampled_from(["packed", "padded", "negative", "broadcast"]))
    if x.ndim == 0:
        return x
    if layout == "padded":
        big = np.zeros(tuple(2 * s for s in x.shape), x.dtype)
        big[tuple(slice(0, 2 * s, 2) for s in x.shape)] = x
        return big[tuple(slice(0, 2 * s, 2) for s in x.shape)]
    if layout == "negative":
        flip = tuple(slice(None, None, -1) for _ in x.shape)
        return x[flip].copy()[flip]
    if layout == "broadcast" and x.ndim >= 2 and x.shape[0] > 1:      # axis 0 (never an index tuple axis)
        return np.broadcast_to(x[:1], x.shape)
    return x


@st.composite
def data(draw, shape):
    dt = np.dtype(draw(st.sampled_from(TYPES)))
    n = int(np.prod(shape))
    with np.errstate(over="ignore"):
        x = (np.arange(n) + 1).astype(dt).reshape(shape)
    return _layout(draw, x)


@st.composite
def index_array(draw, shape, bounds, dtype=None):
    """In-range indices for dimensions of sizes ``bounds`` (one, or one per
    entry of the last axis), negative ones for signed types."""
    dt = np.dtype(dtype or draw(st.sampled_from(INDEX_TYPES)))
    b = np.broadcast_to(np.asarray(bounds), shape) if shape else np.asarray(bounds).reshape(())
    u = draw(hnp.arrays(np.float64, shape, elements=st.floats(0, 1, exclude_max=True)))
    v = np.floor(u * b).astype(np.int64)
    if dt.kind == "i":
        neg = draw(hnp.arrays(np.bool_, shape))
        v = np.where(neg, v - b, v)
    return _layout(draw, np.asarray(v.astype(dt)))      # 0-d: an array (np.floor gave a scalar)


def shape_of(draw, rank, lo=1, hi=4):
    return tuple(draw(st.lists(st.integers(lo, hi), min_size=rank, max_size=rank)))


def same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == np.ascontiguousarray(want).tobytes()


# -- properties ---------------------------------------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_gather(backend, d):
    rx = d.draw(st.integers(1, 3))
    xs = shape_of(d.draw, rx)
    x = d.draw(data(xs))
    axis = d.draw(st.integers(-rx, rx - 1))
    ri = d.draw(st.integers(0, 2))
    idx = d.draw(index_array(shape_of(d.draw, ri), xs[axis]))
    same(dml.gather(x, idx, axis), ref.gather(x, idx, axis % rx))


@SETTINGS
@given(st.data())
def test_gather_elements(backend, d):
    rx = d.draw(st.integers(1, 4))
    xs = shape_of(d.draw, rx)
    x = d.draw(data(xs))
    axis = d.draw(st.integers(0, rx - 1))
    ishape = tuple(d.draw(st.integers(1, 5)) if k == axis else n for k, n in enumerate(xs))
    idx = d.draw(index_array(ishape, xs[axis]))
    same(dml.gather_elements(x, idx, axis), ref.gather_elements(x, idx, axis))


@SETTINGS
@given(st.data())
def test_gather_nd(backend, d):
    rx = d.draw(st.integers(1, 4))
    xs = shape_of(d.draw, rx)
    b = d.draw(st.integers(0, rx - 1))
    q = d.draw(st.integers(1, rx - b))
    mid = shape_of(d.draw, d.draw(st.integers(0, 2)))
    ishape = xs[:b] + mid + (q,)
    x = d.draw(data(xs))
    idx = d.draw(index_array(ishape, xs[b:b + q]))
    same(dml.gather_nd(x, idx, b), ref.gather_nd(x, idx, b))


@SETTINGS
@given(st.data())
def test_scatter_elements(backend, d):
    rx = d.draw(st.integers(1, 4))
    xs = shape_of(d.draw, rx)
    x = d.draw(data(xs))
    axis = d.draw(st.integers(0, rx - 1))
    ishape = tuple(d.draw(st.integers(1, 5)) if k == axis else n for k, n in enumerate(xs))
    idx = d.draw(index_array(ishape, xs[axis]))
    with np.errstate(over="ignore"):
        upd = _layout(d.draw, (np.arange(int(np.prod(ishape))) + 100).astype(x.dtype).reshape(ishape))
    same(dml.scatter_elements(x, idx, upd, axis), ref.scatter_elements(x, idx, upd, axis))


@SETTINGS
@given(st.data())
def test_scatter_nd(backend, d):
    rx = d.draw(st.integers(1, 4))
    xs = shape_of(d.draw, rx)
    q = d.draw(st.integers(1, rx))
    mid = shape_of(d.draw, d.draw(st.integers(0, 2)))
    x = d.draw(data(xs))
    idx = d.draw(index_array(mid + (q,), xs[:q]))
    ushape = mid + xs[q:]
    with np.errstate(over="ignore"):
        upd = _layout(d.draw, (np.arange(int(np.prod(ushape))) + 100).astype(x.dtype).reshape(ushape))
    same(dml.scatter_nd(x, idx, upd), ref.scatter_nd(x, idx, upd))


def _fixed_layout(x, layout):
    """``x``'s values in ``layout`` (as ``_layout`` draws them); "broadcast"
    repeats row 0 along axis 0 with stride 0 (``x`` is constant along it)."""
    if layout == "broadcast":
        assert (x == x[:1]).all()
        return np.broadcast_to(x[:1], x.shape)
    if layout == "padded":
        big = np.zeros(tuple(2 * s for s in x.shape), x.dtype)
        big[tuple(slice(0, 2 * s, 2) for s in x.shape)] = x
        return big[tuple(slice(0, 2 * s, 2) for s in x.shape)]
    if layout == "negative":
        flip = tuple(slice(None, None, -1) for _ in x.shape)
        return x[flip].copy()[flip]
    return x


# (operator, x shape, indices (every one repeated), updates shape, axis of scatter_elements)
DUPLICATE_SCATTERS = [
    ("nd", (1,), [[0], [0]], (2,), None),
    ("nd", (1, 1), [[0], [0]], (2, 1), None),
    ("nd", (3, 2), [[1], [1], [1]], (3, 2), None),
    ("nd", (4,), [[2], [0], [2], [0]], (4,), None),
    ("elements", (1,), [0, 0, 0], (3,), 0),
    ("elements", (1, 1), [[0], [0]], (2, 1), 0),
    ("elements", (2, 3), [[0, 2, 0, 2], [0, 2, 0, 2]], (2, 4), 1),
    ("elements", (3, 2), [[1, 0], [1, 0], [1, 0]], (3, 2), 0),
]


@pytest.mark.parametrize("case", DUPLICATE_SCATTERS, ids=lambda c: f"{c[0]}-{c[1]}-{len(c[2])}")
def test_scatter_duplicates_last_write_wins_on_every_layout(case):
    """Repeated destinations keep the last update in index order, whatever the
    layouts of x, indices (packed, padded, negative strides, broadcast: stride
    0 along axis 0, which left a repeated destination inside the block NumPy
    copied in its own order, backwards for a negative-stride source) and
    updates, on both CPU kernel kinds, and on a repeated call of one layout
    after calls with the others (the cached plans and call caches)."""
    op, xs, idx_values, us, axis = case
    kinds = ("numpy", "compiled") if dml.config().compiled_available else ("numpy",)
    x0 = (np.arange(int(np.prod(xs))) + 1).astype(np.float32).reshape(xs)
    i0 = np.array(idx_values, np.uint32)
    u0 = (np.arange(int(np.prod(us))) + 100).astype(np.float32).reshape(us)
    if op == "nd":
        run, want = (lambda x, i, u: dml.scatter_nd(x, i, u)), ref.scatter_nd(x0, i0, u0)
    else:
        run, want = (lambda x, i, u: dml.scatter_elements(x, i, u, axis)), ref.scatter_elements(x0, i0, u0, axis)
    if op == "nd" and xs == (1,):
        assert want.tolist() == [101.0]                  # the last of the repeated writes
    index_layouts = ["packed", "padded", "negative"] + (["broadcast"] if (i0 == i0[:1]).all() else [])
    combos = [(lx, li, lu) for lx in ("packed", "padded", "negative") for li in index_layouts
              for lu in ("packed", "padded", "negative")]
    for kind in kinds:
        with dml.configure(cpu_kernels=kind):
            for lx, li, lu in combos + combos[::-1] + combos:     # each layout again after the others
                for itype in (np.uint32, np.int64):
                    got = run(_fixed_layout(x0, lx), _fixed_layout(i0.astype(itype), li), _fixed_layout(u0, lu))
                    assert got.tobytes() == want.tobytes(), (kind, lx, li, lu, itype, got, want)


@SETTINGS
@given(st.data())
def test_one_hot(backend, d):
    ri = d.draw(st.integers(0, 3))
    ishape = shape_of(d.draw, ri)
    depth = d.draw(st.integers(1, 5))
    dt = np.dtype(d.draw(st.sampled_from(INDEX_TYPES)))
    lo = -depth - 2 if dt.kind == "i" else 0
    idx = _layout(d.draw, d.draw(hnp.arrays(dt, ishape, elements=st.integers(lo, depth + 2))))
    vt = np.dtype(d.draw(st.sampled_from(TYPES)))
    values = np.array([3, 7], vt)
    axis = d.draw(st.integers(-ri - 1, ri))
    same(dml.one_hot(idx, depth, values, axis), ref.one_hot(idx, depth, 3, 7, axis % (ri + 1), vt))


@SETTINGS
@given(st.data())
def test_reverse_subsequences(backend, d):
    rx = d.draw(st.integers(1, 4))
    xs = shape_of(d.draw, rx, hi=5)
    x = d.draw(data(xs))
    axis = d.draw(st.integers(0, rx - 1))
    lshape = tuple(1 if k == axis else n for k, n in enumerate(xs))
    dt = d.draw(st.sampled_from([np.uint32, np.uint64]))
    lengths = _layout(d.draw, d.draw(hnp.arrays(dt, lshape, elements=st.integers(0, xs[axis] + 3))))
    same(dml.reverse_subsequences(x, lengths, axis), ref.reverse_subsequences(x, lengths, axis))


# -- the C call cache (repeated NumPy calls) ---------------------------------------------------------------

def _cache_hits():
    from opendml.runtime import calls
    return calls.info()["hits"] if calls.move is not calls._miss else None


def _renew(a, index_bound=None):
    """New values in ``a`` in place, its layout kept (a read-only broadcast
    view keeps its values): an index array reversed along axis 0 (every value
    stays in range for its position's bound; "tuples": the last axis holds
    index tuples), data shifted by one."""
    if not a.flags.writeable or a.ndim == 0 or (index_bound == "tuples" and a.ndim == 1):
        return                                      # (an index tuple's entries have bounds of their own)
    with np.errstate(over="ignore"):
        a[...] = a[::-1].copy() if index_bound else a + np.ones((), a.dtype)


def _cache_case(d):
    """(function of check_indices, reference function, arrays to renew, index arrays, whether their last
    axis holds index tuples) for one drawn call."""
    op = d.draw(st.sampled_from(["gather", "gather_elements", "gather_nd", "scatter_elements", "scatter_nd",
                                 "one_hot", "reverse"]))
    rx = d.draw(st.integers(1, 3))
    xs = shape_of(d.draw, rx)
    x = d.draw(data(xs))
    if op == "gather":
        axis = d.draw(st.integers(-rx, rx - 1))
        idx = d.draw(index_array(shape_of(d.draw, d.draw(st.integers(0, 2))), xs[axis]))
        return (lambda c: dml.gather(x, idx, axis, check_indices=c)), (lambda: ref.gather(x, idx, axis % rx)), \
            [x], [idx], False
    if op in ("gather_elements", "scatter_elements"):
        axis = d.draw(st.integers(0, rx - 1))
        ishape = tuple(d.draw(st.integers(1, 4)) if k == axis else n for k, n in enumerate(xs))
        idx = d.draw(index_array(ishape, xs[axis]))
        if op == "gather_elements":
            return (lambda c: dml.gather_elements(x, idx, axis, check_indices=c)), \
                (lambda: ref.gather_elements(x, idx, axis)), [x], [idx], False
        with np.errstate(over="ignore"):
            upd = _layout(d.draw, (np.arange(int(np.prod(ishape))) + 100).astype(x.dtype).reshape(ishape))
        return (lambda c: dml.scatter_elements(x, idx, upd, axis, check_indices=c)), \
            (lambda: ref.scatter_elements(x, idx, upd, axis)), [x, upd], [idx], False
    if op in ("gather_nd", "scatter_nd"):
        b = d.draw(st.integers(0, rx - 1)) if op == "gather_nd" else 0
        q = d.draw(st.integers(1, rx - b))
        mid = shape_of(d.draw, d.draw(st.integers(0, 2)))
        idx = d.draw(index_array(xs[:b] + mid + (q,), xs[b:b + q]))
        if op == "gather_nd":
            return (lambda c: dml.gather_nd(x, idx, b, check_indices=c)), (lambda: ref.gather_nd(x, idx, b)), \
                [x], [idx], True
        ushape = mid + xs[q:]
        with np.errstate(over="ignore"):
            upd = _layout(d.draw, (np.arange(int(np.prod(ushape))) + 100).astype(x.dtype).reshape(ushape))
        return (lambda c: dml.scatter_nd(x, idx, upd, check_indices=c)), (lambda: ref.scatter_nd(x, idx, upd)), \
            [x, upd], [idx], True
    if op == "one_hot":
        depth = d.draw(st.integers(1, 5))
        dt = np.dtype(d.draw(st.sampled_from(INDEX_TYPES)))
        idx = _layout(d.draw, d.draw(hnp.arrays(dt, xs, elements=st.integers(-depth - 2 if dt.kind == "i" else 0,
                                                                               depth + 2))))
        values = np.array([3, 7], x.dtype)
        axis = d.draw(st.integers(-rx - 1, rx))
        return (lambda c: dml.one_hot(idx, depth, values, axis)), \
            (lambda: ref.one_hot(idx, depth, values[0], values[1], axis % (rx + 1), x.dtype)), [values], [idx], False
    axis = d.draw(st.integers(0, rx - 1))
    lshape = tuple(1 if k == axis else n for k, n in enumerate(xs))
    dt = d.draw(st.sampled_from([np.uint32, np.uint64]))
    lengths = _layout(d.draw, d.draw(hnp.arrays(dt, lshape, elements=st.integers(0, xs[axis] + 3))))
    return (lambda c: dml.reverse_subsequences(x, lengths, axis)), \
        (lambda: ref.reverse_subsequences(x, lengths, axis)), [x], [lengths], False


@SETTINGS
@given(st.data())
def test_repeated_calls_from_the_c_call_cache_equal_the_reference(backend, d):
    """A call repeated on arrays of the same dtypes, shapes and strides but
    new values (served from the C call cache with the compiled kernels) gives
    the reference's bytes, with and without the index check, and leaves the
    earlier output alone; every operator, data type, index type, rank and
    layout."""
    run, want, data_arrays, index_arrays, tuples = _cache_case(d)
    check = d.draw(st.booleans())
    first = run(check)
    same(first, want())
    kept = first.copy()
    for a in data_arrays:
        _renew(a)
    for a in index_arrays:
        _renew(a, index_bound="tuples" if tuples else True)
    hits = _cache_hits()
    for _ in range(2):
        same(run(check), want())
    same(first, kept)
    # (indices broadcast along an axis are not all read by the passes: a checked call takes the route)
    broadcast = any(t == 0 and n > 1 for a in index_arrays for t, n in zip(a.strides, a.shape))
    if hits is not None and backend == "cpu" and dml.config().cpu_kernels == "compiled" and not (check and broadcast):
        assert _cache_hits() > hits


@pytest.mark.parametrize("dt", INDEX_TYPES)
def test_cached_calls_name_the_same_bad_index_and_clamp_hostile_ones(dt):
    """A bad index in a call the C cache holds: with the check, the route's
    error (the first bad index, by position) whatever the index's place; without,
    the reference's clamped result, for every hostile value."""
    x = np.arange(1, 31, dtype=np.float32).reshape(5, 6)
    good = np.array([[0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0]], dt)
    upd = np.arange(100, 112, dtype=np.float32).reshape(2, 6)
    calls = {"gather": lambda i, c: dml.gather(x, i, 1, check_indices=c),
             "gather_elements": lambda i, c: dml.gather_elements(x, i % 5 if i is good else i, 0, check_indices=c),
             "scatter_elements": lambda i, c: dml.scatter_elements(x, i % 5 if i is good else i, upd, 0,
                                                                   check_indices=c)}
    refs = {"gather": lambda i: ref.gather(x, i, 1), "gather_elements": lambda i: ref.gather_elements(x, i, 0),
            "scatter_elements": lambda i: ref.scatter_elements(x, i, upd, 0)}
    for name, call in calls.items():
        for c in (True, False):
            call(good, c)
            call(good, c)                           # recorded, then served from the cache
        for pos in [(0, 0), (1, 3), (1, 5)]:
            for v in hostile(dt, 19):
                bad = (good % 5).astype(dt)
                bad[pos] = v
                n = 6 if name == "gather" else 5
                if -n <= int(v) < n and not (dt in (np.uint32, np.uint64) and int(v) < 0):
                    continue
                with pytest.raises(dml.ValidationError) as cached:
                    call(bad, True)
                with dml.configure(call_cache=False):
                    with pytest.raises(dml.ValidationError) as route:
                        call(bad, True)
                assert str(cached.value) == str(route.value)
                assert f"indices[{pos[0]}, {pos[1]}] = {int(v)} is out of range" in str(cached.value)
                same(call(bad, False), refs[name](bad))
    tup = np.array([[0, 1], [4, 5], [2, 2]], dt)
    for c in (True, False, True):
        same(dml.gather_nd(x, tup, check_indices=c), ref.gather_nd(x, tup))
        same(dml.scatter_nd(x, tup, upd[0, :3], check_indices=c), ref.scatter_nd(x, tup, upd[0, :3]))
    for v in hostile(dt, 19):
        bad = tup.copy()
        bad[2, 1] = v
        if 0 <= int(v) < 6 or (dt in (np.int32, np.int64) and -6 <= int(v) < 0):
            continue
        for run in (lambda c: dml.gather_nd(x, bad, check_indices=c),
                    lambda c: dml.scatter_nd(x, bad, upd[0, :3], check_indices=c)):
            with pytest.raises(dml.ValidationError, match=rf"indices\[2, 1\] = {int(v)} is out of range"):
                run(True)
        same(dml.gather_nd(x, bad, check_indices=False), ref.gather_nd(x, bad))
        same(dml.scatter_nd(x, bad, upd[0, :3], check_indices=False), ref.scatter_nd(x, bad, upd[0, :3]))


def test_cached_call_on_broadcast_indices_checks_each_one():
    """Indices broadcast along an axis (stride 0) are read once per distinct
    element, so the fused check does not see every logical index: a cached
    call with the check takes the route, which names the first bad one."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    good = np.broadcast_to(np.array([[0, 3]], np.int64), (3, 2))
    bad = np.broadcast_to(np.array([[0, 7]], np.int64), (3, 2))
    for _ in range(3):
        same(dml.gather_elements(x, good, 1), ref.gather_elements(x, good, 1))
        same(dml.gather_elements(x, bad, 1, check_indices=False), ref.gather_elements(x, bad, 1))
    for _ in range(2):
        with pytest.raises(dml.ValidationError, match=r"indices\[0, 1\] = 7 is out of range"):
            dml.gather_elements(x, bad, 1)


def test_c_call_cache_follows_the_settings_and_a_spy():
    """configure(call_cache=False) and the NumPy kernels serve nothing from
    the C cache; a replaced engine.execute (a spy) is given every call."""
    from opendml.arrays import engine
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    ids = np.array([2, 0], np.int32)
    for _ in range(2):
        same(dml.gather(x, ids, 1), ref.gather(x, ids, 1))
    hits = _cache_hits()
    if hits is None:
        pytest.skip("the compiled kernels are not installed")
    for settings_ in ({"call_cache": False}, {"cpu_kernels": "numpy"}):
        with dml.configure(**settings_):
            for _ in range(3):
                same(dml.gather(x, ids, 1), ref.gather(x, ids, 1))
        assert _cache_hits() == hits
    seen = []
    real = engine.execute

    def spy(desc, arrays):
        seen.append(desc.OPERATOR)
        return real(desc, arrays)
    engine.execute = spy
    try:
        for _ in range(3):
            same(dml.gather(x, ids, 1), ref.gather(x, ids, 1))
    finally:
        engine.execute = real
    assert seen == ["GATHER"] * 3 and _cache_hits() == hits


def test_c_call_cache_refuses_malformed_records_and_arguments():
    """``put_move`` keeps no index pass it cannot run safely (parameters of
    the wrong size, index slots past the inputs, an element size or index
    type that does not match the arrays, a reach past a buffer, a wrong
    origin, a stale generation) and ``move`` answers None for what it does
    not key."""
    from opendml.arrays import index_ops
    from opendml.runtime import calls
    from opendml.runtime.cpu.backend import IndexParams
    if calls.move is calls._miss:
        pytest.skip("the compiled kernels are not installed")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    ids = np.array([1, 2], np.int64)
    given, args = (x, ids), (True, 0, None)
    good = IndexParams(kind=0, element_size=4, data_type=1, rank=2, outer=1, naxes=1)
    good.sizes[:2] = (2, 4)
    good.src_strides[:2] = (0, 1)
    good.dst_strides[:2] = (4, 1)
    ax = good.axes[0]
    ax.slot, ax.type, ax.offset, ax.stride, ax.bound = 1, 11, 0, 4, 3
    ax.strides[:2] = (1, 0)

    def changed(**fields):
        p = IndexParams.from_buffer_copy(bytes(good))
        for name, value in fields.items():
            if name.startswith("ax_"):
                setattr(p.axes[0], name[3:], value)
            else:
                setattr(p, name, value)
        return bytes(p)
    out = (((2, 4), x.dtype, False),)
    dml.configure()
    since = calls.generation()
    for params, origins, gen in [(b"short", (0, 0), since), (changed(ax_slot=2), (0, 0), since),
                                 (changed(ax_bound=0), (0, 0), since), (changed(ax_bound=4), (0, 0), since),
                                 (changed(ax_type=6), (0, 0), since), (changed(element_size=8), (0, 0), since),
                                 (changed(dst_offset=1), (0, 0), since), (bytes(good), (4, 0), since),
                                 (bytes(good), (0, 0), since + 1)]:
        try:
            stored = calls.put_move("gather", given, args, out, origins, ((2, 0, 0, params, 1, True),), False, gen)
        except ValueError:
            stored = False
        assert stored is False
        assert calls.move(calls.OPS["gather"], given, *args) is None
    assert calls.put_move("gather", given, args, out, (0, 0), ((2, 0, 0, bytes(good), 1, True),), False, since)
    same(calls.move(calls.OPS["gather"], given, *args), x[[1, 2]])
    # a bad index in a checked pass: None (the route raises)
    assert calls.move(calls.OPS["gather"], (x, np.array([1, 3], np.int64)), *args) is None
    for other in [((x, ids), (1, 0, None)), ((x, ids), (True, np.int64(0), None)),
                  ((x, ids.astype(">i8")), args), ((x, list(ids)), args), ((x,), args), ((x, ids), (True, 2 ** 70, None))]:
        assert calls.move(calls.OPS["gather"], *other[:1], *other[1]) is None
    dml.configure()                                   # any configure() empties it
    assert calls.move(calls.OPS["gather"], given, *args) is None


def test_cached_calls_from_threads():
    from .conftest import run_in_threads
    xs = [np.arange(40, dtype=np.float32).reshape(5, 8) + k for k in range(4)]

    def work(k):
        for j in range(300):
            ids = np.array([(j + k) % 5, (j * 3) % 5], np.int64)
            same(dml.gather(xs[k], ids, 0), ref.gather(xs[k], ids, 0))
            tup = np.array([[j % 5, (j + k) % 8]], np.int32)
            same(dml.gather_nd(xs[k], tup), ref.gather_nd(xs[k], tup))
    run_in_threads(work)


# -- hostile indices ----------------------------------------------------------------------------------------

EXTREMES = [-2 ** 63, -2 ** 63 + 1, -2 ** 31, -2 ** 31 + 1, -7, -6, -5, -4, -1, 0, 1, 4, 5, 6, 2 ** 31 - 1,
            2 ** 31, 2 ** 32 - 1, 2 ** 63 - 1, 2 ** 64 - 1]


def hostile(dt, n):
    info = np.iinfo(dt)
    v = [e for e in EXTREMES if info.min <= e <= info.max]
    return np.array((v * (n // len(v) + 1))[:n], dt)


@pytest.mark.parametrize("dt", INDEX_TYPES)
def test_hostile_indices_are_clamped_never_outside(backend, dt):
    x = np.arange(1, 31, dtype=np.float32).reshape(5, 6)
    idx = hostile(dt, 12).reshape(2, 6)
    same(dml.gather(x, idx, 1, check_indices=False), ref.gather(x, idx, 1))
    same(dml.gather_elements(x, idx, 0, check_indices=False), ref.gather_elements(x, idx, 0))
    upd = np.arange(100, 112, dtype=np.float32).reshape(2, 6)
    same(dml.scatter_elements(x, idx, upd, 0, check_indices=False), ref.scatter_elements(x, idx, upd, 0))
    tup = hostile(dt, 24).reshape(12, 2)
    same(dml.gather_nd(x, tup, check_indices=False), ref.gather_nd(x, tup))
    same(dml.scatter_nd(x, tup, np.arange(12, dtype=np.float32), check_indices=False),
         ref.scatter_nd(x, tup, np.arange(12, dtype=np.float32)))
    same(dml.one_hot(idx, 5, np.array([0, 1], np.float32)), ref.one_hot(idx, 5, 0, 1, 2, np.float32))
    if dt in (np.uint32, np.uint64):
        lengths = hostile(dt, 6).reshape(1, 6)
        same(dml.reverse_subsequences(x, lengths, 0), ref.reverse_subsequences(x, lengths, 0))


@pytest.mark.parametrize("dt", [U32, I32, I64, U64])
def test_hostile_indices_through_the_directml_flow(backend, dt):
    """The DirectML flow has no index check (a description holds no data):
    every value is clamped into the dimension, the output's padded strides
    keep their gaps untouched."""
    npdt = dt.numpy_dtype
    x = np.arange(1, 21, dtype=np.float32).reshape(4, 5)
    idx = hostile(npdt, 8).reshape(1, 8)
    out = TensorDesc(F32, [4, 8], strides=[9, 1])
    desc = dml.GatherOperatorDesc(TensorDesc(F32, [4, 5]), TensorDesc(dt, [1, 8]), out, 1, 1)
    dev = dml.Device(backend)
    compiled = dev.compile_operator(desc)
    table = dev.create_binding_table(compiled)
    bx, bi = dev.upload(x), dev.upload(idx)
    ob = dev.create_buffer(out.total_tensor_size_in_bytes + 64)
    ob.write(np.full((out.total_tensor_size_in_bytes + 64) // 4, 77, np.float32))
    table.bind_inputs([dml.BufferBinding(bx), dml.BufferBinding(bi)])
    table.bind_outputs([dml.BufferBinding(ob)])
    dev.execute(compiled, table)
    raw = ob.read(TensorDesc(F32, [(out.total_tensor_size_in_bytes + 64) // 4]))
    got = np.lib.stride_tricks.as_strided(raw, (4, 8), (36, 4))
    same(np.ascontiguousarray(got), ref.gather(x, idx[0], 1))
    gaps = np.ones(raw.shape, bool)
    gaps[[r * 9 + c for r in range(4) for c in range(8)]] = False
    assert (raw[gaps] == 77).all()


def test_index_check_names_the_first_bad_index():
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(dml.ValidationError, match=r"^gather: indices\[1, 0\] = 4 is out of range: it must be in "
                                                  r"\[-4, 3\]"):
        dml.gather(x, np.array([[0, 1], [4, 9]], np.int64), 1)
    with pytest.raises(dml.ValidationError, match=r"^gather: indices\[2\] = 3 is out of range: it must be in \[0, 2\]"):
        dml.gather(x, np.array([0, 2, 3], np.uint32), 0)
    with pytest.raises(dml.ValidationError, match=r"^gather_nd: indices\[0, 1\] = -5 is out of range"):
        dml.gather_nd(x, np.array([[0, -5]], np.int32))
    with pytest.raises(dml.ValidationError, match=r"^scatter_elements: indices\[0, 3\] = 18446744073709551615"):
        dml.scatter_elements(x, np.array([[0, 1, 2, 2 ** 64 - 1]], np.uint64), np.zeros((1, 4), np.float32), 0)
    with pytest.raises(dml.ValidationError, match=r"^scatter_nd: indices\[0, 0\] = -9223372036854775808"):
        dml.scatter_nd(x, np.array([[-2 ** 63]], np.int64), np.zeros((1, 4), np.float32))
    with pytest.raises(dml.ValidationError, match=r"^gather_elements: indices\[0, 0\] = 3"):
        dml.gather_elements(x, np.array([[3, 0, 0, 0]], np.int32), 0)


def test_duplicate_scatter_indices_keep_the_last_write():
    x = np.zeros(4, np.float32)
    out = dml.scatter_elements(x, np.array([1, 1, 3, 1, 3], np.int32), np.arange(1, 6, dtype=np.float32), 0)
    assert out.tolist() == [0, 4, 0, 5]
    out = dml.scatter_nd(np.zeros((3, 2), np.int16), np.array([[2], [0], [2]], np.uint64),
                         np.array([[1, 2], [3, 4], [5, 6]], np.int16))
    assert out.tolist() == [[3, 4], [0, 0], [5, 6]]


# -- descriptions: rules and messages -----------------------------------------------------------------------

def T(dt, sizes, **kw):
    return TensorDesc(dt, sizes, **kw)


@pytest.mark.parametrize("make, message", [
    (lambda: dml.GatherOperatorDesc(T(F32, [3, 2]), T(U32, [1, 2]), None, 2, 1),
     r"^GATHER: Axis must be in \[0, 1\] \(\[0, InputTensor.DimensionCount\)\); got 2$"),
    (lambda: dml.GatherOperatorDesc(T(F32, [3, 2]), T(U32, [1, 2]), None, 1, 3),
     r"^GATHER: IndexDimensions must be in \[0, 2\]"),
    (lambda: dml.GatherOperatorDesc(T(F32, [3, 2]), T(U32, [1, 2]), None, 1, 2),
     r"^GATHER: the original rank of InputTensor .* 2 \+ 2 - 1 > 2$"),
    (lambda: dml.GatherOperatorDesc(T(F32, [3, 2]), T(U32, [2, 2]), None, 1, 1),
     r"^GATHER: IndicesTensor.Sizes\[0\] must be 1 \(a leading dimension before the last IndexDimensions = 1\); "
     r"got 2"),
    (lambda: dml.GatherOperatorDesc(T(F32, [3, 2]), T(dml.DataType.FLOAT32, [1, 2]), None, 1, 1),
     r"^GATHER: IndicesTensor.DataType FLOAT32 is not supported at feature level 6_4 \(supported: UINT32, INT32, "
     r"UINT64, INT64\)$"),
    (lambda: dml.GatherOperatorDesc(T(F32, [3, 2]), T(U32, [1, 2]), T(I32, [3, 2]), 1, 1),
     r"^GATHER: OutputTensor.DataType must equal InputTensor.DataType; got INT32 != FLOAT32$"),
    (lambda: dml.GatherOperatorDesc(T(F32, [3, 2]), T(U32, [1, 2]), T(F32, [3, 3]), 1, 1),
     r"^GATHER: OutputTensor.Sizes\[1\] must be .* = 2; got 3"),
    (lambda: dml.GatherElementsOperatorDesc(T(F32, [3, 3]), T(U32, [2, 2]), None, 0),
     r"^GATHER_ELEMENTS: IndicesTensor.Sizes\[1\] must equal InputTensor.Sizes\[1\] \(every dimension but Axis "
     r"0\); got 2 != 3$"),
    (lambda: dml.GatherNdOperatorDesc(T(F32, [2, 2]), T(U32, [2, 3]), None, 2, 2),
     r"^GATHER_ND: IndicesTensor.Sizes\[1\] \(the index tuple size\) must be in \[1, InputDimensionCount - "
     r"BatchDimensionCount\] = \[1, 2\]; got 3$"),
    (lambda: dml.GatherNd1OperatorDesc(T(F32, [1, 3, 2, 2]), T(U32, [1, 2, 2, 2]), None, 3, 3, 1),
     r"^GATHER_ND1: batch dimension 0: InputTensor.Sizes\[1\] must equal IndicesTensor.Sizes\[1\]; got 3 != 2$"),
    (lambda: dml.GatherNd1OperatorDesc(T(F32, [3, 2]), T(U32, [3, 1]), None, 2, 2, 2),
     r"^GATHER_ND1: BatchDimensionCount must be < InputDimensionCount and < IndicesDimensionCount"),
    (lambda: dml.GatherNdOperatorDesc(T(F32, [3, 2]), T(U32, [3, 1]), None, 0, 2),
     r"^GATHER_ND: InputDimensionCount must be in \[1, 2\] \(\[1, InputTensor.DimensionCount\]\); got 0$"),
    (lambda: dml.ScatterElementsOperatorDesc(T(F32, [3, 3]), T(U32, [2, 3]), T(F32, [2, 2]), None, 0),
     r"^SCATTER_ELEMENTS: UpdatesTensor.Sizes\[1\] must equal IndicesTensor.Sizes\[1\]; got 2 != 3$"),
    (lambda: dml.ScatterElementsOperatorDesc(T(F32, [3, 3]), T(U32, [2, 3]), T(I32, [2, 3]), None, 0),
     r"^SCATTER_ELEMENTS: UpdatesTensor.DataType must equal InputTensor.DataType; got INT32 != FLOAT32$"),
    (lambda: dml.ScatterNdOperatorDesc(T(F32, [1, 8]), T(U32, [4, 1]), T(F32, [1, 3]), None, 1, 2),
     r"^SCATTER_ND: UpdatesTensor.Sizes\[1\] must be .* = 4; got 3"),
    (lambda: dml.OneHotOperatorDesc(T(U32, [1, 3, 2]), T(F32, [1, 1, 2]), T(F32, [1, 3, 4]), 2),
     r"^ONE_HOT: IndicesTensor.Sizes\[2\] \(the Axis dimension\) must be 1; got 2$"),
    (lambda: dml.OneHotOperatorDesc(T(U32, [3, 1]), T(F32, [1, 1]), T(F32, [3, 4]), 1),
     r"^ONE_HOT: ValuesTensor must hold at least two elements \(OffValue, OnValue\); got 1"),
    (lambda: dml.OneHotOperatorDesc(T(U32, [3, 1]), T(F32, [1, 2]), T(I32, [3, 4]), 1),
     r"^ONE_HOT: OutputTensor.DataType must equal ValuesTensor.DataType; got INT32 != FLOAT32$"),
    (lambda: dml.ReverseSubsequencesOperatorDesc(T(F32, [3, 4]), T(I32, [3, 1]), None, 1),
     r"^REVERSE_SUBSEQUENCES: SequenceLengthsTensor.DataType INT32 is not supported at feature level 6_4 "
     r"\(supported: UINT32, UINT64\)$"),
    (lambda: dml.ReverseSubsequencesOperatorDesc(T(F32, [3, 4]), T(U32, [3, 4]), None, 1),
     r"^REVERSE_SUBSEQUENCES: SequenceLengthsTensor.Sizes\[1\] \(the Axis dimension\) must be 1; got 4$"),
])
def test_rule_messages(make, message):
    with pytest.raises((dml.ValidationError, dml.UnsupportedError), match=message):
        make()


def test_support_tables_per_feature_level():
    g = dml.GatherOperatorDesc(T(F32, [1, 1, 3, 2]), T(I64, [1, 1, 1, 4]), None, 2, 1)
    with pytest.raises(dml.UnsupportedError, match=r"^GATHER: IndicesTensor.DataType INT64 is not supported at "
                                                   r"feature level 2_1 \(supported: UINT32\); it needs feature "
                                                   r"level 3_0 or later$"):
        g.validate("2_1")
    assert g.lowest_feature_level() == dml.FeatureLevel.FL_3_0
    u = dml.GatherOperatorDesc(T(F32, [1, 1, 3, 2]), T(U32, [1, 1, 1, 4]), None, 2, 1)
    assert u.lowest_feature_level() == dml.FeatureLevel.FL_1_0
    assert dml.GatherOperatorDesc(T(dml.DataType.INT8, [3, 2]), T(U32, [1, 4]), None, 0, 1) \
        .lowest_feature_level() == dml.FeatureLevel.FL_3_0          # 2-D: 1 to 8 dimensions from 3_0
    assert dml.GatherOperatorDesc(T(dml.DataType.FLOAT64, [3, 2]), T(U32, [1, 4]), None, 0, 1) \
        .lowest_feature_level() == dml.FeatureLevel.FL_4_1
    s = dml.ScatterElementsOperatorDesc(T(F32, [1, 1, 1, 5]), T(U32, [1, 1, 1, 4]), T(F32, [1, 1, 1, 4]), None, 3)
    assert s.lowest_feature_level() == dml.FeatureLevel.FL_2_0      # the header's level (erratum 7)
    r = dml.ReverseSubsequencesOperatorDesc(T(F32, [2, 3]), T(U64, [2, 1]), None, 1)
    assert r.lowest_feature_level() == dml.FeatureLevel.FL_5_0
    r = dml.ReverseSubsequencesOperatorDesc(T(F32, [1, 1, 1, 2, 3]), T(U32, [1, 1, 1, 2, 1]), None, 4)
    assert r.lowest_feature_level() == dml.FeatureLevel.FL_3_0
    n1 = dml.GatherNd1OperatorDesc(T(F32, [1, 1, 2, 2]), T(U32, [1, 1, 2, 1]), None, 2, 2, 0)
    assert n1.lowest_feature_level() == dml.FeatureLevel.FL_3_0
    assert dml.GatherNdOperatorDesc(T(F32, [1, 1, 2, 2]), T(U32, [1, 1, 2, 1]), None, 2, 2) \
        .lowest_feature_level() == dml.FeatureLevel.FL_2_1
    o = dml.OneHotOperatorDesc(T(U32, [1, 1, 3, 1]), T(F32, [1, 1, 1, 2]), T(F32, [1, 1, 3, 4]), 3)
    assert o.lowest_feature_level() == dml.FeatureLevel.FL_2_0


def test_json_form_takes_the_scatter_alias():
    desc = jsonform.from_json({"Operator": "DML_OPERATOR_SCATTER", "InputTensor": {"DataType": "FLOAT32", "Sizes": [5]},
                               "IndicesTensor": {"DataType": "UINT32", "Sizes": [4]},
                               "UpdatesTensor": {"DataType": "FLOAT32", "Sizes": [4]}, "Axis": 0})
    assert isinstance(desc, dml.ScatterElementsOperatorDesc)
    assert jsonform.to_json(desc)["Operator"] == "SCATTER_ELEMENTS"


def test_gather_nd_is_gather_nd1_without_batch():
    a = dml.GatherNdOperatorDesc(T(F32, [1, 2, 2, 2]), T(U32, [1, 1, 2, 2]), None, 3, 2)
    b = dml.GatherNd1OperatorDesc(T(F32, [1, 2, 2, 2]), T(U32, [1, 1, 2, 2]), None, 3, 2, 0)
    assert a.lower() == b.lower() and a.output_tensor == b.output_tensor
    assert jsonform.from_json(jsonform.to_json(a)) == a


def test_dxdispatch_scatter_alias_runs(tmp_path):
    from opendml import dxdispatch
    model = {"resources": {"in": {"initialValuesDataType": "FLOAT32", "initialValues": [0, 1, 2, 3, 4]},
                           "idx": {"initialValuesDataType": "UINT32", "initialValues": [3, 1, 3, 0]},
                           "upd": {"initialValuesDataType": "FLOAT32", "initialValues": [5, 6, 7, 8]},
                           "out": {"initialValuesDataType": "FLOAT32",
                                   "initialValues": {"valueCount": 5, "value": 0}}},
             "dispatchables": {"s": {"type": "DML_OPERATOR_SCATTER", "desc": {
                 "InputTensor": {"DataType": "FLOAT32", "Sizes": [5]},
                 "IndicesTensor": {"DataType": "UINT32", "Sizes": [4]},
                 "UpdatesTensor": {"DataType": "FLOAT32", "Sizes": [4]},
                 "OutputTensor": {"DataType": "FLOAT32", "Sizes": [5]}, "Axis": 0}}},
             "commands": [{"type": "dispatch", "dispatchable": "s",
                           "bindings": {"InputTensor": "in", "IndicesTensor": "idx", "UpdatesTensor": "upd",
                                        "OutputTensor": "out"}}]}
    import io
    results = dxdispatch.run(model, out=io.StringIO())
    assert results["out"].tolist() == [8, 6, 2, 7, 4]


OPS = ["GATHER", "GATHER_ELEMENTS", "GATHER_ND", "GATHER_ND1", "SCATTER_ELEMENTS", "SCATTER_ND", "ONE_HOT",
       "REVERSE_SUBSEQUENCES"]
ALL_DT = ["FLOAT32", "FLOAT16", "UINT32", "UINT16", "UINT8", "INT32", "INT16", "INT8", "FLOAT64", "UINT64", "INT64"]


@settings(max_examples=n_examples(300), deadline=None)
@given(st.data())
def test_random_descriptions_give_opendml_errors_only(d):
    """Random JSON descriptions of the eight operators: each is valid (and
    then lowers, and its program stays inside its tensors), or raises an
    opendml error; nothing else."""
    from opendml.ops import OPERATORS
    op = d.draw(st.sampled_from(OPS))
    cls = OPERATORS[op]
    rank = d.draw(st.integers(0, 9))
    obj = {"Operator": op}
    for s in cls.SLOTS:
        if s.optional and d.draw(st.booleans()):
            continue
        r = rank if d.draw(st.integers(0, 5)) else d.draw(st.integers(0, 9))
        obj[s.json] = {"DataType": d.draw(st.sampled_from(ALL_DT)),
                       "Sizes": d.draw(st.lists(st.integers(-1, 5), min_size=r, max_size=r))}
    for f in cls.FIELDS:
        obj[f.json] = d.draw(st.one_of(st.integers(-2, 9), st.sampled_from([2 ** 32, "1", None, 1.5])))
    try:
        desc = jsonform.from_json(obj)
        desc.validate(d.draw(st.sampled_from(["1_0", "2_0", "2_1", "3_0", "4_1", "5_0", "6_4"])))
    except DmlError:
        return
    plan = desc.lower()
    for span, t in zip(plan.in_spans(), desc.inputs):
        if span is not None:
            assert 0 <= span[0] and span[1] < t.total_tensor_size_in_bytes // t.element_size
    for span, t in zip(plan.out_spans(), desc.outputs):
        assert 0 <= span[0] and span[1] < t.total_tensor_size_in_bytes // t.element_size


# -- differentiation ----------------------------------------------------------------------------------------

def test_torch_gradients_gradcheck_and_forward_ad():
    torch = pytest.importorskip("torch")
    from torch.autograd import gradcheck, gradgradcheck
    import torch.autograd.forward_ad as fwad
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 5, dtype=torch.float64, generator=g, requires_grad=True)
    u = torch.randn(2, 5, dtype=torch.float64, generator=g, requires_grad=True)
    i = torch.tensor([[0, 3, 3], [1, -1, 0]])                       # repeated: gradients add up
    ie = torch.tensor([[0, 3, 3, 1, 2], [1, 0, 2, 3, 3], [2, 2, 2, 2, 2]])
    iu = torch.tensor([[0, 1, 2, 3, 0], [0, 2, 2, 0, 1]])           # repeated targets: the overwritten get 0
    nd = torch.tensor([[1], [1]])
    lengths = torch.tensor([[3, 1, 5, 0, 2]], dtype=torch.uint32)
    cases = [(lambda x: dml.gather(x, i, 0), (x,)),
             (lambda x: dml.gather_elements(x, ie, 0), (x,)),
             (lambda x: dml.gather_nd(x, torch.tensor([[1, 2], [3, 4], [1, 2]])), (x,)),
             (lambda x, u: dml.scatter_elements(x, iu, u, 0), (x, u)),
             (lambda x, u: dml.scatter_nd(x, nd, u), (x, u)),
             (lambda x: dml.reverse_subsequences(x, lengths, 0), (x,))]
    for f, args in cases:
        assert gradcheck(f, args) and gradgradcheck(f, args)
        tangents = [torch.randn_like(a) for a in args]
        with fwad.dual_level():
            y = f(*[fwad.make_dual(a.detach(), t) for a, t in zip(args, tangents)])
            jvp = fwad.unpack_dual(y).tangent
        assert torch.allclose(jvp, torch.func.jvp(lambda *a: f(*a), tuple(a.detach() for a in args),
                                                  tuple(tangents))[1])
    assert dml.gather(x, i, 0).grad_fn.name() == "opendml_gatherBackward"
    assert torch.func.grad(lambda x: dml.gather(x, i, 0).sum())(x.detach())[:, 0].tolist() == [2, 1, 0, 3]
    assert torch.func.vmap(lambda x: dml.gather(x, i, 0))(torch.randn(3, 4, 5)).shape == (3, 2, 3, 5)


def test_nested_vmap_over_the_indices_reads_them_for_the_check():
    """``vmap`` of ``vmap`` over an index function's indices (and ``vmap`` of ``grad``): the call on each sample's
    values. The check read the indices with ``detach()`` before unwrapping them, which PyTorch refuses on a
    nested vmap's tensor (``accessing `data` under vmap transform is not allowed``)."""
    torch = pytest.importorskip("torch")
    x = torch.arange(12.0).reshape(3, 4)
    i = torch.tensor([[[0, 1], [2, 2]], [[1, 0], [0, 2]]])
    g = lambda j: dml.gather(x, j, 0)  # noqa: E731
    want = torch.stack([torch.stack([g(i[a, :, b]) for b in range(2)]) for a in range(2)])
    assert torch.equal(torch.func.vmap(torch.func.vmap(g, in_dims=1))(i), want)
    grads = torch.func.vmap(lambda j: torch.func.grad(lambda t: dml.gather(t, j, 0).sum())(x))(i[0])
    assert torch.equal(grads, torch.stack([torch.func.grad(lambda t: dml.gather(t, j, 0).sum())(x) for j in i[0]]))


def test_vmap_over_the_indices_names_a_bad_index_as_the_call_on_its_sample_does():
    """An out-of-range index under ``vmap`` (batch dimension first or not, nested, a tuple of ``gather_nd``): the
    error of the call on the first sample that holds one, as ``torch.compile`` of the ``vmap`` gives it. The check
    named the position in the unwrapped batch (``indices[1, 1]`` of a sample's 1-d indices)."""
    torch = pytest.importorskip("torch")
    x = torch.arange(12.0).reshape(3, 4)

    def error(fn, *args):
        with pytest.raises(dml.ValidationError) as info:
            fn(*args)
        return str(info.value)
    g = lambda j: dml.gather(x, j, 0)  # noqa: E731
    i = torch.tensor([[0, 1, 2], [1, 5, 4]])                      # samples along dimension 1: [0, 1], [1, 5], [2, 4]
    want = error(g, i[:, 1])
    assert "indices[1] = 5" in want
    assert error(torch.func.vmap(g, in_dims=1), i) == want
    assert error(torch.func.vmap(g), i.t().contiguous()) == want
    nested = torch.tensor([[[0, 1], [2, 2]], [[1, 0], [5, 2]]])    # the first bad sample: [1, :, 0]
    assert error(torch.func.vmap(torch.func.vmap(g, in_dims=1)), nested) == error(g, nested[1, :, 0])
    ge = torch.tensor([[[0], [1], [2]], [[3], [9], [0]]])
    assert error(torch.func.vmap(lambda j: dml.gather_elements(x, j, 1), in_dims=1), ge.permute(1, 0, 2)) == \
        error(dml.gather_elements, x, ge[1], 1)
    nd = torch.tensor([[[0, 1]], [[2, 4]]])
    assert error(torch.func.vmap(lambda j: dml.gather_nd(x, j)), nd) == error(dml.gather_nd, x, nd[1])


def test_gather_adjoint_is_deterministic_and_sums_in_index_order():
    """Many repeated indices: the accumulating scatter gives the reference's
    sums (in row-major order of the indices), the same bytes on every run and
    on every CPU path, and on NumPy, PyTorch and JAX alike."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    idx = rng.integers(-3, 3, (64, 7)).astype(np.int64)
    x = torch.zeros(3, 5, dtype=torch.float32, requires_grad=True)
    grad = rng.standard_normal((3, 64, 7)).astype(np.float32)
    want = ref.gather_adjoint((3, 5), idx, grad, 1).astype(np.float32)
    seen = set()
    for kernels in ("compiled", "numpy") if dml.config().compiled_available else ("numpy",):
        with dml.configure(cpu_kernels=kernels):
            for _ in range(3):
                x.grad = None
                dml.gather(x, torch.from_numpy(idx), 1).backward(torch.from_numpy(grad))
                seen.add(x.grad.numpy().tobytes())
    assert len(seen) == 1
    got = np.frombuffer(seen.pop(), np.float32).reshape(3, 5)
    assert got.tobytes() == want.tobytes()      # float32 sums in row-major order of the indices: exact
    from opendml.arrays.index_ops import index_adjoint
    direct = index_adjoint(dml.GatherOperatorDesc(TensorDesc(F32, [1, 3, 5]), TensorDesc(I64, [1, 64, 7]), None, 2, 2),
                           0, grad, idx.reshape(1, 64, 7))
    assert direct.shape == (1, 3, 5) and direct.tobytes() == got.tobytes()


def test_jax_gradients_check_grads_jit_vmap():
    jax = pytest.importorskip("jax")
    from jax.test_util import check_grads
    import jax.numpy as jnp
    old = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    try:
        _jax_checks(jax, check_grads, jnp)
    finally:
        jax.config.update("jax_enable_x64", old)


def _jax_checks(jax, check_grads, jnp):
    if True:
        x = jnp.asarray(np.random.default_rng(0).standard_normal((4, 5)))
        u = jnp.asarray(np.random.default_rng(1).standard_normal((2, 5)))
        i = jnp.asarray(np.array([[0, 3, 3], [1, -1, 0]], np.int32))
        iu = jnp.asarray(np.array([[0, 1, 2, 3, 0], [0, 2, 2, 0, 1]], np.int64))     # repeated targets
        lengths = jnp.asarray(np.array([[3, 1, 5, 0, 2]], np.uint32))
        check_grads(lambda x: dml.gather(x, i, 0), (x,), order=2, modes=["rev"])
        check_grads(lambda x: dml.gather_nd(x, i[:, :2]), (x,), order=2, modes=["rev"])
        check_grads(lambda x, u: dml.scatter_elements(x, iu, u, 0), (x, u), order=2, modes=["rev"])
        check_grads(lambda x: dml.reverse_subsequences(x, lengths, 0), (x,), order=2, modes=["rev"])
        f = lambda x: dml.gather(x, i, 0)                    # noqa: E731
        assert np.array_equal(jax.jit(f)(x), np.asarray(x)[np.array([[0, 3, 3], [1, 3, 0]])])
        assert jax.vmap(f)(jnp.stack([x, x])).shape == (2, 2, 3, 5)
        assert np.asarray(jax.jit(jax.grad(lambda x: f(x).sum()))(x))[:, 0].tolist() == [2, 1, 0, 3]
        # traced indices: not checked (no values at trace time), clamped
        g = jax.jit(lambda i: dml.gather(x, i, 0))
        assert np.array_equal(g(jnp.asarray(np.array([9], np.int32))), np.asarray(x)[[3]])


def test_dask_blocks_and_frameworks_give_the_numpy_bytes():
    da = pytest.importorskip("dask.array")
    torch = pytest.importorskip("torch")
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    i = np.random.default_rng(2).integers(-4, 4, (3, 6, 5)).astype(np.int64)
    want = dml.gather_elements(x, i, 1)
    r = dml.gather_elements(da.from_array(x, chunks=(1, 2, 2)), da.from_array(i, chunks=(1, 3, 2)), 1)
    assert r.chunks[1] == (6,) and r.compute().tobytes() == want.tobytes()       # Axis whole, the others cut
    g = dml.gather(da.from_array(x, chunks=(1, 2, 2)), da.from_array(np.array([0, 2], np.int32)), 1)
    assert g.compute().tobytes() == np.take(x, [0, 2], 1).tobytes()
    t = dml.gather_elements(torch.from_numpy(x), torch.from_numpy(i), 1)
    assert isinstance(t, torch.Tensor) and t.numpy().tobytes() == want.tobytes()
    # NumPy indices with PyTorch data: moved to the data's framework
    assert dml.gather_elements(torch.from_numpy(x), i, 1).numpy().tobytes() == want.tobytes()
    # ... also for a subclass of torch.Tensor defined outside PyTorch (its framework is PyTorch's)
    sub = type("Sub", (torch.Tensor,), {"__module__": "user"})
    got = dml.gather_elements(torch.from_numpy(x).as_subclass(sub), i, 1)
    assert type(got) is sub and got.as_subclass(torch.Tensor).numpy().tobytes() == want.tobytes()
    with pytest.raises(dml.ValidationError, match=r"^gather_elements: indices\[0, 0, 0\] = 9 is out of range"):
        dml.gather_elements(torch.from_numpy(x), torch.full((3, 6, 5), 9), 1)


def test_the_array_functions_are_registered_to_enter_a_graph_whole():
    """The PyTorch wing (``arrays.torch.library``) marks the family's and the index functions for
    torch.compile through ``_dispatch`` (it imports neither index_ops nor the
    front: the import cycle through index_ops is gone); a hook set later sees
    the functions registered before, and one registered later reaches the
    hooks already set. For a function with arguments read as enum members (``Binding.members``) Dynamo
    traces ``_<name>_traced`` instead, and the function that calls, ``_<name>_whole``, enters whole."""
    from opendml.arrays import _dispatch, front, index_ops
    for module, names in ((front, front.FAMILY), (index_ops, index_ops.__all__)):
        whole = [getattr(module, f"_{n}_whole", getattr(module, n)) for n in names]
        assert [n for n, f in zip(names, whole) if f not in _dispatch.WHOLE_IN_GRAPH] == []
    assert front._pad_whole in _dispatch.WHOLE_IN_GRAPH and front.pad not in _dispatch.WHOLE_IN_GRAPH
    seen = []

    def extra():
        pass
    _dispatch.on_enter_graph_whole(seen.append)
    try:
        assert seen == _dispatch.WHOLE_IN_GRAPH
        _dispatch.enter_graph_whole([extra])
        assert seen[-1] is extra
    finally:
        _dispatch._WHOLE_HOOKS.remove(seen.append)
        if extra in _dispatch.WHOLE_IN_GRAPH:
            _dispatch.WHOLE_IN_GRAPH.remove(extra)


def test_torch_compile_forward_and_backward():
    torch = pytest.importorskip("torch")
    from opendml.arrays.torch import library as family_torch_op  # noqa: F401 - registers the functions with torch.compile
    x = torch.randn(4, 5, requires_grad=True)
    i = torch.tensor([[0, 3, 3], [1, -1, 0]])
    f = torch.compile(lambda x: dml.gather(x, i, 0).sum() * 2, fullgraph=True)
    y = f(x)
    y.backward()
    assert torch.allclose(y, x[i % 4].sum() * 2) and x.grad[:, 0].tolist() == [4, 2, 0, 6]
    u = torch.randn(2, 5, requires_grad=True)
    iu = torch.tensor([[0, 1, 2, 3, 0], [3, 2, 1, 0, 1]])
    x.grad = None
    (torch.compile(lambda x, u: (dml.scatter_elements(x, iu, u, 0) ** 2).sum())(x, u)).backward()
    want_u = 2 * u.detach()
    want_x = 2 * x.detach()
    want_x[iu, torch.arange(5)] = 0
    assert torch.allclose(u.grad, want_u) and torch.allclose(x.grad, want_x)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_index_check_reads_no_values_of_fake_tensors(device):
    """Dynamo's fake run of a compiled gather hands the index check fake
    tensors, CUDA ones included (no GPU needed to make them): no values to
    read, so no check and no error (the compiled graph checks the real
    indices: it runs the function on them, ``opendml::family``). The device
    branch used to call ``.numpy()`` on them."""
    torch = pytest.importorskip("torch")
    from torch._subclasses.fake_tensor import FakeTensorMode
    from opendml.arrays import index_ops
    from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
    with FakeTensorMode(allow_non_fake_inputs=True):
        i = torch.zeros((3, 2), dtype=torch.int64, device=device)
        with FunctionalTensorMode():
            f = FunctionalTensor.to_functional(i)       # as AOTAutograd hands them to a traced call
        for t in (i, f):
            index_ops.check(t, 3, "gather")
            index_ops.check(t, (3, 3), "gather_nd", last_axis=True)


@pytest.mark.cuda
def test_torch_compile_gather_on_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("CUDA is not available here")
    import opendml.torch  # noqa: F401 - lets the array functions into a graph whole
    x = torch.randn(4, 5, device="cuda")
    i = torch.tensor([[0, 3, 3], [1, -1, 0]], device="cuda")
    torch._dynamo.reset()
    got = torch.compile(lambda x, i: dml.gather(x, i, 0), fullgraph=True)(x, i)
    assert torch.equal(got, dml.gather(x, i, 0)) and torch.equal(got.cpu(), x.cpu()[i.cpu() % 4])


# -- the compiled index passes (runtime/cpu/indexed/index.c) ------------------------------------------------

@pytest.fixture
def compiled_index():
    """The CPU backend module, with the compiled kernels configured (whatever
    ``OPENDML_CPU_KERNELS`` says); a skip where they are not installed."""
    from opendml.runtime.cpu import backend as cpu
    native = cpu._load_native()
    if not dml.config().compiled_available or native is None or not hasattr(native, "index_run_pass"):
        pytest.skip("the compiled CPU kernels are not installed")
    with dml.configure(cpu_kernels="compiled"):
        yield cpu


def test_compiled_and_numpy_paths_give_the_same_bytes_float16_sums(compiled_index):
    """The accumulating scatter (a gather's adjoint) in float16 with many
    repeated indices: float32 additions rounded at each step, in row-major
    order, on both CPU paths; and the compiled path really runs index.c."""
    cpu = compiled_index
    from opendml.arrays.index_ops import index_adjoint
    from opendml.plan import Gather
    rng = np.random.default_rng(3)
    idx = rng.integers(-4, 4, (1, 50, 9)).astype(np.int32)
    grad = rng.standard_normal((4, 50, 9)).astype(np.float16)
    primal = dml.GatherOperatorDesc(TensorDesc(dml.DataType.FLOAT16, [1, 4, 6]), TensorDesc(I32, [1, 50, 9]), None,
                                    2, 2)
    outs = {}
    for kernels in ("compiled", "numpy"):
        with dml.configure(cpu_kernels=kernels):
            outs[kernels] = index_adjoint(primal, 0, grad, idx)
    assert outs["compiled"].tobytes() == outs["numpy"].tobytes()
    plan = primal.lower()
    backend = cpu.CpuBackend(dml.config())
    words = [np.zeros(24, np.uint16), np.zeros(450, np.uint32)]
    assert backend._index_pass(plan, plan.passes[0], words, [np.zeros(4 * 50 * 9, np.uint16)]) is not None
    assert isinstance(plan.passes[0], Gather)


def test_compiled_pass_refuses_a_block_outside_its_range(compiled_index):
    """A pass whose reach exceeds the bound range (which validation never
    lets through) stops with an error in index.c instead of reading past it."""
    cpu = compiled_index
    from opendml.plan import Gather, IndexAxis, MovePlan
    plan = MovePlan((1, 6), (1,), (Gather(0, 0, (3,), 0, (0,), 0, (1,), (IndexAxis(1, 0, (1,), 1, 100),)),))
    backend = cpu.CpuBackend(dml.config())
    src, idx, dst = np.zeros(4, np.uint32), np.array([0, 50, 99], np.int32).view(np.uint32), np.zeros(3, np.uint32)
    run = backend._index_pass(plan, plan.passes[0], [src, idx], [dst])
    with pytest.raises(RuntimeError, match="outside a bound range"):
        run()


def test_repeated_calls_served_from_a_cache_read_new_indices():
    """Repeated calls are served from the C call cache (compiled kernels) or
    the family's Python cache, and read each call's own indices."""
    from opendml.arrays import planner
    from opendml.runtime import calls
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    def info():     # the C call cache serves with the compiled kernels, the Python cache with NumPy's
        return {"hits": planner.info()["hits"] + (calls.info()["hits"] if calls.move is not calls._miss else 0)}
    before = info()["hits"]
    for k in range(3):
        idx = np.array([[k, 2 - k]], np.int64)
        same(dml.gather(x, idx, 0), ref.gather(x, idx, 0))
        upd = np.full((1, 4), 100 + k, np.float32)
        same(dml.scatter_elements(x, np.array([[k, 0, 1, 2]], np.int32), upd, 0),
             ref.scatter_elements(x, np.array([[k, 0, 1, 2]], np.int32), upd, 0))
    assert info()["hits"] > before


INDEX_EXAMPLES = ["gather-1d", "gather-rows", "gather-swap-columns", "gather-nested-axis2", "gather-nested-axis1",
                  "gather-elements", "gather-nd-1", "gather-nd-2", "gather-nd1-1", "gather-nd1-batch", "scatter-1d",
                  "scatter-2d", "scatter-nd", "one-hot-1", "one-hot-axis2", "one-hot-values", "one-hot-out-of-range",
                  "reverse-subsequences", "reverse-subsequences-axis2"]


@pytest.mark.parametrize("name", INDEX_EXAMPLES)
def test_page_examples_with_padded_strides_through_the_directml_flow(backend, name):
    """Every bundled example again with every tensor's strides padded (a gap
    after each element and each row): the documented output, read through
    the output's strides, and the gaps of the output buffer untouched."""
    from opendml.cli import examples
    ex = examples()[name]
    desc = jsonform.from_json(ex)

    def padded(t, gap):
        strides, step = [], 1
        for n in reversed(t.sizes):
            strides.insert(0, gap * step)
            step = gap * step * n + gap - 1
        return TensorDesc(t.data_type, t.sizes, strides=strides)
    # each tensor its own gaps, so no lowering can use one tensor's strides for another's unnoticed
    slots = {s.attr: (getattr(desc, s.attr), 2 + k) for k, s in enumerate(desc.SLOTS)}
    wide = type(desc)(**{**{f.name: getattr(desc, f.name) for f in __import__("dataclasses").fields(desc)
                            if f.init}, **{a: padded(t, g) for a, (t, g) in slots.items()}})
    dev = dml.Device(backend)
    compiled = dev.compile_operator(wide)
    table = dev.create_binding_table(compiled)
    table.bind_inputs([dml.BufferBinding(dev.upload(np.array(v, t.data_type.numpy_dtype), t))
                       for v, t in zip(ex["Inputs"], wide.inputs)])
    out_t = wide.outputs[0]
    buf = dev.create_buffer(out_t.total_tensor_size_in_bytes)
    filler = np.full(out_t.total_tensor_size_in_bytes // out_t.element_size, 77, out_t.data_type.numpy_dtype)
    buf.write(filler)
    table.bind_outputs([dml.BufferBinding(buf)])
    dev.execute(compiled, table)
    got = buf.read(out_t)
    assert np.array_equal(got, np.array(ex["ExpectedOutput"], out_t.data_type.numpy_dtype))
    raw = buf.read(TensorDesc(out_t.data_type, [filler.size]))
    used = np.zeros(filler.size, bool)
    for c in np.ndindex(*out_t.sizes):
        used[sum(i * s for i, s in zip(c, out_t.strides))] = True
    assert (raw[~used] == 77).all()


def test_the_extremes_check_agrees_with_the_full_check(monkeypatch):
    """``_check``'s decision from the extremes alone (what GPU indices take)
    lets through exactly what the full check lets through, signed types,
    scalar bounds and one bound per tuple column."""
    from opendml.arrays import index_ops
    monkeypatch.setattr(index_ops, "_device_extremes", lambda a, last_axis: np.stack(
        (a.reshape(-1, a.shape[-1]).min(axis=0), a.reshape(-1, a.shape[-1]).max(axis=0)) if last_axis
        else (a.min(), a.max())))
    rng = np.random.default_rng(3)
    for dt in (np.int32, np.int64):
        for _ in range(200):
            last = bool(rng.integers(2))
            shape = tuple(int(n) for n in rng.integers(1, 5, rng.integers(1, 4)))
            bounds = [int(n) for n in rng.integers(1, 6, shape[-1])] if last else int(rng.integers(1, 6))
            a = rng.integers(-7, 7, shape).astype(dt)
            errors = []
            for check in (index_ops.check, lambda v, b, w, last_axis=False: index_ops.check_index_values(
                    v, b, w, last_axis=last_axis)):
                try:
                    check(a, bounds, "gather", last_axis=last)
                    errors.append(None)
                except dml.ValidationError as e:
                    errors.append(str(e))
            assert errors[0] == errors[1]


def test_reversal_along_an_outer_axis_with_rows_of_one_length():
    """index.c copies a whole source row where a row of lengths is one length
    (and per element otherwise): the reference's bytes either way, uniform
    and mixed rows, lengths past the axis and the type's largest, views."""
    rng = np.random.default_rng(5)
    for _ in range(400):
        r = int(rng.integers(2, 5))
        shape = tuple(int(n) for n in rng.integers(1, 6, r))
        x = rng.integers(-100, 100, shape).astype(rng.choice([np.float32, np.int8, np.float64, np.uint16]))
        axis = int(rng.integers(0, r - 1))
        lshape = tuple(1 if k == axis else n for k, n in enumerate(shape))
        dt = rng.choice([np.uint32, np.uint64])
        lengths = (np.full(lshape, rng.integers(0, shape[axis] + 3)) if rng.integers(2)
                   else rng.integers(0, shape[axis] + 3, lshape)).astype(dt)
        if rng.integers(4) == 0:
            lengths.reshape(-1)[0] = np.iinfo(dt).max
        v = x if rng.integers(2) else x[..., ::-1]
        same(dml.reverse_subsequences(v, lengths, axis), ref.reverse_subsequences(v, lengths, axis))


@pytest.mark.parametrize("kernels", ["compiled", "numpy"])
def test_numpy_subclasses_are_read_as_the_arrays_they_hold(kernels):
    """An np.matrix (which stays 2-D when reshaped) gives the plain array's result, every time; a masked
    array (data or indices) is still refused, naming the dropped mask."""
    x, m = np.arange(6.0).reshape(2, 3), np.matrix(np.arange(6.0).reshape(2, 3))
    calls = [(dml.gather, (np.array([2, 0, -1]), 1)), (dml.gather, (np.array([[1, 0]]), 0, 1)),
             (dml.gather_elements, (np.array([[1, 0, 0]]), 0)), (dml.gather_nd, (np.array([[1], [0]]),)),
             (dml.scatter_elements, (np.array([[1, 0, 1]]), np.array([[7.0, 8.0, 9.0]]), 0)),
             (dml.scatter_nd, (np.array([[1]]), np.array([[7.0, 8.0, 9.0]]))),
             (dml.reverse_subsequences, (np.array([3, 2], np.uint32), 1)), (dml.diagonal_matrix, ())]
    with dml.configure(cpu_kernels=kernels):
        for fn, args in calls:
            want = fn(x, *args)
            for _ in range(2):                                  # first call and repeat
                got = fn(m, *args)
                assert type(got) is np.ndarray and got.shape == want.shape and np.array_equal(got, want), fn
        assert np.array_equal(dml.gather(x, np.matrix([[2, 0]]), 1), dml.gather(x, np.array([[2, 0]]), 1))
        for data, indices in ((np.ma.masked_array(x), np.array([0])), (x, np.ma.masked_array(np.array([0])))):
            with pytest.raises(dml.ValidationError, match="masked arrays are not supported"):
                dml.gather(data, indices, 0)


@pytest.mark.parametrize("flag", ["ab", None, 1, 0, [1, 0], float("nan"), np.int64(1)])
def test_check_indices_must_be_a_bool(flag):
    """check_indices is a switch: anything but True or False (a NumPy bool
    too) is refused with an opendml error naming it, on the first call and
    on a repeat, instead of being read by its truth value."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    i = np.array([0, 2], np.int64)
    calls = {"gather": lambda c: dml.gather(x, i, 1, check_indices=c),
             "gather_elements": lambda c: dml.gather_elements(x, np.zeros((3, 4), np.int64), 1, check_indices=c),
             "gather_nd": lambda c: dml.gather_nd(x, i.reshape(2, 1), check_indices=c),
             "scatter_elements": lambda c: dml.scatter_elements(x, np.zeros((3, 1), np.int64), x[:, :1], 1,
                                                                check_indices=c),
             "scatter_nd": lambda c: dml.scatter_nd(x, i.reshape(2, 1), x[:2], check_indices=c)}
    for name, call in calls.items():
        call(True), call(False), call(False)        # recorded and served: 1 and 0 must not pass as True, False
        for _ in range(2):
            with pytest.raises(dml.ValidationError, match="check_indices must be True or False"):
                call(flag)
        assert np.array_equal(call(np.True_), call(True)), name


def test_a_too_large_output_is_named_by_its_slot_and_rule():
    """An output over DirectML's element count: the message names the
    operator, the tensor and the rule in one readable sentence (it read
    "OutputTensor.the element count ..." before)."""
    for call in (lambda: dml.one_hot(np.zeros((2**20,), np.int64), 2**20, np.array([0, 1], np.float32)),
                 lambda: dml.diagonal_matrix(shape=(2**20, 2**20), dtype="float32")):
        with pytest.raises(dml.ValidationError, match=r"^[A-Z_0-9]+: OutputTensor: the element count \(product "
                                                     r"of Sizes \[1048576, 1048576\]\) must be <= 4294967295"):
            call()


@pytest.mark.parametrize("call, rank", [
    (lambda: dml.gather(np.zeros((2, 3, 4), np.float32), np.zeros((1,) * 8, np.int64), 0), 10),
    (lambda: dml.gather_nd(np.zeros((1,) * 5, np.float32), np.zeros((1,) * 6 + (2,), np.int64)), 9),
    (lambda: dml.scatter_nd(np.zeros((1,) * 5, np.float32), np.zeros((1,) * 6 + (2,), np.int64),
                            np.zeros((1,) * 9, np.float32)), 9),
], ids=["gather", "gather_nd", "scatter_nd"])
def test_a_call_whose_tensors_pass_eight_dimensions_names_the_function(call, rank):
    """The tensors an index call needs (its arrays led by 1s to the largest rank, the result's included) past
    DirectML's 8 dimensions: the function's error (it was the bare 'TensorDesc: DimensionCount ...')."""
    with pytest.raises(dml.ValidationError, match=rf"^\w+: the operator's tensors for this call need {rank} "
                                                  r"dimensions .* at most 8$"):
        call()


def test_read_only_numpy_indices_for_pytorch_data_warn_nothing():
    """Indices of another framework are moved to the data's; read-only NumPy values (a JAX array's host view, or a
    read-only array) became a PyTorch tensor through ``as_tensor``, which warned from inside opendml ("The given
    NumPy array is not writable, and PyTorch does not support non-writable tensors")."""
    torch = pytest.importorskip("torch")
    import warnings
    x = torch.arange(12.0).reshape(3, 4)
    ro = np.array([0, 2])
    ro.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(dml.gather(x, ro, 0), x[[0, 2]])
        rows = np.broadcast_to(ro.reshape(2, 1), (2, 4))            # a read-only broadcast view
        expected = x.clone()
        expected[2] = x[1]
        assert torch.equal(dml.scatter_elements(x, rows, x[:2], 0), expected)
    assert not ro.flags.writeable


@pytest.mark.parametrize("call, message", [
    (lambda t, m: dml.gather(m(t.ones(4, 4)), t.tensor([0]), 0), r"got meta and cpu \(indices\)$"),
    (lambda t, m: dml.scatter_elements(t.ones(4, 4), t.zeros((1, 4), dtype=t.int64), m(t.ones(1, 4)), 0),
     r"got cpu and meta \(updates\)$"),
    (lambda t, m: dml.one_hot(t.tensor([0, 1]), 3, m(t.tensor([0.0, 1.0]))), r"got cpu and meta \(values\)$"),
    (lambda t, m: dml.reverse_subsequences(t.ones(4, 4), m(t.ones(4, dtype=t.uint32)), 0),
     r"got cpu and meta \(sequence_lengths\)$"),
    (lambda t, m: dml.join([t.ones(4, 4), m(t.ones(4, 4))], 0), r"got cpu and meta \(arrays\[1\]\)$"),
])
def test_a_tensor_on_another_device_is_named_by_its_argument(call, message):
    """Tensors on two devices: the message names the argument as the function spells it (``indices``, ``updates``,
    ``values``, ``sequence_lengths``; JOIN's ``arrays[1]``), where it said ``arrays[1]`` (or ``arrays[2]``) for
    every function."""
    torch = pytest.importorskip("torch")
    with pytest.raises(dml.UnsupportedError, match=r"^\w+: every tensor must be on one device; " + message):
        call(torch, lambda v: v.to("meta"))


def test_every_bound_array_is_named_by_its_argument():
    from opendml.arrays import _contract
    from opendml.ops import OPERATORS
    from opendml.ops._spec import binding_of
    for cls in OPERATORS.values():
        b = binding_of(cls)
        if b is None:
            continue
        names = [b.array, *b.others]
        for i, name in enumerate(names):
            assert _contract.argument_of(b.function, i) == (f"arrays[{i}]" if b.array == "arrays" else name)
        assert _contract.argument_of(b.function, len(names) + 1) == f"arrays[{len(names) + 1}]"
    assert _contract.argument_of("no such function", 1) == "arrays[1]"