"""Strict coercion of user values to Python ints, with errors that name the field.

Every number in a description passes through here, so floats, bools, strings
and objects of the wrong kind are refused in one place with one message style.
"""
from __future__ import annotations

import itertools
import json
import operator
import reprlib
from collections.abc import Mapping, Set

import numpy as np

from .errors import ValidationError

UINT32_MAX = 2**32 - 1
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
UINT64_MAX = 2**64 - 1


#: The magnitude every integer a description reads stays below. Every field's range is far smaller; the bound keeps
#: a value, and any product of a few of them, printable in a message (Python refuses to print an int of more than
#: 4,300 digits: ``sys.get_int_max_str_digits``).
INT_BITS = 1024
_INT_LIMIT = 1 << INT_BITS

#: What a test for a number (``isinstance(v, (int, float, np.integer, np.floating))``) refuses first: bools (Python's
#: are ints) and NumPy's durations (``np.timedelta64`` is a ``np.signedinteger``; its ``int()`` and ``float()`` give a
#: ``datetime.timedelta``'s error, or its count in whatever unit it has).
NOT_NUMBERS = (bool, np.timedelta64)


def index_value(value) -> int:
    """``operator.index(value)``, refusing (``TypeError``) a bool: Python's, and a 0-d bool array, whose
    ``__index__`` PyTorch's gives as 0 or 1 (NumPy's and JAX's refuse)."""
    if isinstance(value, bool) or (type(value) is not int and str(getattr(value, "dtype", "")) in ("bool",
                                                                                                   "torch.bool")):
        raise TypeError(f"a bool is no integer here; got {type(value).__name__}")
    return operator.index(value)


def as_int(value, what: str, *, where: str) -> int:
    """Return ``value`` as an int; refuse bools, floats, non-integers and integers of more than ``INT_BITS`` bits."""
    if isinstance(value, bool) or value is None:
        raise ValidationError(f"{where}: {what} must be an integer; got {value!r}")
    try:
        v = index_value(value)
    except Exception:  # noqa: BLE001 - no int value (a PyTorch meta tensor's, a JAX tracer's, any __index__ failing)
        raise ValidationError(
            f"{where}: {what} must be an integer; got {_short(value)} of type {type(value).__name__}"
        ) from None
    if -_INT_LIMIT < v < _INT_LIMIT:
        return v
    raise ValidationError(f"{where}: {what} must be an integer of at most {INT_BITS} bits; got {number(v)}")


def number(v: int) -> str:
    """An int for a message: its digits, or its size in bits past ``INT_BITS`` (too long to print)."""
    return str(v) if -_INT_LIMIT < v < _INT_LIMIT else f"an integer of {v.bit_length()} bits"


def as_int_tuple(values, what: str, *, where: str, length: int | None = None,
                 max_length: int = 64) -> tuple[int, ...]:
    """Return a tuple of ints from an ordered sequence; ``length`` pins its length.

    Refused with a message: strings and bytes, mappings (``{0: 9, 1: 9}`` would give its keys), sets (no order),
    masked arrays (the mask would be dropped), and iterables of more than ``max_length`` entries (read no further, so
    an endless iterator cannot hang)."""
    kind = type(values)
    if (kind is tuple or kind is list) and len(values) <= max_length and (length is None or len(values) == length):
        # the common case, decided without the general checks below
        ints = tuple(values)
        if all(type(v) is int and -_INT_LIMIT < v < _INT_LIMIT for v in ints):
            return ints
    if isinstance(values, (str, bytes, bytearray)) or values is None:
        raise ValidationError(f"{where}: {what} must be a sequence of integers; got {_short(values)}")
    if isinstance(values, (Mapping, Set)):
        kind = "a mapping" if isinstance(values, Mapping) else "a set (it has no order)"
        raise ValidationError(f"{where}: {what} must be a sequence of integers, not {kind}; "
                              f"got {_short(values)}")
    if isinstance(values, np.ma.MaskedArray):
        raise ValidationError(f"{where}: {what} must be a sequence of integers; got a masked array "
                              f"(its mask would be dropped): pass values.filled(...) or values.data")
    if hasattr(values, "tolist") and not isinstance(values, (list, tuple)):
        try:
            values = values.tolist()  # NumPy arrays and scalars of arrays
        except Exception:  # noqa: BLE001 - values that cannot be read (a meta tensor's, a JAX tracer's)
            raise ValidationError(f"{where}: {what} must be a sequence of integers; got {_short(values)}, whose "
                                  f"values cannot be read") from None
        if not isinstance(values, list):
            raise ValidationError(f"{where}: {what} must be a sequence of integers; got the scalar {_short(values)}")
    try:
        items = list(itertools.islice(iter(values), max_length + 1))
    except Exception:  # noqa: BLE001 - not iterable, or its items cannot be read
        raise ValidationError(
            f"{where}: {what} must be a sequence of integers; got {type(values).__name__}"
        ) from None
    if len(items) > max_length:
        raise ValidationError(
            f"{where}: {what} has more than {max_length} entries; at most {max_length} are meaningful")
    if length is not None and len(items) != length:
        raise ValidationError(
            f"{where}: {what} must have {length} entries (one per dimension); got {len(items)}")
    return tuple(as_int(v, f"{what}[{i}]", where=where) for i, v in enumerate(items))


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict, _REPR.maxset = 3, 8, 8, 4, 4
_REPR.maxstring = _REPR.maxlong = _REPR.maxother = 40


def _short(value) -> str:
    """A bounded repr for messages (huge or deeply nested values stay one short line)."""
    if type(value) is int and not -_INT_LIMIT < value < _INT_LIMIT:
        return number(value)
    try:
        return _REPR.repr(value)
    except Exception:  # a hostile __repr__: name the type only
        return f"<{type(value).__name__}>"


def json_text(value) -> str:
    """``value`` as JSON writes it, for a message; ``_short``'s repr where JSON
    has no form for it (a NumPy number, a set, a list holding itself...) or
    would show another type (a tuple, which it writes as an array)."""
    if isinstance(value, tuple):
        return _short(value)
    try:
        return json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return _short(value)


def display_text(text: str, out) -> str:
    """A name or title given by the user (a DxDispatch resource name, a description's Title) as printed to the stream
    ``out``: itself where the stream can write it and it holds no control characters, else JSON-escaped (a lone
    surrogate, a character the stream's encoding lacks, a terminal escape)."""
    try:
        if text.isprintable():
            text.encode(getattr(out, "encoding", None) or "utf-8")
            return text
    except (UnicodeError, LookupError):
        pass
    return json.dumps(text)[1:-1]


def type_name(v) -> str:
    """A value's JSON type name ("object", "array", ...), else its Python type's name."""
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer",
            float: "number", type(None): "null"}.get(type(v), type(v).__name__)
