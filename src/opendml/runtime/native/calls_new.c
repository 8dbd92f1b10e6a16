/* Calls the call cache runs in one C call without an entry of their own (see
 * calls.c and calls.h): Inductor's direct kernel (call_cache_packed) and the
 * new-shape routes (call_cache_torch_new, call_cache_numpy_new), which record
 * the entry a repeated call is then served from. */
#define NO_IMPORT_ARRAY
#include "calls.h"

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

#ifdef ODML_NUMPY
/* What a new shape's run needs of the CPU backend (CpuBackend.plain_conf), read from its tuple: -1 where it is
 * not one of five exact ints in 64 bits with grain and most at least 1 (plain_args: NumPy's C API ready). */
typedef struct { int64_t most, grain, tile_stride, tile_columns, limit; } plain_conf;

static int read_conf(PyObject *conf, plain_conf *c) {
    return !PyTuple_CheckExact(conf) || PyTuple_GET_SIZE(conf) != 5
                   || plain_args(((PyTupleObject *)conf)->ob_item, "iiiii", &c->most, &c->grain, &c->tile_stride,
                                 &c->tile_columns, &c->limit)
                   || c->grain < 1 || c->most < 1 ? -1 : 0;
}

/* An int64 from a tuple item (a Python int); -1 with no exception left where it is none. */
static int tuple_int(PyObject *t, Py_ssize_t i, int64_t *v) {
    long long x = PyLong_AsLongLong(PyTuple_GET_ITEM(t, i));
    if (x == -1 && PyErr_Occurred()) {
        drop_error();
        return -1;
    }
    *v = x;
    return 0;
}

/* The facts call_cache_torch_new reads of x (torch_api.h's describe) through Python, where PyTorch's
 * accessors are not loaded (the library still building in the background, or torch_node="off"): a new
 * shape then takes this route from the first call of a process, whatever was imported or run first
 * (issue 33). 0 with *in filled; -1, no exception left, where x is not a plain strided tensor of at most
 * ODML_TORCH_API_RANK dimensions (the Python route runs the call). `wrapped` covers what describe's does:
 * a functorch wrapper or an open forward-AD level (t_wrapped), a negative or conjugate view, no storage
 * (data_ptr raises). */
static PyObject *torch_strided;           /* torch.strided, read once */

static int torch_describe_py(PyObject *x, odml_torch_info *in) {
    memset(in, 0, sizeof *in);
    if (!torch_strided) {
        PyObject *torch = PyImport_ImportModule("torch");
        torch_strided = torch ? PyObject_GetAttrString(torch, "strided") : NULL;
        Py_XDECREF(torch);
        if (!torch_strided) {
            drop_error();
            return -1;
        }
    }
    PyObject *layout = PyObject_GetAttrString(x, "layout");
    const int strided = layout == torch_strided;
    Py_XDECREF(layout);
    if (!strided) {
        if (PyErr_Occurred()) drop_error();
        return -1;
    }
    in->dispatch_modes = !equals(PyObject_CallNoArgs(t_dispatch_len), 0);
    in->wrapped = is_true(PyObject_CallOneArg(t_wrapped, x)) || is_true(PyObject_CallMethodNoArgs(x, s_is_neg))
                  || is_true(PyObject_CallMethodNoArgs(x, s_is_conj));
    in->requires_grad = is_true(PyObject_GetAttr(x, s_requires_grad));
    in->grad_enabled = is_true(PyObject_CallNoArgs(t_grad_enabled));
    int64_t device, ptr;
    if (is_true(PyObject_GetAttr(x, s_is_cuda))) {
        if (int_of(x, s_get_device, 1, &device) < 0) return -1;
    } else {
        device = is_true(PyObject_GetAttr(x, s_is_cpu)) ? -1 : -2;
    }
    in->device = device;
    if (device < -1) return 0;                    /* declined by the caller */
    PyObject *dtype = PyObject_GetAttr(x, s_dtype);
    if (!dtype) {
        drop_error();
        return -1;
    }
    in->dtype = dtype;                            /* borrowed: torch.dtype objects are immortal singletons */
    Py_DECREF(dtype);
    PyObject *shape = PyObject_GetAttr(x, s_shape);
    PyObject *stride = shape ? PyObject_CallMethodNoArgs(x, s_stride) : NULL;
    int rc = -1;
    if (shape && stride && PyTuple_Check(shape) && PyTuple_CheckExact(stride)
            && PyTuple_GET_SIZE(shape) == PyTuple_GET_SIZE(stride) && PyTuple_GET_SIZE(shape) <= ODML_TORCH_API_RANK) {
        in->ndim = (int32_t)PyTuple_GET_SIZE(shape);
        rc = 0;
        for (int i = 0; i < in->ndim && rc == 0; i++)
            rc = tuple_int(shape, i, &in->sizes[i]) < 0 || tuple_int(stride, i, &in->strides[i]) < 0 ? -1 : 0;
    }
    Py_XDECREF(shape);
    Py_XDECREF(stride);
    if (PyErr_Occurred()) drop_error();
    if (rc < 0 || int_of(x, s_data_ptr, 1, &ptr) < 0) return -1;
    in->data_ptr = (uint64_t)ptr;
    return 0;
}

