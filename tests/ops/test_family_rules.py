"""The family's rules: each page's field and tensor rules, with their
messages, and the support tables per feature level."""
import numpy as np
import pytest

import opendml as dml
from opendml.ops import (CastOperatorDesc, DepthToSpace1OperatorDesc, DepthToSpaceOperatorDesc,
                         ElementWiseIdentityOperatorDesc, JoinOperatorDesc, Padding1OperatorDesc, PaddingMode,
                         PaddingOperatorDesc, ScaleBias, SpaceToDepth1OperatorDesc, SplitOperatorDesc,
                         TileOperatorDesc)

T, D = dml.TensorDesc, dml.DataType
F32, I32, F64 = D.FLOAT32, D.INT32, D.FLOAT64
X = T(F32, [1, 1, 4, 4])

CASES = [
    ("identity sizes", lambda: ElementWiseIdentityOperatorDesc(X, T(F32, [1, 1, 4, 5])),
     r"^ELEMENT_WISE_IDENTITY: OutputTensor.Sizes\[3\] must be InputTensor.Sizes = 4; got 5"),
    ("identity type", lambda: ElementWiseIdentityOperatorDesc(X, T(D.FLOAT16, [1, 1, 4, 4])),
     r"^ELEMENT_WISE_IDENTITY: OutputTensor.DataType must equal InputTensor.DataType; got FLOAT16 != FLOAT32$"),
    ("identity scale bias on ints", lambda: ElementWiseIdentityOperatorDesc(T(I32, [4]), None, ScaleBias(2, 1)),
     r"^ELEMENT_WISE_IDENTITY: ScaleBias applies to float DataTypes only \(FLOAT16, FLOAT32, FLOAT64\); got "
     r"InputTensor.DataType INT32$"),
    ("identity scale overflows FLOAT", lambda: ElementWiseIdentityOperatorDesc(X, None, ScaleBias(1e39, 0)),
     r"^ELEMENT_WISE_IDENTITY: ScaleBias.Scale must fit a FLOAT"),
    ("cast needs an output", lambda: CastOperatorDesc(X, None),
     r"^CAST: OutputTensor is required \(it gives the DataType to cast to\); got None$"),
    ("cast rank", lambda: CastOperatorDesc(X, T(I32, [1, 4, 4])),
     r"^CAST: OutputTensor.DimensionCount must equal InputTensor.DimensionCount; got 3 != 4$"),
    ("padding length", lambda: PaddingOperatorDesc(X, None, PaddingMode.EDGE, 0, [0, 0, 1], [0, 0, 0, 0]),
     r"^PADDING: StartPadding must have 4 entries \(one per dimension\); got 3$"),
    ("padding negative", lambda: PaddingOperatorDesc(X, None, PaddingMode.EDGE, 0, [0, 0, -1, 0], [0] * 4),
     r"^PADDING: StartPadding\[2\] must be in \[0, 4294967295\]; got -1$"),
    ("padding output", lambda: PaddingOperatorDesc(X, T(F32, [1, 1, 5, 4]), PaddingMode.EDGE, 0, [0, 0, 1, 0],
                                                   [0, 0, 1, 0]),
     r"^PADDING: OutputTensor.Sizes\[2\] must be InputTensor.Sizes \+ StartPadding \+ EndPadding = 6; got 5"),
    ("padding mode", lambda: PaddingOperatorDesc(X, None, 7, 0, [0] * 4, [0] * 4),
     r"^PADDING: PaddingMode must be one of CONSTANT, EDGE, REFLECTION, SYMMETRIC, WRAP; got 7$"),
    ("padding value", lambda: PaddingOperatorDesc(X, None, PaddingMode.CONSTANT, "9", [0] * 4, [0] * 4),
     r"^PADDING: PaddingValue must be a number; got '9'$"),
    ("padding1 value type", lambda: Padding1OperatorDesc(X, None, PaddingMode.CONSTANT, D.INT32, 9, [0] * 4, [0] * 4),
     r"^PADDING1: PaddingValueDataType must equal OutputTensor.DataType; got INT32 != FLOAT32$"),
    ("padding1 value range", lambda: Padding1OperatorDesc(T(D.UINT8, [4]), None, PaddingMode.CONSTANT, D.UINT8, 256,
                                                          [1], [1]),
     r"^PADDING1: PaddingValue must be in \[0, 255\] for PaddingValueDataType UINT8; got 256$"),
    ("padding1 value integral", lambda: Padding1OperatorDesc(T(I32, [4]), None, 0, I32, 1.5, [1], [1]),
     r"^PADDING1: PaddingValue must be an integer for PaddingValueDataType INT32; got 1.5$"),
    ("padding1 float16 overflow", lambda: Padding1OperatorDesc(T(D.FLOAT16, [4]), None, 0, D.FLOAT16, 1e5, [1], [1]),
     r"^PADDING1: PaddingValue must fit PaddingValueDataType FLOAT16 \(magnitude <= 65504\); got 100000.0$"),
    ("join no inputs", lambda: JoinOperatorDesc([], None, 0),
     r"^JOIN: InputTensors must hold at least one tensor \(InputCount > 0\); got 0$"),
    ("join axis", lambda: JoinOperatorDesc([X, X], None, 4),
     r"^JOIN: Axis must be in \[0, 3\] \(InputTensors\[0\].DimensionCount - 1\); got 4$"),
    ("join sizes", lambda: JoinOperatorDesc([X, T(F32, [1, 1, 3, 4])], None, 3),
     r"^JOIN: InputTensors\[1\].Sizes\[2\] must equal InputTensors\[0\].Sizes\[2\] \(every dimension but Axis 3\); "
     r"got 3 != 4$"),
    ("join types", lambda: JoinOperatorDesc([X, T(I32, [1, 1, 4, 4])], None, 3),
     r"^JOIN: InputTensors\[1\].DataType must equal InputTensors\[0\].DataType; got INT32 != FLOAT32$"),
    ("join output", lambda: JoinOperatorDesc([X, X], T(F32, [1, 1, 4, 9]), 3),
     r"^JOIN: OutputTensor.Sizes\[3\] must be the inputs' Sizes, summed along Axis = 8; got 9"),
    ("split sum", lambda: SplitOperatorDesc(X, [T(F32, [1, 1, 4, 1]), T(F32, [1, 1, 4, 2])], 3),
     r"^SPLIT: the OutputTensors' Sizes\[3\] must sum to InputTensor.Sizes\[3\] \(Axis\); got 1 \+ 2 = 3 != 4$"),
    ("split other axis", lambda: SplitOperatorDesc(X, [T(F32, [1, 1, 3, 4])], 3),
     r"^SPLIT: OutputTensors\[0\].Sizes\[2\] must equal InputTensor.Sizes\[2\] \(every dimension but Axis 3\); "
     r"got 3 != 4$"),
    ("split outputs", lambda: SplitOperatorDesc(X, X, 3),
     r"^SPLIT: OutputTensors must be a sequence of TensorDesc; got TensorDesc$"),
    ("tile zero", lambda: TileOperatorDesc(X, None, [1, 1, 0, 1]),
     r"^TILE: Repeats\[2\] must be in \[1, 4294967295\] \(values must be larger than 0\); got 0$"),
    ("tile output", lambda: TileOperatorDesc(X, T(F32, [1, 1, 4, 4]), [1, 1, 2, 1]),
     r"^TILE: OutputTensor.Sizes\[2\] must be InputTensor.Sizes \* Repeats = 8; got 4"),
    ("s2d block 0", lambda: SpaceToDepth1OperatorDesc(X, None, 0, 0),
     r"^SPACE_TO_DEPTH1: BlockSize must be in \[1, 4294967295\]; got 0$"),
    ("s2d divisible", lambda: SpaceToDepth1OperatorDesc(T(F32, [1, 1, 4, 6]), None, 4, 0),
     r"^SPACE_TO_DEPTH1: InputTensor.Sizes\[2\] \(Height\) must be a multiple of BlockSize 4; got 4|"
     r"^SPACE_TO_DEPTH1: InputTensor.Sizes\[3\] \(Width\) must be a multiple of BlockSize 4; got 6$"),
    ("s2d rank", lambda: SpaceToDepth1OperatorDesc(T(F32, [1, 4, 4]), None, 2, 0),
     r"^SPACE_TO_DEPTH1: InputTensor.DimensionCount must be 4 \(\{N, C, H, W\}\); got 3$"),
    ("s2d order", lambda: SpaceToDepth1OperatorDesc(X, None, 2, 2),
     r"^SPACE_TO_DEPTH1: Order must be one of DEPTH_COLUMN_ROW, COLUMN_ROW_DEPTH; got 2$"),
    ("d2s channels", lambda: DepthToSpaceOperatorDesc(T(F32, [1, 6, 2, 2]), None, 2),
     r"^DEPTH_TO_SPACE: InputTensor.Sizes\[1\] \(Channels\) must be a multiple of BlockSize \* BlockSize = 4; got 6$"),
    ("d2s1 output", lambda: DepthToSpace1OperatorDesc(T(F32, [1, 8, 2, 3]), T(F32, [1, 2, 4, 5]), 2, 1),
     r"^DEPTH_TO_SPACE1: OutputTensor.Sizes\[3\] must be \{N, C / BlockSize\^2, H \* BlockSize, W \* BlockSize\} "
     r"= 6; got 5"),
    # a derived output out of DirectML's range names the operator, the output and where its sizes come from
    # (it read "TensorDesc: Sizes[0] must be ...", naming neither)
    ("tile output size too large", lambda: TileOperatorDesc(T(F32, [2, 3]), None, [2 ** 31, 1]),
     r"^TILE: OutputTensor.Sizes\[0\] must be in \[1, 4294967295\]; got 4294967296 \(OutputTensor.Sizes = "
     r"InputTensor.Sizes \* Repeats\)$"),
    ("tile output too many elements", lambda: TileOperatorDesc(T(F32, [2, 3]), None, [2 ** 16, 2 ** 16]),
     r"^TILE: OutputTensor: the element count \(product of Sizes \[131072, 196608\]\) must be <= 4294967295; "
     r"got 25769803776 \(OutputTensor.Sizes = InputTensor.Sizes \* Repeats\)$"),
    ("padding output too large", lambda: PaddingOperatorDesc(T(F32, [2, 3]), None, PaddingMode.CONSTANT, 0,
                                                              [0, 2 ** 32 - 1], [0, 1]),
     r"^PADDING: OutputTensor.Sizes\[1\] must be in \[1, 4294967295\]; got 4294967299 \(OutputTensor.Sizes = "
     r"InputTensor.Sizes \+ StartPadding \+ EndPadding\)$"),
    ("join output too large", lambda: JoinOperatorDesc([T(D.UINT8, [2 ** 31, 1])] * 3, None, 0),
     r"^JOIN: OutputTensor.Sizes\[0\] must be in \[1, 4294967295\]; got 6442450944 \(OutputTensor.Sizes = "
     r"the inputs' Sizes, summed along Axis\)$"),
    ("gather output too many elements", lambda: dml.gather(np.zeros((65536, 2), np.float32),
                                                            np.zeros(65536, np.int32), 1),
     r"^GATHER: OutputTensor: the element count \(product of Sizes \[65536, 65536\]\) must be <= 4294967295; "
     r"got 4294967296 \(OutputTensor.Sizes = \{InputTensor.Sizes\[0..Axis\], "),
]


