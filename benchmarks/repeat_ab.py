"""Repeated calls of a few array functions on small PyTorch tensors, two source trees side by side: the host
path a training loop meets once a shape has been seen (the C call cache, the C++ autograd node, Inductor's
direct kernels). Each tree runs in its own fresh interpreter (its ``src`` first on the path), alternately
(A, B, A, B, ...), so drift of the machine hits both alike; per row the median over rounds of the best of
5 repeats of N back-to-back calls (one device synchronisation at the end), microseconds a call, and B/A.

    python -m benchmarks.repeat_ab --a /path/to/old/tree --b . [--device cuda] [--rounds 3] [--calls 2000]

Rows: ``eager`` (no autograd), ``grad`` (forward of a tensor that requires grad: the autograd node
recorded), ``compiled`` (``torch.compile``, Inductor's default wrapper), for slice1, unfold, pad and tile
on a (1, 4, 16, 16) float32 tensor; PyTorch's own op (flip) as a same-process reference row.
Writes ``repeat-ab.json`` to --out.
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

ROOT = pathlib.Path(__file__).resolve().parent

CHILD = r'''
import json, sys, time
import torch
import opendml as dml
import opendml.torch  # noqa: F401 - the array functions enter a traced graph whole
from opendml.arrays.torch import node
node.wait(300)            # the C++ autograd node built (or loaded) before anything is timed
device, calls = sys.argv[1], int(sys.argv[2])
x = torch.randn(1, 4, 16, 16, device=device)
xg = x.clone().requires_grad_(True)
fns = {
    "slice1": lambda t: dml.slice1(t, [0, 0, 0, 0], [1, 4, 16, 16], [1, 1, -1, 1]),
    "unfold": lambda t: dml.unfold(t, [3, 3], 1, 1, [1, 1], [1, 1]),
    "pad": lambda t: dml.pad(t, [0, 0, 1, 1], [0, 0, 2, 2]),
    "tile": lambda t: dml.tile(t, [1, 1, 2, 2]),
}
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

def per_call(f, arg):
    for _ in range(50):
        f(arg)
    sync()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            f(arg)
        sync()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    return best

rows = {"torch.flip (reference)": per_call(lambda t: torch.flip(t, (2,)), x)}
for name, f in fns.items():
    rows[f"{name} eager"] = per_call(f, x)
    rows[f"{name} grad"] = per_call(f, xg)
    rows[f"{name} compiled"] = per_call(torch.compile(f), x)
print("ROWS " + json.dumps(rows))
'''


def run(tree: str, device: str, calls: int) -> dict:
    env = dict(os.environ)
    src = str(pathlib.Path(tree).resolve() / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    # Inductor's on-disk graph cache does not key opendml's lowerings: one tree would run code compiled by the
    # other (a graph compiled before the direct kernels calls the operator); each run compiles into its own
    env["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="repeat-ab-inductor-")
    out = subprocess.run([sys.executable, "-c", CHILD, device, str(calls)], env=env, capture_output=True, text=True,
                         timeout=600)
    for line in out.stdout.splitlines():
        if line.startswith("ROWS "):
            return json.loads(line[5:])
    raise RuntimeError(f"tree {tree}: no rows (rc {out.returncode}): {out.stderr[-2000:]}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--a", required=True, help="tree A (the baseline)")
    p.add_argument("--b", required=True, help="tree B")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--out", default=str(ROOT / "results"))
    args = p.parse_args(argv)
    got: dict = {"a": [], "b": []}
    for _ in range(args.rounds):
        for side in ("a", "b"):
            got[side].append(run(getattr(args, side), args.device, args.calls))
    names = list(got["a"][0])
    if args.device == "cuda":
        import torch
        print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"{'row':28s} {'A us':>8s} {'B us':>8s} {'B/A':>6s}   (median of {args.rounds} rounds; A {args.a}, B {args.b})")
    table = {}
    for name in names:
        a = statistics.median(r[name] for r in got["a"])
        b = statistics.median(r[name] for r in got["b"])
        table[name] = {"a_us": a, "b_us": b, "b_over_a": b / a}
        print(f"{name:28s} {a:8.2f} {b:8.2f} {b / a:6.2f}")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "repeat-ab.json").write_text(json.dumps({"device": args.device, "rounds": args.rounds, "calls": args.calls,
                                                    "a": args.a, "b": args.b, "rows": table}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
