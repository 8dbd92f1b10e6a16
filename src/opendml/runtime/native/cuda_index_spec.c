/* odml_index_cuda (newshape.h, which says what it declines): the CUDA launch of one index-driven pass (plan.Gather,
 * plan.Scatter) in C, for cuda_new's one C call (newshape_index.c). It is runtime/cuda/index.py's plan_pass, decision
 * for decision (each function names what it mirrors), for every mode but "sort": the same kernel names, IndexParams
 * bytes (the strides no element reaches set to 0), grid and shared memory for the settings c_settings() passes ("owner"
 * mode's two launches share a zeroed table the caller allocates); tests/runtime/test_cuda_index_spec.py compares them
 * on random index calls. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "newshape.h"

#define LIM31 ((int64_t)1 << 31)
#define LIM32 ((int64_t)1 << 32)

static int64_t gcd(int64_t a, int64_t b) {
    while (b) {
        const int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* numpy_kernels._distinct over n (size, stride) pairs */
static int distinct(const int64_t (*d)[2], int n) {
    int64_t span = 0, done[ODML_IX_RANK * 2 + ODML_IX_AXES] = {0};
    for (;;) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (d[i][0] > 1 && !done[i] && (best < 0 || odml_absv(d[i][1]) < odml_absv(d[best][1]))) best = i;
        if (best < 0) return 1;
        done[best] = 1;
        if (odml_absv(d[best][1]) <= span) return 0;
        span += (d[best][0] - 1) * odml_absv(d[best][1]);
    }
}

/* numpy_kernels.outer_count (newshape_index.c's passes read it too) */
int odml_ix_outer(const idx_params *p) {
    int k = (int)p->rank;
    for (; k > 0; k--) {
        int reads = 0;
        for (int64_t a = 0; a < p->naxes; a++)
            reads |= (p->axes[a].strides[k - 1] && p->sizes[k - 1] > 1) ||
                     (p->axes[a].mode == 1 && p->axes[a].axis == k - 1);
        if (reads) break;
    }
    if (p->kind == 1) {
        int64_t d[ODML_IX_RANK][2];
        for (int i = k; i < p->rank; i++) {
            d[i - k][0] = p->sizes[i];
            d[i - k][1] = p->dst_strides[i];
        }
        if (!distinct((const int64_t (*)[2])d, (int)p->rank - k)) return (int)p->rank;
    }
    return k;
}

/* _trailing_group: positions a group where an overwriting scatter runs as ix_scatter_group, else 0 */
static int64_t trailing_group(const odml_ix_params *q, int k, const odml_index_cuda_conf *c) {
    if (q->naxes != 1 || q->n_inner != 1 || !q->axes[0].stride || q->axes[0].bound > c->group_slots) return 0;
    int m = k;
    while (m > 0 && (q->dst_strides[m - 1] == 0 || q->sizes[m - 1] == 1)) m--;
    int64_t members = 1, d[ODML_IX_RANK + 1][2];
    for (int i = m; i < k; i++) members *= q->sizes[i];
    if (members < 2 || members >= LIM32 - 1 || q->n_outer / members > LIM31 - 1) return 0;
    for (int i = 0; i < m; i++) d[i][0] = q->sizes[i], d[i][1] = q->dst_strides[i];
    d[m][0] = q->axes[0].bound, d[m][1] = q->axes[0].stride;
    return distinct((const int64_t (*)[2])d, m + 1) ? members : 0;
}

/* _group: trailing_group, else with the outer dimensions of destination stride 0 moved last in their own
 * order, q reordered so where that groups */
