"""A model's dispatchables (DirectML operators), their bindings and the
commands, each checked before anything runs."""
from __future__ import annotations

import collections
import dataclasses
import math
import os
import re

import numpy as np

from ..device import BufferBinding, CompiledOperator, Device
from ..jsonform import TENSOR_FIELDS, from_json
from ..model._checks import UINT32_MAX
from ..model.data_type import DataType
from ..model.errors import BindingError, DmlError, UnsupportedError
from ..model.tensor_desc import TensorFlags
from ..ops import ALIASES, OPERATORS, Float, ScalarUnion, Struct
from ._read import (_DATA_TYPES, _OTHER_DISPATCHABLES, OPERATOR_TYPES, ModelError, _check_keys,
                    _data_type, _float_values, _float_word, _model_path, _q, _short, _string, _type_name, _uint)

# -- dispatchables -----------------------------------------------------------------------

def _operator_class(type_name, where: str):
    """The opendml description class of ``DML_OPERATOR_X`` (or the abbreviated ``X``)."""
    if not isinstance(type_name, str):
        raise ModelError(f"{where}.type: must be a string such as \"DML_OPERATOR_SLICE1\"; got {_short(type_name)}")
    if type_name.lower() in _OTHER_DISPATCHABLES:
        raise UnsupportedError(f"{where}: {_OTHER_DISPATCHABLES[type_name.lower()]} (type {_short(type_name)}) "
                               f"are not supported by opendml; it runs DirectML operators")
    name = type_name.removeprefix("DML_OPERATOR_")
    name = ALIASES.get(name, name)          # the old names DirectML.h keeps (SCATTER)
    if name in OPERATORS:
        return OPERATORS[name]
    if name in OPERATOR_TYPES and name != "INVALID":
        raise UnsupportedError(f"{where}: DML_OPERATOR_{name} is a DirectML operator that opendml does not "
                               f"implement; opendml implements {', '.join('DML_OPERATOR_' + n for n in OPERATORS)}")
    raise ModelError(f"{where}.type: unknown operator {_short(type_name)}; expected DML_OPERATOR_<NAME> (or <NAME>) "
                     f"with one of {', '.join(OPERATORS)}")


_TENSOR_FIELDS = ("Type", "Desc", *TENSOR_FIELDS)


def _tensor_json(obj, where: str) -> dict:
    """A model's DML_TENSOR_DESC in opendml's JSON form, read as DxDispatch reads it: the ``{"Type", "Desc"}``
    wrapper unwrapped, Flags one name or a list of names OR-ed together, TotalTensorSizeInBytes 0 "computed", an
    empty Strides packed."""
    _check_keys(obj, _TENSOR_FIELDS, where)
    if "Type" in obj:
        t = obj["Type"]
        if not isinstance(t, str) or t.removeprefix("DML_TENSOR_TYPE_") != "BUFFER":
            raise ModelError(f"{where}.Type: must be DML_TENSOR_TYPE_BUFFER (or BUFFER); got {_short(t)}")
    if "Desc" in obj:
        inner = {k: v for k, v in obj.items() if k not in ("Type", "Desc")}
        if inner:
            raise ModelError(f"{where}: with Desc, the tensor's fields go inside Desc; got {', '.join(inner)} "
                             f"beside it")
        where = f"{where}.Desc"
        obj = obj["Desc"]
        _check_keys(obj, _TENSOR_FIELDS[2:], where)
    out = {k: v for k, v in obj.items() if k != "Type"}
    if "DataType" in out:
        out["DataType"] = _data_type(out["DataType"], f"{where}.DataType", unknown_ok=False).name
    if "Flags" in out:
        flags = out["Flags"]
        names = flags if isinstance(flags, list) else [flags]
        value = 0
        for i, f in enumerate(names):
            at = f"{where}.Flags" + (f"[{i}]" if isinstance(flags, list) else "")
            n = f.removeprefix("DML_TENSOR_FLAG_") if isinstance(f, str) else None
            if n not in ("NONE", "OWNED_BY_DML"):
                raise ModelError(f"{at}: must be DML_TENSOR_FLAG_NONE or DML_TENSOR_FLAG_OWNED_BY_DML (or NONE, "
                                 f"OWNED_BY_DML), or a list of them; got {_short(f)}")
            value |= int(TensorFlags[n])
        out["Flags"] = value
    if type(out.get("TotalTensorSizeInBytes")) is int and out["TotalTensorSizeInBytes"] == 0:
        del out["TotalTensorSizeInBytes"]
    if type(out.get("Strides")) is list and not out["Strides"]:
        del out["Strides"]
    return out


