"""What the backends execute, in elements, already validated.

Every operator lowers to one plan type, the move program ``MovePlan``: input and output types and passes, each from an
input slot (``src``) to an output slot (``dst``), run in order. The pass kinds (each class says what it computes):
``Copy`` (strided, with optional per-axis index maps ``AxisMap``, conversion and scale/bias), ``Fill``,
``Gather``/``Scatter`` (positions along some dimensions read from index tensors: ``IndexAxis``), and the tuned passes of
UNFOLD, FOLD and SLICE_GRAD (``Windows``, ``WindowSums``, ``SliceScatter``), each carrying its kernel's parameter block
(``UnfoldPlan``, ``FoldPlan``, ``ScatterPlan``), as a plain ``Copy`` carries ``CopyPlan``'s (``MovePlan.kernel_plan``).

Offsets are relative to element 0 of the slot's bound range; ``MovePlan.in_spans``/``out_spans`` say which elements the
program touches, so a backend checks once that it stays inside what was bound. ``CopyPlan`` and ``ScatterPlan`` are
canonicalised here for every backend (size-1 dimensions dropped, ordered by output stride, neighbours that walk memory
as one merged).
"""
from __future__ import annotations

import dataclasses
import math

from .model._frozen import stored_init
from .model.data_type import ELEMENT_TYPES


class _Sized:
    count = property(lambda self: math.prod(self.sizes), doc="The number of positions of the index space ``sizes``.")


def _spans(in_sizes, out_sizes):
    """A kernel plan's ``in_span`` and ``out_span`` properties (lowest and highest element index read and written) over
    its index spaces ``in_sizes(plan)`` and ``out_sizes(plan)``."""
    return (property(lambda p: _span(p.in_offset, in_sizes(p), p.in_strides)),
            property(lambda p: _span(p.out_offset, out_sizes(p), p.out_strides)))


@stored_init
@dataclasses.dataclass(frozen=True)
class CopyPlan(_Sized):
    element_size: int
    sizes: tuple[int, ...]
    in_offset: int
    in_strides: tuple[int, ...]      # signed, elements
    out_offset: int
    out_strides: tuple[int, ...]     # non-negative, elements

    in_span, out_span = _spans(lambda p: p.sizes, lambda p: p.sizes)

    def canonical(self) -> "CopyPlan":
        """Drop size-1 dimensions, order by output stride (largest first: the innermost is written most densely), and
        merge neighbours. Computed once per plan."""
        done = self.__dict__.get("_canonical")
        if done is not None:
            return done
        done = self._canonical_form()
        object.__setattr__(self, "_canonical", done)
        return done

    def _canonical_form(self, ordered: bool = False) -> "CopyPlan":
        # One pass where the dimensions already come by output stride, then |input stride|, largest first (a packed
        # output's order; ``ordered``: ``_sorted_form`` put them so); otherwise ``_sorted_form`` sorts them first.
        sizes, ins, outs = [], [], []
        po = pa = None
        for s, i, o in zip(self.sizes, self.in_strides, self.out_strides):
            if s == 1:
                continue
            a = i if i >= 0 else -i
            if not ordered and (o < 0 or (po is not None and (o > po or (o == po and a > pa)))):
                return self._sorted_form()
            po, pa = o, a
            if sizes and ins[-1] == i * s and outs[-1] == o * s:
                sizes[-1] *= s
                ins[-1], outs[-1] = i, o
            else:
                sizes.append(s)
                ins.append(i)
                outs.append(o)
        if not sizes:
            return CopyPlan(self.element_size, (1,), self.in_offset, (1,), self.out_offset, (1,))
        return CopyPlan(self.element_size, tuple(sizes), self.in_offset, tuple(ins), self.out_offset, tuple(outs))

    def _sorted_form(self) -> "CopyPlan":
        # A stable sort: equal keys keep their order. (Some dimension is not size 1.)
        dims = sorted((d for d in zip(self.sizes, self.in_strides, self.out_strides) if d[0] != 1),
                      key=lambda d: (d[2], abs(d[1])), reverse=True)
        sizes, ins, outs = zip(*dims)
        return CopyPlan(self.element_size, sizes, self.in_offset, ins, self.out_offset, outs)._canonical_form(True)


