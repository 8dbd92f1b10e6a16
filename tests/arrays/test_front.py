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

import dataclasses

import opendml as dml
from opendml.arrays import _contract, _dispatch, engine, front, planner
from opendml.model.feature_level import FeatureLevel
from opendml.model.tensor_desc import TensorDesc
from opendml.ops import OPERATORS, ElementWiseIdentityOperatorDesc
from opendml.ops._common import TYPES_4_1, SupportRow
from opendml.ops._move import MoveOperatorDesc
from opendml.ops._spec import Binding, Tensor, binding_of
from opendml.plan import Copy
from opendml.runtime import calls


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
    assert not hasattr(front, "FamilyCall") and not hasattr(engine, "FamilyCall")
    plan = front.Call("slice1", None, key=front.PLAN_KEY, args=([0, 0], [2, 3], [1, 1], None))
    assert plan.key == ("slice1", (0, 0), (2, 3), (1, 1), ("None",))
    assert front.Call("slice1", None, key=front.PLAN_KEY, args=([0, 1.0],)).key is None
    assert front.Call("pad", None).key is None


def test_snapshotted_arguments_come_from_the_signatures():
    assert {name: front._SNAPSHOTS[name] for name in front.FAMILY} == {
        "identity": set(), "cast": set(), "pad": {0, 1}, "join": set(), "split": {1}, "tile": {0},
        "space_to_depth": set(), "depth_to_space": set(), "gather": set(), "gather_elements": set(),
        "gather_nd": set(), "scatter_elements": set(), "scatter_nd": set(), "one_hot": set(),
        "reverse_subsequences": set(), "diagonal_matrix": set()}
    assert front._SEQUENCES == {"join"} and front._MULTI == {"split"}


def test_a_family_call_records_its_arguments_as_snapshotted(monkeypatch):
    """The C call cache's record and the Python cache's key are made from one
    snapshot of the arguments (a list a caller changes afterwards changes
    neither)."""
    seen = []
    real = front._route
    monkeypatch.setattr(front, "_route", lambda fw, call, arrays: seen.append(call) or real(fw, call, arrays))
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
    want = ast.parse(f"def f({binding.array}{'=...' if binding.optional else ''}, {binding.params}): pass").body[0].args
    defaults = [inspect.Parameter.empty] * (len(want.args) - len(want.defaults)) + [
        front._NO_ARRAY if isinstance(d, ast.Constant) and d.value is ... else ast.literal_eval(d) for d in want.defaults]
    kw_defaults = [inspect.Parameter.empty if d is None else ast.literal_eval(d) for d in want.kw_defaults]
    assert [(p.name, p.default) for p in params.values()] == [(a.arg, d) for a, d in zip(want.args, defaults)] + [
        (a.arg, d) for a, d in zip(want.kwonlyargs, kw_defaults)]
    assert [p.name for p in params.values() if p.kind is p.KEYWORD_ONLY] == [a.arg for a in want.kwonlyargs]
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


# -- a new operator's function: its module's binding, nothing else -------------------------------------

