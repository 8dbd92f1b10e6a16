"""CUDA backend: sources compile with nvcc anywhere; the word-widening logic and
the kernels' index arithmetic are checked on the CPU (emulations that read the
parameter blocks through their ctypes declarations); DLPack paths, the launch
path (raw pointers, caller's stream) and sanitizer-friendly odd layouts on a
GPU. FOLD and SLICE_GRAD: test_cuda_emulation.py (CPU) and test_cuda_fold.py (GPU)."""
import ctypes
import math
import re
import shutil
import subprocess

import numpy as np
import pytest

import opendml as dml
from opendml.plan import CopyPlan, MovePlan
from opendml.runtime import params as P
from opendml.runtime.cuda import launch, tuned as ct
from opendml.runtime.cuda.launch import INCLUDE, KERNELS
from opendml.runtime.cuda.tuned import _unfold_launch, unfold_box, word_plan
from tests import reference as ref
from tests.conftest import cuda_available
from tests.runtime import nvcc
from tests.runtime.test_cuda_emulation import copy_reference, emulate_unfold_tile, unfold_reference

needs_cuda = pytest.mark.skipif(not cuda_available(), reason="CUDA is not available here")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_kernels_compile_with_nvcc(tmp_path):
    """Every kernel template, instantiated for a spread of arguments
    (tests/runtime/nvcc), with params.h found through -I as NVRTC finds it,
    to PTX as NVRTC compiles it (ptxas, which only its three one-instruction
    ``asm`` statements would reach, runs on the device; half the time)."""
    r = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", "--fmad=false", *nvcc.includes(), "-ptx",
                        str(nvcc.instances(KERNELS)), "-o", str(tmp_path / "k.ptx")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr.lower(), r.stderr


def test_kernels_read_parameters_by_field_name():
    """No parameter block is indexed by position (p[9], q[7*d+6], tq[3*d+2]):
    every kernel takes a params.h struct BY VALUE (a __grid_constant__
    argument, read through ``p = &params``: no device memory of opendml's own,
    issue 23), and every kernel in the file is instantiated by the nvcc check."""
    src = KERNELS.read_text()
    assert '#include "params.h"' in src
    assert not re.search(r"\b(p|q|tq|ql)\[[^\]]*\]", re.sub(r"//.*", "", src))
    kernels = set(re.findall(r"__global__ void __launch_bounds__\(.*?\) (\w+)\(", src))
    assert kernels == {"strided_copy", "unfold_gather", "unfold1d_tile", "unfold_tile", "fold_gather",
                       "fold1d_tile", "scatter"}
    for name in kernels:
        params = re.search(rf"{name}\([^)]*const ODML_GRID_CONSTANT (odml_\w+) params\) {{\n"
                           rf"    const (odml_\w+)\* __restrict__ p = &params;", src)
        assert params and params.group(1) == params.group(2) and params.group(1) in P.STRUCTS, name
        assert re.search(rf"template __global__ void {name}<", nvcc.instances(KERNELS).read_text()), \
            f"{name} is not instantiated"


def test_launch_specs_fill_the_declared_structures():
    plan = dml.UnfoldOperatorDesc(dml.TensorDesc(dml.DataType.FLOAT16, [2, 3, 9, 11]), None, [3, 4], [2, 3],
                                  [2, 1], [2, 0], [0, 3]).lower().kernel_plan()
    name, params, grid, smem = _unfold_launch(plan)
    assert isinstance(params, P.UnfoldParams) and len(bytes(params)) == ctypes.sizeof(P.UnfoldParams)
    assert (params.dims, params.window_count, params.block_count) == (2, 12, plan.columns)
    assert [params.dim[d].window for d in range(2)] == [3, 4] and params.dim[1].image_stride == 1
    copy = CopyPlan(4, (3, 64), 5, (70, 1), 0, (64, 1))
    name, params, grid, _ = ct._copy_launch(copy, 0, 0, 300)
    assert isinstance(params, P.CopyParams) and params.count == 3 * 64 and params.element_size == 4
    assert name.startswith("strided_copy<u32, 2,") and list(params.sizes[:2]) == [3, 64]


