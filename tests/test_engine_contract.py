"""The operator contract the frameworks read (``output_sizes``, ``linear_part``,
``adjoint``, ``chunking``), declared by every registered operator in its own
module, and the first five's call forms (``output_sizes_of``,
``adjoint_call``, ``batched_args``, ``framework_call``, ``call_args``) that the
PyTorch, JAX and Dask adapters read instead of naming operators."""
import inspect
import json
import pathlib
import re
from importlib import resources

import numpy as np
import pytest

import opendml as dml
from opendml import jsonform
from opendml.arrays.front import ADJOINT_API
from opendml.ops import OPERATORS
from opendml.ops._spec import GATHER, SCATTER, WINDOW_SUMS, WINDOWS

SRC = pathlib.Path(dml.__file__).parent
FIRST_FIVE = ("SLICE", "SLICE1", "UNFOLD", "FOLD", "SLICE_GRAD")


def _examples(name):
    out = []
    for p in resources.files("opendml.examples").iterdir():
        if p.name.endswith(".json"):
            d = json.loads(p.read_text())
            if str(d.get("Operator", "")).upper().removeprefix("DML_OPERATOR_") == name:
                out.append(jsonform.from_json(d))
    assert out, name
    return out


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_every_operator_declares_the_contract(name):
    cls = OPERATORS[name]
    for method in ("linear_part", "adjoint", "chunking"):
        assert callable(getattr(cls, method, None)), (name, method)
    for desc in _examples(name):
        assert desc.output_sizes == tuple(t.sizes for t in desc.outputs)
        kind = desc.chunking()
        assert isinstance(kind, dict) or kind in (GATHER, SCATTER, WINDOWS, WINDOW_SUMS), (name, kind)


def _api_name(name):
    return name.lower()


@pytest.mark.parametrize("name", FIRST_FIVE)
def test_the_first_five_state_their_call_forms(name):
    cls = OPERATORS[name]
    for desc in _examples(name):
        args = desc.call_args()
        inp = desc.inputs[0].sizes
        # the shape rule, once: the description's own sizes, from the array API's arguments
        assert tuple(cls.output_sizes_of(inp, *[a for a in args if a is not None])) == desc.output_sizes[0]
        # call_args reproduce the description through the array API
        x = np.arange(np.prod(inp), dtype=np.float64).reshape(inp)
        got = getattr(dml, _api_name(name))(x, *args)
        assert got.shape == desc.output_sizes[0]


@pytest.mark.parametrize("name", FIRST_FIVE)
def test_declared_adjoints_are_adjoints(name):
    """<A x, y> == <x, A* y>, A* the operator's declared adjoint (other opendml operators)."""
    rng = np.random.default_rng(7)
    for desc in _examples(name):
        args = desc.call_args()
        x = rng.standard_normal(desc.inputs[0].sizes)
        y = rng.standard_normal(desc.output_sizes[0])
        ax = getattr(dml, _api_name(name))(x, *args)
        (aty,) = desc.adjoint(ADJOINT_API, y)
        assert aty.shape == x.shape
        np.testing.assert_allclose(np.vdot(ax, y), np.vdot(x, aty), rtol=1e-12, atol=1e-9)
        assert desc.linear_part() is desc


def test_adjoint_calls_pair_the_operators():
    assert OPERATORS["UNFOLD"].adjoint_call((1, 2, 5, 4), ([2, 2], [1, 1], [1, 1], [0, 0], [0, 0])) == \
        ("fold", ([5, 4], [2, 2], [1, 1], [1, 1], [0, 0], [0, 0]), None)
    # FOLD's input with leading 1s gets them back
    assert OPERATORS["FOLD"].adjoint_call((1, 1, 8, 12), ([5, 4], [2, 2], 1, 1, 0, 0)) == \
        ("unfold", ([2, 2], 1, 1, 0, 0), (1, 1, 8, 12))
    # SLICE is SLICE1 over the window its elements span, whose adjoint is SLICE_GRAD
    assert OPERATORS["SLICE"].adjoint_call((7, 9), ([1, 2], [3, 2], [2, 3])) == \
        ("slice_grad", ([7, 9], [1, 2], [5, 4], [2, 3]), None)
    # a window that reads every element once (axes whole, strides +-1) is its own adjoint
    assert OPERATORS["SLICE1"].adjoint_call((3, 4), ([0, 0], [3, 4], [-1, 1], None)) == \
        ("slice1", ([0, 0], [3, 4], [-1, 1], None), None)
    assert OPERATORS["SLICE_GRAD"].adjoint_call((2, 2), ([5, 5], [0, 1], [3, 4], [2, -3])) == \
        ("slice1", ([0, 1], [3, 4], [2, -3], [2, 2]), None)


