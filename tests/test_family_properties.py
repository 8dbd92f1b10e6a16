"""The family's array API against independent NumPy references (written here,
sharing nothing with opendml's lowering), over the 11 types, ranks 1 to 6
and layouts: packed, padded strides (a slice of a larger array), broadcast
(stride 0) and negative strides; on every CPU path."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

import opendml as dml
from .conftest import n_examples

TYPES = [np.float32, np.float16, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
         np.uint32, np.uint64]
SETTINGS = settings(max_examples=n_examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def arrays(draw, min_rank=1, max_rank=5, max_side=4, dtypes=TYPES):
    """An arange-valued array (each value its own flat index, wrapped to the
    type) in one of four layouts."""
    rank = draw(st.integers(min_rank, max_rank))
    shape = tuple(draw(st.lists(st.integers(1, max_side), min_size=rank, max_size=rank)))
    dt = np.dtype(draw(st.sampled_from(dtypes)))
    layout = draw(st.sampled_from(["packed", "padded", "broadcast", "negative"]))
    n = int(np.prod(shape))
    with np.errstate(over="ignore"):
        if layout == "padded":
            big = np.arange(n * 2 ** rank).astype(dt).reshape(tuple(2 * s for s in shape))
            return big[tuple(slice(0, 2 * s, 2) for s in shape)]
        if layout == "broadcast":
            axis = draw(st.integers(0, rank - 1))
            small = np.arange(n // shape[axis]).astype(dt).reshape(tuple(1 if i == axis else s for i, s in enumerate(shape)))
            return np.broadcast_to(small, shape)
        x = np.arange(n).astype(dt).reshape(shape)
        if layout == "negative":
            x = x[tuple(slice(None, None, -1) for _ in shape)]
        return x


def ref_pad(x, start, end, mode, value):
    """The padding by definition, element by element along each axis."""
    def source(i, n, mode):
        if 0 <= i < n:
            return i
        if mode == "edge":
            return min(max(i, 0), n - 1)
        if mode == "wrap":
            return i % n
        if mode == "symmetric":
            r = i % (2 * n)
            return r if r < n else 2 * n - 1 - r
        if n == 1:
            return 0
        r = i % (2 * (n - 1))
        return r if r < n else 2 * (n - 1) - r
    out_shape = tuple(n + s + e for n, s, e in zip(x.shape, start, end))
    out = np.empty(out_shape, x.dtype)
    for o in np.ndindex(*out_shape):
        i = [p - s for p, s in zip(o, start)]
        if mode == "constant" and any(not 0 <= a < n for a, n in zip(i, x.shape)):
            out[o] = value
        else:
            out[o] = x[tuple(source(a, n, mode) for a, n in zip(i, x.shape))]
    return out


@given(x=arrays(max_rank=4, max_side=3), data=st.data())
@SETTINGS
def test_pad(backend, x, data):
    if backend == "cuda":
        pytest.skip("CPU only")
    r = x.ndim
    start = data.draw(st.lists(st.integers(0, 4), min_size=r, max_size=r))
    end = data.draw(st.lists(st.integers(0, 4), min_size=r, max_size=r))
    mode = data.draw(st.sampled_from(["constant", "edge", "reflect", "symmetric", "wrap"]))
    value = data.draw(st.integers(0, 100))
    got = dml.pad(x, start, end, mode, value)
    assert got.dtype == x.dtype
    assert np.array_equal(got, ref_pad(x, start, end, mode, value))


@given(x=arrays(max_rank=5), data=st.data())
@SETTINGS
def test_tile(backend, x, data):
    if backend == "cuda":
        pytest.skip("CPU only")
    if x.dtype == np.float64:
        with pytest.raises(dml.UnsupportedError, match=r"^tile: x's dtype float64 is not supported by TILE"):
            dml.tile(x, 1)
        return
    reps = data.draw(st.lists(st.integers(1, 3), min_size=x.ndim, max_size=x.ndim))
    want = np.empty(tuple(n * r for n, r in zip(x.shape, reps)), x.dtype)
    for o in np.ndindex(*want.shape):
        want[o] = x[tuple(a % n for a, n in zip(o, x.shape))]
    assert np.array_equal(dml.tile(x, reps), want)


@given(data=st.data())
@SETTINGS
def test_join_and_split(backend, data):
    if backend == "cuda":
        pytest.skip("CPU only")
    x = data.draw(arrays(max_rank=5))
    axis = data.draw(st.integers(0, x.ndim - 1))
    cuts = sorted(data.draw(st.lists(st.integers(1, x.shape[axis] - 1), unique=True, max_size=3))) \
        if x.shape[axis] > 1 else []
    bounds = [0, *cuts, x.shape[axis]]
    sizes = [b - a for a, b in zip(bounds, bounds[1:])]
    parts = dml.split(x, axis, sizes)
    for p, a, b in zip(parts, bounds, bounds[1:]):
        want = x[tuple(slice(a, b) if d == axis else slice(None) for d in range(x.ndim))]
        assert p.dtype == x.dtype and np.array_equal(p, want)
    back = dml.join([p[tuple(slice(None, None, -1) for _ in p.shape)][tuple(slice(None, None, -1) for _ in p.shape)]
                     for p in parts], axis - x.ndim)
    assert np.array_equal(back, x)


def ref_space_to_depth(x, b, order):
    n, c, hb, wb = x.shape
    h, w = hb // b, wb // b
    out = np.empty((n, c * b * b, h, w), x.dtype)
    for i, ci, hi, wi in np.ndindex(*x.shape):
        bh, bw = hi % b, wi % b
        ch = (bh * b + bw) * c + ci if order == "DCR" else ci * b * b + bh * b + bw
        out[i, ch, hi // b, wi // b] = x[i, ci, hi, wi]
    return out


@given(data=st.data())
@SETTINGS
def test_space_to_depth_and_back(backend, data):
    if backend == "cuda":
        pytest.skip("CPU only")
    b = data.draw(st.integers(1, 3))
    dt = data.draw(st.sampled_from(TYPES))
    n, c, h, w = (data.draw(st.integers(1, 3)) for _ in range(4))
    base = np.arange(n * c * h * b * w * b).astype(dt).reshape(n, c, h * b, w * b)
    layout = data.draw(st.sampled_from(["packed", "negative", "transposed"]))
    x = base[:, ::-1, :, ::-1] if layout == "negative" else (
        np.ascontiguousarray(base.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2) if layout == "transposed" else base)
    order = data.draw(st.sampled_from(["DCR", "CRD"]))
    d = dml.space_to_depth(x, b, order)
    assert np.array_equal(d, ref_space_to_depth(x, b, order))
    assert np.array_equal(dml.depth_to_space(d, b, order), x)


def ref_cast(x, dt):
    """CAST's rules, one Python value at a time."""
    dt = np.dtype(dt)
    out = np.empty(x.shape, dt)
    for i in np.ndindex(*x.shape):
        v = x[i].item()
        if dt.kind in "iu":
            info = np.iinfo(dt)
            if isinstance(v, float):
                v = 0 if v != v else (info.max if v >= info.max + 1 else info.min if v < info.min else int(v))
            else:
                v = (v - info.min) % (info.max - info.min + 1) + info.min
            out[i] = v
        else:
            with np.errstate(over="ignore"):
                out[i] = np.array(float(v), np.float64).astype(dt)   # one rounding (the values are exact in float64)
    return out


