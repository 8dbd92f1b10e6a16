"""One test per validation rule of the three pages, pinning its message."""
import pytest

import opendml as dml

T = dml.TensorDesc
F32, F16, I8, F64 = (dml.DataType.FLOAT32, dml.DataType.FLOAT16, dml.DataType.INT8, dml.DataType.FLOAT64)
X = T(F32, [1, 1, 4, 4])


def slice_(**kw):
    args = dict(input_tensor=X, output_tensor=None, offsets=[0, 0, 1, 2], sizes=[1, 1, 3, 2], strides=[1, 1, 1, 1])
    args.update(kw)
    return dml.SliceOperatorDesc(**args)


def slice1(**kw):
    args = dict(input_tensor=X, output_tensor=None, input_window_offsets=[0, 0, 0, 1],
                input_window_sizes=[1, 1, 4, 3], input_window_strides=[1, 1, -2, 2])
    args.update(kw)
    return dml.Slice1OperatorDesc(**args)


def unfold(**kw):
    args = dict(input_tensor=T(F32, [1, 1, 5, 5]), output_tensor=None, window_sizes=[3, 3], strides=[1, 1],
                dilations=[1, 1], start_padding=[0, 0], end_padding=[0, 0])
    args.update(kw)
    return dml.UnfoldOperatorDesc(**args)


