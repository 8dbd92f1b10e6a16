/* odml_move_cuda (newshape.h): the CUDA launches of odml_move_lower's Copy/Fill program in C, for cuda_new's one C
 * call (calls_move_new.c). It is runtime/cuda/steps.py's move_steps, decision for decision (each function names what
 * it mirrors; strided copies through cuda_spec.c's copy launch): the same kernel names, parameter bytes, grids and
 * shared memory for the settings c_settings() passes; tests/runtime/test_cuda_move_spec.py compares them on random
 * calls, layouts, dtypes, alignments and settings. -1 where a grid would reach 2^31 blocks, a product leave 64 bits
 * or a rank pass the parameter block's: the Python route plans the call. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "newshape.h"

#define THREADS ODML_CUDA_THREADS
#define MAX_DIMS ODML_MAX_MOVE_RANK
#define MAP_CONSTANT 5
#define LIM31 ((int64_t)1 << 31)


/* steps.py _Pass: dims (size, source stride, destination stride, map mode, map shift, map size) */
typedef struct {
    int fill, src, dst, n, sb;
    int64_t st, dt, src_offset, dst_offset, d[MAX_DIMS][6];
    double scale, bias;
    uint64_t bits;
} kpass;

static const char *index_of(int64_t x) { return x < LIM31 ? "u32" : "u64"; }

/* _Pass.count (the dims' sizes multiply to at most an output's elements: no overflow) */
static int64_t count_of(const kpass *k) {
    int64_t c = 1;
    for (int i = 0; i < k->n; i++) c *= k->d[i][0];
    return c;
}

/* (a stable sort by destination stride, largest first) */
static int larger_dst_stride(const int64_t *a, const int64_t *b) { return a[2] > b[2]; }

/* _canonical: k's other fields set, its n dims from `dims` */
static int canonical(kpass *k, const int64_t (*dims)[6], int n) {
    int64_t kept[ODML_MOVE_PASS_MAX_DIMS][6], v;
    int m = 0;
    for (int a = 0; a < n; a++) {
        const int64_t *d = dims[a];
        if (d[0] == 1) {
            if (d[3] && !k->fill) {
                int64_t i = -d[4];
                if (d[3] != MAP_CONSTANT) i = odml_map_source(d[3], d[4], d[5], 0);
                else if (i < 0 || i >= d[5]) k->fill = 1;
                if (!k->fill && (__builtin_mul_overflow(i, d[1], &v) || __builtin_add_overflow(k->src_offset, v, &k->src_offset)))
                    return -1;
            }
            continue;
        }
        odml_insert_row(kept[0], m++, 6, d, larger_dst_stride);
    }
    int r = 0;
    for (int a = 0; a < m; a++) {
        int64_t *d = kept[a], os, is;
        if (k->fill) d[1] = d[3] = d[4] = d[5] = 0;
        if (r) {
            int64_t *o = k->d[r - 1];
            if (!o[3] && !d[3] && !__builtin_mul_overflow(d[2], d[0], &os) && o[2] == os
                    && !__builtin_mul_overflow(d[1], d[0], &is) && o[1] == is) {
                if (__builtin_mul_overflow(o[0], d[0], &o[0])) return -1;
                o[1] = d[1];
                o[2] = d[2];
                continue;
            }
        }
        if (r == MAX_DIMS) return -1;
        memcpy(k->d[r++], d, sizeof kept[0]);
    }
    if (!r) {
        static const int64_t one[6] = {1, 0, 0, 0, 0, 0};
        memcpy(k->d[r++], one, sizeof one);
    }
    k->n = r;
    if (k->fill) k->src = -1;
    return 0;
}

/* _magic: the 32-bit multiply-shift division by d (d < 2^32) */
static void magic(int64_t d, odml_move_dim *q) {
    int64_t s = 0;
    while (((int64_t)1 << s) < d) s++;
    q->div_magic = (int64_t)(((unsigned __int128)1 << 32) * (unsigned __int128)(((int64_t)1 << s) - d) / (unsigned __int128)d) + 1;
    q->div_shift = s;
}