def run_word_plan_on_cpu(plan, src):
    """Execute the widened plan with NumPy, reversing elements inside words
    where the kernel would: must equal the element-wise plan."""
    w, rev, pick, wp = word_plan(plan, 0, 0, src.nbytes // plan.element_size)
    words = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.dtype((np.void, 16))}[w]
    out = np.zeros(plan.count * plan.element_size, np.uint8)
    if pick:  # input word i: the even elements of 16-byte word i, as 8 bytes
        b = src.view(np.uint8)[:src.nbytes // 16 * 16]
        picked = np.ascontiguousarray(b.reshape(-1, 8 // pick, 2, pick)[:, :, 0, :]).reshape(-1)
        copy_reference(wp, picked.view(np.uint64), out.view(np.uint64))
    elif w == 16:  # NumPy has no 16-byte integer: copy 16-byte records
        s16 = src.view(np.uint8).view(np.dtype("V16"))
        d16 = out.view(np.dtype("V16"))
        copy_reference(wp, s16, d16)
    else:
        copy_reference(wp, src.view(np.uint8).view(words), out.view(words))
    if rev:
        out = out.reshape(-1, w // rev, rev)[:, ::-1, :].reshape(-1)
    return w, out


@pytest.mark.parametrize("es", [1, 2, 4, 8])
@pytest.mark.parametrize("case", ["window", "reverse", "strided", "odd-offset"])
def test_word_plan_equals_element_plan(es, case):
    H = W = 64
    src = np.arange(2 * H * W * es, dtype=np.uint8)
    if case == "window":
        plan = CopyPlan(es, (2, 48, 48), 8 * W + 16, (H * W, W, 1), 0, (48 * 48, 48, 1))
    elif case == "reverse":
        plan = CopyPlan(es, (2, H, W), H * W - 1, (H * W, -W, -1), 0, (H * W, W, 1))
    elif case == "strided":
        plan = CopyPlan(es, (2, 32, 32), 0, (H * W, 2 * W, 2), 0, (1024, 32, 1))
    else:
        plan = CopyPlan(es, (2, 40, 40), 3 * W + 3, (H * W, W, -1), 0, (1600, 40, 1))
    want = np.zeros(plan.count * es, np.uint8)
    copy_reference(plan, src.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[es]),
                   want.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[es]))
    w, got = run_word_plan_on_cpu(plan, src)
    assert np.array_equal(got, want)
    if case in ("window", "reverse"):
        assert w == 16  # the hot cases are widened to 16-byte words
    if case == "strided":
        assert w == 8   # 16-byte loads, 8-byte stores


@pytest.mark.parametrize("es", [1, 2, 4, 8])
def test_stride_two_pairs_never_read_past_the_bound_range(es):
    # The last run ends on the buffer's last element: its pair would read one
    # element past it, so the plan must stay element-wise.
    f = 16 // es
    plan = CopyPlan(es, (3, 2 * f), 0, (4 * f, 2), 0, (2 * f, 1))
    hi = plan.in_span[1]
    assert word_plan(plan, 0, 0, hi + 1)[2] == 0
    assert word_plan(plan, 0, 0, hi + 2)[2] == es


TILE_PLANS = [
    # (spatial, window, strides, dilations, start_pad, end_pad), box columns, box line
    ((56, 56), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 1024, 128),
    ((9, 11), (3, 4), (2, 3), (2, 1), (2, 0), (0, 3), 16, 4),
    ((13, 7), (2, 2), (2, 2), (1, 1), (0, 0), (1, 1), 8, 3),
    ((5, 6, 7), (2, 3, 2), (1, 2, 3), (1, 1, 2), (1, 1, 1), (1, 1, 1), 10, 3),
    ((8, 8, 8), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1), 64, 8),
    ((300,), (5,), (2,), (3,), (4,), (0,), 64, 128),
    ((7, 3, 4, 5), (2, 1, 2, 3), (1, 1, 2, 1), (1, 1, 1, 2), (0, 0, 1, 2), (1, 0, 0, 2), 12, 5),
    # 16-byte stores (VEC 1): a box of 1,026 positions (a tail) then one whose run is not aligned; 1-D boxes
    # with a short far edge; a 3-D box spanning the inner dimensions
    ((200, 6), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 1024, 128),
    ((2100,), (3,), (1,), (1,), (1,), (1,), 1024, 128),
    ((6, 8, 8), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1), 128, 8),
]


