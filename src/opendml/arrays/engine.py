"""The array API's engine, below the front and every framework adapter (which import it; it imports none of them):
the one ``Call`` type (an operator call: the inputs' logical descriptions -> the operator's description), ``fixed``
(a ``Call`` of a given description), NumPy's move route (``run_numpy``, behind ``planner``'s Python plan cache;
``execute``, which a test may replace with a spy: every family call is then given to it, uncached) and the
differentiation helpers every adapter shares (``adjoint``, ``constant_inputs``, ``differentiable``,
``ADJOINT_API``). ``Call(*arrays)`` on arrays of any framework goes through the front's
``_dispatch.front.run_list``.
"""
from __future__ import annotations

import numpy as np

from ..model.errors import UnsupportedError, ValidationError
from ..runtime import calls as _calls
from ..runtime import get_backend
from ..runtime.config import CACHE_MIN_BYTES
from ..runtime.cpu.backend import WORDS
from . import _dispatch, planner
from .numpy_adapter import as_input, prefault, words
from .planner import array_layout, logical_desc

__all__ = ["Call", "PLAN_KEY", "fixed", "run_numpy", "execute", "adjoint", "constant_inputs",
           "differentiable", "ADJOINT_API"]

# -- what a never-seen shape's C route reads of the settings -------------------------------------------

_generation_now = _calls._generation or _calls.generation   # the C counter itself (the settings already read)

#: (generation, the CPU backend, its ``plain_conf``: None where its compiled kernels are not loaded, its instance
#: ``__dict__``: a ``prepare`` there is a spy, and the call takes the Python route), kept for the generation they
#: were read in: every ``configure()`` replaces the CPU backend and bumps the generation, so a generation's first
#: never-seen shape reads them (``new_settings``) and the others reuse them (``front._new``, ``index_ops.offer``).
NEW_SETTINGS: tuple = (None, None, None, {})


def new_settings() -> tuple:
    """``NEW_SETTINGS`` read again (where the generation changed, or no call read them yet)."""
    global NEW_SETTINGS
    since = _calls.generation()             # before any setting is read
    backend = get_backend("cpu")
    NEW_SETTINGS = state = (since, backend, None if backend._native is None else backend.plain_conf, vars(backend))
    return state


# -- one call type ---------------------------------------------------------------------------------

#: ``Call(key=PLAN_KEY)``: the key is the planner's, read from ``args`` when asked.
PLAN_KEY = object()
_NONE = ("None",)


class Call:
    """One call of the array API, whatever the operator and the framework, which each adapter runs by its
    one route (``run(call, arrays)``): ``name`` (the function's, for messages), ``make`` (the inputs' logical
    ``TensorDesc``s -> the operator's description), ``multi`` (the function returns a list: SPLIT),
    ``args`` (the first five's arguments as snapshotted, which PyTorch's route takes to their compiled
    plans), ``key`` and ``ccall``.

    ``key``: the Python caches' key for the call's function and arguments, or None (never cached);
    ``PLAN_KEY`` (the first five) reads it from ``args``: the name and each argument where it is a plain
    int, None, or a list or tuple of plain ints (types exactly: 1.0 == 1 must not reuse an int's plan),
    else None. ``ccall`` (optional): ``(function, args, seq)``, the arguments exactly as the function
    offered them to the C call cache (lists snapshotted) and whether the inputs were a sequence (JOIN): a
    compiled run is then recorded there."""

    __slots__ = ("name", "make", "multi", "_key", "ccall", "args")

    def __init__(self, name: str, make, multi: bool = False, key=None, ccall=None, args: tuple = ()):
        self.name, self.make, self.multi, self._key, self.ccall, self.args = name, make, multi, key, ccall, args

    @property
    def key(self):
        key = self._key
        if key is PLAN_KEY:
            key = self._key = _plan_key(self.name, self.args)
        return key

    def describe(self, descs):
        """The validated description for inputs of these logical descriptions (the newest feature level's rules)."""
        desc = self.make(*descs)
        desc.validate()
        return desc

    def describe_arrays(self, dtypes, shapes):
        return self.describe([logical_desc(np.dtype(d), tuple(int(n) for n in s)) for d, s in zip(dtypes, shapes)])

    def __call__(self, *arrays) -> list:
        """The outputs (always a list) for ``arrays`` of any framework."""
        return _dispatch.front.run_list(self, arrays)


def _plan_key(name: str, args: tuple):
    key = [name]
    for value in args:
        t = type(value)
        if t is list or t is tuple:
            for v in value:
                if type(v) is not int:
                    return None
            key.append(tuple(value))
        elif t is int:
            key.append(value)
        elif value is None:
            key.append(_NONE)
        else:
            return None
    return tuple(key)


