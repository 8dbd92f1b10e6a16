"""DML_TENSOR_DATA_TYPE: DirectML's enum values, element sizes, NumPy dtypes."""
from __future__ import annotations

import enum

import numpy as np

from ._checks import _short
from .errors import UnsupportedError, ValidationError


class DataType(enum.IntEnum):
    """A tensor element type (``DML_TENSOR_DATA_TYPE``), with DirectML's own enum values: ``DataType.FLOAT32.value ==
    1`` (an ``IntEnum``: a member compares equal to its value).

    The operators use the 11 whole-byte types (FLOAT16/32/64, INT8/16/32/64, UINT8/16/32/64); UNKNOWN, UINT4 and INT4
    exist for completeness and have no element size.
    """

    UNKNOWN = 0
    FLOAT32 = 1
    FLOAT16 = 2
    UINT32 = 3
    UINT16 = 4
    UINT8 = 5
    INT32 = 6
    INT16 = 7
    INT8 = 8
    FLOAT64 = 9
    UINT64 = 10
    INT64 = 11
    UINT4 = 12
    INT4 = 13

    @property
    def size(self) -> int:
        """Element size in bytes (``UnsupportedError`` for UNKNOWN, UINT4 and INT4: no whole-byte size)."""
        try:
            return _SIZES[self]
        except KeyError:
            raise UnsupportedError(
                f"DataType.{self.name} has no whole-byte element size; "
                f"the operators of opendml use the 11 types {', '.join(t.name for t in ELEMENT_TYPES)}"
            ) from None

    @property
    def numpy_dtype(self) -> np.dtype:
        """The NumPy dtype of one element (FLOAT16 is ``numpy.float16``; ``UnsupportedError`` for UNKNOWN, UINT4 and
        INT4)."""
        try:
            return np.dtype(_NUMPY[self])
        except KeyError:
            raise UnsupportedError(f"DataType.{self.name} has no NumPy dtype") from None

    @classmethod
    def parse(cls, value) -> "DataType":
        """The data type ``value`` names: a member, its value (``1``), its name (``"FLOAT32"``, any case) or
        DirectML's (``"DML_TENSOR_DATA_TYPE_FLOAT32"``); else ``ValidationError``."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            name = value.strip().upper().removeprefix("DML_TENSOR_DATA_TYPE_")
            if name in cls.__members__:
                return cls[name]
            raise ValidationError(
                f"DataType: unknown data type {_short(value)}; expected one of {', '.join(cls.__members__)}")
        if isinstance(value, int) and not isinstance(value, (bool, enum.Enum)):   # (another enum's member: no)
            try:
                return cls(value)
            except ValueError:
                pass
        hint = ""
        if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, (np.generic, int, float))):
            hint = "; a NumPy dtype's is DataType.from_numpy(dtype)"
        raise ValidationError(f"DataType: unknown data type {_short(value)}; expected a DataType, its name "
                              f"({', '.join(cls.__members__)}, any case) or its value (0 to {max(cls)}){hint}")

    @classmethod
    def from_numpy(cls, dtype) -> "DataType":
        """The data type of a NumPy dtype (anything ``numpy.dtype`` accepts; native byte order); ``UnsupportedError``
        for none of the 11 element types (bool, complex, object, structured dtypes)."""
        if isinstance(dtype, np.dtype):
            try:
                hit = _FROM_NUMPY.get(dtype)
            except TypeError:             # a dtype that cannot be hashed: compared below
                hit = None
            if hit is not None:
                return hit
        dt = np.dtype(dtype)
        for t, name in _NUMPY.items():
            if np.dtype(name) == dt:
                return t
        raise UnsupportedError(
            f"DataType: NumPy dtype {dt} has no DirectML data type; "
            f"supported: {', '.join(sorted(set(_NUMPY.values())))}")


_NUMPY = {t: t.name.lower() for t in DataType if t.name not in ("UNKNOWN", "UINT4", "INT4")}
_SIZES = {t: np.dtype(name).itemsize for t, name in _NUMPY.items()}

#: NumPy dtype -> DataType for the 11 native-order dtypes (``from_numpy``'s common case; any other dtype is compared
#: with each in turn).
_FROM_NUMPY = {np.dtype(name): t for t, name in _NUMPY.items()}

#: The 11 element types that SLICE, SLICE1 and UNFOLD can use, in enum order.
ELEMENT_TYPES = tuple(_SIZES)
