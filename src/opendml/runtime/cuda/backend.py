"""CUDA backend: CuPy memory and the move program (``opendml.plan.MovePlan``) run by opendml's own kernels
(``steps.py`` plans the launches, ``tuned.py`` the tuned passes', ``index.py`` the index-driven passes';
``launch.py`` compiles and queues the kernels).

Launch path
    ``record_move(plan, src_ptrs, src_elements, dst_ptrs, dst_elements)`` returns a ``MoveLaunch``;
    ``rec(src_ptrs, dst_ptrs, stream_ptr)`` queues its kernels on the raw CUDA stream ``stream_ptr`` (e.g.
    ``torch.cuda.current_stream().cuda_stream`` or ``cupy.cuda.get_current_stream().ptr``; 0 is the legacy default
    stream).

    * Each pointer addresses element 0 of its slot's bound range (the plan's offsets count from there) and each
      element count says how many elements of that range may be touched (the stride-2 copy reads a 16-byte word's
      unused tail only inside it).
    * Everything derived from the plan (kernel choice, word widening, compiled function, parameter blocks, grids) is
      cached per (plan object, addresses mod 16, element counts): a repeated call costs one dictionary lookup and one
      ``cuLaunchKernel`` per kernel (``launch.LAUNCH_VIA``). Keep plan objects (the planner's cache does): an equal
      new one builds a new entry (sharing the compiled kernels).
    * The launch is asynchronous and stream-ordered: the caller keeps the buffers alive until the stream has run it.
      The backend's device must be the calling thread's current CUDA device; else the launch is retried once with it
      made current.

    ``record``/``launch``/``launcher`` (a plan of one tuned pass) and ``prepare`` (CuPy word arrays) are forms of it.
"""
from __future__ import annotations

import ctypes
import functools
import threading
import types

import numpy as np

from ...model.data_type import DataType
from ...model.errors import UnsupportedError
from ...plan import Gather, MovePlan, Scatter
from ..cpu.backend import CpuBackend
from . import launch as _launch
# check_alignment: the adapters import it from here
from .launch import _NEW_KERNELS, Launch, _cupy, _kernel, capture_relaxed, check_alignment, probe  # noqa: F401
from .steps import move_steps

__all__ = ["CudaBackend", "MoveLaunch", "probe", "check_alignment"]

LAUNCH_CACHE = 1024  # cached launches kept per device
ALIGNMENT = 16       # of Buffer storage (allocate)



