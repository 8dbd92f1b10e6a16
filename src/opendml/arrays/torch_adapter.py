"""PyTorch tensors: CPU tensors share memory with NumPy and run on the CPU
backend; CUDA tensors are viewed as CuPy arrays (DLPack) and run on the CUDA
backend of the tensor's device. The result is a new tensor on the same device."""
from __future__ import annotations

import numpy as np

from ..model.errors import UnsupportedError
from . import numpy_adapter
from .planner import OpCall


def run(x, call: OpCall):
    import torch
    if x.requires_grad and torch.is_grad_enabled():
        raise UnsupportedError(f"{call.name}: the input requires grad, and gradients through opendml need "
                               f"opendml.torch's operators; call x.detach() to run without a gradient")
    x = x.detach()
    if x.device.type == "cpu":
        return torch.from_numpy(numpy_adapter.run(x.numpy(), call))
    if x.device.type == "cuda":
        import cupy
        from . import cupy_adapter
        with cupy.cuda.Device(x.device.index or 0):
            return torch.from_dlpack(cupy_adapter.run(cupy.from_dlpack(x), call))
    raise UnsupportedError(f"PyTorch tensors on {x.device} are not supported; use cpu or cuda")
