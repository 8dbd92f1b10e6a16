"""DML_UNFOLD_OPERATOR_DESC: sliding blocks over 1 to 6 spatial dimensions.

    BlocksPerDimension[d] = (SpatialSize[d] + StartPadding[d] + EndPadding[d]
                             - Dilations[d] * (WindowSizes[d] - 1) - 1) / Strides[d] + 1
    Output sizes: (N, C x prod(WindowSizes), prod(BlocksPerDimension)),
    optionally preceded by 1s up to the input's DimensionCount (erratum 4).
    Output[n, c * prod(WindowSizes) + k, b] = Input[n, c, b*Strides + k*Dilations - StartPadding]
    (k and b row-major multi-indices; 0 outside the input).
"""
from __future__ import annotations

import dataclasses
import math

from ..plan import UnfoldPlan, Windows
from ..model._checks import UINT32_MAX
from ..model.tensor_desc import MAX_ELEMENTS, TensorDesc
from ..model._frozen import stored_init
from ._common import AdjointByCall, FastPathDesc, Field, plain_ints, sequence_of, support
from ._spec import WINDOWS, Binding, per_axis

MAX_SPATIAL_DIMENSIONS = 6


def blocks_along(size, window, stride, dilation, start, end):
    """UNFOLD's block formula (its one copy; FOLD reads it on its output's spatial sizes) for one spatial axis:
    ``(size + StartPadding + EndPadding - Dilations * (WindowSizes - 1) - 1) // Strides + 1``. Any int-like values (a
    tracer's symbolic sizes too); no rule is checked here."""
    return (size + start + end - dilation * (window - 1) - 1) // stride + 1


def blocks_per_dimension(spatial, window_sizes, strides, dilations, start_padding, end_padding) -> tuple:
    """``blocks_along`` for every spatial axis."""
    return tuple(map(blocks_along, spatial, window_sizes, strides, dilations, start_padding, end_padding))


@dataclasses.dataclass(frozen=True, repr=False)
class _Windowed(AdjointByCall, FastPathDesc):
    """UNFOLD's and FOLD's fields, tables and the window's block grid over
    the spatial sizes of ``SPATIAL`` (UNFOLD's input, FOLD's output)."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc | None
    window_sizes: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    start_padding: tuple[int, ...]
    end_padding: tuple[int, ...]

    SPATIAL = "input_tensor"
    FIELDS = (Field("WindowSizes", "window_sizes"), Field("Strides", "strides", 1), Field("Dilations", "dilations", 1),
              Field("StartPadding", "start_padding", 0), Field("EndPadding", "end_padding", 0))
    DEFAULT_INPUT_START = 0
    SUPPORT = support({"6_4": (3, 8)})

    @staticmethod
    def batched_args(args, b):
        """vmap: None, the batch axis joins N (the same arguments on (B x N, C, *spatial) for UNFOLD,
        (B x N, C x K, BlockCount) for FOLD)."""
        return None

    def _dimension_count(self) -> int:
        """DimensionCount, WindowSizes' length, checked to be in [1, MAX_SPATIAL_DIMENSIONS]."""
        self._ints("window_sizes", "WindowSizes", None)
        d = len(self.window_sizes)
        if not 1 <= d <= MAX_SPATIAL_DIMENSIONS:
            raise self._err(f"DimensionCount (the length of WindowSizes) must be in [1, "
                            f"{MAX_SPATIAL_DIMENSIONS}]; got {d}")
        return d

    def _keep(self, fields, **more) -> bool:
        """A fast path's end: ``plain_window_fields``' plain fields (and ``more``) stored as the rules would
        leave them, the blocks per axis kept for ``blocks_per_dimension``."""
        dct = self.__dict__
        (dct["window_sizes"], dct["strides"], dct["dilations"], dct["start_padding"], dct["end_padding"], _, _,
         dct["_blocks"]) = fields
        dct.update(more)
        return True

    @property
    def blocks_per_dimension(self) -> tuple[int, ...]:
        done = self.__dict__.get("_blocks")       # kept by the fast path, which computes them
        if done is not None:
            return done
        return blocks_per_dimension(getattr(self, self.SPATIAL).sizes[2:], self.window_sizes, self.strides,
                                    self.dilations, self.start_padding, self.end_padding)

    @property
    def block_count(self) -> int:
        return math.prod(self.blocks_per_dimension)


