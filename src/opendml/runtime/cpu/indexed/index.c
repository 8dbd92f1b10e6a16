/* The index-driven passes of the move program (plan.Gather, plan.Scatter) on the CPU: run by the call cache's entries
 * (runtime/native/calls_move.c, PASS_INDEX) and by the CPU backend (index_run_pass).
 *
 * A pass walks its "outer" dimensions in row-major order; at each position it reads every IndexAxis's value, turns it
 * into a coordinate in [0, bound) (a negative signed value counted from the end, then clamped; or the position
 * skipped: INDEX_SKIP; or, for INDEX_REVERSE_LENGTH, the reversed coordinate of the first min(L, bound) elements), and
 * moves one block of the "inner" dimensions (those that read no index). Values are compared exactly in their own type
 * (no wrap-around). Before anything moves, the pass's whole reach (its strides' span plus every coordinate's [0,
 * bound) times its stride, and the index elements read) is checked against the bound ranges; a pass reaching outside
 * them stops with an error (a validated plan never does).
 *
 * A scatter runs its positions in order on one thread: where positions repeat, the last write wins (or, accumulating,
 * the additions run in that order: float16 adds in float32 and rounds each sum, as NumPy does; integers wrap), so
 * every run gives the same bytes.
 *
 * Every pass reports whether a (clamping or skipping) index value lay outside its dimension: the array API's index
 * check, fused into the read. A pass without index axes is a plain copy or fill (the scatters' and ONE_HOT's Copy
 * passes, as the call cache records them). */
#include "index.h"

#include <string.h>

#include "../fp16.h"

/* DML_TENSOR_DATA_TYPE values */
enum { T_F32 = 1, T_F16 = 2, T_U32 = 3, T_U16 = 4, T_U8 = 5, T_I32 = 6, T_I16 = 7, T_I8 = 8, T_F64 = 9,
       T_U64 = 10, T_I64 = 11 };

/* A length V of index type IT clamped to [0, B] (INDEX_REVERSE_LENGTH). */
#define CLAMPED_LENGTH(IT, V, B) \
    ((IT)-1 < (IT)0 ? ((int64_t)(V) < 0 ? 0 : ((int64_t)(V) > (B) ? (B) : (int64_t)(V))) \
                    : ((uint64_t)(V) > (uint64_t)(B) ? (B) : (int64_t)(uint64_t)(V)))

/* The coordinate of one index value; 0: skip the position. *bad is set where a mode-0 value lies outside [-bound,
 * bound) (signed) or [0, bound). */
static inline int coordinate(const idx_axis* ax, const char* base, int64_t at, int64_t e, int64_t* c, int* bad) {
    int64_t bound = ax->bound;
    int is_signed = 0;
    int64_t sv = 0;
    uint64_t uv = 0;
    switch (ax->type) {
    case T_I32: sv = ((const int32_t*)base)[at]; is_signed = 1; break;
    case T_I64: sv = ((const int64_t*)base)[at]; is_signed = 1; break;
    case T_U32: uv = ((const uint32_t*)base)[at]; break;
    default: uv = ((const uint64_t*)base)[at]; break;
    }
    if (ax->mode == 1) {                       /* INDEX_REVERSE_LENGTH */
        int64_t len = is_signed ? CLAMPED_LENGTH(int64_t, sv, bound) : CLAMPED_LENGTH(uint64_t, uv, bound);
        *c = e < len ? len - 1 - e : e;
        return 1;
    }
    if (is_signed) {
        if (sv < 0) sv += bound;               /* sv >= INT64_MIN, bound > 0: no overflow */
        if (sv < 0 || sv >= bound) {
            *bad = 1;
            if (ax->out_of_range == 1) return 0;
            sv = sv < 0 ? 0 : bound - 1;
        }
        *c = sv;
    } else {
        if (uv >= (uint64_t)bound) {
            *bad = 1;
            if (ax->out_of_range == 1) return 0;
            uv = (uint64_t)bound - 1;
        }
        *c = (int64_t)uv;
    }
    return 1;
}

