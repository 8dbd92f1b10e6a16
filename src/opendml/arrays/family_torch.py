"""PyTorch tensors for the data-movement family (``identity``, ``cast``,
``pad``, ``join``, ``split``, ``tile``, ``space_to_depth``,
``depth_to_space``), differentiable, generic over what each operator module
declares: no branch per operator here.

A call is validated on the tensors' shapes and dtypes first (the operator
description's own rules and messages), then takes one of two routes:

* **Kernel route**, when autograd has nothing to record: a CPU tensor is read
  through ``x.numpy()`` (a view, any strides) and the NumPy path runs the
  move program (``family.run_numpy``: validated there, and a repeated call
  served by its cache); the result comes back through ``torch.from_numpy``
  (same bytes as the NumPy call). A CUDA tensor is read by address and strides and
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

``torch.compile`` and other tracers: the family is one custom operator,
``opendml::move(Tensor[] inputs, str desc) -> Tensor[]`` (``desc`` the
operator's JSON form; ``family_torch_op``), which ``run_move`` calls whenever
something traces it (Dynamo compiling, a dispatch mode such as fake tensors,
``make_fx`` or functionalization, or a tensor subclass): its fake
implementation gives the outputs' sizes, its backward is the declared
adjoint through the array API again. Importing this module registers the
array API's functions with ``torch.compiler.allow_in_graph``, so a compiled
function calling them has no graph break (``fullgraph=True`` works). Sizes
are specialised: symbolic sizes become guards on their current values.
"""
from __future__ import annotations

import torch
import torch.autograd.forward_ad as _fwad

from ..model.errors import UnsupportedError
from . import family
from ..runtime import calls as _calls
from .family_torch_op import _cuda, _torch_dtype, adjoint_with, call_move, constant_inputs, kernel
from .torch_adapter import numpy_dtype

__all__ = ["run_move"]

_is_functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor
_dispatch_modes = torch._C._len_torch_dispatch_stack
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _check(call, arrays):
    dtypes = [numpy_dtype(x, call.name) for x in arrays]
    device = arrays[0].device
    for i, x in enumerate(arrays):
        if x.device.type not in ("cpu", "cuda", "meta"):
            raise UnsupportedError(f"{call.name}: PyTorch tensors on {x.device} are not supported; use cpu or cuda")
        if x.device != device:
            raise UnsupportedError(f"{call.name}: every tensor must be on one device; got {device} and "
                                   f"{x.device} (arrays[{i}])")
    return dtypes


def _traced(arrays) -> bool:
    """Whether something traces this call (the custom operator's route)."""
    return torch.compiler.is_compiling() or _dispatch_modes() > 0 or any(type(x) not in _PLAIN for x in arrays)


def run_move(call, arrays) -> list:
    # the C call cache's generation, read before any setting (a CUDA call is recorded there)
    since = _calls.generation() if call.ccall is not None and arrays[0].device.type == "cuda" else None
    dtypes = _check(call, arrays)
    if _traced(arrays):       # sizes specialised (int() of a SymInt guards on its value)
        desc = call.describe_arrays(dtypes, [tuple(int(n) for n in x.shape) for x in arrays])
        return call_move(desc, arrays)
    wrapped = any(_is_functorch_wrapped(x) for x in arrays)
    record = wrapped or _fwad._current_level >= 0 or (torch.is_grad_enabled() and any(x.requires_grad
                                                                                      for x in arrays))
    if not record and arrays[0].device.type == "cpu":
        # The NumPy path on views of the tensors: validated there with the
        # same rules, and recorded for the caches (the array function's
        # first step, the C call cache, serves the next such call on the
        # tensors themselves).
        return [torch.from_numpy(o) for o in family.run_numpy(call, _views(arrays))]
    desc = call.describe_arrays(dtypes, [tuple(x.shape) for x in arrays])
    if record:
        if family.differentiable(desc):
            return list(_function(desc).apply(_Route(call, desc, arrays[0].device), *arrays))
        if wrapped:
            raise UnsupportedError(f"{call.name}: {desc.OPERATOR} is not differentiable for these types, and "
                                   f"runs under torch.func transforms only where it is")
    if since is not None and arrays[0].device.type == "cuda" and not any(x.is_neg() for x in arrays):
        # recorded in the C call cache, which serves the next such call on
        # the tensors themselves (the array function's first step)
        seq = call.ccall[2]
        return _cuda(desc, arrays, (call, tuple(arrays) if seq else arrays[0], since))
    return kernel(desc, arrays)


def _views(arrays) -> list:
    """NumPy views of plain CPU tensors (a negative view resolved first)."""
    views = []
    for t in arrays:
        t = t.detach()
        if t.is_neg():
            t = t.resolve_neg()
        views.append(t.numpy())
    return views


class _Route:
    """A validated call: re-run it (``call``), run its kernel, its adjoint
    and its linear part (both as the operator module declares them)."""

    __slots__ = ("call", "desc", "device")

    def __init__(self, call, desc, device):
        self.call, self.desc, self.device = call, desc, device

    def adjoint(self, grads, constants=()):
        return adjoint_with(self.desc, grads, constants)

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
        # the values an adjoint reads (index tensors: never differentiated)
        ctx.constants = {i: inputs[1 + i].detach() for i in constant_inputs(ctx.route.desc)}

    @staticmethod
    def backward(ctx, *grads):
        return (None, *ctx.route.adjoint(grads, tuple(ctx.constants.values())))

    @staticmethod
    def jvp(ctx, _, *tangents):
        route = ctx.route
        ts = [ctx.constants[i] if i in ctx.constants else
              t if t is not None else torch.zeros(d.sizes, dtype=_torch_dtype(d), device=route.device)
              for i, (t, d) in enumerate(zip(tangents, route.desc.inputs))]
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
