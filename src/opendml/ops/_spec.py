"""What an operator declares about its DirectML struct: tensor slots and typed fields in the struct's order
(``DirectML.h``), and the DirectML enums the data-movement family uses.

Each slot or field knows its DirectML (JSON) name, its attribute, and its JSON reading and writing, so ``jsonform``, the
command line, ``Device`` and the DxDispatch runner loop over declarations and name no operator. Value rules (ranges,
lengths, types per feature level) are the operator modules', whose messages name the operator; the kinds check only the
JSON shape (an integer, an array of integers, a known enum name...) and raise ``JsonFormError``-style messages, naming
the JSON path, through the ``fail`` callable they are given.
"""
from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from ..model._checks import NOT_NUMBERS, _short, index_value, json_text, type_name
from ..model.data_type import ELEMENT_TYPES, DataType
from ..model.errors import ValidationError

#: DML_OPERATOR_TYPE in DirectML.h order (the index is the enum value, an operator's ``TYPE_VALUE``; 0 is
#: DML_OPERATOR_INVALID), through DML_TARGET_VERSION 0x6400, without the ``DML_OPERATOR_`` prefix. ``SCATTER`` is an
#: alias of SCATTER_ELEMENTS (``ops.ALIASES``).
OPERATOR_TYPES: tuple[str, ...] = tuple("""
INVALID ELEMENT_WISE_IDENTITY ELEMENT_WISE_ABS ELEMENT_WISE_ACOS ELEMENT_WISE_ADD ELEMENT_WISE_ASIN
ELEMENT_WISE_ATAN ELEMENT_WISE_CEIL ELEMENT_WISE_CLIP ELEMENT_WISE_COS ELEMENT_WISE_DIVIDE ELEMENT_WISE_EXP
ELEMENT_WISE_FLOOR ELEMENT_WISE_LOG ELEMENT_WISE_LOGICAL_AND ELEMENT_WISE_LOGICAL_EQUALS
ELEMENT_WISE_LOGICAL_GREATER_THAN ELEMENT_WISE_LOGICAL_LESS_THAN ELEMENT_WISE_LOGICAL_NOT ELEMENT_WISE_LOGICAL_OR
ELEMENT_WISE_LOGICAL_XOR ELEMENT_WISE_MAX ELEMENT_WISE_MEAN ELEMENT_WISE_MIN ELEMENT_WISE_MULTIPLY ELEMENT_WISE_POW
ELEMENT_WISE_CONSTANT_POW ELEMENT_WISE_RECIP ELEMENT_WISE_SIN ELEMENT_WISE_SQRT ELEMENT_WISE_SUBTRACT
ELEMENT_WISE_TAN ELEMENT_WISE_THRESHOLD ELEMENT_WISE_QUANTIZE_LINEAR ELEMENT_WISE_DEQUANTIZE_LINEAR ACTIVATION_ELU
ACTIVATION_HARDMAX ACTIVATION_HARD_SIGMOID ACTIVATION_IDENTITY ACTIVATION_LEAKY_RELU ACTIVATION_LINEAR
ACTIVATION_LOG_SOFTMAX ACTIVATION_PARAMETERIZED_RELU ACTIVATION_PARAMETRIC_SOFTPLUS ACTIVATION_RELU
ACTIVATION_SCALED_ELU ACTIVATION_SCALED_TANH ACTIVATION_SIGMOID ACTIVATION_SOFTMAX ACTIVATION_SOFTPLUS
ACTIVATION_SOFTSIGN ACTIVATION_TANH ACTIVATION_THRESHOLDED_RELU CONVOLUTION GEMM REDUCE AVERAGE_POOLING LP_POOLING
MAX_POOLING ROI_POOLING SLICE CAST SPLIT JOIN PADDING VALUE_SCALE_2D UPSAMPLE_2D GATHER SPACE_TO_DEPTH
DEPTH_TO_SPACE TILE TOP_K BATCH_NORMALIZATION MEAN_VARIANCE_NORMALIZATION LOCAL_RESPONSE_NORMALIZATION
LP_NORMALIZATION RNN LSTM GRU
ELEMENT_WISE_SIGN ELEMENT_WISE_IS_NAN ELEMENT_WISE_ERF ELEMENT_WISE_SINH ELEMENT_WISE_COSH ELEMENT_WISE_TANH
ELEMENT_WISE_ASINH ELEMENT_WISE_ACOSH ELEMENT_WISE_ATANH ELEMENT_WISE_IF ELEMENT_WISE_ADD1 ACTIVATION_SHRINK
MAX_POOLING1 MAX_UNPOOLING DIAGONAL_MATRIX SCATTER_ELEMENTS ONE_HOT RESAMPLE
ELEMENT_WISE_BIT_SHIFT_LEFT ELEMENT_WISE_BIT_SHIFT_RIGHT ELEMENT_WISE_ROUND ELEMENT_WISE_IS_INFINITY
ELEMENT_WISE_MODULUS_TRUNCATE ELEMENT_WISE_MODULUS_FLOOR FILL_VALUE_CONSTANT FILL_VALUE_SEQUENCE
CUMULATIVE_SUMMATION REVERSE_SUBSEQUENCES GATHER_ELEMENTS GATHER_ND SCATTER_ND MAX_POOLING2 SLICE1 TOP_K1
DEPTH_TO_SPACE1 SPACE_TO_DEPTH1 MEAN_VARIANCE_NORMALIZATION1 RESAMPLE1 MATRIX_MULTIPLY_INTEGER
QUANTIZED_LINEAR_MATRIX_MULTIPLY CONVOLUTION_INTEGER QUANTIZED_LINEAR_CONVOLUTION
ELEMENT_WISE_BIT_AND ELEMENT_WISE_BIT_OR ELEMENT_WISE_BIT_XOR ELEMENT_WISE_BIT_NOT ELEMENT_WISE_BIT_COUNT
ELEMENT_WISE_LOGICAL_GREATER_THAN_OR_EQUAL ELEMENT_WISE_LOGICAL_LESS_THAN_OR_EQUAL ACTIVATION_CELU
ACTIVATION_RELU_GRAD AVERAGE_POOLING_GRAD MAX_POOLING_GRAD RANDOM_GENERATOR NONZERO_COORDINATES RESAMPLE_GRAD
SLICE_GRAD ADAM_OPTIMIZER ARGMIN ARGMAX ROI_ALIGN GATHER_ND1
ELEMENT_WISE_ATAN_YX ELEMENT_WISE_CLIP_GRAD ELEMENT_WISE_DIFFERENCE_SQUARE LOCAL_RESPONSE_NORMALIZATION_GRAD
CUMULATIVE_PRODUCT BATCH_NORMALIZATION_GRAD
ELEMENT_WISE_QUANTIZED_LINEAR_ADD DYNAMIC_QUANTIZE_LINEAR ROI_ALIGN1
ROI_ALIGN_GRAD BATCH_NORMALIZATION_TRAINING BATCH_NORMALIZATION_TRAINING_GRAD
ELEMENT_WISE_CLIP1 ELEMENT_WISE_CLIP_GRAD1 PADDING1 ELEMENT_WISE_NEGATE
ACTIVATION_GELU ACTIVATION_SOFTMAX1 ACTIVATION_LOG_SOFTMAX1 ACTIVATION_HARDMAX1 RESAMPLE2 RESAMPLE_GRAD1
DIAGONAL_MATRIX1
MULTIHEAD_ATTENTION
LP_POOLING1 AVERAGE_POOLING1 ACTIVATION_SWISH ACTIVATION_HARD_SWISH QUANTIZED_LINEAR_AVERAGE_POOLING
MATRIX_MULTIPLY_INTEGER_TO_FLOAT
MEAN_VARIANCE_NORMALIZATION2 MULTIHEAD_ATTENTION1 QUANTIZE DEQUANTIZE
RESAMPLE3 FOLD UNFOLD
""".split())

