"""The CPU backend's two kernel sets (compiled, NumPy) on the layouts where the
compiled kernels take special paths: in-word reversal and stride 2 for small
elements (every run length around the 8-byte groups), thread splits, UNFOLD's
column tiles and shifted framing rows. Each result is
compared with the independent reference and with the other kernel set."""
import numpy as np
import pytest

import opendml as dml
from tests import reference as ref
from tests.conftest import native_available

TYPES = [np.int8, np.float16, np.float32, np.float64]

needs_native = pytest.mark.skipif(not native_available(), reason="the compiled CPU kernels are not installed")

CONFIGS = {
    "default": dict(cpu_kernels="compiled"),
    "threads": dict(cpu_kernels="compiled", threads=3, thread_grain_bytes=1),
    "tiles": dict(cpu_kernels="compiled", threads=2, thread_grain_bytes=1, unfold_tile_stride=0,
                  unfold_tile_columns=5),
}


@pytest.fixture(params=list(CONFIGS))
def cpu(request):
    if not native_available():
        pytest.skip("the compiled CPU kernels are not installed")
    with dml.configure(**CONFIGS[request.param]):
        yield request.param


def numpy_result(fn, monkeypatch=None):
    with dml.configure(cpu_kernels="numpy"):
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


def test_kernels_can_be_forced_to_numpy():
    with dml.configure(cpu_kernels="numpy") as cfg:
        assert cfg.cpu_kernels == "numpy" and dml.config().cpu_kernels == "numpy"
    assert dml.config().cpu_kernels == ("compiled" if native_available() else "numpy")


@needs_native
def test_compiled_kernels_are_the_default_where_built():
    assert dml.config().cpu_kernels == "compiled"


@pytest.mark.parametrize("kernels", ["compiled", "numpy"])
def test_window_element_entirely_in_padding_writes_only_its_column(kernels):
    # Found by Hypothesis: window element 0 lies two blocks into the padding of
    # a one-block output; the NumPy path zeroed two columns, one past the row.
    if kernels == "compiled" and not native_available():
        pytest.skip("the compiled CPU kernels are not installed")
    restore = dml.configure(cpu_kernels=kernels)
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
    with restore:
        assert ob.read().view(np.float32).tolist() == [0.0, 9.0, 7.0, 9.0]


@pytest.fixture
def cache():
    """The compiled backend with an empty output cache; restores the settings."""
    if not native_available():
        pytest.skip("the compiled CPU kernels are not installed")
    with dml.configure(cpu_kernels="compiled", output_cache_bytes=0):
        dml.configure(output_cache_bytes=64 << 20)
        yield


@needs_native
def test_released_outputs_are_reused_and_fully_rewritten(cache):
    x = np.arange(4 * 8 * 40 * 40, dtype=np.float32).reshape(4, 8, 40, 40)
    first = dml.unfold(x, 3, 1, 1, 1, 1)
    first[...] = np.nan                      # stale contents must not survive into the next output
    address = first.ctypes.data
    del first
    info = dml.cpu_output_cache()
    assert info["blocks"] == 1 and info["bytes"] >= 4 * 72 * 1600 * 4
    again = dml.unfold(x, 3, 1, 1, 1, 1)
    assert again.ctypes.data == address and dml.cpu_output_cache()["hits"] == info["hits"] + 1
    assert np.array_equal(again, ref.unfold(x, [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]))
    s = dml.slice(np.zeros((4, 8, 200, 200), np.float32) + 1, [0, 0, 0, 0], [4, 8, 180, 180], [1, 1, 1, 1])
    assert s.ctypes.data != address          # `again` is alive: its block is not handed out twice
    assert again.flags.writeable and s.flags.writeable and np.all(s == 1)


@needs_native
def test_a_live_view_keeps_its_block_out_of_the_cache(cache):
    x = np.ones((2, 4, 256, 256), np.float32)
    out = dml.slice(x, [0, 0, 0, 0], [2, 4, 250, 250], [1, 1, 1, 1])
    view = out[1, 2]
    del out
    assert dml.cpu_output_cache()["blocks"] == 0
    other = dml.slice(x * 2, [0, 0, 0, 0], [2, 4, 250, 250], [1, 1, 1, 1])
    assert not np.shares_memory(view, other) and np.all(view == 1) and np.all(other == 2)
    del view
    assert dml.cpu_output_cache()["blocks"] == 1


