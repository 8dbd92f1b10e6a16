"""Issue 19 (new shapes on PyTorch tensors): ``torch_adapter._new_shape``,
one C call (``calls.move_new``, the one new-shape route: ``call_cache_move_new``)
that applies the operator's lowering in C to a tensor's layout,
allocates through PyTorch, runs the kernel and records the call, against the
route through descriptions and plans (``_new_shape`` refused), on the CPU and,
where there is one, on CUDA:

* the same bytes, dtype, shape and device, or the same error (type and
  message), over layouts (permuted, strided, offset, expanded with stride 0),
  dtypes and random valid and invalid arguments of SLICE, SLICE1, UNFOLD and
  SLICE_GRAD; the call it records serves the next one with the same bytes;
* after ``opendml.configure()`` changes (threads, grain, tiles, NumPy
  kernels, call cache off, the C++ node library off) and from several threads;
* on CUDA: a kernel the process has not compiled (compiled on the miss), a
  served entry from a thread that never used CUDA (the retry hook), tensors
  of another device than the current one.
"""
import math
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import opendml as dml  # noqa: E402
import opendml.torch as otorch  # noqa: E402
from opendml.arrays import front  # noqa: E402
from opendml.arrays.torch import adapter as ta  # noqa: E402
from opendml.model import TensorDesc  # noqa: E402
from opendml.runtime import calls  # noqa: E402
from tests import reference as ref  # noqa: E402
from tests.conftest import cuda_available, native_available, run_in_threads  # noqa: E402
from tests.test_newshape_fastpaths import modest_unfold, outcome, per_axis, slice1_args, slice_args, window_args  # noqa: E402
from tests.test_newshape_plain import unfold_fields  # noqa: E402
from .conftest import n_examples

pytestmark = pytest.mark.skipif(not native_available(), reason="the compiled CPU kernels are not built")

