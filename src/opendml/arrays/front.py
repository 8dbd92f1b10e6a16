"""The array API's front: one thin function per operator (``slice``,
``slice1``, ``unfold``, ``fold``, ``slice_grad``; ``identity``, ``cast``,
``pad``, ``join``, ``split``, ``tile``, ``space_to_depth``,
``depth_to_space``) on NumPy, CuPy, PyTorch, JAX and Dask arrays, each
building one ``Call`` (the inputs' logical descriptions -> the operator's
description, ``opendml.ops``) that the array's adapter runs.

Every function takes the same steps, in this order:

1. **The C call cache** (``runtime.calls``): the arguments exactly as
   received are offered first, and a call seen before (same function,
   arguments, dtypes, shapes and strides) is served from C without entering
   Python again (``call`` for the first five, ``move`` for the family).
2. **The C new-shape route**: a never-seen shape in its simple forms (exact
   ints, floats, strs, NumPy dtypes; NumPy arrays and plain PyTorch CPU
   tensors) is lowered, run and recorded in C in one call, with the passes,
   outputs and record the Python route would make (the family's here,
   ``runtime.calls.move_new``; the first five's in their adapters); anything
   else is declined and the Python route runs it and raises what it raises.
3. **The contract's checks** (``_contract``): an array of a framework the
   API takes, a dtype and rank the operator's support table lists: one
   message per fault for every operator and framework.
4. **Snapshots**: every list argument is read once (``_snap`` keeps lists
   lists for the first five's plan keys and records; ``_snapshot`` makes the
   family's tuples), and only that copy is used afterwards, so a list another
   thread changes during the call cannot mix values.
5. **The route**: the adapter of the array's framework (``adapter_for``:
   ``numpy_adapter``, ``cupy_adapter``, ``torch.adapter``, ``jax_adapter``,
   ``dask_adapter``) runs the call: ``run`` plans the first five through the
   planner (a bounded LRU plan cache), ``run_move`` the family's move
   program; NumPy's move route is the engine's (``engine.run_numpy``),
   behind its Python cache (the move cache, ``planner``). Each adapter records what a
   first call ran in the C call cache.

Which operator a function builds, the name of its array argument and
whether it takes a sequence of arrays come from the operator class's
``BINDING`` (``_contract.BINDING``); which arguments are lists to snapshot,
from the function's signature; the rest, per operator, from one small
builder (``_PLANS``, ``_MOVES``). Every ``opendml.configure()`` empties the
caches; ``configure(call_cache=False)`` turns them off; a replaced
``engine.execute`` (a spy) is given every family call.

Differentiation: where the operation is linear for its types, PyTorch
results are differentiable (autograd, forward-mode AD, ``torch.func``) and
JAX results in reverse mode (``jax.grad``); each backward formula is the
operator module's declared ``adjoint`` (``opendml.ops._spec``), given
``engine.ADJOINT_API`` (these functions, registered there). The ``Call``
type, NumPy's move route and the adjoints are the engine's (``engine``),
below the adapters, which import it and never this module: they call these
functions again through ``_dispatch.front`` (``run_list`` included, the
route a ``Call`` takes). No framework is imported here. May import ``opendml.model``, ``opendml.ops``,
``opendml.plan`` and ``opendml.runtime``.
"""
from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Mapping, Set
from collections.abc import MutableSequence as _MutableSequence
from typing import Any, Sequence, Union

import numpy as np

from ..model.data_type import DataType
from ..model.errors import ValidationError
from ..model.tensor_desc import TensorDesc
from ..ops import (DepthSpaceOrder, DepthToSpace1OperatorDesc, ElementWiseIdentityOperatorDesc, FoldOperatorDesc,
                   JoinOperatorDesc, Padding1OperatorDesc, PaddingMode, ScaleBias, Slice1OperatorDesc,
                   SliceGradOperatorDesc, SliceOperatorDesc, SpaceToDepth1OperatorDesc, SplitOperatorDesc,
                   TileOperatorDesc, UnfoldOperatorDesc)
from ..ops.cast import CastOperatorDesc
from ..runtime import calls as _calls
from ..runtime import get_backend
from . import _contract, _dispatch, engine as _engine, numpy_adapter, planner
from .engine import ADJOINT_API, PLAN_KEY, Call, FamilyCall, _many_out, adjoint, fixed, run_numpy  # noqa: F401
from .engine import _EXECUTE
from .planner import plan_cache_info

__all__ = ["slice", "slice1", "unfold", "fold", "slice_grad", "identity", "cast", "pad", "join", "split", "tile",
           "space_to_depth", "depth_to_space", "cpu_output_cache", "plan_cache_info", "adapter_for"]

#: The data-movement family's functions (a list result where the operator has several outputs).
FAMILY = ("identity", "cast", "pad", "join", "split", "tile", "space_to_depth", "depth_to_space")

#: An int, or one int per axis.
Ints = Union[int, Sequence[int]]

_MODES = {"constant": PaddingMode.CONSTANT, "edge": PaddingMode.EDGE, "reflect": PaddingMode.REFLECTION,
          "reflection": PaddingMode.REFLECTION, "symmetric": PaddingMode.SYMMETRIC, "wrap": PaddingMode.WRAP}
_ORDERS = {"DCR": DepthSpaceOrder.DEPTH_COLUMN_ROW, "CRD": DepthSpaceOrder.COLUMN_ROW_DEPTH,
           "DEPTH_COLUMN_ROW": DepthSpaceOrder.DEPTH_COLUMN_ROW, "COLUMN_ROW_DEPTH": DepthSpaceOrder.COLUMN_ROW_DEPTH}



# -- frameworks: one adapter each ------------------------------------------------------------------

#: Framework module (``_dispatch.FRAMEWORKS``) -> opendml's adapter module for it.
_ADAPTERS = {"torch": "torch.adapter", "cupy": "cupy_adapter", "jax": "jax_adapter", "dask.array": "dask_adapter"}

#: Adapter per array type already seen (types are few; lookups are per call).
_BY_TYPE: dict = {}


def adapter_for(x, function: str = "array API", argument: str = "x"):
    """The adapter module that runs operators on ``x``'s framework;
    ``ValidationError`` (``function: argument must be a NumPy, CuPy, PyTorch,
    JAX or Dask array; got ...``) for anything else."""
    adapter = _BY_TYPE.get(type(x))
    if adapter is not None:
        return adapter
    kind = _contract.framework_of(x)
    if kind is None:
        raise _contract.not_an_array(x, function, argument)
    if kind == "numpy":
        return _BY_TYPE.setdefault(type(x), numpy_adapter)
    return _BY_TYPE.setdefault(type(x), importlib.import_module(f"{__package__}.{_ADAPTERS[kind]}"))