/* A new shape's input as the route read it, the one description the plan, the key and the launch are made
 * from: a PyTorch tensor (torch_api.h's describe, or torch_describe_py) or an exact CuPy array (cupy_describe). */
typedef struct {
    odml_torch_info in;       /* sizes, element strides, data pointer, device; dtype: torch's (NULL for CuPy) */
    PyObject *descr;          /* a new reference: its NumPy dtype */
    int cupy;
    Key words;                /* CuPy: x's key words as cupy_key reads them (those of the calls its entry serves) */
} new_input;

static int torch_describe(PyObject *x, new_input *d) {
    d->cupy = 0;
    return tapi ? tapi->describe(x, &d->in) : torch_describe_py(x, &d->in);
}

/* An exact CuPy array from one read of its key words (cupy_key: type number, item size, rank, sizes, rank,
 * byte strides, device, alignment), the layout planner.array_layout gives them; its dtype in d->descr (a new
 * reference, or NULL). 0, or -1 with no exception where the Python route must run the call (a byte-swapped
 * dtype, a rank of 0, a byte stride not a whole number of elements along an axis of more than one). */
static int cupy_describe(PyObject *x, new_input *d) {
    int64_t device;
    uint64_t ptr;
    odml_layout L;
    memset(&d->in, 0, sizeof d->in);
    d->cupy = 1;
    d->words.n = 0;
    if (cupy_key(&d->words, x, &d->descr, &device, &ptr) < 0) return -1;
    const int64_t *w = d->words.w, n = w[2];
    if (n < 1 || n > ODML_MAX_RANK || w[3 + n] != n                /* (as many strides as sizes) */
            || odml_layout_from_bytes((int)n, w + 3, w + 4 + n, w[1], &L)) return -1;
    d->in.ndim = (int32_t)n;
    d->in.device = device;
    d->in.data_ptr = ptr;
    memcpy(d->in.sizes, L.shape, sizeof(int64_t) * (size_t)n);
    memcpy(d->in.strides, L.strides, sizeof(int64_t) * (size_t)n);
    return 0;
}

/* Whether x is still as d described it (dtype, sizes, strides, data pointer, device). An allocation may run a
 * garbage collection, whose finalizers may run Python code that changes x (x.resize_(), x.set_(), x.shape =)
 * and frees the memory read before: the plan made from the old description must not run. Read as the route
 * read it. */
static int input_still(PyObject *x, const new_input *d) {
    new_input now;
    now.descr = NULL;
    int same;
    if (d->cupy) {
        same = cupy_describe(x, &now) == 0 && now.in.data_ptr == d->in.data_ptr && now.words.n == d->words.n
               && !memcmp(now.words.w, d->words.w, sizeof(int64_t) * (size_t)d->words.n);
        Py_XDECREF(now.descr);
        return same;
    }
    const odml_torch_info *in = &d->in;
    if (torch_describe(x, &now) != 0 || now.in.dtype != in->dtype || now.in.data_ptr != in->data_ptr
            || now.in.ndim != in->ndim || now.in.device != in->device)
        return 0;
    for (int i = 0; i < in->ndim; i++)
        if (now.in.sizes[i] != in->sizes[i] || now.in.strides[i] != in->strides[i]) return 0;
    return 1;
}

