"""opendml inside PyTorch: ``python -m benchmarks.gpu_torch [--device cuda|cpu] [--quick] [--out DIR]``.

Three parts, each opendml beside PyTorch's own way of doing the same thing,
outputs checked equal first, speed-ups (PyTorch time / opendml time, > 1 is
opendml faster) printed side by side:

1. Host cost per call on a 1x1x4x4 float32 tensor: ``calls`` back-to-back
   calls after ``warmup`` calls, one synchronisation at the end, the best of
   three such rounds (other load on the host only ever adds time).
   ``dml.slice1`` (a flip of axis 2) against ``torch.flip``, ``dml.unfold``
   against ``F.unfold``; the same with ``requires_grad`` (opendml's
   custom-operator route); the same flip with the call cache off (the Python
   route) and cold (new arguments every call); ``torch.empty_like`` as the
   floor; on CUDA ``dml.slice1`` on a CuPy array against
   ``cupy.ascontiguousarray`` of the flipped view, on the CPU on the NumPy
   view (``x.numpy()``) against ``np.ascontiguousarray`` of the flipped view.
2. A window copy: the (1, 64, 64, 64) tensor's [4:60, 4:60] window by
   ``dml.slice`` against ``t[..., 4:60, 4:60].contiguous()``.
3. The training step of an im2col convolution layer: unfold -> matmul with a
   weight -> sum loss -> backward (through fold, to the input and the
   weight), opendml against ``F.unfold`` (backward ``F.fold``) in 2-D, and
   against pad + ``Tensor.unfold`` per axis + reshape in 3-D.

Times of parts 2 and 3 are per call over rounds of back-to-back calls: the
median round between CUDA events on the GPU (every library on the current
stream), the best round by ``time.perf_counter`` on the CPU. Writes ``results-torch-<device>.json`` and,
with matplotlib, ``results-torch-<device>.png`` to --out
(``benchmarks/results`` by default).
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
import torch
import torch.nn.functional as F

import opendml as dml
import opendml.torch  # noqa: F401 - the custom operators and torch.compile support

ROOT = pathlib.Path(__file__).resolve().parent

#: Workload sizes per device; "quick" shrinks every one (a code-path check).
SIZES = {
    "cuda": {"calls": 20000, "warmup": 500, "window": (1, 64, 64, 64), "conv2d": (32, 64, 56, 56),
             "conv3d": (4, 32, 32, 32, 32), "rounds": 7, "reps": 10},
    "cpu": {"calls": 20000, "warmup": 500, "window": (1, 64, 64, 64), "conv2d": (4, 16, 28, 28),
            "conv3d": (1, 8, 12, 12, 12), "rounds": 15, "reps": 3},
    "quick": {"calls": 500, "warmup": 50, "window": (1, 64, 64, 64), "conv2d": (2, 4, 10, 9),
              "conv3d": (1, 2, 6, 5, 4), "rounds": 3, "reps": 2},
}
#: The 2-D step's speed-up target (issue 12, on the GPU).
TARGET_2D = 1.5


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def host_cost(fn, device: str, calls: int, warmup: int, rounds: int = 3) -> float:
    """Seconds per call: ``calls`` back-to-back calls after ``warmup``, one
    synchronisation at the end; the best of ``rounds`` such runs."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync(device)
        times.append((time.perf_counter() - t0) / calls)
    return min(times)


def device_time(fn, device: str, reps: int, rounds: int) -> float:
    """Seconds per call over ``rounds`` of ``reps`` back-to-back calls: on the
    GPU the median, between CUDA events (each round behind one untimed call,
    so host work overlaps the GPU as in a real program); on the CPU the best
    round by ``time.perf_counter`` (other load on the host only adds time)."""
    fn()
    sync(device)
    times = []
    for _ in range(rounds):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            fn()
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3 / reps)
        else:
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            times.append((time.perf_counter() - t0) / reps)
    return statistics.median(times) if device == "cuda" else min(times)


def close(a, b, rtol=1e-5, atol=1e-5) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=rtol, atol=atol))


# -- 1. host cost per call -------------------------------------------------------------------------------

