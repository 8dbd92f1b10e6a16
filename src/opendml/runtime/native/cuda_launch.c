/* cuda_launch(function, grid, block, shared_mem, stream, src, dst, params): one cuLaunchKernel call for opendml's
 * CUDA kernels, whose three arguments are always (source pointer, destination pointer, parameter block BY VALUE:
 * runtime/cuda/launch.py says why); `params` is the HOST address of the params.h struct launch.py's Launch owns.
 * The CUDA backend builds and caches everything else and calls this on the hot path: a launch through ctypes costs
 * about 8 us of argument conversion, this one a fraction of a microsecond. The driver is opened on first use
 * (dlopen), so the extension needs no CUDA to build or import; without a driver the call raises ImportError and the
 * backend keeps its ctypes launch. Returns the CUresult (0: queued). In the CPU extension, opendml's one C extension.
 * odml_cuda_launch (common.h) is the same launch for the call cache (calls.c). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "cpu/common.h"

#ifndef _WIN32
#include <dlfcn.h>
#include <time.h>
#endif

/* The driver functions used here, each once: X(variable, symbol, parameters), all returning a CUresult (int).
 * cuLaunchKernel last: load_driver loads them in this order and a loaded cu_launch says all are. */
#define ODML_DRIVER(X)                                                                                         \
    X(cu_attribute, "cuFuncSetAttribute", (void *f, int attribute, int value))                                 \
    X(cu_host_alloc, "cuMemHostAlloc", (void **p, size_t bytes, unsigned flags))                               \
    X(cu_host_device, "cuMemHostGetDevicePointer_v2", (uint64_t *dptr, void *p, unsigned flags))               \
    X(cu_sync, "cuStreamSynchronize", (void *stream))                                                          \
    X(cu_capturing, "cuStreamIsCapturing", (void *stream, int *status))                                        \
    X(cu_memset32, "cuMemsetD32Async", (uint64_t dptr, unsigned value, size_t words, void *stream))            \
    X(cu_stream_ctx, "cuStreamGetCtx", (void *stream, void **ctx))                                             \
    X(cu_ctx_push, "cuCtxPushCurrent_v2", (void *ctx))                                                         \
    X(cu_ctx_pop, "cuCtxPopCurrent_v2", (void **ctx))                                                          \
    X(cu_mem_alloc, "cuMemAlloc_v2", (uint64_t *dptr, size_t bytes))                                           \
    X(cu_ctx_id, "cuCtxGetId", (void *ctx, unsigned long long *id))                                            \
    X(cu_capture_mode, "cuThreadExchangeStreamCaptureMode", (int *mode))                                       \
    X(cu_launch, "cuLaunchKernel", (void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,  \
                                    unsigned bz, unsigned shared, void *stream, void **params, void **extra))
#define ODML_DRIVER_DECLARE(v, symbol, params) static int (*v) params = NULL;
ODML_DRIVER(ODML_DRIVER_DECLARE)

/* 1 where the driver library is loaded (cu_launch and every other function it has); 0 without it (Windows: never
 * loaded, the backend launches through ctypes). */
static int load_driver(void) {
#ifdef _WIN32
    return 0;
#else
    if (cu_launch) return 1;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 0;
#define ODML_DRIVER_LOAD(v, symbol, params) v = (int (*) params)dlsym(lib, symbol);
    ODML_DRIVER(ODML_DRIVER_LOAD)
    return cu_launch != NULL;
#endif
}

/* cuLaunchKernel of `function` on grid x 1 x 1 blocks of block x 1 x 1 threads with kernel arguments argv:
 * the CUresult, or -1 without a driver. */
static int launch(uint64_t function, unsigned grid, unsigned block, unsigned shared, uint64_t stream, void **argv) {
    if (!load_driver()) return -1;
    return cu_launch((void *)(uintptr_t)function, grid, 1, 1, block, 1, 1, shared, (void *)(uintptr_t)stream, argv,
                     NULL);
}

int odml_cuda_launch(uint64_t function, unsigned grid, unsigned block, unsigned shared, uint64_t stream, uint64_t src,
                     uint64_t dst, uint64_t params) {
    void *s = (void *)(uintptr_t)src, *d = (void *)(uintptr_t)dst;
    void *argv[3] = {&s, &d, (void *)(uintptr_t)params};   /* the struct itself: by value */
    return launch(function, grid, block, shared, stream, argv);
}

/* The same launch for a kernel whose one argument is its parameter block (index.cu's, which holds its own
 * addresses): `params` the host address of the block, copied by value into the launch. */
int odml_cuda_launch_block(uint64_t function, unsigned grid, unsigned block, unsigned shared, uint64_t stream,
                           const void *params) {
    void *argv[1] = {(void *)params};
    return launch(function, grid, block, shared, stream, argv);
}

