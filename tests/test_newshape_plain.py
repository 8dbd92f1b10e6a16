"""Issue 19 (new shapes): the description-free route of SLICE, SLICE1 and
UNFOLD on NumPy arrays (the operators' ``plain_lowering``, in C, -> the move
program's tuned pass, run by ``calls.move_new`` in
runtime/native/calls_move_new.c) against the route through descriptions and
plans.

* ``plain_lowering``: wherever it answers, the description is valid and its
  ``lower()`` is the plan it describes (random valid and invalid arguments);
  where the description's fast path takes the arguments, it answers too.
* ``copy_params`` (C) gives the bytes of ``CopyParams`` of the canonical form.
* The array API with the plain route and without it (``front._new``
  refused): the same bytes, dtype and shape, or the same error (type and
  message), over layouts, dtypes, valid and invalid arguments; the call-cache
  record of the plain route serves the next call with the same bytes; after
  ``opendml.configure()`` changes (threads, grain, NumPy kernels, call cache
  off); from several threads at once.
"""
import math
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import opendml as dml
from opendml.arrays import front, planner
from opendml.model import DataType, TensorDesc
from opendml.model.tensor_desc import MAX_ELEMENTS, MAX_RANK
from opendml.ops import Slice1OperatorDesc, SliceGradOperatorDesc, SliceOperatorDesc, UnfoldOperatorDesc
from opendml.ops import slice as slice_op
from opendml.ops import slice1 as slice1_op
from opendml.ops import slice_grad as slice_grad_op
from opendml.ops import unfold as unfold_op
from opendml.plan import CopyPlan
from opendml.runtime import calls, get_backend
from opendml.runtime.params import copy_params
from tests import reference as ref
from tests.conftest import native_available
from tests.test_newshape_fastpaths import int_field, modest_unfold, outcome, per_axis, slice1_args, slice_args, window_args
from .conftest import n_examples

pytestmark = pytest.mark.skipif(not native_available(), reason="the compiled CPU kernels are not built")

