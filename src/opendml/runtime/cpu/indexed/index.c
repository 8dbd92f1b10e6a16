/* The index-driven passes of the move program (plan.Gather, plan.Scatter) on
 * the CPU: opendml.runtime.cpu._index, an extension of its own (the other
 * kernels are _native's).
 *
 * One pass walks its "outer" dimensions in row-major order; at each position
 * it reads every IndexAxis's value from its index tensor, turns it into a
 * coordinate inside [0, bound) (a negative value of a signed type counted
 * from the end, then clamped; or the position skipped: INDEX_SKIP; or, for
 * INDEX_REVERSE_LENGTH, the reversed coordinate of the first min(L, bound)
 * elements), and moves one block of the "inner" dimensions (those that read
 * no index). Values are compared exactly in their own type: no wrap-around.
 * Before anything moves, the whole reach of the pass (its strides' span
 * plus every coordinate's [0, bound) times its stride, and the index
 * tensors' elements read) is checked against the bound ranges; a pass
 * reaching outside them stops with an error (a plan that validation let
 * through never does). The coordinates then never leave [0, bound).
 *
 * A scatter runs its positions in order on one thread: where positions
 * repeat, the last write wins (or, accumulating, the additions happen in
 * that order: float16 adds in float32 and rounds each sum, as NumPy does;
 * integers wrap), so the result is the same bytes on every run.
 *
 * Every pass also reports whether a (clamping or skipping) index value lay
 * outside its dimension: the array API's index check, fused into the read.
 * A pass without index axes is a plain copy or fill (the Copy passes of the
 * scatters and ONE_HOT, as the call cache at the end of this file keeps
 * them).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../fp16.h"

#define IDX_MAX_RANK 16
#define IDX_MAX_AXES 8

typedef struct {
    int64_t slot, type, offset, stride, bound, mode, out_of_range, axis;
    int64_t strides[IDX_MAX_RANK];
} idx_axis;

typedef struct {
    int64_t kind;            /* 0 gather, 1 scatter */
    int64_t element_size;
    int64_t data_type;       /* DML_TENSOR_DATA_TYPE of the destination (accumulation) */
    int64_t rank, outer;
    int64_t accumulate, has_value;
    uint64_t value_bits;
    int64_t src_offset, dst_offset;
    int64_t sizes[IDX_MAX_RANK], src_strides[IDX_MAX_RANK], dst_strides[IDX_MAX_RANK];
    int64_t naxes;
    idx_axis axes[IDX_MAX_AXES];
} idx_params;

/* DML_TENSOR_DATA_TYPE values */
enum { T_F32 = 1, T_F16 = 2, T_U32 = 3, T_U16 = 4, T_U8 = 5, T_I32 = 6, T_I16 = 7, T_I8 = 8, T_F64 = 9,
       T_U64 = 10, T_I64 = 11 };

/* The coordinate of one index value; 0: skip the position. *bad is set where
 * a (mode 0) value lies outside [-bound, bound) (signed) or [0, bound): the
 * array API's index check, fused into the pass. */
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
        int64_t len;
        if (is_signed) len = sv < 0 ? 0 : (sv > bound ? bound : sv);
        else len = uv > (uint64_t)bound ? bound : (int64_t)uv;
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


/* The element count of a pass's inner block (dims [outer, rank)) where it is
 * one packed run on both sides (a size-1 dimension's stride never matters),
 * else 0. */
static int64_t packed_block(const idx_params* p) {
    int64_t blk = 1;
    for (int64_t k = p->rank - 1; k >= p->outer; k--) {
        if (p->sizes[k] == 1) continue;
        if (p->src_strides[k] != blk || p->dst_strides[k] != blk) return 0;
        blk *= p->sizes[k];
    }
    return blk;
}

/* Move one inner block: src element so, dst element dd, inner dims [outer,
 * rank); `packed` as packed_block (0 for a constant value). */
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

static int64_t span_lo(const int64_t* sizes, const int64_t* strides, int64_t a, int64_t b) {
    int64_t v = 0;
    for (int64_t k = a; k < b; k++) if (strides[k] < 0) v += (sizes[k] - 1) * strides[k];
    return v;
}

