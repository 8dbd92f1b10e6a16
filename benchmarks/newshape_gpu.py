"""Every operator on a never-seen shape on the GPU, beside the framework's own
op (issue 33: at most 2x PyTorch's time): ``python3 -m benchmarks.newshape_gpu
--out DIR [--calls N] [--rounds R] [--device cuda|cpu] [--ops slice1,unfold,...]``.

Each call is on a (1, C, H, W) float32 input whose (C, H, W) no earlier call
of that operator in the process used: C from 1 to 16, H and W from 8 to 200,
drawn at random (``--seed``). One command runs, one after the other:

* a priming process per framework (untimed): every operator on every shape
  measured below, so that CuPy's on-disk kernel cache holds every kernel the
  timed processes load;
* per import variant (``torch``: PyTorch alone, PyTorch tensors; ``cupy``:
  CuPy alone, CuPy arrays; ``both``: PyTorch and CuPy imported, PyTorch
  tensors), a **warm** process (every operator warmed up first on widths 201
  to 256, which the timed shapes never have) and a **fresh** process (no
  warm-up: each operator's kernels load from the on-disk cache as the timed
  calls need them).

Rows: per operator, microseconds per call (the lowest over ``--rounds``
rounds of ``--calls`` new shapes, synchronised at the end of each round,
opendml's and the peer's calls on the same inputs), ``ratio`` = opendml /
peer (the target: at most 2), and the route: of ``--probe`` further new
shapes, how many ran with no function of ``opendml/ops`` in Python (the C
new-shape route; a checked index call runs its operator's argument rules in
Python before C launches it, so it counts as the Python route). The gathers
appear twice: as called by default (``check_indices=True``: the indices'
extremes read back from the device first) and ``unchecked``. The first call of each operator in the fresh process is
its own row (``first``): a kernel loaded from the disk cache (compiled where
the cache is cold); a user avoids it with one warm-up call per operator.
Prints the device and its measured device-to-device copy bandwidth; writes
``newshape-gpu.json`` (after every process: a stopped run keeps its rows) and
``newshape-gpu.png`` (matplotlib) into ``--out``. PyTorch's variants run
first; ``--budget`` (default 220 s) bounds the whole run: a process that
would pass it is cut short or skipped, and the JSON says which.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent
TARGET = 2.0
VARIANTS = {"torch": ("torch",), "cupy": ("cupy",), "both": ("torch", "cupy")}


def shapes(seed: int, k: int, lo: int = 8, hi: int = 200) -> list:
    """``k`` distinct (C, H, W), C in [1, 16], H in [8, 200], W in [lo, hi]."""
    rng = np.random.default_rng(seed)
    out: dict = {}
    while len(out) < k:
        c, h, w = int(rng.integers(1, 17)), int(rng.integers(8, 201)), int(rng.integers(lo, hi + 1))
        out[(c, h, w)] = None
    return list(out)


class Fw:
    """The few array calls the inputs need, for PyTorch or CuPy."""

    def __init__(self, name: str, device: str):
        self.name, self.device = name, device
        if name == "torch":
            import torch
            self.xp = torch
            self.sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        else:
            import cupy
            self.xp = cupy
            self.sync = cupy.cuda.Device().synchronize

    def randn(self, *shape):
        if self.name == "torch":
            return self.xp.randn(*shape, device=self.device)
        return self.xp.random.standard_normal(shape, dtype=np.float32)

    def ints(self, hi, shape, dtype="int64"):
        if self.name == "torch":
            return self.xp.randint(0, hi, shape, device=self.device, dtype=getattr(self.xp, dtype))
        return self.xp.random.randint(0, hi, shape).astype(dtype)

    def full(self, shape, v, dtype):
        if self.name == "torch":                          # (through NumPy: PyTorch fills few unsigned types)
            return self.xp.from_numpy(np.full(shape, v, dtype)).to(self.device)
        return self.xp.full(shape, v, dtype=dtype)


def operators(fw: Fw):
    """(name, peer name, make(c, h, w) -> args, opendml(*args), peer(*args) or None)."""
    import opendml as dml
    xp, t = fw.xp, fw.name == "torch"
    if t:
        import torch.nn.functional as F
    x1 = lambda c, h, w: (fw.randn(1, c, h, w),)                      # noqa: E731
    even = lambda c, h, w: (fw.randn(1, c, h & ~1, w & ~1),)          # noqa: E731
    rev = [1, 1, -1, 1]

    def cols(c, h, w):
        return fw.randn(1, c * 9, h * w), [h, w]

    def grad(c, h, w):
        return fw.randn(1, c, (h + 1) // 2, w), [1, c, h, w]

    def s2d_peer(x):
        n, c, h, w = x.shape
        return xp.ascontiguousarray(x.reshape(1, c, h // 2, 2, w // 2, 2).transpose(0, 3, 5, 1, 2, 4)
                                    .reshape(1, 4 * c, h // 2, w // 2))

    def d2s_peer(x):
        n, c, h, w = x.shape
        return xp.ascontiguousarray(x.reshape(1, 2, 2, c // 4, h, w).transpose(0, 3, 4, 1, 5, 2)
                                    .reshape(1, c // 4, 2 * h, 2 * w))

    def gather_args(c, h, w):
        return fw.randn(1, c, h, w), fw.ints(c, (max(1, c // 2),))

    def elements_args(c, h, w):
        return fw.randn(1, c, h, w), fw.ints(h, (1, c, h, w))

    def scatter_args(c, h, w):
        perm = fw.ints(h, (1, c, h, w))
        return fw.randn(1, c, h, w), perm, fw.randn(1, c, h, w)

    def nd_args(c, h, w):
        idx = fw.ints(c, (max(1, c // 2), 2))
        idx[:, 0] = 0
        return fw.randn(1, c, h, w), idx

    def scatter_nd_args(c, h, w):
        x, idx = nd_args(c, h, w)
        idx = xp.unique(idx, dim=0) if t else xp.unique(idx[:, 1]).reshape(-1, 1)
        if not t:
            idx = xp.concatenate([xp.zeros_like(idx), idx], 1)
        return x, idx, fw.randn(idx.shape[0], h, w)

    def one_hot_args(c, h, w):
        vals = (xp.tensor([0.0, 1.0], device=fw.device) if t else xp.asarray([0.0, 1.0], dtype=np.float32))
        return fw.ints(w, (c, h)), w, vals

    def reverse_args(c, h, w):
        return fw.randn(1, c, h, w), fw.full((1, c, 1, w), h, "uint32" if not t else "uint32")

    def scatter_nd_peer(x, idx, upd):
        y = x.clone() if t else x.copy()
        y[idx[:, 0], idx[:, 1]] = upd
        return y

    def diag_peer(x):
        y = x.clone() if t else x.copy()
        if t:
            y.diagonal(dim1=-2, dim2=-1).zero_()
        else:
            r = xp.arange(min(x.shape[-2:]))
            y[..., r, r] = 0
        return y

    def one_hot_peer(idx, depth, vals):
        return F.one_hot(idx, depth).to(vals.dtype) if t else xp.eye(depth, dtype=np.float32)[idx]

    ops = [
        ("slice1 reversing H", "flip(2)", x1, lambda x: dml.slice1(x, [0, 0, 0, 0], list(x.shape), rev),
         (lambda x: x.flip(2)) if t else (lambda x: xp.ascontiguousarray(x[:, :, ::-1]))),
        ("slice every other W", "x[..., ::2] made contiguous", x1,
         lambda x: dml.slice(x, [0, 0, 0, 0], [1, x.shape[1], x.shape[2], (x.shape[3] + 1) // 2], [1, 1, 1, 2]),
         (lambda x: x[..., ::2].contiguous()) if t else (lambda x: xp.ascontiguousarray(x[..., ::2]))),
        ("unfold 3x3 pad 1", "F.unfold", x1, lambda x: dml.unfold(x, 3, 1, 1, 1, 1),
         (lambda x: F.unfold(x, 3, 1, 1, 1)) if t else None),
        ("fold 3x3 pad 1", "F.fold", cols, lambda x, hw: dml.fold(x, hw, 3, 1, 1, 1, 1),
         (lambda x, hw: F.fold(x, hw, 3, 1, 1, 1)) if t else None),
        ("slice_grad every other H", "zeros + strided copy", grad,
         lambda g, s: dml.slice_grad(g, s, [0, 0, 0, 0], s, [1, 1, 2, 1]),
         (lambda g, s: g.new_zeros(s).__setitem__((slice(None), slice(None), slice(None, None, 2)), g))
         if t else (lambda g, s: xp.zeros(s, g.dtype).__setitem__((slice(None), slice(None), slice(None, None, 2)),
                                                                   g))),
        ("identity", "clone()" if t else "copy()", x1, lambda x: dml.identity(x),
         (lambda x: x.clone()) if t else (lambda x: x.copy())),
        ("identity of an NHWC view", "contiguous()", x1, lambda x: dml.identity(x.permute(0, 2, 3, 1) if t
                                                                                else x.transpose(0, 2, 3, 1)),
         (lambda x: x.permute(0, 2, 3, 1).contiguous()) if t
         else (lambda x: xp.ascontiguousarray(x.transpose(0, 2, 3, 1)))),
        ("cast to float16", ".to(float16)", x1, lambda x: dml.cast(x, xp.float16),
         (lambda x: x.to(xp.float16)) if t else (lambda x: x.astype(xp.float16))),
        ("cast to 'int32' (a string)", ".to(int32)", x1, lambda x: dml.cast(x, "int32"),
         (lambda x: x.to(xp.int32)) if t else (lambda x: x.astype(xp.int32))),
        ("cast to DataType.INT8", ".to(int8)", x1, lambda x: dml.cast(x, dml.DataType.INT8),
         (lambda x: x.to(xp.int8)) if t else (lambda x: x.astype(xp.int8))),
    ]
    for mode, tmode, cmode in (("constant", "constant", "constant"), ("reflect", "reflect", "reflect"),
                               ("edge", "replicate", "edge"), ("wrap", "circular", "wrap")):
        ops.append((f"pad {mode} (1, 2)", f"F.pad {tmode}" if t else f"cupy.pad {cmode}", x1,
                    lambda x, mode=mode: dml.pad(x, (0, 0, 1, 2), (0, 0, 2, 1), mode=mode),
                    (lambda x, m=tmode: F.pad(x, (2, 1, 1, 2), mode=m)) if t
                    else (lambda x, m=cmode: xp.pad(x, ((0, 0), (0, 0), (1, 2), (2, 1)), mode=m))))
    ops += [
        ("join axis 1", "cat" if t else "concatenate", x1, lambda x: dml.join([x, x[:, :1]], 1),
         (lambda x: xp.cat([x, x[:, :1]], 1)) if t else (lambda x: xp.concatenate([x, x[:, :1]], 1))),
        ("split axis 3", "split + contiguous", x1, lambda x: dml.split(x, 3, [1, x.shape[3] - 1]),
         (lambda x: [a.contiguous() for a in xp.split(x, [1, x.shape[3] - 1], 3)]) if t
         else (lambda x: [xp.ascontiguousarray(a) for a in xp.split(x, [1], 3)])),
        ("tile (1, 1, 2, 2)", "repeat" if t else "tile", x1, lambda x: dml.tile(x, (1, 1, 2, 2)),
         (lambda x: x.repeat(1, 1, 2, 2)) if t else (lambda x: xp.tile(x, (1, 1, 2, 2)))),
        ("space_to_depth 2 CRD", "F.pixel_unshuffle" if t else "reshape/transpose", even,
         lambda x: dml.space_to_depth(x, 2, "CRD"), (lambda x: F.pixel_unshuffle(x, 2)) if t else s2d_peer),
        ("depth_to_space 2 CRD", "F.pixel_shuffle" if t else "reshape/transpose",
         lambda c, h, w: (fw.randn(1, 4 * c, h, w),), lambda x: dml.depth_to_space(x, 2, "CRD"),
         (lambda x: F.pixel_shuffle(x, 2)) if t else d2s_peer),
        ("gather axis 1", "index_select" if t else "take", gather_args, lambda x, i: dml.gather(x, i, 1),
         (lambda x, i: x.index_select(1, i)) if t else (lambda x, i: xp.take(x, i, 1))),
        ("gather_elements axis 2", "gather" if t else "take_along_axis", elements_args,
         lambda x, i: dml.gather_elements(x, i, 2),
         (lambda x, i: x.gather(2, i)) if t else (lambda x, i: xp.take_along_axis(x, i, 2))),
        ("scatter_elements axis 2", "scatter", scatter_args, lambda x, i, u: dml.scatter_elements(x, i, u, 2),
         (lambda x, i, u: x.scatter(2, i, u)) if t else None),
        ("gather_nd", "advanced indexing", nd_args, lambda x, i: dml.gather_nd(x, i),
         lambda x, i: x[i[:, 0], i[:, 1]]),
        ("scatter_nd", "clone + index assignment", scatter_nd_args, lambda x, i, u: dml.scatter_nd(x, i, u),
         scatter_nd_peer),
        # the same calls without the index check (check_indices=False: no read-back of the indices' extremes)
        ("gather axis 1 unchecked", "index_select" if t else "take", gather_args,
         lambda x, i: dml.gather(x, i, 1, check_indices=False),
         (lambda x, i: x.index_select(1, i)) if t else (lambda x, i: xp.take(x, i, 1))),
        ("gather_elements axis 2 unchecked", "gather" if t else "take_along_axis", elements_args,
         lambda x, i: dml.gather_elements(x, i, 2, check_indices=False),
         (lambda x, i: x.gather(2, i)) if t else (lambda x, i: xp.take_along_axis(x, i, 2))),
        ("gather_nd unchecked", "advanced indexing", nd_args, lambda x, i: dml.gather_nd(x, i, check_indices=False),
         lambda x, i: x[i[:, 0], i[:, 1]]),
        ("one_hot", "F.one_hot" if t else "eye[indices]", one_hot_args, lambda i, d, v: dml.one_hot(i, d, v),
         one_hot_peer),
        ("reverse_subsequences axis 2", "flip(2)", reverse_args, lambda x, n: dml.reverse_subsequences(x, n, 2),
         (lambda x, n: x.flip(2)) if t else (lambda x, n: xp.ascontiguousarray(x[:, :, ::-1]))),
        ("diagonal_matrix zeroing the diagonal", "clone + diagonal().zero_()", x1,
         lambda x: dml.diagonal_matrix(x, value=0, begin=0, end=1), diag_peer),
    ]
    return ops


def _ops_dir() -> str:
    import opendml.ops
    return str(pathlib.Path(opendml.ops.__file__).parent)


def python_lowered(fn, args) -> bool:
    """Whether ``fn(*args)`` ran a function of ``opendml/ops`` in Python (a
    description or a lowering: not the C new-shape route). An operator's
    ``arguments``, which every call runs to bind its arguments, is not one."""
    ops_dir, seen = _ops_dir(), []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(ops_dir) and frame.f_code.co_name != "arguments":
            seen.append(frame.f_code.co_name)
    old = sys.getprofile()
    sys.setprofile(profile)
    try:
        fn(*args)
    finally:
        sys.setprofile(old)
    return bool(seen)


def child(role: str, variant: str, device: str, calls: int, rounds: int, probe: int, seed: int,
          ops: str = "") -> dict:
    """One process: ``role`` prime, warm or fresh (see the module's docstring)."""
    for m in VARIANTS[variant]:
        __import__(m)
    fw = Fw("cupy" if variant == "cupy" else "torch", device)
    fw.randn(1, 1, 8, 8)                                  # the framework's device set up before any timing
    fw.sync()
    timed = [shapes(seed + 1 + r, calls) for r in range(rounds)]
    probed = shapes(seed + 100, probe)
    rows, only = [], {o for o in ops.split(",") if o}
    for name, peer_name, make, ours, peer in operators(fw):
        if only and name.split()[0] not in only:          # --ops: the operator's function name
            continue
        try:
            row = _measure(role, variant, fw, timed, probed, seed, name, peer_name, make, ours, peer)
        except Exception as e:  # noqa: BLE001 - one operator's failure is its row's, not the run's
            row = {"operator": name, "peer": peer_name, "variant": variant, "process": role,
                   "error": f"{type(e).__name__}: {str(e)[:300]}"}
        if row is not None:
            rows.append(row)
    return {"rows": rows}


def _measure(role, variant, fw, timed, probed, seed, name, peer_name, make, ours, peer):
    """One operator's row in this process (None for the priming process)."""
    clock = time.perf_counter
    if role == "prime":
        for sh in [s for r in timed for s in r] + probed + shapes(seed + 200, 4, 201, 256):
            ours(*make(*sh))
        fw.sync()
        return None
    row = {"operator": name, "peer": peer_name, "variant": variant, "process": role}
    if role == "warm":
        for sh in shapes(seed + 200, 24, 201, 256):
            ours(*make(*sh))
            if peer:
                peer(*make(*sh))
        fw.sync()
    else:                                             # the first call of the operator in this process
        args = make(*timed[0][0])
        fw.sync()
        t0 = clock()
        ours(*args)
        fw.sync()
        row["first_us"] = (clock() - t0) * 1e6
        if peer:
            t0 = clock()
            peer(*args)
            fw.sync()
            row["first_peer_us"] = (clock() - t0) * 1e6
    best, best_peer = float("inf"), float("inf")
    for r, round_shapes in enumerate(timed):
        if role == "fresh" and r == 0:
            round_shapes = round_shapes[1:]           # (its first shape made the first call)
        inputs = [make(*sh) for sh in round_shapes]
        fw.sync()
        t0 = clock()
        for args in inputs:
            ours(*args)
        fw.sync()
        best = min(best, (clock() - t0) / len(inputs))
        if peer:
            t0 = clock()
            for args in inputs:
                peer(*args)
            fw.sync()
            best_peer = min(best_peer, (clock() - t0) / len(inputs))
    row["opendml_us"] = best * 1e6
    row["peer_us"] = best_peer * 1e6 if peer else None
    row["ratio"] = best / best_peer if peer else None
    row["c_route"] = sum(not python_lowered(ours, make(*sh)) for sh in probed)
    row["probed"] = len(probed)
    return row


def copy_bandwidth(device: str) -> float:
    """Device-to-device copy bandwidth in GB/s (read + write bytes over the
    best of 10 copies of 1 GiB), through PyTorch or else CuPy."""
    nbytes = 1 << 30 if device == "cuda" else 1 << 26
    try:
        import torch
        a = torch.empty(nbytes // 4, device=device)
        b = torch.empty_like(a)
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        copy = lambda: b.copy_(a)                         # noqa: E731
    except ImportError:
        import cupy
        a = cupy.empty(nbytes // 4, np.float32)
        b = cupy.empty_like(a)
        sync = cupy.cuda.Device().synchronize
        copy = lambda: b.__setitem__(Ellipsis, a)        # noqa: E731
    copy()
    sync()
    best = float("inf")
    for _ in range(10):
        t0 = time.perf_counter()
        copy()
        sync()
        best = min(best, time.perf_counter() - t0)
    return 2 * nbytes / best / 1e9


def device_name(device: str) -> str:
    if device != "cuda":
        import platform
        return platform.processor() or platform.machine()
    try:
        import torch
        return torch.cuda.get_device_name()
    except ImportError:
        import cupy
        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        return name.decode() if isinstance(name, bytes) else name


def _run_child(args, role, variant, deadline: float) -> dict:
    limit = min(args.prime_timeout if role == "prime" else args.timeout, int(deadline - time.perf_counter()))
    if limit < 10:
        print(f"  {role} {variant}: skipped (--budget spent)", flush=True)
        return {"rows": [], "error": "skipped: --budget spent"}
    cmd = [sys.executable, "-m", "benchmarks.newshape_gpu", "--child", role, "--variant", variant,
           "--device", args.device, "--calls", str(args.calls), "--rounds", str(args.rounds), "--probe",
           str(args.probe), "--seed", str(args.seed), "--ops", args.ops]
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT.parent, timeout=limit)
    except subprocess.TimeoutExpired:
        print(f"  {role} {variant}: stopped after {limit} s", flush=True)
        return {"rows": [], "error": f"timed out after {limit} s"}
    took = time.perf_counter() - t0
    if done.returncode != 0:
        print(f"  {role} {variant}: failed ({took:.0f} s): {done.stderr.strip().splitlines()[-1:]}", flush=True)
        return {"rows": [], "error": done.stderr[-3000:]}
    print(f"  {role} {variant}: {took:.0f} s", flush=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(rows: list) -> str:
    lines = [f"{'operator (new shape, float32)':38} {'variant':7} {'process':7} {'ours us':>9} {'peer us':>9} "
             f"{'ratio':>6} {'C route':>8} {'first us':>9} {'first peer':>10}  peer"]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['operator']:38} {r['variant']:7} {r['process']:7} failed: {r['error']}")
            continue
        ratio = f"{r['ratio']:6.2f}" if r["ratio"] is not None else f"{'-':>6}"
        peer = f"{r['peer_us']:9.1f}" if r["peer_us"] is not None else f"{'-':>9}"
        first = f"{r['first_us']:9.0f}" if "first_us" in r else f"{'':>9}"
        first_peer = f"{r['first_peer_us']:10.0f}" if "first_peer_us" in r else f"{'':>10}"
        flag = "  > 2x" if r["ratio"] is not None and r["ratio"] > TARGET else ""
        lines.append(f"{r['operator']:38} {r['variant']:7} {r['process']:7} {r['opendml_us']:9.1f} {peer} {ratio} "
                     f"{r['c_route']:>4}/{r['probed']:<3} {first} {first_peer}  {r['peer']}{flag}")
    return "\n".join(lines)


def plot(rows: list, path: pathlib.Path, title: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = list(dict.fromkeys(r["operator"] for r in rows))
    series = list(dict.fromkeys((r["variant"], r["process"]) for r in rows))
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(names) * max(1, len(series)) / 3 + 2))
    height = 0.8 / max(1, len(series))
    for k, (variant, process) in enumerate(series):
        got = {r["operator"]: r.get("ratio") for r in rows if (r["variant"], r["process"]) == (variant, process)}
        ys = [i + k * height for i in range(len(names))]
        ax.barh(ys, [got.get(n) or 0 for n in names], height=height, label=f"{variant}, {process} process")
    ax.axvline(TARGET, color="k", linestyle="--", linewidth=1, label=f"target {TARGET:g}x")
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(names))])
    ax.set_yticklabels(names)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("opendml time / the framework's op on a never-seen shape (lower is better; log scale)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(ROOT / "results"))
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                   help="cpu: a smoke run on PyTorch CPU tensors (no CuPy)")
    p.add_argument("--calls", type=int, default=30, help="new shapes per round and operator")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--probe", type=int, default=10, help="further new shapes whose route is checked")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--variants", default="torch,cupy,both")
    p.add_argument("--ops", default="", help="only these operators, by function name (e.g. slice,slice1,unfold)")
    p.add_argument("--timeout", type=int, default=60, help="seconds per timed process")
    p.add_argument("--prime-timeout", type=int, default=150,
                   help="seconds per priming process (it compiles the kernels a cold on-disk cache lacks)")
    p.add_argument("--budget", type=int, default=220,
                   help="seconds for the whole run: a process that would pass it is cut short or skipped")
    p.add_argument("--child", choices=("prime", "warm", "fresh"), help=argparse.SUPPRESS)
    p.add_argument("--variant", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child, a.variant, a.device, a.calls, a.rounds, a.probe, a.seed, a.ops)))
        return 0
    start = time.perf_counter()
    variants = [v for v in a.variants.split(",") if v]
    if a.device != "cuda":
        variants = [v for v in variants if v == "torch"]
    else:
        try:
            import cupy  # noqa: F401
        except ImportError:
            variants = [v for v in variants if v == "torch"]
    name, bw = device_name(a.device), copy_bandwidth(a.device)
    head = f"device {name}, copy bandwidth {bw:.0f} GB/s; (1, C, H, W) float32, C 1-16, H and W 8-200"
    print(head, flush=True)
    meta = {"device": name, "copy_GBps": bw, "calls": a.calls, "rounds": a.rounds, "probe": a.probe,
            "seed": a.seed, "ops": a.ops or "all", "python": sys.version.split()[0], "numpy": np.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "variants": variants}
    for m in ("torch", "cupy"):
        try:
            meta[m] = __import__(m).__version__
        except ImportError:
            pass
    rows, errors = [], {}
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)

    def save():                                           # after every process: a stopped run keeps its rows
        meta["seconds"] = time.perf_counter() - start
        (out / "newshape-gpu.json").write_text(json.dumps({"meta": meta, "rows": rows, "errors": errors},
                                                          indent=1))
    deadline, primed = start + a.budget, set()
    for v in sorted(variants, key=lambda v: v == "cupy"):        # PyTorch's rows first
        fw = "cupy" if v == "cupy" else "torch"
        roles = ("warm", "fresh") if fw in primed else ("prime", "warm", "fresh")
        primed.add(fw)
        for role in roles:
            got = _run_child(a, role, fw if role == "prime" else v, deadline)
            rows += got["rows"]
            if "error" in got:
                errors[f"{role} {v}"] = got["error"]
            save()
    print(table(rows))
    save()
    drawn = plot(rows, out / "newshape-gpu.png", head)
    print(f"wrote {out / 'newshape-gpu.json'}" + (f" and {out / 'newshape-gpu.png'}" if drawn else "")
          + f" in {meta['seconds']:.0f} s")
    return 1 if errors else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
