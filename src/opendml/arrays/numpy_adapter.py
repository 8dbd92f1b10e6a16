"""NumPy arrays as the kernels read them (``as_input``), and the compiled
plans of the first five on a NumPy view of a PyTorch CPU tensor (``run``:
PyTorch's CPU kernel route, recorded in the C call cache under the tensor).
NumPy arrays themselves take the move program (``engine.run_numpy``) for
every operator."""
from __future__ import annotations

import ctypes

import numpy as np

from ..model.errors import ValidationError
from ..runtime import calls, get_backend
from ..runtime.config import CACHE_MIN_BYTES
from ..runtime.cpu import WORDS
from .planner import plan_for_strides

#: Fresh outputs this large are faulted in by the calling thread before a
#: threaded CPU kernel writes them (``prefault``).
PREFAULT_BYTES = 4 << 20


def prefault(backend, out: np.ndarray, fresh: bool) -> bool:
    """Whether the CPU ``backend``'s threads write ``out``, an output this
    large; a ``fresh`` one's pages are then faulted in from this thread first:
    on Linux, threads faulting in one new (huge-page advised) mapping at once
    can stall each other for tens of milliseconds."""
    threaded = out.nbytes >= PREFAULT_BYTES and backend.threads > 1
    if fresh and threaded:
        out.reshape(-1).view(np.uint8)[::4096] = 0
    return threaded


def as_input(x: np.ndarray) -> np.ndarray:
    """``x`` as an array the kernels can read: little-endian, not masked."""
    if type(x) is np.ndarray and x.dtype.isnative and np.little_endian:
        return x
    if isinstance(x, np.ma.MaskedArray):
        raise ValidationError("array API: masked arrays are not supported (the mask would be dropped); "
                              "pass x.filled(value) or x.data explicitly")
    if x.dtype.byteorder == ">" or (x.dtype.byteorder == "=" and not np.little_endian):
        x = x.astype(x.dtype.newbyteorder("<"))
    return x


def run(x: np.ndarray, call, record_as) -> np.ndarray:
    """``call`` (one of the first five: ``Call.args``) on ``x``, a NumPy view
    of the PyTorch CPU tensor ``record_as``. A compiled-kernel run is recorded
    in the call cache under ``record_as``."""
    since = calls.generation()            # before any setting is read
    # (a tensor's view: native byte order, strides whole elements, so as_input's and the layout's checks pass)
    desc, plan, layout = plan_for_strides(call, x.dtype, x.shape, x.strides, x.itemsize)
    backend = get_backend("cpu")
    out, fresh = backend.empty(desc.output_tensor.sizes, x.dtype, call.name)
    nbytes = out.nbytes
    if not nbytes or not layout.span:
        return out
    threaded = prefault(backend, out, fresh)
    run = _runner(backend, plan)
    if run is not None:
        # The compiled kernels, by address: element 0 of the bound input range
        # is x's lowest-addressed element (its origin minus the turned-around axes).
        origin = layout.origin * x.itemsize
        run(_address(x) - origin, _address(out))
        # The next call like this one is served from C (runtime/calls.py), where record_as still has the layout
        # planned (the record checks it: another thread may have changed the tensor in place meanwhile).
        calls.put_numpy(call.name, record_as, call.args, out.shape, out.dtype, origin, run.kernel.__name__,
                        run.blob, run.threads, nbytes >= CACHE_MIN_BYTES, threaded, since,
                        (x.shape, tuple(s // x.itemsize for s in x.strides)))
        return out
    backend.prepare(plan, [words(x, layout)], [out.view(WORDS[x.itemsize]).reshape(-1)])()
    return out


def words(x: np.ndarray, layout) -> np.ndarray:
    """The ``layout.span`` elements from ``x``'s lowest address (``planner.array_layout``'s layout of ``x``) as
    one 1-D array of unsigned words, read where they lie."""
    word = WORDS[x.itemsize]
    if layout.span == x.size and x.flags.c_contiguous:     # (packed: the same words, without as_strided's cost)
        return x.view(word).reshape(-1)
    low = x[tuple(slice(None, None, -1) if f else slice(None) for f in layout.flips)] if any(layout.flips) else x
    return np.lib.stride_tricks.as_strided(low.view(word), shape=(layout.span,), strides=(x.itemsize,))


def _address(a: np.ndarray) -> int:
    """The address of ``a``'s element 0: through the buffer protocol where
    ``a`` is C-contiguous and writable (a fresh output, most inputs), a
    quarter of the time of ``a.ctypes.data``, which serves the rest."""
    flags = a.flags
    if flags.c_contiguous and flags.writeable:
        try:
            return _addressof(_from_buffer(a))
        except (TypeError, ValueError, BufferError):
            pass
    return a.ctypes.data


_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof

#: id(plan) -> (plan, backend, runner): the compiled kernel of a cached plan,
#: packed once per backend (a new configuration gives a new backend).
_RUNNERS: dict = {}


def _runner(backend, plan):
    hit = _RUNNERS.get(id(plan))
    if hit is not None and hit[0] is plan and hit[1] is backend:
        return hit[2]
    run = backend.runner(plan)
    if len(_RUNNERS) >= 1024:
        _RUNNERS.clear()
    _RUNNERS[id(plan)] = (plan, backend, run)     # holds the plan: its id stays unique while here
    return run
