"""The C call cache's entries for the data-movement family on CUDA memory
(``calls.c``: ``cuda_move``, ``put_move_cuda``), driven without a GPU.

A stand-in for CuPy (an array type with ``dtype``, ``shape``, ``strides`` and
``data.ptr``/``data.device_id``; ``empty``, the current device and stream as
hooks) is registered with the cache, and records are made with stand-in
launches: where no CUDA driver library loads, the C launcher fails and hands
each launch to the record's ``Launch`` callable, which logs its source,
destination and stream. So every C path runs here (and under the sanitizer
pass): the key (operator, arguments, dtype, shape, strides, device, alignment
class; one array or JOIN's list/tuple), the output allocation and its
alignment check, the launches in order with their slots and the origins,
SPLIT's list, the current device and stream read per call, the generation
and clear, malformed records, errors met in hooks, the entry's hold on its
launches, threads. The same paths on a GPU, with PyTorch CUDA tensors and
CuPy arrays, are in ``tests/test_family_cuda_cache.py``. (Here, in tests/runtime,
these run in the CI sanitizer pass too.)"""
from __future__ import annotations

import ctypes
import gc
import sys
import threading
import weakref

import numpy as np
import pytest

import opendml as dml
from opendml.runtime import calls


def _driver_loads() -> bool:
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            pass
    return False


pytestmark = [
    pytest.mark.skipif(not calls._HAS or not calls.info()["numpy"],
                       reason="the compiled call cache is not built"),
    # with a driver, the C launcher would queue the stand-in launches for real
    pytest.mark.skipif(_driver_loads(), reason="a CUDA driver library loads here (the GPU tests cover these paths)"),
]


class Memory:
    def __init__(self, ptr, device_id):
        self.ptr, self.device_id = ptr, device_id


class FakeArray:
    """What the cache reads of a CuPy array."""

    def __init__(self, shape, dtype, ptr, strides=None, device=0):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        if strides is None:
            strides, step = [], self.dtype.itemsize
            for n in reversed(self.shape):
                strides.insert(0, step)
                step *= max(n, 1)
        self.strides = tuple(strides)
        self.data = Memory(ptr, device)
        self.filled = None

    def fill(self, value):
        """CuPy's ``fill``, as the cache zeroes an owner table: recorded."""
        self.filled = value


class Hooks:
    def __init__(self):
        self.device = 0
        self.local = threading.local()
        self.stream = 77
        self.next = 0x7000_0000
        self.misalign = 0
        self.fail = None
        self.lock = threading.Lock()

    def empty(self, shape, dtype):
        if self.fail is not None:
            raise self.fail
        with self.lock:
            ptr = self.next + self.misalign
            self.next += 0x10000
            made = FakeArray(shape, dtype, ptr, device=self.device)
            self.made = getattr(self, "made", [])[-63:] + [made]
        return made

    def current_device(self):
        return self.device

    def stream_ptr(self):
        return getattr(self.local, "stream", self.stream)


class FakeLaunch:
    """A backend ``Launch`` as ``put_move_cuda`` reads it."""
    via = "native"
    threads = 256

    def __init__(self, log, name, blocks=3, smem=0, fail=None):
        self.log, self.name, self.blocks, self.smem, self.fail = log, name, blocks, smem, fail
        self.function_ptr, self.params_ptr = 0x1234, 0x5678

    def __call__(self, src, dst, stream):
        if self.fail is not None:
            raise self.fail
        self.log.append((self.name, src, dst, stream))


class FakeMoveLaunch:
    """A backend ``MoveLaunch``: its steps, run in order."""

    def __init__(self, steps):
        self.steps = tuple(steps)

    def __call__(self, src_ptrs, dst_ptrs, stream_ptr=0):
        for rec, s, d in self.steps:
            if rec.blocks:
                rec(src_ptrs[s] if s >= 0 else dst_ptrs[d], dst_ptrs[d], stream_ptr)


class _Nothing:
    pass


@pytest.fixture
def fake():
    hooks = Hooks()
    calls.register_cupy(FakeArray, hooks.empty, hooks.current_device, hooks.stream_ptr)
    try:
        yield hooks
    finally:
        adapter = sys.modules.get("opendml.arrays.cupy_adapter")
        if adapter is not None:            # CuPy's own hooks back
            import cupy
            calls.register_cupy(cupy.ndarray, cupy.empty, cupy.cuda.runtime.getDevice, adapter._current_stream_ptr)
        else:
            calls.register_cupy(_Nothing, lambda *a: None, lambda: 0, lambda: 0)
        calls.clear()


