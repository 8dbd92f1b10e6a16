"""NumPy arrays (``as_input``) and an array's words (``words``) as the kernels read them, and the prefault rule for
fresh outputs (``prefault``). NumPy arrays take the move program (``engine.run_numpy``) for every operator, as do
PyTorch CPU tensors through NumPy views of them."""
from __future__ import annotations

import numpy as np

from ..model.errors import ValidationError
from ..runtime.cpu import WORDS

#: Fresh outputs this large are faulted in by the calling thread before a threaded CPU kernel writes them.
PREFAULT_BYTES = 4 << 20


def prefault(backend, out: np.ndarray, fresh: bool) -> bool:
    """Whether the CPU ``backend``'s threads write ``out``; a ``fresh`` one's pages are then faulted in from this thread
    first: on Linux, threads faulting in one new (huge-page advised) mapping at once can stall each other for tens
    of milliseconds."""
    threaded = out.nbytes >= PREFAULT_BYTES and backend.threads > 1
    if fresh and threaded:
        out.reshape(-1).view(np.uint8)[::4096] = 0
    return threaded


def as_input(x: np.ndarray) -> np.ndarray:
    """``x`` as an array the kernels can read: little-endian, not masked, a plain ndarray (a subclass such as
    np.matrix stays 2-D when the NumPy kernels flatten it)."""
    if type(x) is np.ndarray and x.dtype.isnative and np.little_endian:
        return x
    if isinstance(x, np.ma.MaskedArray):
        raise ValidationError("array API: masked arrays are not supported (the mask would be dropped); "
                              "pass x.filled(value) or x.data explicitly")
    x = x.view(np.ndarray)
    if x.dtype.byteorder == ">" or (x.dtype.byteorder == "=" and not np.little_endian):
        x = x.astype(x.dtype.newbyteorder("<"))
    return x


def words(x: np.ndarray, layout) -> np.ndarray:
    """The ``layout.span`` elements from ``x``'s lowest address (``planner.array_layout``'s layout of ``x``) as
    one 1-D array of unsigned words, read where they lie."""
    word = WORDS[x.itemsize]
    if layout.span == x.size and x.flags.c_contiguous:     # (packed: the same words, without as_strided's cost)
        return x.view(word).reshape(-1)
    low = x[tuple(slice(None, None, -1) if f else slice(None) for f in layout.flips)] if any(layout.flips) else x
    return np.lib.stride_tricks.as_strided(low.view(word), shape=(layout.span,), strides=(x.itemsize,))
