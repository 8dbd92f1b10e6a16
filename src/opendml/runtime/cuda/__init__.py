"""The CUDA backend: CuPy memory and opendml's own CUDA kernels (``kernels.cu``),
compiled at run time by NVRTC. CuPy is imported only when a CUDA device is asked
for. May import ``opendml.model`` and ``opendml.plan`` only."""
from .backend import CudaBackend, probe

__all__ = ["CudaBackend", "probe"]
