"""The CPU backend: plans run through opendml's compiled C kernels (built at install time; sources beside this file)
or NumPy strided views. May import ``opendml.model``, ``opendml.plan`` and ``opendml.runtime.config`` only."""
from .backend import WORDS, CpuBackend

__all__ = ["CpuBackend", "WORDS"]
