"""JAX arrays: CPU arrays are read through NumPy and run on the CPU backend;
GPU arrays are viewed as CuPy arrays (DLPack). The result is a new JAX array on
the same device."""
from __future__ import annotations

import numpy as np

from ..model.errors import UnsupportedError
from . import numpy_adapter
from .planner import OpCall


def run(x, call: OpCall):
    import jax
    (dev,) = x.devices()
    if dev.platform == "cpu":
        return jax.numpy.asarray(numpy_adapter.run(np.asarray(x), call))
    if dev.platform == "gpu":
        import cupy
        from . import cupy_adapter
        with cupy.cuda.Device(dev.id):
            out = cupy_adapter.run(cupy.from_dlpack(x), call)
        return jax.dlpack.from_dlpack(out)
    raise UnsupportedError(f"JAX arrays on {dev.platform} are not supported")
