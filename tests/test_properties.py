"""Property tests: random valid descriptions of every data type, rank and
stride pattern, run by each backend through the device flow and compared with
the independent reference; random invalid ones must raise DmlError."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import opendml as dml
from tests import reference as ref
from .conftest import n_examples

TYPES = [t for t in dml.DataType if t.value not in (0, 12, 13)]
SETTINGS = settings(max_examples=n_examples(60), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@st.composite
def layouts(draw, sizes, allow_broadcast=True):
    """Strides in elements: packed, padded, permuted (NHWC-like), broadcast."""
    kind = draw(st.sampled_from(["none", "packed", "padded", "permuted"] + (["broadcast"] if allow_broadcast else [])))
    if kind == "none":
        return None
    order = list(range(len(sizes)))
    if kind == "permuted":
        order = draw(st.permutations(order))
    strides = [0] * len(sizes)
    step = 1
    for axis in reversed(order):
        strides[axis] = step
        step *= sizes[axis] + (draw(st.integers(0, 2)) if kind == "padded" else 0)
    if kind == "broadcast":
        strides = [0 if draw(st.booleans()) else s for s in strides]
    return strides


def run(backend, desc, x_logical, in_pad=0, out_pad=0, seed=0):
    """Execute through the device flow with the input at an aligned offset and a
    sentinel-filled output buffer; return (output, untouched output bytes ok)."""
    device = dml.Device(backend, feature_level="6_4")
    compiled = device.compile_operator(device.create_operator(desc))
    tin, tout = desc.input_tensor, desc.output_tensor
    inp = device.create_buffer(in_pad + tin.total_tensor_size_in_bytes + 16)
    scratch = dml.Device("cpu").create_buffer(tin.total_tensor_size_in_bytes)
    scratch.write(x_logical, tin)
    inp.write(scratch.read(), offset=in_pad)
    out = device.create_buffer(out_pad + tout.total_tensor_size_in_bytes + 16)
    fill = np.random.default_rng(seed).integers(0, 256, out.size_in_bytes, dtype=np.uint8)
    out.write(fill)
    table = device.create_binding_table(compiled)
    table.bind_inputs([dml.BufferBinding(inp, in_pad, tin.total_tensor_size_in_bytes)])
    table.bind_outputs([dml.BufferBinding(out, out_pad, tout.total_tensor_size_in_bytes)])
    device.execute(compiled, table)
    raw = out.read()
    got = ref.read_elements(raw[out_pad:].tobytes(), tout.data_type.numpy_dtype, list(tout.sizes),
                            None if tout.strides is None else list(tout.strides))
    # Bytes that are no element of the output tensor keep the sentinel.
    touched = np.zeros(out.size_in_bytes, bool)
    es = tout.element_size
    strides = tout.element_strides
    for idx in np.ndindex(*tout.sizes):
        b = out_pad + sum(i * s for i, s in zip(idx, strides)) * es
        touched[b:b + es] = True
    return got, bool((raw[~touched] == fill[~touched]).all())


def logical_input(dtype, sizes, rng):
    n = math.prod(sizes)
    if dtype.numpy_dtype.kind == "f":
        vals = rng.standard_normal(n).astype(dtype.numpy_dtype)
        vals[rng.integers(0, n)] = np.nan
        return vals.reshape(sizes)
    info = np.iinfo(dtype.numpy_dtype)
    return rng.integers(info.min, info.max, size=n, dtype=dtype.numpy_dtype, endpoint=True).reshape(sizes)


def same(a, b):
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def dedupe_broadcast(x, tensor):
    """With stride-0 inputs several logical elements share one location: the
    value stored there is what both the backend and the reference read."""
    raw = np.zeros(tensor.total_tensor_size_in_bytes, np.uint8)
    scratch = dml.Device("cpu").create_buffer(tensor.total_tensor_size_in_bytes)
    scratch.write(x, tensor)
    raw[:] = scratch.read()
    return ref.read_elements(raw.tobytes(), tensor.data_type.numpy_dtype, list(tensor.sizes),
                             None if tensor.strides is None else list(tensor.strides))


@st.composite
def slice1_cases(draw):
    rank = draw(st.integers(1, 8))
    sizes = [draw(st.integers(1, 4 if rank > 4 else 6)) for _ in range(rank)]
    dtype = draw(st.sampled_from(TYPES))
    offs, wins, strides, outs = [], [], [], []
    for s in sizes:
        o = draw(st.integers(0, s - 1)); w = draw(st.integers(1, s - o)); t = draw(st.sampled_from([-3, -2, -1, 1, 2, 3]))
        offs.append(o); wins.append(w); strides.append(t)
        outs.append(draw(st.integers(1, 1 + (w - 1) // abs(t))))
    tin = dml.TensorDesc(dtype, sizes, draw(layouts(sizes)))
    tout = dml.TensorDesc(dtype, outs, draw(layouts(outs, allow_broadcast=False)))
    return dml.Slice1OperatorDesc(tin, tout, offs, wins, strides), draw(st.integers(0, 3)) * 16, draw(st.integers(0, 3)) * 16


@SETTINGS
@given(case=slice1_cases(), seed=st.integers(0, 2**16))
def test_slice1_matches_reference(backend, case, seed):
    desc, in_pad, out_pad = case
    x = dedupe_broadcast(logical_input(desc.input_tensor.data_type, desc.input_tensor.sizes, np.random.default_rng(seed)),
                         desc.input_tensor)
    got, untouched = run(backend, desc, x, in_pad, out_pad, seed)
    want = ref.slice1(x, desc.input_window_offsets, desc.input_window_sizes, desc.input_window_strides,
                      desc.output_tensor.sizes)
    assert same(got, want) and untouched


@st.composite
def slice_cases(draw):
    rank = draw(st.integers(1, 8))
    sizes = [draw(st.integers(1, 4 if rank > 4 else 6)) for _ in range(rank)]
    dtype = draw(st.sampled_from(TYPES))
    offs, outs, strides = [], [], []
    for s in sizes:
        o = draw(st.integers(0, s - 1)); t = draw(st.integers(1, 3))
        offs.append(o); strides.append(t); outs.append(draw(st.integers(1, (s - 1 - o) // t + 1)))
    tin = dml.TensorDesc(dtype, sizes, draw(layouts(sizes)))
    tout = dml.TensorDesc(dtype, outs, draw(layouts(outs, allow_broadcast=False)))
    return dml.SliceOperatorDesc(tin, tout, offs, outs, strides)


@SETTINGS
@given(desc=slice_cases(), seed=st.integers(0, 2**16))
def test_slice_matches_reference(backend, desc, seed):
    x = dedupe_broadcast(logical_input(desc.input_tensor.data_type, desc.input_tensor.sizes, np.random.default_rng(seed)),
                         desc.input_tensor)
    got, untouched = run(backend, desc, x, 16, 32, seed)
    assert same(got, ref.slice_(x, desc.offsets, desc.sizes, desc.strides)) and untouched


@st.composite
def unfold_cases(draw):
    d = draw(st.integers(1, 3))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    spatial, w, s, dl, sp, ep = [], [], [], [], [], []
    for _ in range(d):
        w.append(draw(st.integers(1, 3))); dl.append(draw(st.integers(1, 2))); s.append(draw(st.integers(1, 3)))
        sp.append(draw(st.integers(0, 2))); ep.append(draw(st.integers(0, 2)))
        lo = max(1, dl[-1] * (w[-1] - 1) + 1 - sp[-1] - ep[-1])
        spatial.append(draw(st.integers(lo, lo + 4)))
    sizes = [n, c, *spatial]
    dtype = draw(st.sampled_from(TYPES))
    tin = dml.TensorDesc(dtype, sizes, draw(layouts(sizes)))
    probe = dml.UnfoldOperatorDesc(tin, None, w, s, dl, sp, ep)
    osz = list(probe.output_tensor.sizes)
    lead = draw(st.integers(0, len(sizes) - 3))
    osz = [1] * lead + osz
    tout = dml.TensorDesc(dtype, osz, draw(layouts(osz, allow_broadcast=False)))
    return dml.UnfoldOperatorDesc(tin, tout, w, s, dl, sp, ep)


@SETTINGS
@given(desc=unfold_cases(), seed=st.integers(0, 2**16))
def test_unfold_matches_reference(backend, desc, seed):
    x = dedupe_broadcast(logical_input(desc.input_tensor.data_type, desc.input_tensor.sizes, np.random.default_rng(seed)),
                         desc.input_tensor)
    got, untouched = run(backend, desc, x, 32, 16, seed)
    want = ref.unfold(x, desc.window_sizes, desc.strides, desc.dilations, desc.start_padding, desc.end_padding)
    assert same(got.reshape(want.shape), want) and untouched


# -- invalid descriptions ----------------------------------------------------------

ints = st.one_of(st.integers(-2**40, 2**40), st.integers(-3, 8), st.floats(allow_nan=True), st.none(),
                 st.text(max_size=2), st.booleans())
int_lists = st.one_of(st.lists(ints, max_size=9), ints)


@settings(max_examples=n_examples(150), deadline=None)
@given(sizes=int_lists, offsets=int_lists, wins=int_lists, strides=int_lists, out=st.one_of(st.none(), int_lists))
def test_random_slice1_fields_never_crash(sizes, offsets, wins, strides, out):
    try:
        tin = dml.TensorDesc(dml.DataType.FLOAT32, sizes)
        tout = None if out is None else dml.TensorDesc(dml.DataType.FLOAT32, out)
        dml.Slice1OperatorDesc(tin, tout, offsets, wins, strides).validate("6_4")
    except dml.DmlError:
        pass


@settings(max_examples=n_examples(150), deadline=None)
@given(sizes=int_lists, w=int_lists, s=int_lists, d=int_lists, sp=int_lists, ep=int_lists)
def test_random_unfold_fields_never_crash(sizes, w, s, d, sp, ep):
    try:
        dml.UnfoldOperatorDesc(dml.TensorDesc(dml.DataType.INT8, sizes), None, w, s, d, sp, ep).validate("6_4")
    except dml.DmlError:
        pass


@settings(max_examples=n_examples(150), deadline=None)
@given(case=slice1_cases(), which=st.integers(0, 3), delta=st.integers(1, 5))
def test_out_of_range_windows_raise_validation_errors(case, which, delta):
    desc = case[0]
    sizes = desc.input_tensor.sizes
    i = which % len(sizes)
    offs, wins = list(desc.input_window_offsets), list(desc.input_window_sizes)
    offs[i] = sizes[i] - wins[i] + delta  # past the input's end
    with pytest.raises(dml.ValidationError, match=rf"SLICE1: InputWindowOffsets\[{i}\] \+ InputWindowSizes\[{i}\] must be <= InputTensor.Sizes\[{i}\]"):
        dml.Slice1OperatorDesc(desc.input_tensor, None, offs, wins, desc.input_window_strides)


# -- FOLD and SLICE_GRAD -------------------------------------------------------------

def finite_input(dtype, sizes, rng):
    """Random elements: finite floats (FOLD adds them: NaN payloads are not
    compared), integers over the type's whole range (the sums wrap)."""
    n = math.prod(sizes)
    if dtype.numpy_dtype.kind == "f":
        return rng.standard_normal(n).astype(dtype.numpy_dtype).reshape(sizes)
    info = np.iinfo(dtype.numpy_dtype)
    return rng.integers(info.min, info.max, size=n, dtype=dtype.numpy_dtype, endpoint=True).reshape(sizes)


