"""The index-driven operators on CUDA (runtime/cuda/index.cu): CuPy arrays and
PyTorch CUDA tensors give the CPU backend's bytes for every operator, data
type and index type, hostile index values (huge, negative, int64 extremes,
out of range with the check off) and non-contiguous layouts included;
scatters with repeated indices and the accumulating adjoints give the same
bytes on every run, through each of the scatter's strategies."""
import numpy as np
import pytest

import opendml as dml

from .conftest import cuda_available
from .test_index_ops import hostile

pytestmark = pytest.mark.cuda

INDEX_TYPES = (np.int32, np.int64, np.uint32, np.uint64)
DATA_TYPES = (np.float32, np.float16, np.float64, np.int8, np.uint16, np.int32, np.uint64)


@pytest.fixture(scope="module")
def cp():
    if not cuda_available():
        pytest.skip("CUDA is not available here")
    return pytest.importorskip("cupy")


@pytest.fixture(params=["auto", "owner", "sort"])
def scatter_via(request, cp):
    """Overwriting scatters through each strategy (launches recorded under
    another, and the C call cache's entries holding them, are dropped first)."""
    from opendml.runtime import calls, get_backend
    from opendml.runtime.cuda import index
    old, index.SCATTER_VIA = index.SCATTER_VIA, request.param
    get_backend("cuda:0")._launches.clear()
    calls.clear()
    yield request.param
    index.SCATTER_VIA = old
    get_backend("cuda:0")._launches.clear()
    calls.clear()


def values(rng, shape, dt):
    dt = np.dtype(dt)
    if dt.kind == "f":
        return (rng.standard_normal(shape) * 8).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)


def indices(rng, shape, n, dt, hostile_every=5):
    """Values around [-n, n) (only [0, n + 2] for unsigned types), every
    ``hostile_every``-th one an extreme of the type; many repeats."""
    lo = 0 if np.dtype(dt).kind == "u" else -n - 2
    out = rng.integers(lo, n + 2, shape).astype(dt)
    flat = out.reshape(-1)
    extremes = hostile(dt, flat.size)
    flat[::hostile_every] = extremes[::hostile_every]
    return out


def check(cp, fn, *arrays, views=None, **kw):
    """``fn`` on NumPy arrays (the CPU backend) and on CuPy copies (CUDA),
    twice: the same dtype, shape and bytes every time. ``views`` maps each
    array to the view both sides take of it (non-contiguous layouts)."""
    views = views or (lambda a: a)
    want = fn(*[views(a) for a in arrays], **kw)
    outs = []
    for _ in range(2):
        got = fn(*[views(cp.asarray(a)) for a in arrays], **kw)
        assert isinstance(got, cp.ndarray)
        outs.append(cp.asnumpy(got))
    for g in outs:
        assert g.dtype == want.dtype and g.shape == want.shape
        assert g.tobytes() == np.ascontiguousarray(want).tobytes()


@pytest.mark.parametrize("it", INDEX_TYPES)
@pytest.mark.parametrize("dt", DATA_TYPES)
def test_gathers_match_the_cpu_bytes(cp, dt, it):
    rng = np.random.default_rng(7)
    x = values(rng, (4, 5, 6), dt)
    for axis in range(3):
        idx = indices(rng, (3, 7), x.shape[axis], it)
        check(cp, dml.gather, x, idx, axis=axis, check_indices=False)
        ie = indices(rng, tuple(9 if k == axis else n for k, n in enumerate(x.shape)), x.shape[axis], it)
        check(cp, dml.gather_elements, x, ie, axis=axis, check_indices=False)
    table = values(rng, (40, 64), dt)                     # embedding rows: 16-byte words
    check(cp, dml.gather, table, indices(rng, (200,), 40, it), axis=0, check_indices=False)
    check(cp, dml.gather, table, indices(rng, (50,), 40, it), axis=0, check_indices=False,
          views=lambda a: a[:, ::-1] if a.ndim == 2 else a)                 # a reversed row
    check(cp, dml.gather, x, indices(rng, (5,), 6, it), axis=1, check_indices=False,
          views=lambda a: a.transpose(2, 0, 1) if a.ndim == 3 else a)       # a permuted layout
    check(cp, dml.gather_nd, x, indices(rng, (6, 2), 4, it), check_indices=False)
    check(cp, dml.gather_nd, x, indices(rng, (4, 3, 2), 5, it), batch_dimensions=1, check_indices=False)
    check(cp, dml.gather_nd, x, indices(rng, (8, 3), 4, it), check_indices=False)


