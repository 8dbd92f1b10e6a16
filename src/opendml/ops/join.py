"""DML_JOIN_OPERATOR_DESC: the inputs concatenated along ``Axis`` (SPLIT's inverse).

    OutputTensor.Sizes[d] = InputTensors[i].Sizes[d]       (d != Axis, every i)
    OutputTensor.Sizes[Axis] = sum_i InputTensors[i].Sizes[Axis]
    Output[..., offset_i + j, ...] = InputTensors[i][..., j, ...],
        offset_i = sum of the earlier inputs' Sizes[Axis]

Ranks 1 to 8 from 3_1, as DirectML 1.5's release notes say (erratum:
docs/operators/join-split.md)."""
from __future__ import annotations

import dataclasses

from ..model.tensor_desc import TensorDesc
from ..plan import Copy
from ._common import TYPES_1_0, support
from ._move import MoveOperatorDesc, WholeAxis
from ._spec import Binding, Tensor, UInt


@dataclasses.dataclass(frozen=True, repr=False)
class JoinOperatorDesc(WholeAxis, MoveOperatorDesc):
    """``OutputTensor`` may be None: a packed output of the joined sizes."""

    input_tensors: tuple[TensorDesc, ...]
    output_tensor: TensorDesc | None
    axis: int

    OPERATOR = "JOIN"
    C_LOWERING = 6
    BINDING = Binding("join", ((2, 3), (1, 3)), {"axis": 0}, "arrays", params="axis: int",
                      returns="of the inputs' dtype", rules="dtypes or ranks differ, ``axis`` out of range",
                      doc="""DML_JOIN: the arrays concatenated along ``axis`` (same dtype and rank;
    equal sizes but along ``axis``).

    Parameters
    ----------
    axis : int
        The axis to concatenate along; negative values count from the end.""")
    SLOTS = (Tensor("InputTensors", "input_tensors", "input", many=True),
             Tensor("OutputTensor", "output_tensor", "output", optional=True))
    FIELDS = (UInt("Axis", "axis"),)
    COUNTS = {"InputCount": "InputTensors"}
    SUPPORT = support({"1_0": 4, "3_0": (4, 5), "3_1": (1, 8)}, first=TYPES_1_0)

    @classmethod
    def arguments(cls, api, x, axis):
        a = api.axis(axis, api.rank_of(x), "join")
        return (lambda *ts: cls(ts, None, a)), (a,)

    def __post_init__(self):
        ins = self._tensor_tuple(self.SLOTS[0])
        first = ins[0]
        for i, t in enumerate(ins):
            if t.rank != first.rank:
                raise self._err(f"InputTensors[{i}].DimensionCount must equal InputTensors[0].DimensionCount; "
                                f"got {t.rank} != {first.rank}")
        self._check_axis_parts("InputTensors", self.input_tensors, "InputTensors[0]", first)
        self._derive_output(self.output_sizes_for([t.sizes for t in ins])[0], "the inputs' Sizes, summed along Axis")

    def output_sizes_for(self, input_sizes):
        total = sum(s[self.axis] for s in input_sizes)
        return (tuple(total if d == self.axis else n for d, n in enumerate(input_sizes[0])),)

    def _passes(self, layouts):
        out = self.output_tensor
        at = 0
        for i, (t, (strides, origin)) in enumerate(zip(self.input_tensors, layouts)):
            yield Copy(i, 0, t.sizes, origin, tuple(strides), at * out.element_strides[self.axis],
                       out.element_strides)
            at += t.sizes[self.axis]

    # differentiation (see ``_spec``): JOIN's adjoint is SPLIT at the inputs' sizes.

    def adjoint(self, api, grad):
        return tuple(api.split(grad, self.axis, [t.sizes[self.axis] for t in self.input_tensors]))
