"""DML_SPACE_TO_DEPTH, DML_DEPTH_TO_SPACE and their ``1`` versions (adding ``Order``): ``BlockSize x BlockSize`` blocks
of spatial elements moved into channels and back, on 4-D tensors ``{N, C, H, W}``. With ``b = BlockSize``:

    space {N, C, H*b, W*b}  <->  depth {N, C*b*b, H, W}
    depth channel = (bh*b + bw)*C + c   for DEPTH_COLUMN_ROW (DCR; SPACE_TO_DEPTH and DEPTH_TO_SPACE)
                  = c*b*b + bh*b + bw   for COLUMN_ROW_DEPTH (CRD)
    space[n, c, h*b + bh, w*b + bw] = depth[n, channel, h, w]

Either direction is one 6-D copy (n, bh, bw, c, h, w). Errata (the pages' output sizes, BlockSize's rule):
docs/operators/space-depth.md."""
from __future__ import annotations

import dataclasses

from ..model.tensor_desc import TensorDesc
from ..plan import Copy
from ._common import FLOAT16_32, support
from ._move import MoveOperatorDesc
from ._spec import Binding, DepthSpaceOrder, Enum, UInt, enum_member


@dataclasses.dataclass(frozen=True, repr=False)
class _SpaceDepth(MoveOperatorDesc):
    """``OutputTensor`` may be None: packed, of the sizes ``output_sizes_for`` gives."""
    input_tensor: TensorDesc
    output_tensor: TensorDesc | None
    block_size: int

    FIELDS = (UInt("BlockSize", "block_size"),)
    SUPPORT = support({"1_0": 4}, first=FLOAT16_32, wide="5_0")
    order = DepthSpaceOrder.DEPTH_COLUMN_ROW        # (a field of the ``1`` versions)

    @property
    def TO_DEPTH(self) -> bool:  # noqa: N802
        """SPACE_TO_DEPTH(1) moves space to depth; DEPTH_TO_SPACE(1) back."""
        return self.OPERATOR.startswith("SPACE_TO_DEPTH")

    def __post_init__(self):
        inp = self._check_input()
        b = self._int("block_size", "BlockSize", 1)
        if inp.rank != 4:
            raise self._err(f"InputTensor.DimensionCount must be 4 ({{N, C, H, W}}); got {inp.rank}")
        if self.TO_DEPTH:
            for i, name in ((2, "Height"), (3, "Width")):
                if inp.sizes[i] % b:
                    raise self._err(f"InputTensor.Sizes[{i}] ({name}) must be a multiple of BlockSize {b}; "
                                    f"got {inp.sizes[i]}")
            rule = "{N, C * BlockSize^2, H / BlockSize, W / BlockSize}"
        else:
            if inp.sizes[1] % (b * b):
                raise self._err(f"InputTensor.Sizes[1] (Channels) must be a multiple of BlockSize * BlockSize = "
                                f"{b * b}; got {inp.sizes[1]}")
            rule = "{N, C / BlockSize^2, H * BlockSize, W * BlockSize}"
        self._derive_output(self.output_sizes_for((inp.sizes,))[0], rule)

    def output_sizes_for(self, input_sizes):
        n, c, h, w = input_sizes[0]
        b = self.block_size
        return ((n, c * b * b, h // b, w // b) if self.TO_DEPTH else (n, c // (b * b), h * b, w * b),)

    # differentiation (see ``_spec``): a permutation; its adjoint is the inverse (the other direction, same order).

    def adjoint(self, api, grad):
        back = api.depth_to_space if self.TO_DEPTH else api.space_to_depth
        return (back(grad, self.block_size, self.order),)

    def chunking(self):
        b = self.block_size
        return {1: 0, 2: b, 3: b} if self.TO_DEPTH else {1: 0}

    def _passes(self, layouts):
        (strides, origin), = layouts
        b = self.block_size
        space = self.input_tensor if self.TO_DEPTH else self.output_tensor
        s_str = strides if self.TO_DEPTH else space.element_strides
        d_str = self.output_tensor.element_strides if self.TO_DEPTH else strides
        n, c, hb, wb = space.sizes
        h, w = hb // b, wb // b
        sizes = (n, b, b, c, h, w)
        space_strides = (s_str[0], s_str[2], s_str[3], s_str[1], b * s_str[2], b * s_str[3])
        if self.order == DepthSpaceOrder.DEPTH_COLUMN_ROW:
            bh, bw, cc = b * c * d_str[1], c * d_str[1], d_str[1]
        else:
            bh, bw, cc = b * d_str[1], d_str[1], b * b * d_str[1]
        depth_strides = (d_str[0], bh, bw, cc, d_str[2], d_str[3])
        src, dst = (space_strides, depth_strides) if self.TO_DEPTH else (depth_strides, space_strides)
        yield Copy(0, 0, sizes, origin, src, 0, dst)


@dataclasses.dataclass(frozen=True, repr=False)
class SpaceToDepthOperatorDesc(_SpaceDepth):
    """``OutputTensor`` may be None: ``{N, C*b*b, H/b, W/b}`` packed."""
    OPERATOR = "SPACE_TO_DEPTH"


@dataclasses.dataclass(frozen=True, repr=False)
class DepthToSpaceOperatorDesc(_SpaceDepth):
    """``OutputTensor`` may be None: ``{N, C/(b*b), H*b, W*b}`` packed."""
    OPERATOR = "DEPTH_TO_SPACE"


@dataclasses.dataclass(frozen=True, repr=False)
class _SpaceDepth1(_SpaceDepth):
    """The ``1`` versions: with ``Order`` (feature level 2_1)."""
    order: DepthSpaceOrder = DepthSpaceOrder.DEPTH_COLUMN_ROW

    FIELDS = (UInt("BlockSize", "block_size"), Enum("Order", "order", enum=DepthSpaceOrder))
    SUPPORT = support({"2_1": 4}, wide="5_0")

    def __post_init__(self):
        self._enum("order", "Order", DepthSpaceOrder)
        _SpaceDepth.__post_init__(self)

    @classmethod
    def arguments(cls, api, x, block_size, order):
        o = ORDERS.get(order.upper()) if isinstance(order, str) else enum_member(DepthSpaceOrder, order)
        if o is None:
            raise api.field_error(cls.BINDING.function, "Order", "be 'DCR' (DEPTH_COLUMN_ROW), 'CRD' "
                                  "(COLUMN_ROW_DEPTH) or a DepthSpaceOrder (order)", order)
        return (lambda t: cls(t, None, block_size, o)), (block_size, o)


#: The array functions' names of the orders (any case).
ORDERS = {"DCR": DepthSpaceOrder.DEPTH_COLUMN_ROW, "CRD": DepthSpaceOrder.COLUMN_ROW_DEPTH,
          "DEPTH_COLUMN_ROW": DepthSpaceOrder.DEPTH_COLUMN_ROW, "COLUMN_ROW_DEPTH": DepthSpaceOrder.COLUMN_ROW_DEPTH}


def _binding(function, inputs, args, summary, before, after, rule):
    """The two array functions' binding: ``before`` -> ``after`` shapes."""
    return Binding(function, inputs, args, params="block_size: int, order: str = 'DCR'", members=("order",),
                   shape=f"The input of shape {before}", returns=f"of ``x``'s dtype and shape {after}",
                   rules=f"not 4-D, {rule}, an unknown ``order``", doc=f"""DML_{function.upper()}1: {summary}

    Parameters
    ----------
    block_size : int
        ``b``, the block's height and width.
    order : str or DepthSpaceOrder, optional
        ``"DCR"`` (the default, ``"DEPTH_COLUMN_ROW"``) or ``"CRD"``
        (``"COLUMN_ROW_DEPTH"``), any case, a ``DepthSpaceOrder`` or its
        int value.""")


@dataclasses.dataclass(frozen=True, repr=False)
class SpaceToDepth1OperatorDesc(_SpaceDepth1):
    """SPACE_TO_DEPTH with ``Order`` (feature level 2_1)."""
    OPERATOR = "SPACE_TO_DEPTH1"
    C_LOWERING = 4
    BINDING = _binding("space_to_depth", ((1, 2, 4, 6),), {"block_size": 2, "order": "CRD"},
                       """(N, C, H*b, W*b) -> (N, C*b*b, H, W), the depth
    index being (bh, bw, c) for "DCR" or (c, bh, bw) for "CRD".""", "(N, C, H * b, W * b)",
                       "(N, C * b * b, H, W)", "H or W not a multiple of ``block_size``")


@dataclasses.dataclass(frozen=True, repr=False)
class DepthToSpace1OperatorDesc(_SpaceDepth1):
    """DEPTH_TO_SPACE with ``Order`` (feature level 2_1)."""
    OPERATOR = "DEPTH_TO_SPACE1"
    C_LOWERING = 5
    BINDING = _binding("depth_to_space", ((1, 8, 2, 3),), {"block_size": 2}, """(N, C*b*b, H, W) -> (N, C, H*b, W*b), the inverse
    of ``space_to_depth`` with the same order.""", "(N, C * b * b, H, W)", "(N, C, H * b, W * b)",
                       "the channels not a multiple of ``block_size ** 2``")
