"""NumPy/Python emulations of opendml's CUDA kernels, for tests that run on
any machine: each reads its parameter block through the ctypes structure of
``opendml.runtime.params`` (the declaration ``params.h`` mirrors), by field
name as the kernel does, and repeats the kernel's index arithmetic (C integer
division, the same loops and orders). Beside them, plain vectorised NumPy
references of the four plan kinds, written from ``plan.py``'s docstrings.

Words: every buffer is a 1-D NumPy array of unsigned element-sized words whose
element 0 is the plan's origin; 16-byte words are ``(n, 16)`` uint8 arrays.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from opendml.runtime import params as P

WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
FLOATS = {2: np.float16, 4: np.float32, 8: np.float64}


def cdiv(a: int, b: int) -> int:
    """C's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def cmod(a: int, b: int) -> int:
    """C's remainder (sign of the dividend)."""
    return a - b * cdiv(a, b)


# -- references ------------------------------------------------------------------
def copy_reference(plan, src, dst) -> None:
    p = plan.canonical()
    item = src.itemsize
    s = as_strided(src[p.in_offset:], shape=p.sizes, strides=tuple(t * item for t in p.in_strides))
    d = as_strided(dst[p.out_offset:], shape=p.sizes, strides=tuple(t * dst.itemsize for t in p.out_strides))
    np.copyto(d, s)


def unfold_reference(plan, src, dst) -> None:
    """UnfoldPlan over words: one strided copy per window element, zeros where
    the window element reads padding."""
    D = len(plan.window)
    K = math.prod(plan.window)
    on, orow, ocol = plan.out_strides
    n_s, c_s, *sp = plan.in_strides
    nn, cc = np.meshgrid(np.arange(plan.batch), np.arange(plan.channels), indexing="ij")
    nn, cc = nn[..., None], cc[..., None]
    bgrid = np.array(list(itertools.product(*(range(b) for b in plan.blocks)))).reshape(-1, D)
    cols = np.arange(plan.columns)
    for kf, k in enumerate(itertools.product(*(range(w) for w in plan.window))):
        pos = bgrid * np.array(plan.strides) + np.array(k) * np.array(plan.dilations) - np.array(plan.start_padding)
        inside = np.all((pos >= 0) & (pos < np.array(plan.spatial)), axis=1)
        off = plan.in_offset + nn * n_s + cc * c_s + (np.where(inside[:, None], pos, 0) @ np.array(sp))[None, None]
        vals = np.where(inside[None, None], src[off], 0).astype(dst.dtype)
        dst[plan.out_offset + nn * on + (cc * K + kf) * orow + cols[None, None] * ocol] = vals


def fold_types(plan):
    """(value dtype, accumulator dtype) of a FoldPlan's sums."""
    es = plan.element_size
    if plan.sum_kind == P.SUM_FLOAT:
        v = np.dtype(FLOATS[es])
        return v, np.dtype(np.float32) if es == 2 else v
    return np.dtype(WORDS[es]), np.dtype(WORDS[es])


def fold_reference(plan, src_words, dst_words) -> None:
    """FoldPlan: out = +0, then += in[n, c*K + k, b] for k in increasing
    row-major order. For one k, b -> position is one-to-one, so adding a whole
    k at a time is the element-by-element order. float16 sums in float32 and
    rounds once (NumPy's astype: to nearest even); integers wrap."""
    vdt, adt = fold_types(plan)
    src = src_words.view(vdt)
    D = len(plan.window)
    K = math.prod(plan.window)
    N, C = plan.batch, plan.channels
    isn, isr, isc = plan.in_strides
    acc = np.zeros((N, C, *plan.spatial), adt)
    bst = [math.prod(plan.blocks[d + 1:]) for d in range(D)]
    with np.errstate(over="ignore", invalid="ignore"):
        for kf, k in enumerate(itertools.product(*(range(w) for w in plan.window))):
            bs, ps = [], []
            for d in range(D):
                b = np.arange(plan.blocks[d])
                p = b * plan.strides[d] + k[d] * plan.dilations[d] - plan.start_padding[d]
                keep = (p >= 0) & (p < plan.spatial[d])
                bs.append(b[keep])
                ps.append(p[keep])
            if any(len(b) == 0 for b in bs):
                continue
            bflat = sum(np.ix_(*bs)[d] * bst[d] for d in range(D))
            n = np.arange(N).reshape((N, 1) + (1,) * D)
            c = np.arange(C).reshape((1, C) + (1,) * D)
            vals = src[plan.in_offset + n * isn + (c * K + kf) * isr + bflat[None, None] * isc]
            ix = np.ix_(np.arange(N), np.arange(C), *ps)
            acc[ix] = acc[ix] + vals.astype(adt)
        out = acc.astype(vdt)
    osn, osc, *osp = plan.out_strides
    idx = plan.out_offset + sum(np.ix_(np.arange(N), np.arange(C), *(np.arange(s) for s in plan.spatial))[d] * t
                                for d, t in enumerate((osn, osc, *osp)))
    dst_words.view(vdt)[idx] = out


