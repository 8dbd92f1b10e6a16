"""Issue 31 (a never-seen shape at most 3x NumPy's time): the call cache's
miss on a NumPy array of SLICE, SLICE1 or SLICE_GRAD served as a new shape in
the same C call (``runtime/native/calls_move_new.c``, ``numpy_plain``), once the
Python route has recorded a call of that operator on an array of the same
dtype and rank since the cache was last emptied.

* It is taken (no Python route runs) only then: not before any such record,
  not for another dtype or rank, not after ``calls.clear()`` or
  ``configure()``, not with the cache off.
* What it gives is the route through descriptions and plans: the same bytes,
  dtype and shape, the same call-cache record, one plan-cache miss; and for
  any argument its C lowering declines (invalid, or not plain), the Python
  route's answer or error.
"""
import numpy as np
import pytest

import opendml as dml
from opendml.arrays import front
from opendml.runtime import calls
from tests.conftest import native_available
from tests.test_newshape_fastpaths import outcome
from tests.test_newshape_plain import plain_off, same_result

pytestmark = pytest.mark.skipif(not native_available(), reason="the compiled CPU kernels are not built")


@pytest.fixture(autouse=True)
def _compiled_kernels():
    with dml.configure(cpu_kernels="compiled", call_cache=True):
        calls.clear()
        yield
        calls.clear()


def _planned() -> int:
    return calls.info()["planned"]


def _slice1(x):
    return dml.slice1, ([0] * x.ndim, list(x.shape), [1] * (x.ndim - 1) + [-1], None)


