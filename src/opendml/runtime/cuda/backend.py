"""CUDA backend: CuPy memory and opendml's own kernels (``kernels.cu``),
compiled at run time by NVRTC and cached per device and specialisation.

Kernels and parameters
    Every kernel takes (source words, destination words, parameter block). The
    block is one of the C structs of ``runtime/params.h``, which ``kernels.cu``
    includes (NVRTC gets ``-I<runtime dir>``, see ``INCLUDE``) and reads by
    field name; this module fills its ctypes mirror from
    ``opendml.runtime.params`` and passes it BY VALUE: the launch's third
    argument points at the structure in host memory and ``cuLaunchKernel``
    copies its bytes (at most 608, see ``MAX_PARAM_BYTES``) into the launch.
    opendml allocates no device memory of its own for a launch, so a user's
    CuPy allocator cannot misalign it (issue 23), a first call makes no upload
    and no stream synchronisation, and the launch can be captured into a CUDA
    graph (``torch.cuda.graph``), whose nodes keep their own copy of the
    parameters. Kernels are compiled with
    ``--fmad=false``: FOLD's sums are plain round-to-nearest additions (CuPy
    appends ``-ftz=true`` to every NVRTC compile, so float32 sums are written
    as PTX ``add.rn.f32``, which keeps subnormals as NumPy does).

Kernels per plan
    CopyPlan: ``strided_copy`` (widened to 16-byte words where layouts and
    pointers allow). UnfoldPlan: ``unfold_tile`` (staged boxes),
    ``unfold1d_tile`` (framing transpose) or ``unfold_gather``. FoldPlan:
    ``fold1d_tile`` for 1-D folds with a stride of 32 or more (overlap-add:
    columns staged in shared memory per window stride, sums in registers),
    else ``fold_gather`` (a warp sums 32*V neighbouring image positions of a
    line, loads coalesced along the columns). ScatterPlan: ``scatter`` (every
    output word written once, 16-byte words where the innermost dimension is
    contiguous on both sides). No kernel uses atomics; FOLD sums each image
    element's contributions in increasing window order, as the CPU does.

Launch path (issue 12)
    ``CudaBackend.launcher(plan, src_ptr, src_elements, dst_ptr)`` returns a
    callable ``run(stream_ptr=0)`` that runs ``plan`` from the device address
    ``src_ptr`` into ``dst_ptr`` on the CUDA stream ``stream_ptr`` (a raw
    ``cudaStream_t`` as an int, e.g. ``torch.cuda.current_stream().cuda_stream``
    or ``cupy.cuda.get_current_stream().ptr``; 0 is the legacy default stream).
    ``CudaBackend.launch(plan, src_ptr, src_elements, dst_ptr, stream_ptr=0)``
    does the same in one call and is the hot path. Semantics:

    * ``src_ptr`` addresses element 0 of the bound input range (the plan's
      offsets count from there, in elements of ``plan.element_size``) and
      ``src_elements`` is how many elements of that range may be read (the
      stride-2 copy reads a 16-byte word's unused tail only inside it);
      ``dst_ptr`` addresses element 0 of the output range.
    * Everything derived from the plan (kernel choice, word widening, compiled
      function, parameter block, grid, the driver's argument array) is
      cached per ``(plan object, src_ptr % 16, dst_ptr % 16, src_elements)``;
      a repeated call costs one dictionary lookup, two pointer-slot writes and
      ``cuLaunchKernel`` (from opendml's C extension, else through ctypes on
      the driver library, else CuPy's binding of it). Keep plan objects (the
      planner's cache does): an equal but new plan object builds a new cache
      entry (sharing the compiled kernel).
    * Both addresses must be multiples of the plan's element size (the
      kernels read whole elements); another raises ``UnsupportedError`` naming
      the address before anything is launched.
    * The first launch of a plan (compiling or loading its kernel) runs with
      the calling thread's stream-capture mode relaxed, so it may happen while
      a CUDA graph is being captured on the caller's stream.
    * The launch is asynchronous and stream-ordered: the caller keeps both
      buffers alive until the stream has run it (as the frameworks' stream-
      ordered allocators do for their own tensors). The backend's device must
      be the current CUDA device of the calling thread (it is whenever the
      tensor's framework has made its device current); otherwise the launch is
      retried once with the backend's device made current.
    * Kernel launch errors raise ``RuntimeError`` naming the kernel and the
      driver's error.

    ``prepare(plan, src, dst)`` (CuPy arrays; the device flow and the CuPy
    adapter) builds the same cached launch and returns a callable that runs it
    on CuPy's current stream, read at each call.

CuPy is imported here only, i.e. only when a CUDA device is asked for.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import math
import pathlib
import sys
import threading

import numpy as np

from ...model.errors import UnsupportedError
from ...plan import Copy, CopyPlan, Fill, FoldPlan, MovePlan, ScatterPlan, UnfoldPlan
from .. import params as P

KERNELS = pathlib.Path(__file__).with_name("kernels.cu")
#: The move program's kernels (MovePlan: the data-movement family).
MOVE_KERNELS = pathlib.Path(__file__).with_name("move.cu")
#: Folder of params.h, the parameter blocks declared once for the C and CUDA kernels.
INCLUDE = P.HEADER.parent
#: NVRTC options of every module.
OPTIONS = ("-std=c++17", f"-I{INCLUDE}", "--fmad=false")
THREADS = 256
LAUNCH_CACHE = 1024  # cached launches kept per device
ALIGNMENT = 16       # of Buffer storage (allocate)
#: The largest parameter block; a kernel's arguments may take 4 KiB.
MAX_PARAM_BYTES = max(ctypes.sizeof(t) for t in (P.CopyParams, P.UnfoldParams, P.FoldParams, P.ScatterParams))
assert 2 * 8 + MAX_PARAM_BYTES <= 4096
#: 1-D UNFOLDs whose neighbouring blocks lie at least this many elements apart
#: in the input go through the shared-memory transpose (unfold1d_tile).
TILE_MIN_STEP = 8
#: unfold_tile: output columns per box (a box is one CUDA block's share), the
#: longest box line in 2-D and up, and the shared memory a box's region may use.
BOX_COLUMNS = 1024
BOX_LINE = 128
BOX_BYTES = 24 * 1024
#: 1-D FOLDs with at least this stride go through the staged kernel
#: (fold1d_tile); the others through fold_gather.
FOLD_TILE_MIN_STRIDE = 32
#: fold_gather: image positions a lane sums (V), tried largest first; the
#: largest whose lanes stay this busy on the image's lines is taken, unless
#: FOLD_LANES names one (1, 2 or 4: tests, sweeps).
FOLD_LANE_USE = 0.85
FOLD_LANES = None


def items_per_thread(word_bytes: int) -> int:
    """Words per thread of strided_copy and scatter: one 16-byte word (the
    window sweep in benchmarks/sweep_copy.py measured 1 about 2% faster than 2,
    4 or 8 on an H200), else at least four words and 16 bytes in flight."""
    return 1 if word_bytes >= 16 else max(4, 16 // word_bytes)


_SCALAR = {1: "u8", 2: "u16", 4: "u32", 8: "u64", 16: "uint4"}
_NUMPY_WORD = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _cupy():
    try:
        import cupy
    except ImportError as exc:
        raise UnsupportedError(
            f"Device('cuda') needs CuPy: pip install 'opendml[cuda]' ({exc})") from None
    return cupy


def probe() -> tuple[bool, str]:
    try:
        cupy = _cupy()
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return False, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if n < 1:
        return False, "no CUDA device"
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    return True, f"{name} (CuPy {cupy.__version__}, {n} device{'s' if n > 1 else ''})"


@functools.cache
def _source(path: pathlib.Path = KERNELS) -> str:
    """kernels.cu (or move.cu), headed by a digest of params.h: CuPy's on-disk
    kernel cache keys on the source text and options, not on included files,
    so a changed header must change the source."""
    digest = hashlib.sha256(P.HEADER.read_bytes()).hexdigest()[:16]
    return f"// params.h {digest}\n" + path.read_text(encoding="utf-8")


class Kernel:
    """One compiled specialisation: ``ptr`` is the driver's CUfunction (the
    launches use it). Calling it runs the kernel as CuPy's ``Function`` call
    does, for tuning scripts: ``k(grid, block, (src_ptr, dst_ptr, params),
    shared_mem=0, stream=None)`` with ``params`` a ``runtime.params``
    structure (by value) and the pointers ints or CuPy arrays, on ``stream``
    (a CuPy stream; default: CuPy's current one)."""

    __slots__ = ("function", "ptr", "name")

    def __init__(self, function, name: str):
        self.function, self.ptr, self.name = function, function.ptr, name

    def __call__(self, grid, block, args, *, shared_mem: int = 0, stream=None) -> None:
        cupy = _cupy()
        src, dst, params = args
        ptrs = [ctypes.c_uint64(a.data.ptr if hasattr(a, "data") else int(a)) for a in (src, dst)]
        if not isinstance(params, ctypes.Structure):
            raise TypeError(f"{self.name}: the parameter block must be a runtime.params structure (passed by "
                            f"value); got {type(params).__name__}")
        argv = (ctypes.c_void_p * 3)(ctypes.addressof(ptrs[0]), ctypes.addressof(ptrs[1]), ctypes.addressof(params))
        grid, block = (tuple(grid) + (1, 1))[:3], (tuple(block) + (1, 1))[:3]
        stream_ptr = (stream if stream is not None else cupy.cuda.get_current_stream()).ptr
        cupy.cuda.driver.launchKernel(self.ptr, *grid, *block, shared_mem, stream_ptr, ctypes.addressof(argv), 0)


@functools.cache
def _kernel(device_id: int, name: str, options: tuple = OPTIONS) -> Kernel:
    """One compiled specialisation, e.g. ``strided_copy<uint4, 3, 0, u32, 1, 0>``
    (compiled or loaded with the calling thread's stream-capture mode relaxed:
    a first call may come while a CUDA graph is being captured). Names of the
    move program's kernels (``move_copy<...>``, ``move_fill<...>``) come from
    move.cu, the others from kernels.cu."""
    cupy = _cupy()
    path = MOVE_KERNELS if name.startswith("move_") else KERNELS
    with capture_relaxed(), cupy.cuda.Device(device_id):
        module = cupy.RawModule(code=_source(path), options=options, name_expressions=(name,))
        return Kernel(module.get_function(name).kernel, name)


def device_params(params: ctypes.Structure) -> ctypes.Structure:
    """The parameter block as a kernel takes it: by value, so a copy of the
    structure itself (tuning scripts pass it to a ``Kernel`` call)."""
    return type(params).from_buffer_copy(params)


# -- the driver's launch entry point ----------------------------------------------

_CU_ERROR_INVALID_CONTEXT = 201
_CU_ERROR_INVALID_HANDLE = 400
_CU_ERROR_CONTEXT_IS_DESTROYED = 709


@functools.cache
def _driver():
    """(cuLaunchKernel, cuGetErrorName) from the CUDA driver library through
    ctypes, or None where it cannot be loaded. cuLaunchKernel is called with
    ready-made ctypes objects and no argtypes (no per-call conversion)."""
    names = ["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so"]
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            launch = lib.cuLaunchKernel
        except (OSError, AttributeError):
            continue
        launch.restype = ctypes.c_int
        err = lib.cuGetErrorName
        err.restype = ctypes.c_int
        err.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        exchange = getattr(lib, "cuThreadExchangeStreamCaptureMode", None)
        if exchange is not None:
            exchange.restype = ctypes.c_int
            exchange.argtypes = [ctypes.POINTER(ctypes.c_int)]
        return launch, err, exchange
    return None


_CU_STREAM_CAPTURE_MODE_RELAXED = 2


@contextlib.contextmanager
def capture_relaxed():
    """The calling thread's stream-capture mode set to relaxed (CUDA's
    ``cuThreadExchangeStreamCaptureMode``) for the block, then restored:
    loading a module or querying the device while another stream of this
    thread (or, in "global" mode, of any thread) is capturing a CUDA graph
    is then allowed instead of invalidating the capture. Nothing is
    enqueued on any stream inside."""
    drv = _driver()
    exchange = drv[2] if drv is not None else None
    mode = ctypes.c_int(_CU_STREAM_CAPTURE_MODE_RELAXED)
    if exchange is None or exchange(ctypes.byref(mode)) != 0:
        yield
        return
    try:
        yield
    finally:
        exchange(ctypes.byref(mode))


@functools.cache
def _fast_launch():
    """opendml's C ``cuda_launch`` (in the CPU extension), or None where the
    extension is not built."""
    from ..cpu.backend import _load_native
    native = _load_native()
    return getattr(native, "cuda_launch", None)


_STREAM_ARGS: dict = {}


def _stream_arg(ptr: int) -> ctypes.c_void_p:
    """The stream handle as a ctypes argument, made once per handle."""
    arg = _STREAM_ARGS.get(ptr)
    if arg is None:
        if len(_STREAM_ARGS) >= 256:
            _STREAM_ARGS.clear()
        arg = _STREAM_ARGS[ptr] = ctypes.c_void_p(ptr)
    return arg


def _error_name(rc: int) -> str:
    drv = _driver()
    if drv is not None:
        s = ctypes.c_char_p()
        if drv[1](rc, ctypes.byref(s)) == 0 and s.value:
            return f"{s.value.decode()} ({rc})"
    return f"CUDA error {rc}"


#: How launches are made: "native" (cuLaunchKernel from opendml's C extension,
#: native/cuda_launch.c) where the extension and the driver library load, else
#: "driver" (cuLaunchKernel through ctypes), else "cupy" (CuPy's binding of
#: cuLaunchKernel). Benchmarks may set it before a backend builds its launches.
LAUNCH_VIA = "native"


class Launch:
    """One cached launch: a compiled kernel, its parameter block (a ctypes
    structure in host memory, owned here and passed by value: each
    ``cuLaunchKernel`` copies its bytes), the grid, and the driver's argument
    array whose two pointer slots are rewritten per call.
    ``launch(src_ptr, dst_ptr, stream_ptr)`` queues it."""

    __slots__ = ("name", "blocks", "smem", "function", "params", "plan", "backend", "_src", "_dst", "_argv",
                 "_call", "_lock", "_via", "_fast", "_fn", "_pptr", "_cupy_launch")

    def __init__(self, backend, plan, name, kernel, params, blocks, smem, via):
        self.backend, self.plan, self.name = backend, plan, name
        self.function, self.params = kernel, params
        self.blocks, self.smem = blocks, smem
        self._lock = threading.Lock()
        self._fn, self._pptr = kernel.ptr, ctypes.addressof(params)
        drv = _driver() if via in ("native", "driver") else None
        self._via = "cupy" if drv is None else "driver"
        # The same cuLaunchKernel from opendml's C extension: no per-call
        # argument conversion (native/cuda_launch.c); ctypes where it is absent.
        # The ctypes objects of the other routes are made on their first use
        # (_slow): a launch made for one new shape is usually never retried.
        self._fast = _fast_launch() if drv is not None and via == "native" else None
        self._call = self._argv = self._src = self._dst = self._cupy_launch = None

    def _slow(self):
        """The ctypes route's objects, made once: the two pointer slots, the
        driver's argument array (the address of each argument's value; the
        third is the parameter structure itself, by value) and the bound
        ``cuLaunchKernel`` (None on CuPy's route). Called with ``_lock`` held."""
        if self._argv is None:
            self._src, self._dst = ctypes.c_uint64(0), ctypes.c_uint64(0)
            self._cupy_launch = self.backend.cupy.cuda.driver.launchKernel
            if self._via == "driver":
                u = ctypes.c_uint
                self._call = functools.partial(_driver()[0], ctypes.c_void_p(self._fn), u(self.blocks), u(1), u(1),
                                               u(THREADS), u(1), u(1), u(self.smem))
            self._argv = (ctypes.c_void_p * 3)(ctypes.addressof(self._src), ctypes.addressof(self._dst), self._pptr)

    def __call__(self, src_ptr: int, dst_ptr: int, stream_ptr: int = 0) -> None:
        if not self.blocks:
            return
        if self._fast is not None:
            rc = self._fast(self._fn, self.blocks, THREADS, self.smem, stream_ptr, src_ptr, dst_ptr, self._pptr)
            if rc:
                self._retry(rc, src_ptr, dst_ptr, _stream_arg(stream_ptr))
            return
        if self._via == "cupy":             # CuPy's binding of cuLaunchKernel
            with self._lock:
                self._slow()
                self._src.value = src_ptr
                self._dst.value = dst_ptr
                try:
                    self._cupy_launch(self._fn, self.blocks, 1, 1, THREADS, 1, 1, self.smem, stream_ptr,
                                      ctypes.addressof(self._argv), 0)
                except self.backend.cupy.cuda.driver.CUDADriverError as exc:
                    raise RuntimeError(f"opendml CUDA: launching {self.name} (grid {self.blocks}, {self.smem} "
                                       f"bytes of shared memory) failed: {exc}") from None
            return
        stream = _STREAM_ARGS.get(stream_ptr)
        if stream is None:
            stream = _stream_arg(stream_ptr)
        with self._lock:
            self._slow()
            self._src.value = src_ptr
            self._dst.value = dst_ptr
            rc = self._call(stream, self._argv, None)
        if rc:
            self._retry(rc, src_ptr, dst_ptr, stream)

    def _retry(self, rc, src_ptr, dst_ptr, stream):
        if rc in (_CU_ERROR_INVALID_CONTEXT, _CU_ERROR_INVALID_HANDLE, _CU_ERROR_CONTEXT_IS_DESTROYED):
            # No context (a thread that never used CUDA) or another device's is
            # current: cudaSetDevice makes the device's primary context current
            # in this thread (CuPy's ``with device`` skips the call when the
            # device number already matches), then the caller's device returns.
            rt = self.backend.cupy.cuda.runtime
            previous = rt.getDevice()
            rt.setDevice(self.backend.index)
            try:
                with self._lock:
                    self._slow()
                    self._src.value = src_ptr
                    self._dst.value = dst_ptr
                    rc = self._call(stream, self._argv, None)
            finally:
                if previous != self.backend.index:
                    rt.setDevice(previous)
        if rc:
            raise RuntimeError(f"opendml CUDA: launching {self.name} (grid {self.blocks}, {self.smem} bytes of "
                               f"shared memory) failed: {_error_name(rc)}")

    @property
    def via(self) -> str:
        return "native" if self._fast is not None else self._via

    @property
    def function_ptr(self) -> int:
        """The compiled kernel's CUfunction handle."""
        return self._fn

    @property
    def params_ptr(self) -> int:
        """The HOST address of the parameter structure (owned by this Launch,
        alive while it is): the launch's third argument, copied by value by
        each cuLaunchKernel (native/cuda_launch.c takes it so)."""
        return self._pptr

    @property
    def threads(self) -> int:
        """Threads per CUDA block."""
        return THREADS


# -- launches made in C (calls.c's call_cache_torch_new) ----------------------------

#: Compiled kernels by device for the launches C makes for new shapes:
#: {device index: {kernel name: CUfunction}}, filled by ``add_new_kernel``.
_NEW_KERNELS: dict = {}


def new_kernels() -> dict | None:
    """The compiled kernels C may launch new shapes with (``_NEW_KERNELS``),
    or None where launches are not made by the C extension's launcher
    (``LAUNCH_VIA`` is not "native", or the extension or the driver library
    is missing): C then leaves CUDA calls to the Python route."""
    if LAUNCH_VIA != "native" or _fast_launch() is None or _driver() is None:
        return None
    return _NEW_KERNELS


def add_new_kernel(index: int, name: str) -> None:
    """Compile (or load) kernel ``name`` for device ``index`` and list it for C."""
    ptr = _kernel(index, name).ptr
    _NEW_KERNELS.setdefault(index, {})[name] = ptr


class _Function:
    """A compiled kernel's handle, as ``Launch`` reads it."""
    __slots__ = ("ptr",)

    def __init__(self, ptr: int):
        self.ptr = ptr


def relaunch(device: int, function: int, grid: int, smem: int, params: bytes, src: int, dst: int,
             stream: int) -> None:
    """Queue a launch C made (a call-cache entry of ``call_cache_torch_new``)
    whose own launch failed: through a ``Launch`` of the same kernel, grid
    and parameter bytes, which makes the device's context current on a
    thread without it and raises opendml's error naming the CUDA error."""
    from .. import get_backend
    block = ctypes.create_string_buffer(bytes(params), len(params))
    Launch(get_backend(f"cuda:{device}"), None, "a cached kernel", _Function(function), block, grid, smem,
           LAUNCH_VIA)(src, dst, stream)


def _plan_what(plan) -> str:
    return {CopyPlan: "SLICE/SLICE1 (strided copy)", UnfoldPlan: "UNFOLD", FoldPlan: "FOLD",
            ScatterPlan: "SLICE_GRAD (scatter)"}.get(type(plan), type(plan).__name__)


def check_alignment(element_size: int, src_ptr: int, dst_ptr: int, what: str) -> None:
    """``UnsupportedError`` naming ``what`` (the operator) and the address
    where the input's (``src_ptr``) or the output's (``dst_ptr``) device
    address is not a multiple of ``element_size``: every kernel reads and
    writes whole elements, and a misaligned one would fault
    (cudaErrorMisalignedAddress), losing the process's CUDA context. Checked
    before anything is launched."""
    es = element_size
    for role, ptr in (("input", src_ptr), ("output", dst_ptr)):
        if ptr % es:
            raise UnsupportedError(
                f"{what} on CUDA: the {role}'s device address {ptr:#x} is not a multiple of its "
                f"element size ({es} bytes; it is {ptr % es} past one): opendml's CUDA kernels read and write "
                f"whole elements. Pass an array whose data pointer is aligned to its item size (a CuPy array made "
                f"at an offset of a raw allocation can be copied byte-wise into a fresh one, e.g. "
                f"y = cupy.empty_like(x); y.data.copy_from_device(x.data, x.nbytes) for a contiguous x)")


class CudaBackend:
    name = "cuda"

    def __init__(self, index: int = 0):
        # Relaxed: a first call may come inside a CUDA graph capture, and
        # importing CuPy or querying devices must not invalidate it.
        with capture_relaxed():
            cupy = _cupy()
            try:
                count = cupy.cuda.runtime.getDeviceCount()
            except Exception as exc:
                raise UnsupportedError(f"Device('cuda'): CUDA is not usable here: {exc}") from None
        if not 0 <= index < count:
            raise UnsupportedError(f"Device('cuda:{index}'): there are {count} CUDA devices")
        self.cupy, self.index = cupy, index
        self.device = cupy.cuda.Device(index)
        self._launches: dict = {}
        self._streams: dict = {}
        self._lock = threading.Lock()

    def _evict(self, cache: dict) -> None:
        """Drop the older half of a cache. A launch owns no device memory (its
        parameters go by value), so kernels still queued from a dropped one
        need no synchronisation (and none happens inside a graph capture)."""
        for k in list(cache)[:len(cache) // 2 + 1]:
            cache.pop(k, None)

    def _external_stream(self, ptr: int):
        s = self._streams.get(ptr)
        if s is None:
            if len(self._streams) > 64:
                self._streams.clear()
            s = self._streams[ptr] = (self.cupy.cuda.ExternalStream(ptr, self.index) if ptr
                                      else self.cupy.cuda.Stream.null)
        return s

    def cache_info(self) -> dict:
        """{'launches', 'launch_via'}: cached launches of this device, and how
        launches are made."""
        via = "cupy" if LAUNCH_VIA == "cupy" or _driver() is None else (
            "native" if LAUNCH_VIA == "native" and _fast_launch() is not None else "driver")
        return {"launches": len(self._launches), "launch_via": via}

    # -- memory ----------------------------------------------------------------

    def allocate(self, nbytes: int):
        """Zeroed device bytes for a ``Buffer``, 16-byte aligned whatever CuPy
        allocator the user installed (one that returns 2-byte-aligned memory
        is legal for float16 data): a view into ``nbytes + 16`` bytes."""
        with self.device:
            try:
                raw = self.cupy.zeros(nbytes + ALIGNMENT, dtype=np.uint8)
            except self.cupy.cuda.memory.OutOfMemoryError:
                raise MemoryError(nbytes) from None
            start = -raw.data.ptr % ALIGNMENT
            return raw[start:start + nbytes]

    def write_bytes(self, storage, offset: int, data) -> None:
        with self.device:
            storage[offset:offset + data.nbytes].set(np.ascontiguousarray(data).reshape(-1).view(np.uint8))

    def read_bytes(self, storage, offset: int, nbytes: int) -> np.ndarray:
        with self.device:
            return storage[offset:offset + nbytes].get()

    def element_range(self, storage, offset: int, nbytes: int, element_size: int):
        count = nbytes // element_size
        return storage[offset:offset + count * element_size].view(_NUMPY_WORD[element_size])

    def synchronize(self) -> None:
        self.device.synchronize()

    # -- execution --------------------------------------------------------------

    def _record(self, plan, src_ptr: int, src_elements: int, dst_ptr: int, what: str | None = None) -> Launch:
        key = (id(plan), src_ptr & 15, dst_ptr & 15, src_elements)
        rec = self._launches.get(key)
        if rec is not None:
            return rec
        # Misaligned addresses are refused here, so never cached: the key's
        # alignment class (ptr % 16) covers every element size.
        check_alignment(plan.element_size, src_ptr, dst_ptr, what or _plan_what(plan))
        name, params, grid, smem = launch_spec(plan, src_ptr, src_elements, dst_ptr)
        kernel = _kernel(self.index, name)     # compiled (once per name) with the device current
        rec = Launch(self, plan, name, kernel, params, grid[0], smem, LAUNCH_VIA)
        with self._lock:
            if len(self._launches) >= LAUNCH_CACHE:
                self._evict(self._launches)
            self._launches[key] = rec   # holds the plan: its id stays unique while cached
        return rec

    def launcher(self, plan, src_ptr: int, src_elements: int, dst_ptr: int):
        """A callable ``run(stream_ptr=0)`` that queues ``plan`` from device
        address ``src_ptr`` (``src_elements`` elements bound) into ``dst_ptr``
        on the given raw CUDA stream. See the module docstring."""
        rec = self._launches.get((id(plan), src_ptr & 15, dst_ptr & 15, src_elements))
        if rec is None:
            rec = self._record(plan, src_ptr, src_elements, dst_ptr)
        return functools.partial(rec, src_ptr, dst_ptr)

    def record(self, plan, src_ptr: int, src_elements: int, dst_ptr: int, what: str | None = None) -> Launch:
        """The cached ``Launch`` of ``plan`` for these addresses' alignment
        classes: ``record(...)(src_ptr, dst_ptr, stream_ptr)`` queues it.
        ``UnsupportedError`` (naming ``what``, the operator, where given) if
        either address is not a multiple of the plan's element size."""
        rec = self._launches.get((id(plan), src_ptr & 15, dst_ptr & 15, src_elements))
        if rec is None:
            rec = self._record(plan, src_ptr, src_elements, dst_ptr, what)
        return rec

    def launch(self, plan, src_ptr: int, src_elements: int, dst_ptr: int, stream_ptr: int = 0) -> None:
        """Queue ``plan`` on ``stream_ptr`` now: ``launcher(...)(stream_ptr)``
        without the intermediate callable."""
        self.record(plan, src_ptr, src_elements, dst_ptr)(src_ptr, dst_ptr, stream_ptr)

    # -- the move program (MovePlan) ---------------------------------------------

    def record_move(self, plan: MovePlan, src_ptrs, src_elements, dst_ptrs, dst_elements,
                    what: str | None = None) -> "MoveLaunch":
        """The cached ``MoveLaunch`` of a ``MovePlan`` for these addresses'
        alignment classes: ``record_move(...)(src_ptrs, dst_ptrs, stream_ptr)``
        queues every pass of the program, in order, on the raw CUDA stream
        ``stream_ptr`` (one kernel launch per pass; a padding program is one
        launch, see ``move_steps``).

        Parameters
        ----------
        plan : MovePlan
            The program (already validated; offsets count from element 0 of
            each bound range).
        src_ptrs, dst_ptrs : sequence of int
            Device address of element 0 of each input's (output's) bound
            range, one per ``plan.in_types`` (``plan.out_types``), in slot
            order (JOIN's inputs, SPLIT's outputs each counting); each a
            multiple of its DataType's size.
        src_elements, dst_elements : sequence of int
            How many elements (of each slot's own type) each bound range
            holds; the program must stay inside them.
        what : str, optional
            The operator's name, for error messages.

        Returns
        -------
        MoveLaunch
            Reusable for any addresses of the same alignment classes (mod 16)
            and the same element counts; asynchronous and stream-ordered like
            ``launch`` (the caller keeps the buffers alive until the stream
            has run it).

        Raises
        ------
        UnsupportedError
            If an address is not a multiple of its element size.
        ValueError
            If the program reads or writes outside a bound range, or the
            numbers of addresses do not match the program's slots.
        """
        src_ptrs, dst_ptrs = tuple(src_ptrs), tuple(dst_ptrs)
        key = ("move", id(plan), tuple(a & 15 for a in src_ptrs), tuple(a & 15 for a in dst_ptrs),
               tuple(src_elements), tuple(dst_elements))
        rec = self._launches.get(key)
        if rec is not None:
            return rec
        if not isinstance(plan, MovePlan):
            raise TypeError(f"record_move takes a MovePlan; got {type(plan).__name__}")
        what = what or "the move program"
        for p in plan.passes:
            if type(p) is not Copy and type(p) is not Fill:
                raise UnsupportedError(f"{what}: the CUDA backend does not run index-driven passes "
                                       f"({type(p).__name__}) yet; run it on the CPU")
        from ...model.data_type import DataType
        for role, ptrs, counts, types, spans in (("input", src_ptrs, src_elements, plan.in_types, plan.in_spans()),
                                                 ("output", dst_ptrs, dst_elements, plan.out_types,
                                                  plan.out_spans())):
            if len(ptrs) != len(types) or len(counts) != len(types):
                raise ValueError(f"{what} on CUDA: the program has {len(types)} {role}(s); got {len(ptrs)} "
                                 f"address(es) and {len(counts)} element count(s)")
            for i, (ptr, n, t, span) in enumerate(zip(ptrs, counts, types, spans)):
                es = DataType(t).size
                check_alignment(es, ptr if role == "input" else 0, ptr if role == "output" else 0, what)
                if span is not None and (span[0] < 0 or span[1] >= n):
                    raise ValueError(f"{what} on CUDA: the program reaches elements {span[0]}..{span[1]} of "
                                     f"{role} {i}, outside its {n} bound elements")
        steps = []
        for spec in move_steps(plan, src_ptrs, src_elements, dst_ptrs, sms=self.multiprocessors):
            name, params, grid, smem, s_slot, d_slot = spec
            with self.device:
                kernel = _kernel(self.index, name)
            steps.append((Launch(self, plan, name, kernel, params, grid[0], smem, LAUNCH_VIA), s_slot, d_slot))
        rec = MoveLaunch(plan, tuple(steps))
        with self._lock:
            if len(self._launches) >= LAUNCH_CACHE:
                self._evict(self._launches)
            self._launches[key] = rec   # holds the plan: its id stays unique while cached
        return rec

    @functools.cached_property
    def multiprocessors(self) -> int:
        """The device's multiprocessor count (persistent grids)."""
        with capture_relaxed():
            return int(self.cupy.cuda.runtime.getDeviceProperties(self.index)["multiProcessorCount"])

    def run_move(self, plan: MovePlan, src_ptrs, src_elements, dst_ptrs, dst_elements, stream_ptr: int = 0,
                 what: str | None = None) -> None:
        """Queue a ``MovePlan`` on ``stream_ptr`` now:
        ``record_move(plan, src_ptrs, src_elements, dst_ptrs, dst_elements,
        what)(src_ptrs, dst_ptrs, stream_ptr)`` (see ``record_move``)."""
        self.record_move(plan, src_ptrs, src_elements, dst_ptrs, dst_elements, what)(src_ptrs, dst_ptrs,
                                                                                        stream_ptr)

    def prepare(self, plan, src, dst):
        """A callable running ``plan`` from CuPy word array ``src`` into ``dst``
        on CuPy's current stream (read at each call). For a ``MovePlan``,
        ``src`` and ``dst`` are lists of CuPy word arrays, one per input and
        output (each of its slot's element size)."""
        if isinstance(plan, MovePlan):
            sps, dps = [a.data.ptr for a in src], [a.data.ptr for a in dst]
            rec = self.record_move(plan, sps, [a.size for a in src], dps, [a.size for a in dst])
            device, current = self.device, self.cupy.cuda.get_current_stream

            def run_move():
                with device:
                    rec(sps, dps, current().ptr)
            run_move.keep_alive = (src, dst, rec)
            run_move.launch = rec
            return run_move
        if not isinstance(plan, (CopyPlan, UnfoldPlan, FoldPlan, ScatterPlan)):
            raise TypeError(f"unknown plan {type(plan).__name__}")
        sp, dp = src.data.ptr, dst.data.ptr
        rec = self._record(plan, sp, src.size, dp)
        device, current = self.device, self.cupy.cuda.get_current_stream

        def run():
            with device:
                rec(sp, dp, current().ptr)
        run.keep_alive = (src, dst, rec)  # the pointers stay valid while the closure lives
        run.launch = rec
        return run


def launch_spec(plan, src_ptr: int, src_elements: int, dst_ptr: int):
    """(kernel name, parameter block, grid, dynamic shared memory bytes)."""
    if isinstance(plan, CopyPlan):
        return _copy_launch(plan, src_ptr, dst_ptr, src_elements)
    if isinstance(plan, UnfoldPlan):
        return _unfold_launch(plan)
    if isinstance(plan, FoldPlan):
        return _fold_launch(plan)
    if isinstance(plan, ScatterPlan):
        return _scatter_launch(plan, src_ptr, dst_ptr)
    raise TypeError(f"unknown plan {type(plan).__name__}")


def _index_type(count: int, items: int = 16) -> str:
    return "u32" if count + THREADS * items < 2**32 else "u64"


def _fill(array, values) -> None:
    for i, v in enumerate(values):
        array[i] = v


# -- SLICE, SLICE1 ------------------------------------------------------------------

def word_plan(plan: CopyPlan, src_ptr: int, dst_ptr: int, src_len: int = 0):
    """Widen the copy to the largest word (up to 16 bytes) that the innermost
    dimension, every offset, stride and pointer allow; a negative innermost
    stride becomes a reversed word copy with the elements reversed inside each
    word; a stride-2 innermost dimension becomes 8-byte output words, each
    the even elements of one 16-byte input word (input offsets and strides of
    the returned plan then count 16-byte words), when the element after the
    plan's last read is still inside the ``src_len`` bound elements (the
    word's unused tail). Returns (output word bytes, reversed element size or
    0, picked element size or 0, plan in words)."""
    p = plan.canonical()
    es = p.element_size
    L, inner_in, inner_out = p.sizes[-1], p.in_strides[-1], p.out_strides[-1]
    outer_ok = lambda f: all(t % f == 0 for t in p.in_strides[:-1] + p.out_strides[:-1])  # noqa: E731
    if inner_out == 1 and inner_in == 2:
        f = 8 // es                       # output elements per 8-byte word
        if (L % f == 0 and p.in_offset % (2 * f) == 0 and p.out_offset % f == 0 and src_ptr % 16 == 0
                and dst_ptr % 8 == 0 and all(t % (2 * f) == 0 for t in p.in_strides[:-1])
                and all(t % f == 0 for t in p.out_strides[:-1]) and p.in_span[1] + 1 < src_len):
            wp = CopyPlan(8, p.sizes[:-1] + (L // f,), p.in_offset // (2 * f),
                          tuple(t // (2 * f) for t in p.in_strides[:-1]) + (1,),
                          p.out_offset // f, tuple(t // f for t in p.out_strides[:-1]) + (1,))
            return 8, 0, es, wp
    if inner_out != 1 or abs(inner_in) != 1:
        return es, 0, 0, p
    low = p.in_offset - (L - 1 if inner_in < 0 else 0)  # lowest element of a run at index 0
    for w in (16, 8, 4, 2):
        f = w // es
        if f <= 1:
            break
        if (L % f == 0 and low % f == 0 and p.out_offset % f == 0 and src_ptr % w == 0 and dst_ptr % w == 0
                and outer_ok(f)):
            first = low // f if inner_in > 0 else low // f + L // f - 1
            wp = CopyPlan(w, p.sizes[:-1] + (L // f,), first, tuple(t // f for t in p.in_strides[:-1]) + (inner_in,),
                          p.out_offset // f, tuple(t // f for t in p.out_strides[:-1]) + (1,))
            return w, (es if inner_in < 0 else 0), 0, wp
    return es, 0, 0, p


def copy_params(p: CopyPlan) -> P.CopyParams:
    q = P.CopyParams(element_size=p.element_size, rank=len(p.sizes), count=p.count, in_offset=p.in_offset,
                     out_offset=p.out_offset)
    _fill(q.sizes, p.sizes)
    _fill(q.in_strides, p.in_strides)
    _fill(q.out_strides, p.out_strides)
    return q


def _copy_launch(plan: CopyPlan, src_ptr: int, dst_ptr: int, src_len: int):
    w, rev, pick, p = word_plan(plan, src_ptr, dst_ptr, src_len)
    count = p.count
    nd = len(p.sizes)
    items = items_per_thread(w)
    name = f"strided_copy<{_SCALAR[w]}, {nd}, {rev}, {_index_type(count, items)}, {items}, {pick}>"
    grid = (math.ceil(count / (THREADS * items)),)
    return name, copy_params(p), grid, 0


# -- UNFOLD -------------------------------------------------------------------------

def unfold_box(plan: UnfoldPlan, columns: int = BOX_COLUMNS, line: int = BOX_LINE, budget: int = BOX_BYTES):
    """The box of blocks (t[0], ..., t[D-1]) one CUDA block of unfold_tile
    writes, and the extents of the input region it stages, or None where
    staging does not pay: the region would not fit in ``budget`` bytes even
    for a single column, it would hold more than twice the elements the box
    writes (strides far beyond the window), or there are 2^31 boxes or more."""
    D, nb = len(plan.window), plan.blocks
    if plan.out_count == 0:
        return None
    t = [1] * D
    t[-1] = min(nb[-1], line if D > 1 else columns)
    for d in range(D - 2, -1, -1):
        t[d] = min(nb[d], max(1, -(-columns // math.prod(t[d + 1:]))))

    def extents(t):
        return [(t[d] - 1) * plan.strides[d] + (plan.window[d] - 1) * plan.dilations[d] + 1 for d in range(D)]

    while math.prod(extents(t)) * plan.element_size > budget:
        d = next((d for d in range(D) if t[d] > 1), None)
        if d is None:
            return None
        t[d] = (t[d] + 1) // 2
    ext = extents(t)
    boxes = plan.batch * plan.channels * math.prod(-(-nb[d] // t[d]) for d in range(D))
    if math.prod(ext) > 2 * math.prod(t) * math.prod(plan.window) or boxes >= 2**31:
        return None
    return tuple(t), tuple(ext)


def tile_vectors(plan: UnfoldPlan, box) -> int:
    """unfold_tile's VEC argument: 1 where a box's output columns are one
    contiguous run per window element whose rows start 16 bytes apart
    (columns contiguous, rows a multiple of 16 bytes apart, the box spanning
    every dimension but the first whole), so that the kernel can write them
    with 16-byte stores (it checks the run's address itself); else 0, the
    one-element stores alone (a kernel without the vector path: it would
    cost the others registers)."""
    _, orow, ocol = plan.out_strides
    whole = all(box[d] == plan.blocks[d] for d in range(1, len(plan.window)))
    return int(ocol == 1 and orow >= 0 and orow * plan.element_size % 16 == 0 and whole)


def unfold_params(plan: UnfoldPlan, work_items: int) -> P.UnfoldParams:
    on, orow, ocol = plan.out_strides
    n_s, c_s, *sp_s = plan.in_strides
    q = P.UnfoldParams(element_size=plan.element_size, dims=len(plan.window), batch=plan.batch,
                       channels=plan.channels, window_count=math.prod(plan.window), block_count=plan.columns,
                       work_items=work_items, in_offset=plan.in_offset, in_batch_stride=n_s,
                       in_channel_stride=c_s, out_offset=plan.out_offset, out_batch_stride=on,
                       out_row_stride=orow, out_column_stride=ocol)
    P.set_window_dims(q, plan, sp_s)
    return q


def _unfold_launch(plan: UnfoldPlan, box=None):
    """(kernel name, parameter block, grid, dynamic shared memory bytes)."""
    es = plan.element_size
    r = 2 if es >= 2 else 1          # vectors of 16 bytes per thread
    v = 16 // es * r                 # columns per thread
    B = plan.columns
    slots = plan.batch * plan.rows * math.ceil(B / v)
    D = len(plan.window)
    sp_s = plan.in_strides[2:]
    params = unfold_params(plan, slots)
    tiles = plan.batch * plan.channels * math.ceil(plan.window[0] / 32) * math.ceil(B / 32)
    if D == 1 and abs(plan.strides[0] * sp_s[0]) >= TILE_MIN_STEP and plan.window[0] >= 8 and tiles < 2**31:
        index = _index_type(max(tiles, plan.batch * plan.channels * plan.window[0], B) * 32)
        return f"unfold1d_tile<{_SCALAR[es]}, {index}>", params, (tiles,), 0
    box = unfold_box(plan) if box is None else box
    if box:
        t, ext = box
        nboxes = [-(-plan.blocks[d] // t[d]) for d in range(D)]
        params.work_items = plan.batch * plan.channels * math.prod(nboxes)
        for d in range(D):
            params.dim[d].box, params.dim[d].box_extent, params.dim[d].box_count = t[d], ext[d], nboxes[d]
        return (f"unfold_tile<{_SCALAR[es]}, {D}, {tile_vectors(plan, t)}>", params, (params.work_items,),
                math.prod(ext) * es)
    name = f"unfold_gather<{_SCALAR[es]}, {D}, {_index_type(slots * v)}, {r}>"
    return name, params, (math.ceil(slots / THREADS),), 0


# -- FOLD ---------------------------------------------------------------------------

def fold_params(plan: FoldPlan, work_items: int) -> P.FoldParams:
    isn, isr, isc = plan.in_strides
    osn, osc, *sp_s = plan.out_strides
    q = P.FoldParams(element_size=plan.element_size, sum_kind=plan.sum_kind, dims=len(plan.window),
                     batch=plan.batch, channels=plan.channels, window_count=math.prod(plan.window),
                     block_count=plan.columns, work_items=work_items, in_offset=plan.in_offset,
                     in_batch_stride=isn, in_row_stride=isr, in_column_stride=isc, out_offset=plan.out_offset,
                     out_batch_stride=osn, out_channel_stride=osc)
    P.set_window_dims(q, plan, sp_s)
    return q


def fold_tile_residues(plan: FoldPlan) -> int:
    """fold1d_tile's residues per CUDA block (RC): 128 (on an H100 the
    overlap-add ran 0.280 ms with 128, 0.297 with 256: benchmarks/sweep_fold.py),
    halved while at least twice the stride, down to 32."""
    rc = 128
    while rc > 32 and rc >= 2 * plan.strides[0]:
        rc //= 2
    return rc


def fold_lanes(plan: FoldPlan) -> int:
    """fold_gather's image positions per lane (V): the largest of 4, 2, 1
    whose warps' runs of 32*V positions keep FOLD_LANE_USE of the lanes of an
    image line busy."""
    width = plan.spatial[-1]
    for v in (4, 2):
        if width / (math.ceil(width / (32 * v)) * 32 * v) >= FOLD_LANE_USE:
            return v
    return 1


def _fold_launch(plan: FoldPlan, variant=None):
    """(kernel name, parameter block, grid, 0). ``variant``: ("tile", RC) or
    ("gather", V) to force a kernel (tests, sweeps)."""
    es, D = plan.element_size, len(plan.window)
    flt = 1 if plan.sum_kind == P.SUM_FLOAT else 0
    if flt and es == 1:
        raise UnsupportedError("FOLD: no 1-byte floating-point type")
    if variant is None:
        variant = ("gather", FOLD_LANES or fold_lanes(plan))
        if D == 1 and plan.strides[0] >= FOLD_TILE_MIN_STRIDE:
            rc = fold_tile_residues(plan)
            if _fold_tiles(plan, rc) < 2**31:
                variant = ("tile", rc)
    if plan.out_count == 0:
        return f"fold_gather<{_SCALAR[es]}, {flt}, {D}, u32, 1>", fold_params(plan, 0), (0,), 0
    kind, arg = variant
    if kind == "tile":
        blocks = _fold_tiles(plan, arg)
        return f"fold1d_tile<{_SCALAR[es]}, {flt}, {arg}>", fold_params(plan, blocks), (blocks,), 0
    v = arg
    width = plan.spatial[-1]
    warps = plan.batch * plan.channels * math.prod(plan.spatial[:-1]) * math.ceil(width / (32 * v))
    name = f"fold_gather<{_SCALAR[es]}, {flt}, {D}, {_index_type(warps * 32)}, {v}>"
    return name, fold_params(plan, warps), (math.ceil(warps * 32 / THREADS),), 0


def _fold_tiles(plan: FoldPlan, rc: int) -> int:
    s, pad, width = plan.strides[0], plan.start_padding[0], plan.spatial[0]
    hops = (pad + width - 1) // s - pad // s + 1
    return plan.batch * plan.channels * math.ceil(hops / 32) * math.ceil(s / rc)


# -- SLICE_GRAD ---------------------------------------------------------------------

def canonical_scatter(plan: ScatterPlan) -> ScatterPlan:
    """Drop size-1 dimensions, order by output stride (largest first) and
    merge neighbours that walk both tensors as one dimension (the inner one
    wholly inside the window with step 1, the outer one with step 1)."""
    dims = [d for d in zip(plan.sizes, plan.out_strides, plan.first, plan.step, plan.taken, plan.in_strides)
            if not (d[0] == 1 and d[4] == 1)]
    dims.sort(key=lambda d: d[1], reverse=True)
    merged: list = []
    for d in dims:
        if merged:
            size, os, first, step, taken, is_ = merged[-1]
            if (os == d[1] * d[0] and d[2] == 0 and d[3] == 1 and d[4] == d[0] and step == 1
                    and is_ == d[5] * d[4]):
                merged[-1] = (size * d[0], d[1], first * d[0], 1, taken * d[0], d[5])
                continue
        merged.append(d)
    if not merged:
        merged = [(1, 1, 0, 1, 1, 1)]
    size, os, first, step, taken, is_ = (tuple(x) for x in zip(*merged))
    return ScatterPlan(plan.element_size, size, plan.out_offset, os, first, step, taken, plan.in_offset, is_)


def scatter_word_plan(plan: ScatterPlan, src_ptr: int, dst_ptr: int):
    """Widen SLICE_GRAD to the largest word (up to 16 bytes) where the
    innermost dimension is contiguous in the output and in the input (+1, or
    -1: elements reversed inside each word), the window's first position and
    size, every offset, stride and pointer allow. Returns (word bytes,
    reversed element size or 0, plan in words)."""
    p = canonical_scatter(plan)
    es = p.element_size
    L, first, step, taken, is_, os_ = (p.sizes[-1], p.first[-1], p.step[-1], p.taken[-1], p.in_strides[-1],
                                       p.out_strides[-1])
    if os_ != 1 or step != 1 or abs(is_) != 1:
        return es, 0, p
    for w in (16, 8, 4, 2):
        f = w // es
        if f <= 1:
            break
        low = p.in_offset if is_ > 0 else p.in_offset - (f - 1)   # lowest element of the first input word
        if (L % f == 0 and first % f == 0 and taken % f == 0 and low % f == 0 and p.out_offset % f == 0
                and src_ptr % w == 0 and dst_ptr % w == 0
                and all(t % f == 0 for t in p.in_strides[:-1] + p.out_strides[:-1])):
            wp = ScatterPlan(w, p.sizes[:-1] + (L // f,), p.out_offset // f,
                             tuple(t // f for t in p.out_strides[:-1]) + (1,), p.first[:-1] + (first // f,),
                             p.step, p.taken[:-1] + (taken // f,), low // f,
                             tuple(t // f for t in p.in_strides[:-1]) + (is_,))
            return w, (es if is_ < 0 else 0), wp
    return es, 0, p


def scatter_params(p: ScatterPlan) -> P.ScatterParams:
    q = P.ScatterParams(element_size=p.element_size, rank=len(p.sizes), count=p.count, in_offset=p.in_offset,
                        out_offset=p.out_offset)
    for name in ("sizes", "out_strides", "first", "step", "taken", "in_strides"):
        _fill(getattr(q, name), getattr(p, name))
    return q


def _scatter_launch(plan: ScatterPlan, src_ptr: int, dst_ptr: int):
    w, rev, p = scatter_word_plan(plan, src_ptr, dst_ptr)
    count = p.count
    items = items_per_thread(w)
    name = f"scatter<{_SCALAR[w]}, {len(p.sizes)}, {rev}, {_index_type(count, items)}, {items}>"
    return name, scatter_params(p), (math.ceil(count / (THREADS * items)),), 0


# -- the move program (MovePlan: the data-movement family) ---------------------------

class MoveLaunch:
    """The launches of one ``MovePlan``: ``(Launch, source slot, destination
    slot)`` per kernel, run in order by ``launch(src_ptrs, dst_ptrs,
    stream_ptr=0)`` (a source slot of -1: a fill, given the destination's
    address as its unused source)."""

    __slots__ = ("plan", "steps")

    def __init__(self, plan, steps):
        self.plan, self.steps = plan, steps

    def __call__(self, src_ptrs, dst_ptrs, stream_ptr: int = 0) -> None:
        for rec, s, d in self.steps:
            dp = dst_ptrs[d]
            rec(src_ptrs[s] if s >= 0 else dp, dp, stream_ptr)

    @property
    def names(self) -> list[str]:
        """The kernels launched, in order."""
        return [rec.name for rec, _, _ in self.steps]


#: Plain passes (same type, no map, no scale/bias) go through ``strided_copy``
#: where it widens them to 8- or 16-byte words or they have at most 2
#: dimensions once merged, else through ``move_copy`` (multiply-shift
#: division): "auto". "strided_copy" / "move" force one (benchmarks, tests).
MOVE_PLAIN_VIA = "auto"
#: How a padding program (PADDING/PADDING1's interior copy and border slabs)
#: runs. "elems": one ``move_pade`` launch over the whole output, element by
#: element (``PAD_ITEMS`` a thread), where ``move_padw`` could take it, else as
#: "rows". "words": as one ``move_padw`` launch over the whole
#: output, in aligned 16-byte output words whatever the row length (interior
#: words as realigned 16-byte source words, borders and row crossings element
#: by element through the maps, every load of a thread before its stores),
#: where the output is contiguous and ``move_pad`` could take it, else as
#: "rows". "rows": one ``move_pad`` launch, a warp per output row (borders
#: element by element through the row's map, the interior as realigned
#: 16-byte words), where the output's innermost dimension is contiguous on
#: both sides and at least ``PAD_ROWS_MIN`` elements long, else pass by pass.
#: True: one ``move_vec`` pass over the whole output with per-axis maps
#: (CONSTANT: a fill where any axis falls outside the input). False: pass by
#: pass, the interior through strided_copy/move_vec. On an H100
#: (benchmarks/gpu_family.py --variants, 256 MiB float32, pad 1 on H and W;
#: session 6) pass by pass ran 0.28-0.30 ms in every mode, fused move_vec
#: 0.32-0.34 ms (its sources are misaligned by the padding: element loads),
#: move_pad 0.27 ms (0.69-0.71 of copy); session 7's move_padw: see
#: benchmarks/RESULTS.md.
FUSE_PAD = "words"
#: move_padw's (words per thread, minimum resident blocks per multiprocessor
#: (its register cap: __launch_bounds__(256, MINB)), flags: 2 a persistent
#: grid of multiprocessors x MINB blocks). On an H100 (session 7) one word a
#: thread with 8 resident blocks (32 registers) ran fastest: 0.201-0.212 ms,
#: 0.91-0.96 of copy; 1 word with no register cap 0.234-0.240 ms, 2 words
#: with 6 blocks 0.255-0.268 ms; the persistent grid no faster (H200).
PAD_WORDS = (1, 8, 0)
#: On an H200 (session 13, benchmarks/gpu_h200.py, pad 1/3/5 of (16,64,256,256)
#: float32; copy 4.0-4.15 TB/s) move_padw (1, 8, 0) ran 0.167-0.204 ms
#: (0.68-0.81 of copy); its shuffle flag (1, 8, 4) 0.175-0.204 (0.65-0.74),
#: (2, 8, 0) 0.193-0.227, (2, 4, 0) 0.280-0.300, (4, 4, 0) 0.349-0.383, the
#: persistent grid (1, 8, 2) level with the default; move_pad rows
#: 0.238-0.282; move_pade (below) 0.231-0.311 (0.44-0.58); pass by pass
#: 0.223-0.295.
#: move_pade's elements a thread (FUSE_PAD "elems": the fused padding pass
#: element by element, coalesced scalar accesses; measured slower than
#: move_padw, see above); 0: 16 bytes' worth, 4 at least.
PAD_ITEMS = 0
#: Contiguous one-dimensional conversion or scale/bias passes (CAST,
#: identity with scale/bias on dense tensors): ``move_cvt`` with this many
#: V-element runs a thread (all loads first; float32 -> float16 two elements
#: per hardware conversion), where > 0; 0: ``move_vec`` (one run a thread).
#: On an H100 (session 7, 256 MiB float32) one run a thread was the fastest
#: or tied: float32 -> float16 0.1475 ms (2: 0.148-0.149, 4: 0.148, move_vec
#: 0.157), -> int32 0.190 (2: 0.193-0.196), x*2+1 0.192 (2: 0.198-0.204).
CVT_UNROLL = 1
#: move_cvt's flags: 2 a persistent grid (measured slower on an H200: 0.115
#: against 0.105 ms for float32 -> float16).
CVT_FLAGS = 0
PAD_ROWS_MIN = 16
#: Plain passes that word_plan widens to aligned 16-byte words (no reversal)
#: in at least ``WORD_COPY_MIN_RANK`` dimensions: ``move_wcopy`` with this
#: many words a thread (multiply-shift division, all loads first), where > 0;
#: else ``strided_copy`` (one word a thread, hardware division). On an H200
#: (benchmarks/gpu_h200.py, session 13, 256 MiB float32 outputs) TILE
#: (1,1,2,2) ran 0.103 ms through strided_copy (0.78 of copy), 0.092 / 0.087 /
#: 0.089 ms with 1 / 2 / 4 words a thread; (1,1,3,3) 0.221 against 0.187 /
#: 0.171 / 0.172; a 2-dimensional JOIN 0.135 against 0.134 / 0.139 / 0.140.
WORD_COPY = 2
WORD_COPY_MIN_RANK = 3
_MAP_CONSTANT = 5


class _Pass:
    """One kernel's work: dims are [size, src_stride, dst_stride, map mode,
    map shift, map size] (mode 0: no map)."""

    __slots__ = ("fill", "src", "dst", "dims", "src_offset", "dst_offset", "st", "dt", "sb", "fill_bits")

    def __init__(self, fill, src, dst, dims, src_offset, dst_offset, st, dt, sb=None, fill_bits=0):
        self.fill, self.src, self.dst, self.dims = fill, src, dst, dims
        self.src_offset, self.dst_offset, self.st, self.dt = src_offset, dst_offset, st, dt
        self.sb, self.fill_bits = sb, fill_bits

    @property
    def count(self) -> int:
        return math.prod(d[0] for d in self.dims)


def _map_source(mode: int, shift: int, n: int, d: int):
    """plan.AxisMap.source, with CONSTANT (None outside the input)."""
    i = d - shift
    if 0 <= i < n:
        return i
    if mode == _MAP_CONSTANT:
        return None
    if mode == 1:
        return min(max(i, 0), n - 1)
    if mode == 4:
        return i % n
    if mode == 3:
        r = i % (2 * n)
        return r if r < n else 2 * n - 1 - r
    if n == 1:
        return 0
    r = i % (2 * (n - 1))
    return r if r < n else 2 * (n - 1) - r


def _fill_bits(value, type_value: int) -> int:
    """The destination word of a Fill value, by the CPU backend's conversion."""
    from ...model.data_type import DataType
    from ..cpu.numpy_kernels import convert_array
    dt = DataType(type_value).numpy_dtype
    word = convert_array(np.array([value]), dt)[0:1].view(_NUMPY_WORD[dt.itemsize])[0]
    return int(word)


def _canonical(k: _Pass) -> _Pass:
    """Size-1 dimensions dropped (a mapped one's source coordinate folded into
    the source offset; a CONSTANT one outside the input makes the pass a
    fill), dimensions ordered by destination stride (largest first), unmapped
    neighbours that walk both sides as one merged."""
    kept, src_offset, fill = [], k.src_offset, k.fill
    for d in k.dims:
        n, ss, ds, mode, shift, msize = d
        if n == 1:
            if mode and not fill:
                i = _map_source(mode, shift, msize, 0)
                if i is None:
                    fill = True
                else:
                    src_offset += i * ss
            continue
        kept.append(list(d))
    if fill:
        kept = [[n, 0, ds, 0, 0, 0] for n, _, ds, *_ in kept]
    kept.sort(key=lambda d: d[2], reverse=True)
    merged: list = []
    for d in kept:
        if merged:
            o = merged[-1]
            if not o[3] and not d[3] and o[2] == d[2] * d[0] and o[1] == d[1] * d[0]:
                merged[-1] = [o[0] * d[0], d[1], d[2], 0, 0, 0]
                continue
        merged.append(d)
    if not merged:
        merged = [[1, 0, 0, 0, 0, 0]]
    return _Pass(fill, -1 if fill else k.src, k.dst, merged, src_offset, k.dst_offset, k.st, k.dt, k.sb,
                 k.fill_bits)


def _pad_program(plan: MovePlan):
    """``(mode, fill value, start, end)`` where ``plan`` is exactly the
    program PADDING/PADDING1 lower to (``ops._move.pad_passes``: the interior
    copy, then per axis the start and end slabs, Fills for CONSTANT (mode 0)
    or Copies with AxisMaps): the plan's own ``pad``, which only that
    lowering sets (``MovePlan.padded``); else None (pass by pass)."""
    pad = plan.pad
    if pad is None or len(plan.passes) < 2 or len(plan.in_types) != 1 or plan.in_types != plan.out_types:
        return None
    first = plan.passes[0]
    if not isinstance(first, Copy) or first.maps is not None or first.scale_bias is not None:
        return None
    return pad


def kernel_passes(plan: MovePlan, fuse: bool | None = None) -> list[_Pass]:
    """The program's passes as kernel work, canonical (a padding program fused
    into one pass over the whole output where ``fuse``, default ``FUSE_PAD``)."""
    st_of, dt_of = plan.in_types, plan.out_types
    if (FUSE_PAD if fuse is None else fuse) is True:
        pad = _pad_program(plan)
        if pad is not None:
            mode, value, start, end = pad
            first = plan.passes[0]
            dims = []
            for a, s, e, ss, ds in zip(first.sizes, start, end, first.src_strides, first.dst_strides):
                m = (mode or _MAP_CONSTANT) if s or e else 0
                dims.append([a + s + e, ss, ds, m, s if m else 0, a if m else 0])
            bits = _fill_bits(value, dt_of[0]) if mode == 0 else 0
            return [_canonical(_Pass(False, 0, 0, dims, first.src_offset, 0, st_of[0], dt_of[0], None, bits))]
    out = []
    for q in plan.passes:
        if q.count == 0:
            continue
        if isinstance(q, Fill):
            dims = [[n, 0, ds, 0, 0, 0] for n, ds in zip(q.sizes, q.dst_strides)]
            k = _Pass(True, -1, q.dst, dims, 0, q.dst_offset, dt_of[q.dst], dt_of[q.dst], None,
                      _fill_bits(q.value, dt_of[q.dst]))
        else:
            maps = q.maps or (None,) * len(q.sizes)
            dims = [[n, ss, ds, m.mode if m else 0, m.shift if m else 0, m.size if m else 0]
                    for n, ss, ds, m in zip(q.sizes, q.src_strides, q.dst_strides, maps)]
            k = _Pass(False, q.src, q.dst, dims, q.src_offset, q.dst_offset, st_of[q.src], dt_of[q.dst],
                      q.scale_bias)
        out.append(_canonical(k))
    return out


def _magic(d: int) -> tuple[int, int]:
    """(multiplier, shift) of the 32-bit multiply-shift division by d
    (q = (umulhi(n, m) + n) >> s, exact for n < 2^31)."""
    s = 0
    while (1 << s) < d:
        s += 1
    return ((1 << 32) * ((1 << s) - d)) // d + 1, s


def _i64(v: int) -> int:
    """An unsigned 64-bit pattern as the signed value a c_int64 field holds."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def move_params(k: _Pass) -> P.MoveParams:
    q = P.MoveParams(rank=len(k.dims), count=k.count, src_offset=k.src_offset, dst_offset=k.dst_offset,
                     src_type=k.st, dst_type=k.dt, scale_bias=1 if k.sb is not None else 0,
                     fill_bits=_i64(k.fill_bits))
    if k.sb is not None:
        q.scale32 = int(np.float32(k.sb[0]).view(np.uint32))
        q.bias32 = int(np.float32(k.sb[1]).view(np.uint32))
        q.scale64 = _i64(int(np.float64(k.sb[0]).view(np.uint64)))
        q.bias64 = _i64(int(np.float64(k.sb[1]).view(np.uint64)))
    for i, (n, ss, ds, mode, shift, msize) in enumerate(k.dims):
        d = q.dim[i]
        d.size, d.src_stride, d.dst_stride, d.map_mode, d.map_shift, d.map_size = n, ss, ds, mode, shift, msize
        d.div_magic, d.div_shift = _magic(n)
    return q


def _pad_row_pass(plan: MovePlan):
    """``(fused pass, rows)`` where ``plan`` is a padding program that
    ``move_pad`` runs (its fused pass's innermost dimension of stride 1 on
    both sides and at least ``PAD_ROWS_MIN`` long), else None."""
    if _pad_program(plan) is None:
        return None
    ks = kernel_passes(plan, True)
    if len(ks) != 1:
        return None
    k = ks[0]
    if k.fill or k.st != k.dt or k.sb is not None or len(k.dims) >= P.MAX_MOVE_RANK:
        return None
    n, ss, ds = k.dims[-1][:3]
    if ss != 1 or ds != 1 or n < PAD_ROWS_MIN or n >= 2**31 - 64 or k.dims[-1][5] >= 2**31:
        return None
    return k, k.count // n


def _pad_words_ok(k: _Pass) -> bool:
    """Whether ``move_padw`` takes the fused padding pass ``k`` (one of
    ``_pad_row_pass``): the output contiguous (destination offset 0,
    row-major strides), 32-bit indices with room for the grid's last words,
    every size, map shift and map size below 2^30."""
    if k.dst_offset != 0:
        return False
    stride = 1
    for n, ss, ds, mode, shift, msize in reversed(k.dims):
        if ds != stride or n >= 2**30 or abs(shift) >= 2**30 or msize >= 2**30:
            return False
        stride *= n
    return k.count + THREADS * 16 * 16 + 64 < 2**31


def _move_items(src_bytes: int, dst_bytes: int) -> int:
    """move_vec's V: 16 bytes of the wider side (4 elements at least); a
    narrowing conversion twice that where it fills 16 destination bytes
    (float32 -> float16: 8, two 16-byte loads and one 16-byte store)."""
    v = max(4, 16 // max(src_bytes, dst_bytes))
    if dst_bytes < src_bytes:
        v = max(v, min(16 // dst_bytes, 2 * v))
    return v


def _tile_pass(k: _Pass, es: int):
    """``(group pass, R, V, X, Y)`` where the plain pass ``k`` is a small
    transpose that ``move_tile`` moves as R x V tiles, else None: X a
    dimension of at most 8 positions, Y one whose V positions (a 16-byte run
    of elements) are consecutive on one side while X's are on the other
    (SPACE_TO_DEPTH: X the block column, stride 1 in the source, Y the
    output's innermost dimension, source stride R; DEPTH_TO_SPACE: X the
    output's innermost dimension, Y the next, source stride 1, destination
    stride R). The group pass is ``k`` without X and with Y divided by V."""
    dims = k.dims
    nd = len(dims)
    V = max(2, 16 // es)
    if nd < 2 or nd + 1 > P.MAX_MOVE_RANK or dims[-1][2] != 1:
        return None
    L = nd - 1
    pick = None
    if 2 <= dims[L][0] <= 8 and dims[L - 1][1] == 1 and dims[L - 1][2] == dims[L][0]:
        pick = (L, L - 1)                                      # X innermost, Y the next
    else:
        for x in range(L):
            if 2 <= dims[x][0] <= 8 and dims[x][1] == 1 and dims[L][1] == dims[x][0]:
                pick = (x, L)
                break
    if pick is None:
        return None
    x, y = pick
    if dims[y][0] % V:
        return None
    R = dims[x][0]
    group = []
    for i, d in enumerate(dims):
        if i == x:
            continue
        if i == y:
            group.append([d[0] // V, d[1] * V, d[2] * V, 0, 0, 0])
        else:
            group.append(list(d))
    g = _Pass(False, k.src, k.dst, group, k.src_offset, k.dst_offset, k.st, k.dt)
    return g, R, V, dims[x], dims[y]


#: Plain passes that transpose (the destination's innermost dimension is not
#: the source's: ``_transpose_pass``) go through ``move_transpose`` in square
#: tiles of this many elements a side (32 or 64; 0: off, the passes then take
#: move_vec), where both transposed dimensions are at least
#: ``TRANSPOSE_MIN`` long (shorter ones leave most of a tile idle; move_tile
#: takes the small transposes of SPACE_TO_DEPTH and DEPTH_TO_SPACE). On an
#: H200 (session 13, 256 MiB float32) an NCHW view of an NHWC tensor made
#: contiguous ran 0.134 ms with 64 (0.96 of copy), 0.159 ms with 32, 0.486 ms
#: through move_vec; a 256 MiB 5-D permutation 0.071 / 0.103 / 0.248 ms.
TRANSPOSE_TILE = 64
TRANSPOSE_MIN = 16


def _transpose_pass(k: _Pass):
    """``(outer pass, X, Y)`` where the plain pass ``k`` is a transposing copy
    that ``move_transpose`` moves in tiles, else None: X the destination's
    innermost dimension (destination stride 1, its source stride not 1), Y
    the dimension of source stride 1 (destination stride not 1), both at
    least ``TRANSPOSE_MIN`` long; the outer pass holds the other dimensions
    (its count: the tiles' outer positions, 1 where there are none)."""
    if not TRANSPOSE_TILE:
        return None
    dims = k.dims
    nd = len(dims)
    if nd < 2 or nd + 1 > P.MAX_MOVE_RANK or dims[-1][2] != 1 or dims[-1][1] == 1:
        return None
    X = dims[-1]
    y = next((i for i in range(nd - 1) if dims[i][1] == 1), None)
    if y is None:
        return None
    Y = dims[y]
    if X[0] < TRANSPOSE_MIN or Y[0] < TRANSPOSE_MIN or Y[2] == 1:
        return None
    outer = [list(d) for i, d in enumerate(dims[:-1]) if i != y]
    g = _Pass(False, k.src, k.dst, outer, k.src_offset, k.dst_offset, k.st, k.dt)
    t = TRANSPOSE_TILE
    if g.count * -(-X[0] // t) * -(-Y[0] // t) >= 2**31:
        return None
    return g, X, Y


def _transpose_params(g: _Pass, X, Y) -> P.MoveParams:
    q = move_params(g)
    n = len(g.dims)
    q.rank = n
    q.count = g.count
    for i, d in ((n, X), (n + 1, Y)):
        q.dim[i].size, q.dim[i].src_stride, q.dim[i].dst_stride = d[0], d[1], d[2]
        q.dim[i].div_magic, q.dim[i].div_shift = _magic(d[0])
    return q


def _tile_params(g: _Pass, X, Y) -> P.MoveParams:
    q = move_params(g)
    n = len(g.dims)
    q.dim[n].size, q.dim[n].src_stride, q.dim[n].dst_stride = X[0], X[1], X[2]
    q.dim[n + 1].size, q.dim[n + 1].src_stride, q.dim[n + 1].dst_stride = 0, Y[1], Y[2]
    return q


def move_steps(plan: MovePlan, src_ptrs, src_elements, dst_ptrs, fuse: bool | None = None,
               plain_via: str | None = None, sms: int | None = None):
    """Per kernel: (name, parameter block, grid, shared memory bytes, source
    slot or -1, destination slot). A padding program: one ``move_padw`` or
    ``move_pad`` launch (``FUSE_PAD``). Plain passes: ``strided_copy`` where it
    widens them to 16-byte words (or ``plain_via`` says so), else
    ``move_transpose`` where they transpose two long dimensions
    (``_transpose_pass``: tiles through shared memory), ``move_tile`` where
    they are a small transpose (``_tile_pass``), else ``move_vec``; contiguous one-dimensional conversions ``move_cvt``
    (``CVT_UNROLL``); the others ``move_vec`` (V destination elements a
    thread). ``sms``: the device's multiprocessors, for kernels on a
    persistent grid (None: one block per work block)."""
    from ...model.data_type import DataType
    via = plain_via or MOVE_PLAIN_VIA
    steps = []
    how = FUSE_PAD if fuse is None else fuse
    if how in ("rows", "words", "elems"):
        pad = _pad_row_pass(plan)
        if pad is not None:
            k, rows = pad
            es = DataType(k.dt).size
            if how == "elems" and _pad_words_ok(k):
                items = PAD_ITEMS or max(4, 16 // es)
                blocks = math.ceil(k.count / (THREADS * items))
                return [(f"move_pade<{_SCALAR[es]}, {len(k.dims)}, {items}>", move_params(k), (blocks,), 0, k.src,
                         k.dst)]
            if how == "words" and _pad_words_ok(k):
                U, minb, flags = PAD_WORDS
                blocks = math.ceil((k.count // (16 // es) + 2) / (THREADS * U))
                if flags & 2 and sms:
                    blocks = min(blocks, sms * minb)
                name = f"move_padw<{_SCALAR[es]}, {len(k.dims)}, {U}, {minb}, {flags}>"
                return [(name, move_params(k), (blocks,), 0, k.src, k.dst)]
            index = "u32" if rows + 8 < 2**31 else "u64"
            name = f"move_pad<{_SCALAR[es]}, {len(k.dims)}, {index}>"
            return [(name, move_params(k), (math.ceil(rows / (THREADS // 32)),), 0, k.src, k.dst)]
        fuse = False
    elif how is not True:
        fuse = False
    for k in kernel_passes(plan, fuse):
        count = k.count
        if count == 0:
            continue
        des = DataType(k.dt).size
        nd = len(k.dims)
        if k.fill:
            items = _move_items(des, des)
            index = "u32" if count + THREADS * items < 2**31 else "u64"
            grid = (math.ceil(count / (THREADS * items)),)
            steps.append((f"move_fill<{_SCALAR[des]}, {nd}, {index}, {items}>", move_params(k), grid, 0, -1, k.dst))
            continue
        ses = DataType(k.st).size
        maps = any(d[3] for d in k.dims)
        conv = k.st != k.dt or k.sb is not None
        if not maps and not conv and via != "move":
            if nd <= P.MAX_RANK:
                sizes = tuple(d[0] for d in k.dims)
                cp = CopyPlan(ses, sizes, k.src_offset, tuple(d[1] for d in k.dims), k.dst_offset,
                              tuple(d[2] for d in k.dims))
                w, rev, pick, wp = word_plan(cp, src_ptrs[k.src], dst_ptrs[k.dst], src_elements[k.src])
                if via != "strided_copy" and WORD_COPY and w == 16 and not rev and not pick \
                        and WORD_COPY_MIN_RANK <= len(wp.sizes) <= P.MAX_MOVE_RANK and not _tile_pass(k, ses):
                    U = WORD_COPY
                    wk = _Pass(False, k.src, k.dst, [[n, a, b, 0, 0, 0] for n, a, b in
                                                     zip(wp.sizes, wp.in_strides, wp.out_strides)],
                               wp.in_offset, wp.out_offset, k.st, k.dt)
                    wc = wp.count
                    index = "u32" if wc + THREADS * U < 2**31 else "u64"
                    steps.append((f"move_wcopy<{len(wp.sizes)}, {index}, {U}>", move_params(wk),
                                  (math.ceil(wc / (THREADS * U)),), 0, k.src, k.dst))
                    continue
                if via == "strided_copy" or (w >= 16 and not _tile_pass(k, ses)):
                    name, params, g, smem = _copy_launch(cp, src_ptrs[k.src], dst_ptrs[k.dst],
                                                         src_elements[k.src])
                    steps.append((name, params, g, smem, k.src, k.dst))
                    continue
        if not maps and not conv:
            tr = _transpose_pass(k)
            if tr is not None:
                g, X, Y = tr
                t = TRANSPOSE_TILE
                blocks = g.count * -(-X[0] // t) * -(-Y[0] // t)
                steps.append((f"move_transpose<{_SCALAR[ses]}, {len(g.dims)}, {t}>", _transpose_params(g, X, Y),
                              (blocks,), 0, k.src, k.dst))
                continue
            tile = _tile_pass(k, ses)
            if tile is not None:
                g, R, V, X, Y = tile
                gc = g.count
                index = "u32" if gc + THREADS < 2**31 else "u64"
                steps.append((f"move_tile<{_SCALAR[ses]}, {len(g.dims)}, {index}, {R}, {V}>",
                              _tile_params(g, X, Y), (math.ceil(gc / THREADS),), 0, k.src, k.dst))
                continue
        V = _move_items(ses, des)
        sb = int(k.sb is not None)
        if conv and not maps and CVT_UNROLL > 0 and nd == 1 and k.dims[0][1] == 1 and k.dims[0][2] == 1:
            U, flags = CVT_UNROLL, CVT_FLAGS
            index = "u32" if count + THREADS * V * U < 2**31 else "u64"
            grid = (math.ceil(count / (THREADS * V * U)),)
            if flags & 2 and sms:
                grid = (min(grid[0], sms * (8 if U <= 2 else 4)),)
            name = f"move_cvt<{_SCALAR[ses]}, {_SCALAR[des]}, {index}, {V}, {k.st}, {k.dt}, {sb}, {U}, {flags}>"
            steps.append((name, move_params(k), grid, 0, k.src, k.dst))
            continue
        index = "u32" if count + THREADS * V < 2**31 else "u64"
        grid = (math.ceil(count / (THREADS * V)),)
        name = f"move_vec<{_SCALAR[ses]}, {_SCALAR[des]}, {nd}, {index}, {V}, {k.st}, {k.dt}, {sb}, {int(maps)}>"
        steps.append((name, move_params(k), grid, 0, k.src, k.dst))
    return steps
