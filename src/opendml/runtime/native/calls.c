/* The call cache: a repeated array-API call served from C. What it records, serves and declines (the Python route
 * gives every error and every answer it does not hold): runtime/calls.py's docstring. calls.h: what the files share.
 *
 * Keys are int64 words: array kind, operator, each argument (tagged), dtype, rank, shape, strides, device and
 * alignment. The table, a dict of key bytes to Entry objects, is emptied at MAX_ENTRIES and by call_cache_clear
 * (every configuration change; a put on settings read before the last clear is refused: `generation`). All runs
 * with the GIL held but CPU kernels writing RELEASE_BYTES or more; an entry in use holds a reference, so a clear
 * cannot free it. An error met probing a framework's hooks, or an output the allocator cannot give, sends the call
 * down the Python route (which raises AllocationError); a non-Exception (KeyboardInterrupt) is raised on return.
 *
 * Without NumPy's headers (ODML_NUMPY, set by setup.py) the cache holds nothing: every call takes the Python route. */
#include <stdarg.h>

#include "calls.h"

static void Entry_dealloc(Entry *e) {
    for (int i = 0; e->outs && i < e->n_out; i++) {
        Py_XDECREF(e->outs[i].shape);
        Py_XDECREF(e->outs[i].dtype);
    }
    /* A Launch owns no device memory (its parameters went by value), so it is released with no device
     * synchronisation (which would break a CUDA graph capture). */
    for (int i = 0; e->passes && i < e->n_pass; i++) {
        odml_move_free(e->passes[i].prep);
        Py_XDECREF(e->passes[i].launch);
        PyMem_Free(e->passes[i].index);
    }
    if (e->outs != &e->out1) PyMem_Free(e->outs);
    if (e->passes != &e->pass1) PyMem_Free(e->passes);
    PyMem_Free(e->key);
    Py_XDECREF(e->eager);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

PyTypeObject EntryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "opendml.runtime.cpu._native.CallEntry",
    .tp_basicsize = sizeof(Entry),
    .tp_dealloc = (destructor)Entry_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One call-cache entry (see calls.c).",
};

PyObject *table;                 /* key bytes -> Entry */
int enabled = 1, numpy_ready;
long long hits, misses;
unsigned long long generation;   /* (another thread's configure() meanwhile: the put is refused) */

/* v kept in *slot (a new reference) where ok, None returned; else a TypeError saying `need`. */
static PyObject *keep(PyObject **slot, PyObject *v, int ok, const char *need) {
    if (!ok) {
        PyErr_SetString(PyExc_TypeError, need);
        return NULL;
    }
    Py_INCREF(v);
    Py_XSETREF(*slot, v);
    Py_RETURN_NONE;
}

/* An exception taken out of the error indicator (hold_error: none leaves e NULL) and raised again (raise_held). */
#if PY_VERSION_HEX >= 0x030C0000
typedef struct { PyObject *e; } held_error;
#define hold_error(h) ((h)->e = PyErr_GetRaisedException())
#define raise_held(h) (PyErr_SetRaisedException((h)->e), (h)->e = NULL)
#else
typedef struct { PyObject *e, *value, *tb; } held_error;
#define hold_error(h) PyErr_Fetch(&(h)->e, &(h)->value, &(h)->tb)
#define raise_held(h) (PyErr_Restore((h)->e, (h)->value, (h)->tb), (h)->e = (h)->value = (h)->tb = NULL)
#endif
/* A non-Exception (KeyboardInterrupt, SystemExit) met while a call probed a hook: raised when the call returns. */
static held_error deferred;

void drop_error(void) {
    if (!PyErr_Occurred()) return;
    if (!deferred.e && !PyErr_ExceptionMatches(PyExc_Exception)) hold_error(&deferred);
    else PyErr_Clear();
}

/* PyTorch's and CuPy's hooks, registered by their adapters (call_cache_torch / _cupy). */
PyObject *t_type, *t_grad_enabled, *t_dispatch_len, *t_wrapped, *t_raw_stream, *t_device, *t_from_numpy;
static PyObject *t_eager_ok;            /* eager autograd entries may serve now (no tracer, the node in use) */
PyObject *c_type, *c_empty, *c_device, *c_stream;
#define ODML_NAME(N) PyObject *s_##N;
ODML_NAMES(ODML_NAME)
#undef ODML_NAME

/* -- keys ----------------------------------------------------------------------------------------- */

