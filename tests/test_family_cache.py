"""The family's call caches (the C call cache, ``runtime.calls.move``, which
serves repeated compiled calls before any Python runs, and
the move cache, ``opendml.arrays.planner``, behind it): a repeated call gives the same
bytes, and the same error, as the uncached route (``configure(call_cache=False)``),
over every operator, dtypes and layouts, under threads and on both CPU kernel
paths; calls that differ in one thing (a dtype of the same size, strides, 1
vs 1.0 vs True, a mode's name, -0.0 vs 0.0) are never served each other's
entry."""
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import opendml as dml
from opendml.arrays import front, planner
from opendml.runtime import calls as ccache
from .conftest import n_examples

TYPES = [np.float32, np.float16, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
         np.uint32, np.uint64]
SETTINGS = settings(max_examples=n_examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
KERNELS = ["numpy"] + (["compiled"] if dml.config().compiled_available else [])


@pytest.fixture(params=KERNELS)
def kernels(request):
    with dml.configure(cpu_kernels=request.param):
        yield request.param


def uncached(fn, *args, **kwargs):
    """``fn``'s result (or the exception it raised) with neither cache read
    nor written (``call_cache=False`` turns both off; the move cache's lookup and
    record are replaced too)."""
    lookup, record = planner.lookup, planner.record
    planner.lookup, planner.record = (lambda *a: None), (lambda *a: None)
    try:
        with dml.configure(call_cache=False):
            return outcome(fn, *args, **kwargs)
    finally:
        planner.lookup, planner.record = lookup, record


def clear():
    planner.clear()
    ccache.clear()


def served() -> int:
    """Calls served by either cache."""
    return planner.info()["hits"] + ccache.info()["hits"]


def entries() -> int:
    return planner.info()["entries"] + ccache.info()["entries"]


def c_served() -> int:
    return ccache.info()["hits"]


def outcome(fn, *args, **kwargs):
    try:
        out = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - compared below
        return ("error", type(e), str(e))
    outs = out if isinstance(out, list) else [out]
    return ("ok", isinstance(out, list), [(o.dtype.str, o.shape, o.flags.c_contiguous, o.tobytes()) for o in outs])


LAYOUTS = ["packed", "padded", "negative", "transposed", "broadcast"]


def layout(kind, shape, dt, seed):
    """An array of ``shape`` and ``dt`` with random bits in layout ``kind``."""
    rng = np.random.default_rng(seed)
    base_shape = tuple(2 * s for s in shape) if kind == "padded" else shape
    if kind == "transposed":
        base_shape = shape[::-1]
    n = int(np.prod(base_shape))
    x = rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).view(dt).reshape(base_shape)
    if kind == "padded":
        return x[tuple(slice(0, 2 * s, 2) for s in shape)]
    if kind == "negative":
        return x[tuple(slice(None, None, -1) for _ in shape)]
    if kind == "transposed":
        return x.T
    if kind == "broadcast":
        return np.broadcast_to(x[(slice(0, 1),) + (slice(None),) * (len(shape) - 1)], shape)
    return x


