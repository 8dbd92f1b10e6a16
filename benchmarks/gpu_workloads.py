"""GPU workloads (issue sizes): opendml beside PyTorch, CuPy and JAX.

FOLD and SLICE_GRAD rows (issue 11) appear where ``opendml.fold`` /
``opendml.slice_grad`` exist; their inputs are small integers stored as
floats, so every summation order gives the same bits and the peers' outputs
compare exactly. ``benchmarks/gpu_fold.py`` times the same rows through the
CUDA backend's launch path, with the issue's targets."""
from __future__ import annotations

import numpy as np

import opendml as dml
from benchmarks.workloads import Workload, _torch_unfold_nd


def gpu_workloads(cupy, torch=None, jax=None):
    out = []
    MiB = 2**20
    for dtype in ("int8", "float16", "float32", "float64"):
        es = np.dtype(dtype).itemsize
        n = 256 * MiB // (64 * 128 * 128 * es)  # >= 256 MiB of input
        x = cupy.random.randint(0, 100, size=(n, 64, 128, 128)).astype(dtype)
        tx = torch.from_dlpack(x) if torch is not None else None
        jx = jax.dlpack.from_dlpack(x) if jax is not None else None
        win = x[:, :, 8:120, 8:120]
        nb = win.size * es
        peers = {"cupy": lambda x=x: cupy.ascontiguousarray(x[:, :, 8:120, 8:120])}
        if tx is not None:
            peers["torch"] = lambda tx=tx: tx[:, :, 8:120, 8:120].contiguous()
        if jx is not None:
            peers["jax"] = lambda jx=jx: jx[:, :, 8:120, 8:120].block_until_ready()
        out.append(Workload(f"slice window {dtype}", 2 * nb,
                            lambda x=x, n=n: dml.slice(x, [0, 0, 8, 8], [n, 64, 112, 112], [1, 1, 1, 1]), peers, nb))
        peers = {"cupy": lambda x=x: cupy.ascontiguousarray(x[:, :, ::-1, ::-1])}
        if tx is not None:
            peers["torch"] = lambda tx=tx: tx.flip(2, 3)
        if jx is not None:
            peers["jax"] = lambda jx=jx: jx[:, :, ::-1, ::-1].block_until_ready()
        out.append(Workload(f"reverse {dtype}", 2 * x.nbytes,
                            lambda x=x: dml.slice1(x, [0] * 4, list(x.shape), [1, 1, -1, -1]), peers, x.nbytes))
        nb2 = x[:, :, ::2, ::2].size * es
        peers = {"cupy": lambda x=x: cupy.ascontiguousarray(x[:, :, ::2, ::2])}
        if tx is not None:
            peers["torch"] = lambda tx=tx: tx[:, :, ::2, ::2].contiguous()
        out.append(Workload(f"slice stride 2 {dtype}", 2 * nb2,
                            lambda x=x, n=n: dml.slice(x, [0] * 4, [n, 64, 64, 64], [1, 1, 2, 2]), peers, nb2))
    for dtype in ("float32", "float16"):
        x = cupy.random.standard_normal((32, 64, 56, 56)).astype(dtype)
        peers = {}
        if torch is not None:
            tx = torch.from_dlpack(x)
            peers["torch F.unfold"] = lambda tx=tx: torch.nn.functional.unfold(tx, 3, padding=1)
        if jax is not None:
            jx = jax.dlpack.from_dlpack(x)
            f = jax.jit(lambda a: jax.lax.conv_general_dilated_patches(
                a, (3, 3), (1, 1), [(1, 1), (1, 1)], precision=jax.lax.Precision.HIGHEST))
            peers["jax patches"] = lambda jx=jx, f=f: f(jx).reshape(32, 576, 3136).block_until_ready()
        ob = x.nbytes * 9
        out.append(Workload(f"unfold 2-D 3x3 pad 1 {dtype}", ob + x.nbytes,
                            lambda x=x: dml.unfold(x, 3, 1, 1, 1, 1), peers, ob))
    x3 = cupy.random.standard_normal((4, 32, 32, 32, 32)).astype(cupy.float32)
    peers = {}
    if torch is not None:
        t3 = torch.from_dlpack(x3)
        peers["torch pad+unfold"] = lambda: _torch_unfold_nd(torch, t3, 3, 1).contiguous()
    if jax is not None:
        j3 = jax.dlpack.from_dlpack(x3)
        f3 = jax.jit(lambda a: jax.lax.conv_general_dilated_patches(
            a, (3, 3, 3), (1, 1, 1), [(1, 1)] * 3, precision=jax.lax.Precision.HIGHEST))
        peers["jax patches"] = lambda: f3(j3).reshape(4, 864, 32768).block_until_ready()
    ob = x3.nbytes * 27
    out.append(Workload("unfold 3-D 3x3x3 pad 1", ob + x3.nbytes, lambda: dml.unfold(x3, 3, 1, 1, 1, 1), peers, ob))
    xf = cupy.random.standard_normal((8, 1, 2**22)).astype(cupy.float32)
    B = (2**22 - 1024) // 256 + 1
    peers = {}
    if torch is not None:
        tf = torch.from_dlpack(xf)
        peers["torch unfold"] = lambda: tf.unfold(2, 1024, 256).permute(0, 1, 3, 2).reshape(8, 1024, B).contiguous()
    ob = 8 * 1024 * B * 4
    out.append(Workload("unfold 1-D framing w1024 h256", ob + xf.nbytes, lambda: dml.unfold(xf, [1024], [256]), peers, ob))
    out += fold_workloads(cupy, torch)
    return out


