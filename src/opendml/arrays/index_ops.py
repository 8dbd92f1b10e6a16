"""The route of the index-driven functions past the C call cache: ``gather``,
``gather_elements``, ``gather_nd``, ``scatter_elements``, ``scatter_nd``,
``one_hot``, ``reverse_subsequences`` and ``diagonal_matrix``
(DIAGONAL_MATRIX1, which DirectML's index pages list beside them; its ``x``
may be left out, ``NO_ARRAY``), which ``arrays.front`` generates from their
operator modules' bindings (route ``"index"``: the inputs offered as one
tuple, the keyword-only ``check_indices`` first among the other arguments).
Below the front: the framework routes are reached through
``_dispatch.front`` at call time.

Each function's operator class's ``arguments`` checks its arguments and
gives the operator's description for its arrays; the route runs it through
the family's framework-neutral call (``engine.Call``). DirectML gives every
tensor of an operator one DimensionCount; the functions take arrays of the
natural ranks (NumPy's ``take``, ``take_along_axis``, ONNX's GatherND and
ScatterND) and pad them with leading 1s (views, ``lead``) to that
DimensionCount, then give the result its natural shape.

What an index array may be and how ``check_indices`` checks it is what
every index function's docstring says (``ops._index.INDICES_DOC`` and
``CHECK_INDICES_DOC``); ``one_hot`` and ``reverse_subsequences`` check
nothing (``ops._index``'s docstring says what they do out of range).

A repeated call is served by the C call cache (see "The C call cache"
below). A never-seen call on NumPy arrays, plain PyTorch CPU or CUDA
tensors or CuPy arrays is validated, lowered, run and recorded in C
(``runtime.calls.index_new``) by the same rules, to the same passes,
launches, bytes and errors as the route; on CUDA a scatter that sorts, a
checked call whose index array is broadcast and a checked call made while
its stream is captured into a CUDA graph take the route (which checks the
indices first, reading their extremes back from the device).

Differentiation (PyTorch autograd, JAX): where the data type is a float type
the gathers, the scatters and ``reverse_subsequences`` are linear in their
data inputs; the adjoints are index-driven move programs of their own
(``ops._index.IndexAdjointDesc`` says which), run by ``index_adjoint``.
Indices get no gradient.
"""
from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from ..model.data_type import DataType
from ..model.errors import ValidationError
from ..model.tensor_desc import MAX_RANK
from ..plan import Copy, Fill, Gather, Scatter
from ..ops._index import IndexAdjointDesc, IndexPrimalDesc
from ..runtime import calls as _calls
from ..runtime import get_backend
from ..runtime.config import CACHE_MIN_BYTES
from ..runtime.cpu import numpy_kernels
from ..runtime.cpu.backend import MOVE_MAX_RANK, WORDS, IndexParams, index_params
from . import _contract, _dispatch, engine, planner
from .planner import logical_desc

__all__: list = []
#: An optional array argument left out (``Binding.optional``: DIAGONAL_MATRIX1's ``x``); None is "not an
#: array", as for every function.
NO_ARRAY: Any = type("NoArray", (), {"__repr__": lambda self: "<no array>"})()
#: The front's functions this route takes (``_dispatch.front``: ``framework``, ``run_list``, ``new_shape``),
#: read at call time: the front lies above.
_front = _dispatch.front
_generation_now = engine._generation_now


def lead(x, rank: int, where: str):
    """``x`` with leading 1s up to ``rank`` dimensions (a view); a ``ValidationError`` naming ``where`` (the
    function) where ``rank`` passes DirectML's largest."""
    if rank > MAX_RANK:
        raise ValidationError(f"{where}: the operator's tensors for this call need {rank} dimensions (its "
                              f"inputs' and result's ranks, each led by 1s to the largest); DirectML's tensors "
                              f"have at most {MAX_RANK}")
    shape = tuple(int(n) for n in x.shape)
    if len(shape) == rank:
        return x
    return x.reshape((1,) * (rank - len(shape)) + shape)


