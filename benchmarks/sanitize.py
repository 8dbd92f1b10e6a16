"""Odd layouts on CUDA with every buffer exactly its tensor's size and CuPy's
pool off, for ``compute-sanitizer --tool memcheck``: a read outside the bound
input or a write outside the output is an out-of-bounds access it reports."""
import numpy as np

import opendml as dml


def main():
    import cupy
    cupy.cuda.set_allocator(None)  # one cudaMalloc per buffer: exact bounds
    T = dml.TensorDesc
    F32, I8, F16, F64 = (dml.DataType.FLOAT32, dml.DataType.INT8, dml.DataType.FLOAT16, dml.DataType.FLOAT64)
    cases = [
        dml.Slice1OperatorDesc(T(I8, [3, 5, 7, 33], dml.nhwc_strides([3, 5, 7, 33])), None, [0, 1, 0, 1], [3, 4, 7, 32], [-1, 3, -2, -1]),
        dml.Slice1OperatorDesc(T(F16, [2, 64, 64]), None, [1, 0, 0], [1, 64, 64], [1, -1, -1]),
        dml.Slice1OperatorDesc(T(F32, [4, 4], [0, 1]), None, [0, 0], [4, 4], [-1, -1]),
        dml.SliceOperatorDesc(T(F64, [2, 3, 5, 7], [200, 60, 11, 1]), None, [1, 2, 4, 6], [1, 1, 1, 1], [1, 1, 1, 1]),
        dml.SliceOperatorDesc(T(I8, [1, 1, 16, 48]), T(I8, [1, 1, 16, 32], [1024, 1024, 64, 1]), [0, 0, 0, 16], [1, 1, 16, 32], [1, 1, 1, 1]),
        dml.UnfoldOperatorDesc(T(F32, [2, 3, 9, 11]), None, [3, 4], [2, 3], [2, 1], [2, 0], [0, 3]),
        dml.UnfoldOperatorDesc(T(I8, [1, 2, 5, 6, 7], dml.nhwc_strides([1, 2, 5, 6, 7])), None, [2, 3, 2], [1, 2, 3], [1, 1, 2], [1, 1, 1], [1, 1, 1]),
        dml.UnfoldOperatorDesc(T(F64, [2, 1, 4097]), None, [1024], [256], [1], [0], [0]),
        dml.UnfoldOperatorDesc(T(F16, [2, 3, 999]), None, [40], [9], [2], [7], [5]),
        dml.UnfoldOperatorDesc(T(F16, [2, 3, 67, 300]), None, [3, 5], [1, 2], [2, 1], [1, 2], [2, 1]),
        dml.UnfoldOperatorDesc(T(F64, [1, 2, 5, 7, 6], dml.nhwc_strides([1, 2, 5, 7, 6])), None, [3, 3, 3], [1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1, 1]),
        # unfold_tile's 16-byte stores (VEC 1) up to the output's last element: whole vectors (a last box of
        # 44 rows), a box of 1,026 positions (2 after its last vector) and a box whose run is not 16-byte
        # aligned (one by one), 16 int8 per store, 8 float16, 2 float64
        dml.UnfoldOperatorDesc(T(F32, [1, 1, 300, 8]), None, [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
        dml.UnfoldOperatorDesc(T(F32, [1, 1, 200, 6]), None, [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
        dml.UnfoldOperatorDesc(T(F32, [2, 3, 7, 8]), None, [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
        dml.UnfoldOperatorDesc(T(I8, [1, 2, 5, 16]), None, [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
        dml.UnfoldOperatorDesc(T(F16, [1, 1, 3, 8]), None, [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
        dml.UnfoldOperatorDesc(T(F64, [1, 1, 3, 2]), None, [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
        # stride 2 read in 16-byte words up to the buffer's last element, and a
        # layout whose last word would pass it (must stay element-wise)
        dml.SliceOperatorDesc(T(F16, [2, 4, 32]), None, [0, 0, 0], [2, 4, 16], [1, 1, 2]),
        dml.SliceOperatorDesc(T(F64, [2, 7], [8, 1]), None, [0, 0], [2, 4], [1, 2]),
    ]
    dev, cpu = dml.Device("cuda"), dml.Device("cpu")
    for desc in cases:
        outs = []
        x = np.random.default_rng(1).integers(0, 100, desc.input_tensor.sizes).astype(desc.input_tensor.data_type.numpy_dtype)
        for d in (dev, cpu):
            outs.append(d.run(desc, x).tobytes())
        assert outs[0] == outs[1], desc
    print(f"sanitize: {len(cases)} odd layouts agree with the CPU backend")


if __name__ == "__main__":
    main()
