"""The opendml command through its console-script function and a subprocess."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from opendml.cli import EXAMPLE_ORDER, main
from opendml.ops import OPERATORS

SLICE1 = {"Operator": "SLICE1", "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 4]},
          "InputWindowOffsets": [0, 0, 0, 1], "InputWindowSizes": [1, 1, 4, 3], "InputWindowStrides": [1, 1, -2, 2]}


def spec(tmp_path, obj, name="spec.json"):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(p)


def test_run_all_examples_in_a_subprocess():
    r = subprocess.run([sys.executable, "-m", "opendml.cli", "run"], capture_output=True, text=True,
                       env={"PYTHONIOENCODING": "utf-8", "PATH": "",     # (a tree run from its source folder)
                            **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}})
    assert r.returncode == 0, r.stderr
    n = len(EXAMPLE_ORDER)
    assert r.stdout.count("\u2713 matches the documented output") == n
    assert f"{n} of {n} examples match their documented outputs" in r.stdout
    assert "[[[[14., 16.],\n   [ 6.,  8.]]]]" in r.stdout


def test_list_and_one_example(capsys):
    assert main(["run", "--list"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("slice-contiguous") and "unfold-padded" in out
    assert main(["run", "--example", "unfold-padded"]) == 0
    assert "OutputTensor: (Sizes:{1, 9, 15}, DataType:FLOAT32)" in capsys.readouterr().out


@pytest.mark.parametrize("command, what", [("run", "SPEC.json"), ("dispatch", "MODEL.json")])
def test_list_with_a_file_or_an_example_is_a_usage_error(tmp_path, capsys, command, what):
    """`opendml run --list --example tile` listed the examples and ran nothing, exit 0."""
    one_line_exit_2(capsys, [command, "--list", "--example", "tile"],
                    r"--list lists the bundled examples and exits: give it without --example$")
    one_line_exit_2(capsys, [command, "--list", spec(tmp_path, SLICE1)],
                    rf"--list lists the bundled examples and exits: give it without {what}$")


@pytest.mark.parametrize("argv", [["run", "a.json", "b.json"], ["info", "extra"], ["validate", "a.json", "--bogus"]])
def test_a_left_over_argument_is_the_subcommands_usage_error(argv):
    """It read 'opendml: error: unrecognized arguments: ... (see opendml --help)', pointing at the
    top-level help, which does not list the subcommand's options."""
    r = subprocess.run([sys.executable, "-m", "opendml.cli", *argv], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"opendml {argv[0]}: error: unrecognized arguments: {argv[-1]} (see opendml {argv[0]} --help)\n"


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


def test_validate_names_the_first_input_and_the_output(tmp_path, capsys):
    """A generator (DIAGONAL_MATRIX) has no input: only its output is shown
    (was an internal error); ONE_HOT's output is shown as OutputTensor (was
    under ValuesTensor's name, its second input)."""
    gen = {"Operator": "DIAGONAL_MATRIX", "OutputTensor": {"DataType": "FLOAT16", "Sizes": [3, 2]}, "Offset": -1}
    assert main(["validate", spec(tmp_path, gen)]) == 0
    out = capsys.readouterr().out
    assert "lowest feature level: 4_0" in out and "InputTensor" not in out
    assert "OutputTensor: (Sizes:{3, 2}, DataType:FLOAT16)" in out
    hot = {"Operator": "ONE_HOT", "IndicesTensor": {"DataType": "UINT32", "Sizes": [3, 1]},
           "ValuesTensor": {"DataType": "FLOAT32", "Sizes": [1, 2]},
           "OutputTensor": {"DataType": "FLOAT32", "Sizes": [3, 4]}, "Axis": 1}
    assert main(["validate", spec(tmp_path, hot)]) == 0
    out = capsys.readouterr().out
    assert "IndicesTensor: (Sizes:{3, 1}, DataType:UINT32)" in out and "ValuesTensor" not in out
    assert 'output description (JSON): {"DataType": "FLOAT32", "Sizes": [3, 4]}' in out


def test_info(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("opendml ") and "backend cpu: available" in out and "backend cuda: " in out
    assert "call cache: " in out
    assert "feature levels: 1_0, 2_0, 2_1" in out and "operator UNFOLD (DML_OPERATOR_TYPE 177): from feature level 6_4" in out
    assert "pytorch autograd: torch_node=" in out         # PyTorch is installed here


def test_info_without_pytorch_says_so_rather_than_describing_its_node(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)      # find_spec's answer where PyTorch is not installed
    assert main(["info"]) == 0
    assert "\npytorch autograd: PyTorch not installed\n" in capsys.readouterr().out


def test_run_help_names_every_operator_whose_default_input_starts_at_0(capsys):
    """The help listed UNFOLD and FOLD only; the gathers, scatters and ONE_HOT start at 0 too."""
    zero = [name for name, cls in OPERATORS.items() if cls.DEFAULT_INPUT_START == 0]
    assert {"UNFOLD", "FOLD", "GATHER", "ONE_HOT"} <= set(zero)
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"else 1..N (0..N-1 for {', '.join(zero)}) as the pages do" in text


BAD = [
    ('{"Operator": "SLICE1",\n  "InputTensor": }', r"malformed JSON at line 2, column 18"),
    ('[1, 2]', r"\$: a description must be a JSON object; got array"),
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


# -- issue 14: every bad input, file or environment value is one line and exit 2 ----

U8 = {**SLICE1, "InputTensor": {"DataType": "UINT8", "Sizes": [1, 1, 4, 4]}}


def one_line_exit_2(capsys, argv, message):
    import re
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith("opendml: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert re.search(message, err), err
    assert captured.out == ""        # checked before anything runs or prints
    return err


@pytest.mark.parametrize("expected, message", [
    ("abc", r"\$.ExpectedOutput: must be an array of numbers; got string"),
    ([[[[300, 16], [6, 8]]]], r"\$.ExpectedOutput\[0\]\[0\]\[0\]\[0\]: 300 is out of range for UINT8 \[0, 255\]"),
    ([[[[14, 16], [6]]]], r"\$.ExpectedOutput\[0\]\[0\]\[1\]: the array must be rectangular: expected an array of 2 entries"),
    ([[[[14, 16], 6]]], r"\$.ExpectedOutput\[0\]\[0\]\[1\]: the array must be rectangular: .* got integer"),
    ([[[[{}, 16], [6, 8]]]], r"\$.ExpectedOutput\[0\]\[0\]\[0\]\[0\]: must be a number; got object \{\}"),
    ([[[["14", 16], [6, 8]]]], r"must be a number; got string '14'"),
    ([[[[None, 16], [6, 8]]]], r"must be a number; got null"),
    ([[[[14.5, 16], [6, 8]]]], r"\[0\]\[0\]\[0\]\[0\]: must be an integer for UINT8; got 14.5"),
    ([[14, 16], [6, 8]], r"\$.ExpectedOutput: shape \[2, 2\] must equal OutputTensor.Sizes \[1, 1, 2, 2\]"),
    ([[[[[[[[[[1]]]]]]]]]], r"\$.ExpectedOutput: nests arrays more than 8 levels deep"),
])
def test_bad_expected_output(tmp_path, capsys, expected, message):
    one_line_exit_2(capsys, ["run", spec(tmp_path, {**U8, "ExpectedOutput": expected})], message)


def test_expected_output_with_integral_floats_and_nan(tmp_path, capsys):
    assert main(["run", spec(tmp_path, {**U8, "ExpectedOutput": [[[[14.0, 16], [6, 8]]]]})]) == 0
    capsys.readouterr()
    nan = '{"Operator": "SLICE", "InputTensor": {"DataType": "FLOAT16", "Sizes": [2]}, "Input": [NaN, 1e5], ' \
          '"Offsets": [0], "Sizes": [1], "Strides": [1], "ExpectedOutput": [NaN]}'
    one_line_exit_2(capsys, ["run", spec(tmp_path, nan)], r"\$.Input\[1\]: 100000.0 is out of range for FLOAT16")
    assert main(["run", spec(tmp_path, nan.replace("1e5", "1"))]) == 0       # NaN equals NaN


@pytest.mark.parametrize("value, message", [
    ([[[[1, 2, 3, 4]] * 4]], r"\$.Input: shape \[1, 1, 4, 4\]"),    # fine: control below
    ([[[[1, 2, 3, 256]] * 4]], r"\$.Input\[0\]\[0\]\[0\]\[3\]: 256 is out of range for UINT8"),
    ([[[[1, 2, 3, -1]] * 4]], r"-1 is out of range for UINT8"),
    ([[[[1, 2, 3, 1.5]] * 4]], r"must be an integer for UINT8; got 1.5"),
    ("x", r"\$.Input: must be an array of numbers; got string"),
])
def test_bad_input_values(tmp_path, capsys, value, message):
    if value == [[[[1, 2, 3, 4]] * 4]]:
        assert main(["run", spec(tmp_path, {**U8, "Input": value})]) == 0
        return
    one_line_exit_2(capsys, ["run", spec(tmp_path, {**U8, "Input": value})], message)


@pytest.mark.parametrize("command", ["run", "validate"])
def test_huge_json_integer_and_deep_nesting(tmp_path, capsys, command):
    huge = json.dumps(SLICE1).replace('"InputWindowOffsets": [0,', '"InputWindowOffsets": [' + "9" * 5000 + ",")
    one_line_exit_2(capsys, [command, spec(tmp_path, huge)],
                    r"malformed JSON: an integer of 5000 digits \(999999999999\.\.\.\) is longer than the 4300 digits")
    deep = json.dumps(SLICE1)[:-1] + ', "Title": ' + "[" * 100000 + "]" * 100000 + "}"
    one_line_exit_2(capsys, [command, spec(tmp_path, deep)], r"\$: the JSON nests arrays and objects more than 32 levels deep")
    deep = json.dumps(SLICE1)[:-1] + ', "Title": ' + "[" * 40 + "]" * 40 + "}"     # below the recursion limit
    one_line_exit_2(capsys, [command, spec(tmp_path, deep)], r"more than 32 levels deep")


@pytest.mark.parametrize("command", ["run", "validate"])
def test_a_key_given_twice_is_refused(tmp_path, capsys, command):
    """JSON keeps the last of two equal keys: a description with
    InputWindowSizes twice ran with the second, silently."""
    text = json.dumps(SLICE1)[:-1] + ', "InputWindowSizes": [1, 1, 2, 2]}'
    one_line_exit_2(capsys, [command, spec(tmp_path, text)],
                    r'malformed JSON: the key "InputWindowSizes" appears twice in one object \(the second would '
                    r'silently replace the first\)')
    nested = json.dumps(SLICE1).replace('"DataType": "FLOAT32"', '"DataType": "FLOAT32", "DataType": "INT8"')
    one_line_exit_2(capsys, [command, spec(tmp_path, nested)], r'malformed JSON: the key "DataType" appears twice')


def test_input_files_that_are_no_npy_array(tmp_path, capsys):
    s = spec(tmp_path, U8)
    x = np.arange(16, dtype=np.uint8).reshape(1, 1, 4, 4)
    np.savez(tmp_path / "x.npz", x=x)
    (tmp_path / "empty.npy").write_bytes(b"")
    np.save(tmp_path / "ok.npy", x)
    raw = (tmp_path / "ok.npy").read_bytes()
    (tmp_path / "short.npy").write_bytes(raw[:-3])
    (tmp_path / "long.npy").write_bytes(raw + b"\0")
    np.save(tmp_path / "huge.npy", np.zeros(2, np.uint8))     # a header promising 2**40 elements
    (tmp_path / "huge.npy").write_bytes((tmp_path / "huge.npy").read_bytes().replace(b"(2,)", b"(1099511627776,)"))
    (tmp_path / "header.npy").write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': 'zz'}")
    cases = [("x.npz", r"--input .*x.npz: cannot read a .npy array: a .npz archive \(zip\)"),
             ("empty.npy", r"--input .*empty.npy: cannot read a .npy array: an empty file"),
             ("short.npy", r"the file holds 13 bytes of data; its header promises 16"),
             ("long.npy", r"the file holds 17 bytes of data; its header promises 16"),
             ("huge.npy", r"shape \[1099511627776\] must equal InputTensor.Sizes \[1, 1, 4, 4\]"),
             ("header.npy", r"cannot read a .npy array: "),
             (".", r"--input .*: must be a regular file; this is a folder")]
    for name, message in cases:
        one_line_exit_2(capsys, ["run", s, "--input", str(tmp_path / name)], message)


def test_input_files_in_either_byte_order_and_fortran_order(tmp_path, capsys):
    s = spec(tmp_path, {**SLICE1, "InputTensor": {"DataType": "INT16", "Sizes": [1, 1, 4, 4]}})
    x = np.arange(16, dtype=np.int16).reshape(1, 1, 4, 4)
    for name, arr in (("be.npy", x.astype(">i2")), ("f.npy", np.asfortranarray(x))):
        np.save(tmp_path / name, arr)
        assert main(["run", s, "--input", str(tmp_path / name), "--output", str(tmp_path / "y.npy")]) == 0
        assert np.load(tmp_path / "y.npy").tolist() == [[[[13, 15], [5, 7]]]]


def test_output_path_is_checked_first_and_written_exactly(tmp_path, capsys, monkeypatch):
    s = spec(tmp_path, SLICE1)
    one_line_exit_2(capsys, ["run", s, "--output", str(tmp_path / "nodir" / "y.npy")],
                    r"--output .*y.npy: directory .*nodir does not exist")
    one_line_exit_2(capsys, ["run", s, "--output", str(tmp_path)], r"is a directory; give a file name")
    monkeypatch.chdir(tmp_path)
    assert main(["run", s, "--output", "yout"]) == 0
    assert (tmp_path / "yout").exists() and not (tmp_path / "yout.npy").exists()   # exactly the name given
    assert np.load(tmp_path / "yout").tolist() == [[[[14, 16], [6, 8]]]]


def test_output_write_failure_is_one_line(tmp_path, capsys):
    import os
    if os.geteuid() == 0:
        target = "/proc/version"              # root may write anywhere but here
    else:
        (tmp_path / "ro").mkdir()
        (tmp_path / "ro").chmod(0o500)
        target = str(tmp_path / "ro" / "y.npy")
    assert main(["run", spec(tmp_path, SLICE1), "--output", target]) == 2
    err = capsys.readouterr().err
    assert err.startswith("opendml: error: --output ") and "cannot write" in err and err.count("\n") == 1


BROADCAST = {"Operator": "SLICE", "InputTensor": {"DataType": "INT64", "Sizes": [2**32 - 1], "Strides": [0]},
             "Offsets": [5], "Sizes": [3], "Strides": [7]}


def test_huge_broadcast_input_without_input_file_is_built_through_its_strides(tmp_path, capsys):
    import time
    start = time.perf_counter()
    assert main(["run", spec(tmp_path, BROADCAST), "--output", str(tmp_path / "y.npy")]) == 0
    assert time.perf_counter() - start < 2
    assert np.load(tmp_path / "y.npy").tolist() == [1, 1, 1]      # one element in memory: 1
    assert "InputTensor: (Sizes:{4294967295}, DataType:INT64, Strides:{0})" in capsys.readouterr().out
    two_d = {"Operator": "SLICE", "InputTensor": {"DataType": "INT8", "Sizes": [3, 4], "Strides": [0, 1]},
             "Offsets": [0, 0], "Sizes": [3, 4], "Strides": [1, 1]}
    assert main(["run", spec(tmp_path, two_d), "--output", str(tmp_path / "y.npy")]) == 0
    assert np.load(tmp_path / "y.npy").tolist() == [[1, 2, 3, 4]] * 3   # 1..N, a broadcast axis counted once


def test_runs_that_need_too_much_memory_are_refused(tmp_path, capsys):
    huge_input = {**BROADCAST, "InputTensor": {"DataType": "INT64", "Sizes": [2**32 - 1]}}
    one_line_exit_2(capsys, ["run", spec(tmp_path, huge_input)],
                    r"InputTensor: the default input would take 34359738360 bytes \(Sizes \[4294967295\]\); "
                    r"--max-bytes allows 2147483648: pass --input, or raise --max-bytes")
    huge_output = {**BROADCAST, "Offsets": [0], "Sizes": [2**32 - 1], "Strides": [1]}
    one_line_exit_2(capsys, ["run", spec(tmp_path, huge_output)],
                    r"SLICE: running it would touch \d+ bytes of memory .*; --max-bytes allows 2147483648")
    one_line_exit_2(capsys, ["run", spec(tmp_path, SLICE1), "--max-bytes", "64"], r"--max-bytes allows 64")
    assert main(["run", spec(tmp_path, SLICE1), "--max-bytes", "200"]) == 0


@pytest.mark.parametrize("variable, value, message", [
    ("OPENDML_CPU_CACHE_BYTES", "99999999999999999999",
     r"OPENDML_CPU_CACHE_BYTES must be an integer in \[0, 4611686018427387904\]; got '99999999999999999999'"),
    ("OPENDML_CPU_KERNELS", "bogus", r"OPENDML_CPU_KERNELS must be one of compiled, numpy; got 'bogus'"),
    ("OPENDML_CPU_THREADS", "0", r"OPENDML_CPU_THREADS must be an integer in \[1, 1024\]; got '0'"),
])
@pytest.mark.parametrize("command", [["info"], ["run", "--example", "slice-contiguous"], ["run", "--list"]])
def test_bad_environment_values(variable, value, message, command):
    import os
    import re
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENDML_")}
    r = subprocess.run([sys.executable, "-m", "opendml.cli", *command], capture_output=True, text=True,
                       env={**env, variable: value})
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout)
    assert r.stderr.count("\n") == 1 and re.search("^opendml: error: " + message, r.stderr), r.stderr


def test_usage_errors_are_one_line(capsys):
    for argv in (["frobnicate"], ["run", "--max-bytes", "-3"], ["run", "--device", "tpu"], []):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("opendml") and ": error: " in err and err.count("\n") == 1, err


@pytest.mark.parametrize("value,message", [
    ("0", "must be a positive integer number of bytes; got '0'"),
    ("-3", "must be a positive integer number of bytes; got '-3'"),
    ("1e26", "must be a positive integer number of bytes; got '1e26'"),
    ("9" * 26, r"must be at most 20 digits \(no machine holds more bytes\); got '9{26}'"),
])
def test_max_bytes_names_what_is_wrong(capsys, value, message):
    """A positive count too long to be a machine's is not called "not a positive integer"."""
    with pytest.raises(SystemExit) as e:
        main(["run", "--max-bytes", value])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search("--max-bytes: " + message, err), err


def test_max_bytes_reads_leading_zeros(tmp_path):
    assert main(["run", spec(tmp_path, SLICE1), "--max-bytes", "0" * 24 + "200"]) == 0


def test_internal_errors_are_one_line_exit_3(monkeypatch, capsys):
    import opendml.cli as cli

    def broken(args):
        raise KeyError("boom")
    monkeypatch.setattr(cli, "cmd_info", broken)
    assert main(["info"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("opendml: internal error: KeyError: 'boom' at test_cli.py:") and err.count("\n") == 1


def test_help_documents_exit_codes_output_path_and_memory_limit(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "1 an output differs" in out and "2 bad input" in out and "3 an internal error" in out
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "to exactly this path; no .npy suffix is added" in out and "--max-bytes N" in out


@pytest.mark.parametrize("command, what", [("run", "description file"), ("dispatch", "model file")])
def test_max_bytes_help_names_the_file_limit_it_sets(command, what, capsys):
    """--max-bytes also bounds the JSON file read (N / 16 bytes, at least 1 MiB), which refuses a larger file with
    exit 2; --help said only the run's memory (or the model's resources)."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert f"or a {what} of more than N / 16 bytes (at least 1 MiB)" in out, out


def test_title_of_any_json_type_prints_one_line(tmp_path, capsys):
    assert main(["run", spec(tmp_path, {**SLICE1, "Title": {"a": ["b\nc"]}, "Source": 3})]) == 0
    assert capsys.readouterr().out.startswith('== {"a": ["b\\nc"]}  [3]\n')


# -- several inputs and outputs (JOIN, SPLIT): generic over the description's slots --------

JOIN = {"Operator": "JOIN", "Axis": 1,
        "InputTensors": [{"DataType": "INT16", "Sizes": [2, 1]}, {"DataType": "INT16", "Sizes": [2, 2]}],
        "OutputTensor": {"DataType": "INT16", "Sizes": [2, 3]}}
SPLIT = {"Operator": "SPLIT", "Axis": 0, "InputTensor": {"DataType": "UINT8", "Sizes": [3, 2]},
         "OutputTensors": [{"DataType": "UINT8", "Sizes": [1, 2]}, {"DataType": "UINT8", "Sizes": [2, 2]}]}


def test_every_family_example_runs_and_matches(capsys):
    names = [n for n in EXAMPLE_ORDER if n.startswith(("join", "split"))]
    assert len(names) >= 6
    for name in names:
        assert main(["run", "--example", name]) == 0, name
        out = capsys.readouterr().out
        assert "matches the documented output" in out and "differs" not in out
    assert main(["run", "--example", "split-axis2"]) == 0
    out = capsys.readouterr().out
    assert out.count("OutputTensors[") == 3 and "OutputTensors[2]: (Sizes:{1, 1, 3, 2}" in out


def test_join_inputs_from_json_and_from_files(tmp_path, capsys):
    obj = dict(JOIN, Inputs=[[[1], [2]], [[3, 4], [5, 6]]], ExpectedOutputs=[[[1, 3, 4], [2, 5, 6]]])
    assert main(["run", spec(tmp_path, obj), "--output", str(tmp_path / "y.npy")]) == 0
    out = capsys.readouterr().out
    assert "InputTensors[0]: (Sizes:{2, 1}, DataType:INT16)" in out and "InputTensors[1]:" in out
    assert np.load(tmp_path / "y.npy").tolist() == [[1, 3, 4], [2, 5, 6]]
    np.save(tmp_path / "a.npy", np.array([[7], [8]], np.int16))
    np.save(tmp_path / "b.npy", np.array([[9, 10], [11, 12]], np.int16))
    assert main(["run", spec(tmp_path, JOIN, "j.json"), "--input", str(tmp_path / "a.npy"),
                 "--input", str(tmp_path / "b.npy"), "--output", str(tmp_path / "z.npy")]) == 0
    assert np.load(tmp_path / "z.npy").tolist() == [[7, 9, 10], [8, 11, 12]]
    # no Inputs: the pages' 1..N for each input
    assert main(["run", spec(tmp_path, JOIN, "d.json"), "--output", str(tmp_path / "d.npy")]) == 0
    assert np.load(tmp_path / "d.npy").tolist() == [[1, 1, 2], [2, 3, 4]]


def test_split_outputs_saved_one_file_each_and_checked(tmp_path, capsys):
    paths = [str(tmp_path / "p.npy"), str(tmp_path / "q.npy")]
    obj = dict(SPLIT, Inputs=[[[1, 2], [3, 4], [5, 6]]], ExpectedOutputs=[[[1, 2]], [[3, 4], [5, 6]]])
    assert main(["run", spec(tmp_path, obj), "--output", paths[0], "--output", paths[1]]) == 0
    assert np.load(paths[0]).tolist() == [[1, 2]] and np.load(paths[1]).tolist() == [[3, 4], [5, 6]]
    assert "matches the documented outputs" in capsys.readouterr().out
    bad = dict(obj, ExpectedOutputs=[[[1, 2]], [[3, 4], [5, 7]]])
    assert main(["run", spec(tmp_path, bad, "bad.json")]) == 1
    out = capsys.readouterr().out
    assert "OutputTensors[1] differs from the documented output" in out and "OutputTensors[0] differs" not in out


@pytest.mark.parametrize("second", ["p.npy", "./p.npy", "link.npy"])
def test_two_outputs_to_one_file_exit_2_before_running(tmp_path, capsys, monkeypatch, second):
    """SPLIT's outputs saved to one file (the same name, or another naming the same file) kept the last only."""
    monkeypatch.chdir(tmp_path)
    os.symlink("p.npy", "link.npy")
    assert main(["run", spec(tmp_path, SPLIT), "--output", "p.npy", "--output", second]) == 2
    err = capsys.readouterr().err
    assert err == f"opendml: error: --output {second}: names the same file as --output p.npy; give each output its " \
                  f"own file\n"
    assert not os.path.exists("p.npy")


@pytest.mark.parametrize("obj, args, message", [
    (dict(JOIN, Input=[[1], [2]]), [], "$.Input: JOIN takes 2 inputs; give them as \"Inputs\""),
    (dict(JOIN, Inputs=[[[1], [2]]]), [], "$.Inputs: must be a list of 2 arrays"),
    (dict(JOIN, Inputs=[[[1], [2]], [[3, 4]]]), [], "$.Inputs[1]: shape [1, 2] must equal InputTensors[1].Sizes [2, 2]"),
    (dict(SPLIT, ExpectedOutput=[[1, 2]]), [], "$.ExpectedOutput: SPLIT has 2 outputs"),
    (dict(SPLIT, ExpectedOutputs=[[[1, 2]]]), [], "$.ExpectedOutputs: must be a list of 2 arrays"),
    (dict(SPLIT, Inputs=[[[1, 2], [3, 4], [5, 6]]], Input=[[7, 8], [9, 10], [11, 12]]), [],
     "$: \"Input\" and \"Inputs\" are both given (one array, or a list of one per tensor); give one of them"),
    (dict(SPLIT, ExpectedOutputs=[[[1, 2]], [[3, 4], [5, 6]]], ExpectedOutput=[[1, 2]]), [],
     "$: \"ExpectedOutput\" and \"ExpectedOutputs\" are both given"),
    (SPLIT, ["--output", "OUT"], "--output: SPLIT has 2 output(s) (OutputTensors[0], OutputTensors[1]); got 1"),
    (JOIN, ["--input", "IN"], "--input: JOIN takes 2 input(s) (InputTensors[0], InputTensors[1]); got 1"),
])
def test_wrong_counts_of_inputs_and_outputs_exit_2(tmp_path, capsys, obj, args, message):
    args = [str(tmp_path / "o.npy") if a == "OUT" else str(tmp_path / "i.npy") if a == "IN" else a for a in args]
    np.save(tmp_path / "i.npy", np.zeros((2, 1), np.int16))
    assert main(["run", spec(tmp_path, obj)] + args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
