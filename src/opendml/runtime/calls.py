"""The call cache: repeated array-API calls served by the compiled extension (C side: ``runtime/native/calls.c``).

The first call of an operator with given arguments on an array of a given dtype, shape and strides (on CUDA, also
device and address alignment) runs in Python: validation, lowering, the backend's kernel choice. Where it ran compiled
kernels on the arrays as given, the route records them here: on NumPy arrays the move program's compiled passes
(``put_move``; the first five's one tuned kernel, ``TUNED``; index.c's passes for the index-driven functions of
``arrays/index_ops.py``, a bad checked index making ``move`` answer None), kept prepared (``move.h``:
``odml_move_prepare``); on PyTorch CUDA tensors and CuPy arrays its kernel launches (``put_move_cuda``, one per pass,
parameters by value, keyed by device and alignment class too). An entry has N inputs (JOIN's list or tuple of arrays,
the index functions' tuple) and M outputs (SPLIT's list). The next such call is served by ``call`` (the first five's
functions) or ``move`` (the others'), which find the same entries, in C: it builds the key, allocates the outputs with
the framework's allocator (NumPy, opendml's output blocks, PyTorch's caching allocator, CuPy's pool) and runs the
kernels (on CUDA, queued on the framework's current stream), without entering Python. Plain PyTorch CPU tensors (no
autograd record, no tracer, not a negative view) are keyed as their NumPy views (from PyTorch's accessors where the
node library gave them, else through a view), their outputs handed to ``torch.from_numpy``.

Arguments key as plain ints, None, lists or tuples of plain ints, exact floats (by their bits), bools, short ASCII
strings, static types (``numpy.float16``), NumPy's own dtype objects and members of the enum types
``register_move_types`` names. Anything the cache cannot vouch for returns None and takes the Python route: other
array types, PyTorch tensors that a tracer must see, negative views, other arguments, a device that is not current.

A PyTorch tensor that autograd must record (``requires_grad`` with grad mode on) is served by an eager entry
(``put_eager``) where opendml's C++ autograd node is in use: the node's recorder for the call, which records it and
runs its kernel (again through this cache), after ``register_torch_eager``'s check (no TorchScript trace, no compiled
autograd, the node on). ``call`` and ``move`` find these entries alike: keyed by the operator, its arguments as
``move`` keys them and the tensor.

``opendml.configure(call_cache=False)`` (or ``OPENDML_CALL_CACHE=0``) turns it off; every configuration change empties
it. Without the compiled extension (or NumPy's headers at build time) nothing is cached and every call takes the
Python route. Imports nothing above the runtime.
"""
from __future__ import annotations

from typing import Any, Callable

import itertools
import sys
import threading

from ..model.errors import UnsupportedError, ValidationError
from ..ops import OPERATORS
from .config import config
from .cpu.backend import _load_native

__all__ = ["OPS", "call", "move", "generation", "put_move", "put_move_cuda",
           "move_new", "index_new", "MOVE_LOWERINGS", "PLAIN_LOWERED", "LOWER_SEQUENCE", "LOWER_PLAIN", "register_cuda_retry",
           "register_torch", "register_cupy", "register_move_types", "clear", "info", "set_enabled"]

class _Codes(dict):
    """Array-API function name -> the int tagging its calls' keys, given out on first use to any function (a new
    operator's included); C keys by it without knowing what it names. A code is never given out twice: a name
    ``forget`` dropped gets a new one, and entries under its old code are never served again (they age out)."""

    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()
        self._next = itertools.count(1)

    def __missing__(self, name: str) -> int:
        if not isinstance(name, str):
            raise KeyError(name)
        with self._lock:
            return self.setdefault(name, next(self._next))

    def forget(self, name: str) -> None:
        with self._lock:
            self.pop(name, None)


#: Operator codes in keys (``OPS[name]``).
OPS = _Codes()

_native = _load_native()
#: Whether the compiled extension loaded (it always defines every ``call_cache_*`` function).
_HAS = _native is not None


def _miss(*args) -> None:
    return None


#: ``call(op_code, x, *args)``: the output, or None (take the Python route).
call: Callable[..., Any] = _native.call_cache_call if _HAS else _miss

#: ``packed(op_code, split, fallback, extra, x, packed_list)``, a C++ window operator's direct kernel
#: (``arrays/torch/inductor.py``): ``call`` on the packed list split back into ``split`` lists (then ``extra``) for a
#: PyTorch tensor autograd need not record, else ``fallback(x, packed_list)``. None without the extension.
packed: Callable[..., Any] | None = _native.call_cache_packed if _HAS else None