class _WindowGrid:
    """UNFOLD's and FOLD's plans: the 3-D side's ``rows`` (``C x prod(window)``) and ``columns`` (the blocks)."""

    @property
    def rows(self) -> int:
        return self.channels * math.prod(self.window)

    @property
    def columns(self) -> int:
        return math.prod(self.blocks)


@stored_init
@dataclasses.dataclass(frozen=True)
class UnfoldPlan(_WindowGrid):
    """``out[n, c*K + k, b] = in[n, c, b*stride + k*dilation - start_padding]``
    (multi-indices k over ``window``, b over ``blocks``, row-major), or 0 where
    that coordinate lies outside the input."""

    element_size: int
    batch: int
    channels: int
    spatial: tuple[int, ...]          # input spatial sizes
    in_offset: int
    in_strides: tuple[int, ...]       # (n, c, *spatial), signed, elements
    window: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    start_padding: tuple[int, ...]
    blocks: tuple[int, ...]           # per spatial axis: the output's columns are their product
    out_offset: int
    out_strides: tuple[int, int, int]  # (n, row, column), elements

    @property
    def out_count(self) -> int:
        return self.batch * self.rows * self.columns

    in_span, out_span = _spans(lambda p: (p.batch, p.channels, *p.spatial), lambda p: (p.batch, p.rows, p.columns))


@stored_init
@dataclasses.dataclass(frozen=True)
class FoldPlan(_WindowGrid):
    """FOLD (col2im) as a gather: ``out[n, c, p] = +0``, then ``+= in[n, c*K + k, b]`` for every window element k, in
    increasing row-major order, whose block b satisfies ``b*stride + k*dilation - start_padding == p`` in every spatial
    dimension. float16 sums in float32 and rounds once; integers wrap (two's complement); float32/float64 sum in their
    own type. ``sum_kind`` is ``SUM_INTEGER`` or ``SUM_FLOAT`` (see runtime/params.h)."""

    element_size: int
    sum_kind: int
    batch: int
    channels: int
    spatial: tuple[int, ...]          # output spatial sizes
    in_offset: int
    in_strides: tuple[int, int, int]  # (n, row, column), signed, elements
    window: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    start_padding: tuple[int, ...]
    blocks: tuple[int, ...]
    out_offset: int
    out_strides: tuple[int, ...]      # (n, c, *spatial), non-negative, elements

    @property
    def out_count(self) -> int:
        return self.batch * self.channels * math.prod(self.spatial)

    in_span, out_span = _spans(lambda p: (p.batch, p.rows, p.columns), lambda p: (p.batch, p.channels, *p.spatial))


