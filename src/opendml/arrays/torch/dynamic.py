"""The data-movement family under dynamic shapes, the index functions included: a traced call whose input sizes are
symbolic (``torch.compile`` with dynamic shapes), and an index function's traced call that checks its indices
whatever its sizes (the check needs each call's index values), enters the graph as ONE custom operator that keeps
them symbolic::

    opendml::family(Tensor[] inputs, str call) -> Tensor[]
    opendml::family_adjoint(Tensor[] grads, Tensor[] inputs, str call) -> Tensor[]

``call`` is the array function's call without its arrays, as JSON text: ``[name, [argument, ...], seq, linear]``
(``seq``: the arrays are one sequence, JOIN's; ``linear``: run the description's linear part, a gradient of a
gradient or a tangent). An index function's inputs are its arrays in its order, its arguments those its body offers
(``check_indices`` first). The implementation is the array function itself, which validates every real call (a
shape the hints passed but a later call's do not is its error then); the fake builds the description from the
sizes' hints and gives the outputs the operator's shape formula on the symbolic sizes. ``family_adjoint`` is the
description's adjoint, whose gradient is ``family``'s linear part: gradients of gradients trace too. The backward
keeps the inputs whose values the adjoint reads (``ADJOINT_INPUTS``) and the others' sizes alone. Both operators
check what they are given (fake and implementation alike): a text of the wrong form or arity, tensors on two
devices, gradients other than the call's outputs are opendml errors.

Taken only where it can be: every input size is a backed symbol or an int, the operator states a shape formula and
every argument has a text form (ints, floats, strings, None, bools, lists and tuples of them, PyTorch and NumPy
dtypes); any other traced call takes ``opendml::move`` with its sizes fixed (``library``). The front's
``family_call`` and ``index_run`` (``_dispatch.front``) rebuild a call from its text.
"""
from __future__ import annotations

import functools
import json

import numpy as np
import torch

from ...model.errors import ValidationError
from ...runtime.calls import CHECKED
from .. import _dispatch, engine
from .dtypes import device_error, numpy_dtype, torch_dtype
from .library import define

__all__ = ["traced", "traced_index", "jit_index", "text_of"]

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


def _text(name: str, args, seq: bool, linear: bool) -> str | None:
    """A call's text for ``opendml::family``, or None where an argument has no text form."""
    try:
        return json.dumps([name, [_encode(a) for a in args], seq, linear], separators=(",", ":"))
    except _NoText:
        return None


def text_of(call) -> str | None:
    """``call``'s text for ``opendml::family``, or None where it has none."""
    if call.ccall is None:
        return None
    name, args, seq = call.ccall
    return _text(name, args, bool(seq), False)


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
    """(name, the arrays argument, the other arguments, linear) of a call's text on ``inputs``; a ``ValidationError``
    for text that is not one. An index function's arrays argument is every input (its arrays, in its order:
    ``index_function`` checks their number)."""
    if type(text) is not str:
        raise ValidationError(f"opendml::family: call must be a str; got {type(text).__name__}")
    name, args, seq, linear = _loads(text)
    inputs = list(inputs)
    index = name in _dispatch.front.INDEX
    if not index and (not inputs or (not seq and len(inputs) != 1)):
        raise ValidationError(f"opendml::family: {name!r} takes {'one or more input tensors' if seq else 'one input tensor'}; "
                              f"got {len(inputs)}")
    _one_device("family", inputs)
    return name, inputs if seq or index else inputs[0], args, linear


def _one_device(op: str, tensors) -> None:
    """An ``UnsupportedError`` where ``tensors`` are on more than one device (as ``opendml::move``'s)."""
    for i, x in enumerate(tensors):
        if x.device != tensors[0].device:
            raise device_error(f"opendml::{op}", tensors[0].device, x.device, f"tensor {i}")


def _desc_of(text: str, inputs):
    """(the validated description of a call's text on ``inputs``' sizes' hints, nothing run; linear; for an index
    function (arrays, shape): the arrays the description is made for and the result's shape, both hints; else None)."""
    name, x, args, linear = _parse(text, inputs)
    if name not in _dispatch.front.INDEX:
        return _description(_dispatch.front.family_call(name, x, args), inputs), linear, None
    # (a stand-in of each tensor's hints: ``arguments`` reads its arrays' sizes as ints)
    given = [t if all(type(n) is int for n in t.shape) else
             torch.empty([_hint(n) for n in t.shape], dtype=t.dtype, device="meta") for t in x]
    make, arrays, shape = _dispatch.front.index_parts(name, given, args)
    dtypes = [numpy_dtype(a, name) for a in arrays]
    return engine.Call(name, make).describe_arrays(dtypes, [a.shape for a in arrays]), linear, (arrays, shape)