@st.composite
def calls(draw):
    """(function, args builder taking the arrays, two input sets of one layout
    but different data)."""
    op = draw(st.sampled_from(["identity", "cast", "pad", "join", "split", "tile", "space_to_depth",
                               "depth_to_space"]))
    dt = np.dtype(draw(st.sampled_from(TYPES)))
    rank = 4 if op in ("space_to_depth", "depth_to_space") else draw(st.integers(1, 4))
    shape = list(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    value = draw(st.sampled_from([0, 1, -1, 2.5, -0.0, 300, True, np.float32(1.5), np.int8(3)]))
    if op == "space_to_depth":
        b = draw(st.sampled_from([1, 2, 2.0]))
        shape[2] *= 2
        shape[3] *= 2
        kw = {"block_size": b, "order": draw(st.sampled_from(["DCR", "CRD", "crd", "DEPTH_COLUMN_ROW",
                                                             dml.ops.DepthSpaceOrder.COLUMN_ROW_DEPTH]))}
    elif op == "depth_to_space":
        b = draw(st.sampled_from([1, 2, 2.0]))
        shape[1] *= 4
        kw = {"block_size": b, "order": draw(st.sampled_from(["DCR", "CRD", "COLUMN_ROW_DEPTH"]))}
    elif op == "identity":
        kw = {"scale": draw(st.sampled_from([None, 2.0, 2, -0.0, True])), "bias": draw(st.sampled_from([None, 1.0, 1, 0.5]))}
    elif op == "cast":
        kw = {"dtype": draw(st.sampled_from(TYPES + [np.dtype(t) for t in TYPES] + ["INT8", "float64", float,
                                                                                     dml.DataType.FLOAT16]))}
    elif op == "pad":
        per = draw(st.booleans())
        start = draw(st.integers(0, 3)) if not per else tuple(draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank)))
        end = draw(st.integers(0, 3)) if not per else list(draw(st.lists(st.integers(0, 3), min_size=rank, max_size=rank)))
        kw = {"start_padding": start, "end_padding": end,
              "mode": draw(st.sampled_from(["constant", "edge", "reflect", "reflection", "symmetric", "wrap", "WRAP",
                                            dml.ops.PaddingMode.SYMMETRIC])),
              "value": value}
    elif op == "join":
        kw = {"axis": draw(st.integers(-rank, rank - 1))}
    elif op == "split":
        axis = draw(st.integers(-rank, rank - 1))
        n = shape[axis]
        cut = draw(st.integers(0, n - 1))
        kw = {"axis": axis, "sizes": [cut, n - cut] if cut else [n]}
    else:
        kw = {"repeats": draw(st.one_of(st.integers(1, 2), st.lists(st.integers(1, 2), min_size=rank, max_size=rank)))}
    count = draw(st.integers(1, 3)) if op == "join" else 1
    seed = draw(st.integers(0, 2 ** 32 - 1))
    # two input sets of identical layouts and different bits
    kinds = [draw(st.sampled_from(LAYOUTS)) for _ in range(count)]
    first = [layout(k, tuple(shape), dt, seed + i) for i, k in enumerate(kinds)]
    second = [layout(k, tuple(shape), dt, seed + 100 + i) for i, k in enumerate(kinds)]
    return op, kw, first, second


def invoke(op, kw, arrays):
    fn = getattr(dml, op)
    return fn(arrays, **kw) if op == "join" else fn(arrays[0], **kw)


@SETTINGS
@given(calls())
def test_cached_equals_uncached(kernels, call):
    op, kw, first, second = call
    want_first = uncached(invoke, op, kw, first)
    want_second = uncached(invoke, op, kw, second)
    clear()
    before = served()
    assert outcome(invoke, op, kw, first) == want_first
    after_first, recorded = served(), entries()
    assert after_first == before
    got = outcome(invoke, op, kw, second)          # served from a cache where the first call was recorded
    assert got == want_second
    if want_first[0] == "error":
        assert recorded == 0 and entries() == 0
    elif recorded:
        assert served() == after_first + 1
    assert outcome(invoke, op, kw, second) == want_second     # and again
    if kernels == "compiled" and want_first[0] == "ok" and ccache.info()["entries"]:
        # the C cache's entry, on a third input set of the same layouts (the first set's bits again)
        hits = c_served()
        assert outcome(invoke, op, kw, first) == want_first
        assert c_served() == hits + 1


def test_common_calls_are_served(kernels):
    """The calls the benchmark makes are recorded and served (a cache that is
    never used would pass the test above)."""
    x = np.random.default_rng(1).standard_normal((16, 16)).astype(np.float32)
    img = x.reshape(1, 4, 8, 8)
    for fn in COMMON(x, img):
        clear()
        want = uncached(fn)
        assert outcome(fn) == want
        hits, c_hits = served(), c_served()
        assert outcome(fn) == want
        assert served() == hits + 1
        # the compiled kernels' calls are served from C
        assert c_served() == c_hits + (kernels == "compiled")
    if kernels == "compiled":
        assert all(e.steps is not None for e in planner._MOVES._entries.values())


