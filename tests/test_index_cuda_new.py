"""The index functions' new shapes on CUDA memory (issue 33): a call of gather, gather_elements, gather_nd,
scatter_elements, scatter_nd, one_hot or reverse_subsequences on PyTorch CUDA tensors or CuPy arrays, of a
shape the call cache never saw, is lowered (newshape_index.c), planned (cuda_index_spec.c, cuda_move_spec.c),
allocated, launched and recorded in C (``runtime.calls.index_new``): no description is built, the next such
call is a call-cache hit, and the outputs and errors are the Python route's byte for byte. A checked call
(the default) is checked by its kernels (index.cu's ``ix_coordinate_of`` sets a host-mapped flag that C reads
after waiting for the stream), on its first call and on its repeats, with no Python check; an index out of
range sends it to the route, which raises the same error as ever (from any thread or stream, after
``configure()``, inside a CUDA graph capture as before). An overwriting scatter runs in C too, a group a
block (scatter_elements along any axis) or through an owner table C allocates, zeroes and hands to its two
launches; what C leaves to the route (a scatter that sorts) gives the route's bytes too. Needs a GPU
(``@pytest.mark.cuda``); the launch planning itself is compared with the Python route's without one in
``tests/runtime/test_cuda_index_spec.py``."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import opendml as dml
from opendml.arrays import engine, front, index_ops
from opendml.runtime import calls as ccache
from opendml.runtime.cuda import index, launch
from tests.conftest import run_in_threads
from tests.test_family_cuda_cache import FRAMEWORKS, assert_same, device, outcome, side_stream

pytestmark = pytest.mark.cuda


def flipped(fw, a):
    """``a`` on the GPU as a view of another layout: its last axis stepped (every other element)."""
    big = device(fw, np.repeat(a, 2, axis=-1))
    return big[..., ::2]


def cases(rng):
    """(name, host arrays, call) of calls C takes (check_indices off, where there is one)."""
    x = (rng.standard_normal((3, 40, 24)) * 30).astype(np.float32)
    h = x.astype(np.float16)
    rev = (rng.standard_normal((2, 500, 64)) * 30).astype(np.float32)    # a staged tile of 64000 bytes
    return [
        ("gather", (x, rng.integers(-40, 40, (7, 2)).astype(np.int64)),
         lambda a, i: dml.gather(a, i, 1, check_indices=False)),
        ("gather", (h, rng.integers(0, 24, (300,)).astype(np.uint32)),
         lambda a, i: dml.gather(a, i, -1, check_indices=False)),
        ("gather_elements", (x, rng.integers(0, 24, (3, 40, 200)).astype(np.int32)),
         lambda a, i: dml.gather_elements(a, i, 2, check_indices=False)),
        ("gather_elements", (x, rng.integers(0, 40, (3, 40, 24)).astype(np.int64)),
         lambda a, i: dml.gather_elements(a, i, 1, check_indices=False)),
        ("gather_nd", (x, rng.integers(0, 3, (5, 2)).astype(np.int64)),
         lambda a, i: dml.gather_nd(a, i, check_indices=False)),
        ("one_hot", (rng.integers(-3, 40, (6, 50)).astype(np.int64), np.array([0.5, 2.0], np.float32)),
         lambda i, v: dml.one_hot(i, 40, v, -1)),
        ("one_hot", (rng.integers(0, 9, (4, 3)).astype(np.int32), np.array([0, 7], np.int8)),
         lambda i, v: dml.one_hot(i, 9, v, 0)),
        ("reverse_subsequences", (x, rng.integers(0, 41, (3, 1, 24)).astype(np.uint32)),
         lambda a, n: dml.reverse_subsequences(a, n, 1)),
        ("reverse_subsequences", (x, rng.integers(0, 30, (3, 40)).astype(np.uint64)),
         lambda a, n: dml.reverse_subsequences(a, n, 2)),
        ("reverse_subsequences", (rev, rng.integers(0, 501, (2, 1, 64)).astype(np.uint32)),
         lambda a, n: dml.reverse_subsequences(a, n, 1)),
        ("reverse_subsequences", (rev, rng.integers(0, 70, (2, 500)).astype(np.uint32)),
         lambda a, n: dml.reverse_subsequences(a, n, 2)),
        ("scatter_elements", (x, rng.integers(0, 24, (3, 40, 24)).astype(np.int64), np.float32(1.5)),
         None),
        # overwriting scatters of distinct updates, repeated indices (the last position in row-major order
        # writes): a block a group (ix_scatter_group: along rows a row, along axis 1 a column, its dimension
        # moved last); test_owner_tables_* and the many-blocks test take the owner table (ix_owner) too
        ("scatter_elements rows", (x, rng.integers(0, 24, (3, 40, 30)).astype(np.int64),
                                   rng.standard_normal((3, 40, 30)).astype(np.float32)),
         lambda a, i, u: dml.scatter_elements(a, i, u, 2, check_indices=False)),
        ("scatter_elements owner", (x, rng.integers(0, 40, (3, 50, 24)).astype(np.int32),
                                    rng.standard_normal((3, 50, 24)).astype(np.float32)),
         lambda a, i, u: dml.scatter_elements(a, i, u, 1, check_indices=False)),
        ("scatter_nd", (x, rng.integers(0, 3, (9, 1)).astype(np.int64), rng.standard_normal((9, 40, 24))
                        .astype(np.float32)), lambda a, i, u: dml.scatter_nd(a, i, u, check_indices=False)),
        ("scatter_nd checked", (x, rng.integers(-3, 3, (9, 2)).astype(np.int64),
                                rng.standard_normal((9, 24)).astype(np.float32)), lambda a, i, u: dml.scatter_nd(a, i, u)),
    ]


def python_route(fn, *arrays):
    real = index_ops._index_new
    index_ops._index_new = lambda *a: None
    try:
        with dml.configure(call_cache=False):
            return outcome(lambda _: fn(*arrays), None)
    finally:
        index_ops._index_new = real


def c_route(fn, arrays, monkeypatch):
    """``fn(*arrays)`` on a cache that never saw it, failing the test where a description is built; then its
    repeat, which must be a call-cache hit."""
    ccache.clear()
    with monkeypatch.context() as m:
        m.setattr(engine.Call, "describe", lambda *a, **k: pytest.fail("a description was built"))
        got = outcome(lambda _: fn(*arrays), None)
        hits = ccache.info()["hits"]
        again = outcome(lambda _: fn(*arrays), None)
        assert ccache.info()["hits"] == hits + 1, "the repeat was not a call-cache hit"
    return got, again


def on_gpu(fw, name, arrays, layout):
    if name == "scatter_elements":                 # broadcast updates: one source block, ONE_HOT's mode
        x, ind, v = arrays
        upd = device(fw, np.full((1, 1, 1), v, x.dtype))
        upd = upd.expand(ind.shape) if fw == "torch" else __import__("cupy").broadcast_to(upd, ind.shape)
        return (device(fw, x), device(fw, ind), upd)
    return tuple((flipped if layout and i == 0 and a.ndim > 1 else device)(fw, a) for i, a in enumerate(arrays))


def call_of(name, fn):
    if name == "scatter_elements":
        return lambda a, i, u: dml.scatter_elements(a, i, u, 2, check_indices=False)
    return fn


@pytest.mark.parametrize("fw", FRAMEWORKS)
@pytest.mark.parametrize("layout", [False, True], ids=["packed", "strided"])
def test_new_shapes_take_the_c_route_and_equal_the_python_route(fw, layout, monkeypatch):
    """Can fail: a never-seen shape builds a description (the Python route), gives other bytes than the
    route, or its repeat is not a hit."""
    for name, arrays, fn in cases(np.random.default_rng(7)):
        fn = call_of(name, fn)
        xs = on_gpu(fw, name, arrays, layout)
        want = python_route(fn, *xs)
        got, again = c_route(fn, xs, monkeypatch)
        assert_same(got, want)
        assert_same(again, want)


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_what_c_declines_takes_the_route(fw, monkeypatch):
    """Can fail: a checked call (good or bad indices) or an overwriting scatter of distinct updates gives
    other bytes or another error than the route (C must leave the error to it)."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 8, 5)) * 10).astype(np.float32)
    good, bad = rng.integers(0, 8, (4,)), np.array([0, 9, 1])
    calls = [(lambda a, i: dml.gather(a, i, 1), (x, good)), (lambda a, i: dml.gather(a, i, 1), (x, bad)),
             (lambda a, i, u: dml.scatter_elements(a, i, u, 1, check_indices=False),
              (x, rng.integers(0, 8, (3, 8, 5)), x[:, ::-1].copy()))]
    for fn, arrays in calls:
        xs = tuple(device(fw, a) for a in arrays)
        want = python_route(fn, *xs)
        ccache.clear()
        assert_same(outcome(lambda _: fn(*xs), None), want)
    assert isinstance(python_route(calls[1][0], *(device(fw, a) for a in calls[1][1])), dml.ValidationError)
    # a checked call whose index array is a broadcast view (its kernels would not read every index): the
    # route checks it (good: then its unchecked twin from C; bad: the route's error), also when repeated
    fn = lambda a, i: dml.gather_elements(a, i, 2)  # noqa: E731
    for row in (rng.integers(0, 5, (1, 1, 5)), np.array([[[0, 5, 1, 2, 3]]])):
        i = device(fw, row)
        i = i.expand(3, 8, 5) if fw == "torch" else __import__("cupy").broadcast_to(i, (3, 8, 5))
        xs = (device(fw, x), i)
        want = python_route(fn, *xs)
        ccache.clear()
        for _ in range(3):
            assert_same(result(fn, *xs), want)


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_kernels_not_compiled_and_changed_settings(fw, monkeypatch):
    """Can fail: C launches a kernel it was not given (the names come back to compile first), or plans with
    index.py's old settings after they changed (other bytes, or a failed launch)."""
    rng = np.random.default_rng(2)
    x = device(fw, (rng.standard_normal((4, 300)) * 9).astype(np.float32))
    n = device(fw, rng.integers(0, 301, (4,)).astype(np.uint32))
    fn = lambda a, m: dml.reverse_subsequences(a, m, 1)  # noqa: E731
    want = python_route(fn, x, n)
    monkeypatch.setattr(launch, "_NEW_KERNELS", {})
    got, _ = c_route(fn, (x, n), monkeypatch)
    assert_same(got, want)
    assert any(k.startswith("ix_") for table in launch._NEW_KERNELS.values() for k in table)
    for knob, value in (("REVERSE_ROWS", 0), ("POSITION_ITEMS", 1), ("ITEMS", 2)):
        monkeypatch.setattr(index, knob, value)
        got, _ = c_route(fn, (x, n), monkeypatch)
        assert_same(got, want)


