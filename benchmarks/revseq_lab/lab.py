"""Lab for issue 32's reverse_subsequences target on the GPU: the production
kernels (through ``dml.reverse_subsequences``) beside the candidate kernels
of lab.cu, lab_wide.cu and lab_halves.cu (compiled by NVRTC through CuPy;
lab_wide.cu, the session-18 walks, clusters and 256-byte sets, and
lab_halves.cu, session 22's whole tiles, halves and store widths along axes
0 and 1, as modules appended to lab.cu), on a (512, 256, 512) float32
tensor, as fractions of the device's
copy bandwidth (bytes read + written; the read-only and write-only rows: the
256 MiB one side moves).

    python benchmarks/revseq_lab/lab.py --out DIR            # timings, lab.json
    python benchmarks/revseq_lab/lab.py --only 'prod0|walk'  # the rows a regular expression finds
    ncu ... python benchmarks/revseq_lab/lab.py --profile 'K1;K2;...'   # one launch each

Each candidate's output is checked equal to a ``torch.gather`` reference
built from the lengths (as benchmarks/gpu_index.py builds it); each time is
the median over --reps of 5 back-to-back calls between CUDA events after two
warm-up loops. Axis 0: a uint32 length a column (lengths (1, 256, 512),
random in [0, 512]); axis 1: lengths (512, 1, 512) in [0, 256]; axis 2: a
length a row (lengths (512, 256, 1)).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "src"))
LOOP = 5
P, R, C = 512, 256, 512

# (label, kernel, axis, threads, shared bytes, grid: "units" or blocks a multiprocessor, extra)
A0_SMEM = P * 128
CANDS = [
    ("a0_single", "cand_a0_single", 0, 256, A0_SMEM, "units", {}),
    ("a0_single_first3960", "cand_a0_single", 0, 256, A0_SMEM, "units", {"units": 3960}),
    ("a0_single_swz", "cand_a0_single_swz", 0, 256, A0_SMEM, "units", {}),
    ("a0_single_rowmajor", "cand_a0_single_rowmajor", 0, 256, A0_SMEM, "units", {}),
    ("a0_single_cs", "cand_a0_single_cs", 0, 256, A0_SMEM, "units", {}),
    ("a0_single_vec", "cand_a0_single_vec", 0, 256, A0_SMEM, "units", {}),
    ("a0_single_ef_cs", "cand_a0_single_ef_cs", 0, 256, A0_SMEM, "units", {}),
    ("a0_single_512", "cand_a0_single_512", 0, 512, A0_SMEM, "units", {}),
    ("a0_pipe_1024x3", "cand_a0_pipe_1024x3", 0, 1024, 3 * A0_SMEM, 1, {}),
    ("a0_pipe_1024x3_vec", "cand_a0_pipe_1024x3_vec", 0, 1024, 3 * A0_SMEM, 1, {}),
    ("a0_pipe_1024x3_cs", "cand_a0_pipe_1024x3_cs", 0, 1024, 3 * A0_SMEM, 1, {}),
    ("a0_pipe_512x3", "cand_a0_pipe_512x3", 0, 512, 3 * A0_SMEM, 1, {}),
    ("a0_pipe_256x3", "cand_a0_pipe_256x3", 0, 256, 3 * A0_SMEM, 1, {}),
    ("a0_pipe_256x1 (3/SM)", "cand_a0_pipe_256x1", 0, 256, A0_SMEM, 3, {}),
    ("a0_pipe_512x1 (3/SM)", "cand_a0_pipe_512x1", 0, 512, A0_SMEM, 3, {}),
    ("a0_pipe_256x1 (6/SM: 2 waves of slots)", "cand_a0_pipe_256x1", 0, 256, A0_SMEM, 6, {}),
]
CANDS += [                                     # diagnostics: the output is the input (expect "copy")
    ("a0_single_copy (staged, not reversed)", "cand_a0_single_copy", 0, 256, A0_SMEM, "units", {"expect": "copy"}),
    ("a0_walk_copy (same lines, no staging)", "cand_a0_walk_copy", 0, 256, 0, "units", {"expect": "copy"}),
    ("copy16 (contiguous 16-byte copy)", "cand_copy16", 0, 256, 0, 8, {"expect": "copy"}),
]
# Session 18 (lab_wide.cu): walks of wider lines a plane, the read and write halves, clusters, smem + registers.
NB = P * R * C * 4
W = {"module": "wide"}
for wb, v, pch in ((128, 4, 512), (256, 4, 256), (512, 4, 128), (1024, 4, 64), (128, 16, 512), (256, 16, 256),
                   (512, 16, 128), (1024, 16, 64), (2048, 16, 32)):
    CANDS.append((f"walk {wb} B a plane, {v}-byte lanes, 64 KiB a block", f"w_walk_{wb}_v{v}", 0, 256, 0, "units",
                  {**W, "expect": "copy", "blocks": NB // (wb * pch)}))
for wb, v, t in ((256, 4, 512), (512, 16, 512), (1024, 16, 1024), (2048, 16, 1024)):
    CANDS.append((f"walk {wb} B a plane, every plane a block ({t} thr)", f"w_walkall_{wb}_v{v}", 0, t, 0, "units",
                  {**W, "expect": "copy", "blocks": NB // (wb * P)}))
for kind in ("read", "write"):
    for what in ("128", "2048", "cont"):
        CANDS.append((f"{kind} only, {what}", f"w_{kind}_{what}", 0, 256, 0, "units",
                      {**W, "nocheck": True, "nbytes": NB, "blocks": NB // 65536}))
for name, t in (("w_cl2_colaunch", 256), ("w_cl2_lock", 256), ("w_cl4_lock", 256), ("w_cl2_lock_512", 512),
                ("w_cl2_dsw", 256), ("w_cl4_dsw", 256), ("w_cl2_dsrw", 256), ("w_cl4_dsrw", 256)):
    CANDS.append((name[2:], name, 0, t, A0_SMEM, "units", dict(W)))
for name, t in (("w_t256_v16_1024", 1024), ("w_t256_v16_512", 512), ("w_t256_v16_256", 256), ("w_t256_v4_1024", 1024)):
    CANDS.append((name[2:], name, 0, t, P * 256, "units", {**W, "blocks": NB // (256 * P)}))
for name, t in (("w_t256_ring_1024", 1024), ("w_t256_ring_512", 512)):   # persistent: a block a multiprocessor
    CANDS.append((name[2:], name, 0, t, 896 * 256, 1, dict(W)))
CANDS.append(("hyb256 (smem + registers, 256 B a plane)", "w_hyb256", 0, 512, A0_SMEM, "units",
              {**W, "blocks": NB // (256 * P)}))
# Session 22 (lab_halves.cu): column sets as (O, P, n) planes, whole tiles or halves (two blocks a set).
HV = {"module": "halves", "hv": True}
for name, lw, h, smem_rows in (("hv_full32_sv1", 32, 1, P), ("hv_full32_sv1_512", 32, 1, P),
                               ("hv_half64_sv1_ag0", 64, 2, P // 2), ("hv_half64_sv1", 64, 2, P // 2),
                               ("hv_half64_sv2", 64, 2, P // 2), ("hv_half64_sv4", 64, 2, P // 2),
                               ("hv_half64_sv2_512", 64, 2, P // 2), ("hv_half32_sv1", 32, 2, P // 2),
                               ("hv_half64_sv1_6", 64, 2, P // 2), ("hv_full32_sv1_rot43", 32, 1, P),
                               ("hv_full32_sv1_rot1", 32, 1, P), ("hv_half64_sv1_rot23", 64, 2, P // 2),
                               ("hv_half64_sv1_rot1", 64, 2, P // 2), ("hv_full32_sv2", 32, 1, P),
                               ("hv_full64_sv2_512", 64, 1, P), ("hv_full64_sv2_1024", 64, 1, P),
                               ("hv_full64_sv1_1024", 64, 1, P)):
    threads = 1024 if name.endswith("_1024") else 512 if name.endswith("_512") else 256
    CANDS.append((f"a0 {name[3:]}", name, 0, threads, smem_rows * lw * 4, "units", {**HV, "lw": lw, "h": h}))
for name, lw, h, smem_rows in (("hv_full64_sv1", 64, 1, R), ("hv_full64_sv2", 64, 1, R), ("hv_full64_sv4", 64, 1, R),
                               ("hv_full32_sv1_6", 32, 1, R), ("hv_half128_sv1", 128, 2, R // 2),
                               ("hv_half128_sv2", 128, 2, R // 2), ("hv_half128_sv4", 128, 2, R // 2),
                               ("hv_half64_sv1", 64, 2, R // 2), ("hv_half64_sv2", 64, 2, R // 2),
                               ("hv_half32_sv1", 32, 2, R // 2), ("hv_full32_sv2", 32, 1, R)):
    CANDS.append((f"a1 {name[3:]}", name, 1, 256, smem_rows * lw * 4, "units", {**HV, "lw": lw, "h": h}))
for rows in (8, 16, 24):
    CANDS.append((f"r_single {rows} rows", "cand_r_single", 2, 256, rows * C * 4, "units", {"rows": rows}))
    CANDS.append((f"r_single_vec {rows} rows", "cand_r_single_vec", 2, 256, rows * C * 4, "units", {"rows": rows}))
CANDS += [
    ("r_single_cs 16 rows", "cand_r_single_cs", 2, 256, 16 * C * 4, "units", {"rows": 16}),
    ("r_single_vec_cs 16 rows", "cand_r_single_vec_cs", 2, 256, 16 * C * 4, "units", {"rows": 16}),
    ("r_pipe_1024x3 16 rows (2/SM)", "cand_r_pipe_1024x3", 2, 1024, 3 * 16 * C * 4, 2, {"rows": 16}),
    ("r_pipe_1024x3_vec 16 rows (2/SM)", "cand_r_pipe_1024x3_vec", 2, 1024, 3 * 16 * C * 4, 2, {"rows": 16}),
    ("r_pipe_1024x3_vec 8 rows (2/SM)", "cand_r_pipe_1024x3_vec", 2, 1024, 3 * 8 * C * 4, 2, {"rows": 8}),
    ("r_pipe_512x3_vec 16 rows (2/SM)", "cand_r_pipe_512x3_vec", 2, 512, 3 * 16 * C * 4, 2, {"rows": 16}),
    ("r_pipe_512x3_vec 8 rows (4/SM)", "cand_r_pipe_512x3_vec", 2, 512, 3 * 8 * C * 4, 4, {"rows": 8}),
    ("r_pipe_256x2_vec 16 rows (3/SM)", "cand_r_pipe_256x2_vec", 2, 256, 2 * 16 * C * 4, 3, {"rows": 16}),
    ("r_pipe_256x4_vec 8 rows (3/SM)", "cand_r_pipe_256x4_vec", 2, 256, 4 * 8 * C * 4, 3, {"rows": 8}),
    ("r_pipe_256x2_vec 8 rows (6/SM)", "cand_r_pipe_256x2_vec", 2, 256, 2 * 8 * C * 4, 6, {"rows": 8}),
]


def timed(fn, reps, torch):
    """Median ms a call: reps x (LOOP calls between CUDA events), after 2 warm-up loops."""
    for _ in range(2 * LOOP):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(LOOP):
            fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / LOOP)
    return statistics.median(ts), min(ts), max(ts)


def setup():
    import cupy
    import numpy as np
    import torch
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(P, R, C, device=dev, generator=g)
    len0 = torch.randint(0, P + 1, (1, R, C), device=dev, generator=g)
    len2 = torch.randint(0, C + 1, (P, R, 1), device=dev, generator=g)
    len1 = torch.randint(0, R + 1, (P, 1, C), device=dev, generator=g)
    code = (HERE / "lab.cu").read_text()
    module = {"lab": cupy.RawModule(code=code, options=("-std=c++17",)),
              "wide": cupy.RawModule(code=code + (HERE / "lab_wide.cu").read_text(), options=("-std=c++17",)),
              "halves": cupy.RawModule(code=code + (HERE / "lab_halves.cu").read_text(), options=("-std=c++17",))}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    return cupy, np, torch, x, len0, len1, len2, module, sms


def launcher(cand, cupy, np, torch, x, lens, module, sms):
    """(fn writing the reversal into a fresh-per-lab output, output tensor, grid, units)."""
    label, kname, axis, threads, smem, grid, extra = cand
    k = module[extra.get("module", "lab")].get_function(kname)
    if smem > 48 * 1024:
        k.max_dynamic_shared_size_bytes = smem
    out = torch.empty_like(x)
    src, dst, ln = (np.uint64(t.data_ptr()) for t in (x, out, lens))
    if extra.get("hv"):                        # (O, P, n) planes: axis 0 (1, P, R x C), axis 1 (P, R, C)
        o_, p_, n_ = (1, P, R * C) if axis == 0 else (P, R, C)
        units = blocks = o_ * (n_ // extra["lw"]) * extra["h"]
        args = (src, dst, ln, np.int32(o_), np.int32(p_), np.uint64(n_))
    elif axis == 0:
        n = R * C
        units = extra.get("units", n // 32)
        blocks = extra.get("blocks", units if grid == "units" else min(units, sms * grid))
        args = (src, dst, ln, np.uint64(n), np.int32(P))
    else:
        nrows, rows = P * R, extra["rows"]
        units = -(-nrows // rows)
        blocks = units if grid == "units" else min(units, sms * grid)
        args = (src, dst, ln, np.int32(C), np.uint64(nrows), np.int32(rows))

    def fn():
        k((blocks,), (threads,), args, shared_mem=smem)
    return fn, out, blocks, units


def reference(torch, x, n, axis):
    e = torch.arange(x.shape[axis], device=x.device).reshape([-1 if d == axis else 1 for d in range(3)])
    return torch.gather(x, axis, torch.where(e < n, n - 1 - e, e).expand(x.shape).contiguous())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/revseq_lab")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--profile", default="", help="labels (prod0, prod2, candidates) separated by ';': one launch each")
    ap.add_argument("--only", default="", help="a regular expression: only the rows (prod0, prod2, labels) it finds")
    args = ap.parse_args(argv)
    cupy, np, torch, x, len0, len1, len2, module, sms = setup()
    import opendml as dml
    l0, l1, l2 = len0.to(torch.uint32), len1.to(torch.uint32), len2.to(torch.uint32)
    lens = {0: l0, 1: l1, 2: l2}
    prods = {"prod0": lambda: dml.reverse_subsequences(x, l0, 0), "prod1": lambda: dml.reverse_subsequences(x, l1, 1),
             "prod2": lambda: dml.reverse_subsequences(x, l2, 2)}
    by_label = {c[0]: c for c in CANDS}
    if args.profile:
        for name in args.profile.split(";"):
            if name in prods:
                prods[name]()
            else:
                c = by_label[name]
                launcher(c, cupy, np, torch, x, lens[c[2]], module, sms)[0]()
        torch.cuda.synchronize()
        return 0
    name = torch.cuda.get_device_name()
    copy_out = torch.empty_like(x)
    t_copy = timed(lambda: copy_out.copy_(x), args.reps, torch)
    copy_bw = 2 * x.nbytes / (t_copy[0] * 1e-3) / 1e9
    big = torch.empty(256, 1024, 1024, device=x.device)
    big_out = torch.empty_like(big)
    t_big = timed(lambda: big_out.copy_(big), args.reps, torch)
    big_bw = 2 * big.nbytes / (t_big[0] * 1e-3) / 1e9
    del big, big_out
    print(f"device {name} ({sms} SMs), torch {torch.__version__}, cupy {cupy.__version__}: copy of 256 MiB "
          f"{t_copy[0]:.4f} ms = {copy_bw:.0f} GB/s; of 1 GiB {t_big[0]:.4f} ms = {big_bw:.0f} GB/s", flush=True)
    moved = {0: 2 * x.nbytes + l0.nbytes, 1: 2 * x.nbytes + l1.nbytes, 2: 2 * x.nbytes + l2.nbytes}
    want = {0: reference(torch, x, len0, 0), 1: reference(torch, x, len1, 1), 2: reference(torch, x, len2, 2)}
    rows = []

    def record(label, axis, fn, out_of, kernel, grid=None, check=True, expect=None, nbytes=None):
        got = out_of()
        ok = bool(torch.equal(got, want[axis] if expect is None else expect)) if check else None
        t = timed(fn, args.reps, torch)
        frac = (nbytes or moved[axis]) / (t[0] * 1e-3) / 1e9 / copy_bw
        rows.append({"label": label, "kernel": kernel, "axis": axis, "ms": t[0], "ms_min": t[1], "ms_max": t[2],
                     "frac_copy": frac, "equal": ok, "grid": grid})
        print(f"axis {axis}  {label:42s} {t[0]:.4f} ms (min {t[1]:.4f}, max {t[2]:.4f})  {frac:.3f} of copy  "
              f"{(nbytes or moved[axis]) / (t[0] * 1e-3) / 1e9:.0f} GB/s  "
              f"equal={ok} grid={grid}", flush=True)

    import re
    keep = (lambda label: re.search(args.only, label) is not None) if args.only else (lambda label: True)
    for ax, key in ((0, "prod0"), (1, "prod1"), (2, "prod2")):
        if not keep(key):
            continue
        record(f"production ({key})", ax, prods[key], prods[key], "ix_reverse_tile" if ax < 2 else "ix_reverse_rows")
    from opendml.runtime import calls, get_backend
    from opendml.runtime.cuda import index as cuda_index
    for key, setting in [("prod2", {"REVERSE_ROWS": 16384}), ("prod2", {"REVERSE_ROWS": 65536}),
                         ("prod0", {"REVERSE_BYTES": 64}), ("prod1", {"REVERSE_BYTES": 128})]:
        ax = int(key[-1])
        if not keep(f"{key} {setting}"):
            continue
        old = {k: getattr(cuda_index, k) for k in setting}
        get_backend("cuda:0")._launches.clear()
        calls.clear()
        for k, v in setting.items():
            setattr(cuda_index, k, v)
        try:
            record(f"production ({key}) {setting}", ax, prods[key], prods[key], f"ix_reverse_{'tile' if ax < 2 else 'rows'}")
        finally:
            for k, v in old.items():
                setattr(cuda_index, k, v)
            get_backend("cuda:0")._launches.clear()
            calls.clear()
    for dt in (torch.float64, torch.float16) if keep("prod2 dtypes") else ():   # rows of other word sizes
        xd = x.to(dt)
        wd = reference(torch, xd, len2, 2)
        fd = lambda: dml.reverse_subsequences(xd, l2, 2)  # noqa: E731
        record(f"production (prod2) {dt}", 2, fd, fd, "ix_reverse_rows", expect=wd, nbytes=2 * xd.nbytes + l2.nbytes)
        del xd, wd
    for c in CANDS:
        if not keep(c[0]):
            continue
        try:
            fn, out, blocks, units = launcher(c, cupy, np, torch, x, lens[c[2]], module, sms)
            fn()
            torch.cuda.synchronize()
            partial = "units" in c[6]
            record(c[0], c[2], fn, lambda: out, c[1], blocks, check=not partial and not c[6].get("nocheck"),
                   expect=x if c[6].get("expect") == "copy" else None, nbytes=c[6].get("nbytes"))
            del out
        except Exception as exc:                       # a candidate that fails to launch says so, the lab goes on
            print(f"axis {c[2]}  {c[0]:42s} FAILED {type(exc).__name__}: {exc}", flush=True)
            rows.append({"label": c[0], "kernel": c[1], "axis": c[2], "error": f"{type(exc).__name__}: {exc}"})
    t_copy2 = timed(lambda: copy_out.copy_(x), args.reps, torch)
    print(f"copy of 256 MiB again: {t_copy2[0]:.4f} ms = {2 * x.nbytes / (t_copy2[0] * 1e-3) / 1e9:.0f} GB/s")
    for ax in (0, 1, 2):
        ok = [r for r in rows if r["axis"] == ax and r.get("equal") and r["kernel"].startswith(("cand_", "w_", "hv_"))
              and "copy" not in r["kernel"] and "walk" not in r["kernel"]]
        if ok:
            b = min(ok, key=lambda r: r["ms"])
            print(f"best axis {ax}: {b['label']} {b['ms']:.4f} ms {b['frac_copy']:.3f}")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "lab.json").write_text(json.dumps({
        "device": name, "sms": sms, "torch": torch.__version__, "cupy": cupy.__version__,
        "copy_256MiB_ms": t_copy[0], "copy_GBps": copy_bw, "copy_1GiB_GBps": big_bw,
        "copy_256MiB_ms_after": t_copy2[0], "reps": args.reps, "loop": LOOP, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