@pytest.mark.parametrize("es", [1, 2, 4, 8])
@pytest.mark.parametrize("case", range(len(TILE_PLANS)))
def test_unfold_tile_equals_numpy_path(es, case):
    spatial, window, strides, dil, sp, ep, columns, line = TILE_PLANS[case]
    D, N, C = len(spatial), 2, 3
    desc = dml.UnfoldOperatorDesc(dml.TensorDesc({1: dml.DataType.INT8, 2: dml.DataType.INT16, 4: dml.DataType.INT32,
                                                  8: dml.DataType.INT64}[es], [N, C, *spatial]),
                                  None, window, strides, dil, sp, ep)
    plan = desc.lower().kernel_plan()
    word = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[es]
    src = (np.arange(plan.in_span[1] + 1) % 251 + 1).astype(word)
    want = np.zeros(plan.out_span[1] + 1, word)
    unfold_reference(plan, src, want)
    box = unfold_box(plan, columns=columns, line=line)
    assert box is not None
    name, params, grid, smem = _unfold_launch(plan, box)
    assert isinstance(params, P.UnfoldParams) and params.dims == D
    assert name.startswith("unfold_tile") and grid == (params.work_items,) and smem == math.prod(box[1]) * es
    vec = int(name[:-1].rsplit(",", 1)[1])
    assert vec == ct.tile_vectors(plan, box[0])
    for dst_byte in (0, es) if vec else (0,):       # an output 16-byte aligned, and one that is not
        got, counts = np.zeros_like(want), np.zeros(len(want), np.int64)
        emulate_unfold_tile(params, src, got, vec, dst_byte, es, counts)
        assert np.array_equal(got, want)
        assert counts.max() == 1 and counts.sum() == math.prod(desc.output_tensor.sizes)  # every element once


def test_tile_vectors_follows_the_output_layout():
    """unfold_tile's 16-byte stores are asked for only where a box's columns
    are one contiguous run per window element whose rows start a multiple of
    16 bytes apart."""
    T, F32, I8 = dml.TensorDesc, dml.DataType.FLOAT32, dml.DataType.INT8

    def vec(dtype, spatial, out_strides=None, box=None):
        image = T(dtype, [2, 3, *spatial])
        d = len(spatial)
        desc = dml.UnfoldOperatorDesc(image, None, [3] * d, [1] * d, [1] * d, [1] * d, [1] * d)
        if out_strides is not None:
            out = T(dtype, desc.output_tensor.sizes, out_strides)
            desc = dml.UnfoldOperatorDesc(image, out, [3] * d, [1] * d, [1] * d, [1] * d, [1] * d)
        plan = desc.lower().kernel_plan()
        return ct.tile_vectors(plan, box or unfold_box(plan)[0])
    assert vec(F32, (16, 16)) == 1                        # rows of 256 columns: 1,024 bytes
    assert vec(F32, (15, 15)) == 0                        # rows of 225 columns: 900 bytes
    assert vec(I8, (16, 16)) == 1 and vec(I8, (15, 15)) == 0
    assert vec(F32, (15, 15), [27 * 228, 228, 1]) == 1    # padded rows, 912 bytes apart
    assert vec(F32, (16, 16), [27 * 512, 512, 2]) == 0    # columns 2 apart
    assert vec(F32, (16, 16), box=(4, 8)) == 0            # a box that does not span W: its columns are not one run


def test_unfold_box_limits():
    def plan(spatial, window, strides, dil=None):
        D = len(spatial)
        return dml.UnfoldOperatorDesc(dml.TensorDesc(dml.DataType.FLOAT32, [1, 1, *spatial]), None, window, strides,
                                      dil or [1] * D, [0] * D, [0] * D).lower().kernel_plan()
    t, ext = unfold_box(plan((56, 56), (3, 3), (1, 1)))
    assert math.prod(ext) * 4 <= 24 * 1024 and t[-1] == 54  # whole lines (no padding: 54 blocks)
    t, ext = unfold_box(plan((400, 400), (3, 3), (1, 1)), budget=4096)   # shrunk to fit
    assert math.prod(ext) * 4 <= 4096
    assert unfold_box(plan((4000,), (2,), (100,))) is None               # mostly unused region
    assert unfold_box(plan((600, 600), (60, 60), (1, 1), (10, 10))) is None  # one column's region too big


