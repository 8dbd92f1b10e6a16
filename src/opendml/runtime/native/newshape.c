/* New shapes (issue 19): a call on a shape never seen before lowers and packs
 * its plan on every call, so this arithmetic is in C. This file: the plan of a
 * layout (odml_new_plan_make, newshape.h), the CPU kernels' parameters
 * (odml_new_cpu), and the Python functions copy_params, cuda_spec (the
 * CUDA launch of cuda_spec.c, for tests), and slice_lowering,
 * slice1_lowering and slice_grad_lowering (the fast path of the operators'
 * plain_lowering, which planner.plain_plan tries first; see the end of this
 * file). calls_new.c runs these plans on NumPy arrays and PyTorch tensors.
 *
 * copy_params: a CopyPlan's canonical form packed as odml_copy_params.
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

#include "cpu/common.h"
#include "newshape.h"


/* Read the n entries of tuple t into v, as odml_exact_i64. */
static int read_i64s(PyObject *t, Py_ssize_t n, int64_t *v) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (odml_exact_i64(PyTuple_GET_ITEM(t, i), &v[i])) return -1;
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
 * out_off, out strides os) packed into *p, as plan.CopyPlan.canonical and
 * runtime/cpu/backend.py's copy_params give it (tests/test_newshape_plain.py
 * compares them): 0, or -1 where the Python route
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
    if (odml_arity("copy_params(element_size, sizes, in_offset, in_strides, out_offset, "
                   "out_strides)", nargs, 6, 6))
        return NULL;
    PyObject *ts = args[1], *ti = args[3], *to = args[5];
    if (!PyTuple_CheckExact(ts) || !PyTuple_CheckExact(ti) || !PyTuple_CheckExact(to)) Py_RETURN_NONE;
    Py_ssize_t n = PyTuple_GET_SIZE(ts);
    if (n > ODML_MAX_RANK || PyTuple_GET_SIZE(ti) != n || PyTuple_GET_SIZE(to) != n) Py_RETURN_NONE;
    int64_t es, in_off, out_off, sz[ODML_MAX_RANK], is[ODML_MAX_RANK], os[ODML_MAX_RANK];
    if (odml_exact_i64(args[0], &es) || odml_exact_i64(args[2], &in_off) || odml_exact_i64(args[4], &out_off)
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
        if (odml_exact_i64(PyList_GET_ITEM(t, i), &v[i])) return -1;
    return 0;
}

/* -- the plan of a layout (newshape.h) --------------------------------------------------------------- */

/* Each mirrors its operator's lower() on a layout (ops/slice.py and ops/slice1.py SliceOperatorDesc.lower and
 * Slice1OperatorDesc.lower: plan_copy; ops/unfold.py UnfoldOperatorDesc.lower: plan_unfold; ops/slice_grad.py
 * SliceGradOperatorDesc.lower: plan_scatter), from plain_plan's fields; tests/test_newshape_plain.py runs each
 * route against the one through descriptions and plans (same bytes, same call-cache record). */
static int plan_copy(const odml_layout *L, PyObject *const *f, odml_new_plan *pl) {
    const int n = L->n;
    int64_t sz[ODML_MAX_RANK], c[ODML_MAX_RANK], w[ODML_MAX_RANK], is[ODML_MAX_RANK], os[ODML_MAX_RANK];
    if (read_seq(f[0], n, sz) || read_seq(f[1], n, c) || read_seq(f[2], n, w)) return -1;
    int64_t in_off = pl->origin, step = 1, v, last;
    for (int i = 0; i < n; i++) {
        const int64_t t = L->strides[i];
        /* every element read inside the input: the fields were checked against the shape plain_plan saw, which
         * another thread may have changed since (x.resize_, x.shape = ...) */
        if (sz[i] < 1 || c[i] < 0 || c[i] >= L->shape[i] || __builtin_mul_overflow(w[i], sz[i] - 1, &last)
                || __builtin_add_overflow(c[i], last, &last) || last < 0 || last >= L->shape[i]) return -1;
        if (__builtin_mul_overflow(c[i], t, &v) || __builtin_add_overflow(in_off, v, &in_off)
                || __builtin_mul_overflow(w[i], t, &is[i])) return -1;
    }
    for (int i = n - 1; i >= 0; i--) {          /* packed output strides */
        os[i] = step;
        if (__builtin_mul_overflow(step, sz[i], &step)) return -1;
    }
    if (pack(L->es, n, sz, in_off, is, 0, os, &pl->copy)) return -1;
    pl->out_rank = n;
    memcpy(pl->out_dims, sz, sizeof(int64_t) * (size_t)n);
    pl->count = step;
    return 0;
}

