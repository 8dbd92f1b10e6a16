"""opendml's operators for JAX: differentiable, and usable under ``jax.jit``
and ``jax.vmap``. Imported only when asked for (``import opendml.jax``); the
array API (``opendml.unfold(x, ...)`` and the others) takes JAX arrays without
it, through the same code.

Which code runs:

* **Eager** (a concrete ``jax.Array``, no transformation): opendml's own
  kernels. CPU arrays are read in place through NumPy and large outputs are
  handed to JAX without a copy; GPU arrays go to opendml's CUDA kernels
  through CuPy (DLPack) where CuPy is installed. Elsewhere (a GPU without
  CuPy, a TPU) the eager call runs the lax form below, compiled once per
  shape.
* **Traced** (under ``jit``, ``vmap``, ``grad``, ``scan``...): the **pure-lax
  route**. Each operator has a formulation in ``jax.lax`` (pad, strided
  slices, interior padding, reverse) that XLA compiles and fuses for whatever
  device the program runs on; there is no XLA FFI target or host callback, so
  a jitted function stays one XLA program on the CPU, GPU or TPU. The lax
  forms give the same bits as the kernels: UNFOLD, SLICE1 and SLICE_GRAD only
  move elements, and FOLD adds each output element's window terms in
  increasing row-major window order from +0, float16 in float32 rounded once,
  integers wrapping. The one exception is XLA's: its CPU code flushes
  subnormal floats to zero, so under jit on the CPU a float32/float64 FOLD
  sum that involves subnormal values is 0 (the kernels keep it).
  ``benchmarks/jax_ops.py`` measures the lax forms against
  ``lax.conv_general_dilated_patches``, JAX's own im2col, and its VJP.

Every function below takes a ``jax.Array``, concrete or traced, or anything
``jnp.asarray`` converts (a NumPy array), and returns a new array of its
dtype. Either way the operator's description is built from the (abstract)
shape and dtype first, so a bad argument raises opendml's own
``ValidationError`` while tracing, with the message an eager call gives; an
array sharded over several devices raises ``opendml.UnsupportedError``.

Gradients follow ``jax.custom_vjp``: the backward of UNFOLD is FOLD and of
FOLD is UNFOLD; SLICE1 (and SLICE) go back through SLICE_GRAD, and SLICE_GRAD
through SLICE1. The backward calls are opendml operators too, so reverse mode
works to any order (``jax.grad(jax.grad(...))``, ``jax.jacrev`` of
``jax.jacrev``). As with every ``custom_vjp`` function, forward mode
(``jax.jvp``, ``jax.jacfwd``, ``jax.linearize``, and so ``jax.hessian``) is
not available. The operators are linear, so no residuals are saved; under an
eager ``jax.grad`` both passes see concrete arrays and run the kernels.

Dtypes: DirectML's 11 element types (float16/32/64, int8/16/32/64,
uint8/16/32/64). bfloat16, complex, bool, float8 and other types raise
``opendml.UnsupportedError`` naming the dtype and the 11 types. 64-bit types
need ``jax_enable_x64``, as everywhere in JAX.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence, Union

import jax
import jax.numpy as jnp

import opendml.arrays as arrays
from .arrays.jax_adapter import SUPPORTED_DTYPES, lax_fold, lax_slice1, lax_slice_grad, lax_unfold

__all__ = ["unfold", "fold", "slice1", "slice_grad", "Unfold", "Fold", "SUPPORTED_DTYPES",
           "lax_unfold", "lax_fold", "lax_slice1", "lax_slice_grad"]

Ints = Union[int, Sequence[int]]


def _jax(x) -> jax.Array:
    return x if isinstance(x, jax.Array) else jnp.asarray(x)


def slice(x: Any, offsets: Sequence[int], sizes: Sequence[int], strides: Sequence[int]) -> jax.Array:  # noqa: A001
    """``opendml.slice`` on ``x`` as a JAX array; its gradient is ``slice_grad``.

    Parameters
    ----------
    x : jax.Array or array-like
        The array sliced.
    offsets, sizes, strides : sequence of int
        As ``opendml.slice`` takes them: one entry per axis, ``sizes`` being
        the output's shape.

    Returns
    -------
    jax.Array
        Of shape ``sizes``.
    """
    return arrays.slice(_jax(x), offsets, sizes, strides)


def slice1(x: Any, window_offsets: Sequence[int], window_sizes: Sequence[int], window_strides: Sequence[int],
           output_sizes: Sequence[int] | None = None) -> jax.Array:
    """``opendml.slice1`` on ``x`` as a JAX array; its gradient is ``slice_grad``.

    Parameters
    ----------
    x : jax.Array or array-like
        The array the window reads.
    window_offsets, window_sizes, window_strides : sequence of int
        The window, one entry per axis (strides non-zero; a negative stride
        walks from the window's end), as ``opendml.slice1`` takes it.
    output_sizes : sequence of int or None, optional
        The output's shape; None (the default) takes every reachable
        element.

    Returns
    -------
    jax.Array
        Of shape ``output_sizes``.
    """
    return arrays.slice1(_jax(x), window_offsets, window_sizes, window_strides, output_sizes)


def slice_grad(grad: Any, input_sizes: Sequence[int], window_offsets: Sequence[int], window_sizes: Sequence[int],
               window_strides: Sequence[int]) -> jax.Array:
    """``opendml.slice_grad`` on ``grad`` as a JAX array; its gradient is ``slice1``.

    Parameters
    ----------
    grad : jax.Array or array-like
        The gradient of ``slice1``'s output.
    input_sizes : sequence of int
        The result's shape (``slice1``'s input).
    window_offsets, window_sizes, window_strides : sequence of int
        ``slice1``'s window, as ``opendml.slice_grad`` takes it.

    Returns
    -------
    jax.Array
        Of shape ``input_sizes``, 0 where ``slice1`` does not read.
    """
    return arrays.slice_grad(_jax(grad), input_sizes, window_offsets, window_sizes, window_strides)


def unfold(x: Any, window_sizes: Ints, strides: Ints = 1, dilations: Ints = 1, start_padding: Ints = 0,
           end_padding: Ints = 0) -> jax.Array:
    """``opendml.unfold`` on ``x`` as a JAX array; its gradient is ``fold``.

    Parameters
    ----------
    x : jax.Array or array-like
        (N, C, *spatial).
    window_sizes : int or sequence of int
        The window size per spatial axis, each >= 1.
    strides, dilations : int or sequence of int, optional
        Per spatial axis, each >= 1 (default 1).
    start_padding, end_padding : int or sequence of int, optional
        Zeros before and after each spatial axis (default 0).

    Returns
    -------
    jax.Array
        (N, C * prod(window_sizes), BlockCount).
    """
    return arrays.unfold(_jax(x), window_sizes, strides, dilations, start_padding, end_padding)


def fold(x: Any, output_sizes: Ints, window_sizes: Ints, strides: Ints = 1, dilations: Ints = 1,
         start_padding: Ints = 0, end_padding: Ints = 0) -> jax.Array:
    """``opendml.fold`` on ``x`` as a JAX array; its gradient is ``unfold``.

    Parameters
    ----------
    x : jax.Array or array-like
        The columns, (N, C * prod(window_sizes), BlockCount).
    output_sizes : int or sequence of int
        The spatial sizes of the result.
    window_sizes, strides, dilations, start_padding, end_padding
        As ``unfold`` takes them.

    Returns
    -------
    jax.Array
        (N, C, *output_sizes), overlapping windows summed.
    """
    return arrays.fold(_jax(x), output_sizes, window_sizes, strides, dilations, start_padding, end_padding)


class _Fixed:
    """A frozen dataclass of an array function's arguments, all but the
    array: lists are kept as tuples (hashable, so it can be a static argument
    of ``jax.jit``), and calling it with ``x`` calls its function
    (``_FUNCTIONS``) as ``function(x, *fields)``."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            object.__setattr__(self, f.name, tuple(value) if isinstance(value, (list, tuple)) else value)

    def __call__(self, x: Any) -> jax.Array:
        return _FUNCTIONS[type(self)](x, *(getattr(self, f.name) for f in dataclasses.fields(self)))


