"""DML_SLICE_GRAD_OPERATOR_DESC, SLICE1's adjoint: an output gradient of SLICE1's input's shape, each element SLICE1
would read receiving the matching input-gradient value, the others 0:

    CopyStart = InputWindowOffsets (+ InputWindowSizes - 1 where the stride is negative)
    OutputGradient[CopyStart + InputWindowStrides * c] = InputGradient[c]   (0 elsewhere)

SLICE1's rules read backwards (``SliceWindow``): the window must fit the OUTPUT gradient, the input gradient's sizes
being SLICE1's output sizes."""
from __future__ import annotations

import dataclasses

from ..model._frozen import stored_init
from ..model.tensor_desc import MAX_ELEMENTS, MAX_RANK, TensorDesc
from ..plan import ScatterPlan, SliceScatter
from ._common import plain_ints, support
from ._spec import SCATTER, Binding
from .slice1 import SliceWindow, batched_window, reaching_window
from .slice1 import _plain_window as _slice1_window


@stored_init
@dataclasses.dataclass(frozen=True, repr=False)
class SliceGradOperatorDesc(SliceWindow):
    """``OutputGradientTensor`` is required (SLICE1's input's shape, which the window does not determine);
    ``input_tensor``/``output_tensor`` are the two gradients, for code every operator shares."""

    input_gradient_tensor: TensorDesc
    output_gradient_tensor: TensorDesc
    input_window_offsets: tuple[int, ...]
    input_window_sizes: tuple[int, ...]
    input_window_strides: tuple[int, ...]

    OPERATOR = "SLICE_GRAD"
    C_PLAIN = 2
    BINDING = Binding("slice_grad", ((2, 2, 2),), {"input_sizes": [2, 3, 4], "window_offsets": [0, 0, 0],
                                                   "window_sizes": [2, 3, 4], "window_strides": [1, 2, 2]}, "grad",
                      params="input_sizes: Sequence[int], window_offsets: Sequence[int], window_sizes: Sequence[int], "
                             "window_strides: Sequence[int]", route="plan",
                      shape="The gradient of ``slice1``'s output", returns="of ``grad``'s dtype and shape ``input_sizes``",
                      rules="a window reaching outside ``input_sizes``, ``grad.shape`` not the window's output",
                      doc="""DML_SLICE_GRAD, the adjoint of ``slice1``: an array of shape ``input_sizes`` (the shape of
    ``slice1``'s input), 0 except where ``slice1`` with this window reads, which receives the matching element of
    ``grad`` (``grad.shape`` being ``slice1``'s output shape).

    Parameters
    ----------
    input_sizes : sequence of int
        The shape of the result (``slice1``'s input), one entry per axis.
    window_offsets, window_sizes, window_strides : sequence of int
        ``slice1``'s window as ``slice1`` takes it (strides non-zero, negative ones walking from the window's end),
        lying in ``input_sizes``.""")
    SCHEMA = ("(Tensor grad, SymInt[] input_sizes, SymInt[] window_offsets, SymInt[] window_sizes, "
              "int[] window_strides) -> Tensor")
    TAKEN = ("InputGradientTensor", "input_gradient_tensor")
    OUTPUT_DERIVABLE = False
    SUPPORT = support({"3_0": (1, 8)})

    @classmethod
    def arguments(cls, api, grad, input_sizes, offsets, sizes, strides):
        def make(t):
            out = api.sizes_of("slice_grad", "OutputGradientTensor", lambda: TensorDesc(t.data_type, input_sizes),
                               "input_sizes", ("InputGradientTensor", t))
            return cls(t, out, offsets, sizes, strides)
        return make

    def _fast_path(self) -> bool:
        grad, out = self.input_gradient_tensor, self.output_gradient_tensor
        if (type(grad) is not TensorDesc or type(out) is not TensorDesc or out.data_type is not grad.data_type
                or out.flags or len(grad.sizes) != len(out.sizes)):
            return False
        got = _plain_window(out.sizes, grad.sizes, self.input_window_offsets, self.input_window_sizes,
                            self.input_window_strides)
        if got is None:
            return False
        dct = self.__dict__
        dct["input_window_offsets"], dct["input_window_sizes"], dct["input_window_strides"] = got
        return True

    def _check_rules(self):
        self._check_input()
        if self.output_gradient_tensor is None:
            raise self._err("OutputGradientTensor is required (it has the sizes of SLICE1's input, which the "
                            "window does not determine); got None")
        self._check_slot_tensors()
        self._check_slice_window("OutputGradientTensor", self.output_gradient_tensor)
        self._check_taken()

    @property
    def first_positions(self) -> tuple[int, ...]:
        """Per dimension, the lowest output-gradient position receiving a value: the window's offset for a positive
        stride; for a negative one the last element read, ``offset + (size - 1) - |stride| * (taken - 1)``."""
        return tuple(window_walk(self.input_window_offsets, self.input_window_sizes, self.input_window_strides,
                           self.input_gradient_tensor.sizes)[0])

    @staticmethod
    def output_sizes_of(input_sizes, output_gradient_sizes, window_offsets=None, window_sizes=None,
                        window_strides=None) -> tuple:
        """The output gradient's sizes: SLICE1's input sizes, which the call
        gives (SLICE_GRAD's shape rule)."""
        return tuple(output_gradient_sizes)

    @staticmethod
    def adjoint_call(input_sizes, args) -> tuple:
        """The adjoint as an array-API call: SLICE1 of the window, taking the
        input gradient's sizes (``input_sizes``)."""
        _, offsets, sizes, strides = args
        return "slice1", (list(offsets), list(sizes), list(strides), list(input_sizes)), None

    @staticmethod
    def batched_args(args, b) -> tuple:
        """vmap: the arguments for an input gradient with a new leading axis of ``b``."""
        return ([b, *args[0]], *batched_window(args[1:], b))

    @staticmethod
    def framework_call(input_sizes, args, ints) -> tuple:
        """The framework operators' form: a window reaching exactly the input gradient."""
        output_sizes, offsets, sizes, strides = (ints(v) for v in args)
        offsets, sizes = reaching_window(offsets, sizes, strides, list(input_sizes))
        return "slice_grad", (output_sizes, offsets, sizes, strides), None

    def call_args(self) -> tuple:
        return (list(self.output_gradient_tensor.sizes), list(self.input_window_offsets),
                list(self.input_window_sizes), list(self.input_window_strides))

    def chunking(self):
        return SCATTER

    scatter_axes = SliceWindow.window_axes

    def _passes(self, layouts):
        """One ``SliceScatter`` pass walking output positions upwards: along a negative stride, position ``first +
        |stride| * i`` receives input-gradient element ``taken - 1 - i``, so the input stride is negated and the
        origin moved to the last element."""
        ((ts, origin),) = layouts
        grad, out = self.input_gradient_tensor, self.output_gradient_tensor
        first, step, back = window_walk(self.input_window_offsets, self.input_window_sizes, self.input_window_strides,
                                  grad.sizes)
        steps = [-t if b else t for t, b in zip(ts, back)]
        origin += sum((g - 1) * t for g, t, b in zip(grad.sizes, ts, back) if b)
        return (SliceScatter(0, 0, ScatterPlan(grad.element_size, out.sizes, 0, out.element_strides, tuple(first),
                                               tuple(step), grad.sizes, origin, tuple(steps))),)