def host_rows(device: str, calls: int, warmup: int) -> list[dict]:
    """Host cost rows. opendml's rows are warm (a repeated call, served by
    the call cache) unless named otherwise: "call cache off" is the Python
    route with its plan cache warm (``configure(call_cache=False)``), "cold"
    gives every call new arguments (a window offset cycling over 1,000
    values), so neither cache holds it and each call validates and lowers
    its description."""
    x = torch.arange(16, dtype=torch.float32, device=device).reshape(1, 1, 4, 4)
    xg = x.clone().requires_grad_()
    # SLICE1 window: axis 2 walked backwards; the calls below pass the three
    # lists as a user would (no * unpacking inside the timed lambda)
    off, size, step = flip = [0, 0, 0, 0], [1, 1, 4, 4], [1, 1, -1, 1]
    cold_x = torch.arange(10000 + 4, dtype=torch.float32, device=device)
    cold_i = iter(range(10**9))

    def cold_slice(arr):             # 10,000 windows: more than either cache holds
        i = next(cold_i) % 10000
        return dml.slice1(arr, [i], [4], [-1])

    pairs = [
        ("slice1 1x1x4x4 vs torch.flip", lambda: dml.slice1(x, off, size, step), lambda: torch.flip(x, [2])),
        ("unfold 1x1x4x4 vs F.unfold", lambda: dml.unfold(x, 2), lambda: F.unfold(x, 2)),
        ("slice1 requires_grad vs flip", lambda: dml.slice1(xg, off, size, step), lambda: torch.flip(xg, [2])),
        ("unfold requires_grad vs F.unfold", lambda: dml.unfold(xg, 2), lambda: F.unfold(xg, 2)),
    ]
    rows = []

    def add(name, mine, theirs, want=None, cache=True):
        with dml.configure(call_cache=cache):
            agrees = close(mine(), theirs() if want is None else want)
            a = host_cost(mine, device, calls, warmup)
        row = {"workload": name, "opendml_us": a * 1e6, "agrees": agrees}
        if theirs is not None:
            b = host_cost(theirs, device, calls, warmup)
            row.update(torch_us=b * 1e6, speedup=b / a)
        rows.append(row)

    for name, mine, theirs in pairs:
        add(name, mine, theirs)
    add("slice1 1x1x4x4, call cache off", lambda: dml.slice1(x, off, size, step), lambda: torch.flip(x, [2]), cache=False)
    add("slice1 4 of 10004, cold (new window each call)", lambda: cold_slice(cold_x), None,
        want=torch.flip(cold_x[:4], [0]))
    rows.append({"workload": "torch.empty_like (floor)",
                 "torch_us": host_cost(lambda: torch.empty_like(x), device, calls, warmup) * 1e6})
    if device == "cpu":
        xn = x.numpy()
        view = lambda: np.ascontiguousarray(xn[:, :, ::-1])            # noqa: E731
        for name, cache in (("slice1 NumPy array vs np.ascontiguousarray(view)", True),
                            ("slice1 NumPy array, call cache off", False)):
            with dml.configure(call_cache=cache):
                agrees = bool(np.array_equal(dml.slice1(xn, *flip), view()))
                a = host_cost(lambda: dml.slice1(xn, off, size, step), device, calls, warmup)
            b = host_cost(view, device, calls, warmup)
            rows.append({"workload": name, "opendml_us": a * 1e6, "torch_us": b * 1e6, "speedup": b / a,
                         "agrees": agrees})
    else:
        try:
            import cupy
        except ImportError:
            cupy = None
        if cupy is not None:
            xc = cupy.arange(16, dtype=cupy.float32).reshape(1, 1, 4, 4)
            view = lambda: cupy.ascontiguousarray(xc[:, :, ::-1])       # noqa: E731
            for name, cache in (("slice1 CuPy array vs cupy.ascontiguousarray(view)", True),
                                ("slice1 CuPy array, call cache off", False)):
                with dml.configure(call_cache=cache):
                    ok = bool((dml.slice1(xc, *flip) == view()).all())
                    a = host_cost(lambda: dml.slice1(xc, off, size, step), "cuda", calls, warmup)
                b = host_cost(view, "cuda", calls, warmup)
                rows.append({"workload": name, "agrees": ok, "opendml_us": a * 1e6, "torch_us": b * 1e6,
                             "speedup": b / a})
    return rows


