"""Array level: any NumPy layout, PyTorch through DLPack, UNFOLD against PyTorch."""
import numpy as np
import pytest

import opendml as dml
from tests import reference as ref


def grid(*shape, dtype=np.int32):
    return np.arange(np.prod(shape), dtype=np.int64).astype(dtype).reshape(shape)


@pytest.mark.parametrize("view", [
    lambda x: x, lambda x: x[:, :, ::-1, :], lambda x: x[..., ::-2], lambda x: x.transpose(0, 3, 1, 2),
    lambda x: np.broadcast_to(x[:, :1], x.shape), lambda x: x[:, :, 1:, ::-1][:, :, ::-1],
], ids=["packed", "reversed", "negative-step", "transposed", "broadcast", "double-reverse"])
def test_slice1_any_numpy_layout(view):
    x = view(grid(2, 3, 6, 6))
    off, win, st = [0, 1, 0, 1], [2, 2, x.shape[2], x.shape[3] - 1], [1, -1, 2, -2]
    out = dml.slice1(x, off, win, st)
    xs = np.array(x)
    assert np.array_equal(out, ref.slice1(xs, off, win, st, out.shape)) and out.flags.c_contiguous


def test_unaligned_byte_strides_are_copied_first():
    rec = np.zeros(6, dtype=[("a", np.int8), ("b", np.int32)])
    rec["b"] = np.arange(6)
    b = rec["b"]  # byte stride 5: not a whole number of int32 elements
    assert np.array_equal(dml.slice(b, [1], [2], [2]), [1, 3])


def test_big_endian_input():
    x = np.arange(8, dtype=">i4")
    assert dml.slice(x, [2], [3], [1]).tolist() == [2, 3, 4]


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
@pytest.mark.parametrize("kernels", ["compiled", "numpy"])
@pytest.mark.parametrize("call", [
    lambda x: dml.slice(x, [1, 0], [2, 2], [1, 3]), lambda x: dml.slice1(x, [0, 0], [4, 4], [1, -1]),
    lambda x: dml.slice_grad(x, [8, 9], [1, 0], [4, 8], [1, -2]), lambda x: dml.split(x, 1, [1, 3])[1],
], ids=["slice", "slice1", "slice_grad", "split"])
def test_a_numpy_subclass_reads_as_its_ndarray(kernels, call):
    """np.matrix stays 2-D when flattened: the NumPy kernels read it from the wrong element (before
    the buffer's start, for a reversed window) unless it is taken as the plain ndarray it holds."""
    if kernels == "compiled" and not dml.config().compiled_available:
        pytest.skip("the compiled CPU kernels are not installed")
    x = grid(4, 4, dtype=np.float32)
    with dml.configure(cpu_kernels=kernels, call_cache=False):
        assert np.array_equal(call(np.matrix(x)), call(x))


@pytest.mark.parametrize("call", [
    lambda x: dml.gather(x, np.array([0, 0]), 0),
    lambda x: dml.scatter_elements(x, np.zeros(x.shape, np.int64), x, 0),
    lambda x: dml.reverse_subsequences(x, np.full((1, 4, 1, 1), 3, np.uint32), 3),
    lambda x: dml.slice1(x, [0, 0, 0, 0], [1, 4, 1, 6], [1, -1, 1, 2]),
], ids=["gather", "scatter_elements", "reverse_subsequences", "slice1"])
def test_any_stride_of_a_size_one_axis(call):
    """NumPy (and PyTorch) allow any stride along an axis of size 1, which is never stepped: 2^62 bytes
    there made the index kernels refuse their own parameters (a ValueError, 'malformed index axis')."""
    packed = np.arange(24, dtype=np.float32).reshape(1, 4, 1, 6)
    far = np.lib.stride_tricks.as_strided(packed, packed.shape, (2**62, 24, -2**62, 4))
    assert np.array_equal(call(far), call(packed))


def test_unfold_scalars_apply_to_every_axis():
    x = grid(1, 2, 4, 5, dtype=np.float32)
    assert np.array_equal(dml.unfold(x, 2, strides=2, start_padding=1), ref.unfold(x, [2, 2], [2, 2], [1, 1], [1, 1], [0, 0]))


@pytest.mark.parametrize("bad, message", [
    (np.float32(3), r"^slice: x must be a NumPy, CuPy, PyTorch, JAX or Dask array; got numpy.float32$"),
    ([1, 2, 3], r"^slice: x must be a NumPy, CuPy, PyTorch, JAX or Dask array; got builtins.list$"),
    (np.zeros((2, 0)), r"^slice: x must have no dimension of size 0 \(DirectML's tensor sizes are >= 1\); got shape "
                       r"\[2, 0\]$"),
    (np.array(5.0), r"^slice: x must have 1 to 8 dimensions for SLICE; got 0 \(shape \[\]\)$"),
])
def test_bad_arrays(bad, message):
    with pytest.raises(dml.DmlError, match=message):
        dml.slice(bad, [0], [1], [1])


