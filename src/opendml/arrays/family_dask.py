"""Dask arrays for the data-movement family: lazy, block by block, generic
over what each operator module declares (no branch per operator).

The call is validated on the whole arrays' shapes and dtypes when the graph
is built (opendml's errors, before anything is computed). The operator's
``chunking()`` says which input axes a block-wise run needs in one chunk
(PADDING's padded axes, JOIN's and SPLIT's ``Axis``, TILE's repeated axes,
the channels of SPACE_TO_DEPTH/DEPTH_TO_SPACE) or cut at multiples of a size
(the spatial axes of SPACE_TO_DEPTH, at multiples of ``BlockSize``); the
inputs are rechunked so (other axes keep their chunks; several inputs take
the first one's chunks there), and one task per block runs the same call on
that block with opendml's in-memory function: IDENTITY and CAST element-wise
on the chunks as they are. The output's chunks follow from the operator's
own shape rule applied to the blocks. Every result equals the in-memory call
on the whole arrays byte for byte. SPLIT's outputs share one task per block.
"""
from __future__ import annotations

import math
import operator

import dask.array as da
import numpy as np
from dask.array.utils import meta_from_array
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

from ..model.errors import ValidationError
from . import family

__all__ = ["run"]


def _aligned(chunks: tuple, m: int) -> tuple:
    """``chunks`` with every boundary moved down to a multiple of ``m``
    (the total is one)."""
    total = sum(chunks)
    cuts, at = [], 0
    for c in chunks[:-1]:
        at += c
        cut = at - at % m
        if cut > (cuts[-1] if cuts else 0):
            cuts.append(cut)
    edges = [0, *cuts, total]
    return tuple(b - a for a, b in zip(edges, edges[1:]))


def _run_block(call, index, *blocks):
    outs = family.run_list(call, blocks)
    return outs if index is None else outs[index]


def run(call, arrays) -> list:
    for i, x in enumerate(arrays):
        if any(math.isnan(c) for axis in x.chunks for c in axis):
            raise ValidationError(f"{call.name}: the chunk sizes of arrays[{i}] are unknown (NaN); call "
                                  f"x.compute_chunk_sizes() first")
    dtypes = [np.dtype(x.dtype) for x in arrays]
    desc = call.describe_arrays(dtypes, [x.shape for x in arrays])
    rules = desc.chunking() if hasattr(desc, "chunking") else {k: 0 for k in range(len(arrays[0].shape))}
    first = arrays[0]
    chunks = []
    for k, c in enumerate(first.chunks):
        rule = rules.get(k)
        chunks.append(c if rule is None else (sum(c),) if rule == 0 else _aligned(c, rule))
    inputs = []
    for x in arrays:
        want = tuple((x.shape[k],) if rules.get(k) == 0 else c for k, c in enumerate(chunks))
        inputs.append(x if x.chunks == want else x.rechunk(want))
    grid = [len(c) for c in inputs[0].chunks]

    def block_desc(index):
        shapes = [tuple(x.chunks[k][i] for k, i in enumerate(index)) for x in inputs]
        return call.describe_arrays(dtypes, shapes)

    # The output's chunks: the operator's shape rule on the blocks along each axis.
    n_out = len(desc.outputs)
    out_chunks = [[[] for _ in grid] for _ in range(n_out)]
    for k, n in enumerate(grid):
        for i in range(n):
            d = block_desc(tuple(i if j == k else 0 for j in range(len(grid))))
            for o, t in enumerate(d.outputs):
                out_chunks[o][k].append(t.sizes[k])
    token = tokenize(call.name, desc, *inputs)
    raw = f"opendml-{call.name}-{token}"
    names = [raw] if n_out == 1 and not call.multi else [f"opendml-{call.name}-{o}-{token}" for o in range(n_out)]
    tasks: dict = {}
    picks: list = [{} for _ in names]
    for index in np.ndindex(*grid):
        keys = [(x.name, *index) for x in inputs]
        if names[0] == raw:
            tasks[(raw, *index)] = (_run_block, call, 0, *keys)
        else:
            tasks[(raw, *index)] = (_run_block, call, None, *keys)
            for o, name in enumerate(names):
                picks[o][(name, *index)] = (operator.getitem, (raw, *index), o)
    graph = HighLevelGraph.from_collections(raw, tasks, dependencies=inputs)
    outs = []
    for o, name in enumerate(names):
        g = graph if name == raw else HighLevelGraph({**graph.layers, name: MaterializedLayer(picks[o])},
                                                     {**graph.dependencies, name: {raw}})
        t = desc.outputs[o]
        meta = meta_from_array(first._meta, len(t.sizes), t.data_type.numpy_dtype)
        outs.append(da.Array(g, name, tuple(tuple(c) for c in out_chunks[o]), meta=meta))
    return outs
