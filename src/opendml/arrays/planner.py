"""The planner: an array's layout (shape, byte strides, element size) plus an
operator call (``front.Call``) become a validated description and its plan.

The input is read where it lies, whatever its strides: axes with negative
strides are turned around so the lowest address is the plan's origin, and the
plan gets the array's signed element strides. Validated plans are kept in a
bounded, thread-safe LRU cache keyed by (operator and its arguments, dtype,
shape, strides), so a repeated call on a same-shaped array skips validation and
lowering. Framework-neutral: adapters pass plain tuples and NumPy dtypes.
"""
from __future__ import annotations

import collections
import dataclasses
import itertools
import threading

import numpy as np

from ..model.data_type import DataType
from ..model._frozen import stored_init
from ..model.errors import ValidationError
from ..model.tensor_desc import TensorDesc, plain_count
from ..ops import OPERATORS
from ..runtime.calls import info as call_cache_info
from ..runtime.cpu.backend import _load_native

__all__ = ["Layout", "array_layout", "plan_for", "plan_for_strides", "plain_plan", "count_planned",
           "plan_cache_info", "PLAN_CACHE_SIZE"]

#: Plans the cache keeps (least recently used dropped first).
PLAN_CACHE_SIZE = 256


@stored_init
@dataclasses.dataclass(frozen=True)
class Layout:
    """Signed element strides of an array and its origin: the element offset of
    index 0 from the array's lowest-addressed element; ``span`` elements from
    the lowest address hold every element; ``flips`` marks negative axes."""
    strides: tuple[int, ...]
    origin: int
    span: int
    flips: tuple[bool, ...]


def array_layout(shape, byte_strides, itemsize: int) -> Layout | None:
    """The layout, or None when a byte stride is not a whole number of elements
    along an axis of more than one element (the caller then copies the array)."""
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


def _dtype_str(dtype) -> str:
    return dtype.str if isinstance(dtype, np.dtype) else np.dtype(dtype).str


def logical_desc(dtype, shape) -> TensorDesc:
    if len(shape) == 0:
        raise ValidationError("TensorDesc: DimensionCount must be in [1, 8]; got 0 (a 0-d array)")
    return TensorDesc(DataType.from_numpy(dtype), tuple(shape))


class _PlanCache:
    def __init__(self, size: int):
        self.size = size
        self._plans: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0
        # calls planned without a lookup (count_planned, a miss each): next()
        # of an itertools.count is atomic, so counting takes no lock; info()
        # reads it with next() too and subtracts its own reads
        self._planned = itertools.count()
        self._planned_reads = 0

    def get(self, key):
        with self._lock:
            hit = self._plans.get(key)
            if hit is not None:
                self._plans.move_to_end(key)
                self.hits += 1
            else:
                self.misses += 1
            return hit

    def count_miss(self) -> None:
        with self._lock:
            self.misses += 1

    def put(self, key, value) -> None:
        with self._lock:
            self._plans[key] = value
            self._plans.move_to_end(key)
            while len(self._plans) > self.size:
                self._plans.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()

    def info(self) -> dict:
        with self._lock:
            planned = next(self._planned) - self._planned_reads
            self._planned_reads += 1
            return {"size": self.size, "plans": len(self._plans), "hits": self.hits,
                    "misses": self.misses + planned}


_CACHE = _PlanCache(PLAN_CACHE_SIZE)
_PLANNED = _CACHE._planned


def plan_for(call, dtype, shape: tuple, layout: Layout):
    """(description, plan) of ``call`` on an array of ``dtype`` and ``shape``
    laid out as ``layout``, from the cache where the same call was seen."""
    op_key = call.key
    key = None if op_key is None else ("layout", op_key, _dtype_str(dtype), shape, layout.strides, layout.origin)
    if key is not None:
        hit = _CACHE.get(key)
        if hit is not None:
            return hit
    desc = call.make_desc(logical_desc(dtype, shape))
    plan = desc.lower(in_strides=layout.strides, in_offset=layout.origin)
    if key is not None:
        _CACHE.put(key, (desc, plan))
    return desc, plan


def plan_for_strides(call, dtype, shape: tuple, byte_strides: tuple, itemsize: int):
    """(description, plan, layout) of ``call`` on an array of ``dtype`` and
    ``shape`` with ``byte_strides``; on a cache hit nothing is computed (the
    layout is cached with the plan). The layout is None when a stride is not a
    whole number of elements: the caller then copies the array and asks again."""
    op_key = call.key
    key = None if op_key is None else (op_key, _dtype_str(dtype), shape, byte_strides)
    if key is not None:
        hit = _CACHE.get(key)
        if hit is not None:
            return hit
    layout = array_layout(shape, byte_strides, itemsize)
    if layout is None:
        return None, None, None
    desc = call.make_desc(logical_desc(dtype, shape))
    plan = desc.lower(in_strides=layout.strides, in_offset=layout.origin)
    if key is not None:
        _CACHE.put(key, (desc, plan, layout))
    return desc, plan, layout


