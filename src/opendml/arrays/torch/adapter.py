"""PyTorch tensors: the array API's route for them, and the first five operators' ``torch.library`` operators
(``opendml::unfold``, ...). A call (``run``) takes one of three routes, generic over what each operator module
declares:

* **Kernel route**, when autograd has nothing to record and nothing traces: the move program
  (``library.kernel_move``) on a CPU tensor's NumPy view or a CUDA tensor by pointer (outputs from PyTorch's caching
  allocator, kernels on the device's current stream; a meta tensor gets meta outputs), recorded in the call cache
  (``runtime/calls.py``), which serves the next such call from C.
* **Autograd route**, when a derivative is needed in eager mode (a tensor requiring grad, an open forward-AD level,
  a ``torch.func`` wrapper; ``_autograd``): the C++ autograd node (``node``) for a call of one tensor and one output
  where it is built and allowed, else the one ``torch.autograd.Function`` (``_MoveLinear``, named ``opendml_<op>``:
  backward the operator's declared adjoint, forward mode its linear part, a ``vmap`` rule), or its old-style twin
  ``_MoveEager`` (a cheaper ``apply``) where no ``torch.func`` transform wraps the inputs.
* **Operator route**, when a tracer is at work (``torch.compile``, fake or functional tensors, a dispatch mode): the
  custom operators below, or their C++ copies (namespace ``opendml_cpp``) once the node library is loaded, whose
  implementations take the kernel route; every other operator's is ``opendml::move`` (``library``), or
  ``opendml::family`` where the sizes are symbolic (``dynamic``). A dual tensor reaching ``through_op`` or a C++
  operator is an error; the custom operators apply their forward-mode rule (``library.define``).

Calls are validated with the array API's messages before they enter an operator; the operators' implementations
call the array API in kernel mode (``_MODE``), so every rule lives in one place. The operators live here, not in
``opendml.torch`` (their public face), because the array API must route through them without importing a layer
above it.
"""
from __future__ import annotations

import contextvars
import functools
import inspect
import sys

import torch
import torch.autograd.forward_ad as _fwad

from ...model.errors import UnsupportedError
from ...ops import OPERATORS
from ...ops._spec import binding_of
from ...ops.fold import _is_sequence
from ...runtime import calls
from ...runtime.config import config
from .._contract import OPERATOR_OF, argument_of, torch_compiling
from .._dispatch import front as api          # the array API's functions (filled by opendml.arrays)
from .. import _dispatch
from . import dynamic, inductor as torch_inductor, library, node as torch_node
from .. import engine
from .dtypes import SUPPORTED_DTYPES, check_device, device_error, numpy_dtype, torch_dtype
from .library import CPP, CPP_NAMESPACE, compiled_status, cpp_op, define, define_cpp, kernel_move, operators

__all__ = ["run", "numpy_dtype", "through_op", "SUPPORTED_DTYPES", "CUSTOM_OPS", "operators", "cpp_op",
           "define_cpp", "compiled_status", "CPP_NAMESPACE"]

#: Tensor types whose memory the kernel route may read directly.
_PLAIN = (torch.Tensor, torch.nn.Parameter)

# -- routing -----------------------------------------------------------------------------------------

_KERNEL, _DESCRIBE = "kernel", "describe"
#: What ``run`` does with a call: None routes it, _KERNEL runs the kernel (the operators' implementations), _DESCRIBE
#: returns the validated description (their fake implementations).
_MODE: contextvars.ContextVar = contextvars.ContextVar("opendml_torch_mode", default=None)
_mode_get = _MODE.get
_is_functorch_wrapped = torch._C._functorch.is_functorch_wrapped_tensor
_dispatch_modes = torch._C._len_torch_dispatch_stack
# (torch.jit.trace's)
_tracing, _set_tracing, _is_tracing = torch._C._get_tracing_state, torch._C._set_tracing_state, torch._C._is_tracing


def _in_mode(mode, fn, *args):
    token = _MODE.set(mode)
    try:
        return fn(*args)
    finally:
        _MODE.reset(token)


