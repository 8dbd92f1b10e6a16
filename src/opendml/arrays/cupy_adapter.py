"""CuPy arrays: every operator (``run``) is validated on the arrays' shapes and dtypes, then its move program runs
on the array's GPU (``arrays.cuda``, by pointer) on CuPy's current stream into new packed CuPy arrays on that device;
results equal the NumPy call byte for byte. A call offered to the C call cache is recorded there (its launches) and
the next such call is served from C (``runtime/calls.py``), which this module gives CuPy's allocator, current device
and current stream; a never-seen shape the front offers the C new-shape route first is lowered, allocated, launched
and recorded in one C call, whichever of CuPy and PyTorch was imported first. The errors are ``cuda.move``'s: a data
pointer not a multiple of the item size (an odd offset of a raw allocation), an output the allocator cannot give."""
from __future__ import annotations

import cupy

from ..model.errors import UnsupportedError, ValidationError
from ..runtime import calls
from . import _contract, cuda


def _stream_ptr_function():
    """CuPy's current stream as a raw handle: its own C-level getter where it has one, else the Stream's ``ptr``."""
    for owner in (getattr(cupy.cuda, "stream", None), cupy.cuda):
        fn = getattr(owner, "get_current_stream_ptr", None)
        if callable(fn):
            return fn
    return lambda: cupy.cuda.get_current_stream().ptr


_current_stream_ptr = _stream_ptr_function()


def _empty(shape, dtype):
    """``cupy.empty`` through the user's allocator; where that gives memory whose address is not a multiple of the
    item size (legal: 2-byte alignment suits float16 data), the array is placed at a 16-byte boundary inside an
    allocation 16 bytes larger instead, so the kernels can write it."""
    out = cupy.empty(shape, dtype=dtype)
    if out.data.ptr % out.itemsize == 0:
        return out
    raw = cupy.empty(out.nbytes + 16, dtype=cupy.uint8)
    return cupy.ndarray(shape, dtype, raw.data + (-raw.data.ptr % 16))


def run(call, arrays) -> list:
    """The adapter's one route: ``call`` on CuPy arrays; the outputs as a list."""
    since = calls.generation() if call.ccall is not None else None   # before any setting is read
    for x in arrays:
        if x.dtype.kind not in "iuf" or x.dtype.itemsize not in (1, 2, 4, 8):
            raise ValidationError(f"{call.name}: unsupported dtype {x.dtype}")
    device_id = arrays[0].device.id
    for i, x in enumerate(arrays):
        if x.device.id != device_id:
            raise UnsupportedError(f"{call.name}: every array must be on one GPU; got devices {device_id} and "
                                   f"{x.device.id} ({_contract.argument_of(call.name, i)})")
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
                        errors=(cupy.cuda.memory.OutOfMemoryError,), record=record, name=call.name)


calls.register_cupy(cupy.ndarray, cupy.empty, cupy.cuda.runtime.getDevice, _current_stream_ptr)
