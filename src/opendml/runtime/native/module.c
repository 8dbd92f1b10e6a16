/* The Python module opendml.runtime.cpu._native: the method table, and argument parsing, the GIL and errors around
 * the kernels (common.h); blocks.c's Block type and the call cache (calls.c) are the glue's.
 *
 * Python validates and lowers every operator; a kernel only executes a plan known to stay inside the bound ranges.
 * Each kernel function takes the destination and source addresses (element 0 of the bound ranges), the bytes of its
 * params.h struct (runtime/params.py's ctypes mirrors; exactly the struct's size) and a thread count, and runs with
 * the GIL released. The kernels need only Python.h; the call cache uses NumPy's headers where the build has them.
 * The extension is optional: the CPU backend runs the same plans through NumPy without it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "cpu/blocks.h"
#include "cpu/common.h"
#include "cpu/indexed/index.h"
#include "cpu/move.h"
#include "newshape.h"

/* Parse (dst, src, params, threads), params exactly `size` bytes copied into `out` (bytes need not be aligned). */
static int parse(PyObject *args, const char *name, void *out, size_t size, char **dst, const char **src,
                 int *threads) {
    unsigned long long d, s;
    Py_buffer pb;
    if (!PyArg_ParseTuple(args, "KKy*i", &d, &s, &pb, threads)) return -1;
    if (pb.len != (Py_ssize_t)size) {
        PyErr_Format(PyExc_ValueError, "opendml.runtime.cpu._native.%s: the parameter block must be %zu bytes "
                     "(sizeof its params.h struct); got %zd", name, size, pb.len);
        PyBuffer_Release(&pb);
        return -1;
    }
    memcpy(out, pb.buf, size);
    PyBuffer_Release(&pb);
    *dst = (char *)(uintptr_t)d;
    *src = (const char *)(uintptr_t)s;
    return 0;
}

static PyObject *finish(int status, const char *name, const char *error) {
    if (status == ODML_OK) Py_RETURN_NONE;
    if (status == ODML_ENOMEM) return PyErr_NoMemory();
    PyErr_Format(PyExc_ValueError, "opendml.runtime.cpu._native.%s: %s", name, error ? error : "bad parameters");
    return NULL;
}