def _framework(x, where: str, argument: str = "x"):
    """``adapter_for``, None for NumPy (whose move route is ``run_numpy``)."""
    adapter = _BY_TYPE.get(type(x)) or adapter_for(x, where, argument)
    return None if adapter is numpy_adapter else adapter


def _one_framework(name: str, arrays, many: bool):
    """The adapter of ``arrays``' one framework (None: NumPy)."""
    first = arrays[0]
    fw = _framework(first, name, "arrays[0]" if many else "x")
    for i, x in enumerate(arrays[1:], 1):
        if type(x) is not type(first) and _framework(x, name, f"arrays[{i}]") is not fw:
            raise ValidationError(f"{name}: every array must be of one framework; got "
                                  f"{type(first).__module__}.{type(first).__qualname__} and "
                                  f"{type(x).__module__}.{type(x).__qualname__} (arrays[{i}])")
    return fw


def _checked(name: str, arrays, many: bool = False):
    """The array API's checks of a call's inputs, before its arguments are
    read (``_contract``): arrays of one framework the API takes, of a dtype
    and rank the operator takes."""
    _one_framework(name, arrays, many)
    _contract.check_inputs(name, arrays)


def _run(x, call: Call):
    """The first five's route: the contract's checks of ``x``, then its adapter's plan route."""
    adapter = _BY_TYPE.get(type(x))
    if adapter is None:
        adapter = adapter_for(x, call.name, _contract.ARGUMENT[call.name])
    _check_input(call.name, x)
    return adapter.run(x, call)


def run_list(call: Call, arrays) -> list:
    """Run the move program of ``call`` on ``arrays`` (one framework); the outputs as a list."""
    arrays = list(arrays)
    fw = _one_framework(call.name, arrays, len(arrays) > 1)
    if fw is None:
        return run_numpy(call, arrays)
    return fw.run_move(call, arrays)


def _run_move(call: Call, arrays):
    outs = run_list(call, arrays)
    return outs if call.multi else outs[0]


# -- snapshots -------------------------------------------------------------------------------------

def _snap(value):
    """A private copy of a mutable argument, read once: every later step of a
    call (plan-cache key, validation, plan, call-cache record) reads this copy,
    so a list that another thread changes while the call runs can never make
    one step see other values than the rest. Lists stay lists and NumPy arrays
    stay arrays (messages show them as given); immutable values are kept."""
    t = type(value)
    if t is list:
        return value[:]                   # one C-level copy under the GIL
    if t is int or t is tuple or value is None:
        return value
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (list, _MutableSequence)):
        try:                              # another mutable sequence: its items, read once
            return list(value)
        except Exception:                 # noqa: BLE001 - validation then names what is wrong with it
            return value
    return value


def _snaps(*values):
    out = []
    for value in values:
        t = type(value)
        if t is list:
            value = value[:]
        elif not (t is int or t is tuple or value is None):
            value = _snap(value)
        out.append(value)
    return tuple(out)


def _snapshot(value):
    """A list argument read once, as a tuple (a NumPy array as a tuple of its
    items); anything else as given (validation names what is wrong with it)."""
    if isinstance(value, np.ndarray):
        return tuple(value.tolist()) if value.ndim == 1 else value
    if isinstance(value, (list, tuple)):
        return tuple(value)
    if isinstance(value, (str, bytes, Mapping, Set)) or not hasattr(value, "__iter__"):
        return value
    try:
        return tuple(value)
    except Exception:  # noqa: BLE001 - the description's checks then name the argument
        return value


# -- the C call cache and the C new-shape route -----------------------------------------------------

#: ``_cached(op, x, *args)``: a repeated call of the first five served by the
#: call cache (C), or None; each function passes its arguments exactly as its
#: Call holds them, which is how the adapters record the call after a first run.
_cached = _calls.call
_check_input = _contract.check_input
_sizes_of = _contract.sizes_of
_OPS = _calls.OPS
_SLICE, _SLICE1, _UNFOLD, _FOLD, _SLICE_GRAD = (_OPS[k] for k in ("slice", "slice1", "unfold", "fold", "slice_grad"))

#: ``_move(op, x, *args)``: a repeated call on NumPy arrays served by the C
#: call cache (``runtime.calls.move``), or None. Each function offers its
#: arguments exactly as received, first thing; the route records a compiled
#: run with the same arguments snapshotted (``Call.ccall``).
_move = _calls.move
(_IDENTITY, _CAST, _PAD, _JOIN, _SPLIT, _TILE, _SPACE_TO_DEPTH, _DEPTH_TO_SPACE) = (
    _calls.OPS[k] for k in ("identity", "cast", "pad", "join", "split", "tile", "space_to_depth", "depth_to_space"))
# Members of these key by identity in the C call cache (a mode, an order, a DataType as cast's dtype);
# PyTorch's dtype type joins them when cast first gets one (``_key_by_identity``).
_MOVE_TYPES = (PaddingMode, DepthSpaceOrder, DataType)
_calls.register_move_types(_MOVE_TYPES)


#: ``_new(op, x, args)``: a never-seen shape of a family function on exact
#: NumPy arrays or plain PyTorch CPU tensors (x one array, or join's list or
#: tuple of them; C declines any other input at once), lowered in C (``runtime.calls.move_new``: the same
#: passes, output and call-cache record as the route below), or None (the
#: Python route runs the call and raises whatever it raises).
_move_new = _calls.move_new
# each with the element types its support table takes at the newest level (bit 8 + DataType value)
_LOWER = {_calls.OPS[k]: v | sum(1 << (8 + int(t)) for t in _contract.supported_row(_contract.OPERATOR_OF[k]).types)
          for k, v in _calls.MOVE_LOWERINGS.items()}
_generation = _calls.generation


def _new(op: int, x, args: tuple):
    since = _generation()                   # before any setting is read
    backend = get_backend("cpu")
    # the NumPy kernels, or a replaced prepare (a spy): the Python route
    if backend._native is None or "prepare" in backend.__dict__:
        return None
    return _move_new(op, _LOWER[op], x, args, since, backend.plain_conf)


def _key_by_identity(kind: type) -> None:
    """Let the C call cache key arguments of type ``kind`` by identity from
    now on (PyTorch's dtypes: singletons its module holds for good); the C
    cache is emptied once, when the type is added."""
    global _MOVE_TYPES
    if kind not in _MOVE_TYPES:
        _MOVE_TYPES = (*_MOVE_TYPES, kind)
        _calls.register_move_types(_MOVE_TYPES)



# -- the two routes past the C call cache, for every function ------------------------------------

#: Operator code (``runtime.calls.OPS``) -> the array-API function's name.
_NAMES = {code: name for name, code in _OPS.items()}


def _plan(op: int, x, args: tuple):
    """A call of the first five past the C call cache: its list arguments
    snapshotted (``_snaps``), then the contract's checks and the adapter's
    plan route (whose first step, for NumPy and PyTorch CPU arrays, is the C
    new-shape route); the description is the function's builder's
    (``_PLANS``) on the input's description."""
    name = _NAMES[op]
    args = _snaps(*args)
    return _run(x, Call(name, _PLANS[name](*args), key=PLAN_KEY, args=args))


