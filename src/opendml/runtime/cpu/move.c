/* One pass of the data-movement family's move program (move.h): a strided copy with per-axis index maps (PADDING's
 * EDGE, REFLECTION, SYMMETRIC and WRAP borders), CAST's conversions (convert.h) and IDENTITY's scale/bias, or a
 * constant fill.
 *
 * The pass comes canonicalised (backend.py: size-1 dimensions folded into the offsets, dimensions ordered by
 * destination stride, unmapped neighbours that walk memory as one merged). The innermost dimension is cut into
 * segments along which the source index moves by a constant step of -1, 0 or +1 (every map is piecewise so: the
 * interior +1, a reflected border -1, a clamped one 0), each one strided run: a memcpy, a reversed or broadcast copy,
 * or a conversion loop. Outer mapped axes read their source offsets from a table built once per call. A unit of work
 * is a chunk of one innermost row, so a single long row still splits over threads. */
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

/* Packed conversion runs (both sides contiguous) compiled for AVX2 where the processor has it (x86-64, GCC or Clang):
 * the same expressions as convert.h's, so the same bytes, in 8 float lanes instead of SSE2's 4; float32 -> int32
 * through cvttps2dq, whose out-of-range answer (INT32_MIN) is fixed up to CAST's (NaN -> 0, >= 2^31 -> INT32_MAX;
 * below -2^31 it is the saturated value already). */
typedef void (*packed_fn)(char *d, const char *s, int64_t n);

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(_WIN32)
#include <immintrin.h>
#define ODML_AVX2 __attribute__((target("avx2")))
/* (source, destination DataType, their C types, the conversion): convert.h's expressions */
#define PACKED_LIST(X)                                                                          \
    X(INT32, FLOAT32, int32_t, float, (float)x) X(UINT32, FLOAT32, uint32_t, float, (float)x)   \
    X(INT16, FLOAT32, int16_t, float, (float)x) X(UINT16, FLOAT32, uint16_t, float, (float)x)   \
    X(INT8, FLOAT32, int8_t, float, (float)x) X(UINT8, FLOAT32, uint8_t, float, (float)x)       \
    X(INT32, FLOAT64, int32_t, double, (double)x) X(FLOAT64, FLOAT32, double, float, (float)x)  \
    X(FLOAT32, FLOAT64, float, double, (double)x) X(FLOAT64, INT32, double, int32_t, f2i_i32(x))
#define PACKED(SN, DN, S, D, EXPR)                                                       \
    static ODML_AVX2 void packed_##SN##_##DN(char *d, const char *s, int64_t n) {       \
        ODML_CONV_LOOP(S, D, EXPR, (int64_t)sizeof(D), (int64_t)sizeof(S))               \
    }
PACKED_LIST(PACKED)
#undef PACKED

/* float32 -> the 8- and 16-bit integers (convert.h's f32i_*: NaN -> 0, clamped to the type's range, truncated), 8
 * lanes at a time: NaN lanes zeroed, clamped, cvttps2dq (exact in that range), then packed (the saturating packs
 * leave in-range values as they are); the tail as convert.h does it. The compiler left the scalar expression a lane
 * at a time (4.5 us against NumPy's 1.4 for 12,800 elements to int8). */
#define NARROW_LIST(X)                                                                                          \
    X(i8, int8_t, INT8_MIN, INT8_MAX, 8, _mm_packs_epi16(w, w))                                                \
    X(u8, uint8_t, 0, UINT8_MAX, 8, _mm_packus_epi16(w, w))                                                    \
    X(i16, int16_t, INT16_MIN, INT16_MAX, 16, w)                                                               \
    X(u16, uint16_t, 0, UINT16_MAX, 16, _mm_packus_epi32(lo, hi))
