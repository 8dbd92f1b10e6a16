"""Fuzzing with a bounded budget (the whole file runs in seconds; the long
campaign is ``benchmarks/fuzz_campaign.py``, which reuses the generators and
checks below).

(a) Random operator descriptions of every operator in ``opendml.ops.OPERATORS``
    built through the JSON form, from each class's ``TENSORS`` and ``FIELDS``
    (new operators are picked up by themselves), often invalid: they validate
    or raise ``DmlError``, nothing else; valid small ones run on the CPU and
    the compiled and NumPy kernels give the same bytes.
(b) Random mutations of the bundled example files through
    ``opendml.cli.main(["run" | "validate", path])``: exit code 0, 1 or 2, and
    for 2 exactly one line on stderr and nothing resembling a traceback.
(c) Random (mostly bad) arguments to the array API (``slice``, ``slice1``,
    ``unfold``, ``fold``, ``slice_grad``, whichever exist): a result or a
    ``DmlError``/``TypeError``, nothing else.

The generators take a ``random.Random``; Hypothesis supplies one (``st.randoms``)
so failures shrink and replay, the campaign seeds its own.
"""
from __future__ import annotations

import contextlib
import copy
import inspect
import io
import json
import math
import os
import random
import re
from importlib import resources

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import opendml as dml
from opendml.ops._move import MoveOperatorDesc  # noqa: E402
from opendml import cli
from opendml.jsonform import EXTRA_FIELDS, TENSOR_FIELDS, from_json
from opendml.ops import OPERATORS
from .conftest import n_examples

# -- shared material --------------------------------------------------------------------

TYPE_NAMES = [t.name for t in dml.DataType]           # includes UNKNOWN, UINT4, INT4: invalid here
JUNK = [None, True, False, "x", "", "4", 1.5, -0.0, float("nan"), float("inf"), [], {}, [[1]], [1, [2]],
        {"a": 1}, -1, 0, 2**31, 2**32 - 1, 2**32, 2**63, 2**64, -(2**63) - 1, 10**30]


def junk(rng: random.Random, more=()):
    """A value of a wrong type or size (a fresh copy: cases never share containers)."""
    return copy.deepcopy(rng.choice(JUNK + list(more)))


#: Placeholders replaced in the JSON text (values json.dumps cannot write).
HUGE, DEEP = "__opendml_huge_int__", "__opendml_deep__"
#: The largest run a fuzz case may make (bytes of input and output).
RUN_BYTES = 1 << 20


def example_specs() -> list[dict]:
    """The bundled example files (whatever operators they cover)."""
    out = []
    for f in sorted(resources.files("opendml.examples").iterdir(), key=lambda p: p.name):
        if f.name.endswith(".json"):
            out.append(json.loads(f.read_text(encoding="utf-8")))
    return out


EXAMPLES = example_specs()


def all_field_names() -> list[str]:
    names = {"Operator", "DimensionCount", *EXTRA_FIELDS}
    for cls in OPERATORS.values():
        names.update(cls.TENSORS)
        names.update(f.json for f in cls.FIELDS)
    return sorted(names)


FIELD_NAMES = all_field_names()


class Foreign(AssertionError):
    """An exception opendml must not raise, with what reproduces it."""


# -- (a) descriptions through the JSON form ----------------------------------------------

def _small(rng: random.Random) -> int:
    return rng.choice((1, 1, 1, 2, 2, 2, 3, 3, 4, 5))


def _entry(rng: random.Random) -> object:
    r = rng.random()
    if r < 0.80:
        return rng.choice((0, 0, 1, 1, 1, 1, 2, 2, 3, 4, -1))
    if r < 0.95:
        return rng.choice((-2, 5, 7, 9, 2**31 - 1, -(2**31), 2**32 - 1))
    return junk(rng)


def random_tensor(rng: random.Random, sizes: list, data_type: str) -> dict:
    t = {"DataType": data_type, "Sizes": list(sizes)}
    r = rng.random()
    if r < 0.15:                      # padded / permuted / broadcast strides
        strides, step = [], 1
        for s in reversed(sizes):
            strides.insert(0, step if rng.random() > 0.2 else 0)
            step *= (s if isinstance(s, int) and 0 < s < 100 else 1) + rng.choice((0, 0, 1, 3))
        if rng.random() < 0.3:
            rng.shuffle(strides)
        t["Strides"] = strides
    elif r < 0.18:
        t["Strides"] = [_entry(rng) for _ in range(rng.choice((len(sizes), len(sizes), len(sizes) + 1)))]
    if rng.random() < 0.05:
        t["TotalTensorSizeInBytes"] = rng.choice((0, 16, 64, 4096, 2**20, 2**64, -4, "16"))
    if rng.random() < 0.05:
        t["GuaranteedBaseOffsetAlignment"] = rng.choice((0, 1, 4, 16, 24, 64, 2**33))
    if rng.random() < 0.05:
        t["Flags"] = rng.choice(("NONE", "OWNED_BY_DML", "SHARED", 0, 1, 2, None))
    if rng.random() < 0.03:
        t["DimensionCount"] = rng.choice((len(sizes), len(sizes) + 1, "3"))
    if rng.random() < 0.02:
        del t[rng.choice(("DataType", "Sizes"))]
    return t