def _move_call(op: int, x, args: tuple):
    """A family call past the C call cache: the C new-shape route first
    (unless ``engine.execute`` is replaced), then the contract's checks on the
    inputs (a sequence of them where the binding's array argument is
    ``arrays``), the list arguments snapshotted (those the signature types as
    sequences), and the builder's description (``_MOVES``), keyed for the
    Python cache and recorded in the C call cache by the arguments as
    offered."""
    if _engine.execute is _EXECUTE:
        out = _new(op, x, args)
        if out is not None:
            return out
    name = _NAMES[op]
    seq = name in _SEQUENCES
    arrays = _contract.array_sequence(x, name) if seq else (x,)
    _checked(name, arrays, seq)
    snap = _SNAPSHOTS[name]
    args = tuple(_snapshot(v) if i in snap else v for i, v in enumerate(args))
    make, key = _MOVES[name](arrays[0], *args)
    return _run_move(Call(name, make, name in _MULTI, planner.call_key(name, *key), (name, args, seq)),
                     arrays)


# -- what each function does with its arguments ----------------------------------------------------

# ``_PLANS[name](*args)`` (the first five): the snapshotted arguments -> ``make(input description)``.
# ``_MOVES[name](x, *args)`` (the family): x (the first input) and the snapshotted arguments, after the
# contract's checks -> (``make(*input descriptions)``, the arguments as the Python cache keys them).

def _fold_make(output_sizes, window_sizes, *rest):
    args = (output_sizes, window_sizes, *rest)

    def make(t):
        d = next((len(v) for v in (output_sizes, window_sizes) if _is_sequence(v)), 1)
        spatial, window, *others = (per_axis(v, d) for v in args)
        rows, c, k = t.sizes[-2], t.sizes[-2], _window_count(window)
        if k is not None:                # else the description names the bad window entry
            if rows % k:
                raise ValidationError(
                    f"FOLD: InputTensor.Sizes[{t.rank - 2}] must be C x prod(WindowSizes), a multiple of "
                    f"prod(WindowSizes) = {k} (x.shape[-2], window_sizes); got {rows} (shape {list(t.sizes)})")
            c = rows // k
        if not _is_sequence(spatial):
            raise _contract.field_error("fold", "OutputTensor.Sizes", "be an int or a sequence of ints (output_sizes)",
                                        spatial)
        spatial = list(spatial)
        out = _sizes_of("fold", "OutputTensor", lambda: TensorDesc(t.data_type, (t.sizes[-3], c, *spatial)))
        return FoldOperatorDesc(t, out, window, *others)
    return make


def _slice1_make(offsets, sizes, strides, output_sizes):
    def make(t):
        out = None if output_sizes is None else _sizes_of("slice1", "OutputTensor",
                                                          lambda: TensorDesc(t.data_type, output_sizes))
        return Slice1OperatorDesc(t, out, offsets, sizes, strides)
    return make


def _slice_grad_make(input_sizes, offsets, sizes, strides):
    def make(t):
        out = _sizes_of("slice_grad", "OutputGradientTensor", lambda: TensorDesc(t.data_type, input_sizes))
        return SliceGradOperatorDesc(t, out, offsets, sizes, strides)
    return make


def _unfold_make(*args):
    return lambda t: UnfoldOperatorDesc(t, None, *[per_axis(v, len(t.sizes) - 2) for v in args])


_PLANS = {
    "slice": lambda offsets, sizes, strides: lambda t: SliceOperatorDesc(t, None, offsets, sizes, strides),
    "slice1": _slice1_make, "unfold": _unfold_make, "fold": _fold_make, "slice_grad": _slice_grad_make,
}


def _identity_make(x, scale, bias):
    sb = None if scale is None and bias is None else ScaleBias(1.0 if scale is None else scale,
                                                               0.0 if bias is None else bias)
    return (lambda t: ElementWiseIdentityOperatorDesc(t, None, sb)), (scale, bias)


def _cast_make(x, dtype):
    dt = _contract.dtype_argument(dtype, "cast")
    if type(dtype).__module__ == "torch" and type(dtype) not in _MOVE_TYPES:
        _key_by_identity(type(dtype))          # a torch.dtype: the C call cache serves the next such call
    return (lambda t: CastOperatorDesc(t, TensorDesc(dt, t.sizes))), (dt,)


def _pad_make(x, start_padding, end_padding, mode, value):
    m = _MODES.get(mode.lower()) if isinstance(mode, str) else (mode if isinstance(mode, PaddingMode) else None)
    if m is None:
        raise _contract.field_error("pad", "PaddingMode", f"be one of {', '.join(repr(k) for k in _MODES)} or a "
                                    f"PaddingMode (mode)", mode)

    def make(t):
        return Padding1OperatorDesc(t, None, m, t.data_type, value, _per_axis(start_padding, t.rank),
                                    _per_axis(end_padding, t.rank))
    return make, (start_padding, end_padding, m, value)


def _join_make(x, axis):
    a = _contract.axis(axis, _contract.rank_of(x), "join")
    return (lambda *ts: JoinOperatorDesc(ts, None, a)), (a,)


def _split_make(x, axis, sizes):
    a = _contract.axis(axis, _contract.rank_of(x), "split")
    if not isinstance(sizes, tuple) or not sizes:
        raise _contract.field_error("split", "OutputTensors", "be one or more tensors (sizes: a non-empty sequence "
                                    "of ints, one per output)", sizes)
    for i, s in enumerate(sizes):
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1:
            raise _contract.field_error("split", f"OutputTensors[{i}].Sizes[{a}]", f"be an int >= 1 (sizes[{i}])", s)

    def make(t):
        outs = tuple(TensorDesc(t.data_type, tuple(int(s) if d == a else n for d, n in enumerate(t.sizes)))
                     for s in sizes)
        return SplitOperatorDesc(t, outs, a)
    return make, (a, sizes)


def _tile_make(x, repeats):
    return (lambda t: TileOperatorDesc(t, None, _repeats(repeats, t.rank))), (repeats,)


def _depth_space_make(cls, name):
    def builder(x, block_size, order):
        o = _order(order, name)
        return (lambda t: cls(t, None, block_size, o)), (block_size, o)
    return builder


_MOVES = {"identity": _identity_make, "cast": _cast_make, "pad": _pad_make, "join": _join_make,
          "split": _split_make, "tile": _tile_make,
          "space_to_depth": _depth_space_make(SpaceToDepth1OperatorDesc, "space_to_depth"),
          "depth_to_space": _depth_space_make(DepthToSpace1OperatorDesc, "depth_to_space")}


