"""FLOAT fields and float values at the edges of the double range, through
every front: the array API (NumPy, PyTorch), the descriptions, the JSON form,
DxDispatch models and both commands. An integer beyond the double range
(``10**400``) in a FLOAT field is a ``ValidationError`` naming the field,
never ``OverflowError``; a DxDispatch model follows DxDispatch's parser:
``NaN``/``Infinity`` literals and numbers too big for a double (``1e400``)
are malformed JSON, infinity and NaN are the strings ``"inf"``, ``"-inf"``,
``"nan"``; a finite value too big for the field's type is out of range."""
import io
import json

import numpy as np
import pytest

import opendml as dml
from opendml import dxdispatch
from opendml.cli import main
from opendml.jsonform import JsonFormError, from_json
from opendml.model.tensor_desc import TensorDesc
from opendml.ops import ElementWiseIdentityOperatorDesc, Padding1OperatorDesc, PaddingOperatorDesc, ScaleBias

HUGE = 10**400
X = np.arange(4, dtype=np.float32)


@pytest.mark.parametrize("call, field", [
    (lambda: dml.pad(X, 1, 1, value=HUGE), "PaddingValue"),
    (lambda: dml.pad(X, 1, 1, value=-HUGE), "PaddingValue"),
    (lambda: dml.identity(X, scale=HUGE), "ScaleBias.Scale"),
    (lambda: dml.identity(X, bias=-HUGE), "ScaleBias.Bias"),
    (lambda: PaddingOperatorDesc(TensorDesc("FLOAT32", [4]), None, 0, HUGE, (1,), (1,)), "PaddingValue"),
    (lambda: Padding1OperatorDesc(TensorDesc("FLOAT64", [4]), None, 0, "FLOAT64", HUGE, (1,), (1,)),
     "PaddingValue"),
    (lambda: ElementWiseIdentityOperatorDesc(TensorDesc("FLOAT16", [4]), None, ScaleBias(1.0, HUGE)),
     "ScaleBias.Bias"),
])
def test_an_integer_beyond_the_double_range_is_a_validation_error(call, field):
    with pytest.raises(dml.ValidationError, match=rf"{field} must be a number within the double range") as e:
        call()
    assert len(str(e.value)) < 300                        # the value is shortened, not 401 digits


def test_the_pytorch_front_reaches_the_same_rule():
    torch = pytest.importorskip("torch")
    x = torch.arange(4, dtype=torch.float32)
    with pytest.raises(dml.ValidationError, match="PaddingValue must be a number within the double range"):
        dml.pad(x, 1, 1, value=HUGE)
    with pytest.raises(dml.ValidationError, match=r"ScaleBias\.Scale must be a number within the double range"):
        dml.identity(x, scale=HUGE)


def test_numpy_floats_and_the_largest_double_still_work():
    assert dml.identity(X, scale=np.float64(2.0)).tolist() == [0, 2, 4, 6]
    with pytest.raises(dml.ValidationError, match=r"must fit a FLOAT"):
        dml.identity(X, scale=2**1023)                    # a double, not a FLOAT
    assert dml.pad(X.astype(np.float64), 1, 1, value=2**1023)[0] == 2.0**1023


