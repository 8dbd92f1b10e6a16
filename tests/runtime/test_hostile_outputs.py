"""Issue 23 on the CPU: FOLD's NaN sums are the same bytes on every kernel set
(item 3), and outputs that cannot be allocated raise opendml's
``AllocationError`` naming the operation, the shape and the bytes instead of
NumPy's ``MemoryError`` (item 4). The CUDA side of both is in
``test_cuda_hostile.py``."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import opendml as dml
from tests import reference as ref
from tests.conftest import native_available

#: FOLD's one NaN per float type: quiet, sign +, payload 0.
CANONICAL = {np.dtype(np.float16): 0x7E00, np.dtype(np.float32): 0x7FC00000,
             np.dtype(np.float64): 0x7FF8000000000000}
WORD = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def kernel_sets():
    sets = [pytest.param(dict(cpu_kernels="numpy"), id="numpy")]
    if native_available():
        sets += [pytest.param(dict(cpu_kernels="compiled"), id="compiled"),
                 pytest.param(dict(cpu_kernels="compiled", threads=3, thread_grain_bytes=1), id="compiled-threads")]
    return sets


def fold_bytes(x, *args, **settings):
    with dml.configure(call_cache=False, **settings):
        return dml.fold(x, *args).tobytes()


# -- item 3: NaN sums ----------------------------------------------------------------------------

@pytest.mark.parametrize("settings", kernel_sets())
@pytest.mark.parametrize("first, second", [(0x7E01, 0x7E02), (0x7E02, 0x7E01), (0xFE05, 0x7E07),
                                           (0x7C01, 0x7E02), (0x7C00, 0xFC00)], ids=hex)
def test_float16_nans_meeting_give_the_canonical_nan(settings, first, second):
    # The case: window 2, stride 1; output position 1 sums
    # (k=0, block 1) then (k=1, block 0). Signalling NaNs (0x7C01), a negative
    # NaN and +inf + -inf (0x7C00 + 0xFC00) too.
    x = np.zeros((1, 2, 2), np.float16)
    w = x.view(np.uint16)
    w[0, 0, 1], w[0, 1, 0] = first, second
    out = np.frombuffer(fold_bytes(x, [3], 2, **settings), np.uint16)
    assert [hex(v) for v in out] == ["0x0", "0x7e00", "0x0"]


@pytest.mark.parametrize("settings", kernel_sets())
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_one_nan_term_gives_the_canonical_nan(settings, dtype):
    dtype = np.dtype(dtype)
    payload = {2: 0xFE05, 4: 0xFFC00123, 8: 0x7FF0000000000123}[dtype.itemsize]  # negative; signalling
    x = np.ones((1, 2, 4), dtype)
    x.view(WORD[dtype.itemsize])[0, 0, 2] = payload
    out = np.frombuffer(fold_bytes(x, [5], 2, **settings), WORD[dtype.itemsize])
    assert out[2] == CANONICAL[dtype]
    assert np.array_equal(out[[0, 1, 3, 4]].view(dtype), np.array([1, 2, 2, 1], dtype))


def nan_words(dtype, shape, seed):
    """Moderate values with NaNs of every kind (signs, payloads, signalling)
    and infinities of both signs sprinkled in, so NaNs meet NaNs, NaNs meet
    numbers and +inf meets -inf in the sums."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 100).astype(dtype)
    w = x.view(WORD[dtype.itemsize]).reshape(-1)
    bits, mant = 8 * dtype.itemsize, {2: 10, 4: 23, 8: 52}[dtype.itemsize]
    exp_all = ((1 << (bits - mant - 1)) - 1) << mant
    n = w.size
    nan_at = rng.random(n) < 0.08
    payload = rng.integers(1, 1 << min(mant, 62), size=n, dtype=np.uint64).astype(WORD[dtype.itemsize])
    sign = (rng.integers(0, 2, size=n).astype(WORD[dtype.itemsize]) << WORD[dtype.itemsize](bits - 1))
    w[nan_at] = (WORD[dtype.itemsize](exp_all) | payload | sign)[nan_at]
    inf_at = (rng.random(n) < 0.05) & ~nan_at
    w[inf_at] = (WORD[dtype.itemsize](exp_all) | sign)[inf_at]
    return x


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("geometry", [
    ((7, 9), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),     # every position sums up to 9 terms
    ((11,), (4,), (1,), (2,), (2,), (3,)),
    ((6, 5, 4), (2, 3, 2), (1, 2, 1), (1, 1, 2), (0, 1, 1), (1, 0, 1)),
])
def test_nan_sums_are_the_same_bytes_on_every_kernel_set(dtype, geometry):
    spatial, window, strides, dilations, sp, ep = geometry
    blocks = [(s + a + b - d * (w - 1) - 1) // t + 1
              for s, w, t, d, a, b in zip(spatial, window, strides, dilations, sp, ep)]
    k = int(np.prod(window))
    x = nan_words(dtype, (2, 3 * k, int(np.prod(blocks))), seed=len(spatial))
    args = (list(spatial), list(window), list(strides), list(dilations), list(sp), list(ep))
    with np.errstate(all="ignore"):
        want = ref.fold(x, *args)
    nan = np.isnan(want)
    assert nan.any() and (~nan).any()
    want.view(WORD[want.itemsize])[nan] = CANONICAL[want.dtype]
    for settings in kernel_sets():
        got = fold_bytes(x, *args, **settings.values[0])
        assert got == want.tobytes(), settings.id