static void add_element(char* d, const char* s, int64_t type) {
    switch (type) {
    case T_F32: { float a, b; memcpy(&a, d, 4); memcpy(&b, s, 4); a += b; memcpy(d, &a, 4); break; }
    case T_F64: { double a, b; memcpy(&a, d, 8); memcpy(&b, s, 8); a += b; memcpy(d, &a, 8); break; }
    case T_F16: { uint16_t a, b; memcpy(&a, d, 2); memcpy(&b, s, 2);
                  a = odml_f2h(odml_h2f(a) + odml_h2f(b)); memcpy(d, &a, 2); break; }
    case T_U8: case T_I8: *(uint8_t*)d = (uint8_t)(*(uint8_t*)d + *(const uint8_t*)s); break;
    case T_U16: case T_I16: { uint16_t a, b; memcpy(&a, d, 2); memcpy(&b, s, 2); a = (uint16_t)(a + b);
                              memcpy(d, &a, 2); break; }
    case T_U32: case T_I32: { uint32_t a, b; memcpy(&a, d, 4); memcpy(&b, s, 4); a += b; memcpy(d, &a, 4); break; }
    default: { uint64_t a, b; memcpy(&a, d, 8); memcpy(&b, s, 8); a += b; memcpy(d, &a, 8); break; }
    }
}


/* The element count of a pass's inner block (dims [outer, rank)) where it is one packed run on both sides (a size-1
 * dimension's stride never matters), else 0. */
static int64_t packed_block(const idx_params* p) {
    int64_t blk = 1;
    for (int64_t k = p->rank - 1; k >= p->outer; k--) {
        if (p->sizes[k] == 1) continue;
        if (p->src_strides[k] != blk || p->dst_strides[k] != blk) return 0;
        blk *= p->sizes[k];
    }
    return blk;
}

/* Move one inner block (dims [outer, rank)) from src element so to dst element dd; `packed`: packed_block's answer. */
static inline void block(const idx_params* p, const char* src, char* dst, int64_t so, int64_t dd, int64_t packed) {
    const int64_t es = p->element_size;
    const int64_t first = p->outer, r = p->rank;
    const int acc = p->kind == 1 && p->accumulate;
    if (first == r) {
        const char* s = p->has_value ? (const char*)&p->value_bits : src + so * es;
        if (acc) add_element(dst + dd * es, s, p->data_type);
        else switch (es) {                         /* a fixed-size move the compiler inlines */
            case 1: memcpy(dst + dd, s, 1); break;
            case 2: memcpy(dst + dd * 2, s, 2); break;
            case 4: memcpy(dst + dd * 4, s, 4); break;
            default: memcpy(dst + dd * 8, s, 8); break;
        }
        return;
    }
    if (packed && !p->has_value && !acc) {
        memcpy(dst + dd * es, src + so * es, (size_t)(packed * es));
        return;
    }
    int64_t idx[IDX_MAX_RANK] = {0};
    int64_t s = so, d = dd;
    for (;;) {
        const char* sp = p->has_value ? (const char*)&p->value_bits : src + s * es;
        if (acc) add_element(dst + d * es, sp, p->data_type);
        else memcpy(dst + d * es, sp, (size_t)es);
        int64_t k = r - 1;
        for (; k >= first; k--) {
            if (++idx[k] < p->sizes[k]) {
                s += p->src_strides[k];
                d += p->dst_strides[k];
                break;
            }
            s -= (p->sizes[k] - 1) * p->src_strides[k];
            d -= (p->sizes[k] - 1) * p->dst_strides[k];
            idx[k] = 0;
        }
        if (k < first) return;
    }
}

/* The lowest and highest element offsets (from 0) a walk over dims [0, r) reaches. */
static void span(const int64_t* sizes, const int64_t* strides, int64_t r, int64_t* lo, int64_t* hi) {
    *lo = *hi = 0;
    for (int64_t k = 0; k < r; k++) {
        const int64_t t = (sizes[k] - 1) * strides[k];
        if (t < 0) *lo += t; else *hi += t;
    }
}

