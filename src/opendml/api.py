"""Array-level functions: ``slice``, ``slice1`` and ``unfold`` on NumPy, CuPy,
PyTorch or JAX arrays, returning a new packed array of the same framework on
the same device.

The input is read where it lies, whatever its strides: axes with negative
strides are turned around so the lowest address is the origin, and the plan
gets the array's signed strides. No input copy is made unless its byte strides
are not multiples of its element size.
"""
from __future__ import annotations

import numpy as np

from .ops import Slice1OperatorDesc, SliceOperatorDesc, UnfoldOperatorDesc
from .spec.data_type import DataType
from .spec.errors import UnsupportedError, ValidationError
from .spec.tensor_desc import TensorDesc


def slice(x, offsets, sizes, strides):  # noqa: A001 - DirectML's name
    """DML_SLICE: ``out[c] = x[offsets + strides * c]``, ``out.shape == sizes``."""
    return _run(x, lambda t: SliceOperatorDesc(t, None, offsets, sizes, strides), ("slice", offsets, sizes, strides))


def slice1(x, window_offsets, window_sizes, window_strides, output_sizes=None):
    """DML_SLICE1: a window of ``x`` walked with signed strides (a negative
    stride starts at the window's end). ``output_sizes`` defaults to every
    reachable element: ``1 + (window_sizes - 1) // |window_strides|``."""
    def make(t):
        out = None if output_sizes is None else TensorDesc(t.data_type, output_sizes)
        return Slice1OperatorDesc(t, out, window_offsets, window_sizes, window_strides)
    return _run(x, make, ("slice1", window_offsets, window_sizes, window_strides, output_sizes))


def unfold(x, window_sizes, strides=1, dilations=1, start_padding=0, end_padding=0):
    """DML_UNFOLD (im2col) over the spatial axes of ``x`` (shape (N, C, *spatial)):
    ``out.shape == (N, C * prod(window_sizes), prod(blocks))``. Scalars apply to
    every spatial axis."""
    def make(t):
        d = t.rank - 2
        per_axis = [_per_axis(v, d) for v in (window_sizes, strides, dilations, start_padding, end_padding)]
        return UnfoldOperatorDesc(t, None, *per_axis)
    return _run(x, make, ("unfold", window_sizes, strides, dilations, start_padding, end_padding))


def _per_axis(value, d):
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),) * max(d, 1)
    return value


# -- frameworks ---------------------------------------------------------------

def _framework(x) -> str:
    mod = type(x).__module__.split(".")[0]
    if isinstance(x, np.ndarray):
        return "numpy"
    if mod in ("cupy", "torch", "jax", "jaxlib"):
        return "jax" if mod == "jaxlib" else mod
    raise ValidationError(
        f"expected a NumPy, CuPy, PyTorch or JAX array; got {type(x).__module__}.{type(x).__name__}")


_NO_KEY = object()


def _freeze(value):
    """A hashable form of an argument that is a plain int, None, or a list or
    tuple of plain ints; anything else (NumPy integers, floats, objects) gives
    no key, and such calls are validated every time."""
    t = type(value)
    if t is int or value is None:
        return value
    if (t is tuple or t is list) and all(type(v) is int for v in value):
        return (len(value), *value)
    return _NO_KEY


#: Validated (desc, plan) per (operator arguments, dtype, shape, strides): a
#: repeated call on same-shaped arrays skips validation and lowering.
_PLANS: dict = {}
PLAN_CACHE = 256


def _run(x, make_desc, key=None):
    frozen = tuple(_freeze(v) for v in key[1:]) if key else (_NO_KEY,)
    if _NO_KEY not in frozen:
        make_desc = _Cached(make_desc, (key[0], frozen))
    fw = _framework(x)
    if fw == "numpy":
        return _run_numpy(x, make_desc)
    if fw == "cupy":
        from .backends.cuda_backend import run_array
        return run_array(x, make_desc)
    if fw == "torch":
        if x.requires_grad:
            x = x.detach()
        if x.device.type == "cpu":
            import torch
            return torch.from_dlpack(_run_numpy(np.from_dlpack(x), make_desc))
        if x.device.type == "cuda":
            import cupy
            import torch
            from .backends.cuda_backend import run_array
            with cupy.cuda.Device(x.device.index or 0):
                return torch.from_dlpack(run_array(cupy.from_dlpack(x), make_desc))
        raise UnsupportedError(f"PyTorch tensors on {x.device} are not supported; use cpu or cuda")
    # JAX
    import jax
    (dev,) = x.devices()
    if dev.platform == "cpu":
        return jax.numpy.asarray(_run_numpy(np.asarray(x), make_desc))
    if dev.platform == "gpu":
        import cupy
        from .backends.cuda_backend import run_array
        with cupy.cuda.Device(dev.id):
            out = run_array(cupy.from_dlpack(x), make_desc)
        return jax.dlpack.from_dlpack(out)
    raise UnsupportedError(f"JAX arrays on {dev.platform} are not supported")