OP = calls.OPS["pad"]
ARGS = ((0, 1), (1, 0), "reflect", 0.5)


def record(x, outs, steps, args=ARGS, origins=None, multi=False, name="pad", since=None):
    if since is None:
        since = calls.generation()
    if origins is None:
        origins = (0,) * (len(x) if isinstance(x, (list, tuple)) else 1)
    return calls.put_move_cuda(name, x, args, tuple(outs), tuple(origins), FakeMoveLaunch(steps), multi, since)


def hits():
    return calls.info()["hits"]


def test_a_recorded_call_allocates_and_queues_its_launches_in_order(fake):
    log = []
    x = FakeArray((2, 3), np.float32, 0x1000_0040)
    steps = [(FakeLaunch(log, "copy"), 0, 0), (FakeLaunch(log, "fill"), -1, 0), (FakeLaunch(log, "none", 0), 0, 0)]
    assert record(x, [((3, 4), np.dtype(np.float32), 0x2000_0000)], steps, origins=(8,))
    before = hits()
    out = calls.move(OP, x, *ARGS)
    assert hits() == before + 1
    assert type(out) is FakeArray and out.shape == (3, 4) and out.dtype == np.float32 and out.data.device_id == 0
    dst = out.data.ptr
    # the copy reads from element 0 of the bound range (8 bytes back); the fill gets its destination as source;
    # a launch of no blocks is not kept
    assert log == [("copy", 0x1000_0038, dst, 77), ("fill", dst, dst, 77)]
    # another array of the same key (another address, same class mod 16): the same launches there
    log.clear()
    y = FakeArray((2, 3), np.float32, 0x3000_0040)
    out = calls.move(OP, y, *ARGS)
    assert log == [("copy", 0x3000_0038, out.data.ptr, 77), ("fill", out.data.ptr, out.data.ptr, 77)]


def test_every_part_of_the_key_counts(fake):
    log = []
    x = FakeArray((2, 3), np.float32, 0x1000_0000)
    assert record(x, [((3, 4), np.dtype(np.float32), 0)], [(FakeLaunch(log, "copy"), 0, 0)])
    assert calls.move(OP, x, *ARGS) is not None
    others = [
        (x, ((0, 1), (1, 0), "reflect", -0.5)),             # an argument
        (x, ((0, 1), (1, 0), "edge", 0.5)),
        (x, ((0, 1), (1, 1), "reflect", 0.5)),
        (x, ((0, 1), (1, 0), "reflect")),                   # fewer arguments
        (FakeArray((2, 3), np.float16, 0x1000_0000), ARGS),           # dtype
        (FakeArray((2, 3), np.int32, 0x1000_0000), ARGS),             # dtype of the same size
        (FakeArray((3, 2), np.float32, 0x1000_0000), ARGS),           # shape
        (FakeArray((2, 3), np.float32, 0x1000_0000, (4, 8)), ARGS),   # strides
        (FakeArray((2, 3), np.float32, 0x1000_0004), ARGS),           # alignment class
        ([x], ARGS),                                                  # a list of it
    ]
    for y, args in others:
        before = len(log)
        assert calls.move(OP, y, *args) is None
        assert len(log) == before
    fake.device = 1                                         # the same array's key on another device
    assert calls.move(OP, FakeArray((2, 3), np.float32, 0x1000_0000, device=1), *ARGS) is None
    assert calls.move(OP, x, *ARGS) is None                 # x's device is not the current one
    fake.device = 0
    assert calls.move(OP, x, *ARGS) is not None
    assert calls.move(calls.OPS["tile"], x, *ARGS) is None  # another operator


def test_the_output_must_be_in_the_recorded_alignment_class(fake):
    log = []
    x = FakeArray((4,), np.float32, 0x1000_0000)
    assert record(x, [((4,), np.dtype(np.float32), 0x2000_0000)], [(FakeLaunch(log, "copy"), 0, 0)])
    fake.misalign = 4
    assert calls.move(OP, x, *ARGS) is None and log == []  # the route allocates again and chooses its launches
    fake.misalign = 16
    assert calls.move(OP, x, *ARGS) is not None and len(log) == 1


