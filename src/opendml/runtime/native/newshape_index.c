/* The call cache's new-shape route of the index-driven functions (arrays/index_ops.py: gather, gather_elements,
 * gather_nd, scatter_elements, scatter_nd, one_hot, reverse_subsequences) on NumPy arrays (plain PyTorch CPU tensors
 * through NumPy views) and CUDA memory: a never-seen shape's fields validated as the operator modules do, the
 * Gather/Scatter/Copy passes the Python lowering builds (each function names what it mirrors), the call run and
 * recorded as call_cache_put_move records index_ops._record's passes, in one C call. Anything unusual (a field the
 * Python route would refuse, an empty array, a size past 2^31, an index array the fused check would not read whole)
 * is declined: None, the Python route runs the call. So is a checked call with an index outside its dimension
 * (index.c's kernel checks): the route raises the error naming the first one. */
#define NO_IMPORT_ARRAY
#include "calls.h"

/* index_ops' functions, by the number arrays/index_ops.py passes (its _C_INDEX). */
enum { IX_GATHER = 0, IX_GATHER_ELEMENTS = 1, IX_ONE_HOT = 2, IX_REVERSE = 3, IX_GATHER_ND = 4,
       IX_SCATTER_ELEMENTS = 5, IX_SCATTER_ND = 6 };
/* plan.INDEX_POSITION / INDEX_REVERSE_LENGTH, plan.INDEX_CLAMP / INDEX_SKIP */
enum { IX_POSITION = 0, IX_REVERSE_LENGTH = 1, IX_CLAMP = 0, IX_SKIP = 1 };
#define IX_RANK 8                         /* the tables' DimensionCount at the newest level: 1 to 8 */
#define IX_SIZE_LIMIT ((int64_t)1 << 31)  /* larger sizes take the Python route (stricter than TensorDesc's 2^32 - 1) */

#ifdef ODML_NUMPY
/* An input as planner.array_layout reads it: DataType, sizes, signed element strides, origin. */
typedef struct {
    int n;
    int64_t type, es, origin, count;
    int64_t shape[IX_RANK], strides[IX_RANK];
} ix_in;

/* What a lowering gives: the packed output (natural shape, DataType), the passes as _pass_params' tuples. */
typedef struct {
    int n_pass, out_rank;
    int64_t out_type, out_dims[IX_RANK];
    int src[2], checked[2];
    idx_params p[2];                  /* at most two passes: a Copy (or one_hot's) then a Gather or Scatter */
} ix_prog;

/* x as planner.array_layout reads it (index_ops._host_views: aligned, native order; input_layout bounded its
 * reach): -1 where the route must run (a stride not whole elements, an empty array, a size or count past 2^31). */
static int ix_layout(PyArrayObject *x, ix_in *in) {
    in->n = PyArray_NDIM(x);
    in->es = PyArray_ITEMSIZE(x);
    if (in->n > IX_RANK || !PyArray_ISNOTSWAPPED(x) || !PyArray_ISALIGNED(x) || !(in->type = descr_type(PyArray_DESCR(x))))
        return -1;
    in->origin = 0;
    in->count = 1;
    for (int d = 0; d < in->n; d++) {
        const int64_t n = PyArray_DIM(x, d), s = PyArray_STRIDE(x, d);
        if (n < 1 || n >= IX_SIZE_LIMIT || (s % in->es && n > 1)) return -1;
        in->count *= n;
        if (in->count >= IX_SIZE_LIMIT) return -1;
        in->shape[d] = n;
        in->strides[d] = s % in->es ? 0 : s / in->es;    /* a size-1 axis's stride is never used */
        if (in->strides[d] < 0) in->origin -= (n - 1) * in->strides[d];
    }
    return 0;
}

/* `in` with `at` size-1 axes inserted before axis `pos` (index_ops._lead: pos 0; one_hot's reshape). */
static void ix_insert(ix_in *in, int pos, int at) {
    for (int d = in->n - 1; d >= pos; d--) {
        in->shape[d + at] = in->shape[d];
        in->strides[d + at] = in->strides[d];
    }
    for (int d = pos; d < pos + at; d++) {
        in->shape[d] = 1;
        in->strides[d] = 0;
    }
    in->n += at;
}

/* cpu.backend.index_params / index_ops._pass_params for one pass: the common fields. */
static idx_params *ix_pass(ix_prog *g, int kind, int src, int64_t type, int rank, const int64_t *sizes) {
    idx_params *p = &g->p[g->n_pass];
    memset(p, 0, sizeof *p);
    g->src[g->n_pass] = src;
    g->checked[g->n_pass++] = 0;
    p->kind = kind;
    p->element_size = odml_type_size[type];
    p->data_type = type;
    p->rank = rank;
    memcpy(p->sizes, sizes, sizeof(int64_t) * (size_t)rank);
    return p;
}

