"""The DirectML flow: a device, operators created (validated) and compiled,
buffers, a binding table per compiled operator, and execution.

    device = Device("cpu", feature_level="6_4")
    compiled = device.compile_operator(device.create_operator(desc))
    table = device.create_binding_table(compiled)
    table.bind_inputs([BufferBinding(in_buf, 0, in_buf.size_in_bytes)])
    table.bind_outputs([BufferBinding(out_buf, 0, out_buf.size_in_bytes)])
    device.execute(compiled, table)
    out_buf.read(desc.output_tensor)

DML_BUFFER_BINDING's rules are ``BufferBinding``'s and ``BindingTable``'s.
"""
from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence, Set

import numpy as np
from numpy.typing import ArrayLike
from numpy.lib.stride_tricks import as_strided

from .runtime import alloc, get_backend
from .ops import OperatorDesc
from .model._checks import UINT64_MAX, _short, as_int
from .model.data_type import DataType
from .model.errors import BindingError, ValidationError
from .model.feature_level import FeatureLevel
from .model.tensor_desc import TensorDesc, TensorFlags, round_up_4

#: A buffer larger than this is refused before anything is allocated.
MAX_BUFFER_BYTES = 2**46

#: ``casting=`` of ``Buffer.write`` and ``Device.upload`` (NumPy's names).
CASTING = ("no", "equiv", "safe", "same_kind", "unsafe")


class Buffer:
    """A zero-filled byte buffer of ``size_in_bytes`` on ``device`` (DirectML's committed resource), made by
    ``Device.create_buffer`` or ``Device.upload``; bind byte ranges of it with ``BufferBinding``. Made directly, it
    checks its arguments as ``create_buffer`` does (``TypeError`` for a device that is none)."""

    def __init__(self, device: "Device", size_in_bytes: int):
        if not isinstance(device, Device):
            raise TypeError(f"Buffer: device must be an opendml Device; got {type(device).__name__}")
        size = _buffer_size(size_in_bytes, "Buffer")
        try:
            self._storage = device.backend.allocate(size)
        except MemoryError:
            raise alloc.AllocationError(f"Buffer: could not allocate {size} bytes on {device.kind}") from None
        self.device, self.size_in_bytes = device, size

    def __repr__(self) -> str:
        return f"Buffer({self.device.kind!r}, size_in_bytes={self.size_in_bytes})"

    def write(self, array: ArrayLike, tensor: TensorDesc | None = None, offset: int = 0, *, casting: str = "safe") -> None:
        """Write ``array``'s elements at byte ``offset``: the tensor's elements only (bytes between them keep their
        values); where a stride of 0 makes elements share memory, the first along that dimension is stored. Where other
        strides make elements overlap (sizes [3, 3], strides [1, 2]), which of them is stored is unspecified (NumPy's
        assignment order): give an array whose overlapping elements agree.

        Parameters
        ----------
        array : array_like
            Numbers (a NumPy array or nested lists); with ``tensor``, of the
            tensor's sizes.
        tensor : TensorDesc, optional
            The elements' sizes, strides and data type (converted to it);
            None writes the packed bytes (little-endian).
        offset : int, default 0
        casting : {"no", "equiv", "safe", "same_kind", "unsafe"}, default "safe"
            The conversions allowed: ``"no"``, ``"equiv"`` and ``"same_kind"`` are NumPy's dtype rules; ``"safe"``
            checks values instead, each to survive the conversion (to an integer type: integral and in range; to a float
            type: no finite value overflowing; rounding allowed); ``"unsafe"`` converts as ``ndarray.astype`` does.

        Raises
        ------
        ValidationError
            If a value does not survive the conversion, the shape is not the tensor's sizes, ``casting`` is unknown, the
            array is masked, ragged or not numeric, or, without ``tensor``, its dtype has no DirectML data type (bool,
            long double).
        BindingError
            If the bytes written would not lie inside the buffer.
        TypeError
            If ``tensor`` is not a ``TensorDesc``, or ``array`` is None, a
            string or a mapping.
        """
        w = "Buffer.write"
        offset = as_int(offset, "offset", where=w)
        _check_tensor_arg(tensor, w, casting)
        self._write(host_array(array, w), tensor, offset, casting, w)

    def _write(self, host: np.ndarray, tensor: TensorDesc | None, offset: int, casting: str, w: str) -> None:
        if tensor is None:
            _check_packed_type(host, w)
            if host.dtype.byteorder == ">" or (host.dtype.byteorder == "=" and not np.little_endian):
                host = host.astype(host.dtype.newbyteorder("<"))
            data = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
            self._check_range(offset, data.nbytes, w)
            self.device.backend.write_bytes(self._storage, offset, data)
            return
        self._check_range(offset, tensor.min_size_in_bytes, w)          # the bytes the elements span, as read's
        if host.shape != tensor.sizes:
            raise ValidationError(f"{w}: array shape {host.shape} must equal the tensor's Sizes {tensor.sizes}")
        # Dimensions of stride 0 hold one element in memory: keep index 0 only.
        keep = tuple(slice(0, 1) if t == 0 and n > 1 else slice(None)
                     for n, t in zip(tensor.sizes, tensor.element_strides))
        host = host[keep]
        values = cast_values(host, tensor.data_type, casting, w)
        with self._elements(offset, tensor, write=True) as view:
            view[keep][...] = values

    def read(self, tensor: TensorDesc | None = None, offset: int = 0) -> np.ndarray:
        """A new packed NumPy array of the elements ``tensor`` lays out at byte ``offset`` (costing what the elements
        do), or of every byte of the buffer (``uint8``) without ``tensor``; on CUDA, after the work queued on the
        buffer.

        Raises
        ------
        BindingError
            If the tensor's bytes would not lie inside the buffer.
        ValidationError
            If ``offset`` is not an integer, or not 0 where ``tensor`` is None.
        TypeError
            If ``tensor`` is not a ``TensorDesc``.
        """
        w = "Buffer.read"
        offset = as_int(offset, "offset", where=w)
        _check_tensor_arg(tensor, w)
        if tensor is None and offset != 0:
            raise ValidationError(f"{w}: offset must be 0 without a tensor (every byte of the buffer is read); "
                                  f"got {offset}")
        self.device.backend.synchronize()
        if tensor is None:
            return alloc.output(w, (self.size_in_bytes,), np.uint8, lambda *_: self.device.backend.read_bytes(
                self._storage, 0, self.size_in_bytes))
        self._check_range(offset, tensor.min_size_in_bytes, w)
        with self._elements(offset, tensor, write=False) as view:
            # a new packed array of every element (a stride of 0 repeats one)
            return alloc.output(w, view.shape, view.dtype, lambda *_: np.array(view))

    @contextlib.contextmanager
    def _elements(self, offset: int, tensor: TensorDesc, write: bool):
        """The tensor's elements as a NumPy view of the storage itself on the CPU, else of a host copy of their byte
        span (written back on a clean exit where ``write``)."""
        span, storage = tensor.min_size_in_bytes, self._storage      # every element lies in [0, span)
        if isinstance(storage, np.ndarray) and storage.dtype == np.uint8 and storage.ndim == 1:
            yield host_view(storage[offset:offset + span], tensor)    # CPU: in place
            return
        raw = self.device.backend.read_bytes(storage, offset, span)
        yield host_view(raw, tensor)
        if write:
            self.device.backend.write_bytes(storage, offset, raw)

    def _check_range(self, offset: int, nbytes: int, where: str) -> None:
        if offset < 0 or offset + nbytes > self.size_in_bytes:
            raise BindingError(f"{where}: bytes [{offset}, {offset + nbytes}) must lie inside the buffer "
                               f"of {self.size_in_bytes} bytes")


