"""PyTorch tensors for the data-movement family (``identity``, ``cast``,
``pad``, ``join``, ``split``, ``tile``, ``space_to_depth``,
``depth_to_space``), differentiable, generic over what each operator module
declares: no branch per operator here.

A call is validated on the tensors' shapes and dtypes first (the operator
description's own rules and messages), then takes one of two routes:

* **Kernel route**, when autograd has nothing to record: a CPU tensor is read
  through ``x.numpy()`` (a view, any strides) and the NumPy path runs the
  move program; the result comes back through ``torch.from_numpy`` (same
  bytes as the NumPy call). A CUDA tensor is read by address and strides and
  the move program runs on the CUDA backend (``family_cuda``), outputs from
  PyTorch's caching allocator, on the current stream. A meta tensor gives
  empty outputs of the description's sizes.
* **Autograd route**, when a derivative is needed (``x.requires_grad`` with
  grad mode on, an open forward-AD level, or a ``torch.func`` transform's
  wrapper) and the operator is differentiable for its types
  (``desc.linear_part()`` is not None): one generic
  ``torch.autograd.Function`` (a subclass per operator only for its name,
  ``opendml_<operator>Backward``) whose forward runs the kernel, whose
  backward is ``desc.linear_part().adjoint(...)`` (other opendml operators
  called through the array API, so gradients of gradients take the same
  routes), whose forward-mode derivative is the linear part applied to the
  tangents, and whose ``vmap`` rule runs the call once per batch element.

``torch.compile``: the family has no custom operators yet. Dynamo does not
trace into ``run`` (``torch.compiler.disable``): the call is a graph break
and runs eagerly, with the same results and gradients as outside the
compiled region (``fullgraph=True`` refuses it with Dynamo's own error).
Other tracers (dispatch modes such as ``make_fx``, fake or functional
tensors, a tracer that reaches ``run`` anyway) get ``UnsupportedError``,
never a traced approximation.
"""
from __future__ import annotations

import torch
import torch.autograd.forward_ad as _fwad

from ..model.errors import UnsupportedError
from . import family
from .torch_adapter import _DTYPES, numpy_dtype

__all__ = ["run"]

_is_functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor
_dispatch_modes = torch._C._len_torch_dispatch_stack
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _check(call, arrays):
    if torch.compiler.is_compiling() or _dispatch_modes() > 0 or any(type(x) not in _PLAIN for x in arrays):
        raise UnsupportedError(f"{call.name}: the data-movement family does not run under torch.compile, a "
                               f"dispatch mode or on tensor subclasses ({type(arrays[0]).__qualname__}) yet; call "
                               f"it outside the compiled region (e.g. under torch.compiler.disable)")
    dtypes = [numpy_dtype(x, call.name) for x in arrays]
    device = arrays[0].device
    for i, x in enumerate(arrays):
        if x.device.type not in ("cpu", "cuda", "meta"):
            raise UnsupportedError(f"{call.name}: PyTorch tensors on {x.device} are not supported; use cpu or cuda")
        if x.device != device:
            raise UnsupportedError(f"{call.name}: every tensor must be on one device; got {device} and "
                                   f"{x.device} (arrays[{i}])")
    return dtypes


@torch.compiler.disable
def run(call, arrays) -> list:
    dtypes = _check(call, arrays)
    desc = call.describe_arrays(dtypes, [tuple(x.shape) for x in arrays])
    wrapped = any(_is_functorch_wrapped(x) for x in arrays)
    if wrapped or _fwad._current_level >= 0 or (torch.is_grad_enabled() and any(x.requires_grad for x in arrays)):
        if family.differentiable(desc):
            return list(_function(desc).apply(_Route(call, desc, arrays[0].device), *arrays))
        if wrapped:
            raise UnsupportedError(f"{call.name}: {desc.OPERATOR} is not differentiable for these types, and "
                                   f"runs under torch.func transforms only where it is")
    return kernel(desc, arrays)


