"""DIAGONAL_MATRIX and DIAGONAL_MATRIX1: every example of both pages (the
erratum of DIAGONAL_MATRIX1's first one explicitly), the fields' rules and
the support tables, the lowering, a Hypothesis property of
``dml.diagonal_matrix`` against a NumPy reference built from ``np.triu``
masks, and the framework routes (PyTorch autograd through the declared
adjoint, JAX, Dask)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import opendml as dml
from opendml import jsonform
from opendml.ops import OPERATORS
from opendml.ops.diagonal_matrix import _band
from opendml.plan import Copy, Fill
from .conftest import n_examples

DM, DM1 = OPERATORS["DIAGONAL_MATRIX"], OPERATORS["DIAGONAL_MATRIX1"]
T = dml.TensorDesc
INT32_MIN = -2 ** 31
TYPES = [np.float32, np.float16, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
         np.uint32, np.uint64]
SETTINGS = settings(max_examples=n_examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                         HealthCheck.too_slow])
#: The input of DIAGONAL_MATRIX1's examples 3 and 4, as the page prints it.
PAGE_INPUT = np.array([[4, 7, 3, 7, 9], [1, 2, 8, 6, 9], [9, 4, 1, 8, 7], [4, 3, 4, 2, 4]], np.float32)


def run(desc, *xs, backend="cpu"):
    return dml.Device(backend, feature_level="6_4").run(desc, *xs)


# -- the pages' examples, with the outputs as the pages print them -------------------------------------------

@pytest.mark.parametrize("offset, sizes, printed", [
    (0, (3, 3), [[1, 0, 0], [0, 1, 0], [0, 0, 1]]),                        # Default identity matrix
    (1, (3, 3), [[0, 1, 0], [0, 0, 1], [0, 0, 0]]),                        # Shift ones right/up
    (-1, (3, 2), [[0, 0], [1, 0], [0, 1]]),                                # Shift ones left/down
    (-3, (3, 2), [[0, 0], [0, 0], [0, 0]]),                                # ... so far that all become zeroes
])
def test_diagonal_matrix_page_examples(backend, offset, sizes, printed):
    desc = DM(T("FLOAT32", (1, 1) + sizes), offset, 1.0)
    assert np.array_equal(run(desc, backend=backend), np.array(printed, np.float32)[None, None])


@pytest.mark.parametrize("given, value, begin, end, printed", [
    (None, 7, 0, 3, [[7, 7, 7, 0, 0], [0, 7, 7, 7, 0], [0, 0, 7, 7, 7], [0, 0, 0, 7, 7]]),
    (PAGE_INPUT, 0, INT32_MIN, 1, [[0, 7, 3, 7, 9], [0, 0, 8, 6, 9], [0, 0, 0, 8, 7], [0, 0, 0, 0, 4]]),
    (PAGE_INPUT, 0, 1, 0, [[4, 0, 0, 0, 0], [0, 2, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 2, 0]]),
])
def test_diagonal_matrix1_page_examples(backend, given, value, begin, end, printed):
    inp = None if given is None else T("FLOAT32", [4, 5])
    desc = DM1(inp, T("FLOAT32", [4, 5]), "FLOAT32", value, begin, end)
    xs = () if given is None else (given,)
    assert np.array_equal(run(desc, *xs, backend=backend), np.array(printed, np.float32))


def test_diagonal_matrix1_identity_example_erratum():
    """The page's "Default identity matrix" gives Value 7 but prints 1s: by
    the pseudocode Value 7 puts 7s on the diagonal, and the printed 1s are
    Value 1's output (and DIAGONAL_MATRIX's with Offset 0)."""
    printed = np.eye(4, 5, dtype=np.float32)
    got = run(DM1(None, T("FLOAT32", [4, 5]), "FLOAT32", 7, 0, 1))
    assert np.array_equal(got, 7 * printed) and not np.array_equal(got, printed)
    assert np.array_equal(run(DM1(None, T("FLOAT32", [4, 5]), "FLOAT32", 1, 0, 1)), printed)
    assert np.array_equal(run(DM(T("FLOAT32", [4, 5]), 0, 1.0)), printed)
    from opendml.cli import examples
    ex = examples()["diagonal-matrix1-identity"]
    assert ex["Value"] == 7 and np.array_equal(ex["ExpectedOutput"], 7 * printed) and "erratum" in ex["Title"]


def test_remarks_equivalence_diagonal_matrix1_with_offset_range():
    """DIAGONAL_MATRIX1 with [Offset, Offset + 1) is DIAGONAL_MATRIX (the page's remarks)."""
    for offset in range(-5, 6):
        a = run(DM(T("INT16", [2, 3, 4]), offset, 3.0))
        b = run(DM1(None, T("INT16", [2, 3, 4]), "INT16", 3, offset, offset + 1))
        assert np.array_equal(a, b) and a.dtype == np.int16


# -- fields, rules and support tables ------------------------------------------------------------------------

@pytest.mark.parametrize("make, message", [
    (lambda: DM(T("FLOAT32", [5]), 0, 1.0),
     r"DIAGONAL_MATRIX: OutputTensor.DimensionCount must be at least 2 (the matrix' height and width); got 1 "
     r"(Sizes [5])"),
    (lambda: DM("x", 0, 1.0), "DIAGONAL_MATRIX: OutputTensor must be a TensorDesc; got str"),
    (lambda: DM(T("FLOAT32", [2, 2]), 2 ** 31, 1.0),
     "DIAGONAL_MATRIX: Offset must be in [-2147483648, 2147483647] (an INT); got 2147483648"),
    (lambda: DM(T("FLOAT32", [2, 2]), 1.5, 1.0), "DIAGONAL_MATRIX: Offset must be an integer"),
    (lambda: DM(T("FLOAT32", [2, 2]), 0, 1e39),
     "DIAGONAL_MATRIX: Value must fit a FLOAT (float32, magnitude <= 3.40282e+38); got 1e+39"),
    (lambda: DM(T("FLOAT32", [2, 2]), 0, "1"), "DIAGONAL_MATRIX: Value must be a number; got '1'"),
    (lambda: DM1(None, None, "FLOAT32", 1, 0, 1),
     "DIAGONAL_MATRIX1: OutputTensor is required when InputTensor is None (its sizes cannot be derived)"),
    (lambda: DM1(T("FLOAT32", [2, 3]), T("FLOAT16", [2, 3]), "FLOAT32", 1, 0, 1),
     "DIAGONAL_MATRIX1: OutputTensor.DataType must equal InputTensor.DataType; got FLOAT16 != FLOAT32"),
    (lambda: DM1(T("FLOAT32", [2, 3]), T("FLOAT32", [1, 2, 3]), "FLOAT32", 1, 0, 1),
     "DIAGONAL_MATRIX1: OutputTensor.DimensionCount must equal InputTensor.DimensionCount; got 3 != 2"),
    (lambda: DM1(T("FLOAT32", [2, 3]), T("FLOAT32", [2, 4]), "FLOAT32", 1, 0, 1),
     "DIAGONAL_MATRIX1: OutputTensor.Sizes[1] must be InputTensor.Sizes = 3; got 4 (Sizes [2, 4], expected "
     "[2, 3])"),
    (lambda: DM1(None, T("INT32", [2, 3]), "FLOAT32", 1, 0, 1),
     "DIAGONAL_MATRIX1: ValueDataType must equal OutputTensor.DataType; got FLOAT32 != INT32"),
    (lambda: DM1(None, T("UINT8", [2, 3]), "UINT8", 256, 0, 1),
     "DIAGONAL_MATRIX1: Value must be in [0, 255] for ValueDataType UINT8; got 256"),
    (lambda: DM1(None, T("INT8", [2, 3]), "INT8", 1.5, 0, 1),
     "DIAGONAL_MATRIX1: Value must be an integer for ValueDataType INT8; got 1.5"),
    (lambda: DM1(None, T("FLOAT16", [2, 3]), "FLOAT16", 1e5, 0, 1),
     "DIAGONAL_MATRIX1: Value must fit ValueDataType FLOAT16 (magnitude <= 65504); got 100000.0"),
    (lambda: DM1(None, T("FLOAT32", [2, 3]), "FLOAT32", 1, INT32_MIN - 1, 1),
     "DIAGONAL_MATRIX1: DiagonalFillBegin must be in [-2147483648, 2147483647] (an INT); got -2147483649"),
    (lambda: DM1(None, T("FLOAT32", [2, 3]), "FLOAT32", 1, 0, 2 ** 31),
     "DIAGONAL_MATRIX1: DiagonalFillEnd must be in [-2147483648, 2147483647] (an INT); got 2147483648"),
    (lambda: DM1(3, T("FLOAT32", [2, 3]), "FLOAT32", 1, 0, 1),
     "DIAGONAL_MATRIX1: InputTensor must be a TensorDesc or None; got int"),
])
def test_rules_name_operator_field_rule_and_values(make, message):
    with pytest.raises(dml.ValidationError, match="^" + re.escape(message)):
        make()


def test_support_tables_per_feature_level():
    f32_4d, i32_4d, f32_2d, f64_4d = (T("FLOAT32", [1, 1, 2, 2]), T("INT32", [1, 1, 2, 2]), T("FLOAT32", [2, 2]),
                                      T("FLOAT64", [1, 1, 2, 2]))
    DM(f32_4d).validate("2_0")
    with pytest.raises(dml.UnsupportedError, match=r"OutputTensor.DataType INT32 is not supported at feature level "
                                                   r"2_0 .*needs feature level 2_1"):
        DM(i32_4d).validate("2_0")
    DM(i32_4d).validate("2_1")
    for level in ("2_1", "3_0", "3_1"):       # 4 dimensions before 4_0
        with pytest.raises(dml.UnsupportedError, match=r"OutputTensor.DimensionCount must be in \[4, 4\]"):
            DM(f32_2d).validate(level)
    DM(f32_2d).validate("4_0")
    with pytest.raises(dml.UnsupportedError, match=r"FLOAT64 is not supported at feature level 5_0 .*5_1"):
        DM(f64_4d).validate("5_0")
    DM(f64_4d).validate("5_1")
    with pytest.raises(dml.UnsupportedError, match=r"DimensionCount must be in \[2, 4\] at feature level 6_4; got 5"):
        DM(T("FLOAT32", [1, 1, 1, 2, 2])).validate()
    assert DM(f32_4d).lowest_feature_level() == dml.FeatureLevel.FL_2_0
    assert DM(f32_2d).lowest_feature_level() == dml.FeatureLevel.FL_4_0
    with pytest.raises(dml.UnsupportedError, match="DIAGONAL_MATRIX1: the operator was introduced in feature level "
                                                   "5_1; got feature level 5_0"):
        DM1(None, f64_4d, "FLOAT64").validate("5_0")
    for t in TYPES:
        dt = dml.DataType.parse(np.dtype(t).name.upper())
        DM1(T(dt, [2, 3]), None, dt, 0).validate("5_1")


def test_json_form_defaults_round_trip_and_optional_input():
    d = jsonform.from_json({"Operator": "DIAGONAL_MATRIX1", "OutputTensor": {"DataType": "INT64", "Sizes": [3, 3]}})
    assert d.input_tensor is None and d.inputs == () and d.value_data_type == dml.DataType.INT64
    assert (d.value, d.diagonal_fill_begin, d.diagonal_fill_end) == (1, 0, 1)
    assert "InputTensor" not in jsonform.to_json(d) and jsonform.from_json(jsonform.to_json(d)) == d
    assert jsonform.from_json({**jsonform.to_json(d), "InputTensor": None}) == d
    d = jsonform.from_json({"Operator": "DML_OPERATOR_DIAGONAL_MATRIX1", "InputTensor": {"DataType": "UINT8",
                            "Sizes": [2, 4]}, "Value": {"UInt8": 9}, "DiagonalFillBegin": 2, "DiagonalFillEnd": -1})
    assert d.output_tensor == T("UINT8", [2, 4]) and jsonform.from_json(jsonform.to_json(d)) == d
    d = jsonform.from_json({"Operator": "DIAGONAL_MATRIX", "OutputTensor": {"DataType": "FLOAT16", "Sizes": [3, 2]}})
    assert (d.offset, d.value) == (0, 1.0) and jsonform.from_json(jsonform.to_json(d)) == d
    with pytest.raises(dml.ValidationError, match=r"^\$.OutputTensor: missing required field$"):
        jsonform.from_json({"Operator": "DIAGONAL_MATRIX"})


def test_integer_value_of_diagonal_matrix_follows_cast():
    """The FLOAT Value on an integer output: truncated toward zero (the
    page's 10.6 -> 10), saturated, NaN -> 0."""
    for value, want in ((10.6, 10), (-2.7, -2), (300.0, 127), (-1e9, -128), (float("nan"), 0)):
        got = run(DM(T("INT8", [2, 2]), 0, value))
        assert np.array_equal(got, np.array([[want, 0], [0, want]], np.int8)), value


# -- the lowering ------------------------------------------------------------------------------------------

def _cells(runs, h, w):
    out = np.zeros((h, w), np.int64)
    for y, x, n, units in runs:
        idx = [(y, x)]
        for size, (dy, dx) in zip(reversed(n), reversed(units)):   # innermost first
            idx = [(a + k * dy, b + k * dx) for k in range(size) for a, b in idx]
        for a, b in idx:
            out[a, b] += 1
    return out


@given(st.integers(1, 9), st.integers(1, 9), st.integers(-12, 12), st.integers(-12, 12))
@settings(max_examples=n_examples(300), deadline=None)
def test_band_runs_cover_the_band_once(h, w, lo, hi):
    runs = _band(lo, hi, h, w)
    mask = np.triu(np.ones((h, w), bool), lo) & ~np.triu(np.ones((h, w), bool), hi)
    assert np.array_equal(_cells(runs, h, w), mask.astype(np.int64))
    assert len(runs) <= max(0, min(hi, w) - max(lo, 1 - h))           # never more runs than diagonals


def test_lowering_is_a_copy_or_fill_then_fills():
    plan = DM1(T("FLOAT32", [2, 4, 5]), None, "FLOAT32", 3.0, 1, -1).lower()
    assert isinstance(plan.passes[0], Copy) and all(isinstance(p, Fill) for p in plan.passes[1:])
    assert all(p.value == 3.0 and p.sizes[0] == 2 for p in plan.passes[1:])
    plan = DM(T("INT32", [6, 6]), 2, 5.0).lower()
    assert plan.in_types == () and isinstance(plan.passes[0], Fill) and plan.passes[0].value == 0
    assert [p.value for p in plan.passes[1:]] == [5] and len(plan.passes) == 2
    # a wide band on a tall matrix: row runs (and one parallelogram), not one pass per diagonal
    plan = DM1(None, T("FLOAT32", [100, 40]), "FLOAT32", 1.0, -50, 30).lower()
    assert len(plan.passes) - 1 < 80


def test_strided_output_and_input_layouts():
    """Tensors with their own strides (gaps) through the DirectML flow: the
    output read through its strides, the input read through its."""
    x = np.arange(1, 25, dtype=np.float64).reshape(2, 3, 4)
    out_t = T("FLOAT64", [2, 3, 4], strides=[20, 6, 1])
    in_t = T("FLOAT64", [2, 3, 4], strides=[15, 5, 1])
    desc = DM1(in_t, out_t, "FLOAT64", -1.0, 0, 2)
    want = np.where(np.triu(np.ones((3, 4), bool), 0) & ~np.triu(np.ones((3, 4), bool), 2), -1.0, x)
    assert np.array_equal(run(desc, x), want)


# -- the array function --------------------------------------------------------------------------------------

def reference(x, shape, dtype, value, begin, end):
    """np.triu masks: diagonals j - i >= k are np.triu(.., k)."""
    h, w = shape[-2:]
    ones = np.ones((h, w), bool)
    above_begin, above_end = np.triu(ones, begin), np.triu(ones, end)
    mask = (above_begin & ~above_end) if end >= begin else (above_begin | ~above_end)
    base = np.zeros(shape, dtype) if x is None else x
    return np.where(mask, np.array(value).astype(dtype), base).astype(dtype)


@given(st.data())
@SETTINGS
def test_property_against_numpy(data):
    dtype = np.dtype(data.draw(st.sampled_from(TYPES)))
    rank = data.draw(st.integers(2, 4))
    shape = tuple(data.draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank)))
    big = 2 ** 31 - 1
    begin = data.draw(st.one_of(st.integers(-8, 8), st.sampled_from([-big - 1, big])))
    end = data.draw(st.one_of(st.integers(-8, 8), st.sampled_from([-big - 1, big])))
    value = data.draw(st.integers(0, 100)) if dtype.kind in "iu" else data.draw(st.floats(-1e3, 1e3, width=16))
    if data.draw(st.booleans()):
        x = np.arange(np.prod(shape)).reshape(shape).astype(dtype)
        layout = data.draw(st.sampled_from(["packed", "reversed", "padded"]))
        if layout == "reversed":
            x = np.ascontiguousarray(x[..., ::-1, ::-1])[..., ::-1, ::-1]
        elif layout == "padded":
            big_x = np.zeros(shape[:-1] + (2 * shape[-1],), dtype)
            big_x[..., ::2] = x
            x = big_x[..., ::2]
        got = dml.diagonal_matrix(x, value=value, begin=begin, end=end)
        want = reference(x, shape, dtype, value, begin, end)
    else:
        got = dml.diagonal_matrix(shape=shape, dtype=dtype, value=value, begin=begin, end=end)
        want = reference(None, shape, dtype, value, begin, end)
    assert got.dtype == dtype and got.shape == shape
    assert np.array_equal(got, want, equal_nan=dtype.kind == "f")


