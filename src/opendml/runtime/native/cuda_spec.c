/* odml_new_cuda (newshape.h): the CUDA launch of a new shape's plan in C, for cuda_new's one C call
 * (calls_move_new.c). It is runtime/cuda/tuned.py's launch_spec, decision for decision (each section names what it
 * mirrors): the same kernel names, parameter bytes, grids and shared memory; tests/runtime/test_cuda_spec.py compares
 * them on random plans, layouts and pointer alignments (no device touched). -1 where a value would leave 64 bits or a
 * grid reach 2^31 blocks: the Python route runs the call. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cpu/common.h"
#include "newshape.h"

#define THREADS ODML_CUDA_THREADS

/* items_per_thread */
static int64_t items_for(int64_t w) { return w >= 16 ? 1 : (16 / w > 4 ? 16 / w : 4); }

/* _index_type(count, items) */
static const char *index_type(int64_t count, int64_t items) {
    return count + THREADS * items < ((int64_t)1 << 32) ? "u32" : "u64";
}

/* -- SLICE, SLICE1: word_plan -------------------------------------------------------------------------- */

static int copy_spec(const odml_new_plan *pl, uint64_t src, uint64_t dst, odml_cuda_spec *s) {
    const odml_copy_params *p = &pl->copy;
    odml_copy_params *q = &s->p.copy;
    *q = *p;
    const int64_t es = p->element_size;
    const int r = (int)p->rank;
    const int64_t L = p->sizes[r - 1], inner_in = p->in_strides[r - 1], inner_out = p->out_strides[r - 1];
    int64_t w = es, rev = 0, pick = 0;
    if (inner_out == 1 && inner_in == 2) {
        const int64_t f = 8 / es;             /* output elements per 8-byte word */
        int64_t hi = p->in_offset;            /* the highest element the plan reads */
        int ok = L % f == 0 && p->in_offset % (2 * f) == 0 && p->out_offset % f == 0 && src % 16 == 0
                 && dst % 8 == 0;
        for (int k = 0; k < r && ok; k++) {
            if (k < r - 1 && (p->in_strides[k] % (2 * f) || p->out_strides[k] % f)) ok = 0;
            if (p->in_strides[k] > 0) hi += (p->sizes[k] - 1) * p->in_strides[k];
        }
        if (ok && hi + 1 < pl->span) {
            for (int k = 0; k < r - 1; k++) {
                q->in_strides[k] /= 2 * f;
                q->out_strides[k] /= f;
            }
            q->element_size = 8;
            q->sizes[r - 1] = L / f;
            q->in_offset = p->in_offset / (2 * f);
            q->in_strides[r - 1] = 1;
            q->out_offset = p->out_offset / f;
            q->out_strides[r - 1] = 1;
            w = 8;
            pick = es;
        }
    } else if (inner_out == 1 && (inner_in == 1 || inner_in == -1)) {
        const int64_t low = p->in_offset - (inner_in < 0 ? L - 1 : 0);   /* lowest element of a run at index 0 */
        for (int64_t ww = 16; ww >= 2; ww /= 2) {
            const int64_t f = ww / es;
            if (f <= 1) break;
            int ok = L % f == 0 && low % f == 0 && p->out_offset % f == 0 && src % (uint64_t)ww == 0
                     && dst % (uint64_t)ww == 0;
            for (int k = 0; k < r - 1 && ok; k++)
                if (p->in_strides[k] % f || p->out_strides[k] % f) ok = 0;
            if (!ok) continue;
            for (int k = 0; k < r - 1; k++) {
                q->in_strides[k] /= f;
                q->out_strides[k] /= f;
            }
            q->element_size = ww;
            q->sizes[r - 1] = L / f;
            q->in_offset = inner_in > 0 ? low / f : low / f + L / f - 1;
            q->out_offset = p->out_offset / f;
            w = ww;
            rev = inner_in < 0 ? es : 0;
            break;
        }
    }
    int64_t count = 1;
    for (int k = 0; k < r; k++) count *= q->sizes[k];   /* at most the plan's count */
    q->count = count;
    const int64_t items = items_for(w);
    s->size = (Py_ssize_t)sizeof(odml_copy_params);
    snprintf(s->name, sizeof s->name, "strided_copy<%s, %d, %lld, %s, %lld, %lld>", odml_scalar[w], r, (long long)rev,
             index_type(count, items), (long long)items, (long long)pick);
    return odml_grid(count, THREADS * items, &s->grid);
}

