"""Compiling opendml's CUDA kernels (NVRTC through CuPy, cached per device and specialisation) and launching them.

Sources (``kernel_file``): ``kernels.cu``, the tuned SLICE, UNFOLD, FOLD and SLICE_GRAD kernels; ``move.cu``, the move
program's copies, fills and conversions; ``layout.cu``, its transposes and padding kernels. Every kernel takes (source
words, destination words, parameter block): one of ``runtime/params.h``'s C structs (NVRTC gets ``-I<runtime dir>``),
filled through its ctypes mirror in ``opendml.runtime.params`` and passed BY VALUE (``cuLaunchKernel`` copies its
bytes, at most ``MAX_PARAM_BYTES``): a launch allocates no device memory, makes no upload and can be captured into a
CUDA graph. ``--fmad=false``: no multiply is fused into FOLD's sums. A first launch (compiling or loading its kernel)
runs with the thread's stream-capture mode relaxed; launch errors raise ``RuntimeError`` naming the kernel and the
driver's error. CuPy is imported here only, i.e. only when a CUDA device is asked for.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import pathlib
import sys
import threading
import types

from ...model.errors import UnsupportedError
from .. import params as P

HERE = pathlib.Path(__file__).parent
KERNELS = HERE / "kernels.cu"
#: The move program's kernels (MovePlan: the data-movement family).
MOVE_KERNELS = HERE / "move.cu"
#: Its transposing and padding kernels (they include move.cu).
LAYOUT_KERNELS = HERE / "layout.cu"
LAYOUT_NAMES = ("move_tile", "move_transpose", "move_pad", "move_padw", "move_padr")
#: The index-driven passes' kernels (``ix_*``: runtime/cuda/index.py).
INDEX_KERNELS = HERE / "index.cu"
#: Folder of params.h, the parameter blocks declared once for the C and CUDA kernels.
INCLUDE = P.HEADER.parent
#: NVRTC options of every module.
OPTIONS = ("-std=c++17", f"-I{INCLUDE}", f"-I{HERE}", "--fmad=false")
THREADS = 256
#: The largest parameter block; a kernel's arguments may take 4 KiB.
MAX_PARAM_BYTES = max(ctypes.sizeof(t) for t in (P.CopyParams, P.UnfoldParams, P.FoldParams, P.ScatterParams,
                                                 P.MoveParams))
assert 2 * 8 + MAX_PARAM_BYTES <= 4096


_SCALAR = {1: "u8", 2: "u16", 4: "u32", 8: "u64", 16: "uint4"}


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
    """A kernel file headed by a digest of params.h and move.cu: CuPy's disk cache keys on source text and options,
    not included files, so a changed header must change the source."""
    digest = hashlib.sha256(P.HEADER.read_bytes() + MOVE_KERNELS.read_bytes()).hexdigest()[:16]
    return f"// params.h, move.cu {digest}\n" + path.read_text(encoding="utf-8")


def kernel_file(name: str) -> pathlib.Path:
    """The source file of kernel ``name`` (e.g. ``move_padw<u32, 3, 1, 8, 0>``)."""
    base = name.split("<", 1)[0]
    if base in LAYOUT_NAMES:
        return LAYOUT_KERNELS
    return MOVE_KERNELS if base.startswith("move_") else INDEX_KERNELS if base.startswith("ix_") else KERNELS



class Kernel:
    """One compiled specialisation: ``ptr`` is the driver's CUfunction (the launches use it). For tuning scripts,
    calling it runs the kernel as CuPy's ``Function`` call does: ``k(grid, block, (src_ptr, dst_ptr, params),
    shared_mem=0, stream=None)``, ``params`` a ``runtime.params`` structure (by value), the pointers ints or CuPy
    arrays, ``stream`` a CuPy stream (default: CuPy's current one)."""

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
    """One compiled specialisation from ``kernel_file(name)``, e.g. ``strided_copy<uint4, 3, 0, u32, 1, 0>``, with
    the thread's stream-capture mode relaxed (a first call may come during a CUDA graph capture)."""
    cupy = _cupy()
    with capture_relaxed(), cupy.cuda.Device(device_id):
        module = cupy.RawModule(code=_source(kernel_file(name)), options=options, name_expressions=(name,))
        return Kernel(module.get_function(name).kernel, name)


def device_params(params: ctypes.Structure) -> ctypes.Structure:
    """The parameter block as a kernel takes it (by value): a copy of the structure, for tuning scripts' ``Kernel``
    calls."""
    return type(params).from_buffer_copy(params)


# -- the driver's launch entry point ----------------------------------------------

_CU_ERROR_INVALID_CONTEXT = 201
_CU_ERROR_INVALID_HANDLE = 400
_CU_ERROR_CONTEXT_IS_DESTROYED = 709


@functools.cache
def _driver():
    """(cuLaunchKernel, cuGetErrorName, cuThreadExchangeStreamCaptureMode or None) from the CUDA driver library
    through ctypes, or None where it cannot be loaded. cuLaunchKernel has no argtypes (called with ready-made ctypes
    objects: no per-call conversion)."""
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
    """The calling thread's stream-capture mode relaxed (``cuThreadExchangeStreamCaptureMode``) for the block, then
    restored: loading a module or querying the device while a stream of this thread (or, in "global" mode, of any
    thread) captures a CUDA graph is then allowed instead of invalidating the capture. Nothing is enqueued inside."""
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
    """opendml's C ``cuda_launch`` (in the CPU extension), or None where it is not built."""
    from ..cpu.backend import _load_native
    native = _load_native()
    return None if native is None else native.cuda_launch


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


#: How launches are made: "native" (cuLaunchKernel from opendml's C extension, native/cuda_launch.c) where the
#: extension and the driver library load, else "driver" (through ctypes), else "cupy" (CuPy's binding). Benchmarks
#: may set it before a backend builds its launches.
LAUNCH_VIA = "native"


def launch_route(via: str) -> str:
    """The route a launch asked to go ``via`` takes here (see ``LAUNCH_VIA``)."""
    if via not in ("native", "driver") or _driver() is None:
        return "cupy"
    return "native" if via == "native" and _fast_launch() is not None else "driver"


class Launch:
    """One cached launch: a compiled kernel, its parameter block (a ctypes structure in host memory, owned here, passed
    by value), the grid, and the driver's argument array whose two pointer slots are rewritten per call.
    ``launch(src_ptr, dst_ptr, stream_ptr)`` queues it. ``function_ptr``: the kernel's CUfunction; ``params_ptr``: the
    HOST address of the parameter structure (alive while this Launch is), native/cuda_launch.c's third launch
    argument; ``via``: "native", "driver" or "cupy" (``LAUNCH_VIA``, where available)."""

    __slots__ = ("name", "blocks", "smem", "function", "params", "plan", "backend", "_src", "_dst", "_argv",
                 "_call", "_lock", "_fast", "function_ptr", "params_ptr", "via")
    threads = THREADS                 # threads a CUDA block

    def __init__(self, backend, plan, name, kernel, params, blocks, smem, via):
        self.backend, self.plan, self.name = backend, plan, name
        self.function, self.params = kernel, params
        self.blocks, self.smem = blocks, smem
        self._lock = threading.Lock()
        self.function_ptr, self.params_ptr = kernel.ptr, ctypes.addressof(params)
        self.via = launch_route(via)
        # cuLaunchKernel from opendml's C extension: no per-call argument conversion (native/cuda_launch.c). The
        # other routes' ctypes objects are made on first use (_slow): a launch for one new shape is rarely retried.
        self._fast = _fast_launch() if self.via == "native" else None
        self._call = self._argv = self._src = self._dst = None

    def _slow(self):
        """The ctypes route's objects, made once (``_lock`` held): the two pointer slots, the driver's argument array
        (each argument's address; the third the parameter structure itself, by value) and the bound
        ``cuLaunchKernel`` ``_call(stream, argv, extra)`` (CuPy's binding on its route)."""
        if self._argv is None:
            self._src, self._dst = ctypes.c_uint64(0), ctypes.c_uint64(0)
            if self.via != "cupy":
                u = ctypes.c_uint
                self._call = functools.partial(_driver()[0], ctypes.c_void_p(self.function_ptr), u(self.blocks), u(1),
                                               u(1), u(THREADS), u(1), u(1), u(self.smem))
            else:
                launch = self.backend.cupy.cuda.driver.launchKernel
                fn, blocks, smem = self.function_ptr, self.blocks, self.smem      # (not self: no cycle)
                self._call = lambda stream, argv, _: launch(fn, blocks, 1, 1, THREADS, 1, 1, smem, stream,
                                                            ctypes.addressof(argv), 0)
            self._argv = (ctypes.c_void_p * 3)(ctypes.addressof(self._src), ctypes.addressof(self._dst),
                                               self.params_ptr)

    def __call__(self, src_ptr: int, dst_ptr: int, stream_ptr: int = 0) -> None:
        if not self.blocks:
            return
        if self._fast is not None:
            rc = self._fast(self.function_ptr, self.blocks, THREADS, self.smem, stream_ptr, src_ptr, dst_ptr,
                            self.params_ptr)
            if rc:
                self._retry(rc, src_ptr, dst_ptr, _stream_arg(stream_ptr))
            return
        if self.via == "cupy":              # CuPy's binding of cuLaunchKernel
            try:
                self._driver_launch(src_ptr, dst_ptr, stream_ptr)
            except self.backend.cupy.cuda.driver.CUDADriverError as exc:
                raise RuntimeError(f"opendml CUDA: launching {self.name} (grid {self.blocks}, {self.smem} "
                                   f"bytes of shared memory) failed: {exc}") from None
            return
        stream = _STREAM_ARGS.get(stream_ptr)
        if stream is None:
            stream = _stream_arg(stream_ptr)
        rc = self._driver_launch(src_ptr, dst_ptr, stream)
        if rc:
            self._retry(rc, src_ptr, dst_ptr, stream)

    def _driver_launch(self, src_ptr, dst_ptr, stream) -> int:
        """cuLaunchKernel (``_call``), the pointer slots rewritten under the lock: the driver's return code (CuPy's
        route raises instead)."""
        with self._lock:
            self._slow()
            self._src.value = src_ptr
            self._dst.value = dst_ptr
            return self._call(stream, self._argv, None)

    def _retry(self, rc, src_ptr, dst_ptr, stream):
        if rc in (_CU_ERROR_INVALID_CONTEXT, _CU_ERROR_INVALID_HANDLE, _CU_ERROR_CONTEXT_IS_DESTROYED):
            # No context (a thread that never used CUDA) or another device's: cudaSetDevice makes the device's
            # primary context current (CuPy's ``with device`` skips it when the device number matches), then the
            # caller's device is restored.
            rt = self.backend.cupy.cuda.runtime
            previous = rt.getDevice()
            rt.setDevice(self.backend.index)
            try:
                rc = self._driver_launch(src_ptr, dst_ptr, stream)
            finally:
                if previous != self.backend.index:
                    rt.setDevice(previous)
        if rc:
            raise RuntimeError(f"opendml CUDA: launching {self.name} (grid {self.blocks}, {self.smem} bytes of "
                               f"shared memory) failed: {_error_name(rc)}")


# -- launches made in C (calls_move_new.c's call_cache_move_new) ---------------------

#: Compiled kernels C may launch for new shapes: {device index: {kernel name: CUfunction}} (``add_new_kernel``).
_NEW_KERNELS: dict = {}
_NATIVE_FOUND: list = []                     # [True] once the extension's launcher and the driver were found


def new_kernels() -> dict | None:
    """``_NEW_KERNELS``, or None where launches are not the C extension's (``LAUNCH_VIA`` not "native", or the
    extension or the driver library missing): C then leaves CUDA calls to the Python route."""
    if LAUNCH_VIA != "native":
        return None
    if not _NATIVE_FOUND:                    # (both, once found, stay: looked for until then)
        if _fast_launch() is None or _driver() is None:
            return None
        _NATIVE_FOUND.append(True)
    return _NEW_KERNELS


def add_new_kernel(index: int, name: str) -> None:
    """Compile (or load) kernel ``name`` for device ``index`` and list it for C."""
    _NEW_KERNELS.setdefault(index, {})[name] = _kernel(index, name).ptr


def relaunch(device: int, function: int, grid: int, smem: int, params: bytes, src: int, dst: int,
             stream: int) -> None:
    """Queue a launch C made (a ``call_cache_move_new`` entry) whose own launch failed, through a ``Launch`` of the
    same kernel, grid and parameter bytes: it makes the device's context current on a thread without one and raises
    opendml's error naming the CUDA error."""
    block = ctypes.create_string_buffer(bytes(params), len(params))
    device_of = types.SimpleNamespace(cupy=_cupy(), index=device)   # what a Launch reads of its backend
    kernel = types.SimpleNamespace(ptr=function)                     # what a Launch reads of its kernel
    Launch(device_of, None, "a cached kernel", kernel, block, grid, smem, LAUNCH_VIA)(src, dst, stream)


def check_alignment(element_size: int, src_ptr: int, dst_ptr: int, what: str) -> None:
    """``UnsupportedError`` naming ``what`` (the operator) and the address where the input's (``src_ptr``) or the
    output's (``dst_ptr``) device address is not a multiple of ``element_size``, checked before any launch: kernels
    read and write whole elements, and a misaligned one would fault (cudaErrorMisalignedAddress), losing the process's
    CUDA context."""
    es = element_size
    for role, ptr in (("input", src_ptr), ("output", dst_ptr)):
        if ptr % es:
            raise UnsupportedError(
                f"{what} on CUDA: the {role}'s device address {ptr:#x} is not a multiple of its "
                f"element size ({es} bytes; it is {ptr % es} past one): opendml's CUDA kernels read and write "
                f"whole elements. Pass an array whose data pointer is aligned to its item size (a CuPy array made "
                f"at an offset of a raw allocation can be copied byte-wise into a fresh one, e.g. "
                f"y = cupy.empty_like(x); y.data.copy_from_device(x.data, x.nbytes) for a contiguous x)")