/* One Python function per kernel of params.h's ODML_CPU_KERNELS list. */
#define KERNEL(CODE, NAME, STRUCT)                                                       \
    static PyObject *py_##NAME(PyObject *self, PyObject *args) {                        \
        STRUCT p;                                                                        \
        char *dst;                                                                       \
        const char *src, *error = NULL;                                                  \
        int threads, status;                                                             \
        (void)self;                                                                      \
        if (parse(args, #NAME, &p, sizeof p, &dst, &src, &threads) < 0) return NULL;    \
        Py_BEGIN_ALLOW_THREADS                                                           \
        status = odml_##NAME(dst, src, &p, threads, &error);                             \
        Py_END_ALLOW_THREADS                                                             \
        return finish(status, #NAME, error);                                             \
    }
ODML_CPU_KERNELS(KERNEL)
KERNEL(MOVE, move, odml_cpu_move_params)   /* (move.h's pass kernel, outside params.h's list) */
#undef KERNEL

static PyObject *py_stream_min(PyObject *self, PyObject *args) {
    long long v = -1;
    (void)self;
    if (!PyArg_ParseTuple(args, "|L", &v)) return NULL;
    long long old = (long long)odml_stream_min_bytes;
    if (v >= 0) odml_stream_min_bytes = (int64_t)v;
    return PyLong_FromLongLong(old);
}

static PyObject *py_param_sizes(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    static const struct { const char *name; Py_ssize_t size; } blocks[] = {
#define BLOCK(CODE, NAME, STRUCT) {#STRUCT, (Py_ssize_t)sizeof(STRUCT)},
        ODML_CPU_KERNELS(BLOCK) BLOCK(MOVE, move, odml_cpu_move_params)   /* (move.h's, outside params.h's list) */
#undef BLOCK
    };
    PyObject *d = PyDict_New();
    for (size_t i = 0; d && i < sizeof blocks / sizeof blocks[0]; i++) {
        PyObject *v = PyLong_FromSsize_t(blocks[i].size);
        if (!v || PyDict_SetItemString(d, blocks[i].name, v) < 0) Py_CLEAR(d);
        Py_XDECREF(v);
    }
    return d;
}

/* The glue's Python functions (calls*.c, newshape.c, move_params.c, cuda_spec.c, cuda_launch.c, blocks.c,
 * indexed/index.c): X(NAME of odml_py_NAME, its calling convention, its docstring). */
#define ODML_GLUE(X)                                                                                                \
    X(call_cache_call, FASTCALL, "call_cache_call(op, x, *args): runtime/calls.py's call (calls.c)")                \
    X(call_cache_packed, FASTCALL, "call_cache_packed(code, split, fallback, extra, x, packed): runtime/calls.py's " \
      "packed (calls_packed.c)")                                                                                    \
    X(call_cache_put_eager, VARARGS, "call_cache_put_eager(op, x, args, eager, generation): runtime/calls.py's "     \
      "put_eager (calls.c)")                                                                                        \
    X(call_cache_torch_eager, O, "call_cache_torch_eager(eager_ok): runtime/calls.py's register_torch_eager")       \
    X(call_cache_move, FASTCALL, "call_cache_move(op, x, *args): runtime/calls.py's move (calls_move.c)")           \
    X(call_cache_put_move, VARARGS, "call_cache_put_move(op, x, args, outs, origins, passes, multi, generation, "   \
      "planned=None) -> whether stored: runtime/calls.py's put_move and put_move_cuda")                             \
    X(call_cache_move_types, O, "call_cache_move_types(types): runtime/calls.py's register_move_types")             \
    X(call_cache_move_new, FASTCALL, "call_cache_move_new(op, lowering, x, args, generation, conf, "                \
      "cuda_conf=None): runtime/calls.py's move_new (calls_move_new.c)")                                            \
    X(move_lowering, FASTCALL, "move_lowering(lowering, x, args, conf) -> (shape, dtype, passes) "                  \
      "call_cache_move_new would run, or None")                                                                     \
    X(cuda_move_steps, FASTCALL, "cuda_move_steps(lowering, x, args, data_ptrs, dst_ptrs, settings) -> (shapes, "   \
      "launches) call_cache_move_new would make on CUDA memory laid out as x, or None (cuda_move_spec.c)")          \
    X(call_cache_index_new, FASTCALL, "call_cache_index_new(op, which, types, given, args, generation, "            \
      "min_bytes, cuda_conf=None): runtime/calls.py's index_new (newshape_index.c)")                                \
    X(cuda_index_steps, FASTCALL, "cuda_index_steps(which, types, given, args, data_ptrs, dst_ptr, move_settings, " \
      "index_settings) -> (shape, launches) call_cache_index_new would make on CUDA, or None (cuda_index_spec.c)")  \
    X(index_lowering, FASTCALL, "index_lowering(which, types, given, args, min_bytes) -> (shape, dtype, passes) "   \
      "call_cache_index_new would record, or None")                                                                 \
    X(call_cache_entry, FASTCALL, "call_cache_entry(op, x, *args): runtime/calls.py's entry")                       \
    X(call_cache_cuda_retry, O, "call_cache_cuda_retry(retry): runtime/calls.py's register_cuda_retry")             \
    X(call_cache_torch_api, O, "call_cache_torch_api(capsule or None): runtime/calls.py's register_torch_api")      \
    X(call_cache_torch, VARARGS, "call_cache_torch(Tensor, is_grad_enabled, dispatch_stack_len, "                   \
      "is_functorch_wrapped, raw_stream, current_device, from_numpy): runtime/calls.py's register_torch")           \
    X(call_cache_cupy, VARARGS, "call_cache_cupy(ndarray, empty, current_device, current_stream_ptr): "             \
      "runtime/calls.py's register_cupy")                                                                           \
    X(call_cache_clear, NOARGS, "call_cache_clear(): drop every entry")                                             \
    X(call_cache_generation, NOARGS, "call_cache_generation() -> how many times the cache was dropped (a put "      \
      "names the one it started in)")                                                                               \
    X(call_cache_enable, VARARGS, "call_cache_enable([flag]) -> previous flag (False also drops every entry)")      \
    X(call_cache_info, NOARGS, "call_cache_info(): runtime/calls.py's info")                                        \
    X(index_run_pass, VARARGS, "index_run_pass(params, src, src_len, dst, dst_len, index_addrs, index_lens): one "  \
      "Gather or Scatter pass")                                                                                     \
    X(cuda_launch, FASTCALL, "cuda_launch(function, grid, block, shared_mem, stream, src, dst, params) -> "         \
      "CUresult (see cuda_launch.c)")                                                                               \
    X(cuda_check_info, NOARGS, "cuda_check_info() -> (waits ended by the done word, by the stream): the checked "   \
      "index calls served from C so far (cuda_launch.c)")                                                           \
    X(copy_params, FASTCALL, "copy_params(element_size, sizes, in_offset, in_strides, out_offset, out_strides) "    \
      "-> the bytes of odml_copy_params for the CopyPlan's canonical form, or None where the Python route must "    \
      "pack it (newshape.c)")                                                                                       \
    X(move_params, FASTCALL, "move_params(fill, src_type, dst_type, src_offset, dst_offset, sizes, src_strides, "   \
      "dst_strides, maps, scale_bias, fill_bits) -> the bytes of odml_cpu_move_params for a move pass's "           \
      "canonical form, or None where the Python route must build it (move_params.c)")                               \
    X(cuda_spec, FASTCALL, "cuda_spec(kind, itemsize, shape, strides, fields, src_ptr, dst_ptr) -> (kernel name, "  \
      "params, grid, shared_mem, origin): the CUDA launch of a new shape's plan (cuda_spec.c), or None")            \

#define FASTCALL_ARGS (PyObject *self, PyObject *const *args, Py_ssize_t nargs)
#define VARARGS_ARGS (PyObject *self, PyObject *args)
#define O_ARGS VARARGS_ARGS
#define NOARGS_ARGS VARARGS_ARGS
#define DECLARE(NAME, CONV, DOC) PyObject *odml_py_##NAME CONV##_ARGS;
ODML_GLUE(DECLARE)
#define PLAIN(NAME, WHICH, SIG, LO, HI) DECLARE(NAME##_lowering, FASTCALL, )
ODML_PLAIN_FUNCTIONS(PLAIN)
#undef PLAIN
#undef DECLARE
int odml_calls_init(void);   /* calls.c */

static PyMethodDef methods[] = {
#define METHOD(NAME, CONV, DOC) {#NAME, (PyCFunction)(void (*)(void))odml_py_##NAME, METH_##CONV, DOC},
    ODML_GLUE(METHOD)
#undef METHOD
#define METHOD(NAME, WHICH, SIG, LO, HI)                                                                       \
    {#NAME "_lowering", (PyCFunction)(void (*)(void))odml_py_##NAME##_lowering, METH_FASTCALL,                 \
     #NAME "_lowering(in_sizes, " SIG ") -> ops/" #NAME ".py's plain_lowering of the common valid case, or None " \
     "where that Python function must answer (newshape.c)"},
    ODML_PLAIN_FUNCTIONS(METHOD)
#undef METHOD
#define METHOD(CODE, NAME, STRUCT) \
    {#NAME, py_##NAME, METH_VARARGS, #NAME "(dst_addr, src_addr, params: bytes of " #STRUCT ", threads): the " #NAME \
     " kernel (params.h's ODML_CPU_KERNELS)"},
    ODML_CPU_KERNELS(METHOD)
#undef METHOD
    {"move", py_move, METH_VARARGS,
     "move(dst_addr, src_addr, params: bytes of odml_cpu_move_params (move.h), threads): one pass of a move program"},
    {"cache_limit", odml_py_cache_limit, METH_VARARGS,
     "cache_limit([nbytes]) -> previous limit: bytes of released output blocks kept for reuse"},
    {"stream_min", py_stream_min, METH_VARARGS,
     "stream_min([nbytes]) -> previous value: outputs this large use streaming stores (tuning aid)"},
    {"cache_info", odml_py_cache_info, METH_NOARGS,
     "cache_info() -> dict(limit, blocks, bytes, hits, misses) of the output block cache"},
    {"param_sizes", py_param_sizes, METH_NOARGS,
     "param_sizes() -> {struct name: sizeof} of the parameter blocks this build expects (params.h's and move.h's)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "opendml.runtime.cpu._native",
    "opendml's compiled CPU kernels (optional; see runtime/cpu/backend.py)", -1, methods,
};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&odml_BlockType) < 0 || odml_calls_init() < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&odml_BlockType);
    if (PyModule_AddObject(m, "Block", (PyObject *)&odml_BlockType) < 0) {
        Py_DECREF(&odml_BlockType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
