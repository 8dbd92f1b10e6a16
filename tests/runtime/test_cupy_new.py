"""Issue 33 (a never-seen shape on CuPy): SLICE, SLICE1, UNFOLD, FOLD and
SLICE_GRAD on an exact ``cupy.ndarray`` of a new shape take the C new-shape
route (``call_cache_move_new``, which reads the array as the call cache's
key does, lowers it in C, allocates with ``cupy.empty``, launches on CuPy's
current stream and records the call), not the Python route's descriptions.

Without a GPU (a stand-in array type registered as CuPy's): the launch C
chooses for a CuPy array is the one the Python route's backend would make
(``launch_spec``) over random calls, layouts, element sizes and pointer
alignments, and C declines (None, nothing run) whatever the Python route must
take: misaligned data or output, another current device, strides that are
not whole elements, a byte-swapped dtype, a subclass, a failed allocation,
an array changed while its output was allocated.

On a GPU (``cuda``): the same bytes or the same error as the Python route
over random shapes and layouts of the five, the call recorded so that a
repeat is served, misaligned arrays refused alike, after ``configure()``,
from threads, and in fresh processes whichever of CuPy and PyTorch was
imported first (CuPy alone included)."""
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import opendml as dml
from opendml.arrays import planner
from opendml.model import TensorDesc
from opendml.runtime import calls
from opendml.runtime.cpu import backend as cpu_backend
from opendml.runtime.cuda import tuned as ct
from tests.conftest import cuda_available, native_available, run_in_threads
from tests.runtime.test_cuda_move_cache import FakeArray, fake  # noqa: F401 - a stand-in for CuPy, registered
from tests.runtime.test_cuda_spec import ALIGN, DTYPES, INTS, call_of, element_layout, plain_plan, plan_of, zeros
from tests.test_newshape_fastpaths import modest_unfold, outcome, slice1_args, slice_args, window_args
from tests.test_newshape_plain import unfold_fields
from ..conftest import n_examples

pytestmark = pytest.mark.skipif(not native_available(), reason="the compiled extension is not built")

FNS = {"slice1": dml.slice1, "slice": dml.slice, "slice_grad": dml.slice_grad, "unfold": dml.unfold,
       "fold": dml.fold}


@st.composite
def a_call(draw, names=tuple(FNS)):
    """(function, input shape, arguments) of one of the five, valid or not; shape None where the drawn
    input is not a tensor of positive sizes."""
    name = draw(st.sampled_from(names))
    if name in ("slice1", "slice_grad"):
        inp, out, o, s, t = draw(slice1_args(grad=name == "slice_grad"))
        if name == "slice_grad":
            args = (list(out.sizes) if isinstance(out, TensorDesc) else [1], o, s, t)
        else:
            args = (o, s, t, list(out.sizes) if isinstance(out, TensorDesc) else None)
    elif name == "slice":
        inp, _, o, s, t = draw(slice_args())
        args = (o, s, t)
    elif name == "unfold":
        inp, *_ = draw(window_args())
        args = tuple(draw(unfold_fields(len(inp.sizes) - 2))) if isinstance(inp, TensorDesc) else ()
        if isinstance(inp, TensorDesc) and not modest_unfold(inp.sizes, args):
            inp = None
    else:
        inp, image, *fields = draw(window_args(fold=True))
        args = (list(image.sizes[2:]) if isinstance(image, TensorDesc) else [2], *fields)
        if isinstance(inp, TensorDesc) and isinstance(image, TensorDesc) and not modest_unfold(image.sizes, fields):
            inp = None
    shape = tuple(inp.sizes) if isinstance(inp, TensorDesc) and 0 not in inp.sizes else None
    return FNS[name], shape, args


# -- without a GPU: a stand-in for cupy.ndarray ------------------------------------------------------------

MISSING = {0: {}}                     # compiled kernels by device: none yet, every name comes back


def c_route(fn, x, *args, kernels=MISSING):
    """What the one C new-shape route (call_cache_move_new, the operator's lowering number) answers for
    fn(x, *args) on the stand-in."""
    from opendml.arrays import front
    from opendml.runtime import get_backend
    from opendml.runtime.cuda import steps
    native = x.dtype.newbyteorder("=")
    call = call_of(fn, zeros(x.shape, native), *args)
    op = calls.OPS[call.name]
    return calls.move_new(op, front._LOWER[op], x, call.args, calls.generation(), get_backend("cpu").plain_conf,
                          lambda: (kernels, steps.c_settings()))


