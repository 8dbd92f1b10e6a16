"""DML_SLICE_OPERATOR_DESC: ``Output[c] = Input[Offsets + Strides * c]``."""
from __future__ import annotations

import dataclasses

from ..plan import Copy
from ..model._checks import UINT32_MAX
from ..model.tensor_desc import TensorDesc
from ..model._frozen import stored_init
from ._common import AdjointByCall, TYPES_1_0, FastPathDesc, Field, plain_ints, support
from ._spec import GATHER, Binding
from .slice1 import Slice1OperatorDesc, batched_window, window_adjoint_call


@stored_init
@dataclasses.dataclass(frozen=True, repr=False)
class SliceOperatorDesc(AdjointByCall, FastPathDesc):
    """``OutputTensor`` may be ``None``: a packed output of ``Sizes`` is derived."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc | None
    offsets: tuple[int, ...]
    sizes: tuple[int, ...]
    strides: tuple[int, ...]

    OPERATOR = "SLICE"
    C_PLAIN = 0
    BINDING = Binding("slice", ((2, 3, 4),), {"offsets": [0, 1, 0], "sizes": [2, 2, 2], "strides": [1, 1, 2]},
                      params="offsets: Sequence[int], sizes: Sequence[int], strides: Sequence[int]", route="plan",
                      returns="of ``x``'s dtype and shape ``sizes``", rules="a window reaching outside ``x``",
                      doc="""DML_SLICE: ``out[c] = x[offsets + strides * c]``, ``out.shape == sizes``.

    Parameters
    ----------
    offsets : sequence of int
        The first element read, one entry per axis of ``x`` (each >= 0).
    sizes : sequence of int
        The output's shape, one entry per axis (each >= 1).
    strides : sequence of int
        The step between elements read, one entry per axis (each >= 1); the
        last element read, ``offsets + (sizes - 1) * strides``, must lie in
        ``x``.""")
    SCHEMA = "(Tensor x, SymInt[] offsets, SymInt[] sizes, int[] strides) -> Tensor"
    FIELDS = (Field("Offsets", "offsets"), Field("Sizes", "sizes"), Field("Strides", "strides"))
    SUPPORT = support({"1_0": (4, 5), "3_0": (1, 8)}, first=TYPES_1_0)

    @classmethod
    def arguments(cls, api, x, offsets, sizes, strides):
        return lambda t: cls(t, None, offsets, sizes, strides)

    def _fast_path(self) -> bool:
        inp = self.input_tensor
        if type(inp) is not TensorDesc:
            return False
        got = plain_lowering(inp.sizes, self.offsets, self.sizes, self.strides)
        if got is None:
            return False
        sizes, offsets, strides = got
        out = self.output_tensor
        if out is None:
            out = TensorDesc(inp.data_type, sizes)
        elif (type(out) is not TensorDesc or out.data_type is not inp.data_type or out.sizes != sizes
              or out.flags):
            return False
        dct = self.__dict__
        dct["offsets"], dct["sizes"], dct["strides"], dct["output_tensor"] = offsets, sizes, strides, out
        return True

    def _check_rules(self):
        inp = self._check_input()
        n = inp.rank
        for f in self.FIELDS:
            self._ints(f.attr, f.json, n)
        for i in range(n):
            o, s, t, dim = self.offsets[i], self.sizes[i], self.strides[i], inp.sizes[i]
            self._check_bounds("Offsets", i, o, 0, UINT32_MAX)
            self._check_bounds("Sizes", i, s, 1, UINT32_MAX)
            self._check_bounds("Strides", i, t, 1, UINT32_MAX)
            if o + (s - 1) * t >= dim:
                raise self._err(
                    f"Offsets[{i}] + (Sizes[{i}] - 1) * Strides[{i}] must be < InputTensor.Sizes[{i}]; "
                    f"got {o} + ({s} - 1) * {t} = {o + (s - 1) * t} >= {dim}")
        self._derive_output(self.sizes)
        for i, (s, o) in enumerate(zip(self.sizes, self.output_tensor.sizes)):
            if s != o:
                raise self._err(f"Sizes[{i}] must equal OutputTensor.Sizes[{i}]; got {s} != {o}")

    @staticmethod
    def output_sizes_of(input_sizes, offsets, sizes, strides) -> tuple:
        """The output's sizes: ``Sizes`` (SLICE's shape rule)."""
        return tuple(sizes)

    def canonical(self) -> Slice1OperatorDesc:
        """The same copy as a SLICE1 (``slice1_window``): the framework operators' form."""
        return Slice1OperatorDesc(self.input_tensor, self.output_tensor, self.offsets,
                                  slice1_window(self.sizes, self.strides), self.strides)

    @staticmethod
    def adjoint_call(input_sizes, args) -> tuple:
        """The adjoint as an array-API call: SLICE1's over ``slice1_window``."""
        offsets, sizes, strides = args
        return window_adjoint_call(input_sizes, offsets, slice1_window(sizes, strides), strides, sizes)

    batched_args = staticmethod(batched_window)

    @staticmethod
    def framework_call(input_sizes, args, ints) -> tuple:
        """The framework operators' form: SLICE's own (its implementation validates each call as SLICE,
        whatever values the graph was traced for)."""
        return "slice", tuple(ints(v) for v in args), None

    def call_args(self) -> tuple:
        return (list(self.offsets), list(self.sizes), list(self.strides))

    def chunking(self):
        return GATHER

    def gather_axes(self) -> tuple:
        """(first position read, step, count) per axis."""
        return tuple(zip(self.offsets, self.strides, self.sizes))

    def _passes(self, layouts):
        ((ts, origin),) = layouts
        return (Copy(0, 0, self.sizes, origin + sum(o * t for o, t in zip(self.offsets, ts)),
                     tuple(s * t for s, t in zip(self.strides, ts)), 0, self.output_tensor.element_strides),)


def slice1_window(sizes, strides) -> list:
    """SLICE is SLICE1 over the window its elements span: window sizes ``(Sizes - 1) * Strides + 1`` (every stride
    positive); the rewrite's one copy (any int-like values)."""
    return [(s - 1) * t + 1 for s, t in zip(sizes, strides)]


def plain_lowering(in_sizes: tuple, offsets, sizes, strides) -> tuple[tuple, tuple, tuple] | None:
    """``(output sizes, starts, steps)``: the packed output's element ``c`` is the input's element ``starts + steps *
    c`` (see ``opendml.ops``), where the fields are plain ints, one per dimension, by the window's rules (in one pass);
    else None. SLICE's fast path too."""
    n = len(in_sizes)
    offsets, sizes, strides = plain_ints(offsets, n), plain_ints(sizes, n), plain_ints(strides, n)
    if offsets is None or sizes is None or strides is None:
        return None
    for o, s, t, dim in zip(offsets, sizes, strides, in_sizes):
        # the last element read inside the input bounds the offset and the size too
        if o < 0 or s < 1 or t < 1 or t > UINT32_MAX or o + (s - 1) * t >= dim:
            return None
    return sizes, offsets, strides


SliceOperatorDesc.plain_lowering = staticmethod(plain_lowering)
SliceOperatorDesc.PLAIN_KERNEL = "copy"
