"""The array API's contract, in one place: what every array function checks before any framework's route runs, and
the one message each fault gets, whatever the operator and the framework:

* not an array (``not_an_array``), or JOIN's ``arrays`` not a non-empty sequence of arrays (``array_sequence``):
  ``ValidationError``;
* a dtype the operator does not take (none of DirectML's, or missing from the operator's support table at the newest
  feature level): ``UnsupportedError`` listing the table's types, for an array (``check_inputs``; the index
  operators' further arrays, ``Binding.others``, against their own tensor's types: ``check_others``) or a dtype
  argument (``dtype_argument``);
* a rank the table lacks, a dimension of size 0, more than UINT32 elements (a broadcast view) or unknown Dask chunk
  sizes: ``ValidationError``;
* a bad axis (``axis``), or a bad field: the description's own rule, or ``field_error``/``sizes_of`` where the
  function reads an argument itself, named as the descriptions name it (``<OPERATOR>: <field> must ...; got``; an
  output's sizes made from an argument then name it: `` (OutputTensor.Sizes = output_sizes)``).

The operator classes declare which operator a function builds (``BINDING``): ``OPERATOR_OF`` is read from
``opendml.ops.OPERATORS``. ``data_type`` is the one conversion of a dtype spelling (NumPy, PyTorch, JAX/ml_dtypes,
``DataType`` or a name) to a ``DataType``.
"""
from __future__ import annotations

import functools
import math
import sys

import numpy as np

from ..model._checks import NOT_NUMBERS, UINT32_MAX, _short, index_value, number
from ..model.data_type import ELEMENT_TYPES, DataType
from ..model.errors import UnsupportedError, ValidationError
from ..model.feature_level import FeatureLevel
from ..ops import OPERATORS
from ..ops._common import said_of
from ..ops._spec import binding_of, enum_member
from ._dispatch import FRAMEWORKS, READABLE, framework_of

__all__ = ["FRAMEWORKS", "ARRAYS", "DTYPE_NAMES", "OPERATOR_OF", "framework_of", "not_an_array", "array_sequence",
           "argument_of", "check_inputs", "check_input", "check_others", "data_type", "dtype_argument", "axis", "concrete",
           "field_error", "sizes_of", "supported_row"]

#: How the messages name what an array function takes.
ARRAYS = "a NumPy, CuPy, PyTorch, JAX or Dask array"

class _Bound(dict):
    """Array-API function name -> ``read(class, binding)``, read again for an operator registered later."""

    def __init__(self, read):
        super().__init__()
        self._read = read
        self._load()

    def _load(self):
        for cls in list(OPERATORS.values()):
            b = binding_of(cls)
            if b is not None:
                self[b.function] = self._read(cls, b)

    def __missing__(self, name):
        self._load()
        if name not in self.keys():
            raise KeyError(f"no operator of opendml.ops.OPERATORS declares the array function {name!r}")
        return self[name]


#: Array-API function name -> the operator class it builds (declared by the classes).
OPERATOR_OF: dict = _Bound(lambda cls, b: cls)

#: The feature level the array API validates at.
LEVEL = max(FeatureLevel)

#: DataType -> its lower-case name, in the order the messages list them (floats, signed, unsigned; by size).
DTYPE_NAMES = {t: t.name.lower() for t in sorted(ELEMENT_TYPES, key=lambda t: ("FIU".index(t.name[0]), t.size))}
_BY_NAME = {name: t for t, name in DTYPE_NAMES.items()}
#: (NumPy kind, itemsize) -> DataType: a NumPy dtype of any byte order.
_BY_KIND = {(np.dtype(name).kind, np.dtype(name).itemsize): t for t, name in DTYPE_NAMES.items()}


# -- arrays ----------------------------------------------------------------------------------------

def _type_name(x) -> str:
    t = type(x)
    return f"{t.__module__}.{t.__qualname__}"


def not_an_array(x, function: str, argument: str = "x") -> ValidationError:
    """The error for a non-array where ``function`` takes an array."""
    return ValidationError(f"{function}: {argument} must be {ARRAYS}; got {_type_name(x)}")