/* plan._index.position: the pass's one index axis. */
static void ix_position(idx_params *p, const ix_in *ind, int slot, const int64_t *index_strides, int64_t stride,
                        int64_t bound, int64_t mode, int64_t out_of_range, int64_t axis) {
    idx_axis *ax = &p->axes[p->naxes++];
    ax->slot = slot;
    ax->type = ind->type;
    ax->offset = ind->origin;
    ax->stride = stride;
    ax->bound = bound;
    ax->mode = mode;
    ax->out_of_range = out_of_range;
    ax->axis = axis;
    memcpy(ax->strides, index_strides, sizeof(int64_t) * (size_t)p->rank);
}

/* Whether a checked pass reads every index (index_ops._reads_all): one broadcast along an axis (stride 0) is read at
 * fewer positions than it has; the route checks it first. */
static int ix_reads_all(const ix_in *ind) {
    for (int d = 0; d < ind->n; d++)
        if (ind->shape[d] > 1 && ind->strides[d] == 0) return 0;
    return 1;
}

static int ix_check_flag(PyObject *o, int *check) {
    if (o != Py_True && o != Py_False) return -1;
    *check = o == Py_True;
    return 0;
}

/* Mirrors index_ops._gather (the array API's rules) and ops/gather.py's GatherOperatorDesc (__post_init__,
 * full_sizes, gathered_sizes, _index_passes) for (x, indices) and (check_indices, axis, index_dimensions). */
static int lower_gather(ix_in *x, ix_in *ind, PyObject *const *args, Py_ssize_t nargs, ix_prog *g) {
    int check, a, k;
    int64_t v;
    if (nargs != 3 || ix_check_flag(args[0], &check) || x->n < 1 || ind->n < 1 || (a = odml_axis(args[1], x->n)) < 0)
        return -1;
    const int rx = x->n, ri = ind->n;
    if (args[2] == Py_None) k = ri;
    else if (odml_exact_i64(args[2], &v) || v < 0 || v > ri) return -1;
    else k = (int)v;
    for (int d = 0; d < ri - k; d++)
        if (ind->shape[d] != 1) return -1;
    int r = rx > ri ? rx : ri;
    if (rx + k - 1 > r) r = rx + k - 1;
    if (r > IX_RANK || (check && !ix_reads_all(ind))) return -1;
    const int64_t bound = x->shape[a];
    g->out_rank = 0;
    for (int d = 0; d < rx; d++) {               /* the natural shape: x's sizes with the axis's replaced */
        if (d != a) g->out_dims[g->out_rank++] = x->shape[d];
        else for (int j = ri - k; j < ri; j++) g->out_dims[g->out_rank++] = ind->shape[j];
    }
    int64_t count = 1;
    for (int d = 0; d < g->out_rank; d++) count *= g->out_dims[d];
    if (count >= IX_SIZE_LIMIT) return -1;
    ix_insert(x, 0, r - rx);                     /* _lead(x, r), _lead(indices, r) */
    ix_insert(ind, 0, r - ri);
    const int ap = a + r - rx, L = r + k - 1;
    int64_t full[IDX_MAX_RANK], src[IDX_MAX_RANK], istr[IDX_MAX_RANK], out[IX_RANK], os[IX_RANK];
    int n = 0;
    for (int d = 0; d < ap; d++, n++) full[n] = x->shape[d], src[n] = x->strides[d], istr[n] = 0;
    for (int d = r - k; d < r; d++, n++) full[n] = ind->shape[d], src[n] = 0, istr[n] = ind->strides[d];
    for (int d = ap + 1; d < r; d++, n++) full[n] = x->shape[d], src[n] = x->strides[d], istr[n] = 0;
    for (int d = 0; d < r; d++) out[d] = L >= r ? full[L - r + d] : d == 0 ? 1 : full[d - 1];   /* gathered_sizes */
    odml_packed(out, r, os);
    idx_params *p = ix_pass(g, 0, 0, x->type, L, full);
    p->src_offset = x->origin;
    memcpy(p->src_strides, src, sizeof(int64_t) * (size_t)L);
    for (int d = L > r ? L - r : 0; d < L; d++) p->dst_strides[d] = os[d - (L - r)];   /* right_aligned (0s before) */
    ix_position(p, ind, 1, istr, x->strides[ap], bound, IX_POSITION, IX_CLAMP, 0);
    g->checked[0] = check;
    g->out_type = x->type;
    return 0;
}

/* The one pass of an element-wise gather along axis a (gather_elements' and reverse_subsequences' _index_passes):
 * x read at the positions of `sizes` (x's, but along a) through the index `ind` at strides istr (an index or, mode
 * IX_REVERSE_LENGTH, a length), written to the packed output of that natural shape. */
static void ix_along(ix_prog *g, const ix_in *x, int a, const int64_t *sizes, const ix_in *ind, const int64_t *istr,
                     int64_t mode) {
    idx_params *p = ix_pass(g, 0, 0, x->type, x->n, sizes);
    p->src_offset = x->origin;
    for (int d = 0; d < x->n; d++) p->src_strides[d] = d == a ? 0 : x->strides[d];
    odml_packed(sizes, x->n, p->dst_strides);
    ix_position(p, ind, 1, istr, x->strides[a], x->shape[a], mode, IX_CLAMP, mode == IX_REVERSE_LENGTH ? a : 0);
    g->out_type = x->type;
    g->out_rank = x->n;
    memcpy(g->out_dims, sizes, sizeof(int64_t) * (size_t)x->n);
}

