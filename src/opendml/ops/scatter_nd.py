"""DML_SCATTER_ND_OPERATOR_DESC: the input copied, then the updates' whole sub-blocks written at ``IndicesTensor``'s
index tuples (its last dimension, of the tuple size q),

    output = input
    output[indices[j..., 0], ..., indices[j..., q-1], t...] = updates[j..., t...]
    UpdatesTensor.Sizes = {1..., IndicesTensor.Sizes[D - IndicesDimensionCount .. D-1],
                           InputTensor.Sizes[D - InputDimensionCount + q .. D]}

lowered to a ``Copy`` of the input and a ``Scatter`` pass, an indexed coordinate per tuple entry (clamped into its
dimension; of repeated tuples the last update in row-major order wins). Errata (the dimension counts' closed ranges,
GATHER_ND's size rule): docs/operators/index-family.md."""
from __future__ import annotations

import dataclasses

from ..model.errors import ValidationError
from ..model.tensor_desc import TensorDesc
from ..plan import Copy, Scatter
from ._move import SameSizes
from ._index import CHECK_INDICES_DOC, INDICES_DOC, dims, index_support, nd_rank, right_aligned, tuple_size
from ._spec import Binding
from .gather_nd import _NdIndexing


@dataclasses.dataclass(frozen=True, repr=False)
class ScatterNdOperatorDesc(SameSizes, _NdIndexing):
    """``OutputTensor`` may be None: a packed output of the input's sizes."""

    input_tensor: TensorDesc
    indices_tensor: TensorDesc
    updates_tensor: TensorDesc
    output_tensor: TensorDesc | None
    input_dimension_count: int
    indices_dimension_count: int

    OPERATOR = "SCATTER_ND"
    BINDING = Binding("scatter_nd", ((3, 4),), {},
                      others={"indices": ("IndicesTensor", [[0, 1], [2, 3]], "int64"),
                              "updates": ("UpdatesTensor", [31, 32], "float32")}, route="index",
                      params="indices: Any, updates: Any, *, check_indices: bool = True", shape="The data",
                      returns="of ``x``'s dtype and shape", rules="indices without the tuples' axis, a tuple size q "
                      "outside [1, x.ndim], ``updates`` not of shape ``indices.shape[:-1] + x.shape[q:]``",
                      doc=f"""DML_SCATTER_ND (ONNX ScatterND): a copy of ``x`` with the sub-blocks at
    ``indices``' tuples (its last axis, q entries) replaced by ``updates``
    (shape ``indices.shape[:-1] + x.shape[q:]``). Where tuples repeat, the last
    update in row-major order wins.

    Parameters
    ----------
    {INDICES_DOC.format(what="Index tuples along the last axis")}
    updates : array
        The sub-blocks written, of ``x``'s dtype.
    {CHECK_INDICES_DOC}""")
    C_INDEX = 6
    DATA_SLOTS = ("InputTensor", "UpdatesTensor", "OutputTensor")
    SUPPORT = index_support("2_1")

    @classmethod
    def arguments(cls, api, x, indices, updates, check_indices):
        where, xs, is_, us = "scatter_nd", dims(x), dims(indices), dims(updates)
        q = tuple_size(where, is_)
        if not 1 <= q <= len(xs):
            raise ValidationError(f"{where}: indices.shape[-1] (the tuple size) must be in [1, x.ndim] = "
                                  f"[1, {len(xs)}]; got {q}")
        want = is_[:-1] + xs[q:]
        if us != want:
            raise ValidationError(f"{where}: updates.shape must be indices.shape[:-1] + x.shape[q:] = {list(want)}; "
                                  f"got {list(us)}")
        if check_indices:
            api.check_indices(indices, xs[:q], where, last_axis=True)
        r = max(nd_rank(xs, is_, 0), len(us))
        return ((lambda tx, ti, tu: cls(tx, ti, tu, None, len(xs), len(is_))),
                [api.lead(x, r, where), api.lead(indices, r, where), api.lead(updates, r, where)], xs,
                (len(xs), len(is_)))

    def __post_init__(self):
        inp = self._check_input()
        idx = self._same_rank("IndicesTensor", self.indices_tensor, inp)
        upd = self._same_rank("UpdatesTensor", self.updates_tensor, inp)
        self._check_nd(inp, idx, 0)
        self._check_sizes("UpdatesTensor", upd, self.nd_result_sizes,
                          "{1..., IndicesTensor.Sizes[D-IndicesDimensionCount..D-1], InputTensor.Sizes[after "
                          "the indexed dimensions]}")
        self._derive_output(self.output_sizes_for((inp.sizes,))[0], "InputTensor.Sizes")

    def _index_passes(self, layouts, out_strides):
        (xs, xo), (is_, io), (us, uo) = layouts
        os_ = tuple(out_strides[0])
        yield Copy(0, 0, self.input_tensor.sizes, xo, tuple(xs), 0, os_)
        sizes, dst, axes = self._nd_axes(xs, is_, io, os_)
        yield Scatter(2, 0, sizes, uo, right_aligned(us, len(sizes)), 0, dst, axes)
