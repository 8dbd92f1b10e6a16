"""The data-movement family's new-shape route (issue 31): identity, cast,
tile, pad, space_to_depth, depth_to_space, join and split on a never-seen NumPy shape lowered in C
(runtime/native/newshape_move.c, run and recorded by ``calls.move_new``).

Each C lowering is checked against the Python route it mirrors: the passes
(parameter bytes, threads, source and destination) equal those the Python
route builds (``planner.kernel_steps`` of the operator's ``lower``) on
random shapes, strides, dtypes and arguments; the outputs and errors of
calls through both routes are equal (invalid calls are declined by C and
raised by Python), also after ``configure`` changes and under threads; and
the C route's record serves a repeated call."""
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import opendml as dml
from opendml.arrays import engine, front, planner
from opendml.arrays.planner import logical_desc
from opendml.ops import DiagonalMatrix1OperatorDesc
from opendml.runtime import calls as ccache
from opendml.runtime import get_backend
from opendml.runtime.cpu import backend as cpu_backend
from tests.conftest import native_available
from .conftest import n_examples

pytestmark = pytest.mark.skipif(not native_available(), reason="the compiled CPU kernels are not built")

DTYPES = ["f4", "f2", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"]
NAMES = ["float32", "float16", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def spellings(name: str) -> list:
    """Every way a user spells the dtype ``name`` (one of NAMES) as cast's
    argument: NumPy's dtype and scalar type, the string, the DataType name in
    both cases and with DirectML's prefix, the DataType, PyTorch's dtype
    where PyTorch is installed; and spellings only the Python route reads
    (a NumPy code, spaces, mixed case, a PyTorch name as a string)."""
    upper = name.upper()
    out = [np.dtype(name), np.dtype(name).type, name, upper, "DML_TENSOR_DATA_TYPE_" + upper, dml.DataType[upper],
           np.dtype(name).str, f" {name} ", name.capitalize()]
    try:
        import torch
        out += [getattr(torch, name), f"torch.{name}"]
    except ImportError:
        pass
    return out


def read_in_c(dtype) -> bool:
    """Whether the C lowering reads this spelling of cast's dtype (the others
    take the Python route)."""
    if isinstance(dtype, str):
        return dtype in NAMES or dtype.removeprefix("DML_TENSOR_DATA_TYPE_").lower() in NAMES and dtype.isupper()
    return not isinstance(dtype, (int, float)) or isinstance(dtype, dml.DataType)
MODES = ["constant", "edge", "reflect", "reflection", "symmetric", "wrap", "WRAP", "Edge"]


def outcome(fn, *args, **kwargs):
    try:
        out = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - compared below
        return ("error", type(e), str(e))
    outs = out if isinstance(out, list) else [out]
    return ("ok", isinstance(out, list), [(o.dtype.str, o.shape, o.flags.c_contiguous, o.tobytes()) for o in outs])


def function(name):
    """The array function ``name`` taking every argument positionally."""
    if name == "diagonal_matrix":
        return lambda x, value, begin, end: dml.diagonal_matrix(x, value=value, begin=begin, end=end)
    return getattr(dml, name)


def python_route(fn, *args, **kwargs):
    """``fn``'s outcome through the Python route: neither cache, no C lowering."""
    real = front._move_new
    front._move_new = lambda *a: None
    try:
        with dml.configure(call_cache=False):
            return outcome(fn, *args, **kwargs)
    finally:
        front._move_new = real


def array(rng, shape, dt, view):
    """A random array of ``shape`` and dtype ``dt``, as a packed array or a
    strided (some axes reversed) view."""
    dt = np.dtype(dt)
    x = (rng.standard_normal(shape) * 50).astype(dt) if dt.kind == "f" else rng.integers(0, 100, shape).astype(dt)
    if not view:
        return x
    steps = [int(rng.choice([-2, 2, -1])) for _ in shape]
    big = np.zeros(tuple(2 * n for n in shape), dt)
    sl = tuple(slice(None, None, s) for s in steps)
    big[sl][tuple(slice(0, n) for n in shape)] = x
    return big[sl][tuple(slice(0, n) for n in shape)]


def python_steps(name, args, x):
    """(output shape, dtype, passes) of the Python route: the description the
    function builds, lowered for x's layout, each pass's compiled kernel
    parameters and threads (``planner.kernel_steps``)."""
    xs = list(x) if name == "join" else [x]
    if name == "diagonal_matrix":                 # (value, begin, end): index_ops.diagonal_matrix's description
        make = lambda t: DiagonalMatrix1OperatorDesc(t, None, t.data_type, *args)  # noqa: E731
    else:
        snap = front._SNAPSHOTS[name]
        args = tuple(front._snapshot(v) if i in snap else v for i, v in enumerate(args))
        make, _ = front._contract.OPERATOR_OF[name].arguments(front.ARGUMENT_API, xs[0], *args)
    backend = get_backend("cpu")
    desc = front.Call(name, make).describe([logical_desc(a.dtype, a.shape) for a in xs])
    prepared = [engine._prepared(a) for a in xs]
    plan = desc.lower(in_layouts=[p[1] for p in prepared])
    outs = [np.empty(t.sizes, t.data_type.numpy_dtype) for t in desc.outputs]
    dsts = [o.view(cpu_backend.WORDS[o.itemsize]).reshape(-1) for o in outs]
    steps = planner.kernel_steps(backend, plan, [p[2] for p in prepared], dsts)
    return (tuple(o.shape for o in outs), outs[0].dtype,
            tuple((int(f), s, d, blob, t) for _, blob, t, f, s, d in steps))


def c_steps(name, args, x):
    nat = cpu_backend._load_native()
    if name == "diagonal_matrix":                 # offered as index_ops does: (x,), (shape, dtype, value, begin, end)
        x, args = (x,), (None, None, *args)
    return nat.move_lowering(front._LOWER[ccache.OPS[name]], x, args, get_backend("cpu").plain_conf)


@st.composite
def calls(draw):
    """(function name, its arguments after x, x's shape, dtype, whether a view)."""
    rank = draw(st.integers(1, 5))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    dt = draw(st.sampled_from(DTYPES))
    name = draw(st.sampled_from(["identity", "cast", "tile", "pad", "space_to_depth", "depth_to_space", "join",
                                 "split", "diagonal_matrix"]))
    if name == "join":
        axis = draw(st.integers(-rank - 1, rank))
        others = [tuple(draw(st.integers(1, 4)) if d == axis % rank or draw(st.integers(0, 20)) == 0 else n
                        for d, n in enumerate(shape)) for _ in range(draw(st.integers(0, 3)))]
        args = (axis, others)
    elif name == "split":
        axis = draw(st.integers(-rank - 1, rank))
        n = shape[axis % rank]
        cuts = sorted(draw(st.sets(st.integers(1, max(1, n - 1)), max_size=n - 1))) if n > 1 else []
        sizes = [b - a for a, b in zip([0] + cuts, cuts + [n])]
        if draw(st.integers(0, 9)) == 0:
            sizes = sizes + [1]                    # not summing to the axis' size
        args = (axis, draw(st.sampled_from([sizes, tuple(sizes)])))
    elif name in ("space_to_depth", "depth_to_space"):
        b = draw(st.integers(1, 3))
        n, c, h, w = (draw(st.integers(1, 3)) for _ in range(4))
        shape = (n, c, h * b, w * b) if name == "space_to_depth" else (n, c * b * b, h, w)
        if draw(st.integers(0, 9)) == 0:          # sizes that break the block rule
            shape = (n, c * b * b + 1, h * b + 1, w)
        args = (draw(st.sampled_from([b, b, b + 1])), draw(st.sampled_from(["DCR", "CRD", "crd", "COLUMN_ROW_DEPTH",
                                                                             "depth_column_row"])))
    elif name == "identity":
        sb = draw(st.sampled_from([(None, None), (2.0, None), (None, -1.5), (0.5, 3.0), (1e300, None)]))
        args = sb
    elif name == "cast":
        args = (draw(st.sampled_from(spellings(draw(st.sampled_from(NAMES))))),)
    elif name == "diagonal_matrix":
        if rank < 2 or draw(st.integers(0, 3)) == 0:
            shape = (*shape, *(draw(st.integers(1, 9)) for _ in range(draw(st.integers(1, 2)))))
        ends = st.one_of(st.integers(-10, 10), st.sampled_from([-2**31, 2**31 - 1, 2**31, True]))
        args = (draw(st.sampled_from([0, 1, -3, 7, 2.5, 300, 1e39, float("nan"), -1.0])), draw(ends), draw(ends))
    elif name == "tile":
        reps = draw(st.lists(st.integers(1, 3), min_size=1, max_size=rank))
        args = (draw(st.sampled_from([tuple(reps), list(reps), reps[-1]])),)
    else:
        per = st.lists(st.integers(0, 3), min_size=rank, max_size=rank)
        start, end = draw(per), draw(per)
        start = draw(st.sampled_from([tuple(start), start, start[0]]))
        value = draw(st.sampled_from([0, 3, -2, 1.5, 300, 1e39, float("nan")]))
        args = (start, tuple(end), draw(st.sampled_from(MODES)), value)
    return name, args, shape, dt, draw(st.booleans())


def inputs(rng, name, args, shape, dt, view):
    """(x, args after x) of a drawn call: for join, x is the list of arrays
    (the drawn shape's, then the other shapes drawn) and args just the axis."""
    x = array(rng, shape, dt, view)
    if name != "join":
        return x, args
    return [x] + [array(rng, s, dt, not view) for s in args[1]], args[:1]


@settings(max_examples=n_examples(150), deadline=None)
@given(calls(), st.integers(0, 2 ** 32 - 1))
def test_passes_equal_the_python_routes(call, seed):
    name, args, shape, dt, view = call
    x, args = inputs(np.random.default_rng(seed), name, args, shape, dt, view)
    got = c_steps(name, args, x)
    try:
        want = python_steps(name, args, x)
    except (dml.ValidationError, dml.UnsupportedError):
        assert got is None, "the C lowering took a call the Python route refuses"
        return
    fill = {"pad": 3, "diagonal_matrix": 0}.get(name)     # (pad_value_bits reads both operators' fill value)
    if fill is not None and np.dtype(dt) == np.float16 and isinstance(args[fill], float) and np.isnan(args[fill]):
        assert got is None                    # (a NaN fill for float16: the Python route builds it)
        return
    if name == "cast" and not read_in_c(args[0]):
        assert got is None, "the C lowering read a dtype spelling it does not know"
        return
    assert got is not None, "the C lowering declined a valid call in its simple forms"
    assert got == want


@settings(max_examples=n_examples(150), deadline=None)
@given(calls(), st.integers(0, 2 ** 32 - 1))
def test_outputs_and_errors_equal_the_python_routes(call, seed):
    name, args, shape, dt, view = call
    x, args = inputs(np.random.default_rng(seed), name, args, shape, dt, view)
    fn = function(name)
    ccache.clear()
    assert outcome(fn, x, *args) == python_route(fn, x, *args)


INVALID = [
    ("identity", np.zeros((2, 3), bool), (None, None)),
    ("identity", np.zeros((2, 3), np.int32), (2.0, None)),          # scale on an integer type
    ("identity", np.zeros((2, 3), np.float32), (1e300, None)),      # outside float32
    ("identity", np.zeros((2, 0), np.float32), (None, None)),       # an empty axis
    ("identity", np.zeros((1,) * 9, np.float32), (None, None)),     # rank 9
    ("cast", np.zeros((2, 3), np.float32), (np.bool_,)),
    ("cast", np.zeros((2, 3), np.float32), (np.dtype(np.complex64),)),
    ("cast", np.zeros((2, 3), np.float32), ("nonsense",)),
    ("cast", np.zeros((2, 3), np.float32), (object(),)),
    ("cast", np.zeros((2, 3), np.float32), ("bool",)),
    ("cast", np.zeros((2, 3), np.float32), ("UINT4",)),
    ("cast", np.zeros((2, 3), np.float32), (dml.DataType.UINT4,)),
    ("cast", np.zeros((2, 3), np.float32), (dml.DataType.UNKNOWN,)),
    ("cast", np.zeros((2, 3), np.float32), ("DML_TENSOR_DATA_TYPE_INT4",)),
    ("cast", np.zeros((2, 3), np.float32), ("int32\x00",)),
    ("cast", np.zeros((2, 3), np.float32), ("\ud800",)),
    ("cast", np.zeros((2, 3), np.float32), (99,)),                   # no DataType's value
    ("cast", np.zeros((2, 3), np.float32), (True,)),                 # DataType.FLOAT32's value, but a bool
    ("tile", np.zeros((2, 3), np.float64), (2,)),                   # FLOAT64: not in TILE's table
    ("tile", np.zeros((2, 3), np.float32), ((1, 2, 3),)),           # longer than the rank
    ("tile", np.zeros((2, 3), np.float32), ((0, 2),)),
    ("tile", np.zeros((2, 3), np.float32), (2 ** 32,)),
    ("tile", np.zeros((2, 3), np.float32), ((True, 2),)),
    ("tile", np.zeros((2, 3), np.float32), ("22",)),
    ("pad", np.zeros((2, 3), np.float32), (-1, 0, "constant", 0)),
    ("pad", np.zeros((2, 3), np.float32), ((1,), 0, "constant", 0)),
    ("pad", np.zeros((2, 3), np.float32), (1, 0, "bogus", 0)),
    ("pad", np.zeros((2, 3), np.float32), (1, 0, 7, 0)),
    ("pad", np.zeros((2, 3), np.uint8), (1, 0, "constant", 300)),
    ("pad", np.zeros((2, 3), np.int8), (1, 0, "constant", 1.5)),
    ("pad", np.zeros((2, 3), np.float16), (1, 0, "constant", 1e6)),
    ("pad", np.zeros((2, 3), np.float32), (1, 0, "constant", 1e39)),
    ("pad", np.zeros((2, 3), np.float32), (1, 0, "constant", True)),
    ("pad", np.zeros((2, 3), np.float32), (1, 0, "constant", "0")),
    ("pad", np.zeros((2, 3), np.float32), (2 ** 32, 0, "constant", 0)),
    ("space_to_depth", np.zeros((1, 2, 4, 4), np.float32), (3, "DCR")),       # H not a multiple
    ("space_to_depth", np.zeros((1, 2, 4, 4), np.float32), (0, "DCR")),
    ("space_to_depth", np.zeros((2, 4, 4), np.float32), (2, "DCR")),          # not 4-D
    ("space_to_depth", np.zeros((1, 2, 4, 4), np.float32), (2, "RCD")),
    ("space_to_depth", np.zeros((1, 2, 4, 4), np.float32), (2.0, "DCR")),
    ("depth_to_space", np.zeros((1, 6, 4, 4), np.float32), (2, "CRD")),       # C not a multiple of 4
    ("depth_to_space", np.zeros((1, 4, 4, 4), bool), (2, "CRD")),
    ("depth_to_space", np.zeros((1, 4, 4, 4), np.float32), (-2, "CRD")),
    ("split", np.zeros((2, 3), np.float32), (1, [1, 1])),                   # not summing to 3
    ("split", np.zeros((2, 3), np.float32), (2, [1, 2])),                   # axis out of range
    ("split", np.zeros((2, 3), np.float32), (1, [])),
    ("split", np.zeros((2, 3), np.float32), (1, [0, 3])),
    ("split", np.zeros((2, 3), np.float32), (1.0, [1, 2])),
    ("split", np.zeros((2, 3), np.float32), (1, 3)),
    ("join", [np.zeros((2, 3), np.float32), np.zeros((3, 3), np.float32)], (1,)),   # sizes differ off the axis
    ("join", [np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float64)], (0,)),   # dtypes differ
    ("join", [np.zeros((2, 3), np.float32), np.zeros((2, 3, 1), np.float32)], (0,)),  # ranks differ
    ("join", [np.zeros((2, 3), np.float32)], (-3,)),
    ("join", [np.zeros((2, 3), np.float32), [[1.0, 2.0, 3.0]]], (0,)),     # a list entry
    ("join", [], (0,)),
    ("join", np.zeros((2, 3), np.float32), (0,)),                        # a lone array
    ("diagonal_matrix", np.zeros((2, 3), bool), (1, 0, 1)),
    ("diagonal_matrix", np.zeros((3,), np.float32), (1, 0, 1)),            # rank 1
    ("diagonal_matrix", np.zeros((1,) * 5, np.float32), (1, 0, 1)),        # rank 5
    ("diagonal_matrix", np.zeros((2, 3), np.uint8), (-1, 0, 1)),           # outside UINT8
    ("diagonal_matrix", np.zeros((2, 3), np.int8), (1.5, 0, 1)),
    ("diagonal_matrix", np.zeros((2, 3), np.float16), (1e6, 0, 1)),
    ("diagonal_matrix", np.zeros((2, 3), np.float32), (1, 2**31, 1)),       # outside INT32
    ("diagonal_matrix", np.zeros((2, 3), np.float32), ("1", 0, 1)),
]


@pytest.mark.parametrize("name,x,args", INVALID)
def test_invalid_calls_are_declined_and_raise_the_python_routes_error(name, x, args):
    assert c_steps(name, args, x) is None
    fn = function(name)
    ccache.clear()
    got = outcome(fn, x, *args)
    assert got[0] == "error" and got == python_route(fn, x, *args)


def test_a_new_shape_takes_the_c_route_and_its_record_serves_a_repeat():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 3, 5, 7)).astype(np.float32)[:, :, ::-1]
    for fn, args, peer in ((dml.identity, (), x.copy()), (dml.cast, (np.float16,), x.astype(np.float16)),
                           (dml.tile, ((2, 1, 3),), np.tile(x, (1, 2, 1, 3))),
                           (dml.pad, ((0, 0, 1, 2), (0, 1, 0, 2), "reflect", 0),
                            np.pad(x, ((0, 0), (0, 1), (1, 0), (2, 2)), "reflect")),
                           (dml.space_to_depth, (1, "CRD"), x.copy()),
                           (dml.depth_to_space, (1, "DCR"), x.copy()),
                           (lambda x, *a: dml.join([x, x[:, :1]], *a), (1,), np.concatenate([x, x[:, :1]], 1)),
                           (lambda x, *a: np.concatenate(dml.split(x, *a), 3), (3, [2, 5]), x.copy())):
        ccache.clear()
        planner.clear()
        before, py_before = ccache.info(), planner.info()
        y = fn(x, *args)
        assert np.array_equal(y, peer)
        # recorded by C, not by the Python route (whose cache saw no call)
        assert planner.info()["misses"] == py_before["misses"] and planner.info()["entries"] == 0
        assert ccache.info()["entries"] == before["entries"] + 1
        z = fn(x, *args)
        assert ccache.info()["hits"] == before["hits"] + 1
        assert z.tobytes() == y.tobytes() and z is not y


