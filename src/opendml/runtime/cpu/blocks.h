/* The output-block cache's Python surface (blocks.c), for module.c. */
#ifndef OPENDML_CPU_BLOCKS_H
#define OPENDML_CPU_BLOCKS_H

#include <Python.h>

extern PyTypeObject odml_BlockType;
PyObject *odml_py_cache_limit(PyObject *self, PyObject *args);
PyObject *odml_py_cache_info(PyObject *self, PyObject *unused);

/* A new Block of `nbytes` (from the cache where one fits), its memory and
 * whether that memory is fresh (never touched); NULL with an exception set. */
PyObject *odml_block_new(Py_ssize_t nbytes, char **ptr, int *fresh);
/* The cache's limit in bytes: outputs up to this size may use blocks. */
Py_ssize_t odml_block_cache_max(void);

#endif /* OPENDML_CPU_BLOCKS_H */
