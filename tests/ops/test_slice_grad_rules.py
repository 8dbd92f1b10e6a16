"""SLICE_GRAD: one test per validation rule, pinning its message; the
feature-level tables; the JSON form; the lowering to a ScatterPlan."""
import numpy as np
import pytest

import opendml as dml
from opendml.jsonform import JsonFormError, from_json, to_json
from opendml.plan import ScatterPlan, SliceScatter
from tests import reference as ref

T = dml.TensorDesc
F32, F16, F64, I8, U64 = (dml.DataType.FLOAT32, dml.DataType.FLOAT16, dml.DataType.FLOAT64, dml.DataType.INT8,
                          dml.DataType.UINT64)
TYPES = [t for t in dml.DataType if t.value not in (0, 12, 13)]
G = T(F32, [1, 1, 2, 2])


def grad(**kw):
    """SLICE1 example 2 read backwards: a (1, 1, 2, 2) gradient into (1, 1, 4, 4)."""
    args = dict(input_gradient_tensor=G, output_gradient_tensor=T(F32, [1, 1, 4, 4]),
                input_window_offsets=[0, 0, 0, 1], input_window_sizes=[1, 1, 4, 3],
                input_window_strides=[1, 1, -2, 2])
    args.update(kw)
    return dml.SliceGradOperatorDesc(**args)


VALIDATION = [
    ("input gradient type", lambda: grad(input_gradient_tensor=[1, 1, 2, 2]),
     r"SLICE_GRAD: InputGradientTensor must be a TensorDesc; got list"),
    ("output gradient required", lambda: grad(output_gradient_tensor=None),
     r"SLICE_GRAD: OutputGradientTensor is required \(it has the sizes of SLICE1's input, which the window does "
     r"not determine\); got None"),
    ("output gradient type", lambda: grad(output_gradient_tensor="out"),
     r"SLICE_GRAD: OutputGradientTensor must be a TensorDesc; got str"),
    ("data types", lambda: grad(output_gradient_tensor=T(I8, [1, 1, 4, 4])),
     r"SLICE_GRAD: OutputGradientTensor.DataType must equal InputGradientTensor.DataType; got INT8 != FLOAT32"),
    ("ranks", lambda: grad(output_gradient_tensor=T(F32, [1, 4, 4])),
     r"SLICE_GRAD: OutputGradientTensor.DimensionCount must equal InputGradientTensor.DimensionCount; got 3 != 4"),
    ("owned output", lambda: grad(output_gradient_tensor=T(F32, [1, 1, 4, 4], flags=dml.TensorFlags.OWNED_BY_DML)),
     r"SLICE_GRAD: OutputGradientTensor.Flags must not include OWNED_BY_DML \(a flag for inputs only\)"),
    ("offsets length", lambda: grad(input_window_offsets=[0, 0, 0]),
     r"SLICE_GRAD: InputWindowOffsets must have 4 entries \(one per dimension\); got 3"),
    ("sizes length", lambda: grad(input_window_sizes=[1, 1, 4, 3, 1]),
     r"SLICE_GRAD: InputWindowSizes must have 4 entries \(one per dimension\); got 5"),
    ("strides length", lambda: grad(input_window_strides=[1, 1, 2]),
     r"SLICE_GRAD: InputWindowStrides must have 4 entries \(one per dimension\); got 3"),
    ("float offset", lambda: grad(input_window_offsets=[0, 0, 0.5, 1]),
     r"SLICE_GRAD: InputWindowOffsets\[2\] must be an integer; got 0.5 of type float"),
    ("negative offset", lambda: grad(input_window_offsets=[0, 0, -1, 1]),
     r"SLICE_GRAD: InputWindowOffsets\[2\] must be in \[0, 4294967295\]; got -1"),
    ("offset beyond uint32", lambda: grad(input_window_offsets=[0, 0, 2**32, 1]),
     r"SLICE_GRAD: InputWindowOffsets\[2\] must be in \[0, 4294967295\]; got 4294967296"),
    ("empty window", lambda: grad(input_window_sizes=[1, 1, 0, 3]),
     r"SLICE_GRAD: InputWindowSizes\[2\] must be in \[1, 4294967295\] \(the window mustn't be empty\); got 0"),
    ("window beyond the output gradient", lambda: grad(input_window_offsets=[0, 0, 1, 1]),
     r"SLICE_GRAD: InputWindowOffsets\[2\] \+ InputWindowSizes\[2\] must be <= OutputGradientTensor.Sizes\[2\]; "
     r"got 1 \+ 4 > 4"),
    ("zero stride", lambda: grad(input_window_strides=[1, 1, 0, 2]),
     r"SLICE_GRAD: InputWindowStrides\[2\] must be non-zero and in \[-2147483648, 2147483647\]; got 0"),
    ("stride beyond int32", lambda: grad(input_window_strides=[1, 1, 2**31, 2]),
     r"SLICE_GRAD: InputWindowStrides\[2\] must be non-zero and in \[-2147483648, 2147483647\]; got 2147483648"),
    ("stride below int32", lambda: grad(input_window_strides=[1, 1, -2**31 - 1, 2]),
     r"SLICE_GRAD: InputWindowStrides\[2\] must be non-zero and in \[-2147483648, 2147483647\]; got -2147483649"),
    ("input gradient larger than the window gives", lambda: grad(input_gradient_tensor=T(F32, [1, 1, 3, 2])),
     r"SLICE_GRAD: InputGradientTensor.Sizes\[2\] must be in \[1, 1 \+ \(InputWindowSizes\[2\] - 1\) / "
     r"\|InputWindowStrides\[2\]\|\] = \[1, 2\]; got 3"),
]