/* -- UNFOLD: _unfold_launch and unfold_box ------------------------------------------------------------ */

#define TILE_MIN_STEP 8
#define BOX_COLUMNS 1024
#define BOX_LINE 128
#define BOX_BYTES (24 * 1024)

/* The staged region's extent along d for t blocks per box. */
static int extent(const odml_window_dim *wd, int64_t t, int64_t *e) {
    int64_t a, b;
    if (__builtin_mul_overflow(t - 1, wd->stride, &a) || __builtin_mul_overflow(wd->window - 1, wd->dilation, &b)
            || __builtin_add_overflow(a, b, e) || __builtin_add_overflow(*e, 1, e)) return -1;
    return 0;
}

static int64_t prod_le(const int64_t *v, int n, int *overflow) {
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        if (__builtin_mul_overflow(p, v[i], &p)) *overflow = 1;
    return p;
}

/* unfold_box: 1 with t and ext filled, 0 where staging does not pay, -1 on overflow. */
static int unfold_box(const odml_unfold_params *u, int64_t *t, int64_t *ext) {
    const int D = (int)u->dims;
    int overflow = 0;
    int64_t nb[ODML_MAX_SPATIAL], win[ODML_MAX_SPATIAL];
    for (int d = 0; d < D; d++) {
        nb[d] = u->dim[d].blocks;
        win[d] = u->dim[d].window;
        t[d] = 1;
    }
    const int64_t first = D > 1 ? BOX_LINE : BOX_COLUMNS;
    t[D - 1] = nb[D - 1] < first ? nb[D - 1] : first;
    for (int d = D - 2; d >= 0; d--) {
        const int64_t inner = prod_le(t + d + 1, D - d - 1, &overflow);
        int64_t want = odml_cdiv(BOX_COLUMNS, inner);
        if (want < 1) want = 1;
        t[d] = nb[d] < want ? nb[d] : want;
    }
    for (;;) {
        for (int d = 0; d < D; d++)
            if (extent(&u->dim[d], t[d], &ext[d])) return -1;
        const int64_t region = prod_le(ext, D, &overflow);
        int64_t bytes;
        if (overflow || __builtin_mul_overflow(region, u->element_size, &bytes)) return -1;
        if (bytes <= BOX_BYTES) break;
        int d = 0;
        while (d < D && t[d] <= 1) d++;
        if (d == D) return 0;
        t[d] = (t[d] + 1) / 2;
    }
    int64_t boxes = u->batch, two, inside;
    if (__builtin_mul_overflow(boxes, u->channels, &boxes)) return -1;
    for (int d = 0; d < D; d++)
        if (__builtin_mul_overflow(boxes, odml_cdiv(nb[d], t[d]), &boxes)) return -1;
    const int64_t region = prod_le(ext, D, &overflow), box = prod_le(t, D, &overflow);
    const int64_t k = prod_le(win, D, &overflow);
    if (overflow || __builtin_mul_overflow(box, k, &inside) || __builtin_mul_overflow(inside, 2, &two)) return -1;
    return region > two || boxes >= ((int64_t)1 << 31) ? 0 : 1;
}

