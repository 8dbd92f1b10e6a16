"""DxDispatch models (``opendml.dxdispatch`` and ``opendml dispatch``): the
sample models of DxDispatch whose operators opendml has, with outputs worked
out by hand from the operator pages; resources and their initialisers;
DirectML's binding rules; print and writeFile; --output-dir; the bundled
examples as models. Random models (tests/test_properties.py's generators) and
the fuzz test are in tests/test_dxdispatch_properties.py."""
import io
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import opendml as dml
from opendml import dxdispatch
from opendml.cli import EXAMPLE_ORDER, examples, main
from opendml.jsonform import from_json
from opendml.ops import OPERATORS

F32 = "FLOAT32"


def write(tmp_path, model, name="model.json"):
    p = tmp_path / name
    p.write_text(model if isinstance(model, str) else json.dumps(model))
    return str(p)


def slice_model(**over):
    """DxDispatch's ``dml_slice.json`` (written out again here): a 5x5 input 1..25,
    rows 1..3 and columns 1, 3 of it."""
    m = {
        "$schema": "./_schema.json",
        "resources": {
            "input": {"initialValuesDataType": F32, "initialValues": {"valueCount": 25, "valueStart": 1,
                                                                       "valueDelta": 1}},
            "output": {"initialValuesDataType": F32, "initialValues": {"valueCount": 6, "value": 0}},
        },
        "dispatchables": {"slice": {"type": "DML_OPERATOR_SLICE", "desc": {
            "InputTensor": {"DataType": F32, "Sizes": [1, 1, 5, 5]},
            "OutputTensor": {"DataType": F32, "Sizes": [1, 1, 3, 2]},
            "DimensionCount": 4, "Offsets": [0, 0, 1, 1], "Sizes": [1, 1, 3, 2], "Strides": [1, 1, 1, 2]}}},
        "commands": [
            {"type": "dispatch", "dispatchable": "slice",
             "bindings": {"InputTensor": "input", "OutputTensor": "output"}},
            {"type": "print", "resource": "output"},
        ],
    }
    m.update(over)
    return m


def run(model, **kw):
    import io
    out = io.StringIO()
    results = dxdispatch.run(model, out=out, **kw)
    return results, out.getvalue()


# -- DxDispatch's sample models ------------------------------------------------------------

def test_sample_slice(tmp_path):
    # SLICE: Output[c] = Input[Offsets + Strides * c]. Input row r, column k holds 5r + k + 1;
    # rows 1, 2, 3 and columns 1, 3 give 7, 9 / 12, 14 / 17, 19.
    results, text = run(write(tmp_path, slice_model()))
    assert text == "Resource 'output': 7, 9, 12, 14, 17, 19\n"
    assert results["output"].dtype == np.float32 and results["output"].tolist() == [7, 9, 12, 14, 17, 19]
    assert results["input"].tolist() == list(range(1, 26))


def _needs(name):
    return pytest.mark.skipif(name not in OPERATORS, reason=f"DML_OPERATOR_{name} is not in opendml.ops yet")


@_needs("JOIN")
def test_sample_join():
    # DxDispatch's dml_join.json: A = 1..10, B = 100, 115, 130. JOIN along axis 0 of A[0:3],
    # B's first 2 elements (InputTensors[1] has Sizes [2]) and A[4:9] gives
    # 1, 2, 3, 100, 115, 5, 6, 7, 8, 9.
    m = {"resources": {
        "A": {"initialValuesDataType": F32, "initialValues": {"valueCount": 10, "valueStart": 1, "valueDelta": 1}},
        "B": {"initialValuesDataType": F32, "initialValues": {"valueCount": 3, "valueStart": 100, "valueDelta": 15}},
        "Out": {"initialValuesDataType": F32, "initialValues": {"valueCount": 10, "value": 0}}},
        "dispatchables": {"join": {"type": "DML_OPERATOR_JOIN", "desc": {
            "Axis": 0, "InputCount": 3,
            "InputTensors": [{"DataType": F32, "Sizes": [3]}, {"DataType": F32, "Sizes": [2]},
                             {"DataType": F32, "Sizes": [5]}],
            "OutputTensor": {"DataType": F32, "Sizes": [10]}}}},
        "commands": [{"type": "dispatch", "dispatchable": "join", "bindings": {
            "InputTensors": [{"name": "A", "elementCount": 3, "elementOffset": 0}, "B",
                             {"name": "A", "elementCount": 5, "elementOffset": 4}],
            "OutputTensor": "Out"}}, {"type": "print", "resource": "Out"}]}
    results, text = run(m)
    assert text == "Resource 'Out': 1, 2, 3, 100, 115, 5, 6, 7, 8, 9\n"


@_needs("SPLIT")
def test_sample_split():
    # DxDispatch's dml_split.json: 1..6 split along axis 0 into three pieces of 2.
    m = {"resources": {
        "A": {"initialValuesDataType": F32, "initialValues": [1, 2, 3, 4, 5, 6]},
        **{f"Out{i}": {"initialValuesDataType": F32, "initialValues": {"valueCount": 2, "value": 0}}
           for i in (1, 2, 3)}},
        "dispatchables": {"split": {"type": "DML_OPERATOR_SPLIT", "desc": {
            "Axis": 0, "InputTensor": {"DataType": F32, "Sizes": [6]}, "OutputCount": 3,
            "OutputTensors": [{"DataType": F32, "Sizes": [2]}] * 3}}},
        "commands": [{"type": "dispatch", "dispatchable": "split",
                      "bindings": {"InputTensor": "A", "OutputTensors": ["Out1", "Out2", "Out3"]}},
                     *({"type": "print", "resource": f"Out{i}"} for i in (1, 2, 3))]}
    results, text = run(m)
    assert text == "Resource 'Out1': 1, 2\nResource 'Out2': 3, 4\nResource 'Out3': 5, 6\n"


@_needs("ELEMENT_WISE_IDENTITY")
def test_sample_element_wise_identity():
    # DxDispatch's dml_element_wise_identity.json: ScaleBias {2, 10}: x * 2 + 10 of 1, 2, 3.
    m = {"resources": {"A": {"initialValuesDataType": F32, "initialValues": [1, 2, 3]},
                       "Out": {"initialValuesDataType": F32, "initialValues": {"valueCount": 3, "value": 0}}},
         "dispatchables": {"identity": {"type": "DML_OPERATOR_ELEMENT_WISE_IDENTITY", "desc": {
             "InputTensor": {"DataType": F32, "Sizes": [3]}, "OutputTensor": {"DataType": F32, "Sizes": [3]},
             "ScaleBias": {"Scale": 2, "Bias": 10}}}},
         "commands": [{"type": "dispatch", "dispatchable": "identity",
                       "bindings": {"InputTensor": "A", "OutputTensor": "Out"}},
                      {"type": "print", "resource": "Out"}]}
    results, text = run(m)
    assert text == "Resource 'Out': 12, 14, 16\n"