#: The parameters UNFOLD's and FOLD's array functions share, as their docstrings write them.
WINDOW_DOC = """    window_sizes : int or sequence of int
        The window (kernel) size per spatial axis, each >= 1.
    strides : int or sequence of int, optional
        The step between windows per spatial axis, each >= 1 (default 1).
    dilations : int or sequence of int, optional
        The step between a window's elements per spatial axis, each >= 1
        (default 1)."""


@stored_init
@dataclasses.dataclass(frozen=True, repr=False)
class UnfoldOperatorDesc(_Windowed):
    """``OutputTensor`` may be ``None``: a packed 3-D output is derived."""

    OPERATOR = "UNFOLD"
    C_PLAIN = 3
    BINDING = Binding("unfold", ((1, 2, 4, 5),), {"window_sizes": [2, 2], "strides": 1},
                      params="window_sizes: Ints, strides: Ints = 1, dilations: Ints = 1, start_padding: Ints = 0, "
                             "end_padding: Ints = 0", route="plan", shape="The input of shape (N, C, *spatial)",
                      returns="of ``x``'s dtype and shape (N, C * prod(window_sizes), BlockCount)",
                      rules="a dilated window larger than the padded input", doc=f"""DML_UNFOLD (im2col) over the spatial axes of ``x`` (shape (N, C, *spatial)):
    ``out.shape == (N, C * prod(window_sizes), prod(blocks))``. Scalars apply to
    every spatial axis.

    Parameters
    ----------
{WINDOW_DOC}
    start_padding, end_padding : int or sequence of int, optional
        Zeros added before and after each spatial axis (default 0); the
        dilated window must fit the padded input.""")
    SCHEMA = ("(Tensor x, int[] window_sizes, int[] strides, int[] dilations, int[] start_padding, "
              "int[] end_padding) -> Tensor")

    @classmethod
    def arguments(cls, api, x, *fields):
        return lambda t: cls(t, None, *[per_axis(v, len(t.sizes) - 2) for v in fields])

    def _fast_path(self) -> bool:
        inp = self.input_tensor
        if type(inp) is not TensorDesc:
            return False
        sizes = inp.sizes
        fields = plain_window_fields(self.window_sizes, self.strides, self.dilations, self.start_padding,
                                     self.end_padding, sizes[2:], MAX_SPATIAL_DIMENSIONS)
        expected = None if fields is None else _packed_sizes(sizes, *fields[5:7])
        if expected is None:
            return False
        out = self.output_tensor
        if out is None:
            out = TensorDesc(inp.data_type, expected)
        elif type(out) is not TensorDesc or out.data_type is not inp.data_type or out.flags:
            return False
        else:
            got = out.sizes
            if got[-3:] != expected or len(got) > len(sizes) or any(s != 1 for s in got[:-3]):
                return False
        return self._keep(fields, output_tensor=out)

    def _check_rules(self):
        inp = self._check_input()
        d = self._dimension_count()
        self._check_window_fields("InputTensor", inp, d)
        expected = (inp.sizes[0], inp.sizes[1] * math.prod(self.window_sizes), self.block_count)
        count = math.prod(expected)
        if count > MAX_ELEMENTS or max(expected) > UINT32_MAX:
            raise self._err(f"the output would have sizes {list(expected)} ({count} elements); a tensor "
                            f"holds at most {MAX_ELEMENTS} elements of at most {UINT32_MAX} per dimension")
        if self.output_tensor is None:
            self._set("output_tensor", TensorDesc(inp.data_type, expected))
        self._check_slot_tensors(same_rank=False)
        out = self.output_tensor.sizes
        lead = out[:-3]
        if out[-3:] != expected or any(s != 1 for s in lead) or len(out) > inp.rank:
            raise self._err(
                f"OutputTensor.Sizes must be {list(expected)} (N, C x prod(WindowSizes), BlockCount), "
                f"optionally preceded by 1s up to InputTensor.DimensionCount {inp.rank}; got {list(out)}")

    @staticmethod
    def output_sizes_of(input_sizes, window_sizes, strides, dilations, start_padding, end_padding) -> tuple:
        """``(N, C x prod(WindowSizes), BlockCount)`` for an input of
        ``input_sizes`` (N, C, *spatial); FOLD's input rule too."""
        n, c, *spatial = input_sizes
        blocks = blocks_per_dimension(spatial, window_sizes, strides, dilations, start_padding, end_padding)
        return (n, c * math.prod(window_sizes), math.prod(blocks))

    @staticmethod
    def adjoint_call(input_sizes, args) -> tuple:
        """The adjoint as an array-API call: FOLD over the input's spatial sizes."""
        return "fold", (list(input_sizes[2:]), *args), None

    @staticmethod
    def framework_call(input_sizes, args, ints) -> tuple:
        """The framework operators' form: one int list per field, one entry per spatial axis."""
        d = len(input_sizes) - 2
        return "unfold", tuple(ints(v, d) for v in args), None

    def call_args(self) -> tuple:
        return (list(self.window_sizes), list(self.strides), list(self.dilations), list(self.start_padding),
                list(self.end_padding))

    def chunking(self):
        return WINDOWS

    def _passes(self, layouts):
        ((ts, origin),) = layouts
        inp = self.input_tensor
        sizes = inp.sizes
        return (Windows(0, 0, UnfoldPlan(inp.element_size, sizes[0], sizes[1], sizes[2:], origin, ts,
                                        self.window_sizes, self.strides, self.dilations, self.start_padding,
                                        self.blocks_per_dimension, 0, self.output_tensor.element_strides[-3:])),)


