"""opendml's operators for JAX: differentiable, and usable under ``jax.jit`` and ``jax.vmap``. Imported only when
asked for (``import opendml.jax``); the array API (``opendml.unfold(x, ...)`` and the others) takes JAX arrays
without it, through the same code.

Which code runs:

* **Eager** (a concrete ``jax.Array``, no transformation): opendml's own kernels. CPU arrays are read in place
  through NumPy and large outputs are handed to JAX without a copy; GPU arrays go to opendml's CUDA kernels through
  CuPy (DLPack) where CuPy is installed. Elsewhere (a GPU without CuPy, a TPU) the eager call runs the lax form
  below, compiled once per shape.
* **Traced** (under ``jit``, ``vmap``, ``grad``, ``scan``...): the **pure-lax route**. Each operator has a
  formulation in ``jax.lax`` (pad, strided slices, interior padding, reverse) that XLA compiles and fuses for
  whatever device the program runs on; there is no XLA FFI target or host callback, so a jitted function stays one
  XLA program on the CPU, GPU or TPU. The lax forms give the same bits as the kernels: UNFOLD, SLICE1 and SLICE_GRAD
  only move elements, and FOLD adds each output element's window terms in increasing row-major window order from
  +0, float16 in float32 rounded once, integers wrapping. The one exception is XLA's: its CPU code flushes subnormal
  floats to zero, so under jit on the CPU a float32/float64 FOLD sum that involves subnormal values is 0 (the
  kernels keep it). ``benchmarks/jax_ops.py`` measures the lax forms against ``lax.conv_general_dilated_patches``,
  JAX's own im2col, and its VJP.

Every function below takes a ``jax.Array``, concrete or traced, or anything ``jnp.asarray`` converts (a NumPy
array), and returns a new array of its dtype. Either way the operator's description is built from the (abstract)
shape and dtype first, so a bad argument raises opendml's own ``ValidationError`` while tracing, with the message an
eager call gives; an array sharded over several devices raises ``opendml.UnsupportedError``.

Gradients follow ``jax.custom_vjp``: the backward of UNFOLD is FOLD and of FOLD is UNFOLD; SLICE1 (and SLICE) go
back through SLICE_GRAD, and SLICE_GRAD through SLICE1. The backward calls are opendml operators too, so reverse
mode works to any order (``jax.grad(jax.grad(...))``, ``jax.jacrev`` of ``jax.jacrev``). As with every
``custom_vjp`` function, forward mode (``jax.jvp``, ``jax.jacfwd``, ``jax.linearize``, and so ``jax.hessian``) is
not available. The operators are linear, so no residuals are saved; under an eager ``jax.grad`` both passes see
concrete arrays and run the kernels.

Dtypes: DirectML's 11 element types (float16/32/64, int8/16/32/64, uint8/16/32/64). bfloat16, complex, bool, float8
and other types raise ``opendml.UnsupportedError`` naming the dtype and the 11 types. 64-bit types need
``jax_enable_x64``, as everywhere in JAX.
"""
from __future__ import annotations

import builtins
import dataclasses
import functools
import inspect
from typing import Any

import jax
import jax.numpy as jnp

from . import arrays as _arrays
from .arrays import _contract
from .arrays.front import Ints
from .arrays.jax_adapter import SUPPORTED_DTYPES, lax_fold, lax_slice1, lax_slice_grad, lax_unfold
from .model import errors as _errors


def _jax(x, where: str, name: str) -> jax.Array:
    """``x`` (the argument ``name``) as a JAX array; what ``jnp.asarray`` refuses is opendml's
    ``ValidationError`` naming it."""
    if isinstance(x, jax.Array):
        return x
    try:
        return jnp.asarray(x)
    except (TypeError, ValueError) as e:
        raise _errors.ValidationError(f"{where}: {name} must be a JAX array or something jnp.asarray converts; got "
                                      f"{type(x).__module__}.{type(x).__qualname__} ({e})") from None


