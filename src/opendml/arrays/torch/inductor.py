"""Inductor's calls of opendml's operators, without the dispatcher's Python entry.

Inductor's Python wrapper calls an operator it cannot lower through PyTorch's dispatcher
(``torch.ops.opendml_cpp.unfold.default(x, [...])``), an entry that costs more host time than a repeated call's work
in the call cache's C function (``runtime.calls.call``): a compiled layer around a small tensor is host-bound. So
each packed C++ window operator gets a *direct kernel* (``torch.ops.<namespace>._direct_<name>``) and a lowering
that is Inductor's own fallback with one change: the wrapper calls the direct kernel. It offers the call to the call
cache as the operator's kernel does (``node.cpp``'s ``run_op``) and passes every call the cache does not serve (a
first call, a tensor that requires grad, a dispatch mode, a list of the wrong length) to the operator itself; the
cache serves only calls it recorded from these kernels, so answers and errors are the operator's. The move
operators get one too (``direct_move``), offering ``calls.move`` the code their kernel (``library._move``) records a
description's calls under (``MOVE_CODES``).

This relies on Inductor internals (``torch._inductor.lowering``, the ``python_kernel_name`` of
``ir.FallbackKernel``). ``prepare()`` installs the lowerings once Inductor is loaded (the fake kernels call it
while AOTAutograd traces); anything unlike what it expects leaves Inductor's dispatcher call, and ``status()`` says
why. The C++ and FX wrappers keep the operator, and the C++ wrapper's lowering of ``move`` raises
``UnsupportedError``.

Inductor's and AOTAutograd's on-disk caches key a graph by its FX code, which names opendml's operators but not
what their fake kernels, adjoints and lowerings do: importing this module appends ``opendml-<digest of opendml's
Python sources>`` to ``torch.compiler.config.cache_key_tag``, so a graph compiled with another version of opendml is
compiled again, never loaded.
"""
from __future__ import annotations

import functools
import hashlib
import pathlib
import sys
import threading

import torch

from ...model.errors import UnsupportedError
from ...runtime import calls as _calls

#: The call cache's functions, and its C direct kernel (None without the compiled extension).
_call, _move = _calls.call, _calls.move
_packed = getattr(_calls, "packed", None)

#: "waiting" (Inductor not loaded yet), "on", "off: <why>"; the operators installed (namespace -> name -> op).
_STATE = {"status": "waiting", "done": {}}
#: Description text -> the call cache's code for the move operators' calls with it (``library._move`` records
#: them under it: no arguments, the inputs as one sequence, the outputs as a list).
MOVE_CODES: dict = {}
_lock = threading.Lock()
#: Name prefix of the direct kernels on the operator namespace.
PREFIX = "_direct_"


def _source_digest(root: pathlib.Path = pathlib.Path(__file__).resolve().parents[2]) -> str:
    """A digest of opendml's version and of the Python sources under its package folder ``root`` (examples aside)."""
    from ..._version import __version__
    h = hashlib.sha256(__version__.encode())
    for path in sorted(root.rglob("*.py")):
        if "examples" not in path.relative_to(root).parts:
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _tag_compile_caches() -> None:
    """Append opendml's tag to ``torch.compiler.config.cache_key_tag`` (once)."""
    config, ours = torch.compiler.config, f"opendml-{_source_digest()}"
    tag = config.cache_key_tag
    if isinstance(tag, str) and ours not in tag.split(";"):
        config.cache_key_tag = f"{tag};{ours}" if tag else ours


_tag_compile_caches()


def direct_kernel(op, spec: tuple, split: int):
    """The direct kernel of the C++ operator ``op`` (its kernel spec ``(cached, code, extra, fallback)`` and the
    number of lists its one list argument packs): the call cache's C function ``packed`` (calls.c,
    call_cache_packed) with them bound, which passes every call it does not serve (the module's docstring says
    which) to ``op``; ``op`` itself without the compiled call cache, which would serve none."""
    if _packed is None or spec[0] is not _call:
        return op
    return functools.partial(_packed, spec[1], split, op, tuple(spec[2]))


