/* What the call cache's files share (calls.c: the cache, its table, keys and hooks; calls_move.c: its entries;
 * calls_move_new.c and newshape_index.c: the new-shape routes; calls_packed.c: Inductor's direct kernel). The
 * extension is built with hidden symbol visibility (setup.py), so none of it is exported. */
#ifndef OPENDML_CALLS_H
#define OPENDML_CALLS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu/blocks.h"
#include "cpu/common.h"
#include "cpu/indexed/index.h"
#include "cpu/move.h"
#include "newshape.h"
#include "torch_api.h"

#ifdef ODML_NUMPY
/* One NumPy API table for the three files, imported by calls.c (odml_calls_init);
 * the other files define NO_IMPORT_ARRAY before including this. */
#define PY_ARRAY_UNIQUE_SYMBOL odml_calls_ARRAY_API
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#if NPY_ABI_VERSION < 0x02000000          /* NumPy 1.x headers */
#define PyDataType_ELSIZE(d) ((d)->elsize)
#endif
/* (read as int64_t words where a key or lowering takes them) */
_Static_assert(sizeof(npy_intp) == sizeof(int64_t), "NumPy's sizes and strides are 64-bit words");
#endif

#define MAX_KEY 384
#define MAX_ENTRIES 4096
#define MAX_RANK 8
#define MAX_ARG_INTS 8
#define RELEASE_BYTES (64 * 1024)
#define PAGE 4096

/* The array kinds that head every key: the move program's entries of every operator (NumPy arrays and PyTorch CPU
 * tensors, keyed as their NumPy views; PyTorch CUDA tensors; CuPy arrays) and PyTorch's eager autograd entries. */
enum { KIND_MOVE = 4, KIND_EAGER = 5, KIND_MOVE_TORCH = 6, KIND_MOVE_CUPY = 7 };

/* call_cache_put_move's pass kind of a tuned kernel (runtime/calls.py's TUNED): this plus its ODML_KERNEL_* code */
#define TUNED_PASS 3
/* fresh outputs this large that threads write have their pages faulted in first (numpy_adapter.py's PREFAULT_BYTES) */
#define PREFAULT_BYTES ((int64_t)4 << 20)

#define MAX_MOVE_IO 16
#define MAX_MOVE_PASSES 64

/* One pass of an entry, run in order on each call. CPU: a tuned kernel (kernel an ODML_KERNEL_* code, block p.k)
 * or a move pass (PASS_MOVE: p.move, laid out once in prep, move.h). CUDA: a launch of function with the parameter
 * struct at `params` passed by value (owned by the backend's Launch; with no Launch, p.k). src: the input read (a
 * fill's unused), dst: the output written. PASS_INDEX (plan.Gather/Scatter and the index functions' copies): on the
 * CPU, index.c's kernel on `index` (its idx_params); on CUDA, `index` is the kernel's parameter block (index_size
 * bytes; src, dst and one address per axis from input `slot` patched in per call), or, with no function,
 * `launch(srcs, dsts, stream)` runs it (the scratch-using modes). */
enum { PASS_MOVE = ODML_KERNEL_COUNT, PASS_INDEX };
typedef struct {
    int kernel, fill, src, dst, threads;
    union {
        odml_kernel_params k;
        odml_cpu_move_params move;
    } p;
    odml_move_prepared *prep;
    uint64_t function, params;
    unsigned grid, block, shared;
    PyObject *launch;         /* the backend's Launch (retries a failed launch, raises); NULL in an entry
                               * call_cache_move_new made, whose failed launch call_cache_cuda_retry's hook takes */
    void *index;              /* PASS_INDEX (PyMem): its idx_params (CPU) or the CUDA parameter block */
    int checked, index_size, at_src, at_dst, at_idx, naxes, slot[IDX_MAX_AXES];
    int n_flag, at_flag[IDX_MAX_AXES];   /* CUDA, a checked call: where the check's flag address goes in the block */
    int aux;                  /* CUDA index launch: 1 + the output (a zeroed owner table) whose address goes into
                               * the block's aux field (index.cu's ix_owner and ix_scatter<OWN>); 0: none */
} Pass;

