"""A small run of every CUDA index kernel on hostile indices (huge, negative,
int64 extremes, out of range, with ``check_indices=False``) for CUDA's
memcheck: ``compute-sanitizer --tool memcheck python3 -m
benchmarks.gpu_index_memcheck``. Each call's bytes are compared with the CPU
backend's; the script prints one line a call and exits non-zero on a
mismatch (memcheck reports any read or write outside a buffer)."""
from __future__ import annotations

import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))

EXTREMES = (0, 1, -1, 2**31 - 1, -2**31, 2**32 - 1, 2**63 - 1, -2**63, 2**64 - 1, 7, -7, 10**12)


def hostile(rng, shape, n, dt):
    info = np.iinfo(dt)
    lo = 0 if info.min == 0 else -n - 2
    out = rng.integers(lo, n + 2, shape).astype(dt)
    ext = np.array([e for e in EXTREMES if info.min <= e <= info.max], dt)
    flat = out.reshape(-1)
    flat[::3] = ext[rng.integers(0, ext.size, flat[::3].size)]
    return out


def main() -> int:
    import cupy as cp

    import opendml as dml
    from opendml.arrays.index_ops import index_adjoint
    from opendml.model.tensor_desc import TensorDesc
    from opendml.runtime.cuda import index as ix
    rng = np.random.default_rng(0)
    bad = 0

    def check(label, fn, *arrays, **kw):
        nonlocal bad
        want = fn(*arrays, **kw)
        got = cp.asnumpy(fn(*[cp.asarray(a) for a in arrays], **kw))
        ok = got.tobytes() == np.ascontiguousarray(want).tobytes()
        bad += not ok
        print(f"{label:48s} {'same bytes' if ok else 'MISMATCH'}", flush=True)

    for it in (np.int64, np.int32, np.uint64, np.uint32):
        x = rng.standard_normal((6, 300)).astype(np.float32)
        check(f"gather rows ({np.dtype(it).name})", dml.gather, x, hostile(rng, (40,), 6, it), axis=0,
              check_indices=False)
        check("gather_elements along rows (staged)", dml.gather_elements, x, hostile(rng, (6, 200), 300, it),
              axis=1, check_indices=False)
        check("gather_elements along columns", dml.gather_elements, x, hostile(rng, (9, 300), 6, it), axis=0,
              check_indices=False)
        check("gather_nd", dml.gather_nd, x, hostile(rng, (50, 2), 6, it), check_indices=False)
        check("scatter_elements along rows (group)", dml.scatter_elements, x, hostile(rng, (6, 400), 300, it),
              rng.standard_normal((6, 400)).astype(np.float32), axis=1, check_indices=False)
        check("scatter_nd rows (owner)", dml.scatter_nd, x, hostile(rng, (20, 1), 6, it),
              rng.standard_normal((20, 300)).astype(np.float32), check_indices=False)
        check("one_hot", lambda i, v: dml.one_hot(i, 9, v), hostile(rng, (5, 7), 9, it),
              np.array([0, 1], np.float32))
        if np.dtype(it).kind == "u":
            y = rng.standard_normal((500, 2, 64)).astype(np.float32)
            check("reverse_subsequences (tile, 62.5 KiB)", dml.reverse_subsequences, y,
                  hostile(rng, (1, 2, 64), 500, it), axis=0)
            check("reverse_subsequences along the last axis", dml.reverse_subsequences, y[:4],
                  hostile(rng, (4, 2, 1), 64, it), axis=2)
            z = rng.standard_normal((4, 2, 200)).astype(np.float32)
            check("reverse_subsequences along rows of 200", dml.reverse_subsequences, z,
                  hostile(rng, (4, 2, 1), 200, it), axis=2)
            for dt, n in ((np.float16, 16), (np.float32, 8), (np.float32, 12), (np.float64, 4)):   # short rows
                check(f"reverse_subsequences rows of {n} {np.dtype(dt).name}", dml.reverse_subsequences,
                      rng.standard_normal((9, 13, n)).astype(dt), hostile(rng, (9, 13, 1), n, it), axis=2)
    old = ix.ROW_STAGE, ix.SCATTER_VIA
    ix.ROW_STAGE, ix.SCATTER_VIA = False, "sort"
    from opendml.runtime import get_backend
    get_backend("cuda:0")._launches.clear()
    try:
        x = rng.standard_normal((6, 300)).astype(np.float32)
        check("gather_elements along rows (in place)", dml.gather_elements, x,
              hostile(rng, (6, 200), 300, np.int64), axis=1, check_indices=False)
        check("scatter_nd rows (sort)", dml.scatter_nd, x, hostile(rng, (20, 1), 6, np.int64),
              rng.standard_normal((20, 300)).astype(np.float32), check_indices=False)
    finally:
        ix.ROW_STAGE, ix.SCATTER_VIA = old
        get_backend("cuda:0")._launches.clear()
    for dt, t in ((np.float32, dml.DataType.FLOAT32), (np.float16, dml.DataType.FLOAT16)):
        primal = dml.GatherOperatorDesc(TensorDesc(t, [7, 16]), TensorDesc(dml.DataType.INT64, [1, 50]), None, 0, 1)
        check(f"accumulating backward, wide words ({np.dtype(dt).name})",
              lambda g, i: index_adjoint(primal, 0, g, i), rng.standard_normal((50, 16)).astype(dt),
              hostile(rng, (1, 50), 7, np.int64))
        scatter = dml.ScatterNdOperatorDesc(TensorDesc(t, [5, 6]), TensorDesc(dml.DataType.INT64, [30, 1]),
                                            TensorDesc(t, [30, 6]), None, 2, 2)
        check("scatter's updates gradient (last only)", lambda g, i: index_adjoint(scatter, 2, g, i),
              rng.standard_normal((5, 6)).astype(dt), rng.integers(0, 5, (30, 1)).astype(np.int64))
    print(f"{bad} mismatches", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
