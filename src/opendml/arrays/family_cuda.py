"""The data-movement family on CUDA memory: one launch path for PyTorch CUDA
tensors and CuPy arrays. Each input is read where it lies (by address,
element strides and origin; a stride that is not a whole number of elements
is packed first), the outputs come from the framework's own allocator
through ``runtime.alloc.output`` (``AllocationError`` where it fails), and
the validated description's move program runs on the device's CUDA backend
(``CudaBackend.run_move``) on the framework's current stream of that device.
Neither framework is imported here: callers pass what it takes."""
from __future__ import annotations

import math

from ..runtime import alloc, get_backend
from ..runtime.cuda.backend import check_alignment
from .planner import array_layout

__all__ = ["run_move"]


def run_move(desc, inputs, allocate, device_index: int, stream_ptr: int, errors: tuple = ()) -> list:
    """Run ``desc`` on ``inputs``, each ``(array, address, shape, byte
    strides, item size, pack)`` where ``pack()`` returns the same form for a
    packed copy (used where a stride is not a whole number of elements).
    ``allocate(shape, numpy dtype)`` returns ``(output array, its address)``
    on device ``device_index``; ``errors`` are the allocator's out-of-memory
    exceptions. The launches are queued on ``stream_ptr``. Returns the
    outputs."""
    srcs, spans, layouts, keep = [], [], [], []
    for entry in inputs:
        array, ptr, shape, strides, item, pack = entry
        layout = array_layout(tuple(shape), tuple(strides), item)
        if layout is None:
            array, ptr, shape, strides, item, _ = pack()
            layout = array_layout(tuple(shape), tuple(strides), item)
        check_alignment(item, ptr, 0, desc.OPERATOR)
        keep.append(array)
        srcs.append(ptr - layout.origin * item)
        spans.append(layout.span)
        layouts.append((layout.strides, layout.origin))
    plan = desc.lower(in_layouts=layouts)
    outs, dsts = [], []
    for t in desc.outputs:
        out, ptr = alloc.output(desc.OPERATOR, t.sizes, t.data_type.numpy_dtype, allocate,
                                device=f"cuda:{device_index}", errors=errors)
        outs.append(out)
        dsts.append(ptr)
    get_backend(f"cuda:{device_index}").run_move(plan, srcs, spans, dsts, [math.prod(t.sizes) for t in desc.outputs],
                                                 stream_ptr, desc.OPERATOR)
    return outs
