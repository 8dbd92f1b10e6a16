"""DML_DIAGONAL_MATRIX_OPERATOR_DESC (feature level 2_0) and DML_DIAGONAL_MATRIX1_OPERATOR_DESC (5_1): generators of
identity-like matrices. The output's last two dimensions are a matrix (height H, width W); those before count a stack
of matrices. The diagonal of the element at row y, column x is ``x - y``:

* DIAGONAL_MATRIX: ``Value`` (a FLOAT, converted by CAST's rules) on diagonal ``Offset``, 0 elsewhere.
* DIAGONAL_MATRIX1: ``Value`` (a ``DML_SCALAR_UNION`` read as ``ValueDataType``, which must equal
  ``OutputTensor.DataType``) on the diagonals in ``[DiagonalFillBegin, DiagonalFillEnd)``; an inverted range (begin >
  end) fills the diagonals outside ``[DiagonalFillEnd, DiagonalFillBegin)`` instead (the page's pseudocode: ``(End >=
  Begin) ^ (x - y >= Begin) ^ (x - y < End)``); begin == end fills nothing. Elsewhere the optional ``InputTensor``'s
  element (of the output's Sizes: erratum, docs/operators/diagonal-matrix.md), or 0.

Lowered to the move program, which every backend runs (no kernel of its own): a ``Copy`` of the input (or a ``Fill``
of 0), then ``Fill`` passes of the value over each band of diagonals (``_band``). DIAGONAL_MATRIX1 with an InputTensor
is affine in it: the derivative is the operator with Value 0, its own adjoint."""
from __future__ import annotations

import dataclasses

from ..model._checks import INT32_MAX, INT32_MIN
from ..model.data_type import DataType
from ..model.errors import ValidationError
from ..model.tensor_desc import TensorDesc
from ..plan import Copy, Fill
from ._common import FLOAT16_32, support
from ._move import MoveOperatorDesc, convert_scalar
from ._spec import Binding, Enum, Float, Int, ScalarUnion, Tensor, input_type, is_float

#: Beyond every diagonal of any matrix: the open ends of an inverted range.
_FAR = 1 << 62


def _band(lo: int, hi: int, h: int, w: int) -> list[tuple[int, int, tuple, tuple]]:
    """The element runs covering diagonals ``[lo, hi)`` of an h x w matrix, each ``(row, column, sizes, steps)``,
    steps in matrix units (``(1, 1)`` along a diagonal, ``(0, 1)`` along a row, ``(1, 0)`` or ``(1, 1)`` row to row):
    a run per diagonal, or, where fewer (ties too: contiguous memory), the rows' runs: a run for each row the band
    clips on one side alone (its length changing row to row), one parallelogram for the rows it crosses whole, one
    full-width rectangle for those it clips on both sides. Counted before any run is made: the cost follows the runs
    made, not the matrix' height."""
    lo, hi = max(lo, 1 - h), min(hi, w)
    if lo >= hi:
        return []
    ys, ye = max(0, 1 - hi), min(h, w - lo)           # the rows the band reaches
    left, right = -lo, w - hi + 1                     # y < left: clipped on the left; y >= right: on the right
    one_side = (range(ys, min(left, right, ye)), range(max(ys, left, right), ye))
    whole = range(max(ys, left), min(right, ye))      # neither side clipped
    full = range(max(ys, right), min(left, ye))       # both sides clipped
    if sum(map(len, one_side)) + (len(whole) > 0) + (len(full) > 0) > hi - lo:
        return [(max(0, -k), max(0, k), (min(h - max(0, -k), w - max(0, k)),), ((1, 1),)) for k in range(lo, hi)]
    runs = [(y, max(0, y + lo), (min(w, y + hi) - max(0, y + lo),), ((0, 1),)) for r in one_side for y in r]
    for rows, x, m, step in ((whole, whole.start + lo, hi - lo, 1), (full, 0, w, 0)):
        if len(rows) == 1:
            runs.append((rows.start, x, (m,), ((0, 1),)))
        elif rows:
            runs.append((rows.start, x, (len(rows), m), ((1, step), (0, 1))))
    return runs