static int64_t group_of(odml_ix_params *q, int k, const odml_index_cuda_conf *c) {
    int64_t members = trailing_group(q, k, c);
    int order[ODML_IX_RANK], n = 0, moved = 0;
    for (int d = 0; d < k; d++)
        if (q->sizes[d] <= 1 || q->dst_strides[d]) order[n++] = d;
    for (int d = 0; d < k; d++)
        if (q->sizes[d] > 1 && !q->dst_strides[d]) order[n++] = d, moved = 1;
    if (members || !moved || q->naxes != 1) return members;
    odml_ix_params w = *q;
    for (int i = 0; i < k; i++) {
        w.sizes[i] = q->sizes[order[i]];
        w.src_strides[i] = q->src_strides[order[i]];
        w.dst_strides[i] = q->dst_strides[order[i]];
        w.axes[0].strides[i] = q->axes[0].strides[order[i]];
        if (q->axes[0].axis == order[i]) w.axes[0].axis = i;
    }
    if ((members = trailing_group(&w, k, c))) *q = w;
    return members;
}

/* _disjoint */
static int disjoint(const idx_params *p, int k) {
    int64_t d[ODML_IX_RANK * 2 + ODML_IX_AXES][2];
    int n = 0;
    for (int i = 0; i < k; i++)
        if (p->dst_strides[i]) d[n][0] = p->sizes[i], d[n++][1] = p->dst_strides[i];
    for (int64_t a = 0; a < p->naxes; a++)
        if (p->axes[a].stride) d[n][0] = p->axes[a].bound, d[n++][1] = p->axes[a].stride;
    for (int i = k; i < p->rank; i++) d[n][0] = p->sizes[i], d[n++][1] = p->dst_strides[i];
    return distinct((const int64_t (*)[2])d, n);
}

/* (stable, largest |destination stride| first) */
static int larger_dst_size(const int64_t *a, const int64_t *b) { return odml_absv(a[2]) > odml_absv(b[2]); }

/* _inner: the inner dimensions (size, source stride, destination stride); their count */
static int inner_dims(const idx_params *p, int k, int64_t (*out)[3]) {
    int64_t kept[ODML_IX_RANK][3];
    int m = 0, r = 0;
    for (int i = k; i < p->rank; i++) {
        if (p->sizes[i] <= 1) continue;
        const int64_t d[3] = {p->sizes[i], p->src_strides[i], p->dst_strides[i]};
        odml_insert_row(kept[0], m++, 3, d, larger_dst_size);
    }
    for (int i = 0; i < m; i++) {
        const int64_t *d = kept[i];
        if (r && out[r - 1][1] == d[1] * d[0] && out[r - 1][2] == d[2] * d[0]) {
            out[r - 1][0] *= d[0];
            out[r - 1][1] = d[1];
            out[r - 1][2] = d[2];
        } else {
            memcpy(out[r++], d, sizeof kept[0]);
        }
    }
    return r;
}