@pytest.mark.parametrize("op, desc", [
    # DxDispatch's dml_scalar_union_fp16.json and the Guide's first model: not data movement
    ("DML_OPERATOR_ELEMENT_WISE_CLIP1", {"InputTensor": {"DataType": "FLOAT16", "Sizes": [5]},
                                         "OutputTensor": {"DataType": "FLOAT16", "Sizes": [5]},
                                         "MinMaxDataType": "FLOAT16", "Min": 2, "Max": 4}),
    ("DML_OPERATOR_ELEMENT_WISE_ADD", {"ATensor": {"DataType": F32, "Sizes": [3]},
                                       "BTensor": {"DataType": F32, "Sizes": [3]},
                                       "OutputTensor": {"DataType": F32, "Sizes": [3]}}),
    ("REDUCE", {}),
    ("DML_OPERATOR_TOP_K1", {}),
])
def test_directml_operators_opendml_lacks_are_unsupported(tmp_path, op, desc, capsys):
    m = {"resources": {"x": {"initialValuesDataType": F32, "initialValues": [1, 2, 3]}},
         "dispatchables": {"d": {"type": op, "desc": desc}}, "commands": []}
    name = "DML_OPERATOR_" + op.removeprefix("DML_OPERATOR_").replace("SCATTER", "SCATTER_ELEMENTS")
    with pytest.raises(dml.UnsupportedError, match=f"dispatchable 'd': {name} is a DirectML operator that "
                                                   f"opendml does not implement"):
        run(m)
    assert main(["dispatch", write(tmp_path, m)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and name in err


def test_unknown_operator_and_other_dispatchables(tmp_path):
    m = slice_model()
    m["dispatchables"]["slice"]["type"] = "DML_OPERATOR_SLICE7"
    with pytest.raises(dxdispatch.ModelError,
                       match=r"dispatchable 'slice'.type: unknown operator \"DML_OPERATOR_SLICE7\""):
        run(m)
    m["dispatchables"]["slice"] = {"type": "hlsl", "sourcePath": "a.hlsl", "compiler": "dxc", "compilerArgs": []}
    with pytest.raises(dml.DmlError, match="dispatchable 'slice'"):
        run(m)


def test_an_integer_too_long_to_read_is_a_model_error():
    """The model reader shares the JSON form's guard on integer length: a
    ModelError naming the digits, never Python's own ValueError."""
    text = '{"resources": {"r": {"initialValuesDataType": "UINT8", "initialValues": [' + "9" * 5000 + ']}}}'
    with pytest.raises(dxdispatch.ModelError, match=r"an integer of 5000 digits \(999999999999\.\.\.\) is longer "
                                                    r"than the 4300 digits"):
        dxdispatch.loads(text)


def test_operator_type_values_match_the_registry():
    for name, cls in OPERATORS.items():
        assert dxdispatch.OPERATOR_TYPES[cls.TYPE_VALUE] == name
    assert dxdispatch.OPERATOR_TYPES[0] == "INVALID" and len(set(dxdispatch.OPERATOR_TYPES)) == 178


# -- the desc: abbreviations and DirectML's field names ------------------------------------

def test_abbreviations_and_full_names_give_the_same_run():
    full = slice_model()
    d = full["dispatchables"]["slice"]
    d["type"] = "SLICE"
    d["desc"]["InputTensor"] = {"Type": "DML_TENSOR_TYPE_BUFFER", "Desc": {
        "DataType": "DML_TENSOR_DATA_TYPE_FLOAT32", "Flags": "DML_TENSOR_FLAG_NONE", "DimensionCount": 4,
        "Sizes": [1, 1, 5, 5], "Strides": [25, 25, 5, 1], "TotalTensorSizeInBytes": 100,
        "GuaranteedBaseOffsetAlignment": 0}}
    d["desc"]["OutputTensor"] = {"Type": "BUFFER", "DataType": F32, "Sizes": [1, 1, 3, 2], "Flags": ["NONE"],
                                 "TotalTensorSizeInBytes": 0, "Strides": []}
    full["resources"]["input"]["initialValuesDataType"] = "DML_TENSOR_DATA_TYPE_FLOAT32"
    d["executionFlags"] = ["DML_EXECUTION_FLAG_NONE", "DESCRIPTORS_VOLATILE"]
    d["dmlCompileType"] = "DmlCompileGraph"
    results, text = run(full)
    assert text == "Resource 'output': 7, 9, 12, 14, 17, 19\n"


@_needs("PADDING1")
@pytest.mark.parametrize("mode, value_type, value, fill", [
    ("DML_PADDING_MODE_CONSTANT", "FLOAT16", {"UInt16": 0x3C00}, 1.0),     # FLOAT16 given by its bits
    ("CONSTANT", "DML_TENSOR_DATA_TYPE_FLOAT16", 1 + 2**-11 + 2**-40, 1.0),  # through FLOAT32, as DxDispatch
    ("CONSTANT", "FLOAT16", {"Float32": -2.5}, -2.5),
    ("CONSTANT", "FLOAT16", "-inf", -math.inf),
    ("CONSTANT", "FLOAT16", "NaN", math.nan),
])
def test_padding_value_as_a_scalar_union(mode, value_type, value, fill):
    # PADDING1 of [1, 2] (FLOAT16) by one element on each side: [v, 1, 2, v].
    m = {"resources": {"x": {"initialValuesDataType": "FLOAT16", "initialValues": [1, 2]},
                       "y": {"initialValuesDataType": "FLOAT16", "initialValues": {"valueCount": 4, "value": 7}}},
         "dispatchables": {"pad": {"type": "PADDING1", "desc": {
             "InputTensor": {"DataType": "FLOAT16", "Sizes": [2]},
            "OutputTensor": {"DataType": "FLOAT16", "Sizes": [4]},
             "PaddingMode": mode, "PaddingValueDataType": value_type, "PaddingValue": value,
             "DimensionCount": 1, "StartPadding": [1], "EndPadding": [1]}}},
         "commands": [{"type": "dispatch", "dispatchable": "pad",
                      "bindings": {"InputTensor": "x", "OutputTensor": "y"}}]}
    y = run(m)[0]["y"]
    assert y[1:3].tolist() == [1, 2]
    assert np.array_equal(y[[0, 3]], np.array([fill, fill], np.float16), equal_nan=True)


def test_desc_errors_name_the_dispatchable_and_field():
    m = slice_model()
    m["dispatchables"]["slice"]["desc"]["Offsets"] = [0, 0, 4, 1]
    with pytest.raises(dml.ValidationError, match=r"dispatchable 'slice': SLICE: Offsets\[2\] \+ \(Sizes\[2\] - 1\)"):
        run(m)
    m = slice_model()
    m["dispatchables"]["slice"]["desc"]["Colour"] = 1
    with pytest.raises(dml.ValidationError,
                       match=r"dispatchable 'slice': desc: unknown field 'Colour'; DML_SLICE_OPERATOR_DESC has "
                             r"InputTensor, OutputTensor, DimensionCount, Offsets, Sizes, Strides"):
        run(m)
    m = slice_model()
    del m["dispatchables"]["slice"]["desc"]["OutputTensor"]
    with pytest.raises(dxdispatch.ModelError,
                       match=r"dispatchable 'slice': desc: missing required field 'OutputTensor'"):
        run(m)
    m = slice_model()
    m["dispatchables"]["slice"]["desc"]["InputTensor"]["Sizes"] = [1, 1, 2**31, 2**31]
    with pytest.raises(dml.ValidationError, match=r"dispatchable 'slice': desc.InputTensor: .*element count"):
        run(m)
    m = slice_model()
    m["dispatchables"]["slice"]["desc"]["InputTensor"]["DataType"] = "FLOAT128"
    with pytest.raises(dxdispatch.ModelError, match=r"desc.InputTensor.DataType: unknown data type \"FLOAT128\""):
        run(m)


def test_feature_level_applies_to_every_dispatchable():
    m = slice_model()
    m["dispatchables"]["slice"]["type"] = "DML_OPERATOR_SLICE1"
    m["dispatchables"]["slice"]["desc"] = {
        "InputTensor": {"DataType": F32, "Sizes": [1, 1, 5, 5]},
        "OutputTensor": {"DataType": F32, "Sizes": [1, 1, 3, 2]},
        "InputWindowOffsets": [0, 0, 1, 1], "InputWindowSizes": [1, 1, 3, 3], "InputWindowStrides": [1, 1, 1, 2]}
    assert run(m, feature_level="2_1")[0]["output"].tolist() == [7, 9, 12, 14, 17, 19]
    with pytest.raises(dml.UnsupportedError, match="dispatchable 'slice': SLICE1: the operator was introduced in "
                                                   "feature level 2_1; got feature level 2_0"):
        run(m, feature_level="2_0")


# -- resources -------------------------------------------------------------------------------

def one_resource(spec, tmp_path=None):
    m = {"resources": {"r": spec}, "dispatchables": {}, "commands": [{"type": "print", "resource": "r"}]}
    if tmp_path is None:
        return run(m)
    return run(write(tmp_path, m))


@pytest.mark.parametrize("dtype, values, expect", [
    ("FLOAT16", [65504, -65504, 4, 3, -4, -6, "nan", "inf", "-inf"], "65504, -65504, 4, 3, -4, -6, nan, inf, -inf"),
    ("FLOAT32", [0.1, -0.0, 1e-7, 123456789, "NaN", "-INF"], "0.1, -0, 1e-07, 1.23457e+08, nan, -inf"),
    ("FLOAT64", [1.0 / 3, 2.5e300], "0.333333, 2.5e+300"),
    ("INT8", [-128, 127, 0], "-128, 127, 0"),
    ("UINT8", [0, 255], "0, 255"),
    ("INT64", [-(2**63), 2**63 - 1], f"{-(2**63)}, {2**63 - 1}"),
    ("UINT64", [2**64 - 1], f"{2**64 - 1}"),
])
def test_array_initialisers_and_print(dtype, values, expect):
    results, text = one_resource({"initialValuesDataType": dtype, "initialValues": values})
    assert text == f"Resource 'r': {expect}\n"
    assert results["r"].dtype == dml.DataType[dtype].numpy_dtype


def test_print_shows_the_initial_values_and_output_dir_the_whole_buffer():
    # 5 FLOAT16 values take 10 bytes; the buffer is 12 (4-byte rounding): print shows 5, the results 6.
    results, text = one_resource({"initialValuesDataType": "FLOAT16",
                                  "initialValues": {"valueCount": 5, "valueStart": 1, "valueDelta": 1}})
    assert text == "Resource 'r': 1, 2, 3, 4, 5\n" and results["r"].tolist() == [1, 2, 3, 4, 5, 0]
    results, _ = one_resource({"initialValuesDataType": "INT16", "initialValues": [7], "sizeInBytes": 9})
    assert results["r"].tolist() == [7, 0, 0, 0]            # 9 bytes: 4 whole INT16 elements
    results, text = one_resource({"initialValuesDataType": "UINT32", "initialValues": [1, 2],
                                  "initialValuesOffsetInBytes": 4, "sizeInBytes": 16})
    assert results["r"].tolist() == [0, 1, 2, 0] and text == "Resource 'r': 0, 1\n"


def test_verbose_print_gives_index_value_and_bits():
    _, text = one_resource({"initialValuesDataType": "FLOAT32", "initialValues": [1, -2] + [0] * 9})
    assert text.startswith("Resource 'r': 1, -2, 0")
    m = {"resources": {"r": {"initialValuesDataType": "INT8", "initialValues": list(range(-1, 10))}},
         "dispatchables": {}, "commands": [{"type": "print", "resource": "r", "verbose": True}]}
    _, text = run(m)
    lines = text.split("\n")
    assert lines[0] == "Resource 'r':" and lines[1] == "[ 0] -1 (0xFF)" and lines[2] == "[ 1] 0 (0x 0)"
    assert lines[11] == "[10] 9 (0x 9)"


def test_sequences_accumulate_in_the_type():
    # FLOAT16: 2049 + 1 rounds back to 2048 (11 bits of mantissa), so the sequence sticks there.
    r, _ = one_resource({"initialValuesDataType": "FLOAT16",
                         "initialValues": {"valueCount": 4, "valueStart": 2047, "valueDelta": 1}})
    assert r["r"].tolist() == [2047, 2048, 2048, 2048]
    r, _ = one_resource({"initialValuesDataType": "FLOAT32",
                         "initialValues": {"valueCount": 4, "valueStart": 1, "valueDelta": 2.5}})
    assert r["r"].tolist() == [1, 3.5, 6, 8.5]                 # the Guide's example
    r, _ = one_resource({"initialValuesDataType": "INT8",
                         "initialValues": {"valueCount": 3, "valueStart": 127, "valueDelta": -100}})
    assert r["r"].tolist() == [127, 27, -73, 0]                # 3 bytes: a buffer of 4
    r, _ = one_resource({"initialValuesDataType": "UINT64",
                         "initialValues": {"valueCount": 2, "valueStart": 2**64 - 2, "valueDelta": 1}})
    assert r["r"].tolist() == [2**64 - 2, 2**64 - 1]


def test_float16_values_round_through_float32_as_dxdispatch_does():
    # 1 + 2**-11 + 2**-40 lies just above the FLOAT16 tie between 1 and 1 + 2**-10: to FLOAT16
    # directly it rounds up; through FLOAT32 (DxDispatch's half(float(value))) the FLOAT32 rounding
    # lands on the tie, which rounds to even: 1.
    v = 1 + 2**-11 + 2**-40
    assert float(np.float16(v)) == 1 + 2**-10
    r, _ = one_resource({"initialValuesDataType": "FLOAT16", "initialValues": [v]})
    assert r["r"][0] == 1.0


def test_list_initialiser_of_mixed_types():
    spec = {"initialValuesDataType": "UNKNOWN", "sizeInBytes": 32, "initialValues": [
        {"name": "elementCount", "type": "UINT32", "value": 6}, {"name": "alpha", "type": "FLOAT32", "value": 6},
        {"type": "INT8", "value": -1}]}
    m = {"resources": {"r": spec}, "dispatchables": {}, "commands": []}
    results, _ = run(m)
    raw = results["r"]
    assert raw.dtype == np.uint8 and raw.size == 32
    assert raw[:4].view(np.uint32)[0] == 6 and raw[4:8].view(np.float32)[0] == 6 and raw[8] == 255


@pytest.mark.parametrize("spec, message", [
    ({"initialValuesDataType": "UINT8", "initialValues": [256]}, r"initialValues\[0\]: 256 is out of range for UINT8"),
    ({"initialValuesDataType": "INT8", "initialValues": [1, -129]}, r"initialValues\[1\]: -129 is out of range"),
    ({"initialValuesDataType": "INT32", "initialValues": [1.5]}, r"initialValues\[0\]: must be a signed integer"),
    ({"initialValuesDataType": "UINT32", "initialValues": [1.0]}, r"must be an unsigned integer"),
    ({"initialValuesDataType": "INT32", "initialValues": ["nan"]}, r"must be a signed integer"),
    ({"initialValuesDataType": "FLOAT16", "initialValues": [70000]}, r"70000.0 is out of range for FLOAT16"),
    ({"initialValuesDataType": "FLOAT32", "initialValues": [1e39]}, r"out of range for FLOAT32"),
    ({"initialValuesDataType": "FLOAT32", "initialValues": ["infinity"]}, r"must be a number or \"nan\""),
    ({"initialValuesDataType": "FLOAT32", "initialValues": [True]}, r"must be a number"),
    ({"initialValuesDataType": "FLOAT32", "initialValues": []}, r"initialValues must not be empty"),
    ({"initialValuesDataType": "UNKNOWN", "initialValues": [1]}, r"every entry must be an object"),
    ({"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 0, "value": 1}},
     r"valueCount: must be in \[1, 4294967295\]"),
    ({"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 2, "value": 1, "valueStart": 1}},
     r"exactly one of value"),
    ({"initialValues": {"valueCount": 2, "value": 1}}, r"initialValuesDataType is required"),
    ({"initialValuesDataType": "UINT8", "initialValues": {"valueCount": 3, "valueStart": 250, "valueDelta": 3}},
     r"the sequence leaves UINT8 \[0, 255\]: valueStart \+ \(valueCount - 1\) \* valueDelta = 250 \+ 2 \* 3 = 256"),
    ({"initialValuesDataType": "UINT8", "initialValues": {"valueCount": 3, "valueStart": 9, "valueDelta": -1}},
     r"valueDelta: -1 is out of range for UINT8"),
    ({"initialValuesDataType": "FLOAT16", "initialValues": {"valueCount": 3, "valueStart": 65504,
                                                             "valueDelta": 65504}},
     r"entry 1 of the sequence overflows"),
    ({"initialValuesDataType": "FLOAT32", "initialValues": [1, 2], "sizeInBytes": 7}, r"sizeInBytes 7 is too small"),
    ({"initialValuesDataType": "FLOAT32", "initialValues": [1], "sizeInBytes": 2**64},
     r"sizeInBytes: must be in \[1, 18446744073709551615\]"),
    ({"initialValuesDataType": "FLOAT32", "initialValues": [1], "sizeInBytes": 2**50},
     r"the buffer \(sizeInBytes 1125899906842624\) takes 1125899906842624 bytes; the model's resources may take"),
    ({"initialValuesDataType": "FLOAT64", "initialValues": {"valueCount": 2**32 - 1, "value": 0}},
     r"takes 34359738360 bytes"),
    ({"initialValuesDataType": "FLOAT32", "initialValues": [1], "colour": 3}, r"unknown field 'colour'"),
    ({"initialValuesDataType": "FLOAT32", "initialValues": "deferred"}, r"ONNX"),
    ({"type": "texture", "initialValuesDataType": "FLOAT32", "initialValues": [1]}, r"resources are buffers"),
])
def test_bad_initialisers_name_the_resource_field_and_rule(spec, message):
    with pytest.raises(dml.DmlError, match=r"resource 'r'.*" + message):
        one_resource(spec)


def test_file_initialisers(tmp_path):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "big.npy", x.astype(">i2"))               # byte-swapped: read as INT16
    np.save(tmp_path / "f.npy", np.asfortranarray(x))             # Fortran order: the logical array, C order
    np.save(tmp_path / "b.npy", np.array([True, False, True]))     # bool: UINT8, as DxDispatch reads it
    (tmp_path / "raw.dat").write_bytes(np.array([1, 2, 3], np.int32).tobytes())
    (tmp_path / "sub").mkdir()
    np.save(tmp_path / "sub" / "y.npy", x)
    m = {"resources": {
        "x": {"initialValues": {"sourcePath": "x.npy"}},
        "big": {"initialValues": {"sourcePath": "big.npy"}},
        "f": {"initialValuesDataType": "FLOAT32", "initialValues": {"sourcePath": "f.npy"}},
        "b": {"initialValues": {"sourcePath": "b.npy"}},
        "raw": {"initialValuesDataType": "INT32", "initialValues": {"sourcePath": "raw.dat"}},
        "y": {"initialValues": {"sourcePath": "sub/../sub/y.npy"}}},
        "dispatchables": {}, "commands": [{"type": "print", "resource": n} for n in ("x", "big", "b", "raw")]}
    results, text = run(write(tmp_path, m))
    assert results["x"].tolist() == [0, 1, 2, 3, 4, 5] and results["x"].dtype == np.float32
    assert results["big"].dtype == np.int16 and results["big"].tolist() == [0, 1, 2, 3, 4, 5]
    assert results["f"].tolist() == [0, 1, 2, 3, 4, 5] and results["y"].tolist() == [0, 1, 2, 3, 4, 5]
    assert results["b"].tolist() == [1, 0, 1, 0] and results["raw"].tolist() == [1, 2, 3]
    assert text.splitlines() == ["Resource 'x': 0, 1, 2, 3, 4, 5", "Resource 'big': 0, 1, 2, 3, 4, 5",
                                 "Resource 'b': 1, 0, 1", "Resource 'raw': 1, 2, 3"]


def test_file_initialisers_outside_the_folder_are_refused(tmp_path):
    inner = tmp_path / "models"
    inner.mkdir()
    np.save(tmp_path / "secret.npy", np.zeros(3, np.float32))
    os.symlink(tmp_path / "secret.npy", inner / "link.npy")
    for source in ("../secret.npy", str(tmp_path / "secret.npy"), "link.npy", "./../models/../secret.npy"):
        m = {"resources": {"r": {"initialValues": {"sourcePath": source}}}, "dispatchables": {}, "commands": []}
        with pytest.raises(dxdispatch.ModelError, match=r"resource 'r': initialValues.sourcePath: .* lies outside "
                                                        r"the model's folder"):
            run(write(inner, m))


@pytest.mark.parametrize("content, dtype, message", [
    (b"", "FLOAT32", "the file is empty"),
    ("huge header", None, "the file holds 0 bytes of data; its header promises 4000000000"),
    (b"not numpy", None, "not a .npy file"),
])
def test_bad_files(tmp_path, content, dtype, message):
    name = "x.dat" if dtype else "x.npy"
    if content == "huge header":                 # a header promising 10**9 FLOAT32 values, and no data
        import io
        f = io.BytesIO()
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (10**9,)})
        content = f.getvalue()
    (tmp_path / name).write_bytes(content)
    spec = {"initialValues": {"sourcePath": name}}
    if dtype:
        spec["initialValuesDataType"] = dtype
    with pytest.raises(dxdispatch.ModelError, match=message):
        one_resource(spec, tmp_path)
    np.save(tmp_path / "c.npy", np.zeros(2, np.complex64))
    with pytest.raises(dxdispatch.ModelError, match="has no DirectML data type"):
        one_resource({"initialValues": {"sourcePath": "c.npy"}}, tmp_path)
    np.save(tmp_path / "i.npy", np.zeros(2, np.int32))
    with pytest.raises(dxdispatch.ModelError, match="the file holds INT32 .*initialValuesDataType says FLOAT32"):
        one_resource({"initialValuesDataType": F32, "initialValues": {"sourcePath": "i.npy"}}, tmp_path)
    with pytest.raises(dxdispatch.ModelError, match="cannot read"):
        one_resource({"initialValuesDataType": F32, "initialValues": {"sourcePath": "missing.dat"}}, tmp_path)


# -- bindings --------------------------------------------------------------------------------

def slice1_model(in_binding, out_binding, *, in_values=None, out_fill=-1.0, out_count=16, out_tensor=None):
    """SLICE1 of a 4x4 FLOAT32 tensor (the page's example 2: window offsets 0, 1, sizes 4, 3,
    strides -2, 2) from ``in_values`` into a resource of ``out_count`` elements filled with ``out_fill``."""
    return {"resources": {
        "in": {"initialValuesDataType": F32, "initialValues": in_values or list(range(1, 17))},
        "out": {"initialValuesDataType": F32, "initialValues": {"valueCount": out_count, "value": out_fill}}},
        "dispatchables": {"s": {"type": "DML_OPERATOR_SLICE1", "desc": {
            "InputTensor": {"DataType": F32, "Sizes": [4, 4]},
            "OutputTensor": out_tensor or {"DataType": F32, "Sizes": [2, 2]},
            "InputWindowOffsets": [0, 1], "InputWindowSizes": [4, 3], "InputWindowStrides": [-2, 2]}}},
        "commands": [{"type": "dispatch", "dispatchable": "s",
                      "bindings": {"InputTensor": in_binding, "OutputTensor": out_binding}}]}


def test_bindings_at_offsets_leave_other_bytes_as_they_were():
    # The page's example 2 gives [[14, 16], [6, 8]]. Input at element 4 (byte 16) of a resource of
    # 4 + 16 values; output at byte 32 of 16 elements of -1, with padded strides {3, 1}: elements
    # 8, 9, 11, 12 are written, the others keep -1.
    results, _ = run(slice1_model({"name": "in", "elementOffset": 4},
                                  {"name": "out", "elementOffset": 1, "elementSizeInBytes": 32},
                                  in_values=[99] * 4 + list(range(1, 17)),
                                  out_tensor={"DataType": F32, "Sizes": [2, 2], "Strides": [3, 1]}))
    out = results["out"].tolist()
    assert out[8:10] == [14, 16] and out[11:13] == [6, 8]
    assert [v for i, v in enumerate(out) if i not in (8, 9, 11, 12)] == [-1] * 12


@pytest.mark.parametrize("in_b, out_b, error, message", [
    ({"name": "in", "elementOffset": 1}, "out", dml.BindingError,
     r"command 0 \(dispatch 's'\): SLICE1: input 0 \(InputTensor\) Offset must be a multiple of 16; got 4"),
    ({"name": "in", "elementOffset": 1, "elementSizeInBytes": 8}, "out", dml.BindingError, r"multiple of 16; got 8"),
    ({"name": "in", "elementCount": 15}, "out", dml.BindingError,
     r"input 0 \(InputTensor\) SizeInBytes must be >= the tensor's TotalTensorSizeInBytes 64; got 60"),
    ({"name": "in", "elementOffset": 4}, "out", dml.BindingError, r"SizeInBytes must be >= .* 64; got 48"),
    ({"name": "in", "elementOffset": 17}, "out", dml.BindingError,
     r"bindings.InputTensor: the binding must start inside resource 'in' of 64 bytes: .* 68 > 64"),
    ({"name": "in", "elementOffset": 4, "elementCount": 16}, "out", dml.BindingError,
     r"the range must lie inside resource 'in' of 64 bytes"),
    ("nothing", "out", dxdispatch.ModelError, r"bindings.InputTensor.name: no resource named 'nothing'"),
    (["in", "in"], "out", dxdispatch.ModelError, r"bindings.InputTensor: the bind point takes 1 resource\(s\)"),
    ({"name": "in", "format": "R32_FLOAT"}, "out", dxdispatch.ModelError, r"format: applies to HLSL and ONNX"),
    ({"elementOffset": 0}, "out", dxdispatch.ModelError, r"missing required field 'name'"),
    (3, "out", dxdispatch.ModelError, r"must be a resource name or an object"),
    ("in", "in", dml.BindingError,
     r"input 0 \(InputTensor\) bytes \[0, 64\) overlap output 0 \(OutputTensor\) bytes \[0, 64\)"),
])
def test_binding_rules(in_b, out_b, error, message, capsys, tmp_path):
    m = slice1_model(in_b, out_b)
    with pytest.raises(error, match=message):
        run(m)
    assert main(["dispatch", write(tmp_path, m)]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and captured.out == ""    # checked before any command runs


def test_guaranteed_base_offset_alignment_raises_the_offset_rule():
    m = slice1_model({"name": "in", "elementOffset": 4}, "out", in_values=list(range(24)))
    m["dispatchables"]["s"]["desc"]["InputTensor"]["GuaranteedBaseOffsetAlignment"] = 32
    with pytest.raises(dml.BindingError, match="Offset must be a multiple of 32; got 16"):
        run(m)
    m["commands"][0]["bindings"]["InputTensor"]["elementOffset"] = 8
    assert run(m)[0]["out"][:4].tolist() == [21, 23, 13, 15]


def test_bind_points_must_match_the_tensors():
    m = slice1_model("in", "out")
    del m["commands"][0]["bindings"]["OutputTensor"]
    with pytest.raises(dxdispatch.ModelError, match="bindings.OutputTensor: nothing bound for the required tensor"):
        run(m)
    m = slice1_model("in", "out")
    m["commands"][0]["bindings"]["ATensor"] = "in"
    with pytest.raises(dxdispatch.ModelError, match="'ATensor' is no tensor field of SLICE1; expected one of "
                                                    "InputTensor, OutputTensor"):
        run(m)
    m = slice1_model("in", "out")
    m["commands"][0]["dispatchable"] = "t"
    with pytest.raises(dxdispatch.ModelError, match="command 0.dispatchable: no dispatchable named 't'"):
        run(m)


def test_a_resource_may_be_bound_as_another_type():
    # "initializers don't restrict the usage of the resource": UINT8 bytes bound as FLOAT32.
    values = np.arange(1, 17, dtype=np.float32)
    m = slice1_model("in", "out")
    m["resources"]["in"] = {"initialValuesDataType": "UINT8", "initialValues": values.view(np.uint8).tolist()}
    assert run(m)[0]["out"][:4].tolist() == [14, 16, 6, 8]


def test_several_dispatches_and_writefile_snapshots(tmp_path):
    # One dispatchable over two inputs; writeFile keeps the values at its command.
    m = slice1_model("in", "out")
    m["resources"]["in2"] = {"initialValuesDataType": F32, "initialValues": {"valueCount": 16, "valueStart": 101,
                                                                             "valueDelta": 1}}
    m["commands"] = [
        {"type": "dispatch", "dispatchable": "s", "bindings": {"InputTensor": "in", "OutputTensor": "out"}},
        {"type": "writeFile", "resource": "out", "targetPath": "first.npy"},
        {"type": "writeFile", "resource": "out", "targetPath": "first.dat"},
        {"type": "dispatch", "dispatchable": "s", "bindings": {"InputTensor": "in2", "OutputTensor": "out"}},
        {"type": "writeFile", "resource": "out", "targetPath": "results/second.npy", "dimensions": [4, 4]},
        {"type": "print", "resource": "out"}]
    results, text = run(write(tmp_path, m))
    first = np.load(tmp_path / "first.npy")
    assert first.dtype == np.float32 and first.shape == (16,) and first[:4].tolist() == [14, 16, 6, 8]
    assert (tmp_path / "first.dat").read_bytes() == first.tobytes()
    second = np.load(tmp_path / "results" / "second.npy")
    assert second.shape == (4, 4) and second[0].tolist() == [114, 116, 106, 108]
    assert results["out"][:4].tolist() == [114, 116, 106, 108]
    assert text.splitlines()[0].startswith("Resource 'out': 114, 116, 106, 108, -1")
    assert f"Resource 'out' written to '{tmp_path / 'results' / 'second.npy'}'" in text


def test_writefile_targets_stay_in_the_model_folder(tmp_path):
    m = slice1_model("in", "out")
    for target in ("../x.npy", "/tmp/x.npy"):
        m["commands"].append({"type": "writeFile", "resource": "out", "targetPath": target})
        with pytest.raises(dxdispatch.ModelError, match=r"command 1.targetPath: .* lies outside the model's folder"):
            run(write(tmp_path, m))
        m["commands"].pop()
    m["commands"].append({"type": "writeFile", "resource": "out", "targetPath": "x.npy", "dimensions": [5]})
    with pytest.raises(dxdispatch.ModelError, match=r"command 1.dimensions: the product of \[5\] must equal the "
                                                    r"resource's element count 16"):
        run(write(tmp_path, m))
    assert not (tmp_path / "x.npy").exists()


def test_owned_by_dml_inputs_are_bound_at_initialisation():
    # The dispatchable binds "in" once; a later dispatch overwrites "in", and the owned
    # operator still reads the snapshot taken at initialisation.
    m = slice1_model("in", "out")
    s = m["dispatchables"]["s"]
    s["desc"]["InputTensor"]["Flags"] = "DML_TENSOR_FLAG_OWNED_BY_DML"
    s["bindings"] = {"InputTensor": "in"}
    m["resources"]["zeros"] = {"initialValuesDataType": F32, "initialValues": {"valueCount": 16, "value": 0}}
    m["dispatchables"]["copy"] = {"type": "SLICE", "desc": {
        "InputTensor": {"DataType": F32, "Sizes": [16]}, "OutputTensor": {"DataType": F32, "Sizes": [16]},
        "Offsets": [0], "Sizes": [16], "Strides": [1]}}
    m["commands"] = [
        {"type": "dispatch", "dispatchable": "copy", "bindings": {"InputTensor": "zeros", "OutputTensor": "in"}},
        {"type": "dispatch", "dispatchable": "s", "bindings": {"OutputTensor": "out"}}]
    results, _ = run(m)
    assert results["in"].tolist() == [0] * 16 and results["out"][:4].tolist() == [14, 16, 6, 8]
    m["commands"][1]["bindings"]["InputTensor"] = "in"
    with pytest.raises(dml.BindingError,
                       match="command 1 \\(dispatch 's'\\): bindings.InputTensor: the tensor is OWNED_BY_DML"):
        run(m)
    del s["bindings"]
    with pytest.raises(dxdispatch.ModelError, match="the OWNED_BY_DML tensor must be bound in the dispatchable's"):
        run(m)


def test_model_structure_errors():
    for model, message in [
        ({"resources": {}, "dispatchables": {}}, r"model: missing required field 'commands'"),
        ({"resources": [], "dispatchables": {}, "commands": []}, r"model.resources: must be an object"),
        ({"resources": {}, "dispatchables": {}, "commands": [{"type": "draw"}]},
         r"command 0.type: must be \"dispatch\", \"print\" or \"writeFile\""),
        ({"resources": {}, "dispatchables": {}, "commands": [{"type": "print", "resource": "x"}]},
         r"command 0.resource: no resource named 'x'"),
        ({"resources": {}, "dispatchables": {}, "commands": [], "extra": 1}, r"model: unknown field 'extra'"),
    ]:
        with pytest.raises(dxdispatch.ModelError, match=message):
            run(model)
    with pytest.raises(dxdispatch.ModelError, match="malformed JSON at line 1"):
        dxdispatch.loads('{"resources": ')
    with pytest.raises(dxdispatch.ModelError, match="the key 'a' appears twice"):
        dxdispatch.loads('{"a": 1, "a": 2}')


# -- the command line ----------------------------------------------------------------------

def test_cli_output_dir_writes_every_resource(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["dispatch", write(tmp_path, slice_model()), "--output-dir", str(out)]) == 0
    assert capsys.readouterr().out == "Resource 'output': 7, 9, 12, 14, 17, 19\n"
    assert sorted(os.listdir(out)) == ["input.npy", "output.npy"]
    y = np.load(out / "output.npy")
    assert y.dtype == np.float32 and y.shape == (6,) and y.tolist() == [7, 9, 12, 14, 17, 19]
    # an existing folder: files are replaced, others kept
    (out / "keep.txt").write_text("x")
    assert main(["dispatch", write(tmp_path, slice_model()), "--output-dir", str(out)]) == 0
    assert sorted(os.listdir(out)) == ["input.npy", "keep.txt", "output.npy"]


@pytest.mark.parametrize("mutate", [
    lambda m: m["commands"][0]["bindings"].update(InputTensor={"name": "input", "elementOffset": 1}),
    lambda m: m["resources"]["input"].update(initialValuesDataType="INT8"),
    lambda m: m["resources"].update({"a/b": {"initialValuesDataType": F32, "initialValues": [1]}}),
    lambda m: m["resources"].update({"..": {"initialValuesDataType": F32, "initialValues": [1]}}),
])
def test_cli_errors_write_nothing(tmp_path, capsys, mutate):
    m = slice_model()
    mutate(m)
    out = tmp_path / "out"
    assert main(["dispatch", write(tmp_path, m), "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("opendml: error: ") and err.count("\n") == 1
    assert not out.exists() and [p for p in os.listdir(tmp_path) if p != "model.json"] == []


def test_names_that_cannot_be_printed_or_made_files(tmp_path, capsys):
    # a lone surrogate (valid JSON) and a newline in resource names: printed escaped, refused as file names
    text = ('{"resources": {"\\ud800x": {"initialValuesDataType": "FLOAT32", "initialValues": [1]},'
            ' "a\\nb": {"initialValuesDataType": "INT8", "initialValues": [2]}}, "dispatchables": {},'
            ' "commands": [{"type": "print", "resource": "\\ud800x"}, {"type": "print", "resource": "a\\nb"}]}')
    path = write(tmp_path, text)
    assert main(["dispatch", path]) == 0
    assert capsys.readouterr().out == "Resource '\\ud800x': 1\nResource 'a\\nb': 2\n"
    assert main(["dispatch", path, "--output-dir", str(tmp_path / "out")]) == 2
    assert "resource '\\ud800x': the name cannot be encoded for the file system" in capsys.readouterr().err
    m = json.loads(text)
    m["commands"] = [{"type": "writeFile", "resource": "a\nb", "targetPath": "\ud800.npy"}]
    with pytest.raises(dxdispatch.ModelError, match="command 0.targetPath: must be a file name"):
        run(m)


def test_cli_malformed_json_and_usage(tmp_path, capsys):
    assert main(["dispatch", write(tmp_path, '{"resources": {')]) == 2
    assert "malformed JSON at line 1" in capsys.readouterr().err
    assert main(["dispatch", str(tmp_path / "missing.json")]) == 2
    assert "cannot read the model" in capsys.readouterr().err
    assert main(["dispatch"]) == 2
    assert "give MODEL.json or --example NAME" in capsys.readouterr().err
    assert main(["dispatch", "--example", "nope"]) == 2
    assert main(["dispatch", write(tmp_path, slice_model()), "--feature-level", "1_0"]) == 0
    capsys.readouterr()
    assert main(["dispatch", write(tmp_path, slice_model()), "--feature-level", "9_9"]) == 2
    assert "unknown feature level" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(examples()))
def test_every_bundled_example_runs_as_a_model(name, capsys, tmp_path):
    assert main(["dispatch", "--example", name]) == 0
    out = capsys.readouterr().out.splitlines(keepends=True)
    n_out = len(from_json(examples()[name]).outputs)
    assert all(line.startswith("Resource 'output") for line in out[:n_out])
    assert out[-1] in ("\u2713 matches the documented output\n", "OK matches the documented output\n")
    # the printed model is a model: it runs through the Python form to the same prints
    assert main(["dispatch", "--example", name, "--print-model"]) == 0
    model = json.loads(capsys.readouterr().out)
    assert set(model) == {"resources", "dispatchables", "commands"}
    results, text = run(write(tmp_path, model))
    assert text == "".join(out[:n_out])


def test_cli_list_and_subprocess(tmp_path):
    r = subprocess.run([sys.executable, "-m", "opendml.cli", "dispatch", "--list"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.split()[0] == EXAMPLE_ORDER[0]
    r = subprocess.run([sys.executable, "-m", "opendml.cli", "dispatch", write(tmp_path, slice_model())],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "Resource 'output': 7, 9, 12, 14, 17, 19\n" and r.stderr == ""


def test_python_form_takes_a_dict_or_a_path_and_a_device(tmp_path):
    a, _ = run(slice_model())
    b, _ = run(write(tmp_path, slice_model()), device=dml.Device("cpu", feature_level="3_0"))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    with pytest.raises(dml.ValidationError, match="differs from the device's"):
        run(slice_model(), device=dml.Device("cpu", feature_level="3_0"), feature_level="6_4")


@pytest.mark.cuda
def test_cuda_runs_the_same_model(tmp_path):
    from tests.conftest import cuda_available
    if not cuda_available():
        pytest.skip("CUDA is not available here")
    m = slice1_model({"name": "in", "elementOffset": 4}, {"name": "out", "elementOffset": 8},
                     in_values=[7] * 4 + list(range(1, 17)),
                     out_tensor={"DataType": F32, "Sizes": [2, 2], "Strides": [3, 1]})
    cpu, text_cpu = run(m)
    cuda, text_cuda = run(m, device="cuda")
    assert text_cpu == text_cuda and all(np.array_equal(cpu[k], cuda[k]) for k in cpu)
    assert main(["dispatch", write(tmp_path, slice_model()), "--device", "cuda"]) == 0


def test_reachable_from_a_plain_import():
    import subprocess
    import sys
    code = "import opendml; print(opendml.dxdispatch.run.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "run"


def test_example_model_binds_owned_by_dml_inputs_at_initialisation():
    """A description whose input is OWNED_BY_DML becomes a model that binds it
    in the dispatchable's "bindings" (DirectML binds it once, at
    initialisation), not in the dispatch: before, example_model put every
    binding in the dispatch and the model was refused (found by test_fuzz)."""
    import io
    from opendml import dxdispatch
    for form, want in (
            ({"Operator": "ELEMENT_WISE_IDENTITY", "InputTensor": {"DataType": "FLOAT32", "Sizes": [4],
                                                                   "Flags": "OWNED_BY_DML"},
              "OutputTensor": {"DataType": "FLOAT32", "Sizes": [4]}}, [1, 2, 3, 4]),
            ({"Operator": "JOIN", "InputTensors": [{"DataType": "FLOAT32", "Sizes": [1, 2], "Flags": "OWNED_BY_DML"},
                                                   {"DataType": "FLOAT32", "Sizes": [1, 2], "Flags": "OWNED_BY_DML"}],
              "OutputTensor": {"DataType": "FLOAT32", "Sizes": [2, 2]}, "Axis": 0}, [1, 2, 1, 2])):
        model = dxdispatch.example_model(form)
        (d,) = model["dispatchables"].values()
        assert list(d["bindings"]) == [s for s in ("InputTensor", "InputTensors") if s in form]
        assert "OutputTensor" in model["commands"][0]["bindings"]
        out = dxdispatch.run(model, out=io.StringIO())["output"].view(np.float32)
        assert out.tolist() == want


def test_example_model_default_input_is_the_command_lines_with_broadcast_dimensions():
    """Without "Input", a model made from an example holds the command
    line's default values: a dimension of stride 0 counts once (before,
    example_model numbered every position, so a stride-0 dimension between
    others gave other values than `opendml run`)."""
    from opendml import cli
    form = {"Operator": "ELEMENT_WISE_IDENTITY",
            "InputTensor": {"DataType": "INT32", "Sizes": [2, 2, 2], "Strides": [2, 0, 1]},
            "OutputTensor": {"DataType": "INT32", "Sizes": [2, 2, 2]}}
    results = dxdispatch.run(dxdispatch.example_model(form), out=open(os.devnull, "w"))
    want = dml.Device("cpu").run(from_json(form), cli.default_input(from_json(form)))
    assert want.tolist() == [[[1, 2], [1, 2]], [[3, 4], [3, 4]]]
    assert results["output"].tolist() == want.reshape(-1).tolist()


def test_example_model_reads_inputs_as_the_command_line_does():
    """An example's "Input"/"Inputs" and "ExpectedOutput(s)" are read by the
    one reader the command line uses (jsonform.json_arrays): a lone "Input"
    for an operator of several inputs is refused with the command line's
    message, where example_model used to drop it silently and run the
    default values 1..N instead."""
    join = {"Operator": "JOIN", "InputTensors": [{"DataType": "FLOAT32", "Sizes": [1, 2]},
                                                 {"DataType": "FLOAT32", "Sizes": [1, 2]}],
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [2, 2]}, "Axis": 0}
    with pytest.raises(dml.ValidationError, match=r'^\$\.Input: JOIN takes 2 inputs; give them as "Inputs"'):
        dxdispatch.example_model({**join, "Input": [[5, 6]]})
    with pytest.raises(dml.ValidationError, match=r"^\$\.Inputs: must be a list of 2 arrays \(one per input "
                                                  r"tensor: InputTensors\[0\], InputTensors\[1\]\); got 1"):
        dxdispatch.example_model({**join, "Inputs": [[[5, 6]]]})
    model = dxdispatch.example_model({**join, "Inputs": [[[5, 6]], [[7, 8]]]})
    assert [r["initialValues"] for r in model["resources"].values()][:2] == [[5, 6], [7, 8]]


@pytest.mark.parametrize("strides", [np.array([]), np.array(3), np.array([1, 2, 3, 4])])
def test_a_parsed_model_holding_an_array_for_strides_is_a_model_error(strides):
    # a model given as a dict: ``Strides == []`` on a NumPy array raised NumPy's ValueError
    model = dxdispatch.example_model(examples()["slice-contiguous"])
    model["dispatchables"]["slice-contiguous"]["desc"]["InputTensor"]["Strides"] = strides
    with pytest.raises(dml.ValidationError, match=r"InputTensor\.Strides"):
        dxdispatch.run(model, out=io.StringIO())


@pytest.mark.parametrize("call, message", [
    (lambda tmp: dxdispatch.model_limit(None), "max_bytes must be an int (bytes); got NoneType"),
    (lambda tmp: dxdispatch.model_limit(True), "max_bytes must be an int (bytes); got bool"),
    (lambda tmp: dxdispatch.loads(None), "dxdispatch.loads: text must be str, bytes or bytearray; got NoneType"),
    (lambda tmp: dxdispatch.check_output_dir(None, ["a"]), "the output folder must be a str or os.PathLike; got "
     "NoneType"),
    (lambda tmp: dxdispatch.format_resource("r", "x"), "format_resource: values must be an array of numbers; got "
     "<U1 elements"),
    (lambda tmp: dxdispatch.write_resources("x", tmp), "write_resources: results must be a mapping of names to "
     "arrays; got str"),
    # (run's out reached print's ``out.write`` only once commands ran: "'int' object has no attribute 'write'";
    # base_dir, os.path's "expected str, bytes or os.PathLike object, not int")
    (lambda tmp: dxdispatch.run(dxdispatch.example_model(examples()["slice-contiguous"]), out=3),
     "dxdispatch.run: out must be a file-like object (with write) or None; got int"),
    (lambda tmp: dxdispatch.run(dxdispatch.example_model(examples()["slice-contiguous"]), base_dir=3,
                                out=io.StringIO()),
     "dxdispatch: base_dir must be a path (str or os.PathLike) or None; got int"),
    (lambda tmp: dxdispatch.load({}, 3.5), "dxdispatch: base_dir must be a path (str or os.PathLike) or None; got float"),
])
def test_helpers_given_a_wrong_type_raise_a_type_error_naming_the_argument(tmp_path, call, message):
    """Can fail: these raised Python's own errors from inside (``//`` of None, ``int('x')``, ``'str' object has
    no attribute 'items'``) rather than naming the argument."""
    with pytest.raises(TypeError) as info:
        call(tmp_path)
    assert str(info.value) == message


@pytest.mark.parametrize("value, shown", [(float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf")])
def test_dumps_writes_a_non_finite_float_as_dxdispatch_does(value, shown):
    """``dumps(example_model(...))`` of a description whose PaddingValue (or ScaleBias, a Value) is NaN or infinite
    wrote the literals ``NaN``/``Infinity``, which ``loads`` and DxDispatch refuse: the model it printed could not
    be read back."""
    import copy
    import io
    import json as json_
    from opendml.cli import examples
    example = copy.deepcopy(examples()["padding1-constant"])
    example["PaddingValue"] = value
    del example["ExpectedOutput"]
    text = dxdispatch.dumps(dxdispatch.example_model(example))
    assert f'"PaddingValue": "{shown}"' in text and "NaN" not in text and "Infinity" not in text
    out = dxdispatch.run(dxdispatch.loads(text), out=io.StringIO())["output"]
    border = out[0]
    assert (np.isnan(border) if shown == "nan" else border == value)
    assert json_.loads(dxdispatch.dumps({"x": [1.5, value, [value]]}))["x"] == [1.5, shown, [shown]]