/* Step a row-major walk of dims [0, last) one position on, the data and na index offsets with it; 0 at the end. */
static inline int walk_next(const idx_params* p, int64_t last, int64_t* pos, int64_t* s, int64_t* d, int64_t na,
                            int64_t* io) {
    for (int64_t k = last - 1; k >= 0; k--) {
        if (++pos[k] < p->sizes[k]) {
            *s += p->src_strides[k];
            *d += p->dst_strides[k];
            for (int64_t a = 0; a < na; a++) io[a] += p->axes[a].strides[k];
            return 1;
        }
        *s -= (p->sizes[k] - 1) * p->src_strides[k];
        *d -= (p->sizes[k] - 1) * p->dst_strides[k];
        for (int64_t a = 0; a < na; a++) io[a] -= (p->sizes[k] - 1) * p->axes[a].strides[k];
        pos[k] = 0;
    }
    return 0;
}

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH_LINE(P) __builtin_prefetch((P))
#else
#define PREFETCH_LINE(P) ((void)0)
#endif

/* One index value as a coordinate in [0, bound) (negative signed values from the end, then clamped); OUT |= outside. */
#define CLAMP(IT, V, BOUND, C, OUT)                                                               \
    if ((IT)-1 < (IT)0) {                                                                         \
        int64_t v_ = (int64_t)(V);                                                                \
        v_ += v_ < 0 ? (BOUND) : 0;                                                               \
        OUT |= (uint64_t)v_ >= (uint64_t)(BOUND);                                                 \
        C = v_ < 0 ? 0 : (v_ >= (BOUND) ? (BOUND) - 1 : v_);                                      \
    } else {                                                                                      \
        uint64_t v_ = (uint64_t)(V);                                                              \
        OUT |= v_ >= (uint64_t)(BOUND);                                                           \
        C = v_ >= (uint64_t)(BOUND) ? (BOUND) - 1 : (int64_t)v_;                                  \
    }

#define BY_INDEX_TYPE(T, M, ...)                                                                  \
    switch (T) {                                                                                  \
    case T_I32: M(int32_t, __VA_ARGS__) break;                                                    \
    case T_I64: M(int64_t, __VA_ARGS__) break;                                                    \
    case T_U32: M(uint32_t, __VA_ARGS__) break;                                                   \
    default: M(uint64_t, __VA_ARGS__) break;                                                      \
    }

#define BY_WORD(ES, M, IT)                                                                        \
    switch (ES) {                                                                                 \
    case 1: M(IT, uint8_t) break;                                                                 \
    case 2: M(IT, uint16_t) break;                                                                \
    case 4: M(IT, uint32_t) break;                                                                \
    default: M(IT, uint64_t) break;                                                               \
    }

/* Every dimension outer, mode-0 index axes of one type that clamp (no skip), plain copies: each innermost row in one
 * typed loop. pf: the indexed reach exceeds the caches (random addresses), so the element PREFETCH_E positions ahead
 * is prefetched (the loads then overlap: 1.5x on a 4 MiB table here). */
#define PREFETCH_E 16
#define PREFETCH_REACH ((int64_t)1 << 18)
#define ELEMENT_ROW(IT, WT)                                                                       \
    for (int64_t i = 0; i < n; i++) {                                                             \
        int64_t off = 0;                                                                          \
        for (int64_t a = 0; a < na; a++) {                                                        \
            int64_t c;                                                                            \
            CLAMP(IT, ((const IT*)idx[a])[io[a] + i * istep[a]], bound[a], c, out)                \
            off += c * stride[a];                                                                 \
        }                                                                                         \
        if (gather) ((WT*)dst)[d + i * dstep] = ((const WT*)src)[s + i * sstep + off];            \
        else ((WT*)dst)[d + i * dstep + off] = ((const WT*)src)[s + i * sstep];                   \
    }