@pytest.mark.parametrize("it", INDEX_TYPES)
@pytest.mark.parametrize("dt", DATA_TYPES)
def test_scatters_with_repeats_match_the_cpu_bytes(cp, dt, it, scatter_via):
    rng = np.random.default_rng(11)
    x = values(rng, (6, 5, 4), dt)
    for axis in range(3):
        shape = tuple(9 if k == axis else n for k, n in enumerate(x.shape))
        idx = indices(rng, shape, 3, it)                  # few positions: many repeats
        check(cp, dml.scatter_elements, x, idx, values(rng, shape, dt), axis=axis, check_indices=False)
    for q, mid in ((1, (10,)), (2, (7,)), (3, (12,)), (1, (3, 4))):
        idx = indices(rng, mid + (q,), 3, it)
        upd = values(rng, mid + x.shape[q:], dt)
        check(cp, dml.scatter_nd, x, idx, upd, check_indices=False)
    wide = values(rng, (3, 1000), dt)                     # a group scatter's rows: more members than threads
    for view in (None, lambda a: a[::-1, ::-1]):
        idx = indices(rng, (3, 1300), 1000, it)
        check(cp, dml.scatter_elements, wide, idx, values(rng, (3, 1300), dt), axis=1, check_indices=False,
              views=view)
    rows = values(rng, (30, 64), dt)                      # row scatter: 16-byte words
    check(cp, dml.scatter_nd, rows, indices(rng, (50, 1), 30, it), values(rng, (50, 64), dt),
          check_indices=False)


@pytest.mark.parametrize("it", INDEX_TYPES)
def test_one_hot_and_reverse_subsequences_match_the_cpu_bytes(cp, it):
    rng = np.random.default_rng(5)
    for dt in DATA_TYPES:
        idx = indices(rng, (5, 7), 6, it, hostile_every=3)
        for axis in (-1, 0, 1):
            check(cp, lambda i, v: dml.one_hot(i, 6, v, axis), idx, values(rng, (2,), dt))
        if it in (np.uint32, np.uint64):
            x = values(rng, (6, 5, 4), dt)
            check(cp, dml.reverse_subsequences, x, indices(rng, (1, 5, 4), 9, it, 4), axis=0)
            check(cp, dml.reverse_subsequences, x, indices(rng, (6, 1, 4), 7, it, 4), axis=1)
            check(cp, dml.reverse_subsequences, x, indices(rng, (6, 5), 6, it, 4), axis=2)


def test_index_errors_are_the_cpu_errors(cp):
    x = np.zeros((3, 4), np.float32)
    bad = np.array([[0, 4]], np.int64)
    for a, i in ((x, bad), (cp.asarray(x), cp.asarray(bad))):
        with pytest.raises(dml.ValidationError, match=r"^gather: indices\[0, 1\] = 4 is out of range"):
            dml.gather(a, i, 1)


def test_the_kernels_that_run(cp, scatter_via, monkeypatch):
    """Each strategy really runs: the recorded launches name its kernels
    (the Python route's: the C new-shape route, which takes one_hot's
    never-seen shape, is turned off here)."""
    from opendml.arrays import cuda as family_cuda
    from opendml.arrays import index_ops
    monkeypatch.setattr(index_ops, "_index_new", lambda *a: None)
    seen = []
    real = family_cuda.get_backend

    class Spy:
        def __init__(self, b):
            self.b = b

        def record_move(self, *a, **k):
            rec = self.b.record_move(*a, **k)
            seen.extend(rec.names)
            return rec
    family_cuda.get_backend = lambda name: Spy(real(name))
    try:
        x = cp.zeros((8, 16), cp.float32)
        dml.scatter_nd(x, cp.asarray([[1], [1], [3]], cp.int64), cp.ones((3, 16), cp.float32))
        dml.one_hot(cp.asarray([1, 7, 2], cp.int32), 4, cp.asarray([0, 1], cp.float16))
        dml.scatter_elements(cp.zeros((4, 600), cp.float32), cp.asarray(np.arange(2800).reshape(4, 700) % 600),
                             cp.ones((4, 700), cp.float32), 1)
    finally:
        family_cuda.get_backend = real
    want = {"auto": "ix_scatter<uint4, u32, 1,", "owner": "ix_scatter<uint4, u32, 1,",
            "sort": "ix_apply<uint4, u32, u32, 0,"}[scatter_via]
    assert any(n.startswith(want) for n in seen), seen
    assert any(n.startswith("ix_scatter<u16, u32, 0,") for n in seen), seen     # one_hot: no owner pass
    want = {"auto": "ix_scatter_group<u32, u32, 2", "owner": "ix_owner<u32, 2,", "sort": "ix_keys<u32, u32, 2,"}
    assert any(n.startswith(want[scatter_via]) for n in seen), seen             # scatter_elements along rows