def COMMON(x, img):
    """Calls of every family function, with their arguments spelled as users do."""
    return (lambda: dml.identity(x), lambda: dml.identity(x, 2.0, 1.0), lambda: dml.cast(x, np.float16),
            lambda: dml.cast(x, np.dtype(np.int8)), lambda: dml.cast(x, "uint16"),
            lambda: dml.cast(x, dml.DataType.FLOAT64), lambda: dml.cast(x, float),
            lambda: dml.pad(x, (2, 2), (2, 2), mode="reflect"), lambda: dml.pad(x, [1, 0], 3, "constant", 2.5),
            lambda: dml.pad(x, 1, 1, dml.ops.PaddingMode.WRAP), lambda: dml.pad(x, 1, 1, value=-3),
            lambda: dml.join([x, x], 1), lambda: dml.join((x, x[::-1], x.T), 0),
            lambda: dml.split(x, 0, [8, 8]), lambda: dml.split(x, -1, (3, 13)), lambda: dml.split(x, 1, [16]),
            lambda: dml.tile(x, (2, 2)), lambda: dml.tile(x, 2),
            lambda: dml.space_to_depth(img, 2), lambda: dml.space_to_depth(img, 2, dml.ops.DepthSpaceOrder.COLUMN_ROW_DEPTH),
            lambda: dml.depth_to_space(img, 2, order="CRD"), lambda: dml.pad(x[::-1, ::2], 1, 1),
            lambda: dml.identity(np.broadcast_to(x[:1], (16, 16)), None, 0.5))


X = np.arange(64, dtype=np.float32).reshape(8, 8) - 20.5

#: (first call, second call): differ in one thing; the second must not be served the first's entry
ONE_THING = [
    (lambda: dml.identity(X), lambda: dml.identity(X.view(np.int32))),
    (lambda: dml.identity(X), lambda: dml.identity(X.view(np.uint32))),
    (lambda: dml.cast(X, np.int32), lambda: dml.cast(X.view(np.int32), np.int32)),
    (lambda: dml.identity(X), lambda: dml.identity(X.T)),
    (lambda: dml.identity(X), lambda: dml.identity(X[::-1])),
    (lambda: dml.identity(X[:, :4]), lambda: dml.identity(X[:4, :4].copy())),
    (lambda: dml.identity(X, 2, 1), lambda: dml.identity(X, 2.0, 1.0)),
    (lambda: dml.identity(X, 1.0), lambda: dml.identity(X, True)),
    (lambda: dml.identity(X, 0.0), lambda: dml.identity(X, -0.0)),
    (lambda: dml.identity(X, 2.0), lambda: dml.identity(X, np.float32(2.0))),
    (lambda: dml.pad(X, 1, 1, value=1), lambda: dml.pad(X, 1, 1, value=1.0)),
    (lambda: dml.pad(X, 1, 1, value=1), lambda: dml.pad(X, 1, 1, value=True)),
    (lambda: dml.pad(X, 1, 1, value=0.0), lambda: dml.pad(X, 1, 1, value=-0.0)),
    (lambda: dml.pad(X, 1, 1, value=np.nan), lambda: dml.pad(X, 1, 1, value=-np.nan)),
    (lambda: dml.pad(X, 1, 1, mode="reflect"), lambda: dml.pad(X, 1, 1, mode="symmetric")),
    (lambda: dml.pad(X, 1, 1, mode="wrap"), lambda: dml.pad(X, 1, 1, mode="edge")),
    (lambda: dml.pad(X, 1, 2), lambda: dml.pad(X, 2, 1)),
    (lambda: dml.pad(X, (1, 2), (0, 0)), lambda: dml.pad(X, (2, 1), (0, 0))),
    (lambda: dml.pad(X, 1, 1), lambda: dml.pad(X, True, True)),
    (lambda: dml.tile(X, 2), lambda: dml.tile(X, (2, 1))),
    (lambda: dml.tile(X, 2), lambda: dml.tile(X, 2.0)),
    (lambda: dml.split(X, 0, [4, 4]), lambda: dml.split(X, 0, [3, 5])),
    (lambda: dml.split(X, 0, [4, 4]), lambda: dml.split(X, 1, [4, 4])),
    (lambda: dml.join([X, X], 0), lambda: dml.join([X, X], 1)),
    (lambda: dml.join([X, X], 0), lambda: dml.join([X, X, X], 0)),
    (lambda: dml.join([X, X], 0), lambda: dml.join([X, X.T], 0)),
    (lambda: dml.space_to_depth(X.reshape(1, 1, 8, 8), 2), lambda: dml.space_to_depth(X.reshape(1, 1, 8, 8), 2.0)),
    (lambda: dml.space_to_depth(X.reshape(1, 4, 4, 4), 2), lambda: dml.space_to_depth(X.reshape(1, 4, 4, 4), 2, "CRD")),
    (lambda: dml.depth_to_space(X.reshape(1, 4, 4, 4), 2), lambda: dml.depth_to_space(X.reshape(1, 4, 4, 4), 2, "CRD")),
    (lambda: dml.depth_to_space(X.reshape(1, 4, 4, 4), 2), lambda: dml.depth_to_space(X.reshape(1, 4, 4, 4), 1)),
    (lambda: dml.cast(X, np.float16), lambda: dml.cast(X, np.int16)),
    (lambda: dml.cast(X.astype(np.int16), np.float32), lambda: dml.cast(X.astype(np.float16), np.float32)),
]


