"""The planner: an array's layout (shape, byte strides, element size) plus an operator call (``engine.Call``) become
a validated description and its plan. The input is read where it lies: axes with negative strides are turned around
so the lowest address is the plan's origin.

The move cache: the family's Python-level call cache, behind the C call cache (``runtime.calls.move``), serving what
that one cannot key (a NumPy scalar argument) and the NumPy kernels; a hit here also records the call in the C cache.
A first call that succeeds is recorded under ``(function, its arguments frozen exactly, per input (dtype, shape,
byte strides))``: the description, its move program, the outputs' shapes and dtypes and, with the compiled kernels,
each pass's kernel and parameter bytes (``kernel_steps``), so a repeat allocates its outputs and replays the kernels.

Never cached, so that no answer or error changes: a call that raised; an argument ``freeze`` cannot key exactly;
arrays that are not exactly ``numpy.ndarray``, of a non-native byte order, or copied first. Entries hold the CPU
backend they were prepared on; every ``opendml.configure()`` empties the cache and ``configure(call_cache=False)``
turns it off.
"""
from __future__ import annotations

import collections
import dataclasses
import enum
import itertools
import struct
import threading

import numpy as np

from ..model.data_type import DataType
from ..model._frozen import stored_init
from ..model.errors import ValidationError
from ..model.tensor_desc import TensorDesc
from ..plan import Fill
from ..runtime.calls import TUNED, info as call_cache_info
from ..runtime.params import KERNELS
from ..runtime.config import _listeners as _config_listeners

__all__ = ["Layout", "array_layout", "count_planned",
           "plan_cache_info", "CACHE_SIZE", "freeze", "call_key", "array_key", "lookup", "record",
           "clear", "info"]

@stored_init
@dataclasses.dataclass(frozen=True)
class Layout:
    """Signed element strides of an array and its origin (the element offset of index 0 from the lowest-addressed
    element); ``span`` elements from the lowest address hold every element; ``flips`` marks negative axes."""
    strides: tuple[int, ...]
    origin: int
    span: int
    flips: tuple[bool, ...]


def array_layout(shape, byte_strides, itemsize: int) -> Layout | None:
    """The layout, or None when a byte stride is not a whole number of elements along an axis of more than one
    element (the caller then copies the array)."""
    strides = []
    origin = 0
    span = 1
    flipped = False
    for n, s in zip(shape, byte_strides):
        if s % itemsize:
            if n > 1:
                return None
            t = 0                        # a size-1 axis's stride is never used
        else:
            t = s // itemsize
        strides.append(t)
        if t < 0:
            origin -= (n - 1) * t
            span -= (n - 1) * t
            flipped = True
        else:
            span += (n - 1) * t
    flips = tuple(t < 0 for t in strides) if flipped else (False,) * len(strides)
    return Layout(tuple(strides), origin, span if all(shape) else 0, flips)


def logical_desc(dtype, shape) -> TensorDesc:
    if len(shape) == 0:
        raise ValidationError("TensorDesc: DimensionCount must be in [1, 8]; got 0 (a 0-d array)")
    return TensorDesc(DataType.from_numpy(dtype), tuple(shape))


class _Lru:
    """A bounded, thread-safe LRU map counting hits and misses (an entry made on another CPU backend is a miss)."""

    def __init__(self, size: int, entries: str):
        self.size, self._name = size, entries
        self._entries: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key, backend=None):
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and backend is not None and hit.backend is not backend:
                hit = None                  # made on settings no longer in force
            if hit is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            else:
                self.misses += 1
            return hit

    def put(self, key, value) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def info(self) -> dict:
        with self._lock:
            return {"size": self.size, self._name: len(self._entries), "hits": self.hits, "misses": self.misses}


# calls planned without a lookup (a plan-cache miss each): next() of a count is atomic, so no lock to count;
# a read takes one number itself (``_planned_reads`` of them taken so far)
_PLANNED = itertools.count()
_planned_reads = 0
_planned_lock = threading.Lock()


def count_planned() -> None:
    """Count a call the C new-shape route ran as a plan-cache miss (it was validated and planned)."""
    next(_PLANNED)


def _planned() -> int:
    global _planned_reads
    with _planned_lock:
        _planned_reads += 1
        return next(_PLANNED) - (_planned_reads - 1)


