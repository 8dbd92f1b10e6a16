/* The call cache: a repeated array-API call served from C, without Python.
 *
 * The first call with a given operator, arguments, input dtype, shape and
 * strides (on CUDA also the device and the input address's alignment class)
 * runs in Python: validation, lowering, the backend's choice of kernel. When
 * that call ran a compiled kernel on the input exactly as given, its adapter
 * stores here what the kernel needs (call_cache_put_numpy / _cuda): the
 * output's shape, the input's origin, and the CPU kernel's parameter struct
 * or the CUDA launch (function, grid, parameter structure passed by value). A later
 * call with the same key (call_cache_call, the first thing each array-API
 * function does) allocates the output with the framework's own allocator
 * (NumPy's, opendml's output blocks, PyTorch's caching allocator, CuPy's
 * pool) and runs the kernel on the caller's current stream. It returns None
 * for anything it cannot vouch for: another array type, a PyTorch tensor that
 * autograd or a tracer must see (requires_grad with grad mode on, a dispatch
 * mode, a functorch wrapper), a negative view, a tensor whose device is not
 * the current one, an argument that is not None, a plain int or a list or
 * tuple of at most 8 plain ints; the call then takes the Python route, which
 * gives every error and every answer the cache does not hold.
 *
 * A PyTorch tensor that autograd must record (requires_grad with grad mode
 * on, no dispatch mode, no functorch wrapper or forward-AD level, and the
 * torch_eager hook's say-so: no TorchScript trace, no compiled autograd,
 * opendml's autograd node in use) is served by an eager entry
 * (call_cache_put_eager), stored by the Python route's first such call: a
 * callable that records the call with the autograd node and runs the kernel
 * (itself through this cache), with the same key as the kernel's entry.
 *
 * The family's entries also serve plain PyTorch CPU tensors (torch_move):
 * the tensors are read through NumPy views, the same entries run, and the
 * outputs go to torch.from_numpy, as on the Python route.
 *
 * Served: NumPy arrays (exact ndarray, native byte order), PyTorch CPU
 * tensors (a NumPy output handed to torch.from_numpy, as the Python route
 * does), PyTorch CUDA tensors and CuPy arrays (native byte order); and the
 * data-movement family's calls on NumPy arrays (call_cache_move, its own
 * section below: several inputs and outputs, the move program's prepared
 * passes) and on PyTorch CUDA tensors and CuPy arrays (cuda_move: the move
 * program's kernel launches, one per pass, queued like the CUDA entries').
 *
 * Keys are int64 words: array kind, operator, each argument (tagged), dtype,
 * rank, shape, strides, device and alignment. The table is a dict of key
 * bytes to Entry objects, emptied when it reaches MAX_ENTRIES and by
 * call_cache_clear (opendml calls it whenever its configuration changes; a
 * put made on settings read before the last clear is refused, see
 * `generation`). Everything here runs with the GIL held, except CPU kernels
 * writing at least RELEASE_BYTES; an entry in use holds a reference, so a
 * clear during a call (by a finalizer or another thread) cannot free it. A
 * dropped CUDA entry's launch is released at once: kernel parameters go by
 * value, so kernels queued from it read nothing it owns (the graveyard list
 * Python registers stays empty). Errors met while probing a framework's
 * hooks only send the call down the Python route, except a KeyboardInterrupt
 * or other non-Exception, which is raised when the call returns. An output
 * the allocator cannot give sends the call down the Python route too, which
 * raises opendml's AllocationError.
 *
 * Needs NumPy's headers (ODML_NUMPY, set by setup.py) for NumPy arrays and
 * dtypes; built without them, the cache holds nothing and every call takes
 * the Python route.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "blocks.h"
#include "common.h"
#include "move.h"
#include "newshape.h"
#include "torch_api.h"

#ifdef ODML_NUMPY
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#if NPY_ABI_VERSION < 0x02000000          /* NumPy 1.x headers */
#define PyDataType_ELSIZE(d) ((d)->elsize)
#endif
#endif

#define MAX_KEY 384
#define MAX_ENTRIES 4096
#define MAX_RANK 8
#define MAX_ARG_INTS 8
#define RELEASE_BYTES (64 * 1024)
#define PAGE 4096

enum { KIND_NUMPY = 1, KIND_TORCH = 2, KIND_CUPY = 3, KIND_EAGER = 5 };   /* KIND_MOVE is 4 (below) */

typedef struct {
    PyObject_HEAD
    int kind, cpu;            /* the array's kind; 1: a CPU kernel (NumPy arrays, PyTorch CPU tensors) */
    PyObject *shape;          /* the output's shape, a tuple of ints */
    uint64_t origin;          /* bytes from the input's data pointer back to element 0 of the bound range */
    /* NumPy */
    PyObject *dtype;          /* the output's PyArray_Descr */
    int rank, kernel, threads, use_blocks, prefault;
    int64_t dims[MAX_RANK], out_bytes;
    odml_kernel_params p;     /* kernel's block (common.h) */
    /* CUDA */
    uint64_t function, params;  /* params: host address of the parameter struct (by value): the Launch's, or p */
    unsigned grid, block, shared, dst_align;
    PyObject *launch;         /* the backend's Launch: owns the parameter struct; its call retries and raises;
                               * NULL for an entry call_cache_torch_new made (its parameters in p), whose
                               * failed launch the retry hook (call_cache_cuda_retry) takes over */
    int64_t device;           /* the CUDA device of an entry without a Launch */
    /* eager autograd (KIND_EAGER) */
    PyObject *eager;          /* records the call for autograd and runs it: eager(x) -> the output */
} Entry;

static PyObject *graveyard;             /* registered by runtime/calls.py; no longer filled (Entry_dealloc) */

static void Entry_dealloc(Entry *e) {
    Py_XDECREF(e->shape);
    Py_XDECREF(e->dtype);
    /* A Launch owns no device memory (its parameters went by value into each
     * launch queued from it), so it is released at once: nothing goes to the
     * graveyard, and no device synchronisation (which would break a CUDA
     * graph capture) is ever needed for it. */
    Py_XDECREF(e->launch);
    Py_XDECREF(e->eager);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

static PyTypeObject EntryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "opendml.runtime.cpu._native.CallEntry",
    .tp_basicsize = sizeof(Entry),
    .tp_dealloc = (destructor)Entry_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One call-cache entry (see calls.c).",
};

static PyObject *table;                 /* key bytes -> Entry */
static int enabled = 1, numpy_ready;
static long long hits, misses;
/* Bumped by every clear: a put made on settings read before the last clear
 * (another thread called configure() meanwhile) is refused. */
static unsigned long long generation;

/* An exception that is not an Exception (KeyboardInterrupt, SystemExit) met
 * while a call probed a hook: kept and raised when the call returns, not
 * dropped with the errors that only make the call take the Python route. */
static PyObject *deferred;               /* the exception (3.12+), or its type (3.11) */
#if PY_VERSION_HEX < 0x030C0000
static PyObject *deferred_value, *deferred_tb;
#endif

static void drop_error(void) {
    if (!PyErr_Occurred()) return;
    if (!deferred && !PyErr_ExceptionMatches(PyExc_Exception)) {
#if PY_VERSION_HEX >= 0x030C0000
        deferred = PyErr_GetRaisedException();
#else
        PyErr_Fetch(&deferred, &deferred_value, &deferred_tb);
#endif
        return;
    }
    PyErr_Clear();
}

static void front_clear(void);

static void drop_all(void) {
    generation++;
    if (table) PyDict_Clear(table);
    front_clear();
}

/* PyTorch's and CuPy's hooks, registered by their adapters (call_cache_torch / _cupy). */
static PyObject *t_type, *t_grad_enabled, *t_dispatch_len, *t_wrapped, *t_raw_stream, *t_device, *t_from_numpy;
static PyObject *t_eager_ok;            /* eager autograd entries may serve now (no tracer, the node in use) */
static PyObject *c_type, *c_empty, *c_device, *c_stream;
static PyObject *s_requires_grad, *s_is_cuda, *s_is_cpu, *s_dtype, *s_shape, *s_stride, *s_get_device, *s_data_ptr,
    *s_is_neg, *s_new_empty, *s_strides, *s_data, *s_ptr, *s_device_id, *s_detach, *s_numpy;

/* -- keys ----------------------------------------------------------------------------------------- */

typedef struct {
    int64_t w[MAX_KEY];
    int n;
} Key;

static int put(Key *k, int64_t v) {
    if (k->n >= MAX_KEY) return -1;
    k->w[k->n++] = v;
    return 0;
}

/* An exact int's value; -1 (no exception left) where it is not one or overflows. */
static int exact_int(PyObject *o, int64_t *v) {
    if (!PyLong_CheckExact(o)) return -1;
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        drop_error();
        return -1;
    }
    *v = x;
    return 0;
}

/* An operator argument: None, an exact int, or a list/tuple of at most
 * MAX_ARG_INTS exact ints (as the Python plan cache keys them: 1.0 == 1, but
 * a float must not reuse an int's plan). -1: no key. */
static int key_arg(Key *k, PyObject *a) {
    int64_t v;
    if (a == Py_None) return put(k, 0);
    if (PyLong_CheckExact(a)) {
        if (exact_int(a, &v) < 0 || put(k, 1) < 0) return -1;
        return put(k, v);
    }
    if (PyList_CheckExact(a) || PyTuple_CheckExact(a)) {
        Py_ssize_t n = PyList_CheckExact(a) ? PyList_GET_SIZE(a) : PyTuple_GET_SIZE(a);
        PyObject **items = PyList_CheckExact(a) ? ((PyListObject *)a)->ob_item : ((PyTupleObject *)a)->ob_item;
        if (n > MAX_ARG_INTS || put(k, 2) < 0 || put(k, n) < 0) return -1;
        for (Py_ssize_t i = 0; i < n; i++)
            if (exact_int(items[i], &v) < 0 || put(k, v) < 0) return -1;
        return 0;
    }
    return -1;
}

static int key_head(Key *k, int kind, PyObject *op, PyObject *const *args, Py_ssize_t nargs) {
    int64_t o;
    k->n = 0;
    if (exact_int(op, &o) < 0 || put(k, kind) < 0 || put(k, o) < 0 || put(k, nargs) < 0) return -1;
    for (Py_ssize_t i = 0; i < nargs; i++)
        if (key_arg(k, args[i]) < 0) return -1;
    return 0;
}

/* A tuple of at most MAX_RANK ints (sizes or strides), with its length first. */
static int key_tuple(Key *k, PyObject *t) {
    int64_t v;
    if (!t || !PyTuple_Check(t) || PyTuple_GET_SIZE(t) > MAX_RANK || put(k, PyTuple_GET_SIZE(t)) < 0) return -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++) {
        PyObject *item = PyTuple_GET_ITEM(t, i);
        if (!PyLong_Check(item)) return -1;
        long long x = PyLong_AsLongLong(item);
        if (x == -1 && PyErr_Occurred()) {
            drop_error();
            return -1;
        }
        v = x;
        if (put(k, v) < 0) return -1;
    }
    return 0;
}

static Entry *lookup(const Key *k) {
    PyObject *kb = PyBytes_FromStringAndSize((const char *)k->w, (Py_ssize_t)k->n * 8);
    if (!kb) {
        drop_error();
        return NULL;
    }
    PyObject *e = PyDict_GetItemWithError(table, kb);
    Py_DECREF(kb);
    if (!e || Py_TYPE(e) != &EntryType) {   /* (the family's MoveEntry objects share the table, keyed apart) */
        drop_error();
        misses++;
        return NULL;
    }
    Py_INCREF(e);
    return (Entry *)e;
}

static int store(const Key *k, Entry *e) {
    PyObject *kb = PyBytes_FromStringAndSize((const char *)k->w, (Py_ssize_t)k->n * 8);
    if (!kb) return -1;
    if (PyDict_GET_SIZE(table) >= MAX_ENTRIES) {   /* full: not a settings change */
        PyDict_Clear(table);
        front_clear();
    }
    int rc = PyDict_SetItem(table, kb, (PyObject *)e);
    Py_DECREF(kb);
    return rc;
}

/* An attribute (or, with call, a no-argument method) as an int64; -1 with no
 * exception left where it fails or is not an int. */
static int int_of(PyObject *o, PyObject *name, int call, int64_t *v) {
    PyObject *r = call ? PyObject_CallMethodNoArgs(o, name) : PyObject_GetAttr(o, name);
    if (!r) {
        drop_error();
        return -1;
    }
    int rc = 0;
    if (PyLong_Check(r)) {
        long long x = PyLong_AsLongLong(r);
        if (x == -1 && PyErr_Occurred()) {
            drop_error();
            rc = -1;
        }
        *v = x;
    } else {
        rc = -1;
    }
    Py_DECREF(r);
    return rc;
}

/* 1 where `r` (a new reference, or NULL) is True, else 0; consumes it. */
static int is_true(PyObject *r) {
    if (!r) {
        drop_error();
        return 0;
    }
    int t = r == Py_True;
    Py_DECREF(r);
    return t;
}

/* 1 where the call result (a new reference, or NULL) is the int `want`; consumes it. */
static int equals(PyObject *r, int64_t want) {
    if (!r) {
        drop_error();
        return 0;
    }
    int eq = 0;
    if (PyLong_Check(r)) {
        long long x = PyLong_AsLongLong(r);
        if (x == -1 && PyErr_Occurred()) drop_error();
        else eq = x == want;
    }
    Py_DECREF(r);
    return eq;
}

/* -- CUDA launches ----------------------------------------------------------------------------------- */

/* Queue e's kernel; on a failed launch the backend's Launch (its retry on a
 * thread without the device's context, its error message) takes over. */
static PyObject *cuda_retry;            /* retry(device, function, grid, shared, params, src, dst, stream) */

