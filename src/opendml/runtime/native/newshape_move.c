/* New shapes of the data-movement family: the C lowerings of its copy-like operators, each giving the passes its
 * Python operator's `_passes` gives for an input's layout (before odml_move_pack's canonical form, as
 * CpuBackend._native_move_pass). calls_move_new.c runs them and records the call as call_cache_put_move would: a
 * never-seen shape costs one C call, not Python's description, validation, lowering and packing.
 *
 * Each lowering takes only a VALID call in the simple forms listed at its function and declines (-1, no exception
 * set) anything else (another type or spelling, a value a rule refuses, a size outside TensorDesc's bounds): the
 * Python route then raises its own error, written once. tests/test_newshape_move.py compares passes, outputs and
 * errors with the Python route's. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu/fp16.h"
#include "newshape.h"

#define U32MAX 4294967295LL


static int is_float_type(int64_t t) { return t == ODML_T_FLOAT32 || t == ODML_T_FLOAT16 || t == ODML_T_FLOAT64; }

/* Output i packed: its DataType, sizes, element strides and count; -1 past TensorDesc's bounds. */
static int set_out(odml_move_prog *g, int i, int64_t type, int rank, const int64_t *dims) {
    int64_t count = 1;
    for (int d = 0; d < rank; d++)
        if (dims[d] < 1 || dims[d] > U32MAX || __builtin_mul_overflow(count, dims[d], &count)) return -1;
    if (count > U32MAX) return -1;                 /* TensorDesc: at most UINT32_MAX elements */
    g->out_type[i] = type;
    g->out_rank[i] = rank;
    memcpy(g->out_dims[i], dims, sizeof(int64_t) * (size_t)rank);
    odml_packed(dims, rank, g->out_strides[i]);
    g->out_count[i] = count;
    return 0;
}

/* A pass of x's type over n dimensions from slot src (a Copy reads from x's origin; fill: a Fill) into output dst. */
static odml_move_pass *new_pass(odml_move_prog *g, int fill, int src, int dst, const odml_move_input *x, int n) {
    if (g->n_pass >= ODML_MOVE_PROG_MAX_PASSES) return NULL;
    odml_move_pass *p = &g->passes[g->n_pass];
    memset(p, 0, sizeof *p);
    p->fill = fill;
    p->src_type = p->dst_type = x->type;
    p->src_offset = fill ? 0 : x->origin;
    p->n = n;
    g->pass_src[g->n_pass] = src;
    g->pass_dst[g->n_pass] = dst;
    g->n_pass++;
    return p;
}

/* A Copy from input x (slot src) into output dst over `sizes`: x's origin and strides, output strides os. */
static odml_move_pass *copy_pass(odml_move_prog *g, int src, int dst, const odml_move_input *x,
                                 const int64_t *sizes, const int64_t *os) {
    odml_move_pass *p = new_pass(g, 0, src, dst, x, x->n);
    if (!p) return NULL;
    memcpy(p->sizes, sizes, sizeof(int64_t) * (size_t)x->n);
    memcpy(p->src_strides, x->strides, sizeof(int64_t) * (size_t)x->n);
    memcpy(p->dst_strides, os, sizeof(int64_t) * (size_t)x->n);
    return p;
}

/* ops/identity.py ElementWiseIdentityOperatorDesc._passes (and cast.py CastOperatorDesc._passes): Copy(0, 0,
 * out.sizes, origin, strides, 0, out.element_strides[, scale_bias]). */
static int whole_copy(odml_move_prog *g, const odml_move_input *x, int64_t out_type, int sb, double scale,
                      double bias) {
    odml_move_pass *p = set_out(g, 0, out_type, x->n, x->shape) ? NULL : copy_pass(g, 0, 0, x, x->shape,
                                                                                   g->out_strides[0]);
    if (!p) return -1;
    p->dst_type = out_type;
    p->has_scale_bias = sb;
    p->scale = scale;
    p->bias = bias;
    return 0;
}

/* ops/_move.py MoveOperatorDesc._float32: a float's float32 value; -1 where
 * it overflows float32 (the rule's error). */
static int float32_field(PyObject *o, double *v) {
    if (!PyFloat_CheckExact(o)) return -1;
    const double d = PyFloat_AS_DOUBLE(o);
    const float f = (float)d;
    if (isfinite(d) && !isfinite(f)) return -1;
    *v = (double)f;
    return 0;
}

