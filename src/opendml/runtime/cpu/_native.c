/* opendml's CPU kernels: the strided copy (SLICE, SLICE1) and the UNFOLD
 * gather, over raw byte addresses, multi-threaded, with the GIL released.
 *
 * Python validates and lowers every operator; these functions only execute a
 * plan that is already known to stay inside the bound ranges. Each takes the
 * destination and source addresses and a packed int64 parameter block built
 * once per binding (see numpy_backend.py), so a dispatch parses three
 * arguments. Elements are moved as unsigned words of their size through
 * memcpy, so any bit pattern survives and unaligned arrays are fine.
 *
 * Only Python.h is needed (no NumPy headers): the extension is optional and
 * the NumPy backend runs the same plans with np.copyto where it is absent.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define HAVE_STREAM 1
#else
#define HAVE_STREAM 0
#endif

#define MAXD 8
#define MAXT 64
/* Copies whose output is at least this large write their contiguous runs
 * with non-temporal (streaming) stores: the output would not stay in cache
 * anyway, and a streaming store skips reading each destination line before
 * writing it, which otherwise adds half again to a copy's memory traffic.
 * UNFOLD keeps ordinary stores: its rows mix short runs with zero strips
 * (streaming stores into partly written lines defeat both), and assembling
 * rows in a scratch buffer to stream them measured slower. */
static int64_t stream_min_bytes = (int64_t)8 << 20;

/* ---- inner loops ------------------------------------------------------- */

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

/* Byte-level (SWAR) forms of the cases NumPy moves one element at a time:
 * reversal and stride 2 for small elements, 8 bytes per load. Each reads only
 * elements of the run (the stride-2 forms leave at least the last element to
 * the scalar tail, so the final load's unused half never passes the run). */
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
/* Stride 2 with SSE2, 16 output bytes per step from two 16-byte loads: the
 * even elements are kept by sign-extending shifts and a saturating pack
 * (exact, as the values already fit) or, for 4-byte elements, a shuffle.
 * Like stride2_swar it leaves at least the last element to the caller, so the
 * second load's final (odd) element is never past the run. */
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

/* Copy n elements of size es: destination stride ds, source stride ss (bytes);
 * nt: streaming stores where the run allows. */
static void copy_run(char *d, const char *s, int64_t n, int64_t ds, int64_t ss, int es, int nt) {
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

/* ---- threads ------------------------------------------------------------- */

typedef void (*work_fn)(const void *job, int64_t u0, int64_t u1);

typedef struct { work_fn fn; const void *job; int64_t u0, u1; } slice_t;

#ifndef _WIN32
static void *thread_main(void *arg) {
    slice_t *w = (slice_t *)arg;
    w->fn(w->job, w->u0, w->u1);
    return NULL;
}
#endif

/* Run fn over units [0, units) split in `threads` contiguous parts; the
 * calling thread takes the first. Falls back to fewer threads if one cannot
 * be started (the work is then done by the caller). */
static void parallel(work_fn fn, const void *job, int64_t units, int threads) {
    if (threads > units) threads = (int)units;
    if (threads > MAXT) threads = MAXT;
#ifdef _WIN32
    threads = 1;
#endif
    if (threads <= 1) { fn(job, 0, units); return; }
#ifndef _WIN32
    slice_t parts[MAXT];
    pthread_t tids[MAXT];
    int started[MAXT];
    for (int t = 0; t < threads; t++) {
        parts[t].fn = fn; parts[t].job = job;
        parts[t].u0 = units * t / threads;
        parts[t].u1 = units * (t + 1) / threads;
        started[t] = 0;
    }
    for (int t = 1; t < threads; t++)
        started[t] = pthread_create(&tids[t], NULL, thread_main, &parts[t]) == 0;
    fn(job, parts[0].u0, parts[0].u1);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(tids[t], NULL);
        else fn(job, parts[t].u0, parts[t].u1);
    }
#endif
}

/* ---- strided copy -------------------------------------------------------- */
/* params: es, nd, sizes[nd], dst_strides[nd], src_strides[nd] (bytes; the
 * innermost dimension last). A unit is one run of the innermost dimension. */

typedef struct {
    char *dst; const char *src; int es, nd, nt;
    int64_t sizes[MAXD], ds[MAXD], ss[MAXD];
} copy_job;

static void copy_units(const void *vjob, int64_t u0, int64_t u1) {
    const copy_job *j = (const copy_job *)vjob;
    int nd = j->nd, last = nd - 1;
    int64_t idx[MAXD];
    int64_t rem = u0, doff = 0, soff = 0;
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

static int read_params(Py_buffer *pb, int64_t **out, Py_ssize_t need) {
    if (pb->len < need * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "opendml.runtime.cpu._native: parameter block too short");
        return -1;
    }
    *out = (int64_t *)pb->buf;
    return 0;
}

