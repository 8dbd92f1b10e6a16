"""What a model writes: ``print`` text, writeFile targets and every
resource as ``.npy`` (``--output-dir``)."""
from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Mapping

import numpy as np

from ..model._checks import display_text
from ..model.data_type import DataType
from ..model.tensor_desc import TensorDesc
from ._read import ModelError, _q

# -- printing ----------------------------------------------------------------------------

def _format_value(v, kind: str) -> str:
    if kind == "f":
        f = float(v)
        return "nan" if math.isnan(f) else f"{f:g}"
    return str(int(v))


#: Elements a print command formats at once (their text is written to the stream, then dropped): printing holds one
#: piece's text, never the whole.
PRINT_ELEMENTS = 1 << 16

#: Bytes read from a buffer at once to print it or write it to a file.
READ_BYTES = 1 << 22


def _resource_text(name: str, pieces, count: int, dtype: np.dtype, verbose: bool):
    """A print command's text in pieces (strings), from ``pieces``: ``(first
    index, values)`` arrays covering the ``count`` elements in order."""
    kind = dtype.kind
    if not verbose:
        yield f"Resource '{name}': "
        first = True
        for _, values in pieces:
            if values.size:
                text = ", ".join([_format_value(v, kind) for v in values.tolist()])
                yield text if first else ", " + text
                first = False
        return
    width = int(math.floor(math.log10(count))) + 1 if count else 1
    hexw = dtype.itemsize * 2
    yield f"Resource '{name}':\n"
    for lo, values in pieces:
        bits = values.view(f"u{dtype.itemsize}").tolist()
        yield "".join([f"[{i:>{width}}] {_format_value(v, kind)} (0x{b:>{hexw}X})\n"
                       for i, v, b in zip(range(lo, lo + len(bits)), values.tolist(), bits)])


def format_resource(name: str, values: np.ndarray, verbose: bool = False) -> str:
    """A ``print`` command's text as DxDispatch writes it: ``Resource 'NAME': 1, 2, 3`` (C++ stream formatting:
    floats with 6 significant digits, ``%g``); verbose: a ``[index] value (0xBITS)`` line per element. INT8 and UINT8
    print as numbers (DxDispatch's stream prints characters). (A model's ``print`` streams the same text piece by
    piece.)"""
    values = np.asarray(values).reshape(-1)
    if values.dtype.kind not in "biuf":
        raise TypeError(f"format_resource: values must be an array of numbers; got {values.dtype} elements")
    pieces = ((lo, values[lo:lo + PRINT_ELEMENTS]) for lo in range(0, values.size, PRINT_ELEMENTS))
    return "".join(_resource_text(name, pieces, values.size, values.dtype, verbose))


def host_bytes(buffer) -> np.ndarray | None:
    """A CPU buffer's bytes as a NumPy view of its own memory (no copy); None
    on other devices, whose bytes are read with ``Buffer.read``."""
    storage = buffer._storage                # noqa: SLF001 - this package's own buffers
    return storage if isinstance(storage, np.ndarray) else None


