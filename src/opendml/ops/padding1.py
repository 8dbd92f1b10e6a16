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
import math

import numpy as np

from ..model._checks import _short
from ..model.data_type import DataType
from ..model.feature_level import FeatureLevel
from ..model.tensor_desc import TensorDesc
from ._common import TYPES_4_1, SupportRow
from ._spec import Binding, Enum, Field, PaddingMode, ScalarUnion, Tensor, to_float
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
    SLOTS = (Tensor("InputTensor", "input_tensor", "input"),
             Tensor("OutputTensor", "output_tensor", "output", optional=True))
    FIELDS = (Enum("PaddingMode", "padding_mode", enum=PaddingMode),
              Enum("PaddingValueDataType", "padding_value_data_type", enum=DataType, default=_default_value_type),
              ScalarUnion("PaddingValue", "padding_value", type_field="PaddingValueDataType", default=0),
              Field("StartPadding", "start_padding"), Field("EndPadding", "end_padding"))
    COUNTS = {"DimensionCount": "StartPadding"}
    INTRODUCED = FeatureLevel.FL_5_0
    SUPPORT = (SupportRow(FeatureLevel.FL_5_0, range(1, 9), TYPES_4_1),)

    def __post_init__(self):
        self._check_padding()
        out = self.output_tensor
        try:
            dt = DataType.parse(self.padding_value_data_type)
        except Exception:
            raise self._err(f"PaddingValueDataType must be a DataType; got {self.padding_value_data_type!r}") from None
        if dt != out.data_type:
            raise self._err(f"PaddingValueDataType must equal OutputTensor.DataType; got {dt.name} != "
                            f"{out.data_type.name}")
        self._set("padding_value_data_type", dt)
        v = self.padding_value
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise self._err(f"PaddingValue must be a number; got {_short(v)}")
        npdt = dt.numpy_dtype
        if npdt.kind in "iu":
            if isinstance(v, (float, np.floating)):
                if not (math.isfinite(v) and v == math.floor(v)):
                    raise self._err(f"PaddingValue must be an integer for PaddingValueDataType {dt.name}; got {v!r}")
            v = int(v)
            info = np.iinfo(npdt)
            if not info.min <= v <= info.max:
                raise self._err(f"PaddingValue must be in [{info.min}, {info.max}] for PaddingValueDataType "
                                f"{dt.name}; got {_short(v)}")
        else:
            v = to_float(v, "PaddingValue", self._err)
            with np.errstate(over="ignore"):
                overflow = math.isfinite(v) and not np.isfinite(np.array(v).astype(npdt))
            if overflow:
                raise self._err(f"PaddingValue must fit PaddingValueDataType {dt.name} (magnitude <= "
                                f"{float(np.finfo(npdt).max):g}); got {v!r}")
        self._set("padding_value", v)
