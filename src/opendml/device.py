"""The DirectML flow: a device, operators created (validated) and compiled,
buffers, a binding table per compiled operator, and execution.

    device = Device("cpu", feature_level="6_4")
    compiled = device.compile_operator(device.create_operator(desc))
    table = device.create_binding_table(compiled)
    table.bind_inputs([BufferBinding(in_buf, 0, in_buf.size_in_bytes)])
    table.bind_outputs([BufferBinding(out_buf, 0, out_buf.size_in_bytes)])
    device.execute(compiled, table)
    out_buf.read(desc.output_tensor)

Binding rules (DML_BUFFER_BINDING): the offset is a multiple of 16, or of the
tensor's GuaranteedBaseOffsetAlignment when larger; the range lies inside the
buffer; its size is at least the tensor's TotalTensorSizeInBytes; there is
exactly one binding per tensor; no output range overlaps an input or another
output range (these operators do not run in place).
"""
from __future__ import annotations

import dataclasses

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .runtime import get_backend
from .ops import OperatorDesc
from .model._checks import UINT64_MAX, as_int
from .model.data_type import DataType
from .model.errors import BindingError, ValidationError
from .model.feature_level import FeatureLevel
from .model.tensor_desc import TensorDesc, TensorFlags, round_up_4

#: A buffer larger than this is refused before anything is allocated.
MAX_BUFFER_BYTES = 2**46


class Buffer:
    """A byte buffer on a device (DirectML's committed resource)."""

    def __init__(self, device: "Device", size_in_bytes: int, _storage=None):
        self.device = device
        self.size_in_bytes = size_in_bytes
        self._storage = _storage if _storage is not None else device.backend.allocate(size_in_bytes)

    def __repr__(self) -> str:
        return f"Buffer({self.device.kind!r}, size_in_bytes={self.size_in_bytes})"

    def write(self, array, tensor: TensorDesc | None = None, offset: int = 0) -> None:
        """Write ``array``'s elements: packed bytes, or through ``tensor``'s strides."""
        offset = as_int(offset, "offset", where="Buffer.write")
        host = np.asarray(array)
        if tensor is None:
            data = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
            self._check_range(offset, data.nbytes, "Buffer.write")
            self.device.backend.write_bytes(self._storage, offset, data)
            return
        self._check_range(offset, tensor.total_tensor_size_in_bytes, "Buffer.write")
        if host.shape != tensor.sizes:
            raise ValidationError(f"Buffer.write: array shape {host.shape} must equal the tensor's Sizes {tensor.sizes}")
        raw = self.device.backend.read_bytes(self._storage, offset, tensor.total_tensor_size_in_bytes)
        host_view(raw, tensor)[...] = host.astype(tensor.data_type.numpy_dtype, copy=False)
        self.device.backend.write_bytes(self._storage, offset, raw)

    def read(self, tensor: TensorDesc | None = None, offset: int = 0) -> np.ndarray:
        """Read the tensor's elements (a new packed NumPy array), or all bytes."""
        offset = as_int(offset, "offset", where="Buffer.read")
        self.device.backend.synchronize()
        if tensor is None:
            return self.device.backend.read_bytes(self._storage, 0, self.size_in_bytes)
        if not isinstance(tensor, TensorDesc):
            raise ValidationError(f"Buffer.read: tensor must be a TensorDesc; got {type(tensor).__name__}")
        nbytes = tensor.min_size_in_bytes
        self._check_range(offset, nbytes, "Buffer.read")
        raw = self.device.backend.read_bytes(self._storage, offset, nbytes)
        return np.array(host_view(raw, tensor))

    def _check_range(self, offset: int, nbytes: int, where: str) -> None:
        if offset < 0 or offset + nbytes > self.size_in_bytes:
            raise BindingError(f"{where}: bytes [{offset}, {offset + nbytes}) must lie inside the buffer "
                               f"of {self.size_in_bytes} bytes")