@needs_cuda
@pytest.mark.cuda
def test_cupy_arrays_any_layout():
    import cupy
    x = np.arange(2 * 3 * 9 * 10, dtype=np.int16).reshape(2, 3, 9, 10)
    for view in (lambda a: a, lambda a: a[:, ::-1, :, ::-2], lambda a: a.transpose(0, 2, 3, 1)):
        xh = np.ascontiguousarray(view(x))
        xd = view(cupy.asarray(x))
        got = dml.slice1(xd, [0, 0, 1, 0], [xh.shape[0], xh.shape[1], xh.shape[2] - 1, xh.shape[3]], [1, -1, 2, -3])
        assert isinstance(got, cupy.ndarray)
        want = dml.slice1(xh, [0, 0, 1, 0], [xh.shape[0], xh.shape[1], xh.shape[2] - 1, xh.shape[3]], [1, -1, 2, -3])
        assert np.array_equal(got.get(), want)
    u = dml.unfold(cupy.asarray(x).astype(cupy.float32), [2, 3], 1, 1, 1, 0)
    assert np.array_equal(u.get(), ref.unfold(x.astype(np.float32), [2, 3], [1, 1], [1, 1], [1, 1], [0, 0]))


@needs_cuda
@pytest.mark.cuda
def test_torch_cuda_tensors_zero_copy_in_and_out():
    torch = pytest.importorskip("torch")
    x = torch.arange(4 * 4 * 6 * 6, dtype=torch.float32, device="cuda").reshape(4, 4, 6, 6)
    out = dml.unfold(x, 3, 1, 1, 1, 1)
    assert out.is_cuda and torch.equal(out, torch.nn.functional.unfold(x, 3, padding=1))
    s = dml.slice1(x.flip(3), [0, 0, 0, 0], [4, 4, 6, 6], [1, 1, -1, 2])
    assert s.is_cuda and torch.equal(s, x.flip(3).flip(2)[:, :, :, ::2])


@needs_cuda
@pytest.mark.cuda
def test_jax_gpu_arrays():
    jax = pytest.importorskip("jax")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX sees no GPU")
    x = jax.numpy.arange(64, dtype=jax.numpy.float32).reshape(1, 1, 8, 8)
    out = dml.slice1(x, [0, 0, 0, 0], [1, 1, 8, 8], [1, 1, -1, 3])
    assert type(out).__module__.startswith("jax") and list(out.devices())[0].platform == "gpu"
    assert np.array_equal(np.asarray(out), np.asarray(x)[:, :, ::-1, ::3])


@needs_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "uint64"])
def test_large_device_flow_matches_numpy(dtype):
    dt = dml.DataType.from_numpy(dtype)
    t = dml.TensorDesc(dt, [3, 5, 67, 131], dml.nhwc_strides([3, 5, 67, 131]))
    desc = dml.Slice1OperatorDesc(t, None, [0, 1, 3, 5], [3, 4, 60, 120], [-1, 2, -3, 1])
    outs = []
    x = np.random.default_rng(0).integers(0, 120, size=t.sizes).astype(dtype)
    for kind in ("cpu", "cuda"):
        dev = dml.Device(kind)
        c = dev.compile_operator(dev.create_operator(desc))
        ib, ob = dev.upload(x, t), dev.create_buffer(desc.output_tensor.total_tensor_size_in_bytes)
        tb = dev.create_binding_table(c)
        tb.bind_inputs([dml.BufferBinding(ib)])
        tb.bind_outputs([dml.BufferBinding(ob)])
        dev.execute(c, tb)
        outs.append(ob.read(desc.output_tensor))
    assert outs[0].tobytes() == outs[1].tobytes()