@pytest.mark.parametrize("first, second", ONE_THING)
def test_differs_in_one_thing_is_not_served(kernels, first, second):
    want = uncached(second)
    clear()
    outcome(first)
    hits = served()
    assert outcome(second) == want
    assert served() == hits
    assert outcome(second) == want


def test_zero_signs_and_nan_payloads_kept():
    """-0.0 after 0.0 (equal, same hash as floats) pads with negative zero."""
    clear()
    a = dml.pad(X, 1, 1, value=0.0)
    b = dml.pad(X, 1, 1, value=-0.0)
    assert a[0, 0].tobytes() == np.float32(0.0).tobytes()
    assert b[0, 0].tobytes() == np.float32(-0.0).tobytes()


def test_errors_are_never_cached():
    clear()
    x8 = np.arange(16, dtype=np.int8).reshape(4, 4)
    for fn in (lambda: dml.pad(x8, 1, 1, value=300), lambda: dml.identity(x8, 2.0),
               lambda: dml.space_to_depth(X.reshape(1, 1, 8, 8), 3), lambda: dml.split(X, 0, [3, 3]),
               lambda: dml.identity(np.zeros(3, bool)), lambda: dml.identity(np.float32(1.0) + np.zeros(())),
               lambda: dml.cast(np.zeros(4, np.complex64), np.float32)):
        want = uncached(fn)
        assert want[0] == "error"
        assert outcome(fn) == want and outcome(fn) == want
    assert entries() == 0


def test_arrays_the_route_converts_are_not_served():
    """Big-endian, masked and subclassed arrays keep their own route."""
    planner.clear()
    big = X.astype(">f4")
    assert outcome(dml.identity, big) == uncached(dml.identity, big)
    assert outcome(dml.identity, big) == uncached(dml.identity, big)
    m = np.ma.masked_array(X, mask=X > 0)
    dml.identity(X)                                  # an entry for X's layout
    assert outcome(dml.identity, m)[0] == "error"
    mat = np.asmatrix(X)
    assert outcome(dml.identity, mat) == uncached(dml.identity, mat)
    # a stride that is not a whole number of elements: the route copies it first
    wide = np.lib.stride_tricks.as_strided(np.arange(400, dtype=np.uint8).view(np.uint16), (4, 4), (9, 2))
    for y in (wide, wide):
        assert outcome(dml.identity, y) == uncached(dml.identity, y)


def test_configure_invalidates():
    if "compiled" not in KERNELS:
        pytest.skip("the compiled kernels are not installed")
    x = np.random.default_rng(3).standard_normal((8, 8)).astype(np.float32)
    # spellings the C new-shape lowerings decline (newshape_move.c: an enum
    # mode, NumPy scalars, a NumPy dtype code), so a first call takes the
    # Python route, which records it here
    calls_ = [lambda: dml.pad(x, 1, 2, mode=dml.PaddingMode.REFLECTION), lambda: dml.identity(x, np.float64(2.0), 1.0),
              lambda: dml.cast(x, "f2"), lambda: dml.tile(x, np.int64(2))]
    want = [uncached(c) for c in calls_]
    planner.clear()
    assert [outcome(c) for c in calls_] == want
    assert planner.info()["entries"] == len(calls_)
    old = [e.backend for e in planner._MOVES._entries.values()]
    with dml.configure(cpu_kernels="numpy"):
        assert planner.info()["entries"] == 0
        hits = planner.info()["hits"]
        assert [outcome(c) for c in calls_] == want
        assert [outcome(c) for c in calls_] == want
        assert planner.info()["hits"] == hits + len(calls_)
        entries = list(planner._MOVES._entries.values())
        assert all(e.steps is None and e.backend.kernels == "numpy" for e in entries)
        assert not any(e.backend is b for e in entries for b in old)
    assert planner.info()["entries"] == 0
    assert [outcome(c) for c in calls_] == want
    # an entry made on a backend no longer in force (a configure() racing a
    # call) is not used
    key = next(iter(planner._MOVES._entries))
    entry = planner._MOVES._entries[key]
    with dml.configure(threads=1):
        planner._MOVES.put(key, entry)
        from opendml.runtime import get_backend
        assert planner.lookup(key, get_backend("cpu")) is None