def host_view(raw: np.ndarray, tensor: TensorDesc) -> np.ndarray:
    """The tensor's elements as a (possibly aliasing) view of host bytes."""
    dt = tensor.data_type.numpy_dtype
    count = raw.nbytes // dt.itemsize
    flat = raw[:count * dt.itemsize].view(dt)
    return as_strided(flat, tensor.sizes, tuple(t * dt.itemsize for t in tensor.element_strides))


@dataclasses.dataclass(frozen=True)
class BufferBinding:
    """DML_BUFFER_BINDING: a byte range of a buffer."""
    buffer: Buffer
    offset: int = 0
    size_in_bytes: int | None = None

    def __post_init__(self):
        if not isinstance(self.buffer, Buffer):
            raise BindingError(f"BufferBinding: Buffer must be an opendml Buffer; got {type(self.buffer).__name__}")
        object.__setattr__(self, "offset", _binding_int(self.offset, "Offset"))
        size = self.buffer.size_in_bytes - self.offset if self.size_in_bytes is None else self.size_in_bytes
        object.__setattr__(self, "size_in_bytes", _binding_int(size, "SizeInBytes"))

    @property
    def end(self) -> int:
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
    """A validated operator (IDMLOperator)."""

    def __init__(self, device: "Device", desc: OperatorDesc):
        self.device, self.desc = device, desc

    def __repr__(self) -> str:
        return f"Operator({self.desc.OPERATOR}, device={self.device.kind!r})"


class CompiledOperator:
    """A compiled operator (IDMLCompiledOperator): its plan, ready to bind."""

    def __init__(self, device: "Device", operator: Operator):
        self.device, self.operator, self.desc = device, operator, operator.desc
        self.plan = self.desc.lower()
        self._owned: list = [None]  # snapshots of OWNED_BY_DML inputs

    @property
    def input_tensors(self) -> tuple[TensorDesc]:
        return (self.desc.input_tensor,)

    @property
    def output_tensors(self) -> tuple[TensorDesc]:
        return (self.desc.output_tensor,)

    def __repr__(self) -> str:
        return f"CompiledOperator({self.desc.OPERATOR}, device={self.device.kind!r})"


