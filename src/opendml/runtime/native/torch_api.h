/* PyTorch's tensor accessors for the C call cache (calls.c), given by the C++ autograd node's library
 * (arrays/torch/node.cpp, built for the installed PyTorch) as a PyCapsule named ODML_TORCH_API_NAME, registered with
 * call_cache_torch_api. Without it calls.c reads the same facts through Python (tests/test_torch_api.py compares):
 * one C++ call instead of a dozen Python ones. Every function is called with the GIL held. */
#ifndef ODML_TORCH_API_H
#define ODML_TORCH_API_H

#include <Python.h>
#include <stdint.h>

#define ODML_TORCH_API_NAME "opendml.torch_api"
#define ODML_TORCH_API_VERSION 1
#define ODML_TORCH_API_RANK 8

typedef struct {
    PyObject *dtype;         /* borrowed: the torch.dtype singleton (x.dtype) */
    int64_t device;          /* x.get_device(): -1 on the CPU, the CUDA index; -2 on any other device */
    uint64_t data_ptr;       /* x.data_ptr() */
    int32_t ndim;
    int32_t requires_grad;   /* x.requires_grad */
    int32_t grad_enabled;    /* torch.is_grad_enabled() */
    int32_t dispatch_modes;  /* torch._C._len_torch_dispatch_stack() != 0 */
    int32_t wrapped;         /* 1 unless x's dispatch keys are a plain dense tensor's of its device (normal or
                              * inference): functorch wrappers, negative or conjugate bits, subclass modes...;
                              * also 1 for a tensor without storage, while a forward-AD level is open
                              * (its tangents must be seen) and while TorchScript traces (torch.jit.trace:
                              * it must record the operator) */
    int32_t pad_;
    int64_t sizes[ODML_TORCH_API_RANK], strides[ODML_TORCH_API_RANK];
} odml_torch_info;

typedef struct {
    int version;
    /* 0 with *info filled; -1, no exception set, where x is not a strided torch.Tensor of at most
     * ODML_TORCH_API_RANK concrete dimensions */
    int (*describe)(PyObject *x, odml_torch_info *info);
    /* x.new_empty(sizes, dtype=dtype) (contiguous; dtype NULL: x's): a new reference and its data pointer, or NULL
     * with the allocator's exception */
    PyObject *(*empty)(PyObject *x, const int64_t *sizes, int ndim, PyObject *dtype, uint64_t *data_ptr);
    /* CUDA device `device`'s current stream (torch._C._cuda_getCurrentRawStream): 0, or -1 with an exception */
    int (*current_stream)(int64_t device, uint64_t *stream);
    /* The current CUDA device (torch.cuda.current_device()), or -1 with an exception */
    int64_t (*current_device)(void);
} odml_torch_api;

#endif
