"""The index functions' never-seen shapes lowered in C (runtime/native/newshape_index.c): gather,
gather_elements, gather_nd, scatter_elements, scatter_nd, one_hot and reverse_subsequences on NumPy arrays
(and plain PyTorch CPU tensors) validated, lowered, run and recorded in one C call.

Each C lowering mirrors a Python one (the function's rules in arrays/index_ops.py, its operator module's
``__post_init__`` and ``_index_passes``, index_ops._record's passes): its passes equal the ones the
Python route records, and a never-seen shape's bytes and errors equal the plain route's (the check of
``check_indices`` included: C answers None on a bad index and the route raises).
"""
from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import opendml as dml
from opendml.arrays import index_ops
from opendml.runtime import calls as ccache
from opendml.runtime.config import CACHE_MIN_BYTES
from opendml.runtime.cpu import backend as cpu_backend
from tests.conftest import native_available
from .conftest import n_examples

pytestmark = pytest.mark.skipif(not native_available(), reason="the compiled extension is not built")

NAMES = ("gather", "gather_elements", "one_hot", "reverse_subsequences", "gather_nd", "scatter_elements", "scatter_nd")
DATA = ("f4", "f2", "f8", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "?")
INDEX = ("i4", "i8", "u4", "u8", "i2", "f4")


def outcome(fn, *args, **kwargs):
    try:
        out = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - compared below
        return ("error", type(e), str(e))
    return ("ok", out.dtype.str, out.shape, out.flags.c_contiguous, out.tobytes())


def python_route(fn, *args, **kwargs):
    """``fn``'s outcome through the Python route: neither cache, no C lowering."""
    real = index_ops._index_new
    index_ops._index_new = lambda *a: None
    try:
        with dml.configure(call_cache=False):
            return outcome(fn, *args, **kwargs)
    finally:
        index_ops._index_new = real


def strided(rng, a, view):
    """``a``, or (view) the same values in a view with some axes reversed or stepped."""
    if not view or a.ndim == 0:
        return a
    steps = [int(rng.choice([-2, 2, -1])) for _ in a.shape]
    big = np.zeros(tuple(2 * n for n in a.shape), a.dtype)
    sl = tuple(slice(None, None, s) for s in steps)
    big[sl][tuple(slice(0, n) for n in a.shape)] = a
    return big[sl][tuple(slice(0, n) for n in a.shape)]


def data(rng, shape, dt):
    dt = np.dtype(dt)
    if dt.kind == "f":
        return (rng.standard_normal(shape) * 50).astype(dt)
    return rng.integers(0, 2 if dt.kind == "b" else 100, shape).astype(dt)


def indices(rng, shape, bound, dt, bad):
    """Indices of ``shape`` in [-bound, bound) (signed) or [0, bound); ``bad``: one out of range."""
    dt = np.dtype(dt)
    lo = -bound if dt.kind == "i" else 0
    v = rng.integers(lo, max(bound, lo + 1), shape) if bound else np.zeros(shape, np.int64)
    if bad and v.size:
        v.reshape(-1)[rng.integers(0, v.size)] = bound + 2
    return v.astype(dt)