/* A new C-contiguous output of dims beside x, and its data pointer: x.new_empty(dims) (PyTorch's accessor,
 * else through Python), or cupy.empty(dims, dtype) on the current device (the user's allocator). NULL with
 * the allocator's exception. */
static PyObject *input_empty(PyObject *x, const new_input *d, const int64_t *dims, int rank, uint64_t *dst) {
    if (!d->cupy && tapi) return tapi->empty(x, dims, rank, NULL, dst);
    PyObject *shape = odml_ints_tuple(dims, rank);
    if (!shape) return NULL;
    PyObject *out = d->cupy ? PyObject_CallFunctionObjArgs(c_empty, shape, d->descr, NULL)
                            : PyObject_CallMethodOneArg(x, s_new_empty, shape);
    Py_DECREF(shape);
    PyObject *mem = out && d->cupy ? PyObject_GetAttr(out, s_data) : NULL;
    int64_t p = 0;
    if (out && (d->cupy ? !mem || int_of(mem, s_ptr, 0, &p) < 0 : int_of(out, s_data_ptr, 1, &p) < 0)) {
        Py_CLEAR(out);
        if (PyErr_Occurred()) drop_error();
        PyErr_SetString(PyExc_RuntimeError, "opendml call cache: the output has no data pointer");
    }
    Py_XDECREF(mem);
    if (out) *dst = (uint64_t)p;
    return out;
}

