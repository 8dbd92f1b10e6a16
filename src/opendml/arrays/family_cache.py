"""The family's Python-level call cache (NumPy arrays on the CPU backend),
behind the C call cache.

A repeated call with the compiled kernels is served by the C call cache
(``opendml.runtime.calls.move``, ``runtime/native/calls.c``) before any Python
runs; this cache serves what that one cannot key (a NumPy scalar argument,
say) and the NumPy kernels, and a hit here also records the call in the C
cache (another spelling of a recorded call: ``cast(x, float)`` after
``cast(x, DataType.FLOAT64)``).

The first call of a family function with given arguments on arrays of given
dtypes, shapes and byte strides runs the whole Python route (description,
validation, lowering, the backend's ``prepare``). When it succeeds, it is
recorded here under the key ``(function, its arguments frozen exactly, per
input (dtype, shape, byte strides))``: the validated description, its move
program, the outputs' shapes and dtypes, and, with the compiled kernels, each
pass's kernel with its parameter bytes and thread count (``kernel_steps``:
built by the backend's own move-pass method on a stand-in that returns the
launch instead of binding it, so no closure of the backend's is read). A
repeated call then allocates its outputs and replays those kernels on the new
arrays' addresses: no description, validation, lowering or preparation. On
the NumPy kernels (or a pass the compiled kernel does not take) only the
description and lowering are reused; ``prepare`` runs again on the new arrays.

What is never cached, so that no answer or error changes: a call that raised;
an argument other than None, an exact ``int``, ``float`` (keyed by its bits:
``-0.0`` is not ``0.0``), ``bool``, ``str``, an enum member, a NumPy scalar
(keyed by its type and bytes) or a tuple of those (``1``, ``1.0`` and
``True`` are three keys); arrays that are not exactly ``numpy.ndarray``
(subclasses, masked arrays), of a non-native byte order, or whose strides
made the route copy them first. Entries hold the CPU backend they were
prepared on and are used only while it is the one in force, and every
``opendml.configure()`` empties the cache; ``configure(call_cache=False)``
turns it off with the C cache. Bounded (``CACHE_SIZE`` entries, least
recently used dropped first) and thread-safe (entries are immutable).
"""
from __future__ import annotations

import collections
import enum
import struct
import threading

import numpy as np

from ..plan import Fill
from ..runtime.config import _listeners as _config_listeners

__all__ = ["CACHE_SIZE", "freeze", "call_key", "array_key", "lookup", "record", "clear", "info"]

#: Entries the cache keeps (least recently used dropped first).
CACHE_SIZE = 256

#: An argument that gives no key (the call then always takes the whole route).
UNKEYABLE = object()
_NUMPY_SCALARS = (np.integer, np.floating, np.bool_)


def freeze(value):
    """A hashable form of one argument, equal only for arguments that give the
    same call (types exactly: 1, 1.0, True and np.int64(1) differ), or
    ``UNKEYABLE``."""
    t = type(value)
    if value is None:
        return None
    if t is int or t is bool or t is str:
        return (t, value)
    if t is float:
        return (t, struct.pack("<d", value))           # the bits: -0.0 and NaN payloads kept apart
    if t is tuple:
        items = tuple(map(freeze, value))
        return UNKEYABLE if any(i is UNKEYABLE for i in items) else (t, items)
    if isinstance(value, enum.Enum):
        return (t, value)
    if isinstance(value, _NUMPY_SCALARS):
        return (t, value.dtype.str, value.tobytes())
    return UNKEYABLE


def call_key(name: str, *args):
    """The function's part of a key: its name and its (already snapshotted or
    resolved) arguments frozen, or None when one cannot be frozen."""
    frozen = tuple(map(freeze, args))
    return None if any(f is UNKEYABLE for f in frozen) else (name, frozen)


def array_key(arrays):
    """The arrays' part of a key: (dtype, shape, byte strides) of each, or None
    when one is not exactly a ``numpy.ndarray`` of a native byte order (what
    ``numpy_adapter.as_input`` passes through unchanged)."""
    if not np.little_endian:
        return None
    key = []
    for x in arrays:
        if type(x) is not np.ndarray or not x.dtype.isnative:
            return None
        key.append((x.dtype, x.shape, x.strides))
    return tuple(key)


class Entry:
    """One recorded call: ``backend`` (the CPU backend it was prepared on),
    ``desc`` and ``plan``, ``outs`` ((shape, dtype) per output), ``offsets``
    (per input, the byte offset of its lowest-addressed element from its data
    pointer) and ``steps`` (per pass that runs: (kernel, parameter bytes,
    threads, whether it reads an output (a fill), source index, destination
    index); ``kernel_steps``), or None where the passes must be prepared
    again on each call."""

    __slots__ = ("backend", "desc", "plan", "outs", "offsets", "steps")

    def __init__(self, backend, desc, plan, outs, offsets, steps):
        self.backend, self.desc, self.plan, self.outs = backend, desc, plan, outs
        self.offsets, self.steps = offsets, steps


class _Capture:
    """Stands in for the CPU backend when its compiled move pass is built
    (``CpuBackend._native_move_pass``): the launch it asks for is returned
    as ``(kernel, parameter bytes, threads)`` instead of being bound to
    buffers, so the kernels are the backend's own, read from no closure."""

    __slots__ = ("_native", "_threads")

    def __init__(self, backend):
        self._native, self._threads = backend._native, backend._threads

    def _launch(self, kernel, params, src, dst, nbytes: int):
        return kernel, bytes(params), self._threads(nbytes)


def kernel_steps(backend, plan, srcs, dsts):
    """Each running pass of ``plan`` as the compiled kernel the CPU
    ``backend`` runs for it: ``(kernel, parameter bytes, threads, whether it
    is a fill, source index, destination index)``, in order; None where a
    pass has no compiled kernel (the NumPy kernels, a pass of more than 16
    dimensions) or the backend does not build them as expected."""
    build = getattr(type(backend), "_native_move_pass", None)
    native = getattr(backend, "_native", None)
    if build is None or native is None:
        return None
    capture = _Capture(backend)
    steps = []
    for p in plan.passes:
        if p.count == 0:
            continue
        try:
            got = build(capture, plan, p, srcs, dsts)
        except (AttributeError, TypeError):       # a backend built otherwise: replay through prepare
            return None
        if not isinstance(got, tuple) or got[0] is not native.move:
            return None
        fill = isinstance(p, Fill)
        steps.append((got[0], got[1], got[2], fill, p.dst if fill else p.src, p.dst))
    return tuple(steps)


class _Cache:
    def __init__(self, size: int):
        self.size = size
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key, backend):
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit.backend is not backend:
                hit = None                  # made on settings no longer in force
            if hit is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            else:
                self.misses += 1
            return hit

    def put(self, key, entry: Entry) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def info(self) -> dict:
        with self._lock:
            return {"size": self.size, "entries": len(self._entries), "hits": self.hits, "misses": self.misses}


_CACHE = _Cache(CACHE_SIZE)


def lookup(key, backend) -> Entry | None:
    """The entry for ``key`` if it was prepared on ``backend`` (the CPU backend
    in force), else None."""
    return _CACHE.get(key, backend)


def record(key, entry: Entry) -> None:
    _CACHE.put(key, entry)


def clear() -> None:
    """Drop every entry (every configuration change does)."""
    _CACHE.clear()


def info() -> dict:
    """``{'size', 'entries', 'hits', 'misses'}``."""
    return _CACHE.info()


_config_listeners.append(lambda cfg: clear())
