"""The array API: ``slice``, ``slice1``, ``unfold``, ``fold`` and
``slice_grad`` on NumPy, CuPy, PyTorch or JAX arrays, returning a new packed
array of the same framework on the same device.

One adapter per framework (``numpy_adapter``, ``cupy_adapter``,
``torch_adapter``, ``jax_adapter``, ``dask_adapter``) turns an array into what the runtime runs;
the planner (``planner``) turns an array's layout into a validated plan, with a
bounded LRU plan cache. Each function first offers its call to the call cache
(``opendml.runtime.calls``), which serves a repeated call from C; the
adapters record what a first call ran. Before any adapter runs, every function (these and the
family's, ``family``) makes the checks of ``_contract``, one message per
fault for every operator and framework: an array of a framework the API
takes, a dtype and a rank the operator's support table lists. A framework is
recognised by its array type (``_dispatch``), looked up only where the
framework is already imported, so no framework is imported here; the
adapters call these functions again through ``_dispatch.front``, never by
importing this package. May import ``opendml.model``, ``opendml.ops``, ``opendml.plan`` and
``opendml.runtime``.
"""
from __future__ import annotations

import importlib
import math
from collections.abc import MutableSequence as _MutableSequence
from typing import Any, Sequence, Union

import numpy as np

from ..model.errors import ValidationError
from ..model.tensor_desc import TensorDesc
from ..ops import (FoldOperatorDesc, Slice1OperatorDesc, SliceGradOperatorDesc, SliceOperatorDesc,
                   UnfoldOperatorDesc)
from ..runtime import calls as _calls
from . import _contract, _dispatch
from .planner import OpCall, plan_cache_info

__all__ = ["slice", "slice1", "unfold", "fold", "slice_grad", "identity", "cast", "pad", "join", "split", "tile",
           "space_to_depth", "depth_to_space", "gather", "gather_elements", "gather_nd", "scatter_elements",
           "scatter_nd", "one_hot", "reverse_subsequences", "cpu_output_cache", "plan_cache_info", "adapter_for"]

#: An int, or one int per axis.
Ints = Union[int, Sequence[int]]

#: Framework module (``_dispatch.FRAMEWORKS``) -> opendml's adapter module for it.
_ADAPTERS = {"torch": "torch.adapter", "cupy": "cupy_adapter", "jax": "jax_adapter", "dask.array": "dask_adapter"}


#: Adapter per array type already seen (types are few; lookups are per call).
_BY_TYPE: dict = {}


def adapter_for(x, function: str = "array API", argument: str = "x"):
    """The adapter module that runs operators on ``x``'s framework;
    ``ValidationError`` (``function: argument must be a NumPy, CuPy, PyTorch,
    JAX or Dask array; got ...``) for anything else."""
    adapter = _BY_TYPE.get(type(x))
    if adapter is not None:
        return adapter
    kind = _contract.framework_of(x)
    if kind is None:
        raise _contract.not_an_array(x, function, argument)
    if kind == "numpy":
        from . import numpy_adapter
        return _BY_TYPE.setdefault(type(x), numpy_adapter)
    return _BY_TYPE.setdefault(type(x), importlib.import_module(f"{__name__}.{_ADAPTERS[kind]}"))


def _run(x, call: OpCall):
    """The array API's checks (``_contract``: an array of a framework it
    takes, a dtype and rank the operator takes), then the adapter's route."""
    adapter = _BY_TYPE.get(type(x))
    if adapter is None:
        adapter = adapter_for(x, call.name, _contract.ARGUMENT[call.name])
    _check_input(call.name, x)
    return adapter.run(x, call)


def _snap(value):
    """A private copy of a mutable argument, read once: every later step of a
    call (plan-cache key, validation, plan, call-cache record) reads this copy,
    so a list that another thread changes while the call runs can never make
    one step see other values than the rest. Lists stay lists and NumPy arrays
    stay arrays (messages show them as given); immutable values are kept."""
    t = type(value)
    if t is list:
        return value[:]                   # one C-level copy under the GIL
    if t is int or t is tuple or value is None:
        return value
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (list, _MutableSequence)):
        try:                              # another mutable sequence: its items, read once
            return list(value)
        except Exception:                 # noqa: BLE001 - validation then names what is wrong with it
            return value
    return value


