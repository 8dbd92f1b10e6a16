"""The move program (MovePlan: the data-movement family) on CUDA.

Without a GPU: move.cu compiles with nvcc; its conversion functions, built for
the host with g++, give the CPU backend's bytes for every pair of the 11 types
(NaN payloads, infinities, -0.0, out-of-range values, subnormals, scale/bias);
the backend's kernel passes (canonical dimensions, the fused padding program,
fills), executed by a NumPy emulation of the copy and fill passes, and the launch
parameters move_steps builds (move_vec, move_tile's tiles, move_fill), give
the CPU backend's bytes for every family operator.

With a GPU (``@pytest.mark.cuda``): every family operator through
``Device("cuda")`` gives the bytes of ``Device("cpu")``, including every CAST
pair with special values, every padding mode, JOIN/SPLIT of several tensors,
padded and broadcast strides; ``CudaBackend.record_move`` on raw pointers and
a stream, and the forced kernel variants, give the same bytes."""
from __future__ import annotations

import ctypes
import itertools
import shutil
import subprocess

import numpy as np
import pytest

import opendml as dml
from opendml.model.data_type import DataType
from opendml.ops import (CastOperatorDesc, DepthToSpace1OperatorDesc, DepthToSpaceOperatorDesc,
                         ElementWiseIdentityOperatorDesc, JoinOperatorDesc, Padding1OperatorDesc, PaddingOperatorDesc,
                         SpaceToDepth1OperatorDesc, SpaceToDepthOperatorDesc, SplitOperatorDesc, TileOperatorDesc)
from opendml.ops._spec import DepthSpaceOrder, PaddingMode, ScaleBias
from opendml.runtime import params as P
from opendml.runtime.cpu.numpy_kernels import convert_array
from opendml.runtime.cuda import backend as cb, launch as cl, steps as cs
from tests.conftest import cuda_available
from tests.runtime import nvcc

TYPES = [t for t in DataType if 1 <= t.value <= 11]
WORD = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
FL = dml.FeatureLevel.FL_6_4
needs_cuda = pytest.mark.skipif(not cuda_available(), reason="CUDA is not available here")


def T(dt, sizes, strides=None):
    return dml.TensorDesc(dt, list(sizes), strides)


# -- values --------------------------------------------------------------------------

def special_words(t: DataType, n_random: int = 2000, seed: int = 0) -> np.ndarray:
    """Words of type t: edge values (NaN with payloads, +-inf, -0.0, subnormals,
    integer bounds, values just past every integer type's range, halves for
    rounding) and random bit patterns."""
    dt = t.numpy_dtype
    w = WORD[dt.itemsize]
    rng = np.random.default_rng(seed + t.value)
    rand = rng.integers(0, np.iinfo(w).max, n_random, dtype=np.uint64, endpoint=True).astype(w)
    if dt.kind == "f":
        vals = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 0.5, -0.5, 1.5, 2.5, -2.5, -0.9, 127.5, 128.0, -128.0,
                -129.0, 255.5, 256.0, 32767.5, 32768.0, -32769.0, 65504.0, 65519.0, 65520.0, 65535.5, 65536.0,
                2.0**31, -2.0**31, 2.0**31 + 2**10, 2.0**32, 2.0**63, -2.0**63, 2.0**64, 1e30, -1e30, 3e-8, 6e-8,
                2.0**-25, 2.0**-24, 2.0**-14, 1e-40, -1e-45, 1e-310]
        with np.errstate(all="ignore"):
            edge = np.array(vals, np.float64).astype(dt).view(w)
        nans = {2: [0x7C01, 0xFC01, 0x7E00, 0x7D55, 0xFFFF],
                4: [0x7F800001, 0xFF800001, 0x7FC00000, 0x7F802001, 0x7FBFFFFF, 0xFFFFFFFF],
                8: [0x7FF0000000000001, 0xFFF0000020000001, 0x7FF8000000000000, 0x7FF0040000000000,
                    0x7FF003FFFFFFFFFF]}[dt.itemsize]
        edge = np.concatenate([edge, np.array(nans, w)])
    else:
        info = np.iinfo(dt)
        big = [2**24 + 1, 2**53 + 1, 2**63 - 1, 2**63 + 2**40 + 1]
        vals = [0, 1, 2, info.max, info.min, info.max - 1, 65504, 65519, 65520, 65536, 127, 128, 255, 256] + big
        edge = np.array([v % 2**(8 * dt.itemsize) for v in vals], np.uint64).astype(w)
    return np.concatenate([edge, rand])


def reference_convert(words: np.ndarray, st: DataType, dt: DataType, sb=None) -> np.ndarray:
    """The CPU backend's conversion (numpy_kernels.prepare_copy_pass)."""
    x = words.view(st.numpy_dtype)
    if sb is not None:
        ct = np.float64 if x.dtype == np.float64 else np.float32
        with np.errstate(all="ignore"):
            y = x.astype(ct) * ct(sb[0])
            x = y + ct(sb[1])
        x[np.isnan(x)] = np.uint64(0x7FF8000000000000).view(np.float64) if ct is np.float64 else \
            np.uint32(0x7FC00000).view(np.float32)      # the canonical NaN, as the CPU backend stores it
    with np.errstate(all="ignore"):
        return convert_array(x, dt.numpy_dtype).view(WORD[dt.size])


# -- without a GPU -------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("path", [cl.MOVE_KERNELS, cl.LAYOUT_KERNELS], ids=lambda p: p.name)
def test_move_kernels_compile_with_nvcc(tmp_path, path):
    """move.cu (its ``asm`` statements checked by ptxas) to an object; layout.cu, which has none, to PTX as NVRTC
    compiles it (half the time)."""
    ptx = "asm" not in path.read_text(encoding="utf-8")
    r = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", "--fmad=false", *nvcc.includes(),
                        "-ptx" if ptx else "-c", str(nvcc.instances(path)), "-o", str(tmp_path / "m.o")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr.lower(), r.stderr


def test_move_kernels_take_parameters_by_value():
    src = cl.MOVE_KERNELS.read_text() + cl.LAYOUT_KERNELS.read_text()
    instances = nvcc.instances(cl.MOVE_KERNELS).read_text() + nvcc.instances(cl.LAYOUT_KERNELS).read_text()
    for name in ("move_vec", "move_tile", "move_fill", "move_transpose", "move_padw", "move_padr"):
        assert f"{name}(const " in src
        assert "const ODML_GRID_CONSTANT odml_move_params params) {\n    const odml_move_params* __restrict__ p = &params;" in src
        assert f"template __global__ void {name}<" in instances
    assert ctypes.sizeof(P.MoveParams) + 16 <= 4096