def _desc_json(cls, desc, where: str) -> dict:
    """A model's ``desc`` in opendml's JSON form (``jsonform``): every tensor field given, each read as DxDispatch
    reads it; FLOAT values may be "nan", "inf" or "-inf"; a scalar union typed FLOAT16 or FLOAT32 is rounded as
    DxDispatch stores it (FLOAT16 through FLOAT32), FLOAT16 also given as its bits, ``{"UInt16": 15360}``."""
    if not isinstance(desc, dict):
        raise ModelError(f"{where}: must be an object; got {_type_name(desc)}")
    allowed = (*(s.json for s in cls.SLOTS), *cls.COUNTS, *(f.json for f in cls.FIELDS))
    for key in desc:
        if key not in allowed:
            raise ModelError(f"{where}: unknown field {_q(key)}; DML_{cls.OPERATOR}_OPERATOR_DESC has "
                             f"{', '.join(allowed)}")
    out = {"Operator": cls.OPERATOR, **desc}
    for slot in cls.SLOTS:              # (an optional output's sizes are derivable; a model gives every tensor)
        if slot.optional and slot.role == "input" and desc.get(slot.json) is None:
            continue                       # a _Maybenull_ input left out or null (DIAGONAL_MATRIX1's)
        if slot.json not in desc:
            raise ModelError(f"{where}: missing required field {_q(slot.json)} (a tensor of "
                             f"DML_{cls.OPERATOR}_OPERATOR_DESC)")
        value = desc[slot.json]
        if slot.many:
            if not isinstance(value, list):
                raise ModelError(f"{where}.{slot.json}: must be an array of tensor descriptions; "
                                 f"got {_type_name(value)}")
            out[slot.json] = [_tensor_json(v, f"{where}.{slot.json}[{i}]") for i, v in enumerate(value)]
        else:
            out[slot.json] = _tensor_json(value, f"{where}.{slot.json}")
    for f in cls.FIELDS:
        if f.json in desc:
            out[f.json] = _field_json(f, desc[f.json], desc)
    return out


def _field_json(f, value, desc: dict):
    """A field's value with DxDispatch's number conventions applied, by the
    field's kind (``opendml.ops``); shapes and ranges are checked by ``jsonform``
    and the operator."""
    if isinstance(f, Float):
        return _float_word(value)
    if isinstance(f, Struct) and isinstance(value, dict):
        return {k: _float_word(v) for k, v in value.items()}
    if isinstance(f, ScalarUnion):
        raw = desc.get(f.type_field)
        dt = None
        if isinstance(raw, str) and raw.removeprefix("DML_TENSOR_DATA_TYPE_") in _DATA_TYPES:
            dt = DataType[raw.removeprefix("DML_TENSOR_DATA_TYPE_")]
        if dt == DataType.FLOAT16 and isinstance(value, dict) and set(value) == {"UInt16"} \
                and isinstance(value["UInt16"], int) and not isinstance(value["UInt16"], bool) \
                and 0 <= value["UInt16"] <= 0xFFFF:
            return float(np.array(value["UInt16"], np.uint16).view(np.float16))
        if dt is not None and dt.numpy_dtype.kind == "f":
            member = isinstance(value, dict) and len(value) == 1
            v = _float_word(next(iter(value.values())) if member else value)
            if dt in (DataType.FLOAT16, DataType.FLOAT32) and isinstance(v, (int, float)) \
                    and not isinstance(v, bool):
                try:
                    v = float(_float_values(np.array([float(v)]), dt, f.json)[0])
                except (OverflowError, ModelError):
                    pass                      # out of range: the operator's rule says so
            return {next(iter(value)): v} if member else v
    return value


def _jsonform_error(e: DmlError, where: str) -> DmlError:
    """An error of ``jsonform`` or of a description, re-worded to name the dispatchable."""
    text = " ".join(str(e).split())
    if text.startswith("$."):
        text = "desc." + text[2:]
    elif text.startswith("$:"):
        text = "desc" + text[1:]
    return type(e)(f"{where}: {text}")


@dataclasses.dataclass
class _Dispatchable:
    name: str
    compiled: CompiledOperator
    slots: tuple                     # the operator class's SLOTS (ops._spec.Tensor)
    tensors: dict                    # slot json -> tuple of TensorDesc (or () where left out)
    owned: set                       # slot json names whose tensors are OWNED_BY_DML (bound at initialisation)


_DISPATCHABLE_FIELDS = ("type", "Type", "desc", "Desc", "executionFlags", "dmlCompileType", "bindings")
_EXECUTION_FLAGS = ("NONE", "ALLOW_HALF_PRECISION_COMPUTATION", "DISABLE_META_COMMANDS", "DESCRIPTORS_VOLATILE")