def _snaps(*values):
    out = []
    for value in values:
        t = type(value)
        if t is list:
            value = value[:]
        elif not (t is int or t is tuple or value is None):
            value = _snap(value)
        out.append(value)
    return tuple(out)


#: ``_cached(op, x, *args)``: a repeated call served by the call cache (C),
#: or None; each function below passes its arguments exactly as its OpCall
#: holds them, which is how the adapters record the call after a first run.
_cached = _calls.call
_check_input = _contract.check_input
_sizes_of = _contract.sizes_of
_SLICE, _SLICE1, _UNFOLD, _FOLD, _SLICE_GRAD = (_calls.OPS[k] for k in ("slice", "slice1", "unfold", "fold",
                                                                      "slice_grad"))


def slice(x: Any, offsets: Sequence[int], sizes: Sequence[int], strides: Sequence[int]) -> Any:  # noqa: A001
    """DML_SLICE: ``out[c] = x[offsets + strides * c]``, ``out.shape == sizes``.

    Parameters
    ----------
    x : numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        The input, of any strides (read where it lies, negative strides
        included) and of one of DirectML's 11 element types (float16/32/64,
        int8/16/32/64, uint8/16/32/64).
    offsets : sequence of int
        The first element read, one entry per axis of ``x`` (each >= 0).
    sizes : sequence of int
        The output's shape, one entry per axis (each >= 1).
    strides : sequence of int
        The step between elements read, one entry per axis (each >= 1); the
        last element read, ``offsets + (sizes - 1) * strides``, must lie in
        ``x``.

    Returns
    -------
    numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        A new packed (C-contiguous) array of ``x``'s framework, dtype and
        device, of shape ``sizes``; for a Dask array, a lazy Dask array (nothing is
        computed until it is). A PyTorch result is differentiable: eager
        autograd (``grad_fn`` ``opendml_<op>Backward``), forward-mode AD and
        the ``torch.func`` transforms (``grad``, ``jvp``, ``vmap``,
        ``jacrev``, ``jacfwd``, ``hessian``); under ``torch.compile`` the call
        goes through opendml's operators (``opendml_cpp::`` once the C++
        library is loaded, else the ``opendml::`` custom operators). A JAX result is
        differentiable in reverse mode (``jax.grad``; see ``opendml.jax``).

    Raises
    ------
    ValidationError
        If ``x`` is not a NumPy, CuPy, PyTorch, JAX or Dask array, has a
        rank the operator's support table lacks, or an argument breaks one
        of the operator's rules (the message names the field and the rule).
    UnsupportedError
        If ``x``'s dtype is not one of the operator's support table at
        the newest feature level (bool, bfloat16, complex...: the message
        names the supported ones), or the array is one opendml cannot read (a PyTorch
        tensor on a device other than cpu, cuda or meta, or sparse, nested
        or conjugated; a JAX array sharded over several devices).
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a
        ``MemoryError``): if the output cannot be allocated (NumPy, CuPy,
        PyTorch CPU and CUDA tensors, JAX arrays run through them; for a Dask
        array, when it is computed); the message names the operator, the
        output's shape and its bytes.
    """
    out = _cached(_SLICE, x, offsets, sizes, strides)
    if out is not None:
        return out
    # _snaps, the common case (lists) inline: a new shape's call is timed (issue 19)
    offsets = offsets[:] if type(offsets) is list else _snap(offsets)
    sizes = sizes[:] if type(sizes) is list else _snap(sizes)
    strides = strides[:] if type(strides) is list else _snap(strides)
    return _run(x, OpCall("slice", (offsets, sizes, strides),
                          lambda t: SliceOperatorDesc(t, None, offsets, sizes, strides)))


