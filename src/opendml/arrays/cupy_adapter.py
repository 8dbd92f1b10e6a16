"""CuPy arrays: validate through the planner, run on the CUDA backend of the
array's device, return a new packed CuPy array on that device."""
from __future__ import annotations

import numpy as np

from ..runtime import get_backend
from .planner import OpCall, array_layout, plan_for

_WORD = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def run(x, call: OpCall):
    import cupy
    layout = array_layout(x.shape, x.strides, x.itemsize)
    if layout is None:
        x = cupy.ascontiguousarray(x)
        layout = array_layout(x.shape, x.strides, x.itemsize)
    desc, plan = plan_for(call, x.dtype, x.shape, layout)
    device_id = x.device.id
    with cupy.cuda.Device(device_id):
        out = cupy.empty(desc.output_tensor.sizes, dtype=x.dtype)
        word = _WORD[x.itemsize]
        # The lowest-addressed element of x: its origin minus the turned-around axes.
        low_ptr = x.data.ptr - layout.origin * x.itemsize
        src = cupy.ndarray((layout.span,), dtype=word,
                           memptr=cupy.cuda.MemoryPointer(x.data.mem, low_ptr - x.data.mem.ptr))
        get_backend(f"cuda:{device_id}").prepare(plan, src, out.view(word).reshape(-1))()
    return out