static int plan_unfold(const odml_layout *L, PyObject *const *f, odml_new_plan *pl) {
    const int rank = L->n, d = rank - 2;
    if (d < 1 || d > ODML_MAX_SPATIAL) return -1;
    int64_t out3[3], win[ODML_MAX_SPATIAL], st[ODML_MAX_SPATIAL], dil[ODML_MAX_SPATIAL], pad[ODML_MAX_SPATIAL];
    int64_t blk[ODML_MAX_SPATIAL];
    if (read_seq(f[0], 3, out3) || read_seq(f[1], d, win) || read_seq(f[2], d, st) || read_seq(f[3], d, dil)
            || read_seq(f[4], d, pad) || read_seq(f[5], d, blk)) return -1;
    int64_t k = 1, count, row, rows, blocks = 1;
    for (int i = 0; i < d; i++)
        if (win[i] < 1 || st[i] < 1 || dil[i] < 1 || pad[i] < 0 || blk[i] < 1 || __builtin_mul_overflow(k, win[i], &k)
                || __builtin_mul_overflow(blocks, blk[i], &blocks)) return -1;
    /* the output the fields describe is the one the kernel writes for this layout (see plan_copy) */
    if (out3[0] != L->shape[0] || __builtin_mul_overflow(L->shape[1], k, &rows) || out3[1] != rows
            || out3[2] != blocks || __builtin_mul_overflow(out3[1], out3[2], &row)
            || __builtin_mul_overflow(out3[0], row, &count)) return -1;
    odml_unfold_params *p = &pl->unfold;
    p->element_size = L->es;
    p->dims = d;
    p->batch = L->shape[0];
    p->channels = L->shape[1];
    p->window_count = k;
    p->block_count = out3[2];
    p->in_offset = pl->origin;
    p->in_batch_stride = L->strides[0];
    p->in_channel_stride = L->strides[1];
    p->out_batch_stride = row;
    p->out_row_stride = out3[2];
    p->out_column_stride = 1;
    for (int i = 0; i < d; i++) {
        odml_window_dim *wd = &p->dim[i];
        wd->size = L->shape[2 + i];
        wd->image_stride = L->strides[2 + i];
        wd->window = win[i];
        wd->stride = st[i];
        wd->dilation = dil[i];
        wd->start_padding = pad[i];
        wd->blocks = blk[i];
    }
    pl->out_rank = 3;
    memcpy(pl->out_dims, out3, sizeof out3);
    pl->count = count;
    return 0;
}

