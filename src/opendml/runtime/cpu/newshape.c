/* copy_params: a CopyPlan's canonical form packed as odml_copy_params, in C
 * (issue 19: a call on a shape never seen before lowers and packs its plan on
 * every call, so this arithmetic is on the path of every new shape).
 *
 * copy_params(element_size, sizes, in_offset, in_strides, out_offset,
 * out_strides) -> bytes, or None
 *
 * The bytes equal those of runtime/params.py's CopyParams filled from
 * opendml.plan.CopyPlan(...).canonical() (CpuBackend._native_copy's Python
 * route): size-1 dimensions dropped; where the dimensions already come by
 * output stride, then |input stride|, largest first (and no output stride is
 * negative), one pass; otherwise a stable sort on that key, largest first;
 * neighbours that walk memory as one merged; no dimension left -> one of size 1
 * and strides 1. None (the caller then takes the Python route) for anything
 * else: not tuples of ints, lengths that differ or exceed ODML_MAX_RANK, a
 * value outside 64 bits, a count that overflows. No rule of DirectML is
 * checked here: the plan comes from a validated description. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "common.h"

#ifdef ODML_NUMPY
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#endif

/* Read o into *v; -1 (no exception left set) where it is not an int in 64 bits. */
static int read_i64(PyObject *o, int64_t *v) {
    if (!PyLong_CheckExact(o)) return -1;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return -1;
    }
    *v = (int64_t)x;
    return 0;
}

/* Read the n entries of tuple t into v, as read_i64. */
static int read_i64s(PyObject *t, Py_ssize_t n, int64_t *v) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (read_i64(PyTuple_GET_ITEM(t, i), &v[i])) return -1;
    return 0;
}

static int64_t absv(int64_t x) { return x < 0 ? -x : x; }

/* The sort key's order: dimension a comes before b where (out, |in|) of a is
 * larger. */
static int before(const int64_t *a, const int64_t *b) {
    if (a[2] != b[2]) return a[2] > b[2];
    return absv(a[1]) > absv(b[1]);
}

/* The canonical form of the plan (es, n sizes sz, in_off, in strides is,
 * out_off, out strides os) packed into *p: 0, or -1 where the Python route
 * must pack it (see the file's comment). */
static int pack(int64_t es, Py_ssize_t n, const int64_t *sz, int64_t in_off, const int64_t *is, int64_t out_off,
                const int64_t *os, odml_copy_params *p) {
    /* dims[k] = (size, in stride, out stride), size-1 dimensions dropped, in order */
    int64_t dims[ODML_MAX_RANK][3];
    int m = 0, ordered = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (sz[i] == 1) continue;
        if (os[i] < 0 || is[i] == INT64_MIN) ordered = 0;
        dims[m][0] = sz[i];
        dims[m][1] = is[i];
        dims[m][2] = os[i];
        if (m > 0 && ordered && before(dims[m], dims[m - 1])) ordered = 0;
        m++;
    }
    if (!ordered) {
        for (Py_ssize_t i = 0; i < n; i++)
            if (is[i] == INT64_MIN) return -1;   /* |stride| outside 64 bits: the Python route */
        /* a stable insertion sort, largest key first */
        for (int a = 1; a < m; a++) {
            int64_t d[3] = {dims[a][0], dims[a][1], dims[a][2]};
            int b = a;
            while (b > 0 && before(d, dims[b - 1])) {
                memcpy(dims[b], dims[b - 1], sizeof dims[b]);
                b--;
            }
            memcpy(dims[b], d, sizeof d);
        }
    }
    memset(p, 0, sizeof *p);
    int r = 0;
    for (int k = 0; k < m; k++) {
        int64_t s = dims[k][0], i = dims[k][1], o = dims[k][2], ip, op;
        if (r > 0 && !__builtin_mul_overflow(i, s, &ip) && !__builtin_mul_overflow(o, s, &op)
                && p->in_strides[r - 1] == ip && p->out_strides[r - 1] == op) {
            if (__builtin_mul_overflow(p->sizes[r - 1], s, &p->sizes[r - 1])) return -1;
            p->in_strides[r - 1] = i;
            p->out_strides[r - 1] = o;
        } else {
            p->sizes[r] = s;
            p->in_strides[r] = i;
            p->out_strides[r] = o;
            r++;
        }
    }
    if (r == 0) {
        p->sizes[0] = p->in_strides[0] = p->out_strides[0] = 1;
        r = 1;
    }
    int64_t count = 1;
    for (int k = 0; k < r; k++)
        if (__builtin_mul_overflow(count, p->sizes[k], &count)) return -1;
    p->element_size = es;
    p->rank = r;
    p->count = count;
    p->in_offset = in_off;
    p->out_offset = out_off;
    return 0;
}

