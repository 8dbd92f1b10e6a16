"""The array API of the data-movement family: ``identity``, ``cast``, ``pad``,
``join``, ``split``, ``tile``, ``space_to_depth`` and ``depth_to_space`` on
NumPy, CuPy, PyTorch, JAX and Dask arrays, each a thin function building a
``FamilyCall`` (the inputs' descriptions -> the operator's description,
``opendml.ops``). NumPy arrays run the move program on the CPU backend here;
the frameworks' adapters (``family_torch``, ``cupy_adapter``,
``jax_adapter``, ``dask_adapter``; ``cuda`` for CUDA memory) run the
same call and read what they need of the operator (adjoint, linear part,
chunking) from its description: no branch per operator there. Inputs are
read where they lie (any strides, negative ones included); results are new
packed arrays of the input's framework, equal byte for byte to the NumPy
call.

Repeated NumPy calls (same function, arguments, dtypes, shapes and byte
strides) are served from C first: each function offers its arguments to the
C call cache (``runtime.calls.move``, ``runtime/cpu/calls.c``) before
anything else, and a call whose compiled passes were recorded there gets new
outputs and those passes without entering Python again (its Python route is
``_<function>``). A call the C cache has not seen (a never-seen shape) is
then offered to the function's C lowering (``runtime.calls.move_new``,
``runtime/cpu/newshape_move.c``): a valid call in its simple forms (exact
ints, floats, strs, NumPy dtypes; NumPy arrays) is lowered, run and recorded
in that one C call, with the passes, outputs and record the Python route
would make; anything else is declined and the Python route runs it (and
raises whatever it raises). Behind it, ``family_cache`` serves what the C cache cannot
key, and the NumPy kernels: the recorded description and passes replayed on
the new arrays' addresses. Every ``opendml.configure()`` empties both;
``configure(call_cache=False)`` turns both off; a replaced ``execute`` (a spy)
is given every call.

Differentiation: where the operation is linear for its types (float
tensors; CAST between float types), PyTorch results are differentiable
(autograd, forward-mode AD, ``torch.func``) and JAX results in reverse mode
(``jax.grad``, any order); each backward formula is the operator module's
declared ``adjoint`` (``opendml.ops._spec``). Under ``torch.compile`` a
family call is a graph break that runs eagerly.

Every list argument is read once, at entry (``_snapshot``), and only that
copy is used afterwards, so a list another thread changes during the call
cannot mix values. Bad arguments are ``opendml.ValidationError`` (or
``UnsupportedError`` for a type the operator's newest support table lacks),
checked before anything is allocated.
"""
from __future__ import annotations

import importlib
from collections.abc import Mapping, Set
from typing import Any, Sequence, Union

import numpy as np

from ..model.data_type import DataType
from ..model.errors import UnsupportedError, ValidationError
from ..model.tensor_desc import TensorDesc
from ..ops import (DepthSpaceOrder, DepthToSpace1OperatorDesc, ElementWiseIdentityOperatorDesc, JoinOperatorDesc,
                   Padding1OperatorDesc, PaddingMode, ScaleBias, SpaceToDepth1OperatorDesc, SplitOperatorDesc,
                   TileOperatorDesc)
from ..ops.cast import CastOperatorDesc
from ..runtime import calls as _calls
from ..runtime import get_backend
from ..runtime.config import CACHE_MIN_BYTES
from ..runtime.cpu.backend import WORDS
from . import _contract, _dispatch, family_cache
from .numpy_adapter import as_input
from .planner import array_layout, logical_desc

__all__ = ["identity", "cast", "pad", "join", "split", "tile", "space_to_depth", "depth_to_space"]

Ints = Union[int, Sequence[int]]

_MODES = {"constant": PaddingMode.CONSTANT, "edge": PaddingMode.EDGE, "reflect": PaddingMode.REFLECTION,
          "reflection": PaddingMode.REFLECTION, "symmetric": PaddingMode.SYMMETRIC, "wrap": PaddingMode.WRAP}
_ORDERS = {"DCR": DepthSpaceOrder.DEPTH_COLUMN_ROW, "CRD": DepthSpaceOrder.COLUMN_ROW_DEPTH,
           "DEPTH_COLUMN_ROW": DepthSpaceOrder.DEPTH_COLUMN_ROW, "COLUMN_ROW_DEPTH": DepthSpaceOrder.COLUMN_ROW_DEPTH}


