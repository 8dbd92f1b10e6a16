"""The registry's shape: what each operator declares (slots, field kinds,
counts) and the JSON form read generically from it."""
import dataclasses
import json

import pytest

import opendml as dml
from opendml import jsonform
from opendml.jsonform import JsonFormError
from opendml.ops import OPERATORS, OperatorDesc
from opendml.ops._spec import (OMIT, DepthSpaceOrder, Enum, Field, Float, PaddingMode, ScalarUnion, ScaleBias,
                               Struct, Tensor, UInt, snake)


def fail(msg):
    return JsonFormError(msg)


def test_every_operator_declares_its_struct():
    for name, cls in OPERATORS.items():
        assert cls.OPERATOR == name
        assert isinstance(cls.TYPE_VALUE, int) and cls.TYPE_VALUE > 0
        assert cls.SLOTS and all(isinstance(s, Tensor) for s in cls.SLOTS)
        # every operator writes an output; all but the generators (DIAGONAL_MATRIX) read an input
        assert any(s.role == "output" for s in cls.SLOTS)
        assert any(s.role == "input" for s in cls.SLOTS) or name == "DIAGONAL_MATRIX", name
        attrs = {f.name for f in dataclasses.fields(cls)}
        for s in cls.SLOTS:
            assert s.attr in attrs, (name, s)
        for f in cls.FIELDS:
            assert f.attr in attrs, (name, f)
        for count, target in cls.COUNTS.items():
            assert target in {s.json for s in cls.SLOTS} | {f.json for f in cls.FIELDS}, (name, count)


def test_type_values_are_the_headers():
    # DML_OPERATOR_TYPE in DirectML.h, counted from DML_OPERATOR_INVALID = 0
    expected = {"SLICE": 60, "SLICE1": 111, "UNFOLD": 177, "FOLD": 176, "SLICE_GRAD": 135,
                "ELEMENT_WISE_IDENTITY": 1, "CAST": 61, "SPLIT": 62, "JOIN": 63, "PADDING": 64,
                "SPACE_TO_DEPTH": 68, "DEPTH_TO_SPACE": 69, "TILE": 70, "DEPTH_TO_SPACE1": 113,
                "SPACE_TO_DEPTH1": 114, "PADDING1": 155,
                "GATHER": 67, "SCATTER_ELEMENTS": 94, "ONE_HOT": 95, "REVERSE_SUBSEQUENCES": 106,
                "GATHER_ELEMENTS": 107, "GATHER_ND": 108, "SCATTER_ND": 109, "GATHER_ND1": 140,
                "DIAGONAL_MATRIX": 93, "DIAGONAL_MATRIX1": 163}
    for name, cls in OPERATORS.items():
        assert cls.TYPE_VALUE == expected[name], name


def test_the_first_five_derive_slots_from_tensors():
    sg = OPERATORS["SLICE_GRAD"]
    assert sg.SLOTS == (Tensor("InputGradientTensor", "input_gradient_tensor", "input"),
                        Tensor("OutputGradientTensor", "output_gradient_tensor", "output", optional=False))
    assert OPERATORS["SLICE1"].SLOTS[1].optional and not OPERATORS["FOLD"].SLOTS[1].optional
    assert OPERATORS["UNFOLD"].COUNTS == {"DimensionCount": "WindowSizes"}


def test_snake():
    assert snake("InputGradientTensor") == "input_gradient_tensor"
    assert snake("PaddingValueDataType") == "padding_value_data_type"


def test_enum_kind_reads_short_and_directml_names_and_values():
    f = Enum("PaddingMode", "padding_mode", enum=PaddingMode)
    assert f.from_json("REFLECTION", "$.PaddingMode", {}, fail) is PaddingMode.REFLECTION
    assert f.from_json("DML_PADDING_MODE_WRAP", "$.PaddingMode", {}, fail) is PaddingMode.WRAP
    assert f.from_json(3, "$.PaddingMode", {}, fail) is PaddingMode.SYMMETRIC
    assert f.to_json(PaddingMode.EDGE) == "EDGE"
    with pytest.raises(JsonFormError, match=r"^\$\.PaddingMode: unknown DML_PADDING_MODE \"MIRROR\"; expected one "
                                            r"of CONSTANT, EDGE, REFLECTION, SYMMETRIC, WRAP$"):
        f.from_json("MIRROR", "$.PaddingMode", {}, fail)
    with pytest.raises(JsonFormError, match=r"unknown DML_DEPTH_SPACE_ORDER 2"):
        Enum("Order", "order", enum=DepthSpaceOrder).from_json(2, "$.Order", {}, fail)