class BindingTable:
    """Bindings of one compiled operator's inputs and outputs."""

    def __init__(self, compiled: CompiledOperator):
        self.compiled = compiled
        self._inputs: list | None = None
        self._outputs: list | None = None
        self._executor = None

    def bind_inputs(self, bindings) -> None:
        self._inputs = self._check("input", bindings, self.compiled.input_tensors, owned_ok=True)
        self._executor = None
        self._check_overlap()

    def bind_outputs(self, bindings) -> None:
        self._outputs = self._check("output", bindings, self.compiled.output_tensors, owned_ok=False)
        self._executor = None
        self._check_overlap()

    def _check(self, kind, bindings, tensors, owned_ok):
        op = self.compiled.desc.OPERATOR
        if isinstance(bindings, BufferBinding) or bindings is None:
            bindings = [bindings]
        try:
            bindings = list(bindings)
        except TypeError:
            raise BindingError(f"{op}: {kind} bindings must be a list of BufferBinding; got "
                               f"{type(bindings).__name__}") from None
        if len(bindings) != len(tensors):
            raise BindingError(f"{op}: the number of {kind} bindings must equal the operator's {kind} "
                               f"tensor count {len(tensors)}; got {len(bindings)}")
        for i, (b, t) in enumerate(zip(bindings, tensors)):
            owned = owned_ok and bool(t.flags & TensorFlags.OWNED_BY_DML)
            if b is None:
                if owned:
                    continue
                raise BindingError(f"{op}: {kind} {i} must be bound to a BufferBinding; got None")
            if owned:
                raise BindingError(f"{op}: input {i} is OWNED_BY_DML: bind its data once with "
                                   f"Device.initialize_operator and bind None at execution")
            check_binding(op, f"{kind} {i}", b, t, self.compiled.device)
        return bindings

    def _check_overlap(self) -> None:
        op = self.compiled.desc.OPERATOR
        ranges = [("input", i, b) for i, b in enumerate(self._inputs or []) if b is not None]
        ranges += [("output", i, b) for i, b in enumerate(self._outputs or [])]
        for x in range(len(ranges)):
            for y in range(x + 1, len(ranges)):
                (ka, ia, a), (kb, ib, b) = ranges[x], ranges[y]
                if ka == kb == "input":
                    continue  # inputs may share memory: they are only read
                if a.buffer is b.buffer and a.offset < b.end and b.offset < a.end:
                    raise BindingError(
                        f"{op}: {ka} {ia} bytes [{a.offset}, {a.end}) overlap {kb} {ib} bytes "
                        f"[{b.offset}, {b.end}) of the same buffer; {op} does not run in place")

    def executor(self):
        if self._executor is None:
            if self._inputs is None or self._outputs is None:
                missing = "inputs" if self._inputs is None else "outputs"
                raise BindingError(f"{self.compiled.desc.OPERATOR}: bind {missing} before executing")
            self._executor = self.compiled.device._prepare(self.compiled, self._inputs, self._outputs)
        return self._executor


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
    """A DirectML device on ``"cpu"`` (NumPy) or ``"cuda"`` (CuPy)."""

    def __init__(self, kind: str = "cpu", feature_level=FeatureLevel.FL_6_4):
        self.backend = get_backend(kind)
        self.kind = self.backend.name
        self.feature_level = FeatureLevel.parse(feature_level)

    def __repr__(self) -> str:
        return f"Device({self.kind!r}, feature_level=FeatureLevel.{self.feature_level.name})"

    def create_operator(self, desc: OperatorDesc) -> Operator:
        if not isinstance(desc, OperatorDesc):
            raise ValidationError(f"create_operator: expected an operator description; got {type(desc).__name__}")
        desc.validate(self.feature_level)
        return Operator(self, desc)

    def compile_operator(self, operator) -> CompiledOperator:
        if isinstance(operator, OperatorDesc):
            operator = self.create_operator(operator)
        if not isinstance(operator, Operator) or operator.device is not self:
            raise ValidationError("compile_operator: expected an Operator created by this device")
        return CompiledOperator(self, operator)

    def initialize_operator(self, compiled: CompiledOperator, input_bindings=()) -> None:
        """The operator initializer: binds OWNED_BY_DML inputs once; their data is
        copied into memory the operator owns. Other inputs take None here."""
        op = compiled.desc.OPERATOR
        bindings = list(input_bindings) if input_bindings else [None] * len(compiled.input_tensors)
        if len(bindings) != len(compiled.input_tensors):
            raise BindingError(f"{op}: initialize_operator takes {len(compiled.input_tensors)} input "
                               f"bindings; got {len(bindings)}")
        for i, (b, t) in enumerate(zip(bindings, compiled.input_tensors)):
            owned = bool(t.flags & TensorFlags.OWNED_BY_DML)
            if b is None:
                if owned:
                    raise BindingError(f"{op}: input {i} is OWNED_BY_DML and must be bound at initialization")
                continue
            if not owned:
                raise BindingError(f"{op}: input {i} is not OWNED_BY_DML; bind it at execution instead")
            check_binding(op, f"input {i}", b, t, self)
            snap = Buffer(self, t.total_tensor_size_in_bytes)
            self.backend.write_bytes(snap._storage, 0,
                                     self.backend.read_bytes(b.buffer._storage, b.offset, t.total_tensor_size_in_bytes))
            compiled._owned[i] = BufferBinding(snap, 0, t.total_tensor_size_in_bytes)

    def create_binding_table(self, compiled: CompiledOperator) -> BindingTable:
        if not isinstance(compiled, CompiledOperator) or compiled.device is not self:
            raise BindingError("create_binding_table: expected a CompiledOperator of this device")
        return BindingTable(compiled)

    def create_buffer(self, size_in_bytes: int) -> Buffer:
        size = as_int(size_in_bytes, "size_in_bytes", where="create_buffer")
        if not 1 <= size <= MAX_BUFFER_BYTES:
            raise ValidationError(f"create_buffer: size_in_bytes must be in [1, {MAX_BUFFER_BYTES}]; got {size}")
        try:
            return Buffer(self, size)
        except MemoryError:
            raise ValidationError(f"create_buffer: could not allocate {size} bytes on {self.kind}") from None

    def upload(self, array, tensor: TensorDesc | None = None) -> Buffer:
        """A new buffer holding ``array``: packed, or laid out by ``tensor``."""
        host = np.asarray(array)
        if host.dtype.kind not in "iuf" or host.dtype.itemsize not in (1, 2, 4, 8):
            raise ValidationError(f"upload: unsupported array dtype {host.dtype}")
        DataType.from_numpy(host.dtype)
        size = tensor.total_tensor_size_in_bytes if tensor is not None else round_up_4(max(host.nbytes, 4))
        buf = self.create_buffer(size)
        buf.write(host, tensor)
        return buf

    def execute(self, compiled: CompiledOperator, table: BindingTable) -> None:
        """Record and run one dispatch (asynchronous on CUDA; reads synchronise)."""
        if table.compiled is not compiled:
            raise BindingError(f"{compiled.desc.OPERATOR}: the binding table belongs to another compiled operator")
        table.executor()()

    dispatch = execute

    def run(self, desc: OperatorDesc, *arrays) -> np.ndarray:
        """The whole flow in one call: create and compile the operator (validated
        at this device's feature level), upload each input array through its
        tensor description (initializing OWNED_BY_DML inputs), bind, execute and
        return the output tensor's elements as a new NumPy array."""
        compiled = self.compile_operator(desc)
        tensors = compiled.input_tensors
        if len(arrays) != len(tensors):
            raise ValidationError(f"Device.run: {desc.OPERATOR} takes {len(tensors)} input array(s); "
                                  f"got {len(arrays)}")
        inputs = [BufferBinding(self.upload(x, t)) for x, t in zip(arrays, tensors)]
        owned = [bool(t.flags & TensorFlags.OWNED_BY_DML) for t in tensors]
        if any(owned):
            self.initialize_operator(compiled, [b if o else None for b, o in zip(inputs, owned)])
        table = self.create_binding_table(compiled)
        table.bind_inputs([None if o else b for b, o in zip(inputs, owned)])
        outputs = [self.create_buffer(t.total_tensor_size_in_bytes) for t in compiled.output_tensors]
        table.bind_outputs([BufferBinding(b) for b in outputs])
        self.execute(compiled, table)
        return outputs[0].read(compiled.output_tensors[0])

    def _prepare(self, compiled: CompiledOperator, inputs, outputs):
        plan = compiled.plan
        b_in = inputs[0] if inputs[0] is not None else compiled._owned[0]
        if b_in is None:
            raise BindingError(f"{compiled.desc.OPERATOR}: input 0 is OWNED_BY_DML; call "
                               f"initialize_operator with its binding first")
        es = plan.element_size
        src = self.backend.element_range(b_in.buffer._storage, b_in.offset, b_in.size_in_bytes, es)
        dst = self.backend.element_range(outputs[0].buffer._storage, outputs[0].offset,
                                         outputs[0].size_in_bytes, es)
        # Validation guarantees both; a failure here is a bug of opendml, not of the user.
        lo, hi = plan.in_span
        olo, ohi = plan.out_span
        if lo < 0 or hi >= src.shape[0] or olo < 0 or ohi >= dst.shape[0]:
            raise RuntimeError(f"opendml internal error: plan spans {plan.in_span}/{plan.out_span} "
                               f"outside the bound ranges")
        return self.backend.prepare(plan, src, dst)
