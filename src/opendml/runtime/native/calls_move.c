/* The call cache's entries of the data-movement family (see calls.c and calls.h): move programs on NumPy arrays (and
 * PyTorch CPU tensors through NumPy views) and on CUDA memory (PyTorch CUDA tensors, CuPy arrays). */
#define NO_IMPORT_ARRAY
#include <stdarg.h>

#include "calls.h"

/* -- The move program's entries on NumPy arrays (every operator) ------------------------------------ */

/* What is recorded and served: runtime/calls.py's put_move. The key: KIND_MOVE, the operator, each argument, then
 * the inputs (one array, or a sequence and its length): dtype, shape, byte strides. put_move refuses a pass that does
 * not fit the buffers it will be given, so a bad record cannot make a later call read or write outside one. */

#define MAX_STR 32

static PyObject *move_types;            /* a tuple of enum types whose members key by identity */


/* A family argument other than key_arg's (the kinds runtime/calls.py's docstring lists); -1: no key. */
int key_move_arg(Key *k, PyObject *a) {
    int64_t v;
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
    if (numpy_ready && PyArray_DescrCheck(a))     /* (an immortal one) */
        return !number_descr(a) || put(k, 7) < 0 ? -1 : put(k, (int64_t)(intptr_t)a);
#endif
    /* enum members: kept alive by their class, which move_types holds */
    if (move_types)
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(move_types); i++)
            if ((PyObject *)Py_TYPE(a) == PyTuple_GET_ITEM(move_types, i))
                return put(k, 8) < 0 ? -1 : put(k, (int64_t)(intptr_t)a);
    return -1;
}

#ifdef ODML_NUMPY
int number_descr(PyObject *d) {
    const int num = ((PyArray_Descr *)d)->type_num;
    PyArray_Descr *builtin = PyTypeNum_ISNUMBER(num) ? PyArray_DescrFromType(num) : NULL;
    const int same = builtin && (PyObject *)builtin == d;
    if (PyErr_Occurred()) drop_error();
    Py_XDECREF(builtin);
    return same;
}

/* The key of a family call on x, its arrays (arrays_of's) in `in` (borrowed). -1: no key. */
int move_key(Key *k, PyObject *op, PyObject *x, PyObject *const *args, Py_ssize_t nargs, PyArrayObject **in,
             int *n_in) {
    int seq;
    if (key_call(k, KIND_MOVE, op, args, nargs) < 0
            || (*n_in = arrays_of(x, &PyArray_Type, (PyObject **)in, &seq)) < 0
            || put(k, seq ? -2 : -1) < 0 || (seq && put(k, *n_in) < 0))
        return -1;
    for (int i = 0; i < *n_in; i++)
        if (numpy_key(k, in[i]) < 0) return -1;
    return 0;
}

/* A new C-contiguous output (from the output blocks where it fits, as CpuBackend.empty), its data in *data, whether
 * its memory was never touched in *fresh (where not NULL); NULL with an exception. */