SPECIAL = [
    # stride-2 innermost dimensions read as 16-byte pairs (every element size)
    ("slice", "int8", (2, 3, 16, 64), ([0, 0, 0, 0], [2, 3, 8, 32], [1, 1, 2, 2])),
    ("slice", "float16", (2, 3, 16, 64), ([0, 1, 2, 0], [2, 2, 7, 32], [1, 1, 2, 2])),
    ("slice", "float32", (4, 8, 40), ([0, 0, 8], [4, 3, 16], [1, 3, 2])),
    ("slice", "float64", (5, 36), ([0, 0], [5, 18], [1, 2])),
    ("slice", "float32", (3, 32), ([0, 0], [3, 16], [1, 2])),        # ends on the last element
    ("slice1", "float32", (3, 64), ([0, 0], [3, 64], [-1, 2])),
    # 1-D unfolds through the shared-memory tile: framing, dilation, padding, odd sizes
    ("unfold", "float32", (3, 2, 5000), ([1024], [256], [1], [0], [0])),
    ("unfold", "float16", (2, 3, 999), ([40], [9], [2], [7], [5])),
    ("unfold", "int8", (1, 1, 777), ([33], [31], [1], [40], [3])),
    ("unfold", "float64", (2, 1, 300), ([8], [8], [3], [0], [9])),
    # 2-D and 3-D unfolds through staged boxes (edge boxes, lines longer than a
    # box), and one whose strides leave the region mostly unused (gather)
    ("unfold", "float16", (2, 3, 67, 300), ([3, 5], [1, 2], [2, 1], [1, 2], [2, 1])),
    ("unfold", "int8", (1, 4, 9, 10, 11), ([3, 3, 3], [1, 2, 1], [1, 1, 2], [1, 1, 1], [1, 0, 2])),
    ("unfold", "float32", (2, 2, 50, 400), ([2, 2], [1, 100], [1, 1], [0, 0], [0, 0])),
]


@needs_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("op, dtype, shape, args", SPECIAL, ids=lambda v: str(v) if isinstance(v, str) else None)
def test_special_paths_match_the_cpu(op, dtype, shape, args):
    import cupy
    x = np.random.default_rng(3).integers(-100, 100, size=shape).astype(dtype)
    fn = {"slice": dml.slice, "slice1": dml.slice1, "unfold": dml.unfold}[op]
    got = fn(cupy.asarray(x), *args)
    assert isinstance(got, cupy.ndarray)
    assert got.get().tobytes() == fn(x, *args).tobytes()


# -- the launch path: raw pointers, the caller's stream -----------------------------------
SPIN = r'''extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
}'''


def _busy_stream(cupy):
    """A non-blocking CuPy stream held busy for ~0.1 s by one spinning thread."""
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        cupy.RawKernel(SPIN, "spin")((1,), (1,), (np.int64(300_000_000),))
    return s


@needs_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("how", ["launch", "launcher", "prepare"])
def test_kernels_run_on_the_callers_stream(how):
    """A copy queued behind a long kernel on a side stream sees what that
    stream wrote before it; only the side stream is synchronised."""
    import cupy
    from opendml.runtime import get_backend
    backend = get_backend("cuda")
    n = 1 << 20
    x = cupy.zeros(n, cupy.uint32)
    y = cupy.full(n, 1, cupy.uint32)
    cupy.cuda.Device().synchronize()
    plan = MovePlan.of(CopyPlan(4, (n,), 0, (1,), 0, (1,)))
    s = _busy_stream(cupy)
    with s:
        x.fill(7)
    if how == "launch":
        backend.launch(plan, x.data.ptr, n, y.data.ptr, s.ptr)
    elif how == "launcher":
        backend.launcher(plan, x.data.ptr, n, y.data.ptr)(s.ptr)
    else:
        with s:
            backend.prepare(plan, [x], [y])()
    s.synchronize()
    assert int((y == 7).sum()) == n


