"""The data-movement family under dynamic shapes: a traced call whose input sizes are symbolic (``torch.compile``
with dynamic shapes) enters the graph as ONE custom operator that keeps them symbolic::

    opendml::family(Tensor[] inputs, str call) -> Tensor[]
    opendml::family_adjoint(Tensor[] grads, Tensor[] inputs, str call) -> Tensor[]

``call`` is the array function's call without its arrays, as JSON text: ``[name, [argument, ...], seq,
linear]`` (``seq``: the arrays are one sequence, JOIN's; ``linear``: run the description's linear part,
a gradient of a gradient or a tangent). Its implementation is the array function itself on the tensors; its fake builds
the description from the sizes' hints (their values in the call being traced, read without a guard) and
gives the outputs the operator's shape formula on the symbolic sizes (``output_sizes_for``); the
implementation validates every real call, so a shape the hints passed but a later call's do not is the
array function's error then. ``family_adjoint`` is the description's adjoint (the operator's own, through
the array API), whose gradient is ``family``'s linear part: gradients of gradients trace too. Both check
what they are given as the functions do (fake and implementation alike): a text of the wrong form or
arity, tensors on two devices, gradients other than the call's outputs are opendml errors.

Taken only where it can be: every input size is a backed symbol or an int, the operator states a shape
formula, its adjoint reads no input values (not the index functions) and every argument has a text form
(ints, floats, strings, None, bools, lists and tuples of them, PyTorch and NumPy dtypes); any other traced
call takes ``opendml::move`` with its sizes fixed (``library``). The adapter calls ``traced``; the front's
``family_call`` (in ``_dispatch.front``) rebuilds a call from its text.
"""
from __future__ import annotations

import functools
import json

import numpy as np
import torch

from ...model.errors import ValidationError
from .. import _dispatch, engine
from .dtypes import device_error, numpy_dtype, torch_dtype
from .library import define

__all__ = ["traced", "text_of"]

class _NoText(Exception):
    pass


def _encode(v):
    t = type(v)
    if v is None or t in (bool, int, float, str):
        return v
    if t is list:
        return [_encode(e) for e in v]
    if t is tuple:
        return {"tuple": [_encode(e) for e in v]}
    if isinstance(v, torch.dtype):
        return {"torch": str(v).removeprefix("torch.")}
    if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
        return {"numpy": np.dtype(v).name}
    raise _NoText


def _decode(v, text: str):
    if type(v) is list:
        return [_decode(e, text) for e in v]
    if type(v) is not dict:
        return v
    if len(v) == 1 and type(v.get("tuple")) is list:
        return tuple(_decode(e, text) for e in v["tuple"])
    dtype = getattr(torch, v["torch"], None) if len(v) == 1 and type(v.get("torch")) is str else None
    if isinstance(dtype, torch.dtype):
        return dtype
    if len(v) == 1 and type(v.get("numpy")) is str:
        try:
            return np.dtype(v["numpy"])
        except TypeError:
            pass
    raise ValidationError(f"opendml::family: call {text[:200]!r}: an argument {v!r} is none of the text forms "
                          f"(a tuple, a torch or numpy dtype)")


def text_of(call, linear: bool = False) -> str | None:
    """``call``'s text for ``opendml::family``, or None where an argument has no text form."""
    if call.ccall is None:
        return None
    name, args, seq = call.ccall
    try:
        return json.dumps([name, [_encode(a) for a in args], bool(seq), linear], separators=(",", ":"))
    except _NoText:
        return None


@functools.lru_cache(maxsize=1024)
def _loads(text: str):
    try:                                      # (nested past the recursion limit: a RecursionError)
        name, args, seq, linear = json.loads(text)
        if type(name) is not str or type(args) is not list or type(seq) is not bool or type(linear) is not bool:
            raise ValidationError(f"opendml::family: call must be [name, [arguments], seq, linear]; got "
                                  f"{text[:200]!r}")
        return name, tuple(_decode(args, text)), seq, linear
    except (ValueError, TypeError, RecursionError) as e:
        raise ValidationError(f"opendml::family: call must be the JSON text [name, [arguments], seq, linear]; "
                              f"got {text[:200]!r} ({str(e)[:200]})") from None


def _parse(text: str, inputs):
    """(name, the arrays argument, the other arguments, linear) of a call's text on ``inputs``; a
    ``ValidationError`` for text that is not one."""
    if type(text) is not str:
        raise ValidationError(f"opendml::family: call must be a str; got {type(text).__name__}")
    name, args, seq, linear = _loads(text)
    inputs = list(inputs)
    if not inputs or (not seq and len(inputs) != 1):
        raise ValidationError(f"opendml::family: {name!r} takes {'one or more input tensors' if seq else 'one input tensor'}; "
                              f"got {len(inputs)}")
    _one_device("family", inputs)
    return name, inputs if seq else inputs[0], args, linear


def _one_device(op: str, tensors) -> None:
    """An ``UnsupportedError`` where ``tensors`` are on more than one device (as ``opendml::move``'s)."""
    for i, x in enumerate(tensors):
        if x.device != tensors[0].device:
            raise device_error(f"opendml::{op}", tensors[0].device, x.device, f"tensor {i}")


def _desc_of(text: str, inputs):
    """(the validated description of a call's text on ``inputs``' sizes' hints, nothing run; linear)."""
    name, x, args, linear = _parse(text, inputs)
    return _description(_dispatch.front.family_call(name, x, args), inputs), linear


def _hint(n):
    if type(n) is int:
        return n
    hint = n.node.hint if isinstance(n, torch.SymInt) else None
    return hint if type(hint) is int else None


