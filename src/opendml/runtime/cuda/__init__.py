"""The CUDA backend: CuPy memory and opendml's own CUDA kernels (``kernels.cu``, ``move.cu``, ``layout.cu``,
``index.cu``), compiled at run time by NVRTC; CuPy imported only when a CUDA device is asked for."""
from .backend import CudaBackend, probe

__all__ = ["CudaBackend", "probe"]