@settings(max_examples=n_examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                                                   HealthCheck.function_scoped_fixture])
@given(a_call(), st.data(), st.sampled_from([1, 2, 4, 8]), st.booleans(), ALIGN, ALIGN)
def test_the_launch_chosen_for_a_cupy_array_is_the_python_routes(fake, drawn, data, es, floating, src, dst):
    fn, shape, args = drawn
    assume(shape is not None)
    src, dst = src - src % es, dst - dst % es          # (aligned to the element: misaligned data is declined)
    dtype = np.dtype((DTYPES if floating and es > 1 else INTS)[es])
    call = call_of(fn, zeros(shape, dtype), *args)
    got = None if call is None else plain_plan(call, shape)
    assume(got is not None)
    strides = data.draw(element_layout(shape))
    layout = planner.array_layout(shape, tuple(s * es for s in strides), es)
    plan = plan_of(call, dtype, shape, layout)
    want = ct.launch_spec(plan.kernel_plan(), src, layout.span, dst)[0]
    x = FakeArray(shape, dtype, src + layout.origin * es, tuple(s * es for s in strides))
    fake.next, fake.device = dst, 0
    got = c_route(fn, x, *args)
    compiled = getattr(cpu_backend._load_native(), call.name + "_lowering")   # the C copy the route runs
    assert got == want or (got is None and compiled(shape, *call.args) is None)


class Changing:
    """A lock whose taking (by the stand-in's empty) changes x's shape, as a finalizer run by the allocation
    could."""

    def __init__(self, x):
        self.x = x

    def __enter__(self):
        self.x.shape = (1, 3, 5, 5)

    def __exit__(self, *exc):
        return False


def test_the_route_declines_what_the_python_route_must_take(fake):
    x4, base = (1, 3, 5, 6), 1 << 20
    args = ([0, 0, 0, 0], list(x4), [1, 1, -1, 1])

    def answer(x=None, **kw):
        fake.next = 1 << 30
        return c_route(dml.slice1, FakeArray(x4, np.float32, base) if x is None else x, *args, **kw)

    assert answer().startswith("strided_copy<")                  # the route runs (a kernel name to compile)
    assert answer(FakeArray(x4, np.float32, base + 2)) is None            # misaligned input
    assert answer(FakeArray(x4, np.float32, base + 4)).startswith("strided_copy<")
    assert answer(kernels=None) is None                                   # launches not made natively
    assert answer(FakeArray(x4, np.float32, base, (360, 120, 24, 2))) is None   # not whole elements
    assert answer(FakeArray(x4, np.dtype(">f4"), base)) is None           # byte-swapped
    assert answer(FakeArray(x4, np.float32, base, (360, 120, 24))) is None     # fewer strides than sizes
    assert answer(type("Sub", (FakeArray,), {})(x4, np.float32, base)) is None   # not the exact type
    x = FakeArray(x4, np.float32, base)
    x.data = None
    assert answer(x) is None
    fake.device = 1                                                       # another current device
    assert answer() is None
    assert answer(FakeArray(x4, np.float32, base, device=1)).startswith("strided_copy<")
    fake.device, fake.misalign = 0, 2                                     # a misaligned output
    assert answer() is None
    fake.misalign, fake.fail = 0, MemoryError("out of device memory")    # the Python route raises it
    assert answer() is None
    fake.fail = None
    from tests.runtime.test_cuda_move_cache import _driver_loads
    if _driver_loads():
        return                          # (below, a stand-in's function would be launched were the check missing)
    name = answer()                     # an input changed while the output is allocated: nothing launched
    x = FakeArray(x4, np.float32, base)
    fake.lock = Changing(x)
    assert answer(x, kernels={0: {name: 0x5000}}) is None and x.shape == (1, 3, 5, 5)


def test_the_route_never_reads_a_released_kernel_table(fake):
    """The device's kernel dict replaced by a copy while the output is allocated (the old one released): C
    finds the kernel (in the dict it holds or in the new one), never looks in another object that took the old
    one's memory (which lacks the name)."""
    from tests.runtime.test_cuda_move_cache import _driver_loads
    if _driver_loads():
        pytest.skip("a CUDA driver loads here: the stand-in's functions would be launched")
    x4, args = (1, 3, 5, 6), ([0, 0, 0, 0], [1, 3, 5, 6], [1, 1, -1, 1])
    fake.next = 1 << 30
    name = c_route(dml.slice1, FakeArray(x4, np.float32, 1 << 20), *args)
    assert name.startswith("strided_copy<")
    kernels = {0: {name: 0x5000, **{f"unused{i}": 0x6000 for i in range(8)}}}
    kept = []

    def replace():
        kernels[0] = dict(kernels[0])                # the old dict released ...
        kept.append({"other": 0})                    # ... and its memory likely taken by a new dict

    class OnAllocation:
        def __enter__(self):
            if not kept:
                replace()

        def __exit__(self, *exc):
            return False

    fake.next, fake.lock = 1 << 30, OnAllocation()
    # the launch C makes here fails (no driver): the retry hook takes it over and raises (here, for want of
    # CuPy); a launch, not the kernel's name: C found the kernel
    with pytest.raises(dml.UnsupportedError, match="needs CuPy"):
        c_route(dml.slice1, FakeArray(x4, np.float32, 1 << 20), *args, kernels=kernels)
    assert kept