def test_scalar_union_is_typed_by_its_sibling():
    f = ScalarUnion("PaddingValue", "padding_value", type_field="PaddingValueDataType")
    assert f.from_json(9, "$.PaddingValue", {"PaddingValueDataType": dml.DataType.FLOAT32}, fail) == 9.0
    assert isinstance(f.from_json(9, "$.PaddingValue", {"PaddingValueDataType": dml.DataType.FLOAT32}, fail), float)
    assert f.from_json({"Int64": -3}, "$.PaddingValue", {"PaddingValueDataType": dml.DataType.INT64}, fail) == -3
    assert f.from_json(4.0, "$.PaddingValue", {"PaddingValueDataType": dml.DataType.UINT8}, fail) == 4
    with pytest.raises(JsonFormError, match=r"^\$\.PaddingValue: must be an integer for PaddingValueDataType INT32; "
                                            r"got 1\.5$"):
        f.from_json(1.5, "$.PaddingValue", {"PaddingValueDataType": dml.DataType.INT32}, fail)
    with pytest.raises(JsonFormError, match=r"^\$\.PaddingValue\.Float32: the member must match PaddingValueDataType "
                                            r"INT32 \(Int32\); got Float32$"):
        f.from_json({"Float32": 1}, "$.PaddingValue", {"PaddingValueDataType": dml.DataType.INT32}, fail)


def test_struct_kind():
    f = Struct("ScaleBias", "scale_bias", default=None)
    assert f.from_json({"Scale": 2, "Bias": 0.5}, "$.ScaleBias", {}, fail) == ScaleBias(2.0, 0.5)
    assert f.from_json(None, "$.ScaleBias", {}, fail) is None
    assert f.to_json(None) is OMIT and f.to_json(ScaleBias(2.0, 1.0)) == {"Scale": 2.0, "Bias": 1.0}
    with pytest.raises(JsonFormError, match=r"^\$\.ScaleBias\.Bias: missing required field$"):
        f.from_json({"Scale": 2}, "$.ScaleBias", {}, fail)
    with pytest.raises(JsonFormError, match=r"^\$\.ScaleBias\.Shift: unknown field; expected one of Scale, Bias$"):
        f.from_json({"Scale": 2, "Bias": 1, "Shift": 0}, "$.ScaleBias", {}, fail)


def test_scalar_kinds():
    assert UInt("Axis", "axis").from_json(3, "$.Axis", {}, fail) == 3
    with pytest.raises(JsonFormError, match=r"^\$\.Axis: must be an integer; got \"3\"$"):
        UInt("Axis", "axis").from_json("3", "$.Axis", {}, fail)
    with pytest.raises(JsonFormError, match=r"^\$\.PaddingValue: must be a number; got true$"):
        Float("PaddingValue", "padding_value").from_json(True, "$.PaddingValue", {}, fail)
    # positional fill still works for integer arrays (the first five declare them so)
    assert Field("Strides", "strides", 1).fill == 1 and not Field("Strides", "strides", 1).required
    assert Field("WindowSizes", "window_sizes").required


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_examples_round_trip(name):
    for ex in _examples(name):
        desc = jsonform.from_json(ex)
        again = jsonform.from_json(json.loads(json.dumps(jsonform.to_json(desc))))
        assert again == desc
        assert isinstance(desc, OperatorDesc)


def _examples(name):
    from importlib import resources
    out = []
    for p in resources.files("opendml.examples").iterdir():
        if p.name.endswith(".json"):
            d = json.loads(p.read_text())
            if str(d.get("Operator", "")).upper().removeprefix("DML_OPERATOR_") == name:
                out.append(d)
    assert out, f"no bundled example for {name}"
    return out