/* One output of an entry. */
typedef struct {
    PyObject *shape;          /* its shape, a tuple of ints (NULL where only rank and dims are used) */
    PyObject *dtype;          /* its PyArray_Descr (NumPy) or torch.dtype; NULL: the input's */
    int rank, use_blocks;     /* use_blocks: allocated from the output blocks where small enough (NumPy) */
    unsigned dst_align;       /* CUDA: its address mod 16 when the launches were chosen */
    int zero;                 /* CUDA: scratch (an owner table) zeroed on the call's stream before its launches
                               * (cuda_entry_launch), not returned (after the outputs) */
    int64_t dims[MAX_RANK], bytes;
} Out;

/* One call-cache entry: the outputs to allocate and the passes to run into them (the first five's: one tuned pass);
 * an eager entry (KIND_EAGER) has neither: eager(x) records the call for autograd and runs it. */
typedef struct {
    PyObject_HEAD
    int kind, cpu;            /* the array's kind; cpu 1: CPU kernels (NumPy arrays, PyTorch CPU tensors) */
    int n_in, n_out, n_pass, multi, prefault;   /* multi: a list of outputs (SPLIT); prefault: touch fresh pages */
    int checked;              /* CUDA: a pass checks its indices (n_flag): served only where the flag can be read */
    int64_t origin[MAX_MOVE_IO];   /* per input: bytes from its data pointer back to element 0 of the bound range */
    int64_t total;            /* the outputs' bytes */
    int64_t device;           /* the CUDA device of an entry without a Launch */
    PyObject *eager;
    Out *outs;                /* n_out of them (out1 for one) */
    Pass *passes;             /* n_pass of them (pass1 for one) */
    int64_t *key;             /* the key's words, for the front table (set when stored) */
    int key_n;
    Out out1;
    Pass pass1;
} Entry;


typedef struct {
    int64_t w[MAX_KEY];
    int n;
} Key;

/* -- state (calls.c) */
extern PyTypeObject EntryType;
extern PyObject *table;                 /* key bytes -> entry */
extern int enabled, numpy_ready;
extern long long hits, misses;
extern unsigned long long generation;   /* bumped by every clear */
extern PyObject *t_type, *t_grad_enabled, *t_dispatch_len, *t_wrapped, *t_raw_stream, *t_device, *t_from_numpy;
extern PyObject *c_type, *c_empty, *c_device, *c_stream;
/* the attribute names the hooks read, interned once: s_NAME for each NAME */
#define ODML_NAMES(X) X(requires_grad) X(is_cuda) X(is_cpu) X(dtype) X(shape) X(stride) X(get_device) X(data_ptr) \
    X(is_neg) X(new_empty) X(strides) X(data) X(ptr) X(device_id) X(detach) X(numpy)
#define ODML_NAME(N) extern PyObject *s_##N;
ODML_NAMES(ODML_NAME)
#undef ODML_NAME
extern const odml_torch_api *tapi;

/* -- errors, keys, the table (calls.c) */
void drop_error(void);
void drop_all(void);
PyObject *with_deferred(PyObject *result);
PyObject *allocation_failed(void);
/* append one word to a key; -1 where it is full (inline: a key takes tens of them a call) */
static inline int put(Key *k, int64_t v) {
    if (k->n >= MAX_KEY) return -1;
    k->w[k->n++] = v;
    return 0;
}
/* a layout's words: rank n, n sizes, n strides times `scale`; -1 on overflow or a full key (one form for every
 * array kind: a PyTorch CPU tensor keys as its NumPy view) */