def _seeded(rng: random.Random, cls) -> dict | None:
    """An example of ``cls`` with some integers nudged (most stay valid)."""
    seeds = [e for e in EXAMPLES if e.get("Operator") == cls.OPERATOR]
    if not seeds:
        return None
    obj = copy.deepcopy(rng.choice(seeds))
    for key in ("Name", "Title", "Source", "Input", "ExpectedOutput", "Inputs", "ExpectedOutputs"):
        obj.pop(key, None)

    def nudge(v):
        if isinstance(v, bool) or not isinstance(v, int):
            return v
        return max(v + rng.choice((-1, 1, 2)), 0) if rng.random() < 0.15 else v

    def tensors(value):
        return [t for t in (value if isinstance(value, list) else [value])
                if isinstance(t, dict) and isinstance(t.get("Sizes"), list)]

    for key, value in obj.items():
        if key in cls.TENSORS:
            for t in tensors(value):
                t["Sizes"] = [nudge(v) for v in t["Sizes"]]
        elif isinstance(value, list):
            obj[key] = [nudge(v) for v in value]
        elif isinstance(value, int) and not isinstance(value, bool):
            obj[key] = nudge(value)
    if rng.random() < 0.3:
        dt = rng.choice(TYPE_NAMES[1:12])
        for name in cls.TENSORS:
            for t in tensors(obj.get(name)):
                t["DataType"] = dt
    return obj


FLOATS = (0.0, -0.0, 1.0, -1.5, 2.5, 0.5, 1e30, -1e30, 3.5e38, 1e300, float("nan"), float("inf"),
          float("-inf"), 7, -3, 255, 2**31, 2**64)
#: Values at and past the edges of FLOAT and of the double: an integer beyond
#: the double range must be a DmlError in every float field, never OverflowError.
EDGE_FLOATS = (10**400, -(10**400), 2**1024, 1e39, -1e39, 3.4028235e38, 3.4028236e38, 65504.0, 65520.0,
               float.fromhex("0x1.fffffffffffffp+1023"), 5e-324, np.float64(1e300), np.float32(-2.5), np.int64(7))


def random_field(rng: random.Random, f, d: int):
    """A JSON value for field ``f`` of any kind the registry declares (an
    integer array of ``d`` entries, an integer, a float, a bool, an enum, a
    scalar union, a struct), often valid, sometimes not."""
    kind = f.kind
    if kind == "int[]":
        n = d if rng.random() > 0.05 else rng.randint(0, 9)
        return [_entry(rng) for _ in range(max(n, 0))]
    if rng.random() < 0.04:
        return junk(rng)
    if kind in ("uint", "int"):
        return rng.choice((0, 0, 1, 1, 2, 2, 2, 3, 4)) if rng.random() < 0.9 else _entry(rng)
    if kind == "float":
        return rng.choice(FLOATS if rng.random() < 0.8 else EDGE_FLOATS[:10])
    if kind == "bool":
        return rng.choice((True, False, 0, 1))
    if kind == "enum":
        members = [m for m in f.enum if m.name not in ("UNKNOWN",)]
        m = rng.choice(members)
        r = rng.random()
        if r < 0.6:
            return m.name
        if r < 0.75:
            from opendml.ops._spec import ENUM_PREFIXES
            return ENUM_PREFIXES.get(f.enum, "") + m.name
        if r < 0.9:
            return int(m)
        return rng.choice(("NOPE", 99, -1, m.name.lower()))
    if kind == "scalar":
        v = rng.choice(FLOATS + (0, 1, -1, 127, 128, -129, 65535, 2**63, -(2**63)) + EDGE_FLOATS[:10])
        if rng.random() < 0.3:
            member = rng.choice(("Float32", "Int8", "UInt8", "Int16", "UInt16", "Int32", "UInt32", "Int64",
                                 "UInt64", "Float64", "Float16"))
            return {member: v}
        return v
    if kind == "struct":
        if rng.random() < 0.2:
            return None
        value = {m: rng.choice(FLOATS if rng.random() < 0.8 else EDGE_FLOATS[:10]) for m, _ in f.members}
        if rng.random() < 0.1:
            value.pop(rng.choice(list(value)))
        if rng.random() < 0.05:
            value["Colour"] = 1
        return value
    return junk(rng)


def _slot_tensors(rng: random.Random, slot, rank: int, sizes: list, dt: str):
    """One tensor, or for a ``many`` slot a list of 1-3 (sizes differing along
    one shared axis, as JOIN and SPLIT need)."""
    if not slot.many:
        return random_tensor(rng, sizes, dt)
    axis = rng.randrange(max(rank, 1))
    out = []
    for _ in range(rng.choice((1, 2, 2, 3))):
        s = list(sizes)
        if rank and rng.random() < 0.8:
            s[axis] = _small(rng)
        out.append(random_tensor(rng, s, dt))
    if rng.random() < 0.03:
        return rng.choice(([], None, random_tensor(rng, sizes, dt)))
    return out