static int plan_scatter(const odml_layout *L, PyObject *const *f, odml_new_plan *pl) {
    const int n = L->n;
    int64_t sz[ODML_MAX_RANK], first[ODML_MAX_RANK], stp[ODML_MAX_RANK], back[ODML_MAX_RANK];
    if (read_seq(f[0], n, sz) || read_seq(f[1], n, first) || read_seq(f[2], n, stp) || read_seq(f[3], n, back))
        return -1;
    int64_t in_off = pl->origin, step = 1, v, last;
    for (int i = 0; i < n; i++) {
        const int64_t t = L->strides[i];
        /* every element written inside the output (see plan_copy) */
        if (sz[i] < 1 || t == INT64_MIN || first[i] < 0 || stp[i] < 1
                || __builtin_mul_overflow(stp[i], L->shape[i] - 1, &last) || __builtin_add_overflow(first[i], last, &last)
                || last >= sz[i]) return -1;
        /* lower(): a window walked backwards negates the stride and moves the origin to its last element */
        if (back[i] && (__builtin_mul_overflow(L->shape[i] - 1, t, &v) || __builtin_add_overflow(in_off, v, &in_off)))
            return -1;
    }
    for (int i = n - 1; i >= 0; i--) {
        int64_t *dm = pl->sdims[i];
        dm[0] = sz[i];
        dm[1] = step;                           /* packed output strides */
        dm[2] = first[i];
        dm[3] = stp[i];
        dm[4] = L->shape[i];
        dm[5] = back[i] ? -L->strides[i] : L->strides[i];
        if (__builtin_mul_overflow(step, sz[i], &step)) return -1;
    }
    pl->srank = n;
    pl->s_in_offset = in_off;
    pl->out_rank = n;
    memcpy(pl->out_dims, sz, sizeof(int64_t) * (size_t)n);
    pl->count = step;
    return 0;
}

int odml_new_plan_make(int kind, const odml_layout *L, PyObject *const *f, Py_ssize_t nf, odml_new_plan *pl) {
    static const Py_ssize_t fields[3] = {3, 6, 4};
    const int n = L->n;
    if (kind < 0 || kind > 2 || nf != fields[kind] || n < 1 || n > ODML_MAX_RANK || !odml_valid_size(L->es)) return -1;
    pl->kind = kind;
    pl->es = L->es;
    memset(&pl->copy, 0, sizeof pl->copy);
    memset(&pl->unfold, 0, sizeof pl->unfold);
    /* planner.array_layout: the origin (element 0 from the lowest address) and the span */
    int64_t origin = 0, span = 1, v;
    for (int i = 0; i < n; i++) {
        const int64_t size = L->shape[i], t = L->strides[i];
        if (size < 1 || t == INT64_MIN || __builtin_mul_overflow(size - 1, t < 0 ? -t : t, &v)
                || __builtin_add_overflow(span, v, &span)) return -1;
        if (t < 0) origin += v;
    }
    pl->origin = origin;
    pl->span = span;
    int rc = kind == ODML_NEW_COPY ? plan_copy(L, f, pl) : kind == ODML_NEW_UNFOLD ? plan_unfold(L, f, pl)
                                                                                  : plan_scatter(L, f, pl);
    if (rc) return -1;
    int64_t bytes;
    return pl->count < 1 || __builtin_mul_overflow(pl->count, L->es, &bytes) || bytes > ODML_LIMIT ? -1 : 0;
}

int odml_layout_from_bytes(int n, const int64_t *shape, const int64_t *byte_strides, int64_t es, odml_layout *L) {
    if (n < 1 || n > ODML_MAX_RANK || !odml_valid_size(es)) return -1;
    L->n = n;
    L->es = es;
    for (int i = 0; i < n; i++) {
        L->shape[i] = shape[i];
        if (byte_strides[i] % es) {
            if (shape[i] > 1) return -1;
            L->strides[i] = 0;
        } else {
            L->strides[i] = byte_strides[i] / es;
        }
    }
    return 0;
}

/* -- the CPU kernels' parameters (CpuBackend's runner) ----------------------------------------------- */

/* numpy_kernels.canonical_scatter and CpuBackend._native_scatter: size-1
 * dimensions that take one element dropped; a stable order by output
 * stride, largest first; a fully covered dimension with step 1 merged into
 * the one outside it where that one has step 1 or takes one element and
 * both walk memory as one. */
