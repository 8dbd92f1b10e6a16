"""Every registered operator on every route (issue 31), and a gap fails.

The operators come from the registry (``opendml.ops.OPERATORS``), never from a
list here, and each operator's cases from one source:

* the array-API routes run the operator's declared example call (its
  ``BINDING``: the input shapes and arguments, loaded as
  ``tests/arrays/test_contract.py`` loads them); every result is compared
  byte for byte with the NumPy route's, and the NumPy route with the same
  description run through ``opendml.Device``;
* the description routes (the JSON form, ``opendml run``, ``Device``,
  DxDispatch) run the operator's bundled examples (``src/opendml/examples``,
  loaded as ``tests/test_engine_registry.py`` loads them) against the
  outputs the pages document.

Where a route does not apply, the operator's own declarations say so and this
file reads them: no ``BINDING`` (an operator a newer one replaces in the array
API) means no array-API route; ``linear_part()`` None means no derivative
for those types, and ``ADJOINT_INPUTS`` names the inputs (indices) that get
none. Gradients and tangents are checked exactly, against the Jacobian the
NumPy route gives column by column (the cases' values are small integers,
so every sum is exact).

Routes that do not work today are strict ``xfail``s (``KNOWN_GAPS``), each
with the assertion that fails: the suite stays green and each flips to a
failure when its gap is closed, so the entry must then be removed.

Counters (the call cache's hits, the operator modules' Python running during
a call) are read in one helper, ``observe``, so that a change of the engine's
internals touches one function here.
"""
from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import opendml as dml
from opendml import cli, jsonform
from opendml.ops import OPERATORS
from tests.arrays.test_contract import BOUND, FRAMEWORKS, example_inputs, host
from tests.arrays.test_contract import others as binding_others
from tests.conftest import cuda_available, native_available
from tests.test_engine_registry import _examples

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE_DIR = str(pathlib.Path(dml.__file__).parent) + os.sep
OPS_DIR = PACKAGE_DIR + "ops" + os.sep


# -- the one place this file reads the engine's counters -----------------------------------------------

def observe(fn):
    """Run ``fn()`` and return ``(its result, what the engine did meanwhile)``:
    ``hits`` and ``entries``, the call cache's served calls and new entries
    (``plan_cache_info()["call_cache"]``), ``ops`` the functions of the
    operator modules (``opendml/ops/``) that Python ran, ``plans`` those of
    them that make a description or a plan (``PLANNING``), and ``descs``
    the operator descriptions those functions ran on or opendml's functions
    returned (a plan cache's hit). A call served wholly in C (the call
    cache, a C new-shape lowering) makes no plan."""
    ops, descs = [], []
    kinds = tuple(OPERATORS.values())

    def seen(d):
        if isinstance(d, kinds) and all(d is not e for e in descs):
            descs.append(d)

    def profile(frame, event, arg):
        name = frame.f_code.co_filename
        if event == "call" and name.startswith(OPS_DIR):
            ops.append(frame.f_code.co_name)
            seen(frame.f_locals.get("self"))
        elif event == "return" and name.startswith(PACKAGE_DIR):
            for d in arg if type(arg) is tuple else (arg,):
                seen(d)

    before = _c_cache()
    old = sys.getprofile()
    sys.setprofile(profile)
    try:
        result = fn()
    finally:
        sys.setprofile(old)
    after = _c_cache()
    return result, {"hits": after["hits"] - before["hits"], "entries": after["entries"] - before["entries"],
                    "ops": ops, "plans": [f for f in ops if f in PLANNING], "descs": descs}


def _c_cache() -> dict:
    """Hits and entries of the C call cache (``plan_cache_info()["call_cache"]``)."""
    return dict(dml.plan_cache_info()["call_cache"])


#: The operator modules' functions that make a description or a plan: a
#: description's checks, its lowering, the description-free lowering.
PLANNING = ("__post_init__", "lower", "plain_lowering")


# -- the cases -----------------------------------------------------------------------------------------