def test_bounded(monkeypatch):
    monkeypatch.setattr(planner._MOVES, "size", 5)
    xs = [np.zeros(n, np.float32) for n in range(1, 12)]
    # (a NumPy scalar scale: the C new-shape lowering declines it, so each call takes the Python route)
    want = [uncached(dml.identity, x, np.float64(1.0)) for x in xs]         # (configure() empties the caches)
    planner.clear()
    for x, w in zip(xs, want):
        assert outcome(dml.identity, x, np.float64(1.0)) == w
    assert planner.info()["entries"] == 5


def test_threads(kernels):
    clear()
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal(s).astype(dt) for s in ((6, 6), (4, 8), (2, 3, 4)) for dt in (np.float32, np.int16)]
    xs += [x[::-1] for x in xs] + [x.T for x in xs]
    ops = [lambda x: dml.identity(x), lambda x: dml.pad(x, 1, 2, mode="wrap"), lambda x: dml.tile(x, 2),
           lambda x: dml.cast(x, np.float16), lambda x: dml.join([x, x], 0),
           lambda x: dml.split(x, -1, [1, x.shape[-1] - 1]), lambda x: dml.pad(x, 2, 0, mode="symmetric", value=0)]
    work = [(op, x) for op in ops for x in xs]
    want = [uncached(op, x) for op, x in work]
    planner.clear()
    bad = []

    def worker(seed):
        order = np.random.default_rng(seed).permutation(len(work))
        for _ in range(3):
            for i in order:
                op, x = work[i]
                if outcome(op, x) != want[i]:
                    bad.append(i)
    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad
    assert served() > 0


def test_family_call_interface_unchanged():
    """A Call without a key (the frameworks' and ``fixed``'s) is never cached."""
    clear()
    call = front.Call("identity", lambda t: dml.ops.ElementWiseIdentityOperatorDesc(t, None, None))
    assert call.key is None and call.ccall is None
    out = call(X)[0]
    assert out.tobytes() == X.tobytes()
    assert call(X)[0].tobytes() == X.tobytes()
    assert entries() == 0


# -- the C call cache (runtime.calls.move) --------------------------------------------------------------

needs_compiled = pytest.mark.skipif("compiled" not in KERNELS or not ccache.info()["numpy"],
                                    reason="the C call cache needs the compiled extension built with NumPy")


@pytest.fixture
def compiled():
    with dml.configure(cpu_kernels="compiled", call_cache=True):
        yield


@needs_compiled
def test_lists_changed_between_calls_give_their_own_answers(compiled):
    x = np.arange(48, dtype=np.float32).reshape(6, 8)
    sizes, reps, start, arrays = [2, 4], [2, 1], [1, 0], [x, x]
    calls_ = [lambda: dml.split(x, 0, sizes), lambda: dml.tile(x, reps), lambda: dml.pad(x, start, 1, "edge"),
              lambda: dml.join(arrays, 0)]
    clear()
    for fn in calls_:
        assert outcome(fn) == outcome(fn)           # recorded, then served
    hits = c_served()
    sizes[:] = [5, 1]
    reps[1] = 3
    start[0] = 2
    arrays.append(x[:, ::-1])
    for fn in calls_:
        want = uncached(fn)
        assert outcome(fn) == want
    assert c_served() == hits                      # none of them was the recorded call
    sizes[:] = [6]
    assert outcome(calls_[0]) == uncached(calls_[0])


