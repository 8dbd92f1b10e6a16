/* The index-driven passes of the move program (plan.Gather, plan.Scatter) on
 * the CPU: opendml.runtime.cpu._index, an extension of its own (the other
 * kernels are _native's).
 *
 * One pass walks its "outer" dimensions in row-major order; at each position
 * it reads every IndexAxis's value from its index tensor, turns it into a
 * coordinate inside [0, bound) (a negative value of a signed type counted
 * from the end, then clamped; or the position skipped: INDEX_SKIP; or, for
 * INDEX_REVERSE_LENGTH, the reversed coordinate of the first min(L, bound)
 * elements), and moves one block of the "inner" dimensions (those that read
 * no index). Values are compared exactly in their own type: no wrap-around.
 * Before anything moves, the whole reach of the pass (its strides' span
 * plus every coordinate's [0, bound) times its stride, and the index
 * tensors' elements read) is checked against the bound ranges; a pass
 * reaching outside them stops with an error (a plan that validation let
 * through never does). The coordinates then never leave [0, bound).
 *
 * A scatter runs its positions in order on one thread: where positions
 * repeat, the last write wins (or, accumulating, the additions happen in
 * that order: float16 adds in float32 and rounds each sum, as NumPy does;
 * integers wrap), so the result is the same bytes on every run.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../fp16.h"

#define IDX_MAX_RANK 16
#define IDX_MAX_AXES 8

typedef struct {
    int64_t slot, type, offset, stride, bound, mode, out_of_range, axis;
    int64_t strides[IDX_MAX_RANK];
} idx_axis;

typedef struct {
    int64_t kind;            /* 0 gather, 1 scatter */
    int64_t element_size;
    int64_t data_type;       /* DML_TENSOR_DATA_TYPE of the destination (accumulation) */
    int64_t rank, outer;
    int64_t accumulate, has_value;
    uint64_t value_bits;
    int64_t src_offset, dst_offset;
    int64_t sizes[IDX_MAX_RANK], src_strides[IDX_MAX_RANK], dst_strides[IDX_MAX_RANK];
    int64_t naxes;
    idx_axis axes[IDX_MAX_AXES];
} idx_params;

/* DML_TENSOR_DATA_TYPE values */
enum { T_F32 = 1, T_F16 = 2, T_U32 = 3, T_U16 = 4, T_U8 = 5, T_I32 = 6, T_I16 = 7, T_I8 = 8, T_F64 = 9,
       T_U64 = 10, T_I64 = 11 };

/* The coordinate of one index value; 0: skip the position. */
static inline int coordinate(const idx_axis* ax, const char* base, int64_t at, int64_t e, int64_t* c) {
    int64_t bound = ax->bound;
    int is_signed = 0;
    int64_t sv = 0;
    uint64_t uv = 0;
    switch (ax->type) {
    case T_I32: sv = ((const int32_t*)base)[at]; is_signed = 1; break;
    case T_I64: sv = ((const int64_t*)base)[at]; is_signed = 1; break;
    case T_U32: uv = ((const uint32_t*)base)[at]; break;
    default: uv = ((const uint64_t*)base)[at]; break;
    }
    if (ax->mode == 1) {                       /* INDEX_REVERSE_LENGTH */
        int64_t len;
        if (is_signed) len = sv < 0 ? 0 : (sv > bound ? bound : sv);
        else len = uv > (uint64_t)bound ? bound : (int64_t)uv;
        *c = e < len ? len - 1 - e : e;
        return 1;
    }
    if (is_signed) {
        if (sv < 0) sv += bound;               /* sv >= INT64_MIN, bound > 0: no overflow */
        if (sv < 0 || sv >= bound) {
            if (ax->out_of_range == 1) return 0;
            sv = sv < 0 ? 0 : bound - 1;
        }
        *c = sv;
    } else {
        if (uv >= (uint64_t)bound) {
            if (ax->out_of_range == 1) return 0;
            uv = (uint64_t)bound - 1;
        }
        *c = (int64_t)uv;
    }
    return 1;
}

