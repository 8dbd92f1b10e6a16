"""DML_SPLIT_OPERATOR_DESC: the input cut along ``Axis`` into the outputs (JOIN's inverse).

    OutputTensors[i].Sizes[d] = InputTensor.Sizes[d]       (d != Axis)
    sum_i OutputTensors[i].Sizes[Axis] = InputTensor.Sizes[Axis]
    OutputTensors[i][..., j, ...] = Input[..., offset_i + j, ...],
        offset_i = sum of the earlier outputs' Sizes[Axis]
"""
from __future__ import annotations

import dataclasses

from ..model._checks import index_value
from ..model.tensor_desc import TensorDesc
from ..plan import Copy
from ._common import TYPES_1_0, support
from ._move import MoveOperatorDesc, WholeAxis
from ._spec import Binding, Tensor, UInt


@dataclasses.dataclass(frozen=True, repr=False)
class SplitOperatorDesc(WholeAxis, MoveOperatorDesc):
    """``OutputTensors`` are required (their sizes along ``Axis`` are the split)."""

    input_tensor: TensorDesc
    output_tensors: tuple[TensorDesc, ...]
    axis: int

    OPERATOR = "SPLIT"
    C_LOWERING = 7
    BINDING = Binding("split", ((4, 3),), {"axis": 0, "sizes": [1, 3]}, params="axis: int, sizes: Sequence[int]",
                      returns="per entry of ``sizes``, of ``x``'s dtype",
                      rules="``sizes`` empty or not summing to ``x.shape[axis]``, ``axis`` out of range",
                      doc="""DML_SPLIT: ``x`` cut along ``axis`` into arrays of ``sizes[i]`` elements
    there (the sizes sum to ``x.shape[axis]``); returns a list.

    Parameters
    ----------
    axis : int
        The axis to cut along; negative values count from the end.
    sizes : sequence of int
        The length of each piece along ``axis``, each >= 1, summing to
        ``x.shape[axis]``.""")
    SLOTS = (Tensor("InputTensor", "input_tensor", "input"),
             Tensor("OutputTensors", "output_tensors", "output", many=True))
    FIELDS = (UInt("Axis", "axis"),)
    COUNTS = {"OutputCount": "OutputTensors"}
    SUPPORT = support({"1_0": 4, "3_0": (1, 8)}, first=TYPES_1_0)

    @classmethod
    def arguments(cls, api, x, axis, sizes):
        a = api.axis(axis, api.rank_of(x), "split")
        if not isinstance(sizes, tuple) or not sizes:
            raise api.field_error("split", "OutputTensors", "be one or more tensors (sizes: a non-empty sequence "
                                  "of ints, one per output)", sizes)
        ints = []
        for i, s in enumerate(sizes):       # ints as the other fields read them (a 0-d integer array too)
            try:
                ints.append(index_value(s))
            except Exception:  # noqa: BLE001 - no int value (as_int's reason)
                ints.append(None)
            if ints[i] is None or ints[i] < 1:
                raise api.field_error("split", f"OutputTensors[{i}].Sizes[{a}]", f"be an int >= 1 (sizes[{i}])", s)
        sizes = tuple(ints)

        def make(t):
            outs = tuple(TensorDesc(t.data_type, tuple(s if d == a else n for d, n in enumerate(t.sizes)))
                         for s in sizes)
            return cls(t, outs, a)
        return make, (a, sizes)

    def __post_init__(self):
        inp = self._check_input()
        if self.output_tensors is None:
            raise self._err("OutputTensors is required (the output sizes along Axis are the split); got None")
        self._check_slot_tensors()
        axis = self._check_axis_parts("OutputTensors", self.output_tensors, "InputTensor", inp)
        total = sum(t.sizes[axis] for t in self.output_tensors)
        if total != inp.sizes[axis]:
            terms = " + ".join(str(t.sizes[axis]) for t in self.output_tensors)
            raise self._err(f"the OutputTensors' Sizes[{axis}] must sum to InputTensor.Sizes[{axis}] (Axis); "
                            f"got {terms} = {total} != {inp.sizes[axis]}")

    def output_sizes_for(self, input_sizes):
        a = self.axis
        return tuple(tuple(t.sizes[a] if d == a else n for d, n in enumerate(input_sizes[0]))
                     for t in self.output_tensors)

    def _passes(self, layouts):
        (strides, origin), = layouts
        at = 0
        for i, t in enumerate(self.output_tensors):
            yield Copy(0, i, t.sizes, origin + at * strides[self.axis], tuple(strides), 0, t.element_strides)
            at += t.sizes[self.axis]

    # differentiation (see ``_spec``): SPLIT's adjoint is JOIN of the outputs' gradients.

    def adjoint(self, api, *grads):
        return (api.join(list(grads), self.axis),)
