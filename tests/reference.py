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


def _accumulator(dtype):
    """(accumulate, finish) for FOLD's sums: float16 in float32 rounded once,
    float32/float64 in their own type, integers in Python ints wrapped to the
    type's width (two's complement)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        acc = np.float32 if dtype == np.float16 else dtype.type
        return (lambda total, v: acc(total + acc(v))), acc(0.0), (lambda total: dtype.type(total))
    bits = dtype.itemsize * 8

    def finish(total):
        total %= 1 << bits
        if dtype.kind == "i" and total >= 1 << (bits - 1):
            total -= 1 << bits
        return dtype.type(total)
    return (lambda total, v: total + int(v)), 0, finish


def fold(x, out_spatial, window, strides, dilations, start_pad, end_pad):
    """FOLD as its definition reads: each output element sums, in increasing
    row-major window index k, the input values whose block b puts window
    element k on it (b*stride + k*dilation - start_pad == p)."""
    n, rows, _ = x.shape[-3:]
    x = x.reshape(x.shape[-3:])
    K = math.prod(window)
    c = rows // K
    blocks = [(s + a + b - d * (w - 1) - 1) // st + 1
              for s, w, st, d, a, b in zip(out_spatial, window, strides, dilations, start_pad, end_pad)]
    add, zero, finish = _accumulator(x.dtype)
    out = np.empty((n, c, *out_spatial), dtype=x.dtype)
    windows = list(itertools.product(*(range(w) for w in window)))
    for ni, ci in itertools.product(range(n), range(c)):
        for p in itertools.product(*(range(s) for s in out_spatial)):
            total = zero
            for kf, k in enumerate(windows):
                b = []
                for pi, ki, st, d, a, nb in zip(p, k, strides, dilations, start_pad, blocks):
                    q = pi + a - ki * d
                    if q < 0 or q % st or q // st >= nb:
                        break
                    b.append(q // st)
                else:
                    bf = 0
                    for bi, nb in zip(b, blocks):
                        bf = bf * nb + bi
                    total = add(total, x[ni, ci * K + kf, bf])
            out[(ni, ci, *p)] = finish(total)
    return out


def slice_grad(g, out_sizes, offsets, window_sizes, window_strides):
    """SLICE_GRAD: zeros of ``out_sizes`` with g[c] written where SLICE1 reads
    its element c (start at the window's end for a negative stride)."""
    start = [o + (w - 1 if t < 0 else 0) for o, w, t in zip(offsets, window_sizes, window_strides)]
    out = np.zeros(out_sizes, dtype=g.dtype)
    for c in itertools.product(*(range(s) for s in g.shape)):
        out[tuple(s + t * i for s, t, i in zip(start, window_strides, c))] = g[c]
    return out


def as_program(kernel_plan):
    """A tuned pass's parameter block (``CopyPlan``, ``UnfoldPlan``,
    ``FoldPlan``, ``ScatterPlan``) as the one-pass move program the backends
    run (``MovePlan.of``: its slots typed as unsigned words of the block's
    element size)."""
    from opendml.plan import MovePlan
    return MovePlan.of(kernel_plan)


# -- plan executors: what a backend does with a FoldPlan or ScatterPlan, written
# plainly over element-sized words (the plans are duck-typed; nothing imported).

_FLOATS = {2: np.float16, 4: np.float32, 8: np.float64}
_INTS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def run_fold_plan(plan, src_words, dst_words):
    """Execute a FoldPlan: ``src_words``/``dst_words`` are 1-D arrays of
    element-sized unsigned words whose element 0 is the plan's origin."""
    es = plan.element_size
    dtype = np.dtype(_FLOATS[es] if plan.sum_kind == 1 else _INTS[es])
    src = np.asarray(src_words).view(dtype)
    dst = np.asarray(dst_words).view(dtype)
    add, zero, finish = _accumulator(dtype)
    windows = list(itertools.product(*(range(w) for w in plan.window)))
    K = len(windows)
    sn, sr, sc = plan.in_strides
    on, oc, *osp = plan.out_strides
    for ni, ci in itertools.product(range(plan.batch), range(plan.channels)):
        for p in itertools.product(*(range(s) for s in plan.spatial)):
            total = zero
            for kf, k in enumerate(windows):
                bf = 0
                for pi, ki, st, d, a, nb in zip(p, k, plan.strides, plan.dilations, plan.start_padding,
                                                plan.blocks):
                    q = pi + a - ki * d
                    if q < 0 or q % st or q // st >= nb:
                        break
                    bf = bf * nb + q // st
                else:
                    total = add(total, src[plan.in_offset + ni * sn + (ci * K + kf) * sr + bf * sc])
            dst[plan.out_offset + ni * on + ci * oc + sum(i * t for i, t in zip(p, osp))] = finish(total)


def run_scatter_plan(plan, src_words, dst_words):
    """Execute a ScatterPlan over element-sized words (origin at element 0)."""
    for p in itertools.product(*(range(s) for s in plan.sizes)):
        o = plan.out_offset + sum(i * t for i, t in zip(p, plan.out_strides))
        idx = [(pi - f) // st for pi, f, st in zip(p, plan.first, plan.step)]
        if all(pi >= f and (pi - f) % st == 0 and i < n
               for pi, f, st, i, n in zip(p, plan.first, plan.step, idx, plan.taken)):
            dst_words[o] = src_words[plan.in_offset + sum(i * t for i, t in zip(idx, plan.in_strides))]
        else:
            dst_words[o] = 0