def array_sequence(arrays, function: str) -> tuple:
    """``arrays`` (a list or tuple of arrays, or another iterable that is not itself an array) read once as a tuple;
    a lone array of any framework (it would be taken as the list of its slices), a string, a mapping, a set, an
    empty sequence or a non-iterable is refused."""
    if type(arrays) is list or type(arrays) is tuple:
        items = tuple(arrays)
    elif (framework_of(arrays) is not None or isinstance(arrays, (str, bytes, dict, set, frozenset))
          or not hasattr(arrays, "__iter__")):
        items = None
    else:
        try:
            items = tuple(arrays)
        except Exception:                 # noqa: BLE001 - then it is not a sequence of arrays
            items = None
    if items is None:
        got = f"a {_type_name(arrays)}" if framework_of(arrays) is not None else _short(arrays)
        raise ValidationError(f"{function}: arrays must be a sequence of arrays (a list or tuple); got {got}"
                              + (" (a lone array: pass [x])" if framework_of(arrays) is not None else ""))
    if not items:
        raise ValidationError(f"{function}: arrays must be a non-empty sequence of arrays; got {_short(arrays)}")
    return items


# -- dtypes ----------------------------------------------------------------------------------------

def data_type(spelling):
    """The ``DataType`` of a dtype spelling: a ``DataType`` or its name (``"FLOAT32"``,
    ``"DML_TENSOR_DATA_TYPE_FLOAT32"``), anything ``numpy.dtype`` takes (JAX's dtypes included), a PyTorch dtype.
    None for a dtype with no DirectML type (bool, bfloat16...); ``TypeError`` for no dtype at all."""
    try:
        return _data_type(spelling)
    except (TypeError, ValueError):       # not hashable (a generic np.timedelta64: ValueError): read uncached (no
        return _data_type.__wrapped__(spelling)   # dtype: the same TypeError again)


# cached by the spelling and its type (typed): DataType.FLOAT32 == 1 and True == 1, but 1 is no dtype
@functools.lru_cache(maxsize=256, typed=True)
def _data_type(spelling):
    if isinstance(spelling, DataType):
        return spelling if spelling in DTYPE_NAMES else None
    t = type(spelling)
    if t.__module__ == "torch" and t.__name__ == "dtype":       # a PyTorch dtype, without importing PyTorch
        return _BY_NAME.get(str(spelling).removeprefix("torch."))
    if isinstance(spelling, str):
        name = spelling.strip().upper().removeprefix("DML_TENSOR_DATA_TYPE_")
        if name in DataType.__members__:
            return DataType[name] if DataType[name] in DTYPE_NAMES else None
        if spelling.startswith("torch."):
            torch = sys.modules.get("torch")
            if torch is not None and isinstance(getattr(torch, spelling[6:], None), torch.dtype):
                return _BY_NAME.get(spelling[6:])
    # np.dtype(None) is float64, and np.dtype reads a NumPy scalar (a number, bool, datetime, void) as its own type:
    # values are no dtypes; NumPy's strings are names
    if spelling is None or isinstance(spelling, (bool, int, float)) or (isinstance(spelling, np.generic) and
                                                                        not isinstance(spelling, (np.str_, np.bytes_))):
        raise TypeError(spelling)
    try:
        dt = np.dtype(spelling)
    except Exception:                     # noqa: BLE001 - numpy.dtype refuses it: no dtype
        raise TypeError(spelling) from None
    if dt.kind == "V" or dt.fields is not None or dt.subdtype is not None:
        return None                       # ml_dtypes' types (bfloat16, float8...), structured dtypes
    return _BY_KIND.get((dt.kind, dt.itemsize))


def supported_row(cls):
    """The support table row of ``cls`` at the array API's feature level."""
    return [r for r in cls.SUPPORT if r.level <= LEVEL][-1]


def _dtype_text(dtype) -> str:
    """A dtype as its framework writes it (``bool``, ``torch.bfloat16``, ``DataType.INT4``; a NumPy scalar type: its
    dtype's name)."""
    if isinstance(dtype, DataType):
        return f"DataType.{dtype.name}"
    if isinstance(dtype, str):
        return repr(dtype)
    if isinstance(dtype, type):
        try:
            return str(np.dtype(dtype))
        except Exception:                 # noqa: BLE001 - then its own name
            return dtype.__qualname__
    return str(dtype)


def type_list(types) -> str:
    """``types`` (DataTypes) by name, in the messages' order."""
    return ", ".join(n for t, n in DTYPE_NAMES.items() if t in types)


def possessive(argument: str) -> str:
    """``x's``, ``arrays[0]'s``; ``indices'``, ``updates'`` (a name ending in s)."""
    return argument + ("'" if argument.endswith("s") else "'s")


