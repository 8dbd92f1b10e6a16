"""The one front (``arrays/front.py``): every bound operator's function is a
thin def whose signature agrees with the operator's ``BINDING``, one call type
serves both routes, and the arguments the family snapshots are read from the
signatures (the sequences), not listed by hand."""
import inspect

import numpy as np
import pytest

import opendml as dml
from opendml.arrays import _contract, front, planner
from opendml.ops import OPERATORS
from opendml.ops._spec import binding_of


def bound():
    return [(cls, binding_of(cls)) for cls in OPERATORS.values() if binding_of(cls) is not None]


@pytest.mark.parametrize("cls,binding", bound(), ids=lambda v: getattr(v, "function", ""))
def test_every_function_takes_what_its_binding_declares(cls, binding):
    fn = getattr(dml.arrays, binding.function)
    params = list(inspect.signature(fn).parameters)
    assert params[0] == binding.array
    assert set(binding.args) | set(binding.others) <= set(params[1:]), (binding.function, params)
    assert _contract.OPERATOR_OF[binding.function] is cls


def test_one_call_type():
    assert not hasattr(planner, "OpCall")
    assert front.FamilyCall is front.Call
    plan = front.Call("slice1", None, key=front.PLAN_KEY, args=([0, 0], [2, 3], [1, 1], None))
    assert plan.key == ("slice1", (0, 0), (2, 3), (1, 1), ("None",))
    assert front.Call("slice1", None, key=front.PLAN_KEY, args=([0, 1.0],)).key is None
    assert front.Call("pad", None).key is None


def test_snapshotted_arguments_come_from_the_signatures():
    assert front._SNAPSHOTS == {"identity": set(), "cast": set(), "pad": {0, 1}, "join": set(), "split": {1},
                                "tile": {0}, "space_to_depth": set(), "depth_to_space": set()}
    assert front._SEQUENCES == {"join"} and front._MULTI == {"split"}


def test_a_family_call_records_its_arguments_as_snapshotted(monkeypatch):
    """The C call cache's record and the Python cache's key are made from one
    snapshot of the arguments (a list a caller changes afterwards changes
    neither)."""
    seen = []
    real = front._run_move
    monkeypatch.setattr(front, "_run_move", lambda call, arrays: seen.append(call) or real(call, arrays))
    monkeypatch.setattr(front, "_new", lambda *args: None)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    start = [1, 0]
    out = dml.pad(x, start, 0)
    (call,) = seen
    assert call.ccall == ("pad", ((1, 0), 0, "constant", 0), False)
    assert call.key[0] == "pad" and call.multi is False
    start[0] = 5
    assert call.ccall[1][0] == (1, 0)
    assert out.shape == (4, 4)
