"""DML_TILE_OPERATOR_DESC: the input repeated ``Repeats[i]`` times along each
dimension,

    OutputTensor.Sizes[i] = InputTensor.Sizes[i] * Repeats[i]
    Output[o] = Input[o mod InputTensor.Sizes]

lowered to one copy over 2 x DimensionCount axes (tile index, then position
inside the tile), the tile axes reading with stride 0. No FLOAT64, as the
page's 4_1 table says (docs/operators/tile.md)."""
from __future__ import annotations

import dataclasses

from ..model._checks import UINT32_MAX
from ..model.errors import ValidationError
from ..model.tensor_desc import TensorDesc
from ..plan import Copy
from ._common import FLOAT16_32, TYPES_2_1, support, T as _T
from ._move import MoveOperatorDesc
from ._spec import Binding, Field, scalar_int

_TILE_4_1 = TYPES_2_1 | {_T.INT64, _T.UINT64}


def numpy_repeats(value, rank: int):
    """``repeats`` by ``numpy.tile``'s rule: ones prepended to an int (``r`` is ``(1, ..., 1, r)``: only the last
    axis repeats) or a sequence shorter than the rank; anything else to the description as given."""
    n = scalar_int(value)
    if n is not None:
        return (1,) * (rank - 1) + (n,)
    if isinstance(value, tuple) and len(value) < rank:
        return (1,) * (rank - len(value)) + value
    if isinstance(value, tuple) and len(value) > rank:   # (the description would say "must have rank entries")
        raise ValidationError(f"TILE: Repeats must have at most {rank} entries (repeats: one per axis of x, fewer "
                              f"get ones prepended, as numpy.tile's); got {len(value)}")
    return value


@dataclasses.dataclass(frozen=True, repr=False)
class TileOperatorDesc(MoveOperatorDesc):
    """``OutputTensor`` may be None: a packed output of the tiled sizes."""

    input_tensor: TensorDesc
    output_tensor: TensorDesc | None
    repeats: tuple[int, ...]

    OPERATOR = "TILE"
    C_LOWERING = 2
    BINDING = Binding("tile", ((2, 3),), {"repeats": [2, 1]}, params="repeats: Ints",
                      returns="of ``x``'s dtype and shape ``x.shape * repeats``",
                      rules="``repeats`` longer than ``x.ndim``, an entry < 1", doc="""DML_TILE: ``x`` repeated ``repeats[i]`` times along axis i;
    ``out.shape == x.shape * repeats``, ``repeats`` by ``numpy.tile``'s rule: a sequence shorter than ``x.ndim`` has
    ones prepended, an int ``r`` is ``(1, ..., 1, r)`` (only the last axis repeats: ``tile(x, 2)`` of a (3, 4) array is
    (3, 8)).

    Parameters
    ----------
    repeats : int or sequence of int
        The repeat count per axis, each >= 1: one entry per axis of ``x``, or fewer (ones prepended for the leading
        axes), or an int (the last axis' count). More entries than ``x`` has axes are refused (``numpy.tile`` would add
        leading axes of size 1: reshape ``x`` first).""")
    FIELDS = (Field("Repeats", "repeats"),)
    COUNTS = {"RepeatsCount": "Repeats"}
    SUPPORT = support({"1_0": 4, "3_1": (1, 8)}, types={"1_0": FLOAT16_32, "2_1": TYPES_2_1, "4_1": _TILE_4_1})

    @classmethod
    def arguments(cls, api, x, repeats):
        return (lambda t: cls(t, None, numpy_repeats(repeats, t.rank))), (repeats,)

    def __post_init__(self):
        inp = self._check_input()
        self._ints("repeats", "Repeats", inp.rank)
        for i, r in enumerate(self.repeats):
            self._check_bounds("Repeats", i, r, 1, UINT32_MAX, " (values must be larger than 0)")
        self._derive_output(self.output_sizes_for((inp.sizes,))[0], "InputTensor.Sizes * Repeats")

    def output_sizes_for(self, input_sizes):
        return (tuple(n * r for n, r in zip(input_sizes[0], self.repeats)),)

    def _passes(self, layouts):
        (strides, origin), = layouts
        sizes, src, dst = [], [], []
        for n, r, s, o in zip(self.input_tensor.sizes, self.repeats, strides, self.output_tensor.element_strides):
            sizes += [r, n]
            src += [0, s]
            dst += [n * o, o]
        yield Copy(0, 0, tuple(sizes), origin, tuple(src), 0, tuple(dst))

    # differentiation (see ``_spec``): TILE's adjoint sums the gradient over the
    # tiles: viewed as (Repeats[0], Sizes[0], Repeats[1], Sizes[1], ...), the
    # tile axes are summed away. (No DirectML data-movement operator sums.)

    def adjoint(self, api, grad):
        sizes = self.input_tensor.sizes
        if all(r == 1 for r in self.repeats):
            return (api.identity(grad),)
        split = tuple(v for r, n in zip(self.repeats, sizes) for v in (r, n))
        return (api.sum(api.reshape(grad, split), tuple(range(0, 2 * len(sizes), 2))),)

    def chunking(self):
        return {k: 0 for k, r in enumerate(self.repeats) if r > 1}