class Case:
    """An operator's declared example call: ``arrays`` (NumPy) are its array
    argument(s) (``binding.inputs``) then its further arrays
    (``binding.others``: indices, updates...), ``run(arrays)`` calls the
    operator's array function on arrays of any framework and returns its
    outputs as a list."""

    def __init__(self, name, cls, binding):
        self.name, self.cls, self.binding = name, cls, binding
        self.main = len(binding.inputs)
        self.arrays = example_inputs(binding) + list(binding_others(binding).values())

    def run(self, arrays, args=None):
        """``args``: the arguments other than arrays, the binding's where None."""
        b = self.binding
        fn = getattr(dml, b.function)
        kw = {**(b.args if args is None else args), **dict(zip(b.others, arrays[self.main:]))}
        main = arrays[:self.main]
        out = fn(list(main), **kw) if b.array == "arrays" else fn(main[0], **kw)
        return list(out) if isinstance(out, (list, tuple)) else [out]

    @functools.cached_property
    def want(self) -> list[np.ndarray]:
        """The NumPy route's outputs."""
        return self.run(self.arrays)

    @functools.cached_property
    def desc(self):
        """The call's description, seen while the Python route (the NumPy
        kernels, no call cache) runs it."""
        with dml.configure(cpu_kernels="numpy", call_cache=False):
            _, seen = observe(lambda: self.run([a.copy() for a in self.arrays]))
        descs = [d for d in seen["descs"] if type(d) is self.cls]
        assert descs, f"{self.name}: the Python route ran no {self.cls.__name__}"
        return descs[-1]

    @functools.cached_property
    def positions(self) -> list[int]:
        """Each array's input position in the description (slot order)."""
        names = [n for n, _ in self.desc.named_tensors("input")]
        taken = [names.index(slot) for slot, _, _ in self.binding.others.values()]
        free = [i for i in range(len(names)) if i not in taken]
        return free[:self.main] + taken

    @functools.cached_property
    def differentiable(self) -> list[int]:
        """The arrays the operator declares a derivative for: none where
        ``linear_part()`` is None, else its float inputs but those
        ``ADJOINT_INPUTS`` names."""
        if self.desc.linear_part() is None:
            return []
        fixed = set(getattr(self.desc, "ADJOINT_INPUTS", ()))
        return [i for i, a in enumerate(self.arrays) if a.dtype.kind == "f" and self.positions[i] not in fixed]

    @functools.cached_property
    def cotangents(self) -> list[np.ndarray]:
        return [(np.arange(w.size) % 5 - 2).astype(w.dtype).reshape(w.shape) for w in self.want]

    def tangent(self, i) -> np.ndarray:
        a = self.arrays[i]
        return (np.arange(a.size) % 3 + 1).astype(a.dtype).reshape(a.shape)

    @functools.cached_property
    def jacobian(self) -> dict:
        """{array i: [per output, (outputs' elements, array i's elements) float64]}
        from the NumPy route: column k is f(e_k) - f(0) (the other arrays as
        given), exact for the data-movement operators' small integer values."""
        out = {}
        for i in self.differentiable:
            a = self.arrays[i]

            def at(v):
                arrays = list(self.arrays)
                arrays[i] = v.reshape(a.shape).astype(a.dtype)
                return [np.asarray(y, np.float64).reshape(-1) for y in self.run(arrays)]
            base = at(np.zeros(a.size))
            cols = []
            for k in range(a.size):
                e = np.zeros(a.size)
                e[k] = 1
                cols.append([y - b for y, b in zip(at(e), base)])
            out[i] = [np.stack([c[o] for c in cols], axis=1) for o in range(len(self.want))]
        return out

    def gradient(self, i) -> np.ndarray:
        """J_i^T g for the cotangents."""
        a = self.arrays[i]
        g = sum(j.T @ np.asarray(c, np.float64).reshape(-1) for j, c in zip(self.jacobian[i], self.cotangents))
        return np.asarray(g).astype(a.dtype).reshape(a.shape)

    def jvp(self) -> list[np.ndarray]:
        """sum_i J_i t_i for the tangents of the differentiable arrays."""
        return [sum(self.jacobian[i][o] @ np.asarray(self.tangent(i), np.float64).reshape(-1)
                    for i in self.differentiable).astype(w.dtype).reshape(w.shape)
                for o, w in enumerate(self.want)]

    def batch(self) -> list[np.ndarray]:
        """A batch of two for each array argument: the example and its
        elements in reverse order (still valid indices where they are)."""
        return [np.stack([a, a.reshape(-1)[::-1].reshape(a.shape)]) for a in self.arrays[:self.main]]

    def batched_want(self) -> list[np.ndarray]:
        rows = [self.run([m[b] for m in self.batch()] + self.arrays[self.main:]) for b in range(2)]
        return [np.stack([r[o] for r in rows]) for o in range(len(self.want))]


CASES = {name: Case(name, cls, b) for name, cls, b in BOUND}


def case_of(name: str) -> Case:
    """The operator's array-API case, or a skip naming the declaration that
    leaves it without one."""
    if name not in CASES:
        pytest.skip(f"{name} declares no array function (no BINDING: a newer operator has its place in the "
                    f"array API)")
    return CASES[name]


def same(got, want, what=""):
    """Outputs equal byte for byte: count, dtype, shape and bytes."""
    assert len(got) == len(want), f"{what}: {len(got)} outputs, want {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert (g.dtype, g.shape) == (w.dtype, w.shape), \
            f"{what} output {k}: {g.dtype}{g.shape}, want {w.dtype}{w.shape}"
        assert g.tobytes() == w.tobytes(), f"{what} output {k}: {g.reshape(-1)[:12]} != {w.reshape(-1)[:12]}"


def needs_differentiable(case: Case):
    if not case.differentiable:
        pytest.skip(f"{case.name} declares no derivative for its example's types (linear_part() is None "
                    f"or every float input is in ADJOINT_INPUTS)")


# -- the known gaps (strict xfails: remove an entry when its route works) --------------------------------

#: route -> {operator: the assertion that fails today}.
KNOWN_GAPS: dict[str, dict[str, str]] = {}


def marked(route: str, names):
    gaps = KNOWN_GAPS.get(route, {})
    return [pytest.param(n, id=n, marks=pytest.mark.xfail(strict=True, reason=f"{route} x {n}: {gaps[n]}"))
            if n in gaps else pytest.param(n, id=n) for n in names]


ALL = sorted(OPERATORS)


# -- NumPy ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", marked("numpy", ALL))
def test_numpy(name):
    """The NumPy route equals the Python route on the NumPy kernels and the
    description run through ``Device``."""
    case = case_of(name)
    with dml.configure(cpu_kernels="numpy", call_cache=False):
        same(case.run([a.copy() for a in case.arrays]), case.want, "NumPy kernels")
    # the description's tensors hold the arrays' elements (the index operators' give every tensor the
    # input's rank: leading 1s)
    tensors = case.desc.inputs
    ins = [None] * len(case.arrays)
    for i, p in enumerate(case.positions):
        ins[p] = case.arrays[i].reshape(tensors[p].sizes)
    got = dml.Device("cpu").run_all(case.desc, *ins)
    assert [g.size for g in got] == [w.size for w in case.want]
    same([g.reshape(w.shape) for g, w in zip(got, case.want)], case.want, "Device")


@pytest.mark.parametrize("name", marked("call-cache", ALL))
def test_call_cache_serves_a_repeat(name):
    """A repeated call (same arguments, new arrays of the same shape) is
    served by the C call cache: its hit counter moves, the bytes are the same."""
    if not native_available():
        pytest.skip("the compiled extension is not built")
    case = case_of(name)
    case.run([a.copy() for a in case.arrays])
    got, seen = observe(lambda: case.run([a.copy() for a in case.arrays]))
    same(got, case.want, "repeat")
    assert seen["hits"] >= 1, f"{name}: a repeated NumPy call was not served by the call cache (hits +0)"