def scatter_reference(plan, src_words, dst_words) -> None:
    """ScatterPlan: zeros, then out[first + i*step] = in[i]."""
    R = len(plan.sizes)
    out = np.zeros(plan.sizes, dst_words.dtype)
    if all(t > 0 for t in plan.taken):
        ii = np.ix_(*(np.arange(t) for t in plan.taken))
        vals = src_words[plan.in_offset + sum(ii[d] * plan.in_strides[d] for d in range(R))]
        out[np.ix_(*(f + np.arange(t) * s for f, s, t in zip(plan.first, plan.step, plan.taken)))] = vals
    idx = plan.out_offset + sum(np.ix_(*(np.arange(s) for s in plan.sizes))[d] * plan.out_strides[d]
                                for d in range(R))
    dst_words[idx] = out


# -- the sums as the kernels do them -------------------------------------------------
class KernelSum:
    """FoldSum<T, FLT>: zero, load (word -> accumulator), add, store."""

    def __init__(self, es: int, flt: bool):
        self.es, self.flt = es, flt
        if flt:
            self.vdt = np.dtype(FLOATS[es])
            self.adt = np.float32 if es == 2 else self.vdt.type
        self.mask = (1 << (8 * (8 if es == 8 else 4))) - 1

    def zero(self):
        return self.adt(0.0) if self.flt else 0

    def load(self, word):
        if self.flt:
            return self.adt(np.array(word, WORDS[self.es]).view(self.vdt)[()])
        return int(word)

    def add(self, a, b):
        if self.flt:
            with np.errstate(over="ignore", invalid="ignore"):
                return self.adt(a + b)
        return (a + b) & self.mask

    def store(self, a):
        if self.flt:
            with np.errstate(over="ignore"):
                return np.array(a, self.adt).astype(self.vdt).view(WORDS[self.es])[()]
        return a & ((1 << (8 * self.es)) - 1)


# -- fold_gather ------------------------------------------------------------------
def inverse_mod(a: int, m: int) -> int:
    r0, r1, t0, t1 = m, a % m, 0, 1
    while r1 != 0:
        q = r0 // r1
        r0, r1 = r1, r0 - q * r1
        t0, t1 = t1, t0 - q * t1
    return t0 + m if t0 < 0 else t0