static inline int put_layout(Key *k, int n, const int64_t *sizes, const int64_t *strides, int64_t scale) {
    int64_t v;
    if (put(k, n) < 0) return -1;
    for (int i = 0; i < n; i++)
        if (put(k, sizes[i]) < 0) return -1;
    for (int i = 0; i < n; i++)
        if (__builtin_mul_overflow(strides[i], scale, &v) || put(k, v) < 0) return -1;
    return 0;
}
/* x's items where it is an exact list or tuple (their count in *n), else NULL */
static inline PyObject **seq_items(PyObject *x, Py_ssize_t *n) {
    if (PyList_CheckExact(x)) return *n = PyList_GET_SIZE(x), ((PyListObject *)x)->ob_item;
    if (PyTuple_CheckExact(x)) return *n = PyTuple_GET_SIZE(x), ((PyTupleObject *)x)->ob_item;
    return NULL;
}
int key_arg(Key *k, PyObject *a);
int key_move_arg(Key *k, PyObject *a);   /* a family argument's (calls_move.c) */
/* a call's key up to its array(s): kind, operator, each argument (key_move_arg's) */
int key_call(Key *k, int kind, PyObject *op, PyObject *const *args, Py_ssize_t nargs);
/* k's entry (a new reference), or NULL (a miss counted); n_in >= 0: only an entry of k's kind with n_in inputs */
Entry *lookup(const Key *k, int n_in);
int store(const Key *k, Entry *e);
PyObject *stored(const Key *k, Entry *e);     /* store, e released: True, or NULL (a put's answer) */
/* a new entry of `kind` with n_out outputs and n_pass passes, zeroed; NULL with an exception */
Entry *entry_alloc(int kind, int n_out, int n_pass);
int is_true(PyObject *r);
int equals(PyObject *r, int64_t want);
int launch_pass(const Entry *e, const Pass *p, uint64_t src, uint64_t dst, uint64_t stream);
PyObject *take_outputs(PyObject **outs, int n, int multi);
/* a launch of a kernel whose one argument is the parameter block at `params` (cuda_launch.c); the CUresult */
int odml_cuda_launch_block(uint64_t function, unsigned grid, unsigned block, unsigned shared, uint64_t stream,
                           const void *params);
int odml_cuda_zero_words(uint64_t dptr, size_t words, uint64_t stream);
/* the dynamic shared memory `function` may take raised to `bytes` (cuFuncSetAttribute); the CUresult */
int odml_cuda_shared_limit(uint64_t function, unsigned bytes);
/* the index check of a call on `stream` (cuda_launch.c). begin: a zeroed flag slot taken, its device address in
 * *flag, the done word and counter in fin[0], fin[1] (0s: the stream is waited for); -1 where the call declines (no
 * driver or context, the stream capturing, no slot). end, after the launches: the done word (`signalled`) or the
 * stream waited for (GIL released), the slot read and given back: 1 set (an index out of range), 0 clear, -1 failed */
int odml_cuda_check_begin(uint64_t stream, int *slot, uint64_t *flag, uint64_t *fin);
int odml_cuda_check_end(uint64_t stream, int slot, int signalled);

/* -- PyTorch, CuPy, NumPy (calls.c) */
int torch_key(Key *k, PyObject *x, int64_t *device, uint64_t *ptr);
int torch_plain_in(PyObject *x, odml_torch_info *in);
/* torch_key of a tensor cuda_move serves (torch_plain_in 2, not a negative view), else -1: x described once */
int torch_plain_key(Key *k, PyObject *x, int64_t *device, uint64_t *ptr);
PyObject *cuda_empty(int torch, PyObject *x, const Out *o, PyObject *dtype, int64_t *dst, int *placed);
int cuda_stream(int torch, int64_t device, uint64_t *stream);
int cuda_device_is(int torch, int64_t device);
PyObject *eager_call(PyObject *const *args, Py_ssize_t nargs, PyObject *x);
int still_planned(PyObject *x, PyObject *planned, int torch);
#ifdef ODML_NUMPY
int cupy_key(Key *k, PyObject *x, int64_t *device, uint64_t *ptr);
/* A new-shape function's arguments checked: per character of `spec`, args[i] is 'i' an exact int in 64 bits (stored
 * through the next int64_t *), 't' an exact tuple, '.' anything; -1, no exception left, where one is not or NumPy's
 * C API is not ready (the function answers None). */
int plain_args(PyObject *const *args, const char *spec, ...);
int numpy_key(Key *k, PyArrayObject *x);
/* a new shape of one of the first five (a plain lowering) served at a miss under k (calls_move_new.c), or None */
PyObject *numpy_plain(PyObject *const *args, Py_ssize_t nargs, PyArrayObject *x, const Key *k);
void plain_forget(void);                /* drops what numpy_plain learned (with the dict) */
#endif
extern long long plain_served;               /* new shapes numpy_plain served */

/* -- the family's entries (calls_move.c) */

#ifdef ODML_NUMPY
int move_key(Key *k, PyObject *op, PyObject *x, PyObject *const *args, Py_ssize_t nargs, PyArrayObject **in,
             int *n_in);
/* pass mp checked to stay inside its buffers (inputs of span[i] elements of in_size[i] bytes, outputs of count[j]
 * of out_size[j]) and laid out (odml_move_prepare): 1; 0 where it does not fit or the kernel refuses it; -1 with
 * MemoryError. index_pass_fits: the same check of index pass mp (parameters p), whatever the index values. */
int move_pass_ready(Pass *mp, const int64_t *span, const int *in_size, const int64_t *count, const int *out_size,
                    int n_in, int n_out);
int index_pass_fits(const Pass *mp, const idx_params *p, const int64_t *span, const int *in_size, const int64_t *count,
                    const int *out_size, int n_in, int n_out);
/* An input's origin and span, in elements. */
int input_layout(PyArrayObject *x, int64_t *origin, int64_t *span);
extern const int move_npy_type[12];
int64_t descr_type(PyArray_Descr *d);
/* whether d, a NumPy dtype, is NumPy's own dtype object of a number type (calls_move.c; no exception left) */
int number_descr(PyObject *d);
/* A new shape's entry e (reference taken) run on the n_in NumPy arrays `in` (held by the caller) into new outputs
 * and stored where the call keys (move_key of op, xo, call_args) and the cache is on and still in `gen`: serve_cpu's
 * answer (calls_move_new.c). */
PyObject *serve_new(Entry *e, PyObject *op, PyObject *xo, PyObject *call_args, PyArrayObject **in, int n_in,
                    int64_t gen);
int run_passes(const Entry *e, char *const *dsts, const char *const *srcs);
/* e's run (reference taken) into new outputs: the output(s); None where a pass declined or an allocation's
 * finalizer changed an input (the Python route runs the call and raises); NULL with an exception. The inputs: at
 * `data` (a hit, counted); or, with `in` (a new shape's NumPy arrays), read here before the outputs are allocated, e
 * then stored under k where not NULL (the cache on and still in `gen`). `own`: the dtype a tuned pass gives, the
 * input's own (a dtype with metadata keys like its plain type). */
PyObject *serve_cpu(Entry *e, PyArray_Descr *own, char *const *data, PyArrayObject **in, int n_in, const Key *k,
                    int64_t gen);
PyObject *numpy_move(PyObject *const *args, Py_ssize_t nargs, int plain);
PyObject *cuda_move(PyObject *const *args, Py_ssize_t nargs, int torch);
/* x's arrays of `type` in in[] (borrowed): x itself (*seq 0) or an exact list or tuple's 1..MAX_MOVE_IO items (*seq
 * 1); their count, or -1 */
int arrays_of(PyObject *x, PyTypeObject *type, PyObject **in, int *seq);
int cuda_inputs(PyObject *x, int torch, PyObject **in, int *n, int *seq);
int cuda_move_key(Key *k, int torch, PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject **in, int n,
                  int seq, int64_t *device, uint64_t *ptr, int *at);
int same_words(const int64_t *a, const int64_t *b, int n);
int inputs_still_keyed(const Key *k, const int *at, int torch, PyObject **in, int n, const uint64_t *ptr);
typedef PyObject *(*move_fn)(PyObject *const *args, Py_ssize_t nargs);
/* A repeated call on PyTorch tensors (args[1]: one, or a list or tuple), any function: a tensor autograd must record
 * by its eager entry, CUDA tensors by cuda_move, CPU ones by their NumPy views' entries (a described tensor keyed
 * without a view: torch_view_key); None where none serves. */
PyObject *torch_call(PyObject *const *args, Py_ssize_t nargs);
/* The key of a call on one plain PyTorch CPU tensor the accessors described (in): numpy_key's words for its NumPy
 * view after move_key's head, so one entry serves both; -1: not one of the 11 element types. torch_move_key: call_cache_entry's key on one tensor. */
int torch_view_key(Key *k, PyObject *op, PyObject *const *args, Py_ssize_t nargs, const odml_torch_info *in);
int torch_move_key(Key *k, PyObject *const *args, Py_ssize_t nargs);
int64_t torch_type(PyObject *dtype);
/* -- new shapes on CUDA memory (calls_move_new.c): a call's inputs as the lowering takes them, their data pointers,
 * the bytes back to element 0 of each bound range (planner.array_layout's origin) and its elements (span) */