static void add_element(char* d, const char* s, int64_t type) {
    switch (type) {
    case T_F32: { float a, b; memcpy(&a, d, 4); memcpy(&b, s, 4); a += b; memcpy(d, &a, 4); break; }
    case T_F64: { double a, b; memcpy(&a, d, 8); memcpy(&b, s, 8); a += b; memcpy(d, &a, 8); break; }
    case T_F16: { uint16_t a, b; memcpy(&a, d, 2); memcpy(&b, s, 2);
                  a = odml_f2h(odml_h2f(a) + odml_h2f(b)); memcpy(d, &a, 2); break; }
    case T_U8: case T_I8: *(uint8_t*)d = (uint8_t)(*(uint8_t*)d + *(const uint8_t*)s); break;
    case T_U16: case T_I16: { uint16_t a, b; memcpy(&a, d, 2); memcpy(&b, s, 2); a = (uint16_t)(a + b);
                              memcpy(d, &a, 2); break; }
    case T_U32: case T_I32: { uint32_t a, b; memcpy(&a, d, 4); memcpy(&b, s, 4); a += b; memcpy(d, &a, 4); break; }
    default: { uint64_t a, b; memcpy(&a, d, 8); memcpy(&b, s, 8); a += b; memcpy(d, &a, 8); break; }
    }
}

/* Move one inner block: src element so, dst element dd, inner dims [outer, rank). */
static inline void block(const idx_params* p, const char* src, char* dst, int64_t so, int64_t dd) {
    const int64_t es = p->element_size;
    const int64_t first = p->outer, r = p->rank;
    if (first == r) {
        const char* s = p->has_value ? (const char*)&p->value_bits : src + so * es;
        if (p->kind == 1 && p->accumulate) add_element(dst + dd * es, s, p->data_type);
        else switch (es) {                         /* a fixed-size move the compiler inlines */
            case 1: memcpy(dst + dd, s, 1); break;
            case 2: memcpy(dst + dd * 2, s, 2); break;
            case 4: memcpy(dst + dd * 4, s, 4); break;
            default: memcpy(dst + dd * 8, s, 8); break;
        }
        return;
    }
    if (first == r - 1 && p->src_strides[first] == 1 && p->dst_strides[first] == 1 && !p->has_value &&
        !(p->kind == 1 && p->accumulate)) {
        memcpy(dst + dd * es, src + so * es, (size_t)(p->sizes[first] * es));
        return;
    }
    int64_t idx[IDX_MAX_RANK] = {0};
    int64_t s = so, d = dd;
    for (;;) {
        const char* sp = p->has_value ? (const char*)&p->value_bits : src + s * es;
        if (p->kind == 1 && p->accumulate) add_element(dst + d * es, sp, p->data_type);
        else memcpy(dst + d * es, sp, (size_t)es);
        int64_t k = r - 1;
        for (; k >= first; k--) {
            if (++idx[k] < p->sizes[k]) {
                s += p->src_strides[k];
                d += p->dst_strides[k];
                break;
            }
            s -= (p->sizes[k] - 1) * p->src_strides[k];
            d -= (p->sizes[k] - 1) * p->dst_strides[k];
            idx[k] = 0;
        }
        if (k < first) return;
    }
}

static int64_t span_lo(const int64_t* sizes, const int64_t* strides, int64_t a, int64_t b) {
    int64_t v = 0;
    for (int64_t k = a; k < b; k++) if (strides[k] < 0) v += (sizes[k] - 1) * strides[k];
    return v;
}

static int64_t span_hi(const int64_t* sizes, const int64_t* strides, int64_t a, int64_t b) {
    int64_t v = 0;
    for (int64_t k = a; k < b; k++) if (strides[k] > 0) v += (sizes[k] - 1) * strides[k];
    return v;
}

/* The element-wise pass (every dimension outer, one position axis, plain
 * copies): each innermost row in one typed loop. The reach was checked. */
#define ELEMENT_ROW(IT, WT)                                                                       \
    {                                                                                             \
        const IT* ip = (const IT*)idx0 + io;                                                      \
        for (int64_t i = 0; i < n; i++, ip += istride) {                                          \
            int64_t c;                                                                            \
            if (isigned) {                                                                        \
                int64_t v = (int64_t)*ip;                                                         \
                if (v < 0) v += bound;                                                            \
                c = v < 0 ? 0 : (v >= bound ? bound - 1 : v);                                    \
            } else {                                                                              \
                uint64_t v = (uint64_t)*ip;                                                       \
                c = v >= (uint64_t)bound ? bound - 1 : (int64_t)v;                                \
            }                                                                                     \
            if (gather) ((WT*)dst)[d + i * dstep] = ((const WT*)src)[s + i * sstep + c * cstride]; \
            else ((WT*)dst)[d + i * dstep + c * cstride] = ((const WT*)src)[s + i * sstep];         \
        }                                                                                         \
    }

