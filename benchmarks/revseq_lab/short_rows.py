"""Lab for reverse_subsequences along short rows (issue 32): what a copy of
the same traffic reaches on this device, beside production and a thread a
row. (4096, 4096, 8) float32, a uint32 length a row (lengths (4096, 4096,
1), random in [0, 8]): 512 MiB read, 512 MiB written, 64 MiB of lengths
read. Rows, each as a fraction of a 1 GiB ``copy_``'s bandwidth (bytes read
+ written, the lengths included):

* ``copy_``: ``torch`` copying the 512 MiB alone (no lengths);
* ``same traffic``: a thread a row loading its 32 bytes (two 16-byte loads)
  and its length, storing the 32 bytes unreversed (the length only decides a
  store no row takes): the access pattern of a reversal, no reversal;
* ``a thread a row``: the same with the eight words reversed below the
  length in registers (selects: a compare a pair, or a three-level select
  tree a word);
* ``two lanes a row``: a lane a 16-byte piece (each warp load 512
  contiguous bytes), the row's other piece by four shuffles, its four
  output words by select trees;
* ``production``: ``dml.reverse_subsequences`` (ix_reverse_pieces);
* then production on other short rows (float64 rows of 4, float16 of 16,
  float32 of 12 and 28 words, float32 rows of 8 under leading axes
  transposed), each beside ``torch.flip`` of the same tensor.

Every output is checked against ``torch.gather``. Needs CUDA, CuPy and
PyTorch.

    python benchmarks/revseq_lab/short_rows.py [--reps 7] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "src"))

SOURCE = r"""
typedef unsigned int u32;
extern "C" __global__ void __launch_bounds__(256) same_traffic(const uint4* __restrict__ x, const u32* __restrict__ n,
                                                               uint4* __restrict__ y, long long rows) {
    long long r = (long long)blockIdx.x * 256 + threadIdx.x;
    if (r >= rows) return;
    uint4 a = x[2 * r], b = x[2 * r + 1];
    u32 len = n[r];
    if (len == 0xffffffffu) { a.x = len; }       // never (lengths are at most 8): keeps the load
    y[2 * r] = a;
    y[2 * r + 1] = b;
}
extern "C" __global__ void __launch_bounds__(256) thread_row(const uint4* __restrict__ x, const u32* __restrict__ n,
                                                             uint4* __restrict__ y, long long rows) {
    long long r = (long long)blockIdx.x * 256 + threadIdx.x;
    if (r >= rows) return;
    uint4 a = x[2 * r], b = x[2 * r + 1];
    int len = (int)min(n[r], 8u);
    u32 w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w}, o[8];
#pragma unroll
    for (int k = 0; k < 8; k++) {
        u32 v = w[k];
#pragma unroll
        for (int s = 0; s < 8; s++) v = (k < len && s == len - 1 - k) ? w[s] : v;
        o[k] = v;
    }
    y[2 * r] = make_uint4(o[0], o[1], o[2], o[3]);
    y[2 * r + 1] = make_uint4(o[4], o[5], o[6], o[7]);
}
__device__ __forceinline__ u32 pick8(const u32* w, int i) {   // w[i], i in [0, 8): a three-level select tree
    const u32 a = (i & 1) ? w[1] : w[0], b = (i & 1) ? w[3] : w[2], c = (i & 1) ? w[5] : w[4], d = (i & 1) ? w[7] : w[6];
    const u32 e = (i & 2) ? b : a, f = (i & 2) ? d : c;
    return (i & 4) ? f : e;
}
extern "C" __global__ void __launch_bounds__(256) thread_row_mux(const uint4* __restrict__ x, const u32* __restrict__ n,
                                                                 uint4* __restrict__ y, long long rows) {
    long long r = (long long)blockIdx.x * 256 + threadIdx.x;
    if (r >= rows) return;
    uint4 a = x[2 * r], b = x[2 * r + 1];
    int len = (int)min(n[r], 8u);
    u32 w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w}, o[8];