def random_description(rng: random.Random, cls) -> dict:
    """A JSON description of ``cls`` (often invalid), built from its SLOTS and
    FIELDS only: every tensor slot (one tensor, or a list of them for a
    ``many`` slot) and every field kind."""
    if rng.random() < 0.3:
        seeded = _seeded(rng, cls)
        if seeded is not None:
            return seeded
    rank = rng.choice((1, 2, 3, 3, 4, 4, 4, 5, 6)) if rng.random() > 0.02 else rng.choice((0, 9))
    sizes = [_small(rng) if rng.random() > 0.03 else _entry(rng) for _ in range(rank)]
    dt = rng.choice(TYPE_NAMES[1:12]) if rng.random() > 0.03 else rng.choice(TYPE_NAMES + ["FLOAT128", 1, None])
    name = cls.OPERATOR if rng.random() > 0.03 else rng.choice(
        ("DML_OPERATOR_" + cls.OPERATOR, cls.OPERATOR.lower(), "CONV", 7, None))
    obj: dict = {"Operator": name}
    for slot in cls.SLOTS:
        if slot.role == "input":
            obj[slot.json] = _slot_tensors(rng, slot, rank, sizes, dt)
    d = rank - 2 if rng.random() < 0.5 else rank       # spatial ops count fields over the spatial axes
    for f in cls.FIELDS:
        fill = getattr(f, "fill", None)
        if (fill is not None and rng.random() < 0.3) or (not f.required and rng.random() < 0.3) \
                or rng.random() < 0.02:
            continue
        obj[f.json] = random_field(rng, f, d)
    for slot in cls.SLOTS:
        if slot.role != "output" or (cls.OUTPUT_DERIVABLE and rng.random() < 0.5):
            continue
        out_rank = rng.choice((rank, rank, rank, 3, max(rank - 1, 1), rank + 1))
        out_sizes = [_small(rng) for _ in range(out_rank)] if rng.random() < 0.5 or out_rank != rank else list(sizes)
        out_dt = dt if rng.random() > 0.25 else rng.choice(TYPE_NAMES[1:12])   # CAST's outputs differ
        obj[slot.json] = _slot_tensors(rng, slot, out_rank, out_sizes, out_dt)
        if cls.OUTPUT_DERIVABLE and not slot.many and rng.random() < 0.2:
            obj[slot.json].pop("Sizes", None)          # derived sizes, given type
    if rng.random() < 0.05:
        obj["DimensionCount"] = rng.choice((d, rank, "2", None))
    if rng.random() < 0.08:                            # a field of any type
        obj[rng.choice(list(obj))] = junk(rng)
    if rng.random() < 0.03:
        obj[rng.choice(FIELD_NAMES + ["Colour"])] = junk(rng)
    return obj


_GOT = re.compile(r"(\w*Tensor)\.Sizes\[(\d+)\]")
_LENGTH = re.compile(r"(\w+) must have (\d+) entries")
_RANGE = re.compile(r"(\w+)\[(\d+)\] must be (?:non-zero and )?in \[(-?\d+), (-?\d+)\]")


def repair(obj: dict, message: str) -> bool:
    """Nudge the description towards what the error message asks for, so that
    more generated descriptions are valid: a field's length (``... must have 4
    entries``), a field entry out of its range (set to the lower bound, or 1),
    or a tensor's Sizes entry (``... = 12; got 5``, ``got 2 != 3``, ``got 1 +
    3 > 2``, ``got ... = 9 >= 4``, ``[1, 3]; got 5``). Generic over operators:
    it reads only the message forms of the shared rule helpers."""
    if (m := _LENGTH.search(message)) and isinstance(obj.get(m.group(1)), list):
        n = int(m.group(2))
        obj[m.group(1)] = (obj[m.group(1)] + [1] * n)[:n]
        return True
    if (m := _RANGE.search(message)) and isinstance(obj.get(m.group(1)), list) \
            and int(m.group(2)) < len(obj[m.group(1)]):
        lo = int(m.group(3))
        obj[m.group(1)][int(m.group(2))] = 1 if lo <= 1 <= int(m.group(4)) else lo
        return True
    m = _GOT.search(message)
    if m is None or "; got " not in message:
        return False
    tensor, index = m.group(1), int(m.group(2))
    rule, got = message.rsplit("; got ", 1)
    if (q := re.match(r"(\d+) != (\d+)$", got)):
        target = int(q.group(2))
    elif (q := re.match(r"(\d+) \+ (\d+) > (\d+)$", got)):
        target = int(q.group(1)) + int(q.group(2))
    elif (q := re.search(r"= (\d+) >= (\d+)$", got)):
        target = int(q.group(1)) + 1
    elif (q := re.search(r"= (\d+) > (\d+) \+ \d+ \+ \d+ = (\d+)$", got)):
        target = int(q.group(2)) + int(q.group(1)) - int(q.group(3))
    else:
        numbers = re.findall(r"-?\d+", rule[m.end():])
        if not numbers:
            return False
        target = int(numbers[-1])
    t = obj.get(tensor)
    if not isinstance(t, dict) or not isinstance(t.get("Sizes"), list) or index >= len(t["Sizes"]) or target < 1:
        return False
    if t["Sizes"][index] == target or target > 64:
        return False
    t["Sizes"][index] = target
    return True


