"""Issue 23 on the GPU (items 3 to 7), each test in a child process, so that a
lost CUDA context (cudaErrorMisalignedAddress is sticky) or a broken graph
capture cannot hide the other tests: FOLD's NaN sums are the CPU's bytes, a
huge CuPy output raises AllocationError, a user's 2-byte-aligned CuPy
allocator changes nothing for opendml's launches, a CuPy array at an odd
address is refused with an error naming it (and the context stays usable),
and a first call inside ``torch.cuda.graph`` capture is captured and replays
right. The CPU side of items 3 and 4 is ``test_hostile_outputs.py``."""
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import cuda_available

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not cuda_available(), reason="CUDA is not available here")]

PRELUDE = """
import copy, sys
import numpy as np
import cupy
import opendml as dml
from opendml.runtime import get_backend
from opendml.runtime.cuda import launch as cl, tuned as ct

def report(label, ok, detail=""):
    print(label, "OK" if ok else f"BAD {detail}", flush=True)

def alive():
    # the process's CUDA context still works (a sticky error would raise here)
    z = cupy.arange(1000, dtype=cupy.float32)
    cupy.cuda.runtime.deviceSynchronize()
    return float(z.sum()) == 499500.0
"""


def run_child(code: str, timeout: int = 300, prelude: str = PRELUDE) -> list[str]:
    r = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=timeout)
    lines = [line for line in r.stdout.split("\n") if line]
    assert r.returncode == 0, "\n".join(lines) + "\n" + r.stderr[-3000:]
    return lines


def all_ok(lines: list[str], count: int) -> None:
    assert len(lines) == count and all(line.endswith(" OK") for line in lines), "\n".join(lines)


def test_fold_nan_sums_on_the_gpu_are_the_cpus_bytes():
    # Item 3: NaNs of every kind (signs, payloads, signalling) and infinities
    # of both signs meet in the sums; every FOLD kernel and lane count gives
    # the CPU's bytes, a NaN sum being the canonical NaN.
    lines = run_child("""
        WORD = {2: np.uint16, 4: np.uint32, 8: np.uint64}
        CANON = {2: 0x7E00, 4: 0x7FC00000, 8: 0x7FF8000000000000}
        DT = {"float16": dml.DataType.FLOAT16, "float32": dml.DataType.FLOAT32, "float64": dml.DataType.FLOAT64}

        def nan_words(dtype, shape, rng):
            dtype = np.dtype(dtype)
            W = WORD[dtype.itemsize]
            x = (rng.standard_normal(shape) * 100).astype(dtype)
            w = x.view(W).reshape(-1)
            bits, mant = 8 * dtype.itemsize, {2: 10, 4: 23, 8: 52}[dtype.itemsize]
            exp_all = W(((1 << (bits - mant - 1)) - 1) << mant)
            n = w.size
            payload = rng.integers(1, 1 << min(mant, 62), size=n, dtype=np.uint64).astype(W)
            sign = rng.integers(0, 2, size=n).astype(W) << W(bits - 1)
            nan_at = rng.random(n) < 0.08
            w[nan_at] = (exp_all | payload | sign)[nan_at]
            inf_at = (rng.random(n) < 0.05) & ~nan_at
            w[inf_at] = (exp_all | sign)[inf_at]
            return x

        cases = [((7, 9), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),           # fold_gather, 2-D
                 ((300,), (96,), (32,), (1,), (0,), (0,)),                   # fold1d_tile (stride 32)
                 ((200,), (7,), (1,), (3,), (5,), (2,)),                     # fold_gather, 1-D
                 ((6, 5, 4), (2, 3, 2), (1, 2, 1), (1, 1, 2), (0, 1, 1), (1, 0, 1))]
        rng = np.random.default_rng(23)
        backend = get_backend("cuda")
        for dtype in ("float16", "float32", "float64"):
            for spatial, window, strides, dil, sp, ep in cases:
                blocks = [(s + a + b - d * (w - 1) - 1) // t + 1
                          for s, w, t, d, a, b in zip(spatial, window, strides, dil, sp, ep)]
                K, B = int(np.prod(window)), int(np.prod(blocks))
                x = nan_words(dtype, (2, 3 * K, B), rng)
                args = (list(spatial), list(window), list(strides), list(dil), list(sp), list(ep))
                with dml.configure(cpu_kernels="numpy"):
                    want = dml.fold(x, *args)
                with dml.configure(cpu_kernels="compiled"):
                    assert dml.fold(x, *args).tobytes() == want.tobytes()
                es = want.itemsize
                nan = np.isnan(want)
                label = f"{dtype}-{spatial}"
                if not (nan.any() and np.all(want.view(WORD[es])[nan] == CANON[es])):
                    report(label, False, "the CPU's NaN sums are not all canonical")
                    continue
                got = cupy.asnumpy(dml.fold(cupy.asarray(x), *args))
                bad = [] if got.tobytes() == want.tobytes() else ["array API"]
                plan = dml.FoldOperatorDesc(dml.TensorDesc(DT[dtype], list(x.shape)),
                                            dml.TensorDesc(DT[dtype], list(want.shape)),
                                            *args[1:]).lower()
                src = cupy.asarray(x.view(WORD[es]).reshape(-1))
                for lanes in (1, 2, 4):
                    for min_stride in (32, 1 << 40):          # with and without fold1d_tile
                        ct.FOLD_LANES, ct.FOLD_TILE_MIN_STRIDE = lanes, min_stride
                        dst = cupy.zeros(want.size, WORD[es])
                        backend.prepare(copy.copy(plan), [src], [dst])()
                        if cupy.asnumpy(dst).tobytes() != want.tobytes():
                            bad.append(f"V={lanes} tile={min_stride == 32}")
                ct.FOLD_LANES, ct.FOLD_TILE_MIN_STRIDE = None, 32
                report(label, not bad, bad)
        report("context", alive())
    """)
    all_ok(lines, 13)


