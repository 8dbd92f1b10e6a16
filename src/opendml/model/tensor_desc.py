"""DML_BUFFER_TENSOR_DESC: sizes and element strides over a byte buffer.

A ``TensorDesc`` checks on construction every rule that does not depend on a
feature level; ``opendml.ops`` adds the per-level tables.
"""
from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Sequence

from ._checks import UINT32_MAX, UINT64_MAX, _short, as_int, as_int_tuple
from .data_type import ELEMENT_TYPES, DataType
from .errors import ValidationError

MAX_RANK = 8                      # DML_TENSOR_DIMENSION_COUNT_MAX1 (from 3_0)
MAX_RANK_BEFORE_3_0 = 5           # DML_TENSOR_DIMENSION_COUNT_MAX
MAX_ELEMENTS = UINT32_MAX
MINIMUM_BUFFER_TENSOR_ALIGNMENT = 16
#: The largest span (in elements) whose byte size, rounded up to 4, fits in 64 bits for every element size (at most 8).
_MAX_SPAN = (UINT64_MAX - 3) // 8


class TensorFlags(enum.IntFlag):
    """``DML_TENSOR_FLAGS``: ``NONE``, or ``OWNED_BY_DML`` for an input bound once, at initialization
    (``Device.initialize_operator``), not at every execution."""

    NONE = 0
    OWNED_BY_DML = 1


def packed_strides(sizes: Sequence[int]) -> tuple[int, ...]:
    """Packed row-major strides (last dimension fastest), in elements: ``strides[i] == prod(sizes[i + 1:])``; ``(15,
    15, 5, 1)`` for ``[1, 1, 3, 5]``. ``ValidationError`` where ``sizes`` breaks ``TensorDesc``'s rule (1 to 8
    integers, each in [1, 2**32 - 1], at most 2**32 - 1 elements)."""
    return _packed_strides(check_sizes_strides(sizes, None, where="packed_strides")[0])


def _packed_strides(sizes: tuple[int, ...]) -> tuple[int, ...]:
    """``packed_strides`` of sizes already checked."""
    strides = [1] * len(sizes)
    step = 1
    for i in range(len(sizes) - 1, -1, -1):
        strides[i] = step
        step *= sizes[i]
    return tuple(strides)


def nhwc_strides(sizes: Sequence[int]) -> tuple[int, ...]:
    """Packed channels-last (NHWC / NDHWC) strides, as DirectML describes such data, for sizes in NCHW or NCDHW
    order: ``{H*W*C, 1, W*C, C}`` for ``{N, C, H, W}`` (``{D*H*W*C, 1, H*W*C, W*C, C}`` for ``{N, C, D, H, W}``).
    ``ValidationError`` for other than 4 or 5 sizes, or sizes breaking ``TensorDesc``'s rule."""
    sizes = check_sizes_strides(sizes, None, where="nhwc_strides")[0]
    if len(sizes) not in (4, 5):
        raise ValidationError(f"nhwc_strides: sizes must have 4 (NCHW) or 5 (NCDHW) entries; got {len(sizes)}")
    strides = [0] * len(sizes)
    step = 1
    for axis in [1, *range(len(sizes) - 1, 1, -1), 0]:  # fastest first: C, W, H, (D), N
        strides[axis] = step
        step *= sizes[axis]
    return tuple(strides)


def round_up_4(nbytes: int) -> int:
    """``nbytes`` rounded up to a multiple of 4 (DirectML's buffer sizes)."""
    return (nbytes + 3) & ~3


