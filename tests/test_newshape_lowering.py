"""Issue 19 (new shapes): the compiled fast path of SLICE1's, SLICE's and
SLICE_GRAD's ``plain_lowering`` (newshape.c's ``slice1_lowering``,
``slice_lowering`` and ``slice_grad_lowering``,
which the C new-shape route runs, newshape_move.c's odml_move_plain) against
the Python functions, which stay the reference.

* Random valid and invalid arguments (plain ints and edge values, ints
  beyond 64 bits, bools, NumPy integers, int subclasses, floats, strings,
  lists, tuples, arrays, wrong lengths, output sizes given): wherever the C
  function answers, its answer is the Python one (same values, same tuple
  and list types, plain ints); it declines (None) everything else, never
  raises, and answers every call whose fields are lists or tuples of ints in
  64 bits, one per dimension, where Python answers.
* The array API on NumPy arrays with the C new-shape route (the compiled
  lowering) and without it (the plan route):
  the same bytes, dtype and shape, or the same error (type and message), and
  the same call-cache record.
* A list changed while the call runs (by a finalizer that the C function's
  allocations may run, or by another thread) cannot make the answer mix two
  of its states.
"""
import gc
import sys
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import opendml as dml
from opendml.arrays import front
from opendml.model import TensorDesc
from opendml.ops import slice as slice_op
from opendml.ops import slice1 as slice1_op
from opendml.ops import slice_grad as slice_grad_op
from opendml.runtime import calls, get_backend
from tests.conftest import native_available
from tests.test_newshape_fastpaths import outcome, slice1_args, slice_args
from tests.test_newshape_plain import laid_out, recorded, same_result
from .conftest import n_examples

pytestmark = pytest.mark.skipif(not native_available(), reason="the compiled CPU kernels are not built")