#: ``move(op_code, x, *args)``: a repeated call of any function but the first five's (they use ``call``, which finds
#: the same entries and, at a miss on a NumPy array, may serve a new shape) on NumPy arrays, PyTorch tensors or CuPy
#: arrays (``x`` one array, or JOIN's or the index functions' list or tuple) served from C: the output (a list for
#: SPLIT), or None (take the Python route).
move: Callable[..., Any] = _native.call_cache_move if _HAS else _miss


def generation() -> int:
    """Read before a call's Python route reads any setting, and passed to ``put_*``: a record made on settings another
    thread's ``configure()`` has since replaced is refused."""
    if not _HAS:
        return 0
    if _SETTINGS._current is None:
        _read_settings()      # their first read drops the cache: read them before the generation
    return _generation()


#: The configuration module (``config`` is its function): its ``_current`` is None until the settings are first read.
_SETTINGS = sys.modules[config.__module__]
_generation = _native.call_cache_generation if _HAS else None


def _read_settings() -> None:
    try:
        config()              # the first read of the configuration sets the C side's flag and drops the cache
    except (ValidationError, UnsupportedError):
        pass                  # a bad environment value: raised by the first call that needs it


#: ``put_move``'s pass kind of a tuned kernel (the first five's one pass): this plus the kernel's code.
TUNED = 3


def put_move(name: str, x, args: tuple, outs: tuple, origins: tuple, passes: tuple, multi: bool,
             since: int, planned: tuple | None = None) -> bool:
    """Record a call on NumPy arrays, made on the settings of ``generation()`` ``since``: ``x`` and ``args`` as
    ``move`` takes them (lists snapshotted), ``outs`` one ``(shape, dtype, use_blocks)`` per output, ``origins`` per
    input the bytes from its data pointer back to element 0 of the range the passes read, ``passes`` one ``(kind, src,
    dst, params, threads)`` per compiled pass in the order they run: kind 0 a move copy, 1 a move fill (``params`` the
    bytes of move.h's ``odml_cpu_move_params``), 2 an index pass (index.h's ``idx_params``), ``TUNED`` + a kernel's
    code (params.h's ``ODML_KERNEL_*``) one tuned kernel (its parameter block), the whole program of the first five.
    C refuses (False) a move or index pass that would reach outside the buffers it is given; a tuned kernel's block is
    taken as the CPU backend packed it. ``planned``: each input's (shape, strides) as the passes were planned for;
    nothing is stored (False) where an input no longer has them (another thread changed it in place)."""
    if not _HAS:
        return False
    return _native.call_cache_put_move(OPS[name], x, args, outs, origins, passes, multi, since, planned)


#: The index functions with an index check (``check_indices``, their first argument after the arrays).
CHECKED = frozenset(cls.BINDING.function for cls in OPERATORS.values()
                    if "*, check_indices" in (getattr(getattr(cls, "BINDING", None), "params", None) or ""))


def put_move_cuda(name: str, x, args: tuple, outs: tuple, origins: tuple, launches, multi: bool,
                  since: int, planned: tuple | None = None) -> bool:
    """Record a data-movement family call on PyTorch CUDA tensors or CuPy arrays, made on the settings of
    ``generation()`` ``since``: ``x`` and ``args`` as ``move`` takes them, ``outs`` one ``(shape, dtype, address)`` per
    output (``dtype`` the framework's: a ``torch.dtype`` or a NumPy dtype; a later call's output must have the
    address's alignment class mod 16), ``origins`` per input the bytes from its data pointer back to element 0 of its
    bound range, ``launches`` the backend's ``MoveLaunch`` that ran (every kernel launch of the program, in order; an
    index-driven pass's as its ``IndexPass.call_cache_step`` gives it). The next such call is served from C: outputs
    from the framework's allocator, the launches queued on its current stream. A checked call
    (``check_indices=True``, ``args[0]``) is recorded with its index kernels checking every index they read: a served
    call waits until they have read every index, and answers None where one was out of range (the route then raises
    the error naming it). Nothing is stored (False) where a launch is not made by the C extension's launcher, or a
    checked call's index pass needs scratch (its launches take no flag)."""
    if not _HAS:
        return False
    checked = name in CHECKED and bool(args) and args[0] is True
    steps = []
    for rec, s, d in launches.steps:
        if rec.via == "index":                  # an index-driven pass (runtime/cuda/index.py)
            step = rec.call_cache_step(checked)
            if step is not None:
                if checked and not step[0]:
                    return False
                steps.append(step)
            continue
        if not rec.blocks:
            continue                            # launches nothing (the route's Launch returns at once)
        if rec.via != "native":
            return False
        steps.append((rec.function_ptr, rec.blocks, rec.threads, rec.smem, rec.params_ptr, s, d, rec))
    return _native.call_cache_put_move(OPS[name], x, args,
                                       tuple((tuple(int(n) for n in shape), dtype, ptr & 15)
                                             for shape, dtype, ptr in outs),
                                       tuple(origins), tuple(steps), multi, since, planned)


