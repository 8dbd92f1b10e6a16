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
from ._common import TYPES_2_1, TYPES_4_1, OperatorDesc, Field, SupportRow, element_layout


def max_copied_elements(window_size: int, window_stride: int) -> int:
    """``1 + (InputWindowSize - 1) / |InputWindowStride|`` (erratum 3: the page
    forgets the absolute value)."""
    return 1 + (window_size - 1) // abs(window_stride)


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
        ts, origin = element_layout(self.input_tensor, in_strides, in_offset)
        start = [o + (s - 1 if t < 0 else 0) for o, s, t in
                 zip(self.input_window_offsets, self.input_window_sizes, self.input_window_strides)]
        return CopyPlan(
            element_size=self.input_tensor.element_size,
            sizes=self.output_tensor.sizes,
            in_offset=origin + sum(c * t for c, t in zip(start, ts)),
            in_strides=tuple(w * t for w, t in zip(self.input_window_strides, ts)),
            out_offset=0,
            out_strides=self.output_tensor.element_strides,
        )
