"""The opendml command through its console-script function and a subprocess."""
import json
import subprocess
import sys

import numpy as np
import pytest

from opendml.cli import main

SLICE1 = {"Operator": "SLICE1", "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 4]},
          "InputWindowOffsets": [0, 0, 0, 1], "InputWindowSizes": [1, 1, 4, 3], "InputWindowStrides": [1, 1, -2, 2]}


def spec(tmp_path, obj, name="spec.json"):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(p)


def test_run_all_examples_in_a_subprocess():
    r = subprocess.run([sys.executable, "-m", "opendml.cli", "run"], capture_output=True, text=True,
                       env={"PYTHONIOENCODING": "utf-8", "PATH": ""})
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\u2713 matches the documented output") == 6
    assert "6 of 6 examples match their documented outputs" in r.stdout
    assert "[[[[14., 16.],\n   [ 6.,  8.]]]]" in r.stdout


def test_list_and_one_example(capsys):
    assert main(["run", "--list"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("slice-contiguous") and "unfold-padded" in out
    assert main(["run", "--example", "unfold-padded"]) == 0
    assert "OutputTensor: (Sizes:{1, 9, 15}, DataType:FLOAT32)" in capsys.readouterr().out


def test_run_spec_default_input_and_output_file(tmp_path, capsys):
    out = tmp_path / "y.npy"
    assert main(["run", spec(tmp_path, SLICE1), "--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert "InputWindowStrides = {1, 1, -2, 2}" in text and "OutputTensor: (Sizes:{1, 1, 2, 2}, DataType:FLOAT32)" in text
    assert np.load(out).tolist() == [[[[14, 16], [6, 8]]]]


def test_run_with_input_file_and_unfold_convention(tmp_path, capsys):
    x = np.arange(16, dtype=np.int8).reshape(1, 1, 4, 4)
    np.save(tmp_path / "x.npy", x)
    s = dict(SLICE1, InputTensor={"DataType": "INT8", "Sizes": [1, 1, 4, 4]})
    assert main(["run", spec(tmp_path, s), "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")]) == 0
    assert np.load(tmp_path / "y.npy").tolist() == [[[[13, 15], [5, 7]]]]
    u = {"Operator": "UNFOLD", "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 3, 3]}, "WindowSizes": [2, 2]}
    assert main(["run", spec(tmp_path, u, "u.json"), "--output", str(tmp_path / "u.npy")]) == 0
    assert np.load(tmp_path / "u.npy")[0, 0].tolist() == [0, 1, 3, 4]  # 0..N-1 as the page does


def test_large_outputs_print_summarised(tmp_path, capsys):
    s = {"Operator": "SLICE", "InputTensor": {"DataType": "UINT8", "Sizes": [64, 64]},
         "Offsets": [0, 0], "Sizes": [64, 64], "Strides": [1, 1]}
    assert main(["run", spec(tmp_path, s)]) == 0
    assert "..." in capsys.readouterr().out


def test_mismatching_expected_output_exits_1(tmp_path, capsys):
    s = dict(SLICE1, ExpectedOutput=[[[[14, 16], [6, 9]]]])
    assert main(["run", spec(tmp_path, s)]) == 1
    assert "differs from the documented output" in capsys.readouterr().out


def test_validate(tmp_path, capsys):
    s = dict(SLICE1, InputTensor={"DataType": "FLOAT32", "Sizes": [1, 1, 4, 4], "Strides": [16, 16, 4, 1],
                                  "TotalTensorSizeInBytes": 80, "GuaranteedBaseOffsetAlignment": 32})
    assert main(["validate", spec(tmp_path, s)]) == 0
    out = capsys.readouterr().out
    assert "lowest feature level: 2_1" in out
    assert "DMLCalcBufferTensorSize: 64 bytes; binding: SizeInBytes >= 80, Offset a multiple of 32" in out
    assert 'output description (JSON): {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]}' in out
    assert main(["validate", spec(tmp_path, s), "--feature-level", "3_0"]) == 0


def test_info(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("opendml ") and "backend cpu: available" in out and "backend cuda: " in out
    assert "feature levels: 1_0, 2_0, 2_1" in out and "operator UNFOLD (DML_OPERATOR_TYPE 177): from feature level 6_4" in out


BAD = [
    ('{"Operator": "SLICE1",\n  "InputTensor": }', r"malformed JSON at line 2, column 18"),
    ('[1, 2]', r"\$: a description must be a JSON object; got list"),
    ({"InputTensor": {}}, r"\$.Operator: missing required field"),
    ({"Operator": "CONV"}, r'\$.Operator: unknown operator "CONV"'),
    ({**SLICE1, "InputWindowSize": [1]}, r"\$.InputWindowSize: unknown field"),
    ({k: v for k, v in SLICE1.items() if k != "InputWindowSizes"}, r"\$.InputWindowSizes: missing required field"),
    ({**SLICE1, "InputTensor": {"DataType": "FLOAT32"}}, r"\$.InputTensor.Sizes: missing required field"),
    ({**SLICE1, "InputTensor": {"DataType": 1, "Sizes": [4]}}, r"\$.InputTensor.DataType: must be a string"),
    ({**SLICE1, "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 4, "4"]}}, r"\$.InputTensor.Sizes: must be an array of integers"),
    ({**SLICE1, "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 4], "Colour": 1}}, r"\$.InputTensor.Colour: unknown field"),
    ({**SLICE1, "InputWindowStrides": [1, 1, 0, 2]}, r"SLICE1: InputWindowStrides\[2\] must be non-zero"),
    ({**SLICE1, "InputWindowStrides": [1, 1, 2.5, 2]}, r"\$.InputWindowStrides: must be an array of integers"),
    ({**SLICE1, "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 0]}}, r"\$.InputTensor: TensorDesc: Sizes\[3\] must be in"),
    ({**SLICE1, "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 4], "Flags": "SHARED"}}, r"\$.InputTensor.Flags: unknown flag"),
    ({**SLICE1, "DimensionCount": 3}, r"\$.DimensionCount: must equal the length of InputWindowOffsets 4; got 3"),
]


@pytest.mark.parametrize("obj, message", BAD)
@pytest.mark.parametrize("command", ["run", "validate"])
def test_bad_input_one_line_exit_2(tmp_path, capsys, obj, message, command):
    import re
    assert main([command, spec(tmp_path, obj)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("opendml: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert re.search(message, err), err


@pytest.mark.parametrize("argv, message", [
    (["run", "missing.json"], r"missing.json: No such file or directory"),
    (["run", "--example", "nope"], r"--example: unknown example 'nope'"),
    (["run", "--feature-level", "9_9"], r"FeatureLevel: unknown feature level '9_9'"),
    (["validate", "SPEC", "--feature-level", "2_0"], r"SLICE1: the operator was introduced in feature level 2_1; got feature level 2_0"),
    (["run", "SPEC", "--input", "X"], r"--input .*: cannot read a .npy array"),
    (["run", "SPEC", "--input", "WRONGSHAPE"], r"shape \[3\] must equal InputTensor.Sizes \[1, 1, 4, 4\]"),
    (["run", "SPEC", "--input", "WRONGTYPE"], r"dtype float64 must match InputTensor.DataType FLOAT32"),
])
def test_bad_usage_exit_2(tmp_path, capsys, argv, message):
    import re
    (tmp_path / "X").write_text("not npy")
    np.save(tmp_path / "w.npy", np.zeros(3, np.float32))
    np.save(tmp_path / "t.npy", np.zeros((1, 1, 4, 4)))
    sub = {"SPEC": spec(tmp_path, SLICE1), "X": str(tmp_path / "X"), "WRONGSHAPE": str(tmp_path / "w.npy"),
           "WRONGTYPE": str(tmp_path / "t.npy")}
    argv = [sub.get(a, a) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and "Traceback" not in err


@pytest.mark.parametrize("command", [[], ["run"], ["validate"], ["info"]])
def test_help_documents_every_flag(command, capsys):
    with pytest.raises(SystemExit) as e:
        main(command + ["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    flags = {"run": ["--input", "--output", "--device", "--feature-level", "--list", "--example"],
             "validate": ["--feature-level"]}.get(command[0] if command else "", [])
    assert all(f in out for f in flags)


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["frobnicate"])
    assert e.value.code == 2
