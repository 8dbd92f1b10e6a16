"""Random DxDispatch models from the property tests' generators
(tests/test_properties.py): descriptions of every data type, rank and stride
pattern (padded, permuted, broadcast), written with random abbreviations,
bound at offsets into larger resources filled with random bytes, and
dispatched several times over different resources. Each output equals the
array API's (``opendml.slice1`` etc.) byte for byte, and the bytes no output
element covers keep their values. The data-movement family (JOIN, SPLIT,
TILE, PADDING1) likewise, from descriptions drawn here against its array API
(``opendml.join`` etc.). Then a fuzz test: mutated models through
``opendml dispatch`` exit 0 or 2, a 2 with one line on stderr, no traceback,
and nothing in --output-dir."""
import copy
import json
import os
import pathlib
import random
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import opendml as dml
import opendml.dxdispatch as dxd
from opendml.cli import examples
from opendml.jsonform import from_json, to_json
from opendml.ops import OPERATORS
from tests import reference as ref
from tests.test_fuzz import BIG_LITERALS, DEEP, HUGE, Foreign, _walk, check_cli, junk, npy_file, run_cli
from tests.test_properties import (dedupe_broadcast, finite_input, fold_cases, layouts, logical_input, slice1_cases,
                                   slice_cases, slice_grad_cases, unfold_cases)
from .conftest import n_examples

SETTINGS = settings(max_examples=n_examples(25), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.data_too_large])


def _with_pads(case):
    return case if isinstance(case, tuple) else (case, 16, 32)


def _array_api(desc, x):
    """The array API's result for the description's geometry, shaped like its output tensor."""
    name = desc.OPERATOR
    out = desc.output_tensor.sizes
    if name == "SLICE":
        y = dml.slice(x, desc.offsets, desc.sizes, desc.strides)
    elif name == "SLICE1":
        y = dml.slice1(x, desc.input_window_offsets, desc.input_window_sizes, desc.input_window_strides, out)
    elif name == "UNFOLD":
        y = dml.unfold(x, desc.window_sizes, desc.strides, desc.dilations, desc.start_padding, desc.end_padding)
    elif name == "FOLD":
        y = dml.fold(x.reshape(x.shape[-3:]), out[2:], desc.window_sizes, desc.strides, desc.dilations,
                     desc.start_padding, desc.end_padding)
    else:
        y = dml.slice_grad(x, out, desc.input_window_offsets, desc.input_window_sizes, desc.input_window_strides)
    return np.asarray(y).reshape(out)


CASES = {"SLICE": (slice_cases, logical_input), "SLICE1": (slice1_cases, logical_input),
         "UNFOLD": (unfold_cases, logical_input), "FOLD": (fold_cases, finite_input),
         "SLICE_GRAD": (slice_grad_cases, logical_input)}


def _spell(draw, value: str, prefix: str) -> str:
    return prefix + value if draw(st.booleans()) else value


def _tensor_form(draw, t: dict) -> dict:
    """A tensor in one of the spellings DxDispatch reads."""
    t = dict(t, DataType=_spell(draw, t["DataType"], "DML_TENSOR_DATA_TYPE_"))
    r = draw(st.integers(0, 5))
    if r == 0:
        t["DimensionCount"] = len(t["Sizes"])
    elif r == 1:
        t["Flags"] = draw(st.sampled_from(["NONE", "DML_TENSOR_FLAG_NONE", ["NONE"], []]))
    elif r == 2 and "TotalTensorSizeInBytes" not in t:
        t["TotalTensorSizeInBytes"] = 0               # DxDispatch: computed
    if draw(st.booleans()):
        return {"Type": _spell(draw, "BUFFER", "DML_TENSOR_TYPE_"), "Desc": t}
    return t


def _resource_bytes(tensor, x, pad, rng) -> np.ndarray:
    """Random bytes with the tensor's elements written at byte ``pad``."""
    buf = dml.Device("cpu").create_buffer(pad + tensor.total_tensor_size_in_bytes + 16)
    buf.write(rng.integers(0, 256, buf.size_in_bytes, dtype=np.uint8))
    buf.write(x, tensor, offset=pad)
    return buf.read()


