"""Build the optional compiled CPU kernels; everything else is in pyproject.toml.

The extension needs only a C compiler and Python's headers. Where it cannot be
built, installation goes on without it and the CPU backend runs the same plans
through NumPy (``opendml info`` says which is in use).
"""
import sys

from setuptools import Extension, setup

args = [] if sys.platform == "win32" else ["-O3", "-std=c99", "-pthread"]
link = [] if sys.platform == "win32" else ["-pthread"]

setup(ext_modules=[Extension("opendml.backends._cpu_kernels", ["src/opendml/backends/_cpu_kernels.c"],
                             extra_compile_args=args, extra_link_args=link, optional=True)])