#define ELEMENT_ROW1(IT, WT)                                                                      \
    for (int64_t i = 0; i < n; i++) {                                                             \
        int64_t c;                                                                                \
        if (pf && i + PREFETCH_E < n) {                                                           \
            int64_t f, ignored = 0;                                                               \
            CLAMP(IT, ((const IT*)idx[0])[io[0] + (i + PREFETCH_E) * istep[0]], bound[0], f, ignored) \
            (void)ignored;                                                                        \
            if (gather) PREFETCH_LINE((const WT*)src + s + (i + PREFETCH_E) * sstep + f * stride[0]); \
            else PREFETCH_LINE((WT*)dst + d + (i + PREFETCH_E) * dstep + f * stride[0]);          \
        }                                                                                         \
        CLAMP(IT, ((const IT*)idx[0])[io[0] + i * istep[0]], bound[0], c, out)                    \
        if (gather) ((WT*)dst)[d + i * dstep] = ((const WT*)src)[s + i * sstep + c * stride[0]];  \
        else ((WT*)dst)[d + i * dstep + c * stride[0]] = ((const WT*)src)[s + i * sstep];         \
    }
#define ELEMENT_ROW2(IT, WT)                                                                      \
    {                                                                                             \
        const IT *i0 = (const IT*)idx[0] + io[0], *i1 = (const IT*)idx[1] + io[1];                 \
        const int64_t t0 = istep[0], t1 = istep[1], b0 = bound[0], b1 = bound[1];                 \
        const int64_t m0 = stride[0], m1 = stride[1];                                             \
        for (int64_t i = 0; i < n; i++) {                                                         \
            int64_t c0, c1;                                                                       \
            if (pf && i + PREFETCH_E < n) {                                                       \
                int64_t f0, f1, ignored = 0;                                                      \
                CLAMP(IT, i0[(i + PREFETCH_E) * t0], b0, f0, ignored)                             \
                CLAMP(IT, i1[(i + PREFETCH_E) * t1], b1, f1, ignored)                             \
                (void)ignored;                                                                    \
                if (gather) PREFETCH_LINE((const WT*)src + s + (i + PREFETCH_E) * sstep + f0 * m0 + f1 * m1); \
                else PREFETCH_LINE((WT*)dst + d + (i + PREFETCH_E) * dstep + f0 * m0 + f1 * m1);  \
            }                                                                                     \
            CLAMP(IT, i0[i * t0], b0, c0, out)                                                    \
            CLAMP(IT, i1[i * t1], b1, c1, out)                                                    \
            const int64_t off = c0 * m0 + c1 * m1;                                                \
            if (gather) ((WT*)dst)[d + i * dstep] = ((const WT*)src)[s + i * sstep + off];        \
            else ((WT*)dst)[d + i * dstep + off] = ((const WT*)src)[s + i * sstep];               \
        }                                                                                         \
    }
#define ELEMENT_ROWS(IT, ES)                                                                      \
    if (na == 1) { BY_WORD(ES, ELEMENT_ROW1, IT) }                                                \
    else if (na == 2) { BY_WORD(ES, ELEMENT_ROW2, IT) }                                           \
    else { BY_WORD(ES, ELEMENT_ROW, IT) }

/* REVERSE_SUBSEQUENCES along the innermost dimension (one length per row). */
#define REVERSE_ROW(IT, WT)                                                                       \
    {                                                                                             \
        const int64_t len = CLAMPED_LENGTH(IT, ((const IT*)idx[0])[io[0]], bound[0]);              \
        const WT* sp = (const WT*)src + s;                                                        \
        WT* dp = (WT*)dst + d;                                                                    \
        const int64_t back = sstep - stride[0], fwd = sstep + stride[0];                          \
        if (dstep == 1 && back == -1 && fwd == 1) {           /* packed rows: loops that vectorise */ \
            const WT* end = sp + len - 1;                                                         \
            for (int64_t i = 0; i < len; i++) dp[i] = end[-i];                                    \
            memcpy(dp + len, sp + len, (size_t)(n - len) * sizeof(WT));                           \
        } else {                                                                                  \
            for (int64_t i = 0; i < len; i++) dp[i * dstep] = sp[i * back + (len - 1) * stride[0]]; \
            for (int64_t i = len; i < n; i++) dp[i * dstep] = sp[i * fwd];                        \
        }                                                                                         \
    }

