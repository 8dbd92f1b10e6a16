"""Where ML users call opendml: ``python -m benchmarks.gpu_train [--device cuda|cpu] [--quick] [--out DIR]``.

Each row puts opendml beside PyTorch's own operator, measured in this run,
outputs (and gradients) checked equal first; ``speed-up`` = PyTorch's time /
opendml's (> 1: opendml faster), against the row's target.

1. Eager training: forward + backward (``torch.autograd.grad`` with a fixed
   output gradient) of ``dml.unfold`` / ``dml.fold`` / ``dml.slice1``
   (reversing H) on a tensor with ``requires_grad``, against ``F.unfold`` /
   ``F.fold`` / ``torch.flip``; 3x3 window, padding 1, at (1,4,16,16),
   (8,64,56,56) and (32,64,56,56). Targets 1.0x / 1.5x / 1.5x.
2. Compiled: ``torch.compile(fullgraph=True)`` of ``w @ unfold(x)`` (w: 64 x
   C*9), forward, opendml's unfold against ``F.unfold``'s, at (16,16,56,56)
   and (32,64,56,56). Targets 1.0x / 1.3x. Compiled results are checked
   equal to eager ones (fullgraph: a graph break is an error).
3. New shapes: every call on a shape never seen (600 shapes: (1..., C, H, W)
   varying), ``dml.unfold`` against ``F.unfold`` and ``dml.slice1``
   reversing H against ``flip().contiguous()``; then 2,000 distinct shapes
   cycled twice (more than the plan cache holds): the second pass shows
   whether eviction makes a cliff. Target: opendml's time at most 2x
   PyTorch's (speed-up >= 0.5).
4. Warm host cost: ``dml.slice1`` on a 1x1x4x4 tensor against
   ``torch.flip`` (target: at most 15 us on CUDA, and not slower than flip),
   rounds interleaved.

GPU times: median of rounds, each round ``reps`` back-to-back steps between
one pair of synchronisations (``perf_counter``), so host cost counts as a user
sees it; the eager rows interleave opendml's rounds with PyTorch's (which
goes first alternating) and print the per-round speed-up's quartiles and
extremes. Tiny eager shapes, where host time decides, take 20 steps a round
and 15 rounds (--quick) or 41.
Writes ``train-<device>.json`` and, with matplotlib,
``train-<device>.png`` to --out (``benchmarks/results`` by default).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import platform
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

import opendml as dml
import opendml.torch  # noqa: F401 - custom operators for torch.compile

ROOT = pathlib.Path(__file__).resolve().parent


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn, device, reps, rounds, warmup=3):
    """Seconds per call: median over ``rounds`` of ``reps`` calls between syncs."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        sync(device)
        times.append((time.perf_counter() - t0) / reps)
    return statistics.median(times)


def rounds_pair(fa, fb, device, reps, rounds, warmup=3):
    """Seconds per call of two steps, one per round each, the rounds
    interleaved (a, b, a, b, ...; which goes first alternates), so a drift
    of clocks or of the host between them falls on both: two lists."""
    for _ in range(warmup):
        fa()
        fb()
    sync(device)
    ta, tb = [], []
    for r in range(rounds):
        for fn, ts in ((fa, ta), (fb, tb)) if r % 2 == 0 else ((fb, tb), (fa, ta)):
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            sync(device)
            ts.append((time.perf_counter() - t0) / reps)
    return ta, tb


def timed_pair(fa, fb, device, reps, rounds, warmup=3):
    """``rounds_pair``'s medians."""
    ta, tb = rounds_pair(fa, fb, device, reps, rounds, warmup)
    return statistics.median(ta), statistics.median(tb)


def spread(ta, tb) -> dict:
    """The speed-up's spread over rounds (b's time / a's, round by round): its quartiles and extremes."""
    ratios = sorted(b / a for a, b in zip(ta, tb))
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    return {"rounds": len(ratios), "min": ratios[0], "q1": q[0], "median": statistics.median(ratios), "q3": q[2],
            "max": ratios[-1]}


