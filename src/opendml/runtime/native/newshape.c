/* New shapes: a never-seen shape lowers and packs its plan, so this arithmetic is in C: the plan of a layout
 * (odml_new_plan_make, newshape.h), the CPU kernels' parameters (odml_new_cpu), a CopyPlan's canonical form
 * (odml_copy_pack), and the Python functions copy_params, cuda_spec (cuda_spec.c's launch, for tests) and
 * NAME_lowering (the operators' plain_lowering in C; the end of this file). newshape_move.c's odml_move_plain makes
 * them the move program's tuned pass. No DirectML rule is checked here: the plans come from validated descriptions. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "cpu/common.h"
#include "newshape.h"


/* Read t, an exact list or tuple of n exact ints in 64 bits, into v (-1 where it is not such). */
static int read_seq(PyObject *t, Py_ssize_t n, int64_t *v) {
    int m;
    return odml_int_seq(t, n, v, &m) || m != n ? -1 : 0;
}

/* The sort key's order: dimension a comes before b where (out, |in|) of a is larger. */
static int before(const int64_t *a, const int64_t *b) {
    return a[2] != b[2] ? a[2] > b[2] : odml_absv(a[1]) > odml_absv(b[1]);
}

/* The plan's packed output of n sizes: its sizes, count and element strides; -1 where a size is below 1 or the
 * count leaves 64 bits. */
static int plan_out(odml_new_plan *pl, int n, const int64_t *sizes, int64_t *strides) {
    int64_t count = 1;
    for (int i = n - 1; i >= 0; i--) {
        strides[i] = count;
        if (sizes[i] < 1 || __builtin_mul_overflow(count, sizes[i], &count)) return -1;
    }
    pl->out_rank = n;
    memcpy(pl->out_dims, sizes, sizeof(int64_t) * (size_t)n);
    pl->count = count;
    return 0;
}

/* The plan (es, n sizes sz, in_off, in strides is, out_off, out strides os) in its canonical form packed into *p:
 * runtime/params.py's CopyParams for plan.CopyPlan(...).canonical() (CpuBackend._native_copy's Python route;
 * tests/test_newshape_plain.py compares them). 0, or -1 where a count overflows (the Python route packs it).
 * copy_params(element_size, sizes, in_offset, in_strides, out_offset, out_strides) -> those bytes, or None (also for
 * arguments not tuples of one length, up to ODML_MAX_RANK, of ints in 64 bits). */
int odml_copy_pack(int64_t es, Py_ssize_t n, const int64_t *sz, int64_t in_off, const int64_t *is, int64_t out_off,
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
        for (int a = 1; a < m; a++) {            /* largest key first */
            const int64_t d[3] = {dims[a][0], dims[a][1], dims[a][2]};
            odml_insert_row(dims[0], a, 3, d, before);
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
    const Py_ssize_t n = PyTuple_CheckExact(args[1]) ? PyTuple_GET_SIZE(args[1]) : -1;
    int64_t es, in_off, out_off, sz[ODML_MAX_RANK], is[ODML_MAX_RANK], os[ODML_MAX_RANK];
    if (n < 0 || n > ODML_MAX_RANK || odml_exact_i64(args[0], &es) || odml_exact_i64(args[2], &in_off)
            || odml_exact_i64(args[4], &out_off) || odml_tuple_ints(args[1], n, sz) || odml_tuple_ints(args[3], n, is)
            || odml_tuple_ints(args[5], n, os)) Py_RETURN_NONE;
    odml_copy_params p;
    if (odml_copy_pack(es, n, sz, in_off, is, out_off, os, &p)) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)&p, (Py_ssize_t)sizeof p);
}

/* -- the plan of a layout (newshape.h) --------------------------------------------------------------- */

