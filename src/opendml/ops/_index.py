"""What the index-driven operators (GATHER, GATHER_ELEMENTS, GATHER_ND, GATHER_ND1, SCATTER_ELEMENTS, SCATTER_ND,
ONE_HOT, REVERSE_SUBSEQUENCES) share: index types per feature level, support tables as data, the checks every page
repeats (an integer index tensor, one DimensionCount for all tensors, leading dimensions that "are ignored" being 1),
and lowering helpers to the indexed passes (``plan.Gather``, ``plan.Scatter``, ``plan.IndexAxis``).

A description holds no data, so index values are never checked here; the passes make every value safe
(``plan.IndexAxis``): the gathers and scatters clamp a coordinate into its dimension (GATHER's page's rule, applied
to all), ONE_HOT skips an index outside ``[-depth, depth)``, REVERSE_SUBSEQUENCES clamps a length to the axis; of
repeated scatter indices the last write in the indices' row-major order wins, on every backend
(docs/operators/index-family.md)."""
from __future__ import annotations

import dataclasses

from ..model.data_type import DataType
from ..model.errors import UnsupportedError, ValidationError
from ..model.feature_level import FeatureLevel
from ..model.tensor_desc import TensorDesc
from ..plan import INDEX_CLAMP, INDEX_POSITION, Copy, Fill, Gather, IndexAxis, Scatter
from ._common import TYPES_4_1, SupportRow, _types, support
from ._move import MoveOperatorDesc

T = DataType
#: The index types from feature level 3_0 (INT64, INT32, UINT64, UINT32); UINT32 only before.
INDEX_TYPES_3_0 = frozenset({T.INT64, T.INT32, T.UINT64, T.UINT32})
INDEX_TYPES_1_0 = frozenset({T.UINT32})

#: The index functions' shared parameter entries (NumPy style), for their bindings' docstrings.
INDICES_DOC = """indices : integer array
        {what} (int32, int64, uint32 or uint64; negative values of a
        signed type count from the end), of any framework (moved to the
        data's)."""
CHECK_INDICES_DOC = """check_indices : bool, optional
        Check every index first (default): the first one out of range raises
        ``ValidationError`` naming its value and position. False skips the
        check (out-of-range indices are then clamped into the dimension).
        Indices traced by ``jax.jit`` or compiled by ``torch.compile``
        with fixed sizes (Inductor, ``aot_eager``) have no values while
        traced: they are not checked, and are clamped as with False (with
        dynamic shapes the compiled graph runs the function on each call's
        tensors, which checks them)."""


def dims(x) -> tuple[int, ...]:
    """An array's shape as ints (an array of any framework)."""
    return tuple(int(n) for n in x.shape)


def elements_axis(api, where: str, x, indices, axis, check_indices):
    """GATHER_ELEMENTS' and SCATTER_ELEMENTS' array rules (``arguments``): indices of ``x``'s rank, the axis, the index
    check; returns (x's shape, the indices' shape, the axis)."""
    xs, is_ = dims(x), dims(indices)
    if len(xs) != len(is_):
        raise ValidationError(f"{where}: indices must have x's number of dimensions {len(xs)}; got {len(is_)}")
    a = api.axis(axis, len(xs), where)
    if check_indices and len(xs):
        api.check_indices(indices, xs[a], where)
    return xs, is_, a


def nd_rank(xs, is_, b: int) -> int:
    """The DimensionCount GATHER_ND1 and SCATTER_ND give every tensor of x's and the indices' shapes, ``b`` batch
    dimensions."""
    q = is_[-1] if is_ else 0
    return max(len(xs), len(is_), len(is_) - 1 + len(xs) - b - q, 1)


def tuple_size(where: str, is_) -> int:
    """The index tuples' size q (the indices' last axis) of GATHER_ND1 and SCATTER_ND."""
    if not is_:
        raise ValidationError(f"{where}: indices must have at least one dimension (the index tuples); got 0")
    return is_[-1]


def index_support(first: str, first_types: frozenset | None = None) -> tuple[SupportRow, ...]:
    """The tables of the gathers, the scatters and ONE_HOT: from ``first`` (the page's oldest table) ``first_types``
    in 4-D with UINT32 indices; 2_1 the eight 8/16/32-bit types; 3_0 1 to 8 dimensions and the four index types (so
    negative indices, of the signed types, from 3_0); 4_1 the 64-bit element types."""
    return support({first: 4, "3_0": (1, 8)}, first=first_types,
                   IndicesTensor={"1_0": INDEX_TYPES_1_0, "3_0": INDEX_TYPES_3_0})