@needs_native
def test_cache_limit_bounds_what_is_kept(cache):
    x = np.ones((1, 1, 1024, 1024), np.float32)
    outs = [dml.slice(x, [0, 0, 0, 0], [1, 1, 1024 - i, 1024], [1, 1, 1, 1]) for i in range(3)]
    dml.cpu_output_cache(5 << 20)            # room for one 4 MiB block
    del outs
    info = dml.cpu_output_cache()
    assert info["blocks"] == 1 and info["bytes"] <= 5 << 20
    assert dml.cpu_output_cache(0)["blocks"] == 0      # 0 frees what is held and keeps nothing
    small = dml.slice(np.ones((4, 4), np.float32), [0, 0], [2, 2], [1, 1])
    assert small.flags.owndata                          # small outputs are plain np.empty arrays


@needs_native
def test_cached_outputs_are_visible_to_tracemalloc(cache):
    import tracemalloc
    x = np.ones((1, 1, 1024, 1024), np.float32)
    tracemalloc.start()
    try:
        out = dml.slice(x, [0, 0, 0, 0], [1, 1, 1024, 1024], [1, 1, 1, 1])
        assert tracemalloc.get_traced_memory()[0] >= out.nbytes
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("bad", [-1, 2**62 + 1, 2**63, 2**64])
def test_cache_limit_must_be_a_byte_count(bad):
    # the function's own argument is named, not configure's setting it passes the limit on to
    with pytest.raises(dml.ValidationError, match=r"^cpu_output_cache: limit must be in \[0, 4611686018427387904\] "
                                                  rf"\(bytes\) or None; got {bad}$"):
        dml.cpu_output_cache(bad)


@pytest.mark.parametrize("bad", [1.5, "1", True, None.__class__])
def test_cache_limit_must_be_an_int(bad):
    with pytest.raises(TypeError, match="cpu_output_cache: limit must be an int"):
        dml.cpu_output_cache(bad)


def test_cache_limit_accepts_numpy_integers():
    with dml.configure():
        assert dml.cpu_output_cache(np.uint64(4096))["limit"] == (4096 if native_available() else 0)


@needs_native
@pytest.mark.parametrize("dtype", ["int8", "float16", "float32", "float64"])
def test_streaming_stores_give_the_same_bytes(dtype):
    # Streaming stores are used from 8 MiB of output; force them on for small
    # copies with every head/tail alignment and compare with NumPy's result.
    from opendml.runtime.cpu import _native
    old = _native.stream_min(0)
    try:
        with dml.configure(cpu_kernels="compiled", threads=2, thread_grain_bytes=1):
            x = np.random.default_rng(5).integers(-100, 100, (3, 5, 37, 41)).astype(dtype)
            for lo in range(0, 6):
                for width in (1, 7, 16, 33, 41 - lo):
                    got = dml.slice(x, [0, 1, lo, lo], [3, 4, 30, width], [1, 1, 1, 1])
                    assert got.tobytes() == np.ascontiguousarray(x[:, 1:5, lo:lo + 30, lo:lo + width]).tobytes()
            got = dml.slice1(x, [0, 0, 0, 0], [3, 5, 37, 41], [1, -1, 1, -1])
            assert got.tobytes() == np.ascontiguousarray(x[:, ::-1, :, ::-1]).tobytes()
    finally:
        _native.stream_min(old)


@needs_native
def test_outputs_are_plain_arrays_when_the_cache_is_off(cache):
    dml.cpu_output_cache(0)
    out = dml.slice(np.ones((1, 1, 1024, 1024), np.float32), [0, 0, 0, 0], [1, 1, 1024, 1024], [1, 1, 1, 1])
    assert out.flags.owndata and np.all(out == 1)


@needs_native
def test_kernels_take_exactly_their_params_h_struct():
    # The C side declares the structs of runtime/params.h; backend.py fills
    # their ctypes mirrors. A block of any other length is refused.
    import ctypes
    from opendml.runtime import params
    from opendml.runtime.cpu import _native
    sizes = _native.param_sizes()
    del sizes["odml_cpu_move_params"]              # move.h's (tests/runtime/test_cpu_move.py checks it)
    assert sizes == {name: ctypes.sizeof(params.STRUCTS[name]) for name in sizes} and len(sizes) == 4
    buf = np.zeros(64, np.uint8)
    kernels = {"copy": params.CopyParams, "windows": params.UnfoldParams, "window_sums": params.FoldParams,
               "scatter": params.ScatterParams}
    for name, struct in kernels.items():
        kernel = getattr(_native, name)
        for blob in (b"", bytes(ctypes.sizeof(struct) - 8), bytes(ctypes.sizeof(struct) + 8)):
            with pytest.raises(ValueError, match=f"{name}: the parameter block must be {ctypes.sizeof(struct)} bytes"):
                kernel(buf.ctypes.data, buf.ctypes.data, blob, 1)
        # the right length, but an element size or rank no kernel has
        with pytest.raises(ValueError, match=f"_native.{name}: "):
            kernel(buf.ctypes.data, buf.ctypes.data, bytes(struct(element_size=3)), 1)
    assert buf.tolist() == [0] * 64