#define NARROW(NAME, T, LO, HI, BITS, PACK)                                                                     \
    static ODML_AVX2 void packed_f32_##NAME(char *d, const char *s, int64_t n) {                               \
        const __m256 lo_f = _mm256_set1_ps((float)(LO)), hi_f = _mm256_set1_ps((float)(HI));   /* T's range */  \
        int64_t i = 0;                                                                                          \
        for (; i + 8 <= n; i += 8) {                                                                            \
            __m256 v = _mm256_loadu_ps((const float *)(const void *)(s + 4 * i));                               \
            v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));                 /* NaN -> 0 */              \
            v = _mm256_min_ps(_mm256_max_ps(v, lo_f), hi_f);                                                    \
            __m256i r = _mm256_cvttps_epi32(v);                                                                 \
            __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);                        \
            __m128i w = _mm_packs_epi32(lo, hi);                                                                \
            (void)w;                                                                                            \
            __m128i out = PACK;                                                                                 \
            if (BITS == 8) _mm_storel_epi64((__m128i *)(void *)(d + i), out);                                   \
            else _mm_storeu_si128((__m128i *)(void *)(d + 2 * i), out);                                         \
        }                                                                                                       \
        for (; i < n; i++) {                                                                                    \
            float x;                                                                                            \
            T y;                                                                                                \
            memcpy(&x, s + 4 * i, 4);                                                                           \
            y = f32i_##NAME(x);                                                                                 \
            memcpy(d + sizeof(T) * i, &y, sizeof(T));                                                           \
        }                                                                                                       \
    }
NARROW_LIST(NARROW)
#undef NARROW

static ODML_AVX2 void packed_f32_i32(char *d, const char *s, int64_t n) {
    const __m256 big = _mm256_set1_ps(2147483648.0f);
    const __m256i top = _mm256_set1_epi32(INT32_MAX);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps((const float *)(const void *)(s + 4 * i));
        __m256i r = _mm256_cvttps_epi32(v);
        __m256i ge = _mm256_castps_si256(_mm256_cmp_ps(v, big, _CMP_GE_OQ));    /* false for NaN */
        __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        r = _mm256_andnot_si256(nan, _mm256_blendv_epi8(r, top, ge));
        _mm256_storeu_si256((__m256i *)(void *)(d + 4 * i), r);
    }
    for (; i < n; i++) {
        float x;
        int32_t y;
        memcpy(&x, s + 4 * i, 4);
        y = f32i_i32(x);
        memcpy(d + 4 * i, &y, 4);
    }
}

/* A packed copy of n >= 32 bytes (buffers apart): 32-byte loads, stores aligned to 32 bytes after one unaligned head,
 * the last 32 bytes stored unaligned (overlapping). Taken for runs from 1 KiB up to the streaming size: glibc's memcpy
 * measured 1.35x slower at 16 KiB (2.7x at 4 KiB) for destinations 16 bytes off a 64-byte line (where malloc puts
 * small outputs), and no faster at any size from 1 KiB to 4 MiB (below 1 KiB it is the faster). */
static ODML_AVX2 void copy_avx2(char *d, const char *s, int64_t n) {
    __m256i tail = _mm256_loadu_si256((const __m256i *)(const void *)(s + n - 32));
    _mm256_storeu_si256((__m256i *)(void *)d, _mm256_loadu_si256((const __m256i *)(const void *)s));
    int64_t i = 32 - (int64_t)((uintptr_t)d & 31);
    for (; i + 128 <= n; i += 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 64));
        __m256i e = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 96));
        _mm256_store_si256((__m256i *)(void *)(d + i), a);
        _mm256_store_si256((__m256i *)(void *)(d + i + 32), b);
        _mm256_store_si256((__m256i *)(void *)(d + i + 64), c);
        _mm256_store_si256((__m256i *)(void *)(d + i + 96), e);
    }
    for (; i + 32 <= n; i += 32)
        _mm256_store_si256((__m256i *)(void *)(d + i), _mm256_loadu_si256((const __m256i *)(const void *)(s + i)));
    _mm256_storeu_si256((__m256i *)(void *)(d + n - 32), tail);
}

/* `rows` rows of n 4-byte elements, each gathered from every second element of its source row (SPACE_TO_DEPTH's and a
 * stride-2 slice's inner rows): 8 outputs from two 32-byte loads that end at the last element read, so nothing past
 * the source row is touched. Bits move unchanged. */
