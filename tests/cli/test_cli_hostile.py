"""The command line against hostile input: ``python -m opendml``, ``opendml
dispatch`` on files that are not models (a device, a FIFO, a huge file),
truncated ``.npy`` initialisers and folders it cannot write. Every failure
is one line on stderr and exit 2, before anything runs."""
import json
import os
import re
import socket
import stat
import subprocess
import sys

import numpy as np
import pytest

from opendml.cli import main

ROOT_LIKE = hasattr(os, "geteuid") and os.geteuid() == 0


def run_module(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "opendml", *args], capture_output=True, text=True, timeout=timeout)


def test_python_dash_m_opendml_is_the_command_line():
    r = run_module("dispatch", "--list")
    assert r.returncode == 0, r.stderr
    assert "slice-contiguous" in r.stdout
    r = run_module("frobnicate")
    assert r.returncode == 2 and r.stderr.count("\n") == 1


def small_model(**resource):
    r = resource or {"initialValuesDataType": "FLOAT32", "initialValues": [1, 2, 3, 4]}
    return {"resources": {"r": r}, "dispatchables": {}, "commands": [{"type": "print", "resource": "r"}]}


def dispatch(tmp_path, capsys, model, *args, name="model.json"):
    path = tmp_path / name
    path.write_text(json.dumps(model))
    rc = main(["dispatch", str(path), *args])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def assert_one_line_exit_2(rc, out, err, *fragments):
    assert rc == 2, (rc, out, err)
    assert out == "" and err.count("\n") == 1 and err.startswith("opendml: error: "), (out, err)
    for f in fragments:
        assert f in err, err


def _npy_bytes(x):
    import io
    f = io.BytesIO()
    np.save(f, x)
    return f.getvalue()


NPY = _npy_bytes(np.arange(6, dtype=np.float32).reshape(2, 3))
HEADER = NPY.index(b"\n") + 1          # the header ends with a newline


@pytest.mark.parametrize("cut", [0, 3, 6, 8, 9, 10, 11, 12, 20, 30, 45, 60, HEADER - 2, HEADER - 1, HEADER,
                                 HEADER + 5, len(NPY) - 1])
def test_a_npy_file_cut_short_is_one_line(tmp_path, capsys, cut):
    (tmp_path / "x.npy").write_bytes(NPY[:cut])
    rc, out, err = dispatch(tmp_path, capsys, small_model(initialValues={"sourcePath": "x.npy"}))
    assert_one_line_exit_2(rc, out, err, "initialValues.sourcePath")


@pytest.mark.parametrize("header", [
    b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ",          # unclosed
    b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}}",
    b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3",             # a tokenizer's EOF in a bracket
    b"{'descr': '<f4', 'fortran_order': False, 'shape': '''",               # an unterminated string
    b"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}",    # structured
    b"{'descr': 'O', 'fortran_order': False, 'shape': (2,)}",
    b"{'descr': '<f4', 'fortran_order': 'yes', 'shape': (2, 3)}",
    b"{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3)}",
    b"{'descr': '<f4', 'fortran_order': False, 'shape': (-2, -3)}",       # 6 elements, as the data holds
    b"{'descr': '<f4', 'fortran_order': False, 'shape': (2**70,)}",
    b"{'descr': '<f4', 'fortran_order': False, 'shape': (" + b"(" * 200 + b")" * 200 + b")}",
    b"\xff\xfe{'descr': '<f4'}",
    b"[1, 2, 3]",
])
def test_a_malformed_npy_header_is_one_line(tmp_path, capsys, header):
    body = header + b" " * (-(len(header) + 11) % 64) + b"\n"
    data = b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body + bytes(24)
    (tmp_path / "x.npy").write_bytes(data)
    rc, out, err = dispatch(tmp_path, capsys, small_model(initialValues={"sourcePath": "x.npy"}))
    assert_one_line_exit_2(rc, out, err, "initialValues.sourcePath")


def test_an_output_dir_that_cannot_be_written_fails_before_the_model_runs(tmp_path, capsys):
    # /proc exists and is a folder, and nobody (root included) can make a folder in it
    rc, out, err = dispatch(tmp_path, capsys, small_model(), "--output-dir", "/proc")
    assert_one_line_exit_2(rc, out, err, "--output-dir /proc: cannot write in /proc")
    rc, out, err = dispatch(tmp_path, capsys, small_model(), "--output-dir", "/proc/opendml-new")
    assert_one_line_exit_2(rc, out, err, "cannot write in /proc")