def dtype_error(function: str, what: str, dtype, cls, slot: str | None = None) -> UnsupportedError:
    """``slot``: the DirectML tensor whose types to name (an index tensor's own); None for the data types."""
    row = supported_row(cls)
    types = row.types if slot is None else row.types_of(slot)
    return UnsupportedError(f"{function}: {what} {_dtype_text(dtype)} is not supported by {cls.OPERATOR} at feature "
                            f"level {LEVEL.label} (supported: {type_list(types)})")


def dtype_argument(dtype, function: str):
    """A dtype argument as the ``DataType`` the operator's support table lists (``UnsupportedError`` naming them;
    ``ValidationError`` for no dtype)."""
    cls = OPERATOR_OF[function]
    # its int value (NumPy's ints as Python's): how torch.compile passes a member
    numpy_int = isinstance(dtype, np.integer) and not isinstance(dtype, NOT_NUMBERS)
    if (member := enum_member(DataType, int(dtype) if numpy_int else dtype)) is not None:
        dtype = member
    try:
        dt = data_type(dtype)
    except TypeError:
        raise ValidationError(f"{function}: dtype must be a NumPy, PyTorch or JAX dtype, or a DataType, its int "
                              f"value or its name; got {_short(dtype)}") from None
    if dt is None or dt not in supported_row(cls).types:
        raise dtype_error(function, "dtype", dtype, cls)
    return dt


# -- inputs ----------------------------------------------------------------------------------------

def rank_of(x) -> int:
    """``x.ndim``, else ``len(x.shape)`` (a nested PyTorch tensor raises on ``shape``)."""
    ndim = getattr(x, "ndim", None)
    return ndim if isinstance(ndim, int) else len(x.shape)


#: (function, dtype, rank) of inputs that passed ``check_inputs``.
_PASSED: set = set()

#: Array-API function name -> its ``Binding`` (the array's DirectML tensor, its other arrays).
BINDING: dict = _Bound(lambda cls, b: b)


def check_input(function: str, x, argument: str | None = None, slot: str | None = None) -> None:
    """``x``'s dtype and rank against the support table of the operator ``function`` builds, at the newest feature
    level: ``UnsupportedError`` for a dtype it does not take, ``ValidationError`` for a rank or sizes outside
    DirectML's (``_sizes_off``; of an array of any framework only ``dtype``, ``ndim`` (else ``len(shape)``) and
    ``size`` (else ``shape``) are read). ``slot``: the DirectML tensor of one of the further arrays
    (``check_others``), checked against its types, not ranks. A masked array is refused first, whatever passed."""
    if _MAY_BE_MASKED.get(type(x), True):
        _not_masked(function, x, argument or BINDING[function].array)
    try:
        key = (function, x.dtype, rank_of(x)) if slot is None else ("others", function, argument, x.dtype)
        if key in _PASSED and not _sizes_off(x):
            return
    except TypeError:                     # a dtype that cannot be hashed
        key = None
    _check_input(function, x, argument or BINDING[function].array, slot)
    if key is not None and len(_PASSED) < 1024:
        _PASSED.add(key)


@functools.lru_cache(maxsize=1024)
def argument_of(function: str, i: int) -> str:
    """How the messages name the ``i``-th array of a call of ``function``: its argument as the user spelt it (``x``,
    ``indices``, ``updates``, ``values``...; JOIN's ``arrays[i]``), ``arrays[i]`` where the function declares no such
    array (a function's binding never changes once bound: cached)."""
    try:
        binding = BINDING[function]
    except KeyError:
        return f"arrays[{i}]"
    names = [binding.array, *binding.others]
    return f"arrays[{i}]" if binding.array == "arrays" or i >= len(names) else names[i]


#: Array type -> whether an array of it may be masked (``_not_masked`` looks), for the types seen.
_MAY_BE_MASKED: dict = {np.ndarray: False}


def _not_masked(function: str, x, argument: str) -> None:
    """A masked array (NumPy's, or a Dask array of masked chunks: its ``_meta`` is one) refused by its name: its mask
    would be dropped. (Its dtype and rank are a plain array's, which ``_PASSED`` may hold.)"""
    kind = type(x)
    if kind not in _MAY_BE_MASKED and len(_MAY_BE_MASKED) < 256:
        _MAY_BE_MASKED[kind] = issubclass(kind, np.ma.MaskedArray) or hasattr(x, "_meta")
    if isinstance(x, np.ma.MaskedArray) or isinstance(getattr(x, "_meta", None), np.ma.MaskedArray):
        raise ValidationError(f"{function}: masked arrays are not supported ({argument} is one: its mask would be "
                              f"dropped); pass {argument}.filled(value) or {argument}.data")