/* An operator argument: None, an exact int, or a list/tuple of at most MAX_ARG_INTS exact ints (a float must not
 * reuse an int's plan, though 1.0 == 1). -1: no key. */
int key_arg(Key *k, PyObject *a) {
    int64_t v;
    if (a == Py_None) return put(k, 0);
    if (PyLong_CheckExact(a)) {
        if (odml_exact_i64(a, &v) < 0 || put(k, 1) < 0) return -1;
        return put(k, v);
    }
    Py_ssize_t n;
    PyObject **items = seq_items(a, &n);
    if (items) {
        if (n > MAX_ARG_INTS || put(k, 2) < 0 || put(k, n) < 0) return -1;
        for (Py_ssize_t i = 0; i < n; i++)
            if (odml_exact_i64(items[i], &v) < 0 || put(k, v) < 0) return -1;
        return 0;
    }
    return -1;
}

int key_call(Key *k, int kind, PyObject *op, PyObject *const *args, Py_ssize_t nargs) {
    int64_t o;
    k->n = 0;
    if (odml_exact_i64(op, &o) < 0 || put(k, kind) < 0 || put(k, o) < 0 || put(k, nargs) < 0) return -1;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject *a = args[i];
        const int plain = a == Py_None || PyLong_CheckExact(a) || PyList_CheckExact(a) || PyTuple_CheckExact(a);
        if ((plain ? key_arg(k, a) : key_move_arg(k, a)) < 0) return -1;
    }
    return 0;
}

/* r's value (a new reference, or NULL; consumed) where it is an int in 64 bits; -1, no exception left, else. */
static int long_of(PyObject *r, int64_t *v) {
    long long x = r && PyLong_Check(r) ? PyLong_AsLongLong(r) : -1;
    const int rc = r && PyLong_Check(r) && !(x == -1 && PyErr_Occurred()) ? 0 : -1;
    if (rc == 0) *v = x;
    if (PyErr_Occurred()) drop_error();
    Py_XDECREF(r);
    return rc;
}

/* A tuple of at most MAX_RANK ints (sizes or strides): with its length first (n < 0), or of n items. */
static int key_tuple(Key *k, PyObject *t, Py_ssize_t n) {
    int64_t x;
    if (!t || !PyTuple_Check(t) || PyTuple_GET_SIZE(t) > MAX_RANK
            || (n < 0 ? put(k, PyTuple_GET_SIZE(t)) < 0 : PyTuple_GET_SIZE(t) != n))
        return -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++)
        if (long_of(Py_NewRef(PyTuple_GET_ITEM(t, i)), &x) < 0 || put(k, x) < 0) return -1;
    return 0;
}

/* x's strides as its framework gives them (x.stride() for a PyTorch tensor, x.strides otherwise): a new reference,
 * or NULL with an exception. */
static PyObject *strides_of(PyObject *x, int torch) {
    return torch ? PyObject_CallMethodNoArgs(x, s_stride) : PyObject_GetAttr(x, s_strides);
}

/* x's shape and strides (strides_of's) as put_layout's words: 0, or -1 with no exception left. */
static int key_layout(Key *k, PyObject *x, int torch) {
    PyObject *shape = PyObject_GetAttr(x, s_shape);
    int rc = key_tuple(k, shape, -1);
    PyObject *strides = rc < 0 ? NULL : strides_of(x, torch);
    rc = rc < 0 ? -1 : key_tuple(k, strides, PyTuple_GET_SIZE(shape));
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    if (PyErr_Occurred()) drop_error();
    return rc;
}

/* The front table: recent entries by a cheap hash of their key words, checked before the dict (whose bytes key costs
 * an allocation and a SipHash a call); emptied with the dict, a store drops its key's slot. `maybe`: a bit per
 * another part of the hash, set by a store, cleared with the dict (a removed key's stays set), so that a never-seen
 * key misses without the bytes key. */
#define FRONT 256
#define MAYBE_BITS (1u << 15)
static Entry *front[FRONT];
static uint64_t maybe[MAYBE_BITS / 64];

static uint64_t key_hash(const Key *k) {
    /* two chains, so the multiplies overlap (a key has tens of words) */
    uint64_t a = 0x243f6a8885a308d3ull, b = 0x13198a2e03707344ull;
    int i = 0;
    for (; i + 1 < k->n; i += 2) {
        a = (a ^ (uint64_t)k->w[i]) * 0x9e3779b97f4a7c15ull;
        b = (b ^ (uint64_t)k->w[i + 1]) * 0xc2b2ae3d27d4eb4full;
    }
    if (i < k->n) a = (a ^ (uint64_t)k->w[i]) * 0x9e3779b97f4a7c15ull;
    return (a ^ (b >> 7)) * 0x9e3779b97f4a7c15ull;
}

