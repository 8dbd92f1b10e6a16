"""Host cost per call of the data-movement family on small PyTorch tensors
(issue 21), beside PyTorch's own ops: each family function as the array API
stands (repeated calls: served by the C call cache), again with the call
cache off (``configure(call_cache=False)``: the Python route), and PyTorch's
equivalent.

    python -m benchmarks.gpu_family_small [--device cuda|cpu] [--out DIR] [--calls N] [--calls-large N]

Shapes (1, 4, 16, 16) and (8, 64, 56, 56) float32. Timed as the other GPU
host-cost benchmarks (``gpu_host_cost.py``): back-to-back calls in rounds,
one synchronisation at the end of each round (``torch.cuda.synchronize``;
none on the CPU), every case once per round in turn (interleaved, so a host
that speeds up or slows down does not favour one), after warm-up calls; the
median round, microseconds per call. The large shape's calls are
device-bound on a GPU: there the numbers are the kernels' throughput, on
both sides alike. Every output is checked equal to PyTorch's first, and the
served rows are checked to be served (the call cache's hit count grows by
one per call).

Rows: identity (``clone``), identity scale 2 bias 1 (``x * 2 + 1``), cast to
float16 (``.to``), PADDING 1 on each side of H and W per mode (``F.pad``:
constant, replicate, reflect, circular; SYMMETRIC has no PyTorch mode:
opendml only), JOIN of two on axis 1 (``torch.cat``), SPLIT into two on
axis 1 (``torch.split`` materialised with ``.contiguous()``), TILE (1, 1, 2, 2)
(``Tensor.repeat``), SPACE_TO_DEPTH / DEPTH_TO_SPACE block 2 CRD
(``F.pixel_unshuffle`` / ``F.pixel_shuffle``). ratio = PyTorch's time /
opendml's (above 1: opendml faster). Writes ``gpu-family-small.json`` (with
``--device cpu``: ``cpu-family-small.json``) and the PNG of the same name to
--out.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import platform
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT.parent / "src"))

import numpy as np  # noqa: E402

import opendml as dml  # noqa: E402
from opendml.runtime import calls  # noqa: E402

SHAPES = ((1, 4, 16, 16), (8, 64, 56, 56))


def cases(x, torch, F):
    """(name, opendml's call, PyTorch's or None)."""
    return [
        ("identity", lambda: dml.identity(x), lambda: x.clone()),
        ("identity scale 2 bias 1", lambda: dml.identity(x, 2.0, 1.0), lambda: x * 2 + 1),
        ("cast float32->float16", lambda: dml.cast(x, np.float16), lambda: x.to(torch.float16)),
        ("pad constant 1", lambda: dml.pad(x, [0, 0, 1, 1], [0, 0, 1, 1], "constant", 0.0),
         lambda: F.pad(x, (1, 1, 1, 1), mode="constant", value=0.0)),
        ("pad edge 1", lambda: dml.pad(x, [0, 0, 1, 1], [0, 0, 1, 1], "edge"),
         lambda: F.pad(x, (1, 1, 1, 1), mode="replicate")),
        ("pad reflect 1", lambda: dml.pad(x, [0, 0, 1, 1], [0, 0, 1, 1], "reflect"),
         lambda: F.pad(x, (1, 1, 1, 1), mode="reflect")),
        ("pad wrap 1", lambda: dml.pad(x, [0, 0, 1, 1], [0, 0, 1, 1], "wrap"),
         lambda: F.pad(x, (1, 1, 1, 1), mode="circular")),
        ("pad symmetric 1", lambda: dml.pad(x, [0, 0, 1, 1], [0, 0, 1, 1], "symmetric"), None),
        ("join 2 on axis 1", lambda: dml.join([x, x], 1), lambda: torch.cat([x, x], 1)),
        ("split 2 on axis 1", lambda: dml.split(x, 1, [x.shape[1] // 2] * 2),
         lambda: [t.contiguous() for t in torch.split(x, x.shape[1] // 2, 1)]),
        ("tile (1,1,2,2)", lambda: dml.tile(x, [1, 1, 2, 2]), lambda: x.repeat(1, 1, 2, 2)),
        ("space_to_depth 2 CRD", lambda: dml.space_to_depth(x, 2, "CRD"), lambda: F.pixel_unshuffle(x, 2)),
        ("depth_to_space 2 CRD", lambda: dml.depth_to_space(x, 2, "CRD"), lambda: F.pixel_shuffle(x, 2)),
    ]


def per_call(fn, sync, n) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    sync()
    return (time.perf_counter() - t0) / n * 1e6


def listed(out):
    return out if isinstance(out, (list, tuple)) else [out]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--out", default=str(ROOT / "results"))
    ap.add_argument("--calls", type=int, default=20000, help="calls per case on the small shape (over all rounds)")
    ap.add_argument("--calls-large", type=int, default=2000, help="calls per case on the large shape")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=200)
    args = ap.parse_args(argv)
    import torch
    import torch.nn.functional as F
    dev = args.device
    if dev == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: use --device cpu", file=sys.stderr)
        return 2
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    where = torch.cuda.get_device_name() if dev == "cuda" else platform.processor() or platform.machine()
    print(f"{where}, torch {torch.__version__}, opendml {dml.__version__}, {time.strftime('%Y-%m-%d')}; "
          f"median of {args.rounds} interleaved rounds, microseconds per call")
    rows = []
    for shape, n_calls in zip(SHAPES, (args.calls, args.calls_large)):
        x = torch.randn(*shape, device=dev)
        n = max(1, n_calls // args.rounds)
        table = cases(x, torch, F)
        for name, ours, peer in table:          # the same answers first
            got = listed(ours())
            if peer is not None:
                want = listed(peer())
                assert len(got) == len(want) and all(torch.equal(g, w) for g, w in zip(got, want)), name
        served = {}
        for name, ours, _ in table:             # recorded, then served: one hit a call
            ours()
            before = calls.info()["hits"]
            ours()
            served[name] = calls.info()["hits"] == before + 1
        times = {(name, side): [] for name, _, peer in table
                 for side in (("cached", "route", "torch") if peer is not None else ("cached", "route"))}
        for _ in range(args.rounds):
            for name, ours, peer in table:
                for fn in (ours, peer) if peer is not None else (ours,):
                    for _ in range(min(args.warmup, n)):
                        fn()
                sync()
                times[(name, "cached")].append(per_call(ours, sync, n))
                if peer is not None:
                    times[(name, "torch")].append(per_call(peer, sync, n))
            with dml.configure(call_cache=False):          # the Python route (its plan caches warm up first)
                for name, ours, _ in table:
                    for _ in range(min(args.warmup, n)):
                        ours()
                    sync()
                    times[(name, "route")].append(per_call(ours, sync, n))
            for _, ours, _ in table:                       # recorded again after the configuration change
                ours()
        print(f"\n{'x'.join(map(str, shape))} float32 on {dev}")
        print(f"  {'operation':26} {'served':>9} {'route':>9} {'torch':>9} {'torch/served':>13} {'served?':>8}")
        for name, _, peer in table:
            c = statistics.median(times[(name, "cached")])
            r = statistics.median(times[(name, "route")])
            t = statistics.median(times[(name, "torch")]) if peer is not None else None
            rows.append({"shape": list(shape), "device": dev, "operation": name, "opendml_us": c, "route_us": r,
                         "torch_us": t, "ratio": t / c if t else None, "served": served[name]})
            ts = f"{t:9.2f}" if t is not None else f"{'-':>9}"
            ratio = f"{t / c:12.2f}x" if t is not None else f"{'-':>13}"
            print(f"  {name:26} {c:9.2f} {r:9.2f} {ts} {ratio} {str(served[name]):>8}")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "gpu-family-small" if dev == "cuda" else "cpu-family-small"
    (out / f"{stem}.json").write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "device": where,
                                                  "torch": torch.__version__, "rounds": args.rounds,
                                                  "calls": [args.calls, args.calls_large], "rows": rows}, indent=1))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(SHAPES), figsize=(7 * len(SHAPES), 5.5))
        for ax, shape in zip(np.atleast_1d(axes), SHAPES):
            rs = [r for r in rows if r["shape"] == list(shape)]
            pos = np.arange(len(rs))
            ax.barh(pos - 0.27, [r["opendml_us"] for r in rs], 0.27, label="opendml (served from C)")
            ax.barh(pos, [r["route_us"] for r in rs], 0.27, label="opendml (call cache off)")
            ax.barh(pos + 0.27, [r["torch_us"] or 0 for r in rs], 0.27, label="PyTorch")
            ax.set_yticks(pos, [r["operation"] for r in rs])
            ax.invert_yaxis()
            ax.set_xlabel("microseconds per call (median round)")
            ax.set_title(f"{'x'.join(map(str, shape))} float32, {dev}")
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / f"{stem}.png", dpi=110)
    except Exception as exc:  # noqa: BLE001 - matplotlib absent: the JSON holds everything
        print(f"(no PNG: {exc})")
    print(f"\nwrote {out / stem}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
