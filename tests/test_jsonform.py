"""``opendml.jsonform`` given a parsed description (a dict) holding values
that JSON has no form for: the errors name the path and the value, never a
bare ``TypeError``/``ValueError`` of the message's own formatting."""
import decimal

import numpy as np
import pytest

from opendml.jsonform import JsonFormError, from_json


def gather(**changes):
    d = {"Operator": "GATHER", "InputTensor": {"DataType": "FLOAT32", "Sizes": [3, 2]},
         "IndicesTensor": {"DataType": "UINT32", "Sizes": [1, 2]},
         "OutputTensor": {"DataType": "FLOAT32", "Sizes": [3, 2]}, "Axis": 1, "IndexDimensions": 1}
    d.update(changes)
    return d


@pytest.mark.parametrize("sizes, shown", [
    (decimal.Decimal(1), r"Decimal\('1'\)"), (np.int64(3), r"np.int64\(3\)"), ([np.int64(3), 2], r"\[np.int64\(3\), 2\]"),
    ({1, 2}, r"\{1, 2\}"),
])
def test_a_value_json_cannot_write_is_named(sizes, shown):
    with pytest.raises(JsonFormError, match=r"^\$\.OutputTensor\.Sizes: must be an array of integers; got " + shown):
        from_json(gather(OutputTensor={"DataType": "FLOAT32", "Sizes": sizes}))


def test_a_dict_holding_itself_is_named():
    d = gather()
    d["OutputTensor"] = {"DataType": "FLOAT32", "Sizes": d}
    with pytest.raises(JsonFormError, match=r"^\$\.OutputTensor\.Sizes: must be an array of integers; got \{"):
        from_json(d)


@pytest.mark.parametrize("value", [np.array(3), np.array([]), np.array([1, 2])])
def test_an_array_for_a_list_of_tensors_is_named(value):
    # ``value == []`` on a NumPy array: "The truth value of an empty array is ambiguous"
    d = {"Operator": "JOIN", "InputTensors": value, "OutputTensor": {"DataType": "FLOAT32", "Sizes": [2]}, "Axis": 0}
    with pytest.raises(JsonFormError, match=r"^\$\.InputTensors: must be a non-empty array of tensor descriptions; "
                                            r"got ndarray"):
        from_json(d)


SLICE1 = {"Operator": "SLICE1", "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 4]},
          "InputWindowOffsets": [0, 0, 0, 1], "InputWindowSizes": [1, 1, 4, 3], "InputWindowStrides": [1, 1, -2, 2]}


@pytest.mark.parametrize("value, shown", [(4.0, "4.0"), ("4", '"4"'), (None, "null"), ([4], r"\[4\]")])
def test_a_dimension_count_must_be_an_integer(value, shown):
    # 4.0 was taken as 4 (4.0 == 4), and "4" refused as if it were another count
    tensor = {**SLICE1["InputTensor"], "DimensionCount": value}
    with pytest.raises(JsonFormError, match=r"^\$\.InputTensor\.DimensionCount: must be an integer \(the length of "
                                            r"Sizes, 4\); got " + shown + "$"):
        from_json({**SLICE1, "InputTensor": tensor})
    with pytest.raises(JsonFormError, match=r"^\$\.DimensionCount: must be an integer \(the length of "
                                            r"InputWindowOffsets, 4\); got " + shown + "$"):
        from_json({**SLICE1, "DimensionCount": value})


@pytest.mark.parametrize("value", [True, 1.0])
def test_true_is_no_count_of_one(value):
    # true == 1 in Python: a 1-D tensor's DimensionCount, and JOIN's InputCount of one input, took true
    with pytest.raises(JsonFormError, match=r"^\$\.InputTensor\.DimensionCount: must be an integer"):
        from_json({"Operator": "ELEMENT_WISE_IDENTITY",
                   "InputTensor": {"DataType": "FLOAT32", "Sizes": [3], "DimensionCount": value}})
    with pytest.raises(JsonFormError, match=r"^\$\.InputCount: must be an integer \(the number of InputTensors, "
                                            r"1\); got (true|1\.0)$"):
        from_json({"Operator": "JOIN", "InputTensors": [{"DataType": "FLOAT32", "Sizes": [2]}], "InputCount": value,
                   "OutputTensor": {"DataType": "FLOAT32", "Sizes": [2]}, "Axis": 0})


def test_counts_that_are_integers_keep_their_messages():
    from_json({**SLICE1, "DimensionCount": 4, "InputTensor": {**SLICE1["InputTensor"], "DimensionCount": 4}})
    with pytest.raises(JsonFormError, match=r"^\$\.DimensionCount: must equal the length of InputWindowOffsets 4; "
                                            r"got 3$"):
        from_json({**SLICE1, "DimensionCount": 3})


@pytest.mark.parametrize("where", ["tensor", "field"])
def test_a_tuple_is_named_as_a_tuple_not_shown_as_the_array_it_is_not(where):
    # "$.InputTensor.Sizes: must be an array of integers; got [1, 1, 4, 4]": json.dumps writes a tuple as an array
    d = {**SLICE1, "InputTensor": {"DataType": "FLOAT32", "Sizes": (1, 1, 4, 4)}} if where == "tensor" else \
        {**SLICE1, "InputWindowOffsets": (0, 0, 0, 1)}
    path = r"\$\.InputTensor\.Sizes" if where == "tensor" else r"\$\.InputWindowOffsets"
    value = r"\(1, 1, 4, 4\)" if where == "tensor" else r"\(0, 0, 0, 1\)"
    with pytest.raises(JsonFormError, match=rf"^{path}: must be an array of integers; got {value}$"):
        from_json(d)


@pytest.mark.parametrize("value", [None, "SLICE1", {"Operator": "SLICE1"}])
def test_to_json_of_no_description_names_its_argument(value):
    # AttributeError: 'NoneType' object has no attribute 'OPERATOR' (or 'data_type') from inside, before
    from opendml.jsonform import tensor_to_json, to_json
    with pytest.raises(TypeError, match=rf"^to_json: desc must be an operator description; got "
                                        rf"{type(value).__name__}$"):
        to_json(value)
    with pytest.raises(TypeError, match=rf"^tensor_to_json: t must be a TensorDesc; got {type(value).__name__}$"):
        tensor_to_json(value)
