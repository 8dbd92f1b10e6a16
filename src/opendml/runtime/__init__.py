"""The runtime: backends that execute plans, and the configuration they read.

A backend receives plans validation already accepted and never re-checks a rule of the specification; it imports only
``opendml.model`` (errors) and ``opendml.plan``, never the array API, the device flow or the command line.
``get_backend`` imports CUDA support only when a CUDA device is asked for. Every backend offers the protocol
``Backend``: byte storage (``allocate``, ``write_bytes``, ``read_bytes``, ``element_range``), ``prepare`` (a move
program, ``plan.MovePlan``, the one plan type every operator lowers to, and the bound word arrays of its inputs and
outputs -> a callable running it pass by pass) and ``synchronize``.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Protocol

from ..model.errors import UnsupportedError
from ..plan import MovePlan
from . import config as _config
from .config import Config, config, configure

__all__ = ["Backend", "get_backend", "cuda_status", "Config", "config", "configure"]


class Backend(Protocol):
    name: str

    def allocate(self, nbytes: int) -> Any: ...
    def write_bytes(self, storage: Any, offset: int, data: Any) -> None: ...
    def read_bytes(self, storage: Any, offset: int, nbytes: int) -> Any: ...
    def element_range(self, storage: Any, offset: int, nbytes: int, element_size: int) -> Any: ...
    def prepare(self, plan: MovePlan, srcs: list, dsts: list) -> Callable[[], None]:
        """A callable running ``plan`` from ``srcs`` into ``dsts``: one bound range per input and output slot, each a
        1-D array of words of its slot's element size (``element_range``), element 0 the passes' offsets' origin."""
    def synchronize(self) -> None: ...


_BACKENDS: dict = {}
_lock = threading.Lock()


def _config_changed(cfg: Config) -> None:
    # A new configuration gives the CPU a new backend; one already held (by a compiled operator, say) keeps its own.
    _BACKENDS.pop("cpu", None)
    from .cpu.backend import apply_cache_limit
    apply_cache_limit(cfg)
    # Entries of the call cache were made under the old settings.
    from . import calls
    calls.set_enabled(cfg.call_cache)
    calls.clear()


def _compiled_loads() -> bool:
    from .cpu.backend import _load_native
    return _load_native() is not None


_config._listeners.append(_config_changed)
_config.compiled_probe = _compiled_loads


def get_backend(kind: str) -> Backend:
    """The backend for "cpu", "cuda" or "cuda:N" (created once, then shared)."""
    if type(kind) is str:                 # the keys are normalised names: a kind given as one is looked up at once
        backend = _BACKENDS.get(kind)
        if backend is not None:
            return backend
    if not isinstance(kind, str):
        raise UnsupportedError(f"Device: kind must be 'cpu' or 'cuda'; got {kind!r}")
    key = kind.strip().lower()
    backend = _BACKENDS.get(key)
    if backend is not None:
        return backend
    with _lock:
        if key == "cpu":
            from .cpu import CpuBackend
            backend = CpuBackend(config())
        elif key == "cuda" or key.startswith("cuda:"):
            suffix = key.partition(":")[2]
            if key != "cuda" and not (suffix.isascii() and suffix.isdigit() and len(suffix) < 4):
                raise UnsupportedError(f"Device: unknown CUDA device {kind!r}; use 'cuda' or 'cuda:N'")
            from .cuda import CudaBackend
            full = f"cuda:{int(suffix or 0)}"        # ("cuda" and "cuda:0" share one backend)
            backend = _BACKENDS[full] = _BACKENDS.get(full) or CudaBackend(int(suffix or 0))
        else:
            raise UnsupportedError(f"Device: unknown device kind {kind!r}; expected 'cpu' or 'cuda'")
        _BACKENDS[key] = backend
    return backend


def cuda_status() -> tuple[bool, str]:
    """Whether CUDA can be used here, and the GPU's name or the reason not."""
    try:
        from .cuda import probe
    except Exception as exc:  # pragma: no cover - only broken installs
        return False, f"{type(exc).__name__}: {exc}"
    return probe()
