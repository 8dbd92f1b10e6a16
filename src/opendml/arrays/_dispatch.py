"""What the array API's front and its framework adapters share, below both: which framework an array belongs to
(``framework_of``, by type, looked up only where the framework is already imported) and ``front``, the namespace the
front (``arrays/front.py``) fills with the array API's functions and routes as it binds each. An adapter that calls
the array API again (an adjoint, a batching rule, a Dask task) reads ``front.slice1`` there at call time, so no
adapter imports ``opendml.arrays`` back: the front loads them (``importlib``) when an array of theirs first comes in.
"""
from __future__ import annotations

import sys
import types

import numpy as np

__all__ = ["FRAMEWORKS", "READABLE", "front", "framework_of", "enter_graph_whole", "on_enter_graph_whole"]

#: (module that must already be imported, attribute of its array type), checked in order after NumPy; the front maps
#: the module's name to its adapter.
FRAMEWORKS = (("torch", "Tensor"), ("cupy", "ndarray"), ("jax", "Array"), ("dask.array", "Array"))

#: The array API's public functions (``slice``, ``slice1``, ..., ``tile``, ``gather``, ...), set by the front as it
#: binds each.
front = types.SimpleNamespace()

#: Framework module name -> ``check(x, function, argument)``, registered by that framework's adapter: raises the
#: ``UnsupportedError`` for an array opendml cannot read at all (a sparse, nested or conjugated PyTorch tensor), which
#: the array API's checks report before its dtype and rank, naming ``x`` as ``argument``.
READABLE: dict = {}

#: The array API functions a ``torch.compile`` graph takes whole, registered by the front as it binds each
#: (``enter_graph_whole``), which marks each for Dynamo once Dynamo is imported (``on_enter_graph_whole``).
WHOLE_IN_GRAPH: list = []
_WHOLE_HOOKS: list = []


def enter_graph_whole(functions) -> None:
    """Register ``functions`` as entering a traced graph whole; the hooks set (``on_enter_graph_whole``) see them."""
    for f in functions:
        WHOLE_IN_GRAPH.append(f)
        for hook in _WHOLE_HOOKS:
            hook(f)


def on_enter_graph_whole(hook) -> None:
    """Call ``hook(f)`` for each function ``enter_graph_whole`` registers, so far and later."""
    _WHOLE_HOOKS.append(hook)
    for f in list(WHOLE_IN_GRAPH):
        hook(f)


#: Framework module name ("numpy", "torch", ...) per array type already seen.
_KIND_BY_TYPE: dict = {}


def framework_of(x) -> str | None:
    """``"numpy"``, or the name of the framework module (in ``FRAMEWORKS``) whose array type ``x`` is, or None: not
    an array the array API takes."""
    t = type(x)
    kind = _KIND_BY_TYPE.get(t)
    if kind is not None:
        return kind
    if isinstance(x, np.ndarray):
        kind = "numpy"
    else:
        for module, attr in FRAMEWORKS:
            mod = sys.modules.get(module)
            if mod is not None and isinstance(x, getattr(mod, attr)):
                kind = module
                break
        else:
            return None
    if len(_KIND_BY_TYPE) < 256:
        _KIND_BY_TYPE[t] = kind
    return kind
