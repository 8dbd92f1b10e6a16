"""PyTorch's tensor accessors for the call cache (runtime/native/torch_api.h,
given by the C++ node library): each reads what the Python accessor it
replaces reads, and a call served with them gives the same bytes and errors
as one served without them and as the plain route."""
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import opendml as dml  # noqa: E402
import opendml.torch as odt  # noqa: E402
from opendml.arrays.torch import node as torch_node  # noqa: E402
from opendml.runtime import calls  # noqa: E402

pytestmark = pytest.mark.skipif(not odt.wait_for_node(), reason="the C++ node library is not built here")


def _lib():
    return torch_node._state["module"]


@pytest.fixture
def api():
    """The accessors registered (as loading the library leaves them), restored after."""
    calls.register_torch_api(_lib().torch_api())
    yield _lib()
    calls.register_torch_api(_lib().torch_api())


def _python_view(x):
    """What calls.c reads through Python without the accessors."""
    return (x.dtype, x.get_device(), x.data_ptr(), tuple(x.shape), tuple(x.stride()), x.requires_grad,
            torch.is_grad_enabled(), torch._C._len_torch_dispatch_stack() != 0)


def _tensors(device):
    base = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32, device=device).reshape(2, 3, 4, 5)
    yield base
    yield base[:, 1:, ::2]
    yield base.transpose(1, 3)
    yield base[0, 0, 0, 0]
    yield base[:, :0]
    yield torch.zeros(3, 1, device=device).expand(3, 4)
    yield base.to(torch.float16)
    yield base.to(torch.int8)
    yield base.to(torch.bool)
    yield base.clone().requires_grad_()
    yield torch.nn.Parameter(base.clone())
    with torch.inference_mode():
        yield torch.ones(4, 4, device=device)


def _check_describe(device):
    lib = _lib()
    for x in _tensors(device):
        got = lib.describe(x)
        assert got[:8] == _python_view(x), x
        assert got[8] is False, x                  # plain: not wrapped
        with torch.no_grad():
            assert lib.describe(x)[6] is False


def test_describe_reads_what_python_reads():
    _check_describe("cpu")


@pytest.mark.cuda
def test_describe_reads_what_python_reads_cuda():
    if not torch.cuda.is_available():
        pytest.skip("CUDA is not available here")
    _check_describe("cuda")


def test_describe_flags_what_the_python_route_must_see():
    lib = _lib()
    x = torch.randn(3, 4)
    assert lib.describe(x)[8] is False
    assert lib.describe(x.neg()._neg_view())[8] is True                       # negative bit
    assert lib.describe(torch.randn(2, dtype=torch.complex64).conj())[8] is True  # conjugate bit
    import torch.autograd.forward_ad as fwad
    with fwad.dual_level():
        assert lib.describe(x)[8] is True                                     # a forward-AD level is open
    assert lib.describe(x)[8] is False
    seen = []
    torch.func.grad(lambda t: (seen.append(lib.describe(t)), t.sum())[1])(torch.randn(3))
    torch.func.vmap(lambda t: (seen.append(lib.describe(t)), t)[1])(torch.randn(2, 3))
    assert all(s is None or s[8] is True for s in seen) and len(seen) == 2     # functorch wrappers

    from torch.utils._python_dispatch import TorchDispatchMode

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    with Mode():
        assert lib.describe(x)[7] is True
    assert lib.describe(torch.randn(2, 2).to_sparse()) is None                 # not strided
    assert lib.describe(torch.empty(2, device="meta"))[1] == -2                # another device
    assert lib.describe(torch.randn(*[1] * 9)) is None                         # more dims than keys take
    assert lib.describe(np.zeros(3)) is None and lib.describe(3) is None


def _calls(x):
    h, w = x.shape[-2:]
    return [lambda t: dml.unfold(t, 3, 1, 1, 1, 1),
            lambda t: dml.slice1(t, [0] * t.dim(), list(t.shape), [1] * (t.dim() - 1) + [-1]),
            lambda t: dml.fold(dml.unfold(t, 2, 1, 1, 0, 0), [h, w], 2, 1, 1, 0, 0),
            lambda t: dml.pad(t, [0, 0, 1, 2], [0, 0, 2, 1], "reflect"),
            lambda t: dml.cast(t, "float16"),
            lambda t: dml.join([t, t], 1)]


def _outputs(x, with_api):
    calls.register_torch_api(_lib().torch_api() if with_api else None)
    try:
        out = []
        for f in _calls(x):
            for _ in range(3):                     # the first records, the others are served
                out.append(f(x))
        return out
    finally:
        calls.register_torch_api(_lib().torch_api())