@pytest.mark.skipif(ROOT_LIKE, reason="permissions do not stop root")
def test_an_output_dir_without_write_permission_fails_before_the_model_runs(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        rc, out, err = dispatch(tmp_path, capsys, small_model(), "--output-dir", str(locked))
        assert_one_line_exit_2(rc, out, err, "cannot write in")
        rc, out, err = dispatch(tmp_path, capsys, small_model(), "--output-dir", str(locked / "new"))
        assert_one_line_exit_2(rc, out, err, "cannot write in")
    finally:
        locked.chmod(stat.S_IRWXU)


def test_a_writable_output_dir_gets_every_resource(tmp_path, capsys):
    rc, out, err = dispatch(tmp_path, capsys, small_model(), "--output-dir", str(tmp_path / "new"))
    assert rc == 0 and err == "" and out == "Resource 'r': 1, 2, 3, 4\n"
    assert np.load(tmp_path / "new" / "r.npy").tolist() == [1, 2, 3, 4]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".opendml")]


def test_a_model_must_be_a_regular_file_of_bounded_size(tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)                          # no writer: opening it to read would wait forever
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(3 << 20)                   # sparse: over the 1 MiB bound of --max-bytes 16 MiB
    cases = [("/dev/zero", "this is a device"), (str(fifo), "this is a FIFO"), (str(tmp_path), "this is a folder"),
             (str(big), "the model file holds 3145728 bytes; a model may hold at most 1048576"),
             (str(tmp_path / "missing.json"), "cannot read the model")]
    for path, message in cases:
        r = run_module("dispatch", path, "--max-bytes", str(16 << 20), timeout=60)
        assert r.returncode == 2 and r.stdout == "", (path, r.returncode, r.stderr)
        assert r.stderr.count("\n") == 1 and message in r.stderr, (path, r.stderr)


def test_the_size_bound_follows_max_bytes(tmp_path, capsys):
    model = small_model(initialValuesDataType="UINT8", initialValues=list(range(200)) * 6000)   # about 4.4 MB
    rc, out, err = dispatch(tmp_path, capsys, model, "--max-bytes", str(16 << 20))
    assert_one_line_exit_2(rc, out, err, "a model may hold at most 1048576 (max_bytes / 16")
    rc, out, err = dispatch(tmp_path, capsys, model, "--max-bytes", str(128 << 20))
    assert rc == 0 and out.startswith("Resource 'r': 0, 1, 2") and err == ""


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_an_initialiser_file_must_be_a_regular_file(tmp_path, capsys, kind):
    target = tmp_path / "x.npy"
    if kind == "fifo":
        os.mkfifo(target)                    # no writer: opening it to read would wait forever
    else:
        target.mkdir()
    rc, out, err = dispatch(tmp_path, capsys, small_model(initialValues={"sourcePath": "x.npy"}))
    assert_one_line_exit_2(rc, out, err, "is not a regular file")