def fold_workloads(cupy, torch=None):
    """The issue-11 rows: 2-D and 3-D FOLD, overlap-add and SLICE_GRAD."""
    out = []
    cupy.random.seed(1)

    def ints(shape, dtype):
        return cupy.random.randint(-8, 8, size=shape, dtype=cupy.int32).astype(dtype)
    F = torch.nn.functional if torch is not None else None
    if hasattr(dml, "fold"):
        for dtype in ("float32", "float16"):
            x = ints((32, 576, 3136), dtype)
            peers = {}
            if torch is not None:
                tx = torch.from_dlpack(x)
                peers["torch F.fold"] = lambda tx=tx: F.fold(tx, (56, 56), 3, padding=1)
            ob = 32 * 64 * 3136 * x.itemsize
            out.append(Workload(f"fold 2-D 3x3 pad 1 {dtype}", ob + x.nbytes,
                                lambda x=x: dml.fold(x, (56, 56), 3, 1, 1, 1, 1), peers, ob))
        x3 = ints((4, 864, 32768), "float32")
        peers = {}
        if torch is not None:
            t3 = torch.from_dlpack(x3)

            def slice_adds(t3=t3):
                o = torch.zeros((4, 32, 34, 34, 34), dtype=t3.dtype, device=t3.device)
                v = t3.view(4, 32, 3, 3, 3, 32, 32, 32)
                for a in range(3):
                    for b in range(3):
                        for c in range(3):
                            o[:, :, a:a + 32, b:b + 32, c:c + 32] += v[:, :, a, b, c]
                return o[:, :, 1:33, 1:33, 1:33]
            peers["torch pad+27 adds"] = slice_adds
        ob = 4 * 32 * 32768 * 4
        out.append(Workload("fold 3-D 3x3x3 pad 1", ob + x3.nbytes,
                            lambda: dml.fold(x3, (32, 32, 32), 3, 1, 1, 1, 1), peers, ob))
        B = 16381
        L = (B - 1) * 256 + 1024
        xf = ints((8, 1024, B), "float32")
        peers = {}
        if torch is not None:
            tf = torch.from_dlpack(xf)
            peers["torch F.fold (istft)"] = lambda: F.fold(tf, (1, L), (1, 1024), stride=(1, 256)).view(8, 1, L)
        ob = 8 * L * 4
        out.append(Workload("overlap-add w1024 h256", ob + xf.nbytes, lambda: dml.fold(xf, (L,), 1024, 256), peers,
                            ob))
    if hasattr(dml, "slice_grad"):
        g = ints((64, 256, 112, 112), "float32")
        peers = {"cupy zeros+assign": lambda: _zeros_assign(cupy.zeros((64, 256, 128, 128), g.dtype), g)}
        if torch is not None:
            tg = torch.from_dlpack(g)
            peers["torch zeros+assign"] = lambda: _zeros_assign(
                torch.zeros((64, 256, 128, 128), dtype=tg.dtype, device=tg.device), tg)
        ob = 64 * 256 * 128 * 128 * 4
        out.append(Workload("slice_grad [8:120,8:120] f32", ob + g.nbytes,
                            lambda: dml.slice_grad(g, (64, 256, 128, 128), (0, 0, 8, 8), (64, 256, 112, 112),
                                                   (1, 1, 1, 1)), peers, ob))
    return out


def _zeros_assign(o, g):
    o[:, :, 8:120, 8:120] = g
    return o