def _per_axis(value, rank: int):
    """An int applies to every axis; anything else goes to the description
    as given (which names what is wrong with it)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),) * rank
    return value


def _repeats(value, rank: int):
    """TILE's ``repeats`` by NumPy's rule (``numpy.tile``): an int, or a
    sequence shorter than the rank, has ones prepended (an int ``r`` is
    ``(1, ..., 1, r)``: only the last axis repeats); anything else goes to
    the description as given."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (1,) * (rank - 1) + (int(value),)
    if isinstance(value, tuple) and len(value) < rank:
        return (1,) * (rank - len(value)) + value
    return value


def _order(order, where: str) -> DepthSpaceOrder:
    if isinstance(order, DepthSpaceOrder):
        return order
    o = _ORDERS.get(order.upper()) if isinstance(order, str) else None
    if o is None:
        raise _contract.field_error(where, "Order", "be 'DCR' (DEPTH_COLUMN_ROW), 'CRD' (COLUMN_ROW_DEPTH) or a "
                                    "DepthSpaceOrder (order)", order)
    return o


def _window_count(window) -> int | None:
    """``prod(window)`` where every entry is an int >= 1, else None."""
    if type(window) is tuple or type(window) is list:
        for w in window:
            if type(w) is not int or w < 1:
                break
        else:
            return math.prod(window)
    if not _is_sequence(window) or not all(
            isinstance(w, (int, np.integer)) and not isinstance(w, bool) and w >= 1 for w in window):
        return None
    return math.prod(int(w) for w in window)


def _is_sequence(value) -> bool:
    return not isinstance(value, (str, bytes)) and hasattr(value, "__len__")


def per_axis(value, d: int):
    """A scalar applies to each of ``d`` spatial axes; a sequence is kept."""
    if type(value) is int:
        return (value,) * (d if d > 1 else 1)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),) * max(d, 1)
    return value


# -- the functions -----------------------------------------------------------------------------------

def slice(x: Any, offsets: Sequence[int], sizes: Sequence[int], strides: Sequence[int]) -> Any:  # noqa: A001
    """DML_SLICE: ``out[c] = x[offsets + strides * c]``, ``out.shape == sizes``.

    Parameters
    ----------
    x : numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        The input, of any strides (read where it lies, negative strides
        included) and of one of DirectML's 11 element types (float16/32/64,
        int8/16/32/64, uint8/16/32/64).
    offsets : sequence of int
        The first element read, one entry per axis of ``x`` (each >= 0).
    sizes : sequence of int
        The output's shape, one entry per axis (each >= 1).
    strides : sequence of int
        The step between elements read, one entry per axis (each >= 1); the
        last element read, ``offsets + (sizes - 1) * strides``, must lie in
        ``x``.

    Returns
    -------
    numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        A new packed (C-contiguous) array of ``x``'s framework, dtype and
        device, of shape ``sizes``; for a Dask array, a lazy Dask array (nothing is
        computed until it is). A PyTorch result is differentiable: eager
        autograd (``grad_fn`` ``opendml_<op>Backward``), forward-mode AD and
        the ``torch.func`` transforms (``grad``, ``jvp``, ``vmap``,
        ``jacrev``, ``jacfwd``, ``hessian``); under ``torch.compile`` the call
        goes through opendml's operators (``opendml_cpp::`` once the C++
        library is loaded, else the ``opendml::`` custom operators). A JAX result is
        differentiable in reverse mode (``jax.grad``; see ``opendml.jax``).

    Raises
    ------
    ValidationError
        If ``x`` is not a NumPy, CuPy, PyTorch, JAX or Dask array, has a
        rank the operator's support table lacks, or an argument breaks one
        of the operator's rules (the message names the field and the rule).
    UnsupportedError
        If ``x``'s dtype is not one of the operator's support table at
        the newest feature level (bool, bfloat16, complex...: the message
        names the supported ones), or the array is one opendml cannot read (a PyTorch
        tensor on a device other than cpu, cuda or meta, or sparse, nested
        or conjugated; a JAX array sharded over several devices).
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a
        ``MemoryError``): if the output cannot be allocated (NumPy, CuPy,
        PyTorch CPU and CUDA tensors, JAX arrays run through them; for a Dask
        array, when it is computed); the message names the operator, the
        output's shape and its bytes.
    """
    out = _cached(_SLICE, x, offsets, sizes, strides)
    return out if out is not None else _plan(_SLICE, x, (offsets, sizes, strides))


def slice1(x: Any, window_offsets: Sequence[int], window_sizes: Sequence[int], window_strides: Sequence[int],
           output_sizes: Sequence[int] | None = None) -> Any:
    """DML_SLICE1: a window of ``x`` walked with signed strides (a negative
    stride starts at the window's end). ``output_sizes`` defaults to every
    reachable element: ``1 + (window_sizes - 1) // |window_strides|``.

    Parameters
    ----------
    x : numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        The input, of any strides (read where it lies, negative strides
        included) and of one of DirectML's 11 element types (float16/32/64,
        int8/16/32/64, uint8/16/32/64).
    window_offsets : sequence of int
        Where the window starts, one entry per axis (each >= 0).
    window_sizes : sequence of int
        The window's sizes, one entry per axis (each >= 1); the window must
        lie in ``x``: ``window_offsets + window_sizes <= x.shape``.
    window_strides : sequence of int
        The step per axis: non-zero, in INT32's range; a negative stride
        walks the window from its last element.
    output_sizes : sequence of int or None, optional
        The output's shape, at most the reachable elements per axis; None
        (the default) takes them all.

    Returns
    -------
    numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        A new packed (C-contiguous) array of ``x``'s framework, dtype and
        device, of shape ``output_sizes``; for a Dask array, a lazy Dask array (nothing is
        computed until it is). A PyTorch result is differentiable: eager
        autograd (``grad_fn`` ``opendml_<op>Backward``), forward-mode AD and
        the ``torch.func`` transforms (``grad``, ``jvp``, ``vmap``,
        ``jacrev``, ``jacfwd``, ``hessian``); under ``torch.compile`` the call
        goes through opendml's operators (``opendml_cpp::`` once the C++
        library is loaded, else the ``opendml::`` custom operators). A JAX result is
        differentiable in reverse mode (``jax.grad``; see ``opendml.jax``).

    Raises
    ------
    ValidationError
        If ``x`` is not a NumPy, CuPy, PyTorch, JAX or Dask array, has a
        rank the operator's support table lacks, or an argument breaks one
        of the operator's rules (the message names the field and the rule).
    UnsupportedError
        If ``x``'s dtype is not one of the operator's support table at
        the newest feature level (bool, bfloat16, complex...: the message
        names the supported ones), or the array is one opendml cannot read (a PyTorch
        tensor on a device other than cpu, cuda or meta, or sparse, nested
        or conjugated; a JAX array sharded over several devices).
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a
        ``MemoryError``): if the output cannot be allocated (NumPy, CuPy,
        PyTorch CPU and CUDA tensors, JAX arrays run through them; for a Dask
        array, when it is computed); the message names the operator, the
        output's shape and its bytes.
    """
    out = _cached(_SLICE1, x, window_offsets, window_sizes, window_strides, output_sizes)
    return out if out is not None else _plan(_SLICE1, x, (window_offsets, window_sizes, window_strides, output_sizes))