def _same(a, b):
    assert len(a) == len(b)
    for p, q in zip(a, b):
        assert p.dtype == q.dtype and p.shape == q.shape and p.device == q.device
        assert torch.equal(p.cpu(), q.cpu())


def _check_served(device):
    base = torch.randn(2, 3, 6, 7, device=device)
    for x in (base, base[:, :, ::2], base.transpose(2, 3)):
        with_api, without = _outputs(x, True), _outputs(x, False)
        with dml.configure(call_cache=False):
            plain = _outputs(x, True)
        _same(with_api, without)
        _same(with_api, plain)


def test_served_calls_equal_with_and_without_the_accessors(api):
    _check_served("cpu")


@pytest.mark.cuda
def test_served_calls_equal_with_and_without_the_accessors_cuda(api):
    if not torch.cuda.is_available():
        pytest.skip("CUDA is not available here")
    _check_served("cuda")
    # the current stream and device as PyTorch gives them, on another stream too
    s = torch.cuda.Stream()
    x = torch.randn(1, 4, 8, 8, device="cuda")
    expect = dml.unfold(x, 3, 1, 1, 1, 1)
    with torch.cuda.stream(s):
        for _ in range(3):
            got = dml.unfold(x, 3, 1, 1, 1, 1)
        s.synchronize()
    assert torch.equal(got, expect)


def test_routes_that_must_not_be_served_are_not(api):
    """Negative views, forward AD and functorch take the Python route with
    the accessors as without them: the answers match the plain route's."""
    x = torch.randn(1, 2, 5, 5)
    f = _calls(x)[0]
    for _ in range(3):
        f(x)                                        # recorded and served
    neg = x.neg()._neg_view()
    with dml.configure(call_cache=False):
        expect_neg = f(neg.resolve_neg())
    assert torch.equal(f(neg), expect_neg)
    import torch.autograd.forward_ad as fwad
    with fwad.dual_level():
        dual = fwad.make_dual(x, torch.ones_like(x))
        y = f(dual)
        assert torch.equal(fwad.unpack_dual(y).tangent, f(torch.ones_like(x)))
    g = torch.func.grad(lambda t: f(t).sum())(x)
    with dml.configure(call_cache=False):
        assert torch.equal(g, torch.func.grad(lambda t: f(t).sum())(x))


def test_errors_are_the_same_with_and_without_the_accessors(api):
    x = torch.randn(1, 2, 4, 4)
    errors = []
    for with_api in (True, False, True):
        calls.register_torch_api(_lib().torch_api() if with_api else None)
        for _ in range(2):
            with pytest.raises(dml.ValidationError) as e:
                dml.slice1(x, [0, 0, 0, 0], [1, 2, 9, 4], [1, 1, 1, 1])
            errors.append(str(e.value))
    assert len(set(errors)) == 1


def test_threads_with_the_accessors(api):
    xs = [torch.randn(1, 3, 8 + i, 8) for i in range(4)]
    with dml.configure(call_cache=False):
        expect = [dml.unfold(x, 3, 1, 1, 1, 1) for x in xs]
    bad = []

    def work(k):
        for r in range(50):
            i = (k + r) % 4
            if not torch.equal(dml.unfold(xs[i], 3, 1, 1, 1, 1), expect[i]):
                bad.append(i)
    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad


def _capsule(name: bytes, version: int):
    import ctypes
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    buf = ctypes.create_string_buffer(64)          # a table of that version and no functions
    ctypes.c_int.from_buffer(buf).value = version
    _capsule.keep = (buf, name)
    return new(ctypes.addressof(buf), name, None)


def test_a_wrong_capsule_is_refused(api):
    x = torch.randn(1, 2, 6, 6)
    expect = dml.unfold(x, 3, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="version"):
        calls.register_torch_api(_capsule(b"opendml.torch_api", 99))
    with pytest.raises(ValueError, match="version"):
        calls.register_torch_api(_capsule(b"opendml.torch_api", 1))   # right version, no functions
    with pytest.raises(ValueError):
        calls.register_torch_api(_capsule(b"something.else", 1))
    with pytest.raises(ValueError):
        calls.register_torch_api(3)
    for _ in range(3):                              # the accessors registered before are still the ones used
        assert torch.equal(dml.unfold(x, 3, 1, 1, 1, 1), expect)