# -- 2. the window -------------------------------------------------------------------------------------

def window_row(device: str, shape, reps: int, rounds: int) -> dict:
    t = torch.randn(shape, device=device)
    n, c, h, w = shape

    def mine():
        return dml.slice(t, [0, 0, 4, 4], [n, c, h - 8, w - 8], [1, 1, 1, 1])

    def theirs():
        return t[..., 4:h - 4, 4:w - 4].contiguous()
    a, b = device_time(mine, device, reps * 10, rounds), device_time(theirs, device, reps * 10, rounds)
    return {"workload": f"window {'x'.join(map(str, shape))}[4:{h - 4}, 4:{w - 4}] vs .contiguous()",
            "opendml_ms": a * 1e3, "torch_ms": b * 1e3, "speedup": b / a, "agrees": close(mine(), theirs())}


# -- 3. the training step ------------------------------------------------------------------------------

def torch_unfold_nd(x, k: int, pad: int):
    """PyTorch's route for an N-D im2col: pad, Tensor.unfold per spatial axis,
    move the window axes after the channels, reshape (a copy)."""
    d = x.dim() - 2
    y = F.pad(x, (pad,) * (2 * d))
    for axis in range(2, 2 + d):
        y = y.unfold(axis, k, 1)                       # (N, C, *blocks, *window)
    blocks = y.shape[2:2 + d]
    order = (0, 1, *range(2 + d, 2 + 2 * d), *range(2, 2 + d))
    return y.permute(order).reshape(x.shape[0], x.shape[1] * k ** d, int(np.prod(blocks)))


def step(unfold_fn, x, w):
    """One training step of the im2col layer: forward, sum loss, backward."""
    x.grad = w.grad = None
    loss = (w @ unfold_fn(x)).sum()
    loss.backward()
    return loss