static int launch(Entry *e, uint64_t src, uint64_t dst, uint64_t stream) {
    int rc = odml_cuda_launch(e->function, e->grid, e->block, e->shared, stream, src, dst, e->params);
    if (rc == 0) return 0;
    PyObject *r;
    if (e->launch) {
        r = PyObject_CallFunction(e->launch, "KKK", (unsigned long long)src, (unsigned long long)dst,
                                  (unsigned long long)stream);
    } else if (cuda_retry) {
        const Py_ssize_t size = (Py_ssize_t)odml_kernel_size[e->kernel];
        r = PyObject_CallFunction(cuda_retry, "LKIIy#KKK", (long long)e->device, (unsigned long long)e->function,
                                  e->grid, e->shared, (const char *)&e->p, size, (unsigned long long)src,
                                  (unsigned long long)dst, (unsigned long long)stream);
    } else {
        PyErr_Format(PyExc_RuntimeError, "opendml CUDA: a cached launch failed (CUresult %d)", rc);
        return -1;
    }
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* The output's device address where it is in the alignment class the
 * launch was chosen for (always, with PyTorch's and CuPy's allocators). */
static int output_address(Entry *e, PyObject *out, int torch, int64_t *dst) {
    int rc;
    if (torch) {
        rc = int_of(out, s_data_ptr, 1, dst);
    } else {
        PyObject *mem = PyObject_GetAttr(out, s_data);
        rc = mem ? int_of(mem, s_ptr, 0, dst) : -1;
        Py_XDECREF(mem);
        if (PyErr_Occurred()) drop_error();
    }
    return rc < 0 || ((uint64_t)*dst & 15) != e->dst_align ? -1 : 0;
}

/* The stream handle a hook returned (a new reference, or NULL); consumes it. */
static int stream_of(PyObject *s, uint64_t *stream) {
    int rc = -1;
    if (s && PyLong_Check(s)) {
        unsigned long long v = PyLong_AsUnsignedLongLong(s);
        if (!(v == (unsigned long long)-1 && PyErr_Occurred())) {
            *stream = v;
            rc = 0;
        }
    } else if (s) {
        PyErr_SetString(PyExc_TypeError, "opendml call cache: the current stream is not an int");
    }
    Py_XDECREF(s);
    return rc;
}

/* An output the framework's allocator (or the output blocks) could not give:
 * the call takes the Python route, which allocates again and raises opendml's
 * AllocationError naming the operator, shape and bytes (runtime/alloc.py).
 * Only Exceptions: a KeyboardInterrupt met there is raised. NULL if not such. */
static PyObject *allocation_failed(void) {
    if (!PyErr_ExceptionMatches(PyExc_Exception)) return NULL;
    PyErr_Clear();
    Py_RETURN_NONE;
}

/* -- PyTorch tensors -------------------------------------------------------------------------------- */

/* PyTorch's accessors (torch_api.h), once the C++ node library gives them
 * (call_cache_torch_api); NULL: the same facts are read through Python. */
static const odml_torch_api *tapi;
static PyObject *tapi_owner;

/* The key words of a tensor the accessors described (torch_key's, below). */
static int torch_key_info(Key *k, const odml_torch_info *in) {
    if (in->device < -1 || put(k, (int64_t)(intptr_t)in->dtype) < 0 || put(k, in->ndim) < 0) return -1;
    for (int i = 0; i < in->ndim; i++)
        if (put(k, in->sizes[i]) < 0) return -1;
    if (put(k, in->ndim) < 0) return -1;
    for (int i = 0; i < in->ndim; i++)
        if (put(k, in->strides[i]) < 0) return -1;
    return put(k, in->device) < 0 || put(k, in->device < 0 ? 0 : (int64_t)(in->data_ptr & 15)) < 0 ? -1 : 0;
}

static int torch_key(Key *k, PyObject *x, int64_t *device, uint64_t *ptr) {
    int64_t p;
    odml_torch_info in;
    if (tapi && tapi->describe(x, &in) == 0) {  /* the same words as below: dtype, sizes, strides, device, alignment */
        *device = in.device;
        *ptr = in.data_ptr;
        return torch_key_info(k, &in);
    }
    PyObject *dtype = PyObject_GetAttr(x, s_dtype);
    if (!dtype) {
        drop_error();
        return -1;
    }
    int rc = put(k, (int64_t)(intptr_t)dtype);   /* torch.dtype objects are immortal singletons */
    Py_DECREF(dtype);
    PyObject *shape = PyObject_GetAttr(x, s_shape);
    rc = rc < 0 ? -1 : key_tuple(k, shape);
    Py_XDECREF(shape);
    PyObject *stride = rc < 0 ? NULL : PyObject_CallMethodNoArgs(x, s_stride);
    rc = rc < 0 ? -1 : key_tuple(k, stride);
    Py_XDECREF(stride);
    if (PyErr_Occurred()) drop_error();
    if (rc < 0 || int_of(x, s_get_device, 1, device) < 0 || int_of(x, s_data_ptr, 1, &p) < 0) return -1;
    *ptr = (uint64_t)p;
    /* CPU kernels take any alignment: CPU tensors (device -1) get one class */
    return put(k, *device) < 0 || put(k, *device < 0 ? 0 : (int64_t)(*ptr & 15)) < 0 ? -1 : 0;
}

/* Whether x still keys as words[0..n) (torch_key's words, read before an
 * allocation): an allocation may run a garbage collection whose finalizers
 * change x (x.resize_(), x.set_()) and release the memory a launch queued
 * from the old words would read. */
static int torch_still_keyed(PyObject *x, const int64_t *words, int n) {
    Key now;
    int64_t device;
    uint64_t ptr;
    now.n = 0;
    return torch_key(&now, x, &device, &ptr) == 0 && now.n == n && !memcmp(now.w, words, (size_t)n * 8);
}

/* Whether the kernel route may take x, a tensor that neither autograd nor a
 * tracer needs to see: 2 on CUDA, 1 on the CPU, else 0. */
static int torch_plain(PyObject *x) {
    odml_torch_info in;
    if (tapi && tapi->describe(x, &in) == 0) {
        /* (wrapped also where the negative bit is set: such a tensor takes the Python route, as below) */
        if (in.dispatch_modes || in.wrapped) return 0;
        if (in.requires_grad && in.grad_enabled) return t_eager_ok && is_true(PyObject_CallNoArgs(t_eager_ok)) ? 3 : 0;
        return in.device >= 0 ? 2 : in.device == -1 ? 1 : 0;
    }
    int record = is_true(PyObject_GetAttr(x, s_requires_grad)) && is_true(PyObject_CallNoArgs(t_grad_enabled));
    if (!equals(PyObject_CallNoArgs(t_dispatch_len), 0)) return 0;
    if (is_true(PyObject_CallOneArg(t_wrapped, x))) return 0;
    if (record) return t_eager_ok && is_true(PyObject_CallNoArgs(t_eager_ok)) ? 3 : 0;
    return is_true(PyObject_GetAttr(x, s_is_cuda)) ? 2 : is_true(PyObject_GetAttr(x, s_is_cpu)) ? 1 : 0;
}

/* Whether the current CUDA device is `device` (the launches need it current). */
static int torch_device_is(int64_t device) {
    if (tapi) {
        int64_t d = tapi->current_device();
        if (d < 0) drop_error();
        return d == device;
    }
    return equals(PyObject_CallNoArgs(t_device), device);
}

/* The current stream of CUDA device `device`: 0, or -1 with an exception. */
static int torch_stream(int64_t device, uint64_t *stream) {
    if (tapi) return tapi->current_stream(device, stream);
    PyObject *dev = PyLong_FromLongLong(device);
    if (!dev) return -1;
    int rc = stream_of(PyObject_CallOneArg(t_raw_stream, dev), stream);
    Py_DECREF(dev);
    return rc;
}

/* With PyTorch's accessors, x.new_empty(shape, dtype=dtype) (dtype NULL:
 * x's) as a new reference, its data pointer in *dst; NULL with the
 * allocator's exception; NULL and no exception where there are no accessors
 * or the shape is not one they take (the caller allocates through Python). */
static PyObject *tapi_empty(PyObject *x, PyObject *shape, PyObject *dtype, int64_t *dst) {
    if (!tapi || !PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) > MAX_RANK) return NULL;
    int64_t sizes[MAX_RANK];
    const Py_ssize_t nd = PyTuple_GET_SIZE(shape);
    for (Py_ssize_t i = 0; i < nd; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        if (v == -1 && PyErr_Occurred()) {
            drop_error();
            return NULL;
        }
        sizes[i] = v;
    }
    uint64_t d = 0;
    PyObject *out = tapi->empty(x, sizes, (int)nd, dtype, &d);
    *dst = (int64_t)d;
    return out;
}

/* Whether the kernel route may take x: 2 on CUDA, 1 on the CPU; 3 where
 * autograd must record the call and an eager entry may serve it; else 0.
 * (Above.) An eager entry's callable records the call with opendml's
 * autograd node and runs its kernel (arrays/torch_adapter.py). */
static PyObject *eager_call(PyObject *const *args, Py_ssize_t nargs, PyObject *x) {
    Key k;
    int64_t device;
    uint64_t ptr;
    if (key_head(&k, KIND_EAGER, args[0], args + 2, nargs - 2) < 0 || torch_key(&k, x, &device, &ptr) < 0)
        Py_RETURN_NONE;
    Entry *e = lookup(&k);
    if (!e) Py_RETURN_NONE;
    PyObject *result = PyObject_CallOneArg(e->eager, x);
    if (result) hits++;
    Py_DECREF(e);
    return result;
}

#ifdef ODML_NUMPY
static PyObject *cpu_run(Entry *e, PyArray_Descr *dtype, uintptr_t data);   /* NumPy section below */
#else
static PyObject *cpu_run(Entry *e, void *dtype, uintptr_t data) {
    (void)e; (void)dtype; (void)data;
    Py_RETURN_NONE;   /* unreachable: no CPU entries are made without NumPy */
}
#endif

static PyObject *torch_serve(PyObject *const *args, Py_ssize_t nargs, PyObject *x, int where);

static PyObject *torch_call(PyObject *const *args, Py_ssize_t nargs, PyObject *x) {
    int where = torch_plain(x);
    if (where == 3) return eager_call(args, nargs, x);
    return torch_serve(args, nargs, x, where);
}