@needs_cuda
@pytest.mark.cuda
def test_kernels_run_on_a_torch_stream():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no GPU")
    from opendml.runtime import get_backend
    backend = get_backend("cuda")
    x = torch.zeros(1 << 20, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    plan = MovePlan.of(CopyPlan(4, (x.numel(),), 0, (1,), 0, (1,)))
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)
        x.fill_(3.0)
        backend.launch(plan, x.data_ptr(), x.numel(), y.data_ptr(), torch.cuda.current_stream().cuda_stream)
    side.synchronize()
    assert bool((y == 3.0).all())


@needs_cuda
@pytest.mark.cuda
def test_launches_are_cached_per_plan_and_alignment():
    import cupy
    from opendml.runtime import get_backend
    backend = get_backend("cuda")
    plan = MovePlan.of(CopyPlan(2, (4, 6), 1, (8, 1), 0, (6, 1)))
    a = cupy.arange(64, dtype=cupy.uint16)
    before = backend.cache_info()["launches"]
    outs = [cupy.zeros(32, cupy.uint16) for _ in range(4)]
    for o in outs:
        backend.launch(plan, a.data.ptr, a.size, o.data.ptr, 0)
    after = backend.cache_info()
    assert after["launches"] <= before + 2   # outputs 512-byte aligned (CuPy's pool): one alignment class
    want = np.arange(64, dtype=np.uint16)[1:][np.add.outer(np.arange(4) * 8, np.arange(6))].reshape(-1)
    for o in outs:
        assert np.array_equal(o.get()[:24], want)
    # an odd destination pointer: another cached launch, still right
    backend.launch(plan, a.data.ptr, a.size, outs[0].data.ptr + 2, 0)
    assert np.array_equal(outs[0].get()[1:25], want)


def _two_gpus() -> bool:
    if not cuda_available():
        return False
    import cupy
    return cupy.cuda.runtime.getDeviceCount() >= 2


@pytest.mark.cuda
@pytest.mark.skipif(not _two_gpus(), reason="needs two CUDA GPUs")
def test_cupy_arrays_on_the_second_gpu_run_there_on_its_current_stream():
    import threading

    import cupy
    x = np.arange(2 * 3 * 9 * 8, dtype=np.float32).reshape(2, 3, 9, 8)
    want_u = dml.unfold(x, 3, 1, 1, 1, 1)
    want_f = dml.fold(want_u, [9, 8], 3, 1, 1, 1, 1)
    want_s = dml.slice1(x, [0, 1, 2, 0], [2, 2, 6, 8], [1, -1, 2, -3])
    with cupy.cuda.Device(1):
        xd = cupy.asarray(x)
        side = cupy.cuda.Stream(non_blocking=True)
        with side:
            u = dml.unfold(xd, 3, 1, 1, 1, 1)
            f = dml.fold(u, [9, 8], 3, 1, 1, 1, 1)
            s = dml.slice1(xd[:, :, :, :], [0, 1, 2, 0], [2, 2, 6, 8], [1, -1, 2, -3])
        side.synchronize()
    assert u.device.id == f.device.id == s.device.id == 1
    assert cupy.asnumpy(u).tobytes() == want_u.tobytes()
    assert cupy.asnumpy(f).tobytes() == want_f.tobytes()
    assert cupy.asnumpy(s).tobytes() == want_s.tobytes()
    # from a thread that never touched CUDA, with device 0 current there
    got = {}

    def work():
        got["u"] = cupy.asnumpy(dml.unfold(xd, 3, 1, 1, 1, 1))
    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert got["u"].tobytes() == want_u.tobytes()


@needs_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("case", ["outer", "inner"])
def test_unfold_huge_stride_and_padding_on_the_gpu(case):
    # As tests/runtime/test_cpu_hostile.py: a size-1 spatial dimension whose
    # stride, window stride and start padding are 2^32 - 1, so offsets of
    # positions in the padding pass 2^63 (computed wrapping, never used).
    U32 = 2**32 - 1
    F32 = dml.DataType.FLOAT32
    if case == "outer":
        inp = dml.TensorDesc(F32, [1, 1, 1, 3], [3, 3, U32, 1])
        desc = dml.UnfoldOperatorDesc(inp, None, [1, 2], [U32, 1], [1, 1], [U32, 0], [0, 0])
        x = np.array([5.0, 6.0, 7.0], np.float32).reshape(1, 1, 1, 3)
    else:
        inp = dml.TensorDesc(F32, [1, 1, 1], [1, 1, U32])
        desc = dml.UnfoldOperatorDesc(inp, None, [1], [U32], [1], [U32], [U32])
        x = np.array([5.0], np.float32).reshape(1, 1, 1)
    assert dml.Device("cuda").run(desc, x).tobytes() == dml.Device("cpu").run(desc, x).tobytes()


