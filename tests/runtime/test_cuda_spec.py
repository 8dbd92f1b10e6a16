"""Issue 19 (new shapes on CUDA): the CUDA launch of a new shape's plan,
computed in C (``cuda_spec.c``, through ``_native.cuda_spec``), is the launch
``runtime/cuda/backend.py``'s ``launch_spec`` gives for the plan the operator
lowers: the same kernel name, parameter bytes, grid, dynamic shared memory and
origin, over random valid SLICE, SLICE1, UNFOLD and SLICE_GRAD calls, element
layouts (permuted, reversed, gapped, size-1 axes with any stride), element
sizes and pointer alignments. Nothing here needs a GPU: both sides only
compute. ``call_cache_move_new`` launches exactly this (tests/test_torch_new.py
runs it on CUDA where there is one)."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import opendml as dml
import opendml.arrays.front as api
from opendml.arrays import planner
from opendml.model import TensorDesc
from opendml.runtime import calls, get_backend
from opendml.runtime.cuda import tuned as ct
from tests.conftest import native_available
from tests.test_newshape_fastpaths import slice1_args, slice_args, window_args
from tests.test_newshape_plain import unfold_fields
from ..conftest import n_examples

pytestmark = pytest.mark.skipif(not native_available(), reason="the compiled CPU kernels are not built")

SETTINGS = settings(max_examples=n_examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
KINDS = calls.NEW_KINDS
DTYPES = {1: np.uint8, 2: np.float16, 4: np.float32, 8: np.float64}
INTS = {1: np.int8, 2: np.uint16, 4: np.int32, 8: np.uint64}


def _native():
    return get_backend("cpu")._native


def zeros(shape, dtype):
    """An array of ``shape`` that takes no memory (every stride 0): the calls
    below only need its dtype and shape."""
    return np.broadcast_to(np.zeros((), dtype), tuple(shape))


def call_of(fn, x, *args):
    """The Call the array-API function ``fn`` makes for ``x`` and ``args``."""
    got = []
    real = api._route, api._cached, api._new
    api._route = lambda fw, call, arrays: got.append(call) or [None]
    api._cached = api._new = lambda *a: None          # (the C routes would serve the call before the route)
    try:
        fn(x, *args)
    finally:
        api._route, api._cached, api._new = real
    return got[0] if got else None


@st.composite
def element_layout(draw, shape):
    """Signed element strides for ``shape``: the axes packed in a random order,
    some with gaps, some reversed; a size-1 axis's stride anything."""
    order = draw(st.permutations(range(len(shape))))
    strides = [0] * len(shape)
    step = draw(st.sampled_from([1, 1, 1, 2, 3]))
    for axis in reversed(order):
        strides[axis] = step * draw(st.sampled_from([1, 1, 1, -1]))
        step *= shape[axis] + draw(st.sampled_from([0, 0, 0, 1, 5]))
    for axis, n in enumerate(shape):
        if n == 1 and draw(st.booleans()):
            strides[axis] = draw(st.integers(-50, 50))
    return tuple(strides)


def plain_plan(call, shape):
    """``(kernel, fields)`` of ``call``'s operator's reference plain lowering (``ops/<op>.py``'s
    ``plain_lowering``, its ``PLAIN_KERNEL``) on an input of ``shape``, or None."""
    from opendml.arrays import _contract
    from tests.test_newshape_plain import plain_count
    cls = _contract.OPERATOR_OF[call.name]
    got = cls.plain_lowering(tuple(shape), *call.args) if plain_count(len(shape), math.prod(shape)) else None
    return None if got is None else (cls.PLAIN_KERNEL, got)


def plan_of(call, dtype, shape: tuple, layout):
    """``call``'s plan on an array of ``dtype`` and ``shape`` laid out as ``layout`` (the description unvalidated:
    the plan route's lowering, as the C copy is given it)."""
    return call.make(planner.logical_desc(dtype, shape)).lower(in_strides=layout.strides, in_offset=layout.origin)