def _binding(draw, name: str, pad: int, nbytes: int):
    """A binding of the bytes [pad, pad + nbytes) (or to the end) of a UINT8 resource, in one of its forms."""
    r = draw(st.integers(0, 3))
    if r == 0 and pad == 0:
        return name
    if r == 1:
        return {"name": name, "elementOffset": pad}
    if r == 2:
        return {"name": name, "elementOffset": pad, "elementCount": nbytes}
    return {"name": name, "elementOffset": pad // 16, "elementSizeInBytes": 16}


def check_model(draw, rng, desc, runs, pads=(16, 32)):
    """Run ``desc`` as a DxDispatch model: one dispatchable, one dispatch per
    run, each over its own resources (UINT8 bytes: random bytes with the
    input tensors written at an offset; random bytes for the outputs, bound at
    an offset). ``runs`` is a list of (logical inputs, expected outputs). Each
    output tensor must equal its expected array byte for byte, and every byte
    no output element covers must keep its value."""
    in_pad, out_pad = pads
    form = to_json(desc)
    del form["Operator"]
    for slot in desc.SLOTS:
        v = form[slot.json]
        form[slot.json] = [_tensor_form(draw, t) for t in v] if slot.many else _tensor_form(draw, v)
    resources, commands, fills = {}, [], []
    for k, (xs, _) in enumerate(runs):
        names = {"input": iter(f"in{k}_{i}" for i in range(len(desc.inputs))),
                 "output": iter(f"out{k}_{i}" for i in range(len(desc.outputs)))}
        run_fills = []
        for i, (t, x) in enumerate(zip(desc.inputs, xs)):
            resources[f"in{k}_{i}"] = {"initialValuesDataType": "UINT8",
                                       "initialValues": _resource_bytes(t, x, in_pad, rng).tolist()}
        for i, t in enumerate(desc.outputs):
            fill = rng.integers(0, 256, out_pad + t.total_tensor_size_in_bytes + 16, dtype=np.uint8)
            run_fills.append(fill)
            resources[f"out{k}_{i}"] = {"initialValuesDataType": "UINT8", "initialValues": fill.tolist()}
        fills.append(run_fills)
        bindings = {}
        for slot in desc.SLOTS:
            tensors = getattr(desc, slot.attr)
            pad = in_pad if slot.role == "input" else out_pad
            one = [_binding(draw, next(names[slot.role]), pad, t.total_tensor_size_in_bytes)
                   for t in (tensors if slot.many else (tensors,))]
            bindings[slot.json] = one if slot.many else one[0]
        commands.append({"type": "dispatch", "dispatchable": "op", "bindings": bindings})
    model = {"resources": resources,
             "dispatchables": {"op": {"type": _spell(draw, desc.OPERATOR, "DML_OPERATOR_"), "desc": form}},
             "commands": commands}
    results = dxd.run(model)
    for k, (xs, expected) in enumerate(runs):
        for i, (t, want) in enumerate(zip(desc.outputs, expected)):
            raw = results[f"out{k}_{i}"]
            got = ref.read_elements(raw[out_pad:].tobytes(), t.data_type.numpy_dtype, list(t.sizes),
                                    None if t.strides is None else list(t.strides))
            want = np.asarray(want).reshape(t.sizes)
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
            touched = np.zeros(raw.size, bool)
            for idx in np.ndindex(*t.sizes):
                b = out_pad + sum(j * st_ for j, st_ in zip(idx, t.element_strides)) * t.element_size
                touched[b:b + t.element_size] = True
            assert (raw[~touched] == fills[k][i][~touched]).all()
        for i, t in enumerate(desc.inputs):
            assert results[f"in{k}_{i}"].tobytes() == bytes(resources[f"in{k}_{i}"]["initialValues"])


@pytest.mark.parametrize("op", sorted(CASES))
@SETTINGS
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_random_models_equal_the_array_api(op, data, seed):
    gen, values = CASES[op]
    desc, in_pad, out_pad = _with_pads(data.draw(gen()))
    rng = np.random.default_rng(seed)
    tin = desc.input_tensor
    runs = []
    for _ in range(data.draw(st.integers(1, 3))):   # dispatches of the one dispatchable
        x = dedupe_broadcast(values(tin.data_type, tin.sizes, rng), tin)
        runs.append(([x], [_array_api(desc, x)]))
    check_model(data.draw, rng, desc, runs, (in_pad, out_pad))


# -- the data-movement family: descriptions from the JSON form, against the family's array API

def _types(op):
    """The data types the operator's newest support table allows."""
    return sorted(t.name for t in OPERATORS[op].SUPPORT[-1].types)


def _sizes(draw, rank, lo=1, hi=4):
    return [draw(st.integers(lo, hi)) for _ in range(rank)]


def _tensor(draw, dtype, sizes, broadcast=True):
    strides = draw(layouts(sizes, allow_broadcast=broadcast))
    return {"DataType": dtype, "Sizes": sizes, **({"Strides": strides} if strides is not None else {})}


def _inputs(desc, rng):
    return [dedupe_broadcast(logical_input(t.data_type, t.sizes, rng), t) for t in desc.inputs]


def family_join(draw, rng):
    rank, dtype = draw(st.integers(1, 4)), draw(st.sampled_from(_types("JOIN")))
    axis, base = draw(st.integers(0, rank - 1)), _sizes(draw, rank)
    parts = [base[:axis] + [draw(st.integers(1, 3))] + base[axis + 1:] for _ in range(draw(st.integers(1, 3)))]
    out = base[:axis] + [sum(p[axis] for p in parts)] + base[axis + 1:]
    desc = from_json({"Operator": "JOIN", "InputTensors": [_tensor(draw, dtype, p) for p in parts],
                      "OutputTensor": _tensor(draw, dtype, out, False), "Axis": axis})
    xs = _inputs(desc, rng)
    return desc, xs, [dml.join(xs, axis)]


def family_split(draw, rng):
    rank, dtype = draw(st.integers(1, 4)), draw(st.sampled_from(_types("SPLIT")))
    axis, base = draw(st.integers(0, rank - 1)), _sizes(draw, rank)
    pieces = [draw(st.integers(1, 3)) for _ in range(draw(st.integers(1, 3)))]
    size = base[:axis] + [sum(pieces)] + base[axis + 1:]
    desc = from_json({"Operator": "SPLIT", "InputTensor": _tensor(draw, dtype, size), "Axis": axis,
                      "OutputTensors": [_tensor(draw, dtype, base[:axis] + [p] + base[axis + 1:], False)
                                        for p in pieces]})
    xs = _inputs(desc, rng)
    return desc, xs, dml.split(xs[0], axis, pieces)


def family_tile(draw, rng):
    rank, dtype = draw(st.integers(1, 4)), draw(st.sampled_from(_types("TILE")))
    size, repeats = _sizes(draw, rank, hi=3), _sizes(draw, rank, hi=3)
    desc = from_json({"Operator": "TILE", "InputTensor": _tensor(draw, dtype, size), "Repeats": repeats,
                      "OutputTensor": _tensor(draw, dtype, [s * r for s, r in zip(size, repeats)], False)})
    xs = _inputs(desc, rng)
    return desc, xs, [dml.tile(xs[0], repeats)]


def family_padding1(draw, rng):
    rank, dtype = draw(st.integers(1, 4)), draw(st.sampled_from(_types("PADDING1")))
    size = _sizes(draw, rank, lo=2)
    mode = draw(st.sampled_from(["CONSTANT", "EDGE", "REFLECTION", "SYMMETRIC", "WRAP"]))
    hi = 1 if mode == "REFLECTION" else 2             # REFLECTION pads less than the size
    start, end = _sizes(draw, rank, 0, hi), _sizes(draw, rank, 0, hi)
    value = draw(st.integers(0, 100))
    desc = from_json({"Operator": "PADDING1", "InputTensor": _tensor(draw, dtype, size),
                      "OutputTensor": _tensor(draw, dtype, [s + a + b for s, a, b in zip(size, start, end)], False),
                      "PaddingMode": draw(st.sampled_from([mode, "DML_PADDING_MODE_" + mode])),
                      "PaddingValueDataType": dtype, "PaddingValue": value, "StartPadding": start,
                      "EndPadding": end})
    xs = _inputs(desc, rng)
    names = {"CONSTANT": "constant", "EDGE": "edge", "REFLECTION": "reflect", "SYMMETRIC": "symmetric",
             "WRAP": "wrap"}
    return desc, xs, [dml.pad(xs[0], start, end, names[mode], value)]


#: operator -> (its case generator, the array-API function it is checked against)
FAMILY = {"JOIN": (family_join, "join"), "SPLIT": (family_split, "split"), "TILE": (family_tile, "tile"),
          "PADDING1": (family_padding1, "pad")}


@pytest.mark.parametrize("op", sorted(FAMILY))
@SETTINGS
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_random_family_models_equal_the_array_api(op, data, seed):
    make, function = FAMILY[op]
    if op not in OPERATORS or not hasattr(dml, function):
        pytest.skip(f"DML_OPERATOR_{op} or opendml.{function} is not in opendml yet")
    rng = np.random.default_rng(seed)
    desc, xs, expected = make(data.draw, rng)
    check_model(data.draw, rng, desc, [(xs, expected)], (16 * data.draw(st.integers(0, 2)),
                                                         16 * data.draw(st.integers(0, 2))))


# -- the fuzz test -----------------------------------------------------------------------------

def _base_models() -> list[dict]:
    """Every bundled example as a model, and a few shapes of model the examples lack."""
    out = [dxd.example_model(e) for _, e in sorted(examples().items())]
    many = copy.deepcopy(out[0])
    many["resources"]["big"] = {"initialValuesDataType": "UINT8", "initialValues": {"valueCount": 256,
                                                                                    "valueStart": 0, "valueDelta": 1},
                                "sizeInBytes": 512}
    many["resources"]["mixed"] = {"initialValuesDataType": "UNKNOWN", "initialValues": [
        {"type": "UINT32", "value": 6}, {"name": "a", "type": "FLOAT32", "value": 2.5}]}
    many["commands"].append({"type": "print", "resource": "big", "verbose": True})
    many["commands"].append({"type": "writeFile", "resource": "output", "targetPath": "w.npy"})
    name = next(iter(many["dispatchables"]))
    many["commands"].append(copy.deepcopy(many["commands"][0]))
    many["commands"][-1]["bindings"] = {k: ({"name": v, "elementOffset": 0, "elementCount": 1 << 10}
                                            if isinstance(v, str) else v)
                                        for k, v in many["commands"][0]["bindings"].items()}
    many["dispatchables"][name]["executionFlags"] = ["NONE"]
    files = copy.deepcopy(out[0])                   # initialisers read from files the fuzz writes (NPY_FILES)
    files["resources"]["from_npy"] = {"initialValues": {"sourcePath": "x.npy"}}
    files["resources"]["from_raw"] = {"initialValuesDataType": "UINT16", "initialValues": {"sourcePath": "x.bin"}}
    files["commands"].append({"type": "print", "resource": "from_npy", "verbose": True})
    files["commands"].append({"type": "writeFile", "resource": "from_raw", "targetPath": "sub/raw.npy",
                              "dimensions": [2, 3]})
    floats = copy.deepcopy(out[0])                  # float values and fields as DxDispatch writes them
    floats["resources"]["f"] = {"initialValuesDataType": "FLOAT32",
                                "initialValues": [1.5, "nan", "inf", "-inf", -0.0, 3.4e38]}
    floats["resources"]["s"] = {"initialValuesDataType": "FLOAT16",
                                "initialValues": {"valueCount": 9, "valueStart": 65000, "valueDelta": -1e4}}
    floats["commands"].append({"type": "print", "resource": "f"})
    return out + [many, files, floats]


BASES = _base_models()
WORDS = ["resources", "dispatchables", "commands", "initialValues", "initialValuesDataType", "sizeInBytes",
         "valueCount", "value", "valueStart", "valueDelta", "sourcePath", "type", "desc", "Desc", "bindings",
         "name", "elementOffset", "elementCount", "elementSizeInBytes", "resource", "targetPath", "dimensions",
         "verbose", "DataType", "Sizes", "Strides", "Flags", "TotalTensorSizeInBytes", "InputCount", "Colour"]


def _replacement(rng: random.Random, old):
    r = rng.random()
    if isinstance(old, int) and not isinstance(old, bool) and r < 0.4:
        return rng.choice((old + 1, old - 1, -old, old * 1000, 0, 2**32 - 1, 2**32, 2**63, 2**64 + 1, 3, 16))
    if r < 0.45:
        return HUGE
    if r < 0.48:
        return DEEP
    if r < 0.6 and isinstance(old, str):
        return rng.choice((old.lower(), old + "X", "DML_OPERATOR_" + old, "../" + old, "/etc/passwd", "", "deferred",
                           "output", "input", "a/b", "nan", "UNKNOWN", "hlsl", "DML_OPERATOR_ELEMENT_WISE_ADD",
                           "\ud800", old + "\n", "x.npy", "x.png"))
    if r < 0.7:
        return {"name": rng.choice(("input", "output", "x")), "elementOffset": rng.choice((0, 1, 4, 16, 2**40)),
                "elementCount": rng.choice((1, 3, 1000)), "elementSizeInBytes": rng.choice((0, 1, 16, 3))}
    if r < 0.78:
        return {"valueCount": rng.choice((0, 1, 5, 2**32)), rng.choice(("value", "valueStart")): junk(rng),
                "valueDelta": rng.choice((1, -1, 0.5, "inf"))}
    return junk(rng, ["FLOAT16", "INT8", "OWNED_BY_DML", "writeFile", "print", "dispatch"])


def _gentle(rng: random.Random, obj: dict) -> None:
    """A change that often leaves the model valid: an integer off by one or
    moved to a nearby alignment, a name spelled the other way."""
    for _ in range(30):
        node, key = _walk(rng, obj)
        if key is None:
            continue
        v = node[key]
        if type(v) is int:
            node[key] = rng.choice((v + 1, v - 1, v + 4, v + 16, max(v - 16, 0)))
            return
        if isinstance(v, str) and v.startswith(("DML_", "FLOAT", "INT", "UINT")):
            short = v.split("_TYPE_")[-1].removeprefix("DML_OPERATOR_")
            node[key] = short if v != short else rng.choice(("DML_TENSOR_DATA_TYPE_", "DML_OPERATOR_")) + v
            return


def mutate_model(rng: random.Random, base: dict) -> str:
    obj = copy.deepcopy(base)
    if rng.random() < 0.35:
        _gentle(rng, obj)
        return json.dumps(obj)
    for _ in range(rng.choice((1, 1, 2, 3))):
        node, key = _walk(rng, obj)
        if key is None:
            continue
        op = rng.random()
        if op < 0.6:
            node[key] = _replacement(rng, node[key])
        elif op < 0.75:
            del node[key]
        elif op < 0.85 and isinstance(node, dict):
            node[rng.choice(WORDS)] = _replacement(rng, 1)
        elif op < 0.92:
            node[key] = [node[key]]
        elif isinstance(node, list):
            node.insert(key, copy.deepcopy(node[key]))
    text = json.dumps(obj)
    text = text.replace(json.dumps(HUGE), rng.choice(("9" * rng.choice((25, 400, 4301)),) + BIG_LITERALS))
    depth = rng.choice((9, 40, 3000))
    text = text.replace(json.dumps(DEEP), "[" * depth + "1" + "]" * depth)
    if rng.random() < 0.05:
        cut = rng.randrange(len(text) + 1)
        text = text[:cut] + rng.choice(("", "}", ",", "\x00", "NaN", "\n")) + text[cut + 1:]
    return text


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return str(tmp_path_factory.mktemp("dispatch-fuzz"))


@settings(max_examples=n_examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(rng=st.randoms(use_true_random=False), index=st.integers(0, len(BASES) - 1))
def test_mutated_models_exit_0_or_2_with_one_line(scratch, rng, index):
    text = mutate_model(rng, BASES[index])
    folder = os.path.join(scratch, "m")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.json")
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(text)
    with open(os.path.join(folder, "x.npy"), "wb") as f:
        f.write(npy_file(rng))
    with open(os.path.join(folder, "x.bin"), "wb") as f:
        f.write(bytes(rng.choice((12, 12, 12, 0, 5, 4096))))
    out_dir = os.path.join(scratch, "out")
    if os.path.isdir(out_dir):
        for name in os.listdir(out_dir):
            os.unlink(os.path.join(out_dir, name))
        os.rmdir(out_dir)
    # an output folder that cannot be written: nothing may run (no print) and the exit is 2
    unwritable = rng.random() < 0.1
    target = rng.choice(("/proc", "/proc/opendml-out", path + "/out")) if unwritable else out_dir
    argv = ["dispatch", path, "--output-dir", target, "--max-bytes", str(1 << 22)]
    if unwritable:
        rc, out, err = run_cli(argv)
        if rc != 2 or out or err.count("\n") != 1 or not err.startswith("opendml: error: "):
            raise Foreign(f"--output-dir {target}: exit {rc}, {len(out)} characters printed, stderr {err!r}: "
                          f"{text[:2000]}")
        return
    rc = check_cli(argv, text)                 # 0, 1 or 2; a 2 with exactly one line; never a traceback
    if rc == 1:
        raise Foreign(f"exit 1 from a model: {text[:2000]}")
    if rc == 2 and os.path.exists(out_dir):
        raise Foreign(f"exit 2 left {os.listdir(out_dir)} in --output-dir: {text[:2000]}")
    if rc == 0:
        assert sorted(os.listdir(out_dir)) == sorted(n + ".npy" for n in json.loads(text)["resources"])
    leftovers = [str(p) for p in pathlib.Path(folder).rglob(".opendml-*")]
    assert leftovers == [], leftovers
    if rc == 2:
        assert not os.path.exists(os.path.join(folder, "sub")), "a failed model left the folder it made"
    else:
        shutil.rmtree(os.path.join(folder, "sub"), ignore_errors=True)


def test_the_mutations_reach_both_outcomes(scratch):
    rng = random.Random(3)
    codes = []
    for i in range(120):
        text = mutate_model(rng, BASES[i % len(BASES)])
        path = os.path.join(scratch, "count.json")
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(text)
        codes.append(check_cli(["dispatch", path, "--max-bytes", str(1 << 22)], text))
    assert codes.count(0) >= 10 and codes.count(2) >= 40, {c: codes.count(c) for c in set(codes)}