/* REVERSE_SUBSEQUENCES along an outer dimension (a length per innermost position, clamped). Where a row of lengths
 * holds one length (seen: the last row scanned, kept while the rows along the reversed dimension reuse it), each row
 * is one source row, copied whole where both are packed; else each element picks its own source row. */
#define REVERSE_COL(IT, WT)                                                                       \
    {                                                                                             \
        const int64_t b = bound[0], e = pos[axis[0]], st = stride[0], is = istep[0];              \
        const IT* lp = (const IT*)idx[0] + io[0];                                                 \
        const WT* sp = (const WT*)src + s;                                                        \
        WT* dp = (WT*)dst + d;                                                                    \
        if ((const void*)lp != seen) {                                                            \
            seen = lp;                                                                            \
            one = CLAMPED_LENGTH(IT, lp[0], b);                                                   \
            for (int64_t i = 1; i < n && one >= 0; i++)                                           \
                if (CLAMPED_LENGTH(IT, lp[i * is], b) != one) one = -1;                           \
        }                                                                                         \
        if (one >= 0 && sstep == 1 && dstep == 1) {                                               \
            memcpy(dp, sp + (e < one ? one - 1 - e : e) * st, (size_t)n * sizeof(WT));            \
        } else {                                                                                  \
            for (int64_t i = 0; i < n; i++) {                                                     \
                const int64_t len = CLAMPED_LENGTH(IT, lp[i * is], b);                            \
                dp[i * dstep] = sp[i * sstep + (e < len ? len - 1 - e : e) * st];                 \
            }                                                                                     \
        }                                                                                         \
    }

/* Every dimension outer (one element per position), plain copies or skips: the parameters in locals (the
 * destination's char writes would otherwise make the compiler reload them), the innermost dimension in one loop. */
static void run_elements(const idx_params* pp, const char* src, char* dst, const char* const* idx, int* bad) {
    const int64_t r = pp->rank, last = r - 1, na = pp->naxes, es = pp->element_size;
    const int gather = pp->kind == 0;
    const int64_t n = pp->sizes[last], sstep = pp->src_strides[last], dstep = pp->dst_strides[last];
    int64_t stride[IDX_MAX_AXES], bound[IDX_MAX_AXES], axis[IDX_MAX_AXES], istep[IDX_MAX_AXES], io[IDX_MAX_AXES];
    const int64_t type = na ? pp->axes[0].type : 0;
    int typed = na > 0;                      /* one index type, mode 0, clamping */
    for (int64_t a = 0; a < na; a++) {
        const idx_axis* ax = &pp->axes[a];
        stride[a] = ax->stride; bound[a] = ax->bound; axis[a] = ax->axis; istep[a] = ax->strides[last];
        io[a] = ax->offset;
        if (ax->mode != 0 || ax->out_of_range || ax->type != type) typed = 0;
    }
    const int reverse_rows = na == 1 && pp->axes[0].mode == 1 && axis[0] == last && istep[0] == 0;
    const int reverse_cols = gather && na == 1 && pp->axes[0].mode == 1 && axis[0] != last;
    int64_t far = 0;
    for (int64_t a = 0; a < na; a++) far += (bound[a] - 1) * (stride[a] < 0 ? -stride[a] : stride[a]) * es;
    const int pf = far >= PREFETCH_REACH;
    int out = 0;
    int64_t pos[IDX_MAX_RANK] = {0};
    int64_t s = pp->src_offset, d = pp->dst_offset;
    const void* seen = NULL;                 /* REVERSE_COL: the row of lengths last scanned */
    int64_t one = -1;                        /* its one length, or -1 */
    do {
        if (typed) {
            BY_INDEX_TYPE(type, ELEMENT_ROWS, es)
        } else if (reverse_rows) {
#define REVERSE_WORDS(IT, ES) BY_WORD(ES, REVERSE_ROW, IT)
            BY_INDEX_TYPE(type, REVERSE_WORDS, es)
        } else if (reverse_cols) {
#define REVERSE_COLUMNS(IT, ES) BY_WORD(ES, REVERSE_COL, IT)
            BY_INDEX_TYPE(type, REVERSE_COLUMNS, es)
        } else for (int64_t i = 0; i < n; i++) {
            int64_t off = 0;
            int keep = 1;
            for (int64_t a = 0; a < na && keep; a++) {
                int64_t c = 0;
                keep = coordinate(&pp->axes[a], idx[a], io[a] + i * istep[a], axis[a] == last ? i : pos[axis[a]], &c,
                                  &out);
                off += c * stride[a];
            }
            if (!keep) continue;
            const int64_t so = s + i * sstep + (gather ? off : 0), dd = d + i * dstep + (gather ? 0 : off);
            switch (es) {
            case 1: ((uint8_t*)dst)[dd] = ((const uint8_t*)src)[so]; break;
            case 2: ((uint16_t*)dst)[dd] = ((const uint16_t*)src)[so]; break;
            case 4: ((uint32_t*)dst)[dd] = ((const uint32_t*)src)[so]; break;
            default: ((uint64_t*)dst)[dd] = ((const uint64_t*)src)[so]; break;
            }
        }
    } while (walk_next(pp, last, pos, &s, &d, na, io));
    *bad |= out;
}

