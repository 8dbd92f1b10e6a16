"""Tuning aid (GPU): time the strided copy's variants (element words or
16-byte picked words, words per thread) on the stride-2 SLICE workload, and
the window SLICE at several window offsets beside a plain device copy: DRAM
moves whole 64-byte atoms, so a window row that starts or ends inside one
reads bytes that are not "useful" (the [8:120] window in int8..float32)."""
import math

import cupy
import numpy as np

import opendml as dml
from opendml.runtime.cuda import launch as cl, tuned as ct
from opendml.plan import CopyPlan
from opendml.runtime import params as P


def time_kernel(k, grid, args, reps=20):
    k(grid, (cl.THREADS,), args)
    a, b = cupy.cuda.Event(), cupy.cuda.Event()
    a.record()
    for _ in range(reps):
        k(grid, (cl.THREADS,), args)
    b.record()
    b.synchronize()
    return cupy.cuda.get_elapsed_time(a, b) / reps


def window_alignment():
    for dtype in ("int8", "float32", "float64"):
        es = np.dtype(dtype).itemsize
        n = 256 * 2**20 // (64 * 128 * 128 * es)
        x = cupy.random.randint(0, 100, size=(n, 64, 128, 128)).astype(dtype)
        y = cupy.empty_like(x)
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        y[...] = x
        a.record()
        for _ in range(20):
            cupy.cuda.runtime.memcpyAsync(y.data.ptr, x.data.ptr, x.nbytes, 3, cupy.cuda.get_current_stream().ptr)
        b.record()
        b.synchronize()
        copy = 2 * x.nbytes / (cupy.cuda.get_elapsed_time(a, b) / 20) / 1e6
        for lo, hi in ((8, 120), (16, 112), (0, 112), (0, 128)):
            desc = dml.SliceOperatorDesc(dml.TensorDesc(dml.DataType.from_numpy(x.dtype), x.shape), None,
                                         [0, 0, lo, lo], [n, 64, hi - lo, hi - lo], [1, 1, 1, 1])
            out = cupy.empty(desc.output_tensor.sizes, dtype)
            name, params, grid, smem = ct._copy_launch(desc.lower().kernel_plan(), x.data.ptr, out.data.ptr, x.size)
            ms = time_kernel(cl._kernel(0, name), grid, (x.data.ptr, out.data.ptr, cl.device_params(params)))
            gbs = 2 * out.nbytes / ms / 1e6
            print(f"window [{lo}:{hi}] {dtype} ({(lo * es) % 64}-byte row offset, {((hi - lo) * es) % 64} tail):"
                  f" {gbs:.0f} GB/s = {gbs / copy:.3f} of copy ({copy:.0f} GB/s)")
            del out
        del x, y


def window_items():
    """The [8:120] window in each type: word width (16 or 8 bytes) and words
    per thread, kernel alone."""
    for dtype in ("int8", "float16", "float32", "float64"):
        es = np.dtype(dtype).itemsize
        n = 256 * 2**20 // (64 * 128 * 128 * es)
        x = cupy.random.randint(0, 100, size=(n, 64, 128, 128)).astype(dtype)
        desc = dml.SliceOperatorDesc(dml.TensorDesc(dml.DataType.from_numpy(x.dtype), x.shape), None,
                                     [0, 0, 8, 8], [n, 64, 112, 112], [1, 1, 1, 1])
        out = cupy.empty(desc.output_tensor.sizes, dtype)
        plan = desc.lower().kernel_plan()
        for w in (16, 8):
            if w < es:
                continue
            f = w // es
            p = plan.canonical()
            if p.in_offset % f or p.out_offset % f or p.sizes[-1] % f or any(
                    t % f for t in p.in_strides[:-1] + p.out_strides[:-1]):
                continue
            wp = CopyPlan(w, p.sizes[:-1] + (p.sizes[-1] // f,), p.in_offset // f,
                          tuple(t // f for t in p.in_strides[:-1]) + (1,), p.out_offset // f,
                          tuple(t // f for t in p.out_strides[:-1]) + (1,))
            for items in (1, 2, 4, 8):
                name = f"strided_copy<{cl._SCALAR[w]}, {len(wp.sizes)}, 0, u32, {items}, 0>"
                params = cl.device_params(P.copy_params(wp))
                grid = (math.ceil(wp.count / (cl.THREADS * items)),)
                ms = time_kernel(cl._kernel(0, name), grid, (x.data.ptr, out.data.ptr, params))
                print(f"window {dtype} word {w} items {items}: {2 * out.nbytes / ms / 1e6:.0f} GB/s")
        del x, out


def main():
    window_items()
    window_alignment()
    for dtype in ("int8", "float16", "float32", "float64"):
        es = np.dtype(dtype).itemsize
        n = 256 * 2**20 // (64 * 128 * 128 * es)
        x = cupy.random.randint(0, 100, size=(n, 64, 128, 128)).astype(dtype)
        desc = dml.SliceOperatorDesc(dml.TensorDesc(dml.DataType.from_numpy(x.dtype), x.shape), None,
                                     [0] * 4, [n, 64, 64, 64], [1, 1, 2, 2])
        plan = desc.lower().kernel_plan()
        out = cupy.empty(desc.output_tensor.sizes, dtype)
        useful = 2 * out.nbytes
        variants = []
        w, rev, pick, wp = ct.word_plan(plan, x.data.ptr, out.data.ptr, x.size)
        p = plan.canonical()
        for items in (2, 4, 8, 16):
            variants.append((f"element items={items}", es, 0, p, items))
            if pick:
                variants.append((f"pick items={items}", 8, pick, wp, items))
        for label, word, pk, pl, items in variants:
            count = pl.count
            nd = len(pl.sizes)
            name = f"strided_copy<{cl._SCALAR[word]}, {nd}, 0, {ct._index_type(count, items)}, {items}, {pk}>"
            params = cl.device_params(P.copy_params(pl))
            grid = (math.ceil(count / (cl.THREADS * items)),)
            ms = time_kernel(cl._kernel(0, name), grid, (x.data.ptr, out.data.ptr, params))
            print(f"stride 2 {dtype} {label}: {ms:.4f} ms {useful / ms / 1e6:.0f} GB/s")
        del x, out


if __name__ == "__main__":
    main()
