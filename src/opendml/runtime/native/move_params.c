/* move_params: one pass of the family's move program (plan.Copy or plan.Fill) in its canonical form, packed as
 * odml_cpu_move_params (move.h): what CpuBackend._native_move_pass builds in Python (canonical_move_pass, then
 * MoveParams), in one C call on every never-seen shape of a family operator (tests/runtime/test_cpu_move.py compares
 * the bytes on random passes).
 *
 * move_params(fill, src_type, dst_type, src_offset, dst_offset, sizes, src_strides, dst_strides, maps, scale_bias,
 * fill_bits) -> bytes, or None (the Python route builds it; see odml_move_pack): fill 1 for a Fill (src_type,
 * src_offset, src_strides, maps and scale_bias unused: 0, 0, None, None, None), 0 for a Copy; sizes, src_strides,
 * dst_strides tuples of one exact int per dimension; maps None or a tuple of None or plan.AxisMap's (mode, shift,
 * size) per dimension; scale_bias None or two exact floats; fill_bits an int in [0, 2^64). No Python code runs. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "newshape.h"

typedef struct {
    int64_t size, src, dst, mode, shift, msize;   /* mode 0: no map */
} Dim;

/* Whether a sorts after b (the sort is by (dst, |src|), largest first). */
static int before(const Dim *a, const Dim *b) {
    return a->dst > b->dst || (a->dst == b->dst && odml_absv(a->src) > odml_absv(b->src));
}

/* The canonical form of pass `in` packed into *p (move.h's odml_move_pack): 0, or -1 where the pass is not as
 * described (a negative size, a map outside its bounds), a value or product leaves 64 bits, or the canonical form has
 * more than ODML_CPU_MOVE_MAX_RANK dimensions. */
int odml_move_pack(const odml_move_pass *in, odml_cpu_move_params *out) {
    const int fill = in->fill, n = in->n;
    int64_t src_offset = fill ? 0 : in->src_offset;
    if ((fill != 0 && fill != 1) || n < 1 || n > ODML_MOVE_PASS_MAX_DIMS) return -1;
    Dim dims[ODML_MOVE_PASS_MAX_DIMS];
    int m = 0;
    for (int a = 0; a < n; a++) {
        Dim d = {in->sizes[a], 0, in->dst_strides[a], 0, 0, 0};
        if (d.size < 0) return -1;
        if (!fill) {
            d.src = in->src_strides[a];
            if (in->map_mode[a]) {
                d.mode = in->map_mode[a];
                d.shift = in->map_shift[a];
                d.msize = in->map_size[a];
                if (d.mode < ODML_MAP_CLAMP || d.mode > ODML_MAP_WRAP || d.msize < 1 || d.msize > ((int64_t)1 << 60)
                        || d.shift < -((int64_t)1 << 60) || d.shift > ((int64_t)1 << 60))
                    return -1;
            }
        }
        if (d.size == 1) {
            if (d.mode) {
                int64_t fold;
                if (__builtin_mul_overflow(odml_map_source(d.mode, d.shift, d.msize, 0), d.src, &fold)
                        || __builtin_add_overflow(src_offset, fold, &src_offset))
                    return -1;
            }
            continue;
        }
        /* insertion: stable, equal keys keep their order (Python's sort with reverse=True) */
        int at = m;
        while (at > 0 && before(&d, &dims[at - 1])) {
            dims[at] = dims[at - 1];
            at--;
        }
        dims[at] = d;
        m++;
    }
    Dim merged[ODML_MOVE_PASS_MAX_DIMS];
    int r = 0;
    for (int k = 0; k < m; k++) {
        const Dim *d = &dims[k];
        if (r && !d->mode && !merged[r - 1].mode) {
            Dim *p = &merged[r - 1];
            int64_t is, os, ps;
            if (!__builtin_mul_overflow(d->src, d->size, &is) && !__builtin_mul_overflow(d->dst, d->size, &os)
                    && p->src == is && p->dst == os) {
                if (__builtin_mul_overflow(p->size, d->size, &ps)) return -1;
                p->size = ps;
                p->src = d->src;
                p->dst = d->dst;
                continue;
            }
        }
        merged[r++] = *d;
    }
    if (!r) {
        Dim one = {1, 0, 0, 0, 0, 0};
        merged[r++] = one;
    }
    if (r >= 2 && merged[r - 1].size <= 4 && merged[r - 2].size >= 4 * merged[r - 1].size && !merged[r - 1].mode
            && !merged[r - 2].mode) {
        Dim t = merged[r - 1];
        merged[r - 1] = merged[r - 2];
        merged[r - 2] = t;
    }
    if (r > ODML_CPU_MOVE_MAX_RANK) return -1;
    odml_cpu_move_params *p = out;         /* (nothing fails from here: written in place) */
    memset(p, 0, sizeof *p);
    p->kind = fill;
    p->dst_type = in->dst_type;
    p->src_type = fill ? in->dst_type : in->src_type;
    p->rank = r;
    p->dst_offset = in->dst_offset;
    for (int k = 0; k < r; k++) {
        p->sizes[k] = merged[k].size;
        p->dst_strides[k] = merged[k].dst;
    }
    if (fill) {
        p->fill_bits = in->fill_bits;
    } else {
        p->src_offset = src_offset;
        for (int k = 0; k < r; k++) {
            p->src_strides[k] = merged[k].src;
            if (merged[k].mode) {
                p->map_mode[k] = merged[k].mode;
                p->map_shift[k] = merged[k].shift;
                p->map_size[k] = merged[k].msize;
            }
        }
        if (in->has_scale_bias) {
            p->has_scale_bias = 1;
            p->scale = in->scale;
            p->bias = in->bias;
        }
    }
    return 0;
}

