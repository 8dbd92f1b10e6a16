/* The CPU's index-driven passes (index.c): their parameter block, mirrored by runtime/cpu/backend.py's IndexParams,
 * and the entry points of the call cache (runtime/native/calls_move.c) and the Python binding. */
#ifndef OPENDML_INDEX_H
#define OPENDML_INDEX_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

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

/* Run pass p, which odml_index_fits accepted for these ranges, from src into dst (idx[a]: axis a's index tensor);
 * *bad is set where a mode-0 index value lay outside its dimension. */
void odml_index_move(const idx_params* p, const char* src, char* dst, const char* const* idx, int* bad);
/* Whether pass p stays inside ranges of these lengths (in elements of each range's own type; idx_len[a]
 * the elements of axis a's index tensor) whatever the index values. */
int odml_index_fits(const idx_params* p, int64_t src_len, int64_t dst_len, const int64_t* idx_len);
/* NULL, or what is wrong with a pass's parameters (ninputs >= 0: each axis's slot below it). */
const char* odml_index_malformed(const idx_params* p, int64_t ninputs);
/* index_run_pass(params: bytes, src_addr, src_len, dst_addr, dst_len, index_addrs: tuple, index_lens: tuple): one
 * pass (Python), lengths in elements of each range's own type. */
PyObject* odml_py_index_run_pass(PyObject* self, PyObject* args);

#endif
