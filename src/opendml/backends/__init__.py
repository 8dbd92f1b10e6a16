"""Backends execute plans that validation already accepted; they never re-check
a rule of the specification. ``get_backend`` imports CUDA support only when a
CUDA device is asked for."""
from __future__ import annotations

from ..spec.errors import UnsupportedError

_BACKENDS: dict = {}


def get_backend(kind: str):
    if not isinstance(kind, str):
        raise UnsupportedError(f"Device: kind must be 'cpu' or 'cuda'; got {kind!r}")
    kind = kind.strip().lower()
    if kind in _BACKENDS:
        return _BACKENDS[kind]
    if kind == "cpu":
        from .numpy_backend import NumpyBackend
        backend = NumpyBackend()
    elif kind == "cuda" or kind.startswith("cuda:"):
        from .cuda_backend import CudaBackend
        index = int(kind.partition(":")[2] or 0) if kind.partition(":")[2].isdigit() or kind == "cuda" else None
        if index is None:
            raise UnsupportedError(f"Device: unknown CUDA device {kind!r}; use 'cuda' or 'cuda:N'")
        backend = CudaBackend(index)
    else:
        raise UnsupportedError(f"Device: unknown device kind {kind!r}; expected 'cpu' or 'cuda'")
    _BACKENDS[kind] = backend
    return backend


def cuda_status() -> tuple[bool, str]:
    """Whether CUDA can be used here, and the GPU's name or the reason not."""
    try:
        from .cuda_backend import probe
    except Exception as exc:  # pragma: no cover - only broken installs
        return False, f"{type(exc).__name__}: {exc}"
    return probe()
