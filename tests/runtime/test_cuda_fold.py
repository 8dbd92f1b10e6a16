"""FOLD and SLICE_GRAD on the GPU: the CUDA kernels against the NumPy
references of test_cuda_emulation.py (and the CPU backend where it runs the
plan) bit for bit, on random plans of all 11 element types with odd strides,
negative input strides, gaps, odd element offsets of both buffers (so 16-byte
words are and are not possible), and sentinel bytes around and between the
output elements that must stay untouched."""
import numpy as np
import pytest

import opendml as dml
from opendml.plan import MovePlan
from opendml.runtime import get_backend
from opendml.runtime.cuda import tuned as ct
from tests import reference as ref
from tests.conftest import cuda_available
from tests.runtime.test_cuda_emulation import (DTYPES, dense_fold_plans, fold_buffers, fold_reference,
                                               random_fold_plan, random_scatter_plan, random_words,
                                               scatter_buffers, scatter_reference, wide_scatter_plans)

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not cuda_available(), reason="CUDA is not available here")]

SENTINEL = 0xA5


def on_gpu(plan, src, dst, src_shift=0, dst_shift=0):
    """Run ``plan`` on the GPU from copies of word arrays ``src``/``dst`` that
    start ``src_shift``/``dst_shift`` elements into their device buffers."""
    import cupy
    backend = get_backend("cuda")
    s = cupy.asarray(np.concatenate([np.zeros(src_shift, src.dtype), src]))[src_shift:]
    d = cupy.asarray(np.concatenate([np.full(dst_shift, SENTINEL, dst.dtype), dst]))[dst_shift:]
    backend.prepare(MovePlan.of(plan), [s], [d])()
    out = d.get()
    backend.synchronize()
    return out


def on_cpu(plan, src, dst):
    """The CPU backend's result, or None where it does not run this plan kind yet."""
    try:
        run = get_backend("cpu").prepare(ref.as_program(plan), [src], [dst])
    except (TypeError, NotImplementedError, dml.UnsupportedError):
        return None
    run()
    return dst


def check(plan, src, dst, reference, shifts=((0, 0), (1, 3), (3, 1))):
    want = dst.copy()
    reference(plan, src, want)
    for s_shift, d_shift in shifts:
        got = on_gpu(plan, src, dst, s_shift, d_shift)
        assert got.tobytes() == want.tobytes(), (s_shift, d_shift, plan)
    cpu = on_cpu(plan, src.copy(), dst.copy())
    if cpu is not None:
        assert cpu.tobytes() == want.tobytes(), ("cpu", plan)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("D", [1, 2, 3])
def test_fold_matches_reference(dtype, D):
    rng = np.random.default_rng(10 * D + DTYPES.index(dtype))
    es, flt = np.dtype(dtype).itemsize, np.dtype(dtype).kind == "f"
    plans = [random_fold_plan(rng, es, flt, D) for _ in range(4)]
    plans += [p for p in dense_fold_plans(es, flt) if len(p.window) == D]
    for plan in plans:
        src, dst = fold_buffers(rng, plan, dtype, SENTINEL)
        check(plan, src, dst, fold_reference)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lanes", [1, 2, 4])
def test_fold_gather_lane_variants(dtype, lanes, monkeypatch):
    monkeypatch.setattr(ct, "FOLD_LANES", lanes)
    rng = np.random.default_rng(DTYPES.index(dtype))
    es, flt = np.dtype(dtype).itemsize, np.dtype(dtype).kind == "f"
    for plan in (random_fold_plan(rng, es, flt, 2), random_fold_plan(rng, es, flt, 3), dense_fold_plans(es, flt)[0]):
        assert ct._fold_launch(plan)[0].endswith(f", {lanes}>")
        src, dst = fold_buffers(rng, plan, dtype, SENTINEL)
        check(plan, src, dst, fold_reference, shifts=((0, 0),))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("stride", [2, 32, 40, 256, 300])
def test_fold1d_tile_matches_reference(dtype, stride, monkeypatch):
    monkeypatch.setattr(ct, "FOLD_TILE_MIN_STRIDE", 1)   # the staged kernel for every 1-D fold
    rng = np.random.default_rng(stride + DTYPES.index(dtype))
    es, flt = np.dtype(dtype).itemsize, np.dtype(dtype).kind == "f"
    for _ in range(3):
        plan = random_fold_plan(rng, es, flt, 1, stride=stride)
        assert ct._fold_launch(plan)[0].startswith("fold1d_tile<")
        src, dst = fold_buffers(rng, plan, dtype, SENTINEL)
        check(plan, src, dst, fold_reference)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_overlap_add_scaled_down(dtype):
    """Frames of 1024 with hop 256 (the issue's overlap-add), 2 signals."""
    from opendml.plan import FoldPlan
    from opendml.runtime.params import SUM_FLOAT
    B = 37
    L = (B - 1) * 256 + 1024
    plan = FoldPlan(np.dtype(dtype).itemsize, SUM_FLOAT, 2, 1, (L,), 0, (1024 * B, B, 1), (1024,), (256,), (1,),
                    (0,), (B,), 0, (L, L, 1))
    assert ct._fold_launch(plan)[0].startswith("fold1d_tile<")
    rng = np.random.default_rng(5)
    src, dst = fold_buffers(rng, plan, dtype, SENTINEL)
    check(plan, src, dst, fold_reference)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_matches_reference(dtype):
    rng = np.random.default_rng(DTYPES.index(dtype))
    es = np.dtype(dtype).itemsize
    plans = [random_scatter_plan(rng, es) for _ in range(10)] + wide_scatter_plans(es)
    for plan in plans:
        src, dst = scatter_buffers(rng, plan, dtype, SENTINEL)
        check(plan, src, dst, scatter_reference, shifts=((0, 0), (1, 0), (0, 1), (2, 2)))