#define ELEMENT_ROW_WT(IT)                                           \
    switch (p->element_size) {                                       \
    case 1: ELEMENT_ROW(IT, uint8_t) break;                          \
    case 2: ELEMENT_ROW(IT, uint16_t) break;                         \
    case 4: ELEMENT_ROW(IT, uint32_t) break;                         \
    default: ELEMENT_ROW(IT, uint64_t) break;                        \
    }

static void run_elements(const idx_params* p, const char* src, char* dst, const char* idx0) {
    const idx_axis* ax = &p->axes[0];
    const int64_t r = p->rank, last = r - 1;
    const int64_t n = p->sizes[last], sstep = p->src_strides[last], dstep = p->dst_strides[last];
    const int64_t istride = ax->strides[last], cstride = ax->stride, bound = ax->bound;
    const int gather = p->kind == 0, isigned = ax->type == T_I32 || ax->type == T_I64;
    int64_t pos[IDX_MAX_RANK] = {0};
    int64_t s = p->src_offset, d = p->dst_offset, io = ax->offset;
    for (;;) {
        switch (ax->type) {
        case T_I32: ELEMENT_ROW_WT(int32_t) break;
        case T_I64: ELEMENT_ROW_WT(int64_t) break;
        case T_U32: ELEMENT_ROW_WT(uint32_t) break;
        default: ELEMENT_ROW_WT(uint64_t) break;
        }
        int64_t k = last - 1;
        for (; k >= 0; k--) {
            if (++pos[k] < p->sizes[k]) {
                s += p->src_strides[k];
                d += p->dst_strides[k];
                io += ax->strides[k];
                break;
            }
            s -= (p->sizes[k] - 1) * p->src_strides[k];
            d -= (p->sizes[k] - 1) * p->dst_strides[k];
            io -= (p->sizes[k] - 1) * ax->strides[k];
            pos[k] = 0;
        }
        if (k < 0) return;
    }
}

/* Every dimension outer (one element per position), any index axes, plain
 * copies or skips: the parameters in locals (the destination's char
 * writes would otherwise make the compiler reload them), the innermost
 * dimension in one loop. The reach was checked. */
static void run_elements_any(const idx_params* pp, const char* src, char* dst, const char* const* idx) {
    const int64_t r = pp->rank, last = r - 1, na = pp->naxes, es = pp->element_size;
    const int gather = pp->kind == 0;
    const int64_t n = pp->sizes[last], sstep = pp->src_strides[last], dstep = pp->dst_strides[last];
    int64_t type[IDX_MAX_AXES], stride[IDX_MAX_AXES], bound[IDX_MAX_AXES], mode[IDX_MAX_AXES], skip[IDX_MAX_AXES];
    int64_t axis[IDX_MAX_AXES], istep[IDX_MAX_AXES], io[IDX_MAX_AXES];
    for (int64_t a = 0; a < na; a++) {
        const idx_axis* ax = &pp->axes[a];
        type[a] = ax->type; stride[a] = ax->stride; bound[a] = ax->bound; mode[a] = ax->mode;
        skip[a] = ax->out_of_range; axis[a] = ax->axis; istep[a] = ax->strides[last]; io[a] = ax->offset;
    }
    int64_t pos[IDX_MAX_RANK] = {0};
    int64_t s = pp->src_offset, d = pp->dst_offset;
    for (;;) {
        for (int64_t i = 0; i < n; i++) {
            int64_t off = 0;
            int keep = 1;
            for (int64_t a = 0; a < na; a++) {
                const int64_t at = io[a] + i * istep[a], b = bound[a];
                int64_t c;
                if (mode[a] == 1) {
                    int64_t len;
                    switch (type[a]) {
                    case T_I32: { int64_t v = ((const int32_t*)idx[a])[at]; len = v < 0 ? 0 : (v > b ? b : v); break; }
                    case T_I64: { int64_t v = ((const int64_t*)idx[a])[at]; len = v < 0 ? 0 : (v > b ? b : v); break; }
                    case T_U32: { uint64_t v = ((const uint32_t*)idx[a])[at]; len = v > (uint64_t)b ? b : (int64_t)v; break; }
                    default: { uint64_t v = ((const uint64_t*)idx[a])[at]; len = v > (uint64_t)b ? b : (int64_t)v; break; }
                    }
                    const int64_t e = axis[a] == last ? i : pos[axis[a]];
                    c = e < len ? len - 1 - e : e;
                } else {
                    int inside;
                    switch (type[a]) {
                    case T_I32: case T_I64: {
                        int64_t v = type[a] == T_I32 ? (int64_t)((const int32_t*)idx[a])[at] : ((const int64_t*)idx[a])[at];
                        if (v < 0) v += b;
                        inside = v >= 0 && v < b;
                        c = v < 0 ? 0 : (v >= b ? b - 1 : v);
                        break;
                    }
                    default: {
                        uint64_t v = type[a] == T_U32 ? (uint64_t)((const uint32_t*)idx[a])[at] : ((const uint64_t*)idx[a])[at];
                        inside = v < (uint64_t)b;
                        c = inside ? (int64_t)v : b - 1;
                        break;
                    }
                    }
                    if (!inside && skip[a]) { keep = 0; break; }
                }
                off += c * stride[a];
            }
            if (!keep) continue;
            const int64_t so = s + i * sstep + (gather ? off : 0), dd = d + i * dstep + (gather ? 0 : off);
            switch (es) {
            case 1: ((uint8_t*)dst)[dd] = ((const uint8_t*)src)[so]; break;
            case 2: ((uint16_t*)dst)[dd] = ((const uint16_t*)src)[so]; break;
            case 4: ((uint32_t*)dst)[dd] = ((const uint32_t*)src)[so]; break;
            default: ((uint64_t*)dst)[dd] = ((const uint64_t*)src)[so]; break;
            }
        }
        int64_t k = last - 1;
        for (; k >= 0; k--) {
            if (++pos[k] < pp->sizes[k]) {
                s += pp->src_strides[k];
                d += pp->dst_strides[k];
                for (int64_t a = 0; a < na; a++) io[a] += pp->axes[a].strides[k];
                break;
            }
            s -= (pp->sizes[k] - 1) * pp->src_strides[k];
            d -= (pp->sizes[k] - 1) * pp->dst_strides[k];
            for (int64_t a = 0; a < na; a++) io[a] -= (pp->sizes[k] - 1) * pp->axes[a].strides[k];
            pos[k] = 0;
        }
        if (k < 0) return;
    }
}