class IndexOperatorDesc(MoveOperatorDesc):
    """Base of the index-driven operators: ``INDEX_SLOT`` is the index tensor's field (``IndicesTensor``;
    REVERSE_SUBSEQUENCES' ``SequenceLengthsTensor``), ``INDEX_ATTR`` its attribute."""

    INDEX_SLOT = "IndicesTensor"
    INDEX_ATTR = "indices_tensor"
    DEFAULT_INPUT_START = 0
    #: The integer types the index tensor may have at any level.
    INDEX_ANY_LEVEL = INDEX_TYPES_3_0
    #: The tensors of one DataType (DirectML names).
    DATA_SLOTS = ("InputTensor", "OutputTensor")

    @property
    def ADJOINT_INPUTS(self) -> tuple[int, ...]:  # noqa: N802 - the ``_spec`` declaration's name
        """The index tensor's input position: its values are what the
        adjoint reads (see ``_spec``)."""
        return (self._index_position(),)

    def _index_position(self) -> int:
        return [name for name, _ in self.named_tensors("input")].index(self.INDEX_SLOT)

    def chunking(self):
        """Block-wise runs (Dask, see ``_spec``): every axis in one chunk
        (the result's axes are not the inputs' one for one); the
        element-wise gathers and scatters need only ``Axis`` whole (``WholeAxis``)."""
        return {k: 0 for k in range(self.inputs[0].rank)}

    def adjoint(self, api, grad, indices):
        """One array per input: the index-driven adjoint program
        (``IndexAdjointDesc``) for each data input, None for the indices."""
        k = self._index_position()
        return tuple(None if j == k else api.index_adjoint(self, j, grad, indices)
                     for j in range(len(self.inputs)))

    def _check_tensors(self) -> None:
        """Every slot a TensorDesc of one DimensionCount, no output OWNED_BY_DML (``_check_slot_tensors``); an index
        tensor of an integer index type; the tensors of ``DATA_SLOTS`` (DirectML names) of the first one's DataType."""
        self._check_slot_tensors(same_type=False)
        idx = getattr(self, self.INDEX_ATTR)
        if idx.data_type not in self.INDEX_ANY_LEVEL:
            # at no level: the support tables' fault, worded as ``validate``'s
            raise UnsupportedError(
                f"{self.OPERATOR}: {self.INDEX_SLOT}.DataType {idx.data_type.name} is not supported at feature "
                f"level {max(FeatureLevel).label} (supported: {_types(self.SUPPORT[-1].types_of(self.INDEX_SLOT))})")
        named = dict(self.named_tensors("input") + self.named_tensors("output"))
        data_slots = self.DATA_SLOTS
        for name in data_slots[1:]:
            t, first = named[name], named[data_slots[0]]
            if t.data_type != first.data_type:
                raise self._err(f"{name}.DataType must equal {data_slots[0]}.DataType; "
                                f"got {t.data_type.name} != {first.data_type.name}")

    def _same_rank(self, name: str, tensor, inp: TensorDesc) -> TensorDesc:
        """``tensor`` (slot ``name``) is a TensorDesc of InputTensor's DimensionCount, which all these operators'
        tensors share (leading 1s pad the meaningful dimensions)."""
        if not isinstance(tensor, TensorDesc):
            raise self._err(f"{name} must be a TensorDesc; got {type(tensor).__name__}")
        if tensor.rank != inp.rank:
            raise self._err(f"{name}.DimensionCount must equal InputTensor.DimensionCount; "
                            f"got {tensor.rank} != {inp.rank}")
        return tensor

    def _axis_field(self, attr: str, field: str, rank: int, of: str) -> int:
        axis = self._int(attr, field)
        self._check_bounds(field, None, axis, 0, rank - 1, f" ([0, {of}.DimensionCount))")
        return axis

    def _check_leading_ones(self, name: str, tensor: TensorDesc, meaningful: int, field: str) -> None:
        """The dimensions before the last ``meaningful`` ones are 1 (the pages:
        "after ignoring any irrelevant leading ones")."""
        for d in range(tensor.rank - meaningful):
            if tensor.sizes[d] != 1:
                raise self._err(f"{name}.Sizes[{d}] must be 1 (a leading dimension before the last {field} = "
                                f"{meaningful}); got {tensor.sizes[d]} (Sizes {list(tensor.sizes)})")

    def _check_all_but_axis(self, name: str, tensor: TensorDesc, ref_name: str, ref: TensorDesc, axis: int,
                            axis_size: int | None = None) -> None:
        """``tensor.Sizes`` equals ``ref.Sizes`` in every dimension but ``axis`` (there ``axis_size``, if given)."""
        for d in range(ref.rank):
            if d == axis:
                if axis_size is not None and tensor.sizes[d] != axis_size:
                    raise self._err(f"{name}.Sizes[{d}] (the Axis dimension) must be {axis_size}; "
                                    f"got {tensor.sizes[d]}")
            elif tensor.sizes[d] != ref.sizes[d]:
                raise self._err(f"{name}.Sizes[{d}] must equal {ref_name}.Sizes[{d}] (every dimension but "
                                f"Axis {axis}); got {tensor.sizes[d]} != {ref.sizes[d]}")

    def _passes(self, layouts):
        return self._index_passes(layouts, [t.element_strides for t in self.outputs])

    def _index_passes(self, layouts, out_strides):
        """The passes for the inputs' ``layouts`` and the outputs' element
        strides ``out_strides`` (the adjoints lower with a gradient's)."""
        raise NotImplementedError


