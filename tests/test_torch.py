"""opendml on PyTorch tensors: the custom operators (opcheck, gradcheck,
gradgradcheck, fake implementations, torch.compile), the two routes of the
array API (kernels directly, or the operators when autograd or a tracer needs
them), the Unfold/Fold modules, dtypes, and CUDA streams and devices."""
import math
import subprocess
import sys

import numpy as np
import pytest

from . import reference as ref

torch = pytest.importorskip("torch")

import opendml as dml  # noqa: E402
from tests.conftest import unpack_dual_batches  # noqa: E402
import opendml.torch as dmlt  # noqa: E402
from opendml.arrays.torch import adapter  # noqa: E402

F = torch.nn.functional
SUPPORTED = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
             "uint64"]


def cuda_ok() -> bool:
    from .conftest import cuda_available
    return torch.cuda.is_available() and cuda_available()


needs_cuda = pytest.mark.skipif("not cuda_ok()", reason="CUDA (PyTorch and opendml's backend) is not available")


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def device(request):
    if request.param == "cuda" and not cuda_ok():
        pytest.skip("CUDA is not available here")
    return request.param


def arange(*shape, dtype=torch.float64, device="cpu"):
    """Each element its own flat index, so a wrong element names its source."""
    return torch.arange(math.prod(shape), dtype=torch.float64).reshape(shape).to(dtype=dtype, device=device)


def slice1_ref(x, offsets, sizes, strides):
    """SLICE1 with PyTorch indexing: a negative stride walks the window from its end."""
    for d, (o, s, t) in enumerate(zip(offsets, sizes, strides)):
        x = x.narrow(d, o, s)
        if t < 0:
            x = x.flip(d)
        x = x[(slice(None),) * d + (slice(None, None, abs(t)),)]
    return x


def slice_grad_ref(g, input_sizes, offsets, sizes, strides):
    """Zeros of ``input_sizes`` with g[c] put where SLICE1 reads its element c."""
    out = torch.zeros(input_sizes, dtype=g.dtype, device=g.device)
    index = [torch.arange(n, device=g.device) * t + (o + s - 1 if t < 0 else o)
             for n, o, s, t in zip(g.shape, offsets, sizes, strides)]
    out[torch.meshgrid(*index, indexing="ij")] = g
    return out


# (window_sizes, strides, dilations, start_padding, end_padding) on an input shape
UNFOLD_CASES = [
    ((2, 3, 5, 4), ([2, 3], [1, 2], [2, 1], [1, 0], [0, 2])),
    ((1, 2, 6, 6), ([3, 3], [1, 1], [1, 1], [1, 1], [1, 1])),
    ((2, 2, 7), ([3], [2], [2], [2], [0])),
    ((1, 2, 3, 4, 5), ([2, 2, 3], [1, 2, 1], [1, 1, 2], [0, 1, 1], [1, 0, 1])),
]
# (offsets, window sizes, window strides) on an input shape
SLICE1_CASES = [
    ((1, 1, 4, 4), ([0, 0, 0, 1], [1, 1, 4, 3], [1, 1, -2, 2])),
    ((2, 3, 5, 4), ([0, 1, 1, 0], [2, 2, 4, 4], [1, -1, -2, 3])),
    ((6,), ([1], [5], [-3])),
]


def unfold_ref(x, window, strides, dilations, start, end):
    out = ref.unfold(x.detach().cpu().numpy(), window, strides, dilations, start, end)
    return torch.from_numpy(out).to(x.device)


def fold_args(shape, params):
    """A FOLD call that is the adjoint of the UNFOLD case: its input shape and arguments."""
    window, strides, dilations, start, end = params
    blocks = [(s + a + b - d * (w - 1) - 1) // st + 1
              for s, w, st, d, a, b in zip(shape[2:], window, strides, dilations, start, end)]
    return (shape[0], shape[1] * math.prod(window), math.prod(blocks)), (list(shape[2:]), *params)


# -- import -------------------------------------------------------------------------------------------

def test_import_opendml_never_imports_torch():
    code = ("import sys, numpy as np, opendml as dml; dml.slice1(np.arange(4.0), [0], [4], [-1]); "
            "dml.unfold(np.zeros((1, 1, 3)), 2); assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the operators -------------------------------------------------------------------------------------

def op_cases(device, dtype=torch.float64):
    """(operator, args) for every operator over the case tables."""
    cases = []
    for shape, params in UNFOLD_CASES:
        cases.append((dmlt.unfold_op, (arange(*shape, dtype=dtype, device=device), *map(list, params))))
        in_shape, args = fold_args(shape, params)
        cases.append((dmlt.fold_op, (arange(*in_shape, dtype=dtype, device=device), *map(list, args))))
    for shape, (offsets, sizes, strides) in SLICE1_CASES:
        cases.append((dmlt.slice1_op, (arange(*shape, dtype=dtype, device=device), offsets, sizes, strides)))
        g_shape = [1 + (s - 1) // abs(t) for s, t in zip(sizes, strides)]
        cases.append((dmlt.slice_grad_op, (arange(*g_shape, dtype=dtype, device=device), list(shape), offsets,
                                           sizes, strides)))
        # SLICE in the same window, forwards: its element counts and the strides' sizes
        cases.append((dmlt.slice_op, (arange(*shape, dtype=dtype, device=device), offsets, g_shape,
                                      [abs(t) for t in strides])))
    return cases


def case_id(case):
    op, args = case
    return f"{op._opname}-{'x'.join(map(str, args[0].shape))}"


@pytest.mark.parametrize("index", range(len(op_cases("cpu"))), ids=[case_id(c) for c in op_cases("cpu")])
def test_opcheck(index, device):
    op, args = op_cases(device)[index]
    for first in (args[0], args[0].clone().requires_grad_()):
        result = torch.library.opcheck(op, (first, *args[1:]))
        assert set(result.values()) == {"SUCCESS"}, result


@pytest.mark.parametrize("index", range(len(op_cases("cpu"))), ids=[case_id(c) for c in op_cases("cpu")])
def test_gradcheck_and_gradgradcheck(index, device):
    op, args = op_cases(device)[index]
    x = torch.randn(args[0].shape, dtype=torch.float64, device=device, requires_grad=True)

    def f(x):
        return op(x, *args[1:])
    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,))


