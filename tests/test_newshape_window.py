"""Issue 31 (every operator on the C new-shape route): UNFOLD's and FOLD's
never-seen shapes lowered in C.

* ``unfold_lowering`` and ``fold_lowering`` (runtime/native/newshape.c) against
  the Python functions they mirror (ops/unfold.py's and ops/fold.py's
  ``plain_lowering``), on random valid and invalid arguments: wherever C
  answers, the answer is Python's (values and types); it never raises, and it
  answers every call of plain ints in 64 bits that Python answers.
* FOLD's ``plain_lowering`` against the description: wherever it answers, the
  description the array function builds is valid and lowers to that plan;
  where the description's fast path takes the call, it answers.
* FOLD's plan in C (``plan_fold``: kernel parameters, threads, call-cache
  record) against the route through descriptions and plans, over layouts and
  dtypes; UNFOLD and FOLD with the compiled lowering and without it; the
  call cache's miss (``numpy_plain``) serving new shapes of both; from
  several threads at once; after ``configure()``.
"""
import math
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import opendml as dml
from opendml.arrays import front
from opendml.model import TensorDesc
from opendml.ops import FoldOperatorDesc
from opendml.ops import fold as fold_op
from opendml.ops import unfold as unfold_op
from opendml.runtime import calls, get_backend
from tests import reference as ref
from tests.conftest import native_available
from tests.test_newshape_fastpaths import outcome, per_axis, window_args
from tests.test_newshape_lowering import EDGES, ODD, compare, in_sizes
from tests.test_newshape_plain import check, laid_out, plain_off, recorded, same_result, unfold_fields
from .conftest import n_examples

pytestmark = pytest.mark.skipif(not native_available(), reason="the compiled CPU kernels are not built")