PyObject *odml_py_copy_params(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "copy_params(element_size, sizes, in_offset, in_strides, out_offset, "
                                         "out_strides) takes 6 arguments");
        return NULL;
    }
    PyObject *ts = args[1], *ti = args[3], *to = args[5];
    if (!PyTuple_CheckExact(ts) || !PyTuple_CheckExact(ti) || !PyTuple_CheckExact(to)) Py_RETURN_NONE;
    Py_ssize_t n = PyTuple_GET_SIZE(ts);
    if (n > ODML_MAX_RANK || PyTuple_GET_SIZE(ti) != n || PyTuple_GET_SIZE(to) != n) Py_RETURN_NONE;
    int64_t es, in_off, out_off, sz[ODML_MAX_RANK], is[ODML_MAX_RANK], os[ODML_MAX_RANK];
    if (read_i64(args[0], &es) || read_i64(args[2], &in_off) || read_i64(args[4], &out_off)
            || read_i64s(ts, n, sz) || read_i64s(ti, n, is) || read_i64s(to, n, os)) Py_RETURN_NONE;
    odml_copy_params p;
    if (pack(es, n, sz, in_off, is, out_off, os, &p)) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)&p, (Py_ssize_t)sizeof p);
}

/* Read sequence t (an exact list or tuple of n entries) as read_i64s. */
static int read_seq(PyObject *t, Py_ssize_t n, int64_t *v) {
    if (PyTuple_CheckExact(t)) {
        if (PyTuple_GET_SIZE(t) != n) return -1;
        return read_i64s(t, n, v);
    }
    if (!PyList_CheckExact(t) || PyList_GET_SIZE(t) != n) return -1;
    for (Py_ssize_t i = 0; i < n; i++)
        if (read_i64(PyList_GET_ITEM(t, i), &v[i])) return -1;
    return 0;
}

#ifdef ODML_NUMPY
static int numpy_state;   /* 0 not tried, 1 NumPy's C API ready, -1 unusable (copy_window then declines) */

static int numpy_ready(void) {
    if (numpy_state == 0) {
        if (_import_array() < 0) {
            PyErr_Clear();
            numpy_state = -1;
        } else {
            numpy_state = 1;
        }
    }
    return numpy_state > 0;
}
#endif

#ifdef ODML_NUMPY
/* The kernels as run_new calls them (their parameters by address). */
typedef int (*new_kernel)(char *dst, const char *low, const void *params, int threads, const char **error);
static int run_copy(char *dst, const char *low, const void *p, int threads, const char **error) {
    return odml_copy(dst, low, (const odml_copy_params *)p, threads, error);
}
static int run_unfold(char *dst, const char *low, const void *p, int threads, const char **error) {
    return odml_unfold(dst, low, (const odml_unfold_params *)p, threads, error);
}
static int run_scatter(char *dst, const char *low, const void *p, int threads, const char **error) {
    return odml_scatter(dst, low, (const odml_scatter_params *)p, threads, error);
}