def slice1(x: Any, window_offsets: Sequence[int], window_sizes: Sequence[int], window_strides: Sequence[int],
           output_sizes: Sequence[int] | None = None) -> Any:
    """DML_SLICE1: a window of ``x`` walked with signed strides (a negative
    stride starts at the window's end). ``output_sizes`` defaults to every
    reachable element: ``1 + (window_sizes - 1) // |window_strides|``.

    Parameters
    ----------
    x : numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        The input, of any strides (read where it lies, negative strides
        included) and of one of DirectML's 11 element types (float16/32/64,
        int8/16/32/64, uint8/16/32/64).
    window_offsets : sequence of int
        Where the window starts, one entry per axis (each >= 0).
    window_sizes : sequence of int
        The window's sizes, one entry per axis (each >= 1); the window must
        lie in ``x``: ``window_offsets + window_sizes <= x.shape``.
    window_strides : sequence of int
        The step per axis: non-zero, in INT32's range; a negative stride
        walks the window from its last element.
    output_sizes : sequence of int or None, optional
        The output's shape, at most the reachable elements per axis; None
        (the default) takes them all.

    Returns
    -------
    numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        A new packed (C-contiguous) array of ``x``'s framework, dtype and
        device, of shape ``output_sizes``; for a Dask array, a lazy Dask array (nothing is
        computed until it is). A PyTorch result is differentiable: eager
        autograd (``grad_fn`` ``opendml_<op>Backward``), forward-mode AD and
        the ``torch.func`` transforms (``grad``, ``jvp``, ``vmap``,
        ``jacrev``, ``jacfwd``, ``hessian``); under ``torch.compile`` the call
        goes through opendml's operators (``opendml_cpp::`` once the C++
        library is loaded, else the ``opendml::`` custom operators). A JAX result is
        differentiable in reverse mode (``jax.grad``; see ``opendml.jax``).

    Raises
    ------
    ValidationError
        If ``x`` is not a NumPy, CuPy, PyTorch, JAX or Dask array, has a
        rank the operator's support table lacks, or an argument breaks one
        of the operator's rules (the message names the field and the rule).
    UnsupportedError
        If ``x``'s dtype is not one of the operator's support table at
        the newest feature level (bool, bfloat16, complex...: the message
        names the supported ones), or the array is one opendml cannot read (a PyTorch
        tensor on a device other than cpu, cuda or meta, or sparse, nested
        or conjugated; a JAX array sharded over several devices).
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a
        ``MemoryError``): if the output cannot be allocated (NumPy, CuPy,
        PyTorch CPU and CUDA tensors, JAX arrays run through them; for a Dask
        array, when it is computed); the message names the operator, the
        output's shape and its bytes.
    """
    out = _cached(_SLICE1, x, window_offsets, window_sizes, window_strides, output_sizes)
    if out is not None:
        return out
    # _snaps, the common case (lists, no output sizes) inline: a new shape's call is timed (issue 19)
    window_offsets = window_offsets[:] if type(window_offsets) is list else _snap(window_offsets)
    window_sizes = window_sizes[:] if type(window_sizes) is list else _snap(window_sizes)
    window_strides = window_strides[:] if type(window_strides) is list else _snap(window_strides)
    if output_sizes is not None:
        output_sizes = _snap(output_sizes)

    def make(t):
        out = None if output_sizes is None else _sizes_of("slice1", "OutputTensor",
                                                          lambda: TensorDesc(t.data_type, output_sizes))
        return Slice1OperatorDesc(t, out, window_offsets, window_sizes, window_strides)
    return _run(x, OpCall("slice1", (window_offsets, window_sizes, window_strides, output_sizes), make))