def _distinct_offsets(t) -> bool:
    """Whether no two elements of the tensor share memory (small tensors)."""
    grids = np.meshgrid(*(np.arange(s) * st_ for s, st_ in zip(t.sizes, t.element_strides)), indexing="ij")
    offsets = sum(grids).reshape(-1) if grids else np.zeros(1)
    return np.unique(offsets).size == offsets.size


def check_description(obj: dict, *, compare: bool = True) -> tuple[str, str]:
    """Build, validate and (when small) run a description. Returns the outcome
    ("invalid", "valid-large" or "ran") and a detail (the error class of an
    invalid one, the lowest feature level of a valid one); any exception but a
    DmlError (or a DmlError from a valid description's run) raises
    ``Foreign`` with the description."""
    original = json.dumps(obj, default=str)
    try:
        for _ in range(8):
            try:
                desc = from_json(copy.deepcopy(obj))
                break
            except dml.DmlError as e:
                if not repair(obj, str(e)):
                    raise
        else:
            desc = from_json(obj)
    except dml.DmlError as e:
        return "invalid", type(e).__name__
    except Exception as e:  # noqa: BLE001 - the finding
        raise Foreign(f"from_json raised {type(e).__name__}: {e}\n{json.dumps(obj, default=str)}\n"
                      f"(generated as {original})") from e
    try:
        lowest = desc.lowest_feature_level()
        level = lowest.label if lowest is not None else "none"
        try:
            desc.validate()
        except dml.UnsupportedError as e:
            return "invalid", type(e).__name__
        try:
            xs = [cli.default_input(desc, RUN_BYTES, t, n) for n, t in desc.named_tensors("input")]
        except cli.UsageError:
            return "valid-large", level
        if cli.run_bytes(desc, xs) > RUN_BYTES or \
                any(t.total_tensor_size_in_bytes > 64 * RUN_BYTES for t in desc.inputs + desc.outputs):
            return "valid-large", level
        ys = dml.Device("cpu").run_all(desc, *xs)
        assert len(ys) == len(desc.outputs)
        for y, t in zip(ys, desc.outputs):
            assert y.shape == t.sizes and y.dtype == t.data_type.numpy_dtype
        if compare and dml.config().compiled_available and all(_distinct_offsets(t) for t in desc.outputs):
            other = "numpy" if dml.config().cpu_kernels == "compiled" else "compiled"
            with dml.configure(cpu_kernels=other):
                ys2 = dml.Device("cpu").run_all(desc, *xs)
            if any(y.tobytes() != y2.tobytes() for y, y2 in zip(ys, ys2)):
                raise Foreign(f"the compiled and NumPy kernels differ\n{json.dumps(obj, default=str)}")
        return "ran", level
    except Foreign:
        raise
    except dml.DmlError as e:
        raise Foreign(f"a valid description failed to run: {type(e).__name__}: {e}\n"
                      f"{json.dumps(obj, default=str)}") from e
    except Exception as e:  # noqa: BLE001 - the finding
        raise Foreign(f"{type(e).__name__}: {e}\n{json.dumps(obj, default=str)}") from e


# -- (b) mutated example files through the command line --------------------------------

def _walk(rng: random.Random, obj):
    """A random container inside ``obj`` and a key or index of it."""
    node = obj
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            return node, None
        key = rng.choice(keys)
        child = node[key]
        if isinstance(child, (dict, list)) and child and rng.random() < 0.55:
            node = child
            continue
        return node, key


def _replacement(rng: random.Random, old):
    r = rng.random()
    if isinstance(old, int) and not isinstance(old, bool) and r < 0.45:
        return rng.choice((old + 1, old - 1, -old, old * 1000, 0, 2**32 - 1, 2**32, 2**63, 2**64 + 1,
                           old + 2**32, -(2**31) - 1))
    if r < 0.55:
        return HUGE
    if r < 0.60:
        return DEEP
    if r < 0.65:
        return [rng.randint(-3, 9) for _ in range(rng.choice((0, 1, 3, 9, 100)))]
    if r < 0.70 and isinstance(old, str):
        return rng.choice((old.lower(), old + "X", "DML_TENSOR_DATA_TYPE_" + old, " " + old, old[:-1]))
    return junk(rng, [TYPE_NAMES[rng.randrange(len(TYPE_NAMES))], rng.choice(list(OPERATORS))])


