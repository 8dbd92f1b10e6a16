/* The call cache's new-shape route of the data-movement family on NumPy arrays (PyTorch CPU tensors through NumPy
 * views), PyTorch CUDA tensors and CuPy arrays: a never-seen shape lowered in C (newshape_move.c), run (on CUDA, the
 * launches cuda_move_spec.c plans) and recorded as call_cache_put_move records it, in one call. */
#define NO_IMPORT_ARRAY
#include <stddef.h>

#include "calls.h"

long long plain_served;                 /* new shapes numpy_plain served (below) */

/* -- New shapes of the family on NumPy arrays ------------------------------------------------------------ */

#ifdef ODML_NUMPY
/* DataType values 1..11 -> NumPy type numbers (DataType.numpy_dtype). */
const int move_npy_type[12] = {0, NPY_FLOAT32, NPY_FLOAT16, NPY_UINT32, NPY_UINT16, NPY_UINT8, NPY_INT32,
                                      NPY_INT16, NPY_INT8, NPY_FLOAT64, NPY_UINT64, NPY_INT64};

/* The DataType value of a NumPy dtype of one of the 11 element types (kind and size), else 0. */
int64_t descr_type(PyArray_Descr *d) {
    const int es = (int)PyDataType_ELSIZE(d);
    switch (d->kind) {
        case 'f': return es == 2 ? ODML_T_FLOAT16 : es == 4 ? ODML_T_FLOAT32 : es == 8 ? ODML_T_FLOAT64 : 0;
        case 'i': return es == 1 ? ODML_T_INT8 : es == 2 ? ODML_T_INT16 : es == 4 ? ODML_T_INT32 : es == 8 ? ODML_T_INT64 : 0;
        case 'u': return es == 1 ? ODML_T_UINT8 : es == 2 ? ODML_T_UINT16 : es == 4 ? ODML_T_UINT32 : es == 8 ? ODML_T_UINT64 : 0;
        default: return 0;
    }
}

/* DataType values 1..11 -> their lower-case names (arrays/_contract.py's _NAMES). */
static const char *const type_name[12] = {NULL, "float32", "float16", "uint32", "uint16", "uint8", "int32", "int16",
                                          "int8", "float64", "uint64", "int64"};

/* The DataType value named `name` after `prefix` (lower-case, upper-case or "DML_TENSOR_DATA_TYPE_" + upper-case),
 * else 0. */
static int64_t named_type(const char *name, Py_ssize_t len, const char *prefix) {
    const size_t skip = strlen(prefix);
    if ((size_t)len <= skip || strncmp(name, prefix, skip)) return 0;
    name += skip;
    len -= (Py_ssize_t)skip;
    const int upper = name[0] >= 'A' && name[0] <= 'Z';
    if (!*prefix && upper && len > 21 && !strncmp(name, "DML_TENSOR_DATA_TYPE_", 21)) {
        name += 21;
        len -= 21;
    }
    for (int64_t t = 1; t < 12; t++) {
        const char *want = type_name[t];
        if ((Py_ssize_t)strlen(want) != len) continue;
        int same = 1;
        for (Py_ssize_t i = 0; i < len && same; i++)
            same = name[i] == (upper ? want[i] - ('a' - 'A') * (want[i] >= 'a' && want[i] <= 'z') : want[i]);
        if (same) return t;
    }
    return 0;
}

/* Attribute `attr` of module `module` where it is imported (a new reference), else NULL (an exception may be set). */
static PyObject *module_attr(const char *module, const char *attr) {
    PyObject *name = PyUnicode_FromString(module);
    PyObject *m = name ? PyImport_GetModule(name) : NULL;
    PyObject *v = m ? PyObject_GetAttrString(m, attr) : NULL;
    Py_XDECREF(m);
    Py_XDECREF(name);
    return v;
}

