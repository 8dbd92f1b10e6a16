/* One pass of the data-movement family's move program (move.h): a strided
 * copy with per-axis index maps (PADDING's EDGE, REFLECTION, SYMMETRIC and
 * WRAP borders), CAST's conversions (convert.h) and IDENTITY's scale/bias,
 * or a constant fill. Owns odml_move.
 *
 * Python hands the pass canonicalised (backend.py: size-1 dimensions folded
 * into the offsets, dimensions ordered by destination stride, unmapped
 * neighbours that walk memory as one merged). The innermost dimension is cut
 * into segments along which the source index moves by a constant step of
 * -1, 0 or +1 (every map is piecewise so: the interior +1, a reflected border
 * -1, a clamped one 0), so each segment is one strided run: a memcpy, a
 * reversed or broadcast copy, or a conversion loop. Outer mapped axes read
 * their source offsets from a table built once per call. A unit of work is a
 * chunk of one innermost row, so a single long row still splits over threads.
 */
#include <stdlib.h>

#include "common.h"
#include "convert.h"
#include "move.h"
#include "runs.h"

#define R ODML_CPU_MOVE_MAX_RANK

typedef struct {
    int64_t d0, n;          /* destination indices [d0, d0 + n) of the inner axis */
    int64_t s0, sstep;      /* source byte offset at d0 (from the axis's origin) and per element */
} segment;

typedef struct {
    char *dst; const char *src;
    int nd, fill, nt, same, sb, ct64, es_s, es_d;
    odml_conv_fn conv, to_ct, from_ct;     /* conversion; scale/bias: source -> compute type -> destination */
    double scale, bias;
    uint64_t fill_bits;
    int64_t sizes[R], ds[R], ss[R];        /* destination and (unmapped axes') source byte strides */
    const int64_t *tab[R];                 /* mapped outer axes: source byte offset per index, else NULL */
    const segment *seg; int64_t nseg;      /* the inner axis */
    int64_t chunk, chunks;                 /* the inner axis cut in `chunks` chunks of `chunk` elements */
} move_job;

/* plan.AxisMap.source: the source index of destination index d. */
static int64_t map_source(int64_t mode, int64_t shift, int64_t size, int64_t d) {
    int64_t i = d - shift, r;
    if (mode == ODML_MAP_NONE || (i >= 0 && i < size)) return i;
    switch (mode) {
    case ODML_MAP_CLAMP: return i < 0 ? 0 : size - 1;
    case ODML_MAP_WRAP: r = i % size; return r < 0 ? r + size : r;
    case ODML_MAP_SYMMETRIC:
        r = i % (2 * size); if (r < 0) r += 2 * size;
        return r < size ? r : 2 * size - 1 - r;
    default:                                                  /* REFLECT */
        if (size == 1) return 0;
        r = i % (2 * (size - 1)); if (r < 0) r += 2 * (size - 1);
        return r < size ? r : 2 * (size - 1) - r;
    }
}

static void fill_run(char *d, int64_t n, int64_t ds, int es, uint64_t bits) {
    if (es == 1) {
        uint8_t v = (uint8_t)bits;
        if (ds == 1) { memset(d, v, (size_t)n); return; }
        for (int64_t i = 0; i < n; i++) d[i * ds] = (char)v;
    } else if (es == 2) {
        uint16_t v = (uint16_t)bits;
        for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, &v, 2);
    } else if (es == 4) {
        uint32_t v = (uint32_t)bits;
        for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, &v, 4);
    } else {
        for (int64_t i = 0; i < n; i++) memcpy(d + i * ds, &bits, 8);
    }
}

/* x * scale + bias in the compute type (float32, or float64 for a float64
 * source), two roundings (never fused: setup.py builds with -ffp-contract=off),
 * through a stack buffer of BLOCK values. A NaN result is the canonical NaN
 * (float32 0x7FC00000, float64 0x7FF8000000000000), as on the NumPy path:
 * which payload an operation on NaNs keeps is not defined across processors. */
