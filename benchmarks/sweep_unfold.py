"""Tuning aid (GPU): time the UNFOLD kernels on the issue's shapes, kernel
alone between CUDA events: the staged-box kernel (unfold_tile) for several
box sizes, and the per-element gather (unfold_gather) for several vectors per
thread. Prints one line per variant; "(default)" marks what the backend picks."""
import math

import cupy

import opendml as dml
from opendml.runtime.cuda import launch as cl, tuned as ct


def time_launch(name, params, grid, smem, x, out, reps=20):
    """Milliseconds per launch; ``out`` is filled with a byte pattern first,
    so that a variant that leaves an element unwritten differs."""
    out.view(cupy.uint8).fill(0xAB)
    k = cl._kernel(0, name)
    args = (x.data.ptr, out.data.ptr, cl.device_params(params))
    k(grid, (cl.THREADS,), args, shared_mem=smem)
    a, b = cupy.cuda.Event(), cupy.cuda.Event()
    a.record()
    for _ in range(reps):
        k(grid, (cl.THREADS,), args, shared_mem=smem)
    b.record()
    b.synchronize()
    return cupy.cuda.get_elapsed_time(a, b) / reps


SHAPES = [((32, 64, 56, 56), "float32", 3), ((32, 64, 56, 56), "float16", 3), ((32, 64, 56, 56), "int8", 3),
          ((4, 32, 32, 32, 32), "float32", 3), ((4, 32, 32, 32, 32), "float16", 3)]