def test_a_huge_cupy_output_raises_allocation_error():
    # Item 4 on the CuPy route: CuPy's OutOfMemoryError becomes opendml's
    # AllocationError naming the operator, the shape and the bytes. The
    # largest output a tensor may have (2^32 - 1 elements) is 32 GiB, which a
    # GPU may hold: all but 16 GiB of the free memory is taken first.
    lines = run_child("""
        x = cupy.zeros((1, 1, 1, 1))
        free, total = cupy.cuda.runtime.memGetInfo()
        filler = cupy.empty(max(free - (16 << 30), 1), cupy.uint8)
        try:
            dml.unfold(x, 1, 1, 1, 32767, 32767)
            report("unfold", False, "no error")
        except dml.DmlError as e:
            words = ["unfold", "(1, 1, 4294836225)", "float64", "34358689800 bytes (32.0 GiB)", "cuda:0"]
            report("unfold", type(e).__name__ == "AllocationError" and isinstance(e, MemoryError)
                   and all(w in str(e) for w in words), str(e))
        except Exception as e:
            report("unfold", False, f"{type(e).__name__}: {e}")
        del filler
        cupy.get_default_memory_pool().free_all_blocks()
        report("context", alive())
    """)
    all_ok(lines, 2)


def test_a_two_byte_aligned_cupy_allocator_breaks_nothing():
    # Item 5: with an allocator that returns memory 2 bytes past a 16-byte
    # boundary (legal for float16), first and repeated calls on float16 data
    # run right on the CuPy route, the PyTorch route and the device flow, and
    # an output whose allocation is misaligned for its type is placed right.
    lines = run_child("""
        import torch
        pool = cupy.cuda.MemoryPool()
        cupy.cuda.set_allocator(lambda n: pool.malloc(n + 16) + 2)
        x = cupy.arange(48 * 40, dtype=cupy.float16).reshape(1, 2, 24, 40) / 8
        report("allocator", x.data.ptr % 16 == 2, hex(x.data.ptr))
        xh = cupy.asnumpy(x)
        calls = [("slice1", lambda a: dml.slice1(a, [0, 1, 2, 3], [1, 1, 20, 30], [1, 1, 3, -2])),
                 ("unfold", lambda a: dml.unfold(a, [3, 4], [2, 1], 1, 1, [0, 2])),
                 ("fold", lambda a: dml.fold(a.reshape(2, 24, 40), [6, 10], [2, 3])),
                 ("slice_grad", lambda a: dml.slice_grad(a[0, 0], [50, 90], [1, 2], [47, 79], [2, 2]))]
        for name, fn in calls:
            want = fn(xh)
            got = [cupy.asnumpy(fn(x)) for _ in range(3)]           # first call, then the call cache
            report(f"cupy-{name}", all(g.tobytes() == want.tobytes() for g in got))
            t = torch.as_tensor(xh, device="cuda")
            got = [fn(t).cpu().numpy() for _ in range(3)]
            report(f"torch-{name}", all(g.tobytes() == want.tobytes() for g in got))
        # float32 input made before the allocator's outputs: outputs realigned
        cupy.cuda.set_allocator(pool.malloc)
        y = cupy.arange(2 * 3 * 10, dtype=cupy.float32).reshape(2, 3, 10)
        cupy.cuda.set_allocator(lambda n: pool.malloc(n + 16) + 2)
        out = dml.unfold(y, 3, 1, 1, 1, 1)
        report("realigned-output", out.data.ptr % 4 == 0 and
               cupy.asnumpy(out).tobytes() == dml.unfold(cupy.asnumpy(y), 3, 1, 1, 1, 1).tobytes())
        # the device flow's own buffers
        desc = dml.Slice1OperatorDesc(dml.TensorDesc(dml.DataType.FLOAT16, [1, 2, 24, 40]), None,
                                      [0, 1, 2, 3], [1, 1, 20, 30], [1, 1, 3, -2])
        report("device-flow", dml.Device("cuda").run(desc, xh).tobytes() == calls[0][1](xh).tobytes())
        cupy.cuda.set_allocator(pool.malloc)   # CuPy's own float32 kernels (alive) need aligned memory
        report("context", alive())
    """)
    all_ok(lines, 12)


