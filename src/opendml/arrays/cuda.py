"""The data-movement family on CUDA memory: one launch path (``move``) for PyTorch CUDA tensors and CuPy arrays,
which their adapters' ``run`` takes for every operator but the first five. Each input is read where it lies (by
address, element strides and origin; a stride that is not a whole number of elements is packed first), the outputs
come from the framework's own allocator through ``runtime.alloc.output`` (``AllocationError`` where it fails), and
the validated description's move program runs on the device's CUDA backend (``CudaBackend.record_move``'s
launches) on the framework's current stream of that device, recorded in the C call cache where asked (``move``'s
``record``). Neither framework is imported here: callers pass what it takes."""
from __future__ import annotations

import math

from ..runtime import alloc, calls, get_backend
from ..runtime.cuda.backend import check_alignment
from .planner import array_layout

__all__ = ["move"]


def move(desc, inputs, allocate, device_index: int, stream_ptr: int, errors: tuple = (),
             record=None, name: str | None = None) -> list:
    """The outputs of ``desc`` run on ``inputs``, each ``(array, address, shape, byte strides, item size, pack)``
    where ``pack()`` gives the same of a packed copy (where a stride is not a whole number of elements).
    ``allocate(shape, numpy dtype)`` gives ``(output array, its address)`` on device ``device_index``; ``errors``
    are the allocator's out-of-memory exceptions; the launches are queued on ``stream_ptr``.

    ``record`` (optional): ``(Call, x, since[, planned])``, the call as its array function offered it to the C call
    cache (``x`` its input or inputs as given; ``since`` the cache's generation read before any setting; ``planned``
    each input's (shape, strides) read before its layout was: nothing is recorded where one changed): where no
    input was packed, the launches are recorded there (``runtime.calls.put_move_cuda``). ``name`` (optional, else
    ``record``'s call's): the array function, which the errors of the first five (``PLAIN_KERNEL``) name, as their
    other routes do; the others' name the operator."""
    name = name or (record[0].name if record is not None else None)
    what = name if name and getattr(desc, "PLAIN_KERNEL", None) is not None else desc.OPERATOR
    srcs, spans, layouts, keep, origins = [], [], [], [], []
    packed = False
    for entry in inputs:
        array, ptr, shape, strides, item, pack = entry
        layout = array_layout(tuple(shape), tuple(strides), item)
        if layout is None:
            array, ptr, shape, strides, item, _ = pack()
            layout = array_layout(tuple(shape), tuple(strides), item)
            packed = True
        check_alignment(item, ptr, 0, what)
        keep.append(array)
        srcs.append(ptr - layout.origin * item)
        origins.append(layout.origin * item)
        spans.append(layout.span)
        layouts.append((layout.strides, layout.origin))
    plan = desc.lower(in_layouts=layouts)
    outs, dsts = [], []
    for t in desc.outputs:
        out, ptr = alloc.output(what, t.sizes, t.data_type.numpy_dtype, allocate,
                                device=f"cuda:{device_index}", errors=errors)
        outs.append(out)
        dsts.append(ptr)
    launches = get_backend(f"cuda:{device_index}").record_move(plan, srcs, spans, dsts,
                                                               [math.prod(t.sizes) for t in desc.outputs],
                                                               what)
    launches(srcs, dsts, stream_ptr)
    if record is not None and not packed:
        call, x, since = record[:3]
        if call.ccall is not None:
            # (the index functions' ccall names the outputs' shapes as returned: their own, without leading 1s)
            name, args, shapes = call.ccall[0], call.ccall[1], call.ccall[3] if len(call.ccall) > 3 else None
            calls.put_move_cuda(name, x, args, tuple((tuple(o.shape) if shapes is None else shapes[i], o.dtype, p)
                                                     for i, (o, p) in enumerate(zip(outs, dsts))),
                                tuple(origins), launches, call.multi, since, record[3] if len(record) > 3 else None)
    return outs
