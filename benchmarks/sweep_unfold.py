"""Tuning aid (GPU): time unfold_gather's vectors-per-thread R on the issue's
UNFOLD shapes, beside the default the backend picks. Prints one line per R."""
import math

import cupy

import opendml as dml
from opendml.backends import cuda_backend as cb
from opendml.backends import get_backend


def main():
    be = get_backend("cuda")
    shapes = [((32, 64, 56, 56), "float32", 3), ((32, 64, 56, 56), "float16", 3), ((4, 32, 32, 32, 32), "float32", 3)]
    for shape, dtype, w in shapes:
        x = cupy.random.standard_normal(shape).astype(dtype)
        d = len(shape) - 2
        desc = dml.UnfoldOperatorDesc(dml.TensorDesc(dml.DataType.from_numpy(x.dtype), shape), None,
                                      [w] * d, [1] * d, [1] * d, [1] * d, [1] * d)
        plan = desc.lower()
        out = cupy.empty(desc.output_tensor.sizes, dtype)
        name, params, grid, _, _ = cb._unfold_launch(plan, x.data.ptr, out.data.ptr)
        p = be._upload_params(params)
        es = x.itemsize
        B = plan.columns
        for r in (1, 2, 4):
            v = 16 // es * r
            slots = plan.batch * plan.rows * math.ceil(B / v)
            params[0] = slots
            pr = cupy.asarray(params, dtype=cupy.int64)
            kname = name.rsplit(",", 1)[0] + f", {r}>"
            k = cb._kernel(0, kname)
            g = (math.ceil(slots / cb.THREADS),)
            args = (x.data.ptr, out.data.ptr, pr)
            k(g, (cb.THREADS,), args)
            a, b = cupy.cuda.Event(), cupy.cuda.Event()
            a.record()
            for _ in range(20):
                k(g, (cb.THREADS,), args)
            b.record()
            b.synchronize()
            ms = cupy.cuda.get_elapsed_time(a, b) / 20
            gbs = (out.nbytes + x.nbytes) / ms / 1e6
            print(f"{shape} {dtype} R={r}: {ms:.4f} ms {gbs:.0f} GB/s {'(default)' if kname == name else ''}")
        del p


if __name__ == "__main__":
    main()
