"""DML_SLICE1_OPERATOR_DESC: an input window with signed strides.

    CopyStart = InputWindowOffsets (+ InputWindowSizes - 1 where the stride is negative)
    Output[c] = Input[CopyStart + InputWindowStrides * c]
"""
from __future__ import annotations

import dataclasses

from ..plan import Copy
from ..model.errors import ValidationError
from ..model.tensor_desc import TensorDesc
from ..model._checks import INT32_MAX, INT32_MIN, UINT32_MAX
from ..model._frozen import stored_init
from ._common import AdjointByCall, FastPathDesc, Field, plain_ints, support, sequence_of
from ._spec import GATHER, Binding


def max_copied_elements(window_size: int, window_stride: int) -> int:
    """``1 + (InputWindowSize - 1) / |InputWindowStride|`` (erratum 3: the page forgets the absolute value): SLICE1's
    output size along an axis when not given, and its maximum; the formula's one copy (any int-like values, symbolic
    sizes included)."""
    return 1 + (window_size - 1) // abs(window_stride)


def check_taken(operator: str, name: str, counts, sizes, strides) -> None:
    """Tensor ``name``'s sizes ``counts`` in [1, ``max_copied_elements``] of the window per dimension, else the
    ``ValidationError`` of ``operator``."""
    for i, (n, s, t) in enumerate(zip(counts, sizes, strides)):
        most = max_copied_elements(s, t)
        if not 1 <= n <= most:
            raise ValidationError(f"{operator}: {name}.Sizes[{i}] must be in [1, 1 + (InputWindowSizes[{i}] - 1) "
                                  f"/ |InputWindowStrides[{i}]|] = [1, {most}]; got {n}")


def reaching_window(offsets, sizes, strides, counts) -> tuple[list, list]:
    """(offsets, sizes) of the SLICE1 window reaching exactly the first ``counts`` elements the window (offsets, sizes,
    strides) reaches per axis (its ``max_copied_elements``): a negative stride walks from the window's end, so the
    smaller window keeps its end."""
    new_offsets, new_sizes = [], []
    for o, s, t, n in zip(offsets, sizes, strides, counts):
        reach = (n - 1) * abs(t) + 1
        new_offsets.append(o if t > 0 else o + s - reach)
        new_sizes.append(reach)
    return new_offsets, new_sizes


def window_adjoint_call(input_sizes, offsets, sizes, strides, counts) -> tuple:
    """The adjoint of SLICE1 (window ``offsets``/``sizes``/``strides``, output sizes ``counts`` or None for every
    reachable element) on an input of ``input_sizes``, as an array-API call ``(name, arguments, None)``: SLICE_GRAD of
    the window; where the window reads every element once (each axis whole, strides +-1: a copy reversing some axes;
    known only for plain ints) the same SLICE1, a permutation that is its own inverse (the same bytes, no fill)."""
    offsets, sizes, strides = list(offsets), list(sizes), list(strides)
    if all(type(v) is int for vs in (offsets, sizes, strides, input_sizes) for v in vs) and all(
            o == 0 and s == n and abs(t) == 1 for o, s, t, n in zip(offsets, sizes, strides, input_sizes)) and (
            counts is None or list(counts) == list(input_sizes)):
        return "slice1", (offsets, sizes, strides, None), None
    return "slice_grad", (list(input_sizes), offsets, sizes, strides), None


def batched_window(args, b) -> tuple:
    """vmap (SLICE's and SLICE1's ``batched_args``): window arguments ``(offsets, sizes, strides[, counts])`` (each a
    per-axis list, or None) for an input with a new leading axis of ``b`` taken whole: offset 0, size ``b``, stride 1,
    count ``b``."""
    out = [[0, *args[0]], [b, *args[1]], [1, *args[2]]]
    if len(args) > 3:
        out.append(None if args[3] is None else [b, *args[3]])
    return tuple(out)