def check_inputs(function: str, arrays) -> None:
    """``check_input`` for each array; entries of a sequence argument (JOIN's ``arrays``) are named ``arrays[i]``."""
    many = BINDING[function].array == "arrays"
    for i, x in enumerate(arrays):
        check_input(function, x, f"arrays[{i}]" if many else None)


def _check_input(function: str, x, argument: str, slot: str | None) -> None:
    first = slot is None                  # the first array (else one of ``Binding.others``: no rank rule)
    if first:
        readable = READABLE.get(framework_of(x))
        if readable is not None:          # an array its framework's adapter cannot read says so first
            readable(x, function, argument)
    cls = OPERATOR_OF[function]
    row = supported_row(cls)
    binding = BINDING[function]
    slot = slot or binding.slot
    try:
        dt = data_type(x.dtype)
    except TypeError:
        dt = None
    if dt is None or dt not in row.types_of(slot):
        raise dtype_error(function, f"{possessive(argument)} dtype", x.dtype, cls, slot)
    ranks = row.ranks
    if binding.added_axes:                # ONE_HOT's indices: the output has a dimension more
        ranks = range(max(0, ranks.start - binding.added_axes), ranks.stop - binding.added_axes)
    if first and (rank := rank_of(x)) not in ranks:
        want = str(ranks.start) if len(ranks) == 1 else f"{ranks.start} to {ranks.stop - 1}"
        shape = [int(n) if n == n else n for n in x.shape]      # (a Dask array's unknown sizes: nan)
        raise ValidationError(f"{function}: {argument} must have {want} dimensions for {cls.OPERATOR}; got {rank} "
                              f"(shape {shape})")
    if not _sizes_off(x):
        return
    if any(n != n for n in x.shape):      # before anything reads the sizes (the index functions' makers do)
        raise ValidationError(f"{function}: the chunk sizes of {argument} are unknown (NaN); call "
                              f"{argument}.compute_chunk_sizes() first")
    shape = [int(n) for n in x.shape]
    if 0 in shape:
        raise ValidationError(f"{function}: {argument} must have no dimension of size 0 (DirectML's tensor sizes "
                              f"are >= 1); got shape {shape}")
    if math.prod(shape) > UINT32_MAX:
        raise ValidationError(f"{function}: {argument} must have at most {UINT32_MAX} elements (DirectML's tensor "
                              f"element count is a UINT32); got {math.prod(shape)} (shape {shape})")


def _sizes_off(x) -> bool:
    """Whether ``x``'s shape is outside DirectML's tensor sizes: a dimension of size 0, more than UINT32 elements (a
    broadcast view can be that large in a few bytes), or unknown (a Dask array of unknown chunks: NaN; a nested
    PyTorch tensor, whose shape cannot be read)."""
    try:
        n = x.size                        # NumPy, CuPy, JAX: the element count (PyTorch: a method)
        if type(n) is not int:
            n = math.prod(x.shape)
            if getattr(n, "ndim", None) == 0:     # sizes torch.jit.trace records (0-d tensors): no truth value
                return False                      # read here (a TracerWarning); the route checks them, paused
        return n == 0 or n > UINT32_MAX or n != n
    except Exception:  # noqa: BLE001 - a shape that cannot be read or compared: checked in full (READABLE names it)
        return True


def check_others(function: str, **arrays) -> None:
    """The array arguments besides the first (``Binding.others``): each an array of a framework the API takes, of a
    type its tensor's row lists."""
    for argument, x in arrays.items():
        kind = framework_of(x)
        if kind is None:
            raise not_an_array(x, function, argument)
        readable = READABLE.get(kind)
        if readable is not None:
            readable(x, function, argument)
        check_input(function, x, argument, BINDING[function].others[argument][0])


# -- arguments -------------------------------------------------------------------------------------

def axis(value, rank: int, function: str) -> int:
    """``value`` as DirectML's UINT Axis for arrays of ``rank`` dimensions: negative values count from the end."""
    if isinstance(value, bool):
        raise ValidationError(f"{function}: axis must be an integer; got {value!r}")
    try:
        a = index_value(value)
    except Exception:  # noqa: BLE001 - no int value (as_int's reason)
        raise ValidationError(f"{function}: axis must be an integer; got {_short(value)}") from None
    if not -rank <= a < rank:
        raise ValidationError(f"{function}: axis must be in [{-rank}, {rank - 1}] for arrays of {rank} dimensions; "
                              f"got {number(a)}")
    return a % rank