/* 0, or -1 where the pass could leave a bound range. */
static int run(const idx_params* p, const char* src, int64_t src_len, char* dst, int64_t dst_len,
               const char* const* idx, const int64_t* idx_len) {
    const int64_t r = p->rank, outer = p->outer;
    for (int64_t k = 0; k < r; k++) if (p->sizes[k] == 0) return 0;
    const int64_t slo = span_lo(p->sizes, p->src_strides, outer, r), shi = span_hi(p->sizes, p->src_strides, outer, r);
    const int64_t dlo = span_lo(p->sizes, p->dst_strides, outer, r), dhi = span_hi(p->sizes, p->dst_strides, outer, r);
    /* every index element read lies in its tensor, and every data element
       the pass may reach (its coordinates are always inside [0, bound))
       lies in its range: checked once, before anything moves */
    int64_t reach_lo = 0, reach_hi = 0;
    for (int64_t a = 0; a < p->naxes; a++) {
        const idx_axis* ax = &p->axes[a];
        int64_t lo = ax->offset + span_lo(p->sizes, ax->strides, 0, outer);
        int64_t hi = ax->offset + span_hi(p->sizes, ax->strides, 0, outer);
        if (lo < 0 || hi >= idx_len[a]) return -1;
        int64_t far = (ax->bound - 1) * ax->stride;
        if (far < 0) reach_lo += far; else reach_hi += far;
    }
    {
        int64_t s0 = p->src_offset + span_lo(p->sizes, p->src_strides, 0, outer) + slo;
        int64_t s1 = p->src_offset + span_hi(p->sizes, p->src_strides, 0, outer) + shi;
        int64_t d0 = p->dst_offset + span_lo(p->sizes, p->dst_strides, 0, outer) + dlo;
        int64_t d1 = p->dst_offset + span_hi(p->sizes, p->dst_strides, 0, outer) + dhi;
        if (p->kind == 0) { s0 += reach_lo; s1 += reach_hi; } else { d0 += reach_lo; d1 += reach_hi; }
        if ((!p->has_value && (s0 < 0 || s1 >= src_len)) || d0 < 0 || d1 >= dst_len) return -1;
    }
    if (outer == r && r >= 1 && p->naxes == 1 && p->axes[0].mode == 0 && p->axes[0].out_of_range == 0 &&
        !p->has_value && !(p->kind == 1 && p->accumulate)) {
        run_elements(p, src, dst, idx[0]);
        return 0;
    }
    if (outer == r && r >= 1 && !p->has_value && !(p->kind == 1 && p->accumulate)) {
        run_elements_any(p, src, dst, idx);
        return 0;
    }
    int64_t pos[IDX_MAX_RANK] = {0};
    int64_t s = p->src_offset, d = p->dst_offset;
    int64_t io[IDX_MAX_AXES];
    for (int64_t a = 0; a < p->naxes; a++) io[a] = p->axes[a].offset;
    for (;;) {
        int64_t so = s, dd = d;
        int keep = 1;
        for (int64_t a = 0; a < p->naxes && keep; a++) {
            const idx_axis* ax = &p->axes[a];
            int64_t c;
            keep = coordinate(ax, idx[a], io[a], ax->mode == 1 ? pos[ax->axis] : 0, &c);
            if (keep) {
                if (p->kind == 0) so += c * ax->stride;
                else dd += c * ax->stride;
            }
        }
        if (keep) block(p, src, dst, so, dd);
        int64_t k = outer - 1;
        for (; k >= 0; k--) {
            if (++pos[k] < p->sizes[k]) {
                s += p->src_strides[k];
                d += p->dst_strides[k];
                for (int64_t a = 0; a < p->naxes; a++) io[a] += p->axes[a].strides[k];
                break;
            }
            s -= (p->sizes[k] - 1) * p->src_strides[k];
            d -= (p->sizes[k] - 1) * p->dst_strides[k];
            for (int64_t a = 0; a < p->naxes; a++) io[a] -= (p->sizes[k] - 1) * p->axes[a].strides[k];
            pos[k] = 0;
        }
        if (k < 0) return 0;
    }
}