def right_aligned(strides, logical_rank: int) -> tuple[int, ...]:
    """The strides of a tensor's last ``logical_rank`` dimensions for an index
    space of that many dimensions (a tensor of fewer dimensions: 0 for the
    extra leading ones, which have size 1)."""
    strides = tuple(strides)
    extra = logical_rank - len(strides)
    if extra >= 0:
        return (0,) * extra + strides
    return strides[-extra:]


def position(index: int, offset: int, index_strides, stride: int, bound: int, *,
             out_of_range: int = INDEX_CLAMP, mode: int = INDEX_POSITION, axis: int = 0) -> IndexAxis:
    return IndexAxis(index, int(offset), tuple(int(s) for s in index_strides), int(stride), int(bound), mode,
                     out_of_range, axis)


def _remap(indices, slot: int) -> tuple[IndexAxis, ...]:
    return tuple(dataclasses.replace(ix, index=slot) for ix in indices)


@dataclasses.dataclass(frozen=True, repr=False)
class _OfPrimal(IndexOperatorDesc):
    """``IndexAdjointDesc`` and ``IndexPrimalDesc`` (no DirectML operators): linear maps built from the passes of
    ``primal``, an index-driven description, for its data input ``wrt``; the indices are their input 1 (``_like``
    names input 0 and the output)."""

    primal: IndexOperatorDesc
    wrt: int

    TYPE_VALUE = -1
    DEFAULT_INPUT_START = 1
    SUPPORT = support({"1_0": (1, 8)}, types={"1_0": TYPES_4_1}, IndicesTensor={"1_0": INDEX_TYPES_3_0})

    def linear_part(self):
        return self

    def __post_init__(self):
        p = self.primal
        if not isinstance(p, IndexOperatorDesc) or p.linear_part() is None:
            raise self._err(f"primal must be a differentiable index-driven description; got {type(p).__name__}")
        inputs, out = self._like(p)
        for (name, want, whose), got in zip(inputs, self.inputs):
            if not isinstance(got, TensorDesc) or got.sizes != want.sizes or got.data_type != want.data_type:
                raise self._err(f"{name} must have {whose}sizes {list(want.sizes)} and DataType "
                                f"{want.data_type.name}; got {got!r}")
        self._set("output_tensor", TensorDesc(out.data_type, out.sizes))

    def _like(self, p) -> tuple[tuple, TensorDesc]:
        """``((name, the tensor input i must match, whose sizes for messages), ...)`` and the tensor the output
        is packed like."""
        raise NotImplementedError

    def _primal_layouts(self, index_layout, wrt_layout) -> list:
        """The primal's input layouts: ``index_layout`` for its indices, ``wrt_layout`` for its input ``wrt``, its
        own strides for the other data inputs (never read by passes built from the primal's)."""
        p = self.primal
        k = p._index_position()
        return [index_layout if j == k else wrt_layout if j == self.wrt else (t.element_strides, 0)
                for j, t in enumerate(p.inputs)]


