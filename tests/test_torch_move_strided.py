"""``opendml::move`` on descriptions whose output tensors give Strides: every
route (the custom op, the C++ dispatcher's op, the kernel) returns the
elements the Device route reads through the same description, and nothing
writes past an output. A description is data (a saved or exported graph
carries it), so the strides are the user's."""
import copy
import json
import subprocess
import sys
import textwrap
from importlib import resources

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import opendml as dml  # noqa: E402
from opendml.ops._move import MoveOperatorDesc  # noqa: E402
from opendml import cli  # noqa: E402
from opendml.arrays.torch import library as family_torch_op  # noqa: E402
from opendml.jsonform import from_json  # noqa: E402
from opendml.model.tensor_desc import packed_strides  # noqa: E402


def _examples():
    out = []
    for f in sorted(resources.files("opendml.examples").iterdir(), key=lambda p: p.name):
        if f.name.endswith(".json"):
            obj = json.loads(f.read_text(encoding="utf-8"))
            cls = dml.ops.OPERATORS[obj["Operator"]]
            if issubclass(cls, MoveOperatorDesc):   # (the operators opendml::move runs)
                out.append((f.name[:-5], obj))
    return out


EXAMPLES = _examples()


def _layouts(sizes):
    """Non-overlapping output layouts of ``sizes``: padded (a gap after every
    row), reversed dimension order, and interleaved with a large base."""
    packed = packed_strides(sizes)
    padded, step = [], 1
    for s in reversed(sizes):
        padded.insert(0, step)
        step *= s + 1
    rev, step = [0] * len(sizes), 1
    for i in range(len(sizes)):
        rev[i] = step
        step *= sizes[i]
    return {"padded": padded, "reversed": rev, "doubled": [2 * t for t in packed]}


def _strided(obj, layout):
    """``obj`` with every output tensor given ``layout``'s strides."""
    obj = {k: v for k, v in copy.deepcopy(obj).items()
           if k not in ("Name", "Title", "Source", "Input", "ExpectedOutput", "Inputs", "ExpectedOutputs")}
    desc = from_json(obj)
    form = dml.jsonform.to_json(desc)
    for name, t in desc.named_tensors("output"):
        strides = _layouts(list(t.sizes))[layout]
        base, _, index = name.partition("[")
        target = form[base][int(index[:-1])] if index else form[base]
        target["Strides"] = strides
        target.pop("TotalTensorSizeInBytes", None)
    return form


CASES = [(f"{name}-{layout}", _strided(obj, layout)) for name, obj in EXAMPLES
         for layout in ("padded", "reversed", "doubled")]


def _inputs(desc):
    return [np.ascontiguousarray(cli.default_input(desc, None, t, n)) for n, t in desc.named_tensors("input")]


@pytest.fixture(params=["compiled", "numpy"])
def kernels(request):
    if request.param == "compiled" and not dml.config().compiled_available:
        pytest.skip("compiled kernels not built")
    with dml.configure(cpu_kernels=request.param):
        yield request.param


@pytest.mark.parametrize("name, form", CASES, ids=[c[0] for c in CASES])
def test_strided_outputs_equal_the_device_route(name, form, kernels):
    desc = from_json(form)
    xs = _inputs(desc)
    want = dml.Device("cpu").run_all(desc, *xs)           # buffers of TotalTensorSizeInBytes, read through Strides
    text = json.dumps(form)
    routes = {"opendml::move": lambda: torch.ops.opendml.move([torch.from_numpy(x) for x in xs], text)}
    cpp = family_torch_op.cpp_op("move")
    if cpp is not None:
        routes["opendml_cpp::move"] = lambda: cpp([torch.from_numpy(x) for x in xs], text)
    routes["kernel"] = lambda: family_torch_op.kernel(family_torch_op.description(text),
                                                      [torch.from_numpy(x) for x in xs])
    for route, call in routes.items():
        got = call()
        assert len(got) == len(want), route
        for g, w in zip(got, want):
            assert tuple(g.shape) == w.shape and g.is_contiguous(), route
            assert g.numpy().tobytes() == w.tobytes(), (route, name)


