"""The compiled move kernel (runtime/cpu/move.c, convert.h) against the NumPy
path (runtime/cpu/numpy_kernels.py, the reference): the same bytes for every
pass of a move program, i.e. CAST's conversions for every pair of the 11 types
(NaN payloads, infinities, out-of-range values, -0.0, float16 rounding ties
and subnormals), the index maps (CLAMP, REFLECT, SYMMETRIC, WRAP) on any axis
with any strides, scale/bias, fills, and the split of long rows over threads;
and malformed parameter blocks refused with an error, never a crash."""
import ctypes
import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import opendml as dml
from opendml.model.data_type import DataType
from opendml.plan import (MAP_CLAMP, MAP_REFLECT, MAP_SYMMETRIC, MAP_WRAP, AxisMap, Copy, Fill, MovePlan)
from opendml.runtime.cpu.backend import WORDS, CpuBackend, MoveParams, canonical_move_pass
from ..conftest import n_examples

pytestmark = pytest.mark.skipif(not dml.config().compiled_available, reason="compiled CPU kernels not built")

TYPES = [t for t in DataType if 1 <= t.value <= 11]
MODES = [MAP_CLAMP, MAP_REFLECT, MAP_SYMMETRIC, MAP_WRAP]
SETTINGS = settings(max_examples=n_examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def backends():
    cfg = dml.config()
    return {"numpy": CpuBackend(dataclasses.replace(cfg, cpu_kernels="numpy")),
            "compiled": CpuBackend(dataclasses.replace(cfg, cpu_kernels="compiled", threads=1)),
            "threads": CpuBackend(dataclasses.replace(cfg, cpu_kernels="compiled", threads=3,
                                                      thread_grain_bytes=1))}


BACKENDS = backends()


def run_plan(plan: MovePlan, inputs, out_counts, backend, garbage=0xA5):
    """Run ``plan`` from word arrays ``inputs`` into fresh outputs of
    ``out_counts`` elements, pre-filled with ``garbage`` bytes (so an
    element no pass writes shows)."""
    dsts = [np.full(n * DataType(t).size, garbage, np.uint8).view(WORDS[DataType(t).size])
            for n, t in zip(out_counts, plan.out_types)]
    srcs = [x.view(WORDS[x.itemsize]).reshape(-1) for x in inputs]
    BACKENDS[backend].prepare(plan, srcs, dsts)()
    return dsts


def same_on_every_path(plan, inputs, out_counts):
    ref = run_plan(plan, inputs, out_counts, "numpy")
    for name in ("compiled", "threads"):
        got = run_plan(plan, inputs, out_counts, name)
        for r, g in zip(ref, got):
            assert r.dtype == g.dtype
            if not np.array_equal(r, g):
                bad = np.flatnonzero(r != g)[:8]
                pytest.fail(f"{name} differs from NumPy at {bad.tolist()}: numpy {r[bad].tolist()} "
                            f"vs {g[bad].tolist()} (plan {plan})")
    return ref


def test_param_struct_matches_the_c_declaration():
    from opendml.runtime.cpu import _native
    assert _native.param_sizes()["odml_cpu_move_params"] == ctypes.sizeof(MoveParams) == 848


# -- conversions -----------------------------------------------------------------

def special_values(t: DataType) -> np.ndarray:
    """Bit patterns of ``t`` that matter for CAST, plus random bits."""
    dt = t.numpy_dtype
    rng = np.random.default_rng(t.value)
    word = WORDS[dt.itemsize]
    rand = rng.integers(0, np.iinfo(word).max, 512, dtype=word, endpoint=True).view(dt)
    if dt.kind == "f":
        fi = np.finfo(dt)
        vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 127.5, 128.0, -128.5, -129.0, 255.5, 256.0,
                32767.9, 32768.0, -32768.9, -32769.0, 65535.5, 65536.0, 65504.0, 65519.99, 65520.0, -65520.0,
                2.0 ** 31, -2.0 ** 31, -2.0 ** 31 - 1, 2.0 ** 32, 2.0 ** 32 - 1, 2.0 ** 63, -2.0 ** 63, 2.0 ** 64,
                -2.0 ** 64, 1e30, -1e30, 1e300, -1e300, np.inf, -np.inf, np.nan, -np.nan, float(fi.max),
                float(fi.min), float(fi.tiny), float(fi.smallest_subnormal), 6.1e-5, 5.96e-8, 2.98e-8, 2.99e-8,
                1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 2049.0, 2051.0, 4097.0, 1e-7, 3e-5]
        with np.errstate(all="ignore"):
            base = np.array(vals, np.float64).astype(dt)
        nans = {2: [0x7C01, 0x7D55, 0xFC01, 0x7E00, 0x7FFF, 0xFE01],
                4: [0x7F800001, 0x7FC00001, 0x7F802000, 0xFF800100, 0x7FFFFFFF, 0x7FA00000],
                8: [0x7FF0000000000001, 0x7FF8000000000001, 0x7FF0040000000000, 0xFFF0000000100000,
                    0x7FF4000000000000]}[dt.itemsize]
        # values just off float16 rounding ties, in each type
        ties = (np.arange(-3000, 3000, dtype=np.float64) * 2.0 ** -11 + 1.0)
        with np.errstate(all="ignore"):
            ties = ties.astype(dt)
        return np.concatenate([base, np.array(nans, word).view(dt), ties, rand])
    info = np.iinfo(dt)
    edges = [info.min, info.max, 0, 1, -1 if info.min < 0 else 2, 127, 128, 255, 256, 32767, 32768, 65504,
             65519, 65520, 65535, 65536, 2 ** 24 + 1, 2 ** 31 - 1, 2 ** 31, 2 ** 53 + 1, 2 ** 63 - 1]
    edges = [v for v in edges if info.min <= v <= info.max]
    return np.concatenate([np.array(edges, dt), rand])