def unfold(x: Any, window_sizes: Ints, strides: Ints = 1, dilations: Ints = 1, start_padding: Ints = 0,
           end_padding: Ints = 0) -> Any:
    """DML_UNFOLD (im2col) over the spatial axes of ``x`` (shape (N, C, *spatial)):
    ``out.shape == (N, C * prod(window_sizes), prod(blocks))``. Scalars apply to
    every spatial axis.

    Parameters
    ----------
    x : numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        The input of shape (N, C, *spatial), of any strides (read where it lies, negative strides
        included) and of one of DirectML's 11 element types (float16/32/64,
        int8/16/32/64, uint8/16/32/64).
    window_sizes : int or sequence of int
        The window (kernel) size per spatial axis, each >= 1.
    strides : int or sequence of int, optional
        The step between windows per spatial axis, each >= 1 (default 1).
    dilations : int or sequence of int, optional
        The step between a window's elements per spatial axis, each >= 1
        (default 1).
    start_padding, end_padding : int or sequence of int, optional
        Zeros added before and after each spatial axis (default 0); the
        dilated window must fit the padded input.

    Returns
    -------
    numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        A new packed (C-contiguous) array of ``x``'s framework, dtype and
        device, of shape (N, C * prod(window_sizes), BlockCount); for a Dask array, a lazy Dask array (nothing is
        computed until it is). A PyTorch result is differentiable: eager
        autograd (``grad_fn`` ``opendml_<op>Backward``), forward-mode AD and
        the ``torch.func`` transforms (``grad``, ``jvp``, ``vmap``,
        ``jacrev``, ``jacfwd``, ``hessian``); under ``torch.compile`` the call
        goes through opendml's operators (``opendml_cpp::`` once the C++
        library is loaded, else the ``opendml::`` custom operators). A JAX result is
        differentiable in reverse mode (``jax.grad``; see ``opendml.jax``).

    Raises
    ------
    ValidationError
        If ``x`` is not a NumPy, CuPy, PyTorch, JAX or Dask array, has a
        rank the operator's support table lacks, or an argument breaks one
        of the operator's rules (the message names the field and the rule).
    UnsupportedError
        If ``x``'s dtype is not one of the operator's support table at
        the newest feature level (bool, bfloat16, complex...: the message
        names the supported ones), or the array is one opendml cannot read (a PyTorch
        tensor on a device other than cpu, cuda or meta, or sparse, nested
        or conjugated; a JAX array sharded over several devices).
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a
        ``MemoryError``): if the output cannot be allocated (NumPy, CuPy,
        PyTorch CPU and CUDA tensors, JAX arrays run through them; for a Dask
        array, when it is computed); the message names the operator, the
        output's shape and its bytes.
    """
    out = _cached(_UNFOLD, x, window_sizes, strides, dilations, start_padding, end_padding)
    if out is not None:
        return out
    args = _snaps(window_sizes, strides, dilations, start_padding, end_padding)

    def make(t):
        d = len(t.sizes) - 2
        return UnfoldOperatorDesc(t, None, *[per_axis(v, d) for v in args])
    return _run(x, OpCall("unfold", args, make))


def fold(x: Any, output_sizes: Ints, window_sizes: Ints, strides: Ints = 1, dilations: Ints = 1,
         start_padding: Ints = 0, end_padding: Ints = 0) -> Any:
    """DML_FOLD (col2im), the adjoint of ``unfold``: ``x`` of shape (N, C *
    prod(window_sizes), BlockCount) summed back into an array of shape (N, C,
    *output_sizes), each output element adding its window elements in
    increasing window order (float16 sums in float32; integers wrap).

    ``output_sizes`` are the spatial sizes of the result. Scalars apply to
    every spatial axis; the number of spatial axes is the length of
    ``output_sizes``, else of ``window_sizes``, else 1. BlockCount must be
    what ``unfold`` gives for an input of the output's shape with the same
    window, strides, dilations and padding.

    Parameters
    ----------
    x : numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        The columns, of shape (N, C * prod(window_sizes), BlockCount), of any strides (read where it lies, negative strides
        included) and of one of DirectML's 11 element types (float16/32/64,
        int8/16/32/64, uint8/16/32/64).
    output_sizes : int or sequence of int
        The spatial sizes of the result.
    window_sizes : int or sequence of int
        The window size per spatial axis, each >= 1.
    strides : int or sequence of int, optional
        The step between windows per spatial axis, each >= 1 (default 1).
    dilations : int or sequence of int, optional
        The step between a window's elements per spatial axis, each >= 1
        (default 1).
    start_padding, end_padding : int or sequence of int, optional
        The padding ``unfold`` applied before and after each spatial axis
        (default 0); padded positions are dropped.

    Returns
    -------
    numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        A new packed (C-contiguous) array of ``x``'s framework, dtype and
        device, of shape (N, C, *output_sizes); for a Dask array, a lazy Dask array (nothing is
        computed until it is). A PyTorch result is differentiable: eager
        autograd (``grad_fn`` ``opendml_<op>Backward``), forward-mode AD and
        the ``torch.func`` transforms (``grad``, ``jvp``, ``vmap``,
        ``jacrev``, ``jacfwd``, ``hessian``); under ``torch.compile`` the call
        goes through opendml's operators (``opendml_cpp::`` once the C++
        library is loaded, else the ``opendml::`` custom operators). A JAX result is
        differentiable in reverse mode (``jax.grad``; see ``opendml.jax``).

    Raises
    ------
    ValidationError
        If ``x`` is not a NumPy, CuPy, PyTorch, JAX or Dask array, has a
        rank the operator's support table lacks, or an argument breaks one
        of the operator's rules (the message names the field and the rule).
    UnsupportedError
        If ``x``'s dtype is not one of the operator's support table at
        the newest feature level (bool, bfloat16, complex...: the message
        names the supported ones), or the array is one opendml cannot read (a PyTorch
        tensor on a device other than cpu, cuda or meta, or sparse, nested
        or conjugated; a JAX array sharded over several devices).
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a
        ``MemoryError``): if the output cannot be allocated (NumPy, CuPy,
        PyTorch CPU and CUDA tensors, JAX arrays run through them; for a Dask
        array, when it is computed); the message names the operator, the
        output's shape and its bytes.
    """
    out = _cached(_FOLD, x, output_sizes, window_sizes, strides, dilations, start_padding, end_padding)
    if out is not None:
        return out
    args = _snaps(output_sizes, window_sizes, strides, dilations, start_padding, end_padding)
    output_sizes, window_sizes = args[:2]

    def make(t):
        d = next((len(v) for v in (output_sizes, window_sizes) if _is_sequence(v)), 1)
        spatial, window, *rest = (per_axis(v, d) for v in args)
        rows, c, k = t.sizes[-2], t.sizes[-2], _window_count(window)
        if k is not None:                # else the description names the bad window entry
            if rows % k:
                raise ValidationError(
                    f"FOLD: InputTensor.Sizes[{t.rank - 2}] must be C x prod(WindowSizes), a multiple of "
                    f"prod(WindowSizes) = {k} (x.shape[-2], window_sizes); got {rows} (shape {list(t.sizes)})")
            c = rows // k
        if not _is_sequence(spatial):
            raise _contract.field_error("fold", "OutputTensor.Sizes", "be an int or a sequence of ints (output_sizes)",
                                        spatial)
        spatial = list(spatial)
        out = _sizes_of("fold", "OutputTensor", lambda: TensorDesc(t.data_type, (t.sizes[-3], c, *spatial)))
        return FoldOperatorDesc(t, out, window, *rest)
    return _run(x, OpCall("fold", args, make))