@pytest.mark.parametrize("name, make, message", CASES, ids=[c[0] for c in CASES])
def test_rule(name, make, message):
    with pytest.raises(dml.ValidationError, match=message):
        make()


LEVELS = [
    # (description, lowest level, message at the level below)
    (lambda: ElementWiseIdentityOperatorDesc(T(D.INT8, [1, 1, 4, 4])), "2_1", r"DataType INT8 is not supported at "
     r"feature level 2_0 \(supported: FLOAT32, FLOAT16\); it needs feature level 2_1 or later"),
    (lambda: ElementWiseIdentityOperatorDesc(T(F32, [4])), "3_0", r"DimensionCount must be in \[4, 5\] at feature "
     r"level 2_1; got 1"),
    (lambda: ElementWiseIdentityOperatorDesc(T(F64, [4])), "4_1", r"FLOAT64 is not supported at feature level 4_0"),
    (lambda: CastOperatorDesc(X, T(D.INT64, [1, 1, 4, 4])), "3_0", r"OutputTensor.DataType INT64 is not supported "
     r"at feature level 2_1"),
    (lambda: CastOperatorDesc(T(F32, [4]), T(I32, [4])), "3_1", r"DimensionCount must be in \[4, 4\] at feature "
     r"level 3_0; got 1"),
    (lambda: CastOperatorDesc(X, T(F64, [1, 1, 4, 4])), "4_1", r"FLOAT64 is not supported at feature level 4_0"),
    (lambda: PaddingOperatorDesc(T(I32, [4]), None, 0, 0, [1], [1]), "3_1", r"InputTensor.DimensionCount must be "
     r"in \[4, 5\] at feature level 3_0; got 1"),
    (lambda: PaddingOperatorDesc(T(D.INT64, [4]), None, 0, 0, [1], [1]), "5_0", r"INT64 is not supported at "
     r"feature level 4_1"),
    (lambda: Padding1OperatorDesc(X, None, 0, F32, 0, [0] * 4, [0] * 4), "5_0", r"^PADDING1: the operator was "
     r"introduced in feature level 5_0; got feature level 4_1$"),
    (lambda: JoinOperatorDesc([T(F32, [1, 1, 1, 4, 4])] * 2, None, 4), "3_0", r"InputTensors\[0\].DimensionCount "
     r"must be in \[4, 4\] at feature level 2_1; got 5"),
    (lambda: JoinOperatorDesc([T(F32, [4])] * 2, None, 0), "3_1", r"InputTensors\[0\].DimensionCount must be in "
     r"\[4, 5\] at feature level 3_0; got 1"),
    (lambda: JoinOperatorDesc([T(D.UINT8, [1, 1, 4, 4])] * 2, None, 0), "2_1", r"InputTensors\[0\].DataType UINT8 "
     r"is not supported at feature level 2_0"),
    (lambda: SplitOperatorDesc(T(F32, [4]), [T(F32, [4])], 0), "3_0", r"DimensionCount must be in \[4, 4\] at "
     r"feature level 2_1"),
    (lambda: TileOperatorDesc(T(D.UINT64, [4]), None, [2]), "4_1", r"UINT64 is not supported at feature level 4_0"),
    (lambda: SpaceToDepth1OperatorDesc(X, None, 2, 1), "2_1", r"^SPACE_TO_DEPTH1: the operator was introduced in "
     r"feature level 2_1; got feature level 2_0$"),
    (lambda: DepthToSpaceOperatorDesc(T(D.INT64, [1, 4, 2, 2]), None, 2), "5_0", r"INT64 is not supported at "
     r"feature level 4_1"),
]


