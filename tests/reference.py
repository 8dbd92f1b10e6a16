"""Independent reference: the pages' formulas written as plain loops over
output coordinates. Shares no code with opendml (only NumPy containers)."""
import itertools
import math

import numpy as np


def read_elements(raw: bytes, dtype, sizes, strides):
    """The logical elements of a tensor stored in ``raw`` (byte string)."""
    dtype = np.dtype(dtype)
    flat = np.frombuffer(raw, dtype=dtype, count=len(raw) // dtype.itemsize)
    if strides is None:
        strides, step = [], 1
        for s in reversed(sizes):
            strides.insert(0, step)
            step *= s
    out = np.empty(sizes, dtype=dtype)
    for c in itertools.product(*(range(s) for s in sizes)):
        out[c] = flat[sum(i * t for i, t in zip(c, strides))]
    return out


def slice_(x, offsets, sizes, strides):
    out = np.empty(sizes, dtype=x.dtype)
    for c in itertools.product(*(range(s) for s in sizes)):
        out[c] = x[tuple(o + t * i for o, t, i in zip(offsets, strides, c))]
    return out


def slice1(x, offsets, window_sizes, window_strides, out_sizes):
    start = [o + (w - 1 if t < 0 else 0) for o, w, t in zip(offsets, window_sizes, window_strides)]
    out = np.empty(out_sizes, dtype=x.dtype)
    for c in itertools.product(*(range(s) for s in out_sizes)):
        out[c] = x[tuple(s + t * i for s, t, i in zip(start, window_strides, c))]
    return out


def unfold(x, window, strides, dilations, start_pad, end_pad):
    n, c, *spatial = x.shape
    blocks = [(s + a + b - d * (w - 1) - 1) // st + 1
              for s, w, st, d, a, b in zip(spatial, window, strides, dilations, start_pad, end_pad)]
    K = math.prod(window)
    out = np.zeros((n, c * K, math.prod(blocks)), dtype=x.dtype)
    for ni, ci in itertools.product(range(n), range(c)):
        for kf, k in enumerate(itertools.product(*(range(w) for w in window))):
            for bf, b in enumerate(itertools.product(*(range(v) for v in blocks))):
                pos = [bi * st + ki * d - a for bi, st, ki, d, a in zip(b, strides, k, dilations, start_pad)]
                if all(0 <= p < s for p, s in zip(pos, spatial)):
                    out[ni, ci * K + kf, bf] = x[(ni, ci, *pos)]
    return out
