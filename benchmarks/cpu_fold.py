"""FOLD and SLICE_GRAD on the CPU against their peers (issue 11's CPU targets):
``python -m benchmarks.cpu_fold [--quick] [--reps N]``.

* 2-D fold of (32, 576, 3136) into (32, 64, 56, 56), window 3x3, padding 1,
  float32: opendml (output cache on, and off through
  ``opendml.configure(output_cache_bytes=0)``) vs ``torch.nn.functional.fold``
  vs the best NumPy route (a zero padded image, one strided add per window
  position, then the unpadded part copied out). Targets: >= 3x F.fold and
  >= 1.5x the NumPy route.
* SLICE_GRAD of a (8, 256, 128, 128) float32 input's [8:120, 8:120] window
  (issue 11 names (64, 256, 128, 128), which does not fit a small machine
  comfortably): opendml vs ``np.zeros`` + slice assignment (and PyTorch's
  ``torch.zeros`` + slice assignment where installed). Target: >= 1.0x.

Every row's output is checked equal to opendml's first (bit for bit: the
NumPy route sums in the same order). Times are medians of --reps calls after
one warm-up call. Prints one table and writes
``benchmarks/results/cpu-fold.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import sys
import time

import numpy as np

import opendml as dml

ROOT = pathlib.Path(__file__).resolve().parent


def opendml_fold(x, out_sizes, window, pad):
    if hasattr(dml, "fold"):
        return lambda: dml.fold(x, out_sizes, window, 1, 1, pad, pad)
    # Before the array API had fold: the plan on the CPU backend directly.
    import math
    from opendml.plan import FoldPlan, MovePlan, WindowSums
    from opendml.runtime import get_backend
    from opendml.runtime.params import SUM_FLOAT
    n, rows, cols = x.shape
    c = rows // window ** len(out_sizes)
    blocks = tuple(s + 2 * pad - window + 1 for s in out_sizes)
    shape = (n, c, *out_sizes)
    plan = FoldPlan(element_size=4, sum_kind=SUM_FLOAT, batch=n, channels=c, spatial=tuple(out_sizes),
                    in_offset=0, in_strides=(rows * cols, cols, 1), window=(window,) * len(out_sizes),
                    strides=(1,) * len(out_sizes), dilations=(1,) * len(out_sizes),
                    start_padding=(pad,) * len(out_sizes), blocks=blocks, out_offset=0,
                    out_strides=tuple(math.prod(shape[i + 1:]) for i in range(len(shape))))
    plan = MovePlan((1,), (1,), (WindowSums(0, 0, plan),))

    def run():
        backend = get_backend("cpu")
        out, _ = backend.empty(shape, x.dtype)
        backend.prepare(plan, [x.view(np.uint32).reshape(-1)], [out.view(np.uint32).reshape(-1)])()
        return out
    return run


def numpy_fold_route(x, out_sizes, window, pad):
    """The best NumPy route: padded image of zeros, one strided add per window
    position (k in row-major order, so each element's sum has opendml's
    order), then the unpadded part copied out."""
    n, rows, _ = x.shape
    c = rows // window ** 2
    h, w = out_sizes
    bh, bw = h + 2 * pad - window + 1, w + 2 * pad - window + 1
    cols = x.reshape(n, c, window, window, bh, bw)

    def run():
        padded = np.zeros((n, c, h + 2 * pad, w + 2 * pad), x.dtype)
        for ky in range(window):
            for kx in range(window):
                padded[:, :, ky:ky + bh, kx:kx + bw] += cols[:, :, ky, kx]
        return np.ascontiguousarray(padded[:, :, pad:pad + h, pad:pad + w])
    return run


def opendml_slice_grad(g, in_sizes, lo, hi):
    if hasattr(dml, "slice_grad"):
        return lambda: dml.slice_grad(g, in_sizes, [0, 0, lo, lo], [in_sizes[0], in_sizes[1], hi - lo, hi - lo],
                                      [1, 1, 1, 1])
    import math
    from opendml.plan import MovePlan, ScatterPlan, SliceScatter
    from opendml.runtime import get_backend
    plan = ScatterPlan(element_size=4, sizes=tuple(in_sizes), out_offset=0,
                       out_strides=tuple(math.prod(in_sizes[i + 1:]) for i in range(4)), first=(0, 0, lo, lo),
                       step=(1, 1, 1, 1), taken=g.shape, in_offset=0,
                       in_strides=tuple(math.prod(g.shape[i + 1:]) for i in range(4)))
    plan = MovePlan((1,), (1,), (SliceScatter(0, 0, plan),))

    def run():
        backend = get_backend("cpu")
        out, _ = backend.empty(tuple(in_sizes), g.dtype)
        backend.prepare(plan, [g.view(np.uint32).reshape(-1)], [out.view(np.uint32).reshape(-1)])()
        return out
    return run


def measure(reps: int, quick: bool):
    try:
        import torch
    except ImportError:
        torch = None
    rng = np.random.default_rng(0)
    rows = []

    # -- 2-D fold ------------------------------------------------------------
    n = 4 if quick else 32
    x = rng.standard_normal((n, 576, 3136)).astype(np.float32)
    fold = opendml_fold(x, (56, 56), 3, 1)
    peers = {"numpy padded strided adds": numpy_fold_route(x, (56, 56), 3, 1)}
    if torch is not None:
        tx = torch.from_numpy(x)
        peers["torch F.fold"] = lambda: torch.nn.functional.fold(tx, (56, 56), 3, padding=1)
    rows.append(run_row(f"fold 2-D ({n},576,3136)->({n},64,56,56) 3x3 pad 1 f32", fold, peers,
                        x.nbytes + n * 64 * 56 * 56 * 4, reps, torch))

    # -- SLICE_GRAD -------------------------------------------------------------
    sizes = [2 if quick else 8, 256, 128, 128]
    g = rng.standard_normal((sizes[0], 256, 112, 112)).astype(np.float32)

    def np_route():
        out = np.zeros(sizes, np.float32)
        out[:, :, 8:120, 8:120] = g
        return out
    peers = {"np.zeros + slice assignment": np_route}
    if torch is not None:
        tg = torch.from_numpy(g)

        def torch_route():
            out = torch.zeros(sizes, dtype=torch.float32)
            out[:, :, 8:120, 8:120] = tg
            return out
        peers["torch.zeros + slice assignment"] = torch_route
    rows.append(run_row(f"slice_grad ({sizes[0]},256,112,112) into [8:120,8:120] of {tuple(sizes)} f32",
                        opendml_slice_grad(g, sizes, 8, 120), peers, g.nbytes + 4 * int(np.prod(sizes)), reps, torch))
    return rows


def interleaved(routes: dict, reps: int) -> dict:
    """Median seconds per route, the routes called round-robin (one call of
    each per round, after one warm-up call each), so that a machine whose
    speed drifts during the run (a shared host) affects every route alike."""
    times = {name: [] for name in routes}
    for fn in routes.values():
        fn()
    for _ in range(reps):
        for name, fn in routes.items():
            t0 = time.perf_counter()
            r = fn()
            times[name].append(time.perf_counter() - t0)
            del r
    return {name: statistics.median(t) for name, t in times.items()}


def run_row(name, ours, peers, useful_bytes, reps, torch):
    """opendml with the output cache on, then off, each pass interleaved with
    every peer; a peer's ratio is taken against opendml in the same pass."""
    print(f"{name} ...", file=sys.stderr, flush=True)
    want = np.asarray(ours()).tobytes()
    entry = {"workload": name, "useful_bytes": useful_bytes, "opendml": {}, "peers": {}}
    for label in peers:
        got = peers[label]()
        got = got.numpy() if torch is not None and isinstance(got, torch.Tensor) else np.asarray(got)
        agrees = got.tobytes() == want
        close = agrees or bool(np.allclose(got.reshape(-1).view(np.float32), np.frombuffer(want, np.float32),
                                           rtol=1e-5, atol=1e-5))
        entry["peers"][label] = {"bitwise_equal": agrees, "close": close}
        del got
    for label, settings in (("cache on", {}), ("cache off", {"output_cache_bytes": 0})):
        with dml.configure(**settings):
            t = interleaved({"opendml": ours, **peers}, reps)
        entry["opendml"][label] = {"s": t["opendml"], "GBps": useful_bytes / t["opendml"] / 1e9}
        for peer in peers:
            entry["peers"][peer][label] = {"s": t[peer], "GBps": useful_bytes / t[peer] / 1e9,
                                           "speedup": t[peer] / t["opendml"]}
    return entry


