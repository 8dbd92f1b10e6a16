import numpy as np
import pytest

import opendml as dml
from opendml.device import host_view

F32, F16 = dml.DataType.FLOAT32, dml.DataType.FLOAT16
letters = np.frombuffer(b"ABCDEFGHIJKL", dtype=np.uint8)


def chars(desc, raw):
    return ["".join(chr(v) for v in row) for row in host_view(np.frombuffer(raw, np.uint8).copy(), desc).reshape(-1, desc.sizes[-1])]


# The strides page, with its letters as data (UINT8 elements).
def test_row_major_and_column_major_2x3():
    row = dml.TensorDesc(dml.DataType.UINT8, [2, 3])
    assert row.element_strides == (3, 1)
    assert chars(row, b"ABCDEF") == ["ABC", "DEF"]
    col = dml.TensorDesc(dml.DataType.UINT8, [2, 3], [1, 2])
    assert chars(col, b"ADBECF") == ["ABC", "DEF"]


def test_dhw_2x2x3_offsets():
    t = dml.TensorDesc(dml.DataType.UINT8, [2, 2, 3])
    assert t.element_strides == (6, 3, 1)
    assert chars(t, letters.tobytes()) == ["ABC", "DEF", "GHI", "JKL"]
    assert sum(i * s for i, s in zip((1, 0, 1), t.element_strides)) == 7  # 'H'


def test_broadcast_height_stride_0():
    t = dml.TensorDesc(dml.DataType.UINT8, [2, 3], [0, 1])
    assert chars(t, b"ABC\0") == ["ABC", "ABC"]
    assert t.min_size_in_bytes == 4  # 3 bytes rounded up to 4


def test_padded_height_stride_5():
    t = dml.TensorDesc(dml.DataType.UINT8, [2, 3], [5, 1])
    assert chars(t, b"ABCxxDEFxx") == ["ABC", "DEF"]


def test_nchw_and_nhwc_strides_of_the_page():
    assert dml.packed_strides([1, 1, 3, 5]) == (15, 15, 5, 1)
    assert dml.nhwc_strides([1, 1, 3, 5]) == (15, 1, 5, 1)
    assert dml.nhwc_strides([2, 3, 4, 5]) == (60, 1, 15, 3)
    assert dml.nhwc_strides([2, 3, 4, 5, 6]) == (360, 1, 90, 18, 3)  # NDHWC
    t = dml.TensorDesc.nhwc(F32, [2, 3, 4, 5])
    assert t.strides == (60, 1, 15, 3) and t.min_size_in_bytes == 2 * 3 * 4 * 5 * 4


@pytest.mark.parametrize("fn", [dml.packed_strides, dml.nhwc_strides], ids=["packed", "nhwc"])
@pytest.mark.parametrize("sizes, message", [
    ([1, -2, 3, 5], r"Sizes\[1\] must be in \[1, 4294967295\]; got -2"),        # returned (15, -15, 5, 1) (packed)
    ([1, 0, 3, 5], r"Sizes\[1\] must be in \[1, 4294967295\]; got 0"),
    ("abcd", r"Sizes must be a sequence of integers; got 'abcd'"),              # a TypeError from inside (packed)
    ([1, 1.5, 3, 5], r"Sizes\[1\] must be an integer; got 1.5 of type float"),   # returned float strides (packed)
    ([2 ** 16, 2 ** 16, 1, 1], r"the element count \(product of Sizes \[65536, 65536, 1, 1\]\) must be <= "),
])
def test_packed_and_nhwc_strides_check_their_sizes_as_tensor_desc_does(fn, sizes, message):
    with pytest.raises(dml.ValidationError, match=rf"^{fn.__name__}: {message}"):
        fn(sizes)


def test_nhwc_elements_through_desc():
    nhwc = np.arange(2 * 4 * 5 * 3, dtype=np.float32).reshape(2, 4, 5, 3)
    t = dml.TensorDesc.nhwc(F32, [2, 3, 4, 5])
    assert np.array_equal(host_view(nhwc.view(np.uint8).reshape(-1).copy(), t), nhwc.transpose(0, 3, 1, 2))


