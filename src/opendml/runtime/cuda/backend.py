"""CUDA backend: CuPy memory and opendml's own kernels (kernels/opendml_kernels.cu),
compiled at run time by NVRTC and cached per device and specialisation.

Host-side preparation (choosing the word width, packing parameters, uploading
them) happens once per binding in ``prepare``; a dispatch is one kernel launch.
CuPy is imported here only, i.e. only when a CUDA device is asked for.
"""
from __future__ import annotations

import functools
import math
import pathlib

import numpy as np

from ...model.errors import UnsupportedError
from ...plan import CopyPlan, UnfoldPlan

KERNELS = pathlib.Path(__file__).with_name("kernels.cu")
#: Parameter blocks, declared once for the C and CUDA kernels.
INCLUDE = pathlib.Path(__file__).parents[1]
THREADS = 256
PARAM_CACHE = 512  # uploaded parameter arrays kept per device
#: 1-D UNFOLDs whose neighbouring blocks lie at least this many elements apart
#: in the input go through the shared-memory transpose (unfold1d_tile).
TILE_MIN_STEP = 8
#: unfold_tile: output columns per box (a box is one CUDA block's share), the
#: longest box line in 2-D and up, and the shared memory a box's region may use.
BOX_COLUMNS = 1024
BOX_LINE = 128
BOX_BYTES = 24 * 1024


def items_per_thread(word_bytes: int) -> int:
    """Words per thread of strided_copy: one 16-byte word (the window sweep
    in benchmarks/sweep_copy.py measured 1 about 2% faster than 2, 4 or 8 on
    an H200), else at least four words and 16 bytes in flight."""
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
def _source() -> str:
    return KERNELS.read_text(encoding="utf-8")


@functools.cache
def _kernel(device_id: int, name: str):
    """One compiled specialisation, e.g. ``strided_copy<uint4, 3, 0, u32>``."""
    cupy = _cupy()
    with cupy.cuda.Device(device_id):
        module = cupy.RawModule(code=_source(), options=("-std=c++17",), name_expressions=(name,))
        return module.get_function(name)


class CudaBackend:
    name = "cuda"

    def __init__(self, index: int = 0):
        cupy = _cupy()
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:
            raise UnsupportedError(f"Device('cuda'): CUDA is not usable here: {exc}") from None
        if not 0 <= index < count:
            raise UnsupportedError(f"Device('cuda:{index}'): there are {count} CUDA devices")
        self.cupy, self.index = cupy, index
        self.device = cupy.cuda.Device(index)
        self._params: dict = {}

    def _upload_params(self, params):
        """Parameters on the device, uploaded once per distinct plan: an upload
        is a synchronous copy that would stall the stream on every call."""
        key = tuple(params)
        p = self._params.get(key)
        if p is None:
            if len(self._params) >= PARAM_CACHE:
                self._params.pop(next(iter(self._params)))
            p = self._params[key] = self.cupy.asarray(np.asarray(params, dtype=np.int64))
        return p

    # -- memory ----------------------------------------------------------------
    def allocate(self, nbytes: int):
        with self.device:
            try:
                return self.cupy.zeros(nbytes, dtype=np.uint8)
            except self.cupy.cuda.memory.OutOfMemoryError:
                raise MemoryError(nbytes) from None

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
    def prepare(self, plan, src, dst):
        with self.device:
            if isinstance(plan, CopyPlan):
                name, params, grid, smem = _copy_launch(plan, src.data.ptr, dst.data.ptr, src.size)
            elif isinstance(plan, UnfoldPlan):
                name, params, grid, smem = _unfold_launch(plan)
            else:
                raise TypeError(f"unknown plan {type(plan).__name__}")
            kernel = _kernel(self.index, name)
            p = self._upload_params(params)
        args = (np.uint64(src.data.ptr), np.uint64(dst.data.ptr), p)
        block = (THREADS,)
        device = self.device

        def run():
            if grid[0]:
                with device:
                    kernel(grid, block, args, shared_mem=smem)
        run.keep_alive = (src, dst, p)  # the pointers stay valid while the closure lives
        return run


def _index_type(count: int, items: int = 16) -> str:
    return "u32" if count + THREADS * items < 2**32 else "u64"


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


def _copy_launch(plan: CopyPlan, src_ptr: int, dst_ptr: int, src_len: int):
    w, rev, pick, p = word_plan(plan, src_ptr, dst_ptr, src_len)
    count = p.count
    nd = len(p.sizes)
    items = items_per_thread(w)
    name = f"strided_copy<{_SCALAR[w]}, {nd}, {rev}, {_index_type(count, items)}, {items}, {pick}>"
    params = [count, p.in_offset, p.out_offset, *p.sizes, *p.in_strides, *p.out_strides]
    grid = (math.ceil(count / (THREADS * items)),)
    return name, params, grid, 0


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


def _unfold_launch(plan: UnfoldPlan, box=None):
    """(kernel name, parameters, grid, dynamic shared memory bytes)."""
    es = plan.element_size
    r = 2 if es >= 2 else 1          # vectors of 16 bytes per thread
    v = 16 // es * r                 # columns per thread
    B = plan.columns
    slots = plan.batch * plan.rows * math.ceil(B / v)
    D = len(plan.window)
    n_s, c_s, *sp_s = plan.in_strides
    params = [slots, plan.in_offset, plan.out_offset, plan.batch, plan.channels, math.prod(plan.window), B,
              *plan.out_strides, n_s, c_s]
    for d in range(D):
        params += [plan.spatial[d], plan.window[d], plan.strides[d], plan.dilations[d],
                   plan.start_padding[d], plan.blocks[d], sp_s[d]]
    tiles = plan.batch * plan.channels * math.ceil(plan.window[0] / 32) * math.ceil(B / 32)
    if D == 1 and abs(plan.strides[0] * sp_s[0]) >= TILE_MIN_STEP and plan.window[0] >= 8 and tiles < 2**31:
        index = _index_type(max(tiles, plan.batch * plan.channels * plan.window[0], B) * 32)
        return f"unfold1d_tile<{_SCALAR[es]}, {index}>", params, (tiles,), 0
    box = unfold_box(plan) if box is None else box
    if box:
        t, ext = box
        nboxes = [-(-plan.blocks[d] // t[d]) for d in range(D)]
        params[0] = plan.batch * plan.channels * math.prod(nboxes)
        for d in range(D):
            params += [t[d], ext[d], nboxes[d]]
        return f"unfold_tile<{_SCALAR[es]}, {D}>", params, (params[0],), math.prod(ext) * es
    name = f"unfold_gather<{_SCALAR[es]}, {D}, {_index_type(slots * v)}, {r}>"
    return name, params, (math.ceil(slots / THREADS),), 0
