"""The C++ dispatcher operators (``opendml_cpp::``, registered by the node
library ``arrays/torch/node.cpp``) that traced calls take once the library is
loaded: compiled results equal eager ones byte for byte, forward + backward
under ``torch.compile``, ``opcheck``, ``gradcheck``/``gradgradcheck``,
``vmap``, dynamic shapes, errors equal across routes, graphs traced before
and after the switch, ``torch_node="off"`` and threads."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import opendml as dml  # noqa: E402
import opendml.torch as dmlt  # noqa: E402
from opendml.arrays.torch import adapter  # noqa: E402
from opendml.arrays.torch import node as torch_node  # noqa: E402

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


@pytest.fixture(scope="module")
def cpp():
    """The C++ operator table (the node library built or loaded for this PyTorch)."""
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        pytest.skip("no C++ compiler here: the custom operators serve")
    with dml.configure(torch_node="wait"):
        assert torch_node.wait(), torch_node.status()
        ops = adapter.operators()
    assert ops is not adapter._CUSTOM, dmlt.compiled_status()
    assert dmlt.compiled_status() == "C++ dispatcher operators (opendml_cpp::)"
    return ops


def _device(device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("CUDA is not available here")
    return device


def _pack(args):
    """The C++ window operators' one list argument: their int lists one after another."""
    return [v for a in args for v in a]


def _x(*shape, device="cpu", dtype=torch.float64):
    return torch.arange(int(np.prod(shape)), dtype=dtype, device=device).reshape(shape) * 0.5 - 3


#: (name, function of one tensor, input shape): every operator, the family too.
CALLS = [
    ("unfold", lambda x: dml.unfold(x, 3, 1, 1, 1, 1), (2, 3, 6, 5)),
    ("unfold_asym", lambda x: dml.unfold(x, [2, 3], [1, 2], [2, 1], [1, 0], [0, 2]), (2, 3, 5, 4)),
    ("fold", lambda x: dml.fold(x, [6, 5], 3, 1, 1, 1, 1), (2, 27, 30)),
    ("slice", lambda x: dml.slice(x, [0, 1, 1, 0], [2, 2, 2, 2], [1, 1, 2, 3]), (2, 3, 5, 6)),
    ("slice1", lambda x: dml.slice1(x, [0, 0, 1, 0], [2, 3, 4, 5], [1, 1, -2, 2]), (2, 3, 5, 6)),
    ("slice_grad", lambda x: dml.slice_grad(x, [2, 3, 5, 6], [0, 0, 1, 0], [2, 3, 4, 5], [1, 1, -2, 2]),
     (2, 3, 2, 3)),
    ("pad", lambda x: dml.pad(x, 1, 2, "constant", 0.5), (2, 3, 4, 4)),
    ("pad_reflect", lambda x: dml.pad(x, [0, 0, 1, 2], [0, 0, 2, 1], "reflect"), (2, 3, 4, 4)),
    ("split_join", lambda x: dml.join(list(dml.split(x, 1, [1, 2]))[::-1], 1), (2, 3, 4, 4)),
    ("tile", lambda x: dml.tile(x, [1, 2, 1, 2]), (2, 3, 4, 4)),
]
IDS = [c[0] for c in CALLS]


def _compiled_graph(fn, x):
    """(compiled result, forward graph code, backward graph code) of ``fn(x)`` under aot_eager, backward of a sum."""
    from torch._dynamo.testing import AotEagerAndRecordGraphs
    torch._dynamo.reset()
    backend = AotEagerAndRecordGraphs()
    y = torch.compile(fn, backend=backend, fullgraph=True)(x)
    if x.requires_grad:
        y.square().sum().backward()
    return y, backend.fw_graphs[0].code, backend.bw_graphs[0].code if backend.bw_graphs else ""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,fn,shape", CALLS, ids=IDS)
