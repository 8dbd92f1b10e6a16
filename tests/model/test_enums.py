import numpy as np
import pytest

import opendml as dml

EXPECTED = {"FLOAT32": (1, 4, np.float32), "FLOAT16": (2, 2, np.float16), "UINT32": (3, 4, np.uint32),
            "UINT16": (4, 2, np.uint16), "UINT8": (5, 1, np.uint8), "INT32": (6, 4, np.int32),
            "INT16": (7, 2, np.int16), "INT8": (8, 1, np.int8), "FLOAT64": (9, 8, np.float64),
            "UINT64": (10, 8, np.uint64), "INT64": (11, 8, np.int64)}


@pytest.mark.parametrize("name", EXPECTED)
def test_data_types(name):
    value, size, npt = EXPECTED[name]
    t = dml.DataType[name]
    assert t.value == value and t.size == size and t.numpy_dtype == np.dtype(npt)
    assert dml.DataType.from_numpy(npt) is t
    assert dml.DataType.parse(f"DML_TENSOR_DATA_TYPE_{name}") is t


def test_other_enum_values_and_subbyte_types():
    assert dml.DataType.UNKNOWN == 0 and dml.DataType.UINT4 == 12 and dml.DataType.INT4 == 13
    with pytest.raises(dml.UnsupportedError, match="UINT4 has no whole-byte element size"):
        dml.DataType.UINT4.size
    with pytest.raises(dml.UnsupportedError, match="NumPy dtype bool has no DirectML data type"):
        dml.DataType.from_numpy(np.bool_)


def test_feature_levels_ordered_and_parsed():
    levels = list(dml.FeatureLevel)
    assert len(levels) == 15 and levels == sorted(levels)
    assert dml.FeatureLevel.FL_6_4 == 0x6400 and dml.FeatureLevel.FL_2_1 == 0x2100
    for text in ("6_4", "6.4", "FL_6_4", "fl_6_4", "DML_FEATURE_LEVEL_6_4", 0x6400):
        assert dml.FeatureLevel.parse(text) is dml.FeatureLevel.FL_6_4
    assert dml.FeatureLevel.FL_2_1 < dml.FeatureLevel.FL_3_0


@pytest.mark.parametrize("bad", ["7_0", "6", "", "6_4_1", None, 6.4, True])
def test_feature_level_parse_errors(bad):
    with pytest.raises(dml.ValidationError, match="FeatureLevel: unknown feature level"):
        dml.FeatureLevel.parse(bad)


@pytest.mark.parametrize("member", [dml.TensorFlags.OWNED_BY_DML, dml.PaddingMode.EDGE])
def test_a_member_of_another_enum_is_no_data_type_or_flag(member):
    """``TensorDesc(TensorFlags.OWNED_BY_DML, sizes)`` (the arguments mixed up) made a FLOAT32 tensor, and
    ``flags=DataType.FLOAT32`` an owned one: an ``IntEnum`` member is an int equal to another enum's value."""
    with pytest.raises(dml.ValidationError, match=rf"^DataType: unknown data type <{type(member).__name__}\."):
        dml.DataType.parse(member)
    with pytest.raises(dml.ValidationError, match=r"^DataType: unknown data type"):
        dml.TensorDesc(member, [2])
    with pytest.raises(dml.ValidationError, match=r"^TensorDesc: Flags must be a TensorFlags or an integer; got "
                                                  r"<DataType.FLOAT32: 1>$"):
        dml.TensorDesc("FLOAT32", [2], flags=dml.DataType.FLOAT32)
    with pytest.raises(dml.ValidationError, match=r"^FeatureLevel: unknown feature level"):
        dml.FeatureLevel.parse(member)
    assert dml.TensorDesc("FLOAT32", [2], flags=1).flags is dml.TensorFlags.OWNED_BY_DML
    assert dml.DataType.parse(1) is dml.DataType.FLOAT32
