"""Independent reference for the index-driven operators: each page's
pseudocode written as plain Python loops over coordinates, with opendml's
documented rules for what the pages leave open (an out-of-range gather or
scatter index clamped into its dimension after a negative one of a signed
type counted from the end; repeated scatter indices: the last write in
row-major order of the indices wins; ONE_HOT: an index outside [-depth,
depth) gives an all-off row; REVERSE_SUBSEQUENCES: lengths clamped to the
axis). Shares no code with opendml (only NumPy containers); index values
are read as Python ints, so no value wraps."""
import itertools

import numpy as np


def _coord(v, n, signed):
    v = int(v)
    if signed and v < 0:
        v += n
    return min(max(v, 0), n - 1)


def _all(shape):
    return itertools.product(*(range(s) for s in shape))


def gather(x, idx, axis):
    signed = idx.dtype.kind == "i"
    n = x.shape[axis]
    out = np.empty(x.shape[:axis] + idx.shape + x.shape[axis + 1:], x.dtype)
    k = idx.ndim
    for c in _all(out.shape):
        pre, mid, post = c[:axis], c[axis:axis + k], c[axis + k:]
        out[c] = x[pre + (_coord(idx[mid], n, signed),) + post]
    return out


def gather_elements(x, idx, axis):
    signed = idx.dtype.kind == "i"
    out = np.empty(idx.shape, x.dtype)
    for c in _all(idx.shape):
        src = list(c)
        src[axis] = _coord(idx[c], x.shape[axis], signed)
        out[c] = x[tuple(src)]
    return out


def gather_nd(x, idx, b=0):
    signed = idx.dtype.kind == "i"
    q = idx.shape[-1]
    out = np.empty(idx.shape[:-1] + x.shape[b + q:], x.dtype)
    lead = idx.ndim - 1
    for c in _all(out.shape):
        j, t = c[:lead], c[lead:]
        tup = tuple(_coord(idx[j + (e,)], x.shape[b + e], signed) for e in range(q))
        out[c] = x[j[:b] + tup + t]
    return out


def scatter_elements(x, idx, upd, axis):
    signed = idx.dtype.kind == "i"
    out = x.copy()
    for c in _all(idx.shape):                 # row-major: a later write replaces an earlier one
        dst = list(c)
        dst[axis] = _coord(idx[c], x.shape[axis], signed)
        out[tuple(dst)] = upd[c]
    return out


def scatter_nd(x, idx, upd):
    signed = idx.dtype.kind == "i"
    q = idx.shape[-1]
    out = x.copy()
    lead = idx.ndim - 1
    for c in _all(upd.shape):
        j, t = c[:lead], c[lead:]
        tup = tuple(_coord(idx[j + (e,)], x.shape[e], signed) for e in range(q))
        out[tup + t] = upd[c]
    return out


def one_hot(idx, depth, off, on, axis, dtype):
    signed = idx.dtype.kind == "i"
    shape = idx.shape[:axis] + (depth,) + idx.shape[axis:]
    out = np.full(shape, off, dtype)
    for c in _all(idx.shape):
        v = int(idx[c])
        if signed and v < 0:
            v += depth
        if 0 <= v < depth:
            out[c[:axis] + (v,) + c[axis:]] = on
    return out


def reverse_subsequences(x, lengths, axis):
    """``lengths`` of x's shape with 1 along ``axis``."""
    out = np.empty_like(x)
    n = x.shape[axis]
    for c in _all(x.shape):
        lc = list(c)
        lc[axis] = 0
        length = min(int(lengths[tuple(lc)]), n)
        e = c[axis]
        src = list(c)
        src[axis] = length - 1 - e if e < length else e
        out[c] = x[tuple(src)]
    return out


def gather_adjoint(x_shape, idx, g, axis):
    """The gradient of ``gather`` for x: every output gradient added at the
    position it was read from, in row-major order (sums in g's type)."""
    signed = idx.dtype.kind == "i"
    out = np.zeros(x_shape, g.dtype)
    k = idx.ndim
    for c in _all(g.shape):
        pre, mid, post = c[:axis], c[axis:axis + k], c[axis + k:]
        out[pre + (_coord(idx[mid], x_shape[axis], signed),) + post] += g[c]
    return out
