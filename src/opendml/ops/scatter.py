"""DML_SCATTER_OPERATOR_DESC, alias DML_SCATTER_ELEMENTS_OPERATOR_DESC (GATHER_ELEMENTS' counterpart): the input copied,
then each update written along ``Axis`` at the position its index gives,

    output = input
    output[i, j, indices[i, j, k, ...], ...] = updates[i, j, k, ...]    (Axis 2)

lowered to a ``Copy`` of the input and a ``Scatter`` of the updates, their coordinate along ``Axis`` read from the
indices (clamped into the dimension; of repeated indices the last update in row-major order wins). Errata (introduced
in 2_0, as DirectML.h says): docs/operators/index-family.md."""
from __future__ import annotations

import dataclasses

from ..model.tensor_desc import TensorDesc
from ..plan import Copy, Scatter
from ._common import FLOAT16_32
from ._move import SameSizes, WholeAxis
from ._index import CHECK_INDICES_DOC, INDICES_DOC, IndexOperatorDesc, elements_axis, index_support, position
from ._spec import Binding, UInt


@dataclasses.dataclass(frozen=True, repr=False)
class ScatterElementsOperatorDesc(SameSizes, WholeAxis, IndexOperatorDesc):
    """``OutputTensor`` may be None: a packed output of the input's sizes."""

    input_tensor: TensorDesc
    indices_tensor: TensorDesc
    updates_tensor: TensorDesc
    output_tensor: TensorDesc | None
    axis: int

    OPERATOR = "SCATTER_ELEMENTS"
    ALIASES = ("SCATTER",)
    BINDING = Binding("scatter_elements", ((3, 4),), {"axis": 0},
                      others={"indices": ("IndicesTensor", [[2, 0, 1, 2]], "int32"),
                              "updates": ("UpdatesTensor", [[21, 22, 23, 24]], "float32")}, route="index",
                      params="indices: Any, updates: Any, axis: int, *, check_indices: bool = True",
                      shape="The data", returns="of ``x``'s dtype and shape",
                      rules="``indices`` not of ``x``'s rank, an axis out of range", doc=f"""DML_SCATTER_ELEMENTS: a copy of ``x`` with ``out[..., indices[..., i,
    ...], ...] = updates[..., i, ...]`` along ``axis`` (``indices`` and
    ``updates`` of one shape, ``x``'s but along ``axis``). Where indices
    repeat, the last update in row-major order wins.

    Parameters
    ----------
    {INDICES_DOC.format(what="Positions along ``axis``, of ``x``'s rank")}
    updates : array
        The values written, of ``indices``' shape and ``x``'s dtype.
    axis : int
        The axis of ``x`` (negative values count from the end).
    {CHECK_INDICES_DOC}""")
    C_INDEX = 5
    FIELDS = (UInt("Axis", "axis"),)
    DATA_SLOTS = ("InputTensor", "UpdatesTensor", "OutputTensor")
    SUPPORT = index_support("2_0", FLOAT16_32)

    @classmethod
    def arguments(cls, api, x, indices, updates, check_indices, axis):
        xs, _, a = elements_axis(api, "scatter_elements", x, indices, axis, check_indices)
        return (lambda tx, ti, tu: cls(tx, ti, tu, None, a)), [x, indices, updates], xs, (a,)

    def __post_init__(self):
        inp = self._check_input()
        idx = self._same_rank("IndicesTensor", self.indices_tensor, inp)
        upd = self._same_rank("UpdatesTensor", self.updates_tensor, inp)
        axis = self._axis_field("axis", "Axis", inp.rank, "OutputTensor")
        self._check_all_but_axis("IndicesTensor", idx, "InputTensor", inp, axis)
        for d in range(inp.rank):
            if upd.sizes[d] != idx.sizes[d]:
                raise self._err(f"UpdatesTensor.Sizes[{d}] must equal IndicesTensor.Sizes[{d}]; "
                                f"got {upd.sizes[d]} != {idx.sizes[d]}")
        self._derive_output(self.output_sizes_for((inp.sizes,))[0], "InputTensor.Sizes")

    def _index_passes(self, layouts, out_strides):
        (xs, xo), (is_, io), (us, uo) = layouts
        a, os_ = self.axis, tuple(out_strides[0])
        yield Copy(0, 0, self.input_tensor.sizes, xo, tuple(xs), 0, os_)
        dst = tuple(0 if d == a else s for d, s in enumerate(os_))
        yield Scatter(2, 0, self.updates_tensor.sizes, uo, tuple(us), 0, dst,
                      (position(1, io, is_, os_[a], self.output_tensor.sizes[a]),))