def kernel(desc, arrays) -> list:
    """``desc``'s move program on plain tensors (no autograd)."""
    x = arrays[0]
    if x.device.type == "cpu":
        views = []
        for t in arrays:
            t = t.detach()
            if t.is_neg():
                t = t.resolve_neg()
            views.append(t.numpy())
        return [torch.from_numpy(o) for o in family.execute(desc, views)]
    if x.device.type == "meta":
        return [torch.empty(t.sizes, dtype=_torch_dtype(t), device="meta") for t in desc.outputs]
    if x.device.type == "cuda":
        return _cuda(desc, arrays)
    raise UnsupportedError(f"{desc.OPERATOR}: PyTorch tensors on {x.device} are not supported; use cpu or cuda")


def _cuda(desc, arrays) -> list:
    """The move program on the tensors' GPU (``family_cuda``), outputs from
    PyTorch's caching allocator, on the device's current stream."""
    from .family_cuda import run_move

    def entry(t):
        t = t.detach()
        if t.is_neg():
            t = t.resolve_neg()
        item = t.element_size()
        return (t, t.data_ptr(), tuple(t.shape), tuple(s * item for s in t.stride()), item,
                lambda: entry(t.contiguous()))
    index = arrays[0].get_device()
    device = arrays[0].device

    def allocate(shape, dtype):
        out = torch.empty(shape, dtype=_TORCH_DTYPES[dtype], device=device)
        return out, out.data_ptr()
    with torch.cuda.device(index):
        return run_move(desc, [entry(t) for t in arrays], allocate, index,
                        torch.cuda.current_stream(index).cuda_stream, errors=(torch.OutOfMemoryError,))


_TORCH_DTYPES = {v: k for k, v in _DTYPES.items()}


def _torch_dtype(t):
    """The PyTorch dtype of a ``TensorDesc``."""
    return _TORCH_DTYPES[t.data_type.numpy_dtype]


class _Route:
    """A validated call: re-run it (``call``), run its kernel, its adjoint
    and its linear part (both as the operator module declares them)."""

    __slots__ = ("call", "desc", "device")

    def __init__(self, call, desc, device):
        self.call, self.desc, self.device = call, desc, device

    def adjoint(self, grads):
        return family.adjoint(self.desc, grads)

    def tangent(self, tangents):
        return family.fixed(self.desc.linear_part(), self.call.name)(*tangents)


class _Linear(torch.autograd.Function):
    """The family's one autograd Function: ``apply(route, *inputs)`` returns
    every output as a tuple."""

    @staticmethod
    def forward(route, *xs):
        if any(_is_functorch_wrapped(x) for x in xs):      # a lower transform still wraps them: route again
            return tuple(route.call(*xs))
        return tuple(kernel(route.desc, xs))

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.route = inputs[0]

    @staticmethod
    def backward(ctx, *grads):
        return (None, *ctx.route.adjoint(grads))

    @staticmethod
    def jvp(ctx, _, *tangents):
        route = ctx.route
        ts = [t if t is not None else torch.zeros(d.sizes, dtype=_torch_dtype(d), device=route.device)
              for t, d in zip(tangents, route.desc.inputs)]
        return tuple(route.tangent(ts))

    @staticmethod
    def vmap(info, in_dims, route, *xs):
        n = info.batch_size
        xs = [x.movedim(d, 0) if d is not None else x.expand(n, *x.shape) for x, d in zip(xs, in_dims[1:])]
        per = [route.call(*[x[i] for x in xs]) for i in range(n)]
        outs = tuple(torch.stack([p[j] for p in per]) for j in range(len(per[0])))
        return outs, (0,) * len(outs)


_FUNCTIONS: dict = {}


def _function(desc):
    """``_Linear`` under the operator's name (``opendml_pad1``...), so a
    result's ``grad_fn`` says which operator made it."""
    name = desc.OPERATOR.lower()
    fn = _FUNCTIONS.get(name)
    if fn is None:
        fn = _FUNCTIONS[name] = type(f"opendml_{name}", (_Linear,), {})
    return fn