def test_the_current_stream_is_read_per_call(fake):
    log = []
    x = FakeArray((4,), np.float32, 0x1000_0000)
    assert record(x, [((4,), np.dtype(np.float32), 0)], [(FakeLaunch(log, "copy"), 0, 0)])
    for stream in (77, 0, 123456, 2**63 + 5):
        fake.stream = stream
        calls.move(OP, x, *ARGS)
        assert log[-1][3] == stream


def test_join_and_split(fake):
    log = []
    a = FakeArray((2, 3), np.float32, 0x1000_0000)
    b = FakeArray((2, 5), np.float32, 0x2000_0010)
    join = calls.OPS["join"]
    assert record([a, b], [((2, 8), np.dtype(np.float32), 0)],
                  [(FakeLaunch(log, "a"), 0, 0), (FakeLaunch(log, "b"), 1, 0)], args=(1,), origins=(0, 4),
                  name="join")
    for xs in ([a, b], (a, b)):                         # a list or a tuple: one key
        log.clear()
        out = calls.move(join, xs, 1)
        assert type(out) is FakeArray and out.shape == (2, 8)
        assert log == [("a", 0x1000_0000, out.data.ptr, 77), ("b", 0x2000_000C, out.data.ptr, 77)]
    assert calls.move(join, [b, a], 1) is None
    assert calls.move(join, [a], 1) is None
    assert calls.move(join, [a, b, a], 1) is None
    assert calls.move(join, [a, b], 0) is None
    assert calls.move(join, [a, FakeArray((2, 5), np.float32, 0x2000_0010, device=1)], 1) is None
    # inputs on two devices: no key, nothing stored
    assert not record([a, FakeArray((2, 5), np.float32, 0, device=1)], [((2, 8), np.dtype(np.float32), 0)],
                      [], args=(1,), name="join")

    split = calls.OPS["split"]
    x = FakeArray((2, 8), np.float16, 0x1000_0000)
    assert record(x, [((2, 3), np.dtype(np.float16), 0), ((2, 5), np.dtype(np.float16), 0)],
                  [(FakeLaunch(log, "s0"), 0, 0), (FakeLaunch(log, "s1"), 0, 1)], args=(1, (3, 5)), multi=True,
                  name="split")
    log.clear()
    outs = calls.move(split, x, 1, (3, 5))
    assert type(outs) is list and [o.shape for o in outs] == [(2, 3), (2, 5)]
    assert all(o.dtype == np.float16 for o in outs)
    assert log == [("s0", 0x1000_0000, outs[0].data.ptr, 77), ("s1", 0x1000_0000, outs[1].data.ptr, 77)]
    assert calls.move(split, x, 1, [3, 5]) is not None   # a list argument keys as the tuple (snapshotted alike)


def test_a_call_of_empty_outputs_launches_nothing(fake):
    x = FakeArray((0, 3), np.float32, 0)
    assert record(x, [((0, 4), np.dtype(np.float32), 0)], [])
    out = calls.move(OP, x, *ARGS)
    assert out.shape == (0, 4)


def test_an_origin_outside_the_address_is_not_recorded(fake):
    """An origin below 0 or past the input's address (an empty array's
    layout can give one; validation rejects empty tensors today) is refused
    quietly: a record is never an error for the call."""
    x = FakeArray((0, 3), np.float32, 0x40, strides=(-12, 4))
    for origin in (-12, 0x44, 2**62):
        assert record(x, [((0, 4), np.dtype(np.float32), 0)], [], origins=(origin,)) is False
        assert calls.move(OP, x, *ARGS) is None


def test_generation_clear_configure_and_off(fake):
    log = []
    x = FakeArray((4,), np.float32, 0x1000_0000)
    since = calls.generation()
    calls.clear()
    assert not record(x, [((4,), np.dtype(np.float32), 0)], [(FakeLaunch(log, "c"), 0, 0)], since=since)
    assert calls.move(OP, x, *ARGS) is None
    assert record(x, [((4,), np.dtype(np.float32), 0)], [(FakeLaunch(log, "c"), 0, 0)])
    assert calls.move(OP, x, *ARGS) is not None
    with dml.configure(call_cache=True):                  # any configuration change empties the cache
        assert calls.move(OP, x, *ARGS) is None
        assert record(x, [((4,), np.dtype(np.float32), 0)], [(FakeLaunch(log, "c"), 0, 0)])
        assert calls.move(OP, x, *ARGS) is not None
    assert calls.move(OP, x, *ARGS) is None
    with dml.configure(call_cache=False):
        assert not record(x, [((4,), np.dtype(np.float32), 0)], [(FakeLaunch(log, "c"), 0, 0)])
        assert calls.move(OP, x, *ARGS) is None