static int64_t span_hi(const int64_t* sizes, const int64_t* strides, int64_t a, int64_t b) {
    int64_t v = 0;
    for (int64_t k = a; k < b; k++) if (strides[k] > 0) v += (sizes[k] - 1) * strides[k];
    return v;
}

/* Step a row-major walk of dims [0, last) one position on (the data
 * offsets and the na index offsets follow); 0 once every position was
 * visited. */
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

/* One index value as a coordinate in [0, bound) (negative signed values
 * count from the end, then clamped); `out` collects whether it was outside. */
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

/* Every dimension outer, mode-0 index axes of one type that clamp (no skip),
 * plain copies: each innermost row in one typed loop. The reach was checked.
 * pf: the indexed reach is larger than the caches keep (random addresses),
 * so the element PREFETCH_E positions ahead is prefetched (its loads then
 * overlap: 1.5x on a 4 MiB table here). */
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
        int64_t len, b = bound[0];                                                                \
        if ((IT)-1 < (IT)0) { int64_t v = (int64_t)((const IT*)idx[0])[io[0]]; len = v < 0 ? 0 : (v > b ? b : v); } \
        else { uint64_t v = (uint64_t)((const IT*)idx[0])[io[0]]; len = v > (uint64_t)b ? b : (int64_t)v; } \
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

typedef struct {
    int64_t type[IDX_MAX_AXES], stride[IDX_MAX_AXES], bound[IDX_MAX_AXES], mode[IDX_MAX_AXES],
        skip[IDX_MAX_AXES], axis[IDX_MAX_AXES], istep[IDX_MAX_AXES];
} axis_locals;