@pytest.mark.parametrize("src", TYPES, ids=lambda t: t.name)
def test_every_conversion_pair_is_bit_identical(src):
    x = special_values(src)
    n = x.size
    for dst in TYPES:
        plan = MovePlan(in_types=(src.value,), out_types=(dst.value,),
                        passes=(Copy(0, 0, (n,), 0, (1,), 0, (1,)),))
        out = same_on_every_path(plan, [x], [n])[0].view(dst.numpy_dtype)
        # and against CAST's rules stated independently, for the floats to integers
        if src.numpy_dtype.kind == "f" and dst.numpy_dtype.kind in "iu":
            info = np.iinfo(dst.numpy_dtype)
            with np.errstate(all="ignore"):
                t = np.trunc(x.astype(np.float64))
            want = [0 if np.isnan(v) else int(info.max) if v >= float(info.max) + 1 else
                    int(info.min) if v < float(info.min) else int(v) for v in t.tolist()]
            assert out.tolist() == want


@pytest.mark.parametrize("src", TYPES, ids=lambda t: t.name)
def test_conversions_strided_and_reversed(src):
    """Strided and negative-stride sources, strided destinations."""
    x = special_values(src)[:300]
    for dst in TYPES:
        # source read backwards with stride -2 (150 elements), destination every third element
        plan = MovePlan(in_types=(src.value,), out_types=(dst.value,),
                        passes=(Copy(0, 0, (150,), 299, (-2,), 0, (3,)), Fill(0, (2, 150), 1, (1, 3), 7)))
        same_on_every_path(plan, [x], [450])


def test_float16_rounding_matches_numpy_exhaustively():
    """Every float16 bit pattern through float32 and float64 and back, and
    every float32 near a float16 rounding boundary."""
    h = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    for wide in (DataType.FLOAT32, DataType.FLOAT64):
        for a, b in ((DataType.FLOAT16, wide), (wide, DataType.FLOAT16)):
            x = h if a == DataType.FLOAT16 else h.astype(wide.numpy_dtype)
            plan = MovePlan(in_types=(a.value,), out_types=(b.value,),
                            passes=(Copy(0, 0, (x.size,), 0, (1,), 0, (1,)),))
            same_on_every_path(plan, [x], [x.size])
    # float32/float64 halfway between neighbouring float16 values, and one ulp either side
    finite = h[np.isfinite(h)].astype(np.float64)
    finite = np.unique(finite)
    mid = (finite[:-1] + finite[1:]) / 2
    for wide in (np.float32, np.float64):
        m = mid.astype(wide)
        x = np.concatenate([m, np.nextafter(m, wide(np.inf)), np.nextafter(m, wide(-np.inf))])
        t = DataType.FLOAT32 if wide is np.float32 else DataType.FLOAT64
        plan = MovePlan(in_types=(t.value,), out_types=(DataType.FLOAT16.value,),
                        passes=(Copy(0, 0, (x.size,), 0, (1,), 0, (1,)),))
        got = same_on_every_path(plan, [x], [x.size])[0]
        with np.errstate(all="ignore"):
            assert np.array_equal(got, x.astype(np.float16).view(np.uint16))