/* One mode-0 clamping index axis over the outer dimensions, each position moving one packed block (an embedding's
 * row): the innermost outer dimension in one typed loop (1.2x the general loop on 256-byte rows; prefetching rows
 * ahead gained nothing). */
#define ROWS_LOOP(IT, UNUSED)                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                             \
        int64_t c;                                                                                \
        CLAMP(IT, ((const IT*)ip)[io[0] + i * istep], bound, c, out)                              \
        const int64_t so = s + i * sstep + (gather ? c * stride : 0);                             \
        const int64_t dd = d + i * dstep + (gather ? 0 : c * stride);                             \
        memcpy(dst + dd * es, src + so * es, (size_t)bytes);                                      \
    }

static void run_rows(const idx_params* p, const char* src, char* dst, const char* ip, int64_t packed, int* bad) {
    const idx_axis* ax = &p->axes[0];
    const int64_t last = p->outer - 1, es = p->element_size, bytes = packed * es;
    const int64_t n = p->sizes[last], sstep = p->src_strides[last], dstep = p->dst_strides[last];
    const int64_t istep = ax->strides[last], stride = ax->stride, bound = ax->bound;
    const int gather = p->kind == 0;
    int out = 0;
    int64_t pos[IDX_MAX_RANK] = {0}, io[1] = {ax->offset};
    int64_t s = p->src_offset, d = p->dst_offset;
    do {
        BY_INDEX_TYPE(ax->type, ROWS_LOOP, 0)
    } while (walk_next(p, last, pos, &s, &d, 1, io));
    *bad |= out;
}

/* A pass without index axes (a Copy of the move program, kept by the call cache): the destination's packed suffix in
 * one move per position (a fill where the source is one element broadcast). */
static void run_copy(const idx_params* p, const char* src, char* dst) {
    const int64_t r = p->rank, es = p->element_size;
    int fill = 1;
    for (int64_t k = 0; k < r; k++) if (p->src_strides[k] && p->sizes[k] > 1) fill = 0;
    int64_t last = r, blk = 1;
    while (last > 0 && (p->sizes[last - 1] == 1 ||
                        (p->dst_strides[last - 1] == blk && (fill || p->src_strides[last - 1] == blk)))) {
        blk *= p->sizes[last - 1];
        last--;
    }
    int64_t pos[IDX_MAX_RANK] = {0}, io[1] = {0};
    int64_t s = p->src_offset, d = p->dst_offset;
    do {
        char* dp = dst + d * es;
        const char* sp = src + s * es;
        if (!fill) memcpy(dp, sp, (size_t)(blk * es));
        else switch (es) {
#define FILL(WT) { WT v; memcpy(&v, sp, sizeof v); for (int64_t i = 0; i < blk; i++) ((WT*)dp)[i] = v; break; }
            case 1: memset(dp, *(const unsigned char*)sp, (size_t)blk); break;
            case 2: FILL(uint16_t)
            case 4: FILL(uint32_t)
            default: FILL(uint64_t)
#undef FILL
        }
    } while (walk_next(p, last, pos, &s, &d, 0, io));
}