def result(fn, *arrays):
    """``fn(*arrays)``'s outputs, or the exception it raised."""
    return outcome(lambda _: fn(*arrays), None)


def checked_calls(rng):
    """(function, data, good indices, bound of each index) of checked calls C takes: a bound, or one per
    column of gather_nd's index tuples."""
    x = (rng.standard_normal((3, 40, 24)) * 30).astype(np.float32)
    return [(lambda a, i: dml.gather(a, i, 1), x, rng.integers(-40, 40, (7, 2)).astype(np.int64), 40),
            (lambda a, i: dml.gather(a, i, 1), x, rng.integers(0, 40, (300,)).astype(np.int32), 40),
            (lambda a, i: dml.gather_elements(a, i, 2), x, rng.integers(-24, 24, (3, 40, 9)).astype(np.int32), 24),
            (lambda a, i: dml.gather_elements(a, i, 1), x, rng.integers(0, 40, (3, 40, 24)).astype(np.int64), 40),
            (lambda a, i: dml.gather_nd(a, i), x, rng.integers(0, 3, (5, 2)).astype(np.int64), np.array([3, 40]))]


def bad_copies(good, bound):
    """``good`` with one index out of range, at its first, a middle and its last position: one past its
    bound, one below its negative range, and the type's extremes."""
    b = np.broadcast_to(bound, good.shape).reshape(-1)
    info = np.iinfo(good.dtype)
    out = []
    for flat, value in ((0, b[0]), (good.size // 2, -b[good.size // 2] - 1), (good.size - 1, info.max),
                        (good.size // 3, info.min)):
        bad = good.copy().reshape(-1)
        bad[flat] = value
        out.append(bad.reshape(good.shape))
    return out


def no_python_check(m):
    """Fail the test where the route's index check (``index_ops.check``, which the operator classes'
    ``arguments`` call) or its planning (a description built) runs."""
    m.setattr(front.ARGUMENT_API, "check_indices", lambda *a, **k: pytest.fail("the Python index check ran"))
    m.setattr(engine.Call, "describe", lambda *a, **k: pytest.fail("a description was built"))


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_checked_calls_are_checked_by_their_kernels_from_c(fw, monkeypatch):
    """Can fail: a checked call (the default) whose indices are in range runs the route's index check or
    planning on its first call (the C new-shape route) or its repeat (a call-cache hit, which must be one),
    or gives other bytes than the route."""
    rng = np.random.default_rng(5)
    work = []
    for fn, x, good, _ in checked_calls(rng):
        xs = (device(fw, x), device(fw, good))
        work.append((fn, xs, python_route(fn, *xs)))
    ccache.clear()
    with monkeypatch.context() as m:
        no_python_check(m)
        for fn, xs, want in work:
            got = result(fn, *xs)
            hits = ccache.info()["hits"]
            again = result(fn, *xs)
            assert ccache.info()["hits"] == hits + 1, "the repeat was not a call-cache hit"
            assert_same(got, want)
            assert_same(again, want)


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_a_bad_checked_index_raises_the_routes_error_on_every_route(fw):
    """Can fail: an index out of range (past its bound, below its negative range, int64 and int32 extremes;
    first, middle or last) gives a result, or another error than the route's naming it, on a never-seen
    shape, on a repeat of a recorded call, on a shape C has not seen since, or with the call cache off; or a
    good call after a bad one is no longer a hit."""
    rng = np.random.default_rng(9)
    for fn, x, good, bound in checked_calls(rng):
        xg, ig = device(fw, x), device(fw, good)
        for bad in bad_copies(good, bound):
            ib = device(fw, bad)
            want = python_route(fn, xg, ib)
            assert isinstance(want, dml.ValidationError) and "is out of range" in str(want)
            ccache.clear()
            assert_same(result(fn, xg, ib), want)                  # a never-seen shape
            fn(xg, ig)
            fn(xg, ig)                                                              # recorded, served
            assert_same(result(fn, xg, ib), want)                  # a repeat's entry
            hits = ccache.info()["hits"]
            fn(xg, ig)
            assert ccache.info()["hits"] == hits + 1
            wider = device(fw, np.concatenate([bad.reshape(-1), good.reshape(-1)[:1]]))
            if bad.ndim == 1:                                                       # another shape
                assert_same(result(fn, xg, wider), python_route(fn, xg, wider))
            with dml.configure(call_cache=False):
                assert_same(result(fn, xg, ib), want)
    if fw == "cupy":                                                                # unsigned indices
        big = np.array([3, 2**63 + 5, 1], np.uint64)
        fn = lambda a, i: dml.gather(a, i, 1)  # noqa: E731
        xg, ib = device(fw, checked_calls(rng)[0][1]), device(fw, big)
        want = python_route(fn, xg, ib)
        assert isinstance(want, dml.ValidationError)
        ccache.clear()
        assert_same(result(fn, xg, ib), want)


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_checked_calls_from_threads_each_on_its_own_stream(fw):
    """Can fail: checked calls made at once from 4 threads, each on its own stream, good and bad indices
    interleaved, give another result or error than the route (a flag shared between calls, or read before
    its call's kernels ran)."""
    rng = np.random.default_rng(11)
    fn, x, good, bound = checked_calls(rng)[0]
    xg = device(fw, x)
    goods = [device(fw, rng.integers(-40, 40, good.shape).astype(good.dtype)) for _ in range(4)]
    bads = [device(fw, b) for b in bad_copies(good, bound)]
    wants = [python_route(fn, xg, i) for i in goods + bads]
    ccache.clear()

    def work(k):
        with side_stream(fw):
            for step in range(40):
                j = (k + step) % 8
                assert_same(result(fn, xg, (goods + bads)[j]), wants[j])
    run_in_threads(work)


CAPTURE = """
import sys
import numpy as np
import torch
import opendml as dml
from opendml.arrays import index_ops
from opendml.runtime import calls

if sys.argv[1] == "route":                      # the Python route alone: no C call cache, no C new shapes
    index_ops._index_new = lambda *a: None
    dml.configure(call_cache=False).__enter__()
rng = np.random.default_rng(3)
x = torch.from_numpy(rng.standard_normal((3, 40, 24)).astype(np.float32)).cuda()
i = torch.from_numpy(rng.integers(0, 40, (7,))).cuda()
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    dml.gather(x, i, 1)
    dml.gather(x, i, 1)                         # recorded and served (C) here
torch.cuda.current_stream().wait_stream(side)
torch.cuda.synchronize()
graph = torch.cuda.CUDAGraph()
hits = calls.info()["hits"]
try:
    with torch.cuda.graph(graph):
        out = dml.gather(x, i, 1)
    graph.replay()
    torch.cuda.synchronize()
    print("captured", bool(torch.equal(out, x[:, i])))
except Exception as e:  # noqa: BLE001
    print("error", type(e).__name__, str(e).splitlines()[0][:160])
print("hits", calls.info()["hits"] - hits)
"""


@pytest.mark.parametrize("fw", [p for p in FRAMEWORKS if p.values[0] == "torch"])
def test_a_checked_call_inside_a_cuda_graph_capture_behaves_as_the_route(fw):
    """Can fail: a checked call inside torch.cuda.graph capture (which C cannot check: it would wait for
    the capturing stream) is served from C, or ends otherwise than the route alone does there (each in its
    own process: a failed capture may leave its process's CUDA state unusable)."""
    out = {}
    for mode in ("route", "c"):
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(CAPTURE), mode], capture_output=True, text=True,
                           timeout=240, check=False)
        assert r.returncode == 0, r.stderr[-3000:]
        out[mode] = r.stdout.split("\n")
    assert out["c"][0] == out["route"][0], out
    assert out["c"][1] == "hits 0", out


def dirty(fw, value=-1):
    """Device memory of every 512-byte size class up to 64 KiB filled with ``value`` and freed, so that the
    framework's allocator hands it to the next small allocations (an owner table's among them)."""
    if fw == "torch":
        import torch
        held = [torch.full((n // 4,), value, dtype=torch.int32, device="cuda") for n in range(512, 65537, 512)]
    else:
        import cupy
        held = [cupy.full((n // 4,), value, dtype=np.int32) for n in range(512, 65537, 512)]
    del held


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_owner_tables_are_zeroed_on_the_stream_whatever_memory_they_get(fw, monkeypatch):
    """Can fail: an overwriting scatter's owner table (ix_owner's atomicMax slots, zeroed by the driver's
    memset on the call's stream before its launches) is not zeroed: memory the allocator hands back holding
    0xFFFFFFFF makes every position lose its ownership, and the scatter writes nothing, on a never-seen shape
    (checked or not) and on its repeats."""
    monkeypatch.setattr(index, "SCATTER_VIA", "owner")     # (along axis 1 "auto" runs one group launch)
    rng = np.random.default_rng(13)
    x = rng.standard_normal((3, 50, 24)).astype(np.float32)
    ind = rng.integers(0, 40, (3, 50, 24)).astype(np.int32)
    upd = rng.standard_normal((3, 50, 24)).astype(np.float32)
    for check in (True, False):
        fn = lambda a, i, u: dml.scatter_elements(a, i, u, 1, check_indices=check)  # noqa: E731
        xs = tuple(device(fw, a) for a in (x, ind, upd))
        want = python_route(fn, *xs)
        ccache.clear()
        for _ in range(4):                      # a never-seen shape, then hits
            dirty(fw)
            assert_same(result(fn, *xs), want)
        assert ccache.info()["hits"] >= 3


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_a_checked_call_of_many_blocks_sees_a_bad_index_in_any_block(fw, monkeypatch):
    """Can fail: the last checked launch's done word (index.cu's ix_finish, which the host waits for instead
    of the stream) is set before every block of a grid of hundreds has checked its indices, or its counter is
    not back at 0 for the next call of the slot: a bad index in the first, a middle, the last or a random
    block gives a result, or a good call after it another result than the route's. Two checked launches
    (scatter_elements through an owner table: ix_owner, then the scatter) see a bad index too, and so does
    the one group launch (ix_scatter_group, 800 blocks) the same scatter takes by default."""
    rng = np.random.default_rng(17)
    x = rng.standard_normal((4, 300, 200)).astype(np.float32)
    upd = device(fw, rng.standard_normal((4, 300, 200)).astype(np.float32))
    scatter = rng.integers(0, 300, (4, 300, 200)).astype(np.int64)
    calls = [(lambda a, i: dml.gather_elements(a, i, 1), rng.integers(0, 300, (4, 300, 200)).astype(np.int64),
              "auto"),
             (lambda a, i: dml.gather(a, i, 1), rng.integers(-300, 300, (20000,)).astype(np.int32), "auto"),
             (lambda a, i: dml.scatter_elements(a, i, upd, 1), scatter, "auto"),
             (lambda a, i: dml.scatter_elements(a, i, upd, 1), scatter, "owner")]
    xg = device(fw, x)
    for fn, good, via in calls:
        monkeypatch.setattr(index, "SCATTER_VIA", via)
        ig = device(fw, good)
        want_good = python_route(fn, xg, ig)
        ccache.clear()
        for step in range(12):
            at = (0, good.size - 1, good.size // 2, int(rng.integers(good.size)))[step % 4]
            bad = good.copy().reshape(-1)
            bad[at] = 300 if step % 2 else -301
            ib = device(fw, bad.reshape(good.shape))
            want = python_route(fn, xg, ib)
            assert isinstance(want, dml.ValidationError)
            assert_same(result(fn, xg, ib), want)
            assert_same(result(fn, xg, ig), want_good)


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_a_checked_call_waits_for_its_done_word_not_its_stream(fw):
    """Can fail: checked calls served from C (never-seen shapes, then their repeats, hits) wait for their
    streams instead of their last checked launch's done word (index.cu's ix_finish; the driver's counters of
    the slots could not be had, or the word never set): ``cuda_check_info`` counts how each wait ended. Each
    call waits exactly once; a wait may end on the stream where the kernel is not done within the spin (a GPU
    time-sliced between processes, as under ``pytest -n``: one run saw 40 of 40 such waits end on the
    stream), so the test asks for the done word in at least one of up to 200 pairs of calls, not in all."""
    from opendml.runtime.cpu import backend as cpu_backend
    nat = cpu_backend._load_native()
    rng = np.random.default_rng(19)
    fn, x, good, _ = checked_calls(rng)[2]
    xg, ig = device(fw, x), device(fw, good)
    want = python_route(fn, xg, ig)
    done, stream = nat.cuda_check_info()
    for pairs in range(1, 201):
        ccache.clear()
        assert_same(result(fn, xg, ig), want)
        assert_same(result(fn, xg, ig), want)
        now = nat.cuda_check_info()
        assert sum(now) == done + stream + 2 * pairs            # one wait a call
        if now[0] > done:
            break
    assert now[0] > done