# -- index maps --------------------------------------------------------------------

@st.composite
def mapped_copies(draw):
    """A Copy pass with random maps on random axes, over a source of random
    (possibly negative or padded) strides, into a packed destination, of a
    random type pair; plus the source array."""
    rank = draw(st.integers(1, 4))
    src_sizes = draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank))
    sizes, maps = [], []
    for n in src_sizes:
        mode = draw(st.sampled_from([None] + MODES))
        if mode is None:
            sizes.append(n)
            maps.append(None)
        else:
            sizes.append(draw(st.integers(1, 13)))
            maps.append(AxisMap(mode, draw(st.integers(-12, 12)), n))
    src_t = draw(st.sampled_from(TYPES))
    dst_t = draw(st.sampled_from(TYPES)) if draw(st.booleans()) else src_t
    # source layout: per axis a stride multiplier and a sign
    mult = draw(st.lists(st.integers(1, 2), min_size=rank, max_size=rank))
    neg = draw(st.lists(st.booleans(), min_size=rank, max_size=rank))
    strides, step = [], 1
    for n, m in zip(reversed(src_sizes), reversed(mult)):
        strides.append(step * m)
        step *= n * m
    strides = strides[::-1]
    total = step
    origin = sum((n - 1) * s for n, s, g in zip(src_sizes, strides, neg) if g)
    signed = tuple(-s if g else s for s, g in zip(strides, neg))
    # destination: packed, possibly permuted axes
    perm = draw(st.permutations(range(rank)))
    dst_strides = [0] * rank
    acc = 1
    for k in reversed(perm):
        dst_strides[k] = acc
        acc *= sizes[k]
    sb = None
    if src_t.numpy_dtype.kind == "f" and draw(st.booleans()):
        sb = (draw(st.sampled_from([1.0, -2.0, 0.5, 3.25, np.inf, np.nan])), draw(st.sampled_from([0.0, 1.5, -7.0])))
    copy = Copy(0, 0, tuple(sizes), origin, signed, 0, tuple(dst_strides),
                maps=tuple(maps) if any(m is not None for m in maps) else None, scale_bias=sb)
    seed = draw(st.integers(0, 2 ** 32 - 1))
    word = WORDS[src_t.size]
    x = np.random.default_rng(seed).integers(0, np.iinfo(word).max, total, dtype=word, endpoint=True)
    if src_t.numpy_dtype.kind == "f" and draw(st.booleans()):
        x = (np.random.default_rng(seed).standard_normal(total) * 300).astype(src_t.numpy_dtype).view(word)
    return MovePlan(in_types=(src_t.value,), out_types=(dst_t.value,), passes=(copy,)), x, acc


@SETTINGS
@given(mapped_copies())
def test_mapped_copies_match_numpy(case):
    plan, x, count = case
    out = same_on_every_path(plan, [x], [count])[0]
    # and against AxisMap.source element by element (no conversion, no scale/bias)
    p = plan.passes[0]
    if plan.in_types == plan.out_types and p.scale_bias is None:
        maps = p.maps or (None,) * len(p.sizes)
        for d in np.ndindex(*p.sizes):
            s = p.src_offset + sum((m.source(i) if m else i) * t for i, m, t in zip(d, maps, p.src_strides))
            o = sum(i * t for i, t in zip(d, p.dst_strides))
            assert out[o] == x[s]


def test_pad_modes_on_every_axis_of_a_large_array():
    """Borders of every mode around a 2-D array large enough to split over
    threads, through the array API's pad, on both paths."""
    x = np.arange(300 * 257, dtype=np.float32).reshape(300, 257)
    for mode in ("constant", "edge", "reflect", "symmetric", "wrap"):
        with dml.configure(cpu_kernels="numpy"):
            ref = dml.pad(x, (3, 70), (5, 300), mode=mode, value=-1.5)
        with dml.configure(cpu_kernels="compiled", threads=3, thread_grain_bytes=1):
            got = dml.pad(x, (3, 70), (5, 300), mode=mode, value=-1.5)
        np.testing.assert_array_equal(ref.view(np.uint32), got.view(np.uint32))
        if mode == "constant":
            np.testing.assert_array_equal(got, np.pad(x, ((3, 5), (70, 300)), constant_values=-1.5))
        elif mode in ("edge", "wrap"):
            np.testing.assert_array_equal(got, np.pad(x, ((3, 5), (70, 300)), mode=mode))