/* Mirrors index_ops._gather_elements and ops/gather_elements.py's GatherElementsOperatorDesc
 * (__post_init__, _index_passes) for (x, indices) and (check_indices, axis). */
static int lower_gather_elements(ix_in *x, ix_in *ind, PyObject *const *args, Py_ssize_t nargs, ix_prog *g) {
    int check, a;
    if (nargs != 2 || ix_check_flag(args[0], &check) || x->n < 1 || ind->n != x->n || (a = odml_axis(args[1], x->n)) < 0
            || (check && !ix_reads_all(ind)))
        return -1;
    for (int d = 0; d < x->n; d++)
        if (d != a && ind->shape[d] != x->shape[d]) return -1;
    ix_along(g, x, a, ind->shape, ind, ind->strides, IX_POSITION);
    g->checked[0] = check;
    return 0;
}

/* Mirrors index_ops._one_hot and ops/one_hot.py's OneHotOperatorDesc (__post_init__, _index_passes) for
 * (indices, values) and (depth, axis): the off value copied everywhere, then the on value scattered. */
static int lower_one_hot(ix_in *ind, ix_in *val, PyObject *const *args, Py_ssize_t nargs, ix_prog *g) {
    int64_t depth;
    int a;
    const int ro = ind->n + 1;
    if (nargs != 2 || ind->n < 1 || ro > IX_RANK || odml_exact_i64(args[0], &depth) || depth < 1 ||
            depth >= IX_SIZE_LIMIT || val->n != 1 || val->shape[0] != 2 || (a = odml_axis(args[1], ro)) < 0 ||
            ind->count * depth >= IX_SIZE_LIMIT)
        return -1;
    ix_insert(ind, a, 1);                        /* indices.reshape(is_[:a] + (1,) + is_[a:]) */
    const int64_t vs = val->strides[0];
    ix_insert(val, 0, ro - 1);                   /* _lead(values, ro) */
    int64_t out[IX_RANK], os[IX_RANK];
    for (int d = 0; d < ro; d++) out[d] = d == a ? depth : ind->shape[d];
    odml_packed(out, ro, os);
    idx_params *c = ix_pass(g, 0, 1, val->type, ro, out);      /* Copy(1, 0, out.sizes, vo, 0s, 0, os_) */
    c->outer = ro;
    c->src_offset = val->origin;
    memcpy(c->dst_strides, os, sizeof(int64_t) * (size_t)ro);
    idx_params *s = ix_pass(g, 1, 1, val->type, ro, ind->shape);   /* (ix_pass zeroes: source strides 0) */
    s->src_offset = val->origin + vs;                         /* vo + vs[inner]: the on value */
    for (int d = 0; d < ro; d++) s->dst_strides[d] = d == a ? 0 : os[d];
    ix_position(s, ind, 0, ind->strides, os[a], depth, IX_POSITION, IX_SKIP, 0);
    g->out_type = val->type;
    g->out_rank = ro;
    memcpy(g->out_dims, out, sizeof(int64_t) * (size_t)ro);
    return 0;
}

/* Mirrors index_ops._reverse_subsequences and ops/reverse_subsequences.py's ReverseSubsequencesOperatorDesc
 * (__post_init__, _index_passes) for (x, sequence_lengths) and (axis,). */
static int lower_reverse(ix_in *x, ix_in *len, PyObject *const *args, Py_ssize_t nargs, ix_prog *g) {
    int a;
    if (nargs != 1 || x->n < 1 || (a = odml_axis(args[0], x->n)) < 0) return -1;
    if (len->n == x->n - 1) ix_insert(len, a, 1);
    if (len->n != x->n) return -1;
    int64_t lstr[IX_RANK];
    for (int d = 0; d < x->n; d++) {
        if (len->shape[d] != (d == a ? 1 : x->shape[d])) return -1;
        lstr[d] = d == a ? 0 : len->strides[d];
    }
    ix_along(g, x, a, x->shape, len, lstr, IX_REVERSE_LENGTH);
    return 0;
}

/* The tuples' rules index_ops._gather_nd and ops/gather_nd.py's _NdIndexing._check_nd share, for x, the
 * indices (last axis: q-tuples) and b batch dimensions: -1 where either refuses the call. */
static int nd_valid(const ix_in *x, const ix_in *ind, int b, int check) {
    if (x->n < 1 || ind->n < 1 || b < 0 || b >= ind->n || (check && !ix_reads_all(ind))) return -1;
    const int64_t q = ind->shape[ind->n - 1];
    if (q < 1 || q > x->n - b) return -1;
    for (int k = 0; k < b; k++)
        if (x->shape[k] != ind->shape[k]) return -1;
    return 0;
}

