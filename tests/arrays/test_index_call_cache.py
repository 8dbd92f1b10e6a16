"""The index-driven functions on the one C call cache: a repeated call
(same function, arguments, dtypes, shapes and strides, new values) is served
from C on NumPy arrays, PyTorch CPU tensors (through NumPy views) and, on a
GPU, PyTorch CUDA tensors and CuPy arrays; it gives the plain route's bytes
and, for a bad index, the plain route's error, also after ``configure()``
and from several threads at once."""
from __future__ import annotations

import numpy as np
import pytest

import opendml as dml
from opendml.runtime import calls

from ..conftest import cuda_available, native_available, run_in_threads

pytestmark = pytest.mark.skipif(not native_available(), reason="the compiled extension is not built")

X = np.arange(1, 31, dtype=np.float32).reshape(5, 6)
UPD = np.arange(100, 110, dtype=np.float32).reshape(2, 5)

#: name -> (call(arrays, check), good arrays, arrays with a bad index or None)
CASES = {
    "gather": (lambda a, c: dml.gather(a[0], a[1], 1, check_indices=c),
               [X, np.array([[5, 0, -1], [2, 2, 3]], np.int64)], [X, np.array([[5, 0, 6], [2, 2, 3]], np.int64)]),
    "gather_elements": (lambda a, c: dml.gather_elements(a[0], a[1], 0, check_indices=c),
                        [X, np.array([[4, 0, 1, 2, 3, 0]], np.int32)], [X, np.array([[4, 0, 1, 5, 3, 0]], np.int32)]),
    "gather_nd": (lambda a, c: dml.gather_nd(a[0], a[1], check_indices=c),
                  [X, np.array([[0, 1], [4, 5], [2, 2]], np.uint32)], [X, np.array([[0, 1], [4, 6], [2, 2]], np.uint32)]),
    "scatter_elements": (lambda a, c: dml.scatter_elements(a[0], a[1], a[2], 1, check_indices=c),
                         [X[:2], np.array([[0, 2, 4, 1, 1], [5, 4, 3, 2, 0]], np.int64), UPD],
                         [X[:2], np.array([[0, 2, 4, 1, 1], [5, 4, -7, 2, 0]], np.int64), UPD]),
    "scatter_nd": (lambda a, c: dml.scatter_nd(a[0], a[1], a[2], check_indices=c),
                   [X, np.array([[3], [0]], np.uint64), X[:2] + 100], [X, np.array([[3], [5]], np.uint64), X[:2] + 100]),
    "one_hot": (lambda a, c: dml.one_hot(a[0], 4, a[1], -1),
                [np.array([[0, 3], [-1, 7]], np.int32), np.array([0.5, 2.0], np.float32)], None),
    "reverse_subsequences": (lambda a, c: dml.reverse_subsequences(a[0], a[1], 1),
                             [X, np.array([0, 1, 6, 9, 3], np.uint32)], None),
    "diagonal_matrix": (lambda a, c: dml.diagonal_matrix(a[0], value=-1, begin=0, end=2), [X], None),
}
NAMES = sorted(CASES)


def _hits() -> int:
    return calls.info()["hits"]


def _host(a):
    return a if isinstance(a, np.ndarray) else a.detach().cpu().numpy()


def _plain(call, arrays, check):
    """The plain route (the call cache off): its output, or its error's text."""
    with dml.configure(call_cache=False):
        try:
            return _host(call(arrays, check)).copy()
        except dml.ValidationError as e:
            return str(e)


def _served(call, arrays, check):
    """The call served from the cache (hits move), its output or error's text."""
    before = _hits()
    try:
        got = _host(call(arrays, check)).copy()
    except dml.ValidationError as e:
        return str(e)
    assert _hits() > before, "the repeated call was not served by the C call cache"
    return got


def _maker(framework: str):
    if framework == "numpy":
        return lambda a: [x.copy() for x in a]
    torch = pytest.importorskip("torch")
    return lambda a: [torch.from_numpy(x.copy()) for x in a]


def _same(got, want):
    if isinstance(want, str):
        assert got == want
    else:
        assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("framework", ["numpy", "torch-cpu"])