/* ops/identity.py ElementWiseIdentityOperatorDesc.arguments: (scale, bias) each None or
 * an exact float; scale/bias only on float types. */
static int lower_identity(const odml_move_input *x, PyObject *const *a, Py_ssize_t na, odml_move_prog *g) {
    if (na != 2) return -1;
    double scale = 1.0, bias = 0.0;
    const int sb = a[0] != Py_None || a[1] != Py_None;
    if (sb && (!is_float_type(x->type) || (a[0] != Py_None && float32_field(a[0], &scale))
               || (a[1] != Py_None && float32_field(a[1], &bias))))
        return -1;
    return whole_copy(g, x, x->type, sb, scale, bias);
}

/* arrays/front.py _cast_make with ops/cast.py: dtype one of the 11 element types spelt as a NumPy dtype object
 * or scalar type, a DataType, a PyTorch dtype or a DataType name (odml_move_dtype_type). */
static int lower_cast(const odml_move_input *x, PyObject *const *a, Py_ssize_t na, odml_move_prog *g) {
    if (na != 1) return -1;
    const int64_t t = odml_move_dtype_type(a[0]);
    if (t < 1 || !(g->types & (1u << t))) return -1;
    return whole_copy(g, x, t, 0, 1.0, 0.0);
}

/* ops/tile.py TileOperatorDesc.arguments and _passes: repeats an exact int (the last axis')
 * or a list or tuple of at most rank exact ints (ones prepended), each in [1, UINT32_MAX]; per axis the dimensions
 * (r, n), source strides (0, s), output strides (n * o, o). */
static int lower_tile(const odml_move_input *x, PyObject *const *a, Py_ssize_t na, odml_move_prog *g) {
    if (na != 1) return -1;
    const int n = x->n;
    int64_t given[ODML_MAX_RANK], rep[ODML_MAX_RANK], dims[ODML_MAX_RANK];
    int m = 1;
    if (PyLong_CheckExact(a[0])) {
        if (odml_exact_i64(a[0], &given[0])) return -1;
    } else if (odml_int_seq(a[0], n, given, &m)) {
        return -1;
    }
    for (int d = 0; d < n; d++) {
        rep[d] = d < n - m ? 1 : given[d - (n - m)];
        if (rep[d] < 1 || rep[d] > U32MAX || __builtin_mul_overflow(x->shape[d], rep[d], &dims[d])) return -1;
    }
    if (set_out(g, 0, x->type, n, dims)) return -1;
    odml_move_pass *p = new_pass(g, 0, 0, 0, x, 2 * n);
    if (!p) return -1;
    for (int d = 0; d < n; d++) {
        const int64_t o = g->out_strides[0][d];
        p->sizes[2 * d] = rep[d];
        p->sizes[2 * d + 1] = x->shape[d];
        p->src_strides[2 * d] = 0;
        p->src_strides[2 * d + 1] = x->strides[d];
        if (__builtin_mul_overflow(x->shape[d], o, &p->dst_strides[2 * d])) return -1;
        p->dst_strides[2 * d + 1] = o;
    }
    return 0;
}

/* ASCII s equals lower-case word w, whatever the case of s. */
static int same_word(PyObject *s, const char *w) {
    if (!PyUnicode_IS_COMPACT_ASCII(s)) return 0;
    const Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    const char *c = (const char *)PyUnicode_DATA(s);
    if ((size_t)n != strlen(w)) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        char ch = c[i];
        if (ch >= 'A' && ch <= 'Z') ch = (char)(ch - 'A' + 'a');
        if (ch != w[i]) return 0;
    }
    return 1;
}

/* ops/padding1.py MODES: the mode's PaddingMode value, -1 for none. */
static int pad_mode(PyObject *m) {
    static const char *const names[] = {"constant", "edge", "reflect", "reflection", "symmetric", "wrap"};
    static const int modes[] = {0, 1, 2, 2, 3, 4};
    if (!PyUnicode_CheckExact(m)) return -1;
    for (int i = 0; i < 6; i++)
        if (same_word(m, names[i])) return modes[i];
    return -1;
}

/* ops/padding1.py Padding1OperatorDesc's PaddingValue rule and runtime/cpu/backend.py _fill_bits: the fill's bits of
 * value v for type t; -1 where the rule refuses v or the value is not in a simple form (an exact int within int64, an
 * exact float). float16 takes a float only where it is a float32 value (one rounding, as NumPy's). */
