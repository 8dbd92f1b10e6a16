"""GPU benchmark of issue 33: the data-movement family on 256 MiB float32
tensors beside PyTorch's own op, as fractions of the device's measured copy
bandwidth, with the rows where the kernels were short on an H200: transposing
copies (an NCHW view of an NHWC tensor made contiguous and the reverse, a 5-D
permutation, space_to_depth / depth_to_space), paddings by 1, 3 and 5 in every
mode (output rows that are no multiple of 16 bytes), tiles with odd repeats,
and a slice window starting at column 1.

    python -m benchmarks.gpu_h200 [--out DIR] [--reps N] [--variants] [--only a,b] [--set NAME=INT]

Prints the device, its copy bandwidth (a 256 MiB device-to-device copy,
bytes read + written) and, per row, the shapes, opendml's time and fraction
of copy bandwidth beside PyTorch's. Two opendml columns:

* ``user``: the array API on PyTorch tensors (``dml.pad(x, ...)``), as a user
  calls it (its output allocated per call by PyTorch's caching allocator);
* ``kernel``: the CUDA backend's launch of the same plan
  (``CudaBackend.record_move`` on the tensors' addresses, PyTorch's current
  stream): the kernels alone.

Each time is the median over --reps of ``--loop`` back-to-back calls (5 by
default) between two CUDA events (divided by their number), so the host's cost
of one call hides behind the previous call's kernel as it does in a real
program, except the first call's, which the loop spreads over its calls (5
calls of a 0.14 ms kernel: about 5 us a call); opendml and
PyTorch alternate rep by rep. Outputs are compared with PyTorch's
(``match``). A row moving fewer bytes than the 256 MiB copy also times, in
the same alternation, a plain copy of the same traffic (``torch`` ``copy_`` of
half the row's bytes read + written: ``same copy``) and prints each column's
fraction of it too (``*_of_same`` in the JSON): how much of a short row's gap
is its size (the ramp and tail of a shorter kernel) rather than its kernel.
``--variants`` adds the backend's other routes for the same
rows (move_transpose tile sizes and off, move_padr's words a lane, register
caps and shuffles, move_padw, plain passes via strided_copy / move kernels).
Writes gpu-h200.json to --out.
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

LOOP = 5


def timed_pair(fns, reps: int, torch, loop: int | None = None) -> list:
    """Median milliseconds a call of each of ``fns`` (``loop`` calls, LOOP if
    not given, back to back between CUDA events), the functions alternating
    rep by rep, after 2 warm-up loops of each."""
    loop = LOOP if loop is None else loop
    for f in fns:
        for _ in range(2 * loop):
            f()
    torch.cuda.synchronize()
    out = [[] for _ in fns]
    for _ in range(reps):
        for f, ts in zip(fns, out):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(loop):
                f()
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b) / loop)
    return [statistics.median(ts) for ts in out]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/session13")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--variants", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--loop", type=int, default=5,
                    help="calls back to back between two events (the first call's host latency is spread over them)")
    ap.add_argument("--pad-default", default="", help="move_padr's settings for every row, 'U,MINB,FLAGS'")
    ap.add_argument("--pad-rows", default="",
                    help="move_padr settings to time with --variants, 'U,MINB,FLAGS;...' (default: a few)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=INT[,INT]",
                    help="a steps.py setting for every row (e.g. WORD_REPEAT=0,1), repeatable")
    args = ap.parse_args(argv)
    import torch
    import torch.nn.functional as F

    import opendml as dml
    import opendml.torch  # noqa: F401
    from opendml.model.data_type import DataType
    from opendml.ops import (DepthToSpace1OperatorDesc, ElementWiseIdentityOperatorDesc, PaddingOperatorDesc,
                             SliceOperatorDesc, SpaceToDepth1OperatorDesc, TileOperatorDesc)
    from opendml.ops._spec import DepthSpaceOrder, PaddingMode
    from opendml.plan import MovePlan
    from opendml.runtime.cuda import backend as cb, steps as cs

    dev = torch.device("cuda")
    torch.manual_seed(0)
    f32 = DataType.FLOAT32
    only = [a for a in args.only.split(",") if a]
    global LOOP
    LOOP = args.loop
    if args.pad_default:
        cs.PAD_ROWS = tuple(int(a) for a in args.pad_default.split(","))
    for kv in args.set:
        k, v = kv.split("=")
        assert hasattr(cs, k), k
        setattr(cs, k, tuple(int(a) for a in v.split(",")) if "," in v else int(v))
    backend = cb.CudaBackend(torch.cuda.current_device())
    stream = lambda: torch.cuda.current_stream().cuda_stream  # noqa: E731

    x = torch.randn(16, 64, 256, 256, device=dev)
    copy_out = torch.empty_like(x)
    for _ in range(500):                # clocks up before anything is timed
        copy_out.copy_(x)
    t_copy, = timed_pair([lambda: copy_out.copy_(x)], args.reps, torch)
    copy_bw = 2 * x.nbytes / (t_copy * 1e-3) / 1e9
    name = torch.cuda.get_device_name()
    print(f"device: {name}  torch {torch.__version__}  copy {copy_bw:.0f} GB/s ({t_copy:.3f} ms for 256 MiB "
          f"read + 256 MiB written)", flush=True)
    rows = []

    def kernel_launch(desc, inputs, outs, variant=None):
        old = {k: getattr(cs, k) for k in (variant or {})}
        try:
            for k, v in (variant or {}).items():
                setattr(cs, k, v)
            be = cb.CudaBackend(torch.cuda.current_device()) if variant else backend
            sp, dp = [t.data_ptr() for t in inputs], [t.data_ptr() for t in outs]
            spans = [t.untyped_storage().nbytes() // t.element_size() for t in inputs]
            plan = desc.lower()
            rec = be.record_move(plan, sp, spans, dp, [t.numel() for t in outs])
        finally:
            for k, v in old.items():
                setattr(cs, k, v)
        return (lambda: rec(sp, dp, stream())), rec.names

    same_copies = {}

    def same_copy(nbytes):
        """A plain copy of nbytes // 2 bytes (nbytes read + written)."""
        if nbytes not in same_copies:
            a = torch.empty(nbytes // 2, dtype=torch.uint8, device=dev)
            b = torch.empty_like(a)
            same_copies[nbytes] = lambda: b.copy_(a)
        return same_copies[nbytes]

    def row(op, shape, user, peer, peer_name, desc=None, inputs=(), variants=()):
        if only and not any(a in op for a in only):
            return
        ref = peer()
        out = user()
        match = bool(torch.equal(out, ref))
        nbytes = sum(t.numel() * t.element_size() for t in inputs) + ref.nbytes if inputs else 2 * ref.nbytes
        fns = [user, peer]
        kern = None
        if desc is not None:
            kout = torch.empty_like(ref)
            kern, names = kernel_launch(desc, inputs, [kout])
            kern()
            match = match and bool(torch.equal(kout, ref))
            fns.append(kern)
        short = nbytes < 2 * x.nbytes
        if short:
            fns.append(same_copy(nbytes))
        ts = timed_pair(fns, args.reps, torch)
        frac = lambda t: nbytes / (t * 1e-3) / 1e9 / copy_bw  # noqa: E731
        r = {"op": op, "shape": shape, "bytes": nbytes, "user_ms": ts[0], "user_fraction": frac(ts[0]),
             "torch": peer_name, "torch_ms": ts[1], "torch_fraction": frac(ts[1]), "x_torch": ts[1] / ts[0],
             "match": match}
        if kern is not None:
            r.update(kernel_ms=ts[2], kernel_fraction=frac(ts[2]), kernels=names)
        same = ""
        if short:
            t_same = ts[-1]
            r.update(same_copy_ms=t_same, same_copy_fraction=frac(t_same), user_of_same=t_same / ts[0],
                     torch_of_same=t_same / ts[1])
            if kern is not None:
                r.update(kernel_of_same=t_same / ts[2])
            same = (f" | same copy {t_same:7.3f} ms {frac(t_same):5.2f}: user {r['user_of_same']:4.2f} kernel "
                    f"{r.get('kernel_of_same', float('nan')):4.2f} torch {r['torch_of_same']:4.2f} of it")
        rows.append(r)
        print(f"{op:40s} user {ts[0]:7.3f} ms {r['user_fraction']:5.2f} | kernel "
              f"{r.get('kernel_ms', float('nan')):7.3f} ms {r.get('kernel_fraction', float('nan')):5.2f} | "
              f"{peer_name} {ts[1]:7.3f} ms {r['torch_fraction']:5.2f} | x{r['x_torch']:4.2f} match={match} "
              f"{(names[0].split(',')[0] + '>') if kern else ''}{same}", flush=True)
        if args.variants and desc is not None:
            for v in variants:
                vout = torch.empty_like(ref)
                f, vnames = kernel_launch(desc, inputs, [vout], v)
                f()
                ok = bool(torch.equal(vout, ref))
                t, = timed_pair([f], args.reps, torch)
                rows.append({"op": op, "variant": {k: list(a) if isinstance(a, tuple) else a for k, a in v.items()},
                             "kernel_ms": t, "kernel_fraction": frac(t), "kernels": vnames, "match": ok,
                             **({"kernel_of_same": r["same_copy_ms"] / t} if short else {})})
                print(f"   [{' '.join(f'{k}={a}' for k, a in v.items())}] kernel {t:7.3f} ms {frac(t):5.2f} "
                      f"{f'({t_same / t:4.2f} of the same copy) ' if short else ''}match={ok} "
                      f"{vnames[0].split(',')[0]}>", flush=True)
                del vout

    def strided_desc(t):
        return ElementWiseIdentityOperatorDesc(dml.TensorDesc(f32, list(t.shape), list(t.stride())))

    tv = [{"TRANSPOSE_TILE": 0}, {"TRANSPOSE_TILE": 32}]
    # transposing copies
    nhwc = torch.randn(16, 256, 256, 64, device=dev)
    v = nhwc.permute(0, 3, 1, 2)
    row("identity NCHW view of NHWC", "(16,256,256,64).permute(0,3,1,2)", lambda: dml.identity(v),
        lambda: v.contiguous(), ".contiguous()", strided_desc(v), [nhwc], tv)
    v2 = x.permute(0, 2, 3, 1)
    row("identity NHWC view of NCHW", "(16,64,256,256).permute(0,2,3,1)", lambda: dml.identity(v2),
        lambda: v2.contiguous(), ".contiguous()", strided_desc(v2), [x], tv)
    # the ceiling of a 32 MiB move: a plain copy of that size, against the 256 MiB copy's bandwidth
    small, small_out = torch.randn(8 * 16 * 32 * 32 * 64, device=dev), torch.empty(8 * 16 * 32 * 32 * 64, device=dev)
    t_small, = timed_pair([lambda: small_out.copy_(small)], args.reps, torch)
    copy32 = 2 * small.nbytes / (t_small * 1e-3) / 1e9 / copy_bw
    print(f"copy of 32 MiB: {t_small:.4f} ms, {copy32:.2f} of the 256 MiB copy's bandwidth", flush=True)
    del small, small_out
    five = torch.randn(8, 16, 32, 32, 64, device=dev)
    v5 = five.permute(0, 4, 2, 1, 3)
    row("identity 5-D permuted view", "(8,16,32,32,64).permute(0,4,2,1,3)", lambda: dml.identity(v5),
        lambda: v5.contiguous(), ".contiguous()", strided_desc(v5), [five], tv)
    del five, v5
    five = torch.randn(8, 16, 64, 64, 64, device=dev)
    v5 = five.permute(0, 4, 2, 1, 3)
    row("identity 5-D permuted view 256 MiB", "(8,16,64,64,64).permute(0,4,2,1,3)", lambda: dml.identity(v5),
        lambda: v5.contiguous(), ".contiguous()", strided_desc(v5), [five], tv)
    del five, v5
    X = dml.TensorDesc(f32, list(x.shape))
    row("space_to_depth 2 CRD", "(16,64,256,256)", lambda: dml.space_to_depth(x, 2, "CRD"),
        lambda: F.pixel_unshuffle(x, 2), "F.pixel_unshuffle",
        SpaceToDepth1OperatorDesc(X, None, 2, DepthSpaceOrder.COLUMN_ROW_DEPTH), [x], tv)
    xd = x.reshape(16, 256, 128, 128)
    row("depth_to_space 2 CRD", "(16,256,128,128)", lambda: dml.depth_to_space(xd, 2, "CRD"),
        lambda: F.pixel_shuffle(xd, 2), "F.pixel_shuffle",
        DepthToSpace1OperatorDesc(dml.TensorDesc(f32, list(xd.shape)), None, 2, DepthSpaceOrder.COLUMN_ROW_DEPTH),
        [xd], tv)
    # paddings: rows of 256 + 2p floats (1,048 bytes for p = 3: no multiple of 16)
    rows_v = [tuple(int(a) for a in w.split(",")) for w in args.pad_rows.split(";") if w] or \
        [(2, 5, 0), (2, 6, 2), (2, 8, 2), (1, 8, 2)]
    pv = [{"FUSE_PAD": "padr", "PAD_ROWS": w} for w in rows_v if w != cs.PAD_ROWS] + \
        [{"FUSE_PAD": "words", "PAD_WORDS": (1, 8)}, {"FUSE_PAD": "rows"}, {"FUSE_PAD": True}, {"FUSE_PAD": False}]
    modes = [("constant", PaddingMode.CONSTANT, "constant"), ("edge", PaddingMode.EDGE, "replicate"),
             ("reflection", PaddingMode.REFLECTION, "reflect"), ("wrap", PaddingMode.WRAP, "circular"),
             ("symmetric", PaddingMode.SYMMETRIC, None)]
    for p in (1, 3, 5):
        for mname, mode, tm in modes:
            if tm is None:
                continue
            row(f"pad {p} {mname}", "(16,64,256,256)",
                lambda p=p, mname=mname: dml.pad(x, [0, 0, p, p], [0, 0, p, p], mode=mname),
                lambda p=p, tm=tm: F.pad(x, (p, p, p, p), mode=tm), f"F.pad {tm}",
                PaddingOperatorDesc(X, None, mode, 0.0, [0, 0, p, p], [0, 0, p, p]), [x],
                pv if (p == 3 or mname == "constant" or args.pad_rows) else pv[:1])
    # tiles
    s = torch.randn(16, 64, 128, 128, device=dev)
    S = dml.TensorDesc(f32, list(s.shape))
    tilev = [{"WORD_REPEAT": r} for r in ((0, 1), (1, 1), (2, 1), (1, 2)) if r != cs.WORD_REPEAT] + \
        [{"WORD_REPEAT": (0, 1), "WORD_COPY": u} for u in (1, 4) if u != cs.WORD_COPY]
    for t, T, tag in ((s, S, ""), (x, X, " 256 MiB")):        # the 64 MiB rows of earlier sessions, then 256 MiB
        for reps in ((1, 1, 2, 2), (1, 1, 3, 1), (1, 1, 1, 3), (1, 1, 3, 3)):
            row(f"tile {reps}{tag}", str(tuple(t.shape)).replace(" ", ""), lambda t=t, reps=reps: dml.tile(t, list(reps)),
                lambda t=t, reps=reps: t.repeat(*reps), "Tensor.repeat", TileOperatorDesc(T, None, list(reps)), [t],
                tilev)
    # a slice window starting at column 1 (rows of 255 floats)
    row("slice [:, :, :, 1:]", "(16,64,256,256)", lambda: dml.slice(x, [0, 0, 0, 1], [16, 64, 256, 255], [1, 1, 1, 1]),
        lambda: x[:, :, :, 1:].contiguous(), "[..., 1:].contiguous()",
        SliceOperatorDesc(X, None, [0, 0, 0, 1], [16, 64, 256, 255], [1, 1, 1, 1]), [x],
        [{"MOVE_PLAIN_VIA": "strided_copy"}])
    halves = [x[:, :32].contiguous(), x[:, 32:].contiguous()]
    from opendml.ops import JoinOperatorDesc, SplitOperatorDesc
    H = dml.TensorDesc(f32, [16, 32, 256, 256])
    row("join 2 on axis 1", "2 x (16,32,256,256)", lambda: dml.join(halves, 1), lambda: torch.cat(halves, 1),
        "torch.cat", JoinOperatorDesc([H, H], None, 1), halves)
    del halves

    t_copy2, = timed_pair([lambda: copy_out.copy_(x)], args.reps, torch)
    print(f"copy again at the end: {2 * x.nbytes / (t_copy2 * 1e-3) / 1e9:.0f} GB/s ({t_copy2:.3f} ms)")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"device": name, "torch": torch.__version__, "copy_GBps": copy_bw, "copy_ms": t_copy,
            "copy_again_ms": t_copy2, "copy_32MiB_ms": t_small, "copy_32MiB_fraction": copy32, "reps": args.reps,
            "loop": LOOP,
            "defaults": {"PAD_ROWS": cs.PAD_ROWS, "PAD_WORDS": cs.PAD_WORDS, "TRANSPOSE_TILE": cs.TRANSPOSE_TILE,
                         "FUSE_PAD": cs.FUSE_PAD,
                         "WORD_COPY": cs.WORD_COPY, "WORD_REPEAT": cs.WORD_REPEAT},
            "timing": f"CUDA events around {LOOP} back-to-back calls, median of --reps, opendml and PyTorch "
                      f"alternating"}
    same_copies.clear()
    (out / "gpu-h200.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