VALIDATION = [
    # SLICE
    ("slice offsets length", lambda: slice_(offsets=[0, 0, 1]), r"SLICE: Offsets must have 4 entries \(one per dimension\); got 3"),
    ("slice offset negative", lambda: slice_(offsets=[0, 0, -1, 2]), r"SLICE: Offsets\[2\] must be in \[0, 4294967295\]; got -1"),
    ("slice size zero", lambda: slice_(sizes=[1, 1, 0, 2]), r"SLICE: Sizes\[2\] must be in \[1, 4294967295\]; got 0"),
    ("slice stride zero", lambda: slice_(strides=[1, 1, 0, 1]), r"SLICE: Strides\[2\] must be in \[1, 4294967295\]; got 0"),
    ("slice window out of input", lambda: slice_(offsets=[0, 0, 2, 2]),
     r"SLICE: Offsets\[2\] \+ \(Sizes\[2\] - 1\) \* Strides\[2\] must be < InputTensor.Sizes\[2\]; got 2 \+ \(3 - 1\) \* 1 = 4 >= 4"),
    ("slice sizes vs output", lambda: slice_(output_tensor=T(F32, [1, 1, 3, 1])),
     r"SLICE: Sizes\[3\] must equal OutputTensor.Sizes\[3\]; got 2 != 1"),
    ("slice data types", lambda: slice_(output_tensor=T(F16, [1, 1, 3, 2])),
     r"SLICE: OutputTensor.DataType must equal InputTensor.DataType; got FLOAT16 != FLOAT32"),
    ("slice ranks", lambda: slice_(output_tensor=T(F32, [1, 3, 2])),
     r"SLICE: OutputTensor.DimensionCount must equal InputTensor.DimensionCount; got 3 != 4"),
    ("slice owned output", lambda: slice_(output_tensor=T(F32, [1, 1, 3, 2], flags=dml.TensorFlags.OWNED_BY_DML)),
     r"SLICE: OutputTensor.Flags must not include OWNED_BY_DML \(a flag for inputs only\)"),
    ("slice input type", lambda: slice_(input_tensor=[1, 1, 4, 4]), r"SLICE: InputTensor must be a TensorDesc; got list"),
    ("slice output type", lambda: slice_(output_tensor="out"), r"SLICE: OutputTensor must be a TensorDesc; got str"),
    ("slice float offset", lambda: slice_(offsets=[0, 0, 1.5, 2]), r"SLICE: Offsets\[2\] must be an integer; got 1.5 of type float"),
    # SLICE1
    ("slice1 window offset negative", lambda: slice1(input_window_offsets=[0, 0, -1, 1]),
     r"SLICE1: InputWindowOffsets\[2\] must be in \[0, 4294967295\]; got -1"),
    ("slice1 empty window", lambda: slice1(input_window_sizes=[1, 1, 0, 3]),
     r"SLICE1: InputWindowSizes\[2\] must be in \[1, 4294967295\] \(the window mustn't be empty\); got 0"),
    ("slice1 window out of input", lambda: slice1(input_window_offsets=[0, 0, 3, 1], input_window_sizes=[1, 1, 2, 3]),
     r"SLICE1: InputWindowOffsets\[2\] \+ InputWindowSizes\[2\] must be <= InputTensor.Sizes\[2\]; got 3 \+ 2 > 4"),
    ("slice1 zero stride", lambda: slice1(input_window_strides=[1, 1, 0, 2]),
     r"SLICE1: InputWindowStrides\[2\] must be non-zero and in \[-2147483648, 2147483647\]; got 0"),
    ("slice1 stride beyond int32", lambda: slice1(input_window_strides=[1, 1, 2**31, 2]),
     r"SLICE1: InputWindowStrides\[2\] must be non-zero and in \[-2147483648, 2147483647\]; got 2147483648"),
    ("slice1 output too large", lambda: slice1(output_tensor=T(F32, [1, 1, 3, 2])),
     r"SLICE1: OutputTensor.Sizes\[2\] must be in \[1, 1 \+ \(InputWindowSizes\[2\] - 1\) / \|InputWindowStrides\[2\]\|\] = \[1, 2\]; got 3"),
    ("slice1 data types", lambda: slice1(output_tensor=T(I8, [1, 1, 2, 2])),
     r"SLICE1: OutputTensor.DataType must equal InputTensor.DataType; got INT8 != FLOAT32"),
    ("slice1 ranks", lambda: slice1(output_tensor=T(F32, [1, 2, 2])),
     r"SLICE1: OutputTensor.DimensionCount must equal InputTensor.DimensionCount; got 3 != 4"),
    ("slice1 strides length", lambda: slice1(input_window_strides=[1, 1, 2]),
     r"SLICE1: InputWindowStrides must have 4 entries \(one per dimension\); got 3"),
    # UNFOLD
    ("unfold no spatial dims", lambda: unfold(window_sizes=[], strides=[], dilations=[], start_padding=[], end_padding=[]),
     r"UNFOLD: DimensionCount \(the length of WindowSizes\) must be in \[1, 6\]; got 0"),
    ("unfold 7 spatial dims", lambda: unfold(input_tensor=T(F32, [1] * 8), window_sizes=[1] * 7),
     r"UNFOLD: DimensionCount \(the length of WindowSizes\) must be in \[1, 6\]; got 7"),
    ("unfold input rank", lambda: unfold(input_tensor=T(F32, [1, 1, 5])),
     r"UNFOLD: InputTensor.DimensionCount must be DimensionCount \+ 2 = 4 \(N, C and 2 spatial\); got 3"),
    ("unfold strides length", lambda: unfold(strides=[1]), r"UNFOLD: Strides must have 2 entries \(one per dimension\); got 1"),
    ("unfold zero window", lambda: unfold(window_sizes=[3, 0]), r"UNFOLD: WindowSizes\[1\] must be in \[1, 4294967295\]; got 0"),
    ("unfold zero stride", lambda: unfold(strides=[0, 1]), r"UNFOLD: Strides\[0\] must be in \[1, 4294967295\]; got 0"),
    ("unfold zero dilation", lambda: unfold(dilations=[1, 0]), r"UNFOLD: Dilations\[1\] must be in \[1, 4294967295\]; got 0"),
    ("unfold negative padding", lambda: unfold(start_padding=[0, -1]), r"UNFOLD: StartPadding\[1\] must be in \[0, 4294967295\]; got -1"),
    ("unfold negative end padding", lambda: unfold(end_padding=[-2, 0]), r"UNFOLD: EndPadding\[0\] must be in \[0, 4294967295\]; got -2"),
    ("unfold window larger than padded input", lambda: unfold(window_sizes=[3, 4], dilations=[1, 2]),
     r"UNFOLD: the dilated window must fit the padded input in spatial dimension 1: Dilations\[1\] \* \(WindowSizes\[1\] - 1\) \+ 1 <= "
     r"InputTensor.Sizes\[3\] \+ StartPadding\[1\] \+ EndPadding\[1\]; got 2 \* \(4 - 1\) \+ 1 = 7 > 5 \+ 0 \+ 0 = 5"),
    ("unfold output sizes", lambda: unfold(output_tensor=T(F32, [1, 9, 8])),
     r"UNFOLD: OutputTensor.Sizes must be \[1, 9, 9\] \(N, C x prod\(WindowSizes\), BlockCount\), optionally preceded by 1s "
     r"up to InputTensor.DimensionCount 4; got \[1, 9, 8\]"),
    ("unfold leading non-1", lambda: unfold(output_tensor=T(F32, [2, 1, 9, 9])), r"UNFOLD: OutputTensor.Sizes must be \[1, 9, 9\]"),
    ("unfold output rank above input", lambda: unfold(output_tensor=T(F32, [1, 1, 1, 9, 9])), r"UNFOLD: OutputTensor.Sizes must be \[1, 9, 9\]"),
    ("unfold data types", lambda: unfold(output_tensor=T(F64, [1, 9, 9])),
     r"UNFOLD: OutputTensor.DataType must equal InputTensor.DataType; got FLOAT64 != FLOAT32"),
    ("unfold huge output", lambda: unfold(input_tensor=T(F32, [1, 65536, 5, 5]), window_sizes=[3, 3], start_padding=[2**20, 0]),
     r"UNFOLD: the output would have sizes \[1, 589824, 3145737\] \(1855431180288 elements\); a tensor holds at most 4294967295"),
]


