"""DML_PADDING1_OPERATOR_DESC (feature level 5_0): PADDING (see ``padding``)
with a typed ``PaddingValue``: a ``DML_SCALAR_UNION`` read as
``PaddingValueDataType``, which must equal ``OutputTensor.DataType``.

An integer ``PaddingValue`` must lie in its type's range; a float one must
not overflow its type (a finite value becoming infinity). FLOAT16 has no
member of ``DML_SCALAR_UNION``; opendml reads a FLOAT16 value as a number
rounded to float16 (nearest).
"""
from __future__ import annotations

import dataclasses

from ..model.data_type import DataType
from ..model.feature_level import FeatureLevel
from ..model.tensor_desc import TensorDesc
from ._common import TYPES_4_1, SupportRow
from ._spec import Binding, Enum, Field, PaddingMode, ScalarUnion
from .padding import PaddingRules


def _default_value_type(parsed: dict):
    """``PaddingValueDataType`` left out of the JSON form: the output's type
    (which is the input's)."""
    inp = parsed.get("InputTensor")
    return inp.data_type if isinstance(inp, TensorDesc) else DataType.FLOAT32


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
    BINDING = Binding("pad", ((2, 3),), {"start_padding": 1, "end_padding": [0, 2], "mode": "reflect"})
    TYPE_VALUE = 155
    FIELDS = (Enum("PaddingMode", "padding_mode", enum=PaddingMode),
              Enum("PaddingValueDataType", "padding_value_data_type", enum=DataType, default=_default_value_type),
              ScalarUnion("PaddingValue", "padding_value", type_field="PaddingValueDataType", default=0),
              Field("StartPadding", "start_padding"), Field("EndPadding", "end_padding"))
    COUNTS = {"DimensionCount": "StartPadding"}
    INTRODUCED = FeatureLevel.FL_5_0
    SUPPORT = (SupportRow(FeatureLevel.FL_5_0, range(1, 9), TYPES_4_1),)

    def __post_init__(self):
        self._check_padding()
        self._typed_scalar("padding_value_data_type", "PaddingValueDataType", "padding_value", "PaddingValue")
