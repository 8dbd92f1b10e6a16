"""DxDispatch models (Microsoft's JSON format for running DirectML operators), run by opendml on the CPU or a CUDA GPU.

A model has ``resources`` (byte buffers with initial values), ``dispatchables`` (DirectML operators, ``"type":
"DML_OPERATOR_SLICE1"``, their ``desc`` in DirectML's field names) and ``commands`` run in order (``dispatch`` with
``bindings``, ``print``, ``writeFile``), in DxDispatch's format (``DxDispatch/doc/Guide.md`` in microsoft/DirectML)::

    results = opendml.dxdispatch.run("model.json", device="cpu", feature_level="6_4")
    results["output"]     # every resource after the last command: a 1-D array of
                          # its initialValuesDataType holding the whole buffer

The model runs as DxDispatch runs it: every resource allocated and initialised, every dispatchable created, compiled and
initialised, every command's bindings resolved and checked by DirectML's binding rules
(``elementOffset``/``elementCount`` in units of ``elementSizeInBytes``, by default the resource's type's size), then the
commands in order. Bytes no output element covers keep their values; no file is written before every command has run.

The operator descriptions are read generically from ``opendml.ops``, each operator there dispatchable; one DirectML has
but opendml does not raises ``UnsupportedError`` naming it. Errors name the resource, dispatchable or command, the field
and the rule.
"""
from __future__ import annotations

import sys

import numpy as np

from ..device import Device
from ..model.errors import DmlError, ValidationError
from ..model.feature_level import FeatureLevel
from ._dispatchables import (_Dispatchable, _name_tensors, _parse_command, _parse_dispatchable, _slot_bindings,
                             _Tables)
from ._examples import dumps, example_model, example_outputs
from ._output import (PendingWrites, check_output_dir, format_resource, print_resource, resource_array,
                      write_resources)
from ._read import (DEFAULT_MAX_BYTES, OPERATOR_TYPES, ModelError, _check_keys, _q, _type_name, load, loads,
                    model_limit)
from ._resources import _Budget, _parse_resource, _Resource, _Target

__all__ = ["run", "load", "loads", "model_limit", "ModelError", "OPERATOR_TYPES", "DEFAULT_MAX_BYTES",
           "example_model", "format_resource", "check_output_dir", "write_resources", "dumps", "example_outputs"]


