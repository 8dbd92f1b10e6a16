"""GPU benchmark of issue 32: the index-driven operators on PyTorch CUDA
tensors beside PyTorch's own ops, in one run, as ratios (PyTorch's time over
opendml's: above 1 opendml is faster) and as fractions of the device's
measured copy bandwidth (bytes read + written over the time).

    python -m benchmarks.gpu_index [--out DIR] [--reps N] [--only reverse] [--no-device-time]

Rows (float32; int64 indices, uniformly random, so repeats occur):

* embedding: a 1M x 256 table, 1M indices: ``dml.gather`` against
  ``torch.index_select`` and ``F.embedding``;
* gather_elements (4096 x 4096, along axis 1) against ``torch.gather``;
* gather_nd (1M pairs into 1024 x 1024 x 64) against advanced indexing;
* scatter_elements (4096 x 4096) against ``Tensor.scatter``; scatter_nd of
  256K rows of 256 into 256K rows against ``Tensor.index_put``;
* the embedding's accumulating backward (1M rows of 256 into a 1M-row
  table, ``index_adjoint``: deterministic) against ``index_add_`` in
  PyTorch's default and deterministic modes and the embedding backward;
* one_hot (1M indices, depth 128) against ``F.one_hot(...).to(float32)``;
* reverse_subsequences (512 x 256 x 512 along axes 0, 1 and 2, random
  lengths; 4096 x 4096 x 8 along axis 2: rows of 32 bytes) as a fraction
  of copy, beside ``torch.flip`` and a copy of the same tensor as a user
  makes it (``torch.empty_like(x).copy_(x)``: its ratio is the fraction of
  that copy, timed the same way; the 1 GiB copy below amortises its one
  call's host latency over 4x the bytes)
  (whether opendml's output is the reversal is checked against a PyTorch
  reference built from the lengths).

Rows marked ``[NAME=value]`` run again under another setting of
``runtime/cuda/index.py`` (the previous kernels: ``GATHER_ROW=False`` no
block-a-row gather, ``ROW_STAGE=False`` the row read in place,
``SCATTER_VIA=owner`` the global owner pass, ``REVERSE_BYTES=128``/``64``
narrower staged columns (the default 256 bytes where the tile fits), ``REVERSE_TILE=False`` no shared-memory staging,
``WIDE_ACC=False`` the sums one element a word, ``REVERSE_ROWS=bytes`` the
reversal along rows that many bytes a block, 0: none), in the
same process. Under
each row, ``device time`` is what the profiler records of the call's
kernels, copies and fills (median-free: the mean of 5 calls), opendml's and
each PyTorch function's, beside the timed ms a call: where the timed time is
well above it the row is host-bound.

opendml's calls are the array API as a user makes them, with
``check_indices=False``, and the embedding row once more with the check on
(the default: the indices' extremes reduced on the device, one small read
back, so that row includes a synchronisation). Each time
is the median over --reps of 5 back-to-back calls between CUDA events
(``gpu_h200.timed_pair``), the functions alternating rep by rep. Each row
says whether opendml's output equals PyTorch's (``match``: bitwise where
PyTorch's is deterministic, else to float32 rounding) and whether two of
opendml's runs gave the same bytes (``same_bytes``). Before timing, the run
waits for opendml's C++ PyTorch library (``opendml.torch.wait_for_node``:
built once a machine; a fresh machine's first process compiles it in the
background for about half a minute, meanwhile the call cache reads tensors
through Python), so the rows time the route a user's later processes take.
Writes gpu-index.json and gpu-index.png to --out.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT.parent / "src"))

from benchmarks.gpu_h200 import timed_pair  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "benchmarks/results/gpu_index"))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--only", choices=("all", "reverse"), default="all", help="reverse: the reversal rows alone")
    ap.add_argument("--no-device-time", action="store_true", help="skip the profiler's device time of each row")
    args = ap.parse_args(argv)
    import torch
    import torch.nn.functional as F

    import opendml as dml
    import opendml.torch
    from opendml.arrays.index_ops import index_adjoint
    from opendml.model.data_type import DataType
    from opendml.model.tensor_desc import TensorDesc

    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(256, 1024, 1024, device=dev)
    copy_out = torch.empty_like(x)
    t_copy, = timed_pair([lambda: copy_out.copy_(x)], args.reps, torch)
    copy_bw = 2 * x.nbytes / (t_copy * 1e-3) / 1e9
    del x, copy_out
    name = torch.cuda.get_device_name()
    opendml.torch.wait_for_node()     # the route a user's later processes take (the library built once a machine)
    node = opendml.torch.node_status()
    print(f"device: {name}  torch {torch.__version__}  copy {copy_bw:.0f} GB/s ({t_copy:.3f} ms for 1 GiB)  "
          f"node: {node}", flush=True)
    rows = []

    def device_time(fn, n=5):
        """(ms a call on the device, {kernel: ms a call}) of ``fn``'s kernels,
        copies and fills as the profiler records them (CUPTI: the kernels
        opendml launches through CuPy's driver calls too), or (None, {})
        where the profiler gives nothing: with the timed ms a call it tells
        host-bound rows (timed well above device) from device-bound ones."""
        try:
            from torch.profiler import ProfilerActivity, profile
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(n):
                    fn()
                torch.cuda.synchronize()
            per: dict = {}
            for e in prof.events():
                if str(getattr(e, "device_type", "")).endswith("CUDA"):
                    per[e.name[:60]] = per.get(e.name[:60], 0.0) + e.time_range.elapsed_us() / n / 1e3
            return (sum(per.values()) if per else None), per
        except Exception as exc:                  # (a profiler that fails says so, the row stays)
            print(f"  (no device time: {type(exc).__name__}: {exc})", flush=True)
            return None, {}

    def row(label, ours, theirs: dict, nbytes, check=None):
        fns = [ours] + list(theirs.values())
        ts = timed_pair(fns, args.reps, torch)
        a, b = ours(), ours()
        torch.cuda.synchronize()
        same = bool(torch.equal(a.view(torch.uint8) if a.dtype != torch.bool else a,
                                b.view(torch.uint8) if b.dtype != torch.bool else b))
        match = check(a) if check else None
        r = {"row": label, "opendml_ms": ts[0], "frac_copy": nbytes / (ts[0] * 1e-3) / 1e9 / copy_bw,
             "same_bytes": same, "match": match,
             "torch": {k: {"ms": t, "ratio": t / ts[0]} for k, t in zip(theirs, ts[1:])}}
        timed = not args.no_device_time
        dev, kernels = device_time(ours) if timed else (None, {})
        tdev = device_time(fns[1])[0] if timed else None
        r["opendml_device_ms"], r["opendml_kernels_ms"], r["torch_first_device_ms"] = dev, kernels, tdev
        r["torch_device_ms"] = {k: device_time(f)[0] if timed else None for k, f in theirs.items()}
        rows.append(r)
        print(f"{label:34s} opendml {ts[0]:.3f} ms ({r['frac_copy']:.2f} of copy) same_bytes={same} match={match}  "
              + "  ".join(f"{k} {v['ms']:.3f} ms ({v['ratio']:.2f}x)" for k, v in r["torch"].items()), flush=True)
        if dev is not None:
            print(f"  device time a call: opendml {dev:.3f} ms "
                  + (f"(of copy at that: {nbytes / (dev * 1e-3) / 1e9 / copy_bw:.2f}) " if dev else "")
                  + "".join(f"{k} {t:.3f} ms  " for k, t in r["torch_device_ms"].items() if t is not None)
                  + "; ".join(f"{k} {v:.3f}" for k, v in sorted(kernels.items(), key=lambda kv: -kv[1])[:4]),
                  flush=True)

    from opendml.runtime import calls, get_backend
    from opendml.runtime.cuda import index as cuda_index

    def variant(label, settings: dict, *a, **kw):
        """The row again under other index.py settings (the launches recorded
        under the defaults, and the C call cache's entries holding them,
        dropped first, and again after)."""
        old = {k: getattr(cuda_index, k) for k in settings}
        get_backend("cuda:0")._launches.clear()
        calls.clear()
        for k, v in settings.items():
            setattr(cuda_index, k, v)
        try:
            row(f"{label} [{', '.join(f'{k}={v}' for k, v in settings.items())}]", *a, **kw)
        finally:
            for k, v in old.items():
                setattr(cuda_index, k, v)
            get_backend("cuda:0")._launches.clear()
            calls.clear()

    if args.only != "reverse":
        # embedding lookup
        V, D, N = 1 << 20, 256, 1 << 20
        table = torch.randn(V, D, device=dev)
        idx = torch.randint(0, V, (N,), device=dev, generator=g)
        want = torch.index_select(table, 0, idx)
        row("embedding 1M x 256, 1M indices", lambda: dml.gather(table, idx, 0, check_indices=False),
            {"index_select": lambda: torch.index_select(table, 0, idx), "F.embedding": lambda: F.embedding(idx, table)},
            2 * N * D * 4 + idx.nbytes, lambda a: bool(torch.equal(a, want)))
        row("embedding, check_indices=True (the default)", lambda: dml.gather(table, idx, 0),
            {"index_select": lambda: torch.index_select(table, 0, idx), "F.embedding": lambda: F.embedding(idx, table)},
            2 * N * D * 4 + idx.nbytes, lambda a: bool(torch.equal(a, want)))
        # the accumulating backward of the embedding
        grad = torch.randn(N, D, device=dev)
        primal = dml.GatherOperatorDesc(TensorDesc(DataType.FLOAT32, [V, D]), TensorDesc(DataType.INT64, [1, N]), None,
                                        0, 1)
        idx1 = idx.reshape(1, N)

        def add_default():
            return torch.zeros(V, D, device=dev).index_add_(0, idx, grad)

        def add_deterministic():
            torch.use_deterministic_algorithms(True)
            try:
                return torch.zeros(V, D, device=dev).index_add_(0, idx, grad)
            finally:
                torch.use_deterministic_algorithms(False)
        ref = add_default().double()
        bw = ("embedding backward (accumulate)", lambda: index_adjoint(primal, 0, grad, idx1),
              {"index_add_": add_default, "index_add_ deterministic": add_deterministic,
               "embedding_dense_backward": lambda: torch.ops.aten.embedding_dense_backward(grad, idx, V, -1, False)},
              N * D * 4 * 2 + V * D * 4 * 2 + idx.nbytes,
              lambda a: bool(torch.allclose(a.double(), ref, atol=1e-4, rtol=1e-5)))
        row(*bw)
        variant(bw[0], {"WIDE_ACC": False}, *bw[1:])
        del table, grad, want, ref
        # gather_elements / scatter_elements
        M = 4096
        x2 = torch.randn(M, M, device=dev)
        i2 = torch.randint(0, M, (M, M), device=dev, generator=g)
        u2 = torch.randn(M, M, device=dev)
        want = torch.gather(x2, 1, i2)
        ge = ("gather_elements 4096 x 4096", lambda: dml.gather_elements(x2, i2, 1, check_indices=False),
              {"torch.gather": lambda: torch.gather(x2, 1, i2)}, 2 * x2.nbytes + i2.nbytes,
              lambda a: bool(torch.equal(a, want)))
        row(*ge)
        variant(ge[0], {"ROW_STAGE": False}, *ge[1:])
        variant(ge[0], {"GATHER_ROW": False}, *ge[1:])
        se = ("scatter_elements 4096 x 4096", lambda: dml.scatter_elements(x2, i2, u2, 1, check_indices=False),
              {"Tensor.scatter": lambda: x2.scatter(1, i2, u2)}, 2 * x2.nbytes + u2.nbytes + i2.nbytes,
              lambda a: bool(torch.equal(a == x2, x2.scatter(1, i2, u2) == x2)))   # repeats: PyTorch's winner is
        # arbitrary, so the positions written are compared (a zero pattern was: randn gives a few exact zeros at 16M)
        row(*se)
        variant(se[0], {"SCATTER_VIA": "owner"}, *se[1:])
        del x2, i2, u2, want
        # gather_nd
        x3 = torch.randn(1024, 1024, 64, device=dev)
        i3 = torch.randint(0, 1024, (N, 2), device=dev, generator=g)
        want = x3[i3[:, 0], i3[:, 1]]
        row("gather_nd 1M pairs into 1024^2 x 64", lambda: dml.gather_nd(x3, i3, check_indices=False),
            {"advanced indexing": lambda: x3[i3[:, 0], i3[:, 1]]}, 2 * want.nbytes + i3.nbytes,
            lambda a: bool(torch.equal(a, want)))
        del x3, i3, want
        # scatter_nd of rows
        R = 1 << 18
        x4 = torch.randn(R, D, device=dev)
        i4 = torch.randint(0, R, (R, 1), device=dev, generator=g)
        u4 = torch.randn(R, D, device=dev)
        row("scatter_nd 256K rows of 256", lambda: dml.scatter_nd(x4, i4, u4, check_indices=False),
            {"Tensor.index_put": lambda: x4.index_put((i4[:, 0],), u4)}, 2 * x4.nbytes + u4.nbytes + i4.nbytes,
            lambda a: bool(torch.equal(a == x4, x4.index_put((i4[:, 0],), u4) == x4)))
        del x4, i4, u4
        # one_hot
        i5 = torch.randint(0, 128, (N,), device=dev, generator=g)
        on_off = torch.tensor([0.0, 1.0], device=dev)
        want = F.one_hot(i5, 128).to(torch.float32)
        row("one_hot 1M, depth 128", lambda: dml.one_hot(i5, 128, on_off),
            {"F.one_hot().to(float32)": lambda: F.one_hot(i5, 128).to(torch.float32)}, want.nbytes + i5.nbytes,
            lambda a: bool(torch.equal(a, want)))
        del i5, want
    # reverse_subsequences
    x6 = torch.randn(512, 256, 512, device=dev)

    def reversed_along(x, n, axis):
        """The reversal as torch.gather (int64 lengths n): position e < n reads n - 1 - e."""
        e = torch.arange(x.shape[axis], device=dev).reshape([-1 if d == axis else 1 for d in range(x.ndim)])
        return torch.gather(x, axis, torch.where(e < n, n - 1 - e, e).expand(x.shape).contiguous())

    def reversal(label, x, axis, bound, per=None):
        """A row reversing ``x`` along ``axis`` with uniformly random uint32 lengths in [0, bound]; ``per``: the
        one axis the lengths vary along (ONNX ReverseSequence's batch axis), broadcast (stride 0) over the rest."""
        shape = [1 if d == axis else s for d, s in enumerate(x.shape)]
        base = torch.randint(0, bound + 1, [s if per in (None, d) else 1 for d, s in enumerate(shape)], device=dev,
                             generator=g)
        n64, n = base.expand(shape), base.to(torch.uint32).expand(shape)
        want = reversed_along(x, n64, axis)
        return (label, lambda: dml.reverse_subsequences(x, n, axis),
                {"torch.flip (full)": lambda: torch.flip(x, [axis]),
                 "copy, same bytes": lambda: torch.empty_like(x).copy_(x)}, 2 * x.nbytes + n.untyped_storage().nbytes(),
                lambda a: bool(torch.equal(a, want)))
    rs = reversal("reverse_subsequences 512x256x512", x6, 0, 512)
    row(*rs)
    for settings in ({"REVERSE_BYTES": 128}, {"REVERSE_BYTES": 64}, {"REVERSE_TILE": False}):
        if args.only != "reverse" or "REVERSE_BYTES" in settings:
            variant(rs[0], settings, *rs[1:])
    rs = reversal("reverse_subsequences axis 0, lengths per batch (ONNX)", x6, 0, 512, per=1)
    row(*rs)
    rs1 = reversal("reverse_subsequences axis 1", x6, 1, 256)
    row(*rs1)
    variant(rs1[0], {"REVERSE_BYTES": 128}, *rs1[1:])
    variant(rs1[0], {"REVERSE_BYTES": 64}, *rs1[1:])
    del rs, rs1
    rs2 = reversal("reverse_subsequences axis 2 (rows)", x6, 2, 512)
    row(*rs2)
    for nbytes in (8192, 16384, 65536, 131072) if args.only == "reverse" else (0, 8192, 16384, 65536):   # (32 KiB)
        variant(rs2[0], {"REVERSE_ROWS": nbytes}, *rs2[1:])
    del rs2, x6
    x7 = torch.randn(4096, 4096, 8, device=dev)
    rs3 = reversal("reverse_subsequences 4096x4096x8, axis 2", x7, 2, 8)
    row(*rs3)
    for nbytes in (16384, 65536):
        variant(rs3[0], {"REVERSE_ROWS": nbytes}, *rs3[1:])
    del rs3, x7
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {"device": name, "torch": torch.__version__, "node": node, "copy_GBps": copy_bw, "copy_ms_1GiB": t_copy,
              "reps": args.reps, "rows": rows}
    (out / "gpu-index.json").write_text(json.dumps(result, indent=1))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(11, 5))
        labels, vals = [], []
        for r in rows:
            for k, v in r["torch"].items():
                labels.append(f"{r['row']}\nvs {k}")
                vals.append(v["ratio"])
        ax.barh(range(len(vals)), vals, color=["tab:green" if v >= 1 else "tab:red" for v in vals])
        ax.axvline(1.0, color="k", lw=0.8)
        ax.set_yticks(range(len(vals)), labels, fontsize=6)
        ax.set_xlabel("PyTorch time / opendml time (>1: opendml faster)")
        ax.set_title(f"opendml index operators on {name}, copy {copy_bw:.0f} GB/s")
        fig.tight_layout()
        fig.savefig(out / "gpu-index.png", dpi=110)
    except ImportError as exc:
        print(f"no figure: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