def test_torch_cuda_forward_and_deterministic_backward(cp):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA here")
    rng = np.random.default_rng(3)
    for dt in (torch.float32, torch.float16, torch.float64):
        table = torch.from_numpy(rng.standard_normal((20, 24))).to(dt)
        idx = torch.from_numpy(rng.integers(-20, 20, (300,)))
        grad = torch.from_numpy(rng.standard_normal((300, 24))).to(dt)
        outs = {}
        for dev in ("cpu", "cuda", "cuda"):
            t = table.to(dev).detach().requires_grad_()
            y = dml.gather(t, idx.to(dev), 0)
            y.backward(grad.to(dev))            # an accumulating scatter: 300 rows into 20
            outs.setdefault(dev, []).append((y.detach().cpu().numpy().tobytes(), t.grad.cpu().numpy().tobytes()))
        assert outs["cuda"][0] == outs["cuda"][1] == outs["cpu"][0], dt
        # scatter: the updates' gradient gathers with 0 for overwritten repeats (last_only)
        x = torch.from_numpy(rng.standard_normal((10, 6))).to(dt)
        pos = torch.from_numpy(rng.integers(0, 10, (40, 1)))
        upd = torch.from_numpy(rng.standard_normal((40, 6))).to(dt)
        g = torch.from_numpy(rng.standard_normal((10, 6))).to(dt)
        got = {}
        for dev in ("cpu", "cuda"):
            xx, uu = x.to(dev).detach().requires_grad_(), upd.to(dev).detach().requires_grad_()
            y = dml.scatter_nd(xx, pos.to(dev), uu)
            y.backward(g.to(dev))
            got[dev] = [a.detach().cpu().numpy().tobytes() for a in (y, xx.grad, uu.grad)]
        assert got["cuda"] == got["cpu"], dt


@pytest.mark.parametrize("it", INDEX_TYPES)
def test_row_gathers_and_wide_tiles_match_the_cpu_bytes(cp, it):
    """gather_elements along rows (``ix_gather_row``: the row staged in shared
    memory, or read in place where it is too long to stage) and reversals
    staged as 128-byte columns (a tile above 48 KiB opts in), hostile values
    included."""
    rng = np.random.default_rng(13)
    for dt in (np.float32, np.float16, np.float64, np.int8):
        x = values(rng, (3, 300), dt)
        check(cp, dml.gather_elements, x, indices(rng, (3, 400), 300, it), axis=1, check_indices=False)
        check(cp, dml.gather_elements, x, indices(rng, (3, 300), 300, it), axis=1, check_indices=False,
              views=lambda a: a[::-1, ::-1])                # reversed rows and rows read backwards
        long = values(rng, (2, 14000), dt)                # 14000 words: staged only where they fit 48 KiB
        check(cp, dml.gather_elements, long, indices(rng, (2, 3000), 14000, it), axis=1, check_indices=False)
        if it in (np.uint32, np.uint64):
            y = values(rng, (500, 2, 64), dt)
            check(cp, dml.reverse_subsequences, y, indices(rng, (1, 2, 64), 510, it, 4), axis=0)
            check(cp, dml.reverse_subsequences, y, indices(rng, (1, 2, 64), 510, it, 4), axis=0,
                  views=lambda a: a[:, :, ::-1])          # columns read backwards: no 16-byte copies
            check(cp, dml.reverse_subsequences, y, indices(rng, (1, 2, 64), 510, it, 4), axis=0,
                  views=lambda a: a[:, :, 1:33])          # rows starting off 16 bytes: no 16-byte copies