static ODML_AVX2 void gather2_rows(char *d, const char *s, int64_t rows, int64_t n, int64_t ds1, int64_t ss1) {
    for (int64_t r = 0; r < rows; r++) {
        char *dr = d + r * ds1;
        const char *sr = s + r * ss1;
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            const float *p = (const float *)(const void *)(sr + 8 * i);
            __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 7);      /* elements 2i .. 2i+14 */
            __m256 t = _mm256_shuffle_ps(a, b, 0xD8);                      /* p0 p2 p8 p10 | p4 p6 p12 p14 */
            __m256d u = _mm256_permute4x64_pd(_mm256_castps_pd(t), 0xD8);   /* p0 p2 p4 ... p14 */
            _mm256_storeu_pd((double *)(void *)(dr + 4 * i), u);
        }
        for (; i < n; i++) memcpy(dr + 4 * i, sr + 8 * i, 4);
    }
}

static int have_avx2(void) {
    static int avx2 = -1;                  /* the processor's answer, asked once */
    int have = __atomic_load_n(&avx2, __ATOMIC_RELAXED);
    if (have < 0) {
        __builtin_cpu_init();
        have = __builtin_cpu_supports("avx2") ? 1 : 0;
        __atomic_store_n(&avx2, have, __ATOMIC_RELAXED);
    }
    return have;
}

static packed_fn packed_for(int64_t src, int64_t dst) {
    if (!have_avx2()) return NULL;
#define PACKED(SN, DN, S, D, EXPR) if (src == ODML_T_##SN && dst == ODML_T_##DN) return packed_##SN##_##DN;
    PACKED_LIST(PACKED)
#undef PACKED
    if (src != ODML_T_FLOAT32) return NULL;
    switch (dst) {
        case ODML_T_INT8: return packed_f32_i8;
        case ODML_T_UINT8: return packed_f32_u8;
        case ODML_T_INT16: return packed_f32_i16;
        case ODML_T_UINT16: return packed_f32_u16;
        case ODML_T_INT32: return packed_f32_i32;
        default: return NULL;
    }
}
#else
static packed_fn packed_for(int64_t src, int64_t dst) {
    (void)src; (void)dst;
    return NULL;
}
static int have_avx2(void) { return 0; }
static void gather2_rows(char *d, const char *s, int64_t rows, int64_t n, int64_t ds1, int64_t ss1) {
    (void)d; (void)s; (void)rows; (void)n; (void)ds1; (void)ss1;
}
static void copy_avx2(char *d, const char *s, int64_t n) { memcpy(d, s, (size_t)n); }
#endif

typedef struct {
    int nd, fill, nt, same, sb, ct64, es_s, es_d;
    odml_conv_fn conv, to_ct, from_ct;     /* conversion; scale/bias: source -> compute type -> destination */
    packed_fn packed;                      /* the conversion of packed runs, where faster (else NULL) */
    int avx_copy;                          /* packed copies below the streaming size: copy_avx2 */
    int gather2;                           /* whole rows of 4-byte copies from every second element: gather2_rows */
    double scale, bias;
    uint64_t fill_bits;
    int64_t sizes[R], ds[R], ss[R];        /* destination and (unmapped axes') source byte strides */
    const int64_t *tab[R];                 /* mapped outer axes: source byte offset per index, else NULL */
    const segment *seg; int64_t nseg;      /* the inner axis */
    int64_t chunk, chunks;                 /* the inner axis cut in `chunks` chunks of `chunk` elements */
} move_job;