static int pad_value_bits(PyObject *v, int64_t t, uint64_t *bits) {
    int64_t i;
    double d;
    const int is_int = PyLong_CheckExact(v), is_flt = PyFloat_CheckExact(v);
    if (!is_int && !is_flt) return -1;
    if (is_int && odml_exact_i64(v, &i)) return -1;
    if (!is_float_type(t)) {
        if (is_flt) {
            d = PyFloat_AS_DOUBLE(v);
            if (!isfinite(d) || d != floor(d) || d < -9.2e18 || d > 9.2e18) return -1;
            i = (int64_t)d;
        }
        /* each integer type's range (UINT64's values past 2^63: the Python route) */
        static const int64_t lo[12] = {[ODML_T_INT8] = INT8_MIN, [ODML_T_INT16] = INT16_MIN,
                                       [ODML_T_INT32] = INT32_MIN, [ODML_T_INT64] = INT64_MIN};
        static const int64_t hi[12] = {[ODML_T_INT8] = INT8_MAX, [ODML_T_INT16] = INT16_MAX,
                                       [ODML_T_INT32] = INT32_MAX, [ODML_T_INT64] = INT64_MAX,
                                       [ODML_T_UINT8] = UINT8_MAX, [ODML_T_UINT16] = UINT16_MAX,
                                       [ODML_T_UINT32] = UINT32_MAX, [ODML_T_UINT64] = INT64_MAX};
        const int size = odml_type_size[t];
        if (i < lo[t] || i > hi[t]) return -1;
        *bits = size == 8 ? (uint64_t)i : (uint64_t)i & ((1ULL << (8 * size)) - 1);
        return 0;
    }
    if (is_int) {
        if (i < -((int64_t)1 << 53) || i > ((int64_t)1 << 53)) return -1;
        d = (double)i;
    } else {
        d = PyFloat_AS_DOUBLE(v);
    }
    if (t == ODML_T_FLOAT64) {
        memcpy(bits, &d, 8);
        return 0;
    }
    const float f = (float)d;
    if (isfinite(d) && !isfinite(f)) return -1;
    if (t == ODML_T_FLOAT32) {
        uint32_t b;
        memcpy(&b, &f, 4);
        *bits = b;
        return 0;
    }
    if (isnan(d) || (double)f != d) return -1;     /* (a NaN's payload, a double not float32's: the Python route) */
    const uint16_t h = odml_f2h(f);
    if (isfinite(d) && (h & 0x7c00u) == 0x7c00u) return -1;   /* overflows float16: the rule's error */
    *bits = h;
    return 0;
}

/* ops/padding1.py Padding1OperatorDesc.arguments (ops/_spec.py per_axis) with ops/_move.py _pad_passes: start and
 * end each an exact int (every axis) or a list or tuple of rank exact ints, in [0, UINT32_MAX]; mode a str of MODES;
 * value as pad_value_bits. The interior Copy, then per axis k its start and end slabs: a Fill (CONSTANT) or a Copy
 * whose index maps read the input position the mode chooses. */