@st.composite
def window_params(draw, d, small=False):
    """(window, strides, dilations, start_padding, end_padding, spatial) of one
    UNFOLD/FOLD geometry; ``spatial`` is the image's (FOLD's output's) size."""
    w, s, dl, sp, ep, spatial = [], [], [], [], [], []
    for _ in range(d):
        w.append(draw(st.integers(1, 2 if small else 3))); dl.append(draw(st.integers(1, 2)))
        s.append(draw(st.integers(1, 3))); sp.append(draw(st.integers(0, 2))); ep.append(draw(st.integers(0, 2)))
        lo = max(1, dl[-1] * (w[-1] - 1) + 1 - sp[-1] - ep[-1])
        spatial.append(draw(st.integers(lo, lo + (2 if small else 4))))
    return w, s, dl, sp, ep, spatial


@st.composite
def fold_cases(draw, dtypes=TYPES):
    d = draw(st.integers(1, 3))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    w, s, dl, sp, ep, spatial = draw(window_params(d, small=d == 3))
    dtype = draw(st.sampled_from(dtypes))
    osz = [n, c, *spatial]
    tout = dml.TensorDesc(dtype, osz, draw(layouts(osz, allow_broadcast=False)))
    blocks = [(o + a + b - q * (k - 1) - 1) // t + 1 for o, k, t, q, a, b in zip(spatial, w, s, dl, sp, ep)]
    isz = [1] * draw(st.integers(0, d - 1)) + [n, c * math.prod(w), math.prod(blocks)]
    tin = dml.TensorDesc(dtype, isz, draw(layouts(isz)))
    return (dml.FoldOperatorDesc(tin, tout, w, s, dl, sp, ep), draw(st.integers(0, 3)) * 16,
            draw(st.integers(0, 3)) * 16)


def ref_fold(desc, x):
    return ref.fold(x, desc.output_tensor.sizes[2:], desc.window_sizes, desc.strides, desc.dilations,
                    desc.start_padding, desc.end_padding)


@SETTINGS
@given(case=fold_cases(), seed=st.integers(0, 2**16))
def test_fold_matches_reference(backend, case, seed):
    desc, in_pad, out_pad = case
    x = dedupe_broadcast(finite_input(desc.input_tensor.data_type, desc.input_tensor.sizes,
                                      np.random.default_rng(seed)), desc.input_tensor)
    got, untouched = run(backend, desc, x, in_pad, out_pad, seed)
    assert same(got, ref_fold(desc, x)) and untouched


@st.composite
def slice_grad_cases(draw, dtypes=TYPES):
    """A SLICE1 geometry read backwards: output gradient = SLICE1's input sizes,
    input gradient = SLICE1's output sizes (up to every reachable element)."""
    rank = draw(st.integers(1, 8))
    sizes = [draw(st.integers(1, 4 if rank > 4 else 6)) for _ in range(rank)]
    dtype = draw(st.sampled_from(dtypes))
    offs, wins, strides, gs = [], [], [], []
    for s in sizes:
        o = draw(st.integers(0, s - 1)); w = draw(st.integers(1, s - o)); t = draw(st.sampled_from([-3, -2, -1, 1, 2, 3]))
        offs.append(o); wins.append(w); strides.append(t)
        gs.append(draw(st.integers(1, 1 + (w - 1) // abs(t))))
    tg = dml.TensorDesc(dtype, gs, draw(layouts(gs)))
    tout = dml.TensorDesc(dtype, sizes, draw(layouts(sizes, allow_broadcast=False)))
    return (dml.SliceGradOperatorDesc(tg, tout, offs, wins, strides), draw(st.integers(0, 3)) * 16,
            draw(st.integers(0, 3)) * 16)


def ref_slice_grad(desc, g):
    return ref.slice_grad(g, desc.output_tensor.sizes, desc.input_window_offsets, desc.input_window_sizes,
                          desc.input_window_strides)


@SETTINGS
@given(case=slice_grad_cases(), seed=st.integers(0, 2**16))
def test_slice_grad_matches_reference(backend, case, seed):
    desc, in_pad, out_pad = case
    g = dedupe_broadcast(logical_input(desc.input_tensor.data_type, desc.input_tensor.sizes,
                                       np.random.default_rng(seed)), desc.input_tensor)
    got, untouched = run(backend, desc, g, in_pad, out_pad, seed)
    assert same(got, ref_slice_grad(desc, g)) and untouched


# The lowering alone, through the plan executors of tests/reference.py: these
# need no backend, so they pin the plans whatever the kernels do.

def bound_words(desc, x, pad):
    """The input as a backend sees it: element-sized words of the bound range
    (the tensor's bytes after ``pad`` bytes of other data)."""
    t = desc.input_tensor
    scratch = dml.Device("cpu").create_buffer(t.total_tensor_size_in_bytes)
    scratch.write(x, t)
    raw = np.concatenate([np.full(pad, 0xA5, np.uint8), scratch.read()])
    word = np.dtype(f"u{t.element_size}")
    return raw[pad:].view(word)


def run_plan(desc, plan, src_words, out_pad, seed):
    """Run a plan by the reference executor into a sentinel-filled output range;
    (output elements, untouched bytes ok)."""
    tout = desc.output_tensor
    word = np.dtype(f"u{tout.element_size}")
    fill = np.random.default_rng(seed).integers(0, 256, out_pad + tout.total_tensor_size_in_bytes + 16, dtype=np.uint8)
    raw = fill.copy()
    dst = raw[out_pad:out_pad + tout.total_tensor_size_in_bytes // tout.element_size * tout.element_size].view(word)
    (ref.run_fold_plan if isinstance(desc, dml.FoldOperatorDesc) else ref.run_scatter_plan)(plan, src_words, dst)
    got = ref.read_elements(raw[out_pad:].tobytes(), tout.data_type.numpy_dtype, list(tout.sizes),
                            None if tout.strides is None else list(tout.strides))
    touched = np.zeros(raw.size, bool)
    es = tout.element_size
    for idx in np.ndindex(*tout.sizes):
        b = out_pad + sum(i * s for i, s in zip(idx, tout.element_strides)) * es
        touched[b:b + es] = True
    return got, bool((raw[~touched] == fill[~touched]).all())


@settings(max_examples=n_examples(120), deadline=None)
@given(case=fold_cases(), seed=st.integers(0, 2**16))
def test_fold_plan_matches_reference(case, seed):
    desc, in_pad, out_pad = case
    x = dedupe_broadcast(finite_input(desc.input_tensor.data_type, desc.input_tensor.sizes,
                                      np.random.default_rng(seed)), desc.input_tensor)
    plan = desc.lower().kernel_plan()
    src = bound_words(desc, x, in_pad)
    lo, hi = plan.in_span
    assert 0 <= lo and hi < src.size and plan.out_span[0] >= 0
    got, untouched = run_plan(desc, plan, src, out_pad, seed)
    assert same(got, ref_fold(desc, x)) and untouched


@settings(max_examples=n_examples(120), deadline=None)
@given(case=slice_grad_cases(), seed=st.integers(0, 2**16))
def test_slice_grad_plan_matches_reference(case, seed):
    desc, in_pad, out_pad = case
    g = dedupe_broadcast(logical_input(desc.input_tensor.data_type, desc.input_tensor.sizes,
                                       np.random.default_rng(seed)), desc.input_tensor)
    plan = desc.lower().kernel_plan()
    src = bound_words(desc, g, in_pad)
    lo, hi = plan.in_span
    assert 0 <= lo and hi < src.size
    got, untouched = run_plan(desc, plan, src, out_pad, seed)
    assert same(got, ref_slice_grad(desc, g)) and untouched


def array_words(x):
    """What the array API hands a backend for a NumPy array: its layout (signed
    element strides, origin) and the words from its lowest-addressed element."""
    from opendml.arrays.planner import array_layout
    layout = array_layout(x.shape, x.strides, x.itemsize)
    low = x[tuple(slice(None, None, -1) if f else slice(None) for f in layout.flips)]
    words = np.lib.stride_tricks.as_strided(low.view(f"u{x.itemsize}"), shape=(layout.span,),
                                            strides=(x.itemsize,))
    return layout, words


@st.composite
def numpy_views(draw, base_shape, dtype):
    """A view of a larger array with ``base_shape``: random steps (negative
    included) and axis order, so its strides are signed and non-packed."""
    rank = len(base_shape)
    steps = [draw(st.sampled_from([-2, -1, 1, 2])) for _ in range(rank)]
    order = draw(st.permutations(range(rank)))
    big = [s * abs(t) for s, t in zip(base_shape, steps)]
    perm_big = [big[a] for a in order]
    seed = draw(st.integers(0, 2**16))
    parent = finite_input(dml.DataType.from_numpy(dtype), perm_big, np.random.default_rng(seed))
    parent = parent.transpose(np.argsort(order))          # axis i now has size big[i]
    return parent[tuple(slice(None, None, t) for t in steps)]


@settings(max_examples=n_examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_lowering_with_numpy_layouts(data):
    """``lower(in_strides, in_offset)`` as the planner calls it, on views with
    negative and non-packed strides, through the plan executors."""
    if data.draw(st.booleans()):
        desc = data.draw(fold_cases())[0]
        view = data.draw(numpy_views(desc.input_tensor.sizes, desc.input_tensor.data_type.numpy_dtype))
        want = ref_fold(desc, np.array(view))
    else:
        desc = data.draw(slice_grad_cases())[0]
        view = data.draw(numpy_views(desc.input_tensor.sizes, desc.input_tensor.data_type.numpy_dtype))
        want = ref_slice_grad(desc, np.array(view))
    packed = type(desc)(dml.TensorDesc(desc.input_tensor.data_type, desc.input_tensor.sizes),
                        dml.TensorDesc(desc.output_tensor.data_type, desc.output_tensor.sizes),
                        *(getattr(desc, f.attr) for f in desc.FIELDS))
    layout, words = array_words(view)
    plan = packed.lower(in_strides=layout.strides, in_offset=layout.origin).kernel_plan()
    assert plan.in_span == (0, layout.span - 1)          # every element read, none outside
    got, _ = run_plan(packed, plan, words, 0, 0)
    assert same(got, want)


# -- adjoint identities, in float64 on integer values (every product and sum exact)

def integer_valued(sizes, rng):
    return rng.integers(-50, 51, size=sizes).astype(np.float64)


@st.composite
def unfold_fold_pairs(draw):
    d = draw(st.integers(1, 3))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    w, s, dl, sp, ep, spatial = draw(window_params(d, small=d == 3))
    image = dml.TensorDesc(dml.DataType.FLOAT64, [n, c, *spatial])
    unfold = dml.UnfoldOperatorDesc(image, None, w, s, dl, sp, ep)
    fold = dml.FoldOperatorDesc(unfold.output_tensor, image, w, s, dl, sp, ep)
    return unfold, fold


@SETTINGS
@given(pair=unfold_fold_pairs(), seed=st.integers(0, 2**16))
def test_fold_is_the_adjoint_of_unfold(backend, pair, seed):
    unfold, fold = pair
    rng = np.random.default_rng(seed)
    x, y = integer_valued(unfold.input_tensor.sizes, rng), integer_valued(unfold.output_tensor.sizes, rng)
    device = dml.Device(backend, feature_level="6_4")
    ux, fy = device.run(unfold, x), device.run(fold, y)
    assert np.vdot(ux, y) == np.vdot(x, fy)


@settings(max_examples=n_examples(100), deadline=None)
@given(pair=unfold_fold_pairs(), seed=st.integers(0, 2**16))
def test_reference_fold_is_the_adjoint_of_reference_unfold(pair, seed):
    unfold, fold = pair
    rng = np.random.default_rng(seed)
    x, y = integer_valued(unfold.input_tensor.sizes, rng), integer_valued(unfold.output_tensor.sizes, rng)
    args = (unfold.window_sizes, unfold.strides, unfold.dilations, unfold.start_padding, unfold.end_padding)
    assert np.vdot(ref.unfold(x, *args), y) == np.vdot(x, ref.fold(y, unfold.input_tensor.sizes[2:], *args))


def slice1_of(desc):
    """The SLICE1 whose adjoint ``desc`` (a SLICE_GRAD) is."""
    return dml.Slice1OperatorDesc(desc.output_tensor, desc.input_tensor, desc.input_window_offsets,
                                  desc.input_window_sizes, desc.input_window_strides)


@SETTINGS
@given(case=slice_grad_cases(dtypes=[dml.DataType.FLOAT64]), seed=st.integers(0, 2**16))
def test_slice_grad_is_the_adjoint_of_slice1(backend, case, seed):
    grad = case[0]
    grad = dml.SliceGradOperatorDesc(dml.TensorDesc(grad.input_tensor.data_type, grad.input_tensor.sizes),
                                     dml.TensorDesc(grad.output_tensor.data_type, grad.output_tensor.sizes),
                                     grad.input_window_offsets, grad.input_window_sizes, grad.input_window_strides)
    fwd = slice1_of(grad)
    rng = np.random.default_rng(seed)
    x, g = integer_valued(grad.output_tensor.sizes, rng), integer_valued(grad.input_tensor.sizes, rng)
    device = dml.Device(backend, feature_level="6_4")
    sg = device.run(grad, g)
    assert np.vdot(device.run(fwd, x), g) == np.vdot(x, sg)
    assert same(device.run(fwd, sg), g)                          # slice1(slice_grad(g)) == g


@settings(max_examples=n_examples(100), deadline=None)
@given(case=slice_grad_cases(dtypes=[dml.DataType.FLOAT64]), seed=st.integers(0, 2**16))
def test_reference_slice_grad_is_the_adjoint_of_reference_slice1(case, seed):
    grad = case[0]
    rng = np.random.default_rng(seed)
    x, g = integer_valued(grad.output_tensor.sizes, rng), integer_valued(grad.input_tensor.sizes, rng)
    window = (grad.input_window_offsets, grad.input_window_sizes, grad.input_window_strides)
    sg = ref_slice_grad(grad, g)
    assert np.vdot(ref.slice1(x, *window, g.shape), g) == np.vdot(x, sg)
    assert same(ref.slice1(sg, *window, g.shape), g)


# -- invalid FOLD and SLICE_GRAD descriptions ------------------------------------------

@settings(max_examples=n_examples(150), deadline=None)
@given(sizes=int_lists, out=st.one_of(st.none(), int_lists), w=int_lists, s=int_lists, d=int_lists, sp=int_lists,
       ep=int_lists)
def test_random_fold_fields_never_crash(sizes, out, w, s, d, sp, ep):
    try:
        tout = None if out is None else dml.TensorDesc(dml.DataType.INT8, out)
        dml.FoldOperatorDesc(dml.TensorDesc(dml.DataType.INT8, sizes), tout, w, s, d, sp, ep).validate("6_4")
    except dml.DmlError:
        pass


@settings(max_examples=n_examples(150), deadline=None)
@given(sizes=int_lists, out=st.one_of(st.none(), int_lists), offsets=int_lists, wins=int_lists, strides=int_lists)
def test_random_slice_grad_fields_never_crash(sizes, out, offsets, wins, strides):
    try:
        tout = None if out is None else dml.TensorDesc(dml.DataType.FLOAT16, out)
        dml.SliceGradOperatorDesc(dml.TensorDesc(dml.DataType.FLOAT16, sizes), tout, offsets, wins,
                                  strides).validate("3_0")
    except dml.DmlError:
        pass


@settings(max_examples=n_examples(150), deadline=None)
@given(case=fold_cases(), which=st.sampled_from(["n", "rows", "blocks", "lead"]), delta=st.integers(1, 5))
def test_wrong_fold_input_sizes_raise_validation_errors(case, which, delta):
    desc = case[0]
    sizes = list(desc.input_tensor.sizes)
    r = len(sizes)
    if which == "lead":
        sizes = [1 + delta] + sizes
        pattern = r"FOLD: InputTensor.Sizes\[0\] must be 1" if r < desc.output_tensor.rank else \
            r"FOLD: InputTensor.DimensionCount must be in \[3, OutputTensor.DimensionCount"
    else:
        i = {"n": r - 3, "rows": r - 2, "blocks": r - 1}[which]
        sizes[i] += delta
        pattern = {"n": rf"FOLD: InputTensor.Sizes\[{i}\] \(N\) must equal OutputTensor.Sizes\[0\]",
                   "rows": rf"FOLD: InputTensor.Sizes\[{i}\] must equal C x prod\(WindowSizes\)",
                   "blocks": rf"FOLD: InputTensor.Sizes\[{i}\] must equal BlockCount"}[which]
    with pytest.raises(dml.ValidationError, match=pattern):
        dml.FoldOperatorDesc(dml.TensorDesc(desc.input_tensor.data_type, sizes), desc.output_tensor,
                             desc.window_sizes, desc.strides, desc.dilations, desc.start_padding, desc.end_padding)


@settings(max_examples=n_examples(150), deadline=None)
@given(case=slice_grad_cases(), which=st.integers(0, 7), delta=st.integers(1, 5), grow=st.booleans())
def test_out_of_range_slice_grad_windows_raise_validation_errors(case, which, delta, grow):
    desc = case[0]
    sizes = desc.output_tensor.sizes
    i = which % len(sizes)
    offs, wins = list(desc.input_window_offsets), list(desc.input_window_sizes)
    if grow:   # an input gradient larger than the window yields
        gs = list(desc.input_tensor.sizes)
        gs[i] = 1 + (wins[i] - 1) // abs(desc.input_window_strides[i]) + delta
        with pytest.raises(dml.ValidationError, match=rf"SLICE_GRAD: InputGradientTensor.Sizes\[{i}\] must be in"):
            dml.SliceGradOperatorDesc(dml.TensorDesc(desc.input_tensor.data_type, gs), desc.output_tensor, offs, wins,
                                      desc.input_window_strides)
        return
    offs[i] = sizes[i] - wins[i] + delta  # past the output gradient's end
    with pytest.raises(dml.ValidationError, match=rf"SLICE_GRAD: InputWindowOffsets\[{i}\] \+ InputWindowSizes\[{i}\] "
                                                  rf"must be <= OutputGradientTensor.Sizes\[{i}\]"):
        dml.SliceGradOperatorDesc(desc.input_tensor, desc.output_tensor, offs, wins, desc.input_window_strides)


# -- the array API: dml.fold and dml.slice_grad on any NumPy layout ---------------------

def api_input(backend, x):
    """``x`` for the array API on ``backend``: NumPy on the CPU, CuPy on CUDA."""
    if backend == "cuda":
        return pytest.importorskip("cupy").asarray(x)
    return x


def api_output(y):
    return y.get() if type(y).__module__.startswith("cupy") else y


@SETTINGS
@given(data=st.data())
def test_array_api_fold_any_numpy_layout(backend, data):
    desc = data.draw(fold_cases())[0]
    n, rows, blocks = desc.input_tensor.sizes[-3:]
    view = data.draw(numpy_views((n, rows, blocks), desc.input_tensor.data_type.numpy_dtype))
    spatial = list(desc.output_tensor.sizes[2:])
    args = (desc.window_sizes, desc.strides, desc.dilations, desc.start_padding, desc.end_padding)
    got = api_output(dml.fold(api_input(backend, view), spatial, *args))
    assert got.flags.c_contiguous and same(got, ref.fold(np.array(view), spatial, *args))


@SETTINGS
@given(data=st.data())
def test_array_api_slice_grad_any_numpy_layout(backend, data):
    desc = data.draw(slice_grad_cases())[0]
    view = data.draw(numpy_views(desc.input_tensor.sizes, desc.input_tensor.data_type.numpy_dtype))
    window = (desc.input_window_offsets, desc.input_window_sizes, desc.input_window_strides)
    got = api_output(dml.slice_grad(api_input(backend, view), list(desc.output_tensor.sizes), *window))
    assert got.flags.c_contiguous and same(got, ref.slice_grad(np.array(view), desc.output_tensor.sizes, *window))


def coverage(spatial, window, strides, dilations, start_pad, end_pad):
    """How many (window element, block) pairs land on each image position:
    a product over dimensions of per-dimension counts."""
    per_dim = []
    for size, w, st_, dl, sp, ep in zip(spatial, window, strides, dilations, start_pad, end_pad):
        blocks = (size + sp + ep - dl * (w - 1) - 1) // st_ + 1
        counts = np.zeros(size, np.int64)
        for b in range(blocks):
            for k in range(w):
                p = b * st_ + k * dl - sp
                if 0 <= p < size:
                    counts[p] += 1
        per_dim.append(counts)
    return math.prod(np.ix_(*per_dim)) if len(per_dim) > 1 else per_dim[0]


@SETTINGS
@given(pair=unfold_fold_pairs(), seed=st.integers(0, 2**16))
def test_array_api_fold_of_unfold_is_coverage_times_x(backend, pair, seed):
    unfold = pair[0]
    x = integer_valued(unfold.input_tensor.sizes, np.random.default_rng(seed))
    args = (unfold.window_sizes, unfold.strides, unfold.dilations, unfold.start_padding, unfold.end_padding)
    spatial = list(unfold.input_tensor.sizes[2:])
    got = api_output(dml.fold(dml.unfold(api_input(backend, x), *args), spatial, *args))
    assert np.array_equal(got, x * coverage(spatial, *args))


def test_array_api_fold_scalars_and_errors():
    x = np.arange(36, dtype=np.float32).reshape(1, 9, 4)
    want = ref.fold(x, [4, 4], [3, 3], [1, 1], [1, 1], [0, 0], [0, 0])
    assert np.array_equal(dml.fold(x, [4, 4], 3), want)
    assert np.array_equal(dml.fold(x, 4, [3, 3]), want)
    with pytest.raises(dml.ValidationError, match=r"^FOLD: InputTensor.Sizes\[1\] must be C x prod\(WindowSizes\), a "
                                                  r"multiple of prod\(WindowSizes\) = 4 \(x.shape\[-2\], window_sizes\); "
                                                  r"got 9 \(shape \[1, 9, 4\]\)$"):
        dml.fold(x, [4, 4], 2)
    with pytest.raises(dml.ValidationError, match=r"^fold: x must have 3 to 8 dimensions for FOLD; got 2 "
                                                  r"\(shape \[9, 4\]\)$"):
        dml.fold(x[0], [4, 4], 3)
    with pytest.raises(dml.ValidationError, match=r"FOLD: WindowSizes\[1\] must be in \[1, 4294967295\]; got 0"):
        dml.fold(x, [4, 4], [3, 0])
    with pytest.raises(dml.ValidationError, match=r"FOLD: InputTensor.Sizes\[2\] must equal BlockCount = 2 x 2 = 4"):
        dml.fold(x[..., :3], [4, 4], 3)


def test_array_api_slice_grad_errors():
    g = np.ones((2, 2), np.int32)
    with pytest.raises(dml.ValidationError, match=r"SLICE_GRAD: InputWindowOffsets\[0\] \+ InputWindowSizes\[0\] "
                                                  r"must be <= OutputGradientTensor.Sizes\[0\]; got 3 \+ 2 > 4"):
        dml.slice_grad(g, [4, 4], [3, 0], [2, 2], [1, 1])
    with pytest.raises(dml.ValidationError, match=r"SLICE_GRAD: OutputGradientTensor.DimensionCount must equal "
                                                  r"InputGradientTensor.DimensionCount; got 3 != 2"):
        dml.slice_grad(g, [1, 4, 4], [0, 0], [2, 2], [1, 1])


# -- FOLD's sums, pinned: three values on one output element, in window order k = 0, 1, 2

def fold_three(backend, dtype, values):
    """A 1-D fold whose one output element receives exactly ``values`` (as
    window elements 0, 1, 2 of blocks 2, 1, 0)."""
    x = np.zeros((1, 3, 3), dtype)
    x[0, 0, 2], x[0, 1, 1], x[0, 2, 0] = values
    t = dml.DataType.from_numpy(dtype)
    desc = dml.FoldOperatorDesc(dml.TensorDesc(t, [1, 3, 3]), dml.TensorDesc(t, [1, 1, 1]), [3], [1], [1], [2], [2])
    got = dml.Device(backend, feature_level="6_4").run(desc, x)
    assert same(got, ref_fold(desc, x))
    return got.reshape(())


@pytest.mark.parametrize("dtype, values, want", [
    (np.float16, (2048, 1, 1), 2050),            # float32 sum, rounded once (float16 steps would give 2048)
    (np.float32, (1e8, -1e8, 1), 1),             # increasing k: (1e8 - 1e8) + 1; the reverse order gives 0
    (np.float64, (2.0**60, -(2.0**60), 1), 1),
    (np.int8, (100, 100, 100), 44),              # 300 wraps
    (np.uint64, (2**64 - 1, 1, 1), 1),
    (np.int64, (2**63 - 1, 1, 0), -2**63),
], ids=["float16-in-float32", "float32-order", "float64-order", "int8-wraps", "uint64-wraps", "int64-wraps"])
def test_fold_sums_are_pinned(backend, dtype, values, want):
    assert fold_three(backend, dtype, values) == np.array(want, dtype)


def test_fold_sum_starts_at_positive_zero(backend):
    got = fold_three(backend, np.float32, (-0.0, -0.0, -0.0))
    assert got.tobytes() == np.float32(0.0).tobytes()       # +0 + -0 == +0: the sum starts at +0