def check_func_transforms(fn, x):
    """``torch.func``'s transforms of ``fn`` (a raw operator's call, linear in its float64 tensor ``x``)
    against ``torch.autograd`` on the same operator: ``grad``, ``jacrev`` and ``jacfwd``, ``hessian`` (zero
    for the call itself, 2 J^T diag(w) J for a weighted square of it), ``grad`` of ``grad``, ``vmap`` of
    ``grad``. (Before the operators' node took functorch's levels, each reverse-mode transform raised
    PyTorch's "must override the setup_context staticmethod".)"""
    g = torch.Generator().manual_seed(0)
    w = torch.randn(fn(x).shape, dtype=x.dtype, generator=g).to(x.device)

    def loss(v):
        return (fn(v).square() * w).sum()

    def autograd_grad(v, of=loss):
        v = v.detach().requires_grad_()
        return torch.autograd.grad(of(v), v)[0]
    func, exact = torch.func, {"rtol": 0, "atol": 0}
    torch.testing.assert_close(func.grad(loss)(x), autograd_grad(x), **exact)
    jacobian = torch.autograd.functional.jacobian(fn, x)
    torch.testing.assert_close(func.jacrev(fn)(x), jacobian, **exact)
    torch.testing.assert_close(func.jacfwd(fn)(x), jacobian, **exact)
    flat = jacobian.reshape(-1, x.numel())
    torch.testing.assert_close(func.hessian(loss)(x), (2 * flat.T @ (w.reshape(-1, 1) * flat)).reshape(
        *x.shape, *x.shape))
    assert not func.hessian(lambda v: (fn(v) * w).sum())(x).any()
    u = torch.randn(x.shape, dtype=x.dtype, generator=g).to(x.device)
    torch.testing.assert_close(func.grad(lambda v: (func.grad(loss)(v) * u).sum())(x),
                               autograd_grad(x, lambda v: (torch.autograd.grad(loss(v), v, create_graph=True)[0]
                                                           * u).sum()), **exact)
    xs = torch.stack([x, -2 * x, x.flip(-1)])
    torch.testing.assert_close(func.vmap(func.grad(loss))(xs), torch.stack([autograd_grad(v) for v in xs]),
                               **exact)


@pytest.mark.parametrize("index", range(len(op_cases("cpu"))), ids=[case_id(c) for c in op_cases("cpu")])
def test_func_transforms_of_the_operators(index, device):
    op, args = op_cases(device)[index]
    x = torch.randn(args[0].shape, dtype=torch.float64, generator=torch.Generator().manual_seed(index)).to(device)
    check_func_transforms(lambda v: op(v, *args[1:]), x)


@pytest.mark.parametrize("compiled_inside", [True, False], ids=["grad-of-compiled", "compiled-grad"])
def test_func_grad_and_torch_compile_of_the_operators(compiled_inside):
    """``torch.func.grad`` around ``torch.compile(dynamic=True)`` of a raw operator's call (Dynamo skips the
    transform's frames, and must compile none of those the operator's kernel runs), and ``torch.compile``
    around ``torch.func.grad``: the eager gradient."""
    for op, args in [op_cases("cpu")[i] for i in (0, 1, 8, 9)]:      # unfold, fold, slice1, slice_grad
        x = torch.randn(args[0].shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))

        def loss(v):
            return op(v, *args[1:]).square().sum()
        v = x.clone().requires_grad_()
        want = torch.autograd.grad(loss(v), v)[0]
        torch._dynamo.reset()
        grad = (torch.func.grad(torch.compile(loss, backend="aot_eager", dynamic=True)) if compiled_inside else
                torch.compile(torch.func.grad(loss), backend="aot_eager"))
        torch.testing.assert_close(grad(x), want, rtol=0, atol=0)


#: The window operators' cases in ``op_cases``: unfold, fold, slice1, slice_grad, slice.
WINDOW_CASES = (0, 1, 8, 9, 10)


@pytest.mark.skipif(not unpack_dual_batches(), reason="this PyTorch has no batching rule for "
                    "aten::_unpack_dual, which a compiled jacfwd reaches")
@pytest.mark.parametrize("index", WINDOW_CASES, ids=[case_id(op_cases("cpu")[i]) for i in WINDOW_CASES])
def test_torch_compile_of_forward_mode_on_the_operators(index):
    """``torch.compile`` around ``torch.func.jacfwd`` and ``hessian`` of a raw operator's call: eager's values.
    A graph Dynamo compiled enters its jvp's dual level through ``torch._C``, leaving
    ``forward_ad._current_level`` at -1, which the operators' autograd kernel took for no dual level: it
    dropped the tangents (functorch's ``_unwrap_for_grad()`` invoked with None)."""
    op, args = op_cases("cpu")[index]
    x = torch.randn(args[0].shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))

    def fn(v):
        return op(v, *args[1:])
    for transform in (torch.func.jacfwd(fn), torch.func.hessian(lambda v: fn(v).square().sum())):
        want = transform(x)
        for backend in ("eager", "aot_eager"):
            torch._dynamo.reset()
            torch.testing.assert_close(torch.compile(transform, backend=backend)(x), want, rtol=0, atol=0)


