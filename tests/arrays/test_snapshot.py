"""Arguments are read once (issue: a cache poisoned by a list changed while its
call runs). A list that changes at any point of a call's Python route must
neither mix values inside the call nor leave a cache entry that answers a
later call wrongly."""
from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest

import opendml as dml
from opendml.arrays import planner
from opendml.runtime import calls

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _fresh_caches():
    """Every cache empty before and after: a poisoned entry left by one test
    must not fail another, and none is left behind."""
    def clear():
        dml.configure()                   # the call cache
        planner.clear()
        from opendml.arrays.torch import adapter as torch_adapter
        torch_adapter._ROUTES.clear()
    clear()
    yield
    clear()


def _check_every_window(y, n):
    """Every window of ``n`` x ``n`` of ``y``, asked with fresh lists, equals
    NumPy's slice (cache entries made during the race included)."""
    h, w = y.shape
    for i in range(h - n + 1):
        for j in range(w - n + 1):
            got = dml.slice1(y, [i, j], [n, n], [1, 1])
            got = got.detach().cpu().numpy() if isinstance(got, torch.Tensor) else got
            want = (y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else y)[i:i + n, j:j + n]
            assert np.array_equal(got, want), (i, j)


#: Points of the Python route where another thread could run: each is
#: patched to change the caller's list, once, when the route reaches it.
_POINTS = [
    (planner, "logical_desc"),           # after the plan-cache key, before the description
    (planner, "array_layout"),           # before the layout and description
    (calls, "put_move"),                 # after the kernel, before the call-cache record
    (calls, "put_move_cuda"),
]


def _inputs():
    base = np.arange(36, dtype=np.float32).reshape(6, 6)
    yield "numpy", base
    yield "torch", torch.from_numpy(base.copy())
    yield "torch-grad", torch.from_numpy(base.copy()).requires_grad_()


@pytest.mark.parametrize("module,name", _POINTS, ids=[n for _, n in _POINTS])
@pytest.mark.parametrize("kind", ["numpy", "torch", "torch-grad"])
def test_list_changed_mid_call_poisons_nothing(monkeypatch, module, name, kind):
    y = dict(_inputs())[kind]
    window = [0, 0]
    original = getattr(module, name)
    fired = []

    def hooked(*args, **kwargs):
        if not fired:
            fired.append(True)
            window[:] = [3, 3]            # what another thread could do here
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, hooked)
    got = dml.slice1(y, window, [3, 3], [1, 1])
    monkeypatch.setattr(module, name, original)
    got = got.detach().numpy() if isinstance(got, torch.Tensor) else got
    ref = y.detach().numpy() if isinstance(y, torch.Tensor) else y
    # The call answers for the window it was given (read once, at its start).
    assert np.array_equal(got, ref[0:3, 0:3])
    # And nothing cached under one window answers for another.
    with torch.no_grad():
        _check_every_window(y, 3)
    _check_every_window(y, 3)
    dml.configure()


def test_fold_and_unfold_lists_changed_mid_call(monkeypatch):
    dml.configure()
    x = np.arange(2 * 3 * 5 * 5, dtype=np.float64).reshape(2, 3, 5, 5)
    pads = [0, 0]
    original = planner.logical_desc

    def hooked(*args):
        pads[:] = [1, 1]
        return original(*args)

    monkeypatch.setattr(planner, "logical_desc", hooked)
    got = dml.unfold(x, [2, 2], 1, 1, pads, 0)
    monkeypatch.setattr(planner, "logical_desc", original)
    assert got.shape == (2, 12, 16)
    assert np.array_equal(got, dml.unfold(x, [2, 2], 1, 1, [0, 0], 0))
    assert dml.unfold(x, [2, 2], 1, 1, [1, 1], 0).shape == (2, 12, 25)
    dml.configure()


@pytest.mark.parametrize("kind", ["numpy", "torch", pytest.param("torch-cuda", marks=pytest.mark.cuda)])
def test_threads_changing_a_shared_list(kind):
    """The issue's reproduction, shortened: two threads call with a shared
    list while a third assigns random offsets into it; afterwards every
    window answers right."""
    dml.configure()
    n, size = 8, 16
    base = np.random.default_rng(0).random((size, size)).astype(np.float32)
    if kind == "torch-cuda" and not torch.cuda.is_available():
        pytest.skip("CUDA is not available here")
    y = base if kind == "numpy" else torch.from_numpy(base)
    if kind == "torch-cuda":
        y = y.cuda()
    shared = [0, 0]
    stop = time.monotonic() + 1.0
    errors = []

    def caller():
        try:
            while time.monotonic() < stop:
                dml.slice1(y, shared, [n, n], [1, 1])
        except Exception as e:            # noqa: BLE001 - reported below
            errors.append(e)

    def mutator():
        rng = np.random.default_rng(1)
        while time.monotonic() < stop:
            shared[rng.integers(2)] = int(rng.integers(size - n + 1))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=caller) for _ in range(2)] + [threading.Thread(target=mutator)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors
    _check_every_window(y, n)
    dml.configure()


@pytest.mark.parametrize("kind", ["numpy", "torch", "torch-grad"])
def test_cache_on_and_off_agree_under_threads_with_shared_arguments(kind):
    """Threads share the argument lists (read, never written) and the input;
    every answer, with the call cache on, equals the one computed with it off."""
    base = np.random.default_rng(2).random((2, 3, 9, 8)).astype(np.float32)
    x = {"numpy": base, "torch": torch.from_numpy(base.copy()),
         "torch-grad": torch.from_numpy(base.copy()).requires_grad_()}[kind]
    window = ([0, 1, 2, 1], [2, 2, 6, 6], [1, -1, -2, 3])
    unfold_args = ([2, 3], [1, 2], [2, 1], [1, 0], [0, 2])
    calls_ = [lambda: dml.slice1(x, *window), lambda: dml.unfold(x, *unfold_args),
              lambda: dml.slice(x, [0, 0, 1, 1], [2, 3, 4, 3], [1, 1, 2, 2])]

    def plain(v):
        return v.detach().numpy().copy() if isinstance(v, torch.Tensor) else v.copy()
    with dml.configure(call_cache=False):
        want = [plain(c()) for c in calls_]
    errors, mismatches = [], []

    def worker():
        try:
            for i in range(300):
                k = i % len(calls_)
                if not np.array_equal(plain(calls_[k]()), want[k]):
                    mismatches.append(k)
        except Exception as e:            # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not mismatches