/* `words` 32-bit words at device address dptr zeroed on `stream` (cuMemsetD32Async: an owner table, queued
 * before the launches that read it, with no call into the framework): the CUresult, or -1 without a driver. */
int odml_cuda_zero_words(uint64_t dptr, size_t words, uint64_t stream) {
    if (!load_driver() || !cu_memset32) return -1;
    return cu_memset32(dptr, 0, words, (void *)(uintptr_t)stream);
}

int odml_cuda_shared_limit(uint64_t function, unsigned bytes) {
    if (!load_driver() || !cu_attribute) return -1;
    return cu_attribute((void *)(uintptr_t)function, 8, (int)bytes);   /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
}

PyObject *odml_py_cuda_launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "cuda_launch takes 8 arguments (function, grid, block, shared_mem, stream, "
                     "src, dst, params); got %zd", nargs);
        return NULL;
    }
    unsigned long long v[8];
    for (int i = 0; i < 8; ++i) {
        v[i] = PyLong_AsUnsignedLongLong(args[i]);
        if (v[i] == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    }
    if (v[1] == 0 || v[1] > 0x7fffffffULL || v[2] == 0 || v[2] > 1024 || v[3] > 0xffffffffULL) {
        PyErr_SetString(PyExc_ValueError, "cuda_launch: grid must be in [1, 2^31 - 1], block in [1, 1024], "
                        "shared_mem below 2^32");
        return NULL;
    }
    if (!load_driver()) {
        PyErr_SetString(PyExc_ImportError, "cuda_launch: the CUDA driver library (libcuda) could not be loaded");
        return NULL;
    }
    if (v[7] == 0) {
        PyErr_SetString(PyExc_ValueError, "cuda_launch: params must be the host address of the parameter structure");
        return NULL;
    }
    return PyLong_FromLong(
        odml_cuda_launch(v[0], (unsigned)v[1], (unsigned)v[2], (unsigned)v[3], v[4], v[5], v[6], v[7]));
}

/* -- The index check's flags (index.cu's ix_axis.flag) ----------------------------------------------------
 *
 * A checked index call served from C (calls_move.c's CUDA entries, calls_move_new.c's new shapes) takes one slot of
 * host-mapped pinned memory (cuMemHostAlloc, PORTABLE | DEVICEMAP: every context maps it, at the host address on a
 * UVA system): two zeroed 4-byte words, its flag and its done word. Its kernels get the flag's address in each
 * checked axis and set it to 1 at an index outside its dimension; its last checked launch also gets the done word's
 * address and the slot's 32-bit device counter (ix_finish: the grid's last block sets the done word once every
 * block has checked). The host spins on the done word (at most CHECK_SPIN_NS, the GIL released), else waits for the
 * stream, and reads the flag: on an H200 the done word arrives about 2.5 us before the stream's completion (a
 * one-block launch and wait: 7.9 us against 10.2 with cuStreamSynchronize). Each call holds its own slot (taken by
 * compare-and-swap; CHECK_SLOTS, far more than threads can hold), so threads, streams and devices never share one;
 * the counters are per context, allocated at its first checked call. Where anything is missing (no driver or
 * context, the stream capturing into a CUDA graph, a failed driver call, every slot held) the call is declined and
 * the Python route checks the indices; without only the counters the call waits for its stream. */
#define CHECK_SLOTS 4096
#define CHECK_CONTEXTS 64
#define CHECK_SPIN_NS 100000
static volatile uint32_t *check_flags;      /* 2 * CHECK_SLOTS words (slot s: flag 2s, done 2s + 1), never freed */
static int check_held[CHECK_SLOTS];
static unsigned check_next;
/* by the driver's unique context id (cuCtxGetId: a context made after another was destroyed at the same
 * address gets its own counters); counts 0: could not allocate */
static struct { unsigned long long id; uint64_t counts; } check_ctx[CHECK_CONTEXTS];
static int check_n_ctx;
static long long check_waits[2];            /* check_end's waits ended by the done word, by the stream */
static int check_ctx_busy;                  /* a thread is making a context's counters (the GIL released) */

/* This thread's capture mode set to RELAXED (2) for the one-time allocations below, so that they do not invalidate
 * another thread's capture in the global mode (torch.cuda.graph's default): *mode the previous one; 1 if exchanged. */
static int relaxed(int *mode) {
    *mode = 2;
    return cu_capture_mode && cu_capture_mode(mode) == 0;
}

/* The slots' counters in `stream`'s context (CHECK_SLOTS zeroed 32-bit words, made once per context, never freed):
 * their device address, or 0. The GIL is released for the one stream wait (check_ctx_busy: one maker at a time). */
