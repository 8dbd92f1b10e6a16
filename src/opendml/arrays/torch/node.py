"""opendml's C++ autograd node and dispatcher operators for PyTorch (``node.cpp``), built for the installed PyTorch
on first need and loaded from opendml's cache after that.

A Python ``torch.autograd.Function`` costs tens of microseconds more per forward + backward than PyTorch's generated
C++ nodes. The node records the same call as the Python route (``adapter._Route``): the same kernel, the same
adjoint through the array API; only where autograd keeps the record differs. Forward-mode AD and ``torch.func`` keep
the Python Function.

``opendml.configure(torch_node=...)`` / ``OPENDML_TORCH_NODE``: ``"auto"`` starts the build and lets calls take the
Python route until it is ready, ``"wait"`` makes the first call wait for it, ``"off"`` never builds. The build runs
in a separate process (``torch.utils.cpp_extension.load`` in a private build folder, a C++ compiler needed) that
finishes even if this process exits, and moves the library into the cache folder (``cache_folder()``) in one
rename, so no lock is ever left behind; its file name carries a digest of the source, PyTorch's version and
Python's ABI. A failed build is written down beside it (``<name>.failed``) and retried after an hour; until then
``status()`` says why.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import threading
import time

from ...runtime import calls
from ...runtime.config import _listeners as _config_listeners, config

__all__ = ["get", "status", "wait", "prefetch", "slot", "library_path", "cache_folder"]

_SOURCE = pathlib.Path(__file__).with_name("node.cpp")
#: The header the library shares with the call cache (it includes it): part of the library's tag.
_API_HEADER = pathlib.Path(__file__).parents[2] / "runtime" / "native" / "torch_api.h"
_lock = threading.Lock()
_state = {"module": None, "status": "not built", "thread": None}
#: How long a "wait" call waits for a build, in seconds, before it takes the Python route.
WAIT_S = 240.0
#: A build that has not finished after this long is taken to have died.
STALE_S = 900.0
#: A failed build is retried after this long.
RETRY_S = 3600.0

_BUILDER = r"""
import contextlib, os, shutil, sys, tempfile, traceback
source, final, name = sys.argv[1:4]
folder = os.path.dirname(final)
tmp = tempfile.mkdtemp(prefix=name + ".build.", dir=folder)
try:
    import torch
    from torch.utils.cpp_extension import load
    module = load(name=name, sources=[source], extra_cflags=["-O2"], build_directory=tmp, verbose=False)
    os.chmod(module.__file__, 0o755)     # writable by its owner only, whatever the umask (the loader checks)
    os.replace(module.__file__, final)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(final + ".failed")
except BaseException as e:
    lines = [l for l in str(e).strip().splitlines() if l.strip()]
    with open(final + ".failed", "w") as f:
        f.write(f"{type(e).__name__}: {lines[-1] if lines else ''}"[:2000])
    with open(final + ".log", "w") as f:
        f.write(traceback.format_exc()[-200000:])
    raise
finally:
    shutil.rmtree(tmp, ignore_errors=True)
    with contextlib.suppress(OSError, ValueError):
        with open(final + ".building") as f:
            mine = f.read().split()[:1] == [str(os.getpid())]
        if mine:
            os.unlink(final + ".building")
"""


def cache_folder() -> pathlib.Path:
    """The folder the node's libraries are kept in."""
    root = os.environ.get("OPENDML_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "opendml")
    return pathlib.Path(root) / "torch_node"


def library_path() -> pathlib.Path:
    """Where this PyTorch's node library is (or will be) kept."""
    import torch
    tag = hashlib.sha256(_SOURCE.read_bytes() + _API_HEADER.read_bytes() + torch.__version__.encode()
                         + sys.version.encode() + (sysconfig.get_config_var("EXT_SUFFIX") or "").encode()).hexdigest()[:12]
    name = f"opendml_torch_node_{tag}"
    return cache_folder() / (name + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))


def _module_name(path: pathlib.Path) -> str:
    return path.name.split(".")[0]


