"""Issue 33 (the index functions' new shapes on CUDA): the kernel launches of an index call, planned in C
(``runtime/native/cuda_index_spec.c`` for the Gather/Scatter passes, ``cuda_move_spec.c`` for the copies,
through ``_native.cuda_index_steps``), are those the Python route makes for the plan the operator lowers
(``runtime/cuda/index.py``'s ``plan_pass`` and ``steps.move_steps``, what ``CudaBackend.record_move``
launches): the same kernel names, parameter bytes, grids, shared memory and slots, over random calls of the
seven index functions (tests/test_newshape_index.py's), dtypes, index types, layouts, pointer alignments and
``index.py``'s settings. Where the Python route needs scratch (the owner, sort and group modes of an
overwriting scatter) C declines. A checked call is planned as its unchecked twin, each checked launch naming
where the check's flag address goes in its parameter block (``index.flag_offsets``: what
``IndexPass.call_cache_step`` records); one whose index array is broadcast is declined (the fused check would
not read every index). Nothing here needs a GPU: both sides only compute. ``call_cache_index_new`` launches exactly this on PyTorch CUDA tensors and CuPy arrays
(tests/test_index_cuda_new.py runs it where there is a GPU)."""
import dataclasses
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opendml.arrays import index_ops
from opendml.arrays.planner import array_layout
from opendml.plan import Gather, MovePlan, Scatter
from opendml.runtime import calls as ccache
from opendml.runtime.cpu import backend as cpu_backend
from opendml.runtime.cuda import index, steps
from tests.conftest import native_available
from tests.test_newshape_index import call, calls, offered
from ..conftest import n_examples

pytestmark = pytest.mark.skipif(not native_available(), reason="the compiled CPU kernels are not built")

