"""JAX arrays (issue 12): the five operators under ``jit``, ``vmap`` and
``grad``. The traced (pure-lax) route is compared bit for bit with the
independent reference and with the eager route (opendml's kernels) on random
arguments in all 11 dtypes; gradients are checked with
``jax.test_util.check_grads`` and against the adjoint operators; errors are
opendml's own, raised while tracing."""
import contextlib
import functools
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import opendml as dml
from tests import reference as ref

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

import opendml.jax as oj  # noqa: E402
from opendml.arrays import jax_adapter  # noqa: E402

DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
OPS = ["slice", "slice1", "unfold", "fold", "slice_grad"]
SUPPORTED = ", ".join(DTYPES)


@contextlib.contextmanager
def x64(enabled: bool = True):
    """``jax_enable_x64`` set for a block, restored afterwards."""
    old = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", enabled)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", old)


@pytest.fixture
def enable_x64():
    with x64():
        yield


@pytest.fixture(autouse=True)
def on_the_cpu():
    """Arrays made without a device go to the CPU, also where JAX has a GPU
    (the GPU tests place theirs explicitly)."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield


def bits(a) -> np.ndarray:
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}")


def assert_same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    mismatch = np.flatnonzero(bits(got) != bits(want))
    assert mismatch.size == 0, (f"{mismatch.size} of {got.size} elements differ; first at flat index {mismatch[0]}: "
                                f"{got.ravel()[mismatch[0]]!r} != {want.ravel()[mismatch[0]]!r}")


def values(rng, shape, dtype) -> np.ndarray:
    """Random values of ``dtype``: floats of either sign with exact -0.0s among
    them; integers over the type's whole range (FOLD's sums wrap)."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        v = (rng.standard_normal(shape) * 8).astype(dt)
        v[rng.random(shape) < 0.15] = -0.0
        return v
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)


# -- random valid calls ----------------------------------------------------------

def window_case(rng):
    """(spatial sizes, window, strides, dilations, start padding, end padding)."""
    d = int(rng.integers(1, 4))
    window = [int(v) for v in rng.integers(1, 4 if d < 3 else 3, d)]
    strides = [int(v) for v in rng.integers(1, 4, d)]
    dilations = [int(v) for v in rng.integers(1, 3, d)]
    start = [int(v) for v in rng.integers(0, 3, d)]
    end = [int(v) for v in rng.integers(0, 3, d)]
    least = [max(1, dl * (w - 1) + 1 - a - b) for w, dl, a, b in zip(window, dilations, start, end)]
    spatial = [int(rng.integers(lo, lo + (6 if d < 3 else 3))) for lo in least]
    return spatial, window, strides, dilations, start, end


