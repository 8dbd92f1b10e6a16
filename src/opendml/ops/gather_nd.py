"""DML_GATHER_ND_OPERATOR_DESC and DML_GATHER_ND1_OPERATOR_DESC: whole sub-blocks of the input taken at
``IndicesTensor``'s index tuples (its last dimension, of the tuple size q), within ``BatchDimensionCount`` leading batch
dimensions (GATHER_ND1's; GATHER_ND has none),

    output[b..., j..., t...] = input[b..., indices[b..., j..., 0], ...,
                                     indices[b..., j..., q-1], t...]
    OutputTensor.Sizes = {1..., IndicesTensor.Sizes[D - IndicesDimensionCount .. D-1],
                          InputTensor.Sizes[D - InputDimensionCount + Batch + q .. D]}

(D the tensors' one DimensionCount; the batch dimensions are the first ``BatchDimensionCount`` of both tensors'
meaningful dimensions, and must agree). Lowered to one ``Gather`` pass with one indexed coordinate per tuple entry (each
clamped into its dimension). The size rule follows the pages' worked example, not their formula:
docs/operators/index-family.md (errata)."""
from __future__ import annotations

import dataclasses

from ..model.errors import ValidationError
from ..model.tensor_desc import TensorDesc
from ..plan import Gather
from ._index import (CHECK_INDICES_DOC, INDICES_DOC, IndexOperatorDesc, dims, index_support, nd_rank, position,
                     right_aligned, tuple_size)
from ._spec import Binding, UInt


class _NdIndexing(IndexOperatorDesc):
    """The index-tuple rules GATHER_ND, GATHER_ND1 and SCATTER_ND share: the
    input is ``input_tensor``; ``_nd_batch`` the batch dimension count."""

    _nd_batch = 0
    FIELDS = (UInt("InputDimensionCount", "input_dimension_count"),
              UInt("IndicesDimensionCount", "indices_dimension_count"))

    def _check_nd(self, inp: TensorDesc, idx: TensorDesc, batch: int) -> None:
        d = inp.rank                         # (idx: checked by _same_rank)
        n_in = self._int("input_dimension_count", "InputDimensionCount")
        n_idx = self._int("indices_dimension_count", "IndicesDimensionCount")
        self._check_bounds("InputDimensionCount", None, n_in, 1, d, " ([1, InputTensor.DimensionCount])")
        self._check_bounds("IndicesDimensionCount", None, n_idx, 1, d, " ([1, IndicesTensor.DimensionCount])")
        self._check_leading_ones("InputTensor", inp, n_in, "InputDimensionCount")
        self._check_leading_ones("IndicesTensor", idx, n_idx, "IndicesDimensionCount")
        if batch >= n_in or batch >= n_idx:
            raise self._err(f"BatchDimensionCount must be < InputDimensionCount and < IndicesDimensionCount "
                            f"(the batch dimensions are leading meaningful dimensions of both, and the index "
                            f"tuple's dimension is not one); got {batch} (InputDimensionCount {n_in}, "
                            f"IndicesDimensionCount {n_idx})")
        for k in range(batch):
            a, b = inp.sizes[d - n_in + k], idx.sizes[d - n_idx + k]
            if a != b:
                raise self._err(f"batch dimension {k}: InputTensor.Sizes[{d - n_in + k}] must equal "
                                f"IndicesTensor.Sizes[{d - n_idx + k}]; got {a} != {b}")
        q = idx.sizes[d - 1]
        if not 1 <= q <= n_in - batch:
            raise self._err(f"IndicesTensor.Sizes[{d - 1}] (the index tuple size) must be in [1, "
                            f"InputDimensionCount - BatchDimensionCount] = [1, {n_in - batch}]; got {q}")
        full = self.nd_sizes
        if len(full) > d:
            raise self._err(f"the result's meaningful sizes {list(full)} (IndicesTensor.Sizes[D - "
                            f"IndicesDimensionCount .. D-1], then InputTensor's dimensions after the batch and the "
                            f"{q} indexed ones) must fit DimensionCount {d}; got {len(full)} dimensions")

    @property
    def nd_sizes(self) -> tuple[int, ...]:
        """The meaningful sizes of the gathered result (SCATTER_ND's updates)."""
        return self._nd(self.input_tensor.sizes, self.indices_tensor.sizes)

    def _nd(self, x, i) -> tuple:
        d = len(x)
        q = int(i[d - 1])      # (the tuple size sets the rank: a symbolic one is specialised)
        return tuple(i[d - self.indices_dimension_count:d - 1]) + tuple(x[d - self.input_dimension_count +
                                                                          self._nd_batch + q:])

    @property
    def nd_result_sizes(self) -> tuple[int, ...]:
        return self._fit(self.nd_sizes)

    def _fit(self, full) -> tuple:
        return (1,) * (self.input_tensor.rank - len(full)) + full

    def _nd_axes(self, xs, is_, io, data_strides):
        """(pass sizes, the indexed data tensor's strides over them, the IndexAxes): ``xs`` the input's strides (read
        along the batch and trailing dimensions), ``data_strides`` the indexed tensor's (a gather's input, a
        scatter's output)."""
        inp, idx, b = self.input_tensor, self.indices_tensor, self._nd_batch
        d = inp.rank
        q = idx.sizes[d - 1]
        n_in, n_idx = self.input_dimension_count, self.indices_dimension_count
        lead = n_idx - 1                       # index dimensions in the pass (batch ones first)
        trail = n_in - b - q                   # the input's dimensions after the tuple
        sizes = self.nd_sizes
        first = d - n_in
        data = tuple(data_strides[first + k] for k in range(b)) + (0,) * (lead - b) + \
            tuple(data_strides[first + b + q + k] for k in range(trail))
        istr = tuple(is_[d - n_idx + k] for k in range(lead)) + (0,) * trail
        axes = tuple(position(1, io + j * is_[d - 1], istr, data_strides[first + b + j], inp.sizes[first + b + j])
                     for j in range(q))
        return sizes, data, axes