def _readable(x, name: str, argument: str = "x") -> None:
    """``numpy_dtype``'s errors for a tensor opendml cannot read at all (nested, not strided, a conjugate view), which
    the array API's checks (``_contract``) report before the dtype and rank."""
    if x.is_nested or x.layout is not torch.strided or x.is_conj():
        numpy_dtype(x, name, argument)


_dispatch.READABLE["torch"] = _readable


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device


def _no_stream(index):
    raise RuntimeError("opendml call cache: this PyTorch has no CUDA streams")


def _not_plain(x) -> bool:
    """The call cache's last routing check: a functorch wrapper, or any tensor while a forward-AD level is open (its
    tangent must be seen) or TorchScript traces (it must record the operator, not the result)."""
    return _fwad._current_level >= 0 or _is_functorch_wrapped(x) or _is_tracing()


calls.register_torch(torch.Tensor, torch.is_grad_enabled, _dispatch_modes, _not_plain,
                     _raw_stream or _no_stream, _current_device, torch.from_numpy)


# -- eager autograd route ----------------------------------------------------------------------------

def _batched(cls, fn, x, args):
    """``fn`` on ``x`` with a leading batch axis, as ``cls.batched_args`` declares: arguments taking
    that axis whole, or (None) the batch axis joined with axis 0 and split out again."""
    new = cls.batched_args(args, x.shape[0])
    if new is None:
        return fn(x.flatten(0, 1), *args).unflatten(0, x.shape[:2])
    return fn(x, *new)


def _autograd(call, arrays, desc, since, wrapped: bool) -> list:
    """``call`` on ``arrays`` (validated as ``desc``) where autograd records it, whatever the operator: the
    C++ node for one tensor and one output where it can record now, its repeats served by the call
    cache's eager entry (``put_eager``), else the Python Function (forward-mode AD, ``torch.func``
    transforms, compiled autograd, no node)."""
    route, memo = _route(call, arrays, desc)
    desc = route.desc
    x = arrays[0]
    # (a torch.func transform in force takes the Function even for inputs it does not wrap: a tensor
    # captured from outside the transformed function)
    wrapped = wrapped or _transforms_active()
    if not wrapped and len(arrays) == 1 and len(desc.outputs) == 1 and not engine.constant_inputs(desc):
        record = _recorder(route, desc.OPERATOR.lower())     # (grad_fn named as _move_function's)
        if record is not None:
            out = record(x)
            if memo and route.args is not None and type(x) is torch.Tensor:
                # The next call like this one is recorded and run from C (runtime/calls.py).
                calls.put_eager(call.name, x, route.args, record, since)
            return [out]
    # (under torch.func transforms, vmap included, the Function routes every call; its backward and jvp refuse an
    # operator not differentiable for these types. A wrapped call may come from a compiled function's skipped
    # frames: Dynamo must compile none of the Function's, ``library.uncompiled``, else its per-element vmap loop and
    # its forward on plain tensors would have it trace the kernel route's NumPy code, with dynamic shapes an
    # internal Dynamo error)
    return (_uncompiled_apply if wrapped else _apply)(desc.OPERATOR.lower(), wrapped, route, arrays)


def _apply(name: str, wrapped: bool, route, arrays) -> list:
    return list(_move_function(name, wrapped).apply(route, *arrays))


_uncompiled_apply = library.uncompiled(_apply)


#: (call key, dtype, shape, device) -> _Route: calls of one tensor already validated.
_ROUTES_AD: dict = {}


def _route(call, arrays, desc):
    """(``call``'s ``_Route`` on ``arrays``, validated as ``desc``; whether it is remembered): one tensor's
    by its call key, dtype, shape and device."""
    x = arrays[0]
    key = call.key
    memo = None if key is None or len(arrays) != 1 else (key, x.dtype, tuple(x.shape), x.device)
    route = None if memo is None else _ROUTES_AD.get(memo)
    if route is None:
        route = _Route(call, desc, x.device)
        if memo is not None:
            if len(_ROUTES_AD) >= 1024:
                _ROUTES_AD.clear()
            _ROUTES_AD[memo] = route
    return route, memo is not None