_native = _load_native()

#: The compiled fast paths of the operators' ``plain_lowering``, by array-API
#: name: ``f(in_sizes, *call.args)`` gives the Python function's answer for
#: the common valid case and None for anything else (newshape.c's
#: ``slice1_lowering``, ``slice_lowering``). Empty without the compiled
#: extension; tests empty it to compare the routes.
NATIVE_LOWERING: dict = {name: getattr(_native, f"{name}_lowering") for name in ("slice1", "slice", "slice_grad")
                         if hasattr(_native, f"{name}_lowering")}

#: array-API name -> (the kernel, the operator's description-free plan of
#: its common valid case, ``f(in_sizes, *call.args)``: the reference, which
#: runs wherever ``NATIVE_LOWERING`` has no answer), as each operator declares
#: them (``PLAIN_KERNEL``, ``plain_lowering``).
_PLAIN = {cls.OPERATOR.lower(): (cls.PLAIN_KERNEL, cls.plain_lowering) for cls in OPERATORS.values()
          if hasattr(cls, "plain_lowering")}

#: NumPy dtype -> whether it is one of DirectML's element types (few dtypes are seen).
_ELEMENT_DTYPES: dict = {}


def _element_dtype(dtype) -> bool:
    """Whether ``TensorDesc`` takes ``dtype``'s data type (remembered)."""
    try:
        TensorDesc(DataType.from_numpy(dtype), (1,))
        known = True
    except Exception:                     # noqa: BLE001 - not an element type: the descriptions say so
        known = False
    if len(_ELEMENT_DTYPES) < 64:
        _ELEMENT_DTYPES[dtype] = known
    return known


def plain_plan(call, dtype, shape: tuple, count: int, compiled: bool = True):
    """A new shape's route for SLICE, SLICE1, UNFOLD and SLICE_GRAD (issue 19): ``(kernel,
    fields)``, the plan of ``plan_for_strides`` without the array's layout,
    computed without descriptions or the plan cache by the operator's
    ``plain_lowering`` (for SLICE and SLICE1, its compiled fast path in
    ``NATIVE_LOWERING`` first, which gives the same answer or none): for
    ``"copy"`` (SLICE, SLICE1) ``(output sizes,
    starts, steps)`` in index space (the packed output's element ``c`` is
    the input's element ``starts + steps * c``), for ``"unfold"`` ``(output
    sizes, window, strides, dilations, start padding, blocks per
    dimension)``, for ``"scatter"`` (SLICE_GRAD) ``(output sizes, first,
    step, reversed)``; the backend's ``run_plain`` applies the layout. None where
    the call is not such a common valid case (another operator, an element
    type or shape ``TensorDesc`` refuses, arguments the operator's fast path
    would not take): ``plan_for_strides`` then validates it. ``shape`` is a
    NumPy shape (a tuple of non-negative ints) of ``count`` elements. A call
    run this way is counted as a plan-cache miss (``count_planned``).
    ``compiled=False``: the reference lowering only (a caller whose compiled
    lowering has already declined these arguments)."""
    entry = _PLAIN.get(call.name)
    if entry is None or not plain_count(len(shape), count):
        return None
    try:
        known = _ELEMENT_DTYPES.get(dtype)
        if not (known or (known is None and _element_dtype(dtype))):
            return None
    except TypeError:                     # a dtype that cannot be hashed
        return None
    fast = NATIVE_LOWERING.get(call.name) if compiled else None
    got = None if fast is None else fast(shape, *call.args)
    if got is None:
        got = entry[1](shape, *call.args)
    return None if got is None else (entry[0], got)


def count_planned() -> None:
    """Count a call run from ``plain_plan`` as a plan-cache miss (it was
    validated and planned)."""
    next(_PLANNED)


def plan_cache_info() -> dict:
    """``{'size', 'plans', 'hits', 'misses', 'call_cache'}``: the plan cache's
    size, plans held, hits and misses, where hits include the calls that the
    call cache served without looking a plan up (its own counts are under
    ``call_cache``, see ``opendml.runtime.calls``).

    Returns
    -------
    dict
        ``size`` (int): the most plans the cache keeps (``PLAN_CACHE_SIZE``);
        ``plans`` (int): the plans it holds; ``hits`` (int): calls that reused
        a plan, plus the calls the call cache served; ``misses`` (int): lookups
        that found no plan (the call was then validated and planned), plus
        the calls planned without a lookup (``plain_plan``, or the call cache's C
        lowering at its miss: its ``planned``); ``call_cache`` (dict): the call
        cache's own counts, ``{'enabled', 'numpy', 'entries', 'hits',
        'misses', 'planned'}``.
    """
    info = _CACHE.info()
    served = call_cache_info()
    info["hits"] += served["hits"]
    info["misses"] += served["planned"]   # new shapes the call cache lowered and ran itself
    info["call_cache"] = served
    return info
