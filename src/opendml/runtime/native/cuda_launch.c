/* cuda_launch(function, grid, block, shared_mem, stream, src, dst, params):
 * one cuLaunchKernel call for opendml's CUDA kernels, whose three arguments
 * are always (source pointer, destination pointer, parameter block BY VALUE).
 * `params` is the HOST address of the parameter structure (a params.h
 * struct, owned by the backend's Launch): cuLaunchKernel copies its bytes
 * into the launch, so nothing of it lives on the device, nothing is uploaded,
 * and a launch captured into a CUDA graph keeps its own copy.
 *
 * Owns only this: the CUDA backend (runtime/cuda/backend.py) builds and caches
 * everything else (compiled function, parameter structure, grid) and
 * calls this on the hot path, because a launch through ctypes costs about
 * 8 us of argument conversion and this one a fraction of a microsecond. The
 * driver library is opened on first use with dlopen, so the extension needs
 * no CUDA to build or import; without a driver the call raises ImportError
 * and the backend keeps its ctypes launch. Returns the CUresult (0: queued).
 * Lives in the CPU extension only because that is opendml's one C extension.
 * odml_cuda_launch (common.h) is the same launch for the call cache (calls.c).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "cpu/common.h"

#ifndef _WIN32
#include <dlfcn.h>

typedef int (*launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned shared, void *stream, void **params, void **extra);
typedef int (*attribute_fn)(void *f, int attribute, int value);
static launch_fn cu_launch = NULL;
static attribute_fn cu_attribute = NULL;

static int load_driver(void) {
    if (cu_launch) return 1;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 0;
    cu_attribute = (attribute_fn)dlsym(lib, "cuFuncSetAttribute");
    cu_launch = (launch_fn)dlsym(lib, "cuLaunchKernel");
    return cu_launch != NULL;
}
#endif

/* cuLaunchKernel of `function` on grid x 1 x 1 blocks of block x 1 x 1 threads with kernel arguments argv:
 * the CUresult, or -1 without a driver. */
static int launch(uint64_t function, unsigned grid, unsigned block, unsigned shared, uint64_t stream, void **argv) {
#ifdef _WIN32
    (void)function; (void)grid; (void)block; (void)shared; (void)stream; (void)argv;
    return -1;
#else
    if (!load_driver()) return -1;
    return cu_launch((void *)(uintptr_t)function, grid, 1, 1, block, 1, 1, shared, (void *)(uintptr_t)stream, argv,
                     NULL);
#endif
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

int odml_cuda_shared_limit(uint64_t function, unsigned bytes) {
#ifdef _WIN32
    (void)function; (void)bytes;
    return -1;
#else
    if (!load_driver() || !cu_attribute) return -1;
    return cu_attribute((void *)(uintptr_t)function, 8, (int)bytes);   /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */
#endif
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
#ifdef _WIN32
    PyErr_SetString(PyExc_ImportError, "cuda_launch: not available on Windows (the backend launches through ctypes)");
    return NULL;
#else
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
#endif
}
