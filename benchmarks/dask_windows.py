"""Dask benchmark: ``python -m benchmarks.dask_windows [--size 384] [--quick]``.

A 3x3x3 max over every window of an (1, 1, n, n, n) float32 volume read from a
Zarr store (its full UNFOLD is 27 times the volume: 5.7 GiB at n = 384), on a
LocalCluster of 1 and then 2 single-threaded worker processes limited to
``--memory-limit`` each, by three routes:

* opendml: ``opendml.unfold(v, 3, 1, 1, 1, 1).max(axis=1)``;
* Dask's ``sliding_window_view`` (no padding argument: ``da.pad`` first) and a
  max over the window axes, the route Dask itself offers for this case;
* ``map_overlap`` with ``scipy.ndimage.maximum_filter`` per chunk, the usual
  way to run this particular filter (it never materialises the windows), for
  scale.

Every result is checked equal to ``scipy.ndimage.maximum_filter`` on the whole
volume. Prints one table (best of ``--repeat`` runs, the ratio to opendml on
the same workers, the 1 -> 2 worker scaling, the task count of the optimised
graph and the peak resident memory of any worker) and writes ``dask.json`` and
``dask.png`` (matplotlib, when installed) to --out.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent


def _reset_peak(dask_worker=None):
    """Reset the worker process's peak resident memory (Linux VmHWM)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_bytes(dask_worker=None):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def stream_and_check(client, y, want) -> bool:
    """Compute ``y`` chunk by chunk and compare each chunk with its part of
    ``want`` as it arrives, so no worker (and not this process) ever holds the
    whole result: what a pipeline that writes its result out would do."""
    from distributed import as_completed
    want = want.reshape(y.shape)
    starts = [np.cumsum((0,) + c)[:-1] for c in y.chunks]
    futures = client.compute(list(y.to_delayed().ravel()))
    where = {f.key: np.unravel_index(i, y.numblocks) for i, f in enumerate(futures)}
    ok = True
    for f in as_completed(futures):
        part = f.result()
        index = tuple(np.s_[s[i]:s[i] + n] for s, i, n in zip(starts, where[f.key], part.shape))
        ok &= bool(np.array_equal(part, want[index]))
        f.release()
    return ok


def routes():
    import dask.array as da
    from dask.array.lib.stride_tricks import sliding_window_view

    import opendml as dml

    # Each route gives (result, the array of windows it reduces or None).
    def opendml_route(v):
        windows = dml.unfold(v, 3, 1, 1, 1, 1)                               # (1, 27, n^3)
        return windows.max(axis=1), windows

    def window_view_route(v):
        padded = da.pad(v, ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)), mode="constant")
        windows = sliding_window_view(padded, (3, 3, 3), axis=(2, 3, 4))   # (1, 1, n, n, n, 3, 3, 3)
        return windows.max(axis=(-3, -2, -1)), windows

    def scipy_route(v):
        from scipy import ndimage
        return v.map_overlap(lambda b: ndimage.maximum_filter(b, size=(1, 1, 3, 3, 3), mode="constant", cval=0),
                             depth={2: 1, 3: 1, 4: 1}, boundary=0), None

    return {"opendml unfold + max": opendml_route, "dask sliding_window_view + max": window_view_route,
            "map_overlap + scipy maximum_filter": scipy_route}


def run(n, workers_list, memory_limit, repeat, chunk_rows, only=None):
    import dask
    import dask.array as da
    import zarr
    from distributed import Client, LocalCluster
    from scipy import ndimage

    vol = np.random.default_rng(0).random((n, n, n), dtype=np.float32)
    t0 = time.perf_counter()
    want = ndimage.maximum_filter(vol, size=3, mode="constant", cval=0)
    t_scipy = time.perf_counter() - t0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "vol.zarr")
        store = zarr.open_array(path, mode="w", shape=(1, 1, n, n, n), chunks=(1, 1, chunk_rows, n, n),
                                dtype=np.float32)
        store[0, 0] = vol
        for workers in workers_list:
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, memory_limit=memory_limit,
                              dashboard_address=":0") as cluster, Client(cluster) as client:
                for route, build in routes().items():
                    if only and only not in route:
                        continue
                    print(f"[{workers} worker{'s' * (workers > 1)}] {route}", file=sys.stderr, flush=True)
                    client.restart()          # fresh processes: no memory or caches left by the last route
                    y, windows = build(da.from_zarr(path))
                    (opt,) = dask.optimize(y)
                    chunk = windows if windows is not None else y
                    entry = {"route": route, "workers": workers, "tasks": len(opt.__dask_graph__()),
                             "windows_chunk_MiB": int(np.prod([max(c) for c in chunk.chunks])) * 4 / 2**20}
                    times, peak = [], 0
                    try:
                        for _ in range(repeat):
                            client.run(_reset_peak)
                            t0 = time.perf_counter()
                            agrees = stream_and_check(client, y, want)
                            times.append(time.perf_counter() - t0)
                            peak = max(peak, *client.run(_peak_bytes).values())
                        entry.update(s=min(times), times=times, peak_worker_MiB=peak / 2**20, agrees=agrees)
                    except Exception as e:       # e.g. a worker killed for memory
                        entry.update(s=None, error=f"{type(e).__name__}: {e}"[:300])
                    rows.append(entry)
    for r in rows:
        same = next((o for o in rows if o["workers"] == r["workers"] and o["route"].startswith("opendml")), None)
        one = next((o for o in rows if o["workers"] == 1 and o["route"] == r["route"]), None)
        r["vs_opendml"] = r["s"] / same["s"] if r["s"] and same and same["s"] else None
        r["speedup_vs_1_worker"] = one["s"] / r["s"] if r["s"] and one and one["s"] else None
    return {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "python": platform.python_version(), "numpy": np.__version__, "dask": dask.__version__,
            "volume": [1, 1, n, n, n], "zarr_chunks": [1, 1, chunk_rows, n, n],
            "unfold_GiB": 27 * n ** 3 * 4 / 2**30, "memory_limit": memory_limit,
            "array_chunk_size": dask.config.get("array.chunk-size"), "scipy_whole_volume_s": t_scipy,
            "worker_environment": {k: v for k, v in os.environ.items() if k.startswith("OPENDML_")},
            "rows": rows}