static int cpu_scatter(const odml_new_plan *pl, odml_scatter_params *p, int64_t *taken_count) {
    int64_t dims[ODML_MAX_RANK][6];
    int m = 0;
    *taken_count = 1;
    for (int i = 0; i < pl->srank; i++) {
        const int64_t *d = pl->sdims[i];
        if (__builtin_mul_overflow(*taken_count, d[4], taken_count)) return -1;
        if (d[0] == 1 && d[4] == 1) continue;
        int b = m++;
        while (b > 0 && d[1] > dims[b - 1][1]) {  /* stable: only past strictly smaller strides */
            memcpy(dims[b], dims[b - 1], sizeof dims[b]);
            b--;
        }
        memcpy(dims[b], d, sizeof dims[b]);
    }
    memset(p, 0, sizeof *p);
    int r = 0;
    for (int k = 0; k < m; k++) {
        int64_t *d = dims[k], on, in_n;
        if (r > 0) {
            int full = d[2] == 0 && d[3] == 1 && d[4] == d[0];
            int q = r - 1;
            if (full && (p->step[q] == 1 || p->taken[q] == 1) && !__builtin_mul_overflow(d[1], d[0], &on)
                    && !__builtin_mul_overflow(d[5], d[0], &in_n) && p->out_strides[q] == on
                    && p->in_strides[q] == in_n) {
                if (__builtin_mul_overflow(p->sizes[q], d[0], &p->sizes[q])
                        || __builtin_mul_overflow(p->first[q], d[0], &p->first[q])
                        || __builtin_mul_overflow(p->taken[q], d[0], &p->taken[q])) return -1;
                p->out_strides[q] = d[1];
                p->step[q] = 1;
                p->in_strides[q] = d[5];
                continue;
            }
        }
        p->sizes[r] = d[0];
        p->out_strides[r] = d[1];
        p->first[r] = d[2];
        p->step[r] = d[3];
        p->taken[r] = d[4];
        p->in_strides[r] = d[5];
        r++;
    }
    if (r == 0) {
        p->sizes[0] = p->out_strides[0] = p->step[0] = p->taken[0] = p->in_strides[0] = 1;
        r = 1;
    }
    int64_t count = 1;
    for (int k = 0; k < r; k++)
        if (__builtin_mul_overflow(count, p->sizes[k], &count)) return -1;
    p->element_size = pl->es;
    p->rank = r;
    p->count = count;
    p->in_offset = pl->s_in_offset;
    p->out_offset = 0;
    return 0;
}

int odml_new_cpu(const odml_new_plan *pl, int64_t tile_stride, int64_t tile_columns, odml_cpu_run *run) {
    run->kernel = pl->kind;
    if (pl->kind == ODML_NEW_COPY) {
        const int64_t es = pl->es;
        run->p.copy = pl->copy;
        run->size = (Py_ssize_t)sizeof(odml_copy_params);
        return __builtin_mul_overflow(pl->copy.count, es * 2, &run->work) ? -1 : 0;
    }
    if (pl->kind == ODML_NEW_UNFOLD) {
        const odml_unfold_params *u = &pl->unfold;
        const int64_t es = u->element_size, d = u->dims;
        int64_t inner;
        if (__builtin_mul_overflow(u->dim[d - 1].stride, u->dim[d - 1].image_stride, &inner) || inner == INT64_MIN
                || __builtin_mul_overflow(inner < 0 ? -inner : inner, es, &inner)) return -1;
        run->p.unfold = *u;
        run->p.unfold.column_tiles = inner > tile_stride && u->window_count > 1;
        run->p.unfold.tile_columns = tile_columns;
        run->size = (Py_ssize_t)sizeof(odml_unfold_params);
        return __builtin_mul_overflow(pl->count, es, &run->work) ? -1 : 0;
    }
    int64_t taken;
    if (cpu_scatter(pl, &run->p.scatter, &taken)) return -1;
    run->size = (Py_ssize_t)sizeof(odml_scatter_params);
    return __builtin_add_overflow(run->p.scatter.count, taken, &run->work)
        || __builtin_mul_overflow(run->work, run->p.scatter.element_size, &run->work) ? -1 : 0;
}