#: The reversal kernels' settings of runtime/cuda/index.py (benchmarks/gpu_index.py times each).
REVERSE_SETTINGS = ({}, {"REVERSE_BYTES": 64}, {"REVERSE_BYTES": 128}, {"REVERSE_ROWS": 0},
                    {"REVERSE_ROWS": 16384}, {"REVERSE_ROWS": 1024})


@pytest.fixture(params=REVERSE_SETTINGS, ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()) or "default")
def reverse_settings(request, cp):
    """The reversal kernels under each setting (launches recorded under
    another, and the C call cache's entries holding them, dropped first)."""
    from opendml.runtime import calls, get_backend
    from opendml.runtime.cuda import index
    old = {k: getattr(index, k) for k in request.param}
    for k, v in request.param.items():
        setattr(index, k, v)
    get_backend("cuda:0")._launches.clear()
    calls.clear()
    yield request.param
    for k, v in old.items():
        setattr(index, k, v)
    get_backend("cuda:0")._launches.clear()
    calls.clear()


@pytest.mark.parametrize("it", (np.uint32, np.uint64))
@pytest.mark.parametrize("nbytes", (256, 128))
def test_reversal_tiles_in_8_byte_pairs_match_the_cpu_bytes(cp, it, nbytes, monkeypatch):
    """Staged column sets of 4-byte words (lo a multiple of 32: 128- and
    256-byte lines) written two columns a thread (8-byte stores, each
    column's own length), beside 2- and 8-byte words (one a thread): hostile
    lengths (0, past the axis, the type's extremes), along the first and a
    middle axis, columns read backwards and rows off 16 bytes."""
    from opendml.runtime import calls, get_backend
    from opendml.runtime.cuda import index
    monkeypatch.setattr(index, "REVERSE_BYTES", nbytes)
    get_backend("cuda:0")._launches.clear()
    calls.clear()
    rng = np.random.default_rng(29)
    try:
        for dt in (np.float32, np.int32, np.float64, np.float16):
            x = values(rng, (130, 3, 128), dt)
            for _ in range(2):
                check(cp, dml.reverse_subsequences, x, indices(rng, (1, 3, 128), 132, it, 3), axis=0)
            check(cp, dml.reverse_subsequences, x, indices(rng, (1, 3, 128), 132, it, 3), axis=0,
                  views=lambda a: a[:, :, ::-1])                          # columns read backwards
            check(cp, dml.reverse_subsequences, x, indices(rng, (1, 3, 128), 132, it, 3), axis=0,
                  views=lambda a: a[:, :, 1:65] if a.shape[0] > 1 else a[:, :, :64])   # rows off 16 bytes
            y = values(rng, (3, 90, 128), dt)
            check(cp, dml.reverse_subsequences, y, indices(rng, (3, 1, 128), 92, it, 3), axis=1)
    finally:
        get_backend("cuda:0")._launches.clear()
        calls.clear()