typedef struct {
    int n;
    odml_move_input xs[MAX_MOVE_IO];
    uint64_t data[MAX_MOVE_IO];
    int64_t origin[MAX_MOVE_IO], span[MAX_MOVE_IO];
} CudaInputs;
/* each input's element-0 address; -1 where one's data is not a multiple of its element size */
int cuda_sources(const CudaInputs *c, uint64_t *src);
int numpy_cuda_inputs(PyArrayObject *const *in, int n_in, PyObject *dp, CudaInputs *c);
/* Item i of a cuda_conf() tuple, or what it returns where a function (a c_settings, called only where a plan reads
 * it): a new reference, or NULL with an exception */
PyObject *conf_item(PyObject *conf, Py_ssize_t i);
/* How cuda_new lowers a call (0 with its outputs in g, or -1) and plans its launches for outputs at dsts
 * (their count, or -1), conf the caller's cuda_conf() tuple. */
typedef struct CudaNew CudaNew;
struct CudaNew {
    int (*lower)(CudaNew *how, const CudaInputs *c, PyObject *const *args, Py_ssize_t nargs, odml_move_prog *g);
    int (*plan)(CudaNew *how, const odml_move_prog *g, const CudaInputs *c, const uint64_t *dsts, PyObject *conf,
                odml_move_launch *L);
    unsigned checked;         /* set by plan: bit i, launch i checks its index axes (index.cu's ix_axis.flag) */
};
/* where index axis a's flag address (index.cu's ix_axis.flag) lies in an index kernel's parameter block */
#define IX_FLAG_AT(a) (offsetof(odml_ix_params, axes) + sizeof(odml_ix_axis) * (size_t)(a) + offsetof(odml_ix_axis, flag))
PyObject *cuda_new(PyObject *op, PyObject *xo, PyObject *call_args, PyObject *gen, int torch, PyObject *conf,
                   CudaNew *how);
/* e's launches queued on `stream` (calls_move.c), its owner tables (outs with zero) zeroed first, the index check
 * done where e checks, in two steps so that the caller's host work overlaps a checked call's kernels: the launches
 * (the check's slot and done word in w), then the wait (once per w; rc the launch's answer). Each answers 0 (run,
 * indices in range); 1, declined (an index out of range, the check unavailable); -1 with an exception */
typedef struct { int slot, signalled; } CheckWait;
int cuda_entry_launch(const Entry *e, const uint64_t *ptr, const uint64_t *dsts, uint64_t stream, CheckWait *w);
int cuda_entry_wait(uint64_t stream, CheckWait *w, int rc);
/* e stored under k where k has no entry yet: 0; 1 where it has one (kept, e not stored); -1 with an exception */
int store_new(const Key *k, Entry *e);
void unstore(const Key *k, const Entry *e);   /* k's entry dropped where it is still e, no exception left */
/* The route of a never-seen shape on args[xi] (op first, the call's arguments at xi + 1, its generation at xi + 2,
 * the cuda_conf callable at ci): on CUDA memory, cuda_new with `how` and cuda_conf()'s tuple (None without either);
 * else cpu(args) on NumPy arrays or NumPy views of plain PyTorch CPU tensors. */
PyObject *new_shape(PyObject *const *args, Py_ssize_t nargs, int xi, int ci, CudaNew *how, move_fn cpu);
#endif
/* A Python function NAME(SIG) of LO to HI positional arguments (module.c's table) answering CALL where the
 * build has NumPy's headers, else None. */
#ifdef ODML_NUMPY
#define NUMPY_ONLY(CALL) (CALL)
#else
#define NUMPY_ONLY(CALL) Py_NewRef(Py_None)
#endif
#define GLUE_FUNCTION(NAME, SIG, LO, HI, CALL)                                            \
    PyObject *odml_py_##NAME(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {  \
        (void)self;                                                                       \
        return odml_arity(#NAME "(" SIG ")", nargs, LO, HI) ? NULL : NUMPY_ONLY(CALL);    \
    }

#endif
