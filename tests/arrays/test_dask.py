"""Dask arrays: every operator chunk by chunk, on the threaded scheduler and on
a LocalCluster of two worker processes, equal bit for bit to the in-memory
call on the whole array; laziness, errors at graph-build time, bounded output
chunks, and a bigger-than-memory 3x3x3 max filter."""
import itertools
import math
import re
import time

import numpy as np
import pytest

pytest.importorskip("dask")
import dask  # noqa: E402
import dask.array as da  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import opendml as dml  # noqa: E402
import opendml.arrays as api  # noqa: E402  (the in-memory functions the tasks call)
from ..conftest import n_examples

DTYPES = [np.float32, np.float16, np.float64, np.int8, np.uint16, np.int32, np.int64]
SETTINGS = settings(max_examples=n_examples(60), deadline=None, suppress_health_check=list(HealthCheck))
# A round trip to the LocalCluster costs tens of milliseconds: fewer examples
# there, the threaded scheduler covers the space.
DISTRIBUTED_SETTINGS = settings(SETTINGS, max_examples=n_examples(12))
THREADS = lambda y: y.compute(scheduler="threads")  # noqa: E731

# -- independent NumPy FOLD and SLICE_GRAD: they check the chunking on its own ------

def fold_reference(x, output_sizes, window_sizes, strides=1, dilations=1, start_padding=0, end_padding=0):
    """FOLD as UNFOLD's adjoint, in NumPy: each output element is 0 plus its
    contributions in increasing window index k (float16 sums in float32)."""
    x = np.asarray(x)
    d = len(output_sizes)
    W, st_, dil, sp, ep = (((v,) * d if isinstance(v, int) else tuple(v))
                           for v in (window_sizes, strides, dilations, start_padding, end_padding))
    S = tuple(output_sizes)
    n, ck, _ = x.shape
    K = math.prod(W)
    blocks = [(s + a + b - dl * (w - 1) - 1) // t + 1 for s, w, t, dl, a, b in zip(S, W, st_, dil, sp, ep)]
    acc = np.float32 if x.dtype == np.float16 else x.dtype
    out = np.zeros((n, ck // K, *S), acc)
    xr = x.reshape(n, ck // K, K, *blocks).astype(acc)
    for kf, k in enumerate(itertools.product(*(range(w) for w in W))):
        src, dst = [], []
        for s, t, kk, dl, a, nb in zip(S, st_, k, dil, sp, blocks):
            off = kk * dl - a                      # block b lands at b * t + off
            b_lo, b_hi = max(0, -(off // t)), min(nb, (s - 1 - off) // t + 1)
            if b_hi <= b_lo:
                break
            src.append(np.s_[b_lo:b_hi])
            dst.append(np.s_[b_lo * t + off:(b_hi - 1) * t + off + 1:t])
        else:
            out[(np.s_[:], np.s_[:], *dst)] += xr[(np.s_[:], np.s_[:], kf, *src)]
    return out.astype(x.dtype)


def slice_grad_reference(g, input_sizes, offsets, sizes, strides):
    g = np.asarray(g)
    out = np.zeros(tuple(input_sizes), g.dtype)
    index = []
    for o, w, t, n in zip(offsets, sizes, strides, g.shape):
        start = o + (w - 1 if t < 0 else 0)
        stop = start + t * n
        index.append(np.s_[start:(stop if stop >= 0 else None):t])
    out[tuple(index)] = g
    return out


def test_fold_reference_is_unfolds_adjoint():
    """The stand-in is right: <unfold(x), y> == <x, fold(y)>, and it equals opendml.fold."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 9, 7))
    for args in [(3, 1, 1, 1, 1), ((3, 2), (2, 1), (1, 2), (4, 0), (0, 5)), ((2, 3), 3, (2, 1), (0, 1), (2, 0))]:
        u = dml.unfold(x, *args)
        y = rng.standard_normal(u.shape)
        assert np.isclose((u * y).sum(), (x * fold_reference(y, (9, 7), *args)).sum())
        assert fold_reference(y, (9, 7), *args).tobytes() == dml.fold(y, (9, 7), *args).tobytes()


# -- schedulers -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, memory_limit="1GiB",
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(params=["threads", "distributed"])
def compute(request):
    """Computes a Dask array on the threaded scheduler or on the LocalCluster."""
    if request.param == "threads":
        return THREADS
    c = request.getfixturevalue("client")
    return lambda y: c.compute(y).result()


def check_same(got, want):
    assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def values(shape, dtype):
    """Each element its own flat index (wrapping for narrow types), so a wrong
    element names where it came from."""
    return np.arange(math.prod(shape), dtype=np.int64).reshape(shape).astype(dtype)


# -- strategies ---------------------------------------------------------------------------

@st.composite
def partitions(draw, size):
    """Chunk sizes along an axis of ``size``: odd, mixed, often smaller than a window."""
    cuts = draw(st.lists(st.integers(1, max(1, size - 1)), max_size=4, unique=True)) if size > 1 else []
    edges = [0, *sorted(cuts), size]
    return tuple(b - a for a, b in zip(edges, edges[1:]))


@st.composite
def chunked(draw, shape):
    return tuple(draw(partitions(s)) for s in shape)


@st.composite
def unfold_cases(draw):
    d = draw(st.integers(1, 3))
    spatial = [draw(st.integers(1, (13, 9, 5)[d - 1])) for _ in range(d)]
    W = [draw(st.integers(1, 4)) for _ in range(d)]
    dil = [draw(st.integers(1, 3)) for _ in range(d)]
    stride = [draw(st.integers(1, 6)) for _ in range(d)]
    sp = [draw(st.integers(0, 7)) for _ in range(d)]
    ep = [draw(st.integers(0, 7)) for _ in range(d)]
    for i in range(d):    # make the dilated window fit the padded input
        ep[i] += max(0, dil[i] * (W[i] - 1) + 1 - (spatial[i] + sp[i] + ep[i]))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), *spatial)
    return shape, (W, stride, dil, sp, ep)


# The chunk-size settings the cases run under: Dask's default, and sizes small
# enough to make UNFOLD split N, the rows, and the columns inside a block row.
CHUNK_SIZES = st.sampled_from(["128MiB", "2KiB", "200B", "16B"])


# -- UNFOLD ---------------------------------------------------------------------------------

UNFOLD_CASES = {
    # name: (shape, chunks, (window, strides, dilations, start padding, end padding))
    "odd-slabs": ((2, 3, 17, 11), ((1, 1), (2, 1), (5, 3, 7, 2), (4, 7)), (3, 1, 1, 1, 1)),
    "padding-larger-than-a-chunk": ((1, 2, 12, 6), ((1,), (2,), (2, 3, 7), (6,)), ((3, 2), 1, 1, (9, 0), (8, 3))),
    "stride-larger-than-a-chunk": ((1, 1, 23, 5), ((1,), (1,), (2, 2, 3, 5, 11), (2, 3)), ((2, 3), (7, 2), 1, 0, 0)),
    "window-spans-three-chunks": ((1, 2, 16, 9), ((1,), (1, 1), (2, 2, 2, 3, 7), (9,)), ((3, 2), 1, (3, 2), 2, 1)),
    "3d": ((1, 2, 7, 6, 5), ((1,), (2,), (2, 5), (3, 3), (5,)), ((3, 2, 2), (2, 1, 3), (1, 2, 1), 1, (0, 2, 1))),
    "1d-framing": ((2, 1, 40), ((1, 1), (1,), (9, 13, 18)), (8, 3, 1, 0, 0)),
}


@pytest.mark.parametrize("name", UNFOLD_CASES)
def test_unfold_cases(name, compute):
    shape, chunks, args = UNFOLD_CASES[name]
    x = values(shape, np.float32)
    y = dml.unfold(da.from_array(x, chunks=chunks), *args)
    check_same(compute(y), dml.unfold(x, *args))


def run_unfold_case(case, data, dtype, chunk_size, compute):
    shape, args = case
    x = values(shape, dtype)
    with dask.config.set({"array.chunk-size": chunk_size}):
        y = dml.unfold(da.from_array(x, chunks=data.draw(chunked(shape))), *args)
    check_same(compute(y), dml.unfold(x, *args))


@SETTINGS
@given(case=unfold_cases(), data=st.data(), dtype=st.sampled_from(DTYPES), chunk_size=CHUNK_SIZES)
def test_unfold_random_threads(case, data, dtype, chunk_size):
    run_unfold_case(case, data, dtype, chunk_size, THREADS)


@DISTRIBUTED_SETTINGS
@given(case=unfold_cases(), data=st.data(), dtype=st.sampled_from(DTYPES), chunk_size=CHUNK_SIZES)
def test_unfold_random_distributed(client, case, data, dtype, chunk_size):
    run_unfold_case(case, data, dtype, chunk_size, lambda y: client.compute(y).result())


def test_unfold_follows_n_and_first_axis_chunks():
    x = da.zeros((4, 3, 24, 10), dtype=np.float32, chunks=(2, 3, 8, 10))
    # 24 x 10 blocks, 10 per first-axis block row; a block goes with the chunk
    # holding the first element it reads (block 0 reads padding, then 0, 1)
    y = dml.unfold(x, 3, 1, 1, 1, 1)
    assert y.shape == (4, 27, 240) and y.chunks == ((2, 2), (27,), (90, 80, 70))
    y = dml.unfold(x, 3, 2, 1, 0, 0)          # blocks start at 0, 2, ..., 20: 4 + 4 + 3 block rows of 4
    assert y.chunks == ((2, 2), (27,), (16, 16, 12))


@pytest.mark.parametrize("window", [1, 3, 7, 15, 31])
def test_unfold_chunk_bytes_never_grow_with_the_window(window):
    x = da.zeros((2, 3, 64, 64), dtype=np.float32, chunks=(1, 3, 16, 64))
    with dask.config.set({"array.chunk-size": "64KiB"}):
        y = dml.unfold(x, window, 1, 1, window // 2, window // 2)
    biggest = math.prod(max(c) for c in y.chunks) * 4
    assert biggest <= 64 << 10


def test_unfold_split_rows_and_columns_compute_right():
    x = values((2, 2, 9, 8), np.int32)
    for size in ["512B", "100B", "8B"]:      # whole rows; sub-windows; single columns
        with dask.config.set({"array.chunk-size": size}):
            y = dml.unfold(da.from_array(x, chunks=(1, 1, 4, 3)), (3, 4), (2, 1), (1, 2), (2, 1), (0, 5))
        assert math.prod(max(c) for c in y.chunks) * 4 <= dask.utils.parse_bytes(size)
        check_same(y.compute(scheduler="threads"), dml.unfold(x, (3, 4), (2, 1), (1, 2), (2, 1), (0, 5)))


# -- SLICE and SLICE1 -------------------------------------------------------------------------

@st.composite
def slice1_cases(draw, signed=True):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, 9)) for _ in range(rank))
    off, win, steps, outs = [], [], [], []
    for s in shape:
        o = draw(st.integers(0, s - 1))
        w = draw(st.integers(1, s - o))
        t = draw(st.integers(1, 5)) * (draw(st.sampled_from([1, -1])) if signed else 1)
        off.append(o), win.append(w), steps.append(t)
        outs.append(draw(st.integers(1, 1 + (w - 1) // abs(t))))
    return shape, off, win, steps, (outs if draw(st.booleans()) else None)


def run_slice1_case(case, data, dtype, compute):
    shape, off, win, steps, outs = case
    x = values(shape, dtype)
    y = dml.slice1(da.from_array(x, chunks=data.draw(chunked(shape))), off, win, steps, outs)
    check_same(compute(y), dml.slice1(x, off, win, steps, outs))


def run_slice_case(case, data, dtype, compute):
    shape, off, win, steps, _ = case
    sizes = [1 + (w - 1) // t for w, t in zip(win, steps)]
    x = values(shape, dtype)
    y = dml.slice(da.from_array(x, chunks=data.draw(chunked(shape))), off, sizes, steps)
    check_same(compute(y), dml.slice(x, off, sizes, steps))


@SETTINGS
@given(case=slice1_cases(), data=st.data(), dtype=st.sampled_from(DTYPES))
def test_slice1_random_threads(case, data, dtype):
    run_slice1_case(case, data, dtype, THREADS)


@DISTRIBUTED_SETTINGS
@given(case=slice1_cases(), data=st.data(), dtype=st.sampled_from(DTYPES))
def test_slice1_random_distributed(client, case, data, dtype):
    run_slice1_case(case, data, dtype, lambda y: client.compute(y).result())


@SETTINGS
@given(case=slice1_cases(signed=False), data=st.data(), dtype=st.sampled_from(DTYPES))
def test_slice_random_threads(case, data, dtype):
    run_slice_case(case, data, dtype, THREADS)


@DISTRIBUTED_SETTINGS
@given(case=slice1_cases(signed=False), data=st.data(), dtype=st.sampled_from(DTYPES))
def test_slice_random_distributed(client, case, data, dtype):
    run_slice_case(case, data, dtype, lambda y: client.compute(y).result())


def recording(shape, chunks, dtype=np.int32):
    """A Dask array of ``values`` whose chunks note, when computed, which block
    they are (threaded scheduler: the list lives in this process)."""
    seen = []

    def make(block, block_id=None):
        seen.append(block_id)
        return block

    meta = np.empty((0,) * len(shape), dtype)         # no call to infer it
    return da.from_array(values(shape, dtype), chunks=chunks).map_blocks(make, meta=meta), seen


def test_slice1_reads_only_the_chunks_it_touches():
    x, seen = recording((40, 6), (5, 3))
    y = dml.slice1(x, [12, 0], [10, 6], [-3, 4])      # rows 21, 18, 15, 12; columns 0 and 4
    assert y.chunks == ((1, 2, 1), (1, 1))           # rows from chunks 4, 3, 2 (last to first)
    assert seen == []
    check_same(y.compute(scheduler="threads"), dml.slice1(values((40, 6), np.int32), [12, 0], [10, 6], [-3, 4]))
    assert sorted(seen) == [(2, 0), (2, 1), (3, 0), (3, 1), (4, 0), (4, 1)]


def test_slice_result_follows_the_input_chunks():
    x = da.zeros((30,), dtype=np.uint8, chunks=10)
    assert dml.slice(x, [1], [10], [3]).chunks == ((3, 4, 3),)      # 1..7 | 10..19 | 22..28


# -- FOLD -----------------------------------------------------------------------------------------

@st.composite
def fold_cases(draw):
    shape, args = draw(unfold_cases())
    W = args[0]
    blocks = [(s + a + b - dl * (w - 1) - 1) // t + 1 for s, w, t, dl, a, b in zip(shape[2:], *args)]
    in_shape = (shape[0], shape[1] * math.prod(W), math.prod(blocks))
    return in_shape, shape[2:], args


def run_fold_case(case, data, dtype, chunk_size, compute):
    in_shape, out_sizes, args = case
    x = values(in_shape, dtype)
    with dask.config.set({"array.chunk-size": chunk_size}):
        y = dml.fold(da.from_array(x, chunks=data.draw(chunked(in_shape))), out_sizes, *args)
    check_same(compute(y), dml.fold(x, out_sizes, *args))


@SETTINGS
@given(case=fold_cases(), data=st.data(), dtype=st.sampled_from(DTYPES), chunk_size=CHUNK_SIZES)
def test_fold_chunking_against_the_reference_fold(case, data, dtype, chunk_size):
    """The slabs, halos and local paddings, checked with this file's NumPy FOLD
    standing in for opendml.fold (threaded scheduler, this process only)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(api, "fold", fold_reference)
        run_fold_case(case, data, dtype, chunk_size, THREADS)


@SETTINGS
@given(case=fold_cases(), data=st.data(), dtype=st.sampled_from(DTYPES), chunk_size=CHUNK_SIZES)
def test_fold_random_threads(case, data, dtype, chunk_size):
    run_fold_case(case, data, dtype, chunk_size, THREADS)


@DISTRIBUTED_SETTINGS
@given(case=fold_cases(), data=st.data(), dtype=st.sampled_from(DTYPES), chunk_size=CHUNK_SIZES)
def test_fold_random_distributed(client, case, data, dtype, chunk_size):
    run_fold_case(case, data, dtype, chunk_size, lambda y: client.compute(y).result())


@pytest.mark.parametrize("name", UNFOLD_CASES)
def test_fold_cases(name, compute):
    shape, chunks, args = UNFOLD_CASES[name]
    cols = dml.unfold(np.zeros(shape, np.float32), *args)
    y = values(cols.shape, np.float32)
    # FOLD of the UNFOLD of the same chunking: slabs follow the columns' slabs.
    got = dml.fold(dml.unfold(da.from_array(np.zeros(shape, np.float32), chunks=chunks), *args) + y, shape[2:], *args)
    check_same(compute(got), dml.fold(y, shape[2:], *args))


def test_fold_slabs_follow_the_unfold_slabs():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(api, "fold", fold_reference)
        x = da.zeros((2, 1, 24, 10), dtype=np.float32, chunks=(1, 1, 8, 10))
        y = dml.fold(dml.unfold(x, 3, 1, 1, 1, 1), (24, 10), 3, 1, 1, 1, 1)
        assert y.chunks == ((1, 1), (1,), (8, 8, 8), (10,))


def test_fold_chunk_bytes_bounded():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(api, "fold", fold_reference)
        cols = da.zeros((2, 4 * 49, 64 * 64), dtype=np.float32, chunks=(2, 4 * 49, 64 * 16))
        with dask.config.set({"array.chunk-size": "256KiB"}):
            y = dml.fold(cols, (64, 64), 7, 1, 1, 3, 3)
        assert math.prod(max(c) for c in y.chunks) * 4 <= 256 << 10
        # the blocks a slab reads are bounded too: one channel, 1 item, 7 block rows of 64
        assert max(y.chunks[1]) * max(y.chunks[0]) * (max(y.chunks[2]) + 6) * 64 * 49 * 4 <= 256 << 10


# -- SLICE_GRAD ------------------------------------------------------------------------------------

def run_slice_grad_case(case, data, dtype, compute):
    shape, off, win, steps, outs = case
    g_shape = outs or [1 + (w - 1) // abs(t) for w, t in zip(win, steps)]
    g = values(g_shape, dtype)
    y = dml.slice_grad(da.from_array(g, chunks=data.draw(chunked(g_shape))), shape, off, win, steps)
    check_same(compute(y), dml.slice_grad(g, shape, off, win, steps))


@SETTINGS
@given(case=slice1_cases(), data=st.data(), dtype=st.sampled_from(DTYPES))
def test_slice_grad_chunking_against_the_reference(case, data, dtype):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(api, "slice_grad", slice_grad_reference)
        run_slice_grad_case(case, data, dtype, THREADS)


@SETTINGS
@given(case=slice1_cases(), data=st.data(), dtype=st.sampled_from(DTYPES))
def test_slice_grad_random_threads(case, data, dtype):
    run_slice_grad_case(case, data, dtype, THREADS)


@DISTRIBUTED_SETTINGS
@given(case=slice1_cases(), data=st.data(), dtype=st.sampled_from(DTYPES))
def test_slice_grad_random_distributed(client, case, data, dtype):
    run_slice_grad_case(case, data, dtype, lambda y: client.compute(y).result())


def test_slice_grad_zero_chunks_outside_the_window():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(api, "slice_grad", slice_grad_reference)
        g = da.ones((4, 4), dtype=np.float32, chunks=2)
        with dask.config.set({"array.chunk-size": "4KiB"}):
            y = dml.slice_grad(g, (100, 100), [40, 10], [4, 8], [1, -2])
        assert math.prod(max(c) for c in y.chunks) * 4 <= 4 << 10
        assert 40 in np.cumsum((0,) + y.chunks[0]) and 44 in np.cumsum(y.chunks[0])
        check_same(y.compute(scheduler="threads"),
                   slice_grad_reference(np.ones((4, 4), np.float32), (100, 100), [40, 10], [4, 8], [1, -2]))


# -- laziness and errors -------------------------------------------------------------------------------

def test_nothing_is_computed_before_compute():
    x, seen = recording((2, 2, 12, 12), (1, 1, 5, 7), np.float32)
    cols, seen_cols = recording((2, 18, 16), (1, 5, 7), np.float32)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(api, "fold", fold_reference)
        mp.setattr(api, "slice_grad", slice_grad_reference)
        results = [dml.unfold(x, 3, 2, 1, 4, 4), dml.slice(x, [0, 0, 1, 2], [2, 2, 3, 3], [1, 1, 4, 3]),
                   dml.slice1(x, [0, 0, 1, 2], [2, 2, 9, 9], [1, -1, -4, 3]),
                   dml.fold(cols, (4, 4), 1),
                   dml.slice_grad(x, (3, 3, 40, 40), [0, 0, 1, 2], [2, 2, 12, 34], [1, 1, 1, 3])]
        assert all(isinstance(r, da.Array) for r in results) and seen == [] and seen_cols == []
        dask.compute(*results, scheduler="threads")
        assert seen and seen_cols


def poisoned(shape, dtype=np.float32, chunks=2):
    """A Dask array that fails if any chunk is ever computed."""
    def boom(block):
        raise AssertionError("computed while building the graph")
    return da.zeros(shape, dtype=dtype, chunks=chunks).map_blocks(boom, meta=np.empty((0,) * len(shape), dtype))


@pytest.mark.parametrize("call, error, message", [
    (lambda: dml.slice(poisoned((4, 4)), [0, 3], [1, 2], [1, 1]), dml.ValidationError,
     r"SLICE: Offsets\[1\] \+ \(Sizes\[1\] - 1\) \* Strides\[1\] must be < InputTensor.Sizes\[1\]; "
     r"got 3 \+ \(2 - 1\) \* 1 = 4 >= 4"),
    (lambda: dml.slice1(poisoned((4, 4)), [0, 0], [1, 4], [1, 0]), dml.ValidationError,
     r"SLICE1: InputWindowStrides\[1\] must be non-zero"),
    (lambda: dml.slice1(poisoned((4, 4)), [0, 1], [1, 4], [1, 1]), dml.ValidationError,
     r"SLICE1: InputWindowOffsets\[1\] \+ InputWindowSizes\[1\] must be <= InputTensor.Sizes\[1\]; got 1 \+ 4 > 4"),
    (lambda: dml.unfold(poisoned((1, 1, 4, 4)), 6), dml.ValidationError,
     r"UNFOLD: the dilated window must fit the padded input"),
    (lambda: dml.unfold(poisoned((4, 4)), 2), dml.ValidationError,
     r"^unfold: x must have 3 to 8 dimensions for UNFOLD; got 2 \(shape \[4, 4\]\)$"),
    (lambda: dml.unfold(poisoned((1, 1, 4, 4), bool), 2), dml.UnsupportedError,
     r"^unfold: x's dtype bool is not supported by UNFOLD at feature level 6_4 \(supported: float16"),
    (lambda: dml.slice(poisoned((8,))[poisoned((8,)) > 0], [0], [1], [1]), dml.ValidationError,
     r"slice: the chunk sizes of x are unknown \(NaN\); call x.compute_chunk_sizes\(\) first"),
    (lambda: dml.fold(poisoned((1, 9, 5)), (4, 4), 3), dml.ValidationError, r"FOLD"),
    (lambda: dml.slice_grad(poisoned((2, 2)), (4, 4), [0, 3], [4, 2], [2, 1]), dml.ValidationError, r"SLICE_GRAD"),
], ids=["slice-range", "slice1-zero-stride", "slice1-window", "unfold-window", "unfold-rank", "bool",
        "unknown-chunks", "fold-blocks", "slice-grad-window"])
def test_errors_at_graph_build_time(call, error, message):
    with pytest.raises(error, match=message):
        call()


def _unknown(n, dtype=np.float32):
    """A Dask array of ``n`` elements whose chunk sizes are unknown (NaN): a boolean mask's result."""
    x = da.from_array(np.arange(n, dtype=dtype), chunks=2)
    return x[x >= 0]


@pytest.mark.parametrize("call, where", [
    (lambda: dml.gather(_unknown(4), np.array([0]), 0), "gather: the chunk sizes of x"),
    (lambda: dml.gather(da.ones((3, 2), chunks=1), _unknown(2, np.int64), 0), "gather: the chunk sizes of indices"),
    (lambda: dml.scatter_elements(_unknown(4), np.array([0]), np.ones(1, np.float32), 0),
     "scatter_elements: the chunk sizes of x"),
    (lambda: dml.one_hot(_unknown(2, np.int64), 3, np.array([0., 1.])), "one_hot: the chunk sizes of indices"),
    (lambda: dml.reverse_subsequences(_unknown(4), np.array([1], np.uint32), 0),
     "reverse_subsequences: the chunk sizes of x"),
    (lambda: dml.diagonal_matrix(_unknown(2)[:, None] * da.ones((1, 2), np.float32)), "diagonal_matrix: the chunk sizes of x"),
    (lambda: dml.join([da.ones(2, chunks=1), _unknown(2)], 0), "join: the chunk sizes of arrays[1]"),
], ids=["gather-x", "gather-indices", "scatter-elements", "one-hot", "reverse-subsequences", "diagonal-matrix",
        "join"])
def test_unknown_chunk_sizes_are_refused_on_every_route(call, where):
    """The index functions read the shapes before any route: unknown sizes were a NumPy ValueError there
    (``cannot convert float NaN to integer``); every route now refuses them with the one message."""
    argument = where.split("the chunk sizes of ")[1]    # the message names the array to call it on
    with pytest.raises(dml.ValidationError, match=rf"^{re.escape(where)} are unknown \(NaN\); call "
                                                  rf"{re.escape(argument)}.compute_chunk_sizes\(\) first$"):
        call()


@pytest.mark.parametrize("call, message", [
    (lambda: dml.unfold(_unknown(4), 2), "unfold: x must have 3 to 8 dimensions for UNFOLD; got 1 (shape [nan])"),
    (lambda: dml.diagonal_matrix(_unknown(4)),
     "diagonal_matrix: x must have 2 to 4 dimensions for DIAGONAL_MATRIX1; got 1 (shape [nan])"),
], ids=["unfold", "diagonal-matrix"])
def test_a_rank_error_shows_unknown_sizes_as_nan(call, message):
    """The rank error's shape read every size as an int: unknown ones raised NumPy's ValueError instead."""
    with pytest.raises(dml.ValidationError, match=f"^{re.escape(message)}$"):
        call()


def test_big_endian_chunks_take_every_operator_like_the_in_memory_call():
    """One route for every operator: a big-endian Dask array is described in
    the native order, as the in-memory call turns it around (the family's
    functions refused it before), and every result equals the in-memory one."""
    x = np.arange(24, dtype=">f4").reshape(2, 3, 4)
    X = da.from_array(x, chunks=(1, 2, 3))
    for f in (lambda v: dml.pad(v, [1, 0, 2], [0, 1, 1], "reflect"), lambda v: dml.tile(v, [1, 2, 1]),
              lambda v: dml.cast(v, np.int16), lambda v: dml.slice1(v, [0, 0, 1], [2, 3, 3], [1, -1, 2])):
        y = f(X)
        want = f(x)
        assert y.dtype == want.dtype and y.shape == want.shape
        assert np.array_equal(y.compute(scheduler="sync"), want)




EMPTY_CHUNK_CALLS = {
    "slice": lambda v: dml.slice(v, [0, 1, 0, 1], [2, 2, 3, 2], [1, 1, 1, 2]),
    "slice1": lambda v: dml.slice1(v, [1, 0, 0, 0], [1, 3, 4, 4], [1, -1, 1, 2]),
    "unfold": lambda v: dml.unfold(v, [2, 2]),
    "fold": lambda v: dml.fold(v.reshape(2, 16, 4) if v.shape == (2, 4, 4, 4) else v, [3, 3], [2, 2]),
    "slice_grad": lambda v: dml.slice_grad(v, [2, 4, 5, 5], [0, 0, 1, 0], [2, 4, 4, 4], [1, 1, 1, 1]),
    "identity": lambda v: dml.identity(v, 2.0, 1.0),
    "cast": lambda v: dml.cast(v, np.int32),
    "pad": lambda v: dml.pad(v, [0, 0, 1, 1], [0, 1, 0, 2], "reflect"),
    "join": lambda v: dml.join([v, v], 1),
    "split": lambda v: dml.split(v, 1, [1, 3]),
    "tile": lambda v: dml.tile(v, [1, 2, 1, 2]),
    "space_to_depth": lambda v: dml.space_to_depth(v, 2),
    "depth_to_space": lambda v: dml.depth_to_space(v, 2, "CRD"),
    "gather": lambda v: dml.gather(v, np.array([[3, 0], [1, 1]]), 1),
    "gather_elements": lambda v: dml.gather_elements(v, np.zeros((2, 4, 4, 4), np.int64) + [3, 2, 1, 0], 3),
    "gather_nd": lambda v: dml.gather_nd(v, np.array([[1, 2], [0, 3]])),
    "scatter_elements": lambda v: dml.scatter_elements(v, np.zeros((2, 4, 4, 4), np.int64) + [1, 0, 2, 3],
                                                       -np.arange(128, dtype=np.float32).reshape(2, 4, 4, 4), 3),
    "scatter_nd": lambda v: dml.scatter_nd(v, np.array([[1, 2], [0, 3]]), np.full((2, 4, 4), 5, np.float32)),
    "reverse_subsequences": lambda v: dml.reverse_subsequences(
        v, np.array([3, 2, 4, 1], np.uint32).reshape(1, 4, 1, 1) * np.ones((2, 1, 1, 4), np.uint32), 2),
    "diagonal_matrix": lambda v: dml.diagonal_matrix(v, value=3.0, begin=-1, end=2),
}


@pytest.mark.parametrize("name", sorted(EMPTY_CHUNK_CALLS))
def test_empty_chunks_take_every_operator_like_the_in_memory_call(name):
    """Chunks of size 0 along an axis of size >= 1 (what a boolean mask's result holds after
    compute_chunk_sizes()) raised "TensorDesc: Sizes[0] must be in [1, ...]; got 0" for the blockwise
    operators, and NumPy's "range() arg 3 must not be zero" at compute() for UNFOLD and FOLD; every result
    now equals the in-memory call's."""
    f = EMPTY_CHUNK_CALLS[name]
    x = np.arange(128, dtype=np.float32).reshape(2, 4, 4, 4)
    X = da.from_array(x, chunks=((2, 0), (0, 4, 0), (2, 0, 2), (4,)))
    want = f(x)
    got = f(X)
    got, want = (got, want) if isinstance(want, list) else ([got], [want])
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(g.compute(scheduler="sync"), w)


def test_a_boolean_masks_empty_chunks_are_taken():
    """The realistic source of empty chunks: a mask's result, its chunk sizes computed."""
    y = da.arange(20, chunks=5).astype(np.float32)
    z = y[(y % 10) > 6]
    z.compute_chunk_sizes()
    assert 0 in z.chunks[0]
    assert np.array_equal(dml.identity(z, 2.0).compute(scheduler="sync"), dml.identity(z.compute(), 2.0))
    assert np.array_equal(dml.gather(z, da.from_array(np.array([5, 0, 2]), chunks=((0, 3, 0),)), 0)
                          .compute(scheduler="sync"), z.compute()[[5, 0, 2]])
# -- CuPy chunks -------------------------------------------------------------------------------------

@pytest.mark.cuda
def test_cupy_chunks_give_cupy_results():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception:
        pytest.skip("no CUDA device")
    x = values((1, 2, 20, 9), np.float32)
    X = da.from_array(cupy.asarray(x), chunks=(1, 2, 6, 9), asarray=False)
    y = dml.unfold(X, 3, 2, 1, 4, 4)
    assert type(y._meta) is cupy.ndarray
    check_same(y.compute(scheduler="threads").get(), dml.unfold(x, 3, 2, 1, 4, 4))
    s = dml.slice1(X, [0, 0, 1, 2], [1, 2, 19, 7], [1, -1, -4, 3])
    assert type(s._meta) is cupy.ndarray
    check_same(s.compute(scheduler="threads").get(), dml.slice1(x, [0, 0, 1, 2], [1, 2, 19, 7], [1, -1, -4, 3]))
    if hasattr(dml, "fold") and hasattr(dml, "slice_grad"):
        cols = dml.unfold(x, 3, 2, 1, 4, 4)
        f = dml.fold(da.from_array(cupy.asarray(cols), chunks=(1, 9, 7), asarray=False), (20, 9), 3, 2, 1, 4, 4)
        assert type(f._meta) is cupy.ndarray
        check_same(f.compute(scheduler="threads").get(), dml.fold(cols, (20, 9), 3, 2, 1, 4, 4))
        g = dml.slice1(x, [0, 0, 1, 2], [1, 2, 19, 7], [1, -1, -4, 3])
        sg = dml.slice_grad(da.from_array(cupy.asarray(g), chunks=2, asarray=False), (3, 3, 40, 12),
                           [0, 0, 1, 2], [1, 2, 19, 7], [1, -1, -4, 3])
        assert type(sg._meta) is cupy.ndarray           # its zero chunks too
        check_same(sg.compute(scheduler="threads").get(),
                   dml.slice_grad(g, (3, 3, 40, 12), [0, 0, 1, 2], [1, 2, 19, 7], [1, -1, -4, 3]))


# -- bigger than memory ------------------------------------------------------------------------------------

def _reset_peak(dask_worker=None):
    """Reset this process's peak resident memory (Linux VmHWM); False where the
    kernel does not allow it (the peak then counts from the process's start)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_bytes(dask_worker=None):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def compute_in_pieces(client, y):
    """``y`` computed chunk by chunk and put together here, as a pipeline
    writing its result out would: no worker ever holds the whole result (a
    plain ``compute`` joins every chunk on one worker first)."""
    from distributed import as_completed
    out = np.empty(y.shape, y.dtype)
    starts = [np.cumsum((0,) + c)[:-1] for c in y.chunks]
    futures = client.compute(list(y.to_delayed().ravel()))
    where = {f.key: np.unravel_index(i, y.numblocks) for i, f in enumerate(futures)}
    for f in as_completed(futures):
        part = f.result()
        out[tuple(np.s_[s[i]:s[i] + n] for s, i, n in zip(starts, where[f.key], part.shape))] = part
        f.release()
    return out


def test_max_filter_bigger_than_memory(client, tmp_path):
    """3x3x3 max over every window of a 320^3 float32 volume (its UNFOLD would
    be 3.3 GiB, more than the two workers' 1 GiB each together), read from a
    Zarr store. (benchmarks/dask_windows.py times the same on 384^3.)"""
    zarr = pytest.importorskip("zarr")
    scipy_ndimage = pytest.importorskip("scipy.ndimage")
    n = 320
    vol = np.random.default_rng(0).random((n, n, n), dtype=np.float32)
    store = zarr.create_array(store=str(tmp_path / "vol.zarr"), shape=(1, 1, n, n, n), chunks=(1, 1, 32, n, n),
                              dtype=np.float32, compressors=None)     # random floats do not compress
    store[0, 0] = vol
    v = da.from_zarr(str(tmp_path / "vol.zarr"))
    windows = dml.unfold(v, 3, 1, 1, 1, 1)
    assert windows.nbytes > 3 * 2**30 and max(windows.chunks[2]) * 27 * 4 <= 128 << 20
    result = windows.max(axis=1)
    client.run(_reset_peak)           # the peak from here on is this computation's
    start = time.perf_counter()
    got = compute_in_pieces(client, result)
    elapsed = time.perf_counter() - start
    peaks = client.run(_peak_bytes)
    want = scipy_ndimage.maximum_filter(vol, size=3, mode="constant", cval=0)
    assert np.array_equal(got.reshape(n, n, n), want)
    limit = 1 << 30
    print(f"\n{n}^3 3x3x3 max on 2 workers: {elapsed:.1f} s, peak worker memory "
          f"{', '.join(f'{p / 2**20:.0f} MiB' for p in peaks.values())} (limit {limit / 2**20:.0f} MiB)")
    assert all(p < limit for p in peaks.values())


def test_public_functions_take_dask_arrays_lazily():
    """dml.* on a Dask array goes to the Dask adapter: lazy, equal to the in-memory call."""
    x = np.arange(2 * 3 * 9 * 7, dtype=np.float32).reshape(2, 3, 9, 7)
    dx = da.from_array(x, chunks=(1, 3, 4, 7))
    cases = [
        (lambda a: dml.unfold(a, 3, 2, 1, 1, 1), None),
        (lambda a: dml.slice1(a, [0, 0, 1, 0], [2, 3, 7, 7], [1, -1, 2, -3]), None),
        (lambda a: dml.slice(a, [0, 1, 0, 2], [2, 2, 3, 2], [1, 1, 3, 2]), None),
    ]
    for fn, _ in cases:
        lazy = fn(dx)
        assert isinstance(lazy, da.Array)
        assert lazy.compute(scheduler="threads").tobytes() == fn(x).tobytes()
    cols = dml.unfold(x, 3, 1, 1, 1, 1)
    lazy = dml.fold(da.from_array(cols, chunks=(1, 27, 21)), [9, 7], 3, 1, 1, 1, 1)
    assert isinstance(lazy, da.Array)
    assert lazy.compute(scheduler="threads").tobytes() == dml.fold(cols, [9, 7], 3, 1, 1, 1, 1).tobytes()
