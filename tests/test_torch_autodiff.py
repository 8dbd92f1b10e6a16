"""Every operator under every PyTorch differentiation route, against the
equivalent expression written with PyTorch's own operators: reverse mode
(eager autograd), forward mode (``torch.autograd.forward_ad`` dual tensors,
issue: the tangent was dropped silently) and the ``torch.func`` transforms
(``jvp``, ``grad``, ``jacrev``, ``jacfwd``, ``vmap``, ``hessian``)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.autograd.forward_ad as fwAD  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import opendml as dml  # noqa: E402

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


@pytest.fixture(autouse=True)
def _needs_device(request):
    if "cuda" in request.node.callspec.params.values() if hasattr(request.node, "callspec") else False:
        if not torch.cuda.is_available():
            pytest.skip("CUDA is not available here")


def _walk(offset, size, stride, count=None):
    """The input indices a SLICE1 window reads along one axis."""
    start = offset + (size - 1 if stride < 0 else 0)
    n = 1 + (size - 1) // abs(stride) if count is None else count
    return [start + k * stride for k in range(n)]


def _index(offsets, sizes, strides, counts=None, device="cpu"):
    counts = counts or [None] * len(offsets)
    axes = [torch.tensor(_walk(*w), device=device) for w in zip(offsets, sizes, strides, counts)]
    return torch.meshgrid(*axes, indexing="ij")


def slice1_torch(x, offsets, sizes, strides, counts=None):
    return x[_index(offsets, sizes, strides, counts, x.device)]


def slice_grad_torch(g, input_sizes, offsets, sizes, strides):
    idx = _index(offsets, sizes, strides, list(g.shape), g.device)
    return torch.zeros(input_sizes, dtype=g.dtype, device=g.device).index_put(idx, g)


#: (name, opendml call, the same with PyTorch's operators), on a (2, 3, 5, 6) input.
CASES = [
    ("slice", lambda x: dml.slice(x, [0, 1, 1, 0], [2, 2, 2, 2], [1, 1, 2, 3]),
     lambda x: x[0:2, 1:3, 1:5:2, 0:6:3]),
    ("slice1", lambda x: dml.slice1(x, [0, 1, 1, 0], [2, 2, 4, 4], [1, -1, -2, 3]),
     lambda x: slice1_torch(x, [0, 1, 1, 0], [2, 2, 4, 4], [1, -1, -2, 3])),
    ("slice1-output-sizes", lambda x: dml.slice1(x, [0, 1, 1, 0], [2, 2, 4, 4], [1, -1, -2, 3], [1, 1, 1, 2]),
     lambda x: slice1_torch(x, [0, 1, 1, 0], [2, 2, 4, 4], [1, -1, -2, 3], [1, 1, 1, 2])),
    ("slice1-flip", lambda x: dml.slice1(x, [0, 0, 0, 0], [2, 3, 5, 6], [1, 1, -1, 1]),
     lambda x: torch.flip(x, [2])),
    ("unfold", lambda x: dml.unfold(x, [2, 3], [1, 2], [2, 1], [1, 0], [0, 2]),
     lambda x: F.unfold(F.pad(x, (0, 2, 1, 0)), (2, 3), dilation=(2, 1), stride=(1, 2))),
    ("fold", lambda x: dml.fold(x.reshape(2, 9, 10), [3, 6], [3, 3], 1, 1, [1, 0], [0, 1]),
     lambda x: F.fold(x.reshape(2, 9, 10), (4, 7), 3)[:, :, 1:4, 0:6]),
    ("slice_grad", lambda x: dml.slice_grad(x[:, :1, :2, :2], [2, 3, 5, 6], [0, 1, 1, 0], [2, 2, 4, 4],
                                            [1, -1, -2, 3]),
     lambda x: slice_grad_torch(x[:, :1, :2, :2], [2, 3, 5, 6], [0, 1, 1, 0], [2, 2, 4, 4], [1, -1, -2, 3])),
]
IDS = [c[0] for c in CASES]


def _pair(device, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, 5, 6, dtype=torch.float64, generator=gen).to(device)
    t = torch.randn(2, 3, 5, 6, dtype=torch.float64, generator=gen).to(device)
    return x, t


def _same(a, b):
    if a.is_cuda:                         # PyTorch's CUDA fold (a reference) sums in its own order
        torch.testing.assert_close(a, b)
    else:
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,op,ref", CASES, ids=IDS)
def test_references_agree(name, op, ref, device):
    x, _ = _pair(device)
    if name == "fold":                    # PyTorch's CUDA fold sums in another order: not the same bits
        torch.testing.assert_close(op(x), ref(x))
    else:
        _same(op(x), ref(x))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,op,ref", CASES, ids=IDS)
def test_forward_ad_dual_tensors_keep_their_tangent(name, op, ref, device):
    x, t = _pair(device)
    want = torch.func.jvp(ref, (x,), (t,))
    with fwAD.dual_level():
        out = op(fwAD.make_dual(x, t))
        primal, tangent = fwAD.unpack_dual(out)
    assert tangent is not None
    _same(primal, want[0])
    _same(tangent, want[1])
    with fwAD.dual_level():             # a dual input that also requires grad: both derivatives
        xg = x.clone().requires_grad_()
        out = op(fwAD.make_dual(xg, t))
        assert out.requires_grad
        _same(fwAD.unpack_dual(out).tangent, want[1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,op,ref", CASES, ids=IDS)
def test_torch_func_transforms(name, op, ref, device):
    x, t = _pair(device)
    for a, b in zip(torch.func.jvp(op, (x,), (t,)), torch.func.jvp(ref, (x,), (t,))):
        _same(a, b)
    _same(torch.func.grad(lambda v: op(v).square().sum())(x), torch.func.grad(lambda v: ref(v).square().sum())(x))
    _same(torch.func.jacrev(op)(x), torch.func.jacrev(ref)(x))
    _same(torch.func.jacfwd(op)(x), torch.func.jacfwd(ref)(x))
    batch = torch.stack([x, t, x + t])
    _same(torch.func.vmap(op)(batch), torch.stack([ref(v) for v in batch]))
    _same(torch.func.vmap(op, in_dims=1)(batch.movedim(0, 1)), torch.stack([ref(v) for v in batch]))


@pytest.mark.parametrize("name,op,ref", CASES, ids=IDS)
def test_hessian_of_a_cubic(name, op, ref):
    x, _ = _pair("cpu")
    small = x[:, :, :5, :6]
    _same(torch.func.hessian(lambda v: op(v).pow(3).sum())(small),
          torch.func.hessian(lambda v: ref(v).pow(3).sum())(small))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,op,ref", CASES, ids=IDS)
def test_gradcheck_both_modes_and_second_order(name, op, ref, device):
    x, _ = _pair(device)
    x.requires_grad_()
    assert torch.autograd.gradcheck(op, (x,), check_forward_ad=True, check_backward_ad=True)
    assert torch.autograd.gradgradcheck(op, (x,))


@pytest.mark.parametrize("name,op,ref", CASES, ids=IDS)
def test_eager_backward_equals_pytorch(name, op, ref):
    x, _ = _pair("cpu")
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = op(xa), ref(xb)
    g = torch.randn_like(ya)
    ya.backward(g)
    yb.backward(g)
    _same(xa.grad, xb.grad)
    assert type(ya.grad_fn).__name__.startswith("opendml_")


def test_integer_tensors_need_no_gradient_route():
    x = torch.arange(2 * 3 * 5 * 6).reshape(2, 3, 5, 6)
    with fwAD.dual_level():               # a level is open but x has no tangent: the plain answer
        _same(dml.slice1(x, [0, 0, 0, 0], [2, 3, 5, 6], [1, 1, -1, 1]), torch.flip(x, [2]))


def test_dual_tensor_under_a_dispatch_mode_is_an_error_not_a_dropped_tangent():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    x = torch.randn(1, 1, 4, 4)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, torch.ones_like(x))
        with Passthrough(), pytest.raises(dml.UnsupportedError, match="slice1: forward-mode AD"):
            dml.slice1(dual, [0, 0, 0, 0], [1, 1, 4, 4], [1, 1, -1, 1])