/* Each mirrors its operator's lower() on a layout from a plain lowering's fields (ops/slice.py and ops/slice1.py
 * SliceOperatorDesc.lower and Slice1OperatorDesc.lower: plan_copy; ops/unfold.py UnfoldOperatorDesc.lower:
 * plan_unfold; ops/slice_grad.py SliceGradOperatorDesc.lower: plan_scatter); tests/test_newshape_plain.py compares
 * each with the route through descriptions (same bytes, same call-cache record). */
static int plan_copy(const odml_layout *L, PyObject *const *f, odml_new_plan *pl) {
    const int n = L->n;
    int64_t sz[ODML_MAX_RANK], c[ODML_MAX_RANK], w[ODML_MAX_RANK], is[ODML_MAX_RANK], os[ODML_MAX_RANK];
    if (read_seq(f[0], n, sz) || read_seq(f[1], n, c) || read_seq(f[2], n, w)) return -1;
    int64_t in_off = pl->origin, v, last;
    for (int i = 0; i < n; i++) {
        const int64_t t = L->strides[i];
        /* every element read inside the input: another thread may have changed the shape the lowering saw */
        if (sz[i] < 1 || c[i] < 0 || c[i] >= L->shape[i] || __builtin_mul_overflow(w[i], sz[i] - 1, &last)
                || __builtin_add_overflow(c[i], last, &last) || last < 0 || last >= L->shape[i]) return -1;
        if (__builtin_mul_overflow(c[i], t, &v) || __builtin_add_overflow(in_off, v, &in_off)
                || __builtin_mul_overflow(w[i], t, &is[i])) return -1;
    }
    return plan_out(pl, n, sz, os) || odml_copy_pack(L->es, n, sz, in_off, is, 0, os, &pl->copy) ? -1 : 0;
}

/* The five window fields f[0..5) (window, strides, dilations, start padding, blocks) of d axes into dim[] beside each
 * axis's size and image stride; the windows' product in *k, the blocks' in *blocks. */
static int window_dims(PyObject *const *f, int d, const int64_t *size, const int64_t *image_stride,
                       odml_window_dim *dim, int64_t *k, int64_t *blocks) {
    int64_t v[5][ODML_MAX_SPATIAL];
    *k = *blocks = 1;
    for (int j = 0; j < 5; j++)
        if (read_seq(f[j], d, v[j])) return -1;
    for (int i = 0; i < d; i++) {
        const odml_window_dim wd = {.size = size[i], .image_stride = image_stride[i], .window = v[0][i],
                                    .stride = v[1][i], .dilation = v[2][i], .start_padding = v[3][i],
                                    .blocks = v[4][i]};
        if (wd.window < 1 || wd.stride < 1 || wd.dilation < 1 || wd.start_padding < 0 || wd.blocks < 1
                || __builtin_mul_overflow(*k, wd.window, k) || __builtin_mul_overflow(*blocks, wd.blocks, blocks))
            return -1;
        dim[i] = wd;
    }
    return 0;
}

static int plan_unfold(const odml_layout *L, PyObject *const *f, odml_new_plan *pl) {
    const int rank = L->n, d = rank - 2;
    odml_unfold_params *p = &pl->windows;
    int64_t out3[3], out_strides[3], k, rows, blocks;
    if (d < 1 || d > ODML_MAX_SPATIAL || read_seq(f[0], 3, out3)
            || window_dims(f + 1, d, L->shape + 2, L->strides + 2, p->dim, &k, &blocks)) return -1;
    /* the output the fields describe is the one the kernel writes for this layout (see plan_copy) */
    if (out3[0] != L->shape[0] || __builtin_mul_overflow(L->shape[1], k, &rows) || out3[1] != rows
            || out3[2] != blocks || plan_out(pl, 3, out3, out_strides)) return -1;
    p->element_size = L->es;
    p->dims = d;
    p->batch = L->shape[0];
    p->channels = L->shape[1];
    p->window_count = k;
    p->block_count = out3[2];
    p->in_offset = pl->origin;
    p->in_batch_stride = L->strides[0];
    p->in_channel_stride = L->strides[1];
    p->out_batch_stride = out_strides[0];
    p->out_row_stride = out_strides[1];
    p->out_column_stride = 1;
    return 0;
}