@pytest.mark.parametrize("form, message", [
    ({"Operator": "PADDING", "InputTensor": {"DataType": "FLOAT32", "Sizes": [4]}, "PaddingMode": "CONSTANT",
      "PaddingValue": HUGE, "StartPadding": [1], "EndPadding": [1]}, r"\$\.PaddingValue: must be a number within"),
    ({"Operator": "ELEMENT_WISE_IDENTITY", "InputTensor": {"DataType": "FLOAT32", "Sizes": [4]},
      "ScaleBias": {"Scale": HUGE, "Bias": 0}}, r"\$\.ScaleBias\.Scale: must be a number within"),
    ({"Operator": "PADDING1", "InputTensor": {"DataType": "FLOAT32", "Sizes": [4]}, "PaddingMode": "CONSTANT",
      "PaddingValue": HUGE, "StartPadding": [1], "EndPadding": [1]}, r"\$\.PaddingValue: must be a number within"),
])
def test_the_json_form(form, message, tmp_path, capsys):
    with pytest.raises(JsonFormError, match=message):
        from_json(form)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(form))
    for command in ("run", "validate"):
        assert main([command, str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "must be a number within the double range" in err


def model(values="[1, 2, 3, 4]", scale="2", data_type="FLOAT32", bias="0"):
    return ('{"resources": {"in": {"initialValuesDataType": "%s", "initialValues": %s}, '
            '"out": {"initialValuesDataType": "%s", "initialValues": {"valueCount": 4, "value": 0}}}, '
            '"dispatchables": {"id": {"type": "DML_OPERATOR_ELEMENT_WISE_IDENTITY", "desc": {'
            '"InputTensor": {"DataType": "%s", "Sizes": [4]}, "OutputTensor": {"DataType": "%s", "Sizes": [4]}, '
            '"ScaleBias": {"Scale": %s, "Bias": %s}}}}, '
            '"commands": [{"type": "dispatch", "dispatchable": "id", "bindings": {"InputTensor": "in", '
            '"OutputTensor": "out"}}, {"type": "print", "resource": "out"}]}'
            % (data_type, values, data_type, data_type, data_type, scale, bias))


def dispatch(text):
    out = io.StringIO()
    dxdispatch.run(dxdispatch.loads(text), out=out)
    return out.getvalue()


@pytest.mark.parametrize("text, message", [
    (model(values="[1, 2, 3, 1e400]"), r"malformed JSON: the number 1e400 is too big to be stored in a double"),
    (model(values="[1, 2, 3, -1E+999]"), r"the number -1E\+999 is too big"),
    (model(scale="1e400"), r"the number 1e400 is too big"),
    (model(values="[1, 2, 3, NaN]"), r"malformed JSON: NaN is not a JSON number; a float value may be the string"),
    (model(values="[1, 2, 3, Infinity]"), r"Infinity is not a JSON number"),
    (model(bias="-Infinity"), r"-Infinity is not a JSON number"),
    (model(scale="1" + "0" * 400), r"dispatchable 'id': desc\.ScaleBias\.Scale: must be a number within the double"),
    (model(values="[1, 2, 3, 1" + "0" * 400 + "]"), r"initialValues\[3\]: 1000.* is out of range for a float"),
    (model(values="[1, 2, 3, 1e39]"), r"initialValues\[3\]: 1e\+39 is out of range for FLOAT32"),
    (model(scale="1e39"), r"ScaleBias\.Scale must fit a FLOAT"),
    (model(values="[1, 2, 3, 70000]", data_type="FLOAT16"), r"70000.0 is out of range for FLOAT16"),
], ids=["1e400-value", "-1e999-value", "1e400-scale", "NaN", "Infinity", "-Infinity", "10**400-scale",
        "10**400-value", "1e39-float32", "1e39-scale", "70000-float16"])
def test_dxdispatch_refuses_what_its_parser_refuses(text, message, tmp_path, capsys):
    with pytest.raises(dml.ValidationError, match=message):
        dispatch(text)
    path = tmp_path / "model.json"
    path.write_text(text)
    assert main(["dispatch", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and captured.err.startswith("opendml: error: ")


def test_dxdispatch_infinity_and_nan_are_strings():
    assert dispatch(model(values='[1, "inf", "-inf", "nan"]')) == "Resource 'out': 2, inf, -inf, nan\n"
    assert dispatch(model(scale='"-inf"', values="[1, 2, 3, 4]")) == "Resource 'out': -inf, -inf, -inf, -inf\n"
    assert dispatch(model(values="[1e308, 2, 3, 4]", data_type="FLOAT64", scale="1")) == \
        "Resource 'out': 1e+308, 2, 3, 4\n"
    assert dispatch(model(values="[3.4028234663852886e38, 0, 0, 0]", scale="1")).startswith(
        "Resource 'out': 3.40282e+38, 0")
