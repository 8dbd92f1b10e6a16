/* odml_windows, UNFOLD's gather (UnfoldPlan): out[n, c*K + k, b] = image[n, c, b*stride + k*dilation -
 * start_padding], or 0 where that position lies in the padding.
 *
 * column_tiles 0: a unit is one output row (n, c, k), written column by column.
 * column_tiles 1: a unit is (n, c, a tile of tile_columns columns), written for every k in turn, so the input lines a
 *   tile reads stay in cache across the K rows (a large input stride along the innermost block dimension).
 *
 * Positions are small signed numbers (every field is bounded so that b*stride + k*dilation - start_padding fits),
 * multiplied by an image stride only inside the image, so no offset of a position in the padding is ever formed;
 * size-1 dimensions get stride 0. Scratch: a few arrays of ODML_MAX_SPATIAL entries on the stack. */
#include "common.h"
#include "runs.h"

#define MAXS ODML_MAX_SPATIAL

typedef struct {
    char *dst; const char *src; int es, D, mode, shift_rows;
    int64_t batch, channels, K, cols, tile, ntiles;
    int64_t on, orow, ocol, in_n, in_c;                      /* bytes */
    int64_t size[MAXS], is[MAXS], win[MAXS], st[MAXS], dil[MAXS], pad[MAXS], blocks[MAXS];
} unfold_job;

/* Blocks b of dimension d with 0 <= b*st + shift < size, as [lo, hi). */
static inline void valid_blocks(const unfold_job *j, int d, int64_t shift, int64_t *lo, int64_t *hi) {
    int64_t st = j->st[d], l = shift < 0 ? (-shift + st - 1) / st : 0;
    int64_t last = j->size[d] - 1 - shift;          /* highest b*st allowed */
    int64_t h = last >= 0 ? last / st + 1 : 0;
    if (h > j->blocks[d]) h = j->blocks[d];
    if (l > j->blocks[d]) l = j->blocks[d];
    if (h < l) h = l;
    *lo = l; *hi = h;
}

/* Columns [j0, j1) of the row of window index k (flat) of image (n, c). */
static void unfold_segment(const unfold_job *j, int64_t n, int64_t c, int64_t k, int64_t j0, int64_t j1) {
    const int D = j->D, last = D - 1, es = j->es;
    int64_t b[MAXS], shift[MAXS], lo[MAXS], hi[MAXS];
    int64_t rem = k;
    for (int d = last; d >= 0; d--) {
        int64_t kd = rem % j->win[d];
        rem /= j->win[d];
        shift[d] = kd * j->dil[d] - j->pad[d];
        valid_blocks(j, d, shift[d], &lo[d], &hi[d]);
    }
    char *row = j->dst + n * j->on + (c * j->K + k) * j->orow;
    const char *image = j->src + n * j->in_n + c * j->in_c;
    rem = j0;
    for (int d = last; d >= 0; d--) { b[d] = rem % j->blocks[d]; rem /= j->blocks[d]; }
    /* the innermost dimension's first valid position's offset, and the step between valid positions (formed only
     * where two exist, so it fits) */
    const int64_t first = lo[last] < hi[last] ? (lo[last] * j->st[last] + shift[last]) * j->is[last] : 0;
    const int64_t istep = hi[last] - lo[last] > 1 ? j->st[last] * j->is[last] : 0;
    int64_t col = j0;
    while (col < j1) {
        int64_t len = j->blocks[last] - b[last];
        if (len > j1 - col) len = j1 - col;
        char *out = row + col * j->ocol;
        int ok = 1;
        int64_t off = 0;
        for (int d = 0; d < last; d++) {
            if (b[d] < lo[d] || b[d] >= hi[d]) { ok = 0; break; }
            off += (b[d] * j->st[d] + shift[d]) * j->is[d];     /* a position inside the image */
        }
        int64_t a = b[last], e = b[last] + len;
        int64_t c0 = a > lo[last] ? a : lo[last], c1 = e < hi[last] ? e : hi[last];
        if (!ok || c1 <= c0) {
            zero_run(out, len, j->ocol, es);
        } else {
            const char *in = image + off + first + (c0 - lo[last]) * istep;
            zero_run(out, c0 - a, j->ocol, es);
            copy_run(out + (c0 - a) * j->ocol, in, c1 - c0, j->ocol, istep, es, 0);
            zero_run(out + (c1 - a) * j->ocol, e - c1, j->ocol, es);
        }
        col += len;
        b[last] += len;
        for (int d = last; d > 0 && b[d] >= j->blocks[d]; d--) { b[d] = 0; b[d - 1]++; }
    }
}

