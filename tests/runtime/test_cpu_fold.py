"""FOLD and SLICE_GRAD on the CPU at the plan level: the compiled kernels
(also split over 3 threads down to one byte of work), the NumPy path and an
independent per-element reference written here must give the same bytes, for
all 11 element types, odd strides and offsets, negative input strides, 1-D
to 3-D windows, and never touch the sentinel words around the output."""
import itertools
import math
import zlib

import numpy as np
import pytest

import opendml as dml
from opendml.plan import FoldPlan, ScatterPlan
from opendml.runtime import get_backend
from opendml.runtime.params import SUM_FLOAT, SUM_INTEGER
from tests import reference as ref
from tests.conftest import native_available

TYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
SENTINEL = 0xA5


def kernel_sets():
    sets = [pytest.param(dict(cpu_kernels="numpy"), id="numpy")]
    if native_available():
        sets += [pytest.param(dict(cpu_kernels="compiled"), id="compiled"),
                 pytest.param(dict(cpu_kernels="compiled", threads=3, thread_grain_bytes=1), id="compiled-threads")]
    return sets


KERNELS = kernel_sets()


def run(plan, src_words, dst_words, **settings):
    with dml.configure(**settings):
        get_backend("cpu").prepare(ref.as_program(plan), [src_words], [dst_words])()


