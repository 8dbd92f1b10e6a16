"""Tuning aid (GPU): the FOLD and SLICE_GRAD kernels on the issue's shapes,
kernel alone between CUDA events, for several variants: fold_gather's image
positions per lane (V) and register caps (ODML_FOLD_MIN_BLOCKS), fold1d_tile's
residues per block (RC), the gather on the overlap-add for comparison, and
scatter's words per thread. Each variant's output is compared with the
default's. "(default)" marks what the backend picks.

    python benchmarks/sweep_fold.py [--quick]
"""
from __future__ import annotations

import argparse
import math
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))

from opendml.plan import FoldPlan, ScatterPlan  # noqa: E402
from opendml.runtime.cuda import launch as cl, tuned as ct  # noqa: E402
from opendml.runtime.params import SUM_FLOAT  # noqa: E402


MIN_BLOCKS = (1, 3, 4, 5)   # 6 and up spill (ptxas -v)


def default_min_blocks(name: str) -> int:
    """kernels.cu's ODML_GATHER_BLOCKS / ODML_TILE_BLOCKS for a kernel name."""
    if name.startswith("fold1d_tile"):
        return 4
    t, _, d, _, v = (a.strip() for a in name[name.index("<") + 1:-1].split(","))
    es = {"u8": 1, "u16": 2, "u32": 4, "u64": 8}[t]
    return 5 if int(d) <= 3 and es * int(v) <= 16 else 4


def packed(sizes):
    out, step = [], 1
    for s in reversed(sizes):
        out.insert(0, step)
        step *= s
    return tuple(out)


def time_kernel(cupy, name, params, grid, smem, x, out, options=cl.OPTIONS, reps=20):
    k = cl._kernel(0, name, options)
    p = cl.device_params(params)
    args = (x.data.ptr, out.data.ptr, p)
    k(grid, (cl.THREADS,), args, shared_mem=smem)
    a, b = cupy.cuda.Event(), cupy.cuda.Event()
    a.record()
    for _ in range(reps):
        k(grid, (cl.THREADS,), args, shared_mem=smem)
    b.record()
    b.synchronize()
    return cupy.cuda.get_elapsed_time(a, b) / reps


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    import cupy
    q = args.quick
    cases = []
    for dtype in ("float32", "float16"):
        N = 4 if q else 32
        es = np.dtype(dtype).itemsize
        cases.append((f"fold 2-D {dtype}", dtype, FoldPlan(es, SUM_FLOAT, N, 64, (56, 56), 0, packed((N, 576, 3136)),
                                                           (3, 3), (1, 1), (1, 1), (1, 1), (56, 56), 0,
                                                           packed((N, 64, 56, 56)))))
    N = 1 if q else 4
    cases.append(("fold 3-D float32", "float32", FoldPlan(4, SUM_FLOAT, N, 32, (32, 32, 32), 0,
                                                          packed((N, 864, 32768)), (3, 3, 3), (1, 1, 1),
                                                          (1, 1, 1), (1, 1, 1), (32, 32, 32), 0,
                                                          packed((N, 32, 32, 32, 32)))))
    N, B = (2 if q else 8), 16381
    L = (B - 1) * 256 + 1024
    cases.append(("overlap-add float32", "float32", FoldPlan(4, SUM_FLOAT, N, 1, (L,), 0, packed((N, 1024, B)),
                                                             (1024,), (256,), (1,), (0,), (B,), 0,
                                                             packed((N, 1, L)))))
    for label, dtype, plan in cases:
        x = cupy.random.randint(-8, 8, size=(plan.batch, plan.rows, plan.columns)).astype(dtype)
        out = cupy.empty((plan.batch, plan.channels, *plan.spatial), dtype)
        useful = x.nbytes + out.nbytes
        default = ct._fold_launch(plan)[0]
        variants = []
        D = len(plan.window)
        if D == 1 and plan.strides[0] >= 32:
            variants += [("tile", rc) for rc in (128, 256)] + [("gather", 4)]
        else:
            variants += [("gather", v) for v in (1, 2)]
        want = None
        for variant in variants:
            name, params, grid, smem = ct._fold_launch(plan, variant)
            for mb in MIN_BLOCKS:
                opts = cl.OPTIONS + (f"-DODML_FOLD_MIN_BLOCKS={mb}",)
                try:
                    ms = time_kernel(cupy, name, params, grid, smem, x, out, opts)
                except Exception as exc:
                    print(f"{label} {name} min blocks {mb}: {type(exc).__name__}: {exc}"[:200])
                    continue
                got = out.view(cupy.uint8).copy()
                want = got if want is None else want
                same = bool((got == want).all())
                mark = " (default)" if name == default and mb == default_min_blocks(name) else ""
                print(f"{label:22s} {name:36s} min blocks {mb}: {ms:.4f} ms {useful / ms / 1e6:6.0f} GB/s"
                      f"{mark}{'' if same else ' DIFFERS'}", flush=True)
        del x, out
    # SLICE_GRAD: words per thread
    N = 8 if q else 64
    plan = ScatterPlan(4, (N, 256, 128, 128), 0, packed((N, 256, 128, 128)), (0, 0, 8, 8), (1, 1, 1, 1),
                       (N, 256, 112, 112), 0, packed((N, 256, 112, 112)))
    g = cupy.random.randint(-8, 8, size=(N, 256, 112, 112)).astype(cupy.float32)
    out = cupy.empty((N, 256, 128, 128), cupy.float32)
    useful = g.nbytes + out.nbytes
    w, rev, wp = ct.scatter_word_plan(plan, g.data.ptr, out.data.ptr)
    default, params, _, _ = ct._scatter_launch(plan, g.data.ptr, out.data.ptr)
    want = None
    for items in (1, 2, 4):
        name = f"scatter<{cl._SCALAR[w]}, {len(wp.sizes)}, {rev}, {ct._index_type(wp.count, items)}, {items}>"
        grid = (math.ceil(wp.count / (cl.THREADS * items)),)
        ms = time_kernel(cupy, name, params, grid, 0, g, out)
        got = out.view(cupy.uint8).copy()
        want = got if want is None else want
        print(f"{'slice_grad float32':22s} {name:36s}: {ms:.4f} ms {useful / ms / 1e6:6.0f} GB/s"
              f"{' (default)' if name == default else ''}{'' if bool((got == want).all()) else ' DIFFERS'}",
              flush=True)


if __name__ == "__main__":
    main()