@stored_init
@dataclasses.dataclass(frozen=True)
class ScatterPlan(_Sized):
    """SLICE_GRAD: ``out[p] = in[i]`` where ``p == first + i*step`` (every dimension, ``0 <= i < taken``), else 0,
    each output element written once. Input strides are signed (a SLICE1 window walked backwards)."""

    element_size: int
    sizes: tuple[int, ...]            # output sizes
    out_offset: int
    out_strides: tuple[int, ...]      # non-negative, elements
    first: tuple[int, ...]
    step: tuple[int, ...]             # >= 1
    taken: tuple[int, ...]            # input sizes
    in_offset: int
    in_strides: tuple[int, ...]       # signed, elements

    out_count = _Sized.count
    in_span, out_span = _spans(lambda p: p.taken, lambda p: p.sizes)

    def canonical(self, cpu: bool = False) -> "ScatterPlan":
        """Size-1 dimensions taking one element dropped, a stable order by output stride (largest first), and a fully
        covered step-1 dimension merged into the one outside it where that one has step 1 (for the CPU kernels,
        ``cpu``: or takes one element) and both walk memory as one (``odml_scatter_canonical`` in C)."""
        dims = sorted((d for d in zip(self.sizes, self.out_strides, self.first, self.step, self.taken,
                                      self.in_strides) if d[0] != 1 or d[4] != 1), key=lambda d: d[1], reverse=True)
        merged: list = []
        for n, o, f, s, t, i in dims:
            if merged and f == 0 and s == 1 and t == n:
                pn, po, pf, ps, pt, pi = merged[-1]
                if (ps == 1 or (cpu and pt == 1)) and po == o * n and pi == i * n:
                    merged[-1] = (pn * n, o, pf * n, 1, pt * n, i)
                    continue
            merged.append((n, o, f, s, t, i))
        n, o, f, s, t, i = zip(*(merged or [(1, 1, 0, 1, 1, 1)]))
        return ScatterPlan(self.element_size, n, self.out_offset, o, f, s, t, self.in_offset, i)


#: ``AxisMap.mode`` values: how a destination coordinate outside the source reads it (PADDING's modes; CONSTANT is a
#: ``Fill`` pass, not a map).
MAP_CLAMP, MAP_REFLECT, MAP_SYMMETRIC, MAP_WRAP = 1, 2, 3, 4


@dataclasses.dataclass(frozen=True)
class AxisMap:
    """The source coordinate along one axis of a ``Copy`` from the destination coordinate d: ``i = d - shift``, then,
    where i falls outside ``[0, size)``, ``MAP_CLAMP`` takes the nearest edge, ``MAP_REFLECT`` mirrors about the edges
    without repeating them (period ``2*(size-1)``; a size of 1 always reads 0), ``MAP_SYMMETRIC`` mirrors repeating
    them (period ``2*size``), ``MAP_WRAP`` wraps (period ``size``)."""
    mode: int
    shift: int
    size: int

    def source(self, d: int) -> int:
        i, n = d - self.shift, self.size
        if 0 <= i < n:
            return i
        if self.mode == MAP_CLAMP:
            return min(max(i, 0), n - 1)
        if self.mode == MAP_WRAP:
            return i % n
        if self.mode == MAP_SYMMETRIC:
            r = i % (2 * n)
            return r if r < n else 2 * n - 1 - r
        if n == 1:
            return 0
        r = i % (2 * (n - 1))
        return r if r < n else 2 * (n - 1) - r


@dataclasses.dataclass(frozen=True)
class _Walk(_Sized):
    """The fields every pass but ``Fill`` starts with: ``sizes`` walked from the offsets by the strides (elements: the
    source's signed, the destination's non-negative), from input ``src`` to output ``dst``."""
    src: int
    dst: int
    sizes: tuple[int, ...]
    src_offset: int
    src_strides: tuple[int, ...]
    dst_offset: int
    dst_strides: tuple[int, ...]

    def src_span(self) -> tuple[int, int]:
        return _span(self.src_offset, self.sizes, self.src_strides)

    def dst_span(self) -> tuple[int, int]:
        return _span(self.dst_offset, self.sizes, self.dst_strides)


@stored_init
@dataclasses.dataclass(frozen=True)
class Copy(_Walk):
    """``dst[do + sum(d*ds)] = f(src[so + sum(m(d)*ss)])`` over ``sizes``: ``m`` the axis's ``AxisMap`` (the identity
    where ``maps`` is or has None), ``f`` converting ``src_type`` to ``dst_type`` (DataType values), applying ``x *
    scale + bias`` first where ``scale_bias`` is set (float types: float16 and float32 compute in float32, float64 in
    float64). ``src``/``dst`` index the plan's inputs and outputs."""
    maps: tuple[AxisMap | None, ...] | None = None
    scale_bias: tuple[float, float] | None = None

    def src_span(self) -> tuple[int, int]:
        extent = tuple(m.size if m is not None else s
                       for s, m in zip(self.sizes, self.maps or (None,) * len(self.sizes)))
        return _span(self.src_offset, extent, self.src_strides)