def unfold(x: Any, window_sizes: Ints, strides: Ints = 1, dilations: Ints = 1, start_padding: Ints = 0,
           end_padding: Ints = 0) -> Any:
    """DML_UNFOLD (im2col) over the spatial axes of ``x`` (shape (N, C, *spatial)):
    ``out.shape == (N, C * prod(window_sizes), prod(blocks))``. Scalars apply to
    every spatial axis.

    Parameters
    ----------
    x : numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        The input of shape (N, C, *spatial), of any strides (read where it lies, negative strides
        included) and of one of DirectML's 11 element types (float16/32/64,
        int8/16/32/64, uint8/16/32/64).
    window_sizes : int or sequence of int
        The window (kernel) size per spatial axis, each >= 1.
    strides : int or sequence of int, optional
        The step between windows per spatial axis, each >= 1 (default 1).
    dilations : int or sequence of int, optional
        The step between a window's elements per spatial axis, each >= 1
        (default 1).
    start_padding, end_padding : int or sequence of int, optional
        Zeros added before and after each spatial axis (default 0); the
        dilated window must fit the padded input.

    Returns
    -------
    numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        A new packed (C-contiguous) array of ``x``'s framework, dtype and
        device, of shape (N, C * prod(window_sizes), BlockCount); for a Dask array, a lazy Dask array (nothing is
        computed until it is). A PyTorch result is differentiable: eager
        autograd (``grad_fn`` ``opendml_<op>Backward``), forward-mode AD and
        the ``torch.func`` transforms (``grad``, ``jvp``, ``vmap``,
        ``jacrev``, ``jacfwd``, ``hessian``); under ``torch.compile`` the call
        goes through opendml's operators (``opendml_cpp::`` once the C++
        library is loaded, else the ``opendml::`` custom operators). A JAX result is
        differentiable in reverse mode (``jax.grad``; see ``opendml.jax``).

    Raises
    ------
    ValidationError
        If ``x`` is not a NumPy, CuPy, PyTorch, JAX or Dask array, has a
        rank the operator's support table lacks, or an argument breaks one
        of the operator's rules (the message names the field and the rule).
    UnsupportedError
        If ``x``'s dtype is not one of the operator's support table at
        the newest feature level (bool, bfloat16, complex...: the message
        names the supported ones), or the array is one opendml cannot read (a PyTorch
        tensor on a device other than cpu, cuda or meta, or sparse, nested
        or conjugated; a JAX array sharded over several devices).
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a
        ``MemoryError``): if the output cannot be allocated (NumPy, CuPy,
        PyTorch CPU and CUDA tensors, JAX arrays run through them; for a Dask
        array, when it is computed); the message names the operator, the
        output's shape and its bytes.
    """
    out = _cached(_UNFOLD, x, window_sizes, strides, dilations, start_padding, end_padding)
    return out if out is not None else _plan(_UNFOLD, x, (window_sizes, strides, dilations, start_padding, end_padding))


def fold(x: Any, output_sizes: Ints, window_sizes: Ints, strides: Ints = 1, dilations: Ints = 1,
         start_padding: Ints = 0, end_padding: Ints = 0) -> Any:
    """DML_FOLD (col2im), the adjoint of ``unfold``: ``x`` of shape (N, C *
    prod(window_sizes), BlockCount) summed back into an array of shape (N, C,
    *output_sizes), each output element adding its window elements in
    increasing window order (float16 sums in float32; integers wrap).

    ``output_sizes`` are the spatial sizes of the result. Scalars apply to
    every spatial axis; the number of spatial axes is the length of
    ``output_sizes``, else of ``window_sizes``, else 1. BlockCount must be
    what ``unfold`` gives for an input of the output's shape with the same
    window, strides, dilations and padding.

    Parameters
    ----------
    x : numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        The columns, of shape (N, C * prod(window_sizes), BlockCount), of any strides (read where it lies, negative strides
        included) and of one of DirectML's 11 element types (float16/32/64,
        int8/16/32/64, uint8/16/32/64).
    output_sizes : int or sequence of int
        The spatial sizes of the result.
    window_sizes : int or sequence of int
        The window size per spatial axis, each >= 1.
    strides : int or sequence of int, optional
        The step between windows per spatial axis, each >= 1 (default 1).
    dilations : int or sequence of int, optional
        The step between a window's elements per spatial axis, each >= 1
        (default 1).
    start_padding, end_padding : int or sequence of int, optional
        The padding ``unfold`` applied before and after each spatial axis
        (default 0); padded positions are dropped.

    Returns
    -------
    numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        A new packed (C-contiguous) array of ``x``'s framework, dtype and
        device, of shape (N, C, *output_sizes); for a Dask array, a lazy Dask array (nothing is
        computed until it is). A PyTorch result is differentiable: eager
        autograd (``grad_fn`` ``opendml_<op>Backward``), forward-mode AD and
        the ``torch.func`` transforms (``grad``, ``jvp``, ``vmap``,
        ``jacrev``, ``jacfwd``, ``hessian``); under ``torch.compile`` the call
        goes through opendml's operators (``opendml_cpp::`` once the C++
        library is loaded, else the ``opendml::`` custom operators). A JAX result is
        differentiable in reverse mode (``jax.grad``; see ``opendml.jax``).

    Raises
    ------
    ValidationError
        If ``x`` is not a NumPy, CuPy, PyTorch, JAX or Dask array, has a
        rank the operator's support table lacks, or an argument breaks one
        of the operator's rules (the message names the field and the rule).
    UnsupportedError
        If ``x``'s dtype is not one of the operator's support table at
        the newest feature level (bool, bfloat16, complex...: the message
        names the supported ones), or the array is one opendml cannot read (a PyTorch
        tensor on a device other than cpu, cuda or meta, or sparse, nested
        or conjugated; a JAX array sharded over several devices).
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a
        ``MemoryError``): if the output cannot be allocated (NumPy, CuPy,
        PyTorch CPU and CUDA tensors, JAX arrays run through them; for a Dask
        array, when it is computed); the message names the operator, the
        output's shape and its bytes.
    """
    out = _cached(_FOLD, x, output_sizes, window_sizes, strides, dilations, start_padding, end_padding)
    return out if out is not None else _plan(_FOLD, x, (output_sizes, window_sizes, strides, dilations,
                                                        start_padding, end_padding))