def row(rows, part, name, ours, peer, peer_name, target, **extra):
    r = {"part": part, "workload": name, "opendml_us": ours * 1e6, "peer": peer_name, "peer_us": peer * 1e6,
         "speedup": peer / ours, "target": target, "met": peer / ours >= target, **extra}
    rows.append(r)
    s = extra.get("spread")
    told = (f"   per round {s['q1']:.2f}-{s['q3']:.2f}x (quartiles), {s['min']:.2f}-{s['max']:.2f}x "
            f"(all {s['rounds']})" if s else "")
    print(f"{part:9} {name:44} opendml {ours * 1e6:9.1f} us   {peer_name:22} {peer * 1e6:9.1f} us   "
          f"{peer / ours:5.2f}x (target {target:.2g}x) {'MET' if r['met'] else 'MISSED'}{told}", flush=True)


#: The eager part's floors (x.clone() forward + backward per shape), written to the JSON beside the rows.
FLOORS: list = []


def eager(rows, device, shapes, reps, rounds, tiny_reps, tiny_rounds):
    """Tiny shapes (below 100,000 elements, where host time decides) take ``tiny_reps`` steps a round and
    ``tiny_rounds`` rounds (each a fraction of a millisecond), the others ``reps`` and ``rounds``; every
    row says the speed-up's spread over its rounds."""
    for shape in shapes:
        n, c, h, w = shape
        tiny = n * c * h * w < 100_000
        k_reps, k_rounds = (tiny_reps, tiny_rounds) if tiny else (reps, rounds)
        x = torch.randn(shape, device=device, requires_grad=True)
        cols = torch.randn(n, c * 9, h * w, device=device, requires_grad=True)
        cases = [
            ("unfold", x, lambda t: dml.unfold(t, 3, 1, 1, 1, 1), lambda t: F.unfold(t, 3, 1, 1, 1), "F.unfold"),
            ("fold", cols, lambda t: dml.fold(t, [h, w], 3, 1, 1, 1, 1), lambda t: F.fold(t, (h, w), 3, 1, 1, 1),
             "F.fold"),
            ("slice1", x, lambda t: dml.slice1(t, [0, 0, 0, 0], list(shape), [1, 1, -1, 1]),
             lambda t: torch.flip(t, [2]), "torch.flip"),
        ]
        target = 1.0 if tiny else 1.5
        for name, inp, ours, peer, peer_name in cases:
            y_ours, y_peer = ours(inp), peer(inp)
            g = torch.randn_like(y_peer)
            (ga,) = torch.autograd.grad(y_ours, inp, g)
            (gb,) = torch.autograd.grad(y_peer, inp, g)
            assert torch.allclose(y_ours, y_peer, rtol=1e-5, atol=1e-5), name
            assert torch.allclose(ga, gb, rtol=1e-5, atol=1e-5), name

            def step(fn):
                return lambda: torch.autograd.grad(fn(inp), inp, g)
            ta, tb = rounds_pair(step(ours), step(peer), device, k_reps, k_rounds)
            row(rows, "eager", f"{name} fwd+bwd {tuple(inp.shape)}", statistics.median(ta), statistics.median(tb),
                peer_name, target, spread=spread(ta, tb))
            if name == "slice1" and tiny:
                t_peer = statistics.median(tb)
                # The harness's floor at this size: PyTorch's cheapest differentiable copy (clone: one copy kernel
                # forward, none backward), timed the same way. A target below it is out of reach for any operator.
                t_floor, _ = timed_pair(step(lambda t: t.clone()), step(peer), device, k_reps, k_rounds)
                print(f"eager     floor {tuple(inp.shape)}: x.clone() fwd+bwd {t_floor * 1e6:.1f} us; the {target:.2g}x "
                      f"target allows {t_peer / target * 1e6:.1f} us", flush=True)
                floor = {"workload": f"x.clone() fwd+bwd {tuple(inp.shape)}", "floor_us": t_floor * 1e6,
                         "flip_us": t_peer * 1e6}
                FLOORS.append(floor)