/* ops/gather_nd.py's _NdIndexing._nd_axes on x and the indices led to r dimensions (rx, ri their natural
 * ranks, b batch dimensions, `data` the strides of the tensor indexed: x's for a gather, the packed output's
 * for a scatter): the pass's sizes, the data's strides over them and the q index axes, into p. */
static void nd_axes(idx_params *p, const ix_in *x, const ix_in *ind, int rx, int ri, int b, const int64_t *data,
                    int64_t *data_out) {
    const int r = x->n, first = r - rx, lead = ri - 1, q = (int)ind->shape[r - 1], trail = rx - b - q;
    int64_t istr[IDX_MAX_RANK];
    int n = 0;
    for (int k = 0; k < lead; k++, n++) {
        p->sizes[n] = ind->shape[r - ri + k];
        data_out[n] = k < b ? data[first + k] : 0;
        istr[n] = ind->strides[r - ri + k];
    }
    for (int k = 0; k < trail; k++, n++) {
        p->sizes[n] = x->shape[first + b + q + k];
        data_out[n] = data[first + b + q + k];
        istr[n] = 0;
    }
    p->rank = n;
    ix_in at = *ind;
    for (int j = 0; j < q; j++) {
        at.origin = ind->origin + j * ind->strides[r - 1];
        ix_position(p, &at, 1, istr, data[first + b + j], x->shape[first + b + j], IX_POSITION, IX_CLAMP, 0);
    }
}

/* Mirrors index_ops._gather_nd and ops/gather_nd.py's GatherNd1OperatorDesc (__post_init__, _check_nd,
 * nd_sizes, _index_passes) for (x, indices) and (check_indices, batch_dimensions). */
static int lower_gather_nd(ix_in *x, ix_in *ind, PyObject *const *args, Py_ssize_t nargs, ix_prog *g) {
    int check;
    int64_t b;
    if (nargs != 2 || ix_check_flag(args[0], &check) || odml_exact_i64(args[1], &b) || b < 0 || b > IX_RANK ||
            nd_valid(x, ind, (int)b, check))
        return -1;
    const int rx = x->n, ri = ind->n, q = (int)ind->shape[ri - 1];
    int r = rx > ri ? rx : ri;
    if (ri - 1 + rx - (int)b - q > r) r = ri - 1 + rx - (int)b - q;            /* _nd_rank */
    if (r > IX_RANK) return -1;                 /* (out_dims holds IX_RANK: checked before it is filled) */
    g->out_rank = 0;
    for (int k = 0; k < ri - 1; k++) g->out_dims[g->out_rank++] = ind->shape[k];
    for (int k = (int)b + q; k < rx; k++) g->out_dims[g->out_rank++] = x->shape[k];
    int64_t count = 1;
    for (int d = 0; d < g->out_rank; d++) count *= g->out_dims[d];
    if (count >= IX_SIZE_LIMIT) return -1;
    ix_insert(x, 0, r - rx);
    ix_insert(ind, 0, r - ri);
    idx_params *p = ix_pass(g, 0, 0, x->type, 0, x->shape);
    nd_axes(p, x, ind, rx, ri, (int)b, x->strides, p->src_strides);
    p->src_offset = x->origin;
    odml_packed(g->out_dims, g->out_rank, p->dst_strides);          /* right_aligned(packed, L): the same strides */
    g->checked[0] = check;
    g->out_type = x->type;
    return 0;
}

/* ops/scatter.py's and ops/scatter_nd.py's first pass: Copy(0, 0, x's sizes, xo, xs, 0, packed strides). */
static void scatter_copy(ix_prog *g, const ix_in *x, int64_t *os) {
    odml_packed(x->shape, x->n, os);
    idx_params *c = ix_pass(g, 0, 0, x->type, x->n, x->shape);
    c->outer = x->n;
    c->src_offset = x->origin;
    memcpy(c->src_strides, x->strides, sizeof(int64_t) * (size_t)x->n);
    memcpy(c->dst_strides, os, sizeof(int64_t) * (size_t)x->n);
    g->out_type = x->type;
}

/* Mirrors index_ops._scatter_elements and ops/scatter.py's ScatterElementsOperatorDesc (__post_init__,
 * _index_passes) for (x, indices, updates) and (check_indices, axis). */
static int lower_scatter_elements(ix_in *x, ix_in *ind, ix_in *upd, PyObject *const *args, Py_ssize_t nargs,
                                  ix_prog *g) {
    int check, a;
    if (nargs != 2 || ix_check_flag(args[0], &check) || x->n < 1 || ind->n != x->n || upd->n != x->n ||
            upd->type != x->type || (a = odml_axis(args[1], x->n)) < 0 || (check && !ix_reads_all(ind)))
        return -1;
    int64_t os[IX_RANK];
    for (int d = 0; d < x->n; d++)
        if ((d != a && ind->shape[d] != x->shape[d]) || upd->shape[d] != ind->shape[d]) return -1;
    scatter_copy(g, x, os);
    idx_params *s = ix_pass(g, 1, 2, x->type, x->n, upd->shape);
    s->src_offset = upd->origin;
    memcpy(s->src_strides, upd->strides, sizeof(int64_t) * (size_t)x->n);
    for (int d = 0; d < x->n; d++) s->dst_strides[d] = d == a ? 0 : os[d];
    ix_position(s, ind, 1, ind->strides, os[a], x->shape[a], IX_POSITION, IX_CLAMP, 0);
    g->checked[1] = check;
    g->out_rank = x->n;
    memcpy(g->out_dims, x->shape, sizeof(int64_t) * (size_t)x->n);
    return 0;
}

