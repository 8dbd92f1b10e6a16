"""DML_UNFOLD_OPERATOR_DESC: sliding blocks over 1 to 6 spatial dimensions.

    BlocksPerDimension[d] = (SpatialSize[d] + StartPadding[d] + EndPadding[d]
                             - Dilations[d] * (WindowSizes[d] - 1) - 1) / Strides[d] + 1
    Output sizes: (N, C x prod(WindowSizes), prod(BlocksPerDimension)),
    optionally preceded by 1s up to the input's DimensionCount (erratum 4).
    Output[n, c * prod(WindowSizes) + k, b] = Input[n, c, b*Strides + k*Dilations - StartPadding]
    (k and b row-major multi-indices; 0 outside the input).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
import math

from ..plan import UnfoldPlan
from ..model._checks import UINT32_MAX
from ..model.feature_level import FeatureLevel
from ..model.tensor_desc import MAX_ELEMENTS, TensorDesc
from ..model._frozen import stored_init
from ._common import TYPES_4_1, OperatorDesc, Field, SupportRow, element_layout

MAX_SPATIAL_DIMENSIONS = 6


@stored_init
@dataclasses.dataclass(frozen=True, repr=False)
class UnfoldOperatorDesc(OperatorDesc):
    """``OutputTensor`` may be ``None``: a packed 3-D output is derived."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc | None
    window_sizes: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    start_padding: tuple[int, ...]
    end_padding: tuple[int, ...]

    OPERATOR = "UNFOLD"
    TYPE_VALUE = 177
    FIELDS = (Field("WindowSizes", "window_sizes"), Field("Strides", "strides", 1), Field("Dilations", "dilations", 1),
              Field("StartPadding", "start_padding", 0), Field("EndPadding", "end_padding", 0))
    DEFAULT_INPUT_START = 0
    INTRODUCED = FeatureLevel.FL_6_4
    SUPPORT = (SupportRow(FeatureLevel.FL_6_4, range(3, 9), TYPES_4_1),)

    def __post_init__(self):
        inp = self._check_input()
        self._ints("window_sizes", "WindowSizes", None)
        d = len(self.window_sizes)
        if not 1 <= d <= MAX_SPATIAL_DIMENSIONS:
            raise self._err(f"DimensionCount (the length of WindowSizes) must be in [1, "
                            f"{MAX_SPATIAL_DIMENSIONS}]; got {d}")
        self._check_window_fields("InputTensor", inp, d)
        expected = self.expected_output_sizes
        count = math.prod(expected)
        if count > MAX_ELEMENTS or max(expected) > UINT32_MAX:
            raise self._err(f"the output would have sizes {list(expected)} ({count} elements); a tensor "
                            f"holds at most {MAX_ELEMENTS} elements of at most {UINT32_MAX} per dimension")
        if self.output_tensor is None:
            self._set("output_tensor", TensorDesc(inp.data_type, expected))
        self._check_tensors(same_rank=False)
        out = self.output_tensor.sizes
        lead = out[:-3]
        if out[-3:] != expected or any(s != 1 for s in lead) or len(out) > inp.rank:
            raise self._err(
                f"OutputTensor.Sizes must be {list(expected)} (N, C x prod(WindowSizes), BlockCount), "
                f"optionally preceded by 1s up to InputTensor.DimensionCount {inp.rank}; got {list(out)}")

    @property
    def blocks_per_dimension(self) -> tuple[int, ...]:
        return tuple(
            (s + sp + ep - dl * (w - 1) - 1) // st + 1
            for s, w, st, dl, sp, ep in zip(self.input_tensor.sizes[2:], self.window_sizes, self.strides,
                                           self.dilations, self.start_padding, self.end_padding))

    @property
    def block_count(self) -> int:
        return math.prod(self.blocks_per_dimension)

    @property
    def expected_output_sizes(self) -> tuple[int, int, int]:
        n, c = self.input_tensor.sizes[:2]
        return (n, c * math.prod(self.window_sizes), self.block_count)

    def lower(self, in_strides: Sequence[int] | None = None, in_offset: int = 0) -> UnfoldPlan:
        ts, origin = element_layout(self.input_tensor, in_strides, in_offset)
        n, c, *spatial = self.input_tensor.sizes
        return UnfoldPlan(
            element_size=self.input_tensor.element_size,
            batch=n, channels=c, spatial=tuple(spatial),
            in_offset=origin, in_strides=tuple(ts),
            window=self.window_sizes, strides=self.strides, dilations=self.dilations,
            start_padding=self.start_padding, blocks=self.blocks_per_dimension,
            out_offset=0, out_strides=self.output_tensor.element_strides[-3:],
        )