static PyObject *py_copy(PyObject *self, PyObject *args) {
    unsigned long long dst, src;
    Py_buffer pb;
    int threads;
    if (!PyArg_ParseTuple(args, "KKy*i", &dst, &src, &pb, &threads)) return NULL;
    int64_t *p;
    copy_job j;
    if (read_params(&pb, &p, 2) < 0) goto fail;
    j.es = (int)p[0]; j.nd = (int)p[1];
    if (j.nd < 1 || j.nd > MAXD || !(j.es == 1 || j.es == 2 || j.es == 4 || j.es == 8)) {
        PyErr_SetString(PyExc_ValueError, "opendml.runtime.cpu._native.copy: bad element size or rank");
        goto fail;
    }
    if (read_params(&pb, &p, 2 + 3 * j.nd) < 0) goto fail;
    int64_t units = 1;
    for (int a = 0; a < j.nd; a++) {
        j.sizes[a] = p[2 + a]; j.ds[a] = p[2 + j.nd + a]; j.ss[a] = p[2 + 2 * j.nd + a];
        if (j.sizes[a] <= 0) { PyBuffer_Release(&pb); Py_RETURN_NONE; }
        if (a < j.nd - 1) units *= j.sizes[a];
    }
    j.nt = units * j.sizes[j.nd - 1] * j.es >= stream_min_bytes;
    j.dst = (char *)(uintptr_t)dst; j.src = (const char *)(uintptr_t)src;
    PyBuffer_Release(&pb);
    Py_BEGIN_ALLOW_THREADS
    parallel(copy_units, &j, units, threads);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&pb);
    return NULL;
}

/* ---- UNFOLD ----------------------------------------------------------------
 * out[n, c*K + k, b] = in[n, c, b*stride + k*dilation - pad] or 0 outside.
 * params: es, D, batch, channels, mode, tile, out_n, out_row, out_col,
 *         in_n, in_c, then per spatial dim d: size, in_stride, window,
 *         stride, dilation, pad, blocks. Strides in bytes.
 * mode 0: a unit is one output row (n, c, k), written column by column.
 * mode 1: a unit is (n, c, a tile of `tile` columns), written for every k in
 *         turn, so the input lines a tile reads stay in cache across the K
 *         rows (a large input stride along the innermost block dimension). */

typedef struct {
    char *dst; const char *src; int es, D, mode;
    int64_t batch, channels, K, cols, tile, ntiles;
    int64_t on, orow, ocol, in_n, in_c;
    int64_t size[MAXD], is[MAXD], win[MAXD], st[MAXD], dil[MAXD], pad[MAXD], blocks[MAXD];
    int64_t *lo[MAXD], *hi[MAXD];   /* valid block range per dim and window index */
} unfold_job;

/* Columns [j0, j1) of the row of window index k (flat) of image (n, c). */
static void unfold_segment(const unfold_job *j, int64_t n, int64_t c, int64_t k, int64_t j0, int64_t j1) {
    int D = j->D, last = D - 1;
    int64_t kd[MAXD], b[MAXD];
    int64_t rem = k;
    for (int d = last; d >= 0; d--) { kd[d] = rem % j->win[d]; rem /= j->win[d]; }
    char *row = j->dst + n * j->on + (c * j->K + k) * j->orow;
    /* input offset of block 0's element k (may lie before the input; only
     * valid positions are ever dereferenced) */
    int64_t base = n * j->in_n + c * j->in_c;
    for (int d = 0; d < D; d++) base += (kd[d] * j->dil[d] - j->pad[d]) * j->is[d];
    rem = j0;
    for (int d = last; d >= 0; d--) { b[d] = rem % j->blocks[d]; rem /= j->blocks[d]; }
    const int64_t lo = j->lo[last][kd[last]], hi = j->hi[last][kd[last]];
    const int64_t istep = j->st[last] * j->is[last];
    int64_t col = j0;
    while (col < j1) {
        int64_t len = j->blocks[last] - b[last];
        if (len > j1 - col) len = j1 - col;
        char *out = row + col * j->ocol;
        int ok = 1;
        int64_t off = base;
        for (int d = 0; d < last; d++) {
            if (b[d] < j->lo[d][kd[d]] || b[d] >= j->hi[d][kd[d]]) { ok = 0; break; }
            off += b[d] * j->st[d] * j->is[d];
        }
        if (!ok) {
            zero_run(out, len, j->ocol, j->es);
        } else {
            int64_t a = b[last], e = b[last] + len;
            int64_t c0 = a > lo ? a : lo, c1 = e < hi ? e : hi;
            if (c1 <= c0) {
                zero_run(out, len, j->ocol, j->es);
            } else {
                zero_run(out, c0 - a, j->ocol, j->es);
                copy_run(out + (c0 - a) * j->ocol, j->src + off + c0 * istep, c1 - c0, j->ocol, istep, j->es, 0);
                zero_run(out + (c1 - a) * j->ocol, e - c1, j->ocol, j->es);
            }
        }
        col += len;
        b[last] += len;
        for (int d = last; d > 0 && b[d] >= j->blocks[d]; d--) { b[d] = 0; b[d - 1]++; }
    }
}

