"""GPU benchmark of issue 11: FOLD and SLICE_GRAD beside their PyTorch (and
CuPy) peers, all measured in one run on the same device, with the run's
device-to-device copy bandwidth.

    python benchmarks/gpu_fold.py [--out DIR] [--quick]

Rows (the issue's sizes):
  * 2-D fold (32, 576, 3136) -> (32, 64, 56, 56), 3x3, padding 1, float32 and
    float16, against ``F.fold``;
  * 3-D fold (4, 864, 32768) -> (4, 32, 32, 32, 32), 3x3x3, padding 1, against
    PyTorch routes (there is no 3-D ``F.fold``): 27 slice-adds into a zero
    padded output, cropped (a view); and ``conv_transpose3d`` with one-hot
    weights (cuDNN, TF32 off);
  * overlap-add of (8, 1024, 16381) frames, hop 256, into (8, 1, 2^22),
    against ``F.fold`` as ``torch.istft`` uses it ((1, L) output, (1, 1024)
    kernel, stride (1, 256));
  * SLICE_GRAD of a (64, 256, 128, 128) float32 input's [8:120, 8:120]
    window, against zeros + slice assignment in PyTorch and CuPy.

opendml runs through the CUDA backend's launch path on plans built here (so
the rows do not depend on the array API); where ``opendml.fold`` /
``opendml.slice_grad`` exist, their array-API calls are timed too. Every call
allocates its output, like the peers. Inputs are small integers stored as
floats, so every summation order gives the same bits and the outputs are
compared exactly. Useful bytes: input read + output written. Writes
``gpu-fold.json`` and ``gpu-fold.png`` to --out.
"""
from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT.parent / "src"))

import opendml as dml  # noqa: E402
from benchmarks.__main__ import timer_cuda  # noqa: E402
from opendml.plan import FoldPlan, MovePlan, ScatterPlan  # noqa: E402
from opendml.runtime import get_backend  # noqa: E402
from opendml.runtime.params import SUM_FLOAT  # noqa: E402


def packed(sizes):
    out, step = [], 1
    for s in reversed(sizes):
        out.insert(0, step)
        step *= s
    return tuple(out)


