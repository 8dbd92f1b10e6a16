"""The index-driven operators on the CPU against NumPy's own equivalents (issue
32's CPU target: each at least 1.0x NumPy): ``python -m benchmarks.cpu_index
[--quick] [--reps N] [--small-calls N] [--compare OLD_SRC --runs K] [--out DIR]``.

Rows, each opendml's array function (index check on, as a user calls it, and
with ``check_indices=False``) against NumPy, called round-robin, medians of
--reps rounds after a warm-up call (a repeated call: what a loop or a model
step makes); every row checks the outputs equal bit for bit first:

* embedding lookup: ``dml.gather(table, ids, 0)`` vs ``np.take(table, ids, 0)``
  (rows of 256 bytes);
* ``dml.gather_elements`` vs ``np.take_along_axis``;
* ``dml.gather_nd`` vs advanced indexing ``x[i0, i1]``;
* ``dml.scatter_elements`` vs ``x.copy(); np.put_along_axis`` (no repeated
  index in a row, where both define the result);
* ``dml.scatter_nd`` vs ``x.copy(); x[i0, i1] = updates``;
* ``dml.one_hot`` vs ``np.eye(depth, dtype)[ids]``;
* ``dml.reverse_subsequences`` vs NumPy's way to it (``take_along_axis`` at
  ``where(j < L, L - 1 - j, j)``), and ``x.copy()`` (its floor) beside.

Each at two sizes: large (megabytes: the kernels) and small ((8, 16) float32
data, a few indices: the host cost of a call, microseconds per call over
--small-calls calls per round).

``--compare OLD_SRC`` runs the rows --runs times in fresh processes,
alternating the library at OLD_SRC (another checkout's ``src``, built in
place) with this one, and reports both (medians over the runs). Writes
``cpu-index.json`` (and ``cpu-index.png`` where matplotlib is installed) into
--out.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent


def _reverse_numpy(x, lengths):
    j = np.arange(x.shape[1])
    L = lengths.astype(np.int64)[:, None]
    return np.take_along_axis(x, np.where(j < L, L - 1 - j, j), 1)


def rows(quick: bool):
    """(name, size, ours, ours unchecked or None, NumPy's, NumPy's name)."""
    import opendml as dml
    rng = np.random.default_rng(0)
    for size in ("small", "large"):
        small = size == "small"
        n = 8 if small else (20_000 if quick else 200_000)
        rows_ = 64 if small else (50_000 if quick else 500_000)
        table = rng.standard_normal((rows_, 16 if small else 64)).astype(np.float32)
        ids = rng.integers(0, table.shape[0], n).astype(np.int64)
        yield ("embedding gather", size, lambda: dml.gather(table, ids, 0),
               lambda: dml.gather(table, ids, 0, check_indices=False), lambda: np.take(table, ids, 0), "np.take")
        h, w = (8, 16) if small else ((256, 256) if quick else (1024, 1024))
        x = rng.standard_normal((h, w)).astype(np.float32)
        ie = rng.integers(0, w, (h, w)).astype(np.int64)
        yield ("gather_elements", size, lambda: dml.gather_elements(x, ie, 1),
               lambda: dml.gather_elements(x, ie, 1, check_indices=False), lambda: np.take_along_axis(x, ie, 1),
               "np.take_along_axis")
        m = 10 if small else n
        tup = np.stack([rng.integers(0, h, m), rng.integers(0, w, m)], 1).astype(np.int64)
        yield ("gather_nd", size, lambda: dml.gather_nd(x, tup), lambda: dml.gather_nd(x, tup, check_indices=False),
               lambda: x[tup[:, 0], tup[:, 1]], "x[i0, i1]")
        perm = np.argsort(rng.random((h, w)), axis=1).astype(np.int64)     # no repeated index in a row

        def put(perm=perm, x=x):
            y = x.copy()
            np.put_along_axis(y, perm, x, 1)
            return y
        yield ("scatter_elements", size, lambda: dml.scatter_elements(x, perm, x, 1),
               lambda: dml.scatter_elements(x, perm, x, 1, check_indices=False), put, "copy + np.put_along_axis")
        flat = rng.permutation(h * w)[:min(m, h * w)]
        tup2 = np.stack([flat // w, flat % w], 1).astype(np.int64)
        upd = rng.standard_normal(len(tup2)).astype(np.float32)

        def setitem(tup2=tup2, upd=upd, x=x):
            y = x.copy()
            y[tup2[:, 0], tup2[:, 1]] = upd
            return y
        yield ("scatter_nd", size, lambda: dml.scatter_nd(x, tup2, upd),
               lambda: dml.scatter_nd(x, tup2, upd, check_indices=False), setitem, "copy + x[i0, i1] = u")
        depth = 16 if small else 1000
        labels = rng.integers(0, depth, 8 if small else n // 4).astype(np.int32)
        values = np.array([0, 1], np.float32)
        yield ("one_hot", size, lambda: dml.one_hot(labels, depth, values), None,
               lambda: np.eye(depth, dtype=np.float32)[labels], "np.eye(depth)[ids]")
        lengths = rng.integers(0, w + 1, h).astype(np.uint32)
        yield ("reverse_subsequences", size, lambda: dml.reverse_subsequences(x, lengths, 1), None,
               lambda: _reverse_numpy(x, lengths), "take_along_axis(where(...))")
        yield ("copy (floor)", size, lambda: x.copy(), None, lambda: x.copy(), "x.copy()")


def measure(quick: bool, reps: int, small_calls: int, timer) -> list:
    out = []
    for name, size, ours, fast, theirs, peer in rows(quick):
        a, b = ours(), theirs()
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), (name, size)
        if fast is not None:
            c = fast()
            assert c.tobytes() == b.tobytes(), (name, size)
        routes = [theirs, ours] + ([fast] if fast else [])
        calls = small_calls if size == "small" else 1
        times = [[] for _ in routes]
        for _ in range(reps):
            for k, f in enumerate(routes):
                t = timer()
                for _ in range(calls):
                    f()
                times[k].append((timer() - t) / calls)
        med = [statistics.median(t) * 1e6 for t in times]
        out.append({"name": name, "size": size, "peer": peer, "numpy_us": med[0], "opendml_us": med[1],
                    "unchecked_us": med[2] if fast else None})
    return out


def table(res: list, old: list | None = None) -> str:
    head = f"{'row':22s} {'size':5s} {'numpy us':>10s} {'opendml us':>10s} {'unchecked':>10s} {'x numpy':>8s} " \
           f"{'x unchecked':>11s}"
    if old:
        head += f" {'before us':>10s} {'before x':>9s} {'before x unch':>13s}"
    lines = [head]
    for i, r in enumerate(res):
        un = f"{r['unchecked_us']:10.2f}" if r["unchecked_us"] is not None else f"{'':10s}"
        unr = f"{r['numpy_us'] / r['unchecked_us']:10.2f}x" if r["unchecked_us"] is not None else f"{'':11s}"
        line = f"{r['name']:22s} {r['size']:5s} {r['numpy_us']:10.2f} {r['opendml_us']:10.2f} {un} " \
               f"{r['numpy_us'] / r['opendml_us']:7.2f}x {unr}"
        if old:
            o = old[i]
            ou = f"{o['numpy_us'] / o['unchecked_us']:12.2f}x" if o["unchecked_us"] is not None else ""
            line += f" {o['opendml_us']:10.2f} {o['numpy_us'] / o['opendml_us']:8.2f}x {ou}"
        lines.append(line)
    return "\n".join(lines)


def _median_rows(runs: list) -> list:
    out = []
    for i, r in enumerate(runs[0]):
        row = dict(r)
        for k in ("numpy_us", "opendml_us", "unchecked_us"):
            if r[k] is not None:
                row[k] = statistics.median(run[i][k] for run in runs)
        out.append(row)
    return out


def plot(res: list, old: list | None, path: pathlib.Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = [f"{r['name']} ({r['size']})" for r in res]
    y = np.arange(len(res))
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(res) + 1.5))
    bars = [("checked", [r["numpy_us"] / r["opendml_us"] for r in res], "tab:blue"),
            ("check_indices=False", [r["numpy_us"] / r["unchecked_us"] if r["unchecked_us"] else 0 for r in res],
             "tab:cyan")]
    if old:
        bars.append(("before (checked)", [o["numpy_us"] / o["opendml_us"] for o in old], "tab:gray"))
    hgt = 0.8 / len(bars)
    for k, (label, vals, color) in enumerate(bars):
        ax.barh(y + k * hgt, vals, height=hgt, label=label, color=color)
    ax.set_yticks(y + 0.4 - hgt / 2, names)
    ax.set_xscale("log")
    ax.axvline(1.0, color="k", linestyle="--", linewidth=1, label="NumPy (1.0x)")
    ax.invert_yaxis()
    ax.set_xlabel("NumPy time / opendml time (higher is better; log scale)")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--small-calls", type=int, default=2000)
    ap.add_argument("--timer", choices=("wall", "process"), default="wall")
    ap.add_argument("--compare", default="", help="another checkout's src directory (the code before)")
    ap.add_argument("--runs", type=int, default=3, help="with --compare: processes of each library, alternated")
    ap.add_argument("--out", default="")
    ap.add_argument("--emit-json", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    timer = time.perf_counter if a.timer == "wall" else time.process_time
    old = None
    if a.compare:
        import opendml
        new_src = str(pathlib.Path(opendml.__file__).resolve().parents[1])
        cmd = [sys.executable, "-m", "benchmarks.cpu_index", "--emit-json", "--reps", str(a.reps),
               "--small-calls", str(a.small_calls), "--timer", a.timer] + (["--quick"] if a.quick else [])
        got = {"old": [], "new": []}
        for run in range(a.runs):
            for which, src in (("old", a.compare), ("new", new_src)):
                env = dict(os.environ, PYTHONPATH=src)
                done = subprocess.run(cmd, env=env, cwd=ROOT.parent, capture_output=True, text=True, check=True)
                got[which].append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(f"run {run + 1} {which} done", file=sys.stderr)
        res, old = _median_rows(got["new"]), _median_rows(got["old"])
    else:
        res = measure(a.quick, a.reps, a.small_calls, timer)
        if a.emit_json:
            print(json.dumps(res))
            return 0
    print(table(res, old))
    if a.out:
        out = pathlib.Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        import opendml as dml
        meta = {"python": sys.version.split()[0], "numpy": np.__version__, "machine": platform.machine(),
                "cpus": os.cpu_count(), "reps": a.reps, "small_calls": a.small_calls, "timer": a.timer,
                "quick": a.quick, "runs": a.runs if a.compare else 1, "compare": a.compare or None,
                "config": str(dml.config())}
        (out / "cpu-index.json").write_text(json.dumps({"meta": meta, "rows": res, "before": old}, indent=1))
        drawn = plot(res, old, out / "cpu-index.png")
        print(f"wrote {out / 'cpu-index.json'}" + (f" and {out / 'cpu-index.png'}" if drawn else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