@pytest.fixture(scope="module")
def host_convert(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    lib = tmp_path_factory.mktemp("move") / "move_host.so"
    r = subprocess.run([cxx, "-x", "c++", "-std=c++17", "-O2", "-ffp-contract=off", "-shared", "-fPIC",
                        "-DODML_MOVE_HOST", str(cl.MOVE_KERNELS), "-o", str(lib)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    f = ctypes.CDLL(str(lib)).odml_convert_host
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int, ctypes.c_int, ctypes.c_int] + \
        [ctypes.c_uint64] * 4

    def convert(words, st, dt, sb=None):
        x = np.ascontiguousarray(words.astype(np.uint64))
        y = np.zeros_like(x)
        q = cs.move_params(cs._Pass(False, 0, 0, [[1, 0, 0, 0, 0, 0]], 0, 0, st.value, dt.value, sb))
        f(x.ctypes.data, y.ctypes.data, len(x), st.value, dt.value, q.scale_bias, q.scale32 % 2**64,
          q.bias32 % 2**64, q.scale64 % 2**64, q.bias64 % 2**64)
        return y.astype(WORD[dt.size])
    return convert


@pytest.mark.parametrize("st", TYPES, ids=lambda t: t.name)
def test_conversion_matches_cpu_bit_for_bit(host_convert, st):
    words = special_words(st, 20000)
    if st.size <= 2:
        words = np.concatenate([words, np.arange(2**(8 * st.size), dtype=np.uint64).astype(WORD[st.size])])
    for dt in TYPES:
        got, want = host_convert(words, st, dt), reference_convert(words, st, dt)
        bad = np.nonzero(got != want)[0]
        assert not len(bad), (st.name, dt.name, [(hex(int(words[i])), hex(int(got[i])), hex(int(want[i])))
                                                  for i in bad[:5]])


SCALE_BIAS = [(2.0, 1.0), (0.1, -3.5), (0.0, 0.0), (-1.0, -0.0), (np.inf, 0.0), (1.0, -np.inf), (np.nan, 1.0),
              (3.0, np.nan), (1e-30, 1e-38), (65504.0, 65504.0)]


@pytest.mark.parametrize("st", [DataType.FLOAT16, DataType.FLOAT32, DataType.FLOAT64], ids=lambda t: t.name)
def test_scale_bias_matches_cpu_bit_for_bit(host_convert, st):
    words = special_words(st, 20000)
    for sb in SCALE_BIAS:
        w = words
        got, want = host_convert(w, st, st, sb), reference_convert(w, st, st, sb)
        bad = np.nonzero(got != want)[0]
        assert not len(bad), (st.name, sb, [(hex(int(w[i])), hex(int(got[i])), hex(int(want[i]))) for i in bad[:5]])


def emulate(plan, srcs, dsts, **kw):
    """copy-pass / move_fill / strided_copy semantics on the backend's kernel
    passes, in NumPy (plain copies by element, conversions by the CPU's
    convert_array: the conversion itself is checked above)."""
    for k in cs.kernel_passes(plan, **kw):
        emulate_pass(k, srcs, dsts)


def emulate_pass(k, srcs, dsts):
    if True:
        sizes = [d[0] for d in k.dims]
        idx = np.indices(sizes).reshape(len(sizes), -1).astype(np.int64)
        dof = k.dst_offset + sum(idx[i] * d[2] for i, d in enumerate(k.dims))
        dst = dsts[k.dst]
        if k.fill:
            dst[dof] = k.fill_bits
            return
        so = np.full(idx.shape[1], k.src_offset, np.int64)
        outside = np.zeros(idx.shape[1], bool)
        for i, (n, ss, ds, mode, shift, msize) in enumerate(k.dims):
            c = idx[i]
            if mode:
                c = np.array([cs._map_source(mode, shift, msize, int(v)) if True else 0 for v in c], dtype=object)
                outside |= np.array([v is None for v in c])
                c = np.array([0 if v is None else v for v in c], np.int64)
            so = so + c * ss
        vals = srcs[k.src][np.where(outside, 0, so)]
        vals = reference_convert(vals, DataType(k.st), DataType(k.dt), k.sb)
        vals = np.where(outside, np.array(k.fill_bits).astype(vals.dtype), vals)
        dst[dof] = vals


def emulate_steps(plan, srcs, dsts, ptrs=None, plain_via="move", fuse=None):
    """The launches ``cs.move_steps`` picks (plain passes forced off
    strided_copy), executed from their parameter blocks: move_vec/move_fill
    as a copy pass or move_fill over params.dim[:rank], move_tile as R x V tiles
    over its group index space (dims[:rank]) with X = dim[rank] and
    Y = dim[rank + 1]."""
    ptrs = ptrs or [0] * max(len(srcs), len(dsts))
    names = []
    for name, q, grid, smem, s, d in cs.move_steps(plan, ptrs[:len(srcs)], [a.size for a in srcs],
                                                     ptrs[:len(dsts)], plain_via=plain_via, fuse=fuse):
        kind = name.split("<")[0]
        names.append(kind)
        if kind == "move_wcopy":     # U aligned 16-byte words a thread; sizes, strides and offsets in words
            nd, _, U, nr = (name[:-1].split("<")[1].split(", "))
            nd, U, nr = int(nd), int(U), int(nr)
            # the index space dims[:nd], then nr repeat dimensions (source stride 0) each thread stores at
            assert q.rank == nd + nr and q.count == np.prod([q.dim[i].size for i in range(nd)])
            assert all(q.dim[i].src_stride == 0 for i in range(nd, q.rank)) and grid[0] * cl.THREADS * U >= q.count
            f = 16 // srcs[s].itemsize
            wd = [[q.dim[i].size, q.dim[i].src_stride, q.dim[i].dst_stride] for i in range(q.rank)]
            idx = np.indices([dd[0] for dd in wd]).reshape(q.rank, -1).astype(np.int64)
            so = q.src_offset + sum(idx[i] * dd[1] for i, dd in enumerate(wd))
            dof = q.dst_offset + sum(idx[i] * dd[2] for i, dd in enumerate(wd))
            for e in range(f):
                dsts[d][dof * f + e] = srcs[s][so * f + e]
            continue
        rank = q.rank
        dims = [[q.dim[i].size, q.dim[i].src_stride, q.dim[i].dst_stride, q.dim[i].map_mode, q.dim[i].map_shift,
                 q.dim[i].map_size] for i in range(rank)]
        if kind == "move_pad":       # a warp per row of the fused padding pass
            assert dims[-1][1] == dims[-1][2] == 1 and grid[0] * (cl.THREADS // 32) * dims[-1][0] >= q.count
            emulate_pass(cs._Pass(False, s, d, dims, q.src_offset, q.dst_offset, q.src_type, q.dst_type, None,
                                  q.fill_bits % 2**64), srcs, dsts)
            continue
        if kind == "move_padr":      # a warp per row of the contiguous output
            assert grid[0] * (cl.THREADS // 32) * dims[-1][0] >= q.count and q.dst_offset == 0
            emulate_pass(cs._Pass(False, s, d, dims, q.src_offset, q.dst_offset, q.src_type, q.dst_type, None,
                                  q.fill_bits % 2**64), srcs, dsts)
            continue
        if kind == "move_padw":      # U aligned 16-byte words a thread over the flat (contiguous) output
            U = int(name[:-1].split(", ")[2])
            es = DataType(q.dst_type).size
            assert grid[0] * cl.THREADS * U * (16 // es) >= q.count + 16 // es and q.dst_offset == 0
            stride = 1
            for dd in reversed(dims):
                assert dd[2] == stride
                stride *= dd[0]
            emulate_pass(cs._Pass(False, s, d, dims, q.src_offset, q.dst_offset, q.src_type, q.dst_type, None,
                                  q.fill_bits % 2**64), srcs, dsts)
            continue
        if kind == "move_transpose":   # TILE x TILE tiles of (X, Y) over the outer index space dims[:rank]
            tile = int(name[:-1].split(", ")[-1])
            X, Y = q.dim[rank], q.dim[rank + 1]
            assert X.dst_stride == 1 and Y.src_stride == 1 and q.count == int(np.prod([dd[0] for dd in dims]))
            assert grid[0] == q.count * -(-X.size // tile) * -(-Y.size // tile)
            idx = np.indices([dd[0] for dd in dims]).reshape(rank, -1).astype(np.int64) if rank else None
            so = q.src_offset + sum((idx[i] * dd[1] for i, dd in enumerate(dims)), np.zeros(1, np.int64))
            dof = q.dst_offset + sum((idx[i] * dd[2] for i, dd in enumerate(dims)), np.zeros(1, np.int64))
            xs, ys = np.arange(X.size, dtype=np.int64)[:, None], np.arange(Y.size, dtype=np.int64)[None, :]
            for a, b in zip(np.atleast_1d(so), np.atleast_1d(dof)):
                dsts[d][b + xs * X.dst_stride + ys * Y.dst_stride] = srcs[s][a + xs * X.src_stride + ys]
            continue
        if kind == "move_tile":
            R, V = (int(a) for a in name[:-1].split(", ")[-2:])
            X, Y = q.dim[rank], q.dim[rank + 1]
            assert X.size == R and grid[0] * cl.THREADS >= q.count
            idx = np.indices([dd[0] for dd in dims]).reshape(rank, -1).astype(np.int64)
            so = q.src_offset + sum(idx[i] * dd[1] for i, dd in enumerate(dims))
            dof = q.dst_offset + sum(idx[i] * dd[2] for i, dd in enumerate(dims))
            for x in range(R):
                for y in range(V):
                    dsts[d][dof + x * X.dst_stride + y * Y.dst_stride] = \
                        srcs[s][so + x * X.src_stride + y * Y.src_stride]
            continue
        items = int(name[:-1].split(", ")[4 if kind == "move_vec" else 3])
        if kind == "move_cvt":       # U runs of V a thread over one contiguous dimension
            items *= int(name[:-1].split(", ")[7])
            assert rank == 1 and dims[0][1] == dims[0][2] == 1
        assert grid[0] * cl.THREADS * items >= q.count
        sb = None
        if kind in ("move_vec", "move_cvt") and q.scale_bias:
            sb = (float(np.int64(q.scale64).view(np.float64)), float(np.int64(q.bias64).view(np.float64)))
        k = cs._Pass(kind == "move_fill", s, d, dims, q.src_offset, q.dst_offset, q.src_type, q.dst_type, sb,
                     q.fill_bits % 2**64)
        emulate_pass(k, srcs, dsts)
    return names


def family_cases():
    f32, f16, i8, u64, f64 = DataType.FLOAT32, DataType.FLOAT16, DataType.INT8, DataType.UINT64, DataType.FLOAT64
    yield "identity", ElementWiseIdentityOperatorDesc(T(f32, [2, 3, 5])), [f32]
    yield "identity-sb16", ElementWiseIdentityOperatorDesc(T(f16, [4, 7]), None, ScaleBias(0.5, -2.0)), [f16]
    yield "identity-sb64", ElementWiseIdentityOperatorDesc(T(f64, [33]), None, ScaleBias(3.0, 0.25)), [f64]
    yield "cast", CastOperatorDesc(T(f32, [3, 40]), T(i8, [3, 40])), [f32]
    yield "cast64", CastOperatorDesc(T(u64, [5, 9]), T(f16, [5, 9])), [u64]
    for mode in PaddingMode:
        yield f"pad-{mode.name}", PaddingOperatorDesc(T(f32, [2, 3, 4, 5]), None, mode, 1.5, [0, 1, 2, 3],
                                                      [1, 0, 3, 2]), [f32]
        yield f"pad1-{mode.name}", Padding1OperatorDesc(T(i8, [5, 6]), None, mode, i8, -100, [4, 0],
                                                        [2, 5]), [i8]
    yield "pad-1d", PaddingOperatorDesc(T(f16, [7]), None, PaddingMode.REFLECTION, 0.0, [6], [6]), [f16]
    ins = [T(f32, [2, n, 3]) for n in (1, 4, 2)]
    yield "join", JoinOperatorDesc(ins, None, 1), [f32] * 3
    yield "split", SplitOperatorDesc(T(f16, [5, 7, 3]), [T(f16, [5, n, 3]) for n in (2, 1, 4)], 1), [f16]
    yield "tile", TileOperatorDesc(T(f32, [2, 3, 4]), None, [3, 1, 2]), [f32]
    yield "tile8", TileOperatorDesc(T(i8, [2] * 8), None, [2] * 8), [i8]
    yield "s2d", SpaceToDepthOperatorDesc(T(f32, [2, 3, 4, 6]), None, 2), [f32]
    yield "d2s", DepthToSpaceOperatorDesc(T(f32, [2, 12, 2, 3]), None, 2), [f32]
    for order in DepthSpaceOrder:
        yield f"s2d1-{order.name}", SpaceToDepth1OperatorDesc(T(f16, [1, 2, 6, 9]), None, 3, order), [f16]
        yield f"d2s1-{order.name}", DepthToSpace1OperatorDesc(T(u64, [2, 8, 3, 2]), None, 2, order), [u64]
        # widths that move_tile takes (a multiple of 16 bytes along the tile's Y axis)
        for dt, b in ((f32, 2), (f16, 3), (u64, 2), (i8, 4)):
            w = b * 32
            yield (f"s2d1-tile-{dt.name}-{order.name}",
                   SpaceToDepth1OperatorDesc(T(dt, [2, 3, 2 * b, w]), None, b, order), [dt])
            yield (f"d2s1-tile-{dt.name}-{order.name}",
                   DepthToSpace1OperatorDesc(T(dt, [2, 3 * b * b, 2, 32]), None, b, order), [dt])


def case_inputs(dtypes, descs, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for t, d in zip(dtypes, descs):
        n = int(np.prod(d.sizes))
        words = special_words(t, n, seed)[:n] if t.numpy_dtype.kind == "f" else \
            rng.integers(0, np.iinfo(WORD[t.size]).max, n, dtype=np.uint64, endpoint=True).astype(WORD[t.size])
        words = np.resize(words, n)
        rng.shuffle(words)
        out.append(words.view(t.numpy_dtype).reshape(d.sizes))
    return out


@pytest.mark.parametrize("name,desc,dtypes", list(family_cases()), ids=[c[0] for c in family_cases()])
@pytest.mark.parametrize("fuse", [True, False])
def test_kernel_passes_emulated_equal_cpu(name, desc, dtypes, fuse):
    desc.validate(FL)
    arrays = case_inputs(dtypes, desc.inputs)
    want = dml.Device("cpu", feature_level=FL).run_all(desc, *arrays)
    plan = desc.lower()
    srcs = [a.reshape(-1).view(WORD[a.itemsize]).copy() for a in arrays]
    dsts = [np.zeros(int(np.prod(t.sizes)), WORD[t.data_type.size]) for t in desc.outputs]
    emulate(plan, srcs, dsts, fuse=fuse)
    for got, w in zip(dsts, want):
        assert np.array_equal(got, w.reshape(-1).view(WORD[w.itemsize])), name
    if fuse and name.startswith("pad"):
        assert len(cs.kernel_passes(plan, fuse=True)) == 1     # the fused padding program


@pytest.mark.parametrize("name,desc,dtypes", list(family_cases()), ids=[c[0] for c in family_cases()])
def test_move_steps_emulated_equal_cpu(name, desc, dtypes):
    """The launch parameters themselves (move_vec's V-element runs, move_tile's
    tiles and group index space) give the CPU backend's bytes."""
    desc.validate(FL)
    arrays = case_inputs(dtypes, desc.inputs)
    want = dml.Device("cpu", feature_level=FL).run_all(desc, *arrays)
    srcs = [a.reshape(-1).view(WORD[a.itemsize]).copy() for a in arrays]
    dsts = [np.zeros(int(np.prod(t.sizes)), WORD[t.data_type.size]) for t in desc.outputs]
    names = emulate_steps(desc.lower(), srcs, dsts)
    for got, w in zip(dsts, want):
        assert np.array_equal(got, w.reshape(-1).view(WORD[w.itemsize])), name
    if "-tile-" in name:
        assert names == ["move_tile"], names


def permuted_cases():
    """Identity of permuted views (the input's strides a permutation of a
    contiguous layout), each (name, desc, dtype, storage order): NCHW views
    of NHWC tensors and the reverse, 5-D permutations, sizes that leave
    partial tiles, every element size."""
    f32, f16, u8, u64 = DataType.FLOAT32, DataType.FLOAT16, DataType.UINT8, DataType.UINT64
    for dt, sizes, order in [(f32, (2, 24, 17, 19), (0, 2, 3, 1)), (f32, (2, 17, 19, 24), (0, 3, 1, 2)),
                             (f16, (3, 70, 9, 20), (0, 2, 3, 1)), (u8, (2, 33, 5, 65), (0, 2, 3, 1)),
                             (u64, (2, 40, 3, 30), (0, 2, 3, 1)), (f32, (2, 64, 5, 4, 66), (0, 3, 2, 4, 1)),
                             (f32, (2, 20, 4, 3, 18), (0, 3, 4, 2, 1)), (f32, (130, 129), (1, 0)),
                             (f16, (16, 16), (1, 0)), (f32, (3, 65, 2, 64), (2, 0, 3, 1))]:
        # storage order: the axes from outermost to innermost in memory
        strides = [0] * len(sizes)
        step = 1
        for axis in reversed(order):
            strides[axis] = step
            step *= sizes[axis]
        yield (f"{dt.name}-{'x'.join(map(str, sizes))}-{''.join(map(str, order))}",
               ElementWiseIdentityOperatorDesc(T(dt, list(sizes), strides)), dt)


def _stored(x, desc_in):
    """The flat buffer holding logical ``x`` in ``desc_in``'s element strides."""
    span = 1 + sum((n - 1) * st for n, st in zip(desc_in.sizes, desc_in.strides))
    buf = np.zeros(span, x.dtype)
    view = np.lib.stride_tricks.as_strided(buf, x.shape, [st * x.itemsize for st in desc_in.strides])
    view[...] = x
    return buf


@pytest.mark.parametrize("name,desc,dt", list(permuted_cases()), ids=[c[0] for c in permuted_cases()])
def test_transpose_steps_emulated(name, desc, dt):
    """A permuted view made contiguous is one move_transpose launch (tiles
    through shared memory) whose parameters, executed, give the view's
    elements in order."""
    desc.validate(FL)
    x = case_inputs([dt], [T(dt, desc.inputs[0].sizes)], seed=2)[0]
    word = WORD[dt.size]
    srcs = [_stored(x, desc.inputs[0]).view(word)]
    dsts = [np.zeros(x.size, word)]
    names = emulate_steps(desc.lower(), srcs, dsts)
    assert names == ["move_transpose"], names
    assert np.array_equal(dsts[0], np.ascontiguousarray(x).reshape(-1).view(word))


def word_copy_cases():
    f32, f16, i8, u64 = DataType.FLOAT32, DataType.FLOAT16, DataType.INT8, DataType.UINT64
    yield "tile", TileOperatorDesc(T(f32, [2, 3, 8]), None, [3, 1, 2]), [f32]
    yield "tile-2x2", TileOperatorDesc(T(f16, [2, 3, 5, 16]), None, [1, 2, 2, 3]), [f16]
    yield "tile-i8", TileOperatorDesc(T(i8, [2, 2, 3, 32]), None, [2, 1, 2, 3]), [i8]
    yield "join", JoinOperatorDesc([T(f32, [2, n, 4]) for n in (1, 4, 2)], None, 1), [f32] * 3
    yield "split", SplitOperatorDesc(T(u64, [5, 7, 2]), [T(u64, [5, n, 2]) for n in (2, 1, 4)], 1), [u64]


@pytest.mark.parametrize("R", [0, 1, 2, 3])
@pytest.mark.parametrize("U", [1, 2, 4])
@pytest.mark.parametrize("name,desc,dtypes", list(word_copy_cases()), ids=[c[0] for c in word_copy_cases()])
def test_word_copy_steps_emulated(name, desc, dtypes, U, R, monkeypatch):
    """Plain passes of whole 16-byte words go through move_wcopy (U words a
    thread; 1 to R repeat dimensions out of its index space) whose
    parameters, executed, give the CPU backend's bytes."""
    monkeypatch.setattr(cs, "WORD_COPY", U)
    monkeypatch.setattr(cs, "WORD_REPEAT", (R, U))
    monkeypatch.setattr(cs, "WORD_COPY_MIN_RANK", 1)
    desc.validate(FL)
    arrays = case_inputs(dtypes, desc.inputs)
    want = dml.Device("cpu", feature_level=FL).run_all(desc, *arrays)
    srcs = [a.reshape(-1).view(WORD[a.itemsize]).copy() for a in arrays]
    dsts = [np.zeros(int(np.prod(t.sizes)), WORD[t.data_type.size]) for t in desc.outputs]
    names = emulate_steps(desc.lower(), srcs, dsts, plain_via=None)
    assert "move_wcopy" in names, names
    for got, w in zip(dsts, want):
        assert np.array_equal(got, w.reshape(-1).view(WORD[w.itemsize])), name


def test_word_copy_takes_three_dimensions_and_up():
    """move_wcopy (the default WORD_COPY) where the word plan has at least
    WORD_COPY_MIN_RANK dimensions (TILE), strided_copy below (a JOIN on the
    outer axis)."""
    f32 = DataType.FLOAT32
    tile = TileOperatorDesc(T(f32, [2, 3, 8]), None, [1, 2, 2]).lower()
    (name, *_), = cs.move_steps(tile, [0], [48], [0])
    assert name.startswith("move_wcopy<") and name.endswith(f", u32, {cs.WORD_COPY}, 0>"), name
    join = JoinOperatorDesc([T(f32, [4, 8]), T(f32, [4, 8])], None, 1).lower()
    assert [st[0].split("<")[0] for st in cs.move_steps(join, [0, 0], [32, 32], [0])] == ["strided_copy"] * 2


def test_word_copy_reads_a_repeated_word_once(monkeypatch):
    """A word copy with 1 to WORD_REPEAT[0] repeat dimensions takes them out
    of move_wcopy's index space: a thread WORD_REPEAT[1] input words, each
    stored at every repeat, so the grid covers the input's words, not the
    output's; with more repeat dimensions the pass keeps them all inside."""
    f32 = DataType.FLOAT32
    n = 16 * 64 * 128 * 128
    monkeypatch.setattr(cs, "WORD_REPEAT", (1, 1))
    tile = TileOperatorDesc(T(f32, [16, 64, 128, 128]), None, [1, 1, 3, 1]).lower()
    (name, q, grid, *_), = cs.move_steps(tile, [0], [n], [0])
    assert name == "move_wcopy<2, u32, 1, 1>" and q.count == n // 4 and grid == (n // 4 // cl.THREADS,), name
    assert [(q.dim[i].size, q.dim[i].src_stride, q.dim[i].dst_stride) for i in range(q.rank)] == [
        (1024, 4096, 3 * 4096), (4096, 1, 1), (3, 0, 4096)]
    two = TileOperatorDesc(T(f32, [16, 64, 128, 128]), None, [1, 1, 2, 2]).lower()
    (name, q, grid, *_), = cs.move_steps(two, [0], [n], [0])
    assert name == f"move_wcopy<5, u32, {cs.WORD_COPY}, 0>" and q.count == 4 * n // 4, name
    monkeypatch.setattr(cs, "WORD_REPEAT", (2, 4))
    (name, q, grid, *_), = cs.move_steps(two, [0], [n], [0])
    assert name == "move_wcopy<3, u32, 4, 2>" and grid == (n // 4 // (4 * cl.THREADS),), name
    assert [(q.dim[i].size, q.dim[i].src_stride, q.dim[i].dst_stride) for i in range(q.rank)] == [
        (1024, 4096, 16384), (128, 32, 64), (32, 1, 1), (2, 0, 8192), (2, 0, 32)] and q.count == n // 4


def test_transpose_pass_declines_short_axes():
    """Transposes with a short side keep move_tile / move_vec; the setting
    TRANSPOSE_TILE = 0 turns the kernel off."""
    f32 = DataType.FLOAT32
    short = ElementWiseIdentityOperatorDesc(T(f32, [4, 100, 8], [800, 1, 100])).lower()
    names = [st[0].split("<")[0] for st in cs.move_steps(short, [0], [3200], [0])]
    assert "move_transpose" not in names, names
    wide = ElementWiseIdentityOperatorDesc(T(f32, [4, 100, 40], [4000, 1, 100])).lower()
    assert [st[0].split("<")[0] for st in cs.move_steps(wide, [0], [16000], [0])] == ["move_transpose"]
    old = cs.TRANSPOSE_TILE
    cs.TRANSPOSE_TILE = 0
    try:
        assert "move_transpose" not in [st[0].split("<")[0] for st in cs.move_steps(wide, [0], [16000], [0])]
    finally:
        cs.TRANSPOSE_TILE = old


PAD_SHAPES = [((3, 5, 37), (1, 2, 1), (2, 1, 5)), ((2, 4, 30), (0, 1, 1), (0, 1, 1)),
              ((40,), (3,), (7,)), ((2, 3, 17, 19), (1, 0, 2, 3), (0, 2, 1, 4)),
              ((3, 40, 300), (1, 3, 2), (0, 2, 5)), ((2, 3, 20), (0, 1, 45), (1, 2, 33))]


def pad_cases(dt, seed):
    """(mode, sizes, desc, input) over PAD_SHAPES and every mode the shape allows."""
    for mode in PaddingMode:
        for sizes, start, end in PAD_SHAPES:
            if mode == PaddingMode.REFLECTION and any(max(s, e) >= n for n, s, e in zip(sizes, start, end)):
                continue
            if mode == PaddingMode.SYMMETRIC and any(max(s, e) > n for n, s, e in zip(sizes, start, end)):
                continue
            desc = Padding1OperatorDesc(T(dt, sizes), None, mode, dt, 7 if dt.numpy_dtype.kind != "f" else -2.5,
                                        list(start), list(end))
            desc.validate(FL)
            yield mode, sizes, desc, case_inputs([dt], [T(dt, sizes)], seed=seed)[0]


@pytest.mark.parametrize("dt", [DataType.FLOAT32, DataType.UINT8, DataType.INT16, DataType.FLOAT64],
                         ids=lambda t: t.name)
def test_pad_rows_steps_emulated(dt, monkeypatch):
    """FUSE_PAD "padr": one move_padr launch (rows of any length once
    PADR_MIN_BYTES allows) whose parameters, executed, give the CPU
    backend's bytes."""
    monkeypatch.setattr(cs, "PADR_MIN_BYTES", 0)
    for mode, sizes, desc, x in pad_cases(dt, 12):
        want = dml.Device("cpu", feature_level=FL).run_all(desc, x)[0]
        srcs = [x.reshape(-1).view(WORD[x.itemsize]).copy()]
        dsts = [np.zeros(want.size, WORD[want.itemsize])]
        names = emulate_steps(desc.lower(), srcs, dsts, fuse="padr")
        assert names == ["move_padr"], (mode, sizes, names)
        assert np.array_equal(dsts[0], want.reshape(-1).view(WORD[want.itemsize])), (mode, sizes)


def test_pad_program_recognised_only_exactly():
    desc = PaddingOperatorDesc(T(DataType.FLOAT32, [3, 4]), None, PaddingMode.WRAP, 0.0, [1, 2], [3, 0])
    plan = desc.lower()
    assert cs._pad_program(plan) == (PaddingMode.WRAP, None, (1, 2), (3, 0))
    altered = dml.plan.MovePlan(plan.in_types, plan.out_types, plan.passes[:-1])
    assert cs._pad_program(altered) is None
    assert len(cs.kernel_passes(altered, fuse=True)) == len(altered.passes)
    assert len(cs.kernel_passes(plan, fuse=False)) == len(plan.passes)


def test_move_steps_pick_kernels():
    f32 = DataType.FLOAT32
    plan = CastOperatorDesc(T(f32, [8, 64]), T(DataType.FLOAT16, [8, 64])).lower()
    (name, params, grid, smem, s, d), = cs.move_steps(plan, [0], [512], [0])
    U = cs.CVT_UNROLL
    assert name == f"move_cvt<u32, u16, u32, 8, 1, 2, 0, {U}, {cs.CVT_FLAGS}>" and params.count == 512
    assert (s, d) == (0, 0)
    assert grid == (-(-512 // (cl.THREADS * 8 * U)),)
    plan = JoinOperatorDesc([T(f32, [4, 8]), T(f32, [4, 8])], None, 1).lower()
    steps = cs.move_steps(plan, [0, 0], [32, 32], [0])
    assert [st[0].split("<")[0] for st in steps] == ["strided_copy"] * 2 and [st[4] for st in steps] == [0, 1]
    plan = PaddingOperatorDesc(T(f32, [4, 8]), None, PaddingMode.CONSTANT, 2.5, [1, 1], [1, 1]).lower()
    (name, params, *_), = cs.move_steps(plan, [0], [32], [0], fuse=True)
    assert name.startswith("move_vec<u32, u32, 2,") and name.endswith(", 1, 1, 0, 1>")
    assert params.fill_bits == int(np.float32(2.5).view(np.uint32))
    assert [params.dim[i].map_mode for i in range(2)] == [5, 5]
    wide = PaddingOperatorDesc(T(f32, [4, 30]), None, PaddingMode.REFLECTION, 0.0, [1, 1], [1, 1]).lower()
    (name, params, grid, *_), = cs.move_steps(wide, [0], [120], [0], fuse="rows")
    assert name == "move_pad<u32, 2, u32>" and grid == (1,) and params.dim[1].size == 32
    assert [st[0].split("<")[0] for st in cs.move_steps(plan, [0], [32], [0], fuse="rows")][0] != "move_pad"
    U, minb = cs.PAD_WORDS
    (name, params, grid, *_), = cs.move_steps(wide, [0], [120], [0], fuse="words")
    assert name == f"move_padw<u32, 2, {U}, {minb}>" and params.count == 6 * 32
    assert grid == (-(-(6 * 32 // 4 + 2) // (cl.THREADS * U)),)
    # rows of 128 bytes: move_padw; of PADR_MIN_BYTES and more: move_padr, a warp per row
    assert cs.move_steps(wide, [0], [120], [0], fuse="padr")[0][0].startswith("move_padw<")
    long = PaddingOperatorDesc(T(f32, [5, 100]), None, PaddingMode.REFLECTION, 0.0, [1, 3], [1, 3]).lower()
    (name, params, grid, *_), = cs.move_steps(long, [0], [500], [0], fuse="padr")
    assert name == "move_padr<u32, 2, {}, {}, {}>".format(*cs.PAD_ROWS) and grid == (1,) and params.count == 7 * 106
    # 1- and 2-byte elements (realigned through shuffles) take their own register cap
    small = PaddingOperatorDesc(T(DataType.UINT8, [5, 400]), None, PaddingMode.REFLECTION, 0, [1, 3], [1, 3]).lower()
    (name, *_), = cs.move_steps(small, [0], [2000], [0], fuse="padr")
    assert name == "move_padr<u8, 2, {}, {}, {}>".format(*cs.PAD_ROWS_SMALL)
    # a padded output (not contiguous) keeps the row kernel
    padded_out = PaddingOperatorDesc(T(f32, [4, 30]), T(f32, [6, 32], [40, 1]), PaddingMode.REFLECTION, 0.0,
                                     [1, 1], [1, 1]).lower()
    (name, *_), = cs.move_steps(padded_out, [0], [120], [0], fuse="words")
    assert name == "move_pad<u32, 2, u32>"
    plan = SpaceToDepth1OperatorDesc(T(f32, [2, 3, 8, 16]), None, 2, DepthSpaceOrder.COLUMN_ROW_DEPTH).lower()
    (name, params, grid, *_), = cs.move_steps(plan, [0], [768], [0])
    assert name.startswith("move_tile<u32, ") and name.endswith(", 2, 4>")
    plan = DepthToSpace1OperatorDesc(T(f32, [2, 12, 4, 8]), None, 2, DepthSpaceOrder.DEPTH_COLUMN_ROW).lower()
    (name, params, grid, *_), = cs.move_steps(plan, [0], [768], [0])
    assert name.startswith("move_tile<u32, ") and name.endswith(", 2, 4>")


# -- on a GPU ------------------------------------------------------------------------

def _bytes_equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
        np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))


def _run_both(desc, arrays):
    cpu = dml.Device("cpu", feature_level=FL).run_all(desc, *arrays)
    gpu = dml.Device("cuda", feature_level=FL).run_all(desc, *arrays)
    assert len(cpu) == len(gpu)
    for i, (a, b) in enumerate(zip(cpu, gpu)):
        assert _bytes_equal(a, b), (desc.OPERATOR, i, np.nonzero(a.reshape(-1).view(np.uint8) !=
                                                                  b.reshape(-1).view(np.uint8))[0][:10])


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("name,desc,dtypes", list(family_cases()), ids=[c[0] for c in family_cases()])
def test_family_on_cuda_equals_cpu(name, desc, dtypes):
    _run_both(desc, case_inputs(dtypes, desc.inputs, seed=7))


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("st", TYPES, ids=lambda t: t.name)
def test_cast_every_pair_on_cuda(st):
    words = special_words(st, 3000)
    x = words.view(st.numpy_dtype).reshape(1, -1)
    for dt in TYPES:
        _run_both(CastOperatorDesc(T(st, x.shape), T(dt, x.shape)), [x])


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("st", [DataType.FLOAT16, DataType.FLOAT32, DataType.FLOAT64], ids=lambda t: t.name)
def test_identity_scale_bias_on_cuda(st):
    words = special_words(st, 3000)
    for sb in SCALE_BIAS:
        x = words.view(st.numpy_dtype)
        _run_both(ElementWiseIdentityOperatorDesc(T(st, x.shape), None, ScaleBias(*sb)), [x])


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("mode", list(PaddingMode), ids=lambda m: m.name)
@pytest.mark.parametrize("dt", [DataType.FLOAT32, DataType.UINT8, DataType.FLOAT64, DataType.INT16],
                         ids=lambda t: t.name)
@pytest.mark.parametrize("fuse", [False, True, "rows", "words", "padr"], ids=["passes", "fused", "rows", "words",
                                                                          "padr"])
def test_pad_modes_on_cuda(mode, dt, fuse, monkeypatch):
    monkeypatch.setattr(cs, "FUSE_PAD", fuse)
    for sizes, start, end in [((3, 4, 17, 33), (0, 1, 2, 1), (1, 0, 3, 2)), ((1000,), (999,), (5,)),
                              ((2, 1, 5), (1, 0, 4), (0, 0, 9)), ((64, 130), (1, 1), (1, 1)),
                              ((3, 5, 37), (2, 1, 5), (1, 3, 2)), ((2, 3, 40), (0, 2, 0), (1, 1, 0))]:
        if mode in (PaddingMode.REFLECTION,) and any(max(s, e) >= n for n, s, e in zip(sizes, start, end)):
            continue   # REFLECTION needs padding < size (a rule of the operator)
        if mode == PaddingMode.SYMMETRIC and any(max(s, e) > n for n, s, e in zip(sizes, start, end)):
            continue
        x = case_inputs([dt], [T(dt, sizes)], seed=3)[0]
        _run_both(Padding1OperatorDesc(T(dt, sizes), None, mode, dt, 7 if dt.numpy_dtype.kind != "f" else -2.5,
                                       list(start), list(end)), [x])


@pytest.mark.cuda
@needs_cuda
def test_padded_and_broadcast_strides_on_cuda():
    f32, f16 = DataType.FLOAT32, DataType.FLOAT16
    padded = T(f32, [3, 5, 7], [64, 9, 1])           # gaps between rows and planes
    x = np.arange(3 * 5 * 7, dtype=np.float32).reshape(3, 5, 7)
    _run_both(PaddingOperatorDesc(padded, None, PaddingMode.REFLECTION, 0.0, [0, 2, 3], [1, 2, 1]), [x])
    _run_both(CastOperatorDesc(padded, T(f16, [3, 5, 7], [40, 8, 1])), [x])
    _run_both(TileOperatorDesc(padded, None, [2, 1, 3]), [x])
    bcast = T(f32, [4, 6, 5], [0, 5, 1])            # the same plane 4 times
    xb = np.broadcast_to(np.arange(30, dtype=np.float32).reshape(1, 6, 5), (4, 6, 5))
    _run_both(ElementWiseIdentityOperatorDesc(bcast, None, ScaleBias(2.0, 1.0)), [xb])
    _run_both(SplitOperatorDesc(bcast, [T(f32, [4, 2, 5]), T(f32, [4, 4, 5])], 1), [xb])
    _run_both(JoinOperatorDesc([bcast, padded.__class__(f32, [4, 5, 5], [25, 5, 1])], None, 1),
              [xb, np.ones((4, 5, 5), np.float32)])
    _run_both(SpaceToDepth1OperatorDesc(T(f16, [2, 3, 4, 6], [200, 50, 12, 2]), None, 2,
                                        DepthSpaceOrder.COLUMN_ROW_DEPTH),
              [np.arange(144, dtype=np.float16).reshape(2, 3, 4, 6)])


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("tile", [32, 64])
def test_transposes_on_cuda(tile, monkeypatch):
    """move_transpose (both tile sizes) gives the CPU backend's bytes for
    every permuted case, at misaligned addresses, writing nothing outside
    the output."""
    for name, desc, dt in permuted_cases():
        x = case_inputs([dt], [T(dt, desc.inputs[0].sizes)], seed=4)[0]
        want = np.ascontiguousarray(x).reshape(-1)
        buf = _stored(x, desc.inputs[0])
        for so, do in ((0, 0), (1, 3)):
            got, names = _run_raw(desc, buf, so, do, TRANSPOSE_TILE=tile)
            assert [n.split("<")[0] for n in names] == ["move_transpose"], names
            assert _bytes_equal(got.view(want.dtype), want), (name, so, do)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("R", [0, 1, 2])
@pytest.mark.parametrize("U", [1, 2, 4])
def test_word_copies_on_cuda(U, R):
    """move_wcopy (U words a thread, R repeat dimensions out of its index
    space) gives the CPU backend's bytes; at misaligned addresses the pass
    keeps strided_copy; nothing is written outside the output."""
    for name, desc, dtypes in word_copy_cases():
        if len(dtypes) != 1 or len(desc.outputs) != 1:
            continue
        x = case_inputs(dtypes, desc.inputs, seed=6)[0]
        want = dml.Device("cpu", feature_level=FL).run_all(desc, x)[0].reshape(-1)
        es = x.itemsize
        for so, do in ((0, 0), (16 // es, 32 // es), (1, 0)):
            got, names = _run_raw(desc, x, so, do, WORD_COPY=U, WORD_COPY_MIN_RANK=1, WORD_REPEAT=(R, U))
            if so * es % 16 == 0 and do * es % 16 == 0:
                assert any(n.startswith("move_wcopy<") for n in names), (name, names)
            assert _bytes_equal(got.view(want.dtype), want), (name, so, do)


@pytest.mark.cuda
@needs_cuda
def test_join_split_many_tensors_on_cuda():
    rng = np.random.default_rng(1)
    for dt in (DataType.FLOAT32, DataType.INT8, DataType.UINT64):
        for axis in range(3):
            parts = [rng.integers(0, 100, size=[2 + (i if a == axis else 0) + a for a in range(3)]).astype(
                dt.numpy_dtype) for i in range(6)]
            _run_both(JoinOperatorDesc([T(dt, p.shape) for p in parts], None, axis), parts)
            whole = np.concatenate(parts, axis)
            _run_both(SplitOperatorDesc(T(dt, whole.shape), [T(dt, p.shape) for p in parts], axis), [whole])


@pytest.mark.cuda
@needs_cuda
def test_record_move_on_raw_pointers_and_variants():
    import cupy
    backend = cb.CudaBackend(0)
    f32 = DataType.FLOAT32
    cases = [PaddingOperatorDesc(T(f32, [3, 9, 70]), None, m, 4.0, [0, 3, 5], [2, 1, 6])
             for m in (PaddingMode.CONSTANT, PaddingMode.SYMMETRIC)]
    cases += [DepthToSpace1OperatorDesc(T(f32, [2, 16, 5, 7]), None, 2, DepthSpaceOrder.COLUMN_ROW_DEPTH),
              TileOperatorDesc(T(f32, [3, 5, 7]), None, [2, 3, 2]),
              CastOperatorDesc(T(f32, [999]), T(DataType.INT16, [999]))]
    stream = cupy.cuda.Stream(non_blocking=True)
    for desc in cases:
        plan = desc.lower()
        x = case_inputs([f32], desc.inputs, seed=5)[0]
        want = dml.Device("cpu", feature_level=FL).run_all(desc, x)[0]
        src = cupy.asarray(x.reshape(-1))
        for fuse, via in itertools.product((True, False, "rows", "words", "padr"), ("auto", "move", "strided_copy")):
            old = cs.FUSE_PAD, cs.MOVE_PLAIN_VIA
            cs.FUSE_PAD, cs.MOVE_PLAIN_VIA = fuse, via
            try:
                out = cupy.full(want.size, 0xAB, dtype=want.dtype)
                be = cb.CudaBackend(0)          # fresh launch cache: the variant is built
                sps, dps = [src.data.ptr], [out.data.ptr]
                be.record_move(plan, sps, [src.size], dps, [out.size])(sps, dps, stream.ptr)
                stream.synchronize()
            finally:
                cs.FUSE_PAD, cs.MOVE_PLAIN_VIA = old
            assert _bytes_equal(out.get(), want.reshape(-1)), (desc.OPERATOR, fuse, via)
    with pytest.raises(dml.UnsupportedError, match="not a multiple"):
        plan = cases[-1].lower()
        backend.record_move(plan, [src.data.ptr + 2], [10], [src.data.ptr], [10])


def _run_raw(desc, x, so=0, do=0, sms=None, **knobs):
    """``desc`` through ``CudaBackend.record_move`` on raw CuPy pointers, the
    input ``so`` and the output ``do`` elements past a 256-byte boundary, the
    output poisoned first, with the backend's module settings ``knobs`` (a
    fresh backend: the variant is built; ``sms``: the multiprocessor count it
    sizes persistent grids by, small to make each block loop); the output's
    elements and the kernels' names."""
    import cupy
    want_dt = DataType(desc.outputs[0].data_type).numpy_dtype
    n_out = int(np.prod(desc.outputs[0].sizes))
    src_buf = cupy.asarray(np.concatenate([np.zeros(so, x.dtype), x.reshape(-1)]))
    es_in, es_out = x.dtype.itemsize, want_dt.itemsize
    poison = WORD[es_out](int("AB" * es_out, 16))
    out_buf = cupy.full(n_out + do + 8, poison, dtype=WORD[es_out])
    old = {k: getattr(cs, k) for k in knobs}
    try:
        for k, v in knobs.items():
            setattr(cs, k, v)
        be = cb.CudaBackend(0)
        if sms:
            be.__dict__["multiprocessors"] = sms
        rec = be.record_move(desc.lower(), [src_buf.data.ptr + so * es_in], [x.size],
                             [out_buf.data.ptr + do * es_out], [n_out])
        rec([src_buf.data.ptr + so * es_in], [out_buf.data.ptr + do * es_out], 0)
        cupy.cuda.Device().synchronize()
    finally:
        for k, v in old.items():
            setattr(cs, k, v)
    got = out_buf.get()
    assert (got[:do] == poison).all(), "written before the output"
    assert (got[do + n_out:] == poison).all(), "written past the output"
    return got[do:do + n_out], rec.names


PAD_WORD_CASES = [(w, DataType.FLOAT32) for w in ((1, 1), (1, 8), (2, 6), (4, 4))] + \
    [(w, t) for t in (DataType.UINT8, DataType.INT16, DataType.FLOAT64) for w in (cs.PAD_WORDS, (2, 4))]


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("words,dt", PAD_WORD_CASES,
                         ids=[f"U{w[0]}B{w[1]}-{t.name}" for w, t in PAD_WORD_CASES])
def test_pad_words_kernel_on_cuda(words, dt):
    """move_padw (every variant benchmarked, on float32; the default on
    other element sizes) gives the CPU backend's bytes for
    every mode, with misaligned input and output addresses, row lengths that
    are no multiple of a 16-byte word, fill rows and planes (CONSTANT along
    outer axes), one-row outputs, and it writes nothing outside the output."""
    shapes = [((3, 5, 37), (1, 2, 1), (2, 1, 5)), ((2, 4, 30), (0, 1, 1), (0, 1, 1)),
              ((40,), (3,), (7,)), ((2, 3, 17, 19), (1, 0, 2, 3), (0, 2, 1, 4)),
              ((3, 40, 300), (1, 3, 2), (0, 2, 5)), ((2, 3, 20), (0, 1, 45), (1, 2, 33))]
    for mode in PaddingMode:
        for sizes, start, end in shapes:
            if mode == PaddingMode.REFLECTION and any(max(s, e) >= n for n, s, e in zip(sizes, start, end)):
                continue
            if mode == PaddingMode.SYMMETRIC and any(max(s, e) > n for n, s, e in zip(sizes, start, end)):
                continue
            desc = Padding1OperatorDesc(T(dt, sizes), None, mode, dt, 7 if dt.numpy_dtype.kind != "f" else -2.5,
                                        list(start), list(end))
            desc.validate(FL)
            x = case_inputs([dt], [T(dt, sizes)], seed=11)[0]
            want = dml.Device("cpu", feature_level=FL).run_all(desc, x)[0].reshape(-1)
            for so, do in ((0, 0), (1, 3), (3, 1), (2, 2)):
                got, names = _run_raw(desc, x, so, do, FUSE_PAD="words", PAD_WORDS=words)
                assert names[0].startswith("move_padw<"), names
                assert _bytes_equal(got.view(want.dtype), want), (mode.name, sizes, so, do)


PAD_ROW_CASES = [(w, DataType.FLOAT32) for w in ((2, 1, 0), (1, 8, 0), (2, 5, 0), (4, 1, 0), (3, 1, 0), (2, 6, 2),
                                                  (2, 8, 2), (1, 8, 2), (3, 6, 2), (1, 8, 4), (2, 8, 4), (3, 8, 4))] + \
    [(w, t) for t in (DataType.UINT8, DataType.INT16, DataType.FLOAT64)
     for w in (cs.PAD_ROWS, cs.PAD_ROWS_SMALL, (1, 8, 0), (3, 1, 0), (2, 8, 2), (2, 8, 4))]


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("rows,dt", PAD_ROW_CASES, ids=[f"U{w[0]}B{w[1]}F{w[2]}-{t.name}" for w, t in PAD_ROW_CASES])
def test_pad_rows_kernel_on_cuda(rows, dt):
    """move_padr (FUSE_PAD "padr", rows of any length) gives the CPU
    backend's bytes for every mode over move_padw's cases (fill rows, rows
    no multiple of 16 bytes, borders wider than a word), at misaligned
    addresses, writing nothing outside the output."""
    for mode, sizes, desc, x in pad_cases(dt, 12):
        want = dml.Device("cpu", feature_level=FL).run_all(desc, x)[0].reshape(-1)
        for so, do in ((0, 0), (1, 3), (3, 1)):
            got, names = _run_raw(desc, x, so, do, FUSE_PAD="padr", PAD_ROWS=rows, PAD_ROWS_SMALL=rows,
                                  PADR_MIN_BYTES=0)
            assert names[0].endswith(", {}, {}, {}>".format(*rows)), (names, rows)
            assert names[0].startswith("move_padr<"), names
            assert _bytes_equal(got.view(want.dtype), want), (mode.name, sizes, so, do)


CVT_CASES = [(0, 0), (1, 0), (2, 0), (4, 0), (1, 2), (2, 2), (4, 2)]


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("unroll,flags", CVT_CASES, ids=[f"U{u}F{f}" for u, f in CVT_CASES])
def test_cast_f32_f16_kernels_on_cuda(unroll, flags):
    """float32 -> float16 through move_cvt (U runs a thread, pairs through
    cvt.rn.f16x2.f32, runs holding a NaN element by element) and move_vec:
    NumPy's bytes for 2^22 random bit patterns, every float32 around the
    float16 rounding, subnormal and overflow boundaries, and NaNs with
    payloads scattered one to a run, at misaligned addresses and with counts
    that leave a partial run; nothing written outside the output."""
    rng = np.random.default_rng(21)
    rand = rng.integers(0, 2**32, 2**22, dtype=np.uint64).astype(np.uint32)
    bounds = [0x477FE000, 0x477FF000, 0x38800000, 0x33000000, 0x33800000, 0x387FC000, 0x00000001, 0x3F800000]
    near = np.concatenate([np.arange(b - 4096, b + 4096, dtype=np.int64) for b in bounds]) % 2**31
    near = np.concatenate([near, near | 2**31]).astype(np.uint32)
    words = np.concatenate([special_words(DataType.FLOAT32, 100), near, rand])
    nans = np.array([0x7F800001, 0xFFC00001, 0x7FBFFFFF, 0x7F802001, 0xFFFFFFFF], np.uint32)
    pos = rng.choice(words.size, 3000, replace=False)
    words[pos] = nans[np.arange(pos.size) % nans.size]
    x = words.view(np.float32)
    with np.errstate(all="ignore"):
        want = convert_array(x, np.float16).view(np.uint16)
    for n, so, do in ((x.size, 0, 0), (x.size - 5, 1, 0), (x.size - 9, 0, 3), (1000003, 3, 5), (7, 0, 0)):
        desc = CastOperatorDesc(T(DataType.FLOAT32, [n]), T(DataType.FLOAT16, [n]))
        got, names = _run_raw(desc, x[:n], so, do, sms=3, CVT_UNROLL=unroll, CVT_FLAGS=flags)
        assert names[0].startswith("move_cvt<" if unroll else "move_vec<"), names
        bad = np.nonzero(got != want[:n])[0]
        assert not len(bad), (unroll, n, so, do, [(hex(int(words[i])), hex(int(got[i])), hex(int(want[i])))
                                                   for i in bad[:5]])


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("unroll", [1, 2, 4])
def test_cvt_kernel_every_pair_on_cuda(unroll):
    """move_cvt for every CAST pair (the default unroll; a few pairs with the
    others) and scale/bias (the generic conversion), at misaligned addresses:
    the CPU backend's bytes."""
    f16, f32, f64, i32, u8 = DataType.FLOAT16, DataType.FLOAT32, DataType.FLOAT64, DataType.INT32, DataType.UINT8
    few = {(f32, f16), (f32, i32), (f16, f32), (f64, f16), (u8, f32), (DataType.INT64, f16)}
    for st in TYPES:
        words = special_words(st, 3001)
        x = words.view(st.numpy_dtype)
        for dt in TYPES:
            if unroll != cs.CVT_UNROLL and (st, dt) not in few:
                continue
            desc = CastOperatorDesc(T(st, x.shape), T(dt, x.shape))
            want = dml.Device("cpu", feature_level=FL).run_all(desc, x)[0].reshape(-1)
            for so, do in ((0, 0), (1, 1)):
                got, names = _run_raw(desc, x, so, do, CVT_UNROLL=unroll)
                assert st == dt or names[0].startswith("move_cvt<"), names
                assert _bytes_equal(got.view(want.dtype), want), (st.name, dt.name, so, do)
    for st in (DataType.FLOAT16, DataType.FLOAT32, DataType.FLOAT64):
        x = special_words(st, 3001).view(st.numpy_dtype)
        for sb in SCALE_BIAS:
            desc = ElementWiseIdentityOperatorDesc(T(st, x.shape), None, ScaleBias(*sb))
            want = dml.Device("cpu", feature_level=FL).run_all(desc, x)[0].reshape(-1)
            got, names = _run_raw(desc, x, 1, 2, CVT_UNROLL=unroll)
            assert names[0].startswith("move_cvt<"), names
            assert _bytes_equal(got.view(want.dtype), want), (st.name, sb)


def test_pad_hint_comes_only_from_the_lowering():
    """The fused padding path reads ``MovePlan.pad``, which only the padding
    lowering sets: a plan rebuilt with other passes (or by
    ``dataclasses.replace``) has none and runs pass by pass; every mode's
    hint names the program the lowering built."""
    import dataclasses
    for mode in PaddingMode:
        value = 2.5 if mode == PaddingMode.CONSTANT else 0.0
        desc = PaddingOperatorDesc(T(DataType.FLOAT32, [3, 4, 5]), None, mode, value, [1, 0, 2], [2, 1, 0])
        plan = desc.lower()
        want_value = value if mode == PaddingMode.CONSTANT else None
        assert cs._pad_program(plan) == (int(mode), want_value, (1, 0, 2), (2, 1, 0))
        assert len(cs.kernel_passes(plan, fuse=True)) == 1
        assert cs._pad_program(dataclasses.replace(plan)) is None
        assert cs._pad_program(dml.plan.MovePlan(plan.in_types, plan.out_types, plan.passes)) is None
        assert dataclasses.replace(plan) == plan                 # the hint is not part of the program's value
    # no padding at all: a single copy, nothing to fuse
    plan = PaddingOperatorDesc(T(DataType.FLOAT32, [3, 4]), None, PaddingMode.EDGE, 0.0, [0, 0], [0, 0]).lower()
    assert cs._pad_program(plan) is None