def slice_grad(grad: Any, input_sizes: Sequence[int], window_offsets: Sequence[int], window_sizes: Sequence[int],
               window_strides: Sequence[int]) -> Any:
    """DML_SLICE_GRAD, the adjoint of ``slice1``: an array of shape
    ``input_sizes`` (the shape of ``slice1``'s input) that is 0 except where
    ``slice1`` with this window reads, which receives the matching element of
    ``grad`` (``grad.shape`` being ``slice1``'s output shape).

    Parameters
    ----------
    grad : numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        The gradient of ``slice1``'s output, of any strides (read where it lies, negative strides
        included) and of one of DirectML's 11 element types (float16/32/64,
        int8/16/32/64, uint8/16/32/64).
    input_sizes : sequence of int
        The shape of the result (``slice1``'s input), one entry per axis.
    window_offsets, window_sizes, window_strides : sequence of int
        ``slice1``'s window, as ``slice1`` takes it (strides non-zero,
        negative ones walking from the window's end); the window must lie in
        ``input_sizes``.

    Returns
    -------
    numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        A new packed (C-contiguous) array of ``grad``'s framework, dtype and
        device, of shape ``input_sizes``; for a Dask array, a lazy Dask array (nothing is
        computed until it is). A PyTorch result is differentiable: eager
        autograd (``grad_fn`` ``opendml_<op>Backward``), forward-mode AD and
        the ``torch.func`` transforms (``grad``, ``jvp``, ``vmap``,
        ``jacrev``, ``jacfwd``, ``hessian``); under ``torch.compile`` the call
        goes through opendml's operators (``opendml_cpp::`` once the C++
        library is loaded, else the ``opendml::`` custom operators). A JAX result is
        differentiable in reverse mode (``jax.grad``; see ``opendml.jax``).

    Raises
    ------
    ValidationError
        If ``grad`` is not a NumPy, CuPy, PyTorch, JAX or Dask array, has a
        rank the operator's support table lacks, or an argument breaks one
        of the operator's rules (the message names the field and the rule).
    UnsupportedError
        If ``grad``'s dtype is not one of the operator's support table at
        the newest feature level (bool, bfloat16, complex...: the message
        names the supported ones), or the array is one opendml cannot read (a PyTorch
        tensor on a device other than cpu, cuda or meta, or sparse, nested
        or conjugated; a JAX array sharded over several devices).
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a
        ``MemoryError``): if the output cannot be allocated (NumPy, CuPy,
        PyTorch CPU and CUDA tensors, JAX arrays run through them; for a Dask
        array, when it is computed); the message names the operator, the
        output's shape and its bytes.
    """
    out = _cached(_SLICE_GRAD, grad, input_sizes, window_offsets, window_sizes, window_strides)
    return out if out is not None else _plan(_SLICE_GRAD, grad, (input_sizes, window_offsets, window_sizes,
                                                                 window_strides))


def identity(x: Any, scale: float | None = None, bias: float | None = None) -> np.ndarray:
    """DML_ELEMENT_WISE_IDENTITY: a packed copy of ``x``, or ``x * scale +
    bias`` (float types; ``scale`` defaults to 1 and ``bias`` to 0 where only
    the other is given; computed in float32 for float16/float32).

    Parameters
    ----------
    x : numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        The input, of any strides (read where it lies, negative strides
        included) and an integer or float dtype of 1, 2, 4 or 8 bytes. Any
        framework: NumPy, CuPy, PyTorch (CPU, CUDA), JAX, Dask.
    scale : float or None, optional
        The factor (default: none, or 1 where ``bias`` is given).
    bias : float or None, optional
        The addend (default: none, or 0 where ``scale`` is given).

    Returns
    -------
    array of x's framework
        A new packed (C-contiguous) array, of ``x``'s shape and dtype.

    Raises
    ------
    UnsupportedError
        If the dtype of ``x`` is missing from the operator's support table at
        the newest feature level (bool, complex...: the message names the
        supported ones).
    ValidationError
        If ``x`` is not a NumPy, CuPy, PyTorch, JAX or Dask array or has a
        rank the support table lacks, or an
        argument breaks one of the operator's rules (``scale``/``bias`` on an integer dtype) (the message names
        the field and the rule). Checked before anything is allocated.
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a
        ``MemoryError``) naming the operator, the output's shape and its
        bytes, if an output cannot be allocated.
    """
    out = _move(_IDENTITY, x, scale, bias) if _engine.execute is _EXECUTE else None
    return out if out is not None else _move_call(_IDENTITY, x, (scale, bias))


def cast(x: Any, dtype) -> np.ndarray:
    """DML_CAST: ``x`` converted to ``dtype`` (a NumPy, PyTorch or JAX
    dtype, a ``dml.DataType`` or its name) by the rules of ``opendml.ops.cast``.

    Parameters
    ----------
    x : numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        The input, of any strides (read where it lies, negative strides
        included) and an integer or float dtype of 1, 2, 4 or 8 bytes. Any
        framework: NumPy, CuPy, PyTorch (CPU, CUDA), JAX, Dask.
    dtype : numpy.dtype, type, str, torch.dtype, JAX dtype or DataType
        The result's element type: one of the 11 DirectML types, spelt as
        any framework spells it: a NumPy dtype, scalar type or string
        (``np.int8``, ``"int8"``, ``"i1"``), a PyTorch dtype
        (``torch.int8``), a JAX or ml_dtypes dtype (``jnp.int8``), a
        ``DataType``, or a ``DataType`` name (``"INT8"``,
        ``"DML_TENSOR_DATA_TYPE_INT8"``), whatever ``x``'s framework.

    Returns
    -------
    array of x's framework
        A new packed (C-contiguous) array, of ``x``'s shape and dtype ``dtype``.

    Raises
    ------
    UnsupportedError
        If the dtype of ``x`` is missing from the operator's support table at
        the newest feature level (bool, complex...: the message names the
        supported ones).
    ValidationError
        If ``x`` is not a NumPy, CuPy, PyTorch, JAX or Dask array or has a
        rank the support table lacks, or an
        argument breaks one of the operator's rules (``dtype`` not a dtype at all; a dtype CAST does not take is an
        ``UnsupportedError``) (the message names
        the field and the rule). Checked before anything is allocated.
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a
        ``MemoryError``) naming the operator, the output's shape and its
        bytes, if an output cannot be allocated.
    """
    out = _move(_CAST, x, dtype) if _engine.execute is _EXECUTE else None
    return out if out is not None else _move_call(_CAST, x, (dtype,))


