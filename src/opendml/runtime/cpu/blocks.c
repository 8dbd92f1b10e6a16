/* Output memory blocks with a bounded reuse cache: the Block type and the cache_limit / cache_info functions of
 * opendml.runtime.cpu._native, and the cache's tracemalloc domain.
 *
 * Block(nbytes) is writable memory for one array output. When the last array viewing it goes away, its pages go to a
 * small cache (at most `limit` bytes, oldest evicted first), and the next output of a similar size (at least the
 * request, at most 1/16 more) reuses them, already resident: a large fresh mapping costs a page fault and a kernel
 * zero-fill per page on first touch, on small machines about as long as the kernel that writes the output. The
 * cache's memory is in use by no array (tracemalloc traces blocks only while they back one); cache_info() reports it
 * and cache_limit(0) returns it to the system. Everything here runs with the GIL held. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <sys/mman.h>
#endif

#include "blocks.h"

#define CACHE_SLOTS 16
#define TRACE_DOMAIN 0x6F646D6Cu /* "odml" */

typedef struct {
    PyObject_HEAD
    char *ptr;
    Py_ssize_t size, cap;
    int fresh;
} Block;

static struct { char *ptr; Py_ssize_t cap; } cache_slot[CACHE_SLOTS];
static int cache_n;
static Py_ssize_t cache_bytes;
static Py_ssize_t cache_max = (Py_ssize_t)1 << 30;
static long long cache_hits, cache_misses;

static Py_ssize_t page_round(Py_ssize_t n) {
    const Py_ssize_t pg = 4096;
    return (n + pg - 1) / pg * pg;
}

static char *pages_get(Py_ssize_t cap) {
#ifndef _WIN32
    void *p = mmap(NULL, (size_t)cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    if (cap >= ((Py_ssize_t)4 << 20)) madvise(p, (size_t)cap, MADV_HUGEPAGE);
#endif
    return (char *)p;
#else
    return (char *)malloc((size_t)cap);
#endif
}

static void pages_put(char *p, Py_ssize_t cap) {
#ifndef _WIN32
    munmap(p, (size_t)cap);
#else
    free(p);
#endif
}

static void cache_drop(int i) {
    pages_put(cache_slot[i].ptr, cache_slot[i].cap);
    cache_bytes -= cache_slot[i].cap;
    memmove(&cache_slot[i], &cache_slot[i + 1], (size_t)(cache_n - i - 1) * sizeof cache_slot[0]);
    cache_n--;
}

static void cache_trim(Py_ssize_t room) { /* evict oldest until `room` more bytes fit */
    while (cache_n && (cache_bytes + room > cache_max || cache_n == CACHE_SLOTS)) cache_drop(0);
}

static PyObject *block_make(PyTypeObject *type, Py_ssize_t n) {
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "opendml.runtime.cpu._native.Block: nbytes must be >= 0, got %zd", n);
        return NULL;
    }
    if (n > PY_SSIZE_T_MAX - 4096) return PyErr_NoMemory();
    Py_ssize_t want = page_round(n > 0 ? n : 1);
    Block *b = (Block *)type->tp_alloc(type, 0);
    if (!b) return NULL;
    int best = -1;
    for (int i = 0; i < cache_n; i++)
        if (cache_slot[i].cap >= want && cache_slot[i].cap - want <= want / 16 &&
            (best < 0 || cache_slot[i].cap < cache_slot[best].cap))
            best = i;
    if (best >= 0) {
        b->ptr = cache_slot[best].ptr;
        b->cap = cache_slot[best].cap;
        cache_bytes -= b->cap;
        memmove(&cache_slot[best], &cache_slot[best + 1], (size_t)(cache_n - best - 1) * sizeof cache_slot[0]);
        cache_n--;
        b->fresh = 0;
        cache_hits++;
    } else {
        b->ptr = pages_get(want);
        if (!b->ptr) {            /* free what the cache holds and try once more */
            while (cache_n) cache_drop(0);
            b->ptr = pages_get(want);
        }
        if (!b->ptr) {
            Py_DECREF(b);
            return PyErr_NoMemory();
        }
        b->cap = want;
        b->fresh = 1;
        cache_misses++;
    }
    b->size = n;
    PyTraceMalloc_Track(TRACE_DOMAIN, (uintptr_t)b->ptr, (size_t)b->cap);
    return (PyObject *)b;
}

static PyObject *Block_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    Py_ssize_t n;
    static char *kwlist[] = {"nbytes", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "n", kwlist, &n)) return NULL;
    return block_make(type, n);
}

PyObject *odml_block_new(Py_ssize_t nbytes, char **ptr, int *fresh) {
    Block *b = (Block *)block_make(&odml_BlockType, nbytes);
    if (!b) return NULL;
    *ptr = b->ptr;
    *fresh = b->fresh;
    return (PyObject *)b;
}

Py_ssize_t odml_block_cache_max(void) { return cache_max; }

static void Block_dealloc(Block *b) {
    if (b->ptr) {
        PyTraceMalloc_Untrack(TRACE_DOMAIN, (uintptr_t)b->ptr);
        if (b->cap <= cache_max) {
            cache_trim(b->cap);
            cache_slot[cache_n].ptr = b->ptr;
            cache_slot[cache_n].cap = b->cap;
            cache_n++;
            cache_bytes += b->cap;
        } else {
            pages_put(b->ptr, b->cap);
        }
        b->ptr = NULL;
    }
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static int Block_getbuffer(Block *b, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)b, b->ptr, b->size, 0, flags);
}

static PyObject *Block_fresh(Block *b, void *closure) {
    (void)closure;
    return PyBool_FromLong(b->fresh);
}

static PyBufferProcs Block_as_buffer = {(getbufferproc)Block_getbuffer, NULL};
static PyGetSetDef Block_getset[] = {
    {"fresh", (getter)Block_fresh, NULL, "True if the pages are new (not yet touched), False if reused", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject odml_BlockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "opendml.runtime.cpu._native.Block",
    .tp_basicsize = sizeof(Block),
    .tp_dealloc = (destructor)Block_dealloc,
    .tp_as_buffer = &Block_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Block(nbytes): writable output memory, recycled through a bounded cache when released",
    .tp_new = Block_new,
    .tp_getset = Block_getset,
};

PyObject *odml_py_cache_limit(PyObject *self, PyObject *args) {
    PyObject *arg = Py_None;
    (void)self;
    if (!PyArg_ParseTuple(args, "|O", &arg)) return NULL;
    Py_ssize_t old = cache_max;
    if (arg != Py_None) {
        Py_ssize_t v = PyNumber_AsSsize_t(arg, PyExc_OverflowError);
        if (v == -1 && PyErr_Occurred()) return NULL;
        if (v < 0) {
            PyErr_Format(PyExc_ValueError, "opendml: the CPU output cache limit must be >= 0 bytes, got %zd", v);
            return NULL;
        }
        cache_max = v;
        while (cache_n && cache_bytes > cache_max) cache_drop(0);
    }
    return PyLong_FromSsize_t(old);
}

PyObject *odml_py_cache_info(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    return Py_BuildValue("{s:n,s:i,s:n,s:L,s:L}", "limit", cache_max, "blocks", cache_n, "bytes", cache_bytes,
                         "hits", cache_hits, "misses", cache_misses);
}