@pytest.mark.parametrize("it", (np.uint32, np.uint64))
def test_each_reversal_kernel_matches_the_cpu_bytes(cp, it, reverse_settings):
    """reverse_subsequences along the outermost axis (column sets staged a
    block each, or several a block through two buffers, more sets than
    blocks) and along rows (rows staged a block several), every word size,
    hostile lengths (0, past the axis, the type's extremes), rows and columns
    off 16 bytes and read backwards, under each setting."""
    rng = np.random.default_rng(17)
    for dt in (np.float32, np.float16, np.float64, np.int8):
        x = values(rng, (9, 5, 300), dt)
        for axis, ls in ((0, (1, 5, 300)), (2, (9, 5, 1)), (1, (9, 1, 300))):
            check(cp, dml.reverse_subsequences, x, indices(rng, ls, x.shape[axis] + 2, it, 4), axis=axis)
        check(cp, dml.reverse_subsequences, x, indices(rng, (9, 5, 1), 302, it, 4), axis=2,
              views=lambda a: a[:, :, ::-1] if a.shape[2] > 1 else a)    # rows read backwards
        check(cp, dml.reverse_subsequences, x, indices(rng, (9, 5, 1), 301, it, 4), axis=2,
              views=lambda a: a[:, :, 1:] if a.shape[2] > 1 else a)      # rows starting off 16 bytes
        check(cp, dml.reverse_subsequences, x[:, :, :64], indices(rng, (1, 5, 64), 11, it, 4), axis=0,
              views=lambda a: a[:, :, ::-1])                             # columns read backwards
        check(cp, dml.reverse_subsequences, x[:, :, :64], indices(rng, (9, 1, 64), 7, it, 4), axis=1)   # 5 rows
    many = values(rng, (9, 2200, 32), np.float32)       # 2200 column sets of 9 rows: more than a grid holds
    check(cp, dml.reverse_subsequences, many, indices(rng, (1, 2200, 32), 11, it, 4), axis=0)
    long = values(rng, (500, 300, 32), np.float32)      # 300 sets of 500 x 128 bytes: two tiles a block
    check(cp, dml.reverse_subsequences, long, indices(rng, (1, 300, 32), 510, it, 4), axis=0)
    check(cp, dml.reverse_subsequences, long.reshape(500, 32, 300)[:7], indices(rng, (7, 32, 1), 310, it, 4),
          axis=2)



@pytest.mark.parametrize("it", INDEX_TYPES)
@pytest.mark.parametrize("dt", (np.float16, np.float32, np.float64))
def test_reversal_along_rows_in_16_byte_pieces_matches_the_cpu_bytes(cp, dt, it):
    """Rows of whole 16-byte pieces (2-, 4- and 8-byte words): under 32
    words in place a piece a thread (ix_reverse_pieces), longer staged and
    written a 16-byte piece a thread (ix_reverse_rows): every length class of
    a piece (at or past the length, wholly below it at each offset of the
    source pieces, the piece above from the lane below or loaded, across it)
    on rows of 4 to 512 words, lengths 0, past the row and the type's
    largest; rows starting off 16 bytes word by word; rows of 34 (float32:
    not whole pieces) staged a word a thread; the other axes beside. Signed
    lengths: the CPU's error."""
    rng = np.random.default_rng(23)
    for n in (4, 8, 12, 16, 32, 34, 36, 300, 512):
        x = values(rng, (3, 7, n), dt)
        if np.dtype(it).kind == "i":
            lengths = np.ones((3, 7, 1), it)
            with pytest.raises(dml.UnsupportedError) as cpu:
                dml.reverse_subsequences(x, lengths, 2)
            with pytest.raises(dml.UnsupportedError) as gpu:
                dml.reverse_subsequences(cp.asarray(x), cp.asarray(lengths), 2)
            assert str(gpu.value) == str(cpu.value)
            continue
        top = int(np.iinfo(it).max)
        chosen = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, n - 1, n, n + 1, top, n - 2, n - 3, n // 2, n // 2 + 1, 17, 31]
        lengths = np.array(chosen + list(rng.integers(0, n + 3, 21 - len(chosen))), dtype=it).reshape(3, 7, 1)
        check(cp, dml.reverse_subsequences, x, lengths, axis=2)
        flat = values(rng, (3 * 7 * n + 1,), dt)     # the same rows starting one word off 16 bytes
        check(cp, dml.reverse_subsequences, flat, lengths, axis=2,
              views=lambda a: a[1:].reshape(3, 7, n) if a.ndim == 1 else a)
        check(cp, dml.reverse_subsequences, x, rng.integers(0, 5, (1, 7, n)).astype(it), axis=0)
        check(cp, dml.reverse_subsequences, x, rng.integers(0, 9, (3, 1, n)).astype(it), axis=1)