@pytest.mark.parametrize("name", marked("call-cache-torch", ALL))
def test_call_cache_serves_a_torch_cpu_repeat(name):
    torch = pytest.importorskip("torch")
    if not native_available():
        pytest.skip("the compiled extension is not built")
    case = case_of(name)
    args = lambda: [torch.from_numpy(a.copy()) for a in case.arrays]  # noqa: E731
    case.run(args())
    got, seen = observe(lambda: case.run(args()))
    same([g.numpy() for g in got], case.want, "repeat")
    assert seen["hits"] >= 1, f"{name}: a repeated PyTorch CPU call was not served by the call cache (hits +0)"


# -- the C new-shape route, in fresh processes ------------------------------------------------------------

#: What runs first in the fresh process, and the arrays it calls on.
ORDERS = {"numpy-only": ("", "numpy"), "torch-first-numpy": ("import torch", "numpy"),
          "torch-first-torch": ("import torch", "torch")}
#: Every fresh process: the import orders, and two that compile first (PyTorch imported before
#: opendml, and after it).
PROCESSES = {**ORDERS, "torch-compile-first": ("import torch", "torch.compile"),
             "opendml-compile-first": ("import opendml", "torch.compile")}


def _fresh_process_main(framework: str) -> None:
    """In a fresh process: each bound operator's example once (a shape this
    process never saw), on ``framework``'s CPU arrays; prints one JSON line per
    operator: the operator-module functions Python ran, the call cache's new
    entries, whether the bytes equal the NumPy route's (computed after)."""
    rows = {}
    if framework == "torch.compile":
        return _compile_first_main()
    for name, case in CASES.items():
        arrays = [a.copy() for a in case.arrays]
        if framework == "torch":
            import torch
            arrays = [torch.from_numpy(a) for a in arrays]
        try:
            got, seen = observe(lambda: case.run(arrays))
            got = [np.asarray(host(g, framework)) for g in got]
            rows[name] = {"plans": sorted(set(seen["plans"])), "ops": sorted(set(seen["ops"])),
                          "entries": seen["entries"], "got": got}
        except Exception as e:  # noqa: BLE001 - reported per operator
            rows[name] = {"error": f"{type(e).__name__}: {e}"}
    _print_rows(rows)


def _print_rows(rows: dict) -> None:
    """A fresh process's report: per operator its error, or whether its
    outputs' bytes equal the NumPy route's (``same``), and the frameworks
    imported."""
    for name, row in rows.items():
        if "got" in row:
            want = CASES[name].want
            row["same"] = len(want) == len(row["got"]) and all(
                g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes()
                for g, w in zip(row.pop("got"), want))
    print(json.dumps({"modules": sorted(m for m in ("torch", "jax", "cupy") if m in sys.modules), "rows": rows}))


_STARTED: dict = {}


def _start_fresh_processes() -> None:
    """Start every import order's process at once (they run beside the
    other tests; ``fresh_process`` collects each)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pathlib.Path(dml.__file__).parents[1]), str(ROOT)])}
    for order, (first, framework) in PROCESSES.items():
        if order not in _STARTED:
            code = f"{first}\nimport tests.test_route_matrix as m\nm._fresh_process_main({framework!r})\n"
            _STARTED[order] = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def _compile_first_main() -> None:
    """In a fresh process where PyTorch or opendml came first and opendml has
    run nothing: each bound operator's example inside ``torch.compile(fullgraph=True)``
    (``opendml.torch`` not imported); prints, per operator, the error or
    whether the bytes equal the NumPy route's."""
    import torch
    rows = {}
    for name, case in CASES.items():
        torch._dynamo.reset()
        fn = torch.compile(lambda *a, case=case: tuple(case.run(list(a))), backend="aot_eager", fullgraph=True)
        try:
            got = [y.numpy() for y in fn(*[torch.from_numpy(a.copy()) for a in case.arrays])]
            rows[name] = {"got": got}
        except Exception as e:  # noqa: BLE001 - reported per operator
            rows[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0]}"}
    _print_rows(rows)