def pad(x: Any, start_padding: Ints, end_padding: Ints, mode: str = "constant", value=0) -> np.ndarray:
    """DML_PADDING1: ``x`` padded by ``start_padding``/``end_padding`` elements
    per axis (an int pads every axis). ``mode``: "constant" (``value``, of
    ``x``'s type), "edge", "reflect", "symmetric" or "wrap", as DirectML's
    DML_PADDING_MODE (padding may exceed the axis' size; it repeats
    periodically).

    Parameters
    ----------
    x : numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        The input, of any strides (read where it lies, negative strides
        included) and an integer or float dtype of 1, 2, 4 or 8 bytes. Any
        framework: NumPy, CuPy, PyTorch (CPU, CUDA), JAX, Dask.
    start_padding, end_padding : int or sequence of int
        Elements added before and after each axis: an int for every axis,
        or one int per axis.
    mode : str or PaddingMode, optional
        ``"constant"`` (the default), ``"edge"``, ``"reflect"`` (or
        ``"reflection"``), ``"symmetric"``, ``"wrap"`` (any case), or a
        ``PaddingMode``.
    value : int or float, optional
        The constant mode's value (default 0); it must fit ``x``'s dtype.

    Returns
    -------
    array of x's framework
        A new packed (C-contiguous) array, of ``x``'s dtype, each axis ``start + size + end`` long.

    Raises
    ------
    UnsupportedError
        If the dtype of ``x`` is missing from the operator's support table at
        the newest feature level (bool, complex...: the message names the
        supported ones).
    ValidationError
        If ``x`` is not a NumPy, CuPy, PyTorch, JAX or Dask array or has a
        rank the support table lacks, or an
        argument breaks one of the operator's rules (an unknown ``mode``, a ``value`` out of the dtype's range) (the message names
        the field and the rule). Checked before anything is allocated.
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a
        ``MemoryError``) naming the operator, the output's shape and its
        bytes, if an output cannot be allocated.
    """
    out = _move(_PAD, x, start_padding, end_padding, mode, value) if _engine.execute is _EXECUTE else None
    return out if out is not None else _move_call(_PAD, x, (start_padding, end_padding, mode, value))


def join(arrays: Sequence[Any], axis: int) -> np.ndarray:
    """DML_JOIN: the arrays concatenated along ``axis`` (same dtype and rank;
    equal sizes but along ``axis``).

    Parameters
    ----------
    arrays : sequence of arrays
        The inputs, a non-empty sequence of arrays of one framework, dtype and
        rank (any strides; integer or float dtypes of 1, 2, 4 or 8 bytes).
    axis : int
        The axis to concatenate along; negative values count from the end.

    Returns
    -------
    array of x's framework
        A new packed (C-contiguous) array, of the inputs' dtype.

    Raises
    ------
    UnsupportedError
        If the dtype of an entry of ``arrays`` is missing from the operator's support table at
        the newest feature level (bool, complex...: the message names the
        supported ones).
    ValidationError
        If an entry of ``arrays`` is not a NumPy, CuPy, PyTorch, JAX or Dask array or has a
        rank the support table lacks, or an
        argument breaks one of the operator's rules (dtypes or ranks differ, ``axis`` out of range) (the message names
        the field and the rule). Checked before anything is allocated.
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a
        ``MemoryError``) naming the operator, the output's shape and its
        bytes, if an output cannot be allocated.
    """
    out = _move(_JOIN, arrays, axis) if _engine.execute is _EXECUTE else None
    return out if out is not None else _move_call(_JOIN, arrays, (axis,))


def split(x: Any, axis: int, sizes: Sequence[int]) -> list[np.ndarray]:
    """DML_SPLIT: ``x`` cut along ``axis`` into arrays of ``sizes[i]`` elements
    there (the sizes sum to ``x.shape[axis]``); returns a list.

    Parameters
    ----------
    x : numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        The input, of any strides (read where it lies, negative strides
        included) and an integer or float dtype of 1, 2, 4 or 8 bytes. Any
        framework: NumPy, CuPy, PyTorch (CPU, CUDA), JAX, Dask.
    axis : int
        The axis to cut along; negative values count from the end.
    sizes : sequence of int
        The length of each piece along ``axis``, each >= 1, summing to
        ``x.shape[axis]``.

    Returns
    -------
    list of arrays of x's framework
        One new packed array per entry of ``sizes``, of ``x``'s dtype.

    Raises
    ------
    UnsupportedError
        If the dtype of ``x`` is missing from the operator's support table at
        the newest feature level (bool, complex...: the message names the
        supported ones).
    ValidationError
        If ``x`` is not a NumPy, CuPy, PyTorch, JAX or Dask array or has a
        rank the support table lacks, or an
        argument breaks one of the operator's rules (``sizes`` empty or not summing to ``x.shape[axis]``, ``axis`` out of range) (the message names
        the field and the rule). Checked before anything is allocated.
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a
        ``MemoryError``) naming the operator, the output's shape and its
        bytes, if an output cannot be allocated.
    """
    out = _move(_SPLIT, x, axis, sizes) if _engine.execute is _EXECUTE else None
    return out if out is not None else _move_call(_SPLIT, x, (axis, sizes))


def tile(x: Any, repeats: Ints) -> np.ndarray:
    """DML_TILE: ``x`` repeated ``repeats[i]`` times along axis i;
    ``out.shape == x.shape * repeats``. ``repeats`` follows ``numpy.tile``'s
    rule: a sequence shorter than ``x.ndim`` has ones prepended, and an int
    ``r`` is ``(1, ..., 1, r)`` (only the last axis repeats: ``tile(x, 2)``
    of a (3, 4) array is (3, 8)).

    Parameters
    ----------
    x : numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        The input, of any strides (read where it lies, negative strides
        included) and an integer or float dtype of 1, 2, 4 or 8 bytes. Any
        framework: NumPy, CuPy, PyTorch (CPU, CUDA), JAX, Dask.
    repeats : int or sequence of int
        The repeat count per axis, each >= 1: one entry per axis of ``x``,
        or fewer (ones are prepended for the leading axes), or an int (the
        last axis' count). More entries than ``x`` has axes are refused
        (``numpy.tile`` would add leading axes of size 1: reshape ``x``
        first).

    Returns
    -------
    array of x's framework
        A new packed (C-contiguous) array, of ``x``'s dtype and shape ``x.shape * repeats``.

    Raises
    ------
    UnsupportedError
        If the dtype of ``x`` is missing from the operator's support table at
        the newest feature level (bool, complex...: the message names the
        supported ones).
    ValidationError
        If ``x`` is not a NumPy, CuPy, PyTorch, JAX or Dask array or has a
        rank the support table lacks, or an
        argument breaks one of the operator's rules (``repeats`` longer than ``x.ndim``, an entry < 1) (the message names
        the field and the rule). Checked before anything is allocated.
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a
        ``MemoryError``) naming the operator, the output's shape and its
        bytes, if an output cannot be allocated.
    """
    out = _move(_TILE, x, repeats) if _engine.execute is _EXECUTE else None
    return out if out is not None else _move_call(_TILE, x, (repeats,))