static int unfold_spec(const odml_new_plan *pl, odml_cuda_spec *s) {
    odml_unfold_params *q = &s->p.windows;
    *q = pl->windows;                         /* CUDA leaves the CPU's column-tile fields 0 */
    const int64_t es = q->element_size, D = q->dims, B = q->block_count;
    const int64_t r = es >= 2 ? 2 : 1, v = 16 / es * r;   /* columns per thread */
    int64_t slots, rows, tiles, bc;
    if (__builtin_mul_overflow(q->channels, q->window_count, &rows)
            || __builtin_mul_overflow(q->batch, rows, &slots) || __builtin_mul_overflow(slots, odml_cdiv(B, v), &slots)
            || __builtin_mul_overflow(q->batch, q->channels, &bc)
            || __builtin_mul_overflow(bc, odml_cdiv(q->dim[0].window, 32), &tiles)
            || __builtin_mul_overflow(tiles, odml_cdiv(B, 32), &tiles)) return -1;
    q->work_items = slots;
    s->size = (Py_ssize_t)sizeof(odml_unfold_params);
    const char *S = odml_scalar[es];
    int64_t step;
    if (D == 1 && !__builtin_mul_overflow(q->dim[0].stride, q->dim[0].image_stride, &step) && step != INT64_MIN
            && (step < 0 ? -step : step) >= TILE_MIN_STEP && q->dim[0].window >= 8 && tiles < ((int64_t)1 << 31)) {
        int64_t most = tiles, bw, idx;
        if (__builtin_mul_overflow(bc, q->dim[0].window, &bw)) return -1;
        if (bw > most) most = bw;
        if (B > most) most = B;
        if (__builtin_mul_overflow(most, 32, &idx) || idx > ODML_LIMIT) return -1;
        snprintf(s->name, sizeof s->name, "unfold1d_tile<%s, %s>", S, index_type(idx, 16));
        return odml_grid(tiles, 1, &s->grid);
    }
    int64_t t[ODML_MAX_SPATIAL], ext[ODML_MAX_SPATIAL];
    const int box = unfold_box(q, t, ext);
    if (box < 0) return -1;
    if (box) {
        int64_t work = bc, region = 1;
        for (int d = 0; d < D; d++) {
            const int64_t n = odml_cdiv(q->dim[d].blocks, t[d]);
            work *= n;                        /* < 2^31: unfold_box checked it */
            region *= ext[d];                 /* <= BOX_BYTES / es */
            q->dim[d].box = t[d];
            q->dim[d].box_extent = ext[d];
            q->dim[d].box_count = n;
        }
        q->work_items = work;
        s->smem = (unsigned)(region * es);
        /* tile_vectors: VEC = 1 where the columns are contiguous, the rows 16-byte multiples apart and the box
         * spans every dimension but the first whole */
        int vec = q->out_column_stride == 1 && q->out_row_stride >= 0 && (q->out_row_stride % 16) * es % 16 == 0;
        for (int d = 1; d < D; d++) vec = vec && t[d] == q->dim[d].blocks;
        snprintf(s->name, sizeof s->name, "unfold_tile<%s, %d, %d>", S, (int)D, vec);
        return odml_grid(work, 1, &s->grid);
    }
    int64_t lanes;
    if (__builtin_mul_overflow(slots, v, &lanes) || lanes > ODML_LIMIT) return -1;
    snprintf(s->name, sizeof s->name, "unfold_gather<%s, %d, %s, %lld>", S, (int)D, index_type(lanes, 16),
             (long long)r);
    return odml_grid(slots, THREADS, &s->grid);
}

/* -- FOLD: _fold_launch ------------------------------------------------------------------------------- */

#define FOLD_TILE_MIN_STRIDE 32

/* fold1d_tile's CUDA blocks for RC residues per block (_fold_tiles); -1 on overflow */
static int64_t fold_tiles(const odml_fold_params *q, int64_t rc) {
    const odml_window_dim *wd = &q->dim[0];
    const int64_t hops = (wd->start_padding + wd->size - 1) / wd->stride - wd->start_padding / wd->stride + 1;
    int64_t t;
    if (__builtin_mul_overflow(q->batch, q->channels, &t) || __builtin_mul_overflow(t, odml_cdiv(hops, 32), &t)
            || __builtin_mul_overflow(t, odml_cdiv(wd->stride, rc), &t)) return -1;
    return t;
}