def _buffer_size(size_in_bytes, where: str) -> int:
    """A buffer's size: an integer in [1, MAX_BUFFER_BYTES], else ``ValidationError`` naming ``where``."""
    size = as_int(size_in_bytes, "size_in_bytes", where=where)
    if not 1 <= size <= MAX_BUFFER_BYTES:
        raise ValidationError(f"{where}: size_in_bytes must be in [1, {MAX_BUFFER_BYTES}]; got {size}")
    return size


def _fits_a_buffer(t: TensorDesc, what: str) -> int:
    """``t``'s TotalTensorSizeInBytes, which a buffer made for it takes, checked against the largest buffer where the
    caller makes one (``what`` names the tensor: create_buffer's message would name neither it nor the call)."""
    total = t.total_tensor_size_in_bytes
    if total > MAX_BUFFER_BYTES:
        raise ValidationError(f"{what} TotalTensorSizeInBytes must be at most {MAX_BUFFER_BYTES} (the largest "
                              f"buffer); got {total}")
    return total


def _check_tensor_arg(tensor, where: str, casting: str = "safe") -> None:
    if tensor is not None and not isinstance(tensor, TensorDesc):
        raise TypeError(f"{where}: tensor must be a TensorDesc or None; got {type(tensor).__name__}")
    if not isinstance(casting, str) or casting not in CASTING:
        raise ValidationError(f"{where}: casting must be one of {', '.join(repr(c) for c in CASTING)}; "
                              f"got {_short(casting)}")


