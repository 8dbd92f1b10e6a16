"""What the operator descriptions share: slot and field declarations (``_spec``), support tables as data, checks that
read like the pages, and lowering helpers."""
from __future__ import annotations

import dataclasses
import enum as py_enum
import math
from collections.abc import Sequence

import numpy as np

from ..model._checks import NOT_NUMBERS, UINT32_MAX, _short, as_int, as_int_tuple, index_value
from ..model.data_type import DataType
from ..model.errors import UnsupportedError, ValidationError
from ..model.feature_level import FeatureLevel
from ..model.tensor_desc import MAX_RANK_BEFORE_3_0, TensorDesc, TensorFlags
from ..plan import MovePlan
from ._spec import ENUM_PREFIXES, OPERATOR_TYPES, Field, FieldKind, Tensor, snake, to_float

T = DataType
TYPES_1_0 = frozenset({T.FLOAT32, T.FLOAT16, T.INT32, T.INT16, T.UINT32, T.UINT16})
TYPES_2_1 = TYPES_1_0 | {T.INT8, T.UINT8}
TYPES_4_1 = TYPES_2_1 | {T.FLOAT64, T.INT64, T.UINT64}
#: The types of most of the family's 1_0 and 2_0 tables (FLOAT32, FLOAT16).
FLOAT16_32 = frozenset({T.FLOAT32, T.FLOAT16})


@dataclasses.dataclass(frozen=True)
class SupportRow:
    """One "DML_FEATURE_LEVEL_x_y and above" table of a page: from ``level`` on, every tensor may have ``ranks``
    dimensions and ``types`` elements, except the tensors ``slot_types`` names by DirectML field name
    (``(("IndicesTensor", types), ...)``), which take their own types (an index tensor's integer types)."""
    level: FeatureLevel
    ranks: range
    types: frozenset
    slot_types: tuple = ()

    def types_of(self, field: str) -> frozenset:
        """The types the table allows for the tensor named ``field``."""
        return dict(self.slot_types).get(field, self.types)


def support(ranks: dict, first: frozenset | None = None, wide: str = "4_1", types: dict | None = None,
            **slots: dict) -> tuple[SupportRow, ...]:
    """An operator's ``SUPPORT``: its page's tables, written as the steps each fact takes, each argument mapping a
    feature level (``"3_1"``) to the value from that level on. ``ranks``: the tensors' ranks (``4``, or ``(1, 8)``
    for 1 to 8), its first level the operator's first table (``INTRODUCED``). ``types``: the element types, by
    default the family's progression: ``first`` at the first level where given, the eight 8- to 32-bit types
    (``TYPES_2_1``) from 2_1, all 11 (``TYPES_4_1``) from ``wide``. ``slots``: tensors with types of their own, by
    DirectML name (``IndicesTensor={"1_0": ..., "3_0": ...}``). A row stands at each level where something changes."""
    def steps(table: dict) -> list:
        return sorted(((FeatureLevel.parse(k), v) for k, v in table.items()), key=lambda kv: kv[0])

    def at(steps_: list, lv: FeatureLevel, what: str):
        values = [v for k, v in steps_ if k <= lv]
        if not values:
            raise ValueError(f"support: {what} not given at the first level {lv.label} (nor before)")
        return values[-1]

    rank_steps = [(k, range(v, v + 1) if isinstance(v, int) else range(v[0], v[1] + 1)) for k, v in steps(ranks)]
    start = rank_steps[0][0]
    if types is None:
        types = {FeatureLevel.FL_2_1: TYPES_2_1, FeatureLevel.parse(wide): TYPES_4_1} | (
            {start: first} if first else {})
    type_steps, slot_steps = steps(types), {name: steps(t) for name, t in slots.items()}
    levels = sorted({k for s in (rank_steps, type_steps, *slot_steps.values()) for k, _ in s if k >= start} | {start})
    rows: list[SupportRow] = []
    for lv in levels:
        row = SupportRow(lv, at(rank_steps, lv, "ranks"), at(type_steps, lv, "types"),
                         tuple((name, at(s, lv, f"{name}'s types")) for name, s in slot_steps.items()))
        if not rows or dataclasses.replace(row, level=rows[-1].level) != rows[-1]:
            rows.append(row)
    return tuple(rows)