def test_a_cupy_array_at_an_odd_address_is_refused_naming_it():
    # Item 6: a float32 array 2 bytes past an allocation's start: every
    # operator raises UnsupportedError naming the address before any launch
    # (a contiguous copy of it would fault too), and the context stays usable.
    lines = run_child("""
        import torch
        mem = cupy.cuda.alloc(4 * 64 + 16)
        x = cupy.ndarray((64,), cupy.float32, cupy.cuda.MemoryPointer(mem.mem, 2))
        x2 = cupy.ndarray((1, 2, 4, 4), cupy.float32, cupy.cuda.MemoryPointer(mem.mem, 2), strides=(0, 32, 8, 4))
        where = hex(x.data.ptr)
        calls = [("slice1", lambda: dml.slice1(x, [0], [64], [1])),
                 ("unfold-strided", lambda: dml.unfold(x2, 2, 1, 1, 0, 0)),
                 ("fold", lambda: dml.fold(x.reshape(1, 4, 16), [19], 4)),
                 ("slice_grad", lambda: dml.slice_grad(x, [70], [1], [64], [1]))]
        for name, fn in calls:
            try:
                fn()
                report(name, False, "no error")
            except dml.UnsupportedError as e:
                report(name, where in str(e) and name.split("-")[0] in str(e), str(e))
            except Exception as e:
                report(name, False, f"{type(e).__name__}: {e}")
        try:                                    # the PyTorch route, where DLPack gives such a tensor
            t = torch.from_dlpack(x)
            odd = t.data_ptr() % 4 != 0
        except Exception:
            odd = False
        if odd:
            try:
                dml.slice1(t, [0], [64], [-1])
                report("torch", False, "no error")
            except dml.UnsupportedError as e:
                report("torch", where in str(e), str(e))
        else:
            report("torch", True)
        report("context", alive())
        y = cupy.arange(64, dtype=cupy.float32)
        report("after", float(dml.slice1(y, [0], [64], [-1])[0]) == 63.0)
    """)
    all_ok(lines, 7)


