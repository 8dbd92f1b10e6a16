"""Build the optional compiled CPU kernels; everything else is in pyproject.toml.

The extension needs only a C compiler and Python's headers. Where it cannot be
built, installation goes on without it and the CPU backend runs the same plans
through NumPy (``opendml info`` says which is in use).

``OPENDML_SANITIZE=1`` builds it with AddressSanitizer and UBSan (CI's second
pass; run Python with the sanitizer runtime preloaded, see .ci/run).
"""
import os
import sys

from setuptools import Extension, setup

NATIVE = "src/opendml/runtime/cpu"
args = [] if sys.platform == "win32" else ["-O3", "-std=c99", "-pthread", "-Wall", "-Wno-unused-function"]
link = [] if sys.platform == "win32" else ["-pthread"]
if os.environ.get("OPENDML_SANITIZE") == "1":
    flags = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g", "-O1"]
    args, link = [a for a in args if a != "-O3"] + flags, link + flags

sources = sorted(f"{NATIVE}/{name}" for name in os.listdir(NATIVE) if name.endswith(".c"))
setup(ext_modules=[Extension("opendml.runtime.cpu._native", sources, include_dirs=["src/opendml/runtime"],
                             depends=[f"src/opendml/runtime/{h}" for h in ("params.h",)],
                             extra_compile_args=args, extra_link_args=link, optional=True)])