/* The kernel route of torch_call for x, whose torch_plain is `where` (0: None). */
static PyObject *torch_serve(PyObject *const *args, Py_ssize_t nargs, PyObject *x, int where) {
    Key k;
    int64_t device, dst;
    uint64_t ptr;
    if (!where || key_head(&k, KIND_TORCH, args[0], args + 2, nargs - 2) < 0) Py_RETURN_NONE;
    const int mark = k.n;                          /* x's words start here */
    if (torch_key(&k, x, &device, &ptr) < 0) Py_RETURN_NONE;
    Entry *e = lookup(&k);
    if (!e) Py_RETURN_NONE;
    PyObject *result = NULL;
    if (e->cpu != (where == 1) || (!tapi && is_true(PyObject_CallMethodNoArgs(x, s_is_neg))) ||
        (where == 2 && !torch_device_is(device))) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    if (where == 1) {                              /* a CPU kernel into a NumPy output, as torch.from_numpy */
        PyObject *out = cpu_run(e, (PyArray_Descr *)e->dtype, (uintptr_t)ptr);
        if (out) {
            result = PyObject_CallOneArg(t_from_numpy, out);
            Py_DECREF(out);
            if (result) hits++;
        } else if (PyErr_ExceptionMatches(PyExc_MemoryError)) {
            result = allocation_failed();
        }
        goto done;
    }
    PyObject *out = tapi_empty(x, e->shape, NULL, &dst);
    const int through_python = !out && !PyErr_Occurred();
    if (through_python) out = PyObject_CallMethodOneArg(x, s_new_empty, e->shape);
    if (!out) {                                    /* the allocator's error (out of memory) */
        result = allocation_failed();
        goto done;
    }
    if ((through_python ? output_address(e, out, 1, &dst) < 0 : ((uint64_t)dst & 15) != e->dst_align) ||
        !torch_still_keyed(x, k.w + mark, k.n - mark)) {
        Py_DECREF(out);
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    uint64_t stream;
    if (torch_stream(device, &stream) < 0 || launch(e, ptr - e->origin, (uint64_t)dst, stream) < 0) {
        Py_DECREF(out);
        goto done;
    }
    result = out;
    hits++;
done:
    Py_DECREF(e);
    return result;
}

/* -- CuPy arrays ------------------------------------------------------------------------------------ */

static int cupy_key(Key *k, PyObject *x, PyObject **dtype, int64_t *device, uint64_t *ptr) {
#ifdef ODML_NUMPY
    int64_t p;
    if (!numpy_ready) return -1;
    *dtype = PyObject_GetAttr(x, s_dtype);
    if (!*dtype || !PyArray_DescrCheck(*dtype)) {
        drop_error();
        return -1;
    }
    PyArray_Descr *d = (PyArray_Descr *)*dtype;
    /* CuPy allows byte-swapped dtypes, which opendml rejects on the Python route */
    if (!PyArray_ISNBO(d->byteorder) || put(k, d->type_num) < 0 || put(k, PyDataType_ELSIZE(d)) < 0) return -1;
    PyObject *shape = PyObject_GetAttr(x, s_shape);
    int rc = key_tuple(k, shape);
    Py_XDECREF(shape);
    PyObject *strides = rc < 0 ? NULL : PyObject_GetAttr(x, s_strides);
    rc = rc < 0 ? -1 : key_tuple(k, strides);
    Py_XDECREF(strides);
    PyObject *mem = rc < 0 ? NULL : PyObject_GetAttr(x, s_data);
    if (PyErr_Occurred()) drop_error();
    if (!mem) return -1;
    rc = int_of(mem, s_ptr, 0, &p) < 0 || int_of(mem, s_device_id, 0, device) < 0 ? -1 : 0;
    Py_DECREF(mem);
    if (rc < 0) return -1;
    *ptr = (uint64_t)p;
    return put(k, *device) < 0 || put(k, (int64_t)(*ptr & 15)) < 0 ? -1 : 0;
#else
    (void)k; (void)x; (void)dtype; (void)device; (void)ptr;
    return -1;
#endif
}

static PyObject *cupy_call(PyObject *const *args, Py_ssize_t nargs, PyObject *x) {
    Key k;
    PyObject *dtype = NULL, *result = NULL;
    int64_t device, dst;
    uint64_t ptr;
    if (key_head(&k, KIND_CUPY, args[0], args + 2, nargs - 2) < 0 || cupy_key(&k, x, &dtype, &device, &ptr) < 0) {
        Py_XDECREF(dtype);
        Py_RETURN_NONE;
    }
    Entry *e = lookup(&k);
    if (!e || !equals(PyObject_CallNoArgs(c_device), device)) {
        Py_XDECREF(e);
        Py_DECREF(dtype);
        Py_RETURN_NONE;
    }
    PyObject *out = PyObject_CallFunctionObjArgs(c_empty, e->shape, dtype, NULL);
    Py_DECREF(dtype);
    if (!out) {                                    /* the pool's error (out of memory) */
        result = allocation_failed();
        goto done;
    }
    if (output_address(e, out, 0, &dst) < 0) {
        Py_DECREF(out);
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    uint64_t stream;
    if (stream_of(PyObject_CallNoArgs(c_stream), &stream) < 0 || launch(e, ptr - e->origin, (uint64_t)dst, stream) < 0) {
        Py_DECREF(out);
        goto done;
    }
    result = out;
    hits++;
done:
    Py_DECREF(e);
    return result;
}

/* -- NumPy arrays ------------------------------------------------------------------------------------ */

#ifdef ODML_NUMPY
static int numpy_key(Key *k, PyArrayObject *x) {
    if (!PyArray_ISNOTSWAPPED(x)) return -1;
    int nd = PyArray_NDIM(x);
    if (nd > MAX_RANK || put(k, PyArray_TYPE(x)) < 0 || put(k, PyArray_ITEMSIZE(x)) < 0 || put(k, nd) < 0) return -1;
    for (int i = 0; i < nd; i++)
        if (put(k, PyArray_DIM(x, i)) < 0) return -1;
    for (int i = 0; i < nd; i++)
        if (put(k, PyArray_STRIDE(x, i)) < 0) return -1;
    return 0;
}

static int run_kernel(Entry *e, char *dst, const char *src, const char **error) {
    /* the caller's reference keeps e alive while the GIL is released */
    int status, release = e->out_bytes >= RELEASE_BYTES;
    PyThreadState *ts = release ? PyEval_SaveThread() : NULL;
    status = odml_run_kernel(e->kernel, dst, src, &e->p, e->threads, error);
    if (release) PyEval_RestoreThread(ts);
    return status;
}

/* e's kernel from the array whose element 0 is at `data` into a new NumPy
 * array of `dtype` (an output block where large enough, as CpuBackend.empty
 * does). */
static PyObject *cpu_run(Entry *e, PyArray_Descr *dtype, uintptr_t data) {
    npy_intp dims[MAX_RANK];
    for (int i = 0; i < e->rank; i++) dims[i] = (npy_intp)e->dims[i];
    PyObject *out;
    int fresh = 1;
    Py_INCREF(dtype);
    if (e->use_blocks && e->out_bytes <= odml_block_cache_max()) {
        char *mem;
        PyObject *block = odml_block_new((Py_ssize_t)e->out_bytes, &mem, &fresh);
        if (!block) {
            Py_DECREF(dtype);
            return NULL;
        }
        out = PyArray_NewFromDescr(&PyArray_Type, dtype, e->rank, dims, NULL, mem,
                                   NPY_ARRAY_CARRAY, NULL);
        if (!out) {
            Py_DECREF(block);
        } else if (PyArray_SetBaseObject((PyArrayObject *)out, block) < 0) {   /* steals block */
            Py_CLEAR(out);
        }
    } else {
        out = PyArray_NewFromDescr(&PyArray_Type, dtype, e->rank, dims, NULL, NULL, 0, NULL);
    }
    if (!out) return NULL;
    char *dst = PyArray_BYTES((PyArrayObject *)out);
    if (fresh && e->prefault)                      /* as numpy_adapter.run: fault pages in before threads write */
        for (int64_t i = 0; i < e->out_bytes; i += PAGE) dst[i] = 0;
    const char *src = (const char *)(data - (uintptr_t)e->origin), *error = NULL;
    int status = run_kernel(e, dst, src, &error);
    if (status == ODML_OK) return out;
    Py_DECREF(out);
    if (status == ODML_ENOMEM) return PyErr_NoMemory();
    PyErr_Format(PyExc_ValueError, "opendml call cache: %s", error ? error : "bad kernel parameters");
    return NULL;
}

static PyObject *numpy_call(PyObject *const *args, Py_ssize_t nargs, PyArrayObject *x) {
    Key k;
    if (key_head(&k, KIND_NUMPY, args[0], args + 2, nargs - 2) < 0 || numpy_key(&k, x) < 0) Py_RETURN_NONE;
    Entry *e = lookup(&k);
    if (!e) Py_RETURN_NONE;
    /* the output takes x's own dtype object, as the Python route does (a
     * dtype with metadata or fields keys like its plain type) */
    PyObject *out = cpu_run(e, PyArray_DESCR(x), (uintptr_t)PyArray_BYTES(x));
    Py_DECREF(e);
    if (out) hits++;
    else if (PyErr_ExceptionMatches(PyExc_MemoryError)) out = allocation_failed();
    return out;
}
#endif

/* -- Python functions ------------------------------------------------------------------------------- */

/* `result`, or NULL with the deferred exception raised where a hook met one. */
static PyObject *with_deferred(PyObject *result) {
    if (!deferred) return result;
    Py_XDECREF(result);
    if (PyErr_Occurred()) PyErr_Clear();
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(deferred);
#else
    PyErr_Restore(deferred, deferred_value, deferred_tb);
    deferred_value = deferred_tb = NULL;
#endif
    deferred = NULL;
    return NULL;
}

/* A served family call's result from its outputs (moved out of outs[]):
 * the list of them for SPLIT (multi), else the one; NULL with an exception. */
static PyObject *take_outputs(PyObject **outs, int n, int multi) {
    PyObject *result;
    if (!multi) {
        result = outs[0];
        outs[0] = NULL;
        return result;
    }
    result = PyList_New(n);
    if (!result) return NULL;
    for (int i = 0; i < n; i++) {
        PyList_SET_ITEM(result, i, outs[i]);
        outs[i] = NULL;
    }
    return result;
}

/* -- The data-movement family: move programs on NumPy arrays ------------------------------------------ */

/* A family call (dml.identity, cast, pad, join, split, tile, space_to_depth,
 * depth_to_space) on exact NumPy arrays: N inputs (join takes a list or
 * tuple of arrays), M outputs (split returns a list), the move program's
 * passes (move.h) as the recorded work. The key: KIND_MOVE, the operator,
 * each argument (key_move_arg: besides key_arg's, exact floats by their
 * bits, bools, short ASCII strings by content, static types such as
 * numpy.float16, NumPy's builtin dtype objects and members of the enum types
 * family.py registers, each by identity; nothing else), then the inputs
 * (one array, or a sequence and its length) with their dtype, shape and
 * byte strides. call_cache_put_move checks every pass against the buffers it
 * will be given (the outputs' sizes, each input's element span, the element
 * sizes of the pass's types) and refuses what does not fit, so a bad record
 * cannot make a later call read or write outside a buffer. */

#define MAX_MOVE_IO 16
#define MAX_MOVE_PASSES 64
#define MAX_STR 32

typedef struct {
    int fill, src, dst, threads;
    odml_cpu_move_params p;
    odml_move_prepared *prep;               /* p checked and laid out once (move.h) */
} MovePass;

typedef struct {
    PyObject_HEAD
    int n_in, n_out, n_pass, multi;
    int64_t origin[MAX_MOVE_IO];            /* per input: bytes from its data pointer back to element 0 */
    PyObject *dtype[MAX_MOVE_IO];           /* per output: its PyArray_Descr */
    int rank[MAX_MOVE_IO], use_blocks[MAX_MOVE_IO];
    int64_t dims[MAX_MOVE_IO][MAX_RANK], bytes[MAX_MOVE_IO], total;
    MovePass *passes;
    int64_t *key;                           /* the key's words, for the front table */
    int key_n;
} MoveEntry;

/* The front table: recent move entries by a cheap hash of their key words
 * (strong references), checked before the dict, whose bytes key costs an
 * allocation and a SipHash per call. Emptied with the dict. */
#define FRONT 256
static MoveEntry *front[FRONT];

static unsigned front_slot(const Key *k) {
    uint64_t h = 0x243f6a8885a308d3ull;
    for (int i = 0; i < k->n; i++) h = (h ^ (uint64_t)k->w[i]) * 0x9e3779b97f4a7c15ull;
    return (unsigned)(h >> 56);
}

static int same_words(const int64_t *a, const int64_t *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

static void front_clear(void) {
    for (int i = 0; i < FRONT; i++) Py_CLEAR(front[i]);
}

static void MoveEntry_dealloc(MoveEntry *e) {
    for (int i = 0; i < MAX_MOVE_IO; i++) Py_XDECREF(e->dtype[i]);
    if (e->passes)
        for (int i = 0; i < e->n_pass; i++) odml_move_free(e->passes[i].prep);
    PyMem_Free(e->passes);
    PyMem_Free(e->key);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

static PyTypeObject MoveEntryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "opendml.runtime.cpu._native.MoveCallEntry",
    .tp_basicsize = sizeof(MoveEntry),
    .tp_dealloc = (destructor)MoveEntry_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One call-cache entry of the data-movement family (see calls.c).",
};

static PyObject *move_types;            /* a tuple of enum types whose members key by identity */

/* DataType values 1..11 -> element bytes (model/data_type.py, convert.h). */
static const int move_type_size[12] = {0, 4, 2, 4, 2, 1, 4, 2, 1, 8, 8, 8};

/* A family argument (see above); -1: no key. */
static int key_move_arg(Key *k, PyObject *a) {
    int64_t v;
    if (a == Py_None || PyLong_CheckExact(a) || PyList_CheckExact(a) || PyTuple_CheckExact(a)) return key_arg(k, a);
    if (a == Py_True || a == Py_False) return put(k, 4) < 0 ? -1 : put(k, a == Py_True);
    if (PyFloat_CheckExact(a)) {
        double d = PyFloat_AS_DOUBLE(a);
        memcpy(&v, &d, 8);                   /* the bits: -0.0 and NaN payloads stay apart */
        return put(k, 3) < 0 ? -1 : put(k, v);
    }
    if (PyUnicode_CheckExact(a)) {
        if (!PyUnicode_IS_COMPACT_ASCII(a)) return -1;
        Py_ssize_t n = PyUnicode_GET_LENGTH(a);
        const char *s = (const char *)PyUnicode_DATA(a);
        if (n > MAX_STR || put(k, 5) < 0 || put(k, n) < 0) return -1;
        for (Py_ssize_t i = 0; i < n; i += 8) {
            v = 0;
            memcpy(&v, s + i, (size_t)(n - i < 8 ? n - i : 8));
            if (put(k, v) < 0) return -1;
        }
        return 0;
    }
    /* static types (numpy.float16, float) are immutable and never freed */
    if (PyType_Check(a) && !(((PyTypeObject *)a)->tp_flags & Py_TPFLAGS_HEAPTYPE))
        return put(k, 6) < 0 ? -1 : put(k, (int64_t)(intptr_t)a);
#ifdef ODML_NUMPY
    if (numpy_ready && PyArray_DescrCheck(a)) {   /* only NumPy's own immortal dtype of a number type */
        int num = ((PyArray_Descr *)a)->type_num;
        if (!PyTypeNum_ISNUMBER(num)) return -1;
        PyArray_Descr *builtin = PyArray_DescrFromType(num);
        if (!builtin) {
            drop_error();
            return -1;
        }
        int same = (PyObject *)builtin == a;
        Py_DECREF(builtin);
        return !same || put(k, 7) < 0 ? -1 : put(k, (int64_t)(intptr_t)a);
    }
#endif
    /* enum members: kept alive by their class, which move_types holds */
    if (move_types)
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(move_types); i++)
            if ((PyObject *)Py_TYPE(a) == PyTuple_GET_ITEM(move_types, i))
                return put(k, 8) < 0 ? -1 : put(k, (int64_t)(intptr_t)a);
    return -1;
}

#ifdef ODML_NUMPY
enum { KIND_MOVE = 4 };

/* The key of a family call: operator, arguments, then the inputs (x: one
 * exact ndarray, or an exact list or tuple of 1..MAX_MOVE_IO of them), which
 * are stored in `in` (borrowed). -1: no key. */
static int move_key(Key *k, PyObject *op, PyObject *x, PyObject *const *args, Py_ssize_t nargs, PyArrayObject **in,
                    int *n_in) {
    int64_t o;
    k->n = 0;
    if (exact_int(op, &o) < 0 || put(k, KIND_MOVE) < 0 || put(k, o) < 0 || put(k, nargs) < 0) return -1;
    for (Py_ssize_t i = 0; i < nargs; i++)
        if (key_move_arg(k, args[i]) < 0) return -1;
    if (Py_TYPE(x) == &PyArray_Type) {
        in[0] = (PyArrayObject *)x;
        *n_in = 1;
        return put(k, -1) < 0 ? -1 : numpy_key(k, in[0]);
    }
    if (!PyList_CheckExact(x) && !PyTuple_CheckExact(x)) return -1;
    Py_ssize_t n = PyList_CheckExact(x) ? PyList_GET_SIZE(x) : PyTuple_GET_SIZE(x);
    PyObject **items = PyList_CheckExact(x) ? ((PyListObject *)x)->ob_item : ((PyTupleObject *)x)->ob_item;
    if (n < 1 || n > MAX_MOVE_IO || put(k, -2) < 0 || put(k, n) < 0) return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (Py_TYPE(items[i]) != &PyArray_Type) return -1;
        in[i] = (PyArrayObject *)items[i];
        if (numpy_key(k, in[i]) < 0) return -1;
    }
    *n_in = (int)n;
    return 0;
}

/* A new C-contiguous output (an output block where large enough, as
 * CpuBackend.empty gives), its data in *data; NULL with an exception. */
static PyObject *new_output(PyArray_Descr *dtype, int rank, const int64_t *dims64, int64_t bytes, int use_blocks,
                            char **data) {
    npy_intp dims[MAX_RANK];
    PyObject *out;
    for (int i = 0; i < rank; i++) dims[i] = (npy_intp)dims64[i];
    Py_INCREF(dtype);
    if (use_blocks && bytes <= odml_block_cache_max()) {
        char *mem;
        int fresh;
        PyObject *block = odml_block_new((Py_ssize_t)bytes, &mem, &fresh);
        if (!block) {
            Py_DECREF(dtype);
            return NULL;
        }
        out = PyArray_NewFromDescr(&PyArray_Type, dtype, rank, dims, NULL, mem, NPY_ARRAY_CARRAY, NULL);
        if (!out) Py_DECREF(block);
        else if (PyArray_SetBaseObject((PyArrayObject *)out, block) < 0) Py_CLEAR(out);   /* steals block */
    } else {
        out = PyArray_NewFromDescr(&PyArray_Type, dtype, rank, dims, NULL, NULL, 0, NULL);
    }
    if (out) *data = PyArray_BYTES((PyArrayObject *)out);
    return out;
}

static PyObject *move_call(PyObject *const *args, Py_ssize_t nargs) {
    Key k;
    PyArrayObject *in[MAX_MOVE_IO];
    PyObject *outs[MAX_MOVE_IO] = {NULL}, *result = NULL;
    char *dsts[MAX_MOVE_IO];
    const char *srcs[MAX_MOVE_IO];
    int n_in = 0, status = ODML_OK;
    if (move_key(&k, args[0], args[1], args + 2, nargs - 2, in, &n_in) < 0) Py_RETURN_NONE;
    /* the inputs stay alive whatever the call meets (a finalizer emptying the list, the GIL released) */
    for (int i = 0; i < n_in; i++) Py_INCREF(in[i]);
    MoveEntry *e = NULL;
    unsigned slot = front_slot(&k);
    if (front[slot] && front[slot]->key_n == k.n && same_words(front[slot]->key, k.w, k.n)) {
        e = front[slot];
        Py_INCREF(e);
    } else {
        PyObject *kb = PyBytes_FromStringAndSize((const char *)k.w, (Py_ssize_t)k.n * 8);
        PyObject *hit = kb ? PyDict_GetItemWithError(table, kb) : NULL;
        Py_XDECREF(kb);
        if (!hit || Py_TYPE(hit) != &MoveEntryType || ((MoveEntry *)hit)->n_in != n_in) {
            drop_error();
            misses++;
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        e = (MoveEntry *)hit;
        Py_INCREF(e);
        Py_INCREF(e);
        Py_XSETREF(front[slot], e);
    }
    for (int i = 0; i < e->n_out; i++) {
        outs[i] = new_output((PyArray_Descr *)e->dtype[i], e->rank[i], e->dims[i], e->bytes[i], e->use_blocks[i],
                             &dsts[i]);
        if (!outs[i]) {                            /* the Python route allocates again and raises */
            result = allocation_failed();
            goto done;
        }
    }
    for (int i = 0; i < n_in; i++) srcs[i] = PyArray_BYTES(in[i]) - e->origin[i];
    {
        int release = e->total >= RELEASE_BYTES;
        PyThreadState *ts = release ? PyEval_SaveThread() : NULL;
        for (int i = 0; i < e->n_pass && status == ODML_OK; i++) {
            const MovePass *p = &e->passes[i];
            status = odml_move_run(p->prep, dsts[p->dst], p->fill ? dsts[p->dst] : srcs[p->src]);
        }
        if (release) PyEval_RestoreThread(ts);
    }
    if (status != ODML_OK) {                       /* the Python route runs it again and raises its own error */
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    result = take_outputs(outs, e->n_out, e->multi);
    if (!result) goto done;
    hits++;
done:
    for (int i = 0; i < MAX_MOVE_IO; i++) Py_XDECREF(outs[i]);
    for (int i = 0; i < n_in; i++) Py_DECREF(in[i]);
    Py_XDECREF(e);
    return result;
}

/* The element indices a pass reaches on one side: offset + sum(i * stride)
 * for i in [0, extent) per axis, in [*lo, *hi]; -1 beyond 2^58 anywhere
 * (the sums then stay far inside int64). */
static int move_span(int rank, int64_t offset, const int64_t *extent, const int64_t *strides, int64_t *lo,
                     int64_t *hi) {
    const int64_t lim = (int64_t)1 << 58;
    if (offset < -lim || offset > lim) return -1;
    *lo = *hi = offset;
    for (int a = 0; a < rank; a++) {
        int64_t n = extent[a], s = strides[a], m = s < 0 ? -s : s;
        if (n < 1 || n > lim || s < -lim || s > lim || !odml_mul_le(n - 1, m, lim)) return -1;
        if (s < 0) *lo -= (n - 1) * m;
        else *hi += (n - 1) * m;
    }
    return 0;
}

/* Whether pass p, on inputs of `span` elements of `in_size` bytes and
 * outputs of `count` elements of `out_size` bytes, stays inside them. */
static int move_pass_fits(const MovePass *mp, const int64_t *span, const int *in_size, const int64_t *count,
                          const int *out_size, int n_in, int n_out) {
    const odml_cpu_move_params *p = &mp->p;
    int64_t lo, hi, extent[ODML_CPU_MOVE_MAX_RANK];
    if (p->rank < 1 || p->rank > ODML_CPU_MOVE_MAX_RANK || p->kind != mp->fill || mp->dst < 0 || mp->dst >= n_out ||
        mp->threads < 1 || mp->threads > ODML_MAX_THREADS || p->dst_type < 1 || p->dst_type > 11 ||
        move_type_size[p->dst_type] != out_size[mp->dst])
        return 0;
    for (int a = 0; a < p->rank; a++) {
        if (p->sizes[a] == 0) return 1;              /* nothing is touched */
        if (p->dst_strides[a] < 0) return 0;
    }
    if (move_span((int)p->rank, p->dst_offset, p->sizes, p->dst_strides, &lo, &hi) < 0 || lo < 0 ||
        hi >= count[mp->dst])
        return 0;
    if (mp->fill) return 1;
    if (mp->src < 0 || mp->src >= n_in || p->src_type < 1 || p->src_type > 11 ||
        move_type_size[p->src_type] != in_size[mp->src])
        return 0;
    for (int a = 0; a < p->rank; a++) {
        if (p->map_mode[a] < 0 || p->map_mode[a] > ODML_MAP_WRAP) return 0;
        extent[a] = p->map_mode[a] ? p->map_size[a] : p->sizes[a];
    }
    return move_span((int)p->rank, p->src_offset, extent, p->src_strides, &lo, &hi) == 0 && lo >= 0 &&
           hi < span[mp->src];
}

/* An input's element 0 (its lowest-addressed element) as bytes back from its
 * data pointer, and its span in elements; -1 where a stride is not a whole
 * number of elements (the route copies such an array first). */
static int input_layout(PyArrayObject *x, int64_t *origin, int64_t *span) {
    int64_t es = PyArray_ITEMSIZE(x), back = 0, reach = 0;
    *span = 0;
    for (int i = 0; i < PyArray_NDIM(x); i++)
        if (PyArray_DIM(x, i) == 0) {
            *origin = 0;
            return 0;
        }
    for (int i = 0; i < PyArray_NDIM(x); i++) {
        int64_t n = PyArray_DIM(x, i), s = PyArray_STRIDE(x, i);
        if (es <= 0 || s % es) return -1;
        if (!odml_mul_le(n - 1, s < 0 ? -s : s, (int64_t)1 << 58)) return -1;
        if (s < 0) back += (n - 1) * -s;
        else reach += (n - 1) * s;
    }
    *origin = back;
    *span = (back + reach) / es + 1;
    return 0;
}

static int int64_item(PyObject *seq, Py_ssize_t i, int64_t *v) {
    long long x = PyLong_AsLongLong(PyTuple_GET_ITEM(seq, i));
    if (x == -1 && PyErr_Occurred()) return -1;
    *v = x;
    return 0;
}

#define PUT_MOVE_FAIL(msg) do { PyErr_SetString(PyExc_ValueError, "call_cache_put_move: " msg); goto fail; } while (0)

/* call_cache_put_move(op, x, args, outs, origins, passes, multi, generation): outs a tuple of (shape, dtype,
 * use_blocks) per output, origins one int per input (bytes from its data pointer back to element 0 of the
 * range the passes read), passes a tuple of (fill, src, dst, params, threads) run in order; whether stored.
 * False (nothing stored) where the call has no key, the cache is off or was dropped since `generation`, or a
 * pass would reach outside the buffers; ValueError for a malformed record. */
static PyObject *put_move(PyObject *args) {
    PyObject *op, *x, *call_args, *outs, *origins, *passes;
    int multi;
    unsigned long long gen;
    Key k;
    PyArrayObject *in[MAX_MOVE_IO];
    int n_in, in_size[MAX_MOVE_IO], out_size[MAX_MOVE_IO];
    int64_t span[MAX_MOVE_IO], count[MAX_MOVE_IO];
    if (!PyArg_ParseTuple(args, "OOO!O!O!O!pK", &op, &x, &PyTuple_Type, &call_args, &PyTuple_Type, &outs,
                          &PyTuple_Type, &origins, &PyTuple_Type, &passes, &multi, &gen))
        return NULL;
    if (!enabled || gen != generation || !numpy_ready ||
        move_key(&k, op, x, ((PyTupleObject *)call_args)->ob_item, PyTuple_GET_SIZE(call_args), in, &n_in) < 0) {
        if (PyErr_Occurred()) drop_error();
        Py_INCREF(Py_False);
        return with_deferred(Py_False);
    }
    Py_ssize_t n_out = PyTuple_GET_SIZE(outs), n_pass = PyTuple_GET_SIZE(passes);
    if (n_out < 1 || n_out > MAX_MOVE_IO || PyTuple_GET_SIZE(origins) != n_in || n_pass > MAX_MOVE_PASSES) {
        PyErr_SetString(PyExc_ValueError, "call_cache_put_move: 1 to 16 outputs, one origin per input and at most "
                        "64 passes are required");
        return NULL;
    }
    /* in[] came from x's items: held while the record is read, which may run
     * Python code (an origin's __index__, a flag's __bool__) that empties x */
    for (int i = 0; i < n_in; i++) Py_INCREF(in[i]);
    PyObject *result = NULL;
    MoveEntry *e = PyObject_New(MoveEntry, &MoveEntryType);
    if (!e) goto release;
    memset((char *)e + sizeof(PyObject), 0, sizeof(MoveEntry) - sizeof(PyObject));
    e->n_in = n_in;
    e->n_out = (int)n_out;
    e->n_pass = (int)n_pass;
    e->multi = multi;
    for (int i = 0; i < n_in; i++) {
        int64_t given;
        in_size[i] = (int)PyArray_ITEMSIZE(in[i]);
        if (int64_item(origins, i, &given) < 0) goto fail;
        if (input_layout(in[i], &e->origin[i], &span[i]) < 0 || given != e->origin[i]) goto refuse;
    }
    for (Py_ssize_t i = 0; i < n_out; i++) {
        PyObject *o = PyTuple_GET_ITEM(outs, i), *shape, *dtype;
        int blocks;
        if (!PyTuple_Check(o)) PUT_MOVE_FAIL("each output must be a tuple (shape, dtype, use_blocks)");
        if (!PyArg_ParseTuple(o, "O!Op", &PyTuple_Type, &shape, &dtype, &blocks)) goto fail;
        if (!PyArray_DescrCheck(dtype)) PUT_MOVE_FAIL("an output's dtype must be a NumPy dtype");
        int es = (int)PyDataType_ELSIZE((PyArray_Descr *)dtype), rank = (int)PyTuple_GET_SIZE(shape);
        if ((es != 1 && es != 2 && es != 4 && es != 8) || rank < 1 || rank > MAX_RANK)
            PUT_MOVE_FAIL("an output needs 1 to 8 dimensions and elements of 1, 2, 4 or 8 bytes");
        Py_INCREF(dtype);
        e->dtype[i] = dtype;
        e->rank[i] = rank;
        e->use_blocks[i] = blocks;
        out_size[i] = es;
        count[i] = 1;
        for (int d = 0; d < rank; d++) {
            if (int64_item(shape, d, &e->dims[i][d]) < 0) goto fail;
            if (e->dims[i][d] < 0 || !odml_mul_le(count[i], e->dims[i][d], ODML_LIMIT / 8))
                PUT_MOVE_FAIL("an output's sizes must be >= 0 and its size below 2^59 elements");
            count[i] *= e->dims[i][d];
        }
        e->bytes[i] = count[i] * es;
        e->total += e->bytes[i];
    }
    e->passes = (MovePass *)PyMem_Calloc(n_pass ? (size_t)n_pass : 1, sizeof(MovePass));
    if (!e->passes) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n_pass; i++) {
        MovePass *mp = &e->passes[i];
        Py_buffer pb;
        if (!PyTuple_Check(PyTuple_GET_ITEM(passes, i)))
            PUT_MOVE_FAIL("each pass must be a tuple (fill, src, dst, params, threads)");
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(passes, i), "iiiy*i", &mp->fill, &mp->src, &mp->dst, &pb,
                              &mp->threads))
            goto fail;
        if (pb.len != (Py_ssize_t)sizeof(odml_cpu_move_params)) {
            PyBuffer_Release(&pb);
            PUT_MOVE_FAIL("a pass's parameters must be the bytes of odml_cpu_move_params (move.h)");
        }
        memcpy(&mp->p, pb.buf, sizeof(odml_cpu_move_params));
        PyBuffer_Release(&pb);
        if (!move_pass_fits(mp, span, in_size, count, out_size, n_in, (int)n_out)) goto refuse;
        const char *error = NULL;
        int status = odml_move_prepare(&mp->p, mp->threads, &mp->prep, &error);
        if (status == ODML_ENOMEM) {
            PyErr_NoMemory();
            goto fail;
        }
        if (status != ODML_OK) goto refuse;      /* parameters the kernel itself rejects */
    }
    e->key = (int64_t *)PyMem_Malloc((size_t)k.n * 8);
    if (!e->key) {
        PyErr_NoMemory();
        goto fail;
    }
    memcpy(e->key, k.w, (size_t)k.n * 8);
    e->key_n = k.n;
    int rc = store(&k, (Entry *)e);
    Py_DECREF(e);
    if (rc == 0) {
        result = Py_True;
        Py_INCREF(result);
    }
    goto release;
refuse:
    Py_DECREF(e);
    result = Py_False;
    Py_INCREF(result);
    goto release;
fail:
    Py_DECREF(e);
release:
    for (int i = 0; i < n_in; i++) Py_DECREF(in[i]);
    return result;
}
#endif

