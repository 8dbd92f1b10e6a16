"""opendml: DirectML's tensor model and data-movement operators (SLICE, SLICE1,
UNFOLD, and their adjoints FOLD and SLICE_GRAD), with DirectML's validation
rules, on the CPU (NumPy and compiled C kernels) and NVIDIA GPUs (CUDA kernels
through CuPy).

Layers, each importing only those below it: ``model`` (data types, feature
levels, tensor descriptions, errors) < ``ops`` (one module per operator) <
``plan`` (what backends run) < ``runtime`` (backends, configuration) <
``arrays`` (the array API) and ``device`` (the DirectML flow) < ``jsonform``
and ``cli``. ``opendml.torch`` (PyTorch modules and operators) and ``opendml.jax``
are imported only when asked for (or when an array of that framework comes in);
Dask arrays go through ``arrays/dask_adapter.py``. ``opendml.slice`` is
DirectML's name and is left out of ``__all__`` so that ``from opendml import *``
does not shadow Python's ``slice``.
"""
from ._version import __version__
from .arrays import cpu_output_cache, fold, plan_cache_info, slice, slice1, slice_grad, unfold
from .device import Buffer, BufferBinding, BindingTable, CompiledOperator, Device, Operator
from .model import (BindingError, DataType, DmlError, FeatureLevel, TensorDesc, TensorFlags,
                    UnsupportedError, ValidationError, calc_buffer_tensor_size, nhwc_strides,
                    packed_strides)
from .ops import DepthSpaceOrder, OperatorDesc, PaddingMode, ScaleBias
from .ops.slice import SliceOperatorDesc
from .ops.slice1 import Slice1OperatorDesc
from .ops.unfold import UnfoldOperatorDesc
from .ops.fold import FoldOperatorDesc
from .ops.slice_grad import SliceGradOperatorDesc
from .ops.identity import ElementWiseIdentityOperatorDesc
from .ops.cast import CastOperatorDesc
from .ops.padding import PaddingOperatorDesc
from .ops.padding1 import Padding1OperatorDesc
from .ops.join import JoinOperatorDesc
from .ops.split import SplitOperatorDesc
from .ops.tile import TileOperatorDesc
from .ops.space_depth import (DepthToSpace1OperatorDesc, DepthToSpaceOperatorDesc, SpaceToDepth1OperatorDesc,
                              SpaceToDepthOperatorDesc)
from .ops.gather import GatherOperatorDesc
from .ops.gather_elements import GatherElementsOperatorDesc
from .ops.gather_nd import GatherNd1OperatorDesc, GatherNdOperatorDesc
from .ops.scatter import ScatterElementsOperatorDesc
from .ops.scatter_nd import ScatterNdOperatorDesc
from .ops.one_hot import OneHotOperatorDesc
from .ops.reverse_subsequences import ReverseSubsequencesOperatorDesc
from .ops.diagonal_matrix import DiagonalMatrix1OperatorDesc, DiagonalMatrixOperatorDesc
from .runtime.alloc import AllocationError
from .runtime.config import Config, config, configure
from .arrays import cast, depth_to_space, identity, join, pad, space_to_depth, split, tile
from .arrays.index_ops import (gather, gather_elements, gather_nd, one_hot, reverse_subsequences, scatter_elements,
                               scatter_nd)
from .arrays.index_ops import diagonal_matrix


# ``slice`` is DirectML's name and stays importable as ``opendml.slice``, but is
# left out of __all__ so ``from opendml import *`` does not shadow Python's slice.
__all__ = [
    "DataType", "FeatureLevel", "TensorDesc", "TensorFlags", "calc_buffer_tensor_size",
    "packed_strides", "nhwc_strides", "DmlError", "ValidationError", "UnsupportedError",
    "BindingError", "AllocationError", "OperatorDesc", "SliceOperatorDesc", "Slice1OperatorDesc", "UnfoldOperatorDesc",
    "FoldOperatorDesc", "SliceGradOperatorDesc",
    "Device", "Buffer", "BufferBinding", "BindingTable", "Operator", "CompiledOperator",
    "slice1", "unfold", "fold", "slice_grad", "cpu_output_cache", "plan_cache_info", "configure", "config", "Config",
    "__version__",
    # the data-movement family
    "identity", "cast", "pad", "join", "split", "tile", "space_to_depth", "depth_to_space",
    "ElementWiseIdentityOperatorDesc", "CastOperatorDesc", "PaddingOperatorDesc", "Padding1OperatorDesc",
    "JoinOperatorDesc", "SplitOperatorDesc", "TileOperatorDesc", "SpaceToDepthOperatorDesc",
    "DepthToSpaceOperatorDesc", "SpaceToDepth1OperatorDesc", "DepthToSpace1OperatorDesc", "PaddingMode",
    "DepthSpaceOrder", "ScaleBias",
    # the index-driven operators
    "gather", "gather_elements", "gather_nd", "scatter_elements", "scatter_nd", "one_hot", "reverse_subsequences",
    "GatherOperatorDesc", "GatherElementsOperatorDesc", "GatherNdOperatorDesc", "GatherNd1OperatorDesc",
    "ScatterElementsOperatorDesc", "ScatterNdOperatorDesc", "OneHotOperatorDesc", "ReverseSubsequencesOperatorDesc",
    "diagonal_matrix", "DiagonalMatrixOperatorDesc", "DiagonalMatrix1OperatorDesc",
]


def __getattr__(name):
    """``opendml.dxdispatch`` (DxDispatch models) loads on first use, so
    ``import opendml`` stays light."""
    if name == "dxdispatch":
        import importlib
        return importlib.import_module(f"{__name__}.dxdispatch")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
