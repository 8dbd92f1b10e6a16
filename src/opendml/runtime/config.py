"""opendml's one configuration object: which CPU kernels run plans, their threads, the CPU output-block cache's
bytes, the call cache and the PyTorch node. The environment is read once, when this module is imported:

    OPENDML_CPU_KERNELS      "compiled" or "numpy" (default: compiled where built)
    OPENDML_CPU_THREADS      an integer in [1, 1024] (default: the usable cores)
    OPENDML_CPU_CACHE_BYTES  an integer in [0, 2**62] (default: see ``default_cache_bytes``)
    OPENDML_CALL_CACHE       "1" or "0": serve repeated array-API calls from C (default 1)
    OPENDML_TORCH_NODE       "auto", "wait" or "off": opendml's compiled autograd node for eager
                             PyTorch (default auto; see ``configure``)

A malformed value is an error naming the variable, the value and what is allowed, kept (so that ``import opendml``
and ``opendml info`` still work) and raised by the first call needing the configuration, until ``configure`` sets
that setting. ``configure`` changes settings for the whole process; its handle, as a context manager, restores the
previous ones::

    with dml.configure(cpu_kernels="numpy"):
        ...
"""
from __future__ import annotations

import dataclasses
import os
import threading
import types

from ..model._checks import index_value, number
from ..model.errors import UnsupportedError, ValidationError

__all__ = ["Config", "configure", "config", "default_cache_bytes", "KERNEL_CHOICES"]

KERNEL_CHOICES = ("compiled", "numpy")
TORCH_NODE_CHOICES = ("auto", "wait", "off")
MAX_THREADS = 1024
MAX_CACHE_BYTES = 2**62
#: Outputs of at least this many bytes go through the output-block cache.
CACHE_MIN_BYTES = 1 << 20


