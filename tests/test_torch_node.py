"""The C++ autograd node (``arrays/torch/node.cpp``) against the Python
``autograd.Function`` route: same values, gradients, second derivatives,
errors and ``grad_fn`` names, under threads and after ``configure``; the
setting's validation (``torch_node`` / ``OPENDML_TORCH_NODE``)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import types

import pytest

torch = pytest.importorskip("torch")

import opendml as dml  # noqa: E402
from opendml.arrays.torch import node as torch_node  # noqa: E402
from opendml.model.errors import ValidationError  # noqa: E402

from .test_torch_autodiff import CASES  # noqa: E402

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


@pytest.fixture(scope="module")
def node():
    """The node, built (or loaded from PyTorch's extension cache) for this PyTorch."""
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        pytest.skip("no C++ compiler here: the node cannot be built (the Python route serves)")
    with dml.configure(torch_node="wait"):
        assert torch_node.wait(), torch_node.status()
    assert torch_node.status().startswith("built"), torch_node.status()
    return torch_node.get()


def _device(device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("CUDA is not available here")
    return device


def _run(op, x, g, mode, create_graph=False):
    """(output, its grad_fn type name, whether a C++ node recorded it, gradient)."""
    with dml.configure(torch_node=mode):
        y = op(x)
        (gx,) = torch.autograd.grad(y, x, g, create_graph=create_graph)
    return y, type(y.grad_fn).__name__, not isinstance(y.grad_fn, torch.autograd.function.BackwardCFunction), gx


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,op,ref", CASES, ids=[c[0] for c in CASES])
def test_node_route_equals_python_route(node, name, op, ref, device):
    x = torch.randn(2, 3, 5, 6, dtype=torch.float64, device=_device(device), requires_grad=True)
    g = torch.randn_like(op(x.detach()))
    y1, type1, native1, g1 = _run(op, x, g, "wait")
    y2, type2, native2, g2 = _run(op, x, g, "off")
    assert native1 and not native2                   # each route is the one asked for
    assert type1 == type2 and type1.startswith("opendml_") and type1.endswith("Backward")
    assert torch.equal(y1, y2) and torch.equal(g1, g2)
    assert torch.equal(y1, ref(x.detach()).to(y1.dtype)) or torch.allclose(y1, ref(x.detach()))


@pytest.mark.parametrize("name,op,ref", CASES, ids=[c[0] for c in CASES])
def test_node_second_order_and_gradcheck(node, name, op, ref):
    x = torch.randn(2, 3, 5, 6, dtype=torch.float64, requires_grad=True)
    with dml.configure(torch_node="wait"):
        assert torch.autograd.gradcheck(op, (x,))
        assert torch.autograd.gradgradcheck(op, (x,))
        g = torch.randn_like(op(x.detach()), requires_grad=True)
        (gx,) = torch.autograd.grad(op(x), x, g, create_graph=True)
        assert not isinstance(gx.grad_fn, torch.autograd.function.BackwardCFunction)
        (gg,) = torch.autograd.grad(gx.sum(), g)
    with dml.configure(torch_node="off"):
        (gx2,) = torch.autograd.grad(op(x), x, g, create_graph=True)
        (gg2,) = torch.autograd.grad(gx2.sum(), g)
    assert torch.equal(gx, gx2) and torch.equal(gg, gg2)


def test_node_graph_behaves_like_a_pytorch_node(node):
    x = torch.randn(1, 2, 6, 6, requires_grad=True)
    with dml.configure(torch_node="wait"):
        y = dml.unfold(x, 3, 1, 1, 1, 1)
        assert y.grad_fn.name() == "opendml_unfoldBackward"
        assert y.grad_fn.next_functions[0][0] is x.grad_fn or "AccumulateGrad" in type(
            y.grad_fn.next_functions[0][0]).__name__
        seen = []
        y.register_hook(lambda g: seen.append(g.shape))
        y.sum().backward()
        first = x.grad.clone()
        y.sum().backward()                          # nothing saved: a second backward works, as for flip
        assert seen == [y.shape, y.shape] and torch.equal(x.grad, 2 * first)
        with pytest.raises(RuntimeError, match="shape"):
            torch.autograd.grad(dml.unfold(x, 3, 1, 1, 1, 1), x, torch.ones(3))
        z = dml.unfold(x * 2, 3, 1, 1, 1, 1)        # a non-leaf input: the chain goes on through MulBackward
        (gz,) = torch.autograd.grad(z.sum(), x)
    with dml.configure(torch_node="off"):
        (gz2,) = torch.autograd.grad(dml.unfold(x * 2, 3, 1, 1, 1, 1).sum(), x)
    assert torch.equal(gz, gz2)


def test_node_errors_equal_python_route_errors(node):
    x = torch.randn(1, 2, 6, 6, requires_grad=True)
    for mode in ("wait", "off"):
        with dml.configure(torch_node=mode), pytest.raises(ValidationError) as e:
            dml.slice1(x, [0, 0, 0, 0], [1, 2, 7, 6], [1, 1, 1, 1])
        if mode == "wait":
            first = str(e.value)
        else:
            assert str(e.value) == first


def test_node_no_grad_and_forward_ad_keep_their_routes(node):
    import torch.autograd.forward_ad as fwAD
    x = torch.randn(1, 2, 6, 6, requires_grad=True)
    with dml.configure(torch_node="wait"):
        with torch.no_grad():
            assert dml.unfold(x, 2).grad_fn is None
        with fwAD.dual_level():
            d = fwAD.make_dual(x.detach(), torch.ones_like(x))
            y = dml.unfold(d, 2)
            assert isinstance(y.grad_fn, torch.autograd.function.BackwardCFunction) or y.grad_fn is None
            assert torch.equal(fwAD.unpack_dual(y).tangent, dml.unfold(torch.ones_like(x), 2))


def test_node_under_threads(node):
    xs = [torch.randn(2, 3, 8 + i, 7, requires_grad=True) for i in range(4)]
    want = []
    with dml.configure(torch_node="off"):
        for x in xs:
            want.append(torch.autograd.grad(dml.slice1(x, [0, 0, 0, 0], list(x.shape), [1, -1, 1, -1]).sum(), x)[0])
    errors = []

    def work(k):
        try:
            for _ in range(50):
                x = xs[k % 4]
                (got,) = torch.autograd.grad(dml.slice1(x, [0, 0, 0, 0], list(x.shape), [1, -1, 1, -1]).sum(), x)
                assert torch.equal(got, want[k % 4])
        except Exception as e:                       # noqa: BLE001 - reported below
            errors.append(e)
    with dml.configure(torch_node="wait"):
        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors


def test_setting_is_validated():
    with pytest.raises(ValidationError, match="torch_node must be one of auto, wait, off; got 'sometimes'"):
        dml.configure(torch_node="sometimes")
    with pytest.raises(ValidationError, match="torch_node"):
        dml.configure(torch_node=1)
    with dml.configure(torch_node="OFF"):
        assert dml.config().torch_node == "off"
        assert torch_node.get() is None and torch_node.status().startswith("off")
    env = dict(os.environ, OPENDML_TORCH_NODE="maybe")
    out = subprocess.run([sys.executable, "-c", "import opendml; opendml.config()"], env=env,
                         capture_output=True, text=True)
    assert out.returncode != 0 and "OPENDML_TORCH_NODE must be one of auto, wait, off; got 'maybe'" in out.stderr
    out = subprocess.run([sys.executable, "-m", "opendml.cli", "info"], env=env, capture_output=True, text=True)
    assert out.returncode == 2 and "OPENDML_TORCH_NODE" in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("timeout, error, message", [
    ("10", TypeError, r"^wait_for_node: timeout must be a number of seconds or None; got str$"),
    (True, TypeError, r"^wait_for_node: timeout must be a number of seconds or None; got bool$"),
    ([1], TypeError, r"^wait_for_node: timeout must be a number of seconds or None; got list$"),
    (-1, ValidationError, r"^wait_for_node: timeout must be >= 0 seconds or None; got -1.0$"),
    (float("nan"), ValidationError, r"^wait_for_node: timeout must be >= 0 seconds or None; got nan$"),
])
def test_wait_for_node_names_a_bad_timeout(timeout, error, message):
    """A timeout that is no number of seconds is refused by name (before, while the node was not yet loaded, a string
    reached ``Thread.join``: "'>' not supported between instances of 'int' and 'str'"; once loaded it passed)."""
    import opendml.torch as dmlt
    with pytest.raises(error, match=message):
        dmlt.wait_for_node(timeout)


def test_wait_for_node_takes_any_length_of_wait(monkeypatch):
    """A timeout past ``threading.TIMEOUT_MAX`` (``10**400``, ``1e300``, inf) waits without a limit; ``Thread.join``
    raised OverflowError ("timestamp out of range for platform time_t") for it while the node was not loaded."""
    import opendml.torch as dmlt
    joined = []

    class Done:
        def join(self, timeout=None):
            joined.append(timeout)

    monkeypatch.setitem(torch_node._state, "module", None)
    monkeypatch.setattr(torch_node, "_start", lambda timeout: Done())
    with dml.configure(torch_node="auto"):
        for timeout in (10 ** 400, 1e300, float("inf"), 2, None):
            assert dmlt.wait_for_node(timeout) is False
    assert joined == [None, None, None, 2.0, None]


@pytest.fixture
def fresh_state(tmp_path, monkeypatch):
    """The loader's state, emptied, over a private cache folder; restored after."""
    monkeypatch.setenv("OPENDML_CACHE_DIR", str(tmp_path))
    saved = dict(torch_node._state)
    torch_node._state.update(module=None, status="not built", thread=None)
    yield tmp_path
    torch_node._state.clear()
    torch_node._state.update(saved)


def test_a_failed_build_is_said_and_the_python_route_serves(fresh_state):
    path = torch_node.library_path()
    assert str(path).startswith(str(fresh_state))
    path.parent.mkdir(parents=True)
    pathlib_failed = path.with_name(path.name + ".failed")
    pathlib_failed.write_text("CompileError: no compiler named c++")
    with dml.configure(torch_node="wait"):
        assert torch_node.get() is None
        assert "build failed" in torch_node.status() and "no compiler named c++" in torch_node.status()
        x = torch.randn(1, 1, 4, 4, requires_grad=True)
        y = dml.slice1(x, [0, 0, 0, 0], [1, 1, 4, 4], [1, 1, -1, 1])
        assert isinstance(y.grad_fn, torch.autograd.function.BackwardCFunction)
        (g,) = torch.autograd.grad(y.sum(), x)
        assert torch.equal(g, torch.ones_like(x))


def test_a_dead_builder_does_not_block_a_new_one(fresh_state, monkeypatch):
    path = torch_node.library_path()
    path.parent.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    marker = path.with_name(path.name + ".building")
    started = []

    class FakeBuilder:
        pid = 4242

        def __init__(self, argv, **kwargs):
            started.append(argv)

        def wait(self):
            return 0
    monkeypatch.setattr(torch_node.subprocess, "Popen", FakeBuilder)
    now = int(time.time())
    marker.write_text(f"{os.getpid()} {now}")             # a live builder: left alone
    torch_node._spawn(path)
    assert started == []
    marker.write_text(f"{os.getpid()} {now - 10_000}")    # alive but timed out (a reused pid): replaced
    torch_node._spawn(path)
    assert len(started) == 1
    marker.write_text(f"{dead.pid} {now}")                # a dead one: replaced
    torch_node._spawn(path)
    assert len(started) == 2 and started[1][-1] == path.name.split(".")[0]
    assert marker.read_text().split()[0] == "4242"


def test_a_builder_that_dies_without_a_word_does_not_hang_wait_mode(fresh_state, monkeypatch):
    spawned = []
    popen = subprocess.Popen

    class DyingBuilder:                                   # exits at once: no library, no .failed
        def __init__(self, argv, **kwargs):
            spawned.append(argv)
            self.proc = popen([sys.executable, "-c", "pass"])
            self.pid = self.proc.pid
            self.proc.wait()

        def wait(self):
            return 0
    monkeypatch.setattr(torch_node.subprocess, "Popen", DyingBuilder)
    t0 = time.time()
    with dml.configure(torch_node="wait"):
        assert torch_node.get() is None
    assert time.time() - t0 < 30 and len(spawned) == 2
    assert "exited without a library" in torch_node.status()


def test_a_library_another_user_could_have_written_is_not_loaded(fresh_state):
    path = torch_node.library_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a library")
    path.parent.chmod(0o777)
    with dml.configure(torch_node="wait"):
        assert torch_node.get() is None
    assert "writable by other users" in torch_node.status()


def _fail(g):
    raise ValidationError("adjoint failed on purpose")


class _Reenter(torch.autograd.Function):
    """A backward that runs a backward ``depth`` levels deep: past PyTorch's
    reentrant limit the innermost runs on another engine thread."""

    @staticmethod
    def forward(ctx, x, depth, inner):
        ctx.depth, ctx.inner = depth, inner
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        with torch.enable_grad():
            x = torch.randn(1, 2, 6, 6, requires_grad=True)
            y = ctx.inner(x) if ctx.depth == 0 else _Reenter.apply(x, ctx.depth - 1, ctx.inner)
            torch.autograd.grad(y.sum(), x)
        return g, None, None


@pytest.mark.parametrize("depth", [0, 60])
def test_an_adjoint_error_reaches_the_caller_as_itself(node, depth, monkeypatch):
    from opendml.arrays.torch import adapter as torch_adapter
    for mode in ("wait", "off"):                         # (no call cache: its entries hold the specs made first)
        with dml.configure(torch_node=mode, call_cache=False):
            dml.unfold(torch.randn(1, 2, 6, 6, requires_grad=True), 3, 1, 1, 1, 1)
            for route in torch_adapter._ROUTES_AD.values():       # the node's adjoint
                route.adjoint_spec, route.recorder = (None, None, (), _fail), None
            with monkeypatch.context() as m:                      # the Python Function's
                m.setattr(torch_adapter._Route, "adjoint", lambda self, grads, constants=(): _fail(grads))
                try:
                    a = torch.randn(3, requires_grad=True)
                    with pytest.raises(ValidationError, match="adjoint failed on purpose"):
                        _Reenter.apply(a, depth, lambda t: dml.unfold(t, 3, 1, 1, 1, 1)).sum().backward()
                finally:
                    torch_adapter._ROUTES_AD.clear()


def test_jit_trace_and_compiled_autograd_take_the_python_route(node):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(1, 2, 1, 1))

        def forward(self, x):
            return dml.unfold(x * self.w, 3, 1, 1, 1, 1).sum(1)
    m = M()
    with dml.configure(torch_node="wait"):
        traced = torch.jit.trace(m, torch.randn(1, 2, 5, 5), check_trace=False)
        other = torch.randn(1, 2, 5, 5)
        assert torch.equal(traced(other), m(other))       # not a constant baked in by the trace
        from torch._dynamo import compiled_autograd
        x = torch.randn(1, 2, 6, 6, requires_grad=True)
        with compiled_autograd._enable(torch.compile(backend="eager")):
            y = dml.unfold(x, 3, 1, 1, 1, 1)
            assert isinstance(y.grad_fn, torch.autograd.function.BackwardCFunction)
            (y * 2).sum().backward()
    assert torch.equal(x.grad, 2 * dml.fold(torch.ones(1, 18, 36), [6, 6], 3, 1, 1, 1, 1))


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("mode", ["wait", "off"])
def test_jit_trace_of_a_call_that_needs_no_gradient(node, mode, device):
    """Can fail: ``torch.jit.trace`` of calls on tensors that need no gradient recorded their results as
    constants (the kernel route ran them, a repeat served by the C call cache, which did not look for a
    TorchScript trace), so the traced function gave the example's answer on every input. The trace now
    records opendml's operators (``opendml_cpp::move``, ``opendml::move``; an index function
    ``opendml::family``), after repeats as before any call; inputs requiring grad still take the Function."""
    dev = _device(device)
    idx = torch.tensor([[2, 0, 1]], device=dev)
    fns = [lambda t: dml.pad(t, 1, 1) * 2, lambda t: dml.slice(t, [0, 1], [2, 2], [1, 1]),
           lambda t: dml.unfold(t.reshape(1, 1, 2, 3), 2, 1, 1, 0, 0), lambda t: dml.tile(t, [2, 1]),
           lambda t: dml.gather_elements(t, idx.expand(2, 3), 1), lambda t: dml.join([t, t + 1], 0)]
    other = torch.arange(6.0, device=dev).reshape(2, 3)
    with dml.configure(torch_node=mode):
        for fn in fns:
            for _ in range(3):                                    # (repeats: served by the call cache)
                fn(torch.ones(2, 3, device=dev))
            traced = torch.jit.trace(fn, torch.ones(2, 3, device=dev), check_trace=False)
            assert torch.equal(traced(other), fn(other))
            # (traced with a gradient: the Function, as before)
            traced = torch.jit.trace(fn, torch.ones(2, 3, device=dev, requires_grad=True), check_trace=False)
            a, b = (other.clone().requires_grad_(True) for _ in range(2))
            ya, yb = traced(a), fn(b)
            (ya * ya).sum().backward()
            (yb * yb).sum().backward()
            assert torch.equal(ya, yb) and torch.equal(a.grad, b.grad)


@pytest.mark.parametrize("mode", ["wait", "off"])
def test_torch_func_transforms_over_a_captured_tensor_take_the_function(node, mode):
    """Can fail: a tensor requiring grad that a ``torch.func`` transform does not wrap (captured from outside
    the transformed function) took the C++ node or the old-style Function (which functorch refuses), and
    once two plain autograd calls had recorded eager entries, the call cache served the node under the
    transform: ``grad`` and ``vmap`` raised. Both now give PyTorch's own ops' results."""
    w = torch.arange(12.0).reshape(3, 4).requires_grad_(True)
    calls = [(lambda: dml.tile(w, [1, 2]), lambda: w.repeat(1, 2)),
             (lambda: dml.slice(w, [0, 0], [2, 2], [1, 1]), lambda: w[:2, :2]),
             (lambda: dml.pad(w, 1, 1), lambda: torch.nn.functional.pad(w, (1, 1, 1, 1)))]
    with dml.configure(torch_node=mode):
        for op, _ in calls:                          # plain autograd calls first: their eager entries
            for _ in range(3):
                op().sum().backward()
        for op, ref in calls:
            def f(b, fn):
                return (fn().sum() * b).sum()
            assert torch.equal(torch.func.grad(lambda b: f(b, op))(torch.ones(2)),
                               torch.func.grad(lambda b: f(b, ref))(torch.ones(2)))
            assert torch.equal(torch.func.vmap(lambda b: f(b, op))(torch.ones(5, 2)),
                               torch.func.vmap(lambda b: f(b, ref))(torch.ones(5, 2)))


def test_wait_mode_waits_for_the_node_on_an_autograd_call(node, monkeypatch):
    """Can fail: with ``torch_node="wait"`` an autograd call took the Python Function without asking the
    node module (it is asked, and waited for, before the first recorded call)."""
    asked = []
    real = torch_node.get
    monkeypatch.setattr(torch_node, "get", lambda: asked.append(1) or real())
    x = torch.randn(1, 2, 5, 5, requires_grad=True)
    with dml.configure(torch_node="wait"):
        monkeypatch.setitem(torch_node._state, "module", None)       # as before the build is done
        y = dml.tile(x, [1, 1, 2, 1])
    assert asked and y.grad_fn is not None


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,op,ref", CASES, ids=[c[0] for c in CASES])
def test_eager_entries_of_the_call_cache_equal_the_python_route(node, name, op, ref, device):
    """A repeated call that autograd records is served by the call cache's
    eager entry (the node's recorder); values, gradients and grad_fn types
    equal the uncached route's, and the entry stands aside under a trace,
    compiled autograd, torch_node="off" and forward AD."""
    x = torch.randn(2, 3, 5, 6, dtype=torch.float64, device=_device(device), requires_grad=True)
    g = torch.randn_like(op(x.detach()))
    with dml.configure(call_cache=False, torch_node="wait"):
        want_y, want_type, _, want_g = _run(op, x, g, "wait")
    with dml.configure(torch_node="wait"):
        for _ in range(2):
            op(x)                                   # the second call stores the eager entry
        before = dml.plan_cache_info()["call_cache"]
        y = op(x)
        after = dml.plan_cache_info()["call_cache"]
        # served from C, the node's kernel too: no lookup missed (a kernel spec naming the wrong cache would)
        assert after["hits"] > before["hits"] and after["misses"] == before["misses"]
        (gx,) = torch.autograd.grad(y, x, g)
        assert not isinstance(y.grad_fn, torch.autograd.function.BackwardCFunction)
        assert type(y.grad_fn).__name__ == want_type and torch.equal(y, want_y) and torch.equal(gx, want_g)
        from torch._dynamo import compiled_autograd
        with compiled_autograd._enable(torch.compile(backend="eager")):
            assert isinstance(op(x).grad_fn, torch.autograd.function.BackwardCFunction)
        import torch.autograd.forward_ad as fwAD
        with fwAD.dual_level():
            d = fwAD.make_dual(x.detach(), torch.ones_like(x))
            assert fwAD.unpack_dual(op(d)).tangent is not None
    with dml.configure(torch_node="off"):
        assert isinstance(op(x).grad_fn, torch.autograd.function.BackwardCFunction)


def test_info_says_how_autograd_records(tmp_path):
    env = dict(os.environ, OPENDML_TORCH_NODE="off")
    out = subprocess.run([sys.executable, "-m", "opendml.cli", "info"], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and "pytorch autograd: torch_node=off (always the Python autograd.Function)" in out.stdout
    env = dict(os.environ, OPENDML_TORCH_NODE="auto", OPENDML_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-m", "opendml.cli", "info"], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and f"compiled on first need into {tmp_path / 'torch_node'}" in out.stdout


def test_no_builder_runs_under_a_program_that_is_not_python(fresh_state, monkeypatch):
    monkeypatch.setattr(torch_node.sys, "executable", "/usr/bin/uwsgi")
    spawned = []
    monkeypatch.setattr(torch_node.subprocess, "Popen", lambda *a, **k: spawned.append(a))
    with dml.configure(torch_node="wait"):
        assert torch_node.get() is None
    assert spawned == [] and "is not a Python interpreter" in torch_node.status()


def _recorder_route(node):
    """(the route of a slice1 call that reverses H, its recorder) on a (1, 2, 6, 6) tensor."""
    from opendml.arrays.torch import adapter as torch_adapter
    x = torch.randn(1, 2, 6, 6, requires_grad=True)
    with dml.configure(torch_node="wait"):
        dml.slice1(x, [0, 0, 0, 0], [1, 2, 6, 6], [1, 1, -1, 1])
    r = next(r for (key, _, shape, _), r in torch_adapter._ROUTES_AD.items()
             if shape == (1, 2, 6, 6) and "slice1" in key and r.args[2] == [1, 1, -1, 1])
    return x, types.SimpleNamespace(kernel=r.kernel, adjoint=r.adjoint_spec, slot=torch_node.slot(node, "opendml_slice1Backward"))


def test_a_recorder_is_a_callable_of_one_tensor(node):
    x, route = _recorder_route(node)
    record = node.recorder(route.slot, route.kernel, route.adjoint)
    assert type(record).__name__ == "Recorder"
    for args, kwargs in (((), {}), ((x, x), {}), ((), {"x": x}), (([1, 2],), {})):
        with pytest.raises(TypeError, match="a recorder takes one tensor"):
            record(*args, **kwargs)
    with dml.configure(torch_node="wait"):
        y = record(x)
        assert type(y.grad_fn).__name__ == "opendml_slice1Backward" and torch.equal(y, x.detach().flip(2))
        (g,) = torch.autograd.grad(y, x, torch.arange(72.0).reshape(1, 2, 6, 6))
        assert torch.equal(g, torch.arange(72.0).reshape(1, 2, 6, 6).flip(2))
        with torch.no_grad():
            assert record(x).grad_fn is None
    with pytest.raises(ValueError, match="a call spec is"):
        node.recorder(route.slot, route.kernel, (None, None, [], None))
    with pytest.raises(IndexError, match="no such slot"):
        node.recorder(10_000, route.kernel, route.adjoint)


def test_a_recorder_raises_its_kernels_error_as_itself(node):
    x, route = _recorder_route(node)

    def fail(t):
        raise ValidationError("slice1: kernel failed on purpose")
    for spec in ((None, None, (), fail), (route.kernel[0], route.kernel[1], (), fail)):   # (the cache: no entry)
        record = node.recorder(route.slot, spec, route.adjoint)
        with pytest.raises(ValidationError, match="kernel failed on purpose"):
            record(x)
    record = node.recorder(route.slot, (None, None, (), lambda t: [t]), route.adjoint)
    with pytest.raises(RuntimeError, match="returned a list, not a tensor"):
        record(x)


def test_a_gradient_kept_elsewhere_is_not_taken_over(node):
    """A backward whose kernel returns a tensor the caller keeps too: x.grad
    is a copy of it (AccumulateGrad's rule), in backward() and autograd.grad."""
    x, route = _recorder_route(node)
    kept = torch.full((1, 2, 6, 6), 3.0)
    record = node.recorder(route.slot, route.kernel, (None, None, (), lambda g: kept))
    with dml.configure(torch_node="wait"):
        record(x).backward(torch.ones(1, 2, 6, 6))
        assert torch.equal(x.grad, kept) and x.grad.data_ptr() != kept.data_ptr()
        x.grad.add_(1.0)
        assert torch.equal(kept, torch.full((1, 2, 6, 6), 3.0))
        (g,) = torch.autograd.grad(record(x), x, torch.ones(1, 2, 6, 6))
        assert torch.equal(g, kept)
        x.grad = None
        y = dml.slice1(x, [0, 0, 0, 0], [1, 2, 6, 6], [1, 1, -1, 1])
        y.backward(torch.ones(1, 2, 6, 6))          # a new output: x.grad takes it over, resizable as flip's
        first = x.grad
        first.resize_(72)
        assert first.shape == (72,) and torch.equal(first, torch.ones(72))



@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,op,ref", CASES, ids=[c[0] for c in CASES])
def test_a_node_inside_a_chain_gives_the_python_routes_bytes(node, name, op, ref, device):
    """The node between two PyTorch nodes: the gradient it receives is an
    upstream node's (no Python object of its own until the node wraps it,
    released by the node), the one it returns goes on to another node and to
    x.grad; the same bytes as the Python route, step after step, whatever
    held the gradient before."""
    x = torch.randn(2, 3, 5, 6, dtype=torch.float64, device=_device(device), requires_grad=True)
    w = torch.randn_like(op(x.detach()))
    grads = {}
    for mode in ("wait", "off"):
        with dml.configure(torch_node=mode):
            for _ in range(3):
                x.grad = None
                (op(x * 2.0) * w).sum().backward()
            grads[mode] = x.grad
            (ga,) = torch.autograd.grad((op(x.exp()) * w).sum(), x)
            grads[mode + "-grad"] = ga
    assert torch.equal(grads["wait"], grads["off"]) and torch.equal(grads["wait-grad"], grads["off-grad"])


def test_the_eager_check_answers_as_the_python_check(node, monkeypatch):
    """node.eager_check (what the call cache asks before serving an eager
    entry, in C++) gives _eager_ok's answer in every state it reads."""
    from opendml.arrays.torch import adapter as torch_adapter
    from types import ModuleType, SimpleNamespace

    def check(state=None, current=..., modules=None, fallback=lambda: "fallback"):
        cfg = {} if current is ... else {"_current": current}
        sys_dict = {"modules": {} if modules is None else modules}
        return node.eager_check({"module": node} if state is None else state, cfg, sys_dict, fallback)()
    auto, off = SimpleNamespace(torch_node="auto"), SimpleNamespace(torch_node="off")
    assert check(current=auto) is True and check(current=off) is False
    assert check(state={"module": None}, current=auto) is False
    assert check(state={}, current=auto) == "fallback" and check() == "fallback" and check(current=None) == "fallback"
    name = "torch._dynamo.compiled_autograd"
    flagged = ModuleType("flagged")
    flagged.compiled_autograd_enabled = True
    for entry, want in ((SimpleNamespace(compiled_autograd_enabled=True), False),
                        (SimpleNamespace(compiled_autograd_enabled=0), True), (SimpleNamespace(), True),
                        (None, True), (flagged, False), (ModuleType("bare"), True)):
        assert check(current=auto, modules={name: entry}) is want, entry
    with pytest.raises(ZeroDivisionError):          # an error reading the flag is raised, as getattr raises it
        check(current=auto, modules={name: type("B", (), {"compiled_autograd_enabled": property(lambda s: 1 / 0)})()})
    traced = []
    torch.jit.trace(lambda t: (traced.append(check(current=auto)), t * 2)[1], torch.ones(2), check_trace=False)
    assert traced == [False]
    # the check made from the real state, against the Python one, in the states a process passes through
    real = node.eager_check(torch_node._state, vars(sys.modules["opendml.runtime.config"]), vars(sys),
                            torch_adapter._eager_ok)
    from torch._dynamo import compiled_autograd
    with dml.configure(torch_node="wait"):
        assert real() is torch_adapter._eager_ok() is True
        with compiled_autograd._enable(torch.compile(backend="eager")):
            assert real() is torch_adapter._eager_ok() is False
    with dml.configure(torch_node="off"):
        assert real() is torch_adapter._eager_ok() is False
    monkeypatch.setitem(torch_node._state, "module", None)
    assert real() is torch_adapter._eager_ok() is False


def test_parameters_and_unkeyed_calls_take_the_node(node):
    """A subclass (nn.Parameter) and a call whose arguments the caches do not
    key (NumPy arrays) are recorded by the node too, through a recorder."""
    import numpy as np
    p = torch.nn.Parameter(torch.randn(1, 2, 6, 6, dtype=torch.float64))
    g = torch.randn(1, 2, 6, 6, dtype=torch.float64)
    with dml.configure(torch_node="wait"):
        for args in (([0, 0, 0, 0], [1, 2, 6, 6], [1, 1, -1, 1]),
                     (np.zeros(4, dtype=np.int64), np.array([1, 2, 6, 6]), np.array([1, 1, -1, 1]))):
            for _ in range(2):
                y = dml.slice1(p, *args)
                assert type(y.grad_fn).__name__ == "opendml_slice1Backward"
                assert not isinstance(y.grad_fn, torch.autograd.function.BackwardCFunction)
                assert torch.equal(y, p.detach().flip(2))
                (gp,) = torch.autograd.grad(y, p, g)
                assert torch.equal(gp, g.flip(2))


#: Family operators of one tensor and one output, each beside PyTorch's own function.
FAMILY_CASES = [
    ("pad", lambda x: dml.pad(x, [0, 0, 1, 2], [0, 0, 2, 1]), lambda x: torch.nn.functional.pad(x, (2, 1, 1, 2))),
    ("pad-reflect", lambda x: dml.pad(x, [0, 0, 1, 2], [0, 0, 2, 1], "reflection"),
     lambda x: torch.nn.functional.pad(x, (2, 1, 1, 2), mode="reflect")),
    ("tile", lambda x: dml.tile(x, [1, 2, 1, 3]), lambda x: x.repeat(1, 2, 1, 3)),
    ("identity", lambda x: dml.identity(x, 2.0, 0.5), lambda x: 2 * x + 0.5),
    ("cast", lambda x: dml.cast(x, "float32"), lambda x: x.float()),
    ("space_to_depth", lambda x: dml.space_to_depth(x, 2, "CRD"), lambda x: torch.nn.functional.pixel_unshuffle(x, 2)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,op,ref", FAMILY_CASES, ids=[c[0] for c in FAMILY_CASES])
def test_family_calls_take_the_node_and_its_eager_entry(node, name, op, ref, device):
    """A family call of one tensor that autograd records takes the C++ node (not the Python Function), its
    repeats the call cache's eager entry (keyed by every argument kind: floats, strings, dtypes); values,
    gradients and second derivatives equal the Python Function's and PyTorch's own."""
    dtype = torch.float32 if name == "tile" else torch.float64       # (TILE takes no float64)
    x = torch.randn(2, 3, 6, 8, dtype=dtype, device=_device(device), requires_grad=True)
    g = torch.randn_like(op(x.detach()))
    want_y, want_type, native, want_g = _run(op, x, g, "off")
    assert not native
    r = ref(x)
    (rg,) = torch.autograd.grad(r, x, g)
    assert torch.equal(want_y, r) and torch.allclose(want_g, rg)     # (sums in another order: reflection)
    with dml.configure(torch_node="wait"):
        for i in range(3):
            before = dml.plan_cache_info()["call_cache"]
            y = op(x)
            assert type(y.grad_fn).__name__ == want_type and want_type.startswith("opendml_")
            assert not isinstance(y.grad_fn, torch.autograd.function.BackwardCFunction)
            (gx,) = torch.autograd.grad(y, x, g)
            assert torch.equal(y, want_y) and torch.equal(gx, want_g)
        after = dml.plan_cache_info()["call_cache"]                  # the last one served from C, no lookup missed
        assert after["hits"] > before["hits"] and after["misses"] == before["misses"]
        gr = g.detach().requires_grad_()
        (gx,) = torch.autograd.grad(op(x), x, gr, create_graph=True)
        assert not isinstance(gx.grad_fn, torch.autograd.function.BackwardCFunction)   # the adjoint, by the node too
        (gg,) = torch.autograd.grad((gx * gx).sum(), gr)
        if device == "cpu" and dtype == torch.float64 and name != "cast":
            assert torch.autograd.gradgradcheck(op, (x,))
    (rgx,) = torch.autograd.grad(ref(x), x, gr, create_graph=True)
    (rgg,) = torch.autograd.grad((rgx * rgx).sum(), gr)
    assert torch.allclose(gx, rgx) and torch.allclose(gg, rgg)


@pytest.mark.parametrize("name,op,ref", [CASES[1], CASES[4], FAMILY_CASES[0]], ids=["slice1", "unfold", "pad"])
def test_the_python_function_runs_its_kernel_from_the_call_cache(name, op, ref):
    """Without the node (torch_node="off"), a repeated call autograd records takes the Python Function,
    whose forward is served by the call cache (not lowered again), with the same values and gradients."""
    x = torch.randn(2, 3, 6, 8, dtype=torch.float32, requires_grad=True)
    with dml.configure(torch_node="off"):
        for _ in range(2):
            op(x)
        before = dml.plan_cache_info()["call_cache"]
        y = op(x)
        after = dml.plan_cache_info()["call_cache"]
        assert isinstance(y.grad_fn, torch.autograd.function.BackwardCFunction)
        assert after["hits"] > before["hits"] and after["misses"] == before["misses"]
        g = torch.randn_like(y)
        (gx,) = torch.autograd.grad(y, x, g)
    r = ref(x)
    assert torch.equal(y, r) and torch.allclose(gx, torch.autograd.grad(r, x, g)[0])
