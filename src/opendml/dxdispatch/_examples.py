"""The bundled ``opendml run`` examples as DxDispatch models."""
from __future__ import annotations

import json
import math

import numpy as np

from ..device import Device
from ..model.tensor_desc import TensorFlags
from ..jsonform import default_input, from_json, json_arrays, to_json


def _json_number(v):
    """A value as a model writes it: non-finite floats as DxDispatch's strings,
    integral floats as integers (``-0.0`` kept)."""
    if isinstance(v, float):
        if not math.isfinite(v):
            return _finite(v)
        if v.is_integer() and abs(v) < 2**53 and (v != 0 or math.copysign(1, v) > 0):
            return int(v)
    return v


def _finite(value):
    """``value`` with each non-finite float (at any depth of lists) as DxDispatch's string: JSON has no NaN or
    infinity, and ``loads``, as DxDispatch's parser, refuses the literals ``NaN`` and ``Infinity``."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"
    return [_finite(v) for v in value] if isinstance(value, list) else value


def dumps(model: dict) -> str:
    """A model as indented JSON text, each array of numbers on one line; a NaN or infinite float is written as
    ``"nan"``, ``"inf"`` or ``"-inf"``, as DxDispatch reads them."""
    def compact(value, indent: int) -> str:
        pad, inner = " " * indent, " " * (indent + 2)
        if isinstance(value, dict) and value:
            items = [f"{inner}{json.dumps(k)}: {compact(v, indent + 2)}" for k, v in value.items()]
            return "{\n" + ",\n".join(items) + "\n" + pad + "}"
        if isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
            return "[\n" + ",\n".join(inner + compact(v, indent + 2) for v in value) + "\n" + pad + "]"
        return json.dumps(_finite(value))
    return compact(model, 0)


def _example_names(desc) -> tuple[list[str], list[str]]:
    """Resource names of an example's tensors: ``input``/``output`` where there
    is one, else ``input0``, ``input1``... in the operator's tensor order."""
    n_in, n_out = len(desc.inputs), len(desc.outputs)
    ins = ["input"] if n_in == 1 else [f"input{i}" for i in range(n_in)]
    outs = ["output"] if n_out == 1 else [f"output{i}" for i in range(n_out)]
    return ins, outs


def _example_arrays(example: dict, key: str, desc, side: str) -> list:
    """An example's ``key``/``key + "s"`` arrays (``jsonform.json_arrays``),
    or None for each ``side`` tensor where it gives none."""
    arrays = json_arrays(example, key, desc, side)
    return arrays if arrays is not None else [None] * len(desc.named_tensors(side))


def example_model(example: dict) -> dict:
    """A bundled ``opendml run`` example (its JSON form, with ``Input``/``Inputs`` or the pages' default input 1..N or
    0..N-1) as a DxDispatch model: one resource per input tensor (its buffer, laid out by the tensor's strides), one
    per output tensor (zeros over its TotalTensorSizeInBytes), one dispatchable named after the example, a dispatch and
    a print of each output (resource names: ``_example_names``)."""
    desc = from_json(example)
    in_names, out_names = _example_names(desc)
    resources = {}
    for name, t, x in zip(in_names, desc.inputs, _example_arrays(example, "Input", desc, "input")):
        x = default_input(t, desc.DEFAULT_INPUT_START) if x is None else x
        raw = Device("cpu").upload(x, t).read()
        elements = raw[:len(raw) // t.element_size * t.element_size].view(t.data_type.numpy_dtype)
        resources[name] = {"initialValuesDataType": t.data_type.name,
                           "initialValues": [_json_number(v) for v in elements.tolist()]}
    for name, t in zip(out_names, desc.outputs):
        resources[name] = {"initialValuesDataType": t.data_type.name,
                           "initialValues": {"valueCount": t.total_tensor_size_in_bytes // t.element_size,
                                             "value": 0}}
    bindings, owned = {}, {}
    names = {"input": iter(in_names), "output": iter(out_names)}
    for slot in desc.SLOTS:
        value = getattr(desc, slot.attr)
        if value is None:                  # an optional input left out: nothing to bind
            continue
        it = names[slot.role]
        tensors = value if slot.many else (value,)
        # an OWNED_BY_DML input is bound once, at initialisation (the dispatchable's "bindings"), not by the dispatch
        where = owned if slot.role == "input" and any(
            t is not None and t.flags & TensorFlags.OWNED_BY_DML for t in tensors) else bindings
        where[slot.json] = [next(it) for _ in value] if slot.many else next(it)
    form = to_json(desc)
    name = example.get("Name", desc.OPERATOR.lower())
    dispatchable = {"type": f"DML_OPERATOR_{desc.OPERATOR}",
                    "desc": {k: v for k, v in form.items() if k != "Operator"}}
    if owned:
        dispatchable["bindings"] = owned
    return {
        "resources": resources,
        "dispatchables": {name: dispatchable},
        "commands": [{"type": "dispatch", "dispatchable": name, "bindings": bindings},
                     *({"type": "print", "resource": n} for n in out_names)],
    }


def example_outputs(example: dict, results: dict[str, np.ndarray]) -> list[tuple[str, np.ndarray, object]]:
    """For each output tensor of an example run as a model (``example_model``):
    ``(resource name, its elements read through the tensor, the documented
    array or None)``."""
    desc = from_json(example)
    _, out_names = _example_names(desc)
    expected = _example_arrays(example, "ExpectedOutput", desc, "output")
    return [(name, Device("cpu").upload(results[name].view(np.uint8)).read(t), want)
            for name, t, want in zip(out_names, desc.outputs, expected)]