@pytest.mark.xfail(strict=True, reason=(
    "a compiled function opening its own forward_ad.dual_level: its graph enters the level through torch._C, "
    "leaving forward_ad._current_level at -1 with no torch.func transform active, so the operators' autograd "
    "kernel (library.define) sees no dual level and its outputs get no tangent; the open level is visible "
    "cheaply only in C++ (ForwardADLevel::try_get_by_idx(0): 26 ns a call from a C++ extension, against 20 ns "
    "for reading _current_level), so only where the node library is loaded (not with torch_node='off', "
    "without a compiler, or before its build ends: values would differ by route); in Python the one signal is "
    "each input's tangent (torch._VF._unpack_dual: 2.5 us a tensor on every call, an aten.alias in every "
    "traced graph, an error on sparse tensors before the operators' own)"), raises=AssertionError)
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_torch_compile_of_a_dual_level_on_the_operators(backend):
    import torch.autograd.forward_ad as fwad
    x, t = (torch.randn(2, 3, 5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(s)) for s in (0, 1))

    def tangent(v, u):
        with fwad.dual_level():
            return fwad.unpack_dual(dmlt.unfold_op(fwad.make_dual(v, u), *map(list, UNFOLD_CASES[0][1]))).tangent
    want = tangent(x, t)
    torch._dynamo.reset()
    got = torch.compile(tangent, backend=backend)(x, t)
    assert got is not None, "the compiled call's output has no tangent"
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def _raised(fn, *args):
    with pytest.raises(Exception) as info:
        fn(*args)
    return info.value


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "PyTorch: Dynamo wraps every exception but IndexError that a call raises while it traces (its fake run) in "
    "its own TorchRuntimeError, PyTorch's operators' errors too; the wrapper names the error's class and carries "
    "its message (test_route_matrix: test_torch_compile_dynamic_scalar_argument_refused)"))
def test_an_error_raised_while_dynamo_traces_is_the_eager_error_itself():
    x = torch.arange(24.0).reshape(2, 3, 4)
    fn = lambda t, axis: dml.join([t, t], axis)  # noqa: E731
    compiled = torch.compile(fn, backend="aot_eager", dynamic=True, fullgraph=True)
    torch._dynamo.reset()
    assert torch.equal(compiled(x, 0), fn(x, 0))
    eager, got = _raised(fn, x, 3), _raised(compiled, x, 3)
    assert str(eager) in str(got) and f"{type(eager).__name__}(" in str(got)
    assert (type(got), str(got)) == (type(eager), str(eager))


@pytest.mark.xfail(strict=True, raises=RuntimeError, reason=(
    "PyTorch: a gradient of a gradient through a graph torch.compile made raises AOTAutograd's 'torch.compile "
    "with aot_autograd does not currently support double backward', for PyTorch's own operators too; "
    "torch.func transforms inside the compiled function take any order"))
def test_double_backward_through_a_compiled_call():
    fn = lambda t: dml.pad(t, 1, 1, mode="reflect").square().sum()  # noqa: E731

    def second(f):
        x = torch.arange(24.0).reshape(2, 3, 4).requires_grad_()
        (first,) = torch.autograd.grad(f(x), x, create_graph=True)
        first.square().sum().backward()
        return first.detach(), x.grad
    want = second(fn)
    torch._dynamo.reset()
    got = second(torch.compile(fn, backend="aot_eager"))
    assert all(torch.equal(a, b) for a, b in zip(got, want))


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_a_compiled_index_function_with_a_numpy_axis_checks_its_indices(dynamic):
    """Dynamo passes a NumPy integer (an axis) on as a 0-d tensor, which has no text form: it is read as its
    int where that describes the same call, so the graph checks each call's indices as eagerly (it took
    ``opendml::move`` with fixed sizes, which clamped an index that eager refuses)."""
    x, bad = torch.arange(12.0).reshape(3, 4), torch.tensor([0, 4])
    calls = {"gather": lambda t, i: dml.gather(t, i, np.int64(1)),
             "scatter_elements": lambda t, i: dml.scatter_elements(t, i.expand(3, 2), torch.ones(3, 2), np.int32(1))}
    for name, fn in calls.items():
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="aot_eager", fullgraph=True, dynamic=dynamic)
        good = torch.tensor([0, 3])
        assert torch.equal(compiled(x, good), fn(x, good)), name
        with pytest.raises(dml.ValidationError, match=r"indices\[.*\] = 4 is out of range") as eager:
            fn(x, bad)
        with pytest.raises(dml.ValidationError) as got:
            compiled(x, bad)
        assert str(got.value) == str(eager.value), name


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_vmap_of_torch_compile_of_the_operators(dynamic):
    """``torch.func.vmap`` around ``torch.compile`` of a raw window operator's call: eager vmap's values. Dynamo
    skips the compiled function's frames under the transform but compiles every frame they call, which took in
    the operator's batching rule and through it its kernel (the array API's NumPy code on fake tensors)."""
    for op, args in [op_cases("cpu")[i] for i in WINDOW_CASES]:
        xs = torch.randn((3, *args[0].shape), dtype=torch.float64, generator=torch.Generator().manual_seed(0))

        def fn(v):
            return op(v, *args[1:])
        want = torch.func.vmap(fn)(xs)
        torch._dynamo.reset()
        torch.testing.assert_close(torch.func.vmap(torch.compile(fn, backend="aot_eager", dynamic=dynamic))(xs), want,
                                   rtol=0, atol=0)


def test_operators_match_their_references():
    for shape, params in UNFOLD_CASES:
        x = arange(*shape)
        assert torch.equal(dmlt.unfold_op(x, *map(list, params)), unfold_ref(x, *params))
        in_shape, args = fold_args(shape, params)
        u = arange(*in_shape)
        want = torch.from_numpy(ref.fold(u.numpy(), *args))
        assert torch.equal(dmlt.fold_op(u, *map(list, args)), want)
    for shape, (offsets, sizes, strides) in SLICE1_CASES:
        x = arange(*shape)
        y = dmlt.slice1_op(x, offsets, sizes, strides)
        assert torch.equal(y, slice1_ref(x, offsets, sizes, strides))
        assert torch.equal(dmlt.slice_grad_op(y, list(shape), offsets, sizes, strides),
                           slice_grad_ref(y, list(shape), offsets, sizes, strides))