def _check_packed_type(host: np.ndarray, where: str) -> None:
    """Packed bytes (``Buffer.write`` and ``upload`` without a tensor) are those of a DirectML data type: a long double
    (whose padding holds whatever memory did) or a bool has none."""
    if host.dtype.kind not in "iuf" or host.dtype.itemsize not in (1, 2, 4, 8):
        raise ValidationError(f"{where}: unsupported array dtype {host.dtype} (no DirectML data type); pass a tensor "
                              f"to convert it")
    DataType.from_numpy(host.dtype.newbyteorder("="))


def host_array(array, where: str) -> np.ndarray:
    """``array`` as a NumPy array of booleans, integers or floats; anything else (None, strings, mappings, sets,
    masked arrays, ragged or nested objects, complex numbers) refused, the message naming ``where``."""
    if array is None or isinstance(array, (str, bytes, bytearray, Mapping, Set)):
        raise TypeError(f"{where}: array must be an array of numbers (a NumPy array or nested lists); "
                        f"got {type(array).__name__}")
    if isinstance(array, np.ma.MaskedArray):
        raise ValidationError(f"{where}: masked arrays are not supported (the mask would be dropped); "
                              f"pass array.filled(value) or array.data explicitly")
    try:
        host = np.asarray(array)
    except Exception as e:  # ragged lists, objects refusing conversion
        detail = " ".join(str(e).split())[:200]
        raise ValidationError(f"{where}: array must be a rectangular array of numbers (NumPy cannot convert "
                              f"this {type(array).__name__}: {type(e).__name__}: {detail})") from None
    if host.dtype.kind not in "biuf":
        raise ValidationError(f"{where}: array must hold booleans, integers or floats; got dtype {host.dtype}")
    return host


def cast_values(host: np.ndarray, data_type: DataType, casting: str, where: str) -> np.ndarray:
    """``host`` converted to ``data_type``'s NumPy dtype under ``casting``
    (see ``Buffer.write``)."""
    dt = data_type.numpy_dtype
    if host.dtype == dt:
        return host
    if casting in ("no", "equiv", "same_kind"):
        if not np.can_cast(host.dtype, dt, casting):
            raise ValidationError(f"{where}: cannot write an array of dtype {host.dtype} into a tensor of DataType "
                                  f"{data_type.name} under casting={casting!r}")
    elif casting == "safe":
        bad = _lossy(host, dt)
        if bad is not None and bad.any():
            index = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape))
            value = host[index].item()
            if dt.kind in "iu":
                info = np.iinfo(dt)
                rule = f"an integer in [{info.min}, {info.max}]"
            else:
                rule = f"a value of magnitude <= {float(np.finfo(dt).max):g} (or inf, nan)"
            raise ValidationError(
                f"{where}: value {value!r} at index {list(index)} does not survive the conversion from "
                f"{host.dtype} to {data_type.name}: it must be {rule}; pass casting='unsafe' to convert anyway")
    with np.errstate(all="ignore"):
        return host.astype(dt)


def _lossy(host: np.ndarray, dt: np.dtype) -> np.ndarray | None:
    """Where a value of ``host`` does not survive conversion to ``dt`` (None:
    the dtypes guarantee every value survives)."""
    src = host.dtype
    if np.can_cast(src, dt, "safe") or (src.kind == "f" and dt.kind == "f" and dt.itemsize >= src.itemsize):
        return None
    with np.errstate(all="ignore"):
        if dt.kind in "iu":
            info = np.iinfo(dt)
            if src.kind == "f":
                x = host.astype(np.float64)
                # 2**bits (or 2**(bits-1)) is exact in float64: compare below it.
                return ~(np.isfinite(x) & (x == np.trunc(x)) & (x >= float(info.min)) & (x < float(info.max) + 1.0))
            if src.kind == "u" and info.min < 0:
                return host > info.max
            if src.kind == "i" and dt.kind == "u":
                return (host < 0) | (host.astype(np.uint64) > info.max)
            return (host < info.min) | (host > info.max)
        converted = host.astype(dt)
        if src.kind == "f":
            return np.isfinite(host) & ~np.isfinite(converted)
        return ~np.isfinite(converted)                       # integers overflowing float16


def host_view(raw: np.ndarray, tensor: TensorDesc) -> np.ndarray:
    """The tensor's elements as a (possibly aliasing) view of host bytes."""
    dt = tensor.data_type.numpy_dtype
    count = raw.nbytes // dt.itemsize
    flat = raw[:count * dt.itemsize].view(dt)
    return as_strided(flat, tensor.sizes, tuple(t * dt.itemsize for t in tensor.element_strides))


