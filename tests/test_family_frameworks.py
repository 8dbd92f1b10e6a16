"""The data-movement family's array API on PyTorch, JAX and Dask (and CuPy /
PyTorch CUDA where a GPU is): every result equals the NumPy call byte for
byte; gradients and forward-mode derivatives where the operator is linear;
the adjoint each operator module declares against an independent NumPy
reference; bad inputs raise opendml's errors."""
from __future__ import annotations

import numpy as np
import pytest

import opendml as dml
from opendml.arrays import engine, front
from tests.conftest import cuda_available

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)

#: (name, function of one array, input shape): every family function, with
#: arguments that exercise each mode and order.
CASES = [
    ("identity", lambda x: dml.identity(x), (2, 3, 4)),
    ("identity-scale-bias", lambda x: dml.identity(x, 2.5, -1.0), (2, 3, 4)),
    ("cast-f32", lambda x: dml.cast(x, np.float32), (3, 5)),
    ("cast-f64", lambda x: dml.cast(x, np.float64), (3, 5)),
    ("pad-constant", lambda x: dml.pad(x, [1, 0, 2], [0, 3, 1], "constant", 2.0), (2, 3, 4)),
    ("pad-edge", lambda x: dml.pad(x, [1, 0, 5], [0, 3, 1], "edge"), (2, 3, 4)),
    ("pad-reflect", lambda x: dml.pad(x, [1, 2, 7], [1, 0, 6], "reflect"), (2, 3, 4)),
    ("pad-symmetric", lambda x: dml.pad(x, [1, 2, 9], [2, 0, 5], "symmetric"), (2, 3, 4)),
    ("pad-wrap", lambda x: dml.pad(x, [1, 4, 9], [2, 0, 5], "wrap"), (2, 3, 4)),
    ("join", lambda x: dml.join([x, x[:, :2] * 3, x], 1), (2, 3, 4)),
    ("split", lambda x: dml.split(x, -1, [1, 2, 1]), (2, 3, 4)),
    ("tile", lambda x: dml.tile(x, [2, 1, 3]), (2, 3, 4)),
    ("space_to_depth-DCR", lambda x: dml.space_to_depth(x, 2), (2, 3, 4, 6)),
    ("space_to_depth-CRD", lambda x: dml.space_to_depth(x, 2, "CRD"), (2, 3, 4, 6)),
    ("depth_to_space-DCR", lambda x: dml.depth_to_space(x, 2), (2, 8, 2, 3)),
    ("depth_to_space-CRD", lambda x: dml.depth_to_space(x, 2, "CRD"), (2, 8, 2, 3)),
]
IDS = [c[0] for c in CASES]
#: TILE's newest table has no FLOAT64 (see ops/tile.py).
NO_F64 = {"tile"}


def _data(shape, dtype=np.float32):
    x = RNG.standard_normal(shape) * 4
    return x.astype(dtype)


def _same(got, want):
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def _to_numpy(y):
    if isinstance(y, list):
        return [_to_numpy(v) for v in y]
    if isinstance(y, torch.Tensor):
        return y.detach().cpu().numpy()
    if hasattr(y, "compute"):
        return np.asarray(y.compute())
    return np.asarray(y)


# -- every framework equals NumPy --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int16])
@pytest.mark.parametrize("name,fn,shape", CASES, ids=IDS)
def test_torch_cpu_equals_numpy(name, fn, shape, dtype):
    if name.startswith("identity-scale") and np.dtype(dtype).kind != "f":
        pytest.skip("ScaleBias is for float types")
    x = _data(shape, dtype)
    want = fn(x)
    got = fn(torch.from_numpy(x))
    assert isinstance(got[0] if isinstance(got, list) else got, torch.Tensor)
    _same(_to_numpy(got), want)