def array_layout(shape, byte_strides, itemsize):
    """Signed element strides and the origin (element offset of index 0 from the
    lowest address), or None when a stride is not a whole number of elements."""
    if any(s % itemsize for s in byte_strides):
        return None
    strides = tuple(s // itemsize for s in byte_strides)
    origin = sum((n - 1) * -t for n, t in zip(shape, strides) if t < 0)
    return strides, origin


def logical_desc(dtype, shape) -> TensorDesc:
    if len(shape) == 0:
        raise ValidationError("TensorDesc: DimensionCount must be in [1, 8]; got 0 (a 0-d array)")
    return TensorDesc(DataType.from_numpy(dtype), tuple(shape))


class _Cached:
    """``make_desc`` with a key: array_plan looks the plan up before validating."""

    def __init__(self, make_desc, key):
        self.make_desc, self.key = make_desc, key

    def __call__(self, t):
        return self.make_desc(t)


def array_plan(x, make_desc, ascontiguous):
    """Validate the operator on ``x``'s logical description and lower it with
    ``x``'s own signed strides. Returns (desc, plan, low, span): ``low`` is
    ``x`` with negative-stride axes turned around (its first element is the
    lowest address, the plan's origin) and ``span`` the elements from there.
    Shared by the NumPy and CuPy paths."""
    layout = array_layout(x.shape, x.strides, x.itemsize)
    if layout is None:
        x = ascontiguous(x)
        layout = array_layout(x.shape, x.strides, x.itemsize)
    strides, origin = layout
    cache_key = None
    if isinstance(make_desc, _Cached):
        cache_key = (make_desc.key, np.dtype(x.dtype).str, tuple(x.shape), strides)
        hit = _PLANS.get(cache_key)
    else:
        hit = None
    if hit is not None:
        desc, plan = hit
    else:
        desc = make_desc(logical_desc(x.dtype, x.shape))
        plan = desc.lower(in_strides=strides, in_offset=origin)
        if cache_key is not None:
            if len(_PLANS) >= PLAN_CACHE:
                _PLANS.clear()      # simple and safe under threads; plans are cheap to rebuild
            _PLANS[cache_key] = (desc, plan)
    low = x if all(t >= 0 for t in strides) else x[tuple(np.s_[::-1] if t < 0 else np.s_[:] for t in strides)]
    span = sum((n - 1) * abs(t) for n, t in zip(x.shape, strides)) + 1
    return desc, plan, low, span


#: Fresh outputs this large are faulted in by the calling thread before a
#: threaded CPU kernel writes them (see _run_numpy).
PREFAULT_BYTES = 4 << 20


def _run_numpy(x: np.ndarray, make_desc):
    from .backends import get_backend
    from .backends.numpy_backend import WORDS
    if x.dtype.byteorder == ">" or (x.dtype.byteorder == "=" and not np.little_endian):
        x = x.astype(x.dtype.newbyteorder("<"))
    desc, plan, low, span = array_plan(x, make_desc, np.ascontiguousarray)
    word = WORDS[x.itemsize]
    src = np.lib.stride_tricks.as_strided(low.view(word), shape=(span,), strides=(x.itemsize,))
    backend = get_backend("cpu")
    out, fresh = backend.empty(desc.output_tensor.sizes, x.dtype)
    if fresh and out.nbytes >= PREFAULT_BYTES and backend.threads > 1:
        # Fault the fresh output's pages in from this thread first: on Linux,
        # threads faulting in one new (huge-page advised) mapping at once can
        # stall each other for tens of milliseconds; the copy is then threaded.
        out.reshape(-1).view(np.uint8)[::4096] = 0
    backend.prepare(plan, src, out.view(word).reshape(-1))()
    return out


def cpu_output_cache(limit: int | None = None) -> dict:
    """The CPU array API's output cache, and optionally a new size limit.

    With the compiled CPU kernels, ``dml.slice``/``slice1``/``unfold`` on NumPy
    arrays put outputs of 1 MiB and up in memory blocks that, once the output
    (and every view of it) is released, are kept for the next output of a
    similar size instead of being returned to the system: a fresh large
    allocation is paid for in page faults and zero-filling on first touch,
    which costs about as much as the operator itself. ``limit`` is how many
    bytes of released blocks may be kept (default 1 GiB, or the environment's
    ``OPENDML_CPU_CACHE_BYTES``); 0 turns reuse off and frees what is held.
    Returns ``{'limit', 'blocks', 'bytes', 'hits', 'misses'}`` after the
    change; without the compiled kernels every output is a plain
    ``np.empty`` and the cache reports a limit of 0.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 0):
        raise ValidationError(f"cpu_output_cache: limit must be an int >= 0 (bytes) or None; got {limit!r}")
    from .backends import get_backend
    native = get_backend("cpu")._native
    if native is None:
        return {"limit": 0, "blocks": 0, "bytes": 0, "hits": 0, "misses": 0}
    if limit is not None:
        native.cache_limit(int(limit))
    return native.cache_info()
