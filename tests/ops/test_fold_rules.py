"""FOLD: one test per validation rule, pinning its message; the feature-level
table; the JSON form; the lowering to a FoldPlan."""
import numpy as np
import pytest

import opendml as dml
from opendml.jsonform import JsonFormError, from_json, to_json
from opendml.ops.fold import SUM_FLOAT, SUM_INTEGER
from opendml.plan import FoldPlan, WindowSums
from tests import reference as ref

T = dml.TensorDesc
F32, F16, F64, I8 = dml.DataType.FLOAT32, dml.DataType.FLOAT16, dml.DataType.FLOAT64, dml.DataType.INT8
U32 = 2**32 - 1
TYPES = [t for t in dml.DataType if t.value not in (0, 12, 13)]


def fold(**kw):
    """The page's example 1: (1, 9, 4) into (1, 1, 4, 4) with a 3x3 window."""
    args = dict(input_tensor=T(F32, [1, 9, 4]), output_tensor=T(F32, [1, 1, 4, 4]), window_sizes=[3, 3],
                strides=[1, 1], dilations=[1, 1], start_padding=[0, 0], end_padding=[0, 0])
    args.update(kw)
    return dml.FoldOperatorDesc(**args)


def ones(d):
    return dict(strides=[1] * d, dilations=[1] * d, start_padding=[0] * d, end_padding=[0] * d)