class SliceWindow(AdjointByCall, FastPathDesc):
    """SLICE1's window (its ``FIELDS``), shared with SLICE_GRAD: the tensor SLICE1 reads (``_check_slice_window``) and
    the one holding the elements it copies, ``TAKEN`` (DirectML name, attribute)."""

    FIELDS = (Field("InputWindowOffsets", "input_window_offsets"), Field("InputWindowSizes", "input_window_sizes"),
              Field("InputWindowStrides", "input_window_strides"))
    TAKEN = ("OutputTensor", "output_tensor")

    def _check_slice_window(self, read_name: str, read: TensorDesc) -> None:
        """One entry per dimension of ``read``, the window inside it, strides
        non-zero and in INT32's range."""
        n = read.rank
        for f in self.FIELDS:
            self._ints(f.attr, f.json, n)
        for i in range(n):
            o, s, t = self.input_window_offsets[i], self.input_window_sizes[i], self.input_window_strides[i]
            self._check_bounds("InputWindowOffsets", i, o, 0, UINT32_MAX)
            self._check_bounds("InputWindowSizes", i, s, 1, UINT32_MAX, " (the window mustn't be empty)")
            if o + s > read.sizes[i]:
                raise self._err(
                    f"InputWindowOffsets[{i}] + InputWindowSizes[{i}] must be <= {read_name}.Sizes[{i}]; "
                    f"got {o} + {s} > {read.sizes[i]}")
            if t == 0 or not INT32_MIN <= t <= INT32_MAX:
                raise self._err(
                    f"InputWindowStrides[{i}] must be non-zero and in [{INT32_MIN}, {INT32_MAX}]; got {t}")

    def _check_taken(self) -> None:
        """The ``TAKEN`` tensor's sizes in [1, ``max_copied_elements``] per dimension."""
        name, attr = self.TAKEN
        check_taken(self.OPERATOR, name, getattr(self, attr).sizes, self.input_window_sizes,
                    self.input_window_strides)

    @property
    def max_output_sizes(self) -> tuple[int, ...]:
        return tuple(max_copied_elements(s, t) for s, t in zip(self.input_window_sizes, self.input_window_strides))

    def canonical(self):
        """The same description with a window reaching exactly the ``TAKEN`` tensor (``reaching_window``): the
        framework operators' form."""
        counts = getattr(self, self.TAKEN[1]).sizes
        if counts == self.max_output_sizes:
            return self
        offsets, sizes = reaching_window(self.input_window_offsets, self.input_window_sizes,
                                         self.input_window_strides, counts)
        return type(self)(*self.inputs, *self.outputs, offsets, sizes, self.input_window_strides)

    def window_axes(self) -> tuple:
        """(first position read, signed step, count) per axis: CopyStart
        walked with the window's strides (SLICE1's ``gather_axes``,
        SLICE_GRAD's ``scatter_axes``)."""
        return tuple((o + (w - 1 if t < 0 else 0), t, n) for o, w, t, n in
                     zip(self.input_window_offsets, self.input_window_sizes, self.input_window_strides,
                         getattr(self, self.TAKEN[1]).sizes))