@dataclasses.dataclass(frozen=True, repr=False)
class IndexAdjointDesc(_OfPrimal):
    """The adjoint of an index-driven operator's linear part in its data input ``wrt``, applied to a gradient of its
    output (``GradientTensor``) for its indices (``IndicesTensor``): a packed tensor of that input's sizes. Not a
    DirectML operator (none sums): opendml's differentiation runs it, built from the primal's own passes, each
    transposed:

    * a ``Gather`` reading the input: the result zeroed, then an accumulating ``Scatter`` of the gradient at the same
      positions (repeated indices add up in the indices' row-major order: the same bytes every run);
    * the ``Copy`` of a scatter's input: the gradient copied, then every position a ``Scatter`` writes zeroed;
    * a ``Scatter`` of the updates: a ``Gather`` of the gradient at the positions written, 0 for an update a later one
      overwrote (of a repeated index, only the winning update gets its position's gradient).
    """

    gradient_tensor: TensorDesc
    indices_tensor: TensorDesc
    output_tensor: TensorDesc | None = None

    OPERATOR = "INDEX_ADJOINT"

    def _like(self, p):
        data = [j for j, (name, _) in enumerate(p.named_tensors("input")) if name != p.INDEX_SLOT]
        if self.wrt not in data:
            raise self._err(f"wrt must name a data input of {p.OPERATOR} (one of {data}); got {self.wrt!r}")
        return ((("GradientTensor", p.outputs[0], f"{p.OPERATOR}'s output "),
                 ("IndicesTensor", getattr(p, p.INDEX_ATTR), f"{p.OPERATOR}'s index ")), p.inputs[self.wrt])

    def _index_passes(self, layouts, out_strides):
        (gs, go), (is_, io) = layouts
        p = self.primal
        ds = tuple(out_strides[0])
        primal_layouts = self._primal_layouts((is_, io), (ds, 0))      # the input wrt: this output
        on_grad = p._index_passes(primal_layouts, [tuple(gs)])
        on_packed = list(p._index_passes(primal_layouts, [ds]))
        zeroed = False
        for a in on_grad:
            if isinstance(a, Gather) and a.src == self.wrt:
                if not zeroed:
                    yield Fill(0, self.output_tensor.sizes, 0, ds, 0)
                    zeroed = True
                yield Scatter(0, 0, a.sizes, go + a.dst_offset, a.dst_strides, a.src_offset, a.src_strides,
                              _remap(a.indices, 1), accumulate=True)
            elif isinstance(a, Copy) and a.src == self.wrt:
                yield Copy(0, 0, a.sizes, go + a.dst_offset, a.dst_strides, a.src_offset, a.src_strides)
                for c in on_packed:
                    if isinstance(c, Scatter):
                        yield Scatter(0, 0, c.sizes, 0, (0,) * len(c.sizes), c.dst_offset, c.dst_strides,
                                      _remap(c.indices, 1), value=0)
            elif isinstance(a, Scatter) and a.src == self.wrt:
                yield Gather(0, 0, a.sizes, go + a.dst_offset, a.dst_strides, a.src_offset, a.src_strides,
                             _remap(a.indices, 1), last_only=not a.accumulate)

    def adjoint(self, api, grad, indices):
        """The adjoint of the adjoint: the primal's linear part again (a
        second derivative)."""
        return (api.index_primal(self.primal, self.wrt, grad, indices), None)


@dataclasses.dataclass(frozen=True, repr=False)
class IndexPrimalDesc(_OfPrimal):
    """An index-driven operator's linear part in its data input ``wrt`` alone (the other data inputs zero):
    ``DataTensor`` (that input) and ``IndicesTensor`` in, the primal's output out. The adjoint of
    ``IndexAdjointDesc`` (a second derivative), built from the primal's passes, those reading another data input
    writing zeros instead."""

    data_tensor: TensorDesc
    indices_tensor: TensorDesc
    output_tensor: TensorDesc | None = None

    OPERATOR = "INDEX_PRIMAL"

    def _like(self, p):
        return (("DataTensor", p.inputs[self.wrt], ""), ("IndicesTensor", getattr(p, p.INDEX_ATTR), "")), p.outputs[0]

    def _index_passes(self, layouts, out_strides):
        for a in self.primal._index_passes(self._primal_layouts(layouts[1], layouts[0]), out_strides):
            if a.src == self.wrt:
                a = dataclasses.replace(a, src=0)
            elif isinstance(a, Copy):
                a = Fill(a.dst, a.sizes, a.dst_offset, a.dst_strides, 0)
            elif isinstance(a, Scatter):
                a = dataclasses.replace(a, src=0, src_offset=0, src_strides=(0,) * len(a.sizes), value=0)
            if hasattr(a, "indices"):
                a = dataclasses.replace(a, indices=_remap(a.indices, 1))
            yield a

    def adjoint(self, api, grad, indices):
        return (api.index_adjoint(self.primal, self.wrt, grad, indices), None)
