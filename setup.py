"""Build the optional compiled CPU kernels; everything else is in pyproject.toml.

The extension needs a C compiler and Python's headers; with NumPy's headers
(a build requirement in pyproject.toml) it also serves repeated array-API calls
on NumPy arrays from C (runtime/native/calls.c, the call cache). Where it cannot be built,
installation goes on without it and the CPU backend runs the same plans
through NumPy (``opendml info`` says which is in use).

``OPENDML_SANITIZE=1`` builds it with AddressSanitizer and UBSan (CI's second
pass; run Python with the sanitizer runtime preloaded, see .ci/run), without
the -fwrapv of Python's CFLAGS so that signed overflow is reported.
"""
import os
import sys

from setuptools import Extension, setup

RUNTIME = "src/opendml/runtime"
# One extension, opendml.runtime.cpu._native, from two folders: runtime/cpu/ (the
# CPU kernels) and runtime/native/ (the glue: the module, the call cache, the C
# new-shape lowerings, CUDA launches from C). Its C files include "params.h" and
# "cpu/common.h" from the runtime folder.
CPU, GLUE = f"{RUNTIME}/cpu", f"{RUNTIME}/native"
# -ffp-contract=off: IDENTITY's x * scale + bias rounds twice, as NumPy computes it (move.c);
# -fno-trapping-math: no value changes, but CAST's clamping loops vectorise (convert.h);
# -fvisibility=hidden: what the C files share (the call cache's native/calls.h) stays inside the
# extension; only PyInit__native (PyMODINIT_FUNC) is exported
args = [] if sys.platform == "win32" else ["-O3", "-std=c99", "-pthread", "-Wall", "-Wno-unused-function",
                                          "-ffp-contract=off", "-fno-trapping-math", "-fvisibility=hidden"]
link = [] if sys.platform == "win32" else ["-pthread"]
if os.environ.get("OPENDML_SANITIZE") == "1":
    flags = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g", "-O1"]
    # -fno-wrapv: Python's own CFLAGS carry -fwrapv, under which signed overflow
    # is defined and UBSan would not check it.
    args, link = [a for a in args if a != "-O3"] + flags + ["-fno-wrapv"], link + flags

include = [RUNTIME]
macros = []
try:
    import numpy
except ImportError:             # the call cache then serves no NumPy arrays (native/calls.c)
    pass
else:
    include.append(numpy.get_include())
    macros.append(("ODML_NUMPY", "1"))

def files(ext):
    return sorted(f"{d}/{n}" for d in (CPU, f"{CPU}/indexed", GLUE) for n in os.listdir(d) if n.endswith(ext))


sources, headers = files(".c"), [f"{RUNTIME}/params.h"] + files(".h")
setup(ext_modules=[Extension("opendml.runtime.cpu._native", sources, include_dirs=include, define_macros=macros,
                             depends=headers,
                             libraries=[] if sys.platform == "win32" else ["dl"],  # dlopen of libcuda (native/cuda_launch.c)
                             extra_compile_args=args, extra_link_args=link, optional=True)])
