"""The data-movement family's new shapes on CUDA memory (issue 33): a call on
PyTorch CUDA tensors or CuPy arrays of a shape the call cache never saw is
lowered, planned, allocated, launched and recorded in C
(``runtime.calls.move_new``: newshape_move.c, cuda_move_spec.c,
calls_move_new.c); the Python route's builder never runs, the call cache holds
the entry ``put_move_cuda`` would make (the next such call is a hit), and the
outputs and errors are the Python route's byte for byte: every family
operator, random shapes, layouts (packed, transposed, strided, broadcast,
flipped for CuPy, an element off 16 bytes) and dtypes, invalid arguments,
misaligned data, threads each on its own stream, ``opendml.configure()`` and
``steps``' launch settings, and kernels not yet compiled. Needs a GPU
(``@pytest.mark.cuda``); the launch planning itself is compared with the
Python route's without one in ``tests/runtime/test_cuda_move_spec.py``."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import opendml as dml
from opendml.arrays import front
from opendml.ops import DiagonalMatrix1OperatorDesc
from opendml.runtime import calls as ccache
from opendml.runtime.cuda import launch, steps
from tests.conftest import run_in_threads
from tests.test_family_cuda_cache import (FRAMEWORKS, _cupy, _torch_cuda, assert_same, device, host, listed, outcome,
                                          side_stream)

pytestmark = pytest.mark.cuda


def cpu_of(fw, x):
    """``x`` on the CPU (a NumPy array), for a reference run."""
    return host(x)


#: (name, call on x, the input's shape for (n, c, h, w) drawn at random)
CALLS = [
    ("identity", lambda t: dml.identity(t), None),
    ("identity", lambda t: dml.identity(t, scale=2.0, bias=-1.0), None),
    ("cast", lambda t: dml.cast(t, np.float16), None),
    ("cast", lambda t: dml.cast(t, "int32"), None),
    ("pad", lambda t: dml.pad(t, [0, 0, 1, 2], [0, 0, 2, 1], "constant", 3.5), None),
    ("pad", lambda t: dml.pad(t, [0, 1, 1, 2], [0, 0, 2, 17], "edge"), None),
    ("pad", lambda t: dml.pad(t, [0, 0, 1, 1], [0, 0, 1, 1], "reflect"), None),
    ("pad", lambda t: dml.pad(t, [0, 0, 1, 2], [0, 0, 2, 1], "symmetric"), None),
    ("pad", lambda t: dml.pad(t, 1, 1, "wrap"), None),
    ("join", lambda t: dml.join([t, t], 1), None),
    ("join", lambda t: dml.join((t, t[:, :1], t), 1), None),
    ("split", lambda t: dml.split(t, 3, [1, t.shape[3] - 1]), None),
    ("tile", lambda t: dml.tile(t, [1, 2, 1, 2]), None),
    ("space_to_depth", lambda t: dml.space_to_depth(t, 2), lambda n, c, h, w: (n, c, 2 * h, 2 * w)),
    ("space_to_depth", lambda t: dml.space_to_depth(t, 2, "CRD"), lambda n, c, h, w: (n, c, 2 * h, 2 * w)),
    ("depth_to_space", lambda t: dml.depth_to_space(t, 2), lambda n, c, h, w: (n, 4 * c, h, w)),
    ("depth_to_space", lambda t: dml.depth_to_space(t, 2, "CRD"), lambda n, c, h, w: (n, 4 * c, h, w)),
    ("diagonal_matrix", lambda t: dml.diagonal_matrix(t, value=7, begin=-1, end=2), None),
]
IDS = [f"{n}-{i}" for i, (n, _, _) in enumerate(CALLS)]


def layouts(fw, rng, shape, dtype):
    """The input in several layouts: packed, transposed (last two axes), strided, broadcast, an element off
    16 bytes, and (CuPy) flipped."""
    n, c, h, w = shape
    a = (rng.standard_normal((n, c, h, w)) * 40).astype(dtype)
    out = {"packed": device(fw, a),
           "transposed": device(fw, np.ascontiguousarray(a.swapaxes(2, 3))).swapaxes(2, 3),
           "strided": device(fw, np.repeat(a, 2, axis=3))[:, :, :, ::2],
           "broadcast": device(fw, a[:, :, :1]).expand(n, c, h, w) if fw == "torch"
           else __import__("cupy").broadcast_to(device(fw, a[:, :, :1]), (n, c, h, w))}
    flat = device(fw, np.concatenate([np.zeros(1, dtype), a.reshape(-1)]))
    out["element off"] = flat[1:].reshape(n, c, h, w) if fw == "cupy" else flat[1:].view(n, c, h, w)
    if fw == "cupy":
        out["flipped"] = device(fw, a)[:, :, ::-1, ::-1]
    return out


def python_route(fn, x):
    """``fn(x)`` through the Python route: no C lowering, no call cache."""
    real = front._move_new
    front._move_new = lambda *a: None
    try:
        with dml.configure(call_cache=False):
            return outcome(fn, x)
    finally:
        front._move_new = real


def c_route(fn, x, name, monkeypatch, valid=True):
    """``fn(x)`` on a cache that never saw it: where the call is ``valid``,
    the Python route's builder (and DIAGONAL_MATRIX's description) fails the
    test if it runs (an invalid call takes the Python route, which raises);
    returns the outcome and the entries it made."""
    ccache.clear()
    before = ccache.info()["entries"]
    with monkeypatch.context() as m:
        if valid:
            m.setitem(front._BUILD, name, lambda *a: pytest.fail(f"{name}: the Python route ran"))
            m.setattr(DiagonalMatrix1OperatorDesc, "__init__", lambda *a, **k: pytest.fail("a description was built"))
        got = outcome(fn, x)
    return got, ccache.info()["entries"] - before


@pytest.mark.parametrize("fw", FRAMEWORKS)
@pytest.mark.parametrize("name,fn,shape_of", CALLS, ids=IDS)
def test_new_shapes_take_the_c_route_and_equal_the_python_route(fw, name, fn, shape_of, monkeypatch):
    rng = np.random.default_rng(zlib.crc32(f"{fw} {name}".encode()))
    for dtype in ("float32", ["float16", "int64", "uint8"][len(name) % 3]):
        n, c, h, w = (int(v) for v in rng.integers(1, 3, 1).tolist() + rng.integers(1, 4, 1).tolist()
                      + rng.integers(2, 9, 2).tolist())
        shape = shape_of(n, c, h, w) if shape_of else (n, c, h, w)
        for layout, x in layouts(fw, rng, shape, dtype).items():
            want = python_route(fn, x)
            got, made = c_route(fn, x, name, monkeypatch, not isinstance(want, BaseException))
            assert_same(got, want)
            if isinstance(want, BaseException):
                assert made == 0
                continue
            assert made == 1, (layout, dtype)
            hits = ccache.info()["hits"]
            assert_same(outcome(fn, x), want)                  # the record serves a repeat
            assert ccache.info()["hits"] == hits + 1, (layout, dtype)
            for g, r in zip(listed(want), listed(fn(cpu_of(fw, x)))):     # and the NumPy route's bytes
                assert host(g).tobytes() == np.asarray(r).tobytes()


INVALID = [
    ("pad", lambda t: dml.pad(t, [0, 0, -1, 0], [0, 0, 0, 0], "edge")),
    ("pad", lambda t: dml.pad(t, 1, 1, "nope")),
    ("pad", lambda t: dml.pad(t, 1, 1, "constant", 1e39)),
    ("cast", lambda t: dml.cast(t, np.complex64)),
    ("identity", lambda t: dml.identity(t.astype("int32") if hasattr(t, "astype") else t.int(), scale=2.0)),
    ("join", lambda t: dml.join([t, t[:, :, :2, :2]], 1)),
    ("split", lambda t: dml.split(t, 3, [1, 1])),
    ("space_to_depth", lambda t: dml.space_to_depth(t, 3)),
    ("tile", lambda t: dml.tile(t, [1, 0, 1, 1])),
    ("diagonal_matrix", lambda t: dml.diagonal_matrix(t, value=1, begin=2**31, end=0)),
]


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_errors_equal_the_python_route(fw):
    x = device(fw, np.ones((1, 2, 4, 5), np.float32))
    for name, fn in INVALID:
        want = python_route(fn, x)
        assert isinstance(want, Exception), name
        ccache.clear()
        for _ in range(2):
            assert_same(outcome(fn, x), want)
        assert ccache.info()["entries"] == 0, name


def test_misaligned_cupy_data_is_the_python_routes_error():
    if not _cupy():
        pytest.skip("no CuPy GPU")
    import cupy
    raw = cupy.zeros(4 * 24 + 4, np.uint8)
    x = cupy.ndarray((4, 6), np.float32, memptr=raw.data + 2)
    want = python_route(dml.identity, x)
    assert isinstance(want, dml.UnsupportedError)
    ccache.clear()
    assert_same(outcome(dml.identity, x), want)
    assert ccache.info()["entries"] == 0


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_threads_each_on_its_own_stream(fw):
    """Threads calling never-seen shapes at once, each on its own stream:
    every output equals the CPU route's."""
    def worker(seed):
        rng = np.random.default_rng(seed)
        with side_stream(fw):
            for i in range(25):
                name, fn, shape_of = CALLS[int(rng.integers(len(CALLS)))]
                n, c, h, w = 1, int(rng.integers(1, 4)), int(rng.integers(2, 40)), int(rng.integers(2, 40))
                a = rng.standard_normal(shape_of(n, c, h, w) if shape_of else (n, c, h, w)).astype(np.float32)
                for g, r in zip(listed(fn(device(fw, a))), listed(fn(a))):
                    assert host(g).tobytes() == np.asarray(r).tobytes(), (name, a.shape)
    run_in_threads(worker)


