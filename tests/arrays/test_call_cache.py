"""The call cache (runtime/calls.py, runtime/native/calls.c): a repeated
array-API call served from C gives exactly what the Python route gives
(``configure(call_cache=False)``): the same bytes, dtype, shape and array
type, or the same opendml error; anything the cache cannot vouch for (another
dtype, byte order, layout, array type, argument type) takes the Python route.
CPU tests use NumPy arrays and PyTorch CPU tensors; the CUDA tests at the end
(PyTorch CUDA tensors, CuPy arrays) skip where CUDA is absent."""
import math
import os
import subprocess
import sys
import textwrap
import threading
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import opendml as dml
from tests import reference as ref
from tests.conftest import cuda_available, native_available
from ..conftest import n_examples

DTYPES = [np.dtype(t) for t in ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                                "uint16", "uint32", "uint64")]
OPS = {"slice": dml.slice, "slice1": dml.slice1, "unfold": dml.unfold, "fold": dml.fold,
       "slice_grad": dml.slice_grad}
SETTINGS = settings(max_examples=n_examples(40), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _cache_available() -> bool:
    return native_available() and dml.plan_cache_info()["call_cache"]["numpy"]


needs_cache = pytest.mark.skipif(not _cache_available(),
                                 reason="the call cache needs the compiled extension built with NumPy's headers")


@pytest.fixture(autouse=True)
def call_cache_on():
    """Every test starts from the compiled kernels with the call cache on (and
    empty), whatever the environment says; its settings are restored after."""
    if not native_available():
        yield
        return
    with dml.configure(cpu_kernels="compiled", call_cache=True):
        yield


# -- helpers -----------------------------------------------------------------------------------------

def cache() -> dict:
    return dml.plan_cache_info()["call_cache"]


def served() -> int:
    return cache()["hits"]


def outcome(fn, *args):
    """The result of ``fn(*args)``, or the exception it raised."""
    try:
        return fn(*args)
    except Exception as e:          # noqa: BLE001 - compared with the cache-off outcome
        return e


def cache_off(fn, *args):
    with dml.configure(call_cache=False):
        return outcome(fn, *args)


def assert_same(got, want):
    """Byte-identical arrays of the same type, dtype, shape and layout, or the
    same exception type and message."""
    if isinstance(want, BaseException) or isinstance(got, BaseException):
        assert type(got) is type(want) and str(got) == str(want), (got, want)
        return
    assert type(got) is type(want), (type(got), type(want))
    assert got.dtype == want.dtype and got.dtype.str == want.dtype.str, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.tobytes() == want.tobytes()
    if isinstance(got, np.ndarray):
        assert got.flags.c_contiguous and got.flags.writeable


def random_values(rng, shape, dtype) -> np.ndarray:
    """Random bytes as ``dtype`` (every bit pattern, NaN payloads included), packed."""
    n = math.prod(shape) * dtype.itemsize
    return rng.integers(0, 256, size=n, dtype=np.uint8).view(dtype).reshape(shape)


def servable(x) -> bool:
    """Whether the Python route runs the kernel on ``x`` as given (so records
    the call): no axis of more than one element has a byte stride that is not
    a whole number of elements (those arrays are copied first)."""
    return all(s % x.itemsize == 0 for n, s in zip(x.shape, x.strides) if n > 1)


# -- 1. random calls: cached == uncached ------------------------------------------------------------

LAYOUTS = ["packed", "fortran", "permuted", "strided", "broadcast", "unaligned", "record-field", "read-only"]


@st.composite
def laid_out(draw, shape, dtype):
    """An array of ``shape`` and ``dtype`` with random contents, laid out in
    one of LAYOUTS: negative and non-unit steps, offsets, permuted axes,
    Fortran order, stride 0, an odd address, strides that are no whole number
    of elements."""
    shape = tuple(shape)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(LAYOUTS))
    r = len(shape)
    if kind == "packed":
        x = random_values(rng, shape, dtype)
    elif kind == "fortran":
        x = np.asfortranarray(random_values(rng, shape, dtype))
    elif kind == "permuted":
        perm = draw(st.permutations(range(r)))
        x = random_values(rng, [shape[p] for p in perm], dtype).transpose(np.argsort(perm))
    elif kind == "strided":
        steps = [draw(st.sampled_from([-3, -2, -1, 1, 2, 3])) for _ in shape]
        offsets = [draw(st.integers(0, 2)) for _ in shape]
        base = random_values(rng, [o + (n - 1) * abs(t) + 1 + draw(st.integers(0, 1))
                                   for n, t, o in zip(shape, steps, offsets)], dtype)
        index = []
        for n, t, o in zip(shape, steps, offsets):
            if t > 0:
                index.append(slice(o, o + (n - 1) * t + 1, t))
            else:
                start = o + (n - 1) * -t
                index.append(slice(start, o - 1 if o > 0 else None, t))
        x = base[tuple(index)]
    elif kind == "broadcast":
        kept = [n if draw(st.booleans()) else 1 for n in shape]
        x = np.broadcast_to(random_values(rng, kept, dtype), shape)
    elif kind == "unaligned":
        n = math.prod(shape) * dtype.itemsize
        raw = rng.integers(0, 256, size=n + 1, dtype=np.uint8)
        x = np.frombuffer(raw, dtype=dtype, offset=1).reshape(shape)
    elif kind == "record-field":
        rec = np.zeros(math.prod(shape), dtype=[("pad", np.uint8), ("v", dtype)])
        rec["v"] = random_values(rng, (math.prod(shape),), dtype)
        x = rec["v"].reshape(shape)
    else:
        x = random_values(rng, shape, dtype)
        x.flags.writeable = False
    assert x.shape == shape and x.dtype == dtype
    return x


def ints(draw, values, scalar_ok=False):
    """``values`` as a list or a tuple, or (all equal, sometimes) one int."""
    if scalar_ok and len(set(values)) == 1 and draw(st.booleans()):
        return values[0]
    return tuple(values) if draw(st.booleans()) else list(values)