def compiled(rows, device, shapes, reps, rounds):
    for shape, target in shapes:
        n, c, h, w = shape
        x = torch.randn(shape, device=device)
        wt = torch.randn(64, c * 9, device=device)

        def ours_fn(t, wt):
            return wt @ dml.unfold(t, 3, 1, 1, 1, 1)

        def peer_fn(t, wt):
            return wt @ F.unfold(t, 3, 1, 1, 1)
        torch._dynamo.reset()
        ours = torch.compile(ours_fn, fullgraph=True)
        peer = torch.compile(peer_fn, fullgraph=True)
        a, b, e = ours(x, wt), peer(x, wt), ours_fn(x, wt)
        route = opendml.torch.compiled_route()     # which operators the trace above put in the graph
        from opendml.arrays.torch import inductor as torch_inductor
        print(f"compiled  route: {route}:: ({opendml.torch.compiled_status()}; direct kernels in Inductor's "
              f"wrapper: {torch_inductor.status()})", flush=True)
        assert torch.equal(a, e), "compiled != eager"
        assert torch.allclose(a, b, rtol=1e-3, atol=1e-3)
        t_ours = timed(lambda: ours(x, wt), device, reps, rounds)
        t_peer = timed(lambda: peer(x, wt), device, reps, rounds)
        row(rows, "compiled", f"w @ unfold(x) {shape}", t_ours, t_peer, "compiled F.unfold", target, route=route)