def test_a_launch_not_made_by_the_native_launcher_is_not_recorded(fake):
    launch = FakeLaunch([], "c")
    launch.via = "driver"
    x = FakeArray((4,), np.float32, 0x1000_0000)
    assert not record(x, [((4,), np.dtype(np.float32), 0)], [(launch, 0, 0)])
    assert calls.move(OP, x, *ARGS) is None


def test_errors_met_on_a_hit(fake):
    log = []
    x = FakeArray((4,), np.float32, 0x1000_0000)
    assert record(x, [((4,), np.dtype(np.float32), 0)], [(FakeLaunch(log, "c"), 0, 0)])
    fake.fail = MemoryError("out of memory")              # the route allocates again and raises AllocationError
    assert calls.move(OP, x, *ARGS) is None
    fake.fail = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        calls.move(OP, x, *ARGS)
    fake.fail = None
    assert calls.move(OP, x, *ARGS) is not None
    calls.clear()
    boom = RuntimeError("opendml CUDA: launching move_vec failed: CUDA_ERROR_LAUNCH_FAILED (719)")
    assert record(x, [((4,), np.dtype(np.float32), 0)],
                  [(FakeLaunch(log, "ok"), 0, 0), (FakeLaunch(log, "bad", fail=boom), 0, 0)])
    with pytest.raises(RuntimeError, match="CUDA_ERROR_LAUNCH_FAILED"):   # the Launch's own error, as the route
        calls.move(OP, x, *ARGS)


def test_a_stream_hook_error_is_raised(fake):
    x = FakeArray((4,), np.float32, 0x1000_0000)
    assert record(x, [((4,), np.dtype(np.float32), 0)], [(FakeLaunch([], "c"), 0, 0)])

    def broken():
        raise ValueError("no stream")
    calls.register_cupy(FakeArray, fake.empty, fake.current_device, broken)   # (empties the cache)
    assert record(x, [((4,), np.dtype(np.float32), 0)], [(FakeLaunch([], "c"), 0, 0)])
    with pytest.raises(ValueError, match="no stream"):
        calls.move(OP, x, *ARGS)


def test_malformed_records_are_refused(fake):
    x = FakeArray((4,), np.float32, 0x1000_0000)
    native = calls._native
    op, since = calls.OPS["pad"], calls.generation()
    good_out = (((4,), np.dtype(np.float32), 0),)
    launch = FakeLaunch([], "c")

    def step(**kw):
        d = dict(function=1, grid=1, block=256, shared=0, params=8, src=0, dst=0, launch=launch)
        d.update(kw)
        return tuple(d.values())
    bad = [
        ((), (0,), (step(),)),                                         # no output
        (good_out, (), (step(),)),                                     # no origin
        (good_out, (0,), (step(grid=0),)),
        (good_out, (0,), (step(grid=2**31),)),
        (good_out, (0,), (step(block=0),)),
        (good_out, (0,), (step(block=1025),)),
        (good_out, (0,), (step(shared=2**32),)),
        (good_out, (0,), (step(function=0),)),
        (good_out, (0,), (step(params=0),)),
        (good_out, (0,), (step(src=1),)),
        (good_out, (0,), (step(src=-2),)),
        (good_out, (0,), (step(dst=1),)),
        (good_out, (0,), (step(launch=None),)),
        (good_out, (0,), (step()[:7],)),
        ((((4,), "float32", 0),), (0,), (step(),)),                    # a CuPy output's dtype: a NumPy dtype
        ((((-1,), np.dtype(np.float32), 0),), (0,), (step(),)),
        ((((4,), np.dtype(np.float32), 16),), (0,), (step(),)),
        ((((1,) * 9, np.dtype(np.float32), 0),), (0,), (step(),)),
    ]
    for outs, origins, steps in bad:
        with pytest.raises((ValueError, TypeError, OverflowError)):
            native.call_cache_put_move(op, x, ARGS, outs, origins, steps, False, since)
    assert calls.move(OP, x, *ARGS) is None
    assert native.call_cache_put_move(op, x, ARGS, good_out, (0,), (step(),), False, since) is True
    assert calls.move(OP, x, *ARGS) is not None