/* The end every window function shares: threads as CpuBackend._threads
 * gives them for `work` bytes (None past ODML_MAX_THREADS), a new packed
 * array of x's dtype and the nd sizes dims (None where it cannot be
 * allocated: the Python route raises the error that names it), the kernel
 * run into it with the GIL released; (out, params bytes, threads,
 * origin_bytes), or NULL with the kernel's error (named `name`). */
static PyObject *run_new(PyArrayObject *x, int nd, npy_intp *dims, int64_t work, int64_t grain, int64_t most,
                         new_kernel kernel, const void *params, Py_ssize_t params_size, int64_t origin_bytes,
                         const char *name) {
    int64_t t = work / grain;
    if (t > most) t = most;
    if (t < 1) t = 1;
    if (t > ODML_MAX_THREADS) Py_RETURN_NONE;
    PyArray_Descr *descr = PyArray_DESCR(x);
    Py_INCREF(descr);                            /* PyArray_NewFromDescr steals it */
    PyObject *out = PyArray_NewFromDescr(&PyArray_Type, descr, nd, dims, NULL, NULL, 0, NULL);
    if (out == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    int threads = (int)t, status;
    const char *error = NULL;
    char *dst = PyArray_BYTES((PyArrayObject *)out);
    const char *low = PyArray_BYTES(x) - origin_bytes;
    Py_BEGIN_ALLOW_THREADS
    status = kernel(dst, low, params, threads, &error);
    Py_END_ALLOW_THREADS
    if (status != ODML_OK) {
        Py_DECREF(out);
        if (status == ODML_ENOMEM) return PyErr_NoMemory();
        PyErr_Format(PyExc_ValueError, "opendml.runtime.cpu._native.%s: %s", name, error ? error : "bad parameters");
        return NULL;
    }
    return Py_BuildValue("(Ny#iL)", out, (const char *)params, params_size, threads, (long long)origin_bytes);
}
#endif

/* copy_window(x, out_sizes, starts, steps, max_threads, grain_bytes,
 * limit_bytes) -> (out, params bytes, threads, origin_bytes), or None
 *
 * A window plan given in index space (the packed output's element c is the
 * input's element starts + steps * c) on NumPy array x (an exact ndarray),
 * run at once into a new packed array `out` of x's dtype and shape out_sizes.
 * What it runs is what the Python route runs: x's layout as
 * planner.array_layout gives it (element strides, a size-1 axis's taken as 0
 * where its byte stride is not a whole number of elements; origin, the
 * element offset of element 0 from the lowest-addressed element), the
 * CopyPlan(itemsize, out_sizes, origin + sum(starts * strides), steps *
 * strides, 0, packed strides) that the operator's lower() gives for that
 * layout, its parameter bytes as copy_params gives them, its threads as
 * CpuBackend._threads gives them (max(1, min(max_threads, 2 * count *
 * itemsize // grain_bytes))), the kernel odml_copy from the lowest-addressed
 * element. origin_bytes (origin * itemsize) is what the call cache's record
 * needs. None, nothing run, for anything else: not an exact ndarray, NumPy's
 * C API unusable, sequences of other lengths (one entry per axis of x, at
 * most ODML_MAX_RANK), values outside 64 bits, a byte stride that is not a
 * whole number of elements along an axis of more than one element, an output
 * of limit_bytes or more or that cannot be allocated, more than
 * ODML_MAX_THREADS threads. Nothing of DirectML's rules is checked here: the
 * caller passes a plan its operator validated. */
PyObject *odml_py_copy_window(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "copy_window(x, out_sizes, starts, steps, max_threads, grain_bytes, "
                                         "limit_bytes) takes 7 arguments");
        return NULL;
    }
#ifndef ODML_NUMPY
    Py_RETURN_NONE;