def _spec(name: str, args: tuple) -> tuple:
    """The C++ node's call spec of ``name(x, *args)``: the call cache's function, the operator's code, the
    arguments, the array-API function (it records what the cache then serves)."""
    fn = getattr(api, name)
    return (calls.move, calls.OPS[name], args, lambda t: fn(t, *args))


class _Route:
    """A call validated on tensors of given dtypes and shapes, for autograd: re-run it (``call``, ``run``), its
    adjoint and its linear part (``adjoint``, ``tangent``: the Python Function's), and as the C++ node's call specs
    (``kernel``, ``adjoint_spec``): the kernel through the call cache (the arguments as the function offered them,
    ``args``, for one tensor and one output), the adjoint the operator module declares: its array-API call where it
    states one (``adjoint_call``), else ``engine.adjoint``."""

    __slots__ = ("call", "desc", "device", "args", "kernel", "adjoint_spec", "recorder")

    def __init__(self, call, desc, device):
        self.call, self.desc, self.device = call, desc, device
        self.args = (None if call.multi or (call.ccall is not None and call.ccall[2]) else tuple(call.args)
                     if call.args else call.ccall[1] if call.ccall is not None else None)
        self.kernel = (_spec(call.name, self.args) if self.args is not None else
                       (None, None, (), lambda t: library.kernel(desc, [t])[0]))
        stated = getattr(desc, "adjoint_call", None)
        name, args, reshape = stated(desc.inputs[0].sizes, desc.call_args()) if stated else (None, None, None)
        self.adjoint_spec = (_spec(name, tuple(args)) if name is not None and reshape is None else
                             (None, None, (), lambda g: engine.adjoint(desc, (g,))[0]))
        self.recorder = None              # the node's apply with this call's grad_fn type and specs bound

    def _differentiable(self):
        if not engine.differentiable(self.desc):
            raise UnsupportedError(f"{self.call.name}: {self.desc.OPERATOR} is not differentiable for these types")

    def run(self, xs) -> tuple:
        """The kernel on plain ``xs`` (no autograd): from the call cache where it serves, else the move program."""
        if self.args is not None:
            x = xs[0].detach() if _fwad._current_level >= 0 else xs[0]     # a dual tensor's primal alone
            out = self.kernel[0](self.kernel[1], x, *self.args)
            if out is not None:
                return (out,)
        since = calls.generation() if self.call.ccall is not None else None
        return tuple(kernel_move(self.call, self.desc, xs, since))

    def adjoint(self, grads, constants=()):
        self._differentiable()
        if len(self.desc.inputs) == 1 and len(grads) == 1 and not constants:
            return (self.adjoint_spec[3](grads[0]),)
        return engine.adjoint(self.desc, grads, constants)

    def tangent(self, tangents):
        self._differentiable()
        lin = self.desc.linear_part()
        if lin is self.desc and self.args is not None:    # linear: the function itself on the tangent
            return [getattr(api, self.call.name)(tangents[0], *self.args)]
        return engine.fixed(lin, self.call.name)(*tangents)


def _recorder(route, name: str):
    """The C++ node's recorder of ``route`` (its ``kernel`` and ``adjoint_spec``, made once and kept in
    ``route.recorder``), or None where the node cannot record now: not built or off, an open forward-AD level, a
    TorchScript trace, compiled autograd (those need the Python Function)."""
    if _fwad._current_level >= 0 or _tracing() is not None or _compiled_autograd():
        return None
    node = torch_node.get()
    if node is None:
        return None
    record = route.recorder
    if record is None:
        record = route.recorder = node.recorder(torch_node.slot(node, f"opendml_{name}Backward"), route.kernel,
                                                route.adjoint_spec)
        if _EAGER_CHECK[0] is not node:   # the node's check from now on: _eager_ok's, in C++
            calls.register_torch_eager(node.eager_check(torch_node._state, config.__globals__, vars(sys), _eager_ok))
            _EAGER_CHECK[0] = node
    return record


_transforms_active = torch._C._are_functorch_transforms_active


def _eager_ok() -> bool:
    """Whether the call cache's eager entries (the node's recorders) serve: ``_autograd``'s, ``_recorder``'s tests."""
    return (torch_node._state["module"] is not None and _tracing() is None and not _compiled_autograd()
            and not _transforms_active() and config().torch_node != "off")