/* Mirrors index_ops._scatter_nd and ops/scatter_nd.py's ScatterNdOperatorDesc (__post_init__, _index_passes)
 * for (x, indices, updates) and (check_indices,). */
static int lower_scatter_nd(ix_in *x, ix_in *ind, ix_in *upd, PyObject *const *args, Py_ssize_t nargs,
                            ix_prog *g) {
    int check;
    if (nargs != 1 || ix_check_flag(args[0], &check) || upd->type != x->type || nd_valid(x, ind, 0, check))
        return -1;
    const int rx = x->n, ri = ind->n, ru = upd->n, q = (int)ind->shape[ri - 1];
    if (ru != ri - 1 + rx - q) return -1;                 /* updates.shape == indices.shape[:-1] + x.shape[q:] */
    for (int k = 0; k < ru; k++)
        if (upd->shape[k] != (k < ri - 1 ? ind->shape[k] : x->shape[q + k - (ri - 1)])) return -1;
    int r = rx > ri ? rx : ri;
    if (ru > r) r = ru;
    if (r > IX_RANK) return -1;
    g->out_rank = rx;
    memcpy(g->out_dims, x->shape, sizeof(int64_t) * (size_t)rx);
    ix_insert(x, 0, r - rx);
    ix_insert(ind, 0, r - ri);
    ix_insert(upd, 0, r - ru);
    int64_t os[IX_RANK];
    scatter_copy(g, x, os);
    idx_params *s = ix_pass(g, 1, 2, x->type, 0, x->shape);
    nd_axes(s, x, ind, rx, ri, 0, os, s->dst_strides);
    s->src_offset = upd->origin;
    for (int d = 0; d < s->rank; d++) s->src_strides[d] = upd->strides[r - s->rank + d];   /* right_aligned */
    g->checked[1] = check;
    return 0;
}

/* The lowering of function `which` on the inputs xs (led, reshaped in place) and the call's arguments: 0
 * with the passes in g, or -1 (the route). */
static int ix_lower(int which, ix_in *xs, PyObject *const *args, Py_ssize_t nargs, ix_prog *g) {
    return which == IX_GATHER ? lower_gather(&xs[0], &xs[1], args, nargs, g)
         : which == IX_GATHER_ELEMENTS ? lower_gather_elements(&xs[0], &xs[1], args, nargs, g)
         : which == IX_ONE_HOT ? lower_one_hot(&xs[0], &xs[1], args, nargs, g)
         : which == IX_REVERSE ? lower_reverse(&xs[0], &xs[1], args, nargs, g)
         : which == IX_GATHER_ND ? lower_gather_nd(&xs[0], &xs[1], args, nargs, g)
         : which == IX_SCATTER_ELEMENTS ? lower_scatter_elements(&xs[0], &xs[1], &xs[2], args, nargs, g)
         : which == IX_SCATTER_ND ? lower_scatter_nd(&xs[0], &xs[1], &xs[2], args, nargs, g) : -1;
}

/* g's passes (their outer counts completed: odml_ix_outer) checked to stay inside the n_in inputs of `span`
 * elements of `in_size` bytes and the packed output, whatever the index values: the output's elements, or -1. */
static int64_t ix_fits(ix_prog *g, const int64_t *span, const int *in_size, int n_in) {
    int64_t count = 1;
    const int out_size = (int)odml_type_size[g->out_type];
    for (int d = 0; d < g->out_rank; d++) count *= g->out_dims[d];
    for (int i = 0; i < g->n_pass; i++) {
        idx_params *p = &g->p[i];
        p->outer = p->outer ? p->outer : odml_ix_outer(p);
        const Pass mp = {.src = g->src[i]};
        if (!index_pass_fits(&mp, p, span, in_size, &count, &out_size, n_in, 1)) return -1;
    }
    return count;
}

/* The entry of function `which` on the n_in exact ndarrays `in` and the call's arguments; `types`: bit 16 * j + t,
 * DataType t for array j, as the operator's tables take at the newest level; an output of min_bytes or more comes
 * from the output blocks. NULL, no exception set, where the route must run it; with one for no memory. */