def compare(call, shape, strides, es, src, dst):
    dtype = np.dtype(DTYPES[es])
    got = plain_plan(call, shape)
    if got is None:
        return None
    kernel, fields = got
    spec = _native().cuda_spec(KINDS[kernel], es, tuple(shape), strides, tuple(fields), src, dst, dtype.kind == "f")
    layout = planner.array_layout(tuple(shape), tuple(s * es for s in strides), es)
    plan = plan_of(call, dtype, tuple(shape), layout)
    name, params, grid, smem = ct.launch_spec(plan.kernel_plan(), src, layout.span, dst)
    assert spec is not None, (call, shape, strides, es)
    assert spec == (name, bytes(params), grid[0], smem, layout.origin), (call, shape, strides, es, src, dst)
    return spec


ALIGN = st.sampled_from([0, 0, 0, 1, 2, 4, 8, 12]).map(lambda a: 1 << 20 | a)


@SETTINGS
@given(st.data(), st.sampled_from([1, 2, 4, 8]), ALIGN, ALIGN)
def test_slice1_launch_equals_launch_spec(data, es, src, dst):
    inp, out, o, s, t = data.draw(slice1_args())
    if not isinstance(inp, TensorDesc) or 0 in inp.sizes:
        return
    shape = inp.sizes
    out_sizes = list(out.sizes) if isinstance(out, TensorDesc) else None
    x = zeros(shape, DTYPES[es])
    call = call_of(dml.slice1, x, o, s, t, out_sizes)
    if call is not None and src % es == 0 and dst % es == 0:
        compare(call, shape, data.draw(element_layout(shape)), es, src, dst)


@SETTINGS
@given(st.data(), st.sampled_from([1, 2, 4, 8]), ALIGN, ALIGN)
def test_slice_launch_equals_launch_spec(data, es, src, dst):
    inp, _, o, s, t = data.draw(slice_args())
    if not isinstance(inp, TensorDesc) or 0 in inp.sizes:
        return
    call = call_of(dml.slice, zeros(inp.sizes, DTYPES[es]), o, s, t)
    if call is not None and src % es == 0 and dst % es == 0:
        compare(call, inp.sizes, data.draw(element_layout(inp.sizes)), es, src, dst)


@SETTINGS
@given(st.data(), st.sampled_from([1, 2, 4, 8]), ALIGN, ALIGN)
def test_slice_grad_launch_equals_launch_spec(data, es, src, dst):
    grad, out, o, s, t = data.draw(slice1_args(grad=True))
    if not isinstance(grad, TensorDesc) or not isinstance(out, TensorDesc) or 0 in grad.sizes:
        return
    call = call_of(dml.slice_grad, zeros(grad.sizes, DTYPES[es]), list(out.sizes), o, s, t)
    if call is not None and src % es == 0 and dst % es == 0:
        compare(call, grad.sizes, data.draw(element_layout(grad.sizes)), es, src, dst)


@SETTINGS
@given(st.data(), st.sampled_from([1, 2, 4, 8]), ALIGN)
def test_unfold_launch_equals_launch_spec(data, es, src):
    image, _, *_ = data.draw(window_args())
    if not isinstance(image, TensorDesc) or 0 in image.sizes:
        return
    fields = data.draw(unfold_fields(len(image.sizes) - 2))
    call = call_of(dml.unfold, zeros(image.sizes, DTYPES[es]), *fields)
    if call is not None and src % es == 0:
        compare(call, image.sizes, data.draw(element_layout(image.sizes)), es, src, 1 << 20)


