/* The strided copy (CopyPlan: SLICE, SLICE1): out[o0 + sum(i*os)] = in[i0 + sum(i*is)] over `sizes`, with signed
 * input strides, and the streaming-store threshold. A unit of work is one run of the innermost dimension; the plan
 * comes canonicalised (size-1 dimensions dropped, ordered by output stride, neighbours merged). */
#include "common.h"
#include "runs.h"

/* Copies with at least this much output write contiguous runs with streaming stores: the output would not stay in
 * cache anyway, and a streaming store skips reading each destination line first (half again a copy's memory traffic).
 * UNFOLD keeps ordinary stores: its rows mix short runs with zero strips (streaming stores into partly written lines
 * defeat both), and streaming rows assembled in a scratch buffer measured slower. */
int64_t odml_stream_min_bytes = (int64_t)8 << 20;

typedef struct {
    char *dst; const char *src; int es, nd, nt;
    int64_t sizes[ODML_MAX_RANK], ds[ODML_MAX_RANK], ss[ODML_MAX_RANK];   /* strides in bytes */
} copy_job;

static void copy_units(const void *vjob, int64_t u0, int64_t u1, int part) {
    const copy_job *j = (const copy_job *)vjob;
    int nd = j->nd, last = nd - 1;
    int64_t idx[ODML_MAX_RANK];
    int64_t rem = u0, doff = 0, soff = 0;
    (void)part;
    for (int a = last - 1; a >= 0; a--) {
        idx[a] = rem % j->sizes[a];
        rem /= j->sizes[a];
        doff += idx[a] * j->ds[a];
        soff += idx[a] * j->ss[a];
    }
    for (int64_t u = u0; u < u1; u++) {
        copy_run(j->dst + doff, j->src + soff, j->sizes[last], j->ds[last], j->ss[last], j->es, j->nt);
        for (int a = last - 1; a >= 0; a--) {
            if (++idx[a] < j->sizes[a]) { doff += j->ds[a]; soff += j->ss[a]; break; }
            idx[a] = 0;
            doff -= (j->sizes[a] - 1) * j->ds[a];
            soff -= (j->sizes[a] - 1) * j->ss[a];
        }
    }
    stream_fence(j->nt);
}

int odml_copy(char *dst, const char *src, const odml_copy_params *p, int threads, const char **error) {
    copy_job j;
    if (p->rank < 1 || p->rank > ODML_MAX_RANK || !odml_valid_size(p->element_size)) {
        *error = "copy: element_size must be 1, 2, 4 or 8 and rank in [1, 8]";
        return ODML_EPARAM;
    }
    if (p->in_offset < -ODML_LIMIT / 8 || p->in_offset > ODML_LIMIT / 8 || p->out_offset < 0 ||
        p->out_offset > ODML_LIMIT / 8) {
        *error = "copy: offsets must be in [-2^59, 2^59] (output offset >= 0)";
        return ODML_EPARAM;
    }
    j.es = (int)p->element_size; j.nd = (int)p->rank;
    int64_t units = 1;
    for (int a = 0; a < j.nd; a++) {
        int64_t n = p->sizes[a];
        if (n < 0 || n > ODML_LIMIT) { *error = "copy: sizes must be in [0, 2^62]"; return ODML_EPARAM; }
        if (n == 0) return ODML_OK;
        if (n > 1 && (p->out_strides[a] < 0 || p->out_strides[a] > ODML_LIMIT / 8 ||
                      p->in_strides[a] < -ODML_LIMIT / 8 || p->in_strides[a] > ODML_LIMIT / 8)) {
            *error = "copy: strides must be in [-2^59, 2^59] (output strides >= 0)";
            return ODML_EPARAM;
        }
        /* a size-1 dimension's stride is never stepped: 0 keeps it out of the arithmetic */
        j.sizes[a] = n;
        j.ds[a] = n > 1 ? p->out_strides[a] * j.es : 0;
        j.ss[a] = n > 1 ? p->in_strides[a] * j.es : 0;
        if (a < j.nd - 1) {
            if (!odml_mul_le(units, n, ODML_LIMIT)) { *error = "copy: too many elements"; return ODML_EPARAM; }
            units *= n;
        }
    }
    if (!odml_mul_le(units, j.sizes[j.nd - 1], ODML_LIMIT / 8)) { *error = "copy: too many elements"; return ODML_EPARAM; }
    j.nt = units * j.sizes[j.nd - 1] * j.es >= odml_stream_min_bytes;
    j.dst = dst + p->out_offset * j.es;
    j.src = src + p->in_offset * j.es;
    if (!odml_disjoint(j.nd, j.sizes, j.ds, j.es)) threads = 1;
    odml_parallel(copy_units, &j, units, threads);
    return ODML_OK;
}