/* call_cache_move(op, x, *args): a repeated family call, or None (take the Python route). */
#ifdef ODML_NUMPY
/* A NumPy view of t, a plain PyTorch CPU tensor that neither autograd nor a
 * tracer needs to see (not a negative view); NULL, with no exception left,
 * for anything else. */
static PyObject *torch_view(PyObject *t) {
    if (!t_type || Py_TYPE(t) != (PyTypeObject *)t_type || torch_plain(t) != 1 ||
        is_true(PyObject_CallMethodNoArgs(t, s_is_neg)))
        return NULL;
    PyObject *d = PyObject_CallMethodNoArgs(t, s_detach);
    PyObject *v = d ? PyObject_CallMethodNoArgs(d, s_numpy) : NULL;
    Py_XDECREF(d);
    if (!v || Py_TYPE(v) != &PyArray_Type) {
        Py_XDECREF(v);
        drop_error();
        return NULL;
    }
    return v;
}

#define MAX_MOVE_ARGS 16

/* The family on PyTorch CPU tensors: the NumPy entry, run on views of the
 * tensors (the Python route records it on the same views: the same key),
 * its outputs handed to torch.from_numpy as the Python route does. */
static PyObject *torch_move(PyObject *const *args, Py_ssize_t nargs) {
    PyObject *x = args[1], *view, *call[MAX_MOVE_ARGS], *result;
    if (nargs > MAX_MOVE_ARGS) Py_RETURN_NONE;
    if (PyList_CheckExact(x) || PyTuple_CheckExact(x)) {     /* JOIN's arrays: a tuple of views */
        Py_ssize_t n = PyList_CheckExact(x) ? PyList_GET_SIZE(x) : PyTuple_GET_SIZE(x);
        if (n < 1 || n > MAX_MOVE_IO) Py_RETURN_NONE;
        view = PyTuple_New(n);
        if (!view) return NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            /* re-read the container each time: a view's making may run Python code */
            Py_ssize_t m = PyList_CheckExact(x) ? PyList_GET_SIZE(x) : PyTuple_GET_SIZE(x);
            PyObject *item = i < m ? (PyList_CheckExact(x) ? PyList_GET_ITEM(x, i) : PyTuple_GET_ITEM(x, i)) : NULL;
            PyObject *v = NULL;
            if (item) {
                Py_INCREF(item);
                v = torch_view(item);
                Py_DECREF(item);
            }
            if (!v || m != n) {
                Py_XDECREF(v);
                Py_DECREF(view);
                Py_RETURN_NONE;
            }
            PyTuple_SET_ITEM(view, i, v);
        }
    } else {
        view = torch_view(x);
        if (!view) Py_RETURN_NONE;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) call[i] = args[i];
    call[1] = view;
    result = move_call(call, nargs);
    Py_DECREF(view);
    if (!result || result == Py_None) return result;
    if (PyList_CheckExact(result)) {                          /* SPLIT's outputs */
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(result); i++) {
            PyObject *a = PyList_GET_ITEM(result, i);     /* held: from_numpy runs Python code */
            Py_INCREF(a);
            PyObject *t = PyObject_CallOneArg(t_from_numpy, a);
            Py_DECREF(a);
            if (!t) {
                Py_DECREF(result);
                return NULL;
            }
            PyList_SetItem(result, i, t);                     /* steals t, releases the array */
        }
        return result;
    }
    PyObject *t = PyObject_CallOneArg(t_from_numpy, result);
    Py_DECREF(result);
    return t;
}

/* -- The family on CUDA memory: PyTorch CUDA tensors and CuPy arrays ----------------------------------- */

/* A family call on CUDA memory (arrays/family_cuda.py's route) recorded as
 * what it queued: the kernel launches of its move program (function, grid,
 * parameter structure passed by value; one per pass, or one for a fused
 * padding program), each with its source slot (an input, or -1: a fill,
 * given its destination as its unused source) and destination slot (an
 * output). The key: KIND_MOVE_TORCH or KIND_MOVE_CUPY, the operator, the
 * arguments (key_move_arg), then the inputs as the first five operators'
 * CUDA entries key them (dtype, shape, strides, device, the address's
 * alignment class mod 16), one tensor or a list/tuple of 1..MAX_MOVE_IO; all
 * on one device. A hit (every input a plain tensor of the current device,
 * not a negative view; for PyTorch nothing autograd or a tracer must see)
 * allocates each output through the framework's allocator (x.new_empty(shape,
 * dtype=...) for PyTorch as torch.empty on the tensors' device, cupy's empty
 * for CuPy), refuses an output address outside the alignment class the
 * launches were chosen for, and queues the launches in order on the
 * framework's current stream of that device. The entry holds the backend's
 * Launch objects: they own the parameter structures (copied by each launch,
 * so nothing queued reads the entry) and make a failed launch's retry and
 * error, as the Python route does. */

enum { KIND_MOVE_TORCH = 6, KIND_MOVE_CUPY = 7 };

typedef struct {
    uint64_t function, params;          /* params: host address of the Launch's parameter struct (by value) */
    unsigned grid, block, shared;
    int src, dst;                       /* src -1: a fill */
    PyObject *launch;                   /* the backend's Launch (owns the struct); launch(src, dst, stream) */
} CudaStep;

