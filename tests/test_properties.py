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

TYPES = [t for t in dml.DataType if t.value not in (0, 12, 13)]
SETTINGS = settings(max_examples=60, deadline=None,
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


@settings(max_examples=300, deadline=None)
@given(sizes=int_lists, offsets=int_lists, wins=int_lists, strides=int_lists, out=st.one_of(st.none(), int_lists))
def test_random_slice1_fields_never_crash(sizes, offsets, wins, strides, out):
    try:
        tin = dml.TensorDesc(dml.DataType.FLOAT32, sizes)
        tout = None if out is None else dml.TensorDesc(dml.DataType.FLOAT32, out)
        dml.Slice1OperatorDesc(tin, tout, offsets, wins, strides).validate("6_4")
    except dml.DmlError:
        pass


@settings(max_examples=300, deadline=None)
@given(sizes=int_lists, w=int_lists, s=int_lists, d=int_lists, sp=int_lists, ep=int_lists)
def test_random_unfold_fields_never_crash(sizes, w, s, d, sp, ep):
    try:
        dml.UnfoldOperatorDesc(dml.TensorDesc(dml.DataType.INT8, sizes), None, w, s, d, sp, ep).validate("6_4")
    except dml.DmlError:
        pass


@settings(max_examples=150, deadline=None)
@given(case=slice1_cases(), which=st.integers(0, 3), delta=st.integers(1, 5))
def test_out_of_range_windows_raise_validation_errors(case, which, delta):
    desc = case[0]
    sizes = desc.input_tensor.sizes
    i = which % len(sizes)
    offs, wins = list(desc.input_window_offsets), list(desc.input_window_sizes)
    offs[i] = sizes[i] - wins[i] + delta  # past the input's end
    with pytest.raises(dml.ValidationError, match=rf"SLICE1: InputWindowOffsets\[{i}\] \+ InputWindowSizes\[{i}\] must be <= InputTensor.Sizes\[{i}\]"):
        dml.Slice1OperatorDesc(desc.input_tensor, None, offs, wins, desc.input_window_strides)