/* ops/fold.py FoldOperatorDesc._passes on L (the columns (..., N, C x K, B), leading 1s) from plain_lowering's
 * fields (out_sizes (N, C, *spatial), window, strides, dilations, start_padding, blocks): the FoldPlan with a
 * packed output, as CpuBackend._native_window_sums packs it. */
static int plan_fold(const odml_layout *L, PyObject *const *f, odml_new_plan *pl) {
    const int r = L->n;
    if (!PyTuple_CheckExact(f[0]) && !PyList_CheckExact(f[0])) return -1;
    const int d = (int)PySequence_Fast_GET_SIZE(f[0]) - 2;
    if (d < 1 || d > ODML_MAX_SPATIAL || r < 3 || r > d + 2) return -1;
    odml_fold_params *p = &pl->window_sums;
    int64_t out[ODML_MAX_SPATIAL + 2], stride[ODML_MAX_SPATIAL + 2], k, blocks, rows, reads;
    if (read_seq(f[0], d + 2, out) || plan_out(pl, d + 2, out, stride)) return -1;
    if (window_dims(f + 1, d, out + 2, stride + 2, p->dim, &k, &blocks)) return -1;
    for (int i = 0; i < r - 3; i++)
        if (L->shape[i] != 1) return -1;
    /* the input the fields were made for is the one read (see plan_copy) */
    const int64_t *in3 = L->shape + r - 3, *is3 = L->strides + r - 3;
    if (in3[0] != out[0] || __builtin_mul_overflow(out[1], k, &rows) || in3[1] != rows
            || in3[2] != blocks || __builtin_mul_overflow(in3[0], rows, &reads)
            || __builtin_mul_overflow(reads, blocks, &reads)) return -1;
    p->element_size = L->es;
    p->sum_kind = L->flt ? ODML_SUM_FLOAT : ODML_SUM_INTEGER;
    p->dims = d;
    p->batch = out[0];
    p->channels = out[1];
    p->window_count = k;
    p->block_count = blocks;
    p->in_offset = pl->origin;
    p->in_batch_stride = is3[0];
    p->in_row_stride = is3[1];
    p->in_column_stride = is3[2];
    p->out_batch_stride = stride[0];
    p->out_channel_stride = stride[1];
    return 0;
}

static int plan_scatter(const odml_layout *L, PyObject *const *f, odml_new_plan *pl) {
    const int n = L->n;
    int64_t sz[ODML_MAX_RANK], first[ODML_MAX_RANK], stp[ODML_MAX_RANK], back[ODML_MAX_RANK], os[ODML_MAX_RANK];
    if (read_seq(f[0], n, sz) || read_seq(f[1], n, first) || read_seq(f[2], n, stp) || read_seq(f[3], n, back))
        return -1;
    int64_t in_off = pl->origin, v, last;
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
    if (plan_out(pl, n, sz, os)) return -1;
    for (int i = 0; i < n; i++) {
        const int64_t dm[6] = {sz[i], os[i], first[i], stp[i], L->shape[i], back[i] ? -L->strides[i] : L->strides[i]};
        memcpy(pl->sdims[i], dm, sizeof dm);
    }
    pl->srank = n;
    pl->s_in_offset = in_off;
    return 0;
}

int odml_new_plan_make(int kind, const odml_layout *L, PyObject *const *f, Py_ssize_t nf, odml_new_plan *pl) {
    static const Py_ssize_t fields[ODML_NEW_KINDS] = {3, 6, 4, 6};
    static int (*const plan[ODML_NEW_KINDS])(const odml_layout *, PyObject *const *, odml_new_plan *) = {
        plan_copy, plan_unfold, plan_scatter, plan_fold};
    const int n = L->n;
    if (kind < 0 || kind >= ODML_NEW_KINDS || nf != fields[kind] || n < 1 || n > ODML_MAX_RANK
            || !odml_valid_size(L->es)) return -1;
    pl->kind = kind;
    pl->es = L->es;
    memset(&pl->copy, 0, sizeof pl->copy);
    memset(&pl->windows, 0, sizeof pl->windows);
    memset(&pl->window_sums, 0, sizeof pl->window_sums);
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
    if (plan[kind](L, f, pl)) return -1;
    int64_t bytes;
    return pl->count < 1 || __builtin_mul_overflow(pl->count, L->es, &bytes) || bytes > ODML_LIMIT ? -1 : 0;
}