typedef struct {
    PyObject_HEAD
    int kind, n_in, n_out, n_step, multi;
    int64_t origin[MAX_MOVE_IO];        /* per input: bytes from its data pointer back to element 0 */
    PyObject *shape[MAX_MOVE_IO];       /* per output: its shape (a tuple) */
    PyObject *dtype[MAX_MOVE_IO];       /* per output: its torch.dtype or NumPy dtype */
    unsigned dst_align[MAX_MOVE_IO];    /* per output: its address mod 16 when the launches were chosen */
    CudaStep *steps;
} CudaMoveEntry;

static void CudaMoveEntry_dealloc(CudaMoveEntry *e) {
    for (int i = 0; i < MAX_MOVE_IO; i++) {
        Py_XDECREF(e->shape[i]);
        Py_XDECREF(e->dtype[i]);
    }
    if (e->steps)
        for (int i = 0; i < e->n_step; i++) Py_XDECREF(e->steps[i].launch);   /* by value: released at once */
    PyMem_Free(e->steps);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

static PyTypeObject CudaMoveEntryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "opendml.runtime.cpu._native.CudaMoveCallEntry",
    .tp_basicsize = sizeof(CudaMoveEntry),
    .tp_dealloc = (destructor)CudaMoveEntry_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One call-cache entry of the data-movement family on CUDA memory (see calls.c).",
};

/* The framework of x (one array, or the first of a list or tuple): 1 PyTorch, 2 CuPy, else 0. */
static int cuda_framework(PyObject *x) {
    if (PyList_CheckExact(x) || PyTuple_CheckExact(x)) {
        Py_ssize_t n = PyList_CheckExact(x) ? PyList_GET_SIZE(x) : PyTuple_GET_SIZE(x);
        if (n < 1) return 0;
        x = PyList_CheckExact(x) ? PyList_GET_ITEM(x, 0) : PyTuple_GET_ITEM(x, 0);
    }
    if (t_type && Py_TYPE(x) == (PyTypeObject *)t_type) return 1;
    if (c_type && Py_TYPE(x) == (PyTypeObject *)c_type) return 2;
    return 0;
}

/* x's arrays (one of `type`, or an exact list or tuple of 1..MAX_MOVE_IO of
 * them) as new references in in[], their count in *n, whether a sequence in
 * *seq; -1 (nothing held) where x is not such. No Python code runs between
 * the checks and the copy, so a list changed later cannot mislead the key. */
static int cuda_inputs(PyObject *x, PyTypeObject *type, PyObject **in, int *n, int *seq) {
    if (Py_TYPE(x) == type) {
        Py_INCREF(x);
        in[0] = x;
        *n = 1;
        *seq = 0;
        return 0;
    }
    if (!PyList_CheckExact(x) && !PyTuple_CheckExact(x)) return -1;
    Py_ssize_t m = PyList_CheckExact(x) ? PyList_GET_SIZE(x) : PyTuple_GET_SIZE(x);
    PyObject **items = PyList_CheckExact(x) ? ((PyListObject *)x)->ob_item : ((PyTupleObject *)x)->ob_item;
    if (m < 1 || m > MAX_MOVE_IO) return -1;
    for (Py_ssize_t i = 0; i < m; i++)
        if (Py_TYPE(items[i]) != type) return -1;
    for (Py_ssize_t i = 0; i < m; i++) {
        Py_INCREF(items[i]);
        in[i] = items[i];
    }
    *n = (int)m;
    *seq = 1;
    return 0;
}

/* The key of a family call on CUDA memory, the inputs' addresses in ptr[]
 * and their (one) device in *device; -1: no key (inputs on several devices
 * included). */
static int cuda_move_key(Key *k, int torch, PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject **in,
                         int n, int seq, int64_t *device, uint64_t *ptr) {
    int64_t o, dev;
    k->n = 0;
    if (exact_int(op, &o) < 0 || put(k, torch ? KIND_MOVE_TORCH : KIND_MOVE_CUPY) < 0 || put(k, o) < 0 ||
        put(k, nargs) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < nargs; i++)
        if (key_move_arg(k, args[i]) < 0) return -1;
    if (put(k, seq ? -2 : -1) < 0 || (seq && put(k, n) < 0)) return -1;
    for (int i = 0; i < n; i++) {
        if (torch) {
            if (torch_key(k, in[i], &dev, &ptr[i]) < 0) return -1;
        } else {
            PyObject *dtype = NULL;
            int rc = cupy_key(k, in[i], &dtype, &dev, &ptr[i]);
            Py_XDECREF(dtype);
            if (rc < 0) return -1;
        }
        if (dev < 0 || (i > 0 && dev != *device)) return -1;
        *device = dev;
    }
    return 0;
}

/* Queue one step; on a failed launch the backend's Launch (its retry on a
 * thread without the device's context, its error message) takes over. */
static int cuda_step(const CudaStep *s, uint64_t src, uint64_t dst, uint64_t stream) {
    int rc = odml_cuda_launch(s->function, s->grid, s->block, s->shared, stream, src, dst, s->params);
    if (rc == 0) return 0;
    PyObject *r = PyObject_CallFunction(s->launch, "KKK", (unsigned long long)src, (unsigned long long)dst,
                                        (unsigned long long)stream);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

static PyObject *s_dtype_kw;            /* ("dtype",): new_empty's keyword */

/* A repeated family call on PyTorch CUDA tensors (torch 1) or CuPy arrays
 * (torch 0): its outputs (a list for SPLIT), or None (take the Python route). */
static PyObject *cuda_move(PyObject *const *args, Py_ssize_t nargs, int torch) {
    Key k;
    PyObject *in[MAX_MOVE_IO], *outs[MAX_MOVE_IO] = {NULL}, *result = NULL;
    uint64_t ptr[MAX_MOVE_IO], dsts[MAX_MOVE_IO], stream;
    int64_t device = -1, dst;
    int n = 0, seq = 0;
    CudaMoveEntry *e = NULL;
    if (cuda_inputs(args[1], (PyTypeObject *)(torch ? t_type : c_type), in, &n, &seq) < 0) Py_RETURN_NONE;
    if (torch)
        for (int i = 0; i < n; i++)
            if (torch_plain(in[i]) != 2 || (!tapi && is_true(PyObject_CallMethodNoArgs(in[i], s_is_neg))))
                goto route;
    if (cuda_move_key(&k, torch, args[0], args + 2, nargs - 2, in, n, seq, &device, ptr) < 0) goto route;
    {
        PyObject *kb = PyBytes_FromStringAndSize((const char *)k.w, (Py_ssize_t)k.n * 8);
        PyObject *hit = kb ? PyDict_GetItemWithError(table, kb) : NULL;
        Py_XDECREF(kb);
        if (!hit || Py_TYPE(hit) != &CudaMoveEntryType || ((CudaMoveEntry *)hit)->n_in != n) {
            drop_error();
            misses++;
            goto route;
        }
        e = (CudaMoveEntry *)hit;
        Py_INCREF(e);
    }
    /* the launches need the tensors' device current (the Python route makes it so) */
    if (torch ? !torch_device_is(device) : !equals(PyObject_CallNoArgs(c_device), device)) goto route;
    for (int i = 0; i < e->n_out; i++) {
        int through_python = 1;
        if (torch) {
            outs[i] = tapi_empty(in[0], e->shape[i], e->dtype[i], &dst);
            through_python = !outs[i] && !PyErr_Occurred();
            if (through_python) {
                PyObject *call[3] = {in[0], e->shape[i], e->dtype[i]};
                outs[i] = PyObject_VectorcallMethod(s_new_empty, call, 2, s_dtype_kw);
            }
        } else {
            outs[i] = PyObject_CallFunctionObjArgs(c_empty, e->shape[i], e->dtype[i], NULL);
        }
        if (!outs[i]) {                            /* the allocator's error (out of memory): the route raises */
            result = allocation_failed();
            goto done;
        }
        int rc = 0;
        if (!through_python) {
        } else if (torch) {
            rc = int_of(outs[i], s_data_ptr, 1, &dst);
        } else {
            PyObject *mem = PyObject_GetAttr(outs[i], s_data);
            rc = mem ? int_of(mem, s_ptr, 0, &dst) : -1;
            Py_XDECREF(mem);
            if (PyErr_Occurred()) drop_error();
        }
        if (rc < 0 || ((uint64_t)dst & 15) != e->dst_align[i]) goto route;
        dsts[i] = (uint64_t)dst;
    }
    if (torch) {                                   /* the inputs as keyed, after the allocations (torch_still_keyed) */
        Key again;
        int64_t d2;
        uint64_t p2[MAX_MOVE_IO];
        if (cuda_move_key(&again, torch, args[0], args + 2, nargs - 2, in, n, seq, &d2, p2) < 0 || again.n != k.n ||
            !same_words(again.w, k.w, k.n))
            goto route;
    }
    if (torch) {
        if (torch_stream(device, &stream) < 0) goto done;
    } else if (stream_of(PyObject_CallNoArgs(c_stream), &stream) < 0) {
        goto done;
    }
    for (int i = 0; i < e->n_step; i++) {
        const CudaStep *s = &e->steps[i];
        uint64_t src = s->src >= 0 ? ptr[s->src] - (uint64_t)e->origin[s->src] : dsts[s->dst];
        if (cuda_step(s, src, dsts[s->dst], stream) < 0) goto done;
    }
    result = take_outputs(outs, e->n_out, e->multi);
    if (!result) goto done;
    hits++;
    goto done;
route:
    result = Py_None;
    Py_INCREF(result);
done:
    for (int i = 0; i < MAX_MOVE_IO; i++) Py_XDECREF(outs[i]);
    for (int i = 0; i < n; i++) Py_DECREF(in[i]);
    Py_XDECREF(e);
    return result;
}

static int uint_item(PyObject *t, Py_ssize_t i, unsigned long long *v) {
    *v = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(t, i));
    return *v == (unsigned long long)-1 && PyErr_Occurred() ? -1 : 0;
}

#define PUT_CUDA_MOVE_FAIL(msg) \
    do { PyErr_SetString(PyExc_ValueError, "call_cache_put_move (CUDA): " msg); goto fail; } while (0)

/* call_cache_put_move(op, x, args, outs, origins, steps, multi, generation) with x PyTorch CUDA tensors or CuPy
 * arrays: outs one (shape, dtype, dst_align) per output (dtype a torch.dtype or NumPy dtype; dst_align the
 * output's address mod 16 the launches were chosen for), origins per input the bytes from its data pointer back
 * to element 0 of its bound range, steps one (function, grid, block, shared, params, src, dst, launch) per kernel
 * launch, in order (src -1: a fill; launch the backend's Launch, which owns the parameter structure at the host
 * address params). False (nothing stored) where the call has no key, the cache is off or was dropped since
 * `generation`, or an origin is outside [0, the input's address]; ValueError for a malformed record. */
static PyObject *put_move_cuda(PyObject *args, int torch) {
    PyObject *op, *x, *call_args, *outs, *origins, *steps, *in[MAX_MOVE_IO];
    int multi, n_in = 0, seq = 0;
    unsigned long long gen;
    int64_t device = -1;
    uint64_t ptr[MAX_MOVE_IO];
    Key k;
    CudaMoveEntry *e = NULL;
    if (!PyArg_ParseTuple(args, "OOO!O!O!O!pK", &op, &x, &PyTuple_Type, &call_args, &PyTuple_Type, &outs,
                          &PyTuple_Type, &origins, &PyTuple_Type, &steps, &multi, &gen))
        return NULL;
    if (!enabled || gen != generation ||
        cuda_inputs(x, (PyTypeObject *)(torch ? t_type : c_type), in, &n_in, &seq) < 0) {
        Py_INCREF(Py_False);
        return with_deferred(Py_False);
    }
    if (cuda_move_key(&k, torch, op, ((PyTupleObject *)call_args)->ob_item, PyTuple_GET_SIZE(call_args), in, n_in,
                      seq, &device, ptr) < 0) {
        for (int i = 0; i < n_in; i++) Py_DECREF(in[i]);
        if (PyErr_Occurred()) drop_error();
        Py_INCREF(Py_False);
        return with_deferred(Py_False);
    }
    for (int i = 0; i < n_in; i++) Py_DECREF(in[i]);
    Py_ssize_t n_out = PyTuple_GET_SIZE(outs), n_step = PyTuple_GET_SIZE(steps);
    if (n_out < 1 || PyTuple_GET_SIZE(origins) != n_in) {
        PyErr_SetString(PyExc_ValueError, "call_cache_put_move (CUDA): at least one output and one origin per "
                        "input are required");
        return NULL;
    }
    if (n_out > MAX_MOVE_IO || n_step > MAX_MOVE_PASSES) Py_RETURN_FALSE;   /* (SPLIT into 17): the route serves */
    e = PyObject_New(CudaMoveEntry, &CudaMoveEntryType);
    if (!e) return NULL;
    memset((char *)e + sizeof(PyObject), 0, sizeof(CudaMoveEntry) - sizeof(PyObject));
    e->kind = torch ? KIND_MOVE_TORCH : KIND_MOVE_CUPY;
    e->n_in = n_in;
    e->n_out = (int)n_out;
    e->multi = multi;
    for (int i = 0; i < n_in; i++) {
        if (int64_item(origins, i, &e->origin[i]) < 0) goto fail;
        /* an empty array's layout may give any origin: such a call is simply not recorded */
        if (e->origin[i] < 0 || (uint64_t)e->origin[i] > ptr[i]) {
            Py_DECREF(e);
            Py_RETURN_FALSE;
        }
    }
    for (Py_ssize_t i = 0; i < n_out; i++) {
        PyObject *o = PyTuple_GET_ITEM(outs, i), *shape, *dtype;
        unsigned long long align;
        if (!PyTuple_Check(o)) PUT_CUDA_MOVE_FAIL("each output must be a tuple (shape, dtype, dst_align)");
        if (!PyArg_ParseTuple(o, "O!OK", &PyTuple_Type, &shape, &dtype, &align)) goto fail;
        if (PyTuple_GET_SIZE(shape) > MAX_RANK || align > 15)
            PUT_CUDA_MOVE_FAIL("an output needs at most 8 dimensions and dst_align in [0, 15]");
        for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(shape); d++) {
            int64_t v;
            if (!PyLong_CheckExact(PyTuple_GET_ITEM(shape, d))) PUT_CUDA_MOVE_FAIL("an output's sizes must be ints");
            if (int64_item(shape, d, &v) < 0) goto fail;
            if (v < 0) PUT_CUDA_MOVE_FAIL("an output's sizes must be >= 0");
        }
        if (!torch && !PyArray_DescrCheck(dtype)) PUT_CUDA_MOVE_FAIL("a CuPy output's dtype must be a NumPy dtype");
        Py_INCREF(shape);
        e->shape[i] = shape;
        Py_INCREF(dtype);
        e->dtype[i] = dtype;
        e->dst_align[i] = (unsigned)align;
    }
    e->steps = (CudaStep *)PyMem_Calloc(n_step ? (size_t)n_step : 1, sizeof(CudaStep));
    if (!e->steps) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n_step; i++) {
        PyObject *t = PyTuple_GET_ITEM(steps, i);
        CudaStep *s = &e->steps[i];
        unsigned long long v[5];
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 8)
            PUT_CUDA_MOVE_FAIL("each launch must be a tuple (function, grid, block, shared, params, src, dst, launch)");
        for (int j = 0; j < 5; j++)
            if (uint_item(t, j, &v[j]) < 0) goto fail;
        s->src = PyLong_AsLong(PyTuple_GET_ITEM(t, 5));
        s->dst = PyLong_AsLong(PyTuple_GET_ITEM(t, 6));
        if (PyErr_Occurred()) goto fail;
        PyObject *launch_obj = PyTuple_GET_ITEM(t, 7);
        if (v[0] == 0 || v[1] == 0 || v[1] > 0x7fffffffu || v[2] == 0 || v[2] > 1024 || v[3] > 0xffffffffu ||
            v[4] == 0 || s->src < -1 || s->src >= n_in || s->dst < 0 || s->dst >= n_out ||
            !PyCallable_Check(launch_obj))
            PUT_CUDA_MOVE_FAIL("a launch needs a function, grid in [1, 2^31 - 1], block in [1, 1024], a parameter "
                               "address, src in [-1, inputs), dst in [0, outputs) and a callable launch");
        s->function = v[0];
        s->grid = (unsigned)v[1];
        s->block = (unsigned)v[2];
        s->shared = (unsigned)v[3];
        s->params = v[4];
        Py_INCREF(launch_obj);
        s->launch = launch_obj;
        e->n_step = (int)i + 1;
    }
    int rc = store(&k, (Entry *)e);
    Py_DECREF(e);
    if (rc < 0) return NULL;
    Py_RETURN_TRUE;