@pytest.mark.parametrize("dtype, sizes, strides, expected", [
    (F32, [1, 8, 28, 28], [8, 1, 0, 0], 32),
    (F16, [1, 1, 1, 3], None, 8),
    (F32, [2, 3], None, 24),
    (dml.DataType.UINT8, [3], None, 4),
    (dml.DataType.FLOAT64, [2, 2], [4, 1], 48),
    (F32, [65535, 65536], [65536, 1], 4 * 65535 * 65536),  # 64-bit arithmetic (> 2**32 bytes)
])
def test_calc_buffer_tensor_size(dtype, sizes, strides, expected):
    assert dml.calc_buffer_tensor_size(dtype, sizes, strides) == expected


def test_total_size_defaults_to_calc_size():
    assert dml.TensorDesc(F16, [1, 1, 1, 3]).total_tensor_size_in_bytes == 8
    assert dml.TensorDesc(F16, [1, 1, 1, 3], total_tensor_size_in_bytes=64).total_tensor_size_in_bytes == 64


def test_accepts_numpy_integers_and_normalises_to_tuples():
    t = dml.TensorDesc("FLOAT32", np.array([2, 3]), [np.int64(3), 1])
    assert t.sizes == (2, 3) and t.strides == (3, 1) and t.data_type is F32
    assert repr(t) == "TensorDesc(DataType.FLOAT32, sizes=[2, 3], strides=[3, 1])"


@pytest.mark.parametrize("kwargs, message", [
    (dict(sizes=[]), r"TensorDesc: DimensionCount must be in \[1, 8\]; got 0"),
    (dict(sizes=[1] * 9), r"DimensionCount must be in \[1, 8\]; got 9"),
    (dict(sizes=[2, 0]), r"TensorDesc: Sizes\[1\] must be in \[1, 4294967295\]; got 0"),
    (dict(sizes=[-3]), r"Sizes\[0\] must be in \[1, 4294967295\]; got -3"),
    (dict(sizes=[2**32]), r"Sizes\[0\] must be in \[1, 4294967295\]; got 4294967296"),
    (dict(sizes=[2**16, 2**16]), r"element count \(product of Sizes \[65536, 65536\]\) must be <= 4294967295; got 4294967296"),
    (dict(sizes=[2, 2], strides=[2, -1]), r"Strides\[1\] must be in \[0, 4294967295\]; got -1"),
    (dict(sizes=[2, 2], strides=[1]), r"Strides must have 2 entries \(one per dimension\); got 1"),
    (dict(sizes=[2, 2], total_tensor_size_in_bytes=15), r"TotalTensorSizeInBytes must be >= DMLCalcBufferTensorSize = 16 \(and fit in 64 bits\); got 15"),
    (dict(sizes=[2], guaranteed_base_offset_alignment=2), r"GuaranteedBaseOffsetAlignment must be 0 or a power of two >= the element size 4 and <= 2147483648 \(the largest a UINT holds\); got 2"),
    (dict(sizes=[2], guaranteed_base_offset_alignment=24), r"power of two >= the element size 4 and <= 2147483648 .*; got 24"),
    # a power of two past a UINT's range was refused as "must be 0 or a power of two >= the element size 4", which
    # it is: the message now gives the whole rule, its upper bound too
    (dict(sizes=[2], guaranteed_base_offset_alignment=2**32), r"^TensorDesc: GuaranteedBaseOffsetAlignment must be "
     r"0 or a power of two >= the element size 4 and <= 2147483648 \(the largest a UINT holds\); got 4294967296$"),
    (dict(sizes=[2], guaranteed_base_offset_alignment=2**40), r"and <= 2147483648 .*; got 1099511627776$"),
    (dict(sizes=[2], flags=2), r"Flags must be NONE \(0\) or OWNED_BY_DML \(1\); got 2"),
    (dict(sizes=[2.0]), r"TensorDesc: Sizes\[0\] must be an integer; got 2.0 of type float"),
    (dict(sizes=[True]), r"Sizes\[0\] must be an integer; got True"),
    (dict(sizes="12"), r"Sizes must be a sequence of integers; got '12'"),
    (dict(sizes=5), r"Sizes must be a sequence of integers; got int"),
    (dict(sizes=[2], data_type="FLOAT128"), r"DataType: unknown data type 'FLOAT128'"),
    (dict(sizes=[2], data_type=dml.DataType.UINT4), r"DataType UINT4 is not an element type"),
])
def test_rules_on_construction(kwargs, message):
    kwargs = {"data_type": F32, **kwargs}
    with pytest.raises(dml.ValidationError, match=message):
        dml.TensorDesc(**kwargs)