def count(value, where: str, field: str, lo: int, what: str) -> int:
    """An integer argument that is a DirectML field (``field``, in the
    contract's form: ``GATHER: IndexDimensions must ...``)."""
    if isinstance(value, bool):
        raise _contract.field_error(where, field, f"be an integer ({what})", value)
    try:
        v = operator.index(value)
    except TypeError:
        raise _contract.field_error(where, field, f"be an integer ({what})", value) from None
    if v < lo:
        raise _contract.field_error(where, field, f"be >= {lo} ({what})", v)
    return v


def checked(where: str, x, **others) -> None:
    """The array API's contract (``_contract``): ``x`` (the first array) an
    array of a framework the API takes, of a dtype and rank the operator
    takes; ``others`` (indices, updates, values, lengths) arrays of the
    types the operator's table lists for their tensors."""
    if _contract.framework_of(x) is None:
        raise _contract.not_an_array(x, where, _contract.ARGUMENT[where])
    _contract.check_input(where, x)
    _contract.check_others(where, **others)


def _host(a) -> np.ndarray | None:
    """The values of an index array, on the host (NumPy), for the index check
    (None for a JAX tracer, ``jit`` over the indices: their values are not
    known when the call is traced, so they are not checked; the kernels clamp
    them)."""
    return _host_batched(a)[0]


def _host_batched(a) -> tuple[np.ndarray | None, int]:
    """(``_host(a)``, how many ``torch.func.vmap`` batch dimensions lead it: a PyTorch tensor under vmap has
    its batch dimensions put first, the outermost vmap's first)."""
    if isinstance(a, np.ndarray):
        return a, 0
    if type(a).__module__.startswith("jax") and "Tracer" in type(a).__name__:
        return None, 0
    if type(a).__module__.startswith("torch"):   # PyTorch, read past any torch.func transform
        import torch
        unwrap, wrapped = torch._C._functorch.get_unwrapped, torch._C._functorch.is_functorch_wrapped_tensor
        if _torch_traced(torch, a):
            return None, 0                        # traced (torch.compile): no values to check
        with torch._C._DisableFuncTorch():
            t, bdims = a, []        # (detached once unwrapped: detach() refuses a vmap of a vmap's tensor)
            while wrapped(t):
                bdims.append(torch._C._functorch.maybe_get_bdim(t))     # -1: not a vmap level
                t = unwrap(t)
            t, front = t.detach(), 0
            for b in reversed(bdims):
                if b >= 0:
                    t = t.movedim(front + b, front)
                    front += 1
            return t.cpu().resolve_neg().numpy(), front
    get = getattr(a, "get", None)
    if get is not None and type(a).__module__.startswith("cupy"):
        return get(), 0
    return np.asarray(a), 0


