"""What the backends execute, in elements, already validated.

Four plan kinds cover the five operators:

* ``CopyPlan``: ``out[o0 + sum(i*os)] = in[i0 + sum(i*is)]`` over ``sizes``.
  SLICE and SLICE1 lower to it (SLICE1's negative window strides become
  negative input strides with the origin at the window's end).
* ``UnfoldPlan``: the windowed gather of UNFOLD with zero fill outside the
  input.
* ``FoldPlan``: FOLD's windowed sum, as a gather (no atomics, one summation
  order on every backend).
* ``ScatterPlan``: SLICE_GRAD, every output element written once (input value
  or zero).

Input offsets and strides are relative to the lowest input element the plan
may touch being at or after element 0 of the bound input range; ``in_span``
says how many elements from there the plan reads, so a backend can check once
that a plan stays inside what was bound. Dimensions are canonicalised here,
once, for every backend: size-1 dimensions dropped, dimensions ordered by
output stride, neighbours that walk memory as one merged.
"""
from __future__ import annotations

import dataclasses
import math


@dataclasses.dataclass(frozen=True)
class CopyPlan:
    element_size: int
    sizes: tuple[int, ...]
    in_offset: int
    in_strides: tuple[int, ...]      # signed, elements
    out_offset: int
    out_strides: tuple[int, ...]     # non-negative, elements

    @property
    def count(self) -> int:
        return math.prod(self.sizes)

    @property
    def in_span(self) -> tuple[int, int]:
        """Lowest and highest input element index the plan reads."""
        return _span(self.in_offset, self.sizes, self.in_strides)

    @property
    def out_span(self) -> tuple[int, int]:
        return self.out_offset, self.out_offset + sum((s - 1) * t for s, t in zip(self.sizes, self.out_strides))

    def canonical(self) -> "CopyPlan":
        """Drop size-1 dimensions, order by output stride (largest first) so the
        innermost dimension is the one written most densely, and merge neighbours.
        Computed once per plan."""
        done = self.__dict__.get("_canonical")
        if done is not None:
            return done
        done = self._canonical_form()
        object.__setattr__(self, "_canonical", done)
        return done

    def _canonical_form(self) -> "CopyPlan":
        dims = [(s, i, o) for s, i, o in zip(self.sizes, self.in_strides, self.out_strides) if s != 1]
        dims.sort(key=lambda d: (d[2], abs(d[1])), reverse=True)
        merged: list[tuple[int, int, int]] = []
        for s, i, o in dims:
            if merged:
                ps, pi, po = merged[-1]
                if pi == i * s and po == o * s:
                    merged[-1] = (ps * s, i, o)
                    continue
            merged.append((s, i, o))
        if not merged:
            merged = [(1, 1, 1)]
        s, i, o = zip(*merged)
        return dataclasses.replace(self, sizes=tuple(s), in_strides=tuple(i), out_strides=tuple(o))


@dataclasses.dataclass(frozen=True)
class UnfoldPlan:
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
    blocks: tuple[int, ...]
    out_offset: int
    out_strides: tuple[int, int, int]  # (n, row, column), elements

    @property
    def rows(self) -> int:
        return self.channels * math.prod(self.window)

    @property
    def columns(self) -> int:
        return math.prod(self.blocks)

    @property
    def out_count(self) -> int:
        return self.batch * self.rows * self.columns

    @property
    def in_span(self) -> tuple[int, int]:
        return _span(self.in_offset, (self.batch, self.channels, *self.spatial), self.in_strides)

    @property
    def out_span(self) -> tuple[int, int]:
        sizes = (self.batch, self.rows, self.columns)
        return self.out_offset, self.out_offset + sum((s - 1) * t for s, t in zip(sizes, self.out_strides))

    def valid_block_range(self, d: int, k: int) -> tuple[int, int]:
        """Blocks b of spatial dimension d whose window element k reads inside
        the input: ``0 <= b*stride + k*dilation - start_padding < size``."""
        shift = k * self.dilations[d] - self.start_padding[d]
        st = self.strides[d]
        lo = min(self.blocks[d], (-shift + st - 1) // st if shift < 0 else 0)
        last = self.spatial[d] - 1 - shift          # highest b*st allowed
        hi = min(self.blocks[d], last // st + 1) if last >= 0 else 0
        return lo, max(lo, hi)


@dataclasses.dataclass(frozen=True)
class FoldPlan:
    """FOLD (col2im), computed as a gather: ``out[n, c, p] = +0``, then ``+=
    in[n, c*K + k, b]`` for every window element k, in increasing row-major
    order, whose block b satisfies ``b*stride + k*dilation - start_padding == p``
    in every spatial dimension. float16 sums in float32 and rounds once;
    integers wrap (two's complement); float32/float64 sum in their own type.
    ``sum_kind`` is ``SUM_INTEGER`` or ``SUM_FLOAT`` (see runtime/params.h)."""

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
    def rows(self) -> int:
        return self.channels * math.prod(self.window)

    @property
    def columns(self) -> int:
        return math.prod(self.blocks)

    @property
    def out_count(self) -> int:
        return self.batch * self.channels * math.prod(self.spatial)

    @property
    def in_span(self) -> tuple[int, int]:
        return _span(self.in_offset, (self.batch, self.rows, self.columns), self.in_strides)

    @property
    def out_span(self) -> tuple[int, int]:
        return _span(self.out_offset, (self.batch, self.channels, *self.spatial), self.out_strides)


@dataclasses.dataclass(frozen=True)
class ScatterPlan:
    """SLICE_GRAD: ``out[p] = in[i]`` where ``p == first + i*step`` (every
    dimension, ``0 <= i < taken``), else 0; each output element is written once.
    Input strides are signed (a SLICE1 window walked backwards)."""

    element_size: int
    sizes: tuple[int, ...]            # output sizes
    out_offset: int
    out_strides: tuple[int, ...]      # non-negative, elements
    first: tuple[int, ...]
    step: tuple[int, ...]             # >= 1
    taken: tuple[int, ...]            # input sizes
    in_offset: int
    in_strides: tuple[int, ...]       # signed, elements

    @property
    def count(self) -> int:
        return math.prod(self.sizes)

    @property
    def in_span(self) -> tuple[int, int]:
        return _span(self.in_offset, self.taken, self.in_strides)

    @property
    def out_span(self) -> tuple[int, int]:
        return _span(self.out_offset, self.sizes, self.out_strides)


def _span(offset: int, sizes, strides) -> tuple[int, int]:
    """Lowest and highest element index an index space of ``sizes`` with
    signed ``strides`` from ``offset`` touches."""
    lo = offset + sum((s - 1) * t for s, t in zip(sizes, strides) if t < 0)
    hi = offset + sum((s - 1) * t for s, t in zip(sizes, strides) if t > 0)
    return lo, hi
