/* The inner loops of opendml's CPU kernels: move or zero one run of elements between byte addresses with byte
 * strides. Elements move as unsigned words of their size through memcpy, so any bit pattern survives and unaligned
 * addresses are fine. Static, so every kernel's source inlines them (the copy's speed depends on it): element runs
 * (with SWAR and SSE2 forms for reversal and stride 2), zero runs, row fills, streaming-store copies. */
#ifndef OPENDML_CPU_RUNS_H
#define OPENDML_CPU_RUNS_H

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define HAVE_STREAM 1
#else
#define HAVE_STREAM 0
#endif

#define DEFINE_RUN(T)                                                                       \
    static void run_##T(char *d, const char *s, int64_t n, int64_t ds, int64_t ss) {       \
        const int64_t e = (int64_t)sizeof(T);                                               \
        if (ds == e) {                                                                      \
            if (ss == -e) {                                                                 \
                for (int64_t i = 0; i < n; i++) {                                           \
                    T v; memcpy(&v, s - i * e, sizeof v); memcpy(d + i * e, &v, sizeof v);  \
                }                                                                           \
                return;                                                                     \
            }                                                                               \
            if (ss == 2 * e) {                                                              \
                for (int64_t i = 0; i < n; i++) {                                           \
                    T v; memcpy(&v, s + 2 * i * e, sizeof v); memcpy(d + i * e, &v, sizeof v); \
                }                                                                           \
                return;                                                                     \
            }                                                                               \
            for (int64_t i = 0; i < n; i++) {                                               \
                T v; memcpy(&v, s + i * ss, sizeof v); memcpy(d + i * e, &v, sizeof v);     \
            }                                                                               \
            return;                                                                         \
        }                                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                   \
            T v; memcpy(&v, s + i * ss, sizeof v); memcpy(d + i * ds, &v, sizeof v);        \
        }                                                                                   \
    }

DEFINE_RUN(uint8_t)
DEFINE_RUN(uint16_t)
DEFINE_RUN(uint32_t)
DEFINE_RUN(uint64_t)

/* Byte-level (SWAR) forms of the cases NumPy moves one element at a time: reversal and stride 2 for small elements,
 * 8 bytes per load. Each reads only elements of the run (the stride-2 forms leave at least the last element to the
 * scalar tail, so the final load's unused half never passes the run). */
static inline uint64_t load64(const char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline void store32(char *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void store64(char *p, uint64_t v) { memcpy(p, &v, 8); }

/* memcpy with streaming stores for the 16-byte-aligned middle. */
static void stream_copy(char *d, const char *s, size_t n) {
#if HAVE_STREAM
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (head > n) head = n;
    if (head) memcpy(d, s, head);
    d += head; s += head; n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32)), e = _mm_loadu_si128((const __m128i *)(s + 48));
        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)(d + 16), b);
        _mm_stream_si128((__m128i *)(d + 32), c);
        _mm_stream_si128((__m128i *)(d + 48), e);
    }
    for (; n >= 16; n -= 16, d += 16, s += 16) _mm_stream_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
#endif
    if (n) memcpy(d, s, n);
}

static inline void stream_fence(int nt) {
#if HAVE_STREAM
    if (nt) _mm_sfence();
#endif
    (void)nt;
}
static inline uint64_t rot32(uint64_t x) { return (x >> 32) | (x << 32); }

static int64_t reverse_swar(char *d, const char *s, int64_t n, int es) {
    int64_t per = 8 / es, i = 0;
    for (; i + per <= n; i += per) {
        uint64_t x = load64(s - (i + per - 1) * es);
        if (es == 1) x = __builtin_bswap64(x);
        else if (es == 2) { x = rot32(x); x = ((x & 0x0000FFFF0000FFFFull) << 16) | ((x >> 16) & 0x0000FFFF0000FFFFull); }
        else x = rot32(x);
        store64(d + i * es, x);
    }
    return i;
}

static int64_t stride2_swar(char *d, const char *s, int64_t n, int es) {
    int64_t per = 4 / es, i = 0;          /* outputs per 8-byte load */
    for (; i + per < n; i += per) {
        uint64_t x = load64(s + 2 * i * es);
        if (es == 1) {
            x &= 0x00FF00FF00FF00FFull;
            x = (x | (x >> 8)) & 0x0000FFFF0000FFFFull;
        } else {
            x &= 0x0000FFFF0000FFFFull;
        }
        x = (x | (x >> 16)) & 0xFFFFFFFFull;
        store32(d + i * es, (uint32_t)x);
    }
    return i;
}