def test_more_outputs_or_launches_than_an_entry_holds_are_not_recorded(fake):
    """SPLIT into 17 (JOIN of 17 has no key): refused quietly, the route serves."""
    log = []
    x = FakeArray((17, 2), np.float32, 0x1000_0000)
    split = calls.OPS["split"]
    outs = [((1, 2), np.dtype(np.float32), 0)] * 17
    assert record(x, outs, [(FakeLaunch(log, f"s{i}"), 0, i) for i in range(17)], args=(0,), multi=True,
                  name="split") is False
    assert calls.move(split, x, 0) is None
    assert record(x, outs[:16], [(FakeLaunch(log, "s"), 0, 0)] * 65, args=(0,), multi=True, name="split") is False
    assert calls.move(split, x, 0) is None
    assert record([x] * 17, outs[:1], [], args=(0,), name="join") is False
    assert record(x, outs[:16], [(FakeLaunch(log, f"s{i}"), 0, i) for i in range(16)], args=(0,), multi=True,
                  name="split") is True
    assert len(calls.move(split, x, 0)) == 16 and len(log) == 16


def test_an_entry_holds_its_launches_until_dropped(fake):
    log = []
    x = FakeArray((4,), np.float32, 0x1000_0000)
    launch = FakeLaunch(log, "c")
    ref = weakref.ref(launch)
    assert record(x, [((4,), np.dtype(np.float32), 0)], [(launch, 0, 0)])
    del launch
    gc.collect()
    assert ref() is not None                               # its parameter block lives while the entry does
    calls.move(OP, x, *ARGS)
    assert len(log) == 1
    calls.clear()
    gc.collect()
    assert ref() is None                                   # released at once: launches copied it by value


def test_threads(fake):
    """Threads hitting one entry with their own streams while another clears
    and records again: every served call queues its launch on its own
    thread's stream into its own output."""
    log = []
    x = FakeArray((4, 4), np.float32, 0x1000_0000)
    steps = [(FakeLaunch(log, "c"), 0, 0)]
    outs = [((4, 8), np.dtype(np.float32), 0)]
    assert record(x, outs, steps)
    errors, served = [], []
    stop = threading.Event()

    def caller(k):
        fake.local.stream = 1000 + k
        try:
            for _ in range(2000):
                out = calls.move(OP, x, *ARGS)
                if out is not None:
                    assert out.shape == (4, 8)
                    served.append((out.data.ptr, 1000 + k))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    def churn():
        while not stop.wait(0.0005):
            calls.clear()
            record(x, outs, steps)

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(6)]
    side = threading.Thread(target=churn)
    side.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    side.join()
    assert errors == []
    assert served
    launched = {dst: stream for _, src, dst, stream in log}
    for dst, stream in served:
        assert launched[dst] == stream
    assert all(src == 0x1000_0000 for _, src, _, _ in log)


# -- the Python route's record (cuda.move -> put_move_cuda), end to end ----------------

class FakeBackend:
    """A CUDA backend's ``record_move`` giving one stand-in launch per pass
    of the program (its slots as the real ``move_steps`` gives them)."""

    def __init__(self, log):
        self.log = log

    def record_move(self, plan, srcs, spans, dsts, counts, what=None):
        from opendml.plan import Fill
        steps = []
        for i, p in enumerate(plan.passes):
            if p.count:
                fill = isinstance(p, Fill)
                steps.append((FakeLaunch(self.log, f"{what}:{i}"), -1 if fill else p.src, p.dst))
        return FakeMoveLaunch(steps)


@pytest.fixture
def fake_framework(fake, monkeypatch):
    """The family's functions on ``FakeArray``s, through front.py's route
    as CuPy's module runs it (``cupy_adapter.run``, without CuPy): validated,
    then ``cuda.move`` with the fake allocator and stream, and a
    backend of stand-in launches."""
    import types

    from opendml.arrays import cuda, front
    log = []
    monkeypatch.setattr(cuda, "get_backend", lambda name: FakeBackend(log))

    def run(call, arrays):
        since = calls.generation() if call.ccall is not None else None
        desc = call.describe_arrays([x.dtype for x in arrays], [x.shape for x in arrays])

        def entry(a):
            def pack():
                packed = fake.empty(a.shape, a.dtype)
                return packed, packed.data.ptr, packed.shape, packed.strides, packed.dtype.itemsize, pack
            return a, a.data.ptr, a.shape, a.strides, a.dtype.itemsize, pack

        def allocate(shape, dtype):
            out = fake.empty(shape, dtype)
            return out, out.data.ptr
        record = None if since is None else (call, tuple(arrays) if call.ccall[2] else arrays[0], since)
        return cuda.move(desc, [entry(x) for x in arrays], allocate, 0, fake.stream_ptr(),
                                    record=record)
    monkeypatch.setitem(front._BY_TYPE, FakeArray, types.SimpleNamespace(run=run))
    return log