def check_sizes_strides(sizes, strides, *, where: str):
    """Sizes and strides, as tuples of ints (strides may be None), checked by every DML_BUFFER_TENSOR_DESC rule not
    depending on a feature level: 1 to 8 dimensions, sizes in [1, UINT32_MAX], at most UINT32_MAX elements, strides
    (one per dimension) in [0, UINT32_MAX]."""
    sizes = as_int_tuple(sizes, "Sizes", where=where)
    if not 1 <= len(sizes) <= MAX_RANK:
        raise ValidationError(f"{where}: DimensionCount must be in [1, {MAX_RANK}]; got {len(sizes)}")
    for i, s in enumerate(sizes):
        if not 1 <= s <= UINT32_MAX:
            raise ValidationError(f"{where}: Sizes[{i}] must be in [1, {UINT32_MAX}]; got {s}")
    count = math.prod(sizes)
    if count > MAX_ELEMENTS:
        raise ValidationError(
            f"{where}: the element count (product of Sizes {list(sizes)}) must be <= {MAX_ELEMENTS}; got {count}")
    if strides is not None:
        strides = as_int_tuple(strides, "Strides", where=where, length=len(sizes))
        for i, t in enumerate(strides):
            if not 0 <= t <= UINT32_MAX:
                raise ValidationError(f"{where}: Strides[{i}] must be in [0, {UINT32_MAX}]; got {t}")
    return sizes, strides


def _span(sizes: tuple, strides: tuple) -> int:
    """``sum((sizes[i] - 1) * strides[i]) + 1`` where ``strides`` holds a plain int in [0, UINT32_MAX] per size
    (sizes checked) and the byte size fits in 64 bits for any element size; else 0."""
    if len(strides) != len(sizes):
        return 0
    span = 1
    for s, t in zip(sizes, strides):
        if type(t) is not int or not 0 <= t <= UINT32_MAX:
            return 0
        span += (s - 1) * t
    return span if span <= _MAX_SPAN else 0


def _buffer_tensor_size(element_size: int, sizes, strides) -> int:
    """DMLCalcBufferTensorSize of already checked sizes and strides."""
    if strides is None:
        count = math.prod(sizes)
    else:
        count = sum((s - 1) * t for s, t in zip(sizes, strides)) + 1
    return round_up_4(count * element_size)


def calc_buffer_tensor_size(data_type: "DataType | str | int", sizes: Sequence[int],
                            strides: Sequence[int] | None = None) -> int:
    """``DMLCalcBufferTensorSize``: the minimum byte size of a buffer holding the tensor, rounded up to a multiple of
    4, computed in 64 bits: ``prod(sizes) * element_size`` without strides, ``(sum((sizes[i] - 1) * strides[i]) + 1) *
    element_size`` with them.

    Parameters
    ----------
    data_type : DataType, str or int
        One of the 11 element types (anything ``DataType.parse`` accepts).
    sizes : sequence of int
        1 to 8 sizes, each in [1, 2**32 - 1], at most 2**32 - 1 elements.
    strides : sequence of int, optional
        One per dimension, each in [0, 2**32 - 1], in elements; None (the default): packed.

    Raises
    ------
    ValidationError
        If an argument breaks a rule above (as ``TensorDesc`` checks it) or the size does not fit in 64 bits.
    """
    return _checked_size(data_type, sizes, strides, "calc_buffer_tensor_size")[3]


def _checked_size(data_type, sizes, strides, w: str) -> tuple:
    """``(DataType, sizes, strides, DMLCalcBufferTensorSize)``, each checked."""
    dt = DataType.parse(data_type)
    if dt not in _SIZE_OF:
        raise ValidationError(f"{w}: DataType {dt.name} is not an element type of these operators")
    sizes, strides = check_sizes_strides(sizes, strides, where=w)
    size = _buffer_tensor_size(dt.size, sizes, strides)
    if size > UINT64_MAX:
        raise ValidationError(f"{w}: DMLCalcBufferTensorSize must fit in 64 bits (TotalTensorSizeInBytes is "
                              f"UINT64); got {size}")
    return dt, sizes, strides, size


