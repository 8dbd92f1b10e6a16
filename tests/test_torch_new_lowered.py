"""Issue 19, the PyTorch new-shape route's short form: ``torch_adapter.run``
tries ``_new_shape`` before its routing checks (the C call declines what they
would send elsewhere), and for SLICE1 and SLICE ``call_cache_torch_new`` is
given the compiled lowering (``planner.NATIVE_LOWERING``) and calls it on the
sizes it reads itself (False where it gives no fields: ``plain_plan`` then
plans the call). Against the two-step form (``NATIVE_LOWERING`` empty:
``plain_plan``'s fields passed to C) and the plan route (``_new_shape``
refused): the same bytes, errors and call-cache entries, from several threads
too, and the same autograd, forward-AD, ``torch.func`` and error behaviour.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import opendml as dml  # noqa: E402
from opendml import UnsupportedError  # noqa: E402
from opendml.arrays import planner  # noqa: E402
from opendml.arrays.torch import adapter as ta  # noqa: E402
from opendml.model import TensorDesc  # noqa: E402
from opendml.runtime import calls  # noqa: E402
from tests.conftest import run_in_threads  # noqa: E402
from tests.test_newshape_fastpaths import outcome, slice1_args, slice_args  # noqa: E402
from tests.test_torch_new import SETTINGS, _accessors, _norm, device, entry, plan_route, tensor_of  # noqa: E402,F401

REV = [1, 1, -1, 1]


def two_step(fn, x, *args):
    """(outcome, entry) of ``fn(x, *args)`` with the compiled lowering
    called from Python (``plain_plan``), caches cleared."""
    saved = planner.NATIVE_LOWERING
    planner.NATIVE_LOWERING = {}
    try:
        calls.clear()
        return _norm(outcome(fn, x, *args)), entry(fn, x, *args)
    finally:
        planner.NATIVE_LOWERING = saved
        calls.clear()


def lowered(fn, x, *args):
    calls.clear()
    try:
        return _norm(outcome(fn, x, *args)), entry(fn, x, *args)
    finally:
        calls.clear()


@SETTINGS
@given(st.data())
def test_lowered_in_c_equals_the_two_step_and_plan_routes(device, data):
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
    assert got == two_step(fn, x, *args)
    assert got[0] == plan_route(fn, x, *args)


def _spy():
    ran, real = [], ta._torch_new

    def spy(*a):
        r = real(*a)
        if type(r) is not str:    # a str names a CUDA kernel this process has not compiled yet: _new_shape calls again
            ran.append((a[4], r if r is None or r is False else "out"))
        return r
    return ran, real, spy


def test_c_is_given_the_lowering_and_falls_back_to_plain_plan(device):
    ran, real, spy = _spy()
    ta._torch_new = spy
    try:
        calls.clear()
        x = torch.randn(1, 3, 7, 9, device=device)
        assert torch.equal(dml.slice1(x, [0, 0, 0, 0], [1, 3, 7, 9], REV), x.flip(2))
        assert ran == [(planner.NATIVE_LOWERING["slice1"], "out")]          # one C call, given the lowering
        del ran[:]
        y = dml.slice1(x, [0, 0, 0, 0], [1, 3, 7, 9], REV, [1, 3, 5, 9])   # output sizes: the compiled one declines
        assert torch.equal(y, x.flip(2)[:, :, :5])
        assert [r for _, r in ran] == [False, "out"] and type(ran[1][0]) is tuple
        del ran[:]
        u = dml.unfold(x, 3, 1, 1, 1, 1)                                     # UNFOLD and FOLD: theirs
        assert torch.equal(u, torch.nn.functional.unfold(x, 3, 1, 1, 1))
        assert ran == [(planner.NATIVE_LOWERING["unfold"], "out")]
        del ran[:]
        f = dml.fold(u, [7, 9], 3, 1, 1, 1, 1)
        assert torch.allclose(f, torch.nn.functional.fold(u, (7, 9), 3, 1, 1, 1))
        assert ran == [(planner.NATIVE_LOWERING["fold"], "out")]
    finally:
        ta._torch_new = real
        calls.clear()


def test_a_declined_call_asks_the_compiled_lowering_once(device):
    """Where C's call of the compiled lowering gives no fields (it answers
    False), the fallback plans with the reference lowering alone: Python does
    not fetch the compiled one to ask it the same question again (and the
    answer is the plan route's)."""
    fetched = []

    class Counting(dict):
        def get(self, name, default=None):
            fetched.append(name)
            return super().get(name, default)
    ran, real, spy = _spy()
    saved = planner.NATIVE_LOWERING
    planner.NATIVE_LOWERING = Counting(saved)
    ta._torch_new = spy
    try:
        calls.clear()
        x = torch.randn(1, 3, 7, 9, device=device)
        y = dml.slice1(x, [0, 0, 0, 0], [1, 3, 7, 9], REV, [1, 3, 5, 9])   # output sizes: the compiled one declines
        assert torch.equal(y, x.flip(2)[:, :, :5])
        assert [r for _, r in ran] == [False, "out"]                         # C asked it, then ran plain_plan's
        assert fetched == ["slice1"]                                         # fetched once, for C
    finally:
        planner.NATIVE_LOWERING = saved
        ta._torch_new = real
        calls.clear()


def test_c_call_given_the_lowering_directly():
    fast = planner.NATIVE_LOWERING["slice1"]
    op, dt, since = calls.OPS["slice1"], np.dtype(np.float32), calls.generation()
    cpu = (1, 1 << 20, 0, 0, 1 << 40)
    x = torch.randn(2, 3, 4, 5)
    args = ([0, 0, 0, 0], [2, 3, 4, 5], REV, None)
    calls.clear()
    try:
        assert torch.equal(calls.torch_new(op, x, args, 0, fast, since, None, dt, cpu), x.flip(2))
        assert calls.torch_new(op, x, ([0, 0, 1, 0], [2, 3, 4, 5], REV, None), 0, fast, since, None, dt, cpu) is False
        assert calls.torch_new(op, x, args[:3] + ([2, 3, 4, 5],), 0, fast, since, None, dt, cpu) is False
        assert calls.torch_new(op, x, ([0], [2], [1], None), 0, fast, since, None, dt, cpu) is False   # rank
        assert calls.torch_new(op, torch.empty(0, 3), ([0, 0], [0, 3], [1, 1], None), 0, fast, since, None, dt,
                               cpu) is False                                                         # no elements
        assert calls.torch_new(op, x._neg_view(), args, 0, fast, since, None, dt, cpu) is None         # declined first
        assert calls.torch_new(op, torch.nn.Parameter(x), args, 0, fast, since, None, dt, cpu) is None
        assert calls.torch_new(op, x, args, 0, lambda *a: None, since, None, dt, cpu) is None         # not compiled
        bad = ([0, 0, 0, 0], [2, 3, 4, 5], REV, None, None)                                          # 5 arguments
        assert calls.torch_new(op, x, bad, 0, fast, since, None, dt, cpu) is False
    finally:
        calls.clear()


def test_routing_checks_after_the_new_route(device):
    """What the early new-shape route must leave to run's checks."""
    x = torch.randn(1, 2, 5, 4, device=device)
    args = ([0, 0, 0, 0], [1, 2, 5, 4], REV)
    calls.clear()
    w = x.clone().requires_grad_()
    y = dml.slice1(w, *args)                                        # autograd: the same node as before
    real = ta._new_shape
    ta._new_shape = lambda *a: None
    try:
        calls.clear()
        want = dml.slice1(w, *args)
    finally:
        ta._new_shape = real
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


def test_lowered_from_threads_equal_the_two_step_route(device):
    shapes = [(1, 1 + i % 5, 3 + i % 7, 4 + i // 7) for i in range(60)]
    xs = [torch.randn(s, device=device) for s in shapes]
    want = [two_step(dml.slice1, x, [0, 0, 0, 0], list(x.shape), REV)[0] for x in xs]
    wants = [two_step(dml.slice, x, [0, 0, 1, 0], [1, 1, 2, 2], [1, 1, 1, 2])[0] for x in xs]
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
def test_lowered_after_configure_changes_equal_the_two_step_route(device, conf):
    x = torch.arange(2 * 3 * 6 * 5, dtype=torch.float32, device=device).reshape(2, 3, 6, 5)
    cases = [(dml.slice1, x, [0, 0, 0, 0], [2, 3, 6, 5], REV), (dml.slice1, x, [0, 0, 1, 0], [2, 3, 6, 5], REV),
             (dml.slice, x.transpose(2, 3), [0, 1, 0, 1], [2, 2, 3, 2], [1, 1, 1, 2])]
    with dml.configure(**conf):
        for fn, t, *args in cases:
            assert lowered(fn, t, *args) == two_step(fn, t, *args)
            assert lowered(fn, t, *args)[0] == plan_route(fn, t, *args)
