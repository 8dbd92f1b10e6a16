"""Issue 19, the PyTorch new-shape route's short form: ``torch_adapter.run``
tries ``_new_shape`` before its routing checks (the C call declines what they
would send elsewhere), and the one C new-shape route (``call_cache_move_new``)
lowers SLICE1, SLICE, UNFOLD and FOLD in C itself (newshape_move.c's
odml_move_plain, from the sizes it reads), answering None where its lowering
gives no fields (the plan route then runs the call). Against the plan route
(``front._new`` refused): the same bytes, errors and call-cache entries, from
several threads too, and the same autograd, forward-AD, ``torch.func`` and
error behaviour.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import opendml as dml  # noqa: E402
from opendml import UnsupportedError  # noqa: E402
from opendml.arrays import front  # noqa: E402
from opendml.arrays.torch import adapter as ta  # noqa: E402
from opendml.model import TensorDesc  # noqa: E402
from opendml.runtime import calls, get_backend  # noqa: E402
from tests.conftest import run_in_threads  # noqa: E402
from tests.test_newshape_fastpaths import outcome, slice1_args, slice_args  # noqa: E402
from tests.test_torch_new import SETTINGS, _accessors, _norm, device, entry, plan_route, tensor_of  # noqa: E402,F401

REV = [1, 1, -1, 1]


def lowered(fn, x, *args):
    calls.clear()
    try:
        return _norm(outcome(fn, x, *args)), entry(fn, x, *args)
    finally:
        calls.clear()


def plan_with_entry(fn, x, *args):
    """(outcome, entry) of the plan route (``front._new`` refused), caches cleared."""
    real = front._new
    front._new = lambda *a: None
    try:
        return lowered(fn, x, *args)
    finally:
        front._new = real


@SETTINGS
@given(st.data())
def test_lowered_in_c_equals_the_plan_route(device, data):
    name = data.draw(st.sampled_from(["slice1", "slice"]))
    inp, out, o, s, t = data.draw(slice1_args() if name == "slice1" else slice_args())
    shape = inp.sizes if isinstance(inp, TensorDesc) else (2, 3)
    if 0 in shape or len(shape) > 8:
        return
    x = data.draw(tensor_of(shape, device))
    if name == "slice1":
        args = (o, s, t, data.draw(st.sampled_from([None, list(out.sizes) if isinstance(out, TensorDesc) else None])))
    else:
        args = (o, s, t)
    fn = dml.slice1 if name == "slice1" else dml.slice
    got = lowered(fn, x, *args)
    assert got == plan_with_entry(fn, x, *args)
    assert got[0] == plan_route(fn, x, *args)


def _spy():
    ran, real = [], front._move_new

    def spy(*a):
        r = real(*a)
        if type(r) is not str:    # a str names a CUDA kernel this process has not compiled yet: _new calls again
            ran.append(None if r is None else "out")
        return r
    return ran, real, spy


def test_c_lowers_the_call_itself(device):
    ran, real, spy = _spy()
    front._move_new = spy
    try:
        calls.clear()
        x = torch.randn(1, 3, 7, 9, device=device)
        assert torch.equal(dml.slice1(x, [0, 0, 0, 0], [1, 3, 7, 9], REV), x.flip(2))
        assert ran == ["out"]                                                # one C call, lowered there
        del ran[:]
        y = dml.slice1(x, [0, 0, 0, 0], [1, 3, 7, 9], REV, [1, 3, 5, 9])   # output sizes: lowered in C too
        assert torch.equal(y, x.flip(2)[:, :, :5])
        assert ran == ["out"]
        del ran[:]
        u = dml.unfold(x, 3, 1, 1, 1, 1)                                     # UNFOLD and FOLD: theirs
        assert torch.equal(u, torch.nn.functional.unfold(x, 3, 1, 1, 1))
        assert ran == ["out"]
        del ran[:]
        f = dml.fold(u, [7, 9], 3, 1, 1, 1, 1)
        assert torch.allclose(f, torch.nn.functional.fold(u, (7, 9), 3, 1, 1, 1))
        assert ran == ["out"]
    finally:
        front._move_new = real
        calls.clear()


def test_the_c_route_called_directly():
    op = calls.OPS["slice1"]
    lower, since, cpu = front._LOWER[op], calls.generation(), get_backend("cpu").plain_conf
    x = torch.randn(2, 3, 4, 5)
    args = ([0, 0, 0, 0], [2, 3, 4, 5], REV, None)

    def c(t, a, lowering=lower):
        return calls.move_new(op, lowering, t, a, since, cpu)
    calls.clear()
    try:
        assert torch.equal(c(x, args), x.flip(2))
        assert c(x, ([0, 0, 1, 0], [2, 3, 4, 5], REV, None)) is None                  # outside the input
        assert torch.equal(c(x, args[:3] + ([2, 3, 3, 5],)), x.flip(2)[:, :, :3])     # output sizes
        assert c(x, args[:3] + ([2, 3, 5, 5],)) is None                                # more than reachable
        assert c(x, ([0], [2], [1], None)) is None                                     # rank
        assert c(torch.empty(0, 3), ([0, 0], [0, 3], [1, 1], None)) is None            # no elements
        assert c(x._neg_view(), args) is None                                          # declined first
        assert c(torch.nn.Parameter(x), args) is None
        assert c(x.to(torch.bool), args) is None                                       # no DirectML type
        assert c(x, args, calls.LOWER_PLAIN | 7) is None                               # no such lowering
        assert c(x, ([0, 0, 0, 0], [2, 3, 4, 5], REV, None, None)) is None            # 5 arguments
    finally:
        calls.clear()


def test_routing_checks_after_the_new_route(device):
    """What the early new-shape route must leave to run's checks."""
    x = torch.randn(1, 2, 5, 4, device=device)
    args = ([0, 0, 0, 0], [1, 2, 5, 4], REV)
    calls.clear()
    w = x.clone().requires_grad_()
    y = dml.slice1(w, *args)                                        # autograd: the same node as before
    real = front._new
    front._new = lambda *a: None
    try:
        calls.clear()
        want = dml.slice1(w, *args)
    finally:
        front._new = real
    assert type(y.grad_fn) is type(want.grad_fn) and y.requires_grad
    (g,) = torch.autograd.grad(y, w, torch.arange(40.0, device=device).reshape(1, 2, 5, 4))
    assert torch.equal(g, torch.arange(40.0, device=device).reshape(1, 2, 5, 4).flip(2))
    with torch.no_grad():                                            # requires_grad without grad mode: the kernel
        z = dml.slice1(w, *args)
    assert torch.equal(z, x.flip(2)) and not z.requires_grad
    import torch.autograd.forward_ad as fwad
    with fwad.dual_level():                                          # an open level: the tangent is seen
        dual = fwad.make_dual(x, torch.ones_like(x))
        _, tangent = fwad.unpack_dual(dml.slice1(dual, *args))
        assert torch.equal(tangent, torch.ones_like(x))
        plain = dml.slice1(x, *args)                                 # a plain tensor while a level is open
        assert torch.equal(plain, x.flip(2))
    b = x[0].expand(3, 2, 5, 4)                                     # a functorch wrapper per sample
    v = torch.func.vmap(lambda t: dml.slice1(t, [0, 0, 0], [2, 5, 4], [1, -1, 1]))(b)
    assert torch.equal(v, b.flip(2))
    assert torch.equal(dml.slice1(x._neg_view(), *args), (-x).flip(2))
    with pytest.raises(UnsupportedError, match="x's dtype torch.bool is not supported by SLICE1"):
        dml.slice1(x > 0, *args)
    if device == "cpu":
        with pytest.raises(UnsupportedError, match="nested PyTorch tensors are not supported"):
            dml.slice1(torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(2, 3)]), [0, 0, 0], [2, 2, 3],
                       [1, 1, 1])
        with pytest.raises(UnsupportedError, match="layout torch.sparse_coo"):
            dml.slice1(x.to_sparse(), *args)


