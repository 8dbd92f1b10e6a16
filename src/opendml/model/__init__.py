"""The description layer: data types, feature levels, tensor descriptions, errors.
Nothing here touches data."""
from .data_type import ELEMENT_TYPES, DataType
from .errors import BindingError, DmlError, UnsupportedError, ValidationError
from .feature_level import LATEST, FeatureLevel
from .tensor_desc import (MINIMUM_BUFFER_TENSOR_ALIGNMENT, TensorDesc, TensorFlags,
                          calc_buffer_tensor_size, nhwc_strides, packed_strides)

__all__ = ["DataType", "ELEMENT_TYPES", "FeatureLevel", "LATEST", "TensorDesc", "TensorFlags",
           "calc_buffer_tensor_size", "packed_strides", "nhwc_strides",
           "MINIMUM_BUFFER_TENSOR_ALIGNMENT", "DmlError", "ValidationError",
           "UnsupportedError", "BindingError"]