/* run_pass(params: bytes, src_addr, src_len, dst_addr, dst_len, index_addrs: tuple, index_lens: tuple)
 * (lengths in elements of each range's own type). */
static PyObject* run_pass(PyObject* self, PyObject* args) {
    Py_buffer params;
    unsigned long long src_addr, dst_addr;
    long long src_len, dst_len;
    PyObject *addrs, *lens;
    if (!PyArg_ParseTuple(args, "y*KLKLO!O!", &params, &src_addr, &src_len, &dst_addr, &dst_len,
                          &PyTuple_Type, &addrs, &PyTuple_Type, &lens))
        return NULL;
    idx_params p;
    if (params.len != (Py_ssize_t)sizeof p) {
        PyBuffer_Release(&params);
        return PyErr_Format(PyExc_ValueError, "_index.run_pass: parameters of %zd bytes; expected %zu",
                            params.len, sizeof p);
    }
    memcpy(&p, params.buf, sizeof p);
    PyBuffer_Release(&params);
    if (p.rank < 0 || p.rank > IDX_MAX_RANK || p.outer < 0 || p.outer > p.rank || p.naxes < 0 ||
        p.naxes > IDX_MAX_AXES || PyTuple_GET_SIZE(addrs) != p.naxes || PyTuple_GET_SIZE(lens) != p.naxes ||
        (p.element_size != 1 && p.element_size != 2 && p.element_size != 4 && p.element_size != 8))
        return PyErr_Format(PyExc_ValueError, "_index.run_pass: malformed parameters");
    const char* idx[IDX_MAX_AXES];
    int64_t idx_len[IDX_MAX_AXES];
    for (Py_ssize_t a = 0; a < p.naxes; a++) {
        idx[a] = (const char*)(uintptr_t)PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(addrs, a));
        idx_len[a] = PyLong_AsLongLong(PyTuple_GET_ITEM(lens, a));
        if (PyErr_Occurred()) return NULL;
        const idx_axis* ax = &p.axes[a];
        if (ax->bound < 1 || (ax->mode != 0 && ax->mode != 1) ||
            (ax->mode == 1 && (ax->axis < 0 || ax->axis >= p.outer || p.sizes[ax->axis] > ax->bound)) ||
            (ax->type != T_I32 && ax->type != T_I64 && ax->type != T_U32 && ax->type != T_U64))
            return PyErr_Format(PyExc_ValueError, "_index.run_pass: malformed index axis %zd", a);
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = run(&p, (const char*)(uintptr_t)src_addr, src_len, (char*)(uintptr_t)dst_addr, dst_len, idx, idx_len);
    Py_END_ALLOW_THREADS
    if (rc != 0)
        return PyErr_Format(PyExc_RuntimeError, "opendml internal error: an index pass reaches outside a bound "
                            "range (the plan's spans were not checked)");
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"run_pass", run_pass, METH_VARARGS, "run one Gather or Scatter pass (see index.c)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_index", "opendml's index-driven CPU passes", -1,
                                    methods};

PyMODINIT_FUNC PyInit__index(void) { return PyModule_Create(&module); }
