"""CuPy arrays: validate through the planner, run on the CUDA backend of the
array's device, return a new packed CuPy array on that device."""
from __future__ import annotations

from ..runtime import get_backend
from .planner import OpCall, plan_for_strides

#: CUDA backends per device number (get_backend's lookup, without its string keys).
_BACKENDS: dict = {}


def run(x, call: OpCall):
    import cupy
    desc, plan, layout = plan_for_strides(call, x.dtype, x.shape, x.strides, x.itemsize)
    if layout is None:
        x = cupy.ascontiguousarray(x)
        desc, plan, layout = plan_for_strides(call, x.dtype, x.shape, x.strides, x.itemsize)
    device_id = x.device.id
    backend = _BACKENDS.get(device_id) or _BACKENDS.setdefault(device_id, get_backend(f"cuda:{device_id}"))
    with cupy.cuda.Device(device_id):
        out = cupy.empty(desc.output_tensor.sizes, dtype=x.dtype)
        if layout.span:
            # By pointer, on CuPy's current stream: element 0 of the bound range
            # is x's lowest-addressed element (its origin minus the turned-around axes).
            backend.launch(plan, x.data.ptr - layout.origin * x.itemsize, layout.span, out.data.ptr,
                           cupy.cuda.get_current_stream().ptr)
    return out