def test_unfold_and_fold_are_adjoint():
    """<unfold(x), y> == <x, fold(y)>: fold is unfold's adjoint, hence its backward."""
    for shape, params in UNFOLD_CASES:
        x = torch.randn(shape, dtype=torch.float64)
        u = dmlt.unfold_op(x, *map(list, params))
        y = torch.randn(u.shape, dtype=torch.float64)
        fy = dmlt.fold_op(y, list(shape[2:]), *map(list, params))
        assert torch.allclose((u * y).sum(), (x * fy).sum())


def test_fake_implementations_give_exact_sizes_and_strides():
    from torch._subclasses.fake_tensor import FakeTensorMode
    for op, args in op_cases("cpu"):
        real = op(*args)
        with FakeTensorMode() as mode:
            fake = op(mode.from_tensor(args[0]), *args[1:])
        assert fake.shape == real.shape and fake.stride() == real.stride() and fake.dtype == real.dtype
        meta = op(args[0].to("meta"), *args[1:])
        assert meta.device.type == "meta" and meta.shape == real.shape and meta.stride() == real.stride()


def test_fake_implementations_with_symbolic_sizes():
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x):
        u = dml.unfold(x, [2, 3], [1, 2], [2, 1], [1, 0], [0, 2])
        back = dml.fold(u, list(x.shape[2:]), [2, 3], [1, 2], [2, 1], [1, 0], [0, 2])
        return dml.slice1(back, [0, 0, 1, 0], [1, 2, 3, 3], [1, 1, -1, 2])
    x = torch.randn(2, 3, 5, 4, dtype=torch.float64)
    gm = make_fx(f, tracing_mode="symbolic")(x)
    ops = adapter.operators()     # the C++ operators once the node library is loaded
    assert [n.target for n in gm.graph.nodes if n.op == "call_function" and "opendml" in str(n.target)] == [
        ops["unfold"], ops["fold"], ops["slice1"]]
    assert torch.equal(gm(x), f(x))
    y = torch.randn(3, 2, 7, 6, dtype=torch.float64)
    assert torch.equal(gm(y), f(y))


def test_fake_implementations_validate_like_the_array_api():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        x = mode.from_tensor(torch.zeros(1, 1, 4, 4))
        with pytest.raises(dml.ValidationError, match=r"SLICE1: InputWindowOffsets\[2\] \+ InputWindowSizes\[2\]"):
            dmlt.slice1_op(x, [0, 0, 3, 0], [1, 1, 2, 4], [1, 1, 1, 1])
        with pytest.raises(dml.ValidationError, match="UNFOLD: the dilated window must fit"):
            dmlt.unfold_op(x, [5, 1], [1, 1], [1, 1], [0, 0], [0, 0])


# -- torch.compile -------------------------------------------------------------------------------------

def im2col_loss(x, w):
    cols = dml.unfold(x, [3, 3], 1, 1, 1, 1)                        # (N, C*9, H*W)
    y = w @ cols
    window = dml.slice(y, [0, 0, 1], [y.shape[0], y.shape[1], 4], [1, 1, 3])
    flipped = dml.slice1(x, [0, 0, 1, 0], [x.shape[0], x.shape[1], 4, 5], [1, 1, -2, 2])
    back = dml.fold(cols, [x.shape[2], x.shape[3]], [3, 3], 1, 1, 1, 1)
    return y.square().sum() + window.sum() + flipped.square().sum() + (back * x).sum()


def im2col_sum(x, w):
    return (w @ dml.unfold(x, [3, 3], 1, 1, 1, 1)).sum()


# inductor compiles C++ (about a minute on a cold cache): the smallest graph
@pytest.mark.parametrize("backend,dynamic,fn", [("aot_eager", False, im2col_loss), ("aot_eager", True, im2col_loss),
                                                ("inductor", False, im2col_sum)], ids=["aot_eager", "dynamic",
                                                                                       "inductor"])
def test_torch_compile_fullgraph_matches_eager(backend, dynamic, fn):
    torch._dynamo.reset()
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 6, 5, generator=gen, requires_grad=True)
    w = torch.randn(4, 27, generator=gen, requires_grad=True)
    eager = fn(x, w)
    gx, gw = torch.autograd.grad(eager, (x, w))
    compiled = torch.compile(fn, fullgraph=True, backend=backend, dynamic=dynamic)
    got = compiled(x, w)
    cx, cw = torch.autograd.grad(got, (x, w))
    torch.testing.assert_close(got, eager)
    torch.testing.assert_close(cx, gx)
    torch.testing.assert_close(cw, gw)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, w), eager)


def test_torch_compile_modules_and_operators():
    torch._dynamo.reset()
    model = torch.nn.Sequential(dmlt.Unfold((2, 2, 2), padding=((1, 0, 0), (0, 0, 1))),
                                dmlt.Fold((4, 3, 4), (2, 2, 2), padding=((1, 0, 0), (0, 0, 1))))
    x = torch.randn(2, 3, 4, 3, 4, requires_grad=True)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x), model(x))

    def ops(x):
        return dmlt.slice_grad_op(dmlt.slice1_op(x, [0, 0, 1, 1, 0], [2, 3, 3, 2, 4], [1, 2, -1, 1, -3]),
                                  list(x.shape), [0, 0, 1, 1, 0], [2, 3, 3, 2, 4], [1, 2, -1, 1, -3])
    torch.testing.assert_close(torch.compile(ops, fullgraph=True, backend="aot_eager")(x), ops(x))


# -- the two routes ------------------------------------------------------------------------------------