calls.register_torch_eager(_eager_ok)
#: The node whose C++ copy of _eager_ok the call cache asks (registered with its first recorder: before it, no eager
#: entry exists to serve).
_EAGER_CHECK: list = [None]

# The node library's tensor accessors serve repeated calls on plain tensors too: start loading it in the background.
torch_node.prefetch()


def _compiled_autograd() -> bool:
    """Whether compiled autograd is on: its graphs need the Python Function's nodes."""
    ca = sys.modules.get("torch._dynamo.compiled_autograd")
    return ca is not None and bool(getattr(ca, "compiled_autograd_enabled", False))


# -- operator route ----------------------------------------------------------------------------------

#: (operator call key, dtype, device type, shape, strides, custom table) -> (operator, arguments, the shape x takes
#: first or None): calls already validated and converted, so a repeated call that needs the operator skips both.
_ROUTES: dict = {}


def through_op(x, call):
    """``call`` through the custom operators, validated first (where ``x``'s sizes are known) by the array API."""
    dtype = numpy_dtype(x, call.name)     # first: a sparse or nested tensor has no strides to read
    check_device(x, call.name)
    if _fwad._current_level >= 0 and not torch_compiling(torch) and _fwad.unpack_dual(x).tangent is not None:
        raise UnsupportedError(f"{call.name}: forward-mode AD (a dual tensor) under a tracer or dispatch mode is "
                               f"not supported by opendml's custom operators; call it eagerly (outside the "
                               f"tracer), where forward-mode AD is exact")
    shape, strides = tuple(x.shape), x.stride()
    ops = operators()
    CPP["last"] = "opendml" if ops is _CUSTOM else CPP_NAMESPACE
    memo = None
    if _concrete(shape) and _concrete(strides):
        key = call.key
        if key is not None:
            memo = (key, x.dtype, x.device.type, shape, strides, ops is _CUSTOM)
            hit = _ROUTES.get(memo)
            if hit is not None:
                op, args, reshape = hit
                return op(x if reshape is None else x.reshape(reshape), *args)
        call.describe_arrays([dtype], [x.shape])       # (validated: the array API's errors)
    else:
        _validate_hinted(x, call.name, call.args)
    name, lists, reshape = OPERATOR_OF[call.name].framework_call(shape, call.args, _ints)
    op, args = bind_op(ops, name, lists)
    if memo is not None:
        if len(_ROUTES) >= 1024:
            _ROUTES.clear()
        _ROUTES[memo] = op, args, reshape
    return op(x if reshape is None else x.reshape(reshape), *args)


def _validate_hinted(x, name: str, args) -> None:
    """A call of ``name`` on symbolic sizes or arguments validated for their hints (their values in the call traced,
    read without a guard), so that bad values are the array API's error, not the framework form's."""
    shape = [dynamic._hint(n) for n in x.shape]
    hinted = [[dynamic._hint(n) for n in a] if _is_sequence(a) else dynamic._hint(a) if isinstance(a, torch.SymInt)
              else a for a in args]
    if None not in shape and all(h is not None or a is None for h, a in zip(hinted, args)) and \
            all(None not in h for h in hinted if _is_sequence(h)):
        _in_mode(_DESCRIBE, getattr(api, name), x.new_empty(shape), *hinted)


def _ints(value, d: int = 0) -> list:
    """A list of ints (or SymInts) from an int (repeated ``d`` times) or a sequence."""
    if not _is_sequence(value):
        return [_int(value)] * max(d, 1)
    return [_int(v) for v in value]


def _int(v):
    return v if isinstance(v, (int, torch.SymInt)) else int(v)


def _concrete(values) -> bool:
    return all(type(v) is int for v in values)


# -- the operators -----------------------------------------------------------------------------------

#: The operators' schemas (after the name), the same in both namespaces: the framework form
#: (``framework_call``) of the array API's calls, as each operator declares it.
_SCHEMAS = {binding_of(cls).function: cls.SCHEMA for cls in OPERATORS.values() if "SCHEMA" in vars(cls)}
#: The C++ operators pack their int lists into one (the dispatcher's Python entry costs about half as
#: much with one list as with five): ``_SPLITS[name]`` lists of one length, one after another.
_SPLITS = {name: _SCHEMAS[name].count("[]") for name in _SCHEMAS}
#: The custom operators by name (the table of the operator route without the C++ library).
_CUSTOM = library.CUSTOM


