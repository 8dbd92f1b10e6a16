"""DML_CAST_OPERATOR_DESC: ``Output[i] = convert(Input[i])`` to the output's
DataType, for every pair of the 11 types.

The page says only "casts each element", not what DirectML does for NaN, out-of-range floats or narrowing integers.
opendml's rules (those of Direct3D's float-to-integer instructions and of C for the rest), identical on every backend
and tested:

* to the same type: a bit-exact copy;
* float to float: round to nearest, ties to even; a finite value beyond the target's range becomes an infinity; NaN
  stays NaN (sign and payload are not promised across widths);
* integer to float: round to nearest, ties to even (uint64/int64 to float16 or float32 may round; values beyond
  float16's range become infinity);
* float to integer: truncate toward zero, then saturate to the target's range (so -1.5 -> -1 for signed, 0 for
  unsigned; +inf -> the maximum, -inf -> the minimum); NaN -> 0;
* integer to integer: two's complement wrap-around (the low bits are kept, as a C cast does), e.g. INT32 300 -> UINT8
  44, INT8 -1 -> UINT32 4294967295.
"""
from __future__ import annotations

import dataclasses

from ..model.tensor_desc import TensorDesc
from ._common import TYPES_4_1, support, T as _T
from ._move import ElementWiseDesc
from ._spec import Binding, is_float

_CAST_1_0 = frozenset({_T.FLOAT32, _T.FLOAT16, _T.INT16, _T.INT8, _T.UINT16, _T.UINT8})
_CAST_3_0 = _CAST_1_0 | {_T.INT64, _T.INT32, _T.UINT64, _T.UINT32}


@dataclasses.dataclass(frozen=True, repr=False)
class CastOperatorDesc(ElementWiseDesc):
    """``OutputTensor`` is required (it carries the target DataType)."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc

    OPERATOR = "CAST"
    C_LOWERING = 1
    BINDING = Binding("cast", ((2, 3),), {"dtype": "int32"}, params="dtype", members=("dtype",),
                      returns="of ``x``'s shape and dtype ``dtype``",
                      rules="``dtype`` not a dtype at all; a dtype CAST does not take is an ``UnsupportedError``",
                      doc="""DML_CAST: ``x`` converted to ``dtype`` (a NumPy, PyTorch or JAX
    dtype, a ``dml.DataType`` or its name) by the rules of ``opendml.ops.cast``.

    Parameters
    ----------
    dtype : numpy.dtype, type, str, torch.dtype, JAX dtype, DataType or its int value
        The result's element type: one of the 11 DirectML types, spelt as any framework spells it, whatever ``x``'s
        framework: a NumPy dtype, scalar type or string (``np.int8``, ``"int8"``, ``"i1"``), a PyTorch dtype
        (``torch.int8``), a JAX or ml_dtypes dtype (``jnp.int8``), a ``DataType``, its int value (what
        ``torch.compile`` passes for it), or a ``DataType`` name (``"INT8"``, ``"DML_TENSOR_DATA_TYPE_INT8"``).""")
    OUTPUT_DERIVABLE = False
    SUPPORT = support({"1_0": 4, "3_1": (1, 8)}, types={"1_0": _CAST_1_0, "3_0": _CAST_3_0, "4_1": TYPES_4_1})

    @classmethod
    def arguments(cls, api, x, dtype):
        dt = api.dtype_argument(dtype, "cast")
        api.key_by_identity(dtype)     # a torch.dtype: the C call cache serves the next such call
        return (lambda t: cls(t, TensorDesc(dt, t.sizes))), (dt,)

    def __post_init__(self):
        self._check_input()
        if self.output_tensor is None:
            raise self._err("OutputTensor is required (it gives the DataType to cast to); got None")
        self._check_slot_tensors(same_type=False)
        self._check_sizes("OutputTensor", self.output_tensor, self.input_tensor.sizes, "InputTensor.Sizes")

    # differentiation (see ``_spec``): float-to-float casts are linear (up to rounding; adjoint: cast back), others not.

    def linear_part(self):
        return self if is_float(self.input_tensor.data_type) and is_float(self.output_tensor.data_type) else None

    def adjoint(self, api, grad):
        return (api.cast(grad, self.input_tensor.data_type),)