static void unfold_units(const void *vjob, int64_t u0, int64_t u1) {
    const unfold_job *j = (const unfold_job *)vjob;
    for (int64_t u = u0; u < u1; u++) {
        if (j->mode == 0) {
            int64_t k = u % j->K, nc = u / j->K;
            unfold_segment(j, nc / j->channels, nc % j->channels, k, 0, j->cols);
        } else {
            int64_t t = u % j->ntiles, nc = u / j->ntiles;
            int64_t n = nc / j->channels, c = nc % j->channels;
            int64_t c0 = t * j->tile, c1 = c0 + j->tile < j->cols ? c0 + j->tile : j->cols;
            /* 1-D with dilation dividing stride (framing): window index k and
             * k - q, q = stride/dilation, read the same input one block apart,
             * so row k is row k - q (already written in this tile) moved left
             * by one column; only the tile's last column is gathered. */
            int64_t q = (j->D == 1 && j->st[0] % j->dil[0] == 0) ? j->st[0] / j->dil[0] : 0;
            int shift_ok = q > 0 && j->ocol == j->es && c1 - c0 > 1;
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

static PyObject *py_unfold(PyObject *self, PyObject *args) {
    unsigned long long dst, src;
    Py_buffer pb;
    int threads;
    if (!PyArg_ParseTuple(args, "KKy*i", &dst, &src, &pb, &threads)) return NULL;
    int64_t *p;
    unfold_job j;
    memset(&j, 0, sizeof j);
    int64_t *ranges = NULL;
    if (read_params(&pb, &p, 11) < 0) goto fail;
    j.es = (int)p[0]; j.D = (int)p[1];
    if (j.D < 1 || j.D > MAXD - 2 || !(j.es == 1 || j.es == 2 || j.es == 4 || j.es == 8)) {
        PyErr_SetString(PyExc_ValueError, "opendml.runtime.cpu._native.unfold: bad element size or rank");
        goto fail;
    }
    if (read_params(&pb, &p, 11 + 7 * j.D) < 0) goto fail;
    j.batch = p[2]; j.channels = p[3]; j.mode = (int)p[4]; j.tile = p[5];
    j.on = p[6]; j.orow = p[7]; j.ocol = p[8]; j.in_n = p[9]; j.in_c = p[10];
    j.K = 1; j.cols = 1;
    int64_t wsum = 0;
    for (int d = 0; d < j.D; d++) {
        const int64_t *q = p + 11 + 7 * d;
        j.size[d] = q[0]; j.is[d] = q[1]; j.win[d] = q[2]; j.st[d] = q[3];
        j.dil[d] = q[4]; j.pad[d] = q[5]; j.blocks[d] = q[6];
        if (j.win[d] <= 0 || j.st[d] <= 0 || j.blocks[d] <= 0) { PyBuffer_Release(&pb); Py_RETURN_NONE; }
        j.K *= j.win[d]; j.cols *= j.blocks[d]; wsum += j.win[d];
    }
    if (j.batch <= 0 || j.channels <= 0) { PyBuffer_Release(&pb); Py_RETURN_NONE; }
    ranges = (int64_t *)malloc((size_t)(2 * wsum) * sizeof(int64_t));
    if (!ranges) { PyErr_NoMemory(); goto fail; }
    int64_t *r = ranges;
    for (int d = 0; d < j.D; d++) {
        j.lo[d] = r; j.hi[d] = r + j.win[d]; r += 2 * j.win[d];
        for (int64_t k = 0; k < j.win[d]; k++) {
            /* blocks b with 0 <= b*st + shift < size */
            int64_t shift = k * j.dil[d] - j.pad[d], st = j.st[d];
            int64_t lo = shift < 0 ? (-shift + st - 1) / st : 0;
            int64_t lastpos = j.size[d] - 1 - shift;
            int64_t hi = lastpos >= 0 ? lastpos / st + 1 : 0;
            if (hi > j.blocks[d]) hi = j.blocks[d];
            if (lo > j.blocks[d]) lo = j.blocks[d];
            if (hi < lo) hi = lo;
            j.lo[d][k] = lo; j.hi[d][k] = hi;
        }
    }
    j.dst = (char *)(uintptr_t)dst; j.src = (const char *)(uintptr_t)src;
    PyBuffer_Release(&pb);
    int64_t units;
    if (j.mode == 1) {
        if (j.tile <= 0) j.tile = 256;
        j.ntiles = (j.cols + j.tile - 1) / j.tile;
        units = j.batch * j.channels * j.ntiles;
    } else {
        units = j.batch * j.channels * j.K;
    }
    Py_BEGIN_ALLOW_THREADS
    parallel(unfold_units, &j, units, threads);
    Py_END_ALLOW_THREADS
    free(ranges);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&pb);
    free(ranges);
    return NULL;
}

/* ---- output blocks with a bounded cache ------------------------------------
 * Block(nbytes) is writable memory for one array output. When the last array
 * viewing it goes away, its pages go to a small cache (at most `limit` bytes,
 * oldest evicted first) instead of back to the system, and the next output of
 * a similar size (at least the request, at most 1/16 more) reuses them. A
 * large fresh mapping costs a page fault and a kernel zero-fill per page on
 * first touch, which on small machines takes about as long as the kernel that
 * writes the output; a reused block is already resident. Memory in the cache
 * is not in use by any array; cache_info() reports it and cache_limit(0)
 * returns it to the system. Blocks are traced by tracemalloc while they back
 * an array (not while cached). Everything here runs with the GIL held.
 */

#define CACHE_SLOTS 16
#define TRACE_DOMAIN 0x6F646D6Cu /* "odml" */

typedef struct {
    PyObject_HEAD
    char *ptr;
    Py_ssize_t size, cap;
    int fresh;
} Block;

static struct { char *ptr; Py_ssize_t cap; } cache_slot[CACHE_SLOTS];
static int cache_n;
static Py_ssize_t cache_bytes;
static Py_ssize_t cache_max = (Py_ssize_t)1 << 30;
static long long cache_hits, cache_misses;

static Py_ssize_t page_round(Py_ssize_t n) {
    const Py_ssize_t pg = 4096;
    return (n + pg - 1) / pg * pg;
}

static char *pages_get(Py_ssize_t cap) {
#ifndef _WIN32
    void *p = mmap(NULL, (size_t)cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    if (cap >= ((Py_ssize_t)4 << 20)) madvise(p, (size_t)cap, MADV_HUGEPAGE);
#endif
    return (char *)p;
#else
    return (char *)malloc((size_t)cap);
#endif
}

static void pages_put(char *p, Py_ssize_t cap) {
#ifndef _WIN32
    munmap(p, (size_t)cap);
#else
    free(p);
#endif
}

static void cache_drop(int i) {
    pages_put(cache_slot[i].ptr, cache_slot[i].cap);
    cache_bytes -= cache_slot[i].cap;
    memmove(&cache_slot[i], &cache_slot[i + 1], (size_t)(cache_n - i - 1) * sizeof cache_slot[0]);
    cache_n--;
}

static void cache_trim(Py_ssize_t room) { /* evict oldest until `room` more bytes fit */
    while (cache_n && (cache_bytes + room > cache_max || cache_n == CACHE_SLOTS)) cache_drop(0);
}

static PyObject *Block_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    Py_ssize_t n;
    static char *kwlist[] = {"nbytes", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "n", kwlist, &n)) return NULL;
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "opendml.runtime.cpu._native.Block: nbytes must be >= 0, got %zd", n);
        return NULL;
    }
    if (n > PY_SSIZE_T_MAX - 4096) return PyErr_NoMemory();
    Py_ssize_t want = page_round(n > 0 ? n : 1);
    Block *b = (Block *)type->tp_alloc(type, 0);
    if (!b) return NULL;
    int best = -1;
    for (int i = 0; i < cache_n; i++)
        if (cache_slot[i].cap >= want && cache_slot[i].cap - want <= want / 16 &&
            (best < 0 || cache_slot[i].cap < cache_slot[best].cap))
            best = i;
    if (best >= 0) {
        b->ptr = cache_slot[best].ptr;
        b->cap = cache_slot[best].cap;
        cache_bytes -= b->cap;
        memmove(&cache_slot[best], &cache_slot[best + 1], (size_t)(cache_n - best - 1) * sizeof cache_slot[0]);
        cache_n--;
        b->fresh = 0;
        cache_hits++;
    } else {
        b->ptr = pages_get(want);
        if (!b->ptr) {            /* free what the cache holds and try once more */
            while (cache_n) cache_drop(0);
            b->ptr = pages_get(want);
        }
        if (!b->ptr) {
            Py_DECREF(b);
            return PyErr_NoMemory();
        }
        b->cap = want;
        b->fresh = 1;
        cache_misses++;
    }
    b->size = n;
    PyTraceMalloc_Track(TRACE_DOMAIN, (uintptr_t)b->ptr, (size_t)b->cap);
    return (PyObject *)b;
}