def test_compiled_equals_eager_with_the_cpp_operators(cpp, name, fn, shape, device):
    x = _x(*shape, device=_device(device), dtype=torch.float32).requires_grad_(True)
    y, fw, bw = _compiled_graph(fn, x)
    assert dmlt.compiled_route() == "opendml_cpp"
    assert "torch.ops.opendml_cpp." in fw and "torch.ops.opendml." not in fw
    assert ("torch.ops.opendml_cpp." in bw or name == "tile") and "torch.ops.opendml." not in bw  # TILE's adjoint: a sum
    xe = x.detach().clone().requires_grad_(True)
    ye = fn(xe)
    ye.square().sum().backward()
    assert torch.equal(y, ye) and torch.equal(x.grad, xe.grad)


@pytest.mark.parametrize("device", DEVICES)
def test_inductor_compiled_layer_equals_eager(cpp, device):
    device = _device(device)
    torch._dynamo.reset()
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 10, 10, generator=gen).to(device)
    w = torch.randn(8, 36, generator=gen).to(device)

    def layer(t, wt):
        return wt @ dml.unfold(t, 3, 1, 1, 1, 1)
    compiled = torch.compile(layer, fullgraph=True)
    got = compiled(x, w)
    assert dmlt.compiled_route() == "opendml_cpp"
    torch.testing.assert_close(got, layer(x, w))        # the matmul may be another kernel than eager's
    cols = torch.compile(lambda t: dml.unfold(t, 3, 1, 1, 1, 1) + 0, fullgraph=True)
    for _ in range(3):                    # the call cache serves the repeated kernel: the same bytes
        assert torch.equal(cols(x), dml.unfold(x, 3, 1, 1, 1, 1))
        assert torch.equal(compiled(x, w), got)
    xg, wg = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    (gx, gw) = torch.autograd.grad(compiled(xg, wg).sum(), (xg, wg))
    (ex, ew) = torch.autograd.grad(layer(xg, wg).sum(), (xg, wg))
    torch.testing.assert_close(gx, ex)
    torch.testing.assert_close(gw, ew)


def test_dynamic_shapes(cpp):
    torch._dynamo.reset()

    def f(x):
        u = dml.unfold(x, [2, 3], [1, 2], [2, 1], [1, 0], [0, 2])
        back = dml.fold(u, list(x.shape[2:]), [2, 3], [1, 2], [2, 1], [1, 0], [0, 2])
        return dml.slice1(back, [0, 0, 1, 0], [1, 2, 3, 3], [1, 1, -1, 2])
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager", dynamic=True)
    for shape in [(2, 3, 5, 4), (3, 2, 7, 6), (1, 4, 6, 9)]:
        x = _x(*shape).requires_grad_(True)
        got = compiled(x)
        (g,) = torch.autograd.grad(got.sum(), x)
        (e,) = torch.autograd.grad(f(x).sum(), x)
        assert torch.equal(got, f(x)) and torch.equal(g, e)
    assert dmlt.compiled_route() == "opendml_cpp"


#: (operator, arguments after the tensor, input shape)
OPCHECK = [
    ("unfold", ([3, 3], [1, 1], [1, 1], [1, 1], [1, 1]), (2, 3, 5, 4)),
    ("unfold", ([2, 3], [1, 2], [2, 1], [1, 0], [0, 2]), (2, 3, 5, 4)),
    ("fold", ([5, 4], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]), (2, 27, 20)),
    ("slice", ([0, 1, 1, 0], [2, 2, 2, 2], [1, 1, 2, 3]), (2, 3, 5, 6)),
    ("slice1", ([0, 0, 1, 0], [2, 3, 4, 5], [1, 1, -2, 2]), (2, 3, 5, 6)),
    ("slice_grad", ([2, 3, 5, 6], [0, 0, 1, 0], [2, 3, 3, 5], [1, 1, -2, 2]), (2, 3, 2, 3)),
]


@pytest.mark.parametrize("name,args,shape", OPCHECK, ids=[f"{c[0]}{i}" for i, c in enumerate(OPCHECK)])
def test_opcheck_gradcheck_and_vmap_of_the_cpp_operators(cpp, name, args, shape):
    op = cpp[name]
    packed = _pack(args)
    x = _x(*shape).requires_grad_(True)
    torch.library.opcheck(op, (x, packed))
    torch.library.opcheck(op, (x.detach(), packed))
    assert torch.autograd.gradcheck(lambda t: op(t, packed), (x,))
    assert torch.autograd.gradgradcheck(lambda t: op(t, packed), (x,))
    y = op(x, packed)
    assert type(y.grad_fn).__name__ == f"opendml_{name}Backward"
    assert torch.equal(y, adapter._CUSTOM[name](x.detach(), *args))
    xs = torch.stack([x.detach(), x.detach() * 2 + 1])
    batched = torch.func.vmap(lambda t: op(t, packed))(xs)
    assert torch.equal(batched, torch.stack([op(t, packed) for t in xs]))
    assert torch.equal(batched, torch.stack([adapter._CUSTOM[name](t, *args) for t in xs]))