@pytest.mark.parametrize("make, lowest, message", LEVELS)
def test_support_tables(make, lowest, message):
    desc = make()
    assert desc.lowest_feature_level() == dml.FeatureLevel.parse(lowest)
    below = [lv for lv in dml.FeatureLevel if lv < dml.FeatureLevel.parse(lowest)][-1]
    with pytest.raises(dml.UnsupportedError, match=message):
        desc.validate(below)


def test_tile_float64_is_not_in_the_pages_table():
    with pytest.raises(dml.UnsupportedError, match=r"^TILE: InputTensor.DataType FLOAT64 is not supported at "
                                                   r"feature level 6_4"):
        TileOperatorDesc(T(F64, [4]), None, [2]).validate()


def test_padding_wrap_and_symmetric_levels():
    sym = PaddingOperatorDesc(X, None, PaddingMode.SYMMETRIC, 0, [0] * 4, [0] * 4)
    assert sym.lowest_feature_level() == dml.FeatureLevel.FL_3_0
    wrap = PaddingOperatorDesc(X, None, "wrap", 0, [0] * 4, [0] * 4)
    assert wrap.padding_mode is PaddingMode.WRAP and wrap.lowest_feature_level() == dml.FeatureLevel.FL_6_4


def test_padding_value_for_integer_types_truncates_and_saturates():
    ints = lambda v: PaddingOperatorDesc(T(D.INT8, [1, 1, 1, 1]), None, 0, v, [0, 0, 0, 1], [0] * 4)
    dev = dml.Device("cpu")
    import numpy as np
    one = np.zeros((1, 1, 1, 1), np.int8)
    assert dev.run(ints(10.6), one)[0, 0, 0, 0] == 10          # the page: "10.6 will become 10"
    assert dev.run(ints(-10.6), one)[0, 0, 0, 0] == -10
    assert dev.run(ints(1000.0), one)[0, 0, 0, 0] == 127
    assert dev.run(ints(float("nan")), one)[0, 0, 0, 0] == 0