def fixed(desc, name: str | None = None) -> Call:
    """A ``Call`` running ``desc`` itself (its linear part on tangents, say) on arrays of its inputs' sizes, types."""
    def make(*descs):
        for (where, want), got in zip(desc.named_tensors("input"), descs):
            if got.sizes != want.sizes or got.data_type != want.data_type:
                raise ValidationError(f"{desc.OPERATOR}: {where} must have sizes {list(want.sizes)} and DataType "
                                      f"{want.data_type.name}; got {list(got.sizes)} {got.data_type.name}")
        return desc
    return Call(name or desc.OPERATOR.lower(), make, _many_out(desc))


def _many_out(desc) -> bool:
    """Whether the operator (a description or its class) has a list of outputs."""
    return any(s.many and s.role == "output" for s in desc.SLOTS)


# -- NumPy's move route, behind the move cache -------------------------------------------------------

def _array(x, where: str) -> np.ndarray:
    if x.dtype.kind not in "iuf" or x.dtype.itemsize not in WORDS:
        raise ValidationError(f"{where}: unsupported dtype {x.dtype}")
    return as_input(x)


def _prepared(x: np.ndarray):
    """(input description, (strides, origin), source word array) of ``x``, read where it lies (copied first only
    when a stride is not a whole number of elements)."""
    layout = array_layout(x.shape, x.strides, x.itemsize)
    if layout is None:
        x = np.ascontiguousarray(x)
        layout = array_layout(x.shape, x.strides, x.itemsize)
    return logical_desc(x.dtype, x.shape), (layout.strides, layout.origin), words(x, layout)


def run_numpy(call: Call, arrays) -> list:
    """The NumPy path: validate on the arrays' shapes, then execute; a call seen before (same function, arguments,
    dtypes, shapes and strides, on the CPU backend in force) is served from the move cache (``planner.lookup``; once
    a compiled run is recorded in the C call cache, ``runtime.calls.move`` serves it before it gets here)."""
    key = record = None
    if call.key is not None and execute is _EXECUTE:      # (a replaced ``execute`` is given every call, uncached)
        arrays_key = planner.array_key(arrays)
        if arrays_key is not None:
            since = _calls.generation() if call.ccall is not None else None   # before any setting is read
            backend = get_backend("cpu")
            # a backend whose prepare was replaced on the instance (a spy) records nothing new here (calls the C
            # cache holds are still served from C); configure(call_cache=False) turns this cache off too
            if "prepare" not in backend.__dict__ and backend.config.call_cache:
                key = (call.key, arrays_key)
                # the layouts planned for: the C record is refused where another thread changed one meanwhile
                record = (call, since, tuple((x.shape, x.strides) for x in arrays))
                entry = planner.lookup(key, backend)
                if entry is not None:
                    outs = _replay(entry, arrays, call.name)
                    # another spelling of a recorded call (cast's float and DataType.FLOAT64): the C cache learns it
                    _put_c(record, arrays, outs, entry.offsets, entry.steps)
                    return outs
    arrays = [_array(x, call.name) for x in arrays]
    desc = call.describe([logical_desc(x.dtype, x.shape) for x in arrays])
    if execute is not _EXECUTE:
        return execute(desc, arrays)
    return _execute(desc, arrays, key, record, call.name)


def _replay(entry, arrays, name: str) -> list:
    """A cached call on new arrays of the recorded dtypes, shapes and strides: new outputs, then the recorded kernels
    on the new addresses (or, without them, the recorded plan prepared again)."""
    backend = entry.backend
    # named as the uncached route names it, so an allocation error reads the same whichever route the call took
    tuned = getattr(entry.desc, "PLAIN_KERNEL", None) is not None      # (as _execute)
    what = name if tuned else entry.desc.OPERATOR
    outs = [backend.empty(shape, arrays[0].dtype if tuned else dtype, what)[0] for shape, dtype in entry.outs]
    steps = entry.steps
    if steps is None:
        srcs = [_prepared(x)[2] for x in arrays]
        backend.prepare(entry.plan, srcs, [o.view(WORDS[o.itemsize]).reshape(-1) for o in outs])()
        return outs
    ins = [x.ctypes.data + off for x, off in zip(arrays, entry.offsets)]
    _run_steps(steps, ins, [o.ctypes.data for o in outs])
    return outs


def _run_steps(steps, ins, dsts) -> None:
    """``kernel_steps``' compiled passes from the inputs' element 0 at ``ins`` into the outputs at ``dsts``."""
    for kernel, blob, threads, kind, s, d in steps:
        kernel(dsts[d], dsts[s] if kind == 1 else ins[s], blob, threads)


def execute(desc, arrays) -> list:
    """The validated ``desc``'s move program on NumPy arrays (any strides) into new packed arrays (the CPU backend)."""
    return _execute(desc, arrays, None, None)


_EXECUTE = execute


