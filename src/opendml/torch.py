"""opendml for PyTorch: differentiable, ``torch.compile``-friendly operators and ``nn.Module`` wrappers.
Imported only when asked for (``import opendml.torch``); ``import opendml`` never imports PyTorch.

Operators (defined with ``torch.library``, namespace ``opendml``; ``<name>_op`` is
``torch.ops.opendml.<name>.default``; every list is complete, one entry per axis)::

    opendml::unfold(Tensor x, int[] window_sizes, int[] strides, int[] dilations,
                    int[] start_padding, int[] end_padding) -> Tensor
    opendml::fold(Tensor x, SymInt[] output_sizes, int[] window_sizes, int[] strides,
                  int[] dilations, int[] start_padding, int[] end_padding) -> Tensor
    opendml::slice(Tensor x, SymInt[] offsets, SymInt[] sizes, int[] strides) -> Tensor
    opendml::slice1(Tensor x, SymInt[] window_offsets, SymInt[] window_sizes,
                    int[] window_strides) -> Tensor
    opendml::slice_grad(Tensor grad, SymInt[] input_sizes, SymInt[] window_offsets,
                        SymInt[] window_sizes, int[] window_strides) -> Tensor

Sizes and positions are SymInt lists (they follow tensor shapes under dynamic shapes); strides, dilations, padding and
UNFOLD/FOLD windows are plain ints. No operator mutates its arguments or returns a view: every output is a new packed
(contiguous) tensor, and the fake implementations give its exact sizes and strides. Backward formulas:
unfold <-> fold, slice and slice1 -> slice_grad -> slice1; each is linear, its forward-mode rule (``torch.func.jvp``)
the operator on the tangent, so every order of derivative and ``torch.func.grad``/``jvp``/``vmap``/``jacrev``/
``jacfwd``/``hessian`` work. Each checks its call as the function of its name does (``opendml::slice`` as ``slice``,
whatever values a graph was traced for).

The functions here are the array API's (``opendml.unfold`` is ``opendml.torch.unfold``). On a tensor that needs a
derivative in eager mode (``x.requires_grad`` with grad mode on, a forward-AD dual tensor, a ``torch.func``
transform) they are recorded for autograd (``grad_fn`` ``opendml_<op>Backward``) by a C++ autograd node in reverse
mode once it is built (``node_status``), else by a ``torch.autograd.Function``. ``torch.compile`` takes them into a
graph whole (no graph break), and a traced call (``torch.compile``, fake tensors, a dispatch mode) goes through the
operators above or, once opendml's C++ library is loaded, the same operators registered with PyTorch's dispatcher
in C++ (namespace ``opendml_cpp``, same schemas, plus ``opendml_cpp::move(Tensor[] inputs, str desc) -> Tensor[]``
for the data-movement family), whose kernels go straight to opendml's call cache (``compiled_status`` says which).
Values, gradients and errors are the same either way, and a graph traced either way keeps working. Otherwise they
call the kernels directly (served from C after a first call).

On CUDA a call runs on ``torch.cuda.current_stream()`` of the tensor's own device and allocates its output from
PyTorch's caching allocator; nothing synchronises. Tensors must be strided (dense) and of one of the 11 DirectML
types (float16/32/64, int8/16/32/64, uint8/16/32/64); anything else (bfloat16, complex, bool, float8, quantized,
sparse, nested, a conjugate view) raises ``opendml.UnsupportedError``.
"""
from __future__ import annotations

import builtins

import torch

from . import arrays as _arrays
from .arrays import _contract
from .arrays.torch import adapter as _adapter, library as _library, node as _node
from .arrays.torch.adapter import _is_sequence
from .model.errors import ValidationError

#: The window operators (the plan route's: those with custom operators): the array API's functions by name, and
#: their custom operators' overloads (``torch.ops.opendml.<name>.default``) as ``<name>_op``, read from the registry.
_WINDOW = [name for name in _arrays.FUNCTIONS if _contract.BINDING[name].route == "plan"]
globals().update({name: _arrays.FUNCTIONS[name] for name in _WINDOW})
globals().update({f"{name}_op": op for name, op in _adapter.CUSTOM_OPS.items()})

__all__ = [*(n for n in _WINDOW if not hasattr(builtins, n)), "Unfold", "Fold",
           *(f"{n}_op" for n in _adapter.CUSTOM_OPS), "split_padding", "node_status", "wait_for_node",
           "compiled_status", "compiled_route"]


def node_status() -> str:
    """Which route eager autograd takes for opendml's operators, and why.

    With ``opendml.configure(torch_node="auto")`` (the default) a tensor that needs a derivative is recorded by a
    C++ autograd node once it is compiled for the installed PyTorch (in the background, once per machine and
    PyTorch version); until then, or without a C++ compiler, by a Python ``torch.autograd.Function``, with the same
    values and gradients. Returns ``"built (<path>)"``, ``"building"``, ``"not built"``, ``"off (...)"`` or
    ``"build failed, ...: <reason>"``.
    """
    return _node.status()


def wait_for_node(timeout: float | None = 600.0) -> bool:
    """Build (or load) the C++ autograd node now and wait for it, at most ``timeout`` seconds (None: the build's own
    limit, 240 s); whether it is ready. Call it before timing training steps, so that the first steps do not run
    while it compiles. ``TypeError`` if ``timeout`` is not a number or None, ``ValidationError`` if it is negative or
    NaN."""
    seconds = None
    if timeout is not None:
        try:
            if isinstance(timeout, (bool, str, bytes)):
                raise TypeError
            seconds = float(timeout)
        except OverflowError:             # an int past the double range: no limit
            seconds = float("inf")
        except Exception:  # noqa: BLE001 - no number (float() refuses it)
            raise TypeError(f"wait_for_node: timeout must be a number of seconds or None; got "
                            f"{type(timeout).__name__}") from None
        if not seconds >= 0:
            raise ValidationError(f"wait_for_node: timeout must be >= 0 seconds or None; got {seconds!r}")
    return _node.wait(seconds)