@pytest.mark.parametrize("name", ["slice1", "pad"])
def test_an_argument_changed_while_the_output_is_allocated_answers_the_call_as_made(fake, name):
    """A finalizer run by the output's allocation changes a list the call was given: the arguments were read
    once (the key and the lowering, before the allocation), so the call is launched and recorded for the
    arguments as they were when it was made, and only a later call with those arguments is served by it."""
    from tests.runtime.test_cuda_move_cache import _driver_loads
    if _driver_loads():
        pytest.skip("a CUDA driver loads here: the stand-in's functions would be launched")
    from opendml.arrays import front
    from opendml.runtime import get_backend
    from opendml.runtime.cuda import steps
    x4 = (1, 3, 5, 6)
    first = [0, 0, 0, 0] if name == "slice1" else [0, 0, 1, 2]
    made = (list(first), list(x4), [1, 1, -1, 1], None) if name == "slice1" else (list(first), [0, 0, 2, 1],
                                                                                    "constant", 0.5)
    args = (list(made[0]), *made[1:])
    op = calls.OPS[name]
    log, kernels = [], {0: {}}

    def new():
        fake.next = 1 << 30
        return calls.move_new(op, front._LOWER[op], FakeArray(x4, np.float32, 1 << 20), args, calls.generation(),
                              get_backend("cpu").plain_conf, lambda: (kernels, steps.c_settings()))

    class Changing:
        def __enter__(self):
            args[0][-1] = 3                    # the list the call was given, changed by "a finalizer"

        def __exit__(self, *exc):
            return False

    calls.register_cuda_retry(lambda *a: log.append(a))    # (no driver: each launch goes to the retry hook)
    try:
        calls.clear()
        for _ in range(8):
            out = new()
            if type(out) is not str:
                break
            kernels[0][out] = 0x5000 + len(kernels[0])
        calls.clear()                                          # (its kernels compiled: now a never-seen shape)
        log.clear()
        fake.lock = Changing()
        out = new()
        assert type(out) is FakeArray and log                 # launched
        shape = (1, 3, 5, 6) if name == "slice1" else (1, 3, 8, 9)
        assert out.shape == shape                              # the call as made
        before = calls.info()["hits"]
        fake.lock = __import__("threading").Lock()
        assert calls.move(op, FakeArray(x4, np.float32, 1 << 21), *made) is not None   # recorded as made
        assert calls.info()["hits"] == before + 1
        assert calls.move(op, FakeArray(x4, np.float32, 1 << 21), *args) is None       # not as changed
    finally:
        calls.register_cuda_retry(calls._relaunch)


# -- on a GPU --------------------------------------------------------------------------------------------

def _cupy_ok() -> bool:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return False
    return cuda_available()


needs_cupy = pytest.mark.skipif(not _cupy_ok(), reason="CUDA (CuPy) is not available")
GPU = settings(max_examples=n_examples(10), deadline=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                      HealthCheck.function_scoped_fixture])


@pytest.fixture
def spy():
    """The C route's answers, by call (through the front's call of call_cache_move_new)."""
    from opendml.arrays import front
    answers, real = [], front._move_new

    def new(*a):
        out = real(*a)
        answers.append(out)
        return out
    front._move_new = new
    try:
        yield answers
    finally:
        front._move_new = real


def _norm(r):
    if r[0] == "ok":
        y = r[1]
        return ("ok", y.dtype, y.shape, y.device.id, y.flags.c_contiguous, y.get().tobytes())
    return r


def _repeat(fn, x, *args):
    """(outcome, outcome of a repeat, whether the repeat was served)."""
    first = _norm(outcome(fn, x, *args))
    hits = calls.info()["hits"]
    again = _norm(outcome(fn, x, *args))
    return first, again, calls.info()["hits"] > hits


