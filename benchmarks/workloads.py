"""The fixed workloads: each gives opendml's call and every installed peer's
call on identical data, plus the useful bytes (output written + input read)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import opendml as dml


@dataclass
class Workload:
    name: str
    useful_bytes: int
    opendml: Callable
    peers: dict = field(default_factory=dict)
    copy_bytes: int = 0      # bytes of a plain copy of the same output size (baseline)
    desc: object = None      # the operator, for the compiled-operator (bound buffers) run
    x: object = None         # its input (NumPy or CuPy array, logical layout)
    peak_memory: bool = False  # measure peak host memory of the call (CPU)


def _t(x):
    return dml.TensorDesc(dml.DataType.from_numpy(x.dtype), x.shape)


def slice_desc(x, offsets, sizes, strides):
    return dml.SliceOperatorDesc(_t(x), None, offsets, sizes, strides)


def slice1_desc(x, offsets, sizes, strides):
    return dml.Slice1OperatorDesc(_t(x), None, offsets, sizes, strides)


def unfold_desc(x, window, strides, pad):
    d = x.ndim - 2
    return dml.UnfoldOperatorDesc(_t(x), None, window, strides, [1] * d, [pad] * d, [pad] * d)


def bound_call(kind, desc, x):
    """A compiled operator dispatched on buffers bound once (DirectML's flow):
    no allocation per call, as for the plain-copy baseline. Returns the call
    and a function reading the output back."""
    dev = dml.Device(kind)
    compiled = dev.compile_operator(dev.create_operator(desc))
    host = x.get() if hasattr(x, "get") else np.asarray(x)
    ib = dev.upload(host)
    ob = dev.create_buffer(desc.output_tensor.total_tensor_size_in_bytes)
    table = dev.create_binding_table(compiled)
    table.bind_inputs([dml.BufferBinding(ib)])
    table.bind_outputs([dml.BufferBinding(ob)])
    return (lambda: dev.execute(compiled, table)), (lambda: ob.read(desc.output_tensor))


def _np_unfold(x, w, pad):
    """NumPy route: pad + sliding_window_view + reshape to (N, C*K, B)."""
    d = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pad, pad)] * d)
    v = np.lib.stride_tricks.sliding_window_view(xp, (w,) * d, axis=tuple(range(2, 2 + d)))
    n, c = x.shape[:2]
    blocks = v.shape[2:2 + d]
    v = v.transpose(0, 1, *range(2 + d, 2 + 2 * d), *range(2, 2 + d))
    return v.reshape(n, c * w ** d, math.prod(blocks))


def _torch_unfold_nd(torch, x, w, pad):
    """PyTorch route for N-D: pad + Tensor.unfold per axis + permute + reshape."""
    d = x.dim() - 2
    xp = torch.nn.functional.pad(x, (pad, pad) * d)
    for a in range(d):
        xp = xp.unfold(2 + a, w, 1)
    n, c = x.shape[:2]
    blocks = xp.shape[2:2 + d]
    xp = xp.permute(0, 1, *range(2 + d, 2 + 2 * d), *range(2, 2 + d))
    return xp.reshape(n, c * w ** d, math.prod(blocks))


def cpu_workloads(torch=None, quick=False):
    rng = np.random.default_rng(0)
    out = []
    scale = 4 if quick else 1
    for dtype in ("float32", "float16", "int8"):
        x = rng.integers(0, 100, size=(16 // scale, 64, 128, 128)).astype(dtype)
        nb = x[:, :, 8:120, 8:120].nbytes
        tx = torch.from_numpy(x) if torch is not None else None
        peers = {"numpy": lambda x=x: np.ascontiguousarray(x[:, :, 8:120, 8:120])}
        if tx is not None:
            peers["torch"] = lambda tx=tx: tx[:, :, 8:120, 8:120].contiguous()
        out.append(Workload(f"slice window {dtype}", 2 * nb,
                            lambda x=x: dml.slice(x, [0, 0, 8, 8], [x.shape[0], 64, 112, 112], [1, 1, 1, 1]), peers, nb,
                            slice_desc(x, [0, 0, 8, 8], [x.shape[0], 64, 112, 112], [1, 1, 1, 1]), x))
        nb2 = x[:, :, ::2, ::2].nbytes
        peers = {"numpy": lambda x=x: np.ascontiguousarray(x[:, :, ::2, ::2])}
        if tx is not None:
            peers["torch"] = lambda tx=tx: tx[:, :, ::2, ::2].contiguous()
        out.append(Workload(f"slice stride 2 {dtype}", 2 * nb2,
                            lambda x=x: dml.slice(x, [0, 0, 0, 0], [x.shape[0], 64, 64, 64], [1, 1, 2, 2]), peers, nb2,
                            slice_desc(x, [0, 0, 0, 0], [x.shape[0], 64, 64, 64], [1, 1, 2, 2]), x))
        peers = {"numpy": lambda x=x: np.ascontiguousarray(x[:, :, ::-1, ::-1])}
        if tx is not None:
            peers["torch"] = lambda tx=tx: tx.flip(2, 3)
        out.append(Workload(f"reverse {dtype}", 2 * x.nbytes,
                            lambda x=x: dml.slice1(x, [0] * 4, list(x.shape), [1, 1, -1, -1]), peers, x.nbytes,
                            slice1_desc(x, [0] * 4, list(x.shape), [1, 1, -1, -1]), x))
    x = rng.standard_normal((8 // (2 if quick else 1), 64, 56, 56)).astype(np.float32)
    peers = {"numpy": lambda: _np_unfold(x, 3, 1)}
    if torch is not None:
        tx = torch.from_numpy(x)
        peers["torch F.unfold"] = lambda: torch.nn.functional.unfold(tx, 3, padding=1)
    ob = x.nbytes * 9
    out.append(Workload("unfold 2-D 3x3 pad 1", ob + x.nbytes, lambda: dml.unfold(x, 3, 1, 1, 1, 1), peers, ob,
                        unfold_desc(x, [3, 3], [1, 1], 1), x, True))
    x3 = rng.standard_normal((1, 32 // (2 if quick else 1), 32, 32, 32)).astype(np.float32)
    peers = {"numpy": lambda: _np_unfold(x3, 3, 1)}
    if torch is not None:
        t3 = torch.from_numpy(x3)
        peers["torch pad+unfold"] = lambda: _torch_unfold_nd(torch, t3, 3, 1).contiguous()
    ob = x3.nbytes * 27
    out.append(Workload("unfold 3-D 3x3x3 pad 1", ob + x3.nbytes, lambda: dml.unfold(x3, 3, 1, 1, 1, 1), peers, ob,
                        unfold_desc(x3, [3, 3, 3], [1, 1, 1], 1), x3, True))
    xf = rng.standard_normal((2, 1, 2**21 // (4 if quick else 1))).astype(np.float32)
    B = (xf.shape[-1] - 1024) // 256 + 1
    peers = {"numpy": lambda: np.ascontiguousarray(
        np.lib.stride_tricks.sliding_window_view(xf, 1024, axis=2)[:, :, ::256].transpose(0, 1, 3, 2)).reshape(2, 1024, B)}
    if torch is not None:
        tf = torch.from_numpy(xf)
        peers["torch unfold"] = lambda: tf.unfold(2, 1024, 256).permute(0, 1, 3, 2).reshape(2, 1024, B).contiguous()
    ob = 2 * 1024 * B * 4
    out.append(Workload("unfold 1-D framing w1024 h256", ob + xf.nbytes, lambda: dml.unfold(xf, [1024], [256]), peers, ob,
                        unfold_desc(xf, [1024], [256], 0), xf, True))
    return out


def dispatch_workload(kind: str):
    """A compiled SLICE1 on the page's 1x1x4x4 tensor: host time per execute."""
    desc = dml.Slice1OperatorDesc(dml.TensorDesc(dml.DataType.FLOAT32, [1, 1, 4, 4]), None,
                                  [0, 0, 0, 1], [1, 1, 4, 3], [1, 1, -2, 2])
    dev = dml.Device(kind)
    c = dev.compile_operator(dev.create_operator(desc))
    ib = dev.upload(np.arange(1, 17, dtype=np.float32))
    ob = dev.create_buffer(16)
    t = dev.create_binding_table(c)
    t.bind_inputs([dml.BufferBinding(ib)])
    t.bind_outputs([dml.BufferBinding(ob)])
    return dev, c, t, ob, desc