def compiled_status() -> str:
    """Which operators a call traced now (``torch.compile``, fake tensors) goes through, and why: ``"C++ dispatcher
    operators (opendml_cpp::)"`` once the C++ node library (``node_status``) is loaded and on, else ``"custom
    operators (opendml::): <reason>"``."""
    return _adapter.compiled_status()


def compiled_route() -> str | None:
    """The namespace of the operators the latest traced call went through (``"opendml_cpp"`` or ``"opendml"``), or
    None before any."""
    return _library.CPP["last"]


def split_padding(padding):
    """``(start_padding, end_padding)`` from ``padding``: an int (every side of every axis), a sequence of ints (per
    axis, both sides), or a pair ``(start, end)`` of which at least one is a sequence (each an int or one int per
    axis): ``((1, 0), (2, 1))`` pads axis 0 by 1 before and 2 after, axis 1 by 0 before and 1 after. Nothing is
    checked here: the operator that takes the values validates them."""
    if _is_sequence(padding) and len(padding) == 2 and any(_is_sequence(p) for p in padding):
        return padding[0], padding[1]
    return padding, padding


def _per_sample(module: str, x, unbatched_dims: int, run):
    """``run(x)``; an unbatched ``x`` (of ``unbatched_dims`` dimensions) runs as a batch of one, its result unbatched
    again. ``x`` must be a tensor (``ValidationError`` naming ``module``)."""
    if not isinstance(x, torch.Tensor):
        raise ValidationError(f"{module}: x must be a torch.Tensor; got {type(x).__module__}.{type(x).__qualname__}")
    if x.dim() == unbatched_dims:
        return run(x.unsqueeze(0)).squeeze(0)
    return run(x)


class _Blocks(torch.nn.Module):
    """``Unfold``'s and ``Fold``'s common arguments (``sized``: Fold's ``output_size``, which counts first for the
    number of spatial axes)."""

    def __init__(self, kernel_size, dilation, padding, stride, *sized):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride
        self.start_padding, self.end_padding = split_padding(padding)
        self.spatial_dims = next((len(v) for v in (*sized, kernel_size, dilation, stride, self.start_padding,
                                                   self.end_padding) if _is_sequence(v)), 2)

    def extra_repr(self) -> str:
        return ", ".join(f"{name}={getattr(self, name)}" for name in self._SHOWN)


class Unfold(_Blocks):
    """Sliding local blocks (im2col), like ``torch.nn.Unfold`` but over 1 to 6 spatial axes, with asymmetric padding:
    input (N, C, *spatial) or unbatched (C, *spatial); output (N, C * prod(kernel_size), L) or
    (C * prod(kernel_size), L).

    The number of spatial axes is the length of the first argument that is a sequence, else 2, as in PyTorch.

    Parameters
    ----------
    kernel_size : int or sequence of int
        The window size per spatial axis, each >= 1.
    dilation : int or sequence of int, optional
        The step between a window's elements, each >= 1 (default 1).
    padding : int, sequence of int, or pair, optional
        What ``split_padding`` takes: an int (every side of every axis), one int per spatial axis (both sides), or
        ``(start, end)`` with at least one a sequence (default 0).
    stride : int or sequence of int, optional
        The step between windows, each >= 1 (default 1).
    """

    _SHOWN = ("kernel_size", "dilation", "padding", "stride")

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__(kernel_size, dilation, padding, stride)

    def forward(self, x):
        """Unfold ``x``. On cpu, cuda or meta, of one of the 11 DirectML dtypes, of the shapes the class names; the
        result is a new contiguous tensor, differentiable (its backward is FOLD). ``ValidationError`` if the arguments
        break UNFOLD's rules for ``x``'s shape, ``UnsupportedError`` if ``x``'s dtype, layout or device is not
        supported."""
        return _per_sample("Unfold", x, self.spatial_dims + 1, lambda b: _arrays.unfold(
            b, self.kernel_size, self.stride, self.dilation, self.start_padding, self.end_padding))


class Fold(_Blocks):
    """The adjoint of ``Unfold`` (col2im), like ``torch.nn.Fold`` but over 1 to 6 spatial axes, with asymmetric
    padding: input (N, C * prod(kernel_size), L) or unbatched (C * prod(kernel_size), L); output (N, C, *output_size)
    or (C, *output_size). Overlapping values are summed.

    Parameters
    ----------
    output_size : int or sequence of int
        The spatial sizes of the output, one per spatial axis (the first argument whose length may give their
        number).
    kernel_size, dilation, padding, stride
        As ``Unfold`` takes them.
    """

    _SHOWN = ("output_size", "kernel_size", "dilation", "padding", "stride")

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__(kernel_size, dilation, padding, stride, output_size)
        self.output_size, d = output_size, self.spatial_dims
        self._output_sizes = list(output_size) if _is_sequence(output_size) else [output_size] * d
        self._window = list(kernel_size) if _is_sequence(kernel_size) else [kernel_size] * d

    def forward(self, x):
        """Fold ``x``. As ``Unfold.forward`` (its backward is UNFOLD); FOLD's rules also refuse an L that is not the
        block count of ``output_size`` and channels not a multiple of ``prod(kernel_size)``."""
        return _per_sample("Fold", x, 2, lambda b: _arrays.fold(b, self._output_sizes, self._window, self.stride,
                                                        self.dilation, self.start_padding, self.end_padding))
