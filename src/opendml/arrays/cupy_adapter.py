"""CuPy arrays: validate through the planner, run on the CUDA backend of the
array's device (by pointer, on CuPy's current stream), return a new packed
CuPy array on that device. A repeated call is served by the call cache
(``runtime/calls.py``), which this module gives CuPy's allocator, current
device and current stream."""
from __future__ import annotations

import cupy

from ..runtime import calls, get_backend
from .planner import OpCall, plan_for_strides

#: CUDA backends per device number (get_backend's lookup, without its string keys).
_BACKENDS: dict = {}


def _stream_ptr_function():
    """CuPy's current stream as a raw handle: its own C-level getter where it
    has one, else the Stream object's ``ptr``."""
    for owner in (getattr(cupy.cuda, "stream", None), cupy.cuda):
        fn = getattr(owner, "get_current_stream_ptr", None)
        if callable(fn):
            return fn
    return lambda: cupy.cuda.get_current_stream().ptr


_current_stream_ptr = _stream_ptr_function()


def run(x, call: OpCall):
    since = calls.generation()
    desc, plan, layout = plan_for_strides(call, x.dtype, x.shape, x.strides, x.itemsize)
    given = x
    if layout is None:
        x = cupy.ascontiguousarray(x)
        desc, plan, layout = plan_for_strides(call, x.dtype, x.shape, x.strides, x.itemsize)
    device_id = x.device.id
    backend = _BACKENDS.get(device_id) or _BACKENDS.setdefault(device_id, get_backend(f"cuda:{device_id}"))
    with cupy.cuda.Device(device_id):
        out = cupy.empty(desc.output_tensor.sizes, dtype=x.dtype)
        if layout.span and out.size:
            # By pointer, on CuPy's current stream: element 0 of the bound range
            # is x's lowest-addressed element (its origin minus the turned-around axes).
            origin = layout.origin * x.itemsize
            src, dst = x.data.ptr - origin, out.data.ptr
            launch = backend.record(plan, src, layout.span, dst)
            launch(src, dst, _current_stream_ptr())
            if x is given:
                # The next call like this one is served from C (runtime/calls.py).
                calls.put_cuda(call.name, x, call.args, tuple(out.shape), origin, launch, dst, since)
    return out


calls.register_cupy(cupy.ndarray, cupy.empty, cupy.cuda.runtime.getDevice, _current_stream_ptr)