def calls():
    """(name, array-API call, reference) for every operator, on a (2, 3, 5, 6) input."""
    yield "slice", lambda x: dml.slice(x, [0, 1, 1, 0], [2, 2, 2, 2], [1, 1, 2, 3]), \
        lambda x: x[0:2, 1:3, 1:5:2, 0:6:3]
    yield "slice1", lambda x: dml.slice1(x, [0, 1, 1, 0], [2, 2, 4, 4], [1, -1, -2, 3]), \
        lambda x: slice1_ref(x, [0, 1, 1, 0], [2, 2, 4, 4], [1, -1, -2, 3])
    yield "slice1-output-sizes", lambda x: dml.slice1(x, [0, 1, 1, 0], [2, 2, 4, 4], [1, -1, -2, 3], [1, 1, 1, 2]), \
        lambda x: slice1_ref(x, [0, 1, 1, 0], [2, 2, 4, 4], [1, -1, -2, 3])[:1, :1, :1, :2]
    yield "unfold", lambda x: dml.unfold(x, [2, 3], [1, 2], [2, 1], [1, 0], [0, 2]), \
        lambda x: unfold_ref(x, [2, 3], [1, 2], [2, 1], [1, 0], [0, 2])
    yield "unfold-scalars", lambda x: dml.unfold(x, 2, start_padding=1), \
        lambda x: unfold_ref(x, [2, 2], [1, 1], [1, 1], [1, 1], [0, 0])
    yield "fold", lambda x: dml.fold(x.reshape(2, 9, 10), [3, 6], [3, 3], 1, 1, [1, 0], [0, 1]), \
        lambda x: torch.from_numpy(ref.fold(x.reshape(2, 9, 10).cpu().numpy(), [3, 6], [3, 3], [1, 1], [1, 1],
                                            [1, 0], [0, 1])).to(x.device)
    yield "slice_grad", lambda x: dml.slice_grad(x[:, :1, :2, :2], [2, 3, 5, 6], [0, 1, 1, 0], [2, 2, 4, 4],
                                                 [1, -1, -2, 3]), \
        lambda x: slice_grad_ref(x[:, :1, :2, :2], [2, 3, 5, 6], [0, 1, 1, 0], [2, 2, 4, 4], [1, -1, -2, 3])


CALLS = list(calls())


@pytest.mark.parametrize("name,call,want", CALLS, ids=[c[0] for c in CALLS])
def test_kernel_route_results(name, call, want, backend):
    x = arange(2, 3, 5, 6, device="cuda" if backend == "cuda" else "cpu")
    got = call(x)
    assert got.grad_fn is None and got.is_contiguous() and got.device == x.device and got.dtype == x.dtype
    torch.testing.assert_close(got, want(x), rtol=0, atol=0)


@pytest.mark.parametrize("name,call,want", CALLS, ids=[c[0] for c in CALLS])
def test_operator_route_gives_the_same_values_and_gradients(name, call, want, device):
    x = arange(2, 3, 5, 6, device=device)
    plain = call(x)
    xg = x.clone().requires_grad_()
    traced = call(xg)
    assert traced.grad_fn is not None and "opendml" in type(traced.grad_fn).__name__
    torch.testing.assert_close(traced, plain, rtol=0, atol=0)
    xr = torch.randn(x.shape, dtype=torch.float64, device=device, requires_grad=True)
    assert torch.autograd.gradcheck(call, (xr,))
    assert torch.autograd.gradgradcheck(call, (xr,))


def test_route_choice(monkeypatch):
    x = torch.randn(1, 2, 4, 4)
    xg = x.clone().requires_grad_()
    seen = []
    real = adapter.through_op
    monkeypatch.setattr(adapter, "through_op", lambda x, call: seen.append(call.name) or real(x, call))
    dml.unfold(x, 2)                                    # nothing to record: kernels directly
    with torch.no_grad():
        assert dml.unfold(xg, 2).grad_fn is None        # grad disabled: kernels directly
    with torch.inference_mode():
        dml.slice1(xg, [0, 0, 0, 0], [1, 2, 4, 4], [1, 1, 1, 1])
    assert seen == []
    out = dml.unfold(xg, 2)                             # a gradient is needed: eager autograd, no operator
    assert out.requires_grad and type(out.grad_fn).__name__ == "opendml_unfoldBackward"
    assert seen == []
    meta = dml.unfold(x.to("meta"), 2)                  # a meta tensor: the move program's meta outputs
    assert meta.shape == (1, 8, 9) and meta.dtype == x.dtype and meta.is_meta
    assert seen == []
    torch.compile(lambda t: dml.unfold(t, 2), backend="eager", fullgraph=True)(xg)   # traced: the operator
    assert seen and set(seen) == {"unfold"}


def test_requires_grad_is_never_dropped():
    x = torch.randn(1, 2, 5, 5, requires_grad=True)
    for out in (dml.slice(x, [0, 0, 1, 1], [1, 2, 2, 2], [1, 1, 2, 2]), dml.slice1(x, [0, 0, 0, 0], [1, 2, 5, 5],
                                                                                  [1, 1, -1, 1]),
                dml.unfold(x, 3), dml.fold(dml.unfold(x, 3), [5, 5], 3)):
        assert out.requires_grad
        (g,) = torch.autograd.grad(out.sum(), x)
        assert g.shape == x.shape and g.abs().sum() > 0


def test_operator_route_validates_with_the_array_api_messages():
    x = torch.zeros(1, 1, 4, 4, requires_grad=True)
    with pytest.raises(dml.ValidationError, match=r"SLICE: Offsets\[2\] \+ "):
        dml.slice(x, [0, 0, 3, 0], [1, 1, 2, 4], [1, 1, 1, 1])
    with pytest.raises(dml.ValidationError, match=r"SLICE1: OutputTensor.Sizes\[3\] must be in \[1, 1 \+"):
        dml.slice1(x, [0, 0, 0, 0], [1, 1, 4, 4], [1, 1, 1, 2], [1, 1, 4, 3])
    with pytest.raises(dml.ValidationError, match="UNFOLD: InputTensor.DimensionCount"):
        dml.unfold(x, [2])
    with pytest.raises(dml.ValidationError, match="FOLD"):
        dml.fold(torch.zeros(1, 4, 5, requires_grad=True), [3, 3], [2, 2])