@stored_init
@dataclasses.dataclass(frozen=True)
class Fill(_Sized):
    """``dst[do + sum(d*ds)] = value`` over ``sizes`` (a Python int or float of the destination's type)."""
    dst: int
    sizes: tuple[int, ...]
    dst_offset: int
    dst_strides: tuple[int, ...]
    value: int | float

    def dst_span(self) -> tuple[int, int]:
        return _span(self.dst_offset, self.sizes, self.dst_strides)


#: ``IndexAxis.mode``: the index value is the coordinate (``INDEX_POSITION``), or a length L along the pass's axis
#: ``axis`` whose first L coordinates are read reversed (``INDEX_REVERSE_LENGTH``: REVERSE_SUBSEQUENCES).
INDEX_POSITION, INDEX_REVERSE_LENGTH = 0, 1
#: ``IndexAxis.out_of_range``: a coordinate outside ``[0, bound)`` is clamped to the nearest edge (``INDEX_CLAMP``), or
#: the element is not written (``INDEX_SKIP``: ONE_HOT's all-off rows).
INDEX_CLAMP, INDEX_SKIP = 0, 1


@dataclasses.dataclass(frozen=True)
class IndexAxis:
    """One data coordinate read from an index tensor: at each position d of the pass's index space, ``v =
    indices[index_offset + sum(d*index_strides)]`` (input slot ``index``, INT32/INT64/UINT32/UINT64 as the plan's
    ``in_types`` say) gives a coordinate c in ``[0, bound)``, moving the data offset by ``c * stride``:

    * ``INDEX_POSITION``: c = v, a negative v of a signed type counting from the end (``v + bound``); still outside
      ``[0, bound)``: ``INDEX_CLAMP`` clamps to ``[0, bound - 1]``, ``INDEX_SKIP`` drops the element (a ``Gather`` never
      skips).
    * ``INDEX_REVERSE_LENGTH``: L = min(v, bound) (lengths are unsigned); with e the pass coordinate along ``axis``, c =
      L - 1 - e where e < L, else e.

    Values compare exactly whatever their type (huge unsigned values do not wrap), so no index value moves an access
    outside ``[0, bound)``."""
    index: int
    index_offset: int
    index_strides: tuple[int, ...]     # signed, elements, one per pass dimension
    stride: int                        # data elements per unit of the coordinate, signed
    bound: int                         # >= 1
    mode: int = INDEX_POSITION
    out_of_range: int = INDEX_CLAMP
    axis: int = 0                      # INDEX_REVERSE_LENGTH: the pass dimension reversed


def _indexed_span(offset, sizes, strides, indices) -> tuple[int, int]:
    """``_span`` widened by the lowest and highest data offset each coordinate may add."""
    lo, hi = _span(offset, sizes, strides)
    for ix in indices:
        far = (ix.bound - 1) * ix.stride
        lo, hi = lo + min(0, far), hi + max(0, far)
    return lo, hi


@dataclasses.dataclass(frozen=True)
class _IndexedPass(_Walk):
    """``Gather`` and ``Scatter``: the ``indices`` add to one side's walk."""
    indices: tuple[IndexAxis, ...]


@dataclasses.dataclass(frozen=True)
class Gather(_IndexedPass):
    """``dst[do + sum(d*ds)] = src[so + sum(d*ss) + sum_k c_k(d) * stride_k]`` over ``sizes``, each c_k an
    ``IndexAxis`` of ``indices`` (``src_strides`` 0 along the dimensions an index stands for); one type in and out."""
    #: Where set, a position whose source element a later position (row-major order of ``sizes``) also reads gets 0:
    #: the adjoint of a last-write-wins scatter for its updates (a repeated index's overwritten updates get no
    #: gradient).
    last_only: bool = False

    def src_span(self) -> tuple[int, int]:
        return _indexed_span(self.src_offset, self.sizes, self.src_strides, self.indices)


