"""JAX arrays for the data-movement family, differentiable in reverse mode,
generic over what each operator module declares (no branch per operator).

The call is validated on the arrays' (abstract) shapes and dtypes first, so a
bad argument raises opendml's error at trace time. Then:

* a concrete array runs the NumPy path on ``np.asarray(x)`` (on the CPU a
  view, elsewhere a copy to the host) and the result comes back on the
  input's device: the same bytes as the NumPy call;
* a traced array (``jit``, ``vmap``, ``grad``...) runs the same NumPy path
  through ``jax.pure_callback`` (``vmap_method="sequential"``), with the
  output shapes and dtypes from the description: the same bytes again.

Where the operator is differentiable for its types (``desc.linear_part()``
is not None) the call is one generic ``jax.custom_vjp`` whose backward is
``desc.linear_part().adjoint(...)``: other opendml operators called through
the array API (so it is itself differentiable, to any order). As for every
``custom_vjp`` function, forward mode (``jax.jvp``) is not available.
"""
from __future__ import annotations

import functools

import jax
import numpy as np

from ..model.errors import UnsupportedError
from . import family

__all__ = ["run"]


class _Static:
    """The validated description as ``custom_vjp``'s static argument
    (hashed and compared by the description's value)."""

    __slots__ = ("desc", "name")

    def __init__(self, desc, name):
        self.desc, self.name = desc, name

    def __hash__(self):
        return hash(self.desc)

    def __eq__(self, other):
        return isinstance(other, _Static) and other.desc == self.desc


def run(call, arrays) -> list:
    # the arrays' dtypes and ranks were checked by the array API (``_contract.check_inputs``)
    desc = call.describe_arrays([np.dtype(x.dtype) for x in arrays], [tuple(x.shape) for x in arrays])
    for t in desc.outputs:
        dt = t.data_type.numpy_dtype
        if jax.dtypes.canonicalize_dtype(dt) != dt:
            raise UnsupportedError(f"{call.name}: the output's dtype {dt} is a 64-bit type, which JAX has turned "
                                   f"off (jax_enable_x64 is False); enable it or choose a 32-bit type")
    p = _Static(desc, call.name)
    if family.differentiable(desc):
        return list(_linear(p, tuple(arrays)))
    return list(_forward(p, tuple(arrays)))


def _forward(p, xs):
    desc = p.desc
    if any(isinstance(x, jax.core.Tracer) for x in xs):
        shapes = tuple(jax.ShapeDtypeStruct(t.sizes, t.data_type.numpy_dtype) for t in desc.outputs)
        return tuple(jax.pure_callback(lambda *a: tuple(family.execute(desc, [np.asarray(v) for v in a])),
                                       shapes, *xs, vmap_method="sequential"))
    # the first array that says where it lies (a constant JAX keeps as a NumPy
    # array inside its transforms, such as a residual, says nothing)
    devices = next((x.devices() for x in xs if hasattr(x, "devices")), None) or {jax.devices("cpu")[0]}
    if len(devices) != 1:
        raise UnsupportedError(f"{p.name}: a JAX array on {len(devices)} devices (sharded) is not supported; "
                               f"gather it on one device first")
    (dev,) = devices
    outs = family.execute(desc, [np.asarray(x) for x in xs])
    return tuple(jax.device_put(o, dev) for o in outs)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _linear(p, xs):
    return _forward(p, xs)


def _fwd(p, xs):
    # linear: no residuals but the values an adjoint reads (``ADJOINT_INPUTS``:
    # index arrays, never differentiated); the shapes are in p
    return _linear(p, xs), tuple(xs[i] for i in getattr(p.desc, "ADJOINT_INPUTS", ()))


def _bwd(p, constants, cts):
    if not constants:
        return (tuple(family.adjoint(p.desc, cts)),)
    return (tuple(p.desc.linear_part().adjoint(family.ADJOINT_API, *cts, *constants)),)


_linear.defvjp(_fwd, _bwd)