@SETTINGS
@given(st.data(), st.sampled_from([1, 2, 4, 8]), st.booleans(), ALIGN)
def test_fold_launch_equals_launch_spec(data, es, floating, src):
    cols, image, *fields = data.draw(window_args(fold=True))
    if not isinstance(cols, TensorDesc) or not isinstance(image, TensorDesc):
        return
    dtype = (DTYPES if floating and es > 1 else INTS)[es]
    call = call_of(dml.fold, zeros(cols.sizes, dtype), list(image.sizes[2:]), *fields)
    if call is not None and src % es == 0:
        shape = cols.sizes
        strides = data.draw(element_layout(shape))
        got = plain_plan(call, shape)
        if got is not None:
            assert got[0] == "window_sums"
            spec = _native().cuda_spec(KINDS["window_sums"], es, tuple(shape), strides, got[1], src, 1 << 20,
                                       np.dtype(dtype).kind == "f")
            layout = planner.array_layout(tuple(shape), tuple(s * es for s in strides), es)
            plan = plan_of(call, np.dtype(dtype), tuple(shape), layout)
            name, params, grid, smem = ct.launch_spec(plan.kernel_plan(), src, layout.span, 1 << 20)
            assert spec == (name, bytes(params), grid[0], smem, layout.origin), (call, shape, strides, es)


@pytest.mark.parametrize("es", [1, 2, 4, 8])
def test_unfold_tile_stores_chosen_alike(es):
    """C's and Python's launches agree on unfold_tile's VEC argument (16-byte
    stores) for every element size, on shapes that give each value: rows a
    multiple of 16 bytes or not, a box that spans the inner dimensions, 1-D
    and 3-D."""
    seen = set()
    for shape in [(1, 4, 16, 16), (1, 4, 15, 15), (2, 3, 200, 6), (1, 2, 2100), (1, 2, 6, 8, 8), (1, 1, 3, 2),
                  (2, 2, 57, 57)]:
        d = len(shape) - 2
        call = call_of(dml.unfold, zeros(shape, DTYPES[es]), [3] * d, [1] * d, [1] * d, [1] * d, [1] * d)
        spec = compare(call, shape, tuple(dml.packed_strides(shape)), es, 1 << 20, 1 << 20)
        if spec[0].startswith("unfold_tile"):
            seen.add(spec[0][-2])
    assert seen == {"0", "1"}


@pytest.mark.parametrize("case", [
    # every kernel kind and choice, so the properties above cannot pass on a route that always declines
    ("slice1", (1, 4, 16, 16), ([0, 0, 0, 0], [1, 4, 16, 16], [1, 1, -1, 1]), "strided_copy<uint4, 3, 0, u32, 1, 0>"),
    ("slice1", (4, 6), ([0, 0], [4, 6], [1, -1]), "strided_copy<u64, 2, 4, u32, 4, 0>"),   # reversed words
    ("slice1", (4, 5), ([0, 0], [4, 5], [1, -1]), "strided_copy<u32, 2, 0, u32, 4, 0>"),
    ("slice", (4, 16), ([0, 0], [4, 8], [1, 2]), "strided_copy<u64, 1, 0, u32, 4, 4>"),
    ("slice1", (3, 5), ([0, 0], [3, 5], [1, 3]), "strided_copy<u32, 2, 0, u32, 4, 0>"),
    ("unfold", (1, 4, 16, 16), (3, 1, 1, 1, 1), "unfold_tile<u32, 2, 1>"),   # 16-byte stores
    ("unfold", (1, 4, 15, 15), (3, 1, 1, 1, 1), "unfold_tile<u32, 2, 0>"),   # rows 900 bytes apart: one by one
    ("unfold", (2, 3, 64), ([9], [8], 1, 0, 1), "unfold1d_tile<u32, u32>"),
    ("unfold", (1, 2, 40, 40), (3, 20, 1, 0, 1), "unfold_gather<u32, 2, u32, 2>"),
    ("slice_grad", (2, 8), ([4, 8], [0, 0], [2, 8], [1, 1]), "scatter<uint4, 1, 0, u32, 1>"),
    ("slice_grad", (3, 5), ([3, 10], [0, 0], [3, 10], [1, 2]), "scatter<u32, 2, 0, u32, 4>"),
    ("fold", (1, 18, 20), ([4, 5], 3, 1, 1, 1, 1), "fold_gather<u32, 1, 2, u32, 1>"),
    ("fold", (2, 9, 3), ([20], [9], [8], 1, 4, 4), "fold_gather<u32, 1, 1, u32, 1>"),
    ("fold", (2, 9, 4), ([200], [9], [64], 1, 4, 4), "fold1d_tile<u32, 1, 64>"),
    ("fold", (1, 4, 191), ([384], [4], [2]), "fold_gather<u32, 1, 1, u32, 4>"),
])
def test_each_kernel_choice_is_made(case):
    name, shape, args, kernel = case
    fn = {"slice1": dml.slice1, "slice": dml.slice, "unfold": dml.unfold, "slice_grad": dml.slice_grad,
          "fold": dml.fold}[name]
    if name == "slice_grad":
        args = (args[0], *args[1:])
    call = call_of(fn, np.zeros(shape, np.float32), *args)
    strides = dml.packed_strides(shape)
    spec = compare(call, shape, tuple(strides), 4, 1 << 20, 1 << 20)
    assert spec is not None and spec[0] == kernel


