"""GPU benchmark of issue 21: each data-movement family operator on a 256 MiB
float32 tensor beside PyTorch's own equivalent, in one run on one device, as a
fraction of the run's device copy bandwidth (bytes read + written).

    python -m benchmarks.gpu_family [--out DIR] [--reps N] [--variants] [--only a,b]

opendml runs through the CUDA backend's move-program launch directly
(``CudaBackend.record_move(plan, src_ptrs, src_elements, dst_ptrs,
dst_elements)`` on the plan the operator description lowers to, called with
PyTorch tensors' device addresses on PyTorch's current stream): the kernels'
time, without the array API's host cost. Outputs are allocated once per row
for both sides (PyTorch's ops allocate theirs from its caching allocator,
which costs no device time). Every opendml output is compared with PyTorch's
where the operations agree (``match``).

Input (16, 64, 256, 256) float32 = 256 MiB. Rows:
  identity (copy; torch ``clone``), identity with ScaleBias(2, 1) (``x * 2 + 1``),
  cast to float16 / int32 (``.to``), PADDING 1 on each side of H and W in every
  mode (``F.pad``: constant, replicate, reflect, circular; SYMMETRIC has no
  PyTorch mode), JOIN of two (16, 32, 256, 256) halves on axis 1 (``torch.cat``),
  SPLIT into them (``torch.split`` + ``.contiguous()``), TILE (1, 1, 2, 2)
  (``Tensor.repeat``), SPACE_TO_DEPTH1 / DEPTH_TO_SPACE1 with block 2 in
  COLUMN_ROW_DEPTH order (``F.pixel_unshuffle`` / ``F.pixel_shuffle``, the same
  element order) and in DEPTH_COLUMN_ROW order (opendml only).
  Useful bytes: the input read once + the output written.
  ``--variants`` adds the backend's other routes (padding through the row
  kernel move_pad, pass by pass and as one fused move_vec pass beside the
  default move_padw word kernel, and move_padw's other words-per-thread /
  register-cap settings; conversions through move_vec and move_cvt's other
  unroll counts; plain passes forced through strided_copy or through the move
  kernels move_vec/move_tile). ``--only a,b`` keeps the rows whose name holds
  one of the substrings (the copy is always measured).
Writes gpu-family.json and gpu-family.png to --out.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT.parent / "src"))

SHAPE = (16, 64, 256, 256)


def timed(fn, reps: int, torch) -> float:
    """Median milliseconds of ``fn`` over ``reps`` runs (CUDA events), after 3 warm-ups."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def timed_pair(f, g, reps: int, torch) -> tuple:
    """Median milliseconds of ``f`` and of ``g`` (CUDA events), the two
    alternating rep by rep (no drift of clocks or memory state favours
    either), after 3 warm-ups of each."""
    for _ in range(3):
        f()
        g()
    torch.cuda.synchronize()
    tf, tg = [], []
    for _ in range(reps):
        for fn, out in ((f, tf), (g, tg)):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            out.append(a.elapsed_time(b))
    return statistics.median(tf), statistics.median(tg)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/session7")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--variants", action="store_true")
    ap.add_argument("--only", default="")
    args = ap.parse_args(argv)
    import numpy as np
    import torch
    import torch.nn.functional as F

    import opendml as dml
    from opendml.model.data_type import DataType
    from opendml.ops import (CastOperatorDesc, DepthToSpace1OperatorDesc, ElementWiseIdentityOperatorDesc,
                             JoinOperatorDesc, PaddingOperatorDesc, SpaceToDepth1OperatorDesc, SplitOperatorDesc,
                             TileOperatorDesc)
    from opendml.ops._spec import DepthSpaceOrder, PaddingMode, ScaleBias
    from opendml.runtime.cuda import backend as cb, steps as cs

    dev = torch.device("cuda")
    torch.manual_seed(0)
    f32 = DataType.FLOAT32
    TD = lambda dt, s: dml.TensorDesc(dt, list(s))  # noqa: E731
    TORCH = {DataType.FLOAT32: torch.float32, DataType.FLOAT16: torch.float16, DataType.INT32: torch.int32}
    x = (torch.randn(SHAPE, device=dev) * 100).round()      # integers as floats: exact in every type here
    n, c, h, w = SHAPE
    halves = [x[:, :c // 2].contiguous(), x[:, c // 2:].contiguous()]
    backend = cb.CudaBackend(torch.cuda.current_device())
    stream = lambda: torch.cuda.current_stream().cuda_stream  # noqa: E731

    copy_out = torch.empty_like(x)
    for _ in range(500):                # ~0.1 s of copies first: clocks up before anything is timed
        copy_out.copy_(x)
    t_copy = timed(lambda: copy_out.copy_(x), args.reps, torch)
    copy_bw = 2 * x.nbytes / (t_copy * 1e-3) / 1e9
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  copy {copy_bw:.0f} GB/s "
          f"({t_copy:.3f} ms for 256 MiB)")

    rows = []

    only = [a for a in args.only.split(",") if a]

    def row(name, desc, inputs, torch_fn=None, torch_name="", variant=None):
        """``variant``: backend module settings for this row (a fresh backend:
        the variant is built), e.g. {"FUSE_PAD": "rows"}."""
        if only and not any(a in name for a in only):
            return
        plan = desc.lower()
        outs = [torch.empty(tuple(t.sizes), dtype=TORCH[t.data_type], device=dev) for t in desc.outputs]
        old = {k: getattr(cs, k) for k in (variant or {})}
        try:
            for k, v in (variant or {}).items():
                setattr(cs, k, v)
            be = cb.CudaBackend(torch.cuda.current_device()) if variant else backend
            sp, dp = [t.data_ptr() for t in inputs], [t.data_ptr() for t in outs]
            rec = be.record_move(plan, sp, [t.numel() for t in inputs], dp, [t.numel() for t in outs],
                                 desc.OPERATOR)
        finally:
            for k, v in old.items():
                setattr(cs, k, v)
        ours = lambda: rec(sp, dp, stream())  # noqa: E731
        if torch_fn is not None:
            ref = torch_fn()
            t_odml, t_torch = timed_pair(ours, torch_fn, args.reps, torch)
        else:
            t_odml = timed(ours, args.reps, torch)
        nbytes = sum(t.nbytes for t in inputs) + sum(t.nbytes for t in outs)
        r = {"op": name, "opendml_ms": t_odml, "bytes": nbytes, "kernels": rec.names,
             "opendml_fraction_of_copy": nbytes / (t_odml * 1e-3) / 1e9 / copy_bw}
        if torch_fn is not None:
            refs = ref if isinstance(ref, (list, tuple)) else [ref]
            r.update(torch=torch_name, torch_ms=t_torch,
                     torch_fraction_of_copy=nbytes / (t_torch * 1e-3) / 1e9 / copy_bw,
                     speedup_vs_torch=t_torch / t_odml,
                     match=all(torch.equal(a, b) for a, b in zip(outs, refs)))
        if variant:                           # a variant: compare with the default route's output too
            outs2 = [torch.empty_like(t) for t in outs]
            backend.record_move(plan, sp, [t.numel() for t in inputs], [t.data_ptr() for t in outs2],
                                [t.numel() for t in outs2], desc.OPERATOR)(sp, [t.data_ptr() for t in outs2],
                                                                          stream())
            r["match_default"] = all(torch.equal(a, b) for a, b in zip(outs, outs2))
            del outs2
        rows.append(r)
        tr = (f"{r['torch_ms']:8.3f} ms {r['torch_fraction_of_copy']:5.2f}  x{r['speedup_vs_torch']:4.2f} "
              f"match={r['match']}  [{torch_name}]") if torch_fn else ""
        tr += f" match_default={r['match_default']}" if "match_default" in r else ""
        print(f"{name:34s} opendml {t_odml:8.3f} ms {r['opendml_fraction_of_copy']:5.2f}   torch {tr}  "
              f"{rec.names[0].split(',')[0]}...", flush=True)
        del outs

    X = TD(f32, SHAPE)
    row("identity", ElementWiseIdentityOperatorDesc(X), [x], lambda: x.clone(), "clone")
    row("identity scale 2 bias 1", ElementWiseIdentityOperatorDesc(X, None, ScaleBias(2.0, 1.0)), [x],
        lambda: x * 2 + 1, "x * 2 + 1")
    cvt_variants = [{"CVT_UNROLL": u, "CVT_FLAGS": f}
                    for u, f in ((0, 0), (1, 0), (2, 0), (4, 0), (2, 2))
                    if (u, f) != (cs.CVT_UNROLL, cs.CVT_FLAGS)]
    if args.variants:
        for v in cvt_variants:
            row(f"identity scale 2 bias 1 [cvt {v['CVT_UNROLL']} {v['CVT_FLAGS']}]",
                ElementWiseIdentityOperatorDesc(X, None, ScaleBias(2.0, 1.0)), [x], lambda: x * 2 + 1,
                "x * 2 + 1", variant=v)
    for dt in (DataType.FLOAT16, DataType.INT32):
        cast = CastOperatorDesc(X, TD(dt, SHAPE))
        row(f"cast float32->{dt.name.lower()}", cast, [x], lambda dt=dt: x.to(TORCH[dt]), f".to({TORCH[dt]})")
        if args.variants:
            for v in cvt_variants:
                row(f"cast float32->{dt.name.lower()} [cvt {v['CVT_UNROLL']} {v['CVT_FLAGS']}]", cast, [x],
                    lambda dt=dt: x.to(TORCH[dt]), f".to({TORCH[dt]})", variant=v)
            row(f"cast float32->{dt.name.lower()} (again)", cast, [x], lambda dt=dt: x.to(TORCH[dt]),
                f".to({TORCH[dt]})")
    modes = [(PaddingMode.CONSTANT, "constant"), (PaddingMode.EDGE, "replicate"),
             (PaddingMode.REFLECTION, "reflect"), (PaddingMode.WRAP, "circular"), (PaddingMode.SYMMETRIC, None)]
    for mode, tm in modes:
        desc = PaddingOperatorDesc(X, None, mode, 0.0, [0, 0, 1, 1], [0, 0, 1, 1])
        fn = (lambda tm=tm: F.pad(x, (1, 1, 1, 1), mode=tm)) if tm else None
        row(f"pad {mode.name}", desc, [x], fn, f"F.pad {tm}" if tm else "")
        if args.variants:
            row(f"pad {mode.name} (move_pad rows)", desc, [x], fn, f"F.pad {tm}" if tm else "",
                variant={"FUSE_PAD": "rows"})
            for pw in ((1, 1), (1, 8), (2, 6)):
                if pw != cs.PAD_WORDS:
                    row(f"pad {mode.name} (words {pw[0]} {pw[1]})", desc, [x], fn,
                        f"F.pad {tm}" if tm else "", variant={"FUSE_PAD": "words", "PAD_WORDS": pw})
            if mode == PaddingMode.CONSTANT:
                row(f"pad {mode.name} (pass by pass)", desc, [x], None, variant={"FUSE_PAD": False})
                row(f"pad {mode.name} (fused move_vec)", desc, [x], None, variant={"FUSE_PAD": True})
    half = TD(f32, (n, c // 2, h, w))
    row("join 2 on axis 1", JoinOperatorDesc([half, half], None, 1), halves, lambda: torch.cat(halves, 1),
        "torch.cat")
    row("split 2 on axis 1", SplitOperatorDesc(X, [half, half], 1), [x],
        lambda: [t.contiguous() for t in torch.split(x, c // 2, 1)], "torch.split + contiguous")
    tile = TileOperatorDesc(X, None, [1, 1, 2, 2])
    row("tile (1, 1, 2, 2)", tile, [x], lambda: x.repeat(1, 1, 2, 2), "Tensor.repeat")
    s2d = SpaceToDepth1OperatorDesc(X, None, 2, DepthSpaceOrder.COLUMN_ROW_DEPTH)
    row("space_to_depth 2 CRD", s2d, [x], lambda: F.pixel_unshuffle(x, 2), "F.pixel_unshuffle")
    d2s_in = TD(f32, (n, c * 4, h // 2, w // 2))
    xd = x.reshape(n, c * 4, h // 2, w // 2)
    d2s = DepthToSpace1OperatorDesc(d2s_in, None, 2, DepthSpaceOrder.COLUMN_ROW_DEPTH)
    row("depth_to_space 2 CRD", d2s, [xd], lambda: F.pixel_shuffle(xd, 2), "F.pixel_shuffle")
    s2d_dcr = SpaceToDepth1OperatorDesc(X, None, 2, DepthSpaceOrder.DEPTH_COLUMN_ROW)
    d2s_dcr = DepthToSpace1OperatorDesc(d2s_in, None, 2, DepthSpaceOrder.DEPTH_COLUMN_ROW)
    row("space_to_depth 2 DCR", s2d_dcr, [x])
    row("depth_to_space 2 DCR", d2s_dcr, [xd])
    if args.variants:
        for via in ("strided_copy", "move"):
            v = {"MOVE_PLAIN_VIA": via}
            row(f"tile (1, 1, 2, 2) [{via}]", tile, [x], None, variant=v)
            row(f"space_to_depth 2 CRD [{via}]", s2d, [x], None, variant=v)
            row(f"depth_to_space 2 CRD [{via}]", d2s, [xd], None, variant=v)
            row(f"depth_to_space 2 DCR [{via}]", d2s_dcr, [xd], None, variant=v)

    t_copy2 = timed(lambda: copy_out.copy_(x), args.reps, torch)
    print(f"copy again at the end: {2 * x.nbytes / (t_copy2 * 1e-3) / 1e9:.0f} GB/s ({t_copy2:.3f} ms)")

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "shape": SHAPE,
            "copy_GBps": copy_bw, "copy_ms": t_copy, "copy_again_ms": t_copy2, "reps": args.reps,
            "numpy": np.__version__, "defaults": {"FUSE_PAD": cs.FUSE_PAD, "PAD_WORDS": cs.PAD_WORDS,
                                                  "CVT_UNROLL": cs.CVT_UNROLL, "CVT_FLAGS": cs.CVT_FLAGS},
            "timing": "CUDA events, median of --reps; rows with a PyTorch peer alternate the two rep by rep",
            "route": "CudaBackend.record_move on torch tensors' addresses, torch's current stream"}
    (out / "gpu-family.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        base = [r for r in rows if "[" not in r["op"] and "(" not in r["op"].replace("(1, 1, 2, 2)", "")]
        fig, ax = plt.subplots(figsize=(11, 5))
        ix = np.arange(len(base))
        ax.bar(ix - 0.2, [r["opendml_fraction_of_copy"] for r in base], 0.4, label="opendml")
        ax.bar(ix + 0.2, [r.get("torch_fraction_of_copy", 0) for r in base], 0.4, label="PyTorch")
        ax.axhline(0.9, color="k", lw=0.8, ls="--")
        ax.set_xticks(ix, [r["op"] for r in base], rotation=60, ha="right", fontsize=8)
        ax.set_ylabel(f"fraction of copy bandwidth ({copy_bw:.0f} GB/s)")
        ax.set_title(f"data-movement family, 256 MiB float32, {meta['device']}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "gpu-family.png", dpi=110)
    except Exception as exc:  # matplotlib absent: the JSON holds everything
        print(f"no PNG: {exc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