def buffer_pieces(buffer, nbytes: int, dtype: np.dtype, step_bytes: int = READ_BYTES):
    """``buffer``'s first ``nbytes`` (whole ``dtype`` elements) as ``(first index, elements)`` pieces of at most
    ``step_bytes``: views of a CPU buffer's memory, else read piece by piece."""
    host = host_bytes(buffer)
    step = max(step_bytes // dtype.itemsize, 1) * dtype.itemsize
    for lo in range(0, nbytes, step):
        n = min(step, nbytes - lo)
        raw = host[lo:lo + n] if host is not None else buffer.read(TensorDesc(DataType.UINT8, [n]), offset=lo)
        yield lo // dtype.itemsize, raw.view(dtype)


def print_resource(r, out, verbose: bool) -> None:
    """A print command: the resource's initial-value elements written to
    ``out`` piece by piece, as ``format_resource`` formats them, then a newline."""
    dtype = r.numpy_dtype
    count = r.initial_bytes // r.element_size
    pieces = buffer_pieces(r.buffer, count * dtype.itemsize, dtype, PRINT_ELEMENTS * dtype.itemsize)
    for text in _resource_text(display_text(r.name, out), pieces, count, dtype, verbose):
        out.write(text)
    out.write("\n")


def resource_array(r) -> np.ndarray:
    """The whole buffer as a 1-D array of the resource's type (trailing bytes
    short of one element dropped): a view of a CPU buffer's memory (no copy),
    else one host copy."""
    dt = r.numpy_dtype
    raw = host_bytes(r.buffer)
    if raw is None:
        raw = r.buffer.read()
    return raw[:len(raw) // dt.itemsize * dt.itemsize].view(dt)


class PendingWrites:
    """A run's writeFile commands: each writes its resource's bytes as it runs, piece by piece, to a hidden temporary
    file beside its target (a snapshot taking no memory); ``commit`` moves each onto its target after the last
    command; ``discard`` (on any failure) removes them and the folders made for them. No target holds a half-written
    file or is written before every command has run. Missing folders are made, as DxDispatch makes them."""

    def __init__(self):
        self.files: list[tuple[str, str, str]] = []      # (resource name, temporary file, target)
        self.folders: list[str] = []                     # made here, deepest last

    def _make_folders(self, folder: str) -> None:
        missing = []
        while folder and not os.path.isdir(folder):
            missing.append(folder)
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
        for f in reversed(missing):
            os.mkdir(f)
            self.folders.append(f)

    def add(self, r, path: str, as_npy: bool, shape) -> None:
        try:
            folder = os.path.dirname(path) or "."
            self._make_folders(folder)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".opendml-", suffix=".tmp")
            self.files.append((r.name, tmp, path))
            with os.fdopen(fd, "wb") as f:
                dtype = r.numpy_dtype if as_npy else np.dtype(np.uint8)
                nbytes = r.size // dtype.itemsize * dtype.itemsize
                if as_npy:
                    _npy_header(f, dtype, tuple(shape) if shape is not None else (nbytes // dtype.itemsize,))
                for _, piece in buffer_pieces(r.buffer, nbytes, np.dtype(np.uint8)):
                    f.write(piece.data)
        except OSError as e:
            raise ModelError(f"writeFile of resource {_q(r.name)}: cannot write {path}: {e.strerror or e}") from None

    def commit(self, out) -> None:
        for name, tmp, path in self.files:
            try:
                os.replace(tmp, path)
            except OSError as e:
                raise ModelError(f"writeFile of resource {_q(name)}: cannot write {path}: {e.strerror or e}"
                                 ) from None
            print(f"Resource '{display_text(name, out)}' written to '{display_text(path, out)}'", file=out)
        self.files, self.folders = [], []

    def discard(self) -> None:
        for _, tmp, _ in self.files:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        for folder in reversed(self.folders):
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        self.files, self.folders = [], []


def _npy_header(f, dtype: np.dtype, shape: tuple) -> None:
    """A .npy header (version 1.0, or 2.0 where the header needs it) for a
    C-order little-endian array."""
    header = {"descr": np.lib.format.dtype_to_descr(dtype.newbyteorder("<")), "fortran_order": False,
              "shape": shape}
    try:
        np.lib.format.write_array_header_1_0(f, header)
    except ValueError:
        np.lib.format.write_array_header_2_0(f, header)


# -- writing every resource -----------------------------------------------------------------

def _file_name_problem(name: str) -> str | None:
    if not name or name in (".", "..") or len(name) > 200:
        return "is empty, '.', '..' or longer than 200 characters"
    try:
        os.fsencode(name)
    except UnicodeError:
        return "cannot be encoded for the file system"
    bad = [c for c in name if c in "/\\\0" or ord(c) < 32]
    if bad:
        return f"holds {json.dumps(bad[0])}, which a file name cannot"
    return None


def check_output_dir(directory: str | os.PathLike, names) -> str:
    """Check before a model runs that every resource can be written as ``DIRECTORY/NAME.npy``: the folder or its
    parent exists, the existing one is writable (a temporary folder is made in it and removed), every name makes a
    file name. Returns the folder's absolute path."""
    if not isinstance(directory, (str, os.PathLike)):
        raise TypeError(f"the output folder must be a str or os.PathLike; got {type(directory).__name__}")
    if not os.fspath(directory):            # (abspath would make it the current folder: an unset shell variable)
        raise ModelError("--output-dir: must name a folder; got an empty path")
    directory = os.path.abspath(os.fspath(directory))
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise ModelError(f"--output-dir {directory}: exists and is not a folder")
    fresh = not os.path.isdir(directory)
    if fresh and not os.path.isdir(os.path.dirname(directory)):
        raise ModelError(f"--output-dir {directory}: neither the folder nor its parent exists")
    for name in names:
        problem = _file_name_problem(name)
        if problem:
            raise ModelError(f"resource {_q(name)}: the name {problem}, so --output-dir cannot write it as NAME.npy")
    where = os.path.dirname(directory) if fresh else directory
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".opendml-dispatch-", dir=where))
    except OSError as e:
        raise ModelError(f"--output-dir {directory}: cannot write in {where}: {e.strerror or e}") from None
    return directory


def write_resources(results: dict[str, np.ndarray], directory: str | os.PathLike) -> list[str]:
    """Write every array of ``results`` as ``DIRECTORY/NAME.npy``, all or none: into a temporary folder first, then
    moved (a new ``DIRECTORY`` is the temporary folder renamed). Returns the paths."""
    if not isinstance(results, Mapping):
        raise TypeError(f"write_resources: results must be a mapping of names to arrays; got "
                        f"{type(results).__name__}")
    directory = check_output_dir(directory, results)
    fresh = not os.path.isdir(directory)
    tmp = None
    try:
        tmp = tempfile.mkdtemp(prefix=".opendml-dispatch-", dir=os.path.dirname(directory) if fresh else directory)
        for name, values in results.items():
            with open(os.path.join(tmp, name + ".npy"), "wb") as f:
                np.save(f, values, allow_pickle=False)
        if fresh:
            os.rename(tmp, directory)
        else:
            for name in results:
                os.replace(os.path.join(tmp, name + ".npy"), os.path.join(directory, name + ".npy"))
            os.rmdir(tmp)
    except OSError as e:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise ModelError(f"--output-dir {directory}: cannot write: {e.strerror or e}") from None
    return [os.path.join(directory, name + ".npy") for name in results]