VALIDATION = [
    ("input type", lambda: fold(input_tensor=[1, 9, 4]), r"FOLD: InputTensor must be a TensorDesc; got list"),
    ("window not integer", lambda: fold(window_sizes=[3, 1.5]),
     r"FOLD: WindowSizes\[1\] must be an integer; got 1.5 of type float"),
    ("no spatial dims", lambda: fold(window_sizes=[], **ones(0)),
     r"FOLD: DimensionCount \(the length of WindowSizes\) must be in \[1, 6\]; got 0"),
    ("7 spatial dims", lambda: fold(window_sizes=[1] * 7, **ones(7)),
     r"FOLD: DimensionCount \(the length of WindowSizes\) must be in \[1, 6\]; got 7"),
    ("output required", lambda: fold(output_tensor=None),
     r"FOLD: OutputTensor is required \(the output's spatial sizes cannot be derived from the input\); got None"),
    ("output type", lambda: fold(output_tensor="out"), r"FOLD: OutputTensor must be a TensorDesc; got str"),
    ("data types", lambda: fold(output_tensor=T(F64, [1, 1, 4, 4])),
     r"FOLD: OutputTensor.DataType must equal InputTensor.DataType; got FLOAT64 != FLOAT32"),
    ("owned output", lambda: fold(output_tensor=T(F32, [1, 1, 4, 4], flags=dml.TensorFlags.OWNED_BY_DML)),
     r"FOLD: OutputTensor.Flags must not include OWNED_BY_DML \(a flag for inputs only\)"),
    ("output rank", lambda: fold(output_tensor=T(F32, [1, 1, 1, 4, 4])),
     r"FOLD: OutputTensor.DimensionCount must be DimensionCount \+ 2 = 4 \(N, C and 2 spatial\); got 5"),
    ("strides length", lambda: fold(strides=[1]), r"FOLD: Strides must have 2 entries \(one per dimension\); got 1"),
    ("end padding length", lambda: fold(end_padding=[0, 0, 0]),
     r"FOLD: EndPadding must have 2 entries \(one per dimension\); got 3"),
    ("zero window", lambda: fold(window_sizes=[3, 0]), r"FOLD: WindowSizes\[1\] must be in \[1, 4294967295\]; got 0"),
    ("window beyond uint32", lambda: fold(window_sizes=[2**32, 3]),
     r"FOLD: WindowSizes\[0\] must be in \[1, 4294967295\]; got 4294967296"),
    ("zero stride", lambda: fold(strides=[0, 1]), r"FOLD: Strides\[0\] must be in \[1, 4294967295\]; got 0"),
    ("stride beyond uint32", lambda: fold(strides=[1, 2**32]),
     r"FOLD: Strides\[1\] must be in \[1, 4294967295\]; got 4294967296"),
    ("zero dilation", lambda: fold(dilations=[1, 0]), r"FOLD: Dilations\[1\] must be in \[1, 4294967295\]; got 0"),
    ("negative start padding", lambda: fold(start_padding=[0, -1]),
     r"FOLD: StartPadding\[1\] must be in \[0, 4294967295\]; got -1"),
    ("start padding beyond uint32", lambda: fold(start_padding=[2**32, 0]),
     r"FOLD: StartPadding\[0\] must be in \[0, 4294967295\]; got 4294967296"),
    ("negative end padding", lambda: fold(end_padding=[-2, 0]),
     r"FOLD: EndPadding\[0\] must be in \[0, 4294967295\]; got -2"),
    ("window larger than padded output", lambda: fold(window_sizes=[3, 3], dilations=[1, 2]),
     r"FOLD: the dilated window must fit the padded output in spatial dimension 1: Dilations\[1\] \* "
     r"\(WindowSizes\[1\] - 1\) \+ 1 <= OutputTensor.Sizes\[3\] \+ StartPadding\[1\] \+ EndPadding\[1\]; "
     r"got 2 \* \(3 - 1\) \+ 1 = 5 > 4 \+ 0 \+ 0 = 4"),
    ("prod(WindowSizes) beyond 64 bits",
     lambda: fold(output_tensor=T(F32, [1, 1, 1, 1, 1]), window_sizes=[U32] * 3, strides=[1] * 3, dilations=[1] * 3,
                  start_padding=[U32 - 1] * 3, end_padding=[0] * 3),
     r"FOLD: prod\(WindowSizes\) must be <= 9223372036854775807 \(64-bit arithmetic\); "
     r"got 4294967295 x 4294967295 x 4294967295 = 79228162458924105385300197375"),
    ("C x prod(WindowSizes) beyond 64 bits",
     lambda: fold(output_tensor=T(F32, [1, 2, 1, 1]), window_sizes=[2**31, 2**31], start_padding=[2**31 - 1] * 2),
     r"FOLD: C x prod\(WindowSizes\) \(OutputTensor.Sizes\[1\] x prod\(WindowSizes\)\) must be <= "
     r"9223372036854775807 \(64-bit arithmetic\); got 2 x 4611686018427387904 = 9223372036854775808"),
    ("BlockCount beyond 64 bits",
     lambda: fold(output_tensor=T(F32, [1, 1, 1, 1]), window_sizes=[1, 1], start_padding=[U32, U32]),
     r"FOLD: BlockCount \(the product of the blocks per spatial dimension\) must be <= 9223372036854775807 "
     r"\(64-bit arithmetic\); got 4294967296 x 4294967296 = 18446744073709551616"),
    ("input element count beyond 64 bits",
     lambda: fold(output_tensor=T(F32, [2, 1, 1, 1]), window_sizes=[1, 1], start_padding=[2**31 - 1] * 2),
     r"FOLD: the input's element count N x C x prod\(WindowSizes\) x BlockCount must be <= 9223372036854775807 "
     r"\(64-bit arithmetic\); got 2 x 1 x 4611686018427387904 = 9223372036854775808"),
    ("input rank below 3", lambda: fold(input_tensor=T(F32, [9, 4])),
     r"FOLD: InputTensor.DimensionCount must be in \[3, OutputTensor.DimensionCount = 4\] "
     r"\(\(N, C x prod\(WindowSizes\), BlockCount\), optionally preceded by 1s\); got 2"),
    ("input rank above output", lambda: fold(input_tensor=T(F32, [1, 1, 1, 9, 4])),
     r"FOLD: InputTensor.DimensionCount must be in \[3, OutputTensor.DimensionCount = 4\] .*; got 5"),
    ("leading dimension not 1", lambda: fold(input_tensor=T(F32, [2, 1, 9, 4])),
     r"FOLD: InputTensor.Sizes\[0\] must be 1 \(a leading dimension before N, C x prod\(WindowSizes\), "
     r"BlockCount\); got 2"),
    ("N differs", lambda: fold(input_tensor=T(F32, [2, 9, 4])),
     r"FOLD: InputTensor.Sizes\[0\] \(N\) must equal OutputTensor.Sizes\[0\] \(N\); got 2 != 1"),
    ("N differs with a leading 1", lambda: fold(input_tensor=T(F32, [1, 3, 9, 4])),
     r"FOLD: InputTensor.Sizes\[1\] \(N\) must equal OutputTensor.Sizes\[0\] \(N\); got 3 != 1"),
    ("rows not C x prod(WindowSizes)", lambda: fold(input_tensor=T(F32, [1, 10, 4])),
     r"FOLD: InputTensor.Sizes\[1\] must equal C x prod\(WindowSizes\) = OutputTensor.Sizes\[1\] x "
     r"prod\(WindowSizes\) = 1 x 9 = 9; got 10"),
    ("C differs", lambda: fold(output_tensor=T(F32, [1, 2, 4, 4])),
     r"FOLD: InputTensor.Sizes\[1\] must equal C x prod\(WindowSizes\) = OutputTensor.Sizes\[1\] x "
     r"prod\(WindowSizes\) = 2 x 9 = 18; got 9"),
    ("BlockCount differs", lambda: fold(input_tensor=T(F32, [1, 9, 5])),
     r"FOLD: InputTensor.Sizes\[2\] must equal BlockCount = 2 x 2 = 4 \(the blocks per spatial dimension of the "
     r"padded output\); got 5"),
    ("BlockCount in 1-D", lambda: dml.FoldOperatorDesc(T(F32, [2, 6, 2]), T(F32, [2, 2, 8]), [3], [3], [1], [1], [0]),
     r"FOLD: InputTensor.Sizes\[2\] must equal BlockCount = 3 \(the blocks per spatial dimension of the padded "
     r"output\); got 2"),
    ("BlockCount from the output's padding", lambda: fold(start_padding=[1, 0], end_padding=[1, 0]),
     r"FOLD: InputTensor.Sizes\[2\] must equal BlockCount = 4 x 2 = 8 .*; got 4"),
]