#else
    if (!numpy_ready() || Py_TYPE(args[0]) != &PyArray_Type) Py_RETURN_NONE;
    PyArrayObject *x = (PyArrayObject *)args[0];
    int n = PyArray_NDIM(x);
    if (n < 1 || n > ODML_MAX_RANK) Py_RETURN_NONE;
    int64_t es = (int64_t)PyArray_ITEMSIZE(x), most, grain, limit;
    int64_t sz[ODML_MAX_RANK], c[ODML_MAX_RANK], w[ODML_MAX_RANK], is[ODML_MAX_RANK], os[ODML_MAX_RANK];
    if (es < 1 || read_seq(args[1], n, sz) || read_seq(args[2], n, c) || read_seq(args[3], n, w)
            || read_i64(args[4], &most) || read_i64(args[5], &grain) || read_i64(args[6], &limit) || grain < 1
            || most < 1) Py_RETURN_NONE;
    const npy_intp *shape = PyArray_DIMS(x), *bs = PyArray_STRIDES(x);
    int64_t origin = 0, in_off = 0, step = 1;
    for (int i = 0; i < n; i++) {
        int64_t t = 0, v;
        if (shape[i] < 0 || sz[i] < 0) Py_RETURN_NONE;
        if ((int64_t)bs[i] % es) {
            if (shape[i] > 1) Py_RETURN_NONE;    /* the caller copies the array first */
        } else {
            t = (int64_t)bs[i] / es;
        }
        if (t < 0) {
            if (__builtin_mul_overflow((int64_t)shape[i] - 1, -t, &v) || __builtin_add_overflow(origin, v, &origin))
                Py_RETURN_NONE;
        }
        if (__builtin_mul_overflow(c[i], t, &v) || __builtin_add_overflow(in_off, v, &in_off)
                || __builtin_mul_overflow(w[i], t, &is[i])) Py_RETURN_NONE;
    }
    for (int i = n - 1; i >= 0; i--) {          /* packed output strides */
        os[i] = step;
        if (__builtin_mul_overflow(step, sz[i], &step)) Py_RETURN_NONE;
    }
    int64_t origin_bytes, nbytes, moved;
    if (__builtin_add_overflow(in_off, origin, &in_off) || __builtin_mul_overflow(origin, es, &origin_bytes)
            || __builtin_mul_overflow(step, es, &nbytes) || nbytes >= limit || nbytes < 1) Py_RETURN_NONE;
    odml_copy_params p;
    if (pack(es, n, sz, in_off, is, 0, os, &p)) Py_RETURN_NONE;
    if (__builtin_mul_overflow(p.count, es, &moved) || __builtin_mul_overflow(moved, (int64_t)2, &moved))
        Py_RETURN_NONE;
    npy_intp dims[ODML_MAX_RANK];
    for (int i = 0; i < n; i++) dims[i] = (npy_intp)sz[i];
    return run_new(x, n, dims, moved, grain, most, run_copy, &p, sizeof p, origin_bytes, "copy");
#endif
}

/* unfold_window(x, out_sizes, window, strides, dilations, start_padding,
 * blocks, max_threads, grain_bytes, tile_stride, tile_columns, limit_bytes)
 * -> (out, params bytes, threads, origin_bytes), or None
 *
 * UNFOLD of NumPy array x (an exact ndarray, N, C and d spatial axes) with
 * the fields its operator validated (d entries each; blocks per spatial axis;
 * out_sizes (N, C * prod(window), prod(blocks))), run at once into a new
 * packed array of x's dtype. What it runs is what the Python route runs: x's
 * layout as planner.array_layout gives it, the UnfoldPlan that
 * UnfoldOperatorDesc.lower() gives for it, the odml_unfold_params that
 * CpuBackend._native_unfold fills for that plan (column tiles where
 * |strides[-1] * element stride| * itemsize > tile_stride and the window has
 * more than one element), threads as CpuBackend._threads gives them for
 * the output's bytes. None, nothing run, for anything else (as copy_window:
 * not an exact ndarray, lengths, values outside 64 bits, a stride that is not
 * a whole number of elements along an axis of more than one element, an
 * output of limit_bytes or more or that cannot be allocated, more than
 * ODML_MAX_THREADS threads). No rule of DirectML is checked here. */