int64_t odml_map_source(int64_t mode, int64_t shift, int64_t size, int64_t d) {
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

/* x * scale + bias in the compute type (float32, or float64 for a float64 source), two roundings (never fused:
 * setup.py builds with -ffp-contract=off), through a stack buffer of BLOCK values. A NaN result is the canonical NaN
 * (fp16.h), as on the NumPy path: which payload an operation on NaNs keeps differs across processors. */
#define BLOCK 256
static void scale_bias_run(const move_job *j, char *d, const char *s, int64_t n, int64_t ds, int64_t ss) {
    const float nan32 = odml_nan_f32();
    const double nan64 = odml_nan_f64();
#define SB_RUN(CT, NAN)                                                              \
    {                                                                                \
        CT t[BLOCK];                                                                 \
        const CT sc = (CT)j->scale, bi = (CT)j->bias;                                \
        j->to_ct((char *)t, s + done * ss, m, sizeof(CT), ss);                       \
        for (int64_t i = 0; i < m; i++) {                                            \
            CT y = t[i] * sc;                                                        \
            y = y + bi;                                                              \
            t[i] = y != y ? NAN : y;                                                 \
        }                                                                            \
        j->from_ct(d + done * ds, (const char *)t, m, ds, sizeof(CT));               \
    }
    for (int64_t done = 0; done < n; done += BLOCK) {
        int64_t m = n - done < BLOCK ? n - done : BLOCK;
        if (j->ct64) SB_RUN(double, nan64)
        else SB_RUN(float, nan32)
    }
#undef SB_RUN
}

static void element_run(const move_job *j, char *d, const char *s, int64_t n, int64_t ds, int64_t ss) {
    if (j->fill) fill_run(d, n, ds, j->es_d, j->fill_bits);
    else if (j->sb) scale_bias_run(j, d, s, n, ds, ss);
    else if (j->same) {
        if (j->avx_copy && ds == j->es_d && ss == j->es_d && n * ds >= 1024) copy_avx2(d, s, n * ds);
        else copy_run(d, s, n, ds, ss, j->es_d, j->nt);
    }
    else if (j->packed && ds == j->es_d && ss == j->es_s) j->packed(d, s, n);
    else j->conv(d, s, n, ds, ss);
}

/* One run of a job on its buffers (the job itself holds no addresses). */
typedef struct {
    const move_job *j;
    char *dst;
    const char *src;
} move_call;

/* The outer axes' odometer: idx over axes [0, top] one step on (the last fastest), both offsets moved with it. */
static inline void next_outer(const move_job *j, int64_t *idx, int top, int64_t *doff, int64_t *soff) {
    for (int a = top; a >= 0; a--) {
        int64_t prev = idx[a];
        if (++idx[a] < j->sizes[a]) {
            *doff += j->ds[a];
            *soff += j->tab[a] ? j->tab[a][idx[a]] - j->tab[a][prev] : j->ss[a];
            return;
        }
        idx[a] = 0;
        *doff -= (j->sizes[a] - 1) * j->ds[a];
        *soff -= j->tab[a] ? j->tab[a][prev] - j->tab[a][0] : (j->sizes[a] - 1) * j->ss[a];
    }
}

static void move_units(const void *vcall, int64_t u0, int64_t u1, int part) {
    const move_call *call = (const move_call *)vcall;
    const move_job *j = call->j;
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
    if (j->chunks == 1 && j->nseg == 1 && last == 0) {      /* one whole row (a packed copy, say) */
        if (u0 < u1) element_run(j, call->dst, call->src + j->seg->s0, n, dsi, j->seg->sstep);
        stream_fence(j->nt);
        return;
    }
    if (j->chunks == 1 && j->nseg == 1 && last >= 1 && !j->tab[last - 1]) {
        /* whole unmapped rows (most copies and conversions): the next axis's rows in one loop, then the carry */
        const segment *sg = j->seg;
        const int64_t n1 = j->sizes[last - 1], ds1 = j->ds[last - 1], ss1 = j->ss[last - 1];
        int64_t u = u0;
        while (u < u1) {
            int64_t rows = n1 - idx[last - 1];
            if (rows > u1 - u) rows = u1 - u;
            char *d = call->dst + doff;
            const char *s = call->src + soff + sg->s0;
            if (j->gather2) gather2_rows(d, s, rows, n, ds1, ss1);
            else for (int64_t r = 0; r < rows; r++) element_run(j, d + r * ds1, s + r * ss1, n, dsi, sg->sstep);
            u += rows;
            idx[last - 1] += rows;
            doff += rows * ds1;
            soff += rows * ss1;
            if (idx[last - 1] < n1) continue;
            idx[last - 1] = 0;
            doff -= n1 * ds1;
            soff -= n1 * ss1;
            next_outer(j, idx, last - 2, &doff, &soff);
        }
        stream_fence(j->nt);
        return;
    }
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
            element_run(j, call->dst + (doff + lo * dsi), call->src + (soff + sg->s0 + (lo - sg->d0) * sg->sstep),
                        hi - lo, dsi, sg->sstep);
        }
        if (++c < j->chunks) continue;
        c = 0;
        next_outer(j, idx, last - 1, &doff, &soff);
    }
    stream_fence(j->nt);
}

/* A pass checked and laid out once (odml_move_prepare), run on any buffers (odml_move_run): the job without its
 * addresses, the tables and segments it points into, and what the addresses get added. */