def _onto(hints, sizes) -> tuple:
    """``hints`` (a shape of ints) with its sizes other than 1 replaced, in order, by those of ``sizes``
    (symbolic or ints, whose hints are ``hints`` up to 1s put in or left out: the same elements reshaped)."""
    rest = iter([n for n in sizes if _hint(n) != 1])
    return tuple(n if n == 1 else next(rest) for n in hints)


def _output_sizes(desc, index, inputs):
    """The outputs' sizes for ``inputs`` (symbolic where theirs are) by the operator's formula (``output_sizes_for``),
    or None where it states none; an index function's result's, of its natural shape."""
    if index is None:
        return desc.output_sizes_for([tuple(x.shape) for x in inputs])
    arrays, shape = index
    sizes = desc.output_sizes_for([_onto(tuple(a.shape), tuple(x.shape)) for a, x in zip(arrays, inputs)])
    return None if sizes is None else [_onto(tuple(shape), sizes[0])]


def _kept(text: str, inputs) -> tuple:
    """The input positions whose values a call's adjoint reads (an index function's index tensor), kept for backward."""
    if _loads(text)[0] not in _dispatch.front.INDEX:
        return ()
    return engine.constant_inputs(_desc_of(text, inputs)[0])


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


def traced_index(name: str, given: tuple, args: tuple) -> list | None:
    """An index function's traced call through ``opendml::family``, or None (the index route takes it:
    ``opendml::move``, sizes fixed): its arrays PyTorch tensors on one device, every size a backed symbol (of a hint
    other than 1) or an int, every argument of a text form, and a size symbolic or its indices checked
    (``check_indices``, ``args[0]``: the graph runs the function, so each call's indices are checked as eagerly; a
    traced call has no values to check)."""
    if not all(isinstance(x, torch.Tensor) and x.device == given[0].device for x in given):
        return None
    sizes = [n for x in given for n in x.shape]
    if (all(type(n) is int for n in sizes) and not (name in CHECKED and args[0])) or \
            any(type(n) is not int and _hint(n) in (None, 1) for n in sizes):
        return None
    text = _text(name, args, False, False)
    if text is None:
        return None
    desc, _, index = _desc_of(text, given)
    if _output_sizes(desc, index, given) is None:
        return None
    # (not differentiable for these types: no gradient, as eagerly)
    return list(family_op([x if engine.differentiable(desc) else x.detach() for x in given], text))


def jit_index(name: str, given: tuple, args: tuple) -> list | None:
    """An index function's call on plain tensors of one device while TorchScript traces, through
    ``opendml::family``; None where an argument has no text form."""
    text = _text(name, args, False, False)
    if text is None or any(x.device != given[0].device for x in given):
        return None
    return list(family_op(list(given), text))


def _run(inputs, text):
    name, x, args, linear = _parse(text, inputs)
    with torch.no_grad():
        if name in _dispatch.front.INDEX and linear:   # the description's linear part (diagonal_matrix's: its
            desc, _, (arrays, shape) = _desc_of(text, inputs)   # value 0), the indices held constant
            out = engine.fixed(engine.linear_part(desc))(*arrays)
            outs = [(out[0] if isinstance(out, list) else out).reshape(shape)]
        elif name in _dispatch.front.INDEX:   # on plain tensors: a subclass's would come back here
            outs = [_dispatch.front.index_run(name, [t.as_subclass(torch.Tensor) for t in x], args)]
        elif linear:
            call = _dispatch.front.family_call(name, x, args)
            outs = engine.fixed(engine.linear_part(_description(call, inputs)))(*inputs)
        else:   # the function itself (only a family function's text runs; it checks its call; its repeats cached)
            out = _dispatch.front.family_function(name, args)(x, *args)
            outs = out if isinstance(out, list) else [out]
    return [o.clone() if any(o.data_ptr() == x.data_ptr() for x in inputs) else o for o in outs]


def _family_fake(inputs, call):
    desc, linear, index = _desc_of(call, inputs)
    if linear:
        engine.linear_part(desc)          # (its error: a call without one, as the implementation's)
    sizes = _output_sizes(desc, index, inputs)
    return [inputs[0].new_empty(s, dtype=torch_dtype(t)) for s, t in zip(sizes, desc.outputs)]


def _setup(ctx, inputs, output):
    """Either operator's: its call text, its tensor inputs' sizes and dtypes, and the inputs whose values the adjoint
    reads (``_kept``: an index function's index tensor; no data input kept alive for the backward)."""
    ctx.call = inputs[-1]
    ctx.like = [(tuple(x.shape), x.dtype) for x in inputs[-2]]
    ctx.kept = _kept(ctx.call, inputs[-2])
    ctx.save_for_backward(*[inputs[-2][i] for i in ctx.kept])