fail:
    Py_XDECREF(e);
    return NULL;
}

static int torch_input(PyObject *x) {
    if (!t_type || !t_from_numpy) return 0;
    if (Py_TYPE(x) == (PyTypeObject *)t_type) return 1;
    if (PyList_CheckExact(x)) return PyList_GET_SIZE(x) > 0 && Py_TYPE(PyList_GET_ITEM(x, 0)) == (PyTypeObject *)t_type;
    if (PyTuple_CheckExact(x)) return PyTuple_GET_SIZE(x) > 0 && Py_TYPE(PyTuple_GET_ITEM(x, 0)) == (PyTypeObject *)t_type;
    return 0;
}
#endif

PyObject *odml_py_call_cache_move(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
#ifdef ODML_NUMPY
    if (!enabled || nargs < 2 || !table || !numpy_ready) Py_RETURN_NONE;
    int fw = cuda_framework(args[1]);
    if (fw == 2) return with_deferred(cuda_move(args, nargs, 0));
    if (fw == 1) {                                             /* CUDA tensors by their own entries, CPU ones by views */
        PyObject *first = args[1];
        if (PyList_CheckExact(first) || PyTuple_CheckExact(first))
            first = PyList_CheckExact(first) ? PyList_GET_ITEM(first, 0) : PyTuple_GET_ITEM(first, 0);
        Py_INCREF(first);
        int cuda = is_true(PyObject_GetAttr(first, s_is_cuda));
        Py_DECREF(first);
        if (cuda) return with_deferred(cuda_move(args, nargs, 1));
    }
    if (torch_input(args[1])) return with_deferred(torch_move(args, nargs));
    return with_deferred(move_call(args, nargs));
#else
    (void)args; (void)nargs;
    Py_RETURN_NONE;
#endif
}

PyObject *odml_py_call_cache_put_move(PyObject *self, PyObject *args) {
    (void)self;
#ifdef ODML_NUMPY
    PyObject *x = PyTuple_Check(args) && PyTuple_GET_SIZE(args) > 1 ? PyTuple_GET_ITEM(args, 1) : NULL;
    int fw = x ? cuda_framework(x) : 0;
    if (fw) return put_move_cuda(args, fw == 1);          /* NumPy records come with NumPy arrays (views) */
    return put_move(args);
#else
    (void)args;
    Py_RETURN_FALSE;
#endif
}

/* call_cache_move_types(tuple of types): enum types whose members key family arguments by identity */
PyObject *odml_py_call_cache_move_types(PyObject *self, PyObject *types) {
    (void)self;
    if (!PyTuple_CheckExact(types)) {
        PyErr_SetString(PyExc_TypeError, "call_cache_move_types: a tuple of types is required");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(types); i++)
        if (!PyType_Check(PyTuple_GET_ITEM(types, i))) {
            PyErr_SetString(PyExc_TypeError, "call_cache_move_types: a tuple of types is required");
            return NULL;
        }
    Py_INCREF(types);
    Py_XSETREF(move_types, types);
    drop_all();
    Py_RETURN_NONE;
}

PyObject *odml_py_call_cache_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (!enabled || nargs < 2 || !table) Py_RETURN_NONE;
    PyObject *x = args[1], *result;
    PyTypeObject *type = Py_TYPE(x);
#ifdef ODML_NUMPY
    if (numpy_ready && type == &PyArray_Type) return numpy_call(args, nargs, (PyArrayObject *)x);
#endif
    if (t_type && type == (PyTypeObject *)t_type) result = torch_call(args, nargs, x);
    else if (c_type && type == (PyTypeObject *)c_type) result = cupy_call(args, nargs, x);
    else Py_RETURN_NONE;
    return with_deferred(result);                  /* a KeyboardInterrupt met in a hook is raised now */
}

/* call_cache_packed(code, split, fallback, extra, x, packed) -> the output:
 * a C++ window operator's direct kernel (arrays/torch_inductor.py), what
 * Inductor's wrapper calls instead of the operator. As the operator's kernel
 * (torch_node.cpp, run_op) does: the packed list split back into `split`
 * lists of one length, then the call cache's call (code, x, *lists, *extra)
 * on a PyTorch tensor that neither autograd nor a tracer must see (the
 * operator's Autograd kernel records a tensor that requires grad with grad
 * mode on: that call is the operator's). Every call not served, a list of
 * another length included, is fallback(x, packed), the operator itself. */
PyObject *odml_py_call_cache_packed(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6 || !PyTuple_Check(args[3]) || PyTuple_GET_SIZE(args[3]) > 4) {
        PyErr_SetString(PyExc_TypeError, "call_cache_packed(code, split, fallback, extra, x, packed) takes 6 "
                        "arguments, extra a tuple of at most 4");
        return NULL;
    }
    const Py_ssize_t split = PyLong_AsSsize_t(args[1]);
    if (split == -1 && PyErr_Occurred()) return NULL;
    if (split < 1 || split > 8) {
        PyErr_SetString(PyExc_ValueError, "call_cache_packed: split must be in [1, 8]");
        return NULL;
    }
    PyObject *x = args[4], *packed = args[5], *extra = args[3];
    if (enabled && table && t_type && Py_TYPE(x) == (PyTypeObject *)t_type &&
        (PyList_CheckExact(packed) || PyTuple_CheckExact(packed))) {
        int where = torch_plain(x);
        if (PyErr_Occurred()) {                     /* (torch_plain reads drop theirs; the operator answers) */
            drop_error();
            where = 0;
        }
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(packed), m = n / split;
        if ((where == 1 || where == 2) && n > 0 && n % split == 0) {
            PyObject *argv[2 + 8 + 4];
            Py_ssize_t count = 2, made = 0;
            argv[0] = args[0];
            argv[1] = x;
            /* Every list is allocated first: an allocation may run a garbage
             * collection, and a finalizer may change `packed` (empty it, free
             * its items). The items are copied afterwards, read from packed as
             * it is then, with no Python code run between the read and the
             * copy; a length that changed meanwhile leaves the call to the
             * operator. */
            for (Py_ssize_t j = 0; j < split; j++) {
                PyObject *list = PyList_New(m);
                if (!list) break;
                argv[count++] = list;
                made++;
            }
            PyObject *result = NULL;
            if (made == split && PySequence_Fast_GET_SIZE(packed) == n) {
                PyObject **items = PySequence_Fast_ITEMS(packed);
                for (Py_ssize_t j = 0; j < split; j++)
                    for (Py_ssize_t i = 0; i < m; i++) {
                        Py_INCREF(items[j * m + i]);
                        PyList_SET_ITEM(argv[2 + j], i, items[j * m + i]);
                    }
                for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(extra); i++) argv[count++] = PyTuple_GET_ITEM(extra, i);
                result = with_deferred(torch_serve(argv, count, x, where));
            } else if (made == split) {
                result = Py_None;                   /* (packed changed under us: the operator answers) */
                Py_INCREF(result);
            }
            for (Py_ssize_t j = 0; j < made; j++) Py_DECREF(argv[2 + j]);
            if (!result) return NULL;               /* (an allocation failure: the operator's kernel raises it too) */
            if (result != Py_None) return result;
            Py_DECREF(result);
        }
    }
    PyObject *fargs[2] = {x, packed};
    return PyObject_Vectorcall(args[2], fargs, 2, NULL);
}

static Entry *new_entry(int kind, PyObject *shape) {
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) < 1 || PyTuple_GET_SIZE(shape) > MAX_RANK) {
        PyErr_SetString(PyExc_ValueError, "call cache: the output shape must be a tuple of 1 to 8 ints");
        return NULL;
    }
    Entry *e = PyObject_New(Entry, &EntryType);
    if (!e) return NULL;
    memset((char *)e + sizeof(PyObject), 0, sizeof(Entry) - sizeof(PyObject));
    e->kind = kind;
    e->rank = (int)PyTuple_GET_SIZE(shape);
    for (int i = 0; i < e->rank; i++) {
        e->dims[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        if (e->dims[i] < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "call cache: negative output size");
            Py_DECREF(e);
            return NULL;
        }
    }
    Py_INCREF(shape);
    e->shape = shape;
    return e;
}

/* Whether x's shape and strides are still `planned`, the (shape, strides)
 * tuple the route planned from (strides: x.stride() for a PyTorch tensor,
 * x.strides otherwise), or planned is None: another thread may have changed
 * x in place (x.resize_, x.set_, x.shape = ...) while the route ran, and the
 * entry, keyed by x's layout as read now, must hold a plan for that layout.
 * Read with the GIL held, right before the key is: no Python code runs in
 * between. 0 (no exception) where not. */
static int still_planned(PyObject *x, PyObject *planned, int torch) {
    if (planned == Py_None) return 1;
    if (!PyTuple_Check(planned) || PyTuple_GET_SIZE(planned) != 2) return 0;
    PyObject *shape = PyObject_GetAttr(x, s_shape);
    PyObject *strides = !shape ? NULL : torch ? PyObject_CallMethodNoArgs(x, s_stride) : PyObject_GetAttr(x, s_strides);
    int same = shape && strides && PyObject_RichCompareBool(shape, PyTuple_GET_ITEM(planned, 0), Py_EQ) == 1
               && PyObject_RichCompareBool(strides, PyTuple_GET_ITEM(planned, 1), Py_EQ) == 1;
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    if (PyErr_Occurred()) drop_error();
    return same;
}

/* call_cache_put_numpy(op, x, args, out_shape, dtype, origin_bytes, kernel, params, threads, use_blocks, prefault,
 * generation) */
PyObject *odml_py_call_cache_put_numpy(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *op, *x, *call_args, *shape, *dtype;
    unsigned long long origin;
    const char *kernel;
    Py_buffer params;
    int threads, use_blocks, prefault;
    unsigned long long gen;
    PyObject *planned = Py_None;
    if (!PyArg_ParseTuple(args, "OOO!O!OKsy*ippK|O", &op, &x, &PyTuple_Type, &call_args, &PyTuple_Type, &shape,
                          &dtype, &origin, &kernel, &params, &threads, &use_blocks, &prefault, &gen, &planned))
        return NULL;
    if (!enabled || gen != generation) {
        PyBuffer_Release(&params);
        Py_RETURN_FALSE;
    }
#ifdef ODML_NUMPY
    Key k;
    int which = -1;
    for (int i = 0; i < ODML_KERNEL_COUNT; i++)
        if (!strcmp(kernel, odml_kernel_name[i])) which = i;
    if (!numpy_ready) {
        PyBuffer_Release(&params);
        Py_RETURN_FALSE;
    }
    if (which < 0 || params.len != (Py_ssize_t)odml_kernel_size[which] || !PyArray_DescrCheck(dtype)) {
        PyBuffer_Release(&params);
        PyErr_Format(PyExc_ValueError, "call_cache_put_numpy: unknown kernel %s, a parameter block of the wrong "
                     "size (%zd bytes) or dtype not a NumPy dtype", kernel, params.len);
        return NULL;
    }
    int64_t device;
    uint64_t ptr;
    int kind = Py_TYPE(x) == &PyArray_Type ? KIND_NUMPY
             : t_type && Py_TYPE(x) == (PyTypeObject *)t_type ? KIND_TORCH : 0;
    if (!kind || !still_planned(x, planned, kind == KIND_TORCH) ||
        key_head(&k, kind, op, ((PyTupleObject *)call_args)->ob_item, PyTuple_GET_SIZE(call_args)) < 0 ||
        (kind == KIND_NUMPY ? numpy_key(&k, (PyArrayObject *)x) : torch_key(&k, x, &device, &ptr)) < 0 ||
        (kind == KIND_TORCH && device >= 0)) {
        PyBuffer_Release(&params);
        Py_INCREF(Py_False);
        return with_deferred(Py_False);
    }
    Entry *e = new_entry(kind, shape);
    if (!e) {
        PyBuffer_Release(&params);
        return NULL;
    }
    e->kernel = which;
    e->cpu = 1;
    memcpy(&e->p, params.buf, odml_kernel_size[which]);
    PyBuffer_Release(&params);
    Py_INCREF(dtype);
    e->dtype = dtype;
    e->origin = origin;
    e->threads = threads;
    e->use_blocks = use_blocks;
    e->prefault = prefault;
    e->out_bytes = PyDataType_ELSIZE((PyArray_Descr *)dtype);
    for (int i = 0; i < e->rank; i++) {
        if (!odml_mul_le(e->out_bytes, e->dims[i], ODML_LIMIT)) {
            Py_DECREF(e);
            PyErr_SetString(PyExc_ValueError, "call_cache_put_numpy: the output is too large");
            return NULL;
        }
        e->out_bytes *= e->dims[i];
    }
    int rc = store(&k, e);
    Py_DECREF(e);
    if (rc < 0) return NULL;
    Py_RETURN_TRUE;
#else
    (void)op; (void)x; (void)call_args; (void)shape; (void)dtype; (void)origin; (void)kernel; (void)threads;
    (void)use_blocks; (void)prefault;
    PyBuffer_Release(&params);
    Py_RETURN_FALSE;
#endif
}

/* call_cache_torch_new(op, x, args, kind, fields, generation, kernels, dtype, cpu) -> the output, None, or
 * a kernel name
 *
 * A new shape's route on a PyTorch tensor (issue 19), in one C call: x read
 * through the tensor accessors, the plan of plain_plan's `kind` (0 copy, 1
 * unfold, 2 scatter) and `fields` applied to x's layout (newshape.h), the
 * output allocated by PyTorch (at::empty), the kernel run, and the call
 * recorded as the call cache's entry for (op, args) on x, as the Python
 * route records it (put_numpy, put_cuda), where the cache is on and still
 * in `generation`.
 *
 * On the CPU (x.get_device() == -1), `cpu` is (max_threads, grain_bytes,
 * tile_stride, tile_columns, limit_bytes) of the CPU backend (None: its
 * compiled kernels are off): the kernel, parameters and threads are
 * CpuBackend's for the plan (odml_new_cpu), for outputs below limit_bytes;
 * `dtype` is x's NumPy dtype (what a served call's NumPy output takes). On
 * CUDA, `kernels` maps the device index to a dict of compiled kernels (name
 * -> CUfunction; None: launches are not made natively): the launch is
 * runtime/cuda/backend.py's for the plan (odml_new_cuda, cuda_spec.c), queued
 * on the device's current stream, the device current; a name the dict lacks
 * comes back as a str, nothing run (the caller compiles it and calls again).
 *
 * None, nothing run, wherever the Python route must run the call: no
 * accessors, x not a plain dense tensor of at most 8 dimensions (a wrapper,
 * a dispatch mode, a forward-AD level), another device or another current
 * CUDA device, fields that do not fit x, an output that cannot be allocated
 * (the Python route raises the error that names it), a launch the driver
 * refuses. No rule of DirectML is checked here: the fields come from the
 * operator's plain_lowering, which validated them. */