def plan_cache_info() -> dict:
    """``{'size', 'plans', 'hits', 'misses', 'call_cache'}``: the most plans the plan cache keeps (``CACHE_SIZE``)
    and the plans it holds (the move cache: every operator's planned call on NumPy's route); the calls that reused a
    plan, plus those the call cache served; the lookups that found no plan (the call was then validated and
    planned), plus the calls planned without a lookup (the C new-shape route, or the call cache's C lowering at its
    miss: its ``planned``); and the call cache's own counts (``{'enabled', 'numpy', 'entries', 'hits', 'misses',
    'planned', 'front'}``, see ``opendml.runtime.calls``)."""
    info = _MOVES.info()
    info["plans"] = info.pop("entries")
    info["misses"] += _planned()
    served = call_cache_info()
    info["hits"] += served["hits"]
    info["misses"] += served["planned"]   # new shapes the call cache lowered and ran itself
    info["call_cache"] = served
    return info


# -- the move cache -------------------------------------------------------------------------------------

#: Entries the move cache keeps (least recently used dropped first).
CACHE_SIZE = 256

#: An argument that gives no key (the call then always takes the whole route).
UNKEYABLE = object()
_NUMPY_SCALARS = (np.integer, np.floating, np.bool_)


def freeze(value):
    """A hashable form of one argument, equal only for arguments that give the same call (types exactly: 1, 1.0,
    True and np.int64(1) differ), or ``UNKEYABLE``."""
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
    """The function's part of a key: its name and (snapshotted or resolved) arguments frozen; None if one can't be."""
    frozen = tuple(map(freeze, args))
    return None if any(f is UNKEYABLE for f in frozen) else (name, frozen)


def array_key(arrays):
    """The arrays' part of a key: (dtype, shape, byte strides) of each, or None when one is not exactly a
    ``numpy.ndarray`` of a native byte order (what ``numpy_adapter.as_input`` passes through unchanged)."""
    if not np.little_endian:
        return None
    key = []
    for x in arrays:
        if type(x) is not np.ndarray or not x.dtype.isnative:
            return None
        key.append((x.dtype, x.shape, x.strides))
    return tuple(key)


#: One recorded call: the CPU ``backend`` it was prepared on, ``desc``, ``plan``, ``outs`` ((shape, dtype)
#: each), ``offsets`` (per input, its lowest element's byte offset from its data pointer) and ``steps``
#: (``kernel_steps``, or None: prepare again on each call).
Entry = collections.namedtuple("Entry", "backend desc plan outs offsets steps")


class _Capture:
    """Stands in for the CPU backend while its compiled move pass is built: the launch comes back as ``(kernel,
    parameter bytes, threads)``."""

    __slots__ = ("_native", "_threads")

    def __init__(self, backend):
        self._native, self._threads = backend._native, backend._threads

    def _launch(self, kernel, params, src, dst, nbytes: int):
        return kernel, bytes(params), self._threads(nbytes)


def kernel_steps(backend, plan, srcs, dsts, tuned: bool = False):
    """Each running pass of ``plan`` as the compiled kernel the CPU ``backend`` runs: ``(kernel, parameter bytes,
    threads, kind, source, destination)``, ``kind`` as ``runtime.calls.put_move`` takes it (0 a move copy, 1 a move
    fill, ``TUNED`` + the kernel's code where ``tuned`` (the first five) and the plan is one tuned pass: its copy,
    windows, window_sums or scatter kernel, as ``CpuBackend.runner`` gives it); None where a pass has no compiled
    kernel (or the backend runs the NumPy kernels)."""
    if backend._native is None:
        return None
    if tuned and plan.kernel_plan() is not None:
        run = backend.runner(plan)
        if run is not None:
            p = plan.passes[0]
            if p.count == 0:
                return ()
            return ((run.kernel, run.blob, run.threads, TUNED + _KERNEL_CODES[run.kernel.__name__], p.src, p.dst),)
    capture = _Capture(backend)
    steps = []
    for p in plan.passes:
        if p.count == 0:
            continue
        got = type(backend)._native_move_pass(capture, plan, p, srcs, dsts)     # (kernel, bytes, threads)
        if got is None:
            return None
        fill = isinstance(p, Fill)
        steps.append((got[0], got[1], got[2], int(fill), p.dst if fill else p.src, p.dst))
    return tuple(steps)


#: A tuned kernel's name -> its code (params.h's ODML_KERNEL_*).
_KERNEL_CODES = {name: i for i, (name, _) in enumerate(KERNELS)}

#: The move cache (``lookup``, ``record``, ``clear``, ``info``).
_MOVES = _Lru(CACHE_SIZE, "entries")


def lookup(key, backend) -> Entry | None:
    """The entry for ``key`` if it was prepared on ``backend`` (the CPU backend in force), else None."""
    return _MOVES.get(key, backend)


def record(key, entry: Entry) -> None:
    _MOVES.put(key, entry)


def clear() -> None:
    """Drop every entry (every configuration change does)."""
    _MOVES.clear()


def info() -> dict:
    """``{'size', 'entries', 'hits', 'misses'}``."""
    return _MOVES.info()


_config_listeners.append(lambda cfg: clear())
