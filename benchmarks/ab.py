"""Interleaved A/B runs of the CPU benchmark suite: two source trees (say the
commit before a refactor and the working tree), each run ``--rounds`` times
alternately (A, B, A, B, ...) so drift of the machine hits both alike; prints
each workload's median opendml time per tree and the ratio B/A.

    python -m benchmarks.ab --a /tmp/ab-old --b . [--rounds 3] [--quick] [--env OPENDML_CPU_CACHE_BYTES=0]

Each tree must have its compiled extension built in place
(``python setup.py build_ext --inplace``); each run uses that tree's own
``benchmarks`` package and ``src``, in a fresh interpreter.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile


def run_once(tree: pathlib.Path, out: pathlib.Path, quick: bool, env_extra: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=f"{tree / 'src'}{os.pathsep}{tree}", **env_extra)
    cmd = [sys.executable, "-m", "benchmarks", "--device", "cpu", "--out", str(out)] + (["--quick"] if quick else [])
    subprocess.run(cmd, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
    return json.loads((out / "results-cpu.json").read_text())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.ab", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="tree A (the baseline)")
    ap.add_argument("--b", required=True, help="tree B")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE for both runs")
    ap.add_argument("--json", help="write the comparison here")
    args = ap.parse_args(argv)
    env_extra = dict(e.split("=", 1) for e in args.env)
    trees = {"A": pathlib.Path(args.a).resolve(), "B": pathlib.Path(args.b).resolve()}
    times: dict = {"A": {}, "B": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for label, tree in trees.items():
                res = run_once(tree, pathlib.Path(tmp) / f"{label}{r}", args.quick, env_extra)
                for row in res["rows"]:
                    times[label].setdefault(row["workload"], []).append(row["opendml_s"])
                print(f"round {r + 1}/{args.rounds} {label} done", file=sys.stderr)
    rows = []
    print(f"{'workload':40s} {'A ms':>9s} {'B ms':>9s} {'B/A':>6s}")
    for w in times["A"]:
        if w not in times["B"]:
            continue
        a, b = statistics.median(times["A"][w]), statistics.median(times["B"][w])
        rows.append({"workload": w, "a_s": a, "b_s": b, "b_over_a": b / a, "a_runs": times["A"][w],
                     "b_runs": times["B"][w]})
        print(f"{w:40s} {a * 1e3:9.3f} {b * 1e3:9.3f} {b / a:6.3f}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"a": str(trees["A"]), "b": str(trees["B"]), "env": env_extra,
                                                       "rounds": args.rounds, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
