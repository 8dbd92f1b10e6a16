"""The array API: opendml's operators on NumPy, CuPy, PyTorch, JAX and Dask
arrays, returning new packed arrays of the same framework on the same device.

The layout (lowest first): ``_dispatch`` (which framework an array belongs
to, and the namespace through which the adapters call the API again, so none
imports it back) and ``_contract`` (the checks and messages every function
shares); ``planner`` (the first five's plans and plan cache, and the move
program's Python cache); ``numpy_adapter``;
``engine`` (the one ``Call`` type, NumPy's move route and the adjoints: what
the other adapters and the front share); the other adapters (``cupy_adapter``
with ``cuda``, the CUDA move launch PyTorch shares, ``jax_adapter``,
``dask_adapter``, and the PyTorch wing ``torch``: ``adapter``, ``library``,
``node``, ``inductor``, ``dtypes``); then the front, ``front`` (every
operator's thin function) and ``index_ops`` (the index-driven operators).
This package re-exports their public functions.
"""
from . import _contract, _dispatch
from .front import (adapter_for, cast, cpu_output_cache, depth_to_space, fold, identity, join, pad,  # noqa: F401
                    per_axis, plan_cache_info, slice, slice1, slice_grad, space_to_depth, split, tile, unfold)
from .index_ops import (diagonal_matrix, gather, gather_elements, gather_nd, one_hot,  # noqa: F401
                        reverse_subsequences, scatter_elements, scatter_nd)

__all__ = ["slice", "slice1", "unfold", "fold", "slice_grad", "identity", "cast", "pad", "join", "split", "tile",
           "space_to_depth", "depth_to_space", "gather", "gather_elements", "gather_nd", "scatter_elements",
           "scatter_nd", "one_hot", "reverse_subsequences", "diagonal_matrix", "cpu_output_cache", "plan_cache_info", "adapter_for"]

# The adapters call the array API through this namespace (``_dispatch.front``), never by importing it.
_dispatch.front.__dict__.update({name: globals()[name] for name in _contract.OPERATOR_OF})