SETTINGS = settings(max_examples=n_examples(200), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

I32, U32, I64 = 2**31 - 1, 2**32 - 1, 2**63 - 1


class SubInt(int):
    """An int subclass: not a plain int to either function."""


EDGES = [0, 1, 2, 3, -1, -2, I32, I32 + 1, -I32, -I32 - 1, -I32 - 2, U32, U32 + 1, I64, I64 + 1, -I64, -I64 - 1,
         -I64 - 2, 2**64, 2**64 + 5, -(2**64), 2**100, -(2**100)]
ODD = [True, False, np.int64(2), np.int32(1), np.uint8(3), np.bool_(True), SubInt(1), 1.0, 2.5, None, "3", b"1",
       [1], (2,)]


def _native():
    return get_backend("cpu")._native


@pytest.fixture(autouse=True)
def _compiled_kernels():
    with dml.configure(cpu_kernels="compiled", call_cache=True):
        yield


def value(near=None):
    """A field's entry: mostly small ints (near the input's sizes), sometimes
    edges and ints beyond 64 bits, sometimes no plain int at all."""
    small = st.integers(-3, 12) if near is None else st.integers(-2, near + 2)
    return st.one_of(small, small, small, small, st.sampled_from(EDGES), st.sampled_from(ODD))


@st.composite
def field(draw, n, near=None, valid=None):
    """Mostly a list or tuple of ``n`` entries, else another length, another
    kind of sequence or no sequence."""
    if valid is not None and draw(st.integers(0, 2)):
        entries = list(valid)
    else:
        m = n if draw(st.integers(0, 5)) else draw(st.integers(0, 10))
        entries = [draw(value(near)) for _ in range(m)]
    kind = draw(st.sampled_from(["list", "list", "tuple", "tuple", "array", "range", "other"]))
    if kind == "tuple":
        return tuple(entries)
    if kind == "array":
        a = np.empty(len(entries), dtype=object)
        a[:] = [None] * len(entries)
        for i, e in enumerate(entries):
            a[i] = e
        return a
    if kind == "range":
        return range(len(entries))
    if kind == "other":
        return draw(st.sampled_from([None, 3, "abc", {0: 1}, (e for e in ()), SubList(entries),
                                     SubTuple(entries)]))
    return entries


class SubList(list):
    """A list subclass: not a list to either function."""


class SubTuple(tuple):
    """A tuple subclass: not a tuple to either function."""


@st.composite
def in_sizes(draw):
    """A NumPy shape as the C route reads it (a tuple of 1 to 8 positive
    ints), or sometimes something else."""
    n = draw(st.integers(1, 8))
    sizes = tuple(draw(st.integers(1, 9)) for _ in range(n))
    kind = draw(st.integers(0, 12))
    if kind == 0:
        return draw(st.sampled_from([(), (1,) * 9, (2,) * 12]))
    if kind == 1:
        return list(sizes)
    if kind == 2:
        return tuple(draw(st.sampled_from([0, -1, I64, I64 + 1, True, np.int64(3), SubInt(4), 2.0])) if i == 0
                     else s for i, s in enumerate(sizes))
    return sizes


def plain_fields(shape, *fields) -> bool:
    """Whether the C function must answer where Python does: an exact tuple
    of 1 to 8 ints in 64 bits, fields that are exact lists or tuples of one
    int in 64 bits per dimension."""
    def ints(f):
        return type(f) in (list, tuple) and len(f) == len(shape) and all(type(v) is int and -I64 - 1 <= v <= I64
                                                                          for v in f)
    return type(shape) is tuple and 1 <= len(shape) <= 8 and ints(shape) and all(ints(f) for f in fields)


def typed(got):
    """``got`` with the type of every container and entry, so that a list
    cannot pass for a tuple nor a bool for an int."""
    if isinstance(got, (list, tuple)):
        return (type(got), tuple(typed(v) for v in got))
    return (type(got), got)


def compare(native_fn, python_fn, must_answer, *args):
    """The C function's answer is Python's wherever it gives one; it never raises."""
    want = outcome(python_fn, *args)
    got = native_fn(*args)                       # must not raise, whatever the arguments
    if got is None:
        assert not (must_answer and want[0] == "ok" and want[1] is not None), (args, want)
        return want
    assert want[0] == "ok" and typed(got) == typed(want[1]), (args, got, want)
    return want


# -- the C functions against the Python ones ----------------------------------------------------------------

@SETTINGS
@given(st.data())
def test_slice1_lowering_equals_python(data):
    shape = data.draw(in_sizes())
    n = len(shape)
    window = [data.draw(st.integers(1, d)) if type(d) is int and 1 <= d <= 9 else 1 for d in shape]
    o = data.draw(field(n, 9, valid=[0] * n))
    s = data.draw(field(n, 9, valid=window))
    t = data.draw(field(n, 4, valid=[data.draw(st.sampled_from([1, 2, -1, -3, I32, -I32 - 1])) for _ in shape]))
    extra = data.draw(st.sampled_from([(), (None,), (None,), ([1] * n,), (tuple(window),), ("x",)]))
    compare(_native().slice1_lowering, slice1_op.plain_lowering,
            (extra in ((), (None,)) or type(extra[0]) in (list, tuple)) and plain_fields(shape, o, s, t),
            shape, o, s, t, *extra)


@SETTINGS
@given(st.data())
def test_slice_lowering_equals_python(data):
    shape = data.draw(in_sizes())
    n = len(shape)
    o = data.draw(field(n, 9, valid=[0] * n))
    s = data.draw(field(n, 9, valid=[1] * n))
    t = data.draw(field(n, 4, valid=[data.draw(st.sampled_from([1, 2, 3, U32, U32 + 1])) for _ in shape]))
    compare(_native().slice_lowering, slice_op.plain_lowering, plain_fields(shape, o, s, t), shape, o, s, t)


@SETTINGS
@given(st.data())
def test_slice_grad_lowering_equals_python(data):
    shape = data.draw(in_sizes())
    n = len(shape)
    dims = data.draw(field(n, 9, valid=[data.draw(st.integers(1, 9)) for _ in range(n)]))
    o = data.draw(field(n, 9, valid=[0] * n))
    s = data.draw(field(n, 9, valid=list(dims) if type(dims) in (list, tuple) and len(dims) == n else [1] * n))
    t = data.draw(field(n, 4, valid=[data.draw(st.sampled_from([1, 2, -1, -3, I32, -I32 - 1])) for _ in range(n)]))
    compare(_native().slice_grad_lowering, slice_grad_op.plain_lowering, plain_fields(shape, dims, o, s, t),
            shape, dims, o, s, t)


@SETTINGS
@given(slice1_args(grad=True))
def test_slice_grad_lowering_on_the_description_strategies(args):
    out, inp, o, s, t = args
    if isinstance(inp, TensorDesc) and isinstance(out, TensorDesc):
        # SLICE_GRAD's input gradient is slice1's output (``out``), its output gradient slice1's input
        compare(_native().slice_grad_lowering, slice_grad_op.plain_lowering,
                plain_fields(out.sizes, list(inp.sizes), o, s, t), out.sizes, list(inp.sizes), o, s, t)


def test_slice_grad_lowering_edges():
    g = _native().slice_grad_lowering
    # (output sizes, first, step, reversed): a tuple (the given one, or a list's values) and three lists
    got = g((2, 3, 2), [2, 3, 4], [0, 0, 0], [2, 3, 4], [1, 1, -2])
    assert typed(got) == typed(((2, 3, 4), [0, 0, 1], [1, 1, 2], [0, 0, 1]))
    assert typed(got) == typed(slice_grad_op.plain_lowering((2, 3, 2), [2, 3, 4], [0, 0, 0], [2, 3, 4], [1, 1, -2]))
    sizes = (2, 3, 4)
    assert g((2, 3, 2), sizes, (0, 0, 1), (2, 3, 3), (1, 1, 2))[0] is sizes
    assert g((2, 3, 3), [2, 3, 4], [0, 0, 0], [2, 3, 4], [1, 1, 2]) is None       # more taken than reachable
    assert g((2, 3, 2), [2, 3, 4], [0, 0, 1], [2, 3, 4], [1, 1, 2]) is None       # the window leaves the output
    assert g((2, 3, 2), [2, 3, 4], [0, 0, 0], [2, 3, 4], [1, 1, 0]) is None       # a zero stride
    assert g((1,), [2**32], [0], [1], [1]) is None                                # more than MAX_ELEMENTS
    assert g((1,), [1], [0], [1], [I32 + 1]) is None                              # a stride beyond INT32
    with pytest.raises(TypeError):
        g((1,), [1], [0], [1])


@SETTINGS
@given(slice1_args())
def test_slice1_lowering_on_the_description_strategies(args):
    inp, out, o, s, t = args
    if not isinstance(inp, TensorDesc):
        return
    compare(_native().slice1_lowering, slice1_op.plain_lowering, plain_fields(inp.sizes, o, s, t), inp.sizes, o, s,
            t, None)
    out_sizes = list(out.sizes) if isinstance(out, TensorDesc) else None
    compare(_native().slice1_lowering, slice1_op.plain_lowering, plain_fields(inp.sizes, o, s, t),
            inp.sizes, o, s, t, out_sizes)


@SETTINGS
@given(slice_args())
def test_slice_lowering_on_the_description_strategies(args):
    inp, _, o, s, t = args
    if isinstance(inp, TensorDesc):
        compare(_native().slice_lowering, slice_op.plain_lowering, plain_fields(inp.sizes, o, s, t), inp.sizes, o, s,
                t)


def test_lowering_edges():
    n1, n = _native().slice1_lowering, _native().slice_lowering
    shape = (2, 3, 4, 5)
    # the common case, and what each function returns: (tuple, list, tuple) and three tuples
    assert typed(n1(shape, [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, -1, 1])) == typed(
        ((2, 3, 4, 5), [0, 0, 3, 0], (1, 1, -1, 1)))
    assert typed(n1(shape, (0, 1, 1, 0), (2, 2, 3, 5), (1, 2, -2, I32))) == typed(
        ((2, 1, 2, 1), [0, 1, 3, 0], (1, 2, -2, I32)))
    assert n1(shape, [0] * 4, [2, 3, 4, 5], [1, 1, -I32 - 1, 1]) == ((2, 3, 1, 5), [0, 0, 3, 0], (1, 1, -I32 - 1, 1))
    assert typed(n(shape, [0, 1, 1, 0], [2, 2, 2, 3], [1, 1, 2, 2])) == typed(
        ((2, 2, 2, 3), (0, 1, 1, 0), (1, 1, 2, 2)))
    steps = (1, 1, -1, 1)
    assert n1(shape, [0] * 4, [2, 3, 4, 5], steps)[2] is steps     # a tuple field comes back as it is (Python's)
    declined = [
        (n1, (shape, [0] * 4, [2, 3, 4, 5], [1, 1, 0, 1])),          # a zero stride
        (n1, (shape, [0] * 4, [2, 3, 4, 5], [1, 1, I32 + 1, 1])),    # outside INT32
        (n1, (shape, [0] * 4, [2, 3, 4, 5], [1, 1, -I32 - 2, 1])),
        (n1, (shape, [0, 0, 1, 0], [2, 3, 4, 5], [1] * 4)),          # the window outside the input
        (n1, (shape, [0, 0, -1, 0], [2, 3, 4, 5], [1] * 4)),
        (n1, (shape, [0, 0, 0, 0], [2, 3, 0, 5], [1] * 4)),
        (n1, (shape, [0, 0, I64, 0], [2, 3, I64, 5], [1] * 4)),      # a sum beyond 64 bits
        (n1, (shape, [0, 0, 2**64, 0], [2, 3, 4, 5], [1] * 4)),
        (n1, (shape, [0, 0, 0, True], [2, 3, 4, 5], [1] * 4)),       # a bool
        (n1, (shape, [0, 0, 0, np.int64(0)], [2, 3, 4, 5], [1] * 4)),
        (n1, (shape, [0, 0, 0, SubInt(0)], [2, 3, 4, 5], [1] * 4)),
        (n1, (shape, [0, 0, 0], [2, 3, 4, 5], [1] * 4)),             # a wrong length
        (n1, (shape, [0] * 4, [2, 3, 4, 5], [1] * 4, [2, 3, 5, 5])),  # output sizes past the reachable ones
        (n1, (shape, [0] * 4, [2, 3, 4, 5], [1] * 4, [2, 3, 0, 5])),
        (n1, (shape, [0] * 4, [2, 3, 4, 5], [1] * 4, [2, 3, 4])),
        (n1, ((), [], [], [])),                                     # no dimension: Python answers
        ((n1, ((1,) * 9, [0] * 9, [1] * 9, [1] * 9))),               # more than 8: Python answers
        (n1, ((2, 3, 4, np.int64(5)), [0] * 4, [2, 3, 4, 5], [1] * 4)),
        (n1, ([2, 3, 4, 5], [0] * 4, [2, 3, 4, 5], [1] * 4)),
        (n, (shape, [0] * 4, [2, 3, 4, 5], [1, 1, 1, 0])),
        (n, (shape, [0] * 4, [2, 3, 4, 5], [1, 1, 1, U32 + 1])),
        (n, (shape, [0] * 4, [2, 3, 4, 2**62], [1, 1, 1, U32])),      # (s - 1) * t beyond 64 bits
        (n, (shape, [0, 0, 0, 1], [2, 3, 4, 5], [1] * 4)),
        (n, (shape, [0] * 4, [2, 3, 4, 5], np.ones(4, np.int64))),
    ]
    for fn, args in declined:
        assert fn(*args) is None, args
    python = {n1: slice1_op.plain_lowering, n: slice_op.plain_lowering}
    for given_sizes in ([2, 3, 4, 5], (2, 1, 4, 5)):               # output sizes given: a tuple, as Python's
        want = python[n1](shape, [0] * 4, [2, 3, 4, 5], [1] * 4, given_sizes)
        assert want is not None and typed(n1(shape, [0] * 4, [2, 3, 4, 5], [1] * 4, given_sizes)) == typed(want)
    assert python[n1]((1,) * 9, [0] * 9, [1] * 9, [1] * 9) is not None
    with pytest.raises(TypeError):
        n1(shape, [0] * 4, [2, 3, 4, 5])
    with pytest.raises(TypeError):
        n(shape, [0] * 4, [2, 3, 4, 5], [1] * 4, None)


# -- the array API with the C new-shape route (the compiled lowering) and without it -----------------------

def _python_lowering(monkeypatch):
    """The C new-shape route (whose lowering is the compiled one) refused: the plan route."""
    monkeypatch.setattr(front, "_move_new", lambda *a: None)


def _both(monkeypatch, fn, x, *args):
    """``fn(x, *args)`` (caches cleared) with the compiled lowering and with
    Python's: the outcome and the call-cache record of each."""
    got = recorded(fn, x, *args)
    with monkeypatch.context() as m:
        _python_lowering(m)
        want = recorded(fn, x, *args)
    calls.clear()
    return got, want


@SETTINGS
@given(st.data())
def test_slice1_array_api_with_and_without_the_compiled_lowering(monkeypatch, data):
    inp, out, o, s, t = data.draw(slice1_args())
    shape = inp.sizes if isinstance(inp, TensorDesc) else (2, 3)
    x = data.draw(laid_out(shape))
    out_sizes = list(out.sizes) if isinstance(out, TensorDesc) and data.draw(st.booleans()) else None
    (got, got_rec), (want, want_rec) = _both(monkeypatch, dml.slice1, x, o, s, t, out_sizes)
    same_result(got, want)
    assert got_rec == want_rec


@SETTINGS
@given(st.data())
def test_slice_array_api_with_and_without_the_compiled_lowering(monkeypatch, data):
    inp, _, o, s, t = data.draw(slice_args())
    x = data.draw(laid_out(inp.sizes if isinstance(inp, TensorDesc) else (3, 2)))
    (got, got_rec), (want, want_rec) = _both(monkeypatch, dml.slice, x, o, s, t)
    same_result(got, want)
    assert got_rec == want_rec


def test_array_api_errors_with_and_without_the_compiled_lowering(monkeypatch):
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    cases = [
        (dml.slice1, x, [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, -1, 1]),
        (dml.slice1, x[:, ::-1, :, ::2], (0, 1, 0, 0), (2, 2, 4, 3), (1, -1, 2, -2)),
        (dml.slice1, x, [0, 0, 1, 0], [2, 3, 4, 5], [1, 1, -1, 1]),
        (dml.slice1, x, [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, 0, 1]),
        (dml.slice1, x, [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, 2**31, 1]),
        (dml.slice1, x, [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, -(2**31) - 1, 1]),
        (dml.slice1, x, [0, 0, 0, 2**64], [2, 3, 4, 5], [1, 1, -1, 1]),
        (dml.slice1, x, [0, 0, 0, True], [2, 3, 4, 5], [1, 1, -1, 1]),
        (dml.slice1, x, [0, 0, 0, np.int64(0)], [2, 3, 4, 5], [1, 1, -1, 1]),
        (dml.slice1, x, [0, 0, 0], [2, 3, 4], [1, 1, 1]),
        (dml.slice1, x, [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, -1, 1], [2, 3, 4, 6]),
        (dml.slice1, x, [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, -1, 1], [2, 3, 2, 5]),
        (dml.slice1, x.astype(np.complex64), [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, -1, 1]),
        (dml.slice, x, [0, 0, 0, 0], [2, 3, 4, 3], [1, 1, 1, 2]),
        (dml.slice, x, [0, 0, 0, 1], [2, 3, 4, 3], [1, 1, 1, 2]),
        (dml.slice, x, [0, 0, 0, 0], [2, 3, 4, 3], [1, 1, 1, 0]),
        (dml.slice, x, [0, 0, 0, 0], [2, 3, 4, 1], [1, 1, 1, 2**32]),
        (dml.slice, x, (0, 0, 0, 0), (2, 3, 4, 3), (1, 1, 1, True)),
        (dml.slice, x, [0, 0, 0, 0], [2, 3, 4, 3], np.array([1, 1, 1, 2])),
    ]
    for fn, *args in cases:
        (got, got_rec), (want, want_rec) = _both(monkeypatch, fn, *args)
        same_result(got, want)
        assert got_rec == want_rec, args


# -- a list changed while the call runs -----------------------------------------------------------------------

class _Changes:
    """A finalizer that changes ``target`` in place when a collection finds it
    (in a reference cycle), noting whether that happened inside the call."""

    def __init__(self, target, index, value, state):
        self.target, self.index, self.value, self.state = target, index, value, state
        self.cycle = self

    def __del__(self):
        self.target[self.index] = self.value
        self.state["during"] += self.state["inside"]


def _collected_during(fn, *args, changes):
    """``fn(*args)`` with a collection due at its first allocation of a
    container: the finalizers ``changes`` makes (each a (list, index, value))
    then change the lists. Tuple and list free lists are emptied first, so
    that the allocation reaches the collector. (answer, whether a finalizer
    ran inside the call)."""
    state = {"inside": False, "during": 0}
    threshold = gc.get_threshold()
    gc.collect()
    gc.disable()
    try:
        for target, index, v in changes:
            for _ in range(5):
                _Changes(target, index, v, state)
        keep = [tuple(range(k)) for k in (3, 4) for _ in range(2100)] + [[0] * 4 for _ in range(100)]
        gc.set_threshold(1, 1, 1)
        gc.enable()
        state["inside"] = True
        got = fn(*args)
        state["inside"] = False
        gc.collect()
        del keep
    finally:
        gc.set_threshold(*threshold)
        gc.enable()
    return got, state["during"] > 0


def test_a_list_changed_by_a_finalizer_during_the_c_call():
    """The C function reads every value before it allocates: a collection
    that its allocations start, whose finalizers change the fields, cannot
    change its answer (Python's for the fields as they were at the call)."""
    n1, n = _native().slice1_lowering, _native().slice_lowering
    shape, zeros = (2, 3, 40, 5), [0] * 4
    steps, sizes = [1, 1, -1, 1], [2, 3, 40, 5]
    want = slice1_op.plain_lowering(shape, zeros, sizes, steps)
    got, during = _collected_during(n1, shape, zeros, sizes, steps, changes=[(steps, 2, 7), (sizes, 2, 1)])
    assert got == want and steps[2] == 7 and sizes[2] == 1
    strides, sizes = [1, 1, 1, 1], [2, 3, 40, 5]
    want = slice_op.plain_lowering(shape, zeros, sizes, strides)
    got2, during2 = _collected_during(n, shape, zeros, sizes, strides, changes=[(strides, 2, 3), (sizes, 2, 2**40)])
    assert got2 == want and strides[2] == 3
    if sys.version_info < (3, 12):       # a collection runs at an allocation (later versions wait for the eval loop)
        assert during and during2


def test_a_list_changed_by_another_thread_during_calls():
    """Another thread walks a field from one valid value to another, an entry
    at a time, and back, while calls run: every result is the one of a value
    the field held, never a mix (the array API snapshots the field before
    planning; the C function reads it in one pass)."""
    x = np.arange(2 * 3 * 8 * 5, dtype=np.float32).reshape(2, 3, 8, 5)
    sizes, zeros = [2, 3, 8, 5], [0] * 4
    a, b = [1, 1, -1, 1], [1, -1, 2, -2]
    held = [a, [1, -1, -1, 1], [1, -1, 2, 1], b, [1, 1, 2, -2], [1, 1, -1, -2]]
    wants = {dml.slice1(x, zeros, sizes, list(v)).tobytes() for v in held}
    lowered = [slice1_op.plain_lowering(x.shape, zeros, sizes, list(v)) for v in held]
    assert len(wants) == len(held)
    steps = list(a)
    stop = threading.Event()

    def walk():
        while not stop.is_set():
            for i in range(4):
                steps[i] = b[i]
            for i in range(4):
                steps[i] = a[i]
    t = threading.Thread(target=walk)
    t.start()
    try:
        for _ in range(3000):
            calls.clear()
            assert dml.slice1(x, zeros, sizes, steps).tobytes() in wants
            assert _native().slice1_lowering(x.shape, zeros, sizes, steps) in lowered
            assert dml.slice(x, zeros, sizes, [1, 1, 1, 1]).shape == x.shape
    finally:
        stop.set()
        t.join()


def test_element_types_still_decide(monkeypatch):
    """The lowering answers on fields only: a dtype DirectML lacks still
    takes the descriptions, which raise."""
    for dtype in (np.bool_, np.complex64):
        x = np.zeros((2, 3), dtype)
        (got, _), (want, _) = _both(monkeypatch, dml.slice1, x, [0, 0], [2, 3], [1, -1])
        assert got[0] == "error" and got == want