SETTINGS = settings(max_examples=n_examples(150), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
I64 = 2**63 - 1


@pytest.fixture(autouse=True)
def _compiled_kernels():
    with dml.configure(cpu_kernels="compiled", call_cache=True):
        yield


def _native():
    return get_backend("cpu")._native


# -- the C functions against the Python ones ----------------------------------------------------------------

@st.composite
def axes(draw, d, valid):
    """A window field of ``d`` axes: an int (spread over them), a list or tuple
    (``valid`` often), or something odd."""
    kind = draw(st.integers(0, 9))
    if kind < 2:
        return draw(st.one_of(st.integers(-1, 4), st.sampled_from(EDGES)))
    if kind == 2:
        return draw(st.sampled_from(ODD + [None, "ab", np.array(valid)]))
    values = list(valid) if kind < 7 else [draw(st.one_of(st.integers(-1, 5), st.sampled_from(EDGES + ODD)))
                                           for _ in range(draw(st.sampled_from([d, d, d - 1, d + 1, 0])))]
    return tuple(values) if draw(st.booleans()) else values


def plain(shape, *fields) -> bool:
    """Whether C must answer where Python does: a tuple of ints in 64 bits,
    each field an int in 64 bits or a list or tuple of them."""
    def ok(v):
        return type(v) is int and -I64 - 1 <= v <= I64
    return (type(shape) is tuple and all(ok(v) for v in shape)
            and all(ok(f) or (type(f) in (list, tuple) and all(ok(v) for v in f)) for f in fields))


@SETTINGS
@given(st.data())
def test_unfold_lowering_equals_python(data):
    shape = data.draw(in_sizes())
    d = max(len(shape) - 2, 1)
    valid = [[data.draw(st.integers(lo, 3)) for _ in range(d)] for lo in (1, 1, 1, 0, 0)]
    fields = [data.draw(axes(d, v)) for v in valid][:data.draw(st.integers(1, 5))]
    compare(_native().unfold_lowering, unfold_op.plain_lowering, plain(shape, *fields), shape, *fields)


@SETTINGS
@given(st.data())
def test_fold_lowering_equals_python(data):
    cols, image, *fields = data.draw(window_args(fold=True))
    shape = cols.sizes if isinstance(cols, TensorDesc) else data.draw(in_sizes())
    if data.draw(st.integers(0, 4)) == 0:
        shape = data.draw(in_sizes())
    d = len(image.sizes) - 2 if isinstance(image, TensorDesc) else 2
    spatial = list(image.sizes[2:]) if isinstance(image, TensorDesc) else [2] * d
    out = data.draw(st.one_of(st.just(spatial), st.just(tuple(spatial)), axes(d, spatial)))
    fields = [out, *fields][:data.draw(st.integers(2, 6))]
    compare(_native().fold_lowering, fold_op.plain_lowering, plain(shape, *fields), shape, *fields)


def test_window_lowering_edges():
    u, f = _native().unfold_lowering, _native().fold_lowering
    # UNFOLD: ints spread, defaults, tuples given back as they are
    assert u((1, 2, 5, 6), 3, 1, 1, 1, 1) == ((1, 18, 30), (3, 3), (1, 1), (1, 1), (1, 1), (5, 6))
    assert u((1, 2, 5, 6), 3) == unfold_op.plain_lowering((1, 2, 5, 6), 3)
    w = (2, 3)
    assert u((1, 2, 5, 6), w)[1] is w
    # FOLD: the number of axes from output_sizes, else window_sizes, else 1; leading 1s; a packed output
    assert f((1, 8, 12), [4, 5], [2, 2]) == ((1, 2, 4, 5), (2, 2), (1, 1), (1, 1), (0, 0), (3, 4))
    assert f((1, 1, 8, 12), [4, 5], [2, 2]) == f((1, 8, 12), [4, 5], [2, 2])
    assert f((1, 8, 12), [4, 5], 2) == f((1, 8, 12), [4, 5], [2, 2])
    assert f((2, 6, 4), 6, [3], 1) == fold_op.plain_lowering((2, 6, 4), 6, [3], 1) == (
        (2, 2, 6), (3,), (1,), (1,), (0,), (4,))
    assert f((2, 6, 4), 6, 3) == ((2, 2, 6), (3,), (1,), (1,), (0,), (4,))
    declined = [
        (u, ((1, 2), 1)), (u, ((1, 2, 5), 6)), (u, ((1, 2, 5), 0)), (u, ((1, 2, 5), True)),
        (u, ((1, 2, 5), np.int64(2))), (u, ((1, 2, 5, 5), [2])), (u, ((1, 2, 5), 2, 1, 1, -1)),
        (u, ((1, 2, 5), 2, 2**32)), (u, ((1,) * 9, 1)), (u, ((2**16, 2**16, 2), 1)),
        (f, ((1, 8, 11), [4, 5], [2, 2])),         # not the block count
        (f, ((1, 9, 12), [4, 5], [2, 2])),         # rows not a multiple of the window
        (f, ((2, 1, 8, 12), [4, 5], [2, 2])),      # a leading 2
        (f, ((1, 1, 1, 8, 12), [4, 5], [2, 2])),   # more dimensions than the output
        (f, ((8, 12), [4, 5], [2, 2])), (f, ((1, 8, 12), [4, 0], [2, 2])), (f, ((1, 8, 12), [4, 5.0], [2, 2])),
        (f, ((1, 8, 12), [4, 5], [2, 2], 0)), (f, ((1, 8, 12), np.array([4, 5]), [2, 2])),
        (f, ((1, 8, 2**32), [2**33], [1])),
    ]
    for fn, args in declined:
        assert fn(*args) is None, args
        python = unfold_op.plain_lowering if fn is u else fold_op.plain_lowering
        assert python(*args) is None, args
    with pytest.raises(TypeError):
        u((1, 2, 5))
    with pytest.raises(TypeError):
        f((1, 8, 12), [4, 5])


def test_the_compiled_window_lowering_answers_a_plain_call_as_python():
    want = ((1, 2, 4, 5), (2, 2), (1, 1), (1, 1), (0, 0), (3, 4))
    assert _native().fold_lowering((1, 8, 12), [4, 5], [2, 2], 1, 1, 0, 0) == fold_op.plain_lowering(
        (1, 8, 12), [4, 5], [2, 2], 1, 1, 0, 0) == want


# -- FOLD's plain_lowering against the description -------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_fold_plain_lowering_is_the_descriptions_plan(data):
    cols, image, *fields = data.draw(window_args(fold=True))
    if not isinstance(cols, TensorDesc) or not isinstance(image, TensorDesc) or cols.strides is not None \
            or cols.flags:
        return
    spatial = data.draw(st.sampled_from([list(image.sizes[2:]), tuple(image.sizes[2:])]))
    desc = outcome(lambda: FoldOperatorDesc.arguments(front.ARGUMENT_API, None, spatial, *fields)(cols))
    got = fold_op.plain_lowering(cols.sizes, spatial, *fields)
    if got is None:
        # declined: only where the description's fast path declines too
        if all(type(f) is int or (type(f) in (list, tuple) and all(type(v) is int for v in f)) for f in fields) \
                and desc[0] == "ok":
            d = desc[1]
            assert not (type(d.input_tensor) is TensorDesc and d._fast_path()), (cols.sizes, spatial, fields)
        return
    assert desc[0] == "ok", desc
    d = desc[1]
    assert isinstance(d, FoldOperatorDesc)
    ts = tuple(range(len(cols.sizes), 0, -1))
    plan = d.lower(in_strides=ts, in_offset=3).kernel_plan()
    out, window, strides, dilations, start, blocks = got
    assert out == d.output_tensor.sizes and type(out) is tuple
    assert (window, strides, dilations, start, blocks) == (plan.window, plan.strides, plan.dilations,
                                                            plan.start_padding, plan.blocks)


# -- the array API: the C route against descriptions and plans --------------------------------------------------

def _fold_case(data):
    """(columns array, fold arguments): mostly valid, sometimes not."""
    cols, image, *fields = data.draw(window_args(fold=True))
    shape = cols.sizes if isinstance(cols, TensorDesc) else (1, 4, 6)
    spatial = list(image.sizes[2:]) if isinstance(image, TensorDesc) else [2, 3]
    x = data.draw(laid_out(shape))
    return x, (spatial, *fields)


def _modest(x, args) -> bool:
    """The FOLD call's output stays small (a drawn padding may ask, validly, for a huge one)."""
    return math.prod(x.shape) <= 1 << 16 and all(not isinstance(v, int) or abs(v) < 64
                                                 for a in args for v in (a if isinstance(a, (list, tuple)) else [a]))


@SETTINGS
@given(st.data())
def test_fold_plain_route_equals_the_plan_route(data):
    x, args = _fold_case(data)
    assume(_modest(x, args))
    got = check(dml.fold, x, *args)
    if got[0] == "ok" and x.dtype.kind in "iu":
        d = len(args[0])
        want = ref.fold(np.asarray(x).astype(np.int64), args[0], *(per_axis(f, d) for f in args[1:]))
        assert np.array_equal(got[1], want.astype(x.dtype))


@SETTINGS
@given(st.data())
def test_window_array_api_with_and_without_the_compiled_lowering(monkeypatch, data):
    if data.draw(st.booleans()):
        x, args = _fold_case(data)
        assume(_modest(x, args))
        fn = dml.fold
    else:
        image, _, *_ = data.draw(window_args())
        shape = image.sizes if isinstance(image, TensorDesc) else (1, 2, 5)
        x = data.draw(laid_out(shape))
        args = data.draw(unfold_fields(len(shape) - 2))
        assume(_modest(x, args))
        fn = dml.unfold
    got = recorded(fn, x, *args)
    with monkeypatch.context() as m:
        m.setattr(front, "_move_new", lambda *a: None)        # the C route (the compiled lowering) refused
        want = recorded(fn, x, *args)
    calls.clear()
    same_result(got[0], want[0])
    assert got[1] == want[1]


def test_window_errors_equal_the_plan_route():
    x = np.arange(1 * 8 * 12, dtype=np.float32).reshape(1, 8, 12)
    cases = [
        (dml.fold, x, [4, 5], [2, 2]), (dml.fold, x, (4, 5), 2, 1, 1, 0, 0), (dml.fold, x, [4, 5], [2, 3]),
        (dml.fold, x, [4, 6], [2, 2]), (dml.fold, x, [4, 5], [2, 2], 0), (dml.fold, x, [4, 5], [2, 2], 1, 1, -1),
        (dml.fold, x, [4, 5], [True, 2]), (dml.fold, x, [4, 5.0], [2, 2]), (dml.fold, x, 4, [2, 2]),
        (dml.fold, x[None], [4, 5], [2, 2]), (dml.fold, x[:, :, ::-1], [4, 5], [2, 2]),
        (dml.fold, np.broadcast_to(x, (2, 1, 8, 12)), [4, 5], [2, 2]), (dml.fold, x[0], [4, 5], [2, 2]),
        (dml.fold, x.astype(np.float16), [4, 5], [2, 2]), (dml.fold, x.astype(np.int8), [4, 5], [2, 2]),
        (dml.fold, x.astype(np.uint64), [4, 5], [2, 2]), (dml.fold, x.astype(bool), [4, 5], [2, 2]),
        (dml.fold, x.astype(np.complex64), [4, 5], [2, 2]), (dml.fold, x.astype(">f4"), [4, 5], [2, 2]),
        (dml.fold, x[:, :, :0], [4, 5], [2, 2]), (dml.fold, x, [2**20, 2**20], [2, 2]),
        (dml.fold, x, [4, 5, 1], [2, 2, 1]), (dml.fold, x, [4, 5], [2, 2], 1, 1, 0, [0, 2**32]),
        (dml.unfold, x[None], 2), (dml.unfold, x, [2**31]), (dml.unfold, x, 3, 1, 1, 2**31),
    ]
    for fn, *args in cases:
        want = plain_off(fn, *args)
        calls.clear()
        got = outcome(fn, *args)
        same_result(got, want)


def test_fold_runs_without_a_description(monkeypatch):
    """Can fail: a never-seen shape of FOLD builds no description, and its
    record is the plan route's."""
    base = np.arange(2 * 18 * 20, dtype=np.float32).reshape(2, 18, 20)
    for x in (base, base[:, ::-1], np.asfortranarray(base), base[None], base.astype(np.int16)):
        want = plain_off(dml.fold, x, [4, 5], 3, 1, 1, 1, 1, with_records=True)
        with monkeypatch.context() as m:
            m.setattr(FoldOperatorDesc, "__init__", lambda *a, **k: pytest.fail("a description was built"))
            got = recorded(dml.fold, x, [4, 5], 3, 1, 1, 1, 1)
        same_result(got[0], want[0])
        assert got[1] == want[1] and got[1] is not None


def test_the_call_cache_miss_serves_window_shapes_in_c():
    """After one call of an operator, dtype and rank, a new shape's miss of
    the call cache is lowered, run and recorded in C (``planned`` counts it),
    with the bytes of the route through descriptions."""
    for fn, make in ((dml.unfold, lambda h, w: (np.random.rand(1, 3, h, w).astype(np.float32), (3, 1, 1, 1, 1))),
                     (dml.fold, lambda h, w: (np.random.rand(1, 27, h * w).astype(np.float32),
                                              ([h, w], [3, 3], 1, 1, 1, 1)))):
        calls.clear()
        x, args = make(5, 6)
        fn(x, *args)
        before = calls.info()["planned"]
        runs = [(x, args, fn(x, *args)) for x, args in (make(h, w) for h, w in ((7, 9), (4, 11), (13, 3)))]
        assert calls.info()["planned"] - before == 3
        for x, args, got in runs:                    # (plain_off empties the cache, and with it what C learnt)
            want = plain_off(fn, x, *args)
            assert want[0] == "ok" and got.tobytes() == want[1].tobytes()


def test_new_window_shapes_from_threads_and_after_configure():
    """Several threads calling UNFOLD and FOLD on shapes no call saw get the
    reference's bytes; so do calls after configure() changes threads, grain,
    kernels and the call cache."""
    rng = np.random.default_rng(5)
    shapes = [(1, int(c), int(h), int(w)) for c, h, w in rng.integers(1, 30, size=(48, 3))]
    errors = []

    def work(part):
        try:
            for shape in part:
                x = (np.arange(math.prod(shape)) % 13).astype(np.float32).reshape(shape)
                cols = dml.unfold(x, 3, 1, 1, 1, 1)
                assert np.array_equal(cols, ref.unfold(x, [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]))
                back = dml.fold(cols, list(shape[2:]), 3, 1, 1, 1, 1)
                assert np.array_equal(back, ref.fold(cols, list(shape[2:]), [3, 3], [1, 1], [1, 1], [1, 1],
                                                     [1, 1]))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(shapes[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    x = (np.arange(5 * 31 * 17) % 11).astype(np.float32).reshape(1, 5, 31, 17)   # exact sums in any order
    for settings_ in ({"threads": 1}, {"thread_grain_bytes": 64}, {"cpu_kernels": "numpy"}, {"call_cache": False}):
        with dml.configure(**settings_):
            x = x[:, :, :-1]                                 # a new shape each time
            want = ref.unfold(x, [2, 3], [1, 2], [1, 1], [0, 1], [1, 0])
            assert np.array_equal(dml.unfold(x, [2, 3], [1, 2], 1, [0, 1], [1, 0]), want)
            assert np.array_equal(dml.fold(want, list(x.shape[2:]), [2, 3], [1, 2], 1, [0, 1], [1, 0]),
                                  ref.fold(want, list(x.shape[2:]), [2, 3], [1, 2], [1, 1], [0, 1], [1, 0]))


def test_a_list_changed_by_a_finalizer_during_the_c_lowering():
    """unfold_lowering and fold_lowering read every field before they
    allocate: a collection their allocations start, whose finalizers change
    the fields, cannot change the answer (Python's for the fields as they
    were at the call)."""
    from tests.test_newshape_lowering import _collected_during
    u, f = _native().unfold_lowering, _native().fold_lowering
    window, strides = [3, 2], [1, 2]
    want = unfold_op.plain_lowering((1, 2, 9, 8), window, strides, 1, [1, 0], 0)
    got, _ = _collected_during(u, (1, 2, 9, 8), window, strides, 1, [1, 0], 0,
                               changes=[(window, 0, 1), (strides, 1, 5)])
    assert got == want and window[0] == 1 and strides[1] == 5
    out, window = [4, 5], [2, 2]
    want = fold_op.plain_lowering((1, 8, 12), out, window)
    got, _ = _collected_during(f, (1, 8, 12), out, window, changes=[(out, 0, 7), (window, 1, 1)])
    assert got == want and out[0] == 7 and window[1] == 1