def window_walk(rng, size):
    """One axis of a SLICE1 window: offset, size, signed stride, output size."""
    w = int(rng.integers(1, size + 1))
    o = int(rng.integers(0, size - w + 1))
    t = int(rng.integers(1, 4)) * (1 if rng.random() < 0.5 else -1)
    m = int(rng.integers(1, 1 + (w - 1) // abs(t) + 1))
    return o, w, t, m


@functools.cache
def case(op: str, seed: int):
    """(input shape, f(array) calling opendml, reference(numpy array)); cached,
    so that jax.jit(f) compiles once per case and dtype."""
    rng = np.random.default_rng([seed, OPS.index(op)])
    if op in ("unfold", "fold"):
        spatial, window, strides, dilations, start, end = window_case(rng)
        n, c = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        args = (window, strides, dilations, start, end)
        if op == "unfold":
            return ((n, c, *spatial), lambda x: dml.unfold(x, *args), lambda x: ref.unfold(x, *args))
        blocks = [(s + a + b - dl * (w - 1) - 1) // t + 1
                  for s, w, t, dl, a, b in zip(spatial, window, strides, dilations, start, end)]
        shape = (n, c * math.prod(window), math.prod(blocks))
        if len(spatial) > 1 and rng.random() < 0.3:
            shape = (1,) + shape                                  # FOLD's input may lead with 1s
        return shape, lambda x: dml.fold(x, spatial, *args), lambda x: ref.fold(x, spatial, *args)
    rank = int(rng.integers(1, 5))
    shape = tuple(int(v) for v in rng.integers(1, 7, rank))
    if op == "slice":
        offsets, sizes, strides = [], [], []
        for s in shape:
            t = int(rng.integers(1, 4))
            o = int(rng.integers(0, s))
            sizes.append(int(rng.integers(1, (s - 1 - o) // t + 2)))
            offsets.append(o)
            strides.append(t)
        return (shape, lambda x: dml.slice(x, offsets, sizes, strides),
                lambda x: ref.slice_(x, offsets, sizes, strides))
    o, w, t, m = zip(*(window_walk(rng, s) for s in shape))
    if op == "slice1":
        out = m if rng.random() < 0.7 else None
        full = [1 + (wi - 1) // abs(ti) for wi, ti in zip(w, t)]
        return (shape, lambda x: dml.slice1(x, o, w, t, out),
                lambda x: ref.slice1(x, o, w, t, out or full))
    return m, lambda x: dml.slice_grad(x, shape, o, w, t), lambda x: ref.slice_grad(x, shape, o, w, t)


def dtype_context(dtype):
    return x64() if np.dtype(dtype).itemsize == 8 else contextlib.nullcontext()


SEEDS = range(3)


# -- the traced route: the same bits as the reference and the kernels ------------

@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_jit_matches_reference(op, dtype, seed):
    shape, f, want = case(op, seed)
    x = values(np.random.default_rng(seed), shape, dtype)
    with dtype_context(dtype):
        got = jax.jit(f)(jnp.asarray(x))
    assert_same_bits(got, want(x))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_jit_matches_eager_kernels(op, dtype, seed):
    shape, f, _ = case(op, seed)
    x = values(np.random.default_rng(seed), shape, dtype)
    with dtype_context(dtype):
        xj = jnp.asarray(x)
        eager = f(xj)
        assert isinstance(eager, jax.Array)
        assert_same_bits(jax.jit(f)(xj), eager)
    assert_same_bits(eager, f(x))                     # the kernels on a NumPy array: the same call


@pytest.mark.parametrize("dtype", ["float16", "float32", "int8", "uint16", "int32"])
@pytest.mark.parametrize("op", OPS)
def test_every_cpu_kernel_set_matches_the_lax_route(backend, op, dtype):
    if backend == "cuda":
        pytest.skip("JAX CPU arrays run on the CPU kernels")
    shape, f, _ = case(op, 1)
    x = jnp.asarray(values(np.random.default_rng(1), shape, dtype))
    assert_same_bits(f(x), jax.jit(f)(x))


def test_fold_sums_float16_in_float32_and_starts_from_plus_zero():
    # Output element 1 of a width-3 window over 3 elements padded by 2 receives
    # 2048 + 1 + 1 (k = 0, 1, 2): float16 steps would stay at 2048 (2049 rounds
    # to even); float32 sums 2050, rounded once.
    cols = np.zeros((1, 3, 5), np.float16)
    cols[0, 0, 3], cols[0, 1, 2], cols[0, 2, 1] = 2048, 1, 1
    fold = jax.jit(lambda c: dml.fold(c, [3], [3], start_padding=[2], end_padding=[2]))
    got = fold(jnp.asarray(cols))
    assert np.asarray(got)[0, 0, 1] == 2050
    assert_same_bits(got, ref.fold(cols, [3], [3], [1], [1], [2], [2]))
    minus = np.full((1, 1, 4), -0.0, np.float32)                 # one term each: +0 + (-0) is +0
    got = jax.jit(lambda c: dml.fold(c, [4], [1]))(jnp.asarray(minus))
    assert not np.signbit(np.asarray(got)).any()


def test_fold_under_jit_on_the_cpu_flushes_subnormals():
    """XLA runs CPU programs with denormals flushed to zero (JAX's choice), so
    a float32/float64 FOLD sum that involves subnormal values is 0 under jit on
    the CPU, where the kernels keep it; the data-movement operators keep
    subnormals on both routes. Pinned so that a change is noticed."""
    tiny = np.finfo(np.float32).smallest_subnormal
    cols = np.full((1, 2, 1), 3 * tiny, np.float32)
    fold = lambda c: dml.fold(c, [2], [2])                       # noqa: E731
    assert np.asarray(jax.jit(fold)(jnp.asarray(cols))).tolist() == [[[0.0, 0.0]]]
    assert_same_bits(fold(jnp.asarray(cols)), np.full((1, 1, 2), 3 * tiny, np.float32))
    x = np.full((1, 1, 4), tiny, np.float32)
    assert_same_bits(jax.jit(lambda x: dml.unfold(x, 2))(jnp.asarray(x)), np.full((1, 2, 3), tiny, np.float32))


# -- vmap -------------------------------------------------------------------------

@pytest.mark.parametrize("op", OPS)
def test_vmap_matches_a_python_loop(op):
    shape, f, _ = case(op, 7)
    xs = jnp.asarray(values(np.random.default_rng(0), (3, *shape), np.float32))
    loop = jnp.stack([f(x) for x in xs])
    assert_same_bits(jax.vmap(f)(xs), loop)
    assert_same_bits(jax.jit(jax.vmap(f))(xs), loop)
    moved = jnp.moveaxis(xs, 0, -1)                         # a batch axis that is not the first
    assert_same_bits(jax.vmap(f, in_axes=-1)(moved), loop)


@pytest.mark.parametrize("op", OPS)
def test_vmap_of_grad_matches_a_python_loop(op):
    shape, f, _ = case(op, 8)
    xs = jnp.asarray(values(np.random.default_rng(1), (3, *shape), np.float32))
    w = jnp.asarray(np.random.default_rng(2).standard_normal(jax.eval_shape(f, xs[0]).shape).astype(np.float32))
    grad = jax.grad(lambda x: jnp.sum(f(x) * w))
    assert_same_bits(jax.vmap(grad)(xs), jnp.stack([grad(x) for x in xs]))


# -- gradients --------------------------------------------------------------------

GRAD_CASES = {
    "slice": lambda x: dml.slice(x, [0, 1, 1, 0], [2, 2, 2, 3], [1, 1, 2, 2]),
    "slice1": lambda x: dml.slice1(x, [0, 1, 0, 1], [2, 2, 5, 5], [1, -1, 2, -2]),
    "slice1-short": lambda x: dml.slice1(x, [0, 0, 1, 0], [2, 3, 4, 6], [1, 2, -1, 3], output_sizes=[1, 1, 3, 2]),
    "unfold": lambda x: dml.unfold(x, [2, 3], strides=[1, 2], dilations=[2, 1], start_padding=[1, 0],
                                   end_padding=[0, 2]),
    "unfold-3d": lambda x: dml.unfold(x.reshape(2, 3, 5, 3, 2), 2, strides=[2, 1, 1], start_padding=1),
    "fold": lambda x: dml.fold(dml.unfold(x, [3, 2], start_padding=1, end_padding=[1, 0]) * 1.5, [5, 6], [3, 2],
                               start_padding=1, end_padding=[1, 0]),
    "slice_grad": lambda x: dml.slice_grad(dml.slice1(x, [0, 1, 0, 1], [2, 2, 5, 5], [1, -1, 2, -2]) ** 2,
                                           [2, 3, 5, 6], [0, 1, 0, 1], [2, 2, 5, 5], [1, -1, 2, -2]),
}


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_check_grads(enable_x64, name, jit):
    f = GRAD_CASES[name]
    x = jnp.asarray(np.random.default_rng(3).standard_normal((2, 3, 5, 6)))
    check_grads(jax.jit(f) if jit else f, (x,), order=2, modes=["rev"])


WIN = ([3, 2], [2, 1], [1, 2], [1, 0], [2, 1])               # window, strides, dilations, padding
WALK = ([0, 1, 0, 1], [2, 2, 5, 5], [1, -1, 2, -2])
ADJOINT_CASES = {
    # name: (input shape, operator, its adjoint written out)
    "unfold": ((2, 3, 5, 6), lambda x: dml.unfold(x, *WIN), lambda y: dml.fold(y, [5, 6], *WIN)),
    "fold": ((2, 18, 15), lambda x: dml.fold(x, [5, 6], *WIN), lambda y: dml.unfold(y, *WIN)),
    "slice1": ((2, 3, 5, 6), lambda x: dml.slice1(x, *WALK), lambda y: dml.slice_grad(y, [2, 3, 5, 6], *WALK)),
    "slice_grad": ((2, 2, 3, 3), lambda x: dml.slice_grad(x, [2, 3, 5, 6], *WALK),
                   lambda y: dml.slice1(y, *WALK, output_sizes=[2, 2, 3, 3])),
    "slice": ((2, 3, 5, 6), lambda x: dml.slice(x, [0, 1, 1, 0], [2, 2, 2, 3], [1, 1, 2, 2]),
              lambda y: dml.slice_grad(y, [2, 3, 5, 6], [0, 1, 1, 0], [2, 2, 3, 5], [1, 1, 2, 2])),
}


@pytest.mark.parametrize("name", list(ADJOINT_CASES))
def test_the_vjp_is_the_adjoint_operator(enable_x64, name):
    """vjp(op)(y) is exactly the adjoint operator on y, eagerly and under jit;
    and <op(x), y> == <x, adjoint(y)>."""
    shape, f, adjoint = ADJOINT_CASES[name]
    x = jnp.asarray(np.random.default_rng(4).standard_normal(shape))
    out, vjp = jax.vjp(f, x)
    y = jnp.asarray(np.random.default_rng(5).standard_normal(out.shape))
    (back,) = vjp(y)
    assert_same_bits(back, adjoint(y))
    assert_same_bits(jax.jit(lambda x, y: jax.vjp(f, x)[1](y)[0])(x, y), back)
    np.testing.assert_allclose(float(jnp.vdot(out, y)), float(jnp.vdot(x, back)), rtol=1e-12)


def test_forward_mode_is_not_available():
    """custom_vjp functions refuse jvp (JAX's rule); reverse mode is the route."""
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        jax.jvp(lambda x: dml.unfold(x, 2), (jnp.ones((1, 1, 3, 3)),), (jnp.ones((1, 1, 3, 3)),))


def test_eager_grad_runs_the_kernels(monkeypatch):
    from opendml.arrays import front
    seen = []
    real = front.run_numpy

    def spy(call, arrays):
        seen.append(call.name)
        return real(call, arrays)
    monkeypatch.setattr(front, "run_numpy", spy)
    x = jnp.arange(16.0).reshape(1, 1, 4, 4)
    g = jax.grad(lambda x: jnp.sum(dml.unfold(x, 2, start_padding=1) ** 2))(x)
    assert seen == ["unfold", "fold"]                       # the forward and the backward pass
    seen.clear()
    assert_same_bits(jax.jit(jax.grad(lambda x: jnp.sum(dml.unfold(x, 2, start_padding=1) ** 2)))(x), g)
    assert seen == []                                        # under jit: the lax route only


def test_integer_inputs_get_float0_cotangents():
    x = jnp.arange(16, dtype=jnp.int32).reshape(1, 1, 4, 4)
    out, vjp = jax.vjp(lambda x: dml.unfold(x, 2), x)
    (ct,) = vjp(np.zeros(out.shape, jax.dtypes.float0))
    assert ct.dtype == jax.dtypes.float0 and ct.shape == x.shape


def test_im2col_convolution_trains_like_lax_conv(enable_x64):
    """unfold -> matmul -> loss; the gradients (back through FOLD) equal
    lax.conv_general_dilated's, eagerly and under jit."""
    rng = np.random.default_rng(6)
    x = jnp.asarray(rng.standard_normal((2, 3, 7, 6)))
    w = jnp.asarray(rng.standard_normal((4, 3, 3, 3)))

    def im2col(x, w):
        cols = dml.unfold(x, 3, start_padding=1, end_padding=1)            # (N, C*9, H*W)
        return jnp.einsum("ok,nkl->nol", w.reshape(4, -1), cols).reshape(2, 4, 7, 6)

    def conv(x, w):
        return jax.lax.conv_general_dilated(x, w, (1, 1), [(1, 1), (1, 1)], precision="highest")

    def loss(layer):
        return lambda x, w: jnp.sum(jnp.tanh(layer(x, w)))
    want = jax.grad(loss(conv), argnums=(0, 1))(x, w)
    for got in (jax.grad(loss(im2col), argnums=(0, 1))(x, w),
                jax.jit(jax.grad(loss(im2col), argnums=(0, 1)))(x, w)):
        for g, h in zip(got, want):
            np.testing.assert_allclose(g, h, rtol=1e-10, atol=1e-12)


# -- what runs under jit ------------------------------------------------------------

def test_jit_lowers_to_plain_xla():
    f = jax.jit(lambda x: dml.fold(dml.unfold(x, [3, 3], start_padding=1, end_padding=1), [8, 8], 3,
                                   start_padding=1, end_padding=1))
    x = jnp.ones((1, 2, 8, 8))
    jaxpr = str(jax.make_jaxpr(f)(x))
    assert "name=opendml_unfold" in jaxpr and "name=opendml_fold" in jaxpr
    hlo = f.lower(x).as_text()
    assert "custom_call" not in hlo and "callback" not in hlo


def test_every_operator_takes_one_route_named_after_it():
    """The first five and the others are one ``custom_vjp`` route: each named
    ``opendml_<function>`` in jaxprs; an operator without a lax form runs its
    move program through a host callback, and its gradient is its adjoint."""
    x = jnp.arange(12.0).reshape(1, 1, 3, 4)
    f = lambda x: dml.pad(dml.slice1(x, [0, 0, 0, 0], [1, 1, 3, 4], [1, 1, 1, -1]), [0, 0, 1, 1], [0, 0, 1, 0])
    jaxpr = str(jax.make_jaxpr(f)(x))
    assert "name=opendml_slice1" in jaxpr and "name=opendml_pad" in jaxpr
    g = jnp.arange(25.0).reshape(1, 1, 5, 5)
    for run in (f, jax.jit(f)):
        out, vjp = jax.vjp(run, x)
        assert_same_bits(out, np.pad(np.asarray(x)[..., ::-1], [(0, 0), (0, 0), (1, 1), (1, 0)]))
        assert_same_bits(vjp(g)[0], np.asarray(g)[..., 1:4, 1:][..., ::-1])


# -- errors: opendml's own, at trace time ---------------------------------------------

BAD_CALLS = {
    "unfold-window": ((1, 2, 5, 5), lambda x: dml.unfold(x, [7, 3])),
    "unfold-rank": ((2, 5, 5), lambda x: dml.unfold(x, [2, 2])),
    "slice1-bounds": ((1, 1, 4, 4), lambda x: dml.slice1(x, [0, 0, 3, 0], [1, 1, 2, 4], [1, 1, 1, 1])),
    "slice1-stride": ((1, 1, 4, 4), lambda x: dml.slice1(x, [0, 0, 0, 0], [1, 1, 4, 4], [1, 1, 0, 1])),
    "slice-bounds": ((1, 1, 4, 4), lambda x: dml.slice(x, [0, 0, 0, 0], [1, 1, 3, 4], [1, 1, 2, 1])),
    "fold-blocks": ((1, 9, 10), lambda x: dml.fold(x, [4, 4], [3, 3])),
    "slice_grad-fit": ((1, 2), lambda x: dml.slice_grad(x, [1, 3], [0, 0], [1, 4], [1, 2])),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_errors_are_raised_while_tracing(name):
    shape, f = BAD_CALLS[name]
    with pytest.raises(dml.DmlError) as eager:
        f(np.zeros(shape, np.float32))
    message = re.escape(str(eager.value))
    x = jnp.zeros(shape, jnp.float32)
    for run in (f, jax.jit(f), lambda x: jax.vmap(f)(x[None]), jax.grad(lambda x: jnp.sum(f(x)))):
        with pytest.raises(type(eager.value), match=message):
            run(x)


BAD_DTYPES = ["bfloat16", "float8_e4m3fn", "complex64", "bool", "int4"]


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("dtype", BAD_DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_unsupported_dtypes_name_the_dtype_and_the_11_types(op, dtype, jit):
    shape, f, _ = case(op, 0)
    x = jnp.zeros(shape, getattr(jnp, "bool_" if dtype == "bool" else dtype))
    arg = "grad" if op == "slice_grad" else "x"
    message = (rf"^{op}: {arg}'s dtype {dtype} is not supported by {op.upper()} at feature level 6_4 "
               rf"\(supported: {SUPPORTED}\)")     # no $: under jit, JAX appends a note
    with pytest.raises(dml.UnsupportedError, match=message):
        (jax.jit(f) if jit else f)(x)


# -- the eager route ----------------------------------------------------------------

def test_large_cpu_outputs_are_handed_to_jax_without_a_copy(monkeypatch):
    from opendml.arrays import front
    made = []
    real = front.run_numpy

    def spy(call, arrays):
        outs = real(call, arrays)
        made.append(outs[0].ctypes.data)
        return outs
    monkeypatch.setattr(front, "run_numpy", spy)
    x = jnp.ones((2, 4, 64, 64), jnp.float32)
    y = dml.unfold(x, 3, start_padding=1, end_padding=1)                 # 1.2 MB
    if made[0] % 64:
        pytest.skip("the output is not 64-byte aligned here (the output cache is off)")
    assert y.unsafe_buffer_pointer() == made[0]
    assert_same_bits(y, dml.unfold(np.ones((2, 4, 64, 64), np.float32), 3, start_padding=1, end_padding=1))
    small = dml.slice1(x, [0, 0, 0, 0], [1, 1, 2, 2], [1, 1, 1, 1])        # copied: cheaper than DLPack
    assert isinstance(small, jax.Array) and small.shape == (1, 1, 2, 2)


def test_concrete_arrays_without_kernels_run_the_compiled_lax_form(monkeypatch):
    """A concrete array on a platform with no opendml kernels (a TPU, a GPU
    without CuPy) runs the lax form, compiled: here the CPU is made one."""
    monkeypatch.setattr(jax_adapter, "KERNEL_PLATFORMS", ())
    from opendml.arrays import front
    monkeypatch.setattr(front, "run_numpy", lambda *a: pytest.fail("the kernels ran"))
    for op in OPS:
        shape, f, want = case(op, 2)
        x = values(np.random.default_rng(2), shape, np.float32)
        assert_same_bits(f(jnp.asarray(x)), want(x))


def test_a_sharded_array_gets_one_message_for_every_operator():
    """An array over two devices (the CPU made two by XLA_FLAGS, in a fresh
    process): the same UnsupportedError sentence whatever the operator."""
    code = """if True:
        import jax, jax.numpy as jnp, numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        import opendml as dml
        mesh = Mesh(np.array(jax.devices("cpu")[:2]), ("d",))
        x = jax.device_put(jnp.arange(32.0).reshape(2, 1, 4, 4), NamedSharding(mesh, P("d")))
        for f in (lambda v: dml.slice1(v, [0, 0, 0, 0], [2, 1, 4, 4], [1, 1, 1, -1]), lambda v: dml.pad(v, 1, 0),
                  lambda v: dml.unfold(v, 2)):
            try:
                f(x)
                print("no error")
            except dml.UnsupportedError as e:
                print(e)
    """
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    tail = ": a JAX array on 2 devices (sharded) is not supported; gather it on one device first, or call " \
           "opendml inside shard_map"
    assert done.stdout.splitlines() == [f"{name}{tail}" for name in ("slice1", "pad", "unfold")], done.stderr


def test_import_opendml_does_not_import_jax():
    code = "import sys, opendml; assert 'jax' not in sys.modules, 'jax imported'; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr


GPUS = [d for d in jax.devices() if d.platform == "gpu"]


@pytest.mark.skipif(not GPUS, reason="JAX sees no GPU")
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "uint16", "int32", "uint64"])
@pytest.mark.parametrize("op", OPS)
def test_gpu_eager_and_jit_match_the_cpu(op, dtype):
    """On a GPU: the eager route (opendml's CUDA kernels through CuPy) and the
    lax route compiled for the GPU give the CPU's bits."""
    for seed in SEEDS:
        shape, f, want = case(op, seed)
        x = values(np.random.default_rng(seed), shape, dtype)
        with dtype_context(dtype):
            xg = jax.device_put(x, GPUS[0])
            for got in (f(xg), jax.jit(f)(xg)):
                assert GPUS[0] in got.devices()
                assert_same_bits(got, want(x))


@pytest.mark.skipif(not GPUS, reason="JAX sees no GPU")
def test_gpu_gradients(enable_x64):
    x = jax.device_put(np.random.default_rng(3).standard_normal((2, 3, 5, 6)), GPUS[0])
    for name, f in GRAD_CASES.items():
        check_grads(f, (x,), order=2, modes=["rev"])
        check_grads(jax.jit(f), (x,), order=2, modes=["rev"])


@pytest.mark.skipif(not GPUS, reason="JAX sees no GPU")
def test_gpu_eager_calls_of_every_operator_run_on_the_gpu(monkeypatch):
    """The operators without a lax form take the first five's eager route on
    a GPU too: opendml's CUDA kernels through CuPy (never NumPy on the host),
    the result on the array's GPU with the CPU's bits."""
    pytest.importorskip("cupy")
    from opendml.arrays import front
    x = values(np.random.default_rng(5), (1, 4, 6, 6), np.float32)
    cases = [lambda v: dml.pad(v, [0, 0, 1, 2], [0, 0, 2, 1], "reflect"), lambda v: dml.tile(v, [1, 2, 1, 1]),
             lambda v: dml.cast(v, np.float16), lambda v: dml.space_to_depth(v, 2),
             lambda v: dml.split(v, 1, [1, 3])[1], lambda v: dml.unfold(v, 3, start_padding=1)]
    wants = [f(x) for f in cases]
    monkeypatch.setattr(front, "run_numpy", lambda *a: pytest.fail("the NumPy route ran"))
    xg = jax.device_put(x, GPUS[0])
    for f, want in zip(cases, wants):
        got = f(xg)
        assert GPUS[0] in got.devices()
        assert_same_bits(got, want)


# -- opendml.jax --------------------------------------------------------------------

def test_opendml_jax_module():
    import opendml.jax as dj
    x = np.arange(2 * 3 * 5 * 5, dtype=np.float32).reshape(2, 3, 5, 5)
    u = dj.Unfold((3, 3), start_padding=1, end_padding=[1, 1])
    f = dj.Fold([5, 5], (3, 3), start_padding=1, end_padding=1)
    assert hash(u) == hash(dj.Unfold((3, 3), start_padding=1, end_padding=(1, 1)))
    # a 1-D NumPy array kept as a tuple too: it was kept as given, and the object could not be hashed
    assert dj.Unfold(np.array([3, 3]), start_padding=1, end_padding=np.array([1, 1])) == u
    assert hash(dj.Fold(np.array([5, 5]), np.array([3, 3]), start_padding=1, end_padding=1)) == hash(
        dj.Fold([5, 5], (3, 3), start_padding=1, end_padding=1))
    cols = u(x)                                              # a NumPy input comes back as a JAX array
    assert isinstance(cols, jax.Array) and cols.shape == (2, 27, 25)
    assert_same_bits(cols, ref.unfold(x, [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]))
    both = jax.jit(lambda x, u, f: f(u(x)), static_argnums=(1, 2))
    assert_same_bits(both(jnp.asarray(x), u, f), ref.fold(np.asarray(cols), [5, 5], [3, 3], [1, 1], [1, 1], [1, 1],
                                                          [1, 1]))
    assert_same_bits(dj.slice1(x, [0, 0, 0, 0], [2, 3, 5, 5], [1, 1, -1, 1]), x[:, :, ::-1])
    assert_same_bits(dj.slice(x, [0, 0, 1, 1], [2, 3, 2, 2], [1, 1, 2, 2]), x[:, :, 1::2, 1::2])
    assert_same_bits(dj.slice_grad(x[:, :, ::2], [2, 3, 9, 5], [0, 0, 0, 0], [2, 3, 9, 5], [1, 1, 2, 1])[:, :, :6:2],
                     x[:, :, ::2])
    assert dj.SUPPORTED_DTYPES == tuple(DTYPES)


@pytest.mark.parametrize("call, message", [
    (lambda x: oj.lax_slice1(x, [0, 0, 0, 0], [2, 3, 5, 6], [1, 1, 1, -1]), r"SLICE1: InputWindowOffsets\[3\] \+ "),
    (lambda x: oj.lax_slice1(x, [0, 0, 0, 0], [2, 3, 5, 5], [1, 1, 1, 0]), r"SLICE1: InputWindowStrides\[3\] must"),
    (lambda x: oj.lax_slice_grad(x, [2, 3, 5, 5], [0, 0, 0, 0], [2, 3, 5, 6], [1, 1, 1, 1]), r"SLICE_GRAD: Input"),
    (lambda x: oj.lax_unfold(x, [9, 9], [1, 1], [1, 1], [0, 0], [0, 0]), r"UNFOLD: the dilated window must fit"),
    (lambda x: oj.lax_fold(x[0, :2], [3, 3], [2, 2], [1, 1], [1, 1], [0, 0], [0, 0]), r"FOLD: InputTensor.Sizes\[1\]"),
], ids=["slice1 window", "slice1 stride 0", "slice_grad window", "unfold window", "fold rows"])
def test_the_lax_forms_check_their_arguments(call, message):
    """opendml.jax's lax_* functions, public, check their arguments as the array functions do: before, a
    stride of 0 was a ZeroDivisionError, a window past the input JAX's TypeError, and SLICE_GRAD's a result."""
    x = jnp.arange(2 * 3 * 5 * 5, dtype=jnp.float32).reshape(2, 3, 5, 5)
    with pytest.raises(dml.ValidationError, match=message):
        call(x)
    with pytest.raises(dml.ValidationError, match=message):
        jax.jit(call)(x)
    assert np.array_equal(oj.lax_slice1(x, [1, 0, 1, 0], [1, 3, 4, 5], [1, -2, 3, -2]),
                          dml.slice1(x, [1, 0, 1, 0], [1, 3, 4, 5], [1, -2, 3, -2]))


def test_one_hot_is_a_constant_to_jax_autodiff():
    """one_hot is not differentiated: under jax.grad (eager or jitted) its values get no gradient, as
    PyTorch detaches them; before, JAX raised 'Pure callbacks do not support JVP' from its host callback."""
    indices = jnp.array([0, 7, 2])

    def loss(v):
        return dml.one_hot(indices, 3, v).sum() + 2 * v.sum()
    values = jnp.array([0.0, 1.0])
    assert np.array_equal(jax.grad(loss)(values), [2.0, 2.0])
    assert np.array_equal(jax.jit(jax.grad(loss))(values), [2.0, 2.0])
    assert np.array_equal(jax.jit(lambda v: dml.one_hot(indices, 3, v))(values), dml.one_hot(indices, 3, values))