def window_congruence(w):
    if w.stride == 1:
        return 1, 1, 0
    g = math.gcd(w.dilation, w.stride)
    step = w.stride // g
    return g, step, 0 if step == 1 else inverse_mod((w.dilation // g) % step, step)


def window_run(w, cg, x):
    """(first, block, count), as the kernel's window_run."""
    g, cstep, inv = cg
    q = x + w.start_padding
    dil, s = w.dilation, w.stride
    hi = min(w.window - 1, q if dil == 1 else q // dil)
    lo_num = q - (w.blocks - 1) * s
    lo = 0 if lo_num <= 0 else (lo_num if dil == 1 else (lo_num + dil - 1) // dil)
    if s == 1:
        first = lo
    else:
        res = q % s
        if g != 1 and res % g != 0:
            return 0, 0, 0
        k0 = 0 if cstep == 1 else ((res // g) % cstep) * inv % cstep
        first = lo + (k0 + cstep - lo % cstep) % cstep
    count = ((hi - first if cstep == 1 else (hi - first) // cstep) + 1) if first <= hi else 0
    rem = q - first * dil
    block = (rem if s == 1 else rem // s) if count else 0
    return first, block, count


def emulate_fold_gather(q: P.FoldParams, src, dst, V: int) -> None:
    """fold_gather<T, FLT, D, I, V>, one warp and lane at a time, with the
    kernel's batches of U steps (all loads of a batch, then its adds)."""
    U = 2 if V >= 4 else 8 // V
    D = q.dims
    S = KernelSum(q.element_size, q.sum_kind == P.SUM_FLOAT)
    dm = q.dim
    width = dm[D - 1].size
    runs = cdiv(width + 32 * V - 1, 32 * V)
    isr, isc = q.in_row_stride, q.in_column_stride
    kst, bst = [0] * D, [0] * D
    ks = bs = 1
    for d in range(D - 1, -1, -1):
        kst[d], bst[d] = ks * isr, bs * isc
        ks *= dm[d].window
        bs *= dm[d].blocks

    def coef_of(d, cg):
        w = dm[d]
        return cg[1] * kst[d] - (w.dilation if w.stride == 1 else cg[1] * w.dilation // w.stride) * bst[d]
    for warp in range(q.work_items):
        rest = warp // runs
        run = warp - rest * runs
        pos = [0] * D
        for d in range(D - 2, -1, -1):
            rest, pos[d] = divmod(rest, dm[d].size)
        n, c = divmod(rest, q.channels)
        base = q.in_offset + n * q.in_batch_stride + c * q.window_count * isr
        cnt, coef = [0] * D, [0] * D
        empty = False
        for d in range(D - 1):
            cg = window_congruence(dm[d])
            first, block, count = window_run(dm[d], cg, pos[d])
            base += first * kst[d] + block * bst[d]
            cnt[d], coef[d] = count, coef_of(d, cg)
            empty = empty or count == 0
        cgi = window_congruence(dm[D - 1])
        coef_in = coef_of(D - 1, cgi)
        out0 = q.out_offset + n * q.out_batch_stride + c * q.out_channel_stride
        out0 += sum(pos[d] * dm[d].image_stride for d in range(D - 1))
        for lane in range(32):
            x0 = run * 32 * V + lane
            addr, ncnt = [0] * V, [0] * V
            for j in range(V):
                x = x0 + 32 * j
                if x < width:
                    first, block, count = window_run(dm[D - 1], cgi, x)
                    ncnt[j] = count
                    addr[j] = base + first * kst[D - 1] + block * bst[D - 1]
            most = max(ncnt)
            acc = [S.zero() for _ in range(V)]
            more = not empty and most > 0
            ci = [0] * D
            off = i = 0
            while more:
                v, mask = {}, set()
                for u in range(U):
                    if not more:
                        continue
                    for j in range(V):
                        if i < ncnt[j]:
                            v[u, j] = src[addr[j] + off + i * coef_in]
                            mask.add((u, j))
                    i += 1
                    if i >= most:
                        i = 0
                        more = False
                        for e in range(D - 2, -1, -1):
                            off += coef[e]
                            ci[e] += 1
                            if ci[e] < cnt[e]:
                                more = True
                                break
                            off -= cnt[e] * coef[e]
                            ci[e] = 0
                for u in range(U):
                    for j in range(V):
                        if (u, j) in mask:
                            acc[j] = S.add(acc[j], S.load(v[u, j]))
            for j in range(V):
                x = x0 + 32 * j
                if x < width:
                    dst[out0 + x * dm[D - 1].image_stride] = S.store(acc[j])


# -- fold1d_tile --------------------------------------------------------------------
def emulate_fold1d_tile(q: P.FoldParams, src, dst, RC: int) -> None:
    """fold1d_tile<T, FLT, RC>, one CUDA block at a time: the staged tile and
    the accumulators are NumPy arrays indexed [residue, hop] (thread (rr, g)
    owns hops g + G*a); each j is one vectorised add."""
    MH, G = 32, 256 // RC
    NA = MH // G
    es, flt = q.element_size, q.sum_kind == P.SUM_FLOAT
    w = q.dim[0]
    s, dil, pad, width = w.stride, w.dilation, w.start_padding, w.size
    m_first = pad // s
    hops = (pad + width - 1) // s - m_first + 1
    mtiles, rtiles = cdiv(hops + MH - 1, MH), cdiv(s + RC - 1, RC)
    C, K, B = q.channels, q.window_count, q.block_count
    isr, isc = q.in_row_stride, q.in_column_stride
    reach = (w.window - 1) * dil
    if flt:
        vdt = np.dtype(FLOATS[es])
        adt = np.dtype(np.float32 if es == 2 else vdt)
    else:
        adt = np.dtype(np.uint64 if es == 8 else np.uint32)
    assert q.work_items == q.batch * C * mtiles * rtiles
    rows = np.arange(RC)[:, None]
    lanes = np.arange(MH)[None, :]
    for blk in range(q.work_items):
        t = blk
        rt = t % rtiles
        t //= rtiles
        mt = t % mtiles
        t //= mtiles
        n, c = t // C, t % C
        m0, r0 = m_first + mt * MH, rt * RC
        in0 = q.in_offset + n * q.in_batch_stride + c * K * isr
        J = (reach - r0) // s + 1 if reach >= r0 else 0
        acc = np.zeros((RC, MH), adt)
        for j in range(J):
            b = m0 + lanes - j
            kd = r0 + rows + j * s
            ok = (b >= 0) & (b < B) & (r0 + rows < s) & (kd <= reach) & (kd % dil == 0)
            addr = np.where(ok, in0 + (kd // dil) * isr + b * isc, 0)
            tile = np.where(ok, src[addr], 0).astype(src.dtype)
            vals = tile.view(vdt).astype(adt) if flt else tile.astype(adt)
            with np.errstate(over="ignore", invalid="ignore"):
                acc = acc + vals
        out0 = q.out_offset + n * q.out_batch_stride + c * q.out_channel_stride
        for tid in range(256):
            rr, g = tid % RC, tid // RC
            for a in range(NA):
                mm = g + G * a
                x = (m0 + mm) * s + r0 + rr - pad
                if r0 + rr < s and 0 <= x < width:
                    v = acc[rr, mm]
                    if flt:
                        with np.errstate(over="ignore"):
                            word = np.array(v, adt).astype(vdt).view(WORDS[es])[()]
                    else:
                        word = int(v) & ((1 << (8 * es)) - 1)
                    dst[out0 + x * w.image_stride] = word


# -- scatter ------------------------------------------------------------------------
def emulate_scatter(q: P.ScatterParams, src, dst, items: int, rev: int = 0) -> None:
    """scatter<W, D, REV, I, ITEMS>: every thread slot of the grid, vectorised.
    ``src``/``dst``: word arrays, or (n, 16) uint8 arrays for 16-byte words."""
    D = q.rank
    count = q.count
    grid = cdiv(count + 256 * items - 1, 256 * items)
    flat = (np.arange(grid)[:, None, None] * (256 * items) + np.arange(items)[None, :, None] * 256
            + np.arange(256)[None, None, :]).reshape(-1)
    ok = flat < count
    a = np.full(flat.shape, q.in_offset, np.int64)
    b = np.full(flat.shape, q.out_offset, np.int64)
    rest = flat.copy()
    for d in range(D - 1, -1, -1):
        if d > 0:
            qd = rest // q.sizes[d]
            x = rest - qd * q.sizes[d]
            rest = qd
        else:
            x = rest
        b += x * q.out_strides[d]
        rel = x - q.first[d]
        st = q.step[d]
        i = rel
        if st != 1:
            i = np.maximum(rel, 0) // st
            ok &= i * st == rel
        ok &= (rel >= 0) & (i < q.taken[d])
        a += i * q.in_strides[d]
    written = flat < count
    assert np.array_equal(np.sort(flat[written]), np.arange(count))  # every output word once
    vals = np.zeros((len(flat),) + src.shape[1:], src.dtype)
    vals[ok] = src[a[ok]]
    if rev:
        w = vals.shape[1]
        vals = vals.reshape(-1, w // rev, rev)[:, ::-1, :].reshape(-1, w)
    dst[b[written]] = vals[written]


# -- unfold_tile ----------------------------------------------------------------------
def emulate_unfold_tile(q: P.UnfoldParams, src, dst, vec: int = 0, dst_byte: int = 0, es: int = 0,
                        counts=None) -> None:
    """unfold_tile<T, D, vec> as the kernel reads its parameters, one box at a
    time in NumPy: stage the region (zeros outside the input), then write
    every box position for every window element from it. ``vec`` = 1: the
    16-byte stores as the kernel makes them (its own conditions, with the
    output at byte address ``dst_byte`` and ``es``-byte elements; each
    vector's region offsets by the kernel's carry arithmetic; every store
    asserted aligned and inside the box's run), the rest one by one.
    ``counts`` (an int array like dst): every write counted."""
    D = q.dims
    dm = q.dim
    C, K = q.channels, q.window_count
    for blk in range(q.work_items):
        t, b0, tb, ext = blk, [0] * D, [0] * D, [0] * D
        for d in reversed(range(D)):
            nt = dm[d].box_count
            b0[d], t = t % nt * dm[d].box, t // nt
            tb[d], ext[d] = min(dm[d].box, dm[d].blocks - b0[d]), dm[d].box_extent
        c, n = t % C, t // C
        pos = [b0[d] * dm[d].stride - dm[d].start_padding + np.arange(ext[d]) for d in range(D)]
        grids = np.meshgrid(*pos, indexing="ij")
        inside = np.logical_and.reduce([(g >= 0) & (g < dm[d].size) for d, g in enumerate(grids)])
        off = (q.in_offset + n * q.in_batch_stride + c * q.in_channel_stride
               + sum(g * dm[d].image_stride for d, g in enumerate(grids)))
        region = np.where(inside, src[np.where(inside, off, 0)], 0).reshape(-1)
        rs = [math.prod(ext[d + 1:]) for d in range(D)]
        ys = np.meshgrid(*[np.arange(v) for v in tb], indexing="ij")
        loc = sum(y * dm[d].stride * rs[d] for d, y in enumerate(ys)).reshape(-1)
        col = sum((b0[d] + y) * math.prod(dm[e].blocks for e in range(d + 1, D)) for d, y in enumerate(ys))
        col = col.reshape(-1)
        out0 = q.out_offset + n * q.out_batch_stride + c * K * q.out_row_stride
        koffs = [sum(k[d] * dm[d].dilation * rs[d] for d in range(D))
                 for k in itertools.product(*(range(dm[d].window) for d in range(D)))]
        first = 0
        if vec:
            V, orow = 16 // es, q.out_row_stride
            whole = q.out_column_stride == 1 and orow * es % 16 == 0
            col0 = b0[0]
            for d in range(1, D):
                whole = whole and tb[d] == dm[d].blocks
                col0 *= dm[d].blocks
            if whole and (dst_byte + (out0 + col0) * es) % 16 == 0:
                P_, G = len(loc), len(loc) // V
                sstep = [dm[d].stride * rs[d] for d in range(D)]
                for g in range(G):               # the kernel's arithmetic, step by step
                    y, rest, at = [0] * D, g * V, 0
                    for d in reversed(range(D)):
                        y[d], rest = rest % tb[d], rest // tb[d]
                        at += y[d] * sstep[d]
                    locs = []
                    for e in range(V):
                        locs.append(at)
                        if e + 1 < V:
                            at += sstep[D - 1]
                            for d in range(D - 1, 0, -1):
                                y[d] += 1
                                if y[d] < tb[d]:
                                    break
                                y[d] = 0
                                at += sstep[d - 1] - tb[d] * sstep[d]
                    assert locs == loc[g * V:(g + 1) * V].tolist()
                    for kflat, koff in enumerate(koffs):
                        o = out0 + col0 + g * V + kflat * orow
                        assert (dst_byte + o * es) % 16 == 0                       # an aligned 16-byte store
                        assert out0 + col0 + kflat * orow <= o and o + V <= out0 + col0 + P_ + kflat * orow
                        dst[o:o + V] = region[np.array(locs) + koff]
                        if counts is not None:
                            counts[o:o + V] += 1
                first = G * V
        for kflat, koff in enumerate(koffs):
            o = out0 + kflat * q.out_row_stride + col[first:] * q.out_column_stride
            dst[o] = region[loc[first:] + koff]
            if counts is not None:
                np.add.at(counts, o, 1)


# -- random plans ---------------------------------------------------------------------
DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def random_layout(rng, sizes, signed: bool):
    """(origin offset, strides) of a tensor of ``sizes`` stored in a random
    axis order, with gaps between some axes and a stride of 2 on some, and
    (``signed``) some axes walked backwards; the lowest element index is a
    small random margin >= 0."""
    strides = [0] * len(sizes)
    step = 1
    for ax in reversed(rng.permutation(len(sizes)).tolist()):
        if rng.random() < 0.25:
            step *= 2
        strides[ax] = step
        step *= sizes[ax] + int(rng.integers(0, 2))
    if signed:
        strides = [-t if rng.random() < 0.3 else t for t in strides]
    lo = sum((s - 1) * t for s, t in zip(sizes, strides) if t < 0)
    return -lo + int(rng.integers(0, 3)), tuple(strides)


def span_hi(offset, sizes, strides) -> int:
    return offset + sum((s - 1) * t for s, t in zip(sizes, strides) if t > 0)


def random_fold_plan(rng, es: int, flt: bool, D: int, stride=None, small=False):
    from opendml.plan import FoldPlan
    N, C = int(rng.integers(1, 3)), int(rng.integers(1, 4))
    window, strides, dil, pad, blocks, spatial = [], [], [], [], [], []
    for d in range(D):
        s = int(stride if stride is not None else rng.choice([1, 1, 2, 3]))   # overlapping windows often
        w = int(rng.integers(1, 3 * s + 2)) if stride is not None else int(rng.integers(1, 4 if small else 5))
        di = int(rng.choice([1, 1, 2, 3]))
        nb = int(rng.integers(1, 4 if small else 7))
        ps, pe = int(rng.integers(0, 4)), int(rng.integers(0, 4))
        ext = (w - 1) * di + 1
        S = (nb - 1) * s + ext - ps - pe + int(rng.integers(0, s))
        if S < 1:
            ps = pe = 0
            S = (nb - 1) * s + ext
        assert (S + ps + pe - ext) // s + 1 == nb
        window.append(w), strides.append(s), dil.append(di), pad.append(ps), blocks.append(nb), spatial.append(S)
    K, B = math.prod(window), math.prod(blocks)
    in_offset, in_strides = random_layout(rng, (N, C * K, B), signed=True)
    out_offset, out_strides = random_layout(rng, (N, C, *spatial), signed=False)
    return FoldPlan(es, P.SUM_FLOAT if flt else P.SUM_INTEGER, N, C, tuple(spatial), in_offset, in_strides,
                    tuple(window), tuple(strides), tuple(dil), tuple(pad), tuple(blocks), out_offset, out_strides)


def dense_fold_plans(es: int, flt: bool):
    """Plans where most image positions sum several window elements: the
    issue's shapes, scaled down (3x3 and 3x3x3 windows, stride 1, padding 1),
    a 1-D window of 7 with stride 2, and a dilated 2-D one with uneven padding."""
    from opendml.plan import FoldPlan
    kind = P.SUM_FLOAT if flt else P.SUM_INTEGER

    def make(N, C, spatial, window, strides, dil, sp, ep):
        blocks = tuple((s + a + b - d * (w - 1) - 1) // st + 1
                       for s, w, st, d, a, b in zip(spatial, window, strides, dil, sp, ep))
        K, B = math.prod(window), math.prod(blocks)
        out = [0] * (2 + len(spatial))
        step = 1
        for ax in reversed(range(2 + len(spatial))):
            out[ax] = step
            step *= (N, C, *spatial)[ax]
        return FoldPlan(es, kind, N, C, tuple(spatial), 0, (C * K * B, B, 1), tuple(window), tuple(strides),
                        tuple(dil), tuple(sp), blocks, 0, tuple(out))
    return [make(2, 3, (7, 9), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
            make(1, 2, (4, 5, 6), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1)),
            make(2, 2, (41,), (7,), (2,), (1,), (3,), (2,)),
            make(1, 2, (9, 10), (3, 4), (1, 2), (2, 1), (2, 0), (1, 3))]


def random_scatter_plan(rng, es: int):
    from opendml.plan import ScatterPlan
    R = int(rng.integers(1, 5))
    sizes, first, step, taken = [], [], [], []
    for _ in range(R):
        s = int(rng.integers(1, 8))
        st = int(rng.integers(1, 4))
        f = int(rng.integers(0, s))
        t = 1 + int(rng.integers(0, (s - 1 - f) // st + 1))
        sizes.append(s), first.append(f), step.append(st), taken.append(t)
    in_offset, in_strides = random_layout(rng, taken, signed=True)
    out_offset, out_strides = random_layout(rng, sizes, signed=False)
    return ScatterPlan(es, tuple(sizes), out_offset, out_strides, tuple(first), tuple(step), tuple(taken),
                       in_offset, in_strides)


def wide_scatter_plans(es: int):
    """SLICE_GRAD plans whose innermost dimension widens to 16-byte words: a
    window of a packed tensor, the same read backwards (SLICE1 with a -1
    stride), and one whose outer dimension also steps."""
    from opendml.plan import ScatterPlan
    f = 16 // es
    L, T = 4 * f, 2 * f
    plain = ScatterPlan(es, (3, 5, L), 0, (5 * L, L, 1), (1, 1, f), (1, 1, 1), (2, 3, T), 0, (3 * T, T, 1))
    backwards = ScatterPlan(es, (3, 5, L), 0, (5 * L, L, 1), (0, 2, f), (1, 1, 1), (3, 3, T), T - 1,
                            (3 * T, T, -1))
    stepped = ScatterPlan(es, (2, 7, L), 0, (7 * L, L, 1), (0, 1, 2 * f), (1, 3, 1), (2, 2, T), 0, (2 * T, T, 1))
    return [plain, backwards, stepped]


def random_words(rng, n: int, dtype) -> np.ndarray:
    """Random element words: every bit pattern for integers; for floats,
    finite values of random sign, mantissa and exponent up to 2^20 (2^9 for
    float16), zeros, negative zeros and subnormals included: sums round
    often (so the summation order shows) and never meet an infinity of the
    other sign (NaN payloads differ between processors)."""
    dtype = np.dtype(dtype)
    es = dtype.itemsize
    bits = 8 * es
    mant = {2: 10, 4: 23, 8: 52}.get(es, 0)
    w = rng.integers(0, 2**63, size=n, dtype=np.uint64, endpoint=False)
    w = (w ^ (rng.integers(0, 2**63, size=n, dtype=np.uint64) << np.uint64(1))).astype(WORDS[es])
    if dtype.kind == "f":
        bias = (1 << (bits - mant - 2)) - 1
        top = bias + (9 if es == 2 else 20)
        exp = np.where(rng.random(n) < 0.1, rng.integers(0, top + 1, size=n),
                       rng.integers(bias - 8, top + 1, size=n)).astype(WORDS[es])
        sign = rng.integers(0, 2, size=n).astype(WORDS[es])
        w = (w & WORDS[es]((1 << mant) - 1)) | (exp << WORDS[es](mant)) | (sign << WORDS[es](bits - 1))
        w[rng.random(n) < 0.05] = 0
        w[rng.random(n) < 0.05] = WORDS[es](1 << (bits - 1))          # -0
    return w


def fold_buffers(rng, plan, dtype, sentinel=0xA5):
    es = plan.element_size
    src = random_words(rng, span_hi(plan.in_offset, (plan.batch, plan.rows, plan.columns), plan.in_strides) + 3,
                       dtype)
    nout = span_hi(plan.out_offset, (plan.batch, plan.channels, *plan.spatial), plan.out_strides) + 3
    dst = np.full(nout * es, sentinel, np.uint8).view(WORDS[es])
    return src, dst


def scatter_buffers(rng, plan, dtype, sentinel=0xA5, round_to=16):
    es = plan.element_size
    nin = span_hi(plan.in_offset, plan.taken, plan.in_strides) + 3
    nout = span_hi(plan.out_offset, plan.sizes, plan.out_strides) + 3
    nin, nout = -(-nin * es // round_to) * round_to // es, -(-nout * es // round_to) * round_to // es
    return random_words(rng, nin, dtype), np.full(nout * es, sentinel, np.uint8).view(WORDS[es])


# -- CPU tests of the kernels' index arithmetic -------------------------------------------
import pytest  # noqa: E402

from opendml.runtime.cuda import launch as cl, tuned as ct  # noqa: E402


def _flt(dtype) -> bool:
    return np.dtype(dtype).kind == "f"


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "uint16", "int64"])
@pytest.mark.parametrize("D", [1, 2, 3])
@pytest.mark.parametrize("V", [1, 2, 4])
def test_fold_gather_emulation_equals_reference(dtype, D, V):
    rng = np.random.default_rng(100 * D + V + DTYPES.index(dtype))
    es = np.dtype(dtype).itemsize
    dense = [p for p in dense_fold_plans(es, _flt(dtype)) if len(p.window) == D]
    for plan in [random_fold_plan(rng, es, _flt(dtype), D, small=D == 3) for _ in range(3)] + dense:
        name, params, grid, smem = ct._fold_launch(plan, ("gather", V))
        assert name.startswith("fold_gather<") and name.endswith(f", {V}>") and smem == 0
        assert isinstance(params, P.FoldParams) and grid[0] * cl.THREADS >= params.work_items * 32
        src, want = fold_buffers(rng, plan, dtype)
        got = want.copy()
        fold_reference(plan, src, want)
        emulate_fold_gather(params, src, got, V)
        assert got.tobytes() == want.tobytes(), plan


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "uint32"])
@pytest.mark.parametrize("stride", [1, 3, 32, 40, 256, 300])
def test_fold1d_tile_emulation_equals_reference(dtype, stride):
    rng = np.random.default_rng(stride + DTYPES.index(dtype))
    es = np.dtype(dtype).itemsize
    for rc in (32, 64, 128, 256):
        if es == 8 and rc == 256:
            continue
        plan = random_fold_plan(rng, es, _flt(dtype), 1, stride=stride)
        name, params, grid, _ = ct._fold_launch(plan, ("tile", rc))
        assert name == f"fold1d_tile<{cl._SCALAR[es]}, {int(_flt(dtype))}, {rc}>" and grid == (params.work_items,)
        src, want = fold_buffers(rng, plan, dtype)
        got = want.copy()
        fold_reference(plan, src, want)
        emulate_fold1d_tile(params, src, got, rc)
        assert got.tobytes() == want.tobytes(), (rc, plan)


def test_fold_reference_agrees_with_the_definition():
    """The vectorised reference against tests/reference.py's plain loops."""
    from tests import reference as ref
    run = getattr(ref, "run_fold_plan", None)
    if run is None:
        pytest.skip("tests/reference.py has no run_fold_plan")
    rng = np.random.default_rng(7)
    for dtype in ("float16", "float32", "int16", "uint64"):
        for D in (1, 2, 3):
            plan = random_fold_plan(rng, np.dtype(dtype).itemsize, _flt(dtype), D, small=True)
            src, a = fold_buffers(rng, plan, dtype)
            b = a.copy()
            fold_reference(plan, src, a)
            run(plan, src, b)
            assert a.tobytes() == b.tobytes(), plan


def _scatter_emulated(plan, src, dst, ptr_src=0, ptr_dst=0):
    w, rev, wp = ct.scatter_word_plan(plan, ptr_src, ptr_dst)
    name, params, grid, _ = ct._scatter_launch(plan, ptr_src, ptr_dst)
    items = ct.items_per_thread(w)
    assert name == f"scatter<{cl._SCALAR[w]}, {len(wp.sizes)}, {rev}, {ct._index_type(wp.count, items)}, {items}>"
    if w == 16:
        s16, d16 = src.view(np.uint8).reshape(-1, 16), dst.view(np.uint8).reshape(-1, 16)
        emulate_scatter(params, s16, d16, items, rev)
    else:
        s = src.view(np.uint8).view(WORDS[w])
        d = dst.view(np.uint8).view(WORDS[w])
        if rev:
            s2 = s.view(np.uint8).reshape(-1, w)
            d2 = d.view(np.uint8).reshape(-1, w)
            emulate_scatter(params, s2, d2, items, rev)
        else:
            emulate_scatter(params, s, d, items)
    return w


@pytest.mark.parametrize("dtype", ["int8", "float16", "float32", "float64"])
def test_scatter_emulation_equals_reference(dtype):
    rng = np.random.default_rng(DTYPES.index(dtype))
    es = np.dtype(dtype).itemsize
    plans = [random_scatter_plan(rng, es) for _ in range(12)] + wide_scatter_plans(es)
    widths = []
    for plan in plans:
        src, want = scatter_buffers(rng, plan, dtype)
        got = want.copy()
        scatter_reference(plan, src, want)
        widths.append(_scatter_emulated(plan, src, got))
        assert got.tobytes() == want.tobytes(), plan
        if getattr(__import__("tests.reference", fromlist=["x"]), "run_scatter_plan", None):
            from tests.reference import run_scatter_plan
            other = np.full_like(want, 0xA5 if es == 1 else want.dtype.type(0))
            other[:] = got  # same sentinels
            run_scatter_plan(plan, src, other)
            assert other.tobytes() == want.tobytes()
    assert widths[-3:] == [16, 16, 16]
    # a misaligned destination pointer keeps the words narrower
    plan = wide_scatter_plans(es)[0]
    src, want = scatter_buffers(rng, plan, dtype)
    got = want.copy()
    scatter_reference(plan, src, want)
    assert _scatter_emulated(plan, src, got, 0, es) < 16 or es == 16
    assert got.tobytes() == want.tobytes()


def test_canonical_scatter_merges_the_full_dimensions():
    from opendml.plan import ScatterPlan
    plan = ScatterPlan(4, (64, 256, 128, 128), 0, (256 * 128 * 128, 128 * 128, 128, 1), (0, 0, 8, 8),
                       (1, 1, 1, 1), (64, 256, 112, 112), 0, (256 * 112 * 112, 112 * 112, 112, 1))
    c = plan.canonical()
    assert c.sizes == (16384, 128, 128) and c.first == (0, 8, 8) and c.taken == (16384, 112, 112)
    # an outer dimension taking one element (step 2) merges for the CPU kernels only (as in C)
    one = ScatterPlan(4, (4, 8), 0, (8, 1), (1, 0), (2, 1), (1, 8), 0, (8, 1))
    assert one.canonical().sizes == (4, 8)
    assert one.canonical(cpu=True) == ScatterPlan(4, (32,), 0, (1,), (8,), (1,), (8,), 0, (1,))
    w, rev, wp = ct.scatter_word_plan(plan, 0, 0)
    assert (w, rev, wp.sizes, wp.first, wp.taken) == (16, 0, (16384, 128, 32), (0, 8, 2), (16384, 112, 28))


def test_kernel_choice_for_the_issue_shapes():
    from opendml.plan import FoldPlan
    f2 = FoldPlan(4, P.SUM_FLOAT, 32, 64, (56, 56), 0, (576 * 3136, 3136, 1), (3, 3), (1, 1), (1, 1), (1, 1),
                  (56, 56), 0, (64 * 3136, 3136, 56, 1))
    assert ct._fold_launch(f2)[0] == "fold_gather<u32, 1, 2, u32, 2>"
    f3 = FoldPlan(2, P.SUM_FLOAT, 4, 32, (32, 32, 32), 0, (864 * 32768, 32768, 1), (3, 3, 3), (1, 1, 1),
                  (1, 1, 1), (1, 1, 1), (32, 32, 32), 0, (32 * 32768, 32768, 1024, 32, 1))
    assert ct._fold_launch(f3)[0] == "fold_gather<u16, 1, 3, u32, 1>"
    ola = FoldPlan(4, P.SUM_FLOAT, 8, 1, (2**22,), 0, (1024 * 16381, 16381, 1), (1024,), (256,), (1,), (0,),
                   (16381,), 0, (2**22, 2**22, 1))
    name, params, grid, _ = ct._fold_launch(ola)
    assert name == "fold1d_tile<u32, 1, 128>" and grid == (8 * 2 * 2**22 // (256 * 32),)
    assert params.dim[0].stride == 256 and params.in_row_stride == 16381 and params.window_count == 1024
