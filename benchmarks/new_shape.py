"""Host cost of a call on a shape never seen (issue 19): ``python -m benchmarks.new_shape
[--device cpu|cuda] [--shapes N] [--rounds R] [--out FILE]``.

Every call of a "new shape" row is on a shape no earlier call of the run used
(a plan-cache and call-cache miss: validation, lowering, kernel packing);
"warm" rows repeat one small shape (the cached routes). Each row prints
opendml's microseconds per call, its peer's, and ours / peer (the issue's
targets: slice1 on NumPy at most 3x ``np.ascontiguousarray(a[:, :, ::-1])``;
PyTorch rows, and UNFOLD on NumPy against PyTorch's on the same memory, at
most 2x the PyTorch operator). Times are the minimum over
``--rounds`` rounds of ``--shapes`` calls each (fresh shapes every round), so
noise from a busy machine is filtered out (``--timer process`` counts this
process's CPU time instead of wall time). ``--out`` writes the rows as JSON.
"""
from __future__ import annotations

import argparse
import itertools
import json
import platform
import time

import numpy as np

import opendml as dml

_IDS = itertools.count()


def fresh_shapes(k):
    """``k`` small (1, C, H, W) shapes never returned before in this process."""
    out = []
    for _ in range(k):
        i = next(_IDS)
        out.append((1, 1 + i % 8, 8 + (i // 8) % 50, 20 + i // 400))
    return out


def per_call(fn, xs, sync, clock=time.perf_counter):
    sync()
    t = clock()
    for x in xs:
        fn(x)
    sync()
    return (clock() - t) / len(xs)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--shapes", type=int, default=300)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--warm-calls", type=int, default=5000)
    p.add_argument("--only", default="", help="comma-separated substrings of row names to run")
    p.add_argument("--timer", choices=("wall", "process"), default="wall",
                   help="wall: perf_counter (what a caller waits); process: this process's CPU time (steadier "
                        "on a shared machine; a multi-threaded peer is charged every thread's time)")
    p.add_argument("--out", default="")
    a = p.parse_args(argv)
    import torch
    import torch.nn.functional as F
    dev = a.device
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    rng = np.random.default_rng(0)
    clock = time.perf_counter if a.timer == "wall" else time.process_time

    def arrays(shapes):
        return [rng.random(s, dtype=np.float32) for s in shapes]

    def tensors(shapes):
        return [torch.randn(s, device=dev) for s in shapes]

    def cols(shapes):                     # fold inputs: unfold of (1, C, H, W), 3x3 window, padding 1
        return [(torch.randn(1, c * 9, h * w, device=dev), (h, w)) for (_, c, h, w) in shapes]

    rev = [1, 1, -1, 1]
    cases = [
        ("slice1 reversing H, NumPy", arrays, lambda x: dml.slice1(x, [0, 0, 0, 0], list(x.shape), rev),
         lambda x: np.ascontiguousarray(x[:, :, ::-1]), "np.ascontiguousarray(a[:, :, ::-1])", 3.0),
        ("slice1 reversing H, torch", tensors, lambda x: dml.slice1(x, [0, 0, 0, 0], list(x.shape), rev),
         lambda x: torch.flip(x, [2]).contiguous(), "flip().contiguous()", 2.0),
        ("unfold 3x3 pad 1, torch", tensors, lambda x: dml.unfold(x, 3, 1, 1, 1, 1),
         lambda x: F.unfold(x, 3, 1, 1, 1), "F.unfold", 2.0),
        ("unfold 3x3 pad 1, NumPy", arrays, lambda x: dml.unfold(x, 3, 1, 1, 1, 1),
         lambda x: F.unfold(torch.from_numpy(x), 3, 1, 1, 1).numpy(), "F.unfold(torch.from_numpy(a)).numpy()", 2.0),
        ("fold 3x3 pad 1, torch", cols, lambda x: dml.fold(x[0], list(x[1]), 3, 1, 1, 1, 1),
         lambda x: F.fold(x[0], x[1], 3, 1, 1, 1), "F.fold", 2.0),
        ("slice_grad reversing H, NumPy", arrays,
         lambda x: dml.slice_grad(x, list(x.shape), [0, 0, 0, 0], list(x.shape), rev),
         lambda x: np.ascontiguousarray(x[:, :, ::-1]), "np.ascontiguousarray(a[:, :, ::-1])", 3.0),
        ("slice (every other W), NumPy", arrays,
         lambda x: dml.slice(x, [0, 0, 0, 0], [x.shape[0], x.shape[1], x.shape[2], (x.shape[3] + 1) // 2],
                             [1, 1, 1, 2]),
         lambda x: np.ascontiguousarray(x[:, :, :, ::2]), "np.ascontiguousarray(a[..., ::2])", 3.0),
    ]
    if dev != "cpu":
        cases = [c for c in cases if "NumPy" not in c[0]]
    only = [s for s in a.only.split(",") if s]
    rows = []
    print(f"device {torch.cuda.get_device_name() if dev == 'cuda' else platform.processor() or 'cpu'}, "
          f"torch {torch.__version__}, numpy {np.__version__}")
    print(f"{'row':46s} {'ours us':>9s} {'peer us':>9s} {'ratio':>7s} {'target':>7s}  peer")
    for name, make, ours, peer, peer_name, target in cases:
        for kind in ("new shape", "warm"):
            label = f"{kind}: {name}"
            if only and not any(s in label for s in only):
                continue
            t_o, t_p = [], []
            for _ in range(a.rounds):
                if kind == "new shape":
                    xs = make(fresh_shapes(a.shapes))
                    ys = make(fresh_shapes(a.shapes))
                else:
                    xs = make([(1, 4, 16, 16)]) * a.warm_calls
                    ys = xs
                    ours(xs[0]), peer(xs[0])
                t_o.append(per_call(ours, xs, sync, clock))
                t_p.append(per_call(peer, ys, sync, clock))
            o, q = min(t_o) * 1e6, min(t_p) * 1e6
            ok = "" if kind == "warm" or o / q <= target else "  (above target)"
            print(f"{label:46s} {o:9.2f} {q:9.2f} {o / q:7.2f} {target if kind != 'warm' else '':>7}  "
                  f"{peer_name}{ok}", flush=True)
            rows.append({"row": label, "ours_us": o, "peer_us": q, "ratio": o / q, "peer": peer_name,
                         "target_ratio": target if kind == "new shape" else None,
                         "rounds": a.rounds, "calls": a.shapes if kind == "new shape" else a.warm_calls})
    if a.out:
        meta = {"device": dev, "torch": torch.__version__, "numpy": np.__version__, "timer": a.timer,
                "date": time.strftime("%Y-%m-%d %H:%M")}
        with open(a.out, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