def fold_plan(es, N, C, spatial, window, pad, stride=None):
    D = len(spatial)
    stride = stride or (1,) * D
    blocks = tuple((s + 2 * p - w) // st + 1 for s, w, p, st in zip(spatial, window, pad, stride))
    K, B = math.prod(window), math.prod(blocks)
    return FoldPlan(es, SUM_FLOAT, N, C, tuple(spatial), 0, packed((N, C * K, B)), tuple(window), tuple(stride),
                    (1,) * D, tuple(pad), blocks, 0, packed((N, C, *spatial)))


class Ours:
    """opendml on a fixed plan: allocate the output, launch on the current stream."""

    def __init__(self, cupy, plan, x, out_shape, dtype):
        self.cupy, self.plan, self.x, self.shape, self.dtype = cupy, MovePlan.of(plan), x, out_shape, dtype
        self.backend = get_backend("cuda")

    def __call__(self):
        out = self.cupy.empty(self.shape, self.dtype)
        self.backend.launch(self.plan, self.x.data.ptr, self.x.size, out.data.ptr,
                            self.cupy.cuda.get_current_stream().ptr)
        return out


def to_host(a):
    if type(a).__module__.startswith("cupy"):
        return a.get()
    return a.detach().cpu().numpy()


def rows(cupy, torch, quick):
    F = torch.nn.functional
    T = lambda a: torch.from_dlpack(a)  # noqa: E731
    small = lambda v, q: v if not quick else q  # noqa: E731
    out = []
    cupy.random.seed(0)

    def ints(shape, dtype):
        return cupy.random.randint(-8, 8, size=shape, dtype=cupy.int32).astype(dtype)

    # 2-D folds
    for dtype in ("float32", "float16"):
        N = small(32, 4)
        x = ints((N, 576, 3136), dtype)
        plan = fold_plan(x.itemsize, N, 64, (56, 56), (3, 3), (1, 1))
        tx = T(x)
        peers = {"torch F.fold": lambda tx=tx: F.fold(tx, (56, 56), 3, padding=1)}
        calls = {"opendml": Ours(cupy, plan, x, (N, 64, 56, 56), dtype)}
        if hasattr(dml, "fold"):
            calls["opendml array API"] = lambda x=x: dml.fold(x, (56, 56), 3, 1, 1, 1, 1)
        out.append(dict(name=f"fold 2-D 3x3 pad 1 {dtype}", useful=x.nbytes + N * 64 * 3136 * x.itemsize,
                        calls=calls, peers=peers, target=("torch F.fold", 2.0)))
    # 3-D fold
    N = small(4, 1)
    x3 = ints((N, 864, 32768), "float32")
    plan3 = fold_plan(4, N, 32, (32, 32, 32), (3, 3, 3), (1, 1, 1))
    t3 = T(x3)

    def slice_adds(t3=t3, N=N):
        o = torch.zeros((N, 32, 34, 34, 34), dtype=t3.dtype, device=t3.device)
        v = t3.view(N, 32, 3, 3, 3, 32, 32, 32)
        for a in range(3):
            for b in range(3):
                for c in range(3):
                    o[:, :, a:a + 32, b:b + 32, c:c + 32] += v[:, :, a, b, c]
        return o[:, :, 1:33, 1:33, 1:33]

    w = torch.zeros((864, 1, 3, 3, 3), dtype=torch.float32, device="cuda")
    w.view(32, 27, 27)[:, torch.arange(27), torch.arange(27)] = 1

    def conv_t(t3=t3, w=w, N=N):  # noqa: E306
        return F.conv_transpose3d(t3.view(N, 864, 32, 32, 32), w, padding=1, groups=32)
    calls = {"opendml": Ours(cupy, plan3, x3, (N, 32, 32, 32, 32), "float32")}
    if hasattr(dml, "fold"):
        calls["opendml array API"] = lambda x3=x3: dml.fold(x3, (32, 32, 32), 3, 1, 1, 1, 1)
    out.append(dict(name="fold 3-D 3x3x3 pad 1 float32", useful=x3.nbytes + N * 32 * 32768 * 4, calls=calls,
                    peers={"torch pad + 27 slice-adds + crop": slice_adds,
                           "torch conv_transpose3d one-hot (cuDNN, no TF32)": conv_t},
                    target=("best", 3.0), copy_target=0.6))
    # overlap-add
    N, B = small(8, 2), 16381
    L = (B - 1) * 256 + 1024
    xf = ints((N, 1024, B), "float32")
    planf = FoldPlan(4, SUM_FLOAT, N, 1, (L,), 0, packed((N, 1024, B)), (1024,), (256,), (1,), (0,), (B,), 0,
                     packed((N, 1, L)))
    tf = T(xf)
    calls = {"opendml": Ours(cupy, planf, xf, (N, 1, L), "float32")}
    if hasattr(dml, "fold"):
        calls["opendml array API"] = lambda xf=xf, L=L: dml.fold(xf, (L,), 1024, 256)
    def istft_fold(tf=tf, N=N, L=L):
        return F.fold(tf, (1, L), (1, 1024), stride=(1, 256)).view(N, 1, L)
    out.append(dict(name="overlap-add w1024 hop 256", useful=xf.nbytes + N * L * 4, calls=calls,
                    peers={"torch F.fold as istft": istft_fold},
                    target=("torch F.fold as istft", 1.5)))
    # SLICE_GRAD
    N = small(64, 8)
    g = ints((N, 256, 112, 112), "float32")
    plans = ScatterPlan(4, (N, 256, 128, 128), 0, packed((N, 256, 128, 128)), (0, 0, 8, 8), (1, 1, 1, 1),
                        (N, 256, 112, 112), 0, packed((N, 256, 112, 112)))
    tg = T(g)

    def torch_zeros_assign(tg=tg, N=N):
        o = torch.zeros((N, 256, 128, 128), dtype=tg.dtype, device=tg.device)
        o[:, :, 8:120, 8:120] = tg
        return o

    def cupy_zeros_assign(g=g, N=N):
        o = cupy.zeros((N, 256, 128, 128), g.dtype)
        o[:, :, 8:120, 8:120] = g
        return o
    calls = {"opendml": Ours(cupy, plans, g, (N, 256, 128, 128), "float32")}
    if hasattr(dml, "slice_grad"):
        calls["opendml array API"] = lambda g=g, N=N: dml.slice_grad(g, (N, 256, 128, 128), (0, 0, 8, 8),
                                                                     (N, 256, 112, 112), (1, 1, 1, 1))
    out.append(dict(name="slice_grad [8:120,8:120] float32", useful=g.nbytes + N * 256 * 128 * 128 * 4,
                    calls=calls, peers={"torch zeros + slice assign": torch_zeros_assign,
                                        "cupy zeros + slice assign": cupy_zeros_assign},
                    target=None, copy_target=0.9))
    return out


def run(quick=False):
    import cupy
    import torch
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    timer = lambda fn: timer_cuda(cupy, fn)  # noqa: E731
    src = cupy.ones(1 << 30, cupy.uint8)
    dst = cupy.empty_like(src)
    copy_s = timer(lambda: dst.data.copy_from_device(src.data, src.nbytes))
    copy_bw = 2 * src.nbytes / copy_s
    del src, dst
    print(f"device-to-device copy: {copy_bw / 1e9:.1f} GB/s (bytes read + written)", flush=True)
    results = []
    for r in rows(cupy, torch, quick):
        entry = {"workload": r["name"], "useful_bytes": r["useful"], "calls": {}, "peers": {}}
        want = None
        for name, fn in r["calls"].items():
            got = to_host(fn())
            want = got if want is None else want
            same = bool(got.shape == want.shape and np.array_equal(got, want))
            t = timer(fn)
            entry["calls"][name] = {"s": t, "GBps": r["useful"] / t / 1e9, "copy_ratio": r["useful"] / t / copy_bw,
                                    "agrees": same}
        t_ours = entry["calls"]["opendml"]["s"]
        for name, fn in r["peers"].items():
            try:
                got = to_host(fn())
                same = bool(got.shape == want.shape and np.array_equal(got, want))
                t = timer(fn)
            except Exception as exc:  # a peer that cannot run here is reported, not fatal
                entry["peers"][name] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
                continue
            entry["peers"][name] = {"s": t, "GBps": r["useful"] / t / 1e9, "speedup": t / t_ours, "agrees": same}
        timed = {k: v for k, v in entry["peers"].items() if "s" in v}
        if timed:
            best = min(timed, key=lambda k: timed[k]["s"])
            entry["best_peer"] = best
            entry["vs_best_peer"] = timed[best]["s"] / t_ours
        if r.get("target"):
            peer, want_x = r["target"]
            peer = entry.get("best_peer") if peer == "best" else peer
            if peer in timed:
                entry["target"] = {"vs": peer, "need": want_x, "got": timed[peer]["s"] / t_ours,
                                   "met": timed[peer]["s"] / t_ours >= want_x}
        if r.get("copy_target"):
            ratio = entry["calls"]["opendml"]["copy_ratio"]
            entry["copy_target"] = {"need": r["copy_target"], "got": ratio, "met": ratio >= r["copy_target"]}
        results.append(entry)
        del want
        print(line(entry), flush=True)
    import cupy as cp
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    return {"device_name": name, "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
            "cupy": cp.__version__, "copy_GBps": copy_bw / 1e9, "quick": quick, "rows": results}


def line(e) -> str:
    o = e["calls"]["opendml"]
    s = f"{e['workload']:34s} {o['s'] * 1e3:8.3f} ms {o['GBps']:7.1f} GB/s {o['copy_ratio']:5.2f}x copy"
    if not o["agrees"]:
        s += " DIFFERS"
    for k, v in e["calls"].items():
        if k != "opendml":
            s += f" | {k} {v['s'] * 1e3:.3f} ms{'' if v['agrees'] else ' DIFFERS'}"
    for k, v in e["peers"].items():
        if "error" in v:
            s += f" | {k}: {v['error']}"
        else:
            s += f" | {k} {v['s'] * 1e3:.3f} ms ({v['speedup']:.2f}x){'' if v['agrees'] else ' DIFFERS'}"
    for key in ("target", "copy_target"):
        if key in e:
            t = e[key]
            s += f" | target {t['need']}{'x ' + t['vs'] if key == 'target' else ' of copy'}: " \
                 f"{t['got']:.2f} {'MET' if t['met'] else 'MISSED'}"
    return s


def chart(res, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no PNG)", file=sys.stderr)
        return
    names = [r["workload"] for r in res["rows"]]
    series = ["opendml"] + sorted({p for r in res["rows"] for p in r["peers"] if "s" in r["peers"][p]})
    fig, ax = plt.subplots(figsize=(14, 0.9 * len(names) + 1.5))
    h = 0.8 / len(series)
    ys = np.arange(len(names))
    for i, sname in enumerate(series):
        vals = [(r["calls"]["opendml"] if sname == "opendml" else r["peers"].get(sname, {})).get("GBps", 0)
                for r in res["rows"]]
        ax.barh(ys + i * h, vals, h, label=sname)
    ax.axvline(res["copy_GBps"], color="k", ls="--", lw=1, label="device-to-device copy")
    ax.set_yticks(ys + 0.4 - h / 2, names)
    ax.invert_yaxis()
    ax.set_xlabel("useful GB/s (input read + output written)")
    ax.set_title(f"FOLD and SLICE_GRAD on {res['device_name']} ({res['date']})")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "results"))
    ap.add_argument("--quick", action="store_true", help="smaller batches (a smoke run)")
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res = run(args.quick)
    (out / "gpu-fold.json").write_text(json.dumps(res, indent=1))
    chart(res, out / "gpu-fold.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