def test_array_function_examples_and_errors():
    assert np.array_equal(dml.diagonal_matrix(shape=(3, 4)), np.eye(3, 4))
    x = np.arange(20.0).reshape(4, 5)
    assert np.array_equal(dml.diagonal_matrix(x, value=0, begin=INT32_MIN, end=1), np.triu(x, 1))
    # inverted, nothing below INT32_MIN: only the diagonals >= 1 are filled
    assert np.array_equal(dml.diagonal_matrix(x, value=0, begin=1, end=INT32_MIN), np.tril(x, 0))
    with pytest.raises(dml.ValidationError, match=r"^diagonal_matrix: x must be a NumPy, CuPy, PyTorch, JAX or Dask "
                                                  r"array; got builtins.NoneType$"):
        dml.diagonal_matrix(None)
    with pytest.raises(dml.ValidationError, match=r"^DIAGONAL_MATRIX1: OutputTensor.Sizes must be given"):
        dml.diagonal_matrix()
    with pytest.raises(dml.ValidationError, match=r"^diagonal_matrix: shape must have 2 to 4 dimensions for "
                                                  r"DIAGONAL_MATRIX1; got 5 \(shape \[1, 1, 1, 2, 2\]\)$"):
        dml.diagonal_matrix(shape=(1, 1, 1, 2, 2))
    with pytest.raises(dml.ValidationError, match=r"^diagonal_matrix: x must have 2 to 4 dimensions for "
                                                  r"DIAGONAL_MATRIX1; got 1"):
        dml.diagonal_matrix(np.zeros(3))
    with pytest.raises(dml.ValidationError, match=r"^DIAGONAL_MATRIX1: OutputTensor.Sizes must be None or x's "
                                                  r"shape \[4, 5\]"):
        dml.diagonal_matrix(x, shape=(5, 4))
    with pytest.raises(dml.UnsupportedError, match=r"^diagonal_matrix: dtype bool is not supported by "
                                                   r"DIAGONAL_MATRIX1"):
        dml.diagonal_matrix(shape=(2, 2), dtype=bool)
    with pytest.raises(dml.ValidationError, match=r"^DIAGONAL_MATRIX1: Value must be in \[-128, 127\] for "
                                                  r"ValueDataType INT8; got 128$"):
        dml.diagonal_matrix(shape=(2, 2), dtype=np.int8, value=128)
    with pytest.raises(dml.ValidationError, match=r"^DIAGONAL_MATRIX1: OutputTensor.Sizes\[0\]"):
        dml.diagonal_matrix(shape=(0, 2))