/* cuda_spec(kind, itemsize, shape, strides, fields, src_ptr, dst_ptr) ->
 * (kernel name, params bytes, grid, shared_mem, origin), or None
 *
 * The CUDA launch of a new shape's plan (odml_new_cuda) on an input of
 * `shape` with signed element `strides` whose lowest-addressed element is at
 * device address src_ptr, into a packed output at dst_ptr: what
 * runtime/cuda/backend.py's launch_spec gives for the plan the operator
 * lowers for that layout (tests compare the two). kind: 0 copy, 1 unfold, 2
 * scatter; fields: plain_plan's. No device is touched. */
PyObject *odml_py_cuda_spec(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (odml_arity("cuda_spec(kind, itemsize, shape, strides, fields, src_ptr, dst_ptr)", nargs, 7, 7)) return NULL;
    int64_t kind;
    odml_layout L;
    if (odml_exact_i64(args[0], &kind) || odml_exact_i64(args[1], &L.es) || !PyTuple_CheckExact(args[2])
            || !PyTuple_CheckExact(args[4])) Py_RETURN_NONE;
    L.n = (int)PyTuple_GET_SIZE(args[2]);
    if (L.n < 1 || L.n > ODML_MAX_RANK || read_seq(args[2], L.n, L.shape) || read_seq(args[3], L.n, L.strides))
        Py_RETURN_NONE;
    unsigned long long src = PyLong_AsUnsignedLongLong(args[5]);
    if (PyErr_Occurred()) return NULL;
    unsigned long long dst = PyLong_AsUnsignedLongLong(args[6]);
    if (PyErr_Occurred()) return NULL;
    odml_new_plan pl;
    odml_cuda_spec s;
    if (kind < 0 || kind > 2 || odml_new_plan_make((int)kind, &L, ((PyTupleObject *)args[4])->ob_item,
            PyTuple_GET_SIZE(args[4]), &pl) || odml_new_cuda(&pl, src, dst, &s)) Py_RETURN_NONE;
    return Py_BuildValue("(sy#IIL)", s.name, (const char *)&s.p, s.size, s.grid, s.smem, (long long)pl.origin);
}

/* -- the operators' plain lowering (planner.plain_plan) ---------------------------------------------- */

/* odml_plain_lower(which, n, dims, f, nf) and the Python functions over it,
 * slice_lowering(in_sizes, offsets, sizes, strides),
 * slice1_lowering(in_sizes, offsets, window, steps[, output_sizes]) and
 * slice_grad_lowering(in_sizes, input_sizes, offsets, window, steps) -> the
 * same tuple as the Python function each mirrors, or None:
 *
 *   ODML_PLAIN_SLICE       ops/slice.py's plain_lowering       (sizes, offsets, strides): three tuples
 *   ODML_PLAIN_SLICE1      ops/slice1.py's plain_lowering      (output sizes, starts, steps): tuple, list, tuple
 *   ODML_PLAIN_SLICE_GRAD  ops/slice_grad.py's plain_lowering  (output sizes, first, step, reversed): tuple and
 *                                                              three lists
 *
 * A fast path of those functions, which stay the reference (DirectML's
 * rules are theirs; tests/test_newshape_lowering.py compares each pair): the
 * common valid case, computed in one pass. None (the caller then runs the
 * Python function, which says what it makes of the call) for anything else,
 * valid or not: in_sizes not an exact tuple of 1 to ODML_MAX_RANK exact ints
 * in 64 bits; a field not an exact list or tuple of one exact int in 64 bits
 * per dimension (bools, NumPy integers and int subclasses are not exact
 * ints); SLICE1's output_sizes given (not None); a sum or product outside 64
 * bits; any rule of the common case broken. Every value is read before
 * anything is allocated, with the GIL held and no Python code run, so a list
 * another thread changes cannot make the answer mix two of its states; a
 * list field's tuple is made from the values read. The call cache's miss
 * (calls_new.c, numpy_plain) runs the same function on a NumPy array's shape. */