/* move_params, as launch L's parameter block */
static void params_of(const kpass *k, odml_move_launch *L) {
    odml_move_params *q = &L->p.move;
    L->size = (Py_ssize_t)sizeof *q;
    memset(q, 0, sizeof *q);
    q->rank = k->n;
    q->count = count_of(k);
    q->src_offset = k->src_offset;
    q->dst_offset = k->dst_offset;
    q->src_type = k->st;
    q->dst_type = k->dt;
    q->scale_bias = k->sb;
    memcpy(&q->fill_bits, &k->bits, 8);
    if (k->sb) {
        const float s = (float)k->scale, b = (float)k->bias;
        uint32_t s32, b32;
        memcpy(&s32, &s, 4);
        memcpy(&b32, &b, 4);
        q->scale32 = s32;
        q->bias32 = b32;
        memcpy(&q->scale64, &k->scale, 8);
        memcpy(&q->bias64, &k->bias, 8);
    }
    for (int i = 0; i < k->n; i++) {
        odml_move_dim *d = &q->dim[i];
        d->size = k->d[i][0];
        d->src_stride = k->d[i][1];
        d->dst_stride = k->d[i][2];
        d->map_mode = k->d[i][3];
        d->map_shift = k->d[i][4];
        d->map_size = k->d[i][5];
        magic(d->size, d);
    }
}

/* _extra_dims: move_params(g) with X and Y in the two dimensions after g's */
static void extra_dims(const kpass *g, const int64_t *X, const int64_t *Y, int with_magic, odml_move_launch *L) {
    odml_move_params *q = &L->p.move;
    params_of(g, L);
    const int64_t *xy[2] = {X, Y};
    for (int j = 0; j < 2; j++) {
        odml_move_dim *d = &q->dim[g->n + j];
        d->size = xy[j][0];
        d->src_stride = xy[j][1];
        d->dst_stride = xy[j][2];
        if (with_magic) magic(d->size, d);
    }
}

/* g: k without dimensions a and b (b -1: none) */
static void without(const kpass *k, int a, int b, kpass *g) {
    *g = *k;
    g->sb = 0;
    g->bits = 0;
    g->n = 0;
    for (int i = 0; i < k->n; i++)
        if (i != a && i != b) memcpy(g->d[g->n++], k->d[i], sizeof k->d[0]);
}

/* _move_items */
static int64_t move_items(int64_t src_bytes, int64_t dst_bytes) {
    const int64_t wide = src_bytes > dst_bytes ? src_bytes : dst_bytes;
    int64_t v = 16 / wide > 4 ? 16 / wide : 4;
    if (dst_bytes < src_bytes && v < 16 / dst_bytes) v = 16 / dst_bytes < 2 * v ? 16 / dst_bytes : 2 * v;
    return v;
}

/* _tile_pass: 1 with the group pass g, R, V, X and Y; 0 where k is not such a transpose; -1 on overflow */
static int tile_pass(const kpass *k, int64_t es, kpass *g, int64_t *R, int64_t *V, int64_t *X, int64_t *Y) {
    const int nd = k->n, L = nd - 1;
    *V = 16 / es > 2 ? 16 / es : 2;
    if (nd < 2 || nd + 1 > MAX_DIMS || k->d[L][2] != 1) return 0;
    int x = -1, y = -1;
    if (k->d[L][0] >= 2 && k->d[L][0] <= 8 && k->d[L - 1][1] == 1 && k->d[L - 1][2] == k->d[L][0]) {
        x = L;
        y = L - 1;
    } else {
        for (int i = 0; i < L && x < 0; i++)
            if (k->d[i][0] >= 2 && k->d[i][0] <= 8 && k->d[i][1] == 1 && k->d[L][1] == k->d[i][0]) {
                x = i;
                y = L;
            }
    }
    if (x < 0 || k->d[y][0] % *V) return 0;
    *R = k->d[x][0];
    memcpy(X, k->d[x], sizeof k->d[0]);
    memcpy(Y, k->d[y], sizeof k->d[0]);
    without(k, x, -1, g);
    int64_t *gy = g->d[y > x ? y - 1 : y];
    gy[0] /= *V;
    if (__builtin_mul_overflow(gy[1], *V, &gy[1]) || __builtin_mul_overflow(gy[2], *V, &gy[2])) return -1;
    gy[3] = gy[4] = gy[5] = 0;
    return 1;
}

