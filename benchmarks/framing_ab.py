"""The row ``benchmarks.ab`` reports as "unfold 1-D framing w1024 h256", timed alone for two source trees:
6 interleaved fresh processes a tree (A, B, A, B, ...), each the best of 15 rounds of 20 calls of
``dml.unfold`` on a (2, 1, 2**19) float32 array (windows of 1024, hop 256), after 20 warm-up calls.

    python -m benchmarks.framing_ab --a /path/to/old/tree --b .

Each tree needs its compiled extension built in place. Prints each process's (best, median) ms and the
median over processes of the best, and B/A (``--json``: also to a file).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r'''
import time, numpy as np, opendml as dml
rng = np.random.default_rng(0)
xf = rng.standard_normal((2, 1, 2**21 // 4)).astype(np.float32)
for _ in range(20): dml.unfold(xf, [1024], [256])
best = []
for r in range(15):
    t = time.perf_counter()
    for _ in range(20): dml.unfold(xf, [1024], [256])
    best.append((time.perf_counter() - t) / 20 * 1e3)
print(min(best), sorted(best)[len(best) // 2])
'''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.framing_ab", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="tree A (the baseline)")
    ap.add_argument("--b", required=True, help="tree B")
    ap.add_argument("--processes", type=int, default=6, help="processes a tree")
    ap.add_argument("--json", help="write the (best, median) ms of each process and the medians here")
    args = ap.parse_args(argv)
    trees = {"A": os.path.abspath(args.a), "B": os.path.abspath(args.b)}
    res: dict = {k: [] for k in trees}
    for _ in range(args.processes):
        for k, tree in trees.items():
            out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, cwd="/tmp",
                                 env={"PYTHONPATH": os.path.join(tree, "src"), "PATH": os.environ.get("PATH", "")})
            if out.returncode != 0:
                print(f"{k} ({tree}): the process failed:\n{out.stderr[-300:]}", file=sys.stderr)
                return 1
            res[k].append(tuple(map(float, out.stdout.split())))
    for k, v in res.items():
        print(k, [f"{best:.3f} / {median:.3f}" for best, median in v])
    best = {k: statistics.median(b for b, _ in v) for k, v in res.items()}
    print(f"median of per-process best ms: A {best['A']:.3f}, B {best['B']:.3f}, B/A {best['B'] / best['A']:.3f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"trees": trees, "processes": res, "best_ms": best, "ratio": best["B"] / best["A"]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
