/* odml_window_sums, FOLD's windowed sum (FoldPlan) as a gather: image[n, c, p] = +0, then += columns[n, c*K + k, b]
 * for every window index k in increasing row-major order whose block b satisfies b*stride + k*dilation -
 * start_padding == p in every spatial dimension.
 *
 * A unit of work is a tile of up to `tile` positions of one output row (all but the innermost position fixed), summed
 * in an accumulator row (float32 for float16, the element's own type for float32 and float64, the unsigned word of
 * the element's size for integers, so integer sums wrap as two's complement whatever the signedness): for each window
 * index k in order that the outer positions admit (block index whole and in range in every outer dimension), the
 * contributing run of the innermost dimension is added; then the row is stored once (float16 rounded once, ties to
 * even: fp16.h; a NaN sum of any float type as the canonical quiet NaN). Each output element is written once and each
 * sum is formed in the NumPy path's order (zeros, then one strided add per window index), so both give the same bits.
 * No atomics; threads take contiguous ranges of units, each with one accumulator row (`tile` entries) of scratch. */
#include <stdlib.h>

#include "common.h"
#include "fp16.h"

#define MAXS ODML_MAX_SPATIAL

typedef struct {
    char *dst; const char *src; int es, D;
    int64_t batch, channels, K, tile, ntiles;
    int64_t in_n, in_row, in_col, on, oc;                     /* bytes */
    int64_t size[MAXS], os[MAXS], win[MAXS], st[MAXS], dil[MAXS], pad[MAXS], blocks[MAXS];
    int64_t kstr[MAXS], bstr[MAXS];                           /* flat window / block index strides */
    char *scratch;                                            /* one accumulator row per thread */
} fold_job;

/* Runs queued for one output tile: acc[a, a + n) (a + i*stride for a stride above 1) += input elements from s on. */
#define FOLD_BATCH 16
typedef struct { int64_t a, n; const char *s; } fold_run;
typedef struct { fold_run run[FOLD_BATCH]; int n; } fold_batch;

