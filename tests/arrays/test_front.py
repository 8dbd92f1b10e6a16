"""The one front (``arrays/front.py``): every bound operator's function is
generated from the operator's ``BINDING`` (a real function with its signature,
docstring and source, which the API reference reads too), one call type
serves both routes, and the arguments the family snapshots are read from the
signatures (the sequences), not listed by hand."""
import ast
import importlib.util
import inspect
import pathlib
import pydoc
import types

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


GENERATED = [(binding_of(cls), cls) for cls in OPERATORS.values()
             if binding_of(cls) is not None and binding_of(cls).params is not None]


@pytest.mark.parametrize("binding,cls", GENERATED, ids=lambda v: getattr(v, "function", ""))
def test_a_generated_function_is_a_real_function(binding, cls):
    """What ``help``, ``inspect`` and completion in a session read: a plain
    function at import time, under its name in ``opendml`` and
    ``opendml.arrays``, with the binding's parameters, a docstring that
    documents each of them, and its source."""
    fn = getattr(dml, binding.function)
    assert type(fn) is types.FunctionType and fn.__name__ == binding.function
    assert fn is getattr(dml.arrays, binding.function) is front.FUNCTIONS[binding.function]
    assert fn.__module__ == "opendml.arrays.front"
    params = inspect.signature(fn).parameters
    want = ast.parse(f"def f({binding.array}, {binding.params}): pass").body[0].args
    defaults = [inspect.Parameter.empty] * (len(want.args) - len(want.defaults)) + [
        ast.literal_eval(d) for d in want.defaults]
    assert [(p.name, p.default) for p in params.values()] == [(a.arg, d) for a, d in zip(want.args, defaults)]
    doc = inspect.getdoc(fn)
    assert doc.startswith(f"DML_{cls.OPERATOR}") and doc.splitlines()[0] == binding.doc.splitlines()[0]
    section = doc.split("Parameters\n----------\n")[1].split("\n\nReturns")[0]
    documented = {n.strip() for line in section.splitlines() if line and not line.startswith(" ")
                  for n in line.split(" : ")[0].split(",")}
    assert documented == set(params), (documented, set(params))
    for heading in ("Returns", "Raises", "UnsupportedError", "ValidationError", "AllocationError", binding.rules):
        assert heading in doc
    assert f"def {binding.function}(" in inspect.getsource(fn)
    assert f"{binding.function}({binding.array}" in pydoc.render_doc(fn, renderer=pydoc.plaintext)


def test_the_api_reference_finds_the_generated_functions():
    """mkdocs.yml's Griffe extension adds what the package puts in by a loop
    (Griffe reads the sources; the functions are generated at import): each
    operator's name in ``opendml`` and ``opendml.arrays`` resolves to a
    function with its parameters and docstring, or to its description class."""
    griffe = pytest.importorskip("griffe")
    root = pathlib.Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("griffe_registry", root / "docs" / "griffe_registry.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    pkg = griffe.load("opendml", search_paths=[root / "src"], docstring_parser="numpy",
                      extensions=griffe.load_extensions(module.RegisteredOperators()))
    for binding, cls in GENERATED:
        for where in (pkg, pkg["arrays"]):
            fn = where[binding.function]
            assert fn.is_function, binding.function
            assert [p.name for p in fn.parameters] == list(inspect.signature(getattr(dml, binding.function)).parameters)
            assert fn.docstring.value.startswith(f"DML_{cls.OPERATOR}")
    for name in dml.ops.DESCRIPTIONS:
        assert pkg[name].is_class, name