def test_inverted_range_keeps_a_band():
    """begin > end fills outside [end, begin): begin 2, end -1 keeps the
    diagonals -1, 0 and 1 (a tridiagonal band) of x."""
    x = np.arange(1.0, 31.0).reshape(5, 6)
    want = np.triu(np.tril(x, 1), -1)
    assert np.array_equal(dml.diagonal_matrix(x, value=0, begin=2, end=-1), want)
    assert np.array_equal(dml.diagonal_matrix(x, value=0, begin=1, end=0), np.triu(np.tril(x, 0), 0))
    assert np.array_equal(dml.diagonal_matrix(x, value=7, begin=3, end=3), x)     # begin == end: nothing


# -- frameworks ----------------------------------------------------------------------------------------------

def test_pytorch_autograd_forward_ad_and_compile():
    torch = pytest.importorskip("torch")
    import torch.autograd.forward_ad as fwAD

    def f(v):
        return dml.diagonal_matrix(v, value=2.5, begin=-1, end=2)
    x = torch.randn(2, 4, 5, dtype=torch.float64, requires_grad=True)
    mask = torch.from_numpy(np.triu(np.ones((4, 5), bool), -1) & ~np.triu(np.ones((4, 5), bool), 2))
    assert torch.equal(f(x), torch.where(mask, torch.tensor(2.5, dtype=torch.float64), x))
    assert torch.autograd.gradcheck(f, (x,)) and torch.autograd.gradgradcheck(f, (x,))
    g = torch.randn(2, 4, 5, dtype=torch.float64)
    (grad,) = torch.autograd.grad(f(x), x, g)
    assert torch.equal(grad, torch.where(mask, torch.zeros(()), g).to(torch.float64))
    with fwAD.dual_level():
        tangent = fwAD.unpack_dual(f(fwAD.make_dual(x.detach(), g))).tangent
    assert torch.equal(tangent, grad)
    xi = torch.arange(20, dtype=torch.int32).reshape(4, 5)
    assert torch.equal(dml.diagonal_matrix(xi, value=-1, begin=1, end=0),
                       torch.where(torch.eye(4, 5, dtype=torch.bool), xi, torch.tensor(-1, dtype=torch.int32)))


