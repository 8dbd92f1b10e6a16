"""The index-driven operators on the CPU against NumPy's own equivalents (issue
32's CPU target: each at least 1.0x NumPy):
``python -m benchmarks.cpu_index [--quick] [--reps N]``.

Rows, each opendml's array function (index check on, as a user calls it, and
with ``check_indices=False``) against NumPy, called round-robin, medians of
--reps rounds after a warm-up call; every row checks the outputs equal bit
for bit first:

* embedding lookup: ``dml.gather(table, ids, 0)`` vs ``np.take(table, ids, 0)``
  (rows of 256 bytes);
* ``dml.gather_elements`` vs ``np.take_along_axis``;
* ``dml.gather_nd`` vs advanced indexing ``x[i0, i1]``;
* ``dml.scatter_elements`` vs ``x.copy(); np.put_along_axis`` (no repeated
  index in a row, where both define the result);
* ``dml.scatter_nd`` vs ``x.copy(); x[i0, i1] = updates``;
* ``dml.one_hot`` vs ``np.eye(depth, dtype)[ids]``;
* ``dml.reverse_subsequences`` vs a copy (``x.copy()``: its floor).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import opendml as dml


def rows(quick: bool):
    rng = np.random.default_rng(0)
    n = 20_000 if quick else 200_000
    table = rng.standard_normal((50_000 if quick else 500_000, 64)).astype(np.float32)
    ids = rng.integers(0, table.shape[0], n).astype(np.int64)
    yield ("embedding gather", lambda: dml.gather(table, ids, 0), lambda: dml.gather(table, ids, 0, check_indices=False),
           lambda: np.take(table, ids, 0))
    side = 256 if quick else 1024
    x = rng.standard_normal((side, side)).astype(np.float32)
    ie = rng.integers(0, side, (side, side)).astype(np.int64)
    yield ("gather_elements", lambda: dml.gather_elements(x, ie, 1),
           lambda: dml.gather_elements(x, ie, 1, check_indices=False), lambda: np.take_along_axis(x, ie, 1))
    tup = rng.integers(0, side, (n, 2)).astype(np.int64)
    yield ("gather_nd", lambda: dml.gather_nd(x, tup), lambda: dml.gather_nd(x, tup, check_indices=False),
           lambda: x[tup[:, 0], tup[:, 1]])
    perm = np.argsort(rng.random((side, side)), axis=1).astype(np.int64)     # no repeated index in a row

    def put():
        y = x.copy()
        np.put_along_axis(y, perm, x, 1)
        return y
    yield ("scatter_elements", lambda: dml.scatter_elements(x, perm, x, 1),
           lambda: dml.scatter_elements(x, perm, x, 1, check_indices=False), put)
    flat = rng.permutation(side * side)[:n if n < side * side else side * side]
    tup = np.stack([flat // side, flat % side], 1).astype(np.int64)
    upd = rng.standard_normal(len(tup)).astype(np.float32)

    def setitem():
        y = x.copy()
        y[tup[:, 0], tup[:, 1]] = upd
        return y
    yield ("scatter_nd", lambda: dml.scatter_nd(x, tup, upd), lambda: dml.scatter_nd(x, tup, upd, check_indices=False),
           setitem)
    labels = rng.integers(0, 1000, n // 4).astype(np.int32)
    values = np.array([0, 1], np.float32)
    yield ("one_hot", lambda: dml.one_hot(labels, 1000, values), None,
           lambda: np.eye(1000, dtype=np.float32)[labels])
    lengths = rng.integers(0, side + 1, side).astype(np.uint32)
    yield ("reverse_subsequences", lambda: dml.reverse_subsequences(x, lengths, 1), None, lambda: x.copy())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args(argv)
    print(f"{'row':22s} {'numpy':>10s} {'opendml':>10s} {'unchecked':>10s} {'x numpy':>8s} {'x unchecked':>11s}")
    for name, ours, fast, theirs in rows(args.quick):
        a, b = ours(), theirs()
        if name != "reverse_subsequences":
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), name
        routes = [theirs, ours] + ([fast] if fast else [])
        times = [[] for _ in routes]
        for _ in range(args.reps):
            for k, f in enumerate(routes):
                t = time.perf_counter()
                f()
                times[k].append(time.perf_counter() - t)
        med = [statistics.median(t) for t in times]
        un = f"{med[2] * 1e3:9.3f}m" if fast else f"{'':>10s}"
        unr = f"{med[0] / med[2]:10.2f}x" if fast else ""
        print(f"{name:22s} {med[0] * 1e3:9.3f}m {med[1] * 1e3:9.3f}m {un} {med[0] / med[1]:7.2f}x {unr}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
