"""PyTorch's operator library for opendml: the registry of the C++ dispatcher operators (``define_cpp``,
``operators``, ``cpp_op``; registered by the node library in the ``opendml_cpp`` namespace, the custom operators
``CUSTOM`` serving until it is loaded), and every operator as ONE custom operator for tracers (``torch.compile``,
``make_fx``, fake tensors, dispatch modes)::

    opendml::move(Tensor[] inputs, str desc) -> Tensor[]

``desc`` is the operator's JSON form (``jsonform.to_json``): any registered operator, no branch per operator here
(the first five's traced calls take their own custom operators, ``adapter``; where the sizes are symbolic, or an
index function checks its indices, ``opendml::family``, ``dynamic``). The inputs must match its input tensors in
number, dtype and sizes (``ValidationError``); outputs are new packed tensors on the inputs' device (the CPU for an
operator without inputs; ``packed_outputs``). Its fake specialises symbolic sizes (a size marked strictly dynamic
makes Dynamo report its constraint); its backward is the operator's declared adjoint through the array API, so
gradients of gradients trace too (``UnsupportedError`` where the description has no linear part), and its
forward-mode rule the description's linear part on the tangents (``define``); its vmap rule runs the call once per
batch element; Inductor's wrapper calls it through a direct kernel (``inductor``).
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import json
import math
import sys
import threading

import numpy as np
import torch
import torch.autograd.forward_ad as _fwad
# functorch's own switch for its per-level Functions (PyTorch 2.0 on; torch.library.register_vmap, used below, 2.4)
from torch._functorch.utils import enable_single_level_autograd_function

from ...jsonform import from_json, to_json
from ...model.errors import ValidationError
from ...model.tensor_desc import TensorDesc, packed_strides
from ...ops import OPERATORS
from ...runtime import calls
from ...runtime.config import config
from ...runtime.cuda.backend import check_alignment
from .. import engine
from . import inductor, node as _node
from .dtypes import TORCH_DTYPES, check_device, device_error, torch_dtype

__all__ = ["move_op", "call_move", "description"]


def _plain(t):
    t = t.detach()
    return t.resolve_neg() if t.is_neg() else t


def numpy_views(arrays) -> list:
    """NumPy views of plain CPU tensors (a negative view resolved first)."""
    return [_plain(t).numpy() for t in arrays]


def kernel(desc, arrays) -> list:
    """``desc``'s move program on plain tensors (no autograd), into new packed outputs (a description whose outputs
    give other strides runs as ``packed_outputs(desc)``)."""
    if any(t.strides is not None for t in desc.outputs):
        desc = packed_outputs(desc)
    x = arrays[0] if arrays else torch.empty(0)   # (a generator, DIAGONAL_MATRIX: no input, on the CPU)
    if x.device.type == "cpu":
        return [torch.from_numpy(o) for o in engine.execute(desc, numpy_views(arrays))]
    if x.device.type == "meta":
        return [torch.empty(t.sizes, dtype=torch_dtype(t), device="meta") for t in desc.outputs]
    check_device(x, desc.OPERATOR)        # (cuda, the one device left)
    return cuda_move(desc, arrays)


def cuda_move(desc, arrays, record=None) -> list:
    """The move program on the tensors' GPU (``arrays.cuda``), outputs from PyTorch's caching allocator, on the
    device's current stream (``record``: ``cuda.move``'s, for the C call cache)."""
    from ..cuda import move

    def entry(t):
        t = _plain(t)
        item = t.element_size()
        return (t, t.data_ptr(), tuple(t.shape), tuple(s * item for s in t.stride()), item,
                lambda: entry(t.contiguous()))
    index = arrays[0].get_device()
    device = arrays[0].device

    def allocate(shape, dtype):
        out = torch.empty(shape, dtype=TORCH_DTYPES[dtype], device=device)
        return out, out.data_ptr()
    with torch.cuda.device(index):
        return move(desc, [entry(t) for t in arrays], allocate, index,
                        torch.cuda.current_stream(index).cuda_stream, errors=(torch.OutOfMemoryError,),
                        record=record)


def kernel_move(call, desc, arrays, since) -> list:
    """The move program of ``call`` (``desc``; on the CPU None will do) on plain tensors, recorded in the
    call cache where the function offered the call there (``since``: the cache's generation, read first):
    on the CPU NumPy's route on views, on CUDA the tensors' GPU (a first five's negative view checked for
    alignment where it lies, then read resolved: their errors name the function, ``cuda.move``)."""
    device = arrays[0].device.type
    if device == "cpu":
        return [torch.from_numpy(o) for o in engine.run_numpy(call, numpy_views(arrays))]
    if since is not None and device == "cuda":
        if call.args and arrays[0].is_neg():
            check_alignment(arrays[0].element_size(), arrays[0].data_ptr(), 0, call.name)
            arrays = [arrays[0].resolve_neg()]
        elif any(x.is_neg() for x in arrays):
            return kernel(desc, arrays)
        seq = call.ccall[2]     # (the index functions': their inputs as given, a tuple)
        x = seq if type(seq) is tuple else tuple(arrays) if seq else arrays[0]
        # (the layouts read before the launches are planned: another thread may change a tensor in place)
        planned = tuple((t.shape, t.stride()) for t in arrays)
        return cuda_move(desc, arrays, (call, x, since, planned))
    return kernel(desc, arrays)


# -- the C++ operators -------------------------------------------------------------------------------

# The window operators (``adapter``) and the move operator, registered with PyTorch's dispatcher by the node library
# (``node.cpp``'s register_ops); both tables (``operators``) stay registered: a graph traced either way keeps working.

CPP_NAMESPACE = "opendml_cpp"
#: The custom operators by name (``opendml::``, filled by ``adapter``): the table a traced call takes without the C++
#: library.
CUSTOM: dict = {}
#: The C++ operators once registered (by name), their library, why registering them failed, and the namespace the
#: latest traced call took (``opendml.torch.compiled_route``).
CPP: dict = {"ops": None, "lib": None, "failed": None, "last": None}
#: Definitions the C++ library registers: name -> (schema, kernel spec (cached, code, extra arguments, fallback),
#: returns a list, grad_fn name, fake, vmap rule(op), backward(saved, grads) (``saved``: the arguments, each tensor
#: as its sizes), split: ``define_cpp``'s).
CPP_DEFS: dict = {}
_cpp_lock = threading.Lock()


def define_cpp(name: str, schema: str, spec: tuple, list_out: bool, fake, vmap, backward, split: int = 0) -> None:
    """Add an operator to those the C++ library registers (``CPP_NAMESPACE``). ``split`` > 0: the schema is (Tensor,
    int[] or SymInt[]) and its list packs ``split`` int lists of one length, one after another; the C++ kernel hands
    the call cache and ``spec``'s fallback the lists unpacked (fake, vmap and backward get them packed)."""
    CPP_DEFS[name] = (schema, spec, list_out, f"opendml_{name}Backward", fake, vmap, backward, split)


def _register(node) -> dict:
    """Register ``CPP_DEFS`` with the node library (under _cpp_lock)."""
    lib = CPP["lib"] = torch.library.Library(CPP_NAMESPACE, "FRAGMENT")
    ns, ops = getattr(torch.ops, CPP_NAMESPACE), {}
    for name, d in CPP_DEFS.items():
        lib.define(name + d[0], tags=(torch.Tag.pt2_compliant_tag,))
        ops[name] = getattr(ns, name).default
        torch.library.register_fake(f"{CPP_NAMESPACE}::{name}", d[4], lib=lib)
        torch.library.register_vmap(f"{CPP_NAMESPACE}::{name}", uncompiled(d[5](ops[name])), lib=lib)
        if d[0].startswith("(Tensor[]"):
            # an empty list (a generator's inputs: DIAGONAL_MATRIX) gives the dispatcher no tensor to dispatch on:
            # the Python kernel serves that call
            lib.impl(name, d[1][3], "CompositeExplicitAutograd")
    node.register_ops(CPP_NAMESPACE, [(name, d[1], d[2], d[3], d[7]) for name, d in CPP_DEFS.items()],
                      lambda name, saved, grads: CPP_DEFS[name][6](saved, grads))     # (every backward)
    inductor.attach(CPP_NAMESPACE, ops, CPP_DEFS)
    return ops


def operators() -> dict:
    """The table a traced call takes: the C++ operators once the node library is loaded and on, else the custom ones."""
    ops = CPP["ops"]
    if ops is not None:
        return ops if config().torch_node != "off" else CUSTOM
    if CPP["failed"] is not None:
        return CUSTOM
    node = _node.get()
    if node is None:
        return CUSTOM
    with _cpp_lock:
        if CPP["ops"] is None and CPP["failed"] is None:
            try:
                CPP["ops"] = _register(node)
            except Exception as e:     # noqa: BLE001 - the custom operators serve; compiled_status() says why
                CPP["failed"] = f"{type(e).__name__}: {e}"
    return CPP["ops"] if CPP["ops"] is not None else CUSTOM


def cpp_op(name: str):
    """The C++ operator ``name`` where traced calls take the C++ operators, else None."""
    ops = operators()
    return None if ops is CUSTOM else ops.get(name)


def compiled_status() -> str:
    """Which operators a traced call (``torch.compile``) takes now, and why: with the node library loaded, its C++
    operators are registered here as the next trace would (no build is started)."""
    if CPP["ops"] is None and _node._state["module"] is not None:
        operators()
    if CPP["ops"] is not None and config().torch_node != "off":
        return f"C++ dispatcher operators ({CPP_NAMESPACE}::)"
    why = CPP["failed"] or _node.status()
    return f"custom operators (opendml::): {why}"


#: The most elements whose places an overlap check lists one by one (8 bytes each).
_OVERLAP_CHECK_ELEMENTS = 1 << 26


def _self_overlapping(sizes, strides) -> bool:
    """Whether element ``strides`` (non-negative) map two of the ``sizes`` elements to one place."""
    dims = sorted((t, n) for n, t in zip(sizes, strides) if n > 1)
    reach = 0                        # the last offset the dimensions so far reach
    for t, n in dims:
        if t <= reach:
            break
        reach += (n - 1) * t
    else:
        return False                 # each stride steps past everything the smaller ones reach
    if any(t == 0 for t, _ in dims):
        return True
    if math.prod(n for _, n in dims) > _OVERLAP_CHECK_ELEMENTS:
        return True                  # interleaved and too large to list: treated as overlapping
    offsets = np.zeros(1, dtype=np.int64)
    for t, n in dims:
        offsets = (offsets[:, None] + np.arange(n, dtype=np.int64)[None, :] * t).reshape(-1)
    return np.unique(offsets).size != offsets.size


def packed_outputs(desc):
    """``desc`` with every output tensor packed (sizes, data type and flags kept), or itself where every output is;
    strides that map two elements to one place are a ``ValidationError``."""
    changes = {}
    for slot in desc.SLOTS:
        value = getattr(desc, slot.attr)
        if slot.role != "output" or value is None:
            continue
        tensors = tuple(value) if slot.many else (value,)
        new = []
        for i, t in enumerate(tensors):
            packed = packed_strides(t.sizes)
            if t.strides is None or (tuple(t.strides) == packed and t.total_tensor_size_in_bytes ==
                                     t.min_size_in_bytes and not t.guaranteed_base_offset_alignment):
                new.append(t)
                continue
            if _self_overlapping(t.sizes, t.strides):
                name = f"{slot.json}[{i}]" if slot.many else slot.json
                raise ValidationError(f"opendml::move: {desc.OPERATOR}: {name}.Strides {list(t.strides)} map two "
                                      f"elements of Sizes {list(t.sizes)} to one place; the op returns every "
                                      f"output element as a tensor of its own, so an output's strides must not "
                                      f"overlap (leave Strides out for a packed output)")
            new.append(TensorDesc(t.data_type, t.sizes, flags=t.flags))
        if any(a is not b for a, b in zip(new, tensors)):
            changes[slot.attr] = tuple(new) if slot.many else new[0]
    return dataclasses.replace(desc, **changes) if changes else desc


@functools.lru_cache(maxsize=1024)       # (descriptions are immutable)
def description(text: str):
    """The validated description of ``text`` (cached), with packed outputs (``packed_outputs``)."""
    if text.startswith("@"):
        desc = _HELD_BY_KEY.get(text)
        if desc is None:
            raise ValidationError(f"opendml::move: unknown description key {text[:40]!r} (descriptions without a "
                                  f"JSON form are named by keys this process made)")
        return desc
    desc = from_json(text)
    desc.validate()
    return packed_outputs(desc)


#: Descriptions without a JSON form (the index operators' adjoint programs), named by a key ("@..."),
#: each held for the life of the process (graphs traced with the key may run it later).
_HELD_BY_KEY: dict = {}
_KEY_OF: dict = {}


def to_text(desc) -> str:
    if desc.OPERATOR in OPERATORS and OPERATORS[desc.OPERATOR] is type(desc):
        return json.dumps(to_json(desc), separators=(",", ":"))
    key = _KEY_OF.get(desc)
    if key is None:
        key = _KEY_OF.setdefault(desc, f"@{desc.OPERATOR}:{len(_KEY_OF)}")
        _HELD_BY_KEY[key] = desc
    return key


def _checked(inputs, text: str):
    """The description of ``text``, after checking ``inputs`` against it."""
    desc = description(text)
    want = desc.inputs
    if len(inputs) != len(want):
        raise ValidationError(f"opendml::move: {desc.OPERATOR} takes {len(want)} input tensor(s); got {len(inputs)}")
    device = inputs[0].device if inputs else None
    for i, (x, t) in enumerate(zip(inputs, want)):
        dtype = torch_dtype(t)
        if x.dtype != dtype or x.dim() != len(t.sizes) or any(a != b for a, b in zip(x.shape, t.sizes)):
            raise ValidationError(f"opendml::move: {desc.OPERATOR}: inputs[{i}] must have sizes {list(t.sizes)} and "
                                  f"dtype {dtype} as the description's input tensor; got {list(x.shape)} {x.dtype}")
        if x.device != device:
            raise device_error("opendml::move", device, x.device, f"inputs[{i}]")
    return desc


# -- the Python operators (``opendml::``) ---------------------------------------------------------------

_LIB = torch.library.Library("opendml", "FRAGMENT")
#: A Python operator (``define``): its overload, whether it returns a list, and its autograd rules.
_Defined = collections.namedtuple("_Defined", "op many setup backward tangent")


def define(name: str, schema: str, impl, fake, setup, backward, tangent=None, rule=None, tags: tuple = ()):
    """Define ``opendml::<name>`` (``schema``: tensors, tensor lists and other arguments, the first a tensor or a
    tensor list; a tensor or a tensor list returned) with its implementation, fake, batching rule (``rule(op)``,
    ``list_rule``'s by default) and autograd kernel. The reverse mode records ``setup(ctx, args, outputs)`` and
    ``backward(ctx, grads)`` (``grads`` and its result as ``torch.library.custom_op``'s: a list for a list, a tuple
    per argument); the forward mode gives the outputs the tangents ``tangent(primals, tangents, args)`` returns (the
    first argument's, zeros where a tensor has none; through the operators, so gradients of tangents trace too), by
    default the operator itself on the tangents, the other arguments as they are (linear in its first argument,
    constant in the others). ``torch.library.custom_op`` has no forward-mode rule: its operators gave a zero tangent
    silently. ``tags``: the operator's, beside ``pt2_compliant_tag``."""
    _LIB.define(name + schema, tags=(torch.Tag.pt2_compliant_tag, *tags))
    _LIB.impl(name, impl, "CompositeExplicitAutograd")
    qualname = f"opendml::{name}"
    torch.library.register_fake(qualname, fake, lib=_LIB)
    op = getattr(torch.ops.opendml, name).default
    torch.library.register_vmap(qualname, uncompiled((rule or list_rule)(op)), lib=_LIB)
    defined = _Defined(op, schema.endswith("Tensor[]"), setup, backward,
                       tangent or (lambda primals, tangents, args: op(tangents, *args[1:])))

    def autograd(keyset, *args):
        # (a dual level open: forward_ad's, or under a torch.func transform maybe a jvp's that a compiled graph
        # entered, which forward_ad does not record: ``_forward_ad`` looks at the tangents)
        transformed = torch._C._are_functorch_transforms_active()
        if _fwad._current_level >= 0 or transformed:
            outs = _forward_ad(defined, args)
            if outs is not None:
                return outs
        counts = _counts(args)
        tensors = _tensors(args, counts)
        if torch.is_grad_enabled() and any(x.requires_grad for x in tensors):
            node = _LevelNode if transformed else _Node
            outs = node.apply(defined, keyset, args, counts, *tensors)
            return list(outs) if defined.many else outs[0]
        with torch._C._AutoDispatchBelowAutograd():
            return op.redispatch(keyset & torch._C._after_autograd_keyset, *args)
    _LIB.impl(name, autograd, "Autograd", with_keyset=True)
    return op


def _forward_ad(defined, args):
    """The outputs of a call whose first argument (a tensor or a tensor list) holds a dual tensor: on the primals,
    each made dual with its tangent (``defined.tangent``); None where no input has a tangent. Tangents are read and
    made at level 0, PyTorch's one forward-AD level, not at ``forward_ad``'s current level: a graph Dynamo compiled
    (``torch.func.jvp``, ``jacfwd``, ``hessian``) enters the level through ``torch._C`` and leaves that Python
    record of it at -1."""
    one = isinstance(args[0], torch.Tensor)
    duals = [_fwad.unpack_dual(x, level=0) for x in ([args[0]] if one else args[0])]
    if all(d.tangent is None for d in duals):
        return None
    primals = [d.primal for d in duals]
    tangents = [d.tangent if d.tangent is not None else torch.zeros_like(d.primal) for d in duals]
    if one:
        primals, tangents = primals[0], tangents[0]
    outs = defined.op(primals, *args[1:])
    if not defined.many:
        return _fwad.make_dual(outs, defined.tangent(primals, tangents, args), level=0)
    return [_fwad.make_dual(o, t, level=0) for o, t in zip(outs, defined.tangent(primals, tangents, args))]


def _counts(args) -> list:
    """How many tensors each argument is: None for a tensor, a tensor list's length, 0 for any other."""
    return [None if isinstance(a, torch.Tensor) else
            len(a) if isinstance(a, list) and a and isinstance(a[0], torch.Tensor) else 0 for a in args]


def _tensors(args, counts) -> list:
    """The tensors among ``args`` (``counts``: ``_counts``'s), one after another."""
    return [x for a, n in zip(args, counts) for x in ((a,) if n is None else a[:n])]


def _filled(args, counts, tensors) -> list:
    """``args`` with their tensors (``_tensors``'s) replaced by ``tensors``."""
    given = iter(tensors)
    return [next(given) if n is None else [next(given) for _ in range(n)] if n else a
            for a, n in zip(args, counts)]


class _Node(torch.autograd.Function):
    """A Python operator's reverse-mode node: ``apply(defined, keyset, args, counts, *tensors)`` runs the operator
    below autograd on ``args``, their tensors (``counts``: ``_counts``'s) those given after."""

    @staticmethod
    def forward(ctx, defined, keyset, args, counts, *tensors):
        args = _filled(args, counts, tensors)
        with torch._C._AutoDispatchBelowAutograd():
            outs = defined.op.redispatch(keyset & torch._C._after_autograd_keyset, *args)
        ctx.defined, ctx.counts = defined, counts
        defined.setup(ctx, args, outs)
        return tuple(outs) if defined.many else (outs,)

    @staticmethod
    def backward(ctx, *grads):
        per_argument = ctx.defined.backward(ctx, list(grads) if ctx.defined.many else grads[0])
        return (None, None, None, None, *[g for gs, n in zip(per_argument, ctx.counts)
                                          for g in ((gs,) if n is None else gs or [None] * n)])


class _LevelNode(_Node):
    """``_Node`` for a call under a ``torch.func`` transform (``grad``, ``jacrev``, ``hessian``, ``vmap`` of them),
    recorded, as ATen's autograd kernels record theirs, on the transform level the operator's kernel runs at: its
    forward's redispatch reaches functorch's back mode, which runs the operator on the level below (under ``vmap``,
    its batching rule) with grad and forward grad on, so that level records its own node or tangent
    (``Function.apply`` turns both off for ``forward``). It is applied as a single-level Function, as functorch
    applies one per level of its own: ``Function.apply`` would take it for a Function called above the dispatcher
    and route it through ``custom_function_call``, which needs the ``setup_context`` form and cannot be dispatched
    from inside an operator's kernel."""

    @classmethod
    def apply(cls, *operands):
        return _level_apply(*operands)

    @staticmethod
    def forward(ctx, *operands):
        with torch.enable_grad(), _fwad._set_fwd_grad_enabled(True):
            return _Node.forward(ctx, *operands)


def uncompiled(fn):
    """``fn``, run where Dynamo compiles no frame of it once Dynamo is imported (``torch.compiler.disable``, made on
    first use): a function compiled by ``torch.compile`` and called under a ``torch.func`` transform has its own
    frames skipped (Dynamo cannot trace the transform's wrapped tensors) but every frame they call compiled: the
    operators' nodes, batching rules and kernels, whose NumPy code Dynamo would trace."""
    def call(*args, **kwargs):
        return (_disabled(fn) if "torch._dynamo" in sys.modules else fn)(*args, **kwargs)
    return call


@functools.cache
def _disabled(fn):
    return torch.compiler.disable(fn, recursive=True)


@uncompiled
def _level_apply(*operands):
    with enable_single_level_autograd_function():
        return super(torch.autograd.Function, _LevelNode).apply(*operands)


def _move_fake(inputs, desc):
    if CPP["ops"] is not None:
        inductor.prepare(CPP_NAMESPACE, CPP["ops"])     # Inductor's direct calls (cheap once done)
    inductor.prepare("opendml", _CUSTOM_MOVE)
    d = _checked(inputs, desc)
    return [inputs[0].new_empty(tuple(t.sizes), dtype=torch_dtype(t)) if inputs else
            torch.empty(tuple(t.sizes), dtype=torch_dtype(t)) for t in d.outputs]


def _setup(ctx, inputs, output):
    ctx.desc = inputs[1]
    ctx.save_for_backward(*[inputs[0][i] for i in engine.constant_inputs(description(inputs[1]))])


def _adjoint(text: str, grads, constants=()) -> list:
    """The adjoint of the description ``text`` on ``grads`` (zeros for the outputs that got none) and ``constants``
    (the inputs its adjoint reads): either move operator's backward."""
    desc = description(text)
    ref = next(g for g in grads if g is not None)
    return list(engine.adjoint(desc, [g if g is not None else ref.new_zeros(tuple(t.sizes), dtype=torch_dtype(t))
                                      for g, t in zip(grads, desc.outputs)], constants))


def _backward(ctx, grads):
    return _adjoint(ctx.desc, grads, tuple(ctx.saved_tensors)), None


def _tangent(primals, tangents, args) -> list:
    """The linear part of the description ``args[1]`` on ``tangents``, the values of the inputs its adjoint reads
    (``constant_inputs``: index tensors, no tangent) kept."""
    desc = description(args[1])
    constants = engine.constant_inputs(desc)
    return move_op([x if i in constants else t for i, (x, t) in enumerate(zip(primals, tangents))],
                   to_text(engine.linear_part(desc)))


def batched(info, dims, xs, call, name: str) -> list:
    """``call(list of tensors)`` once per batch element of ``xs`` (batched along ``dims``), outputs stacked; a
    ``ValidationError`` naming ``name`` for an empty batch (no call to run: DirectML's sizes are >= 1)."""
    n = info.batch_size
    if n == 0:
        raise ValidationError(f"{name}: torch.func.vmap over a batch of size 0 is not supported (DirectML's tensor "
                              f"sizes are >= 1)")
    xs = [x.movedim(d, 0) if d is not None else x.expand(n, *x.shape) for x, d in zip(xs, dims)]
    per = [call([x[i] for x in xs]) for i in range(n)]
    return [torch.stack([p[j] for p in per]) for j in range(len(per[0]))]


def list_rule(op):
    """The batching rule of ``op(Tensor[] ..., str text) -> Tensor[]`` (either namespace's move, and ``define``'s
    default: ``opendml::family``, ``opendml::family_adjoint``)."""
    def rule(info, in_dims, *args):
        counts = _counts(args)
        outs = batched(info, [d for dims in in_dims[:-1] for d in dims], _tensors(args, counts),
                       lambda xs: op(*_filled(args, counts, xs)), op._schema.name)
        return outs, [0] * len(outs)
    return rule


def _move(inputs, text):
    since = calls.generation()          # (read before any setting: a CUDA call is recorded with it)
    desc = _checked(inputs, text)
    arrays = list(inputs)
    device = arrays[0].device.type if arrays else None
    call = _CALLS.get(text)
    if call is None and device in ("cpu", "cuda"):
        call = _record(text, desc)
    outs = kernel(desc, arrays) if call is None else kernel_move(call, desc, arrays, since)
    return [o.contiguous() for o in outs]


#: Description text -> the ``engine.Call`` that runs it on CPU and CUDA tensors and records it in the C call cache
#: under a code of its own (``calls.OPS``; no arguments, the inputs as one sequence, the outputs as a list), the code
#: Inductor's direct kernel offers (``inductor.MOVE_CODES``); at most ``_MAX_RECORDED`` texts, the oldest forgotten
#: first (its code too: what the C cache holds under it is never served again).
_CALLS: dict = {}
_MAX_RECORDED = 4096
_record_lock = threading.Lock()


def _record(text: str, desc):
    """The ``engine.Call`` of the description ``desc`` written ``text``, made and recorded where it is new."""
    with _record_lock:
        call = _CALLS.get(text)
        if call is None:
            while _CALLS and len(_CALLS) >= _MAX_RECORDED:
                old = next(iter(_CALLS))
                del _CALLS[old]
                inductor.MOVE_CODES.pop(old, None)
                calls.OPS.forget("opendml::move " + old)
            name = "opendml::move " + text
            call = _CALLS[text] = engine.Call(desc.OPERATOR, lambda *_: desc, True, (name,), (name, (), True))
            inductor.MOVE_CODES[text] = calls.OPS[name]
        return call


move_op = define("move", "(Tensor[] inputs, str desc) -> Tensor[]", _move, _move_fake, _setup, _backward, _tangent)
# The same operator among the C++ operators: its kernel is the Python one (``_move``, which records the call in the C
# call cache under the description's own code), without the custom operator's Python dispatch; its backward's
# ``saved`` is (the inputs' sizes, desc).
define_cpp("move", "(Tensor[] inputs, str desc) -> Tensor[]", (None, None, (), _move), True, _move_fake,
           list_rule, lambda saved, grads: _adjoint(saved[1], grads))
_CUSTOM_MOVE = {"move": move_op}
inductor.attach("opendml", _CUSTOM_MOVE, CPP_DEFS)


def call_move(desc, arrays) -> list:
    """``desc`` (a validated description) on ``arrays`` through ``opendml_cpp::move`` where traced calls take the C++
    operators, else ``opendml::move`` (always for an operator whose adjoint reads input values, ``ADJOINT_INPUTS``:
    the C++ node keeps the inputs' sizes only)."""
    op = (None if engine.constant_inputs(desc) else cpp_op("move")) or torch.ops.opendml.move.default
    return list(op(list(arrays), to_text(desc)))


