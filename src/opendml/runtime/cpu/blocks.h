/* The output-block cache's Python surface (blocks.c), for module.c. */
#ifndef OPENDML_CPU_BLOCKS_H
#define OPENDML_CPU_BLOCKS_H

#include <Python.h>

extern PyTypeObject odml_BlockType;
PyObject *odml_py_cache_limit(PyObject *self, PyObject *args);
PyObject *odml_py_cache_info(PyObject *self, PyObject *unused);

#endif /* OPENDML_CPU_BLOCKS_H */