def test_opcheck_of_the_cpp_move(cpp):
    from torch.fx.experimental.proxy_tensor import make_fx
    x = _x(2, 3, 4, 4)
    gm = make_fx(lambda t: dml.pad(t, 1, 2, "constant", 0.5))(x)
    (text,) = [n.args[1] for n in gm.graph.nodes if str(n.target).endswith("move.default")]
    move = dmlt._adapter.cpp_op("move")
    assert move is torch.ops.opendml_cpp.move.default
    torch.library.opcheck(move, ([x.clone().requires_grad_(True)], text))
    (y,) = move([x], text)
    assert torch.equal(y, dml.pad(x, 1, 2, "constant", 0.5))
    xi = torch.arange(12, dtype=torch.int32).reshape(3, 4).float().requires_grad_(True)
    gm = make_fx(lambda t: dml.cast(t, np.int32))(xi.detach())
    (text,) = [n.args[1] for n in gm.graph.nodes if str(n.target).endswith("move.default")]
    (yi,) = move([xi], text)                 # an integer output: no history, as the custom operator
    assert yi.dtype == torch.int32 and not yi.requires_grad


#: (invalid call, error type, message pattern)
ERRORS = [
    (lambda x: dml.unfold(x, 9, 1, 1, 0, 0), dml.ValidationError, "UNFOLD: the dilated window must fit"),
    (lambda x: dml.slice1(x, [0, 0, 3, 0], [1, 1, 2, 4], [1, 1, 1, 1]), dml.ValidationError,
     r"SLICE1: InputWindowOffsets\[2\] \+ InputWindowSizes\[2\]"),
    (lambda x: dml.fold(x, [4, 4], 3, 1, 1, 1, 1), dml.ValidationError,
     r"FOLD: InputTensor.Sizes\[2\] must be C x prod\(WindowSizes\)"),
    (lambda x: dml.split(x, 1, [2, 3]), dml.ValidationError, "SPLIT: the OutputTensors' Sizes"),
    (lambda x: dml.unfold(x.bfloat16(), 3), dml.UnsupportedError, "x's dtype torch.bfloat16 is not supported by UNFOLD"),
]


@pytest.mark.parametrize("k", range(len(ERRORS)))
def test_errors_are_the_same_through_every_route(cpp, k):
    fn, kind, pattern = ERRORS[k]
    x = _x(1, 1, 4, 4)
    messages = []
    for mode in ("wait", "off"):
        with dml.configure(torch_node=mode):
            with pytest.raises(kind) as info:        # eager
                fn(x)
            messages.append(str(info.value))
            torch._dynamo.reset()
            # compiled: Dynamo runs the call on fake tensors first (the route's validation) and wraps what it
            # raises in its own TorchRuntimeError, which names the error and carries its message
            with pytest.raises(Exception) as info:
                torch.compile(fn, fullgraph=True, backend="aot_eager")(x)
            text = str(info.value)
            assert f"{kind.__name__}(" in text and messages[-1].replace("'", "\\'") in text.replace("'", "\\'"), \
                text
    assert all(m == messages[0] for m in messages), messages
    import re
    assert re.search(pattern, messages[0])