def slice_grad(grad: Any, input_sizes: Sequence[int], window_offsets: Sequence[int], window_sizes: Sequence[int],
               window_strides: Sequence[int]) -> Any:
    """DML_SLICE_GRAD, the adjoint of ``slice1``: an array of shape
    ``input_sizes`` (the shape of ``slice1``'s input) that is 0 except where
    ``slice1`` with this window reads, which receives the matching element of
    ``grad`` (``grad.shape`` being ``slice1``'s output shape).

    Parameters
    ----------
    grad : numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        The gradient of ``slice1``'s output, of any strides (read where it lies, negative strides
        included) and of one of DirectML's 11 element types (float16/32/64,
        int8/16/32/64, uint8/16/32/64).
    input_sizes : sequence of int
        The shape of the result (``slice1``'s input), one entry per axis.
    window_offsets, window_sizes, window_strides : sequence of int
        ``slice1``'s window, as ``slice1`` takes it (strides non-zero,
        negative ones walking from the window's end); the window must lie in
        ``input_sizes``.

    Returns
    -------
    numpy.ndarray, cupy.ndarray, torch.Tensor, jax.Array or dask.array.Array
        A new packed (C-contiguous) array of ``grad``'s framework, dtype and
        device, of shape ``input_sizes``; for a Dask array, a lazy Dask array (nothing is
        computed until it is). A PyTorch result is differentiable: eager
        autograd (``grad_fn`` ``opendml_<op>Backward``), forward-mode AD and
        the ``torch.func`` transforms (``grad``, ``jvp``, ``vmap``,
        ``jacrev``, ``jacfwd``, ``hessian``); under ``torch.compile`` the call
        goes through opendml's operators (``opendml_cpp::`` once the C++
        library is loaded, else the ``opendml::`` custom operators). A JAX result is
        differentiable in reverse mode (``jax.grad``; see ``opendml.jax``).

    Raises
    ------
    ValidationError
        If ``grad`` is not a NumPy, CuPy, PyTorch, JAX or Dask array, has a
        rank the operator's support table lacks, or an argument breaks one
        of the operator's rules (the message names the field and the rule).
    UnsupportedError
        If ``grad``'s dtype is not one of the operator's support table at
        the newest feature level (bool, bfloat16, complex...: the message
        names the supported ones), or the array is one opendml cannot read (a PyTorch
        tensor on a device other than cpu, cuda or meta, or sparse, nested
        or conjugated; a JAX array sharded over several devices).
    AllocationError
        ``opendml.AllocationError`` (a ``ValidationError`` and a
        ``MemoryError``): if the output cannot be allocated (NumPy, CuPy,
        PyTorch CPU and CUDA tensors, JAX arrays run through them; for a Dask
        array, when it is computed); the message names the operator, the
        output's shape and its bytes.
    """
    out = _cached(_SLICE_GRAD, grad, input_sizes, window_offsets, window_sizes, window_strides)
    if out is not None:
        return out
    input_sizes, window_offsets, window_sizes, window_strides = _snaps(input_sizes, window_offsets, window_sizes,
                                                                       window_strides)

    def make(t):
        out = _sizes_of("slice_grad", "OutputGradientTensor", lambda: TensorDesc(t.data_type, input_sizes))
        return SliceGradOperatorDesc(t, out, window_offsets, window_sizes, window_strides)
    return _run(grad, OpCall("slice_grad", (input_sizes, window_offsets, window_sizes, window_strides), make))