def test_cuda_spec_declines_what_does_not_fit():
    spec = _native().cuda_spec
    fields = ((2, 3), (0, 0), (1, 1))
    assert spec(0, 4, (2, 3), (3, 1), fields, 0, 0)[0].startswith("strided_copy<")
    assert spec(0, 4, (2, 3), (3, 1), ((2, 3), (0, 0)), 0, 0) is None          # a field short
    assert spec(0, 4, (2, 3), (3, 1), ((2, 4), (0, 0), (1, 1)), 0, 0) is None  # reads past the input
    assert spec(0, 4, (2, 3), (3, 1), ((2, 3), (0, 1), (1, 1)), 0, 0) is None  # reads past the input
    assert spec(0, 4, (2, 3), (3, 1), ((2, 3), (0, -1), (1, 1)), 0, 0) is None  # reads before it
    assert spec(0, 4, (2, 3), (3, 1), ((2, 2), (0, 2), (1, -2)), 0, 0)[0]      # reversed, inside
    assert spec(1, 4, (1, 2, 5), (10, 5, 1), ((1, 6, 3), (3,), (1,), (1,), (0,), (3,)), 0, 0)[0]
    assert spec(1, 4, (1, 2, 5), (10, 5, 1), ((1, 6, 4), (3,), (1,), (1,), (0,), (3,)), 0, 0) is None  # not the output
    assert spec(2, 4, (2, 3), (3, 1), ((2, 6), (0, 0), (1, 2), (0, 0)), 0, 0)[0]
    assert spec(2, 4, (2, 3), (3, 1), ((2, 4), (0, 0), (1, 2), (0, 0)), 0, 0) is None  # writes past the output
    assert spec(0, 3, (2, 3), (3, 1), fields, 0, 0) is None                     # no 3-byte elements
    assert spec(4, 4, (2, 3), (3, 1), fields, 0, 0) is None                     # no such kernel
    assert spec(3, 4, (2, 3), (3, 1), fields, 0, 0) is None                     # FOLD's fields are six
    assert spec(0, 4, (2, 0), (3, 1), ((2, 0), (0, 0), (1, 1)), 0, 0) is None  # empty
    assert spec(0, 4, (2, 3), (3, 2), ((2, 3), (0, 0), (1, 2**62)), 0, 0) is None   # leaves 64 bits
    assert spec(0, 4, (2,) * 9, (1,) * 9, ((2,) * 9, (0,) * 9, (1,) * 9), 0, 0) is None
    assert spec(0, 4, (2, 3), (3, 1), ((2, 3), (0, True), (1, 1)), 0, 0) is None
