/* SLICE_GRAD's scatter into zeros (ScatterPlan): out[p] = in[i] where p = first + i*step with 0 <= i < taken in every
 * dimension, else 0.
 *
 * A unit of work is one output row (all but the innermost position fixed). A row not covered in every outer dimension
 * is zeroed; a covered one gets its leading zeros, its input elements (one run copy for step 1, else element by
 * element with the zero gaps) and its trailing zeros. Each output element is written once, so the output is never
 * read or cleared first. Python drops size-1 dimensions and merges fully covered neighbours. */
#include "common.h"
#include "runs.h"

typedef struct {
    char *dst; const char *src; int es, R, none;           /* none: some dimension takes nothing */
    int64_t size[ODML_MAX_RANK], os[ODML_MAX_RANK], first[ODML_MAX_RANK], step[ODML_MAX_RANK];
    int64_t taken[ODML_MAX_RANK], is[ODML_MAX_RANK];          /* strides in bytes */
} scatter_job;

/* Position p of an outer dimension: i, r with p - first = i*step + r. */
typedef struct { int64_t p, i, r; } pos_t;

static inline int covered(const scatter_job *j, int d, const pos_t *q) {
    return q->p >= j->first[d] && q->r == 0 && q->i < j->taken[d];
}

static inline void pos_set(const scatter_job *j, int d, pos_t *q, int64_t p) {
    q->p = p;
    if (p >= j->first[d]) { q->i = (p - j->first[d]) / j->step[d]; q->r = (p - j->first[d]) % j->step[d]; }
    else { q->i = 0; q->r = 0; }
}

static inline void pos_next(const scatter_job *j, int d, pos_t *q) {
    q->p++;
    if (q->p > j->first[d] && ++q->r == j->step[d]) { q->r = 0; q->i++; }
}

static inline void copy_elem(char *d, const char *s, int es) {
    switch (es) {
    case 1: memcpy(d, s, 1); break;
    case 2: memcpy(d, s, 2); break;
    case 4: memcpy(d, s, 4); break;
    default: memcpy(d, s, 8); break;
    }
}

static void scatter_row(const scatter_job *j, char *out, const char *in) {
    const int d = j->R - 1, es = j->es;
    const int64_t f = j->first[d], step = j->step[d], t = j->taken[d], n = j->size[d];
    const int64_t os = j->os[d], is = j->is[d];
    const int64_t end = f + (t - 1) * step + 1;       /* one past the last covered position */
    if (step == 1 && os == es && is == es) {          /* contiguous both sides: one row fill */
        fill_row(out, n * es, f * es, in, t * es);
        return;
    }
    zero_run(out, f, os, es);
    if (step == 1) {
        copy_run(out + f * os, in, t, os, is, es, 0);
    } else {
        for (int64_t i = 0; i < t; i++) {
            char *o = out + (f + i * step) * os;
            copy_elem(o, in + i * is, es);
            if (i + 1 < t) zero_run(o + os, step - 1, os, es);
        }
    }
    zero_run(out + end * os, n - end, os, es);
}

static void scatter_units(const void *vjob, int64_t u0, int64_t u1, int part) {
    const scatter_job *j = (const scatter_job *)vjob;
    const int last = j->R - 1;
    pos_t q[ODML_MAX_RANK];
    int64_t rem = u0;
    (void)part;
    for (int d = last - 1; d >= 0; d--) { pos_set(j, d, &q[d], rem % j->size[d]); rem /= j->size[d]; }
    for (int64_t u = u0; u < u1; u++) {
        char *out = j->dst;
        const char *in = j->src;
        int all = !j->none;
        for (int d = 0; d < last; d++) {
            out += q[d].p * j->os[d];
            if (all && covered(j, d, &q[d])) in += q[d].i * j->is[d];
            else all = 0;
        }
        if (all) scatter_row(j, out, in);
        else zero_run(out, j->size[last], j->os[last], j->es);
        for (int d = last - 1; d >= 0; d--) {
            pos_next(j, d, &q[d]);
            if (q[d].p < j->size[d]) break;
            pos_set(j, d, &q[d], 0);
        }
    }
}

int odml_scatter(char *dst, const char *src, const odml_scatter_params *p, int threads, const char **error) {
    const int64_t L = ODML_LIMIT / 2, S = ODML_LIMIT / 8, es = p->element_size;
    if (odml_bad_dims(p->rank, ODML_MAX_RANK, es,
                      "scatter: element_size must be 1, 2, 4 or 8 and rank in [1, 8]", error))
        return ODML_EPARAM;
    scatter_job j = {.es = (int)es, .R = (int)p->rank};
    if (!IN_RANGE(p->in_offset, -S, S) || !IN_RANGE(p->out_offset, 0, S)) {
        *error = "scatter: offsets must be in [-2^59, 2^59] (output offset >= 0)";
        return ODML_EPARAM;
    }
    int64_t rows = 1, count = 1;
    int none = 0;
    for (int d = 0; d < j.R; d++) {
        int64_t n = p->sizes[d], f = p->first[d], s = p->step[d], t = p->taken[d];
        if (!IN_RANGE(n, 0, L) || !IN_RANGE(s, 1, L) || !IN_RANGE(t, 0, L) || !IN_RANGE(f, 0, L) ||
            (n > 0 && t > 0 && (f >= n || (t - 1) > (n - 1 - f) / s)) ||
            (n > 1 && !IN_RANGE(p->out_strides[d], 0, S)) || (t > 1 && !IN_RANGE(p->in_strides[d], -S, S))) {
            *error = "scatter: a dimension's size, first, step, taken or stride is out of range "
                     "(first + (taken - 1) * step must be < size)";
            return ODML_EPARAM;
        }
        if (n == 0) return ODML_OK;
        if (t == 0) none = 1;
        if (!odml_mul_le(count, n, L)) { *error = "scatter: too many output elements"; return ODML_EPARAM; }
        count *= n;
        if (d < j.R - 1) rows *= n;
        j.size[d] = n; j.first[d] = f; j.step[d] = s; j.taken[d] = t;
        j.os[d] = n > 1 ? p->out_strides[d] * es : 0;
        j.is[d] = t > 1 ? p->in_strides[d] * es : 0;
    }
    j.dst = dst + p->out_offset * es;
    j.src = src + p->in_offset * es;
    j.none = none;
    if (!odml_disjoint(j.R, j.size, j.os, es)) threads = 1;
    odml_parallel(scatter_units, &j, rows, threads);
    return ODML_OK;
}