def _description(call, inputs):
    """The validated description for the inputs' sizes' hints (their values in the call traced)."""
    dtypes = [numpy_dtype(x, call.name) for x in inputs]
    return call.describe_arrays(dtypes, [tuple(_hint(n) for n in x.shape) for x in inputs])


def traced(call, arrays) -> list | None:
    """A traced call whose sizes are symbolic through ``opendml::family``, or None (``opendml::move`` takes it)."""
    if all(type(n) is int for x in arrays for n in x.shape):
        return None
    if any(_hint(n) is None for x in arrays for n in x.shape):
        return None
    text = text_of(call)
    if text is None:
        return None
    desc = _description(call, arrays)
    if desc.output_sizes_for([x.shape for x in arrays]) is None or engine.constant_inputs(desc):
        return None
    return list(family_op(list(arrays), text))


def _run(inputs, text):
    name, x, args, linear = _parse(text, inputs)
    with torch.no_grad():
        if linear:
            call = _dispatch.front.family_call(name, x, args)
            outs = engine.fixed(engine.linear_part(_description(call, inputs)))(*inputs)
        else:   # the function itself (only a family function's text runs; it checks its call; its repeats cached)
            out = _dispatch.front.family_function(name, args)(x, *args)
            outs = out if isinstance(out, list) else [out]
    return [o.clone() if any(o.data_ptr() == x.data_ptr() for x in inputs) else o for o in outs]


def _family_fake(inputs, call):
    desc, linear = _desc_of(call, inputs)
    if linear:
        engine.linear_part(desc)          # (its error: a call without one, as the implementation's)
    sizes = desc.output_sizes_for([tuple(x.shape) for x in inputs])
    return [inputs[0].new_empty(s, dtype=torch_dtype(t)) for s, t in zip(sizes, desc.outputs)]


def _setup(ctx, inputs, output):
    """Either operator's: its call text and its tensor inputs' sizes and dtypes (no input kept alive for the
    backward)."""
    ctx.call = inputs[-1]
    ctx.like = [(tuple(x.shape), x.dtype) for x in inputs[-2]]


def _family_backward(ctx, grads):
    ref = next(g for g in grads if g is not None)
    # the adjoint reads the inputs' sizes and dtypes alone: one element each, expanded, stands in for them
    inputs = [ref.new_empty((), dtype=dtype).expand(shape) for shape, dtype in ctx.like]
    desc, _ = _desc_of(ctx.call, inputs)
    sizes = desc.output_sizes_for([tuple(x.shape) for x in inputs])
    grads = [g if g is not None else ref.new_zeros(s, dtype=torch_dtype(t))
             for g, s, t in zip(grads, sizes, desc.outputs)]
    return list(adjoint_op(grads, inputs, ctx.call)), None


def _linear(call: str) -> str:
    """The text of ``call``'s linear part (``linear`` set)."""
    name, args, seq, _ = json.loads(call)
    return json.dumps([name, args, seq, True], separators=(",", ":"))


def _family_tangent(primals, tangents, args):
    return family_op(tangents, _linear(args[1]))


family_op = define("family", "(Tensor[] inputs, str call) -> Tensor[]", _run, _family_fake, _setup,
                   _family_backward, _family_tangent)


def _adjoint_run(grads, inputs, call):
    desc = _adjoint_description(grads, inputs, call)
    with torch.no_grad():
        outs = engine.adjoint(desc, list(grads))
    return [o.contiguous().clone() if any(o.data_ptr() == g.data_ptr() for g in grads) else o.contiguous()
            for o in outs]


def _adjoint_description(grads, inputs, call):
    """The description of ``family_adjoint``'s call, its gradients checked against its outputs (sizes: the hints'
    where symbolic, the fake's; their values, the implementation's)."""
    desc, _ = _desc_of(call, inputs)
    _one_device("family_adjoint", [*inputs, *grads])
    if len(grads) != len(desc.outputs):
        raise ValidationError(f"opendml::family_adjoint: {desc.OPERATOR} has {len(desc.outputs)} output(s); got "
                              f"{len(grads)} gradients")
    for i, (g, t) in enumerate(zip(grads, desc.outputs)):
        if g.dtype != torch_dtype(t) or g.dim() != len(t.sizes) or any(
                _hint(n) not in (None, s) for n, s in zip(g.shape, t.sizes)):
            raise ValidationError(f"opendml::family_adjoint: {desc.OPERATOR}: grads[{i}] must have sizes "
                                  f"{list(t.sizes)} and dtype {torch_dtype(t)} as the call's output {i}; got "
                                  f"{list(g.shape)} {g.dtype}")
    return desc


def _adjoint_fake(grads, inputs, call):
    _adjoint_description(grads, inputs, call)
    return [x.new_empty(tuple(x.shape)) for x in inputs]


def _adjoint_backward(ctx, grads):
    ref = next(g for g in grads if g is not None)
    ws = [g if g is not None else ref.new_zeros(shape, dtype=dtype) for g, (shape, dtype) in zip(grads, ctx.like)]
    return list(family_op(ws, _linear(ctx.call))), [None] * len(ctx.like), None


def _adjoint_tangent(primals, tangents, args):
    """The adjoint is linear in the gradients and reads its inputs' sizes alone: its tangent is itself on the
    gradients' tangents."""
    return adjoint_op(tangents, args[1], args[2])


adjoint_op = define("family_adjoint", "(Tensor[] grads, Tensor[] inputs, str call) -> Tensor[]", _adjoint_run,
                    _adjoint_fake, _setup, _adjoint_backward, _adjoint_tangent)
