"""DML_ONE_HOT_OPERATOR_DESC: every sequence along the output's ``Axis`` is OffValue but OnValue at the position its
index gives,

    output[..., k, ...] = OnValue if k == indices[..., 0, ...] else OffValue
    IndicesTensor.Sizes = OutputTensor.Sizes, with 1 along Axis

OffValue and OnValue are ValuesTensor's elements 0 and 1 along its fastest-changing dimension of size > 1, whose type
the output has. An index outside ``[-depth, depth)`` (depth = ``OutputTensor.Sizes[Axis]``) sets no OnValue
(docs/operators/one-hot.md). Lowered to a ``Copy`` broadcasting OffValue over the output and a ``Scatter`` of OnValue
along ``Axis`` at the indices, skipped out of range."""
from __future__ import annotations

import dataclasses
import math

from ..model.errors import ValidationError
from ..model.tensor_desc import TensorDesc
from ..plan import INDEX_SKIP, Copy, Scatter
from ._common import FLOAT16_32
from ._index import IndexOperatorDesc, dims, index_support, position
from ._spec import Binding, UInt


@dataclasses.dataclass(frozen=True, repr=False)
class OneHotOperatorDesc(IndexOperatorDesc):
    """Every tensor is given: the output's size along ``Axis`` is the depth."""

    indices_tensor: TensorDesc
    values_tensor: TensorDesc
    output_tensor: TensorDesc
    axis: int

    OPERATOR = "ONE_HOT"
    BINDING = Binding("one_hot", ((5,),), {"depth": 4, "axis": -1}, "indices", slot="IndicesTensor",
                      others={"values": ("ValuesTensor", [0, 1], "float32")}, added_axes=1, route="index",
                      params="depth: int, values: Any, axis: int = -1", shape="The indices",
                      returns="of ``values``' dtype and shape ``indices.shape`` with ``depth`` inserted at ``axis``",
                      rules="``depth`` < 1, ``values`` not of two elements, an axis out of range",
                      doc="""DML_ONE_HOT (ONNX OneHot): a new axis of size ``depth`` at ``axis``
    (of the output: -1 appends it) holding ``values[1]`` (on) at each index, ``values[0]`` (off) elsewhere, of
    ``values``' dtype. A negative index of a signed type counts from the end; one outside ``[-depth, depth)`` gives an
    all-off row (unchecked).

    Parameters
    ----------
    depth : int
        The size of the new axis (>= 1).
    values : array
        ``[off, on]``: two elements of the output's dtype.
    axis : int, optional
        The new axis' position in the output (default -1: last).""")
    C_INDEX = 2
    OUTPUT_DERIVABLE = False
    FIELDS = (UInt("Axis", "axis"),)
    DATA_SLOTS = ("ValuesTensor", "OutputTensor")
    SUPPORT = index_support("2_0", FLOAT16_32)

    @classmethod
    def arguments(cls, api, indices, values, depth, axis):
        where, is_ = "one_hot", dims(indices)
        depth = api.count(depth, where, "OutputTensor's size along Axis", 1, "depth")
        vs = dims(values)
        if len(vs) != 1 or vs[0] != 2:
            raise ValidationError(f"{where}: values must be a two-element array [off, on]; got shape {list(vs)}")
        ro = len(is_) + 1
        a = api.axis(axis, ro, where)
        shape = is_[:a] + (depth,) + is_[a:]

        def make(ti, tv):
            return cls(ti, tv, api.sizes_of(where, "OutputTensor", lambda: TensorDesc(tv.data_type, shape),
                                                  "indices.shape with depth at axis"), a)
        return make, [indices.reshape(is_[:a] + (1,) + is_[a:]), api.lead(values, ro, where)], shape, (shape, a)

    def __post_init__(self):
        idx = self._check_input()
        self._check_tensors()
        out = self.output_tensor
        axis = self._axis_field("axis", "Axis", idx.rank, "IndicesTensor")
        self._check_all_but_axis("IndicesTensor", idx, "OutputTensor", out, axis, axis_size=1)
        n = math.prod(self.values_tensor.sizes)
        if n < 2:
            raise self._err(f"ValuesTensor must hold at least two elements (OffValue, OnValue); got "
                            f"{n} (Sizes {list(self.values_tensor.sizes)})")

    def output_sizes_for(self, input_sizes):
        """IndicesTensor's sizes (1 along Axis) with the depth (OutputTensor's size along Axis) there."""
        i, a = input_sizes[0], self.axis
        return (tuple(i[:a]) + (self.output_tensor.sizes[a],) + tuple(i[a + 1:]),)

    def linear_part(self):
        """Not differentiated: the output is no function of a data tensor opendml differentiates (its values come from
        ValuesTensor, which the array API takes as constants)."""
        return None

    def _index_passes(self, layouts, out_strides):
        (is_, io), (vs, vo) = layouts
        out, a = self.output_tensor, self.axis
        os_ = tuple(out_strides[0])
        sizes = self.values_tensor.sizes
        inner = max(d for d, n in enumerate(sizes) if n > 1)
        yield Copy(1, 0, out.sizes, vo, (0,) * out.rank, 0, os_)
        dst = tuple(0 if d == a else s for d, s in enumerate(os_))
        yield Scatter(1, 0, self.indices_tensor.sizes, vo + vs[inner], (0,) * out.rank, 0, dst,
                      (position(0, io, is_, os_[a], out.sizes[a], out_of_range=INDEX_SKIP),))