/* _column_walk: the new outer rank */
static int column_walk(odml_ix_params *q, int k, int64_t word, int64_t nbytes) {
    int r = -1;
    for (int64_t a = 0; a < q->naxes; a++)
        if (q->axes[a].mode == 1) {
            if (r >= 0 && r != q->axes[a].axis) return k;
            r = (int)q->axes[a].axis;
        }
    if (r < 0 || r >= k - 1 || q->sizes[r] < 2) return k;
    /* (size, source stride, destination stride, dimension; the axes' strides apart) */
    int64_t dims[ODML_IX_RANK + 1][4], xs[ODML_IX_RANK + 1][ODML_IX_AXES], mul[ODML_IX_RANK + 1];
    int from[ODML_IX_RANK + 1], n = 0;
    const int64_t lo = nbytes / word > 1 ? nbytes / word : 1, last = q->sizes[k - 1];
    for (int d = 0; d < k - 1; d++)
        if (d != r) from[n] = d, mul[n] = 1, dims[n][0] = q->sizes[d], dims[n++][3] = d;
    if (last > lo && last % lo == 0) {
        from[n] = k - 1, mul[n] = lo, dims[n][0] = last / lo, dims[n++][3] = -1;
        from[n] = r, mul[n] = 1, dims[n][0] = q->sizes[r], dims[n++][3] = r;
        from[n] = k - 1, mul[n] = 1, dims[n][0] = lo, dims[n++][3] = -1;
    } else {
        from[n] = r, mul[n] = 1, dims[n][0] = q->sizes[r], dims[n++][3] = r;
        from[n] = k - 1, mul[n] = 1, dims[n][0] = last, dims[n++][3] = k - 1;
    }
    if (n > ODML_IX_RANK) return k;
    for (int i = 0; i < n; i++) {
        dims[i][1] = q->src_strides[from[i]] * mul[i];
        dims[i][2] = q->dst_strides[from[i]] * mul[i];
        for (int64_t a = 0; a < q->naxes; a++) xs[i][a] = q->axes[a].strides[from[i]] * mul[i];
    }
    for (int i = 0; i < n; i++) {
        q->sizes[i] = dims[i][0];
        q->src_strides[i] = dims[i][1];
        q->dst_strides[i] = dims[i][2];
        for (int64_t a = 0; a < q->naxes; a++) {
            q->axes[a].strides[i] = xs[i][a];
            if (q->axes[a].mode == 1 && dims[i][3] == r) q->axes[a].axis = i;
        }
    }
    q->outer = n;
    return n;
}

/* _tile */
static int tile(odml_ix_params *q, int k, int64_t word, const odml_index_cuda_conf *c) {
    if (k < 2 || q->naxes != 1) return 0;
    const odml_ix_axis *ax = &q->axes[0];
    const int64_t lo = q->sizes[k - 1];
    if (ax->mode != 1 || ax->axis != k - 2 || q->src_strides[k - 2] || !ax->stride || ax->bound != q->sizes[k - 2]
            || ax->strides[k - 2] || c->threads % lo || ax->bound * lo * word > c->tile_smem
            || q->n_outer / (ax->bound * lo) > LIM31 - 1)
        return 0;
    q->members = ax->bound * lo;
    return 1;
}

/* _along_rows */
static int along_rows(const odml_ix_params *q, int k, const odml_index_cuda_conf *c) {
    if (!c->reverse_rows || k < 1 || q->naxes != 1) return 0;
    const odml_ix_axis *ax = &q->axes[0];
    return ax->mode == 1 && ax->axis == k - 1 && !q->src_strides[k - 1] && !ax->strides[k - 1]
           && ax->bound == q->sizes[k - 1];
}

/* _pieces */
static int64_t pieces_of(const odml_ix_params *q, int k, int64_t word, const odml_index_cuda_conf *c) {
    if ((word != 2 && word != 4 && word != 8) || !along_rows(q, k, c) || q->sizes[k - 1] >= 32
            || q->sizes[k - 1] * word % 16 || q->axes[0].stride != 1 || q->dst_strides[k - 1] != 1)
        return 0;
    const int64_t per = c->reverse_rows / 16 > 1 ? c->reverse_rows / 16 : 1;
    return odml_cdiv(q->n_outer * word / 16, per) <= LIM31 - 1 ? per : 0;
}

/* _rows */
static int64_t rows_of(const odml_ix_params *q, int k, int64_t word, const odml_index_cuda_conf *c) {
    const int64_t n = k >= 1 ? q->sizes[k - 1] : 0;
    if (!along_rows(q, k, c) || n < 32 || q->n_outer / n > LIM31 - 1) return 0;
    const int64_t padded = odml_cdiv(n * word, 16) * 16, a = c->reverse_rows / padded, b = q->n_outer / n;
    const int64_t m = a < b ? a : b;
    return m < 64 ? m : 64;
}