@given(x=arrays(max_rank=3, max_side=4), dst=st.sampled_from(TYPES), shift=st.sampled_from([0, -7.5, 1e10, -1e30]))
@SETTINGS
def test_cast(backend, x, dst, shift):
    if backend == "cuda":
        pytest.skip("CPU only")
    if x.dtype.kind == "f" and shift:
        with np.errstate(over="ignore"):
            x = (x.astype(np.float64) * 3.3 + shift).astype(x.dtype)
    got = dml.cast(x, dst)
    assert got.dtype == np.dtype(dst)
    want = ref_cast(x, dst)
    assert np.array_equal(got, want, equal_nan=got.dtype.kind == "f"), (x, got, want)


def test_cast_nan_and_infinities_to_integers():
    x = np.array([np.nan, np.inf, -np.inf, -0.9, 255.9, 256.0], np.float32)
    assert dml.cast(x, np.uint8).tolist() == [0, 255, 0, 0, 255, 255]
    assert dml.cast(x, np.int64).tolist() == [0, 2**63 - 1, -2**63, 0, 255, 256]
    assert dml.cast(np.array([300, -1], np.int32), "UINT8").tolist() == [44, 255]


@given(x=arrays(max_rank=4, dtypes=[np.float16, np.float32, np.float64]),
       scale=st.floats(-4, 4, width=32), bias=st.floats(-100, 100, width=32))
@SETTINGS
def test_identity_scale_bias(backend, x, scale, bias):
    if backend == "cuda":
        pytest.skip("CPU only")
    ct = np.float64 if x.dtype == np.float64 else np.float32
    want = ((x.astype(ct) * ct(scale)) + ct(bias)).astype(x.dtype)
    assert np.array_equal(dml.identity(x, scale, bias), want, equal_nan=True)
    assert np.array_equal(dml.identity(x), x)


def test_identity_copies_bits():
    x = np.array([0x7E01, 0x8000, 0xFC00], np.uint16).view(np.float16)   # a NaN payload, -0, -inf
    assert dml.identity(x).view(np.uint16).tolist() == [0x7E01, 0x8000, 0xFC00]