def _parse_dispatchable(name: str, obj, device: Device) -> tuple[_Dispatchable, object]:
    where = f"dispatchable {_q(name)}"
    _check_keys(obj, _DISPATCHABLE_FIELDS, where)
    types = [k for k in ("type", "Type") if k in obj]
    descs = [k for k in ("desc", "Desc") if k in obj]
    if len(types) != 1:
        raise ModelError(f"{where}: needs exactly one field \"type\" (the operator, e.g. DML_OPERATOR_SLICE1)")
    cls = _operator_class(obj[types[0]], where)
    if len(descs) != 1:
        raise ModelError(f"{where}: needs exactly one field \"desc\" (DML_{cls.OPERATOR}_OPERATOR_DESC)")
    if "executionFlags" in obj:
        flags = obj["executionFlags"]
        for i, f in enumerate(flags if isinstance(flags, list) else [flags]):
            n = f.removeprefix("DML_EXECUTION_FLAG_") if isinstance(f, str) else None
            if n not in _EXECUTION_FLAGS:
                raise ModelError(f"{where}.executionFlags: unknown flag {_short(f)}; expected "
                                 f"{', '.join(_EXECUTION_FLAGS)} (with or without DML_EXECUTION_FLAG_)")
    if "dmlCompileType" in obj and obj["dmlCompileType"] not in ("DmlCompileOp", "DmlCompileGraph"):
        raise ModelError(f"{where}.dmlCompileType: must be \"DmlCompileOp\" or \"DmlCompileGraph\"; "
                         f"got {_short(obj['dmlCompileType'])}")
    form = _desc_json(cls, obj[descs[0]], f"{where}: desc")
    try:
        desc = from_json(form)
        compiled = device.compile_operator(device.create_operator(desc))
    except DmlError as e:
        raise _jsonform_error(e, where) from None
    tensors, owned = {}, set()
    for slot in cls.SLOTS:
        value = getattr(desc, slot.attr)
        ts = () if value is None else tuple(value) if slot.many else (value,)
        tensors[slot.json] = ts
        if slot.role == "input" and any(t.flags & TensorFlags.OWNED_BY_DML for t in ts):
            owned.add(slot.json)
    return _Dispatchable(name, compiled, cls.SLOTS, tensors, owned), obj.get("bindings")


# -- bindings ----------------------------------------------------------------------------

_BINDING_FIELDS = ("name", "elementOffset", "elementCount", "elementSizeInBytes", "format", "counter",
                   "counterOffsetBytes", "shape")


def _binding(source, resources: dict, where: str) -> BufferBinding:
    """One binding source (a resource name, or ``{"name", "elementOffset",
    "elementCount", "elementSizeInBytes"}``) as a DML_BUFFER_BINDING."""
    if isinstance(source, str):
        source = {"name": source}
    if not isinstance(source, dict):
        raise ModelError(f"{where}: must be a resource name or an object {{\"name\", \"elementOffset\", "
                         f"\"elementCount\", \"elementSizeInBytes\"}}; got {_type_name(source)} {_short(source)}")
    _check_keys(source, _BINDING_FIELDS, where, ("name",))
    for k in ("format", "counter", "counterOffsetBytes", "shape"):
        if k in source:
            raise ModelError(f"{where}.{k}: applies to HLSL and ONNX dispatchables only; a DirectML operator's "
                             f"binding is a byte range (name, elementOffset, elementCount, elementSizeInBytes)")
    name = _string(source["name"], f"{where}.name")
    if name not in resources:
        raise ModelError(f"{where}.name: no resource named {_q(name)} in the model")
    r = resources[name]
    size = _uint(source.get("elementSizeInBytes", 0), f"{where}.elementSizeInBytes")
    if size == 0:
        if r.data_type == DataType.UNKNOWN and ("elementOffset" in source or "elementCount" in source):
            raise ModelError(f"{where}: resource {_q(name)} has initialValuesDataType UNKNOWN: give "
                             f"elementSizeInBytes with elementOffset or elementCount")
        size = r.element_size
    offset = _uint(source.get("elementOffset", 0), f"{where}.elementOffset") * size
    if offset > r.size:
        raise BindingError(f"{where}: the binding must start inside resource {_q(name)} of {r.size} bytes: "
                           f"elementOffset * elementSizeInBytes = {offset} > {r.size}")
    count = _uint(source.get("elementCount", 0), f"{where}.elementCount")
    nbytes = count * size if count else r.size - offset
    if offset + nbytes > r.size:
        raise BindingError(f"{where}: the range must lie inside resource {_q(name)} of {r.size} bytes: "
                           f"(elementOffset + elementCount) * elementSizeInBytes = {offset} + {nbytes} > {r.size}")
    return BufferBinding(r.buffer, offset, nbytes)