static int lower_pad(const odml_move_input *x, PyObject *const *a, Py_ssize_t na, odml_move_prog *g) {
    if (na != 4) return -1;
    const int n = x->n;
    int64_t st[ODML_MAX_RANK], en[ODML_MAX_RANK], dims[ODML_MAX_RANK];
    for (int side = 0; side < 2; side++) {
        int64_t *v = side ? en : st;
        if (odml_axes_field(a[side], n, v)) return -1;
        for (int d = 0; d < n; d++)
            if (v[d] < 0 || v[d] > U32MAX) return -1;
    }
    const int mode = pad_mode(a[2]);
    uint64_t bits;
    if (mode < 0 || pad_value_bits(a[3], x->type, &bits)) return -1;
    for (int d = 0; d < n; d++) dims[d] = x->shape[d] + st[d] + en[d];
    if (set_out(g, 0, x->type, n, dims)) return -1;
    g->pad = 1;                                    /* ops/_move.py pad_passes: the program's MovePlan.pad */
    g->pad_mode = mode;
    g->pad_bits = mode == 0 ? bits : 0;
    memcpy(g->pad_start, st, sizeof(int64_t) * (size_t)n);
    memcpy(g->pad_end, en, sizeof(int64_t) * (size_t)n);
    const int64_t *os = g->out_strides[0];
    odml_move_pass *p = copy_pass(g, 0, 0, x, x->shape, os);
    if (!p) return -1;
    for (int d = 0; d < n; d++) p->dst_offset += st[d] * os[d];
    for (int k = 0; k < n; k++)
        for (int side = 0; side < 2; side++) {
            const int64_t count = side ? en[k] : st[k];
            if (count == 0) continue;
            p = new_pass(g, mode == 0, 0, 0, x, n);
            if (!p) return -1;
            for (int j = 0; j < n; j++) {
                p->dst_strides[j] = os[j];
                if (j < k) {
                    p->sizes[j] = x->shape[j];
                    p->dst_offset += st[j] * os[j];
                } else if (j == k) {
                    p->sizes[j] = count;
                    p->dst_offset += (side ? st[k] + x->shape[k] : 0) * os[j];
                    p->map_mode[j] = mode;
                    p->map_shift[j] = side ? -x->shape[k] : st[k];
                    p->map_size[j] = x->shape[k];
                } else {
                    p->sizes[j] = dims[j];
                    if (st[j] || en[j]) {
                        p->map_mode[j] = mode;
                        p->map_shift[j] = st[j];
                        p->map_size[j] = x->shape[j];
                    }
                }
            }
            if (mode == 0) {
                p->fill_bits = bits;
                memset(p->map_mode, 0, sizeof p->map_mode);
            } else {
                for (int j = 0; j < n; j++) p->src_strides[j] = x->strides[j];
            }
        }
    return 0;
}

/* ops/space_depth.py ORDERS' spellings: 0 DEPTH_COLUMN_ROW, 1 COLUMN_ROW_DEPTH, -1 none. */
static int depth_order(PyObject *o) {
    if (!PyUnicode_CheckExact(o)) return -1;
    if (same_word(o, "dcr") || same_word(o, "depth_column_row")) return 0;
    if (same_word(o, "crd") || same_word(o, "column_row_depth")) return 1;
    return -1;
}

/* ops/space_depth.py _SpaceDepth1.arguments with _SpaceDepth._check and _passes: x 4-D,
 * block_size an exact int in [1, UINT32_MAX] dividing H and W (to depth) or with b * b dividing C (to space), order a
 * str of _ORDERS; one Copy over (N, b, b, C, H, W) of the space side, the depth index (bh, bw, c) for DCR or (c, bh,
 * bw) for CRD. */
static int lower_space_depth(const odml_move_input *x, PyObject *const *a, Py_ssize_t na, odml_move_prog *g,
                             int to_depth) {
    int64_t b, bb;
    const int order = na == 2 ? depth_order(a[1]) : -1;
    if (order < 0 || x->n != 4 || odml_exact_i64(a[0], &b) || b < 1 || b > U32MAX || __builtin_mul_overflow(b, b, &bb))
        return -1;
    const int64_t *in = x->shape;
    int64_t dims[4] = {in[0]};
    if (to_depth) {
        if (in[2] % b || in[3] % b || __builtin_mul_overflow(in[1], bb, &dims[1])) return -1;
        dims[2] = in[2] / b;
        dims[3] = in[3] / b;
    } else {
        if (in[1] % bb || __builtin_mul_overflow(in[2], b, &dims[2]) || __builtin_mul_overflow(in[3], b, &dims[3]))
            return -1;
        dims[1] = in[1] / bb;
    }
    if (set_out(g, 0, x->type, 4, dims)) return -1;
    const int64_t *space = to_depth ? in : dims, *s = to_depth ? x->strides : g->out_strides[0];
    const int64_t *d = to_depth ? g->out_strides[0] : x->strides;
    const int64_t n = space[0], c = space[1], h = space[2] / b, w = space[3] / b;
    int64_t bh, bw, cc;
    if (order == 0) {
        bh = b * c * d[1];
        bw = c * d[1];
        cc = d[1];
    } else {
        bh = b * d[1];
        bw = d[1];
        cc = bb * d[1];
    }
    const int64_t sizes[6] = {n, b, b, c, h, w};
    const int64_t ss[6] = {s[0], s[2], s[3], s[1], b * s[2], b * s[3]};
    const int64_t ds[6] = {d[0], bh, bw, cc, d[2], d[3]};
    odml_move_pass *p = new_pass(g, 0, 0, 0, x, 6);
    if (!p) return -1;
    memcpy(p->sizes, sizes, sizeof sizes);
    memcpy(p->src_strides, to_depth ? ss : ds, sizeof ss);
    memcpy(p->dst_strides, to_depth ? ds : ss, sizeof ds);
    return 0;
}

