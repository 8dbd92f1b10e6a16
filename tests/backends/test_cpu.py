"""The CPU backend's two kernel sets (compiled, NumPy) on the layouts where the
compiled kernels take special paths: in-word reversal and stride 2 for small
elements (every run length around the 8-byte groups), thread splits, UNFOLD's
column tiles and shifted framing rows. Each result is
compared with the independent reference and with the other kernel set."""
import numpy as np
import pytest

import opendml as dml
from opendml.backends.numpy_backend import NumpyBackend
from tests import reference as ref
from tests.conftest import native_available

TYPES = [np.int8, np.float16, np.float32, np.float64]

needs_native = pytest.mark.skipif(not native_available(), reason="the compiled CPU kernels are not installed")

CONFIGS = {
    "default": dict(native=True),
    "threads": dict(native=True, threads=3, grain=1),
    "tiles": dict(native=True, threads=2, grain=1, tile_stride=0, tile_columns=5),
}


@pytest.fixture(params=list(CONFIGS))
def cpu(request, monkeypatch):
    from opendml import backends
    if not native_available():
        pytest.skip("the compiled CPU kernels are not installed")
    monkeypatch.setitem(backends._BACKENDS, "cpu", NumpyBackend(**CONFIGS[request.param]))
    return request.param


def numpy_result(fn, monkeypatch):
    from opendml import backends
    with monkeypatch.context() as m:
        m.setitem(backends._BACKENDS, "cpu", NumpyBackend(native=False))
        return fn()


def data(shape, dtype, seed=0):
    return np.random.default_rng(seed).integers(-100, 100, size=shape).astype(dtype)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("length", [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33])
def test_reversal_and_stride_two_every_run_length(cpu, dtype, length, monkeypatch):
    x = data((3, 2 * length + 1), dtype)
    for offsets, sizes, strides in (([0, 0], [3, length], [1, -1]), ([0, 1], [3, 2 * length], [1, -1]),
                                    ([0, 0], [3, 2 * length - 1], [1, 2]), ([0, 1], [3, 2 * length], [-1, 2]),
                                    ([0, 2], [3, 2 * length - 1], [1, -2]), ([0, 0], [3, 2 * length + 1], [1, 3])):
        out_sizes = [(w + abs(t) - 1) // abs(t) for w, t in zip(sizes, strides)]
        got = dml.slice1(x, offsets, sizes, strides)
        want = ref.slice1(x, offsets, sizes, strides, out_sizes)
        assert got.tobytes() == want.tobytes(), (offsets, sizes, strides)
        assert got.tobytes() == numpy_result(lambda: dml.slice1(x, offsets, sizes, strides), monkeypatch).tobytes()


def test_reversal_reads_only_the_window_at_the_end_of_memory(cpu):
    # The window ends at the array's last byte: an 8-byte group load that
    # overshot would read past it (the sanitizer-free check here is the
    # result; the group arithmetic is what the length test walks through).
    x = data(4096, np.int8)
    assert dml.slice1(x, [4096 - 37], [37], [-1]).tolist() == x[4096 - 37:][::-1].tolist()
    assert dml.slice1(x, [4096 - 73], [73], [2]).tolist() == x[4096 - 73::2].tolist()


@pytest.mark.parametrize("dtype", TYPES)
def test_large_copies_split_over_threads(cpu, dtype):
    x = data((5, 7, 300), dtype)
    assert np.array_equal(dml.slice(x, [1, 2, 3], [4, 5, 290], [1, 1, 1]), x[1:, 2:, 3:293])
    assert np.array_equal(dml.slice1(x, [0, 0, 0], [5, 7, 300], [-1, 2, -3]), x[::-1, ::2, ::-3])


UNFOLDS = [
    # (input shape, window, strides, dilations, start pad, end pad)
    ((2, 3, 9, 8), [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),          # "same" padding
    ((1, 2, 6, 7, 5), [3, 3, 3], [1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1]),
    ((2, 2, 10, 11), [3, 2], [1, 1], [2, 1], [2, 0], [2, 1]),        # dilation, uneven padding
    ((1, 2, 5, 5), [5, 5], [1, 1], [1, 1], [4, 4], [4, 4]),          # mostly padding
    ((2, 1, 300), [16], [4], [1], [0], [0]),                         # framing: shifted rows
    ((2, 2, 301), [12], [6], [2], [5], [3]),                         # framing with dilation, padding
    ((1, 3, 40), [7], [3], [2], [2], [2]),                           # dilation not dividing stride
    ((2, 2, 7, 30), [2, 6], [2, 3], [1, 1], [1, 2], [0, 2]),
]


@pytest.mark.parametrize("case", UNFOLDS, ids=lambda c: "x".join(map(str, c[0])))
@pytest.mark.parametrize("dtype", [np.int8, np.float32, np.float64])
def test_unfold_paths(cpu, case, dtype, monkeypatch):
    shape, w, s, d, a, b = case
    x = data(shape, dtype)
    got = dml.unfold(x, w, s, d, a, b)
    assert got.tobytes() == ref.unfold(x, w, s, d, a, b).tobytes()
    assert got.tobytes() == numpy_result(lambda: dml.unfold(x, w, s, d, a, b), monkeypatch).tobytes()


def test_unfold_on_reversed_input_view(cpu):
    x = data((1, 2, 12, 10), np.float32)
    v = x[:, :, ::-1, ::-1]
    assert np.array_equal(dml.unfold(v, 3, 1, 1, 1, 1), ref.unfold(np.ascontiguousarray(v), [3, 3], [1, 1],
                                                                   [1, 1], [1, 1], [1, 1]))


def test_kernels_can_be_forced_to_numpy(monkeypatch):
    monkeypatch.setenv("OPENDML_CPU_KERNELS", "numpy")
    assert NumpyBackend().kernels == "numpy"
    with pytest.raises(ImportError, match="compiled CPU kernels are not installed"):
        NumpyBackend(native=True)


@needs_native
def test_compiled_kernels_are_the_default_where_built():
    assert NumpyBackend().kernels == "compiled"


@pytest.mark.parametrize("kernels", ["compiled", "numpy"])
def test_window_element_entirely_in_padding_writes_only_its_column(kernels, monkeypatch):
    # Found by Hypothesis: window element 0 lies two blocks into the padding of
    # a one-block output; the NumPy path zeroed two columns, one past the row.
    from opendml import backends
    if kernels == "compiled" and not native_available():
        pytest.skip("the compiled CPU kernels are not installed")
    monkeypatch.setitem(backends._BACKENDS, "cpu", NumpyBackend(native=kernels == "compiled"))
    desc = dml.UnfoldOperatorDesc(dml.TensorDesc(dml.DataType.FLOAT32, [1, 1, 1, 1, 1]),
                                  dml.TensorDesc(dml.DataType.FLOAT32, [1, 2, 1], [4, 2, 1]),
                                  [2, 1, 1], [1, 1, 1], [2, 1, 1], [2, 0, 0], [0, 0, 0])
    dev = dml.Device("cpu")
    c = dev.compile_operator(dev.create_operator(desc))
    ib, ob = dev.upload(np.array([7.0], np.float32)), dev.create_buffer(16)
    ob.write(np.full(4, 9.0, np.float32))
    t = dev.create_binding_table(c)
    t.bind_inputs([dml.BufferBinding(ib)])
    t.bind_outputs([dml.BufferBinding(ob)])
    dev.execute(c, t)
    assert ob.read().view(np.float32).tolist() == [0.0, 9.0, 7.0, 9.0]