def plain_ints(values, n: int | None) -> tuple | None:
    """``values`` as a tuple when it is a list or tuple of ``n`` (None: at most
    64) plain ints, else None: the fast paths' common case of a field."""
    kind = type(values)
    if kind is tuple:
        t = values
    elif kind is list:
        t = tuple(values)
    else:
        return None
    if (len(t) != n) if n is not None else len(t) > 64:
        return None
    for v in t:
        if type(v) is not int:
            return None
    return t


def sequence_of(values, n: int) -> tuple | None:
    """``values`` as a tuple when it is a list or tuple of ``n`` entries, else None."""
    kind = type(values)
    if kind is tuple:
        return values if len(values) == n else None
    if kind is list and len(values) == n:
        return tuple(values)
    return None


def said_of(e: ValidationError, slot: str, where: str = "") -> str:
    """``e``'s ``TensorDesc: ...`` message said of the tensor ``slot``, then ``where`` (any other ``e`` raised again)."""
    text = str(e)
    if not text.startswith("TensorDesc: "):
        raise e
    rest = text[len("TensorDesc: "):]
    return f"{slot}.{rest}{where}" if rest[:1].isupper() else f"{slot}: {rest}{where}"


def _types(ts) -> str:
    return ", ".join(t.name for t in sorted(ts))


def _first_of(slot: Tensor):
    """The getter of a role's first tensor: the slot's, or its first where it holds many."""
    attr = slot.attr
    return (lambda self: getattr(self, attr)[0]) if slot.many else (lambda self: getattr(self, attr))


