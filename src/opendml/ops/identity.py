"""DML_ELEMENT_WISE_IDENTITY_OPERATOR_DESC: ``Output[i] = g(Input[i])`` with ``g(x) = x * Scale + Bias`` where
``ScaleBias`` is given (float types only), else ``g(x) = x`` (the strided copy: strides express layout changes, padding
and broadcasts). Decisions where the page is silent (float types only, the arithmetic's precision):
docs/operators/identity.md."""
from __future__ import annotations

import dataclasses

from ..model.tensor_desc import TensorDesc
from ._common import FLOAT16_32, support
from ._move import ElementWiseDesc
from ._spec import FLOAT_TYPES, Binding, ScaleBias, Struct, is_float


@dataclasses.dataclass(frozen=True, repr=False)
class ElementWiseIdentityOperatorDesc(ElementWiseDesc):
    """``OutputTensor`` may be None: a packed output of the input's sizes."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc | None = None
    scale_bias: ScaleBias | None = None

    OPERATOR = "ELEMENT_WISE_IDENTITY"
    C_LOWERING = 0
    BINDING = Binding("identity", ((2, 3),), {"scale": 2.0, "bias": 1.0},
                      params="scale: float | None = None, bias: float | None = None",
                      returns="of ``x``'s shape and dtype", rules="``scale``/``bias`` on an integer dtype",
                      doc="""DML_ELEMENT_WISE_IDENTITY: a packed copy of ``x``, or ``x * scale +
    bias`` (float types; ``scale`` defaults to 1 and ``bias`` to 0 where only
    the other is given; computed in float32 for float16/float32).

    Parameters
    ----------
    scale : float or None, optional
        The factor (default: none, or 1 where ``bias`` is given).
    bias : float or None, optional
        The addend (default: none, or 0 where ``scale`` is given).""")
    FIELDS = (Struct("ScaleBias", "scale_bias", default=None),)
    SUPPORT = support({"1_0": (4, 5), "3_0": (1, 8)}, first=FLOAT16_32)

    @classmethod
    def arguments(cls, api, x, scale, bias):
        sb = None if scale is None and bias is None else ScaleBias(1.0 if scale is None else scale,
                                                                   0.0 if bias is None else bias)
        return (lambda t: cls(t, None, sb)), (scale, bias)

    def __post_init__(self):
        inp = self._check_input()
        self._derive_output(inp.sizes, "InputTensor.Sizes")
        sb = self.scale_bias
        if sb is not None:
            if not isinstance(sb, ScaleBias):
                raise self._err(f"ScaleBias must be a ScaleBias(scale, bias) or None; got {type(sb).__name__}")
            if inp.data_type not in FLOAT_TYPES:
                raise self._err(f"ScaleBias applies to float DataTypes only (FLOAT16, FLOAT32, FLOAT64); "
                                f"got InputTensor.DataType {inp.data_type.name}")
            self._set("scale_bias", ScaleBias(self._float32(sb.scale, "ScaleBias.Scale"),
                                              self._float32(sb.bias, "ScaleBias.Bias")))

    def _passes(self, layouts):
        sb = self.scale_bias
        return super()._passes(layouts, None if sb is None else (sb.scale, sb.bias))

    # differentiation (see ``_spec``): g(x) = x * Scale + Bias is affine; its linear part scales, its own adjoint.

    def linear_part(self):
        if not is_float(self.input_tensor.data_type):
            return None
        sb = self.scale_bias
        if sb is None or sb.bias == 0.0:
            return self
        return dataclasses.replace(self, scale_bias=ScaleBias(sb.scale, 0.0))

    def adjoint(self, api, grad):
        sb = self.scale_bias
        return (api.identity(grad) if sb is None else api.identity(grad, scale=sb.scale),)