/* call_cache_torch_new once x is described (d) and the fields are a tuple */
static PyObject *new_planned(PyObject *const *args, PyObject *fields, const new_input *d) {
    PyObject *op = args[0], *x = args[1], *call_args = args[2], *kernels = args[6], *conf = args[8];
    PyObject *descr = d->descr;
    int64_t kind, gen;
    const odml_torch_info in = d->in;
    if (plain_args(args, "...i.i", &kind, &gen)) Py_RETURN_NONE;
    odml_layout L;
    odml_new_plan pl;
    L.n = in.ndim;
    L.es = (int64_t)PyDataType_ELSIZE((PyArray_Descr *)descr);
    L.flt = PyDataType_ISFLOAT((PyArray_Descr *)descr);
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
    int keyed = key_head(&k, d->cupy ? KIND_CUPY : KIND_TORCH, op, ((PyTupleObject *)call_args)->ob_item,
                         PyTuple_GET_SIZE(call_args)) == 0;
    if (keyed && d->cupy)
        for (int i = 0; i < d->words.n && keyed; i++) keyed = put(&k, d->words.w[i]) == 0;
    else if (keyed)
        keyed = torch_key_info(&k, &in) == 0;
    if (PyErr_Occurred()) drop_error();
    PyObject *out = NULL, *fn = NULL;
    uint64_t dst = 0;
    Entry *e = NULL;
    if (in.device == -1) {                         /* the CPU kernel (a PyTorch CPU tensor) */
        plain_conf c;
        odml_cpu_run run;
        if (read_conf(conf, &c) || out_bytes >= c.limit || odml_new_cpu(&pl, c.tile_stride, c.tile_columns, &run))
            Py_RETURN_NONE;
        const int64_t threads = odml_new_threads(run.work, c.grain, c.most);
        if (threads > ODML_MAX_THREADS) Py_RETURN_NONE;
        out = input_empty(x, d, pl.out_dims, pl.out_rank, &dst);
        if (!out) return allocation_failed();
        if (!input_still(x, d)) {                 /* (changed by a finalizer: the Python route reads it anew) */
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        e = entry_alloc(KIND_TORCH, 1, 1);
        if (!e) goto fail;
        e->pass1.kernel = odml_new_kernel((int)kind);
        e->cpu = 1;
        e->pass1.threads = (int)threads;
        e->out1.bytes = out_bytes;                 /* run_kernel releases the GIL for large outputs */
        memcpy(&e->pass1.p.k, &run.p, (size_t)run.size);
        const char *error = NULL;
        const int status = run_kernel(e, (char *)(uintptr_t)dst, (const char *)(uintptr_t)(in.data_ptr - origin_bytes),
                                      &error);
        if (status != ODML_OK) {
            if (status == ODML_ENOMEM) PyErr_NoMemory();
            else PyErr_Format(PyExc_ValueError, "opendml call cache: %s", error ? error : "bad kernel parameters");
            goto fail;
        }
        Py_INCREF(descr);
        e->out1.dtype = descr;
    } else {                                       /* a CUDA launch */
        /* launches not made natively, or misaligned data (the Python route raises) */
        if (!PyDict_CheckExact(kernels) || in.data_ptr % (uint64_t)L.es) Py_RETURN_NONE;
        /* the device must be current (the Python route makes it so) */
        if (!cuda_device_is(!d->cupy, in.device)) Py_RETURN_NONE;
        out = input_empty(x, d, pl.out_dims, pl.out_rank, &dst);
        if (!out) return allocation_failed();
        /* (an allocator's address that is not a whole number of elements: the Python route places the output) */
        if (dst % (uint64_t)L.es || !input_still(x, d)) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        odml_cuda_spec s;
        const uint64_t src = in.data_ptr - (uint64_t)origin_bytes;
        if (odml_new_cuda(&pl, src, dst, &s)) {
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        /* the device's kernels, read after the allocation (which may run Python code that replaces the dict):
         * none yet, every name missing */
        PyObject *dev = PyLong_FromLongLong(in.device);
        PyObject *table_of = dev ? PyDict_GetItemWithError(kernels, dev) : NULL;
        Py_XDECREF(dev);
        if (PyErr_Occurred()) {
            drop_error();
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
        if ((function == (unsigned long long)-1 && PyErr_Occurred()) || cuda_stream(!d->cupy, in.device, &stream) < 0)
            goto fail;
        if (odml_cuda_launch(function, s.grid, ODML_CUDA_THREADS, s.smem, stream, src, dst, (uint64_t)(uintptr_t)&s.p)) {
            Py_DECREF(out);                        /* nothing queued: the Python route's Launch retries and raises */
            Py_RETURN_NONE;
        }
        e = entry_alloc(d->cupy ? KIND_CUPY : KIND_TORCH, 1, 1);
        if (!e) goto fail;
        Pass *p = &e->pass1;
        p->kernel = odml_new_kernel((int)kind);
        memcpy(&p->p.k, &s.p, (size_t)s.size);
        p->params = (uint64_t)(uintptr_t)&p->p.k;
        p->function = function;
        p->grid = s.grid;
        p->block = ODML_CUDA_THREADS;
        p->shared = s.smem;
        e->out1.dst_align = (unsigned)(dst & 15);
        e->device = in.device;
    }
    /* the entry, as put_numpy and put_cuda store it */
    e->origin[0] = origin_bytes;
    e->out1.rank = pl.out_rank;
    memcpy(e->out1.dims, pl.out_dims, sizeof(int64_t) * (size_t)pl.out_rank);
    if (keyed && enabled && (unsigned long long)gen == generation
            && (e->out1.shape = odml_ints_tuple(pl.out_dims, pl.out_rank))) {
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

/* The fields of `lowering` (a compiled plain lowering: planner.NATIVE_LOWERING's slice1_lowering or
 * slice_lowering, which run no Python code) for x's sizes as describe read them: what plain_plan gives for
 * them (the same count rule, plain_count: 1 to 8 sizes of 1 to UINT32_MAX elements in all). A new reference
 * to a tuple, or NULL with no exception set where it gives none. */
static PyObject *lowered_fields(PyObject *lowering, PyObject *call_args, const odml_torch_info *in) {
    const Py_ssize_t n_args = PyTuple_GET_SIZE(call_args);
    if (in->ndim < 1 || in->ndim > ODML_MAX_RANK || n_args > 6) return NULL;
    int64_t count = 1;
    for (int i = 0; i < in->ndim; i++)
        if (in->sizes[i] < 0 || __builtin_mul_overflow(count, in->sizes[i], &count)) return NULL;
    if (count < 1 || count > (int64_t)UINT32_MAX) return NULL;
    PyObject *shape = odml_ints_tuple(in->sizes, in->ndim);
    if (!shape) {
        drop_error();
        return NULL;
    }
    PyObject *stack[7];
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

/* call_cache_torch_new(op, x, args, kind, fields, generation, kernels, dtype, cpu) -> the output, None, False
 * or a kernel name
 *
 * A new shape's route on a PyTorch tensor or an exact CuPy array (issues 19, 33), in one C call: x read (a
 * tensor through the tensor accessors, else through Python; a CuPy array as cupy_key reads it), the plan of
 * plain_plan's `kind` (0 copy, 1 unfold, 2 scatter, 3 fold) and `fields` applied to x's layout (newshape.h),
 * the output allocated by x's framework (at::empty, cupy.empty), the kernel run, and the call recorded as the
 * call cache's entry for (op, args) on x, as the Python route records it (put_numpy, put_cuda), where the
 * cache is on and still in `generation`.
 *
 * On the CPU (a tensor's x.get_device() == -1), `cpu` is (max_threads, grain_bytes, tile_stride,
 * tile_columns, limit_bytes) of the CPU backend (None: its compiled kernels are off): the kernel, parameters
 * and threads are CpuBackend's for the plan (odml_new_cpu), for outputs below limit_bytes; `dtype` is x's
 * NumPy dtype (what a served call's NumPy output takes). On CUDA, `kernels` maps the device index to a dict
 * of compiled kernels (name -> CUfunction; None: launches are not made natively): the launch is
 * runtime/cuda/backend.py's for the plan (odml_new_cuda, cuda_spec.c), queued on the framework's current
 * stream of the device, which must be current; a name the dict lacks comes back as a str, nothing run (the
 * caller compiles it and calls again).
 *
 * `fields` may also be a compiled plain lowering (a builtin function, see lowered_fields): C then calls it
 * on x's sizes as it reads them, after the checks below, and returns False (nothing run) where it gives no
 * fields (plain_plan then plans the call and C is called again with its fields).
 *
 * None, nothing run, wherever the Python route must run the call: x not a plain dense tensor of at most 8
 * dimensions (a wrapper, a dispatch mode, a forward-AD level) nor an exact CuPy array of native byte order
 * whose strides are whole elements, another device or another current CUDA device, misaligned data, fields
 * that do not fit x, an output that cannot be allocated (the Python route raises the error that names it)
 * or that is misaligned, a launch the driver refuses. No rule of DirectML is checked here: the fields come
 * from the operator's plain_lowering, which validated them. */
static PyObject *torch_new(PyObject *const *args) {
    PyObject *x = args[1], *call_args = args[2], *fields = args[4], *out;
    int64_t kind, gen;
    new_input d;
    d.descr = NULL;
    const int lower = PyCFunction_CheckExact(fields), cupy = c_type && Py_TYPE(x) == (PyTypeObject *)c_type;
    if (plain_args(args, "..ti.i", &kind, &gen) || !(cupy || (t_type && Py_TYPE(x) == (PyTypeObject *)t_type))
            || !(lower || PyTuple_CheckExact(fields)) || !PyArray_DescrCheck(args[7]) || kind < 0
            || kind >= ODML_NEW_KINDS
            || (cupy ? cupy_describe(x, &d) : (d.descr = Py_NewRef(args[7]), torch_describe(x, &d))) != 0
            || d.in.dispatch_modes || d.in.wrapped || d.in.device < -1) {
        if (PyErr_Occurred()) drop_error();
        out = Py_NewRef(Py_None);
    } else if (!lower) {
        out = new_planned(args, fields, &d);
    } else {
        PyObject *got = lowered_fields(fields, call_args, &d.in);
        out = got ? new_planned(args, got, &d) : Py_NewRef(Py_False);
        Py_XDECREF(got);
    }
    Py_XDECREF(d.descr);
    return out;
}
#endif

GLUE_FUNCTION(call_cache_torch_new, "op, x, args, kind, fields, generation, kernels, dtype, cpu", 9, 9,
              torch_new(args))