@dataclasses.dataclass(frozen=True)
class Scatter(_IndexedPass):
    """``dst[do + sum(d*ds) + sum_k c_k(d) * stride_k] = src[so + sum(d*ss)]`` over ``sizes`` (the source's index
    space), each c_k an ``IndexAxis``; where an ``INDEX_SKIP`` coordinate is out of range nothing is written for d.
    Where several d reach one destination element the last in row-major order of ``sizes`` wins (``accumulate``
    False), or every one is added in that order, in the element type (``accumulate`` True: integers wrap). The
    destination's other elements keep what earlier passes wrote. With ``value`` set, that constant (of the
    destination's type) is written instead of the source, which is not read: a gradient's zeroed positions."""
    accumulate: bool = False
    value: int | float | None = None

    def dst_span(self) -> tuple[int, int]:
        return _indexed_span(self.dst_offset, self.sizes, self.dst_strides, self.indices)


@dataclasses.dataclass(frozen=True)
class _TunedPass:
    """A tuned pass: its parameter block ``plan`` (offsets relative to the slots' bound ranges) from input slot ``src``
    to output slot ``dst``."""
    src: int
    dst: int
    plan: object

    @property
    def count(self) -> int:
        return self.plan.out_count

    def src_span(self) -> tuple[int, int]:
        return self.plan.in_span

    def dst_span(self) -> tuple[int, int]:
        return self.plan.out_span


@stored_init
@dataclasses.dataclass(frozen=True)
class Windows(_TunedPass):
    """UNFOLD's tuned pass, windows into columns: ``plan`` an ``UnfoldPlan``."""
    plan: UnfoldPlan


@stored_init
@dataclasses.dataclass(frozen=True)
class WindowSums(_TunedPass):
    """FOLD's tuned pass, windowed sums (a gather: no atomics, one summation
    order): ``plan`` a ``FoldPlan``."""
    plan: FoldPlan


@stored_init
@dataclasses.dataclass(frozen=True)
class SliceScatter(_TunedPass):
    """SLICE_GRAD's one-write scatter: ``plan`` a ``ScatterPlan`` (every
    destination element written once, the source's value or zero)."""
    plan: ScatterPlan


#: The pass kinds that read a source slot (every kind but ``Fill``).
READING_PASSES = (Copy, Gather, Scatter, Windows, WindowSums, SliceScatter)