int odml_index_fits(const idx_params* p, int64_t src_len, int64_t dst_len, const int64_t* idx_len) {
    for (int64_t k = 0; k < p->rank; k++) if (p->sizes[k] == 0) return 1;
    /* every index element read lies in its tensor, and every data element the pass may reach (its coordinates are
       always inside [0, bound)) in its range */
    int64_t lo, hi, s0, s1, d0, d1, reach_lo = 0, reach_hi = 0;
    for (int64_t a = 0; a < p->naxes; a++) {
        const idx_axis* ax = &p->axes[a];
        span(p->sizes, ax->strides, p->outer, &lo, &hi);
        if (ax->offset + lo < 0 || ax->offset + hi >= idx_len[a]) return 0;
        int64_t far = (ax->bound - 1) * ax->stride;
        if (far < 0) reach_lo += far; else reach_hi += far;
    }
    span(p->sizes, p->src_strides, p->rank, &s0, &s1);
    span(p->sizes, p->dst_strides, p->rank, &d0, &d1);
    s0 += p->src_offset, s1 += p->src_offset, d0 += p->dst_offset, d1 += p->dst_offset;
    if (p->kind == 0) { s0 += reach_lo; s1 += reach_hi; } else { d0 += reach_lo; d1 += reach_hi; }
    return !((!p->has_value && (s0 < 0 || s1 >= src_len)) || d0 < 0 || d1 >= dst_len);
}

void odml_index_move(const idx_params* p, const char* src, char* dst, const char* const* idx, int* bad) {
    const int64_t r = p->rank, outer = p->outer;
    for (int64_t k = 0; k < r; k++) if (p->sizes[k] == 0) return;
    const int plain = !p->has_value && !(p->kind == 1 && p->accumulate);
    if (p->naxes == 0 && plain) {
        run_copy(p, src, dst);
        return;
    }
    if (outer == r && r >= 1 && plain) {
        run_elements(p, src, dst, idx, bad);
        return;
    }
    const int64_t packed = packed_block(p);
    if (outer >= 1 && plain && packed && p->naxes == 1 && p->axes[0].mode == 0 && p->axes[0].out_of_range == 0) {
        run_rows(p, src, dst, idx[0], packed, bad);
        return;
    }
    int64_t pos[IDX_MAX_RANK] = {0};
    int64_t s = p->src_offset, d = p->dst_offset;
    int64_t io[IDX_MAX_AXES];
    for (int64_t a = 0; a < p->naxes; a++) io[a] = p->axes[a].offset;
    do {
        int64_t so = s, dd = d;
        int keep = 1;
        for (int64_t a = 0; a < p->naxes && keep; a++) {
            const idx_axis* ax = &p->axes[a];
            int64_t c;
            keep = coordinate(ax, idx[a], io[a], ax->mode == 1 ? pos[ax->axis] : 0, &c, bad);
            if (keep) {
                if (p->kind == 0) so += c * ax->stride;
                else dd += c * ax->stride;
            }
        }
        if (keep) block(p, src, dst, so, dd, packed);
    } while (walk_next(p, outer, pos, &s, &d, p->naxes, io));
}

/* Whether a walk over `sizes` with `strides` from `offset` could reach IDX_FAR elements or more (or a size is
 * negative): a record built by hand could otherwise make odml_index_fits' sums wrap and pass; so bounded, its sums of
 * a few spans stay far below 2^63. A size-1 dimension's stride is never stepped (NumPy and PyTorch allow any). */