def test_huge_sizes_allocate_nothing():
    t = dml.TensorDesc(dml.DataType.UINT8, [2**32 - 1], [2**32 - 1])  # a description only
    assert t.total_tensor_size_in_bytes == ((2**32 - 2) * (2**32 - 1) + 1 + 3) & ~3
    with pytest.raises(dml.ValidationError, match="DMLCalcBufferTensorSize must fit in 64 bits"):
        dml.TensorDesc(dml.DataType.FLOAT64, [2**31], [2**32 - 1])
    t = dml.TensorDesc(F32, [2, 2**31 - 1], [2**32 - 1, 1])
    assert t.total_tensor_size_in_bytes == ((2**32 - 1) + 2**31 - 2 + 1) * 4


# -- issue 14: calc_buffer_tensor_size validates like TensorDesc; field values
# that are not ordered sequences of integers are refused with a message.

@pytest.mark.parametrize("sizes, strides, message", [
    ([-5], None, r"calc_buffer_tensor_size: Sizes\[0\] must be in \[1, 4294967295\]; got -5"),
    ([0], None, r"calc_buffer_tensor_size: Sizes\[0\] must be in \[1, 4294967295\]; got 0"),
    ([2, 2], [-10, 1], r"calc_buffer_tensor_size: Strides\[0\] must be in \[0, 4294967295\]; got -10"),
    ([2**64], None, r"calc_buffer_tensor_size: Sizes\[0\] must be in \[1, 4294967295\]; got 18446744073709551616"),
    ([], None, r"calc_buffer_tensor_size: DimensionCount must be in \[1, 8\]; got 0"),
    ([1] * 9, None, r"DimensionCount must be in \[1, 8\]; got 9"),
    ([2**16, 2**16], None, r"element count \(product of Sizes \[65536, 65536\]\) must be <= 4294967295"),
    ([2, 2], [1], r"Strides must have 2 entries"),
    ([2.0], None, r"Sizes\[0\] must be an integer; got 2.0"),
])
def test_calc_buffer_tensor_size_validates_like_tensor_desc(sizes, strides, message):
    with pytest.raises(dml.ValidationError, match=message):
        dml.calc_buffer_tensor_size(F32, sizes, strides)


def test_calc_buffer_tensor_size_refuses_types_and_64_bit_overflow():
    with pytest.raises(dml.ValidationError, match="DataType UINT4 is not an element type"):
        dml.calc_buffer_tensor_size(dml.DataType.UINT4, [2])
    with pytest.raises(dml.ValidationError, match="unknown data type 'FLOAT128'"):
        dml.calc_buffer_tensor_size("FLOAT128", [2])
    with pytest.raises(dml.ValidationError, match="must fit in 64 bits"):
        dml.calc_buffer_tensor_size(dml.DataType.FLOAT64, [2**31], [2**32 - 1])
    assert dml.calc_buffer_tensor_size(F32, [2**32 - 1], [0]) == 4