def test_lowered_from_threads_equal_the_plan_route(device):
    shapes = [(1, 1 + i % 5, 3 + i % 7, 4 + i // 7) for i in range(60)]
    xs = [torch.randn(s, device=device) for s in shapes]
    want = [plan_route(dml.slice1, x, [0, 0, 0, 0], list(x.shape), REV) for x in xs]
    wants = [plan_route(dml.slice, x, [0, 0, 1, 0], [1, 1, 2, 2], [1, 1, 1, 2]) for x in xs]
    calls.clear()

    def work(k):
        for i in range(k, len(xs), 4):
            x = xs[i]
            assert _norm(outcome(dml.slice1, x, [0, 0, 0, 0], list(x.shape), REV)) == want[i]
            assert _norm(outcome(dml.slice, x, [0, 0, 1, 0], [1, 1, 2, 2], [1, 1, 1, 2])) == wants[i]
    run_in_threads(work)
    calls.clear()


@pytest.mark.parametrize("conf", [{}, {"threads": 3, "thread_grain_bytes": 1}, {"cpu_kernels": "numpy"},
                                  {"call_cache": False}, {"torch_node": "off"}])
def test_lowered_after_configure_changes_equal_the_plan_route(device, conf):
    x = torch.arange(2 * 3 * 6 * 5, dtype=torch.float32, device=device).reshape(2, 3, 6, 5)
    cases = [(dml.slice1, x, [0, 0, 0, 0], [2, 3, 6, 5], REV), (dml.slice1, x, [0, 0, 1, 0], [2, 3, 6, 5], REV),
             (dml.slice, x.transpose(2, 3), [0, 1, 0, 1], [2, 2, 3, 2], [1, 1, 1, 2])]
    with dml.configure(**conf):
        for fn, t, *args in cases:
            assert lowered(fn, t, *args) == plan_with_entry(fn, t, *args)
            assert lowered(fn, t, *args)[0] == plan_route(fn, t, *args)
