"""The description layer: data types, feature levels, tensor descriptions and
the one error hierarchy. Nothing here touches data, and nothing here imports
any other part of opendml (this is the bottom layer)."""
from .data_type import ELEMENT_TYPES, DataType
from .errors import BindingError, DmlError, UnsupportedError, ValidationError
from .feature_level import FeatureLevel
from .tensor_desc import (MINIMUM_BUFFER_TENSOR_ALIGNMENT, TensorDesc, TensorFlags,
                          calc_buffer_tensor_size, nhwc_strides, packed_strides)

__all__ = ["DataType", "ELEMENT_TYPES", "FeatureLevel", "TensorDesc", "TensorFlags",
           "calc_buffer_tensor_size", "packed_strides", "nhwc_strides",
           "MINIMUM_BUFFER_TENSOR_ALIGNMENT", "DmlError", "ValidationError",
           "UnsupportedError", "BindingError"]