static void unfold_units(const void *vjob, int64_t u0, int64_t u1, int part) {
    const unfold_job *j = (const unfold_job *)vjob;
    (void)part;
    for (int64_t u = u0; u < u1; u++) {
        if (j->mode == 0) {
            int64_t k = u % j->K, nc = u / j->K;
            unfold_segment(j, nc / j->channels, nc % j->channels, k, 0, j->cols);
        } else {
            int64_t t = u % j->ntiles, nc = u / j->ntiles;
            int64_t n = nc / j->channels, c = nc % j->channels;
            int64_t c0 = t * j->tile, c1 = c0 + j->tile < j->cols ? c0 + j->tile : j->cols;
            /* 1-D with dilation dividing stride (framing): window indices k and k - q, q = stride/dilation, read the
             * same input one block apart, so row k is row k - q (already written in this tile) moved left one column
             * and only the tile's last column is gathered. Rows sharing memory (!shift_rows) must not be read back. */
            int64_t q = (j->D == 1 && j->st[0] % j->dil[0] == 0) ? j->st[0] / j->dil[0] : 0;
            int shift_ok = j->shift_rows && q > 0 && j->ocol == j->es && c1 - c0 > 1;
            char *rows = j->dst + n * j->on + c * j->K * j->orow;
            for (int64_t k = 0; k < j->K; k++) {
                if (shift_ok && k >= q) {
                    memcpy(rows + k * j->orow + c0 * j->ocol, rows + (k - q) * j->orow + (c0 + 1) * j->ocol,
                           (size_t)((c1 - 1 - c0) * j->es));
                    unfold_segment(j, n, c, k, c1 - 1, c1);
                } else {
                    unfold_segment(j, n, c, k, c0, c1);
                }
            }
        }
    }
}

int odml_windows(char *dst, const char *src, const odml_unfold_params *p, int threads, const char **error) {
    const int64_t L = ODML_LIMIT / 2, S = ODML_LIMIT / 8, es = p->element_size;   /* position parts; strides, offsets */
    if (odml_bad_dims(p->dims, MAXS, es, "unfold: element_size must be 1, 2, 4 or 8 and dims in [1, 6]", error))
        return ODML_EPARAM;
    unfold_job j = {.es = (int)es, .D = (int)p->dims};
    if (!IN_RANGE(p->batch, 0, L) || !IN_RANGE(p->channels, 0, L) || !IN_RANGE(p->in_offset, -S, S) ||
        !IN_RANGE(p->out_offset, 0, S)) {
        *error = "unfold: batch, channels or an offset out of range";
        return ODML_EPARAM;
    }
    int empty = p->batch == 0 || p->channels == 0;
    j.K = 1; j.cols = 1;
    for (int d = 0; d < j.D; d++) {
        const odml_window_dim *w = &p->dim[d];
        if (!IN_RANGE(w->size, 0, L) || !IN_RANGE(w->window, 1, L) || !IN_RANGE(w->stride, 1, L) ||
            !IN_RANGE(w->dilation, 1, L) || !IN_RANGE(w->start_padding, 0, L) || !IN_RANGE(w->blocks, 0, L) ||
            !odml_mul_le(w->window - 1, w->dilation, L) || !odml_mul_le(w->blocks, w->stride, L) ||
            (w->size > 1 && !IN_RANGE(w->image_stride, -S, S))) {
            *error = "unfold: a spatial dimension's size, window, stride, dilation, padding, blocks or "
                     "image stride is out of range";
            return ODML_EPARAM;
        }
        j.size[d] = w->size; j.win[d] = w->window; j.st[d] = w->stride; j.dil[d] = w->dilation;
        j.pad[d] = w->start_padding; j.blocks[d] = w->blocks;
        j.is[d] = w->size > 1 ? w->image_stride * es : 0;
        if (w->blocks == 0) empty = 1;
        if (!odml_mul_le(j.K, w->window, L) || !odml_mul_le(j.cols, w->blocks > 0 ? w->blocks : 1, L)) {
            *error = "unfold: too many window elements or blocks";
            return ODML_EPARAM;
        }
        j.K *= w->window; j.cols *= w->blocks > 0 ? w->blocks : 1;
    }
    if (empty) return ODML_OK;
    int64_t sizes[3] = {p->batch, p->channels * j.K, j.cols}, strides[3];
    if (!odml_mul_le(p->batch * p->channels, j.K, L) || !odml_mul_le(sizes[0] * sizes[1], j.cols, L)) {
        *error = "unfold: too many output elements";
        return ODML_EPARAM;
    }
    const int64_t *os[3] = {&p->out_batch_stride, &p->out_row_stride, &p->out_column_stride};
    for (int a = 0; a < 3; a++) {
        if (sizes[a] > 1 && !IN_RANGE(*os[a], 0, S)) { *error = "unfold: output strides must be in [0, 2^59]"; return ODML_EPARAM; }
        strides[a] = sizes[a] > 1 ? *os[a] * es : 0;
    }
    if ((p->batch > 1 && !IN_RANGE(p->in_batch_stride, -S, S)) ||
        (p->channels > 1 && !IN_RANGE(p->in_channel_stride, -S, S))) {
        *error = "unfold: input strides must be in [-2^59, 2^59]";
        return ODML_EPARAM;
    }
    j.batch = p->batch; j.channels = p->channels;
    j.on = strides[0]; j.orow = strides[1]; j.ocol = strides[2];
    j.in_n = p->batch > 1 ? p->in_batch_stride * es : 0;
    j.in_c = p->channels > 1 ? p->in_channel_stride * es : 0;
    j.mode = p->column_tiles == 1;
    j.tile = p->tile_columns > 0 ? p->tile_columns : 256;
    j.shift_rows = odml_disjoint(3, sizes, strides, es);
    if (!j.shift_rows) threads = 1;
    j.dst = dst + p->out_offset * es;
    j.src = src + p->in_offset * es;
    int64_t units;
    if (j.mode == 1) {
        j.ntiles = j.cols / j.tile + (j.cols % j.tile != 0);
        units = j.batch * j.channels * j.ntiles;
    } else {
        units = j.batch * j.channels * j.K;
    }
    odml_parallel(unfold_units, &j, units, threads);
    return ODML_OK;
}
