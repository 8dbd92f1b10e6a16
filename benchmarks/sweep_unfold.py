"""Tuning aid (GPU): time the UNFOLD kernels on the issue's shapes, kernel
alone between CUDA events: the staged-box kernel (unfold_tile) for several
box sizes, and the per-element gather (unfold_gather) for several vectors per
thread. Prints one line per variant; "(default)" marks what the backend picks."""
import math

import cupy

import opendml as dml
from opendml.runtime.cuda import backend as cb


def time_launch(name, params, grid, smem, x, out, reps=20):
    k = cb._kernel(0, name)
    args = (x.data.ptr, out.data.ptr, cb.device_params(params))
    k(grid, (cb.THREADS,), args, shared_mem=smem)
    a, b = cupy.cuda.Event(), cupy.cuda.Event()
    a.record()
    for _ in range(reps):
        k(grid, (cb.THREADS,), args, shared_mem=smem)
    b.record()
    b.synchronize()
    return cupy.cuda.get_elapsed_time(a, b) / reps


def main():
    shapes = [((32, 64, 56, 56), "float32", 3), ((32, 64, 56, 56), "float16", 3), ((32, 64, 56, 56), "int8", 3),
              ((4, 32, 32, 32, 32), "float32", 3), ((4, 32, 32, 32, 32), "float16", 3)]
    for shape, dtype, w in shapes:
        x = cupy.random.standard_normal(shape).astype(dtype)
        d = len(shape) - 2
        desc = dml.UnfoldOperatorDesc(dml.TensorDesc(dml.DataType.from_numpy(x.dtype), shape), None,
                                      [w] * d, [1] * d, [1] * d, [1] * d, [1] * d)
        plan = desc.lower()
        out = cupy.empty(desc.output_tensor.sizes, dtype)
        useful = out.nbytes + x.nbytes
        default = cb._unfold_launch(plan)[0]
        want = None
        for columns in (256, 512, 1024, 2048):
            for line in (64, 128):
                box = cb.unfold_box(plan, columns=columns, line=line)
                if box is None:
                    continue
                name, params, grid, smem = cb._unfold_launch(plan, box)
                ms = time_launch(name, params, grid, smem, x, out)
                got = out.copy()
                want = got if want is None else want
                same = bool((got.view(cupy.uint8) == want.view(cupy.uint8)).all())
                print(f"{shape} {dtype} box {box[0]} region {box[1]}: {ms:.4f} ms {useful / ms / 1e6:.0f} GB/s"
                      f"{'' if same else ' DIFFERS'}")
        es = x.itemsize
        name, params, grid, smem = cb._unfold_launch(plan, box=False)
        for r in (1, 2, 4):
            v = 16 // es * r
            slots = plan.batch * plan.rows * math.ceil(plan.columns / v)
            params.work_items = slots
            kname = name.rsplit(",", 1)[0] + f", {r}>"
            ms = time_launch(kname, params, (math.ceil(slots / cb.THREADS),), 0, x, out)
            same = bool((out.view(cupy.uint8) == want.view(cupy.uint8)).all()) if want is not None else True
            print(f"{shape} {dtype} gather R={r}: {ms:.4f} ms {useful / ms / 1e6:.0f} GB/s"
                  f"{' (default)' if kname == default else ''}{'' if same else ' DIFFERS'}")
        print(f"{shape} {dtype}: default {default}")
        del x, out


if __name__ == "__main__":
    main()