PyObject *odml_py_move_params(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (odml_arity("move_params(fill, src_type, dst_type, src_offset, dst_offset, sizes, "
                   "src_strides, dst_strides, maps, scale_bias, fill_bits)", nargs, 11, 11))
        return NULL;
    odml_move_pass pass;
    memset(&pass, 0, sizeof pass);
    int64_t fill;
    PyObject *maps = args[8], *sb = args[9];
    const Py_ssize_t n = PyTuple_CheckExact(args[5]) ? PyTuple_GET_SIZE(args[5]) : 0;
    if (odml_exact_i64(args[0], &fill) || odml_exact_i64(args[1], &pass.src_type)
            || odml_exact_i64(args[2], &pass.dst_type) || odml_exact_i64(args[3], &pass.src_offset)
            || odml_exact_i64(args[4], &pass.dst_offset) || (fill != 0 && fill != 1) || !PyLong_CheckExact(args[10])
            || n < 1 || n > ODML_MOVE_PASS_MAX_DIMS || odml_tuple_ints(args[5], n, pass.sizes)
            || odml_tuple_ints(args[7], n, pass.dst_strides))
        Py_RETURN_NONE;
    if (!fill && (odml_tuple_ints(args[6], n, pass.src_strides)
                  || (maps != Py_None && (!PyTuple_CheckExact(maps) || PyTuple_GET_SIZE(maps) != n))
                  || (sb != Py_None && (!PyTuple_CheckExact(sb) || PyTuple_GET_SIZE(sb) != 2
                                        || !PyFloat_CheckExact(PyTuple_GET_ITEM(sb, 0))
                                        || !PyFloat_CheckExact(PyTuple_GET_ITEM(sb, 1))))))
        Py_RETURN_NONE;
    const unsigned long long bits = PyLong_AsUnsignedLongLong(args[10]);
    if (bits == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    pass.fill = (int)fill;
    pass.n = (int)n;
    pass.fill_bits = bits;
    for (Py_ssize_t a = 0; !fill && maps != Py_None && a < n; a++) {
        PyObject *mp = PyTuple_GET_ITEM(maps, a);
        int64_t m[3];
        if (mp == Py_None) continue;
        if (odml_tuple_ints(mp, 3, m) || m[0] == 0) Py_RETURN_NONE;
        pass.map_mode[a] = m[0];
        pass.map_shift[a] = m[1];
        pass.map_size[a] = m[2];
    }
    if (!fill && sb != Py_None) {
        pass.has_scale_bias = 1;
        pass.scale = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(sb, 0));
        pass.bias = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(sb, 1));
    }
    odml_cpu_move_params p;
    if (odml_move_pack(&pass, &p)) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)&p, (Py_ssize_t)sizeof p);
}