SETTINGS = settings(max_examples=n_examples(120), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(autouse=True)
def _compiled_kernels():
    with dml.configure(cpu_kernels="compiled", call_cache=True):
        yield


def _native():
    return get_backend("cpu")._native


# -- plain_lowering against the descriptions ---------------------------------------------------------------

def _index_plan(plan_in_offset, plan_in_strides, ts, origin):
    """(starts, steps) read back from a lowered plan with element strides ts
    (all non-zero) and origin."""
    return plan_in_offset - origin, tuple(s // t for s, t in zip(plan_in_strides, ts))


@SETTINGS
@given(st.data())
def test_slice1_plain_lowering_is_the_descriptions_plan(data):
    inp, out, o, s, t = data.draw(slice1_args())
    if not isinstance(inp, TensorDesc) or inp.strides is not None or inp.flags:
        return
    out_sizes = None
    if isinstance(out, TensorDesc):
        out_sizes = data.draw(st.one_of(st.just(list(out.sizes)), st.just(tuple(out.sizes)),
                                        int_field(len(inp.sizes), -1, 6)))
    desc = outcome(lambda: Slice1OperatorDesc(inp, None if out_sizes is None else TensorDesc(inp.data_type,
                                                                                             out_sizes), o, s, t))
    got = slice1_op.plain_lowering(inp.sizes, o, s, t, out_sizes)
    if got is None:
        # declined: only where the description's fast path declines too
        plain = (type(out_sizes) in (list, tuple, type(None))
                 and all(type(v) is int for v in (out_sizes or ()))
                 and all(type(f) in (list, tuple) and len(f) == len(inp.sizes) for f in (o, s, t)))
        if plain and all(type(v) is int for f in (o, s, t) for v in f):
            assert desc[0] != "ok", f"declined a plain valid call: {inp.sizes} {o} {s} {t} {out_sizes}"
        return
    assert desc[0] == "ok", desc                  # answered: the description is valid
    d = desc[1]
    sizes, starts, steps = got
    assert sizes == d.output_tensor.sizes and type(sizes) is tuple
    ts = tuple(range(2, 2 + len(inp.sizes)))[::-1]
    ts = tuple(v * (-1) ** i for i, v in enumerate(ts))
    plan = d.lower(in_strides=ts, in_offset=7).kernel_plan()
    assert plan.sizes == sizes and plan.out_strides == dml.packed_strides(sizes) and plan.out_offset == 0
    assert plan.in_offset == 7 + sum(c * v for c, v in zip(starts, ts))
    assert plan.in_strides == tuple(w * v for w, v in zip(steps, ts))


@SETTINGS
@given(slice_args())
def test_slice_plain_lowering_is_the_descriptions_plan(args):
    inp, out, o, s, t = args
    if not isinstance(inp, TensorDesc) or inp.strides is not None or inp.flags:
        return
    desc = outcome(SliceOperatorDesc, inp, None, o, s, t)
    got = slice_op.plain_lowering(inp.sizes, o, s, t)
    if got is None:
        if desc[0] == "ok" and all(type(f) in (list, tuple) and all(type(v) is int for v in f) for f in (o, s, t)):
            pytest.fail(f"declined a plain valid call: {inp.sizes} {o} {s} {t}")
        return
    assert desc[0] == "ok", desc
    d = desc[1]
    sizes, starts, steps = got
    ts = tuple(3 + i for i in range(len(inp.sizes)))
    plan = d.lower(in_strides=ts, in_offset=5).kernel_plan()
    assert sizes == d.output_tensor.sizes == plan.sizes and type(sizes) is tuple
    assert plan.in_offset == 5 + sum(c * v for c, v in zip(starts, ts))
    assert plan.in_strides == tuple(w * v for w, v in zip(steps, ts))


@st.composite
def unfold_fields(draw, d):
    """UNFOLD's five fields as the array API takes them: an int for every
    axis, a sequence, or something odd."""
    _, _, *fields = draw(window_args())
    out = []
    for f in fields:
        if draw(st.integers(0, 3)) == 0:
            f = draw(st.one_of(st.integers(-1, 4), st.sampled_from([True, 2.0, np.int64(2), None, 2**32])))
        elif type(f) in (list, tuple) and len(f) != d and draw(st.booleans()):
            f = (list(f) * d)[:d] if f else f
        out.append(f)
    return out


@SETTINGS
@given(st.data())
def test_unfold_plain_lowering_is_the_descriptions_plan(data):
    image, _, *_ = data.draw(window_args())
    if not isinstance(image, TensorDesc) or image.strides is not None or image.flags:
        return
    d = len(image.sizes) - 2
    fields = data.draw(unfold_fields(d))
    spread = [per_axis(f, d) if type(f) is int else f for f in fields]
    desc = outcome(UnfoldOperatorDesc, image, None, *spread)
    got = unfold_op.plain_lowering(image.sizes, *fields)
    if got is None:
        plain = all(type(f) is int or (type(f) in (list, tuple) and all(type(v) is int for v in f)) for f in fields)
        if plain:
            assert desc[0] != "ok", f"declined a plain valid call: {image.sizes} {fields}"
        return
    assert desc[0] == "ok", desc
    plan = desc[1].lower(in_strides=tuple(range(len(image.sizes), 0, -1)), in_offset=3).kernel_plan()
    out, window, strides, dilations, start, blocks = got
    assert out == desc[1].output_tensor.sizes
    assert (window, strides, dilations, start, blocks) == (plan.window, plan.strides, plan.dilations,
                                                            plan.start_padding, plan.blocks)


@SETTINGS
@given(st.data())
def test_slice_grad_plain_lowering_is_the_descriptions_plan(data):
    grad, out, o, s, t = data.draw(slice1_args(grad=True))      # the input gradient first
    if not isinstance(grad, TensorDesc) or grad.strides is not None or grad.flags:
        return
    sizes = list(out.sizes) if isinstance(out, TensorDesc) else [2] * len(grad.sizes)
    sizes = data.draw(st.one_of(st.just(sizes), st.just(tuple(sizes)), int_field(len(grad.sizes), -1, 6),
                                st.just([2**16, 2**16, 2][:len(grad.sizes)])))
    desc = outcome(lambda: SliceGradOperatorDesc(grad, TensorDesc(grad.data_type, sizes), o, s, t))
    got = slice_grad_op.plain_lowering(grad.sizes, sizes, o, s, t)
    if got is None:
        plain = all(type(f) in (list, tuple) and all(type(v) is int for v in f) for f in (sizes, o, s, t))
        if plain:
            assert desc[0] != "ok", f"declined a plain valid call: {grad.sizes} {sizes} {o} {s} {t}"
        return
    assert desc[0] == "ok", desc
    ts = tuple(3 + i for i in range(len(grad.sizes)))
    plan = desc[1].lower(in_strides=ts, in_offset=4).kernel_plan()
    dims, first, step, back = got
    assert dims == plan.sizes and tuple(first) == plan.first and tuple(step) == plan.step
    assert plan.in_strides == tuple(-v if b else v for v, b in zip(ts, back))
    assert plan.in_offset == 4 + sum((g - 1) * v for g, v, b in zip(grad.sizes, ts, back) if b)


def test_plain_lowering_takes_plain_valid_calls_and_declines_invalid_ones():
    """Can fail: a plain_lowering that always declined would pass the properties above."""
    assert slice1_op.plain_lowering((1, 3, 5, 7), [0, 0, 0, 0], [1, 3, 5, 7], [1, 1, -1, 1]) == \
        ((1, 3, 5, 7), [0, 0, 4, 0], (1, 1, -1, 1))
    assert slice1_op.plain_lowering((6,), (1,), (4,), (-3,), [2]) == ((2,), [4], (-3,))
    assert slice_op.plain_lowering((5, 9), [1, 0], [2, 5], [2, 2]) == ((2, 5), (1, 0), (2, 2))
    for bad in (([0], [4], [0]), ([1], [6], [1]), ([0], [6], [2**31]), ([0], [6], [True]), ([0], [6], [1.0]),
                ([-1], [3], [1]), ([0], [0], [1]), (np.array([0]), [6], [1])):
        assert slice1_op.plain_lowering((6,), *bad) is None, bad
    assert slice1_op.plain_lowering((6,), [0], [6], [2], [4]) is None          # more than reachable
    assert slice1_op.plain_lowering((6,), [0], [6], [2], [0]) is None
    assert slice_op.plain_lowering((5,), [1], [3], [2]) is None                # 1 + 2 * 2 = 5 is outside
    assert unfold_op.plain_lowering((1, 2, 5, 6), 3, 1, 1, 1, 1) == ((1, 18, 30), (3, 3), (1, 1), (1, 1), (1, 1),
                                                                      (5, 6))
    assert unfold_op.plain_lowering((1, 2, 5), [2], [2], 1, 0, [1]) == ((1, 4, 3), (2,), (2,), (1,), (0,), (3,))
    for bad in ((0,), (3, 0), (3, 1, 0), (3, 1, 1, -1), (7,), ([3],), (True,), (np.int64(3),), (3, 1, 1, 1, [1])):
        assert unfold_op.plain_lowering((1, 2, 5, 6), *bad) is None, bad
    assert unfold_op.plain_lowering((2, 3), 1) is None                          # no spatial axis
    assert slice_grad_op.plain_lowering((2, 3), [2, 6], [0, 1], [2, 5], [1, -2]) == ((2, 6), [0, 1], [1, 2], [0, 1])
    for bad in (([2, 5], [0, 1], [2, 4], [1, 0]), ([2, 5], [0, 2], [2, 4], [1, 1]), ([2], [0], [2], [1]),
                ([2, 0], [0, 0], [2, 1], [1, 1]), ([2, 2**32], [0, 0], [2, 4], [1, 1]),
                ([2, 5], [0, 0], [2, 4], [1, 2])):
        assert slice_grad_op.plain_lowering((2, 3), *bad) is None, bad


def plain_count(rank: int, count: int) -> bool:
    """Whether ``TensorDesc(t, sizes)`` (packed, an element type ``t``, the
    other fields at their defaults) is valid, for ``sizes`` non-negative
    plain ints (a NumPy shape) given by their number ``rank`` and product
    ``count``: 1 to 8 sizes, each at least 1 (a count of at least 1 says so),
    at most ``MAX_ELEMENTS`` elements (so each at most ``UINT32_MAX``): what a
    plain lowering's caller checks first."""
    return 0 < rank <= MAX_RANK and 0 < count <= MAX_ELEMENTS


@SETTINGS
@given(st.lists(st.one_of(st.integers(0, 4), st.sampled_from([2**16, 2**31, 2**32 - 1, 2**32, 2**40])),
                min_size=0, max_size=10))
def test_plain_count_is_what_tensor_desc_accepts(sizes):
    ok = outcome(TensorDesc, DataType.FLOAT32, tuple(sizes))[0] == "ok"
    assert plain_count(len(sizes), math.prod(sizes)) == ok


# -- copy_params (C) against CopyParams --------------------------------------------------------------------

@SETTINGS
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(-40, 40), st.integers(-3, 60)), min_size=0, max_size=8),
       st.integers(0, 90), st.integers(0, 9), st.sampled_from([1, 2, 4, 8]))
def test_copy_params_equals_the_python_packing(dims, in_offset, out_offset, es):
    sizes, ins, outs = (tuple(v) for v in zip(*dims)) if dims else ((), (), ())
    for o in (outs, dml.packed_strides(sizes) if sizes else ()):
        plan = CopyPlan(es, sizes, in_offset, ins, out_offset, o)
        assert _native().copy_params(es, sizes, in_offset, ins, out_offset, o) == bytes(copy_params(plan.canonical()))


def test_copy_params_declines_what_is_not_plain():
    cp = _native().copy_params
    assert cp(4, [2], 0, (1,), 0, (1,)) is None                # not tuples
    assert cp(4, (2, 3), 0, (1,), 0, (1, 2)) is None           # lengths differ
    assert cp(4, (2,) * 9, 0, (1,) * 9, 0, (1,) * 9) is None   # more than 8 dimensions
    assert cp(4, (2,), 2**63, (1,), 0, (1,)) is None           # outside 64 bits
    assert cp(4, (2,), 0, (True,), 0, (1,)) is None            # not an int
    assert cp(4, (2, 2), 0, (-(2**63), 1), 0, (1, 2)) is None  # |stride| outside 64 bits
    assert cp(4, (3,), 0, (-2,), 0, (1,)) == bytes(copy_params(CopyPlan(4, (3,), 0, (-2,), 0, (1,)).canonical()))


# -- the array API with and without the plain route --------------------------------------------------------

DTYPES = [np.float32, np.float16, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
          np.uint64]


@st.composite
def laid_out(draw, shape):
    """An array of ``shape`` and a random dtype, in one of several layouts
    (packed, a reversed axis, transposed, strided, read-only, Fortran, a
    size-1 axis with an odd byte stride, not a whole number of elements)."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES + [np.float32] * 4)))
    base = (np.arange(math.prod(shape)) % 251 + 1).astype(dtype).reshape(shape)
    kind = draw(st.sampled_from(["packed", "packed", "reversed", "transposed", "strided", "readonly", "fortran",
                                 "odd1", "bytes"]))
    if kind == "reversed":
        axis = draw(st.integers(0, len(shape) - 1))
        return np.flip(np.flip(base, axis).copy(), axis)
    if kind == "transposed":
        return np.ascontiguousarray(base.T).T
    if kind == "strided":
        big = np.zeros(tuple(2 * s for s in shape), dtype=dtype)
        view = big[tuple(slice(None, None, 2) for _ in shape)]
        view[...] = base
        return view
    if kind == "readonly":
        base.flags.writeable = False
    if kind == "fortran":
        return np.asfortranarray(base)
    if kind in ("odd1", "bytes") and dtype.itemsize > 1:
        # a size-1 axis (odd1) or the last axis (bytes) whose byte stride is
        # not a whole number of elements: the first is read as a stride of 0,
        # the second makes the route copy the array first
        item = dtype.itemsize
        strides, step = [], item + 1 if kind == "bytes" else item
        for n in reversed(shape):
            strides.insert(0, step)
            step *= n
        if kind == "odd1":
            if 1 not in shape:
                return base
            strides[shape.index(1)] = item + 1
        raw = np.zeros(step + 2 * item + 8, np.uint8)
        out = np.ndarray(shape, dtype=dtype, buffer=raw, offset=1, strides=tuple(strides))
        out[...] = base
        return out
    return base


def _norm(v):
    """A comparable form of a record's value (arrays by type, dtype, shape,
    strides and bytes; containers by type and items)."""
    if isinstance(v, np.ndarray):
        return ("array", type(v), v.dtype.str, v.shape, v.strides, v.tobytes())
    if isinstance(v, (list, tuple)):
        return (type(v), tuple(_norm(e) for e in v))
    return (type(v), v)


def recorded(fn, *args):
    """``outcome(fn, *args)`` and the call-cache entry it left for the call
    (``calls.entry``: kernel, parameter bytes, threads, origin, output shape
    and dtype), its dtype by type and str."""
    calls.clear()
    got = outcome(fn, *args)
    e = calls.entry(fn.__name__, *args)
    if e is not None:
        e = dict(e, dtype=None if e["dtype"] is None else (type(e["dtype"]), e["dtype"].str))
    return got, e


def plain_off(fn, *args, with_records=False):
    """``fn(*args)`` through descriptions and plans: the plain route refused
    and every cache cleared (so nothing recorded by the plain route serves
    it)."""
    original = front._new
    front._new = lambda *a: None
    try:
        calls.clear()
        planner.clear()
        got = recorded(fn, *args)
        return got if with_records else got[0]
    finally:
        front._new = original
        calls.clear()


def same_result(a, b):
    if a[0] == "ok" and b[0] == "ok":
        assert a[1].dtype == b[1].dtype and a[1].shape == b[1].shape and type(a[1]) is type(b[1])
        assert a[1].flags.c_contiguous and a[1].flags.writeable
        assert a[1].tobytes() == b[1].tobytes()
    else:
        assert a == b


def check(fn, x, *args):
    """The plain route (caches cleared), then the call-cache's replay of its
    record, equal the route through descriptions, and the plain route
    records what that route records (kernel parameters, threads, origin)."""
    want, want_records = plain_off(fn, x, *args, with_records=True)
    calls.clear()
    got, got_records = recorded(fn, x, *args)
    same_result(got, want)
    assert got_records == want_records
    again = outcome(fn, x, *args)                 # served by what the plain route recorded, where it did
    same_result(again, want)
    return got


@SETTINGS
@given(st.data())
def test_slice1_plain_route_equals_the_plan_route(data):
    inp, out, o, s, t = data.draw(slice1_args())
    shape = inp.sizes if isinstance(inp, TensorDesc) else (2, 3)
    x = data.draw(laid_out(shape))
    out_sizes = list(out.sizes) if isinstance(out, TensorDesc) else None
    got = check(dml.slice1, x, o, s, t, out_sizes)
    if got[0] == "ok":
        want_sizes = out_sizes or [1 + (w - 1) // abs(v) for w, v in zip(s, t)]
        assert np.array_equal(got[1], ref.slice1(np.asarray(x), list(o), list(s), list(t), want_sizes))


@SETTINGS
@given(st.data())
def test_slice_plain_route_equals_the_plan_route(data):
    inp, _, o, s, t = data.draw(slice_args())
    x = data.draw(laid_out(inp.sizes if isinstance(inp, TensorDesc) else (3, 2)))
    got = check(dml.slice, x, o, s, t)
    if got[0] == "ok":
        assert np.array_equal(got[1], ref.slice_(np.asarray(x), list(o), list(s), list(t)))


@SETTINGS
@given(st.data())
def test_slice_grad_plain_route_equals_the_plan_route(data):
    grad, out, o, s, t = data.draw(slice1_args(grad=True))      # the input gradient first
    if not isinstance(grad, TensorDesc) or not isinstance(out, TensorDesc):
        return
    g = data.draw(laid_out(grad.sizes))
    got = check(dml.slice_grad, g, list(out.sizes), o, s, t)
    if got[0] == "ok":
        assert np.array_equal(got[1], ref.slice_grad(np.asarray(g), list(out.sizes), list(o), list(s), list(t)))


@SETTINGS
@given(st.data())
def test_unfold_plain_route_equals_the_plan_route(data):
    image, _, *_ = data.draw(window_args())
    if not isinstance(image, TensorDesc):
        return
    d = len(image.sizes) - 2
    fields = data.draw(unfold_fields(d))
    assume(modest_unfold(image.sizes, fields))
    x = data.draw(laid_out(image.sizes))
    got = check(dml.unfold, x, *fields)
    if got[0] == "ok":
        assert np.array_equal(got[1], ref.unfold(np.asarray(x), *(per_axis(f, d) for f in fields)))


def test_plain_route_errors_and_odd_inputs_equal_the_plan_route():
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    cases = [
        (dml.slice1, x, [0, 0, 1, 0], [2, 3, 4, 5], [1, 1, -1, 1]),          # window outside the input
        (dml.slice1, x, [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, 0, 1]),           # a zero stride
        (dml.slice1, x, [0, 0, 0], [2, 3, 4], [1, 1, 1]),                    # one entry short
        (dml.slice1, x, [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, -1, 1], [2, 3, 4, 6]),
        (dml.slice1, x, [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, -1, 1], [2, 3, 4, 0]),
        (dml.slice1, x, [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, 2**31, 1]),
        (dml.slice1, x, [0, 0, 0, np.int64(0)], [2, 3, 4, 5], [1, 1, -1, 1]),
        (dml.slice1, x, [0, 0, 0, True], [2, 3, 4, 5], [1, 1, -1, 1]),
        (dml.slice1, x, (0, 0, 0, 0), (2, 3, 4, 5), (1, 1, -1, 1), (1, 1, 2, 3)),
        (dml.slice, x, [0, 0, 0, 1], [2, 3, 4, 3], [1, 1, 1, 2]),
        (dml.slice, x, [0, 0, 0, 0], [2, 3, 4, 3], [1, 1, 1, 0]),
        (dml.slice1, x.astype(bool), [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, -1, 1]),
        (dml.slice1, x.astype(np.complex64), [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, -1, 1]),
        (dml.slice1, x.astype(">f4"), [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, -1, 1]),
        (dml.slice1, x[:0], [0, 0, 0, 0], [0, 3, 4, 5], [1, 1, -1, 1]),
        (dml.slice1, np.float32(3).reshape(()), [], [], []),
        (dml.slice1, np.ones((1,) * 9, np.float32), [0] * 9, [1] * 9, [1] * 9),
        (dml.slice1, np.ma.masked_array(x), [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, -1, 1]),
        (dml.slice1, x.view(type("Sub", (np.ndarray,), {})), [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, -1, 1]),
        (dml.slice1, np.broadcast_to(x[:1], (4, 3, 4, 5)), [0, 0, 0, 0], [4, 3, 4, 5], [1, 1, -1, 1]),
        # more elements than a TensorDesc may have, a small window of them
        (dml.slice1, np.broadcast_to(np.float32(1), (2**16, 2**16, 2)), [0, 0, 0], [1, 1, 2], [1, 1, -1]),
        (dml.slice, np.broadcast_to(np.float32(1), (2**33, 1)), [0, 0], [2, 1], [1, 1]),
        (dml.unfold, x, 3, 1, 1, 1, 1), (dml.unfold, x, [3, 3], [1, 2], 1, [1, 0], 1),
        (dml.unfold, x, 6), (dml.unfold, x, 0), (dml.unfold, x, [3]), (dml.unfold, x, 3, 0),
        (dml.unfold, x, 3, 1, 1, -1), (dml.unfold, x[0, 0], 2), (dml.unfold, x, 3, np.int64(1)),
        (dml.unfold, np.broadcast_to(np.float32(1), (2**16, 2**16, 2)), 1),
        (dml.unfold, np.broadcast_to(np.float32(1), (1, 2**16, 2**12)), 2, 1, 1, 0, 0),
        (dml.unfold, x.astype(np.float16)[:, :, ::-1], [2, 1], 1, [1, 2], 0, [1, 1]),
        (dml.slice_grad, x, [2, 3, 4, 5], [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, -1, 1]),
        (dml.slice_grad, x, [2, 3, 4, 5], [0, 0, 1, 0], [2, 3, 4, 5], [1, 1, -1, 1]),
        (dml.slice_grad, x, [2, 3, 9, 5], [0, 0, 1, 0], [2, 3, 8, 5], [1, 1, -2, 1]),
        (dml.slice_grad, x, [2, 3, 4], [0, 0, 0], [2, 3, 4], [1, 1, 1]),
        (dml.slice_grad, x, [2, 3, 4, 5], [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, 0, 1]),
        (dml.slice_grad, x, [2, 3, 4, 2**30], [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, 1, 1]),
        (dml.slice_grad, x, [2, 3, 4, 5.0], [0, 0, 0, 0], [2, 3, 4, 5], [1, 1, 1, 1]),
        (dml.slice_grad, x[:, :, :1], [2, 3, 1, 5], [0, 0, 0, 0], [2, 3, 1, 5], [1, 1, -1, 1]),
    ]
    for fn, *args in cases:
        want = plain_off(fn, *args)
        calls.clear()
        got = outcome(fn, *args)
        if got[0] == "ok" and want[0] == "ok":
            assert got[1].dtype == want[1].dtype and got[1].shape == want[1].shape
            assert type(got[1]) is type(want[1]) and same_bytes(got[1], want[1]), args
        else:
            assert got == want, args
        del want, got


def same_bytes(a, b, chunk=1 << 26):
    """a's bytes are b's (C-contiguous arrays), compared a chunk at a time:
    one case's outputs are 2.1 GB each, and tobytes() would copy both."""
    a, b = a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8)
    return a.size == b.size and all(np.array_equal(a[i:i + chunk], b[i:i + chunk]) for i in range(0, a.size, chunk))


def test_plain_route_is_taken_and_records_what_the_plan_route_records(monkeypatch):
    """Can fail: the route is the one that runs plain valid calls (it builds
    no description), and its call-cache entry (shape, kernel parameters,
    threads, origin) is the plan route's."""
    base = np.arange(2 * 3 * 5 * 7, dtype=np.float32).reshape(2, 3, 5, 7)
    refuse = (lambda self: pytest.fail("a description was built"))
    for x in (base, base[:, :, ::-1], base.transpose(0, 1, 3, 2), base[:, 1:2], np.asfortranarray(base)):
        for fn, args in ((dml.slice1, ([0, 0, 0, 0], list(x.shape), [1, -1, 2, -3], None)),
                         (dml.slice, ([0, 0, 1, 0], [1, 1, 2, 2], [1, 1, 2, 3])),
                         (dml.unfold, (3, 1, 1, 1, 1)), (dml.unfold, ([2, 1], [1, 2], 2, 0, [0, 3])),
                         (dml.slice_grad, ([*x.shape[:2], 2 * x.shape[2] + 1, x.shape[3]], [0, 0, 1, 0],
                                           [*x.shape[:2], 2 * x.shape[2], x.shape[3]], [1, 1, -2, 1]))):
            want, planned = plain_off(fn, x, *args, with_records=True)
            assert want[0] == "ok" and planned is not None
            with monkeypatch.context() as m:
                m.setattr(Slice1OperatorDesc, "__post_init__", refuse)
                m.setattr(SliceOperatorDesc, "__post_init__", refuse)
                m.setattr(UnfoldOperatorDesc, "__post_init__", refuse)
                m.setattr(SliceGradOperatorDesc, "__post_init__", refuse)
                got, entry = recorded(fn, x, *args)
            assert got[0] == "ok" and got[1].tobytes() == want[1].tobytes()
            assert entry == planned