@pytest.mark.parametrize("make, message", [pytest.param(m, msg, id=i) for i, m, msg in VALIDATION])
def test_validation_rule(make, message):
    with pytest.raises(dml.ValidationError, match=message):
        make()


LEVELS = [
    ("slice1 before 2_1", lambda: slice1(), "2_0", r"SLICE1: the operator was introduced in feature level 2_1; got feature level 2_0"),
    ("unfold before 6_4", lambda: unfold(), "6_3", r"UNFOLD: the operator was introduced in feature level 6_4; got feature level 6_3"),
    ("slice rank 3 at 2_1", lambda: dml.SliceOperatorDesc(T(F32, [4, 4, 4]), None, [0, 0, 0], [1, 1, 1], [1, 1, 1]), "2_1",
     r"SLICE: InputTensor.DimensionCount must be in \[4, 5\] at feature level 2_1; got 3"),
    ("slice1 rank 6 at 2_1", lambda: slice1(input_tensor=T(F32, [1, 1, 1, 1, 4, 4]), input_window_offsets=[0] * 4 + [0, 1],
                                            input_window_sizes=[1] * 4 + [4, 3], input_window_strides=[1] * 4 + [2, 2]), "2_1",
     r"SLICE1: InputTensor.DimensionCount must be in \[4, 5\] at feature level 2_1; got 6"),
    ("slice int8 at 1_0", lambda: slice_(input_tensor=T(I8, [1, 1, 4, 4])), "1_0",
     r"SLICE: InputTensor.DataType INT8 is not supported at feature level 1_0 \(supported: FLOAT32, FLOAT16, UINT32, "
     r"UINT16, INT32, INT16\); it needs feature level 2_1 or later"),
    ("slice1 float64 at 4_0", lambda: slice1(input_tensor=T(F64, [1, 1, 4, 4])), "4_0",
     r"SLICE1: InputTensor.DataType FLOAT64 is not supported at feature level 4_0 .*; it needs feature level 4_1 or later"),
]


@pytest.mark.parametrize("make, level, message", [pytest.param(m, lv, msg, id=i) for i, m, lv, msg in LEVELS])
def test_feature_level_rule(make, level, message):
    desc = make()
    with pytest.raises(dml.UnsupportedError, match=message):
        desc.validate(level)


@pytest.mark.parametrize("make, lowest", [
    (lambda: slice_(), "1_0"), (lambda: slice_(input_tensor=T(I8, [1, 1, 4, 4])), "2_1"),
    (lambda: dml.SliceOperatorDesc(T(F32, [4, 4]), None, [0, 0], [1, 1], [1, 1]), "3_0"),
    (lambda: slice_(input_tensor=T(F64, [1, 1, 4, 4])), "4_1"), (lambda: slice1(), "2_1"),
    (lambda: slice1(input_tensor=T(dml.DataType.UINT64, [1, 1, 4, 4])), "4_1"), (lambda: unfold(), "6_4"),
])
def test_lowest_feature_level(make, lowest):
    assert make().lowest_feature_level().label == lowest


def test_unfold_output_with_leading_ones_and_derivation():
    d = unfold(output_tensor=T(F32, [1, 1, 9, 9]))
    assert d.output_tensor.sizes == (1, 1, 9, 9)
    assert unfold().output_tensor.sizes == (1, 9, 9)
    assert unfold(start_padding=[1, 0], end_padding=[1, 0]).blocks_per_dimension == (5, 3)


def test_derived_outputs():
    assert slice_().output_tensor == T(F32, [1, 1, 3, 2])
    assert slice1().output_tensor.sizes == (1, 1, 2, 2)
    assert slice1(input_window_strides=[1, 1, 1, -1]).output_tensor.sizes == (1, 1, 4, 3)


def test_descriptions_are_frozen_and_readable():
    d = slice1()
    with pytest.raises(AttributeError):
        d.input_window_strides = (1, 1, 1, 1)
    assert repr(d).startswith("Slice1OperatorDesc(input_tensor=TensorDesc(DataType.FLOAT32, sizes=[1, 1, 4, 4])")