def mutate_spec(rng: random.Random, base: dict) -> str:
    """JSON text of a randomly mutated copy of ``base``: values changed in type
    or size, keys deleted or added, nesting changed, huge integers, deep
    nesting, NaN; sometimes broken JSON text."""
    obj = copy.deepcopy(base)
    if rng.random() < 0.3:                       # a gentle change: one integer off by one
        for _ in range(20):
            node, key = _walk(rng, obj)
            if key is not None and type(node[key]) is int:
                node[key] += rng.choice((-1, 1))
                break
        return json.dumps(obj)
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
        node, key = _walk(rng, obj)
        if key is None:
            continue
        op = rng.random()
        if op < 0.60:
            node[key] = _replacement(rng, node[key])
        elif op < 0.72:
            del node[key]
        elif op < 0.80 and isinstance(node, dict):
            node[rng.choice(FIELD_NAMES + list(TENSOR_FIELDS) + ["Colour"])] = _replacement(rng, 1)
        elif op < 0.86:
            node[key] = [node[key]] if rng.random() < 0.5 else {"Sizes": node[key]}
        elif op < 0.92 and isinstance(node, list):
            node.insert(key, copy.deepcopy(node[key]))
        elif isinstance(obj.get("Operator"), str):
            obj["Operator"] = rng.choice(list(OPERATORS))       # another operator's fields
    text = json.dumps(obj)
    text = text.replace(json.dumps(HUGE), rng.choice(("9" * rng.choice((25, 400, 4301, 6000)),) + BIG_LITERALS))
    depth = rng.choice((9, 40, 3000))
    text = text.replace(json.dumps(DEEP), "[" * depth + "1" + "]" * depth)
    if rng.random() < 0.05:
        cut = rng.randrange(len(text) + 1)
        text = text[:cut] + rng.choice(("", "}", ",", "\x00", "\ud800", "NaN", "\n")) + text[cut + 1:]
    return text


#: Number literals past the double (Python's json reads them as infinities) or
#: not JSON at all, which HUGE may become in a mutated text.
BIG_LITERALS = ("1e400", "-1e999", "1E+309", "NaN", "Infinity", "-Infinity", "1e39", "-0.0e-400")


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.main(argv)
        except SystemExit as e:      # argparse
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def check_cli(argv: list[str], text: str = "") -> int:
    """Run the command line; raise ``Foreign`` unless the exit code is 0, 1 or 2,
    a 2 comes with exactly one line on stderr and no traceback, and a 0 or 1
    with nothing on stderr."""
    rc, out, err = run_cli(argv)
    problem = None
    if rc not in (0, 1, 2):
        problem = f"exit code {rc}"
    elif rc == 2 and (err.count("\n") != 1 or not err.endswith("\n") or "Traceback" in err
                      or not re.match(r"opendml( \w+)?: error: ", err)):
        problem = "exit 2 without exactly one 'opendml: error:' line"
    elif rc in (0, 1) and err:
        problem = f"exit {rc} with stderr output"
    if problem:
        raise Foreign(f"{problem}: argv={argv}\nstderr={err[:2000]!r}\nspec={text[:3000]}")
    return rc


def npy_file(rng: random.Random) -> bytes:
    """A .npy file, often broken: cut at any length, a header byte changed,
    a header of another shape, dtype or order than its data."""
    import io
    x = (np.arange(6) % 2).astype(rng.choice(("<f4", ">i2", "|u1", "<f8", "|b1", "<c8"))).reshape(
        rng.choice(((6,), (2, 3), (3, 2, 1))))
    f = io.BytesIO()
    np.save(f, np.asfortranarray(x) if rng.random() < 0.3 else x)
    data = bytearray(f.getvalue())
    r = rng.random()
    if r < 0.3:
        return bytes(data[:rng.randrange(len(data))])
    if r < 0.6:
        header = data.index(b"\n")
        i = rng.randrange(8, header + 1)
        data[i] = rng.choice(b"(){}[]',:0129 \n\xff\x00")
    elif r < 0.7:
        data[8:10] = rng.choice((b"\xff\xff", b"\x00\x00", b"\x10\x00"))
    elif r < 0.75:
        data[6:8] = rng.choice((b"\x02\x00", b"\x03\x00", b"\x09\x00"))
    return bytes(data)


def cli_argv(rng: random.Random, path: str, scratch: str) -> list[str]:
    argv = [rng.choice(("run", "run", "validate")), path]
    if argv[0] == "run":
        argv += ["--max-bytes", str(RUN_BYTES)]
        if rng.random() < 0.15:                  # an --input .npy file, often cut short or malformed
            npy = os.path.join(scratch, "in.npy")
            with open(npy, "wb") as f:
                f.write(npy_file(rng))
            argv += ["--input", npy]
        if rng.random() < 0.2:
            argv += ["--output", rng.choice((os.path.join(scratch, "y.npy"), os.path.join(scratch, "no", "y"),
                                              scratch))]
    if rng.random() < 0.1:
        argv += ["--feature-level", rng.choice(("6_4", "2_1", "1_0", "9_9", "x"))]
    return argv


