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
    int64_t t = moved / grain;
    if (t > most) t = most;
    if (t < 1) t = 1;
    if (t > ODML_MAX_THREADS) Py_RETURN_NONE;
    npy_intp dims[ODML_MAX_RANK];
    for (int i = 0; i < n; i++) dims[i] = (npy_intp)sz[i];
    PyArray_Descr *descr = PyArray_DESCR(x);
    Py_INCREF(descr);                            /* PyArray_NewFromDescr steals it */
    PyObject *out = PyArray_NewFromDescr(&PyArray_Type, descr, n, dims, NULL, NULL, 0, NULL);
    if (out == NULL) {                           /* the Python route raises the error that names it */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    int threads = (int)t, status;
    const char *error = NULL;
    char *dst = PyArray_BYTES((PyArrayObject *)out);
    const char *low = PyArray_BYTES(x) - origin_bytes;
    Py_BEGIN_ALLOW_THREADS
    status = odml_copy(dst, low, &p, threads, &error);
    Py_END_ALLOW_THREADS
    if (status != ODML_OK) {
        Py_DECREF(out);
        if (status == ODML_ENOMEM) return PyErr_NoMemory();
        PyErr_Format(PyExc_ValueError, "opendml.runtime.cpu._native.copy: %s", error ? error : "bad parameters");
        return NULL;
    }
    return Py_BuildValue("(Ny#iL)", out, (const char *)&p, (Py_ssize_t)sizeof p, threads, (long long)origin_bytes);
#endif
}