static PyObject *new_output(PyArray_Descr *dtype, int rank, const int64_t *dims64, int64_t bytes, int use_blocks,
                            char **data, int *fresh) {
    npy_intp dims[MAX_RANK];
    PyObject *out;
    int unused;
    if (!fresh) fresh = &unused;
    *fresh = 1;
    for (int i = 0; i < rank; i++) dims[i] = (npy_intp)dims64[i];
    Py_INCREF(dtype);
    if (use_blocks && bytes <= odml_block_cache_max()) {
        char *mem;
        PyObject *block = odml_block_new((Py_ssize_t)bytes, &mem, fresh);
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

/* One index-driven pass (index.c; its reach checked when recorded): ODML_OK, or ODML_EPARAM where a checked pass met
 * an index outside its dimension or an input is misaligned (the Python route then runs the call: for the first, it
 * raises the error naming the index). */
static int index_pass(const Pass *p, char *const *dsts, const char *const *srcs) {
    const idx_params *ip = (const idx_params *)p->index;
    const char *idx[IDX_MAX_AXES];
    char *dst = dsts[p->dst];
    const char *src = p->src < 0 ? dst : srcs[p->src];
    int bad = 0;
    /* index.c's typed loads need aligned words: a misaligned input (keyed as an aligned one is) takes the route */
    uintptr_t misaligned = (uintptr_t)src & (uintptr_t)(ip->element_size - 1);
    for (int64_t a = 0; a < ip->naxes; a++) {
        idx[a] = srcs[ip->axes[a].slot];
        misaligned |= (uintptr_t)idx[a] & (uintptr_t)(odml_type_size[ip->axes[a].type] - 1);
    }
    if (misaligned) return ODML_EPARAM;
    odml_index_move(ip, src, dst, idx, &bad);
    return p->checked && bad ? ODML_EPARAM : ODML_OK;
}

/* e's passes in order, from the inputs' element 0 at srcs into the outputs at dsts, the GIL released at RELEASE_BYTES
 * written or more (the caller's reference keeps e alive); the first status other than ODML_OK. */
int run_passes(const Entry *e, char *const *dsts, const char *const *srcs) {
    int status = ODML_OK;
    const int release = e->total >= RELEASE_BYTES;
    PyThreadState *ts = release ? PyEval_SaveThread() : NULL;
    for (int i = 0; i < e->n_pass && status == ODML_OK; i++) {
        const Pass *p = &e->passes[i];
        const char *error = NULL;                  /* a tuned pass (odml_move_plain's): one of the first five's kernels */
        status = p->kernel == PASS_INDEX ? index_pass(p, dsts, srcs)
                 : p->kernel < ODML_KERNEL_COUNT ? odml_run_kernel(p->kernel, dsts[p->dst], srcs[p->src], &p->p.k,
                                                                   p->threads, &error)
                                                 : odml_move_run(p->prep, dsts[p->dst], p->fill ? dsts[p->dst] : srcs[p->src]);
    }
    if (release) PyEval_RestoreThread(ts);
    return status;
}

typedef struct {
    int nd;
    npy_intp shape[NPY_MAXDIMS], strides[NPY_MAXDIMS];
    char *data;
    PyArray_Descr *descr;
} InputState;

static void input_state(PyArrayObject *x, InputState *s) {
    s->nd = PyArray_NDIM(x);
    if (s->nd) {                                    /* (a 0-d array has no dims pointer) */
        memcpy(s->shape, PyArray_DIMS(x), sizeof(npy_intp) * (size_t)s->nd);
        memcpy(s->strides, PyArray_STRIDES(x), sizeof(npy_intp) * (size_t)s->nd);
    }
    s->data = PyArray_BYTES(x);
    s->descr = PyArray_DESCR(x);
}

static int input_same(PyArrayObject *x, const InputState *s) {
    return PyArray_NDIM(x) == s->nd && PyArray_BYTES(x) == s->data && PyArray_DESCR(x) == s->descr
           && (!s->nd || (!memcmp(s->shape, PyArray_DIMS(x), sizeof(npy_intp) * (size_t)s->nd)
                          && !memcmp(s->strides, PyArray_STRIDES(x), sizeof(npy_intp) * (size_t)s->nd)));
}

PyObject *serve_cpu(Entry *e, PyArray_Descr *own, char *const *data, PyArrayObject **in, int n_in, const Key *k,
                    int64_t gen) {
    PyObject *outs[MAX_MOVE_IO] = {NULL}, *result = NULL;
    char *dsts[MAX_MOVE_IO];
    const char *srcs[MAX_MOVE_IO];
    InputState state[MAX_MOVE_IO];
    for (int i = 0; in && i < n_in; i++) input_state(in[i], &state[i]);
    own = e->n_pass == 1 && e->passes[0].kernel < ODML_KERNEL_COUNT ? own : NULL;
    for (int i = 0; i < e->n_out; i++) {
        const Out *o = &e->outs[i];
        int fresh;
        outs[i] = new_output(own ? own : (PyArray_Descr *)o->dtype, o->rank, o->dims, o->bytes, o->use_blocks,
                             &dsts[i], &fresh);
        if (!outs[i]) {                            /* the Python route allocates again and raises */
            result = allocation_failed();
            goto done;
        }
        if (fresh && e->prefault)                  /* as engine._execute: fault pages in before threads write */
            for (int64_t b = 0; b < o->bytes; b += PAGE) dsts[i][b] = 0;
    }
    /* an input changed by an allocation's finalizer, or a pass that declines: the Python route runs the call */
    for (int i = 0; i < n_in; i++) {
        if (in && !input_same(in[i], &state[i])) goto route;
        srcs[i] = (in ? state[i].data : data[i]) - e->origin[i];
    }
    if (run_passes(e, dsts, srcs) != ODML_OK) goto route;
    if (k && enabled && (unsigned long long)gen == generation && store(k, e) < 0) goto done;
    result = take_outputs(outs, e->n_out, e->multi);
    goto done;
route:
    result = Py_NewRef(Py_None);
done:
    for (int i = 0; i < MAX_MOVE_IO; i++) Py_XDECREF(outs[i]);
    hits += !in && result && result != Py_None;
    Py_DECREF(e);
    return result;
}

/* A repeated call on exact NumPy arrays served from its entry; at a miss, with `plain` (the first five's functions
 * call call_cache_call), a new shape numpy_plain serves (calls_move_new.c); else None. */
PyObject *numpy_move(PyObject *const *args, Py_ssize_t nargs, int plain) {
    Key k;
    PyArrayObject *in[MAX_MOVE_IO];
    char *data[MAX_MOVE_IO];
    PyObject *result;
    int n_in = 0;
    if (move_key(&k, args[0], args[1], args + 2, nargs - 2, in, &n_in) < 0) Py_RETURN_NONE;
    /* the inputs stay alive whatever the call meets (a finalizer emptying the list, the GIL released) */
    for (int i = 0; i < n_in; i++) {
        Py_INCREF(in[i]);
        data[i] = PyArray_BYTES(in[i]);
    }
    Entry *e = lookup(&k, n_in);
    result = e ? serve_cpu(e, PyArray_DESCR(in[0]), data, NULL, n_in, NULL, 0)
               : plain && n_in == 1 ? numpy_plain(args, nargs, in[0], &k) : Py_NewRef(Py_None);
    for (int i = 0; i < n_in; i++) Py_DECREF(in[i]);
    return result;
}

/* The element indices a pass reaches on one side, offset + sum(i * stride) for i in [0, extent), in [*lo, *hi]; -1
 * beyond 2^58 anywhere (the sums then stay far inside int64). */
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

/* move_pass_ready's check (calls.h). */
static int move_pass_fits(const Pass *mp, const int64_t *span, const int *in_size, const int64_t *count,
                   const int *out_size, int n_in, int n_out) {
    const odml_cpu_move_params *p = &mp->p.move;
    int64_t lo, hi, extent[ODML_CPU_MOVE_MAX_RANK];
    if (p->rank < 1 || p->rank > ODML_CPU_MOVE_MAX_RANK || p->kind != mp->fill || mp->dst < 0 || mp->dst >= n_out ||
        mp->threads < 1 || mp->threads > ODML_MAX_THREADS || p->dst_type < 1 || p->dst_type > 11 ||
        odml_type_size[p->dst_type] != out_size[mp->dst])
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
        odml_type_size[p->src_type] != in_size[mp->src])
        return 0;
    for (int a = 0; a < p->rank; a++) {
        if (p->map_mode[a] < 0 || p->map_mode[a] > ODML_MAP_WRAP) return 0;
        extent[a] = p->map_mode[a] ? p->map_size[a] : p->sizes[a];
    }
    return move_span((int)p->rank, p->src_offset, extent, p->src_strides, &lo, &hi) == 0 && lo >= 0 &&
           hi < span[mp->src];
}

int move_pass_ready(Pass *mp, const int64_t *span, const int *in_size, const int64_t *count, const int *out_size,
                    int n_in, int n_out) {
    const char *error = NULL;
    if (!move_pass_fits(mp, span, in_size, count, out_size, n_in, n_out)) return 0;
    const int status = odml_move_prepare(&mp->p.move, mp->threads, &mp->prep, &error);
    if (status == ODML_ENOMEM) PyErr_NoMemory();
    return status == ODML_OK ? 1 : status == ODML_ENOMEM ? -1 : 0;
}

int index_pass_fits(const Pass *mp, const idx_params *p, const int64_t *span, const int *in_size, const int64_t *count,
                    const int *out_size, int n_in, int n_out) {
    int64_t idx_len[IDX_MAX_AXES];
    if (odml_index_malformed(p, n_in) || mp->dst < 0 || mp->dst >= n_out || p->element_size != out_size[mp->dst] ||
        p->data_type < 1 || p->data_type > 11 || odml_type_size[p->data_type] != p->element_size ||
        (mp->src < 0) != (p->has_value != 0) || mp->src >= n_in ||
        (mp->src >= 0 && in_size[mp->src] != p->element_size))
        return 0;
    for (int64_t a = 0; a < p->naxes; a++) {
        if (in_size[p->axes[a].slot] != odml_type_size[p->axes[a].type]) return 0;
        idx_len[a] = span[p->axes[a].slot];
    }
    return odml_index_fits(p, mp->src < 0 ? count[mp->dst] : span[mp->src], count[mp->dst], idx_len);
}

/* An input's element 0 (its lowest-addressed element) as bytes back from its data pointer, and its span in elements;
 * -1 where a stride of an axis of more than one element is not whole elements (the route copies it first). */
int input_layout(PyArrayObject *x, int64_t *origin, int64_t *span) {
    int64_t es = PyArray_ITEMSIZE(x), back = 0, reach = 0;
    *span = 0;
    for (int i = 0; i < PyArray_NDIM(x); i++)
        if (PyArray_DIM(x, i) == 0) {
            *origin = 0;
            return 0;
        }
    for (int i = 0; i < PyArray_NDIM(x); i++) {
        int64_t n = PyArray_DIM(x, i), s = PyArray_STRIDE(x, i);
        if (n == 1) continue;                      /* a size-1 axis's stride is never used (planner.array_layout) */
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

/* The elements a tuned kernel's block (code, k) writes, or -1 where that count leaves 2^59. */
static int64_t tuned_count(int code, const odml_kernel_params *k) {
    int64_t f[2 + ODML_MAX_SPATIAL], n = 1;
    int m = 0;
    switch (code) {
    case ODML_KERNEL_COPY: return k->copy.count;
    case ODML_KERNEL_SCATTER: return k->scatter.count;
    case ODML_KERNEL_WINDOWS:                   /* (N, C*K, B) */
        f[m++] = k->windows.batch, f[m++] = k->windows.channels;
        f[m++] = k->windows.window_count, f[m++] = k->windows.block_count;
        break;
    case ODML_KERNEL_WINDOW_SUMS:               /* (N, C, *spatial) */
        if (k->window_sums.dims < 1 || k->window_sums.dims > ODML_MAX_SPATIAL) return -1;
        f[m++] = k->window_sums.batch, f[m++] = k->window_sums.channels;
        for (int i = 0; i < (int)k->window_sums.dims; i++) f[m++] = k->window_sums.dim[i].size;
        break;
    default: return -1;
    }
    for (int i = 0; i < m; i++)
        if (f[i] < 0 || !odml_mul_le(n, f[i], ODML_LIMIT / 8)) return -1; else n *= f[i];
    return n;
}

#define PUT_MOVE_FAIL(msg) do { PyErr_SetString(PyExc_ValueError, "call_cache_put_move: " msg); goto fail; } while (0)

/* call_cache_put_move on NumPy arrays: runtime/calls.py's put_move (an index pass's src -1: a constant value; a pass's
 * sixth item, checked: its indices are the array API's checked ones). False where the call has no key or a pass does
 * not fit; ValueError for a malformed record. */
static PyObject *put_move(PyObject *op, PyObject *x, PyObject *call_args, PyObject *outs, PyObject *origins,
                          PyObject *passes, int multi, PyObject *planned) {
    Key k;
    PyArrayObject *in[MAX_MOVE_IO];
    int n_in, in_size[MAX_MOVE_IO], out_size[MAX_MOVE_IO];
    int64_t span[MAX_MOVE_IO], count[MAX_MOVE_IO];
    if (!numpy_ready
            || move_key(&k, op, x, ((PyTupleObject *)call_args)->ob_item, PyTuple_GET_SIZE(call_args), in, &n_in) < 0) {
        if (PyErr_Occurred()) drop_error();
        return with_deferred(Py_NewRef(Py_False));
    }
    Py_ssize_t n_out = PyTuple_GET_SIZE(outs), n_pass = PyTuple_GET_SIZE(passes);
    if (n_out < 1 || n_out > MAX_MOVE_IO || PyTuple_GET_SIZE(origins) != n_in || n_pass > MAX_MOVE_PASSES) {
        PyErr_SetString(PyExc_ValueError, "call_cache_put_move: 1 to 16 outputs, one origin per input and at most "
                        "64 passes are required");
        return NULL;
    }
    /* held: reading the record may run Python code (an origin's __index__, a flag's __bool__) that empties x */
    for (int i = 0; i < n_in; i++) Py_INCREF(in[i]);
    PyObject *result = NULL;
    if (planned != Py_None && (!PyTuple_Check(planned) || PyTuple_GET_SIZE(planned) != n_in)) {
        PyErr_SetString(PyExc_ValueError, "call_cache_put_move: planned must be None or one (shape, strides) per input");
        goto release;
    }
    /* (read with the key: an input another thread changed after its passes were planned is not recorded) */
    for (int i = 0; planned != Py_None && i < n_in; i++)
        if (!still_planned((PyObject *)in[i], PyTuple_GET_ITEM(planned, i), 0)) {
            result = Py_NewRef(Py_False);
            goto release;
        }
    Entry *e = entry_alloc(KIND_MOVE, (int)n_out, (int)n_pass);
    if (!e) goto release;
    e->cpu = 1;
    e->n_in = n_in;
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
        if ((es != 1 && es != 2 && es != 4 && es != 8) || rank > MAX_RANK)
            PUT_MOVE_FAIL("an output needs at most 8 dimensions and elements of 1, 2, 4 or 8 bytes");
        Out *eo = &e->outs[i];
        eo->dtype = Py_NewRef(dtype);
        eo->shape = Py_NewRef(shape);
        eo->rank = rank;
        eo->use_blocks = blocks;
        out_size[i] = es;
        count[i] = 1;
        for (int d = 0; d < rank; d++) {
            if (int64_item(shape, d, &eo->dims[d]) < 0) goto fail;
            if (eo->dims[d] < 0 || !odml_mul_le(count[i], eo->dims[d], ODML_LIMIT / 8))
                PUT_MOVE_FAIL("an output's sizes must be >= 0 and its size below 2^59 elements");
            count[i] *= eo->dims[d];
        }
        eo->bytes = count[i] * es;
        e->total += eo->bytes;
    }
    for (Py_ssize_t i = 0; i < n_pass; i++) {
        Pass *mp = &e->passes[i];
        mp->kernel = PASS_MOVE;
        Py_buffer pb;
        int kind;
        if (!PyTuple_Check(PyTuple_GET_ITEM(passes, i)))
            PUT_MOVE_FAIL("each pass must be a tuple (kind, src, dst, params, threads[, checked])");
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(passes, i), "iiiy*i|p", &kind, &mp->src, &mp->dst, &pb,
                              &mp->threads, &mp->checked))
            goto fail;
        if (kind >= TUNED_PASS) {                /* a tuned kernel: the whole program, one input and output */
            const int code = kind - TUNED_PASS;
            const int sized = code < ODML_KERNEL_COUNT && pb.len == (Py_ssize_t)odml_kernel_size[code];
            if (sized) memcpy(&mp->p.k, pb.buf, odml_kernel_size[code]);
            PyBuffer_Release(&pb);
            if (!sized || n_pass != 1 || n_in != 1 || n_out != 1 || mp->src != 0 || mp->dst != 0)
                PUT_MOVE_FAIL("a tuned pass is a program's one pass, of one input and output, its parameters the "
                              "bytes of its kernel's block (params.h)");
            /* the block's words (its first field) whole elements of the input's type, which the output shares, and
             * the output that many bytes: a served call cannot write past it */
            const int64_t bes = mp->p.k.copy.element_size, written = tuned_count(code, &mp->p.k);
            if (in_size[0] != out_size[0] || bes < in_size[0] || bes > 8 || bes % in_size[0]
                    || written < 0 || !odml_mul_le(written, bes, ODML_LIMIT) || written * bes != e->outs[0].bytes)
                PUT_MOVE_FAIL("a tuned pass's block must write its output's bytes, in words of whole elements of "
                              "the input's type, which the output shares");
            if (mp->threads < 1 || mp->threads > ODML_MAX_THREADS) goto refuse;
            mp->kernel = code;
            continue;
        }
        if (kind == 2) {                         /* an index-driven pass: index.c's parameters */
            const int sized = pb.len == (Py_ssize_t)sizeof(idx_params);
            idx_params *ip = sized ? PyMem_Malloc(sizeof *ip) : NULL;
            if (ip) memcpy(ip, pb.buf, sizeof *ip);
            PyBuffer_Release(&pb);
            if (!sized) PUT_MOVE_FAIL("an index pass's parameters must be the bytes of idx_params (index.h)");
            if (!(mp->index = ip)) {
                PyErr_NoMemory();
                goto fail;
            }
            mp->kernel = PASS_INDEX;
            if (!index_pass_fits(mp, ip, span, in_size, count, out_size, n_in, (int)n_out)) goto refuse;
            continue;
        }
        mp->fill = kind;
        if (pb.len != (Py_ssize_t)sizeof(odml_cpu_move_params)) {
            PyBuffer_Release(&pb);
            PUT_MOVE_FAIL("a pass's parameters must be the bytes of odml_cpu_move_params (move.h)");
        }
        memcpy(&mp->p.move, pb.buf, sizeof(odml_cpu_move_params));
        PyBuffer_Release(&pb);
        const int ready = move_pass_ready(mp, span, in_size, count, out_size, n_in, (int)n_out);
        if (ready < 0) goto fail;
        if (!ready) goto refuse;
    }
    for (int i = 0; i < e->n_pass; i++)            /* threads writing a fresh large output: its pages faulted first */
        e->prefault |= e->total >= PREFAULT_BYTES && e->passes[i].threads > 1;
    result = stored(&k, e);
    goto release;
refuse:
    Py_DECREF(e);
    result = Py_NewRef(Py_False);
    goto release;
fail:
    Py_DECREF(e);
release:
    for (int i = 0; i < n_in; i++) Py_DECREF(in[i]);
    return result;
}

