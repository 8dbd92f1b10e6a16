"""One plan type: every registered operator lowers to the move program
(``plan.MovePlan``) whose passes the CPU backend's one pass table runs, and
no module outside ``plan.py`` (and the CUDA backend, converted apart) forks
on a plan class."""
from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

import opendml as dml
from opendml import jsonform
from opendml.ops import OPERATORS
from opendml.plan import (READING_PASSES, Copy, CopyPlan, Fill, FoldPlan, MovePlan, ScatterPlan, SliceScatter,
                          UnfoldPlan, Windows, WindowSums)
from opendml.runtime import get_backend
from opendml.runtime.cpu.backend import PASSES
from tests.conftest import native_available
from tests.test_engine_registry import _examples

SRC = pathlib.Path(dml.__file__).parent
PLAN_CLASSES = {"MovePlan", "CopyPlan", "UnfoldPlan", "FoldPlan", "ScatterPlan"}
#: The modules allowed to name a plan class in a type test: where the plan
#: kinds are defined, and the CUDA launch of a tuned pass's parameter block
#: (``tuned.launch_spec``: a CopyPlan, UnfoldPlan, FoldPlan or ScatterPlan, not
#: a plan; the form ``runtime/native/cuda_spec.c`` mirrors).
EXEMPT = {"plan.py", "runtime/cuda/tuned.py"}


def test_the_pass_table_covers_every_pass_kind():
    assert set(PASSES) == set(READING_PASSES) | {Fill}


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_every_operator_lowers_to_a_move_plan_of_table_passes(name):
    for ex in _examples(name):
        desc = jsonform.from_json(ex)
        for plan in (desc.lower(), desc.lower(in_layouts=[None] * len(desc.inputs))):
            assert type(plan) is MovePlan, name
            assert plan.passes and all(type(p) in PASSES for p in plan.passes), name
            assert plan.in_types == tuple(int(t.data_type) for t in desc.inputs)
            assert plan.out_types == tuple(int(t.data_type) for t in desc.outputs)


@pytest.mark.parametrize("name, kind, block", [
    ("SLICE", Copy, CopyPlan), ("SLICE1", Copy, CopyPlan), ("UNFOLD", Windows, UnfoldPlan),
    ("FOLD", WindowSums, FoldPlan), ("SLICE_GRAD", SliceScatter, ScatterPlan)])
def test_the_first_five_lower_to_one_tuned_pass(name, kind, block):
    desc = jsonform.from_json(_examples(name)[0])
    plan = desc.lower()
    assert [type(p) for p in plan.passes] == [kind]
    k = plan.kernel_plan()
    assert type(k) is block and plan.kernel_plan() is k          # computed once: backends key launches by it
    assert k.element_size == desc.inputs[0].element_size
    assert plan.in_spans() == [k.in_span] and plan.out_spans() == [k.out_span]
    # the same lowering through either keyword
    ts = desc.inputs[0].element_strides
    assert desc.lower(ts, 0) == desc.lower(in_layouts=[(ts, 0)]) == plan


def test_kernel_plan_is_none_beyond_one_plain_pass():
    t = int(dml.DataType.FLOAT32)
    copy = Copy(0, 0, (4,), 0, (1,), 0, (1,))
    assert MovePlan((t,), (t,), (copy,)).kernel_plan() == CopyPlan(4, (4,), 0, (1,), 0, (1,))
    assert MovePlan((t,), (int(dml.DataType.FLOAT16),), (copy,)).kernel_plan() is None      # a conversion
    assert MovePlan((t,), (t,), (Copy(0, 0, (4,), 0, (1,), 0, (1,), scale_bias=(2.0, 0.0)),)).kernel_plan() is None
    assert MovePlan((t,), (t,), (copy, copy)).kernel_plan() is None
    assert MovePlan((t,), (t,), (Fill(0, (4,), 0, (1,), 0.0),)).kernel_plan() is None