def test_opendml_run_and_validate_read_regular_files_only(tmp_path):
    """The same rules for ``opendml run``/``validate``: a description file and
    an --input file must be regular files; a description file is bounded by
    --max-bytes / 16 (at least 1 MiB)."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"Operator": "ELEMENT_WISE_IDENTITY",
                                "InputTensor": {"DataType": "FLOAT32", "Sizes": [3]}}))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(3 << 20)
    for argv, message in [(["run", "/dev/zero"], "/dev/zero: must be a regular file; this is a device"),
                          (["validate", str(fifo)], "must be a regular file; this is a FIFO"),
                          (["run", str(tmp_path)], "must be a regular file; this is a folder"),
                          (["run", str(spec), "--input", str(fifo)], "--input"),
                          (["run", str(big), "--max-bytes", str(16 << 20)], "a description may hold at most 1048576")]:
        r = run_module(*argv, timeout=60)
        assert r.returncode == 2 and r.stdout == "", (argv, r.returncode, r.stderr)
        assert r.stderr.count("\n") == 1 and message in r.stderr, (argv, r.stderr)


def test_open_regular_is_the_one_regular_file_check(tmp_path):
    """The CLI's and the DxDispatch reader's one check (``jsonform.open_regular``):
    a regular file opened, anything else named without reading (a FIFO with no
    writer does not block), a missing path an OSError."""
    from opendml.jsonform import open_regular
    (tmp_path / "a.json").write_bytes(b"{}")
    os.mkfifo(tmp_path / "fifo")
    f, kind = open_regular(tmp_path / "a.json")
    with f:
        assert kind is None and f.read() == b"{}"
    assert open_regular(tmp_path) == (None, "a folder")
    assert open_regular(tmp_path / "fifo") == (None, "a FIFO")
    assert open_regular("/dev/null") == (None, "a device")
    with pytest.raises(FileNotFoundError):
        open_regular(tmp_path / "missing")


@pytest.mark.parametrize("cut", [10, 20, 30, 45, HEADER - 1])
def test_opendml_run_input_npy_cut_short(tmp_path, capsys, cut):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"Operator": "ELEMENT_WISE_IDENTITY",
                                "InputTensor": {"DataType": "FLOAT32", "Sizes": [2, 3]}}))
    (tmp_path / "x.npy").write_bytes(NPY[:cut])
    assert main(["run", str(spec), "--input", str(tmp_path / "x.npy")]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "--input" in captured.err


def test_opendml_run_input_npy_with_a_malformed_header(tmp_path, capsys):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"Operator": "ELEMENT_WISE_IDENTITY",
                                "InputTensor": {"DataType": "FLOAT32", "Sizes": [3]}}))
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (3"
    body = header + b" " * (-(len(header) + 11) % 64) + b"\n"
    (tmp_path / "x.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body + bytes(12))
    assert main(["run", str(spec), "--input", str(tmp_path / "x.npy")]) == 2       # exit 3 before (TokenError)
    err = capsys.readouterr().err
    # (Python's tokenizer words the cause: "EOF in multi-line statement" on 3.11, "unexpected EOF in multi-line
    # statement" on 3.12)
    assert err.count("\n") == 1 and re.search(r"cannot read a \.npy array: a malformed header \((unexpected )?EOF "
                                               r"in multi-line", err), err


@pytest.mark.parametrize("title, shown", [
    ("\ud800", "== \\ud800"),                              # a lone surrogate: no encoding can write it (exit 3 before)
    ("caf\u00e9", "== caf\\u00e9"),                        # not ASCII, on an ASCII stream (exit 3 before)
    ("a\x1b[31mred", "== a\\u001b[31mred"),                # a terminal escape: written raw before
])
def test_a_title_the_stream_cannot_write_is_escaped(tmp_path, title, shown):
    """``opendml run`` prints a description's Title and Source as DxDispatch's ``print`` prints a resource name:
    itself where the output stream can write it and it holds no control characters, else JSON-escaped."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"Operator": "ELEMENT_WISE_IDENTITY", "Title": title, "Source": title,
                                "InputTensor": {"DataType": "FLOAT32", "Sizes": [2]}}))
    r = subprocess.run([sys.executable, "-m", "opendml", "run", str(spec)], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.splitlines()[0] == f"{shown}  [{shown[3:]}]", r.stdout


def test_a_title_the_stream_can_write_is_printed_as_it_is(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"Operator": "ELEMENT_WISE_IDENTITY", "Title": "caf\u00e9  \u2014 x",
                                "InputTensor": {"DataType": "FLOAT32", "Sizes": [2]}}))
    r = subprocess.run([sys.executable, "-m", "opendml", "run", str(spec)], capture_output=True, timeout=60,
                       env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    assert r.returncode == 0 and r.stdout.decode("utf-8").splitlines()[0] == "== caf\u00e9 \u2014 x"


class _Reads(__import__("io").BytesIO):
    """A file recording the largest read asked of it."""
    largest = 0

    def read(self, n=-1):
        self.largest = max(self.largest, n)
        return super().read(n)


@pytest.mark.parametrize("version, length", [((2, 0), 2**32 - 16), ((3, 0), 2**31), ((2, 0), 10001),
                                             ((1, 0), 65535)])
def test_a_npy_header_length_over_the_limit_is_refused_before_it_is_read(version, length):
    """A .npy header says its own length (4 bytes in versions 2 and 3): NumPy read all of it (4 GiB, 8 GiB of
    memory and 10-40 s for a sparse file) before refusing it as over ``max_header_size``."""
    from opendml.jsonform import NpyError, npy_header
    head = b"\x93NUMPY" + bytes(version) + length.to_bytes(2 if version == (1, 0) else 4, "little")
    f = _Reads(head + b"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }" + b" " * 64)
    with pytest.raises(NpyError, match=rf"^a header of {length} bytes \(at most 10000 are read\)$"):
        npy_header(f, ((1, 0), (2, 0), (3, 0)))
    assert f.largest <= 16


@pytest.mark.parametrize("command", ["run", "dispatch"])
def test_a_npy_file_claiming_a_huge_header_is_one_line(tmp_path, capsys, command):
    path = tmp_path / "x.npy"
    with open(path, "wb") as f:                      # a sparse file as long as its header claims
        f.write(b"\x93NUMPY\x02\x00" + (2**20).to_bytes(4, "little") + b"{'descr': '<f4'")
        f.truncate(12 + 2**20 + 12)
    if command == "run":
        spec = tmp_path / "spec.json"
        spec.write_text(json.dumps({"Operator": "ELEMENT_WISE_IDENTITY",
                                    "InputTensor": {"DataType": "FLOAT32", "Sizes": [3]}}))
        rc = main(["run", str(spec), "--input", str(path)])
        captured = capsys.readouterr()
        out, err = captured.out, captured.err
    else:
        rc, out, err = dispatch(tmp_path, capsys, small_model(initialValuesDataType="FLOAT32",
                                                              initialValues={"sourcePath": "x.npy"}))
    assert_one_line_exit_2(rc, out, err, "a header of 1048576 bytes (at most 10000 are read)")


@pytest.mark.parametrize("kind", ["fifo", "socket", "loop"])
def test_an_output_that_cannot_be_written_is_refused_before_the_run(tmp_path, kind):
    """``opendml run --output`` naming a FIFO no process reads hung for ever once the run was done (the open
    waited for a reader; with one, NumPy's writer fails on the FIFO's position); a symbolic-link loop failed after
    the run had printed its output. Each is refused first, as is what is no file to write (a socket)."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"Operator": "ELEMENT_WISE_IDENTITY",
                                "InputTensor": {"DataType": "FLOAT32", "Sizes": [3]}}))
    target = tmp_path / "y.npy"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "loop":
        os.symlink(target, target)
    else:
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(target))
    r = run_module("run", str(spec), "--output", str(target), timeout=30)
    why = {"fifo": "this is a FIFO", "socket": "this is a socket", "loop": "Too many levels of symbolic links"}[kind]
    if kind != "loop":
        why = f"must be a regular file, a character device or a new name; {why}"
    assert r.returncode == 2 and r.stdout == "" and r.stderr == f"opendml: error: --output {target}: {why}\n", r


def test_an_output_to_a_character_device_is_written(tmp_path):
    """``--output /dev/null`` discards the output, as a file of the shell's would."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"Operator": "ELEMENT_WISE_IDENTITY",
                                "InputTensor": {"DataType": "FLOAT32", "Sizes": [3]}}))
    r = run_module("run", str(spec), "--output", "/dev/null", timeout=30)
    assert r.returncode == 0 and r.stderr == "", r