@dataclasses.dataclass(frozen=True, repr=False)
class _MirrorOperatorDesc(MoveOperatorDesc):
    """Output[..., i] = Input[..., Sizes[-1] - 1 - i] (a made-up operator: its module)."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc | None

    OPERATOR = "TEST_MIRROR"
    BINDING = Binding("mirror", ((2, 3),), params="times: int = 1", returns="of ``x``'s shape and dtype",
                      rules="``times`` not an int", doc="""DML_TEST_MIRROR: ``x`` reversed along its last axis, ``times`` times.

    Parameters
    ----------
    times : int, optional
        How many times to reverse (default 1).""")
    TYPE_VALUE = 10_001
    SLOTS = (Tensor("InputTensor", "input_tensor", "input"),
             Tensor("OutputTensor", "output_tensor", "output", optional=True))
    FIELDS = ()
    INTRODUCED = FeatureLevel.FL_1_0
    SUPPORT = (SupportRow(FeatureLevel.FL_1_0, range(1, 9), TYPES_4_1),)

    @classmethod
    def arguments(cls, api, x, times):
        if type(times) is not int:
            raise api.field_error("mirror", "Times", "be an int (times)", times)
        return (lambda t: cls(t, None) if times % 2 else ElementWiseIdentityOperatorDesc(t, None)), (times,)

    def __post_init__(self):
        inp = self._check_input()
        if self.output_tensor is None:
            self._set("output_tensor", TensorDesc(inp.data_type, inp.sizes))
        self._check_slot_tensors()

    def _passes(self, layouts):
        (strides, origin), = layouts
        sizes = self.input_tensor.sizes
        start = origin + (sizes[-1] - 1) * strides[-1]
        yield Copy(0, 0, tuple(sizes), start, (*strides[:-1], -strides[-1]), 0, self.output_tensor.element_strides)


def test_a_new_operators_binding_is_its_function(monkeypatch):
    """An operator registered after import gets its array function from
    ``front.bind``: the signature and docstring its binding declares, the
    contract's checks and messages, the C call cache on a repeat."""
    monkeypatch.setitem(OPERATORS, _MirrorOperatorDesc.OPERATOR, _MirrorOperatorDesc)
    _isolate(monkeypatch, "mirror")
    mirror = front.bind(_MirrorOperatorDesc)
    assert str(inspect.signature(mirror)) == "(x: 'Any', times: 'int' = 1) -> 'Any'"
    assert inspect.getdoc(mirror).startswith("DML_TEST_MIRROR") and "``times`` not an int" in mirror.__doc__
    x = np.arange(12, dtype=np.int16).reshape(3, 4)[:, ::2]
    for _ in range(2):
        assert np.array_equal(mirror(x), x[:, ::-1]) and np.array_equal(mirror(x, 2), x)
    if calls.info()["numpy"]:                        # the compiled extension: a repeat is served from C
        hits = calls.info()["hits"]
        assert np.array_equal(mirror(x), x[:, ::-1]) and calls.info()["hits"] == hits + 1
    with pytest.raises(dml.UnsupportedError, match=r"^mirror: x's dtype bool is not supported by TEST_MIRROR"):
        mirror(np.zeros(2, bool))
    with pytest.raises(dml.ValidationError, match=r"^mirror: x must be a NumPy, CuPy, PyTorch, JAX or Dask array"):
        mirror([1, 2])
    with pytest.raises(dml.ValidationError, match=r"^TEST_MIRROR: Times must be an int \(times\); got 1.5$"):
        mirror(x, 1.5)
    assert mirror in _dispatch.WHOLE_IN_GRAPH and engine.ADJOINT_API.mirror is mirror


def _isolate(monkeypatch, name):
    """The front's tables, the graph list and the name ``name`` restored after the test: an operator bound in
    it leaves no trace."""
    for table in ("FUNCTIONS", "_BUILD", "_NAMES", "_SNAPSHOTS", "_SEQUENCES", "_MULTI"):
        monkeypatch.setattr(front, table, type(getattr(front, table))(getattr(front, table)))
    monkeypatch.setattr(_dispatch, "WHOLE_IN_GRAPH", list(_dispatch.WHOLE_IN_GRAPH))
    for where in (front, engine._AdjointApi, _dispatch.front):
        monkeypatch.setattr(where, name, None, raising=False)
    for table in (_contract.OPERATOR_OF, _contract.BINDING):
        monkeypatch.setitem(table, name, None)
        del table[name]


class _FlipOperatorDesc(_MirrorOperatorDesc):
    """The mirror, registered later under a function whose array is named ``data``."""

    OPERATOR = "TEST_FLIP"
    BINDING = dataclasses.replace(_MirrorOperatorDesc.BINDING, function="flip", array="data")
    TYPE_VALUE = 10_002