static int may_hold(uint64_t h) {
    const unsigned bit = (unsigned)(h >> 24) & (MAYBE_BITS - 1);
    return (int)(maybe[bit / 64] >> (bit % 64) & 1);
}

int same_words(const int64_t *a, const int64_t *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

/* The dict emptied, its filter first (a store made by code the clearing runs keeps its bit), and the front. */
static void table_clear(void) {
    memset(maybe, 0, sizeof maybe);
    if (table) PyDict_Clear(table);
    for (int i = 0; i < FRONT; i++) Py_CLEAR(front[i]);
}

void drop_all(void) {
    generation++;
    table_clear();
#ifdef ODML_NUMPY
    plain_forget();
#endif
}

Entry *lookup(const Key *k, int n_in) {
    const uint64_t h = key_hash(k);
    const unsigned slot = (unsigned)(h >> 56);
    Entry *e = front[slot];
    if (!e || e->key_n != k->n || !same_words(e->key, k->w, k->n)) {
        if (!may_hold(h)) {
            misses++;
            return NULL;
        }
        PyObject *kb = PyBytes_FromStringAndSize((const char *)k->w, (Py_ssize_t)k->n * 8);
        PyObject *d = kb ? PyDict_GetItemWithError(table, kb) : NULL;
        Py_XDECREF(kb);
        if (!d || Py_TYPE(d) != &EntryType) {
            drop_error();
            misses++;
            return NULL;
        }
        e = (Entry *)Py_NewRef(d);                 /* (ours before an old front entry's release runs anything) */
        if (e->key_n == k->n && same_words(e->key, k->w, k->n)) Py_XSETREF(front[slot], (Entry *)Py_NewRef(e));
    } else {
        Py_INCREF(e);
    }
    if (n_in >= 0 && (e->kind != k->w[0] || e->n_in != n_in)) {
        Py_DECREF(e);
        misses++;
        return NULL;
    }
    return e;
}

int store(const Key *k, Entry *e) {
    if (!e->key) {                                 /* the front table compares the key's words */
        e->key = (int64_t *)PyMem_Malloc((size_t)k->n * 8);
        if (!e->key) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(e->key, k->w, (size_t)k->n * 8);
        e->key_n = k->n;
    }
    PyObject *kb = PyBytes_FromStringAndSize((const char *)k->w, (Py_ssize_t)k->n * 8);
    if (!kb) return -1;
    if (PyDict_GET_SIZE(table) >= MAX_ENTRIES) table_clear();   /* full: not a settings change */
    const uint64_t h = key_hash(k);
    Py_CLEAR(front[h >> 56]);                      /* an entry this one replaces is served no more */
    const unsigned bit = (unsigned)(h >> 24) & (MAYBE_BITS - 1);
    maybe[bit / 64] |= 1ull << (bit % 64);
    int rc = PyDict_SetItem(table, kb, (PyObject *)e);
    Py_DECREF(kb);
    return rc;
}

int store_new(const Key *k, Entry *e) {
    if (!may_hold(key_hash(k))) return store(k, e);
    PyObject *kb = PyBytes_FromStringAndSize((const char *)k->w, (Py_ssize_t)k->n * 8);
    const int has = kb ? PyDict_Contains(table, kb) : -1;
    Py_XDECREF(kb);
    return has < 0 ? -1 : has ? 1 : store(k, e);
}

void unstore(const Key *k, const Entry *e) {
    held_error held;                               /* an exception the caller holds: kept */
    hold_error(&held);
    PyObject *kb = PyBytes_FromStringAndSize((const char *)k->w, (Py_ssize_t)k->n * 8);
    PyObject *now = kb ? PyDict_GetItemWithError(table, kb) : NULL;      /* (borrowed) */
    if (now == (PyObject *)e && PyDict_DelItem(table, kb) == 0) Py_CLEAR(front[key_hash(k) >> 56]);
    if (PyErr_Occurred()) PyErr_Clear();
    Py_XDECREF(kb);
    raise_held(&held);
}

PyObject *stored(const Key *k, Entry *e) {
    const int rc = store(k, e);
    Py_DECREF(e);
    if (rc < 0) return NULL;
    Py_RETURN_TRUE;
}

/* An attribute (with call, a no-argument method) as an int64; -1, no exception left, where it fails or is not one. */
static int int_of(PyObject *o, PyObject *name, int call, int64_t *v) {
    return long_of(call ? PyObject_CallMethodNoArgs(o, name) : PyObject_GetAttr(o, name), v);
}

/* 1 where `r` (a new reference, or NULL) is True, else 0; consumes it. */
int is_true(PyObject *r) {
    if (!r) {
        drop_error();
        return 0;
    }
    int t = r == Py_True;
    Py_DECREF(r);
    return t;
}

/* 1 where the call result (a new reference, or NULL) is the int `want`; consumes it. */
int equals(PyObject *r, int64_t want) {
    int64_t v;
    return long_of(r, &v) == 0 && v == want;
}

/* -- CUDA launches ----------------------------------------------------------------------------------- */

/* Queue pass p of e (a CUDA launch); a failed launch is retried (a thread without the device's context) by the
 * backend's Launch, which raises opendml's error, or, without one, the retry hook. */
static PyObject *cuda_retry;            /* retry(device, function, grid, shared, params, src, dst, stream) */

int launch_pass(const Entry *e, const Pass *p, uint64_t src, uint64_t dst, uint64_t stream) {
    int rc = odml_cuda_launch(p->function, p->grid, p->block, p->shared, stream, src, dst, p->params);
    if (rc == 0) return 0;
    PyObject *r;
    if (p->launch) {
        r = PyObject_CallFunction(p->launch, "KKK", (unsigned long long)src, (unsigned long long)dst,
                                  (unsigned long long)stream);
    } else if (cuda_retry) {
        /* a pass calls_move_new.c recorded: its index_size bytes of parameters at `params` */
        r = PyObject_CallFunction(cuda_retry, "LKIIy#KKK", (long long)e->device, (unsigned long long)p->function,
                                  p->grid, p->shared, (const char *)(uintptr_t)p->params, (Py_ssize_t)p->index_size,
                                  (unsigned long long)src,
                                  (unsigned long long)dst, (unsigned long long)stream);
    } else {
        PyErr_Format(PyExc_RuntimeError, "opendml CUDA: a cached launch failed (CUresult %d)", rc);
        return -1;
    }
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* The output's device address where in the alignment class the launch was chosen for (always, with PyTorch's and
 * CuPy's allocators). */
static int output_address(const Out *o, PyObject *out, int torch, int64_t *dst) {
    int rc;
    if (torch) {
        rc = int_of(out, s_data_ptr, 1, dst);
    } else {
        PyObject *mem = PyObject_GetAttr(out, s_data);
        rc = mem ? int_of(mem, s_ptr, 0, dst) : -1;
        Py_XDECREF(mem);
        if (PyErr_Occurred()) drop_error();
    }
    return rc < 0 || ((uint64_t)*dst & 15) != o->dst_align ? -1 : 0;
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

/* An output the allocator could not give (an Exception): None, the Python route allocates again and raises
 * AllocationError (runtime/alloc.py); NULL, the error kept, for anything else (KeyboardInterrupt). */
PyObject *allocation_failed(void) {
    if (!PyErr_ExceptionMatches(PyExc_Exception)) return NULL;
    PyErr_Clear();
    Py_RETURN_NONE;
}

/* -- PyTorch tensors -------------------------------------------------------------------------------- */

/* PyTorch's accessors (torch_api.h) once call_cache_torch_api gives them; NULL: read through Python. */
const odml_torch_api *tapi;
static PyObject *tapi_owner;
static PyObject *s_dtype_kw;            /* ("dtype",): new_empty's keyword */

/* A key's last words: the device, the address mod 16 (device -1 gets one class: the CPU copy kernels take any
 * alignment, and index_pass declines a misaligned input at run time). */
static int put_device(Key *k, int64_t device, uint64_t ptr) {
    return put(k, device) < 0 || put(k, device < 0 ? 0 : (int64_t)(ptr & 15)) < 0 ? -1 : 0;
}

/* The key words of a tensor the accessors described (torch_key's, below), its device and address. */
static int torch_key_info(Key *k, const odml_torch_info *in, int64_t *device, uint64_t *ptr) {
    *device = in->device;
    *ptr = in->data_ptr;
    if (in->device < -1 || put(k, (int64_t)(intptr_t)in->dtype) < 0
            || put_layout(k, in->ndim, in->sizes, in->strides, 1) < 0)
        return -1;
    return put_device(k, in->device, in->data_ptr);
}

int torch_key(Key *k, PyObject *x, int64_t *device, uint64_t *ptr) {
    int64_t p;
    odml_torch_info in;
    if (tapi && tapi->describe(x, &in) == 0)    /* the same words as below */
        return torch_key_info(k, &in, device, ptr);
    PyObject *dtype = PyObject_GetAttr(x, s_dtype);
    if (!dtype) {
        drop_error();
        return -1;
    }
    const int rc = put(k, (int64_t)(intptr_t)dtype) < 0 ? -1 : key_layout(k, x, 1);  /* (dtypes: immortal singletons) */
    Py_DECREF(dtype);
    if (rc < 0 || int_of(x, s_get_device, 1, device) < 0 || int_of(x, s_data_ptr, 1, &p) < 0) return -1;
    *ptr = (uint64_t)p;
    return put_device(k, *device, *ptr);
}

/* Whether the kernel route may take x, a tensor neither autograd nor a tracer needs to see: 2 on CUDA, 1 on the CPU;
 * 3 where autograd must record the call and an eager entry may serve it; else 0. The accessors' description goes to
 * *in (ndim -1: none), to key x before anything else runs (a 3's check may run Python: its caller keys x again). */
int torch_plain_in(PyObject *x, odml_torch_info *in) {
    if (tapi && tapi->describe(x, in) == 0) {
        /* (wrapped also where the negative bit is set: such a tensor takes the Python route, as below) */
        if (in->dispatch_modes || in->wrapped) return 0;
        if (in->requires_grad && in->grad_enabled)
            return t_eager_ok && is_true(PyObject_CallNoArgs(t_eager_ok)) ? 3 : 0;
        return in->device >= 0 ? 2 : in->device == -1 ? 1 : 0;
    }
    in->ndim = -1;
    int record = is_true(PyObject_GetAttr(x, s_requires_grad)) && is_true(PyObject_CallNoArgs(t_grad_enabled));
    if (!equals(PyObject_CallNoArgs(t_dispatch_len), 0)) return 0;
    if (is_true(PyObject_CallOneArg(t_wrapped, x))) return 0;
    if (record) return t_eager_ok && is_true(PyObject_CallNoArgs(t_eager_ok)) ? 3 : 0;
    return is_true(PyObject_GetAttr(x, s_is_cuda)) ? 2 : is_true(PyObject_GetAttr(x, s_is_cpu)) ? 1 : 0;
}

int torch_plain_key(Key *k, PyObject *x, int64_t *device, uint64_t *ptr) {
    odml_torch_info in;
    if (torch_plain_in(x, &in) != 2 || (!tapi && is_true(PyObject_CallMethodNoArgs(x, s_is_neg)))) return -1;
    return in.ndim < 0 ? torch_key(k, x, device, ptr) : torch_key_info(k, &in, device, ptr);
}

/* A new output of o's shape and `dtype` (NULL: x's): x.new_empty (through the accessors where they take the shape) or
 * CuPy's: a new reference, its address in *dst, *placed where in o's alignment class; NULL with the allocator's
 * error. */
PyObject *cuda_empty(int torch, PyObject *x, const Out *o, PyObject *dtype, int64_t *dst, int *placed) {
    PyObject *out;
    int64_t sizes[MAX_RANK];
    int nd;
    if (torch && tapi && !odml_int_seq(o->shape, MAX_RANK, sizes, &nd)) {   /* (exact ints, as every shape here) */
        uint64_t d = 0;
        out = tapi->empty(x, sizes, nd, dtype, &d);
        *dst = (int64_t)d;
        *placed = out && (d & 15) == o->dst_align;
        return out;
    }
    if (torch && dtype) {
        PyObject *call[3] = {x, o->shape, dtype};
        out = PyObject_VectorcallMethod(s_new_empty, call, 2, s_dtype_kw);
    } else if (torch) {
        out = PyObject_CallMethodOneArg(x, s_new_empty, o->shape);
    } else {
        out = PyObject_CallFunctionObjArgs(c_empty, o->shape, dtype, NULL);
    }
    *placed = out && output_address(o, out, torch, dst) == 0;
    return out;                                     /* (an owner table is zeroed by cuda_entry_launch, on its stream) */
}

/* Whether `device` is PyTorch's (torch) or CuPy's current CUDA device, as the launches need (the route makes it so). */
int cuda_device_is(int torch, int64_t device) {
    if (!torch || !tapi) return equals(PyObject_CallNoArgs(torch ? t_device : c_device), device);
    const int64_t d = tapi->current_device();
    if (d < 0) drop_error();
    return d == device;
}

/* The current stream of CUDA device `device` (torch), or CuPy's: 0, or -1 with an exception. */
int cuda_stream(int torch, int64_t device, uint64_t *stream) {
    if (!torch) return stream_of(PyObject_CallNoArgs(c_stream), stream);
    if (tapi) return tapi->current_stream(device, stream);
    PyObject *dev = PyLong_FromLongLong(device);
    if (!dev) return -1;
    const int rc = stream_of(PyObject_CallOneArg(t_raw_stream, dev), stream);
    Py_DECREF(dev);
    return rc;
}

/* An eager entry's call of x (torch_plain_in 3): its callable records the call with opendml's autograd node and runs
 * the kernel (arrays/torch/adapter.py), for every one-tensor operator; its output, or None. */
PyObject *eager_call(PyObject *const *args, Py_ssize_t nargs, PyObject *x) {
    Key k;
    int64_t device;
    uint64_t ptr;
    if (key_call(&k, KIND_EAGER, args[0], args + 2, nargs - 2) < 0 || torch_key(&k, x, &device, &ptr) < 0)
        Py_RETURN_NONE;
    Entry *e = lookup(&k, -1);
    if (!e) Py_RETURN_NONE;
    PyObject *result = PyObject_CallOneArg(e->eager, x);
    if (result) hits++;
    Py_DECREF(e);
    return result;
}

/* -- NumPy and CuPy arrays (CuPy's dtypes are NumPy's) --------------------------------------------- */

#ifdef ODML_NUMPY
/* A CuPy array's key words (dtype, shape, strides, device, alignment class), its device and address. */
int cupy_key(Key *k, PyObject *x, int64_t *device, uint64_t *ptr) {
    int64_t p;
    PyObject *dtype = numpy_ready ? PyObject_GetAttr(x, s_dtype) : NULL;
    PyArray_Descr *d = (PyArray_Descr *)dtype;
    /* CuPy allows byte-swapped dtypes, which opendml rejects on the Python route */
    int rc = dtype && PyArray_DescrCheck(dtype) && PyArray_ISNBO(d->byteorder) && put(k, d->type_num) == 0
             && put(k, PyDataType_ELSIZE(d)) == 0 ? key_layout(k, x, 0) : -1;
    Py_XDECREF(dtype);
    PyObject *mem = rc < 0 ? NULL : PyObject_GetAttr(x, s_data);
    rc = mem && int_of(mem, s_ptr, 0, &p) == 0 && int_of(mem, s_device_id, 0, device) == 0 ? 0 : -1;
    Py_XDECREF(mem);
    if (PyErr_Occurred()) drop_error();
    if (rc < 0) return -1;
    *ptr = (uint64_t)p;
    return put_device(k, *device, *ptr);
}

int plain_args(PyObject *const *args, const char *spec, ...) {
    va_list v;
    int rc = numpy_ready ? 0 : -1;
    va_start(v, spec);
    for (int i = 0; spec[i] && rc == 0; i++) {
        PyObject *a = args[i];
        if (spec[i] == 'i') rc = odml_exact_i64(a, va_arg(v, int64_t *));
        else if (spec[i] == 't') rc = PyTuple_CheckExact(a) ? 0 : -1;
    }
    va_end(v);
    return rc;
}

int numpy_key(Key *k, PyArrayObject *x) {
    const int nd = PyArray_NDIM(x);
    return !PyArray_ISNOTSWAPPED(x) || nd > MAX_RANK || put(k, PyArray_TYPE(x)) < 0 || put(k, PyArray_ITEMSIZE(x)) < 0
           || put_layout(k, nd, (const int64_t *)PyArray_DIMS(x), (const int64_t *)PyArray_STRIDES(x), 1) < 0 ? -1 : 0;
}

#endif

/* -- Python functions ------------------------------------------------------------------------------- */

/* `result`, or NULL with the deferred exception raised where a hook met one. */
PyObject *with_deferred(PyObject *result) {
    if (!deferred.e) return result;
    Py_XDECREF(result);
    if (PyErr_Occurred()) PyErr_Clear();
    raise_held(&deferred);
    return NULL;
}

/* A served call's result, moved out of outs[]: a list (multi: SPLIT), else the one; NULL with an exception. */
PyObject *take_outputs(PyObject **outs, int n, int multi) {
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

PyObject *odml_py_call_cache_move(PyObject *self, PyObject *const *args, Py_ssize_t nargs);   /* (calls_move.c) */

/* call_cache_move's entries, x one array (a list or tuple is not served); a NumPy array's miss served as a new shape
 * where numpy_plain can */
PyObject *odml_py_call_cache_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyTypeObject *type = nargs < 2 ? NULL : Py_TYPE(args[1]);
#ifdef ODML_NUMPY
    if (type == &PyArray_Type) return enabled && table && numpy_ready ? numpy_move(args, nargs, 1) : Py_NewRef(Py_None);
#endif
    if (!type || (type != (PyTypeObject *)t_type && type != (PyTypeObject *)c_type)) Py_RETURN_NONE;
    return odml_py_call_cache_move(self, args, nargs);
}

Entry *entry_alloc(int kind, int n_out, int n_pass) {
    Entry *e = PyObject_New(Entry, &EntryType);
    if (!e) return NULL;
    memset((char *)e + sizeof(PyObject), 0, sizeof(Entry) - sizeof(PyObject));
    e->kind = kind;
    e->n_in = 1;
    e->outs = n_out > 1 ? (Out *)PyMem_Calloc((size_t)n_out, sizeof(Out)) : &e->out1;
    e->passes = n_pass > 1 ? (Pass *)PyMem_Calloc((size_t)n_pass, sizeof(Pass)) : &e->pass1;
    if (!e->outs || !e->passes) {
        Py_DECREF(e);
        PyErr_NoMemory();
        return NULL;
    }
    e->n_out = n_out;
    e->n_pass = n_pass;
    return e;
}

/* Whether x's shape and strides (strides_of's) are still `planned`, the (shape, strides) the route planned from, or
 * planned is None: another thread may have changed x in place (x.resize_, x.set_, x.shape = ...) meanwhile, and the
 * entry, keyed by x's layout as read now, must hold that layout's plan. Read right before the key, no Python code run
 * in between. 0 (no exception) where not. */
int still_planned(PyObject *x, PyObject *planned, int torch) {
    if (planned == Py_None) return 1;
    if (!PyTuple_Check(planned) || PyTuple_GET_SIZE(planned) != 2) return 0;
    PyObject *shape = PyObject_GetAttr(x, s_shape);
    PyObject *strides = shape ? strides_of(x, torch) : NULL;
    int same = shape && strides && PyObject_RichCompareBool(shape, PyTuple_GET_ITEM(planned, 0), Py_EQ) == 1
               && PyObject_RichCompareBool(strides, PyTuple_GET_ITEM(planned, 1), Py_EQ) == 1;
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    if (PyErr_Occurred()) drop_error();
    return same;
}

/* call_cache_entry (runtime/calls.py's entry): a dict of kind, cpu, kernel, params (the parameter block's bytes),
 * threads, use_blocks, prefault, origin, shape, out_bytes, dtype (CPU entries); function, grid, block, shared,
 * dst_align (CUDA entries); or None. */
PyObject *odml_py_call_cache_entry(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs < 2 || !table) Py_RETURN_NONE;
    Key k;
    int rc = -1;
#ifdef ODML_NUMPY
    PyObject *x = args[1];
    PyArrayObject *in[MAX_MOVE_IO];
    int n_in;
    if (numpy_ready && Py_TYPE(x) == &PyArray_Type) rc = move_key(&k, args[0], x, args + 2, nargs - 2, in, &n_in);
    if (numpy_ready && t_type && Py_TYPE(x) == (PyTypeObject *)t_type) rc = torch_move_key(&k, args, nargs);
#endif
    if (PyErr_Occurred()) drop_error();
    if (rc < 0) Py_RETURN_NONE;
    const long long counted = misses;
    Entry *e = lookup(&k, -1);
    misses = counted;                              /* a test's look is not a miss */
    if (!e) Py_RETURN_NONE;
    const Pass *p = &e->pass1;
    const Out *o = &e->out1;
    const char *params = e->cpu || !p->launch ? (const char *)&p->p.k : (const char *)(uintptr_t)p->params;
    const int tuned = p->kernel < ODML_KERNEL_COUNT;   /* (a move or index pass: no kernel block shown) */
    PyObject *d = Py_BuildValue(
        "{s:i,s:i,s:i,s:y#,s:i,s:i,s:i,s:K,s:O,s:L,s:O,s:K,s:I,s:I,s:I,s:I}", "kind", e->kind, "cpu", e->cpu,
        "kernel", p->kernel, "params", params, (p->launch && !e->cpu) || !tuned ? (Py_ssize_t)0
                                                                                   : (Py_ssize_t)odml_kernel_size[p->kernel],
        "threads", p->threads, "use_blocks", o->use_blocks, "prefault", e->prefault, "origin",
        (unsigned long long)e->origin[0], "shape", o->shape ? o->shape : Py_None, "out_bytes", (long long)o->bytes,
        "dtype", o->dtype ? o->dtype : Py_None, "function", (unsigned long long)p->function, "grid", p->grid,
        "block", p->block, "shared", p->shared, "dst_align", o->dst_align);
    Py_DECREF(e);
    return d;
}

/* call_cache_cuda_retry(retry): retry(device, function, grid, shared, params bytes, src, dst, stream) queues a failed
 * launch of a call_cache_move_new entry again, or raises opendml's error (runtime/cuda/launch.py's relaunch). */
PyObject *odml_py_call_cache_cuda_retry(PyObject *self, PyObject *fn) {
    (void)self;
    return keep(&cuda_retry, fn, PyCallable_Check(fn), "call_cache_cuda_retry: a callable is required");
}

PyObject *odml_py_call_cache_put_eager(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *op, *x, *call_args, *eager;
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
        key_call(&k, KIND_EAGER, op, ((PyTupleObject *)call_args)->ob_item, PyTuple_GET_SIZE(call_args)) < 0 ||
        torch_key(&k, x, &device, &ptr) < 0) {
        return with_deferred(Py_NewRef(Py_False));
    }
    Entry *e = entry_alloc(KIND_EAGER, 1, 0);   /* no output nor pass of its own: eager(x) runs the call */
    if (!e) return NULL;
    Py_INCREF(eager);
    e->eager = eager;
    return stored(&k, e);
}

PyObject *odml_py_call_cache_torch_eager(PyObject *self, PyObject *fn) {
    (void)self;
    PyObject *r = keep(&t_eager_ok, fn, PyCallable_Check(fn), "call_cache_torch_eager: a callable is required");
    if (r) drop_all();
    return r;
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

PyObject *odml_py_call_cache_torch(PyObject *self, PyObject *args) {
    (void)self;
    PyObject **slots[] = {&t_type, &t_grad_enabled, &t_dispatch_len, &t_wrapped, &t_raw_stream, &t_device,
                          &t_from_numpy};
    return set_hooks(args, "call_cache_torch", slots, 7);
}

/* call_cache_torch_api(capsule or None): the C++ node library's accessors (torch_api.h); None: read through Python. */
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

PyObject *odml_py_call_cache_cupy(PyObject *self, PyObject *args) {
    (void)self;
    PyObject **slots[] = {&c_type, &c_empty, &c_device, &c_stream};
    return set_hooks(args, "call_cache_cupy", slots, 4);
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
    int in_front = 0;
    for (int i = 0; i < FRONT; i++) in_front += front[i] != NULL;
    return Py_BuildValue("{s:O,s:O,s:n,s:L,s:L,s:L,s:i}", "enabled", enabled ? Py_True : Py_False, "numpy",
                         numpy_ready ? Py_True : Py_False, "entries", table ? PyDict_GET_SIZE(table) : 0, "hits",
                         hits, "misses", misses, "planned", plain_served, "front", in_front);
}

int odml_calls_init(void) {
    if (PyType_Ready(&EntryType) < 0 || !(s_dtype_kw = Py_BuildValue("(s)", "dtype"))) return -1;
    table = PyDict_New();
    if (!table) return -1;
#ifdef ODML_NUMPY
    /* without NumPy's C API (an incompatible NumPy) the module loads, serving no NumPy arrays */
    if (_import_array() < 0) PyErr_Clear();
    else numpy_ready = 1;
#endif
#define ODML_NAME(N) if (!(s_##N = PyUnicode_InternFromString(#N))) return -1;
    ODML_NAMES(ODML_NAME)
#undef ODML_NAME
    return 0;
}