def _torch_traced(torch, a) -> bool:
    """Whether PyTorch tensor ``a`` has no values to read: a call traced by
    ``torch.compile`` (Dynamo's fake run included), a fake or meta tensor, or
    AOTAutograd's functional wrapper of one."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor
    return (_contract.torch_compiling(torch) or a.device.type == "meta" or isinstance(a, (FakeTensor, FunctionalTensor))
            or torch._is_functional_tensor(a))


def _extremes_in_range(lo, hi, bounds, unsigned: bool) -> bool:
    """Whether indices whose smallest and largest values are ``lo`` and ``hi``
    (per tuple entry where ``bounds`` has one n per entry) all lie in
    ``[-n, n)`` (``[0, n)`` unsigned): the index rule, read from extremes."""
    n = np.asarray(bounds, dtype=np.int64).reshape(-1)
    if unsigned:
        return bool((np.asarray(hi).astype(np.uint64) < n.astype(np.uint64)).all())
    return bool(((np.asarray(lo).astype(np.int64) >= -n) & (np.asarray(hi).astype(np.int64) < n)).all())


def check_index_values(v: np.ndarray, bounds, where: str, last_axis: bool = False):
    """The first index of ``v`` outside ``[-n, n)`` (signed types) or ``[0, n)``
    (unsigned) raises ``ValidationError`` naming its value and position;
    ``bounds`` is one n, or (``last_axis``) one n per entry of the last
    axis (index tuples)."""
    if v is None or v.size == 0:
        return
    n = np.asarray(bounds, dtype=np.int64)
    lo, hi = v.min(), v.max()              # one contiguous pass each: the whole array against the smallest bound
    if last_axis:
        n = n.reshape((1,) * (v.ndim - 1) + (-1,))
        if not ((v.dtype.kind == "u" or int(lo) >= -int(n.min())) and int(hi) < int(n.min())):
            flat = v.reshape(-1, v.shape[-1])
            lo, hi = flat.min(axis=0), flat.max(axis=0)
    if _extremes_in_range(lo, hi, n, v.dtype.kind == "u"):   # the common case, from the extremes alone
        return
    if v.dtype.kind == "u":
        bad = v.astype(np.uint64) >= n.astype(np.uint64)
    else:
        w = v.astype(np.int64)
        bad = (w < -n) | (w >= n)
    if bad.any():
        at = tuple(int(p) for p in np.unravel_index(int(np.argmax(bad)), v.shape))   # the first, row-major
        bound = int(np.broadcast_to(n, v.shape)[at])
        lo = -bound if v.dtype.kind == "i" else 0
        raise ValidationError(f"{where}: indices[{', '.join(map(str, at))}] = {int(v[at])} is out of range: it must "
                              f"be in [{lo}, {bound - 1}] (a dimension of size {bound}); pass check_indices=False to "
                              f"skip this check (out-of-range indices are then clamped)")


def _device_extremes(a, last_axis: bool):
    """The smallest and largest index (per entry of the last axis where
    ``last_axis``) of signed GPU indices (a PyTorch CUDA tensor outside any
    transform, a CuPy array), reduced on the device and read back as one
    small array: ``(2, ...)``. None where the host check reads the values
    (host arrays, unsigned or traced indices)."""
    mod = type(a).__module__
    if mod.startswith("torch"):
        import torch
        if not a.is_cuda or a.numel() == 0 or a.dtype not in (torch.int32, torch.int64) or \
                _torch_traced(torch, a) or torch._C._functorch.is_functorch_wrapped_tensor(a):
            return None
        v = a.detach().reshape(-1, a.shape[-1]) if last_axis else a.detach().reshape(-1)
        return torch.stack(torch.aminmax(v, dim=0) if last_axis else torch.aminmax(v)).cpu().numpy()
    if mod.startswith("cupy") and a.dtype.kind == "i" and a.size:
        v = a.reshape(-1, a.shape[-1]) if last_axis else a.reshape(-1)
        import cupy
        return cupy.stack((v.min(axis=0), v.max(axis=0))).get()
    return None


def check(indices, bounds, where: str, last_axis: bool = False) -> None:
    """``check_index_values`` on any framework's indices. Signed GPU indices
    are first reduced to their extremes on the device (one small read back
    instead of copying every index to the host); only where an index is out
    of range are the values read to name the first one."""
    ext = _device_extremes(indices, last_axis)
    if ext is not None and _extremes_in_range(ext[0], ext[1], bounds, False):
        return
    values, batch = _host_batched(indices)
    # (under torch.func.vmap each sample's indices in turn, named as the call on that sample names them)
    for sample in values.reshape(-1, *values.shape[batch:]) if batch else [values]:
        check_index_values(sample, bounds, where, last_axis=last_axis)


def _like(a, x, where: str):
    """Index (or values) array ``a`` in data array ``x``'s framework: as
    given where both are of one framework, else its values moved there
    (NumPy indices for a PyTorch tensor, say)."""
    fx, fa = _front.framework(x, where), _front.framework(a, where)
    if fx is fa:
        return a
    values = _host(a)
    if values is None:
        raise ValidationError(f"{where}: traced JAX indices need JAX data (got {type(x).__module__} data)")
    if fx is None:
        return values
    mod = type(x).__module__
    if mod.startswith("torch"):
        import torch
        return torch.as_tensor(values, device=x.device)
    if mod.startswith("jax"):
        import jax.numpy as jnp
        return jnp.asarray(values)
    if mod.startswith("cupy"):
        import cupy
        return cupy.asarray(values)
    if mod.startswith("dask"):
        import dask.array as da
        return da.from_array(values, chunks=-1)
    return values


# -- The C call cache ------------------------------------------------------------------------------------

# ``offer`` gives each call to the C call cache first (runtime/native/calls_move.c): its arrays as one tuple
# (keyed by dtype, shape and byte strides; on CUDA also device and alignment class), then its other arguments
# as given (exact ints, None and bools key; anything else is not served). The route records what the cache
# can hold (``run``): on the CPU the passes as index.c's parameters (``_record``), the index check fused into
# the passes that read the checked indices; on CUDA the index kernels' launches (``arrays/cuda.move``), a
# checked call's kernels setting a flag in host-mapped memory. A served call whose check fails answers None,
# and the route raises the error naming the first bad index. A checked call whose index array is broadcast
# (``_broadcast``) is checked by the route, then offered to C unchecked (``run``). Every
# ``opendml.configure()`` empties the cache (``call_cache=False`` stops serving and recording; a never-seen
# shape is still lowered in C); a replaced ``engine.execute`` or backend ``prepare`` is given every call.

_OPS = _calls.OPS
#: The functions with an index check (``check_indices``: the keyword-only switch, their first argument
#: after the arrays).
CHECKED = _CHECKED = _calls.CHECKED
_EXECUTE = engine._EXECUTE
_move = _calls.move
_INDEX_PASS = 2                          # put_move's pass kind of index.c's kernel
#: The functions whose never-seen shapes are lowered in C (runtime/native/newshape_index.c,
#: ``runtime.calls.index_new``; the operator class's ``C_INDEX`` is its number there): operator code ->
#: (that number, the element types their tables take at the newest level: bit 16 * j + t for DataType t
#: of the j-th array offered).
_C_INDEX: dict = {}
for _name, _cls in _contract.OPERATOR_OF.items():
    if "C_INDEX" in vars(_cls):
        _row, _binding = _contract.supported_row(_cls), _contract.BINDING[_name]
        _slots = [_binding.slot] + [tensor for tensor, *_ in _binding.others.values()]
        _C_INDEX[_OPS[_name]] = (_cls.C_INDEX, sum(1 << (16 * j + int(t)) for j, slot in enumerate(_slots)
                                                   for t in _row.types_of(slot)))
_index_new = _calls.index_new


def offer(op: int, given: tuple, args: tuple):
    """A call offered to C: a repeat served from the call cache; a never-seen
    shape of a function with a C lowering (``_C_INDEX``) on NumPy arrays,
    plain PyTorch CPU or CUDA tensors or CuPy arrays lowered, run and
    recorded there (the passes ``_record`` records; on CUDA the launches).
    None (nothing run) sends the call to its Python route, which raises
    whatever it raises: a replaced ``engine.execute``, the NumPy kernels or a
    replaced ``prepare``, anything C declines, and a checked index out of
    range (the route's error names the first one)."""
    if engine.execute is not _EXECUTE:
        return None
    out = _move(op, given, *args)
    if out is not None:
        return out
    c = _C_INDEX.get(op)
    if c is None:                                 # the family's C lowering, where it has one (DIAGONAL_MATRIX1's)
        return _front.new_shape(op, given, args)
    state = engine.NEW_SETTINGS
    if state[0] != _generation_now():
        state = engine.new_settings()
    if state[2] is None or "prepare" in state[3]:
        return None
    return _index_new(op, c[0], c[1], given, args, state[0], CACHE_MIN_BYTES)


def _pass_params(plan, p, checked: bool):
    """``put_move``'s tuple of one pass for index.c's kernel (a Gather or a
    Scatter as the CPU backend runs it, ``cpu.backend.index_params``; a
    same-type Copy without maps or scale/bias, or a Fill, as a pass without
    index axes), or None where the kernel does not take it."""
    t = type(p)
    if t is Gather or t is Scatter:
        params = index_params(plan, p) if p.dst == 0 else None
        return None if params is None else (_INDEX_PASS, -1 if params.has_value else p.src, 0, bytes(params), 1,
                                             checked)
    r = len(getattr(p, "sizes", ()))
    if r > MOVE_MAX_RANK or getattr(p, "dst", None) != 0 or (t is not Fill and t is not Copy):
        return None
    out_t = plan.out_types[0]
    size = DataType(out_t).numpy_dtype.itemsize
    params = IndexParams(element_size=size, data_type=out_t, rank=r, dst_offset=p.dst_offset)
    params.sizes[:r] = p.sizes
    params.dst_strides[:r] = p.dst_strides
    if t is Fill:
        params.kind, params.has_value = 1, 1
        params.value_bits = int(numpy_kernels.fill_value(p.value, out_t).view(WORDS[size]))
        return _INDEX_PASS, -1, 0, bytes(params), 1, False
    if p.maps is not None or p.scale_bias is not None or plan.in_types[p.src] != out_t:
        return None
    params.outer, params.src_offset = r, p.src_offset
    params.src_strides[:r] = p.src_strides
    return _INDEX_PASS, p.src, 0, bytes(params), 1, False


def _reads_all(passes, arrays) -> bool:
    """Whether the checked passes read every element of every index array
    they read (the fused check is then the whole check): each index axis
    reads its share (the array's size over the axes reading it) at distinct
    positions; an empty pass reads nothing."""
    slots = {ix.index for p in passes for ix in getattr(p, "indices", ())}
    for slot in slots:
        n = arrays[slot].size
        reading = [(p, ix) for p in passes for ix in getattr(p, "indices", ()) if ix.index == slot]
        for p, ix in reading:
            reads = math.prod(s for s, t in zip(p.sizes, ix.index_strides) if t and s > 1) if p.count else 0
            if reads * sum(1 for q, _ in reading if q is p) != n:
                return False
    return True


def _plain_tensors(given, device: str) -> bool:
    """Whether ``given`` are plain PyTorch tensors on ``device`` ("cpu" or
    "cuda"), outside any trace, transform, dispatch mode or forward-AD level,
    none recorded for autograd (nor, on the CPU, negative or conjugate
    views): what the C call cache may key and serve."""
    import torch
    if _contract.torch_compiling(torch) or torch._C._len_torch_dispatch_stack() or \
            torch.autograd.forward_ad._current_level >= 0:
        return False
    grad, wrapped = torch.is_grad_enabled(), torch._C._functorch.is_functorch_wrapped_tensor
    return all(type(a) is torch.Tensor and a.device.type == device and a.layout is torch.strided and
               not (grad and a.requires_grad) and not wrapped(a) and
               (device != "cpu" or not (a.is_neg() or a.is_conj())) for a in given)


def _host_views(given) -> tuple | None:
    """``given`` (the inputs as offered to the C call cache) as NumPy arrays
    the CPU entries key and read: themselves (exact, aligned, native-order
    ndarrays), or NumPy views of plain PyTorch CPU tensors; else None."""
    if all(type(a) is np.ndarray for a in given):
        return given if all(a.flags.aligned and a.dtype.isnative for a in given) else None
    if not type(given[0]).__module__.startswith("torch") or not _plain_tensors(given, "cpu"):
        return None
    return tuple(a.detach().numpy() for a in given)


def _cuda_record(given) -> bool:
    """Whether the route may record ``given`` (plain PyTorch CUDA tensors or
    CuPy arrays, all of one type) as the CUDA entry's key (``run``)."""
    t = type(given[0])
    if t.__module__.startswith("cupy"):
        return all(type(a) is t for a in given)
    return t.__module__.startswith("torch") and _plain_tensors(given, "cuda")


def _record(name: str, given, args: tuple, call, arrays, shape, since):
    """The route of a CPU call that the C call cache can hold: ``given`` the
    inputs as the function offered them (``_host_views``), ``args`` its
    other arguments as offered, ``arrays`` the route's inputs (views of
    ``given``: reshaped, never copied; ``put_move`` checks each one's element
    0 against its own reading of ``given``'s array), ``shape`` the
    result's. Validated and lowered as ``engine.run_numpy`` does (the same
    errors), its passes recorded in the C call cache, then run from there.
    None where the cache cannot hold it (the family's route then runs it)."""
    views = _host_views(given)
    backend = get_backend("cpu")
    if views is None or len(shape) > 8 or backend._native is None or backend.kernels != "compiled" or \
            not backend.config.call_cache or "prepare" in backend.__dict__ or engine.execute is not _EXECUTE:
        return None
    arrays = [v.reshape(tuple(a.shape)) for v, a in zip(views, arrays)]
    if any(engine._array(a, call.name) is not a for a in arrays):
        return None
    desc = call.describe([logical_desc(a.dtype, a.shape) for a in arrays])
    prepared = [engine._prepared(a) for a in arrays]
    plan = desc.lower(in_layouts=[p[1] for p in prepared])
    checked = name in _CHECKED and bool(args[0])
    passes = [p for p in plan.passes if p.count]
    params = tuple(_pass_params(plan, p, checked and type(p) in (Gather, Scatter)) for p in passes)
    if None in params or (checked and not _reads_all(passes, arrays)):
        return None
    dtype = desc.outputs[0].data_type.numpy_dtype
    origins = tuple(origin * a.itemsize for a, (_, (_, origin), _) in zip(arrays, prepared))
    out = ((tuple(shape), dtype, math.prod(shape) * dtype.itemsize >= CACHE_MIN_BYTES),)
    if not _calls.put_move(name, views, args, out, origins, params, False, since):
        return None
    return _move(_OPS[name], given, *args)


def _broadcast(a) -> bool:
    """Whether CUDA index array ``a`` (a PyTorch tensor or a CuPy array) is
    read at fewer places than it has elements (a stride 0 along a dimension
    of size > 1): the kernels' fused check would not see every index
    (newshape_index.c's ``ix_reads_all``)."""
    strides = a.stride() if callable(getattr(a, "stride", None)) else a.strides
    return any(n > 1 and t == 0 for n, t in zip(a.shape, strides))


def run(name: str, make, arrays, shape, fields=None, given=None, args: tuple = ()):
    """Run ``make``'s description on ``arrays``; ``fields`` (every value
    ``make`` reads besides the arrays' dtypes and shapes) lets the NumPy
    route serve a repeated call's description and plan from the family's
    cache; ``given`` and ``args`` (the inputs and the other arguments as the
    function offered them to the C call cache) record the call there."""
    if not arrays:                                # a generator (an optional array left out): a NumPy array
        return engine.run_numpy(engine.Call(name, make, key=planner.call_key(name, *fields)), [])[0]
    # a framework's first call registers its hooks (``framework``), which empties the C call cache: done
    # before the generation is read (else this call's record would be refused), which is before any setting
    _front.framework(arrays[0], name)
    since = _calls.generation() if given is not None else None
    arrays = [arrays[0]] + [_like(a, arrays[0], name) for a in arrays[1:]]
    key = None if fields is None else planner.call_key(name, *fields)
    call = engine.Call(name, make, key=key)
    if since is not None:
        out = _record(name, given, args, call, arrays, shape, since)
        if out is not None:
            return out
        if _cuda_record(given):
            if name in _CHECKED and args[0] and _broadcast(given[1]):
                # its indices found in range by ``arguments`` (``check``, on the device), the same call
                # unchecked (the same bytes: no index is clamped), served or lowered in C as that call
                out = offer(_OPS[name], given, (False, *args[1:]))
                if out is not None:
                    return out
            else:   # the launches, keyed by the inputs as given (a checked call's kernels checking its indices)
                call.ccall = (name, args, given, (tuple(shape),))
    out = _front.run_list(call, arrays)[0]
    return out.reshape(shape) if tuple(out.shape) != tuple(shape) else out


def index_adjoint(primal, wrt: int, grad, indices):
    """The adjoint of ``primal`` (an index-driven description) with respect to
    its input ``wrt``, applied to ``grad`` (the output's cotangent), for
    ``indices`` (the primal's index array): an array of that input's shape."""
    shape = primal.inputs[wrt].sizes
    return run(f"{primal.OPERATOR.lower()}_adjoint",
                lambda tg, ti: IndexAdjointDesc(primal, wrt, tg, ti),
                [lead(grad, len(shape), primal.OPERATOR), indices], shape)


def index_primal(primal, wrt: int, data, indices):
    """``primal``'s linear part as a function of its input ``wrt`` alone (the
    other data inputs zero), on ``data``: the adjoint of ``index_adjoint``."""
    shape = primal.outputs[0].sizes
    return run(f"{primal.OPERATOR.lower()}_linear", lambda td, ti: IndexPrimalDesc(primal, wrt, td, ti),
                [data, indices], shape)


# What the operator modules' ``adjoint`` methods call (``engine.ADJOINT_API``),
# as the array-API functions are registered there (by front).
for _name in ("index_adjoint", "index_primal"):
    setattr(engine._AdjointApi, _name, staticmethod(globals()[_name]))