#: ``_move(op, x, *args)``: a repeated call on NumPy arrays served by the C
#: call cache (``runtime.calls.move``), or None. Each function offers its
#: arguments exactly as received, first thing; the route records a compiled
#: run with the same arguments snapshotted (``FamilyCall.ccall``).
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


def _array(x, where: str) -> np.ndarray:
    if x.dtype.kind not in "iuf" or x.dtype.itemsize not in WORDS:
        raise ValidationError(f"{where}: unsupported dtype {x.dtype}")
    return as_input(x)


def _prepared(x: np.ndarray):
    """(input description, (strides, origin), source word array) of ``x``,
    read where it lies (copied first only when a stride is not a whole
    number of elements)."""
    layout = array_layout(x.shape, x.strides, x.itemsize)
    if layout is None:
        x = np.ascontiguousarray(x)
        layout = array_layout(x.shape, x.strides, x.itemsize)
    desc = logical_desc(x.dtype, x.shape)
    word = WORDS[x.itemsize]
    if layout.span == x.size and x.flags.c_contiguous:     # (packed: the same words, without as_strided's cost)
        return desc, (layout.strides, layout.origin), x.view(word).reshape(-1)
    low = x[tuple(slice(None, None, -1) if f else slice(None) for f in layout.flips)] if any(layout.flips) else x
    src = np.lib.stride_tricks.as_strided(low.view(word), shape=(layout.span,), strides=(x.itemsize,))
    return desc, (layout.strides, layout.origin), src


class FamilyCall:
    """One call of the family's array API, independent of the arrays'
    framework: ``name`` (the function's, for messages), ``make`` (the
    inputs' logical ``TensorDesc``s -> the operator's description) and
    ``multi`` (the function returns a list: SPLIT). The framework modules
    (``family_torch``, ``jax_adapter``, ``dask_adapter``) run it; what they
    need of the operator (its adjoint, its linear part, its chunking) the
    description declares (``opendml.ops._spec``). ``key`` (optional): the
    function and its arguments frozen (``family_cache.call_key``), which
    lets the NumPy route serve repeated calls from ``family_cache``; None:
    never cached. ``ccall`` (optional, with ``key``): ``(function, args,
    seq)``, the arguments exactly as the function offered them to the C
    call cache (``runtime.calls.move``; lists snapshotted) and whether the
    inputs were a sequence (JOIN): a compiled run is then recorded there."""

    __slots__ = ("name", "make", "multi", "key", "ccall")

    def __init__(self, name: str, make, multi: bool = False, key=None, ccall=None):
        self.name, self.make, self.multi, self.key, self.ccall = name, make, multi, key, ccall

    def describe(self, descs):
        """The validated description for inputs of these logical descriptions
        (the newest feature level's rules)."""
        desc = self.make(*descs)
        desc.validate()
        return desc

    def describe_arrays(self, dtypes, shapes):
        return self.describe([logical_desc(np.dtype(d), tuple(int(n) for n in s)) for d, s in zip(dtypes, shapes)])

    def __call__(self, *arrays) -> list:
        """The outputs (always a list) for ``arrays`` of any framework."""
        return run_list(self, arrays)


def fixed(desc, name: str | None = None) -> FamilyCall:
    """A ``FamilyCall`` that runs ``desc`` itself (its linear part on
    tangents, for instance) on arrays of its inputs' sizes and types."""
    def make(*descs):
        for (where, want), got in zip(desc.named_tensors("input"), descs):
            if got.sizes != want.sizes or got.data_type != want.data_type:
                raise ValidationError(f"{desc.OPERATOR}: {where} must have sizes {list(want.sizes)} and DataType "
                                      f"{want.data_type.name}; got {list(got.sizes)} {got.data_type.name}")
        return desc
    return FamilyCall(name or desc.OPERATOR.lower(), make, len(desc.outputs) > 1 or _many_out(desc))


def _many_out(desc) -> bool:
    return any(s.many and s.role == "output" for s in desc.SLOTS)