@st.composite
def calls(draw):
    """(name, the arrays, the arguments after them)."""
    name = draw(st.sampled_from(NAMES))
    rank = draw(st.integers(1, 5))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    views = draw(st.booleans()), draw(st.booleans())
    idt = draw(st.sampled_from(INDEX))
    bad = draw(st.integers(0, 7)) == 0
    check = draw(st.sampled_from([True, True, False]))
    if name != "one_hot":
        axis = draw(st.integers(-rank - 1, rank))
        a = axis % rank if -rank <= axis < rank else 0
        x = data(rng, shape, draw(st.sampled_from(DATA)))
    if name == "gather":
        ri = draw(st.integers(0, 3))
        ishape = tuple(draw(st.lists(st.integers(1, 4), min_size=ri, max_size=ri)))
        k = draw(st.one_of(st.none(), st.integers(-1, ri + 1)))
        if k is not None and 0 <= k <= ri and draw(st.booleans()):   # the leading ones IndexDimensions ignores
            ishape = (1,) * (ri - k) + ishape[ri - k:]
        ind = indices(rng, ishape, shape[a], idt, bad)
        return name, (strided(rng, x, views[0]), strided(rng, ind, views[1])), (axis, k, check)
    if name == "gather_elements":
        ishape = tuple(draw(st.integers(1, 4)) if d == a or draw(st.integers(0, 15)) == 0 else n
                       for d, n in enumerate(shape))
        if draw(st.integers(0, 15)) == 0:
            ishape = ishape + (1,)
        ind = indices(rng, ishape, shape[a], idt, bad)
        return name, (strided(rng, x, views[0]), strided(rng, ind, views[1])), (axis, check)
    if name == "reverse_subsequences":
        lshape = tuple(1 if d == a else n for d, n in enumerate(shape))
        if draw(st.booleans()):
            lshape = lshape[:a] + lshape[a + 1:]
        if draw(st.integers(0, 15)) == 0:
            lshape = lshape + (2,)
        ldt = draw(st.sampled_from(["u4", "u8", "u8", "i4"]))
        lengths = rng.integers(0, shape[a] + 2, lshape).astype(ldt)
        return name, (strided(rng, x, views[0]), strided(rng, lengths, views[1])), (axis,)
    if name == "scatter_elements":
        ishape = tuple(draw(st.integers(1, 4)) if d == a or draw(st.integers(0, 15)) == 0 else n
                       for d, n in enumerate(shape))
        ind = indices(rng, ishape, shape[a], idt, bad)
        ushape = ishape if draw(st.integers(0, 15)) else ishape[:-1] + (ishape[-1] + 1,)
        upd = data(rng, ushape, x.dtype if draw(st.integers(0, 9)) else "f8")
        return name, tuple(strided(rng, v, draw(st.booleans())) for v in (x, ind, upd)), (axis, check)
    if name in ("gather_nd", "scatter_nd"):
        b = draw(st.integers(0, 2)) if name == "gather_nd" else 0
        ri = draw(st.integers(1, 3))
        q = draw(st.integers(1, 3))
        ishape = tuple(shape[:b][:ri - 1]) + tuple(draw(st.integers(1, 3)) for _ in range(ri - 1 - min(b, ri - 1)))
        if draw(st.integers(0, 15)) == 0 and ishape:
            ishape = (ishape[0] + 1,) + ishape[1:]             # a batch size that differs
        ishape = ishape + (q,)
        bounds = [shape[b + j] if b + j < rank else 1 for j in range(q)]
        ind = np.stack([indices(rng, ishape[:-1], n, idt, bad and j == 0) for j, n in enumerate(bounds)], -1)
        ind = ind.astype(idt)
        if name == "gather_nd":
            return name, (strided(rng, x, views[0]), strided(rng, ind, views[1])), (b, check)
        ushape = ishape[:-1] + shape[q:]
        if draw(st.integers(0, 15)) == 0:
            ushape = ushape + (1,)
        upd = data(rng, ushape, x.dtype if draw(st.integers(0, 9)) else "i2")
        return name, tuple(strided(rng, v, draw(st.booleans())) for v in (x, ind, upd)), (check,)
    depth = draw(st.sampled_from([1, 2, 3, 5, 0, True]))
    axis = draw(st.integers(-rank - 2, rank + 1))
    vdt = draw(st.sampled_from(DATA))
    values = data(rng, (draw(st.sampled_from([2, 2, 2, 3])),), vdt)
    ind = rng.integers(-7, 7, shape).astype(idt)
    return name, (strided(rng, ind, views[0]), strided(rng, values, views[1])), (depth, axis)


def call(name, arrays, args):
    """The array function on the drawn arrays and arguments."""
    a, b = arrays[:2]
    if name == "gather_nd":
        return dml.gather_nd(a, b, args[0], check_indices=args[1])
    if name == "scatter_elements":
        return dml.scatter_elements(a, b, arrays[2], args[0], check_indices=args[1])
    if name == "scatter_nd":
        return dml.scatter_nd(a, b, arrays[2], check_indices=args[0])
    if name == "gather":
        axis, k, check = args
        return dml.gather(a, b, axis, k, check_indices=check)
    if name == "gather_elements":
        return dml.gather_elements(a, b, args[0], check_indices=args[1])
    if name == "one_hot":
        return dml.one_hot(a, args[0], b, args[1])
    return dml.reverse_subsequences(a, b, args[0])


def offered(name, args):
    """The arguments as the function offers them to C (index_ops' ``_offer``)."""
    if name == "gather":
        return (args[2], args[0], args[1])
    if name in ("gather_elements", "gather_nd", "scatter_elements"):
        return (args[1], args[0])
    return tuple(args)