/* Every dimension outer (one element per position), plain copies or skips:
 * the parameters in locals (the destination's char writes would otherwise
 * make the compiler reload them), the innermost dimension in one loop. The
 * reach was checked. */
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
    int64_t far = 0;
    for (int64_t a = 0; a < na; a++) far += (bound[a] - 1) * (stride[a] < 0 ? -stride[a] : stride[a]) * es;
    const int pf = far >= PREFETCH_REACH;
    int out = 0;
    int64_t pos[IDX_MAX_RANK] = {0};
    int64_t s = pp->src_offset, d = pp->dst_offset;
    do {
        if (typed) {
            BY_INDEX_TYPE(type, ELEMENT_ROWS, es)
        } else if (reverse_rows) {
#define REVERSE_WORDS(IT, ES) BY_WORD(ES, REVERSE_ROW, IT)
            BY_INDEX_TYPE(type, REVERSE_WORDS, es)
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

/* One mode-0 clamping index axis over the outer dimensions, each position
 * moving one packed block (an embedding's row): the innermost outer
 * dimension in one typed loop (1.2x the general loop on 256-byte rows;
 * prefetching rows ahead gained nothing here). The reach was checked. */
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

/* A pass without index axes (a Copy of the move program, kept by the call
 * cache): the destination's packed suffix in one move per position (a fill
 * where the source is one element broadcast). The reach was checked. */
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

/* 0, or -1 where the pass could leave a bound range. *bad: set where a
 * mode-0 index value lies outside its dimension (see coordinate). */
static int run(const idx_params* p, const char* src, int64_t src_len, char* dst, int64_t dst_len,
               const char* const* idx, const int64_t* idx_len, int* bad) {
    const int64_t r = p->rank, outer = p->outer;
    for (int64_t k = 0; k < r; k++) if (p->sizes[k] == 0) return 0;
    const int64_t slo = span_lo(p->sizes, p->src_strides, outer, r), shi = span_hi(p->sizes, p->src_strides, outer, r);
    const int64_t dlo = span_lo(p->sizes, p->dst_strides, outer, r), dhi = span_hi(p->sizes, p->dst_strides, outer, r);
    /* every index element read lies in its tensor, and every data element
       the pass may reach (its coordinates are always inside [0, bound))
       lies in its range: checked once, before anything moves */
    int64_t reach_lo = 0, reach_hi = 0;
    for (int64_t a = 0; a < p->naxes; a++) {
        const idx_axis* ax = &p->axes[a];
        int64_t lo = ax->offset + span_lo(p->sizes, ax->strides, 0, outer);
        int64_t hi = ax->offset + span_hi(p->sizes, ax->strides, 0, outer);
        if (lo < 0 || hi >= idx_len[a]) return -1;
        int64_t far = (ax->bound - 1) * ax->stride;
        if (far < 0) reach_lo += far; else reach_hi += far;
    }
    {
        int64_t s0 = p->src_offset + span_lo(p->sizes, p->src_strides, 0, outer) + slo;
        int64_t s1 = p->src_offset + span_hi(p->sizes, p->src_strides, 0, outer) + shi;
        int64_t d0 = p->dst_offset + span_lo(p->sizes, p->dst_strides, 0, outer) + dlo;
        int64_t d1 = p->dst_offset + span_hi(p->sizes, p->dst_strides, 0, outer) + dhi;
        if (p->kind == 0) { s0 += reach_lo; s1 += reach_hi; } else { d0 += reach_lo; d1 += reach_hi; }
        if ((!p->has_value && (s0 < 0 || s1 >= src_len)) || d0 < 0 || d1 >= dst_len) return -1;
    }
    const int plain = !p->has_value && !(p->kind == 1 && p->accumulate);
    if (p->naxes == 0 && plain) {
        run_copy(p, src, dst);
        return 0;
    }
    if (outer == r && r >= 1 && plain) {
        run_elements(p, src, dst, idx, bad);
        return 0;
    }
    const int64_t packed = packed_block(p);
    if (outer >= 1 && plain && packed && p->naxes == 1 && p->axes[0].mode == 0 && p->axes[0].out_of_range == 0) {
        run_rows(p, src, dst, idx[0], packed, bad);
        return 0;
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
    return 0;
}

/* NULL, or what is wrong with a pass's parameters. */
static const char* malformed(const idx_params* p, int64_t ninputs) {
    if (p->rank < 0 || p->rank > IDX_MAX_RANK || p->outer < 0 || p->outer > p->rank || p->naxes < 0 ||
        p->naxes > IDX_MAX_AXES || (p->kind != 0 && p->kind != 1) ||
        (p->element_size != 1 && p->element_size != 2 && p->element_size != 4 && p->element_size != 8))
        return "malformed parameters";
    for (int64_t a = 0; a < p->naxes; a++) {
        const idx_axis* ax = &p->axes[a];
        if (ax->bound < 1 || (ax->mode != 0 && ax->mode != 1) ||
            (ax->mode == 1 && (ax->axis < 0 || ax->axis >= p->outer || p->sizes[ax->axis] > ax->bound)) ||
            (ax->type != T_I32 && ax->type != T_I64 && ax->type != T_U32 && ax->type != T_U64) ||
            (ninputs >= 0 && (ax->slot < 0 || ax->slot >= ninputs)))
            return "malformed index axis";
    }
    return NULL;
}

/* run_pass(params: bytes, src_addr, src_len, dst_addr, dst_len, index_addrs: tuple, index_lens: tuple)
 * (lengths in elements of each range's own type). */
static PyObject* run_pass(PyObject* self, PyObject* args) {
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
        return PyErr_Format(PyExc_ValueError, "_index.run_pass: parameters of %zd bytes; expected %zu",
                            params.len, sizeof p);
    }
    memcpy(&p, params.buf, sizeof p);
    PyBuffer_Release(&params);
    const char* why = malformed(&p, -1);
    if (why || PyTuple_GET_SIZE(addrs) != p.naxes || PyTuple_GET_SIZE(lens) != p.naxes)
        return PyErr_Format(PyExc_ValueError, "_index.run_pass: %s", why ? why : "malformed parameters");
    const char* idx[IDX_MAX_AXES];
    int64_t idx_len[IDX_MAX_AXES];
    for (Py_ssize_t a = 0; a < p.naxes; a++) {
        idx[a] = (const char*)(uintptr_t)PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(addrs, a));
        idx_len[a] = PyLong_AsLongLong(PyTuple_GET_ITEM(lens, a));
        if (PyErr_Occurred()) return NULL;
    }
    int rc, bad = 0;
    Py_BEGIN_ALLOW_THREADS
    rc = run(&p, (const char*)(uintptr_t)src_addr, src_len, (char*)(uintptr_t)dst_addr, dst_len, idx, idx_len, &bad);
    Py_END_ALLOW_THREADS
    if (rc != 0)
        return PyErr_Format(PyExc_RuntimeError, "opendml internal error: an index pass reaches outside a bound "
                            "range (the plan's spans were not checked)");
    Py_RETURN_NONE;
}

#ifdef ODML_NUMPY
/* -- The call cache ----------------------------------------------------------------------------------
 *
 * call(op, check, *arrays, *fields): a repeated index-family call of the
 * array API on NumPy arrays, served here before any Python runs: None where
 * no entry matches (the Python route runs it), False where `check` is True
 * and an index lies outside its dimension (the route then runs and raises
 * its error naming the first one), else the new output. An entry is keyed by
 * the operator, the arrays' (type, item size, shape, byte strides) (exact,
 * aligned, native-order ndarrays only) and the fields (exact ints or None)
 * exactly; `put` records one after the route ran the same call (on the
 * settings of generation() `since`), with the route's move program as
 * passes of this file's kernel. The index check is fused into the passes:
 * every index is read where the entry says its passes read each checked
 * index (else a checked call is left to the route). */
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#define N_OPS 7
#define MAX_IN 3
#define KEY_MAX (4 + MAX_IN * (3 + 2 * IDX_MAX_RANK) + 2 * 8)
#define SLOTS 256
static const int NIN[N_OPS] = {2, 2, 2, 3, 3, 2, 2};   /* gather ... reverse_subsequences: arrays first */

typedef struct {
    int64_t src_slot;        /* an input, or -1: the output (a scatter of a constant value) */
    int64_t checked;         /* its index values are the array API's checked indices */
    idx_params p;
} ipass;

typedef struct {
    int64_t nin, npass, check, ndim, out_bytes, use_blocks;
    int64_t dims[IDX_MAX_RANK];
    int64_t origin[MAX_IN], span[MAX_IN];   /* per input: bytes back to element 0; elements reachable */
    ipass passes[];
} ientry;

typedef struct {
    uint64_t hash;
    int64_t n, key[KEY_MAX];
    PyObject *entry, *descr;               /* bytes (an ientry), the output's dtype */
} islot;

static islot* table;
static int enabled = 1, numpy_ready;
static unsigned long long generation;
static long long hits, misses;
static PyObject *block_type, *cache_limit;
static int64_t block_min = INT64_MAX;

/* The key of a call's arguments (op, check, arrays..., fields...); -1: no key. */
static int make_key(PyObject* const* args, Py_ssize_t nargs, int64_t* key, int64_t* n) {
    if (nargs < 2 || !PyLong_CheckExact(args[0])) return -1;
    long op = PyLong_AsLong(args[0]);
    if (op < 0 || op >= N_OPS) { PyErr_Clear(); return -1; }
    const int nin = NIN[op];
    if (nargs < 2 + nin || nargs > 2 + nin + 8) return -1;
    int64_t k = 0;
    key[k++] = op;
    key[k++] = nargs;
    for (int i = 0; i < nin; i++) {
        PyObject* a = args[2 + i];
        if (!PyArray_CheckExact(a)) return -1;
        PyArrayObject* x = (PyArrayObject*)a;
        const int nd = PyArray_NDIM(x);
        if (nd > IDX_MAX_RANK || !PyArray_ISNOTSWAPPED(x) || !PyArray_ISALIGNED(x)) return -1;
        key[k++] = PyArray_TYPE(x);
        key[k++] = PyArray_ITEMSIZE(x);
        key[k++] = nd;
        for (int d = 0; d < nd; d++) {
            key[k++] = PyArray_DIM(x, d);
            key[k++] = PyArray_STRIDE(x, d);
        }
    }
    for (Py_ssize_t i = 2 + nin; i < nargs; i++) {
        PyObject* a = args[i];
        if (a == Py_None) {
            key[k++] = 0;
            key[k++] = 0;
        } else if (PyLong_CheckExact(a)) {
            int overflow;
            long long v = PyLong_AsLongLongAndOverflow(a, &overflow);
            if (overflow || (v == -1 && PyErr_Occurred())) { PyErr_Clear(); return -1; }
            key[k++] = 1;
            key[k++] = v;
        } else {
            return -1;
        }
    }
    *n = k;
    return 0;
}

static uint64_t hash_key(const int64_t* key, int64_t n) {
    uint64_t h = 1469598103934665603ull;
    for (int64_t i = 0; i < n; i++) h = (h ^ (uint64_t)key[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static void drop_all(void) {
    if (!table) return;
    for (int i = 0; i < SLOTS; i++) {
        Py_CLEAR(table[i].entry);
        Py_CLEAR(table[i].descr);
    }
}

/* A new C-ordered output of e's shape and `descr` (stolen): an output block
 * of the CPU backend where large enough, as CpuBackend.empty gives. */
static PyObject* new_output(const ientry* e, PyObject* descr) {
    npy_intp dims[IDX_MAX_RANK];
    for (int i = 0; i < e->ndim; i++) dims[i] = (npy_intp)e->dims[i];
    if (e->use_blocks && block_type && e->out_bytes >= block_min) {
        PyObject* limit = PyObject_CallNoArgs(cache_limit);
        long long lim = limit ? PyLong_AsLongLong(limit) : -1;
        Py_XDECREF(limit);
        if (lim == -1 && PyErr_Occurred()) { Py_DECREF(descr); return NULL; }
        if (e->out_bytes <= lim) {
            PyObject* block = PyObject_CallFunction(block_type, "L", (long long)e->out_bytes);
            if (!block) { Py_DECREF(descr); return NULL; }
            Py_buffer view;
            if (PyObject_GetBuffer(block, &view, PyBUF_WRITABLE) < 0) {
                Py_DECREF(block);
                Py_DECREF(descr);
                return NULL;
            }
            void* mem = view.buf;
            PyBuffer_Release(&view);
            PyObject* out = PyArray_NewFromDescr(&PyArray_Type, (PyArray_Descr*)descr, (int)e->ndim, dims, NULL, mem,
                                                 NPY_ARRAY_CARRAY, NULL);
            if (!out) { Py_DECREF(block); return NULL; }
            if (PyArray_SetBaseObject((PyArrayObject*)out, block) < 0) { Py_DECREF(out); return NULL; }
            return out;
        }
    }
    return PyArray_NewFromDescr(&PyArray_Type, (PyArray_Descr*)descr, (int)e->ndim, dims, NULL, NULL, 0, NULL);
}

static PyObject* icall(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
    int64_t key[KEY_MAX], n;
    if (!enabled || !table || nargs < 2 || (args[1] != Py_True && args[1] != Py_False) ||
        make_key(args, nargs, key, &n) < 0)
        Py_RETURN_NONE;
    const uint64_t h = hash_key(key, n);
    islot* sl = &table[h & (SLOTS - 1)];
    if (!sl->entry || sl->hash != h || sl->n != n || memcmp(sl->key, key, (size_t)n * sizeof *key) != 0) {
        misses++;
        Py_RETURN_NONE;
    }
    const int check = args[1] == Py_True;
    PyObject *eo = sl->entry, *descr = sl->descr;
    const ientry* e = (const ientry*)PyBytes_AS_STRING(eo);
    if (check && !e->check) Py_RETURN_NONE;
    Py_INCREF(eo);
    Py_INCREF(descr);
    PyObject* out = new_output(e, descr);
    if (!out) {
        Py_DECREF(eo);
        if (!PyErr_ExceptionMatches(PyExc_MemoryError)) return NULL;
        PyErr_Clear();                      /* the route raises its AllocationError */
        Py_RETURN_NONE;
    }
    const char* ins[MAX_IN];
    for (int64_t i = 0; i < e->nin; i++) ins[i] = PyArray_BYTES((PyArrayObject*)args[2 + i]) - e->origin[i];
    char* dst = PyArray_BYTES((PyArrayObject*)out);
    int rc = 0, bad = 0;
    PyThreadState* ts = e->out_bytes >= (1 << 16) ? PyEval_SaveThread() : NULL;
    for (int64_t i = 0; i < e->npass && rc == 0; i++) {
        const ipass* ps = &e->passes[i];
        const int64_t dst_len = e->out_bytes / ps->p.element_size;
        const char* idx[IDX_MAX_AXES];
        int64_t lens[IDX_MAX_AXES];
        for (int64_t a = 0; a < ps->p.naxes; a++) {
            idx[a] = ins[ps->p.axes[a].slot];
            lens[a] = e->span[ps->p.axes[a].slot];
        }
        int b = 0;
        rc = run(&ps->p, ps->src_slot < 0 ? dst : ins[ps->src_slot], ps->src_slot < 0 ? dst_len : e->span[ps->src_slot],
                 dst, dst_len, idx, lens, &b);
        if (ps->checked) bad |= b;
    }
    if (ts) PyEval_RestoreThread(ts);
    Py_DECREF(eo);
    if (rc != 0) {
        Py_DECREF(out);
        return PyErr_Format(PyExc_RuntimeError, "opendml internal error: a cached index pass reaches outside a "
                            "bound range");
    }
    if (check && bad) {
        Py_DECREF(out);
        Py_RETURN_FALSE;
    }
    hits++;
    return out;
}

/* put(args, since, descr, shape, use_blocks, origins, check, passes): record
 * the call `args` (as given to call) ran by the route; passes: ((src_slot,
 * checked, params bytes), ...). Whether stored. */
static PyObject* iput(PyObject* self, PyObject* a) {
    PyObject *args, *descr, *shape, *origins, *passes;
    unsigned long long since;
    int use_blocks, check;
    if (!PyArg_ParseTuple(a, "O!KOO!pO!pO!", &PyTuple_Type, &args, &since, &descr, &PyTuple_Type, &shape,
                          &use_blocks, &PyTuple_Type, &origins, &check, &PyTuple_Type, &passes))
        return NULL;
    int64_t key[KEY_MAX], n;
    if (!numpy_ready || !enabled || since != generation || !PyArray_DescrCheck(descr) ||
        make_key(&PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), key, &n) < 0)
        Py_RETURN_FALSE;
    const int nin = NIN[key[0]];
    const Py_ssize_t np_ = PyTuple_GET_SIZE(passes), nd = PyTuple_GET_SIZE(shape);
    if (PyTuple_GET_SIZE(origins) != nin || nd > IDX_MAX_RANK || np_ > 16) Py_RETURN_FALSE;
    PyObject* eo = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(sizeof(ientry) + np_ * sizeof(ipass)));
    if (!eo) return NULL;
    ientry* e = (ientry*)PyBytes_AS_STRING(eo);
    memset(e, 0, sizeof(ientry) + np_ * sizeof(ipass));
    e->nin = nin;
    e->npass = np_;
    e->check = check;
    e->use_blocks = use_blocks;
    e->ndim = nd;
    int64_t count = 1;
    for (Py_ssize_t d = 0; d < nd; d++) {
        e->dims[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, d));
        count *= e->dims[d];
    }
    e->out_bytes = count * (int64_t)PyDataType_ELSIZE((PyArray_Descr*)descr);
    /* each input's element 0 (its lowest-addressed element) and reach, from its own layout */
    for (int i = 0; i < nin; i++) {
        PyArrayObject* x = (PyArrayObject*)PyTuple_GET_ITEM(args, 2 + i);
        const int64_t es = PyArray_ITEMSIZE(x);
        int64_t lo = 0, hi = 0, empty = 0;
        for (int d = 0; d < PyArray_NDIM(x); d++) {
            const int64_t size = PyArray_DIM(x, d), st = PyArray_STRIDE(x, d);
            if (size == 0) empty = 1;
            if (st % es) goto refuse;
            if (st < 0) lo += (size - 1) * st; else hi += (size - 1) * st;
        }
        e->origin[i] = -lo;
        e->span[i] = empty ? 0 : (hi - lo) / es + 1;
        if (PyLong_AsLongLong(PyTuple_GET_ITEM(origins, i)) != e->origin[i]) goto refuse;
    }
    for (Py_ssize_t i = 0; i < np_; i++) {
        PyObject* t = PyTuple_GET_ITEM(passes, i);
        Py_buffer view;
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) goto refuse;
        ipass* ps = &e->passes[i];
        ps->src_slot = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 0));
        ps->checked = PyObject_IsTrue(PyTuple_GET_ITEM(t, 1));
        if (PyErr_Occurred() || PyObject_GetBuffer(PyTuple_GET_ITEM(t, 2), &view, PyBUF_SIMPLE) < 0) goto fail;
        const int ok = view.len == (Py_ssize_t)sizeof ps->p;
        if (ok) memcpy(&ps->p, view.buf, sizeof ps->p);
        PyBuffer_Release(&view);
        if (!ok || ps->src_slot < -1 || ps->src_slot >= nin || malformed(&ps->p, nin) ||
            (ps->src_slot == -1) != (ps->p.has_value != 0) || e->out_bytes % ps->p.element_size)
            goto refuse;
    }
    if (!table && !(table = PyMem_Calloc(SLOTS, sizeof *table))) {
        Py_DECREF(eo);
        return PyErr_NoMemory();
    }
    const uint64_t h = hash_key(key, n);
    islot* sl = &table[h & (SLOTS - 1)];
    PyObject *old_e = sl->entry, *old_d = sl->descr;
    sl->hash = h;
    sl->n = n;
    memcpy(sl->key, key, (size_t)n * sizeof *key);
    Py_INCREF(descr);
    sl->entry = eo;
    sl->descr = descr;
    Py_XDECREF(old_e);
    Py_XDECREF(old_d);
    Py_RETURN_TRUE;