#: Framework module (``_dispatch.FRAMEWORKS``) -> opendml's module that runs the family on it.
_MODULES = {"torch": "torch.adapter", "cupy": "cupy_adapter", "jax": "jax_adapter", "dask.array": "dask_adapter"}
_BY_TYPE: dict = {}


def _framework(x, where: str, argument: str = "x"):
    """The module that runs the family on ``x``'s framework (None: NumPy);
    the contract's ``ValidationError`` for a non-array."""
    t = type(x)
    if t in _BY_TYPE:
        return _BY_TYPE[t]
    kind = _contract.framework_of(x)
    if kind is None:
        raise _contract.not_an_array(x, where, argument)
    if kind == "numpy":
        return _BY_TYPE.setdefault(t, None)
    return _BY_TYPE.setdefault(t, importlib.import_module(f"{__package__}.{_MODULES[kind]}"))


def _one_framework(name: str, arrays, many: bool):
    """The module of ``arrays``' one framework (None: NumPy)."""
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


def run_list(call: FamilyCall, arrays) -> list:
    """Run ``call`` on ``arrays`` (one framework); the outputs as a list."""
    arrays = list(arrays)
    fw = _one_framework(call.name, arrays, len(arrays) > 1)
    if fw is None:
        return run_numpy(call, arrays)
    return fw.run_move(call, arrays)


def run_numpy(call: FamilyCall, arrays) -> list:
    """The NumPy path: validate on the arrays' shapes, then execute; a call
    seen before (same function, arguments, dtypes, shapes and strides, on
    the CPU backend in force) is served from ``family_cache`` (the C call
    cache, ``runtime.calls.move``, serves it before the function gets here
    once a compiled run was recorded there)."""
    key = record = None
    # A replaced ``execute`` (a spy, a mock) is given every call, uncached.
    if call.key is not None and execute is _EXECUTE:
        arrays_key = family_cache.array_key(arrays)
        if arrays_key is not None:
            since = _calls.generation() if call.ccall is not None else None   # before any setting is read
            backend = get_backend("cpu")
            # A backend whose prepare was replaced on the instance (a spy, a
            # mock) records nothing new here (calls the C cache already holds
            # are still served from C: only a replaced ``execute`` is given
            # every call); configure(call_cache=False) turns this cache off too.
            if "prepare" not in backend.__dict__ and backend.config.call_cache:
                key = (call.key, arrays_key)
                record = (call, since)
                entry = family_cache.lookup(key, backend)
                if entry is not None:
                    outs = _replay(entry, arrays, call.name)
                    # another spelling of a recorded call (cast's float and
                    # DataType.FLOAT64): the C cache learns it too
                    _put_c(record, arrays, outs, entry.offsets, entry.steps)
                    return outs
    arrays = [_array(x, call.name) for x in arrays]
    desc = call.describe([logical_desc(x.dtype, x.shape) for x in arrays])
    return execute(desc, arrays) if key is None else _execute(desc, arrays, key, record)


def _replay(entry, arrays, name: str) -> list:
    """A cached call on new arrays of the recorded dtypes, shapes and
    strides: new outputs, then the recorded kernels on the new addresses (or,
    without them, the recorded plan prepared again)."""
    backend = entry.backend
    # named as the uncached route names it (the operator), so an allocation
    # error reads the same whichever route the call took
    outs = [backend.empty(shape, dtype, entry.desc.OPERATOR)[0] for shape, dtype in entry.outs]
    steps = entry.steps
    if steps is None:
        srcs = [_prepared(x)[2] for x in arrays]
        backend.prepare(entry.plan, srcs, [o.view(WORDS[o.itemsize]).reshape(-1) for o in outs])()
        return outs
    ins = [x.ctypes.data + off for x, off in zip(arrays, entry.offsets)]
    dsts = [o.ctypes.data for o in outs]
    for kernel, blob, threads, fill, s, d in steps:
        kernel(dsts[d], dsts[s] if fill else ins[s], blob, threads)
    return outs


def execute(desc, arrays) -> list:
    """Run the validated ``desc``'s move program on NumPy arrays (any
    strides) into new packed arrays, on the CPU backend."""
    return _execute(desc, arrays, None, None)


_EXECUTE = execute