@needs_compiled
def test_a_list_changing_itself_while_read_is_read_once(compiled):
    """A list subclass (no C key) that changes when iterated: the route reads
    it once (its snapshot) and gives the snapshot's answer; the C cache
    records only exact lists and tuples, as snapshotted."""
    x = np.arange(48, dtype=np.float32).reshape(6, 8)

    class Shifty(list):
        def __iter__(self):
            items = self[:]                         # a plain list (no __iter__ of ours)
            self[:] = [3, 3] if items != [3, 3] else [2, 4]
            return iter(items)
    clear()
    for start in ([2, 4], [3, 3], [2, 4]):
        assert outcome(dml.split, x, 0, Shifty(start)) == uncached(dml.split, x, 0, Shifty(start))
        assert outcome(dml.split, x, 0, Shifty(start)) == uncached(dml.split, x, 0, list(start))
    want = uncached(dml.split, x, 0, [2, 4])         # (configure() empties the caches)
    outcome(dml.split, x, 0, Shifty([2, 4]))
    hits = c_served()
    assert outcome(dml.split, x, 0, [2, 4]) == want
    assert c_served() == hits + 1                   # the snapshot (2, 4) was recorded, and serves a plain list


@needs_compiled
def test_served_outputs_are_new_writable_and_independent(compiled):
    x = np.arange(64, dtype=np.int16).reshape(8, 8)
    x.flags.writeable = False                      # a read-only input is read as any other
    calls_ = [lambda: dml.identity(x), lambda: dml.cast(x, np.float32), lambda: dml.pad(x, 1, 1),
              lambda: dml.join([x, x], 1), lambda: dml.split(x, 1, [3, 5]), lambda: dml.tile(x, 2),
              lambda: dml.space_to_depth(x.reshape(1, 1, 8, 8), 2),
              lambda: dml.depth_to_space(x.reshape(1, 4, 4, 4), 2)]
    clear()
    for fn in calls_:
        want = uncached(fn)
        first = fn()
        outs = first if isinstance(first, list) else [first]
        for o in outs:
            assert o.flags.writeable and o.flags.c_contiguous and o.flags.owndata or o.base is not None
            assert not np.shares_memory(o, x)
            o[...] = 7                             # scribbling on a served output changes no later answer
        hits = c_served()
        second = fn()
        assert c_served() == hits + 1
        assert outcome(fn) == want
        seconds = second if isinstance(second, list) else [second]
        assert all(not np.shares_memory(a, b) for a in outs for b in seconds)
        if isinstance(first, list):
            assert first is not second


@needs_compiled
def test_configure_empties_the_c_entries_and_numpy_kernels_record_none(compiled):
    x = np.random.default_rng(5).standard_normal((16, 16)).astype(np.float32)
    calls_ = COMMON(x, x.reshape(1, 4, 8, 8))
    want = [uncached(fn) for fn in calls_]
    clear()
    assert [outcome(fn) for fn in calls_] == want
    assert ccache.info()["entries"] >= len(calls_)
    with dml.configure(threads=1):
        assert ccache.info()["entries"] == 0
        assert [outcome(fn) for fn in calls_] == want
        assert [outcome(fn) for fn in calls_] == want
    with dml.configure(cpu_kernels="numpy"):
        assert ccache.info()["entries"] == 0
        hits = c_served()
        assert [outcome(fn) for fn in calls_] == want
        assert [outcome(fn) for fn in calls_] == want
        assert ccache.info()["entries"] == 0 and c_served() == hits
    with dml.configure(call_cache=False):
        hits = served()
        assert [outcome(fn) for fn in calls_] == want
        assert [outcome(fn) for fn in calls_] == want
        assert served() == hits and entries() == 0


@needs_compiled
def test_argument_spellings_key_apart_and_unkeyable_ones_take_the_route(compiled):
    x = np.random.default_rng(6).standard_normal((4, 6)).astype(np.float32)
    tagged = np.dtype(np.float16, metadata={"a": 1})        # not NumPy's own dtype object: no C key
    calls_ = [lambda: dml.cast(x, np.float16), lambda: dml.cast(x, np.dtype(np.float16)),
              lambda: dml.cast(x, "float16"), lambda: dml.cast(x, "FLOAT16"), lambda: dml.cast(x, dml.DataType.FLOAT16),
              lambda: dml.cast(x, tagged), lambda: dml.pad(x, 1, 1, value=np.float32(0.5)),
              lambda: dml.pad(x, 1, 1, "é"), lambda: dml.pad(x, 1, 1, "constant" * 8),
              lambda: dml.identity(x, 2 ** 70), lambda: dml.tile(x, [1] * 9), lambda: dml.join([x] * 17, 0)]
    want = [uncached(fn) for fn in calls_]
    clear()
    for fn, w in zip(calls_, want):
        assert outcome(fn) == w and outcome(fn) == w
    assert ccache.info()["entries"] == 5                    # the five spellings of float16, each its own
    # JOIN's list and tuple of the same arrays are one call; an array where the list belongs is an error
    clear()
    assert outcome(dml.join, [x, x], 0) == outcome(dml.join, (x, x), 0) == uncached(dml.join, [x, x], 0)
    flat = np.arange(4, dtype=np.float32)
    assert outcome(dml.join, flat, 0) == outcome(dml.join, flat, 0) == uncached(dml.join, flat, 0)