def _kernel_of(name: str):
    """The operators' implementation: the array API's function ``name`` in kernel mode."""
    def kernel(x, *args):
        return _in_mode(_KERNEL, getattr(api, name), x, *args)
    kernel.__name__ = name
    return kernel


def _fake_of(name: str):
    """A packed fake output: the validated description's sizes, or the shape rule's on symbolic sizes or arguments,
    validated first for their hints (``_validate_hinted``)."""
    rule = OPERATOR_OF[name].output_sizes_of

    def fake(x, *args):
        numpy_dtype(x, name)
        if _concrete(x.shape) and all(_concrete(a) for a in args):
            return x.new_empty(_in_mode(_DESCRIBE, getattr(api, name), x, *args).output_tensor.sizes)
        _validate_hinted(x, name, args)
        return x.new_empty(rule(tuple(x.shape), *args))
    fake.__name__ = f"{name}_fake"
    return fake


def _keep_inputs(ctx, inputs, output):
    ctx.sizes = inputs[0].shape
    ctx.args = inputs[1:]


def _gradient_of(name: str):
    """The gradient formula ``gradient(sizes, args, ops, grad)``: x's gradient from x's ``sizes``, the call's other
    ``args`` and its output's ``grad``, over an operator table (``ops``: the custom operators or the C++ ones)."""
    cls = OPERATOR_OF[name]

    def gradient(sizes, args, ops, grad):
        adjoint, adjoint_args, reshape = cls.adjoint_call(tuple(sizes), tuple(args))
        op, lists, grad_shape = OPERATOR_OF[adjoint].framework_call(tuple(grad.shape), adjoint_args, _ints)
        out = call_op(ops, op, grad if grad_shape is None else grad.reshape(grad_shape), *lists)
        return out if reshape is None else out.reshape(reshape)
    return gradient


def _rule_of(name: str):
    """rule(op): op's batching rule."""
    cls = OPERATOR_OF[name]

    def rule_of(op):
        def rule(info, in_dims, x, *args):
            return _batched(cls, op, x.movedim(in_dims[0], 0), args), 0
        return rule
    return rule_of


def _unpack(name: str, packed) -> list:
    """The ``_SPLITS[name]`` lists a packed list holds (the C++ kernel's check_packed raises the same error)."""
    k = _SPLITS[name]
    n = len(packed)
    if n % k:
        raise ValueError(f"{CPP_NAMESPACE}::{name}: args packs {k} lists of one length, one after another: its "
                         f"length must be a multiple of {k}, not {n}")
    m = n // k
    return [list(packed[i * m:(i + 1) * m]) for i in range(k)]


def bind_op(ops: dict, name: str, lists: tuple):
    """(operator, its arguments after the tensor) for ``name`` of table ``ops`` on ``lists``: packed for the C++
    table, unless the lists differ in length (the custom operator's validation answers)."""
    if ops is _CUSTOM or name not in _SPLITS:
        return ops[name], tuple(lists)
    n = len(lists[0]) if lists else 0
    if any(len(v) != n for v in lists):
        return _CUSTOM[name], tuple(lists)
    return ops[name], ([v for part in lists for v in part],)


def call_op(ops: dict, name: str, x, *lists):
    """The window operator ``name`` of table ``ops`` on ``x`` and ``lists`` (packed for the C++ table)."""
    op, args = bind_op(ops, name, lists)
    return op(x, *args)


def _packed(name: str, fake, rule_of, gradient):
    """The C++ operator's fake, vmap rule and backward(saved, grads) (``saved``: x's sizes, the packed list), from the
    custom operator's."""
    def packed_fake(x, args):
        ops = CPP["ops"]
        if ops is not None:
            torch_inductor.prepare(CPP_NAMESPACE, ops)    # Inductor's direct calls (cheap once done)
        return fake(x, *_unpack(name, args))

    def packed_rule_of(op):
        inner = rule_of(lambda x, *lists: op(x, [v for part in lists for v in part]))
        return lambda info, in_dims, x, args: inner(info, in_dims, x, *_unpack(name, args))

    def packed_backward(saved, grads):
        return (gradient(saved[0], _unpack(name, saved[1]), CPP["ops"], grads[0]),)
    packed_fake.__name__ = f"{name}_packed_fake"
    return packed_fake, packed_rule_of, packed_backward