#: A field's ``default`` when the JSON form must give it.
REQUIRED: Any = type("REQUIRED", (), {"__repr__": lambda self: "REQUIRED"})()
#: What ``to_json`` returns for a value the JSON form leaves out (an absent optional struct).
OMIT: Any = type("OMIT", (), {"__repr__": lambda self: "OMIT"})()


class PaddingMode(enum.IntEnum):
    """DML_PADDING_MODE (DirectML.h): SYMMETRIC from feature level 3_0, WRAP from 6_4."""
    CONSTANT = 0
    EDGE = 1
    REFLECTION = 2
    SYMMETRIC = 3
    WRAP = 4


class DepthSpaceOrder(enum.IntEnum):
    """DML_DEPTH_SPACE_ORDER (DirectML.h, feature level 2_1)."""
    DEPTH_COLUMN_ROW = 0
    COLUMN_ROW_DEPTH = 1


def enum_member(cls, value):
    """``value`` as a member of the enum ``cls``: a member, or an exact int that is one's value (a traced
    ``torch.compile`` call gets an ``IntEnum`` argument as its int); else None."""
    if isinstance(value, cls):
        return value
    if type(value) is int and value in cls._value2member_map_:
        return cls(value)
    return None


#: The prefix DirectML's C names put before each enum's members.
ENUM_PREFIXES = {PaddingMode: "DML_PADDING_MODE_", DepthSpaceOrder: "DML_DEPTH_SPACE_ORDER_",
                 DataType: "DML_TENSOR_DATA_TYPE_"}


