"""The DirectML flow and its binding rules."""
import numpy as np
import pytest

import opendml as dml

F32 = dml.DataType.FLOAT32
X = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)


def setup(backend="cpu", desc=None, level="6_4"):
    desc = desc or dml.Slice1OperatorDesc(dml.TensorDesc(F32, [1, 1, 4, 4]), None, [0, 0, 0, 1], [1, 1, 4, 3], [1, 1, -2, 2])
    device = dml.Device(backend, feature_level=level)
    compiled = device.compile_operator(device.create_operator(desc))
    return device, desc, compiled, device.create_binding_table(compiled)


def test_offsets_inside_a_larger_buffer_and_untouched_bytes(backend):
    device, desc, compiled, table = setup(backend)
    big = device.create_buffer(256)
    big.write(np.full(256, 0xAB, np.uint8))
    big.write(X, offset=32)
    table.bind_inputs([dml.BufferBinding(big, 32, 64)])
    table.bind_outputs([dml.BufferBinding(big, 128, 16)])
    device.execute(compiled, table)
    raw = big.read()
    assert np.array_equal(big.read(desc.output_tensor, offset=128), [[[[14, 16], [6, 8]]]])
    assert (raw[:32] == 0xAB).all() and (raw[96:128] == 0xAB).all() and (raw[144:] == 0xAB).all()