@pytest.mark.parametrize("make, message", [pytest.param(m, msg, id=i) for i, m, msg in VALIDATION])
def test_validation_rule(make, message):
    with pytest.raises(dml.ValidationError, match=message):
        make()


def test_valid_descriptions_and_tensor_aliases():
    d = grad()
    assert d.input_tensor is d.input_gradient_tensor and d.output_tensor is d.output_gradient_tensor
    # fewer elements than the window reaches (SLICE1's smaller outputs)
    assert grad(input_gradient_tensor=T(F32, [1, 1, 1, 1])).first_positions == (0, 0, 3, 1)
    assert grad(input_window_strides=[1, 1, -1, 1], input_gradient_tensor=T(F32, [1, 1, 4, 3])).first_positions == \
        (0, 0, 0, 1)
    # INT32_MIN is a valid stride (SLICE1's range)
    dml.SliceGradOperatorDesc(T(F32, [1]), T(F32, [3]), [1], [2], [-2**31])


LEVELS = [
    ("before 3_0", lambda: grad(), "2_1",
     r"SLICE_GRAD: the operator was introduced in feature level 3_0; got feature level 2_1"),
    ("float64 at 4_0", lambda: grad(input_gradient_tensor=T(F64, [1, 1, 2, 2]),
                                    output_gradient_tensor=T(F64, [1, 1, 4, 4])), "4_0",
     r"SLICE_GRAD: InputGradientTensor.DataType FLOAT64 is not supported at feature level 4_0 \(supported: "
     r"FLOAT32, FLOAT16, UINT32, UINT16, UINT8, INT32, INT16, INT8\); it needs feature level 4_1 or later"),
    ("uint64 at 3_1", lambda: grad(input_gradient_tensor=T(U64, [1, 1, 2, 2]),
                                   output_gradient_tensor=T(U64, [1, 1, 4, 4])), "3_1",
     r"SLICE_GRAD: InputGradientTensor.DataType UINT64 is not supported at feature level 3_1 .*; it needs feature "
     r"level 4_1 or later"),
]


@pytest.mark.parametrize("make, level, message", [pytest.param(m, lv, msg, id=i) for i, m, lv, msg in LEVELS])
def test_feature_level_rule(make, level, message):
    with pytest.raises(dml.UnsupportedError, match=message):
        make().validate(level)


@pytest.mark.parametrize("dtype", TYPES, ids=lambda t: t.name)
def test_lowest_feature_level_per_type(dtype):
    d = grad(input_gradient_tensor=T(dtype, [1, 1, 2, 2]), output_gradient_tensor=T(dtype, [1, 1, 4, 4]))
    want = "4_1" if dtype.name in ("FLOAT64", "INT64", "UINT64") else "3_0"
    assert d.lowest_feature_level().label == want and d.validate("6_4") is d


@pytest.mark.parametrize("rank", range(1, 9))
def test_ranks_1_to_8_from_3_0(rank):
    d = dml.SliceGradOperatorDesc(T(F16, [1] * rank), T(F16, [2] * rank), [1] * rank, [1] * rank, [-1] * rank)
    assert d.lowest_feature_level().label == "3_0"