def _written(plan, slot, sizes, strides):
    """How many times each output element is written by a move program's
    passes, but for the index-driven ``Scatter`` passes (whose positions are
    data: they overwrite elements an earlier pass wrote, which the caller
    checks)."""
    import numpy as np
    from opendml.plan import Scatter, SliceScatter, Windows, WindowSums
    hits = np.zeros(sizes, np.int64).reshape(-1)
    for p in plan.passes:
        if p.dst != slot or isinstance(p, Scatter):
            continue
        if isinstance(p, (Windows, WindowSums, SliceScatter)):   # a tuned pass writes its whole (packed) output once
            assert p.count == hits.size and p.dst_span() == (0, hits.size - 1)
            hits += 1
            continue
        idx = p.dst_offset + sum(np.arange(n).reshape((-1,) + (1,) * (len(p.sizes) - k - 1)) * t
                                 for k, (n, t) in enumerate(zip(p.sizes, p.dst_strides)))
        np.add.at(hits, np.asarray(idx).reshape(-1), 1)
    flat = sum(np.arange(n).reshape((-1,) + (1,) * (len(sizes) - k - 1)) * t
               for k, (n, t) in enumerate(zip(sizes, strides)))
    return hits[np.asarray(flat).reshape(-1)]


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_output_sizes_equal_what_the_lowering_writes(name):
    from opendml.plan import MovePlan, Scatter
    for ex in _examples(name):
        desc = jsonform.from_json(ex)
        plan = desc.lower()
        assert type(plan) is MovePlan and len(plan.out_types) == len(desc.outputs)
        from opendml.plan import Fill, Scatter
        for slot, t in enumerate(desc.outputs):
            # every element of every output written exactly once (an
            # index-driven Scatter pass then overwrites some: it comes
            # after every other pass into its output); a generator
            # (DIAGONAL_MATRIX(1)) writes every element once in its first
            # pass (the input's copy or zeros), then Fill passes write its
            # value over some, each element at most once
            written = _written(plan, slot, t.sizes, t.element_strides)
            if not (written == 1).all():
                mine = [p for p in plan.passes if p.dst == slot]
                assert name.startswith("DIAGONAL_MATRIX") and all(isinstance(p, Fill) for p in mine[1:]), name
                first, rest = (_written(MovePlan(plan.in_types, plan.out_types, ps), slot, t.sizes,
                                        t.element_strides) for ps in (mine[:1], mine[1:]))
                assert (first == 1).all() and (rest <= 1).all() and rest.any(), (name, slot)
            kinds = [isinstance(p, Scatter) for p in plan.passes if p.dst == slot]
            assert kinds == sorted(kinds), (name, slot)


def test_array_api_refuses_huge_outputs_before_allocating():
    import numpy as np
    x = np.zeros((4, 4), np.float32)
    with pytest.raises(dml.ValidationError, match=r"^TILE: OutputTensor: the element count .* must be <= 4294967295; "
                                                   r"got 17592186044416 \(OutputTensor.Sizes = InputTensor.Sizes \* "
                                                   r"Repeats\)$"):
        dml.tile(x, [2**20, 2**20])
    with pytest.raises(dml.ValidationError, match=r"PADDING1: StartPadding\[0\] must be in \[0, 4294967295\]; "
                                                   r"got -1"):
        dml.pad(x, [-1, 0], 0)
    with pytest.raises(dml.ValidationError, match=r"^PADDING1: PaddingMode must be one of 'constant', "):
        dml.pad(x, 1, 1, mode="mirror")
    with pytest.raises(dml.ValidationError, match=r"^SPLIT: OutputTensors\[1\].Sizes\[0\] must be an int >= 1 "
                                                   r"\(sizes\[1\]\); got 0$"):
        dml.split(x, 0, [4, 0])
    with pytest.raises(dml.ValidationError, match=r"^join: axis must be in \[-2, 1\]"):
        dml.join([x, x], 2)
    with pytest.raises(dml.UnsupportedError, match=r"^cast: dtype complex64 is not supported by CAST at feature "
                                                   r"level 6_4 \(supported: float16, float32, float64, int8, "):
        dml.cast(x, np.complex64)
    with pytest.raises(dml.ValidationError, match=r"^identity: x must be a NumPy, CuPy, PyTorch, JAX or Dask array; "
                                                   r"got builtins.list$"):
        dml.identity([1.0, 2.0])
    with pytest.raises(dml.ValidationError, match=r"^JOIN: InputTensors\[1\].DataType must equal"):
        dml.join([x, x.astype(np.float64)], 0)


def test_list_arguments_are_read_once():
    import numpy as np

    class Shifty(list):
        """A list whose second reading differs: only a snapshot taken once gives one answer."""
        reads = 0

        def __iter__(self):
            Shifty.reads += 1
            return iter([1, 1] if Shifty.reads == 1 else [3, 3])

    x = np.arange(4, dtype=np.int32).reshape(2, 2)
    got = dml.tile(x, Shifty([9, 9]))
    assert got.shape == (2, 2) and Shifty.reads == 1