@st.composite
def slice_calls(draw):
    rank = draw(st.integers(1, 4))
    sizes = [draw(st.integers(1, 6)) for _ in range(rank)]
    offs, outs, strides = [], [], []
    for s in sizes:
        o = draw(st.integers(0, s - 1)); t = draw(st.integers(1, 3))
        offs.append(o); strides.append(t); outs.append(draw(st.integers(1, (s - 1 - o) // t + 1)))
    return sizes, (ints(draw, offs), ints(draw, outs), ints(draw, strides))


@st.composite
def slice1_calls(draw):
    rank = draw(st.integers(1, 4))
    sizes = [draw(st.integers(1, 6)) for _ in range(rank)]
    offs, wins, strides, outs = [], [], [], []
    for s in sizes:
        o = draw(st.integers(0, s - 1)); w = draw(st.integers(1, s - o))
        t = draw(st.sampled_from([-3, -2, -1, 1, 2, 3]))
        offs.append(o); wins.append(w); strides.append(t); outs.append(draw(st.integers(1, 1 + (w - 1) // abs(t))))
    out = draw(st.sampled_from([None, "given"]))
    return sizes, (ints(draw, offs), ints(draw, wins), ints(draw, strides),
                   None if out is None else ints(draw, outs))


@st.composite
def window(draw, d):
    w, s, dl, sp, ep, spatial = [], [], [], [], [], []
    for _ in range(d):
        w.append(draw(st.integers(1, 3))); dl.append(draw(st.integers(1, 2))); s.append(draw(st.integers(1, 3)))
        sp.append(draw(st.integers(0, 2))); ep.append(draw(st.integers(0, 2)))
        lo = max(1, dl[-1] * (w[-1] - 1) + 1 - sp[-1] - ep[-1])
        spatial.append(draw(st.integers(lo, lo + 3)))
    return w, s, dl, sp, ep, spatial


@st.composite
def unfold_calls(draw):
    d = draw(st.integers(1, 3 if draw(st.booleans()) else 2))
    w, s, dl, sp, ep, spatial = draw(window(d))
    sizes = [draw(st.integers(1, 2)), draw(st.integers(1, 3)), *spatial]
    return sizes, tuple(ints(draw, v, scalar_ok=True) for v in (w, s, dl, sp, ep))


@st.composite
def fold_calls(draw):
    d = draw(st.integers(1, 2))
    w, s, dl, sp, ep, spatial = draw(window(d))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    blocks = [(o + a + b - q * (k - 1) - 1) // t + 1 for o, k, t, q, a, b in zip(spatial, w, s, dl, sp, ep)]
    sizes = [1] * draw(st.integers(0, d - 1)) + [n, c * math.prod(w), math.prod(blocks)]
    return sizes, (ints(draw, spatial),) + tuple(ints(draw, v, scalar_ok=True) for v in (w, s, dl, sp, ep))


@st.composite
def slice_grad_calls(draw):
    rank = draw(st.integers(1, 4))
    sizes = [draw(st.integers(1, 6)) for _ in range(rank)]
    offs, wins, strides, gs = [], [], [], []
    for s in sizes:
        o = draw(st.integers(0, s - 1)); w = draw(st.integers(1, s - o))
        t = draw(st.sampled_from([-3, -2, -1, 1, 2, 3]))
        offs.append(o); wins.append(w); strides.append(t); gs.append(draw(st.integers(1, 1 + (w - 1) // abs(t))))
    return gs, (ints(draw, sizes), ints(draw, offs), ints(draw, wins), ints(draw, strides))


CALLS = {"slice": slice_calls(), "slice1": slice1_calls(), "unfold": unfold_calls(), "fold": fold_calls(),
         "slice_grad": slice_grad_calls()}


#: Kernel settings the property runs under: the defaults, and (as conftest's
#: "cpu-threads") even tiny work split over 3 threads and UNFOLD's column tiles.
KERNEL_SETTINGS = {"default": {},
                   "threaded": dict(threads=3, thread_grain_bytes=1, unfold_tile_stride=0, unfold_tile_columns=3)}


@needs_cache
@pytest.mark.parametrize("kernels", list(KERNEL_SETTINGS))
@pytest.mark.parametrize("op", list(OPS))
@SETTINGS
@given(data=st.data())
def test_cached_calls_give_the_python_routes_bytes(op, kernels, data):
    shape, args = data.draw(CALLS[op], label="call")
    dtype = data.draw(st.sampled_from(DTYPES), label="dtype")
    x = data.draw(laid_out(shape, dtype), label="x")
    with dml.configure(**KERNEL_SETTINGS[kernels]):
        check_call(OPS[op], x, args)


def check_call(fn, x, args):
    want = cache_off(fn, x, *args)                 # leaving the block empties the cache
    assert not isinstance(want, BaseException), want
    assert cache()["entries"] == 0
    before = served()
    first = fn(x, *args)                           # Python route; recorded where servable
    assert served() == before
    assert cache()["entries"] == (1 if servable(x) else 0)
    second = fn(x, *args)
    assert served() == before + (1 if servable(x) else 0)
    for got in (first, second):
        assert_same(got, want)
    assert not np.shares_memory(first, second)


def _large_cases():
    rng = np.random.default_rng(7)
    return [
        ("slice", random_values(rng, (3, 200, 300), np.dtype(np.uint16))[:, ::-1, ::2],
         ([0, 0, 0], [3, 100, 150], [1, 2, 1])),
        ("slice1", np.asfortranarray(random_values(rng, (300, 400), np.dtype(np.float64))),
         ([0, 0], [300, 400], [-1, 1])),
        ("unfold", random_values(rng, (2, 4, 64, 64), np.dtype(np.float32)).transpose(0, 1, 3, 2),
         (3, 1, 1, 1, 1)),
        ("fold", random_values(rng, (2, 36, 4096), np.dtype(np.int32)), ([64, 64], 3, 1, 1, 1, 1)),
        ("slice_grad", random_values(rng, (500, 600), np.dtype(np.int8))[::-1],
         ([1000, 1200], [0, 0], [1000, 1200], [-2, 2])),
    ]


LARGE = _large_cases()


@needs_cache
@pytest.mark.parametrize("kernels", list(KERNEL_SETTINGS))
@pytest.mark.parametrize("op, x, args", LARGE, ids=[c[0] for c in LARGE])
def test_large_calls_give_the_python_routes_bytes(op, x, args, kernels):
    """Outputs of 90 KiB to 1.2 MiB: kernels run without the GIL, on threads,
    into output blocks."""
    with dml.configure(output_cache_bytes=64 << 20, **KERNEL_SETTINGS[kernels]):
        check_call(OPS[op], x, args)


@needs_cache
def test_repeated_calls_are_served_and_read_the_input_each_time():
    x = np.arange(6 * 7, dtype=np.int32).reshape(6, 7)
    args = ([1, 0], [4, 7], [-1, 3])
    first = dml.slice1(x, *args)
    before = served()
    x[:] = -x                                      # same array, new contents: never a stale output
    assert np.array_equal(dml.slice1(x, *args), -first)
    y = np.arange(6 * 7, dtype=np.int32).reshape(6, 7) * 10   # another array of the same layout
    assert np.array_equal(dml.slice1(y, *args), first * 10)
    assert served() == before + 2



@needs_cache
def test_the_front_table_serves_repeats_and_empties_with_the_cache():
    """A repeated call is found through the front table (a cheap hash of the
    key words, asked before the dict); a call differing in one argument gets
    its own entry, and a configuration change empties the table with the dict."""
    x = grid(6, 7)
    args = ([1, 0], [4, 7], [-1, 3])
    first = dml.slice1(x, *args)                   # recorded
    assert cache()["front"] == 0
    assert np.array_equal(dml.slice1(x, *args), first)   # served from the dict, kept in front
    assert cache()["front"] == 1
    before = served()
    for k in range(3):
        assert np.array_equal(dml.slice1(x + k, *args), first + k)
    assert served() == before + 3 and cache()["front"] == 1
    other = dml.slice1(x, [0, 0], [4, 7], [1, 3])  # one argument differs: recorded, then served, its own answer
    assert np.array_equal(dml.slice1(x, [0, 0], [4, 7], [1, 3]), other)
    assert np.array_equal(other, x[:4, ::3]) and not np.array_equal(other, first)
    assert cache()["front"] == 2
    with dml.configure(threads=1):
        assert cache()["front"] == 0 and cache()["entries"] == 0
        before = served()
        assert np.array_equal(dml.slice1(x, *args), first)
        assert served() == before                  # a miss: nothing served from the emptied front


# -- 2. no false hits -------------------------------------------------------------------------------

class Sub(np.ndarray):
    pass


def grid(*shape, dtype=np.int32):
    return np.arange(math.prod(shape), dtype=np.int64).astype(dtype).reshape(shape)


def _readonly(x):
    y = x.copy()
    y.flags.writeable = False
    return y


def _unaligned(x):
    raw = np.zeros(x.nbytes + 1, np.uint8)
    y = np.frombuffer(raw, dtype=x.dtype, offset=1).reshape(x.shape)
    y[...] = x
    return y


def _wider_rows(x):
    big = np.zeros((x.shape[0], x.shape[1] + 3), x.dtype)
    big[:, :x.shape[1]] = x
    return big[:, :x.shape[1]]


def _matrix(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        return np.matrix(x)


X = grid(4, 6)
SLICE1_ARGS = ([0, 1], [4, 5], [1, -2])
#: (name, the variant's function, its input, its arguments): each differs from
#: dml.slice1(X, *SLICE1_ARGS), cached first, in one thing.
VARIANTS = [
    ("dtype float32 (same strides)", dml.slice1, X.view(np.float32), SLICE1_ARGS),
    ("dtype uint32 (same strides)", dml.slice1, X.view(np.uint32), SLICE1_ARGS),
    ("dtype int16 (same shape)", dml.slice1, X.astype(np.int16), SLICE1_ARGS),
    ("dtype int64 as 'q'", dml.slice1, X.astype("q"), SLICE1_ARGS),
    ("big-endian", dml.slice1, X.astype(">i4"), SLICE1_ARGS),
    ("Fortran order", dml.slice1, np.asfortranarray(X), SLICE1_ARGS),
    ("padded rows", dml.slice1, _wider_rows(X), SLICE1_ARGS),
    ("reversed twice (new values)", dml.slice1, X[::-1, ::-1].copy()[::-1, ::-1], SLICE1_ARGS),
    ("transposed, same shape", dml.slice1, grid(6, 4).T, SLICE1_ARGS),
    ("np.matrix", dml.slice1, _matrix(X), SLICE1_ARGS),
    ("ndarray subclass", dml.slice1, X.view(Sub), SLICE1_ARGS),
    ("masked array", dml.slice1, np.ma.masked_array(X, mask=X % 2 == 0), SLICE1_ARGS),
    ("read-only", dml.slice1, _readonly(X), SLICE1_ARGS),
    ("odd address", dml.slice1, _unaligned(X), SLICE1_ARGS),
    ("float offset", dml.slice1, X, ([0, 1.0], [4, 5], [1, -2])),
    ("bool stride", dml.slice1, X, ([0, 1], [4, 5], [True, -2])),
    ("np.int64 size", dml.slice1, X, ([0, 1], [4, np.int64(5)], [1, -2])),
    ("tuple arguments", dml.slice1, X, ((0, 1), (4, 5), (1, -2))),
    ("other offsets", dml.slice1, X, ([1, 0], [3, 5], [1, -2])),
    ("other strides", dml.slice1, X, ([0, 1], [4, 5], [-1, 2])),
    ("output sizes given", dml.slice1, X, SLICE1_ARGS + ([2, 2],)),
    ("output sizes of float", dml.slice1, X, SLICE1_ARGS + ([2.0, 2],)),
    ("slice, same arguments", dml.slice, X, ([0, 1], [4, 2], [1, 2])),
    ("slice_grad, same arguments", dml.slice_grad, X, ([4, 6], [0, 0], [4, 6], [1, 1])),
    ("smaller input: error", dml.slice1, grid(3, 6), SLICE1_ARGS),
    ("3-D input: error", dml.slice1, grid(1, 4, 6), SLICE1_ARGS),
    ("huge offset: error", dml.slice1, X, ([0, 2**70], [4, 5], [1, -2])),
    ("zero stride: error", dml.slice1, X, ([0, 1], [4, 5], [0, -2])),
    ("window past the end: error", dml.slice1, X, ([1, 1], [4, 5], [1, -2])),
    ("too many arguments", dml.slice1, X, SLICE1_ARGS + ([2, 3], [1])),
    ("list input: error", dml.slice1, X.tolist(), SLICE1_ARGS),
    ("bool array: error", dml.slice1, X > 3, SLICE1_ARGS),
    ("complex array: error", dml.slice1, X.astype(np.complex64), SLICE1_ARGS),
    ("empty axis: error", dml.slice1, np.zeros((4, 0), np.int32), SLICE1_ARGS),
    ("0-d array: error", dml.slice1, np.array(3, np.int32), SLICE1_ARGS),
    ("9-D array: error", dml.slice1, np.zeros((1,) * 7 + (4, 6), np.int32), SLICE1_ARGS),
]


@needs_cache
@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
@pytest.mark.parametrize("name, fn, x, args", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_a_call_differing_in_one_thing_gets_its_own_answer(name, fn, x, args):
    want = cache_off(fn, x, *args)
    base = dml.slice1(X, *SLICE1_ARGS)             # recorded
    before = served()
    assert_same(dml.slice1(X, *SLICE1_ARGS), base)
    assert served() == before + 1
    for _ in range(2):                             # the variant twice: its own entry, if any, serves the second
        assert_same(outcome(fn, x, *args), want)
    if name.endswith(": error"):
        assert isinstance(want, dml.DmlError), want
    assert dml.slice1(X, *SLICE1_ARGS).tolist() == ref.slice1(X, *SLICE1_ARGS, [4, 3]).tolist()


U = grid(2, 3, 5, 6, dtype=np.float32)
UNFOLD_ARGS = (2, 1, 1, 0, 0)
UNFOLD_VARIANTS = [
    ("list window", (([2, 2]), 1, 1, 0, 0)),
    ("tuple window", ((2, 2), 1, 1, 0, 0)),
    ("one-entry list: error", ([2], 1, 1, 0, 0)),
    ("float stride: error", (2, 1.0, 1, 0, 0)),
    ("bool dilation: error", (2, 1, True, 0, 0)),
    ("np.int64 padding", (2, 1, 1, np.int64(1), 0)),
    ("other padding", (2, 1, 1, 1, 1)),
    ("other window", (3, 1, 1, 0, 0)),
    ("window too big: error", (7, 1, 1, 0, 0)),
    ("negative padding: error", (2, 1, 1, -1, 0)),
    ("None stride: error", (2, None, 1, 0, 0)),
]


@needs_cache
@pytest.mark.parametrize("name, args", UNFOLD_VARIANTS, ids=[v[0] for v in UNFOLD_VARIANTS])
def test_unfold_argument_types_and_values(name, args):
    want = cache_off(dml.unfold, U, *args)
    base = dml.unfold(U, *UNFOLD_ARGS)
    before = served()
    assert_same(dml.unfold(U, *UNFOLD_ARGS), base)
    assert served() == before + 1
    for _ in range(2):
        assert_same(outcome(dml.unfold, U, *args), want)
    if name.endswith(": error"):
        assert isinstance(want, dml.ValidationError), want
    else:
        assert np.array_equal(want, ref.unfold(U, *(dml.arrays.per_axis(v, 2) for v in args)))


@needs_cache
def test_errors_stay_opendml_errors_with_the_cache_on():
    """A call that fails keeps failing with the same error (never cached)."""
    x = grid(2, 3, 4)
    bad = [(dml.slice, x, ([0, 0, 5], [1, 1, 1], [1, 1, 1])),
           (dml.slice1, x, ([0, 0, 0], [2, 3, 4], [1, 1, 0])),
           (dml.unfold, x, ([5], 1, 1, 0, 0)),
           (dml.fold, x, ([3], [2], 1, 1, 0, 0)),
           (dml.slice_grad, x, ([1, 1, 1], [0, 0, 0], [2, 3, 4], [1, 1, 1]))]
    for fn, a, args in bad:
        want = cache_off(fn, a, *args)
        assert isinstance(want, dml.ValidationError), (fn, want)
        for _ in range(3):
            assert_same(outcome(fn, a, *args), want)


@needs_cache
@pytest.mark.parametrize("order", ["tagged first", "plain first"])
def test_dtype_metadata_of_one_call_is_not_given_to_another(order):
    """The Python route keeps the input dtype's metadata (as h5py's enum and
    string dtypes use it); a served call must not hand out another array's."""
    enum = {"enum": {"RED": 0, "GREEN": 1}}
    tagged = np.arange(8, dtype=np.dtype(np.int8, metadata=enum))
    plain = np.arange(8, dtype=np.int8)
    arrays = [tagged, plain] if order == "tagged first" else [plain, tagged]
    for x in arrays:
        want = cache_off(dml.slice, x, [0], [4], [2]).dtype.metadata
        assert want == (enum if x is tagged else None)
    for x in arrays:
        got = dml.slice(x, [0], [4], [2])
        assert got.tolist() == [0, 2, 4, 6] and got.dtype.metadata == (enum if x is tagged else None)


# -- 3. large outputs (the output-block cache) ------------------------------------------------------

@pytest.fixture
def output_blocks():
    """The output-block cache on, with room for a few MiB of released outputs."""
    with dml.configure(output_cache_bytes=64 << 20):
        yield


@needs_cache
def test_large_served_outputs_are_correct_writable_and_independent(output_blocks):
    x = np.random.default_rng(0).standard_normal((600, 1024)).astype(np.float32)
    want = x[:, ::-1].copy()                      # 2.3 MiB
    args = ([0, 0], [600, 1024], [1, -1])
    a = dml.slice1(x, *args)
    before = served()
    b, c = dml.slice1(x, *args), dml.slice1(x, *args)
    assert served() == before + 2
    for r in (a, b, c):
        assert r.flags.writeable and r.flags.c_contiguous and np.array_equal(r, want)
    del r
    assert not (np.shares_memory(a, b) or np.shares_memory(b, c) or np.shares_memory(a, c))
    b[...] = 0
    b[0, 0] = 1
    assert np.array_equal(a, want) and np.array_equal(c, want)
    # b's block, released (zeros in it), serves the next output
    blocks = dml.cpu_output_cache()["hits"]
    del b
    d = dml.slice1(x, *args)
    assert dml.cpu_output_cache()["hits"] == blocks + 1 and served() == before + 3
    assert np.array_equal(d, want)
    # a block still seen through a view is not reused
    view = c[::7]
    del c
    e = dml.slice1(x, *args)
    assert np.array_equal(e, want) and np.array_equal(view, want[::7]) and not np.shares_memory(e, view)
    e += 1
    assert np.array_equal(view, want[::7]) and np.array_equal(d, want) and np.array_equal(a, want)


@needs_cache
def test_served_slice_grad_and_fold_overwrite_a_dirty_reused_block(output_blocks):
    rng = np.random.default_rng(1)
    g = rng.standard_normal((256, 342)).astype(np.float32)
    sg_args = ([512, 1024], [0, 0], [512, 1024], [2, 3])
    want = np.zeros((512, 1024), np.float32)      # 2 MiB, mostly zeros
    want[::2, ::3] = g
    first = dml.slice_grad(g, *sg_args)
    assert np.array_equal(first, want)
    del first
    sevens = np.full((512, 1024), 7, np.float32)
    dirty = dml.slice(sevens, [0, 0], [512, 1024], [1, 1])   # takes the released block, fills it with 7s
    del dirty
    blocks, before = dml.cpu_output_cache()["hits"], served()
    again = dml.slice_grad(g, *sg_args)
    assert served() == before + 1 and dml.cpu_output_cache()["hits"] == blocks + 1
    assert np.array_equal(again, want)

    img = rng.standard_normal((1, 4, 256, 256)).astype(np.float32)   # 1 MiB
    cols = dml.unfold(img, 2, 2)                                     # non-overlapping windows
    first = dml.fold(cols, [256, 256], 2, 2)
    assert np.array_equal(first, img)
    del first
    dirty = dml.slice(sevens[:256], [0, 0], [256, 1024], [1, 1])     # 1 MiB of 7s into the released block
    del dirty
    blocks, before = dml.cpu_output_cache()["hits"], served()
    again = dml.fold(cols, [256, 256], 2, 2)
    assert served() == before + 1 and dml.cpu_output_cache()["hits"] == blocks + 1
    assert np.array_equal(again, img)


@needs_cache
def test_large_outputs_without_the_block_cache():
    x = grid(512, 1024, dtype=np.int32)
    with dml.configure(output_cache_bytes=0):
        a = dml.slice(x, [0, 1], [512, 512], [1, 2])
        before = served()
        b = dml.slice(x, [0, 1], [512, 512], [1, 2])
        assert served() == before + 1
        assert np.array_equal(a, x[:, 1::2]) and np.array_equal(b, x[:, 1::2]) and not np.shares_memory(a, b)
        assert b.flags.writeable and b.flags.c_contiguous


# -- 4. configuration --------------------------------------------------------------------------------

def _prime():
    x = grid(4, 6)
    dml.slice(x, [0, 0], [2, 3], [2, 2])
    dml.slice(x, [0, 0], [2, 3], [2, 2])
    assert cache()["entries"] >= 1
    return x


@needs_cache
def test_call_cache_off_serves_nothing():
    x = _prime()
    with dml.configure(call_cache=False):
        assert cache()["entries"] == 0 and cache()["enabled"] is False and dml.config().call_cache is False
        before = served()
        for _ in range(3):
            assert dml.slice(x, [0, 0], [2, 3], [2, 2]).tolist() == x[::2, ::2].tolist()
        assert served() == before
    assert cache()["enabled"] is True and cache()["entries"] == 0
    dml.slice(x, [0, 0], [2, 3], [2, 2])
    before = served()
    dml.slice(x, [0, 0], [2, 3], [2, 2])
    assert served() == before + 1


@needs_cache
def test_call_cache_off_records_nothing():
    x = grid(4, 6)
    with dml.configure(call_cache=False):
        for _ in range(2):
            dml.slice(x, [0, 0], [2, 3], [2, 2])
        assert cache()["entries"] == 0


@needs_cache
@pytest.mark.parametrize("change", [
    dict(threads=1), dict(threads=3), dict(output_cache_bytes=1 << 20), dict(thread_grain_bytes=1),
    dict(unfold_tile_stride=0), dict(unfold_tile_columns=3), dict(cpu_kernels="compiled"), dict(call_cache=True),
    dict(),
], ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "nothing")
def test_every_configuration_change_empties_the_cache(change):
    x = _prime()
    with dml.configure(**change):
        assert cache()["entries"] == 0
        before = served()
        assert dml.slice(x, [0, 0], [2, 3], [2, 2]).tolist() == x[::2, ::2].tolist()
        assert served() == before                  # a miss: recorded again under these settings
        assert dml.slice(x, [0, 0], [2, 3], [2, 2]).tolist() == x[::2, ::2].tolist()
        assert served() == before + 1
    assert cache()["entries"] == 0                 # restoring is a change too


@pytest.mark.parametrize("value", ["yes", 1, 0, "0", 1.0, np.bool_(True)])
def test_call_cache_must_be_a_bool(value):
    before = dml.config()
    kind = type(value).__qualname__ if type(value).__module__ == "builtins" else \
        f"{type(value).__module__}.{type(value).__qualname__}"     # NumPy's bool: not "got bool"
    with pytest.raises(TypeError, match=rf"^configure: call_cache must be True or False; got {kind}$"):
        dml.configure(call_cache=value)
    assert dml.config() == before


def _python(code, **env):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OPENDML_")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**clean, **env},
                          timeout=120)


def test_bad_environment_value_is_one_line_exit_2():
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OPENDML_")}
    r = subprocess.run([sys.executable, "-m", "opendml.cli", "info"], capture_output=True, text=True,
                       env={**clean, "OPENDML_CALL_CACHE": "x"}, timeout=120)
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    assert r.stderr == "opendml: error: OPENDML_CALL_CACHE must be 0 or 1; got 'x'\n", r.stderr


CHILD = """
import numpy as np, opendml as dml
x = np.arange(24, dtype=np.float32).reshape(4, 6)
def hits(): return dml.plan_cache_info()["call_cache"]["hits"]
try:
    dml.slice(x, [0, 0], [2, 3], [2, 2])
except dml.ValidationError as e:
    print("error:", e)
    dml.configure(call_cache=True)            # replaces the bad value
    dml.slice(x, [0, 0], [2, 3], [2, 2])
for _ in range(3):
    assert dml.slice(x, [0, 0], [2, 3], [2, 2]).tolist() == x[::2, ::2].tolist()
print(dml.config().call_cache, dml.plan_cache_info()["call_cache"]["enabled"], hits())
"""


@needs_cache
@pytest.mark.parametrize("value, want", [
    ("0", "False False 0"), ("1", "True True 3"), (" 1 ", "True True 3"), ("", "True True 3"),
    ("x", "error: OPENDML_CALL_CACHE must be 0 or 1; got 'x'\nTrue True 3"),
    ("true", "error: OPENDML_CALL_CACHE must be 0 or 1; got 'true'\nTrue True 3"),
])
def test_environment_variable(value, want):
    r = _python(CHILD, OPENDML_CALL_CACHE=value)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == want


@needs_cache
def test_environment_off_is_reported_before_the_first_call():
    r = _python("import opendml as dml; print(dml.plan_cache_info()['call_cache']['enabled'])",
                OPENDML_CALL_CACHE="0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


# -- 5. threads ---------------------------------------------------------------------------------------

@needs_cache
def test_threads_calling_while_the_configuration_changes():
    rng = np.random.default_rng(5)
    shared = rng.standard_normal((2, 3, 40, 50)).astype(np.float32)
    big = rng.integers(-2**31, 2**31 - 1, size=(520, 1030), dtype=np.int32)      # outputs > 1 MiB
    cases = [
        (dml.slice1, ([0, 0, 1, 0], [2, 3, 39, 50], [1, -1, 2, -3])),
        (dml.unfold, ([3, 3], 1, 1, 1, 1)),
        (dml.slice, ([0, 1, 0, 0], [2, 2, 20, 25], [1, 1, 2, 2])),
        (dml.slice_grad, ([4, 6, 80, 150], [0, 0, 0, 0], [4, 6, 80, 150], [2, 2, 2, 3])),
    ]
    big_case = (dml.slice1, ([0, 0], [520, 1030], [-1, 1]))
    big_want = big[::-1].copy()
    done = threading.Event()
    errors: list = []

    def expected(x):
        with dml.configure(call_cache=False):
            return [fn(x, *args) for fn, args in cases]

    with dml.configure(output_cache_bytes=256 << 20):
        arrays = [shared] * 6 + [rng.standard_normal(shared.shape).astype(np.float32)[:, ::-1] for _ in range(6)]
        wants = {id(a): expected(a) for a in arrays}
        start = threading.Barrier(13, timeout=60)

        def worker(i):
            try:
                x = arrays[i]
                start.wait()
                for k in range(25):
                    for (fn, args), want in zip(cases, wants[id(x)]):
                        got = fn(x, *args)
                        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (i, k, fn.__name__)
                    if k % 5 == i % 5:
                        fn, args = big_case
                        got = fn(big, *args)
                        assert np.array_equal(got, big_want), (i, k, "big")
            except BaseException as e:          # noqa: BLE001 - reported below
                errors.append(e)

        def toggler():
            try:
                start.wait()
                k = 0
                while not done.is_set():
                    k += 1
                    dml.configure(call_cache=k % 3 != 0)
                    dml.configure(threads=1 + k % 3)
                    if k % 7 == 0:
                        dml.configure(cpu_kernels="numpy")
                        dml.configure(cpu_kernels="compiled")
            except BaseException as e:          # noqa: BLE001
                errors.append(e)

        before = served()
        with dml.configure():                      # restores every setting the toggler changed
            threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(12)]
            toggle = threading.Thread(target=toggler, daemon=True)
            for t in threads + [toggle]:
                t.start()
            for t in threads:
                t.join(60)
            done.set()
            toggle.join(60)
        assert not any(t.is_alive() for t in threads + [toggle])
    assert not errors, errors[:3]
    assert served() > before                       # some calls were served between the changes
    assert dml.config().call_cache is True and dml.config().cpu_kernels == "compiled"


@needs_cache
def test_threads_share_served_calls():
    """Without configuration changes: 12 threads, same and different arrays,
    most calls served."""
    xs = [grid(3, 8, 9, dtype=np.int16) + i for i in range(4)]
    args = ([0, 1, 0], [3, 7, 9], [-1, 2, -2])
    wants = [ref.slice1(x, *args, [3, 4, 5]) for x in xs]
    dml.slice1(xs[0], *args)
    before = served()
    errors: list = []

    def worker(i):
        try:
            for _ in range(200):
                got = dml.slice1(xs[i % 4], *args)
                assert np.array_equal(got, wants[i % 4]) and got.dtype == np.int16
        except BaseException as e:              # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:3]
    assert served() == before + 12 * 200


# -- 6. the NumPy kernels -----------------------------------------------------------------------------

@needs_cache
def test_numpy_kernels_record_and_serve_nothing():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 7, 8))
    cases = [(dml.slice1, x, ([0, 1, 0, 1], [2, 2, 7, 6], [1, -1, 3, -2])),
             (dml.slice, x[:, :, ::-1], ([0, 0, 1, 0], [2, 3, 3, 4], [1, 1, 2, 2])),
             (dml.unfold, x, ([2, 3], [1, 2], 1, [1, 0], 0)),
             (dml.fold, np.arange(240, dtype=np.int32).reshape(1, 12, 20), ([6, 5], 2, 1, 1, 0, 0)),
             (dml.slice_grad, x.astype(np.uint16), ([4, 6, 7, 16], [0, 0, 0, 0], [4, 6, 7, 16], [2, 2, 1, 2]))]
    wants = [cache_off(fn, a, *args) for fn, a, args in cases]
    for _ in range(2):                             # compiled: recorded, then served
        for (fn, a, args), want in zip(cases, wants):
            assert_same(fn(a, *args), want)
    assert cache()["entries"] == len(cases)
    with dml.configure(cpu_kernels="numpy"):
        assert cache()["entries"] == 0
        before = served()
        for _ in range(3):
            for (fn, a, args), want in zip(cases, wants):
                assert_same(fn(a, *args), want)
        assert cache()["entries"] == 0 and served() == before
    assert cache()["entries"] == 0


# -- 7. PyTorch CPU tensors ---------------------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


@st.composite
def torch_laid_out(draw, shape, dtype):
    """A PyTorch CPU tensor of ``shape`` and ``dtype`` with random contents:
    packed, permuted, stepped with an offset, expanded (stride 0), or a
    column-major copy."""
    torch = _torch()
    shape = tuple(shape)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["packed", "permuted", "stepped", "expanded", "column-major"]))
    if kind == "packed":
        t = torch.from_numpy(random_values(rng, shape, dtype))
    elif kind == "permuted":
        perm = draw(st.permutations(range(len(shape))))
        t = torch.from_numpy(random_values(rng, [shape[p] for p in perm], dtype)).permute(*np.argsort(perm).tolist())
    elif kind == "stepped":
        steps = [draw(st.integers(1, 3)) for _ in shape]
        offsets = [draw(st.integers(0, 2)) for _ in shape]
        base = torch.from_numpy(random_values(rng, [o + (n - 1) * k + 1 for n, k, o in zip(shape, steps, offsets)],
                                              dtype))
        t = base[tuple(slice(o, o + (n - 1) * k + 1, k) for n, k, o in zip(shape, steps, offsets))]
    elif kind == "expanded":
        kept = [n if draw(st.booleans()) else 1 for n in shape]
        t = torch.from_numpy(random_values(rng, kept, dtype)).expand(*shape)
    else:
        t = torch.from_numpy(np.asfortranarray(random_values(rng, shape, dtype)))
    assert tuple(t.shape) == shape
    return t


def assert_same_tensor(got, want):
    torch = _torch()
    assert isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor)
    assert got.dtype == want.dtype and got.shape == want.shape and got.is_contiguous()
    assert got.grad_fn is None and not got.requires_grad
    assert got.numpy().tobytes() == want.numpy().tobytes()


@needs_cache
@pytest.mark.parametrize("op", list(OPS))
@settings(SETTINGS, max_examples=n_examples(25))
@given(data=st.data())
def test_torch_cpu_calls_give_the_python_routes_bytes(op, data):
    shape, args = data.draw(CALLS[op], label="call")
    dtype = data.draw(st.sampled_from(DTYPES), label="dtype")
    t = data.draw(torch_laid_out(shape, dtype), label="t")
    fn = OPS[op]
    want = cache_off(fn, t, *args)
    assert not isinstance(want, BaseException), want
    first = fn(t, *args)
    before = served()
    second = fn(t, *args)
    assert served() == before + 1
    for got in (first, second):
        assert_same_tensor(got, want)
    assert first.data_ptr() != second.data_ptr()


@needs_cache
def test_torch_cpu_tensors():
    torch = _torch()
    x = torch.arange(2 * 3 * 6 * 7, dtype=torch.float32).reshape(2, 3, 6, 7)
    xn = x.numpy()
    cases = [(dml.slice1, ([0, 1, 0, 1], [2, 2, 6, 6], [1, -1, 2, -2])),
             (dml.slice, ([0, 0, 1, 0], [2, 3, 2, 4], [1, 1, 2, 2])),
             (dml.unfold, ([2, 3], 1, 1, [1, 0], 0)),
             (dml.slice_grad, ([4, 6, 12, 14], [0, 0, 0, 0], [4, 6, 12, 14], [2, 2, 2, 2]))]
    for fn, args in cases:
        offset = torch.arange(3 * 3 * 6 * 7, dtype=torch.float32).reshape(3, 3, 6, 7)[1:]     # x's strides
        padded = torch.arange(2 * 3 * 6 * 9, dtype=torch.float32).reshape(2, 3, 6, 9)[..., 1:8]
        for t in (x, x.flip(2), x.transpose(2, 3).contiguous().transpose(2, 3), offset, padded):
            want = cache_off(fn, np.ascontiguousarray(t.numpy()), *args)
            got = [fn(t, *args)]
            before = served()
            got += [fn(t, *args), fn(t, *args)]
            assert served() == before + 2
            for g in got:
                assert isinstance(g, torch.Tensor) and g.dtype == torch.float32
                assert g.numpy().tobytes() == want.tobytes() and tuple(g.shape) == want.shape
        assert_same(fn(xn, *args), cache_off(fn, xn, *args))      # NumPy arrays keep their own entries
    cols = dml.unfold(x, 2, 2)                     # fold: unfold's adjoint
    for _ in range(2):
        assert torch.equal(dml.fold(cols, [6, 6], 2, 2), x[:, :, :6, :6])


@needs_cache
def test_torch_cpu_tensors_differing_in_one_thing():
    """After a tensor's call is cached, tensors of the same shape and strides
    but another dtype, a Parameter, a negative view, a tensor that needs
    autograd, or other data get their own answers."""
    torch = _torch()
    x = torch.arange(4 * 6, dtype=torch.int32).reshape(4, 6)
    args = SLICE1_ARGS
    want = torch.from_numpy(ref.slice1(x.numpy(), *args, [4, 3]))
    dml.slice1(x, *args)
    before = served()
    assert torch.equal(dml.slice1(x, *args), want) and served() == before + 1
    as_float = x.view(torch.float32)
    for variant in (as_float, x.view(torch.uint32), x.to(torch.int16), x[:, :6] * 10, x.clone(),
                    x.to(torch.float32).t().contiguous().t()):
        expected = cache_off(dml.slice1, variant, *args)
        for _ in range(2):
            assert_same_tensor(dml.slice1(variant, *args), expected)
    p = torch.nn.Parameter(x.to(torch.float32), requires_grad=False)
    assert torch.equal(dml.slice1(p, *args), want.to(torch.float32))
    for bad in (x.to(torch.bool), x.to(torch.complex64), x.to(torch.bfloat16)):
        expected = cache_off(dml.slice1, bad, *args)
        assert isinstance(expected, dml.UnsupportedError), expected
        for _ in range(2):
            assert_same(outcome(dml.slice1, bad, *args), expected)
    neg = x.to(torch.float32)._neg_view()
    dml.slice1(x.to(torch.float32), *args)
    for _ in range(2):
        before = served()
        got = dml.slice1(neg, *args)
        assert served() == before                  # a negative view takes the Python route
        assert not got.is_neg() and torch.equal(got, -want.to(torch.float32))


@needs_cache
def test_torch_cpu_large_outputs(output_blocks):
    torch = _torch()
    x = torch.from_numpy(np.random.default_rng(2).standard_normal((600, 1024)).astype(np.float32))
    want = x.flip(1)
    args = ([0, 0], [600, 1024], [1, -1])
    a = dml.slice1(x, *args)
    before = served()
    b, c = dml.slice1(x, *args), dml.slice1(x, *args)
    assert served() == before + 2
    assert all(torch.equal(r, want) for r in (a, b, c))
    assert len({a.data_ptr(), b.data_ptr(), c.data_ptr()}) == 3
    b.zero_()
    assert torch.equal(a, want) and torch.equal(c, want)
    blocks = dml.cpu_output_cache()["hits"]
    del b                                          # its block (zeros) serves the next output
    d = dml.slice1(x, *args)
    assert dml.cpu_output_cache()["hits"] == blocks + 1 and served() == before + 3
    assert torch.equal(d, want)
    d += 1
    assert torch.equal(a, want) and torch.equal(c, want)


@needs_cache
def test_torch_cpu_autograd_is_never_cut():
    torch = _torch()
    x = torch.arange(1 * 2 * 5 * 5, dtype=torch.float64).reshape(1, 2, 5, 5)
    args = ([0, 0, 1, 0], [1, 2, 4, 5], [1, -1, 2, -2])
    want = dml.slice1(x, *args)                    # recorded and then served for the same layout
    assert torch.equal(dml.slice1(x, *args), want)
    xg = x.clone().requires_grad_()
    dml.slice1(xg.detach(), *args)                 # xg's own memory and layout, recorded from a plain tensor
    for _ in range(3):
        y = dml.slice1(xg, *args)
        assert y.grad_fn is not None and y.requires_grad and torch.equal(y.detach(), want)
        xg.grad = None
        y.sum().backward()
        assert torch.equal(xg.grad, dml.slice_grad(torch.ones_like(want), [1, 2, 5, 5], *args))
        u = dml.unfold(xg, 2, 1, 1, 1, 0)
        assert u.grad_fn is not None
    with torch.no_grad():                          # nothing to record: served
        before = served()
        y = dml.slice1(xg, *args)
        assert y.grad_fn is None and not y.requires_grad and torch.equal(y, want)
        assert served() == before + 1
    y = dml.slice1(xg, *args)                      # after a no-grad call of the same layout
    assert y.grad_fn is not None
    neg = x._neg_view() if hasattr(x, "_neg_view") else -x
    for _ in range(2):
        assert torch.equal(dml.slice1(neg, *args), -want)
    assert torch.equal(dml.slice1(x, *args), want)


# -- CUDA: PyTorch tensors and CuPy arrays --------------------------------------------------------------

def torch_cuda_ok() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and cuda_available()


def cupy_ok() -> bool:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return False
    return cuda_available()


needs_torch_cuda = pytest.mark.skipif("not (_cache_available() and torch_cuda_ok())",
                                      reason="CUDA (PyTorch and opendml's backend) is not available")
needs_cupy = pytest.mark.skipif("not (_cache_available() and cupy_ok())", reason="CUDA (CuPy) is not available")

#: (operator, input shape, arguments) run on CUDA arrays of float32 arange.
CUDA_CASES = [
    ("slice", (2, 3, 9, 10), ([0, 1, 1, 0], [2, 2, 4, 5], [1, 1, 2, 2])),
    ("slice1", (2, 3, 9, 10), ([0, 0, 1, 0], [2, 3, 8, 10], [1, -1, 2, -3])),
    ("slice1", (2, 3, 9, 10), ([0, 0, 1, 0], [2, 3, 8, 10], [1, -1, 2, -3], [2, 2, 3, 3])),
    ("unfold", (2, 3, 9, 10), ([2, 3], 1, [1, 2], 1, 0)),
    ("fold", (2, 12, 20), ([6, 5], 2, 1, 1, 0, 0)),
    ("slice_grad", (2, 3, 4, 5), ([4, 6, 8, 15], [0, 0, 0, 0], [4, 6, 8, 15], [2, 2, 2, 3])),
]
CUDA_IDS = [f"{op}-{i}" for i, (op, _, _) in enumerate(CUDA_CASES)]


def host_arange(shape, dtype=np.float32):
    return np.arange(math.prod(shape), dtype=np.float64).astype(dtype).reshape(shape)


@needs_torch_cuda
@pytest.mark.cuda
@pytest.mark.parametrize("op, shape, args", CUDA_CASES, ids=CUDA_IDS)
def test_torch_cuda_repeated_calls_are_served(op, shape, args):
    import torch
    fn = OPS[op]
    for view in (lambda t: t, lambda t: t.flip(-1), lambda t: t.transpose(-1, -2).contiguous().transpose(-1, -2)):
        x = view(torch.from_numpy(host_arange(shape)).cuda())
        host = fn(np.ascontiguousarray(view(torch.from_numpy(host_arange(shape))).numpy()), *args)
        want = cache_off(fn, x, *args)
        assert isinstance(want, torch.Tensor) and want.is_cuda
        first = fn(x, *args)                       # Python route, recorded
        before = served()
        for _ in range(3):
            got = fn(x, *args)
            assert got.is_cuda and got.device == x.device and got.dtype == x.dtype and got.is_contiguous()
            assert torch.equal(got, want) and got.data_ptr() != first.data_ptr()
        assert served() == before + 3
        torch.cuda.synchronize()
        assert got.cpu().numpy().tobytes() == host.tobytes()


@needs_torch_cuda
@pytest.mark.cuda
def test_torch_cuda_tensor_that_needs_autograd_is_not_served():
    import torch
    x = torch.from_numpy(host_arange((1, 2, 6, 7))).cuda()
    args = ([0, 0, 1, 0], [1, 2, 5, 7], [1, -1, 2, -3])
    want = dml.slice1(x, *args)
    assert torch.equal(dml.slice1(x, *args), want)  # served
    xg = x.clone().requires_grad_()
    dml.slice1(xg.detach(), *args)                 # the same layout recorded from a plain tensor
    for _ in range(3):
        y = dml.slice1(xg, *args)
        assert y.grad_fn is not None and torch.equal(y.detach(), want)
        xg.grad = None
        y.sum().backward()
        assert torch.equal(xg.grad, dml.slice_grad(torch.ones_like(want), [1, 2, 6, 7], *args))
    with torch.no_grad():
        before = served()
        y = dml.slice1(xg, *args)
        assert y.grad_fn is None and torch.equal(y, want) and served() == before + 1
    assert dml.unfold(xg, 2).grad_fn is not None


@needs_torch_cuda
@pytest.mark.cuda
def test_torch_cuda_negative_view():
    import torch
    x = torch.from_numpy(host_arange((2, 3, 6, 7))).cuda()
    if not hasattr(x, "_neg_view"):
        pytest.skip("this PyTorch has no Tensor._neg_view")
    args = ([0, 1, 0, 1], [2, 2, 6, 6], [1, -1, 2, -2])
    want = dml.slice1(x, *args)
    dml.slice1(x, *args)                           # recorded and served
    neg = x._neg_view()
    assert neg.is_neg()
    for _ in range(3):
        before = served()
        got = dml.slice1(neg, *args)
        assert served() == before                  # a negative view takes the Python route
        assert torch.equal(got, -want) and not got.is_neg()
        assert torch.equal(dml.slice1(x, *args), want)


@needs_torch_cuda
@pytest.mark.cuda
def test_torch_cuda_side_stream_behind_a_long_kernel():
    """A served call runs on the caller's current stream: queued behind a long
    kernel there, it sees the write before it once that stream is synchronised
    (nothing synchronises the device)."""
    import torch
    shape = (1, 1, 64, 64)
    args = ([0, 0, 4, 4], [1, 1, 56, 56], [1, 1, -1, 2])
    x = torch.zeros(shape, device="cuda")
    source = torch.from_numpy(host_arange(shape)).cuda()
    want = dml.slice1(source, *args).cpu()
    dml.slice1(x, *args)                           # recorded
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    before = served()
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)
        x.copy_(source)
        s = dml.slice1(x, *args)
        done = torch.cuda.Event()
        done.record(side)
    assert served() == before + 1
    assert not done.query()                        # still sleeping: the call waited for nothing
    side.synchronize()
    assert torch.equal(s.cpu(), want)


@needs_torch_cuda
@pytest.mark.cuda
def test_torch_cuda_tensor_on_a_device_that_is_not_current():
    import torch
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA GPUs")
    args = ([0, 1, 1, 0], [2, 2, 4, 4], [1, -1, -2, 3])
    x = torch.from_numpy(host_arange((2, 3, 6, 7))).to("cuda:1")
    want = torch.from_numpy(ref.slice1(host_arange((2, 3, 6, 7)), *args, [2, 2, 2, 2]))
    with torch.cuda.device(1):
        dml.slice1(x, *args)                       # recorded with cuda:1 current
        before = served()
        assert torch.equal(dml.slice1(x, *args).cpu(), want)
        assert served() == before + 1
    with torch.cuda.device(0):
        for _ in range(2):
            before = served()
            got = dml.slice1(x, *args)
            assert served() == before              # not served: the launch needs cuda:1 current
            assert got.device == torch.device("cuda:1")
            torch.cuda.synchronize(1)
            assert torch.equal(got.cpu(), want)


@needs_cupy
@pytest.mark.cuda
@pytest.mark.parametrize("op, shape, args", CUDA_CASES, ids=CUDA_IDS)
def test_cupy_repeated_calls_are_served(op, shape, args):
    import cupy
    fn = OPS[op]
    for view in (lambda a: a, lambda a: a[..., ::-1], lambda a: a.swapaxes(-1, -2).copy().swapaxes(-1, -2)):
        x = view(cupy.asarray(host_arange(shape)))
        host = fn(np.ascontiguousarray(view(host_arange(shape))), *args)
        want = cache_off(fn, x, *args)
        assert isinstance(want, cupy.ndarray)
        first = fn(x, *args)
        before = served()
        for _ in range(3):
            got = fn(x, *args)
            assert isinstance(got, cupy.ndarray) and got.dtype == x.dtype and got.flags.c_contiguous
            assert got.device.id == x.device.id and got.data.ptr != first.data.ptr
            assert bool((got == want).all())
        assert served() == before + 3
        assert got.get().tobytes() == host.tobytes()


SPIN = r'''extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
}'''


@needs_cupy
@pytest.mark.cuda
def test_cupy_side_stream_behind_a_long_kernel():
    import cupy
    shape = (1, 1, 64, 64)
    args = ([0, 0, 4, 4], [1, 1, 56, 56], [1, 1, -1, 2])
    x = cupy.zeros(shape, cupy.float32)
    source = cupy.asarray(host_arange(shape))
    want = dml.slice1(host_arange(shape), *args)
    dml.slice1(x, *args)                           # recorded
    spin = cupy.RawKernel(SPIN, "spin")
    side = cupy.cuda.Stream(non_blocking=True)
    with side:                                     # compile both kernels first: no host work behind the spin
        spin((1,), (1,), (np.int64(1000),))
        x[...] = source
    cupy.cuda.Device().synchronize()
    before = served()
    with side:
        spin((1,), (1,), (np.int64(1_000_000_000),))   # about half a second
        x[...] = source
        s = dml.slice1(x, *args)
        done = side.record()
    assert served() == before + 1
    assert not done.done
    side.synchronize()
    assert s.get().tobytes() == want.tobytes()


def test_a_keyboard_interrupt_in_a_hook_is_raised_not_swallowed():
    # The call cache asks PyTorch's hooks whether a tensor may be served; an
    # exception there only sends the call down the Python route, except one
    # that is not an Exception (Ctrl-C), which must reach the caller.
    pytest.importorskip("torch")
    if not native_available():
        pytest.skip("needs the compiled extension")
    code = textwrap.dedent("""
        import torch, opendml as dml
        from opendml.arrays.torch import adapter as ta
        from opendml.runtime import calls
        def interrupted():
            raise KeyboardInterrupt
        x = torch.arange(16.).reshape(1, 1, 4, 4)
        args = ([0, 0, 0, 0], [1, 1, 4, 4], [1, 1, -1, 1])
        dml.slice1(x, *args)
        calls.register_torch(torch.Tensor, torch.is_grad_enabled, interrupted, ta._is_functorch_wrapped,
                             ta._raw_stream or ta._no_stream, ta._current_device, torch.from_numpy)
        try:
            dml.slice1(x, *args)
        except KeyboardInterrupt:
            print("raised")
    """)
    # torch_node="off": the cache reads tensors through these Python hooks (the node
    # library's C++ accessors, once loaded, read the same facts without them)
    env = dict(os.environ, OPENDML_TORCH_NODE="off")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.stdout.strip() == "raised", out.stderr[-2000:]


@needs_torch_cuda
@pytest.mark.cuda
def test_more_distinct_cuda_calls_than_the_table_holds_stay_right():
    # 5,000 windows, each called twice: the table empties when full (4,096
    # entries) and the backend evicts launches and parameter blocks (dropped
    # entries' launches go at once: their parameters went by value); every
    # served and unserved result must still be right.
    import torch
    n = 5000
    x = torch.arange(n + 8, dtype=torch.float32, device="cuda")
    before = served()
    bad = 0
    for i in range(n):
        for _ in range(2):
            y = dml.slice1(x, [i], [8], [-1])
        bad += int(y[0].item() != i + 7 or y[-1].item() != i)
    assert bad == 0
    assert served() - before >= n // 2
    torch.cuda.synchronize()


# -- the data-movement family's entries (call_cache_move / call_cache_put_move) ------------------------

def _native():
    from opendml.runtime.cpu.backend import _load_native
    return _load_native()


def _move_params(**fields) -> bytes:
    """odml_cpu_move_params of a plain float32 4x4 copy, with ``fields`` changed
    (list values set the first entries of the per-axis arrays)."""
    from opendml.runtime.cpu.backend import MoveParams
    p = MoveParams(kind=0, src_type=1, dst_type=1, rank=2)
    p.sizes[:2], p.src_strides[:2], p.dst_strides[:2] = (4, 4), (4, 1), (4, 1)
    for name, value in fields.items():
        if isinstance(value, list):
            getattr(p, name)[:len(value)] = value
        else:
            setattr(p, name, value)
    return bytes(p)


X44 = np.arange(16, dtype=np.float32).reshape(4, 4)
OUT44 = (((4, 4), np.dtype(np.float32), False),)


def _put_identity(passes, outs=OUT44, origins=(0,), x=X44, args=(None, None), multi=False, gen=None):
    from opendml.runtime import calls
    native = _native()
    gen = native.call_cache_generation() if gen is None else gen
    return native.call_cache_put_move(calls.OPS["identity"], x, args, outs, origins, passes, multi, gen)


@needs_cache
def test_family_record_within_its_buffers_is_served():
    dml.plan_cache_info()
    assert _put_identity(((0, 0, 0, _move_params(), 1),)) is True
    before = served()
    out = dml.identity(X44)
    assert served() == before + 1 and out.tobytes() == X44.tobytes() and out is not X44


#: A pass that would reach outside a buffer, or names one that is not there: refused, nothing stored.
OUTSIDE = {
    "source offset": dict(src_offset=1),
    "source offset below": dict(src_offset=-1),
    "destination offset": dict(dst_offset=1),
    "destination stride": dict(dst_strides=[5, 1]),
    "negative destination stride": dict(dst_strides=[-4, 1], dst_offset=12),
    "source stride": dict(src_strides=[5, 1]),
    "negative source stride": dict(src_strides=[-4, 1]),
    "destination element size": dict(dst_type=9),
    "source element size": dict(src_type=11),
    "map size": dict(map_mode=[0, 1], map_size=[0, 5]),
    "map mode": dict(map_mode=[0, 7], map_size=[0, 4]),
    "huge sizes": dict(sizes=[1 << 62, 4]),
    "huge strides": dict(src_strides=[1 << 61, 1]),
    "rank 0": dict(rank=0),
    "rank 17": dict(rank=17),
    "kind": dict(kind=1),
    "type 0": dict(dst_type=0),
    "type 12": dict(src_type=12),
}


@needs_cache
@pytest.mark.parametrize("fields", list(OUTSIDE.values()), ids=list(OUTSIDE))
def test_family_records_reaching_outside_are_refused(fields):
    dml.plan_cache_info()
    assert _put_identity(((0, 0, 0, _move_params(**fields), 1),)) is False
    assert cache()["entries"] == 0
    assert dml.identity(X44).tobytes() == X44.tobytes()


@needs_cache
@pytest.mark.parametrize("passes, origins", [
    (((0, 1, 0, _move_params(), 1),), (0,)),          # no input 1
    (((0, 0, 1, _move_params(), 1),), (0,)),          # no output 1
    (((1, 0, 0, _move_params(), 1),), (0,)),          # a fill whose parameters say copy
    (((0, 0, 0, _move_params(), 0),), (0,)),          # threads
    (((0, 0, 0, _move_params(), 1000),), (0,)),
    (((0, 0, 0, _move_params(), 1),), (4,)),          # not the input's origin
    (((0, -1, 0, _move_params(), 1),), (0,)),
])
def test_family_records_naming_the_wrong_buffers_are_refused(passes, origins):
    dml.plan_cache_info()
    assert _put_identity(passes, origins=origins) is False
    assert cache()["entries"] == 0


@needs_cache
@pytest.mark.parametrize("kw", [
    dict(passes=((0, 0, 0, b"short", 1),)),
    dict(passes=((0, 0, 0, _move_params()),)),
    dict(passes=((2, 0, 0, _move_params(), 1, True),)),       # an index pass needs index.h's idx_params
    dict(passes="not a tuple"),
    dict(passes=([0, 0, 0, _move_params(), 1],)),
    dict(outs=([(4, 4), np.dtype(np.float32), False],)),
    dict(outs=(((4, 4.5), np.dtype(np.float32), False),)),
    dict(passes=((0, 0, 0, _move_params(), 1),) * 65),
    dict(outs=()),
    dict(outs=(((1,) * 9, np.dtype(np.float32), False),)),    # (a scalar output is one: the index functions')
    dict(outs=(((4, 4), "float32", False),)),
    dict(outs=(((4, 4), np.dtype(np.complex128), False),)),
    dict(outs=(((4, -4), np.dtype(np.float32), False),)),
    dict(outs=(((1 << 62, 4), np.dtype(np.float32), False),)),
    dict(outs=(((4, 4), np.dtype(np.float32)),)),
    dict(outs=OUT44 * 17),
    dict(origins=(0, 0)),
    dict(origins=("a",)),
])
def test_malformed_family_records_raise(kw):
    dml.plan_cache_info()
    kw.setdefault("passes", ((0, 0, 0, _move_params(), 1),))
    with pytest.raises((ValueError, TypeError, OverflowError)) as info:
        _put_identity(**kw)
    assert not isinstance(info.value, SystemError)
    assert cache()["entries"] == 0


@needs_cache
def test_family_records_made_before_a_clear_or_without_a_key_are_refused():
    gen = _native().call_cache_generation()
    dml.configure()
    assert _put_identity(((0, 0, 0, _move_params(), 1),), gen=gen) is False
    for x, args in ((X44.astype(">f4"), (None, None)), (X44.view(Sub), (None, None)), (X44, (object(), None)),
                    (X44, ([1] * 9, None)), (X44, ("é", None)), ([X44] * 17, (None, None)), ([X44, "a"], (None,))):
        assert _put_identity(((0, 0, 0, _move_params(), 1),), x=x, args=args) is False
    assert cache()["entries"] == 0


@needs_cache
@pytest.mark.parametrize("args", [
    (), (6,), ("identity", X44), (6, X44, object()), (6, [X44, "a"], 0), (6, [X44] * 17, 0), (6, [], 0),
    (6, X44, 2 ** 70), (6, X44, "x" * 100), (6, X44, "é"), (6, X44, [1.5]), (6, X44, np.dtype([("a", "f4")])),
    (6, X44.view(Sub)), (6, np.zeros((1,) * 9, np.float32)), (2 ** 80, X44), (6, X44, np.dtype(np.float32, metadata={})),
])
def test_family_lookups_of_anything_take_the_python_route(args):
    """call_cache_move never raises and never serves what it has no entry for."""
    assert _native().call_cache_move(*args) is None


@needs_cache
@settings(max_examples=n_examples(150), deadline=None)
@given(data=st.data())
def test_family_records_of_random_passes_stay_inside_their_buffers(data):
    """Whatever a record says, what put accepts reads and writes inside the
    buffers a later call gives it (the sanitizer pass checks the accesses)."""
    ints = st.integers(-6, 6)
    fields = {"src_offset": data.draw(ints), "dst_offset": data.draw(st.integers(0, 6)),
              "sizes": data.draw(st.lists(st.integers(0, 5), min_size=3, max_size=3)),
              "src_strides": data.draw(st.lists(ints, min_size=3, max_size=3)),
              "dst_strides": data.draw(st.lists(st.integers(0, 6), min_size=3, max_size=3)),
              "map_mode": data.draw(st.lists(st.integers(0, 4), min_size=3, max_size=3)),
              "map_shift": data.draw(st.lists(ints, min_size=3, max_size=3)),
              "map_size": data.draw(st.lists(st.integers(1, 5), min_size=3, max_size=3)),
              "rank": 3, "kind": data.draw(st.integers(0, 1)),
              "src_type": data.draw(st.sampled_from([1, 6, 3])), "dst_type": data.draw(st.sampled_from([1, 6, 2]))}
    fill = fields["kind"]
    x = data.draw(st.sampled_from([X44, X44[::-1], X44.T, X44[::2, ::-2], np.broadcast_to(X44[:1], (4, 4))]))
    origin = sum((n - 1) * -s for n, s in zip(x.shape, x.strides) if s < 0)
    dml.plan_cache_info()
    stored = _put_identity(((fill, 0, 0, _move_params(**fields), 1),), origins=(origin,), x=x)
    if stored:
        out = dml.identity(x)
        assert out.shape == (4, 4)
    dml.configure()                                 # drop the (meaningless) entry


@needs_cache
@pytest.mark.parametrize("dt", ["float32", "int32", "uint8", "float16", "float64"])
def test_family_vector_paths_at_buffer_edges(dt):
    """The compiled family's vector paths (stride-2 gathers of 4-byte rows,
    packed copies from 1 KiB, packed conversions) on rows of every length
    whose last element read is the last byte of their buffer (the sanitizer
    pass checks nothing beyond it is read), served and not: the bytes NumPy
    gives."""
    dt = np.dtype(dt)
    rng = np.random.default_rng(11)
    for n in list(range(1, 41)) + [255, 256, 257, 300]:
        base = rng.integers(0, 256, (3, 2 * n - 1) if n > 1 else (3, 1), dtype=np.uint8)
        base = np.frombuffer(base.tobytes() * dt.itemsize, np.uint8)[: base.size * dt.itemsize].view(dt).reshape(base.shape)
        base = base.copy()                          # its own buffer, ending at its last element
        x = base[:, ::2]
        packed = base.reshape(-1)
        for fn, want in ((lambda: dml.identity(x), lambda: x.copy()),
                         (lambda: dml.join([x, x], 1), lambda: np.concatenate([x, x], 1)),
                         (lambda: dml.identity(packed), lambda: packed.copy()),
                         (lambda: dml.cast(packed, np.float32), None),
                         (lambda: dml.cast(x, np.int32), None)):
            with dml.configure(call_cache=False):
                plain = outcome(fn)
            first, second = outcome(fn), outcome(fn)
            assert_same(first, plain)
            assert_same(second, plain)
            if want is not None:
                assert first.tobytes() == want().tobytes()


def test_operator_codes_are_given_out_on_first_use():
    from opendml.runtime import calls
    before = dict(calls.OPS)
    code = calls.OPS["a_function_no_one_named_before"]
    assert code not in before.values() and calls.OPS["a_function_no_one_named_before"] == code
    assert all(calls.OPS[k] == v for k, v in before.items())
    with pytest.raises(KeyError):
        calls.OPS[3]


@pytest.mark.parametrize("torch_node", ["off", "wait"])
def test_call_cache_packed_survives_a_collection_that_empties_the_packed_list(torch_node):
    # call_cache_packed (the direct kernel Inductor's wrapper calls) splits the
    # packed list into `split` new lists. A garbage collection may run in each
    # allocation, and a finalizer of an unreachable cycle may empty the packed
    # list then: its items and item array are freed. The split must read the
    # list as it is after the allocations (here: empty, so the call goes to the
    # operator's fallback with the list as it now is), never a pointer read
    # before them (issue 34: a heap use-after-free, a crash without ASan).
    # 100 items: the item array is malloc's (pymalloc keeps at most 512 bytes),
    # so ASan sees its release; the ints are made at run time and freed with it.
    # (Python 3.12 and later collect at the next bytecode boundary, not inside
    # an allocation: there the call always sees the whole list.)
    pytest.importorskip("torch")
    if not native_available():
        pytest.skip("needs the compiled extension")
    code = textwrap.dedent("""
        import gc, torch
        from opendml.arrays.torch import adapter as torch_adapter  # (registers PyTorch's hooks with the call cache)
        from opendml.runtime import calls
        if calls.packed is None:
            print("skip")
            raise SystemExit
        x = torch.zeros(1, 1, 4, 4)
        op = calls.OPS["unfold"]
        seen = []
        def fallback(t, p):
            seen.append(len(p))
            return "fallback"
        inside = 0
        for round in range(12):        # (each round's collection empties the list: one round for each count below)
            packed = [int(str(10 ** 12 + i)) for i in range(100)]
            class Bomb:
                def __del__(self, packed=packed):
                    packed.clear()
            gc.disable()
            a, b = Bomb(), Bomb()
            a.other, b.other = b, a
            del a, b, Bomb
            keep = [[] for _ in range(round % 12)]  # (the young generation's count above the threshold)
            gc.set_threshold(1)
            gc.enable()
            n = len(packed)
            got = calls.packed(op, 5, fallback, (), x, packed)
            gc.set_threshold(700)
            # (lists of 20 ints have no key: the call always ends at the fallback, given the list as it is)
            assert got == "fallback" and seen[-1] == len(packed), (got, seen[-1], len(packed))
            inside += n == 100 and packed == []
            gc.collect()
        import sys
        assert inside > 0 or sys.version_info >= (3, 12), "no collection emptied the list during the call"
        print("ok")
    """)
    # (malloc_debug fills freed memory: a read of the freed item array crashes without ASan too)
    env = dict(os.environ, OPENDML_TORCH_NODE=torch_node, PYTHONMALLOC="malloc_debug")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    if out.stdout.strip() == "skip":
        pytest.skip("no compiled call_cache_packed here")
    assert out.returncode == 0 and out.stdout.strip() == "ok", (out.returncode, out.stdout[-2000:], out.stderr[-4000:])


@needs_cache
def test_a_family_record_holds_its_inputs_while_python_code_runs():
    # call_cache_put_move reads the record's origins and outputs after keying
    # the inputs, and reading them may run Python code (an origin's __index__,
    # a flag's __bool__) that empties the input list and frees its arrays: the
    # record must hold the arrays it keyed. PYTHONMALLOC=malloc_debug fills
    # freed memory, so a freed array read makes the old code crash.
    code = textwrap.dedent("""
        import numpy as np
        import opendml as dml
        from opendml.runtime import calls
        from opendml.runtime.cpu.backend import _load_native
        from opendml.runtime.cpu.backend import MoveParams
        native = _load_native()
        dml.plan_cache_info()
        p = MoveParams(kind=0, src_type=1, dst_type=1, rank=2)
        p.sizes[:2], p.src_strides[:2], p.dst_strides[:2] = (4, 4), (4, 1), (4, 1)
        x = [np.arange(16, dtype=np.float32).reshape(4, 4) + k for k in range(2)]
        class Origin:
            def __index__(self):
                x.clear()
                return 0
        class Flag:
            def __bool__(self):
                x.clear()
                return False
        got = native.call_cache_put_move(calls.OPS["join"], x, (0,), (((8, 4), np.dtype(np.float32), False),),
                                         (Origin(), 0), ((0, 0, 0, bytes(p), 1), (0, 1, 0, bytes(p), 1)), False,
                                         native.call_cache_generation())
        assert x == [] and got in (True, False), got
        x[:] = [np.arange(16, dtype=np.float32).reshape(4, 4) + k for k in range(2)]
        got = native.call_cache_put_move(calls.OPS["join"], x, (0,), (((8, 4), np.dtype(np.float32), Flag()),),
                                         (0, 0), ((0, 0, 0, bytes(p), 1),), False, native.call_cache_generation())
        assert x == [] and got in (True, False), got
        print("ok")
    """)
    env = dict(os.environ, PYTHONMALLOC="malloc_debug")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", (out.returncode, out.stdout[-2000:], out.stderr[-4000:])


@pytest.mark.skipif(not native_available(), reason="the compiled CPU kernels are not installed")
def test_index_records_whose_reach_would_wrap_are_refused():
    """A hand-built index pass whose reach check could wrap around 2^63 (a
    huge bound or stride) is refused at put_move; a sane one is stored."""
    from opendml.runtime import calls
    from opendml.runtime.cpu.backend import IndexParams

    def put(bound, stride=4, size=1):
        x, ind = np.arange(16, dtype=np.float32), np.array([1], np.int64)
        p = IndexParams(kind=0, element_size=4, data_type=1, rank=1, outer=1, naxes=1)
        p.sizes[0], p.dst_strides[0] = size, 1
        ax = p.axes[0]
        ax.slot, ax.type, ax.stride, ax.bound = 1, 11, stride, bound
        calls.clear()
        return calls.put_move("gather", (x, ind), (False, 0, None), (((1,), np.dtype(np.float32), False),), (0, 0),
                              ((2, 0, 0, bytes(p), 1, False),), False, calls.generation())

    assert put(4)
    assert not put((1 << 62) + 1)
    assert not put(4, stride=1 << 60)
    assert not put(4, size=-1)
    calls.clear()


# -- the first five on NumPy's move route: move entries (issue 31) ---------------------------------------

_FIRST_FIVE = [
    ("slice", lambda x: ([0, 0, 1, 1], [2, 3, 3, 4], [1, 1, 2, 1])),
    ("slice1", lambda x: ([0, 0, 0, 0], list(x.shape), [1, 1, -1, 1], None)),
    ("unfold", lambda x: (3, 1, 1, 1, 1)),
    ("fold", lambda x: ([7, 5], 1, 1, 1, 0, 0)),          # (on x as (2, 3, 35) columns)
    ("slice_grad", lambda x: ([2, 3, 14, 5], [0, 0, 0, 0], [2, 3, 14, 5], [1, 1, 2, 1])),
]


@needs_cache
@pytest.mark.parametrize("name,make", _FIRST_FIVE, ids=[n for n, _ in _FIRST_FIVE])
def test_first_five_python_route_records_one_move_entry(name, make, monkeypatch):
    """The first five's Python route on NumPy arrays (the C new-shape route
    refused) is the move program's, recorded as a move entry of one tuned
    kernel: served by their own function's lookup and by the family's
    (``calls.move``) alike, with the Python route's bytes."""
    from opendml.arrays import front
    from opendml.runtime import calls
    fn = getattr(dml, name)
    x = np.arange(2 * 3 * 7 * 5, dtype=np.float32).reshape(2, 3, 7, 5)[:, :, ::-1]
    if name == "fold":
        x = np.arange(2 * 3 * 35, dtype=np.float32).reshape(2, 3, 35)[:, ::-1]
    args = make(x)
    calls.clear()
    with monkeypatch.context() as m:
        m.setattr(front, "_new", lambda *a: None)
        want = fn(x, *args)
    entry = calls.entry(name, x, *args)
    assert entry is not None and entry["kind"] == 4 and entry["kernel"] < 4 and entry["cpu"] == 1
    hits = calls.info()["hits"]
    got = fn(x, *args)
    served = calls.move(calls.OPS[name], x, *args)
    assert calls.info()["hits"] == hits + 2
    for out in (got, served):
        assert out.dtype == want.dtype and out.shape == want.shape and out.tobytes() == want.tobytes()


@needs_cache
def test_put_move_refuses_a_malformed_tuned_pass():
    from opendml.runtime import calls
    x = np.ones((4, 4), np.float32)
    since = calls.generation()
    outs = (((2, 2), np.dtype(np.float32), False),)
    for passes in [((calls.TUNED, 0, 0, b"\0" * 3, 1),),                       # not the kernel's block size
                   ((calls.TUNED + 9, 0, 0, b"\0" * 8, 1),),                   # no such kernel
                   ((calls.TUNED, 0, 0, b"\0" * 8, 1), (1, 0, 0, b"", 1))]:    # not the program's one pass
        with pytest.raises(ValueError, match="call_cache_put_move"):
            calls.put_move("slice", x, ([0, 0], [2, 2], [1, 1]), outs, (0,), passes, False, since)
    assert calls.entry("slice", x, [0, 0], [2, 2], [1, 1]) is None


@needs_cache
@pytest.mark.parametrize("out", [((64, 64), np.int8), ((32, 64), np.float32), ((64, 64), np.float64)])
def test_put_move_refuses_a_tuned_block_that_writes_other_bytes_than_its_output(out):
    """Can fail: a tuned pass was stored with only its block's size checked, so a record whose output is
    smaller than what its kernel writes (a narrower dtype, fewer elements) made the next call write past
    the output it allocated (a review's reproducer crashed the process)."""
    from opendml.runtime import calls
    x = np.arange(4096, dtype=np.float32).reshape(64, 64)
    args = ([0, 0], [64, 64], [1, 1])
    dml.slice(x, *args)
    e = calls.entry("slice", x, *args)
    assert e is not None and e["kernel"] < calls.TUNED
    y = x + 1
    calls.clear()
    outs = ((out[0], np.dtype(out[1]), True),)
    with pytest.raises(ValueError, match="tuned pass's block must write its output's bytes"):
        calls.put_move("slice", y, args, outs, (0,), ((calls.TUNED + e["kernel"], 0, 0, e["params"], 1),), False,
                       calls.generation())
    assert calls.entry("slice", y, *args) is None
    assert np.array_equal(dml.slice(y, *args), y)


@needs_cache
def test_put_move_refuses_an_input_changed_since_it_was_planned():
    from opendml.runtime import calls
    x = np.ones((4, 4), np.float32)
    outs = (((4, 4), np.dtype(np.float32), False),)
    assert calls.put_move("identity", x, (), outs, (0,), (), False, calls.generation(), (((2, 8), (32, 4)),)) is False
    assert calls.put_move("identity", x, (), outs, (0,), (), False, calls.generation(), (((4, 4), (16, 4)),)) is True


@needs_cache
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_a_large_output_is_recorded_prefaulted_where_threads_write_it(framework, threads, monkeypatch):
    """NumPy's move route and PyTorch CPU's first-five kernel route share one
    rule (``numpy_adapter.prefault``): an output of at least PREFAULT_BYTES
    that threads write is recorded for the C cache to fault in first, a small
    one or a one-thread run not; served repeats give the route's bytes."""
    from opendml.arrays import front, numpy_adapter
    from opendml.runtime import calls
    x = np.arange(2 * 1024 * 1024, dtype=np.float32).reshape(2, 1024, 1024)
    if framework == "torch":
        torch = pytest.importorskip("torch")
        x = torch.from_numpy(x)
    args = ([0, 0, 0], [2, 1024, 1024], [1, -1, 1], None)
    with dml.configure(threads=threads):
        monkeypatch.setattr(front, "_new", lambda *a: None)       # the Python route, which records
        monkeypatch.setattr(dml.arrays._dispatch.front, "new_shape", lambda *a: None)
        want = dml.slice1(x, *args)
        entry = calls.entry("slice1", x, *args)
        assert (want.nbytes if framework == "numpy" else want.numel() * 4) >= numpy_adapter.PREFAULT_BYTES
        assert entry is not None and entry["prefault"] == (threads > 1)
        got = dml.slice1(x, *args)
        assert bytes(np.asarray(got).data) == bytes(np.asarray(want).data)
        small = x[:, :8, :8]
        dml.slice1(small, [0, 0, 0], [2, 8, 8], [1, -1, 1], None)
        assert calls.entry("slice1", small, [0, 0, 0], [2, 8, 8], [1, -1, 1], None)["prefault"] == 0