@pytest.mark.parametrize("kernels", ["numpy"] + (["compiled"] if native_available() else []))
def test_prepare_takes_every_operators_plan_with_one_signature(kernels):
    """``Backend.prepare(plan, srcs, dsts)`` runs the first five's plans as
    it runs the family's (lists of word arrays), giving the array API's bytes."""
    rng = np.random.default_rng(5)
    with dml.configure(cpu_kernels=kernels):
        backend = get_backend("cpu")
        for name in ("SLICE", "SLICE1", "UNFOLD", "FOLD", "SLICE_GRAD", "PADDING"):
            desc = jsonform.from_json(_examples(name)[0])
            t = desc.inputs[0]
            x = rng.standard_normal(t.sizes).astype(t.data_type.numpy_dtype)
            word = f"u{t.element_size}"
            outs = [np.zeros(o.sizes, o.data_type.numpy_dtype) for o in desc.outputs]
            backend.prepare(desc.lower(), [x.reshape(-1).view(word)], [o.reshape(-1).view(word) for o in outs])()
            dev = dml.Device("cpu")
            want = dev.run_all(desc, x)
            assert all(a.tobytes() == b.tobytes() for a, b in zip(outs, want)), name


def _plan_forks(tree: ast.AST) -> list[int]:
    """Lines of ``isinstance(x, C)``, ``type(x) is C``, ``x is C``, ``x in
    (C, ...)`` and ``{C: ...}`` with C a plan class."""
    def names(node):
        if isinstance(node, ast.Name):
            return {node.id}
        if isinstance(node, ast.Attribute):
            return {node.attr}
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return set().union(*map(names, node.elts)) if node.elts else set()
        return set()
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                "isinstance", "issubclass") and len(node.args) == 2:
            hit = names(node.args[1])
        elif isinstance(node, ast.Compare):
            hit = set().union(*(names(c) for c in [node.left, *node.comparators]))
        elif isinstance(node, ast.Dict):
            hit = set().union(*(names(k) for k in node.keys if k is not None)) if node.keys else set()
        else:
            continue
        if hit & PLAN_CLASSES:
            lines.append(node.lineno)
    return lines


def test_no_module_forks_on_the_plan_class():
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel in EXEMPT or rel.startswith("examples/"):
            continue
        lines = _plan_forks(ast.parse(path.read_text(), rel))
        if lines:
            found[rel] = lines
    assert not found, f"modules testing a plan's class (one plan type: MovePlan): {found}"


def test_the_fork_scan_sees_each_form():
    src = """
isinstance(plan, MovePlan)
isinstance(plan, (CopyPlan, UnfoldPlan))
kind is P.MovePlan
type(plan) in (FoldPlan,)
table = {ScatterPlan: 1}
isinstance(p, Copy) or type(p) is Fill
"""
    assert _plan_forks(ast.parse(src)) == [2, 3, 4, 5, 6]


def test_lower_refuses_layouts_that_do_not_fit_the_inputs():
    """``OperatorDesc.lower`` given strides of another length than the input's rank, or layouts of another count than
    its inputs, made a malformed plan silently (``lower([])`` of a 2-D SLICE1: a Copy of sizes (4, 3) and no source
    strides; ``lower([5])``: one stride for two dimensions)."""
    T = dml.TensorDesc
    desc = dml.Slice1OperatorDesc(T("FLOAT32", (4, 3)), None, [0, 0], [4, 3], [1, 1])
    message = r"^SLICE1: lower's input layouts must be one per input tensor \(1\), each with one stride per dimension"
    for strides in ([], [5], [3, 1, 9]):
        with pytest.raises(dml.ValidationError, match=message):
            desc.lower(strides)
    for layouts in ([], [None, None], [((3, 1), 0), ((3, 1), 0)]):
        with pytest.raises(dml.ValidationError, match=message):
            desc.lower(in_layouts=layouts)
    assert desc.lower([-3, 1], 9) == desc.lower(in_layouts=[((-3, 1), 9)])
    assert desc.lower() == desc.lower(in_layouts=[None]) == desc.lower(in_layouts=[((3, 1), 0)])
    assert dml.DiagonalMatrixOperatorDesc(T("FLOAT32", (3, 3))).lower().passes     # no input: nothing to fit
