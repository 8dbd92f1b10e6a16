"""What adding an operator costs: a new operator of an existing plan kind is
its module, its tests and one registry line. This file is all three: the
module (``ReverseOperatorDesc``, a made-up operator that reverses every
axis, lowered to the move program), its registration (one ``OPERATORS``
entry, made by the fixture) and its tests, which run it through every
consumer of the registry without editing any of them: the JSON form, the
DirectML flow (``Device``), the command line's ``info``, DxDispatch models,
the family's framework-neutral call (NumPy, PyTorch with autograd and
forward-mode AD, JAX ``grad``, Dask) and, where there is a GPU, CUDA."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import opendml as dml
from opendml import jsonform, ops
from opendml.arrays.front import Call
from opendml.model.tensor_desc import TensorDesc
from opendml.ops._common import TYPES_4_1, support
from opendml.ops._move import MoveOperatorDesc
from opendml.ops._spec import Tensor, is_float
from opendml.plan import Copy


# -- the module ----------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True, repr=False)
class ReverseOperatorDesc(MoveOperatorDesc):
    """Output[i] = Input[Sizes - 1 - i] along every axis (a test operator)."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc | None

    OPERATOR = "TEST_REVERSE"
    TYPE_VALUE = 10_000
    SLOTS = (Tensor("InputTensor", "input_tensor", "input"),
             Tensor("OutputTensor", "output_tensor", "output", optional=True))
    FIELDS = ()
    SUPPORT = support({"1_0": (1, 8)}, types={"1_0": TYPES_4_1})

    def __post_init__(self):
        inp = self._check_input()
        if self.output_tensor is None:
            self._set("output_tensor", TensorDesc(inp.data_type, inp.sizes))
        self._check_slot_tensors()
        self._check_sizes("OutputTensor", self.output_tensor, inp.sizes, "InputTensor.Sizes")

    def _passes(self, layouts):
        (strides, origin), = layouts
        sizes = self.input_tensor.sizes
        start = origin + sum((n - 1) * s for n, s in zip(sizes, strides))
        yield Copy(0, 0, tuple(sizes), start, tuple(-s for s in strides), 0, self.output_tensor.element_strides)

    def linear_part(self):
        return self if is_float(self.input_tensor.data_type) else None

    def adjoint(self, api, grad):
        n = self.input_tensor.rank
        return (api.slice1(grad, [0] * n, list(self.input_tensor.sizes), [-1] * n),)

    def chunking(self):
        return {k: 0 for k in range(self.input_tensor.rank)}


def reverse(x):
    """The array function: a thin ``def`` over the framework-neutral call."""
    return Call("reverse", lambda t: ReverseOperatorDesc(t, None))(x)[0]


# -- the registry line -----------------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def registered(monkeypatch):
    monkeypatch.setitem(ops.OPERATORS, ReverseOperatorDesc.OPERATOR, ReverseOperatorDesc)


# -- its tests ---------------------------------------------------------------------------------------------

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
WANT = X[::-1, ::-1, ::-1]


def test_json_form_round_trips():
    text = {"Operator": "TEST_REVERSE", "InputTensor": {"DataType": "FLOAT32", "Sizes": [2, 3, 4]}}
    desc = jsonform.from_json(text)
    assert isinstance(desc, ReverseOperatorDesc)
    assert jsonform.from_json(jsonform.to_json(desc)) == desc


def test_device_flow_and_validation():
    desc = ReverseOperatorDesc(TensorDesc(dml.DataType.FLOAT32, [2, 3, 4]), None)
    assert np.array_equal(dml.Device("cpu").run(desc, X), WANT)
    with pytest.raises(dml.ValidationError, match="TEST_REVERSE: OutputTensor"):
        ReverseOperatorDesc(TensorDesc(dml.DataType.FLOAT32, [2, 3, 4]), TensorDesc(dml.DataType.FLOAT32, [2, 3, 5]))


def test_cli_info_lists_it(capsys):
    from opendml.cli import main
    assert main(["info"]) == 0
    assert "TEST_REVERSE" in capsys.readouterr().out


def test_dxdispatch_model(tmp_path):
    from opendml import dxdispatch
    model = {"resources": {"in": {"initialValuesDataType": "FLOAT32",
                                  "initialValues": {"valueCount": 24, "valueStart": 0, "valueDelta": 1}},
                           "out": {"initialValuesDataType": "FLOAT32",
                                   "initialValues": {"valueCount": 24, "value": 0}}},
             "dispatchables": {"r": {"type": "DML_OPERATOR_TEST_REVERSE", "desc": {
                 "InputTensor": {"DataType": "FLOAT32", "Sizes": [2, 3, 4]},
                 "OutputTensor": {"DataType": "FLOAT32", "Sizes": [2, 3, 4]}}}},
             "commands": [{"type": "dispatch", "dispatchable": "r",
                           "bindings": {"InputTensor": "in", "OutputTensor": "out"}}]}
    path = tmp_path / "reverse.json"
    path.write_text(json.dumps(model))
    assert np.array_equal(dxdispatch.run(str(path))["out"], WANT.reshape(-1))


def test_numpy_and_any_strides():
    assert np.array_equal(reverse(X), WANT)
    view = np.arange(48, dtype=np.float64).reshape(4, 12)[::2, ::-3]
    assert np.array_equal(reverse(view), view[::-1, ::-1])


def test_pytorch_autograd_and_forward_ad():
    torch = pytest.importorskip("torch")
    import torch.autograd.forward_ad as fwAD
    x = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    assert torch.equal(reverse(x), x.flip(0, 1, 2))
    assert torch.autograd.gradcheck(reverse, (x,))
    t = torch.randn_like(x)
    with fwAD.dual_level():
        tangent = fwAD.unpack_dual(reverse(fwAD.make_dual(x.detach(), t))).tangent
    assert torch.equal(tangent, t.flip(0, 1, 2))


def test_jax_grad():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = jnp.arange(24.0, dtype=jnp.float32).reshape(2, 3, 4)
    w = jnp.arange(24.0, dtype=jnp.float32).reshape(2, 3, 4)
    assert np.array_equal(np.asarray(reverse(x)), WANT)
    got = jax.grad(lambda v: (reverse(v) * w).sum())(x)
    assert np.array_equal(np.asarray(got), np.asarray(w)[::-1, ::-1, ::-1])


def test_dask():
    da = pytest.importorskip("dask.array")
    x = da.from_array(X, chunks=(1, 2, 2))
    assert np.array_equal(reverse(x).compute(), WANT)


@pytest.mark.cuda
def test_cuda_device_flow():
    from tests.conftest import cuda_available
    if not cuda_available():
        pytest.skip("CUDA is not available here")
    desc = ReverseOperatorDesc(TensorDesc(dml.DataType.FLOAT32, [2, 3, 4]), None)
    assert np.array_equal(dml.Device("cuda").run(desc, X), WANT)


def test_without_its_registry_line_it_is_unknown(monkeypatch):
    monkeypatch.delitem(ops.OPERATORS, ReverseOperatorDesc.OPERATOR)
    with pytest.raises(dml.ValidationError, match="TEST_REVERSE"):
        jsonform.from_json({"Operator": "TEST_REVERSE", "InputTensor": {"DataType": "FLOAT32", "Sizes": [2]}})