@pytest.mark.parametrize("name", NAMES)
def test_a_served_repeat_gives_the_plain_routes_bytes_and_errors(name, framework):
    make = _maker(framework)
    call, good, bad = CASES[name]
    for check in (True, False):
        # (the plain route's outcomes first: its configure(call_cache=False) empties the cache when it ends)
        renewed = [np.ascontiguousarray(a[::-1]) if a.dtype.kind == "f" else a for a in good]
        want, want_renewed = _plain(call, make(good), check), _plain(call, make(renewed), check)
        want_bad = None if bad is None else _plain(call, make(bad), check)
        dml.configure()                                   # empty: the first call records, the next is served
        call(make(good), check)
        _same(_served(call, make(good), check), want)
        # new values, same layout: served, and reading them
        _same(_served(call, make(renewed), check), want_renewed)
        if bad is not None:
            # a bad index in a call the cache holds: the route's error (checked) or its clamped bytes, served
            if check:
                with pytest.raises(dml.ValidationError) as e:
                    call(make(bad), True)
                assert str(e.value) == want_bad and "is out of range" in want_bad
            else:
                _same(_served(call, make(bad), False), want_bad)
        # configure() empties the cache; configure(call_cache=False) serves nothing
        dml.configure()
        assert calls.info()["entries"] == 0
        before = _hits()
        with dml.configure(call_cache=False):
            for _ in range(2):
                _same(_host(call(make(good), check)).copy(), want)
        assert _hits() == before and calls.info()["entries"] == 0
        call(make(good), check)
        _same(_served(call, make(good), check), want)


@pytest.mark.parametrize("name", NAMES)
def test_served_calls_from_threads(name):
    """Four threads repeating the call (two of them with a bad index where
    the function checks) while a fifth empties the cache: every output the
    plain route's bytes, every error its text."""
    call, good, bad = CASES[name]
    want_good = _plain(call, good, True)
    want_bad = _plain(call, bad, True) if bad is not None else None

    def work(k):
        for j in range(150):
            if k == 4:
                if j % 30 == 0:
                    dml.configure()
                continue
            arrays, want = (bad, want_bad) if bad is not None and k % 2 and j % 3 == 0 else (good, want_good)
            try:
                got = call([a.copy() for a in arrays], True)
            except dml.ValidationError as e:
                got = str(e)
            _same(got, want)
    run_in_threads(work, 5)


@pytest.mark.parametrize("name", ["gather", "gather_elements", "scatter_elements", "scatter_nd"])
def test_a_served_check_reads_every_index(name):
    """A bad index anywhere in a served checked call: the route's error
    naming that index (the check is fused into the passes, which read every
    index of these layouts)."""
    call, good, bad = CASES[name]
    call(good, True)
    idx = good[1]
    for pos in np.ndindex(idx.shape):
        b = idx.copy()
        b[pos] = 99
        arrays = [good[0], b] + good[2:]
        want = _plain(call, arrays, True)
        assert "= 99 is out of range" in want
        with pytest.raises(dml.ValidationError) as e:
            call(arrays, True)
        assert str(e.value) == want


@pytest.mark.cuda
@pytest.mark.parametrize("framework", ["torch", "cupy"])
@pytest.mark.parametrize("name", NAMES)
def test_cuda_served_repeat(name, framework):
    """On a GPU a repeat (``check_indices=False``, or a function without a
    check) is served from C: the launches queued on the current stream; the
    bytes equal the plain route's and the NumPy route's (clamped indices
    included)."""
    if not cuda_available():
        pytest.skip("CUDA is not available here")
    if framework == "torch":
        torch = pytest.importorskip("torch")
        make = lambda a: [torch.from_numpy(x.copy()).cuda() for x in a]  # noqa: E731
    else:
        cupy = pytest.importorskip("cupy")
        make = lambda a: [cupy.asarray(x) for x in a]  # noqa: E731

    def host(a):
        return a.get() if hasattr(a, "get") else a.detach().cpu().numpy()
    call, good, bad = CASES[name]
    for arrays in [good] + ([bad] if bad is not None else []):
        want = call([a.copy() for a in arrays], False)
        dml.configure()
        call(make(arrays), False)
        before = _hits()
        got = host(call(make(arrays), False))
        assert _hits() > before, f"{name} ({framework}): the repeat was not served by the C call cache"
        assert got.tobytes() == np.asarray(want).tobytes() and got.shape == want.shape
        with dml.configure(call_cache=False):
            plain = host(call(make(arrays), False))
        assert plain.tobytes() == got.tobytes()
    if bad is not None:                                  # a checked call: the route's error, every time
        for _ in range(2):
            with pytest.raises(dml.ValidationError) as e:
                call(make(bad), True)
            assert str(e.value) == _plain(call, bad, True)