def kernel_breakdown(fn, top: int = 8) -> list[list]:
    """GPU time per kernel over one call of ``fn`` (torch.profiler): the
    ``top`` kernels as [name, ms], largest first, and the total."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    rows = [(e.key, e.device_time_total / 1e3) for e in prof.key_averages() if e.device_time_total > 0]
    rows.sort(key=lambda r: -r[1])
    return [[name[:70], ms] for name, ms in rows[:top]] + [["total", sum(ms for _, ms in rows)]]


def training_rows(device: str, shape2d, shape3d, reps: int, rounds: int) -> list[dict]:
    rows = []
    gen = torch.Generator(device=device).manual_seed(0)
    for shape, theirs_name, theirs in (
            (shape2d, "F.unfold", lambda x: F.unfold(x, 3, padding=1)),
            (shape3d, "pad + Tensor.unfold + reshape", lambda x: torch_unfold_nd(x, 3, 1))):
        d = len(shape) - 2
        x = torch.randn(shape, device=device, generator=gen, requires_grad=True)
        w = torch.randn(shape[1], shape[1] * 3 ** d, device=device, generator=gen) / 3 ** d
        w.requires_grad_()

        def mine(x):
            return dml.unfold(x, 3, 1, 1, 1, 1)
        step(mine, x, w)
        got = (x.grad.clone(), w.grad.clone())
        step(theirs, x, w)
        agrees = close(got[0], x.grad, rtol=1e-4, atol=1e-3) and close(got[1], w.grad, rtol=1e-4, atol=1e-2)
        a = device_time(lambda: step(mine, x, w), device, reps, rounds)
        b = device_time(lambda: step(theirs, x, w), device, reps, rounds)
        rows.append({"workload": f"im2col step {d}-D {'x'.join(map(str, shape))} k3 p1 vs {theirs_name}",
                     "opendml_ms": a * 1e3, "torch_ms": b * 1e3, "speedup": b / a, "agrees": agrees})
        if device == "cuda":       # where each step's GPU time goes
            rows[-1]["kernels"] = {"opendml": kernel_breakdown(lambda: step(mine, x, w)),
                                   "torch": kernel_breakdown(lambda: step(theirs, x, w))}
    if device == "cuda":
        rows[0]["target"] = TARGET_2D
    return rows


# -- report ---------------------------------------------------------------------------------------------

def device_name(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name()
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def run(device: str, sizes: dict) -> dict:
    res = {"device": device, "device_name": device_name(device), "date": time.strftime("%Y-%m-%d"),
           "python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
           "sizes": {k: list(v) if isinstance(v, tuple) else v for k, v in sizes.items()}}
    res["host"] = host_rows(device, sizes["calls"], sizes["warmup"])
    res["window"] = window_row(device, sizes["window"], sizes["reps"], sizes["rounds"])
    res["training"] = training_rows(device, sizes["conv2d"], sizes["conv3d"], sizes["reps"], sizes["rounds"])
    return res


def _num(v, unit_digits=2) -> str:
    return f"{v:.{unit_digits}f}" if isinstance(v, (int, float)) else "-"


def table(res) -> str:
    lines = [f"device: {res['device_name']} ({res['date']}, PyTorch {res['torch']}, Python {res['python']})", "",
             f"{'host cost per call':44s} {'opendml us':>10s} {'PyTorch us':>10s} {'speed-up':>8s}"]
    for r in res["host"]:
        lines.append(f"{r['workload']:44s} {_num(r.get('opendml_us')):>10s} {_num(r.get('torch_us')):>10s} "
                     f"{_num(r.get('speedup')) + ('x' if 'speedup' in r else ''):>8s}"
                     f"{'' if r.get('agrees', True) else '  DIFFERS'}")
    lines += ["", f"{'device time':64s} {'opendml ms':>10s} {'PyTorch ms':>10s} {'speed-up':>8s}"]
    for r in [res["window"], *res["training"]]:
        target = f"  (target {r['target']}x: {'met' if r['speedup'] >= r['target'] else 'NOT met'})" \
            if "target" in r else ""
        lines.append(f"{r['workload']:64s} {r['opendml_ms']:10.4f} {r['torch_ms']:10.4f} {r['speedup']:7.2f}x"
                     f"{'' if r['agrees'] else '  DIFFERS'}{target}")
    for r in res["training"]:
        for who, kernels in r.get("kernels", {}).items():
            lines.append(f"  GPU time per kernel, {who}, {r['workload'][:40]}:")
            lines += [f"    {ms:8.3f} ms  {name}" for name, ms in kernels]
    return "\n".join(lines)


def chart(res, path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no PNG; pip install 'opendml[bench]')", file=sys.stderr)
        return
    rows = [r for r in [*res["host"], res["window"], *res["training"]] if "speedup" in r]
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(rows) + 1.5))
    ys = np.arange(len(rows))
    ax.barh(ys, [r["speedup"] for r in rows], color=["tab:green" if r["speedup"] >= 1 else "tab:red" for r in rows])
    ax.axvline(1.0, color="k", lw=1)
    if res["device"] == "cuda":
        ax.axvline(TARGET_2D, color="k", ls="--", lw=1, label=f"{TARGET_2D}x (2-D step target)")
        ax.legend(loc="lower right", fontsize=8)
    ax.set_yticks(ys, [r["workload"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("speed-up over PyTorch (PyTorch time / opendml time)")
    ax.set_title(f"opendml in PyTorch on {res['device_name']} ({res['date']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None, default_device: str = "cuda") -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default=default_device)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: check the code paths only")
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "results")
    args = ap.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("CUDA is not available to PyTorch here; use --device cpu")
    sizes = dict(SIZES[args.device])
    if args.quick:
        sizes.update(SIZES["quick"])
    res = run(args.device, sizes)
    print(table(res))
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = "-quick" if args.quick else ""
    (args.out / f"results-torch-{args.device}{suffix}.json").write_text(json.dumps(res, indent=1))
    chart(res, args.out / f"results-torch-{args.device}{suffix}.png")
    return res


if __name__ == "__main__":
    main()