def run(model, *, device: str | Device = "cpu", feature_level=None, base_dir=None, out=None,
        max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, np.ndarray]:
    """Run a DxDispatch model; return every resource after its last command.

    File initialisers and writeFile targets are relative to ``base_dir`` and must stay inside it. A writeFile command
    copies its resource to a temporary file beside its target as it runs; targets are written once every command has
    run. Errors are ``DmlError`` subclasses naming the resource, dispatchable or command.

    Parameters
    ----------
    model : str, os.PathLike or Mapping
        A path to the model's JSON file, or the model already parsed.
    device : str or Device, optional
        ``"cpu"`` (the default), ``"cuda"``, ``"cuda:N"``, or a ``Device``.
    feature_level : str, FeatureLevel or None, optional
        The level every dispatchable is validated at, such as ``"6_4"``. None (the default): the ``Device``'s level, or
        6_4 for a device given by name; with a ``Device``, it must be the device's.
    base_dir : str, os.PathLike or None, optional
        The folder file paths are relative to (default: the model file's, or the current folder for a dict).
    out : file-like or None, optional
        Where ``print`` commands and writeFile notices go (default: ``sys.stdout``).
    max_bytes : int, optional
        The most bytes the resources may take in all (default
        ``DEFAULT_MAX_BYTES``, 2 GiB; the run holds them and a few MiB more);
        a model file may hold a sixteenth of it, at least 1 MiB (``model_limit``).

    Returns
    -------
    dict[str, numpy.ndarray]
        Every resource by name, after the last command: a 1-D array of its initialValuesDataType over the whole buffer
        (UINT8 bytes for a list initialiser of mixed types); on the CPU a view of the buffer's own memory (no copy).

    Raises
    ------
    ModelError
        (a ``ValidationError``) If the model is malformed or unreadable: bad JSON (the literals NaN and Infinity and
        numbers too big for a double included), a model file not regular or over ``model_limit(max_bytes)``, a missing
        or unknown key, a bad value, a file path outside the model's folder, a .npy header cut short or malformed,
        resources over ``max_bytes``, a failing writeFile.
    ValidationError
        If a dispatchable's description breaks an operator rule, or ``feature_level`` is unknown or not the given
        ``Device``'s.
    UnsupportedError
        If a dispatchable is not an operator opendml has (or no DirectML operator), needs a higher feature level, or the
        device is unusable (``"cuda"`` without CUDA).
    BindingError
        If a binding breaks DirectML's binding rules (alignment, range,
        size, overlap).
    AllocationError
        (``opendml.runtime.alloc.AllocationError``, a ``ValidationError``)
        If a host copy of a resource cannot be allocated.
    TypeError
        If ``model`` is neither a path nor a mapping, ``base_dir`` no path, or ``out`` has no ``write``.
    ValueError
        If ``max_bytes`` is not a positive integer.
    """
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValueError(f"dxdispatch.run: max_bytes must be a positive integer; got {max_bytes!r}")
    if out is not None and not callable(getattr(out, "write", None)):
        raise TypeError(f"dxdispatch.run: out must be a file-like object (with write) or None; got "
                        f"{type(out).__name__}")
    obj, folder = load(model, base_dir, max_bytes=max_bytes)
    if isinstance(device, Device):
        if feature_level is not None and FeatureLevel.parse(feature_level) != device.feature_level:
            raise ValidationError(f"dxdispatch.run: feature_level {feature_level!r} differs from the device's "
                                  f"{device.feature_level.label}; give one of them")
    else:
        device = Device(device, feature_level=FeatureLevel.FL_6_4 if feature_level is None else feature_level)
    out = sys.stdout if out is None else out
    _check_keys(obj, ("$schema", "resources", "dispatchables", "commands"), "model",
                ("resources", "dispatchables", "commands"))
    for key, kind in (("resources", dict), ("dispatchables", dict), ("commands", list)):
        if not isinstance(obj[key], kind):
            raise ModelError(f"model.{key}: must be an {'object' if kind is dict else 'array'}; "
                             f"got {_type_name(obj[key])}")

    # 1. resources: allocated and initialised (piece by piece: no second copy of a buffer)
    budget = _Budget(max_bytes)
    resources: dict[str, _Resource] = {}
    for name, spec in obj["resources"].items():
        r, fill, offset = _parse_resource(name, spec, folder, budget)
        r.buffer = device.create_buffer(r.size)
        fill(_Target(r.buffer, offset))
        resources[name] = r

    # 2. dispatchables: created (validated), compiled and initialised
    dispatchables: dict[str, _Dispatchable] = {}
    for name, spec in obj["dispatchables"].items():
        d, init = _parse_dispatchable(name, spec, device)
        where = f"dispatchable {_q(name)}"
        if d.owned or init is not None:
            inputs, _ = _slot_bindings(d, {} if init is None else init, resources, f"{where}: bindings", init=True)
            try:
                device.initialize_operator(d.compiled, inputs)
            except DmlError as e:
                raise type(e)(f"{where}: {_name_tensors(str(e), d.compiled.desc)}") from None
        dispatchables[name] = d

    # 3. every command checked (bindings by DirectML's rules) before any runs
    tables = _Tables()
    commands = [_parse_command(i, c, dispatchables, resources, folder, tables) for i, c in enumerate(obj["commands"])]

    # 4. the commands, in order: prints stream to `out`; writeFile targets are written at the end (``PendingWrites``)
    writes = PendingWrites()
    try:
        for kind, where, details in commands:
            if kind == "dispatch":
                d, inputs, outputs = details
                device.execute(d.compiled, tables.table(d, inputs, outputs, where))
            elif kind == "print":
                r, verbose = details
                print_resource(r, out, verbose)
            else:
                writes.add(*details)
        results = {name: resource_array(r) for name, r in resources.items()}
        writes.commit(out)
    finally:
        writes.discard()
    return results
