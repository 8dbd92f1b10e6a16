"""Strict coercion of user values to Python ints, with errors that name the field.

Every number in a description passes through here, so floats, bools, strings
and objects of the wrong kind are refused in one place with one message style.
"""
from __future__ import annotations

import operator

from .errors import ValidationError

UINT32_MAX = 2**32 - 1
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
UINT64_MAX = 2**64 - 1


def as_int(value, what: str, *, where: str) -> int:
    """Return ``value`` as an int; refuse bools, floats and non-integers."""
    if isinstance(value, bool) or value is None:
        raise ValidationError(f"{where}: {what} must be an integer; got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ValidationError(
            f"{where}: {what} must be an integer; got {value!r} of type {type(value).__name__}"
        ) from None


def as_int_tuple(values, what: str, *, where: str, length: int | None = None,
                 max_length: int = 64) -> tuple[int, ...]:
    """Return a tuple of ints from a sequence; ``length`` pins its length."""
    if isinstance(values, (str, bytes)) or values is None:
        raise ValidationError(f"{where}: {what} must be a sequence of integers; got {values!r}")
    if hasattr(values, "tolist") and not isinstance(values, (list, tuple)):
        values = values.tolist()  # NumPy arrays and scalars of arrays
    try:
        items = list(values)
    except TypeError:
        raise ValidationError(
            f"{where}: {what} must be a sequence of integers; got {type(values).__name__}"
        ) from None
    if len(items) > max_length:
        raise ValidationError(
            f"{where}: {what} has {len(items)} entries; at most {max_length} are meaningful")
    if length is not None and len(items) != length:
        raise ValidationError(
            f"{where}: {what} must have {length} entries (one per dimension); got {len(items)}")
    return tuple(as_int(v, f"{what}[{i}]", where=where) for i, v in enumerate(items))
