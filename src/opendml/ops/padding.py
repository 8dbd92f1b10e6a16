"""DML_PADDING_OPERATOR_DESC: the input grown by ``StartPadding`` and ``EndPadding`` elements per dimension,

    OutputTensor.Sizes[i] = InputTensor.Sizes[i] + StartPadding[i] + EndPadding[i]
    Output[o] = Input[o - StartPadding]  where that lies inside the input,
    else by PaddingMode, per dimension (i = o - StartPadding, n = the input size):
      CONSTANT    PaddingValue
      EDGE        Input[clamp(i, 0, n - 1)]
      REFLECTION  mirrored without repeating the edge, periodically (period 2(n - 1))
      SYMMETRIC   mirrored repeating the edge, periodically (period 2n)   (feature level 3_0)
      WRAP        Input[i mod n]                                          (feature level 6_4)

Padding may exceed the input's size in every mode. ``PaddingValue``, a FLOAT, converts to the output's type by CAST's
rules. Errata and decisions (SYMMETRIC and WRAP, REFLECTION of one element): docs/operators/padding.md."""
from __future__ import annotations

import dataclasses

from ..model._checks import UINT32_MAX
from ..model.feature_level import FeatureLevel
from ..model.tensor_desc import TensorDesc
from ..model.errors import UnsupportedError
from ..plan import AxisMap
from ._common import FLOAT16_32, support
from ._move import MoveOperatorDesc, convert_scalar, pad_passes
from ._spec import Enum, Field, Float, PaddingMode, is_float

#: The feature level each padding mode came with.
MODE_INTRODUCED = {PaddingMode.CONSTANT: FeatureLevel.FL_1_0, PaddingMode.EDGE: FeatureLevel.FL_1_0,
                   PaddingMode.REFLECTION: FeatureLevel.FL_1_0, PaddingMode.SYMMETRIC: FeatureLevel.FL_3_0,
                   PaddingMode.WRAP: FeatureLevel.FL_6_4}


class PaddingRules(MoveOperatorDesc):
    """The rules PADDING and PADDING1 share."""

    def _check_padding(self) -> None:
        inp = self._check_input()
        self._enum("padding_mode", "PaddingMode", PaddingMode)
        n = inp.rank
        for f in self.FIELDS[-2:]:                 # StartPadding, EndPadding
            self._ints(f.attr, f.json, n)
        for i in range(n):
            self._check_bounds("StartPadding", i, self.start_padding[i], 0, UINT32_MAX)
            self._check_bounds("EndPadding", i, self.end_padding[i], 0, UINT32_MAX)
        self._derive_output(self.output_sizes_for((inp.sizes,))[0], "InputTensor.Sizes + StartPadding + EndPadding")

    def output_sizes_for(self, input_sizes):
        return (tuple(n + s + e for n, s, e in zip(input_sizes[0], self.start_padding, self.end_padding)),)

    def _validate_level(self, level: FeatureLevel) -> None:
        need = MODE_INTRODUCED[self.padding_mode]
        if level < need:
            raise UnsupportedError(f"{self.OPERATOR}: PaddingMode {self.padding_mode.name} was introduced in "
                                   f"feature level {need.label}; got feature level {level.label}")

    # differentiation (see ``_spec``): CONSTANT padding is affine (the value is its constant), its adjoint the SLICE1
    # of the interior; the other modes read input elements several times, and their adjoint accumulates, axis by axis,
    # every output position into the input position it read (``pad_axis_runs``): the interior is a SLICE1, each run of
    # positions reading consecutive input elements (forward, backward) is SLICE1 then SLICE_GRAD (stride +1 or -1),
    # and a run reading one element repeatedly (EDGE) is summed.

    def linear_part(self):
        if not is_float(self.input_tensor.data_type):
            return None
        if self.padding_mode == PaddingMode.CONSTANT and self.padding_value != 0:
            return dataclasses.replace(self, padding_value=0.0 if isinstance(self.padding_value, float) else 0)
        return self

    def adjoint(self, api, grad):
        sizes, start, end = self.input_tensor.sizes, self.start_padding, self.end_padding
        r = len(sizes)
        if self.padding_mode == PaddingMode.CONSTANT:
            return (api.slice1(grad, list(start), list(sizes), [1] * r),)
        shape = list(self.output_tensor.sizes)
        for k in range(r):
            if start[k] == 0 and end[k] == 0:
                continue
            n = sizes[k]
            reduced = shape[:k] + [n] + shape[k + 1:]

            def window(at, count, of):          # (offsets, sizes) of ``count`` elements from ``at`` along k
                return [at if j == k else 0 for j in range(r)], [count if j == k else s for j, s in enumerate(of)]
            total = api.slice1(grad, *window(start[k], n, shape), [1] * r)          # the interior
            for o, length, i, step in pad_axis_runs(int(self.padding_mode), start[k], end[k], n):
                piece = api.slice1(grad, *window(o, length, shape), [1] * r)
                if step == 0:                                           # one element read `length` times
                    piece = api.reshape(api.sum(piece, (k,)), reduced[:k] + [1] + reduced[k + 1:])
                    at, length, step = i, 1, 1
                else:
                    at = i if step > 0 else i - length + 1
                total = total + api.slice_grad(piece, reduced, *window(at, length, reduced),
                                               [step if j == k else 1 for j in range(r)])
            grad, shape = total, reduced
        return (grad,)

    def chunking(self):
        return {k: 0 for k, (s, e) in enumerate(zip(self.start_padding, self.end_padding)) if s or e}

    def _passes(self, layouts):
        return pad_passes(int(self.padding_mode), convert_scalar(self.padding_value, self.output_tensor.data_type),
                          self.input_tensor.sizes, self.start_padding, self.end_padding, layouts[0],
                          self.output_tensor.element_strides)


@dataclasses.dataclass(frozen=True, repr=False)
class PaddingOperatorDesc(PaddingRules):
    """``OutputTensor`` may be None: a packed output of the padded sizes."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc | None
    padding_mode: PaddingMode
    padding_value: float
    start_padding: tuple[int, ...]
    end_padding: tuple[int, ...]

    OPERATOR = "PADDING"
    FIELDS = (Enum("PaddingMode", "padding_mode", enum=PaddingMode), Float("PaddingValue", "padding_value", default=0.0),
              Field("StartPadding", "start_padding"), Field("EndPadding", "end_padding"))
    SUPPORT = support({"1_0": (4, 5), "3_1": (1, 8)}, first=FLOAT16_32, wide="5_0")

    def __post_init__(self):
        self._check_padding()
        self._set("padding_value", self._float32(self.padding_value, "PaddingValue"))


def pad_axis_runs(mode: int, start: int, end: int, n: int):
    """The border positions of one padded axis (``start`` before the input of ``n`` elements, ``end`` after it; not the
    interior) grouped into maximal runs of consecutive output positions whose input positions (``AxisMap.source``) step
    by +1, -1 or 0: ``(first output position, length, first input position, step)`` each."""
    amap = AxisMap(mode, start, n)
    for lo, hi in ((0, start), (start + n, start + n + end)):
        o = lo
        while o < hi:
            i = amap.source(o)
            length, step = 1, None
            while o + length < hi:
                nxt = amap.source(o + length) - amap.source(o + length - 1)
                if step is None and abs(nxt) <= 1:
                    step = nxt
                if nxt != step:
                    break
                length += 1
            yield o, length, i, step if step is not None else 1
            o += length
