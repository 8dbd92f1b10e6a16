"""A DxDispatch model is initialised, printed and written piece by piece
(``CHUNK_BYTES``, ``PRINT_ELEMENTS``, ``READ_BYTES``); with pieces made tiny
here, every initialiser, print and writeFile gives the same bytes and text as
one piece does, and errors name the entry where it lies (not its index in a
piece)."""
import io
import json

import numpy as np
import pytest

import opendml as dml
from opendml import dxdispatch
from opendml.dxdispatch import _output, _resources


@pytest.fixture(params=["whole", "tiny"])
def pieces(request, monkeypatch):
    if request.param == "tiny":
        monkeypatch.setattr(_resources, "CHUNK_BYTES", 24)
        monkeypatch.setattr(_resources, "LIST_ITEMS", 7)
        monkeypatch.setattr(_output, "PRINT_ELEMENTS", 5)
        monkeypatch.setattr(_output, "READ_BYTES", 16)
    return request.param


def run(model, tmp_path):
    out = io.StringIO()
    results = dxdispatch.run(model, out=out, base_dir=tmp_path)
    return results, out.getvalue()


def one(iv, dt=None, **more):
    r = {"initialValues": iv, **more}
    if dt is not None:
        r["initialValuesDataType"] = dt
    return {"resources": {"r": r}, "dispatchables": {}, "commands": [{"type": "print", "resource": "r"}]}


@pytest.mark.parametrize("dt, start, delta", [("FLOAT16", 0.1, 0.3), ("FLOAT32", -3.5, 0.1), ("FLOAT64", 1e-3, 7.1),
                                              ("INT16", -50, 3), ("UINT64", 2**63, 1), ("INT8", 127, -2)])
def test_sequences_carry_from_piece_to_piece(pieces, tmp_path, dt, start, delta):
    n = 101
    res, text = run(one({"valueCount": n, "valueStart": start, "valueDelta": delta}, dt), tmp_path)
    npdt = res["r"].dtype
    if npdt.kind == "f":
        want = np.add.accumulate(np.array([start] + [delta] * (n - 1), np.float64).astype(npdt), dtype=npdt)
    else:
        want = (np.array(start, dtype=object) + np.arange(n, dtype=object) * delta).astype(npdt)
    assert res["r"][:n].tobytes() == want.tobytes()
    assert text == dxdispatch.format_resource("r", want) + "\n"


def test_a_float_sequence_overflowing_names_its_entry(pieces, tmp_path):
    with pytest.raises(dxdispatch.ModelError, match=r"entry 11 of the sequence overflows FLOAT16"):
        run(one({"valueCount": 40, "valueStart": 60000, "valueDelta": 500}, "FLOAT16"), tmp_path)


def test_constants_and_lists(pieces, tmp_path):
    res, text = run(one({"valueCount": 37, "value": -2}, "INT32"), tmp_path)
    assert res["r"].tolist() == [-2] * 37 and text == "Resource 'r': " + ", ".join(["-2"] * 37) + "\n"
    values = [i * 0.5 for i in range(29)] + ["inf", "-inf", "nan"]
    res, text = run(one(values, "FLOAT32"), tmp_path)
    assert res["r"][:29].tolist() == [i * 0.5 for i in range(29)] and np.isnan(res["r"][-1])
    assert text.endswith(", inf, -inf, nan\n")
    with pytest.raises(dxdispatch.ModelError, match=r"initialValues\[30\]: must be a number"):
        run(one(list(range(30)) + ["x"], "FLOAT64"), tmp_path)
    with pytest.raises(dxdispatch.ModelError, match=r"initialValues\[25\]: 300 is out of range for UINT8"):
        run(one(list(range(25)) + [300], "UINT8"), tmp_path)


def test_verbose_print_is_one_text(pieces, tmp_path):
    model = one({"valueCount": 23, "valueStart": 1, "valueDelta": 1}, "UINT16")
    model["commands"][0]["verbose"] = True
    _, text = run(model, tmp_path)
    assert text == dxdispatch.format_resource("r", np.arange(1, 24, dtype=np.uint16), verbose=True) + "\n"
    assert text.startswith("Resource 'r':\n[ 0] 1 (0x   1)\n") and text.endswith("[22] 23 (0x  17)\n\n")


@pytest.mark.parametrize("shape, order, dtype", [((7,), "C", "<f4"), ((3, 5), "F", "<i2"), ((2, 3, 4), "F", ">f8"),
                                                 ((4, 1, 3, 2), "F", "<u1"), ((5, 3), "C", ">u4"),
                                                 ((3, 4), "F", "|b1"), ((1, 9), "F", "<i8")])
def test_npy_files_any_order_and_byte_order(pieces, tmp_path, shape, order, dtype):
    x = (np.arange(np.prod(shape)).reshape(shape) % (2 if dtype == "|b1" else 100)).astype(dtype)
    x = np.asfortranarray(x) if order == "F" else np.ascontiguousarray(x)
    np.save(tmp_path / "x.npy", x)
    res, _ = run(one({"sourcePath": "x.npy"}), tmp_path)
    want = np.ascontiguousarray(x).astype(x.dtype.newbyteorder("="))
    if dtype == "|b1":
        want = want.view(np.uint8)
    assert res["r"].tobytes()[:want.nbytes] == want.reshape(-1).tobytes()


