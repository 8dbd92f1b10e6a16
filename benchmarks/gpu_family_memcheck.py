"""The data-movement family's CUDA kernels on odd layouts for CUDA's memcheck:
``compute-sanitizer --tool memcheck --leak-check no python3 -m
benchmarks.gpu_family_memcheck``. CuPy's pool is off (one allocation a
buffer, exact bounds), and every case runs twice: on a fresh array, and on a
view starting one element into its allocation (a pointer that is not 16-byte
aligned). Rows 1, 3 and 5 elements past a multiple of 16 bytes, pads in every
mode, odd tile repeats, joins and splits on every axis, space/depth in both
orders, transposing identities (4-D both ways, 5-D), casts and odd-column
slice windows. Each result is compared byte for byte with the CPU backend's;
the script prints one line a case and exits non-zero on a mismatch (memcheck
itself reports any access outside a buffer). ``--dry`` runs the cases on
NumPy only (for checking the script without a GPU)."""
from __future__ import annotations

import sys

import numpy as np

import opendml as dml


def cases(rng):
    f32 = np.float32

    def r(*shape, dt=f32):
        return rng.standard_normal(shape).astype(dt)

    for w in (1, 3, 5, 17, 33):
        x = r(2, 3, 5, w)
        for mode in ("constant", "edge", "reflection", "symmetric"):
            p = min(w - 1, 3) if mode != "constant" else 3
            yield f"pad {mode} by {p}, rows of {w}", dml.pad, (x,), dict(
                start_padding=[0, 1, p, p], end_padding=[1, 0, p, p], mode=mode)
        yield f"tile (1,2,3,1), rows of {w}", dml.tile, (x,), dict(repeats=[1, 2, 3, 1])
        yield f"tile (1,1,1,3), rows of {w}", dml.tile, (x,), dict(repeats=[1, 1, 1, 3])
        yield f"slice1 from column 1, rows of {w}", dml.slice1, (x,), dict(
            window_offsets=[0, 1, 0, min(1, w - 1)], window_sizes=[2, 2, 5, w - min(1, w - 1)],
            window_strides=[1, 1, 1, 1])
        yield f"slice1 reversed, rows of {w}", dml.slice1, (x,), dict(
            window_offsets=[0, 0, 0, 0], window_sizes=[2, 3, 5, w], window_strides=[1, -1, 2, -1])
        for axis in range(4):
            yield f"join axis {axis}, rows of {w}", lambda a, b, axis=axis: dml.join([a, b], axis), (
                x, r(*[s + (axis == i) for i, s in enumerate(x.shape)])), {}
        yield f"split axis 3, rows of {w}", lambda a: dml.split(a, 3, [1, w - 1])[1] if w > 1 else a, (x,), {}
        yield f"cast float16, rows of {w}", dml.cast, (x,), dict(dtype=np.float16)
        yield f"cast int8, rows of {w}", dml.cast, ((x * 50).astype(f32),), dict(dtype=np.int8)
        yield f"identity scale+bias, rows of {w}", dml.identity, (x,), dict(scale=2.0, bias=0.5)
    y = r(2, 8, 6, 10)
    for order in ("DCR", "CRD"):
        yield f"space_to_depth 2 {order}", dml.space_to_depth, (y,), dict(block_size=2, order=order)
        yield f"depth_to_space 2 {order}", dml.depth_to_space, (y,), dict(block_size=2, order=order)
    nchw = r(2, 5, 7, 9)
    yield "identity NHWC view of NCHW", dml.identity, (nchw.transpose(0, 2, 3, 1),), {}
    nhwc = r(2, 7, 9, 5)
    yield "identity NCHW view of NHWC", dml.identity, (nhwc.transpose(0, 3, 1, 2),), {}
    five = r(2, 3, 5, 7, 33)
    yield "identity 5-D permuted view", dml.identity, (five.transpose(0, 4, 2, 1, 3),), {}
    yield "identity 5-D permuted view, int8", dml.identity, (
        (five * 50).astype(np.int8).transpose(0, 4, 2, 1, 3),), {}
    yield "identity float16 transpose, 33 x 65", dml.identity, (r(33, 65, dt=np.float16).T,), {}


def main() -> int:
    dry = "--dry" in sys.argv
    rng = np.random.default_rng(0)
    if dry:
        import numpy as xp

        def to_dev(a, shift):
            return np.ascontiguousarray(a) if not shift else a

        def to_host(a):
            return np.asarray(a)
    else:
        import cupy as xp
        xp.cuda.set_allocator(None)  # one cudaMalloc a buffer: exact bounds

        def to_dev(a, shift):
            """``a``'s values in a CUDA array with ``a``'s strides; shifted one
            element into its own allocation when ``shift``."""
            base = np.ascontiguousarray(a) if a.flags.c_contiguous else None
            if base is None:  # a permuted view: copy its base, view it the same way
                order = np.argsort(a.strides)[::-1]
                dense = np.ascontiguousarray(a.transpose(order))
                dev = to_dev(dense, shift)
                return dev.transpose(np.argsort(order))
            if not shift:
                return xp.asarray(base)
            raw = xp.empty(base.size + 1, base.dtype)
            raw[1:] = xp.asarray(base.reshape(-1))
            return raw[1:].reshape(base.shape)

        def to_host(a):
            return xp.asnumpy(a)
    bad = 0
    for label, fn, arrays, kw in cases(rng):
        want = np.ascontiguousarray(fn(*arrays, **kw))
        for shift in (False, True):
            got = np.ascontiguousarray(to_host(fn(*[to_dev(a, shift) for a in arrays], **kw)))
            ok = got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
            bad += not ok
            print(f"{label + (' (+1 element)' if shift else ''):52s} {'same bytes' if ok else 'MISMATCH'}",
                  flush=True)
    print(f"{bad} mismatches", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