SETTINGS = settings(max_examples=n_examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
DATA = 0x7F00_0000_0000
OUT = 0x7E00_0000_0000
#: index.py's settings C reads (c_settings' order) and values to try
KNOBS = {"ITEMS": [1, 2, 4, 8], "POSITION_ITEMS": [1, 2, 4], "POSITION_MIN": [0, 1 << 18],
         "COLUMN_WALK": [True, False], "REVERSE_TILE": [True, False], "REVERSE_BYTES": [32, 64, 128, 256, 512],
         "TILE_SMEM": [1024, 16384, 65536],
         "REVERSE_ROWS": [0, 256, 32768], "GATHER_ROW": [True, False], "ROW_STAGE": [True, False],
         "GROUP_SLOTS": [16, 12288], "SCATTER_VIA": ["auto", "owner", "sort"], "OWNER_SLOTS": [1, 1 << 24],
         "OWNER_IN_C": [True, False]}


def is_checked(name, args):
    """Whether the call's arguments (``call``'s order: check_indices last) ask for the index check."""
    return name in ccache.CHECKED and args[-1] is True


def unchecked(name, args):
    """The call's arguments with check_indices off (the Python route plans a checked call as this one, once
    its check passed)."""
    if name in ("gather",):
        return args[:2] + (False,)
    if name in ("gather_elements", "gather_nd", "scatter_elements"):
        return (args[0], False)
    if name == "scatter_nd":
        return (False,)
    return args


def python_plan(name, arrays, args, monkeypatch):
    """The move plan the Python route lowers for the call (captured where ``index_ops._record`` reads its
    passes), or None where it records none."""
    seen = []
    real = index_ops._pass_params

    def spy(plan, p, checked):
        seen.append(plan)
        return real(plan, p, checked)
    ccache.clear()
    with monkeypatch.context() as m:
        m.setattr(index_ops, "_index_new", lambda *a: None)
        m.setattr(index_ops, "_pass_params", spy)
        try:
            call(name, arrays, args)
        except Exception:  # noqa: BLE001 - a call the route refuses: C must decline it (checked below)
            return None
    return seen[0] if seen else None


def canonical(p):
    """Pass ``p`` with the strides no element reaches zeroed (the source's and the indices' along dimensions of
    size 1, the stride of an axis of bound 1: NumPy gives size-1 axes any stride), as C plans the pass
    (cuda_index_spec.c; tests/test_newshape_index.py compares its passes so too)."""
    one = [n == 1 for n in p.sizes]
    zero = lambda ts: tuple(0 if o else t for o, t in zip(one, ts))  # noqa: E731
    return dataclasses.replace(p, src_strides=zero(p.src_strides), dst_strides=zero(p.dst_strides), indices=tuple(
        dataclasses.replace(ix, stride=0 if ix.bound == 1 else ix.stride, index_strides=zero(ix.index_strides))
        for ix in p.indices))


def python_launches(plan, arrays, data, dst, checked=False):
    """The launches of the Python route for ``plan`` with the inputs at ``data`` and the output at ``dst``
    (``checked``: each index launch with its flag offsets; an owner table's launches with its 32-bit words
    and where its address goes); None where a pass sorts (C leaves it to the route)."""
    layouts = [array_layout(a.shape, a.strides, a.itemsize) for a in arrays]
    srcs = [p - lay.origin * a.itemsize for p, lay, a in zip(data, layouts, arrays)]
    out = []
    for p in plan.passes:
        if not p.count:
            continue
        if type(p) is Gather or type(p) is Scatter:
            p = canonical(p)
            s = index.plan_pass(plan, p, srcs, [dst])
            got = s.launches()
            if got is None or (s.mode == "owner" and not index.OWNER_IN_C):    # a sort (or a table C leaves)
                return None
            src = -1 if s.const else p.src
            out += [(*one[:4], src, p.dst, tuple(ix.index for ix in p.indices),
                     index.flag_offsets(len(p.indices)) if checked else (), *one[4:]) for one in got]
        else:
            sub = MovePlan(plan.in_types, plan.out_types, (p,))
            got = steps.move_steps(sub, srcs, [lay.span for lay in layouts], [dst], sms=132)
            out += [(n, bytes(q), g[0], smem, s, d, (), (), 0, 0) for n, q, g, smem, s, d in got]
    return tuple(out)


def c_launches(name, arrays, args, data, dst):
    which, types = index_ops._C_INDEX[ccache.OPS[name]]
    return cpu_backend._load_native().cuda_index_steps(which, types, tuple(arrays), offered(name, args),
                                                       tuple(data), dst, steps.c_settings(), index.c_settings())


def addresses(rng, arrays):
    data = [DATA + (1 << 24) * i + a.itemsize * int(rng.integers(0, max(1, 16 // a.itemsize)))
            for i, a in enumerate(arrays)]
    return data, OUT + 8 * int(rng.integers(0, 2)) * int(rng.integers(0, 2))


def compare(drawn, seed, monkeypatch):
    name, arrays, args = drawn
    checked = is_checked(name, args)
    rng = np.random.default_rng(seed)
    data, dst = addresses(rng, arrays)
    got = c_launches(name, arrays, args, data, dst)
    plan = python_plan(name, arrays, unchecked(name, args), monkeypatch)
    if plan is None:
        assert got is None, "C planned a call the Python route refuses or does not record"
        return
    want = python_launches(plan, arrays, data, dst, checked)
    if want is None:
        assert got is None, "C planned a pass that needs scratch"
        return
    if got is None and any(a.ndim == 0 for a in arrays):
        return        # a 0-d array on CUDA: the family's key of a CUDA input takes 1 to 8 dimensions
    if got is None:   # what the C lowering declines (tests/test_newshape_index.py pins which those are)
        which, types = index_ops._C_INDEX[ccache.OPS[name]]
        assert cpu_backend._load_native().index_lowering(which, types, tuple(arrays), offered(name, args),
                                                         0) is None, "C declined a call its lowering takes"
        return
    shape, launches = got
    assert launches == want


@SETTINGS
@given(calls(), st.integers(0, 2 ** 32 - 1))
def test_launches_equal_the_python_routes(drawn, seed):
    """Can fail: a launch C plans differs from the Python route's (name, parameter bytes, grid, shared
    memory, slots), or C plans a call the route refuses or runs through scratch."""
    with pytest.MonkeyPatch.context() as mp:
        compare(drawn, seed, mp)


@settings(max_examples=n_examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls(), st.integers(0, 2 ** 32 - 1), st.fixed_dictionaries({k: st.sampled_from(v) for k, v in KNOBS.items()}))
def test_launches_follow_index_settings(drawn, seed, knobs):
    """Can fail: C plans with index.py's default settings where they were changed (it reads c_settings()
    at each call)."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in knobs.items():
            mp.setattr(index, k, v)
        compare(drawn, seed, mp)


def test_large_reversals_and_rows_take_their_modes(monkeypatch):
    """Can fail: the tile, pieces, rows, row and group modes (and the positions kernel) are not planned in C as in
    Python on shapes that reach them (the random calls above are small)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 300, 64)).astype(np.float32)
    cases = [("reverse_subsequences", (x, rng.integers(0, 301, (4, 1, 64)).astype(np.uint32)), (1,)),
             ("reverse_subsequences", (x, rng.integers(0, 65, (4, 300)).astype(np.uint64)), (2,)),
             ("reverse_subsequences", (x[:, :, :8].astype(np.float16), rng.integers(0, 9, (4, 300, 1)).astype(np.uint32)),
              (2,)),
             ("gather_elements", (x, rng.integers(0, 64, (4, 300, 200)).astype(np.int64)), (2, False)),
             ("gather_elements", (x, rng.integers(0, 300, (4, 300, 64)).astype(np.int32)), (1, False)),
             ("gather_elements", (x, rng.integers(0, 300, (4, 1100, 64)).astype(np.int32)), (1, False)),
             ("gather", (x, rng.integers(0, 300, (7,)).astype(np.int64)), (1, None, False)),
             ("one_hot", (rng.integers(-3, 40, (6, 50)), np.array([0.0, 1.0], np.float32)), (40, -1)),
             ("scatter_elements", (x, rng.integers(-64, 64, (4, 300, 20)).astype(np.int64),
                                   rng.standard_normal((4, 300, 20)).astype(np.float32)), (2, True))]
    modes = set()
    for name, arrays, args in cases:
        data, dst = [DATA + (1 << 24) * i for i in range(len(arrays))], OUT
        plan = python_plan(name, arrays, args, monkeypatch)
        want = python_launches(plan, arrays, data, dst, is_checked(name, args))
        got = c_launches(name, arrays, args, data, dst)
        assert got is not None and got[1] == want, name
        modes |= {n.split("<")[0] for n, *_ in want}
    assert {"ix_reverse_tile", "ix_reverse_pieces", "ix_reverse_rows", "ix_gather_row", "ix_gather_positions", "ix_gather",
            "ix_scatter", "ix_scatter_group"} <= modes, modes


def test_checked_calls_carry_their_flags_owner_tables_their_size_and_sorts_are_declined(monkeypatch):
    """Can fail: a checked gather is not planned as its unchecked twin with the flag offsets of each axis
    (index.flag_offsets, what IndexPass.call_cache_step records), or C plans a checked call whose index
    array is broadcast (its kernels would not read every index) or a scatter that sorts; an owner table's
    launches carry its size and where it goes."""
    nat = cpu_backend._load_native()
    monkeypatch.setattr(index, "SCATTER_VIA", "owner")     # (along axis 0 "auto" groups: the test below)
    x = np.zeros((4, 5), np.float32)
    ind = np.zeros((4, 5), np.int64)
    upd = np.ones((4, 5), np.float32)
    which, types = index_ops._C_INDEX[ccache.OPS["scatter_elements"]]
    for check in (True, False):     # an owner table: ix_owner, then the scatter, both reading it (aux)
        shape, got = nat.cuda_index_steps(which, types, (x, ind, upd), (check, 0), (DATA, DATA, DATA), OUT,
                                          steps.c_settings(), index.c_settings())
        assert [t[0].split("<")[0] for t in got] == ["strided_copy", "ix_owner", "ix_scatter"], got
        assert got[2][0].startswith("ix_scatter<u32, u32, 1,") and [t[8:] for t in got] == [(0, 0), (20, 1), (0, 1)]
        assert [len(t[7]) for t in got] == [0, check, check]        # both read the indices: both checked
    for knob, value in (("SCATTER_VIA", "sort"), ("OWNER_IN_C", False)):      # a sort, or no table in C: the route's
        with pytest.MonkeyPatch.context() as m:
            m.setattr(index, knob, value)
            assert nat.cuda_index_steps(which, types, (x, ind, upd), (True, 0), (DATA, DATA, DATA), OUT,
                                        steps.c_settings(), index.c_settings()) is None
    which, types = index_ops._C_INDEX[ccache.OPS["gather"]]
    got = [nat.cuda_index_steps(which, types, (x, ind[0]), (check, 1, None), (DATA, DATA), OUT,
                                steps.c_settings(), index.c_settings()) for check in (True, False)]
    assert [t[:7] + t[8:] for t in got[0][1]] == [t[:7] + t[8:] for t in got[1][1]]
    assert [t[7] for t in got[0][1]] == [index.flag_offsets(1)] and [t[7] for t in got[1][1]] == [()]
    q = index.IndexParams()                     # where a flag written into axis 1 lands in the block
    q.axes[1].flag = 0x0123_4567_89AB_CDEF
    assert bytes(q).index((0x0123_4567_89AB_CDEF).to_bytes(8, "little")) == index.flag_offsets(2)[1]
    broadcast = np.broadcast_to(np.zeros((1, 5), np.int64), (3, 5))
    assert nat.cuda_index_steps(which, types, (x, broadcast), (True, 1, None), (DATA, DATA), OUT,
                                steps.c_settings(), index.c_settings()) is None
    assert nat.cuda_index_steps(which, types, (x, broadcast), (False, 1, None), (DATA, DATA), OUT,
                                steps.c_settings(), index.c_settings()) is not None


def test_scatters_along_an_axis_before_the_last_run_as_one_group_launch(monkeypatch):
    """Can fail: scatter_elements along an axis before the last (its members, the positions of one column,
    are not the trailing outer dimensions) is planned through an owner table (a zeroed table, ix_owner, then
    the scatter) rather than as one ix_scatter_group launch over the reordered dimensions, or C and the
    Python route plan it differently."""
    rng = np.random.default_rng(23)
    for shape, axis in (((1, 5, 7, 9), 2), ((4, 5), 0), ((3, 6, 4), 1), ((2, 3, 5, 4), 0)):
        x = rng.standard_normal(shape).astype(np.float32)
        ind = rng.integers(0, shape[axis], shape).astype(np.int64)
        upd = rng.standard_normal(shape).astype(np.float32)
        arrays, args = (x, ind, upd), (axis, True)
        data = [DATA + (1 << 24) * i for i in range(3)]
        plan = python_plan("scatter_elements", arrays, args, monkeypatch)
        want = python_launches(plan, arrays, data, OUT, True)
        got = c_launches("scatter_elements", arrays, args, data, OUT)
        assert got is not None and got[1] == want, (shape, axis)
        assert [n.split("<")[0] for n, *_ in want] == ["strided_copy", "ix_scatter_group"], (shape, axis, want)
        q = index.IndexParams.from_buffer_copy(want[1][1])   # the members (the column) last, in their order
        k = q.outer
        assert q.members == shape[axis] and list(q.dst_strides[:k]).count(0) >= 1 and q.dst_strides[k - 1] == 0


def test_unreadable_settings_are_declined(monkeypatch):
    """Can fail: C plans with a setting it cannot read (not an int, THREADS changed)."""
    nat = cpu_backend._load_native()
    x, ind = np.zeros((4, 5), np.float32), np.zeros((3,), np.int64)
    which, types = index_ops._C_INDEX[ccache.OPS["gather"]]
    for name, value in (("THREADS", 128), ("ITEMS", 0), ("REVERSE_BYTES", 2.5)):
        with monkeypatch.context() as m:
            m.setattr(index, name, value)
            assert nat.cuda_index_steps(which, types, (x, ind), (False, 1, None), (DATA, DATA), OUT,
                                        steps.c_settings(), index.c_settings()) is None, name


# -- the glue (call_cache_index_new on CUDA memory), driven without a GPU ----------------------------------

from tests.runtime.test_cuda_move_spec import glue, stand_in  # noqa: E402,F401 - the fixtures
from tests.runtime.test_cuda_move_cache import FakeArray, fake  # noqa: E402,F401


def glue_cases(rng):
    x = rng.standard_normal((3, 40, 24)).astype(np.float32)
    return [("one_hot", (rng.integers(-3, 9, (6, 5)).astype(np.int64), np.array([0.5, 2.0], np.float32)), (9, -1)),
            ("gather", (x[:, ::-1], rng.integers(0, 40, (7,)).astype(np.int32)[::-1]), (1, None, False)),
            ("reverse_subsequences", (x, rng.integers(0, 41, (3, 1, 24)).astype(np.uint32)), (1,)),
            ("gather_elements", (x, rng.integers(0, 24, (3, 40, 200)).astype(np.int64)), (2, False))]


def index_new_compiled(name, fx, args, kernels, missing=lambda: None):
    """``ccache._index_new`` of ``name`` on stand-in arrays ``fx`` with ``args`` as offered: each kernel the
    glue names (nothing run) is added to ``kernels[0]`` at a stand-in address, after ``missing()``, and the
    call made again; its output."""
    op = ccache.OPS[name]
    which, types = index_ops._C_INDEX[op]
    for _ in range(8):
        out = ccache._index_new(op, which, types, fx, args, ccache.generation(), 0,
                                lambda: (kernels, steps.c_settings(), index.c_settings()))
        if type(out) is not str:
            return out
        missing()
        kernels.setdefault(0, {})[out] = 0x5000 + len(kernels.get(0, {}))
    raise AssertionError("the glue kept naming kernels")


def owner_case(seed):
    """An overwriting scatter_nd whose launches need an owner table (30 slots), as host arrays and as
    stand-in CuPy arrays."""
    rng = np.random.default_rng(seed)
    arrays = (rng.standard_normal((6, 5, 4)).astype(np.float32), rng.integers(0, 6, (9, 2)).astype(np.int64),
              rng.standard_normal((9, 4)).astype(np.float32))
    return arrays, tuple(FakeArray(a.shape, a.dtype, 0x1000_0000 * (i + 1)) for i, a in enumerate(arrays))


@glue
@pytest.mark.parametrize("case", range(4))
def test_the_glue_launches_the_plan_and_records_what_serves_a_repeat(stand_in, monkeypatch, case):
    """A never-seen shape on (stand-in) CuPy arrays: kernels the dict lacks come back by name (nothing
    launched); then the launches are cuda_index_steps' for the output's address, in order, the index kernels'
    parameter blocks holding this call's addresses (source from element 0 of its bound range, output, index
    arrays), on the current stream; the call is recorded, and a repeat (cuda_move) queues the same launches.
    No driver loads here: every C launch fails over to its retry (the move kernels' hook, index.relaunch)."""
    fake_hooks, log = stand_in
    ix_log = []
    monkeypatch.setattr(index, "relaunch", lambda *a: ix_log.append(a))
    name, arrays, args = glue_cases(np.random.default_rng(case))[case]
    origins = [array_layout(a.shape, a.strides, a.itemsize).origin * a.itemsize for a in arrays]
    fx = tuple(FakeArray(a.shape, a.dtype, 0x1000_0000 * (i + 1) + o, a.strides)
               for i, (a, o) in enumerate(zip(arrays, origins)))
    op = ccache.OPS[name]
    kernels: dict = {}
    ccache.clear()

    def nothing_launched():                            # for a missing kernel
        assert not log and not ix_log
    out = index_new_compiled(name, fx, offered(name, args), kernels, nothing_launched)
    assert type(out) is FakeArray
    data = [a.data.ptr for a in fx]
    shape, want = c_launches(name, arrays, args, data, out.data.ptr)
    assert out.shape == shape
    srcs = [p - o for p, o in zip(data, origins)]

    def expected(dst):
        moves, ixs = [], []
        for n, params, grid, smem, s, d, slots, _flags, _scratch, _aux in want:
            if not n.startswith("ix_"):
                moves.append((0, kernels[0][n], grid, smem, params, srcs[s] if s >= 0 else dst, dst, 77))
                continue
            q = index.IndexParams.from_buffer_copy(params)
            q.src, q.dst = srcs[s] if s >= 0 else dst, dst
            for a, slot in enumerate(slots):
                q.idx[a] = srcs[slot]
            ixs.append((0, kernels[0][n], grid, smem, bytes(q), 77))
        return moves, ixs
    assert (log, ix_log) == expected(out.data.ptr)
    assert ccache.info()["entries"] == 1
    log.clear()
    ix_log.clear()
    before = ccache.info()["hits"]
    again = ccache.move(op, fx, *offered(name, args))
    assert ccache.info()["hits"] == before + 1 and type(again) is FakeArray
    assert (log, ix_log) == expected(again.data.ptr)


@glue
def test_the_move_settings_are_read_only_for_a_copy_pass(stand_in, monkeypatch):
    """Can fail: the glue calls the move program's settings function (index_new's conf, as calls.py hands
    steps.c_settings) for a gather, whose one launch is an index kernel's, or does not call it (or declines)
    for an overwriting scatter_nd, whose copy of x is a move-program launch; the index settings are read for
    both."""
    read = {"move": 0, "index": 0}
    monkeypatch.setattr(index, "relaunch", lambda *a: None)          # (no driver: each C launch fails to it)
    monkeypatch.setattr(index, "zero_words", lambda *a: None)

    def reading(which, fn):
        def settings():
            read[which] += 1
            return fn()
        return settings
    conf = (reading("move", steps.c_settings), reading("index", index.c_settings))
    kernels: dict = {0: {}}

    def new(name, fx, args):
        op = ccache.OPS[name]
        which, types = index_ops._C_INDEX[op]
        for _ in range(8):
            out = ccache._index_new(op, which, types, fx, args, ccache.generation(), 0, lambda: (kernels, *conf))
            if type(out) is not str:
                return out
            kernels[0][out] = 0x5000 + len(kernels[0])
        raise AssertionError("the glue kept naming kernels")
    ccache.clear()
    x, ind = FakeArray((4, 5), np.float32, 0x1000_0000), FakeArray((3,), np.int64, 0x2000_0000)
    assert type(new("gather", (x, ind), (False, 1, None))) is FakeArray
    assert read["move"] == 0 and read["index"] >= 1
    _, fx = owner_case(3)
    assert type(new("scatter_nd", fx, (False,))) is FakeArray and read["move"] >= 1


@glue
def test_the_glue_zeroes_an_owner_table_and_gives_it_to_both_launches(stand_in, monkeypatch):
    """An overwriting scatter_nd (an owner table) on (stand-in) CuPy arrays, never seen, then repeated: each
    call allocates a table of the planned 32-bit words after the output, zeroes it on the call's stream
    before the launches (the driver's memset, here without a driver its retry ``index.zero_words``; not the
    framework's ``fill(0)``, a call into Python), and launches ix_owner then the scatter with the table's
    address in their aux field; the output alone is returned."""
    fake_hooks, log = stand_in
    ix_log = []
    monkeypatch.setattr(index, "relaunch", lambda *a: ix_log.append(("launch", *a)))
    monkeypatch.setattr(index, "zero_words", lambda *a: ix_log.append(("zero", *a)))
    arrays, fx = owner_case(3)
    op = ccache.OPS["scatter_nd"]
    ccache.clear()
    out = index_new_compiled("scatter_nd", fx, (False,), {})
    assert type(out) is FakeArray and out.shape == (6, 5, 4)
    shape, want = c_launches("scatter_nd", arrays, (False,), [a.data.ptr for a in fx], out.data.ptr)
    assert [t[0].split("<")[0] for t in want][-2:] == ["ix_owner", "ix_scatter"] and want[-2][8] == 30

    def check(result):
        table = fake_hooks.made[-1]
        assert table is not result and table.shape == (30,) and table.dtype == np.int32 and table.filled is None
        assert ix_log[0] == ("zero", 0, table.data.ptr, 30, fake_hooks.stream)      # before either launch
        blocks = [index.IndexParams.from_buffer_copy(a[5]) for a in ix_log[1:]]
        assert [a[0] for a in ix_log[1:]] == ["launch", "launch"]
        assert len(blocks) == 2 and [b.aux for b in blocks] == [table.data.ptr] * 2
        assert [b.dst for b in blocks] == [result.data.ptr] * 2
    check(out)
    ix_log.clear()
    again = ccache.move(op, fx, False)
    assert type(again) is FakeArray and again.shape == (6, 5, 4)
    check(again)


@glue
def test_the_glue_declines_an_input_moved_while_the_owner_table_was_allocated(stand_in, monkeypatch):
    """The owner table is allocated after the outputs (its size comes from the plan): an input whose data
    moves during that allocation (the key's words unchanged) launches nothing from its old address and
    records nothing, zeroes nothing; the Python route reads it anew."""
    fake_hooks, log = stand_in
    ix_log = []
    monkeypatch.setattr(index, "relaunch", lambda *a: ix_log.append(a))
    monkeypatch.setattr(index, "zero_words", lambda *a: ix_log.append(a))
    arrays, fx = owner_case(4)
    op = ccache.OPS["scatter_nd"]
    which, types = index_ops._C_INDEX[op]
    kernels: dict = {}
    ccache.clear()
    index_new_compiled("scatter_nd", fx, (False,), kernels)            # every kernel compiled
    conf = lambda: (kernels, steps.c_settings(), index.c_settings())  # noqa: E731
    log.clear()
    ix_log.clear()
    ccache.clear()
    x = FakeArray(arrays[0].shape, arrays[0].dtype, 0x1000_0000)
    taken = []

    class SecondAllocation:                              # the output's allocation, then the table's
        def __enter__(self):
            taken.append(1)
            if len(taken) == 2:
                x.data = type(x.data)(0x3000_0000, 0)

        def __exit__(self, *exc):
            return False
    fake_hooks.lock = SecondAllocation()
    got = ccache._index_new(op, which, types, (x, *fx[1:]), (False,), ccache.generation(), 0, conf)
    assert len(taken) == 2 and x.data.ptr == 0x3000_0000                # (moved by the table's allocation)
    assert got is None and not log and not ix_log and ccache.info()["entries"] == 0


@glue
def test_the_glue_declines_checked_calls_it_cannot_check(stand_in):
    """A checked call on (stand-in) CuPy arrays is planned as its unchecked twin (a kernel the dict lacks
    comes back by name); with every kernel there but no way to read the check's flag (no CUDA driver here:
    cuda_launch.c's odml_cuda_check_begin declines) it answers None, nothing launched, nothing recorded,
    and the route checks the indices on the device."""
    fake_hooks, log = stand_in
    x, ind = np.zeros((4, 5), np.float32), np.zeros((3,), np.int64)
    fx = (FakeArray(x.shape, x.dtype, 0x1000_0000), FakeArray(ind.shape, ind.dtype, 0x2000_0000))
    op = ccache.OPS["gather"]
    which, types = index_ops._C_INDEX[op]
    ccache.clear()
    conf = lambda: ({0: {}}, steps.c_settings(), index.c_settings())  # noqa: E731
    name = ccache._index_new(op, which, types, fx, (True, 1, None), ccache.generation(), 0, conf)
    assert type(name) is str and name.startswith("ix_")
    assert ccache._index_new(op, which, types, fx, (False, 1, None), ccache.generation(), 0, conf) == name
    full = lambda: ({0: {name: 0x5000}}, steps.c_settings(), index.c_settings())  # noqa: E731
    assert ccache._index_new(op, which, types, fx, (True, 1, None), ccache.generation(), 0, full) is None
    assert not log and ccache.info()["entries"] == 0


# -- the check's plumbing (cuda_launch.c's flag slots) against a stand-in CUDA driver --------------------

#: A stand-in libcuda: launches are counted (an index kernel's, functions 0x5000..0x5fff, stores 1 at the
#: flag address its block holds at FLAG_AT where SET), host allocations are plain memory at the same
#: address on the "device", a stream is capturing where CAPTURING.
STAND_IN_DRIVER = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
long fake_launches, fake_syncs, fake_flags_seen, fake_set, fake_capturing, fake_flag_at = -1;
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *stream, void **params, void **extra) {
    fake_launches++;
    if ((uintptr_t)f >= 0x5000 && (uintptr_t)f < 0x6000 && fake_flag_at >= 0) {
        uint64_t flag;
        memcpy(&flag, (char *)params[0] + fake_flag_at, 8);
        fake_flags_seen += flag != 0;
        if (flag && fake_set) *(volatile uint32_t *)(uintptr_t)flag = 1;
    }
    return 0;
}
int cuFuncSetAttribute(void *f, int a, int v) { return 0; }
int cuMemHostAlloc(void **p, size_t n, unsigned flags) { *p = malloc(n); return *p && flags == 3 ? 0 : 1; }
int cuMemHostGetDevicePointer_v2(uint64_t *d, void *p, unsigned flags) { *d = (uint64_t)(uintptr_t)p; return 0; }
void (*fake_sync_hook)(void);
int cuStreamSynchronize(void *s) { fake_syncs++; if (fake_sync_hook) fake_sync_hook(); return 0; }
int cuStreamIsCapturing(void *s, int *status) { *status = (int)fake_capturing; return 0; }
"""

STAND_IN_SCRIPT = r"""
import ctypes
import numpy as np
lib = ctypes.CDLL("libcuda.so.1")
from opendml.arrays import index_ops
from opendml.runtime import calls as ccache
from opendml.runtime.cuda import index, steps
from tests.runtime.test_cuda_move_cache import FakeArray, Hooks

def get(name):
    return ctypes.c_long.in_dll(lib, name).value

def put(name, v):
    ctypes.c_long.in_dll(lib, name).value = v

hooks = Hooks()
ccache.register_cupy(FakeArray, hooks.empty, hooks.current_device, hooks.stream_ptr)
ccache.register_cuda_retry(lambda *a: print("retried", a))
put("fake_flag_at", index.flag_offsets(1)[0])
x, ind = FakeArray((4, 5), np.float32, 0x1000_0000), FakeArray((3,), np.int64, 0x2000_0000)
op = ccache.OPS["gather"]
which, types = index_ops._C_INDEX[op]
kernels = {}

def new(check):
    for _ in range(8):
        out = ccache._index_new(op, which, types, (x, ind), (check, 1, None), ccache.generation(), 0,
                                lambda: ({0: kernels}, steps.c_settings(), index.c_settings()))
        if type(out) is not str:
            return out
        kernels[out] = 0x5000 + len(kernels)

def state():
    return get("fake_launches"), get("fake_syncs"), get("fake_flags_seen")

ccache.clear()
print("new", type(new(True)).__name__, state())
print("repeat", type(ccache.move(op, (x, ind), True, 1, None)).__name__, state(), ccache.info()["entries"])
put("fake_set", 1)
print("bad repeat", ccache.move(op, (x, ind), True, 1, None), state())
ccache.clear()
print("bad new", new(True), state(), ccache.info()["entries"])
put("fake_set", 0)
print("unchecked", type(new(False)).__name__, type(ccache.move(op, (x, ind), False, 1, None)).__name__, state())
new(True)
put("fake_capturing", 1)
print("capturing", ccache.move(op, (x, ind), True, 1, None), new(True), state())
"""


def stand_in_run(tmp_path, script):
    """``script``'s output, run against the stand-in driver (built in tmp_path)."""
    source = tmp_path / "cuda.c"
    source.write_text(STAND_IN_DRIVER)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "libcuda.so.1"), str(source)], check=True)
    env = {**os.environ, "LD_LIBRARY_PATH": f"{tmp_path}:{os.environ.get('LD_LIBRARY_PATH', '')}",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                       cwd=str(pathlib.Path(__file__).parents[2]), timeout=120, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.splitlines(), r.stderr


WAIT_SCRIPT = STAND_IN_SCRIPT.split("ccache.clear()")[0] + r"""
seen = []
hook = ctypes.CFUNCTYPE(None)(lambda: seen.append(ccache.info()["entries"]))
ctypes.c_void_p.in_dll(lib, "fake_sync_hook").value = ctypes.cast(hook, ctypes.c_void_p).value
ccache.clear()
print("new", type(new(True)).__name__, seen, ccache.info()["entries"])
put("fake_set", 1)
print("bad repeat", ccache.move(op, (x, ind), True, 1, None), new(True), seen, ccache.info()["entries"])
put("fake_set", 0)
print("repeat", type(ccache.move(op, (x, ind), True, 1, None)).__name__, ccache.info()["entries"])
ccache.clear()
put("fake_set", 1)
print("bad new", new(True), seen[-1], ccache.info()["entries"])
"""


@pytest.mark.skipif(shutil.which("cc") is None or not ccache._HAS, reason="no C compiler, or no call cache")
def test_a_checked_new_shape_waits_after_its_host_work(tmp_path):
    """Can fail: a checked never-seen gather on (stand-in) CuPy arrays waits for its stream before its entry
    is recorded (the host work is done while its kernels run: the stand-in's stream wait sees the entry), or
    keeps the entry where its indices are out of range (None: the route raises, nothing recorded); or a
    repeat whose indices are out of range (its served run None, then the never-seen route, as index_ops.offer
    goes on) drops the entry a good repeat is served from."""
    out, err = stand_in_run(tmp_path, WAIT_SCRIPT)
    assert out == ["new FakeArray [1] 1", "bad repeat None None [1, 1, 1] 1", "repeat FakeArray 1",
                   "bad new None 1 0"], "\n".join(out) + err[-2000:]


@pytest.mark.skipif(shutil.which("cc") is None or not ccache._HAS, reason="no C compiler, or no call cache")
def test_the_check_plumbing_against_a_stand_in_driver(tmp_path):
    """Can fail: a checked gather on (stand-in) CuPy arrays is not launched from C with a flag address in its
    block, or its stream is not waited for, on its first call and its repeat; a set flag does not make either
    answer None (the route raises); its unchecked twin waits for its stream; a capturing stream is launched
    on rather than declined. The driver is a stand-in (cuda_launch.c loads it by name), so no GPU is needed."""
    out, err = stand_in_run(tmp_path, STAND_IN_SCRIPT)
    assert out == [
        "new FakeArray (1, 1, 1)",                # launched with a flag address, its stream waited for
        "repeat FakeArray (2, 2, 2) 1",           # served from the entry: the same
        "bad repeat None (3, 3, 3)",              # the flag set: None (the route raises)
        "bad new None (4, 4, 4) 0",               # a never-seen shape: None, nothing recorded
        "unchecked FakeArray FakeArray (6, 4, 4)",   # no flag, no wait
        "capturing None None (7, 5, 5)",          # declined before any launch (7: the new(True) above)
    ], "\n".join(out) + err[-2000:]