static uint64_t check_counts(uint64_t stream) {
    void *ctx = NULL, *popped = NULL;
    unsigned long long id = 0;
    uint64_t counts = 0;
    if (!cu_stream_ctx || !cu_ctx_push || !cu_ctx_pop || !cu_mem_alloc || !cu_memset32 || !cu_ctx_id
            || cu_stream_ctx((void *)(uintptr_t)stream, &ctx) != 0 || !ctx || cu_ctx_id(ctx, &id) != 0)
        return 0;
    for (int i = 0; i < check_n_ctx; i++)
        if (check_ctx[i].id == id) return check_ctx[i].counts;
    /* (another thread making counters: this call waits for its stream) */
    if (check_n_ctx == CHECK_CONTEXTS || check_ctx_busy || cu_ctx_push(ctx) != 0) return 0;
    check_ctx_busy = 1;
    int mode;
    const int exchanged = relaxed(&mode);
    /* zeroed on the call's own stream (a context-wide synchronisation would break another stream's capture) and
     * waited for, the GIL released (a host function queued on the stream may need it), before any launch reads them */
    int bad = cu_mem_alloc(&counts, sizeof(uint32_t) * CHECK_SLOTS) != 0
              || cu_memset32(counts, 0, CHECK_SLOTS, (void *)(uintptr_t)stream) != 0;
    if (!bad) {
        Py_BEGIN_ALLOW_THREADS
        bad = cu_sync((void *)(uintptr_t)stream) != 0;
        Py_END_ALLOW_THREADS
    }
    if (bad) counts = 0;                     /* (not retried: this context's checked calls wait for their streams) */
    if (exchanged) cu_capture_mode(&mode);
    cu_ctx_pop(&popped);
    check_ctx_busy = 0;
    check_ctx[check_n_ctx].id = id;
    check_ctx[check_n_ctx++].counts = counts;
    return counts;
}

int odml_cuda_check_begin(uint64_t stream, int *slot, uint64_t *flag, uint64_t *fin) {
    int capturing = 1;
    if (!load_driver() || !cu_host_alloc || !cu_host_device || !cu_sync || !cu_capturing
            || cu_capturing((void *)(uintptr_t)stream, &capturing) != 0 || capturing != 0)
        return -1;
    if (!check_flags) {                      /* (the GIL held: one thread allocates) */
        void *p = NULL;
        uint64_t dptr = 0;
        const size_t bytes = 2 * sizeof(uint32_t) * CHECK_SLOTS;
        int mode;
        const int exchanged = relaxed(&mode);
        const int bad = cu_host_alloc(&p, bytes, 0x1 | 0x2) != 0 || !p;     /* PORTABLE | DEVICEMAP */
        if (exchanged) cu_capture_mode(&mode);
        if (bad) return -1;
        if (cu_host_device(&dptr, p, 0) != 0 || dptr != (uint64_t)(uintptr_t)p) return -1;     /* not UVA: decline (kept) */
        memset(p, 0, bytes);
        check_flags = (volatile uint32_t *)p;
    }
    const uint64_t counts = check_counts(stream);
    const unsigned start = __atomic_fetch_add(&check_next, 1u, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < CHECK_SLOTS; i++) {
        const int s = (int)((start + i) % CHECK_SLOTS);
        int free_ = 0;
        if (__atomic_compare_exchange_n(&check_held[s], &free_, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
            check_flags[2 * s] = check_flags[2 * s + 1] = 0;
            __atomic_thread_fence(__ATOMIC_SEQ_CST);    /* the zeros written before the launches are queued */
            *slot = s;
            *flag = (uint64_t)(uintptr_t)(check_flags + 2 * s);
            fin[0] = counts ? (uint64_t)(uintptr_t)(check_flags + 2 * s + 1) : 0;
            fin[1] = counts ? counts + sizeof(uint32_t) * (uint64_t)s : 0;
            return 0;
        }
    }
    return -1;
}

static int64_t now_ns(void) {
#ifdef _WIN32
    return 0;                                /* (no checked call: check_begin declines every one) */
#else
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
#endif
}

int odml_cuda_check_end(uint64_t stream, int slot, int signalled) {
    int rc = 0, done = 0;
    volatile uint32_t *word = check_flags + 2 * slot + 1;
    Py_BEGIN_ALLOW_THREADS
    if (signalled) {                         /* the done word, else (a long kernel) the stream */
        const int64_t until = now_ns() + CHECK_SPIN_NS;
        for (unsigned i = 1; !(done = __atomic_load_n(word, __ATOMIC_ACQUIRE) != 0); i++) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            if (i % 64 == 0 && now_ns() > until) break;
        }
    }
    if (!done) rc = cu_sync((void *)(uintptr_t)stream);
    Py_END_ALLOW_THREADS
    check_waits[!done]++;
    if (rc != 0) return -1;                  /* (the slot stays held: a kernel may still write it) */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    const int set = check_flags[2 * slot] != 0;
    __atomic_store_n(&check_held[slot], 0, __ATOMIC_RELEASE);
    return set;
}

PyObject *odml_py_cuda_check_info(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    return Py_BuildValue("(LL)", check_waits[0], check_waits[1]);
}
