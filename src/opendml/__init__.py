"""opendml: DirectML's tensor model and data-movement operators (slicing and window operators, the data-movement family,
index-driven operators: ``opendml.ops.OPERATORS``) with its validation rules, on the CPU (NumPy and compiled C kernels)
and NVIDIA GPUs (CUDA kernels through CuPy), as array functions of NumPy, CuPy, PyTorch, JAX and Dask arrays.

Layers, each importing only those below it: ``model`` (data types, feature levels, tensor descriptions, errors) <
``plan`` (what backends run) < ``ops`` (one module per operator) < ``jsonform`` (the JSON form) < ``runtime``
(backends, configuration) < ``arrays`` (the array API) < ``device`` (the DirectML flow) < ``dxdispatch`` < ``torch``
and ``jax`` < ``cli``. ``opendml.torch`` (PyTorch modules and operators) and ``opendml.jax`` are imported only when
asked for; a framework's adapter in ``arrays`` (``arrays/torch/``, ``jax_adapter``, ``dask_adapter``...) loads when an
array of that framework first comes in. ``opendml.slice`` (DirectML's name) is left out of ``__all__`` so that ``from
opendml import *`` does not shadow Python's ``slice``.
"""
from ._version import __version__
from . import arrays as _arrays, ops as _ops
from .arrays import cpu_output_cache, plan_cache_info
from .device import Buffer, BufferBinding, BindingTable, CompiledOperator, Device, Operator
from .model import (BindingError, DataType, DmlError, FeatureLevel, TensorDesc, TensorFlags,
                    UnsupportedError, ValidationError, calc_buffer_tensor_size, nhwc_strides,
                    packed_strides)
from .ops import DepthSpaceOrder, OperatorDesc, PaddingMode, ScaleBias
from .runtime.alloc import AllocationError
from .runtime.config import Config, config, configure

# Every registered operator's array function (``opendml.arrays.FUNCTIONS``) and description class
# (``opendml.ops.DESCRIPTIONS``), by name: nothing per operator here. Real functions and classes once the package is
# imported (``help``, ``inspect.signature``, completion); the API reference imports the package to read them
# (``force_inspection``, mkdocs.yml).
globals().update(_arrays.FUNCTIONS)
globals().update(_ops.DESCRIPTIONS)

__all__ = [
    "DataType", "FeatureLevel", "TensorDesc", "TensorFlags", "calc_buffer_tensor_size",
    "packed_strides", "nhwc_strides", "DmlError", "ValidationError", "UnsupportedError",
    "BindingError", "AllocationError", "OperatorDesc", "Device", "Buffer", "BufferBinding", "BindingTable",
    "Operator", "CompiledOperator", "cpu_output_cache", "plan_cache_info", "configure", "config", "Config",
    "__version__", "PaddingMode", "DepthSpaceOrder", "ScaleBias",
    *(n for n in _arrays.FUNCTIONS if n != "slice"), *_ops.DESCRIPTIONS,
]


def __getattr__(name):
    """``opendml.dxdispatch`` (DxDispatch models) loads on first use, so
    ``import opendml`` stays light."""
    if name == "dxdispatch":
        import importlib
        return importlib.import_module(f"{__name__}.dxdispatch")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