static Entry *index_entry(int which, int64_t types, PyArrayObject **in, int n_in, PyObject *call_args,
                          int64_t min_bytes) {
    ix_in xs[3];
    ix_prog g;
    int64_t origin[3], span[3];
    int in_size[3];
    memset(&g, 0, sizeof g);
    if (n_in != (which == IX_SCATTER_ELEMENTS || which == IX_SCATTER_ND ? 3 : 2)) return NULL;
    for (int j = 0; j < n_in; j++) {
        /* input_layout first: it refuses reaches past 2^58 elements, so ix_layout's products stay in 64 bits */
        if (input_layout(in[j], &origin[j], &span[j]) < 0 || ix_layout(in[j], &xs[j]) < 0 ||
                !(types >> (16 * j + xs[j].type) & 1))
            return NULL;
        in_size[j] = (int)xs[j].es;
    }
    int64_t count;
    if (ix_lower(which, xs, ((PyTupleObject *)call_args)->ob_item, PyTuple_GET_SIZE(call_args), &g) < 0
            || (count = ix_fits(&g, span, in_size, n_in)) < 0)
        return NULL;
    Entry *e = entry_alloc(KIND_MOVE, 1, g.n_pass);
    if (!e) return NULL;
    Out *o = &e->outs[0];
    if (!(o->dtype = (PyObject *)PyArray_DescrFromType(move_npy_type[g.out_type]))) {    /* DataType.numpy_dtype */
        Py_DECREF(e);
        return NULL;
    }
    e->n_in = n_in;
    for (int j = 0; j < n_in; j++) e->origin[j] = origin[j];
    o->rank = g.out_rank;
    memcpy(o->dims, g.out_dims, sizeof(int64_t) * (size_t)g.out_rank);
    o->bytes = count * odml_type_size[g.out_type];
    o->use_blocks = o->bytes >= min_bytes;
    e->total = o->bytes;
    for (int i = 0; i < g.n_pass; i++) {
        Pass *mp = &e->passes[i];
        if (!(mp->index = PyMem_Malloc(sizeof g.p[i]))) {
            PyErr_NoMemory();
            Py_DECREF(e);
            return NULL;
        }
        memcpy(mp->index, &g.p[i], sizeof g.p[i]);
        mp->kernel = PASS_INDEX;
        mp->src = g.src[i];
        mp->threads = 1;
        mp->checked = g.checked[i];
    }
    return e;
}

/* The inputs offered (index_ops' tuple of two or three exact ndarrays) in `in` (borrowed): how many; -1
 * else. */
static int index_inputs(PyObject *given, PyArrayObject **in) {
    int seq, n;
    return PyTuple_CheckExact(given) && PyTuple_GET_SIZE(given) <= 3
           && (n = arrays_of(given, &PyArray_Type, (PyObject **)in, &seq)) >= 2 ? n : -1;
}

/* index_new(op, which, types, given, args, generation, min_bytes): the call lowered, run and recorded (serve_new),
 * or None. */
static PyObject *index_new(PyObject *const *args, Py_ssize_t nargs) {
    (void)nargs;
    int64_t which, types, gen, min_bytes;
    PyArrayObject *in[3];
    int n_in;
    if (plain_args(args, ".ii.tii", &which, &types, &gen, &min_bytes) || (n_in = index_inputs(args[3], in)) < 0)
        Py_RETURN_NONE;
    for (int j = 0; j < n_in; j++) Py_INCREF(in[j]);
    Entry *e = index_entry((int)which, types, in, n_in, args[4], min_bytes);
    PyObject *result = e ? serve_new(e, args[0], args[3], args[4], in, n_in, gen)
                         : PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    for (int j = 0; j < n_in; j++) Py_DECREF(in[j]);
    return result;
}

/* -- New shapes on CUDA memory: PyTorch CUDA tensors and CuPy arrays -------------------------------------- */

/* cuda_new's lowering and launches of an index function (`which`, `types` as index_new takes them). */
typedef struct {
    CudaNew base;
    int which;
    int64_t types;
    ix_prog g;
} IndexNew;

/* The call lowered on the inputs as keyed (layouts as ix_layout reads them), its output in out; -1 where the route
 * must run it: what the CPU lowering declines (ix_reads_all too), a pass reaching outside its buffers. A checked
 * pass's kernels check it (index_plan marks its launch: cuda_new gives each checked axis the flag they set). */
static int index_lower(CudaNew *how, const CudaInputs *c, PyObject *const *args, Py_ssize_t nargs,
                       odml_move_prog *out) {
    IndexNew *ix = (IndexNew *)how;
    ix_in xs[3];
    int in_size[3];
    memset(&ix->g, 0, sizeof ix->g);
    if (c->n != (ix->which == IX_SCATTER_ELEMENTS || ix->which == IX_SCATTER_ND ? 3 : 2)) return -1;
    for (int j = 0; j < c->n; j++) {
        const odml_move_input *x = &c->xs[j];
        ix_in *in = &xs[j];
        if (x->n > IX_RANK || !(ix->types >> (16 * j + x->type) & 1)) return -1;
        in->n = x->n;
        in->type = x->type;
        in->es = in_size[j] = odml_type_size[x->type];
        in->origin = x->origin;
        in->count = 1;
        for (int d = 0; d < x->n; d++) {
            if (x->shape[d] < 1 || x->shape[d] >= IX_SIZE_LIMIT) return -1;
            in->count *= x->shape[d];
            if (in->count >= IX_SIZE_LIMIT) return -1;
            in->shape[d] = x->shape[d];
            in->strides[d] = x->shape[d] > 1 ? x->strides[d] : 0;
        }
    }
    ix_prog *g = &ix->g;
    if (ix_lower(ix->which, xs, args, nargs, g) < 0 || ix_fits(g, c->span, in_size, c->n) < 0) return -1;
    out->n_out = 1;
    out->multi = 0;
    out->out_type[0] = g->out_type;
    out->out_rank[0] = g->out_rank;
    memcpy(out->out_dims[0], g->out_dims, sizeof(int64_t) * (size_t)g->out_rank);
    return 0;
}