def _plain_window(dims, taken, offsets, window, steps) -> tuple | None:
    """SLICE1's ``_plain_window`` on the output gradient (``dims``), taking at most the reachable elements
    (``taken``: the input gradient's sizes): ``(offsets, window, steps)`` as tuples, else None."""
    got = _slice1_window(dims, offsets, window, steps)
    if got is None or any(g > most for g, most in zip(taken, got[3])):
        return None
    return got[:3]


def plain_lowering(in_sizes: tuple, input_sizes, offsets, window, steps) -> tuple | None:
    """``(output sizes, first, step, reversed)`` per dimension, ``reversed``
    where the window stride is negative (the input gradient's dimension is
    then walked backwards; see ``opendml.ops``)."""
    n = len(in_sizes)
    dims = plain_ints(input_sizes, n)
    if dims is None or n > MAX_RANK:
        return None
    count = 1                                    # the output gradient: a valid TensorDesc
    for d in dims:
        if d < 1:
            return None
        count *= d
    got = None if count > MAX_ELEMENTS else _plain_window(dims, in_sizes, offsets, window, steps)
    return None if got is None else (dims, *window_walk(*got, in_sizes))


def window_walk(offsets, window, steps, taken) -> tuple[list, list, list]:
    """``(first, step, reversed)`` per dimension of the positions a SLICE1 window (taking ``taken`` elements per
    dimension) reads and SLICE_GRAD writes, walked upwards: a negative stride starts at the last element read
    (``first_positions``), its dimension walked backwards (1)."""
    first, step, back = [], [], []
    for o, s, w, g in zip(offsets, window, steps, taken):
        first.append(o if w > 0 else o + (s - 1) + w * (g - 1))
        step.append(abs(w))
        back.append(0 if w > 0 else 1)
    return first, step, back


SliceGradOperatorDesc.plain_lowering = staticmethod(plain_lowering)
SliceGradOperatorDesc.PLAIN_KERNEL = "scatter"