def test_padded_output_writes_only_its_elements(backend):
    out_t = dml.TensorDesc(F32, [1, 1, 2, 2], [16, 16, 8, 2])
    desc = dml.Slice1OperatorDesc(dml.TensorDesc(F32, [1, 1, 4, 4]), out_t, [0, 0, 0, 1], [1, 1, 4, 3], [1, 1, -2, 2])
    device, desc, compiled, table = setup(backend, desc)
    inp = device.upload(X)
    out = device.create_buffer(out_t.total_tensor_size_in_bytes)
    out.write(np.full(out.size_in_bytes // 4, -1.0, np.float32))
    table.bind_inputs([dml.BufferBinding(inp, 0, 64)])
    table.bind_outputs([dml.BufferBinding(out, 0, out.size_in_bytes)])
    device.execute(compiled, table)
    words = out.read().view(np.float32)
    assert list(words[[0, 2, 8, 10]]) == [14, 16, 6, 8]
    assert (np.delete(words, [0, 2, 8, 10]) == -1).all()


@pytest.mark.parametrize("make, message", [
    (lambda d, b: dml.BufferBinding(b, 8, 64), r"SLICE1: input 0 Offset must be a multiple of 16; got 8"),
    (lambda d, b: dml.BufferBinding(b, 16, 64), r"SLICE1: input 0 range must lie inside the buffer: Offset \+ SizeInBytes must be <= 64; got 16 \+ 64 = 80"),
    (lambda d, b: dml.BufferBinding(b, 0, 60), r"SLICE1: input 0 SizeInBytes must be >= the tensor's TotalTensorSizeInBytes 64; got 60"),
    (lambda d, b: dml.BufferBinding(dml.Device("cpu").create_buffer(64), 0, 64), r"SLICE1: input 0 binds a buffer of another device"),
])
def test_input_binding_rules(make, message):
    device, desc, compiled, table = setup()
    buf = device.create_buffer(64)
    with pytest.raises(dml.BindingError, match=message):
        table.bind_inputs([make(device, buf)])


def test_guaranteed_alignment_raises_the_offset_rule():
    t = dml.TensorDesc(F32, [1, 1, 4, 4], guaranteed_base_offset_alignment=64)
    device, desc, compiled, table = setup(desc=dml.SliceOperatorDesc(t, None, [0] * 4, [1, 1, 2, 2], [1] * 4))
    buf = device.create_buffer(256)
    with pytest.raises(dml.BindingError, match=r"SLICE: input 0 Offset must be a multiple of 64; got 32"):
        table.bind_inputs([dml.BufferBinding(buf, 32, 64)])
    table.bind_inputs([dml.BufferBinding(buf, 64, 64)])


def test_binding_counts_and_types():
    device, desc, compiled, table = setup()
    buf = device.create_buffer(64)
    with pytest.raises(dml.BindingError, match=r"SLICE1: the number of input bindings must equal the operator's input tensor count 1; got 2"):
        table.bind_inputs([dml.BufferBinding(buf), dml.BufferBinding(buf)])
    with pytest.raises(dml.BindingError, match=r"SLICE1: the number of output bindings must equal the operator's output tensor count 1; got 0"):
        table.bind_outputs([])
    with pytest.raises(dml.BindingError, match=r"SLICE1: output 0 must be bound to a BufferBinding; got None"):
        table.bind_outputs([None])
    with pytest.raises(dml.BindingError, match=r"BufferBinding: Buffer must be an opendml Buffer; got ndarray"):
        dml.BufferBinding(np.zeros(4))
    with pytest.raises(dml.BindingError, match=r"BufferBinding: Offset must be in \[0, 18446744073709551615\]; got -16"):
        dml.BufferBinding(buf, -16, 16)
    with pytest.raises(dml.BindingError, match=r"BufferBinding: Offset must be an integer; got 1.0"):
        dml.BufferBinding(buf, 1.0, 16)


def test_overlap_rules():
    device, desc, compiled, table = setup()
    buf = device.create_buffer(128)
    table.bind_inputs([dml.BufferBinding(buf, 0, 64)])
    with pytest.raises(dml.BindingError, match=r"SLICE1: input 0 bytes \[0, 64\) overlap output 0 bytes \[48, 64\) of the same buffer; SLICE1 does not run in place"):
        table.bind_outputs([dml.BufferBinding(buf, 48, 16)])
    with pytest.raises(dml.BindingError, match="overlap"):  # identical ranges too: no in-place
        table.bind_outputs([dml.BufferBinding(buf, 0, 64)])
    table.bind_outputs([dml.BufferBinding(buf, 64, 16)])


def test_execute_needs_bindings_and_its_own_table():
    device, desc, compiled, table = setup()
    with pytest.raises(dml.BindingError, match=r"SLICE1: bind inputs before executing"):
        device.execute(compiled, table)
    other = device.compile_operator(device.create_operator(desc))
    with pytest.raises(dml.BindingError, match="belongs to another compiled operator"):
        device.execute(other, table)


def test_create_operator_validates_against_the_device_level():
    desc = dml.UnfoldOperatorDesc(dml.TensorDesc(F32, [1, 1, 5, 5]), None, [3, 3], [1, 1], [1, 1], [0, 0], [0, 0])
    with pytest.raises(dml.UnsupportedError, match="UNFOLD: the operator was introduced in feature level 6_4; got feature level 6_3"):
        dml.Device("cpu", feature_level="6_3").create_operator(desc)


def test_owned_by_dml_input_is_bound_at_initialization():
    t = dml.TensorDesc(F32, [1, 1, 4, 4], flags=dml.TensorFlags.OWNED_BY_DML)
    desc = dml.SliceOperatorDesc(t, None, [0, 0, 1, 2], [1, 1, 3, 2], [1, 1, 1, 1])
    device, desc, compiled, table = setup(desc=desc)
    inp, out = device.upload(X), device.create_buffer(32)
    with pytest.raises(dml.BindingError, match="input 0 is OWNED_BY_DML: bind its data once with Device.initialize_operator"):
        table.bind_inputs([dml.BufferBinding(inp)])
    table.bind_inputs([None])
    table.bind_outputs([dml.BufferBinding(out)])
    with pytest.raises(dml.BindingError, match="call initialize_operator with its binding first"):
        device.execute(compiled, table)
    device.initialize_operator(compiled, [dml.BufferBinding(inp)])
    inp.write(np.zeros(16, np.float32))  # DirectML owns a copy now
    device.execute(compiled, table)
    assert np.array_equal(out.read(desc.output_tensor), [[[[7, 8], [11, 12], [15, 16]]]])


@pytest.mark.parametrize("size, message", [
    (0, r"create_buffer: size_in_bytes must be in \[1, 70368744177664\]; got 0"),
    (-5, r"got -5"), (2**62, r"got 4611686018427387904"), ("64", r"size_in_bytes must be an integer; got '64'"),
])
def test_create_buffer_refuses_bad_sizes(size, message):
    with pytest.raises(dml.ValidationError, match=message):
        dml.Device("cpu").create_buffer(size)


def test_device_kind_errors():
    with pytest.raises(dml.UnsupportedError, match="unknown device kind 'tpu'"):
        dml.Device("tpu")
    with pytest.raises(dml.UnsupportedError, match="kind must be 'cpu' or 'cuda'"):
        dml.Device(3)


def test_buffer_read_range_checked():
    device = dml.Device("cpu")
    buf = device.create_buffer(16)
    with pytest.raises(dml.BindingError, match=r"Buffer.read: bytes \[16, 80\) must lie inside the buffer of 16 bytes"):
        buf.read(dml.TensorDesc(F32, [4, 4]), offset=16)