def _execute(desc, arrays, key, record, name: str | None = None) -> list:
    """``execute``; where ``key`` is given and the call succeeds, it is recorded in the move cache (``planner``)
    under ``key`` and, with ``record`` ((the Call, the call cache's generation read before any setting, the inputs'
    (shape, strides) as planned)) and the compiled kernels, in the C call cache."""
    arrays = [_array(x, desc.OPERATOR) for x in arrays]
    prepared = [_prepared(x) for x in arrays]
    plan = desc.lower(in_layouts=[p[1] for p in prepared])
    backend = get_backend("cpu")           # large outputs reuse released, already-resident blocks
    # the first five (a tuned kernel each: PLAIN_KERNEL) give the input's own dtype (its metadata kept), and an
    # allocation error names their function (``name``), as their other routes do
    tuned = getattr(desc, "PLAIN_KERNEL", None) is not None
    what = name if tuned and name else desc.OPERATOR
    outs = []
    for t in desc.outputs:
        out, fresh = backend.empty(t.sizes, arrays[0].dtype if tuned else t.data_type.numpy_dtype, what)
        prefault(backend, out, fresh)
        outs.append(out)
    dsts = [o.view(WORDS[o.itemsize]).reshape(-1) for o in outs]
    srcs = [p[2] for p in prepared]
    # A call to record runs the compiled passes it records (built once: the backend's own kernels, parameters and
    # threads, as prepare would run them)
    steps = planner.kernel_steps(backend, plan, srcs, dsts, tuned) \
        if key is not None and backend.kernels == "compiled" else None
    if steps is None:
        backend.prepare(plan, srcs, dsts)()
    else:
        _run_steps(steps, [a.ctypes.data for a in srcs], [o.ctypes.data for o in dsts])
    if key is not None:
        _record(key, record, backend, desc, plan, arrays, prepared, outs, steps)
    return outs


def _record(key, record, backend, desc, plan, arrays, prepared, outs, steps) -> None:
    # Only arrays read where they lie (not copied by _prepared; the key admits no array that as_input converts) are
    # replayed from their own addresses.
    offsets = []
    for x, (_, (_, origin), src) in zip(arrays, prepared):
        off = -origin * x.itemsize
        if array_layout(x.shape, x.strides, x.itemsize) is None or \
                (src.size and x.ctypes.data + off != src.ctypes.data):
            return
        offsets.append(off)
    planner.record(key, planner.Entry(backend, desc, plan,
                                                tuple((o.shape, o.dtype) for o in outs), tuple(offsets), steps))
    _put_c(record, arrays, outs, offsets, steps)


def _put_c(record, arrays, outs, offsets, steps) -> None:
    """Record a compiled run in the C call cache (``runtime.calls.put_move``): it serves the next such call from C."""
    call, since, planned = record if record is not None else (None, None, None)
    if steps is None or call is None or call.ccall is None:
        return
    name, args, seq = call.ccall
    _calls.put_move(name, tuple(arrays) if seq else arrays[0], args,
                    tuple((o.shape, o.dtype, o.nbytes >= CACHE_MIN_BYTES) for o in outs),
                    tuple(-off for off in offsets),
                    tuple((kind, s, d, blob, threads) for _, blob, threads, kind, s, d in steps),
                    call.multi, since, planned)


def adjoint(desc, cotangents, constants=()) -> tuple:
    """The adjoint of ``desc``'s linear part applied to ``cotangents`` (one per output) and, after them,
    ``constants``, the values of the inputs it reads (``constant_inputs``: index arrays): one array per input, as
    the operator module declares it."""
    return tuple(linear_part(desc).adjoint(ADJOINT_API, *cotangents, *constants))


def linear_part(desc):
    """``desc``'s linear part (``UnsupportedError`` where its data types have none)."""
    lin = desc.linear_part()
    if lin is None:
        raise UnsupportedError(f"{desc.OPERATOR}: not differentiable for these data types "
                               f"({', '.join(t.data_type.name for t in desc.inputs + desc.outputs)})")
    return lin


def constant_inputs(desc) -> tuple:
    """The input positions whose values ``desc``'s adjoint reads (``ADJOINT_INPUTS``, ``opendml.ops._spec``: index
    arrays), which get no cotangent and keep their values under forward-mode AD."""
    return tuple(getattr(desc, "ADJOINT_INPUTS", ()))


def differentiable(desc) -> bool:
    return getattr(desc, "linear_part", None) is not None and desc.linear_part() is not None


class _AdjointApi:
    """The namespace the operator modules' ``adjoint`` methods are given: every array-API function, on any framework
    (registered by ``front``), the index functions' adjoint helpers (``index_adjoint``, ``index_primal``: registered
    by ``index_ops``), and two neutral helpers."""

    @staticmethod
    def reshape(x, shape):
        return x.reshape(tuple(int(n) for n in shape))

    @staticmethod
    def sum(x, axes):
        return x.sum(axis=tuple(axes))


#: What ``adjoint`` hands to the operator modules.
ADJOINT_API = _AdjointApi()