def _execute(desc, arrays, key, record) -> list:
    """``execute``; where ``key`` is given and the call succeeds, it is
    recorded in ``family_cache`` under ``key`` and, with ``record`` ((the
    FamilyCall, the call cache's generation read before any setting)) and
    the compiled kernels, in the C call cache."""
    arrays = [_array(x, desc.OPERATOR) for x in arrays]
    prepared = [_prepared(x) for x in arrays]
    plan = desc.lower(in_layouts=[p[1] for p in prepared])
    backend = get_backend("cpu")           # large outputs reuse released, already-resident blocks
    outs = [backend.empty(t.sizes, t.data_type.numpy_dtype, desc.OPERATOR)[0] for t in desc.outputs]
    dsts = [o.view(WORDS[o.itemsize]).reshape(-1) for o in outs]
    srcs = [p[2] for p in prepared]
    # A call to record runs the compiled passes it records (built once: the
    # backend's own kernels, parameters and threads, as prepare would run them)
    steps = family_cache.kernel_steps(backend, plan, srcs, dsts) \
        if key is not None and backend.kernels == "compiled" else None
    if steps is None:
        backend.prepare(plan, srcs, dsts)()
    else:
        ins, dst_addrs = [a.ctypes.data for a in srcs], [o.ctypes.data for o in dsts]
        for kernel, blob, threads, fill, s, d in steps:
            kernel(dst_addrs[d], dst_addrs[s] if fill else ins[s], blob, threads)
    if key is not None:
        _record(key, record, backend, desc, plan, arrays, prepared, outs, steps)
    return outs


def _record(key, record, backend, desc, plan, arrays, prepared, outs, steps) -> None:
    # Only arrays read where they lie (not copied by _prepared; the key
    # admits no array that as_input converts) are replayed from their own
    # addresses.
    offsets = []
    for x, (_, (_, origin), src) in zip(arrays, prepared):
        off = -origin * x.itemsize
        if array_layout(x.shape, x.strides, x.itemsize) is None or \
                (src.size and x.ctypes.data + off != src.ctypes.data):
            return
        offsets.append(off)
    family_cache.record(key, family_cache.Entry(backend, desc, plan,
                                                tuple((o.shape, o.dtype) for o in outs), tuple(offsets), steps))
    _put_c(record, arrays, outs, offsets, steps)


def _put_c(record, arrays, outs, offsets, steps) -> None:
    """Record a compiled run in the C call cache (``runtime.calls.put_move``):
    the next such call is served before any Python runs."""
    call, since = record if record is not None else (None, None)
    if steps is None or call is None or call.ccall is None:
        return
    name, args, seq = call.ccall
    _calls.put_move(name, tuple(arrays) if seq else arrays[0], args,
                    tuple((o.shape, o.dtype, o.nbytes >= CACHE_MIN_BYTES) for o in outs),
                    tuple(-off for off in offsets),
                    tuple((int(fill), s, d, blob, threads) for _, blob, threads, fill, s, d in steps),
                    call.multi, since)


def _run(call: FamilyCall, arrays):
    outs = run_list(call, arrays)
    return outs if call.multi else outs[0]


def adjoint(desc, cotangents) -> tuple:
    """The adjoint of ``desc``'s linear part applied to ``cotangents`` (one
    per output): one array per input, as the operator module declares it."""
    lin = desc.linear_part()
    if lin is None:
        raise UnsupportedError(f"{desc.OPERATOR}: not differentiable for these data types "
                               f"({', '.join(t.data_type.name for t in desc.inputs + desc.outputs)})")
    return tuple(lin.adjoint(ADJOINT_API, *cotangents))


def differentiable(desc) -> bool:
    return getattr(desc, "linear_part", None) is not None and desc.linear_part() is not None


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
    if execute is _EXECUTE:
        out = _move(_IDENTITY, x, scale, bias)
        if out is not None:
            return out
        out = _new(_IDENTITY, x, (scale, bias))
        if out is not None:
            return out
    return _identity(x, scale, bias)