refuse:
    Py_DECREF(eo);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_FALSE;
fail:
    Py_DECREF(eo);
    return NULL;
}

/* setup(Block, cache_limit, min_bytes): the CPU backend's output blocks. */
static PyObject* isetup(PyObject* self, PyObject* a) {
    PyObject *bt, *cl;
    long long mn;
    if (!PyArg_ParseTuple(a, "OOL", &bt, &cl, &mn)) return NULL;
    Py_INCREF(bt);
    Py_INCREF(cl);
    Py_XSETREF(block_type, bt);
    Py_XSETREF(cache_limit, cl);
    block_min = mn;
    Py_RETURN_NONE;
}

/* clear(enabled): drop every entry, turn the cache on or off; the generation moves on. */
static PyObject* iclear(PyObject* self, PyObject* flag) {
    const int on = PyObject_IsTrue(flag);
    if (on < 0) return NULL;
    generation++;
    enabled = on;
    drop_all();
    Py_RETURN_NONE;
}

static PyObject* igeneration(PyObject* self, PyObject* unused) { return PyLong_FromUnsignedLongLong(generation); }

static PyObject* iinfo(PyObject* self, PyObject* unused) {
    int entries = 0;
    for (int i = 0; table && i < SLOTS; i++) entries += table[i].entry != NULL;
    return Py_BuildValue("{s:O,s:i,s:L,s:L}", "enabled", enabled && numpy_ready ? Py_True : Py_False, "entries",
                         entries, "hits", hits, "misses", misses);
}
#endif

static PyMethodDef methods[] = {
    {"run_pass", run_pass, METH_VARARGS, "run one Gather or Scatter pass (see index.c)"},
#ifdef ODML_NUMPY
    {"call", (PyCFunction)(void (*)(void))icall, METH_FASTCALL, "a repeated call from the call cache, or None"},
    {"put", iput, METH_VARARGS, "record a call in the call cache"},
    {"setup", isetup, METH_VARARGS, "the output blocks: setup(Block, cache_limit, min_bytes)"},
    {"clear", iclear, METH_O, "drop every entry; clear(enabled)"},
    {"generation", igeneration, METH_NOARGS, "the settings' generation (see put)"},
    {"info", iinfo, METH_NOARGS, "{'enabled', 'entries', 'hits', 'misses'}"},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_index", "opendml's index-driven CPU passes", -1,
                                    methods};

PyMODINIT_FUNC PyInit__index(void) {
#ifdef ODML_NUMPY
    if (_import_array() < 0) PyErr_Clear();
    else numpy_ready = 1;
#endif
    return PyModule_Create(&module);
}
