"""What a DxDispatch model can make the process hold: at most ``max_bytes``
(its resources) plus a small constant, whatever it prints, initialises or
writes. Each case runs in a fresh interpreter that measures its peak
resident memory (``ru_maxrss``) before and after the model; a warm-up model
of the same kind runs first, so the imports and kernels are not counted.
Before this was fixed a print cost about 75 bytes per element (an 8 MiB
resource peaked near 660 MiB) and a sequence about 4x its size."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

resource = pytest.importorskip("resource")

MiB = 1 << 20
#: What the process may hold beyond max_bytes: the pieces a model is
#: initialised, printed and written in (4 MiB of bytes, 64K elements of
#: text) and what NumPy and the allocator keep around.
SLACK = 24 * MiB

SCRIPT = textwrap.dedent("""
    import io, json, os, resource, sys
    import opendml.dxdispatch as dx

    def model(kind, n):
        out = {"resources": {}, "dispatchables": {}, "commands": []}
        if kind in ("print", "print-verbose"):
            out["resources"]["r"] = {"initialValuesDataType": "UINT8",
                                     "initialValues": {"valueCount": n, "value": 7}}
            out["commands"].append({"type": "print", "resource": "r", "verbose": kind == "print-verbose"})
        elif kind == "sequence":
            out["resources"]["r"] = {"initialValuesDataType": "FLOAT32",
                                     "initialValues": {"valueCount": n // 4, "valueStart": 0.5, "valueDelta": 0.25}}
        elif kind == "constant":
            out["resources"]["r"] = {"initialValuesDataType": "INT64",
                                     "initialValues": {"valueCount": n // 8, "value": -7}}
        elif kind == "file":
            out["resources"]["r"] = {"initialValues": {"sourcePath": f"in{n}.npy"}}
            out["commands"].append({"type": "writeFile", "resource": "r", "targetPath": "copy.npy"})
        return out

    kind, max_bytes, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    n = max_bytes - 4096
    if kind == "file":
        import numpy as np
        piece = np.arange(1 << 20, dtype="<u2").tobytes()
        for count in (4096 + 8, n):       # written as it goes: no array of n bytes
            with open(os.path.join(folder, f"in{count}.npy"), "wb") as f:
                np.lib.format.write_array_header_1_0(f, {"descr": "<u2", "fortran_order": False,
                                                         "shape": (count // 2,)})
                for lo in range(0, count // 2, 1 << 20):
                    f.write(piece[:2 * min(1 << 20, count // 2 - lo)])
    with open(os.devnull, "w") as out:
        dx.run(model(kind, 4096 + 8), out=out, max_bytes=max_bytes, base_dir=folder)   # warm-up
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        results = dx.run(model(kind, n), out=out, max_bytes=max_bytes, base_dir=folder)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = results["r"]
    print(json.dumps({"before": before * 1024, "after": after * 1024, "nbytes": int(r.nbytes),
                      "first": r[:3].tolist(), "last": r[-1].item()}))
""")


def measure(kind: str, max_bytes: int, folder) -> dict:
    r = subprocess.run([sys.executable, "-c", SCRIPT, kind, str(max_bytes), str(folder)], capture_output=True,
                       text=True, timeout=600, env={**os.environ, "OPENDML_CPU_CACHE_BYTES": "0"})
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


@pytest.mark.parametrize("kind, max_bytes", [("print", 8 * MiB), ("print-verbose", 2 * MiB),
                                             ("sequence", 64 * MiB), ("constant", 64 * MiB), ("file", 32 * MiB)])
def test_a_model_holds_at_most_max_bytes_plus_a_constant(kind, max_bytes, tmp_path):
    m = measure(kind, max_bytes, tmp_path)
    grew = m["after"] - m["before"]
    assert grew <= max_bytes + SLACK, (kind, grew / MiB, max_bytes / MiB)
    n = max_bytes - 4096
    if kind.startswith("print"):
        assert m["nbytes"] == n and m["first"] == [7, 7, 7] and m["last"] == 7
    elif kind == "sequence":
        assert m["first"] == [0.5, 0.75, 1.0]
        # float32 accumulation as DxDispatch does it, rounded at every step
        want = np.add.accumulate(np.array([0.5] + [0.25] * (n // 4 - 1), np.float32), dtype=np.float32)[-1]
        assert m["last"] == float(want)
    elif kind == "constant":
        assert m["first"] == [-7, -7, -7] and m["last"] == -7
    else:
        assert m["first"] == [0, 1, 2] and m["last"] == (n // 2 - 1) % (1 << 20) % (1 << 16)
        copy = np.load(tmp_path / "copy.npy", mmap_mode="r")
        assert copy.shape == (n // 2,) and copy[-1] == m["last"]


def _repeated_dispatches(n: int, distinct: bool = False) -> dict:
    return {"resources": {"input": {"initialValuesDataType": "FLOAT32",
                                    "initialValues": {"valueCount": 16 + (4 * n if distinct else 0),
                                                      "valueStart": 1, "valueDelta": 1}},
                          "output": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 4, "value": 0}}},
            "dispatchables": {"flip": {"type": "DML_OPERATOR_SLICE1", "desc": {
                "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 4]},
                "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]},
                "InputWindowOffsets": [0, 0, 0, 1], "InputWindowSizes": [1, 1, 4, 3],
                "InputWindowStrides": [1, 1, -2, 2]}}},
            "commands": [{"type": "dispatch", "dispatchable": "flip",
                          "bindings": {"InputTensor": {"name": "input", "elementOffset": 4 * i if distinct else 0,
                                                       "elementCount": 16},
                                       "OutputTensor": "output"}} for i in range(n)]}


@pytest.mark.parametrize("distinct", [False, True])
def test_many_dispatch_commands_hold_no_binding_table_each(distinct):
    """Every dispatch command kept its own binding table and, once run, its prepared dispatch: about 1.9 KB per
    command, beyond the parsed model (a 128 MiB model of dispatches, what the default --max-bytes takes, held
    about 2.5 GB more). Commands now keep their checked bindings (one object per distinct range, a repeated command
    its first's), and tables live in a small cache by bindings: a model of repeated dispatches holds one, one of
    distinct ranges some hundred bytes per command (less than the command's parsed JSON)."""
    import io
    import tracemalloc
    import opendml.dxdispatch as dx
    n = 4000
    model = _repeated_dispatches(n, distinct)
    dx.run(_repeated_dispatches(3, distinct), out=io.StringIO())          # warm-up
    tracemalloc.start()
    try:
        results = dx.run(model, out=io.StringIO())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    last = 4 * (n - 1) if distinct else 0
    assert results["output"].tolist() == [last + 14, last + 16, last + 6, last + 8]
    assert peak < (4 if distinct else 1) * MiB, peak / MiB      # 7.6 MiB before, either way (now 0.24 and 2.6)