/* ops/join.py JoinOperatorDesc.arguments and its rules: 1 to 16 inputs of one type and rank, sizes equal but
 * along axis (an exact int); its _passes: one Copy per input into its place along axis. */
static int lower_join(const odml_move_input *xs, int n_in, PyObject *const *a, Py_ssize_t na, odml_move_prog *g) {
    const int n = xs[0].n, axis = na == 1 ? odml_axis(a[0], n) : -1;
    if (axis < 0 || n_in < 1 || n_in > ODML_MOVE_PROG_MAX_IO) return -1;
    int64_t dims[ODML_MAX_RANK];
    memcpy(dims, xs[0].shape, sizeof(int64_t) * (size_t)n);
    dims[axis] = 0;
    for (int i = 0; i < n_in; i++) {
        if (xs[i].n != n || xs[i].type != xs[0].type) return -1;
        for (int d = 0; d < n; d++)
            if (d != axis && xs[i].shape[d] != xs[0].shape[d]) return -1;
        dims[axis] += xs[i].shape[axis];         /* (each at most UINT32_MAX: no overflow) */
    }
    if (set_out(g, 0, xs[0].type, n, dims)) return -1;
    const int64_t *os = g->out_strides[0];
    int64_t at = 0;
    for (int i = 0; i < n_in; i++) {
        odml_move_pass *p = copy_pass(g, i, 0, &xs[i], xs[i].shape, os);
        if (!p) return -1;
        p->dst_offset = at * os[axis];
        at += xs[i].shape[axis];
    }
    return 0;
}

/* ops/split.py SplitOperatorDesc.arguments and its rules: axis an exact int, sizes an exact list or tuple of 1
 * to 16 exact ints >= 1 summing to the input's size along axis; its _passes: one Copy per output from its place along
 * axis. */
static int lower_split(const odml_move_input *x, PyObject *const *a, Py_ssize_t na, odml_move_prog *g) {
    const int n = x->n, axis = na == 2 ? odml_axis(a[0], n) : -1;
    int64_t sizes[ODML_MOVE_PROG_MAX_IO], total = 0, dims[ODML_MAX_RANK];
    int m;
    if (axis < 0 || odml_int_seq(a[1], ODML_MOVE_PROG_MAX_IO, sizes, &m) || m < 1) return -1;
    for (int i = 0; i < m; i++) {
        if (sizes[i] < 1 || sizes[i] > U32MAX) return -1;
        total += sizes[i];
    }
    if (total != x->shape[axis]) return -1;
    g->n_out = m;
    g->multi = 1;
    memcpy(dims, x->shape, sizeof(int64_t) * (size_t)n);
    int64_t at = 0;
    for (int i = 0; i < m; i++) {
        dims[axis] = sizes[i];
        odml_move_pass *p = set_out(g, i, x->type, n, dims) ? NULL : copy_pass(g, 0, i, x, dims, g->out_strides[i]);
        if (!p) return -1;
        p->src_offset += at * x->strides[axis];
        at += sizes[i];
    }
    return 0;
}

/* ops/diagonal_matrix.py _band: the runs covering diagonals [lo, hi) of an h x w matrix, each (row, column,
 * sizes (1 or 2), steps in matrix units (a, b) per size), appended at runs[*n]; -1 past `most`. */
typedef struct { int64_t y, x, k, size[2], a[2], b[2]; } band_run;

static int64_t span_len(int64_t a, int64_t b) { return b > a ? b - a : 0; }
static int64_t max3(int64_t a, int64_t b, int64_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }
static int64_t min3(int64_t a, int64_t b, int64_t c) { return a < b ? (a < c ? a : c) : (b < c ? b : c); }

