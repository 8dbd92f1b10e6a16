"""What the data-movement family's descriptions share: the checks every page
repeats (tensors given, same DataType, same DimensionCount, outputs not
OWNED_BY_DML, float fields that fit a FLOAT) and the lowering frame to the
move program (``plan.MovePlan``), with each input's layout either the
description's own or an array's (signed strides and origin)."""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..model._checks import UINT32_MAX, _short, as_int
from ..model.data_type import DataType
from ..model.tensor_desc import TensorDesc, TensorFlags
from ..plan import MovePlan
from ._common import OperatorDesc, element_layout
from ._spec import to_float

FLOAT32_MAX = float(np.finfo(np.float32).max)


class MoveOperatorDesc(OperatorDesc):
    """Base of the operators lowering to ``MovePlan``. Subclasses implement
    ``_passes(layouts)``, ``layouts`` holding one ``(element strides, origin)``
    per input."""

    def _check_slot_tensors(self, *, same_type: bool = True, same_rank: bool = True) -> None:
        """Every slot holds TensorDescs (a ``many`` slot a non-empty sequence of
        them, stored as a tuple; an optional input may be None); outputs are not OWNED_BY_DML; where asked,
        every tensor has the first input's DataType and DimensionCount."""
        for s in self.SLOTS:
            v = getattr(self, s.attr)
            if v is None and s.optional and s.role == "input":
                continue
            if s.many:
                if isinstance(v, TensorDesc) or not isinstance(v, Sequence) or isinstance(v, (str, bytes)):
                    raise self._err(f"{s.json} must be a sequence of TensorDesc; got {type(v).__name__}")
                v = tuple(v)
                if not v:
                    raise self._err(f"{s.json} must hold at least one tensor "
                                    f"({'InputCount' if s.role == 'input' else 'OutputCount'} > 0); got 0")
                for i, t in enumerate(v):
                    if not isinstance(t, TensorDesc):
                        raise self._err(f"{s.json}[{i}] must be a TensorDesc; got {type(t).__name__}")
                self._set(s.attr, v)
            elif not isinstance(v, TensorDesc):
                raise self._err(f"{s.json} must be a TensorDesc; got {type(v).__name__}")
        tensors = self.named_tensors("input") + self.named_tensors("output")
        first_name, first = tensors[0]
        for name, t in tensors[1:]:
            if same_type and t.data_type != first.data_type:
                raise self._err(f"{name}.DataType must equal {first_name}.DataType; "
                                f"got {t.data_type.name} != {first.data_type.name}")
            if same_rank and t.rank != first.rank:
                raise self._err(f"{name}.DimensionCount must equal {first_name}.DimensionCount; "
                                f"got {t.rank} != {first.rank}")
        for name, t in self.named_tensors("output"):
            if t.flags & TensorFlags.OWNED_BY_DML:
                raise self._err(f"{name}.Flags must not include OWNED_BY_DML (a flag for inputs only)")

    def _check_sizes(self, name: str, tensor: TensorDesc, expected, rule: str) -> None:
        """``tensor.Sizes`` equals ``expected``; ``rule`` says where that comes from."""
        expected = tuple(expected)
        for i, (got, want) in enumerate(zip(tensor.sizes, expected)):
            if got != want:
                raise self._err(f"{name}.Sizes[{i}] must be {rule} = {want}; got {got} "
                                f"(Sizes {list(tensor.sizes)}, expected {list(expected)})")

    def _uint(self, attr: str, field: str, lo: int = 0) -> int:
        v = as_int(getattr(self, attr), field, where=self.OPERATOR)
        self._check_bounds_scalar(field, v, lo, UINT32_MAX)
        self._set(attr, v)
        return v

    def _check_bounds_scalar(self, field: str, value: int, lo: int, hi: int, why: str = "") -> None:
        if not lo <= value <= hi:
            raise self._err(f"{field} must be in [{lo}, {hi}]{why}; got {value}")

    def _float32(self, value, field: str) -> float:
        """A FLOAT field: a real number whose magnitude fits a float32 (NaN and
        infinities are FLOAT values too), stored as its float32 value."""
        v = to_float(value, field, self._err)
        with np.errstate(over="ignore"):
            f = np.float32(v)
        if math.isfinite(v) and not np.isfinite(f):
            raise self._err(f"{field} must fit a FLOAT (float32, magnitude <= {FLOAT32_MAX:g}); got {v!r}")
        return float(f)

    def _typed_scalar(self, type_attr: str, type_field: str, value_attr: str, value_field: str) -> None:
        """A ``DML_SCALAR_UNION`` field typed by a ``DML_TENSOR_DATA_TYPE``
        field that must equal ``OutputTensor.DataType`` (PADDING1's
        ``PaddingValue``, DIAGONAL_MATRIX1's ``Value``): an integer value in
        its type's range, a float one not overflowing its type (a finite value
        becoming infinity); both stored checked. FLOAT16 has no member of the
        union: its value is a number rounded to float16 by the kernels."""
        out = self.output_tensor
        try:
            dt = DataType.parse(getattr(self, type_attr))
        except Exception:
            raise self._err(f"{type_field} must be a DataType; got {getattr(self, type_attr)!r}") from None
        if dt != out.data_type:
            raise self._err(f"{type_field} must equal OutputTensor.DataType; got {dt.name} != {out.data_type.name}")
        self._set(type_attr, dt)
        v = getattr(self, value_attr)
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise self._err(f"{value_field} must be a number; got {_short(v)}")
        npdt = dt.numpy_dtype
        if npdt.kind in "iu":
            if isinstance(v, (float, np.floating)):
                if not (math.isfinite(v) and v == math.floor(v)):
                    raise self._err(f"{value_field} must be an integer for {type_field} {dt.name}; got {v!r}")
            v = int(v)
            info = np.iinfo(npdt)
            if not info.min <= v <= info.max:
                raise self._err(f"{value_field} must be in [{info.min}, {info.max}] for {type_field} {dt.name}; "
                                f"got {_short(v)}")
        else:
            v = to_float(v, value_field, self._err)
            with np.errstate(over="ignore"):
                overflow = math.isfinite(v) and not np.isfinite(np.array(v).astype(npdt))
            if overflow:
                raise self._err(f"{value_field} must fit {type_field} {dt.name} (magnitude <= "
                                f"{float(np.finfo(npdt).max):g}); got {v!r}")
        self._set(value_attr, v)

    def lower(self, in_strides: Sequence[int] | None = None, in_offset: int = 0, *,
              in_layouts: Sequence | None = None) -> MovePlan:
        """The move program. ``in_strides``/``in_offset`` (one input) or
        ``in_layouts`` (one ``(strides, origin)`` or None per input): the
        inputs' signed element strides and origins where the array API passes
        arrays' layouts; None uses each description's own strides."""
        inputs = self.inputs
        if in_layouts is None:
            in_layouts = [(in_strides, in_offset)] + [None] * (len(inputs) - 1)
        layouts = [element_layout(t, *(lay if lay is not None else (None, 0))) for t, lay in zip(inputs, in_layouts)]
        passes = self._passes(layouts)
        pad = getattr(passes, "pad", None)           # pad_passes' program: the backends may run it as one pass
        in_types = tuple(int(t.data_type) for t in inputs)
        out_types = tuple(int(t.data_type) for t in self.outputs)
        passes = tuple(passes)
        if pad is not None and len(passes) > 1 and len(in_types) == len(out_types) == 1 and in_types == out_types:
            return MovePlan.padded(in_types, out_types, passes, pad)
        return MovePlan(in_types=in_types, out_types=out_types, passes=passes)

    def _passes(self, layouts):
        raise NotImplementedError