@dataclasses.dataclass(frozen=True)
class ScaleBias:
    """DML_SCALE_BIAS: ``g(x) = x * Scale + Bias`` (two FLOATs)."""
    scale: float = 1.0
    bias: float = 0.0


@dataclasses.dataclass(frozen=True)
class Tensor:
    """A tensor slot of an operator struct: ``json`` its DirectML name (``InputTensor``, ``InputTensors``,
    ``OutputGradientTensor``...), ``attr`` the description's attribute, ``role`` ``"input"`` or ``"output"``,
    ``many`` for an array of tensors (JOIN's ``InputTensors``, SPLIT's ``OutputTensors``: the attribute holds a
    tuple), ``optional`` where the description may leave it None (an output of derived sizes)."""
    json: str
    attr: str
    role: str = "input"
    many: bool = False
    optional: bool = False

    def __post_init__(self):
        if self.role not in ("input", "output"):
            raise ValueError(f"Tensor {self.json}: role must be 'input' or 'output'; got {self.role!r}")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


Fail = Callable[[str], Exception]

#: The largest finite double, for messages.
DOUBLE_MAX = float.fromhex("0x1.fffffffffffffp+1023")


def to_float(value, name: str, fail: Fail = ValidationError) -> float:
    """A FLOAT field's value (``name``: the field, as messages name it) as a Python float: an integer or float of
    Python or NumPy (bool refused). An integer beyond the double range (``10**400``), or a finite NumPy long double
    beyond it (``np.longdouble("1e4000")``, which ``float`` makes infinite), is refused by ``fail(message)`` (by default
    a ``ValidationError``) naming the field and the value, never ``OverflowError``. NaN and the infinities given as
    floats are FLOAT values and pass through."""
    if isinstance(value, NOT_NUMBERS) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise fail(f"{name} must be a number; got {_short(value)}")
    try:
        f = float(value)
        if math.isinf(f) and isinstance(value, np.floating) and np.isfinite(value):
            raise OverflowError
        return f
    except OverflowError:
        raise fail(f"{name} must be a number within the double range (magnitude at most {DOUBLE_MAX:g}); "
                   f"got {_short(value)}") from None


@dataclasses.dataclass(frozen=True)
class FieldKind:
    """Base of the field kinds: ``json`` DirectML's name, ``attr`` the description's attribute, ``default`` the value
    where the JSON form leaves it out (``REQUIRED``: it must be given; a callable: computed from the values parsed so
    far, a dict of JSON name -> value of the input tensors and the earlier fields)."""
    json: str
    attr: str
    default: Any = dataclasses.field(default=REQUIRED, kw_only=True)

    kind = "?"
    #: The plain kinds' JSON rule: what a value must be, for the message, and ``accepts(value)``, its test (a
    #: staticmethod of each such kind).
    expects = "?"

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def default_value(self, parsed: dict):
        return self.default(parsed) if callable(self.default) else self.default

    def from_json(self, value, path: str, parsed: dict, fail: Fail):
        if not self.accepts(value):
            raise fail(f"{path}: must be {self.expects}; got {json_text(value)[:80]}")
        return self.convert(value, path, fail)

    def convert(self, value, path: str, fail: Fail):
        """An accepted JSON value as the description holds it."""
        return value

    def to_json(self, value):
        return value


