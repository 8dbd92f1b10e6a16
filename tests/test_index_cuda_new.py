"""The index functions' new shapes on CUDA memory (issue 33): a call of gather, gather_elements, gather_nd,
scatter_elements, scatter_nd, one_hot or reverse_subsequences on PyTorch CUDA tensors or CuPy arrays, of a
shape the call cache never saw, is lowered (newshape_index.c), planned (cuda_index_spec.c, cuda_move_spec.c),
allocated, launched and recorded in C (``runtime.calls.index_new``): no description is built, the next such
call is a call-cache hit, and the outputs and errors are the Python route's byte for byte. A checked call
runs its index check in the route (the indices' extremes read back from the device), then its unchecked twin
from C; what C leaves to the route (an overwriting scatter that needs an owner table, a sort or a group)
gives the route's bytes too. Needs a GPU
(``@pytest.mark.cuda``); the launch planning itself is compared with the Python route's without one in
``tests/runtime/test_cuda_index_spec.py``."""
from __future__ import annotations

import numpy as np
import pytest

import opendml as dml
from opendml.arrays import engine, index_ops
from opendml.runtime import calls as ccache
from opendml.runtime.cuda import index, launch
from tests.test_family_cuda_cache import FRAMEWORKS, assert_same, device, outcome

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
    other bytes or another error than the route (C must leave them to it)."""
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


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_checked_calls_run_from_c_once_their_indices_are_checked(fw, monkeypatch):
    """Can fail: a checked call (the default) whose indices are in range builds a description (the Python
    route's planning) where it should run as its unchecked twin from C, gives other bytes than the route,
    or its repeat is not a call-cache hit; one with an index out of range must raise the route's error."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((3, 40, 24)) * 30).astype(np.float32)
    calls = [(lambda a, i: dml.gather(a, i, 1), (x, rng.integers(-40, 40, (7, 2)).astype(np.int64))),
             (lambda a, i: dml.gather_elements(a, i, 2), (x, rng.integers(0, 24, (3, 40, 9)).astype(np.int32))),
             (lambda a, i: dml.gather_nd(a, i), (x, rng.integers(0, 3, (5, 2)).astype(np.int64)))]
    for fn, arrays in calls:
        xs = tuple(device(fw, a) for a in arrays)
        want = python_route(fn, *xs)
        got, again = c_route(fn, xs, monkeypatch)
        assert_same(got, want)
        assert_same(again, want)
    bad = tuple(device(fw, a) for a in (x, np.array([0, 40, 1])))
    want = python_route(calls[0][0], *bad)
    assert isinstance(want, dml.ValidationError)
    ccache.clear()
    assert_same(outcome(lambda _: calls[0][0](*bad), None), want)