def test_a_later_operators_messages_name_its_array(monkeypatch):
    """A function bound after import names its own array argument where it is given no array (it read a
    table of the array names loaded at import, and said ``x``)."""
    monkeypatch.setitem(OPERATORS, _FlipOperatorDesc.OPERATOR, _FlipOperatorDesc)
    _isolate(monkeypatch, "flip")
    flip = front.bind(_FlipOperatorDesc)
    with pytest.raises(dml.ValidationError, match=r"^flip: data must be a NumPy, CuPy, PyTorch, JAX or Dask array"):
        flip([1, 2])
    with pytest.raises(dml.UnsupportedError, match=r"^flip: data's dtype bool is not supported by TEST_FLIP"):
        flip(np.zeros(2, bool))


def test_the_index_functions_are_generated_on_their_route():
    """The index functions come from their bindings (route ``"index"``): the
    arrays offered as one tuple, the keyword-only ``check_indices`` first
    among the other arguments (the order the C call cache and the C
    new-shape route read); keyword-only parameters are refused elsewhere."""
    from opendml.arrays import index_ops
    index = [b.function for b, _ in GENERATED if b.route == "index"]
    assert index == ["gather", "gather_elements", "gather_nd", "scatter_elements", "scatter_nd", "one_hot",
                     "reverse_subsequences", "diagonal_matrix"]
    src = inspect.getsource(dml.gather)
    assert "_index.offer(" in src and "(x, indices,), (check_indices, axis, index_dimensions,)" in src
    assert "(indices, values,), (depth, axis,)" in inspect.getsource(dml.one_hot)
    assert index_ops._CHECKED == {"gather", "gather_elements", "gather_nd", "scatter_elements", "scatter_nd"}
    # each class's C_INDEX: its number in runtime/native/newshape_index.c
    assert {front._NAMES[op]: which for op, (which, _) in index_ops._C_INDEX.items()} == {
        "gather": 0, "gather_elements": 1, "one_hot": 2, "reverse_subsequences": 3, "gather_nd": 4,
        "scatter_elements": 5, "scatter_nd": 6}
    cls = OPERATORS["GATHER_ELEMENTS"]
    moved = dataclasses.replace(cls.BINDING, route="move")
    with pytest.raises(TypeError, match="keyword-only ones on the index route"):
        front._generate(moved, cls)
    x = np.arange(12.0).reshape(3, 4)
    with pytest.raises(dml.ValidationError, match=r"gather_elements: indices\[0, 1\] = 9 is out of range"):
        dml.gather_elements(x, np.array([[0, 9], [1, 1], [2, 0]]), 1)
    assert dml.gather_elements(x, np.array([[0, 9], [1, 1], [2, 0]]), 1, check_indices=False).tolist() == [
        [0.0, 3.0], [5.0, 5.0], [10.0, 8.0]]


# -- the C new-shape route's settings, read once a generation ------------------------------------------------------

def _fresh_shapes(n, seed):
    """n (1, C, H, W) shapes no test of this process gives (their H and W are 41 and more)."""
    rng = np.random.default_rng(seed)
    return [(1, int(rng.integers(1, 5)), 41 + i, int(rng.integers(41, 90))) for i in range(n)]


def test_new_shapes_read_the_settings_once_a_generation(monkeypatch):
    """A never-seen shape's C route reads the CPU backend and its settings at the first new shape of a
    generation and reuses them until a ``configure()`` changes the generation, which reads them again."""
    looked = []
    real = engine.get_backend
    for module in (engine, front._index):                 # (index_ops reads the backend on its Python route)
        monkeypatch.setattr(module, "get_backend", lambda kind: looked.append(kind) or real(kind))
    calls.clear()
    shapes = _fresh_shapes(6, 1)
    for s in shapes[:3]:
        x = np.arange(np.prod(s), dtype=np.float32).reshape(s)
        assert dml.identity(x).tobytes() == x.tobytes()
        idx = np.array([0, s[1] - 1], np.int64)            # an index function's new shape: the same settings
        assert dml.gather(x, idx, 1).tobytes() == np.take(x, idx, 1).tobytes()
    assert looked == ["cpu"]
    with dml.configure(threads=1):
        for s in shapes[3:5]:
            x = np.arange(np.prod(s), dtype=np.float32).reshape(s)
            assert dml.identity(x).tobytes() == x.tobytes()
        assert looked == ["cpu", "cpu"]
        assert engine.NEW_SETTINGS[1] is real("cpu") and engine.NEW_SETTINGS[2][0] == 1