@dataclasses.dataclass(frozen=True)
class Field(FieldKind):
    """An array of integers (``UINT*``/``INT*`` with a count field): ``fill`` is every entry's value when the JSON form
    leaves the field out (None: required), one per entry of the operator's first integer-array field."""
    fill: int | None = None

    kind, expects = "int[]", "an array of integers"
    accepts = staticmethod(lambda v: isinstance(v, list) and all(_is_int(x) for x in v))

    def __post_init__(self):
        if self.fill is not None and self.default is REQUIRED:
            object.__setattr__(self, "default", None)   # filled per dimension by the reader

    def convert(self, value, path, fail):
        return list(value)

    def to_json(self, value):
        return list(value)


IntArray = Field


@dataclasses.dataclass(frozen=True)
class UInt(FieldKind):
    """A ``UINT`` (JOIN's and SPLIT's ``Axis``, SPACE_TO_DEPTH's ``BlockSize``)."""
    kind, expects, accepts = "uint", "an integer", staticmethod(_is_int)


@dataclasses.dataclass(frozen=True)
class Int(UInt):
    """An ``INT``."""
    kind = "int"


@dataclasses.dataclass(frozen=True)
class Float(FieldKind):
    """A ``FLOAT`` (PADDING's ``PaddingValue``): any JSON number."""
    kind, expects, accepts = "float", "a number", staticmethod(_is_number)

    def convert(self, value, path, fail):
        return to_float(value, f"{path}:", fail)


@dataclasses.dataclass(frozen=True)
class Bool(FieldKind):
    """A ``BOOL`` or a flag: JSON true/false (or 0/1)."""
    kind, expects = "bool", "true or false"
    accepts = staticmethod(lambda v: isinstance(v, bool) or v in (0, 1))

    def convert(self, value, path, fail):
        return bool(value)


@dataclasses.dataclass(frozen=True)
class Enum(FieldKind):
    """A DirectML enum (``DML_PADDING_MODE``, ``DML_DEPTH_SPACE_ORDER``, ``DML_TENSOR_DATA_TYPE``): JSON gives a
    member's integer value or name, short (``"REFLECTION"``) or DirectML's (``"DML_PADDING_MODE_REFLECTION"``); the
    JSON form writes the short name."""
    enum: type = None  # type: ignore[assignment]

    kind = "enum"

    def from_json(self, value, path, parsed, fail):
        prefix = ENUM_PREFIXES.get(self.enum, "")
        if isinstance(value, str):
            name = value.strip().upper().removeprefix(prefix)
            if name in self.enum.__members__:
                return self.enum[name]
        elif _is_int(value):
            try:
                return self.enum(value)
            except ValueError:
                pass
        names = ", ".join(m.name for m in self.enum if self.enum is not DataType or m in ELEMENT_TYPES)
        raise fail(f"{path}: unknown {prefix.rstrip('_') or self.enum.__name__} {json_text(value)[:80]}; "
                   f"expected one of {names}")

    def to_json(self, value):
        return self.enum(value).name


#: DML_SCALAR_UNION's member names, by the data type that selects them.
SCALAR_MEMBERS = {DataType.INT8: "Int8", DataType.UINT8: "UInt8", DataType.INT16: "Int16",
                  DataType.UINT16: "UInt16", DataType.INT32: "Int32", DataType.UINT32: "UInt32",
                  DataType.INT64: "Int64", DataType.UINT64: "UInt64", DataType.FLOAT32: "Float32",
                  DataType.FLOAT64: "Float64", DataType.FLOAT16: "Float32"}