def register_torch_api(capsule) -> None:
    """PyTorch's tensor accessors (``runtime/native/torch_api.h``), given by the C++ node library
    (``arrays/torch/node.py`` registers them when it loads it), or None: the call cache then reads a tensor's dtype,
    sizes, strides, device, data pointer and routing facts, allocates its outputs and finds the current stream through
    them instead of through Python: the same values (tests/test_torch_api.py) at less cost."""
    if _HAS:
        _native.call_cache_torch_api(capsule)


#: The operators' ``PLAIN_KERNEL`` names -> the plan kinds (newshape.h's ODML_NEW_*) of the tuned passes
#: the C lowering of the first five makes (``cuda_spec``, the CUDA launch's test entry, takes them too).
NEW_KINDS = {"copy": 0, "windows": 1, "scatter": 2, "window_sums": 3}


#: The first five's lowering numbers (besides ``MOVE_LOWERINGS``): their plain lowering's C copy (``C_PLAIN``:
#: newshape.h's ODML_PLAIN_*) with this bit (ODML_LOWER_PLAIN), lowered to one tuned pass, run and recorded by
#: ``move_new`` as a family call is (keyed as ``call`` finds it). Once such a call on a NumPy array was recorded, a
#: miss of ``call`` on a NumPy array of the same operator, dtype and rank is served as a new shape, lowered in C,
#: until the cache is next emptied.
LOWER_PLAIN = 1 << 25


#: ``move_new(op_code, lowering, x, args, since, cpu[, cuda_conf])``: the one C new-shape route: a never-seen shape
#: of a call (every family function of ``arrays/front.py``, and the first five, ``LOWER_PLAIN``) on exact,
#: native-order NumPy arrays, lowered, run and recorded in one C call (runtime/native/newshape_move.c; ``lowering``
#: the function's number there, ``MOVE_LOWERINGS``; ``cpu`` the CPU backend's ``plain_conf``); the output, or None
#: where the Python route must run the call (nothing run). On PyTorch CUDA tensors and CuPy arrays the launches are
#: ``steps.move_steps``'s, planned in C (runtime/native/cuda_move_spec.c) from ``cuda_conf()``, queued on the
#: framework's current stream and recorded as ``put_move_cuda`` records them; a kernel not yet compiled comes back as
#: its name, a str (nothing run: ``compiled_first``).
move_new: Callable[..., Any] = _native.call_cache_move_new if _HAS else _miss

_index_new = _native.call_cache_index_new if _HAS else _miss


def index_new(op: int, which: int, types: int, given: tuple, args: tuple, since: int, min_bytes: int):
    """``move_new`` for a never-seen shape of an index function of ``arrays/index_ops.py``
    (runtime/native/newshape_index.c; ``which`` its number there, ``types`` the element types its tables take): the
    output, or None. On CUDA (PyTorch, CuPy) its launches are ``index.plan_pass``'s and ``steps.move_steps``'s,
    planned in C (runtime/native/cuda_index_spec.c); a kernel C names is compiled first (``compiled_first``)."""
    out = _index_new(op, which, types, given, args, since, min_bytes, cuda_conf)
    return out if type(out) is not str else compiled_first(
        lambda: _index_new(op, which, types, given, args, since, min_bytes, cuda_conf), given, out)


def compiled_first(call, x, out):
    """``out``, a C new-shape route's answer on ``x`` (an array, or a list or tuple of them), where it names
    no kernel; else the kernel it names is compiled for x's device and ``call()`` made again (15 times at
    most; then None)."""
    for _ in range(15):
        if type(out) is not str:
            return out
        from .cuda.launch import add_new_kernel
        first = x[0] if type(x) in (list, tuple) else x
        add_new_kernel(first.get_device() if hasattr(first, "get_device") else first.device.id, out)
        out = call()
    return None if type(out) is str else out


def cuda_conf() -> tuple:
    """What ``move_new`` and ``index_new`` read for CUDA inputs (C calls it for them alone): the compiled kernels they
    may launch, and the functions giving the move program's and the index kernels' launch settings (C calls each only
    where it plans with it, so both are read anew at every call that needs them; the first five's one tuned launch
    reads none). The three functions are looked up once: an import statement a call cost 1 us of 1.6."""
    if not _CUDA_CONF:
        from .cuda import index, launch, steps
        _CUDA_CONF[:] = (launch.new_kernels, steps.c_settings, index.c_settings)
    return _CUDA_CONF[0](), _CUDA_CONF[1], _CUDA_CONF[2]