def test_raw_files_and_write_file_snapshots(pieces, tmp_path):
    data = bytes(range(256)) * 3
    (tmp_path / "raw.bin").write_bytes(data)
    model = {"resources": {"r": {"initialValuesDataType": "UINT16", "initialValues": {"sourcePath": "raw.bin"}},
                           "o": {"initialValuesDataType": "UINT16", "initialValues": {"valueCount": 384, "value": 9}}},
             "dispatchables": {"copy": {"type": "DML_OPERATOR_ELEMENT_WISE_IDENTITY", "desc": {
                 "InputTensor": {"DataType": "UINT16", "Sizes": [384]},
                 "OutputTensor": {"DataType": "UINT16", "Sizes": [384]}}}},
             "commands": [{"type": "writeFile", "resource": "o", "targetPath": "sub/dir/before.npy"},
                          {"type": "dispatch", "dispatchable": "copy", "bindings": {"InputTensor": "r",
                                                                                    "OutputTensor": "o"}},
                          {"type": "writeFile", "resource": "o", "targetPath": "after.bin"},
                          {"type": "writeFile", "resource": "o", "targetPath": "shaped.npy",
                           "dimensions": [4, 8, 12]}]}
    res, text = run(model, tmp_path)
    assert res["r"].tobytes() == data and res["o"].tobytes() == data
    assert np.load(tmp_path / "sub" / "dir" / "before.npy").tolist() == [9] * 384      # snapshot at its command
    assert (tmp_path / "after.bin").read_bytes() == data
    assert np.load(tmp_path / "shaped.npy").tobytes() == data and np.load(tmp_path / "shaped.npy").shape == (4, 8, 12)
    assert text.count("written to") == 3
    assert not [p for p in tmp_path.rglob(".opendml-*")]


def test_a_failure_after_a_write_file_leaves_nothing(tmp_path):
    model = {"resources": {"r": {"initialValuesDataType": "UINT8", "initialValues": [1, 2, 3, 4]}},
             "dispatchables": {}, "commands": [{"type": "writeFile", "resource": "r", "targetPath": "new/x.npy"},
                                               {"type": "print", "resource": "r"}]}

    class Broken(io.StringIO):
        def write(self, text):
            raise OSError(28, "No space left on device")
    with pytest.raises(OSError):
        dxdispatch.run(model, out=Broken(), base_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []            # neither the file, its temporary, nor the folder made for it


def test_results_view_cpu_buffers_without_a_copy(tmp_path):
    res, _ = run(one({"valueCount": 1000, "value": 3}, "FLOAT32"), tmp_path)
    r = res["r"]
    assert r.base is not None and not r.flags.owndata and r.tolist() == [3.0] * 1000
    json.dumps(r.tolist())


def _cuda():
    try:
        return dml.Device("cuda") is not None
    except dml.DmlError:
        return False


@pytest.mark.cuda
@pytest.mark.skipif(not _cuda(), reason="CUDA is not available here")
def test_cuda_buffers_are_filled_printed_and_written_in_pieces(pieces, tmp_path):
    x = np.asfortranarray(np.arange(60, dtype=">f4").reshape(3, 4, 5))
    np.save(tmp_path / "x.npy", x)
    model = {"resources": {"f": {"initialValues": {"sourcePath": "x.npy"}},
                           "s": {"initialValuesDataType": "FLOAT16",
                                 "initialValues": {"valueCount": 77, "valueStart": 0.1, "valueDelta": 0.3}}},
             "dispatchables": {},
             "commands": [{"type": "print", "resource": "f"}, {"type": "print", "resource": "s", "verbose": True},
                          {"type": "writeFile", "resource": "s", "targetPath": "s.npy"}]}
    outs = {}
    for device in ("cpu", "cuda"):
        out = io.StringIO()
        res = dxdispatch.run(model, device=device, out=out, base_dir=tmp_path)
        # (the text names no device; the folder's name holds "cuda", the test's name)
        outs[device] = ({k: v.tobytes() for k, v in res.items()}, out.getvalue(), (tmp_path / "s.npy").read_bytes())
    assert outs["cpu"] == outs["cuda"]
    assert outs["cuda"][0]["f"] == np.ascontiguousarray(x).astype("<f4").tobytes()


def test_npy_initialisers_that_are_not_npy_arrays_say_what_they_are(tmp_path):
    """The .npy header reader the CLI's --input shares: an empty file, a .npz
    archive and an unread format version are each named."""
    (tmp_path / "empty.npy").write_bytes(b"")
    np.savez(tmp_path / "x.npz", x=np.zeros(3))
    (tmp_path / "zip.npy").write_bytes((tmp_path / "x.npz").read_bytes())
    (tmp_path / "v9.npy").write_bytes(b"\x93NUMPY\x09\x00" + b"{}" * 8)
    for name, why in (("empty.npy", "an empty file"), ("zip.npy", r"a .npz archive \(zip\)"),
                      ("v9.npy", r"format version 9.0 \(versions 1.0, 2.0, 3.0 are read\)")):
        with pytest.raises(dxdispatch.ModelError, match=rf"sourcePath: cannot read the .npy header: {why}"):
            run(one({"sourcePath": name}), tmp_path)