@needs_cuda
@pytest.mark.cuda
def test_launches_go_through_the_c_extension_where_it_is_built():
    from opendml.runtime import get_backend
    via = get_backend("cuda").cache_info()["launch_via"]
    assert via == ("native" if dml.config().compiled_available else "driver")
    x = np.arange(2 * 3 * 5 * 6, dtype=np.float32).reshape(2, 3, 5, 6)
    assert dml.Device("cuda").run(dml.UnfoldOperatorDesc(dml.TensorDesc(dml.DataType.FLOAT32, list(x.shape)),
                                                          None, [3, 3], [1, 2], [1, 1], [1, 0], [1, 2]), x).tobytes() \
        == dml.unfold(x, [3, 3], [1, 2], 1, [1, 0], [1, 2]).tobytes()


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_available(), reason="CUDA is not available here")
def test_relaunch_raises_naming_the_kernel():
    """A launch C made that fails again through ``relaunch`` (here: no
    compiled function) raises opendml's error naming it, with no backend
    object needed."""
    from opendml.runtime.cuda import launch as cl
    with pytest.raises(RuntimeError, match="launching a cached kernel"):
        cl.relaunch(0, 0, 1, 0, bytes(16), 0, 0, 0)


def test_one_table_runs_every_pass_kind():
    """The backend dispatches passes through one table with an entry per pass
    kind of ``opendml.plan``; a lone Windows, WindowSums or SliceScatter pass keeps
    its tuned launch, and the
    index-driven passes are left to ``index.py`` (move_steps alone refuses them by name)."""
    from opendml import plan as pl
    from opendml.ops import FoldOperatorDesc, SliceGradOperatorDesc, UnfoldOperatorDesc
    from opendml.runtime.cuda import backend as cb, steps as cs
    kinds = {v for n, v in vars(pl).items() if isinstance(v, type) and v.__module__ == pl.__name__
             and not n.startswith("_") and dataclasses_fields(v) and ("dst" in dataclasses_fields(v))}
    assert kinds == set(cs.PASS_STEPS), kinds ^ set(cs.PASS_STEPS)
    f32 = dml.DataType.FLOAT32
    descs = [UnfoldOperatorDesc(dml.TensorDesc(f32, [2, 3, 8, 8]), None, [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
             FoldOperatorDesc(dml.TensorDesc(f32, [2, 27, 64]), dml.TensorDesc(f32, [2, 3, 8, 8]), [3, 3], [1, 1],
                              [1, 1], [1, 1], [1, 1]),
             SliceGradOperatorDesc(dml.TensorDesc(f32, [2, 3, 4]), dml.TensorDesc(f32, [2, 3, 9]), [0, 0, 1],
                                   [2, 3, 8], [1, 1, 2])]
    for desc in descs:
        desc.validate(dml.FeatureLevel.FL_6_4)
        legacy = desc.lower().kernel_plan()
        n_in = math.prod(desc.inputs[0].sizes)
        want = ct.launch_spec(legacy, 256, n_in, 512)
        (name, params, grid, smem, s, d), = cs.move_steps(desc.lower(), [256], [n_in], [512])
        assert (name, grid, smem, s, d) == (want[0], want[2], want[3], 0, 0)
        assert bytes(params) == bytes(want[1])
    ix = pl.IndexAxis(index=1, index_offset=0, index_strides=(1,), stride=1, bound=4)
    for kind in (pl.Gather, pl.Scatter):
        move = pl.MovePlan((1, 6), (1,), (kind(0, 0, (4,), 0, (0,), 0, (1,), (ix,)),))
        with pytest.raises(dml.UnsupportedError, match=f"GATHER: index-driven passes \\({kind.__name__}\\) are "
                                                       f"launched by runtime/cuda/index.py"):
            cs.move_steps(move, [0, 0], [4, 4], [0], what="GATHER")


def dataclasses_fields(cls):
    import dataclasses
    return {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()


def test_a_move_launch_gives_an_index_pass_every_address_and_a_launch_its_slots():
    """Can fail: a ``MoveLaunch`` step of an index-driven pass (source slot ``INDEX_STEP``) is not given every
    input's and output's address, a plain launch not its source's (a fill, slot -1: its destination's) and
    destination's, or ``names`` leaves out an index pass's kernels (no GPU: stand-in launches)."""
    from opendml.runtime.cuda.backend import INDEX_STEP, MoveLaunch
    calls = []

    class Plain:
        def __init__(self, name):
            self.name = name

        def __call__(self, src, dst, stream):
            calls.append((self.name, src, dst, stream))

    class Index:
        names = ["ix_owner", "ix_scatter"]

        def __call__(self, srcs, dsts, stream):
            calls.append(("index", srcs, dsts, stream))

    launch = MoveLaunch(None, ((Plain("copy"), 1, 0), (Index(), INDEX_STEP, 1), (Plain("fill"), -1, 1)))
    launch((100, 200), (300, 400), 7)
    assert calls == [("copy", 200, 300, 7), ("index", (100, 200), (300, 400), 7), ("fill", 400, 400, 7)]
    assert launch.names == ["copy", "ix_owner", "ix_scatter", "fill"]


def test_a_kernel_name_gives_its_file():
    """Can fail: an index kernel (``ix_*``, which ``IndexPass`` and the C new-shape route compile through
    ``launch._kernel``) or a move or layout kernel is looked up in another kernel file."""
    from opendml.runtime.cuda import index, launch
    assert launch.kernel_file("ix_gather<u32, 4, 1, 0, 1>") == index.INDEX_KERNELS == launch.HERE / "index.cu"
    assert launch.kernel_file("move_padw<u32, 3, 1, 8, 0>") == launch.LAYOUT_KERNELS
    assert launch.kernel_file("move_copy<u32, 2>") == launch.MOVE_KERNELS
    assert launch.kernel_file("strided_copy<u32, 2, 0, u32, 4, 0>") == launch.KERNELS


def test_cuda_and_cuda_0_share_one_backend(monkeypatch):
    """Can fail: ``get_backend`` makes a second backend for a name of a device it already has one for ("cuda"
    and "cuda:0", in either order), or hands one device's backend to another (a stand-in CudaBackend)."""
    import opendml.runtime as rt
    import opendml.runtime.cuda as rc
    made = []

    class Fake:
        def __init__(self, index):
            made.append(index)

    monkeypatch.setattr(rc, "CudaBackend", Fake)
    monkeypatch.setattr(rt, "_BACKENDS", {})
    zero = rt.get_backend("cuda:0")
    assert rt.get_backend("cuda") is zero and rt.get_backend(" CUDA:0 ") is zero and made == [0]
    one = rt.get_backend("cuda:1")
    assert one is not zero and rt.get_backend("cuda:1") is one and made == [0, 1]
    monkeypatch.setattr(rt, "_BACKENDS", {})
    assert rt.get_backend("cuda") is rt.get_backend("cuda:0") and made == [0, 1, 0]


@pytest.mark.parametrize("via, driver, fast, route", [
    ("native", False, False, "cupy"), ("native", True, False, "driver"), ("native", True, True, "native"),
    ("driver", False, True, "cupy"), ("driver", True, True, "driver"), ("cupy", True, True, "cupy"),
    ("bogus", True, True, "cupy")])
def test_launch_route_is_the_route_a_launch_takes(monkeypatch, via, driver, fast, route):
    """One rule (launch.launch_route) gives both a Launch's route and cache_info's launch_via: an unknown
    LAUNCH_VIA launches through CuPy, and cache_info says so (it said "driver" before)."""
    monkeypatch.setattr(launch, "_driver", lambda: object() if driver else None)
    monkeypatch.setattr(launch, "_fast_launch", lambda: object() if fast else None)
    assert launch.launch_route(via) == route