def direct_move(op):
    """The direct kernel of a move operator ``op`` (``(Tensor[] inputs, str desc) -> Tensor[]``): the call cache
    offered the description's code (``MOVE_CODES``) and the inputs as they are, a call it does not serve to ``op``."""
    codes, move = MOVE_CODES, _move

    def kernel(inputs, desc):
        code = codes.get(desc) if type(desc) is str else None
        if code is not None:
            out = move(code, inputs)
            if out is not None:
                return out
        return op(inputs, desc)
    kernel.__name__ = kernel.__qualname__ = PREFIX + "move"
    return kernel


def attach(namespace: str, ops: dict, defs: dict) -> None:
    """Set the direct kernel of each packed operator of ``ops`` (name -> OpOverload) and of ``move`` on the operator
    namespace ``torch.ops.<namespace>``; ``defs`` is ``library.CPP_DEFS``."""
    ns = getattr(torch.ops, namespace)
    for name, op in ops.items():
        split = defs[name][7]
        if split > 0 or name == "move":
            setattr(ns, PREFIX + name, direct_kernel(op, defs[name][1], split) if split else direct_move(op))


def status() -> str:
    """Whether Inductor's wrappers call the direct kernels: ``"on"``, ``"waiting"`` (no Inductor), ``"off: <why>"``."""
    return _STATE["status"]


def prepare(namespace: str, ops: dict) -> None:
    """Install the lowerings of ``ops``' operators with a direct kernel once ``torch._inductor`` is loaded (cheap
    when done or not yet possible)."""
    done = _STATE["done"].get(namespace, {})
    if len(done) == len(ops) or "torch._inductor.lowering" not in sys.modules:
        return
    with _lock:
        done = _STATE["done"].get(namespace, {})
        if len(done) == len(ops) or _STATE["status"].startswith("off"):
            return
        try:
            _install(namespace, ops, done)
            _STATE["status"] = "on"
        except Exception as e:     # noqa: BLE001 - Inductor's own fallback (the dispatcher call) serves
            _STATE["status"] = f"off: {type(e).__name__}: {e}"
        _STATE["done"][namespace] = dict(ops)


def _install(namespace: str, ops: dict, done: dict) -> None:
    from torch._inductor import ir
    from torch._inductor.lowering import fallback_handler, lowerings, register_lowering
    from torch._inductor.virtualized import V

    ns = getattr(torch.ops, namespace)
    for name, op in ops.items():
        attr = PREFIX + name
        if name in done or not hasattr(ns, attr) or op in lowerings:
            continue
        default = fallback_handler(op)
        kernel_name = f"torch.ops.{namespace}.{attr}"

        def lower(*args, _default=default, _op=op, _name=kernel_name, **kwargs):
            graph = V.graph
            if _name.endswith(PREFIX + "move") and (getattr(graph, "cpp_wrapper", False)
                                                   or getattr(graph, "aot_mode", False)):
                # (its generated C++ embeds the JSON text unescaped and reads the list of outputs as one tensor: a
                # C++ compile error, or a crash once the text has no double quotes)
                raise UnsupportedError(f"{_op}: Inductor's C++ wrapper (cpp_wrapper, AOTInductor) cannot call "
                                       f"opendml's move operator (a JSON text argument and a list of outputs); "
                                       f"compile this graph with Inductor's Python wrapper (the default)")
            result = _default(*args, **kwargs)
            if not (getattr(graph, "cpp_wrapper", True) or getattr(graph, "fx_wrapper", False)
                    or getattr(graph, "aot_mode", True)):
                node = _fallback_node(ir, result)
                if node is not None and getattr(node, "op_overload", None) is _op:
                    node.python_kernel_name = _name
            return result
        register_lowering(op, type_promotion_kind=None)(lower)


def _fallback_node(ir, result):
    """The ``FallbackKernel`` behind a fallback's output (a TensorBox of a StorageBox of a MultiOutput whose input is
    the kernel; a list of them for ``move``), or None."""
    node = result[0] if isinstance(result, (list, tuple)) and result else result
    for _ in range(4):
        if isinstance(node, ir.FallbackKernel):
            return node
        if isinstance(node, ir.MultiOutput):
            inputs = getattr(node, "inputs", None)
            return inputs[0] if inputs and isinstance(inputs[0], ir.FallbackKernel) else None
        node = getattr(node, "data", None)
        if node is None:
            return None
    return None
