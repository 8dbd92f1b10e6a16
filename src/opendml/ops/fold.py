"""DML_FOLD_OPERATOR_DESC (col2im, UNFOLD's adjoint): sliding blocks summed back into an image, over 1 to 6 spatial
dimensions.

    BlocksPerDimension[d] = (OutputSpatialSize[d] + StartPadding[d] + EndPadding[d]
                             - Dilations[d] * (WindowSizes[d] - 1) - 1) / Strides[d] + 1
    Input sizes: (N, C x prod(WindowSizes), prod(BlocksPerDimension)), optionally after 1s up to the output's
    DimensionCount (erratum: docs/operators/fold.md).
    Output[n, c, p] = sum over window elements k (row-major, increasing) of
                      Input[n, c * prod(WindowSizes) + k, b]
                      where b*Strides + k*Dilations - StartPadding == p
    (b the row-major block multi-index; values positioned in the padding are dropped; an output element no block reaches
    is 0).

The output description is required (the spatial sizes come from it). Sums are exact and deterministic (``FoldPlan``)."""
from __future__ import annotations

import dataclasses
import math

from ..plan import FoldPlan, WindowSums
from ..model.tensor_desc import MAX_ELEMENTS, TensorDesc
from ..model._frozen import stored_init
from ..model._checks import INT_BITS, index_value
from .unfold import MAX_SPATIAL_DIMENSIONS, WINDOW_DOC, UnfoldOperatorDesc, _Windowed, plain_window_fields
from ._common import plain_ints
from ._spec import FLOAT_TYPES, WINDOW_SUMS, Binding, per_axis
from ..model.errors import ValidationError


def _is_sequence(value) -> bool:
    """Sized and not text (a 0-d array has ``__len__`` but no length: the description refuses it as a non-int
    scalar)."""
    return not isinstance(value, (str, bytes)) and hasattr(value, "__len__") and getattr(value, "ndim", 1) != 0


def _window_count(window) -> int | None:
    """``prod(window)`` where every entry is an int in [1, 2**INT_BITS) (as ``as_int`` reads it: a 0-d integer
    array too), else None."""
    if not _is_sequence(window):
        return None
    try:
        sizes = [index_value(w) for w in window]
    except Exception:  # noqa: BLE001 - no int value (as_int's reason): the rules name it
        return None
    return math.prod(sizes) if all(1 <= w < 1 << INT_BITS for w in sizes) else None

#: Every size product is computed in 64-bit signed arithmetic by the kernels.
INT64_MAX = 2**63 - 1

#: ``FoldPlan.sum_kind`` values; they mirror ``ODML_SUM_INTEGER`` (0) and ``ODML_SUM_FLOAT`` (1) of
#: ``runtime/params.h`` (``runtime.params.SUM_*``), spelt out here because ``ops`` may not import ``runtime``.
SUM_INTEGER = 0
SUM_FLOAT = 1