def test_an_output_that_is_a_regular_file_or_a_new_name_is_written(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"Operator": "ELEMENT_WISE_IDENTITY",
                                "InputTensor": {"DataType": "FLOAT32", "Sizes": [3]}}))
    (tmp_path / "old.npy").write_bytes(b"x")
    os.symlink(tmp_path / "new.npy", tmp_path / "link.npy")          # a link to a file not made yet
    for name in ("old.npy", "fresh.npy", "link.npy"):
        assert main(["run", str(spec), "--output", str(tmp_path / name)]) == 0
        assert np.load(tmp_path / name).tolist() == [1, 2, 3]


def test_an_empty_output_dir_is_refused_not_read_as_the_current_folder(tmp_path, capsys, monkeypatch):
    """``--output-dir ""`` (an unset shell variable) wrote every resource into the current folder, replacing any
    NAME.npy there; ``--output ""`` failed only after the run had printed its output."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.npy").write_bytes(b"mine")
    rc, out, err = dispatch(tmp_path, capsys, small_model(), "--output-dir", "")
    assert_one_line_exit_2(rc, out, err, "--output-dir: must name a folder; got an empty path")
    assert (tmp_path / "r.npy").read_bytes() == b"mine"
    from opendml.dxdispatch import ModelError, check_output_dir
    with pytest.raises(ModelError, match="^--output-dir: must name a folder; got an empty path$"):
        check_output_dir("", ["r"])
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"Operator": "ELEMENT_WISE_IDENTITY",
                                "InputTensor": {"DataType": "FLOAT32", "Sizes": [3]}}))
    assert main(["run", str(spec), "--output", ""]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == "opendml: error: --output: must name a file; got an empty path\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("argv", [["run", "--example", "unfold"], ["dispatch", "--example", "unfold"], ["info"],
                                  ["run", "--list"]])
def test_an_output_stream_that_cannot_be_written_is_one_line_and_exit_2(argv):
    """Standard output on a full disk (here /dev/full) was "internal error: OSError: [Errno 28] No space left on
    device ... (a bug of opendml; please report it)", exit 3 (or, for output still buffered at exit, Python's
    "Exception ignored" lines and exit 120)."""
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "opendml", *argv], stdout=full, stderr=subprocess.PIPE, text=True,
                           timeout=60)
    assert r.returncode == 2 and r.stderr == "opendml: error: cannot write the output: No space left on device\n", \
        (r.returncode, r.stderr)


def test_a_closed_pipe_is_still_a_quiet_exit_0():
    r = subprocess.run(f"{sys.executable} -m opendml run | head -c 10", shell=True, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stderr == "" and len(r.stdout) == 10, r