def _slice(x):
    return dml.slice, ([0] * (x.ndim - 1) + [1], [*x.shape[:-1], (x.shape[-1] - 1) // 2], [1] * (x.ndim - 1) + [2])


def _slice_grad(x):
    # x is the input gradient: slice1's output of a window with stride -2 on the last axis
    *lead, last = x.shape
    return dml.slice_grad, ([*lead, 2 * last + 1], [0] * x.ndim, [*lead, 2 * last], [1] * (x.ndim - 1) + [-2])


OPS = [_slice1, _slice, _slice_grad]


def _no_python_route(monkeypatch):
    monkeypatch.setattr(front, "_new", lambda *a: pytest.fail("the Python route ran"))
    monkeypatch.setattr(front, "_plan", lambda *a: pytest.fail("the Python route ran"))


@pytest.mark.parametrize("make", OPS)
def test_a_miss_is_served_in_c_after_a_record_and_equals_the_plan_route(make, monkeypatch):
    rng = np.random.default_rng(0)
    first = rng.random((2, 3, 5, 7), dtype=np.float32)
    fn, args = make(first)
    before = _planned()
    assert outcome(fn, first, *args)[0] == "ok"               # the Python route: records a template
    assert _planned() == before
    layouts = []
    for shape in [(1, 4, 6, 9), (3, 1, 2, 5), (2, 2, 8, 3)]:
        base = rng.random(shape, dtype=np.float32)
        layouts += [base, base[:, :, ::-1], base.transpose(0, 2, 1, 3), np.asfortranarray(base)]
    for x in layouts:
        fn, args = make(x)
        want, want_entry = plain_off(fn, x, *args, with_records=True)
        outcome(fn, first, *make(first)[1])                   # the template again (plain_off emptied the cache)
        misses = dml.plan_cache_info()["misses"]
        served = _planned()
        with monkeypatch.context() as m:
            _no_python_route(m)
            got = outcome(fn, x, *args)
        assert _planned() == served + 1
        assert dml.plan_cache_info()["misses"] == misses + 1
        same_result(got, want)
        entry = calls.entry(fn.__name__, x, *args)
        entry = dict(entry, dtype=(type(entry["dtype"]), entry["dtype"].str))
        assert entry == want_entry
        same_result(outcome(fn, x, *args), want)              # and its record serves the repeat
        assert _planned() == served + 1


@pytest.mark.parametrize("make", OPS)
def test_only_a_recorded_operator_dtype_and_rank_is_served(make):
    rng = np.random.default_rng(1)
    before = _planned()
    x = rng.random((2, 3, 5, 9), dtype=np.float32)
    outcome(make(x)[0], x, *make(x)[1])                       # no record yet: the Python route, which records
    assert _planned() == before
    for other in (x.astype(np.float64), x.astype(np.int8), x[0]):                 # another dtype, another rank
        fn, args = make(other)
        assert outcome(fn, other, *args)[0] == "ok"
        assert _planned() == before
    y = rng.random((1, 2, 6, 4), dtype=np.float32)
    outcome(make(y)[0], y, *make(y)[1])
    assert _planned() == before + 1
    fn = make(y)[0]
    calls.clear()                                             # emptied: learned again
    z = rng.random((1, 2, 4, 5), dtype=np.float32)
    outcome(fn, z, *make(z)[1])
    assert _planned() == before + 1
    with dml.configure(threads=2):                            # a configure() empties it too
        z = rng.random((1, 2, 4, 6), dtype=np.float32)
        outcome(fn, z, *make(z)[1])
        assert _planned() == before + 1
        z = rng.random((1, 2, 4, 7), dtype=np.float32)
        outcome(fn, z, *make(z)[1])
        assert _planned() == before + 2


def test_a_bool_array_still_gets_the_python_routes_error():
    x = np.ones((2, 3, 4, 5), np.float32)
    dml.slice1(x, [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, 1, -1])
    b = np.ones((2, 3, 4, 6), bool)
    got = outcome(dml.slice1, b, [0, 0, 0, 0], [2, 3, 4, 6], [1, 1, 1, -1])
    assert got[0] != "ok" and "UnsupportedError" in repr(got)


@pytest.mark.parametrize("bad", [
    (dml.slice1, ([0, 0, 0, 1], [2, 3, 4, 6], [1, 1, 1, 1], None)),       # the window leaves the input
    (dml.slice1, ([0, 0, 0, 0], [2, 3, 4, 6], [1, 1, 1, 0], None)),       # a zero stride
    (dml.slice1, ([0, 0, 0], [2, 3, 4], [1, 1, 1], None)),                # a field of the wrong length
    (dml.slice1, ([0, 0, 0, 0], [2, 3, 4, 6], [1, 1, 1, 1], [2, 3, 4, 7])),  # output sizes beyond the window
    (dml.slice1, ([0, 0, 0, 0], [2, 3, 4, 3], [1, 1, 1, 2], [2, 3, 4, 2])),  # output sizes given: valid, not plain
    (dml.slice1, ((0, 0, 0, 0), (2, 3, 4, 6), (1, 1, 1, -2), None)),      # tuples: plain too
    (dml.slice1, ([0, 0, 0, True], [2, 3, 4, 6], [1, 1, 1, 1], None)),    # a bool
    (dml.slice1, ([0, 0, 0, np.int64(0)], [2, 3, 4, 6], [1, 1, 1, 1], None)),
    (dml.slice1, ([0, 0, 0, 2**70], [2, 3, 4, 6], [1, 1, 1, 1], None)),
    (dml.slice, ([0, 0, 0, 0], [2, 3, 4, 7], [1, 1, 1, 1])),
    (dml.slice, ([0, 0, 0, 0], [2, 3, 4, 3], [1, 1, 1, 2])),
    (dml.slice_grad, ([2, 3, 4, 6], [0, 0, 0, 0], [2, 3, 4, 6], [1, 1, 1, 1])),
    (dml.slice_grad, ([2, 3, 4, 5], [0, 0, 0, 0], [2, 3, 4, 6], [1, 1, 1, 1])),
    (dml.slice_grad, ([2, 3, 4, 12], [0, 0, 0, 0], [2, 3, 4, 12], [1, 1, 1, -2])),
])
def test_declined_arguments_get_the_python_routes_answer(bad):
    fn, args = bad
    x = np.arange(2 * 3 * 4 * 6, dtype=np.float32).reshape(2, 3, 4, 6)
    want = plain_off(fn, x, *args)
    template = {dml.slice1: _slice1, dml.slice: _slice, dml.slice_grad: _slice_grad}[fn]
    y = np.ones((1, 2, 3, 4), np.float32)
    outcome(fn, y, *template(y)[1])                           # a template of the operator, dtype and rank
    same_result(outcome(fn, x, *args), want)


def test_a_list_changed_later_does_not_change_the_record():
    x = np.ones((1, 2, 3, 4), np.float32)
    dml.slice1(x, [0, 0, 0, 0], [1, 2, 3, 4], [1, 1, 1, -1])
    y = np.arange(2 * 2 * 3 * 5, dtype=np.float32).reshape(2, 2, 3, 5)
    steps = [1, 1, 1, -1]
    planned = _planned()
    a = dml.slice1(y, [0, 0, 0, 0], [2, 2, 3, 5], steps)
    assert _planned() == planned + 1
    steps[3] = 1                                              # the record is keyed by the values it ran
    b = dml.slice1(y, [0, 0, 0, 0], [2, 2, 3, 5], steps)
    assert np.array_equal(a, y[..., ::-1]) and np.array_equal(b, y)


def test_the_cache_off_serves_nothing():
    x = np.ones((1, 2, 3, 4), np.float32)
    dml.slice1(x, [0, 0, 0, 0], [1, 2, 3, 4], [1, 1, 1, -1])
    planned = _planned()
    with dml.configure(call_cache=False):
        y = np.arange(30, dtype=np.float32).reshape(1, 2, 3, 5)
        assert np.array_equal(dml.slice1(y, [0, 0, 0, 0], [1, 2, 3, 5], [1, 1, 1, -1]), y[..., ::-1])
    assert _planned() == planned


def test_repeats_are_served_across_the_cache_emptying_when_full():
    """The cache empties itself at 4096 entries (calls.c's MAX_ENTRIES); a miss of a key never stored skips
    the dict (its filter of stored keys, emptied with it): every key stored before or after that emptying
    is found again."""
    calls.clear()
    xs = [np.zeros((1, 1 + i % 7, 2 + i // 7), np.float32) for i in range(4200)]
    for x in xs:
        dml.pad(x, (0, 1, 0), (0, 0, 1))
    assert 0 < calls.info()["entries"] < 4096
    hits = calls.info()["hits"]
    for x in xs[-50:]:
        dml.pad(x, (0, 1, 0), (0, 0, 1))
    assert calls.info()["hits"] == hits + 50
