"""JAX arrays, by one route (``run``) for every operator (what a user sees of it, and which code runs where:
``opendml.jax``'s docstring). An operator whose canonical form's array-API function ``f`` has a pure-``lax`` form
here, ``lax_f`` (``lax_unfold``, ``lax_fold``, ``lax_slice1``, SLICE's through it, ``lax_slice_grad``), runs it
where a program is traced or compiled, and eagerly off ``KERNEL_PLATFORMS`` or on a GPU without CuPy (where the
others run on the host). A traced call of an operator without one runs the same ``Call`` on NumPy views through
``jax.pure_callback`` (``vmap_method="sequential"``), the output shapes read from the description built on the
abstract shapes. Where the operator is linear for the dtypes, it is a ``jax.custom_vjp`` (named ``opendml_<op>`` in
jaxprs) whose backward is the operator module's ``adjoint`` through the array API.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..model.errors import UnsupportedError
from . import engine
from ._contract import DTYPE_NAMES
from ..ops import max_copied_elements
from ..ops._spec import binding_of
from ..ops.slice_grad import window_walk
from ..ops.unfold import blocks_per_dimension

__all__ = ["run", "lax_unfold", "lax_fold", "lax_slice1", "lax_slice_grad", "SUPPORTED_DTYPES",
           "ZERO_COPY_BYTES", "KERNEL_PLATFORMS"]

#: The 11 element types of DirectML that opendml's operators take, as NumPy names.
SUPPORTED_DTYPES = tuple(DTYPE_NAMES.values())

#: CPU outputs this large (and 64-byte aligned) become JAX arrays without a copy (DLPack).
ZERO_COPY_BYTES = 1 << 16

#: Platforms whose concrete arrays run opendml's kernels (elsewhere: the lax form, or the host).
KERNEL_PLATFORMS = ("cpu", "gpu")


# -- the one route -------------------------------------------------------------

def run(call, arrays) -> list:
    """``call`` on JAX arrays (concrete or traced): the outputs, as a list."""
    xs = tuple(arrays)
    if any(isinstance(x, jax.core.Tracer) for x in xs):
        p = _static(call, xs)
        if engine.differentiable(p.desc):
            return list(_linear(p, xs))
        # not differentiable for these types (one_hot): a constant to autodiff, as PyTorch detaches it, where
        # differentiating its host callback raised JAX's "Pure callbacks do not support JVP"
        return list(_forward(p, tuple(jax.lax.stop_gradient(x) for x in xs)))
    return list(_concrete(call, xs))


def _static(call, xs):
    """``call`` validated on the arrays' (abstract) shapes and dtypes, as a static argument (the array API checked
    their dtypes and ranks, ``_contract.check_inputs``)."""
    desc = call.describe_arrays([np.dtype(x.dtype) for x in xs], [tuple(x.shape) for x in xs])
    _check_x64(call.name, (t.data_type.numpy_dtype for t in desc.outputs))
    return _Static(desc, call)


def _check_x64(name: str, dtypes) -> None:
    for dt in dtypes:
        if jax.dtypes.canonicalize_dtype(dt) != dt:
            raise UnsupportedError(f"{name}: the output's dtype {dt} is a 64-bit type, which JAX has turned "
                                   f"off (jax_enable_x64 is False); enable it or choose a 32-bit type")


@dataclasses.dataclass(frozen=True, slots=True)
class _Static:
    """The validated description as ``custom_vjp``'s static argument (hashed and compared by value), with the call
    that made it (which runs it again on other arrays)."""
    desc: Any
    call: Any = dataclasses.field(compare=False)


def _forward(p, xs) -> tuple:
    desc = p.desc
    if any(isinstance(x, jax.core.Tracer) for x in xs):
        lax_form = _lax(desc)
        if lax_form is not None:
            # of a strong type, as the kernels' results and the host callback's are (lax keeps a weak type)
            return (jax.lax.convert_element_type(lax_form(*xs), desc.outputs[0].data_type.numpy_dtype),)
        shapes = tuple(jax.ShapeDtypeStruct(t.sizes, t.data_type.numpy_dtype) for t in desc.outputs)
        return tuple(jax.pure_callback(lambda *a: tuple(p.call(*(np.asarray(v) for v in a))),
                                       shapes, *xs, vmap_method="sequential"))
    return _concrete(p.call, xs, p)      # the forward pass of an eager jax.grad / jax.vjp


def _concrete(call, xs, p=None) -> tuple:
    """``call`` on concrete arrays, where the first array that says where it lies does (a NumPy residual says
    nothing); ``p``: its static argument, if made (else made where needed)."""
    devices = next((x.devices() for x in xs if hasattr(x, "devices")), None) or {jax.devices("cpu")[0]}
    if len(devices) != 1:
        raise UnsupportedError(f"{call.name}: a JAX array on {len(devices)} devices (sharded) is not supported; "
                               f"gather it on one device first, or call opendml inside shard_map")
    (dev,) = devices
    platform = dev.platform if dev.platform in KERNEL_PLATFORMS else None
    if platform == "gpu":
        try:
            import cupy
        except ImportError:
            cupy = None
        if cupy is not None:
            with cupy.cuda.Device(dev.id):      # (a NumPy residual, or an array elsewhere, copied onto the GPU)
                outs = call(*(cupy.from_dlpack(x) if hasattr(x, "devices") and x.devices() == devices else
                              cupy.asarray(np.asarray(x)) for x in xs))
            _check_x64(call.name, (o.dtype for o in outs))
            return tuple(jax.dlpack.from_dlpack(o) for o in outs)
    if platform is None:
        p = p or _static(call, xs)
        if _lax(p.desc) is not None:
            return _lax_jit(p, xs)          # XLA compiles the lax form for the platform
    outs = call(*(np.asarray(x) for x in xs))
    _check_x64(call.name, (o.dtype for o in outs))
    return tuple(_from_numpy(o, dev) for o in outs)


def _from_numpy(out: np.ndarray, dev):
    if out.nbytes >= ZERO_COPY_BYTES and out.ctypes.data % 64 == 0:
        y = jax.dlpack.from_dlpack(out)          # holds ``out`` (and its memory block) alive
    else:
        y = jnp.asarray(out)
    return y if dev in y.devices() else jax.device_put(y, dev)


@functools.partial(jax.jit, static_argnums=0)
def _lax_jit(p, xs):
    return _linear(p, xs)


# -- the differentiable operator ----------------------------------------------

def _bwd(p, constants, cts):
    desc = p.desc
    if all(g.dtype == jax.dtypes.float0 for g in cts):     # the cotangents of integer outputs
        return (tuple(np.zeros(t.sizes, jax.dtypes.float0) for t in desc.inputs),)
    return (engine.adjoint(desc, cts, constants),)


@functools.lru_cache(maxsize=None)
def _differentiable(name: str):
    """One ``custom_vjp`` function per operator, named ``opendml_<op>`` in jaxprs."""
    def forward(p, xs):
        return _forward(p, xs)
    forward.__name__ = forward.__qualname__ = f"opendml_{name}"
    f = jax.custom_vjp(forward, nondiff_argnums=(0,))
    # linear: no residuals but the values an adjoint reads; the shapes are in p
    f.defvjp(lambda p, xs: (f(p, xs), tuple(xs[i] for i in engine.constant_inputs(p.desc))), _bwd)
    return f


def _linear(p, xs):
    return _differentiable(p.call.name)(p, xs)


# -- the lax forms (no validation: the arguments are a validated description's) -

def _zero(dtype):
    return np.zeros((), dtype)


def lax_unfold(x, window, strides, dilations, start_padding, end_padding):
    """UNFOLD: ``(N, C, *S) -> (N, C * prod(window), prod(blocks))``, row ``c * K + k``, from the zero-padded input by
    strided slices. Two forms of the same copy: XLA's CPU code runs the one taking the spatial axes one at a time
    faster (about 1.2x in 2-D and 2.4x in 3-D on 16 cores); its GPU code runs the one stacking the K window slices
    at once faster in 2-D (about 1.2-1.4x on an H100), but not in 3-D (``python -m benchmarks.jax_ops
    --variants``). Under jit only the branch of the platform compiled for is lowered."""
    args = (window, strides, dilations, start_padding, end_padding)
    if len(window) == 2:
        return lax.platform_dependent(x, cpu=lambda x: _unfold_by_axis(x, *args),
                                      default=lambda x: _unfold_stacked(x, *args))
    return _unfold_by_axis(x, *args)


def _padded(x, start_padding, end_padding):
    return lax.pad(x, _zero(x.dtype), [(0, 0, 0)] * 2 + [(a, b, 0) for a, b in zip(start_padding, end_padding)])


def _unfold_stacked(x, window, strides, dilations, start_padding, end_padding):
    """One strided slice per window element k (row-major), stacked."""
    n, c, *spatial = x.shape
    blocks = blocks_per_dimension(spatial, window, strides, dilations, start_padding, end_padding)
    padded = _padded(x, start_padding, end_padding)
    rows = []
    for k in itertools.product(*(range(w) for w in window)):
        first = [ki * d for ki, d in zip(k, dilations)]
        rows.append(lax.slice(padded, (0, 0, *first),
                              (n, c, *((f + (b - 1) * t + 1) for f, b, t in zip(first, blocks, strides))),
                              (1, 1, *strides)))
    return jnp.stack(rows, axis=2).reshape(n, c * math.prod(window), math.prod(blocks))


def _unfold_by_axis(x, window, strides, dilations, start_padding, end_padding):
    """One spatial axis at a time: axis a's window slices are stacked on a new axis placed after the window axes
    already made, so the result is laid out (N, C, k_0..k_{d-1}, b_0..b_{d-1})."""
    n, c, *spatial = x.shape
    blocks = blocks_per_dimension(spatial, window, strides, dilations, start_padding, end_padding)
    y = _padded(x, start_padding, end_padding)
    for a, (w, t, d, b) in enumerate(zip(window, strides, dilations, blocks)):
        axis = 2 + 2 * a                          # y is (N, C, k_0..k_{a-1}, b_0..b_{a-1}, P_a, ...)
        first, limit, step = [0] * y.ndim, list(y.shape), [1] * y.ndim
        parts = []
        for k in range(w):
            first[axis], limit[axis], step[axis] = k * d, k * d + (b - 1) * t + 1, t
            parts.append(lax.slice(y, first, limit, step))
        y = jnp.stack(parts, axis=2 + a)
    return y.reshape(n, c * math.prod(window), math.prod(blocks))


def lax_fold(cols, out_spatial, window, strides, dilations, start_padding, end_padding):
    """FOLD: ``(N, C * prod(window), prod(blocks)) -> (N, C, *out_spatial)``. Term k (row-major) is window element
    k's columns spread to where they land (``lax.pad`` with interior padding; negative edge padding crops the start
    and end padding), the terms added in increasing k. float16 sums in float32 and rounds once; integers wrap."""
    n, rows, _ = cols.shape[-3:]                  # the input may lead with 1s
    kk = math.prod(window)
    c = rows // kk
    blocks = blocks_per_dimension(out_spatial, window, strides, dilations, start_padding, end_padding)
    dtype = np.dtype(cols.dtype)
    acc = np.dtype(np.float32) if dtype == np.float16 else dtype
    terms = lax.convert_element_type(cols, acc).reshape(n, c, kk, *blocks)
    zero = _zero(acc)
    total = None
    for i, k in enumerate(itertools.product(*(range(w) for w in window))):
        config = [(0, 0, 0)] * 2
        for s, ki, d, b, t, a, e in zip(out_spatial, k, dilations, blocks, strides, start_padding, end_padding):
            low = ki * d - a                                  # where block 0 lands, less the start padding
            config.append((low, s - low - (b - 1) * t - 1, t - 1))
        term = lax.pad(terms[:, :, i], zero, config)
        total = term if total is None else total + term
    if acc.kind == "f":
        # The definition starts from +0, so a zero sum is +0 (XLA may drop an explicit ``0 +``: -0 turned to +0).
        total = jnp.where(total == zero, zero, total)
    return lax.convert_element_type(total, dtype)


def _window_walk(offsets, sizes, strides, out_sizes):
    """``window_walk`` with the reversed axes as a tuple of their numbers."""
    first, step, back = window_walk(offsets, sizes, strides, out_sizes)
    return first, step, tuple(axis for axis, b in enumerate(back) if b)


def lax_slice1(x, offsets, sizes, strides, out_sizes=None):
    """SLICE1: ``out[c] = x[start + strides * c]`` (start at the window's end where the stride is negative): a
    strided slice, reversed on those axes; ``out_sizes`` defaults to every element the window reaches."""
    if out_sizes is None:
        out_sizes = [max_copied_elements(w, t) for w, t in zip(sizes, strides)]
    first, step, rev = _window_walk(offsets, sizes, strides, out_sizes)
    y = lax.slice(x, first, [f + (m - 1) * t + 1 for f, m, t in zip(first, out_sizes, step)], step)
    return lax.rev(y, rev) if rev else y


def lax_slice_grad(g, input_sizes, offsets, sizes, strides):
    """SLICE_GRAD: zeros of ``input_sizes`` with ``g`` where SLICE1 reads: ``lax.pad`` with interior padding (after
    reversing the negative axes)."""
    first, step, rev = _window_walk(offsets, sizes, strides, g.shape)
    g = lax.rev(g, rev) if rev else g
    return lax.pad(g, _zero(g.dtype), [(f, s - f - (m - 1) * t - 1, t - 1)
                                      for f, s, m, t in zip(first, input_sizes, g.shape, step)])


def _lax(desc):
    """The pure-lax form of ``desc`` (a function of the array), or None where its operator has none:
    ``lax_<function>`` above, named after the array-API function of its canonical description (a SLICE's is a
    SLICE1), on that description's arguments."""
    canonical = getattr(desc, "canonical", None)
    if canonical is not None:
        desc = canonical()
    b = binding_of(type(desc))
    fn = None if b is None else globals().get(f"lax_{b.function}")
    return None if fn is None else lambda x: fn(x, *desc.call_args())