SETTINGS = [{"FUSE_PAD": "rows"}, {"FUSE_PAD": "words"}, {"FUSE_PAD": True}, {"FUSE_PAD": False},
            {"WORD_COPY": 0}, {"TRANSPOSE_TILE": 32}, {"MOVE_PLAIN_VIA": "move"}, {"CVT_UNROLL": 0}]


@pytest.mark.parametrize("fw", FRAMEWORKS)
@pytest.mark.parametrize("setting", SETTINGS, ids=[str(s) for s in SETTINGS])
def test_after_configure_and_launch_settings(fw, setting, monkeypatch):
    """steps.py's launch settings changed (C plans with them) and
    ``configure(call_cache=False)`` (C still runs the call, records nothing):
    the Python route's bytes."""
    rng = np.random.default_rng(len(str(setting)))
    for attr, value in setting.items():
        monkeypatch.setattr(steps, attr, value)
    for name, fn, shape_of in CALLS:
        a = rng.standard_normal(shape_of(1, 2, 5, 18) if shape_of else (1, 2, 5, 18)).astype(np.float32)
        x = device(fw, a)
        want = python_route(fn, x)
        got, made = c_route(fn, x, name, monkeypatch)
        assert_same(got, want)
        assert made == 1, name
        with dml.configure(call_cache=False):
            assert_same(c_route(fn, x, name, monkeypatch)[0], want)
            assert ccache.info()["entries"] == 0


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_kernels_not_compiled_yet_are_compiled_and_the_call_made_again(fw, monkeypatch):
    monkeypatch.setattr(launch, "_NEW_KERNELS", {})                # (new_kernels() reads it at each call)
    a = np.arange(2 * 3 * 7 * 9, dtype=np.float32).reshape(2, 3, 7, 9)
    x = device(fw, a)
    front.adapter_for(x)         # (its adapter registers the array type with C: a process's first call goes first)
    got, made = c_route(lambda t: dml.pad(t, 1, 2, "reflect"), x, "pad", monkeypatch)
    assert made == 1 and launch._NEW_KERNELS
    assert host(listed(got)[0]).tobytes() == np.pad(a, ((1, 2),) * 4, "reflect").tobytes()