PyObject *odml_py_unfold_window(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "unfold_window(x, out_sizes, window, strides, dilations, start_padding, "
                                         "blocks, max_threads, grain_bytes, tile_stride, tile_columns, limit_bytes) "
                                         "takes 12 arguments");
        return NULL;
    }
#ifndef ODML_NUMPY
    Py_RETURN_NONE;
#else
    if (!numpy_ready() || Py_TYPE(args[0]) != &PyArray_Type) Py_RETURN_NONE;
    PyArrayObject *x = (PyArrayObject *)args[0];
    int rank = PyArray_NDIM(x), d = rank - 2;
    if (d < 1 || d > ODML_MAX_SPATIAL) Py_RETURN_NONE;
    int64_t es = (int64_t)PyArray_ITEMSIZE(x), most, grain, tile_stride, tile_columns, limit;
    int64_t out3[3], win[ODML_MAX_SPATIAL], st[ODML_MAX_SPATIAL], dil[ODML_MAX_SPATIAL], pad[ODML_MAX_SPATIAL];
    int64_t blk[ODML_MAX_SPATIAL], ts[ODML_MAX_RANK];
    if (es < 1 || read_seq(args[1], 3, out3) || read_seq(args[2], d, win) || read_seq(args[3], d, st)
            || read_seq(args[4], d, dil) || read_seq(args[5], d, pad) || read_seq(args[6], d, blk)
            || read_i64(args[7], &most) || read_i64(args[8], &grain) || read_i64(args[9], &tile_stride)
            || read_i64(args[10], &tile_columns) || read_i64(args[11], &limit) || grain < 1 || most < 1)
        Py_RETURN_NONE;
    const npy_intp *shape = PyArray_DIMS(x), *bs = PyArray_STRIDES(x);
    int64_t origin = 0;
    for (int i = 0; i < rank; i++) {
        int64_t t = 0, v;
        if (shape[i] < 1) Py_RETURN_NONE;
        if ((int64_t)bs[i] % es) {
            if (shape[i] > 1) Py_RETURN_NONE;    /* the caller copies the array first */
        } else {
            t = (int64_t)bs[i] / es;
        }
        if (t < 0) {
            if (__builtin_mul_overflow((int64_t)shape[i] - 1, -t, &v) || __builtin_add_overflow(origin, v, &origin))
                Py_RETURN_NONE;
        }
        ts[i] = t;
    }
    int64_t k = 1, count, nbytes, origin_bytes, inner, row;
    for (int i = 0; i < d; i++)
        if (__builtin_mul_overflow(k, win[i], &k)) Py_RETURN_NONE;
    if (out3[0] < 1 || out3[1] < 1 || out3[2] < 1 || __builtin_mul_overflow(out3[1], out3[2], &row)
            || __builtin_mul_overflow(out3[0], row, &count) || __builtin_mul_overflow(count, es, &nbytes)
            || nbytes >= limit || __builtin_mul_overflow(origin, es, &origin_bytes)
            || __builtin_mul_overflow(st[d - 1], ts[rank - 1], &inner) || inner == INT64_MIN
            || __builtin_mul_overflow(inner < 0 ? -inner : inner, es, &inner)) Py_RETURN_NONE;
    odml_unfold_params p;
    memset(&p, 0, sizeof p);
    p.element_size = es;
    p.dims = d;
    p.batch = (int64_t)shape[0];
    p.channels = (int64_t)shape[1];
    p.window_count = k;
    p.block_count = out3[2];
    p.in_offset = origin;
    p.in_batch_stride = ts[0];
    p.in_channel_stride = ts[1];
    p.out_batch_stride = row;
    p.out_row_stride = out3[2];
    p.out_column_stride = 1;
    p.column_tiles = inner > tile_stride && k > 1;
    p.tile_columns = tile_columns;
    for (int i = 0; i < d; i++) {
        odml_window_dim *w = &p.dim[i];
        w->size = (int64_t)shape[2 + i];
        w->image_stride = ts[2 + i];
        w->window = win[i];
        w->stride = st[i];
        w->dilation = dil[i];
        w->start_padding = pad[i];
        w->blocks = blk[i];
    }
    npy_intp dims[3] = {(npy_intp)out3[0], (npy_intp)out3[1], (npy_intp)out3[2]};
    return run_new(x, 3, dims, nbytes, grain, most, run_unfold, &p, sizeof p, origin_bytes, "unfold");