def test_new_shapes_follow_a_switch_to_the_numpy_kernels(monkeypatch):
    """After ``configure(cpu_kernels="numpy")`` a never-seen NumPy shape takes the Python route (NumPy's
    kernels), not the C route with the settings read before the switch (C is offered no CPU settings and
    declines it; CUDA inputs alone keep the C route); the bytes are the same."""
    s = _fresh_shapes(2, 2)
    x = np.random.default_rng(0).standard_normal(s[0], dtype=np.float32)
    dml.identity(x)                                    # the C route's settings read in this generation
    offered = []
    real = front._move_new

    def spy(*a):
        out = real(*a)
        offered.append((a[5], out))
        return out
    monkeypatch.setattr(front, "_move_new", spy)
    with dml.configure(cpu_kernels="numpy"):
        y = np.random.default_rng(1).standard_normal(s[1], dtype=np.float32)[:, :, ::-1]
        assert dml.identity(y, 2.0, 1.0).tobytes() == (y * np.float32(2) + np.float32(1)).tobytes()
    # the C route is offered the call with no CPU settings (None: the NumPy kernels) and declines a NumPy array
    assert offered and all(conf is None and out is None for conf, out in offered)


IDENTITY_CASES = [((1, 3, 41, 57), np.float32, lambda x: x, (None, None)),
                  ((1, 2, 43, 45), np.float32, lambda x: x[:, :, ::-2, 1:], (None, None)),
                  ((1, 4, 42, 44), np.float16, lambda x: x[..., ::-1], (0.5, None)),
                  ((2, 3, 41, 5), np.float32, lambda x: x.transpose(0, 2, 1, 3), (None, -3.25)),
                  ((1, 1, 47, 61), np.int32, lambda x: x[:, :, 1:], (None, None))]


@pytest.mark.parametrize("shape,dtype,view,args", IDENTITY_CASES)
def test_a_never_seen_identity_is_the_python_routes_bytes(monkeypatch, shape, dtype, view, args):
    """The C new-shape route and the Python route give the same bytes, shape and dtype for a shape neither
    saw (and the C route, not the Python one, served it)."""
    rng = np.random.default_rng(3)
    base = (rng.standard_normal(shape) * 50).astype(dtype)
    calls.clear()
    ran = []
    real = front._move_call
    monkeypatch.setattr(front, "_move_call", lambda *a: ran.append(a) or real(*a))
    got = dml.identity(view(base), *args)
    assert ran == []                                   # served by the C route
    calls.clear()
    monkeypatch.setattr(front, "_move_new", lambda *a: None)
    want = dml.identity(view(base), *args)
    assert len(ran) == 1                               # the Python route
    assert (got.shape, got.dtype, got.tobytes()) == (want.shape, want.dtype, want.tobytes())
    assert got.flags.c_contiguous


BAD_IDENTITY = [(lambda: [[1.0, 2.0]], ()), (lambda: np.zeros((1, 2, 41, 41), bool), ()),
                (lambda: np.zeros((1, 2, 41, 43), np.float32), ("2",)),
                (lambda: np.zeros((1, 2, 41, 44), np.int32), (2.0, None)),
                (lambda: np.zeros((1, 2, 41, 45), np.float32), (1e39, None)),
                (lambda: np.zeros((1, 2, 41, 46), np.float32), (None, None, 1))]


@pytest.mark.parametrize("make,args", BAD_IDENTITY)
def test_a_never_seen_identity_raises_the_python_routes_errors(monkeypatch, make, args):
    """Bad input to a never-seen shape raises the same class and message with the C route on as off."""
    def error():
        calls.clear()
        with pytest.raises(Exception) as info:
            dml.identity(make(), *args)
        return type(info.value), str(info.value)

    on = error()
    monkeypatch.setattr(front, "_move_new", lambda *a: None)
    assert on == error()
    assert issubclass(on[0], (dml.ValidationError, dml.UnsupportedError, TypeError))


