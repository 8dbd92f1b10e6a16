"""nvcc without a GPU: each ``instances_<file>.cu`` here instantiates the
kernel templates of src/opendml/runtime/cuda/<file>.cu for a spread of
arguments, so that plain nvcc compiles every kernel (tests/runtime)."""
from __future__ import annotations

import pathlib

from opendml.runtime.cuda import launch

HERE = pathlib.Path(__file__).parent


def instances(kernel_file: pathlib.Path) -> pathlib.Path:
    """The instantiations of ``kernel_file`` (one of launch.py's kernel files)."""
    return HERE / f"instances_{kernel_file.name}"


def includes(first: pathlib.Path | None = None) -> list[str]:
    """nvcc's -I options: ``first`` (a folder holding a changed copy of a
    kernel file), the kernels' folder, params.h's folder."""
    return [f"-I{d}" for d in ((first,) if first else ()) + (launch.HERE, launch.INCLUDE)]