/* _transpose_pass: 1 with the outer pass g, X, Y and its blocks; else 0 */
static int transpose_pass(const kpass *k, const odml_move_cuda_conf *c, kpass *g, int64_t *X, int64_t *Y,
                          int64_t *blocks) {
    const int nd = k->n;
    if (!c->transpose_tile || nd < 2 || nd + 1 > MAX_DIMS || k->d[nd - 1][2] != 1 || k->d[nd - 1][1] == 1) return 0;
    int y = -1;
    for (int i = 0; i < nd - 1 && y < 0; i++)
        if (k->d[i][1] == 1) y = i;
    if (y < 0 || k->d[nd - 1][0] < c->transpose_min || k->d[y][0] < c->transpose_min || k->d[y][2] == 1) return 0;
    memcpy(X, k->d[nd - 1], sizeof k->d[0]);
    memcpy(Y, k->d[y], sizeof k->d[0]);
    without(k, nd - 1, y, g);
    const int64_t t = c->transpose_tile;
    return !__builtin_mul_overflow(count_of(g), odml_cdiv(X[0], t), blocks)
           && !__builtin_mul_overflow(*blocks, odml_cdiv(Y[0], t), blocks) && *blocks < LIM31;
}

/* what a pass's launch depends on beside the pass (move_steps' slots) */
typedef struct {
    const odml_move_cuda_conf *c;
    const uint64_t *src, *dst;
    const int64_t *n_src;
} slots;