@dataclasses.dataclass(frozen=True)
class BufferBinding:
    """``DML_BUFFER_BINDING``: a byte range of a buffer for one tensor of a compiled operator, checked against it by
    ``BindingTable.bind_inputs`` or ``bind_outputs``.

    Parameters
    ----------
    buffer : Buffer
    offset : int, default 0
        A multiple of 16, or of the tensor's ``guaranteed_base_offset_alignment`` when larger.
    size_in_bytes : int, optional
        At least the tensor's ``total_tensor_size_in_bytes``; None (the default): the rest of the buffer.

    Raises
    ------
    BindingError
        If ``buffer`` is not a ``Buffer``, ``offset`` or ``size_in_bytes`` not an integer in [0, 2**64 - 1], or
        ``offset`` past the buffer's end where ``size_in_bytes`` is None.
    """
    buffer: Buffer
    offset: int = 0
    size_in_bytes: int | None = None

    def __post_init__(self):
        if not isinstance(self.buffer, Buffer):
            raise BindingError(f"BufferBinding: Buffer must be an opendml Buffer; got {type(self.buffer).__name__}")
        object.__setattr__(self, "offset", _binding_int(self.offset, "Offset"))
        if self.size_in_bytes is None and self.offset > self.buffer.size_in_bytes:
            raise BindingError(f"BufferBinding: Offset must be <= the buffer's {self.buffer.size_in_bytes} bytes "
                               f"where SizeInBytes is left out (the rest of the buffer); got {self.offset}")
        size = self.buffer.size_in_bytes - self.offset if self.size_in_bytes is None else self.size_in_bytes
        object.__setattr__(self, "size_in_bytes", _binding_int(size, "SizeInBytes"))

    @property
    def end(self) -> int:
        """The first byte after the range."""
        return self.offset + self.size_in_bytes


def _binding_int(value, field) -> int:
    try:
        v = as_int(value, field, where="BufferBinding")
    except ValidationError as e:
        raise BindingError(str(e)) from None
    if not 0 <= v <= UINT64_MAX:
        raise BindingError(f"BufferBinding: {field} must be in [0, {UINT64_MAX}]; got {v}")
    return v


class Operator:
    """A validated operator (``IDMLOperator``) of description ``desc``, made by
    ``device`` (``Device.create_operator``); compile it with ``Device.compile_operator``. Made directly, it validates
    ``desc`` at the device's feature level as ``create_operator`` does."""

    def __init__(self, device: "Device", desc: OperatorDesc):
        if not isinstance(device, Device):
            raise TypeError(f"Operator: device must be an opendml Device; got {type(device).__name__}")
        if not isinstance(desc, OperatorDesc):
            raise ValidationError(f"Operator: expected an operator description; got {type(desc).__name__}")
        desc.validate(device.feature_level)
        self.device, self.desc = device, desc

    def __repr__(self) -> str:
        return f"Operator({self.desc.OPERATOR}, device={self.device.kind!r})"


class CompiledOperator:
    """A compiled operator (``IDMLCompiledOperator``) of ``operator`` (and its ``desc``) for ``device``: its plan, to
    bind in a ``BindingTable`` and execute from any number of threads."""

    def __init__(self, device: "Device", operator: Operator):
        if not isinstance(operator, Operator) or operator.device is not device:
            raise ValidationError("CompiledOperator: expected an Operator created by this device")
        self.device, self.operator, self.desc = device, operator, operator.desc
        self.plan = self.desc.lower()
        self._owned: list = [None] * len(self.desc.inputs)  # snapshots of OWNED_BY_DML inputs

    @property
    def input_tensors(self) -> tuple[TensorDesc, ...]:
        """Every input tensor, in slot order (JOIN: each of InputTensors); ``output_tensors`` likewise."""
        return self.desc.inputs

    @property
    def output_tensors(self) -> tuple[TensorDesc, ...]:
        return self.desc.outputs

    def __repr__(self) -> str:
        return f"CompiledOperator({self.desc.OPERATOR}, device={self.device.kind!r})"