def test_non_contiguous_expanded_and_negative_views():
    base = arange(2, 3, 10, 9)
    views = [base.transpose(2, 3), base[:, :, ::2], base.flip(3)[..., 1:], base[:1, :1].expand(2, 3, 10, 9),
             torch._neg_view(base)]
    for v in views:
        torch.testing.assert_close(dml.unfold(v, [2, 2], 1, 1, 1, 0), unfold_ref(v.resolve_neg(), [2, 2], [1, 1],
                                                                               [1, 1], [1, 1], [0, 0]))
        want = slice1_ref(v.resolve_neg(), [0, 1, 1, 0], [2, 2, 4, 4], [1, -1, -2, 3])
        torch.testing.assert_close(dml.slice1(v, [0, 1, 1, 0], [2, 2, 4, 4], [1, -1, -2, 3]), want)


def test_outputs_are_new_tensors():
    x = arange(1, 1, 4, 4)
    y = dml.slice(x, [0, 0, 0, 0], [1, 1, 4, 4], [1, 1, 1, 1])
    assert torch.equal(y, x) and y.data_ptr() != x.data_ptr()
    y += 1
    assert x[0, 0, 0, 0] == 0


def test_vmap():
    x = torch.randn(3, 2, 2, 5, 5, dtype=torch.float64)
    for f, data in ((lambda t: dml.unfold(t, 2, start_padding=1), x),
                    (lambda t: dml.slice1(t, [0, 0, 1, 0], [2, 2, 4, 5], [1, -1, 2, -2]), x),
                    (lambda t: dml.fold(t, [5, 5], 2, start_padding=1), torch.randn(3, 2, 8, 25, dtype=torch.float64)),
                    (lambda t: dml.slice_grad(t, [2, 2, 5, 5], [0, 0, 1, 0], [2, 2, 4, 5], [1, -1, 2, -2]),
                     torch.randn(3, 2, 2, 2, 3, dtype=torch.float64))):
        want = torch.stack([f(t) for t in data])
        torch.testing.assert_close(torch.func.vmap(f)(data), want, rtol=0, atol=0)
        torch.testing.assert_close(torch.func.vmap(f, in_dims=1)(data.movedim(0, 1)), want, rtol=0, atol=0)


# -- dtypes and unsupported tensors --------------------------------------------------------------------

ALL_DTYPES = sorted({v for n in dir(torch) if isinstance(v := getattr(torch, n), torch.dtype)}, key=str)
UNSUPPORTED = [t for t in ALL_DTYPES if str(t).removeprefix("torch.") not in SUPPORTED]


def make_tensor(dtype, shape=(1, 1, 4, 4)):
    ways = (lambda: torch.zeros(shape, dtype=dtype), lambda: torch.zeros(shape).to(dtype),
            lambda: torch.quantize_per_tensor(torch.zeros(shape), 0.1, 0, dtype),
            lambda: torch.zeros(shape, dtype=torch.uint8).view(dtype))
    for way in ways:
        try:
            return way()
        except Exception:
            continue
    pytest.skip(f"this PyTorch cannot make a {dtype} tensor")


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("dtype", UNSUPPORTED, ids=str)
def test_unsupported_dtypes_raise_unsupported_error(dtype):
    x = make_tensor(dtype)
    pattern = rf"{dtype}.*float16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64"
    tries = [lambda x: dml.slice1(x, [0, 0, 0, 0], [1, 1, 4, 4], [1, 1, -1, 1]), lambda x: dml.unfold(x, 2),
             lambda x: dml.slice(x, [0, 0, 0, 0], [1, 1, 2, 2], [1, 1, 1, 1]),
             lambda x: dml.fold(x.reshape(1, 4, 4), [3, 3], 2),
             lambda x: dml.slice_grad(x, [1, 1, 5, 5], [0, 0, 0, 0], [1, 1, 4, 4], [1, 1, 1, 1]),
             lambda x: dmlt.unfold_op(x, [2, 2], [1, 1], [1, 1], [0, 0], [0, 0])]
    for attempt in tries:
        with pytest.raises(dml.UnsupportedError, match=pattern):
            attempt(x)
    if dtype.is_floating_point or dtype.is_complex:
        try:
            xg = x.clone().requires_grad_()
        except RuntimeError:
            return
        for attempt in tries:
            with pytest.raises(dml.UnsupportedError, match=pattern):
                attempt(xg)


@pytest.mark.parametrize("dtype", SUPPORTED)
def test_every_supported_dtype(dtype, device):
    t = getattr(torch, dtype)
    x = torch.from_numpy(np.arange(2 * 2 * 5 * 6).astype(dtype).reshape(2, 2, 5, 6)).to(device)
    got = dml.slice1(x, [0, 0, 1, 0], [2, 2, 4, 6], [1, -1, 2, -3])
    want = np.ascontiguousarray(x.cpu().numpy()[:, ::-1, 1:5:2, ::-3])
    assert got.dtype == t and np.array_equal(got.cpu().numpy(), want)
    u = dml.unfold(x, [2, 3], 1, 1, [1, 0], [0, 1])
    assert u.dtype == t and np.array_equal(u.cpu().numpy(), ref.unfold(x.cpu().numpy(), [2, 3], [1, 1], [1, 1],
                                                                       [1, 0], [0, 1]))