/* The launches of the lowered passes for the output at dsts[0] (conf: (kernels, steps.c_settings, index.c_settings),
 * each settings function or its tuple, the move settings read only for a Copy pass): a copy as the move program's
 * launch (cuda_move_spec.c), a Gather or Scatter as index.py's (cuda_index_spec.c); their count, or -1. */
static int index_plan(CudaNew *how, const odml_move_prog *out, const CudaInputs *c, const uint64_t *dsts,
                      PyObject *conf, odml_move_launch *L) {
    const ix_prog *g = &((IndexNew *)how)->g;
    odml_move_cuda_conf mc;
    odml_index_cuda_conf ic;
    uint64_t src[MAX_MOVE_IO];
    /* a Copy pass as a one-pass move program: held here (the GIL held), not 56 KiB malloc'd and freed a call */
    static odml_move_prog one;
    int n = 0, read = 0;
    PyObject *t = PyTuple_GET_SIZE(conf) == 3 ? conf_item(conf, 2) : NULL;
    const int bad = !t || odml_index_cuda_conf_read(t, &ic) || cuda_sources(c, src);
    Py_XDECREF(t);
    if (bad) return -1;
    how->checked = 0;
    for (int i = 0; i < g->n_pass; i++) {
        const idx_params *p = &g->p[i];
        if (p->naxes) {                              /* a Gather or Scatter: one launch, or an owner table's two */
            const int m = n + 2 <= ODML_MOVE_PROG_MAX_PASSES ? odml_index_cuda(p, &ic, src[g->src[i]], dsts[0], &L[n])
                                                            : -1;
            if (m < 1) return -1;
            for (const int end = n + m; n < end; n++) {
                if (g->checked[i]) how->checked |= 1u << n;
                L[n].src = p->has_value ? -1 : g->src[i];
                L[n].dst = 0;
            }
            continue;
        }
        /* a Copy (index_ops' plan as a one-pass move program, as index_move_launch's plain gives it) */
        if (!read) {
            PyObject *m = conf_item(conf, 1);
            const int no = !m || odml_move_cuda_conf_read(m, &mc);
            Py_XDECREF(m);
            if (no) return -1;
            read = 1;
        }
        memset(&one, 0, offsetof(odml_move_prog, passes));    /* (its one pass below: not the 56 KiB of all) */
        odml_move_pass *q = &one.passes[0];
        one.n_out = one.n_pass = 1;
        one.out_type[0] = out->out_type[0];
        one.pass_src[0] = g->src[i];
        one.pass_dst[0] = 0;
        memset(q, 0, sizeof *q);
        q->n = (int)p->rank;
        q->src_type = q->dst_type = p->data_type;
        q->src_offset = p->src_offset;
        q->dst_offset = p->dst_offset;
        memcpy(q->sizes, p->sizes, sizeof(int64_t) * (size_t)p->rank);
        memcpy(q->src_strides, p->src_strides, sizeof(int64_t) * (size_t)p->rank);
        memcpy(q->dst_strides, p->dst_strides, sizeof(int64_t) * (size_t)p->rank);
        if (n >= ODML_MOVE_PROG_MAX_PASSES || odml_move_cuda(&one, &mc, src, c->span, dsts, &L[n]) != 1) return -1;
        L[n].scratch = L[n].aux = 0;
        L[n++].index = 0;
    }
    return n;
}

/* cuda_index_steps(which, types, given, args, data_ptrs, dst_ptr, move_settings, index_settings) -> (shape, ((name,
 * params, grid, shared_mem, src, dst, slots, flags, scratch, aux), ...)) or None: the launches call_cache_index_new
 * would make for NumPy arrays `given` at device addresses data_ptrs, the output at dst_ptr, nothing launched (flags,
 * scratch, aux: odml_move_launch's and IX_FLAG_AT's; tests: against index.py's plan_pass,
 * IndexPass.call_cache_step and steps.py's move_steps, no GPU needed). */