def test_jax_grad_jit_and_vmap():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = jnp.arange(20.0, dtype=jnp.float32).reshape(4, 5)
    w = jnp.arange(1.0, 21.0, dtype=jnp.float32).reshape(4, 5)
    mask = np.triu(np.ones((4, 5), bool), 0) & ~np.triu(np.ones((4, 5), bool), 1)
    f = lambda v: dml.diagonal_matrix(v, value=9.0)           # noqa: E731
    assert np.array_equal(np.asarray(f(x)), np.where(mask, 9.0, np.asarray(x)))
    assert np.array_equal(np.asarray(jax.jit(f)(x)), np.asarray(f(x)))
    got = jax.grad(lambda v: (f(v) * w).sum())(x)
    assert np.array_equal(np.asarray(got), np.where(mask, 0.0, np.asarray(w)))
    xs = jnp.stack([x, x + 1])
    assert np.array_equal(np.asarray(jax.vmap(f)(xs)), np.asarray(f(xs)))


def test_dask_blocks_keep_whole_matrices():
    da = pytest.importorskip("dask.array")
    x = np.arange(3 * 6 * 7, dtype=np.float32).reshape(3, 6, 7)
    d = da.from_array(x, chunks=(1, 2, 3))
    got = dml.diagonal_matrix(d, value=-5.0, begin=-2, end=3)
    assert np.array_equal(got.compute(), dml.diagonal_matrix(x, value=-5.0, begin=-2, end=3))