#pragma unroll
    for (int k = 0; k < 8; k++) o[k] = k < len ? pick8(w, len - 1 - k) : w[k];
    y[2 * r] = make_uint4(o[0], o[1], o[2], o[3]);
    y[2 * r + 1] = make_uint4(o[4], o[5], o[6], o[7]);
}
extern "C" __global__ void __launch_bounds__(256) pair_mux(const uint4* __restrict__ x, const u32* __restrict__ n,
                                                           uint4* __restrict__ y, long long rows) {
    long long t = (long long)blockIdx.x * 256 + threadIdx.x;    // a lane a 16-byte piece, two a row
    const bool go = t < 2 * rows;
    const long long r = t >> 1;
    const int q = (int)(t & 1);
    uint4 a = go ? x[t] : make_uint4(0, 0, 0, 0);
    int len = go ? (int)min(n[r], 8u) : 0;
    uint4 b;
    b.x = __shfl_xor_sync(0xffffffffu, a.x, 1);
    b.y = __shfl_xor_sync(0xffffffffu, a.y, 1);
    b.z = __shfl_xor_sync(0xffffffffu, a.z, 1);
    b.w = __shfl_xor_sync(0xffffffffu, a.w, 1);
    if (!go) return;
    const uint4 lo = q ? b : a, hi = q ? a : b;
    u32 w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w}, o[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int k = 4 * q + i;
        o[i] = k < len ? pick8(w, len - 1 - k) : w[k];
    }
    y[t] = make_uint4(o[0], o[1], o[2], o[3]);
}
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import cupy
    import torch

    import opendml as dml
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)

    def timed(fn):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        out = []
        for _ in range(args.reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(5):
                fn()
            b.record()
            b.synchronize()
            out.append(a.elapsed_time(b) / 5)
        return statistics.median(out)

    big = torch.empty(1 << 28, device=dev)
    big_out = torch.empty_like(big)
    t_copy = timed(lambda: big_out.copy_(big))
    bw = 2 * big.nbytes / (t_copy * 1e-3)
    del big, big_out
    x = torch.randn(4096, 4096, 8, device=dev)
    n64 = torch.randint(0, 9, (4096, 4096, 1), device=dev, generator=g)
    n = n64.to(torch.uint32)
    e = torch.arange(8, device=dev)
    want = torch.gather(x, 2, torch.where(e < n64, n64 - 1 - e, e))
    y = torch.empty_like(x)
    mod = cupy.RawModule(code=SOURCE, options=("-std=c++17",))
    rows = x.numel() // 8
    grid = ((rows + 255) // 256,)
    cx, cn, cy = (cupy.from_dlpack(t) for t in (x, n, y))

    def kernel(name, lanes=1):
        k = mod.get_function(name)
        blocks = ((lanes * rows + 255) // 256,)
        return lambda: k(blocks, (256,), (cx, cn, cy, cupy.int64(rows)))

    moved = 2 * x.nbytes + n.nbytes
    result = {"device": torch.cuda.get_device_name(), "copy_GBps": bw / 1e9, "rows": []}
    print(f"device {result['device']}  copy {bw / 1e9:.0f} GB/s", flush=True)
    for label, fn, check in (
            ("copy_ (the 512 MiB alone)", lambda: y.copy_(x), None),
            ("same traffic, no reversal", kernel("same_traffic"), x),
            ("a thread a row", kernel("thread_row"), want),
            ("a thread a row, select tree", kernel("thread_row_mux"), want),
            ("two lanes a row, select tree", kernel("pair_mux", 2), want),
            ("production (dml.reverse_subsequences)", lambda: dml.reverse_subsequences(x, n, 2), want)):
        ms = timed(fn)
        nbytes = 2 * x.nbytes if check is None else moved
        got = fn()
        ok = True if check is None else bool(torch.equal(got if got is not None else y, check))
        result["rows"].append({"row": label, "ms": ms, "frac_copy": nbytes / (ms * 1e-3) / bw, "match": ok})
        print(f"{label:42s} {ms:.4f} ms  {nbytes / (ms * 1e-3) / bw:.3f} of copy  match={ok}", flush=True)
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            dml.reverse_subsequences(x, n, 2)
        torch.cuda.synchronize()
    per: dict = {}
    for e in prof.events():
        if str(getattr(e, "device_type", "")).endswith("CUDA"):
            per[e.name[:70]] = per.get(e.name[:70], 0.0) + e.time_range.elapsed_us() / 5
    result["production_kernels_us"] = per
    print("production's device work a call (us):", {k: round(v, 1) for k, v in per.items()}, flush=True)
    from opendml.runtime import calls, get_backend
    from opendml.runtime.cuda import index as cuda_index
    default = cuda_index.REVERSE_ROWS
    for per_block in (1024, 2048, 4096, 8192):       # production, 16-byte pieces a block (REVERSE_ROWS bytes)
        get_backend("cuda:0")._launches.clear()
        calls.clear()
        cuda_index.REVERSE_ROWS = per_block
        try:
            ms = timed(lambda: dml.reverse_subsequences(x, n, 2))
            ok = bool(torch.equal(dml.reverse_subsequences(x, n, 2), want))
        finally:
            cuda_index.REVERSE_ROWS = default
            get_backend("cuda:0")._launches.clear()
            calls.clear()
        label = f"production, REVERSE_ROWS={per_block}"
        result["rows"].append({"row": label, "ms": ms, "frac_copy": moved / (ms * 1e-3) / bw, "match": ok})
        print(f"{label:42s} {ms:.4f} ms  {moved / (ms * 1e-3) / bw:.3f} of copy  match={ok}", flush=True)
    del x, y, want, n, n64
    # production on the other short rows: 16-byte pieces of 2- and 8-byte words, rows of 3 and 7 pieces
    for shape, dtype, swap in (((4096, 4096, 4), torch.float64, False), ((4096, 4096, 16), torch.float16, False),
                               ((4096, 4096, 12), torch.float32, False), ((4096, 2048, 28), torch.float32, False),
                               ((4096, 4096, 8), torch.float32, True)):
        v = torch.randn(shape, device=dev).to(dtype)
        if swap:                                    # the leading axes transposed (rows still contiguous)
            v = v.transpose(0, 1)
        m64 = torch.randint(0, shape[-1] + 1, shape[:-1] + (1,), device=dev, generator=g)
        m = m64.to(torch.uint32)
        e = torch.arange(shape[-1], device=dev)
        ref = torch.gather(v, 2, torch.where(e < m64, m64 - 1 - e, e))
        ms = timed(lambda: dml.reverse_subsequences(v, m, 2))
        t_flip = timed(lambda: torch.flip(v, (2,)))
        ok = bool(torch.equal(dml.reverse_subsequences(v, m, 2), ref))
        nbytes = 2 * v.nbytes + m.nbytes
        label = f"production {tuple(shape)} {str(dtype).removeprefix('torch.')}{' (0, 1 swapped)' if swap else ''}"
        result["rows"].append({"row": label, "ms": ms, "frac_copy": nbytes / (ms * 1e-3) / bw, "match": ok,
                               "flip_ms": t_flip})
        print(f"{label:42s} {ms:.4f} ms  {nbytes / (ms * 1e-3) / bw:.3f} of copy  match={ok}  "
              f"torch.flip {t_flip:.4f} ms ({t_flip / ms:.2f}x)", flush=True)
        del v, m, m64, ref
    if args.out:
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "short-rows.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