@pytest.mark.parametrize("settings_", [{"threads": 1}, {"threads": 4, "thread_grain_bytes": 64},
                                       {"call_cache": False}, {"cpu_kernels": "numpy"}])
def test_after_configure(settings_):
    rng = np.random.default_rng(11)
    with dml.configure(**settings_):
        for i in range(40):
            shape = (1, int(rng.integers(1, 9)), int(rng.integers(4, 40)), int(rng.integers(4, 40)))
            x = array(rng, shape, DTYPES[i % len(DTYPES)], bool(i % 2))
            name, args = [("identity", (None, None)), ("cast", (np.dtype(DTYPES[(i + 3) % 11]),)), ("tile", ((2, 1),)),
                          ("pad", (1, (0, 1, 2, 3), MODES[i % len(MODES)], 2))][i % 4]
            if name == "tile" and x.dtype == np.float64:
                continue
            fn = function(name)
            if "cpu_kernels" not in settings_:
                want = python_steps(name, args, x)
                assert c_steps(name, args, x) == want       # the threads of these settings
            assert outcome(fn, x, *args) == python_route(fn, x, *args)
            if settings_.get("call_cache") is False:
                assert ccache.info()["entries"] == 0


def test_threads_with_configure_racing():
    """Calls on new shapes in several threads while another thread changes
    the settings: every output equals NumPy's; no record made on replaced
    settings is served with wrong threads (the outputs would still be equal:
    the bytes are what is checked)."""
    errors = []
    stop = threading.Event()

    def worker(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(150):
                shape = (1, int(rng.integers(1, 6)), int(rng.integers(2, 30)), int(rng.integers(2, 30)))
                x = array(rng, shape, "f4", bool(rng.integers(2)))
                k = int(rng.integers(4))
                if k == 0:
                    ok = np.array_equal(dml.identity(x, 2.0, 1.0), (x * np.float32(2.0) + np.float32(1.0)))
                elif k == 1:
                    ok = np.array_equal(dml.cast(x, np.int16), x.astype(np.int16))
                elif k == 2:
                    ok = np.array_equal(dml.tile(x, (1, 2, 1, 2)), np.tile(x, (1, 2, 1, 2)))
                else:
                    ok = np.array_equal(dml.pad(x, (0, 1, 2, 0), 1, "wrap"),
                                        np.pad(x, ((0, 1), (1, 1), (2, 1), (0, 1)), "wrap"))
                if not ok:
                    errors.append((k, shape))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def toggler():
        n = 0
        while not stop.is_set():
            with dml.configure(threads=1 + n % 3, call_cache=bool(n % 2)):
                n += 1

    ts = [threading.Thread(target=worker, args=(s,)) for s in range(3)]
    tog = threading.Thread(target=toggler)
    tog.start()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    stop.set()
    tog.join()
    assert not errors, errors[:3]


GARBAGE = [None, True, 0, -1, 1, 2, 2 ** 31, 2 ** 32, 2 ** 63, -2 ** 63, 2 ** 70, 1.5, float("nan"), float("inf"),
           "DCR", "crd", "reflect", "constant", "", "x" * 100, "\u00e9", (), [], (1,), [1, 2], (0, 0, 0, 0),
           (2 ** 40, 1), [[1]], (1.0,), np.float32, np.dtype("f2"), np.dtype(">f4"), np.dtype("c8"), np.int64(2),
           object(), dml.PaddingMode.EDGE]


@pytest.mark.parametrize("name", sorted(ccache.MOVE_LOWERINGS))
def test_garbage_arguments_never_crash_and_match_the_python_route(name):
    """Arguments from a pool of odd values, in every position: the C lowering
    gives the Python route's passes or declines."""
    rng = np.random.default_rng(len(name))
    nargs = {"identity": 2, "cast": 1, "tile": 1, "pad": 4, "space_to_depth": 2, "depth_to_space": 2, "join": 1,
             "split": 2, "diagonal_matrix": 3}[name]
    x = array(rng, (2, 4, 4, 6), "f4", True)
    xs = [x, x] if name == "join" else x
    for _ in range(400):
        args = tuple(GARBAGE[int(i)] for i in rng.integers(0, len(GARBAGE), nargs))
        got = c_steps(name, args, xs)
        if got is None:
            continue
        assert got == python_steps(name, args, xs), (name, args)


def test_torch_cpu_tensors_take_the_c_route_with_the_python_routes_outputs_and_errors():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x = torch.from_numpy(array(rng, (1, 4, 6, 8), "f4", False))
    cases = [(dml.identity, (x,)), (dml.identity, (x, 2.0, 1.0)), (dml.cast, (x, np.float16)),
             (dml.tile, (x, (1, 2, 1, 2))), (dml.pad, (x, 1, (0, 1, 2, 3), "symmetric")),
             (dml.space_to_depth, (x, 2)), (dml.depth_to_space, (x, 2)), (dml.join, ([x, x[:, :1]], 1)),
             (dml.split, (x, 3, [3, 5])),
             # invalid: the C route declines, the Python route raises
             (dml.tile, (x, (0, 1))), (dml.pad, (x, 1, 1, "bogus")), (dml.split, (x, 3, [3, 4])),
             (dml.depth_to_space, (x, 3)), (dml.cast, (x, np.bool_))]

    def result(fn, args):
        try:
            out = fn(*args)
        except Exception as e:  # noqa: BLE001 - compared below
            return ("error", type(e), str(e))
        outs = out if isinstance(out, list) else [out]
        return ("ok", [(type(o), o.dtype, tuple(o.shape), o.numpy().tobytes()) for o in outs])

    dml.identity(torch.zeros(3))        # (the process's first PyTorch call teaches C PyTorch's tensor type)
    for fn, args in cases:
        ccache.clear()
        before, py_misses = ccache.info()["entries"], planner.info()["misses"]
        got = result(fn, args)
        made = ccache.info()["entries"] - before
        if got[0] == "ok":                      # C made the record: the Python route's cache saw no call
            assert planner.info()["misses"] == py_misses, fn
        real = front._move_new
        front._move_new = lambda *a: None
        try:
            with dml.configure(call_cache=False):
                want = result(fn, args)
        finally:
            front._move_new = real
        assert got == want, fn
        assert made == (1 if got[0] == "ok" else 0), fn       # the C route recorded each valid call


@pytest.mark.parametrize("name", NAMES)
def test_every_dtype_spelling_of_cast(name, monkeypatch):
    """Can fail: cast of a never-seen shape with each spelling of its dtype
    that the C lowering reads (NumPy's dtype and type, the name as a string,
    the DataType name with and without DirectML's prefix, the DataType,
    PyTorch's dtype) takes the C route (the Python route's builder never
    runs) and gives the Python route's bytes; the others (a NumPy code,
    spaces, mixed case, a PyTorch name as a string) give them through the
    Python route."""
    rng = np.random.default_rng(3)
    for i, dtype in enumerate(spellings(name)):
        x = array(rng, (1, 3, 5 + i, 7), "f4", i % 2)
        want = python_route(dml.cast, x, dtype)
        assert want[0] == "ok" and want[2][0][0] == np.dtype(name).str
        ccache.clear()
        with monkeypatch.context() as m:
            if read_in_c(dtype):
                m.setitem(front._BUILD, "cast", lambda *a: pytest.fail(f"the Python route ran for {dtype!r}"))
            assert outcome(dml.cast, x, dtype) == want, dtype
        assert ccache.info()["entries"] == 1, dtype             # recorded: a repeat is a hit


def test_cast_of_a_torch_tensor_with_torch_and_string_dtypes_takes_the_c_route(monkeypatch):
    """Can fail: a PyTorch CPU tensor of a never-seen shape cast to a PyTorch
    dtype or a dtype name is lowered in C (the Python route's builder never
    runs) and equals ``Tensor.to``."""
    torch = pytest.importorskip("torch")
    dml.cast(torch.zeros(2), torch.int8)              # (opendml's PyTorch adapter loaded: its hooks registered)
    monkeypatch.setitem(front._BUILD, "cast", lambda *a: pytest.fail("the Python route ran"))
    for i, (dtype, peer) in enumerate([(torch.int8, torch.int8), ("int32", torch.int32),
                                       (dml.DataType.FLOAT16, torch.float16), ("INT16", torch.int16)]):
        t = (torch.randn(1, 3, 4 + i, 5) * 30).clamp(-100, 100)      # (inside every target type)
        ccache.clear()
        got = dml.cast(t, dtype)
        assert type(got) is torch.Tensor and got.dtype == peer and torch.equal(got, t.to(peer)), dtype


def test_diagonal_matrix_of_a_new_shape_builds_no_description(monkeypatch):
    """Can fail: diagonal_matrix(x, ...) of a never-seen shape is lowered in C
    (no DiagonalMatrix1OperatorDesc is built), records the call (a repeat is
    a hit) and gives the Python route's bytes, for bands that fill whole
    rows, single runs per row or single diagonals, inverted ranges included."""
    rng = np.random.default_rng(5)
    cases = [(1, 0, 1), (0, 1, 0), (7, -1, 2), (2.5, 3, -2), (-4, -2**31, 1), (9, 0, 2**31 - 1), (0, 5, 5)]
    for i, (value, begin, end) in enumerate(cases):
        x = array(rng, (2, 1 + i, 9 - i, 6 + i % 3), "f4" if i % 2 else "i4", i % 3 == 0)
        want = python_route(function("diagonal_matrix"), x, value, begin, end)
        ccache.clear()
        with monkeypatch.context() as m:
            m.setattr(DiagonalMatrix1OperatorDesc, "__init__", lambda *a, **k: pytest.fail("a description was built"))
            assert outcome(dml.diagonal_matrix, x, value=value, begin=begin, end=end) == want
            hits = ccache.info()["hits"]
            assert outcome(dml.diagonal_matrix, x, value=value, begin=begin, end=end) == want
            assert ccache.info()["hits"] == hits + 1


def test_the_operators_c_lowering_numbers_are_newshape_h_s():
    """Each operator declares its C lowering's number (``C_LOWERING``,
    ``C_PLAIN``) in its module; newshape.h's enums must say the same
    (ODML_LOWER_<FUNCTION>, ODML_PLAIN_<FUNCTION>), every one of them."""
    import pathlib
    import re
    header = (pathlib.Path(dml.__file__).parent / "runtime" / "native" / "newshape.h").read_text()
    for prefix, table in (("LOWER", ccache.MOVE_LOWERINGS),
                          ("PLAIN", {n: i for i, n in enumerate(ccache.PLAIN_LOWERED)})):
        enum = {m.group(1).lower(): int(m.group(2)) for m in re.finditer(rf"ODML_{prefix}_([A-Z0-9_]+) = (\d+)", header)}
        enum.pop("count", None)
        assert table == enum, (prefix, table, enum)


def test_the_sequence_bit_is_newshape_h_s_and_only_list_taking_functions_set_it():
    """``calls.LOWER_SEQUENCE`` is newshape.h's ODML_LOWER_SEQUENCE; the
    front sets it exactly for the functions that offer their arrays as one
    list or tuple (join's ``arrays``, the index route's tuple), so C reads a
    list for join and a lone array for pad: a lone array given to join, or a
    list given to pad, takes the Python route and its error."""
    import pathlib
    import re
    from opendml.arrays import front
    header = (pathlib.Path(dml.__file__).parent / "runtime" / "native" / "newshape.h").read_text()
    bit = re.search(r"#define ODML_LOWER_SEQUENCE \(1 << (\d+)\)", header)
    assert bit and ccache.LOWER_SEQUENCE == 1 << int(bit.group(1))
    seq = {name for name in ccache.MOVE_LOWERINGS if front._LOWER[ccache.OPS[name]] & ccache.LOWER_SEQUENCE}
    assert "join" in seq and "pad" not in seq and "identity" not in seq
    nat = cpu_backend._load_native()
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    lowered = nat.move_lowering(front._LOWER[ccache.OPS["join"]], [x, x], (0,), get_backend("cpu").plain_conf)
    assert lowered is not None and lowered[0] == ((4, 3, 4),)
    assert nat.move_lowering(front._LOWER[ccache.OPS["join"]], x, (0,), get_backend("cpu").plain_conf) is None
    assert nat.move_lowering(front._LOWER[ccache.OPS["identity"]], [x], (), get_backend("cpu").plain_conf) is None
    with pytest.raises(dml.ValidationError):
        dml.join(x, 0)
