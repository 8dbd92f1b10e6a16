"""Reading a DxDispatch model: its JSON text, the checks every part of it
uses, and its values (numbers of a data type, as DxDispatch converts them)."""
from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping

import numpy as np

from ..jsonform import (DEFAULT_MAX_BYTES, MAX_DEPTH, check_depth, check_keys, parse_int, parse_object, read_regular,
                        text_limit as model_limit, unique_keys)
from ..model._checks import UINT64_MAX, json_text, type_name as _type_name
from ..model.data_type import ELEMENT_TYPES, DataType
from ..model.errors import ValidationError
from ..ops._spec import DOUBLE_MAX, OPERATOR_TYPES  # noqa: F401 - dxdispatch's name of the table

#: The dispatchable types of DxDispatch that are not DirectML operators.
_OTHER_DISPATCHABLES = {"hlsl": "HLSL compute shaders", "onnx": "ONNX models",
                        "dmlserializedgraph": "serialized DirectML graphs"}


class ModelError(ValidationError):
    """A DxDispatch model is malformed: the message names the resource,
    dispatchable or command, the field and the rule."""


def _short(v, limit: int = 60) -> str:
    text = json_text(v)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _q(name: str) -> str:
    """A model-given name quoted for a one-line message."""
    text = json.dumps(name)[1:-1]
    return "'" + (text if len(text) <= 80 else text[:77] + "...") + "'"


# -- reading the JSON --------------------------------------------------------------------

def _no_constant(name: str):
    raise ModelError(f"malformed JSON: {name} is not a JSON number; a float value may be the string \"nan\", "
                     f"\"inf\" or \"-inf\"")


def _parse_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ModelError(f"malformed JSON: the number {text[:40]}{'...' if len(text) > 40 else ''} is too big to be "
                         f"stored in a double (magnitude at most {DOUBLE_MAX:g}); write infinity as the string "
                         f"\"inf\"")
    return value


def loads(text: str) -> dict:
    """Parse a model's JSON text; as DxDispatch's parser refuses them, malformed JSON, duplicate keys, integers too
    long to read, nesting deeper than ``jsonform.MAX_DEPTH``, the literals ``NaN``, ``Infinity`` and ``-Infinity``
    (not JSON; a model writes ``"nan"``, ``"inf"``, ``"-inf"``) and numbers too big for a double (``1e400``) are
    ``ModelError``s; ``text`` not ``str``, ``bytes`` or ``bytearray`` a ``TypeError``."""
    if not isinstance(text, (str, bytes, bytearray)):
        raise TypeError(f"dxdispatch.loads: text must be str, bytes or bytearray; got {type(text).__name__}")
    return parse_object(text, "a model", ModelError,
                        f"malformed JSON: arrays and objects nest more than {MAX_DEPTH} levels deep",
                        parse_int=lambda text: parse_int(text, ModelError), parse_float=_parse_float, parse_constant=_no_constant,
                        object_pairs_hook=unique_keys(ModelError, _q, "names in a model must be unique"))


def load(model, base_dir: str | os.PathLike | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES
         ) -> tuple[dict, str]:
    """``(model dict, base folder)`` of a path (the file's folder) or of a parsed dict (``base_dir`` or the current
    folder). A path must name a regular file of at most ``model_limit(max_bytes)`` bytes (a device, a FIFO or a
    folder is refused unread); ``base_dir`` not a path or None, a ``TypeError``."""
    if base_dir is not None and not isinstance(base_dir, (str, os.PathLike)):
        raise TypeError(f"dxdispatch: base_dir must be a path (str or os.PathLike) or None; got "
                        f"{type(base_dir).__name__}")
    if isinstance(model, Mapping):
        check_depth(model)
        return dict(model), os.path.abspath(base_dir if base_dir is not None else os.getcwd())
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"dxdispatch: model must be a path or a dict; got {type(model).__name__}")
    path = os.fspath(model)
    limit = model_limit(max_bytes)

    def fail(reason, detail):
        why = (f"a model is a regular file (a JSON text); this is {detail}" if reason == "kind" else
               f"the model file holds {detail} bytes; a model may hold at most {limit} (max_bytes / 16, at least "
               f"1 MiB; max_bytes / --max-bytes sets it)" if reason == "size" else
               "the model is not UTF-8 text" if reason == "text" else f"cannot read the model: {detail}")
        raise ModelError(f"{path}: {why}") from None
    text = read_regular(path, limit, fail, "utf-8-sig")
    folder = base_dir if base_dir is not None else os.path.dirname(os.path.abspath(path))
    return loads(text), os.path.abspath(folder)


def _check_keys(obj, allowed, where: str, required=()) -> None:
    check_keys(obj, allowed, where, required, ModelError, lambda where, k: (where, " " + _q(k)))


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
_DATA_TYPES = ("UNKNOWN", *(t.name for t in ELEMENT_TYPES))


# -- values ------------------------------------------------------------------------------

_FLOAT_WORDS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _float_word(v):
    """"nan", "inf", "-inf" (any case) as floats, as DxDispatch reads FLOATs; any other value as it is."""
    return _FLOAT_WORDS.get(v.lower(), v) if isinstance(v, str) else v


def _to_float(value, where: str) -> float:
    value = _float_word(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ModelError(f"{where}: must be a number or \"nan\", \"inf\", \"-inf\"; got {_short(value)}")
    try:
        return float(value)
    except OverflowError:
        raise ModelError(f"{where}: {_short(value)} is out of range for a float") from None


def _float_values(floats: np.ndarray, dt: DataType, where: str, indexed: bool = False, start: int = 0
                  ) -> np.ndarray:
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
        at = f"{where}[{start + i}]" if indexed else where
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


def _array_values(values: list, dt: DataType, where: str, start: int = 0) -> np.ndarray:
    """``values`` (entries ``start``, ``start + 1``... of a model's list, as
    messages number them) as an array of ``dt``."""
    npdt = dt.numpy_dtype
    if npdt.kind == "f":
        floats = np.array([_to_float(v, f"{where}[{i}]") for i, v in enumerate(values, start)], dtype=np.float64)
        return _float_values(floats, dt, where, indexed=True, start=start)
    return np.array([_int_value(v, dt, f"{where}[{i}]") for i, v in enumerate(values, start)], dtype=npdt)


# -- paths -------------------------------------------------------------------------------

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
    real_folder = os.path.realpath(folder)
    if os.path.commonpath([real_folder, os.path.realpath(path)]) != real_folder:
        raise ModelError(f"{where}: {_short(text)} lies outside the model's folder {folder}; a model may only "
                         f"name files inside its own folder")
    return path