def other_layouts():
    dense = torch.zeros(1, 1, 4, 4)
    yield dense.to_sparse()
    yield dense.to_sparse().requires_grad_()
    for layout in ("csr", "csc"):
        yield getattr(dense[0, 0], f"to_sparse_{layout}")()
    for layout in ("bsr", "bsc"):
        yield getattr(dense[0, 0], f"to_sparse_{layout}")((2, 2))
    if torch.backends.mkldnn.is_available():
        yield dense.to_mkldnn()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_sparse_conjugate_and_nested_tensors_raise_unsupported_error():
    calls = (lambda x: dml.slice1(x, [0] * x.dim(), [1] * x.dim(), [1] * x.dim()), lambda x: dml.unfold(x, 2),
             lambda x: dmlt.slice1_op(x, [0] * x.dim(), [1] * x.dim(), [1] * x.dim()))
    for x in other_layouts():
        for call in calls:
            with pytest.raises(dml.UnsupportedError, match=rf"layout {x.layout} are not supported.*x.to_dense\(\)"):
                call(x)
    for conj in (torch.zeros(1, 1, 4, 4, dtype=torch.complex64).conj(),
                 torch.zeros(1, 1, 4, 4, dtype=torch.complex128, requires_grad=True).conj()):
        assert conj.is_conj()
        for call in calls[:2]:
            with pytest.raises(dml.UnsupportedError, match=r"conjugated complex tensor.*complex.*uint64"):
                call(conj)
        with pytest.raises(dml.UnsupportedError, match=r"torch.complex.*uint64"):   # PyTorch resolves the conj bit
            calls[2](conj)
    for layout in (torch.strided, torch.jagged):
        nested = torch.nested.nested_tensor([torch.zeros(2, 3), torch.zeros(2, 4)], layout=layout)
        for call in calls[:2]:
            with pytest.raises(dml.UnsupportedError, match="nested PyTorch tensors are not supported"):
                call(nested)


# -- modules -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel,dilation,padding,stride", [
    (3, 1, 0, 1), (3, 1, 1, 1), ((2, 3), (2, 1), (1, 2), (2, 1)), (2, 2, 1, 3)])
def test_unfold_and_fold_modules_match_pytorch(kernel, dilation, padding, stride, device):
    x = torch.randn(2, 3, 9, 8, dtype=torch.float64, device=device, requires_grad=True)
    mine = dmlt.Unfold(kernel, dilation=dilation, padding=padding, stride=stride)
    theirs = torch.nn.Unfold(kernel, dilation=dilation, padding=padding, stride=stride)
    u = mine(x)
    torch.testing.assert_close(u, theirs(x))
    torch.testing.assert_close(mine(x[0]), theirs(x[0]))                  # unbatched
    fold, tfold = (cls((9, 8), kernel, dilation=dilation, padding=padding, stride=stride)
                   for cls in (dmlt.Fold, torch.nn.Fold))
    torch.testing.assert_close(fold(u), tfold(u))
    torch.testing.assert_close(fold(u[0]), tfold(u[0]))
    g1 = torch.autograd.grad(fold(u).square().sum(), x)
    g2 = torch.autograd.grad(tfold(theirs(x)).square().sum(), x)
    torch.testing.assert_close(g1, g2)
    assert repr(mine) == repr(theirs) and repr(fold) == repr(tfold)


@pytest.mark.parametrize("bad", [[[1.0, 2.0]], np.ones((1, 1, 4, 4), np.float32), None], ids=["list", "numpy", "None"])
def test_modules_refuse_what_is_no_tensor(bad):
    """Unfold(2)([[1.0, 2.0]]) raised AttributeError: 'list' object has no attribute 'dim'."""
    kind = f"{type(bad).__module__}.{type(bad).__qualname__}"
    with pytest.raises(dml.ValidationError, match=rf"^Unfold: x must be a torch.Tensor; got {kind}$"):
        dmlt.Unfold(2)(bad)
    with pytest.raises(dml.ValidationError, match=rf"^Fold: x must be a torch.Tensor; got {kind}$"):
        dmlt.Fold((4, 4), 2)(bad)


def test_modules_n_d_and_asymmetric_padding():
    x = torch.randn(2, 2, 5, 4, 6, dtype=torch.float64)
    m = dmlt.Unfold((3, 2, 2), dilation=(1, 2, 1), padding=((1, 0, 2), (0, 1, 1)), stride=(2, 1, 3))
    want = unfold_ref(x, [3, 2, 2], [2, 1, 3], [1, 2, 1], [1, 0, 2], [0, 1, 1])
    torch.testing.assert_close(m(x), want)
    u = torch.randn(want.shape, dtype=torch.float64)
    back = dmlt.Fold((5, 4, 6), (3, 2, 2), dilation=(1, 2, 1), padding=((1, 0, 2), (0, 1, 1)), stride=(2, 1, 3))(u)
    assert torch.allclose((m(x) * u).sum(), (x * back).sum())
    # 3-D against PyTorch's own route: pad, Tensor.unfold per axis, reshape
    m3 = dmlt.Unfold((3, 3, 3), padding=1)
    x3 = torch.randn(1, 2, 4, 5, 3)
    p = F.pad(x3, (1, 1, 1, 1, 1, 1)).unfold(2, 3, 1).unfold(3, 3, 1).unfold(4, 3, 1)   # N C D H W kd kh kw
    want3 = p.permute(0, 1, 5, 6, 7, 2, 3, 4).reshape(1, 2 * 27, 4 * 5 * 3)
    torch.testing.assert_close(m3(x3), want3)
    assert dmlt.split_padding(2) == (2, 2) and dmlt.split_padding([1, 2]) == ([1, 2], [1, 2])
    assert dmlt.split_padding((1, (0, 2))) == (1, (0, 2))


# -- the README example --------------------------------------------------------------------------------

