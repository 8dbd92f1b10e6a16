"""The data-movement family under torch.compile(fullgraph=True) and other
tracers, through the one custom operator ``opendml::move(Tensor[] inputs,
str desc) -> Tensor[]`` (``opendml.arrays.torch.library``)."""
from __future__ import annotations

import enum
import json
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import opendml as dml  # noqa: E402
from tests.conftest import unpack_dual_batches  # noqa: E402
from opendml.arrays.torch import adapter  # noqa: E402,F401 - registers the family with torch.compile
from opendml.arrays.torch.library import to_text  # noqa: E402
from opendml.jsonform import JsonFormError  # noqa: E402
from opendml.model.errors import DmlError, UnsupportedError, ValidationError  # noqa: E402

move = torch.ops.opendml.move.default


def _ns():
    """The namespace traced calls take now: opendml_cpp once the C++ node library is loaded, else opendml."""
    from opendml.arrays.torch import adapter as torch_adapter
    return "opendml" if torch_adapter.operators() is torch_adapter._CUSTOM else torch_adapter.CPP_NAMESPACE


def _x(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


# name -> (function of the inputs, inputs); every family operator of the array API, every pad mode and order.
CASES = {
    "identity": (lambda x: dml.identity(x), [_x(2, 3, 4)]),
    "identity_scale_bias": (lambda x: dml.identity(x, 2.5, -1.0), [_x(2, 3, 4)]),
    "cast_f32_f64": (lambda x: dml.cast(x, np.float64), [_x(3, 5)]),
    "cast_f64_f32": (lambda x: dml.cast(x, "FLOAT32"), [_x(3, 5, dtype=torch.float64)]),
    "pad_constant": (lambda x: dml.pad(x, [0, 1, 2], [1, 0, 3], "constant", 0.5), [_x(2, 3, 4)]),
    "pad_edge": (lambda x: dml.pad(x, 1, 2, "edge"), [_x(2, 3, 4)]),
    "pad_reflect": (lambda x: dml.pad(x, [0, 2, 1], [1, 2, 3], "reflect"), [_x(2, 4, 5)]),
    "pad_symmetric": (lambda x: dml.pad(x, 2, 3, "symmetric"), [_x(2, 3, 4)]),
    "pad_wrap": (lambda x: dml.pad(x, [1, 5, 0], [0, 2, 7], "wrap"), [_x(2, 3, 4)]),
    "join": (lambda a, b, c: dml.join([a, b, c], 1), [_x(2, 1, 3), _x(2, 4, 3, seed=1), _x(2, 2, 3, seed=2)]),
    "split": (lambda x: dml.split(x, -1, [1, 3, 2]), [_x(2, 3, 6)]),
    "tile": (lambda x: dml.tile(x, [2, 1, 3]), [_x(2, 3, 4)]),
    "space_to_depth_dcr": (lambda x: dml.space_to_depth(x, 2, "DCR"), [_x(2, 3, 4, 6)]),
    "space_to_depth_crd": (lambda x: dml.space_to_depth(x, 2, "CRD"), [_x(2, 3, 4, 6)]),
    "depth_to_space_dcr": (lambda x: dml.depth_to_space(x, 2, "DCR"), [_x(2, 8, 3, 2)]),
    "depth_to_space_crd": (lambda x: dml.depth_to_space(x, 2, "CRD"), [_x(2, 8, 3, 2)]),
}


def _outputs(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _loss_fn(fn):
    """A scalar of every output (weighted by position, so each output and
    element has its own gradient) and the outputs themselves."""
    def f(*xs):
        outs = _outputs(fn(*xs))
        loss = sum((o.to(torch.float64) * torch.arange(o.numel(), dtype=torch.float64, device=o.device).reshape(o.shape).cos()).sum()
                   for o in outs)
        return loss, outs
    return f


def _values_and_grads(f, xs):
    xs = [x.detach().clone().requires_grad_(True) for x in xs]
    loss, outs = f(*xs)
    grads = torch.autograd.grad(loss, xs)
    return [o.detach() for o in outs], grads


def _compare(fn, xs, backend):
    torch._dynamo.reset()
    f = _loss_fn(fn)
    want_outs, want_grads = _values_and_grads(f, xs)
    got_outs, got_grads = _values_and_grads(torch.compile(f, backend=backend, fullgraph=True), xs)
    assert len(got_outs) == len(want_outs)
    for g, w in zip(got_outs, want_outs):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert torch.equal(g, w)           # the same move program: the same bytes
    for g, w in zip(got_grads, want_grads):
        torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_fullgraph_values_and_gradients_match_eager(name, backend):
    fn, xs = CASES[name]
    _compare(fn, xs, backend)


@pytest.mark.parametrize("name", ["pad_reflect", "split", "join", "space_to_depth_crd", "cast_f32_f64"])
def test_inductor_values_and_gradients_match_eager(name):
    fn, xs = CASES[name]
    _compare(fn, xs, "inductor")


def test_the_compiled_graphs_hold_the_custom_operator():
    from torch._dynamo.testing import AotEagerAndRecordGraphs
    torch._dynamo.reset()
    backend = AotEagerAndRecordGraphs()

    def f(v):
        a, b = dml.split(dml.pad(v, 1, 2, "constant", 0.5), 1, [2, 4])
        return dml.tile(a, [1, 2, 1, 1]) * b
    x = _x(2, 3, 4, 4).requires_grad_(True)
    y = torch.compile(f, backend=backend, fullgraph=True)(x)
    y.sum().backward()
    fw, bw = backend.fw_graphs[0].code, backend.bw_graphs[0].code
    assert fw.count(f"torch.ops.{_ns()}.move.default") == 3
    assert '"Operator":"PADDING1"' in fw and '"Operator":"SPLIT"' in fw and '"Operator":"TILE"' in fw
    # backward: the declared adjoints (split -> join, constant pad -> slice1, tile -> a sum)
    assert '"Operator":"JOIN"' in bw and f"torch.ops.{_ns()}.slice1.default" in bw
    x2 = x.detach().clone().requires_grad_(True)
    f(x2).sum().backward()
    assert torch.equal(y, f(x2)) and torch.allclose(x.grad, x2.grad)


def test_integer_and_non_differentiable_casts_compile():
    torch._dynamo.reset()
    x = torch.arange(24, dtype=torch.int16).reshape(2, 3, 4)

    def f(v):
        return dml.pad(dml.tile(v, 2), 1, 1, "wrap"), dml.cast(v, np.float32)
    got, want = torch.compile(f, backend="aot_eager", fullgraph=True)(x), f(x)
    assert all(torch.equal(g, w) for g, w in zip(got, want))
    xf = _x(3, 4).requires_grad_(True)
    y = torch.compile(lambda v: dml.cast(v, np.int32), backend="aot_eager", fullgraph=True)(xf)
    assert y.dtype == torch.int32 and not y.requires_grad
    assert torch.equal(y, dml.cast(xf.detach(), np.int32))


def test_one_hot_of_values_that_require_grad_compiles_as_eagerly():
    """one_hot is not differentiated: eagerly its output requires no grad; compiled with AOTAutograd its
    fixed-size call traced the adjoint, which raised UnsupportedError ('not differentiable')."""
    torch._dynamo.reset()
    indices, values = torch.tensor([0, 7, 2]), torch.tensor([0.0, 1.0], requires_grad=True)
    want = dml.one_hot(indices, 3, values)
    got = torch.compile(lambda i, v: dml.one_hot(i, 3, v), backend="aot_eager", fullgraph=True)(indices, values)
    assert torch.equal(got, want) and not got.requires_grad and not want.requires_grad


def test_second_order_gradients_trace():
    """The backward is the array API again, so a gradient of a gradient
    traces (make_fx; AOTAutograd itself refuses double backward)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(v):
        a, b = dml.split(dml.identity(v * v, 2.0, 1.0), 1, [1, 3])
        y = dml.pad(dml.depth_to_space(dml.join([b, a], 1), 2, "CRD"), [0, 1, 2, 0], [1, 0, 1, 2], "reflect")
        (g,) = torch.autograd.grad((y * y).sum(), v, create_graph=True)
        (h,) = torch.autograd.grad((g * g).sum(), v)
        return g, h
    x = _x(2, 4, 3, 2).requires_grad_(True)
    want = f(x)
    gm = make_fx(f)(x)
    # forward: identity, split, join, depth_to_space, pad (5); first backward: the adjoints of the four that
    # are not the pad (space_to_depth, split, join, identity; the reflect pad's is slices); second backward
    # (through (g * g), which holds y): those four again, and the adjoints of the first backward's four
    assert gm.code.count(f"{_ns()}.move.default") == 5 + 4 + 4 + 4
    assert gm.code.count('"Operator":"SPACE_TO_DEPTH1"') == 2 and f"{_ns()}.slice_grad.default" in gm.code
    got = gm(x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_make_fx_traces_the_custom_operator():
    from torch.fx.experimental.proxy_tensor import make_fx
    x = _x(2, 8, 3, 2)
    gm = make_fx(lambda v: dml.depth_to_space(dml.identity(v, 2.0, 1.0), 2, "CRD"))(x)
    assert gm.code.count(f"{_ns()}.move.default") == 2
    assert torch.equal(gm(x), dml.depth_to_space(dml.identity(x, 2.0, 1.0), 2, "CRD"))


def test_fake_tensors_give_the_description_sizes():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = torch.empty(2, 3, 4, 6)
        parts = dml.split(dml.space_to_depth(x, 2), 1, [4, 8])
        y = dml.cast(dml.join(parts, 1), np.float16)
    assert [tuple(p.shape) for p in parts] == [(2, 4, 2, 3), (2, 8, 2, 3)]
    assert tuple(y.shape) == (2, 12, 2, 3) and y.dtype == torch.float16


def test_symbolic_sizes_are_specialised():
    torch._dynamo.reset()
    f = torch.compile(lambda v: dml.pad(v, 1, 2, "edge") + 1, backend="aot_eager", dynamic=True, fullgraph=True)
    for shape in [(2, 3), (4, 5), (2, 3)]:
        x = _x(*shape)
        assert torch.equal(f(x), dml.pad(x, 1, 2, "edge") + 1)


def _counting_backend(counted):
    from torch._dynamo.backends.registry import lookup_backend
    aot = lookup_backend("aot_eager")

    def backend(gm, example_inputs):
        counted.append(gm)
        return aot(gm, example_inputs)
    return backend


def _grown(xs, n):
    """``xs`` with axis 0 of every input n long (every case's axis 0 is free)."""
    return [_x(n, *x.shape[1:], dtype=x.dtype, seed=i) for i, x in enumerate(xs)]


#: One case per operator, every pad mode the traced route treats alike (the cases' values are the other tests').
DYNAMIC_CASES = ["identity_scale_bias", "cast_f32_f64", "pad_constant", "pad_reflect", "join", "split", "tile",
                 "space_to_depth_crd", "depth_to_space_dcr"]


@pytest.mark.parametrize("name", DYNAMIC_CASES)
def test_dynamic_shapes_keep_one_graph(name):
    """Under dynamic shapes a family call enters the graph as ``opendml::family``, sizes symbolic: one graph
    for three batch sizes, each giving eager's values and gradients."""
    fn, xs = CASES[name]
    torch._dynamo.reset()
    counted = []
    f = _loss_fn(fn)
    compiled = torch.compile(f, backend=_counting_backend(counted), fullgraph=True, dynamic=True)
    for n in (9, 11, 13):              # (no other size of a case: PyTorch gives equal sizes one symbol)
        given = _grown(xs, n)
        want_outs, want_grads = _values_and_grads(f, given)
        got_outs, got_grads = _values_and_grads(compiled, given)
        for a, b in zip(got_outs + list(got_grads), want_outs + list(want_grads)):
            assert a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b), name
    assert len(counted) == 1, name


@pytest.mark.cuda
@pytest.mark.parametrize("name", ["pad_reflect", "join", "split", "tile", "cast_f32_f64", "space_to_depth_crd"])
def test_dynamic_shapes_keep_one_graph_on_cuda_with_inductor(name):
    if not torch.cuda.is_available():
        pytest.skip("CUDA is not available here")
    fn, xs = CASES[name]
    torch._dynamo.reset()
    f = _loss_fn(fn)
    compiled = torch.compile(f, fullgraph=True, dynamic=True)
    for n in (9, 11, 13):
        given = [x.cuda() for x in _grown(xs, n)]
        want_outs, want_grads = _values_and_grads(f, given)
        got_outs, got_grads = _values_and_grads(compiled, given)
        for a, b in zip(got_outs, want_outs):
            assert a.shape == b.shape and torch.equal(a, b), name
        for a, b in zip(got_grads, want_grads):
            torch.testing.assert_close(a, b)


def test_graphs_per_shape_as_the_guide_says():
    """The guide's "Dynamic shapes": a window operator, a family function and an index function keep sizes
    symbolic (one graph for three shapes), with a NumPy int argument too (Dynamo passes it on as a 0-d tensor,
    read as its int)."""
    counted = []
    idx = torch.tensor([0, 1])
    fns = {"slice1": lambda v: dml.slice1(v, [0, 0], [2, 2], [1, -1]) + 1, "pad": lambda v: dml.pad(v, 1, 2) + 1,
           "gather": lambda v: dml.gather(v, idx, 0) + 1,
           "gather_numpy_axis": lambda v: dml.gather(v, idx, np.int64(0)) + 1,
           "pad_numpy_int": lambda v: dml.pad(v, np.int64(1), 2) + 1}
    graphs = {}
    for name, fn in fns.items():
        torch._dynamo.reset()
        counted.clear()
        f = torch.compile(fn, backend=_counting_backend(counted), dynamic=True, fullgraph=True)
        for shape in [(3, 4), (5, 6), (7, 8)]:
            x = _x(*shape)
            assert torch.equal(f(x), fn(x))
        graphs[name] = len(counted)
    assert graphs == {"slice1": 1, "pad": 1, "gather": 1, "gather_numpy_axis": 1, "pad_numpy_int": 1}


def test_a_shape_the_traced_one_passed_but_this_one_does_not_raises_the_functions_error():
    torch._dynamo.reset()
    f = torch.compile(lambda v: dml.space_to_depth(v, 2) * 2, backend="aot_eager", dynamic=True, fullgraph=True)
    for h in (4, 6):
        x = _x(2, 3, h, 4)
        assert torch.equal(f(x), dml.space_to_depth(x, 2) * 2)
    x = _x(2, 3, 5, 4)
    with pytest.raises(ValidationError) as eager:
        dml.space_to_depth(x, 2)
    with pytest.raises(ValidationError) as compiled:
        f(x)
    assert str(compiled.value) == str(eager.value)


def test_symbolic_scalar_arguments_are_read_as_their_values():
    """The compiled function's own int and float arguments, which ``dynamic=True`` passes on as ``SymInt`` and
    ``SymFloat`` (``make_fx``'s symbolic tracing too): the family functions read their values (a guard), so
    the call has a text form with plain numbers and keeps its sizes symbolic (no new graph for new shapes);
    another value compiles again. Before, the functions refused them (``Scale must be a number; got zf0``)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def fn(v, n, s):
        return dml.pad(dml.identity(v, s), n, n) * 2
    gm = make_fx(lambda v, n, s: dml.pad(dml.identity(v, s), n, n), tracing_mode="symbolic")(_x(3, 4), 2, 1.5)
    calls = [n.args[1] for n in gm.graph.nodes if n.target is torch.ops.opendml.family.default]
    assert calls == ['["identity",[1.5,null],false,false]', '["pad",[2,2,"constant",0],false,false]']
    torch._dynamo.reset()
    counted = []
    f = torch.compile(fn, backend=_counting_backend(counted), dynamic=True, fullgraph=True)
    for n, s in ((2, 1.5), (3, -0.5)):
        for shape in [(3, 4), (5, 6), (7, 8)]:
            x = _x(*shape)
            assert torch.equal(f(x, n, s), fn(x, n, s))
            if shape == (3, 4):
                graphs = len(counted)
        assert len(counted) == graphs, "a new shape compiled a new graph"
    assert graphs > 1, "another value took the graph traced for the first"


@pytest.mark.parametrize("fn", [lambda v, b: dml.pad(v, b, 1), lambda v, b: dml.pad(v, 1, 1, "constant", b),
                                lambda v, b: dml.identity(v, b), lambda v, b: dml.tile(v, [b, 1]),
                                lambda v, b: dml.join([v, v], b),
                                lambda v, b: dml.pad(v, v.shape[0] > 2, 1)],
                         ids=["pad-padding", "pad-value", "identity-scale", "tile-repeats", "join-axis",
                              "pad-SymBool"])
def test_a_bool_argument_is_refused_compiled_as_eagerly(fn):
    """A bool where eager refuses one, as the compiled function's argument under ``dynamic=True`` (or a
    ``SymBool``, a comparison of symbolic sizes, read as its value): eager's error."""
    x = _x(3, 4)
    with pytest.raises(ValidationError) as eager:
        fn(x, True)
    torch._dynamo.reset()
    with pytest.raises(Exception) as compiled:
        torch.compile(fn, backend="aot_eager", dynamic=True, fullgraph=True)(x, True)
    assert str(eager.value) in str(compiled.value)


def test_an_argument_without_a_text_form_takes_the_move_operator():
    """Traced with symbolic sizes (``make_fx``, which passes arguments as given), a call whose arguments all have
    a text form enters as ``opendml::family``; one with a NumPy scalar as ``opendml::move``, sizes fixed."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from opendml.arrays.torch import dynamic
    x = _x(3, 4)
    def padded(value):
        return lambda v: dml.pad(v, 1, 1, "constant", value) * 2
    for value, op, y in ((0.5, "opendml.family", _x(5, 6)), (np.float64(0.5), ".move.default", x)):
        gm = make_fx(padded(value), tracing_mode="symbolic")(x)
        targets = " ".join(str(n.target) for n in gm.graph.nodes)
        assert op in targets, targets
        assert torch.equal(gm(y), padded(value)(y))
    assert dynamic._encode([1, (2, 3.5), None, "a", torch.float16, np.float32]) == [
        1, {"tuple": [2, 3.5]}, None, "a", {"torch": "float16"}, {"numpy": "float32"}]


FAMILY = torch.ops.opendml.family.default


@pytest.mark.parametrize("text,inputs,match", [
    ("not json", 1, "JSON text"),
    ('["pad", [1, 1], false]', 1, "JSON text"),
    ('[1, [], false, false]', 1, r"\[name, \[arguments\], seq, linear\]"),
    ('["slice1", [[0], [1], [1]], false, false]', 1, "not a data-movement family function"),
    ('["no_such", [], false, false]', 1, "not a data-movement family function"),
    ('["pad", [1, 1], false, false]', 2, "takes one input tensor; got 2"),
    ('["join", [0], true, false]', 0, "takes one or more input tensors; got 0"),
    ('["cast", [{"torch": "Tensor"}], false, false]', 1, "none of the text forms"),
    ('["cast", [{"numpy": "no-such-dtype"}], false, false]', 1, "none of the text forms"),
    ('["tile", [{"tuple": [2, 0]}], false, false]', 1, "Repeats"),
    ('["gather", [true, 0, null], false, false]', 1, r"gather takes 2 array\(s\) and 3 other argument\(s\); got 1 and 3"),
    ('["gather", [true, 0], false, false]', 2, r"gather takes 2 array\(s\) and 3 other argument\(s\); got 2 and 2"),
])
def test_the_family_operators_text_is_checked(text, inputs, match):
    with pytest.raises(ValidationError, match=match):
        FAMILY([_x(2, 3)] * inputs, text)


def test_the_family_operators_pass_opcheck_and_gradgradcheck():
    from opendml.arrays.torch import dynamic
    x = _x(2, 3, 4)
    tile = '["tile", [[1, 2, 1]], false, false]'
    for text in ('["pad", [[0, 1, 2], [1, 0, 1], "reflect", 0.0], false, false]', tile,
                 '["identity", [2.0, 1.0], false, false]', '["join", [1], true, false]'):
        torch.library.opcheck(FAMILY, ([x, x] if "join" in text else [x], text))
    torch.library.opcheck(torch.ops.opendml.family_adjoint.default, ([_x(2, 6, 4)], [x], tile))
    x64 = _x(2, 3, 4, dtype=torch.float64).requires_grad_()
    for text in ('["pad", [[0, 1, 2], [1, 0, 1], "reflect", 0.0], false, false]',
                 '["pad", [1, 2, "constant", 1.5], false, false]', '["identity", [2.0, 1.0], false, false]'):
        torch.autograd.gradgradcheck(lambda t, text=text: FAMILY([t], text)[0], (x64,))
    assert dynamic.text_of(type("C", (), {"ccall": ("cast", (dml.DataType.FLOAT64,), False)})()) is None
    # an index function's: its arrays, the index tensor kept for the adjoint
    i = torch.tensor([[0, 1, -1, 1, 0]])
    gather = '["gather", [true, 0, null], false, false]'
    torch.library.opcheck(FAMILY, ([x, i], gather))
    torch.library.opcheck(torch.ops.opendml.family_adjoint.default, ([_x(1, 5, 3, 4)], [x, i], gather))
    torch.autograd.gradgradcheck(lambda t: FAMILY([t, i], gather)[0], (x64,))


def test_the_raw_operators_take_the_func_transforms():
    """``torch.func.grad``, ``jacrev``, ``jacfwd``, ``hessian`` and ``vmap`` of ``grad`` on ``opendml::family``
    (one input, a list of two, an index function's kept index tensor), ``opendml::family_adjoint`` and
    ``opendml::move``, as on ``torch.autograd`` (``check_func_transforms``)."""
    from opendml.arrays.torch.library import description
    from .test_torch import check_func_transforms
    x, i = _x(2, 3, 4, dtype=torch.float64), torch.tensor([[0, 1, -1, 1, 0]])
    pad = '["pad", [[0, 1, 2], [1, 0, 1], "reflect", 0.0], false, false]'
    (text,) = _desc_text(lambda v: dml.pad(v, [0, 1, 2], [1, 0, 1], "reflect"), [x])
    assert description(text).OPERATOR == "PADDING1"
    for fn, v in ((lambda t: FAMILY([t], pad)[0], x),
                  (lambda t: FAMILY([t, 2 * t], '["join", [1], true, false]')[0], x),
                  (lambda t: FAMILY([t, i], '["gather", [true, 0, null], false, false]')[0], x),
                  (lambda g: ADJOINT([g], [x], pad)[0], _x(3, 4, 7, dtype=torch.float64)),
                  (lambda t: move([t], text)[0], x)):
        check_func_transforms(fn, v)



@pytest.mark.skipif(not unpack_dual_batches(), reason="this PyTorch has no batching rule for "
                    "aten::_unpack_dual, which a compiled jacfwd reaches")
def test_the_raw_operators_take_compiled_forward_mode_transforms():
    """``torch.compile`` around ``torch.func.jacfwd`` and ``hessian`` of ``opendml::family`` (an index function's
    kept index tensor too), ``opendml::family_adjoint`` and ``opendml::move``: eager's values. The compiled graph
    enters its dual level through ``torch._C``, leaving ``forward_ad._current_level`` at -1: the autograd kernel
    took that for no dual level and dropped the tangents (functorch's ``_unwrap_for_grad()`` invoked with None)."""
    from opendml.arrays.torch.library import description
    x, i = _x(2, 3, 4, dtype=torch.float64), torch.tensor([[0, 1, -1, 1, 0]])
    pad = '["pad", [[0, 1, 2], [1, 0, 1], "reflect", 0.0], false, false]'
    (text,) = _desc_text(lambda v: dml.pad(v, [0, 1, 2], [1, 0, 1], "reflect"), [x])
    assert description(text).OPERATOR == "PADDING1"
    for fn, v in ((lambda t: FAMILY([t], pad)[0], x),
                  (lambda t: FAMILY([t, i], '["gather", [true, 0, null], false, false]')[0], x),
                  (lambda g: ADJOINT([g], [x], pad)[0], _x(3, 4, 7, dtype=torch.float64)),
                  (lambda t: move([t], text)[0], x)):
        for transform in (torch.func.jacfwd(fn), torch.func.hessian(lambda t: fn(t).square().sum())):
            torch._dynamo.reset()
            torch.testing.assert_close(torch.compile(transform, backend="aot_eager")(v), transform(v), rtol=0, atol=0)


def test_the_eager_path_is_unchanged():
    x = _x(2, 3, 4).requires_grad_(True)
    y = dml.pad(x, 1, 1, "reflect")
    assert type(y.grad_fn).__name__ == "opendml_padding1Backward"
    assert dml.pad(x.detach(), 1, 1, "reflect").grad_fn is None


# -- the custom operator itself -----------------------------------------------------------------------

def _desc_text(fn, xs):
    """The JSON description a family call on ``xs`` makes (captured from make_fx)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    gm = make_fx(fn)(*xs)
    return [n.args[1] for n in gm.graph.nodes if str(n.target).endswith("move.default")]


OPCHECK = ["identity_scale_bias", "cast_f32_f64", "pad_constant", "pad_reflect", "pad_wrap", "join", "split", "tile",
           "depth_to_space_crd"]


@pytest.mark.parametrize("name", OPCHECK)
def test_opcheck(name):
    fn, xs = CASES[name]
    (text,) = _desc_text(fn, xs)
    json.loads(text)
    xs = [x.detach().clone().requires_grad_(True) for x in xs]
    torch.library.opcheck(move, (xs, text))


def test_opcheck_integer_description():
    x = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    (text,) = _desc_text(lambda v: dml.tile(v, [2, 1]), [x])
    torch.library.opcheck(move, ([x], text))


def test_the_operator_runs_a_hand_written_description():
    text = json.dumps({"Operator": "PADDING1", "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 3]},
                       "PaddingMode": "REFLECTION", "PaddingValueDataType": "FLOAT32", "PaddingValue": 0,
                       "StartPadding": [0, 0, 1, 2], "EndPadding": [0, 0, 1, 2]})
    x = torch.arange(6, dtype=torch.float32).reshape(1, 1, 2, 3)
    (y,) = move([x], text)
    want = np.pad(x.numpy(), [(0, 0), (0, 0), (1, 1), (2, 2)], mode="reflect")
    assert np.array_equal(y.numpy(), want)


@pytest.mark.parametrize("text, inputs, error, match", [
    ("not json", [torch.zeros(2)], JsonFormError, "malformed JSON"),
    ('{"Operator": "NOPE"}', [torch.zeros(2)], JsonFormError, "unknown operator"),
    ('{"Operator": "TILE", "InputTensor": {"DataType": "FLOAT32", "Sizes": [2]}}', [torch.zeros(2)],
     JsonFormError, "Repeats"),
    ('{"Operator": "TILE", "InputTensor": {"DataType": "FLOAT32", "Sizes": [2]}, "Repeats": [1, 2]}',
     [torch.zeros(2)], ValidationError, "TILE"),
    ('{"Operator": "TILE", "InputTensor": {"DataType": "FLOAT32", "Sizes": [2]}, "Repeats": [3]}',
     [torch.zeros(3)], ValidationError, r"inputs\[0\] must have sizes \[2\]"),
    ('{"Operator": "TILE", "InputTensor": {"DataType": "FLOAT32", "Sizes": [2]}, "Repeats": [3]}',
     [torch.zeros(2, dtype=torch.float64)], ValidationError, "dtype torch.float32"),
    ('{"Operator": "TILE", "InputTensor": {"DataType": "FLOAT32", "Sizes": [2]}, "Repeats": [3]}',
     [torch.zeros(2), torch.zeros(2)], ValidationError, "takes 1 input"),
    # every registered operator runs (test_the_move_operator_runs_every_operator_the_first_five_too); a bad
    # description of the first five is refused by its own rules
    ('{"Operator": "SLICE1", "InputTensor": {"DataType": "FLOAT32", "Sizes": [4]}, "InputWindowOffsets": [3], '
     '"InputWindowSizes": [2], "InputWindowStrides": [1]}', [torch.zeros(4)], ValidationError,
     r"SLICE1: InputWindowOffsets\[0\] \+ InputWindowSizes\[0\] must be <= InputTensor.Sizes\[0\]"),
])
def test_bad_descriptions_are_opendml_errors(text, inputs, error, match):
    with pytest.raises(error, match=match) as e:
        move(inputs, text)
    assert isinstance(e.value, DmlError)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:                       # the fake implementation checks the same
        fakes = [mode.from_tensor(x) for x in inputs]
        with pytest.raises(error, match=match):
            move(fakes, text)


def test_to_text_round_trips_every_case():
    from opendml.arrays.torch.library import description
    for name, (fn, xs) in CASES.items():
        for text in _desc_text(fn, xs):
            assert to_text(description(text)) == text, name


def test_the_first_eager_call_loads_no_compiler_and_compile_still_takes_the_functions_whole():
    """A process's first eager call does not import Dynamo (and with it sympy, Inductor and
    torch.distributed: seconds where Python has no bytecode cache); torch.compile, imported
    later, still takes the family's and the index functions whole (``front._OnDynamo``)."""
    import subprocess
    import sys
    code = """
import sys, torch, opendml as dml
x = torch.arange(12.0).reshape(1, 1, 3, 4)
eager = dml.pad(x, [0, 0, 1, 1], [0, 0, 1, 1], mode="reflection")
g = dml.gather(x, torch.tensor([2, 0]), 2)
assert "torch._dynamo" not in sys.modules and "sympy" not in sys.modules, sorted(
    m for m in sys.modules if m.startswith(("torch._dynamo", "sympy")))[:5]
f = torch.compile(lambda t: (dml.pad(t, [0, 0, 1, 1], [0, 0, 1, 1], mode="reflection"),
                             dml.gather(t, torch.tensor([2, 0]), 2)), fullgraph=True, backend="eager")
got = f(x)
assert torch.equal(got[0], eager) and torch.equal(got[1], g)
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


@pytest.mark.parametrize("fn", [lambda v: dml.pad(v, 1, 1, dml.PaddingMode.EDGE),
                                lambda v: dml.space_to_depth(v, 2, dml.DepthSpaceOrder.COLUMN_ROW_DEPTH),
                                lambda v: dml.cast(v, dml.DataType.FLOAT64)],
                         ids=["pad_PaddingMode", "space_to_depth_DepthSpaceOrder", "cast_DataType"])
def test_enum_arguments_compile(fn):
    """Dynamo passes an ``IntEnum`` argument to a function it enters whole as its int: the functions take a
    member's int value as the member."""
    torch._dynamo.reset()
    x = _x(2, 3, 4, 6)
    assert torch.equal(torch.compile(fn, backend="aot_eager", fullgraph=True)(x), fn(x))


def test_an_int_that_is_no_members_value_is_refused():
    x = _x(2, 3, 4, 6)
    with pytest.raises(ValidationError, match="PaddingMode"):
        dml.pad(x, 1, 1, 7)
    with pytest.raises(ValidationError, match="Order"):
        dml.space_to_depth(x, 2, 2)
    with pytest.raises(ValidationError, match="dtype must be"):
        dml.cast(x, 99)                      # (no DataType's value)
    with pytest.raises(ValidationError, match="dtype must be"):
        dml.cast(x, True)
    assert dml.cast(x, 9).dtype == torch.float64     # DataType.FLOAT64's value, eagerly as compiled
    with pytest.raises(ValidationError, match="PaddingMode"):
        dml.pad(x, 1, 1, True)
    assert torch.equal(dml.pad(x, 1, 1, 1), dml.pad(x, 1, 1, "edge"))


# -- the family operators given what no traced call gives them (a hostile caller) -----------------------

_PAD = '["pad", [1, 2, "constant", 0.5], false, false]'


@pytest.mark.parametrize("text,inputs,error,match", [
    # an argument list of the wrong length: the function's arity, an opendml error (not a TypeError)
    ('["pad", [1, 1], false, false]', 1, ValidationError, r"pad takes 4 arguments after its array.*got 2"),
    ('["cast", [], false, false]', 1, ValidationError, r"cast takes 1 argument after its array \(dtype\); got 0"),
    ('["identity", [1.0, 0.0, 7], false, false]', 1, ValidationError, r"identity takes 2 arguments.*got 3"),
    # JSON nested past the parser's recursion limit, in the text or in an argument
    ("[" * 100000 + "]" * 100000, 1, ValidationError, "JSON text"),
    ('["pad", ' + "[" * 100000 + "]" * 100000 + ', false, false]', 1, ValidationError, "JSON text"),
    ('["pad", [' + "[" * 900 + "]" * 900 + ', 1, "edge", 0], false, false]', 1, ValidationError, "JSON text|Padding"),
    # the linear part of a call that has none (a cast to an integer type)
    ('["cast", ["int32"], false, true]', 1, UnsupportedError, r"CAST: not differentiable for these data types"),
], ids=["pad_arity", "cast_arity", "identity_arity", "nested_text", "nested_argument", "deep_argument",
        "linear_cast_to_int"])
def test_the_family_operators_text_is_checked_to_the_end(text, inputs, error, match):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with pytest.raises(error, match=match):
        FAMILY([_x(2, 3)] * inputs, text)
    with FakeTensorMode() as mode, pytest.raises(error, match=match):     # the fake says the same
        FAMILY([mode.from_tensor(_x(2, 3))] * inputs, text)


def test_the_family_operators_refuse_tensors_on_two_devices():
    """As the move operator and the functions do: a meta input beside a CPU one is an ``UnsupportedError``, never
    the meta kernel's uninitialised CPU output."""
    x, m = _x(2, 3), _x(2, 3).to("meta")
    with pytest.raises(UnsupportedError, match="every tensor must be on one device"):
        dml.join([x, m], 0)
    for inputs in ([x, m], [m, x]):
        with pytest.raises(UnsupportedError, match=r"opendml::family: every tensor must be on one device"):
            FAMILY(inputs, '["join", [0], true, false]')
    with pytest.raises(UnsupportedError, match=r"opendml::family_adjoint: every tensor must be on one device"):
        ADJOINT([torch.zeros(5, 6, device="meta")], [x], _PAD)


ADJOINT = torch.ops.opendml.family_adjoint.default


@pytest.mark.parametrize("grads,match", [
    ([], r"PADDING1 has 1 output\(s\); got 0 gradients"),
    ([_x(5, 6), _x(5, 6)], r"PADDING1 has 1 output\(s\); got 2 gradients"),
    ([_x(1, 1)], r"grads\[0\] must have sizes \[5, 6\] and dtype torch.float32.*got \[1, 1\] torch.float32"),
    ([_x(6, 5)], r"grads\[0\] must have sizes \[5, 6\].*got \[6, 5\]"),
    ([_x(5, 6, dtype=torch.float64)], r"grads\[0\] must have sizes \[5, 6\] and dtype torch.float32.*float64"),
])
def test_the_adjoint_operator_checks_its_gradients(grads, match):
    """``family_adjoint``'s gradients are its call's outputs' sizes and dtype (a smaller one read out of bounds or
    raised PyTorch's errors, a larger one gave outputs the fake did not)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    x = _x(2, 3)
    with pytest.raises(ValidationError, match=match):
        ADJOINT(grads, [x], _PAD)
    with FakeTensorMode() as mode, pytest.raises(ValidationError, match=match):
        ADJOINT([mode.from_tensor(g) for g in grads], [mode.from_tensor(x)], _PAD)
    for text, g in (('["identity", [2.0, 1.0], false, false]', _x(1)), ('["tile", [[2, 2]], false, false]', _x(1))):
        with pytest.raises(ValidationError, match=r"grads\[0\] must have sizes"):
            ADJOINT([g], [x], text)


def test_forward_ad_through_the_python_operators_is_exact():
    """Forward-mode AD through the raw operators (an exported program's dynamic-shape pad holds
    ``opendml::family``; a compiled unchecked index function ``opendml::move``): each output's tangent is the call's
    linear part on the tangents (the index tensor kept), under ``torch.func.jvp``, ``forward_ad``, nested
    transforms and reverse mode over it. ``torch.library.custom_op``, which defined them, has no forward-mode
    rule: they gave a zero tangent, silently."""
    import torch.autograd.forward_ad as fwad
    x, t = _x(3, 4), _x(3, 4, seed=1)
    pad, scaled = '["pad", [1, 2, "reflect", 0.0], false, false]', '["identity", [2.5, -1.0], false, false]'
    idx = torch.tensor([[2, 0, 1, 1], [0, 1, 2, 0]])
    (gather,) = _desc_text(lambda v: dml.gather_elements(v, idx, 0, check_indices=False), [x])
    small = _x(2, 3)
    cases = [(lambda v: FAMILY([v], pad)[0], lambda v: dml.pad(v, 1, 2, "reflect"), x, t),
             (lambda v: FAMILY([v], scaled)[0], lambda v: v * 2.5, x, t),
             (lambda v: move([v, idx], gather)[0], lambda v: dml.gather_elements(v, idx, 0), x, t),
             (lambda g: ADJOINT([g], [small], _PAD)[0], lambda g: g[1:-2, 1:-2], _x(5, 6), _x(5, 6, seed=1))]
    for fn, linear, v, u in cases:
        y, tangent = torch.func.jvp(fn, (v,), (u,))
        assert torch.equal(y, fn(v)) and torch.equal(tangent, linear(u))
        with fwad.dual_level():
            assert torch.equal(fwad.unpack_dual(fn(fwad.make_dual(v, u))).tangent, linear(u))
        batch = torch.stack([u, 2 * u])
        got = torch.func.vmap(lambda w: torch.func.jvp(fn, (v,), (w,))[1])(batch)
        assert torch.equal(got, torch.stack([linear(u), linear(2 * u)]))
        # reverse mode over the tangent: the tangent is the call's linear part of u, whose gradient is its adjoint
        w = u.clone().requires_grad_(True)
        with fwad.dual_level():
            out = fwad.unpack_dual(fn(fwad.make_dual(v, w))).tangent
        (got,) = torch.autograd.grad(out.sum(), w)
        (want,) = torch.autograd.grad(linear(w).sum(), w)
        assert torch.equal(got, want)
    with pytest.raises(UnsupportedError, match="CAST: not differentiable for these data types"):
        torch.func.jvp(lambda v: FAMILY([v], '["cast", [{"torch": "int32"}], false, false]')[0], (x,), (t,))


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_ad_compiled_with_dynamic_shapes_is_exact(name):
    """Dual tensors through ``torch.compile(dynamic=True)`` (the family calls take ``opendml::family``): the
    tangents are the eager route's."""
    import torch.autograd.forward_ad as fwad
    fn, xs = CASES[name]
    ts = [_x(*x.shape, dtype=x.dtype, seed=7) for x in xs]

    def tangents(f):
        with fwad.dual_level():
            return [fwad.unpack_dual(y).tangent for y in _outputs(f(*[fwad.make_dual(x, t) for x, t in zip(xs, ts)]))]
    want = tangents(fn)
    torch._dynamo.reset()
    got = tangents(torch.compile(fn, backend="aot_eager", dynamic=True, fullgraph=True))
    assert len(got) == len(want) and all(torch.equal(g, w) for g, w in zip(got, want))


def test_another_enums_member_is_refused_compiled_as_eagerly():
    x = _x(2, 4, 4, 4)
    fn = lambda v: dml.space_to_depth(v, 2, dml.PaddingMode.EDGE)  # noqa: E731
    with pytest.raises(ValidationError, match="Order"):
        fn(x)
    torch._dynamo.reset()
    with pytest.raises(Exception) as e:
        torch.compile(fn, backend="aot_eager", fullgraph=True)(x)
    assert "Order must be" in str(e.value)


class _Level(enum.IntEnum):
    """A caller's own IntEnum: eagerly no enum argument of opendml takes its members."""
    ONE = 1


@pytest.mark.parametrize("fn", [lambda v: dml.space_to_depth(v, 2, _Level.ONE),
                                lambda v: dml.pad(v, 1, 1, dml.DepthSpaceOrder.COLUMN_ROW_DEPTH),
                                lambda v: dml.pad(v, 1, 1, mode=dml.DepthSpaceOrder.COLUMN_ROW_DEPTH),
                                lambda v: dml.cast(v, dml.PaddingMode.EDGE),
                                lambda v: dml.diagonal_matrix(v, dtype=dml.PaddingMode.EDGE)],
                         ids=["order-own-intenum", "pad-mode", "pad-mode-keyword", "cast-dtype", "diagonal-matrix-dtype"])
def test_other_enum_members_are_refused_compiled_as_eagerly(fn):
    x = _x(2, 4, 4, 4)
    with pytest.raises(ValidationError) as eager:
        fn(x)
    torch._dynamo.reset()
    with pytest.raises(Exception) as compiled:
        torch.compile(fn, backend="aot_eager", fullgraph=True)(x)
    assert str(eager.value) in str(compiled.value)


def test_an_enum_defined_in_a_function_is_refused_compiled_as_eagerly():
    """A member of an enum no module name reaches (defined in a function) is read back as a stand-in that
    shows it as the member does: eager's message, compiled, with and without ``fullgraph``."""
    class Local(enum.IntEnum):
        ONE = 1
    x = _x(2, 4, 4, 4)
    fn = lambda v: dml.space_to_depth(v, 2, Local.ONE)  # noqa: E731
    with pytest.raises(ValidationError) as eager:
        fn(x)
    assert "got <Local.ONE: 1>" in str(eager.value)
    torch._dynamo.reset()
    with pytest.raises(Exception) as compiled:        # Dynamo's error around it, as for any bad argument
        torch.compile(fn, backend="aot_eager", fullgraph=True)(x)
    assert str(eager.value) in str(compiled.value)


@pytest.mark.parametrize("dynamic", [False, True])
def test_members_of_the_right_enum_compile_as_eagerly(dynamic):
    """The arguments read as members (order, mode, dtype) give eager's values compiled; an int or a string
    spelling, as ever."""
    x = _x(2, 4, 4, 4)
    fns = [lambda v: dml.space_to_depth(v, 2, dml.DepthSpaceOrder.COLUMN_ROW_DEPTH),
           lambda v: dml.depth_to_space(v, 2, 1),
           lambda v: dml.pad(v, 1, 2, dml.PaddingMode.REFLECTION),
           lambda v: dml.pad(v, 1, 2, "wrap"),
           lambda v: dml.pad(v, 1, 2, mode=dml.PaddingMode.EDGE),
           lambda v: dml.cast(v, dtype=dml.DataType.INT32),
           lambda v: dml.cast(v, dml.DataType.FLOAT16),
           lambda v: dml.cast(v, torch.int32),
           lambda v: dml.diagonal_matrix(v, dtype=dml.DataType.FLOAT32, begin=-1, end=2)]
    for fn in fns:
        torch._dynamo.reset()
        got = torch.compile(fn, backend="aot_eager", fullgraph=True, dynamic=dynamic)(x)
        want = fn(x)
        assert got.dtype == want.dtype and torch.equal(got, want)


def test_vmap_and_grad_around_a_compiled_dynamic_function():
    """Dynamo skips the frames of a compiled function called under a torch.func transform (it cannot trace the
    transform's tensors) and compiles those they call: none of the eager route's (its per-element vmap loop
    ran engine.run_numpy's frames through Dynamo with symbolic sizes, an InternalTorchDynamoError). Every
    operator: tests/test_route_matrix.py."""
    fn = lambda v: dml.tile(v, [2, 1]) * 2  # noqa: E731
    torch._dynamo.reset()
    xb = _x(5, 4, 3)
    got = torch.func.vmap(torch.compile(fn, backend="aot_eager", dynamic=True))(xb)
    assert torch.equal(got, torch.func.vmap(fn)(xb))
    torch._dynamo.reset()
    loss = lambda v: (fn(v) * torch.arange(24.0).reshape(8, 3)).sum()  # noqa: E731
    got = torch.func.grad(torch.compile(loss, backend="aot_eager", dynamic=True))(xb[0])
    assert torch.equal(got, torch.func.grad(loss)(xb[0]))


@pytest.mark.parametrize("fn", [lambda v: dml.pad(v * 2, 1, 2, "edge"), lambda v: dml.join([v * 2, v * 3], 1),
                                lambda v: dml.split(v * 2, 1, [1, 2])[1]], ids=["pad", "join", "split"])
def test_the_backward_keeps_no_family_input_alive(fn):
    """The adjoint reads its inputs' sizes alone: compiled with dynamic shapes, the backward graph is handed the
    sizes, never the family call's input (held from the forward to the backward: as much memory again), as the
    static route's."""
    from torch._dynamo.testing import AotEagerAndRecordGraphs
    x = _x(6, 3)
    for dynamic in (True, False):
        torch._dynamo.reset()
        backend = AotEagerAndRecordGraphs()
        v = x.clone().requires_grad_(True)
        (torch.compile(fn, backend=backend, dynamic=dynamic, fullgraph=True)(v) * 3).sum().backward()
        w = x.clone().requires_grad_(True)
        (fn(w) * 3).sum().backward()
        assert torch.equal(v.grad, w.grad)
        saved = [n.name for n in backend.bw_graphs[0].graph.nodes
                 if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor) and
                 not n.name.startswith("tangents")]
        assert saved == [], (dynamic, saved)


# -- the index functions on the dynamic route ---------------------------------------------------------

def _ints(lo, hi, *shape, seed=0, dtype=torch.int64):
    return torch.randint(lo, hi, shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


#: name -> (function, inputs for a free size n); every index function (n >= 9: no other size of a case
#: equals it, else PyTorch gives both one symbol). Indices of every case in range.
INDEX_CASES = {
    "gather": (lambda x, i: dml.gather(x, i, 0), lambda n: [_x(n, 3), _ints(-n, n, 2, n - 4, seed=n)]),
    "gather_elements": (lambda x, i: dml.gather_elements(x, i, 1), lambda n: [_x(n, 4), _ints(0, 4, n, 2, seed=n)]),
    "gather_nd": (lambda x, i: dml.gather_nd(x, i, 1),
                  lambda n: [_x(n, 3, 2), torch.stack([_ints(0, 3, n, 5, seed=n), _ints(0, 2, n, 5)], -1)]),
    "scatter_elements": (lambda x, i, u: dml.scatter_elements(x, i, u, 1),
                         lambda n: [_x(n, 4), torch.stack([torch.randperm(4)[:2] for _ in range(n)]), _x(n, 2, seed=1)]),
    "scatter_nd": (lambda x, i, u: dml.scatter_nd(x, i, u),
                   lambda n: [_x(n, 3), torch.tensor([[n - 1], [2], [-1]]), _x(3, 3, seed=1)]),
    "one_hot": (lambda i, v: dml.one_hot(i, 4, v), lambda n: [_ints(-5, 5, n, 3, seed=n), torch.tensor([0.5, 2.0])]),
    "reverse_subsequences": (lambda x, lengths: dml.reverse_subsequences(x, lengths, 1),
                             lambda n: [_x(n, 5), _ints(0, 7, n, seed=n, dtype=torch.uint32)]),
    "diagonal_matrix": (lambda x: dml.diagonal_matrix(x, value=5.0, begin=-1, end=1), lambda n: [_x(n, 4, 6)]),
}


def _floats_grad(xs):
    return [x.detach().clone().requires_grad_(x.is_floating_point()) for x in xs]


def _index_values_and_grads(f, xs):
    xs = _floats_grad(xs)
    loss, outs = f(*xs)
    wrt = [x for x in xs if x.requires_grad]
    grads = torch.autograd.grad(loss, wrt, allow_unused=True) if loss.requires_grad else [None] * len(wrt)
    return [o.detach() for o in outs], grads


@pytest.mark.parametrize("name", sorted(INDEX_CASES))
def test_index_functions_keep_one_graph_under_dynamic_shapes(name):
    """Every index function enters a dynamic-shape graph as ``opendml::family`` (never ``opendml::move``): one
    compile for three shapes, each giving eager's values and gradients (one_hot's and diagonal_matrix's
    values get none, as eagerly)."""
    from torch._dynamo.testing import AotEagerAndRecordGraphs
    from torch._dynamo.utils import counters
    fn, make = INDEX_CASES[name]
    torch._dynamo.reset()
    counters.clear()
    recorded = AotEagerAndRecordGraphs()
    f = _loss_fn(fn)
    compiled = torch.compile(f, backend=recorded, fullgraph=True, dynamic=True)
    for n in (9, 11, 13):
        given = make(n)
        want_outs, want_grads = _index_values_and_grads(f, given)
        got_outs, got_grads = _index_values_and_grads(compiled, given)
        for a, b in zip(got_outs, want_outs):
            assert a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b), (name, n)
        assert len(got_grads) == len(want_grads)
        for a, b in zip(got_grads, want_grads):
            assert (a is None) == (b is None) and (a is None or torch.equal(a, b)), (name, n)
    assert counters["stats"]["unique_graphs"] == 1 and len(recorded.graphs) == 1, name
    graphs = " ".join(g.code for g in recorded.fw_graphs + recorded.bw_graphs)
    assert "opendml.family.default" in graphs and ".move.default" not in graphs, graphs


@pytest.mark.parametrize("name", sorted(INDEX_CASES))
def test_index_functions_forward_ad_under_dynamic_shapes_is_exact(name):
    """Dual tensors through an index function compiled with dynamic shapes (``opendml::family``'s forward-mode
    rule: the linear part on the data's tangents, the index tensor as it is): eager's tangents, and none where
    eagerly there is none."""
    import torch.autograd.forward_ad as fwad
    fn, make = INDEX_CASES[name]
    xs = make(9)
    ts = [_x(*x.shape, seed=7) if x.is_floating_point() else None for x in xs]

    def tangents(f):
        with fwad.dual_level():
            y = f(*[fwad.make_dual(x, t) if t is not None else x for x, t in zip(xs, ts)])
            return fwad.unpack_dual(y).tangent
    want = tangents(fn)
    torch._dynamo.reset()
    got = tangents(torch.compile(fn, backend="aot_eager", dynamic=True, fullgraph=True))
    assert (got is None) == (want is None) and (want is None or torch.equal(got, want)), name


@pytest.mark.parametrize("name", ["diagonal_matrix", "gather", "scatter_elements"])
def test_index_functions_double_backward_under_symbolic_sizes_is_exact(name):
    """The gradient of a gradient (the adjoint's own gradient: the call's linear part, ``family``'s ``linear``
    text) traced with symbolic sizes (make_fx: torch.compile has no double backward) is eager's;
    diagonal_matrix's linear part sets its band to 0, not to its value."""
    from torch.fx.experimental.proxy_tensor import make_fx
    fn, make = INDEX_CASES[name]
    xs = make(9)
    y = fn(*xs)
    g, vs = _x(*y.shape, seed=3), [_x(*x.shape, seed=5 + k) for k, x in enumerate(xs) if x.is_floating_point()]

    def second(g, vs, xs):
        xs = [x.detach().requires_grad_(x.is_floating_point()) for x in xs]
        g = g.detach().requires_grad_(True)
        wrt = [x for x in xs if x.requires_grad]
        firsts = torch.autograd.grad(fn(*xs), wrt, g, create_graph=True)
        return torch.autograd.grad(firsts, g, vs)[0]
    gm = make_fx(second, tracing_mode="symbolic")(g, vs, xs)
    assert "opendml.family" in gm.code and ".move.default" not in gm.code
    assert torch.equal(gm(g, vs, xs), second(g, vs, xs)), name


def test_an_index_out_of_range_in_a_compiled_dynamic_call_raises_the_functions_error():
    """The implementation runs the function on each call's tensors: a bad index found at run time raises the
    eager call's error, word for word (the traced call had no values to check)."""
    torch._dynamo.reset()
    fn = lambda v, i: dml.gather(v, i, 1) * 2  # noqa: E731
    f = torch.compile(fn, backend="aot_eager", dynamic=True, fullgraph=True)
    for n in (9, 11):
        x, i = _x(3, n), _ints(0, n, 4, seed=n)
        assert torch.equal(f(x, i), fn(x, i))
    x, i = _x(3, 13), torch.tensor([0, 13, 2, 1])
    with pytest.raises(ValidationError) as eager:
        fn(x, i)
    with pytest.raises(ValidationError) as compiled:
        f(x, i)
    assert str(compiled.value) == str(eager.value) and "indices[1] = 13 is out of range" in str(eager.value)


#: The functions with an index check: name -> (its INDEX_CASES call with ``check_indices`` given, where an index
#: out of range goes in INDEX_CASES' inputs of size n: (input, position, value)).
CHECKED = {
    "gather": (lambda check: lambda x, i: dml.gather(x, i, 0, check_indices=check), lambda n: (1, (1, 0), n)),
    "gather_elements": (lambda check: lambda x, i: dml.gather_elements(x, i, 1, check_indices=check),
                        lambda n: (1, (n - 1, 1), -5)),
    "gather_nd": (lambda check: lambda x, i: dml.gather_nd(x, i, 1, check_indices=check),
                  lambda n: (1, (0, 3, 1), 2)),
    "scatter_elements": (lambda check: lambda x, i, u: dml.scatter_elements(x, i, u, 1, check_indices=check),
                         lambda n: (1, (2, 0), 4)),
    "scatter_nd": (lambda check: lambda x, i, u: dml.scatter_nd(x, i, u, check_indices=check),
                   lambda n: (1, (2, 0), -n - 1)),
}


def _bad(name, n):
    """INDEX_CASES' inputs of size n for ``name``, one index put out of range (``CHECKED``)."""
    given = INDEX_CASES[name][1](n)
    slot, at, value = CHECKED[name][1](n)
    given[slot] = given[slot].clone()
    given[slot][at] = value
    return given


def _raises_as_eagerly(fn, compiled, given):
    """``compiled(*given)`` raises ``fn(*given)``'s error: its class and its message, word for word."""
    with pytest.raises(ValidationError) as eager:
        fn(*given)
    assert "is out of range" in str(eager.value)
    with pytest.raises(type(eager.value), match=f"^{re.escape(str(eager.value))}$"):
        compiled(*given)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("name", sorted(CHECKED))
def test_a_compiled_index_call_of_fixed_sizes_checks_its_indices_as_eagerly(name, backend):
    """Compiled with fixed sizes, a checked call raises eager's error for an index out of range (the graph runs
    the function on each call's tensors, ``opendml::family``; it used to clamp the index), in range it gives
    eager's values and gradients; with ``check_indices=False`` it clamps as eagerly."""
    checked, unchecked = CHECKED[name][0](True), CHECKED[name][0](False)
    torch._dynamo.reset()
    f = _loss_fn(checked)
    compiled = torch.compile(f, backend=backend, dynamic=False, fullgraph=True)
    given = INDEX_CASES[name][1](9)
    for a, b in zip(_index_values_and_grads(compiled, given), _index_values_and_grads(f, given)):
        assert len(a) == len(b) and all(torch.equal(p, q) for p, q in zip(a, b)), name
    _raises_as_eagerly(checked, torch.compile(checked, backend=backend, dynamic=False, fullgraph=True), _bad(name, 9))
    _raises_as_eagerly(f, compiled, _bad(name, 9))
    bad = _bad(name, 9)
    got = torch.compile(unchecked, backend=backend, dynamic=False, fullgraph=True)(*bad)
    assert torch.equal(got, unchecked(*bad)), name


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("name", sorted(CHECKED))
def test_automatic_dynamic_compiles_check_indices_in_both_graphs(name, backend):
    """PyTorch's default (``dynamic=None``) compiles the first shape with fixed sizes and a second one with
    symbolic sizes: both graphs raise eager's error for an index out of range, and give eager's values."""
    from torch._dynamo.utils import counters
    checked = CHECKED[name][0](True)
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(checked, backend=backend, fullgraph=True)
    for n in (9, 11):
        given = INDEX_CASES[name][1](n)
        assert torch.equal(compiled(*given), checked(*given)), (name, n)
        _raises_as_eagerly(checked, compiled, _bad(name, n))
    assert counters["stats"]["unique_graphs"] == 2, name


@pytest.mark.cuda
@pytest.mark.parametrize("name", sorted(CHECKED))
def test_a_compiled_index_call_of_fixed_sizes_checks_its_indices_on_cuda(name):
    """On CUDA tensors too (Inductor, fixed sizes): the graph runs the function, whose check is the eager one."""
    if not torch.cuda.is_available():
        pytest.skip("CUDA is not available here")
    checked = CHECKED[name][0](True)
    torch._dynamo.reset()
    compiled = torch.compile(checked, dynamic=False, fullgraph=True)
    given = [x.cuda() for x in INDEX_CASES[name][1](9)]
    assert torch.equal(compiled(*given), checked(*given)), name
    _raises_as_eagerly(checked, compiled, [x.cuda() for x in _bad(name, 9)])


@pytest.mark.parametrize("name", ["gather", "scatter_elements", "reverse_subsequences"])
def test_the_index_backward_keeps_the_indices_alone(name):
    """The adjoint reads the index tensor's values and the data inputs' sizes: compiled with dynamic shapes,
    the backward graph is handed the index tensor (the lengths), never a data input."""
    from torch._dynamo.testing import AotEagerAndRecordGraphs
    fn, make = INDEX_CASES[name]
    torch._dynamo.reset()
    backend = AotEagerAndRecordGraphs()
    given = make(9)
    xs = _floats_grad(given)
    (torch.compile(fn, backend=backend, dynamic=True, fullgraph=True)(*[x * 2 if x.requires_grad else x
                                                                          for x in xs]) * 3).sum().backward()
    ws = _floats_grad(given)
    (fn(*[w * 2 if w.requires_grad else w for w in ws]) * 3).sum().backward()
    assert all(torch.equal(x.grad, w.grad) for x, w in zip(xs, ws) if x.requires_grad)
    saved = [n.meta["val"] for n in backend.bw_graphs[0].graph.nodes
             if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor) and
             not n.name.startswith("tangents")]
    assert [t.dtype for t in saved] == [given[1].dtype], saved