@dataclasses.dataclass(frozen=True, repr=False)
class GatherNd1OperatorDesc(_NdIndexing):
    """``OutputTensor`` may be None: a packed output of the gathered sizes."""

    input_tensor: TensorDesc
    indices_tensor: TensorDesc
    output_tensor: TensorDesc | None
    input_dimension_count: int
    indices_dimension_count: int
    batch_dimension_count: int

    OPERATOR = "GATHER_ND1"
    BINDING = Binding("gather_nd", ((3, 4),), {"batch_dimensions": 0},
                      others={"indices": ("IndicesTensor", [[0, 1], [2, 3]], "int64")}, route="index",
                      params="indices: Any, batch_dimensions: int = 0, *, check_indices: bool = True",
                      shape="The data", returns="of ``x``'s dtype and shape ``indices.shape[:-1] + "
                      "x.shape[batch_dimensions + q:]``", rules="indices without the tuples' axis, "
                      "``batch_dimensions`` not below the indices' rank, a tuple size q outside [1, x.ndim - "
                      "batch_dimensions]", doc=f"""DML_GATHER_ND1 (ONNX GatherND): ``indices``' last axis holds index
    tuples of q entries into ``x``'s dimensions after the first ``batch_dimensions`` (shared by both arrays);
    ``out.shape == indices.shape[:-1] + x.shape[batch_dimensions + q:]``.

    Parameters
    ----------
    {INDICES_DOC.format(what="Index tuples along the last axis")}
    batch_dimensions : int, optional
        DirectML's BatchDimensionCount: the leading dimensions ``x`` and ``indices`` share (default 0).
    {CHECK_INDICES_DOC}""")
    C_INDEX = 4
    FIELDS = (*_NdIndexing.FIELDS, UInt("BatchDimensionCount", "batch_dimension_count"))
    SUPPORT = index_support("3_0")

    @classmethod
    def arguments(cls, api, x, indices, check_indices, batch_dimensions):
        where, xs, is_ = "gather_nd", dims(x), dims(indices)
        b = api.count(batch_dimensions, where, "BatchDimensionCount", 0, "batch_dimensions")
        q = tuple_size(where, is_)
        if b >= len(is_):
            raise api.field_error(where, "BatchDimensionCount", f"be < the indices' number of dimensions "
                                  f"{len(is_)} (batch_dimensions)", b)
        if not 1 <= q <= len(xs) - b:
            raise ValidationError(f"{where}: indices.shape[-1] (the tuple size) must be in [1, x.ndim - "
                                  f"batch_dimensions] = [1, {len(xs) - b}]; got {q}")
        if check_indices:
            api.check_indices(indices, xs[b:b + q], where, last_axis=True)
        r = nd_rank(xs, is_, b)
        return ((lambda tx, ti: cls(tx, ti, None, len(xs), len(is_), b)),
                [api.lead(x, r, where), api.lead(indices, r, where)],
                is_[:-1] + xs[b + q:], (len(xs), len(is_), b))

    @property
    def _nd_batch(self) -> int:
        return self.batch_dimension_count

    def __post_init__(self):
        inp = self._check_input()
        idx = self._same_rank("IndicesTensor", self.indices_tensor, inp)
        batch = self._int("batch_dimension_count", "BatchDimensionCount")
        self._check_nd(inp, idx, batch)
        self._derive_output(self.output_sizes_for((inp.sizes, idx.sizes))[0],
                            "{1..., IndicesTensor.Sizes[D-IndicesDimensionCount..D-1], InputTensor.Sizes[after "
                            "the batch and indexed dimensions]}")

    def output_sizes_for(self, input_sizes):
        return (self._fit(self._nd(*input_sizes)),)

    def _index_passes(self, layouts, out_strides):
        (xs, xo), (is_, io) = layouts
        sizes, src, axes = self._nd_axes(xs, is_, io, xs)
        yield Gather(0, 0, sizes, xo, src, 0, right_aligned(out_strides[0], len(sizes)), axes)


@dataclasses.dataclass(frozen=True, repr=False)
class GatherNdOperatorDesc(GatherNd1OperatorDesc):
    """GATHER_ND: GATHER_ND1 without batch dimensions (feature level 2_1)."""

    batch_dimension_count: int = dataclasses.field(default=0, init=False)

    OPERATOR = "GATHER_ND"
    FIELDS = _NdIndexing.FIELDS
    SUPPORT = index_support("2_1")