def canonical(params: bytes, sizes_from=None):
    """index.c's parameters with the values no element reaches zeroed: the strides of size-1 dimensions
    (NumPy's reshape gives them any value) and an index axis's stride where its bound is 1."""
    p = cpu_backend.IndexParams.from_buffer_copy(params)
    for d in range(p.rank):
        if p.sizes[d] == 1:
            p.src_strides[d] = p.dst_strides[d] = 0
            for a in range(p.naxes):
                p.axes[a].strides[d] = 0
    for a in range(p.naxes):
        if p.axes[a].bound == 1:
            p.axes[a].stride = 0
    return bytes(p)


def python_record(name, arrays, args, monkeypatch):
    """What the Python route records for the call (``index_ops._record``'s put_move), None where it
    records nothing, or the error it raises."""
    seen = []
    real = ccache.put_move

    def spy(*a):
        seen.append(a)
        return real(*a)
    ccache.clear()
    with monkeypatch.context() as m:
        m.setattr(index_ops, "_index_new", lambda *a: None)
        m.setattr(index_ops._calls, "put_move", spy)
        try:
            call(name, arrays, args)
        except (dml.ValidationError, dml.UnsupportedError) as e:
            return e
    if not seen:
        return None
    _, _, _, outs, _, passes, _, _ = seen[0]
    return outs[0][:2], tuple((src, dst, canonical(params), threads, bool(checked[0]) if checked else False)
                              for _, src, dst, params, threads, *checked in passes)


def c_lowering(name, arrays, args):
    op = ccache.OPS[name]
    which, types = index_ops._C_INDEX[op]
    got = cpu_backend._load_native().index_lowering(which, types, tuple(arrays), offered(name, args),
                                                    CACHE_MIN_BYTES)
    if got is None:
        return None
    shape, dtype, passes = got
    return (shape, dtype), tuple((src, dst, canonical(params), threads, bool(checked))
                                 for src, dst, params, threads, checked in passes)


@settings(max_examples=n_examples(200), deadline=None)
@given(calls())
def test_passes_equal_the_python_routes(drawn):
    """Can fail: the C lowering's output and passes differ from what the Python route records, or C takes a
    call the Python route refuses."""
    name, arrays, args = drawn
    with pytest.MonkeyPatch.context() as mp:
        want = python_record(name, arrays, args, mp)
    got = c_lowering(name, arrays, args)
    if isinstance(want, Exception) and "out of range" in str(want):
        return                    # index values: the lowering does not read them (its run answers None)
    if isinstance(want, Exception):
        assert got is None, f"the C lowering took a call the Python route refuses: {want}"
    elif got is not None:
        assert want is not None, "the C lowering took a call the Python route does not record"
        assert got == want


@settings(max_examples=n_examples(150), deadline=None)
@given(calls())
def test_new_shapes_give_the_plain_routes_bytes_and_errors(drawn):
    """Can fail: a never-seen shape served in C gives other bytes or another error than the plain route
    (a checked out-of-range index included), or its repeat (a call-cache hit) does."""
    name, arrays, args = drawn
    want = python_route(call, name, arrays, args)
    ccache.clear()
    assert outcome(call, name, arrays, args) == want
    assert outcome(call, name, arrays, args) == want


def test_common_calls_are_lowered_in_c(monkeypatch):
    """Can fail: a valid never-seen shape of each function builds a description (the Python route) instead
    of being lowered in C, gives other bytes than the plain route, or its repeat is not a call-cache hit."""
    from opendml.arrays import engine
    rng = np.random.default_rng(3)
    x = data(rng, (1, 3, 5, 7), "f4")
    cases = [("gather", (x, indices(rng, (4,), 5, "i8", False)), (2, None, True)),
             ("gather", (strided(rng, x, True), indices(rng, (2, 3), 7, "i4", False)), (-1, 2, False)),
             ("gather_elements", (x, indices(rng, (1, 3, 2, 7), 5, "u4", False)), (2, True)),
             ("one_hot", (rng.integers(-6, 6, (2, 5)), np.array([0.5, 2.0], np.float32)), (6, 1)),
             ("reverse_subsequences", (x, rng.integers(0, 9, (1, 3, 5)).astype(np.uint32)), (3,)),
             ("gather_nd", (x, np.array([[0, 2, 4], [0, 1, 0]], np.int64)), (0, True)),
             ("gather_nd", (x[0], np.array([[[1], [3]], [[0], [0]], [[4], [2]]], np.uint32)), (1, False)),
             ("scatter_elements", (x, np.argsort(rng.random((1, 3, 5, 7)), axis=2), x[:, :, ::-1]), (2, True)),
             ("scatter_nd", (x, np.array([[0, 2], [0, 1]], np.int32), data(rng, (2, 5, 7), "f4")), (True,))]
    for name, arrays, args in cases:
        want = python_route(call, name, arrays, args)
        ccache.clear()
        with monkeypatch.context() as m:
            m.setattr(engine.Call, "describe", lambda *a, **k: pytest.fail(f"{name}: a description was built"))
            assert outcome(call, name, arrays, args) == want
            hits = ccache.info()["hits"]
            assert outcome(call, name, arrays, args) == want
            assert ccache.info()["hits"] == hits + 1, name