class BindingTable:
    """Bindings of one compiled operator's inputs and outputs.

    A table may be executed from several threads at once. Binding is atomic: a failed bind keeps the previous
    bindings, and an execution alongside a bind uses the old or the new bindings, never a mix."""

    def __init__(self, compiled: CompiledOperator):
        if not isinstance(compiled, CompiledOperator):
            raise BindingError(f"BindingTable: expected a CompiledOperator; got {type(compiled).__name__}")
        self.compiled = compiled
        self._inputs: list | None = None
        self._outputs: list | None = None
        self._executor = None
        self._lock = threading.Lock()

    def bind_inputs(self, bindings: Sequence[BufferBinding | None] | BufferBinding | None) -> None:
        """Bind the operator's inputs: a ``BufferBinding`` (or a sequence of them) per input tensor, in order, ``None``
        for an ``OWNED_BY_DML`` input (bound at initialization instead).

        Raises
        ------
        BindingError
            If the count is not the operator's inputs', an offset is not aligned, a range leaves its buffer or is
            smaller than its tensor, a buffer belongs to another device, an owned input is bound here or a plain one is
            None, or an input overlaps a bound output. The previous bindings are kept.
        """
        inputs = self._check("input", bindings, self.compiled.input_tensors)
        with self._lock:
            self._check_overlap(inputs, self._outputs)
            self._inputs, self._executor = inputs, None

    def bind_outputs(self, bindings: Sequence[BufferBinding] | BufferBinding) -> None:
        """Bind the operator's outputs as ``bind_inputs`` binds inputs (``BindingError`` as there, and if outputs
        overlap each other or an input: these operators do not run in place)."""
        outputs = self._check("output", bindings, self.compiled.output_tensors)
        with self._lock:
            self._check_overlap(self._inputs, outputs)
            self._outputs, self._executor = outputs, None

    def _check(self, kind, bindings, tensors):
        op = self.compiled.desc.OPERATOR
        bindings = _binding_list(op, kind, bindings)
        if len(bindings) != len(tensors):
            raise BindingError(f"{op}: the number of {kind} bindings must equal the operator's {kind} "
                               f"tensor count {len(tensors)}; got {len(bindings)}")
        for i, (b, t) in enumerate(zip(bindings, tensors)):
            owned = kind == "input" and bool(t.flags & TensorFlags.OWNED_BY_DML)
            if b is None:
                if owned:
                    continue
                raise BindingError(f"{op}: {kind} {i} must be bound to a BufferBinding; got None")
            if owned:
                raise BindingError(f"{op}: input {i} is OWNED_BY_DML: bind its data once with "
                                   f"Device.initialize_operator and bind None at execution")
            check_binding(op, f"{kind} {i}", b, t, self.compiled.device)
        return bindings

    def _check_overlap(self, inputs, outputs) -> None:
        op = self.compiled.desc.OPERATOR
        ranges = [("input", i, b) for i, b in enumerate(inputs or []) if b is not None]
        ranges += [("output", i, b) for i, b in enumerate(outputs or [])]
        if not _any_overlap(ranges, len(ranges)):
            return
        # The pair named is the first (x, y) in order, found without a pairwise search (quadratic: a JOIN or
        # SPLIT of 10^5 tensors): x + 1 is the fewest leading ranges that one of an overlapping pair is among.
        fewest, most = 1, len(ranges)
        while fewest < most:
            mid = (fewest + most) // 2
            fewest, most = (fewest, mid) if _any_overlap(ranges, mid) else (mid + 1, most)
        first = fewest - 1
        ka, ia, a = ranges[first]
        for kb, ib, b in ranges[first + 1:]:
            if ka == kb == "input":
                continue  # inputs may share memory: they are only read
            if a.buffer is b.buffer and a.offset < b.end and b.offset < a.end:
                raise BindingError(
                    f"{op}: {ka} {ia} bytes [{a.offset}, {a.end}) overlap {kb} {ib} bytes "
                    f"[{b.offset}, {b.end}) of the same buffer; {op} does not run in place")

    def executor(self) -> Callable[[], None]:
        """The current bindings' prepared dispatch (made once per bind), which ``Device.execute`` calls: a callable
        running one dispatch with the bindings in force when made. ``BindingError`` if inputs or outputs are not
        bound yet."""
        with self._lock:
            if self._executor is None:
                if self._inputs is None or self._outputs is None:
                    missing = "inputs" if self._inputs is None else "outputs"
                    raise BindingError(f"{self.compiled.desc.OPERATOR}: bind {missing} before executing")
                self._executor = self.compiled.device._prepare(self.compiled, self._inputs, self._outputs)
            return self._executor


def _any_overlap(ranges, leading: int) -> bool:
    """Whether two of ``ranges`` (``(kind, index, binding)``), not both inputs, one among the first ``leading``,
    share a byte of a buffer (bound ranges are not empty): one sweep over each buffer's ranges by offset."""
    ends: dict = {}     # id(buffer) -> the largest ends so far ([of any range, of an output]): of all, of the leading
    for at, (kind, _, b) in sorted(enumerate(ranges), key=lambda r: r[1][2].offset):
        of_all, of_leading = ends.setdefault(id(b.buffer), ([0, 0], [0, 0]))
        against = of_all if at < leading else of_leading
        if (against[0] if kind == "output" else against[1]) > b.offset:
            return True
        for seen in (of_all, of_leading) if at < leading else (of_all,):
            seen[0] = max(seen[0], b.end)
            if kind == "output":
                seen[1] = max(seen[1], b.end)
    return False