# -- (c) the array API ---------------------------------------------------------------------

ARRAY_FUNCTIONS = [getattr(dml, n) for n in ("slice", "slice1", "unfold", "fold", "slice_grad") if hasattr(dml, n)]


def random_array(rng: random.Random):
    r = rng.random()
    if r < 0.04:
        return rng.choice((None, "abc", [1, 2], 3, {"a": 1}, np.float32(2)))
    rank = rng.choice((0, 1, 2, 3, 3, 4, 4, 5))
    shape = tuple(rng.choice((0, 1, 1, 2, 3, 4, 5)) if rng.random() < 0.05 else rng.randint(1, 5)
                  for _ in range(rank))
    dtype = rng.choice(("float32", "float16", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
                        "int64", "uint64") + (("bool", "complex64", ">f4", ">i2", "object", "U1") if r < 0.15 else ()))
    x = np.arange(math.prod(shape)).reshape(shape).astype(dtype) if dtype not in ("object", "U1") else \
        np.empty(shape, dtype)
    if x.ndim and rng.random() < 0.2:
        x = x[tuple(slice(None, None, rng.choice((1, -1, 2))) for _ in shape)]
    if x.ndim >= 2 and rng.random() < 0.1:
        x = x.swapaxes(0, 1)
    if rng.random() < 0.03:
        x = np.ma.array(x)
    return x


def _argument(rng: random.Random, n: int, name: str):
    """One argument: mostly a plausible list of ``n`` small integers (sizes-like
    names get 1s and 2s, others 0s, 1s and 2s), else a scalar, a wrong length,
    out-of-range entries, a NumPy array, a dict, a set, an iterator, junk."""
    r = rng.random()
    sizes_like = "size" in name
    if r < 0.60:
        pool = (1, 1, 1, 2) if sizes_like else (0, 0, 1, 1, 1, 2)
        return [rng.choice(pool) for _ in range(n)]
    if r < 0.70:
        return rng.choice((0, 1, 1, 2, 3, -1))
    k = n if rng.random() < 0.6 else rng.randint(0, 9)
    if r < 0.80:
        return [_entry(rng) for _ in range(k)]
    if r < 0.85:
        return np.array([rng.randint(0, 3) for _ in range(k)], dtype=rng.choice(("int64", "uint8", "float64")))
    if r < 0.90:
        return {i: 1 for i in range(k)}
    return junk(rng, [set(range(k)), tuple(range(k)), range(k), iter([1] * k)])


def random_array_call(rng: random.Random):
    """(function, x, keyword arguments) of one array-API call."""
    fn = rng.choice(ARRAY_FUNCTIONS)
    x = random_array(rng)
    rank = getattr(x, "ndim", 1)
    n = rank if rng.random() < 0.5 else max(rank - 2, 0)     # per axis, or per spatial axis
    params = list(inspect.signature(fn).parameters.values())[1:]
    args = {}
    for p in params:
        if p.default is not inspect.Parameter.empty and rng.random() < 0.4:
            continue
        args[p.name] = _argument(rng, n, p.name)
    return fn, x, args