def table(res) -> str:
    """Time is the best of the repeats; "x opendml" is the route's time over
    opendml's on the same workers (above 1: opendml is faster); "x 1 worker" is
    the route's 1-worker time over this time; "chunk MiB" is the largest chunk
    of the windows array the route reduces (of its result for map_overlap)."""
    lines = [f"{res['machine']} ({res['date']}, Dask {res['dask']}, NumPy {res['numpy']}); volume "
             f"{res['volume']} float32 in Zarr chunks {res['zarr_chunks']}, full UNFOLD {res['unfold_GiB']:.1f} GiB; "
             f"workers: 1 thread, memory limit {res['memory_limit']}; array.chunk-size {res['array_chunk_size']}; "
             f"{' '.join(f'{k}={v}' for k, v in res['worker_environment'].items()) or 'opendml defaults'}",
             f"scipy.ndimage.maximum_filter on the whole volume in this process: {res['scipy_whole_volume_s']:.2f} s",
             "",
             f"{'route':36s} {'workers':>7s} {'s':>7s} {'x opendml':>9s} {'x 1 worker':>10s} {'tasks':>6s} "
             f"{'chunk MiB':>9s} {'peak worker MiB':>15s}  agrees"]
    for r in res["rows"]:
        if r["s"] is None:
            lines.append(f"{r['route']:36s} {r['workers']:7d}  failed: {r['error']}")
            continue
        f = lambda v: f"{v:.2f}" if v else "-"  # noqa: E731
        lines.append(f"{r['route']:36s} {r['workers']:7d} {r['s']:7.2f} {f(r['vs_opendml']):>9s} "
                     f"{f(r['speedup_vs_1_worker']):>10s} {r['tasks']:6d} {r['windows_chunk_MiB']:9.1f} "
                     f"{r['peak_worker_MiB']:15.0f}  {'yes' if r['agrees'] else 'DIFFERS'}")
    return "\n".join(lines)


def chart(res, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no PNG; pip install 'opendml[bench]')", file=sys.stderr)
        return
    routes_ = list(dict.fromkeys(r["route"] for r in res["rows"]))
    workers = sorted({r["workers"] for r in res["rows"]})
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.5))
    h = 0.8 / len(workers)
    ys = np.arange(len(routes_))
    for i, w in enumerate(workers):
        get = lambda key: [next((r.get(key) or 0 for r in res["rows"]  # noqa: E731
                                 if r["route"] == name and r["workers"] == w), 0) for name in routes_]
        axes[0].barh(ys + i * h, get("s"), h, label=f"{w} worker{'s' * (w > 1)}")
        axes[1].barh(ys + i * h, get("peak_worker_MiB"), h, label=f"{w} worker{'s' * (w > 1)}")
    limit = __import__("dask").utils.parse_bytes(res["memory_limit"]) / 2**20
    axes[1].axvline(limit, color="k", ls="--", lw=1, label="worker memory limit")
    for ax, label in zip(axes, ["seconds (best of runs)", "peak worker memory (MiB)"]):
        ax.set_yticks(ys + 0.4 - h / 2, routes_ if ax is axes[0] else [""] * len(routes_))
        ax.invert_yaxis()
        ax.set_xlabel(label)
        ax.legend(loc="lower right", fontsize=8)
    fig.suptitle(f"3x3x3 max of a {res['volume'][2]}^3 float32 volume on Dask ({res['machine']}, {res['date']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.dask_windows", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=384, help="volume edge n (default 384)")
    ap.add_argument("--quick", action="store_true", help="n = 128, one run each (a smoke run)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per route and cluster (best is kept)")
    ap.add_argument("--chunk-rows", type=int, default=32, help="Zarr chunk thickness along the first axis")
    ap.add_argument("--memory-limit", default="1GiB", help="per worker")
    ap.add_argument("--kernel-threads", default="1",
                    help="OPENDML_CPU_THREADS for the workers (default 1: one core per single-threaded worker, "
                         "so the scaling is the workers'; 'default' leaves opendml's own default)")
    ap.add_argument("--cache-bytes", default="default",
                    help="OPENDML_CPU_CACHE_BYTES for the workers (default: opendml's own)")
    ap.add_argument("--only", help="run only the routes whose name contains this")
    ap.add_argument("--chunk-size", help="Dask's array.chunk-size while the graphs are built (default: Dask's)")
    ap.add_argument("--out", default=str(ROOT / "results"), help="folder for dask.json and dask.png")
    args = ap.parse_args(argv)
    # Worker processes inherit this process's environment when they start.
    for name, value in (("OPENDML_CPU_THREADS", args.kernel_threads), ("OPENDML_CPU_CACHE_BYTES", args.cache_bytes)):
        if value != "default":
            os.environ[name] = str(__import__("dask").utils.parse_bytes(value) if "B" in value else value)
    n, repeat = (128, 1) if args.quick else (args.size, args.repeat)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import dask
    with dask.config.set({"array.chunk-size": args.chunk_size or dask.config.get("array.chunk-size")}):
        res = run(n, (1, 2), args.memory_limit, repeat, min(args.chunk_rows, n), args.only)
    print(table(res))
    (out / "dask.json").write_text(json.dumps(res, indent=1))
    chart(res, out / "dask.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