#endif
}

/* scatter_window(x, out_sizes, first, step, reversed, max_threads,
 * grain_bytes, limit_bytes) -> (out, params bytes, threads, origin_bytes), or
 * None
 *
 * SLICE_GRAD of NumPy array x (the input gradient, an exact ndarray) with the
 * plan its operator validated, given without x's layout (first and step per
 * dimension; reversed where the window stride is negative), run at once into
 * a new packed array of x's dtype and shape out_sizes. What it runs is what the
 * Python route runs: x's layout as planner.array_layout gives it, the
 * ScatterPlan that SliceGradOperatorDesc.lower() gives for it (a reversed
 * dimension's element stride negated and the origin moved to its last
 * element), its canonical form and odml_scatter_params as
 * numpy_kernels.canonical_scatter and CpuBackend._native_scatter give them
 * (dimensions of size 1 that take one element dropped; a stable order by
 * output stride, largest first; a fully covered dimension with step 1 merged
 * into the one outside it where that one has step 1 or takes one element and
 * both walk memory as one), threads as CpuBackend._threads gives them for
 * (output + input elements) * itemsize. None, nothing run, for anything else
 * (as copy_window). No rule of DirectML is checked here. */
PyObject *odml_py_scatter_window(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "scatter_window(x, out_sizes, first, step, reversed, max_threads, "
                                         "grain_bytes, limit_bytes) takes 8 arguments");
        return NULL;
    }
#ifndef ODML_NUMPY
    Py_RETURN_NONE;