@contextlib.contextmanager
def memory_limit(headroom: int = 2 << 30):
    """Limit the address space to what the process maps now plus ``headroom``
    (Linux; elsewhere nothing): a valid array-API call whose output is huge
    (an UNFOLD padded by 2**31 gives 8 GiB) then fails fast with NumPy's
    MemoryError instead of filling the machine's memory."""
    try:
        import resource
        with open("/proc/self/status") as f:
            vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, StopIteration, ValueError):
        yield
        return
    limit = vm + headroom if hard == resource.RLIM_INFINITY else min(vm + headroom, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _call(fn, x, args) -> tuple[str, str]:
    try:
        y = fn(x, **args)
    except (dml.DmlError, TypeError) as e:
        return "refused", type(e).__name__
    except MemoryError:      # a valid call whose output does not fit (see memory_limit)
        return "valid-large", "MemoryError"
    except Exception as e:  # noqa: BLE001 - the finding
        raise Foreign(f"{fn.__name__}(x of {type(x).__name__} {getattr(x, 'dtype', '')} "
                      f"{getattr(x, 'shape', '')}, **{args!r}) raised {type(e).__name__}: {e}") from e
    if not isinstance(y, np.ndarray):
        raise Foreign(f"{fn.__name__} returned {type(y).__name__}")
    return "ran", str(y.dtype)


def check_array_call(fn, x, args) -> tuple[str, str]:
    """("ran", dtype) or ("refused", the error class); any other exception
    raises ``Foreign``. A refused call is tried again with its list arguments
    cut or padded to one entry per axis, then per spatial axis (more calls
    get through validation)."""
    outcome = _call(fn, x, args)
    rank = getattr(x, "ndim", None)
    if outcome[0] == "refused" and isinstance(rank, int):
        for n in (rank, rank - 2):
            if n >= 0 and any(isinstance(v, list) and len(v) != n for v in args.values()):
                outcome = _call(fn, x, {k: (v + [1] * n)[:n] if isinstance(v, list) else v
                                        for k, v in args.items()})
                if outcome[0] == "ran":
                    break
    return outcome


# -- the tests -----------------------------------------------------------------------------

FUZZ = settings(max_examples=n_examples(100), deadline=None, database=None,
                phases=(Phase.explicit, Phase.generate, Phase.shrink),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


#: Every registered operator: the generator covers every field kind and slot
#: the registry declares (``random_field``, ``_slot_tensors``).
GENERATED = sorted(OPERATORS)


def test_every_operator_is_generated():
    kinds = {f.kind for c in OPERATORS.values() for f in c.FIELDS}
    assert kinds <= {"int[]", "uint", "int", "float", "bool", "enum", "scalar", "struct"}, kinds
    assert set(GENERATED) == set(OPERATORS) and len(GENERATED) >= 16


@pytest.mark.parametrize("name", GENERATED)
@FUZZ
@given(rng=st.randoms(use_true_random=False))
def test_descriptions_validate_or_raise_dml_error_and_valid_ones_run(name, rng):
    check_description(random_description(rng, OPERATORS[name]))


@pytest.mark.parametrize("name", GENERATED)
def test_the_generator_reaches_valid_runs_of_every_operator(name):
    rng = random.Random(14)
    outcomes = [check_description(random_description(rng, OPERATORS[name]), compare=False)[0] for _ in range(300)]
    assert outcomes.count("ran") >= 5 and outcomes.count("invalid") >= 30, {o: outcomes.count(o) for o in set(outcomes)}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return str(tmp_path_factory.mktemp("fuzz"))


@settings(FUZZ, max_examples=n_examples(150))
@given(rng=st.randoms(use_true_random=False), index=st.integers(0, len(EXAMPLES) - 1))
def test_mutated_examples_through_the_command_line(scratch, rng, index):
    text = mutate_spec(rng, EXAMPLES[index])
    path = os.path.join(scratch, "spec.json")
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(text)
    check_cli(cli_argv(rng, path, scratch), text)


@settings(FUZZ, max_examples=n_examples(150))
@given(rng=st.randoms(use_true_random=False))
def test_array_api_with_random_arguments(rng):
    fn, x, args = random_array_call(rng)
    with memory_limit():
        check_array_call(fn, x, args)


def test_known_hostile_cli_inputs(scratch):
    """The issue's list, as fixed cases of (b)."""
    base = next(e for e in EXAMPLES if e["Operator"] == "SLICE1")
    path = os.path.join(scratch, "known.json")
    for change in ({"ExpectedOutput": "abc"}, {"ExpectedOutput": [[[[300]]]]}, {"ExpectedOutput": [[1], [1, 2]]},
                   {"ExpectedOutput": [[{}]]}, {"Input": None}):
        with open(path, "w") as f:
            json.dump({**base, **change}, f)
        assert check_cli(["run", path]) == 2
    for text in (json.dumps(base).replace("[0, 0, 0, 1]", "[" + "9" * 5000 + ", 0, 0, 1]"),
                 json.dumps(base)[:-1] + ', "Title": ' + "[" * 5000 + "]" * 5000 + "}"):
        with open(path, "w") as f:
            f.write(text)
        assert check_cli(["run", path]) == 2 and check_cli(["validate", path]) == 2


# -- (d) strided output descriptions through every entry point ---------------------------------

def strided_outputs(rng: random.Random, form: dict, desc) -> dict | None:
    """``form`` with every output tensor given a random layout of its own
    (dimensions permuted, rows padded, a base offset), none overlapping
    itself; None where a layout would be too large."""
    form = copy.deepcopy(form)
    for name, t in desc.named_tensors("output"):
        order = list(range(t.rank))
        rng.shuffle(order)                              # order[0] varies fastest
        strides, step = [0] * t.rank, rng.choice((1, 1, 2, 3))
        for axis in order:
            strides[axis] = step
            step *= t.sizes[axis] + rng.choice((0, 0, 1, 3))
        if step > 1 << 16:
            return None
        base, _, index = name.partition("[")
        target = form[base][int(index[:-1])] if index else form[base]
        target["Strides"] = strides
        target.pop("TotalTensorSizeInBytes", None)
    return form


def _through(raw: np.ndarray, t) -> np.ndarray:
    """A resource's bytes read through tensor ``t``."""
    raw = raw.view(np.uint8)
    scratch = dml.Device("cpu").create_buffer(max(raw.size, t.total_tensor_size_in_bytes, 4))
    scratch.write(raw)
    return scratch.read(t)


def check_entry_points(form: dict) -> str:
    """A valid description (often with strided outputs) run through the
    Device, a DxDispatch model of it (``example_model``) and, for the
    data-movement family, ``opendml::move``: the same elements everywhere.
    Returns "ran", or why it did not."""
    from opendml import dxdispatch
    try:
        desc = from_json(copy.deepcopy(form))
        desc.validate()
    except dml.DmlError:
        return "invalid"
    if any(t.total_tensor_size_in_bytes > RUN_BYTES for t in desc.inputs + desc.outputs):
        return "large"
    if any(s.many and s.role == "input" and len({bool(t.flags & dml.TensorFlags.OWNED_BY_DML)
                                                 for t in getattr(desc, s.attr)}) > 1 for s in desc.SLOTS):
        # JOIN's InputTensors with OWNED_BY_DML on some tensors only: opendml's
        # DxDispatch runner binds a tensor array at initialisation or at a
        # dispatch as a whole, so such a model cannot be written (a known gap)
        return "mixed OWNED_BY_DML array"
    try:
        model = dxdispatch.example_model(form)
        results = dxdispatch.run(model, out=io.StringIO(), max_bytes=64 * RUN_BYTES)
    except Exception as e:  # noqa: BLE001 - the finding
        raise Foreign(f"a valid description failed as a model: {type(e).__name__}: {e}\n{json.dumps(form)}") from e
    names = ["input"] if len(desc.inputs) == 1 else [f"input{i}" for i in range(len(desc.inputs))]
    xs = [_through(results[n], t) for n, t in zip(names, desc.inputs)]
    want = dml.Device("cpu").run_all(desc, *xs)
    got = [y for _, y, _ in dxdispatch.example_outputs(form, results)]
    routes = {"dxdispatch": got}
    if isinstance(desc, MoveOperatorDesc):    # (the operators opendml::move runs)
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            import opendml.torch  # noqa: F401 - registers the custom operators
            try:
                routes["opendml::move"] = [o.numpy() for o in torch.ops.opendml.move(
                    [torch.from_numpy(np.ascontiguousarray(x)) for x in xs], json.dumps(form))]
            except dml.ValidationError as e:
                if "map two elements" not in str(e):
                    raise Foreign(f"opendml::move refused a valid description: {e}\n{json.dumps(form)}") from e
            except Exception as e:  # noqa: BLE001 - the finding
                raise Foreign(f"opendml::move raised {type(e).__name__}: {e}\n{json.dumps(form)}") from e
    for route, ys in routes.items():
        if len(ys) != len(want) or any(y.tobytes() != w.tobytes() for y, w in zip(ys, want)):
            raise Foreign(f"{route} differs from the Device route\n{json.dumps(form)}")
    return "ran"


@pytest.mark.parametrize("name", GENERATED)
@settings(FUZZ, max_examples=n_examples(40))
@given(rng=st.randoms(use_true_random=False))
def test_strided_outputs_through_every_entry_point(name, rng):
    obj = random_description(rng, OPERATORS[name])
    for _ in range(8):
        try:
            desc = from_json(copy.deepcopy(obj))
            break
        except dml.DmlError as e:
            if not repair(obj, str(e)):
                return
        except Exception as e:  # noqa: BLE001 - the finding
            raise Foreign(f"from_json raised {type(e).__name__}: {e}\n{json.dumps(obj, default=str)}") from e
    else:
        return
    form = strided_outputs(rng, dml.jsonform.to_json(desc), desc)
    if form is not None:
        check_entry_points(form)


def test_the_entry_point_check_reaches_every_family_operator():
    """The examples with strided outputs run through every entry point."""
    rng = random.Random(5)
    ran = set()
    for example in EXAMPLES:
        form = {k: v for k, v in example.items() if k not in ("Name", "Title", "Source", "Input", "ExpectedOutput",
                                                             "Inputs", "ExpectedOutputs")}
        desc = from_json(copy.deepcopy(form))
        strided = strided_outputs(rng, dml.jsonform.to_json(desc), desc)
        if strided is not None and check_entry_points(strided) == "ran":
            ran.add(desc.OPERATOR)
    assert ran >= {n for n, c in OPERATORS.items() if issubclass(c, MoveOperatorDesc)}, ran


# -- (e) float arguments of the family's array API ------------------------------------------------

@settings(FUZZ, max_examples=n_examples(100))
@given(rng=st.randoms(use_true_random=False))
def test_family_float_arguments_at_the_edges(rng):
    x = np.arange(6).reshape(2, 3).astype(rng.choice(("float16", "float32", "float64", "int8", "uint32")))
    value = rng.choice(EDGE_FLOATS + FLOATS)
    calls = [lambda: dml.pad(x, 1, 1, value=value), lambda: dml.identity(x, scale=value),
             lambda: dml.identity(x, bias=value), lambda: dml.identity(x, scale=value, bias=value)]
    try:
        y = rng.choice(calls)()
    except (dml.DmlError, TypeError):
        return
    except Exception as e:  # noqa: BLE001 - the finding
        raise Foreign(f"{type(e).__name__}: {e} (x {x.dtype}, value {value!r})") from e
    assert isinstance(y, np.ndarray)