@pytest.mark.parametrize("dt", (np.float16, np.float32, np.float64))
def test_short_rows_a_warp_several_rows_match_the_cpu_bytes(cp, dt, monkeypatch):
    """ix_reverse_pieces: a warp takes 32 / Q whole rows of Q 16-byte pieces
    (lanes left idle where Q does not divide 32), a block the rows starting in
    its pieces (rows across block boundaries where REVERSE_ROWS is small),
    several warp-steps a block: every row of whole pieces under 32 words
    (2-, 4- and 8-byte words), lengths 0, 1, the row less one, the row, past
    it and the type's largest; leading axes that collapse to one (dense,
    every other row, the lengths read backwards) and that do not
    (transposed), 2-D, rows starting off 16 bytes (word by word)."""
    from opendml.runtime import calls, get_backend
    from opendml.runtime.cuda import index
    it = np.uint64 if np.dtype(dt).itemsize == 8 else np.uint32
    rng = np.random.default_rng(31)
    word = np.dtype(dt).itemsize
    top = int(np.iinfo(it).max)

    def lengths(shape, n):
        out = rng.integers(0, n + 3, shape).astype(it)
        chosen = [0, 1, n - 1, n, n + 1, top, n // 2, 2, 0, n]
        out.reshape(-1)[:len(chosen)] = chosen
        return out
    for n in range(16 // word, 32, 16 // word):
        x = values(rng, (37, 61, n), dt)
        ls = lengths((37, 61, 1), n)
        check(cp, dml.reverse_subsequences, x, ls, axis=2)
        check(cp, dml.reverse_subsequences, x, ls, axis=2, views=lambda a: a[:, ::2])             # every other row
        check(cp, dml.reverse_subsequences, x, ls, axis=2, views=lambda a: a.transpose(1, 0, 2))  # no collapse
        check(cp, dml.reverse_subsequences, x, ls, axis=2,
              views=lambda a: a if a.shape[2] > 1 else a[::-1])                                  # lengths backwards
        check(cp, dml.reverse_subsequences, x[:5].reshape(-1, n), ls[:5].reshape(-1, 1), axis=1)  # 2-D
        flat = values(rng, (9 * 13 * n + 1,), dt)      # rows starting one word off 16 bytes
        check(cp, dml.reverse_subsequences, flat, lengths((9, 13, 1), n), axis=2,
              views=lambda a: a[1:].reshape(9, 13, n) if a.ndim == 1 else a)
        for rows in (7 * 16, 16):                      # 7 pieces a block, one: rows across blocks
            monkeypatch.setattr(index, "REVERSE_ROWS", rows)
            get_backend("cuda:0")._launches.clear()
            calls.clear()
            check(cp, dml.reverse_subsequences, x[:7], ls[:7], axis=2)
        monkeypatch.undo()
        get_backend("cuda:0")._launches.clear()
        calls.clear()


@pytest.mark.parametrize("framework", ["cupy", "torch"])
@pytest.mark.parametrize("it", (np.int32, np.int64))
def test_the_device_index_check_names_the_cpus_first_bad_index(cp, framework, it):
    """With the check on, signed GPU indices are reduced to their extremes on
    the device; in range, the call runs; one bad index anywhere raises the
    CPU's error, naming it (gather_nd: a bound per column of the tuples)."""
    if framework == "torch":
        torch = pytest.importorskip("torch")
        move = lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda()  # noqa: E731
    else:
        move = cp.asarray
    rng = np.random.default_rng(7)
    x = values(rng, (5, 9, 4), np.float32)
    calls = [   # (function, index shape, the bound of each index: one, or one per tuple column)
        (lambda a, i: dml.gather(a, i, 1), (6, 3), np.int64(9)),
        (lambda a, i: dml.gather_elements(a, i, 1), (5, 7, 4), np.int64(9)),
        (lambda a, i: dml.gather_nd(a, i), (6, 2), np.array([5, 9])),
    ]
    for fn, shape, bound in calls:
        b = np.broadcast_to(bound, shape)
        good = (rng.integers(0, 1 << 20, shape) % (2 * b) - b).astype(it)      # in [-bound, bound)
        want = fn(x, good)
        got = fn(move(x), move(good))
        assert np.asarray(got.cpu() if framework == "torch" else got.get()).tobytes() == want.tobytes()
        for flat in (0, good.size // 2, good.size - 1):
            bad = good.copy().reshape(-1)
            bad[flat] = b.reshape(-1)[flat]                                 # one past its bound
            with pytest.raises(dml.ValidationError) as cpu:
                fn(x, bad.reshape(shape))
            with pytest.raises(dml.ValidationError) as gpu:
                fn(move(x), move(bad.reshape(shape)))
            assert str(gpu.value) == str(cpu.value)
