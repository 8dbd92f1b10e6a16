"""opendml: DirectML's tensor model and data-movement operators (SLICE, SLICE1,
UNFOLD), with DirectML's validation rules, on the CPU (NumPy) and NVIDIA GPUs
(CUDA through CuPy)."""
from .api import cpu_output_cache, slice, slice1, unfold
from .device import Buffer, BufferBinding, BindingTable, CompiledOperator, Device, Operator
from .ops import OperatorDesc, Slice1OperatorDesc, SliceOperatorDesc, UnfoldOperatorDesc
from .spec import (BindingError, DataType, DmlError, FeatureLevel, TensorDesc, TensorFlags,
                   UnsupportedError, ValidationError, calc_buffer_tensor_size, nhwc_strides,
                   packed_strides)

__version__ = "0.1.0"

__all__ = [
    "DataType", "FeatureLevel", "TensorDesc", "TensorFlags", "calc_buffer_tensor_size",
    "packed_strides", "nhwc_strides", "DmlError", "ValidationError", "UnsupportedError",
    "BindingError", "OperatorDesc", "SliceOperatorDesc", "Slice1OperatorDesc", "UnfoldOperatorDesc",
    "Device", "Buffer", "BufferBinding", "BindingTable", "Operator", "CompiledOperator",
    "slice", "slice1", "unfold", "cpu_output_cache", "__version__",
]