@functools.cache
def fresh_process(order: str) -> dict:
    _start_fresh_processes()
    out, err = _STARTED[order].communicate(timeout=300)
    assert _STARTED[order].returncode == 0, err[-2000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module", autouse=True)
def _fresh_processes_early(request):
    """Where this session runs a fresh-process test, start the processes
    with the module's first test."""
    if any(getattr(item, "originalname", "").startswith(("test_new_shape", "test_fresh", "test_torch_compile_first"))
           for item in request.session.items):
        _start_fresh_processes()
    yield


@pytest.mark.parametrize("order", list(PROCESSES))
def test_fresh_processes_import_what_they_say(order):
    got = fresh_process(order)["modules"]
    first, framework = PROCESSES[order]
    assert ("torch" in got) == ("torch" in first or framework == "torch.compile"), got
    assert "jax" not in got and "cupy" not in got, got


@pytest.mark.parametrize("order", [pytest.param(o, id=o) for o in ORDERS])
@pytest.mark.parametrize("name", marked("new-shape", ALL))
def test_new_shape_runs_in_c(name, order):
    """A never-seen shape (the first call in a fresh process) is lowered, run
    and recorded in C: no function of the operator modules runs in Python
    (no description, no plan), the call cache holds a new entry, and the
    bytes are the NumPy route's."""
    if not native_available():
        pytest.skip("the compiled extension is not built")
    case_of(name)
    if ORDERS[order][1] == "torch":
        pytest.importorskip("torch")
    row = fresh_process(order)["rows"][name]
    assert "error" not in row, row
    assert row["same"], f"{name} ({order}): the first call's bytes differ from the NumPy route's"
    assert not row["plans"], (f"{name} ({order}): a never-seen shape was planned in Python ({row['plans']}; "
                              f"the operator module ran {row['ops']})")
    assert row["entries"] >= 1, f"{name} ({order}): the never-seen shape's call left no call-cache entry"


# -- PyTorch -------------------------------------------------------------------------------------------

def _torch(arrays, grad=()):
    torch = pytest.importorskip("torch")
    return [torch.from_numpy(a.copy()).requires_grad_(i in grad) for i, a in enumerate(arrays)]


def _np(ts):
    return [t.detach().cpu().numpy() for t in ts]


@pytest.mark.parametrize("name", marked("torch", ALL))
def test_torch_cpu_eager(name):
    case = case_of(name)
    got = case.run(_torch(case.arrays))
    same(_np(got), case.want, "torch")


@pytest.mark.parametrize("name", marked("torch-autograd", ALL))
def test_torch_autograd(name):
    """Float inputs that require grad: the forward bytes are the NumPy
    route's; where the operator declares a derivative, ``backward`` gives
    J^T g exactly for every differentiable input."""
    case = case_of(name)
    floats = [i for i, a in enumerate(case.arrays) if a.dtype.kind == "f"]
    if not floats:
        pytest.skip(f"{name}'s example has no float input")
    xs = _torch(case.arrays, grad=floats)
    ys = case.run(xs)
    same(_np(ys), case.want, "torch autograd forward")
    needs_differentiable(case)
    import torch
    loss = sum((y * torch.from_numpy(c)).sum() for y, c in zip(ys, case.cotangents))
    loss.backward()
    for i in case.differentiable:
        assert xs[i].grad is not None, f"{name}: no gradient for array {i}"
        same([xs[i].grad.numpy()], [case.gradient(i)], f"gradient of array {i}")


@pytest.mark.parametrize("compiled", [None, False, True], ids=["eager", "compiled", "compiled-dynamic"])
@pytest.mark.parametrize("name", marked("torch-forward-ad", ALL))
def test_torch_forward_ad(name, compiled):
    """Dual tensors: the tangents exactly, eager and through ``torch.compile`` (whose graph runs the
    operators on the dual tensors), where a C++ dispatcher operator (``opendml_cpp::``) may refuse them
    by name instead; never a tangent dropped. (Dynamic shapes, ``opendml::family``:
    ``tests/test_family_compile.py``.)"""
    case = case_of(name)
    needs_differentiable(case)
    import torch
    import torch.autograd.forward_ad as fwad
    run = case.run
    if compiled is not None:
        torch._dynamo.reset()
        run = torch.compile(lambda arrays: tuple(case.run(arrays)), backend="aot_eager", dynamic=compiled)
    with fwad.dual_level():
        xs = _torch(case.arrays)
        for i in case.differentiable:
            xs[i] = fwad.make_dual(xs[i], _torch([case.tangent(i)])[0])
        try:
            ys = run(xs)
        except NotImplementedError as e:
            assert compiled is not None and "opendml_cpp::" in str(e) and "forward-mode AD" in str(e), str(e)
            return
        prim = [fwad.unpack_dual(y).primal for y in ys]
        tang = [fwad.unpack_dual(y).tangent for y in ys]
    same(_np(prim), case.want, "forward AD primal")
    assert all(t is not None for t in tang), f"{name}: forward AD gave no tangent"
    same(_np(tang), case.jvp(), "forward AD tangent")


@pytest.mark.parametrize("name", marked("torch-vmap", ALL))
def test_torch_func_vmap(name):
    case = case_of(name)
    torch = pytest.importorskip("torch")
    rest = _torch(case.arrays[case.main:])
    got = torch.func.vmap(lambda *m: tuple(case.run(list(m) + rest)))(*_torch(case.batch()))
    same(_np(got), case.batched_want(), "vmap")


@pytest.mark.parametrize("name", marked("torch-vmap-empty", ALL))
def test_torch_func_vmap_over_an_empty_batch(name):
    """``vmap`` over a batch of size 0: an opendml ``ValidationError`` naming the function (DirectML's sizes are
    >= 1), as the window operators' one call on the batch gives it; the other functions' batching rule indexed
    the first of no samples (an ``IndexError``)."""
    case = case_of(name)
    torch = pytest.importorskip("torch")
    if not case.main:
        pytest.skip(f"{name}'s example has no array to batch")
    rest = _torch(case.arrays[case.main:])
    with pytest.raises(dml.ValidationError, match=f"^{case.binding.function}: "):
        torch.func.vmap(lambda *m: tuple(case.run(list(m) + rest)))(*[t[:0] for t in _torch(case.batch())])


def _of_differentiable(case, xs):
    """The call as a function of its differentiable arrays alone (the other arrays ``xs``'s), its outputs
    a tuple."""
    def fn(*diff):
        arrays = list(xs)
        for i, v in zip(case.differentiable, diff):
            arrays[i] = v
        return tuple(case.run(arrays))
    return fn


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled-dynamic"])
@pytest.mark.parametrize("name", marked("torch-func-jvp", ALL))
def test_torch_func_jvp(name, compiled):
    """``torch.func.jvp`` of the call, eager and around ``torch.compile(dynamic=True)``: the tangents
    exactly (the Jacobian's, J t)."""
    case = case_of(name)
    needs_differentiable(case)
    import torch
    xs = _torch(case.arrays)
    fn = _of_differentiable(case, xs)
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(fn, backend="aot_eager", dynamic=True)
    _, tang = torch.func.jvp(fn, tuple(xs[i] for i in case.differentiable),
                             tuple(_torch([case.tangent(i)])[0] for i in case.differentiable))
    same(_np(tang), case.jvp(), "torch.func.jvp tangent")


@pytest.mark.parametrize("name", marked("torch-vmap-compiled", ALL))
def test_torch_func_vmap_around_compiled_dynamic(name):
    """``torch.func.vmap`` around ``torch.compile(dynamic=True)``: the batched answer of the eager route
    (Dynamo skips the transform's frames and must compile none of opendml's kernel route)."""
    case = case_of(name)
    torch = pytest.importorskip("torch")
    rest = _torch(case.arrays[case.main:])
    torch._dynamo.reset()
    fn = torch.compile(lambda *m: tuple(case.run(list(m) + rest)), backend="aot_eager", dynamic=True)
    same(_np(torch.func.vmap(fn)(*_torch(case.batch()))), case.batched_want(), "vmap of compiled")


@pytest.mark.parametrize("name", marked("torch-grad-compiled", ALL))
def test_torch_func_grad_around_compiled_dynamic(name):
    """``torch.func.grad`` around ``torch.compile(dynamic=True)``: J^T g exactly for every differentiable
    array."""
    case = case_of(name)
    needs_differentiable(case)
    import torch
    xs = _torch(case.arrays)
    torch._dynamo.reset()
    fn = _of_differentiable(case, xs)
    loss = torch.compile(lambda *diff: sum((y * torch.from_numpy(c)).sum()
                                           for y, c in zip(fn(*diff), case.cotangents)),
                         backend="aot_eager", dynamic=True)
    grads = torch.func.grad(loss, argnums=tuple(range(len(case.differentiable))))(
        *[xs[i] for i in case.differentiable])
    same(_np(grads), [case.gradient(i) for i in case.differentiable], "grad of compiled")


@pytest.mark.parametrize("name", marked("torch-func-grad-move", ALL))
def test_torch_func_grad_of_the_move_operator(name):
    """``torch.func.grad`` of the call's description through the raw operator ``opendml::move`` (its
    inputs in the description's order and sizes): the forward bytes, and J^T g exactly for every
    differentiable array."""
    case = case_of(name)
    needs_differentiable(case)
    import torch
    from opendml.arrays.torch.library import to_text
    desc, text = case.desc, to_text(case.desc)

    def outputs(arrays):
        inputs = [None] * len(arrays)
        for i, a in enumerate(arrays):
            inputs[case.positions[i]] = a.reshape(tuple(desc.inputs[case.positions[i]].sizes))
        return [y.reshape(w.shape) for y, w in zip(torch.ops.opendml.move(inputs, text), case.want)]
    xs = _torch(case.arrays)
    same(_np(outputs(xs)), case.want, "opendml::move")

    def loss(*diff):
        arrays = list(xs)
        for i, v in zip(case.differentiable, diff):
            arrays[i] = v
        return sum((y * torch.from_numpy(c)).sum() for y, c in zip(outputs(arrays), case.cotangents))
    grads = torch.func.grad(loss, argnums=tuple(range(len(case.differentiable))))(
        *[xs[i] for i in case.differentiable])
    same(_np(grads), [case.gradient(i) for i in case.differentiable], "torch.func.grad of opendml::move")


@pytest.mark.parametrize("name", marked("torch-compile", ALL))
def test_torch_compile(name):
    """The call inside ``torch.compile(fullgraph=True)`` (AOTAutograd's
    graph, run eagerly) once ``opendml.torch`` is imported (which, as its
    documentation says, lets the array functions into a graph whole): no
    graph break, the graph runs and gives the NumPy route's bytes. Without
    that import: ``test_torch_compile_first``."""
    case = case_of(name)
    pytest.importorskip("torch")
    same(_np(_compiled(case, _torch(case.arrays))), case.want, "torch.compile")


@pytest.mark.parametrize("node", ["wait", "off"], ids=["cpp-operators", "custom-operators"])
@pytest.mark.parametrize("name", marked("torch-jit-trace", ALL))
def test_torch_jit_trace(name, node):
    """``torch.jit.trace`` of the call on tensors that need no gradient, after repeats (served by the C call
    cache) on the same tensors: the trace records opendml's operator, not its result as a constant, so the
    traced function gives the NumPy route's bytes on other inputs of the same shapes (each array argument's
    elements reversed). It recorded the result: the kernel route ran the call, a repeat from C."""
    torch = pytest.importorskip("torch")
    import warnings
    case = case_of(name)
    if not case.arrays:
        pytest.skip(f"{name}'s example takes no array: nothing to trace")
    other = [m[1] for m in case.batch()] + case.arrays[case.main:]
    xs = _torch(case.arrays)
    with dml.configure(torch_node=node), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", torch.jit.TracerWarning)     # (a traced size or value read as a constant:
        for _ in range(3):                                          # recorded, so that no except can hide one)
            same(_np(case.run(xs)), case.want, "before the trace")
        traced = torch.jit.trace(lambda *a: tuple(case.run(list(a))), tuple(xs), check_trace=False)
        assert not [w for w in seen if issubclass(w.category, torch.jit.TracerWarning)], [str(w.message) for w in seen]
        assert "opendml" in str(traced.graph), f"{name}: no opendml operator in the trace:\n{traced.graph}"
        same(_np(traced(*_torch(other))), case.run(other), "the traced function on other inputs")


#: Per array function: (other valid values of its example's int and float arguments, in the same form; a
#: value eager refuses). gather_nd's example takes batch_dimensions 0 alone.
OTHER_ARGUMENTS = {
    "slice": (dict(offsets=[1, 0, 1], sizes=[1, 3, 1], strides=[1, 1, 3]), dict(offsets=[0, -1, 0])),
    "slice1": (dict(window_offsets=[1, 0, 0], window_sizes=[1, 3, 3], window_strides=[1, 1, -2]),
               dict(window_sizes=[3, 3, 4])),
    "unfold": (dict(window_sizes=[3, 2], strides=2), dict(window_sizes=[0, 2])),
    "fold": (dict(output_sizes=[5, 4], window_sizes=[2, 2]), dict(output_sizes=[-4, 5])),
    "slice_grad": (dict(input_sizes=[3, 4, 5], window_offsets=[1, 1, 1], window_sizes=[2, 3, 3],
                        window_strides=[1, 2, 2]), dict(input_sizes=[2, -3, 4])),
    "identity": (dict(scale=3.5, bias=-0.5), dict(scale=1e300)),
    "pad": (dict(start_padding=2, end_padding=[1, 1]), dict(start_padding=-1)),
    "join": (dict(axis=-2), dict(axis=2)),
    "split": (dict(axis=-2, sizes=[2, 2]), dict(sizes=[-1, 5])),
    "tile": (dict(repeats=[3, 2]), dict(repeats=[0, 1])),
    "depth_to_space": (dict(block_size=1), dict(block_size=3)),
    "space_to_depth": (dict(block_size=1), dict(block_size=-2)),
    "gather": (dict(axis=-1), dict(axis=2)),
    "gather_elements": (dict(axis=-1), dict(axis=-3)),
    "gather_nd": (dict(batch_dimensions=0), dict(batch_dimensions=-1)),
    "scatter_elements": (dict(axis=-2), dict(axis=2)),
    "one_hot": (dict(depth=6, axis=0), dict(depth=-4)),
    "reverse_subsequences": (dict(axis=-1), dict(axis=5)),
    "diagonal_matrix": (dict(value=2.5, begin=-1, end=2), dict(value=1e300)),
}


def _scalars(args: dict) -> list:
    """The int and float values of ``args`` (bools and strings aside), alone or in lists, in order."""
    out = []
    for v in args.values():
        for e in v if isinstance(v, list) else [v]:
            if type(e) in (int, float):
                out.append(e)
    return out


def _with_scalars(args: dict, values) -> dict:
    """``args`` with its ``_scalars`` replaced by ``values``, in order."""
    values = iter(values)

    def put(e):
        return next(values) if type(e) in (int, float) else e
    return {k: [put(e) for e in v] if isinstance(v, list) else put(v) for k, v in args.items()}


def _with_scalar_arguments(case):
    """(the call as a function of its arrays and its ``_scalars``, it compiled with ``dynamic=True``, which
    passes the scalars on as ``SymInt``/``SymFloat``); a skip where the example has no int or float argument."""
    import torch

    import opendml.torch  # noqa: F401 - what lets the array functions into a graph whole
    args = case.binding.args
    if not _scalars(args):
        pytest.skip(f"{case.binding.function}'s example has no int or float argument")

    def fn(arrays, *values):
        return tuple(case.run(arrays, _with_scalars(args, values)))
    torch._dynamo.reset()
    return fn, torch.compile(fn, backend="aot_eager", dynamic=True, fullgraph=True)


@pytest.mark.parametrize("name", marked("torch-compile-dynamic-arguments", ALL))
def test_torch_compile_dynamic_scalar_arguments(name):
    """The int and float arguments as the compiled function's own arguments under
    ``torch.compile(dynamic=True)``: eager's results for the example's values, other values and the
    example's again (where they fix the description, each value is read with a guard: a new graph for new
    values)."""
    case = case_of(name)
    fn, compiled = _with_scalar_arguments(case)
    xs = _torch(case.arrays)
    args = case.binding.args
    for given in (args, {**args, **OTHER_ARGUMENTS[case.binding.function][0]}, args):
        values = _scalars(given)
        same(_np(compiled(xs, *values)), _np(fn(xs, *values)), f"compiled with {given}")


@pytest.mark.parametrize("name", marked("torch-compile-dynamic-arguments-refused", ALL))
def test_torch_compile_dynamic_scalar_argument_refused(name):
    """A value eager refuses, passed as the compiled function's argument under ``dynamic=True`` after a
    good one: eager's error (Dynamo's error naming it where it is raised while tracing)."""
    case = case_of(name)
    fn, compiled = _with_scalar_arguments(case)
    xs = _torch(case.arrays)
    args = case.binding.args
    compiled(xs, *_scalars(args))
    values = _scalars({**args, **OTHER_ARGUMENTS[case.binding.function][1]})
    with pytest.raises(dml.ValidationError) as eager:
        fn(xs, *values)
    with pytest.raises(Exception) as got:
        compiled(xs, *values)
    assert str(eager.value) in str(got.value)


#: slice's arguments eager refuses on a (2, 3, 4) input, a rule of each of its fields: (offsets, sizes, strides).
SLICE_REFUSED = {
    "offset": ([0, -1, 0], [2, 2, 2], [1, 1, 2]),
    "size": ([0, 1, 0], [2, 0, 2], [1, 1, 2]),
    "zero stride": ([0, 1, 0], [2, 2, 2], [1, 1, 0]),
    "negative stride": ([0, 1, 0], [2, 2, 2], [1, 1, -2]),
    "past the end": ([0, 1, 0], [2, 2, 2], [1, 1, 4]),
}


@pytest.mark.parametrize("node", ["wait", "off"], ids=["cpp-operators", "custom-operators"])
@pytest.mark.parametrize("bad", sorted(SLICE_REFUSED))
def test_torch_compile_dynamic_slice_refused_as_slice(bad, node):
    """``slice``'s values eager refuses, in a call after a good one under ``torch.compile(dynamic=True)``
    (its values symbolic: the graph traced for the good ones, or a new trace), and on a later input too small
    for the traced call's window (its sizes symbolic): SLICE's error, naming SLICE's fields. Its traced form
    was SLICE1's operator, whose kernel and fake named SLICE1's (``InputWindowOffsets``)."""
    torch = pytest.importorskip("torch")
    import opendml.torch  # noqa: F401 - what lets the array functions into a graph whole

    def fn(x, *values):
        return dml.slice(x, list(values[:3]), list(values[3:6]), list(values[6:]))
    x = torch.arange(24.0).reshape(2, 3, 4)
    good = [0, 1, 0, 2, 2, 2, 1, 1, 2]
    values = [v for field in SLICE_REFUSED[bad] for v in field]
    with dml.configure(torch_node=node):
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="aot_eager", dynamic=True, fullgraph=True)
        assert torch.equal(compiled(x, *good), fn(x, *good))
        with pytest.raises(dml.ValidationError) as eager:
            fn(x, *values)
        with pytest.raises(Exception) as got:
            compiled(x, *values)
        assert str(eager.value).startswith("SLICE: ") and str(eager.value) in str(got.value)
        small = torch.arange(16.0).reshape(2, 2, 4)
        with pytest.raises(dml.ValidationError, match=r"SLICE: Offsets\[1\] \+ \(Sizes\[1\] - 1\)") as eager:
            fn(small, *good)
        with pytest.raises(Exception) as got:
            compiled(small, *good)
        assert str(eager.value) in str(got.value)