def test_descriptor_identity_and_repr():
    d = grad()
    assert (d.OPERATOR, d.TYPE_VALUE, d.TENSORS, d.OUTPUT_DERIVABLE) == \
        ("SLICE_GRAD", 135, ("InputGradientTensor", "OutputGradientTensor"), False)
    with pytest.raises(AttributeError):
        d.input_window_strides = (1, 1, 1, 1)
    with pytest.raises(AttributeError):
        d.input_tensor = G
    assert repr(d).startswith("SliceGradOperatorDesc(input_gradient_tensor=TensorDesc(DataType.FLOAT32, "
                              "sizes=[1, 1, 2, 2]), output_gradient_tensor=")


# -- the JSON form ------------------------------------------------------------------

@pytest.mark.parametrize("desc", [
    grad(),
    grad(input_gradient_tensor=T(dml.DataType.INT16, [1, 1, 2, 2], strides=[8, 8, 1, 4]),
         output_gradient_tensor=T(dml.DataType.INT16, [1, 1, 4, 4], strides=[20, 20, 5, 1])),
    dml.SliceGradOperatorDesc(T(U64, [3]), T(U64, [9]), [2], [7], [-3]),
], ids=["example", "strided-int16", "1-d"])
def test_json_round_trip(desc):
    obj = to_json(desc)
    assert set(obj) == {"Operator", "InputGradientTensor", "OutputGradientTensor", "InputWindowOffsets",
                        "InputWindowSizes", "InputWindowStrides"}
    back = from_json(obj)
    assert back == desc and to_json(back) == obj


def test_json_uses_directml_tensor_names():
    obj = {"Operator": "DML_OPERATOR_SLICE_GRAD",
           "InputGradientTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]},
           "InputWindowOffsets": [0, 0, 0, 1], "InputWindowSizes": [1, 1, 4, 3], "InputWindowStrides": [1, 1, -2, 2]}
    with pytest.raises(JsonFormError, match=r"\$.OutputGradientTensor: missing required field"):
        from_json(obj)
    with pytest.raises(JsonFormError, match=r"\$.InputTensor: unknown field"):
        from_json({**obj, "InputTensor": obj["InputGradientTensor"]})
    obj["OutputGradientTensor"] = {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 4]}
    assert from_json(obj) == grad()


# -- lowering -----------------------------------------------------------------------

def test_lowering_negative_stride():
    plan = grad().lower()
    assert [type(q) for q in plan.passes] == [SliceScatter]
    p = plan.kernel_plan()
    assert p is plan.passes[0].plan and isinstance(p, ScatterPlan)
    assert (p.element_size, p.sizes, p.out_offset, p.out_strides) == (4, (1, 1, 4, 4), 0, (16, 16, 4, 1))
    # positions 1 and 3 of dimension 2 receive gradient rows 1 and 0: walked backwards
    assert (p.first, p.step, p.taken) == ((0, 0, 1, 1), (1, 1, 2, 2), (1, 1, 2, 2))
    assert (p.in_offset, p.in_strides) == (2, (4, 4, -2, 1))
    assert p.in_span == (0, 3) and p.out_span == (0, 15)


def test_lowering_with_array_layout():
    # a gradient whose last axis is reversed in memory: signed strides and origin
    p = grad().lower(in_strides=(4, 4, 2, -1), in_offset=1).kernel_plan()
    assert p.in_strides == (4, 4, -2, -1) and p.in_offset == 1 + 2 and p.in_span == (0, 3)


def test_lowered_example_through_the_plan_reference():
    from opendml.cli import examples
    ex = examples()["slice-grad"]
    desc = from_json(ex)
    g = np.array(ex["Input"], dtype=np.float32)
    dst = np.full(16, 0xFFFFFFFF, np.uint32)
    ref.run_scatter_plan(desc.lower().kernel_plan(), g.reshape(-1).view(np.uint32), dst)
    assert np.array_equal(dst.view(np.float32).reshape(1, 1, 4, 4), ex["ExpectedOutput"])
    assert np.array_equal(ref.slice_grad(g, (1, 1, 4, 4), desc.input_window_offsets, desc.input_window_sizes,
                                         desc.input_window_strides), ex["ExpectedOutput"])