@stored_init
@dataclasses.dataclass(frozen=True, repr=False)
class Slice1OperatorDesc(SliceWindow):
    """``OutputTensor`` may be ``None``: a packed output copying every reachable
    element of the window (``max_copied_elements`` per dimension) is derived."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc | None
    input_window_offsets: tuple[int, ...]
    input_window_sizes: tuple[int, ...]
    input_window_strides: tuple[int, ...]

    OPERATOR = "SLICE1"
    C_PLAIN = 1
    BINDING = Binding("slice1", ((2, 3, 4),), {"window_offsets": [0, 0, 0], "window_sizes": [2, 3, 4],
                                               "window_strides": [1, -1, 2]},
                      params="window_offsets: Sequence[int], window_sizes: Sequence[int], "
                             "window_strides: Sequence[int], output_sizes: Sequence[int] | None = None",
                      route="plan", returns="of ``x``'s dtype and shape ``output_sizes``",
                      rules="a window reaching outside ``x``, a zero stride", doc="""DML_SLICE1: a window of ``x`` walked with signed strides (a negative
    stride starts at the window's end). ``output_sizes`` defaults to every
    reachable element: ``1 + (window_sizes - 1) // |window_strides|``.

    Parameters
    ----------
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
        (the default) takes them all.""")
    SCHEMA = ("(Tensor x, SymInt[] window_offsets, SymInt[] window_sizes, int[] window_strides) -> Tensor")
    SUPPORT = support({"2_1": (4, 5), "3_0": (1, 8)})

    @classmethod
    def arguments(cls, api, x, offsets, sizes, strides, output_sizes):
        def make(t):
            out = None if output_sizes is None else api.sizes_of(
                "slice1", "OutputTensor", lambda: TensorDesc(t.data_type, output_sizes), "output_sizes",
                ("InputTensor", t))
            return cls(t, out, offsets, sizes, strides)
        return make

    def _fast_path(self) -> bool:
        inp = self.input_tensor
        if type(inp) is not TensorDesc:
            return False
        sizes = inp.sizes
        got = _plain_window(sizes, self.input_window_offsets, self.input_window_sizes, self.input_window_strides)
        if got is None:
            return False
        offsets, window, steps, most, _ = got
        out = self.output_tensor
        if out is None:
            out = TensorDesc(inp.data_type, tuple(most))
        elif (type(out) is not TensorDesc or out.data_type is not inp.data_type or len(out.sizes) != len(sizes)
              or out.flags):
            return False
        else:
            for size, m in zip(out.sizes, most):
                if size > m:
                    return False
        d = self.__dict__
        d["input_window_offsets"], d["input_window_sizes"], d["input_window_strides"] = offsets, window, steps
        d["output_tensor"] = out
        return True

    def _check_rules(self):
        inp = self._check_input()
        self._check_slice_window("InputTensor", inp)
        self._derive_output(self.max_output_sizes)
        self._check_taken()

    @staticmethod
    def output_sizes_of(input_sizes, window_offsets, window_sizes, window_strides, output_sizes=None) -> tuple:
        """``output_sizes`` where given, else ``max_copied_elements`` per axis."""
        if output_sizes is not None:
            return tuple(output_sizes)
        return tuple(max_copied_elements(s, t) for s, t in zip(window_sizes, window_strides))

    @staticmethod
    def adjoint_call(input_sizes, args) -> tuple:
        """SLICE_GRAD of the same window (``window_adjoint_call``)."""
        return window_adjoint_call(input_sizes, *args[:3], args[3] if len(args) > 3 else None)

    batched_args = staticmethod(batched_window)

    @staticmethod
    def framework_call(input_sizes, args, ints) -> tuple:
        """SLICE1 with a window reaching exactly its output (``reaching_window``)."""
        offsets, sizes, strides = (ints(v) for v in args[:3])
        if len(args) > 3 and args[3] is not None:
            counts = ints(args[3])
            # (the call was validated; on symbolic counts, under torch.compile's dynamic shapes, each truth
            # value is a guard: a later count out of the window's reach traces the call again, whose
            # validation raises the array API's error, not the derived window's)
            check_taken("SLICE1", "OutputTensor", counts, sizes, strides)
            offsets, sizes = reaching_window(offsets, sizes, strides, counts)
        return "slice1", (offsets, sizes, strides), None

    def call_args(self) -> tuple:
        out = self.output_tensor.sizes
        return (list(self.input_window_offsets), list(self.input_window_sizes), list(self.input_window_strides),
                None if out == self.max_output_sizes else list(out))

    def chunking(self):
        return GATHER

    gather_axes = SliceWindow.window_axes

    def _passes(self, layouts):
        ((ts, origin),) = layouts
        out = self.output_tensor
        steps = []
        for o, s, w, t in zip(self.input_window_offsets, self.input_window_sizes, self.input_window_strides, ts):
            origin += (o + s - 1 if w < 0 else o) * t
            steps.append(w * t)
        return (Copy(0, 0, out.sizes, origin, tuple(steps), 0, out.element_strides),)


def _plain_window(sizes, offsets, window, steps) -> tuple | None:
    """A window's rules in the common case, in one pass: plain int fields, a list or tuple of one per dimension, the
    window inside the input (``sizes``), strides non-zero in INT32's range. Returns ``(offsets, window, steps)`` as
    tuples, the most elements copied per dimension and CopyStart (a negative stride starts at the window's end), or
    None for anything else (the detailed rules then say what)."""
    n = len(sizes)
    offsets, window, steps = sequence_of(offsets, n), sequence_of(window, n), sequence_of(steps, n)
    if offsets is None or window is None or steps is None:
        return None
    most, starts = [], []
    for o, s, t, dim in zip(offsets, window, steps, sizes):
        if type(o) is not int or type(s) is not int or type(t) is not int or o < 0 or s < 1 or o + s > dim:
            return None
        if 0 < t <= INT32_MAX:
            starts.append(o)
        elif INT32_MIN <= t < 0:
            starts.append(o + s - 1)
        else:
            return None
        most.append(max_copied_elements(s, t))
    return offsets, window, steps, most, starts


def plain_lowering(in_sizes: tuple, offsets, window, steps, output_sizes=None) -> tuple[tuple, list, tuple] | None:
    """``(output sizes, starts, steps)``: the packed output's element ``c`` is
    the input's element ``starts + steps * c`` (see ``opendml.ops``)."""
    got = _plain_window(in_sizes, offsets, window, steps)
    if got is None:
        return None
    _, _, steps, most, starts = got
    if output_sizes is None:
        return tuple(most), starts, steps
    out = plain_ints(output_sizes, len(in_sizes))         # each in [1, most]: a valid TensorDesc (at most the input's count)
    if out is None:
        return None
    for size, m in zip(out, most):
        if not 1 <= size <= m:
            return None
    return out, starts, steps


Slice1OperatorDesc.plain_lowering = staticmethod(plain_lowering)
Slice1OperatorDesc.PLAIN_KERNEL = "copy"
