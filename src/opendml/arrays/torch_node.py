"""opendml's C++ autograd node for eager PyTorch (``torch_node.cpp``), built
for the installed PyTorch on first need and loaded from PyTorch's extension
cache after that.

Why: a Python ``torch.autograd.Function`` costs tens of microseconds more per
forward + backward than PyTorch's generated C++ nodes, which decides the
race on small and mid-size tensors. The node records the same call as the
Python route (``torch_adapter._Route``): the same kernel (the call cache's),
the same adjoint operator through the array API; only where autograd keeps
the record differs. Forward-mode AD and ``torch.func`` keep the Python
``autograd.Function`` (a C++ node has neither).

The build (``torch.utils.cpp_extension.load``, about half a minute, a C++
compiler needed) is governed by ``opendml.configure(torch_node=...)`` /
``OPENDML_TORCH_NODE``: ``"auto"`` builds in a background thread while calls
take the Python route, ``"wait"`` makes the first call wait for it, ``"off"``
never builds. A build that fails leaves the Python route in place for the
process; ``status()`` says why.
"""
from __future__ import annotations

import hashlib
import pathlib
import threading

from ..runtime.config import config

__all__ = ["get", "status", "wait", "slot"]

_SOURCE = pathlib.Path(__file__).with_name("torch_node.cpp")
_lock = threading.Lock()
_state = {"module": None, "status": "not built", "thread": None}
_slots: dict = {}
#: How long a "wait" call waits for a build, in seconds, before it takes the
#: Python route (a stale lock in PyTorch's extension cache can stall a build).
WAIT_S = 600.0


def _build():
    try:
        import torch
        from torch.utils.cpp_extension import load
        source = _SOURCE.read_bytes()
        tag = hashlib.sha256(source + torch.__version__.encode()).hexdigest()[:12]
        module = load(name=f"opendml_torch_node_{tag}", sources=[str(_SOURCE)], extra_cflags=["-O2"],
                      verbose=False)
        _state["status"] = f"built ({module.__file__})"
        _state["module"] = module
    except Exception as e:               # noqa: BLE001 - any failure leaves the Python route, said in status()
        _state["status"] = f"build failed, eager autograd takes the Python autograd.Function: " \
                           f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"


def _start():
    with _lock:
        if _state["thread"] is None:
            _state["status"] = "building"
            thread = threading.Thread(target=_build, name="opendml-torch-node-build", daemon=True)
            _state["thread"] = thread
            thread.start()
        return _state["thread"]


def get():
    """The built node module, or None while it is not (yet) usable, per
    ``config().torch_node``; the first call starts the build."""
    module = _state["module"]
    if module is not None:
        return module if config().torch_node != "off" else None
    mode = config().torch_node
    if mode == "off":
        return None
    thread = _start()
    if mode == "wait":
        thread.join(WAIT_S)
    return _state["module"]


def wait(timeout: float | None = WAIT_S) -> bool:
    """Start the build if it has not started (unless ``torch_node="off"``) and
    wait for it; whether the node is ready."""
    if _state["module"] is None and config().torch_node != "off":
        _start().join(timeout)
    return _state["module"] is not None


def status() -> str:
    """Which route eager autograd takes, and why."""
    mode = config().torch_node
    if mode == "off":
        return "off (torch_node='off'): eager autograd takes the Python autograd.Function"
    return _state["status"]


def slot(module, name: str) -> int:
    """The node type (slot) whose ``grad_fn`` is named ``name``."""
    k = _slots.get(name)
    if k is None:
        with _lock:
            k = _slots.get(name)
            if k is None:
                k = _slots[name] = module.slot(name)
    return k