@needs_compiled
def test_threads_while_the_configuration_changes():
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal((6, 8)).astype(np.float32), rng.integers(0, 99, (2, 4, 4, 4)).astype(np.int16)]
    work = [(fn, x) for x in xs for fn in (
        lambda x: dml.identity(x), lambda x: dml.pad(x, 1, 2, mode="reflect"), lambda x: dml.tile(x, 2),
        lambda x: dml.cast(x, np.float64), lambda x: dml.join([x, x[::-1]], -1),
        lambda x: dml.split(x, 0, [1, x.shape[0] - 1]))]
    work.append((lambda x: dml.space_to_depth(x, 2), xs[1]))
    want = [uncached(fn, x) for fn, x in work]
    bad, stop = [], threading.Event()

    def worker(seed):
        order = np.random.default_rng(seed).permutation(len(work))
        while not stop.is_set():
            for i in order:
                fn, x = work[i]
                if outcome(fn, x) != want[i]:
                    bad.append(i)
    with dml.configure(cpu_kernels="compiled", call_cache=True):
        threads = [threading.Thread(target=worker, args=(s,)) for s in range(3)]
        for t in threads:
            t.start()
        try:
            for k in range(20):
                with dml.configure(threads=1 + k % 2, call_cache=bool(k % 3)):
                    pass
        finally:
            stop.set()
            for t in threads:
                t.join()
    assert not bad


@pytest.mark.parametrize("dt", [np.uint8, np.float16, np.float32, np.float64])
def test_packed_copies_of_every_length_and_offset(kernels, dt):
    """Packed copies around the compiled kernels' 1 KiB vector-copy threshold
    and their tails, from and into addresses at every offset in a line:
    identity, join and split give the input's bytes."""
    rng = np.random.default_rng(8)
    base = rng.integers(0, 256, 1 << 14, dtype=np.uint8)
    size = np.dtype(dt).itemsize
    for nbytes in (992, 1000, 1024, 1032, 1056, 1088, 1152, 4096 + 40, 16384 - 64):
        n = nbytes // size
        for off in range(0, 64, 8 if size < 8 else 16):
            x = base[off:off + n * size].view(dt)
            for fn in (lambda: dml.identity(x), lambda: dml.join([x, x[::-1]], 0), lambda: dml.split(x, 0, [1, n - 1])):
                got = outcome(fn)
                assert got == outcome(fn) == uncached(fn)
            assert dml.identity(x).tobytes() == x.tobytes()


def test_the_move_cache_is_a_bounded_lru_and_the_plan_cache_it_reports():
    """One Python cache in ``planner``, the move cache (an entry made on another CPU backend being a miss),
    bounded, least recently used dropped first; ``plan_cache_info`` reports its size and plans (it used to report
    a second cache that only tests filled: 0 plans always)."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with dml.configure(cpu_kernels="numpy"):           # (NumPy's route plans in Python; the compiled one in C)
        planner.clear()
        dml.pad(x, 1, 1)
        dml.slice1(x, [0, 0], [3, 4], [1, -1])
        info = dml.plan_cache_info()
        assert info["size"] == planner.CACHE_SIZE and info["plans"] == planner.info()["entries"] == 2
    lru = type(planner._MOVES)(2, "entries")
    this, other = object(), object()
    entry = planner.Entry(this, None, None, (), (), None)
    lru.put("a", entry)
    assert lru.get("a", other) is None and lru.get("a", this) is entry and lru.get("a") is entry
    lru.put("b", entry)
    lru.put("c", entry)
    assert lru.get("a") is None and lru.get("c") is entry
    assert lru.info() == {"size": 2, "entries": 2, "hits": 3, "misses": 2}