SETTINGS = settings(max_examples=n_examples(80), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
DTYPES = [torch.float32, torch.float32, torch.float16, torch.float64, torch.int8, torch.uint8, torch.int16,
          torch.int32, torch.int64]


def _torch_cuda() -> bool:
    return torch.cuda.is_available() and cuda_available()


@pytest.fixture(scope="module", autouse=True)
def _accessors():
    """These tests run the route through the node library's tensor
    accessors: wait for them (tests/test_torch_new_no_accessors.py runs it
    without them)."""
    if not otorch.wait_for_node():
        pytest.skip(f"the C++ node library is not available: {otorch.node_status()}")
    yield


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def device(request):
    if request.param == "cuda" and not _torch_cuda():
        pytest.skip("CUDA (PyTorch and opendml's backend) is not available")
    return request.param


@st.composite
def tensor_of(draw, shape, device):
    """A tensor of ``shape`` in one of several layouts, values 1..251 (shapes
    of more than 2^16 elements are not drawn: an example must not allocate
    gigabytes)."""
    n = math.prod(shape)
    assume(n <= 1 << 16)
    dtype = draw(st.sampled_from(DTYPES))
    base = (torch.arange(n) % 251 + 1).to(dtype).reshape(shape).to(device)
    kind = draw(st.sampled_from(["packed", "packed", "permuted", "strided", "offset", "expanded"]))
    if kind == "permuted" and len(shape) > 1:
        order = draw(st.permutations(range(len(shape))))
        inverse = [order.index(i) for i in range(len(shape))]
        return base.permute(order).contiguous().permute(inverse)
    if kind == "strided":
        big = torch.zeros(tuple(2 * s for s in shape), dtype=dtype, device=device)
        view = big[tuple(slice(None, None, 2) for _ in shape)]
        view.copy_(base)
        return view
    if kind == "offset":
        flat = torch.zeros(n + 3, dtype=dtype, device=device)
        view = flat[3:].view(shape)
        view.copy_(base)
        return view
    if kind == "expanded" and 1 not in shape:
        axis = draw(st.integers(0, len(shape) - 1))
        one = base.narrow(axis, 0, 1)
        return one.expand(shape)
    return base


def _norm(r):
    if r[0] == "ok":
        y = r[1]
        return ("ok", y.dtype, tuple(y.shape), y.device, y.is_contiguous(), y.cpu().numpy().tobytes())
    return r


def entry(fn, x, *args):
    """The call-cache entry of the call, comparable across routes: a CUDA
    entry by its launch (function, grid, block, shared memory, alignment
    class, origin, shape; a Launch's parameter block is not readable from C),
    a CPU entry by everything (kernel, parameter bytes, threads, dtype...)."""
    e = calls.entry(fn.__name__, x, *args)
    if e is None:
        return None
    e = dict(e, dtype=None if e["dtype"] is None else str(e["dtype"]))    # (a NumPy dtype, or a torch.dtype on CUDA)
    if not e["cpu"]:
        del e["params"], e["kernel"]
    return e


def served(fn, x, *args):
    """(outcome of fn(x, *args), its call-cache entry, outcome of a repeat,
    whether the repeat was served)."""
    first = _norm(outcome(fn, x, *args))
    recorded = entry(fn, x, *args)
    before = calls.info()["hits"]
    again = _norm(outcome(fn, x, *args))
    return first, recorded, again, calls.info()["hits"] > before


def plan_route(fn, x, *args, repeat=False):
    """``fn(x, *args)`` with the C new-shape route (``front._new``) refused and every cache cleared
    (with ``repeat``: ``served``'s triple)."""
    real = front._new
    front._new = lambda *a: None
    try:
        calls.clear()
        return served(fn, x, *args) if repeat else _norm(outcome(fn, x, *args))
    finally:
        front._new = real
        calls.clear()


def check(fn, x, *args):
    """The new-shape route (caches cleared), then a repeat (served by the
    call it recorded wherever the plan route's record serves one), equal the
    plan route; returns the new route's outcome."""
    want, want_entry, want_again, want_served = plan_route(fn, x, *args, repeat=True)
    calls.clear()
    got = outcome(fn, x, *args)
    assert _norm(got) == want
    assert entry(fn, x, *args) == want_entry
    before = calls.info()["hits"]
    assert _norm(outcome(fn, x, *args)) == want_again == want
    assert (calls.info()["hits"] > before) == want_served
    return got


def numpy_of(x):
    return x.cpu().numpy()


@SETTINGS
@given(st.data())
def test_slice1_new_route_equals_the_plan_route(device, data):
    inp, out, o, s, t = data.draw(slice1_args())
    shape = inp.sizes if isinstance(inp, TensorDesc) else (2, 3)
    if 0 in shape or len(shape) > 8:
        return
    x = data.draw(tensor_of(shape, device))
    out_sizes = list(out.sizes) if isinstance(out, TensorDesc) else None
    got = check(dml.slice1, x, o, s, t, out_sizes)
    if got[0] == "ok":
        want_sizes = out_sizes or [1 + (w - 1) // abs(v) for w, v in zip(s, t)]
        assert np.array_equal(numpy_of(got[1]), ref.slice1(numpy_of(x), list(o), list(s), list(t), want_sizes))


@SETTINGS
@given(st.data())
def test_slice_new_route_equals_the_plan_route(device, data):
    inp, _, o, s, t = data.draw(slice_args())
    shape = inp.sizes if isinstance(inp, TensorDesc) else (3, 2)
    if 0 in shape:
        return
    x = data.draw(tensor_of(shape, device))
    got = check(dml.slice, x, o, s, t)
    if got[0] == "ok":
        assert np.array_equal(numpy_of(got[1]), ref.slice_(numpy_of(x), list(o), list(s), list(t)))


@SETTINGS
@given(st.data())
def test_slice_grad_new_route_equals_the_plan_route(device, data):
    grad, out, o, s, t = data.draw(slice1_args(grad=True))
    if not isinstance(grad, TensorDesc) or not isinstance(out, TensorDesc) or 0 in grad.sizes:
        return
    g = data.draw(tensor_of(grad.sizes, device))
    got = check(dml.slice_grad, g, list(out.sizes), o, s, t)
    if got[0] == "ok":
        assert np.array_equal(numpy_of(got[1]),
                              ref.slice_grad(numpy_of(g), list(out.sizes), list(o), list(s), list(t)))


@SETTINGS
@given(st.data())
def test_unfold_new_route_equals_the_plan_route(device, data):
    image, _, *_ = data.draw(window_args())
    if not isinstance(image, TensorDesc) or 0 in image.sizes:
        return
    d = len(image.sizes) - 2
    fields = data.draw(unfold_fields(d))
    assume(modest_unfold(image.sizes, fields))
    x = data.draw(tensor_of(image.sizes, device))
    got = check(dml.unfold, x, *fields)
    if got[0] == "ok":
        assert np.array_equal(numpy_of(got[1]), ref.unfold(numpy_of(x), *(per_axis(f, d) for f in fields)))


@SETTINGS
@given(st.data())
def test_fold_new_route_equals_the_plan_route(device, data):
    cols, image, *fields = data.draw(window_args(fold=True))
    if not isinstance(cols, TensorDesc) or not isinstance(image, TensorDesc) or 0 in cols.sizes:
        return
    assume(modest_unfold(image.sizes, fields))
    x = data.draw(tensor_of(cols.sizes, device))
    check(dml.fold, x, list(image.sizes[2:]), *fields)


def _cases(device):
    x = torch.arange(2 * 3 * 6 * 5, dtype=torch.float32, device=device).reshape(2, 3, 6, 5)
    return [
        (dml.slice1, x, [0, 0, 0, 0], [2, 3, 6, 5], [1, 1, -1, 1]),
        (dml.slice1, x.transpose(2, 3), [0, 0, 1, 0], [2, 3, 4, 6], [1, 1, 2, -1]),
        (dml.slice, x[:, :, ::2], [0, 1, 0, 1], [2, 2, 3, 2], [1, 1, 1, 2]),
        (dml.unfold, x, 3, 1, 1, 1, 1),
        (dml.unfold, x.half(), [2, 3], [2, 1], 1, 0, [1, 0]),
        (dml.slice_grad, x, [2, 3, 12, 5], [0, 0, 0, 0], [2, 3, 12, 5], [1, 1, 2, 1]),
        (dml.slice1, x, [0, 0, 1, 0], [2, 3, 6, 5], [1, 1, -1, 1]),             # outside the input: an error
        (dml.unfold, x, 7),                                                      # a window larger than the image
        (dml.fold, x.reshape(2, 9, 10), [2, 5], 3, 1, 1, 1, 1),
        (dml.fold, x.reshape(2, 9, 10).flip(1).to(torch.int16), [4, 5], 3, 1, 1, 1, [2, 1]),  # not the blocks
        (dml.slice1, x.to(torch.bool), [0, 0, 0, 0], [2, 3, 6, 5], [1, 1, -1, 1]),  # no DirectML type
    ]


@pytest.mark.parametrize("k", range(11))
def test_cases_after_configure_changes_equal_the_plan_route(device, k):
    """Settings the route reads (threads, grain, tiles, kernels, call cache, node library)."""
    fn, x, *args = _cases(device)[k]
    configs = [{}, {"threads": 3, "thread_grain_bytes": 1, "unfold_tile_stride": 0, "unfold_tile_columns": 3},
               {"cpu_kernels": "numpy"}, {"call_cache": False}, {"torch_node": "off"}]
    for conf in configs:
        with dml.configure(**conf):
            check_ok = check if conf.get("call_cache", True) and conf.get("torch_node") != "off" else None
            if check_ok is not None and not conf.get("cpu_kernels"):
                check(fn, x, *args)
            else:
                want = plan_route(fn, x, *args)
                assert _norm(outcome(fn, x, *args)) == want
                assert _norm(outcome(fn, x, *args)) == want


def test_the_route_runs_where_it_should(device):
    """Can fail: a route that always declined would pass the equalities above."""
    from opendml.arrays import front
    ran = []
    real = front._move_new

    def spy(*a):
        r = real(*a)
        if type(r) is not str:              # (a CUDA kernel's name to compile: called again)
            ran.append(r is not None)
        return r
    front._move_new = spy
    try:
        x = torch.randn(1, 3, 7, 9, device=device)
        y = dml.slice1(x, [0, 0, 0, 0], [1, 3, 7, 9], [1, 1, -1, 1])
        assert torch.equal(y, x.flip(2)) and ran[-1]
        u = dml.unfold(x, 3, 1, 1, 1, 1)
        assert torch.equal(u, torch.nn.functional.unfold(x, 3, 1, 1, 1)) and ran[-1]
        n = len(ran)
        dml.slice1(x, [0, 0, 0, 0], [1, 3, 7, 9], [1, 1, -1, 1])          # served: the route is not entered
        assert len(ran) == n
        p = torch.nn.Parameter(x.clone())                                   # not a plain torch.Tensor: declined
        with torch.no_grad():
            assert torch.equal(dml.slice1(p, [0, 0, 0, 0], [1, 3, 7, 9], [1, 1, -1, 1]), x.flip(2))
        assert ran[-1] is False
        neg = torch.randn(1, 2, 5, 4, device=device).neg()._neg_view() if hasattr(torch.Tensor, "_neg_view") else None
        if neg is not None:
            assert torch.equal(dml.slice1(neg, [0, 0, 0, 0], [1, 2, 5, 4], [1, 1, -1, 1]), neg.resolve_neg().flip(2))
    finally:
        front._move_new = real


def test_new_shapes_from_threads_equal_the_plan_route(device):
    shapes = [(1, 1 + i % 5, 3 + i % 7, 4 + i // 7) for i in range(60)]
    xs = [torch.randn(s, device=device) for s in shapes]
    want = [plan_route(dml.slice1, x, [0, 0, 0, 0], list(x.shape), [1, 1, -1, 1]) for x in xs]
    wantu = [plan_route(dml.unfold, x, 2, 1, 1, 1, 0) for x in xs]
    calls.clear()

    def work(k):
        for i in range(k, len(xs), 4):
            x = xs[i]
            assert _norm(outcome(dml.slice1, x, [0, 0, 0, 0], list(x.shape), [1, 1, -1, 1])) == want[i]
            assert _norm(outcome(dml.unfold, x, 2, 1, 1, 1, 0)) == wantu[i]
    run_in_threads(work)


@pytest.mark.cuda
@pytest.mark.skipif(not _torch_cuda(), reason="CUDA (PyTorch and opendml's backend) is not available")
def test_cuda_kernel_compiled_on_a_miss_and_served_from_a_fresh_thread():
    from opendml.runtime.cuda import backend as cb
    cb._NEW_KERNELS.clear()
    calls.clear()
    x = torch.randn(2, 3, 10, 7, device="cuda")
    y = dml.slice1(x, [0, 0, 0, 0], [2, 3, 10, 7], [1, 1, -1, -1])
    assert torch.equal(y, x.flip(2, 3))
    assert cb._NEW_KERNELS.get(x.get_device()), "the missing kernel was not compiled and listed"
    got = []
    t = threading.Thread(target=lambda: got.append(dml.slice1(x, [0, 0, 0, 0], [2, 3, 10, 7], [1, 1, -1, -1])))
    t.start()
    t.join()
    torch.cuda.synchronize()
    assert torch.equal(got[0], y)


@pytest.mark.cuda
@pytest.mark.skipif(not _torch_cuda() or torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_cuda_tensor_of_another_device_than_the_current_one():
    x = torch.randn(1, 2, 6, 5, device="cuda:1")
    with torch.cuda.device(0):
        y = dml.slice1(x, [0, 0, 0, 0], [1, 2, 6, 5], [1, 1, -1, 1])
    assert y.device == x.device and torch.equal(y, x.flip(2))


def test_a_tensor_changed_by_a_finalizer_during_the_allocation_is_not_read():
    # call_cache_move_new keys x and reads it through a NumPy view of its
    # storage, then allocates the output: the allocation may run a garbage
    # collection whose finalizer changes x (here x.set_(): x then lets go of
    # its 1 MiB storage, mapped by malloc alone). The view holds that storage,
    # so the kernel reads memory that is still x's as the call was made (all
    # ones), never released memory; or C leaves the call to the Python route.
    import os
    import subprocess
    import sys
    import textwrap
    code = textwrap.dedent("""
        import gc, sys
        import numpy as np, torch
        from opendml.arrays import front
        from opendml.runtime import calls
        import opendml as dml
        from opendml.runtime import get_backend
        dml.slice1(torch.ones(1, 1, 2, 2), [0, 0, 0, 0], [1, 1, 2, 2], [1, 1, 1, 1])   # (loads the node library)
        b = get_backend("cpu")
        cpu = (b.threads, b.grain, b.tile_stride, b.tile_columns, 1 << 40)
        op = calls.OPS["slice1"]
        lowering = front._LOWER[op]
        args = ([0, 0, 0, 0], [1, 1, 512, 512], [1, 1, 1, 1], None)
        inside = 0
        for round in range(40):
            x = torch.ones(1, 1, 512, 512)
            class Bomb:
                def __del__(self, x=x):
                    x.set_(torch.empty(0))
            gc.disable()
            a, b2 = Bomb(), Bomb()
            a.other, b2.other = b2, a
            del a, b2, Bomb
            keep = [[] for _ in range(round % 12)]
            since = calls.generation()
            gc.set_threshold(1)
            gc.enable()
            n = x.numel()
            got = calls.move_new(op, lowering, x, args, since, cpu)
            gc.set_threshold(700)
            if x.numel() == 0 and n:
                inside += 1
                assert got is None or (tuple(got.shape) == (1, 1, 512, 512) and bool(torch.all(got == 1))), got
            else:
                assert got is not None and bool(torch.all(got == 1)), got
            gc.collect()
        assert inside > 0 or sys.version_info >= (3, 12), "no collection changed x during the call"
        print("ok", inside)
    """)
    env = dict(os.environ, OPENDML_TORCH_NODE="wait")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0 and out.stdout.startswith("ok"), (out.returncode, out.stdout[-2000:],
                                                                  out.stderr[-4000:])