#define BLOCK 256
static void scale_bias_run(const move_job *j, char *d, const char *s, int64_t n, int64_t ds, int64_t ss) {
    const uint32_t nan32_bits = 0x7fc00000u;
    const uint64_t nan64_bits = 0x7ff8000000000000ull;
    float nan32;
    double nan64;
    memcpy(&nan32, &nan32_bits, 4);
    memcpy(&nan64, &nan64_bits, 8);
    for (int64_t done = 0; done < n; done += BLOCK) {
        int64_t m = n - done < BLOCK ? n - done : BLOCK;
        if (j->ct64) {
            double t[BLOCK];
            j->to_ct((char *)t, s + done * ss, m, 8, ss);
            for (int64_t i = 0; i < m; i++) {
                double y = t[i] * j->scale;
                y = y + j->bias;
                t[i] = y != y ? nan64 : y;
            }
            j->from_ct(d + done * ds, (const char *)t, m, ds, 8);
        } else {
            float t[BLOCK];
            const float sc = (float)j->scale, bi = (float)j->bias;
            j->to_ct((char *)t, s + done * ss, m, 4, ss);
            for (int64_t i = 0; i < m; i++) {
                float y = t[i] * sc;
                y = y + bi;
                t[i] = y != y ? nan32 : y;
            }
            j->from_ct(d + done * ds, (const char *)t, m, ds, 4);
        }
    }
}

static void element_run(const move_job *j, char *d, const char *s, int64_t n, int64_t ds, int64_t ss) {
    if (j->fill) fill_run(d, n, ds, j->es_d, j->fill_bits);
    else if (j->sb) scale_bias_run(j, d, s, n, ds, ss);
    else if (j->same) copy_run(d, s, n, ds, ss, j->es_d, j->nt);
    else j->conv(d, s, n, ds, ss);
}

static void move_units(const void *vjob, int64_t u0, int64_t u1, int part) {
    const move_job *j = (const move_job *)vjob;
    int last = j->nd - 1;
    int64_t idx[R];
    int64_t rem = u0 / j->chunks, c = u0 % j->chunks, doff = 0, soff = 0;
    (void)part;
    for (int a = last - 1; a >= 0; a--) {
        idx[a] = rem % j->sizes[a];
        rem /= j->sizes[a];
        doff += idx[a] * j->ds[a];
        soff += j->tab[a] ? j->tab[a][idx[a]] : idx[a] * j->ss[a];
    }
    const int64_t n = j->sizes[last], dsi = j->ds[last];
    int64_t k = 0;                                          /* first segment that may meet the chunk */
    for (int64_t u = u0; u < u1; u++) {
        int64_t c0 = c * j->chunk, c1 = c0 + j->chunk < n ? c0 + j->chunk : n;
        if (c == 0) k = 0;
        else {                                              /* binary search: last segment with d0 <= c0 */
            int64_t lo = 0, hi = j->nseg - 1;
            while (lo < hi) { int64_t mid = lo + (hi - lo + 1) / 2; if (j->seg[mid].d0 <= c0) lo = mid; else hi = mid - 1; }
            k = lo;
        }
        for (int64_t g = k; g < j->nseg && j->seg[g].d0 < c1; g++) {
            const segment *sg = &j->seg[g];
            int64_t lo = sg->d0 > c0 ? sg->d0 : c0, hi = sg->d0 + sg->n < c1 ? sg->d0 + sg->n : c1;
            if (hi <= lo) continue;
            element_run(j, j->dst + (doff + lo * dsi), j->src + (soff + sg->s0 + (lo - sg->d0) * sg->sstep),
                        hi - lo, dsi, sg->sstep);
        }
        if (++c < j->chunks) continue;
        c = 0;
        for (int a = last - 1; a >= 0; a--) {
            int64_t prev = idx[a];
            if (++idx[a] < j->sizes[a]) {
                doff += j->ds[a];
                soff += j->tab[a] ? j->tab[a][idx[a]] - j->tab[a][prev] : j->ss[a];
                break;
            }
            idx[a] = 0;
            doff -= (j->sizes[a] - 1) * j->ds[a];
            soff -= j->tab[a] ? j->tab[a][prev] - j->tab[a][0] : (j->sizes[a] - 1) * j->ss[a];
        }
    }
    stream_fence(j->nt);
}