class CudaBackend:
    name = "cuda"

    def __init__(self, index: int = 0):
        # Relaxed: importing CuPy or querying devices must not invalidate a CUDA graph capture under way.
        with capture_relaxed():
            cupy = _cupy()
            try:
                count = cupy.cuda.runtime.getDeviceCount()
            except Exception as exc:
                raise UnsupportedError(f"Device('cuda'): CUDA is not usable here: {exc}") from None
        if not 0 <= index < count:
            raise UnsupportedError(f"Device('cuda:{index}'): there are {count} CUDA devices")
        self.cupy, self.index = cupy, index
        self.device = cupy.cuda.Device(index)
        self._launches: dict = {}
        self._lock = threading.Lock()

    def cache_info(self) -> dict:
        """{'launches', 'launch_via'}: this device's cached launches, and how launches are made."""
        return {"launches": len(self._launches), "launch_via": _launch.launch_route(_launch.LAUNCH_VIA)}

    # -- memory ----------------------------------------------------------------

    def allocate(self, nbytes: int):
        """Zeroed device bytes for a ``Buffer``, 16-byte aligned whatever CuPy allocator is installed (one returning
        2-byte-aligned memory is legal for float16): a view into ``nbytes + 16`` bytes."""
        with self.device:
            try:
                raw = self.cupy.zeros(nbytes + ALIGNMENT, dtype=np.uint8)
            except self.cupy.cuda.memory.OutOfMemoryError:
                raise MemoryError(nbytes) from None
            start = -raw.data.ptr % ALIGNMENT
            return raw[start:start + nbytes]

    def write_bytes(self, storage, offset: int, data) -> None:
        with self.device:
            storage[offset:offset + data.nbytes].set(np.ascontiguousarray(data).reshape(-1).view(np.uint8))

    def read_bytes(self, storage, offset: int, nbytes: int) -> np.ndarray:
        with self.device:
            return storage[offset:offset + nbytes].get()

    element_range = CpuBackend.element_range      # (CuPy's slices and views as NumPy's)

    def synchronize(self) -> None:
        self.device.synchronize()

    # -- execution --------------------------------------------------------------

    def record(self, plan: MovePlan, src_ptr: int, src_elements: int, dst_ptr: int,
               what: str | None = None) -> Launch:
        """The cached ``Launch`` of a one-input, one-output ``plan`` of one tuned pass (the first five's:
        ``plan.kernel_plan()`` not None) for these addresses' alignment classes; ``record(...)(src_ptr, dst_ptr,
        stream_ptr)`` queues it."""
        key = (id(plan), src_ptr & 15, dst_ptr & 15, src_elements)
        rec = self._launches.get(key)
        if rec is None:
            span = plan.out_spans()[0]
            move = self.record_move(plan, (src_ptr,), (src_elements,), (dst_ptr,),
                                    (0 if span is None else span[1] + 1,),
                                    what or "the move program")
            if len(move.steps) > 1:
                raise ValueError(f"CudaBackend.record takes a plan of one launch; {what or 'this plan'} has "
                                 f"{len(move.steps)} (run it with record_move)")
            rec = move.steps[0][0] if move.steps else Launch(self, move, "nothing", types.SimpleNamespace(ptr=0),
                                                            ctypes.c_int(0), 0, 0, _launch.LAUNCH_VIA)
            self._store(key, rec)
        return rec

    def launcher(self, plan, src_ptr: int, src_elements: int, dst_ptr: int):
        """``record``'s launch as a callable ``run(stream_ptr=0)``."""
        return functools.partial(self.record(plan, src_ptr, src_elements, dst_ptr), src_ptr, dst_ptr)

    def launch(self, plan, src_ptr: int, src_elements: int, dst_ptr: int, stream_ptr: int = 0) -> None:
        """Queue a one-launch plan (``record``) on ``stream_ptr`` now."""
        self.record(plan, src_ptr, src_elements, dst_ptr)(src_ptr, dst_ptr, stream_ptr)

    def record_move(self, plan: MovePlan, src_ptrs, src_elements, dst_ptrs, dst_elements,
                    what: str | None = None) -> "MoveLaunch":
        """The cached ``MoveLaunch`` of ``plan`` (validated; offsets count from element 0 of each bound range) for
        these addresses' alignment classes: ``rec(src_ptrs, dst_ptrs, stream_ptr)`` queues its kernels in order (module
        docstring). One address and one bound element count per input and output slot (JOIN's inputs, SPLIT's outputs
        each counting), each address a multiple of its slot's element size (else ``UnsupportedError`` naming
        ``what``, the operator); ``ValueError`` where the program reaches outside a bound range or the counts do not
        match its slots."""
        src_ptrs, dst_ptrs = tuple(src_ptrs), tuple(dst_ptrs)
        key = ("move", id(plan), tuple(a & 15 for a in src_ptrs), tuple(a & 15 for a in dst_ptrs),
               tuple(src_elements), tuple(dst_elements))
        rec = self._launches.get(key)
        if rec is not None:
            return rec
        what = what or "the move program"
        for role, ptrs, counts, types, spans in (("input", src_ptrs, src_elements, plan.in_types, plan.in_spans()),
                                                 ("output", dst_ptrs, dst_elements, plan.out_types,
                                                  plan.out_spans())):
            if len(ptrs) != len(types) or len(counts) != len(types):
                raise ValueError(f"{what} on CUDA: the program has {len(types)} {role}(s); got {len(ptrs)} "
                                 f"address(es) and {len(counts)} element count(s)")
            for i, (ptr, n, t, span) in enumerate(zip(ptrs, counts, types, spans)):
                es = DataType(t).size
                check_alignment(es, ptr if role == "input" else 0, ptr if role == "output" else 0, what)
                if span is not None and (span[0] < 0 or span[1] >= n):
                    raise ValueError(f"{what} on CUDA: the program reaches elements {span[0]}..{span[1]} of "
                                     f"{role} {i}, outside its {n} bound elements")
        steps = []
        if any(type(p) is Gather or type(p) is Scatter for p in plan.passes):
            # index-driven passes: index.py's kernels, the runs of other passes between them through this method
            from .index import index_move_steps
            return self._store(key, MoveLaunch(plan, index_move_steps(
                self, plan, src_ptrs, dst_ptrs,
                lambda sub: self.record_move(sub, src_ptrs, src_elements, dst_ptrs, dst_elements, what))))
        for name, params, grid, smem, s_slot, d_slot in move_steps(plan, src_ptrs, src_elements, dst_ptrs,
                                                                   sms=self.multiprocessors, what=what):
            with self.device:
                kernel = _kernel(self.index, name)
            steps.append((Launch(self, plan, name, kernel, params, grid[0], smem, _launch.LAUNCH_VIA), s_slot, d_slot))
        return self._store(key, MoveLaunch(plan, tuple(steps)))

    def _store(self, key, rec):
        with self._lock:
            if len(self._launches) >= LAUNCH_CACHE:
                # the older half dropped: a launch owns no device memory (its parameters go by value), so kernels
                # still queued from a dropped one need no synchronisation (and none happens inside a graph capture)
                for k in list(self._launches)[:len(self._launches) // 2 + 1]:
                    self._launches.pop(k, None)
            self._launches[key] = rec   # holds the plan: its id stays unique while cached
        return rec

    @functools.cached_property
    def multiprocessors(self) -> int:
        """The device's multiprocessor count (persistent grids)."""
        with capture_relaxed():
            return int(self.cupy.cuda.runtime.getDeviceProperties(self.index)["multiProcessorCount"])

    def prepare(self, plan: MovePlan, src, dst):
        """A callable running ``plan`` from the CuPy word arrays ``src`` into ``dst`` (one per input and output, of
        its slot's element size) on CuPy's current stream (read at each call)."""
        sps, dps = [a.data.ptr for a in src], [a.data.ptr for a in dst]
        rec = self.record_move(plan, sps, [a.size for a in src], dps, [a.size for a in dst])
        device, current = self.device, self.cupy.cuda.get_current_stream

        def run():
            with device:
                rec(sps, dps, current().ptr)
        run.keep_alive = (src, dst, rec)  # the pointers stay valid while the closure lives
        run.launch = rec
        return run


#: ``MoveLaunch``'s source slot of an index-driven pass (``index.IndexPass``, given every address).
INDEX_STEP = -2


class MoveLaunch:
    """The launches of one ``MovePlan``: ``(Launch, source slot, destination slot)`` per kernel, run in order by
    ``launch(src_ptrs, dst_ptrs, stream_ptr=0)`` (source slot -1: a fill, given the destination's address as its
    unused source; ``INDEX_STEP``: an ``IndexPass``)."""

    __slots__ = ("plan", "steps")

    def __init__(self, plan, steps):
        self.plan, self.steps = plan, steps

    def __call__(self, src_ptrs, dst_ptrs, stream_ptr: int = 0) -> None:
        for rec, s, d in self.steps:
            if s == INDEX_STEP:
                rec(src_ptrs, dst_ptrs, stream_ptr)
            else:
                dp = dst_ptrs[d]
                rec(src_ptrs[s] if s >= 0 else dp, dp, stream_ptr)

    @property
    def names(self) -> list[str]:
        """The kernels launched, in order."""
        return [n for rec, s, _ in self.steps for n in (rec.names if s == INDEX_STEP else [rec.name])]
