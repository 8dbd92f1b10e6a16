"""Lab for issue 33's short tile rows (session 23): TILE on a (16,64,128,128)
float32 input (64 MiB) and a (16,64,256,256) one (256 MiB), repeats (1,1,2,2),
(1,1,3,1), (1,1,1,3) and (1,1,3,3), through move_wcopy variants beside a
256 MiB device-to-device copy (cudaMemcpyAsync, bytes read + written) and a
copy of the row's own traffic, all alternating rep by rep in one process:

* ``old U=u``: the session-22 route (``WORD_REPEAT = (0, u)``): every output
  word a thread's work, each input word read once per repeat;
* ``rep R U=u``: ``WORD_REPEAT = (R, u)``: where the pass has 1 to R repeat
  dimensions, all of them out of the index space, each thread storing its u
  loaded words at every repeat (else the old route). (Session 23's first H200
  call ran this lab with an earlier rule: the outermost R repeat dimensions
  out, the others kept inside: its ``rep 1`` rows of (1,1,2,2) and (1,1,3,3)
  kept one repeat inside, which this rule no longer does);
* lab-only kernels (``lab_wcopy``, the same work as ``rep 2``): FL 1 streaming
  stores (``st.global.cs``), FL 2 a grid-stride loop over the blocks on a grid
  of ``k`` blocks a multiprocessor.

Each output is compared with ``cupy.tile``'s bit for bit. Prints one line per
variant: median ms of 5 back-to-back launches between two events over --reps,
fraction of the 256 MiB copy's bandwidth (row bytes: input + output) and of the
same-traffic copy's. Writes lab-tile-repeat.json to --out.

    python -m benchmarks.lab_tile_repeat [--out DIR] [--reps N]
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))

LAB = r'''
#include "move.cu"
// move_wcopy with NR repeat dimensions, FL & 1: streaming stores, FL & 2: a
// grid-stride loop over the blocks of the index space, FL & 4: registers
// capped for 8 resident blocks a multiprocessor.
template <int NDIM, typename I, int U, int NR, int FL>
__global__ void __launch_bounds__(256, (FL & 4) ? 8 : 1) lab_wcopy(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                                 const ODML_GRID_CONSTANT odml_move_params params) {
    const odml_move_params* __restrict__ p = &params;
    const I count = (I)p->count;
    const I per = (I)U * (I)blockDim.x;
    const I nblk = (FL & 2) ? (count + per - 1) / per : (I)blockIdx.x + 1;
    const odml_move_dim &r1 = p->dim[NR > 0 ? NDIM : 0], &r2 = p->dim[NR > 1 ? NDIM + 1 : 0];
    const i64 n1 = NR > 0 ? r1.size : 1, n2 = NR > 1 ? r2.size : 1;
    for (I blk = (I)blockIdx.x; blk < nblk; blk += (I)gridDim.x) {
        i64 so[U], dof[U];
        bool in[U];
#pragma unroll
        for (int j = 0; j < U; ++j) {
            I rest = (blk * (I)U + (I)j) * (I)blockDim.x + (I)threadIdx.x;
            in[j] = rest < count;
            so[j] = dof[j] = 0;
            if (!in[j]) continue;
            i64 a = p->src_offset, b = p->dst_offset;
#pragma unroll
            for (int d = NDIM - 1; d > 0; --d) {
                const odml_move_dim& q = p->dim[d];
                const I c = odml_split<I>(rest, q);
                a += (i64)c * q.src_stride;
                b += (i64)c * q.dst_stride;
            }
            so[j] = a + (i64)rest * p->dim[0].src_stride;
            dof[j] = b + (i64)rest * p->dim[0].dst_stride;
        }
        uint4 v[U];
#pragma unroll
        for (int j = 0; j < U; ++j)
            if (in[j]) v[j] = __ldg(src + so[j]);
        for (i64 a = 0; a < n1; ++a)
            for (i64 b = 0; b < n2; ++b) {
                const i64 o = (NR > 0 ? a * r1.dst_stride : 0) + (NR > 1 ? b * r2.dst_stride : 0);
#pragma unroll
                for (int j = 0; j < U; ++j)
                    if (in[j]) {
                        if (FL & 1) __stcs(dst + dof[j] + o, v[j]);
                        else dst[dof[j] + o] = v[j];
                    }
            }
    }
}
'''

TILES = ((1, 1, 3, 1), (1, 1, 2, 2), (1, 1, 1, 3), (1, 1, 3, 3))
SHAPES = ((16, 64, 128, 128), (16, 64, 256, 256))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/session23-tile")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--loop", type=int, default=5)
    args = ap.parse_args(argv)
    import cupy
    import numpy as np

    import opendml as dml
    from opendml.model.data_type import DataType
    from opendml.ops import TileOperatorDesc
    from opendml.runtime.cuda import launch as cl
    from opendml.runtime.cuda import steps as cs

    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    sms = int(props["multiProcessorCount"])
    f32 = DataType.FLOAT32

    def memcpy(dst, src):
        n = src.nbytes
        return lambda: cupy.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, n, 3, 0)

    def timed(fns):
        for f in fns:
            for _ in range(2 * args.loop):
                f()
        cupy.cuda.Device().synchronize()
        out = [[] for _ in fns]
        for _ in range(args.reps):
            for f, ts in zip(fns, out):
                a, b = cupy.cuda.Event(), cupy.cuda.Event()
                a.record()
                for _ in range(args.loop):
                    f()
                b.record()
                b.synchronize()
                ts.append(cupy.cuda.get_elapsed_time(a, b) / args.loop)
        return [statistics.median(ts) for ts in out]

    # the variants' launches (name, params, grid), planned with move_steps under each setting
    cases = []
    names = set()
    for shape in SHAPES:
        x = cupy.asarray(np.random.default_rng(0).standard_normal(shape, dtype=np.float32))
        for reps in TILES:
            plan = TileOperatorDesc(dml.TensorDesc(f32, list(shape)), None, list(reps)).lower()
            out_n = x.size * int(np.prod(reps))
            vs = []
            for label, R, U in [("old U=2 (session 22)", 0, 2), ("old U=1", 0, 1), ("old U=4", 0, 4),
                                ("rep 1 U=2", 1, 2), ("rep 2 U=1", 2, 1), ("rep 2 U=2", 2, 2),
                                ("rep 2 U=4", 2, 4)]:
                old = cs.WORD_REPEAT, cs.WORD_COPY
                cs.WORD_REPEAT, cs.WORD_COPY = (R, U), U
                try:
                    (kname, q, grid, *_), = cs.move_steps(plan, [x.data.ptr], [x.size], [0])
                finally:
                    cs.WORD_REPEAT, cs.WORD_COPY = old
                vs.append((label, kname, q, grid[0]))
                names.add(kname)
                if label == "rep 2 U=2":
                    base = kname[len("move_wcopy<"):-1]
                    for fl, k in ((0, None), (4, None), (1, None), (2, 8), (2, 16), (3, 8)):
                        ln = f"lab_wcopy<{base}, {fl}>"
                        names.add(ln)
                        g = grid[0] if k is None else min(grid[0], sms * k)
                        vs.append((f"lab FL={fl}" + (f" grid {k}/SM" if k else ""), ln, q, g))
            cases.append((shape, reps, x, out_n, vs))
    module = cupy.RawModule(code=LAB, options=cl.OPTIONS, name_expressions=tuple(sorted(names)))
    kernels = {n: cl.Kernel(module.get_function(n).kernel, n) for n in names}

    big = cupy.empty(64 * 2**20, cupy.float32)
    big_out = cupy.empty_like(big)
    copy256 = memcpy(big_out, big)
    for _ in range(300):
        copy256()
    t_copy, = timed([copy256])
    copy_bw = 2 * big.nbytes / (t_copy * 1e-3) / 1e9
    print(f"device: {name} ({sms} SMs)  copy {copy_bw:.0f} GB/s ({t_copy:.4f} ms for 256 MiB read + 256 MiB "
          f"written)", flush=True)
    rows = []
    for shape, reps, x, out_n, vs in cases:
        want = cupy.tile(x, reps).view(cupy.uint32)
        nbytes = 4 * (x.size + out_n)
        sa = cupy.empty(nbytes // 8, cupy.float32)
        sb = cupy.empty_like(sa)
        fns, outs = [copy256, memcpy(sb, sa)], []
        for label, kname, q, grid in vs:
            y = cupy.zeros(out_n, cupy.float32)
            k, qq = kernels[kname], cl.device_params(q)
            f = (lambda k=k, grid=grid, qq=qq, x=x, y=y: k((grid,), (cl.THREADS,), (x, y, qq)))
            f()
            outs.append(bool(cupy.array_equal(y.view(cupy.uint32), want.reshape(-1))))
            fns.append(f)
        ts = timed(fns)
        t256, tsame = ts[0], ts[1]
        bw = lambda t, nbytes=nbytes: nbytes / (t * 1e-3) / 1e9
        head = (f"tile {reps} of {shape}: {nbytes / 2**20:.0f} MiB moved; 256 MiB copy {t256:.4f} ms; same-traffic "
                f"copy {tsame:.4f} ms = {bw(tsame) / (2 * big.nbytes / (t256 * 1e-3) / 1e9):.3f} of the 256 MiB "
                f"copy's bandwidth")
        print(head, flush=True)
        for (label, kname, q, grid), t, ok in zip(vs, ts[2:], outs):
            f256 = bw(t) / (2 * big.nbytes / (t256 * 1e-3) / 1e9)
            print(f"   {label:24s} {t:8.4f} ms  {f256:5.3f} of copy  {tsame / t:5.3f} of same-traffic copy  "
                  f"grid {grid:6d} exact={ok} {kname}", flush=True)
            rows.append({"shape": shape, "tile": reps, "bytes": nbytes, "variant": label, "kernel": kname,
                         "grid": grid, "ms": t, "fraction": f256, "of_same": tsame / t, "exact": ok,
                         "copy256_ms": t256, "same_copy_ms": tsame})
        del sa, sb
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "lab-tile-repeat.json").write_text(json.dumps({"device": name, "sms": sms, "copy_GBps": copy_bw,
                                                          "copy_ms": t_copy, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