def test_a_checked_bad_index_raises_the_routes_error(monkeypatch):
    """Can fail: a never-seen shape whose checked index is out of range gives a result (the clamped one)
    or another error than the Python route's, naming the first bad index."""
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    for ind in (np.array([[0, 9], [1, -6]], np.int64), np.array([[3, 7]], np.uint32)):
        want = python_route(dml.gather, x, ind, 2)
        assert want[0] == "error" and "out of range" in want[2]
        ccache.clear()
        assert outcome(dml.gather, x, ind, 2) == want
        assert outcome(dml.gather, x, ind, 2, check_indices=False) == python_route(dml.gather, x, ind, 2,
                                                                                  check_indices=False)
    ind = np.zeros((3, 4, 2), np.int32)
    ind[1, 2, 1] = 5
    ccache.clear()
    assert outcome(dml.gather_elements, x, ind, 2) == python_route(dml.gather_elements, x, ind, 2)


def test_threads_and_configure():
    """Can fail: never-seen shapes lowered in C from several threads at once, or after ``configure()``
    emptied the cache, give other bytes than the plain route."""
    rng = np.random.default_rng(11)
    work = []
    for i in range(24):
        x = data(rng, (1, 2 + i % 3, 3 + i, 4), "f4" if i % 2 else "i8")
        ind = indices(rng, (2 + i % 5,), x.shape[2], "i4", i % 7 == 0)
        work.append((x, ind))
    want = [python_route(dml.gather, x, ind, 2) for x, ind in work]
    for _ in range(2):
        with dml.configure():
            ccache.clear()
            got = [None] * len(work)

            def run(j):
                for i in range(j, len(work), 4):
                    got[i] = outcome(dml.gather, *work[i], 2)
            threads = [threading.Thread(target=run, args=(j,)) for j in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert got == want


def test_torch_cpu_tensors():
    """Can fail: a never-seen shape of PyTorch CPU tensors gives other values than NumPy's route, or not a
    tensor."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x = data(rng, (1, 3, 6, 5), "f4")
    ind = indices(rng, (4,), 6, "i8", False)
    ccache.clear()
    got = dml.gather(torch.from_numpy(x), torch.from_numpy(ind), 2)
    assert type(got) is torch.Tensor and np.array_equal(got.numpy(), np.take(x, ind, 2))
    lengths = rng.integers(0, 7, (1, 3, 1, 5)).astype(np.uint32)
    got = dml.reverse_subsequences(torch.from_numpy(x), torch.from_numpy(lengths), 2)
    assert outcome(lambda: got.numpy()) == python_route(dml.reverse_subsequences, x, lengths, 2)


def test_a_gather_nd_output_past_eight_dimensions_is_declined_before_it_is_built():
    """x and indices of rank 8 with one-entry tuples make a 14-dimension
    output: C declines it before filling its 8-entry shape (the sanitizer
    pass runs this), and the route raises its error: too many dimensions."""
    x = np.zeros((2,) * 8, np.float32)
    ind = np.zeros((2,) * 7 + (1,), np.int64)
    with pytest.raises(dml.ValidationError, match="^gather_nd: .* need 14 dimensions .* at most 8$"):
        dml.gather_nd(x, ind)
    with pytest.raises(dml.ValidationError, match="^gather_nd: .* need 14 dimensions .* at most 8$"):
        dml.gather_nd(x, ind, check_indices=False)