class _DiagonalRules(MoveOperatorDesc):
    """What both generators share: the output's checks and the lowering filling ``fill_ranges()`` (half-open ranges
    of diagonals ``x - y``) with ``fill_value()`` (of the output's type)."""

    DEFAULT_INPUT_START = 1

    def _check_output(self, out: TensorDesc) -> None:
        if not isinstance(out, TensorDesc):
            raise self._err(f"OutputTensor must be a TensorDesc; got {type(out).__name__}")
        if out.rank < 2:
            raise self._err(f"OutputTensor.DimensionCount must be at least 2 (the matrix' height and width); "
                            f"got {out.rank} (Sizes {list(out.sizes)})")

    def _passes(self, layouts):
        out = self.output_tensor
        sizes, steps = out.sizes, out.element_strides
        if layouts:
            (strides, origin), = layouts
            yield Copy(0, 0, sizes, origin, tuple(strides), 0, steps)
        else:
            yield Fill(0, sizes, 0, steps, 0.0 if is_float(out.data_type) else 0)
        h, w = sizes[-2:]
        sh, sw = steps[-2:]
        value = self.fill_value()
        for lo, hi in self.fill_ranges():
            for y, x, n, units in _band(lo, hi, h, w):
                yield Fill(0, sizes[:-2] + n, y * sh + x * sw, steps[:-2] + tuple(a * sh + b * sw for a, b in units),
                           value)

    def output_sizes_for(self, input_sizes):
        """InputTensor's sizes where there is one, else OutputTensor's (a generator's, given)."""
        return (tuple(input_sizes[0]) if input_sizes else self.output_tensor.sizes,)

    def linear_part(self):
        """None: the output is no function of a data tensor (overridden: DIAGONAL_MATRIX1 with an InputTensor)."""
        return None

    def adjoint(self, api, grad):
        raise NotImplementedError(f"{self.OPERATOR}: no input to differentiate")

    def chunking(self):
        """A block-wise run needs whole matrices (diagonals count from each matrix' corner); the stack's dimensions may
        be cut anywhere."""
        r = self.output_tensor.rank
        return {r - 2: 0, r - 1: 0} if self.inputs else {}


@dataclasses.dataclass(frozen=True, repr=False)
class DiagonalMatrixOperatorDesc(_DiagonalRules):
    """``OutputTensor[..., y, y + Offset] = Value``, 0 elsewhere."""

    output_tensor: TensorDesc
    offset: int = 0
    value: float = 1.0

    OPERATOR = "DIAGONAL_MATRIX"
    SLOTS = (Tensor("OutputTensor", "output_tensor", "output"),)
    FIELDS = (Int("Offset", "offset", default=0), Float("Value", "value", default=1.0))
    SUPPORT = support({"2_0": 4, "4_0": (2, 4)}, first=FLOAT16_32, wide="5_1")

    def __post_init__(self):
        self._check_output(self.output_tensor)
        self._check_slot_tensors()
        self._int("offset", "Offset", INT32_MIN, INT32_MAX, " (an INT)")
        self._set("value", self._float32(self.value, "Value"))

    def fill_ranges(self):
        return [(self.offset, self.offset + 1)]

    def fill_value(self):
        return convert_scalar(self.value, self.output_tensor.data_type)