@dataclasses.dataclass(frozen=True, init=False)
class TensorDesc:
    """A DirectML buffer tensor description (``DML_BUFFER_TENSOR_DESC``).

    Sizes and strides count elements, never bytes, in the logical order (NCHW for images) whatever the memory layout.
    Construction checks every rule that does not depend on a feature level and stores the values normalised (a
    ``DataType``, tuples of ints, the total size filled in). Descriptions are frozen: threads may share them.

    Parameters
    ----------
    data_type : DataType, str or int
        One of the 11 element types.
    sizes : sequence of int
        1 to 8 sizes, each in [1, 2**32 - 1], at most 2**32 - 1 elements.
    strides : sequence of int, optional
        One per dimension, each in [0, 2**32 - 1]: 0 broadcasts, a stride above the packed one pads. None (the default):
        packed.
    total_tensor_size_in_bytes : int, optional
        At least ``calc_buffer_tensor_size(data_type, sizes, strides)`` (the default), at most 2**64 - 1.
    guaranteed_base_offset_alignment : int, default 0
        0 (no promise) or a power of two at least the element size and at most 2**31 (a UINT); a binding's offset must
        be a multiple of it and of 16.
    flags : TensorFlags, default TensorFlags.NONE
        ``NONE`` or ``OWNED_BY_DML``.

    Raises
    ------
    ValidationError
        If a field breaks its rule; the message names the field and the
        values.
    """

    data_type: DataType
    sizes: tuple[int, ...]
    strides: tuple[int, ...] | None = None
    total_tensor_size_in_bytes: int | None = None
    guaranteed_base_offset_alignment: int = 0
    flags: TensorFlags = TensorFlags.NONE

    def __init__(self, data_type: "DataType | str | int", sizes: Sequence[int], strides: Sequence[int] | None = None,
                 total_tensor_size_in_bytes: int | None = None, guaranteed_base_offset_alignment: int = 0,
                 flags: TensorFlags = TensorFlags.NONE):
        # The common case, decided in one pass: a DataType member, 1 to 8 plain int sizes (a list or tuple), packed
        # strides or plain int ones, the other fields at their defaults, every rule met. Anything else (every invalid
        # description included) is stored as given and checked rule by rule by __post_init__, naming what is wrong.
        d = self.__dict__
        size = _SIZE_OF.get(data_type) if type(data_type) is DataType else None
        kind = type(sizes)
        if (size is not None and (kind is tuple or kind is list) and 0 < len(sizes) <= MAX_RANK
                and total_tensor_size_in_bytes is None and flags is _NONE
                and type(guaranteed_base_offset_alignment) is int and not guaranteed_base_offset_alignment):
            dims = tuple(sizes) if kind is list else sizes
            count = 1                                             # 1 to 8 plain ints >= 1
            for s in dims:
                if type(s) is not int or s < 1:
                    count = 0
                    break
                count *= s
            if 0 < count <= MAX_ELEMENTS:                         # so each size <= UINT32_MAX too
                steps, span = None, count                         # packed: the span is the count
                if strides is not None:
                    kind = type(strides)
                    steps = tuple(strides) if kind is list else strides if kind is tuple else None
                    span = 0 if steps is None else _span(dims, steps)
                if span:
                    d["data_type"], d["sizes"], d["strides"] = data_type, dims, steps
                    d["total_tensor_size_in_bytes"] = (span * size + 3) & ~3
                    d["guaranteed_base_offset_alignment"], d["flags"] = 0, _NONE
                    return
        d["data_type"], d["sizes"], d["strides"] = data_type, sizes, strides
        d["total_tensor_size_in_bytes"] = total_tensor_size_in_bytes
        d["guaranteed_base_offset_alignment"], d["flags"] = guaranteed_base_offset_alignment, flags
        self.__post_init__()

    def __post_init__(self):
        """Every rule, one at a time, in the page's order: a description the fast path of ``__init__`` did not take."""
        w = "TensorDesc"
        set_ = object.__setattr__.__get__(self)
        dt, sizes, strides, minimum = _checked_size(self.data_type, self.sizes, self.strides, w)
        set_("data_type", dt)
        set_("sizes", sizes)
        set_("strides", strides)
        if self.total_tensor_size_in_bytes is None:
            set_("total_tensor_size_in_bytes", minimum)
        else:
            total = as_int(self.total_tensor_size_in_bytes, "TotalTensorSizeInBytes", where=w)
            if not minimum <= total <= UINT64_MAX:
                raise ValidationError(
                    f"{w}: TotalTensorSizeInBytes must be >= DMLCalcBufferTensorSize = {minimum} "
                    f"(and fit in 64 bits); got {total}")
            set_("total_tensor_size_in_bytes", total)
        align = as_int(self.guaranteed_base_offset_alignment, "GuaranteedBaseOffsetAlignment", where=w)
        if align != 0 and (align < dt.size or align & (align - 1) or align > UINT32_MAX):
            raise ValidationError(
                f"{w}: GuaranteedBaseOffsetAlignment must be 0 or a power of two >= the element size "
                f"{dt.size} and <= {1 << 31} (the largest a UINT holds); got {align}")
        set_("guaranteed_base_offset_alignment", align)
        if isinstance(self.flags, enum.Enum) and not isinstance(self.flags, TensorFlags):
            raise ValidationError(f"{w}: Flags must be a TensorFlags or an integer; got {_short(self.flags)}")
        flags = as_int(self.flags, "Flags", where=w)
        if flags & ~int(TensorFlags.OWNED_BY_DML):
            raise ValidationError(f"{w}: Flags must be NONE (0) or OWNED_BY_DML (1); got {flags}")
        set_("flags", TensorFlags(flags))

    @classmethod
    def nhwc(cls, data_type, sizes, **kw) -> "TensorDesc":
        """A description of packed channels-last data for 4 or 5 sizes in NCHW or NCDHW order (strides:
        ``nhwc_strides``; ``kw``: the other fields); ``ValidationError`` as ``nhwc_strides`` and ``TensorDesc`` raise
        it."""
        return cls(data_type, sizes, nhwc_strides(sizes), **kw)

    @property
    def rank(self) -> int:
        """The number of dimensions (DirectML's ``DimensionCount``)."""
        return len(self.sizes)

    @property
    def element_strides(self) -> tuple[int, ...]:
        """The strides in elements, packed ones when none were given."""
        return self.strides if self.strides is not None else _packed_strides(self.sizes)

    @property
    def element_size(self) -> int:
        """The size of one element in bytes."""
        return self.data_type.size

    @property
    def min_size_in_bytes(self) -> int:
        """DMLCalcBufferTensorSize of this description."""
        return _buffer_tensor_size(self.data_type.size, self.sizes, self.strides)

    @property
    def required_alignment(self) -> int:
        """The alignment a binding offset must have for this tensor."""
        return max(MINIMUM_BUFFER_TENSOR_ALIGNMENT, self.guaranteed_base_offset_alignment)

    def with_(self, **changes) -> "TensorDesc":
        """A new description with the fields ``changes`` names replaced, checked again (``ValidationError`` if it
        breaks a rule); this one is unchanged. A TotalTensorSizeInBytes at its default (the minimum) follows the new
        sizes, strides and type unless ``changes`` names it."""
        if "total_tensor_size_in_bytes" not in changes and self.total_tensor_size_in_bytes == self.min_size_in_bytes:
            changes["total_tensor_size_in_bytes"] = None
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        parts = [f"DataType.{self.data_type.name}", f"sizes={list(self.sizes)}"]
        if self.strides is not None:
            parts.append(f"strides={list(self.strides)}")
        if self.total_tensor_size_in_bytes != self.min_size_in_bytes:
            parts.append(f"total_tensor_size_in_bytes={self.total_tensor_size_in_bytes}")
        if self.guaranteed_base_offset_alignment:
            parts.append(f"guaranteed_base_offset_alignment={self.guaranteed_base_offset_alignment}")
        if self.flags:
            parts.append("flags=TensorFlags.OWNED_BY_DML")
        return f"TensorDesc({', '.join(parts)})"


#: Element size of each element type, keyed by member (looked up only for a DataType).
_SIZE_OF = {t: t.size for t in ELEMENT_TYPES}
_NONE = TensorFlags.NONE