def random_words(dtype, count, seed):
    """Random bit patterns of ``dtype``; for floats every NaN is replaced by
    an infinity (two NaNs meeting in a sum may keep either payload, which
    IEEE leaves open), so infinities, subnormals and -0 all occur."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=count * dtype.itemsize, dtype=np.uint8)
    words = raw.view(WORDS[dtype.itemsize]).copy()
    if dtype.kind == "f":
        values = words.view(dtype)
        nan = np.isnan(values)
        values[nan] = np.where(np.arange(count)[nan] % 2 == 0, np.inf, -np.inf).astype(dtype)
        # mostly moderate values, so sums are not all infinities
        small = rng.random(count) < 0.7
        values[small] = (rng.standard_normal(int(small.sum())) * 100).astype(dtype)
    return words


def with_sentinels(count, before=5, after=7, es=4):
    """An output word array of ``count`` words with sentinel words around it;
    returns (whole, inner)."""
    whole = np.full(before + count + after, 0, WORDS[es])
    whole.view(np.uint8)[:] = SENTINEL
    return whole, whole[before:before + count]


def sum_kind(dtype):
    return SUM_FLOAT if np.dtype(dtype).kind == "f" else SUM_INTEGER


# -- independent references ------------------------------------------------------

#: FOLD's one NaN: quiet, sign +, payload 0.
CANONICAL_NAN = {2: 0x7E00, 4: 0x7FC00000, 8: 0x7FF8000000000000}


def ref_fold(plan: FoldPlan, src_words: np.ndarray, dtype, out_words: np.ndarray) -> None:
    """Per output element: +0, then each contributing window element in
    increasing row-major k order, in float32 for float16, the own type for
    float32/float64, modulo 2^bits for integers; a NaN sum is stored as the
    canonical NaN."""
    dtype = np.dtype(dtype)
    es = dtype.itemsize
    D = len(plan.window)
    K = math.prod(plan.window)
    src = src_words.view(dtype)
    out = out_words.view(dtype)
    acc_type = np.float32 if dtype == np.float16 else dtype.type
    for n, c, *p in itertools.product(range(plan.batch), range(plan.channels), *(range(s) for s in plan.spatial)):
        acc = acc_type(0) if dtype.kind == "f" else 0
        for kflat, k in enumerate(itertools.product(*(range(w) for w in plan.window))):
            b = []
            for d in range(D):
                t = p[d] + plan.start_padding[d] - k[d] * plan.dilations[d]
                if t < 0 or t % plan.strides[d] or t // plan.strides[d] >= plan.blocks[d]:
                    break
                b.append(t // plan.strides[d])
            else:
                col = 0
                for d in range(D):
                    col = col * plan.blocks[d] + b[d]
                i = plan.in_offset + n * plan.in_strides[0] + (c * K + kflat) * plan.in_strides[1] + col * plan.in_strides[2]
                if dtype.kind == "f":
                    with np.errstate(all="ignore"):
                        acc = acc_type(acc + acc_type(src[i]))
                else:
                    acc = (acc + int(src_words[i])) % (1 << (8 * es))
        o = plan.out_offset + n * plan.out_strides[0] + c * plan.out_strides[1] + sum(
            q * s for q, s in zip(p, plan.out_strides[2:]))
        if dtype.kind == "f":
            if np.isnan(acc):               # every NaN sum is the canonical NaN (issue 23)
                acc = np.array(CANONICAL_NAN[dtype.itemsize], WORDS[dtype.itemsize]).view(dtype)
            with np.errstate(all="ignore"):
                out[o] = np.array(acc, acc_type).astype(dtype)
        else:
            out_words[o] = acc


def ref_scatter(plan: ScatterPlan, src_words: np.ndarray, out_words: np.ndarray) -> None:
    for p in itertools.product(*(range(s) for s in plan.sizes)):
        o = plan.out_offset + sum(a * t for a, t in zip(p, plan.out_strides))
        i = []
        for a, f, s, t in zip(p, plan.first, plan.step, plan.taken):
            if a < f or (a - f) % s or (a - f) // s >= t:
                break
            i.append((a - f) // s)
        else:
            out_words[o] = src_words[plan.in_offset + sum(a * t for a, t in zip(i, plan.in_strides))]
            continue
        out_words[o] = 0


# -- plans ------------------------------------------------------------------------

def fold_plan(dtype, batch, channels, spatial, window, strides, dilations, start_padding, end_padding,
              in_layout="packed", out_layout="packed"):
    """A FoldPlan with the given geometry and an input/output layout:
    "packed", "odd" (padded strides and an offset) or "reversed" (input only:
    negative strides with the origin at the end)."""
    D = len(window)
    blocks = tuple((s + a + e - d * (w - 1) - 1) // t + 1
                   for s, w, t, d, a, e in zip(spatial, window, strides, dilations, start_padding, end_padding))
    K = math.prod(window)
    B = math.prod(blocks)
    rows = channels * K
    if in_layout == "packed":
        in_strides, in_offset, in_len = (rows * B, B, 1), 0, batch * rows * B
    elif in_layout == "odd":
        cs = 3
        rs = B * cs + 5
        ns = rows * rs + 11
        in_strides, in_offset, in_len = (ns, rs, cs), 7, 7 + batch * ns
    else:  # reversed columns and rows
        in_strides = (rows * B, -B, -1)
        in_offset = (rows - 1) * B + (B - 1)
        in_len = batch * rows * B
    if out_layout == "packed":
        shape = (batch, channels, *spatial)
        out_strides = tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))
        out_offset, out_len = 0, batch * channels * math.prod(spatial)
    else:  # odd: every stride padded, an offset
        strides_o = []
        step = 2
        for s in reversed((batch, channels, *spatial)):
            strides_o.append(step)
            step = step * s + 3
        out_strides = tuple(reversed(strides_o))
        out_offset = 3
        out_len = out_offset + sum((s - 1) * t for s, t in zip((batch, channels, *spatial), out_strides)) + 1
    es = np.dtype(dtype).itemsize
    plan = FoldPlan(element_size=es, sum_kind=sum_kind(dtype), batch=batch, channels=channels,
                    spatial=tuple(spatial), in_offset=in_offset, in_strides=in_strides, window=tuple(window),
                    strides=tuple(strides), dilations=tuple(dilations), start_padding=tuple(start_padding),
                    blocks=blocks, out_offset=out_offset, out_strides=out_strides)
    return plan, in_len, out_len


FOLDS = [
    # (batch, channels, spatial, window, strides, dilations, start pad, end pad)
    (1, 1, (5,), (2,), (1,), (1,), (0,), (0,)),
    (2, 3, (9,), (3,), (2,), (1,), (1,), (2,)),                    # overlap-add with a hop
    (1, 2, (13,), (4,), (3,), (2,), (2,), (1,)),                   # dilation not dividing stride
    (1, 1, (7,), (3,), (5,), (1,), (0,), (2,)),                    # gaps: positions no block reaches
    (2, 2, (5, 6), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),        # "same" padding
    (1, 3, (7, 5), (2, 3), (2, 1), (2, 1), (1, 0), (2, 2)),
    (1, 1, (4, 4), (4, 4), (1, 1), (1, 1), (3, 3), (3, 3)),        # mostly padding
    (1, 2, (4, 3, 5), (2, 2, 3), (1, 2, 1), (1, 1, 2), (1, 0, 1), (0, 1, 2)),
    (2, 1, (3, 4, 3), (3, 1, 2), (2, 1, 3), (1, 1, 1), (1, 0, 2), (1, 0, 1)),
]


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("case", FOLDS, ids=lambda c: "x".join(map(str, c[2])) + "w" + "x".join(map(str, c[3])))
@pytest.mark.parametrize("layout", [("packed", "packed"), ("odd", "odd"), ("reversed", "packed")],
                         ids=lambda l: "-".join(l))
def test_fold_matches_the_reference(dtype, case, layout):
    plan, in_len, out_len = fold_plan(dtype, *case, in_layout=layout[0], out_layout=layout[1])
    es = np.dtype(dtype).itemsize
    src = random_words(dtype, in_len, seed=zlib.crc32(repr((dtype, case)).encode()))
    want_whole, want = with_sentinels(out_len, es=es)
    ref_fold(plan, src, dtype, want)
    for settings in KERNELS:
        whole, out = with_sentinels(out_len, es=es)
        run(plan, src, out, **settings.values[0])
        assert whole.tobytes() == want_whole.tobytes(), (settings.id, plan)


@pytest.mark.parametrize("dtype", TYPES)
def test_fold_wide_rows_take_the_fused_blocks(dtype):
    # Rows wide enough for the compiled kernel's register blocks (64 bytes of
    # accumulators, half a block, then single elements) for every type.
    es = np.dtype(dtype).itemsize
    for case in [(1, 2, (3, 150), (2, 3), (1, 1), (1, 1), (1, 1), (0, 1)),
                 (1, 1, (333,), (5,), (1,), (1,), (2,), (2,)),
                 (2, 1, (120,), (3,), (1,), (1,), (1,), (1,)),
                 (1, 1, (4, 97), (3, 4), (1, 1), (1, 2), (1, 3), (1, 3))]:
        plan, in_len, out_len = fold_plan(dtype, *case)
        src = random_words(dtype, in_len, seed=zlib.crc32(repr((dtype, case)).encode()))
        want_whole, want = with_sentinels(out_len, es=es)
        ref_fold(plan, src, dtype, want)
        for settings in KERNELS:
            whole, out = with_sentinels(out_len, es=es)
            run(plan, src, out, **settings.values[0])
            assert whole.tobytes() == want_whole.tobytes(), (settings.id, case)


@pytest.mark.parametrize("settings", KERNELS)
def test_fold_output_no_block_reaches_is_zero_and_neg_zero_becomes_plus_zero(settings):
    # Every input element is -0.0: each sum starts at +0, and +0 + -0 = +0.
    plan, in_len, out_len = fold_plan("float32", 1, 1, (7,), (3,), (5,), (1,), (0,), (2,))
    src = np.full(in_len, np.float32(-0.0)).view(np.uint32)
    whole, out = with_sentinels(out_len)
    run(plan, src, out, **settings)
    assert out.tolist() == [0] * out_len


@pytest.mark.parametrize("settings", KERNELS)
def test_float16_sums_round_once_like_numpy(settings):
    # 1-D window of 2 with stride 1: out[p] = x[p] + y[p] over 2^17 random
    # float16 pairs (all finite), summed in float32 and rounded once.
    rng = np.random.default_rng(3)
    n = 1 << 17
    bits = rng.integers(0, 1 << 16, size=(2, n), dtype=np.uint16)
    vals = bits.view(np.float16)
    bits[~np.isfinite(vals)] = 0x3C00
    plan = FoldPlan(element_size=2, sum_kind=SUM_FLOAT, batch=1, channels=1, spatial=(n,), in_offset=0,
                    in_strides=(2 * (n + 1), n + 1, 1), window=(2,), strides=(1,), dilations=(1,), start_padding=(1,),
                    blocks=(n + 1,), out_offset=0, out_strides=(n, n, 1))
    src = np.zeros(2 * (n + 1), np.uint16)
    src[1:n + 1] = bits[0]           # k = 0, block p + 1
    src[n + 1:2 * n + 1] = bits[1]   # k = 1, block p
    out = np.zeros(n, np.uint16)
    run(plan, src, out, **settings)
    with np.errstate(all="ignore"):
        want = (bits[0].view(np.float16).astype(np.float32) + bits[1].view(np.float16).astype(np.float32))
        want = want.astype(np.float16).view(np.uint16)
    assert np.array_equal(out, want)


@pytest.mark.parametrize("settings", KERNELS)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_a_nan_term_gives_the_canonical_nan(settings, dtype):
    # One NaN (with a payload) per output at most: IEEE would keep its
    # payload, but the GPU does not; every backend stores the canonical NaN.
    dtype = np.dtype(dtype)
    plan, in_len, out_len = fold_plan(dtype, 1, 1, (6,), (2,), (1,), (1,), (0,), (0,))
    src = np.ones(in_len, dtype)
    words = src.view(WORDS[dtype.itemsize])
    nan = {2: 0x7E05, 4: 0x7FC00123, 8: 0x7FF8000000000123}[dtype.itemsize]
    words[2] = nan                  # row k=0, block 2: output position 2
    _, want = with_sentinels(out_len, es=dtype.itemsize)
    ref_fold(plan, words, dtype, want)
    _, out = with_sentinels(out_len, es=dtype.itemsize)
    run(plan, words, out, **settings)
    assert out.tobytes() == want.tobytes() and out[2] == CANONICAL_NAN[dtype.itemsize]


def test_fold_is_deterministic_under_threads_and_agrees_across_paths():
    if not native_available():
        pytest.skip("the compiled CPU kernels are not installed")
    # A bigger float32 fold whose sums depend on their order.
    plan, in_len, out_len = fold_plan("float32", 2, 3, (23, 29), (3, 4), (2, 1), (1, 2), (1, 2), (2, 1))
    src = random_words("float32", in_len, 9)
    outs = []
    for settings in (dict(cpu_kernels="numpy"), dict(cpu_kernels="compiled", threads=1),
                     dict(cpu_kernels="compiled", threads=3, thread_grain_bytes=1),
                     dict(cpu_kernels="compiled", threads=2, thread_grain_bytes=1)):
        out = np.zeros(out_len, np.uint32)
        run(plan, src, out, **settings)
        outs.append(out.tobytes())
    assert len(set(outs)) == 1


@pytest.mark.parametrize("dtype", ["float32", "int16"])
def test_fold_with_a_huge_window_over_few_blocks(dtype):
    # A 1-D window of 2^16 over one block: the NumPy path loops over the one
    # block, not over 65,536 window positions.
    W = 1 << 16
    plan, in_len, out_len = fold_plan(dtype, 1, 1, (3,), (W,), (1,), (1,), (W - 4,), (1,))
    assert plan.blocks == (1,)
    src = random_words(dtype, in_len, 4)
    _, want = with_sentinels(out_len, es=np.dtype(dtype).itemsize)
    ref_fold(plan, src, dtype, want)
    for settings in KERNELS:
        _, out = with_sentinels(out_len, es=np.dtype(dtype).itemsize)
        run(plan, src, out, **settings.values[0])
        assert out.tobytes() == want.tobytes()


def test_fold_rejects_a_type_that_cannot_be_summed():
    plan, _, _ = fold_plan("int8", 1, 1, (4,), (2,), (1,), (1,), (0,), (0,))
    bad = FoldPlan(**{**plan.__dict__, "sum_kind": SUM_FLOAT})
    for settings in KERNELS:
        with pytest.raises(ValueError, match="sum"):
            run(bad, np.zeros(8, np.uint8), np.zeros(4, np.uint8), **settings.values[0])


# -- SLICE_GRAD ---------------------------------------------------------------------

def scatter_plan(dtype, sizes, first, step, taken, in_layout="packed", out_layout="packed"):
    R = len(sizes)
    if in_layout == "packed":
        in_strides = tuple(math.prod(taken[i + 1:]) for i in range(R))
        in_offset, in_len = 0, math.prod(taken)
    elif in_layout == "reversed":
        packed = [math.prod(taken[i + 1:]) for i in range(R)]
        in_strides = tuple(-t if i % 2 == 0 else t for i, t in enumerate(packed))
        in_offset = sum((n - 1) * -t for n, t in zip(taken, in_strides) if t < 0)
        in_len = math.prod(taken)
    else:  # odd: strides 3x packed plus gaps, an offset
        strides, step_ = [], 3
        for n in reversed(taken):
            strides.append(step_)
            step_ = step_ * n + 2
        in_strides = tuple(reversed(strides))
        in_offset = 5
        in_len = in_offset + sum((n - 1) * t for n, t in zip(taken, in_strides)) + 1
    if out_layout == "packed":
        out_strides = tuple(math.prod(sizes[i + 1:]) for i in range(R))
        out_offset, out_len = 0, math.prod(sizes)
    else:
        strides, step_ = [], 2
        for n in reversed(sizes):
            strides.append(step_)
            step_ = step_ * n + 1
        out_strides = tuple(reversed(strides))
        out_offset = 4
        out_len = out_offset + sum((n - 1) * t for n, t in zip(sizes, out_strides)) + 1
    plan = ScatterPlan(element_size=np.dtype(dtype).itemsize, sizes=tuple(sizes), out_offset=out_offset,
                       out_strides=out_strides, first=tuple(first), step=tuple(step), taken=tuple(taken),
                       in_offset=in_offset, in_strides=in_strides)
    return plan, in_len, out_len


SCATTERS = [
    # (output sizes, first, step, taken)
    ((7,), (2,), (1,), (3,)),
    ((9,), (1,), (3,), (3,)),                                      # gaps between covered elements
    ((1, 1, 5, 6), (0, 0, 1, 2), (1, 1, 2, 1), (1, 1, 2, 3)),      # the page's SLICE1 read backwards
    ((3, 4, 5), (0, 0, 0), (1, 1, 1), (3, 4, 5)),                  # everything covered
    ((3, 4, 5), (1, 1, 4), (1, 2, 1), (2, 2, 1)),
    ((2, 3, 8, 9), (0, 1, 2, 0), (1, 1, 3, 4), (2, 2, 2, 3)),
    ((4, 1, 6, 1, 7), (1, 0, 0, 0, 6), (2, 1, 5, 1, 1), (2, 1, 2, 1, 1)),
    ((2, 2, 2, 2, 2, 2, 2, 3), (1, 0, 1, 0, 1, 0, 1, 1), (1,) * 8, (1, 2, 1, 2, 1, 2, 1, 2)),
]


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("case", SCATTERS, ids=lambda c: "x".join(map(str, c[0])))
@pytest.mark.parametrize("layout", [("packed", "packed"), ("odd", "odd"), ("reversed", "packed")],
                         ids=lambda l: "-".join(l))
def test_slice_grad_matches_the_reference(dtype, case, layout):
    plan, in_len, out_len = scatter_plan(dtype, *case, in_layout=layout[0], out_layout=layout[1])
    es = np.dtype(dtype).itemsize
    src = random_words(dtype, in_len, seed=zlib.crc32(repr((dtype, case)).encode()))
    want_whole, want = with_sentinels(out_len, es=es)
    ref_scatter(plan, src, want)
    for settings in KERNELS:
        whole, out = with_sentinels(out_len, es=es)
        run(plan, src, out, **settings.values[0])
        assert whole.tobytes() == want_whole.tobytes(), (settings.id, plan)


@pytest.mark.parametrize("dtype", ["int8", "float16", "float32", "float64"])
def test_slice_grad_rows_at_every_alignment(dtype):
    # Contiguous rows are written as one zeros/input/zeros fill: every start,
    # length and output address modulo 16 of the covered run.
    es = np.dtype(dtype).itemsize
    for width in (17, 40, 97):
        for first in (0, 1, 5, 16, width // 2):
            for taken in (1, 3, width - first):
                if first + taken > width:
                    continue
                plan, in_len, out_len = scatter_plan(dtype, (3, width), (1, first), (1, 1), (2, taken))
                src = random_words(dtype, in_len, width + first)
                _, want = with_sentinels(out_len, es=es)
                ref_scatter(plan, src, want)
                for shift in range(4):
                    shifted = ScatterPlan(**{**plan.__dict__, "out_offset": shift})
                    for settings in KERNELS:
                        _, out = with_sentinels(out_len + shift, es=es)
                        run(shifted, src, out, **settings.values[0])
                        assert out[shift:].tobytes() == want.tobytes()
                        assert out[:shift].tobytes() == bytes([SENTINEL]) * (shift * es)