def new_shapes(rows, device, count, cycle, rounds):
    """Never-seen shapes. Every round runs on shapes no earlier round (or
    case) used; the two sides alternate which goes first from round to round
    (a side that runs first pays the caching allocator's first requests of
    those sizes, the other reuses its blocks). Before the rounds, a warm-up
    pass over shapes of the same widths but heights no round uses compiles
    opendml's CUDA kernel specialisations (once per process and machine, kept
    on disk by CuPy): the rows then measure a warm process meeting new
    shapes, and the first-pass row of the cycle also runs in a fresh order."""
    def shapes(k, w0, h0=8):
        """``k`` distinct small shapes, W from ``w0`` on."""
        return [(1, 1 + i % 8, h0 + (i // 8) % 50, w0 + i // 400) for i in range(k)]

    def sweep(xs, ours, peer, ours_first=True):
        """Seconds per call of ``ours`` and ``peer`` over every array of ``xs``."""
        times = {}
        for side in (("ours", ours), ("peer", peer)) if ours_first else (("peer", peer), ("ours", ours)):
            sync(device)
            t0 = time.perf_counter()
            for x in xs:
                side[1](x)
            sync(device)
            times[side[0]] = (time.perf_counter() - t0) / len(xs)
        return times["ours"], times["peer"]

    def tensors(shape_list):
        return [torch.randn(s, device=device) for s in shape_list]

    def arrays(shape_list):
        return [np.random.default_rng(0).random(s, dtype=np.float32) for s in shape_list]

    cases = [("unfold", tensors, lambda t: dml.unfold(t, 3, 1, 1, 1, 1), lambda t: F.unfold(t, 3, 1, 1, 1),
              "F.unfold"),
             ("slice1 reversing H", tensors, lambda t: dml.slice1(t, [0, 0, 0, 0], list(t.shape), [1, 1, -1, 1]),
              lambda t: torch.flip(t, [2]).contiguous(), "flip().contiguous()")]
    if device == "cpu":                    # the CPU target: NumPy arrays against np.ascontiguousarray of the view
        cases.append(("slice1 reversing H, NumPy", arrays,
                      lambda a: dml.slice1(a, [0, 0, 0, 0], list(a.shape), [1, 1, -1, 1]),
                      lambda a: np.ascontiguousarray(a[:, :, ::-1]), "np.ascontiguousarray", 1 / 3))
    for k, (name, make, ours, peer, peer_name, *target) in enumerate(cases):
        target = target[0] if target else 0.5
        widths = sorted({w for r in range(rounds) for w in range(20 + 10 * k + 2 * r, 22 + 10 * k + 2 * r + count // 400)}
                        | set(range(60 + 10 * k, 61 + 10 * k + cycle // 400)))
        warm_up = [(1, c, 100 + h, w) for w in widths for c in range(1, 9) for h in range(2)]
        sweep(make(warm_up), ours, peer)
        results = [sweep(make(shapes(count, 20 + 10 * k + 2 * r)), ours, peer, ours_first=r % 2 == 0)
                   for r in range(rounds)]
        row(rows, "new shape", f"{name}, {count} shapes never seen", statistics.median(r[0] for r in results),
            statistics.median(r[1] for r in results), peer_name, target)
        # more distinct shapes than the plan cache holds, cycled: the second pass
        xs = make(shapes(cycle, 60 + 10 * k))
        first, second = sweep(xs, ours, peer), sweep(xs, ours, peer)
        row(rows, "new shape", f"{name}, {cycle} shapes, first pass", *first, peer_name, target)
        row(rows, "new shape", f"{name}, {cycle} shapes, second pass", *second, peer_name, target)


def warm(rows, device, calls):
    x = torch.randn(1, 1, 4, 4, device=device)
    t_ours, t_peer = timed_pair(lambda: dml.slice1(x, [0, 0, 0, 0], [1, 1, 4, 4], [1, 1, -1, 1]),
                                lambda: torch.flip(x, [2]), device, calls // 5, 15, warmup=500)
    row(rows, "warm", "slice1 on a 1x1x4x4 tensor", t_ours, t_peer, "torch.flip", 1.0,
        limit_us=15.0, within_limit=t_ours * 1e6 <= 15.0)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=str(ROOT / "results"))
    p.add_argument("--parts", default="eager,compiled,new,warm")
    a = p.parse_args(argv)
    dev = a.device
    quick = a.quick
    parts = a.parts.split(",")
    rows = []
    t0 = time.perf_counter()
    opendml.torch.wait_for_node()         # steps are timed on the route a warm process takes
    node = opendml.torch.node_status()
    print(f"device {torch.cuda.get_device_name() if dev == 'cuda' else platform.processor() or 'cpu'}, "
          f"torch {torch.__version__}, {time.strftime('%Y-%m-%d')}", flush=True)
    print(f"eager autograd node: {node} (ready after {time.perf_counter() - t0:.1f} s)", flush=True)
    if "eager" in parts:
        shapes = [(1, 4, 16, 16)] + ([(2, 4, 12, 12)] if quick else [(8, 64, 56, 56), (32, 64, 56, 56)])
        eager(rows, dev, shapes, reps=5 if quick else 50, rounds=3 if quick else 21, tiny_reps=20,
              tiny_rounds=15 if quick else 41)
    if "compiled" in parts:
        shapes = [((2, 4, 10, 10), 1.0)] if quick else [((16, 16, 56, 56), 1.0), ((32, 64, 56, 56), 1.3)]
        compiled(rows, dev, shapes, reps=5 if quick else 50, rounds=3 if quick else 11)
    if "new" in parts:
        new_shapes(rows, dev, count=60 if quick else 600, cycle=300 if quick else 2000, rounds=1 if quick else 3)
    if "warm" in parts:
        warm(rows, dev, calls=200 if quick else 20000)
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"device": torch.cuda.get_device_name() if dev == "cuda" else "cpu", "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d"), "quick": quick, "torch_node": node}
    (out / f"train-{dev}.json").write_text(json.dumps({"meta": meta, "rows": rows, "floors": FLOORS}, indent=1))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(rows) + 1.5))
    names = [f"{r['part']}: {r['workload']}" for r in rows]
    ax.barh(range(len(rows)), [r["speedup"] for r in rows],
            color=["tab:green" if r["met"] else "tab:red" for r in rows])
    for i, r in enumerate(rows):
        ax.plot([r["target"]] * 2, [i - 0.4, i + 0.4], color="k")
    ax.set_yticks(range(len(rows)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("speed-up over PyTorch (PyTorch time / opendml time); black: target")
    ax.set_title(f"opendml in training, {meta['device']}, {meta['date']}")
    fig.tight_layout()
    fig.savefig(out / f"train-{dev}.png", dpi=110)


if __name__ == "__main__":
    main()