def _fake_calls():
    f32 = np.float32
    a = FakeArray((1, 4, 4, 6), f32, 0x1000_0000)
    flipped = FakeArray((1, 4, 4, 6), f32, 0x1000_0000 + 5 * 4, strides=(384, 96, 24, -4))
    misaligned = FakeArray((1, 4, 4, 6), f32, 0x1000_0004)
    b = FakeArray((1, 4, 4, 6), f32, 0x5000_0000)
    cases = []
    for x in (a, flipped, misaligned):
        cases += [
            (lambda t: dml.identity(t), x),
            (lambda t: dml.identity(t, scale=2.0, bias=-1.0), x),
            (lambda t: dml.cast(t, np.float16), x),
            (lambda t: dml.pad(t, [0, 0, 1, 2], [0, 0, 2, 1], "constant", 3.5), x),
            (lambda t: dml.pad(t, [0, 0, 1, 2], [0, 0, 2, 1], "reflect"), x),
            (lambda t: dml.join([t, b], 1), x),
            (lambda t: dml.join((b, t, b), 3), x),
            (lambda t: dml.split(t, 2, [1, 3]), x),
            (lambda t: dml.tile(t, [1, 2, 1, 2]), x),
            (lambda t: dml.space_to_depth(t, 2), x),
            (lambda t: dml.depth_to_space(t, 2, "CRD"), x),
        ]
    return cases


@pytest.mark.parametrize("case", range(len(_fake_calls())))
def test_the_route_records_what_it_ran_and_the_cache_replays_it(fake_framework, case):
    """The route (front.py -> cuda.move) records its launches; the
    next call is served from C and queues the same launches, in the same
    order, from the same source addresses, into its own outputs."""
    log = fake_framework
    fn, x = _fake_calls()[case]
    route = listed_outs(fn(x))
    ran = list(log)
    assert ran and all(stream == 77 for *_, stream in ran)
    log.clear()
    before = hits()
    served = listed_outs(fn(x))
    assert hits() == before + 1
    assert [(o.shape, o.dtype) for o in served] == [(o.shape, o.dtype) for o in route]
    where = {o.data.ptr: i for i, o in enumerate(route)}
    now = {o.data.ptr: i for i, o in enumerate(served)}
    assert [(n, s if s not in where else ("out", where[s]), where[d]) for n, s, d, _ in ran] == \
           [(n, s if s not in now else ("out", now[s]), now[d]) for n, s, d, _ in log]


def listed_outs(out):
    return out if isinstance(out, list) else [out]


def test_the_route_records_nothing_for_a_packed_input(fake_framework):
    log = fake_framework
    odd = FakeArray((4, 6), np.float32, 0x1000_0000, strides=(25, 4))     # no whole number of elements
    for _ in range(3):
        before = hits()
        out = dml.tile(odd, [2, 1])
        assert hits() == before and out.shape == (8, 6)
    assert log