def python_route(fn, x, *args):
    from opendml.arrays import front
    real = front._new
    front._new = lambda *a: None
    try:
        calls.clear()
        return _repeat(fn, x, *args)
    finally:
        front._new = real
        calls.clear()


def check(spy, fn, x, *args):
    """The C route (caches cleared) equals the Python route: the same outcome, and a repeat served wherever
    the Python route's record serves one; returns whether C ran the call."""
    want = python_route(fn, x, *args)
    del spy[:]
    got = _repeat(fn, x, *args)
    assert got == want
    import cupy
    return any(type(a) is cupy.ndarray for a in spy)


@st.composite
def cupy_of(draw, shape):
    """A CuPy array of ``shape`` in one of several layouts, values 1..251."""
    import cupy
    n = math.prod(shape)
    assume(n <= 1 << 16)
    dtype = draw(st.sampled_from([np.float32, np.float32, np.float16, np.int8, np.int64]))
    base = cupy.asarray((np.arange(n) % 251 + 1).astype(dtype).reshape(shape))
    kind = draw(st.sampled_from(["packed", "packed", "permuted", "strided", "offset", "reversed", "broadcast"]))
    if kind == "permuted" and len(shape) > 1:
        order = draw(st.permutations(range(len(shape))))
        return cupy.ascontiguousarray(base.transpose(order)).transpose([order.index(i) for i in range(len(shape))])
    if kind == "strided":
        big = cupy.zeros(tuple(2 * s for s in shape), dtype)
        view = big[tuple(slice(None, None, 2) for _ in shape)]
        view[...] = base
        return view
    if kind == "offset":
        flat = cupy.zeros(n + 3, dtype)
        flat[3:] = base.ravel()
        return flat[3:].reshape(shape)
    if kind == "reversed":
        return cupy.ascontiguousarray(base[..., ::-1])[..., ::-1]
    if kind == "broadcast" and shape[0] > 1:
        return cupy.broadcast_to(base[:1], shape)
    return base


@pytest.mark.cuda
@needs_cupy
@pytest.mark.parametrize("name", list(FNS))
@GPU
@given(data=st.data())
def test_new_cupy_shapes_equal_the_python_route(name, spy, data):
    fn, shape, args = data.draw(a_call((name,)))
    assume(shape is not None)
    check(spy, fn, data.draw(cupy_of(shape)), *args)


def _cases():
    import cupy
    x = cupy.arange(2 * 3 * 6 * 5, dtype=cupy.float32).reshape(2, 3, 6, 5)
    return [
        (dml.slice1, x, [0, 0, 0, 0], [2, 3, 6, 5], [1, 1, -1, 1]),
        (dml.slice, x[:, :, ::2], [0, 1, 0, 1], [2, 2, 3, 2], [1, 1, 1, 2]),
        (dml.unfold, x.astype(cupy.float16), [2, 3], [2, 1], 1, 0, [1, 0]),
        (dml.fold, x.reshape(2, 9, 10)[:, ::-1], [2, 5], 3, 1, 1, 1, 1),
        (dml.slice_grad, x, [2, 3, 12, 5], [0, 0, 0, 0], [2, 3, 12, 5], [1, 1, 2, 1]),
        (dml.slice1, x, [0, 0, 1, 0], [2, 3, 6, 5], [1, 1, -1, 1]),             # outside the input: an error
    ]


@pytest.mark.cuda
@needs_cupy
@pytest.mark.parametrize("k", range(6))
@pytest.mark.parametrize("conf", [{}, {"call_cache": False}, {"threads": 3, "cpu_kernels": "numpy"},
                                  {"torch_node": "off"}])
def test_cases_after_configure_equal_the_python_route(k, conf, spy):
    """Can fail: every valid case takes the C route (a route that always declined would pass the rest)."""
    fn, x, *args = _cases()[k]
    with dml.configure(**conf):
        took = check(spy, fn, x, *args)
    assert took == (k < 5)


@pytest.mark.cuda
@needs_cupy
def test_misaligned_arrays_are_refused_alike(spy):
    import cupy
    raw = cupy.zeros(4 * 60 + 16, cupy.uint8)
    x = cupy.ndarray((1, 3, 4, 5), cupy.float32, raw.data + 2)           # 2 bytes past a 4-byte boundary
    args = ([0, 0, 0, 0], [1, 3, 4, 5], [1, 1, -1, 1])
    want = python_route(dml.slice1, x, *args)
    del spy[:]
    got = _repeat(dml.slice1, x, *args)
    assert got == want and want[0][0] == "error" and "not a multiple of its element size" in want[0][2]
    assert spy and all(a is None for a in spy)