@pytest.mark.parametrize("kernels", ["compiled", "numpy"])
def test_plain_route_counts_one_plan_cache_miss(kernels):
    x = np.ones((3, 4), np.float32)
    with dml.configure(cpu_kernels=kernels):
        before = dml.plan_cache_info()["misses"]
        calls.clear()
        planner.clear()
        dml.slice1(x, [0, 0], [3, 4], [1, -1])
        assert dml.plan_cache_info()["misses"] == before + 1


@pytest.mark.parametrize("settings_", [dict(threads=1), dict(threads=4, thread_grain_bytes=64),
                                       dict(cpu_kernels="numpy"), dict(call_cache=False)])
def test_plain_route_after_configure(settings_):
    rng = np.random.default_rng(1)
    shapes = [(1, c, h, w) for c in (1, 3) for h in (5, 64) for w in (7, 33)]
    want = []
    for s in shapes:
        x = rng.random(s, dtype=np.float32)
        want.append((x, plain_off(dml.slice1, x, [0, 0, 0, 0], list(s), [1, 1, -1, 1])))
    with dml.configure(**settings_):
        calls.clear()
        for x, w in want:
            got = outcome(dml.slice1, x, [0, 0, 0, 0], list(x.shape), [1, 1, -1, 1])
            same_result(got, w)
            same_result(outcome(dml.slice1, x, [0, 0, 0, 0], list(x.shape), [1, 1, -1, 1]), w)
            assert np.array_equal(got[1], x[:, :, ::-1])
    for x, w in want:                             # records made under the other settings do not answer
        same_result(outcome(dml.slice1, x, [0, 0, 0, 0], list(x.shape), [1, 1, -1, 1]), w)