@dataclasses.dataclass(frozen=True)
class ScalarUnion(FieldKind):
    """A ``DML_SCALAR_UNION`` whose member the sibling field ``type_field`` chooses (a ``DML_TENSOR_DATA_TYPE``
    declared before it: PADDING1's ``PaddingValueDataType``/``PaddingValue``). JSON gives a number, or an object
    naming the member (``{"Float32": 9}``, ``{"Int64": -1}``); integer types take integers. The description holds a
    Python int or float, its range the operator's rule."""
    type_field: str = ""

    kind = "scalar"

    def from_json(self, value, path, parsed, fail):
        dt = parsed.get(self.type_field)
        if isinstance(value, dict):
            if len(value) != 1:
                raise fail(f"{path}: a DML_SCALAR_UNION object names one member (such as {{\"Float32\": 9}}); "
                           f"got {len(value)} members")
            (member, value), = value.items()
            want = SCALAR_MEMBERS.get(dt)
            if member != want and not (dt == DataType.FLOAT16 and member == "Float16"):
                raise fail(f"{path}.{member}: the member must match {self.type_field} "
                           f"{dt.name if dt is not None else None} ({want}); got {member}")
            path = f"{path}.{member}"
        if dt is not None and dt.numpy_dtype.kind in "iu":
            if isinstance(value, float) and math.isfinite(value) and value == math.floor(value):
                value = int(value)
            if not _is_int(value):
                raise fail(f"{path}: must be an integer for {self.type_field} {dt.name}; "
                           f"got {json_text(value)[:80]}")
            return value
        if not _is_number(value):
            raise fail(f"{path}: must be a number; got {json_text(value)[:80]}")
        return to_float(value, f"{path}:", fail)


def input_type(parsed: dict):
    """The default of a ``DML_TENSOR_DATA_TYPE`` field the JSON form leaves out (PADDING1's ``PaddingValueDataType``,
    DIAGONAL_MATRIX1's ``ValueDataType``): the input's type, or None without an input (the output's then)."""
    return getattr(parsed.get("InputTensor"), "data_type", None)


@dataclasses.dataclass(frozen=True)
class Struct(FieldKind):
    """A pointer to a struct, ``_Maybenull_`` where ``default`` is None (IDENTITY's ``DML_SCALE_BIAS* ScaleBias``):
    JSON gives null or an object of the struct's members (``{"Scale": 2, "Bias": 1}``), each a FLOAT. ``members``
    pairs each DirectML member name with the struct class's attribute."""
    struct: type = ScaleBias
    members: tuple[tuple[str, str], ...] = (("Scale", "scale"), ("Bias", "bias"))

    kind = "struct"

    def from_json(self, value, path, parsed, fail):
        if value is None and self.default is None:
            return None
        if not isinstance(value, dict):
            raise fail(f"{path}: must be an object with {', '.join(m for m, _ in self.members)}"
                       f"{' or null' if self.default is None else ''}; got {type_name(value)}")
        names = [m for m, _ in self.members]
        for k in value:
            if k not in names:
                raise fail(f"{path}.{k}: unknown field; expected one of {', '.join(names)}")
        kw = {}
        for m, a in self.members:
            if m not in value:
                raise fail(f"{path}.{m}: missing required field")
            if not _is_number(value[m]):
                raise fail(f"{path}.{m}: must be a number; got {json_text(value[m])[:80]}")
            kw[a] = to_float(value[m], f"{path}.{m}:", fail)
        return self.struct(**kw)

    def to_json(self, value):
        if value is None:
            return OMIT
        return {m: getattr(value, a) for m, a in self.members}