@stored_init
@dataclasses.dataclass(frozen=True, repr=False)
class FoldOperatorDesc(_Windowed):
    """``OutputTensor`` is required (``(N, C, *spatial)``); the input is
    ``(N, C x prod(WindowSizes), BlockCount)``, optionally with leading 1s."""

    OPERATOR = "FOLD"
    SPATIAL = "output_tensor"
    C_PLAIN = 4
    BINDING = Binding("fold", ((1, 8, 12),), {"output_sizes": [4, 5], "window_sizes": [2, 2]},
                      params="output_sizes: Ints, window_sizes: Ints, strides: Ints = 1, dilations: Ints = 1, "
                             "start_padding: Ints = 0, end_padding: Ints = 0", route="plan",
                      shape="The columns, of shape (N, C * prod(window_sizes), BlockCount)",
                      returns="of ``x``'s dtype and shape (N, C, *output_sizes)",
                      rules="BlockCount or the channels not what the window gives", doc=f"""DML_FOLD (col2im), the adjoint of ``unfold``: ``x`` of shape (N, C *
    prod(window_sizes), BlockCount) summed back into an array of shape (N, C, *output_sizes), each output element adding
    its window elements in increasing window order (float16 summing in float32; integers wrapping).

    Scalars apply to every spatial axis; the number of spatial axes is the length of ``output_sizes``, else of
    ``window_sizes``, else 1. BlockCount must be what ``unfold`` gives for an input of the output's shape with the same
    window, strides, dilations and padding.

    Parameters
    ----------
    output_sizes : int or sequence of int
        The spatial sizes of the result.
{WINDOW_DOC}
    start_padding, end_padding : int or sequence of int, optional
        The padding ``unfold`` applied before and after each spatial axis (default 0), whose positions are dropped.""")
    SCHEMA = ("(Tensor x, SymInt[] output_sizes, int[] window_sizes, int[] strides, int[] dilations, "
              "int[] start_padding, int[] end_padding) -> Tensor")
    OUTPUT_DERIVABLE = False

    @classmethod
    def arguments(cls, api, x, output_sizes, window_sizes, *rest):
        fields = (output_sizes, window_sizes, *rest)

        def make(t):                        # run on a plan-cache miss only
            d = next((len(v) for v in (output_sizes, window_sizes) if _is_sequence(v)), 1)
            spatial, window, *others = (per_axis(v, d) for v in fields)
            rows, c, k = t.sizes[-2], t.sizes[-2], _window_count(window)
            if k is not None:                # else the description names the bad window entry
                if rows % k:
                    raise ValidationError(
                        f"FOLD: InputTensor.Sizes[{t.rank - 2}] must be C x prod(WindowSizes), a multiple of "
                        f"prod(WindowSizes) = {k} (x.shape[-2], window_sizes); got {rows} (shape {list(t.sizes)})")
                c = rows // k
            if not _is_sequence(spatial):
                raise api.field_error("fold", "OutputTensor.Sizes", "be an int or a sequence of ints (output_sizes)",
                                      spatial)
            try:
                sizes = (t.sizes[-3], c, *spatial)
            except Exception:  # noqa: BLE001 - items that cannot be read (as_int_tuple's reason)
                raise api.field_error("fold", "OutputTensor.Sizes", "be an int or a sequence of ints (output_sizes)",
                                      spatial) from None
            out = api.sizes_of("fold", "OutputTensor", lambda: TensorDesc(t.data_type, sizes),
                               "x's N, C and output_sizes")
            return cls(t, out, window, *others)
        return make

    def _fast_path(self) -> bool:
        """The one-pass check of the common valid case (``FastPathDesc``). The
        64-bit limits hold whenever the input's sizes agree: they multiply to
        its element count, at most 2**32 - 1."""
        inp, out = self.input_tensor, self.output_tensor
        if (type(inp) is not TensorDesc or type(out) is not TensorDesc or out.data_type is not inp.data_type
                or out.flags):
            return False
        sizes, got = out.sizes, inp.sizes
        fields = plain_window_fields(self.window_sizes, self.strides, self.dilations, self.start_padding,
                                     self.end_padding, sizes[2:], MAX_SPATIAL_DIMENSIONS)
        if fields is None or not 3 <= len(got) <= len(sizes) or any(s != 1 for s in got[:-3]):
            return False
        k, blocks = fields[5:7]
        return got[-3:] == (sizes[0], sizes[1] * k, blocks) and self._keep(fields)

    def _check_rules(self):
        inp = self._check_input()
        d = self._dimension_count()
        if self.output_tensor is None:
            raise self._err("OutputTensor is required (the output's spatial sizes cannot be derived from "
                            "the input); got None")
        self._check_slot_tensors(same_rank=False)
        out = self.output_tensor
        self._check_window_fields("OutputTensor", out, d)
        n, c = out.sizes[:2]
        k = self.window_count
        self._check_int64("prod(WindowSizes)", " x ".join(map(str, self.window_sizes)), k)
        self._check_int64("C x prod(WindowSizes) (OutputTensor.Sizes[1] x prod(WindowSizes))", f"{c} x {k}", c * k)
        blocks = self.blocks_per_dimension
        count = math.prod(blocks)
        self._check_int64("BlockCount (the product of the blocks per spatial dimension)",
                          " x ".join(map(str, blocks)), count)
        self._check_int64("the input's element count N x C x prod(WindowSizes) x BlockCount",
                          f"{n} x {c * k} x {count}", n * c * k * count)
        sizes, r = inp.sizes, inp.rank
        if not 3 <= r <= out.rank:
            raise self._err(
                f"InputTensor.DimensionCount must be in [3, OutputTensor.DimensionCount = {out.rank}] "
                f"((N, C x prod(WindowSizes), BlockCount), optionally preceded by 1s); got {r}")
        for i in range(r - 3):
            if sizes[i] != 1:
                raise self._err(f"InputTensor.Sizes[{i}] must be 1 (a leading dimension before N, "
                                f"C x prod(WindowSizes), BlockCount); got {sizes[i]}")
        got_n, got_rows, got_blocks = sizes[-3:]
        if got_n != n:
            raise self._err(f"InputTensor.Sizes[{r - 3}] (N) must equal OutputTensor.Sizes[0] (N); "
                            f"got {got_n} != {n}")
        if got_rows != c * k:
            raise self._err(f"InputTensor.Sizes[{r - 2}] must equal C x prod(WindowSizes) = "
                            f"OutputTensor.Sizes[1] x prod(WindowSizes) = {c} x {k} = {c * k}; got {got_rows}")
        if got_blocks != count:
            terms = " x ".join(map(str, blocks)) + (f" = {count}" if len(blocks) > 1 else "")
            raise self._err(f"InputTensor.Sizes[{r - 1}] must equal BlockCount = {terms} (the blocks per spatial "
                            f"dimension of the padded output); got {got_blocks}")

    def _check_int64(self, what: str, terms: str, value: int) -> None:
        if value > INT64_MAX:
            raise self._err(f"{what} must be <= {INT64_MAX} (64-bit arithmetic); got {terms} = {value}")

    @property
    def window_count(self) -> int:
        """``prod(WindowSizes)``: the rows each channel spreads over."""
        return math.prod(self.window_sizes)

    @property
    def expected_input_sizes(self) -> tuple[int, int, int]:
        """``(N, C x prod(WindowSizes), BlockCount)``: UNFOLD's output rule on the output's sizes."""
        return UnfoldOperatorDesc.output_sizes_of(self.output_tensor.sizes, self.window_sizes, self.strides,
                                                  self.dilations, self.start_padding, self.end_padding)

    @staticmethod
    def output_sizes_of(input_sizes, output_spatial, window_sizes, strides=None, dilations=None,
                        start_padding=None, end_padding=None) -> tuple:
        """``(N, C, *output_spatial)`` for an input of ``input_sizes``
        (``(..., N, C x prod(WindowSizes), BlockCount)``)."""
        return (input_sizes[-3], input_sizes[-2] // math.prod(window_sizes), *output_spatial)

    @staticmethod
    def adjoint_call(input_sizes, args) -> tuple:
        """The adjoint as an array-API call: UNFOLD with the same window,
        reshaped to the input's leading 1s where it has them."""
        return "unfold", tuple(args[1:]), None if len(input_sizes) == 3 else tuple(input_sizes)

    @staticmethod
    def framework_call(input_sizes, args, ints) -> tuple:
        """The framework operators' form: one int list per field (the number of
        spatial axes as the array API counts it), a 3-D input (leading 1s dropped)."""
        output_sizes, window_sizes = args[:2]
        d = next((len(v) for v in (output_sizes, window_sizes) if _is_sequence(v)), 1)
        return "fold", tuple(ints(v, d) for v in args), tuple(input_sizes[-3:]) if len(input_sizes) > 3 else None

    def call_args(self) -> tuple:
        return (list(self.output_tensor.sizes[2:]), list(self.window_sizes), list(self.strides),
                list(self.dilations), list(self.start_padding), list(self.end_padding))

    def chunking(self):
        return WINDOW_SUMS

    @property
    def sum_kind(self) -> int:
        return SUM_FLOAT if self.input_tensor.data_type in FLOAT_TYPES else SUM_INTEGER

    def _passes(self, layouts):
        """One ``WindowSums`` pass (the gather form). Only the input's last three strides (N, rows, columns) matter,
        leading dimensions having size 1."""
        ((ts, origin),) = layouts
        inp, out = self.input_tensor, self.output_tensor
        sizes = out.sizes
        return (WindowSums(0, 0, FoldPlan(inp.element_size, self.sum_kind, sizes[0], sizes[1], sizes[2:], origin,
                                    ts[-3:], self.window_sizes, self.strides, self.dilations, self.start_padding,
                                    self.blocks_per_dimension, 0, out.element_strides)),)


def plain_lowering(in_sizes: tuple, output_sizes, window_sizes, strides=1, dilations=1, start_padding=0,
                   end_padding=0) -> tuple | None:
    """``(output sizes (N, C, *output_sizes), window, strides, dilations, start padding, blocks per dimension)`` (see
    ``opendml.ops``), the spatial axes counted by ``output_sizes``, else ``window_sizes``, else 1."""
    fields = (output_sizes, window_sizes, strides, dilations, start_padding, end_padding)
    d = next((len(v) for v in fields[:2] if type(v) is list or type(v) is tuple), 1)
    spatial, *window = [(v,) * d if type(v) is int else v for v in fields]
    spatial = plain_ints(spatial, d)
    r = len(in_sizes)
    if spatial is None or not 3 <= r <= d + 2:
        return None
    got = plain_window_fields(*window, spatial, MAX_SPATIAL_DIMENSIONS)
    if got is None:
        return None
    window, strides, dilations, start, _, k, blocks, per_dimension = got
    n, rows = in_sizes[-3], in_sizes[-2]
    c = rows // k
    count = n * c
    for s in spatial:
        if s < 1:
            return None
        count *= s
    if rows % k or in_sizes[-1] != blocks or count > MAX_ELEMENTS or any(s != 1 for s in in_sizes[:-3]):
        return None
    return (n, c, *spatial), window, strides, dilations, start, per_dimension


FoldOperatorDesc.plain_lowering = staticmethod(plain_lowering)
FoldOperatorDesc.PLAIN_KERNEL = "window_sums"
