/* Shared by the C sources of opendml's CPU kernels (no Python here): limits, status codes, the kernels' entry points
 * and small integer helpers. The files:
 *
 *   runs.h      the inner loops every kernel uses (element runs, zero runs, row fills, streaming stores)
 *   fp16.h      exact float16 <-> float32 conversion (bit manipulation)
 *   fold_impl.h FOLD's loops, instantiated by fold.c per accumulator type
 *   threads.c   splitting a kernel's work units over threads
 *   copy.c      the strided copy (SLICE, SLICE1)
 *   unfold.c    odml_windows: UNFOLD's gather of sliding windows into columns
 *   fold.c      odml_window_sums: FOLD's windowed sum (a gather; no atomics)
 *   scatter.c   SLICE_GRAD's scatter into zeros
 *   move.h/.c   one pass of the data-movement family's move program (mapped copies, conversions, scale/bias, fills)
 *   convert.h   CAST's conversions between the 11 types, per pair
 *   blocks.c    output memory blocks with a bounded reuse cache (a Python type; blocks.h for native/module.c)
 *   indexed/    index.c: the Gather and Scatter passes (index-driven copies)
 * The glue (the Python module, the call cache, the C new-shape lowerings, CUDA launches from C) is in ../native/.
 *
 * Kernels take runtime/params.h's parameter structs (offsets and strides in elements), convert them to bytes once per
 * call, check what their own arithmetic needs to be defined (rank, element size, ranges that keep every position in
 * 64 bits) and return ODML_OK, ODML_EPARAM with a message, or ODML_ENOMEM; Python checked before the call that the
 * plan stays inside the bound buffers. */
#ifndef OPENDML_CPU_COMMON_H
#define OPENDML_CPU_COMMON_H

#include <stdint.h>
#include <string.h>

#include "params.h"

#define ODML_MAX_THREADS 64

enum { ODML_OK = 0, ODML_EPARAM = 1, ODML_ENOMEM = 2 };

/* Entry points: `error` gets a static message on ODML_EPARAM; they touch no Python object (run without the GIL). */
#define ODML_KERNEL_DECL_(CODE, NAME, STRUCT) \
    int odml_##NAME(char *dst, const char *src, const STRUCT *p, int threads, const char **error);
ODML_CPU_KERNELS(ODML_KERNEL_DECL_)
#undef ODML_KERNEL_DECL_

/* Each kernel's parameter block bytes, by kernel code (params.h). */
#define ODML_KERNEL_SIZE_(CODE, NAME, STRUCT) sizeof(STRUCT),
static const size_t odml_kernel_size[ODML_KERNEL_COUNT] = {ODML_CPU_KERNELS(ODML_KERNEL_SIZE_)};
#undef ODML_KERNEL_SIZE_

/* One parameter block of any kernel (the call cache's entries hold one). */
typedef union {
#define ODML_KERNEL_MEMBER_(CODE, NAME, STRUCT) STRUCT NAME;
    ODML_CPU_KERNELS(ODML_KERNEL_MEMBER_)
#undef ODML_KERNEL_MEMBER_
} odml_kernel_params;

/* Run kernel `code` (an ODML_KERNEL_* value) with the block p holds. */
static inline int odml_run_kernel(int code, char *dst, const char *src, const odml_kernel_params *p, int threads,
                                  const char **error) {
    switch (code) {
#define ODML_KERNEL_CASE_(CODE, NAME, STRUCT) \
    case ODML_KERNEL_##CODE: return odml_##NAME(dst, src, &p->NAME, threads, error);
        ODML_CPU_KERNELS(ODML_KERNEL_CASE_)
#undef ODML_KERNEL_CASE_
    }
    *error = "unknown kernel code";
    return ODML_EPARAM;
}

/* cuda_launch.c: cuLaunchKernel(function, grid, block, shared, stream, {src,
 * dst, params}); the CUresult, or -1 where the driver library is absent. */
int odml_cuda_launch(uint64_t function, unsigned grid, unsigned block, unsigned shared, uint64_t stream, uint64_t src,
                     uint64_t dst, uint64_t params);

/* Outputs this large get streaming stores where a kernel writes whole contiguous runs (copy.c); _native.stream_min. */
extern int64_t odml_stream_min_bytes;

/* threads.c: run fn over units [0, units) split in `threads` contiguous parts (part p gets [units*p/threads,
 * units*(p+1)/threads)); the calling thread takes part 0. */
typedef void (*odml_work_fn)(const void *job, int64_t u0, int64_t u1, int part);
void odml_parallel(odml_work_fn fn, const void *job, int64_t units, int threads);

/* The largest magnitude any position or extent may reach: the sum or difference of two still fits in int64. */
#define ODML_LIMIT ((int64_t)1 << 62)

static inline int odml_valid_size(int64_t es) { return es == 1 || es == 2 || es == 4 || es == 8; }

/* v in [lo, hi]: the kernels' range checks. */
#define IN_RANGE(v, lo, hi) ((v) >= (lo) && (v) <= (hi))

/* A kernel's first check: rank in [1, max_rank] and element size 1, 2, 4 or 8; else 1, with `message` in *error. */
static inline int odml_bad_dims(int64_t rank, int64_t max_rank, int64_t es, const char *message, const char **error) {
    if (rank >= 1 && rank <= max_rank && odml_valid_size(es)) return 0;
    *error = message;
    return 1;
}

/* a * b <= lim for 0 <= a, b (no overflow in the test). */
static inline int odml_mul_le(int64_t a, int64_t b, int64_t lim) { return a == 0 || b <= lim / a; }

/* Floor and ceiling of a / b for b > 0 (C division truncates); b == 1, the common stride and dilation, skips it. */
static inline int64_t odml_floor_div(int64_t a, int64_t b) {
    return b == 1 ? a : a >= 0 ? a / b : -((-a + b - 1) / b);
}
static inline int64_t odml_ceil_div(int64_t a, int64_t b) {
    return b == 1 ? a : a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

/* Whether an index space of n <= 16 dimensions (sizes, byte strides >= 0) maps distinct indices to disjoint elements
 * of `es` bytes. Sufficient test: with the dimensions of size > 1 ordered by stride, each stride passes the extent of
 * all smaller ones. Outputs that fail it (stride 0, say) are written on one thread and never by overlapping block
 * moves, so an address where outputs collide holds one of the colliding values. */
static inline int odml_disjoint(int n, const int64_t *sizes, const int64_t *strides, int64_t es) {
    int64_t s[16], t[16];
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] <= 0) return 1;          /* nothing is written */
        if (sizes[i] == 1) continue;
        if (strides[i] <= 0) return 0;
        int j = m++;
        for (; j > 0 && t[j - 1] > strides[i]; j--) { s[j] = s[j - 1]; t[j] = t[j - 1]; }
        s[j] = sizes[i]; t[j] = strides[i];
    }
    int64_t extent = es;                      /* bytes spanned by the smaller dimensions */
    for (int i = 0; i < m; i++) {
        if (t[i] < extent) return 0;
        if (!odml_mul_le(s[i] - 1, t[i], ODML_LIMIT - extent)) return 0;
        extent += (s[i] - 1) * t[i];
    }
    return 1;
}

#endif /* OPENDML_CPU_COMMON_H */