def _binding_list(op: str, kind: str, bindings) -> list:
    """A list of bindings, each a BufferBinding or None (a lone one is accepted)."""
    if isinstance(bindings, BufferBinding) or bindings is None:
        bindings = [bindings]
    if isinstance(bindings, (str, bytes, Mapping, Set)) or not hasattr(bindings, "__iter__"):
        raise BindingError(f"{op}: {kind} bindings must be a list of BufferBinding; got "
                           f"{type(bindings).__name__}")
    bindings = list(bindings)
    for i, b in enumerate(bindings):
        if b is not None and not isinstance(b, BufferBinding):
            raise BindingError(f"{op}: {kind} {i} must be a BufferBinding or None; got {type(b).__name__}")
    return bindings


def check_binding(op: str, what: str, b: BufferBinding, t: TensorDesc, device) -> None:
    if b.buffer.device is not device:
        raise BindingError(f"{op}: {what} binds a buffer of another device ({b.buffer.device.kind})")
    align = t.required_alignment
    if b.offset % align:
        raise BindingError(f"{op}: {what} Offset must be a multiple of {align}; got {b.offset}")
    if b.end > b.buffer.size_in_bytes:
        raise BindingError(f"{op}: {what} range must lie inside the buffer: Offset + SizeInBytes "
                           f"must be <= {b.buffer.size_in_bytes}; got {b.offset} + {b.size_in_bytes} = {b.end}")
    if b.size_in_bytes < t.total_tensor_size_in_bytes:
        raise BindingError(f"{op}: {what} SizeInBytes must be >= the tensor's TotalTensorSizeInBytes "
                           f"{t.total_tensor_size_in_bytes}; got {b.size_in_bytes}")