#: The custom operators (``opendml::<function>``, ``library.define``: linear in their tensor, the forward mode runs
#: them on its tangent), by array-API name; each also defined among the C++ operators, its int lists packed into one.
CUSTOM_OPS: dict = _CUSTOM
for _name, _schema in _SCHEMAS.items():
    _kernel, _fake, _gradient, _rule = _kernel_of(_name), _fake_of(_name), _gradient_of(_name), _rule_of(_name)
    _CUSTOM[_name] = define(_name, _schema, _kernel, _fake, _keep_inputs, lambda ctx, grad, _g=_gradient: (
        _g(ctx.sizes, ctx.args, _CUSTOM, grad), *(None,) * len(ctx.args)), rule=_rule)
    # the call cache keys the array API's arguments: those the framework form leaves out, None
    _extra = (None,) * (len(inspect.signature(getattr(api, _name)).parameters) - 1 - _SPLITS[_name])
    _packed_schema = "(Tensor {0}, {1} args) -> Tensor".format(_schema[len("(Tensor "):].split(",")[0],
                                                               "SymInt[]" if "SymInt[]" in _schema else "int[]")
    define_cpp(_name, _packed_schema, (calls.call, calls.OPS[_name], _extra, _kernel), False,
               *_packed(_name, _fake, _rule, _gradient), _SPLITS[_name])


# -- the data-movement family: one route for every operator ----------------------------------------

def _check_move(call, arrays):
    dtypes = [numpy_dtype(x, call.name, i) for i, x in enumerate(arrays)]
    device = arrays[0].device
    for i, x in enumerate(arrays):
        check_device(x, call.name)
        if x.device != device:
            raise device_error(call.name, device, x.device, argument_of(call.name, i))
    return dtypes


def _traced(arrays) -> bool:
    """Whether something traces this call (the custom operator's route)."""
    return torch_compiling(torch) or _dispatch_modes() > 0 or any(type(x) not in _PLAIN for x in arrays)


def traced_index(name: str, given: tuple, args: tuple) -> list | None:
    """An index function's traced call whose sizes are symbolic or that checks its indices, through
    ``opendml::family`` (``dynamic``), or None: the index route (``opendml::move``, sizes fixed) takes it. While
    TorchScript traces, a call autograd need not record: ``opendml::family``, which the trace records (its
    implementation the function itself: the indices of every call checked, as eagerly)."""
    if _traced(given):
        return dynamic.traced_index(name, given, args)
    if _tracing() is None or _fwad._current_level >= 0 or not all(type(x) in _PLAIN for x in given) or \
            (torch.is_grad_enabled() and any(x.requires_grad for x in given)):
        return None
    return dynamic.jit_index(name, given, args)


def run(call, arrays) -> list:
    """The adapter's one entry: ``call`` on tensors; the outputs as a list."""
    mode = _mode_get()
    if mode is _DESCRIBE:                 # a custom operator's fake: the validated description
        return [call.describe_arrays([numpy_dtype(arrays[0], call.name)], [arrays[0].shape])]
    # the C call cache's generation, read before any setting (a CUDA call is recorded there)
    since = calls.generation() if call.ccall is not None else None
    dtypes = _check_move(call, arrays)
    if mode is _KERNEL:                   # a custom operator's implementation: the move program
        return kernel_move(call, call.describe_arrays(dtypes, [x.shape for x in arrays]), arrays, since)
    if _traced(arrays):       # else sizes specialised (int() of a SymInt guards on its value)
        if call.args:         # the first five: their own custom operators (Inductor calls them directly)
            return [through_op(arrays[0], call)]
        outs = dynamic.traced(call, arrays)     # symbolic sizes kept where the operator allows it
        if outs is not None:
            return outs
        desc = call.describe_arrays(dtypes, [tuple(int(n) for n in x.shape) for x in arrays])
        # (not differentiable for these types: no gradient, as eagerly; AOTAutograd would trace the adjoint)
        return library.call_move(desc, [x if engine.differentiable(desc) else x.detach() for x in arrays])
    wrapped = any(_is_functorch_wrapped(x) for x in arrays)
    record = wrapped or _fwad._current_level >= 0 or (torch.is_grad_enabled() and any(x.requires_grad
                                                                                      for x in arrays))
    if not record:
        tracing = _tracing()
        if tracing is not None:       # TorchScript traces: it must record the operator, not the result
            return _jit_traced(call, arrays, dtypes, tracing)
        if arrays[0].device.type == "cpu":
            return kernel_move(call, None, arrays, since)
    desc = call.describe_arrays(dtypes, [tuple(x.shape) for x in arrays])
    if record and (wrapped or engine.differentiable(desc)):
        return _autograd(call, arrays, desc, since, wrapped)
    return kernel_move(call, desc, arrays, since)