static int band(int64_t lo, int64_t hi, int64_t h, int64_t w, band_run *runs, int *n, int most) {
    if (lo < 1 - h) lo = 1 - h;
    if (hi > w) hi = w;
    if (lo >= hi) return 0;
    const int64_t ys = 1 - hi > 0 ? 1 - hi : 0, ye = h < w - lo ? h : w - lo;
    const int64_t left = -lo, right = w - hi + 1;
    const int64_t o0 = ys, o1 = min3(left, right, ye), p0 = max3(ys, left, right), p1 = ye;   /* one side */
    const int64_t w0 = ys > left ? ys : left, w1 = right < ye ? right : ye;                  /* whole */
    const int64_t f0 = ys > right ? ys : right, f1 = left < ye ? left : ye;                  /* full width */
    if (span_len(o0, o1) + span_len(p0, p1) + (span_len(w0, w1) > 0) + (span_len(f0, f1) > 0) > hi - lo) {
        if (*n + (hi - lo) > most) return -1;
        for (int64_t k = lo; k < hi; k++) {          /* one run per diagonal */
            band_run *r = &runs[(*n)++];
            r->y = k < 0 ? -k : 0;
            r->x = k > 0 ? k : 0;
            r->k = 1;
            r->size[0] = h - r->y < w - r->x ? h - r->y : w - r->x;
            r->a[0] = r->b[0] = 1;
        }
        return 0;
    }
    if (*n + span_len(o0, o1) + span_len(p0, p1) + 2 > most) return -1;
    for (int side = 0; side < 2; side++)              /* each row the band clips on one side alone */
        for (int64_t y = side ? p0 : o0; y < (side ? p1 : o1); y++) {
            band_run *r = &runs[(*n)++];
            const int64_t x0 = y + lo > 0 ? y + lo : 0, x1 = w < y + hi ? w : y + hi;
            r->y = y;
            r->x = x0;
            r->k = 1;
            r->size[0] = x1 - x0;
            r->a[0] = 0;
            r->b[0] = 1;
        }
    const int64_t rows0[2] = {w0, f0}, rows1[2] = {w1, f1}, xs[2] = {w0 + lo, 0}, ms[2] = {hi - lo, w};
    for (int j = 0; j < 2; j++) {                     /* the rows it crosses whole; those it clips on both sides */
        const int64_t len = span_len(rows0[j], rows1[j]);
        if (!len) continue;
        band_run *r = &runs[(*n)++];
        r->y = rows0[j];
        r->x = xs[j];
        r->k = len == 1 ? 1 : 2;
        r->size[0] = len == 1 ? ms[j] : len;
        r->a[0] = len == 1 ? 0 : 1;
        r->b[0] = len == 1 ? 1 : 1 - j;
        r->size[1] = ms[j];
        r->a[1] = 0;
        r->b[1] = 1;
    }
    return 0;
}

/* arrays/index_ops.py diagonal_matrix with x given, offered as (shape, dtype, value, begin, end) with shape
 * and dtype None, and ops/diagonal_matrix.py _DiagonalRules._passes: a rank 2 to 4 input, value as
 * pad_value_bits (Value's rule is PaddingValue's, _typed_scalar), begin and end exact ints in INT32; the Copy
 * of x, then per filled range (DiagonalMatrix1OperatorDesc.fill_ranges) a Fill per run of its band. */
static int lower_diagonal(const odml_move_input *x, PyObject *const *a, Py_ssize_t na, odml_move_prog *g) {
    const int64_t far = (int64_t)1 << 62;
    int64_t b, e;
    uint64_t bits;
    if (na != 5 || a[0] != Py_None || a[1] != Py_None || x->n < 2 || x->n > 4 || pad_value_bits(a[2], x->type, &bits)
            || odml_exact_i64(a[3], &b) || odml_exact_i64(a[4], &e) || b < INT32_MIN || b > INT32_MAX
            || e < INT32_MIN || e > INT32_MAX || whole_copy(g, x, x->type, 0, 1.0, 0.0))
        return -1;
    const int r = x->n;
    const int64_t h = x->shape[r - 2], w = x->shape[r - 1], *os = g->out_strides[0];
    band_run runs[ODML_MOVE_PROG_MAX_PASSES];
    int n = 0;
    const int64_t ranges[2][2] = {{e >= b ? b : -far, e}, {b, far}};
    for (int i = 0; i < (e >= b ? 1 : 2); i++)
        if (band(ranges[i][0], ranges[i][1], h, w, runs, &n, ODML_MOVE_PROG_MAX_PASSES - 1)) return -1;
    for (int i = 0; i < n; i++) {
        odml_move_pass *p = new_pass(g, 1, 0, 0, x, r - 2 + (int)runs[i].k);
        if (!p) return -1;
        for (int d = 0; d < r - 2; d++) {
            p->sizes[d] = x->shape[d];
            p->dst_strides[d] = os[d];
        }
        for (int k = 0; k < runs[i].k; k++) {
            p->sizes[r - 2 + k] = runs[i].size[k];
            p->dst_strides[r - 2 + k] = runs[i].a[k] * os[r - 2] + runs[i].b[k] * os[r - 1];
        }
        p->dst_offset = runs[i].y * os[r - 2] + runs[i].x * os[r - 1];
        p->fill_bits = bits;
    }
    return 0;
}

