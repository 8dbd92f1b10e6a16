"""DxDispatch models: Microsoft's JSON format for running DirectML operators,
run by opendml on the CPU or a CUDA GPU.

A model has ``resources`` (byte buffers with initial values), ``dispatchables``
(DirectML operators, ``"type": "DML_OPERATOR_SLICE1"``, whose ``desc`` uses
DirectML's field names) and ``commands`` run in order (``dispatch`` with
``bindings``, ``print``, ``writeFile``). The format is DxDispatch's
(``DxDispatch/doc/Guide.md`` in microsoft/DirectML)::

    results = opendml.dxdispatch.run("model.json", device="cpu", feature_level="6_4")
    results["output"]     # every resource after the last command: a 1-D array of
                          # its initialValuesDataType holding the whole buffer

The model runs as DxDispatch runs it: every resource is allocated and
initialised, every dispatchable created (validated at the feature level),
compiled and initialised (OWNED_BY_DML inputs bound through the dispatchable's
own ``bindings``), every command's bindings resolved and checked by DirectML's
binding rules, then the commands run in order. A dispatch binds
``DML_BUFFER_BINDING {Offset = elementOffset * elementSizeInBytes,
SizeInBytes = elementCount * elementSizeInBytes}`` (elementSizeInBytes
defaults to the size of the resource's initialValuesDataType; without
elementCount the range runs to the end of the buffer): the offset must be a
multiple of 16 (or of the tensor's GuaranteedBaseOffsetAlignment), the range
must lie in the buffer and hold the tensor's TotalTensorSizeInBytes, no output
range may overlap another bound range. Bytes no output element covers keep
their values. Nothing is written to a file before every command has run.

The operator descriptions are read generically from ``opendml.ops``: each
operator there is dispatchable, and an operator DirectML has but opendml does
not raises ``UnsupportedError`` naming it. Errors name the resource,
dispatchable or command, the field and the rule.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping

import numpy as np

from .device import Buffer, BufferBinding, CompiledOperator, Device
from .jsonform import MAX_DEPTH, JsonFormError, array_from_json, check_depth, from_json, to_json
from .model._checks import UINT32_MAX, UINT64_MAX
from .model.data_type import DataType
from .model.errors import BindingError, DmlError, UnsupportedError, ValidationError
from .model.feature_level import FeatureLevel
from .model.tensor_desc import TensorDesc, TensorFlags, round_up_4
from .ops import OPERATORS, Float, ScalarUnion, Struct

__all__ = ["run", "load", "ModelError", "OPERATOR_TYPES", "DEFAULT_MAX_BYTES", "example_model", "format_resource",
           "check_output_dir", "write_resources", "dumps",
           "example_outputs"]

#: DML_OPERATOR_TYPE in DirectML.h order (the index is the enum value; 0 is
#: DML_OPERATOR_INVALID), through DML_TARGET_VERSION 0x6400. Names without
#: their ``DML_OPERATOR_`` prefix. ``SCATTER`` is an alias of SCATTER_ELEMENTS.
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
_OPERATOR_ALIASES = {"SCATTER": "SCATTER_ELEMENTS"}

#: Memory a model may allocate for its resources unless told otherwise (2 GiB).
DEFAULT_MAX_BYTES = 2 << 30

#: The dispatchable types of DxDispatch that are not DirectML operators.
_OTHER_DISPATCHABLES = {"hlsl": "HLSL compute shaders", "onnx": "ONNX models",
                        "dmlserializedgraph": "serialized DirectML graphs"}


class ModelError(ValidationError):
    """A DxDispatch model is malformed: the message names the resource,
    dispatchable or command, the field and the rule."""


def _type_name(v) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer",
            float: "number", type(None): "null"}.get(type(v), type(v).__name__)


def _short(v, limit: int = 60) -> str:
    try:
        text = json.dumps(v)
    except (TypeError, ValueError):
        text = repr(v)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _q(name: str) -> str:
    """A model-given name quoted for a one-line message."""
    text = json.dumps(name)[1:-1]
    return "'" + (text if len(text) <= 80 else text[:77] + "...") + "'"


# -- reading the JSON --------------------------------------------------------------------

#: Python reads integers of at most this many digits (sys.int_info.default_max_str_digits).
_MAX_INT_DIGITS = 4300


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        raise ModelError(f"malformed JSON: an integer of {len(text.lstrip('-'))} digits is longer than the "
                         f"{_MAX_INT_DIGITS} digits that can be read")
    return int(text)


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ModelError(f"malformed JSON: the key {_q(k)} appears twice in one object (names in a model "
                             f"must be unique)")
        out[k] = v
    return out


def loads(text: str) -> dict:
    """Parse a model's JSON text: malformed JSON, duplicate keys, integers too
    long to read and nesting deeper than ``jsonform.MAX_DEPTH`` are ``ModelError``s."""
    try:
        obj = json.loads(text, parse_int=_parse_int, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        raise ModelError(f"malformed JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise ModelError(f"malformed JSON: arrays and objects nest more than {MAX_DEPTH} levels deep") from None
    if not isinstance(obj, dict):
        raise ModelError(f"a model must be a JSON object; got {_type_name(obj)}")
    try:
        check_depth(obj)
    except JsonFormError:
        raise ModelError(f"malformed JSON: arrays and objects nest more than {MAX_DEPTH} levels deep") from None
    return obj


def load(model, base_dir: str | os.PathLike | None = None) -> tuple[dict, str]:
    """``(model dict, base folder)`` of a path (the folder is the file's) or of
    an already parsed dict (the folder is ``base_dir`` or the current one)."""
    if isinstance(model, Mapping):
        check_depth(model)
        return dict(model), os.path.abspath(base_dir if base_dir is not None else os.getcwd())
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"dxdispatch: model must be a path or a dict; got {type(model).__name__}")
    path = os.fspath(model)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ModelError(f"{path}: cannot read the model: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ModelError(f"{path}: the model is not UTF-8 text") from None
    folder = base_dir if base_dir is not None else os.path.dirname(os.path.abspath(path))
    return loads(text), os.path.abspath(folder)


def _check_keys(obj, allowed, where: str, required=()) -> None:
    if not isinstance(obj, dict):
        raise ModelError(f"{where}: must be an object; got {_type_name(obj)}")
    for k in obj:
        if k not in allowed:
            raise ModelError(f"{where}: unknown field {_q(k)}; expected one of {', '.join(allowed)}")
    for k in required:
        if k not in obj:
            raise ModelError(f"{where}: missing required field {_q(k)}")


def _uint(value, where: str, lo: int = 0, hi: int = UINT64_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ModelError(f"{where}: must be an unsigned integer; got {_short(value)}")
    if not lo <= value <= hi:
        raise ModelError(f"{where}: must be in [{lo}, {hi}]; got {value}")
    return value


def _string(value, where: str) -> str:
    if not isinstance(value, str):
        raise ModelError(f"{where}: must be a string; got {_type_name(value)} {_short(value)}")
    return value


def _data_type(value, where: str, *, unknown_ok: bool) -> DataType:
    """A DML_TENSOR_DATA_TYPE in full (``DML_TENSOR_DATA_TYPE_FLOAT32``) or
    abbreviated (``FLOAT32``); the names are case-sensitive, as DxDispatch reads them."""
    if not isinstance(value, str):
        raise ModelError(f"{where}: must be a string such as \"FLOAT32\"; got {_short(value)}")
    name = value.removeprefix("DML_TENSOR_DATA_TYPE_")
    if name not in _DATA_TYPES or (name == "UNKNOWN" and not unknown_ok):
        expected = ", ".join(n for n in _DATA_TYPES if unknown_ok or n != "UNKNOWN")
        raise ModelError(f"{where}: unknown data type {_short(value)}; expected one of {expected} "
                         f"(with or without the DML_TENSOR_DATA_TYPE_ prefix)")
    return DataType[name]


#: DML_TENSOR_DATA_TYPE values a model may name (DxDispatch has no UINT4/INT4).
_DATA_TYPES = ("UNKNOWN", "FLOAT32", "FLOAT16", "UINT32", "UINT16", "UINT8", "INT32", "INT16", "INT8",
               "FLOAT64", "UINT64", "INT64")


# -- values ------------------------------------------------------------------------------

_FLOAT_WORDS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _to_float(value, where: str) -> float:
    if isinstance(value, str) and value.lower() in _FLOAT_WORDS:
        return _FLOAT_WORDS[value.lower()]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ModelError(f"{where}: must be a number or \"nan\", \"inf\", \"-inf\"; got {_short(value)}")
    try:
        return float(value)
    except OverflowError:
        raise ModelError(f"{where}: {_short(value)} is out of range for a float") from None


def _float_values(floats: np.ndarray, dt: DataType, where: str, indexed: bool = False) -> np.ndarray:
    """float64 values converted as DxDispatch converts them (FLOAT16 through
    float32, as ``half(float(double))``); a finite value that overflows to
    infinity is refused."""
    with np.errstate(over="ignore", invalid="ignore"):
        if dt == DataType.FLOAT64:
            out = floats
        elif dt == DataType.FLOAT32:
            out = floats.astype(np.float32)
        else:
            out = floats.astype(np.float32).astype(np.float16)
    bad = np.isfinite(floats) & ~np.isfinite(out)
    if bad.any():
        i = int(np.argmax(bad))
        at = f"{where}[{i}]" if indexed else where
        hi = float(np.finfo(dt.numpy_dtype).max)
        raise ModelError(f"{at}: {float(floats[i])!r} is out of range for {dt.name} (magnitude at most {hi:g})")
    return out


def _int_value(value, dt: DataType, where: str) -> int:
    info = np.iinfo(dt.numpy_dtype)
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "an unsigned" if info.min == 0 else "a signed"
        raise ModelError(f"{where}: must be {kind} integer for {dt.name}; got {_short(value)}")
    if not info.min <= value <= info.max:
        raise ModelError(f"{where}: {_short(value)} is out of range for {dt.name} [{info.min}, {info.max}]")
    return value


def _scalar(value, dt: DataType, where: str) -> np.ndarray:
    """One JSON value as a 0-d array of ``dt``, by DxDispatch's rules: floats
    take numbers and "nan"/"inf"/"-inf"; integers take JSON integers in range."""
    if dt.numpy_dtype.kind == "f":
        return _float_values(np.array([_to_float(value, where)]), dt, where)[0:1].reshape(())
    return np.array(_int_value(value, dt, where), dtype=dt.numpy_dtype)


def _array_values(values: list, dt: DataType, where: str) -> np.ndarray:
    npdt = dt.numpy_dtype
    if npdt.kind == "f":
        floats = np.array([_to_float(v, f"{where}[{i}]") for i, v in enumerate(values)], dtype=np.float64)
        return _float_values(floats, dt, where, indexed=True)
    return np.array([_int_value(v, dt, f"{where}[{i}]") for i, v in enumerate(values)], dtype=npdt)


# -- resources ---------------------------------------------------------------------------

_RESOURCE_FIELDS = ("type", "initialValues", "initialValuesDataType", "initialValuesOffsetInBytes", "sizeInBytes",
                    "resampleSize", "resampleMode")
_MIXED_TYPES = ("FLOAT32", "FLOAT64", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64")


@dataclasses.dataclass
class _Resource:
    name: str
    data_type: DataType              # UNKNOWN for a list initialiser of mixed types
    initial_bytes: int               # the initial values' length (what print shows)
    size: int                        # the buffer's size in bytes
    buffer: Buffer | None = None

    @property
    def element_size(self) -> int:
        return 1 if self.data_type == DataType.UNKNOWN else self.data_type.size

    @property
    def numpy_dtype(self) -> np.dtype:
        return np.dtype(np.uint8) if self.data_type == DataType.UNKNOWN else self.data_type.numpy_dtype


class _Budget:
    """Bytes the model's buffers may take (``max_bytes`` in all). Initial
    values are checked against what is left before they are made (they are
    copied into their buffer and dropped), buffers are taken from it."""

    def __init__(self, max_bytes: int):
        self.max_bytes, self.used = max_bytes, 0

    def check(self, nbytes: int, where: str, what: str) -> None:
        if self.used + nbytes > self.max_bytes:
            raise ModelError(f"{where}: {what} takes {nbytes} bytes; the model's resources may take "
                             f"{self.max_bytes} bytes in all ({self.used} taken before it; max_bytes / "
                             f"--max-bytes sets the limit)")

    def take(self, nbytes: int, where: str, what: str) -> None:
        self.check(nbytes, where, what)
        self.used += nbytes


def _initial_values(name: str, obj: dict, dt: DataType | None, folder: str, budget: _Budget
                    ) -> tuple[np.ndarray, DataType]:
    """The initial bytes of a resource and its data type (a .npy file gives its own)."""
    where = f"resource {_q(name)}"
    iv = obj["initialValues"]
    if isinstance(iv, str):
        if iv == "deferred":
            raise UnsupportedError(f"{where}: initialValues \"deferred\" binds outputs of ONNX dispatchables, "
                                   f"which opendml does not run")
        raise ModelError(f"{where}: initialValues must be an array, an object or \"deferred\"; got {_short(iv)}")
    if isinstance(iv, list):
        if not iv:
            raise ModelError(f"{where}: initialValues must not be empty")
        if dt is None or dt == DataType.UNKNOWN:
            return _mixed_values(iv, where, budget), DataType.UNKNOWN
        budget.check(len(iv) * dt.size, where, "initialValues")
        return _array_values(iv, dt, f"{where}: initialValues").view(np.uint8), dt
    if not isinstance(iv, dict):
        raise ModelError(f"{where}: initialValues must be an array of numbers or an object; got {_type_name(iv)}")
    kinds = [k for k in ("value", "valueStart", "sourcePath") if k in iv]
    if len(kinds) != 1:
        raise ModelError(f"{where}: initialValues must hold exactly one of value (a constant), valueStart (a "
                         f"sequence) or sourcePath (a file); got {', '.join(kinds) or 'none of them'}")
    if kinds[0] == "sourcePath":
        _check_keys(iv, ("sourcePath",), f"{where}: initialValues")
        return _file_values(iv["sourcePath"], dt, where, folder, budget)
    if dt is None or dt == DataType.UNKNOWN:
        raise ModelError(f"{where}: initialValuesDataType is required (and not UNKNOWN) for a "
                         f"{'constant' if kinds[0] == 'value' else 'sequence'} initialiser")
    w = f"{where}: initialValues"
    if kinds[0] == "value":
        _check_keys(iv, ("valueCount", "value"), w, ("valueCount",))
        count = _uint(iv["valueCount"], f"{w}.valueCount", 1, UINT32_MAX)
        budget.check(count * dt.size, where, f"initialValues ({count} x {dt.name})")
        return np.full(count, _scalar(iv["value"], dt, f"{w}.value"), dtype=dt.numpy_dtype).view(np.uint8), dt
    _check_keys(iv, ("valueCount", "valueStart", "valueDelta"), w, ("valueCount", "valueDelta"))
    count = _uint(iv["valueCount"], f"{w}.valueCount", 1, UINT32_MAX)
    budget.check(count * dt.size, where, f"initialValues ({count} x {dt.name})")
    return _sequence(iv["valueStart"], iv["valueDelta"], count, dt, w).view(np.uint8), dt


def _sequence(start, delta, count: int, dt: DataType, where: str) -> np.ndarray:
    """``valueStart, valueStart + valueDelta, ...`` accumulated in the type as
    DxDispatch does (``value += valueDelta``, rounded to the type at every
    step for floats); an integer sequence leaving its type is refused."""
    npdt = dt.numpy_dtype
    first, step = _scalar(start, dt, f"{where}.valueStart"), _scalar(delta, dt, f"{where}.valueDelta")
    if npdt.kind == "f":
        terms = np.full(count, step, dtype=npdt)
        terms[0] = first
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.add.accumulate(terms, dtype=npdt)
        bad = np.isfinite(first) & np.isfinite(step) & ~np.isfinite(out)
        if bad.any():
            i = int(np.argmax(bad))
            raise ModelError(f"{where}: entry {i} of the sequence overflows {dt.name} (valueStart {_short(start)}, "
                             f"valueDelta {_short(delta)})")
        return out
    a, d = int(first), int(step)
    last = a + (count - 1) * d
    info = np.iinfo(npdt)
    if not info.min <= last <= info.max:
        raise ModelError(f"{where}: the sequence leaves {dt.name} [{info.min}, {info.max}]: valueStart + "
                         f"(valueCount - 1) * valueDelta = {a} + {count - 1} * {d} = {last}")
    # Every term lies between the first and the last, so 64-bit arithmetic
    # (wrapping in intermediate products) gives each exactly.
    wide = np.uint64 if npdt == np.uint64 else np.int64
    with np.errstate(over="ignore"):
        return (wide(a) + np.arange(count, dtype=wide) * wide(d)).astype(npdt)


def _mixed_values(items: list, where: str, budget: _Budget) -> np.ndarray:
    """A list initialiser (initialValuesDataType UNKNOWN): ``{"type", "value",
    "name"}`` objects packed one after the other without padding."""
    budget.check(8 * len(items), where, "initialValues")
    parts = []
    for i, item in enumerate(items):
        w = f"{where}: initialValues[{i}]"
        if not isinstance(item, dict):
            raise ModelError(f"{w}: with initialValuesDataType UNKNOWN (or none) every entry must be an object "
                             f"{{\"type\", \"value\"}}; got {_type_name(item)} {_short(item)}")
        _check_keys(item, ("name", "type", "value"), w, ("type", "value"))
        t = _data_type(item["type"], f"{w}.type", unknown_ok=False)
        if t.name not in _MIXED_TYPES:
            raise ModelError(f"{w}.type: {t.name} is not supported in a list initialiser; expected one of "
                             f"{', '.join(_MIXED_TYPES)}")
        parts.append(_scalar(item["value"], t, f"{w}.value").reshape(1).view(np.uint8))
    return np.concatenate(parts)


def _inside(folder: str, path: str) -> bool:
    real_folder, real = os.path.realpath(folder), os.path.realpath(path)
    return os.path.commonpath([real_folder, real]) == real_folder


def _model_path(value, folder: str, where: str) -> str:
    """A path of the model resolved against its folder; it must stay inside it."""
    text = _string(value, where)
    try:
        os.fsencode(text)
    except UnicodeError:
        text = "\0"
    if not text or "\0" in text:
        raise ModelError(f"{where}: must be a file name (not empty, encodable for the file system); "
                         f"got {_short(value)}")
    path = os.path.join(folder, text)
    if not _inside(folder, path):
        raise ModelError(f"{where}: {_short(text)} lies outside the model's folder {folder}; a model may only "
                         f"name files inside its own folder")
    return path


#: NumPy dtypes a .npy initialiser may hold (bool is read as UINT8, as DxDispatch does).
_NPY_BOOL = np.dtype(bool)


def _file_values(source, dt: DataType | None, where: str, folder: str, budget: _Budget
                 ) -> tuple[np.ndarray, DataType]:
    w = f"{where}: initialValues.sourcePath"
    path = _model_path(source, folder, w)
    ext = os.path.splitext(path)[1].lower()
    if ext in (".png", ".jpg", ".jpeg"):
        raise UnsupportedError(f"{w}: image initialisers ({ext}) are not supported by opendml; convert the image "
                               f"to a .npy array")
    try:
        size = os.path.getsize(path)
        if not os.path.isfile(path):
            raise ModelError(f"{w}: {_short(source)} is not a file")
        with open(path, "rb") as f:
            if ext == ".npy":
                return _read_npy(f, size, dt, w, budget)
            if dt is None or dt == DataType.UNKNOWN:
                raise ModelError(f"{where}: initialValuesDataType is required (and not UNKNOWN) for a raw file "
                                 f"initialiser")
            if size == 0:
                raise ModelError(f"{w}: the file is empty; initialValues must not be empty")
            budget.check(size, where, f"the file {_short(source)}")
            return np.frombuffer(f.read(), dtype=np.uint8).copy(), dt
    except OSError as e:
        raise ModelError(f"{w}: cannot read {_short(source)}: {e.strerror or e}") from None


def _read_npy(f, size: int, dt: DataType | None, w: str, budget: _Budget) -> tuple[np.ndarray, DataType]:
    fmt = np.lib.format
    try:
        if f.read(len(fmt.MAGIC_PREFIX)) != fmt.MAGIC_PREFIX:
            raise ModelError(f"{w}: not a .npy file (no NumPy magic)")
        f.seek(0)
        version = fmt.read_magic(f)
        if version not in ((1, 0), (2, 0), (3, 0)):
            raise ModelError(f"{w}: .npy format version {version[0]}.{version[1]} cannot be read")
        reader = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran, dtype = reader(f, max_header_size=10000)
    except (ValueError, SyntaxError, EOFError) as e:
        raise ModelError(f"{w}: cannot read the .npy header: {' '.join(str(e).split())[:200]}") from None
    if dtype.hasobject or dtype.names or dtype.subdtype is not None:
        raise ModelError(f"{w}: the .npy array's dtype {dtype} has no DirectML data type")
    native = dtype.newbyteorder("=")
    file_type = DataType.UINT8 if native == _NPY_BOOL else next(
        (t for t in DataType if t.name in _DATA_TYPES[1:] and t.numpy_dtype == native), None)
    if file_type is None:
        raise ModelError(f"{w}: the .npy array's dtype {dtype} has no DirectML data type")
    if dt is not None and dt != DataType.UNKNOWN and dt != file_type:
        raise ModelError(f"{w}: the file holds {file_type.name} ({dtype}); initialValuesDataType says {dt.name}")
    count = math.prod(shape)
    nbytes = count * dtype.itemsize
    if nbytes == 0:
        raise ModelError(f"{w}: the .npy array is empty; initialValues must not be empty")
    left = size - f.tell()
    if left != nbytes:
        raise ModelError(f"{w}: the file holds {left} bytes of data; its header promises {nbytes} "
                         f"({list(shape)} of {dtype})")
    budget.check(nbytes, w, "the .npy array")
    x = np.fromfile(f, dtype=dtype, count=count)
    x = x.reshape(shape[::-1]).T if fortran else x.reshape(shape)
    x = np.ascontiguousarray(x, dtype=native if native != _NPY_BOOL else np.uint8)
    return x.reshape(-1).view(np.uint8), file_type


def _parse_resource(name: str, obj, folder: str, budget: _Budget) -> tuple[_Resource, np.ndarray, int]:
    where = f"resource {_q(name)}"
    _check_keys(obj, _RESOURCE_FIELDS, where, ("initialValues",))
    if obj.get("type", "buffer") != "buffer":
        raise UnsupportedError(f"{where}: type {_short(obj['type'])} is not supported; resources are buffers "
                               f"(as in DxDispatch)")
    if "resampleSize" in obj or "resampleMode" in obj:
        raise UnsupportedError(f"{where}: resampleSize and resampleMode apply to image initialisers, which "
                               f"opendml does not read")
    dt = None
    if "initialValuesDataType" in obj:
        dt = _data_type(obj["initialValuesDataType"], f"{where}: initialValuesDataType", unknown_ok=True)
    data, dt = _initial_values(name, obj, dt, folder, budget)
    offset = 0
    if "initialValuesOffsetInBytes" in obj:
        offset = _uint(obj["initialValuesOffsetInBytes"], f"{where}: initialValuesOffsetInBytes")
    if "sizeInBytes" in obj:
        size = _uint(obj["sizeInBytes"], f"{where}: sizeInBytes", 1)
        if data.size + offset > size:
            raise ModelError(f"{where}: sizeInBytes {size} is too small for the initial values ({data.size} "
                             f"bytes) at initialValuesOffsetInBytes {offset}")
    else:
        size = round_up_4(data.size + offset)
    budget.take(size, where, f"the buffer (sizeInBytes {size})")
    return _Resource(name, dt, data.size, size), data, offset


# -- dispatchables -----------------------------------------------------------------------

def _operator_class(type_name, where: str):
    """The opendml description class of ``DML_OPERATOR_X`` (or the abbreviated ``X``)."""
    if not isinstance(type_name, str):
        raise ModelError(f"{where}.type: must be a string such as \"DML_OPERATOR_SLICE1\"; got {_short(type_name)}")
    if type_name.lower() in _OTHER_DISPATCHABLES:
        raise UnsupportedError(f"{where}: {_OTHER_DISPATCHABLES[type_name.lower()]} (type {_short(type_name)}) "
                               f"are not supported by opendml; it runs DirectML operators")
    name = type_name.removeprefix("DML_OPERATOR_")
    name = _OPERATOR_ALIASES.get(name, name)
    if name in OPERATORS:
        return OPERATORS[name]
    if name in OPERATOR_TYPES and name != "INVALID":
        raise UnsupportedError(f"{where}: DML_OPERATOR_{name} is a DirectML operator that opendml does not "
                               f"implement; opendml implements {', '.join('DML_OPERATOR_' + n for n in OPERATORS)}")
    raise ModelError(f"{where}.type: unknown operator {_short(type_name)}; expected DML_OPERATOR_<NAME> (or <NAME>) "
                     f"with one of {', '.join(OPERATORS)}")


@dataclasses.dataclass(frozen=True)
class _Slot:
    """A tensor field of an operator description (``ops._spec.Tensor``): its
    DirectML name, the description's attribute, whether it is an input, and
    whether it holds a list of tensors (JOIN's ``InputTensors``)."""
    json: str
    attr: str
    is_input: bool
    many: bool = False


def _slots(cls) -> tuple[_Slot, ...]:
    """The tensor fields of an operator class, in DirectML's struct order.
    (``optional`` there marks an output whose sizes opendml can derive; a
    DxDispatch model, like DirectML, gives every tensor.)"""
    return tuple(_Slot(s.json, s.attr, s.role == "input", s.many) for s in cls.SLOTS)


_TENSOR_FIELDS = ("Type", "Desc", "DataType", "Flags", "DimensionCount", "Sizes", "Strides", "TotalTensorSizeInBytes",
                  "GuaranteedBaseOffsetAlignment")


def _tensor_json(obj, where: str) -> dict:
    """A DML_TENSOR_DESC of a model in opendml's JSON form: the ``{"Type",
    "Desc"}`` wrapper unwrapped, Flags written as one name or a list of names
    OR-ed together, TotalTensorSizeInBytes 0 meaning "computed" and an empty
    Strides meaning packed (as DxDispatch reads them)."""
    _check_keys(obj, _TENSOR_FIELDS, where)
    if "Type" in obj:
        t = obj["Type"]
        if not isinstance(t, str) or t.removeprefix("DML_TENSOR_TYPE_") != "BUFFER":
            raise ModelError(f"{where}.Type: must be DML_TENSOR_TYPE_BUFFER (or BUFFER); got {_short(t)}")
    if "Desc" in obj:
        inner = {k: v for k, v in obj.items() if k not in ("Type", "Desc")}
        if inner:
            raise ModelError(f"{where}: with Desc, the tensor's fields go inside Desc; got {', '.join(inner)} "
                             f"beside it")
        where = f"{where}.Desc"
        obj = obj["Desc"]
        _check_keys(obj, _TENSOR_FIELDS[2:], where)
    out = {k: v for k, v in obj.items() if k != "Type"}
    if "DataType" in out:
        out["DataType"] = _data_type(out["DataType"], f"{where}.DataType", unknown_ok=False).name
    if "Flags" in out:
        flags = out["Flags"]
        names = flags if isinstance(flags, list) else [flags]
        value = 0
        for i, f in enumerate(names):
            at = f"{where}.Flags" + (f"[{i}]" if isinstance(flags, list) else "")
            n = f.removeprefix("DML_TENSOR_FLAG_") if isinstance(f, str) else None
            if n not in ("NONE", "OWNED_BY_DML"):
                raise ModelError(f"{at}: must be DML_TENSOR_FLAG_NONE or DML_TENSOR_FLAG_OWNED_BY_DML (or NONE, "
                                 f"OWNED_BY_DML), or a list of them; got {_short(f)}")
            value |= int(TensorFlags[n])
        out["Flags"] = value
    if type(out.get("TotalTensorSizeInBytes")) is int and out["TotalTensorSizeInBytes"] == 0:
        del out["TotalTensorSizeInBytes"]
    if out.get("Strides") == []:
        del out["Strides"]
    return out


def _desc_json(cls, desc, where: str) -> dict:
    """A model's ``desc`` in opendml's JSON form (``jsonform``): every tensor
    field must be there; tensors are read as DxDispatch reads them; FLOAT
    values may be "nan", "inf" or "-inf"; a scalar union typed FLOAT16 or
    FLOAT32 is rounded as DxDispatch stores it (FLOAT16 through FLOAT32), and
    FLOAT16 may also be given as its bits, ``{"UInt16": 15360}``."""
    if not isinstance(desc, dict):
        raise ModelError(f"{where}: must be an object; got {_type_name(desc)}")
    allowed = (*(s.json for s in cls.SLOTS), *cls.COUNTS, *(f.json for f in cls.FIELDS))
    for key in desc:
        if key not in allowed:
            raise ModelError(f"{where}: unknown field {_q(key)}; DML_{cls.OPERATOR}_OPERATOR_DESC has "
                             f"{', '.join(allowed)}")
    out = {"Operator": cls.OPERATOR, **desc}
    for slot in _slots(cls):
        if slot.json not in desc:
            raise ModelError(f"{where}: missing required field {_q(slot.json)} (a tensor of "
                             f"DML_{cls.OPERATOR}_OPERATOR_DESC)")
        value = desc[slot.json]
        if slot.many:
            if not isinstance(value, list):
                raise ModelError(f"{where}.{slot.json}: must be an array of tensor descriptions; "
                                 f"got {_type_name(value)}")
            out[slot.json] = [_tensor_json(v, f"{where}.{slot.json}[{i}]") for i, v in enumerate(value)]
        else:
            out[slot.json] = _tensor_json(value, f"{where}.{slot.json}")
    for f in cls.FIELDS:
        if f.json in desc:
            out[f.json] = _field_json(f, desc[f.json], desc)
    return out


def _float_word(v):
    """"nan", "inf", "-inf" (any case) as floats, as DxDispatch reads FLOATs."""
    if isinstance(v, str) and v.lower() in _FLOAT_WORDS:
        return _FLOAT_WORDS[v.lower()]
    return v


def _field_json(f, value, desc: dict):
    """A field's value with DxDispatch's number conventions applied, by the
    field's kind (``opendml.ops``); shapes and ranges are checked by ``jsonform``
    and the operator."""
    if isinstance(f, Float):
        return _float_word(value)
    if isinstance(f, Struct) and isinstance(value, dict):
        return {k: _float_word(v) for k, v in value.items()}
    if isinstance(f, ScalarUnion):
        raw = desc.get(f.type_field)
        dt = None
        if isinstance(raw, str) and raw.removeprefix("DML_TENSOR_DATA_TYPE_") in _DATA_TYPES:
            dt = DataType[raw.removeprefix("DML_TENSOR_DATA_TYPE_")]
        if dt == DataType.FLOAT16 and isinstance(value, dict) and set(value) == {"UInt16"} \
                and isinstance(value["UInt16"], int) and not isinstance(value["UInt16"], bool) \
                and 0 <= value["UInt16"] <= 0xFFFF:
            return float(np.array(value["UInt16"], np.uint16).view(np.float16))
        if dt is not None and dt.numpy_dtype.kind == "f":
            member = isinstance(value, dict) and len(value) == 1
            v = _float_word(next(iter(value.values())) if member else value)
            if dt in (DataType.FLOAT16, DataType.FLOAT32) and isinstance(v, (int, float)) \
                    and not isinstance(v, bool):
                try:
                    v = float(_float_values(np.array([float(v)]), dt, f.json)[0])
                except (OverflowError, ModelError):
                    pass                      # out of range: the operator's rule says so
            return {next(iter(value)): v} if member else v
    return value


def _jsonform_error(e: DmlError, where: str) -> DmlError:
    """An error of ``jsonform`` or of a description, re-worded to name the dispatchable."""
    text = " ".join(str(e).split())
    if text.startswith("$."):
        text = "desc." + text[2:]
    elif text.startswith("$:"):
        text = "desc" + text[1:]
    return type(e)(f"{where}: {text}")


@dataclasses.dataclass
class _Dispatchable:
    name: str
    compiled: CompiledOperator
    slots: tuple[_Slot, ...]
    tensors: dict                    # slot json -> tuple of TensorDesc (or () where left out)
    owned: set                       # slot json names whose tensors are OWNED_BY_DML (bound at initialisation)


_DISPATCHABLE_FIELDS = ("type", "Type", "desc", "Desc", "executionFlags", "dmlCompileType", "bindings")
_EXECUTION_FLAGS = ("NONE", "ALLOW_HALF_PRECISION_COMPUTATION", "DISABLE_META_COMMANDS", "DESCRIPTORS_VOLATILE")


def _parse_dispatchable(name: str, obj, device: Device) -> tuple[_Dispatchable, object]:
    where = f"dispatchable {_q(name)}"
    _check_keys(obj, _DISPATCHABLE_FIELDS, where)
    types = [k for k in ("type", "Type") if k in obj]
    descs = [k for k in ("desc", "Desc") if k in obj]
    if len(types) != 1:
        raise ModelError(f"{where}: needs exactly one field \"type\" (the operator, e.g. DML_OPERATOR_SLICE1)")
    cls = _operator_class(obj[types[0]], where)
    if len(descs) != 1:
        raise ModelError(f"{where}: needs exactly one field \"desc\" (DML_{cls.OPERATOR}_OPERATOR_DESC)")
    if "executionFlags" in obj:
        flags = obj["executionFlags"]
        for i, f in enumerate(flags if isinstance(flags, list) else [flags]):
            n = f.removeprefix("DML_EXECUTION_FLAG_") if isinstance(f, str) else None
            if n not in _EXECUTION_FLAGS:
                raise ModelError(f"{where}.executionFlags: unknown flag {_short(f)}; expected "
                                 f"{', '.join(_EXECUTION_FLAGS)} (with or without DML_EXECUTION_FLAG_)")
    if "dmlCompileType" in obj and obj["dmlCompileType"] not in ("DmlCompileOp", "DmlCompileGraph"):
        raise ModelError(f"{where}.dmlCompileType: must be \"DmlCompileOp\" or \"DmlCompileGraph\"; "
                         f"got {_short(obj['dmlCompileType'])}")
    form = _desc_json(cls, obj[descs[0]], f"{where}: desc")
    try:
        desc = from_json(form)
        compiled = device.compile_operator(device.create_operator(desc))
    except DmlError as e:
        raise _jsonform_error(e, where) from None
    slots = _slots(cls)
    tensors, owned = {}, set()
    for slot in slots:
        value = getattr(desc, slot.attr)
        ts = () if value is None else tuple(value) if slot.many else (value,)
        tensors[slot.json] = ts
        if slot.is_input and any(t.flags & TensorFlags.OWNED_BY_DML for t in ts):
            owned.add(slot.json)
    return _Dispatchable(name, compiled, slots, tensors, owned), obj.get("bindings")


# -- bindings ----------------------------------------------------------------------------

_BINDING_FIELDS = ("name", "elementOffset", "elementCount", "elementSizeInBytes", "format", "counter",
                   "counterOffsetBytes", "shape")


def _binding(source, resources: dict, where: str) -> BufferBinding:
    """One binding source (a resource name, or ``{"name", "elementOffset",
    "elementCount", "elementSizeInBytes"}``) as a DML_BUFFER_BINDING."""
    if isinstance(source, str):
        source = {"name": source}
    if not isinstance(source, dict):
        raise ModelError(f"{where}: must be a resource name or an object {{\"name\", \"elementOffset\", "
                         f"\"elementCount\", \"elementSizeInBytes\"}}; got {_type_name(source)} {_short(source)}")
    _check_keys(source, _BINDING_FIELDS, where, ("name",))
    for k in ("format", "counter", "counterOffsetBytes", "shape"):
        if k in source:
            raise ModelError(f"{where}.{k}: applies to HLSL and ONNX dispatchables only; a DirectML operator's "
                             f"binding is a byte range (name, elementOffset, elementCount, elementSizeInBytes)")
    name = _string(source["name"], f"{where}.name")
    if name not in resources:
        raise ModelError(f"{where}.name: no resource named {_q(name)} in the model")
    r = resources[name]
    size = _uint(source.get("elementSizeInBytes", 0), f"{where}.elementSizeInBytes")
    if size == 0:
        if r.data_type == DataType.UNKNOWN and ("elementOffset" in source or "elementCount" in source):
            raise ModelError(f"{where}: resource {_q(name)} has initialValuesDataType UNKNOWN: give "
                             f"elementSizeInBytes with elementOffset or elementCount")
        size = r.element_size
    offset = _uint(source.get("elementOffset", 0), f"{where}.elementOffset") * size
    if offset > r.size:
        raise BindingError(f"{where}: the binding must start inside resource {_q(name)} of {r.size} bytes: "
                           f"elementOffset * elementSizeInBytes = {offset} > {r.size}")
    count = _uint(source.get("elementCount", 0), f"{where}.elementCount")
    nbytes = count * size if count else r.size - offset
    if offset + nbytes > r.size:
        raise BindingError(f"{where}: the range must lie inside resource {_q(name)} of {r.size} bytes: "
                           f"(elementOffset + elementCount) * elementSizeInBytes = {offset} + {nbytes} > {r.size}")
    return BufferBinding(r.buffer, offset, nbytes)


def _slot_bindings(d: _Dispatchable, bindings, resources: dict, where: str, *, init: bool) -> tuple[list, list]:
    """(input bindings, output bindings) of a dispatch, in the operator's
    tensor order; at initialisation (``init``) the OWNED_BY_DML inputs only."""
    if not isinstance(bindings, dict):
        raise ModelError(f"{where}: must be an object mapping tensor fields to resources; got {_type_name(bindings)}")
    names = [s.json for s in d.slots]
    for key in bindings:
        if key not in names:
            raise ModelError(f"{where}: {_q(key)} is no tensor field of {d.compiled.desc.OPERATOR}; expected one of "
                             f"{', '.join(names)}")
    inputs, outputs = [], []
    for slot in d.slots:
        tensors = d.tensors[slot.json]
        at = f"{where}.{slot.json}"
        given = bindings.get(slot.json)
        if init:
            if not (slot.json in d.owned):
                if given is not None:
                    raise ModelError(f"{at}: only OWNED_BY_DML inputs are bound at initialisation (the "
                                     f"dispatchable's bindings); bind {slot.json} in a dispatch command")
                if slot.is_input:
                    inputs.extend([None] * len(tensors))
                continue
        elif slot.json in d.owned:
            if given is not None:
                raise BindingError(f"{at}: the tensor is OWNED_BY_DML: DirectML binds it once, at initialisation "
                                   f"(the dispatchable's \"bindings\"), and nothing at execution")
            inputs.extend([None] * len(tensors))   # bound once at initialisation
            continue
        if slot.json not in bindings:
            if not tensors:
                continue
            if init:
                raise ModelError(f"{at}: the OWNED_BY_DML tensor must be bound in the dispatchable's "
                                 f"\"bindings\" (DirectML binds it once, at initialisation)")
            raise ModelError(f"{at}: nothing bound for the required tensor {slot.json}")
        if not tensors:
            raise ModelError(f"{at}: the description leaves {slot.json} out, so nothing may be bound to it")
        sources = given if isinstance(given, list) else [given]
        if len(sources) != len(tensors):
            raise ModelError(f"{at}: the bind point takes {len(tensors)} resource(s) (one per tensor of "
                             f"{slot.json}); got {len(sources)}")
        out = [_binding(s, resources, f"{at}[{i}]" if isinstance(given, list) else at) for i, s in enumerate(sources)]
        (inputs if slot.is_input else outputs).extend(out)
    return inputs, outputs


# -- printing ----------------------------------------------------------------------------

def _format_value(v, kind: str) -> str:
    if kind == "f":
        f = float(v)
        return "nan" if math.isnan(f) else f"{f:g}"
    return str(int(v))


def _display(text: str, out) -> str:
    """``text`` as printed to ``out``: itself where the stream can write it
    and it holds no control characters, else JSON-escaped."""
    try:
        if text.isprintable():
            text.encode(getattr(out, "encoding", None) or "utf-8")
            return text
    except (UnicodeError, LookupError):
        pass
    return json.dumps(text)[1:-1]


def format_resource(name: str, values: np.ndarray, verbose: bool = False) -> str:
    """A ``print`` command's text, as DxDispatch writes it: ``Resource 'NAME': 1, 2, 3``
    (C++ stream formatting: floats with 6 significant digits, ``%g``); verbose:
    one ``[index] value (0xBITS)`` line per element. INT8 and UINT8 print as
    numbers (DxDispatch's stream prints them as characters)."""
    kind = values.dtype.kind
    if not verbose:
        return f"Resource '{name}': " + ", ".join(_format_value(v, kind) for v in values)
    n = values.size
    width = int(math.floor(math.log10(n))) + 1 if n else 1
    hexw = values.dtype.itemsize * 2
    bits = values.view(f"u{values.dtype.itemsize}")
    lines = [f"[{i:>{width}}] {_format_value(v, kind)} (0x{int(b):>{hexw}X})" for i, (v, b) in
             enumerate(zip(values, bits))]
    return f"Resource '{name}':\n" + "\n".join(lines) + ("\n" if lines else "")


# -- running -----------------------------------------------------------------------------

def _resource_array(r: _Resource, raw: np.ndarray) -> np.ndarray:
    """The whole buffer as a 1-D array of the resource's type (trailing bytes
    short of one element dropped)."""
    dt = r.numpy_dtype
    return raw[:len(raw) // dt.itemsize * dt.itemsize].view(dt).copy()


def _write_atomic(path: str, data, as_npy: bool) -> None:
    """Write ``data`` to a temporary file beside ``path``, then move it there:
    ``path`` never holds a half-written file. Missing folders are made, as
    DxDispatch makes them."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".opendml-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            if as_npy:
                np.save(f, data, allow_pickle=False)
            else:
                f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _name_tensors(message: str, desc) -> str:
    """A binding message of ``Device`` ("input 0 ...") with each tensor's
    field named as well: "input 0 (InputTensors[0]) ..."."""
    names = {"input": [n for n, _ in desc.named_tensors("input")],
             "output": [n for n, _ in desc.named_tensors("output")]}

    def named(m):
        kind, i = m.group(1), int(m.group(2))
        return f"{kind} {i} ({names[kind][i]})" if i < len(names[kind]) else m.group(0)
    return re.sub(r"\b(input|output) (\d+)\b", named, " ".join(message.split()))


def _parse_command(i: int, cmd, dispatchables: dict, resources: dict, folder: str):
    """A command checked before anything runs: ``(kind, where, details)``."""
    where = f"command {i}"
    if not isinstance(cmd, dict):
        raise ModelError(f"{where}: must be an object; got {_type_name(cmd)}")
    kind = cmd.get("type")
    if not isinstance(kind, str) or kind.lower() not in ("dispatch", "print", "writefile"):
        raise ModelError(f"{where}.type: must be \"dispatch\", \"print\" or \"writeFile\"; got {_short(kind)}")
    kind = kind.lower()
    if kind == "dispatch":
        _check_keys(cmd, ("type", "dispatchable", "bindings", "threadGroupCount"), where, ("dispatchable", "bindings"))
        if "threadGroupCount" in cmd:     # HLSL's; DirectML operators ignore it, as in DxDispatch
            tgc = cmd["threadGroupCount"]
            if not isinstance(tgc, list) or len(tgc) != 3:
                raise ModelError(f"{where}.threadGroupCount: must be an array of 3 positive integers; "
                                 f"got {_short(tgc)}")
            for j, v in enumerate(tgc):
                _uint(v, f"{where}.threadGroupCount[{j}]", 1, UINT32_MAX)
        name = _string(cmd["dispatchable"], f"{where}.dispatchable")
        if name not in dispatchables:
            raise ModelError(f"{where}.dispatchable: no dispatchable named {_q(name)} in the model")
        where = f"command {i} (dispatch {_q(name)})"
        d = dispatchables[name]
        inputs, outputs = _slot_bindings(d, cmd["bindings"], resources, f"{where}: bindings", init=False)
        table = d.compiled.device.create_binding_table(d.compiled)
        try:
            table.bind_inputs(inputs)
            table.bind_outputs(outputs)
        except DmlError as e:
            raise type(e)(f"{where}: {_name_tensors(str(e), d.compiled.desc)}") from None
        return "dispatch", where, (d, table)
    allowed = ("type", "resource", "verbose") if kind == "print" else ("type", "resource", "targetPath", "dimensions")
    _check_keys(cmd, allowed, where, ("resource",) + (("targetPath",) if kind == "writefile" else ()))
    name = _string(cmd["resource"], f"{where}.resource")
    if name not in resources:
        raise ModelError(f"{where}.resource: no resource named {_q(name)} in the model")
    r = resources[name]
    if kind == "print":
        verbose = cmd.get("verbose", False)
        if not isinstance(verbose, bool):
            raise ModelError(f"{where}.verbose: must be true or false; got {_short(verbose)}")
        if r.data_type == DataType.UNKNOWN:
            raise ModelError(f"{where}: resource {_q(name)} has initialValuesDataType UNKNOWN, so it has no "
                             f"element type to print")
        return "print", where, (r, verbose)
    path = _model_path(cmd["targetPath"], folder, f"{where}.targetPath")
    ext = os.path.splitext(path)[1].lower()
    if ext in (".png", ".jpg", ".jpeg"):
        raise UnsupportedError(f"{where}.targetPath: writing images ({ext}) is not supported by opendml; "
                               f"write .npy or raw bytes (.dat, .bin)")
    if os.path.isdir(path):
        raise ModelError(f"{where}.targetPath: {_short(cmd['targetPath'])} is a folder")
    shape = None
    if "dimensions" in cmd:
        dims = cmd["dimensions"]
        if not isinstance(dims, list) or not dims:
            raise ModelError(f"{where}.dimensions: must be a non-empty array of sizes; got {_short(dims)}")
        shape = [_uint(v, f"{where}.dimensions[{j}]", 1, UINT32_MAX) for j, v in enumerate(dims)]
        count = r.size // r.element_size
        if math.prod(shape) != count:
            raise ModelError(f"{where}.dimensions: the product of {shape} must equal the resource's element "
                             f"count {count} ({r.size} bytes of {r.numpy_dtype})")
    return "writefile", where, (r, path, ext == ".npy", shape)


def run(model, *, device: str | Device = "cpu", feature_level=None, base_dir=None, out=None,
        max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, np.ndarray]:
    """Run a DxDispatch model; return every resource after its last command,
    ``{name: 1-D array of its initialValuesDataType over the whole buffer}``
    (bytes as UINT8 for a list initialiser of mixed types).

    ``model`` is a path (file initialisers and writeFile targets are relative
    to its folder and must stay inside it) or a parsed dict (relative to
    ``base_dir``, default the current folder). ``device`` is ``"cpu"``,
    ``"cuda"`` or a ``Device``; ``feature_level`` (default: the device's, or
    the latest, 6_4) is the level every dispatchable is validated at.
    ``print`` commands write to ``out`` (default ``sys.stdout``); writeFile
    targets are written once every command has run. ``max_bytes`` bounds the
    memory the resources may take. Errors are ``DmlError`` subclasses naming
    the resource, dispatchable or command.

    Parameters
    ----------
    model : str, os.PathLike or Mapping
        A path to the model's JSON file, or the model already parsed.
    device : str or Device, optional
        ``"cpu"`` (the default), ``"cuda"``, ``"cuda:N"``, or a ``Device``.
    feature_level : str, FeatureLevel or None, optional
        The level every dispatchable is validated at, such as ``"6_4"``.
        None (the default): the ``Device``'s level, or 6_4 for a device
        given by name. With a ``Device`` it must equal the device's level.
    base_dir : str, os.PathLike or None, optional
        The folder file paths are relative to (default: the model file's
        folder, or the current folder for a dict).
    out : file-like or None, optional
        Where ``print`` commands and writeFile notices go (default
        ``sys.stdout``).
    max_bytes : int, optional
        The most bytes the resources may take in all (default
        ``DEFAULT_MAX_BYTES``, 2 GiB).

    Returns
    -------
    dict[str, numpy.ndarray]
        Every resource by name, after the last command: a 1-D array of its
        initialValuesDataType over the whole buffer (UINT8 bytes for a list
        initialiser of mixed types).

    Raises
    ------
    ModelError
        (a ``ValidationError``) If the model is malformed or cannot be read:
        bad JSON, a missing or unknown key, a bad value, a file path outside
        the model's folder, resources over ``max_bytes``, a writeFile that
        fails.
    ValidationError
        If a dispatchable's description breaks an operator rule, or
        ``feature_level`` is unknown or differs from the given ``Device``'s.
    UnsupportedError
        If a dispatchable is not an operator opendml has (or not a DirectML
        operator), needs a higher feature level, or the device cannot be
        used (such as ``"cuda"`` without CUDA).
    BindingError
        If a binding breaks DirectML's binding rules (alignment, range,
        size, overlap).
    AllocationError
        (``opendml.runtime.alloc.AllocationError``, a ``ValidationError``)
        If a host copy of a resource cannot be allocated.
    TypeError
        If ``model`` is neither a path nor a mapping.
    ValueError
        If ``max_bytes`` is not a positive integer.
    """
    obj, folder = load(model, base_dir)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValueError(f"dxdispatch.run: max_bytes must be a positive integer; got {max_bytes!r}")
    if isinstance(device, Device):
        if feature_level is not None and FeatureLevel.parse(feature_level) != device.feature_level:
            raise ValidationError(f"dxdispatch.run: feature_level {feature_level!r} differs from the device's "
                                  f"{device.feature_level.label}; give one of them")
    else:
        device = Device(device, feature_level=FeatureLevel.FL_6_4 if feature_level is None else feature_level)
    out = sys.stdout if out is None else out
    _check_keys(obj, ("$schema", "resources", "dispatchables", "commands"), "model",
                ("resources", "dispatchables", "commands"))
    for key, kind in (("resources", dict), ("dispatchables", dict), ("commands", list)):
        if not isinstance(obj[key], kind):
            raise ModelError(f"model.{key}: must be an {'object' if kind is dict else 'array'}; "
                             f"got {_type_name(obj[key])}")

    # 1. resources: allocated and initialised
    budget = _Budget(max_bytes)
    resources: dict[str, _Resource] = {}
    for name, spec in obj["resources"].items():
        r, data, offset = _parse_resource(name, spec, folder, budget)
        r.buffer = device.create_buffer(r.size)
        if data.size:
            r.buffer.write(data, offset=offset)
        resources[name] = r

    # 2. dispatchables: created (validated), compiled and initialised
    dispatchables: dict[str, _Dispatchable] = {}
    for name, spec in obj["dispatchables"].items():
        d, init = _parse_dispatchable(name, spec, device)
        where = f"dispatchable {_q(name)}"
        if d.owned or init is not None:
            inputs, _ = _slot_bindings(d, {} if init is None else init, resources, f"{where}: bindings", init=True)
            try:
                device.initialize_operator(d.compiled, inputs)
            except DmlError as e:
                raise type(e)(f"{where}: {_name_tensors(str(e), d.compiled.desc)}") from None
        dispatchables[name] = d

    # 3. every command checked (bindings by DirectML's rules) before any runs
    commands = [_parse_command(i, c, dispatchables, resources, folder) for i, c in enumerate(obj["commands"])]

    # 4. the commands, in order
    writes = []
    for kind, where, details in commands:
        if kind == "dispatch":
            d, table = details
            device.execute(d.compiled, table)
        elif kind == "print":
            r, verbose = details
            raw = r.buffer.read()
            values = raw[:r.initial_bytes // r.element_size * r.element_size].view(r.numpy_dtype)
            print(format_resource(_display(r.name, out), values, verbose), file=out)
        else:
            r, path, as_npy, shape = details
            raw = r.buffer.read()
            data = _resource_array(r, raw) if as_npy else raw.tobytes()
            if shape is not None and as_npy:
                data = data.reshape(shape)
            writes.append((r.name, path, data, as_npy))

    results = {name: _resource_array(r, r.buffer.read()) for name, r in resources.items()}
    for name, path, data, as_npy in writes:
        try:
            _write_atomic(path, data, as_npy)
        except OSError as e:
            raise ModelError(f"writeFile of resource {_q(name)}: cannot write {path}: {e.strerror or e}") from None
        print(f"Resource '{_display(name, out)}' written to '{_display(path, out)}'", file=out)
    return results


# -- writing every resource -----------------------------------------------------------------

def _file_name_problem(name: str) -> str | None:
    if not name or name in (".", "..") or len(name) > 200:
        return "is empty, '.', '..' or longer than 200 characters"
    try:
        os.fsencode(name)
    except UnicodeError:
        return "cannot be encoded for the file system"
    bad = [c for c in name if c in "/\\\0" or ord(c) < 32]
    if bad:
        return f"holds {json.dumps(bad[0])}, which a file name cannot"
    return None


def check_output_dir(directory: str | os.PathLike, names) -> str:
    """Check, before a model runs, that every resource can be written as
    ``DIRECTORY/NAME.npy``: the folder exists or its parent does, and every
    name makes a file name. Returns the folder's absolute path."""
    directory = os.path.abspath(os.fspath(directory))
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ModelError(f"--output-dir {directory}: exists and is not a folder")
    if not os.path.isdir(directory) and not os.path.isdir(os.path.dirname(directory)):
        raise ModelError(f"--output-dir {directory}: neither the folder nor its parent exists")
    for name in names:
        problem = _file_name_problem(name)
        if problem:
            raise ModelError(f"resource {_q(name)}: the name {problem}, so --output-dir cannot write it as NAME.npy")
    return directory


def write_resources(results: dict[str, np.ndarray], directory: str | os.PathLike) -> list[str]:
    """Write every array of ``results`` as ``DIRECTORY/NAME.npy``, all or none:
    the files are written into a temporary folder first, then moved (a new
    ``DIRECTORY`` is the temporary folder renamed). Returns the paths."""
    directory = check_output_dir(directory, results)
    fresh = not os.path.isdir(directory)
    tmp = tempfile.mkdtemp(prefix=".opendml-dispatch-", dir=os.path.dirname(directory) if fresh else directory)
    try:
        for name, values in results.items():
            with open(os.path.join(tmp, name + ".npy"), "wb") as f:
                np.save(f, values, allow_pickle=False)
        if fresh:
            os.rename(tmp, directory)
        else:
            for name in results:
                os.replace(os.path.join(tmp, name + ".npy"), os.path.join(directory, name + ".npy"))
            os.rmdir(tmp)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ModelError(f"--output-dir {directory}: cannot write: {e.strerror or e}") from None
    return [os.path.join(directory, name + ".npy") for name in results]


# -- the bundled examples as models ----------------------------------------------------------

def _json_number(v):
    """A value as a model writes it: non-finite floats as DxDispatch's strings,
    integral floats as integers (``-0.0`` kept)."""
    if isinstance(v, float):
        if not math.isfinite(v):
            return "nan" if math.isnan(v) else "inf" if v > 0 else "-inf"
        if v.is_integer() and abs(v) < 2**53 and (v != 0 or math.copysign(1, v) > 0):
            return int(v)
    return v


def dumps(model: dict) -> str:
    """A model as indented JSON text, each array of numbers on one line."""
    def compact(value, indent: int) -> str:
        pad, inner = " " * indent, " " * (indent + 2)
        if isinstance(value, dict) and value:
            items = [f"{inner}{json.dumps(k)}: {compact(v, indent + 2)}" for k, v in value.items()]
            return "{\n" + ",\n".join(items) + "\n" + pad + "}"
        if isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
            return "[\n" + ",\n".join(inner + compact(v, indent + 2) for v in value) + "\n" + pad + "]"
        return json.dumps(value)
    return compact(model, 0)


def _example_names(desc) -> tuple[list[str], list[str]]:
    """Resource names of an example's tensors: ``input``/``output`` where there
    is one, else ``input0``, ``input1``... in the operator's tensor order."""
    n_in, n_out = len(desc.inputs), len(desc.outputs)
    ins = ["input"] if n_in == 1 else [f"input{i}" for i in range(n_in)]
    outs = ["output"] if n_out == 1 else [f"output{i}" for i in range(n_out)]
    return ins, outs


def _example_arrays(example: dict, key: str, tensors, path: str) -> list:
    """An example's ``Input``/``ExpectedOutput`` (one tensor) or
    ``Inputs``/``ExpectedOutputs`` (one array per tensor) as arrays, None
    where it gives none."""
    many = key + "s"
    if key in example and len(tensors) == 1:
        values = [example[key]]
    elif many in example:
        values = example[many]
        if not isinstance(values, list) or len(values) != len(tensors):
            raise JsonFormError(f"$.{many}: must be an array of {len(tensors)} arrays (one per tensor)")
    else:
        return [None] * len(tensors)
    out = []
    for i, (v, t) in enumerate(zip(values, tensors)):
        where = f"$.{key}" if key in example else f"$.{many}[{i}]"
        x = array_from_json(v, t.data_type, where)
        if x.shape != t.sizes:
            raise JsonFormError(f"{where}: shape {list(x.shape)} must equal the tensor's Sizes {list(t.sizes)}")
        out.append(x)
    return out


def example_model(example: dict) -> dict:
    """A bundled ``opendml run`` example (its JSON form, with ``Input``/``Inputs``
    or the pages' default input 1..N or 0..N-1) as a DxDispatch model: one
    resource per input tensor (its buffer, laid out by the tensor's strides),
    one per output tensor (zeros over its TotalTensorSizeInBytes), one
    dispatchable named after the example, a dispatch and a print of each
    output. The resources are ``input``/``output``, or ``input0``, ``input1``...
    where an operator has several."""
    desc = from_json(example)
    in_names, out_names = _example_names(desc)
    start = getattr(desc, "DEFAULT_INPUT_START", 1)
    resources = {}
    for name, t, x in zip(in_names, desc.inputs, _example_arrays(example, "Input", desc.inputs, "$.Input")):
        if x is None:
            with np.errstate(over="ignore"):
                x = np.arange(start, start + math.prod(t.sizes)).astype(t.data_type.numpy_dtype).reshape(t.sizes)
        raw = Device("cpu").upload(x, t).read()
        elements = raw[:len(raw) // t.element_size * t.element_size].view(t.data_type.numpy_dtype)
        resources[name] = {"initialValuesDataType": t.data_type.name,
                           "initialValues": [_json_number(v) for v in elements.tolist()]}
    for name, t in zip(out_names, desc.outputs):
        resources[name] = {"initialValuesDataType": t.data_type.name,
                           "initialValues": {"valueCount": t.total_tensor_size_in_bytes // t.element_size,
                                             "value": 0}}
    bindings = {}
    names = {"input": iter(in_names), "output": iter(out_names)}
    for slot in desc.SLOTS:
        value = getattr(desc, slot.attr)
        it = names[slot.role]
        bindings[slot.json] = [next(it) for _ in value] if slot.many else next(it)
    form = to_json(desc)
    name = example.get("Name", desc.OPERATOR.lower())
    return {
        "resources": resources,
        "dispatchables": {name: {"type": f"DML_OPERATOR_{desc.OPERATOR}",
                                 "desc": {k: v for k, v in form.items() if k != "Operator"}}},
        "commands": [{"type": "dispatch", "dispatchable": name, "bindings": bindings},
                     *({"type": "print", "resource": n} for n in out_names)],
    }


def example_outputs(example: dict, results: dict[str, np.ndarray]) -> list[tuple[str, np.ndarray, object]]:
    """For each output tensor of an example run as a model (``example_model``):
    ``(resource name, its elements read through the tensor, the documented
    array or None)``."""
    desc = from_json(example)
    _, out_names = _example_names(desc)
    expected = _example_arrays(example, "ExpectedOutput", desc.outputs, "$.ExpectedOutput")
    out = []
    for name, t, want in zip(out_names, desc.outputs, expected):
        raw = results[name].view(np.uint8)
        scratch = Device("cpu").create_buffer(max(raw.size, 4))
        scratch.write(raw)
        out.append((name, scratch.read(t), want))
    return out