/* x, or the first item of an exact list or tuple x (NULL where empty) */
static PyObject *first_of(PyObject *x) {
    Py_ssize_t n;
    PyObject **items = seq_items(x, &n);
    return !items ? x : n > 0 ? items[0] : NULL;
}

/* Whether x's first tensor (first_of's) is a CUDA one (0 where that cannot be read). */
static int torch_input_cuda(PyObject *x) {
    PyObject *first = Py_NewRef(first_of(x));
    const int cuda = is_true(PyObject_GetAttr(first, s_is_cuda));
    Py_DECREF(first);
    if (PyErr_Occurred()) drop_error();
    return cuda;
}

/* A NumPy view of t, a plain PyTorch CPU tensor (torch_plain_in 1, not a negative view); NULL, no exception left,
 * for anything else. */
static PyObject *torch_view(PyObject *t) {
    odml_torch_info in;
    if (!t_type || Py_TYPE(t) != (PyTypeObject *)t_type || torch_plain_in(t, &in) != 1 ||
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

/* result (taken) handed to torch.from_numpy as the Python route does (None and NULL as they are) */
static PyObject *torch_outputs(PyObject *result) {
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

/* The family on PyTorch CPU tensors: fn (move_call, or move_new for a new shape) run on NumPy views of the tensors
 * args[xi] (which the Python route records: the same key), its outputs through torch_outputs. */
static PyObject *torch_views(PyObject *const *args, Py_ssize_t nargs, int xi, move_fn fn) {
    PyObject *x = args[xi], *view, *call[MAX_MOVE_ARGS], *result;
    if (nargs > MAX_MOVE_ARGS) Py_RETURN_NONE;
    Py_ssize_t n, m;
    PyObject **items = seq_items(x, &n);
    if (items) {                                              /* JOIN's arrays: a tuple of views */
        if (n < 1 || n > MAX_MOVE_IO) Py_RETURN_NONE;
        view = PyTuple_New(n);
        if (!view) return NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            /* re-read the container each time: a view's making may run Python code */
            PyObject *item = (items = seq_items(x, &m)) && m == n ? Py_NewRef(items[i]) : NULL;
            PyObject *v = item ? torch_view(item) : NULL;
            Py_XDECREF(item);
            if (!v) {
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
    call[xi] = view;
    result = fn(call, nargs);
    Py_DECREF(view);
    return torch_outputs(result);
}

static PyObject *move_call(PyObject *const *args, Py_ssize_t nargs) { return numpy_move(args, nargs, 0); }

int torch_view_key(Key *k, PyObject *op, PyObject *const *args, Py_ssize_t nargs, const odml_torch_info *in) {
    const int64_t t = torch_type(in->dtype);
    const int64_t es = t ? odml_type_size[t] : 0;
    return !t || in->ndim > MAX_RANK || key_call(k, KIND_MOVE, op, args, nargs) < 0 || put(k, -1) < 0
           || put(k, move_npy_type[t]) < 0 || put(k, es) < 0 || put_layout(k, in->ndim, in->sizes, in->strides, es) < 0
           ? -1 : 0;
}

int torch_move_key(Key *k, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *x = args[1];
    odml_torch_info in;
    int64_t device;
    uint64_t ptr;
    PyArrayObject *view[MAX_MOVE_IO];
    int n;
    if (torch_plain_in(x, &in) == 2)
        return cuda_move_key(k, 1, args[0], args + 2, nargs - 2, &x, 1, 0, &device, &ptr, NULL);
    if (in.ndim >= 0) return in.device == -1 ? torch_view_key(k, args[0], args + 2, nargs - 2, &in) : -1;
    PyObject *v = torch_view(x);
    const int rc = v ? move_key(k, args[0], v, args + 2, nargs - 2, view, &n) : -1;
    Py_XDECREF(v);
    return rc;
}

/* A repeated call on one plain PyTorch CPU tensor the accessors described (in), served from its NumPy view's entry
 * (torch_view_key) without making the view; None where there is none. */
static PyObject *torch_cpu_move(PyObject *const *args, Py_ssize_t nargs, const odml_torch_info *in) {
    Key k;
    if (torch_view_key(&k, args[0], args + 2, nargs - 2, in) < 0) Py_RETURN_NONE;
    Entry *e = lookup(&k, 1);
    if (!e) Py_RETURN_NONE;
    char *data = (char *)(uintptr_t)in->data_ptr;
    /* (a tuned pass's output: the recorded dtype, the view's own, a plain one) */
    return torch_outputs(serve_cpu(e, NULL, &data, NULL, 1, NULL, 0));
}

PyObject *torch_call(PyObject *const *args, Py_ssize_t nargs) {
    PyObject *x = args[1];
    if (Py_TYPE(x) == (PyTypeObject *)t_type) {
        odml_torch_info in;
        const int where = torch_plain_in(x, &in);
        if (PyErr_Occurred()) drop_error();
        if (where == 3) return eager_call(args, nargs, x);
        if (where == 2) return cuda_move(args, nargs, 1);
        if (where != 1) Py_RETURN_NONE;
        if (in.ndim >= 0) return torch_cpu_move(args, nargs, &in);
    } else if (torch_input_cuda(x)) {
        return cuda_move(args, nargs, 1);
    }
    return torch_views(args, nargs, 1, move_call);
}

/* -- The move program's entries on CUDA memory: PyTorch CUDA tensors and CuPy arrays ------------------- */

/* What is recorded and served: runtime/calls.py's put_move_cuda. The key: KIND_MOVE_TORCH or KIND_MOVE_CUPY, the
 * operator, the arguments, then each input's dtype, shape, strides, device (one for all) and address mod 16. The
 * entry's Launch objects own the parameter structures (copied by each launch: nothing queued reads the entry). */

/* The framework of x (one array, or the first of a list or tuple): 1 PyTorch, 2 CuPy, else 0. */
static int cuda_framework(PyObject *x) {
    if (!(x = first_of(x))) return 0;
    if (t_type && Py_TYPE(x) == (PyTypeObject *)t_type) return 1;
    if (c_type && Py_TYPE(x) == (PyTypeObject *)c_type) return 2;
    return 0;
}

int arrays_of(PyObject *x, PyTypeObject *type, PyObject **in, int *seq) {
    Py_ssize_t n;
    PyObject **items = Py_TYPE(x) == type ? NULL : seq_items(x, &n);
    if (!(*seq = items != NULL)) {
        in[0] = x;
        return Py_TYPE(x) == type ? 1 : -1;
    }
    if (n < 1 || n > MAX_MOVE_IO) return -1;
    for (Py_ssize_t i = 0; i < n; i++)
        if (Py_TYPE(in[i] = items[i]) != type) return -1;
    return (int)n;
}

/* x's tensors or CuPy arrays (arrays_of's) as new references in in[], their count in *n; -1 (nothing held) where x
 * is not such. No Python code runs between the checks and the copy: a list changed later cannot mislead the key. */
int cuda_inputs(PyObject *x, int torch, PyObject **in, int *n, int *seq) {
    if ((*n = arrays_of(x, (PyTypeObject *)(torch ? t_type : c_type), in, seq)) < 0) return -1;
    for (int i = 0; i < *n; i++) Py_INCREF(in[i]);
    return 0;
}

/* Input x's key words (torch 2: torch_plain_key's, 1: torch_key's, 0: cupy_key's), its device and address. */
static int input_key(Key *k, int torch, PyObject *x, int64_t *device, uint64_t *ptr) {
    return torch == 2 ? torch_plain_key(k, x, device, ptr) : torch ? torch_key(k, x, device, ptr)
                                                                    : cupy_key(k, x, device, ptr);
}

/* The key of a family call on CUDA memory, the inputs' addresses in ptr[], their one device in *device, where each
 * input's words start in at[] (where not NULL); -1: no key (inputs on several devices too). */
int cuda_move_key(Key *k, int torch, PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject **in, int n,
                  int seq, int64_t *device, uint64_t *ptr, int *at) {
    int64_t dev;
    if (key_call(k, torch ? KIND_MOVE_TORCH : KIND_MOVE_CUPY, op, args, nargs) < 0) return -1;
    if (put(k, seq ? -2 : -1) < 0 || (seq && put(k, n) < 0)) return -1;
    for (int i = 0; i < n; i++) {
        if (at) at[i] = k->n;
        if (input_key(k, torch, in[i], &dev, &ptr[i]) < 0 || dev < 0 || (i > 0 && dev != *device)) return -1;
        *device = dev;
    }
    return 0;
}

/* runtime/cuda/index.py's function `name` on what `format` builds (its retry of a launch or memset that failed here,
 * a thread without the device's context): 0, or -1 with its exception. */
static int index_py(const char *name, const char *format, ...) {
    va_list v;
    va_start(v, format);
    PyObject *args = Py_VaBuildValue(format, v);
    va_end(v);
    PyObject *m = args ? PyImport_ImportModule("opendml.runtime.cuda.index") : NULL;
    PyObject *f = m ? PyObject_GetAttrString(m, name) : NULL;
    PyObject *r = f ? PyObject_CallObject(f, args) : NULL;
    Py_XDECREF(args);
    Py_XDECREF(m);
    Py_XDECREF(f);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

#define CHECK_SPIN_GRID 4096          /* the largest grid whose checked wait is the done word's */
#define INDEX_BLOCK 4096                /* the largest CUDA index parameter block taken (index.cu's is ~2.5 KiB) */

/* One index-driven pass of a CUDA entry: its kernel launched with its block and this call's addresses (a checked
 * pass: `flag` in each checked axis; `fin`, where not NULL: the done word and counter the last checked launch
 * signals), or the backend's IndexPass called with them (a mode needing scratch; a failed launch: it retries and
 * raises). A checked pass whose launch fails is not retried: 1, the route runs the call. -1 with an exception. */
static int index_launch(const Entry *e, const Pass *s, const uint64_t *ptr, const uint64_t *dsts, uint64_t stream,
                        uint64_t flag, const uint64_t *fin) {
    uint64_t src[MAX_MOVE_IO], block[INDEX_BLOCK / 8];
    char *b = (char *)block;
    for (int i = 0; i < e->n_in; i++) src[i] = ptr[i] - (uint64_t)e->origin[i];
    if (s->function) {
        const uint64_t from = s->src < 0 ? dsts[s->dst] : src[s->src];
        memcpy(b, s->index, (size_t)s->index_size);
        memcpy(b + s->at_src, &from, 8);
        memcpy(b + s->at_dst, &dsts[s->dst], 8);
        for (int a = 0; a < s->naxes; a++) memcpy(b + s->at_idx + 8 * a, &src[s->slot[a]], 8);
        for (int a = 0; a < s->n_flag; a++) memcpy(b + s->at_flag[a], &flag, 8);
        if (s->aux) memcpy(b + offsetof(odml_ix_params, aux), &dsts[s->aux - 1], 8);   /* the owner table */
        if (fin) memcpy(b + offsetof(odml_ix_params, done), fin, 16);      /* (ix_finish: done, count) */
        /* above 48 KiB of shared memory the kernel opts in (IndexPass sets it for its own launches) */
        if ((s->shared <= 48 * 1024 || odml_cuda_shared_limit(s->function, s->shared) == 0)
                && odml_cuda_launch_block(s->function, s->grid, s->block, s->shared, stream, b) == 0)
            return 0;
    }
    if (s->n_flag) return 1;
    if (!s->launch)                          /* an entry C made (newshape_index.c): index.py's relaunch retries */
        return index_py("relaunch", "LKIIy#K", (long long)e->device, (unsigned long long)s->function, s->grid,
                        s->shared, b, (Py_ssize_t)s->index_size, (unsigned long long)stream);
    PyObject *ins = PyTuple_New(e->n_in), *outs = PyTuple_New(e->n_out), *r = NULL;
    for (int i = 0; ins && i < e->n_in; i++) PyTuple_SET_ITEM(ins, i, PyLong_FromUnsignedLongLong(src[i]));
    for (int i = 0; outs && i < e->n_out; i++) PyTuple_SET_ITEM(outs, i, PyLong_FromUnsignedLongLong(dsts[i]));
    if (ins && outs && !PyErr_Occurred())
        r = PyObject_CallFunction(s->launch, "OOK", ins, outs, (unsigned long long)stream);
    Py_XDECREF(ins);
    Py_XDECREF(outs);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

int cuda_entry_launch(const Entry *e, const uint64_t *ptr, const uint64_t *dsts, uint64_t stream, CheckWait *w) {
    int slot = -1, rc = 0, last = -1;
    uint64_t flag = 0, fin[2] = {0, 0};
    w->slot = -1;
    if (e->checked && odml_cuda_check_begin(stream, &slot, &flag, fin) < 0) return 1;
    for (int i = 0; i < e->n_pass; i++)         /* the last checked launch says when the check is done */
        if (e->passes[i].kernel == PASS_INDEX && e->passes[i].n_flag) last = i;
    /* only a small grid's: a long kernel outlasts the spin (cuda_launch.c's CHECK_SPIN_NS), after which the stream's
     * wait costs more than alone; CHECK_SPIN_GRID blocks move at most ~64 MB */
    if (last >= 0 && (!fin[0] || e->passes[last].index_size < (int)sizeof(odml_ix_params)
                      || e->passes[last].grid > CHECK_SPIN_GRID))
        last = -1;
    for (int i = 0; i < e->n_out; i++) {        /* owner tables (int32, after the outputs) zeroed on the stream */
        const Out *o = &e->outs[i];
        int64_t words = 1;
        if (!o->zero) continue;
        for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(o->shape); d++)
            words *= PyLong_AsLongLong(PyTuple_GET_ITEM(o->shape, d));
        if (PyErr_Occurred() || words < 1) {
            if (PyErr_Occurred()) drop_error();
            rc = 1;                              /* (declined: the route runs the call) */
            break;
        }
        if (odml_cuda_zero_words(dsts[i], (size_t)words, stream) != 0       /* index.py's zero_words retries */
                && (rc = index_py("zero_words", "LKLK", (long long)e->device, (unsigned long long)dsts[i],
                                  (long long)words, (unsigned long long)stream)) < 0)
            break;
    }
    for (int i = 0; i < e->n_pass && rc == 0; i++) {
        const Pass *s = &e->passes[i];
        rc = s->kernel == PASS_INDEX ? index_launch(e, s, ptr, dsts, stream, s->n_flag ? flag : 0,
                                                    i == last ? fin : NULL)
           : launch_pass(e, s, s->src >= 0 ? ptr[s->src] - (uint64_t)e->origin[s->src] : dsts[s->dst],
                         dsts[s->dst], stream);
    }
    w->slot = slot;                          /* (after a failed launch too: what was queued may write the slot) */
    w->signalled = rc == 0 && last >= 0;
    return rc;
}

int cuda_entry_wait(uint64_t stream, CheckWait *w, int rc) {
    if (w->slot >= 0) {
        const int set = odml_cuda_check_end(stream, w->slot, w->signalled);
        w->slot = -1;
        if (rc == 0 && set) rc = 1;
    }
    return rc;
}

/* An index step of put_move_cuda: (function, grid, block, shared, params, src, dst, launch, (at_src, at_dst, at_idx,
 * slots, flags)), flags the offsets in params of a checked call's flag address (ix_axis.flag; only with a function);
 * 0, or -1 with an exception. */
static int index_step(Pass *s, PyObject *t, int n_in, int n_out) {
    unsigned long long function, grid, block, shared;
    Py_buffer pb;
    PyObject *launch, *slots, *flags;
    if (!PyArg_ParseTuple(t, "KKKKy*iiO(iiiO!O!)", &function, &grid, &block, &shared, &pb, &s->src, &s->dst,
                          &launch, &s->at_src, &s->at_dst, &s->at_idx, &PyTuple_Type, &slots, &PyTuple_Type, &flags))
        return -1;
    const Py_ssize_t size = pb.len, naxes = PyTuple_GET_SIZE(slots);
    s->index = size ? PyMem_Malloc((size_t)size) : NULL;
    if (s->index) memcpy(s->index, pb.buf, (size_t)size);
    PyBuffer_Release(&pb);
    if (size && !s->index) {
        PyErr_NoMemory();
        return -1;
    }
    s->kernel = PASS_INDEX;
    s->function = function;
    s->grid = (unsigned)grid;
    s->block = (unsigned)block;
    s->shared = (unsigned)shared;
    s->index_size = (int)size;
    s->naxes = (int)naxes;
    int ok = naxes <= IDX_MAX_AXES && s->src >= -1 && s->src < n_in && s->dst >= 0 && s->dst < n_out &&
             PyCallable_Check(launch);
    for (Py_ssize_t a = 0; ok && a < naxes; a++) {
        long v = PyLong_AsLong(PyTuple_GET_ITEM(slots, a));
        ok = v >= 0 && v < n_in;
        s->slot[a] = (int)v;
    }
    const Py_ssize_t n_flag = PyTuple_GET_SIZE(flags);
    ok = ok && n_flag <= IDX_MAX_AXES && (!n_flag || function);
    s->n_flag = ok ? (int)n_flag : 0;
    for (Py_ssize_t a = 0; ok && a < n_flag; a++) {
        long v = PyLong_AsLong(PyTuple_GET_ITEM(flags, a));
        ok = v >= 0 && v <= size - 8;
        s->at_flag[a] = (int)v;
    }
    if (ok && function)
        ok = grid >= 1 && grid <= 0x7fffffffu && block >= 1 && block <= 1024 && shared <= 0xffffffffu &&
             size <= INDEX_BLOCK && s->at_src >= 0 && s->at_src <= size - 8 && s->at_dst >= 0 &&
             s->at_dst <= size - 8 && s->at_idx >= 0 && s->at_idx <= size - 8 * naxes;
    if (!ok) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "call_cache_put_move (CUDA): an index launch needs src in [-1, inputs), "
                            "dst in [0, outputs), axis slots in [0, inputs), a callable launch and, with a function, "
                            "grid, block, shared and a parameter block of at most 4096 bytes holding its addresses "
                            "(and the flag offsets of a checked pass, which needs a function)");
        return -1;
    }
    s->launch = Py_NewRef(launch);
    return 0;
}

/* Whether the inputs still read as their words in k (input i's from at[i]: cuda_move_key's) and lie at ptr: an
 * allocation may have run Python code that changed one (x.set_(), x.resize_()). The call's arguments are not read
 * again: the call is answered for the arguments it was given. */
int inputs_still_keyed(const Key *k, const int *at, int torch, PyObject **in, int n, const uint64_t *ptr) {
    for (int i = 0; i < n; i++) {
        Key now;
        int64_t device;
        uint64_t p;
        const int end = i + 1 < n ? at[i + 1] : k->n;
        now.n = 0;
        if (input_key(&now, torch, in[i], &device, &p) < 0 || p != ptr[i] || now.n != end - at[i] || !same_words(now.w, k->w + at[i], now.n)) return 0;
    }
    return 1;
}

/* A repeated call on PyTorch CUDA tensors (torch 1) or CuPy arrays (0): its output(s), or None (the Python route). */
PyObject *cuda_move(PyObject *const *args, Py_ssize_t nargs, int torch) {
    Key k;
    PyObject *in[MAX_MOVE_IO], *outs[MAX_MOVE_IO] = {NULL}, *result = NULL;
    uint64_t ptr[MAX_MOVE_IO], dsts[MAX_MOVE_IO], stream;
    int64_t device = -1, dst;
    int n = 0, seq = 0, at[MAX_MOVE_IO];
    Entry *e = NULL;
    if (cuda_inputs(args[1], torch, in, &n, &seq) < 0) Py_RETURN_NONE;
    if (cuda_move_key(&k, torch ? 2 : 0, args[0], args + 2, nargs - 2, in, n, seq, &device, ptr, at) < 0
            || !(e = lookup(&k, n)) || !cuda_device_is(torch, device))
        goto route;
    for (int i = 0; i < e->n_out; i++) {
        int placed;
        outs[i] = cuda_empty(torch, in[0], &e->outs[i], e->outs[i].dtype, &dst, &placed);
        if (!outs[i]) {                            /* the allocator's error (out of memory): the route raises */
            result = allocation_failed();
            goto done;
        }
        if (!placed) goto route;
        dsts[i] = (uint64_t)dst;
    }
    if (torch && !inputs_still_keyed(&k, at, torch, in, n, ptr)) goto route;
    if (cuda_stream(torch, device, &stream) < 0) goto done;
    {
        CheckWait w;
        const int rc = cuda_entry_wait(stream, &w, cuda_entry_launch(e, ptr, dsts, stream, &w));
        if (rc < 0) goto done;
        if (rc > 0) goto route;                    /* a checked index out of range: the route raises its error */
    }
    result = take_outputs(outs, e->n_out, e->multi);
    if (!result) goto done;
    hits++;
    goto done;
route:
    result = Py_NewRef(Py_None);
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

/* call_cache_put_move on PyTorch CUDA tensors or CuPy arrays: runtime/calls.py's put_move_cuda, a step (function,
 * grid, block, shared, params, src, dst, launch) per launch (src -1: a fill; launch the backend's Launch, owning the
 * parameters at host address params) or index_step's. False where the call has no key or an origin is outside [0,
 * the input's address]; ValueError for a malformed record. */
static PyObject *put_move_cuda(PyObject *op, PyObject *x, PyObject *call_args, PyObject *outs, PyObject *origins,
                               PyObject *steps, int multi, int torch, PyObject *planned) {
    PyObject *in[MAX_MOVE_IO];
    int n_in = 0, seq = 0;
    int64_t device = -1;
    uint64_t ptr[MAX_MOVE_IO];
    Key k;
    Entry *e = NULL;
    if (cuda_inputs(x, torch, in, &n_in, &seq) < 0)
        return with_deferred(Py_NewRef(Py_False));
    /* (read with the key: an input another thread changed after its launches were planned is not recorded) */
    int same = planned == Py_None || (PyTuple_Check(planned) && PyTuple_GET_SIZE(planned) == n_in);
    for (int i = 0; same && planned != Py_None && i < n_in; i++)
        same = still_planned(in[i], PyTuple_GET_ITEM(planned, i), torch);
    const int keyed = same && cuda_move_key(&k, torch, op, ((PyTupleObject *)call_args)->ob_item,
                                            PyTuple_GET_SIZE(call_args), in, n_in, seq, &device, ptr, NULL) == 0;
    for (int i = 0; i < n_in; i++) Py_DECREF(in[i]);
    if (PyErr_Occurred()) drop_error();
    if (!keyed) return with_deferred(Py_NewRef(Py_False));
    Py_ssize_t n_out = PyTuple_GET_SIZE(outs), n_step = PyTuple_GET_SIZE(steps);
    if (n_out < 1 || PyTuple_GET_SIZE(origins) != n_in) {
        PyErr_SetString(PyExc_ValueError, "call_cache_put_move (CUDA): at least one output and one origin per "
                        "input are required");
        return NULL;
    }
    if (n_out > MAX_MOVE_IO || n_step > MAX_MOVE_PASSES) Py_RETURN_FALSE;   /* (SPLIT into 17): the route serves */
    e = entry_alloc(torch ? KIND_MOVE_TORCH : KIND_MOVE_CUPY, (int)n_out, (int)n_step);
    if (!e) return NULL;
    e->n_in = n_in;
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
        e->outs[i].shape = Py_NewRef(shape);
        e->outs[i].dtype = Py_NewRef(dtype);
        e->outs[i].dst_align = (unsigned)align;
    }
    for (Py_ssize_t i = 0; i < n_step; i++) {
        PyObject *t = PyTuple_GET_ITEM(steps, i);
        Pass *s = &e->passes[i];
        unsigned long long v[5];
        if (PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 9) {        /* an index launch */
            if (index_step(s, t, n_in, (int)n_out) < 0) goto fail;
            e->checked |= s->n_flag > 0;
            continue;
        }
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
        s->launch = Py_NewRef(launch_obj);
    }
    return stored(&k, e);
fail:
    Py_XDECREF(e);
    return NULL;
}

PyObject *new_shape(PyObject *const *args, Py_ssize_t nargs, int xi, int ci, CudaNew *how, move_fn cpu) {
    const int fw = numpy_ready ? cuda_framework(args[xi]) : 0;
    if (fw == 2 || (fw == 1 && torch_input_cuda(args[xi]))) {
        if (!how || nargs <= ci || args[ci] == Py_None) return with_deferred(Py_NewRef(Py_None));
        PyObject *conf = PyObject_CallNoArgs(args[ci]);
        PyObject *out = conf ? cuda_new(args[0], args[xi], args[xi + 1], args[xi + 2], fw == 1, conf, how) : NULL;
        Py_XDECREF(conf);
        return with_deferred(out);
    }
    return with_deferred(fw == 1 && t_from_numpy ? torch_views(args, nargs, xi, cpu) : cpu(args, nargs));
}
#endif

PyObject *odml_py_call_cache_move(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
#ifdef ODML_NUMPY
    if (!enabled || nargs < 2 || !table || !numpy_ready) Py_RETURN_NONE;
    const int fw = cuda_framework(args[1]);
    return with_deferred(fw == 2 ? cuda_move(args, nargs, 0) : fw == 1 && t_from_numpy ? torch_call(args, nargs)
                                                                                     : numpy_move(args, nargs, 0));
#else
    (void)args; (void)nargs;
    Py_RETURN_NONE;
#endif
}

PyObject *odml_py_call_cache_put_move(PyObject *self, PyObject *args) {
    (void)self;
#ifdef ODML_NUMPY
    PyObject *op, *x, *call_args, *outs, *origins, *passes, *planned = Py_None;
    int multi;
    unsigned long long gen;
    if (!PyArg_ParseTuple(args, "OOO!O!O!O!pK|O", &op, &x, &PyTuple_Type, &call_args, &PyTuple_Type, &outs,
                          &PyTuple_Type, &origins, &PyTuple_Type, &passes, &multi, &gen, &planned))
        return NULL;
    if (!enabled || gen != generation) return with_deferred(Py_NewRef(Py_False));
    const int fw = cuda_framework(x);                     /* NumPy records come with NumPy arrays (views) */
    return fw ? put_move_cuda(op, x, call_args, outs, origins, passes, multi, fw == 1, planned)
              : put_move(op, x, call_args, outs, origins, passes, multi, planned);
#else
    (void)args;
    Py_RETURN_FALSE;
#endif
}

PyObject *odml_py_call_cache_move_types(PyObject *self, PyObject *types) {
    (void)self;
    int ok = PyTuple_CheckExact(types);
    for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(types); i++) ok = PyType_Check(PyTuple_GET_ITEM(types, i));
    if (!ok) {
        PyErr_SetString(PyExc_TypeError, "call_cache_move_types: a tuple of types is required");
        return NULL;
    }
    Py_INCREF(types);
    Py_XSETREF(move_types, types);
    drop_all();
    Py_RETURN_NONE;
}

