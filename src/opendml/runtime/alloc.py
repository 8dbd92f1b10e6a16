"""Allocation of outputs: one place that turns a framework's out-of-memory
failure into an opendml error.

Every output opendml allocates (the array API's results on NumPy and CuPy, the
CPU backend's output blocks, ``Buffer.read``'s host copy) goes through
``output``. Where the allocator fails (NumPy's ``MemoryError``, CuPy's
``OutOfMemoryError``, a size no allocator can give), the caller gets an
``AllocationError`` that names the operation, the output's shape, dtype and
bytes, and the device, instead of the framework's own exception:

    unfold: cannot allocate the output of shape (1, 1, 4294836225) float64:
    34358689800 bytes (32.0 GiB) on the CPU

``AllocationError`` is a ``ValidationError`` (as ``Device.create_buffer``
raises for a buffer that cannot be allocated) and a ``MemoryError`` (code that
caught NumPy's error keeps working).

PyTorch's allocator raises ``torch.OutOfMemoryError`` (a ``RuntimeError``) or,
on the CPU, a ``RuntimeError``; ``output`` takes extra exception classes to
treat as out-of-memory (``errors=``) for such callers.
"""
from __future__ import annotations

import math
import sys
from typing import Any, Callable

import numpy as np

from ..model.errors import ValidationError

__all__ = ["AllocationError", "output", "allocation_error"]


class AllocationError(ValidationError, MemoryError):
    """An output (or buffer) that could not be allocated."""


def _human(n: int) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def allocation_error(what: str, shape, dtype, device: str = "the CPU", part: str = "the output") -> AllocationError:
    """The error for ``part`` (the output, or scratch memory of its size) of
    ``shape`` and ``dtype`` (a NumPy dtype) that ``what`` (an operation's
    name, e.g. ``"unfold"`` or ``"Buffer.read"``) could not allocate on
    ``device``."""
    shape = tuple(int(s) for s in shape)
    dtype = np.dtype(dtype)
    n = math.prod(shape) * dtype.itemsize
    size = f"{n} bytes" if n < 1024 else f"{n} bytes ({_human(n)})"
    return AllocationError(f"{what}: cannot allocate {part} of shape {shape} {dtype.name}: {size} on {device}")


def output(what: str, shape, dtype, allocate: Callable[..., Any], *, device: str = "the CPU", errors: tuple = (),
           part: str = "the output") -> Any:
    """``allocate(shape, dtype)`` (``dtype`` a NumPy dtype), or an
    ``AllocationError`` where it fails for lack of memory (a ``MemoryError``
    or one of ``errors``) or the size exceeds what any allocator can address."""
    if math.prod(int(s) for s in shape) * np.dtype(dtype).itemsize > sys.maxsize:    # (Python ints: no overflow)
        raise allocation_error(what, shape, dtype, device, part)
    try:
        return allocate(shape, dtype)
    except (MemoryError, *errors) as exc:
        if isinstance(exc, AllocationError):
            raise
        raise allocation_error(what, shape, dtype, device, part) from None