@dataclasses.dataclass(frozen=True)
class Binding:
    """The array-API function building an operator's description, declared by the class as ``BINDING`` (none where a
    newer operator takes its place in the array API, as PADDING1 takes PADDING's).

    ``function``: its name (``"pad"``); ``inputs``/``args``: the input shapes and other arguments of a small valid call
    (for the documentation and the contract tests); ``array``: the array argument's name (``"x"``; ``"arrays"``: JOIN's
    sequence); ``slot``: the DirectML tensor it becomes; ``others``: further array arguments, ``name -> (DirectML
    tensor, example values, example dtype)``; ``added_axes``: the tensors' dimensions beyond the array argument's
    (ONE_HOT's); ``optional``: the array may be left out (a generator, given ``api.no_array``).

    ``arrays.front`` generates the function from the rest: ``params`` (after the array, as a ``def`` writes them; None:
    written elsewhere), ``doc`` (summary and the other parameters' entries), ``shape``, ``returns``, ``rules`` (what its
    ``ValidationError`` names; the index check's error is added where ``params`` has ``check_indices``) and ``route``
    (``"move"``, ``"plan"`` or ``"index"``). The class's ``arguments(api, x, *args)`` (``api``:
    ``arrays.front.ARGUMENT_API``) makes the description. ``members``: the parameters read as an enum member (a mode, an
    order, a dtype), which must reach ``arguments`` as members under ``torch.compile`` too (Dynamo passes a function it
    traces whole an ``IntEnum`` member as its int)."""
    function: str
    inputs: tuple
    args: dict = dataclasses.field(default_factory=dict)
    array: str = "x"
    slot: str = "InputTensor"
    others: dict = dataclasses.field(default_factory=dict)
    added_axes: int = 0
    optional: bool = False
    params: str | None = None
    doc: str = ""
    shape: str = ""
    returns: str = ""
    rules: str = ""
    route: str = "move"
    members: tuple = ()


def scalar_int(value) -> int | None:
    """``value`` as an int where one is given for a sequence: a Python or NumPy integer (no bool), or a 0-d array
    whose entry ``as_int`` reads as one (NumPy, PyTorch...); else None."""
    if isinstance(value, (int, np.integer)):
        return None if isinstance(value, NOT_NUMBERS) else int(value)
    if getattr(value, "ndim", None) == 0:
        try:
            return index_value(value)
        except Exception:  # noqa: BLE001 - no int value (as_int's reason): as_int names it
            return None
    return None


def spread(value, rank: int):
    """An int applies to each of ``rank`` axes; anything else goes to the
    description as given (which names what is wrong with it)."""
    n = value if type(value) is int else scalar_int(value)
    return value if n is None else (n,) * rank


def per_axis(value, d: int):
    """A scalar applies to each of ``d`` spatial axes (at least one); a sequence is kept."""
    return spread(value, max(d, 1))


def binding_of(cls) -> "Binding | None":
    """The ``Binding`` declared by ``cls`` itself (not inherited), or None."""
    return cls.__dict__.get("BINDING")


def snake(name: str) -> str:
    """``InputGradientTensor`` -> ``input_gradient_tensor`` (a run of capitals stays one word)."""
    return re.sub(r"(?<=[^A-Z])(?=[A-Z])", "_", name).lower()


# -- differentiation and chunking: what an operator declares beside its lowering -----
#
# Read by the framework adapters, with no branch per operator:
#
# * ``linear_part()``: the description without its constant term (IDENTITY's Bias, a constant PADDING's value), or None
#   where its types are not differentiated. Forward-mode AD applies it to the tangents.
# * ``adjoint(api, *cotangents)``: the adjoint of ``linear_part()``, one array per input, written with ``api``'s opendml
#   operators (``opendml.arrays.engine.ADJOINT_API``: the array API's functions, ``reshape(x, shape)`` and ``sum(x,
#   axes)``, handed down since the operator modules never import the array layer), so a second derivative takes the same
#   routes.
# * ``ADJOINT_INPUTS`` (optional): input positions (index tensors) whose values the adjoint reads, passed after the
#   cotangents; they get no gradient.
# * ``chunking()`` (Dask): ``{input axis: 0 or m}``, the axes a block-wise run (the operator on each block) needs whole
#   (0) or cut at multiples of m; none: whole arrays. Overlapping or scattering blocks name a kind instead, each with
#   one graph builder reading the description: ``GATHER`` (a strided lattice of the input, ``gather_axes()``: SLICE,
#   SLICE1), ``SCATTER`` (zeros with the input on such a lattice, ``scatter_axes()``: SLICE_GRAD), ``WINDOWS`` (sliding
#   windows with a halo: UNFOLD), ``WINDOW_SUMS`` (their sums back into an image: FOLD).

GATHER, SCATTER, WINDOWS, WINDOW_SUMS = "gather", "scatter", "windows", "window_sums"

FLOAT_TYPES = frozenset({DataType.FLOAT16, DataType.FLOAT32, DataType.FLOAT64})
#: Whether a DataType is FLOAT16, FLOAT32 or FLOAT64.
is_float = FLOAT_TYPES.__contains__