def table(res) -> str:
    lines = [f"device: {res['device']}  ({res['date']}, NumPy {res['numpy']}, PyTorch {res['torch']}, "
             f"threads {res['threads']}, median of {res['reps']} interleaved rounds)", ""]
    for r in res["rows"]:
        lines.append(r["workload"])
        lines.append(f"  {'':34s} {'output cache on':>24s}   {'output cache off':>24s}")
        lines.append(f"  {'route':34s} {'ms':>8s} {'GB/s':>6s} {'speed-up':>8s}   {'ms':>8s} {'GB/s':>6s} {'speed-up':>8s}")
        on, off = r["opendml"]["cache on"], r["opendml"]["cache off"]
        lines.append(f"  {'opendml':34s} {on['s'] * 1e3:8.2f} {on['GBps']:6.2f} {'':8s}   "
                     f"{off['s'] * 1e3:8.2f} {off['GBps']:6.2f}")
        for label, p in r["peers"].items():
            same = "bit-equal" if p["bitwise_equal"] else ("close" if p["close"] else "DIFFERS")
            a, b = p["cache on"], p["cache off"]
            lines.append(f"  {label:34s} {a['s'] * 1e3:8.2f} {a['GBps']:6.2f} {a['speedup']:7.2f}x   "
                         f"{b['s'] * 1e3:8.2f} {b['GBps']:6.2f} {b['speedup']:7.2f}x  ({same})")
        lines.append("")
    lines.append("speed-up: the peer's time over opendml's in the same pass (above 1: opendml is faster)")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cpu_fold", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller batches (a smoke run)")
    ap.add_argument("--reps", type=int, default=7, help="timed calls per route (median)")
    ap.add_argument("--out", default=str(ROOT / "results" / "cpu-fold.json"))
    args = ap.parse_args(argv)
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    rows = measure(args.reps, args.quick)
    res = {"device": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
           "date": time.strftime("%Y-%m-%d"), "python": platform.python_version(), "numpy": np.__version__,
           "torch": torch_version, "threads": dml.config().threads, "cpu_kernels": dml.config().cpu_kernels,
           "reps": args.reps, "quick": args.quick, "rows": rows}
    print(table(res))
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