static int fold_spec(const odml_new_plan *pl, odml_cuda_spec *s) {
    odml_fold_params *q = &s->p.window_sums;
    *q = pl->window_sums;
    const int64_t es = q->element_size, D = q->dims, flt = q->sum_kind == ODML_SUM_FLOAT;
    const char *S = odml_scalar[es];
    s->size = (Py_ssize_t)sizeof(odml_fold_params);
    if (flt && es == 1) return -1;
    if (D == 1 && q->dim[0].stride >= FOLD_TILE_MIN_STRIDE) {   /* fold1d_tile (fold_tile_residues) */
        int64_t rc = 128;
        while (rc > 32 && rc >= 2 * q->dim[0].stride) rc /= 2;
        const int64_t blocks = fold_tiles(q, rc);
        if (blocks >= 0 && blocks < ((int64_t)1 << 31)) {
            q->work_items = blocks;
            snprintf(s->name, sizeof s->name, "fold1d_tile<%s, %d, %lld>", S, (int)flt, (long long)rc);
            return odml_grid(blocks, 1, &s->grid);
        }
    }
    /* fold_gather: V the largest of 4, 2 whose warps keep FOLD_LANE_USE (0.85) of a line's lanes busy, else 1 */
    const int64_t width = q->dim[D - 1].size;
    int64_t v = 1, warps = 1, lanes;
    for (int64_t c = 4; c >= 2 && v == 1; c /= 2)
        if (width * 20 >= 17 * odml_cdiv(width, 32 * c) * 32 * c) v = c;
    if (__builtin_mul_overflow(q->batch, q->channels, &warps)) return -1;
    for (int64_t d = 0; d < D - 1; d++)
        if (__builtin_mul_overflow(warps, q->dim[d].size, &warps)) return -1;
    if (__builtin_mul_overflow(warps, odml_cdiv(width, 32 * v), &warps) || __builtin_mul_overflow(warps, 32, &lanes))
        return -1;
    q->work_items = warps;
    snprintf(s->name, sizeof s->name, "fold_gather<%s, %d, %d, %s, %lld>", S, (int)flt, (int)D,
             index_type(lanes, 16), (long long)v);
    return odml_grid(lanes, THREADS, &s->grid);
}

/* -- SLICE_GRAD: ScatterPlan.canonical and scatter_word_plan -------------------------------------------- */

static int scatter_spec(const odml_new_plan *pl, uint64_t src, uint64_t dst, odml_cuda_spec *s) {
    int64_t merged[ODML_MAX_RANK][6];
    int r;
    if (odml_scatter_canonical(pl, 0, merged, &r)) return -1;      /* ScatterPlan.canonical(cpu=False) */
    const int64_t es = pl->es;
    int64_t in_offset = pl->s_in_offset, out_offset = 0, w = es, rev = 0;
    /* scatter_word_plan */
    int64_t *last = merged[r - 1];
    const int64_t L = last[0], os_ = last[1], first = last[2], step = last[3], taken = last[4], is_ = last[5];
    if (os_ == 1 && step == 1 && (is_ == 1 || is_ == -1)) {
        for (int64_t ww = 16; ww >= 2; ww /= 2) {
            const int64_t f = ww / es;
            if (f <= 1) break;
            const int64_t low = is_ > 0 ? in_offset : in_offset - (f - 1);   /* lowest element of the first word */
            int ok = L % f == 0 && first % f == 0 && taken % f == 0 && low % f == 0 && out_offset % f == 0
                     && src % (uint64_t)ww == 0 && dst % (uint64_t)ww == 0;
            for (int k = 0; k < r - 1 && ok; k++)
                if (merged[k][5] % f || merged[k][1] % f) ok = 0;
            if (!ok) continue;
            for (int k = 0; k < r - 1; k++) {
                merged[k][1] /= f;
                merged[k][5] /= f;
            }
            last[0] = L / f;
            last[2] = first / f;
            last[4] = taken / f;
            in_offset = low / f;
            out_offset /= f;
            w = ww;
            rev = is_ < 0 ? es : 0;
            break;
        }
    }
    odml_scatter_params *q = &s->p.scatter;
    if (odml_scatter_pack(w, (const int64_t (*)[6])merged, r, in_offset, out_offset, q)) return -1;
    const int64_t count = q->count;
    const int64_t items = items_for(w);
    s->size = (Py_ssize_t)sizeof(odml_scatter_params);
    snprintf(s->name, sizeof s->name, "scatter<%s, %d, %lld, %s, %lld>", odml_scalar[w], r, (long long)rev,
             index_type(count, items), (long long)items);
    return odml_grid(count, THREADS * items, &s->grid);
}

int odml_new_cuda(const odml_new_plan *pl, uint64_t src, uint64_t dst, odml_cuda_spec *s) {
    s->smem = 0;                              /* (unfold_tile's: its box) */
    switch (pl->kind) {
    case ODML_NEW_COPY: return copy_spec(pl, src, dst, s);
    case ODML_NEW_WINDOWS: return unfold_spec(pl, s);
    case ODML_NEW_WINDOW_SUMS: return fold_spec(pl, s);
    default: return scatter_spec(pl, src, dst, s);
    }
}
