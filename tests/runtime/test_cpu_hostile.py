"""The CPU kernels on legal but hostile plans (issue 14): offsets that would
overflow 64 bits if positions in the padding were ever turned into offsets,
output descriptions whose elements share memory, and windows so large that
per-window-position scratch memory or Python views would be ruinous. Each
runs on both kernel sets (and the compiled one split over threads)."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import opendml as dml
from opendml.plan import FoldPlan, ScatterPlan, UnfoldPlan
from opendml.runtime import get_backend
from opendml.runtime.params import SUM_FLOAT
from tests import reference as ref
from tests.conftest import native_available

U32 = 2**32 - 1


def kernel_sets():
    sets = [pytest.param(dict(cpu_kernels="numpy"), id="numpy")]
    if native_available():
        sets += [pytest.param(dict(cpu_kernels="compiled"), id="compiled"),
                 pytest.param(dict(cpu_kernels="compiled", threads=3, thread_grain_bytes=1, unfold_tile_stride=0,
                                   unfold_tile_columns=5), id="compiled-threads-tiles")]
    return sets


@pytest.fixture(params=kernel_sets())
def kernels(request):
    with dml.configure(**request.param):
        yield request.param


# -- (a) offsets of positions in the padding never formed ---------------------------

def _run_unfold(desc, x):
    dev = dml.Device("cpu")
    return dev.run(desc, x)


@pytest.mark.parametrize("case", ["outer", "inner"])
def test_unfold_size_one_dimension_with_huge_stride_and_padding(kernels, case):
    # A size-1 spatial dimension whose stride, window stride and start padding
    # are all 2^32 - 1: (k*dilation - padding) * stride and b*stride*stride
    # reach about 2^64 (elements), although every element read is in range.
    F32 = dml.DataType.FLOAT32
    if case == "outer":
        inp = dml.TensorDesc(F32, [1, 1, 1, 3], [3, 3, U32, 1])
        desc = dml.UnfoldOperatorDesc(inp, None, [1, 2], [U32, 1], [1, 1], [U32, 0], [0, 0])
        x = np.array([5.0, 6.0, 7.0], np.float32).reshape(1, 1, 1, 3)
        want = ref.unfold(x, [1, 2], [U32, 1], [1, 1], [U32, 0], [0, 0])
    else:
        inp = dml.TensorDesc(F32, [1, 1, 1], [1, 1, U32])
        desc = dml.UnfoldOperatorDesc(inp, None, [1], [U32], [1], [U32], [U32])
        x = np.array([5.0], np.float32).reshape(1, 1, 1)
        want = np.array([[[0.0, 5.0, 0.0]]], np.float32)
    got = _run_unfold(desc, x)
    assert got.tobytes() == np.ascontiguousarray(want).tobytes()


def test_unfold_plan_with_size_one_dimensions_and_int64_range_strides(kernels):
    # At the plan level (as the array API may lower a NumPy view): size-1
    # dimensions with strides near 2^62 elements are never stepped.
    plan = UnfoldPlan(element_size=4, batch=1, channels=1, spatial=(1, 3), in_offset=0,
                      in_strides=(2**62, 2**61, 2**60, 1), window=(2, 2), strides=(2**31, 1), dilations=(2**31, 1),
                      start_padding=(2**31, 1), blocks=(2, 3), out_offset=0, out_strides=(24, 6, 1))
    src = np.array([5, 6, 7], np.uint32)
    out = np.full(24, 99, np.uint32)
    get_backend("cpu").prepare(ref.as_program(plan), [src], [out])()
    # dim 0: position b*2^31 + k*2^31 - 2^31 is 0 for (b, k) = (1, 0), (0, 1)
    want = np.zeros((4, 6), np.uint32)
    for k0, k1 in np.ndindex(2, 2):
        for b0, b1 in np.ndindex(2, 3):
            p0, p1 = (b0 + k0 - 1) * 2**31, b1 + k1 - 1
            if p0 == 0 and 0 <= p1 < 3:
                want[k0 * 2 + k1, b0 * 3 + b1] = src[p1]
    assert out.reshape(4, 6).tolist() == want.tolist()


# -- (b) output elements that share memory -------------------------------------------

def test_framing_rows_sharing_memory_hold_one_of_their_values(kernels):
    # 1-D framing (dilation divides stride: the compiled kernels' shifted-rows
    # path) into an output whose rows all share memory (row stride 0): each
    # address must end up holding one of the values that collide there.
    n, w, hop = 4000, 64, 32
    x = np.arange(1, n + 1, dtype=np.float32).reshape(1, 1, n)
    blocks = (n - w) // hop + 1
    out_desc = dml.TensorDesc(dml.DataType.FLOAT32, [1, w, blocks], [0, 0, 1])
    desc = dml.UnfoldOperatorDesc(dml.TensorDesc(dml.DataType.FLOAT32, [1, 1, n]), out_desc, [w], [hop], [1], [0], [0])
    dev = dml.Device("cpu")
    c = dev.compile_operator(dev.create_operator(desc))
    ib, ob = dev.upload(x), dev.create_buffer(blocks * 4)
    t = dev.create_binding_table(c)
    t.bind_inputs([dml.BufferBinding(ib)])
    t.bind_outputs([dml.BufferBinding(ob)])
    dev.execute(c, t)
    got = ob.read().view(np.float32)
    frames = x[0, 0, np.arange(blocks)[:, None] * hop + np.arange(w)[None, :]]     # (blocks, w)
    assert all(got[b] in frames[b] for b in range(blocks))


def test_fold_and_scatter_outputs_sharing_memory_hold_one_of_their_values(kernels):
    rng = np.random.default_rng(2)
    # FOLD into (1, 3, 8) whose channels share memory (channel stride 0)
    plan = FoldPlan(element_size=4, sum_kind=SUM_FLOAT, batch=1, channels=3, spatial=(8,), in_offset=0,
                    in_strides=(18, 3, 1), window=(2,), strides=(3,), dilations=(1,), start_padding=(0,),
                    blocks=(3,), out_offset=0, out_strides=(8, 0, 1))
    src = rng.integers(1, 50, 18).astype(np.float32)
    out = np.full(8, -1.0, np.float32)
    get_backend("cpu").prepare(ref.as_program(plan), [src.view(np.uint32)], [out.view(np.uint32)])()
    per_channel = np.zeros((3, 8), np.float32)
    rows = src.reshape(6, 3)
    for c in range(3):
        for k in range(2):
            for b in range(3):
                per_channel[c, b * 3 + k] += rows[c * 2 + k, b]
    assert all(out[p] in per_channel[:, p] for p in range(8))
    # SLICE_GRAD into (4, 6) whose rows share memory
    plan = ScatterPlan(element_size=4, sizes=(4, 6), out_offset=0, out_strides=(0, 1), first=(1, 1), step=(2, 2),
                       taken=(2, 3), in_offset=0, in_strides=(3, 1))
    src = np.arange(1, 7, dtype=np.uint32)
    out = np.full(6, 99, np.uint32)
    get_backend("cpu").prepare(ref.as_program(plan), [src], [out])()
    full = np.zeros((4, 6), np.uint32)
    full[1::2, 1::2] = src.reshape(2, 3)
    assert all(out[p] in full[:, p] for p in range(6))


# -- (c) scratch memory O(rank) plus the output ------------------------------------------

def _huge_window_plan(W):
    """(1, 1, 1) int8 input, a window of W positions over one block: one
    window position reads the input, the other W - 1 read padding."""
    return UnfoldPlan(element_size=1, batch=1, channels=1, spatial=(1,), in_offset=0, in_strides=(1, 1, 1),
                      window=(W,), strides=(1,), dilations=(1,), start_padding=(W // 2,), blocks=(1,),
                      out_offset=0, out_strides=(W, 1, 1))


def test_numpy_unfold_of_a_huge_window_builds_few_views():
    import tracemalloc
    W = 1 << 18
    plan = _huge_window_plan(W)
    src = np.array([7], np.uint8)
    out = np.full(W, 9, np.uint8)
    with dml.configure(cpu_kernels="numpy"):
        tracemalloc.start()
        try:
            get_backend("cpu").prepare(ref.as_program(plan), [src], [out])()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 1 << 20, peak             # one view per window position took ~340 bytes each
    want = np.zeros(W, np.uint8)
    want[W // 2] = 7
    assert np.array_equal(out, want)


@pytest.mark.skipif(not native_available(), reason="the compiled CPU kernels are not installed")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_compiled_unfold_of_a_huge_window_needs_no_scratch_per_window_position():
    # In a fresh process: peak resident memory beyond the 16 MiB output must
    # stay small (16 bytes of scratch per window position were 256 MiB).
    code = textwrap.dedent("""
        import numpy as np, opendml as dml
        from opendml.plan import MovePlan, UnfoldPlan, Windows
        from opendml.runtime import get_backend
        W = 1 << 24
        plan = UnfoldPlan(element_size=1, batch=1, channels=1, spatial=(1,), in_offset=0, in_strides=(1, 1, 1),
                          window=(W,), strides=(1,), dilations=(1,), start_padding=(W // 2,), blocks=(1,),
                          out_offset=0, out_strides=(W, 1, 1))
        src = np.array([7], np.uint8)
        out = np.ones(W, np.uint8)
        dml.configure(cpu_kernels="compiled", threads=2)
        run = get_backend("cpu").prepare(MovePlan((5,), (5,), (Windows(0, 0, plan),)), [src], [out])
        def peak():   # this process's resident high-water mark (ru_maxrss may carry the parent's)
            with open("/proc/self/status") as f:
                return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM:"))
        before = peak()
        run()
        after = peak()
        assert out[W // 2] == 7 and int(out.sum()) == 7
        print(after - before)
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    grown = int(res.stdout.strip().splitlines()[-1])
    assert grown < 32 << 20, grown


def test_numpy_fold_of_a_huge_window_builds_few_views():
    import tracemalloc
    W = 1 << 18
    plan = FoldPlan(element_size=4, sum_kind=SUM_FLOAT, batch=1, channels=1, spatial=(1,), in_offset=0,
                    in_strides=(W, 1, 1), window=(W,), strides=(1,), dilations=(1,), start_padding=(W // 2,),
                    blocks=(1,), out_offset=0, out_strides=(1, 1, 1))
    src = np.arange(W, dtype=np.float32)
    out = np.zeros(1, np.float32)
    with dml.configure(cpu_kernels="numpy"):
        tracemalloc.start()
        try:
            get_backend("cpu").prepare(ref.as_program(plan), [src.view(np.uint32)], [out.view(np.uint32)])()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 1 << 20, peak
    assert out[0] == src[W // 2]
