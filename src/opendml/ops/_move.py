"""What the data-movement family's lowerings share: the padding program (``pad_passes``) and scalar conversion by
CAST's rules. Every operator's checks and its lowering frame (``plan.MovePlan``) are ``_common.OperatorDesc``'s."""
from __future__ import annotations

import math

import numpy as np

from ..plan import AxisMap, Copy, Fill
from ._common import OperatorDesc
from ._spec import is_float


class MoveOperatorDesc(OperatorDesc):
    """The data-movement family's operators (those after the first five): contract and lowering are
    ``OperatorDesc``'s."""

    def output_sizes_for(self, input_sizes):
        """The output sizes (one tuple per output) for inputs of ``input_sizes`` with this description's other fields,
        by the operator's one formula: ints or PyTorch's symbolic sizes alike (a traced call's sizes under dynamic
        shapes). None where the operator states no such formula (its sizes come from the validated description)."""
        return None

    def linear_part(self):
        """Moving elements is linear in them where they are float (see ``_spec``); integer data is not
        differentiated. Overridden by an operator with a constant term, or whose output is not its data."""
        return self if is_float(self.outputs[0].data_type) else None


class SameSizes:
    """Mixin of the operators whose one output has the first input's sizes (its ``output_sizes_for``)."""

    def output_sizes_for(self, input_sizes):
        return (tuple(input_sizes[0]),)


class WholeAxis:
    """Mixin of the operators along ``Axis``: a block-wise run (Dask, see
    ``_spec``) needs that axis in one chunk."""

    def chunking(self):
        return {self.axis: 0}


class ElementWiseDesc(SameSizes, MoveOperatorDesc):
    """IDENTITY and CAST: one strided ``Copy`` of the input to an output of its sizes."""

    def _passes(self, layouts, scale_bias=None):
        (strides, origin), = layouts
        out = self.output_tensor
        yield Copy(0, 0, out.sizes, origin, tuple(strides), 0, out.element_strides, scale_bias=scale_bias)

    def chunking(self):
        return {}                                    # element-wise


def convert_scalar(value, data_type):
    """A FLOAT or scalar-union value as a value of ``data_type``, by CAST's rules (see ``cast``): to an integer type,
    truncate toward zero and saturate, NaN -> 0; to a float type, the float (the kernels round it to nearest)."""
    kind = data_type.numpy_dtype.kind
    if kind == "f":
        return float(value)
    info = np.iinfo(data_type.numpy_dtype)
    if isinstance(value, float):
        if math.isnan(value):
            return 0
        if math.isinf(value):
            return int(info.max) if value > 0 else int(info.min)
        value = math.trunc(value)
    return min(max(int(value), int(info.min)), int(info.max))


class PadPasses(tuple):
    """``pad_passes``' passes, with ``pad``: ``(mode, fill value or None, start, end)``, which ``lower`` hands on as
    ``MovePlan.pad`` (the CUDA backend runs such a program as one launch, reading its shape from the plan: runtime
    may not import ops to rebuild it)."""

    pad: tuple


def pad_passes(mode: int, fill_value, in_sizes, start, end, layout, out_strides) -> PadPasses:
    """The passes of PADDING/PADDING1 as a ``PadPasses`` (a tuple naming the program): the interior ``Copy`` (no map),
    then for each axis k the two border slabs (before and after the input along k; interior along the axes before k,
    whole along those after it): a ``Fill`` for CONSTANT (``mode`` 0), else a ``Copy`` whose ``AxisMap`` reads the
    input position the mode chooses. Every output element is written by exactly one pass."""
    strides, origin = layout
    r = len(in_sizes)
    out_sizes = tuple(n + s + e for n, s, e in zip(in_sizes, start, end))
    interior_offset = sum(s * t for s, t in zip(start, out_strides))
    passes = [Copy(0, 0, tuple(in_sizes), origin, tuple(strides), interior_offset, tuple(out_strides))]
    for k in range(r):
        # each slab: its length along k, where it starts there, and its map's shift
        for count, at, shift in ((start[k], 0, start[k]), (end[k], start[k] + in_sizes[k], -in_sizes[k])):
            if count == 0:
                continue
            sizes, dst_offset, maps = [], 0, []
            for j in range(r):
                if j < k:
                    sizes.append(in_sizes[j])
                    dst_offset += start[j] * out_strides[j]
                    maps.append(None)
                elif j == k:
                    sizes.append(count)
                    dst_offset += at * out_strides[j]
                    maps.append(AxisMap(mode, shift, in_sizes[k]))
                else:
                    sizes.append(out_sizes[j])
                    maps.append(AxisMap(mode, start[j], in_sizes[j]) if start[j] or end[j] else None)
            if mode == 0:
                passes.append(Fill(0, tuple(sizes), dst_offset, tuple(out_strides), fill_value))
            else:
                # a mapped axis reads the whole input along it: its source offset is the input's origin
                passes.append(Copy(0, 0, tuple(sizes), origin, tuple(strides), dst_offset, tuple(out_strides),
                                   maps=tuple(maps)))
    out = PadPasses(passes)
    out.pad = (int(mode), fill_value if int(mode) == 0 else None, tuple(start), tuple(end))
    return out