/* A tuple of the n values v. */
PyObject *odml_ints_tuple(const int64_t *v, Py_ssize_t n) {
    PyObject *t = PyTuple_New(n);
    if (!t) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLongLong((long long)v[i]);
        if (!x) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

/* A list of the n values v. */
static PyObject *ints_list(const int64_t *v, Py_ssize_t n) {
    PyObject *l = PyList_New(n);
    if (!l) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLongLong((long long)v[i]);
        if (!x) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, i, x);
    }
    return l;
}

/* Field f (read by read_seq into v) as ops/_common.py's sequence_of and
 * plain_ints return it: an exact tuple itself, a list's values as a tuple. */
static PyObject *field_tuple(PyObject *f, const int64_t *v, Py_ssize_t n) {
    if (PyTuple_CheckExact(f)) {
        Py_INCREF(f);
        return f;
    }
    return odml_ints_tuple(v, n);
}

/* (a, b, c), stealing the three references; NULL (the error set) where one
 * is NULL (the callers make none after a failure). */
static PyObject *triple(PyObject *a, PyObject *b, PyObject *c) {
    PyObject *t = a && b && c ? PyTuple_New(3) : NULL;
    if (!t) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_XDECREF(c);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 0, a);
    PyTuple_SET_ITEM(t, 1, b);
    PyTuple_SET_ITEM(t, 2, c);
    return t;
}