@dataclasses.dataclass(frozen=True, repr=False)
class DiagonalMatrix1OperatorDesc(_DiagonalRules):
    """``InputTensor`` may be None (zeros elsewhere); ``OutputTensor`` may be
    None where there is an input (its sizes and type)."""

    input_tensor: TensorDesc | None
    output_tensor: TensorDesc | None
    value_data_type: DataType | None = None
    value: int | float = 1
    diagonal_fill_begin: int = 0
    diagonal_fill_end: int = 1

    OPERATOR = "DIAGONAL_MATRIX1"
    C_LOWERING = 8
    BINDING = Binding("diagonal_matrix", ((3, 4),), {"value": 0, "begin": 1, "end": 0}, optional=True,
                      route="index", members=("dtype",),
                      params="*, shape=None, dtype=None, value=1, begin: int = 0, end: int = 1",
                      shape="The input (2 to 4 dimensions; left out: a generator of ``shape`` and ``dtype``)",
                      returns="of ``x``'s dtype and shape (without ``x``: a NumPy array of ``shape`` and ``dtype``)",
                      rules="``shape`` or ``dtype`` not ``x``'s, or missing without ``x``, a "
                      "``value`` that does not fit the dtype, ``begin`` or ``end`` outside INT32", doc="""DML_DIAGONAL_MATRIX1: ``value`` on the diagonals ``col - row`` in
    ``[begin, end)`` of each matrix (the last two axes; the axes before them
    count a stack), ``x``'s elements elsewhere, or zeros without ``x``.

    An inverted range (``begin > end``) fills the diagonals outside ``[end,
    begin)``: ``begin=1, end=0, value=0`` keeps only the main diagonal;
    ``begin == end`` fills nothing. The defaults give the identity (``np.eye``);
    ``begin=k, end=k+1`` is diagonal k (DML_DIAGONAL_MATRIX's Offset), and
    ``begin=-2**31, end=1, value=0`` zeroes all but the strictly upper
    triangle (``np.triu(x, 1)``).

    Parameters
    ----------
    shape : sequence of int, optional
        Without ``x``: the result's shape (2 to 4 dimensions). With ``x``:
        None or ``x``'s shape.
    dtype : dtype, optional
        Without ``x``: the result's dtype (any spelling ``cast`` takes;
        default float64, as ``np.eye``). With ``x``: None or ``x``'s dtype.
    value : int or float, optional
        The value on the filled diagonals (default 1); it must fit the dtype.
    begin, end : int, optional
        DiagonalFillBegin and DiagonalFillEnd (INT32 values).""")
    SLOTS = (Tensor("InputTensor", "input_tensor", "input", optional=True),
             Tensor("OutputTensor", "output_tensor", "output", optional=True))
    FIELDS = (Enum("ValueDataType", "value_data_type", enum=DataType, default=input_type),
              ScalarUnion("Value", "value", type_field="ValueDataType", default=1),
              Int("DiagonalFillBegin", "diagonal_fill_begin", default=0),
              Int("DiagonalFillEnd", "diagonal_fill_end", default=1))
    SUPPORT = support({"5_1": (2, 4)})

    @classmethod
    def arguments(cls, api, x, shape, dtype, value, begin, end):
        where = "diagonal_matrix"
        if x is api.no_array:
            dt = api.dtype_argument("float64" if dtype is None else dtype, where)
            sizes = api.snapshot(shape)
            if not isinstance(sizes, tuple):
                raise api.field_error(where, "OutputTensor.Sizes", "be given, a sequence of 2 to 4 sizes (shape, "
                                      "without x)", shape)
            if not 2 <= len(sizes) <= 4:
                raise ValidationError(f"{where}: shape must have 2 to 4 dimensions for DIAGONAL_MATRIX1; got "
                                      f"{len(sizes)} (shape {list(sizes)})")
            out = api.sizes_of(where, "OutputTensor", lambda: TensorDesc(dt, sizes), "shape")
            return (lambda: cls(None, out, dt, value, begin, end)), [], sizes, (sizes, dt, value, begin, end)
        xs = tuple(int(n) for n in x.shape)
        if shape is not None and api.snapshot(shape) != xs:
            raise api.field_error(where, "OutputTensor.Sizes", f"be None or x's shape {list(xs)} (shape, with x)",
                                  shape)
        if dtype is not None and api.dtype_argument(dtype, where) != api.data_type(x.dtype):
            raise api.field_error(where, "OutputTensor.DataType", f"be None or x's dtype {x.dtype} (dtype, with x)",
                                  dtype)
        return (lambda t: cls(t, None, t.data_type, value, begin, end)), [x], xs, (value, begin, end)

    def __post_init__(self):
        inp = self.input_tensor
        if inp is not None:
            if not isinstance(inp, TensorDesc):
                raise self._err(f"InputTensor must be a TensorDesc or None; got {type(inp).__name__}")
            if self.output_tensor is None:
                self._set("output_tensor", TensorDesc(inp.data_type, inp.sizes))
        elif self.output_tensor is None:
            raise self._err("OutputTensor is required when InputTensor is None (its sizes cannot be derived)")
        self._check_output(self.output_tensor)
        self._check_slot_tensors()
        if self.value_data_type is None:        # (the JSON form left it out: the output's)
            self._set("value_data_type", self.output_tensor.data_type)
        if inp is not None:
            self._check_sizes("OutputTensor", self.output_tensor, self.output_sizes_for((inp.sizes,))[0],
                              "InputTensor.Sizes")
        self._typed_scalar("value_data_type", "ValueDataType", "value", "Value")
        self._int("diagonal_fill_begin", "DiagonalFillBegin", INT32_MIN, INT32_MAX, " (an INT)")
        self._int("diagonal_fill_end", "DiagonalFillEnd", INT32_MIN, INT32_MAX, " (an INT)")

    def fill_ranges(self):
        b, e = self.diagonal_fill_begin, self.diagonal_fill_end
        return [(b, e)] if e >= b else [(-_FAR, e), (b, _FAR)]

    def fill_value(self):
        return self.value

    def linear_part(self):
        """With a float InputTensor: the operator with Value 0 (the input with the filled diagonals zeroed)."""
        if self.input_tensor is None or not is_float(self.input_tensor.data_type):
            return None
        return self if self.value == 0 else dataclasses.replace(self, value=0.0)

    def adjoint(self, api, grad):
        """Zeroing the filled diagonals is its own adjoint."""
        return (api.diagonal_matrix(grad, value=0, begin=self.diagonal_fill_begin, end=self.diagonal_fill_end),)
