"""CuPy arrays: validate through the planner, run on the CUDA backend of the
array's device (by pointer, on CuPy's current stream), return a new packed
CuPy array on that device. A repeated call is served by the call cache
(``runtime/calls.py``), which this module gives CuPy's allocator, current
device and current stream. A never-seen shape of SLICE, SLICE1, UNFOLD, FOLD
or SLICE_GRAD on an exact ``cupy.ndarray`` is planned, allocated, launched and
recorded in one C call (``_new_shape``), whichever of CuPy and PyTorch was
imported first.

An array whose data pointer is not a multiple of its item size (made at an
odd offset of a raw allocation) is refused with ``UnsupportedError`` naming
the pointer, before anything reads it; an output the allocator cannot give
raises ``AllocationError`` (``runtime/alloc.py``).

Every other operator (``run``) is validated on the arrays' shapes
and dtypes, then its move program runs on the array's GPU (``arrays.cuda``)
on CuPy's current stream, outputs placed as above; results equal the NumPy
call byte for byte. A call offered to the C call cache is recorded there
(its launches) and the next such call is served from C
(``runtime.calls.move``)."""
from __future__ import annotations

import cupy

from ..model.errors import UnsupportedError, ValidationError
from ..runtime import alloc, calls, get_backend
from ..runtime.cuda.backend import check_alignment, relaunch
from . import _dispatch, cuda
from .planner import count_planned, plan_for_strides

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


def _empty(shape, dtype):
    """``cupy.empty`` through the user's allocator; where that allocator gives
    memory whose address is not a multiple of the item size (legal: 2-byte
    alignment suits float16 data), the array is placed at a 16-byte boundary
    inside an allocation 16 bytes larger instead, so the kernels can write it."""
    out = cupy.empty(shape, dtype=dtype)
    if out.data.ptr % out.itemsize == 0:
        return out
    raw = cupy.empty(out.nbytes + 16, dtype=cupy.uint8)
    return cupy.ndarray(shape, dtype, raw.data + (-raw.data.ptr % 16))


_OPS = calls.OPS


def _new_shape(x, call):
    """A never-seen shape of SLICE, SLICE1, UNFOLD, FOLD or SLICE_GRAD (issue 33) in one C call, the one
    C new-shape route (the front's ``new_shape``, ``calls.move_new``): the operator's plain lowering in C
    gives the plan for ``x``'s layout, C allocates the output with ``cupy.empty`` on the current device,
    queues the launch the route below would queue on CuPy's current stream and records the call as
    ``calls.put_cuda`` would. A kernel the process has not loaded comes back by name: compiled, then the
    call is made again. None where C leaves the call to the route below (a layout it must copy, another
    current device, misaligned data, launches not made natively...), which then validates, plans and
    runs it."""
    out = _dispatch.front.new_shape(_OPS[call.name], x, call.args)
    if out is not None:
        count_planned()
    return out


def _plan(x, call):
    """The first five's compiled plans (``Call.args``), which the C call cache records as such
    (``calls.put_cuda``)."""
    if type(x) is cupy.ndarray:
        out = _new_shape(x, call)
        if out is not None:
            return out
    since = calls.generation()
    planned = (x.shape, x.strides)        # the record checks x still has them
    desc, plan, layout = plan_for_strides(call, x.dtype, planned[0], planned[1], x.itemsize)
    # Before anything reads x (cupy.ascontiguousarray would fault too).
    check_alignment(x.itemsize, x.data.ptr, 0, call.name)
    given = x
    if layout is None:
        with x.device:                      # not cupy.ascontiguousarray: the allocator may misalign it
            packed = _empty(x.shape, x.dtype)
            packed[...] = x
        x = packed
        desc, plan, layout = plan_for_strides(call, x.dtype, x.shape, x.strides, x.itemsize)
    device_id = x.device.id
    backend = _BACKENDS.get(device_id) or _BACKENDS.setdefault(device_id, get_backend(f"cuda:{device_id}"))
    with cupy.cuda.Device(device_id):
        out = alloc.output(call.name, desc.output_tensor.sizes, x.dtype, _empty, device=f"cuda:{device_id}",
                           errors=(cupy.cuda.memory.OutOfMemoryError,))
        if layout.span and out.size:
            # By pointer, on CuPy's current stream: element 0 of the bound range
            # is x's lowest-addressed element (its origin minus the turned-around axes).
            origin = layout.origin * x.itemsize
            src, dst = x.data.ptr - origin, out.data.ptr
            launch = backend.record(plan, src, layout.span, dst, call.name)
            launch(src, dst, _current_stream_ptr())
            if x is given:
                # The next call like this one is served from C (runtime/calls.py).
                calls.put_cuda(call.name, x, call.args, tuple(out.shape), origin, launch, dst, since, planned)
    return out


_KINDS = "iuf"


def run(call, arrays) -> list:
    """The adapter's one route: ``call`` on CuPy arrays; the outputs as a list."""
    if call.args:
        return [_plan(arrays[0], call)]
    since = calls.generation() if call.ccall is not None else None   # before any setting is read
    for x in arrays:
        if x.dtype.kind not in _KINDS or x.dtype.itemsize not in (1, 2, 4, 8):
            raise ValidationError(f"{call.name}: unsupported dtype {x.dtype}")
    device_id = arrays[0].device.id
    for i, x in enumerate(arrays):
        if x.device.id != device_id:
            raise UnsupportedError(f"{call.name}: every array must be on one GPU; got devices {device_id} and "
                                   f"{x.device.id} (arrays[{i}])")
    desc = call.describe_arrays([x.dtype for x in arrays], [x.shape for x in arrays])

    def entry(a):
        def pack():
            with a.device:
                packed = _empty(a.shape, a.dtype)
                packed[...] = a
            return entry(packed)
        return a, a.data.ptr, a.shape, a.strides, a.itemsize, pack

    def allocate(shape, dtype):
        out = _empty(shape, dtype)
        return out, out.data.ptr
    with cupy.cuda.Device(device_id):
        seq = None if since is None else call.ccall[2]     # (the index functions': their inputs as given, a tuple)
        record = None if since is None else (call, seq if type(seq) is tuple else tuple(arrays) if seq else arrays[0],
                                             since)
        return cuda.move(desc, [entry(x) for x in arrays], allocate, device_id, _current_stream_ptr(),
                        errors=(cupy.cuda.memory.OutOfMemoryError,), record=record)


calls.register_cupy(cupy.ndarray, cupy.empty, cupy.cuda.runtime.getDevice, _current_stream_ptr)
calls.register_cuda_retry(relaunch)       # (a served entry's failed launch: also registered by PyTorch's adapter)