@pytest.mark.cuda
@needs_cupy
def test_the_python_route_when_launches_are_not_native(spy, monkeypatch):
    from opendml.runtime.cuda import launch
    fn, x, *args = _cases()[0]
    monkeypatch.setattr(launch, "LAUNCH_VIA", "cupy")
    assert check(spy, fn, x, *args) is False


@pytest.mark.cuda
@needs_cupy
def test_new_cupy_shapes_from_threads_equal_the_python_route(spy):
    import cupy
    xs = [cupy.random.standard_normal((1, 1 + i % 5, 3 + i % 7, 4 + i // 7), dtype=np.float32) for i in range(24)]
    slice1 = [python_route(dml.slice1, x, [0, 0, 0, 0], list(x.shape), [1, 1, -1, 1])[0] for x in xs]
    unfold = [python_route(dml.unfold, x, 2, 1, 1, 1, 0)[0] for x in xs]
    del spy[:]

    def work(k):
        for i in range(k, len(xs), 4):
            x = xs[i]
            assert _norm(outcome(dml.slice1, x, [0, 0, 0, 0], list(x.shape), [1, 1, -1, 1])) == slice1[i]
            assert _norm(outcome(dml.unfold, x, 2, 1, 1, 1, 0)) == unfold[i]
    run_in_threads(work)
    assert sum(type(a) is cupy.ndarray for a in spy) >= len(xs)


SCRIPT = textwrap.dedent("""
    import sys
    order = sys.argv[1]
    if order == "torch-first":
        import torch  # noqa: F401
    import cupy
    if order == "cupy-first":
        import torch  # noqa: F401
    import numpy as np
    import opendml as dml
    from opendml.arrays import front
    from opendml.runtime import calls
    assert ("torch" in sys.modules) == (order != "cupy-alone"), order
    counts = {"c": 0, "python": 0}
    real = front._move_new

    def new(*a):                      # (op, lowering, x, ...): the NumPy peers' calls take this route too
        out = real(*a)
        if type(out) is not str and type(a[2]) is cupy.ndarray:
            counts["c" if type(out) is cupy.ndarray else "python"] += 1
        return out
    front._move_new = new
    rng = np.random.default_rng(3)
    shapes = list(dict.fromkeys((1, int(rng.integers(1, 5)), int(h), int(w))
                                for h, w in rng.integers(8, 40, size=(16, 2))))[:8]
    for s in shapes:
        x = cupy.random.standard_normal(s, dtype=np.float32)
        h = x.get()
        assert (dml.slice1(x, [0, 0, 0, 0], list(s), [1, 1, -1, 1]).get() == h[:, :, ::-1]).all()
        assert (dml.slice(x, [0, 0, 0, 0], [1, s[1], s[2], (s[3] + 1) // 2], [1, 1, 1, 2]).get()
                == h[..., ::2]).all()
        assert (dml.unfold(x, 3, 1, 1, 1, 1).get() == dml.unfold(h, 3, 1, 1, 1, 1)).all()
        cols = cupy.random.standard_normal((1, s[1] * 9, s[2] * s[3]), dtype=np.float32)
        assert (dml.fold(cols, list(s[2:]), 3, 1, 1, 1, 1).get() == dml.fold(cols.get(), list(s[2:]), 3, 1, 1, 1,
                                                                              1)).all()
        g = dml.slice_grad(x, [1, s[1], 2 * s[2], s[3]], [0, 0, 0, 0], [1, s[1], 2 * s[2], s[3]], [1, 1, 2, 1])
        assert (g.get()[:, :, ::2] == h).all() and not g.get()[:, :, 1::2].any()
    assert counts == {"c": 5 * len(shapes), "python": 0}, counts
    hits = calls.info()["hits"]
    x = cupy.random.standard_normal(shapes[0], dtype=np.float32)
    assert (dml.slice1(x, [0, 0, 0, 0], list(shapes[0]), [1, 1, -1, 1]).get() == x.get()[:, :, ::-1]).all()
    assert calls.info()["hits"] == hits + 1 and counts["c"] == 5 * len(shapes), (calls.info(), counts)
    print("ok", counts)
""")


@pytest.mark.cuda
@needs_cupy
@pytest.mark.parametrize("order", ["cupy-alone", "torch-first", "cupy-first"])
def test_the_route_whichever_framework_was_imported_first(order):
    if order != "cupy-alone":
        pytest.importorskip("torch")
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([src, os.path.dirname(src)] + [p for p in [env.get("PYTHONPATH")] if p])
    r = subprocess.run([sys.executable, "-c", SCRIPT, order], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr
