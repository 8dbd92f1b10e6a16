/* A new shape's plan, shared by newshape.c (the CPU parameters, cuda_spec), cuda_spec.c (CUDA launches) and
 * newshape_move.c (odml_move_plain: the first five's tuned pass of the move program).
 *
 * The plan of SLICE/SLICE1 ("copy"), UNFOLD ("windows"), FOLD ("window_sums") and SLICE_GRAD ("scatter") comes from
 * the operator's plain_lowering (odml_plain_lower) as fields in index space, to which odml_new_plan_make applies an
 * input's element layout as the operator's lower() does. No DirectML rule is checked here: the fields come
 * validated. Every function returns 0, or -1 (no exception set) where the Python route must run the call. */
#ifndef OPENDML_NEWSHAPE_H
#define OPENDML_NEWSHAPE_H

#include <Python.h>
#include <stdint.h>

#include "cpu/common.h"

/* The kernels a plan runs (the operators' PLAIN_KERNEL names; the `kind` Python passes, in runtime/calls.py's
 * NEW_KINDS order) and the CPU kernel code (params.h's) of each. */
enum { ODML_NEW_COPY = 0, ODML_NEW_WINDOWS = 1, ODML_NEW_SCATTER = 2, ODML_NEW_WINDOW_SUMS = 3, ODML_NEW_KINDS = 4 };

static inline int odml_new_kernel(int kind) {
    static const int kernel[ODML_NEW_KINDS] = {ODML_KERNEL_COPY, ODML_KERNEL_WINDOWS, ODML_KERNEL_SCATTER,
                                               ODML_KERNEL_WINDOW_SUMS};
    return kernel[kind];
}

/* 0 where a Python function given nargs positional arguments takes them (lo to hi), else -1 with the
 * TypeError "<signature> takes <lo> [or <hi>] arguments". */
static inline int odml_arity(const char *signature, Py_ssize_t nargs, Py_ssize_t lo, Py_ssize_t hi) {
    if (nargs >= lo && nargs <= hi) return 0;
    if (lo == hi) PyErr_Format(PyExc_TypeError, "%s takes %zd arguments", signature, lo);
    else PyErr_Format(PyExc_TypeError, "%s takes %zd or %zd arguments", signature, lo, hi);
    return -1;
}

/* Read o into *v: 0, or -1 (no exception left) where it is not an exact int in 64 bits (bools, NumPy integers and
 * int subclasses are not). */
static inline int odml_exact_i64(PyObject *o, int64_t *v) {
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

/* Read o, an exact list or tuple of at most `most` exact ints in 64 bits, into v, their count in *n: 0, or -1 (no
 * exception left). */
static inline int odml_int_seq(PyObject *o, Py_ssize_t most, int64_t *v, int *n) {
    if (!PyList_CheckExact(o) && !PyTuple_CheckExact(o)) return -1;
    const Py_ssize_t m = PySequence_Fast_GET_SIZE(o);
    if (m > most) return -1;
    for (Py_ssize_t i = 0; i < m; i++)
        if (odml_exact_i64(PySequence_Fast_ITEMS(o)[i], &v[i])) return -1;
    *n = (int)m;
    return 0;
}

/* An exact int in [-rank, rank) as arrays/_contract.py's axis (negative counts from the end); -1 for anything else. */
static inline int odml_axis(PyObject *o, int rank) {
    int64_t a;
    if (odml_exact_i64(o, &a) || a < -rank || a >= rank) return -1;
    return (int)(a < 0 ? a + rank : a);
}

/* v[0..n) from t, an exact tuple of n exact ints in 64 bits: 0, else -1 (no exception left). */
static inline int odml_tuple_ints(PyObject *t, Py_ssize_t n, int64_t *v) {
    int m;
    return !PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != n || odml_int_seq(t, n, v, &m) ? -1 : 0;
}

/* A settings tuple (a c_settings()'s) read into v: 0, or -1 where it is not n exact ints in [0, 2^24]. */
static inline int odml_settings(PyObject *t, Py_ssize_t n, int64_t *v) {
    if (odml_tuple_ints(t, n, v)) return -1;
    for (Py_ssize_t i = 0; i < n; i++)
        if (v[i] < 0 || v[i] > (1 << 24)) return -1;
    return 0;
}

static inline int64_t odml_absv(int64_t x) { return x < 0 ? -x : x; }

/* Row d of w words inserted into the sorted rows[0..m) ahead of the trailing rows it comes `before` (a step of a
 * stable insertion sort: the canonical forms' dimension orders). */
static inline void odml_insert_row(int64_t *rows, int m, int w, const int64_t *d,
                                   int (*before)(const int64_t *a, const int64_t *b)) {
    for (; m > 0 && before(d, rows + (m - 1) * w); m--) memcpy(rows + m * w, rows + (m - 1) * w, sizeof *d * (size_t)w);
    memcpy(rows + m * w, d, sizeof *d * (size_t)w);
}

/* The packed (C-order) element strides of n sizes, TensorDesc's (sizes whose product fits in 64 bits). */
static inline void odml_packed(const int64_t *sizes, int n, int64_t *strides) {
    int64_t s = 1;
    for (int d = n - 1; d >= 0; d--) {
        strides[d] = s;
        s *= sizes[d];
    }
}

/* An input's element layout: n sizes and signed element strides. */
typedef struct {
    int n;
    int flt;                           /* a floating-point type (FOLD sums as ODML_SUM_FLOAT) */
    int64_t es;                        /* bytes per element */
    int64_t shape[ODML_MAX_RANK];
    int64_t strides[ODML_MAX_RANK];
} odml_layout;

/* A new shape's plan for one input layout. */
typedef struct {
    int kind;                          /* ODML_NEW_* */
    int out_rank;
    int64_t es;                        /* bytes per element */
    int64_t out_dims[ODML_MAX_RANK];   /* the packed output's sizes */
    int64_t count;                     /* output elements (>= 1) */
    int64_t origin;                    /* elements from element 0 back to the lowest-addressed element */
    int64_t span;                      /* elements bound from the lowest address (planner.Layout.span) */
    odml_copy_params copy;             /* copy: CopyPlan.canonical() */
    odml_unfold_params windows;        /* windows: the UnfoldPlan's, without CPU column tiles or CUDA work items */
    odml_fold_params window_sums;      /* window_sums: the FoldPlan's, without CUDA work items */
    /* scatter: the ScatterPlan lower() gives, per dimension (size, out stride, first, step, taken, in stride), before
     * any canonical form */
    int srank;
    int64_t s_in_offset;
    int64_t sdims[ODML_MAX_RANK][6];
} odml_new_plan;

/* The layout planner.array_layout reads from byte strides: -1 where the stride of an axis of more than one element is
 * not whole elements (the caller copies the array first); a size-1 axis's such stride is taken as 0. */
int odml_layout_from_bytes(int n, const int64_t *shape, const int64_t *byte_strides, int64_t es, odml_layout *L);

/* The plan of `kind` on layout L from a plain lowering's fields f[0..nf), each a list or tuple of ints: copy
 * (out_sizes, starts, steps), unfold (out_sizes, window, strides, dilations, start_padding, blocks), fold (the same,
 * out_sizes (N, C, *spatial)), scatter (out_sizes, first, step, reversed). -1 where the fields do not fit L (each
 * element read and written inside its buffer: another thread may have changed the shape the lowering saw), a value
 * or product leaves 64 bits, or the output is empty. */
int odml_new_plan_make(int kind, const odml_layout *L, PyObject *const *f, Py_ssize_t nf, odml_new_plan *pl);

/* The scatter plan's canonical form (plan.ScatterPlan.canonical: the CPU backend's with cpu, cuda_spec.c's without;
 * none left: one of size 1) in merged[0..*rank), sdims' rows. odml_scatter_pack: those as odml_scatter_params. -1
 * on overflow. */
int odml_scatter_canonical(const odml_new_plan *pl, int cpu, int64_t (*merged)[6], int *rank);
int odml_scatter_pack(int64_t es, const int64_t (*m)[6], int r, int64_t in_offset, int64_t out_offset,
                      odml_scatter_params *p);

/* The CPU kernel's run of a plan: kernel, parameter block and the bytes CpuBackend._threads counts. */
typedef struct {
    int kernel;                        /* ODML_NEW_* */
    odml_kernel_params p;              /* (common.h) */
    Py_ssize_t size;                   /* bytes of p used */
    int64_t work;
} odml_cpu_run;

/* What CpuBackend runs for the plan (column tiles of tile_columns where the innermost image step exceeds tile_stride
 * bytes). -1 on overflow. */
int odml_new_cpu(const odml_new_plan *pl, int64_t tile_stride, int64_t tile_columns, odml_cpu_run *run);

/* CpuBackend._threads for `work` bytes: max(1, min(most, work // grain)). */
static inline int64_t odml_new_threads(int64_t work, int64_t grain, int64_t most) {
    int64_t t = work / grain;
    if (t > most) t = most;
    return t < 1 ? 1 : t;
}

/* A CUDA launch of the plan as runtime/cuda/tuned.py's launch_spec gives it, the lowest-addressed input element at
 * device address src, the output at dst: the kernel's name (kernels.cu's template instance), the parameter block
 * passed by value, the grid of THREADS-thread blocks and the dynamic shared memory. */
#define ODML_CUDA_THREADS 256
/* launch._SCALAR: the kernels' word type of 1, 2, 4, 8 or 16 bytes; ceil(a / b) for a >= 0, b > 0 */
static const char *const odml_scalar[17] = {[1] = "u8", [2] = "u16", [4] = "u32", [8] = "u64", [16] = "uint4"};
static inline int64_t odml_cdiv(int64_t a, int64_t b) { return a / b + (a % b != 0); }
/* *grid = ceil(count / per) blocks: 0, or -1 where that is not in [1, 2^31) */
static inline int odml_grid(int64_t count, int64_t per, unsigned *grid) {
    const int64_t g = odml_cdiv(count, per);
    if (g < 1 || g > 0x7fffffff) return -1;
    *grid = (unsigned)g;
    return 0;
}
typedef struct {
    char name[96];
    union {
        odml_copy_params copy;
        odml_unfold_params windows;
        odml_fold_params window_sums;
        odml_scatter_params scatter;
    } p;
    Py_ssize_t size;                   /* bytes of p used */
    unsigned grid, smem;
} odml_cuda_spec;

/* -1 where the launch does not fit (a grid of 2^31 blocks or more). */
int odml_new_cuda(const odml_new_plan *pl, uint64_t src, uint64_t dst, odml_cuda_spec *s);

/* -- the data-movement family (newshape_move.c) -------------------------------------------------- */

#include "cpu/move.h"
#include "cpu/indexed/index.h"

/* The C lowerings (each names the Python it mirrors), by runtime/calls.py's MOVE_LOWERINGS numbers. */
enum {
    ODML_LOWER_IDENTITY = 0, ODML_LOWER_CAST = 1, ODML_LOWER_TILE = 2, ODML_LOWER_PAD = 3,
    ODML_LOWER_SPACE_TO_DEPTH = 4, ODML_LOWER_DEPTH_TO_SPACE = 5, ODML_LOWER_JOIN = 6, ODML_LOWER_SPLIT = 7,
    ODML_LOWER_DIAGONAL_MATRIX = 8
};
/* A lowering number's bits (arrays/front.py sets them). ODML_LOWER_SEQUENCE: the function offers its arrays as one
 * list or tuple (an "arrays" argument, or the index route's tuple). ODML_LOWER_PLAIN: bits 0-7 are a first five's
 * plain lowering (ODML_PLAIN_*, the operator's C_PLAIN), lowered to one tuned pass. */
#define ODML_LOWER_SEQUENCE (1 << 24)
#define ODML_LOWER_PLAIN (1 << 25)

/* An input: DataType value, sizes, signed element strides, origin (elements from the lowest-addressed one to element
 * 0; planner.Layout). */
typedef struct {
    int n;
    int64_t type;
    int64_t shape[ODML_MAX_RANK];
    int64_t strides[ODML_MAX_RANK];
    int64_t origin;
} odml_move_input;

#define ODML_MOVE_PROG_MAX_IO 16        /* inputs (JOIN) or outputs (SPLIT); calls_move.c's MAX_MOVE_IO */
#define ODML_MOVE_PROG_MAX_PASSES (1 + 2 * ODML_MAX_RANK)

/* A lowered call: packed outputs (DataType, sizes, element strides, count), the passes in order with their input
 * and output slots. */
typedef struct {
    int n_out, n_pass, multi;          /* multi: the function returns a list (SPLIT) */
    unsigned types;                    /* the operator's element types: bit t for DataType value t */
    /* PADDING/PADDING1's program (lower_pad: MovePlan.pad): pad 1, its mode, the fill's bits (CONSTANT) and
     * the start and end counts per axis; pad 0 for every other program */
    int pad;
    int64_t pad_mode, pad_start[ODML_MAX_RANK], pad_end[ODML_MAX_RANK];
    uint64_t pad_bits;
    int64_t out_type[ODML_MOVE_PROG_MAX_IO];
    int out_rank[ODML_MOVE_PROG_MAX_IO];
    int64_t out_dims[ODML_MOVE_PROG_MAX_IO][ODML_MAX_RANK], out_strides[ODML_MOVE_PROG_MAX_IO][ODML_MAX_RANK];
    int64_t out_count[ODML_MOVE_PROG_MAX_IO];
    int pass_src[ODML_MOVE_PROG_MAX_PASSES], pass_dst[ODML_MOVE_PROG_MAX_PASSES];
    odml_move_pass passes[ODML_MOVE_PROG_MAX_PASSES];
} odml_move_prog;

/* The passes `lowering` gives for the n_in inputs xs (one but for JOIN) and the call's arguments: 0, or -1 (no
 * exception set) where the Python route must run the call (the first five's too: odml_move_plain lowers those).
 * `lowering`: its ODML_LOWER_* number in bits 0-7 and, bit 8 + t, DataType t that the operator's support table takes
 * at the newest feature level (family.py reads them from the table: not written here twice). */
int odml_move_lower(int lowering, const odml_move_input *xs, int n_in, PyObject *const *args, Py_ssize_t nargs,
                    odml_move_prog *g);

/* The first five (SLICE, SLICE1, SLICE_GRAD, UNFOLD, FOLD; `lowering` ODML_LOWER_PLAIN | their ODML_PLAIN_*, type bits
 * as above) as one tuned pass, its plan in *pl (newshape_move.c): odml_plain_lower's fields applied to x's layout by
 * odml_new_plan_make, as the operator's lower() gives its pass (SLICE/SLICE1 a plan.Copy, which
 * CpuBackend._copy_pass runs as copy.c's strided copy; UNFOLD's plan.Windows, FOLD's plan.WindowSums, SLICE_GRAD's
 * plan.SliceScatter). 0, or -1 (no exception set) where the Python route must run the call. */
int odml_move_plain(int lowering, const odml_move_input *x, PyObject *const *args, Py_ssize_t nargs,
                    odml_new_plan *pl);

/* -- the family's CUDA launches (cuda_move_spec.c) ---------------------------------------------------- */

/* runtime/cuda/steps.py's module settings, as c_settings() gives them: fuse (FUSE_PAD: 0 False or another value,
 * 1 True, 2 "padr", 3 "words", 4 "rows"), PAD_ROWS, PAD_ROWS_SMALL, PADR_MIN_BYTES, PAD_WORDS, PAD_ROWS_MIN,
 * CVT_UNROLL, CVT_FLAGS, WORD_COPY, WORD_COPY_MIN_RANK, via (MOVE_PLAIN_VIA: 0 "auto" or another value,
 * 1 "strided_copy", 2 "move"), TRANSPOSE_TILE, TRANSPOSE_MIN, WORD_REPEAT. */
enum { ODML_MOVE_CONF_COUNT = 20 };
typedef struct {
    int64_t fuse, pad_rows[3], pad_rows_small[3], padr_min_bytes, pad_words[2], pad_rows_min, cvt_unroll, cvt_flags,
        word_copy, word_copy_min_rank, via, transpose_tile, transpose_min, word_repeat[2];
} odml_move_cuda_conf;

/* index.cu's ix_params (runtime/cuda/index.py's IndexParams, the same field order): an index pass's CUDA
 * parameter block, its addresses (src, dst, idx) patched in per call. */
#define ODML_IX_RANK 16
#define ODML_IX_AXES 8
typedef struct {
    int64_t type, offset, stride, bound, mode, skip, axis, flag, strides[ODML_IX_RANK];   /* flag: index.cu's (the check's address) */
} odml_ix_axis;
typedef struct {
    int64_t outer, inner, n_outer, n_inner, total, groups, src_offset, dst_offset;
    int64_t sizes[ODML_IX_RANK], src_strides[ODML_IX_RANK], dst_strides[ODML_IX_RANK];
    int64_t isizes[ODML_IX_RANK], isrc_strides[ODML_IX_RANK], idst_strides[ODML_IX_RANK];
    int64_t naxes, data_type, has_value, value_bits, last_only, key_base, key_div, members;
    odml_ix_axis axes[ODML_IX_AXES];
    uint64_t src, dst, keys, order, aux, idx[ODML_IX_AXES];
    uint64_t done, count;     /* a checked call's last checked launch: index.cu's ix_finish (calls_move.c) */
} odml_ix_params;

/* One kernel launch of a move program (steps.py move_steps' tuple): the kernel's name, its parameter block
 * (odml_move_params, or strided_copy's odml_copy_params: `size` bytes), the grid of ODML_CUDA_THREADS-thread blocks,
 * the dynamic shared memory, the source slot (-1: a fill) and the destination slot. An index pass's (index 1:
 * cuda_index_spec.c) holds odml_ix_params and the input slot of each of its naxes index axes; in index.py's "owner"
 * mode its first launch (ix_owner) gets `scratch` zeroed 32-bit words (the owner table), whose address goes into the
 * `aux` field of each launch with aux 1 (that one and the scatter after it). */
typedef struct {
    char name[112];
    union {
        odml_move_params move;
        odml_copy_params copy;
        odml_ix_params ix;
    } p;
    Py_ssize_t size;
    unsigned grid, smem;
    int src, dst, index, naxes, slot[ODML_IX_AXES];
    int64_t scratch;
    int aux;
} odml_move_launch;

/* runtime/cuda/index.py's module settings as its c_settings() gives them: THREADS, ITEMS, POSITION_ITEMS,
 * COLUMN_WALK, REVERSE_TILE, REVERSE_BYTES, TILE_SMEM, REVERSE_ROWS, GATHER_ROW, ROW_STAGE, GROUP_SLOTS, SCATTER_VIA
 * (0 "auto", 1 "owner", 2 "sort"; 3 more where OWNER_IN_C is off: no owner table in C), OWNER_SLOTS and
 * POSITION_MIN. */
enum { ODML_INDEX_CONF_COUNT = 14 };
typedef struct {
    int64_t threads, items, position_items, column_walk, reverse_tile, reverse_bytes, tile_smem, reverse_rows,
        gather_row, row_stage, group_slots, scatter_via, owner_slots, position_min;
} odml_index_cuda_conf;
_Static_assert(sizeof(odml_index_cuda_conf) == sizeof(int64_t) * ODML_INDEX_CONF_COUNT, "the settings' words");
static inline int odml_index_cuda_conf_read(PyObject *t, odml_index_cuda_conf *c) {
    /* kernel template arguments and divisors: at least one item a thread, lines */
    return odml_settings(t, ODML_INDEX_CONF_COUNT, (int64_t *)c) || c->items < 1 || c->position_items < 1
           || c->reverse_bytes < 1 ? -1 : 0;
}

/* numpy_kernels.outer_count: the leading dimensions of an index pass that read an index. */
int odml_ix_outer(const idx_params *p);

/* The launches of index pass p (a Gather, kind 0, or a Scatter, kind 1) as runtime/cuda/index.py's plan_pass plans
 * them (PassPlan.launches) for its source's element 0 at src, its destination's at dst: their count (1, or 2 for
 * "owner"), L[0..count) filled but for their slots; -1 where the Python route must run it ("sort"; a last-only or
 * accumulating pass; a grid past 2^31 - 1 blocks; a rank past index.cu's). */
int odml_index_cuda(const idx_params *p, const odml_index_cuda_conf *c, uint64_t src, uint64_t dst, odml_move_launch *L);

/* The launches of the lowered program g (at most ODML_MOVE_PROG_MAX_PASSES) for slots whose element 0 lies at
 * src[i] (n_src[i] bound elements) and dst[j]: their count, or -1 where the Python route must plan them (a grid,
 * index or rank that does not fit; a setting C does not mirror). */
int odml_move_cuda(const odml_move_prog *g, const odml_move_cuda_conf *c, const uint64_t *src, const int64_t *n_src,
                   const uint64_t *dst, odml_move_launch *out);

_Static_assert(sizeof(odml_move_cuda_conf) == sizeof(int64_t) * ODML_MOVE_CONF_COUNT, "the settings' words");
static inline int odml_move_cuda_conf_read(PyObject *t, odml_move_cuda_conf *c) {
    return odml_settings(t, ODML_MOVE_CONF_COUNT, (int64_t *)c);
}

int odml_copy_pack(int64_t es, Py_ssize_t n, const int64_t *sz, int64_t in_off, const int64_t *is, int64_t out_off,
                   const int64_t *os, odml_copy_params *p);

/* The DataType value (1..11) arrays/_contract.py's data_type gives for a NumPy dtype or scalar type, a DataType, a
 * PyTorch dtype or a DataType name ("int8", "INT8", "DML_TENSOR_DATA_TYPE_INT8"); 0 for anything else, other
 * spellings data_type takes included (calls_move_new.c). */
int64_t odml_move_dtype_type(PyObject *o);

/* A tuple of the n values v; NULL with an exception (newshape.c). */
PyObject *odml_ints_tuple(const int64_t *v, Py_ssize_t n);
/* snprintf for the kernels' names, of %s, %d and %lld alone (-1 for any other conversion): its length (n or more
 * where it did not fit), without C's general formatter (a tenth of a never-seen index call's C work). */
int odml_name(char *out, int n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

enum { ODML_PLAIN_SLICE = 0, ODML_PLAIN_SLICE1 = 1, ODML_PLAIN_SLICE_GRAD = 2, ODML_PLAIN_UNFOLD = 3,
       ODML_PLAIN_FOLD = 4, ODML_PLAIN_COUNT = 5 };
/* The plan kind (ODML_NEW_*) each plain lowering's fields are for. */
static inline int odml_plain_kind(int which) {
    static const int kind[ODML_PLAIN_COUNT] = {ODML_NEW_COPY, ODML_NEW_COPY, ODML_NEW_SCATTER, ODML_NEW_WINDOWS,
                                               ODML_NEW_WINDOW_SUMS};
    return kind[which];
}
/* The first five's plain lowerings (newshape.c; each mirrors its ops/ module's plain_lowering): the fields of a call
 * on an input of n sizes `dims` with fields f, or None (a new reference); NULL with an exception for no memory. */
PyObject *odml_plain_lower(int which, Py_ssize_t n, const int64_t *dims, PyObject *const *f, Py_ssize_t nf);
/* A field of d axes as ops/unfold.py's plain_lowering reads it (ops/_spec.py per_axis): an exact int spread over the
 * axes, or an exact list or tuple of d exact ints; -1 else (newshape.c). */
int odml_axes_field(PyObject *f, Py_ssize_t d, int64_t *v);
/* Their Python functions (newshape.c; module.c's table): X(NAME, WHICH, SIG, LO, HI) for NAME_lowering(in_sizes,
 * SIG) of LO to HI arguments, the fast path of ops/NAME.py's plain_lowering. */
#define ODML_PLAIN_FUNCTIONS(X)                                                                                     \
    X(slice1, ODML_PLAIN_SLICE1, "offsets, window, steps, output_sizes=None", 4, 5)                                 \
    X(slice, ODML_PLAIN_SLICE, "offsets, sizes, strides", 4, 4)                                                     \
    X(unfold, ODML_PLAIN_UNFOLD, "window_sizes, strides=1, dilations=1, start_padding=0, end_padding=0", 2, 6)      \
    X(fold, ODML_PLAIN_FOLD, "output_sizes, window_sizes, strides=1, dilations=1, start_padding=0, end_padding=0", \
      3, 7)                                                                                                         \
    X(slice_grad, ODML_PLAIN_SLICE_GRAD, "input_sizes, offsets, window, steps", 5, 5)

#endif