@pytest.mark.parametrize("node", ["wait", "off"], ids=["cpp-operators", "custom-operators"])
def test_torch_compile_dynamic_slice1_output_sizes_refused_as_eager(node):
    """Can fail: slice1's output_sizes under ``torch.compile(dynamic=True)`` enter the graph as SLICE1 of
    the window that reaches exactly those sizes (``reaching_window``: a negative stride moves its offset),
    kept symbolic, so a value eager refuses in a later call was refused by the operator for the derived
    window (InputWindowOffsets ... got -1). The counts' range is now a guard: such a value traces the call
    again, whose validation (of the call itself, for its values) raises eager's OutputTensor.Sizes error."""
    torch = pytest.importorskip("torch")
    import opendml.torch  # noqa: F401 - what lets the array functions into a graph whole

    def fn(x, n):
        return dml.slice1(x, [0, 0, 0], [2, 3, 4], [1, 1, -1], [2, 3, n])
    x = torch.arange(24.0).reshape(2, 3, 4)
    with dml.configure(torch_node=node):
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="aot_eager", dynamic=True, fullgraph=True)
        assert torch.equal(compiled(x, 3), fn(x, 3)) and torch.equal(compiled(x, 4), fn(x, 4))
        with pytest.raises(dml.ValidationError) as eager:
            fn(x, 5)
        with pytest.raises(Exception) as got:
            compiled(x, 5)
        assert str(eager.value) in str(got.value)