def test_pytorch_compile_and_vmap():
    torch = pytest.importorskip("torch")
    x = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    want_mask = torch.from_numpy(np.triu(np.ones((3, 4), bool), -1) & ~np.triu(np.ones((3, 4), bool), 1))
    f = torch.compile(lambda v: dml.diagonal_matrix(v, value=5.0, begin=-1, end=1) * 2)
    y = f(x)
    assert torch.equal(y, torch.where(want_mask, torch.tensor(10.0, dtype=torch.float64), 2 * x))
    y.sum().backward()
    assert torch.equal(x.grad, torch.where(want_mask, 0.0, 2.0).to(torch.float64).expand(2, 3, 4))
    xs = torch.randn(5, 3, 4)
    got = torch.func.vmap(lambda t: dml.diagonal_matrix(t, value=1.0))(xs)
    assert torch.equal(got, dml.diagonal_matrix(xs, value=1.0))


def test_generator_through_the_custom_operators():
    """A description without inputs through opendml::move and opendml_cpp::move
    (an empty tensor list: CPU outputs)."""
    torch = pytest.importorskip("torch")
    import json
    import opendml.torch  # noqa: F401 - registers the custom operators
    from opendml.arrays.torch import library as family_torch_op
    text = json.dumps(jsonform.to_json(DM(T("INT32", [3, 4]), -1, 6.0)))
    want = np.where(np.eye(3, 4, -1, dtype=bool), 6, 0).astype(np.int32)
    assert np.array_equal(torch.ops.opendml.move([], text)[0].numpy(), want)
    cpp = family_torch_op.cpp_op("move")
    if cpp is not None:
        assert np.array_equal(cpp([], text)[0].numpy(), want)


def test_repeated_generator_calls_are_served_from_the_cache_with_the_same_bytes_and_errors():
    from opendml.arrays import planner
    before = planner.info()["hits"]
    a = dml.diagonal_matrix(shape=(3, 5), dtype=np.int16, value=4, begin=-1, end=2)
    a[:] = 99                                                   # a new array each call: the next is not this
    b = dml.diagonal_matrix(shape=(3, 5), dtype=np.int16, value=4, begin=-1, end=2)
    assert planner.info()["hits"] > before
    assert np.array_equal(b, reference(None, (3, 5), np.int16, 4, -1, 2))
    for _ in range(2):                                          # True is no Value, before and after a 1
        with pytest.raises(dml.ValidationError, match=r"^DIAGONAL_MATRIX1: Value must be a number; got True$"):
            dml.diagonal_matrix(shape=(3, 5), dtype=np.int16, value=True)
        dml.diagonal_matrix(shape=(3, 5), dtype=np.int16, value=1)