static PyObject *cuda_index_steps(PyObject *const *args) {
    int64_t which, types, dst;
    PyArrayObject *in[3];
    int n_in;
    CudaInputs c;
    PyObject *dp = args[4], *result = NULL;
    if (plain_args(args, "ii.tti", &which, &types, &dst) || (n_in = index_inputs(args[2], in)) < 0
            || PyTuple_GET_SIZE(dp) != n_in || numpy_cuda_inputs(in, n_in, dp, &c) < 0)
        Py_RETURN_NONE;
    IndexNew *how = PyMem_Calloc(1, sizeof *how);
    odml_move_prog *g = PyMem_Malloc(sizeof *g);
    odml_move_launch *L = PyMem_Malloc(sizeof *L * ODML_MOVE_PROG_MAX_PASSES);
    const uint64_t dsts[1] = {(uint64_t)dst};
    PyObject *conf = PyTuple_Pack(3, Py_None, args[6], args[7]);
    int nl;
    if (!how || !g || !L || !conf) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    how->which = (int)which;
    how->types = types;
    if (index_lower(&how->base, &c, ((PyTupleObject *)args[3])->ob_item, PyTuple_GET_SIZE(args[3]), g)
            || (nl = index_plan(&how->base, g, &c, dsts, conf, L)) < 1) {
        if (!PyErr_Occurred()) result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *steps = PyTuple_New(nl), *shape_t = odml_ints_tuple(g->out_dims[0], g->out_rank[0]);
    for (int i = 0; steps && shape_t && !PyErr_Occurred() && i < nl; i++) {
        const int checks = L[i].index && how->base.checked >> i & 1;
        PyObject *slots = PyTuple_New(L[i].index ? L[i].naxes : 0), *flags = PyTuple_New(checks ? L[i].naxes : 0);
        for (int a = 0; slots && L[i].index && a < L[i].naxes; a++)
            PyTuple_SET_ITEM(slots, a, PyLong_FromLong(L[i].slot[a]));
        for (int a = 0; flags && checks && a < L[i].naxes; a++)   /* (cuda_entry's placement) */
            PyTuple_SET_ITEM(flags, a, PyLong_FromSize_t(IX_FLAG_AT(a)));
        PyObject *t = slots && flags ? Py_BuildValue("(sy#IIiiNNLi)", L[i].name, (const char *)&L[i].p, L[i].size,
                                                     L[i].grid, L[i].smem, L[i].src, L[i].dst, slots, flags,
                                                     (long long)L[i].scratch, L[i].aux) : NULL;
        if (!t) break;
        PyTuple_SET_ITEM(steps, i, t);
    }
    if (steps && shape_t && !PyErr_Occurred()) result = PyTuple_Pack(2, shape_t, steps);
    Py_XDECREF(steps);
    Py_XDECREF(shape_t);
done:
    Py_XDECREF(conf);
    PyMem_Free(how);
    PyMem_Free(g);
    PyMem_Free(L);
    return result;
}

/* call_cache_index_new (runtime/calls.py's index_new): new_shape's route, index_new on the CPU, cuda_new on CUDA. */
static PyObject *index_new_route(PyObject *const *args, Py_ssize_t nargs) {
    int64_t which = 0, types = 0;
    const int ok = odml_exact_i64(args[1], &which) == 0 && odml_exact_i64(args[2], &types) == 0;
    IndexNew how;                                /* (its g zeroed by index_lower: not on every call) */
    how.base = (CudaNew){index_lower, index_plan, 0};
    how.which = (int)which;
    how.types = types;
    return new_shape(args, nargs, 3, 7, ok ? &how.base : NULL, index_new);
}

/* index_lowering(which, types, given, args, min_bytes) -> (shape, dtype, ((src, dst, params, threads,
 * checked), ...)) or None: the entry call_cache_index_new would record, nothing run (tests: against
 * index_ops._record's). */
static PyObject *index_lowering(PyObject *const *args) {
    int64_t which, types, min_bytes;
    PyArrayObject *in[3];
    int n_in;
    if (plain_args(args, "ii.ti", &which, &types, &min_bytes) || (n_in = index_inputs(args[2], in)) < 0)
        Py_RETURN_NONE;
    Entry *e = index_entry((int)which, types, in, n_in, args[3], min_bytes);
    if (!e) return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    PyObject *shape = odml_ints_tuple(e->outs[0].dims, e->outs[0].rank), *passes = PyTuple_New(e->n_pass);
    PyObject *result = NULL;
    if (!shape || !passes) goto done;
    for (int i = 0; i < e->n_pass; i++) {
        const Pass *mp = &e->passes[i];
        PyObject *t = Py_BuildValue("(iiy#ii)", mp->src, mp->dst, (const char *)mp->index,
                                    (Py_ssize_t)sizeof(idx_params), mp->threads, mp->checked);
        if (!t) goto done;
        PyTuple_SET_ITEM(passes, i, t);
    }
    result = Py_BuildValue("(OOO)", shape, e->outs[0].dtype, passes);
done:
    Py_XDECREF(shape);
    Py_XDECREF(passes);
    Py_DECREF(e);
    return result;
}
#endif

GLUE_FUNCTION(call_cache_index_new, "op, which, types, given, args, generation, min_bytes, cuda_conf=None", 7, 8,
              index_new_route(args, nargs))
GLUE_FUNCTION(index_lowering, "which, types, given, args, min_bytes", 5, 5, index_lowering(args))
GLUE_FUNCTION(cuda_index_steps, "which, types, given, args, data_ptrs, dst_ptr, move_settings, index_settings", 8, 8,
              cuda_index_steps(args))
