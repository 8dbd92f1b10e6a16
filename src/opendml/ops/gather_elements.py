"""DML_GATHER_ELEMENTS_OPERATOR_DESC: one element of the input per index,
along ``Axis`` (NumPy's ``take_along_axis``),

    output[i, j, k, ...] = input[i, j, indices[i, j, k, ...], ...]    (Axis 2)
    OutputTensor.Sizes = IndicesTensor.Sizes

lowered to one ``Gather`` pass over the indices' index space whose
coordinate along ``Axis`` is read from the indices (clamped into the
dimension). Errata: docs/operators/index-family.md."""
from __future__ import annotations

import dataclasses

from ..model.tensor_desc import TensorDesc
from ..plan import Gather
from ._move import WholeAxis
from ._index import CHECK_INDICES_DOC, INDICES_DOC, IndexOperatorDesc, elements_axis, index_support, position
from ._spec import Binding, UInt


@dataclasses.dataclass(frozen=True, repr=False)
class GatherElementsOperatorDesc(WholeAxis, IndexOperatorDesc):
    """``OutputTensor`` may be None: a packed output of the indices' sizes."""

    input_tensor: TensorDesc
    indices_tensor: TensorDesc
    output_tensor: TensorDesc | None
    axis: int

    OPERATOR = "GATHER_ELEMENTS"
    BINDING = Binding("gather_elements", ((3, 4),), {"axis": 1},
                      others={"indices": ("IndicesTensor", [[3, 0], [1, 1], [2, 0]], "int32")}, route="index",
                      params="indices: Any, axis: int, *, check_indices: bool = True", shape="The data",
                      returns="of ``x``'s dtype and ``indices``' shape", rules="``indices`` not of ``x``'s rank, an "
                      "axis out of range", doc=f"""DML_GATHER_ELEMENTS: ``out[..., i, ...] = x[..., indices[..., i, ...],
    ...]`` along ``axis`` (NumPy's ``take_along_axis``; ``indices`` has
    ``x``'s shape but along ``axis``).

    Parameters
    ----------
    {INDICES_DOC.format(what="Positions along ``axis``, of ``x``'s rank")}
    axis : int
        The axis of ``x`` (negative values count from the end).
    {CHECK_INDICES_DOC}""")
    C_INDEX = 1
    FIELDS = (UInt("Axis", "axis"),)
    SUPPORT = index_support("2_1")

    @classmethod
    def arguments(cls, api, x, indices, check_indices, axis):
        _, is_, a = elements_axis(api, "gather_elements", x, indices, axis, check_indices)
        return (lambda tx, ti: cls(tx, ti, None, a)), [x, indices], is_, (a,)

    def __post_init__(self):
        inp = self._check_input()
        idx = self._same_rank("IndicesTensor", self.indices_tensor, inp)
        axis = self._axis_field("axis", "Axis", inp.rank, "InputTensor")
        self._check_all_but_axis("IndicesTensor", idx, "InputTensor", inp, axis)
        self._derive_output(self.output_sizes_for((inp.sizes, idx.sizes))[0], "IndicesTensor.Sizes")

    def output_sizes_for(self, input_sizes):
        return (tuple(input_sizes[1]),)

    def _index_passes(self, layouts, out_strides):
        (xs, xo), (is_, io) = layouts
        a = self.axis
        src = tuple(0 if d == a else s for d, s in enumerate(xs))
        yield Gather(0, 0, self.indices_tensor.sizes, xo, src, 0, tuple(out_strides[0]),
                     (position(1, io, is_, xs[a], self.input_tensor.sizes[a]),))