def test_second_order_gradients_of_an_index_function_trace():
    """The index adjoint's gradient is the function again on the saved indices: a gradient of a gradient
    traces with symbolic sizes (make_fx) and serves another shape."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(v, i):
        y = dml.gather(v * v, i, 0)
        (g,) = torch.autograd.grad((y * y).sum(), v, create_graph=True)
        (h,) = torch.autograd.grad((g * g).sum(), v)
        return g, h
    gm = make_fx(f, tracing_mode="symbolic")(_x(9, 3).requires_grad_(), torch.tensor([[0, 8, -1, 2, 2]]))
    assert "opendml.family_adjoint" in gm.code and ".move.default" not in gm.code
    w, j = _x(11, 3, seed=1).requires_grad_(), torch.tensor([[0, 10, -1, 2, 2, 3]])
    for a, b in zip(gm(w, j), f(w, j)):
        torch.testing.assert_close(a, b)


@pytest.mark.cuda
@pytest.mark.parametrize("name", sorted(INDEX_CASES))
def test_index_functions_keep_one_graph_on_cuda_with_inductor(name):
    if not torch.cuda.is_available():
        pytest.skip("CUDA is not available here")
    from torch._dynamo.utils import counters
    fn, make = INDEX_CASES[name]
    torch._dynamo.reset()
    counters.clear()
    f = _loss_fn(fn)
    compiled = torch.compile(f, fullgraph=True, dynamic=True)
    for n in (9, 11, 13):
        given = [x.cuda() for x in make(n)]
        want_outs, want_grads = _index_values_and_grads(f, given)
        got_outs, got_grads = _index_values_and_grads(compiled, given)
        for a, b in zip(got_outs, want_outs):
            assert a.shape == b.shape and torch.equal(a, b), (name, n)
        for a, b in zip(got_grads, want_grads):
            assert (a is None) == (b is None) and (a is None or torch.allclose(a, b)), (name, n)
    assert counters["stats"]["unique_graphs"] == 1, name


@pytest.mark.cuda
@pytest.mark.parametrize("check", [True, False])
def test_an_index_function_under_cuda_graphs(check):
    """``mode="reduce-overhead"`` (CUDA graphs): a checked index call (``opendml::family``, the function with its
    check) and an unchecked one (``opendml::move``) give eager's values on every replay."""
    if not torch.cuda.is_available():
        pytest.skip("CUDA is not available here")
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(64, 32, device="cuda", generator=g)
    i = torch.randint(-64, 64, (100,), device="cuda", generator=g)
    fn = lambda v, j: dml.gather(v, j, 0, check_indices=check) * 2  # noqa: E731
    torch._dynamo.reset()
    compiled = torch.compile(fn, mode="reduce-overhead")
    for k in range(4):
        y = x + k
        assert torch.equal(compiled(y, i), fn(y, i)), k


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_numpy_scalar_arguments_are_read_as_their_values(dynamic):
    """Dynamo passes a NumPy scalar argument on as a 0-d tensor: the functions read its value, so a compiled
    call gives eager's result where it raised (``identity``'s scale, ``pad``'s widths were 'must be a number' /
    'a sequence of integers' errors)."""
    x = _x(3, 4)
    idx = torch.tensor([0, 2])
    fns = {"identity": lambda v: dml.identity(v, scale=np.float32(0.5), bias=np.float64(1.0)),
           "pad": lambda v: dml.pad(v, np.int64(1), np.int32(2), value=np.float32(3.0)),
           "join": lambda v: dml.join([v, v], np.int64(1)),
           "gather": lambda v: dml.gather(v, idx, np.int64(1)),
           "one_hot": lambda v: dml.one_hot(idx, np.int64(4), torch.tensor([0.0, 1.0]))}
    for name, fn in fns.items():
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="aot_eager", fullgraph=True, dynamic=dynamic)
        assert torch.equal(compiled(x), fn(x)), name
