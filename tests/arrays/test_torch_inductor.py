"""Inductor's direct calls of the C++ window operators (``arrays/torch/inductor.py``):
the direct kernels give the operator's bytes and errors on every route a call
can take (first call, served repeat, requires_grad, no_grad, inference mode,
dispatch modes, forward AD, wrong packed lengths, after ``configure()``,
under threads), and Inductor's Python wrapper calls them, with compiled
results (forward and backward) equal to eager ones."""
from __future__ import annotations

import os
import shutil
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import opendml as dml  # noqa: E402
import opendml.torch as dmlt  # noqa: E402
from opendml.arrays.torch import adapter, library  # noqa: E402
from opendml.arrays.torch import inductor as torch_inductor  # noqa: E402
from opendml.arrays.torch import node as torch_node  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]

#: (name, array API call, its lists, input shape)
CASES = [
    ("unfold", lambda x: dml.unfold(x, [2, 3], [1, 2], [2, 1], [1, 0], [0, 2]),
     ([2, 3], [1, 2], [2, 1], [1, 0], [0, 2]), (2, 3, 5, 4)),
    ("fold", lambda x: dml.fold(x, [6, 5], 3, 1, 1, 1, 1), ([6, 5], [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
     (2, 27, 30)),
    ("slice1", lambda x: dml.slice1(x, [0, 0, 1, 0], [2, 3, 4, 5], [1, 1, -2, 2]),
     ([0, 0, 1, 0], [2, 3, 4, 5], [1, 1, -2, 2]), (2, 3, 5, 6)),
    ("slice_grad", lambda x: dml.slice_grad(x, [2, 3, 5, 6], [0, 0, 1, 0], [2, 3, 4, 5], [1, 1, -2, 2]),
     ([2, 3, 5, 6], [0, 0, 1, 0], [2, 3, 4, 5], [1, 1, -2, 2]), (2, 3, 2, 3)),
]
IDS = [c[0] for c in CASES]


@pytest.fixture(scope="module")
def cpp():
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        pytest.skip("no C++ compiler here: the custom operators serve")
    with dml.configure(torch_node="wait"):
        assert torch_node.wait(), torch_node.status()
        ops = adapter.operators()
    assert ops is not adapter._CUSTOM, dmlt.compiled_status()
    return ops


def _device(device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("CUDA is not available here")
    return device


def _x(shape, device="cpu", dtype=torch.float32):
    return (torch.arange(int(np.prod(shape)), dtype=dtype, device=device).reshape(shape) * 0.5 - 3)


def _pack(lists):
    return [v for part in lists for v in part]


def _direct(name):
    return getattr(torch.ops.opendml_cpp, torch_inductor.PREFIX + name)


def _outcome(fn, *args):
    """(bytes and grad_fn name, or the error's type and message) of fn(*args)."""
    try:
        y = fn(*args)
    except Exception as e:  # noqa: BLE001 - compared below
        return ("error", type(e), str(e))
    return ("ok", y.dtype, tuple(y.shape), y.detach().cpu().numpy().tobytes(), type(y.grad_fn).__name__)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,fn,lists,shape", CASES, ids=IDS)
def test_direct_kernels_equal_the_operator(cpp, name, fn, lists, shape, device):
    device = _device(device)
    op, direct = cpp[name], _direct(name)
    packed = _pack(lists)
    for dtype in (torch.float32, torch.float64, torch.int16):
        x = _x(shape, device, dtype)
        want = _outcome(op, x, packed)
        assert want[0] == "ok"
        for _ in range(3):                   # a first call, then the call cache's repeats
            assert _outcome(direct, x, packed) == want
        assert _outcome(direct, x, tuple(packed)) == want
        with torch.no_grad():
            assert _outcome(direct, x, packed) == _outcome(op, x, packed)
        with torch.inference_mode():
            assert _outcome(direct, x, packed) == _outcome(op, x, packed)
        if dtype.is_floating_point:          # requires_grad: the operator records its node
            xg = x.clone().requires_grad_(True)
            got = _outcome(direct, xg, packed)
            assert got == _outcome(op, xg, packed) and got[-1] == f"opendml_{name}Backward"
            with torch.no_grad():
                assert _outcome(direct, xg, packed) == _outcome(op, xg, packed)


@pytest.mark.parametrize("name,fn,lists,shape", CASES, ids=IDS)
def test_direct_kernels_raise_the_operators_errors(cpp, name, fn, lists, shape):
    op, direct = cpp[name], _direct(name)
    x = _x(shape)
    k = len(lists)
    bad = [
        _pack(lists)[:-1],                                    # not a multiple of k
        _pack(lists) + [1] * k,                               # lists one longer than the rank
        [10 ** 6] * len(_pack(lists)),                        # far outside the input
        [-1] * len(_pack(lists)),
        [],
    ]
    kind, error, message = _outcome(op, x, bad[0])
    assert (kind, error) == ("error", ValueError)
    assert message.endswith(f"its length must be a multiple of {k}, not {len(bad[0])}"), message
    for packed in bad:
        want = _outcome(op, x, packed)
        assert want[0] == "error", packed
        for _ in range(2):
            assert _outcome(direct, x, packed) == want
    for t in (x.bfloat16(), x.to(torch.bool)):
        assert _outcome(direct, t, _pack(lists)) == _outcome(op, t, _pack(lists))
        assert _outcome(op, t, _pack(lists))[0] == "error"


class _Seen(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops, self.calls = [], []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        self.calls.append((func, args))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name,fn,lists,shape", CASES, ids=IDS)
def test_dispatch_modes_and_forward_ad_see_the_operator(cpp, name, fn, lists, shape):
    op, direct = cpp[name], _direct(name)
    x, packed = _x(shape), _pack(lists)
    direct(x, packed)
    direct(x, packed)                        # recorded: the call cache would serve it
    with _Seen() as mode:
        y = direct(x, packed)
    assert mode.ops == [f"opendml_cpp.{name}.default"] and torch.equal(y, op(x, packed))
    import torch.autograd.forward_ad as fwad
    with fwad.dual_level():
        dual = fwad.make_dual(x, torch.ones_like(x))
        with pytest.raises(NotImplementedError) as a:
            op(dual, packed)
        with pytest.raises(NotImplementedError) as b:
            direct(dual, packed)
        assert str(a.value) == str(b.value)


@pytest.mark.parametrize("settings", [{"call_cache": False}, {"torch_node": "off"}, {"cpu_kernels": "numpy"}])
def test_direct_kernels_after_configure(cpp, settings):
    name, fn, lists, shape = CASES[0]
    x, packed = _x(shape), _pack(lists)
    want = _outcome(cpp[name], x, packed)
    _direct(name)(x, packed)
    try:
        with dml.configure(**settings):
            assert _outcome(_direct(name), x, packed) == _outcome(cpp[name], x, packed) == want
    except dml.ValidationError as e:         # a setting this build does not take
        pytest.skip(str(e))
    assert _outcome(_direct(name), x, packed) == want


def test_direct_kernels_under_threads(cpp):
    def case(i):
        name, fn, lists, shape = CASES[i % len(CASES)]
        x, packed = _x(shape) + i, _pack(lists)
        return [cpp[name](x, packed)], lambda: [_direct(name)(x, packed)]
    _same_in_threads(case)


def _same_in_threads(case) -> None:
    """On 8 threads at once, thread ``i`` takes ``want, run = case(i)`` and calls ``run()`` 50 times: every
    call must give ``want``'s tensors (a list) and none may raise."""
    errors, results = [], {}

    def work(i):
        try:
            want, run = case(i)
            ok = all(all(torch.equal(a, b) for a, b in zip(run(), want)) for _ in range(50))
            results[i] = "same" if ok else "differs"
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and set(results.values()) == {"same"}, (errors, results)


def _compiled_code(fn, *args):
    from torch._inductor.utils import run_and_get_code
    torch._dynamo.reset()
    with torch._inductor.config.patch(force_disable_caches=True):
        result, code = run_and_get_code(fn, *args)
    return result, "\n".join(code)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,fn,lists,shape", CASES, ids=IDS)
def test_inductor_wrapper_calls_the_direct_kernels(cpp, name, fn, lists, shape, device):
    device = _device(device)
    x = _x(shape, device).requires_grad_(True)
    compiled = torch.compile(lambda t: fn(t).square(), fullgraph=True)

    def step(t):
        y = compiled(t)
        (g,) = torch.autograd.grad(y.sum(), t)
        return y, g
    (y, g), code = _compiled_code(step, x)
    assert torch_inductor.status() == "on"
    assert f"torch.ops.opendml_cpp._direct_{name}(" in code, code
    assert f"torch.ops.opendml_cpp.{name}.default(" not in code, code
    xe = x.detach().clone().requires_grad_(True)
    ye = fn(xe).square()
    (ge,) = torch.autograd.grad(ye.sum(), xe)
    assert torch.equal(y, ye) and torch.equal(g, ge)
    for _ in range(3):                       # served repeats: the same bytes
        y2, g2 = step(x)
        assert torch.equal(y2, ye) and torch.equal(g2, ge)


@pytest.mark.parametrize("device", DEVICES)
def test_inductor_layer_equals_eager(cpp, device):
    device = _device(device)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 10, 10, generator=gen).to(device)
    w = torch.randn(8, 36, generator=gen).to(device)

    def layer(t, wt):
        return wt @ dml.unfold(t, 3, 1, 1, 1, 1)
    compiled = torch.compile(layer, fullgraph=True)
    got, code = _compiled_code(compiled, x, w)
    assert "torch.ops.opendml_cpp._direct_unfold(" in code, code
    assert torch.equal(got, layer(x, w))
    for _ in range(3):
        assert torch.equal(compiled(x, w), got)
    # a call the compiled graph was not traced for (another shape) recompiles and stays right
    x2 = torch.randn(1, 4, 7, 9, generator=gen).to(device)
    assert torch.equal(compiled(x2, w), layer(x2, w))


@pytest.mark.parametrize("name,fn,lists,shape", CASES, ids=IDS)
def test_without_call_cache_packed_the_direct_kernel_is_the_operator(cpp, name, fn, lists, shape, monkeypatch):
    """Without the compiled call cache (no call_cache_packed; ``calls.call`` then serves nothing) the direct
    kernel is the operator itself: the same answers and errors, no step of its own."""
    spec, split = library.CPP_DEFS[name][1], library.CPP_DEFS[name][7]
    monkeypatch.setattr(torch_inductor, "_packed", None)
    assert torch_inductor.direct_kernel(cpp[name], spec, split) is cpp[name]


def test_call_cache_packed_checks_its_own_arguments(cpp):
    from opendml.runtime import calls
    if calls.packed is None:
        pytest.skip("no compiled call cache here")
    op = cpp["unfold"]
    x = _x((1, 1, 4, 4))
    code = calls.OPS["unfold"]
    with pytest.raises(TypeError, match="takes 6 arguments"):
        calls.packed(code, 5, op, (), x)
    with pytest.raises(TypeError, match="extra a tuple"):
        calls.packed(code, 5, op, [], x, [3, 3, 1, 1, 1, 1, 1, 1, 1, 1])
    for split in (0, 9, -1):
        with pytest.raises(ValueError, match="split must be in"):
            calls.packed(code, split, op, (), x, [3, 3, 1, 1, 1, 1, 1, 1, 1, 1])
    # anything but a tensor and a list or tuple goes to the fallback as it is
    seen = []
    assert calls.packed(code, 5, lambda *a: seen.append(a) or "fallback", (), "x", [1] * 10) == "fallback"
    assert calls.packed(code, 5, lambda *a: "fallback", (), x, iter([1] * 10)) == "fallback"
    assert seen == [("x", [1] * 10)]


# -- the move operators (every other family function, traced as opendml_cpp::move or opendml::move) ----------

def _gather_indices(device="cpu"):
    return (torch.arange(2 * 3 * 4, device=device).reshape(2, 3, 4) * 7 % 5).to(torch.int64)


#: (name, array API call, its inputs' shapes and dtypes): one description each, traced as a move operator
MOVE_CASES = [
    ("pad", lambda x: dml.pad(x, [0, 1, 2], [1, 0, 3], "reflect"), [((2, 4, 5), torch.float32)]),
    ("tile", lambda x: dml.tile(x, [2, 1, 3]), [((2, 3, 4), torch.float32)]),
    ("join", lambda a, b: dml.join([a, b], 1), [((2, 1, 3), torch.float32), ((2, 4, 3), torch.float32)]),
    ("split", lambda x: dml.split(x, -1, [1, 3, 2]), [((2, 3, 6), torch.float32)]),
    ("cast", lambda x: dml.cast(x, np.float64), [((3, 5), torch.float32)]),
    ("identity", lambda x: dml.identity(x, 2.5, -1.0), [((2, 3, 4), torch.float32)]),
    ("space_to_depth", lambda x: dml.space_to_depth(x, 2, "CRD"), [((2, 3, 4, 6), torch.float32)]),
    # (unchecked: a traced checked call takes opendml::family, which runs the function and so checks its indices)
    ("gather", lambda x, i: dml.gather(x, i, 2, check_indices=False),
     [((2, 3, 5), torch.float32), ((2, 3, 4), torch.int64)]),
]
MOVE_IDS = [c[0] for c in MOVE_CASES]
#: Those the call cache serves on repeats (an index program is recorded by the index functions' own route only:
#: the operator runs a traced gather each time)
SERVED = set(MOVE_IDS) - {"gather"}


def _move_inputs(specs, device="cpu"):
    return [_gather_indices(device) if dtype == torch.int64 else _x(shape, device, dtype) for shape, dtype in specs]


def _traced_move(fn, xs):
    """The move operator, its inputs and its description text in ``fn``'s one call on ``xs`` (under a
    dispatch mode: a traced call)."""
    with _Seen() as mode:
        fn(*xs)
    ((op, (inputs, text)),) = [(f, args) for f, args in mode.calls if "move" in str(f)]
    return op, list(inputs), text


def _direct_move(op):
    return getattr(getattr(torch.ops, op.namespace), torch_inductor.PREFIX + "move")


def _outcomes(fn, *args):
    """``_outcome`` of a call returning a list of tensors."""
    try:
        ys = fn(*args)
    except Exception as e:  # noqa: BLE001 - compared below
        return ("error", type(e), str(e))
    return ("ok", type(ys), [_outcome(lambda: y) for y in ys])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,fn,specs", MOVE_CASES, ids=MOVE_IDS)
def test_the_move_direct_kernel_equals_the_operator(cpp, name, fn, specs, device):
    from opendml.runtime import calls
    device = _device(device)
    given = _move_inputs(specs, device)
    op, xs, text = _traced_move(fn, given)
    assert op is (torch.ops.opendml.move.default if name == "gather" else cpp["move"])
    direct = _direct_move(op)
    assert direct.__name__ == "_direct_move"
    want = _outcomes(op, xs, text)
    eager = fn(*given)
    eager = eager if isinstance(eager, list) else [eager]
    assert want[0] == "ok" and [o[3] for o in want[2]] == [o.cpu().numpy().tobytes() for o in eager]
    calls.clear()
    hits = calls.info()["hits"]
    for _ in range(3):                       # a first call (recorded), then the call cache's repeats
        assert _outcomes(direct, xs, text) == want
    if calls.info()["enabled"] and name in SERVED:
        assert calls.info()["hits"] == hits + 2
    # a non-contiguous input and a negative view: their own entries, or the operator
    big = xs[0].new_zeros(*xs[0].shape[:-1], 2 * xs[0].shape[-1])
    big[..., ::2] = xs[0]
    odd = [big[..., ::2], *xs[1:]]
    assert not odd[0].is_contiguous()
    for inputs in (odd, [torch._neg_view(-xs[0]), *xs[1:]]):
        for _ in range(2):
            assert _outcomes(direct, inputs, text) == want
    with torch.no_grad():
        assert _outcomes(direct, xs, text) == want
    # a tensor that requires grad: the operator records its node
    xg = [xs[0].clone().requires_grad_(True), *xs[1:]]
    got = _outcomes(direct, xg, text)
    assert got == _outcomes(op, xg, text) and got[2][0][-1] != "NoneType"
    with torch.no_grad():
        for _ in range(2):
            assert _outcomes(direct, xg, text) == _outcomes(op, xg, text) == want
    with _Seen() as seen:                   # a dispatch mode sees the operator's calls
        assert _outcomes(op, xs, text) == want
    with _Seen() as mode:
        assert _outcomes(direct, xs, text) == want
    assert mode.ops == seen.ops and mode.ops[0] == str(op)


@pytest.mark.parametrize("name,fn,specs", MOVE_CASES, ids=MOVE_IDS)
def test_the_move_direct_kernel_raises_the_operators_errors(cpp, name, fn, specs):
    op, xs, text = _traced_move(fn, _move_inputs(specs))
    direct = _direct_move(op)
    direct(xs, text)
    direct(xs, text)                          # recorded: the call cache would serve it
    bad = [
        ([x.double() for x in xs], text),                     # another dtype
        ([x[..., :1] for x in xs], text),                     # other sizes
        (xs[:-1] if len(xs) > 1 else [], text),               # too few inputs
        ([*xs, xs[0]], text),                                 # too many
        (xs, text.replace('"Sizes":[', '"Sizes":[1,', 1)),    # a description of other sizes
        (xs, text[:-2]),                                      # not JSON
        (xs, "@nowhere:0"),                                   # an unknown key
        (xs, 5),                                              # not a str
        (xs[0], text),                                        # not a list
    ]
    for inputs, desc in bad:
        want = _outcomes(op, inputs, desc)
        assert want[0] == "error", (inputs, desc)
        for _ in range(2):
            assert _outcomes(direct, inputs, desc) == want
    import torch.autograd.forward_ad as fwad
    with fwad.dual_level():
        dual = [fwad.make_dual(xs[0], torch.ones_like(xs[0])), *xs[1:]]
        got = _outcomes(direct, dual, text)
        assert got == _outcomes(op, dual, text)


def test_cpp_wrapper_refuses_the_move_operator_by_name(cpp):
    """Inductor's C++ wrapper cannot call ``move`` (it embeds the JSON text unescaped and reads the list of
    outputs as one tensor: a C++ compile error, or a crash): the lowering says so, naming the operator and
    what to do, before any C++ is written; the first five's packed operators still compile there."""
    x = _x((1, 4, 6, 5))
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"C\+\+ wrapper \(cpp_wrapper, AOTInductor\) cannot call opendml's move "
                                        r"operator .* compile this graph with Inductor's Python wrapper"):
        torch.compile(lambda t: dml.tile(t, [1, 1, 2, 1]), options={"cpp_wrapper": True})(x)
    if shutil.which("g++") or shutil.which("c++"):
        got = torch.compile(lambda t: dml.slice1(t, [0, 0, 0, 0], [1, 4, 6, 5], [1, 1, -1, 1]),
                            options={"cpp_wrapper": True})(x)
        assert torch.equal(got, x.flip(2))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["pad", "tile", "join", "gather"])
def test_inductor_wrapper_calls_the_move_direct_kernel(cpp, name, device):
    from opendml.runtime import calls
    device = _device(device)
    _, fn, specs = MOVE_CASES[MOVE_IDS.index(name)]
    xs = _move_inputs(specs, device)
    compiled = torch.compile(fn)
    got, code = _compiled_code(compiled, *xs)
    ns = "opendml" if name == "gather" else "opendml_cpp"
    assert torch_inductor.status() == "on"
    assert f"torch.ops.{ns}._direct_move(" in code, code
    assert f"torch.ops.{ns}.move.default(" not in code, code
    want = fn(*xs)
    assert torch.equal(got, want)
    hits = calls.info()["hits"]
    for _ in range(3):                       # served repeats: the same bytes, from the call cache
        assert torch.equal(compiled(*xs), want)
    if calls.info()["enabled"] and name in SERVED:
        assert calls.info()["hits"] >= hits + 3


@pytest.mark.parametrize("settings", [{"call_cache": False}, {"torch_node": "off"}, {"cpu_kernels": "numpy"}])
def test_the_move_direct_kernel_after_configure(cpp, settings):
    _, fn, specs = MOVE_CASES[0]
    op, xs, text = _traced_move(fn, _move_inputs(specs))
    direct = _direct_move(op)
    want = _outcomes(op, xs, text)
    direct(xs, text)
    try:
        with dml.configure(**settings):
            for _ in range(2):
                assert _outcomes(direct, xs, text) == _outcomes(op, xs, text) == want
    except dml.ValidationError as e:         # a setting this build does not take
        pytest.skip(str(e))
    assert _outcomes(direct, xs, text) == want


def test_the_move_direct_kernel_under_threads(cpp):
    cases = [(fn, *_traced_move(fn, _move_inputs(specs))) for name, fn, specs in MOVE_CASES if name in SERVED]

    def case(i):
        fn, op, xs, text = cases[i % len(cases)]
        xs = [xs[0] + i, *xs[1:]]
        direct = _direct_move(op)
        return op(xs, text), lambda: direct(xs, text)
    _same_in_threads(case)


def test_the_move_direct_kernel_under_threads_while_texts_are_forgotten(cpp, monkeypatch):
    """Eight threads, each with its own description, under a limit of two texts: every call records its text
    and evicts another's, and every answer stays the operator's."""
    x = _x((2, 3, 7))
    monkeypatch.setattr(library, "_MAX_RECORDED", 2)
    cases = [_traced_move(lambda t, r=r: dml.tile(t, [1, r, 2]), [x]) for r in range(1, 9)]
    assert len(library._CALLS) <= 2

    def case(i):
        op, xs, text = cases[i]
        return op(xs, text), lambda: _direct_move(op)(xs, text)
    _same_in_threads(case)
    assert len(library._CALLS) <= 2


def test_a_description_past_the_limit_forgets_the_oldest(cpp, monkeypatch):
    """At ``_MAX_RECORDED`` texts a new description is still recorded and served: the oldest text is forgotten,
    with its code, so nothing recorded under that code is served again, and the answers stay the operator's."""
    from opendml.runtime import calls
    x = _x((2, 3, 7))
    op, xs, text = _traced_move(lambda t: dml.tile(t, [3, 1, 2]), [x])
    _direct_move(op)(xs, text)
    assert text in library._CALLS
    library._CALLS[text] = library._CALLS.pop(text)          # (the newest: the fresh one evicts another first)
    monkeypatch.setattr(library, "_MAX_RECORDED", len(library._CALLS))
    fresh = text.replace('"Repeats":[3,1,2]', '"Repeats":[1,2,3]').replace('"Sizes":[6,3,14]', '"Sizes":[2,6,21]')
    assert fresh != text and fresh not in library._CALLS
    oldest = next(iter(library._CALLS))
    old_code = calls.OPS["opendml::move " + oldest]
    want = _outcomes(op, xs, fresh)
    assert want[0] == "ok" and want[2][0][2] == (2, 6, 21)
    assert fresh in library._CALLS and fresh in torch_inductor.MOVE_CODES
    assert len(library._CALLS) == library._MAX_RECORDED and oldest not in library._CALLS
    assert oldest not in torch_inductor.MOVE_CODES
    if oldest != text:
        assert calls.OPS["opendml::move " + oldest] != old_code       # a new code: the old one's entries unserved
    hits = calls.info()["hits"]
    for _ in range(3):
        assert _outcomes(_direct_move(op), xs, fresh) == want
    if calls.info()["enabled"]:
        assert calls.info()["hits"] >= hits + 3
    assert _outcomes(_direct_move(op), xs, text) == _outcomes(op, xs, text)


def test_operator_codes_are_never_given_out_twice():
    from opendml.runtime import calls
    a = calls.OPS["test::codes a"]
    calls.OPS.forget("test::codes a")
    b = calls.OPS["test::codes b"]
    assert calls.OPS["test::codes a"] not in (a, b) and b != a


def test_the_move_operators_cuda_record_holds_the_planned_layouts(monkeypatch):
    """The move operator's CUDA call is recorded with the layouts read before its launches were planned, as
    the adapter's are (``put_move_cuda`` refuses a record whose input changed in place meanwhile). Fake CUDA
    tensors stand in for a GPU: the launch itself is replaced."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    seen = []

    def cuda_move(desc, arrays, record=None):
        seen.append(record)
        return [torch.empty(tuple(t.sizes), dtype=arrays[0].dtype, device=arrays[0].device) for t in desc.outputs]
    monkeypatch.setattr(library, "cuda_move", cuda_move)
    x = _x((2, 3, 7))
    _, _, text = _traced_move(lambda t: dml.tile(t, [1, 2, 1]), [x])
    with FakeTensorMode(allow_non_fake_inputs=True):
        xc = torch.empty_strided((2, 3, 7), (7, 14, 1), device="cuda")      # (not packed)
        library._move([xc], text)
    (record,) = seen
    assert record is not None and record[3] == ((xc.shape, xc.stride()),)


def test_compile_caches_are_tagged_with_opendmls_sources(tmp_path):
    """A graph cached by another opendml is never loaded: the compile caches' key tag names opendml's
    sources, and a user's own tag stays in front of it."""
    import subprocess
    import sys

    ours = f"opendml-{torch_inductor._source_digest()}"
    assert ours in torch.compiler.config.cache_key_tag.split(";")
    torch_inductor._tag_compile_caches()                   # (once: a second call adds nothing)
    assert torch.compiler.config.cache_key_tag.split(";").count(ours) == 1
    env = dict(os.environ, TORCH_COMPILE_CACHE_KEY_TAG="mine")
    out = subprocess.run([sys.executable, "-c", "import opendml.torch, torch; print(torch.compiler.config.cache_key_tag)"],
                         env=env, capture_output=True, text=True, check=True).stdout.split()[-1]
    assert out == f"mine;{ours}"
    # the digest follows every source file (a copy of the package with one line changed digests apart)
    root = tmp_path / "opendml"
    shutil.copytree(os.path.dirname(dml.__file__), root, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    assert torch_inductor._source_digest(root) == ours[len("opendml-"):]
    with open(root / "ops" / "tile.py", "a") as f:
        f.write("\n# changed\n")
    assert torch_inductor._source_digest(root) != ours[len("opendml-"):]