@pytest.mark.parametrize("make, message", [pytest.param(m, msg, id=i) for i, m, msg in VALIDATION])
def test_validation_rule(make, message):
    with pytest.raises(dml.ValidationError, match=message):
        make()


def test_valid_descriptions():
    d = fold()
    assert d.blocks_per_dimension == (2, 2) and d.block_count == 4 and d.expected_input_sizes == (1, 9, 4)
    assert fold(input_tensor=T(F32, [1, 9, 8]), start_padding=[1, 0], end_padding=[1, 0]).blocks_per_dimension == (4, 2)
    # leading 1s up to the output's rank (UNFOLD's erratum 4, read the other way)
    assert fold(input_tensor=T(F32, [1, 1, 9, 4])).input_tensor.sizes == (1, 1, 9, 4)
    # 1 and 6 spatial dimensions, strided and dilated
    dml.FoldOperatorDesc(T(F32, [2, 6, 3]), T(F32, [2, 2, 8]), [3], [3], [1], [1], [0])
    dml.FoldOperatorDesc(T(F32, [1, 1, 1]), T(F32, [1] * 8), [1] * 6, [1] * 6, [1] * 6, [0] * 6, [0] * 6)
    dml.FoldOperatorDesc(T(F32, [1, 2, 2]), T(F32, [1, 1, 5]), [2], [1], [3], [0], [0])


LEVELS = [
    ("before 6_4", lambda: fold(), "6_3",
     r"FOLD: the operator was introduced in feature level 6_4; got feature level 6_3"),
    ("at 1_0", lambda: fold(), "1_0", r"FOLD: the operator was introduced in feature level 6_4; got feature level 1_0"),
]


@pytest.mark.parametrize("make, level, message", [pytest.param(m, lv, msg, id=i) for i, m, lv, msg in LEVELS])
def test_feature_level_rule(make, level, message):
    with pytest.raises(dml.UnsupportedError, match=message):
        make().validate(level)


@pytest.mark.parametrize("dtype", TYPES, ids=lambda t: t.name)
def test_every_type_from_6_4(dtype):
    d = fold(input_tensor=T(dtype, [1, 9, 4]), output_tensor=T(dtype, [1, 1, 4, 4]))
    assert d.validate("6_4") is d and d.lowest_feature_level().label == "6_4"
    assert d.lower().kernel_plan().sum_kind == (SUM_FLOAT if dtype in (F16, F32, F64) else SUM_INTEGER)


@pytest.mark.parametrize("d", range(1, 7))
def test_ranks_3_to_8_at_6_4(d):
    desc = dml.FoldOperatorDesc(T(I8, [1, 1, 1]), T(I8, [1, 1] + [1] * d), [1] * d, [1] * d, [1] * d, [0] * d,
                                [0] * d)
    assert desc.lowest_feature_level().label == "6_4"


def test_sum_kind_values_match_the_kernel_header():
    from opendml.runtime import params
    assert (SUM_INTEGER, SUM_FLOAT) == (params.SUM_INTEGER, params.SUM_FLOAT) == (0, 1)


def test_descriptor_identity_and_repr():
    d = fold()
    assert (d.OPERATOR, d.TYPE_VALUE, d.TENSORS, d.OUTPUT_DERIVABLE, d.DEFAULT_INPUT_START) == \
        ("FOLD", 176, ("InputTensor", "OutputTensor"), False, 0)
    assert dml.FoldOperatorDesc in __import__("opendml.ops", fromlist=["OPERATORS"]).OPERATORS.values()
    with pytest.raises(AttributeError):
        d.window_sizes = (1, 1)
    assert repr(d).startswith("FoldOperatorDesc(input_tensor=TensorDesc(DataType.FLOAT32, sizes=[1, 9, 4])")


# -- the JSON form ------------------------------------------------------------------

