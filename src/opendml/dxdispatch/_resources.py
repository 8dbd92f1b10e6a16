"""A model's resources: buffers and their initial values."""
from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import stat
import sys

import numpy as np

from ..device import Buffer
from ..model._checks import UINT32_MAX
from ..model.data_type import DataType
from ..model.errors import UnsupportedError
from ..model.tensor_desc import round_up_4
from ..jsonform import NpyError, npy_header, open_checked
from ._read import (_DATA_TYPES, ModelError, _array_values, _check_keys, _data_type, _model_path, _q, _scalar,
                    _short, _type_name, _uint)

_RESOURCE_FIELDS = ("type", "initialValues", "initialValuesDataType", "initialValuesOffsetInBytes", "sizeInBytes",
                    "resampleSize", "resampleMode")
_MIXED_TYPES = ("FLOAT32", "FLOAT64", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64")


@dataclasses.dataclass
class _Resource:
    name: str
    data_type: DataType              # UNKNOWN for a list initialiser of mixed types
    initial_bytes: int               # the initial values' length (what print shows)
    size: int                        # the buffer's size in bytes
    buffer: Buffer | None = None

    @property
    def element_size(self) -> int:
        return 1 if self.data_type == DataType.UNKNOWN else self.data_type.size

    @property
    def numpy_dtype(self) -> np.dtype:
        return np.dtype(np.uint8) if self.data_type == DataType.UNKNOWN else self.data_type.numpy_dtype


class _Budget:
    """Bytes the model's buffers may take (``max_bytes`` in all): buffers are taken from it, and initial values
    (written into their buffer piece by piece) checked against what is left before they are read."""

    def __init__(self, max_bytes: int):
        self.max_bytes, self.used = max_bytes, 0

    def check(self, nbytes: int, where: str, what: str) -> None:
        if self.used + nbytes > self.max_bytes:
            raise ModelError(f"{where}: {what} takes {nbytes} bytes; the model's resources may take "
                             f"{self.max_bytes} bytes in all ({self.used} taken before it; max_bytes / "
                             f"--max-bytes sets the limit)")

    def take(self, nbytes: int, where: str, what: str) -> None:
        self.check(nbytes, where, what)
        self.used += nbytes


#: The most bytes of initial values made (or read) at once: a resource is filled in pieces of this size, so
#: initialising it holds its buffer and one piece, never a second copy of the buffer.
CHUNK_BYTES = 1 << 22
#: The most entries of a model's list converted at once (each passes through Python objects into the buffer).
LIST_ITEMS = 1 << 16


class _Target:
    """Where a resource's initial values go: its buffer from byte ``base``."""

    def __init__(self, buffer: Buffer, base: int):
        self.buffer, self.base = buffer, base

    def write(self, offset: int, data: np.ndarray) -> None:
        """Bytes ``data`` at byte ``offset`` of the initial values."""
        self.buffer.write(data.reshape(-1).view(np.uint8), offset=self.base + offset)

    def elements(self, dtype: np.dtype, count: int):
        """The initial values' bytes as a writable 1-D array of ``count``
        elements of ``dtype``, in the buffer's own memory (a NumPy array on
        the CPU, a CuPy one on a GPU)."""
        storage = self.buffer._storage       # noqa: SLF001 - this package's own buffers
        return storage[self.base:self.base + count * dtype.itemsize].view(dtype)


def _pieces(count: int, itemsize: int):
    """``(start, stop)`` element ranges of at most CHUNK_BYTES each."""
    step = max(CHUNK_BYTES // itemsize, 1)
    for lo in range(0, count, step):
        yield lo, min(lo + step, count)


def _initial_values(name: str, obj: dict, dt: DataType | None, folder: str, budget: _Budget):
    """``(bytes of the initial values, data type, fill)``: a .npy file gives its own type; ``fill(target)`` writes the
    values into a ``_Target`` in pieces of at most CHUNK_BYTES (a list's values are converted piece by piece too)."""
    where = f"resource {_q(name)}"
    w = f"{where}: initialValues"
    iv = obj["initialValues"]
    if isinstance(iv, str):
        if iv == "deferred":
            raise UnsupportedError(f"{where}: initialValues \"deferred\" binds outputs of ONNX dispatchables, "
                                   f"which opendml does not run")
        raise ModelError(f"{where}: initialValues must be an array, an object or \"deferred\"; got {_short(iv)}")
    if isinstance(iv, list):
        if not iv:
            raise ModelError(f"{where}: initialValues must not be empty")
        if dt is None or dt == DataType.UNKNOWN:
            data = _mixed_values(iv, where, budget)
            return data.size, DataType.UNKNOWN, lambda target: target.write(0, data)
        budget.check(len(iv) * dt.size, where, "initialValues")
        step = min(LIST_ITEMS, max(CHUNK_BYTES // dt.size, 1))
        first = _array_values(iv[:step], dt, w)                    # the first piece checked before allocating

        def fill_list(target):
            for lo in range(0, len(iv), step):
                target.write(lo * dt.size, first if lo == 0 else _array_values(iv[lo:lo + step], dt, w, lo))
        return len(iv) * dt.size, dt, fill_list
    if not isinstance(iv, dict):
        raise ModelError(f"{where}: initialValues must be an array of numbers or an object; got {_type_name(iv)}")
    kinds = [k for k in ("value", "valueStart", "sourcePath") if k in iv]
    if len(kinds) != 1:
        raise ModelError(f"{where}: initialValues must hold exactly one of value (a constant), valueStart (a "
                         f"sequence) or sourcePath (a file); got {', '.join(kinds) or 'none of them'}")
    if kinds[0] == "sourcePath":
        _check_keys(iv, ("sourcePath",), w)
        return _file_values(iv["sourcePath"], dt, where, folder, budget)
    constant = kinds[0] == "value"
    if dt is None or dt == DataType.UNKNOWN:
        raise ModelError(f"{where}: initialValuesDataType is required (and not UNKNOWN) for a "
                         f"{'constant' if constant else 'sequence'} initialiser")
    _check_keys(iv, ("valueCount", "value") if constant else ("valueCount", "valueStart", "valueDelta"), w,
                ("valueCount",) if constant else ("valueCount", "valueDelta"))
    count = _uint(iv["valueCount"], f"{w}.valueCount", 1, UINT32_MAX)
    budget.check(count * dt.size, where, f"initialValues ({count} x {dt.name})")
    if constant:
        value = _scalar(iv["value"], dt, f"{w}.value")

        def fill_constant(target):
            piece = None
            for lo, hi in _pieces(count, dt.size):
                if piece is None or piece.size != hi - lo:
                    piece = np.full(hi - lo, value, dtype=dt.numpy_dtype)
                target.write(lo * dt.size, piece)
        return count * dt.size, dt, fill_constant
    pieces = _sequence(iv["valueStart"], iv["valueDelta"], count, dt, w)

    def fill_sequence(target):
        for lo, values in pieces():
            target.write(lo * dt.size, values)
    return count * dt.size, dt, fill_sequence


def _sequence(start, delta, count: int, dt: DataType, where: str):
    """``valueStart, valueStart + valueDelta, ...`` accumulated in the type as DxDispatch does (``value +=
    valueDelta``, floats rounded to the type at every step); an integer sequence leaving its type is refused before
    anything is made. Returns a function giving ``(first index, values)`` pieces of at most CHUNK_BYTES, each
    carrying on from the previous one's last value (the values of one accumulation over the whole)."""
    npdt = dt.numpy_dtype
    first, step = _scalar(start, dt, f"{where}.valueStart"), _scalar(delta, dt, f"{where}.valueDelta")
    if npdt.kind == "f":
        def floats():
            terms = out = None
            last = None
            for lo, hi in _pieces(count, dt.size):
                n = hi - lo
                if terms is None or terms.size != n:
                    terms, out = np.empty(n, dtype=npdt), np.empty(n, dtype=npdt)
                terms[...] = step
                with np.errstate(over="ignore", invalid="ignore"):
                    terms[0] = first if last is None else np.add(last, step, dtype=npdt)
                    np.add.accumulate(terms, dtype=npdt, out=out)
                bad = np.isfinite(first) & np.isfinite(step) & ~np.isfinite(out)
                if bad.any():
                    i = lo + int(np.argmax(bad))
                    raise ModelError(f"{where}: entry {i} of the sequence overflows {dt.name} (valueStart "
                                     f"{_short(start)}, valueDelta {_short(delta)})")
                last = out[-1].copy()
                yield lo, out
        return floats
    a, d = int(first), int(step)
    last = a + (count - 1) * d
    info = np.iinfo(npdt)
    if not info.min <= last <= info.max:
        raise ModelError(f"{where}: the sequence leaves {dt.name} [{info.min}, {info.max}]: valueStart + "
                         f"(valueCount - 1) * valueDelta = {a} + {count - 1} * {d} = {last}")
    # Every term lies between the first and the last, so 64-bit arithmetic (wrapping products) gives each exactly.
    wide = np.uint64 if npdt == np.uint64 else np.int64

    def integers():
        for lo, hi in _pieces(count, 8):
            with np.errstate(over="ignore"):
                yield lo, (wide(a) + np.arange(lo, hi, dtype=wide) * wide(d)).astype(npdt)
    return integers


def _mixed_values(items: list, where: str, budget: _Budget) -> np.ndarray:
    """A list initialiser (initialValuesDataType UNKNOWN): ``{"type", "value", "name"}`` objects packed without
    padding (at most 8 bytes each, made from an object of the model's text, which bounds them)."""
    budget.check(8 * len(items), where, "initialValues")
    parts = []
    for i, item in enumerate(items):
        w = f"{where}: initialValues[{i}]"
        if not isinstance(item, dict):
            raise ModelError(f"{w}: with initialValuesDataType UNKNOWN (or none) every entry must be an object "
                             f"{{\"type\", \"value\"}}; got {_type_name(item)} {_short(item)}")
        _check_keys(item, ("name", "type", "value"), w, ("type", "value"))
        t = _data_type(item["type"], f"{w}.type", unknown_ok=False)
        if t.name not in _MIXED_TYPES:
            raise ModelError(f"{w}.type: {t.name} is not supported in a list initialiser; expected one of "
                             f"{', '.join(_MIXED_TYPES)}")
        parts.append(_scalar(item["value"], t, f"{w}.value").reshape(1).view(np.uint8))
    return np.concatenate(parts)


#: NumPy dtypes a .npy initialiser may hold (bool is read as UINT8, as DxDispatch does).
_NPY_BOOL = np.dtype(bool)


def _file_values(source, dt: DataType | None, where: str, folder: str, budget: _Budget):
    """A file initialiser (a regular file): its header (a .npy file's) and size checked now, its bytes read in pieces
    by ``fill``."""
    w = f"{where}: initialValues.sourcePath"
    path = _model_path(source, folder, w)
    ext = os.path.splitext(path)[1].lower()
    if ext in (".png", ".jpg", ".jpeg"):
        raise UnsupportedError(f"{w}: image initialisers ({ext}) are not supported by opendml; convert the image "
                               f"to a .npy array")
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ModelError(f"{w}: {_short(source)} is not a regular file")
        size = info.st_size
        if ext == ".npy":
            with _reading(path, w, source) as f:
                header = _npy_header(f, size, dt, w, budget)
            return header[0], header[1], lambda target: _fill_npy(path, header[2], target, w)
        if dt is None or dt == DataType.UNKNOWN:
            raise ModelError(f"{where}: initialValuesDataType is required (and not UNKNOWN) for a raw file "
                             f"initialiser")
        if size == 0:
            raise ModelError(f"{w}: the file is empty; initialValues must not be empty")
        budget.check(size, where, f"the file {_short(source)}")
    except OSError as e:
        raise ModelError(f"{w}: cannot read {_short(source)}: {e.strerror or e}") from None

    def fill_raw(target):
        with _reading(path, w, source) as f:
            _copy_bytes(f, size, np.dtype(np.uint8), None, target, 0, w)
    return size, dt, fill_raw


@contextlib.contextmanager
def _reading(path: str, where: str, source):
    """``path`` opened to read, if it is a regular file (``jsonform.open_checked``:
    a FIFO without a writer cannot hold it up); its open and read errors
    ``ModelError``s naming the field."""
    def fail(reason, detail):
        raise ModelError(f"{where}: cannot read {_short(source)}: {detail}" if reason == "open" else
                         f"{where}: {_short(source)} is not a regular file") from None
    with open_checked(path, fail) as f:
        try:
            yield f
        except OSError as e:
            raise ModelError(f"{where}: cannot read {_short(source)}: {e.strerror or e}") from None


def _read_exactly(f, n: int, w: str) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise ModelError(f"{w}: the file ended early (it changed while the model was read)")
    return data


def _copy_bytes(f, count: int, dtype: np.dtype, native: np.dtype | None, target: _Target, at: int, w: str) -> None:
    """``count`` elements of ``dtype`` read from ``f`` to byte ``at`` of the
    target, converted to ``native`` (byte order) where given, in pieces."""
    for lo, hi in _pieces(count, dtype.itemsize):
        piece = np.frombuffer(_read_exactly(f, (hi - lo) * dtype.itemsize, w), dtype=dtype)
        if native is not None and native != dtype:
            piece = piece.astype(native)
        target.write(at + lo * dtype.itemsize, piece)


def _npy_header(f, size: int, dt: DataType | None, w: str, budget: _Budget):
    """A .npy file's header checked: ``(bytes of data, DataType, (numpy dtype
    as stored, native dtype, shape, fortran order, data offset))``. A header
    cut short or malformed is a ``ModelError``."""
    try:
        shape, fortran, dtype = npy_header(f, ((1, 0), (2, 0), (3, 0)))
    except NpyError as e:
        raise ModelError(f"{w}: cannot read the .npy header: {e}") from None
    if not isinstance(dtype, np.dtype) or dtype.hasobject or dtype.names or dtype.subdtype is not None:
        raise ModelError(f"{w}: the .npy array's dtype {dtype} has no DirectML data type")
    native = dtype.newbyteorder("=")
    file_type = DataType.UINT8 if native == _NPY_BOOL else next(
        (t for t in DataType if t.name in _DATA_TYPES[1:] and t.numpy_dtype == native), None)
    if file_type is None:
        raise ModelError(f"{w}: the .npy array's dtype {dtype} has no DirectML data type")
    if dt is not None and dt != DataType.UNKNOWN and dt != file_type:
        raise ModelError(f"{w}: the file holds {file_type.name} ({dtype}); initialValuesDataType says {dt.name}")
    count = math.prod(shape)
    nbytes = count * dtype.itemsize
    if nbytes == 0:
        raise ModelError(f"{w}: the .npy array is empty; initialValues must not be empty")
    left = size - f.tell()
    if left != nbytes:
        raise ModelError(f"{w}: the file holds {left} bytes of data; its header promises {nbytes} "
                         f"({list(shape)} of {dtype})")
    budget.check(nbytes, w, "the .npy array")
    out = native if native != _NPY_BOOL else np.dtype(np.uint8)
    return nbytes, file_type, (dtype, out, tuple(shape), fortran, f.tell())


def _fill_npy(path: str, header, target: _Target, w: str) -> None:
    """A .npy file's data into the target in pieces: C order as it lies, Fortran order in blocks contiguous in the
    file, each written through the transposed view of the target's elements."""
    dtype, out, shape, fortran, start = header
    stored = dtype if dtype != _NPY_BOOL else np.dtype(np.uint8)
    with _reading(path, w, path) as f:
        f.seek(start)
        count = math.prod(shape)
        if not fortran or len(shape) < 2:
            _copy_bytes(f, count, stored, out, target, 0, w)
            return
        rev = shape[::-1]                   # the file holds rev in C order; the array is its transpose
        view = target.elements(out, count).reshape(shape).T
        xp = sys.modules[type(view).__module__.split(".")[0]]
        limit = max(CHUNK_BYTES // dtype.itemsize, 1)
        k, trailing = len(rev) - 1, 1       # the block axis: trailing = prod(rev[k + 1:]) <= limit
        while k > 0 and trailing * rev[k] <= limit:
            trailing *= rev[k]
            k -= 1
        step = max(limit // trailing, 1)
        for outer in np.ndindex(*rev[:k]):
            for lo in range(0, rev[k], step):
                hi = min(lo + step, rev[k])
                block = np.frombuffer(_read_exactly(f, (hi - lo) * trailing * dtype.itemsize, w), dtype=stored)
                block = block.astype(out, copy=False).reshape((hi - lo,) + tuple(rev[k + 1:]))
                view[outer + (slice(lo, hi),)] = xp.asarray(block)


def _parse_resource(name: str, obj, folder: str, budget: _Budget):
    """``(resource, fill, offset)``: the resource checked (its buffer's size taken from the budget); ``fill(target)``
    writes its initial values at byte ``offset`` of the buffer."""
    where = f"resource {_q(name)}"
    _check_keys(obj, _RESOURCE_FIELDS, where, ("initialValues",))
    if obj.get("type", "buffer") != "buffer":
        raise UnsupportedError(f"{where}: type {_short(obj['type'])} is not supported; resources are buffers "
                               f"(as in DxDispatch)")
    if "resampleSize" in obj or "resampleMode" in obj:
        raise UnsupportedError(f"{where}: resampleSize and resampleMode apply to image initialisers, which "
                               f"opendml does not read")
    dt = None
    if "initialValuesDataType" in obj:
        dt = _data_type(obj["initialValuesDataType"], f"{where}: initialValuesDataType", unknown_ok=True)
    nbytes, dt, fill = _initial_values(name, obj, dt, folder, budget)
    offset = 0
    if "initialValuesOffsetInBytes" in obj:
        offset = _uint(obj["initialValuesOffsetInBytes"], f"{where}: initialValuesOffsetInBytes")
    if "sizeInBytes" in obj:
        size = _uint(obj["sizeInBytes"], f"{where}: sizeInBytes", 1)
        if nbytes + offset > size:
            raise ModelError(f"{where}: sizeInBytes {size} is too small for the initial values ({nbytes} "
                             f"bytes) at initialValuesOffsetInBytes {offset}")
    else:
        size = round_up_4(nbytes + offset)
    budget.take(size, where, f"the buffer (sizeInBytes {size})")
    return _Resource(name, dt, nbytes, size), fill, offset