def test_framework_forms():
    ints = lambda v, d=0: list(v) if isinstance(v, (list, tuple)) else [v] * max(d, 1)  # noqa: E731
    assert OPERATORS["SLICE"].framework_call((7, 9), ([1, 2], [3, 2], [2, 3]), ints) == \
        ("slice", ([1, 2], [3, 2], [2, 3]), None)
    # a SLICE1 output smaller than the window's reach: the window that reaches exactly it
    assert OPERATORS["SLICE1"].framework_call((9,), ([1], [7], [-2], [2]), ints) == ("slice1", ([5], [3], [-2]), None)
    assert OPERATORS["UNFOLD"].framework_call((1, 2, 5, 4), (3, 1, 1, 1, 1), ints) == \
        ("unfold", ([3, 3], [1, 1], [1, 1], [1, 1], [1, 1]), None)
    assert OPERATORS["FOLD"].framework_call((1, 1, 2, 6), ([2, 3], 2, 1, 1, 0, 0), ints)[2] == (1, 2, 6)
    assert OPERATORS["SLICE1"].batched_args(([1], [3], [2], None), 4) == ([0, 1], [4, 3], [1, 2], None)
    assert OPERATORS["UNFOLD"].batched_args(([3], [1], [1], [0], [0]), 4) is None


def test_shape_rules_take_symbolic_values():
    """output_sizes_of checks nothing and only does arithmetic: a value type
    that is not an int (a tracer's symbolic size) goes through."""
    class Sym(int):
        def __add__(self, o): return Sym(int(self) + int(o))
        __radd__ = __add__

        def __sub__(self, o): return Sym(int(self) - int(o))

        def __mul__(self, o): return Sym(int(self) * int(o))
        __rmul__ = __mul__

        def __floordiv__(self, o): return Sym(int(self) // int(o))

    n, c, h, w = (Sym(v) for v in (2, 3, 8, 6))
    out = OPERATORS["UNFOLD"].output_sizes_of((n, c, h, w), [3, 2], [1, 2], [2, 1], [1, 0], [0, 1])
    assert out == (2, 3 * 6, 5 * 3) and type(out[2]) is Sym


def test_each_shape_formula_is_written_once():
    """UNFOLD's block formula, SLICE1's output size and SLICE's SLICE1 window appear once in Python code
    (docstrings spell them with DirectML's field names)."""
    text = {p: p.read_text() for p in SRC.rglob("*.py")}
    patterns = {
        "block formula": r"\* \([a-z_]+ - 1\) - 1\)\s*//",
        "SLICE1 output size": r"1 \+ \(\w+ - 1\) // (abs\(|\(|-)",
        "SLICE to SLICE1 window": r"\(s - 1\) \* t \+ 1",
    }
    for what, pattern in patterns.items():
        hits = [(p.relative_to(SRC), m.group(0)) for p, t in text.items() for m in re.finditer(pattern, t)]
        assert len(hits) == 1, (what, hits)


def test_adapters_name_no_operator_in_their_routes():
    """The PyTorch, JAX and Dask adapters read the declarations: no ``if name == ...`` branch."""
    for module in ("torch/adapter.py", "jax_adapter.py", "dask_adapter.py"):
        text = (SRC / "arrays" / module).read_text()
        assert not re.search(r"\bname\s*==\s*[\"']", text), module
        assert not re.search(r"call\.name\s*==", text), module


def test_every_adapter_has_one_entry_and_jax_and_dask_one_route():
    """Each framework adapter is entered by one function, ``run(call, arrays)``
    (no ``run_move`` beside it); JAX's and Dask's take every operator one way
    (no branch on the first five's ``Call.args``)."""
    import importlib
    for framework, name in (("jax", "jax_adapter"), ("dask", "dask_adapter"), ("torch", "torch.adapter")):
        pytest.importorskip(framework)
        module = importlib.import_module(f"opendml.arrays.{name}")
        assert list(inspect.signature(module.run).parameters) == ["call", "arrays"], name
        assert not hasattr(module, "run_move"), name
    for module in ("jax_adapter.py", "dask_adapter.py"):
        assert "call.args" not in (SRC / "arrays" / module).read_text(), module