def _fresh(env_extra: dict) -> str:
    import os
    import subprocess
    import sys
    code = ("import torch, opendml as dml\n"
            "from opendml.arrays.torch import node as torch_node\n"
            "dml.identity(torch.zeros(3))\n"
            "t = torch_node._state['thread']\n"
            "print('started' if t is not None else 'not started', end=' ')\n"
            "print(bool(t) and (t.join(240) or torch_node._state['module'] is not None))\n")
    env = dict(os.environ, **env_extra)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def test_the_first_pytorch_call_starts_loading_the_library_unless_off():
    assert _fresh({"OPENDML_TORCH_NODE": "auto"}) == "started True"
    assert _fresh({"OPENDML_TORCH_NODE": "off"}) == "not started False"


def test_a_first_call_inside_a_functorch_transform_leaves_plain_tensors_plain():
    """The accessors' idea of a plain tensor comes from the tensor's backend,
    not from a tensor made in whatever context the first call runs in (a
    review found one learned inside torch.func.grad: plain tensors then never
    served, grad wrappers served with no storage)."""
    code = ("import torch, opendml as dml, opendml.torch as odt\n"
            "assert odt.wait_for_node()\n"
            "from opendml.arrays.torch import node as torch_node\n"
            "f = lambda t: dml.slice1(t, [0, 0], [4, 4], [1, -1]).sum() * 3\n"
            "x = torch.randn(4, 4)\n"
            "g1 = torch.func.grad(f)(x)\n"
            "with torch.autograd.forward_ad.dual_level():\n"
            "    pass\n"
            "for _ in range(3):\n"
            "    y = dml.slice1(x, [0, 0], [4, 4], [1, -1])\n"
            "assert torch.equal(y, x.flip(1))\n"
            "assert torch_node._state['module'].describe(x)[8] is False\n"
            "g2 = torch.func.grad(f)(x)\n"
            "assert torch.equal(g1, g2) and torch.equal(g1, torch.full_like(x, 3.0))\n"
            "from torch._subclasses.fake_tensor import FakeTensorMode\n"
            "with FakeTensorMode():\n"
            "    torch_node._state['module'].describe(torch.empty(2))\n"
            "assert torch_node._state['module'].describe(x)[8] is False\n"
            "print('ok')\n")
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_torch_node_off_stops_the_accessors(api):
    """configure(torch_node="off") puts the Python reads back (the hooks are
    asked again), and "auto" the accessors; answers are the same throughout."""
    from opendml.arrays.torch import adapter as ta
    asked = []

    def dispatch_len():
        asked.append(1)
        return torch._C._len_torch_dispatch_stack()
    x = torch.randn(1, 2, 5, 5)
    expect = dml.unfold(x, 3, 1, 1, 1, 1)
    calls.register_torch(torch.Tensor, torch.is_grad_enabled, dispatch_len, ta._not_plain,
                         ta._raw_stream or ta._no_stream, ta._current_device, torch.from_numpy)
    try:
        for mode, python_reads in (("off", True), ("auto", False), ("off", True)):
            with dml.configure(torch_node=mode):
                for _ in range(3):
                    del asked[:]
                    assert torch.equal(dml.unfold(x, 3, 1, 1, 1, 1), expect)
                assert bool(asked) is python_reads, mode
    finally:
        calls.register_torch(torch.Tensor, torch.is_grad_enabled, ta._dispatch_modes, ta._not_plain,
                             ta._raw_stream or ta._no_stream, ta._current_device, torch.from_numpy)


def test_an_unreadable_tensor_is_named_by_its_argument():
    """A sparse, nested or conjugated tensor among an index function's or JOIN's arrays: the way out names that
    argument (it said ``pass x.to_dense()`` whichever tensor it was)."""
    x = torch.zeros(3, 4)
    cases = [(lambda: dml.gather(x, torch.tensor([0, 1]).to_sparse(), 0), r"^gather: .*; pass indices.to_dense\(\)$"),
             (lambda: dml.scatter_elements(x, torch.zeros((1, 4), dtype=torch.int64), torch.ones(1, 4).to_sparse(), 0),
              r"^scatter_elements: .*; pass updates.to_dense\(\)$"),
             (lambda: dml.join([x, x.to_sparse()], 0), r"^join: .*; pass arrays\[1\].to_dense\(\)$"),
             (lambda: dml.pad(x.to_sparse(), 1, 1), r"^pad: .*; pass x.to_dense\(\)$")]
    for call, message in cases:
        with pytest.raises(dml.UnsupportedError, match=message):
            call()
    z = torch.zeros(2, dtype=torch.complex64)
    with pytest.raises(dml.UnsupportedError, match=r"^one_hot: a conjugated complex tensor \(values.is_conj\(\)\)"):
        dml.one_hot(torch.tensor([0, 1]), 3, z.conj())