def _window_count(window) -> int | None:
    """``prod(window)`` where every entry is an int >= 1, else None."""
    if type(window) is tuple or type(window) is list:
        for w in window:
            if type(w) is not int or w < 1:
                break
        else:
            return math.prod(window)
    if not _is_sequence(window) or not all(
            isinstance(w, (int, np.integer)) and not isinstance(w, bool) and w >= 1 for w in window):
        return None
    return math.prod(int(w) for w in window)


def _is_sequence(value) -> bool:
    return not isinstance(value, (str, bytes)) and hasattr(value, "__len__")


def per_axis(value, d: int):
    """A scalar applies to each of ``d`` spatial axes; a sequence is kept."""
    if type(value) is int:
        return (value,) * (d if d > 1 else 1)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),) * max(d, 1)
    return value


def cpu_output_cache(limit: int | None = None) -> dict:
    """The CPU array API's output-block cache, and optionally a new size limit.

    With the compiled CPU kernels, outputs of 1 MiB and up are put in memory
    blocks that, once the output (and every view of it) is released, are kept
    for the next output of a similar size instead of being returned to the
    system: a fresh large allocation is paid for in page faults and
    zero-filling on first touch, which costs about as much as the operator
    itself. ``limit`` is how many bytes of released blocks may be kept; it is
    the same setting as ``opendml.configure(output_cache_bytes=...)``. 0 turns
    reuse off and frees what is held. Returns ``{'limit', 'blocks', 'bytes',
    'hits', 'misses'}`` after the change; with the NumPy kernels every output
    is a plain ``np.empty`` and the cache reports a limit of 0.

    Parameters
    ----------
    limit : int or None, optional
        The new limit in bytes (>= 0; 0 turns reuse off and frees the blocks
        held), or None (the default) to leave the setting as it is.

    Returns
    -------
    dict
        ``{'limit': int, 'blocks': int, 'bytes': int, 'hits': int,
        'misses': int}``: the limit in bytes, the released blocks kept and
        their bytes, and the cache's hit and miss counts (outputs that got a
        kept block, or did not). All 0 with the NumPy kernels.

    Raises
    ------
    TypeError
        If ``limit`` is not an int (a bool is not) or None.
    ValidationError
        If ``limit`` is negative.
    UnsupportedError
        If the configuration asks for the compiled CPU kernels
        (``OPENDML_CPU_KERNELS=compiled``) and they are not installed.
    """
    from ..runtime import get_backend
    from ..runtime.config import configure
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)):
            raise TypeError(f"cpu_output_cache: limit must be an int (bytes) or None; got {type(limit).__name__}")
        if limit < 0:
            raise ValidationError(f"cpu_output_cache: limit must be an int >= 0 (bytes) or None; got {limit}")
        configure(output_cache_bytes=int(limit))
    return get_backend("cpu").cache_info()

from .family import cast, depth_to_space, identity, join, pad, space_to_depth, split, tile  # noqa: E402,F401 (the data-movement family)
from .index_ops import (gather, gather_elements, gather_nd, one_hot, reverse_subsequences,  # noqa: E402,F401
                        scatter_elements, scatter_nd)  # (the index-driven operators)

# The framework modules call the array API through this namespace (``_dispatch.front``), never by importing it.
_dispatch.front.__dict__.update({name: globals()[name] for name in _contract.OPERATOR_OF})
