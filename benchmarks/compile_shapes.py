"""A compiled function called on many shapes, as a user meets it: ``torch.compile(f)`` with PyTorch's default
settings (automatic dynamic shapes), called once on each of K random shapes (1, C, H, W) in a row, every call
timed with its compiles. Rows: opendml's function (its sizes kept symbolic: ``opendml::family``), the same
function with its sizes fixed in the graph (``opendml::move``, the route before session 23, measured in the same
run by turning ``dynamic.traced`` off), and PyTorch's own op. Prints the graphs compiled, the total seconds of the
K calls, the median of the last three calls (the steady cost once compiled), and each opendml row's ratio to
PyTorch's.

    python -m benchmarks.compile_shapes [--shapes K] [--device cpu|cuda] [--out DIR]

Writes compile-shapes.json (and compile-shapes.png where matplotlib is installed) to --out.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import random
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", type=int, default=10)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--seed", type=int, default=23)
    p.add_argument("--out", default=str(ROOT / "results"))
    args = p.parse_args(argv)
    import torch
    import torch.nn.functional as F
    from torch._dynamo.utils import counters

    import opendml as dml
    import opendml.torch  # noqa: F401
    from opendml.arrays.torch import dynamic

    rng = random.Random(args.seed)
    shapes = [(1, rng.randint(2, 16), 2 * rng.randint(4, 40), 2 * rng.randint(4, 100)) for _ in range(args.shapes)]
    fns = {
        "pad": (lambda t: dml.pad(t, [0, 0, 1, 1], [0, 0, 2, 2], "reflect") * 2,
                lambda t: F.pad(t, (1, 2, 1, 2), mode="reflect") * 2, "F.pad"),
        "tile": (lambda t: dml.tile(t, [1, 1, 2, 3]) * 2, lambda t: t.repeat(1, 1, 2, 3) * 2, "Tensor.repeat"),
        "join": (lambda t: dml.join([t, t * 3], 1) * 2, lambda t: torch.cat([t, t * 3], 1) * 2, "torch.cat"),
        "space_to_depth": (lambda t: dml.space_to_depth(t, 2, "CRD") * 2, lambda t: F.pixel_unshuffle(t, 2) * 2,
                           "F.pixel_unshuffle"),
    }
    traced = dynamic.traced
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)

    def run(fn, check):
        torch._dynamo.reset()
        counters.clear()
        f = torch.compile(fn)
        times = []
        for s in shapes:
            x = torch.randn(*s, device=args.device)
            sync()
            t0 = time.perf_counter()
            y = f(x)
            sync()
            times.append(time.perf_counter() - t0)
            if check is not None:
                assert torch.equal(y, check(x)), "DIFFERS"
        return {"graphs": counters["stats"]["unique_graphs"], "total_s": sum(times),
                "steady_ms": statistics.median(times[-3:]) * 1e3}

    rows = {}
    print(f"device {args.device}, torch {torch.__version__}, {len(shapes)} shapes (1, C, H, W), seed {args.seed}: "
          f"{shapes}")
    for name, (ours, peer, peer_name) in fns.items():
        row = {"peer": peer_name, "symbolic": run(ours, ours)}
        dynamic.traced = lambda call, arrays: None
        try:
            row["fixed"] = run(ours, None)
        finally:
            dynamic.traced = traced
        row["torch"] = run(peer, None)
        rows[name] = row
        t = row["torch"]
        print(f"{name:15s} " + " | ".join(
            f"{k} {row[k]['graphs']} graphs {row[k]['total_s']:6.2f} s ({row[k]['total_s'] / t['total_s']:.2f}x "
            f"{peer_name}'s), steady {row[k]['steady_ms']:.3f} ms" for k in ("symbolic", "fixed"))
            + f" | {peer_name} {t['graphs']} graphs {t['total_s']:.2f} s, steady {t['steady_ms']:.3f} ms", flush=True)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compile-shapes.json").write_text(json.dumps({"device": args.device, "torch": torch.__version__,
                                                         "shapes": shapes, "rows": rows}, indent=1))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"wrote {out / 'compile-shapes.json'}")
        return 0
    fig, ax = plt.subplots(figsize=(7, 3.5))
    names = list(rows)
    for i, k in enumerate(("symbolic", "fixed", "torch")):
        ax.bar([j + (i - 1) * 0.27 for j in range(len(names))], [rows[n][k]["total_s"] for n in names], 0.27,
               label={"symbolic": "opendml (sizes symbolic)", "fixed": "opendml (sizes fixed)", "torch": "PyTorch"}[k])
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel(f"seconds for {len(shapes)} calls, compiles included")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "compile-shapes.png", dpi=110)
    print(f"wrote {out / 'compile-shapes.json'} and {out / 'compile-shapes.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