/* An input the lowerings take: 1 to ODML_MAX_RANK sizes of 1 to UINT32_MAX elements in all (TensorDesc's bounds:
 * the Python route names them), of a type the operator's table has (types: bit t for DataType value t). */
static int input_ok(const odml_move_input *x, unsigned types) {
    int64_t count = 1;
    if (x->n < 1 || x->n > ODML_MAX_RANK || x->type < 1 || x->type > 11 || !(types & (1u << x->type))) return 0;
    for (int d = 0; d < x->n; d++)
        if (x->shape[d] < 1 || x->shape[d] > U32MAX || __builtin_mul_overflow(count, x->shape[d], &count)) return 0;
    return count <= U32MAX;
}

int odml_move_plain(int lowering, const odml_move_input *x, PyObject *const *a, Py_ssize_t na, odml_new_plan *pl) {
    const int which = lowering & 0xff;
    if (!(lowering & ODML_LOWER_PLAIN) || which >= ODML_PLAIN_COUNT || !input_ok(x, (unsigned)(lowering >> 8) & 0xffeu))
        return -1;
    PyObject *fields = odml_plain_lower(which, x->n, x->shape, a, na);
    if (!fields || fields == Py_None) {           /* (no memory: the Python route says so) */
        if (!fields) PyErr_Clear();
        Py_XDECREF(fields);
        return -1;
    }
    odml_layout L = {.n = x->n, .flt = is_float_type(x->type), .es = odml_type_size[x->type]};
    memcpy(L.shape, x->shape, sizeof(int64_t) * (size_t)x->n);
    memcpy(L.strides, x->strides, sizeof(int64_t) * (size_t)x->n);
    const int rc = odml_new_plan_make(odml_plain_kind(which), &L, ((PyTupleObject *)fields)->ob_item,
                                      PyTuple_GET_SIZE(fields), pl);
    Py_DECREF(fields);
    return rc;
}

int odml_move_lower(int lowering, const odml_move_input *xs, int n_in, PyObject *const *args, Py_ssize_t nargs,
                    odml_move_prog *g) {
    if (lowering & ODML_LOWER_PLAIN) return -1;     /* (odml_move_plain's) */
    memset(g, 0, offsetof(odml_move_prog, passes));
    g->n_out = 1;
    g->types = (unsigned)(lowering >> 8) & 0xffeu;
    lowering &= 0xff;
    if (n_in < 1 || (n_in > 1 && lowering != ODML_LOWER_JOIN)) return -1;
    for (int i = 0; i < n_in; i++)
        if (!input_ok(&xs[i], g->types)) return -1;
    const odml_move_input *x = xs;
    switch (lowering) {
        case ODML_LOWER_IDENTITY: return lower_identity(x, args, nargs, g);
        case ODML_LOWER_CAST: return lower_cast(x, args, nargs, g);
        case ODML_LOWER_TILE: return lower_tile(x, args, nargs, g);
        case ODML_LOWER_PAD: return lower_pad(x, args, nargs, g);
        case ODML_LOWER_SPACE_TO_DEPTH: return lower_space_depth(x, args, nargs, g, 1);
        case ODML_LOWER_DEPTH_TO_SPACE: return lower_space_depth(x, args, nargs, g, 0);
        case ODML_LOWER_JOIN: return lower_join(xs, n_in, args, nargs, g);
        case ODML_LOWER_SPLIT: return lower_split(x, args, nargs, g);
        case ODML_LOWER_DIAGONAL_MATRIX: return lower_diagonal(x, args, nargs, g);
        default: return -1;
    }
}