def test_bool_arrays_are_unsupported():
    with pytest.raises(dml.UnsupportedError, match=r"^slice: x's dtype bool is not supported by SLICE at feature "
                                                   r"level 6_4 \(supported: float16, float32, float64, int8, "):
        dml.slice(np.zeros(3, bool), [0], [1], [1])



def _torch():
    return pytest.importorskip("torch")


def test_torch_cpu_tensors_round_trip():
    torch = _torch()
    t = torch.arange(24, dtype=torch.float16).reshape(2, 3, 4).flip(1)
    out = dml.slice1(t, [0, 0, 0], [2, 3, 4], [1, 2, -1])
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float16
    assert torch.equal(out, t[:, ::2].flip(2))
    x = torch.ones(1, 1, 3, 3, requires_grad=True)
    y = dml.unfold(x, 2)                 # never a silently cut gradient
    assert y.shape == (1, 4, 4) and y.grad_fn is not None
    y.sum().backward()
    assert torch.equal(x.grad, torch.tensor([[[[1.0, 2, 1], [2, 4, 2], [1, 2, 1]]]]))


@pytest.mark.parametrize("seed", range(25))
def test_unfold_matches_torch_f_unfold(seed):
    torch = _torch()
    rng = np.random.default_rng(seed)
    n, c = rng.integers(1, 3), rng.integers(1, 4)
    kh, kw = rng.integers(1, 4, size=2)
    dh, dw = rng.integers(1, 3, size=2)
    ph, pw = rng.integers(0, 3, size=2)
    sh, sw = rng.integers(1, 4, size=2)
    h = int(rng.integers(dh * (kh - 1) + 1, 12)); w = int(rng.integers(dw * (kw - 1) + 1, 12))
    x = torch.from_numpy(rng.standard_normal((n, c, h, w)).astype(np.float32))
    want = torch.nn.functional.unfold(x, (kh, kw), dilation=(dh, dw), padding=(ph, pw), stride=(sh, sw))
    got = dml.unfold(x, [kh, kw], [sh, sw], [dh, dw], [ph, pw], [ph, pw])
    assert torch.equal(got, want)


def test_repeated_calls_reuse_the_validated_plan_and_still_reject_bad_ones():
    x = np.arange(2 * 3 * 8 * 8, dtype=np.float32).reshape(2, 3, 8, 8)
    args = ([0, 0, 1, 0], [2, 3, 6, 8], [1, -1, 2, -3])
    start = dml.plan_cache_info()
    first = dml.slice1(x, *args)
    again = dml.slice1(x, *args)
    info = dml.plan_cache_info()
    assert info["hits"] == start["hits"] + 1 and np.array_equal(first, again)
    # same arguments on another layout or dtype: another plan, right answer
    xt = np.asfortranarray(x)
    assert np.array_equal(dml.slice1(xt, *args), first)
    assert np.array_equal(dml.slice1(x.astype(np.int16), *args), first.astype(np.int16))
    assert dml.plan_cache_info()["misses"] == info["misses"] + 2
    # an int and a one-element list mean different things and get different keys
    assert dml.unfold(x, 3, 1, 1, 1, 1).shape == dml.unfold(x, [3, 3], 1, 1, 1, 1).shape
    with pytest.raises(dml.ValidationError, match=r"Offsets\[2\] \+ \(Sizes\[2\] - 1\) \* Strides\[2\]"):
        dml.slice(x, [0, 0, 0, 0], [2, 3, 5, 4], [1, 1, 2, 2])
    # NumPy integers are accepted but validated every call (no key: not looked up)
    before = dml.plan_cache_info()
    dml.slice(x, [np.int64(0)] * 4, [2, 3, 4, 4], [1, 1, 2, 2])
    after = dml.plan_cache_info()
    assert (after["hits"], after["misses"]) == (before["hits"], before["misses"])


def test_plan_cache_is_bounded_and_safe_under_threads():
    import concurrent.futures
    x = np.arange(64, dtype=np.float32).reshape(1, 1, 8, 8)

    def work(i):
        off = i % 300
        y = dml.slice1(np.arange(400, dtype=np.float32), [off], [50], [1])
        return np.array_equal(y, np.arange(off, off + 50, dtype=np.float32))
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        assert all(pool.map(work, range(3000)))
    info = dml.plan_cache_info()
    assert info["plans"] <= info["size"]
    assert dml.unfold(x, 2).shape == (1, 4, 49)