def _jit_traced(call, arrays, dtypes, tracing) -> list:
    """``call`` while TorchScript traces (``tracing``: its state), through ``opendml_cpp::move`` or ``opendml::move``,
    which the trace records with the description: validated for the inputs' sizes as the trace fixes them, read with
    the trace paused (traced, they are tensors, whose ``int`` it warns of)."""
    _set_tracing(None)
    try:
        desc = call.describe_arrays(dtypes, [tuple(x.shape) for x in arrays])
    finally:
        _set_tracing(tracing)
    return library.call_move(desc, arrays)


class _MoveLinear(torch.autograd.Function):
    """The one autograd Function of every operator: ``apply(route, *inputs)`` (``route``: a ``_Route``) -> the outputs'
    tuple."""

    @staticmethod
    def forward(route, *xs):
        if any(_is_functorch_wrapped(x) for x in xs):      # a lower transform still wraps them: route again
            return tuple(route.call(*xs))
        return route.run(xs)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.route = inputs[0]
        # the values an adjoint reads (index tensors: never differentiated)
        ctx.constants = {i: inputs[1 + i].detach() for i in engine.constant_inputs(ctx.route.desc)}

    @staticmethod
    def backward(ctx, *grads):
        return (None, *ctx.route.adjoint(grads, tuple(ctx.constants.values())))

    @staticmethod
    def jvp(ctx, _, *tangents):
        route = ctx.route
        ts = [ctx.constants[i] if i in ctx.constants else
              t if t is not None else torch.zeros(d.sizes, dtype=torch_dtype(d), device=route.device)
              for i, (t, d) in enumerate(zip(tangents, route.desc.inputs))]
        return tuple(route.tangent(ts))

    @staticmethod
    def vmap(info, in_dims, route, *xs):
        cls, args = type(route.desc), route.call.args
        if args and hasattr(cls, "batched_args"):         # one call on the batch, as the operator declares
            return (_batched(cls, getattr(api, route.call.name), xs[0].movedim(in_dims[1], 0), args),), (0,)
        outs = tuple(library.batched(info, in_dims[1:], xs, lambda b: route.call(*b), route.call.name))
        return outs, (0,) * len(outs)


class _MoveEager(torch.autograd.Function):
    """``_MoveLinear``'s rules in the old-style form (``ctx`` in ``forward``), for calls no ``torch.func`` transform
    wraps: its ``apply`` costs a fraction of the ``setup_context`` form's, which binds its arguments by
    ``inspect.signature`` on every call."""

    @staticmethod
    def forward(ctx, route, *xs):
        _MoveLinear.setup_context(ctx, (route, *xs), None)
        return route.run(xs)

    backward = staticmethod(_MoveLinear.backward)
    jvp = staticmethod(_MoveLinear.jvp)


@functools.lru_cache(maxsize=None)
def _move_function(name: str, wrapped: bool):
    """``_MoveLinear`` (``_MoveEager`` where no ``torch.func`` transform wraps the inputs) under the operator's name
    (``name``, lower case), so a result's ``grad_fn`` says which."""
    return type(f"opendml_{name}", (_MoveLinear if wrapped else _MoveEager,), {})
