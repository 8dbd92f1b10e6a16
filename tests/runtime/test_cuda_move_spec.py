"""Issue 33 (the family's new shapes on CUDA): the kernel launches of a family
call's move program, planned in C (``runtime/native/cuda_move_spec.c``,
through ``_native.cuda_move_steps``), are those ``runtime/cuda/steps.py``'s
``move_steps`` gives for the plan the operator lowers (what
``CudaBackend.record_move`` launches): the same kernel names, parameter bytes,
grids, shared memory and slots, over random identity, cast, tile, pad,
space_to_depth, depth_to_space, join, split and diagonal_matrix calls, element
layouts, dtypes, pointer alignments and ``steps``' settings. Nothing here
needs a GPU: both sides only compute. ``call_cache_move_new`` launches exactly
this on PyTorch CUDA tensors and CuPy arrays (tests/test_family_cuda_new.py
runs it where there is a GPU)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opendml.arrays import front
from opendml.arrays.planner import array_layout, logical_desc
from opendml.ops import DiagonalMatrix1OperatorDesc
from opendml.runtime import calls as ccache
from opendml.runtime import get_backend
from opendml.runtime.cpu import backend as cpu_backend
from opendml.runtime.cuda import steps
from tests.conftest import native_available, run_in_threads
from tests.test_newshape_move import calls, inputs
from ..conftest import n_examples

pytestmark = pytest.mark.skipif(not native_available(), reason="the compiled CPU kernels are not built")

SETTINGS = settings(max_examples=n_examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
DATA = 0x7F00_0000_0000
OUT = 0x7E00_0000_0000


def description(name, args, xs):
    if name == "diagonal_matrix":
        make = lambda t: DiagonalMatrix1OperatorDesc(t, None, t.data_type, *args)  # noqa: E731
    else:
        snap = front._SNAPSHOTS[name]
        args = tuple(front._snapshot(v) if i in snap else v for i, v in enumerate(args))
        make, _ = front._contract.OPERATOR_OF[name].arguments(front.ARGUMENT_API, xs[0], *args)
    return front.Call(name, make).describe([logical_desc(a.dtype, a.shape) for a in xs])


def python_launches(name, args, xs, data, dsts):
    """(output shapes, launches) of the Python route (``arrays/cuda.move``):
    the description lowered for the inputs' layouts, ``move_steps`` for
    their bound ranges at ``data`` and the outputs at ``dsts``."""
    desc = description(name, args, xs)
    layouts = [array_layout(a.shape, a.strides, a.itemsize) for a in xs]
    plan = desc.lower(in_layouts=[(lay.strides, lay.origin) for lay in layouts])
    srcs = [p - lay.origin * a.itemsize for p, lay, a in zip(data, layouts, xs)]
    got = steps.move_steps(plan, srcs, [lay.span for lay in layouts], dsts[:len(desc.outputs)], sms=132)
    return (tuple(tuple(t.sizes) for t in desc.outputs),
            tuple((n, bytes(p), g[0], smem, s, d) for n, p, g, smem, s, d in got))


def c_launches(name, args, xs, data, dsts):
    nat = cpu_backend._load_native()
    x = list(xs) if name == "join" else tuple(xs) if name == "diagonal_matrix" else xs[0]
    if name == "diagonal_matrix":
        args = (None, None, *args)
    return nat.cuda_move_steps(front._LOWER[ccache.OPS[name]], x, tuple(args), tuple(data), tuple(dsts),
                               steps.c_settings())


def addresses(rng, xs, aligned=False):
    """Data pointers for the inputs (each a multiple of its element size, at a
    random 16-byte alignment class unless ``aligned``) and output addresses
    (multiples of 8, 16 three times in four; 16 of them: SPLIT's most)."""
    data = [DATA + (1 << 24) * i + (0 if aligned else a.itemsize * int(rng.integers(0, 16 // a.itemsize)))
            for i, a in enumerate(xs)]
    dsts = [OUT + (1 << 24) * i + (0 if aligned else 8 * int(rng.integers(0, 2)) * int(rng.integers(0, 2)))
            for i in range(16)]
    return data, dsts


def compare(name, args, xs, rng, aligned=False):
    data, dsts = addresses(rng, xs, aligned)
    got = c_launches(name, args, xs, data, dsts)
    try:
        want = python_launches(name, args, xs, data, dsts)
    except Exception:  # noqa: BLE001 - a call the Python route refuses: C must decline it
        assert got is None, "C planned a call the Python route refuses"
        return None
    return got, want


def declined_by_the_lowering(name, args, x):
    """Whether the CPU C lowering declines the call (tests/test_newshape_move.py
    pins which valid calls those are): C plans no CUDA launches for them either."""
    nat = cpu_backend._load_native()
    if name == "diagonal_matrix":
        x, args = (x,), (None, None, *args)
    return nat.move_lowering(front._LOWER[ccache.OPS[name]], x, tuple(args), get_backend("cpu").plain_conf) is None


@SETTINGS
@given(calls(), st.integers(0, 2 ** 32 - 1))
def test_launches_equal_move_steps(call, seed):
    name, args, shape, dt, view = call
    rng = np.random.default_rng(seed)
    x, args = inputs(rng, name, args, shape, dt, view)
    xs = list(x) if name == "join" else [x]
    out = compare(name, args, xs, rng)
    if out is None:
        return
    got, want = out
    if got is None:
        assert declined_by_the_lowering(name, args, x), "C declined a call its lowering takes"
        return
    assert got == want


FUSE = [True, False, "padr", "words", "rows", "other"]
VIA = ["auto", "strided_copy", "move"]


@SETTINGS
@given(calls(), st.integers(0, 2 ** 32 - 1), st.sampled_from(FUSE), st.sampled_from(VIA),
       st.sampled_from([0, 1, 2, 4]), st.sampled_from([0, 32, 64]), st.sampled_from([0, 1, 4, 16]),
       st.sampled_from([(2, 6, 2), (1, 8, 3), (2, 8, 4)]), st.sampled_from([0, 64, 256]), st.sampled_from([0, 1, 2]))
def test_launches_equal_move_steps_under_other_settings(call, seed, fuse, via, word_copy, tile, small, rows,
                                                         padr_min, cvt):
    """Each of steps.py's settings changed: the same launches (C reads them
    at each call), or C declines (a persistent conversion grid, sized by the
    device)."""
    name, args, shape, dt, view = call
    rng = np.random.default_rng(seed)
    x, args = inputs(rng, name, args, shape, dt, view)
    xs = list(x) if name == "join" else [x]
    with pytest.MonkeyPatch.context() as m:
        for attr, value in (("FUSE_PAD", fuse), ("MOVE_PLAIN_VIA", via), ("WORD_COPY", word_copy),
                            ("TRANSPOSE_TILE", tile), ("TRANSPOSE_MIN", small), ("PAD_ROWS_MIN", small),
                            ("WORD_COPY_MIN_RANK", 1 + small % 3), ("PAD_ROWS", rows), ("PADR_MIN_BYTES", padr_min),
                            ("CVT_UNROLL", cvt), ("CVT_FLAGS", 2 if cvt == 2 else 0),
                            ("WORD_REPEAT", (3 - cvt, word_copy))):
            m.setattr(steps, attr, value)
        out = compare(name, args, xs, rng)
    if out is None:
        return
    got, want = out
    if got is None:
        assert declined_by_the_lowering(name, args, x) or (cvt == 2 and any(n.startswith("move_cvt")
                                                                             for n, *_ in want[1])), (name, want)
        return
    assert got == want


def test_every_kernel_kind_is_compared():
    """The cases above reach every launch move_steps makes for the family
    (so that a kernel kind C got wrong cannot hide behind the draws)."""
    rng = np.random.default_rng(1)
    seen = set()
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    cases = [("identity", (None, None), [f32(4, 9, 64)[:, :8, :32]]),           # move_wcopy
             ("tile", ((1, 3, 1, 1),), [f32(2, 3, 4, 8)]),                        # move_wcopy, a repeat
             ("identity", (None, None), [f32(64, 48)[::-1]]),                     # strided_copy (reversed)
             ("identity", (None, None), [f32(64, 48).T]),                         # move_transpose
             ("identity", (2.0, 1.0), [f32(3, 40)]),                              # move_cvt
             ("identity", (2.0, None), [f32(3, 40)[:, ::2]]),                     # move_vec
             ("cast", (np.float16,), [f32(5, 7)]),                                # move_cvt
             ("space_to_depth", (2, "DCR"), [f32(1, 3, 32, 32)]),                 # move_tile
             ("depth_to_space", (2, "CRD"), [f32(1, 12, 16, 16)]),                # move_tile
             ("pad", (1, 2, "constant", 0), [f32(2, 3, 64, 70)]),                 # move_padr
             ("pad", (1, 2, "edge", 0), [f32(2, 3, 9, 20)]),                      # move_padw
             ("pad", (1, 2, "wrap", 0), [f32(2, 3, 9, 40)[:, :, :, :20]]),        # move_pad (FUSE_PAD "rows")
             ("pad", ((0, 1), (2, 0), "reflect", 0), [f32(3, 5)]),                # pass by pass: move_vec, fill
             ("join", (0,), [f32(3, 5), f32(2, 5)]),
             ("split", (1, [2, 3]), [f32(4, 5)]),
             ("diagonal_matrix", (1.0, 0, 1), [f32(6, 6)])]                       # move_fill
    for name, args, xs in cases:
        with pytest.MonkeyPatch.context() as m:
            if args[2:3] == ("wrap",):
                m.setattr(steps, "FUSE_PAD", "rows")
            out = compare(name, args, xs, rng, aligned=True)
        assert out is not None and out[0] is not None, name
        assert out[0] == out[1], name
        seen |= {n.split("<")[0] for n, *_ in out[1][1]}
    assert {"move_wcopy", "strided_copy", "move_transpose", "move_cvt", "move_vec", "move_tile", "move_padr",
            "move_padw", "move_pad", "move_fill"} <= seen, seen


def test_misaligned_data_is_declined():
    """An input whose address is not a multiple of its element size: C plans
    nothing (the Python route raises UnsupportedError naming the address)."""
    x = np.zeros((4, 8), np.float32)
    got = c_launches("identity", (None, None), [x], [DATA + 2], [OUT] * 16)
    assert got is None
    assert c_launches("identity", (None, None), [x], [DATA + 4], [OUT] * 16) is not None


def test_settings_c_cannot_read_are_declined(monkeypatch):
    x = np.zeros((4, 8), np.float32)
    assert c_launches("identity", (None, None), [x], [DATA], [OUT] * 16) is not None
    monkeypatch.setattr(steps, "PAD_ROWS", (2, 6))
    assert c_launches("identity", (None, None), [x], [DATA], [OUT] * 16) is None
    monkeypatch.setattr(steps, "PAD_ROWS", (2, 6, 2))
    monkeypatch.setattr(steps, "WORD_COPY", 2.0)
    assert c_launches("identity", (None, None), [x], [DATA], [OUT] * 16) is None


# -- the glue (call_cache_move_new on CUDA memory), driven without a GPU ----------------------------------

def _glue_ok() -> bool:
    from tests.runtime.test_cuda_move_cache import _driver_loads
    return ccache._HAS and ccache.info()["numpy"] and not _driver_loads()


glue = pytest.mark.skipif(not _glue_ok(), reason="the call cache is not built, or a CUDA driver loads here (the "
                                                 "GPU tests, tests/test_family_cuda_new.py, cover these paths)")


@pytest.fixture
def stand_in(fake):
    """The CuPy stand-in of tests/runtime/test_cuda_move_cache.py, and a retry
    hook logging each launch C hands it (no driver loads here, so every C
    launch fails and goes to the hook)."""
    log = []
    ccache.register_cuda_retry(lambda *a: log.append(a))
    try:
        yield fake, log
    finally:
        ccache.register_cuda_retry(ccache._relaunch)


from tests.runtime.test_cuda_move_cache import FakeArray, fake  # noqa: E402,F401 - the fixture `fake`

GLUE_CASES = [("pad", ((0, 1, 2), (1, 0, 3), "reflect", 0.0)), ("pad", (1, 2, "constant", 7.0)),
              ("identity", (2.0, None)), ("cast", ("float16",)), ("tile", ((1, 2, 1),)), ("split", (2, [2, 5])),
              ("join", (1,))]


@glue
@pytest.mark.parametrize("name,args", GLUE_CASES, ids=[c[0] for c in GLUE_CASES])
@pytest.mark.parametrize("view", ["packed", "flipped", "off"])
def test_the_glue_launches_move_steps_and_records_what_serves_a_repeat(stand_in, name, args, view):
    """A never-seen shape on (stand-in) CuPy arrays: a kernel the dict lacks
    comes back by name (nothing allocated for good, nothing launched); then
    the launches are move_steps' for the outputs' addresses, in order, from
    element 0 of each input's bound range, on the current stream; the call
    is recorded, and a repeat (cuda_move) queues the same launches."""
    fake_hooks, log = stand_in
    a = np.arange(3 * 4 * 7, dtype=np.float32).reshape(3, 4, 7)
    if view == "flipped":
        a = a[::-1, :, ::-1]
    base = 0x1000_0040 + (4 if view == "off" else 0)
    origin = array_layout(a.shape, a.strides, a.itemsize).origin * a.itemsize
    x = FakeArray(a.shape, a.dtype, base + origin, a.strides)
    xs, fx = [a], x
    if name == "join":                                  # a second input, packed, at another alignment class
        b = np.ascontiguousarray(a[:, :2])
        xs, fx = [a, b], [x, FakeArray(b.shape, b.dtype, 0x2000_0008, b.strides)]
    kernels: dict = {}
    lower, op = front._LOWER[ccache.OPS[name]], ccache.OPS[name]
    ccache.clear()
    for _ in range(20):
        out = ccache.move_new(op, lower, fx, args, ccache.generation(), get_backend("cpu").plain_conf,
                              lambda: (kernels, steps.c_settings()))
        if type(out) is not str:
            break
        assert not log                                  # nothing launched for a missing kernel
        kernels.setdefault(0, {})[out] = 0x5000 + len(kernels.get(0, {}))
    outs = out if isinstance(out, list) else [out]
    assert all(type(o) is FakeArray for o in outs)
    data = [x.data.ptr for x in (fx if name == "join" else [fx])]
    shapes, want = python_launches(name, args, xs, data, [o.data.ptr for o in outs] + [0] * 16)
    assert tuple(o.shape for o in outs) == shapes
    srcs = [p - array_layout(v.shape, v.strides, v.itemsize).origin * v.itemsize for p, v in zip(data, xs)]
    expect = [(0, kernels[0][n], g, smem, p, (srcs[s] if s >= 0 else outs[d].data.ptr), outs[d].data.ptr, 77)
              for n, p, g, smem, s, d in want]
    assert log == expect
    assert ccache.info()["entries"] == 1
    log.clear()
    before = ccache.info()["hits"]
    again = ccache.move(op, fx, *args)
    assert ccache.info()["hits"] == before + 1
    again = again if isinstance(again, list) else [again]
    assert log == [(0, f, g, smem, p, (srcs[s] if s >= 0 else again[d].data.ptr), again[d].data.ptr, 77)
                   for (_, f, g, smem, p, *_), (_, _, _, _, s, d) in zip(expect, want)]


@glue
def test_the_glue_declines_what_the_python_route_must_run(stand_in):
    """Misaligned data, no compiled-kernel dict (launches not native), another
    current device, an allocator failure (None: the route raises), a call its
    lowering refuses: None, nothing launched, nothing recorded."""
    fake_hooks, log = stand_in
    op, lower = ccache.OPS["identity"], front._LOWER[ccache.OPS["identity"]]
    conf = lambda: ({0: {}}, steps.c_settings())  # noqa: E731
    gen = ccache.generation
    plain = get_backend("cpu").plain_conf
    ccache.clear()
    assert ccache.move_new(op, lower, FakeArray((4, 8), np.float32, 0x1000_0002), (None, None), gen(), plain,
                           conf) is None                                         # misaligned
    x = FakeArray((4, 8), np.float32, 0x1000_0000)
    assert ccache.move_new(op, lower, x, (None, None), gen(), plain, lambda: (None, steps.c_settings())) is None
    assert ccache.move_new(op, lower, x, (None, None), gen(), plain) is None      # no CUDA conf given
    assert ccache.move_new(op, lower, x, (3, None), gen(), plain, conf) is None  # the lowering refuses it
    fake_hooks.device = 1
    assert ccache.move_new(op, lower, x, (None, None), gen(), plain, conf) is None
    fake_hooks.device = 0
    fake_hooks.fail = MemoryError("out of memory")
    assert ccache.move_new(op, lower, x, (None, None), gen(), plain, conf) is None
    assert not log and ccache.info()["entries"] == 0


@glue
def test_the_glue_takes_a_list_only_where_the_function_offers_one(stand_in):
    """join's arrays come as one list or tuple, identity's as one array: a
    lone array given to join, or a list given to identity, is the Python
    route's (it raises ValidationError naming the argument), never lowered
    and launched as if it were a valid call."""
    fake_hooks, log = stand_in
    conf = lambda: ({0: {}}, steps.c_settings())  # noqa: E731
    plain = get_backend("cpu").plain_conf
    x = FakeArray((4, 8), np.float32, 0x1000_0000)
    ccache.clear()
    for name, given, args in (("join", x, (0,)), ("identity", [x], (None, None)), ("identity", (x,), (None, None))):
        op, lower = ccache.OPS[name], front._LOWER[ccache.OPS[name]]
        assert ccache.move_new(op, lower, given, args, ccache.generation(), plain, conf) is None, name
    op, lower = ccache.OPS["join"], front._LOWER[ccache.OPS["join"]]
    assert type(ccache.move_new(op, lower, [x, x], (0,), ccache.generation(), plain, conf)) is str  # the control
    assert not log and ccache.info()["entries"] == 0


@glue
def test_the_glue_under_threads(stand_in):
    """Threads lowering, planning and recording never-seen shapes at once (each
    with its own stream): every output has the Python route's shape, and each
    launch the hook saw ran on its thread's stream."""
    fake_hooks, log = stand_in
    kernels = {0: {}}
    plain = get_backend("cpu").plain_conf

    def worker(seed):
        rng = np.random.default_rng(seed)
        fake_hooks.local.stream = 1000 + seed
        for i in range(60):
            name, args = GLUE_CASES[int(rng.integers(len(GLUE_CASES) - 1))]      # (not join)
            a = np.zeros((int(rng.integers(1, 6)), int(rng.integers(1, 40)), 7), np.float32)   # (split: 2 + 5)
            x = FakeArray(a.shape, a.dtype, 0x1000_0000 * (seed + 1) + 16 * i, a.strides)
            op, lower = ccache.OPS[name], front._LOWER[ccache.OPS[name]]
            for _ in range(20):
                out = ccache.move_new(op, lower, x, args, ccache.generation(), plain,
                                      lambda: (kernels, steps.c_settings()))
                if type(out) is not str:
                    break
                kernels[0][out] = 0x5000
            want = tuple(tuple(t.sizes) for t in description(name, args, [a]).outputs)
            got = tuple(o.shape for o in (out if isinstance(out, list) else [out]))
            assert got == want, (name, a.shape, got, want)
    run_in_threads(worker)
    assert log and {entry[-1] for entry in log} <= {1000, 1001, 1002, 1003}


class _OnAllocation:
    """A lock whose taking (by the stand-in's empty, at each allocation) runs `act` once, as a finalizer run
    by the allocation (or another thread while the allocator holds no GIL) could."""

    def __init__(self, act):
        self.act = act

    def __enter__(self):
        act, self.act = self.act, None
        if act is not None:
            act()

    def __exit__(self, *exc):
        return False


def _compiled(fake_hooks, op, lower, x, args, kernels):
    """kernels[0] filled with every kernel the glue names for x (nothing launched for a missing one)."""
    plain = get_backend("cpu").plain_conf
    for _ in range(20):
        out = ccache.move_new(op, lower, x, args, ccache.generation(), plain, lambda: (kernels, steps.c_settings()))
        if type(out) is not str:
            return out
        kernels.setdefault(0, {})[out] = 0x5000 + len(kernels.get(0, {}))
    raise AssertionError("the glue kept naming kernels")


@glue
def test_the_glue_declines_an_input_moved_while_the_outputs_were_allocated(stand_in):
    """An input whose data moves while the outputs are allocated (same dtype, layout and alignment class:
    the key's words unchanged, its old memory possibly freed): nothing is launched from the old address and
    nothing recorded; the Python route reads the array anew."""
    fake_hooks, log = stand_in
    op, lower = ccache.OPS["pad"], front._LOWER[ccache.OPS["pad"]]
    args = (1, 2, "constant", 7.0)
    kernels: dict = {}
    ccache.clear()
    _compiled(fake_hooks, op, lower, FakeArray((3, 40), np.float32, 0x1000_0040), args, kernels)
    log.clear()
    ccache.clear()
    x = FakeArray((3, 40), np.float32, 0x1000_0040)
    fake_hooks.lock = _OnAllocation(lambda: setattr(x, "data", type(x.data)(0x3000_0040, 0)))
    out = ccache.move_new(op, lower, x, args, ccache.generation(), get_backend("cpu").plain_conf,
                          lambda: (kernels, steps.c_settings()))
    assert x.data.ptr == 0x3000_0040                      # (moved by the allocation)
    assert out is None and not log and ccache.info()["entries"] == 0


@glue
def test_the_glue_declines_an_output_that_is_not_whole_elements(stand_in):
    """An allocator whose output address is not a multiple of the element size: nothing launched (every
    kernel writes whole elements; a misaligned one faults and loses the CUDA context), nothing recorded:
    the Python route places the output (or raises UnsupportedError naming the address)."""
    fake_hooks, log = stand_in
    op, lower = ccache.OPS["identity"], front._LOWER[ccache.OPS["identity"]]
    x = FakeArray((4, 8), np.float32, 0x1000_0000)
    kernels: dict = {}
    ccache.clear()
    _compiled(fake_hooks, op, lower, x, (None, None), kernels)
    log.clear()
    ccache.clear()
    fake_hooks.misalign = 2
    out = ccache.move_new(op, lower, x, (None, None), ccache.generation(), get_backend("cpu").plain_conf,
                          lambda: (kernels, steps.c_settings()))
    assert out is None and not log and ccache.info()["entries"] == 0
    fake_hooks.misalign = 8                                   # whole elements, another class mod 16: launched
    out = _compiled(fake_hooks, op, lower, x, (None, None), kernels)
    assert type(out) is FakeArray and out.data.ptr % 16 == 8 and log


@glue
def test_the_glue_never_reads_a_released_kernel_table(stand_in):
    """The device's kernel dict replaced by a copy while the outputs are allocated (the old one released):
    the launches take its functions, never those of another object that took the old one's memory."""
    fake_hooks, log = stand_in
    op, lower = ccache.OPS["identity"], front._LOWER[ccache.OPS["identity"]]
    x = FakeArray((4, 8), np.float32, 0x1000_0000)
    kernels: dict = {}
    ccache.clear()
    _compiled(fake_hooks, op, lower, x, (None, None), kernels)
    for i in range(8):                               # (a larger dict: its keys are not kept for reuse)
        kernels[0][f"unused{i}"] = 0x6000
    names, good = list(kernels[0]), set(kernels[0].values())
    log.clear()
    ccache.clear()
    kept = []

    def replace():
        kernels[0] = dict(kernels[0])                # the old dict released ...
        kept.append({n: 0xBAD for n in names})       # ... and its memory likely taken by a new dict

    fake_hooks.lock = _OnAllocation(replace)
    out = ccache.move_new(op, lower, x, (None, None), ccache.generation(), get_backend("cpu").plain_conf,
                          lambda: (kernels, steps.c_settings()))
    assert type(out) is FakeArray and log
    assert {entry[1] for entry in log} <= good


@glue
def test_the_settings_are_read_only_where_a_program_is_planned(stand_in):
    """Can fail: the glue calls the launch settings' function (cuda_conf's second item, as calls.cuda_conf
    hands steps.c_settings, with the index kernels' third) for the first five's never-seen shapes, whose one
    tuned launch reads none, or does not call it (or declines) for a family program, which it plans with them;
    the first five's output is not what the settings tuple gives either; the move glue reads the third."""
    fake_hooks, log = stand_in
    kernels, calls_made = {0: {}}, []

    def settings():
        calls_made.append(1)
        return steps.c_settings()

    def new(name, x, args, conf):
        op = ccache.OPS[name]
        for _ in range(8):
            out = ccache.move_new(op, front._LOWER[op], x, args, ccache.generation(), None, conf)
            if type(out) is not str:
                return out
            kernels[0][out] = 0x5000 + len(kernels[0])
        raise AssertionError("the glue kept naming kernels")

    ccache.clear()
    index_settings = lambda: pytest.fail("the move glue read the index settings")  # noqa: E731
    by_function = lambda: (kernels, settings, index_settings)  # noqa: E731
    args = ([0, 0, 0, 0], [1, 3, 5, 7], [1, 1, -1, 1], None)
    got = new("slice1", FakeArray((1, 3, 5, 7), np.float32, 0x1000_0000), args, by_function)
    assert type(got) is FakeArray and got.shape == (1, 3, 5, 7) and not calls_made
    ccache.clear()
    again = new("slice1", FakeArray((1, 3, 5, 7), np.float32, 0x1000_0000), args,
                lambda: (kernels, steps.c_settings()))
    assert again.shape == got.shape and log[-1][1:5] == log[-2][1:5]       # the same launch either way
    out = new("identity", FakeArray((4, 9), np.float32, 0x2000_0000), (None, None), by_function)
    assert type(out) is FakeArray and out.shape == (4, 9) and calls_made        # (once per planning attempt)


def test_the_settings_tuple_is_kept_until_a_setting_is_set(monkeypatch):
    """Can fail: ``steps.c_settings`` (which C reads at every never-seen CUDA call of the family) makes its
    tuple once and keeps it, dropped when any setting is set or deleted (``config.SettingsModule``), so a
    call still plans with the settings in force; a sequence setting given as a list is read anew each time."""
    first = steps.c_settings()
    assert steps.c_settings() is first
    monkeypatch.setattr(steps, "FUSE_PAD", "rows")
    assert steps.c_settings()[0] == 4 and steps.c_settings() is steps.c_settings()
    monkeypatch.undo()
    assert steps.c_settings() == first
    rows = [3, 8, 4]
    monkeypatch.setattr(steps, "PAD_ROWS", rows)
    assert steps.c_settings()[1:4] == (3, 8, 4)
    rows[0] = 5                                      # (a list changed in place: no setattr)
    assert steps.c_settings()[1:4] == (5, 8, 4)
    monkeypatch.delattr(steps, "CVT_FLAGS")
    with pytest.raises(NameError):
        steps.c_settings()


def test_compiled_first_compiles_each_kernel_named_for_the_inputs_device(monkeypatch):
    """Can fail: a kernel C names is not compiled for the device of the (first) input before the call is made
    again, an answer that names no kernel is not returned as it is, or a route that keeps naming kernels is
    called more than 15 times again (then None: the Python route)."""
    from opendml.runtime.cuda import launch
    compiled = []
    monkeypatch.setattr(launch, "add_new_kernel", lambda device, name: compiled.append((device, name)))

    class Torchish:
        def get_device(self):
            return 3

    class Cupyish:
        device = type("Device", (), {"id": 5})()

    answers = iter(["b", None])
    assert ccache.compiled_first(lambda: next(answers), [Torchish(), Cupyish()], "a") is None
    assert compiled == [(3, "a"), (3, "b")]
    compiled.clear()
    out = object()
    assert ccache.compiled_first(lambda: pytest.fail("called again"), Cupyish(), out) is out and not compiled
    assert ccache.compiled_first(lambda: "again", Cupyish(), "first") is None
    assert len(compiled) == 15 and compiled[0] == (5, "first") and compiled[-1] == (5, "again")