#ifdef ODML_NUMPY
static PyObject *torch_new_planned(PyObject *const *args, PyObject *fields, const odml_torch_info *pin);

/* The fields of `lowering` (a compiled plain lowering: planner.NATIVE_LOWERING's slice1_lowering or
 * slice_lowering, which run no Python code) for x's sizes as describe read them: what plain_plan gives for
 * them (the same count rule, plain_count: 1 to 8 sizes of 1 to UINT32_MAX elements in all). A new reference
 * to a tuple, or NULL with no exception set where it gives none. */
static PyObject *lowered_fields(PyObject *lowering, PyObject *call_args, const odml_torch_info *in) {
    const Py_ssize_t n_args = PyTuple_GET_SIZE(call_args);
    if (in->ndim < 1 || in->ndim > ODML_MAX_RANK || n_args > 4) return NULL;
    int64_t count = 1;
    for (int i = 0; i < in->ndim; i++)
        if (in->sizes[i] < 0 || __builtin_mul_overflow(count, in->sizes[i], &count)) return NULL;
    if (count < 1 || count > (int64_t)UINT32_MAX) return NULL;
    PyObject *shape = PyTuple_New(in->ndim);
    if (!shape) {
        drop_error();
        return NULL;
    }
    for (int i = 0; i < in->ndim; i++) {
        PyObject *v = PyLong_FromLongLong(in->sizes[i]);
        if (!v) {
            Py_DECREF(shape);
            drop_error();
            return NULL;
        }
        PyTuple_SET_ITEM(shape, i, v);
    }
    PyObject *stack[5];
    stack[0] = shape;
    for (Py_ssize_t i = 0; i < n_args; i++) stack[i + 1] = PyTuple_GET_ITEM(call_args, i);
    PyObject *got = PyObject_Vectorcall(lowering, stack, (size_t)(n_args + 1), NULL);
    Py_DECREF(shape);
    if (!got || !PyTuple_CheckExact(got)) {
        if (PyErr_Occurred()) drop_error();       /* plain_plan calls it again, and raises what it raises */
        Py_XDECREF(got);
        return NULL;
    }
    return got;
}
#endif

/* `fields` may also be a compiled plain lowering (a builtin function, see lowered_fields): C then calls it
 * on x's sizes as it reads them, after the checks above, and returns False (nothing run) where it gives no
 * fields (plain_plan then plans the call and C is called again with its fields). */
PyObject *odml_py_call_cache_torch_new(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "call_cache_torch_new(op, x, args, kind, fields, generation, kernels, dtype, "
                                         "cpu) takes 9 arguments");
        return NULL;
    }
#ifndef ODML_NUMPY
    Py_RETURN_NONE;
#else
    PyObject *x = args[1], *call_args = args[2], *fields = args[4], *descr = args[7];
    int64_t kind, gen;
    odml_torch_info in;
    const int lower = PyCFunction_CheckExact(fields);
    if (!tapi || !numpy_ready || !t_type || Py_TYPE(x) != (PyTypeObject *)t_type || !PyTuple_CheckExact(call_args)
            || !(lower || PyTuple_CheckExact(fields)) || !PyArray_DescrCheck(descr) || exact_int(args[3], &kind) < 0
            || exact_int(args[5], &gen) < 0 || kind < 0 || kind > 2 || tapi->describe(x, &in) != 0
            || in.dispatch_modes || in.wrapped || in.device < -1) {
        if (PyErr_Occurred()) drop_error();
        Py_RETURN_NONE;
    }
    if (!lower) return torch_new_planned(args, fields, &in);
    PyObject *got = lowered_fields(fields, call_args, &in);
    if (!got) Py_RETURN_FALSE;
    PyObject *out = torch_new_planned(args, got, &in);
    Py_DECREF(got);
    return out;
#endif
}

#ifdef ODML_NUMPY
/* Whether x is still as `in` described it (dtype, sizes, strides, data
 * pointer). An allocation may run a garbage collection, whose finalizers may
 * run Python code that changes x (x.resize_(), x.set_()) and frees the
 * storage read before: the plan made from the old description must not run. */
static int torch_still(PyObject *x, const odml_torch_info *in) {
    odml_torch_info now;
    if (tapi->describe(x, &now) != 0 || now.dtype != in->dtype || now.data_ptr != in->data_ptr ||
        now.ndim != in->ndim || now.device != in->device)
        return 0;
    for (int i = 0; i < in->ndim; i++)
        if (now.sizes[i] != in->sizes[i] || now.strides[i] != in->strides[i]) return 0;
    return 1;
}

/* call_cache_torch_new once x is described and the fields are a tuple */
static PyObject *torch_new_planned(PyObject *const *args, PyObject *fields, const odml_torch_info *pin) {
    PyObject *op = args[0], *x = args[1], *call_args = args[2], *kernels = args[6];
    PyObject *descr = args[7], *conf = args[8];
    int64_t kind, gen;
    const odml_torch_info in = *pin;
    if (exact_int(args[3], &kind) < 0 || exact_int(args[5], &gen) < 0) {
        if (PyErr_Occurred()) drop_error();
        Py_RETURN_NONE;
    }
    odml_layout L;
    odml_new_plan pl;
    L.n = in.ndim;
    L.es = (int64_t)PyDataType_ELSIZE((PyArray_Descr *)descr);
    for (int i = 0; i < in.ndim && i < ODML_MAX_RANK; i++) {
        L.shape[i] = in.sizes[i];
        L.strides[i] = in.strides[i];
    }
    int64_t origin_bytes, out_bytes;
    if (odml_new_plan_make((int)kind, &L, ((PyTupleObject *)fields)->ob_item, PyTuple_GET_SIZE(fields), &pl)
            || __builtin_mul_overflow(pl.origin, L.es, &origin_bytes)
            || __builtin_mul_overflow(pl.count, L.es, &out_bytes)) Py_RETURN_NONE;
    /* The entry's key, from the same snapshot the plan was made from: another
     * thread may change x (its shape, its storage) once the GIL is released. */
    Key k;
    const int keyed = key_head(&k, KIND_TORCH, op, ((PyTupleObject *)call_args)->ob_item,
                               PyTuple_GET_SIZE(call_args)) == 0 && torch_key_info(&k, &in) == 0;
    if (PyErr_Occurred()) drop_error();
    PyObject *out = NULL, *fn = NULL;
    uint64_t dst = 0;
    Entry *e = NULL;
    if (in.device == -1) {                         /* the CPU kernel */
        int64_t most, grain, tile_stride, tile_columns, limit;
        odml_cpu_run run;
        if (!PyTuple_CheckExact(conf) || PyTuple_GET_SIZE(conf) != 5 || exact_int(PyTuple_GET_ITEM(conf, 0), &most)
                || exact_int(PyTuple_GET_ITEM(conf, 1), &grain) || exact_int(PyTuple_GET_ITEM(conf, 2), &tile_stride)
                || exact_int(PyTuple_GET_ITEM(conf, 3), &tile_columns) || exact_int(PyTuple_GET_ITEM(conf, 4), &limit)
                || grain < 1 || most < 1 || out_bytes >= limit || odml_new_cpu(&pl, tile_stride, tile_columns, &run)) {
            if (PyErr_Occurred()) drop_error();
            Py_RETURN_NONE;
        }
        const int64_t threads = odml_new_threads(run.work, grain, most);
        if (threads > ODML_MAX_THREADS) Py_RETURN_NONE;
        out = tapi->empty(x, pl.out_dims, pl.out_rank, NULL, &dst);
        if (!out) return allocation_failed();
        if (!torch_still(x, &in)) {               /* (changed by a finalizer: the Python route reads it anew) */
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        e = PyObject_New(Entry, &EntryType);
        if (!e) goto fail;
        memset((char *)e + sizeof(PyObject), 0, sizeof(Entry) - sizeof(PyObject));
        e->kernel = odml_new_kernel((int)kind);
        e->cpu = 1;
        e->threads = (int)threads;
        e->out_bytes = out_bytes;                  /* run_kernel releases the GIL for large outputs */
        memcpy(&e->p, &run.p, (size_t)run.size);
        const char *error = NULL;
        const int status = run_kernel(e, (char *)(uintptr_t)dst, (const char *)(uintptr_t)(in.data_ptr - origin_bytes),
                                      &error);
        if (status != ODML_OK) {
            if (status == ODML_ENOMEM) PyErr_NoMemory();
            else PyErr_Format(PyExc_ValueError, "opendml call cache: %s", error ? error : "bad kernel parameters");
            goto fail;
        }
        Py_INCREF(descr);
        e->dtype = descr;
    } else {                                       /* a CUDA launch */
        /* launches not made natively, or misaligned data (the Python route raises) */
        if (!PyDict_CheckExact(kernels) || in.data_ptr % (uint64_t)L.es) Py_RETURN_NONE;
        PyObject *dev = PyLong_FromLongLong(in.device);
        PyObject *table_of = dev ? PyDict_GetItemWithError(kernels, dev) : NULL;   /* none yet: every name missing */
        Py_XDECREF(dev);
        if (PyErr_Occurred()) {
            drop_error();
            Py_RETURN_NONE;
        }
        if (!torch_device_is(in.device)) Py_RETURN_NONE;   /* the Python route makes the device current */
        out = tapi->empty(x, pl.out_dims, pl.out_rank, NULL, &dst);
        if (!out) return allocation_failed();
        if (!torch_still(x, &in)) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        odml_cuda_spec s;
        const uint64_t src = in.data_ptr - (uint64_t)origin_bytes;
        if (odml_new_cuda(&pl, src, dst, &s)) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        fn = table_of && PyDict_CheckExact(table_of) ? PyDict_GetItemString(table_of, s.name) : NULL;
        if (!fn || !PyLong_CheckExact(fn)) {
            Py_DECREF(out);
            return PyUnicode_FromString(s.name);
        }
        const unsigned long long function = PyLong_AsUnsignedLongLong(fn);
        uint64_t stream;
        if ((function == (unsigned long long)-1 && PyErr_Occurred()) || torch_stream(in.device, &stream) < 0) goto fail;
        if (odml_cuda_launch(function, s.grid, ODML_CUDA_THREADS, s.smem, stream, src, dst, (uint64_t)(uintptr_t)&s.p)) {
            Py_DECREF(out);                        /* nothing queued: the Python route's Launch retries and raises */
            Py_RETURN_NONE;
        }
        e = PyObject_New(Entry, &EntryType);
        if (!e) goto fail;
        memset((char *)e + sizeof(PyObject), 0, sizeof(Entry) - sizeof(PyObject));
        e->kernel = odml_new_kernel((int)kind);
        memcpy(&e->p, &s.p, (size_t)s.size);
        e->params = (uint64_t)(uintptr_t)&e->p;
        e->function = function;
        e->grid = s.grid;
        e->block = ODML_CUDA_THREADS;
        e->shared = s.smem;
        e->dst_align = (unsigned)(dst & 15);
        e->device = in.device;
    }
    /* the entry, as put_numpy and put_cuda store it */
    e->kind = KIND_TORCH;
    e->origin = (uint64_t)origin_bytes;
    e->rank = pl.out_rank;
    memcpy(e->dims, pl.out_dims, sizeof(int64_t) * (size_t)pl.out_rank);
    if (keyed && enabled && (unsigned long long)gen == generation && (e->shape = PyTuple_New(pl.out_rank)) != NULL) {
        for (int i = 0; i < pl.out_rank; i++) {
            PyObject *v = PyLong_FromLongLong(pl.out_dims[i]);
            if (!v) goto fail;
            PyTuple_SET_ITEM(e->shape, i, v);
        }
        if (store(&k, e) < 0) goto fail;
    } else if (PyErr_Occurred()) {
        goto fail;
    }
    Py_DECREF(e);
    return out;
fail:
    Py_XDECREF(e);
    Py_XDECREF(out);
    return NULL;
}
#endif

/* call_cache_numpy_new(op, x, args, kind, fields, generation, cpu) -> the output, or None
 *
 * A new shape's route on a NumPy array (issue 19) in one C call: what
 * copy_window, unfold_window and scatter_window (newshape.c) run, with the
 * record put_numpy would make stored here (where the cache is on and still
 * in `generation`): x an exact, native-order ndarray; `kind` and `fields`
 * plain_plan's (0 copy, 1 unfold, 2 scatter); `cpu` (max_threads,
 * grain_bytes, tile_stride, tile_columns, limit_bytes). None, nothing run,
 * wherever the Python route must run the call (as those functions decline). */
PyObject *odml_py_call_cache_numpy_new(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "call_cache_numpy_new(op, x, args, kind, fields, generation, cpu) takes 7 "
                                         "arguments");
        return NULL;
    }
#ifndef ODML_NUMPY
    Py_RETURN_NONE;