@pytest.mark.parametrize("sizes", [[np.array(1), 3], (np.int8(1), np.array(3, np.uint64))])
def test_split_sizes_are_ints_as_the_other_fields_read_them(sizes):
    # a 0-d integer array is an int in every other list argument (pad's, tile's, slice's offsets...);
    # split refused it ("OutputTensors[0].Sizes[2] must be an int >= 1 (sizes[0]); got array(1)")
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    want = [a.tobytes() for a in dml.split(x, 2, [1, 3])]
    for _ in range(3):
        assert [a.tobytes() for a in dml.split(x, 2, sizes)] == want
    for bad in ([True, 3], [1.0, 3], [np.array(1.0), 3], [np.array([1]), 3]):
        with pytest.raises(dml.ValidationError, match=r"OutputTensors\[0\]\.Sizes\[2\] must be an int >= 1"):
            dml.split(x, 2, bad)


@pytest.mark.parametrize("name, call, scalar", [
    ("tile", lambda x, n: dml.tile(x, n), 2),
    ("pad", lambda x, n: dml.pad(x, n, n), 1),
    ("unfold", lambda x, n: dml.unfold(x.reshape(1, 1, 4, 6), n), 2),
    ("fold", lambda x, n: dml.fold(x.reshape(1, 4, 6), [3, 4], n), 2),
])
def test_a_0d_integer_array_in_place_of_a_sequence_is_the_int(name, call, scalar):
    # an int given for a whole sequence argument applies to each axis (tile: numpy.tile's rule); a 0-d integer
    # array was refused there ("must be a sequence of integers; got the scalar 2") though every entry of a list
    # may be one
    torch = pytest.importorskip("torch")
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    want = call(x, scalar).tobytes()
    for n in (np.array(scalar), np.array(scalar, np.uint8), torch.tensor(scalar), np.int16(scalar)):
        for _ in range(3):                      # the first call and the call cache's repeats
            assert call(x, n).tobytes() == want, (name, n)
    for bad in (np.array(float(scalar)), np.array(True), True):
        with pytest.raises(dml.ValidationError, match="must be a sequence of integers"):
            call(x, bad)