@pytest.mark.parametrize("order", ["torch-compile-first", "opendml-compile-first"])
@pytest.mark.parametrize("name", marked("torch-compile-first", ALL))
def test_torch_compile_first(name, order):
    """In a fresh process that imported PyTorch (before opendml, or after
    it) and nothing of opendml's PyTorch side: the call inside
    ``torch.compile(fullgraph=True)`` is the process's first, and it runs in
    the graph with the NumPy route's bytes."""
    case_of(name)
    pytest.importorskip("torch")
    row = fresh_process(order)["rows"][name]
    assert "error" not in row, f"{name}: {row['error']}"
    assert row["same"], f"{name}: compiled first, the bytes differ from the NumPy route's"


def _compiled(case, tensors):
    import torch

    import opendml.torch  # noqa: F401 - what lets the array functions into a graph whole
    torch._dynamo.reset()
    return torch.compile(lambda *a: tuple(case.run(list(a))), backend="aot_eager", fullgraph=True)(*tensors)


# -- JAX -----------------------------------------------------------------------------------------------

def _jax(arrays):
    jnp = pytest.importorskip("jax.numpy")
    return [jnp.asarray(a) for a in arrays]


def _jnp_want(case):
    """The NumPy route's outputs as JAX holds them (64-bit types are 32-bit
    unless JAX's x64 mode is on)."""
    import jax
    if jax.config.jax_enable_x64:
        return case.want
    return [w.astype({"int64": "int32", "uint64": "uint32", "float64": "float32"}.get(w.dtype.name, w.dtype))
            for w in case.want]