struct odml_move_prepared {
    move_job j;
    int64_t dst_off, src_off;       /* bytes added to the destination and (copies) the source */
    int64_t units;
    int threads, empty;             /* empty: a size is 0, nothing is touched */
    int64_t *tables;
    segment *segs;                  /* one_seg where the inner axis is unmapped, else its own allocation */
    segment one_seg;
};

void odml_move_free(odml_move_prepared *m) {
    if (!m) return;
    free(m->tables);
    if (m->segs != &m->one_seg) free(m->segs);
    free(m);
}

int odml_move_run(const odml_move_prepared *m, char *dst, const char *src) {
    if (m->empty) return ODML_OK;
    move_call call;                 /* runs on other threads share m, read only */
    call.j = &m->j;
    call.dst = dst + m->dst_off;
    call.src = m->j.fill ? dst : src + m->src_off;   /* a fill reads nothing */
    odml_parallel(move_units, &call, m->units, m->threads);
    return ODML_OK;
}

int odml_move(char *dst, const char *src, const odml_cpu_move_params *p, int threads, const char **error) {
    odml_move_prepared *m = NULL;
    int status = odml_move_prepare(p, threads, &m, error);
    if (status == ODML_OK) status = odml_move_run(m, dst, src);
    odml_move_free(m);
    return status;
}

#define FAIL(msg) do { *error = "move: " msg; status = ODML_EPARAM; goto done; } while (0)