@pytest.mark.parametrize("value, message", [
    ({0: 9, 1: 9}, r"Sizes must be a sequence of integers, not a mapping; got \{0: 9, 1: 9\}"),
    ({2, 3}, r"Sizes must be a sequence of integers, not a set \(it has no order\)"),
    (np.ma.array([2, 3], mask=[False, True]), r"Sizes must be a sequence of integers; got a masked array"),
    (np.int64(3), r"Sizes must be a sequence of integers; got the scalar 3"),
    (b"\x02\x03", r"Sizes must be a sequence of integers; got b'\\x02\\x03'"),
    ("x" * 10000, r"got 'x{10,}\.\.\.x+'$"),            # a bounded message
])
def test_sizes_that_are_no_sequence_are_refused(value, message):
    with pytest.raises(dml.ValidationError, match=message):
        dml.TensorDesc(F32, value)


def test_offsets_given_as_a_dict_are_refused():
    t = dml.TensorDesc(F32, [10, 10])
    with pytest.raises(dml.ValidationError, match=r"SLICE: Offsets must be a sequence of integers, not a mapping"):
        dml.SliceOperatorDesc(t, None, {0: 9, 1: 9}, [1, 1], [1, 1])


def test_an_endless_iterator_is_read_no_further_than_the_limit():
    import itertools
    with pytest.raises(dml.ValidationError, match=r"Sizes has more than 64 entries"):
        dml.TensorDesc(F32, itertools.count(1))
    assert dml.TensorDesc(F32, iter([2, 3])).sizes == (2, 3)


def test_messages_of_huge_values_stay_short():
    with pytest.raises(dml.ValidationError) as e:
        dml.TensorDesc(F32, [[[[[[[[1]]]]]]]] * 3)
    assert len(str(e.value)) < 200
    with pytest.raises(dml.ValidationError) as e:
        dml.TensorDesc("F" * 100000, [1])
    assert len(str(e.value)) < 400


def test_with_recomputes_a_default_total_size_and_keeps_a_given_one():
    TensorDesc, DataType, ValidationError = dml.TensorDesc, dml.DataType, dml.ValidationError
    # the computed total (the minimum) was carried over as if given: growing
    # the sizes was refused ("TotalTensorSizeInBytes must be >= 16; got 8")
    t = TensorDesc(DataType.FLOAT32, [2])
    assert t.with_(sizes=[4]).total_tensor_size_in_bytes == 16
    assert t.with_(sizes=[1]) == TensorDesc(DataType.FLOAT32, [1])
    assert t.with_(data_type=DataType.FLOAT64).total_tensor_size_in_bytes == 16
    assert t.with_(strides=[3]).total_tensor_size_in_bytes == 16
    padded = TensorDesc(DataType.FLOAT32, [2], total_tensor_size_in_bytes=64)
    assert padded.with_(sizes=[4]).total_tensor_size_in_bytes == 64
    with pytest.raises(ValidationError, match="TotalTensorSizeInBytes must be >= DMLCalcBufferTensorSize = 128"):
        padded.with_(sizes=[32])
    assert t.with_(sizes=[4], total_tensor_size_in_bytes=20).total_tensor_size_in_bytes == 20


@pytest.mark.parametrize("value, hint", [(np.float32, True), (np.dtype("int8"), True), (99, False), (1.5, False),
                                         (None, False)])
def test_an_unknown_data_type_names_the_forms_taken(value, hint):
    """A data type that is none of the forms ``TensorDesc`` takes names them (a DataType, its name, its value) and, for
    a NumPy dtype, the conversion (it said only "DataType: unknown data type <class 'numpy.float32'>")."""
    with pytest.raises(dml.ValidationError, match=r"^DataType: unknown data type .*; expected a DataType, its name "
                                                  r"\(UNKNOWN, FLOAT32, .*, INT4, any case\) or its value \(0 to 13\)"
                                                  + (r"; a NumPy dtype's is DataType.from_numpy\(dtype\)$" if hint else "$")):
        dml.TensorDesc(value, [2])
    if hint:
        assert dml.TensorDesc(dml.DataType.from_numpy(value), [2]).data_type in dml.DataType
