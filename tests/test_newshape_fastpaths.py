"""Issue 19 (new shapes): the one-pass fast paths of the description layer and
the planner give exactly what the rule-by-rule checks give.

* ``TensorDesc`` and the five operator descriptions: random valid and invalid
  arguments (plain ints and edge values, bools, floats, NumPy integers,
  strings, wrong lengths, wrong tensors) give the same stored fields, or the
  same error (type and message), through the constructor (fast path first)
  as through the detailed checks alone (``__post_init__`` of ``TensorDesc``,
  ``_check_rules`` of an operator, run on the raw fields).
* ``CopyPlan`` canonical form, ``array_layout`` and the plan key against
  the former implementations, kept here as references.
* The array API: random calls on arrays of several layouts give the same
  result or error with every cache cleared and warm (plan cache, call cache),
  and valid results equal the independent reference (``tests/reference.py``).
"""
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import opendml as dml
from opendml.arrays import front, numpy_adapter, planner
from opendml.model import DataType, TensorDesc, TensorFlags
from opendml.ops import (FoldOperatorDesc, Slice1OperatorDesc, SliceGradOperatorDesc, SliceOperatorDesc,
                         UnfoldOperatorDesc)
from opendml.plan import CopyPlan
from opendml.runtime import calls
from tests import reference as ref
from .conftest import n_examples