def _load(path: pathlib.Path):
    spec = importlib.util.spec_from_file_location(_module_name(path), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:                        # (PermissionError: alive, another user's)
        pass
    return True


def _marker(path: pathlib.Path) -> pathlib.Path:
    return pathlib.Path(str(path) + ".building")


def _builder_alive(path: pathlib.Path) -> bool:
    """Whether a builder that has not timed out says it is at work on ``path``."""
    try:
        pid, started = (int(v) for v in _marker(path).read_text().split()[:2])
    except (OSError, ValueError):
        return False
    return _alive(pid) and time.time() - started < STALE_S


def _spawn(path: pathlib.Path) -> None:
    """Start a builder process unless a live one is at work on ``path``. The marker is claimed atomically (O_EXCL)
    before the builder starts, so processes starting together start one builder."""
    marker = _marker(path)
    if _builder_alive(path):
        return
    marker.unlink(missing_ok=True)         # a dead or timed-out builder's
    for old in path.parent.glob(_module_name(path) + ".build.*"):     # what dead builders left
        try:
            if time.time() - old.stat().st_mtime > STALE_S:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:                # another process claimed it first
        return
    with os.fdopen(fd, "w") as f:
        f.write(f"{os.getpid()} {int(time.time())}")
    # The compiler runs without a preloaded library (a sanitizer runtime, say) this process may have been started with.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    try:
        proc = subprocess.Popen([_interpreter() or sys.executable, "-c", _BUILDER, str(_SOURCE), str(path),
                             _module_name(path)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, env=env)
    except BaseException:
        marker.unlink(missing_ok=True)
        raise
    marker.write_text(f"{proc.pid} {int(time.time())}")
    threading.Thread(target=proc.wait, name="opendml-torch-node-reap", daemon=True).start()


def _failure(path: pathlib.Path) -> str | None:
    failed = pathlib.Path(str(path) + ".failed")
    try:
        if time.time() - failed.stat().st_mtime < RETRY_S:
            return failed.read_text().strip() or "unknown error"
    except OSError:
        pass
    return None


def _trusted(path: pathlib.Path) -> str | None:
    """Why the library at ``path`` may not be loaded (None: it may): it must be this user's, in a folder only they may
    write to."""
    if not hasattr(os, "getuid"):
        return None
    for p in (path, path.parent):
        st = p.stat()
        if st.st_uid != os.getuid():
            return f"{p} belongs to another user"
        if st.st_mode & 0o022:
            return f"{p} is writable by other users"
    return None


def _interpreter() -> str | None:
    """The Python interpreter a builder process runs under, or None where this process's ``sys.executable`` is not
    one (an embedding program)."""
    exe = sys.executable
    if exe and os.path.basename(exe).lower().startswith("python") and os.access(exe, os.X_OK):
        return exe
    return None


#: What a status other than "built" or "building" goes on to say.
_PYTHON = "eager autograd takes the Python autograd.Function"


def _obtain(timeout: float) -> None:
    """Load the library, building it first where it is not there yet; the outcome goes to ``_state``."""
    try:
        path = library_path()
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        deadline = time.monotonic() + timeout
        spawns = 0
        while not path.exists():
            reason = _failure(path)
            if reason is not None:
                _state["status"] = (f"build failed, {_PYTHON}: {reason} (retried after an hour; compiler "
                                    f"output: {path}.log)")
                return
            if not _builder_alive(path):  # none yet, or it died without a word (killed): one more try
                if _interpreter() is None:
                    _state["status"] = (f"not built, {_PYTHON}: sys.executable ({sys.executable!r}) is not a "
                                        f"Python interpreter to run the builder with")
                    return
                if spawns == 2:
                    _state["status"] = (f"build failed, {_PYTHON}: the builder process exited without a "
                                        f"library or an error, twice")
                    return
                _spawn(path)
                spawns += 1
            if time.monotonic() >= deadline:
                _state["status"] = "building"
                return
            time.sleep(0.2)
        why = _trusted(path)
        if why is not None:
            _state["status"] = f"not loaded, {_PYTHON}: {why}"
            return
        module = _load(path)
        _state["status"], _state["module"] = f"built ({path})", module
        # The call cache reads tensors through the library's C++ accessors from now on (runtime/native/torch_api.h):
        # the same facts as through Python, in one call.
        _use_accessors(config())
    except Exception as e:                # noqa: BLE001 - any failure leaves the Python route, said in status()
        _state["status"] = f"build failed, {_PYTHON}: {type(e).__name__}: {e}"


def _use_accessors(cfg) -> None:
    """The call cache's tensor accessors: the loaded library's unless ``torch_node="off"`` (then the Python reads).
    Called when the library loads and after every ``configure()``."""
    with _lock:
        module = _state["module"]
        if module is not None:
            calls.register_torch_api(module.torch_api() if cfg.torch_node != "off" else None)


_config_listeners.append(_use_accessors)


def _start(timeout: float):
    with _lock:
        thread = _state["thread"]
        if thread is None or (not thread.is_alive() and _state["module"] is None
                              and _state["status"] == "building"):
            _state["status"] = "building"
            thread = threading.Thread(target=_obtain, args=(timeout,), name="opendml-torch-node", daemon=True)
            _state["thread"] = thread
            thread.start()
        return thread


def get():
    """The node module, or None while not (yet) usable, per ``config().torch_node``; a first call starts the build."""
    module = _state["module"]
    if module is not None:
        return module if config().torch_node != "off" else None
    mode = config().torch_node
    if mode == "off":
        return None
    if _state["thread"] is None or mode == "wait":
        thread = _start(WAIT_S)
        if mode == "wait":
            thread.join(WAIT_S)
    return _state["module"]


def prefetch() -> None:
    """Start loading the library (building it first where this PyTorch has none yet) in the background, unless
    ``torch_node="off"``; never waits."""
    if _state["module"] is None and _state["thread"] is None and config().torch_node != "off":
        _start(WAIT_S)


def wait(timeout: float | None = WAIT_S) -> bool:
    """Start the build if it has not started (unless ``torch_node="off"``) and wait for it, at most ``timeout``
    seconds; whether the node is ready."""
    if _state["module"] is None and config().torch_node != "off":
        # (threading's join refuses a timeout past TIMEOUT_MAX with OverflowError: such a wait has no limit)
        _start(WAIT_S if timeout is None else timeout).join(
            None if timeout is None or timeout > threading.TIMEOUT_MAX else timeout)
    return _state["module"] is not None


def status() -> str:
    """Which route eager autograd takes, and why."""
    if config().torch_node == "off":
        return f"off (torch_node='off'): {_PYTHON}"
    return _state["status"]


@functools.lru_cache(maxsize=None)
def slot(module, name: str) -> int:
    """The node type (slot) whose ``grad_fn`` is named ``name`` (``module.slot`` gives a name seen before its
    own slot again: the cache only spares the call)."""
    return module.slot(name)
