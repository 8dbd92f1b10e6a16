"""The data-movement family on the CPU against NumPy's own equivalents (issue
21's CPU target: each operator at least 1.0x NumPy):
``python -m benchmarks.cpu_family [--quick] [--sizes large,small] [--runs N]
[--reps N] [--small-reps N] [--out DIR]``.

Per operator, on a large array (64 MiB of float32, or 16 Mi elements for the
casts) and a small one (16 KiB), three routes, called round-robin:

* ``opendml``: the array function (``dml.pad``, ``dml.join``, ...) as a user
  calls it: description, validation, lowering, a new output, the kernels;
* ``opendml kernel``: the same call's prepared move program replayed into its
  output (what ``Device.execute`` replays: the compiled passes alone);
* ``numpy``: ``np.pad`` in the same mode, ``np.concatenate``, ``np.split``
  materialised, ``np.tile``, ``astype``, ``x * s + b``, ``x.copy()``, and
  reshape + transpose + copy for SPACE_TO_DEPTH/DEPTH_TO_SPACE.

Every row checks opendml's output equal to NumPy's (bit for bit). Times are
medians over --reps rounds after a warm-up call (the warm-up call records the
call in the call caches, so the timed "opendml" calls are repeated calls, as
a loop makes them). With ``--runs N`` the whole measurement is made N times
(on a noisy machine) and each time is the median of the runs' medians; the
table then also shows the lowest and highest NumPy/opendml ratio over the
runs. Prints the table side by side; writes ``cpu-family.json`` and
``cpu-family.png`` into --out.
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
from opendml.runtime import get_backend

ROOT = pathlib.Path(__file__).resolve().parent


def kernel_of(call):
    """The prepared move program of one array-API call (captured from the CPU
    backend's ``prepare``): a callable replaying the passes into that call's
    output."""
    got = []
    # The call caches (C and the move cache) would serve the call without
    # preparing anything: off while capturing (a new backend; the caches refill
    # on the timed route's warm-up call).
    with dml.configure(call_cache=False):
        be = get_backend("cpu")
        orig = be.prepare

        def spy(plan, src, dst):
            run = orig(plan, src, dst)
            got.append(run)
            return run
        be.prepare = spy
        try:
            call()
        finally:
            del be.prepare
    return got[-1]


def workloads(large: bool):
    """(name, opendml call, NumPy call) per operator."""
    rng = np.random.default_rng(0)
    side = 4096 if large else 64
    x = rng.standard_normal((side, side)).astype(np.float32)           # 64 MiB / 16 KiB
    half = x[: side // 2]
    t_in = x[: side // 2, : side // 2]                                     # tiled 2x2 back to x's size
    n, c, h = (4, 64, 256) if large else (1, 4, 32)
    img = rng.standard_normal((n, c, h, h)).astype(np.float32)             # 64 MiB / 16 KiB
    p = 16 if large else 4
    rows = [
        ("identity (copy)", lambda: dml.identity(x), lambda: x.copy()),
        ("identity scale/bias", lambda: dml.identity(x, 2.0, 1.0), lambda: x * np.float32(2.0) + np.float32(1.0)),
    ]
    for mode, npmode in (("constant", "constant"), ("edge", "edge"), ("reflect", "reflect"),
                         ("symmetric", "symmetric"), ("wrap", "wrap")):
        rows.append((f"pad {mode}", lambda mode=mode: dml.pad(x, (p, p), (p, p), mode=mode),
                     lambda npmode=npmode: np.pad(x, p, mode=npmode)))
    rows += [
        ("join axis 0", lambda: dml.join([half, half], 0), lambda: np.concatenate([half, half], 0)),
        ("join axis 1", lambda: dml.join([half, half], 1), lambda: np.concatenate([half, half], 1)),
        ("split axis 0", lambda: dml.split(x, 0, [side // 2, side // 2]),
         lambda: [a.copy() for a in np.split(x, 2, 0)]),
        ("split axis 1", lambda: dml.split(x, 1, [side // 2, side // 2]),
         lambda: [a.copy() for a in np.split(x, 2, 1)]),
        ("tile 2x2", lambda: dml.tile(t_in, (2, 2)), lambda: np.tile(t_in, (2, 2))),
        ("space_to_depth b2 DCR", lambda: dml.space_to_depth(img, 2),
         lambda: img.reshape(n, c, h // 2, 2, h // 2, 2).transpose(0, 3, 5, 1, 2, 4).reshape(n, 4 * c, h // 2, h // 2).copy()),
        ("depth_to_space b2 DCR", lambda: dml.depth_to_space(img, 2),
         lambda: img.reshape(n, 2, 2, c // 4, h, h).transpose(0, 3, 4, 1, 5, 2).reshape(n, c // 4, 2 * h, 2 * h).copy()),
        ("depth_to_space b2 CRD", lambda: dml.depth_to_space(img, 2, order="CRD"),
         lambda: img.reshape(n, c // 4, 2, 2, h, h).transpose(0, 1, 4, 2, 5, 3).reshape(n, c // 4, 2 * h, 2 * h).copy()),
    ]
    for src, dst in ((np.float32, np.float16), (np.float16, np.float32), (np.float32, np.int32),
                     (np.int32, np.float32), (np.float64, np.float32), (np.uint8, np.float32)):
        with np.errstate(all="ignore"):
            a = (x * 100).astype(src)
        rows.append((f"cast {np.dtype(src).name}->{np.dtype(dst).name}", lambda a=a, dst=dst: dml.cast(a, dst),
                     lambda a=a, dst=dst: a.astype(dst)))
    return rows


def interleaved(routes: dict, reps: int) -> dict:
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


def as_bytes(out) -> bytes:
    outs = out if isinstance(out, (list, tuple)) else [out]
    return b"".join(np.ascontiguousarray(o).tobytes() for o in outs)


def measure(reps_large: int, reps_small: int, quick: bool, sizes=("large", "small")) -> list:
    rows = []
    for size, large, reps in (("large", not quick, reps_large), ("small", False, reps_small)):
        if size not in sizes:
            continue
        for name, ours, theirs in workloads(large):
            print(f"{name} ({size}) ...", file=sys.stderr, flush=True)
            mine, ref = ours(), theirs()
            equal = as_bytes(mine) == as_bytes(ref)
            moved = sum(o.nbytes for o in (mine if isinstance(mine, list) else [mine]))
            del mine, ref
            kernel = kernel_of(ours)
            t = interleaved({"opendml": ours, "opendml kernel": kernel, "numpy": theirs}, reps)
            rows.append({"op": name, "size": size, "output_bytes": moved, "bitwise_equal": equal,
                         "s": t, "speedup": t["numpy"] / t["opendml"],
                         "kernel_speedup": t["numpy"] / t["opendml kernel"]})
            del kernel
    return rows


def combine(runs: list) -> list:
    """One row per operation and size from several runs' rows: the median of
    each route's times, the ratios from those, and each run's NumPy/opendml."""
    rows = []
    for group in zip(*runs):
        s = {k: statistics.median(r["s"][k] for r in group) for k in group[0]["s"]}
        rows.append(dict(group[0], s=s, speedup=s["numpy"] / s["opendml"],
                         kernel_speedup=s["numpy"] / s["opendml kernel"],
                         bitwise_equal=all(r["bitwise_equal"] for r in group),
                         run_speedups=[r["speedup"] for r in group]))
    return rows


def table(res) -> str:
    runs = res.get("runs", 1)
    lines = [f"device: {res['device']} ({res['date']}, NumPy {res['numpy']}, opendml threads {res['threads']}, "
             f"median of {res['reps']} (large) / {res['small_reps']} (small) interleaved rounds"
             + (f", median of {runs} runs)" if runs > 1 else ")"), "",
             f"{'operation':24s} {'size':5s} | {'opendml':>10s} {'kernel':>10s} {'numpy':>10s} | "
             f"{'numpy/opendml':>13s} {'numpy/kernel':>12s}  same bytes" + ("  numpy/opendml over runs" if runs > 1 else "")]
    for r in res["rows"]:
        s = r["s"]
        unit, k = ("ms", 1e3) if r["size"] == "large" else ("us", 1e6)
        spread = f"  {min(r['run_speedups']):.2f}-{max(r['run_speedups']):.2f}x" if runs > 1 else ""
        lines.append(f"{r['op']:24s} {r['size']:5s} | {s['opendml'] * k:8.2f}{unit} {s['opendml kernel'] * k:8.2f}{unit} "
                     f"{s['numpy'] * k:8.2f}{unit} | {r['speedup']:12.2f}x {r['kernel_speedup']:11.2f}x  "
                     f"{'yes' if r['bitwise_equal'] else 'NO'}{spread:>5s}")
    lines += ["", "numpy/opendml: NumPy's time over the array function's (above 1: opendml is faster); "
              "numpy/kernel: over the prepared passes alone"]
    return "\n".join(lines)


def plot(res, path: pathlib.Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    sizes = [size for size in ("large", "small") if any(r["size"] == size for r in res["rows"])]
    fig, axes = plt.subplots(1, len(sizes), figsize=(7 * len(sizes), 7), sharey=True, squeeze=False)
    for ax, size in zip(axes[0], sizes):
        rows = [r for r in res["rows"] if r["size"] == size]
        names = [r["op"] for r in rows]
        ys = np.arange(len(rows))
        ax.barh(ys - 0.2, [r["speedup"] for r in rows], 0.4, label="array function")
        ax.barh(ys + 0.2, [r["kernel_speedup"] for r in rows], 0.4, label="prepared passes")
        ax.axvline(1.0, color="k", lw=1)
        ax.set_yticks(ys, names)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_title(f"{size} arrays: NumPy time / opendml time")
        ax.legend()
    fig.suptitle(f"opendml data-movement family vs NumPy, CPU ({res['device']}, {res['date']})")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cpu_family", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the 'large' rows on small arrays (a smoke run)")
    ap.add_argument("--reps", type=int, default=7, help="timed rounds for the large arrays (median)")
    ap.add_argument("--small-reps", type=int, default=300, help="timed rounds for the small arrays (median)")
    ap.add_argument("--sizes", default="large,small",
                    help="which rows: 'large', 'small' or both (comma-separated; default both)")
    ap.add_argument("--runs", type=int, default=1, help="whole measurements, medians taken over them (default 1)")
    ap.add_argument("--out", default=str(ROOT / "results"), help="folder for cpu-family.json and .png")
    args = ap.parse_args(argv)
    sizes = tuple(s.strip() for s in args.sizes.split(",") if s.strip())
    if not sizes or any(s not in ("large", "small") for s in sizes):
        ap.error(f"--sizes takes 'large', 'small' or 'large,small'; got {args.sizes!r}")
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    runs = [measure(args.reps, args.small_reps, args.quick, sizes) for _ in range(args.runs)]
    rows = combine(runs) if args.runs > 1 else runs[0]
    res = {"device": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
           "date": time.strftime("%Y-%m-%d"), "python": platform.python_version(), "numpy": np.__version__,
           "threads": dml.config().threads, "cpu_kernels": dml.config().cpu_kernels, "reps": args.reps,
           "small_reps": args.small_reps, "quick": args.quick, "runs": args.runs, "sizes": list(sizes), "rows": rows}
    print(table(res))
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cpu-family.json").write_text(json.dumps(res, indent=1))
    plot(res, out / "cpu-family.png")
    return 0 if all(r["bitwise_equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