int odml_layout_from_bytes(int n, const int64_t *shape, const int64_t *byte_strides, int64_t es, odml_layout *L) {
    if (n < 1 || n > ODML_MAX_RANK || !odml_valid_size(es)) return -1;
    L->n = n;
    L->es = es;
    L->flt = 0;
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

/* (stable: only past strictly smaller output strides) */
static int larger_out_stride(const int64_t *a, const int64_t *b) { return a[1] > b[1]; }

int odml_scatter_canonical(const odml_new_plan *pl, int cpu, int64_t (*merged)[6], int *rank) {
    int64_t dims[ODML_MAX_RANK][6];
    int m = 0, r = 0;
    for (int i = 0; i < pl->srank; i++) {
        const int64_t *d = pl->sdims[i];
        if (d[0] != 1 || d[4] != 1) odml_insert_row(dims[0], m++, 6, d, larger_out_stride);
    }
    for (int k = 0; k < m; k++) {
        const int64_t *d = dims[k];
        int64_t *o = r ? merged[r - 1] : NULL, os, is;
        if (o && d[2] == 0 && d[3] == 1 && d[4] == d[0] && (o[3] == 1 || (cpu && o[4] == 1))
                && !__builtin_mul_overflow(d[1], d[0], &os) && o[1] == os
                && !__builtin_mul_overflow(d[5], d[0], &is) && o[5] == is) {
            if (__builtin_mul_overflow(o[0], d[0], &o[0]) || __builtin_mul_overflow(o[2], d[0], &o[2])
                    || __builtin_mul_overflow(o[4], d[0], &o[4])) return -1;
            o[1] = d[1];
            o[3] = 1;
            o[5] = d[5];
            continue;
        }
        memcpy(merged[r++], d, sizeof merged[0]);
    }
    if (r == 0) {
        static const int64_t one[6] = {1, 1, 0, 1, 1, 1};
        memcpy(merged[r++], one, sizeof one);
    }
    *rank = r;
    return 0;
}

int odml_scatter_pack(int64_t es, const int64_t (*m)[6], int r, int64_t in_offset, int64_t out_offset,
                      odml_scatter_params *p) {
    *p = (odml_scatter_params){.element_size = es, .rank = r, .count = 1, .in_offset = in_offset,
                               .out_offset = out_offset};
    for (int k = 0; k < r; k++) {
        if (__builtin_mul_overflow(p->count, m[k][0], &p->count)) return -1;
        p->sizes[k] = m[k][0];
        p->out_strides[k] = m[k][1];
        p->first[k] = m[k][2];
        p->step[k] = m[k][3];
        p->taken[k] = m[k][4];
        p->in_strides[k] = m[k][5];
    }
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
    if (pl->kind == ODML_NEW_WINDOWS) {
        const odml_unfold_params *u = &pl->windows;
        const int64_t es = u->element_size, d = u->dims;
        int64_t inner;
        if (__builtin_mul_overflow(u->dim[d - 1].stride, u->dim[d - 1].image_stride, &inner) || inner == INT64_MIN
                || __builtin_mul_overflow(inner < 0 ? -inner : inner, es, &inner)) return -1;
        run->p.windows = *u;
        run->p.windows.column_tiles = inner > tile_stride && u->window_count > 1;
        run->p.windows.tile_columns = tile_columns;
        run->size = (Py_ssize_t)sizeof(odml_unfold_params);
        return __builtin_mul_overflow(pl->count, es, &run->work) ? -1 : 0;
    }
    if (pl->kind == ODML_NEW_WINDOW_SUMS) {    /* CpuBackend._native_window_sums: the output and every column read */
        const odml_fold_params *q = &pl->window_sums;
        int64_t reads;
        run->p.window_sums = *q;
        run->size = (Py_ssize_t)sizeof(odml_fold_params);
        return __builtin_mul_overflow(q->batch * q->channels * q->window_count, q->block_count, &reads)
            || __builtin_add_overflow(reads, pl->count, &run->work)
            || __builtin_mul_overflow(run->work, q->element_size, &run->work) ? -1 : 0;
    }
    int64_t taken = 1, m[ODML_MAX_RANK][6];
    int r;
    for (int i = 0; i < pl->srank; i++)
        if (__builtin_mul_overflow(taken, pl->sdims[i][4], &taken)) return -1;
    if (odml_scatter_canonical(pl, 1, m, &r)
            || odml_scatter_pack(pl->es, (const int64_t (*)[6])m, r, pl->s_in_offset, 0, &run->p.scatter)) return -1;
    run->size = (Py_ssize_t)sizeof(odml_scatter_params);
    return __builtin_add_overflow(run->p.scatter.count, taken, &run->work)
        || __builtin_mul_overflow(run->work, run->p.scatter.element_size, &run->work) ? -1 : 0;
}

/* cuda_spec(kind, itemsize, shape, strides, fields, src_ptr, dst_ptr, floating=False) -> (kernel name, params bytes,
 * grid, shared_mem, origin), or None: odml_new_cuda's launch on an input of `shape` with signed element `strides`,
 * its lowest-addressed element at device address src_ptr, into a packed output at dst_ptr (tests compare it with
 * runtime/cuda/tuned.py's launch_spec). kind: 0 copy, 1 unfold, 2 scatter, 3 fold; fields: a plain lowering's;
 * floating: a floating-point element type (FOLD's sums). No device is touched. */
PyObject *odml_py_cuda_spec(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (odml_arity("cuda_spec(kind, itemsize, shape, strides, fields, src_ptr, dst_ptr, floating=False)", nargs, 7,
                   8)) return NULL;
    int64_t kind;
    odml_layout L;
    if (odml_exact_i64(args[0], &kind) || odml_exact_i64(args[1], &L.es) || !PyTuple_CheckExact(args[2])
            || !PyTuple_CheckExact(args[4])) Py_RETURN_NONE;
    L.flt = nargs == 8 ? PyObject_IsTrue(args[7]) : 0;
    if (L.flt < 0) return NULL;
    L.n = (int)PyTuple_GET_SIZE(args[2]);
    if (L.n < 1 || L.n > ODML_MAX_RANK || read_seq(args[2], L.n, L.shape) || read_seq(args[3], L.n, L.strides))
        Py_RETURN_NONE;
    unsigned long long src = PyLong_AsUnsignedLongLong(args[5]);
    if (PyErr_Occurred()) return NULL;
    unsigned long long dst = PyLong_AsUnsignedLongLong(args[6]);
    if (PyErr_Occurred()) return NULL;
    odml_new_plan pl;
    odml_cuda_spec s;
    if (kind < 0 || kind >= ODML_NEW_KINDS || odml_new_plan_make((int)kind, &L, ((PyTupleObject *)args[4])->ob_item,
            PyTuple_GET_SIZE(args[4]), &pl) || odml_new_cuda(&pl, src, dst, &s)) Py_RETURN_NONE;
    return Py_BuildValue("(sy#IIL)", s.name, (const char *)&s.p, s.size, s.grid, s.smem, (long long)pl.origin);
}

/* -- the operators' plain lowering (the new-shape route's, odml_move_plain) ------------------------- */

/* odml_plain_lower(which, n, dims, f, nf) and the Python functions over it (NAME_lowering(in_sizes, *fields) of
 * ODML_PLAIN_FUNCTIONS) -> the same tuple (lists as lists) as the Python function each mirrors, ops/NAME.py's
 * plain_lowering, or None.
 *
 * A fast path of those functions, which stay the reference (DirectML's rules are theirs;
 * tests/test_newshape_lowering.py compares each pair): the common valid case, in one pass. None (the caller runs the
 * Python function) for anything else, valid or not: in_sizes not an exact tuple of 1 to ODML_MAX_RANK exact ints in
 * 64 bits; a field not an exact list or tuple of one such int per dimension (UNFOLD's and FOLD's may be one exact
 * int, spread over the spatial axes); a sum or product outside 64 bits; any rule of the common case broken. Every
 * value is read before anything is allocated, no Python code run, so a list another thread changes cannot make the
 * answer mix two of its states; a list field's tuple is made from the values read. odml_move_plain runs the same
 * function on an input's shape. */

/* A tuple (list: a list) of the n values v. */
static PyObject *ints_seq(const int64_t *v, Py_ssize_t n, int list) {
    PyObject *t = list ? PyList_New(n) : PyTuple_New(n);
    if (!t) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLongLong((long long)v[i]);
        if (!x) {
            Py_DECREF(t);
            return NULL;
        }
        if (list)
            PyList_SET_ITEM(t, i, x);
        else
            PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

PyObject *odml_ints_tuple(const int64_t *v, Py_ssize_t n) { return ints_seq(v, n, 0); }

int odml_name(char *out, int n, const char *fmt, ...) {
    va_list v;
    char digits[24];
    int len = 0;
    va_start(v, fmt);
    for (const char *f = fmt; *f; f++) {
        const char *put = f;
        size_t m = 1;
        if (*f == '%') {
            long long x;
            if (f[1] == 's') {
                put = va_arg(v, const char *);
                m = strlen(put);
                f += 1;
            } else if (f[1] == 'd' || (f[1] == 'l' && f[2] == 'l' && f[3] == 'd')) {
                x = f[1] == 'd' ? va_arg(v, int) : va_arg(v, long long);
                f += f[1] == 'd' ? 1 : 3;
                unsigned long long u = x < 0 ? 0 - (unsigned long long)x : (unsigned long long)x;
                char *d = digits + sizeof digits;
                do *--d = (char)('0' + u % 10); while (u /= 10);
                if (x < 0) *--d = '-';
                put = d;
                m = (size_t)(digits + sizeof digits - d);
            } else {
                len = -1;
                break;
            }
        }
        for (size_t i = 0; i < m; i++, len++)
            if (len < n - 1) out[len] = put[i];
    }
    va_end(v);
    if (n > 0 && len >= 0) out[len < n ? len : n - 1] = 0;
    return len;
}

static PyObject *ints_list(const int64_t *v, Py_ssize_t n) { return ints_seq(v, n, 1); }

/* Field f (read into v) as ops/_common.py's sequence_of and plain_ints return it: an exact tuple itself, a list's
 * values as a tuple. */
static PyObject *field_tuple(PyObject *f, const int64_t *v, Py_ssize_t n) {
    if (PyTuple_CheckExact(f)) {
        Py_INCREF(f);
        return f;
    }
    return odml_ints_tuple(v, n);
}

int odml_axes_field(PyObject *f, Py_ssize_t d, int64_t *v) {
    if (!PyLong_CheckExact(f)) return read_seq(f, d, v);
    if (odml_exact_i64(f, &v[0])) return -1;
    for (Py_ssize_t i = 1; i < d; i++) v[i] = v[0];
    return 0;
}

/* ops/unfold.py plain_lowering (UNFOLD: dims the input's sizes, f the five window fields) and ops/fold.py
 * plain_lowering (FOLD: dims the columns' sizes, f output_sizes then the five): the fields past nf take the
 * functions' defaults (strides and dilations 1, paddings 0). */
static PyObject *plain_window_lower(int which, Py_ssize_t n, const int64_t *dims, PyObject *const *f, Py_ssize_t nf) {
    const int fold = which == ODML_PLAIN_FOLD;
    PyObject *field[6];
    static const int64_t dflt[6] = {0, 0, 1, 1, 0, 0};
    int64_t v[6][ODML_MAX_SPATIAL], blk[ODML_MAX_SPATIAL], out[ODML_MAX_SPATIAL + 2];
    if (nf < 1 + fold || nf > 5 + fold) Py_RETURN_NONE;
    for (int j = 0; j < 6; j++) field[j] = j - !fold < nf && j >= !fold ? f[j - !fold] : NULL;
    Py_ssize_t d = n - 2;                              /* UNFOLD: the input's spatial axes */
    if (fold) {                                        /* FOLD: output_sizes', else window_sizes' length, else 1 */
        d = 1;
        for (int j = 1; j >= 0; j--)
            if (PyList_CheckExact(field[j]) || PyTuple_CheckExact(field[j])) d = PySequence_Fast_GET_SIZE(field[j]);
        if (n < 3 || n > d + 2) Py_RETURN_NONE;
    }
    if (d < 1 || d > ODML_MAX_SPATIAL) Py_RETURN_NONE;
    for (int j = fold ? 0 : 1; j < 6; j++) {
        if (!field[j]) {
            for (Py_ssize_t i = 0; i < d; i++) v[j][i] = dflt[j];
        } else if (odml_axes_field(field[j], d, v[j])) {
            Py_RETURN_NONE;
        }
    }
    /* plain_window_fields: every window fitting its padded axis; spatial: UNFOLD's input's, FOLD's output's */
    const int64_t *spatial = fold ? v[0] : dims + 2;
    int64_t k = 1, blocks = 1, count, extent, padded;
    for (Py_ssize_t i = 0; i < d; i++) {
        const int64_t w = v[1][i], st = v[2][i], dl = v[3][i], a = v[4][i], b = v[5][i], size = spatial[i];
        if (w < 1 || st < 1 || dl < 1 || a < 0 || b < 0 || w > (int64_t)UINT32_MAX || st > (int64_t)UINT32_MAX
                || dl > (int64_t)UINT32_MAX || a > (int64_t)UINT32_MAX || b > (int64_t)UINT32_MAX
                || (fold && (size < 1 || size > (int64_t)UINT32_MAX))         /* (FOLD's output's: checked later) */
                || __builtin_mul_overflow(dl, w - 1, &extent) || __builtin_add_overflow(size, a + b - 1, &padded)
                || padded < extent)
            Py_RETURN_NONE;
        blk[i] = (padded - extent) / st + 1;
        if (__builtin_mul_overflow(k, w, &k) || __builtin_mul_overflow(blocks, blk[i], &blocks)) Py_RETURN_NONE;
    }
    if (fold) {                                        /* the columns (..., N, C x K, BlockCount), leading 1s */
        const int64_t *in3 = dims + n - 3;
        out[0] = in3[0];
        out[1] = in3[1] / k;
        for (Py_ssize_t i = 0; i < n - 3; i++)
            if (dims[i] != 1) Py_RETURN_NONE;
        if (__builtin_mul_overflow(out[0], out[1], &count)) Py_RETURN_NONE;
        for (Py_ssize_t i = 0; i < d; i++)
            if (__builtin_mul_overflow(count, spatial[i], &count)) Py_RETURN_NONE;
        if (in3[1] % k || in3[2] != blocks || count > (int64_t)UINT32_MAX) Py_RETURN_NONE;
        memcpy(out + 2, spatial, sizeof(int64_t) * (size_t)d);
    } else {                                           /* (N, C x K, BlockCount), at most MAX_ELEMENTS */
        out[0] = dims[0];
        if (__builtin_mul_overflow(dims[1], k, &out[1]) || __builtin_mul_overflow(dims[0], out[1], &count)
                || __builtin_mul_overflow(count, blocks, &count)
                || count > (int64_t)UINT32_MAX) Py_RETURN_NONE;
        out[2] = blocks;
    }
    PyObject *r = PyTuple_New(6);
    if (!r) return NULL;
    PyTuple_SET_ITEM(r, 0, odml_ints_tuple(out, fold ? d + 2 : 3));
    for (int j = 1; j < 5; j++)
        PyTuple_SET_ITEM(r, j, field[j] && !PyLong_CheckExact(field[j]) ? field_tuple(field[j], v[j], d)
                                                                         : odml_ints_tuple(v[j], d));
    PyTuple_SET_ITEM(r, 5, odml_ints_tuple(blk, d));
    for (int j = 0; j < 6; j++)
        if (!PyTuple_GET_ITEM(r, j)) {
            Py_DECREF(r);
            return NULL;
        }
    return r;
}

PyObject *odml_plain_lower(int which, Py_ssize_t n, const int64_t *dims, PyObject *const *f, Py_ssize_t nf) {
    static const Py_ssize_t arity[3] = {3, 4, 4};     /* SLICE1's fourth field: output_sizes (None: derived) */
    int64_t v[4][ODML_MAX_RANK], a[ODML_MAX_RANK], b[ODML_MAX_RANK], c[ODML_MAX_RANK];
    if (which == ODML_PLAIN_UNFOLD || which == ODML_PLAIN_FOLD) return plain_window_lower(which, n, dims, f, nf);
    if (which < 0 || which > 2 || n < 1 || n > ODML_MAX_RANK || (nf != arity[which] && !(which == 1 && nf == 3)))
        Py_RETURN_NONE;
    const int sized = which == ODML_PLAIN_SLICE1 && nf == 4 && f[3] != Py_None;
    const Py_ssize_t nread = which == ODML_PLAIN_SLICE_GRAD || sized ? 4 : 3;
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
        return Py_BuildValue("(NNN)", sizes, starts, starts ? field_tuple(f[2], t, n) : NULL);
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
            if (sized && (v[3][i] < 1 || v[3][i] > a[i])) Py_RETURN_NONE;   /* each in [1, the most copied] */
        }
        PyObject *sizes = sized ? field_tuple(f[3], v[3], n) : odml_ints_tuple(a, n);
        PyObject *first = sizes ? ints_list(b, n) : NULL;
        return Py_BuildValue("(NNN)", sizes, first, first ? field_tuple(f[2], t, n) : NULL);
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
    /* (Py_BuildValue's N: each reference taken, a NULL one (its error set) failing the call) */
    PyObject *sizes = field_tuple(f[0], g, n), *first = sizes ? ints_list(a, n) : NULL;
    PyObject *step = first ? ints_list(b, n) : NULL;
    return Py_BuildValue("(NNNN)", sizes, first, step, step ? ints_list(c, n) : NULL);
}

/* The Python face of odml_plain_lower: in_sizes (an exact tuple) as dims, then the fields. */
static PyObject *plain_lowering(int which, PyObject *const *args, Py_ssize_t nargs) {
    int64_t dims[ODML_MAX_RANK];
    if (!PyTuple_CheckExact(args[0])) Py_RETURN_NONE;
    const Py_ssize_t n = PyTuple_GET_SIZE(args[0]);
    if (n < 1 || n > ODML_MAX_RANK || read_seq(args[0], n, dims)) Py_RETURN_NONE;
    return odml_plain_lower(which, n, dims, args + 1, nargs - 1);
}

/* The Python functions (newshape.h's ODML_PLAIN_FUNCTIONS). */
#define ODML_PLAIN_FUNCTION(NAME, WHICH, SIG, LO, HI)                                                \
    PyObject *odml_py_##NAME##_lowering(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {  \
        (void)self;                                                                                 \
        if (odml_arity(#NAME "_lowering(in_sizes, " SIG ")", nargs, LO, HI)) return NULL;           \
        return plain_lowering(WHICH, args, nargs);                                                  \
    }
ODML_PLAIN_FUNCTIONS(ODML_PLAIN_FUNCTION)