static void Block_dealloc(Block *b) {
    if (b->ptr) {
        PyTraceMalloc_Untrack(TRACE_DOMAIN, (uintptr_t)b->ptr);
        if (b->cap <= cache_max) {
            cache_trim(b->cap);
            cache_slot[cache_n].ptr = b->ptr;
            cache_slot[cache_n].cap = b->cap;
            cache_n++;
            cache_bytes += b->cap;
        } else {
            pages_put(b->ptr, b->cap);
        }
        b->ptr = NULL;
    }
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static int Block_getbuffer(Block *b, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)b, b->ptr, b->size, 0, flags);
}

static PyObject *Block_fresh(Block *b, void *closure) {
    (void)closure;
    return PyBool_FromLong(b->fresh);
}

static PyBufferProcs Block_as_buffer = {(getbufferproc)Block_getbuffer, NULL};
static PyGetSetDef Block_getset[] = {
    {"fresh", (getter)Block_fresh, NULL, "True if the pages are new (not yet touched), False if reused", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BlockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "opendml.runtime.cpu._native.Block",
    .tp_basicsize = sizeof(Block),
    .tp_dealloc = (destructor)Block_dealloc,
    .tp_as_buffer = &Block_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Block(nbytes): writable output memory, recycled through a bounded cache when released",
    .tp_new = Block_new,
    .tp_getset = Block_getset,
};

static PyObject *py_cache_limit(PyObject *self, PyObject *args) {
    PyObject *arg = Py_None;
    (void)self;
    if (!PyArg_ParseTuple(args, "|O", &arg)) return NULL;
    Py_ssize_t old = cache_max;
    if (arg != Py_None) {
        Py_ssize_t v = PyNumber_AsSsize_t(arg, PyExc_OverflowError);
        if (v == -1 && PyErr_Occurred()) return NULL;
        if (v < 0) {
            PyErr_Format(PyExc_ValueError, "opendml: the CPU output cache limit must be >= 0 bytes, got %zd", v);
            return NULL;
        }
        cache_max = v;
        while (cache_n && cache_bytes > cache_max) cache_drop(0);
    }
    return PyLong_FromSsize_t(old);
}

static PyObject *py_cache_info(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    return Py_BuildValue("{s:n,s:i,s:n,s:L,s:L}", "limit", cache_max, "blocks", cache_n, "bytes", cache_bytes,
                         "hits", cache_hits, "misses", cache_misses);
}

static PyObject *py_stream_min(PyObject *self, PyObject *args) {
    long long v = -1;
    (void)self;
    if (!PyArg_ParseTuple(args, "|L", &v)) return NULL;
    long long old = (long long)stream_min_bytes;
    if (v >= 0) stream_min_bytes = (int64_t)v;
    return PyLong_FromLongLong(old);
}

static PyMethodDef methods[] = {
    {"copy", py_copy, METH_VARARGS,
     "copy(dst_addr, src_addr, params: bytes of int64, threads): strided copy"},
    {"unfold", py_unfold, METH_VARARGS,
     "unfold(dst_addr, src_addr, params: bytes of int64, threads): UNFOLD gather"},
    {"cache_limit", py_cache_limit, METH_VARARGS,
     "cache_limit([nbytes]) -> previous limit: bytes of released output blocks kept for reuse"},
    {"stream_min", py_stream_min, METH_VARARGS,
     "stream_min([nbytes]) -> previous value: outputs this large use streaming stores (tuning aid)"},
    {"cache_info", py_cache_info, METH_NOARGS,
     "cache_info() -> dict(limit, blocks, bytes, hits, misses) of the output block cache"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "opendml.runtime.cpu._native",
    "opendml's compiled CPU kernels (optional; see numpy_backend.py)", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&BlockType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&BlockType);
    if (PyModule_AddObject(m, "Block", (PyObject *)&BlockType) < 0) {
        Py_DECREF(&BlockType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