# -- item 4: outputs that cannot be allocated -----------------------------------------------------

CHILD_PRELUDE = """
import resource, sys
import numpy as np
import opendml as dml

def limit(headroom):
    # The address space this process maps now plus `headroom`: an allocation
    # past it fails at once on any machine, however much memory it has.
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + headroom, resource.RLIM_INFINITY))

def expect(label, fn, *words):
    try:
        fn()
    except dml.DmlError as e:
        ok = isinstance(e, MemoryError) and type(e).__name__ == "AllocationError"
        missing = [w for w in words if w not in str(e)]
        print(label, "OK" if ok and not missing else f"BAD {type(e).__name__} missing {missing}: {e}")
    except BaseException as e:
        print(label, f"FOREIGN {type(e).__name__}: {e}")
    else:
        print(label, "NO ERROR")
"""


def run_child(code: str) -> list[str]:
    if not sys.platform.startswith("linux"):
        pytest.skip("RLIMIT_AS is how the child makes allocations fail; Linux only")
    r = subprocess.run([sys.executable, "-c", CHILD_PRELUDE + textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.split("\n")


GIB32 = "34358689800 bytes (32.0 GiB)"


@pytest.mark.parametrize("kernels", ["compiled", "numpy"])
def test_huge_valid_outputs_raise_an_opendml_error(kernels):
    if kernels == "compiled" and not native_available():
        pytest.skip("the compiled CPU kernels are not installed")
    lines = run_child(f"""
        dml.configure(cpu_kernels={kernels!r})
        limit(2 << 30)
        expect("unfold", lambda: dml.unfold(np.zeros((1, 1, 1, 1)), 1, 1, 1, 32767, 32767),
               "unfold", "(1, 1, 4294836225)", "float64", "{GIB32}")
        expect("fold", lambda: dml.fold(np.ones((1, 1, 1)), [65535, 65535], 1, 65535),
               "fold", "(1, 1, 65535, 65535)", "{GIB32}")
        expect("slice_grad", lambda: dml.slice_grad(np.ones((1, 1)), [65535, 65535], [0, 0], [1, 1], [1, 1]),
               "slice_grad", "(65535, 65535)", "{GIB32}")
        buf = dml.Device("cpu").create_buffer(8)
        desc = dml.TensorDesc(dml.DataType.FLOAT64, [65535, 65535], [0, 0])
        expect("Buffer.read", lambda: buf.read(desc), "Buffer.read", "(65535, 65535)", "float64", "{GIB32}")
        if {kernels!r} == "numpy":
            # float16 FOLD sums in float32 on the NumPy path: an output that
            # fits (256 MiB) whose sums (512 MiB) do not
            limit(384 << 20)
            expect("sums", lambda: dml.fold(np.ones((1, 1, 1), np.float16), [16384, 8192], 1, 16384),
                   "FOLD: cannot allocate the sums of shape (1, 1, 16384, 8192) float32")
    """)
    assert [line for line in lines if line] == ["unfold OK", "fold OK", "slice_grad OK", "Buffer.read OK"] + (
        ["sums OK"] if kernels == "numpy" else []), lines


def test_huge_outputs_of_torch_cpu_tensors_raise_an_opendml_error():
    pytest.importorskip("torch")
    lines = run_child(f"""
        import torch
        limit(2 << 30)
        expect("unfold", lambda: dml.unfold(torch.zeros((1, 1, 1, 1)), 1, 1, 1, 32767, 32767),
               "unfold", "(1, 1, 4294836225)", "float32")
        expect("slice_grad", lambda: dml.slice_grad(torch.ones((1, 1), dtype=torch.float64), [65535, 65535],
                                                    [0, 0], [1, 1], [1, 1]), "slice_grad", "{GIB32}")
    """)
    assert [line for line in lines if line] == ["unfold OK", "slice_grad OK"], lines


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_a_cached_call_whose_output_no_longer_fits_raises_the_opendml_error(kind):
    # The call cache (calls.c) serves the second call; its allocation fails
    # there and the call goes down the Python route, which raises the error.
    if not native_available():
        pytest.skip("the compiled CPU kernels (and the call cache) are not installed")
    if kind == "torch":
        pytest.importorskip("torch")
    lines = run_child(f"""
        x = np.ones((1, 1, 64, 1024), np.float32)
        if {kind!r} == "torch":
            import torch
            x = torch.from_numpy(x)
        args = ([1, 1], 1, 1, [16352, 0], [16352, 0])
        first = dml.unfold(x, *args)                 # 128 MiB, kept alive
        second = dml.unfold(x, *args)                # served from C
        print("served", dml.plan_cache_info()["call_cache"]["hits"] >= 1)
        limit(64 << 20)
        expect("cached", lambda: dml.unfold(x, *args), "unfold", "(1, 1, 33554432)", "float32",
               "134217728 bytes (128.0 MiB)")
    """)
    assert [line for line in lines if line] == ["served True", "cached OK"], lines


def test_allocation_error_is_an_opendml_validation_and_memory_error():
    from opendml.runtime import alloc
    from opendml.runtime.alloc import AllocationError
    err = alloc.allocation_error("unfold", (2, 3, 2**40), np.float32)
    assert isinstance(err, dml.DmlError) and isinstance(err, dml.ValidationError) and isinstance(err, MemoryError)
    assert str(err) == ("unfold: cannot allocate the output of shape (2, 3, 1099511627776) float32: "
                        "26388279066624 bytes (24.0 TiB) on the CPU")
    # a size no allocator can address is refused before asking one
    with pytest.raises(AllocationError, match="slice1"):
        alloc.output("slice1", (2**62, 4), np.float64, lambda *a: pytest.fail("allocator called"))


def test_family_outputs_that_cannot_be_allocated_raise_allocation_error(monkeypatch):
    import opendml as dml
    from opendml.arrays import front
    x = np.zeros((2, 3), np.float32)

    def no_memory(shape, dtype):
        raise MemoryError("Unable to allocate")
    monkeypatch.setattr(np, "empty", no_memory)
    # C's new-shape route allocates without np.empty; where its own allocation
    # fails it answers None (calls.c allocation_failed) and the Python route
    # below runs, allocates again and names the error: decline as it then does
    monkeypatch.setattr(front, "_move_new", lambda *args: None)
    with pytest.raises(dml.AllocationError, match=r"TILE: cannot allocate the output of shape \(4, 9\)"):
        dml.tile(x, [2, 3])