@pytest.mark.parametrize("name,fn,shape", CASES, ids=IDS)
def test_torch_views_equal_numpy(name, fn, shape):
    """Transposed, sliced (padded strides) and broadcast inputs are read where they lie."""
    big = _data(tuple(2 * s + 1 for s in reversed(shape)))
    t = torch.from_numpy(big).permute(*reversed(range(len(shape))))[tuple(slice(1, 2 * s + 1, 2) for s in shape)]
    assert tuple(t.shape) == shape and not t.is_contiguous()
    _same(_to_numpy(fn(t)), fn(t.numpy()))
    b = torch.from_numpy(_data(shape[:-1] + (1,))).expand(shape)
    _same(_to_numpy(fn(b)), fn(b.numpy()))


@pytest.mark.parametrize("name,fn,shape", CASES, ids=IDS)
def test_jax_equals_numpy(name, fn, shape):
    jax = pytest.importorskip("jax")
    x = _data(shape)
    want = fn(x)
    if not jax.config.jax_enable_x64 and (want[0] if isinstance(want, list) else want).dtype.itemsize == 8:
        with pytest.raises(dml.UnsupportedError, match=r"64-bit type, which JAX has turned off"):
            fn(jax.numpy.asarray(x))
        return
    got = fn(jax.numpy.asarray(x))
    assert isinstance(got[0] if isinstance(got, list) else got, jax.Array)
    _same(_to_numpy(got), want)
    _same(_to_numpy(jax.jit(fn)(jax.numpy.asarray(x))), want)          # traced: through pure_callback


