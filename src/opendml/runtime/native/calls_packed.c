/* Inductor's direct kernel (call_cache_packed): a call the call cache runs in one C call, without an entry. */
#define NO_IMPORT_ARRAY
#include "calls.h"

/* call_cache_packed: runtime/calls.py's packed, what Inductor's wrapper calls instead of the operator, as the
 * operator's kernel does (arrays/torch/node.cpp, run_op): the split lists of one length, a tensor that neither
 * autograd nor a tracer must see (one that requires grad with grad mode on is the operator's Autograd kernel's to
 * record). Every call not served, a list of another length included, is fallback(x, packed), the operator itself. */
PyObject *odml_py_call_cache_packed(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6 || !PyTuple_Check(args[3]) || PyTuple_GET_SIZE(args[3]) > 4) {
        PyErr_SetString(PyExc_TypeError, "call_cache_packed(code, split, fallback, extra, x, packed) takes 6 "
                        "arguments, extra a tuple of at most 4");
        return NULL;
    }
    const Py_ssize_t split = PyLong_AsSsize_t(args[1]);
    if (split == -1 && PyErr_Occurred()) return NULL;
    if (split < 1 || split > 8) {
        PyErr_SetString(PyExc_ValueError, "call_cache_packed: split must be in [1, 8]");
        return NULL;
    }
    PyObject *x = args[4], *packed = args[5], *extra = args[3];
    if (enabled && table && numpy_ready && t_type && Py_TYPE(x) == (PyTypeObject *)t_type &&
        (PyList_CheckExact(packed) || PyTuple_CheckExact(packed))) {
        odml_torch_info in;
        int where = torch_plain_in(x, &in);
        if (PyErr_Occurred()) {                     /* (torch_plain_in's reads drop theirs; the operator answers) */
            drop_error();
            where = 0;
        }
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(packed), m = n / split;
        if ((where == 1 || where == 2) && n > 0 && n % split == 0) {
            PyObject *argv[2 + 8 + 4];
            Py_ssize_t count = 2;                   /* (2 + the lists made) */
            argv[0] = args[0];
            argv[1] = x;
            /* Every list allocated first (a finalizer run by an allocation may change `packed`), then the items
             * copied from packed as it is then, no Python code run in between; a length that changed meanwhile
             * leaves the call to the operator. */
            for (Py_ssize_t j = 0; j < split; j++) {
                PyObject *list = PyList_New(m);
                if (!list) break;
                argv[count++] = list;
            }
            const Py_ssize_t made = count - 2;
            PyObject *result = NULL;
            if (made == split && PySequence_Fast_GET_SIZE(packed) == n) {
                PyObject **items = PySequence_Fast_ITEMS(packed);
                for (Py_ssize_t j = 0; j < split; j++)
                    for (Py_ssize_t i = 0; i < m; i++) {
                        Py_INCREF(items[j * m + i]);
                        PyList_SET_ITEM(argv[2 + j], i, items[j * m + i]);
                    }
                for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(extra); i++) argv[count++] = PyTuple_GET_ITEM(extra, i);
#ifdef ODML_NUMPY
                result = with_deferred(torch_call(argv, count));
#else
                result = Py_NewRef(Py_None);
#endif
            } else if (made == split) {
                result = Py_NewRef(Py_None);        /* (packed changed under us: the operator answers) */
            }
            for (Py_ssize_t j = 0; j < made; j++) Py_DECREF(argv[2 + j]);
            if (!result) return NULL;               /* (an allocation failure: the operator's kernel raises it too) */
            if (result != Py_None) return result;
            Py_DECREF(result);
        }
    }
    PyObject *fargs[2] = {x, packed};
    return PyObject_Vectorcall(args[2], fargs, 2, NULL);
}