int odml_move_prepare(const odml_cpu_move_params *p, int threads, odml_move_prepared **out, const char **error) {
    odml_move_prepared *m = (odml_move_prepared *)calloc(1, sizeof *m);
    int status = ODML_OK;
    int64_t *tables = NULL;
    segment *segs = NULL;
    *out = NULL;
    if (!m) return ODML_ENOMEM;
    move_job *const jp = &m->j;     /* laid out in place (calloc zeroed it) */
    if (p->rank < 1 || p->rank > R) FAIL("rank must be in [1, 16]");
    if (p->kind != ODML_MOVE_COPY && p->kind != ODML_MOVE_FILL) FAIL("kind must be 0 (copy) or 1 (fill)");
    if (p->dst_type < 1 || p->dst_type > 11 || (p->kind == ODML_MOVE_COPY && (p->src_type < 1 || p->src_type > 11)))
        FAIL("data types must be DataType values 1..11");
    jp->nd = (int)p->rank;
    jp->fill = p->kind == ODML_MOVE_FILL;
    jp->es_d = odml_type_size[p->dst_type];
    jp->es_s = jp->fill ? jp->es_d : odml_type_size[p->src_type];
    if (p->dst_offset < 0 || p->dst_offset > ODML_LIMIT / 8 || p->src_offset < -ODML_LIMIT / 8 ||
        p->src_offset > ODML_LIMIT / 8)
        FAIL("offsets must be in [-2^59, 2^59] (destination offset >= 0)");
    int64_t count = 1, table_len = 0;
    for (int a = 0; a < jp->nd; a++) {
        int64_t n = p->sizes[a], mode = jp->fill ? 0 : p->map_mode[a];
        if (n < 0 || n > ODML_LIMIT) FAIL("sizes must be in [0, 2^62]");
        if (n == 0) {
            m->empty = 1;
            goto done;
        }
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
        if (!odml_mul_le(n - 1, p->dst_strides[a] * jp->es_d, ODML_LIMIT / 16) ||
            !odml_mul_le(extent - 1, (p->src_strides[a] < 0 ? -p->src_strides[a] : p->src_strides[a]) * jp->es_s,
                         ODML_LIMIT / 16))
            FAIL("a dimension's extent must stay within 2^58 bytes");
        jp->sizes[a] = n;
        jp->ds[a] = n > 1 ? p->dst_strides[a] * jp->es_d : 0;
        jp->ss[a] = !jp->fill && (mode ? extent : n) > 1 ? p->src_strides[a] * jp->es_s : 0;
        if (mode && a < jp->nd - 1) table_len += n;
    }
    if (jp->fill) {
        jp->fill_bits = p->fill_bits;
    } else if (p->has_scale_bias) {
        int ct = p->src_type == ODML_T_FLOAT64 ? ODML_T_FLOAT64 : ODML_T_FLOAT32;
        jp->sb = 1;
        jp->ct64 = ct == ODML_T_FLOAT64;
        jp->scale = p->scale;
        jp->bias = p->bias;
        jp->to_ct = odml_conv_table[p->src_type][ct];
        jp->from_ct = odml_conv_table[ct][p->dst_type];
    } else {
        jp->same = p->src_type == p->dst_type;
        jp->conv = odml_conv_table[p->src_type][p->dst_type];
        jp->packed = jp->same ? NULL : packed_for(p->src_type, p->dst_type);
    }
    jp->nt = jp->same && count * jp->es_d >= odml_stream_min_bytes;
    jp->avx_copy = jp->same && !jp->fill && !jp->sb && !jp->nt && have_avx2();

    /* outer mapped axes: their source byte offsets */
    int last = jp->nd - 1;
    if (table_len) {
        tables = (int64_t *)malloc((size_t)table_len * sizeof(int64_t));
        if (!tables) { status = ODML_ENOMEM; goto done; }
        int64_t *t = tables;
        for (int a = 0; a < last; a++) {
            if (jp->fill || !p->map_mode[a]) continue;
            int64_t st = p->map_size[a] > 1 ? p->src_strides[a] * jp->es_s : 0;
            for (int64_t d = 0; d < jp->sizes[a]; d++)
                t[d] = odml_map_source(p->map_mode[a], p->map_shift[a], p->map_size[a], d) * st;
            jp->tab[a] = t;
            t += jp->sizes[a];
        }
    }
    /* the inner axis in segments of constant source step (-1, 0 or +1) */
    {
        int64_t n = jp->sizes[last], mode = jp->fill ? 0 : p->map_mode[last];
        int64_t shift = p->map_shift[last], size = p->map_size[last], st = jp->ss[last];
        if (!mode) {                /* one segment, kept in m (no allocation of its own) */
            m->one_seg.d0 = 0; m->one_seg.n = n; m->one_seg.s0 = 0; m->one_seg.sstep = st;
            jp->nseg = 1;
        } else {
            /* the interior and two pieces per period of the map outside it: at most n */
            segs = (segment *)malloc((size_t)n * sizeof(segment));
            if (!segs) { status = ODML_ENOMEM; goto done; }
            int64_t d = 0, m = 0;
            while (d < n) {
                int64_t s0 = odml_map_source(mode, shift, size, d), len = 1, step = 0;
                if (d + 1 < n) {
                    step = odml_map_source(mode, shift, size, d + 1) - s0;
                    if (step < -1 || step > 1) step = 0;
                    else while (d + len < n && odml_map_source(mode, shift, size, d + len) == s0 + len * step) len++;
                }
                segs[m].d0 = d; segs[m].n = len; segs[m].s0 = s0 * st; segs[m].sstep = step * st;
                m++;
                d += len;
            }
            jp->nseg = m;
        }
        jp->seg = mode ? segs : &m->one_seg;
        /* chunks of the inner row (whole cache lines), so that few long rows still split over threads */
        int64_t rows = count / n;
        jp->chunk = n;
        if (threads > 1 && rows < 4 * (int64_t)threads) {
            int64_t want = (4 * (int64_t)threads + rows - 1) / rows;
            int64_t chunk = (n + want - 1) / want;
            chunk = (chunk + 63) / 64 * 64;
            if (chunk < n) jp->chunk = chunk;
        }
        jp->chunks = (n + jp->chunk - 1) / jp->chunk;
        jp->gather2 = jp->same && jp->es_d == 4 && jp->nseg == 1 && jp->seg[0].sstep == 8 && jp->ds[last] == 4 && have_avx2();
    }
    m->dst_off = p->dst_offset * jp->es_d;
    m->src_off = jp->fill ? 0 : p->src_offset * jp->es_s;
    if (!odml_disjoint(jp->nd, jp->sizes, jp->ds, jp->es_d)) threads = 1;
    m->threads = threads;
    m->units = count / jp->sizes[last] * jp->chunks;
    m->tables = tables;
    m->segs = segs ? segs : &m->one_seg;
    tables = NULL;
    segs = NULL;
done:
    free(tables);
    free(segs);
    if (status == ODML_OK) *out = m;
    else free(m);
    return status;
}