def test_a_description_passed_to_the_kernel_directly_runs_packed():
    form = {"Operator": "ELEMENT_WISE_IDENTITY", "InputTensor": {"DataType": "FLOAT32", "Sizes": [64]},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [64], "Strides": [2]}}
    desc = from_json(form)
    assert desc.output_tensor.strides == (2,)
    with dml.configure(cpu_kernels="numpy"):
        out, = family_torch_op.kernel(desc, [torch.arange(64, dtype=torch.float32)])
    assert out.tolist() == list(range(64))
    assert family_torch_op.packed_outputs(desc).output_tensor.strides is None


@pytest.mark.parametrize("strides, sizes", [([0], [64]), ([1, 1], [4, 4]), ([2, 3], [4, 4])])
def test_overlapping_output_strides_are_refused(strides, sizes):
    form = {"Operator": "ELEMENT_WISE_IDENTITY", "InputTensor": {"DataType": "FLOAT32", "Sizes": sizes},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": sizes, "Strides": strides}}
    x = torch.zeros(sizes)
    with pytest.raises(dml.ValidationError, match=r"OutputTensor\.Strides .* map two elements .* to one place"):
        torch.ops.opendml.move([x], json.dumps(form))


def test_interleaved_strides_that_do_not_overlap_run():
    # sizes [2, 3] strides [3, 2]: offsets 0 2 4 3 5 7, distinct though neither dimension steps past the other
    form = {"Operator": "ELEMENT_WISE_IDENTITY", "InputTensor": {"DataType": "INT32", "Sizes": [2, 3]},
            "OutputTensor": {"DataType": "INT32", "Sizes": [2, 3], "Strides": [3, 2]}}
    x = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    out, = torch.ops.opendml.move([x], json.dumps(form))
    assert out.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_the_reported_overflow_in_a_subprocess():
    """Issue 34's reproducer: segfaulted (a heap-buffer-overflow write) with
    the compiled kernels, returned uninitialised memory with NumPy's."""
    code = textwrap.dedent("""
        import json, torch, opendml
        import opendml.torch
        desc = {"Operator": "ELEMENT_WISE_IDENTITY", "InputTensor": {"DataType": "FLOAT32", "Sizes": [1 << 16]},
                "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1 << 16], "Strides": [64]}}
        x = torch.arange(1 << 16, dtype=torch.float32)
        for kernels in ("compiled", "numpy"):
            if kernels == "compiled" and not opendml.config().compiled_available:
                continue
            with opendml.configure(cpu_kernels=kernels):
                for _ in range(3):
                    out, = torch.ops.opendml.move([x], json.dumps(desc))
                    assert torch.equal(out, x), kernels
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr[-2000:])


def _cuda_available():
    return torch.cuda.is_available()


@pytest.mark.cuda
@pytest.mark.skipif(not _cuda_available(), reason="CUDA is not available here")
@pytest.mark.parametrize("name, form", CASES, ids=[c[0] for c in CASES])
def test_strided_outputs_on_cuda_equal_the_device_route(name, form):
    """The CUDA route allocates outputs from PyTorch's allocator by the
    description's sizes; a description with output strides runs packed there
    too (before, the program's spans were refused with a ValueError). An
    operator without inputs (DIAGONAL_MATRIX) has no device to follow: its
    outputs are on the CPU, as the module says."""
    desc = from_json(form)
    xs = _inputs(desc)
    want = dml.Device("cpu").run_all(desc, *xs)
    got = torch.ops.opendml.move([torch.from_numpy(x).cuda() for x in xs], json.dumps(form))
    for g, w in zip(got, want):
        assert g.device.type == ("cuda" if xs else "cpu"), name
        assert g.cpu().numpy().tobytes() == w.tobytes(), name