def _slot_bindings(d: _Dispatchable, bindings, resources: dict, where: str, *, init: bool) -> tuple[list, list]:
    """(input bindings, output bindings) of a dispatch, in the operator's
    tensor order; at initialisation (``init``) the OWNED_BY_DML inputs only."""
    if not isinstance(bindings, dict):
        raise ModelError(f"{where}: must be an object mapping tensor fields to resources; got {_type_name(bindings)}")
    names = [s.json for s in d.slots]
    for key in bindings:
        if key not in names:
            raise ModelError(f"{where}: {_q(key)} is no tensor field of {d.compiled.desc.OPERATOR}; expected one of "
                             f"{', '.join(names)}")
    inputs, outputs = [], []
    for slot in d.slots:
        tensors = d.tensors[slot.json]
        at = f"{where}.{slot.json}"
        given = bindings.get(slot.json)
        if init != (slot.json in d.owned):      # bound at the other time (an owned input: at initialisation)
            if given is not None and init:
                raise ModelError(f"{at}: only OWNED_BY_DML inputs are bound at initialisation (the "
                                 f"dispatchable's bindings); bind {slot.json} in a dispatch command")
            if given is not None:
                raise BindingError(f"{at}: the tensor is OWNED_BY_DML: DirectML binds it once, at initialisation "
                                   f"(the dispatchable's \"bindings\"), and nothing at execution")
            if slot.role == "input":
                inputs.extend([None] * len(tensors))
            continue
        if slot.json not in bindings:
            if not tensors:
                continue
            if init:
                raise ModelError(f"{at}: the OWNED_BY_DML tensor must be bound in the dispatchable's "
                                 f"\"bindings\" (DirectML binds it once, at initialisation)")
            raise ModelError(f"{at}: nothing bound for the required tensor {slot.json}")
        if not tensors:
            raise ModelError(f"{at}: the description leaves {slot.json} out, so nothing may be bound to it")
        sources = given if isinstance(given, list) else [given]
        if len(sources) != len(tensors):
            raise ModelError(f"{at}: the bind point takes {len(tensors)} resource(s) (one per tensor of "
                             f"{slot.json}); got {len(sources)}")
        out = [_binding(s, resources, f"{at}[{i}]" if isinstance(given, list) else at) for i, s in enumerate(sources)]
        (inputs if slot.role == "input" else outputs).extend(out)
    return inputs, outputs


def _name_tensors(message: str, desc) -> str:
    """A binding message of ``Device`` ("input 0 ...") with each tensor's field named too: "input 0 (InputTensors[0])
    ..."."""
    names = {"input": [n for n, _ in desc.named_tensors("input")],
             "output": [n for n, _ in desc.named_tensors("output")]}

    def named(m):
        kind, i = m.group(1), int(m.group(2))
        return f"{kind} {i} ({names[kind][i]})" if i < len(names[kind]) else m.group(0)
    return re.sub(r"\b(input|output) (\d+)\b", named, " ".join(message.split()))


class _Tables:
    """The binding tables of a model's dispatch commands, by dispatchable and bindings. A command keeps its checked
    bindings (one object per distinct range, shared by every command binding it), not a table: the tables, each
    holding its prepared dispatch, live in a cache of at most ``LIMIT``, so commands repeating a dispatch share one,
    and a model of many commands holds no table per command (each held about 1.9 KB)."""

    LIMIT = 64

    def __init__(self):
        self._tables: collections.OrderedDict = collections.OrderedDict()
        self._ranges: dict = {}
        self._commands: dict = {}

    def command(self, d: _Dispatchable, inputs: tuple, outputs: tuple, where: str) -> tuple:
        """A dispatch command ``("dispatch", where, (d, inputs, outputs))``, its bindings bound now (DirectML's
        binding rules checked, ``where`` naming it in an error); a command repeating an earlier one's dispatchable
        and bindings is that one's tuple."""
        key = (d.name, inputs, outputs)
        if key not in self._commands:
            self.table(d, inputs, outputs, where)
            self._commands[key] = ("dispatch", where, (d, inputs, outputs))
        return self._commands[key]

    def shared(self, bindings: list) -> tuple:
        """``bindings`` as a tuple of the one object of each distinct range (None stays None)."""
        return tuple(None if b is None else self._ranges.setdefault(b, b) for b in bindings)

    def table(self, d: _Dispatchable, inputs: tuple, outputs: tuple, where: str):
        """A binding table of ``d`` with these bindings (bound, so checked, where the cache has none), ``where``
        naming the command in an error."""
        key = (d.name, inputs, outputs)
        table = self._tables.get(key)
        if table is not None:
            self._tables.move_to_end(key)
            return table
        table = d.compiled.device.create_binding_table(d.compiled)
        try:
            table.bind_inputs(list(inputs))
            table.bind_outputs(list(outputs))
        except DmlError as e:
            raise type(e)(f"{where}: {_name_tensors(str(e), d.compiled.desc)}") from None
        self._tables[key] = table
        if len(self._tables) > self.LIMIT:
            self._tables.popitem(last=False)
        return table