def box_floor(plan, columns, line):
    """unfold_box's box with the outer extents rounded down (a box of at most
    ``columns`` columns, so its positions fill whole passes of the block's
    256 threads where they can) instead of up; the region's extents as
    unfold_box computes them. None where unfold_box would decline."""
    D, nb = len(plan.window), plan.blocks
    t = [1] * D
    t[-1] = min(nb[-1], line if D > 1 else columns)
    for d in range(D - 2, -1, -1):
        t[d] = min(nb[d], max(1, columns // math.prod(t[d + 1:])))
    ext = [(t[d] - 1) * plan.strides[d] + (plan.window[d] - 1) * plan.dilations[d] + 1 for d in range(D)]
    if math.prod(ext) * plan.element_size > ct.BOX_BYTES:
        return None
    return tuple(t), tuple(ext)


def parse_shapes(text):
    """"16,16,56,56:float32:3;8,64,56,56:float32:3" -> SHAPES' form."""
    out = []
    for item in filter(None, text.split(";")):
        dims, dtype, w = item.split(":")
        out.append((tuple(int(v) for v in dims.split(",")), dtype, int(w)))
    return out


def time_torch(fn, reps=20):
    """Milliseconds per call of fn() between CUDA events (PyTorch's stream)."""
    import torch
    fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(reps):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / reps


def peers(shape, dtype, w, x):
    """F.unfold eager and compiled (Inductor's im2col kernel), 2-D only;
    each call allocates its output, as PyTorch's layers do."""
    if len(shape) != 4:
        return
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return
    t = torch.as_tensor(x, device="cuda")
    try:
        eager = time_torch(lambda: F.unfold(t, w, padding=1))
        compiled_fn = torch.compile(lambda v: F.unfold(v, w, padding=1), fullgraph=True)
        compiled = time_torch(lambda: compiled_fn(t))
    except Exception as e:          # a dtype F.unfold does not take
        print(f"{shape} {dtype} peers: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
        return
    print(f"{shape} {dtype} peers: F.unfold {eager:.4f} ms, compiled F.unfold {compiled:.4f} ms")


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shapes", help='"N,C,H,W:dtype:window;..." (default: the issue\'s large shapes)')
    ap.add_argument("--columns", default="256,512,1024,2048", help="box columns to try")
    ap.add_argument("--lines", default="64,128", help="box line lengths to try")
    ap.add_argument("--boxes", default="", help='explicit boxes to try, "14x56,32x56" (where they fit the shape)')
    ap.add_argument("--peers", action="store_true", help="also time F.unfold eager and compiled (2-D)")
    ap.add_argument("--scalar", action="store_true",
                    help="where the default is unfold_tile with 16-byte stores (VEC 1), also time it with VEC 0")
    ap.add_argument("--no-gather", action="store_true", help="skip the gather kernel's variants")
    a = ap.parse_args(argv)
    shapes = parse_shapes(a.shapes) if a.shapes else SHAPES
    for shape, dtype, w in shapes:
        x = cupy.random.standard_normal(shape).astype(dtype)
        d = len(shape) - 2
        desc = dml.UnfoldOperatorDesc(dml.TensorDesc(dml.DataType.from_numpy(x.dtype), shape), None,
                                      [w] * d, [1] * d, [1] * d, [1] * d, [1] * d)
        plan = desc.lower().kernel_plan()
        out = cupy.empty(desc.output_tensor.sizes, dtype)
        useful = out.nbytes + x.nbytes
        default = ct._unfold_launch(plan)
        print(f"{shape} {dtype}: default {default[0]} grid {default[2]}")
        want = None
        ms = time_launch(*default, x, out)
        want = out.copy()
        print(f"{shape} {dtype} default: {ms:.4f} ms {useful / ms / 1e6:.0f} GB/s")
        if a.scalar and default[0].endswith(", 1>") and default[0].startswith("unfold_tile"):
            scalar = default[0][:-len(", 1>")] + ", 0>"
            for name, label in ((scalar, "one-element stores (VEC 0)"), (default[0], "default")):
                ms = time_launch(name, *default[1:], x, out)
                same = bool((out.view(cupy.uint8) == want.view(cupy.uint8)).all())
                print(f"{shape} {dtype} {label}: {ms:.4f} ms {useful / ms / 1e6:.0f} GB/s{'' if same else ' DIFFERS'}")
        for columns in (int(v) for v in a.columns.split(",")):
            for line in (int(v) for v in a.lines.split(",")):
                box = ct.unfold_box(plan, columns=columns, line=line)
                if box is None:
                    continue
                name, params, grid, smem = ct._unfold_launch(plan, box)
                ms = time_launch(name, params, grid, smem, x, out)
                same = bool((out.view(cupy.uint8) == want.view(cupy.uint8)).all())
                print(f"{shape} {dtype} columns {columns} line {line} box {box[0]} region {box[1]} grid {grid[0]}: "
                      f"{ms:.4f} ms {useful / ms / 1e6:.0f} GB/s{'' if same else ' DIFFERS'}")
                fbox = box_floor(plan, columns, line)
                if fbox is not None and fbox != box:
                    name, params, grid, smem = ct._unfold_launch(plan, fbox)
                    ms = time_launch(name, params, grid, smem, x, out)
                    same = bool((out.view(cupy.uint8) == want.view(cupy.uint8)).all())
                    print(f"{shape} {dtype} columns {columns} line {line} floor box {fbox[0]} region {fbox[1]} "
                          f"grid {grid[0]}: {ms:.4f} ms {useful / ms / 1e6:.0f} GB/s{'' if same else ' DIFFERS'}")
        for text in filter(None, a.boxes.split(",")):
            t = tuple(int(v) for v in text.split("x"))
            if len(t) != len(plan.window) or any(v > b for v, b in zip(t, plan.blocks)):
                continue
            ext = tuple((t[d] - 1) * plan.strides[d] + (plan.window[d] - 1) * plan.dilations[d] + 1
                        for d in range(len(t)))
            if math.prod(ext) * plan.element_size > ct.BOX_BYTES:
                continue
            name, params, grid, smem = ct._unfold_launch(plan, (t, ext))
            ms = time_launch(name, params, grid, smem, x, out)
            same = bool((out.view(cupy.uint8) == want.view(cupy.uint8)).all())
            print(f"{shape} {dtype} box {t} region {ext} grid {grid[0]}: {ms:.4f} ms {useful / ms / 1e6:.0f} GB/s"
                  f"{'' if same else ' DIFFERS'}")
        if not a.no_gather:
            es = x.itemsize
            name, params, grid, smem = ct._unfold_launch(plan, box=False)
            for r in (1, 2, 4):
                v = 16 // es * r
                slots = plan.batch * plan.rows * math.ceil(plan.columns / v)
                params.work_items = slots
                kname = name.rsplit(",", 1)[0] + f", {r}>"
                ms = time_launch(kname, params, (math.ceil(slots / cl.THREADS),), 0, x, out)
                same = bool((out.view(cupy.uint8) == want.view(cupy.uint8)).all())
                print(f"{shape} {dtype} gather R={r}: {ms:.4f} ms {useful / ms / 1e6:.0f} GB/s"
                      f"{'' if same else ' DIFFERS'}")
        if a.peers:
            peers(shape, dtype, w, x)
        del x, out


if __name__ == "__main__":
    main()
