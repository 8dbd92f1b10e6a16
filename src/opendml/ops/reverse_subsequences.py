"""DML_REVERSE_SUBSEQUENCES_OPERATOR_DESC: along ``Axis``, the first L
elements of every sequence reversed, L read from ``SequenceLengthsTensor``
(sizes of the input, 1 along Axis), the rest copied,

    output[..., k, ...] = input[..., L - 1 - k, ...]   if k < L
                          input[..., k, ...]           otherwise

A length past the axis behaves as if clamped to it (the page); lengths 0 and 1 copy the sequence. Lowered to one
``Gather`` pass whose coordinate along Axis is computed from the length (``INDEX_REVERSE_LENGTH``). The operation is
its own adjoint (each sequence's permutation is its own inverse)."""
from __future__ import annotations

import dataclasses

from ..model.tensor_desc import TensorDesc
from ..model.data_type import DataType
from ..plan import INDEX_REVERSE_LENGTH, Gather
from ._common import support
from ._move import SameSizes, WholeAxis
from ._index import INDEX_TYPES_1_0, IndexOperatorDesc, dims, position
from ._spec import Binding, UInt


@dataclasses.dataclass(frozen=True, repr=False)
class ReverseSubsequencesOperatorDesc(SameSizes, WholeAxis, IndexOperatorDesc):
    """``OutputTensor`` may be None: a packed output of the input's sizes."""

    input_tensor: TensorDesc
    sequence_lengths_tensor: TensorDesc
    output_tensor: TensorDesc | None
    axis: int

    OPERATOR = "REVERSE_SUBSEQUENCES"
    BINDING = Binding("reverse_subsequences", ((3, 4),), {"axis": 1},
                      others={"sequence_lengths": ("SequenceLengthsTensor", [2, 4, 3], "uint32")}, route="index",
                      params="sequence_lengths: Any, axis: int", shape="The input",
                      returns="of ``x``'s dtype and shape", rules="``sequence_lengths`` of another shape, an axis out "
                      "of range", doc="""DML_REVERSE_SUBSEQUENCES: along ``axis``, the first L elements of each
    sequence reversed (L from ``sequence_lengths``, uint32 or uint64, of
    ``x``'s shape with 1 along ``axis``, or without that axis); lengths past
    the axis are clamped to it.

    Parameters
    ----------
    sequence_lengths : integer array
        The length L of each sequence (uint32 or uint64), of any framework
        (moved to ``x``'s).
    axis : int
        The axis of ``x`` the sequences run along (negative values count
        from the end).""")
    C_INDEX = 3
    DEFAULT_INPUT_START = 1
    FIELDS = (UInt("Axis", "axis"),)
    INDEX_SLOT = "SequenceLengthsTensor"
    INDEX_ATTR = "sequence_lengths_tensor"
    INDEX_ANY_LEVEL = frozenset({DataType.UINT32, DataType.UINT64})
    SUPPORT = support({"2_1": 4, "3_0": (4, 5), "4_0": (1, 8)}, wide="5_0",
                      SequenceLengthsTensor={"2_1": INDEX_TYPES_1_0, "5_0": INDEX_ANY_LEVEL})

    @classmethod
    def arguments(cls, api, x, sequence_lengths, axis):
        xs, ls = dims(x), dims(sequence_lengths)
        a = api.axis(axis, len(xs), "reverse_subsequences")
        lengths = sequence_lengths.reshape(ls[:a] + (1,) + ls[a:]) if len(ls) == len(xs) - 1 else sequence_lengths
        return (lambda tx, tl: cls(tx, tl, None, a)), [x, lengths], xs, (a,)

    def __post_init__(self):
        inp = self._check_input()
        lengths = self._same_rank("SequenceLengthsTensor", self.sequence_lengths_tensor, inp)
        axis = self._axis_field("axis", "Axis", inp.rank, "InputTensor")
        self._check_all_but_axis("SequenceLengthsTensor", lengths, "InputTensor", inp, axis, axis_size=1)
        self._derive_output(self.output_sizes_for((inp.sizes,))[0], "InputTensor.Sizes")

    def _index_passes(self, layouts, out_strides):
        (xs, xo), (ls, lo) = layouts
        a = self.axis
        src = tuple(0 if d == a else s for d, s in enumerate(xs))
        lstr = tuple(0 if d == a else s for d, s in enumerate(ls))
        yield Gather(0, 0, self.input_tensor.sizes, xo, src, 0, tuple(out_strides[0]),
                     (position(1, lo, lstr, xs[a], self.input_tensor.sizes[a], mode=INDEX_REVERSE_LENGTH, axis=a),))

    def adjoint(self, api, grad, lengths):
        """Its own adjoint: each sequence's permutation is its own inverse."""
        return (api.reverse_subsequences(grad, lengths, self.axis), None)