def _stand_ins(ctx, ref) -> list:
    """The inputs as the adjoint reads them: the kept ones, and the others' sizes and dtypes (one element expanded)."""
    kept = dict(zip(ctx.kept, ctx.saved_tensors))
    return [kept[i] if i in kept else ref.new_empty((), dtype=dtype).expand(shape)
            for i, (shape, dtype) in enumerate(ctx.like)]


def _family_backward(ctx, grads):
    # (either operator's backward gets no None gradient: its Function materializes a missing one as zeros)
    inputs = _stand_ins(ctx, grads[0])
    outs = iter(adjoint_op(list(grads), inputs, ctx.call))
    return [None if i in ctx.kept else next(outs) for i in range(len(inputs))], None


def _linear(call: str) -> str:
    """The text of ``call``'s linear part (``linear`` set)."""
    name, args, seq, _ = json.loads(call)
    return json.dumps([name, args, seq, True], separators=(",", ":"))


def _family_tangent(primals, tangents, args):
    """The call's linear part on the tangents, an index function's kept inputs (its index tensor) as they are."""
    kept = _kept(args[1], primals)
    return family_op([p if i in kept else t for i, (p, t) in enumerate(zip(primals, tangents))], _linear(args[1]))


#: A checked index call reads its indices' extremes back to the host, which a CUDA graph's capture refuses (and
#: a replay would skip): Inductor's CUDA graphs (``mode="reduce-overhead"``) leave ``family`` outside them.
family_op = define("family", "(Tensor[] inputs, str call) -> Tensor[]", _run, _family_fake, _setup,
                   _family_backward, _family_tangent, tags=(torch.Tag.cudagraph_unsafe,))


def _adjoint_run(grads, inputs, call):
    desc, index, kept = _adjoint_description(grads, inputs, call)
    with torch.no_grad():
        if index is None:
            outs = engine.adjoint(desc, list(grads))
        else:       # the description's inputs (index tensors reshaped); a gradient per data input, its shape
            outs = engine.adjoint(desc, list(grads), [index[0][i] for i in kept])
            outs = [o.reshape(x.shape) for i, (o, x) in enumerate(zip(outs, inputs)) if i not in kept]
    return [o.contiguous().clone() if any(o.data_ptr() == g.data_ptr() for g in grads) else o.contiguous()
            for o in outs]


def _adjoint_description(grads, inputs, call):
    """(the description of ``family_adjoint``'s call, its gradients checked against its outputs (sizes: the hints'
    where symbolic, the fake's; their values, the implementation's); ``_desc_of``'s index part; the inputs the
    adjoint reads, which get no gradient: an index function's index tensor)."""
    desc, _, index = _desc_of(call, inputs)
    _one_device("family_adjoint", [*inputs, *grads])
    if len(grads) != len(desc.outputs):
        raise ValidationError(f"opendml::family_adjoint: {desc.OPERATOR} has {len(desc.outputs)} output(s); got "
                              f"{len(grads)} gradients")
    shapes = [t.sizes for t in desc.outputs] if index is None else [index[1]]
    for i, (g, t, shape) in enumerate(zip(grads, desc.outputs, shapes)):
        if g.dtype != torch_dtype(t) or g.dim() != len(shape) or any(
                _hint(n) not in (None, s) for n, s in zip(g.shape, shape)):
            raise ValidationError(f"opendml::family_adjoint: {desc.OPERATOR}: grads[{i}] must have sizes "
                                  f"{list(shape)} and dtype {torch_dtype(t)} as the call's output {i}; got "
                                  f"{list(g.shape)} {g.dtype}")
    return desc, index, engine.constant_inputs(desc) if index is not None else ()


def _adjoint_fake(grads, inputs, call):
    _, _, kept = _adjoint_description(grads, inputs, call)
    return [x.new_empty(tuple(x.shape)) for i, x in enumerate(inputs) if i not in kept]


def _adjoint_backward(ctx, grads):
    kept, grads = dict(zip(ctx.kept, ctx.saved_tensors)), iter(grads)
    ws = [kept[i] if i in kept else next(grads) for i in range(len(ctx.like))]
    return list(family_op(ws, _linear(ctx.call))), [None] * len(ctx.like), None


# (the adjoint is linear in the gradients and reads of its inputs their sizes, and an index function's index
# tensor: its tangent is itself on the gradients' tangents, the inputs as they are, ``define``'s default)
adjoint_op = define("family_adjoint", "(Tensor[] grads, Tensor[] inputs, str call) -> Tensor[]", _adjoint_run,
                    _adjoint_fake, _setup, _adjoint_backward)