def default_cache_bytes() -> int:
    """The cache limit when none is set: 1/8 of physical memory, at most 1 GiB (256 MiB where unknown)."""
    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        phys = 0
    return min(1 << 30, phys // 8) if phys else 1 << 28


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclasses.dataclass(frozen=True)
class Config:
    """The settings in force, as ``opendml.config()`` returns them (frozen):
    each setting ``configure`` takes, by its name, and ``compiled_available``,
    whether the C kernels were built at install time."""
    cpu_kernels: str
    compiled_available: bool
    threads: int
    output_cache_bytes: int
    thread_grain_bytes: int = 1 << 20
    unfold_tile_stride: int = 64
    unfold_tile_columns: int = 256
    call_cache: bool = True
    torch_node: str = "auto"


#: Whether the compiled CPU kernels load; set by ``opendml.runtime`` when imported, so that this module imports
#: nothing of the runtime above it.
compiled_probe = None


def _from_environment() -> tuple[dict, dict]:
    """Settings read from the environment, and the error per setting: a name
    of ``allowed`` (a tuple), or an integer in ``allowed`` (a range)."""
    values: dict = {}
    errors: dict = {}
    for setting, name, allowed in (("cpu_kernels", "OPENDML_CPU_KERNELS", KERNEL_CHOICES),
                                   ("call_cache", "OPENDML_CALL_CACHE", ("0", "1")),
                                   ("torch_node", "OPENDML_TORCH_NODE", TORCH_NODE_CHOICES),
                                   ("threads", "OPENDML_CPU_THREADS", range(1, MAX_THREADS + 1)),
                                   ("output_cache_bytes", "OPENDML_CPU_CACHE_BYTES", range(MAX_CACHE_BYTES + 1))):
        raw = os.environ.get(name)
        text = raw.strip() if raw is not None else ""
        if not text:
            continue
        if type(allowed) is range:
            if text.isascii() and text.isdigit() and len(text) <= 20 and int(text) in allowed:
                values[setting] = int(text)
            else:
                errors[setting] = ValidationError(f"{name} must be an integer in [{allowed[0]}, {allowed[-1]}]; "
                                                  f"got {raw!r}")
        elif text.lower() in allowed:
            values[setting] = text.lower() == "1" if setting == "call_cache" else text.lower()
        else:
            how = "0 or 1" if setting == "call_cache" else "one of " + ", ".join(allowed)
            errors[setting] = ValidationError(f"{name} must be {how}; got {raw!r}")
    return values, errors


_lock = threading.RLock()
_env_values, _env_errors = _from_environment()
_current: Config | None = None
#: Called with the new Config after every change (the CPU backend listens).
_listeners: list = []


def _initial() -> Config:
    for error in _env_errors.values():
        raise error
    available = bool(compiled_probe and compiled_probe())
    kernels = _env_values.get("cpu_kernels", "compiled" if available else "numpy")
    if kernels == "compiled" and not available:
        raise UnsupportedError("OPENDML_CPU_KERNELS is 'compiled' but opendml's compiled CPU kernels are not "
                               "installed (reinstall with a C compiler present)")
    return Config(cpu_kernels=kernels, compiled_available=available,
                  threads=_env_values.get("threads", usable_cores()),
                  output_cache_bytes=_env_values.get("output_cache_bytes", default_cache_bytes()),
                  call_cache=_env_values.get("call_cache", True),
                  torch_node=_env_values.get("torch_node", "auto"))


def config() -> Config:
    """The settings in force; the first call reads the ``OPENDML_*`` environment values (checked at import).

    Raises
    ------
    ValidationError
        If an ``OPENDML_*`` environment variable is malformed (until
        ``configure`` sets that setting explicitly).
    UnsupportedError
        If ``OPENDML_CPU_KERNELS=compiled`` but the compiled kernels are not
        installed.
    """
    global _current
    cfg = _current
    if cfg is None:
        with _lock:
            if _current is None:
                _current = _initial()
                _notify(_current)
            cfg = _current
    return cfg


class _Restore:
    """What ``configure`` returns: a context manager restoring the settings in force before the call."""

    def __init__(self, previous: Config):
        self.previous = previous

    def __enter__(self) -> Config:
        return config()

    def __exit__(self, *exc) -> None:
        _apply(self.previous)

    def __repr__(self) -> str:
        return repr(config())


def configure(*, cpu_kernels: str | None = None, threads: int | None = None,
              output_cache_bytes: int | None = None, thread_grain_bytes: int | None = None,
              unfold_tile_stride: int | None = None, unfold_tile_columns: int | None = None,
              call_cache: bool | None = None, torch_node: str | None = None) -> _Restore:
    """Change settings for the whole process; None keeps a setting.

    Call it before starting threads. Any change empties the call cache.

    Parameters
    ----------
    cpu_kernels : {"compiled", "numpy"}, optional
        Which CPU kernels run plans: opendml's C kernels or NumPy.
    threads : int, optional
        Threads the compiled kernels use, in [1, 1024].
    output_cache_bytes : int, optional
        Bytes of released array-function outputs the compiled path keeps for
        reuse, in [0, 2**62]; 0 turns reuse off and frees what is held.
    thread_grain_bytes : int, optional
        Work below this many bytes moved runs on one thread, in [1, 2**62].
    unfold_tile_stride : int, optional
        CPU UNFOLD reads along the innermost block axis with a byte step
        above this in tiles of ``unfold_tile_columns`` output columns; in
        [0, 2**62].
    unfold_tile_columns : int, optional
        In [1, 2**20].
    call_cache : bool, optional
        Whether a repeated array-function call (same operator, arguments,
        dtype, shape and strides) is served by the compiled extension's call
        cache without entering Python.
    torch_node : {"auto", "wait", "off"}, optional
        Whether opendml uses its C++ library for PyTorch (autograd node,
        tensor accessors, dispatcher operators). ``"auto"``: compiled in the
        background when opendml first handles a PyTorch tensor (about half a
        minute once per machine and PyTorch version, kept under
        ``$OPENDML_CACHE_DIR``, else ``$XDG_CACHE_HOME/opendml``, else
        ``~/.cache/opendml``), the Python routes serving until it loads, and
        for good if it cannot be built; ``"wait"``: the first autograd call
        waits for it; ``"off"``: never used (a load already under way
        finishes unused). Every route gives the same values, gradients and
        errors (``opendml.torch.node_status()`` says which runs).

    Returns
    -------
    context manager
        A handle whose ``with`` block restores the settings in force before
        the call on exit (``with configure(threads=1): ...``); entering it
        gives the new ``Config``.

    Raises
    ------
    ValidationError
        If a value is out of range or ``cpu_kernels`` or ``torch_node`` is
        not a known name.
    TypeError
        If ``threads`` (or another count) is not an int, or ``call_cache``
        not a bool.
    UnsupportedError
        If ``cpu_kernels="compiled"`` but the compiled kernels are not
        installed.
    """
    given = {"cpu_kernels": cpu_kernels, "threads": threads, "output_cache_bytes": output_cache_bytes,
             "call_cache": call_cache, "torch_node": torch_node}
    with _lock:
        try:
            previous = config()
        except ValidationError:
            # A malformed environment value: settings given here replace it.
            for key in [k for k in _env_errors if given.get(k) is not None]:
                del _env_errors[key]
            previous = config()
        changes: dict = {}
        for name, value, choices in (("cpu_kernels", cpu_kernels, KERNEL_CHOICES),
                                     ("torch_node", torch_node, TORCH_NODE_CHOICES)):
            if value is not None:
                if not isinstance(value, str) or value.strip().lower() not in choices:
                    raise ValidationError(f"configure: {name} must be one of {', '.join(choices)}; got {value!r}")
                changes[name] = value.strip().lower()
        if changes.get("cpu_kernels") == "compiled" and not previous.compiled_available:
            raise UnsupportedError("configure: cpu_kernels='compiled' needs opendml's compiled CPU kernels, "
                                   "which are not installed (reinstall with a C compiler present)")
        for name, value, lo, hi in (("threads", threads, 1, MAX_THREADS),
                                    ("output_cache_bytes", output_cache_bytes, 0, MAX_CACHE_BYTES),
                                    ("thread_grain_bytes", thread_grain_bytes, 1, 2**62),
                                    ("unfold_tile_stride", unfold_tile_stride, 0, 2**62),
                                    ("unfold_tile_columns", unfold_tile_columns, 1, 1 << 20)):
            if value is None:
                continue
            try:                            # (NumPy's 1-element array has __index__, and refuses)
                changes[name] = index_value(value)
            except Exception:  # noqa: BLE001 - no int value (a meta tensor's, any __index__ failing)
                changes[name] = None
            if changes[name] is None:
                raise TypeError(f"configure: {name} must be an int; got {_kind(value)}")
            if not lo <= changes[name] <= hi:
                raise ValidationError(f"configure: {name} must be in [{lo}, {hi}]; got {number(changes[name])}")
        if call_cache is not None:
            if not isinstance(call_cache, bool):
                raise TypeError(f"configure: call_cache must be True or False; got {_kind(call_cache)}")
            changes["call_cache"] = call_cache
        _apply(dataclasses.replace(previous, **changes))
        return _Restore(previous)


def _kind(value) -> str:
    """A value's type for a message: ``str``, or ``numpy.bool`` (a bare name would read "must be True or False; got
    bool")."""
    t = type(value)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _apply(cfg: Config) -> None:
    global _current
    with _lock:
        _current = cfg
        _notify(cfg)


def _notify(cfg: Config) -> None:
    for listener in _listeners:
        listener(cfg)


class SettingsModule(types.ModuleType):
    """The type of a module whose settings (module attributes) C reads as one tuple, ``c_settings()``, at every
    never-seen CUDA call (runtime/cuda's ``steps``): the tuple, kept in ``_C_SETTINGS``, is dropped whenever an
    attribute is set or deleted (``monkeypatch.setattr`` too)."""

    def __setattr__(self, name: str, value) -> None:
        super().__setattr__(name, value)
        self.__dict__["_C_SETTINGS"] = None

    def __delattr__(self, name: str) -> None:
        super().__delattr__(name)
        self.__dict__["_C_SETTINGS"] = None