@dataclasses.dataclass(frozen=True)
class Unfold(_Fixed):
    """UNFOLD with fixed arguments, shaped like ``torch.nn.Unfold`` but N-D with
    asymmetric padding: ``Unfold((3, 3), start_padding=1, end_padding=1)(x)``
    maps (N, C, *S) to (N, C * prod(window_sizes), BlockCount). Hashable, so
    it can be a static argument of ``jax.jit``. Calling it calls
    ``opendml.jax.unfold`` with these arguments (lists are kept as tuples).

    Parameters
    ----------
    window_sizes, strides, dilations, start_padding, end_padding
        As ``unfold`` takes them.
    """

    window_sizes: Ints
    strides: Ints = 1
    dilations: Ints = 1
    start_padding: Ints = 0
    end_padding: Ints = 0


@dataclasses.dataclass(frozen=True)
class Fold(_Fixed):
    """FOLD with fixed arguments, shaped like ``torch.nn.Fold``:
    ``Fold(output_sizes, window_sizes, ...)(x)`` maps (N, C * prod(window_sizes),
    BlockCount) to (N, C, *output_sizes), summing overlapping windows.
    Hashable; calling it calls ``opendml.jax.fold`` with these arguments
    (lists are kept as tuples).

    Parameters
    ----------
    output_sizes, window_sizes, strides, dilations, start_padding, end_padding
        As ``fold`` takes them.
    """

    output_sizes: Ints
    window_sizes: Ints
    strides: Ints = 1
    dilations: Ints = 1
    start_padding: Ints = 0
    end_padding: Ints = 0


_FUNCTIONS = {Unfold: unfold, Fold: fold}