#: PyTorch's symbolic scalars by type name (``torch.compile(dynamic=True)`` passes a compiled function's
#: int, float and bool arguments on as them), each with the type whose value it reads as.
_SYMBOLIC = {"SymInt": int, "SymFloat": float, "SymBool": bool}


def torch_compiling(torch) -> bool:
    """Whether this thread runs ``torch.compile`` (``torch``: the module): Dynamo's trace, or a traced call's real run
    on its fake tensors (``torch.compiler.is_compiling()`` alone is process-wide: another thread's compile sets it)."""
    return torch.compiler.is_compiling() and (torch.compiler.is_dynamo_compiling() or
                                              torch._guards.TracingContext.try_get() is not None)


#: PyTorch's fake tensors by type name: Dynamo passes a NumPy scalar (``np.int64(1)`` as an axis,
#: ``np.float32(0.5)`` as a scale) on as a 0-d one, whose value a constant's fake tensor holds.
_FAKE = {"FakeTensor": "torch._subclasses.fake_tensor", "FunctionalTensor": "torch._subclasses.functional_tensor"}


def _value(v):
    """``v``'s value where it is a symbolic scalar (``_SYMBOLIC``) or a 0-d fake tensor that holds one (a
    NumPy scalar under Dynamo; a graph input's holds none: left as it is), else ``v``."""
    kind = type(v)
    if kind.__name__ in _SYMBOLIC and kind.__module__ == "torch":
        return _SYMBOLIC[kind.__name__](v)
    if _FAKE.get(kind.__name__) == kind.__module__ and v.dim() == 0:
        try:
            return v.item()
        except Exception:   # noqa: BLE001 - PyTorch's data-dependent errors: no value to read
            return v
    return v


def _read(v):
    """``_value`` of an argument, or of each entry of a list or tuple argument (Dynamo passes a list on as
    its own ``immutable_list``): a new list or tuple where an entry changed, else ``v``."""
    if type(v) in (list, tuple) or type(v).__module__ == "torch.fx.immutable_collections":
        read = [_value(e) for e in v]
        if any(r is not e for r, e in zip(read, v)):
            return tuple(read) if isinstance(v, tuple) else read
        return v
    return _value(v)


def concrete(args: tuple) -> tuple:
    """``args`` with each symbolic scalar, alone or an entry of a list or tuple argument, as its value; ``args``
    itself where none is. Every such argument fixes the description (a size, an axis, a window, a scale), so its
    value is read, which guards on it: the tracer compiles again for another value, as for PyTorch's own operators'
    int arguments. The values then get an eager call's checks and messages, and the call cache's keys and an
    argument's text form see plain ints, floats and bools."""
    read = tuple(_read(v) for v in args)
    return args if all(r is v for r, v in zip(read, args)) else read


def field_error(function: str, field: str, rule: str, value) -> ValidationError:
    """A bad field the array function reads itself, as descriptions word it: ``<OPERATOR>: <field> must <rule>; got
    <value>``."""
    return ValidationError(f"{OPERATOR_OF[function].OPERATOR}: {field} must {rule}; got {_short(value)}")


def sizes_of(function: str, slot: str, make, rule: str = "", like: tuple | None = None):
    """``make()``, its ``TensorDesc: Sizes[3] ...`` errors named ``<OPERATOR>: <slot>.Sizes[3] ...``, then, given
    ``rule`` (the arguments the sizes come from, as the user spelt them), `` (<slot>.Sizes = <rule>)``, as a derived
    output's errors name their origin. ``like``: ``(its DirectML name, a tensor)`` whose DimensionCount the made one
    must have (the description's rule, said here with ``rule``)."""
    where = f" ({slot}.Sizes = {rule})" if rule else ""
    try:
        t = make()
    except ValidationError as e:
        raise ValidationError(f"{OPERATOR_OF[function].OPERATOR}: {said_of(e, slot, where)}") from None
    if like is not None and t.rank != like[1].rank:
        raise ValidationError(f"{OPERATOR_OF[function].OPERATOR}: {slot}.DimensionCount must equal {like[0]}."
                              f"DimensionCount; got {t.rank} != {like[1].rank}{where}")
    return t