def test_readme_example_trains_an_im2col_layer_like_conv2d():
    import torch
    import torch.nn.functional as F

    import opendml.torch as dmlt

    class Im2colConv2d(torch.nn.Module):
        """A 3x3 convolution (padding 1) as unfold -> matmul; backward runs through fold."""

        def __init__(self, c_in, c_out):
            super().__init__()
            self.unfold = dmlt.Unfold(3, padding=1)
            self.weight = torch.nn.Parameter(0.1 * torch.randn(c_out, c_in * 9))

        def forward(self, x):
            n, _, h, w = x.shape
            return (self.weight @ self.unfold(x)).view(n, -1, h, w)

    torch.manual_seed(0)
    layer = Im2colConv2d(3, 8)
    opt = torch.optim.SGD(layer.parameters(), lr=0.5)
    x = torch.randn(4, 3, 16, 16, requires_grad=True)
    target = torch.randn(4, 8, 16, 16)
    for step in range(5):
        opt.zero_grad()
        x.grad = None
        loss = F.mse_loss(layer(x), target)
        loss.backward()
        # the same step through PyTorch's convolution
        w = layer.weight.detach().view(8, 3, 3, 3).requires_grad_()
        x2 = x.detach().requires_grad_()
        F.mse_loss(F.conv2d(x2, w, padding=1), target).backward()
        torch.testing.assert_close(layer.weight.grad, w.grad.view(8, -1))
        torch.testing.assert_close(x.grad, x2.grad)
        opt.step()
        print(f"step {step}: loss {loss.item():.4f}")


# -- CUDA ----------------------------------------------------------------------------------------------

def stream_calls(x):
    return (dml.slice1(x, [0, 0, 4, 4], [1, 1, 56, 56], [1, 1, -1, 2]),
            dml.unfold(x, 3, start_padding=1, end_padding=1))


@needs_cuda
@pytest.mark.cuda
def test_cuda_runs_on_the_callers_stream_without_device_synchronisation():
    x = torch.zeros(1, 1, 64, 64, device="cuda")
    stream_calls(x)                                      # kernels compiled and plans cached beforehand
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(500_000_000)                   # a long kernel, then the write the calls must see
        x.copy_(torch.arange(64 * 64, dtype=torch.float32, device="cuda").reshape(1, 1, 64, 64))
        s, u = stream_calls(x)
        done = torch.cuda.Event()
        done.record(side)
    assert not done.query()                              # still sleeping: nothing waited for the stream
    done.synchronize()                                   # this stream's work only
    want = torch.arange(64 * 64, dtype=torch.float32).reshape(1, 1, 64, 64)
    torch.testing.assert_close(s.cpu(), slice1_ref(want, [0, 0, 4, 4], [1, 1, 56, 56], [1, 1, -1, 2]))
    torch.testing.assert_close(u.cpu(), F.unfold(want, 3, padding=1))


@needs_cuda
@pytest.mark.cuda
def test_cuda_hot_path_uses_no_dlpack(monkeypatch):
    import cupy

    def refuse(*a, **k):
        raise AssertionError("DLPack conversion on the hot path")
    monkeypatch.setattr(cupy, "from_dlpack", refuse)
    monkeypatch.setattr(torch, "from_dlpack", refuse)
    monkeypatch.setattr(torch.utils.dlpack, "to_dlpack", refuse)
    x = arange(1, 1, 4, 4, dtype=torch.float32, device="cuda")
    torch.testing.assert_close(dml.slice1(x, [0, 0, 0, 1], [1, 1, 4, 3], [1, 1, -2, 2]).cpu(),
                               torch.tensor([[[[13., 15.], [5., 7.]]]]))
    torch.testing.assert_close(dml.unfold(x, 2), F.unfold(x, 2))


@pytest.mark.cuda
@pytest.mark.skipif("not cuda_ok() or torch.cuda.device_count() < 2", reason="needs two CUDA GPUs")
def test_cuda_tensor_on_the_second_gpu():
    """The tensor's own device and that device's current stream, whatever the current device."""
    x = torch.zeros(2, 3, 6, 7, device="cuda:1")
    stream_calls(torch.zeros(1, 1, 64, 64, device="cuda:1"))
    # the same calls once first: compiling their kernels must not happen while the side stream sleeps
    dml.unfold(x, [2, 3], 1, 1, 1, 0)
    dml.slice1(x, [0, 1, 1, 0], [2, 2, 4, 4], [1, -1, -2, 3])
    # made on the GPU before the sleep: a copy from pageable host memory would
    # make the host wait for the sleeping stream
    source = arange(2, 3, 6, 7, dtype=torch.float32, device="cuda:1")
    torch.cuda.synchronize(1)
    side = torch.cuda.Stream(device=1)
    with torch.cuda.stream(side):
        torch.cuda._sleep(500_000_000)
        x.copy_(source)
        with torch.cuda.device(0):                       # current device 0; cuda:1's current stream is still side
            u = dml.unfold(x, [2, 3], 1, 1, 1, 0)
            s = dml.slice1(x, [0, 1, 1, 0], [2, 2, 4, 4], [1, -1, -2, 3])
        done = torch.cuda.Event()
        done.record(side)
    assert not done.query()
    done.synchronize()
    assert u.device == s.device == torch.device("cuda:1")
    want = arange(2, 3, 6, 7, dtype=torch.float32)
    torch.testing.assert_close(u.cpu(), unfold_ref(want, [2, 3], [1, 1], [1, 1], [1, 1], [0, 0]))
    torch.testing.assert_close(s.cpu(), slice1_ref(want, [0, 1, 1, 0], [2, 2, 4, 4], [1, -1, -2, 3]))
    xg = arange(2, 3, 6, 7, device="cuda:1").requires_grad_()
    assert torch.autograd.gradcheck(lambda t: dml.unfold(t, 2, start_padding=1), (xg,))


def test_the_modules_forward_methods_are_documented():
    """``Unfold.forward`` and ``Fold.forward`` carry their docstrings (a
    string after the first statement is no docstring)."""
    assert dmlt.Unfold.forward.__doc__.startswith("Unfold ``x``.")
    assert dmlt.Fold.forward.__doc__.startswith("Fold ``x``.")