def _on_jax(fn):
    """The array function ``fn`` with its array argument taken as a JAX array (``jnp.asarray`` of anything
    else): the same signature, a ``jax.Array`` result, and ``fn``'s docstring after a line that says so."""
    @functools.wraps(fn)
    def on_jax(x, *args, **kwargs) -> jax.Array:
        return fn(_jax(x, fn.__name__, array), *args, **kwargs)
    on_jax.__module__ = __name__
    on_jax.__signature__ = inspect.signature(fn).replace(return_annotation="jax.Array")
    array = next(iter(on_jax.__signature__.parameters))
    name = fn.__name__
    on_jax.__doc__ = (f"``opendml.{name}`` on ``{array}`` as a JAX array (anything ``jnp.asarray`` takes "
                      f"is converted first): differentiable in reverse mode, its gradient another opendml "
                      f"operator.\n\n    " + _arrays.front._docstring(
                          _contract.BINDING[name], _contract.OPERATOR_OF[name], "jax.Array or array-like",
                          "jax.Array", f"a ``jax.Array`` (on ``{array}``'s device for a JAX\n        array); "
                          "differentiable in reverse mode (``jax.grad``, ``jax.vjp``) where\n        the operator "
                          "is linear for the dtypes."))
    return on_jax


def _checked_lax(fn):
    """The lax form ``fn`` (``lax_<function>``) with its arguments checked as the array function checks them
    (the description built from the array's shape and dtype): opendml's errors, where it would otherwise
    raise JAX's or compute a window that does not fit; then ``fn`` on the description's arguments."""
    name, signature = fn.__name__[len("lax_"):], inspect.signature(fn)

    @functools.wraps(fn)
    def checked(x, *args, **kwargs):
        bound = signature.bind(_jax(x, fn.__name__, next(iter(signature.parameters))), *args, **kwargs)
        bound.apply_defaults()
        x, *args = bound.args
        desc = _arrays.front.plan_call(name, x, tuple(args)).describe_arrays([x.dtype], [x.shape])
        return fn(x, *desc.call_args())
    checked.__module__ = __name__
    return checked


lax_unfold, lax_fold, lax_slice1, lax_slice_grad = map(_checked_lax, (lax_unfold, lax_fold, lax_slice1, lax_slice_grad))


#: The window operators' functions (the plan route's: those with a pure-lax form, SLICE through SLICE1's),
#: each taking its array as a JAX array, read from the registry.
_WINDOW = [name for name in _arrays.FUNCTIONS if _contract.BINDING[name].route == "plan"]
globals().update({name: _on_jax(_arrays.FUNCTIONS[name]) for name in _WINDOW})

__all__ = [*(n for n in _WINDOW if not hasattr(builtins, n)), "Unfold", "Fold", "SUPPORTED_DTYPES",
           "lax_unfold", "lax_fold", "lax_slice1", "lax_slice_grad"]


class _Fixed:
    """A frozen dataclass of an array function's arguments but the array (lists and 1-D NumPy arrays kept as tuples,
    as a call snapshots them); calling it with ``x`` calls ``function(x, *fields)``, the function its class is named
    after."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _arrays.front._snapshot(getattr(self, f.name)))

    def __call__(self, x: Any) -> jax.Array:
        function = globals()[type(self).__name__.lower()]
        return function(x, *(getattr(self, f.name) for f in dataclasses.fields(self)))


@dataclasses.dataclass(frozen=True)
class Unfold(_Fixed):
    """UNFOLD with fixed arguments, shaped like ``torch.nn.Unfold`` but N-D with asymmetric padding:
    ``Unfold((3, 3), start_padding=1, end_padding=1)(x)`` maps (N, C, *S) to (N, C * prod(window_sizes), BlockCount)
    through ``opendml.jax.unfold``. Hashable (lists are kept as tuples), so it can be a static argument of
    ``jax.jit``."""

    window_sizes: Ints
    strides: Ints = 1
    dilations: Ints = 1
    start_padding: Ints = 0
    end_padding: Ints = 0


@dataclasses.dataclass(frozen=True)
class Fold(_Fixed):
    """FOLD with fixed arguments, shaped like ``torch.nn.Fold``: ``Fold(output_sizes, window_sizes, ...)(x)`` maps
    (N, C * prod(window_sizes), BlockCount) to (N, C, *output_sizes), summing overlapping windows, through
    ``opendml.jax.fold``. Hashable, as ``Unfold``."""

    output_sizes: Ints
    window_sizes: Ints
    strides: Ints = 1
    dilations: Ints = 1
    start_padding: Ints = 0
    end_padding: Ints = 0