#else
    if (!numpy_ready() || Py_TYPE(args[0]) != &PyArray_Type) Py_RETURN_NONE;
    PyArrayObject *x = (PyArrayObject *)args[0];
    int n = PyArray_NDIM(x);
    if (n < 1 || n > ODML_MAX_RANK) Py_RETURN_NONE;
    int64_t es = (int64_t)PyArray_ITEMSIZE(x), most, grain, limit;
    int64_t sz[ODML_MAX_RANK], f[ODML_MAX_RANK], stp[ODML_MAX_RANK], back[ODML_MAX_RANK], os[ODML_MAX_RANK];
    int64_t ins[ODML_MAX_RANK], taken[ODML_MAX_RANK];
    if (es < 1 || read_seq(args[1], n, sz) || read_seq(args[2], n, f) || read_seq(args[3], n, stp)
            || read_seq(args[4], n, back) || read_i64(args[5], &most) || read_i64(args[6], &grain)
            || read_i64(args[7], &limit) || grain < 1 || most < 1) Py_RETURN_NONE;
    const npy_intp *shape = PyArray_DIMS(x), *bs = PyArray_STRIDES(x);
    int64_t origin = 0, in_off, step = 1, taken_count = 1;
    for (int i = 0; i < n; i++) {
        int64_t t = 0, v;
        if (shape[i] < 1 || sz[i] < 1) Py_RETURN_NONE;
        taken[i] = (int64_t)shape[i];
        if ((int64_t)bs[i] % es) {
            if (shape[i] > 1) Py_RETURN_NONE;    /* the caller copies the array first */
        } else {
            t = (int64_t)bs[i] / es;
        }
        if (t == INT64_MIN || __builtin_mul_overflow(taken_count, taken[i], &taken_count)) Py_RETURN_NONE;
        if (t < 0) {
            if (__builtin_mul_overflow(taken[i] - 1, -t, &v) || __builtin_add_overflow(origin, v, &origin))
                Py_RETURN_NONE;
        }
        ins[i] = back[i] ? -t : t;
    }
    int64_t origin_bytes, nbytes;
    if (__builtin_mul_overflow(origin, es, &origin_bytes)) Py_RETURN_NONE;
    in_off = origin;
    for (int i = 0; i < n; i++) {
        int64_t v;
        if (back[i] && (__builtin_mul_overflow(taken[i] - 1, ins[i] == 0 ? 0 : -ins[i], &v)
                        || __builtin_add_overflow(in_off, v, &in_off))) Py_RETURN_NONE;
    }
    for (int i = n - 1; i >= 0; i--) {          /* packed output strides */
        os[i] = step;
        if (__builtin_mul_overflow(step, sz[i], &step)) Py_RETURN_NONE;
    }
    if (__builtin_mul_overflow(step, es, &nbytes) || nbytes >= limit) Py_RETURN_NONE;
    /* canonical form: (size, out stride, first, step, taken, in stride) */
    int64_t dims[ODML_MAX_RANK][6];
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (sz[i] == 1 && taken[i] == 1) continue;
        int64_t d[6] = {sz[i], os[i], f[i], stp[i], taken[i], ins[i]};
        int b = m++;
        while (b > 0 && d[1] > dims[b - 1][1]) {  /* stable: only past strictly smaller strides */
            memcpy(dims[b], dims[b - 1], sizeof dims[b]);
            b--;
        }
        memcpy(dims[b], d, sizeof d);
    }
    odml_scatter_params p;
    memset(&p, 0, sizeof p);
    int r = 0;
    for (int k = 0; k < m; k++) {
        int64_t *d = dims[k], on, in_n;
        if (r > 0) {
            int full = d[2] == 0 && d[3] == 1 && d[4] == d[0];
            int q = r - 1;
            if (full && (p.step[q] == 1 || p.taken[q] == 1) && !__builtin_mul_overflow(d[1], d[0], &on)
                    && !__builtin_mul_overflow(d[5], d[0], &in_n) && p.out_strides[q] == on
                    && p.in_strides[q] == in_n) {
                if (__builtin_mul_overflow(p.sizes[q], d[0], &p.sizes[q])
                        || __builtin_mul_overflow(p.first[q], d[0], &p.first[q])
                        || __builtin_mul_overflow(p.taken[q], d[0], &p.taken[q])) Py_RETURN_NONE;
                p.out_strides[q] = d[1];
                p.step[q] = 1;
                p.in_strides[q] = d[5];
                continue;
            }
        }
        p.sizes[r] = d[0];
        p.out_strides[r] = d[1];
        p.first[r] = d[2];
        p.step[r] = d[3];
        p.taken[r] = d[4];
        p.in_strides[r] = d[5];
        r++;
    }
    if (r == 0) {
        p.sizes[0] = p.out_strides[0] = p.step[0] = p.taken[0] = p.in_strides[0] = 1;
        p.first[0] = 0;
        r = 1;
    }
    int64_t count = 1, moved;
    for (int k = 0; k < r; k++)
        if (__builtin_mul_overflow(count, p.sizes[k], &count)) Py_RETURN_NONE;
    p.element_size = es;
    p.rank = r;
    p.count = count;
    p.in_offset = in_off;
    p.out_offset = 0;
    if (__builtin_add_overflow(count, taken_count, &moved) || __builtin_mul_overflow(moved, es, &moved))
        Py_RETURN_NONE;
    npy_intp odims[ODML_MAX_RANK];
    for (int i = 0; i < n; i++) odims[i] = (npy_intp)sz[i];
    return run_new(x, n, odims, moved, grain, most, run_scatter, &p, sizeof p, origin_bytes, "scatter");
#endif
}