def _identity(x: Any, scale: float | None, bias: float | None):
    """``identity`` past the C call cache (its own function: the closures
    below would give ``identity`` cells to make on every call)."""
    _checked("identity", (x,))
    sb = None if scale is None and bias is None else ScaleBias(1.0 if scale is None else scale,
                                                               0.0 if bias is None else bias)
    return _run(FamilyCall("identity", lambda t: ElementWiseIdentityOperatorDesc(t, None, sb),
                           key=family_cache.call_key("identity", scale, bias),
                           ccall=("identity", (scale, bias), False)), [x])


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
    if execute is _EXECUTE:
        out = _move(_CAST, x, dtype)
        if out is not None:
            return out
        out = _new(_CAST, x, (dtype,))
        if out is not None:
            return out
    return _cast(x, dtype)


def _cast(x: Any, dtype):
    """``cast`` past the C call cache (its own function: the closures
    below would give ``cast`` cells to make on every call)."""
    _checked("cast", (x,))
    dt = _contract.dtype_argument(dtype, "cast")
    if type(dtype).__module__ == "torch" and type(dtype) not in _MOVE_TYPES:
        _key_by_identity(type(dtype))          # a torch.dtype: the C call cache serves the next such call
    return _run(FamilyCall("cast", lambda t: CastOperatorDesc(t, TensorDesc(dt, t.sizes)),
                           key=family_cache.call_key("cast", dt), ccall=("cast", (dtype,), False)), [x])


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
    if execute is _EXECUTE:
        out = _move(_PAD, x, start_padding, end_padding, mode, value)
        if out is not None:
            return out
        out = _new(_PAD, x, (start_padding, end_padding, mode, value))
        if out is not None:
            return out
    return _pad(x, start_padding, end_padding, mode, value)


def _pad(x: Any, start_padding, end_padding, mode, value):
    """``pad`` past the C call cache (its own function: the closures
    below would give ``pad`` cells to make on every call)."""
    _checked("pad", (x,))
    start_padding, end_padding = _snapshot(start_padding), _snapshot(end_padding)
    m = _MODES.get(mode.lower()) if isinstance(mode, str) else (mode if isinstance(mode, PaddingMode) else None)
    if m is None:
        raise _contract.field_error("pad", "PaddingMode", f"be one of {', '.join(repr(k) for k in _MODES)} or a "
                                    f"PaddingMode (mode)", mode)

    def make(t):
        return Padding1OperatorDesc(t, None, m, t.data_type, value, _per_axis(start_padding, t.rank),
                                    _per_axis(end_padding, t.rank))
    return _run(FamilyCall("pad", make, key=family_cache.call_key("pad", start_padding, end_padding, m, value),
                           ccall=("pad", (start_padding, end_padding, mode, value), False)), [x])


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
    if execute is _EXECUTE:
        out = _move(_JOIN, arrays, axis)
        if out is not None:
            return out
        out = _new(_JOIN, arrays, (axis,))
        if out is not None:
            return out
    return _join(arrays, axis)


def _join(arrays, axis):
    """``join`` past the C call cache (its own function: the closures
    below would give ``join`` cells to make on every call)."""
    arrays = _contract.array_sequence(arrays, "join")
    _checked("join", arrays, True)
    a = _contract.axis(axis, _contract.rank_of(arrays[0]), "join")
    return _run(FamilyCall("join", lambda *ts: JoinOperatorDesc(ts, None, a), key=family_cache.call_key("join", a),
                           ccall=("join", (axis,), True)), arrays)


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
    if execute is _EXECUTE:
        out = _move(_SPLIT, x, axis, sizes)
        if out is not None:
            return out
        out = _new(_SPLIT, x, (axis, sizes))
        if out is not None:
            return out
    return _split(x, axis, sizes)


def _split(x: Any, axis, sizes):
    """``split`` past the C call cache (its own function: the closures
    below would give ``split`` cells to make on every call)."""
    _checked("split", (x,))
    sizes = _snapshot(sizes)
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
    return _run(FamilyCall("split", make, multi=True, key=family_cache.call_key("split", a, sizes),
                           ccall=("split", (axis, sizes), False)), [x])


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
    if execute is _EXECUTE:
        out = _move(_TILE, x, repeats)
        if out is not None:
            return out
        out = _new(_TILE, x, (repeats,))
        if out is not None:
            return out
    return _tile(x, repeats)