_CUDA_CONF: list = []
_index_cuda_conf = cuda_conf                # (benchmarks/checked_steps_gpu.py's name)

#: The lowering number's bit of a function that offers its arrays as one list or tuple (newshape.h's
#: ODML_LOWER_SEQUENCE).
LOWER_SEQUENCE = 1 << 24
#: Family function name -> its C lowering's number (newshape.h's ODML_LOWER_*, as its operator declares it).
MOVE_LOWERINGS = {cls.BINDING.function: cls.C_LOWERING for cls in OPERATORS.values() if "C_LOWERING" in vars(cls)}
#: The operators whose plain lowering is in C, by their ``C_PLAIN`` (newshape.h's ODML_PLAIN_* order): their
#: lowering numbers are ``LOWER_PLAIN | C_PLAIN``.
PLAIN_LOWERED = tuple(cls.BINDING.function for cls in sorted(
    (c for c in OPERATORS.values() if "C_PLAIN" in vars(c)), key=lambda c: c.C_PLAIN))


def entry(name: str, x, *args) -> dict | None:
    """What the entry for ``name(x, *args)`` holds (a dict: kernel, parameter bytes, threads, origin, output shape
    and dtype...; calls.c's ``call_cache_entry``), or None: for tests, which check that every route records the same
    entry."""
    if not _HAS:
        return None
    return _native.call_cache_entry(OPS[name], x, *args)


#: ``register_cuda_retry(retry)``: what retries a failed launch of an entry ``move_new`` made,
#: ``retry(device, function, grid, shared_mem, params, src, dst, stream)``.
register_cuda_retry: Callable[[Callable], None] = _native.call_cache_cuda_retry if _HAS else _miss


def _relaunch(*args) -> None:
    """``register_cuda_retry``'s hook until PyTorch's adapter registers its own (the same function): a failed launch
    of a ``move_new`` entry on CuPy arrays is retried by ``runtime/cuda/launch.py``'s ``relaunch``."""
    from .cuda.launch import relaunch
    relaunch(*args)


register_cuda_retry(_relaunch)


#: ``register_move_types(types)``: the enum types (a tuple: ``PaddingMode``, ``DepthSpaceOrder``, ``DataType``)
#: whose members, passed as family arguments, key by identity.
register_move_types: Callable[[tuple], None] = _native.call_cache_move_types if _HAS else _miss


def put_eager(name: str, x, args: tuple, eager, since: int) -> bool:
    """Record that calls like this one on PyTorch tensor ``x`` (which autograd must record) are served by
    ``eager(x)``, the autograd node's recorder, made on the settings of ``generation()`` ``since``; whether stored."""
    if not _HAS:
        return False
    return _native.call_cache_put_eager(OPS[name], x, args, eager, since)


#: The C side's settings, each doing nothing without it, as ``call``: ``register_torch(tensor_type,
#: is_grad_enabled, dispatch_stack_len, is_functorch_wrapped, raw_stream, current_device, from_numpy)``, PyTorch's
#: hooks (the routing checks, the current stream and device of CUDA tensors, ``torch.from_numpy`` for CPU
#: results); ``register_torch_eager(eager_ok)``, the check an eager entry's call passes first (``eager_ok()`` is
#: true while the autograd node may record calls: no trace, no compiled autograd, the node in use);
#: ``register_cupy(ndarray_type, empty, current_device, current_stream_ptr)``; ``clear()``, which drops every
#: entry; ``set_enabled(flag)``.
register_torch: Callable[..., None] = _native.call_cache_torch if _HAS else _miss
register_torch_eager: Callable[..., None] = _native.call_cache_torch_eager if _HAS else _miss
register_cupy: Callable[..., None] = _native.call_cache_cupy if _HAS else _miss
clear: Callable[[], None] = _native.call_cache_clear if _HAS else _miss
set_enabled: Callable[[bool], None] = _native.call_cache_enable if _HAS else _miss


def info() -> dict:
    """{'enabled', 'numpy', 'entries', 'hits', 'misses', 'planned', 'front'}: whether the cache is on, whether it
    serves NumPy arrays, its entries, the calls it served, the lookups that found no entry, the new shapes it lowered
    and ran itself at such a miss (``LOWER_PLAIN``) and the entries its front table holds (recent ones, found first by
    a cheap hash of the key words)."""
    if not _HAS:
        return {"enabled": False, "numpy": False, "entries": 0, "hits": 0, "misses": 0, "planned": 0, "front": 0}
    _read_settings()
    return _native.call_cache_info()
