"""DML_SLICE1_OPERATOR_DESC: an input window with signed strides.

    CopyStart = InputWindowOffsets (+ InputWindowSizes - 1 where the stride is negative)
    Output[c] = Input[CopyStart + InputWindowStrides * c]
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..plan import CopyPlan
from ..model.feature_level import FeatureLevel
from ..model.tensor_desc import TensorDesc
from ..model._checks import INT32_MAX, INT32_MIN
from ..model._frozen import stored_init
from ._common import TYPES_2_1, TYPES_4_1, OperatorDesc, Field, SupportRow, element_layout, sequence_of


def max_copied_elements(window_size: int, window_stride: int) -> int:
    """``1 + (InputWindowSize - 1) / |InputWindowStride|`` (erratum 3: the page
    forgets the absolute value)."""
    return 1 + (window_size - 1) // abs(window_stride)


@stored_init
@dataclasses.dataclass(frozen=True, repr=False)
class Slice1OperatorDesc(OperatorDesc):
    """``OutputTensor`` may be ``None``: a packed output copying every reachable
    element of the window (``max_copied_elements`` per dimension) is derived."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc | None
    input_window_offsets: tuple[int, ...]
    input_window_sizes: tuple[int, ...]
    input_window_strides: tuple[int, ...]

    OPERATOR = "SLICE1"
    TYPE_VALUE = 111
    FIELDS = (Field("InputWindowOffsets", "input_window_offsets"), Field("InputWindowSizes", "input_window_sizes"),
              Field("InputWindowStrides", "input_window_strides"))
    INTRODUCED = FeatureLevel.FL_2_1
    SUPPORT = (
        SupportRow(FeatureLevel.FL_2_1, range(4, 6), TYPES_2_1),
        SupportRow(FeatureLevel.FL_3_0, range(1, 9), TYPES_2_1),
        SupportRow(FeatureLevel.FL_4_1, range(1, 9), TYPES_4_1),
    )

    def __post_init__(self):
        if not self._fast_path():
            self._check_rules()

    def _fast_path(self) -> bool:
        """The common valid description, checked in one pass by the rules of
        ``_check_rules`` and stored as it would store it: a TensorDesc input,
        fields of plain ints, one per dimension, the window inside the input,
        strides non-zero in INT32's range, an output that is derived or
        agrees. False (nothing stored) for anything else, which
        ``_check_rules`` then checks rule by rule, naming what is wrong."""
        inp = self.input_tensor
        if type(inp) is not TensorDesc:
            return False
        sizes = inp.sizes
        n = len(sizes)
        offsets = sequence_of(self.input_window_offsets, n)
        window = sequence_of(self.input_window_sizes, n)
        steps = sequence_of(self.input_window_strides, n)
        if offsets is None or window is None or steps is None:
            return False
        most = []
        for o, s, t, dim in zip(offsets, window, steps, sizes):
            if (type(o) is not int or type(s) is not int or type(t) is not int
                    or o < 0 or s < 1 or o + s > dim or t == 0 or not INT32_MIN <= t <= INT32_MAX):
                return False
            most.append(1 + (s - 1) // (t if t > 0 else -t))
        out = self.output_tensor
        if out is None:
            out = TensorDesc(inp.data_type, tuple(most))
        elif (type(out) is not TensorDesc or out.data_type is not inp.data_type or len(out.sizes) != n
              or out.flags):
            return False
        else:
            for size, m in zip(out.sizes, most):
                if size > m:
                    return False
        d = self.__dict__
        d["input_window_offsets"], d["input_window_sizes"], d["input_window_strides"] = offsets, window, steps
        d["output_tensor"] = out
        return True

    def _check_rules(self):
        """Every rule, one at a time: the first broken one raises, named."""
        inp = self._check_input()
        self._check_slice_window("InputTensor", inp)
        if self.output_tensor is None:
            self._set("output_tensor", TensorDesc(inp.data_type, self.max_output_sizes))
        self._check_tensors()
        for i, out in enumerate(self.output_tensor.sizes):
            most = max_copied_elements(self.input_window_sizes[i], self.input_window_strides[i])
            if not 1 <= out <= most:
                raise self._err(
                    f"OutputTensor.Sizes[{i}] must be in [1, 1 + (InputWindowSizes[{i}] - 1) / "
                    f"|InputWindowStrides[{i}]|] = [1, {most}]; got {out}")

    @property
    def max_output_sizes(self) -> tuple[int, ...]:
        return tuple(max_copied_elements(s, t) for s, t in zip(self.input_window_sizes, self.input_window_strides))

    def lower(self, in_strides: Sequence[int] | None = None, in_offset: int = 0) -> CopyPlan:
        inp, out = self.input_tensor, self.output_tensor
        if in_strides is None:
            in_strides, in_offset = inp.element_strides, 0
        steps = []
        for o, s, w, t in zip(self.input_window_offsets, self.input_window_sizes, self.input_window_strides,
                              in_strides):
            in_offset += (o + s - 1 if w < 0 else o) * t   # CopyStart: a negative stride starts at the window's end
            steps.append(w * t)
        return CopyPlan(inp.element_size, out.sizes, in_offset, tuple(steps), 0, out.element_strides)