/* _plain_step: 0 with L filled, 1 where the pass goes through move_vec, -1 where the Python route must plan */
static int plain_step(const kpass *k, const slots *s, odml_move_launch *L) {
    const odml_move_cuda_conf *c = s->c;
    const int64_t es = odml_type_size[k->st];
    const int nd = k->n;
    kpass g;
    int64_t R = 0, V = 0, X[6], Y[6], blocks;   /* (R, V: set by tile_pass where it returns 1) */
    const int tile = tile_pass(k, es, &g, &R, &V, X, Y);
    const int copy = c->via != 2 && nd <= ODML_MAX_RANK;
    odml_new_plan pl;
    odml_cuda_spec cs;
    int spec_ok = 0;
    if (tile < 0) return -1;
    if (copy) {
        /* word_plan through cuda_spec.c's copy launch (_copy_launch): the canonical CopyPlan widened */
        int64_t sz[ODML_MAX_RANK], is[ODML_MAX_RANK], os[ODML_MAX_RANK];
        for (int i = 0; i < nd; i++) {
            sz[i] = k->d[i][0];
            is[i] = k->d[i][1];
            os[i] = k->d[i][2];
        }
        pl.kind = ODML_NEW_COPY;
        pl.es = es;
        pl.span = s->n_src[k->src];
        if (odml_copy_pack(es, nd, sz, k->src_offset, is, k->dst_offset, os, &pl.copy)) return -1;
        spec_ok = odml_new_cuda(&pl, s->src[k->src], s->dst[k->dst], &cs) == 0;
        const odml_copy_params *wp = &cs.p.copy;      /* (filled even where its grid does not fit) */
        const int r = (int)pl.copy.rank;
        const int64_t w = wp->element_size, inner = pl.copy.in_strides[r - 1];
        const int rev = inner == -1 && w != es, pick = inner == 2 && wp->in_strides[r - 1] == 1;
        if (c->via != 1 && c->word_copy && w == 16 && !rev && !pick && !tile && c->word_copy_min_rank <= wp->rank
                && wp->rank <= MAX_DIMS) {
            /* 1 to WORD_REPEAT[0] (at most 2) repeat dimensions (source stride 0) after the canonical rest (the
             * index space), WORD_REPEAT[1] words a thread; else none */
            int64_t body[MAX_DIMS][6], reps[MAX_DIMS][6];
            int nb = 0, nr = 0;
            for (int i = 0; i < (int)wp->rank; i++) nr += wp->in_strides[i] == 0 && wp->sizes[i] > 1;
            const int take = nr <= c->word_repeat[0] && nr <= 2 && c->word_repeat[1] > 0;
            kpass wk = *k;                    /* (plain: no map, no scale/bias; its offsets set below) */
            wk.bits = 0;
            nr = 0;
            for (int i = 0; i < (int)wp->rank; i++) {
                const int64_t d[6] = {wp->sizes[i], wp->in_strides[i], wp->out_strides[i], 0, 0, 0};
                memcpy(take && d[1] == 0 && d[0] > 1 ? reps[nr++] : body[nb++], d, sizeof d);
            }
            const int64_t U = nr ? c->word_repeat[1] : c->word_copy;
            if (!nr) {
                wk.n = nb;
                memcpy(wk.d, body, sizeof body[0] * (size_t)nb);
            } else if (canonical(&wk, (const int64_t (*)[6])body, nb)) {
                return -1;
            }
            const int64_t count = count_of(&wk);
            const int n = wk.n;
            memcpy(wk.d[n], reps, sizeof reps[0] * (size_t)nr);
            wk.n = n + nr;
            wk.src_offset = wp->in_offset;
            wk.dst_offset = wp->out_offset;
            odml_name(L->name, (int)sizeof L->name, "move_wcopy<%d, %s, %lld, %d>", n, index_of(count + THREADS * U),
                     (long long)U, nr);
            params_of(&wk, L);
            L->p.move.count = count;
            return odml_grid(count, THREADS * U, &L->grid);
        }
        if (c->via == 1 || (!tile && (w >= 16 || rev || pick))) goto copy_launch;
    }
    if (transpose_pass(k, c, &g, X, Y, &blocks)) {
        odml_name(L->name, (int)sizeof L->name, "move_transpose<%s, %d, %lld>", odml_scalar[es], g.n, (long long)c->transpose_tile);
        extra_dims(&g, X, Y, 1, L);
        return odml_grid(blocks, 1, &L->grid);
    }
    if (tile) {
        const int64_t gc = count_of(&g), Y0[3] = {0, Y[1], Y[2]};
        odml_name(L->name, (int)sizeof L->name, "move_tile<%s, %d, %s, %lld, %lld>", odml_scalar[es], g.n, index_of(gc + THREADS),
                 (long long)R, (long long)V);
        extra_dims(&g, X, Y0, 0, L);
        return odml_grid(gc, THREADS, &L->grid);
    }
    if (!copy) return 1;
copy_launch:
    if (!spec_ok) return -1;
    memcpy(L->name, cs.name, sizeof cs.name);
    L->p.copy = cs.p.copy;
    L->size = cs.size;
    L->grid = cs.grid;
    L->smem = cs.smem;
    return 0;
}