class _OnDevice:
    """Stands in for a CUDA array: ``device.id`` is where it lies."""

    device = types.SimpleNamespace(id=3)


_OUT = object()


@pytest.mark.parametrize("answers,want", [(["k1", "k2", _OUT], _OUT), (["k1", None], None), ([_OUT], _OUT),
                                          (["k"] * 16 + [_OUT], None)])
def test_a_new_shape_on_cuda_compiles_each_kernel_c_names_then_calls_again(monkeypatch, answers, want):
    """Where C names a kernel not yet compiled, ``_new`` compiles it on the array's device and makes the call
    again, 16 calls at most; the answer after that (an output, or None) is the route's."""
    from opendml.runtime.cuda import launch
    given, compiled = list(answers), []
    seen = []
    monkeypatch.setattr(front, "_move_new", lambda *a: seen.append(a) or given.pop(0))
    monkeypatch.setattr(launch, "add_new_kernel", lambda device, name: compiled.append((device, name)))
    x = _OnDevice()
    assert front._new(calls.OPS["identity"], [x], (None, None)) is want
    assert len(seen) == min(len(answers), 16)
    assert compiled == [(3, name) for name in answers[:len(seen)] if type(name) is str][:15]
    assert all(a[2] == [x] and a[3] == (None, None) and a[4] == engine.NEW_SETTINGS[0] for a in seen)


def test_a_prepare_spy_on_the_cpu_backend_sees_every_never_seen_shape(monkeypatch):
    """A ``prepare`` set on the CPU backend (a spy) sends never-seen shapes to the Python route, which calls it,
    even where the C route's settings were read before it was set; the bytes are the C route's."""
    from opendml.runtime import get_backend
    shapes = _fresh_shapes(4, 4)
    x = np.random.default_rng(5).standard_normal(shapes[0], dtype=np.float32)
    dml.identity(x)                                    # the C route's settings read in this generation
    backend = get_backend("cpu")
    prepared = []
    real = backend.prepare
    # (set and deleted by hand: monkeypatch would restore the bound method into the instance's dict, where it
    # reads as a spy to every later test)
    backend.prepare = lambda *a, **k: prepared.append(a) or real(*a, **k)
    try:
        y = np.random.default_rng(6).standard_normal(shapes[1], dtype=np.float32)
        assert dml.identity(y).tobytes() == y.tobytes()
        assert len(prepared) == 1
        idx = np.array([s - 1 for s in (shapes[2][1],)], np.int64)
        z = np.random.default_rng(7).standard_normal(shapes[2], dtype=np.float32)
        assert dml.gather(z, idx, 1).tobytes() == np.take(z, idx, 1).tobytes()
        assert len(prepared) == 2
    finally:
        del backend.prepare


NESTED_INDEX_CALLS = [
    "dml.gather(n.float(), torch.tensor([0, 1]), 0)", "dml.gather(np.ones((2, 3), np.float32), n, 0)",
    "dml.one_hot(n, 3, torch.tensor([0., 1.]))", "dml.one_hot(torch.tensor([0, 1]), 3, n.float())",
    "dml.scatter_elements(torch.ones(2, 3, 3), n, torch.ones(2, 3, 3), 0)",
]


@pytest.mark.parametrize("call", NESTED_INDEX_CALLS)
def test_a_nested_tensor_in_the_first_pytorch_index_call_is_refused_by_name(call):
    # the PyTorch adapter (and its check of unreadable tensors) loaded after the contract's checks: a nested
    # tensor in the process's first PyTorch call reached the sizes' readers (PyTorch's RuntimeError
    # "NestedTensorImpl doesn't support sizes")
    pytest.importorskip("torch")
    import subprocess
    import sys
    code = ("import numpy as np, torch, opendml as dml\n"
            "n = torch.nested.nested_tensor([torch.ones(2, 3), torch.ones(3, 3)]).long()\n"
            f"try:\n    {call}\nexcept dml.UnsupportedError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "nested PyTorch tensors are not supported" in r.stdout, (r.stdout, r.stderr[-2000:])