def test_one_long_row_splits_over_threads_with_conversion_and_maps():
    """A single row (nothing to split but the row itself) of every kind of
    pass: the threaded kernel cuts it in chunks; the bytes are the same."""
    n = 100_003
    x = (np.arange(n, dtype=np.float64) * 0.37 - 9000.0)
    passes = (Copy(0, 0, (n,), 0, (1,), 0, (1,)),                                     # float64 -> int16
              Copy(0, 1, (n + 5000,), 0, (1,), 0, (1,), maps=(AxisMap(MAP_REFLECT, 2500, n),)),
              Fill(2, (n,), 0, (1,), 3.75),
              Copy(0, 2, (n // 2,), n - 1, (-2,), 0, (2,), scale_bias=(0.5, -1.0)))
    plan = MovePlan(in_types=(DataType.FLOAT64.value,),
                    out_types=(DataType.INT16.value, DataType.FLOAT64.value, DataType.FLOAT16.value), passes=passes)
    same_on_every_path(plan, [x], [n, n + 5000, n])


# -- scale/bias and fills ------------------------------------------------------------

@pytest.mark.parametrize("t", [DataType.FLOAT16, DataType.FLOAT32, DataType.FLOAT64], ids=lambda t: t.name)
def test_scale_bias_is_bit_identical(t):
    x = special_values(t)
    for scale, bias in ((1.0, 0.0), (2.0, 1.0), (-0.1, 3.3), (1e30, -1e30), (np.nan, 0.0), (0.0, np.inf),
                        (3.4e38, 3.4e38), (-0.0, -0.0)):
        plan = MovePlan(in_types=(t.value,), out_types=(t.value,),
                        passes=(Copy(0, 0, (x.size,), 0, (1,), 0, (1,), scale_bias=(scale, bias)),))
        same_on_every_path(plan, [x], [x.size])


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
def test_fills_write_the_converted_value(t):
    values = [0, 1, -1, 255, 256, -129, 70000, 2 ** 40, -2 ** 40, 0.5, -0.5, -1.5, 1e10, -1e10, float("nan"),
              float("inf"), float("-inf"), -0.0, 65520.0, 3.4e38]
    for v in values:
        plan = MovePlan(in_types=(t.value,), out_types=(t.value,),
                        passes=(Fill(0, (3, 7), 2, (9, 1), v), Fill(0, (2,), 0, (1,), 0), Fill(0, (2, 2), 9, (9, 7), 0),
                                Fill(0, (3, 1), 27, (1, 1), 5)))
        same_on_every_path(plan, [np.zeros(1, t.numpy_dtype)], [30])


def test_canonical_form_folds_size_one_mapped_axes_and_merges():
    p = Copy(0, 0, (1, 4, 3, 2), 5, (7, 6, 2, 1), 0, (24, 6, 2, 1),
             maps=(AxisMap(MAP_WRAP, 2, 3), None, None, None))
    sizes, ss, ds, maps, off = canonical_move_pass(p)
    # the size-1 wrap axis reads source index (0 - 2) mod 3 = 1; the last three axes merge into one
    assert off == 5 + 7 and sizes == (24,) and ss == (1,) and ds == (1,) and maps == (None,)


# -- bad parameter blocks -------------------------------------------------------------

def test_malformed_parameter_blocks_raise():
    from opendml.runtime.cpu import _native
    buf = np.zeros(64, np.uint8)
    addr = buf.ctypes.data

    def call(**fields):
        p = MoveParams(kind=0, src_type=1, dst_type=1, rank=1)
        p.sizes[0] = 1
        for k, v in fields.items():
            if isinstance(v, tuple):
                getattr(p, k)[0] = v[0]
            else:
                setattr(p, k, v)
        _native.move(addr, addr, bytes(p), 2)

    call()                                      # the well-formed block runs
    for bad in ({"rank": 0}, {"rank": 17}, {"kind": 2}, {"src_type": 0}, {"dst_type": 12}, {"src_type": 13},
                {"map_mode": (5,)}, {"map_mode": (-1,)}, {"sizes": (-1,)}, {"sizes": ((1 << 63) - 1,)},
                {"dst_strides": (-1,)}, {"src_offset": 1 << 61}, {"dst_offset": -1},
                {"map_mode": (1,), "map_size": (0,)}):
        with pytest.raises(ValueError, match="move: "):
            call(**bad)
    with pytest.raises(ValueError, match="848 bytes|bytes"):
        _native.move(addr, addr, b"\0" * 10, 1)


class _Blob:
    """Stands in for the CPU backend while a pass's parameters are built:
    ``_launch`` returns the parameter bytes (as planner._Capture does)."""

    def __init__(self, native):
        self._native = native

    def _launch(self, kernel, params, src, dst, nbytes):
        return bytes(params)


def _native_module():
    from opendml.runtime.cpu.backend import _load_native
    native = _load_native()
    if native is None or not hasattr(native, "move_params"):
        pytest.skip("the compiled extension (with move_params) is not built")
    return native


_MAP = st.one_of(st.none(), st.builds(AxisMap, st.sampled_from([MAP_CLAMP, MAP_REFLECT, MAP_SYMMETRIC, MAP_WRAP]),
                                      st.integers(-9, 9), st.integers(1, 6)))


@st.composite
def _move_pass(draw):
    rank = draw(st.integers(1, 20))
    sizes = tuple(draw(st.lists(st.sampled_from([0, 1, 1, 2, 3, 4, 5, 8, 17]), min_size=rank, max_size=rank)))
    dst_strides = tuple(draw(st.lists(st.sampled_from([0, 1, 2, 3, 4, 8, 12, 24, 96, 1 << 40]), min_size=rank,
                                      max_size=rank)))
    if draw(st.booleans()):
        value = draw(st.one_of(st.integers(-300, 300), st.floats(allow_nan=True, width=64), st.just(-0.0)))
        return Fill(0, sizes, draw(st.integers(0, 99)), dst_strides, value)
    src_strides = tuple(draw(st.lists(st.sampled_from([0, 1, -1, 2, -3, 4, 8, -12, 24, 1 << 61]), min_size=rank,
                                      max_size=rank)))
    maps = draw(st.one_of(st.none(), st.lists(_MAP, min_size=rank, max_size=rank).map(tuple)))
    sb = draw(st.one_of(st.none(), st.tuples(st.floats(width=32), st.floats(width=32))))
    return Copy(0, 0, sizes, draw(st.integers(-99, 99)), src_strides, draw(st.integers(0, 99)), dst_strides, maps, sb)


@settings(max_examples=n_examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=_move_pass(), types=st.tuples(st.integers(1, 11), st.integers(1, 11)))
def test_move_params_in_c_are_the_python_bytes(p, types):
    """move_params (move_params.c), the parameters of a never-seen shape's
    passes, gives MoveParams' bytes for canonical_move_pass's form of any pass
    (or None, and the Python route builds them: more than 16 dimensions once
    canonical, a product beyond 64 bits)."""
    native = _native_module()
    plan = MovePlan((types[0],), (types[1],), (p,))
    words = [np.zeros(4, WORDS[DataType(t).numpy_dtype.itemsize]) for t in types]
    python = CpuBackend._python_move_pass(_Blob(native), plan, p, [words[0]], [words[1]])
    c = CpuBackend._native_move_pass(_Blob(native), plan, p, [words[0]], [words[1]])
    assert c == python


def test_move_params_in_c_take_the_common_passes():
    """C packs an ordinary copy (with a map and scale/bias) and fill itself (not None), and declines
    what it cannot vouch for (a NumPy integer size), which the Python route then builds."""
    native = _native_module()
    copy = native.move_params(0, 1, 2, 5, 0, (2, 1, 3), (3, 7, 1), (3, 3, 1), (None, (MAP_REFLECT, 1, 2), None),
                              (2.0, 0.5), 0)
    fill = native.move_params(1, 0, 1, 0, 4, (2, 3), None, (3, 1), None, None, 0x3F800000)
    assert isinstance(copy, bytes) and isinstance(fill, bytes)
    p, f = MoveParams.from_buffer_copy(copy), MoveParams.from_buffer_copy(fill)
    assert (p.rank, list(p.sizes[:1]), p.src_offset, p.has_scale_bias, p.scale) == (1, [6], 5 + 7 * 1, 1, 2.0)
    assert (f.kind, f.rank, list(f.sizes[:1]), f.fill_bits, f.dst_offset) == (1, 1, [6], 0x3F800000, 4)
    assert native.move_params(0, 1, 1, 0, 0, (np.int64(2),), (1,), (1,), None, None, 0) is None