def test_a_first_call_inside_torch_cuda_graph_capture_is_captured():
    # Item 7: the first opendml calls of the process (CuPy imported, backend
    # made, kernels compiled and loaded, launches made) happen inside
    # torch.cuda.graph capture; the capture succeeds and each replay reads x
    # anew.
    lines = run_child("""
        import numpy as np
        import torch
        import opendml as dml

        def report(label, ok, detail=""):
            print(label, "OK" if ok else f"BAD {detail}", flush=True)

        x = torch.arange(4 * 6 * 8, dtype=torch.float32, device="cuda").reshape(1, 4, 6, 8)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            s = dml.slice1(x, [0, 0, 1, 2], [1, 4, 4, 6], [1, 1, -1, 2])
            u = dml.unfold(x, [2, 3], 1, 1, 1, 1)
            f = dml.fold(u, [6, 8], [2, 3], 1, 1, 1, 1)
            d = dml.slice_grad(s, [1, 4, 6, 8], [0, 0, 1, 2], [1, 4, 4, 6], [1, 1, -1, 2])
        report("captured", True)
        for step in range(2):
            with torch.no_grad():
                x.copy_(torch.randn_like(x))
            g.replay()
            torch.cuda.synchronize()
            h = x.cpu().numpy()
            hs = dml.slice1(h, [0, 0, 1, 2], [1, 4, 4, 6], [1, 1, -1, 2])
            hu = dml.unfold(h, [2, 3], 1, 1, 1, 1)
            ok = (s.cpu().numpy().tobytes() == hs.tobytes() and u.cpu().numpy().tobytes() == hu.tobytes()
                  and f.cpu().numpy().tobytes() == dml.fold(hu, [6, 8], [2, 3], 1, 1, 1, 1).tobytes()
                  and d.cpu().numpy().tobytes() == dml.slice_grad(hs, [1, 4, 6, 8], [0, 0, 1, 2], [1, 4, 4, 6],
                                                                  [1, 1, -1, 2]).tobytes())
            report(f"replay{step}", ok)
        # the same calls outside the capture now (the call cache) still right
        report("after", dml.slice1(x, [0, 0, 1, 2], [1, 4, 4, 6], [1, 1, -1, 2]).cpu().numpy().tobytes()
               == dml.slice1(x.cpu().numpy(), [0, 0, 1, 2], [1, 4, 4, 6], [1, 1, -1, 2]).tobytes())
    """, prelude="import sys\n")
    all_ok(lines, 4)


@pytest.mark.parametrize("via", ["native", "driver", "cupy"])
def test_parameters_go_by_value_on_every_launch_path(via):
    # Items 5 and 7: a launch allocates no device memory of opendml's own
    # (counted through CuPy's allocator) on any launch path, and gives the
    # CPU's bytes; tuning scripts' Kernel calls take the structure by value.
    lines = run_child(f"""
        import torch
        cl.LAUNCH_VIA = {via!r}
        pool = cupy.cuda.MemoryPool()
        count = [0]
        def counting(n):
            count[0] += 1
            return pool.malloc(n)
        t = torch.arange(3 * 5 * 16, dtype=torch.float64, device="cuda").reshape(1, 3, 5, 16)
        h = t.cpu().numpy()
        cupy.cuda.set_allocator(counting)
        got = [dml.unfold(t, [2, 4], [1, 2], 1, [1, 0], [0, 3]) for _ in range(2)]
        report("no-allocation", count[0] == 0, count[0])
        want = dml.unfold(h, [2, 4], [1, 2], 1, [1, 0], [0, 3])
        report("torch", all(g.cpu().numpy().tobytes() == want.tobytes() for g in got))
        report("via", get_backend("cuda").cache_info()["launch_via"] == {via!r} or {via!r} == "native",
               get_backend("cuda").cache_info())
        plan = dml.Slice1OperatorDesc(dml.TensorDesc(dml.DataType.FLOAT32, [64]), None, [0], [64], [-1]).lower().kernel_plan()
        name, params, grid, smem = ct.launch_spec(plan, 0, 64, 0)
        a = cupy.arange(64, dtype=cupy.float32)
        b = cupy.zeros(64, cupy.float32)
        cl._kernel(0, name)(grid, (cl.THREADS,), (a.data.ptr, b.data.ptr, cl.device_params(params)))
        report("kernel-call", float(b[0]) == 63.0 and float(b[63]) == 0.0)
        report("context", alive())
    """)
    all_ok(lines, 5)