def _parse_command(i: int, cmd, dispatchables: dict, resources: dict, folder: str, tables: _Tables):
    """A command checked before anything runs: ``(kind, where, details)``; a dispatch's bindings are bound in a
    table of ``tables``."""
    where = f"command {i}"
    if not isinstance(cmd, dict):
        raise ModelError(f"{where}: must be an object; got {_type_name(cmd)}")
    kind = cmd.get("type")
    if not isinstance(kind, str) or kind.lower() not in ("dispatch", "print", "writefile"):
        raise ModelError(f"{where}.type: must be \"dispatch\", \"print\" or \"writeFile\"; got {_short(kind)}")
    kind = kind.lower()
    if kind == "dispatch":
        _check_keys(cmd, ("type", "dispatchable", "bindings", "threadGroupCount"), where, ("dispatchable", "bindings"))
        if "threadGroupCount" in cmd:     # HLSL's; DirectML operators ignore it, as in DxDispatch
            tgc = cmd["threadGroupCount"]
            if not isinstance(tgc, list) or len(tgc) != 3:
                raise ModelError(f"{where}.threadGroupCount: must be an array of 3 positive integers; "
                                 f"got {_short(tgc)}")
            for j, v in enumerate(tgc):
                _uint(v, f"{where}.threadGroupCount[{j}]", 1, UINT32_MAX)
        name = _string(cmd["dispatchable"], f"{where}.dispatchable")
        if name not in dispatchables:
            raise ModelError(f"{where}.dispatchable: no dispatchable named {_q(name)} in the model")
        where = f"command {i} (dispatch {_q(name)})"
        d = dispatchables[name]
        inputs, outputs = _slot_bindings(d, cmd["bindings"], resources, f"{where}: bindings", init=False)
        return tables.command(d, tables.shared(inputs), tables.shared(outputs), where)
    allowed = ("type", "resource", "verbose") if kind == "print" else ("type", "resource", "targetPath", "dimensions")
    _check_keys(cmd, allowed, where, ("resource",) + (("targetPath",) if kind == "writefile" else ()))
    name = _string(cmd["resource"], f"{where}.resource")
    if name not in resources:
        raise ModelError(f"{where}.resource: no resource named {_q(name)} in the model")
    r = resources[name]
    if kind == "print":
        verbose = cmd.get("verbose", False)
        if not isinstance(verbose, bool):
            raise ModelError(f"{where}.verbose: must be true or false; got {_short(verbose)}")
        if r.data_type == DataType.UNKNOWN:
            raise ModelError(f"{where}: resource {_q(name)} has initialValuesDataType UNKNOWN, so it has no "
                             f"element type to print")
        return "print", where, (r, verbose)
    path = _model_path(cmd["targetPath"], folder, f"{where}.targetPath")
    ext = os.path.splitext(path)[1].lower()
    if ext in (".png", ".jpg", ".jpeg"):
        raise UnsupportedError(f"{where}.targetPath: writing images ({ext}) is not supported by opendml; "
                               f"write .npy or raw bytes (.dat, .bin)")
    if os.path.isdir(path):
        raise ModelError(f"{where}.targetPath: {_short(cmd['targetPath'])} is a folder")
    shape = None
    if "dimensions" in cmd:
        dims = cmd["dimensions"]
        if not isinstance(dims, list) or not dims:
            raise ModelError(f"{where}.dimensions: must be a non-empty array of sizes; got {_short(dims)}")
        shape = [_uint(v, f"{where}.dimensions[{j}]", 1, UINT32_MAX) for j, v in enumerate(dims)]
        count = r.size // r.element_size
        if math.prod(shape) != count:
            raise ModelError(f"{where}.dimensions: the product of {shape} must equal the resource's element "
                             f"count {count} ({r.size} bytes of {r.numpy_dtype})")
    return "writefile", where, (r, path, ext == ".npy", shape)