/* _row */
static int row_of(const odml_ix_params *q, int k, int64_t word, const odml_index_cuda_conf *c) {
    if (!c->gather_row || k < 1 || q->naxes != 1 || q->axes[0].mode != 0 || q->src_strides[k - 1]) return 0;
    const int64_t n = q->sizes[k - 1], bound = q->axes[0].bound;
    if (n < 128 || q->n_outer / n > LIM31 - 1 || n >= LIM31 || bound >= LIM31) return 0;
    return c->row_stage && bound * word <= 4 * c->group_slots && bound <= 4 * n ? 1 : 2;
}

/* plan_pass, then PassPlan.launch */
int odml_index_cuda(const idx_params *given, const odml_index_cuda_conf *c, uint64_t src, uint64_t dst,
                    odml_move_launch *L) {
    /* the pass canonical: the strides no element reaches (along dimensions of size 1, an axis of bound 1) 0 */
    idx_params canon = *given;
    const idx_params *p = &canon;
    for (int d = 0; d < canon.rank && d < ODML_IX_RANK; d++)
        if (canon.sizes[d] == 1) {
            canon.src_strides[d] = canon.dst_strides[d] = 0;
            for (int64_t a = 0; a < canon.naxes && a < ODML_IX_AXES; a++) canon.axes[a].strides[d] = 0;
        }
    for (int64_t a = 0; a < canon.naxes && a < ODML_IX_AXES; a++)
        if (canon.axes[a].bound == 1) canon.axes[a].stride = 0;
    const int scatter = p->kind == 1, constant = scatter && p->has_value;
    const int64_t es = p->data_type >= 1 && p->data_type <= 11 ? odml_type_size[p->data_type] : 0;
    if (!es || p->accumulate || p->rank > ODML_IX_RANK || p->naxes < 1 || p->naxes > ODML_IX_AXES
            || c->threads != 256)
        return -1;
    int k = odml_ix_outer(p);
    if (scatter && !constant && !disjoint(p, k)) k = (int)p->rank;
    int same = scatter;
    for (int d = 0; d < k; d++) same &= p->sizes[d] <= 1 || p->src_strides[d] == 0;
    /* mode: a gather (not last-only) or a scatter of a constant or of one source block is "direct"; another
     * (overwriting) scatter "group" where its positions fall in groups (below), else the route's */
    const int overwrite = scatter && !constant && !same;
    const int64_t via = c->scatter_via % 3, owner_ok = c->scatter_via < 3;   /* (3 more: OWNER_IN_C off) */
    if (overwrite && via == 2) return -1;
    int64_t inner[ODML_IX_RANK][3], f = 1;
    int ni = inner_dims(p, k, inner);
    const uint64_t from = constant ? dst : src;
    if (!constant && ni && inner[ni - 1][1] == 1 && inner[ni - 1][2] == 1) {
        for (int64_t w = 16; w >= 2; w /= 2) {
            const int64_t g = w / es;
            int ok = g > 1 && inner[ni - 1][0] % g == 0 && from % (uint64_t)w == 0 && dst % (uint64_t)w == 0
                     && p->src_offset % g == 0 && p->dst_offset % g == 0;
            for (int d = 0; ok && d < k; d++)
                if (p->sizes[d] > 1) ok = p->src_strides[d] % g == 0 && p->dst_strides[d] % g == 0;
            for (int i = 0; ok && i < ni - 1; i++) ok = inner[i][1] % g == 0 && inner[i][2] % g == 0;
            for (int64_t a = 0; ok && a < p->naxes; a++) ok = p->axes[a].stride % g == 0;
            if (ok) {
                f = g;
                break;
            }
        }
    }
    const int64_t word = es * f;      /* (f divides every offset and stride divided by it below: exact, as // is) */
    if (f > 1) inner[ni - 1][0] /= f;
    for (int i = 0; i < ni; i++)
        if (!(f > 1 && i == ni - 1)) inner[i][1] /= f, inner[i][2] /= f;
    if (!ni) {
        inner[0][0] = 1, inner[0][1] = inner[0][2] = 0;
        ni = 1;
    }
    odml_ix_params *q = &L->p.ix, wide;
    memset(q, 0, sizeof *q);
    q->outer = k;
    q->inner = ni;
    q->n_outer = 1;
    for (int d = 0; d < k; d++) q->n_outer *= p->sizes[d];
    q->n_inner = 1;
    for (int i = 0; i < ni; i++) q->n_inner *= inner[i][0];
    q->src_offset = p->src_offset / f;
    q->dst_offset = p->dst_offset / f;
    q->naxes = p->naxes;
    q->data_type = p->data_type;
    for (int d = 0; d < k; d++) {
        q->sizes[d] = p->sizes[d];
        q->src_strides[d] = p->src_strides[d] / f;
        q->dst_strides[d] = p->dst_strides[d] / f;
    }
    for (int i = 0; i < ni; i++) {
        q->isizes[i] = inner[i][0];
        q->isrc_strides[i] = inner[i][1];
        q->idst_strides[i] = inner[i][2];
    }
    if (constant) {
        q->has_value = 1;
        memcpy(&q->value_bits, &p->value_bits, 8);
    }
    for (int64_t a = 0; a < p->naxes; a++) {
        const idx_axis *ix = &p->axes[a];
        odml_ix_axis *ax = &q->axes[a];
        ax->type = ix->type;
        ax->offset = ix->offset;
        ax->stride = ix->stride / f;
        ax->bound = ix->bound;
        ax->mode = ix->mode;
        ax->skip = scatter && ix->out_of_range == 1;
        ax->axis = ix->mode ? ix->axis : -1;
        for (int d = 0; d < k; d++) ax->strides[d] = ix->strides[d];
        L->slot[a] = (int)ix->slot;
    }
    L->naxes = (int)p->naxes;
    /* the keyed side: block origin = key_base + slot * key_div */
    const int64_t *strides = scatter ? q->dst_strides : q->src_strides;
    int64_t lo = scatter ? q->dst_offset : q->src_offset, hi = lo, div = 0;
    for (int i = 0; i < k + p->naxes; i++) {            /* the outer dimensions, then the index axes */
        const int64_t t = i < k ? strides[i] : p->axes[i - k].stride / f;
        const int64_t n = i < k ? p->sizes[i] : p->axes[i - k].bound;
        if (n > 1 && t) lo += (n - 1) * t < 0 ? (n - 1) * t : 0, hi += (n - 1) * t > 0 ? (n - 1) * t : 0,
                        div = gcd(div, odml_absv(t));
    }
    q->key_base = lo;
    q->key_div = div ? div : 1;
    const int64_t n_outer = q->n_outer, slots = (hi - lo) / q->key_div + 1;
    const int64_t members = overwrite && via == 0 ? group_of(q, k, c) : 0;
    /* the owner mode: a slot a destination block, the last position reaching it (ix_owner) writes it */
    const int owner = overwrite && !members && owner_ok && n_outer < LIM32 - 1
                      && (via == 1 || slots <= (c->owner_slots > 4 * n_outer ? c->owner_slots : 4 * n_outer));
    if (overwrite && !members && !owner) return -1;
    if (members) q->members = members;
    const int positions = !scatter && q->n_inner == 1;
    int is_tile = 0, row = 0;
    for (int64_t nbytes = c->reverse_bytes; positions && c->column_walk && !is_tile; nbytes /= 2) {
        wide = *q;
        const int kw = column_walk(&wide, k, word, nbytes);
        if (c->reverse_tile && tile(&wide, kw, word, c)) {
            *q = wide;
            k = kw;
            is_tile = 1;
        } else if (nbytes <= 128) {
            k = column_walk(q, k, word, 32);
            break;
        }
    }
    int64_t items = q->n_inner >= c->items ? c->items : 1, rows = 0, pieces = 0, smem = 0, threads;
    q->groups = odml_cdiv(q->n_inner, items);
    q->total = n_outer * q->groups;
    if (positions && !is_tile)
        row = (pieces = pieces_of(q, k, word, c)) || (rows = rows_of(q, k, word, c)) ? 0 : row_of(q, k, word, c);
    const char *mode = members ? "group" : "direct";
    const int spread = positions && c->position_items > 1 && n_outer >= c->position_min;   /* ix_gather_positions */
    if (is_tile || (positions && c->column_walk && c->reverse_tile && tile(q, k, word, c))) {
        mode = "tile";
        smem = q->axes[0].bound * q->sizes[k - 1] * word;
    } else if (pieces) {
        mode = "pieces";
        q->members = pieces;
        q->total = n_outer * word / 16;
    } else if (rows) {
        mode = "rows";
        q->members = rows;
        smem = rows * (odml_cdiv(q->sizes[k - 1] * word, 16) * 16);
    } else if (row) {
        mode = "row";
    } else if (spread) {
        items = c->position_items;
        q->total = odml_cdiv(n_outer, c->position_items);
    }
    int64_t most = q->total > n_outer ? q->total : n_outer;
    if (q->n_inner > most) most = q->n_inner;
    const char *index = most + c->threads * (items > 4 ? items : 4) < LIM32 ? "u32" : "u64", *W = odml_scalar[word];
    const int n = (int)sizeof L->name, nax = (int)p->naxes;
    int len;
    if (mode[0] == 't' || mode[3] == 's' || mode[0] == 'p') {
        len = odml_name(L->name, n, "ix_reverse_%s<%s, %s, %d>", mode, W, index, k);
    } else if (mode[0] == 'r') {
        len = odml_name(L->name, n, "ix_gather_row<%s, %s, %d, %d>", W, index, k, row == 1);
        smem = row == 1 ? q->axes[0].bound * word : 0;
    } else if (spread) {
        len = odml_name(L->name, n, "ix_gather_positions<%s, %s, %d, %d, %lld>", W, index, k, nax, (long long)items);
    } else if (!scatter) {
        len = odml_name(L->name, n, "ix_gather<%s, %s, %d, %d, %d, %lld>", W, index, k, nax, ni, (long long)items);
    } else if (members) {
        len = odml_name(L->name, n, "ix_scatter_group<%s, %s, %d>", W, index, k);
        smem = 4 * q->axes[0].bound;
    } else {
        len = odml_name(L->name, n, "ix_scatter<%s, %s, %d, %d, %d, %d, %lld>", W, index, owner, k, nax, ni,
                       (long long)items);
    }
    if (len < 0 || len >= n) return -1;
    /* one_kernel */
    if (mode[0] == 'd') threads = q->total;
    else if (mode[0] == 'g') threads = n_outer / members * c->threads;
    else if (mode[0] == 't') threads = n_outer / q->members * c->threads;
    else if (mode[0] == 'p') threads = odml_cdiv(q->total, q->members) * c->threads;
    else if (mode[3] == 's') threads = odml_cdiv(n_outer / q->axes[0].bound, q->members) * c->threads;
    else threads = n_outer / q->sizes[q->outer - 1] * c->threads;
    if (q->n_outer == 0 || q->total == 0 || smem >= LIM32 || odml_grid(threads, c->threads, &L->grid)) return -1;
    L->smem = (unsigned)smem;
    L->size = (Py_ssize_t)sizeof *q;
    L->index = 1;
    L->scratch = 0;
    L->aux = owner;
    if (!owner) return 1;
    /* ix_owner first, on the same parameters (n_outer threads), then the scatter; both read the table */
    L[1] = L[0];
    L->grid = (unsigned)odml_cdiv(n_outer, c->threads);
    L->scratch = slots;
    len = odml_name(L->name, n, "ix_owner<%s, %d, %d>", index, k, nax);
    return len < 0 || len >= n || slots >= LIM32 ? -1 : 2;
}