PyObject *odml_plain_lower(int which, Py_ssize_t n, const int64_t *dims, PyObject *const *f, Py_ssize_t nf) {
    static const Py_ssize_t arity[3] = {3, 4, 4};     /* SLICE1's fourth field: output_sizes, None only */
    int64_t v[4][ODML_MAX_RANK], a[ODML_MAX_RANK], b[ODML_MAX_RANK], c[ODML_MAX_RANK];
    if (which < 0 || which > 2 || n < 1 || n > ODML_MAX_RANK || (nf != arity[which] && !(which == 1 && nf == 3))
            || (which == ODML_PLAIN_SLICE1 && nf == 4 && f[3] != Py_None))
        Py_RETURN_NONE;
    const Py_ssize_t nread = which == ODML_PLAIN_SLICE_GRAD ? 4 : 3;
    for (Py_ssize_t j = 0; j < nread; j++)
        if (read_seq(f[j], n, v[j])) Py_RETURN_NONE;
    const int64_t *o = v[0], *s = v[1], *t = v[2];
    if (which == ODML_PLAIN_SLICE) {
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t last;                              /* the last element read inside the input */
            if (o[i] < 0 || s[i] < 1 || t[i] < 1 || t[i] > (int64_t)UINT32_MAX
                    || __builtin_mul_overflow(s[i] - 1, t[i], &last) || __builtin_add_overflow(o[i], last, &last)
                    || last >= dims[i]) Py_RETURN_NONE;
        }
        PyObject *sizes = field_tuple(f[1], s, n), *starts = sizes ? field_tuple(f[0], o, n) : NULL;
        return triple(sizes, starts, starts ? field_tuple(f[2], t, n) : NULL);
    }
    if (which == ODML_PLAIN_SLICE1) {
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t end;                               /* the window inside the input: o + s <= dim */
            if (o[i] < 0 || s[i] < 1 || __builtin_add_overflow(o[i], s[i], &end) || end > dims[i]) Py_RETURN_NONE;
            if (t[i] > 0 && t[i] <= INT32_MAX) {
                a[i] = 1 + (s[i] - 1) / t[i];
                b[i] = o[i];
            } else if (t[i] < 0 && t[i] >= INT32_MIN) {  /* a negative stride starts at the window's end */
                a[i] = 1 + (s[i] - 1) / -t[i];
                b[i] = end - 1;
            } else {
                Py_RETURN_NONE;
            }
        }
        PyObject *sizes = odml_ints_tuple(a, n), *first = sizes ? ints_list(b, n) : NULL;
        return triple(sizes, first, first ? field_tuple(f[2], t, n) : NULL);
    }
    /* SLICE_GRAD: the output gradient's sizes v[0] (each >= 1, at most MAX_ELEMENTS in all), the window
     * (offsets v[1], sizes v[2], strides v[3]) inside them, at most the reachable elements taken (dims) */
    const int64_t *g = v[0], *wo = v[1], *ws = v[2], *wt = v[3];
    int64_t count = 1, end;
    for (Py_ssize_t i = 0; i < n; i++)
        if (g[i] < 1 || __builtin_mul_overflow(count, g[i], &count) || count > (int64_t)UINT32_MAX) Py_RETURN_NONE;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (wo[i] < 0 || ws[i] < 1 || __builtin_add_overflow(wo[i], ws[i], &end) || end > g[i] || wt[i] == 0
                || wt[i] < INT32_MIN || wt[i] > INT32_MAX || dims[i] > 1 + (ws[i] - 1) / (wt[i] < 0 ? -wt[i] : wt[i]))
            Py_RETURN_NONE;
        a[i] = wt[i] > 0 ? wo[i] : wo[i] + (ws[i] - 1) + wt[i] * (dims[i] - 1);   /* walked backwards from the last */
        b[i] = wt[i] > 0 ? wt[i] : -wt[i];
        c[i] = wt[i] < 0;
    }
    PyObject *sizes = field_tuple(f[0], g, n), *rest = sizes ? triple(ints_list(a, n), ints_list(b, n), ints_list(c, n))
                                                             : NULL;
    PyObject *out = rest ? PyTuple_New(4) : NULL;
    if (!out) {
        Py_XDECREF(sizes);
        Py_XDECREF(rest);
        return NULL;
    }
    PyTuple_SET_ITEM(out, 0, sizes);
    for (int j = 0; j < 3; j++) PyTuple_SET_ITEM(out, j + 1, Py_NewRef(PyTuple_GET_ITEM(rest, j)));
    Py_DECREF(rest);
    return out;
}

/* The Python face of odml_plain_lower: in_sizes (an exact tuple) as dims, then the fields. */
static PyObject *plain_lowering(int which, PyObject *const *args, Py_ssize_t nargs) {
    int64_t dims[ODML_MAX_RANK];
    if (!PyTuple_CheckExact(args[0])) Py_RETURN_NONE;
    const Py_ssize_t n = PyTuple_GET_SIZE(args[0]);
    if (n < 1 || n > ODML_MAX_RANK || read_i64s(args[0], n, dims)) Py_RETURN_NONE;
    return odml_plain_lower(which, n, dims, args + 1, nargs - 1);
}

PyObject *odml_py_slice1_lowering(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (odml_arity("slice1_lowering(in_sizes, offsets, window, steps, output_sizes=None)", nargs, 4, 5)) return NULL;
    return plain_lowering(ODML_PLAIN_SLICE1, args, nargs);
}

PyObject *odml_py_slice_lowering(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (odml_arity("slice_lowering(in_sizes, offsets, sizes, strides)", nargs, 4, 4)) return NULL;
    return plain_lowering(ODML_PLAIN_SLICE, args, nargs);
}

PyObject *odml_py_slice_grad_lowering(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (odml_arity("slice_grad_lowering(in_sizes, input_sizes, offsets, window, steps)", nargs, 5, 5)) return NULL;
    return plain_lowering(ODML_PLAIN_SLICE_GRAD, args, nargs);
}