#define IDX_FAR ((int64_t)1 << 58)
static int too_far(const int64_t* sizes, const int64_t* strides, int64_t r, int64_t offset) {
    if (offset <= -IDX_FAR || offset >= IDX_FAR) return 1;
    int64_t total = 0;
    for (int64_t k = 0; k < r; k++) {
        const int64_t n = sizes[k], st = strides[k];
        if (n == 1) continue;
        if (n < 0 || n >= IDX_FAR || st <= -IDX_FAR || st >= IDX_FAR) return 1;
        const int64_t a = st < 0 ? -st : st;
        if (a && n > (IDX_FAR - total) / a) return 1;
        total += n * a;
    }
    return 0;
}

const char* odml_index_malformed(const idx_params* p, int64_t ninputs) {
    if (p->rank < 0 || p->rank > IDX_MAX_RANK || p->outer < 0 || p->outer > p->rank || p->naxes < 0 ||
        p->naxes > IDX_MAX_AXES || (p->kind != 0 && p->kind != 1) ||
        (p->element_size != 1 && p->element_size != 2 && p->element_size != 4 && p->element_size != 8))
        return "malformed parameters";
    for (int64_t a = 0; a < p->naxes; a++) {
        const idx_axis* ax = &p->axes[a];
        if (ax->bound < 1 || (ax->mode != 0 && ax->mode != 1) ||
            (ax->mode == 1 && (ax->axis < 0 || ax->axis >= p->outer || p->sizes[ax->axis] > ax->bound)) ||
            (ax->type != T_I32 && ax->type != T_I64 && ax->type != T_U32 && ax->type != T_U64) ||
            (ninputs >= 0 && (ax->slot < 0 || ax->slot >= ninputs)) ||
            too_far(p->sizes, ax->strides, p->rank, ax->offset) || too_far(&ax->bound, &ax->stride, 1, 0))
            return "malformed index axis";
    }
    if (too_far(p->sizes, p->src_strides, p->rank, p->src_offset) ||
        too_far(p->sizes, p->dst_strides, p->rank, p->dst_offset))
        return "malformed parameters";
    return NULL;
}

PyObject* odml_py_index_run_pass(PyObject* self, PyObject* args) {
    Py_buffer params;
    unsigned long long src_addr, dst_addr;
    long long src_len, dst_len;
    PyObject *addrs, *lens;
    if (!PyArg_ParseTuple(args, "y*KLKLO!O!", &params, &src_addr, &src_len, &dst_addr, &dst_len,
                          &PyTuple_Type, &addrs, &PyTuple_Type, &lens))
        return NULL;
    idx_params p;
    if (params.len != (Py_ssize_t)sizeof p) {
        PyBuffer_Release(&params);
        return PyErr_Format(PyExc_ValueError, "index_run_pass: parameters of %zd bytes; expected %zu",
                            params.len, sizeof p);
    }
    memcpy(&p, params.buf, sizeof p);
    PyBuffer_Release(&params);
    const char* why = odml_index_malformed(&p, -1);
    if (why || PyTuple_GET_SIZE(addrs) != p.naxes || PyTuple_GET_SIZE(lens) != p.naxes)
        return PyErr_Format(PyExc_ValueError, "index_run_pass: %s", why ? why : "malformed parameters");
    const char* idx[IDX_MAX_AXES];
    int64_t idx_len[IDX_MAX_AXES];
    for (Py_ssize_t a = 0; a < p.naxes; a++) {
        idx[a] = (const char*)(uintptr_t)PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(addrs, a));
        idx_len[a] = PyLong_AsLongLong(PyTuple_GET_ITEM(lens, a));
        if (PyErr_Occurred()) return NULL;
    }
    int fits, bad = 0;
    Py_BEGIN_ALLOW_THREADS                           /* the reach checked once, before anything moves */
    fits = odml_index_fits(&p, src_len, dst_len, idx_len);
    if (fits) odml_index_move(&p, (const char*)(uintptr_t)src_addr, (char*)(uintptr_t)dst_addr, idx, &bad);
    Py_END_ALLOW_THREADS
    if (!fits)
        return PyErr_Format(PyExc_RuntimeError, "opendml internal error: an index pass reaches outside a bound "
                            "range (the plan's spans were not checked)");
    Py_RETURN_NONE;
}