static inline uint16_t ld_u16(const char *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline void st_f16(char *p, float v) { uint16_t h = odml_f2h(v); memcpy(p, &h, 2); }

#define FOLD_SUFFIX _u8
#define FOLD_T uint8_t
#include "fold_impl.h"

#define FOLD_SUFFIX _u16
#define FOLD_T uint16_t
#include "fold_impl.h"

#define FOLD_SUFFIX _u32
#define FOLD_T uint32_t
#include "fold_impl.h"

#define FOLD_SUFFIX _u64
#define FOLD_T uint64_t
#include "fold_impl.h"

#define FOLD_SUFFIX _f16
#define FOLD_NAN odml_nan_f32()
#define FOLD_ES 2
#define FOLD_T float
#define FOLD_LOAD(p) odml_h2f(ld_u16(p))
#define FOLD_STORE(p, v) st_f16((p), (v))
#define FOLD_SAME 0
#include "fold_impl.h"

#define FOLD_SUFFIX _f32
#define FOLD_NAN odml_nan_f32()
#define FOLD_T float
#include "fold_impl.h"

#define FOLD_SUFFIX _f64
#define FOLD_NAN odml_nan_f64()
#define FOLD_T double
#include "fold_impl.h"

/* Accumulator rows of about this many bytes: a tile stays in L1/L2 while the window rows are added into it; wider for
 * large strides, so each window index still adds a run of several elements per tile. */
#define TILE_BYTES 16384
#define TILE_MAX 65536

int odml_window_sums(char *dst, const char *src, const odml_fold_params *p, int threads, const char **error) {
    const int64_t L = ODML_LIMIT / 2, S = ODML_LIMIT / 8, es = p->element_size;
    if (odml_bad_dims(p->dims, MAXS, es, "fold: element_size must be 1, 2, 4 or 8 and dims in [1, 6]", error))
        return ODML_EPARAM;
    fold_job j = {.es = (int)es, .D = (int)p->dims};
    odml_work_fn fn;
    size_t acc_size;
    if (p->sum_kind == ODML_SUM_INTEGER) {
        fn = es == 1 ? fold_units_u8 : es == 2 ? fold_units_u16 : es == 4 ? fold_units_u32 : fold_units_u64;
        acc_size = (size_t)es;
    } else if (p->sum_kind == ODML_SUM_FLOAT && es > 1) {
        fn = es == 2 ? fold_units_f16 : es == 4 ? fold_units_f32 : fold_units_f64;
        acc_size = es == 8 ? 8 : 4;
    } else {
        *error = "fold: sum_kind must be ODML_SUM_INTEGER, or ODML_SUM_FLOAT with element_size 2, 4 or 8";
        return ODML_EPARAM;
    }
    if (!IN_RANGE(p->batch, 0, L) || !IN_RANGE(p->channels, 0, L) || !IN_RANGE(p->in_offset, -S, S) ||
        !IN_RANGE(p->out_offset, 0, S)) {
        *error = "fold: batch, channels or an offset out of range";
        return ODML_EPARAM;
    }
    int64_t K = 1, B = 1, rows = p->batch * p->channels, inner = 1;
    int empty = rows == 0;
    for (int d = 0; d < j.D; d++) {
        const odml_window_dim *w = &p->dim[d];
        if (!IN_RANGE(w->size, 0, L) || !IN_RANGE(w->window, 1, L) || !IN_RANGE(w->stride, 1, L) ||
            !IN_RANGE(w->dilation, 1, L) || !IN_RANGE(w->start_padding, 0, L) || !IN_RANGE(w->blocks, 0, L) ||
            !odml_mul_le(w->window - 1, w->dilation, L) || !odml_mul_le(w->blocks, w->stride, L) ||
            (w->size > 1 && !IN_RANGE(w->image_stride, 0, S))) {
            *error = "fold: a spatial dimension's size, window, stride, dilation, padding, blocks or "
                     "image stride is out of range";
            return ODML_EPARAM;
        }
        j.size[d] = w->size; j.win[d] = w->window; j.st[d] = w->stride; j.dil[d] = w->dilation;
        j.pad[d] = w->start_padding; j.blocks[d] = w->blocks;
        j.os[d] = w->size > 1 ? w->image_stride * es : 0;
        if (!odml_mul_le(K, w->window, L) || !odml_mul_le(B, w->blocks, L) || !odml_mul_le(rows, w->size, L)) {
            *error = "fold: too many window elements, blocks or output elements";
            return ODML_EPARAM;
        }
        K *= w->window; B *= w->blocks;
        if (d < j.D - 1) rows *= w->size; else inner = w->size;
        if (w->size == 0) empty = 1;
    }
    if (p->window_count != K || p->block_count != B) {
        *error = "fold: window_count and block_count must be the products of the windows and blocks";
        return ODML_EPARAM;
    }
    if (empty) return ODML_OK;
    if (!odml_mul_le(p->channels, K, L)) { *error = "fold: too many input rows"; return ODML_EPARAM; }
    if ((p->batch > 1 && !IN_RANGE(p->in_batch_stride, -S, S)) ||
        (p->channels * K > 1 && !IN_RANGE(p->in_row_stride, -S, S)) || (B > 1 && !IN_RANGE(p->in_column_stride, -S, S)) ||
        (p->batch > 1 && !IN_RANGE(p->out_batch_stride, 0, S)) ||
        (p->channels > 1 && !IN_RANGE(p->out_channel_stride, 0, S))) {
        *error = "fold: strides must be in [-2^59, 2^59] (output strides >= 0)";
        return ODML_EPARAM;
    }
    j.batch = p->batch; j.channels = p->channels; j.K = K;
    j.in_n = p->batch > 1 ? p->in_batch_stride * es : 0;
    j.in_row = p->channels * K > 1 ? p->in_row_stride * es : 0;
    j.in_col = B > 1 ? p->in_column_stride * es : 0;
    j.on = p->batch > 1 ? p->out_batch_stride * es : 0;
    j.oc = p->channels > 1 ? p->out_channel_stride * es : 0;
    int64_t kk = 1, bb = 1;
    for (int d = j.D - 1; d >= 0; d--) {
        j.kstr[d] = kk; j.bstr[d] = bb;
        kk *= j.win[d]; bb *= j.blocks[d];
    }
    int64_t tile = TILE_BYTES / (int64_t)acc_size, st_last = j.st[j.D - 1];
    if (st_last > 1 && tile < 64 * st_last) tile = st_last < TILE_MAX / 64 ? 64 * st_last : TILE_MAX;
    if (tile > inner) tile = inner;
    j.tile = tile;
    j.ntiles = inner / tile + (inner % tile != 0);
    if (!odml_mul_le(rows, j.ntiles, L)) { *error = "fold: too many output rows"; return ODML_EPARAM; }
    const int64_t units = rows * j.ntiles;
    int64_t sizes[ODML_MAX_RANK] = {p->batch, p->channels}, strides[ODML_MAX_RANK] = {j.on, j.oc};
    for (int d = 0; d < j.D; d++) { sizes[2 + d] = j.size[d]; strides[2 + d] = j.os[d]; }
    if (!odml_disjoint(2 + j.D, sizes, strides, es)) threads = 1;   /* colliding outputs: one writer */
    if (threads < 1) threads = 1;
    if (threads > ODML_MAX_THREADS) threads = ODML_MAX_THREADS;
    if (threads > units) threads = (int)units;
    j.scratch = (char *)malloc((size_t)threads * (size_t)tile * acc_size);
    if (!j.scratch) return ODML_ENOMEM;
    j.dst = dst + p->out_offset * es;
    j.src = src + p->in_offset * es;
    odml_parallel(fn, &j, units, threads);
    free(j.scratch);
    return ODML_OK;
}