@stored_init
@dataclasses.dataclass(frozen=True)
class MovePlan:
    """The move program: ``in_types``/``out_types`` (DataType values of each input and output) and the passes, run in
    order; every output element is written by some pass (the lowerings guarantee it, the tests check it)."""
    in_types: tuple[int, ...]
    out_types: tuple[int, ...]
    passes: tuple
    #: ``(mode, fill value or None, start, end)`` where the program is exactly PADDING/PADDING1's (``ops._move.
    #: pad_passes``: the interior copy, then per axis its start and end slabs; mode 0 CONSTANT), for backends that run
    #: it as one pass over the output. Set only by ``padded``: a plan made otherwise (``dataclasses.replace`` of a
    #: padded one included) has None and runs pass by pass.
    pad: tuple | None = dataclasses.field(default=None, init=False, compare=False, repr=False)

    @classmethod
    def padded(cls, in_types, out_types, passes, pad) -> "MovePlan":
        """A plan whose ``passes`` are exactly the padding program ``pad`` names (unchecked: its lowering's word)."""
        plan = cls(tuple(in_types), tuple(out_types), tuple(passes))
        object.__setattr__(plan, "pad", (int(pad[0]), pad[1], tuple(pad[2]), tuple(pad[3])))
        return plan

    @classmethod
    def of(cls, kernel_plan) -> "MovePlan":
        """The one-pass program of a tuned pass's parameter block (``CopyPlan``, ``UnfoldPlan``, ``FoldPlan`` or
        ``ScatterPlan``), its slots typed as unsigned words of the block's element size: the inverse of
        ``kernel_plan``. Made once per block (backends key their launches by the program's identity)."""
        done = kernel_plan.__dict__.get("_program")
        if done is None:
            t = _WORDS[kernel_plan.element_size]
            kind = _TUNED[type(kernel_plan)]
            step = (Copy(0, 0, kernel_plan.sizes, kernel_plan.in_offset, kernel_plan.in_strides,
                         kernel_plan.out_offset, kernel_plan.out_strides) if kind is Copy else kind(0, 0, kernel_plan))
            done = cls((t,), (t,), (step,))
            object.__setattr__(done, "_kernel_plan", kernel_plan)
            object.__setattr__(kernel_plan, "_program", done)
        return done

    def kernel_plan(self):
        """The tuned kernel's parameter block where the program is one tuned pass: a plain ``Copy`` (no maps, conversion
        or scale/bias: SLICE's and SLICE1's form) as a ``CopyPlan``, a ``Windows``, ``WindowSums`` or ``SliceScatter``
        pass as its ``plan``; else None. Computed once per plan (backends key launches by the block's identity)."""
        d = self.__dict__
        done = d.get("_kernel_plan", self)
        if done is self:
            done = None
            if len(self.passes) == 1:
                p = self.passes[0]
                if type(p) is not Copy:
                    done = getattr(p, "plan", None)
                elif p.scale_bias is None and (p.maps is None or not any(p.maps)) and \
                        self.in_types[p.src] == self.out_types[p.dst]:
                    done = CopyPlan(_SIZES[self.in_types[p.src]], p.sizes, p.src_offset, p.src_strides,
                                    p.dst_offset, p.dst_strides)
            d["_kernel_plan"] = done            # (frozen: stored as object.__setattr__ would)
        return done

    def in_spans(self) -> list[tuple[int, int] | None]:
        spans: list = [None] * len(self.in_types)
        for p in self.passes:
            if isinstance(p, READING_PASSES) and p.count:
                if getattr(p, "value", None) is None:
                    spans[p.src] = _union(spans[p.src], p.src_span())
                for ix in getattr(p, "indices", ()):        # the index tensors' elements read
                    spans[ix.index] = _union(spans[ix.index], _span(ix.index_offset, p.sizes, ix.index_strides))
        return spans

    def out_spans(self) -> list[tuple[int, int] | None]:
        spans: list = [None] * len(self.out_types)
        for p in self.passes:
            if p.count:
                spans[p.dst] = _union(spans[p.dst], p.dst_span())
        return spans


#: The element size of each element type's DataType value.
_SIZES = {int(t): t.size for t in ELEMENT_TYPES}


def _union(a, b):
    return b if a is None else (min(a[0], b[0]), max(a[1], b[1]))


def _span(offset: int, sizes, strides) -> tuple[int, int]:
    """Lowest and highest element index an index space of ``sizes`` with
    signed ``strides`` from ``offset`` touches."""
    lo = offset + sum((s - 1) * t for s, t in zip(sizes, strides) if t < 0)
    hi = offset + sum((s - 1) * t for s, t in zip(sizes, strides) if t > 0)
    return lo, hi


#: The tuned passes by their parameter block's class (``MovePlan.of``), and the unsigned word type (a DataType value)
#: of each element size.
_TUNED = {CopyPlan: Copy, UnfoldPlan: Windows, FoldPlan: WindowSums, ScatterPlan: SliceScatter}
_WORDS = {1: 5, 2: 4, 4: 3, 8: 10}     # UINT8, UINT16, UINT32, UINT64
