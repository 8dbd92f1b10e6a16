"""Run the benchmark suite: ``python -m benchmarks [--device cpu|cuda] [--quick]``.

For each workload: opendml and every installed peer on identical data, outputs
checked equal, then one table of median time, useful GB/s (output written +
input read), ratio to the best peer and to a plain copy of the same bytes.
Writes ``results-<device>.json`` and ``results-<device>.png`` to --out.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import platform
import statistics
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent


def timer_cpu(fn, min_time=0.3, max_reps=50):
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < min_time and len(times) < max_reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def timer_cuda(cupy, fn, reps=10, rounds=5):
    """Median over rounds of ``reps`` back-to-back calls between two events, so
    each library's host-side preparation overlaps its previous kernel as it
    would in a real program. Each round starts behind one untimed call: the
    first timed call's host work then overlaps that kernel too, instead of
    the GPU idling after the start event. Every framework runs on the current
    stream."""
    fn()
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(rounds):
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        fn()
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        times.append(cupy.cuda.get_elapsed_time(a, b) / 1e3 / reps)
    return statistics.median(times)


def peak_ratio(fn, out_bytes):
    """Peak traced host memory during one call, over the output's size (NumPy
    and PyTorch CPU allocations are both visible to tracemalloc)."""
    import gc
    import tracemalloc
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        r = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
        del r
    finally:
        tracemalloc.stop()
    return peak / out_bytes


def to_numpy(a):
    mod = type(a).__module__.split(".")[0]
    if mod == "cupy":
        return a.get()
    if mod == "torch":
        return a.detach().cpu().numpy()
    return np.asarray(a)


def run(device: str, quick: bool, out_dir: pathlib.Path):
    try:
        import torch
    except ImportError:
        torch = None
    rows = []
    if device == "cpu":
        from benchmarks.workloads import cpu_workloads
        workloads = cpu_workloads(torch, quick)
        timer = timer_cpu
        copy_src = np.ones(256 * 2**20 // (4 if quick else 1), np.uint8)
        copy_dst = np.empty_like(copy_src)
        t = timer(lambda: np.copyto(copy_dst, copy_src))
        copy_bw = 2 * copy_src.nbytes / t
        copy_name = "np.copyto"
    else:
        import cupy
        try:
            import jax
        except ImportError:
            jax = None
        from benchmarks.gpu_workloads import gpu_workloads
        workloads = gpu_workloads(cupy, torch, jax)
        timer = lambda fn: timer_cuda(cupy, fn)  # noqa: E731
        copy_src = cupy.ones(1 << 30, cupy.uint8)
        copy_dst = cupy.empty_like(copy_src)
        t = timer(lambda: copy_dst.data.copy_from_device(copy_src.data, copy_src.nbytes))
        copy_bw = 2 * copy_src.nbytes / t
        copy_name = "device-to-device copy"
        del copy_src, copy_dst
    print(f"{copy_name}: {copy_bw / 1e9:.1f} GB/s (bytes read + written)", flush=True)
    for i, w in enumerate(workloads, 1):
        print(f"[{i}/{len(workloads)}] {w.name}", file=sys.stderr, flush=True)
        ours = w.opendml()
        want = to_numpy(ours)
        t_ours = timer(w.opendml)
        entry = {"workload": w.name, "useful_bytes": w.useful_bytes, "opendml_s": t_ours,
                 "opendml_GBps": w.useful_bytes / t_ours / 1e9, "copy_ratio": (w.useful_bytes / t_ours) / copy_bw,
                 "peers": {}}
        for name, fn in w.peers.items():
            got = to_numpy(fn())
            agree = got.shape == want.shape and np.array_equal(got, want, equal_nan=got.dtype.kind == "f")
            tp = timer(fn)
            entry["peers"][name] = {"s": tp, "GBps": w.useful_bytes / tp / 1e9, "agrees": bool(agree)}
        best = min((p["s"] for p in entry["peers"].values()), default=None)
        entry["vs_best_peer"] = best / t_ours if best else None
        if w.desc is not None:
            from benchmarks.workloads import bound_call
            call, read = bound_call(device, w.desc, w.x)
            call()
            got = np.asarray(read())
            entry["bound_agrees"] = bool(got.tobytes() == np.ascontiguousarray(want).tobytes())
            t_b = timer(call)
            entry["bound_s"] = t_b
            entry["bound_GBps"] = w.useful_bytes / t_b / 1e9
            entry["bound_copy_ratio"] = (w.useful_bytes / t_b) / copy_bw
            del call, read, got
        if w.peak_memory and device == "cpu":
            entry["peak_ratio"] = peak_ratio(w.opendml, want.nbytes)
            for name, fn in w.peers.items():
                if name.startswith("numpy"):   # PyTorch's allocator is invisible to tracemalloc
                    entry["peers"][name]["peak_ratio"] = peak_ratio(fn, want.nbytes)
        rows.append(entry)
        del ours, want
    # dispatch latency
    from benchmarks.workloads import dispatch_workload
    dev, c, t, ob, desc = dispatch_workload(device)
    n = 20000
    dev.execute(c, t)
    dev.backend.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        dev.execute(c, t)
    host = (time.perf_counter() - t0) / n
    dev.backend.synchronize()
    assert ob.read(desc.output_tensor).tolist() == [[[[14, 16], [6, 8]]]]
    latency = {"workload": "dispatch SLICE1 1x1x4x4 (host us/call)", "us": host * 1e6}
    return {"device": device, "device_name": device_name(device), "date": time.strftime("%Y-%m-%d"),
            "python": platform.python_version(), "numpy": np.__version__,
            "torch": getattr(torch, "__version__", None), "copy_name": copy_name, "copy_GBps": copy_bw / 1e9,
            "rows": rows, "dispatch": latency}


def device_name(device):
    if device == "cpu":
        import os
        return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    import cupy
    p = cupy.cuda.runtime.getDeviceProperties(0)
    return p["name"].decode() if isinstance(p["name"], bytes) else p["name"]


def table(res) -> str:
    """Columns: the array API call (allocates its output, like every peer) with
    its speed against each peer (peer time / opendml time); the compiled
    operator on buffers bound once (no allocation, like the plain copy) and its
    fraction of copy bandwidth (where no bound run is made, as on the GPU whose
    pool allocates for free, the array call's fraction); peak memory of the
    call over its output size."""
    lines = [f"device: {res['device_name']}  ({res['date']}, NumPy {res['numpy']}, PyTorch {res['torch']})",
             f"{res['copy_name']}: {res['copy_GBps']:.1f} GB/s", "",
             f"{'workload':31s} {'ms':>8s} {'GB/s':>7s} {'x best':>6s} {'bound GB/s':>10s} {'x copy':>6s} "
             f"{'peak':>5s}  peers: GB/s (opendml speed-up)"]
    for r in res["rows"]:
        peers = ", ".join(
            f"{k} {v['GBps']:.1f} ({v['s'] / r['opendml_s']:.2f}x){'' if v['agrees'] else ' DIFFERS'}"
            + (f" peak {v['peak_ratio']:.2f}" if "peak_ratio" in v else "")
            for k, v in r["peers"].items())
        vs = f"{r['vs_best_peer']:.2f}" if r["vs_best_peer"] else "-"
        bound = (f"{r['bound_GBps']:10.1f} {r['bound_copy_ratio']:6.2f}" if "bound_GBps" in r
                 else f"{'-':>10s} {r['copy_ratio']:6.2f}")   # no bound run: the array call's ratio
        if "bound_agrees" in r and not r["bound_agrees"]:
            bound += " DIFFERS"
        peak = f"{r['peak_ratio']:5.2f}" if "peak_ratio" in r else f"{'-':>5s}"
        lines.append(f"{r['workload']:31s} {r['opendml_s'] * 1e3:8.3f} {r['opendml_GBps']:7.1f} {vs:>6s} "
                     f"{bound} {peak}  {peers}")
    lines.append(f"{res['dispatch']['workload']}: {res['dispatch']['us']:.2f}")
    return "\n".join(lines)


def chart(res, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no PNG; pip install 'opendml[bench]')", file=sys.stderr)
        return
    names = [r["workload"] for r in res["rows"]]
    peers = sorted({p for r in res["rows"] for p in r["peers"]})
    fig, ax = plt.subplots(figsize=(12, 0.45 * len(names) + 1.5))
    h = 0.8 / (len(peers) + 1)
    ys = np.arange(len(names))
    ax.barh(ys, [r["opendml_GBps"] for r in res["rows"]], h, label="opendml")
    for i, p in enumerate(peers, 1):
        ax.barh(ys + i * h, [r["peers"].get(p, {}).get("GBps", 0) for r in res["rows"]], h, label=p)
    ax.axvline(res["copy_GBps"], color="k", ls="--", lw=1, label=res["copy_name"])
    ax.set_yticks(ys + 0.4 - h / 2, names)
    ax.invert_yaxis()
    ax.set_xlabel("useful GB/s (output written + input read)")
    ax.set_title(f"opendml vs peers on {res['device_name']} ({res['date']})")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--quick", action="store_true", help="smaller CPU sizes (a smoke run)")
    ap.add_argument("--out", default=str(ROOT / "out"), help="folder for JSON and PNG")
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res = run(args.device, args.quick, out)
    text = table(res)
    print(text)
    (out / f"results-{args.device}.json").write_text(json.dumps(res, indent=1))
    chart(res, out / f"results-{args.device}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