#else
    PyObject *op = args[0], *xo = args[1], *call_args = args[2], *fields = args[4], *conf = args[6];
    int64_t kind, gen, most, grain, tile_stride, tile_columns, limit;
    if (!numpy_ready || Py_TYPE(xo) != &PyArray_Type || !PyTuple_CheckExact(call_args) || !PyTuple_CheckExact(fields)
            || !PyTuple_CheckExact(conf) || PyTuple_GET_SIZE(conf) != 5 || exact_int(args[3], &kind)
            || exact_int(args[5], &gen) || kind < 0 || kind > 2 || exact_int(PyTuple_GET_ITEM(conf, 0), &most)
            || exact_int(PyTuple_GET_ITEM(conf, 1), &grain) || exact_int(PyTuple_GET_ITEM(conf, 2), &tile_stride)
            || exact_int(PyTuple_GET_ITEM(conf, 3), &tile_columns) || exact_int(PyTuple_GET_ITEM(conf, 4), &limit)
            || grain < 1 || most < 1) {
        if (PyErr_Occurred()) drop_error();
        Py_RETURN_NONE;
    }
    PyArrayObject *x = (PyArrayObject *)xo;
    const int n = PyArray_NDIM(x);
    if (!PyArray_ISNOTSWAPPED(x) || n < 1 || n > ODML_MAX_RANK) Py_RETURN_NONE;
    int64_t shape[ODML_MAX_RANK], bstrides[ODML_MAX_RANK];
    for (int i = 0; i < n; i++) {
        shape[i] = (int64_t)PyArray_DIM(x, i);
        bstrides[i] = (int64_t)PyArray_STRIDE(x, i);
    }
    odml_layout L;
    odml_new_plan pl;
    odml_cpu_run run;
    int64_t bytes, origin_bytes;
    if (odml_layout_from_bytes(n, shape, bstrides, (int64_t)PyArray_ITEMSIZE(x), &L)
            || odml_new_plan_make((int)kind, &L, ((PyTupleObject *)fields)->ob_item, PyTuple_GET_SIZE(fields), &pl)
            || odml_new_cpu(&pl, tile_stride, tile_columns, &run) || __builtin_mul_overflow(pl.count, L.es, &bytes)
            || bytes >= limit || __builtin_mul_overflow(pl.origin, L.es, &origin_bytes)) Py_RETURN_NONE;
    const int64_t threads = odml_new_threads(run.work, grain, most);
    if (threads > ODML_MAX_THREADS) Py_RETURN_NONE;
    npy_intp dims[ODML_MAX_RANK];
    for (int i = 0; i < pl.out_rank; i++) dims[i] = (npy_intp)pl.out_dims[i];
    PyArray_Descr *descr = PyArray_DESCR(x);
    Py_INCREF(descr);                              /* PyArray_NewFromDescr steals it */
    PyObject *out = PyArray_NewFromDescr(&PyArray_Type, descr, pl.out_rank, dims, NULL, NULL, 0, NULL);
    if (!out) return allocation_failed();
    Entry *e = PyObject_New(Entry, &EntryType);
    if (!e) {
        Py_DECREF(out);
        return NULL;
    }
    memset((char *)e + sizeof(PyObject), 0, sizeof(Entry) - sizeof(PyObject));
    e->kind = KIND_NUMPY;
    e->cpu = 1;
    e->kernel = odml_new_kernel((int)kind);
    e->threads = (int)threads;
    e->out_bytes = bytes;
    e->origin = (uint64_t)origin_bytes;
    e->rank = pl.out_rank;
    memcpy(e->dims, pl.out_dims, sizeof(int64_t) * (size_t)pl.out_rank);
    memcpy(&e->p, &run.p, (size_t)run.size);
    /* the key from x as planned, before the kernel releases the GIL */
    Key k;
    const int keyed = key_head(&k, KIND_NUMPY, op, ((PyTupleObject *)call_args)->ob_item,
                               PyTuple_GET_SIZE(call_args)) == 0 && numpy_key(&k, x) == 0;
    if (PyErr_Occurred()) drop_error();
    const char *error = NULL;
    const int status = run_kernel(e, PyArray_BYTES((PyArrayObject *)out), PyArray_BYTES(x) - origin_bytes, &error);
    if (status != ODML_OK) {
        Py_DECREF(e);
        Py_DECREF(out);
        if (status == ODML_ENOMEM) return PyErr_NoMemory();
        PyErr_Format(PyExc_ValueError, "opendml call cache: %s", error ? error : "bad kernel parameters");
        return NULL;
    }
    if (keyed && enabled && (unsigned long long)gen == generation && (e->shape = PyTuple_New(pl.out_rank)) != NULL) {
        for (int i = 0; i < pl.out_rank; i++) {
            PyObject *v = PyLong_FromLongLong(pl.out_dims[i]);
            if (!v) goto fail;
            PyTuple_SET_ITEM(e->shape, i, v);
        }
        Py_INCREF(descr);
        e->dtype = (PyObject *)descr;
        if (store(&k, e) < 0) goto fail;
    } else if (PyErr_Occurred()) {
        goto fail;
    }
    Py_DECREF(e);
    return out;
fail:
    Py_DECREF(e);
    Py_DECREF(out);
    return NULL;
#endif
}

/* call_cache_entry(op, x, *args) -> what the entry for this call holds (tests), or None
 *
 * A dict: kind, cpu, kernel, params (the parameter block's bytes), threads,
 * use_blocks, prefault, origin, shape, out_bytes, dtype (CPU entries);
 * function, grid, block, shared, dst_align (CUDA entries). Lets tests check
 * that every route records the same entry. */
PyObject *odml_py_call_cache_entry(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs < 2 || !table) Py_RETURN_NONE;
    Key k;
    int64_t device;
    uint64_t ptr;
    PyObject *x = args[1];
    int rc = -1;
#ifdef ODML_NUMPY
    if (numpy_ready && Py_TYPE(x) == &PyArray_Type)
        rc = key_head(&k, KIND_NUMPY, args[0], args + 2, nargs - 2) < 0 ? -1 : numpy_key(&k, (PyArrayObject *)x);
#endif
    if (rc < 0 && t_type && Py_TYPE(x) == (PyTypeObject *)t_type)
        rc = key_head(&k, KIND_TORCH, args[0], args + 2, nargs - 2) < 0 ? -1 : torch_key(&k, x, &device, &ptr);
    if (PyErr_Occurred()) drop_error();
    if (rc < 0) Py_RETURN_NONE;
    const long long counted = misses;
    Entry *e = lookup(&k);
    misses = counted;                              /* a test's look is not a miss */
    if (!e) Py_RETURN_NONE;
    const char *params = e->cpu || !e->launch ? (const char *)&e->p : (const char *)(uintptr_t)e->params;
    PyObject *d = Py_BuildValue(
        "{s:i,s:i,s:i,s:y#,s:i,s:i,s:i,s:K,s:O,s:L,s:O,s:K,s:I,s:I,s:I,s:I}", "kind", e->kind, "cpu", e->cpu,
        "kernel", e->kernel, "params", params, e->launch && !e->cpu ? (Py_ssize_t)0 : (Py_ssize_t)odml_kernel_size[e->kernel],
        "threads", e->threads, "use_blocks", e->use_blocks, "prefault", e->prefault, "origin",
        (unsigned long long)e->origin, "shape", e->shape ? e->shape : Py_None, "out_bytes", (long long)e->out_bytes,
        "dtype", e->dtype ? e->dtype : Py_None, "function", (unsigned long long)e->function, "grid", e->grid,
        "block", e->block, "shared", e->shared, "dst_align", e->dst_align);
    Py_DECREF(e);
    return d;
}

/* call_cache_cuda_retry(retry): retry(device, function, grid, shared, params bytes, src, dst, stream) queues a
 * launch of an entry call_cache_torch_new made whose launch failed (a thread without the device's context),
 * or raises opendml's error (runtime/cuda/backend.py's relaunch). */
PyObject *odml_py_call_cache_cuda_retry(PyObject *self, PyObject *fn) {
    (void)self;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "call_cache_cuda_retry: a callable is required");
        return NULL;
    }
    Py_INCREF(fn);
    Py_XSETREF(cuda_retry, fn);
    Py_RETURN_NONE;
}

/* call_cache_put_cuda(op, x, args, out_shape, origin_bytes, function, grid, block, shared, params, dst_align, launch,
 * generation) */
PyObject *odml_py_call_cache_put_cuda(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *op, *x, *call_args, *shape, *launch_obj, *dtype = NULL, *planned = Py_None;
    unsigned long long origin, function, params, grid, block, shared, dst_align, gen;
    int64_t device;
    uint64_t ptr;
    Key k;
    if (!PyArg_ParseTuple(args, "OOO!O!KKKKKKKOK|O", &op, &x, &PyTuple_Type, &call_args, &PyTuple_Type, &shape,
                          &origin, &function, &grid, &block, &shared, &params, &dst_align, &launch_obj, &gen, &planned))
        return NULL;
    if (grid == 0 || grid > 0x7fffffffu || block == 0 || block > 1024 || shared > 0xffffffffu || dst_align > 15 ||
        !PyCallable_Check(launch_obj)) {
        PyErr_SetString(PyExc_ValueError, "call_cache_put_cuda: grid in [1, 2^31 - 1], block in [1, 1024], "
                        "dst_align in [0, 15] and a callable launch are required");
        return NULL;
    }
    int kind = t_type && Py_TYPE(x) == (PyTypeObject *)t_type ? KIND_TORCH
             : c_type && Py_TYPE(x) == (PyTypeObject *)c_type ? KIND_CUPY : 0;
    if (!enabled || gen != generation || !kind || !still_planned(x, planned, kind == KIND_TORCH) ||
        key_head(&k, kind, op, ((PyTupleObject *)call_args)->ob_item, PyTuple_GET_SIZE(call_args)) < 0 ||
        (kind == KIND_TORCH ? torch_key(&k, x, &device, &ptr) : cupy_key(&k, x, &dtype, &device, &ptr)) < 0) {
        Py_XDECREF(dtype);
        Py_INCREF(Py_False);
        return with_deferred(Py_False);
    }
    Py_XDECREF(dtype);
    Entry *e = new_entry(kind, shape);
    if (!e) return NULL;
    e->origin = origin;
    e->function = function;
    e->params = params;
    e->grid = (unsigned)grid;
    e->block = (unsigned)block;
    e->shared = (unsigned)shared;
    e->dst_align = (unsigned)dst_align;
    Py_INCREF(launch_obj);
    e->launch = launch_obj;
    int rc = store(&k, e);
    Py_DECREF(e);
    if (rc < 0) return NULL;
    Py_RETURN_TRUE;
}

/* call_cache_put_eager(op, x, args, eager, generation): eager(x) records a
 * call like this one (same operator, arguments, dtype, shape, strides,
 * device) for autograd and runs it. */
PyObject *odml_py_call_cache_put_eager(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *op, *x, *call_args, *eager, *shape;
    unsigned long long gen;
    int64_t device;
    uint64_t ptr;
    Key k;
    if (!PyArg_ParseTuple(args, "OOO!OK", &op, &x, &PyTuple_Type, &call_args, &eager, &gen)) return NULL;
    if (!PyCallable_Check(eager)) {
        PyErr_SetString(PyExc_TypeError, "call_cache_put_eager: eager must be callable");
        return NULL;
    }
    if (!enabled || gen != generation || !t_type || Py_TYPE(x) != (PyTypeObject *)t_type ||
        key_head(&k, KIND_EAGER, op, ((PyTupleObject *)call_args)->ob_item, PyTuple_GET_SIZE(call_args)) < 0 ||
        torch_key(&k, x, &device, &ptr) < 0) {
        Py_INCREF(Py_False);
        return with_deferred(Py_False);
    }
    shape = Py_BuildValue("(i)", 1);
    if (!shape) return NULL;
    Entry *e = new_entry(KIND_EAGER, shape);
    Py_DECREF(shape);
    if (!e) return NULL;
    Py_INCREF(eager);
    e->eager = eager;
    int rc = store(&k, e);
    Py_DECREF(e);
    if (rc < 0) return NULL;
    Py_RETURN_TRUE;
}

/* call_cache_torch_eager(eager_ok): the check an eager entry's call passes first. */
PyObject *odml_py_call_cache_torch_eager(PyObject *self, PyObject *fn) {
    (void)self;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "call_cache_torch_eager: a callable is required");
        return NULL;
    }
    Py_INCREF(fn);
    Py_XSETREF(t_eager_ok, fn);
    drop_all();
    Py_RETURN_NONE;
}

/* Keep the hooks of one framework: its array type, then callables. */
static PyObject *set_hooks(PyObject *args, const char *name, PyObject **slots[], Py_ssize_t n) {
    if (PyTuple_GET_SIZE(args) != n) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments; got %zd", name, n, PyTuple_GET_SIZE(args));
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyTuple_GET_ITEM(args, i);
        if (i == 0 ? !PyType_Check(v) : !PyCallable_Check(v)) {
            PyErr_Format(PyExc_TypeError, "%s: argument %zd must be %s", name, i + 1, i ? "callable" : "a type");
            return NULL;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_INCREF(PyTuple_GET_ITEM(args, i));
        Py_XSETREF(*slots[i], PyTuple_GET_ITEM(args, i));
    }
    drop_all();
    Py_RETURN_NONE;
}

/* call_cache_torch(Tensor, is_grad_enabled, dispatch_stack_len, is_functorch_wrapped, raw_stream, current_device,
 * from_numpy) */
PyObject *odml_py_call_cache_torch(PyObject *self, PyObject *args) {
    (void)self;
    PyObject **slots[] = {&t_type, &t_grad_enabled, &t_dispatch_len, &t_wrapped, &t_raw_stream, &t_device,
                          &t_from_numpy};
    return set_hooks(args, "call_cache_torch", slots, 7);
}

/* call_cache_torch_api(capsule or None): PyTorch's accessors (torch_api.h),
 * given by the C++ node library; None goes back to reading through Python. */
PyObject *odml_py_call_cache_torch_api(PyObject *self, PyObject *arg) {
    (void)self;
    const odml_torch_api *api = NULL;
    if (arg != Py_None) {
        api = (const odml_torch_api *)PyCapsule_GetPointer(arg, ODML_TORCH_API_NAME);
        if (!api) return NULL;
        if (api->version != ODML_TORCH_API_VERSION || !api->describe || !api->empty || !api->current_stream ||
            !api->current_device) {
            PyErr_Format(PyExc_ValueError, "call_cache_torch_api: the accessors are version %d, this extension "
                         "takes version %d", api->version, ODML_TORCH_API_VERSION);
            return NULL;
        }
    }
    Py_XINCREF(arg == Py_None ? NULL : arg);
    Py_XSETREF(tapi_owner, arg == Py_None ? NULL : arg);
    tapi = api;
    Py_RETURN_NONE;
}

/* call_cache_cupy(ndarray, empty, current_device, current_stream_ptr) */
PyObject *odml_py_call_cache_cupy(PyObject *self, PyObject *args) {
    (void)self;
    PyObject **slots[] = {&c_type, &c_empty, &c_device, &c_stream};
    return set_hooks(args, "call_cache_cupy", slots, 4);
}

/* call_cache_graveyard(list): kept for runtime/calls.py; nothing is put there since parameters go by value */
PyObject *odml_py_call_cache_graveyard(PyObject *self, PyObject *list) {
    (void)self;
    if (!PyList_CheckExact(list)) {
        PyErr_SetString(PyExc_TypeError, "call_cache_graveyard: a list is required");
        return NULL;
    }
    Py_INCREF(list);
    Py_XSETREF(graveyard, list);
    Py_RETURN_NONE;
}

PyObject *odml_py_call_cache_clear(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    drop_all();
    Py_RETURN_NONE;
}

PyObject *odml_py_call_cache_generation(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    return PyLong_FromUnsignedLongLong(generation);
}

PyObject *odml_py_call_cache_enable(PyObject *self, PyObject *args) {
    (void)self;
    int flag = -1, old = enabled;
    if (!PyArg_ParseTuple(args, "|p", &flag)) return NULL;
    if (flag >= 0) {
        enabled = flag;
        if (!flag) drop_all();
    }
    return PyBool_FromLong(old);
}

PyObject *odml_py_call_cache_info(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    return Py_BuildValue("{s:O,s:O,s:n,s:L,s:L}", "enabled", enabled ? Py_True : Py_False, "numpy",
                         numpy_ready ? Py_True : Py_False, "entries", table ? PyDict_GET_SIZE(table) : 0, "hits",
                         hits, "misses", misses);
}

int odml_calls_init(void) {
    if (PyType_Ready(&EntryType) < 0 || PyType_Ready(&MoveEntryType) < 0) return -1;
#ifdef ODML_NUMPY
    if (PyType_Ready(&CudaMoveEntryType) < 0 || !(s_dtype_kw = Py_BuildValue("(s)", "dtype"))) return -1;
#endif
    table = PyDict_New();
    if (!table) return -1;
#ifdef ODML_NUMPY
    /* Without NumPy's C API (an incompatible NumPy) the cache serves no NumPy
     * arrays; the module still loads. */
    if (_import_array() < 0) PyErr_Clear();
    else numpy_ready = 1;
#endif
    struct { PyObject **slot; const char *name; } names[] = {
        {&s_detach, "detach"}, {&s_numpy, "numpy"},
        {&s_requires_grad, "requires_grad"}, {&s_is_cuda, "is_cuda"}, {&s_is_cpu, "is_cpu"}, {&s_dtype, "dtype"}, {&s_shape, "shape"},
        {&s_stride, "stride"}, {&s_get_device, "get_device"}, {&s_data_ptr, "data_ptr"}, {&s_is_neg, "is_neg"},
        {&s_new_empty, "new_empty"}, {&s_strides, "strides"}, {&s_data, "data"}, {&s_ptr, "ptr"},
        {&s_device_id, "device_id"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!(*names[i].slot = PyUnicode_InternFromString(names[i].name))) return -1;
    return 0;
}