/* _pass_step: the launch of a canonical kernel pass (0), or -1 */
static int pass_step(const kpass *k, const slots *s, odml_move_launch *L) {
    const odml_move_cuda_conf *c = s->c;
    const int64_t count = count_of(k), des = odml_type_size[k->dt];
    const int nd = k->n;
    L->smem = 0;
    L->src = k->src;                                   /* (-1 for a fill: canonical) */
    L->dst = k->dst;
    if (k->fill) {
        const int64_t items = move_items(des, des);
        odml_name(L->name, (int)sizeof L->name, "move_fill<%s, %d, %s, %lld>", odml_scalar[des], nd,
                 index_of(count + THREADS * items), (long long)items);
        params_of(k, L);
        return odml_grid(count, THREADS * items, &L->grid);
    }
    int maps = 0;
    for (int i = 0; i < nd; i++) maps |= k->d[i][3] != 0;
    const int conv = k->st != k->dt || k->sb;
    if (!maps && !conv) {
        const int r = plain_step(k, s, L);
        if (r <= 0) return r;
    }
    const int64_t ses = odml_type_size[k->st], V = move_items(ses, des);
    params_of(k, L);
    if (conv && !maps && c->cvt_unroll > 0 && nd == 1 && k->d[0][1] == 1 && k->d[0][2] == 1) {
        const int64_t U = c->cvt_unroll, flags = c->cvt_flags;
        if (flags & 2) return -1;                      /* a persistent grid: sized by the device (Python) */
        odml_name(L->name, (int)sizeof L->name, "move_cvt<%s, %s, %s, %lld, %lld, %lld, %d, %lld, %lld>", odml_scalar[ses], odml_scalar[des],
                 index_of(count + THREADS * V * U), (long long)V, (long long)k->st, (long long)k->dt, k->sb,
                 (long long)U, (long long)flags);
        return odml_grid(count, THREADS * V * U, &L->grid);
    }
    odml_name(L->name, (int)sizeof L->name, "move_vec<%s, %s, %d, %s, %lld, %lld, %lld, %d, %d>", odml_scalar[ses], odml_scalar[des], nd,
             index_of(count + THREADS * V), (long long)V, (long long)k->st, (long long)k->dt, k->sb, maps);
    return odml_grid(count, THREADS * V, &L->grid);
}

/* _pad_program: whether g is exactly PADDING/PADDING1's program */
static int pad_program(const odml_move_prog *g) {
    const odml_move_pass *first = &g->passes[0];
    if (!g->pad || g->n_pass < 2 || first->fill || first->has_scale_bias) return 0;
    for (int i = 0; i < first->n; i++)
        if (first->map_mode[i]) return 0;
    return 1;
}

/* kernel_passes(plan, True): the padding program fused into one pass over the whole output */
static int fused_pass(const odml_move_prog *g, kpass *k) {
    const odml_move_pass *first = &g->passes[0];
    int64_t dims[ODML_MAX_RANK][6];
    for (int a = 0; a < first->n; a++) {
        const int64_t s = g->pad_start[a], e = g->pad_end[a], n = first->sizes[a];
        const int64_t m = s || e ? (g->pad_mode ? g->pad_mode : MAP_CONSTANT) : 0;
        const int64_t d[6] = {n + s + e, first->src_strides[a], first->dst_strides[a], m, m ? s : 0, m ? n : 0};
        memcpy(dims[a], d, sizeof d);
    }
    memset(k, 0, sizeof *k);
    k->st = first->src_type;
    k->dt = first->dst_type;
    k->src_offset = first->src_offset;
    k->bits = g->pad_bits;
    return canonical(k, (const int64_t (*)[6])dims, first->n);
}

/* _pad_words_ok */
static int pad_words_ok(const kpass *k) {
    int64_t stride = 1;
    if (k->dst_offset != 0) return 0;
    for (int i = k->n - 1; i >= 0; i--) {
        const int64_t *d = k->d[i];
        if (d[2] != stride || d[0] >= (1 << 30) || d[4] >= (1 << 30) || d[4] <= -(1 << 30) || d[5] >= (1 << 30))
            return 0;
        stride *= d[0];
    }
    return count_of(k) + THREADS * 16 * 16 + 64 < LIM31;
}

