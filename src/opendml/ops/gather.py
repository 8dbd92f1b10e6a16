"""DML_GATHER_OPERATOR_DESC: elements of the input taken along ``Axis`` at the
positions ``IndicesTensor`` holds,

    output[..., j..., ...] = input[..., indices[j...], ...]
    OutputTensor.Sizes = { InputTensor.Sizes[0..Axis],
                           IndicesTensor.Sizes[DimensionCount - IndexDimensions ..],
                           InputTensor.Sizes[Axis + 1 ..] }

right-aligned to the tensors' one DimensionCount D: leading 1s are cropped where the concatenation is longer than D
(they must be 1), prepended where shorter. Lowered to one ``Gather`` pass over the concatenation's index space whose
coordinate along ``Axis`` is read from the indices (clamped into the dimension). Errata:
docs/operators/index-family.md."""
from __future__ import annotations

import dataclasses

from ..model.errors import ValidationError
from ..model.tensor_desc import TensorDesc
from ..plan import Gather
from ._common import FLOAT16_32
from ._index import (CHECK_INDICES_DOC, INDICES_DOC, IndexOperatorDesc, dims, index_support, position,
                     right_aligned)
from ._spec import Binding, UInt


@dataclasses.dataclass(frozen=True, repr=False)
class GatherOperatorDesc(IndexOperatorDesc):
    """``OutputTensor`` may be None: a packed output of the gathered sizes."""

    input_tensor: TensorDesc
    indices_tensor: TensorDesc
    output_tensor: TensorDesc | None
    axis: int
    index_dimensions: int

    OPERATOR = "GATHER"
    BINDING = Binding("gather", ((3, 4),), {"axis": 0},
                      others={"indices": ("IndicesTensor", [2, 0, 2], "int32")}, route="index",
                      params="indices: Any, axis: int, index_dimensions: int | None = None, *, "
                             "check_indices: bool = True",
                      shape="The data", returns="of ``x``'s dtype and shape ``x.shape[:axis] + indices.shape[-k:] + "
                      "x.shape[axis + 1:]``", rules="an axis out of range, ``index_dimensions`` above the indices' "
                      "rank or leading index dimensions not 1", doc=f"""DML_GATHER: ``x`` taken along ``axis`` at ``indices`` (NumPy's
    ``take``): ``out.shape == x.shape[:axis] + indices.shape[-k:] +
    x.shape[axis + 1:]`` with k = ``index_dimensions``.

    Parameters
    ----------
    {INDICES_DOC.format(what="Positions along ``axis``")}
    axis : int
        The axis of ``x`` (negative values count from the end).
    index_dimensions : int, optional
        DirectML's IndexDimensions: how many trailing dimensions of
        ``indices`` are meaningful (the others must be 1); default all.
    {CHECK_INDICES_DOC}""")
    C_INDEX = 0
    FIELDS = (UInt("Axis", "axis"), UInt("IndexDimensions", "index_dimensions"))
    SUPPORT = index_support("1_0", FLOAT16_32)

    @classmethod
    def arguments(cls, api, x, indices, check_indices, axis, index_dimensions):
        where, xs, is_ = "gather", dims(x), dims(indices)
        rx, ri = len(xs), len(is_)
        a = api.axis(axis, rx, where)
        k = ri if index_dimensions is None else api.count(index_dimensions, where, "IndexDimensions", 0,
                                                            "index_dimensions")
        if k > ri:
            raise api.field_error(where, "IndexDimensions", f"be <= the indices' number of dimensions {ri} "
                                  "(index_dimensions)", k)
        for d in range(ri - k):
            if is_[d] != 1:
                raise ValidationError(f"{where}: indices.shape[{d}] must be 1 (before the last index_dimensions = "
                                      f"{k}); got {is_[d]}")
        if check_indices and len(xs):
            api.check_indices(indices, xs[a], where)
        r = max(rx, ri, rx + k - 1, 1)
        ap = a + r - len(xs)
        return ((lambda tx, ti: cls(tx, ti, None, ap, k)), [api.lead(x, r, where), api.lead(indices, r, where)],
                xs[:a] + is_[ri - k:] + xs[a + 1:], (ap, k))

    def __post_init__(self):
        inp = self._check_input()
        idx = self._same_rank("IndicesTensor", self.indices_tensor, inp)
        d = inp.rank
        self._axis_field("axis", "Axis", d, "InputTensor")
        k = self._int("index_dimensions", "IndexDimensions")
        self._check_bounds("IndexDimensions", None, k, 0, d, " ([0, IndicesTensor.DimensionCount]: the page's "
                                  "Example 1 uses IndexDimensions 1 with 1-D indices)")
        self._check_leading_ones("IndicesTensor", idx, k, "IndexDimensions")
        original = d - next((i for i, n in enumerate(inp.sizes) if n != 1), d)
        if original + k - 1 > d:
            raise self._err(f"the original rank of InputTensor (DimensionCount less its leading 1s) + "
                            f"IndexDimensions - 1 must be <= OutputTensor.DimensionCount: {original} + {k} - 1 > {d}")
        full = self.full_sizes
        if len(full) > d and any(n != 1 for n in full[:len(full) - d]):
            raise self._err(f"the gathered sizes {list(full)} (InputTensor.Sizes[0..Axis], the last IndexDimensions "
                            f"of IndicesTensor.Sizes, InputTensor.Sizes[Axis+1..]) must fit DimensionCount {d}: "
                            f"the {len(full) - d} leading ones cropped must be 1")
        self._derive_output(self.output_sizes_for((inp.sizes, idx.sizes))[0],
                            "{InputTensor.Sizes[0..Axis], IndicesTensor.Sizes[D-IndexDimensions..], "
                            "InputTensor.Sizes[Axis+1..]} right-aligned")

    @property
    def full_sizes(self) -> tuple[int, ...]:
        """The concatenation, before fitting it to DimensionCount."""
        return self._full(self.input_tensor.sizes, self.indices_tensor.sizes)

    def _full(self, x, i) -> tuple:
        a, k = self.axis, self.index_dimensions
        return tuple(x[:a]) + tuple(i[len(i) - k:]) + tuple(x[a + 1:])

    def output_sizes_for(self, input_sizes):
        full, d = self._full(*input_sizes), len(input_sizes[0])
        return (full[len(full) - d:] if len(full) >= d else (1,) * (d - len(full)) + full,)

    def _index_passes(self, layouts, out_strides):
        (xs, xo), (is_, io) = layouts
        x, a, k = self.input_tensor, self.axis, self.index_dimensions
        d = x.rank
        sizes = self.full_sizes
        src = tuple(xs[:a]) + (0,) * k + tuple(xs[a + 1:])
        istr = (0,) * a + tuple(is_[d - k:]) + (0,) * (d - a - 1)
        dst = right_aligned(out_strides[0], len(sizes))
        yield Gather(0, 0, sizes, xo, src, 0, dst, (position(1, io, istr, xs[a], x.sizes[a]),))