class OperatorDesc:
    """Base of the operator descriptions: frozen dataclasses that check every level-independent rule on construction and
    declare the class attributes below and ``_passes(layouts)``, their move program's passes, which ``lower`` frames
    into every operator's one plan type (``plan.MovePlan``).

    Attributes
    ----------
    OPERATOR : str
        DirectML's operator name without ``DML_OPERATOR_`` (``"SLICE1"``).
    TYPE_VALUE : int
        Its ``DML_OPERATOR_TYPE`` value (derived: its index in
        ``_spec.OPERATOR_TYPES``).
    INTRODUCED : FeatureLevel
        The feature level that introduced the operator (derived: ``SUPPORT``'s first level).
    SUPPORT : tuple of SupportRow
        The page's tensor-support tables, a row per feature level (written with ``support``).
    SLOTS : tuple of _spec.Tensor
        The tensor slots in the struct's order. An operator of single tensors, its one output last, may give ``TENSORS``
        and ``OUTPUT_DERIVABLE`` instead, ``SLOTS`` then derived from them (else they from ``SLOTS``).
    TENSORS : tuple of str
        The slots' DirectML names; by default from the dataclass fields named ``*_tensor`` (``input_tensor``:
        ``InputTensor``).
    FIELDS : tuple
        The other fields in the struct's order (``_spec`` kinds: ``Field``/``IntArray``, ``UInt``, ``Int``, ``Float``,
        ``Bool``, ``Enum``, ``ScalarUnion``, ``Struct``).
    COUNTS : dict[str, str]
        DirectML's count fields (``DimensionCount``, ``InputCount``,
        ``RepeatsCount``...) mapped to the JSON name of the array each
        counts; by default ``DimensionCount`` counts the first integer-array
        field.
    OUTPUT_DERIVABLE : bool
        Whether every output slot is optional (derived from the inputs where None).
    DEFAULT_INPUT_START : int
        The first value of the pages' example inputs (1 by default: 1, 2,
        ...; or 0, 1, ...).
    inputs : tuple of TensorDesc
        Every input tensor, in slot order (a ``many`` slot spread out);
        ``input_tensor`` is the first.
    outputs : tuple of TensorDesc
        Every output tensor, in slot order; ``output_tensor`` is the first.
    """

    OPERATOR: str
    TYPE_VALUE: int
    INTRODUCED: FeatureLevel
    SUPPORT: tuple[SupportRow, ...]
    SLOTS: tuple[Tensor, ...]
    TENSORS: tuple[str, ...] = ("InputTensor", "OutputTensor")
    FIELDS: tuple[FieldKind, ...] = ()
    COUNTS: dict[str, str] = {}
    OUTPUT_DERIVABLE: bool = True
    DEFAULT_INPUT_START: int = 1

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        tensors = [a for a in cls.__dict__.get("__annotations__", {}) if a.endswith("_tensor")]
        if tensors and not {"TENSORS", "SLOTS"} & cls.__dict__.keys():      # input_tensor: InputTensor
            cls.TENSORS = tuple(a.title().replace("_", "") for a in tensors)
        if "SLOTS" in cls.__dict__:
            cls.TENSORS = tuple(s.json for s in cls.SLOTS)
            cls.OUTPUT_DERIVABLE = all(s.optional for s in cls.SLOTS if s.role == "output")
        elif "TENSORS" in cls.__dict__ or "OUTPUT_DERIVABLE" in cls.__dict__ or not hasattr(cls, "SLOTS"):
            *ins, o = cls.TENSORS
            cls.SLOTS = (*(Tensor(i, snake(i), "input") for i in ins),
                         Tensor(o, snake(o), "output", optional=cls.OUTPUT_DERIVABLE))
        if cls.__dict__.get("OPERATOR") in OPERATOR_TYPES and "TYPE_VALUE" not in cls.__dict__:
            cls.TYPE_VALUE = OPERATOR_TYPES.index(cls.OPERATOR)
        if "SUPPORT" in cls.__dict__ and "INTRODUCED" not in cls.__dict__:
            cls.INTRODUCED = cls.SUPPORT[0].level       # the page's first table is the level it came with
        cls._ROLES = {role: tuple(s for s in cls.SLOTS if s.role == role) for role in ("input", "output")}
        for role, slots in cls._ROLES.items():       # input_tensor/output_tensor where a slot is named otherwise
            name = f"{role}_tensor"
            declared = any(name in vars(k) or name in vars(k).get("__annotations__", {}) for k in cls.__mro__)
            if slots and slots[0].attr != name and not declared:
                setattr(cls, name, property(_first_of(slots[0])))
        if "COUNTS" not in cls.__dict__:
            arrays = [f for f in cls.FIELDS if isinstance(f, Field)]
            cls.COUNTS = {"DimensionCount": arrays[0].json} if arrays else {}

    @classmethod
    def slots(cls, role: str) -> tuple[Tensor, ...]:
        return cls._ROLES[role]

    def _slot_tensors(self, role: str) -> tuple:
        out = []
        for s in self._ROLES[role]:
            v = getattr(self, s.attr)
            if v is not None or not s.optional:         # (an optional input left out: DIAGONAL_MATRIX1's)
                out.extend(v if s.many else (v,))
        return tuple(out)

    def named_tensors(self, role: str) -> tuple[tuple[str, TensorDesc], ...]:
        """``(DirectML name, tensor)`` for every tensor of ``role`` (``("InputTensors[1]", ...)`` in a ``many``
        slot)."""
        out = []
        for s in self.slots(role):
            v = getattr(self, s.attr)
            if s.many:
                out.extend((f"{s.json}[{i}]", t) for i, t in enumerate(v))
            elif v is not None or not s.optional:
                out.append((s.json, v))
        return tuple(out)

    @property
    def inputs(self) -> tuple[TensorDesc, ...]:
        return self._slot_tensors("input")

    @property
    def outputs(self) -> tuple[TensorDesc, ...]:
        return self._slot_tensors("output")

    def _err(self, message: str) -> ValidationError:
        return ValidationError(f"{self.OPERATOR}: {message}")

    def _set(self, name, value):
        object.__setattr__(self, name, value)

    def _ints(self, name: str, field: str, length: int):
        self._set(name, as_int_tuple(getattr(self, name), field, where=self.OPERATOR, length=length))

    def _check_input(self) -> TensorDesc:
        """The input tensor, checked to be a TensorDesc (the first rule of every operator)."""
        t = self.input_tensor
        if not isinstance(t, TensorDesc):
            raise self._err(f"{self.TENSORS[0]} must be a TensorDesc; got {type(t).__name__}")
        return t

    def _check_bounds(self, field: str, index: int | None, value: int, lo: int, hi: int, why: str = "") -> None:
        """``lo <= value <= hi`` for entry ``index`` of a field (None: the
        field itself), in the one message form."""
        if not lo <= value <= hi:
            at = "" if index is None else f"[{index}]"
            raise self._err(f"{field}{at} must be in [{lo}, {hi}]{why}; got {value}")

    def _check_window_fields(self, image_name: str, image: TensorDesc, d: int) -> None:
        """UNFOLD's and FOLD's window rules on their image (UNFOLD's input, FOLD's output): DimensionCount + 2
        dimensions, one entry per spatial dimension in every field, each in range, the dilated window fitting the padded
        image."""
        if image.rank != d + 2:
            raise self._err(f"{image_name}.DimensionCount must be DimensionCount + 2 = {d + 2} "
                            f"(N, C and {d} spatial); got {image.rank}")
        for f in self.FIELDS[1:]:                  # (WindowSizes, the first, gave d)
            self._ints(f.attr, f.json, d)
        what = image_name.removesuffix("Tensor").lower()
        for i in range(d):
            for f, lo in zip(self.FIELDS, (1, 1, 1, 0, 0)):
                self._check_bounds(f.json, i, getattr(self, f.attr)[i], lo, UINT32_MAX)
            size = image.sizes[i + 2]
            padded = size + self.start_padding[i] + self.end_padding[i]
            extent = self.dilations[i] * (self.window_sizes[i] - 1) + 1
            if extent > padded:
                raise self._err(
                    f"the dilated window must fit the padded {what} in spatial dimension {i}: "
                    f"Dilations[{i}] * (WindowSizes[{i}] - 1) + 1 <= {image_name}.Sizes[{i + 2}] + "
                    f"StartPadding[{i}] + EndPadding[{i}]; got {self.dilations[i]} * "
                    f"({self.window_sizes[i]} - 1) + 1 = {extent} > {size} + {self.start_padding[i]} + "
                    f"{self.end_padding[i]} = {padded}")

    def _check_slot_tensors(self, *, same_type: bool = True, same_rank: bool = True) -> None:
        """Every slot holds TensorDescs (a ``many`` slot a non-empty sequence, stored as a tuple; an optional input may
        be None); outputs are not OWNED_BY_DML; where asked, every tensor has the first one's DataType and
        DimensionCount."""
        for s in self.SLOTS:
            v = getattr(self, s.attr)
            if v is None and s.optional and s.role == "input":
                continue
            if s.many:
                self._tensor_tuple(s)
            elif not isinstance(v, TensorDesc):
                raise self._err(f"{s.json} must be a TensorDesc; got {type(v).__name__}")
        ins, outs = self.named_tensors("input"), self.named_tensors("output")
        tensors = ins + outs                    # (a generator, DIAGONAL_MATRIX, has no input)
        first_name, first = tensors[0]
        for name, t in tensors[1:]:
            if same_type and t.data_type != first.data_type:
                raise self._err(f"{name}.DataType must equal {first_name}.DataType; "
                                f"got {t.data_type.name} != {first.data_type.name}")
            if same_rank and t.rank != first.rank:
                raise self._err(f"{name}.DimensionCount must equal {first_name}.DimensionCount; "
                                f"got {t.rank} != {first.rank}")
        for name, t in outs:
            if t.flags & TensorFlags.OWNED_BY_DML:
                raise self._err(f"{name}.Flags must not include OWNED_BY_DML (a flag for inputs only)")

    def _check_tensors(self) -> None:
        self._check_slot_tensors()

    def _tensor_tuple(self, s: Tensor) -> tuple:
        """The ``many`` slot ``s`` checked to be a non-empty sequence of TensorDesc, stored and returned as a tuple."""
        v = getattr(self, s.attr)
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
        return v

    def _derive_output(self, sizes, rule: str | None = None) -> None:
        """An output left None becomes a packed one of ``sizes`` and the input's DataType (sizes out of DirectML's
        range, a size or element count above UINT32, raise an error naming the operator and, given ``rule``, their
        origin); then every slot's checks (``_check_tensors``) and, given ``rule`` (the origin of ``sizes``, in
        words), ``OutputTensor.Sizes == sizes``."""
        if self.output_tensor is None:
            try:
                self._set("output_tensor", TensorDesc(self.input_tensor.data_type, sizes))
            except ValidationError as e:
                where = f" (OutputTensor.Sizes = {rule})" if rule else ""
                raise self._err(said_of(e, "OutputTensor", where)) from None
        self._check_tensors()
        if rule is not None:
            self._check_sizes("OutputTensor", self.output_tensor, sizes, rule)

    def _enum(self, attr: str, field: str, enum) -> None:
        """An enum field given as a member, its value (an integer: no bool, float or member of another enum, which
        Python finds equal to one) or its name (short or DirectML's, any case), stored as the member."""
        v = getattr(self, attr)
        try:
            if isinstance(v, enum):
                member = v
            elif isinstance(v, str):
                member = enum[v.upper().removeprefix(ENUM_PREFIXES[enum])]
            elif isinstance(v, py_enum.Enum):              # another enum's member
                raise TypeError
            else:
                member = enum(index_value(v))          # (a bool, a 0-d bool tensor: no integer)
            self._set(attr, member)
        except (ValueError, KeyError, TypeError):
            raise self._err(f"{field} must be one of {', '.join(m.name for m in enum)}; got {v!r}") from None

    def _check_sizes(self, name: str, tensor: TensorDesc, expected, rule: str) -> None:
        """``tensor.Sizes`` equals ``expected``; ``rule`` says where that comes from."""
        expected = tuple(expected)
        for i, (got, want) in enumerate(zip(tensor.sizes, expected)):
            if got != want:
                raise self._err(f"{name}.Sizes[{i}] must be {rule} = {want}; got {got} "
                                f"(Sizes {list(tensor.sizes)}, expected {list(expected)})")

    def _int(self, attr: str, field: str, lo: int = 0, hi: int = UINT32_MAX, why: str = "") -> int:
        """An integer field in ``[lo, hi]`` (a UINT's range by default), stored as an int."""
        v = as_int(getattr(self, attr), field, where=self.OPERATOR)
        self._check_bounds(field, None, v, lo, hi, why)
        self._set(attr, v)
        return v

    def _check_axis_parts(self, many: str, parts, whole_name: str, whole) -> int:
        """JOIN's and SPLIT's ``Axis`` (checked against ``whole``) and their
        ``parts`` (the ``many`` slot), each of ``whole``'s sizes but along Axis."""
        axis = self._int("axis", "Axis")
        self._check_bounds("Axis", None, axis, 0, whole.rank - 1, f" ({whole_name}.DimensionCount - 1)")
        for i, t in enumerate(parts):
            for d in range(whole.rank):
                if d != axis and t.sizes[d] != whole.sizes[d]:
                    raise self._err(f"{many}[{i}].Sizes[{d}] must equal {whole_name}.Sizes[{d}] (every "
                                    f"dimension but Axis {axis}); got {t.sizes[d]} != {whole.sizes[d]}")
        return axis

    def _float32(self, value, field: str) -> float:
        """A FLOAT field: a real number whose magnitude fits a float32 (NaN and infinities included), stored as its
        float32 value."""
        return float(self._fitting(to_float(value, field, self._err), field, np.float32, "a FLOAT (float32, {})"))

    def _fitting(self, v: float, field: str, dtype, what: str):
        """``v`` as a value of ``dtype``, refused where a finite ``v`` overflows (``what``: the type as messages
        name it, ``{}`` standing for its limit)."""
        with np.errstate(over="ignore"):
            f = np.array(v).astype(dtype)
        if math.isfinite(v) and not np.isfinite(f):
            raise self._err(f"{field} must fit {what.format(f'magnitude <= {float(np.finfo(dtype).max):g}')}; "
                            f"got {v!r}")
        return f

    def _typed_scalar(self, type_attr: str, type_field: str, value_attr: str, value_field: str) -> None:
        """A ``DML_SCALAR_UNION`` field typed by a ``DML_TENSOR_DATA_TYPE`` field that must be
        ``OutputTensor.DataType`` (PADDING1's ``PaddingValue``, DIAGONAL_MATRIX1's ``Value``), both stored checked:
        an integer value in its type's range, a float one not overflowing its type (a finite value becoming
        infinity). FLOAT16, no member of the union, takes a number the kernels round to float16."""
        out = self.output_tensor
        try:
            dt = DataType.parse(getattr(self, type_attr))
        except Exception:
            raise self._err(f"{type_field} must be a DataType; got {getattr(self, type_attr)!r}") from None
        if dt != out.data_type:
            raise self._err(f"{type_field} must equal OutputTensor.DataType; got {dt.name} != {out.data_type.name}")
        self._set(type_attr, dt)
        v = getattr(self, value_attr)
        if isinstance(v, NOT_NUMBERS) or not isinstance(v, (int, float, np.integer, np.floating)):
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
            self._fitting(v, value_field, npdt, f"{type_field} {dt.name} ({{}})")
        self._set(value_attr, v)

    def lower(self, in_strides: Sequence[int] | None = None, in_offset: int = 0, *,
              in_layouts: Sequence | None = None) -> MovePlan:
        """The move program (``plan.MovePlan``, every operator's one plan type). Where the array API passes arrays'
        layouts: ``in_strides``/``in_offset`` (the first input's) or ``in_layouts`` (one ``(strides, origin)`` or
        None per input), signed element strides (one per dimension) and origins; None: each description's own
        strides. ``ValidationError`` for layouts of another count or strides of another length."""
        inputs, outputs = self._slot_tensors("input"), self._slot_tensors("output")
        given = in_layouts is not None or in_strides is not None
        if in_layouts is None:
            in_layouts = ((in_strides, in_offset),) + (None,) * (len(inputs) - 1)
        layouts = [(t.element_strides, 0) if lay is None or lay[0] is None else
                   (lay[0] if type(lay[0]) is tuple else tuple(lay[0]), lay[1]) for t, lay in zip(inputs, in_layouts)]
        if given and (len(in_layouts) != len(inputs) or
                      [len(s) for s, _ in layouts] != [len(t.sizes) for t in inputs]):
            raise self._err(f"lower's input layouts must be one per input tensor ({len(inputs)}), each with one "
                            f"stride per dimension ({', '.join(str(t.rank) for t in inputs)}); got "
                            f"{len(in_layouts)} with {', '.join(str(len(s)) for s, _ in layouts) or 'no'} strides")
        passes = self._passes(layouts)
        in_types = (int(inputs[0].data_type),) if len(inputs) == 1 else tuple([int(t.data_type) for t in inputs])
        out_types = (int(outputs[0].data_type),) if len(outputs) == 1 else tuple([int(t.data_type) for t in outputs])
        pad = getattr(passes, "pad", None)           # pad_passes' program: the backends may run it as one pass
        if pad is not None and len(passes) > 1 and len(in_types) == len(out_types) == 1 and in_types == out_types:
            return MovePlan.padded(in_types, out_types, tuple(passes), pad)
        return MovePlan(in_types, out_types, passes if type(passes) is tuple else tuple(passes))

    def _passes(self, layouts) -> Sequence:
        """The program's passes, ``layouts`` holding one ``(element strides, origin)`` per input (each operator's)."""
        raise NotImplementedError

    def validate(self, feature_level: "FeatureLevel | str" = FeatureLevel.FL_6_4) -> "OperatorDesc":
        """Check the page's support tables at ``feature_level`` (a ``FeatureLevel`` or its label such as ``"6_4"``) for
        every tensor of every slot, then ``_validate_level`` (the operator's own level-dependent rules); the rules that
        do not depend on a level were checked on construction. Returns ``self``, so calls can be chained.

        Raises
        ------
        ValidationError
            If ``feature_level`` is not a known feature level.
        UnsupportedError
            If the operator was introduced after ``feature_level``, a
            tensor's rank or data type is not in the support table at that
            level, or an operator's own level-dependent rule (such as a
            padding mode introduced later) is not met.
        """
        level = FeatureLevel.parse(feature_level)
        if level < self.INTRODUCED:
            raise UnsupportedError(
                f"{self.OPERATOR}: the operator was introduced in feature level "
                f"{self.INTRODUCED.label}; got feature level {level.label}")
        row = [r for r in self.SUPPORT if r.level <= level][-1]
        ranks = row.ranks
        if level < FeatureLevel.FL_3_0:
            ranks = range(ranks.start, min(ranks.stop, MAX_RANK_BEFORE_3_0 + 1))
        for field, t in self.named_tensors("input") + self.named_tensors("output"):
            if t.rank not in ranks:
                raise UnsupportedError(
                    f"{self.OPERATOR}: {field}.DimensionCount must be in [{ranks.start}, {ranks.stop - 1}] "
                    f"at feature level {level.label}; got {t.rank}")
            types = row.types_of(field)
            if t.data_type not in types:
                later = [r.level.label for r in self.SUPPORT if t.data_type in r.types_of(field)]
                hint = f"; it needs feature level {later[0]} or later" if later else ""
                raise UnsupportedError(
                    f"{self.OPERATOR}: {field}.DataType {t.data_type.name} is not supported at feature "
                    f"level {level.label} (supported: {_types(types)}){hint}")
        self._validate_level(level)
        return self

    def _validate_level(self, level: FeatureLevel) -> None:
        """An operator's rules that depend on the feature level beyond its
        support table (none by default)."""

    @property
    def output_sizes(self) -> tuple[tuple[int, ...], ...]:
        """The sizes of every output, in slot order (the formula: each operator's ``output_sizes_of`` where it has
        one)."""
        return tuple(t.sizes for t in self.outputs)

    def lowest_feature_level(self) -> FeatureLevel | None:
        """The lowest feature level at which this description is valid."""
        for level in FeatureLevel:
            try:
                self.validate(level)
            except UnsupportedError:
                continue
            return level
        return None

    def __repr__(self) -> str:
        fields = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self))
        return f"{type(self).__name__}({fields})"


class FastPathDesc(OperatorDesc):
    """An operator description with a one-pass check of the common valid case: ``_fast_path()`` checks it by
    ``_check_rules``'s rules and stores the fields as ``_check_rules`` would (plain ints, an output that is derived or
    agrees), returning True; it returns False, nothing stored, for anything else, which ``_check_rules`` then checks
    rule by rule, naming what is wrong. Both give the same description (tests/test_newshape_fastpaths.py)."""

    def __post_init__(self):
        if not self._fast_path():
            self._check_rules()


class AdjointByCall:
    """Mixin of an operator linear for every data type that states its adjoint as an array-API call
    (``adjoint_call(input_sizes, call_args)`` -> ``(function name, arguments, shape or None)``, symbolic-safe, which the
    PyTorch operators' backward formulas read as well): ``adjoint`` is that call on ``grad`` through ``api``, reshaped
    to ``shape`` where given."""

    def linear_part(self):
        return self

    def adjoint(self, api, grad) -> tuple:
        name, args, shape = self.adjoint_call(self.inputs[0].sizes, self.call_args())
        out = getattr(api, name)(grad, *args)
        return (out if shape is None else api.reshape(out, shape),)