class Device:
    """A DirectML device: ``"cpu"`` (opendml's C kernels, or NumPy) or
    ``"cuda"`` (opendml's CUDA kernels through CuPy).

    Parameters
    ----------
    kind : {"cpu", "cuda"}, default "cpu"
        Where operators run.
    feature_level : FeatureLevel, str or int, default FeatureLevel.FL_6_4
        The level descriptions are validated at (``"6_4"``, ``"6.4"`` ...).

    Raises
    ------
    UnsupportedError
        If ``kind`` is unknown, or ``"cuda"`` lacks CuPy or a GPU.
    ValidationError
        If ``feature_level`` names no level.
    """

    def __init__(self, kind: str = "cpu", feature_level=FeatureLevel.FL_6_4):
        self.backend = get_backend(kind)
        self.kind = self.backend.name
        self.feature_level = FeatureLevel.parse(feature_level)

    def __repr__(self) -> str:
        return f"Device({self.kind!r}, feature_level=FeatureLevel.{self.feature_level.name})"

    def create_operator(self, desc: OperatorDesc) -> Operator:
        """Validate ``desc`` at this device's feature level: the operator on
        this device, to compile next.

        Raises
        ------
        UnsupportedError
            If the operator, a rank or a data type is not supported at the
            device's feature level.
        ValidationError
            If ``desc`` is not an operator description.
        """
        if not isinstance(desc, OperatorDesc):
            raise ValidationError(f"create_operator: expected an operator description; got {type(desc).__name__}")
        return Operator(self, desc)             # (validated there)

    def compile_operator(self, operator: Operator | OperatorDesc) -> CompiledOperator:
        """Compile an operator this device created, or a description (created first).

        Raises
        ------
        ValidationError
            If ``operator`` was created by another device or is neither.
        UnsupportedError
            As ``create_operator``, for a description.
        """
        if isinstance(operator, OperatorDesc):
            operator = self.create_operator(operator)
        self._made_here(operator, Operator, "compile_operator: operator", ValidationError, " or an operator description",
                        " (compile operator.desc here)")
        return CompiledOperator(self, operator)

    def initialize_operator(self, compiled: CompiledOperator,
                            input_bindings: Sequence[BufferBinding | None] = ()) -> None:
        """The operator initializer of ``compiled`` (this device's): binds ``OWNED_BY_DML`` inputs once, copying their
        data into memory the operator owns. ``input_bindings``: an entry per input tensor, a binding for each owned
        input, None for the others (empty: all None). Initializing again replaces that data for every later execution,
        whichever binding table it uses; every binding is checked before any data is copied, so a call that raises
        changes nothing.

        Raises
        ------
        BindingError
            If the count is wrong, an owned input is not bound or a plain one is, a binding breaks a binding rule, or
            ``compiled`` is another device's.
        AllocationError
            If the memory for the operator's copy cannot be allocated (``create_buffer``'s rule).
        TypeError
            If ``compiled`` is not a ``CompiledOperator``.
        """
        op = self._own(compiled, "initialize_operator")
        if input_bindings is None or (isinstance(input_bindings, (list, tuple)) and not input_bindings):
            bindings = [None] * len(compiled.input_tensors)
        else:
            bindings = _binding_list(op, "initialize_operator input", input_bindings)
        if len(bindings) != len(compiled.input_tensors):
            raise BindingError(f"{op}: initialize_operator takes {len(compiled.input_tensors)} input "
                               f"bindings; got {len(bindings)}")
        for i, (b, t) in enumerate(zip(bindings, compiled.input_tensors)):    # every binding checked first
            owned = bool(t.flags & TensorFlags.OWNED_BY_DML)
            if b is None:
                if owned:
                    raise BindingError(f"{op}: input {i} is OWNED_BY_DML and must be bound at initialization")
                continue
            if not owned:
                raise BindingError(f"{op}: input {i} is not OWNED_BY_DML; bind it at execution instead")
            check_binding(op, f"input {i}", b, t, self)
        for i, (b, t) in enumerate(zip(bindings, compiled.input_tensors)):
            if b is None:
                continue
            # The operator reads only bytes [0, DMLCalcBufferTensorSize): copy those, into the copy an earlier
            # initialization made where there is one (the dispatches that binding tables prepared read it).
            if compiled._owned[i] is None:
                compiled._owned[i] = BufferBinding(self.create_buffer(t.total_tensor_size_in_bytes), 0,
                                                   t.total_tensor_size_in_bytes)
            span = t.min_size_in_bytes
            self.backend.write_bytes(compiled._owned[i].buffer._storage, 0,
                                     self.backend.read_bytes(b.buffer._storage, b.offset, span))

    def create_binding_table(self, compiled: CompiledOperator) -> BindingTable:
        """A new binding table for a compiled operator of this device
        (``BindingError`` for anything else)."""
        self._made_here(compiled, CompiledOperator, "create_binding_table: compiled", BindingError)
        return BindingTable(compiled)

    def create_buffer(self, size_in_bytes: int) -> Buffer:
        """A new zero-filled buffer of ``size_in_bytes`` in [1, 2**46] (``ValidationError`` for a size out of range
        or not an integer; ``AllocationError``, also a ``MemoryError``, for one not allocatable)."""
        size = _buffer_size(size_in_bytes, "create_buffer")
        try:
            return Buffer(self, size)
        except alloc.AllocationError:
            raise alloc.AllocationError(f"create_buffer: could not allocate {size} bytes on {self.kind}") from None

    def upload(self, array: ArrayLike, tensor: TensorDesc | None = None, *, casting: str = "safe") -> Buffer:
        """A new buffer holding ``array`` (numbers): its packed bytes, then zeros up to its size rounded up to 4, or,
        given ``tensor``, its elements (of the tensor's sizes) laid out by the tensor in a buffer of its
        TotalTensorSizeInBytes, converted under ``casting`` as ``Buffer.write`` does (default "safe": values that do not
        survive the conversion are refused).

        Raises
        ------
        ValidationError
            As ``Buffer.write``, or for an array dtype with no DirectML type.
        TypeError
            As ``Buffer.write``.
        """
        w = "upload"
        _check_tensor_arg(tensor, w, casting)
        host = host_array(array, w)
        if tensor is None:
            _check_packed_type(host, w)
            size = round_up_4(max(host.nbytes, 4))
        else:
            size = _fits_a_buffer(tensor, "upload: the tensor's")
        buf = self.create_buffer(size)
        buf._write(host, tensor, 0, casting, w)
        return buf

    def execute(self, compiled: CompiledOperator, table: BindingTable) -> None:
        """Record and run one dispatch of ``compiled`` with its binding table ``table`` (asynchronous on CUDA; reads
        synchronise); from several threads at once too (see ``BindingTable``).

        Raises
        ------
        BindingError
            If inputs or outputs are not bound, an owned input was not
            initialized, or the table or operator belongs elsewhere.
        TypeError
            If an argument is not a ``CompiledOperator`` / ``BindingTable``.
        """
        self._own(compiled, "execute")
        if not isinstance(table, BindingTable):
            raise TypeError(f"Device.execute: table must be a BindingTable; got {type(table).__name__}")
        if table.compiled is not compiled:
            raise BindingError(f"{compiled.desc.OPERATOR}: the binding table belongs to another compiled operator")
        table.executor()()

    dispatch = execute

    def run(self, desc: OperatorDesc, *arrays: ArrayLike) -> np.ndarray:
        """The whole flow in one call: create and compile the operator (validated at this device's feature level),
        upload each input array (one per input tensor, each of JOIN's ``InputTensors`` counting; of its sizes, converted
        as ``upload`` does) through its tensor (initializing OWNED_BY_DML inputs), bind, execute, and return the output
        tensor's elements as a new NumPy array (several outputs, SPLIT's: ``run_all``).

        Raises
        ------
        ValidationError
            If ``desc`` is not an operator description, the number of arrays is wrong, an array does not fit its
            tensor, or the operator has several outputs.
        UnsupportedError
            If the description is invalid at this device's feature level, or the device cannot run the operator.
        """
        outputs = self.run_all(desc, *arrays)
        if len(outputs) != 1:
            raise ValidationError(f"Device.run: {getattr(desc, 'desc', desc).OPERATOR} has {len(outputs)} output tensors, and run returns "
                                  f"one; Device.run_all returns them all")
        return outputs[0]

    def run_all(self, desc: OperatorDesc, *arrays: ArrayLike) -> list[np.ndarray]:
        """``run`` returning every output: an array per output tensor, in slot order (each of SPLIT's
        ``OutputTensors`` counting)."""
        if not isinstance(desc, (OperatorDesc, Operator)):
            raise ValidationError(f"Device.run: desc must be an operator description; got {type(desc).__name__}")
        compiled = self.compile_operator(desc)
        tensors = compiled.input_tensors
        if len(arrays) != len(tensors):
            raise ValidationError(f"Device.run: {compiled.desc.OPERATOR} takes {len(tensors)} input array(s); "
                                  f"got {len(arrays)}")
        for name, t in compiled.desc.named_tensors("input") + compiled.desc.named_tensors("output"):
            _fits_a_buffer(t, f"Device.run: {compiled.desc.OPERATOR} {name}:")
        inputs = [BufferBinding(self.upload(x, t)) for x, t in zip(arrays, tensors)]
        owned = [bool(t.flags & TensorFlags.OWNED_BY_DML) for t in tensors]
        if any(owned):
            self.initialize_operator(compiled, [b if o else None for b, o in zip(inputs, owned)])
        table = self.create_binding_table(compiled)
        table.bind_inputs([None if o else b for b, o in zip(inputs, owned)])
        outputs = [self.create_buffer(t.total_tensor_size_in_bytes) for t in compiled.output_tensors]
        table.bind_outputs([BufferBinding(b) for b in outputs])
        self.execute(compiled, table)
        return [b.read(t) for b, t in zip(outputs, compiled.output_tensors)]

    def _made_here(self, obj, cls, what: str, error, alternative: str = "", hint: str = "") -> None:
        """``error`` naming ``what`` (``"<function>: <argument>"``) unless ``obj`` is a ``cls`` of this device (or, as
        the message says, ``alternative``); ``hint``: what to do with another device's."""
        made = f"{what} must be {'an' if cls.__name__[0] in 'AEIOU' else 'a'} {cls.__name__} of this device"
        if not isinstance(obj, cls):
            raise error(f"{made}{alternative}; got {type(obj).__name__}")
        if obj.device is not self:
            raise error(f"{made}; got one of another device, {obj.device!r}{hint}")

    def _own(self, compiled, where: str) -> str:
        """``compiled``'s operator name, once checked to be a compiled operator of this device."""
        if not isinstance(compiled, CompiledOperator):
            raise TypeError(f"Device.{where}: compiled must be a CompiledOperator; got {type(compiled).__name__}")
        if compiled.device is not self:
            raise BindingError(f"{compiled.desc.OPERATOR}: the compiled operator belongs to another device")
        return compiled.desc.OPERATOR

    def _prepare(self, compiled: CompiledOperator, inputs, outputs):
        plan = compiled.plan
        bound = []
        for i, b in enumerate(inputs):
            b = b if b is not None else compiled._owned[i]
            if b is None:
                raise BindingError(f"{compiled.desc.OPERATOR}: input {i} is OWNED_BY_DML; call "
                                   f"initialize_operator with its binding first")
            bound.append(b)

        def ranges(bindings, types, spans):
            out = []
            for b, t, span in zip(bindings, types, spans):
                words = self.backend.element_range(b.buffer._storage, b.offset, b.size_in_bytes, DataType(t).size)
                if span is not None and (span[0] < 0 or span[1] >= words.shape[0]):
                    # Validation guarantees it; a failure here is a bug of opendml, not of the user.
                    raise RuntimeError(f"opendml internal error: a plan spans {span} outside a bound "
                                       f"range of {words.shape[0]} elements")
                out.append(words)
            return out
        srcs = ranges(bound, plan.in_types, plan.in_spans())
        dsts = ranges(outputs, plan.out_types, plan.out_spans())
        return self.backend.prepare(plan, srcs, dsts)