def test_a_one_pass_cupy_entry_is_served_checked_and_replayed(fake):
    """A first-five call on a CuPy array is recorded as a move entry of its one launch (``put_move_cuda``)
    and served by the first five's lookup (``calls.call``) and the
    family's alike: the output from the empty hook, its alignment class checked, the launch queued on the
    stream read at the call, an allocator's error left to the Python route (None)."""
    log = []
    SLICE, SLICE_ARGS = calls.OPS["slice"], ((0, 0), (1, 1), (1, 1))
    x = FakeArray((2, 3), np.float32, 0x1000_0040)
    assert record(x, [((3, 4), np.dtype(np.float32), 0x2000_0000)], [(FakeLaunch(log, "slice"), 0, 0)],
                  args=SLICE_ARGS, origins=(8,), name="slice")
    before = hits()
    out = calls.call(SLICE, x, *SLICE_ARGS)
    assert hits() == before + 1 and type(out) is FakeArray and out.shape == (3, 4) and out.dtype == np.float32
    assert log == [("slice", 0x1000_0038, out.data.ptr, 77)]
    assert calls.move(SLICE, x, *SLICE_ARGS) is not None and len(log) == 2
    fake.stream, fake.misalign = 5, 4                      # another stream; an output out of its class
    assert calls.call(SLICE, x, *SLICE_ARGS) is None and len(log) == 2
    fake.misalign = 0
    assert calls.call(SLICE, x, *SLICE_ARGS) is not None and log[-1][3] == 5
    fake.fail = MemoryError("pool")
    assert calls.call(SLICE, x, *SLICE_ARGS) is None and len(log) == 3
    fake.fail = None
    launch_error = FakeLaunch(log, "slice", fail=RuntimeError("launch failed"))
    calls.clear()
    assert record(x, [((3, 4), np.dtype(np.float32), 0x2000_0000)], [(launch_error, 0, 0)], args=SLICE_ARGS,
                  origins=(8,), name="slice")
    with pytest.raises(RuntimeError, match="launch failed"):
        calls.call(SLICE, x, *SLICE_ARGS)


class FakeIndexPass:
    """An ``IndexPass`` as ``put_move_cuda`` reads it (``call_cache_step``) and as the cache calls it (its
    launch's retry, or a scratch mode's launches)."""
    via = "index"

    def __init__(self, log, function=0x1234):
        self.log, self.function = log, function

    def call_cache_step(self, checked=False):
        from opendml.runtime.cuda import index
        at = (index.IndexParams.src.offset, index.IndexParams.dst.offset, index.IndexParams.idx.offset, (1,),
              index.flag_offsets(1) if checked and self.function else ())
        if not self.function:
            return 0, 0, 0, 0, b"", 0, 0, self, at
        return self.function, 2, 256, 0, bytes(index.IndexParams()), 0, 0, self, at

    def __call__(self, srcs, dsts, stream):
        self.log.append(("index", srcs, dsts, stream))


def test_a_checked_index_call_is_recorded_with_its_flags_and_declined_where_it_cannot_be_checked(fake):
    """A checked gather (``check_indices=True``) is recorded with where its kernels' flag address goes
    (index.flag_offsets); served where no driver loads (here) it cannot read the flag: None, nothing
    launched, so the route checks the indices. Its unchecked twin keys apart and is served (its launch
    fails over to the IndexPass). A checked call whose index pass needs scratch (no flag reaches those
    launches) is not recorded; a record with flags but no function, or a flag outside the block, is
    refused."""
    log = []
    op = calls.OPS["gather"]
    x, ind = FakeArray((4, 5), np.float32, 0x1000_0000), FakeArray((3,), np.int64, 0x2000_0000)
    outs = (((3, 5), np.dtype(np.float32), 0x3000_0000),)
    for check in (True, False):
        assert calls.put_move_cuda("gather", (x, ind), (check, 0, None), outs, (0, 0),
                                   FakeMoveLaunch([(FakeIndexPass(log), -1, 0)]), False, calls.generation())
    assert calls.info()["entries"] == 2
    assert calls.move(op, (x, ind), True, 0, None) is None and not log
    out = calls.move(op, (x, ind), False, 0, None)
    assert type(out) is FakeArray and out.shape == (3, 5) and len(log) == 1
    calls.clear()
    assert not calls.put_move_cuda("gather", (x, ind), (True, 0, None), outs, (0, 0),
                                   FakeMoveLaunch([(FakeIndexPass(log, 0), -1, 0)]), False, calls.generation())
    assert calls.put_move_cuda("gather", (x, ind), (False, 0, None), outs, (0, 0),
                               FakeMoveLaunch([(FakeIndexPass(log, 0), -1, 0)]), False, calls.generation())
    from opendml.runtime.cuda import index
    size = len(bytes(index.IndexParams()))
    good = FakeIndexPass(log).call_cache_step(True)
    for flags, function in (((8,), 0), ((size - 4,), 0x1234), ((-1,), 0x1234), (tuple(range(0, 80, 8)), 0x1234)):
        step = (function,) + good[1:8] + (good[8][:4] + (flags,),)
        with pytest.raises((ValueError, TypeError, OverflowError)):
            calls._native.call_cache_put_move(op, (x, ind), (True, 0, None), ((*outs[0][:2], 0),), (0, 0), (step,),
                                              False, calls.generation())
