"""Odd layouts of FOLD and SLICE_GRAD on CUDA with every buffer exactly as
large as its plan's span and CuPy's pool off, for
``compute-sanitizer --tool memcheck``: a read past the bound input or a write
past the output is an out-of-bounds access it reports. Covers fold_gather
(1-, 2- and 3-D, every lane count), fold1d_tile (strides 2 to 300), scatter in
16-byte words (forwards and backwards) and in elements; each result is checked
against the NumPy reference. Also runs the same plans from buffers starting
one element into an allocation (misaligned pointers)."""
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from opendml.plan import MovePlan  # noqa: E402
from opendml.runtime import get_backend  # noqa: E402
from opendml.runtime.cuda import tuned as ct  # noqa: E402
from tests.runtime.test_cuda_emulation import (dense_fold_plans, fold_reference, random_fold_plan,  # noqa: E402
                                               random_scatter_plan, random_words, scatter_reference, span_hi,
                                               wide_scatter_plans)


def exact(cupy, host, shift):
    """A device copy of ``host`` in an allocation exactly ``shift`` elements longer."""
    buf = cupy.empty(host.size + shift, host.dtype)
    view = buf[shift:]
    view.set(host)
    return buf, view


def run(cupy, plan, n_in, n_out, dtype, reference, rng):
    es = np.dtype(dtype).itemsize
    word = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[es]
    src = random_words(rng, n_in, dtype)
    dst = np.full(n_out, 0x5A, np.uint8).repeat(es).view(word)
    want = dst.copy()
    reference(plan, src, want)
    for shift in (0, 1):
        _, s = exact(cupy, src, shift)
        _, d = exact(cupy, dst, shift)
        get_backend("cuda").prepare(MovePlan.of(plan), [s], [d])()
        got = d.get()
        assert got.tobytes() == want.tobytes(), (shift, plan)


def main():
    import cupy
    cupy.cuda.set_allocator(None)  # one cudaMalloc per buffer: exact bounds
    rng = np.random.default_rng(11)
    n = 0
    for dtype in ("float16", "float32", "float64", "int8", "uint64"):
        es, flt = np.dtype(dtype).itemsize, np.dtype(dtype).kind == "f"
        plans = dense_fold_plans(es, flt) + [random_fold_plan(rng, es, flt, D) for D in (1, 2, 3, 3)]
        for lanes in (None, 1, 4):
            ct.FOLD_LANES = lanes
            for plan in plans:
                run(cupy, plan, span_hi(plan.in_offset, (plan.batch, plan.rows, plan.columns), plan.in_strides) + 1,
                    span_hi(plan.out_offset, (plan.batch, plan.channels, *plan.spatial), plan.out_strides) + 1,
                    dtype, fold_reference, rng)
                n += 1
        ct.FOLD_LANES = None
        ct.FOLD_TILE_MIN_STRIDE = 1
        for stride in (2, 32, 40, 256, 300):
            plan = random_fold_plan(rng, es, flt, 1, stride=stride)
            assert ct._fold_launch(plan)[0].startswith("fold1d_tile")
            run(cupy, plan, span_hi(plan.in_offset, (plan.batch, plan.rows, plan.columns), plan.in_strides) + 1,
                span_hi(plan.out_offset, (plan.batch, plan.channels, *plan.spatial), plan.out_strides) + 1,
                dtype, fold_reference, rng)
            n += 1
        ct.FOLD_TILE_MIN_STRIDE = 32
        for plan in wide_scatter_plans(es) + [random_scatter_plan(rng, es) for _ in range(6)]:
            run(cupy, plan, span_hi(plan.in_offset, plan.taken, plan.in_strides) + 1,
                span_hi(plan.out_offset, plan.sizes, plan.out_strides) + 1, dtype, scatter_reference, rng)
            n += 1
    print(f"sanitize fold/slice_grad: {n} odd layouts (x2 alignments) agree with the NumPy reference")


if __name__ == "__main__":
    main()