def test_slice_grad_issue_window_words():
    """The issue's window ([8:120, 8:120] of 128x128 planes), scaled in batch:
    16-byte words; every output element written (the sentinel is gone)."""
    import cupy
    from opendml.plan import ScatterPlan
    plan = ScatterPlan(4, (2, 3, 128, 128), 0, (3 * 128 * 128, 128 * 128, 128, 1), (0, 0, 8, 8), (1, 1, 1, 1),
                       (2, 3, 112, 112), 0, (3 * 112 * 112, 112 * 112, 112, 1))
    assert ct._scatter_launch(plan, 0, 0)[0].startswith("scatter<uint4, 3, 0,")
    g = cupy.asarray(random_words(np.random.default_rng(1), 2 * 3 * 112 * 112, np.float32))
    out = cupy.full(2 * 3 * 128 * 128, SENTINEL * 0x01010101, cupy.uint32)
    get_backend("cuda").prepare(MovePlan.of(plan), [g], [out])()
    want = np.zeros((2, 3, 128, 128), np.uint32)
    want[:, :, 8:120, 8:120] = g.get().reshape(2, 3, 112, 112)
    assert np.array_equal(out.get().reshape(want.shape), want)


@pytest.mark.skipif(not hasattr(dml, "fold"), reason="opendml.fold is not there yet")
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint8"])
def test_array_api_fold_on_cupy(dtype):
    import cupy
    rng = np.random.default_rng(3)
    x = random_words(rng, 2 * 18 * 42, dtype).view(dtype).reshape(2, 18, 42)
    args = ((6, 7), 3, 1, 1, 1, 1)
    got = dml.fold(cupy.asarray(x), *args)
    assert isinstance(got, cupy.ndarray)
    assert got.get().tobytes() == dml.fold(x, *args).tobytes()
    want = ref.fold(x, [6, 7], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1])
    assert got.get().tobytes() == want.tobytes()


@pytest.mark.skipif(not hasattr(dml, "slice_grad"), reason="opendml.slice_grad is not there yet")
@pytest.mark.parametrize("dtype", ["float32", "int8", "float64"])
def test_array_api_slice_grad_on_cupy(dtype):
    import cupy
    rng = np.random.default_rng(4)
    g = random_words(rng, 2 * 3 * 4 * 5, dtype).view(dtype).reshape(2, 3, 4, 5)
    args = ([2, 5, 9, 11], [0, 1, 0, 2], [2, 3, 8, 9], [1, 1, -2, 2])
    got = dml.slice_grad(cupy.asarray(g), *args)
    assert isinstance(got, cupy.ndarray)
    assert got.get().tobytes() == dml.slice_grad(g, *args).tobytes()
    assert got.get().tobytes() == ref.slice_grad(g, *args).tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_fold_keeps_subnormal_sums(dtype):
    """CuPy compiles with -ftz=true; the sums must still be IEEE (subnormals
    kept), as NumPy's are: 3 subnormals summed, and a normal minus a neighbour."""
    from opendml.plan import FoldPlan
    from opendml.runtime.params import SUM_FLOAT
    dt = np.dtype(dtype)
    tiny = np.finfo(dt).smallest_subnormal
    B = 64
    plan = FoldPlan(dt.itemsize, SUM_FLOAT, 1, 1, (B + 2,), 0, (3 * B, B, 1), (3,), (1,), (1,), (0,), (B,), 0,
                    (B + 2, B + 2, 1))
    vals = np.concatenate([np.arange(1, 3 * B + 1, dtype=dt) * tiny])
    vals[:8] = [np.finfo(dt).tiny, -np.nextafter(np.finfo(dt).tiny, dt.type(0)), tiny, -tiny, 0, 0, 0, 0]
    src = vals.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize])
    dst = np.full(B + 2, 0, src.dtype)
    want = dst.copy()
    fold_reference(plan, src, want)
    assert np.count_nonzero(want.view(dt)) > B // 2 and np.all(np.abs(want.view(dt)) < np.finfo(dt).tiny * 4)
    assert on_gpu(plan, src, dst).tobytes() == want.tobytes()