@pytest.mark.parametrize("name", marked("jax", ALL))
def test_jax_eager(name):
    case = case_of(name)
    same([np.asarray(y) for y in case.run(_jax(case.arrays))], _jnp_want(case), "jax")


@pytest.mark.parametrize("name", marked("jax-jit", ALL))
def test_jax_jit(name):
    case = case_of(name)
    import jax
    got = jax.jit(lambda *a: tuple(case.run(list(a))))(*_jax(case.arrays))
    same([np.asarray(y) for y in got], _jnp_want(case), "jax.jit")


@pytest.mark.parametrize("name", marked("jax-grad", ALL))
def test_jax_grad(name):
    case = case_of(name)
    needs_differentiable(case)
    import jax
    import jax.numpy as jnp
    cts = _jax(case.cotangents)

    def loss(*a):
        return sum(jnp.sum(y * c) for y, c in zip(case.run(list(a)), cts))
    got = jax.grad(loss, argnums=tuple(case.differentiable))(*_jax(case.arrays))
    same([np.asarray(g) for g in got], [case.gradient(i) for i in case.differentiable], "jax.grad")


@pytest.mark.parametrize("name", marked("jax-vmap", ALL))
def test_jax_vmap(name):
    case = case_of(name)
    import jax
    rest = _jax(case.arrays[case.main:])
    got = jax.vmap(lambda *m: tuple(case.run(list(m) + rest)))(*_jax(case.batch()))
    want = case.batched_want()
    if not jax.config.jax_enable_x64:
        want = [w.astype({"int64": "int32", "uint64": "uint32", "float64": "float32"}.get(w.dtype.name, w.dtype))
                for w in want]
    same([np.asarray(y) for y in got], want, "jax.vmap")


# -- Dask ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", marked("dask", ALL))
def test_dask(name):
    """Every array cut into chunks (halves of each axis): the bytes are the
    NumPy route's, and where the operator declares an axis free to cut
    (``chunking()``, a dict without it) and the input is cut there, the run
    is block-wise (more than one output block)."""
    case = case_of(name)
    pytest.importorskip("dask.array")
    arrays = [FRAMEWORKS["dask"](a) for a in case.arrays]
    got = case.run(arrays)
    same([np.asarray(y.compute()) for y in got], case.want, "dask")
    declared = case.desc.chunking()
    if isinstance(declared, dict):
        free = [k for k, n in enumerate(arrays[0].numblocks) if n > 1 and declared.get(k) != 0]
        if free:
            assert any(np.prod(y.numblocks) > 1 for y in got), \
                f"{name}: input axes {free} are free to cut, yet the result is one block"


