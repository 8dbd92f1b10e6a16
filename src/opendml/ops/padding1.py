"""DML_PADDING1_OPERATOR_DESC (feature level 5_0): PADDING (see ``padding``) with a typed ``PaddingValue``, a
``DML_SCALAR_UNION`` read as ``PaddingValueDataType``, which must be ``OutputTensor.DataType``
(``OperatorDesc._typed_scalar``)."""
from __future__ import annotations

import dataclasses

from ..model.data_type import DataType
from ..model.tensor_desc import TensorDesc
from ._common import support
from ._spec import Binding, Enum, Field, PaddingMode, ScalarUnion, enum_member, input_type, spread
from .padding import PaddingRules

#: The array function's names of the modes (any case).
MODES = {"constant": PaddingMode.CONSTANT, "edge": PaddingMode.EDGE, "reflect": PaddingMode.REFLECTION,
         "reflection": PaddingMode.REFLECTION, "symmetric": PaddingMode.SYMMETRIC, "wrap": PaddingMode.WRAP}


@dataclasses.dataclass(frozen=True, repr=False)
class Padding1OperatorDesc(PaddingRules):
    """``OutputTensor`` may be None: a packed output of the padded sizes."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc | None
    padding_mode: PaddingMode
    padding_value_data_type: DataType
    padding_value: int | float
    start_padding: tuple[int, ...]
    end_padding: tuple[int, ...]

    OPERATOR = "PADDING1"
    C_LOWERING = 3
    BINDING = Binding("pad", ((2, 3),), {"start_padding": 1, "end_padding": [0, 2], "mode": "reflect"},
                      params="start_padding: Ints, end_padding: Ints, mode: str = 'constant', value=0",
                      members=("mode",),
                      returns="of ``x``'s dtype, each axis ``start + size + end`` long",
                      rules="an unknown ``mode``, a ``value`` out of the dtype's range", doc="""DML_PADDING1: ``x`` padded by ``start_padding``/``end_padding`` elements
    per axis (an int pads every axis), ``mode`` "constant" (``value``, of ``x``'s type), "edge", "reflect", "symmetric"
    or "wrap", as DirectML's DML_PADDING_MODE (padding longer than the axis is taken in every mode: "reflect",
    "symmetric" and "wrap" repeat periodically).

    Parameters
    ----------
    start_padding, end_padding : int or sequence of int
        Elements added before and after each axis: an int for all, or one per axis.
    mode : str or PaddingMode, optional
        ``"constant"`` (the default), ``"edge"``, ``"reflect"`` (or ``"reflection"``), ``"symmetric"``, ``"wrap"`` in
        any case, a ``PaddingMode`` or its int value.
    value : int or float, optional
        The constant mode's value (default 0); it must fit ``x``'s dtype.""")
    FIELDS = (Enum("PaddingMode", "padding_mode", enum=PaddingMode),
              Enum("PaddingValueDataType", "padding_value_data_type", enum=DataType, default=input_type),
              ScalarUnion("PaddingValue", "padding_value", type_field="PaddingValueDataType", default=0),
              Field("StartPadding", "start_padding"), Field("EndPadding", "end_padding"))
    SUPPORT = support({"5_0": (1, 8)})

    @classmethod
    def arguments(cls, api, x, start_padding, end_padding, mode, value):
        m = MODES.get(mode.lower()) if isinstance(mode, str) else enum_member(PaddingMode, mode)
        if m is None:
            raise api.field_error("pad", "PaddingMode", f"be one of {', '.join(repr(k) for k in MODES)} or a "
                                  f"PaddingMode (mode)", mode)

        def make(t):
            return cls(t, None, m, t.data_type, value, spread(start_padding, t.rank), spread(end_padding, t.rank))
        return make, (start_padding, end_padding, m, value)

    def __post_init__(self):
        self._check_padding()
        self._typed_scalar("padding_value_data_type", "PaddingValueDataType", "padding_value", "PaddingValue")
