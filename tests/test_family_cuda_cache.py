"""The data-movement family on CUDA memory served by the C call cache: a call
on PyTorch CUDA tensors or CuPy arrays recorded by the Python route
(``cuda.move`` -> ``runtime.calls.put_move_cuda``) is served from
C the next time (outputs from the framework's allocator, the recorded
launches on its current stream). Every served answer equals the uncached
route's byte for byte, and every error is the uncached route's, over every
family operator (JOIN's list and tuple, SPLIT's list), layouts (packed,
transposed, strided, broadcast, flipped for CuPy, misaligned by an element,
negative views, which take the route; an input the route packs first, never
recorded, is checked without a GPU), a changed alignment
class, side streams (behind a long kernel, inside a CUDA graph capture),
threads each on its own stream, ``opendml.configure()``, a device that is not
the current one, and autograd. Needs a GPU (``@pytest.mark.cuda``); the C
paths themselves are also driven without one in
``tests/runtime/test_cuda_move_cache.py``."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import opendml as dml
from opendml.runtime import calls
from tests.conftest import cuda_available


def _torch_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available() and cuda_available()
    except Exception:  # noqa: BLE001
        return False


def _cupy() -> bool:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0 and cuda_available()
    except Exception:  # noqa: BLE001
        return False


needs_torch_cuda = pytest.mark.skipif(not _torch_cuda(), reason="CUDA (PyTorch and opendml's backend) is not available")
needs_cupy = pytest.mark.skipif(not _cupy(), reason="CuPy with a GPU is not available")
#: The two CUDA frameworks as test parameters, each skipped where it has no GPU here.
FRAMEWORKS = [pytest.param("torch", marks=pytest.mark.skipif(not _torch_cuda(), reason="no PyTorch CUDA")),
              pytest.param("cupy", marks=pytest.mark.skipif(not _cupy(), reason="no CuPy GPU"))]


def device(fw, a):
    """A NumPy array on the GPU of framework ``fw`` ("torch" or "cupy")."""
    if fw == "torch":
        import torch
        return torch.from_numpy(np.ascontiguousarray(a)).cuda()
    import cupy
    return cupy.asarray(a)


def side_stream(fw):
    """A new non-default stream of framework ``fw``, as a context that makes it current."""
    if fw == "torch":
        import torch
        return torch.cuda.stream(torch.cuda.Stream())
    import cupy
    return cupy.cuda.Stream(non_blocking=True)

CALLS = [
    ("identity", lambda t: dml.identity(t)),
    ("identity scale/bias", lambda t: dml.identity(t, scale=2.0, bias=-1.0)),
    ("cast float16", lambda t: dml.cast(t, np.float16)),
    ("cast int32", lambda t: dml.cast(t, "int32")),
    ("pad constant", lambda t: dml.pad(t, [0, 0, 1, 2], [0, 0, 2, 1], "constant", 3.5)),
    ("pad edge", lambda t: dml.pad(t, [0, 0, 1, 2], [0, 0, 2, 1], "edge")),
    ("pad reflect", lambda t: dml.pad(t, [0, 0, 1, 2], [0, 0, 2, 1], "reflect")),
    ("pad symmetric", lambda t: dml.pad(t, [0, 0, 1, 2], [0, 0, 2, 1], "symmetric")),
    ("pad wrap", lambda t: dml.pad(t, [0, 0, 1, 2], [0, 0, 2, 1], "wrap")),
    ("pad int", lambda t: dml.pad(t, 1, 1)),
    ("join list", lambda t: dml.join([t, t * 2], 1)),
    ("join tuple", lambda t: dml.join((t, t * 2, t), 3)),
    ("split", lambda t: dml.split(t, 2, [1, 3])),
    ("split three", lambda t: dml.split(t, 3, [2, 2, 2])),
    ("tile", lambda t: dml.tile(t, [1, 2, 1, 2])),
    ("space_to_depth", lambda t: dml.space_to_depth(t, 2)),
    ("space_to_depth CRD", lambda t: dml.space_to_depth(t, 2, "CRD")),
    ("depth_to_space", lambda t: dml.depth_to_space(t, 2)),
    ("depth_to_space CRD", lambda t: dml.depth_to_space(t, 2, "CRD")),
]
IDS = [c[0] for c in CALLS]


def hits() -> int:
    return calls.info()["hits"]


def listed(out):
    return out if isinstance(out, list) else [out]


def outcome(fn, x):
    try:
        return listed(fn(x))
    except Exception as e:  # noqa: BLE001 - compared with the cache-off outcome
        return e


def host(a):
    import torch
    if isinstance(a, torch.Tensor):
        torch.cuda.synchronize(a.device)
        return a.detach().cpu().numpy()
    import cupy
    cupy.cuda.runtime.deviceSynchronize()
    return cupy.asnumpy(a)


def assert_same(got, want):
    """The same outputs byte for byte (type, dtype, shape, device, packed), or
    the same exception type and message."""
    if isinstance(want, BaseException) or isinstance(got, BaseException):
        assert type(got) is type(want) and str(got) == str(want), (got, want)
        return
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert type(g) is type(w) and g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        assert g.device == w.device
        gh, wh = host(g), host(w)
        assert gh.flags.c_contiguous or gh.size == 0
        assert np.array_equal(gh.view(np.uint8), wh.view(np.uint8))


def check(fn, x, served: bool):
    """The uncached route's outcome, then the recording call and three more:
    all equal to it; the last three served from C where ``served`` (and the
    call is not an error, which is never cached)."""
    with dml.configure(call_cache=False):
        want = outcome(fn, x)
    served = served and not isinstance(want, BaseException)   # an error is never cached
    assert_same(outcome(fn, x), want)               # recorded (or the route's error)
    for _ in range(3):
        before = hits()
        got = outcome(fn, x)
        assert (hits() > before) == served
        assert_same(got, want)
    return want


# -- PyTorch CUDA tensors --------------------------------------------------------------------------

def _torch_layouts():
    import torch

    def misaligned():
        flat = torch.randn(1 + 1 * 4 * 4 * 6, device="cuda")[1:]
        assert flat.data_ptr() % 16 == 4
        return flat.view(1, 4, 4, 6)
    return {
        "packed": (lambda: torch.randn(1, 4, 4, 6, device="cuda"), True),
        "transposed": (lambda: torch.randn(1, 4, 6, 4, device="cuda").transpose(2, 3), True),
        "strided": (lambda: torch.randn(2, 4, 8, 6, device="cuda")[::2, :, ::2], True),
        "broadcast": (lambda: torch.randn(1, 4, 1, 6, device="cuda").expand(1, 4, 4, 6), True),
        "misaligned": (misaligned, True),
        "float16": (lambda: torch.randn(1, 4, 4, 6, device="cuda").half(), True),
        "int64": (lambda: torch.arange(96, device="cuda").view(1, 4, 4, 6), True),
        "negative view": (lambda: torch._neg_view(torch.randn(1, 4, 4, 6, device="cuda")), False),
        "requires_grad under no_grad": (lambda: torch.randn(1, 4, 4, 6, device="cuda", requires_grad=True), True),
    }


TORCH_LAYOUTS = ["packed", "transposed", "strided", "broadcast", "misaligned", "float16", "int64", "negative view",
                 "requires_grad under no_grad"]


@needs_torch_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("layout", TORCH_LAYOUTS)
@pytest.mark.parametrize("name,fn", CALLS, ids=IDS)
def test_torch_cuda_calls_are_served_and_equal_the_uncached_route(name, fn, layout):
    import torch
    make, served = _torch_layouts()[layout]
    x = make()
    with torch.no_grad():
        want = check(fn, x, served)
    if not isinstance(want, BaseException):
        # and the NumPy route's bytes
        with torch.no_grad():
            cpu = listed(fn(torch.from_numpy(host(x.resolve_neg()).copy())))
        for g, c in zip(want, cpu):
            assert np.array_equal(host(g).view(np.uint8), c.numpy().view(np.uint8))


@needs_torch_cuda
@pytest.mark.cuda
def test_torch_cuda_errors_equal_the_uncached_route():
    import torch
    x = torch.randn(1, 2, 3, 4, device="cuda")
    dml.pad(x, 1, 1, "reflect")                      # a recorded neighbour
    for fn in (lambda t: dml.pad(t, [0, 0, -1, 0], [0, 0, 0, 0], "edge"),
               lambda t: dml.pad(t, 1, 1, "nope"),
               lambda t: dml.cast(t, np.complex64),
               lambda t: dml.identity(t.int(), scale=2.0),
               lambda t: dml.join([t, t[:, :, :2, :2]], 1),
               lambda t: dml.join([t, t.cpu()], 1),
               lambda t: dml.split(t, 3, [1, 1]),
               lambda t: dml.space_to_depth(t, 2),
               lambda t: dml.tile(t, [1, 0, 1, 1])):
        with dml.configure(call_cache=False):
            want = outcome(fn, x)
        assert isinstance(want, Exception)
        for _ in range(3):
            assert_same(outcome(fn, x), want)


@needs_torch_cuda
@pytest.mark.cuda
def test_torch_cuda_a_new_alignment_class_is_its_own_entry():
    import torch
    flat = torch.arange(1 + 2 * 3 * 8, dtype=torch.float32, device="cuda")
    a, b = flat[:-1].view(2, 3, 8), flat[1:].view(2, 3, 8)     # addresses 0 and 4 mod 16
    assert a.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 4
    fn = lambda t: dml.pad(t, [0, 1, 2], [1, 0, 3], "symmetric")  # noqa: E731
    with dml.configure(call_cache=False):
        want = {id(a): outcome(fn, a), id(b): outcome(fn, b)}
    assert_same(outcome(fn, a), want[id(a)])                   # recorded
    entries = calls.info()["entries"]
    before = hits()
    assert_same(outcome(fn, a), want[id(a)])
    assert hits() == before + 1
    before = hits()
    assert_same(outcome(fn, b), want[id(b)])                   # another class: the route, recorded apart
    assert hits() == before and calls.info()["entries"] == entries + 1
    for x in (b, a, b):
        before = hits()
        assert_same(outcome(fn, x), want[id(x)])
        assert hits() == before + 1


@needs_torch_cuda
@pytest.mark.cuda
def test_torch_cuda_served_on_a_side_stream_behind_a_long_kernel():
    """A served call runs on the caller's current stream: queued behind a long
    kernel there, it sees the write before it once that stream is synchronised."""
    import torch
    x = torch.zeros(1, 4, 16, 16, device="cuda")
    source = torch.randn(1, 4, 16, 16, device="cuda")
    fn = lambda t: dml.split(dml.pad(t, [0, 0, 1, 1], [0, 0, 1, 1], "reflect"), 1, [1, 3])   # noqa: E731
    with dml.configure(call_cache=False):
        want = [o.cpu() for o in fn(source)]
    fn(x)                                               # recorded
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    before = hits()
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)
        x.copy_(source)
        outs = fn(x)
        done = torch.cuda.Event()
        done.record(side)
    assert hits() == before + 2                         # pad and split, both served
    assert not done.query()                             # still sleeping: nothing waited
    side.synchronize()
    for o, w in zip(outs, want):
        assert torch.equal(o.cpu(), w)


@needs_torch_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("name,fn", CALLS, ids=IDS)
def test_torch_cuda_served_inside_a_cuda_graph_capture(name, fn):
    """A served call inside a capture queues on the capturing stream (a launch
    anywhere else would fail the capture) and its replay recomputes it."""
    import torch
    x = torch.randn(1, 4, 4, 6, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn(x)
        fn(x)                                           # recorded and served here
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    before = hits()
    with torch.cuda.graph(graph):
        outs = listed(fn(x))
    assert hits() > before
    new = torch.randn(1, 4, 4, 6, device="cuda")
    x.copy_(new)
    graph.replay()
    torch.cuda.synchronize()
    with dml.configure(call_cache=False):
        want = listed(fn(new))
    for o, w in zip(outs, want):
        assert torch.equal(o, w)


@needs_torch_cuda
@pytest.mark.cuda
def test_torch_cuda_threads_each_on_its_own_stream():
    import torch
    fns = [fn for _, fn in CALLS]
    inputs = [torch.randn(1, 4, 4, 6, device="cuda") for _ in range(6)]
    with dml.configure(call_cache=False):
        wants = [[[o.cpu() for o in listed(fn(x))] for fn in fns] for x in inputs]
    for fn in fns:
        fn(inputs[0])                                   # recorded
    errors = []
    before = hits()

    def work(k):
        try:
            stream = torch.cuda.Stream()
            got = []
            with torch.cuda.stream(stream):
                for _ in range(20):
                    got.append([listed(fn(inputs[k])) for fn in fns])
            stream.synchronize()
            for outs in got:
                for o, w in zip(outs, wants[k]):
                    for a, b in zip(o, w):
                        assert torch.equal(a.cpu(), b)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert hits() - before >= len(inputs) * 20 * len(fns) // 2


@needs_torch_cuda
@pytest.mark.cuda
def test_torch_cuda_configure_empties_and_records_again():
    import torch
    x = torch.randn(2, 4, 4, 6, device="cuda")
    fn = lambda t: dml.tile(t, [1, 1, 2, 3])             # noqa: E731
    want = fn(x)
    fn(x)
    before = hits()
    fn(x)
    assert hits() == before + 1
    with dml.configure(call_cache=True):                # any change empties the cache
        assert calls.info()["entries"] == 0
        before = hits()
        assert torch.equal(fn(x), want)                 # recorded again
        assert hits() == before
        assert torch.equal(fn(x), want)
        assert hits() == before + 1
    with dml.configure(call_cache=False):
        before = hits()
        for _ in range(2):
            assert torch.equal(fn(x), want)
        assert hits() == before


@needs_torch_cuda
@pytest.mark.cuda
def test_torch_cuda_autograd_takes_the_route():
    import torch
    x = torch.randn(1, 4, 4, 6, device="cuda")
    with torch.no_grad():
        dml.pad(x, 1, 1, "reflect")                     # recorded from a plain tensor
    g = torch.randn(dml.pad(x, 1, 1, "reflect").shape, device="cuda")
    with dml.configure(call_cache=False):               # the plain route's forward and gradient
        xr = x.clone().requires_grad_()
        yr = dml.pad(xr, 1, 1, "reflect")
        yr.backward(g)
    xg = x.clone().requires_grad_()
    for _ in range(3):
        # never the plain tensor's entry (it records nothing): the autograd route, whose repeats the
        # C++ node's eager entry may serve (recording the node)
        y = dml.pad(xg, 1, 1, "reflect")
        assert y.grad_fn is not None and "opendml" in type(y.grad_fn).__name__
        assert torch.equal(y, yr.detach())
        y.backward(g)
        assert torch.equal(xg.grad, xr.grad)
        xg.grad = None


@needs_torch_cuda
@pytest.mark.cuda
def test_torch_cuda_tensor_on_a_device_that_is_not_current():
    import torch
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA GPUs")
    x = torch.randn(1, 4, 4, 6, device="cuda:1")
    fn = lambda t: dml.join([t, dml.space_to_depth(t, 2).reshape(1, 4, 4, 6)], 2)   # noqa: E731
    with dml.configure(call_cache=False), torch.cuda.device(1):
        want = fn(x).cpu()
    with torch.cuda.device(1):
        fn(x)
        before = hits()
        assert torch.equal(fn(x).cpu(), want)
        assert hits() == before + 2
    with torch.cuda.device(0):
        for _ in range(2):
            before = hits()
            got = fn(x)
            assert hits() == before                     # the launches need cuda:1 current: the route
            assert got.device == torch.device("cuda:1")
            assert torch.equal(got.cpu(), want)
    # tensors on two devices: the route's error, cached or not
    y = torch.randn(1, 4, 4, 6, device="cuda:0")
    with dml.configure(call_cache=False):
        want_error = outcome(lambda t: dml.join([t, x], 1), y)
    assert isinstance(want_error, Exception)
    for _ in range(2):
        assert_same(outcome(lambda t: dml.join([t, x], 1), y), want_error)


# -- CuPy arrays -----------------------------------------------------------------------------------

def _cupy_layouts():
    import cupy

    def misaligned():
        flat = cupy.arange(1 + 96, dtype=cupy.float32)[1:]
        assert flat.data.ptr % 16 == 4
        return flat.reshape(1, 4, 4, 6)

    return {
        "packed": (lambda: cupy.random.standard_normal((1, 4, 4, 6), dtype=cupy.float32), True),
        "transposed": (lambda: cupy.random.standard_normal((1, 4, 6, 4), dtype=cupy.float32).swapaxes(2, 3), True),
        "flipped": (lambda: cupy.random.standard_normal((1, 4, 4, 6), dtype=cupy.float32)[..., ::-1], True),
        "strided": (lambda: cupy.random.standard_normal((2, 4, 8, 6), dtype=cupy.float32)[::2, :, ::2], True),
        "misaligned": (misaligned, True),
        "int8": (lambda: cupy.arange(96, dtype=cupy.int8).reshape(1, 4, 4, 6), True),
    }


CUPY_LAYOUTS = ["packed", "transposed", "flipped", "strided", "misaligned", "int8"]


@needs_cupy
@pytest.mark.cuda
@pytest.mark.parametrize("layout", CUPY_LAYOUTS)
@pytest.mark.parametrize("name,fn", CALLS, ids=IDS)
def test_cupy_calls_are_served_and_equal_the_uncached_route(name, fn, layout):
    import cupy
    make, served = _cupy_layouts()[layout]
    x = make()
    want = check(fn, x, served)
    if not isinstance(want, BaseException):
        cpu = listed(fn(np.ascontiguousarray(cupy.asnumpy(x))))
        for g, c in zip(want, cpu):
            assert np.array_equal(host(g).view(np.uint8), c.view(np.uint8))


@needs_cupy
@pytest.mark.cuda
def test_cupy_side_stream_and_threads():
    import cupy
    fns = [fn for _, fn in CALLS]
    inputs = [cupy.random.standard_normal((1, 4, 4, 6), dtype=cupy.float32) for _ in range(4)]
    with dml.configure(call_cache=False):
        wants = [[[cupy.asnumpy(o) for o in listed(fn(x))] for fn in fns] for x in inputs]
    for fn in fns:
        fn(inputs[0])
    errors = []

    def work(k):
        try:
            stream = cupy.cuda.Stream(non_blocking=True)
            with stream:
                got = [[listed(fn(inputs[k])) for fn in fns] for _ in range(20)]
            stream.synchronize()
            for outs in got:
                for o, w in zip(outs, wants[k]):
                    for a, b in zip(o, w):
                        assert np.array_equal(cupy.asnumpy(a), b)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
    before = hits()
    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert hits() - before >= len(inputs) * 20 * len(fns) // 2