def test_a_cpp_operator_called_directly_raises_the_opendml_error(cpp):
    x = _x(1, 1, 4, 4)
    with pytest.raises(dml.ValidationError, match="UNFOLD: the dilated window must fit") as direct:
        cpp["unfold"](x, [5, 1, 1, 1, 1, 1, 0, 0, 0, 0])
    with pytest.raises(dml.ValidationError) as custom:
        adapter._CUSTOM["unfold"](x, [5, 1], [1, 1], [1, 1], [0, 0], [0, 0])
    assert str(direct.value) == str(custom.value)
    with pytest.raises(dml.UnsupportedError, match="bfloat16") as direct:
        cpp["slice1"](x.bfloat16(), [0, 0, 0, 0, 1, 1, 4, 4, 1, 1, 1, 1])
    with pytest.raises(dml.UnsupportedError) as custom:
        adapter._CUSTOM["slice1"](x.bfloat16(), [0, 0, 0, 0], [1, 1, 4, 4], [1, 1, 1, 1])
    assert str(direct.value) == str(custom.value)
    # an error of the backward (its adjoint) reaches the caller as itself too
    xg = x.clone().requires_grad_(True)
    y = cpp["unfold"](xg, [3, 3, 1, 1, 1, 1, 1, 1, 1, 1])
    assert type(y.grad_fn).__name__ == "opendml_unfoldBackward"


def test_graphs_traced_before_and_after_the_switch_both_work(cpp):
    x = _x(2, 3, 6, 5).requires_grad_(True)

    def f(t):
        return dml.unfold(t, 3, 1, 1, 1, 1).square().sum()
    torch._dynamo.reset()
    with dml.configure(torch_node="off"):
        before = torch.compile(f, fullgraph=True, backend="aot_eager")
        assert torch.equal(before(x), f(x))
        assert dmlt.compiled_route() == "opendml"
        assert dmlt.compiled_status().startswith("custom operators (opendml::)")
    after = torch.compile(lambda t: f(t) * 1, fullgraph=True, backend="aot_eager")
    want = f(x)
    (g_want,) = torch.autograd.grad(want, x)
    for run in (after, before):           # the graph traced before the switch still runs, with the C++ ones on
        got = run(x)
        (g,) = torch.autograd.grad(got, x)
        assert torch.equal(got, want) and torch.equal(g, g_want)
    assert dmlt.compiled_route() == "opendml_cpp"


def test_node_off_takes_the_custom_operators():
    with dml.configure(torch_node="off"):
        x = _x(2, 3, 6, 5).requires_grad_(True)
        y, fw, bw = _compiled_graph(lambda t: dml.unfold(t, 3, 1, 1, 1, 1), x)
        assert dmlt.compiled_route() == "opendml"
        assert "torch.ops.opendml.unfold.default" in fw and "torch.ops.opendml.fold.default" in bw
        assert "opendml_cpp" not in fw + bw
        assert torch.equal(y, dml.unfold(x.detach(), 3, 1, 1, 1, 1))


def test_cpp_operators_under_threads(cpp):
    torch._dynamo.reset()
    compiled = torch.compile(lambda t: dml.slice1(dml.unfold(t, 3, 1, 1, 1, 1), [0, 0, 0], [2, 27, 30],
                                                  [1, -1, 1]), fullgraph=True, backend="aot_eager")
    xs = [_x(2, 3, 6, 5) * (k + 1) for k in range(8)]
    want = [compiled(x) for x in xs]
    errors = []

    def work(k):
        try:
            for _ in range(50):
                x = xs[k % len(xs)]
                assert torch.equal(compiled(x), want[k % len(xs)])
                assert torch.equal(cpp["unfold"](x, [3, 3, 1, 1, 1, 1, 1, 1, 1, 1]),
                                   dml.unfold(x, 3, 1, 1, 1, 1))
        except BaseException as e:         # noqa: BLE001 - reported by the main thread
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_dual_tensor_is_refused_not_dropped(cpp):
    import torch.autograd.forward_ad as fwad
    x = _x(1, 1, 4, 4)
    with fwad.dual_level():
        dual = fwad.make_dual(x, torch.ones_like(x))
        with pytest.raises(NotImplementedError, match="forward-mode AD"):
            cpp["unfold"](dual, [3, 3, 1, 1, 1, 1, 1, 1, 1, 1])
        y = dml.unfold(dual, 3, 1, 1, 1, 1)           # the array API: exact forward-mode AD, eagerly
        assert torch.equal(fwad.unpack_dual(y).tangent, dml.unfold(torch.ones_like(x), 3, 1, 1, 1, 1))