@pytest.mark.parametrize("value, shown", [(True, "True"), (1.0, "1.0"), (1 + 0j, r"\(1\+0j\)"),
                                          (D.FLOAT32, r"<DataType.FLOAT32: 1>"), (np.float64(1.0), r"np.float64\(1.0\)"),
                                          (np.True_, r"np.True_")])
def test_an_enum_field_takes_no_bool_float_or_member_of_another_enum(value, shown):
    """A description's enum field (PADDING's PaddingMode, the depth-space operators' Order) took anything equal to a
    member's value: True, 1.0, 1+0j or DataType.FLOAT32 gave EDGE (the array functions and the JSON form refuse
    them)."""
    with pytest.raises(dml.ValidationError, match=r"^PADDING: PaddingMode must be one of CONSTANT, EDGE, REFLECTION, "
                                                  r"SYMMETRIC, WRAP; got " + shown + "$"):
        PaddingOperatorDesc(X, None, value, 0, [0, 0, 1, 1], [0, 0, 1, 1])
    with pytest.raises(dml.ValidationError, match=r"^DEPTH_TO_SPACE1: Order must be one of DEPTH_COLUMN_ROW, "
                                                  r"COLUMN_ROW_DEPTH; got " + shown + "$"):
        DepthToSpace1OperatorDesc(T(F32, [1, 4, 2, 2]), None, 2, value)


@pytest.mark.parametrize("value", [1, np.int64(1), "edge", "DML_PADDING_MODE_EDGE", PaddingMode.EDGE])
def test_an_enum_field_takes_a_member_its_value_or_its_name(value):
    assert PaddingOperatorDesc(X, None, value, 0, [0, 0, 1, 1], [0, 0, 1, 1]).padding_mode is PaddingMode.EDGE


def test_an_enum_field_takes_no_0_d_bool_tensor():
    torch = pytest.importorskip("torch")
    with pytest.raises(dml.ValidationError, match=r"^PADDING: PaddingMode must be one of .*; got tensor\(True\)$"):
        PaddingOperatorDesc(X, None, torch.tensor(True), 0, [0, 0, 1, 1], [0, 0, 1, 1])
    assert PaddingOperatorDesc(X, None, torch.tensor(1), 0, [0, 0, 1, 1], [0, 0, 1, 1]).padding_mode is PaddingMode.EDGE