@pytest.mark.parametrize("name,fn,shape", CASES, ids=IDS)
def test_dask_equals_numpy(name, fn, shape):
    da = pytest.importorskip("dask.array")
    x = _data(shape)
    d = da.from_array(x, chunks=tuple(max(1, s // 2) for s in shape))
    got = fn(d)
    first = got[0] if isinstance(got, list) else got
    assert isinstance(first, da.Array)
    _same(_to_numpy(got), fn(x))


def test_dask_is_lazy_and_keeps_elementwise_chunks():
    da = pytest.importorskip("dask.array")
    calls = []

    def block(b):
        calls.append(b.shape)
        return b
    d = da.from_array(_data((6, 8)), chunks=(2, 4)).map_blocks(block, meta=np.empty((0, 0), np.float32))
    calls.clear()
    y = dml.identity(d, 2.0, 1.0)
    c = dml.cast(d, np.int32)
    assert calls == []                                                  # nothing computed
    c.compute()
    assert sorted(calls) == [(2, 4)] * 6
    assert y.chunks == d.chunks and c.chunks == d.chunks
    p = dml.pad(d, [0, 1], [0, 2], "reflect")
    assert p.chunks == ((2, 2, 2), (11,))                               # only the padded axis is whole
    s2d = dml.space_to_depth(da.from_array(_data((2, 3, 8, 6)), chunks=(1, 1, 3, 4)), 2)
    assert s2d.chunks == ((1, 1), (12,), (1, 2, 1), (2, 1))            # spatial chunks cut at multiples of 2


def test_dask_split_and_join_share_the_graph_and_equal_numpy():
    da = pytest.importorskip("dask.array")
    x = _data((4, 9))
    d = da.from_array(x, chunks=(1, 4))
    parts = dml.split(d, 1, [2, 7])
    _same([np.asarray(p.compute()) for p in parts], dml.split(x, 1, [2, 7]))
    joined = dml.join(parts[::-1], 1)
    _same(np.asarray(joined.compute()), dml.join(dml.split(x, 1, [2, 7])[::-1], 1))


@pytest.mark.cuda
@pytest.mark.parametrize("name,fn,shape", CASES, ids=IDS)
def test_torch_cuda_and_cupy_equal_numpy(name, fn, shape):
    if not cuda_available():
        pytest.skip("CUDA is not available here")
    x = _data(shape)
    want = fn(x)
    _same(_to_numpy(fn(torch.from_numpy(x).cuda())), want)
    cupy = pytest.importorskip("cupy")
    got = fn(cupy.asarray(x))
    _same([v.get() for v in got] if isinstance(got, list) else got.get(), want)


# -- PyTorch autograd ---------------------------------------------------------------------------------

def _scalarised(fn):
    """The function's outputs, a tuple of tensors (split's list too)."""
    def f(x):
        y = fn(x)
        return tuple(y) if isinstance(y, list) else y
    return f


@pytest.mark.parametrize("name,fn,shape", [c for c in CASES if c[0] not in ("cast-f32",) and
                                           c[0].split("-")[0] not in NO_F64], ids=lambda v: v if isinstance(v, str)
                         else "")
def test_torch_gradcheck_gradgradcheck_and_forward_ad(name, fn, shape):
    x = torch.from_numpy(_data(shape, np.float64)).requires_grad_()
    f = _scalarised(fn)
    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,))
    assert torch.autograd.gradcheck(f, (x,), check_forward_ad=True, check_backward_ad=False,
                                    check_undefined_grad=False, check_batched_grad=False)
    y = f(x)
    out = y[0] if isinstance(y, tuple) else y
    assert type(out.grad_fn).__name__.startswith("opendml_")


def test_torch_tile_gradients_equal_repeat():
    x = torch.from_numpy(_data((2, 3, 4))).requires_grad_()
    g = torch.from_numpy(_data((4, 3, 12)))
    (got,) = torch.autograd.grad(dml.tile(x, [2, 1, 3]), x, g)
    (want,) = torch.autograd.grad(x.repeat(2, 1, 3), x, g)
    torch.testing.assert_close(got, want)
    with torch.autograd.forward_ad.dual_level():
        t = torch.from_numpy(_data((2, 3, 4)))
        out = dml.tile(torch.autograd.forward_ad.make_dual(x.detach(), t), [2, 1, 3])
        assert torch.equal(torch.autograd.forward_ad.unpack_dual(out).tangent, t.repeat(2, 1, 3))


def test_torch_cast_gradient_casts_back():
    x = torch.from_numpy(_data((3, 4), np.float64)).requires_grad_()
    y = dml.cast(x, np.float32)
    assert y.dtype == torch.float32
    g = torch.from_numpy(_data((3, 4)))
    (gx,) = torch.autograd.grad(y, x, g)
    assert gx.dtype == torch.float64 and torch.equal(gx, g.double())
    assert not dml.cast(x, np.int32).requires_grad                       # to an integer: no gradient


def test_torch_affine_parts_are_not_in_the_tangent():
    """IDENTITY's Bias and a constant pad's value are constants: the JVP is the linear part."""
    from torch.func import jvp
    x = torch.from_numpy(_data((2, 3), np.float64))
    t = torch.ones_like(x)
    _, tan = jvp(lambda v: dml.identity(v, 3.0, 5.0), (x,), (t,))
    assert torch.equal(tan, 3 * t)
    _, tan = jvp(lambda v: dml.pad(v, 1, 1, "constant", 9.0), (x,), (t,))
    assert torch.equal(tan, torch.nn.functional.pad(t, (1, 1, 1, 1)))


@pytest.mark.parametrize("mode,tmode", [("constant", "constant"), ("edge", "replicate"), ("reflect", "reflect"),
                                        ("wrap", "circular")])
def test_torch_func_grad_and_vmap_match_f_pad(mode, tmode):
    from torch.func import grad, jacrev, vmap
    x = torch.from_numpy(_data((2, 3, 5), np.float64))

    def ours(v):
        return (dml.pad(v, [0, 0, 2], [0, 0, 3], mode) ** 2).sum()

    def theirs(v):
        return (torch.nn.functional.pad(v, (2, 3), tmode) ** 2).sum()
    torch.testing.assert_close(grad(ours)(x), grad(theirs)(x))
    torch.testing.assert_close(vmap(lambda v: dml.pad(v, [0, 2], [0, 3], mode))(x),
                               torch.nn.functional.pad(x, (2, 3), tmode))
    torch.testing.assert_close(jacrev(lambda v: dml.pad(v, [0, 0, 2], [0, 0, 3], mode))(x),
                               jacrev(lambda v: torch.nn.functional.pad(v, (2, 3), tmode))(x))


def test_torch_compile_gives_the_same_results_and_gradients():
    x = torch.from_numpy(_data((2, 3, 4))).requires_grad_()
    f = torch.compile(lambda v: dml.pad(v, 1, 2, "reflect") * 2, backend="eager")
    y = f(x)
    assert torch.equal(y, dml.pad(x, 1, 2, "reflect") * 2)
    (g,) = torch.autograd.grad(y.sum(), x)
    (want,) = torch.autograd.grad((dml.pad(x, 1, 2, "reflect") * 2).sum(), x)
    assert torch.equal(g, want)
    from torch.fx.experimental.proxy_tensor import make_fx
    traced = make_fx(lambda v: dml.pad(v, 1, 1))(x.detach())       # traced through opendml(_cpp)::move
    assert "opendml.move" in str(traced.graph) or "opendml_cpp.move" in str(traced.graph)
    assert torch.equal(traced(x.detach()), dml.pad(x.detach(), 1, 1))


def test_the_move_operator_runs_every_operator_the_first_five_too():
    """``opendml::move`` takes any registered operator's JSON form: a SLICE1
    (whose array-API calls have their own custom operator) runs, traces and
    differentiates like the array function."""
    from opendml.arrays.torch import library
    from opendml.jsonform import from_json
    x = torch.from_numpy(_data((2, 3, 4))).requires_grad_()
    desc = from_json({"Operator": "SLICE1", "InputTensor": {"DataType": "FLOAT32", "Sizes": [2, 3, 4]},
                      "InputWindowOffsets": [0, 1, 0], "InputWindowSizes": [2, 2, 4], "InputWindowStrides": [1, -1, 2]})
    text = library.to_text(desc)
    (y,) = torch.ops.opendml.move([x], text)
    want = dml.slice1(x, [0, 1, 0], [2, 2, 4], [1, -1, 2])
    assert torch.equal(y, want)
    g = torch.from_numpy(_data(tuple(want.shape)))
    assert torch.equal(torch.autograd.grad(y, x, g)[0], torch.autograd.grad(want, x, g)[0])
    from torch.fx.experimental.proxy_tensor import make_fx
    traced = make_fx(lambda v: torch.ops.opendml.move([v], text)[0])(x.detach())
    assert torch.equal(traced(x.detach()), want.detach())


# -- JAX gradients against jax.numpy --------------------------------------------------------------------

JAX_REFS = [
    ("identity", lambda v: dml.identity(v, 2.5, 1.0), lambda v, jnp: v * np.float32(2.5) + 1.0),
    ("cast", lambda v: dml.cast(v, np.float16), lambda v, jnp: v.astype(np.float16)),
    ("pad-constant", lambda v: dml.pad(v, [0, 1, 2], [1, 0, 3], "constant", 3.0),
     lambda v, jnp: jnp.pad(v, [(0, 1), (1, 0), (2, 3)], constant_values=3.0)),
    ("pad-edge", lambda v: dml.pad(v, [0, 1, 2], [1, 0, 3], "edge"),
     lambda v, jnp: jnp.pad(v, [(0, 1), (1, 0), (2, 3)], "edge")),
    ("pad-reflect", lambda v: dml.pad(v, [0, 1, 2], [1, 0, 3], "reflect"),
     lambda v, jnp: jnp.pad(v, [(0, 1), (1, 0), (2, 3)], "reflect")),
    ("pad-symmetric", lambda v: dml.pad(v, [0, 1, 2], [1, 0, 3], "symmetric"),
     lambda v, jnp: jnp.pad(v, [(0, 1), (1, 0), (2, 3)], "symmetric")),
    ("pad-wrap", lambda v: dml.pad(v, [0, 1, 2], [1, 0, 3], "wrap"),
     lambda v, jnp: jnp.pad(v, [(0, 1), (1, 0), (2, 3)], "wrap")),
    ("join", lambda v: dml.join([v, v[:, :1] * 2], 1), lambda v, jnp: jnp.concatenate([v, v[:, :1] * 2], 1)),
    ("split", lambda v: dml.split(v, 2, [1, 3])[1] * dml.split(v, 2, [3, 1])[0][..., :3],
     lambda v, jnp: v[..., 1:] * v[..., :3]),
    ("tile", lambda v: dml.tile(v, [1, 2, 3]), lambda v, jnp: jnp.tile(v, [1, 2, 3])),
]


@pytest.mark.parametrize("name,ours,ref", JAX_REFS, ids=[r[0] for r in JAX_REFS])
def test_jax_grad_matches_jax_numpy(name, ours, ref):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = jnp.asarray(_data((2, 3, 4)))

    def loss(f):
        return lambda v: (f(v) ** 2).sum()
    want = jax.grad(loss(lambda v: ref(v, jnp)))(x)
    np.testing.assert_allclose(jax.grad(loss(ours))(x), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(jax.jit(jax.grad(loss(ours)))(x), want, rtol=1e-5, atol=1e-5)
    second = jax.grad(lambda v: jax.grad(loss(ours))(v).sum())(x)
    np.testing.assert_allclose(second, jax.grad(lambda v: jax.grad(loss(lambda u: ref(u, jnp)))(v).sum())(x),
                               rtol=1e-5, atol=1e-5)


def test_jax_space_depth_gradients_are_each_others_inverse():
    jax = pytest.importorskip("jax")
    x = jax.numpy.asarray(_data((1, 2, 4, 6)))
    w = jax.numpy.asarray(_data((1, 8, 2, 3)))
    for order in ("DCR", "CRD"):
        g = jax.grad(lambda v: (dml.space_to_depth(v, 2, order) * w).sum())(x)
        _same(np.asarray(g), dml.depth_to_space(np.asarray(w), 2, order))


# -- the declared adjoints against an independent reference ------------------------------------------

def _s2d_ref(x, b, order):
    n, c, hb, wb = x.shape
    y = x.reshape(n, c, hb // b, b, wb // b, b)
    y = y.transpose(0, 3, 5, 1, 2, 4) if order == "DCR" else y.transpose(0, 1, 3, 5, 2, 4)
    return y.reshape(n, c * b * b, hb // b, wb // b)


def _d2s_ref(x, b, order):
    n, cbb, h, w = x.shape
    c = cbb // (b * b)
    y = x.reshape(n, b, b, c, h, w).transpose(0, 3, 4, 1, 5, 2) if order == "DCR" else \
        x.reshape(n, c, b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c, h * b, w * b)


_NP_MODES = {"constant": "constant", "edge": "edge", "reflect": "reflect", "symmetric": "symmetric",
             "wrap": "wrap"}

#: (name, description-making call on numpy (returns the array API's output), independent reference, shape)
ADJOINT_CASES = [
    ("identity", lambda x: dml.identity(x, 3.0, 2.0), lambda x: x * 3.0 + 2.0, (2, 3, 4)),
    ("cast", lambda x: dml.cast(x, np.float32), lambda x: x.astype(np.float32), (3, 4)),
    *[(f"pad-{m}", (lambda m: lambda x: dml.pad(x, [1, 4, 7], [2, 0, 9], m))(m),
       (lambda m: lambda x: np.pad(x, [(1, 2), (4, 0), (7, 9)], _NP_MODES[m]))(m), (2, 3, 4))
      for m in ("constant", "edge", "reflect", "symmetric", "wrap")],
    ("pad-size-1", lambda x: dml.pad(x, [3, 0], [2, 5], "reflect"), None, (1, 3)),
    ("join", lambda x: dml.join([x, x[:, 1:]], 1), lambda x: np.concatenate([x, x[:, 1:]], 1), (2, 3, 4)),
    ("tile", lambda x: dml.tile(x.astype(np.float32), [2, 3, 1]).astype(np.float64),
     lambda x: np.tile(x, [2, 3, 1]), (2, 3, 4)),
    ("space_to_depth-DCR", lambda x: dml.space_to_depth(x, 2), lambda x: _s2d_ref(x, 2, "DCR"), (1, 3, 4, 6)),
    ("space_to_depth-CRD", lambda x: dml.space_to_depth(x, 2, "CRD"), lambda x: _s2d_ref(x, 2, "CRD"), (1, 3, 4, 6)),
    ("depth_to_space-DCR", lambda x: dml.depth_to_space(x, 2), lambda x: _d2s_ref(x, 2, "DCR"), (1, 12, 2, 3)),
    ("depth_to_space-CRD", lambda x: dml.depth_to_space(x, 2, "CRD"), lambda x: _d2s_ref(x, 2, "CRD"),
     (1, 12, 2, 3)),
]


class _Capture:
    """Records the description a family call builds (its validated desc)."""

    def __init__(self, monkeypatch):
        self.descs = []
        real = engine.execute

        def spy(desc, arrays):
            self.descs.append(desc)
            return real(desc, arrays)
        monkeypatch.setattr(engine, "execute", spy)


@pytest.mark.parametrize("name,fn,ref,shape", ADJOINT_CASES, ids=[c[0] for c in ADJOINT_CASES])
def test_declared_adjoint_satisfies_the_inner_product_identity(name, fn, ref, shape, monkeypatch):
    """<op(x), y> == <x, adjoint(y)> with integer-valued data (exact sums), op computed by an independent
    NumPy reference, adjoint by what the operator module declares."""
    x = np.round(RNG.standard_normal(shape) * 8)
    cap = _Capture(monkeypatch)
    out = fn(x)
    desc = cap.descs[-1]
    monkeypatch.undo()
    want = ref(x) if ref is not None else out
    if ref is not None:
        np.testing.assert_array_equal(out, want.astype(out.dtype))          # the operator is what we think
    y = np.round(RNG.standard_normal(want.shape) * 8).astype(out.dtype)
    (adj,) = front.adjoint(desc, [y])[:1] if len(desc.inputs) == 1 else (front.adjoint(desc, [y]),)
    if isinstance(adj, tuple):                                              # JOIN: one per input
        lhs = float(np.sum(want.astype(np.float64) * y))
        # x appears twice (x and x[:, 1:]): the adjoint of the input map adds both
        rhs = float(np.sum(x * adj[0]) + np.sum(x[:, 1:] * adj[1]))
    else:
        assert adj.shape == x.shape
        lin = want - (2.0 if name == "identity" else 0.0)                  # IDENTITY's Bias is no part of it
        lhs, rhs = float(np.sum(lin.astype(np.float64) * y)), float(np.sum(x * adj.astype(np.float64)))
    assert lhs == rhs


def test_split_adjoint_is_join(monkeypatch):
    x = np.round(RNG.standard_normal((3, 7)) * 8)
    cap = _Capture(monkeypatch)
    parts = dml.split(x, 1, [2, 4, 1])
    desc = cap.descs[-1]
    ys = [np.round(RNG.standard_normal(p.shape) * 8) for p in parts]
    (adj,) = front.adjoint(desc, ys)
    assert float(sum(np.sum(p * y) for p, y in zip(np.split(x, [2, 6], 1), ys))) == float(np.sum(x * adj))
    _same(adj, np.concatenate(ys, 1))


def test_every_operator_declares_its_adjoint_and_chunking():
    """The one operator contract: every registered operator (no list or count
    written here) declares ``linear_part``, ``adjoint`` and ``chunking``, the
    first five included, and the framework routes read them."""
    from opendml.ops import OPERATORS
    assert OPERATORS
    for cls in OPERATORS.values():
        for method in ("linear_part", "adjoint", "chunking"):
            assert callable(getattr(cls, method, None)), (cls.OPERATOR, method)


def test_pad_adjoint_runs_cover_every_border_position():
    from opendml.ops.padding import pad_axis_runs
    from opendml.plan import AxisMap
    for mode in (1, 2, 3, 4):
        for n in (1, 2, 3, 5):
            for s, e in ((0, 0), (1, 0), (0, 4), (7, 11), (n, n)):
                amap = AxisMap(mode, s, n)
                seen = {}
                for o, length, i, step in pad_axis_runs(mode, s, e, n):
                    assert step in (-1, 0, 1)
                    for j in range(length):
                        seen[o + j] = i + step * j
                assert seen == {o: amap.source(o) for o in list(range(s)) + list(range(s + n, s + n + e))}


# -- bad inputs ---------------------------------------------------------------------------------------

def test_bad_inputs_raise_opendml_errors():
    x = torch.zeros((2, 3, 4, 4))
    with pytest.raises(dml.ValidationError, match=r"^join: every array must be of one framework"):
        dml.join([x, np.zeros((2, 3, 4, 4), np.float32)], 0)
    with pytest.raises(dml.UnsupportedError, match=r"^tile: x's dtype torch.bool is not supported by TILE"):
        dml.tile(torch.zeros(3, dtype=torch.bool), [2])
    with pytest.raises(dml.ValidationError, match=r"SPACE_TO_DEPTH1: InputTensor.Sizes\[2\] \(Height\) must be a "
                                                   r"multiple of BlockSize 3"):
        dml.space_to_depth(x, 3)
    with pytest.raises(dml.ValidationError, match=r"^split: axis must be in"):
        dml.split(x, 4, [1, 1])
    with pytest.raises(dml.ValidationError, match=r"SPLIT: the OutputTensors' Sizes\[0\] must sum"):
        dml.split(x.requires_grad_(), 0, [1, 2])
    with pytest.raises(dml.ValidationError, match=r"^pad: x must be a NumPy, CuPy, PyTorch, JAX or Dask array; "
                                                   r"got builtins.str$"):
        dml.pad("abc", 1, 1)


def test_bad_inputs_raise_opendml_errors_on_jax_and_dask():
    jax = pytest.importorskip("jax")
    da = pytest.importorskip("dask.array")
    with pytest.raises(dml.ValidationError, match=r"TILE: Repeats"):
        jax.jit(lambda v: dml.tile(v, [0, 1]))(jax.numpy.zeros((2, 2)))
    with pytest.raises(dml.UnsupportedError, match=r"^identity: x's dtype bool is not supported by "
                                                   r"ELEMENT_WISE_IDENTITY"):
        dml.identity(jax.numpy.zeros(3, bool))
    d = da.from_array(np.zeros((4, 4), np.float32), chunks=2)
    with pytest.raises(dml.ValidationError, match=r"PADDING1: StartPadding\[0\] must be in"):
        dml.pad(d, [-1, 0], 0)
    unknown = d[d[:, 0] > 0]
    with pytest.raises(dml.ValidationError, match=r"^identity: the chunk sizes of x are unknown"):
        dml.identity(unknown)


def test_torch_func_vmap_runs_operators_not_differentiable_for_their_types():
    """vmap needs no derivative: CAST to an integer type and ONE_HOT run
    under it, equal to the calls one example at a time; a derivative of
    them (grad, jvp) is refused by name."""
    torch = pytest.importorskip("torch")
    x = torch.randn(3, 4, 5)
    got = torch.func.vmap(lambda t: dml.cast(t, torch.int32))(x)
    assert torch.equal(got, torch.stack([dml.cast(t, torch.int32) for t in x]))
    ids, values = torch.tensor([[1, 2], [0, 3]]), torch.tensor([0.0, 1.0])
    got = torch.func.vmap(lambda i: dml.one_hot(i, 4, values))(ids)
    assert torch.equal(got, torch.stack([dml.one_hot(i, 4, values) for i in ids]))
    with pytest.raises(dml.UnsupportedError, match=r"^one_hot: ONE_HOT is not differentiable for these types$"):
        torch.func.grad(lambda v: dml.one_hot(ids[0], 4, v).sum())(values)
    with pytest.raises(dml.UnsupportedError, match=r"^cast: CAST is not differentiable for these types$"):
        torch.func.jvp(lambda t: dml.cast(t, torch.int32), (x,), (x,))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap"])
def test_pad_longer_than_the_axis_is_taken_in_every_mode(mode):
    """``pad``'s docstring: padding longer than the axis is taken in every mode; reflect, symmetric and wrap then
    repeat periodically (NumPy's ``pad`` does the same)."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert np.array_equal(dml.pad(x, [5, 7], [4, 8], mode), np.pad(x, [(5, 4), (7, 8)], mode))