@pytest.mark.parametrize("desc", [
    fold(),
    fold(input_tensor=T(dml.DataType.INT64, [1, 1, 9, 4], strides=[36, 36, 1, 9]),
         output_tensor=T(dml.DataType.INT64, [1, 1, 4, 4], strides=[32, 16, 4, 1])),
    dml.FoldOperatorDesc(T(F16, [2, 6, 3]), T(F16, [2, 2, 8]), [3], [3], [1], [1], [0]),
], ids=["example-1", "strided-int64", "1-d"])
def test_json_round_trip(desc):
    back = from_json(to_json(desc))
    assert back == desc and to_json(back) == to_json(desc)


def test_json_needs_the_output_and_fills_defaults():
    obj = {"Operator": "FOLD", "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 9, 8]},
           "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 4]},
           "WindowSizes": [3, 3], "StartPadding": [1, 0], "EndPadding": [1, 0]}
    d = from_json(obj)
    assert d.strides == (1, 1) and d.dilations == (1, 1) and d.start_padding == (1, 0)
    del obj["OutputTensor"]
    with pytest.raises(JsonFormError, match=r"\$.OutputTensor: missing required field"):
        from_json(obj)
    with pytest.raises(JsonFormError, match=r"\$.OutputTensor: required for FOLD"):
        from_json({**obj, "OutputTensor": None})


# -- lowering -----------------------------------------------------------------------

def test_lowering_example_1():
    plan = fold().lower()
    assert [type(q) for q in plan.passes] == [WindowSums] and plan.in_types == plan.out_types == (F32,)
    p = plan.kernel_plan()
    assert p is plan.passes[0].plan and isinstance(p, FoldPlan)
    assert (p.element_size, p.sum_kind, p.batch, p.channels, p.spatial) == (4, SUM_FLOAT, 1, 1, (4, 4))
    assert (p.in_offset, p.in_strides, p.out_offset, p.out_strides) == (0, (36, 4, 1), 0, (16, 16, 4, 1))
    assert (p.window, p.strides, p.dilations, p.start_padding, p.blocks) == ((3, 3), (1, 1), (1, 1), (0, 0), (2, 2))
    assert p.in_span == (0, 35) and p.out_span == (0, 15) and p.rows == 9 and p.columns == 4


def test_lowering_takes_the_last_three_input_strides():
    d = fold(input_tensor=T(F32, [1, 1, 9, 4], strides=[100, 100, 1, 9]))
    p = d.lower().kernel_plan()
    assert p.in_strides == (100, 1, 9)
    # the array API's signed strides and origin
    p = d.lower(in_strides=(0, 36, -4, 1), in_offset=32).kernel_plan()
    assert p.in_strides == (36, -4, 1) and p.in_offset == 32 and p.in_span == (0, 35)


@pytest.mark.parametrize("name", ["fold-1", "fold-2-padded", "fold-3-channels"])
def test_lowered_examples_through_the_plan_reference(name):
    from opendml.cli import examples
    ex = examples()[name]
    desc = from_json(ex)
    x = np.array(ex["Input"], dtype=np.float32)
    dst = np.full(desc.output_tensor.total_tensor_size_in_bytes // 4, 0xFFFFFFFF, np.uint32)
    ref.run_fold_plan(desc.lower().kernel_plan(), x.reshape(-1).view(np.uint32), dst)
    assert np.array_equal(dst.view(np.float32).reshape(desc.output_tensor.sizes), ex["ExpectedOutput"])


@pytest.mark.parametrize("field", [1, 2])
@pytest.mark.parametrize("zero_d", [np.array(4.0), np.array(2.0, np.float32)])
def test_a_0d_array_for_output_or_window_sizes_is_a_validation_error(field, zero_d):
    # a 0-d array has __len__ but no length: a bare TypeError before, and the
    # repeated call (the call cache) gives the same error (a 0-d integer array
    # is the int: test_family_rules)
    args = [np.ones((2, 12, 9), np.float32), [4, 4], [2, 2]]
    args[field] = zero_d
    for _ in range(3):
        with pytest.raises(dml.ValidationError, match="FOLD: (OutputTensor.Sizes|WindowSizes)"):
            dml.fold(*args)


@pytest.mark.parametrize("window", [[np.array(2), np.array(2)], [np.int64(2), 2], (np.array(2, np.uint8), 2)])
def test_window_sizes_the_description_reads_as_ints_give_the_channels_too(window):
    # a 0-d integer array is an int to the description, but the channel count C was not derived from it:
    # "InputTensor.Sizes[1] must equal C x prod(WindowSizes) = 12 x 4 = 48; got 12"
    cols = np.arange(2 * 12 * 9, dtype=np.float32).reshape(2, 12, 9)
    want = dml.fold(cols, [4, 4], [2, 2])
    for _ in range(3):
        assert dml.fold(cols, [4, 4], window).tobytes() == want.tobytes()