def convert_scalar(value, data_type):
    """A FLOAT or scalar-union value as a value of ``data_type``, by CAST's
    rules (see ``cast``): to an integer type, truncate toward zero and
    saturate, NaN -> 0; to a float type, the float (the kernels round it to
    the type, to nearest)."""
    kind = data_type.numpy_dtype.kind
    if kind == "f":
        return float(value)
    info = np.iinfo(data_type.numpy_dtype)
    if isinstance(value, float):
        if math.isnan(value):
            return 0
        if math.isinf(value):
            return int(info.max) if value > 0 else int(info.min)
        value = math.trunc(value)
    return min(max(int(value), int(info.min)), int(info.max))


class PadPasses(tuple):
    """The passes ``pad_passes`` gives, with ``pad``: ``(mode, fill value or
    None, start, end)``, which ``lower`` hands on as ``MovePlan.pad`` (the
    CUDA backend runs such a program as one launch; runtime may not import
    ops, so it reads the program's shape from the plan instead of rebuilding
    it)."""

    pad: tuple


def pad_passes(mode: int, fill_value, in_sizes, start, end, layout, out_strides) -> PadPasses:
    """The passes of PADDING/PADDING1: the interior ``Copy`` (no map), then for
    each axis k the two border slabs (before and after the input along k;
    interior along the axes before k, whole along the axes after it): a
    ``Fill`` for CONSTANT (``mode`` 0), else a ``Copy`` whose ``AxisMap`` reads
    the input position the mode chooses. Every output element is written by
    exactly one pass. Returned as a ``PadPasses`` (a tuple) naming the
    program."""
    out = PadPasses(_pad_passes(mode, fill_value, in_sizes, start, end, layout, out_strides))
    out.pad = (int(mode), fill_value if int(mode) == 0 else None, tuple(start), tuple(end))
    return out


def _pad_passes(mode: int, fill_value, in_sizes, start, end, layout, out_strides):
    from ..plan import AxisMap, Copy, Fill
    strides, origin = layout
    r = len(in_sizes)
    out_sizes = tuple(n + s + e for n, s, e in zip(in_sizes, start, end))
    interior_offset = sum(s * t for s, t in zip(start, out_strides))
    yield Copy(0, 0, tuple(in_sizes), origin, tuple(strides), interior_offset, tuple(out_strides))
    for k in range(r):
        for side, count in (("start", start[k]), ("end", end[k])):
            if count == 0:
                continue
            sizes, dst_offset, maps = [], 0, []
            for j in range(r):
                if j < k:
                    sizes.append(in_sizes[j])
                    dst_offset += start[j] * out_strides[j]
                    maps.append(None)
                elif j == k:
                    sizes.append(count)
                    at = 0 if side == "start" else start[k] + in_sizes[k]
                    dst_offset += at * out_strides[j]
                    maps.append(AxisMap(mode, start[k] if side == "start" else -in_sizes[k], in_sizes[k]))
                else:
                    sizes.append(out_sizes[j])
                    maps.append(AxisMap(mode, start[j], in_sizes[j]) if start[j] or end[j] else None)
            if mode == 0:
                yield Fill(0, tuple(sizes), dst_offset, tuple(out_strides), fill_value)
            else:
                # a mapped axis reads the whole input along it: its source offset is the input's origin
                yield Copy(0, 0, tuple(sizes), origin, tuple(strides), dst_offset, tuple(out_strides),
                           maps=tuple(maps))