def _tile(x: Any, repeats):
    """``tile`` past the C call cache (its own function: the closures
    below would give ``tile`` cells to make on every call)."""
    _checked("tile", (x,))
    repeats = _snapshot(repeats)
    return _run(FamilyCall("tile", lambda t: TileOperatorDesc(t, None, _repeats(repeats, t.rank)),
                           key=family_cache.call_key("tile", repeats), ccall=("tile", (repeats,), False)), [x])


def _order(order, where: str) -> DepthSpaceOrder:
    if isinstance(order, DepthSpaceOrder):
        return order
    o = _ORDERS.get(order.upper()) if isinstance(order, str) else None
    if o is None:
        raise _contract.field_error(where, "Order", "be 'DCR' (DEPTH_COLUMN_ROW), 'CRD' (COLUMN_ROW_DEPTH) or a "
                                    "DepthSpaceOrder (order)", order)
    return o


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
    if execute is _EXECUTE:
        out = _move(_SPACE_TO_DEPTH, x, block_size, order)
        if out is not None:
            return out
        out = _new(_SPACE_TO_DEPTH, x, (block_size, order))
        if out is not None:
            return out
    return _space_to_depth(x, block_size, order)


def _space_to_depth(x: Any, block_size, order):
    """``space_to_depth`` past the C call cache (its own function: the closures
    below would give ``space_to_depth`` cells to make on every call)."""
    _checked("space_to_depth", (x,))
    o = _order(order, "space_to_depth")
    return _run(FamilyCall("space_to_depth", lambda t: SpaceToDepth1OperatorDesc(t, None, block_size, o),
                           key=family_cache.call_key("space_to_depth", block_size, o),
                           ccall=("space_to_depth", (block_size, order), False)), [x])


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
    if execute is _EXECUTE:
        out = _move(_DEPTH_TO_SPACE, x, block_size, order)
        if out is not None:
            return out
        out = _new(_DEPTH_TO_SPACE, x, (block_size, order))
        if out is not None:
            return out
    return _depth_to_space(x, block_size, order)


def _depth_to_space(x: Any, block_size, order):
    """``depth_to_space`` past the C call cache (its own function: the closures
    below would give ``depth_to_space`` cells to make on every call)."""
    _checked("depth_to_space", (x,))
    o = _order(order, "depth_to_space")
    return _run(FamilyCall("depth_to_space", lambda t: DepthToSpace1OperatorDesc(t, None, block_size, o),
                           key=family_cache.call_key("depth_to_space", block_size, o),
                           ccall=("depth_to_space", (block_size, order), False)), [x])


class _AdjointApi:
    """The namespace the operator modules' ``adjoint`` methods are given
    (``opendml.ops._spec.AdjointApi``): the family's functions, SLICE1,
    SLICE_GRAD, UNFOLD and FOLD, on any framework, and two neutral helpers."""

    @staticmethod
    def slice1(x, offsets, sizes, strides, output_sizes=None):
        return _dispatch.front.slice1(x, offsets, sizes, strides, output_sizes)

    @staticmethod
    def slice_grad(g, input_sizes, offsets, sizes, strides):
        return _dispatch.front.slice_grad(g, input_sizes, offsets, sizes, strides)

    @staticmethod
    def unfold(x, window_sizes, strides, dilations, start_padding, end_padding):
        return _dispatch.front.unfold(x, window_sizes, strides, dilations, start_padding, end_padding)

    @staticmethod
    def fold(x, output_sizes, window_sizes, strides, dilations, start_padding, end_padding):
        return _dispatch.front.fold(x, output_sizes, window_sizes, strides, dilations, start_padding, end_padding)

    @staticmethod
    def reshape(x, shape):
        return x.reshape(tuple(int(n) for n in shape))

    @staticmethod
    def sum(x, axes):
        return x.sum(axis=tuple(axes))


for _name in __all__:                     # the family's functions, whatever they are
    setattr(_AdjointApi, _name, staticmethod(globals()[_name]))


#: What ``adjoint`` hands to the operator modules.
ADJOINT_API = _AdjointApi()

# torch.compile takes the family's functions into a graph whole (``_dispatch.enter_graph_whole``).
_dispatch.enter_graph_whole([globals()[_name] for _name in __all__])