#if HAVE_STREAM
/* Stride 2 with SSE2, 16 output bytes per step from two 16-byte loads: the even elements are kept by sign-extending
 * shifts and a saturating pack (exact, as the values already fit) or, for 4-byte elements, a shuffle. Like
 * stride2_swar it leaves at least the last element to the caller, so the second load's final (odd) element is never
 * past the run. */
static int64_t stride2_sse2(char *d, const char *s, int64_t n, int es) {
    const int64_t per = 16 / es;
    int64_t i = 0;
    for (; i + per < n; i += per) {
        const char *p = s + 2 * i * es;
        __m128i a = _mm_loadu_si128((const __m128i *)p), b = _mm_loadu_si128((const __m128i *)(p + 16)), r;
        if (es == 1)
            r = _mm_packs_epi16(_mm_srai_epi16(_mm_slli_epi16(a, 8), 8), _mm_srai_epi16(_mm_slli_epi16(b, 8), 8));
        else if (es == 2)
            r = _mm_packs_epi32(_mm_srai_epi32(_mm_slli_epi32(a, 16), 16), _mm_srai_epi32(_mm_slli_epi32(b, 16), 16));
        else
            r = _mm_castps_si128(_mm_shuffle_ps(_mm_castsi128_ps(a), _mm_castsi128_ps(b), _MM_SHUFFLE(2, 0, 2, 0)));
        _mm_storeu_si128((__m128i *)(d + i * es), r);
    }
    return i;
}
#endif

#if defined(__GNUC__)
#define ODML_NOINLINE __attribute__((noinline))
#elif defined(_MSC_VER)
#define ODML_NOINLINE __declspec(noinline)
#else
#define ODML_NOINLINE
#endif

/* Copy n elements of size es: destination stride ds, source stride ss (bytes); nt: streaming stores where the run
 * allows. Out of line: inlined into the copy's unit loop it measured slower for reversed 4-byte elements. */
static ODML_NOINLINE void copy_run(char *d, const char *s, int64_t n, int64_t ds, int64_t ss, int es, int nt) {
    if (n <= 0) return;
    if (ds == es && ss == es) {
        if (nt) stream_copy(d, s, (size_t)(n * es));
        else memcpy(d, s, (size_t)(n * es));
        return;
    }
    if (ds == es && es < 8) {
        int64_t done = 0;
        if (ss == -es) done = reverse_swar(d, s, n, es);  /* ordinary stores: streaming 8-byte stores measured no faster */
#if HAVE_STREAM
        else if (ss == 2 * es) done = stride2_sse2(d, s, n, es);
#endif
        else if (ss == 2 * es && es < 4) done = stride2_swar(d, s, n, es);
        d += done * es; s += done * ss; n -= done;
        if (n <= 0) return;
    }
    switch (es) {
    case 1: run_uint8_t(d, s, n, ds, ss); break;
    case 2: run_uint16_t(d, s, n, ds, ss); break;
    case 4: run_uint32_t(d, s, n, ds, ss); break;
    default: run_uint64_t(d, s, n, ds, ss); break;
    }
}

static void zero_run(char *d, int64_t n, int64_t ds, int es) {
    if (n <= 0) return;
    if (ds == es) { memset(d, 0, (size_t)(n * es)); return; }
    for (int64_t i = 0; i < n; i++) memset(d + i * ds, 0, (size_t)es);
}

/* Write a contiguous row of n bytes at d: zeros, except bytes [a, a + m) from s (contiguous), each byte once.
 * Streaming stores measured no faster for large outputs with a reused output block, and several times slower where
 * rows share 64-byte lines. */
static inline void fill_row(char *d, int64_t n, int64_t a, const char *s, int64_t m) {
    int64_t c0 = a > 0 ? a : 0, c1 = a + m < n ? a + m : n;
    if (c1 <= c0) { memset(d, 0, (size_t)n); return; }
    memset(d, 0, (size_t)c0);
    memcpy(d + c0, s + (c0 - a), (size_t)(c1 - c0));
    memset(d + c1, 0, (size_t)(n - c1));
}

#endif /* OPENDML_CPU_RUNS_H */
