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


@pytest.mark.parametrize("desc, got", [("x", "str"), (None, "NoneType"), ({"Operator": "SLICE1"}, "dict")])
def test_to_json_of_no_description_is_a_type_error_naming_it(desc, got):
    # it raised AttributeError: 'str' object has no attribute 'OPERATOR'
    from opendml.jsonform import to_json
    with pytest.raises(TypeError, match=rf"^to_json: desc must be an operator description; got {got}$"):
        to_json(desc)
