"""The description layer (the bottom one: it imports no other part of opendml, and touches no data): data types,
feature levels, tensor descriptions and the one error hierarchy."""
from .data_type import ELEMENT_TYPES, DataType
from .errors import BindingError, DmlError, UnsupportedError, ValidationError
from .feature_level import FeatureLevel
from .tensor_desc import (MINIMUM_BUFFER_TENSOR_ALIGNMENT, TensorDesc, TensorFlags,
                          calc_buffer_tensor_size, nhwc_strides, packed_strides)

__all__ = ["DataType", "ELEMENT_TYPES", "FeatureLevel", "TensorDesc", "TensorFlags",
           "calc_buffer_tensor_size", "packed_strides", "nhwc_strides",
           "MINIMUM_BUFFER_TENSOR_ALIGNMENT", "DmlError", "ValidationError",
           "UnsupportedError", "BindingError"]