# -- CUDA: CuPy and PyTorch ----------------------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.parametrize("framework", ["cupy", "torch_cuda"])
@pytest.mark.parametrize("name", marked("cuda", ALL))
def test_cuda(name, framework):
    if not cuda_available():
        pytest.skip("CUDA is not available here")
    case = case_of(name)
    got = case.run([FRAMEWORKS[framework](a) for a in case.arrays])
    same([host(y, framework) for y in got], case.want, framework)


#: The operators whose never-seen shapes on CUDA memory are lowered in C (the family's C lowering,
#: ``C_LOWERING``: runtime/native/newshape_move.c, launched by cuda_move_spec.c).
CUDA_NEW = sorted(n for n, c in OPERATORS.items() if "C_LOWERING" in vars(c))


@pytest.mark.cuda
@pytest.mark.parametrize("framework", ["cupy", "torch_cuda"])
@pytest.mark.parametrize("name", marked("cuda-new-shape", CUDA_NEW))
def test_cuda_new_shape_runs_in_c(name, framework):
    """A shape the call cache never saw, on CuPy arrays and PyTorch CUDA
    tensors: lowered, launched and recorded in C (no function of the operator
    modules runs in Python), the cache holds a new entry, the NumPy route's
    bytes; the repeat is a hit."""
    if not cuda_available():
        pytest.skip("CUDA is not available here")
    case = case_of(name)
    arrays = [FRAMEWORKS[framework](a) for a in case.arrays]
    case.run(arrays)                                # (kernels compiled: a first call may compile them)
    from opendml.runtime import calls
    calls.clear()
    got, seen = observe(lambda: case.run(arrays))
    same([host(y, framework) for y in got], case.want, framework)
    assert not seen["plans"], f"{name} ({framework}): planned in Python ({seen['plans']}; ran {seen['ops']})"
    assert seen["entries"] >= 1, f"{name} ({framework}): no call-cache entry"
    _, again = observe(lambda: case.run(arrays))
    assert again["hits"] >= 1, f"{name} ({framework}): the repeat was not served by the call cache"


# -- the description routes: the JSON form, `opendml run`, Device, DxDispatch ----------------------------

def _example_cases():
    return [(name, ex) for name in ALL for ex in _examples(name)]


EXAMPLE_IDS = [ex["Name"] for _, ex in _example_cases()]


def _documented(ex, desc):
    xs = cli.load_inputs(None, ex, desc)
    want = jsonform.json_arrays(ex, "ExpectedOutput", desc, "output")
    assert want is not None, f"{ex['Name']}: the bundled example documents no output"
    return xs, want


def desc_params(route):
    gaps = KNOWN_GAPS.get(route, {})
    return [pytest.param(n, ex, id=ex["Name"], marks=pytest.mark.xfail(strict=True, reason=f"{route} x {n}: {gaps[n]}"))
            if n in gaps else pytest.param(n, ex, id=ex["Name"]) for n, ex in _example_cases()]


@pytest.mark.parametrize("name, ex", desc_params("jsonform"))
def test_json_form_and_device(name, ex):
    """The JSON form reads the example, writes it back the same, and the
    description runs through ``Device`` (on the compiled and the NumPy CPU
    kernels) to the documented outputs."""
    desc = jsonform.from_json(ex)
    assert jsonform.from_json(json.loads(json.dumps(jsonform.to_json(desc)))) == desc
    xs, want = _documented(ex, desc)
    same(dml.Device("cpu").run_all(desc, *xs), want, "Device")
    with dml.configure(cpu_kernels="numpy"):
        same(dml.Device("cpu").run_all(desc, *xs), want, "Device (NumPy kernels)")


@pytest.mark.parametrize("name, ex", desc_params("cli"))
def test_opendml_run(name, ex, tmp_path):
    """``opendml run --example NAME --output ...``: exit 0 (the documented
    outputs matched), and the saved arrays are those outputs."""
    desc = jsonform.from_json(ex)
    _, want = _documented(ex, desc)
    paths = [str(tmp_path / f"y{k}.npy") for k in range(len(desc.outputs))]
    argv = ["run", "--example", ex["Name"]] + [a for p in paths for a in ("--output", p)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    assert code == 0, (code, err.getvalue(), out.getvalue()[-500:])
    same([np.load(p) for p in paths], want, "opendml run")


@pytest.mark.parametrize("name, ex", desc_params("dxdispatch"))
def test_dxdispatch(name, ex):
    """The example as a DxDispatch model (one dispatchable of the operator):
    the outputs read back through their tensors are the documented ones."""
    model = dml.dxdispatch.example_model(ex)
    assert [d["type"] for d in model["dispatchables"].values()] == [f"DML_OPERATOR_{name}"]
    with contextlib.redirect_stdout(io.StringIO()):
        results = dml.dxdispatch.run(model)
    rows = dml.dxdispatch.example_outputs(ex, results)
    same([got for _, got, _ in rows], [w for _, _, w in rows], "DxDispatch")
    _, want = _documented(ex, jsonform.from_json(ex))
    same([got for _, got, _ in rows], want, "DxDispatch")


@pytest.mark.cuda
@pytest.mark.parametrize("name, ex", desc_params("device-cuda"))
def test_device_cuda(name, ex):
    if not cuda_available():
        pytest.skip("CUDA is not available here")
    desc = jsonform.from_json(ex)
    xs, want = _documented(ex, desc)
    same(dml.Device("cuda", feature_level="6_4").run_all(desc, *xs), want, "Device cuda")


# -- the matrix itself ---------------------------------------------------------------------------------

def test_every_operator_is_in_the_matrix():
    """Every registered operator is a case of the array routes or declares
    why not, and has a bundled example for the description routes."""
    for name, cls in OPERATORS.items():
        assert name in CASES or cls.__dict__.get("BINDING") is None, name
        assert _examples(name), name
    for route, gaps in KNOWN_GAPS.items():
        assert set(gaps) <= set(OPERATORS), (route, set(gaps) - set(OPERATORS))