int64_t odml_move_dtype_type(PyObject *o) {
    if (!numpy_ready) return 0;
    /* (newshape.h's spellings; data_type takes more, "i1", " int8 ", ...: those take the Python route) */
    if (PyUnicode_CheckExact(o)) {
        Py_ssize_t len;
        const char *name = PyUnicode_AsUTF8AndSize(o, &len);
        if (!name) PyErr_Clear();
        return name ? named_type(name, len, "") : 0;
    }
    if (!strcmp(Py_TYPE(o)->tp_name, "torch.dtype")) {
        PyObject *text = PyObject_Str(o);
        Py_ssize_t len;
        const char *name = text ? PyUnicode_AsUTF8AndSize(text, &len) : NULL;
        const int64_t t = name ? named_type(name, len, "torch.") : 0;
        if (PyErr_Occurred()) PyErr_Clear();
        Py_XDECREF(text);
        return t;
    }
    static PyTypeObject *data_type;                /* opendml.model.data_type.DataType, once imported */
    if (!data_type) {
        PyObject *type = module_attr("opendml.model.data_type", "DataType");
        if (type && PyType_Check(type)) data_type = (PyTypeObject *)type;     /* held for good */
        else Py_XDECREF(type);
        if (PyErr_Occurred()) PyErr_Clear();
    }
    if (data_type && Py_TYPE(o) == data_type) {
        const long t = PyLong_AsLong(o);
        if (t == -1 && PyErr_Occurred()) PyErr_Clear();
        return t >= 1 && t <= 11 ? t : 0;
    }
    PyArray_Descr *d = NULL;
    if (PyArray_DescrCheck(o)) {
        if (!number_descr(o)) return 0;
        d = (PyArray_Descr *)Py_NewRef(o);
    } else if (PyType_Check(o) && PyType_IsSubtype((PyTypeObject *)o, &PyGenericArrType_Type)
               && !(((PyTypeObject *)o)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {   /* numpy.float16, numpy.int8, ... */
        d = PyArray_DescrFromTypeObject(o);
        if (!d) {
            PyErr_Clear();
            return 0;
        }
    } else {
        return 0;
    }
    const int64_t t = PyTypeNum_ISNUMBER(d->type_num) && PyArray_ISNBO(d->byteorder) ? descr_type(d) : 0;
    Py_DECREF(d);
    return t;
}

/* A family call's arrays (arrays_of's) in `in` (borrowed): a sequence exactly where the lowering has
 * ODML_LOWER_SEQUENCE (else the Python route names the fault); -1 else. */
static int move_inputs(PyObject *x, int64_t lowering, PyArrayObject **in, int *n_in) {
    int seq;
    *n_in = arrays_of(x, &PyArray_Type, (PyObject **)in, &seq);
    return *n_in < 0 || seq != !!(lowering & ODML_LOWER_SEQUENCE) ? -1 : 0;
}

/* The KIND_MOVE entry of plan pl's one tuned pass (odml_move_plain's; as put_move records the Python route's): the
 * CPU kernel's parameters, threads and origin as CpuBackend's runner gives them (odml_new_cpu, odml_new_threads),
 * `descr` the output's dtype. NULL, no exception set, where the Python route must run the call (an output of conf[4]
 * bytes or more, which takes the output blocks there; more than ODML_MAX_THREADS threads); with one for no memory. */
static Entry *tuned_entry(const odml_new_plan *pl, PyObject *descr, const int64_t *conf) {
    odml_cpu_run run;
    int64_t bytes, origin;
    if (odml_new_cpu(pl, conf[2], conf[3], &run) || __builtin_mul_overflow(pl->count, pl->es, &bytes)
            || bytes >= conf[4] || __builtin_mul_overflow(pl->origin, pl->es, &origin))
        return NULL;
    const int64_t threads = odml_new_threads(run.work, conf[1], conf[0]);
    Entry *e = threads > ODML_MAX_THREADS ? NULL : entry_alloc(KIND_MOVE, 1, 1);
    if (!e) return NULL;
    e->cpu = 1;
    e->total = e->out1.bytes = bytes;
    e->origin[0] = origin;
    e->out1.rank = pl->out_rank;
    memcpy(e->out1.dims, pl->out_dims, sizeof(int64_t) * (size_t)pl->out_rank);
    e->out1.dtype = Py_NewRef(descr);
    if (!(e->out1.shape = odml_ints_tuple(pl->out_dims, pl->out_rank))) Py_CLEAR(e);
    else {
        e->pass1.kernel = odml_new_kernel(pl->kind);
        e->pass1.threads = (int)threads;
        memcpy(&e->pass1.p.k, &run.p, (size_t)run.size);
    }
    return e;
}

/* CpuBackend.plain_conf read into c (most threads, grain bytes, tile stride, tile columns, the output size from which
 * output blocks are used): 0, or -1 where it is not such a tuple (None: the NumPy kernels). */
static int read_conf(PyObject *conf, int64_t *c) {
    return odml_tuple_ints(conf, 5, c) || c[0] < 1 || c[1] < 1 ? -1 : 0;
}

/* The first five's entry on NumPy array x (move_new_entry's): x as odml_layout_from_bytes reads it, one tuned pass. */
static Entry *plain_entry(int lowering, PyArrayObject *x, PyObject *const *cargs, Py_ssize_t ncargs, const int64_t *c) {
    odml_move_input xi;
    odml_new_plan pl;
    const int n = PyArray_NDIM(x);
    const int64_t es = PyArray_ITEMSIZE(x);
    if (!PyArray_ISNOTSWAPPED(x) || n < 1 || n > ODML_MAX_RANK || (xi.type = descr_type(PyArray_DESCR(x))) == 0)
        return NULL;
    xi.n = n;
    for (int i = 0; i < n; i++) {
        const int64_t s = PyArray_STRIDE(x, i);
        xi.shape[i] = PyArray_DIM(x, i);
        if (s % es && xi.shape[i] > 1) return NULL;
        xi.strides[i] = s % es ? 0 : s / es;
    }
    return odml_move_plain(lowering, &xi, cargs, ncargs, &pl) == 0 ? tuned_entry(&pl, (PyObject *)PyArray_DESCR(x), c)
                                                                    : NULL;
}

/* The entry of `lowering` on the n_in arrays `in` (not stored, not run; a plain lowering's: plain_entry): the passes
 * packed (odml_move_pack), threads as CpuBackend._threads gives them for conf c (read_conf's), each checked to stay
 * inside the buffers and laid out (move_pass_ready). NULL, no exception set, where the Python route must run the
 * call; with one for no memory. */
static Entry *move_new_entry(int lowering, PyArrayObject **in, int n_in, PyObject *const *cargs, Py_ssize_t ncargs,
                             const int64_t *c) {
    if (lowering & ODML_LOWER_PLAIN) return n_in == 1 ? plain_entry(lowering, in[0], cargs, ncargs, c) : NULL;
    const int64_t most = c[0], grain = c[1], min_bytes = c[4];
    odml_move_input xs[MAX_MOVE_IO];
    int64_t origin[MAX_MOVE_IO], span[MAX_MOVE_IO];
    int in_size[MAX_MOVE_IO], out_size[MAX_MOVE_IO];
    for (int j = 0; j < n_in; j++) {
        PyArrayObject *x = in[j];
        odml_move_input *xi = &xs[j];
        const int n = PyArray_NDIM(x);
        if (!PyArray_ISNOTSWAPPED(x) || n < 1 || n > ODML_MAX_RANK || (xi->type = descr_type(PyArray_DESCR(x))) == 0
                || PyArray_SIZE(x) == 0 || input_layout(x, &origin[j], &span[j]) < 0)
            return NULL;
        const int64_t es = PyArray_ITEMSIZE(x);
        in_size[j] = (int)es;
        xi->n = n;
        xi->origin = origin[j] / es;
        for (int i = 0; i < n; i++) {
            xi->shape[i] = PyArray_DIM(x, i);
            xi->strides[i] = PyArray_STRIDE(x, i) / es;
        }
    }
    odml_move_prog *g = (odml_move_prog *)PyMem_Malloc(sizeof(odml_move_prog));
    if (!g) {
        PyErr_NoMemory();
        return NULL;
    }
    Entry *e = NULL;
    if (odml_move_lower(lowering, xs, n_in, cargs, ncargs, g) || g->n_out > MAX_MOVE_IO || g->n_pass > MAX_MOVE_PASSES)
        goto out;
    e = entry_alloc(KIND_MOVE, g->n_out, g->n_pass);
    if (!e) goto out;
    e->n_in = n_in;
    e->multi = g->multi;
    for (int j = 0; j < n_in; j++) e->origin[j] = origin[j];
    for (int i = 0; i < g->n_out; i++) {
        Out *o = &e->outs[i];
        PyArray_Descr *d = PyArray_DescrFromType(move_npy_type[g->out_type[i]]);
        if (!d) goto fail;
        o->dtype = (PyObject *)d;
        out_size[i] = odml_type_size[g->out_type[i]];
        o->rank = g->out_rank[i];
        memcpy(o->dims, g->out_dims[i], sizeof(int64_t) * (size_t)g->out_rank[i]);
        o->bytes = g->out_count[i] * out_size[i];
        o->use_blocks = o->bytes >= min_bytes;
        e->total += o->bytes;
    }
    for (int i = 0; i < g->n_pass; i++) {
        const odml_move_pass *raw = &g->passes[i];
        Pass *mp = &e->passes[i];
        mp->kernel = PASS_MOVE;
        int64_t count = 1, bytes, t;
        for (int d = 0; d < raw->n; d++) count *= raw->sizes[d];   /* (each output element once: no overflow) */
        bytes = count * (out_size[g->pass_dst[i]] + (raw->fill ? 0 : in_size[g->pass_src[i]]));
        t = bytes / grain;
        mp->threads = (int)(t > most ? most : t < 1 ? 1 : t);
        mp->fill = raw->fill;
        mp->src = g->pass_src[i];
        mp->dst = g->pass_dst[i];
        if (t > most && most > ODML_MAX_THREADS) goto fail;
        if (odml_move_pack(raw, &mp->p.move)
                || move_pass_ready(mp, span, in_size, g->out_count, out_size, n_in, g->n_out) != 1)
            goto fail;
    }
    goto out;
fail:
    Py_CLEAR(e);
out:
    PyMem_Free(g);
    return e;
}

PyObject *serve_new(Entry *e, PyObject *op, PyObject *xo, PyObject *call_args, PyArrayObject **in, int n_in,
                    int64_t gen) {
    /* the key and the inputs' layouts as lowered, before anything can run Python code, as numpy_move finds it */
    Key k;
    PyArrayObject *keyed_in[MAX_MOVE_IO];
    int keyed_n = 0;
    const int keyed = move_key(&k, op, xo, ((PyTupleObject *)call_args)->ob_item, PyTuple_GET_SIZE(call_args),
                               keyed_in, &keyed_n) == 0 && keyed_n == n_in;
    if (PyErr_Occurred()) drop_error();
    return serve_cpu(e, NULL, NULL, in, n_in, keyed ? &k : NULL, gen);
}

/* -- a new shape of the first five served at the cache's miss (runtime/calls.py's LOWER_PLAIN) ----------
 *
 * Served where the Python route would do nothing else: since the cache was last emptied, move_new has run a call of
 * that operator on an array of the same dtype and rank that its plain lowering took (the array API's checks read only
 * those: `templates`, with the lowering number and the CPU backend's conf); the lowering takes the arguments; the
 * entry fits as tuned_entry requires. Counted in `plain_served` (plan_cache_info's misses); anything else is None. */
#define MAX_TEMPLATES 64
static struct { int64_t op; int type, rank, lowering; } templates[MAX_TEMPLATES];
static int n_templates;
static int64_t known_conf[5];          /* the conf of the last call recorded as a template (read_conf's) */
static int conf_known;

void plain_forget(void) {
    n_templates = 0;
    conf_known = 0;
}

static int template_of(int64_t op, int type, int rank) {
    for (int i = 0; i < n_templates; i++)
        if (templates[i].op == op && templates[i].type == type && templates[i].rank == rank) return i;
    return -1;
}

/* A call of a plain lowering move_new served and recorded: its operator, dtype and rank a template, conf known. */
static void learn_template(PyObject *op, PyArrayObject *x, int lowering, const int64_t *conf) {
    int64_t code;
    if (odml_exact_i64(op, &code) < 0) return;
    const int type = PyArray_TYPE(x), rank = PyArray_NDIM(x);
    if (template_of(code, type, rank) < 0 && n_templates < MAX_TEMPLATES) {
        templates[n_templates].op = code;
        templates[n_templates].type = type;
        templates[n_templates].rank = rank;
        templates[n_templates++].lowering = lowering;
    }
    memcpy(known_conf, conf, sizeof known_conf);
    conf_known = 1;
}

PyObject *numpy_plain(PyObject *const *args, Py_ssize_t nargs, PyArrayObject *x, const Key *k) {
    int64_t op;
    int t;
    if (!conf_known || odml_exact_i64(args[0], &op) < 0 || (t = template_of(op, PyArray_TYPE(x), PyArray_NDIM(x))) < 0)
        Py_RETURN_NONE;
    Entry *e = plain_entry(templates[t].lowering, x, args + 2, nargs - 2, known_conf);
    if (!e) {                                      /* (no memory: the Python route says so) */
        if (PyErr_Occurred()) drop_error();
        Py_RETURN_NONE;
    }
    PyObject *out = serve_cpu(e, NULL, NULL, &x, 1, k, (int64_t)generation);
    if (out && out != Py_None) plain_served++;
    return out;
}

/* call_cache_move_new on NumPy arrays (runtime/calls.py's move_new): the call lowered, run and recorded; None,
 * nothing run, where the lowering declines (serve_new's Nones too). */
static PyObject *move_new(PyObject *const *args, Py_ssize_t nargs) {
    (void)nargs;
    int64_t lowering, gen, c[5];
    PyArrayObject *in[MAX_MOVE_IO];
    int n_in = 0;
    if (plain_args(args, ".i.ti", &lowering, &gen) || read_conf(args[5], c) || move_inputs(args[2], lowering, in, &n_in) < 0)
        Py_RETURN_NONE;
    /* the inputs stay alive whatever the call meets (a finalizer emptying the list of inputs) */
    for (int i = 0; i < n_in; i++) Py_INCREF(in[i]);
    Entry *e = move_new_entry((int)lowering, in, n_in, ((PyTupleObject *)args[3])->ob_item, PyTuple_GET_SIZE(args[3]),
                              c);
    PyObject *result = e ? serve_new(e, args[0], args[2], args[3], in, n_in, gen)
                         : PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    if (result && result != Py_None && lowering & ODML_LOWER_PLAIN && enabled && (unsigned long long)gen == generation)
        learn_template(args[0], in[0], (int)lowering, c);
    for (int i = 0; i < n_in; i++) Py_DECREF(in[i]);
    return result;
}

/* move_lowering(lowering, x, args, conf) -> (shapes, dtype, ((fill, src, dst, params, threads), ...)) or None: what
 * call_cache_move_new would run for x, nothing run (tests; a tuned pass's params: its kernel's block). */
static PyObject *move_lowering(PyObject *const *args) {
    int64_t lowering, c[5];
    PyArrayObject *in[MAX_MOVE_IO];
    int n_in;
    if (plain_args(args, "i.t", &lowering) || read_conf(args[3], c) || move_inputs(args[1], lowering, in, &n_in) < 0)
        Py_RETURN_NONE;
    Entry *e = move_new_entry((int)lowering, in, n_in, ((PyTupleObject *)args[2])->ob_item, PyTuple_GET_SIZE(args[2]),
                              c);
    if (!e) return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    PyObject *shapes = PyTuple_New(e->n_out), *passes = PyTuple_New(e->n_pass), *result = NULL;
    for (int j = 0; shapes && !PyErr_Occurred() && j < e->n_out; j++)   /* (a NULL item: an error, the tuple dropped) */
        PyTuple_SET_ITEM(shapes, j, odml_ints_tuple(e->outs[j].dims, e->outs[j].rank));
    for (int i = 0; passes && !PyErr_Occurred() && i < e->n_pass; i++) {
        const Pass *mp = &e->passes[i];               /* (a tuned pass: its kernel's parameter block) */
        const int tuned = mp->kernel < ODML_KERNEL_COUNT;
        PyTuple_SET_ITEM(passes, i, Py_BuildValue("(iiiy#i)", mp->fill, mp->src, mp->dst, (const char *)&mp->p,
                                                  tuned ? (Py_ssize_t)odml_kernel_size[mp->kernel]
                                                        : (Py_ssize_t)sizeof mp->p.move, mp->threads));
    }
    if (shapes && passes && !PyErr_Occurred()) result = Py_BuildValue("(OOO)", shapes, e->outs[0].dtype, passes);
    Py_XDECREF(shapes);
    Py_XDECREF(passes);
    Py_DECREF(e);
    return result;
}

/* -- New shapes of the family on CUDA memory: PyTorch CUDA tensors and CuPy arrays ---------------------- */

/* Input i of c from n sizes and byte strides (DataType `type`) as planner.array_layout reads them: -1 where a stride
 * of an axis of more than one element is not whole elements (the route packs the input first), or a reach passes
 * 2^58 bytes. */
static int cuda_input(CudaInputs *c, int i, int64_t type, int n, const int64_t *shape, const int64_t *bstrides,
                             uint64_t data) {
    odml_layout L;
    odml_move_input *x = &c->xs[i];
    const int64_t es = type >= 1 && type <= 11 ? odml_type_size[type] : 0;
    if (!es || odml_layout_from_bytes(n, shape, bstrides, es, &L)) return -1;
    int64_t back = 0, span = 1;
    for (int d = 0; d < n; d++) {
        const int64_t t = L.strides[d], a = t < 0 ? -t : t;
        if (shape[d] < 1 || !odml_mul_le(shape[d] - 1, a, ((int64_t)1 << 58) / es)) return -1;
        if (t < 0) back += (shape[d] - 1) * a;
        span += (shape[d] - 1) * a;
    }
    x->n = n;
    x->type = type;
    x->origin = back;
    memcpy(x->shape, shape, sizeof(int64_t) * (size_t)n);
    memcpy(x->strides, L.strides, sizeof(int64_t) * (size_t)n);
    c->data[i] = data;
    c->origin[i] = back * es;
    c->span[i] = span;
    return 0;
}

/* odml_move_cuda's launches of program g lowered for c, its outputs at dsts, for steps.py's settings (c_settings()'s
 * tuple): their count, or -1 (an input's data not whole elements: the route raises; a setting C does not mirror). */
static int cuda_launches(const odml_move_prog *g, const CudaInputs *c, const uint64_t *dsts, PyObject *settings,
                         odml_move_launch *L) {
    odml_move_cuda_conf conf;
    uint64_t src[MAX_MOVE_IO];
    if (odml_move_cuda_conf_read(settings, &conf) || cuda_sources(c, src)) return -1;
    return odml_move_cuda(g, &conf, src, c->span, dsts, L);
}

int cuda_sources(const CudaInputs *c, uint64_t *src) {
    for (int i = 0; i < c->n; i++) {
        if (c->data[i] % (uint64_t)odml_type_size[c->xs[i].type]) return -1;
        src[i] = c->data[i] - (uint64_t)c->origin[i];
    }
    return 0;
}

PyObject *conf_item(PyObject *conf, Py_ssize_t i) {
    PyObject *v = PyTuple_GET_ITEM(conf, i);
    return PyCallable_Check(v) ? PyObject_CallNoArgs(v) : Py_NewRef(v);
}

/* The family's lowering and launches for cuda_new: its move program (odml_move_lower) and steps.move_steps'
 * launches; for the first five (ODML_LOWER_PLAIN), odml_move_plain's plan in `pl` and odml_new_cuda's one launch
 * (runtime/cuda/tuned.py's launch_spec), no settings read. */
typedef struct {
    CudaNew base;
    int lowering;
    odml_new_plan pl;
} FamilyNew;

static int family_lower(CudaNew *how, const CudaInputs *c, PyObject *const *args, Py_ssize_t nargs,
                        odml_move_prog *g) {
    const int lowering = ((FamilyNew *)how)->lowering;
    odml_new_plan *pl = &((FamilyNew *)how)->pl;
    if (!(lowering & ODML_LOWER_PLAIN)) return odml_move_lower(lowering, c->xs, c->n, args, nargs, g);
    if (c->n != 1 || odml_move_plain(lowering, &c->xs[0], args, nargs, pl)) return -1;
    g->n_out = 1;                                   /* (the program's outputs alone: no pass is made) */
    g->multi = 0;
    g->out_type[0] = c->xs[0].type;
    g->out_rank[0] = pl->out_rank;
    memcpy(g->out_dims[0], pl->out_dims, sizeof(int64_t) * (size_t)pl->out_rank);
    return 0;
}

static int family_plan(CudaNew *how, const odml_move_prog *g, const CudaInputs *c, const uint64_t *dsts,
                       PyObject *conf, odml_move_launch *L) {
    const FamilyNew *f = (const FamilyNew *)how;
    if (f->lowering & ODML_LOWER_PLAIN) {
        odml_cuda_spec s;
        uint64_t src = 0;
        _Static_assert(sizeof s.p <= sizeof L->p && sizeof s.name <= sizeof L->name, "a tuned launch fits a launch");
        if (cuda_sources(c, &src) || odml_new_cuda(&f->pl, src, dsts[0], &s)) return -1;
        memcpy(L->name, s.name, sizeof s.name);
        memcpy(&L->p, &s.p, (size_t)s.size);
        L->size = s.size;
        L->grid = s.grid;
        L->smem = s.smem;
        L->src = L->dst = L->index = 0;
        return 1;
    }
    PyObject *settings = conf_item(conf, 1);
    if (!settings) return -1;
    const int nl = cuda_launches(g, c, dsts, settings, L);
    Py_DECREF(settings);
    for (int i = 0; i < nl; i++) L[i].index = 0;
    return nl;
}

/* PyTorch's dtype of DataType value t (`given`, where not NULL, is it), held once read; NULL, no exception left,
 * where it cannot be read. */
static PyObject *torch_dtypes[12];

static PyObject *torch_dtype_of(int64_t t, PyObject *given) {
    if (!torch_dtypes[t] && given) {
        torch_dtypes[t] = Py_NewRef(given);
    } else if (!torch_dtypes[t]) {
        PyObject *dtype = module_attr("torch", type_name[t]);
        if (dtype && odml_move_dtype_type(dtype) == t) torch_dtypes[t] = dtype;
        else Py_XDECREF(dtype);
        if (PyErr_Occurred()) drop_error();
    }
    return torch_dtypes[t];
}

/* The DataType value of a PyTorch dtype (an immortal singleton), else 0. */
int64_t torch_type(PyObject *dtype) {
    for (int64_t t = 1; t < 12; t++)
        if (torch_dtypes[t] == dtype) return t;
    const int64_t t = odml_move_dtype_type(dtype);
    if (t) torch_dtype_of(t, dtype);
    return t;
}

/* Input i of c from its key words w (torch_key's dtype, then put_layout's rank, sizes, element strides; cupy_key's
 * type number, item size, then rank, sizes, byte strides) and its data pointer. */
static int cuda_input_keyed(CudaInputs *c, int i, int torch, const int64_t *w, uint64_t data) {
    int64_t type, bstrides[MAX_RANK];
    if (torch) {
        type = torch_type((PyObject *)(intptr_t)w[0]);
        w += 1;
    } else {
        PyArray_Descr *d = PyArray_DescrFromType((int)w[0]);
        if (!d) {
            drop_error();
            return -1;
        }
        type = descr_type(d);
        Py_DECREF(d);
        if (type && w[1] != odml_type_size[type]) return -1;
        w += 2;
    }
    const int n = (int)w[0];
    if (!type || n < 1 || n > MAX_RANK) return -1;
    for (int d = 0; d < n; d++) {
        bstrides[d] = w[1 + n + d];                 /* (PyTorch's count elements) */
        if (torch && __builtin_mul_overflow(w[1 + n + d], odml_type_size[type], &bstrides[d])) return -1;
    }
    return cuda_input(c, i, type, n, w + 1, bstrides, data);
}

/* The entry of the launches L[0..n), outputs at dsts, as cuda_entry_launch reads it, in *e, outs and passes (not a
 * Python object: it borrows shapes, dtypes and L's blocks), so that the launches go before the stored entry is made
 * (entry_of, while a checked call's kernels run). No Launch: a failed launch goes to call_cache_cuda_retry. */
static void cuda_image(Entry *e, Out *outs, Pass *passes, int torch, const odml_move_prog *g, const CudaInputs *c,
                       const odml_move_launch *L, int n, const uint64_t *fn, PyObject **shapes, PyObject **dtypes,
                       const uint64_t *dsts, int64_t device, unsigned checked, int n_all, const int *aux) {
    memset(e, 0, offsetof(Entry, out1));             /* (its own outputs and passes unused) */
    memset(outs, 0, sizeof *outs * (size_t)n_all);
    memset(passes, 0, sizeof *passes * (size_t)n);
    e->kind = torch ? KIND_MOVE_TORCH : KIND_MOVE_CUPY;
    e->outs = outs;
    e->passes = passes;
    e->n_out = n_all;
    e->n_pass = n;
    e->n_in = c->n;
    e->multi = g->multi;
    e->device = device;
    memcpy(e->origin, c->origin, sizeof(int64_t) * (size_t)c->n);
    for (int i = 0; i < n_all; i++) {              /* the outputs, then the owner tables (zeroed, not returned) */
        outs[i].shape = shapes[i];
        outs[i].dtype = dtypes[i];
        outs[i].dst_align = (unsigned)(dsts[i] & 15);
        outs[i].zero = i >= g->n_out;
    }
    for (int i = 0; i < n; i++) {
        Pass *p = &passes[i];
        p->kernel = L[i].index ? PASS_INDEX : PASS_MOVE;
        p->aux = aux[i];
        if (L[i].index) {                           /* an index kernel: its addresses patched in per call */
            p->at_src = (int)offsetof(odml_ix_params, src);
            p->at_dst = (int)offsetof(odml_ix_params, dst);
            p->at_idx = (int)offsetof(odml_ix_params, idx);
            p->naxes = L[i].naxes;
            memcpy(p->slot, L[i].slot, sizeof p->slot);
            if (i < 32 && checked >> i & 1) {      /* a checked pass: the flag address in each axis */
                p->n_flag = L[i].naxes;
                for (int a = 0; a < L[i].naxes; a++)
                    p->at_flag[a] = (int)IX_FLAG_AT(a);
                e->checked = 1;
            }
        }
        p->index = (void *)&L[i].p;
        p->index_size = (int)L[i].size;
        p->params = (uint64_t)(uintptr_t)p->index;
        p->function = fn[i];
        p->grid = L[i].grid;
        p->block = ODML_CUDA_THREADS;
        p->shared = L[i].smem;
        p->src = L[i].src;
        p->dst = L[i].dst;
    }
}

/* cuda_image's entry img as a new entry holding its own references and parameter blocks; NULL with an exception. */
static Entry *entry_of(const Entry *img) {
    Entry *e = entry_alloc(img->kind, img->n_out, img->n_pass);
    if (!e) return NULL;
    e->n_in = img->n_in;
    e->multi = img->multi;
    e->device = img->device;
    e->checked = img->checked;
    memcpy(e->origin, img->origin, sizeof(int64_t) * (size_t)img->n_in);
    memcpy(e->outs, img->outs, sizeof *e->outs * (size_t)img->n_out);
    for (int i = 0; i < img->n_out; i++) {
        Py_INCREF(e->outs[i].shape);
        Py_INCREF(e->outs[i].dtype);
    }
    memcpy(e->passes, img->passes, sizeof *e->passes * (size_t)img->n_pass);
    for (int i = 0; i < img->n_pass; i++) e->passes[i].index = NULL;      /* (img's are borrowed) */
    for (int i = 0; i < img->n_pass; i++) {        /* a move pass's small block (a tuned launch's) in the pass */
        Pass *p = &e->passes[i];
        const int inline_ = p->kernel == PASS_MOVE && (size_t)p->index_size <= sizeof p->p;
        void *at = inline_ ? (void *)&p->p : (p->index = PyMem_Malloc((size_t)p->index_size));
        if (!at) {
            Py_DECREF(e);
            PyErr_NoMemory();
            return NULL;
        }
        memcpy(at, img->passes[i].index, (size_t)p->index_size);
        p->params = (uint64_t)(uintptr_t)at;
    }
    return e;
}

/* Output i of cuda_new (zero: an owner table of `dims` zeroed int32 words) of DataType t from the allocator beside
 * in0, its shape, dtype and address in shapes, dtypes and dsts: 0; 1 where the Python route must run the call (an
 * address not whole elements); -1 with an exception, or with *result allocation_failed's answer. */
static int cuda_output(int torch, PyObject *in0, int64_t t, int rank, const int64_t *dims, int zero, int i,
                       PyObject **shapes, PyObject **dtypes, PyObject **outs, uint64_t *dsts, PyObject **result) {
    Out o = {.shape = shapes[i] = odml_ints_tuple(dims, rank), .zero = zero};
    int placed;
    int64_t dst = -1;
    if (!shapes[i]) return -1;                  /* (before the dtype: torch_dtype_of may call Python) */
    dtypes[i] = torch ? Py_XNewRef(torch_dtype_of(t, NULL)) : (PyObject *)PyArray_DescrFromType(move_npy_type[t]);
    if (!dtypes[i]) return PyErr_Occurred() ? -1 : 1;
    if (!(outs[i] = cuda_empty(torch, in0, &o, dtypes[i], &dst, &placed))) {
        *result = allocation_failed();
        return -1;
    }
    if (dst == -1 || (uint64_t)dst % (uint64_t)odml_type_size[t]) return 1;
    dsts[i] = (uint64_t)dst;
    return 0;
}

/* Kernel `name`'s function in `table` (a device's compiled functions; NULL: none yet) in *fn: 0; 1 where the table
 * lacks it (*result its name, for the caller to compile; NULL with an exception); -1 with an exception. */
static int kernel_function(PyObject *table, const char *name, uint64_t *fn, PyObject **result) {
    /* the names' str objects held by a hash of their bytes (a process launches a few dozen kernels): not a str
     * made, hashed and dropped at each launch */
    static struct { char name[sizeof ((odml_move_launch *)0)->name]; PyObject *str; } held[64];
    uint64_t h = 0xcbf29ce484222325ull;
    size_t len = 0;
    for (; name[len] && len < sizeof held[0].name; len++) h = (h ^ (unsigned char)name[len]) * 0x100000001b3ull;
    PyObject *key = NULL;
    if (len < sizeof held[0].name) {
        const unsigned slot = (unsigned)(h >> 58);
        if (!held[slot].str || strcmp(held[slot].name, name)) {
            PyObject *str = PyUnicode_FromStringAndSize(name, (Py_ssize_t)len);
            if (!str) return -1;
            Py_XSETREF(held[slot].str, str);
            memcpy(held[slot].name, name, len + 1);
        }
        key = held[slot].str;
    }
    PyObject *f = !table || !PyDict_CheckExact(table) ? NULL
                  : key ? PyDict_GetItemWithError(table, key) : PyDict_GetItemString(table, name);
    if (PyErr_Occurred()) return -1;
    if (!f || !PyLong_CheckExact(f)) {
        *result = PyUnicode_FromString(name);
        return 1;
    }
    *fn = PyLong_AsUnsignedLongLong(f);
    return PyErr_Occurred() ? -1 : 0;
}

/* A never-seen shape on PyTorch CUDA tensors (torch 1) or CuPy arrays (0): inputs xo (an array, or a list or tuple),
 * other arguments call_args, settings of generation `gen`; `how` lowers it (outputs in g) and plans its launches (L)
 * for the outputs' addresses; conf is cuda_conf()'s (kernels, ...), kernels launch.new_kernels()'s {device: {name:
 * CUfunction}}, the rest for `how`. The inputs read once, through the key (one snapshot of each), lowered, the
 * outputs allocated, the inputs read again (inputs_still_keyed), the launches queued on the current stream and, while
 * they run, the call recorded as put_move_cuda records it (the cache on and still in `gen`). Returns the output(s);
 * None, nothing run, wherever the Python route must run the call (no key, a lowering or plan declined, a device not
 * current, an output refused, an input changed meanwhile); or the name of a kernel missing for the device (nothing
 * run: compile it and call again). */
PyObject *cuda_new(PyObject *op, PyObject *xo, PyObject *call_args, PyObject *gen_o, int torch, PyObject *conf,
                   CudaNew *how) {
    PyObject *in[MAX_MOVE_IO], *outs[MAX_MOVE_IO] = {NULL}, *shapes[MAX_MOVE_IO] = {NULL};
    PyObject *dtypes[MAX_MOVE_IO] = {NULL}, *result = NULL, *table_of = NULL;
    int64_t gen, device = -1;
    uint64_t ptr[MAX_MOVE_IO], dsts[MAX_MOVE_IO], fn[ODML_MOVE_PROG_MAX_PASSES], stream;
    int n = 0, seq, at[MAX_MOVE_IO], stored = 1;     /* (0 where this call's entry was stored) */
    Key k;
    CheckWait wait = {-1, 0};
    CudaInputs c;
    odml_move_prog *g = NULL;
    odml_move_launch *L = NULL;
    Entry *e = NULL;
    if (!PyTuple_CheckExact(call_args) || odml_exact_i64(gen_o, &gen)
            || !PyTuple_CheckExact(conf) || PyTuple_GET_SIZE(conf) < 2 || !PyDict_CheckExact(PyTuple_GET_ITEM(conf, 0))
            || cuda_inputs(xo, torch, in, &n, &seq) < 0) {
        if (PyErr_Occurred()) drop_error();
        Py_RETURN_NONE;
    }
    PyObject *const *cargs = ((PyTupleObject *)call_args)->ob_item;
    const Py_ssize_t ncargs = PyTuple_GET_SIZE(call_args);
    if (cuda_move_key(&k, torch ? 2 : 0, op, cargs, ncargs, in, n, seq, &device, ptr, at) < 0)
        goto route;
    c.n = n;
    for (int i = 0; i < n; i++)
        if (cuda_input_keyed(&c, i, torch, k.w + at[i], ptr[i]) < 0) goto route;
    /* the program and its launches (58 and 46 KiB) held here, malloc'd only by a call made while another uses
     * them (Python code run by an allocation) */
    static odml_move_prog held_g;
    static odml_move_launch held_L[ODML_MOVE_PROG_MAX_PASSES];
    static int held;
    g = held ? (odml_move_prog *)PyMem_Malloc(sizeof *g) : &held_g;
    L = held ? (odml_move_launch *)PyMem_Malloc(sizeof *L * ODML_MOVE_PROG_MAX_PASSES) : held_L;
    held = 1;
    if (!g || !L) {
        PyErr_NoMemory();
        goto done;
    }
    if (how->lower(how, &c, cargs, ncargs, g) || g->n_out > MAX_MOVE_IO) goto route;
    if (!cuda_device_is(torch, device)) goto route;
    /* the device's compiled functions, held: an allocation may run Python code that replaces the table */
    PyObject *dev = PyLong_FromLongLong(device);
    table_of = Py_XNewRef(dev ? PyDict_GetItemWithError(PyTuple_GET_ITEM(conf, 0), dev) : NULL);
    Py_XDECREF(dev);
    if (!table_of && PyErr_Occurred()) goto done;
    for (int i = 0, rc; i < g->n_out; i++)
        if ((rc = cuda_output(torch, in[0], g->out_type[i], g->out_rank[i], g->out_dims[i], 0, i, shapes, dtypes, outs,
                              dsts, &result)))
            goto failed;
    const int nl = how->plan(how, g, &c, dsts, conf, L);
    if (nl < 1) goto route;
    for (int i = 0; i < nl; i++)
        if (kernel_function(table_of, L[i].name, &fn[i], &result)) goto done;
    int n_all = g->n_out, aux[ODML_MOVE_PROG_MAX_PASSES], table = 0;
    for (int i = 0; i < nl; i++) {                  /* owner tables: zeroed scratch after the outputs */
        if (L[i].index && L[i].scratch > 0) {
            int rc = n_all < MAX_MOVE_IO ? 0 : 1;
            if (rc || (rc = cuda_output(torch, in[0], ODML_T_INT32, 1, &L[i].scratch, 1, n_all, shapes, dtypes, outs,
                                        dsts, &result)))
                goto failed;
            table = ++n_all;                        /* 1 + its output */
        }
        aux[i] = L[i].index && L[i].aux ? table : 0;   /* (ix_owner and the scatter after it read the table) */
        if (L[i].index && L[i].aux && !table) goto route;
    }
    if (!inputs_still_keyed(&k, at, torch, in, n, ptr)) goto route;
    if (cuda_stream(torch, device, &stream) < 0) goto done;
    {
        /* the launches from the entry's image; the entry made while they run, a checked call's wait last (done) */
        Entry img;
        Out img_outs[MAX_MOVE_IO];
        Pass img_passes[ODML_MOVE_PROG_MAX_PASSES];
        cuda_image(&img, img_outs, img_passes, torch, g, &c, L, nl, fn, shapes, dtypes, dsts, device, how->checked,
                   n_all, aux);
        const int rc = cuda_entry_launch(&img, ptr, dsts, stream, &wait);
        if (rc < 0) goto done;
        if (rc > 0) goto route;                 /* declined (the route runs the call) */
        if (!(e = entry_of(&img))) goto done;
    }
    int fits = 1;                                   /* (put_move_cuda records no origin past its address) */
    for (int i = 0; i < n; i++) fits &= (uint64_t)c.origin[i] <= ptr[i];
    /* (a checked key with an entry, another thread's or one whose check sent a repeat to the route: that entry
     * kept, so that an index out of range below drops only this call's) */
    if (fits && enabled && (unsigned long long)gen == generation && (stored = e->checked ? store_new(&k, e) : store(&k, e)) < 0)
        goto done;
    result = take_outputs(outs, g->n_out, g->multi);
    goto done;
failed:
    if (result || PyErr_Occurred()) goto done;
route:
    if (PyErr_Occurred()) drop_error();
    result = Py_NewRef(Py_None);
done:
    for (int i = 0; i < MAX_MOVE_IO; i++) {
        Py_XDECREF(outs[i]);
        Py_XDECREF(shapes[i]);
        Py_XDECREF(dtypes[i]);
    }
    for (int i = 0; i < n; i++) Py_DECREF(in[i]);
    Py_XDECREF(table_of);
    Entry *mine = stored == 0 && wait.slot >= 0 ? (Entry *)Py_NewRef(e) : NULL;   /* (its identity, for unstore) */
    Py_XDECREF(e);
    if (g == &held_g) held = 0;
    else PyMem_Free(g);
    if (L != held_L) PyMem_Free(L);
    if (wait.slot >= 0 && cuda_entry_wait(stream, &wait, 0)) {
        /* a checked index out of range: the route raises; this call's entry dropped, not another thread's */
        if (mine) unstore(&k, mine);
        Py_XSETREF(result, PyErr_Occurred() ? NULL : Py_NewRef(Py_None));
    }
    Py_XDECREF(mine);
    return result;
}


/* The n_in NumPy arrays `in` as CUDA inputs at the device addresses of tuple dp (cuda_move_steps and
 * cuda_index_steps); -1, no exception left, where one is byte-swapped, of no rank or too many, cuda_input refuses it
 * or its address is not an exact int. */
int numpy_cuda_inputs(PyArrayObject *const *in, int n_in, PyObject *dp, CudaInputs *c) {
    c->n = n_in;
    for (int i = 0; i < n_in; i++) {
        const int nd = PyArray_NDIM(in[i]);
        int64_t p;
        if (!PyArray_ISNOTSWAPPED(in[i]) || nd < 1 || nd > MAX_RANK || odml_exact_i64(PyTuple_GET_ITEM(dp, i), &p)
                || cuda_input(c, i, descr_type(PyArray_DESCR(in[i])), nd, (const int64_t *)PyArray_DIMS(in[i]),
                              (const int64_t *)PyArray_STRIDES(in[i]), (uint64_t)p) < 0) {
            if (PyErr_Occurred()) drop_error();
            return -1;
        }
    }
    return 0;
}

/* cuda_move_steps(lowering, x, args, data_ptrs, dst_ptrs, settings) -> (shapes, ((name, params, grid, shared_mem,
 * src, dst), ...)) or None: the launches call_cache_move_new would make for NumPy array(s) x at device addresses
 * data_ptrs, the outputs at dst_ptrs, nothing launched (tests: against steps.py's move_steps, no GPU needed). */
static PyObject *cuda_move_steps(PyObject *const *args) {
    int64_t lowering;
    uint64_t dsts[MAX_MOVE_IO];
    PyArrayObject *in[MAX_MOVE_IO];
    int n_in;
    CudaInputs c;
    PyObject *dp = args[3], *qp = args[4], *result = NULL;
    if (plain_args(args, "i.ttt", &lowering) || move_inputs(args[1], lowering, in, &n_in) < 0
            || PyTuple_GET_SIZE(dp) != n_in || PyTuple_GET_SIZE(qp) > MAX_MOVE_IO
            || numpy_cuda_inputs(in, n_in, dp, &c) < 0 || odml_tuple_ints(qp, PyTuple_GET_SIZE(qp), (int64_t *)dsts))
        Py_RETURN_NONE;
    odml_move_prog *g = (odml_move_prog *)PyMem_Malloc(sizeof *g);
    odml_move_launch *L = (odml_move_launch *)PyMem_Malloc(sizeof *L * ODML_MOVE_PROG_MAX_PASSES);
    int nl;
    if (!g || !L) {
        PyErr_NoMemory();
        goto done;
    }
    if (odml_move_lower((int)lowering, c.xs, n_in, ((PyTupleObject *)args[2])->ob_item, PyTuple_GET_SIZE(args[2]), g)
            || g->n_out > PyTuple_GET_SIZE(qp) || (nl = cuda_launches(g, &c, dsts, args[5], L)) < 1) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *shapes = PyTuple_New(g->n_out), *steps = PyTuple_New(nl);
    for (int i = 0; shapes && !PyErr_Occurred() && i < g->n_out; i++)
        PyTuple_SET_ITEM(shapes, i, odml_ints_tuple(g->out_dims[i], g->out_rank[i]));
    for (int i = 0; steps && !PyErr_Occurred() && i < nl; i++)
        PyTuple_SET_ITEM(steps, i, Py_BuildValue("(sy#IIii)", L[i].name, (const char *)&L[i].p, L[i].size, L[i].grid,
                                                 L[i].smem, L[i].src, L[i].dst));
    if (shapes && steps && !PyErr_Occurred()) result = PyTuple_Pack(2, shapes, steps);
    Py_XDECREF(shapes);
    Py_XDECREF(steps);
done:
    PyMem_Free(g);
    PyMem_Free(L);
    return result;
}

/* torch_cpu_new on x as the accessors described it (in): lowered, the output from tapi->empty, the kernel run on the
 * tensors' memory, the entry stored under k. None (nothing run) where a lowering or entry declines or x changed while
 * the output was allocated (read again). */
static PyObject *torch_cpu_described(PyObject *x, const odml_torch_info *in, int lowering, PyObject *const *cargs,
                                     Py_ssize_t ncargs, const int64_t *c, Key *k, int64_t gen) {
    odml_move_input xi = {.n = in->ndim, .type = torch_type(in->dtype)};
    odml_new_plan pl;
    odml_torch_info now;
    uint64_t dst;
    if (xi.type < 1 || xi.n < 1 || xi.n > ODML_MAX_RANK) Py_RETURN_NONE;
    memcpy(xi.shape, in->sizes, sizeof(int64_t) * (size_t)xi.n);
    memcpy(xi.strides, in->strides, sizeof(int64_t) * (size_t)xi.n);
    PyObject *descr = odml_move_plain(lowering, &xi, cargs, ncargs, &pl) ? NULL
                      : (PyObject *)PyArray_DescrFromType(move_npy_type[xi.type]);
    Entry *e = descr ? tuned_entry(&pl, descr, c) : NULL;
    Py_XDECREF(descr);
    if (!e) return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    PyObject *out = tapi->empty(x, pl.out_dims, pl.out_rank, NULL, &dst), *result = NULL;
    if (!out) {
        result = allocation_failed();
    } else if (tapi->describe(x, &now) || now.data_ptr != in->data_ptr || now.ndim != in->ndim || now.dtype != in->dtype
               || memcmp(now.sizes, in->sizes, sizeof(int64_t) * (size_t)in->ndim)
               || memcmp(now.strides, in->strides, sizeof(int64_t) * (size_t)in->ndim)) {
        result = Py_NewRef(Py_None);                /* (changed meanwhile: the route reads it anew) */
    } else {
        char *dsts[1] = {(char *)(uintptr_t)dst};
        const char *srcs[1] = {(const char *)(uintptr_t)(in->data_ptr - (uint64_t)e->origin[0])};
        if (run_passes(e, dsts, srcs) != ODML_OK) result = Py_NewRef(Py_None);
        else if (!(enabled && (unsigned long long)gen == generation && store(k, e) < 0)) result = Py_NewRef(out);
    }
    Py_XDECREF(out);
    Py_DECREF(e);
    return result;
}

/* move_new for one of the first five on a plain PyTorch CPU tensor x = args[2] the accessors describe, recorded under
 * its NumPy view's key (torch_view_key); NULL, no exception set, where they do not describe it (new_shape takes it
 * through a NumPy view). */
static PyObject *torch_cpu_new(PyObject *const *args) {
    int64_t lowering, gen, c[5];
    Key k;
    odml_torch_info in;
    PyObject *x = args[2];
    if (!tapi || tapi->describe(x, &in) != 0 || in.device != -1) return NULL;
    if (plain_args(args, ".i.ti", &lowering, &gen) || read_conf(args[5], c) || in.dispatch_modes || in.wrapped
            || (in.requires_grad && in.grad_enabled)
            || torch_view_key(&k, args[0], ((PyTupleObject *)args[3])->ob_item, PyTuple_GET_SIZE(args[3]), &in) < 0) {
        if (PyErr_Occurred()) drop_error();
        Py_RETURN_NONE;
    }
    return torch_cpu_described(x, &in, (int)lowering, ((PyTupleObject *)args[3])->ob_item, PyTuple_GET_SIZE(args[3]),
                               c, &k, gen);
}

/* call_cache_move_new: new_shape, on CUDA only where the inputs are as the function takes them (one array or a list:
 * else the Python route raises the error naming it) */
static PyObject *move_new_route(PyObject *const *args, Py_ssize_t nargs) {
    int64_t lowering = 0;
    const int listed = PyList_CheckExact(args[2]) || PyTuple_CheckExact(args[2]);
    const int ok = odml_exact_i64(args[1], &lowering) == 0 && listed == !!(lowering & ODML_LOWER_SEQUENCE);
    if (ok && lowering & ODML_LOWER_PLAIN && numpy_ready && t_from_numpy
            && Py_TYPE(args[2]) == (PyTypeObject *)t_type) {
        PyObject *out = torch_cpu_new(args);
        if (out || PyErr_Occurred()) return with_deferred(out);
    }
    FamilyNew how;                               /* (its plan made by family_lower where it is used: not zeroed) */
    how.base = (CudaNew){family_lower, family_plan, 0};
    how.lowering = (int)lowering;
    return new_shape(args, nargs, 2, 6, ok ? &how.base : NULL, move_new);
}
#else
int64_t odml_move_dtype_type(PyObject *o) {
    (void)o;
    return 0;
}
#endif

GLUE_FUNCTION(call_cache_move_new, "op, lowering, x, args, generation, conf, cuda_conf=None", 6, 7,
              move_new_route(args, nargs))
GLUE_FUNCTION(cuda_move_steps, "lowering, x, args, data_ptrs, dst_ptrs, settings", 6, 6, cuda_move_steps(args))
GLUE_FUNCTION(move_lowering, "lowering, x, args, conf", 4, 4, move_lowering(args))