def plain_lowering(in_sizes: tuple, window_sizes, strides=1, dilations=1, start_padding=0,
                   end_padding=0) -> tuple | None:
    """``(output sizes, window, strides, dilations, start padding, blocks per dimension)`` (see ``opendml.ops``); an
    int field applies to every axis."""
    d = len(in_sizes) - 2
    if d < 1:
        return None
    fields = [(v,) * d if type(v) is int else v
              for v in (window_sizes, strides, dilations, start_padding, end_padding)]
    got = plain_window_fields(*fields, in_sizes[2:], MAX_SPATIAL_DIMENSIONS)
    if got is None:
        return None
    window, strides, dilations, start, _, k, blocks, per_dimension = got
    out = _packed_sizes(in_sizes, k, blocks)
    return None if out is None else (out, window, strides, dilations, start, per_dimension)


def _packed_sizes(in_sizes, k: int, blocks: int) -> tuple | None:
    """The fast paths' output sizes ``(N, C * K, BlockCount)`` for input sizes ``in_sizes`` (N, C, ...), K
    window elements and ``blocks`` blocks; None past MAX_ELEMENTS (every size >= 1: no size exceeds the
    count either)."""
    n, c = in_sizes[0], in_sizes[1]
    return None if n * c * k * blocks > MAX_ELEMENTS else (n, c * k, blocks)


def plain_window_fields(window, strides, dilations, start, end, spatial, max_dims: int) -> tuple | None:
    """UNFOLD's and FOLD's five window fields over the spatial sizes ``spatial`` (UNFOLD's input's, FOLD's output's)
    where plain and valid (1 to ``max_dims`` axes, each window fitting its padded axis): ``(window, strides,
    dilations, start, end, window_count, block_count, blocks_per_axis)``; else None, for the operator's rule-by-rule
    checks to name."""
    window = plain_ints(window, None)
    if window is None:
        return None
    d = len(window)
    if not 1 <= d <= max_dims or len(spatial) != d:
        return None
    strides, dilations = sequence_of(strides, d), sequence_of(dilations, d)
    start, end = sequence_of(start, d), sequence_of(end, d)
    if strides is None or dilations is None or start is None or end is None:
        return None
    k = blocks = 1
    per_dimension = []
    for w, st, dl, a, b, size in zip(window, strides, dilations, start, end, spatial):
        if (type(st) is not int or type(dl) is not int or type(a) is not int or type(b) is not int
                or w < 1 or st < 1 or dl < 1 or a < 0 or b < 0
                or w > UINT32_MAX or st > UINT32_MAX or dl > UINT32_MAX or a > UINT32_MAX or b > UINT32_MAX):
            return None
        n = blocks_along(size, w, st, dl, a, b)
        if n < 1:                                   # the dilated window must fit the padded axis
            return None
        k *= w
        blocks *= n
        per_dimension.append(n)
    return window, strides, dilations, start, end, k, blocks, tuple(per_dimension)


UnfoldOperatorDesc.plain_lowering = staticmethod(plain_lowering)
UnfoldOperatorDesc.PLAIN_KERNEL = "windows"