def space_to_depth(x: Any, block_size: int, order: str = "DCR") -> np.ndarray:
    """DML_SPACE_TO_DEPTH1: (N, C, H*b, W*b) -> (N, C*b*b, H, W), the depth
    index being (bh, bw, c) for "DCR" or (c, bh, bw) for "CRD".

    Parameters
    ----------
    x : numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        The input of shape (N, C, H * b, W * b), of any strides (read where it lies, negative strides
        included) and an integer or float dtype of 1, 2, 4 or 8 bytes. Any
        framework: NumPy, CuPy, PyTorch (CPU, CUDA), JAX, Dask.
    block_size : int
        ``b``, the block's height and width.
    order : str or DepthSpaceOrder, optional
        ``"DCR"`` (the default, ``"DEPTH_COLUMN_ROW"``) or ``"CRD"``
        (``"COLUMN_ROW_DEPTH"``), any case, or a ``DepthSpaceOrder``.

    Returns
    -------
    array of x's framework
        A new packed (C-contiguous) array, of ``x``'s dtype and shape (N, C * b * b, H, W).

    Raises
    ------
    UnsupportedError
        If the dtype of ``x`` is missing from the operator's support table at
        the newest feature level (bool, complex...: the message names the
        supported ones).
    ValidationError
        If ``x`` is not a NumPy, CuPy, PyTorch, JAX or Dask array or has a
        rank the support table lacks, or an
        argument breaks one of the operator's rules (not 4-D, H or W not a multiple of ``block_size``, an unknown ``order``) (the message names
        the field and the rule). Checked before anything is allocated.
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a
        ``MemoryError``) naming the operator, the output's shape and its
        bytes, if an output cannot be allocated.
    """
    out = _move(_SPACE_TO_DEPTH, x, block_size, order) if _engine.execute is _EXECUTE else None
    return out if out is not None else _move_call(_SPACE_TO_DEPTH, x, (block_size, order))


def depth_to_space(x: Any, block_size: int, order: str = "DCR") -> np.ndarray:
    """DML_DEPTH_TO_SPACE1: (N, C*b*b, H, W) -> (N, C, H*b, W*b), the inverse
    of ``space_to_depth`` with the same order.

    Parameters
    ----------
    x : numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        The input of shape (N, C * b * b, H, W), of any strides (read where it lies, negative strides
        included) and an integer or float dtype of 1, 2, 4 or 8 bytes. Any
        framework: NumPy, CuPy, PyTorch (CPU, CUDA), JAX, Dask.
    block_size : int
        ``b``, the block's height and width.
    order : str or DepthSpaceOrder, optional
        ``"DCR"`` (the default, ``"DEPTH_COLUMN_ROW"``) or ``"CRD"``
        (``"COLUMN_ROW_DEPTH"``), any case, or a ``DepthSpaceOrder``.

    Returns
    -------
    array of x's framework
        A new packed (C-contiguous) array, of ``x``'s dtype and shape (N, C, H * b, W * b).

    Raises
    ------
    UnsupportedError
        If the dtype of ``x`` is missing from the operator's support table at
        the newest feature level (bool, complex...: the message names the
        supported ones).
    ValidationError
        If ``x`` is not a NumPy, CuPy, PyTorch, JAX or Dask array or has a
        rank the support table lacks, or an
        argument breaks one of the operator's rules (not 4-D, the channels not a multiple of ``block_size ** 2``, an unknown ``order``) (the message names
        the field and the rule). Checked before anything is allocated.
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a
        ``MemoryError``) naming the operator, the output's shape and its
        bytes, if an output cannot be allocated.
    """
    out = _move(_DEPTH_TO_SPACE, x, block_size, order) if _engine.execute is _EXECUTE else None
    return out if out is not None else _move_call(_DEPTH_TO_SPACE, x, (block_size, order))


def cpu_output_cache(limit: int | None = None) -> dict:
    """The CPU array API's output-block cache, and optionally a new size limit.

    With the compiled CPU kernels, outputs of 1 MiB and up are put in memory
    blocks that, once the output (and every view of it) is released, are kept
    for the next output of a similar size instead of being returned to the
    system: a fresh large allocation is paid for in page faults and
    zero-filling on first touch, which costs about as much as the operator
    itself. ``limit`` is how many bytes of released blocks may be kept; it is
    the same setting as ``opendml.configure(output_cache_bytes=...)``. 0 turns
    reuse off and frees what is held. Returns ``{'limit', 'blocks', 'bytes',
    'hits', 'misses'}`` after the change; with the NumPy kernels every output
    is a plain ``np.empty`` and the cache reports a limit of 0.

    Parameters
    ----------
    limit : int or None, optional
        The new limit in bytes (>= 0; 0 turns reuse off and frees the blocks
        held), or None (the default) to leave the setting as it is.

    Returns
    -------
    dict
        ``{'limit': int, 'blocks': int, 'bytes': int, 'hits': int,
        'misses': int}``: the limit in bytes, the released blocks kept and
        their bytes, and the cache's hit and miss counts (outputs that got a
        kept block, or did not). All 0 with the NumPy kernels.

    Raises
    ------
    TypeError
        If ``limit`` is not an int (a bool is not) or None.
    ValidationError
        If ``limit`` is negative.
    UnsupportedError
        If the configuration asks for the compiled CPU kernels
        (``OPENDML_CPU_KERNELS=compiled``) and they are not installed.
    """
    from ..runtime import get_backend
    from ..runtime.config import configure
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)):
            raise TypeError(f"cpu_output_cache: limit must be an int (bytes) or None; got {type(limit).__name__}")
        if limit < 0:
            raise ValidationError(f"cpu_output_cache: limit must be an int >= 0 (bytes) or None; got {limit}")
        configure(output_cache_bytes=int(limit))
    return get_backend("cpu").cache_info()


#: Which functions take a sequence of arrays (``Binding.array == "arrays"``: JOIN), return a list (an
#: operator with a list of outputs: SPLIT), and which arguments are lists to snapshot (typed as
#: sequences in the signature), read once from the bindings and the functions above.
_SEQUENCES = frozenset(name for name in FAMILY if _contract.ARGUMENT[name] == "arrays")
_MULTI = frozenset(name for name in FAMILY if _many_out(_contract.OPERATOR_OF[name]))
_SNAPSHOTS = {name: frozenset(i for i, p in enumerate(list(inspect.signature(globals()[name]).parameters.values())[1:])
                              if "Sequence" in str(p.annotation) or "Ints" in str(p.annotation))
              for name in FAMILY}

# What the operator modules' ``adjoint`` methods call (``ADJOINT_API``), and the route a ``Call`` on
# arrays of any framework takes (``Call(*arrays)``, through ``_dispatch.front``).
for _name in ("slice1", "slice_grad", "unfold", "fold", *FAMILY):
    setattr(_engine._AdjointApi, _name, staticmethod(globals()[_name]))
_dispatch.front.run_list = run_list

# torch.compile takes the family's functions into a graph whole (``_dispatch.enter_graph_whole``).
_dispatch.enter_graph_whole([globals()[_name] for _name in FAMILY])