def test_plain_route_threads_and_configure_from_another_thread():
    rng = np.random.default_rng(2)
    arrays = [rng.random((1, 1 + i % 5, 3 + i % 17, 4 + i // 17), dtype=np.float32) for i in range(400)]
    errors = []
    stop = threading.Event()

    def work(k):
        try:
            for i, x in enumerate(arrays[k::4]):
                step = [1, 1, -1 - (i % 2), 1 + (k % 2)]
                got = dml.slice1(x, [0, 0, 0, 0], list(x.shape), step)
                want = x[:, :, ::step[2], ::step[3]]
                if not np.array_equal(got, want):
                    errors.append((k, i))
        except Exception as e:                   # noqa: BLE001 - reported below
            errors.append(repr(e))

    def churn():
        while not stop.is_set():
            with dml.configure(threads=1 + int(rng.integers(0, 3)), thread_grain_bytes=64):
                pass
    for _ in range(3):
        calls.clear()
        workers = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        other = threading.Thread(target=churn)
        other.start()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        stop.set()
        other.join()
        stop.clear()
    assert not errors, errors[:5]


def test_new_shape_cycle_stays_right_and_bounded():
    """More distinct shapes than any cache holds, cycled twice."""
    rng = np.random.default_rng(3)
    xs = [rng.random((1, 1 + i % 8, 8 + (i // 8) % 50, 20 + i // 400), dtype=np.float32) for i in range(1200)]
    for _ in range(2):
        for x in xs[::7]:
            assert np.array_equal(dml.slice1(x, [0, 0, 0, 0], list(x.shape), [1, 1, -1, 1]), x[:, :, ::-1])
    info = dml.plan_cache_info()
    assert info["plans"] <= info["size"]


def test_the_move_programs_tuned_pass_declines_and_runs_like_the_kernel():
    """The first five's lowering into the move program (newshape_move.c, odml_move_plain): one tuned pass whose
    parameter bytes and threads are CpuBackend's runner's, declined (None) wherever the Python route must
    run the call; move_new runs exactly it."""
    from opendml.arrays import front
    nat = _native()

    def lw(name, x, args, threads, grain, limit, tile=(0, 0)):
        return nat.move_lowering(front._LOWER[calls.OPS[name]], x, args, (threads, grain, *tile, limit))

    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    window = ([0, 0, 0], [2, 3, 4], [1, -1, 2], None)
    shapes, dtype, passes = lw("slice1", x, window, 1, 1 << 16, 1 << 20)
    (fill, src, dst, blob, threads), = passes
    want = get_backend("cpu").runner(ref.as_program(CopyPlan(4, (2, 3, 2), 8, (12, -4, 2), 0, (6, 2, 1))))
    assert shapes == ((2, 3, 2),) and dtype == x.dtype and (fill, src, dst, threads) == (0, 0, 0, 1)
    assert blob == want.blob
    out = calls.move_new(calls.OPS["slice1"], front._LOWER[calls.OPS["slice1"]], x, window, -1,
                         (1, 1 << 16, 0, 0, 1 << 20))
    assert np.array_equal(out, x[:, ::-1, ::2])
    whole = ([0, 0, 0], [2, 3, 4], [1, 1, 1], None)
    assert lw("slice1", x.tolist(), whole, 1, 1, 1 << 20) is None                      # not an ndarray
    assert lw("slice1", x, whole[:2] + ([1, 1], None), 1, 1, 1 << 20) is None          # lengths
    assert lw("slice1", x, whole, 1, 1, 96) is None                                    # at the limit
    assert lw("slice1", x, whole, 1, 0, 1 << 20) is None                               # grain
    assert lw("slice1", x, ([0, 0, 2**63], *whole[1:]), 1, 1, 1 << 20) is None         # outside 64 bits
    assert lw("slice1", x, whole, 100, 1, 1 << 20) is None                             # > 64 threads
    odd = np.ndarray((2, 3), np.float32, buffer=np.zeros(64, np.uint8), offset=1, strides=(13, 4))
    assert lw("slice1", odd, ([0, 0], [2, 3], [1, 1], None), 1, 1, 1 << 20) is None   # not whole elements
    assert lw("slice1", x.astype(np.bool_), whole, 1, 1, 1 << 20) is None              # a type the table lacks
    img = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    args = (3, 1, 1, 1, 1)
    (shape,), _, ((_, _, _, _, threads),) = lw("unfold", img, args, 1, 1 << 16, 1 << 20, (64, 1 << 20))
    assert shape == (2, 27, 20) and threads == 1
    out = calls.move_new(calls.OPS["unfold"], front._LOWER[calls.OPS["unfold"]], img, args, -1,
                         (1, 1 << 16, 64, 1 << 20, 1 << 20))
    assert np.array_equal(out, dml.unfold(img, *args))
    assert lw("unfold", img[0, 0], args, 1, 1, 1 << 20) is None                         # no spatial axis
    assert lw("unfold", img, args, 1, 1, 2 * 27 * 20 * 4) is None                       # at the limit
    assert lw("unfold", img, args, 100, 1, 1 << 20) is None                             # > 64 threads