/* Whether distinct destination indices write disjoint elements (as
 * odml_disjoint, for up to R dimensions). */
static int move_disjoint(int n, const int64_t *sizes, const int64_t *strides, int64_t es) {
    int64_t s[R], t[R];
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] <= 0) return 1;
        if (sizes[i] == 1) continue;
        if (strides[i] <= 0) return 0;
        int q = m++;
        for (; q > 0 && t[q - 1] > strides[i]; q--) { s[q] = s[q - 1]; t[q] = t[q - 1]; }
        s[q] = sizes[i]; t[q] = strides[i];
    }
    int64_t extent = es;
    for (int i = 0; i < m; i++) {
        if (t[i] < extent) return 0;
        if (!odml_mul_le(s[i] - 1, t[i], ODML_LIMIT - extent)) return 0;
        extent += (s[i] - 1) * t[i];
    }
    return 1;
}

#define FAIL(msg) do { *error = "move: " msg; status = ODML_EPARAM; goto done; } while (0)

int odml_move(char *dst, const char *src, const odml_cpu_move_params *p, int threads, const char **error) {
    move_job j;
    int status = ODML_OK;
    int64_t *tables = NULL;
    segment *segs = NULL;
    memset(&j, 0, sizeof j);
    if (p->rank < 1 || p->rank > R) FAIL("rank must be in [1, 16]");
    if (p->kind != ODML_MOVE_COPY && p->kind != ODML_MOVE_FILL) FAIL("kind must be 0 (copy) or 1 (fill)");
    if (p->dst_type < 1 || p->dst_type > 11 || (p->kind == ODML_MOVE_COPY && (p->src_type < 1 || p->src_type > 11)))
        FAIL("data types must be DataType values 1..11");
    j.nd = (int)p->rank;
    j.fill = p->kind == ODML_MOVE_FILL;
    j.es_d = odml_type_size[p->dst_type];
    j.es_s = j.fill ? j.es_d : odml_type_size[p->src_type];
    if (p->dst_offset < 0 || p->dst_offset > ODML_LIMIT / 8 || p->src_offset < -ODML_LIMIT / 8 ||
        p->src_offset > ODML_LIMIT / 8)
        FAIL("offsets must be in [-2^59, 2^59] (destination offset >= 0)");
    int64_t count = 1, table_len = 0;
    for (int a = 0; a < j.nd; a++) {
        int64_t n = p->sizes[a], mode = j.fill ? 0 : p->map_mode[a];
        if (n < 0 || n > ODML_LIMIT) FAIL("sizes must be in [0, 2^62]");
        if (n == 0) return ODML_OK;
        if (!odml_mul_le(count, n, ODML_LIMIT / 8)) FAIL("too many elements");
        count *= n;
        if (mode < 0 || mode > ODML_MAP_WRAP) FAIL("map modes must be in [0, 4]");
        /* the source extent along the axis: the map's, or the destination's */
        int64_t extent = mode ? p->map_size[a] : n;
        if (mode && (extent < 1 || extent > ODML_LIMIT / 8 || p->map_shift[a] < -ODML_LIMIT / 8 ||
                     p->map_shift[a] > ODML_LIMIT / 8))
            FAIL("a map's size must be in [1, 2^59] and its shift in [-2^59, 2^59]");
        if (p->dst_strides[a] < 0 || p->dst_strides[a] > ODML_LIMIT / 8 || p->src_strides[a] < -ODML_LIMIT / 8 ||
            p->src_strides[a] > ODML_LIMIT / 8)
            FAIL("strides must be in [-2^59, 2^59] (destination strides >= 0)");
        if (!odml_mul_le(n - 1, p->dst_strides[a] * j.es_d, ODML_LIMIT / 16) ||
            !odml_mul_le(extent - 1, (p->src_strides[a] < 0 ? -p->src_strides[a] : p->src_strides[a]) * j.es_s,
                         ODML_LIMIT / 16))
            FAIL("a dimension's extent must stay within 2^58 bytes");
        j.sizes[a] = n;
        j.ds[a] = n > 1 ? p->dst_strides[a] * j.es_d : 0;
        j.ss[a] = !j.fill && (mode ? extent : n) > 1 ? p->src_strides[a] * j.es_s : 0;
        if (mode && a < j.nd - 1) table_len += n;
    }
    if (j.fill) {
        j.fill_bits = p->fill_bits;
    } else if (p->has_scale_bias) {
        int ct = p->src_type == ODML_T_FLOAT64 ? ODML_T_FLOAT64 : ODML_T_FLOAT32;
        j.sb = 1;
        j.ct64 = ct == ODML_T_FLOAT64;
        j.scale = p->scale;
        j.bias = p->bias;
        j.to_ct = odml_conv_table[p->src_type][ct];
        j.from_ct = odml_conv_table[ct][p->dst_type];
    } else {
        j.same = p->src_type == p->dst_type;
        j.conv = odml_conv_table[p->src_type][p->dst_type];
    }
    j.nt = j.same && count * j.es_d >= odml_stream_min_bytes;

    /* outer mapped axes: their source byte offsets */
    int last = j.nd - 1;
    if (table_len) {
        tables = (int64_t *)malloc((size_t)table_len * sizeof(int64_t));
        if (!tables) { status = ODML_ENOMEM; goto done; }
        int64_t *t = tables;
        for (int a = 0; a < last; a++) {
            if (j.fill || !p->map_mode[a]) continue;
            int64_t st = p->map_size[a] > 1 ? p->src_strides[a] * j.es_s : 0;
            for (int64_t d = 0; d < j.sizes[a]; d++)
                t[d] = map_source(p->map_mode[a], p->map_shift[a], p->map_size[a], d) * st;
            j.tab[a] = t;
            t += j.sizes[a];
        }
    }
    /* the inner axis in segments of constant source step (-1, 0 or +1) */
    {
        int64_t n = j.sizes[last], mode = j.fill ? 0 : p->map_mode[last];
        int64_t shift = p->map_shift[last], size = p->map_size[last], st = j.ss[last];
        if (!mode) {
            segs = (segment *)malloc(sizeof(segment));
            if (!segs) { status = ODML_ENOMEM; goto done; }
            segs[0].d0 = 0; segs[0].n = n; segs[0].s0 = 0; segs[0].sstep = st;
            j.nseg = 1;
        } else {
            /* at most: the interior, and per period of the map outside it two
             * pieces; bounded by n */
            segs = (segment *)malloc((size_t)n * sizeof(segment));
            if (!segs) { status = ODML_ENOMEM; goto done; }
            int64_t d = 0, m = 0;
            while (d < n) {
                int64_t s0 = map_source(mode, shift, size, d), len = 1, step = 0;
                if (d + 1 < n) {
                    step = map_source(mode, shift, size, d + 1) - s0;
                    if (step < -1 || step > 1) step = 0;
                    else while (d + len < n && map_source(mode, shift, size, d + len) == s0 + len * step) len++;
                }
                segs[m].d0 = d; segs[m].n = len; segs[m].s0 = s0 * st; segs[m].sstep = step * st;
                m++;
                d += len;
            }
            j.nseg = m;
        }
        j.seg = segs;
        /* chunks of the inner row, so that few long rows still split over
         * threads (whole cache lines each) */
        int64_t rows = count / n;
        j.chunk = n;
        if (threads > 1 && rows < 4 * (int64_t)threads) {
            int64_t want = (4 * (int64_t)threads + rows - 1) / rows;
            int64_t chunk = (n + want - 1) / want;
            chunk = (chunk + 63) / 64 * 64;
            if (chunk < n) j.chunk = chunk;
        }
        j.chunks = (n + j.chunk - 1) / j.chunk;
    }
    j.dst = dst + p->dst_offset * j.es_d;
    j.src = j.fill ? dst : src + p->src_offset * j.es_s;   /* a fill reads nothing */
    if (!move_disjoint(j.nd, j.sizes, j.ds, j.es_d)) threads = 1;
    odml_parallel(move_units, &j, count / j.sizes[last] * j.chunks, threads);
done:
    free(tables);
    free(segs);
    return status;
}