@pytest.mark.skipif(not _torch_cuda(), reason="no PyTorch CUDA")
@pytest.mark.parametrize("fn", [lambda t: dml.pad(t, [1, 2], [2, 1], "constant", 0.0),
                                lambda t: dml.slice1(t, [0, 0], [3, 4], [1, -1])], ids=["pad", "slice1"])
def test_a_served_call_whose_input_moves_during_the_allocation_reads_it_anew(fn, monkeypatch):
    """A served call (the family's entry, or the first five's) whose input is given another storage while
    its output is allocated through Python (``x.set_()`` run by ``new_empty``, as a finalizer could): the
    same dtype, sizes, strides and address class mod 16 (the key's words), another address. The output is
    the one for the input as it is now (the Python route's), never a read of the released storage."""
    import torch
    x = torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4)
    other = x + 100
    with dml.configure(torch_node="off"):            # (the cache reads tensors and allocates through Python)
        want = fn(other).cpu()
        fn(x)
        before = ccache.info()["hits"]
        fn(x)
        assert ccache.info()["hits"] == before + 1  # (served from C)
        real, moved = torch.Tensor.new_empty, []

        def new_empty(self, *args, **kwargs):
            if not moved:
                moved.append(x.data_ptr())
                x.set_(other)                        # x's old storage released
            return real(self, *args, **kwargs)
        monkeypatch.setattr(torch.Tensor, "new_empty", new_empty)
        got = fn(x)
        monkeypatch.undo()
    assert moved and moved[0] != x.data_ptr() == other.data_ptr()
    assert torch.equal(got.cpu(), want)