# -- the C++ window operators' packed schemas: one list argument that holds the operator's int lists
# one after another (the custom operators ``opendml::`` keep one argument per list)

#: (operator, array-API call of the same window, arguments after the tensor, input shape)
PACKED = [
    ("unfold", lambda x: dml.unfold(x, [2, 3], [1, 2], [2, 1], [1, 0], [0, 2]),
     ([2, 3], [1, 2], [2, 1], [1, 0], [0, 2]), (2, 3, 5, 4)),
    ("fold", lambda x: dml.fold(x, [5, 4], 3, 1, 1, 1, 1), ([5, 4], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
     (2, 27, 20)),
    ("slice", lambda x: dml.slice(x, [0, 1, 1, 0], [2, 2, 2, 2], [1, 1, 2, 3]),
     ([0, 1, 1, 0], [2, 2, 2, 2], [1, 1, 2, 3]), (2, 3, 5, 6)),
    ("slice1", lambda x: dml.slice1(x, [0, 0, 1, 0], [2, 3, 4, 5], [1, 1, -2, 2]),
     ([0, 0, 1, 0], [2, 3, 4, 5], [1, 1, -2, 2]), (2, 3, 5, 6)),
    ("slice_grad", lambda x: dml.slice_grad(x, [2, 3, 5, 6], [0, 0, 1, 0], [2, 3, 3, 5], [1, 1, -2, 2]),
     ([2, 3, 5, 6], [0, 0, 1, 0], [2, 3, 3, 5], [1, 1, -2, 2]), (2, 3, 2, 3)),
]
PACKED_IDS = [c[0] for c in PACKED]


def test_packed_schemas(cpp):
    want = {"unfold": "opendml_cpp::unfold(Tensor x, int[] args) -> Tensor",
            "fold": "opendml_cpp::fold(Tensor x, SymInt[] args) -> Tensor",
            "slice": "opendml_cpp::slice(Tensor x, SymInt[] args) -> Tensor",
            "slice1": "opendml_cpp::slice1(Tensor x, SymInt[] args) -> Tensor",
            "slice_grad": "opendml_cpp::slice_grad(Tensor grad, SymInt[] args) -> Tensor"}
    for name, schema in want.items():
        assert str(getattr(torch.ops.opendml_cpp, name).default._schema) == schema
        assert cpp[name] is getattr(torch.ops.opendml_cpp, name).default
        # the custom operators keep their schemas: one argument per list
        assert str(getattr(torch.ops.opendml, name).default._schema) == f"opendml::{name}{adapter._SCHEMAS[name]}"


@pytest.mark.parametrize("name,fn,args,shape", PACKED, ids=PACKED_IDS)
def test_packed_operators_called_directly_equal_the_array_api(cpp, name, fn, args, shape):
    op = getattr(torch.ops.opendml_cpp, name).default
    for dtype in (torch.float32, torch.float64):
        x = _x(*shape, dtype=dtype)
        want = fn(x)
        for _ in range(3):                   # the call cache serves the repeats: the same bytes
            assert torch.equal(op(x, _pack(args)), want)
        with torch.inference_mode():
            assert torch.equal(op(x, _pack(args)), want)
        assert torch.equal(op(x, tuple(_pack(args))), want)
        # under autograd: the gradient of the array API's
        xg = x.clone().requires_grad_(True)
        y = op(xg, _pack(args))
        assert type(y.grad_fn).__name__ == f"opendml_{name}Backward"
        (g,) = torch.autograd.grad(y.square().sum(), xg)
        xe = x.clone().requires_grad_(True)
        (ge,) = torch.autograd.grad(fn(xe).square().sum(), xe)
        assert torch.equal(y, want) and torch.equal(g, ge)


@pytest.mark.parametrize("name,fn,args,shape", PACKED, ids=PACKED_IDS)
def test_a_wrong_packed_length_raises_a_clear_error(cpp, name, fn, args, shape):
    op = getattr(torch.ops.opendml_cpp, name).default
    k = len(args)
    x = _x(*shape)
    for packed in (_pack(args)[:-1], _pack(args) + [1], [1] * (k + 1)):
        message = (f"opendml_cpp::{name}: args packs {k} lists of one length, one after another: its length "
                   f"must be a multiple of {k}, not {len(packed)}")
        for t in (x, x.clone().requires_grad_(True), x.to("meta")):     # CPU kernel, Autograd kernel, fake
            with pytest.raises(ValueError) as info:
                op(t, packed)
            assert str(info.value) == message
        with torch.inference_mode(), pytest.raises(ValueError, match="must be a multiple of"):
            op(x, packed)
        with pytest.raises(ValueError, match="must be a multiple of"):
            torch.func.vmap(lambda t: op(t, packed))(torch.stack([x, x]))
        torch._dynamo.reset()
        with pytest.raises(Exception) as info:       # Dynamo wraps the fake kernel's error
            torch.compile(lambda t: op(t, packed), fullgraph=True, backend="aot_eager")(x)
        assert "ValueError" in str(info.value) and message in str(info.value)
    # the operator still serves right calls afterwards
    assert torch.equal(op(x, _pack(args)), fn(x))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("name,fn,args,shape", PACKED, ids=PACKED_IDS)
def test_packed_operators_compiled_with_backward_equal_eager(cpp, name, fn, args, shape, backend):
    op = getattr(torch.ops.opendml_cpp, name).default
    packed = _pack(args)
    torch._dynamo.reset()
    for call in (lambda t: op(t, packed).square(), lambda t: fn(t).square()):
        compiled = torch.compile(call, fullgraph=True, backend=backend)
        x = _x(*shape, dtype=torch.float32).requires_grad_(True)
        got = compiled(x)
        (g,) = torch.autograd.grad(got.sum(), x)
        xe = x.detach().clone().requires_grad_(True)
        want = fn(xe).square()
        (ge,) = torch.autograd.grad(want.sum(), xe)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        torch.testing.assert_close(g, ge, rtol=0, atol=0)
    assert dmlt.compiled_route() == "opendml_cpp"


def test_the_compiled_graph_calls_the_packed_operators(cpp):
    x = _x(2, 3, 6, 5, dtype=torch.float32).requires_grad_(True)
    y, fw, bw = _compiled_graph(lambda t: dml.unfold(t, 3, 1, 1, 1, 1), x)
    assert "torch.ops.opendml_cpp.unfold.default(primals_1, [3, 3, 1, 1, 1, 1, 1, 1, 1, 1])" in fw, fw
    assert "torch.ops.opendml_cpp.fold.default(" in bw and "[6, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1]" in bw, bw
    y, fw, bw = _compiled_graph(lambda t: dml.slice1(t, [0, 0, 1, 0], [2, 3, 4, 5], [1, 1, -2, 2]),
                                _x(2, 3, 5, 6, dtype=torch.float32).requires_grad_(True))
    assert "torch.ops.opendml_cpp.slice1.default(primals_1, [0, 0, 1, 0, 2, 3, 4, 5, 1, 1, -2, 2])" in fw, fw
    assert "torch.ops.opendml_cpp.slice_grad.default(" in bw, bw


def test_call_op_packs_for_the_cpp_table_only(cpp):
    lists = ([3, 3], [1, 1], [1, 1], [1, 1], [1, 1])
    assert adapter.bind_op(cpp, "unfold", lists) == (cpp["unfold"], ([3, 3, 1, 1, 1, 1, 1, 1, 1, 1],))
    assert adapter.bind_op(adapter._CUSTOM, "unfold", lists) == (adapter._CUSTOM["unfold"], lists)
    # lists of different lengths (no packed list holds them): the custom operator and its validation
    odd = ([3, 3], [1], [1, 1], [1, 1], [1, 1])
    assert adapter.bind_op(cpp, "unfold", odd) == (adapter._CUSTOM["unfold"], odd)
    x = _x(1, 1, 4, 4)
    with pytest.raises(dml.ValidationError) as via:
        adapter.call_op(cpp, "unfold", x, *odd)
    with pytest.raises(dml.ValidationError) as custom:
        adapter._CUSTOM["unfold"](x, *odd)
    assert str(via.value) == str(custom.value)
    assert torch.equal(adapter.call_op(cpp, "unfold", x, *lists), adapter.call_op(adapter._CUSTOM, "unfold", x, *lists))


# -- the C++ operators' argument lists (run_op reuses the int list it made for an argument
# when the next call's ints are the same; the answers and errors must be those of fresh lists)

#: unfold arguments, alternated so that each argument's reused list is sometimes kept, sometimes
#: replaced (other values, another length, values past 32 bits), and some calls are errors.
_UNFOLD_ARGS = [
    ([3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
    ([2, 3], [1, 2], [2, 1], [1, 0], [0, 2]),
    ([3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
    ([3, 3], [2, 2], [1, 1], [1, 1], [1, 1]),
    ([5, 1], [1, 1], [1, 1], [0, 0], [0, 0]),             # ValidationError: the window does not fit
    ([3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
    ([3, 3, 1], [1, 1, 1], [1, 1, 1], [1, 1, 0], [1, 1, 0]),   # another length: an error for a 4-D input
    ([3, 3], [1, 1], [1, 1], [2 ** 40, 1], [1, 1]),       # past 32 bits: an error
    ([3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
    ([1, 1], [1, 1], [1, 1], [0, 0], [0, 0]),
    ([3, 3], [1, 1], [1, 1], [-1, 1], [1, 1]),            # negative padding: an error
    ([1, 1], [1, 1], [1, 1], [0, 0], [0, 0]),
]


def _outcome(f, *args):
    """A call's result (dtype, shape, strides, bytes) or its error (type, message)."""
    try:
        y = f(*args)
    except Exception as e:                 # noqa: BLE001 - compared between routes
        return type(e), str(e)
    return y.dtype, tuple(y.shape), y.stride(), y.contiguous().view(torch.uint8).numpy().tobytes()


def _plain(x, args):
    """The same call with lists of its own (the custom operator: the Python kernel, then the call cache)."""
    return _outcome(adapter._CUSTOM["unfold"], x, *[list(a) for a in args])


def test_reused_argument_lists_give_the_answers_and_errors_of_fresh_ones(cpp):
    x = _x(2, 3, 7, 6, dtype=torch.float32)
    want = [_plain(x, a) for a in _UNFOLD_ARGS]
    assert any(isinstance(w[0], type) for w in want) and any(not isinstance(w[0], type) for w in want)
    for _ in range(3):
        for a, w in zip(_UNFOLD_ARGS, want):
            assert _outcome(cpp["unfold"], x, _pack(a)) == w, a
        for a, w in zip(_UNFOLD_ARGS[::-1], want[::-1]):
            assert _outcome(cpp["unfold"], x, _pack(a)) == w, a
    # the caller's list is the caller's: changing it changes nothing the operator kept
    packed = _pack(_UNFOLD_ARGS[0])
    assert _outcome(cpp["unfold"], x, packed) == want[0]
    packed[0] = 5
    assert _outcome(cpp["unfold"], x, packed) == _plain(x, adapter._unpack("unfold", packed))
    assert _outcome(cpp["unfold"], x, _pack(_UNFOLD_ARGS[0])) == want[0]
    # slice1 (negative strides) and slice_grad through the same operands
    s_args = ([0, 0, 1, 0], [2, 3, 4, 5], [1, 1, -2, 2])
    y = cpp["slice1"](x, _pack(s_args))
    assert _outcome(cpp["slice1"], x, _pack(s_args)) == _outcome(adapter._CUSTOM["slice1"], x, *s_args)
    g_args = ([2, 3, 7, 6], *s_args)
    assert _outcome(cpp["slice_grad"], y, _pack(g_args)) == _outcome(adapter._CUSTOM["slice_grad"], y, *g_args)


@pytest.mark.parametrize("settings", [dict(cpu_kernels="numpy"), dict(threads=1), dict(call_cache=False),
                                      dict(unfold_tile_columns=8)], ids=lambda s: next(iter(s)))
def test_reused_argument_lists_after_configure(cpp, settings):
    x = _x(2, 3, 7, 6, dtype=torch.float32)
    want = [_plain(x, a) for a in _UNFOLD_ARGS]
    for a, w in zip(_UNFOLD_ARGS, want):
        assert _outcome(cpp["unfold"], x, _pack(a)) == w, a
    with dml.configure(**settings):
        for a in _UNFOLD_ARGS:
            assert _outcome(cpp["unfold"], x, _pack(a)) == _plain(x, a), (settings, a)
    for a, w in zip(_UNFOLD_ARGS, want):
        assert _outcome(cpp["unfold"], x, _pack(a)) == w, a


def test_reused_argument_lists_under_threads(cpp):
    # outputs of 64 KiB and more: the call cache runs their kernels without the GIL, so the
    # threads' calls interleave while each other's lists are kept or replaced
    xs = [_x(2, 4, 24, 24, dtype=torch.float32) * (k + 1) for k in range(4)]
    want = {(i, j): _plain(xs[i], a) for i in range(len(xs)) for j, a in enumerate(_UNFOLD_ARGS)}
    errors = []

    def work(k):
        try:
            for r in range(30):
                i = (k + r) % len(xs)
                order = range(len(_UNFOLD_ARGS)) if (k + r) % 2 else range(len(_UNFOLD_ARGS) - 1, -1, -1)
                for j in order:
                    assert _outcome(cpp["unfold"], xs[i], _pack(_UNFOLD_ARGS[j])) == want[i, j], (i, j)
        except BaseException as e:         # noqa: BLE001 - reported by the main thread
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.parametrize("name,fn,args,shape", PACKED, ids=PACKED_IDS)
def test_forward_ad_through_the_window_custom_operators_is_exact(name, fn, args, shape):
    """A raw call of ``opendml::unfold``, ``fold``, ``slice``, ``slice1`` and ``slice_grad``
    (``opendml.torch.<name>_op``) under ``torch.func.jvp``, ``forward_ad``, ``vmap`` of ``jvp`` and reverse
    mode over the tangent: the tangent is the operator on the tangent (each is linear in its tensor). Defined with
    ``torch.library.custom_op``, which has no forward-mode rule, they gave a zero tangent silently (and a dual
    tensor that requires grad an error)."""
    import torch.autograd.forward_ad as fwad
    op = getattr(dmlt, f"{name}_op")
    x = _x(*shape)
    t = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    y, tangent = torch.func.jvp(lambda v: op(v, *args), (x,), (t,))
    assert torch.equal(y, fn(x)) and torch.equal(tangent, fn(t))
    with fwad.dual_level():
        out = fwad.unpack_dual(op(fwad.make_dual(x, t), *args))
    assert torch.equal(out.primal, fn(x)) and torch.equal(out.tangent, fn(t))
    got = torch.func.vmap(lambda u: torch.func.jvp(lambda v: op(v, *args), (x,), (u,))[1])(torch.stack([t, 2 * t]))
    assert torch.equal(got, torch.stack([fn(t), fn(2 * t)]))
    # reverse mode over the forward mode: the tangent's gradient is the operator's adjoint, the primal's none
    w, p = t.clone().requires_grad_(True), x.clone().requires_grad_(True)
    with fwad.dual_level():
        out = fwad.unpack_dual(op(fwad.make_dual(p, w), *args))
    r = torch.randn(out.tangent.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    got_w, got_p = torch.autograd.grad((out.tangent * r).sum(), (w, p), allow_unused=True)
    (want,) = torch.autograd.grad((fn(w) * r).sum(), w)
    assert torch.equal(got_w, want) and got_p is None
    # (``opendml.torch.<name>_op`` is the operator's overload: ``library.define``'s, not a ``CustomOpDef``)
    assert op is adapter._CUSTOM[name] is getattr(torch.ops.opendml, name).default


def test_compiled_status_names_the_operators_the_next_trace_takes(cpp):
    """Can fail: in a fresh process whose node library was loaded (``wait_for_node``) before any trace,
    ``compiled_status`` said the custom operators (the C++ ones are registered at the first trace), and the
    next trace took ``opendml_cpp``."""
    code = """if True:
        import torch, opendml as dml, opendml.torch as t
        with dml.configure(torch_node="wait"):
            assert t.wait_for_node(), t.node_status()
            print(t.compiled_status())
            torch.compile(lambda x: dml.unfold(x, 3), backend="aot_eager")(torch.ones(1, 1, 4, 4))
            print(t.compiled_route())
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["C++ dispatcher operators (opendml_cpp::)", "opendml_cpp"], out.stdout
