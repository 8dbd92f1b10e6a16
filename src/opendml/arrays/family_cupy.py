"""CuPy arrays for the data-movement family: validated on the arrays' shapes
and dtypes, then the move program runs on the array's GPU (``family_cuda``)
on CuPy's current stream; outputs come from CuPy's allocator (placed at an
aligned address whatever the allocator gives, as for the first five
operators). Results are new packed CuPy arrays, equal byte for byte to the
NumPy call. CuPy has no autograd: nothing to differentiate. A call whose
function offers it to the C call cache is recorded there (its launches), and
the next such call is served from C (``runtime.calls.move``)."""
from __future__ import annotations

from ..model.errors import UnsupportedError, ValidationError

__all__ = ["run"]

_KINDS = "iuf"


def run(call, arrays) -> list:
    import cupy                                   # here: the module is importable without CuPy
    from ..runtime import calls
    since = calls.generation() if call.ccall is not None else None   # before any setting is read
    from .cupy_adapter import _current_stream_ptr, _empty
    from .family_cuda import run_move
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
        record = None if since is None else (call, tuple(arrays) if call.ccall[2] else arrays[0], since)
        return run_move(desc, [entry(x) for x in arrays], allocate, device_id, _current_stream_ptr(),
                        errors=(cupy.cuda.memory.OutOfMemoryError,), record=record)
