"""CUDA backend: sources compile with nvcc anywhere; the word-widening logic is
checked on the CPU; DLPack paths and sanitizer-friendly odd layouts on a GPU."""
import itertools
import math
import shutil
import subprocess

import numpy as np
import pytest

import opendml as dml
from opendml.runtime.cuda.backend import KERNELS, _unfold_launch, unfold_box, word_plan
from opendml.runtime.cpu.backend import _prepare_copy, _prepare_unfold
from opendml.plan import CopyPlan, UnfoldPlan
from tests import reference as ref
from tests.conftest import cuda_available

needs_cuda = pytest.mark.skipif(not cuda_available(), reason="CUDA is not available here")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_kernels_compile_with_nvcc(tmp_path):
    r = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", "-DOPENDML_INSTANTIATE", "-c", str(KERNELS),
                        "-o", str(tmp_path / "k.o")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


def run_word_plan_on_cpu(plan, src):
    """Execute the widened plan with NumPy, reversing elements inside words
    where the kernel would: must equal the element-wise plan."""
    w, rev, pick, wp = word_plan(plan, 0, 0, src.nbytes // plan.element_size)
    words = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.dtype((np.void, 16))}[w]
    out = np.zeros(plan.count * plan.element_size, np.uint8)
    if pick:  # input word i: the even elements of 16-byte word i, as 8 bytes
        b = src.view(np.uint8)[:src.nbytes // 16 * 16]
        picked = np.ascontiguousarray(b.reshape(-1, 8 // pick, 2, pick)[:, :, 0, :]).reshape(-1)
        _prepare_copy(wp, picked.view(np.dtype("V8")), out.view(np.dtype("V8")))()
    elif w == 16:  # NumPy has no 16-byte integer: copy 16-byte records
        s16 = src.view(np.uint8).view(np.dtype("V16"))
        d16 = out.view(np.dtype("V16"))
        _prepare_copy(wp, s16, d16)()
    else:
        _prepare_copy(wp, src.view(np.uint8).view(words), out.view(words))()
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
    _prepare_copy(plan, src.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[es]),
                  want.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[es]))()
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


def run_unfold_tile_on_cpu(plan, src, params, D):
    """unfold_tile as the kernel reads its parameters, one box at a time in
    NumPy: stage the region (zeros outside the input), then write every box
    position for every window element from it."""
    p = [int(v) for v in params]
    q, tq = p[12:], p[12 + 7 * D:]
    C, K = p[4], p[5]
    out = np.zeros(plan.out_span[1] + 1, src.dtype)
    for blk in range(p[0]):
        t, b0, tb, ext = blk, [0] * D, [0] * D, [0] * D
        for d in reversed(range(D)):
            nt = tq[3 * d + 2]
            b0[d], t = t % nt * tq[3 * d], t // nt
            tb[d], ext[d] = min(tq[3 * d], q[7 * d + 5] - b0[d]), tq[3 * d + 1]
        c, n = t % C, t // C
        pos = [b0[d] * q[7 * d + 2] - q[7 * d + 4] + np.arange(ext[d]) for d in range(D)]
        grids = np.meshgrid(*pos, indexing="ij")
        inside = np.logical_and.reduce([(g >= 0) & (g < q[7 * d]) for d, g in enumerate(grids)])
        off = p[1] + n * p[10] + c * p[11] + sum(g * q[7 * d + 6] for d, g in enumerate(grids))
        region = np.where(inside, src[np.where(inside, off, 0)], 0).reshape(-1)
        rs = [math.prod(ext[d + 1:]) for d in range(D)]
        ys = np.meshgrid(*[np.arange(v) for v in tb], indexing="ij")
        loc = sum(y * q[7 * d + 2] * rs[d] for d, y in enumerate(ys))
        col = sum((b0[d] + y) * math.prod(q[7 * e + 5] for e in range(d + 1, D)) for d, y in enumerate(ys))
        for kflat, k in enumerate(itertools.product(*(range(q[7 * d + 1]) for d in range(D)))):
            koff = sum(k[d] * q[7 * d + 3] * rs[d] for d in range(D))
            out[p[2] + n * p[7] + (c * K + kflat) * p[8] + col * p[9]] = region[loc + koff]
    return out


TILE_PLANS = [
    # (spatial, window, strides, dilations, start_pad, end_pad), box columns, box line
    ((56, 56), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), 1024, 128),
    ((9, 11), (3, 4), (2, 3), (2, 1), (2, 0), (0, 3), 16, 4),
    ((13, 7), (2, 2), (2, 2), (1, 1), (0, 0), (1, 1), 8, 3),
    ((5, 6, 7), (2, 3, 2), (1, 2, 3), (1, 1, 2), (1, 1, 1), (1, 1, 1), 10, 3),
    ((8, 8, 8), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1), 64, 8),
    ((300,), (5,), (2,), (3,), (4,), (0,), 64, 128),
    ((7, 3, 4, 5), (2, 1, 2, 3), (1, 1, 2, 1), (1, 1, 1, 2), (0, 0, 1, 2), (1, 0, 0, 2), 12, 5),
]


@pytest.mark.parametrize("es", [1, 2, 4, 8])
@pytest.mark.parametrize("case", range(len(TILE_PLANS)))
def test_unfold_tile_equals_numpy_path(es, case):
    spatial, window, strides, dil, sp, ep, columns, line = TILE_PLANS[case]
    D, N, C = len(spatial), 2, 3
    desc = dml.UnfoldOperatorDesc(dml.TensorDesc({1: dml.DataType.INT8, 2: dml.DataType.INT16, 4: dml.DataType.INT32,
                                                  8: dml.DataType.INT64}[es], [N, C, *spatial]),
                                  None, window, strides, dil, sp, ep)
    plan = desc.lower()
    word = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[es]
    src = (np.arange(plan.in_span[1] + 1) % 251 + 1).astype(word)
    want = np.zeros(plan.out_span[1] + 1, word)
    _prepare_unfold(plan, src, want)()
    box = unfold_box(plan, columns=columns, line=line)
    assert box is not None
    name, params, grid, smem = _unfold_launch(plan, box)
    assert name.startswith("unfold_tile") and grid == (params[0],) and smem == math.prod(box[1]) * es
    assert np.array_equal(run_unfold_tile_on_cpu(plan, src, params, D), want)


def test_unfold_box_limits():
    def plan(spatial, window, strides, dil=None):
        D = len(spatial)
        return dml.UnfoldOperatorDesc(dml.TensorDesc(dml.DataType.FLOAT32, [1, 1, *spatial]), None, window, strides,
                                      dil or [1] * D, [0] * D, [0] * D).lower()
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