/* _pad_step: 0 with L filled, 1 where none of the fused launches takes the program, -1 */
static int pad_step(const odml_move_prog *g, const odml_move_cuda_conf *c, odml_move_launch *L) {
    kpass k;
    if (!pad_program(g)) return 1;
    if (fused_pass(g, &k)) return -1;
    if (k.fill || k.st != k.dt || k.sb || k.n >= MAX_DIMS) return 1;
    const int64_t *last = k.d[k.n - 1], W = last[0], es = odml_type_size[k.dt], count = count_of(&k);
    if (last[1] != 1 || last[2] != 1 || W < c->pad_rows_min || W >= LIM31 - 64 || last[5] >= LIM31) return 1;
    const int64_t rows = count / W;
    params_of(&k, L);
    L->smem = 0;
    L->src = k.src;
    L->dst = k.dst;
    if (pad_words_ok(&k)) {
        if (c->fuse == 2 && W * es >= c->padr_min_bytes) {
            const int64_t *P = es >= 4 ? c->pad_rows : c->pad_rows_small;
            odml_name(L->name, (int)sizeof L->name, "move_padr<%s, %d, %lld, %lld, %lld>", odml_scalar[es], k.n, (long long)P[0],
                     (long long)P[1], (long long)P[2]);
            return odml_grid(rows, THREADS / 32, &L->grid);
        }
        if (c->fuse == 2 || c->fuse == 3) {
            const int64_t U = c->pad_words[0];
            if (U < 1) return -1;
            odml_name(L->name, (int)sizeof L->name, "move_padw<%s, %d, %lld, %lld>", odml_scalar[es], k.n, (long long)U,
                     (long long)c->pad_words[1]);
            return odml_grid(count / (16 / es) + 2, THREADS * U, &L->grid);
        }
    }
    odml_name(L->name, (int)sizeof L->name, "move_pad<%s, %d, %s>", odml_scalar[es], k.n, index_of(rows + 8));
    return odml_grid(rows, THREADS / 32, &L->grid);
}

/* move_steps */
int odml_move_cuda(const odml_move_prog *g, const odml_move_cuda_conf *c, const uint64_t *src, const int64_t *n_src,
                   const uint64_t *dst, odml_move_launch *out) {
    const slots s = {c, src, dst, n_src};
    kpass k;
    if (c->fuse >= 2 && c->fuse <= 4) {
        const int r = pad_step(g, c, out);
        if (r <= 0) return r < 0 ? -1 : 1;
    } else if (c->fuse == 1 && pad_program(g)) {
        return fused_pass(g, &k) || pass_step(&k, &s, out) ? -1 : 1;
    }
    for (int i = 0; i < g->n_pass; i++) {
        const odml_move_pass *q = &g->passes[i];
        int64_t dims[ODML_MOVE_PASS_MAX_DIMS][6];
        memset(&k, 0, sizeof k);
        k.fill = q->fill;
        k.src = g->pass_src[i];
        k.dst = g->pass_dst[i];
        k.dt = q->fill ? g->out_type[k.dst] : q->dst_type;
        k.st = q->fill ? k.dt : q->src_type;
        k.src_offset = q->fill ? 0 : q->src_offset;
        k.dst_offset = q->dst_offset;
        k.sb = !q->fill && q->has_scale_bias;
        k.scale = q->scale;
        k.bias = q->bias;
        k.bits = q->fill ? q->fill_bits : 0;
        for (int a = 0; a < q->n; a++) {           /* (a fill's source fields: canonical zeroes them) */
            const int64_t d[6] = {q->sizes[a], q->src_strides[a], q->dst_strides[a], q->map_mode[a], q->map_shift[a],
                                  q->map_size[a]};
            memcpy(dims[a], d, sizeof d);
        }
        if (canonical(&k, (const int64_t (*)[6])dims, q->n) || pass_step(&k, &s, &out[i])) return -1;
    }
    return g->n_pass;
}