SETTINGS = settings(max_examples=n_examples(150), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
U32 = 2**32 - 1
I32 = 2**31 - 1


def outcome(fn, *args, **kw):
    """('ok', value) or ('error', type, message)."""
    try:
        return ("ok", fn(*args, **kw))
    except Exception as e:            # noqa: BLE001 - compared between the two routes
        return ("error", type(e), str(e))


def fields_of(obj) -> list:
    """Every dataclass field's value with its type (and, for tuples, the types
    of the entries), so a list or a NumPy integer cannot pass for a tuple of
    ints."""
    out = []
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        kinds = tuple(type(e) for e in v) if isinstance(v, tuple) else None
        out.append((f.name, v, type(v), kinds))
    return out


def same(a, b):
    if a[0] == "ok" and b[0] == "ok":
        assert fields_of(a[1]) == fields_of(b[1])
    else:
        assert a == b


def raw(cls, *values):
    """An instance of ``cls`` holding ``values`` as given, nothing checked."""
    obj = object.__new__(cls)
    for f, v in zip(dataclasses.fields(cls), values):
        obj.__dict__[f.name] = v
    return obj


def detailed_desc(*args, **kw):
    """TensorDesc through ``__post_init__`` alone (the detailed rules)."""
    names = [f.name for f in dataclasses.fields(TensorDesc)]
    values = dict(zip(names, (None, None, None, None, 0, TensorFlags.NONE)))
    values.update(zip(names, args))
    values.update(kw)
    obj = raw(TensorDesc, *(values[n] for n in names))
    obj.__post_init__()
    return obj


def detailed_op(cls, *args):
    obj = raw(cls, *args)
    obj._check_rules()
    return obj


# -- strategies ------------------------------------------------------------------------------------------

EDGES = [-(2**63), -(2**31) - 1, -(2**31), -2, -1, 0, 1, 2, 3, 4, 5, 7, 2**31 - 1, 2**31, U32, U32 + 1, 2**64]


def an_int(lo=-3, hi=12):
    return st.one_of(st.integers(lo, hi), st.integers(lo, hi), st.integers(lo, hi), st.sampled_from(EDGES))


def odd_value():
    """Values that are not plain ints: the detailed checks' business."""
    return st.sampled_from([True, False, 1.0, 2.5, None, "3", np.int64(2), np.int32(1), np.uint8(3), np.float32(1)])


def entry(lo=-3, hi=12):
    return st.one_of(an_int(lo, hi), an_int(lo, hi), an_int(lo, hi), an_int(lo, hi), odd_value())


@st.composite
def int_field(draw, n, lo=-3, hi=12, valid=None):
    """A field of about ``n`` entries: mostly a list or tuple of plain ints in
    [lo, hi], sometimes odd entries, another length, or not a sequence."""
    if valid is not None and draw(st.integers(0, 3)):
        return list(valid) if draw(st.booleans()) else tuple(valid)
    kind = draw(st.sampled_from(["list", "list", "list", "tuple", "tuple", "array", "odd", "scalar", "length"]))
    if kind == "scalar":
        return draw(st.one_of(an_int(lo, hi), odd_value(), st.just("abc"), st.just({1: 2})))
    m = n if kind != "length" else draw(st.integers(0, 10))
    values = [draw(an_int(lo, hi) if kind != "odd" else entry(lo, hi)) for _ in range(m)]
    if kind == "tuple":
        return tuple(values)
    if kind == "array":
        return np.array(values, dtype=np.int64) if all(type(v) is int and abs(v) < 2**62 for v in values) else values
    return values


DTYPES = [t for t in DataType if t.value not in (0, 12, 13)]


@st.composite
def tensor_args(draw):
    n = draw(st.integers(0, 9))
    dt = draw(st.one_of(st.sampled_from(DTYPES), st.sampled_from(list(DataType)),
                        st.sampled_from([1, 9, 0, 14, "FLOAT16", "float32", "DML_TENSOR_DATA_TYPE_INT8", "bogus",
                                         True, 1.0, None])))
    sizes = draw(int_field(n, 0, 6))
    strides = draw(st.one_of(st.none(), st.none(), int_field(n, -1, 40)))
    kw = {}
    if draw(st.integers(0, 3)) == 0:
        kw["total_tensor_size_in_bytes"] = draw(st.one_of(st.none(), an_int(0, 5000), odd_value()))
    if draw(st.integers(0, 3)) == 0:
        kw["guaranteed_base_offset_alignment"] = draw(st.one_of(st.sampled_from([0, 1, 2, 4, 8, 16, 3, 32, 2**33]),
                                                              odd_value()))
    if draw(st.integers(0, 3)) == 0:
        kw["flags"] = draw(st.sampled_from([TensorFlags.NONE, TensorFlags.OWNED_BY_DML, 0, 1, 2, True, None]))
    return (dt, sizes, strides), kw


def tensor(draw, sizes, dtype=DataType.FLOAT32):
    """A valid TensorDesc of ``sizes`` (packed or padded strides, sometimes
    owned by DML), or once in a while something that is not one."""
    r = draw(st.integers(0, 30))
    if r == 0:
        return draw(st.sampled_from([None, "tensor", list(sizes)]))
    if r == 1:
        dtype = draw(st.sampled_from(DTYPES))
    strides = None
    if r == 2:
        strides, step = [], 1
        for s in reversed(sizes):
            strides.insert(0, step)
            step *= s + 1
    flags = TensorFlags.OWNED_BY_DML if r == 3 else TensorFlags.NONE
    return TensorDesc(dtype, tuple(sizes), strides, flags=flags)


# -- TensorDesc ---------------------------------------------------------------------------------------------

@SETTINGS
@given(tensor_args())
def test_tensor_desc_fast_path_equals_the_detailed_rules(args):
    pos, kw = args
    same(outcome(TensorDesc, *pos, **kw), outcome(detailed_desc, *pos, **kw))


def test_tensor_desc_fast_path_edges():
    cases = [
        ((DataType.FLOAT32, [U32]), {}), ((DataType.FLOAT32, [U32, 1]), {}), ((DataType.FLOAT32, [65536, 65536]), {}),
        ((DataType.FLOAT64, [2, 2], [U32, U32]), {}), ((DataType.FLOAT64, [2**31, 2**31], [U32, U32]), {}),
        ((DataType.UINT8, [1] * 8), {}), ((DataType.UINT8, [1] * 9), {}), ((DataType.UINT8, []), {}),
        ((DataType.INT64, (3, 4), (0, 0)), {}), ((DataType.INT64, (3, 4), (0, -1)), {}),
        ((DataType.INT64, (3, 4), (4, 1, 1)), {}), ((DataType.INT16, (3, 4)), {"flags": 0}),
        ((DataType.INT16, (3, 4)), {"guaranteed_base_offset_alignment": False}),
        ((DataType.UINT4, (3, 4)), {}), ((DataType.INT16, (True, 4)), {}),
    ]
    for pos, kw in cases:
        same(outcome(TensorDesc, *pos, **kw), outcome(detailed_desc, *pos, **kw))
    d = TensorDesc(DataType.FLOAT16, [3, 5])
    assert d.sizes == (3, 5) and type(d.sizes) is tuple and d.total_tensor_size_in_bytes == 32
    assert d.with_(sizes=[2, 2]).sizes == (2, 2) and d.flags is TensorFlags.NONE
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.sizes = (1,)


# -- the operator descriptions --------------------------------------------------------------------------------

@st.composite
def slice1_args(draw, grad=False):
    n = draw(st.integers(1, 5))
    dims = [draw(st.integers(1, 6)) for _ in range(n)]
    offs = [draw(st.integers(0, d - 1)) for d in dims]
    sizes = [draw(st.integers(1, d - o)) for d, o in zip(dims, offs)]
    steps = [draw(st.sampled_from([1, 2, 3, -1, -2, -4])) for _ in dims]
    most = [1 + (s - 1) // abs(t) for s, t in zip(sizes, steps)]
    o, s, t = (draw(int_field(n, -2, 8, valid=v)) for v in (offs, sizes, steps))
    inp = tensor(draw, dims)
    out_sizes = [draw(st.integers(1, m)) for m in most] if draw(st.booleans()) else most
    if draw(st.integers(0, 6)) == 0:
        out_sizes = [draw(st.integers(1, 4)) for _ in range(draw(st.sampled_from([n, n, n + 1, max(n - 1, 1)])))]
    out = tensor(draw, out_sizes) if grad or draw(st.booleans()) else None
    return (out, inp, o, s, t) if grad else (inp, out, o, s, t)


@SETTINGS
@given(slice1_args())
def test_slice1_fast_path_equals_the_detailed_rules(args):
    same(outcome(Slice1OperatorDesc, *args), outcome(detailed_op, Slice1OperatorDesc, *args))


@SETTINGS
@given(slice1_args(grad=True))
def test_slice_grad_fast_path_equals_the_detailed_rules(args):
    same(outcome(SliceGradOperatorDesc, *args), outcome(detailed_op, SliceGradOperatorDesc, *args))


@st.composite
def slice_args(draw):
    n = draw(st.integers(1, 5))
    dims = [draw(st.integers(1, 7)) for _ in range(n)]
    offs = [draw(st.integers(0, d - 1)) for d in dims]
    steps = [draw(st.integers(1, 3)) for _ in dims]
    sizes = [draw(st.integers(1, (d - 1 - o) // t + 1)) for d, o, t in zip(dims, offs, steps)]
    o, s, t = (draw(int_field(n, -2, 8, valid=v)) for v in (offs, sizes, steps))
    out = None
    if draw(st.booleans()):
        out = tensor(draw, sizes if draw(st.integers(0, 4)) else [x + 1 for x in sizes])
    return tensor(draw, dims), out, o, s, t


@SETTINGS
@given(slice_args())
def test_slice_fast_path_equals_the_detailed_rules(args):
    same(outcome(SliceOperatorDesc, *args), outcome(detailed_op, SliceOperatorDesc, *args))


@st.composite
def window_args(draw, fold=False):
    d = draw(st.integers(1, 3))
    spatial = [draw(st.integers(1, 6)) for _ in range(d)]
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    window = [draw(st.integers(1, 3)) for _ in range(d)]
    strides = [draw(st.integers(1, 3)) for _ in range(d)]
    dil = [draw(st.integers(1, 2)) for _ in range(d)]
    sp = [draw(st.integers(0, 2)) for _ in range(d)]
    ep = [draw(st.integers(0, 2)) for _ in range(d)]
    fields = [draw(int_field(d, -1, 4, valid=v)) for v in (window, strides, dil, sp, ep)]
    blocks = []
    for s, w, t, dl, a, b in zip(spatial, window, strides, dil, sp, ep):
        room = s + a + b - dl * (w - 1) - 1
        blocks.append(room // t + 1 if room >= 0 else 1)
    cols = (n, c * math.prod(window), math.prod(blocks))
    lead = [1] * draw(st.sampled_from([0, 0, 0, 1, 2]))
    image = [n, c, *spatial]
    if fold:
        if draw(st.integers(0, 5)) == 0:
            cols = (n, max(1, c * math.prod(window) + draw(st.sampled_from([-1, 1]))), cols[2])
        return (tensor(draw, [*lead, *cols]), tensor(draw, image), *fields)
    out = None
    if draw(st.booleans()):
        out_sizes = [*lead, *cols] if draw(st.integers(0, 4)) else [*cols[:2], cols[2] + 1]
        out = tensor(draw, out_sizes)
    return (tensor(draw, image if draw(st.integers(0, 8)) else image + [2]), out, *fields)


@SETTINGS
@given(window_args())
def test_unfold_fast_path_equals_the_detailed_rules(args):
    same(outcome(UnfoldOperatorDesc, *args), outcome(detailed_op, UnfoldOperatorDesc, *args))


@SETTINGS
@given(window_args(fold=True))
def test_fold_fast_path_equals_the_detailed_rules(args):
    same(outcome(FoldOperatorDesc, *args), outcome(detailed_op, FoldOperatorDesc, *args))


def test_fast_paths_store_nothing_when_they_decline():
    """A declined fast path leaves the raw fields for the detailed rules."""
    t = TensorDesc(DataType.FLOAT32, (2, 3))
    d = raw(Slice1OperatorDesc, t, None, [0, 0], [2, 3], [1, 0])      # stride 0: declined
    assert d._fast_path() is False and d.input_window_offsets == [0, 0] and d.output_tensor is None
    with pytest.raises(dml.ValidationError, match=r"InputWindowStrides\[1\] must be non-zero"):
        Slice1OperatorDesc(t, None, [0, 0], [2, 3], [1, 0])


# -- plans, layouts and keys -----------------------------------------------------------------------------------

def former_canonical(p: CopyPlan) -> CopyPlan:
    """CopyPlan._canonical_form as it was written before issue 19."""
    dims = [(s, i, o) for s, i, o in zip(p.sizes, p.in_strides, p.out_strides) if s != 1]
    dims.sort(key=lambda d: (d[2], abs(d[1])), reverse=True)
    merged = []
    for s, i, o in dims:
        if merged:
            ps, pi, po = merged[-1]
            if pi == i * s and po == o * s:
                merged[-1] = (ps * s, i, o)
                continue
        merged.append((s, i, o))
    if not merged:
        merged = [(1, 1, 1)]
    s, i, o = zip(*merged)
    return dataclasses.replace(p, sizes=tuple(s), in_strides=tuple(i), out_strides=tuple(o))


@SETTINGS
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(-30, 30), st.integers(0, 30)), min_size=1, max_size=8),
       st.integers(0, 50), st.sampled_from([1, 2, 4, 8]))
def test_copy_plan_canonical_form_equals_the_former_one(dims, offset, es):
    sizes, ins, outs = zip(*dims)
    p = CopyPlan(element_size=es, sizes=sizes, in_offset=offset, in_strides=ins, out_offset=3, out_strides=outs)
    assert fields_of(p.canonical()) == fields_of(former_canonical(p))
    packed = CopyPlan(es, sizes, offset, ins, 0, dml.packed_strides(sizes))
    assert fields_of(packed.canonical()) == fields_of(former_canonical(packed))


def former_layout(shape, byte_strides, itemsize):
    strides = []
    for n, s in zip(shape, byte_strides):
        if s % itemsize:
            if n > 1:
                return None
            s = 0
        strides.append(s // itemsize)
    origin = sum((n - 1) * -t for n, t in zip(shape, strides) if t < 0)
    span = sum((n - 1) * abs(t) for n, t in zip(shape, strides)) + 1 if all(shape) else 0
    return planner.Layout(tuple(strides), origin, span, tuple(t < 0 for t in strides))


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(-40, 40)), min_size=0, max_size=8),
       st.sampled_from([1, 2, 4, 8]))
def test_array_layout_equals_the_former_one(dims, itemsize):
    shape = tuple(n for n, _ in dims)
    strides = tuple(s for _, s in dims)
    assert planner.array_layout(shape, strides, itemsize) == former_layout(shape, strides, itemsize)


def test_plan_keys_tell_arguments_apart():
    def key(*args):
        return front.Call("slice1", None, key=front.PLAN_KEY, args=args).key
    assert key([1, 2], [3]) != key([1], [2, 3]) != key([1, 2, 3], [])
    assert key(3) != key([3]) and key([3]) is not None
    assert key([3]) == key((3,))                         # a list and a tuple validate alike
    assert key(None, [1]) != key([1], None)
    assert key([1], None) != key([1], ("None",))
    for odd in ([1.0], [True], [np.int64(1)], 1.0, True, np.int64(1), "1", [[1]]):
        assert key([1], odd) is None
    assert key([1]) != front.Call("slice", None, key=front.PLAN_KEY, args=([1],)).key


# -- the array API: cleared caches, warm caches, the reference --------------------------------------------------

def clear_caches():
    planner.clear()
    calls.clear()


@st.composite
def arrays(draw, shape):
    """A float32 array of ``shape`` laid out in one of several ways."""
    base = np.arange(1, math.prod(shape) + 1, dtype=np.float32).reshape(shape)
    kind = draw(st.sampled_from(["packed", "reversed", "transposed", "strided", "readonly", "fortran"]))
    if kind == "reversed":
        axis = draw(st.integers(0, len(shape) - 1))
        flipped = np.flip(base, axis).copy()
        return np.flip(flipped, axis)                     # the same values, a negative stride
    if kind == "transposed":
        return np.ascontiguousarray(base.T).T
    if kind == "strided":
        big = np.zeros(tuple(2 * s for s in shape), dtype=np.float32)
        view = big[tuple(slice(None, None, 2) for _ in shape)]
        view[...] = base
        return view
    if kind == "readonly":
        base.flags.writeable = False
    if kind == "fortran":
        return np.asfortranarray(base)
    return base


def run_twice_cleared_and_warm(fn, x, *args):
    clear_caches()
    cold = outcome(fn, x, *args)
    warm = [outcome(fn, x, *args) for _ in range(2)]     # the call cache (C) serves these
    calls.clear()
    warm.append(outcome(fn, x, *args))                    # the plan cache (Python) serves this one
    for w in warm:
        if cold[0] == "ok":
            assert w[0] == "ok" and w[1].dtype == cold[1].dtype and np.array_equal(w[1], cold[1])
        else:
            assert w == cold
    return cold


API_SETTINGS = settings(max_examples=n_examples(75), deadline=None,
                        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@API_SETTINGS
@given(st.data())
def test_slice1_new_shapes_cleared_warm_and_reference(data):
    inp, out, o, s, t = data.draw(slice1_args())
    shape = inp.sizes if isinstance(inp, TensorDesc) else (2, 3)
    x = data.draw(arrays(shape))
    out_sizes = list(out.sizes) if isinstance(out, TensorDesc) else None
    got = run_twice_cleared_and_warm(dml.slice1, x, o, s, t, out_sizes)
    if got[0] == "ok":
        want_sizes = out_sizes or [1 + (w - 1) // abs(st_) for w, st_ in zip(s, t)]
        assert np.array_equal(got[1], ref.slice1(np.asarray(x), list(o), list(s), list(t), want_sizes))


@API_SETTINGS
@given(st.data())
def test_slice_and_slice_grad_new_shapes_cleared_warm_and_reference(data):
    inp, _, o, s, t = data.draw(slice_args())
    x = data.draw(arrays(inp.sizes if isinstance(inp, TensorDesc) else (3, 2)))
    got = run_twice_cleared_and_warm(dml.slice, x, o, s, t)
    if got[0] == "ok":
        assert np.array_equal(got[1], ref.slice_(np.asarray(x), list(o), list(s), list(t)))
    grad, out, o, s, t = data.draw(slice1_args(grad=True))      # the input gradient first
    if isinstance(grad, TensorDesc) and isinstance(out, TensorDesc):
        g = data.draw(arrays(grad.sizes))
        got = run_twice_cleared_and_warm(dml.slice_grad, g, list(out.sizes), o, s, t)
        if got[0] == "ok":
            assert np.array_equal(got[1], ref.slice_grad(np.asarray(g), list(out.sizes), list(o), list(s), list(t)))


def per_axis(v, d):
    return [int(v)] * d if isinstance(v, (int, np.integer)) else [int(e) for e in v]


def modest_unfold(sizes, fields, limit=1 << 20):
    """False where UNFOLD of an input of ``sizes`` with these five fields
    would succeed with an output of more than ``limit`` elements (a drawn
    padding of 2^31 asks, validly, for gigabytes: an example must not
    allocate them); True otherwise, odd fields included (they fail before
    any allocation)."""
    d = len(sizes) - 2
    try:
        window, strides, dil, sp, ep = (per_axis(f, d) for f in fields)
    except (TypeError, ValueError, OverflowError):
        return True
    if d < 1 or not all(len(f) == d for f in (window, strides, dil, sp, ep)):
        return True
    if any(not 0 <= v < 2**32 for f in (window, strides, dil, sp, ep) for v in f):
        return True
    rows, blocks = sizes[1], 1
    for s, w, t, dl, a, b in zip(sizes[2:], window, strides, dil, sp, ep):
        room = s + a + b - dl * (w - 1) - 1
        if t < 1 or w < 1 or dl < 1 or room < 0:
            return True                  # refused before any allocation (no window fits, or a zero field)
        rows, blocks = rows * w, blocks * (room // t + 1)
    count = sizes[0] * rows * blocks
    if max(count, rows, blocks) > 2**32 - 1:
        return True                      # refused: more elements than a tensor may have
    return count <= limit


@API_SETTINGS
@given(st.data())
def test_unfold_and_fold_new_shapes_cleared_warm_and_reference(data):
    image, _, *fields = data.draw(window_args())
    if not isinstance(image, TensorDesc):
        return
    assume(modest_unfold(image.sizes, fields))
    x = data.draw(arrays(image.sizes))
    got = run_twice_cleared_and_warm(dml.unfold, x, *fields)
    if got[0] == "ok":
        d = len(image.sizes) - 2
        assert np.array_equal(got[1], ref.unfold(np.asarray(x), *(per_axis(f, d) for f in fields)))
    cols, image, *fields = data.draw(window_args(fold=True))
    if isinstance(cols, TensorDesc) and isinstance(image, TensorDesc):
        x = data.draw(arrays(cols.sizes))
        got = run_twice_cleared_and_warm(dml.fold, x, list(image.sizes[2:]), *fields)
        if got[0] == "ok":
            d = len(image.sizes) - 2
            want = ref.fold(np.asarray(x), list(image.sizes[2:]), *(per_axis(f, d) for f in fields))
            assert np.array_equal(got[1], want)


def test_torch_cpu_tensors_take_the_same_route():
    torch = pytest.importorskip("torch")
    for shape in [(1, 2, 5, 7), (2, 3, 4, 4), (1, 1, 9, 3)]:
        t = torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape)
        for x in (t, t.flip(2), t.transpose(2, 3)):
            clear_caches()
            a = dml.slice1(x, [0, 0, 0, 0], list(x.shape), [1, 1, -1, 1])
            assert torch.equal(a, x.flip(2))
            assert torch.equal(dml.unfold(x, 3, 1, 1, 1, 1), torch.nn.functional.unfold(x, 3, 1, 1, 1))
        with pytest.raises(dml.ValidationError, match=r"InputWindowOffsets\[2\] \+ InputWindowSizes\[2\]"):
            dml.slice1(t, [0, 0, 1, 0], list(t.shape), [1, 1, -1, 1])


# -- lowerings against the former ones --------------------------------------------------------------------------

def former_lower(desc, ts, origin):
    """The plan each ``lower`` built before issue 19 (keyword construction,
    the description's properties), for a layout ``ts``/``origin``."""
    from opendml.plan import FoldPlan, ScatterPlan, UnfoldPlan
    if isinstance(desc, Slice1OperatorDesc):
        start = [o + (s - 1 if t < 0 else 0) for o, s, t in
                 zip(desc.input_window_offsets, desc.input_window_sizes, desc.input_window_strides)]
        return CopyPlan(element_size=desc.input_tensor.element_size, sizes=desc.output_tensor.sizes,
                        in_offset=origin + sum(c * t for c, t in zip(start, ts)),
                        in_strides=tuple(w * t for w, t in zip(desc.input_window_strides, ts)),
                        out_offset=0, out_strides=desc.output_tensor.element_strides)
    if isinstance(desc, SliceGradOperatorDesc):
        taken, window = desc.input_gradient_tensor.sizes, desc.input_window_strides
        return ScatterPlan(element_size=desc.input_gradient_tensor.element_size,
                           sizes=desc.output_gradient_tensor.sizes, out_offset=0,
                           out_strides=desc.output_gradient_tensor.element_strides, first=desc.first_positions,
                           step=tuple(abs(t) for t in window), taken=taken,
                           in_offset=origin + sum((g - 1) * s for g, s, t in zip(taken, ts, window) if t < 0),
                           in_strides=tuple(-s if t < 0 else s for s, t in zip(ts, window)))
    def blocks(spatial):                  # the page's formula, not the description's (cached) property
        return tuple((s + a + b - d * (w - 1) - 1) // t + 1 for s, w, t, d, a, b in
                     zip(spatial, desc.window_sizes, desc.strides, desc.dilations, desc.start_padding,
                         desc.end_padding))
    if isinstance(desc, UnfoldOperatorDesc):
        n, c, *spatial = desc.input_tensor.sizes
        return UnfoldPlan(element_size=desc.input_tensor.element_size, batch=n, channels=c, spatial=tuple(spatial),
                          in_offset=origin, in_strides=tuple(ts), window=desc.window_sizes, strides=desc.strides,
                          dilations=desc.dilations, start_padding=desc.start_padding,
                          blocks=blocks(spatial), out_offset=0,
                          out_strides=desc.output_tensor.element_strides[-3:])
    n, c, *spatial = desc.output_tensor.sizes
    return FoldPlan(element_size=desc.input_tensor.element_size, sum_kind=desc.sum_kind, batch=n, channels=c,
                    spatial=tuple(spatial), in_offset=origin, in_strides=tuple(ts[-3:]), window=desc.window_sizes,
                    strides=desc.strides, dilations=desc.dilations, start_padding=desc.start_padding,
                    blocks=blocks(spatial), out_offset=0, out_strides=desc.output_tensor.element_strides)


@SETTINGS
@given(st.data())
def test_lowerings_equal_the_former_ones(data):
    kind = data.draw(st.sampled_from(["slice1", "slice_grad", "unfold", "fold"]))
    cls, strategy = {"slice1": (Slice1OperatorDesc, slice1_args()),
                     "slice_grad": (SliceGradOperatorDesc, slice1_args(grad=True)),
                     "unfold": (UnfoldOperatorDesc, window_args()),
                     "fold": (FoldOperatorDesc, window_args(fold=True))}[kind]
    got = outcome(cls, *data.draw(strategy))
    if got[0] != "ok":
        return
    desc = got[1]
    rank = len(desc.input_tensor.sizes)
    for ts, origin in [(None, 0), (tuple(data.draw(st.integers(-20, 20)) for _ in range(rank)),
                                   data.draw(st.integers(0, 100)))]:
        plan = (desc.lower() if ts is None else desc.lower(in_strides=ts, in_offset=origin)).kernel_plan()
        want = former_lower(desc, desc.input_tensor.element_strides if ts is None else ts, origin)
        assert fields_of(plan) == fields_of(want)


def test_fast_paths_are_taken_on_plain_valid_descriptions(monkeypatch):
    """The properties above compare the fast paths with the rules; this makes
    sure the fast paths are really the ones that accept plain valid input
    (a fast path that always declined would pass them)."""
    from opendml.ops.fold import FoldOperatorDesc
    from opendml.ops.slice import SliceOperatorDesc
    from opendml.ops.slice1 import Slice1OperatorDesc
    from opendml.ops.slice_grad import SliceGradOperatorDesc
    from opendml.ops.unfold import UnfoldOperatorDesc

    def refuse(self, *a, **k):
        raise AssertionError(f"{type(self).__name__}: the rule-by-rule checks ran on a plain valid input")
    for cls in (TensorDesc, SliceOperatorDesc, Slice1OperatorDesc, SliceGradOperatorDesc, UnfoldOperatorDesc,
                FoldOperatorDesc):
        monkeypatch.setattr(cls, "_check_rules" if hasattr(cls, "_check_rules") else "__post_init__", refuse)
    f32 = DataType.FLOAT32
    x = TensorDesc(f32, [1, 2, 4, 4])
    assert x.total_tensor_size_in_bytes == 128
    assert TensorDesc(f32, (1, 2, 4, 4), (32, 16, 4, 1)).strides == (32, 16, 4, 1)
    Slice1OperatorDesc(x, TensorDesc(f32, [1, 2, 4, 4]), [0, 0, 0, 0], [1, 2, 4, 4], [1, 1, -1, 1])
    SliceOperatorDesc(x, TensorDesc(f32, [1, 2, 2, 2]), [0, 0, 0, 0], [1, 2, 2, 2], [1, 1, 2, 2])
    SliceGradOperatorDesc(TensorDesc(f32, [1, 2, 4, 4]), x, [0, 0, 0, 0], [1, 2, 4, 4], [1, 1, -1, 1])
    UnfoldOperatorDesc(x, TensorDesc(f32, [1, 18, 16]), [3, 3], [1, 1], [1, 1], [1, 1], [1, 1])
    FoldOperatorDesc(TensorDesc(f32, [1, 18, 16]), x, [3, 3], [1, 1], [1, 1], [1, 1], [1, 1])


def test_canonical_form_with_a_negative_output_stride_sorts_like_the_former_one():
    for p in (CopyPlan(4, (2, 3), 0, (1, 2), 0, (-5, 10)), CopyPlan(4, (3, 2), 8, (2, -1), 20, (10, -5)),
              CopyPlan(2, (2, 2, 3), 0, (6, 3, 1), 40, (-6, 3, 1))):
        assert p.canonical() == former_canonical(p), p
