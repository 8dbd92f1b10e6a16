"""Differential check of two opendml source trees on the CPU: the public
functions' signatures and docstrings' first lines (``opendml``,
``opendml.torch``, ``opendml.jax``), and, for a battery of valid and invalid
calls of the index functions and the window functions, each call's result
(framework, dtype, shape, bytes) or error (type and message), on a first
call and on a repeat, in three settings: the defaults, ``configure(
call_cache=False)`` and ``configure(cpu_kernels="numpy")``.

    python benchmarks/index_parity.py OLD_SRC NEW_SRC

Each tree is imported in its own subprocesses (one per setting); the script
prints every difference (and any call whose repeat differs from its first
call within one tree, and any call whose result or error differs between
one tree's settings) and exits 1 if it found any. To compare against a
commit: ``git worktree add /tmp/old <commit>``, ``python setup.py
build_ext --inplace`` there, then pass ``/tmp/old/src``.

Session 16 against session 15 (1e7a5ec), 4202 cases and sequences (8,902
calls per setting): no result or error differed; the signatures differed in
the index functions' return annotation (``-> 'Any'``), the order of
``opendml.torch.__all__`` and ``opendml.jax.__all__`` (the same names) and
``opendml.jax``'s docstrings.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import os
import subprocess
import sys

MODES = ("default", "no_call_cache", "numpy_kernels")


def _has(module: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(module) is not None


# -- the battery (runs in the worker) --------------------------------------------------------------------

def battery(np, torch, jnp):
    """(case id, function, args thunk) for every call: the thunk builds the arguments anew (deterministic)."""
    rng = np.random.default_rng(7)
    cases = []

    def add(cid, fn, make):
        cases.append((cid, fn, make))

    def data(shape, dt="float32"):
        n = int(np.prod(shape)) if shape else 1
        base = (np.arange(n) % 23 - 7)
        return base.astype(dt).reshape(shape)

    def fw(a, kind):
        if kind == "np":
            return a
        if kind == "torch":
            return torch.from_numpy(np.ascontiguousarray(a))
        if kind == "dask":
            import dask.array as da
            return da.from_array(a, chunks=2)
        return jnp.asarray(a)

    kinds = ["np", "torch"] + (["jax"] if jnp is not None else []) + (["dask"] if _has("dask") else [])
    itypes = ["int32", "int64", "uint32", "uint64"]
    xdts = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]

    # ---- gather
    for k in kinds:
        for it in itypes:
            for axis in (0, 1, 2, -1, -3):
                for ishape in ((4,), (2, 3), (1, 2, 2), ()):
                    n = (3, 4, 5)[axis]
                    lo = -n if it[0] == "i" else 0
                    iv = (rng.integers(lo, n, size=ishape) if ishape else np.array(rng.integers(lo, n))).astype(it)
                    for chk in (True, False):
                        add(f"gather/{k}/{it}/ax{axis}/i{ishape}/c{chk}", "gather",
                            lambda k=k, iv=iv, axis=axis, chk=chk: (
                                (fw(data((3, 4, 5)), k), fw(iv, k), axis), {"check_indices": chk}))
            for kdim in (0, 1, 2, 3):
                iv = np.zeros((1, 2, 3), it)
                add(f"gather/{k}/{it}/idim{kdim}", "gather",
                    lambda k=k, iv=iv, kdim=kdim: ((fw(data((3, 4)), k), fw(iv, k), 1, kdim), {}))
        for dt in xdts + ["bool", "complex64", "bfloat16"]:
            def mk(k=k, dt=dt):
                if dt == "bfloat16":
                    if k != "torch":
                        return (np.zeros(3, "V2"), np.array([0], "int32"), 0), {}
                    return (torch.zeros(3, 4, dtype=torch.bfloat16), torch.tensor([1, 0]), 0), {}
                return (fw(data((3, 4), dt), k), fw(np.array([2, -1, 0], "int64"), k), 0), {}
            add(f"gather/{k}/xdt{dt}", "gather", mk)
        for it in ("int8", "int16", "uint8", "float32", "bool", "float64"):
            add(f"gather/{k}/idt{it}", "gather",
                lambda k=k, it=it: ((fw(data((3, 4)), k), fw(np.array([1, 0], it), k), 0), {}))
        # out of range: first bad named (value, position), with / without check
        for bad in ([0, 3, 5], [0, -4, 2], [[0, 1], [9, -9]]):
            for chk in (True, False):
                add(f"gather/{k}/bad{bad}/c{chk}", "gather",
                    lambda k=k, bad=bad, chk=chk: ((fw(data((3, 4)), k), fw(np.array(bad, "int64"), k), 0),
                                                   {"check_indices": chk}))
            add(f"gather/{k}/badu{bad}", "gather",
                lambda k=k, bad=bad: ((fw(data((3, 4)), k), fw(np.abs(np.array(bad)).astype("uint32"), k), 0), {}))
        # zero-size
        add(f"gather/{k}/zero_x", "gather", lambda k=k: ((fw(data((0, 4)), k), fw(np.zeros(2, "int32"), k), 1), {}))
        add(f"gather/{k}/zero_x_ax0", "gather",
            lambda k=k: ((fw(data((0, 4)), k), fw(np.zeros(2, "int32"), k), 0), {}))
        add(f"gather/{k}/zero_i", "gather", lambda k=k: ((fw(data((3, 4)), k), fw(np.zeros(0, "int32"), k), 0), {}))
        add(f"gather/{k}/zero_i_unchecked", "gather",
            lambda k=k: ((fw(data((3, 4)), k), fw(np.zeros((0, 2), "int64"), k), 1), {"check_indices": False}))
        # rank
        add(f"gather/{k}/rank9", "gather", lambda k=k: ((fw(data((1,) * 9), k), fw(np.zeros(1, "int32"), k), 0), {}))
        add(f"gather/{k}/rank8", "gather", lambda k=k: ((fw(data((2,) * 8), k), fw(np.zeros(1, "int32"), k), 0), {}))
        add(f"gather/{k}/irank9", "gather",
            lambda k=k: ((fw(data((3,)), k), fw(np.zeros((1,) * 9, "int32"), k), 0), {}))
        add(f"gather/{k}/x0d", "gather", lambda k=k: ((fw(data(()), k), fw(np.zeros(1, "int32"), k), 0), {}))
        # leading index dims not 1
        add(f"gather/{k}/lead", "gather",
            lambda k=k: ((fw(data((3, 4)), k), fw(np.zeros((2, 2), "int32"), k), 0, 1), {}))
    # numpy views: strided, negative strides, broadcast, non-native order
    xb = data((6, 8, 5))
    ib = np.array([[3, -1, 0, 2], [1, 1, -2, 0]], "int64")
    views = {
        "strided": lambda: (xb[::2, 1::3], ib[:, ::2]),
        "negstride": lambda: (xb[::-1, ::-2], ib[::-1, ::-1]),
        "broadcast": lambda: (np.broadcast_to(data((1, 4, 1)), (3, 4, 5)), np.broadcast_to(np.array([1, -1]), (3, 2))),
        "transposed": lambda: (xb.transpose(2, 0, 1), ib.T),
        "bigendian": lambda: (xb.astype(">f4"), ib.astype(">i8")),
        "fortran": lambda: (np.asfortranarray(xb), np.asfortranarray(ib)),
    }
    for name, v in views.items():
        for axis in (0, 1, -1):
            for chk in (True, False):
                add(f"gather/np/{name}/ax{axis}/c{chk}", "gather",
                    lambda v=v, axis=axis, chk=chk: ((*v(), axis), {"check_indices": chk}))
    tb = torch.arange(6 * 8 * 5, dtype=torch.float32).reshape(6, 8, 5)
    tviews = {
        "strided": lambda: (tb[::2, 1::3], torch.tensor([[3, -1, 0], [1, 1, -2]])[:, ::2]),
        "expand": lambda: (torch.arange(4.).reshape(1, 4, 1).expand(3, 4, 5), torch.tensor([1, -1]).expand(3, 2)),
        "transposed": lambda: (tb.permute(2, 0, 1), torch.tensor([[1, 2], [0, -1]]).T),
        "neg": lambda: (tb._neg_view(), torch.tensor([1, 0])),
        "requires_grad": lambda: (tb.clone().requires_grad_(True), torch.tensor([1, 0])),
    }
    for name, v in tviews.items():
        for axis in (0, -1):
            add(f"gather/torch/{name}/ax{axis}", "gather", lambda v=v, axis=axis: ((*v(), axis), {}))
    # mixed frameworks
    add("gather/mixed/np_x_torch_i", "gather", lambda: ((data((3, 4)), torch.tensor([1, 0])), {"axis": 0}))
    add("gather/mixed/torch_x_np_i", "gather",
        lambda: ((torch.from_numpy(data((3, 4))), np.array([1, 0])), {"axis": 0}))
    # wrong argument types
    weird = {"list": [1, 0], "int": 1, "float": 1.5, "str": "ab", "none": None, "tuple": (1, 0), "bytes": b"ab",
             "bool": True, "npint": np.int64(1), "nan": float("nan"), "huge": 2 ** 70, "neg": -10 ** 9}
    for wn, w in weird.items():
        add(f"gather/arg_x/{wn}", "gather", lambda w=w: ((w, np.array([0]), 0), {}))
        add(f"gather/arg_i/{wn}", "gather", lambda w=w: ((data((3, 4)), w, 0), {}))
        add(f"gather/arg_axis/{wn}", "gather", lambda w=w: ((data((3, 4)), np.array([0]), w), {}))
        add(f"gather/arg_idim/{wn}", "gather", lambda w=w: ((data((3, 4)), np.array([0]), 0, w), {}))
        add(f"gather/arg_chk/{wn}", "gather", lambda w=w: ((data((3, 4)), np.array([0]), 0), {"check_indices": w}))
    add("gather/kw_missing", "gather", lambda: ((data((3, 4)), np.array([0])), {}))
    add("gather/kw_extra", "gather", lambda: ((data((3, 4)), np.array([0]), 0), {"bogus": 1}))
    add("gather/kw_positional_chk", "gather", lambda: ((data((3, 4)), np.array([0]), 0, None, False), {}))
    for axis in (2, -3, 100, -100):
        add(f"gather/axis_oob{axis}", "gather", lambda axis=axis: ((data((3, 4)), np.array([0]), axis), {}))
    add("gather/npscalar_x", "gather", lambda: ((np.float32(1), np.array([0]), 0), {}))
    add("gather/matrix", "gather", lambda: ((np.matrix([[1., 2.], [3., 4.]]), np.array([0]), 0), {}))
    add("gather/masked", "gather", lambda: ((np.ma.masked_array(data((3, 4))), np.array([0]), 0), {}))
    add("gather/i_matrix", "gather", lambda: ((data((3, 4)), np.matrix([[1, 0]]), 1), {}))
    add("gather/i_masked", "gather", lambda: ((data((3, 4)), np.ma.masked_array(np.array([1, 0])), 1), {}))
    add("reverse_subsequences/matrix", "reverse_subsequences",
        lambda: ((np.matrix(data((3, 4))), np.array([1, 2, 3], "uint32"), 1), {}))
    add("diagonal_matrix/matrix", "diagonal_matrix", lambda: ((np.matrix(data((3, 4))),), {}))
    add("gather/object", "gather", lambda: ((np.array([1, "a"], object), np.array([0]), 0), {}))
    add("gather/i_object", "gather", lambda: ((data((3, 4)), np.array([0, None], object), 0), {}))
    add("gather/huge_x", "gather",
        lambda: ((np.lib.stride_tricks.as_strided(np.zeros(1, "f4"), (2 ** 30, 2 ** 30), (0, 0)), np.array([0]), 0),
                 {}))

    # ---- gather_elements / scatter_elements
    for k in kinds:
        for it in itypes:
            for axis in (0, 1, -1):
                n = (3, 4)[axis]
                lo = -n if it[0] == "i" else 0
                iv = rng.integers(lo, n, size=(3, 4)).astype(it)
                if axis == 0:
                    iv = iv[:2]
                for chk in (True, False):
                    add(f"gather_elements/{k}/{it}/ax{axis}/c{chk}", "gather_elements",
                        lambda k=k, iv=iv, axis=axis, chk=chk: (
                            (fw(data((3, 4)), k), fw(iv, k), axis), {"check_indices": chk}))
                    add(f"scatter_elements/{k}/{it}/ax{axis}/c{chk}", "scatter_elements",
                        lambda k=k, iv=iv, axis=axis, chk=chk: (
                            (fw(data((3, 4)), k), fw(iv, k), fw(data(iv.shape) + 100, k), axis),
                            {"check_indices": chk}))
        for fn in ("gather_elements", "scatter_elements"):
            def extra(fn, k, shape, dt="float32"):
                return (fw(data(shape, dt) * 2, k),) if fn == "scatter_elements" else ()
            for bad in ([[0, 1, 3, 0]], [[0, -4, 1, 1], [7, 0, 0, 0]]):
                for chk in (True, False):
                    add(f"{fn}/{k}/bad{bad}/c{chk}", fn,
                        lambda k=k, bad=bad, chk=chk, fn=fn: (
                            (fw(data((3, 4)), k), fw(np.array(bad, "int32"), k),
                             *extra(fn, k, np.array(bad).shape), 0), {"check_indices": chk}))
            add(f"{fn}/{k}/rank_mismatch", fn, lambda k=k, fn=fn: (
                (fw(data((3, 4)), k), fw(np.zeros(4, "int32"), k), *extra(fn, k, (4,)), 0), {}))
            add(f"{fn}/{k}/shape_big", fn, lambda k=k, fn=fn: (
                (fw(data((3, 4)), k), fw(np.zeros((3, 5), "int32"), k), *extra(fn, k, (3, 5)), 0), {}))
            add(f"{fn}/{k}/zero", fn, lambda k=k, fn=fn: (
                (fw(data((3, 4)), k), fw(np.zeros((0, 4), "int32"), k), *extra(fn, k, (0, 4)), 0), {}))
            add(f"{fn}/{k}/zero_x", fn, lambda k=k, fn=fn: (
                (fw(data((0, 4)), k), fw(np.zeros((0, 4), "int32"), k), *extra(fn, k, (0, 4)), 1), {}))
            add(f"{fn}/{k}/zero_x_nonzero_i", fn, lambda k=k, fn=fn: (
                (fw(data((0, 4)), k), fw(np.zeros((2, 4), "int32"), k), *extra(fn, k, (2, 4)), 0),
                {"check_indices": False}))
            add(f"{fn}/{k}/x0d", fn, lambda k=k, fn=fn: (
                (fw(data(()), k), fw(np.zeros((), "int32"), k), *extra(fn, k, ()), 0), {}))
            add(f"{fn}/{k}/axis_oob", fn, lambda k=k, fn=fn: (
                (fw(data((3, 4)), k), fw(np.zeros((3, 4), "int32"), k), *extra(fn, k, (3, 4)), 2), {}))
            for dt in ("bool", "complex64", "int8", "float16", "uint64"):
                add(f"{fn}/{k}/xdt{dt}", fn, lambda k=k, fn=fn, dt=dt: (
                    (fw(data((3, 4), dt), k), fw(np.ones((3, 4), "int64"), k), *extra(fn, k, (3, 4), dt), 1), {}))
        add(f"scatter_elements/{k}/upd_dtype", "scatter_elements", lambda k=k: (
            (fw(data((3, 4)), k), fw(np.ones((3, 4), "int64"), k), fw(data((3, 4), "float64"), k), 1), {}))
        add(f"scatter_elements/{k}/upd_shape", "scatter_elements", lambda k=k: (
            (fw(data((3, 4)), k), fw(np.ones((3, 4), "int64"), k), fw(data((3, 3)), k), 1), {}))
        add(f"scatter_elements/{k}/repeat_idx", "scatter_elements", lambda k=k: (
            (fw(data((3, 4)), k), fw(np.array([[1, 1, 1, 1], [1, 1, 1, 1]], "int64"), k),
             fw(data((2, 4)) + 50, k), 0), {}))
    for name, v in views.items():
        def ge(v=v, name=name):
            x = v()[0]
            base = (np.arange(int(np.prod(x.shape[:-1])) * 4).reshape(x.shape[:-1] + (4,)) % 4 - 2).astype("int64")
            if name == "broadcast":
                return x, np.broadcast_to(base[..., :1], x.shape[:-1] + (2,))
            return x, base[..., ::-2] if name == "negstride" else base[..., ::2]
        add(f"gather_elements/np/{name}", "gather_elements", lambda ge=ge: ((*ge(), -1), {}))
        add(f"scatter_elements/np/{name}", "scatter_elements",
            lambda ge=ge: ((*ge(), np.broadcast_to(np.float32(9), ge()[1].shape).astype(ge()[0].dtype), -1), {}))
    for wn, w in weird.items():
        for fn in ("gather_elements", "scatter_elements"):
            u = (data((3, 4)),) if fn == "scatter_elements" else ()
            add(f"{fn}/arg_x/{wn}", fn, lambda w=w, fn=fn, u=u: ((w, np.zeros((3, 4), "int32"), *u, 0), {}))
            add(f"{fn}/arg_i/{wn}", fn, lambda w=w, fn=fn, u=u: ((data((3, 4)), w, *u, 0), {}))
            add(f"{fn}/arg_axis/{wn}", fn,
                lambda w=w, fn=fn, u=u: ((data((3, 4)), np.zeros((3, 4), "int32"), *u, w), {}))
            add(f"{fn}/arg_chk/{wn}", fn, lambda w=w, fn=fn, u=u: (
                (data((3, 4)), np.zeros((3, 4), "int32"), *u, 0), {"check_indices": w}))
        add(f"scatter_elements/arg_u/{wn}", "scatter_elements",
            lambda w=w: ((data((3, 4)), np.zeros((3, 4), "int32"), w, 0), {}))

    # ---- gather_nd / scatter_nd
    for k in kinds:
        for it in itypes:
            for q in (1, 2, 3):
                for b in (0, 1):
                    if b + q > 3:
                        continue
                    xs = (2, 3, 4)
                    lo = [(-n if it[0] == "i" else 0) for n in xs[b:b + q]]
                    iv = np.stack([rng.integers(l_, n, size=(2, 2)) for l_, n in zip(lo, xs[b:b + q])], -1)
                    if b:
                        iv = iv[:, :1] if False else np.stack([iv[0], iv[1]])  # (2, 2, q): batch 2 == x.shape[0]
                    iv = iv.astype(it)
                    for chk in (True, False):
                        add(f"gather_nd/{k}/{it}/q{q}/b{b}/c{chk}", "gather_nd",
                            lambda k=k, iv=iv, b=b, chk=chk: (
                                (fw(data((2, 3, 4)), k), fw(iv, k), b), {"check_indices": chk}))
                    if b == 0:
                        ushape = iv.shape[:-1] + xs[q:]
                        for chk in (True, False):
                            add(f"scatter_nd/{k}/{it}/q{q}/c{chk}", "scatter_nd",
                                lambda k=k, iv=iv, chk=chk, ushape=ushape: (
                                    (fw(data((2, 3, 4)), k), fw(iv, k), fw(data(ushape) + 60, k)),
                                    {"check_indices": chk}))
        for bad in ([[0, 3]], [[1, 0], [-3, 0]], [[1, 9], [0, 0]]):
            for chk in (True, False):
                add(f"gather_nd/{k}/bad{bad}/c{chk}", "gather_nd", lambda k=k, bad=bad, chk=chk: (
                    (fw(data((2, 3)), k), fw(np.array(bad, "int64"), k)), {"check_indices": chk}))
                add(f"scatter_nd/{k}/bad{bad}/c{chk}", "scatter_nd", lambda k=k, bad=bad, chk=chk: (
                    (fw(data((2, 3)), k), fw(np.array(bad, "int64"), k), fw(data((len(bad),)), k)),
                    {"check_indices": chk}))
        add(f"gather_nd/{k}/i0d", "gather_nd", lambda k=k: ((fw(data((2, 3)), k), fw(np.zeros((), "int32"), k)), {}))
        add(f"gather_nd/{k}/q0", "gather_nd", lambda k=k: ((fw(data((2, 3)), k), fw(np.zeros((2, 0), "int32"), k)), {}))
        add(f"gather_nd/{k}/q_big", "gather_nd",
            lambda k=k: ((fw(data((2, 3)), k), fw(np.zeros((2, 3), "int32"), k)), {}))
        add(f"gather_nd/{k}/b_big", "gather_nd",
            lambda k=k: ((fw(data((2, 3)), k), fw(np.zeros((2, 1), "int32"), k), 2), {}))
        add(f"gather_nd/{k}/b_mismatch", "gather_nd",
            lambda k=k: ((fw(data((2, 3)), k), fw(np.zeros((3, 1), "int32"), k), 1), {}))
        add(f"gather_nd/{k}/zero_tuples", "gather_nd",
            lambda k=k: ((fw(data((2, 3)), k), fw(np.zeros((0, 1), "int32"), k)), {}))
        add(f"scatter_nd/{k}/i0d", "scatter_nd",
            lambda k=k: ((fw(data((2, 3)), k), fw(np.zeros((), "int32"), k), fw(data(()), k)), {}))
        add(f"scatter_nd/{k}/q_big", "scatter_nd",
            lambda k=k: ((fw(data((2, 3)), k), fw(np.zeros((1, 3), "int32"), k), fw(data((1,)), k)), {}))
        add(f"scatter_nd/{k}/upd_shape", "scatter_nd",
            lambda k=k: ((fw(data((2, 3)), k), fw(np.zeros((2, 1), "int32"), k), fw(data((2, 2)), k)), {}))
        add(f"scatter_nd/{k}/upd_dtype", "scatter_nd",
            lambda k=k: ((fw(data((2, 3)), k), fw(np.zeros((2, 1), "int32"), k), fw(data((2, 3), "int32"), k)), {}))
        add(f"scatter_nd/{k}/repeat", "scatter_nd",
            lambda k=k: ((fw(data((2, 3)), k), fw(np.array([[1], [1], [-1]], "int64"), k),
                          fw(data((3, 3)) + 40, k)), {}))
        add(f"scatter_nd/{k}/zero", "scatter_nd",
            lambda k=k: ((fw(data((2, 3)), k), fw(np.zeros((0, 1), "int32"), k), fw(data((0, 3)), k)), {}))
        for dt in ("bool", "complex128", "uint8", "int64"):
            add(f"gather_nd/{k}/xdt{dt}", "gather_nd",
                lambda k=k, dt=dt: ((fw(data((2, 3), dt), k), fw(np.zeros((2, 1), "int32"), k)), {}))
            add(f"scatter_nd/{k}/xdt{dt}", "scatter_nd", lambda k=k, dt=dt: (
                (fw(data((2, 3), dt), k), fw(np.zeros((2, 1), "int32"), k), fw(data((2, 3), dt), k)), {}))
        for it in ("int16", "float32", "bool"):
            add(f"gather_nd/{k}/idt{it}", "gather_nd",
                lambda k=k, it=it: ((fw(data((2, 3)), k), fw(np.zeros((2, 1), it), k)), {}))
    for name, v in views.items():
        def nd(v=v):
            x, i = v()
            return x, np.clip(i[..., :2], -2, 1)
        add(f"gather_nd/np/{name}", "gather_nd", lambda nd=nd: (nd(), {}))
    for wn, w in weird.items():
        add(f"gather_nd/arg_x/{wn}", "gather_nd", lambda w=w: ((w, np.zeros((2, 1), "int32")), {}))
        add(f"gather_nd/arg_i/{wn}", "gather_nd", lambda w=w: ((data((2, 3)), w), {}))
        add(f"gather_nd/arg_b/{wn}", "gather_nd", lambda w=w: ((data((2, 3)), np.zeros((2, 1), "int32"), w), {}))
        add(f"gather_nd/arg_chk/{wn}", "gather_nd",
            lambda w=w: ((data((2, 3)), np.zeros((2, 1), "int32")), {"check_indices": w}))
        add(f"scatter_nd/arg_x/{wn}", "scatter_nd", lambda w=w: ((w, np.zeros((2, 1), "int32"), data((2, 3))), {}))
        add(f"scatter_nd/arg_i/{wn}", "scatter_nd", lambda w=w: ((data((2, 3)), w, data((2, 3))), {}))
        add(f"scatter_nd/arg_u/{wn}", "scatter_nd", lambda w=w: ((data((2, 3)), np.zeros((2, 1), "int32"), w), {}))
        add(f"scatter_nd/arg_chk/{wn}", "scatter_nd",
            lambda w=w: ((data((2, 3)), np.zeros((2, 1), "int32"), data((2, 3))), {"check_indices": w}))

    # ---- one_hot
    for k in kinds:
        for it in itypes + ["int8", "float32", "bool"]:
            for axis in (-1, 0, 1, 2, -3, 3):
                for depth in (1, 4):
                    iv = (np.array([[0, 3, -1], [2, 5, -5]]) % (256 if it[0] == "u" else 1000)).astype(
                        it if it not in ("bool",) else "int64")
                    if it == "bool":
                        iv = iv.astype(bool)
                    add(f"one_hot/{k}/{it}/ax{axis}/d{depth}", "one_hot",
                        lambda k=k, iv=iv, axis=axis, depth=depth: (
                            (fw(iv, k), depth, fw(np.array([0.5, 2], "float32"), k), axis), {}))
        for vd in ("float16", "int8", "uint64", "bool", "complex64", "float64"):
            add(f"one_hot/{k}/vdt{vd}", "one_hot",
                lambda k=k, vd=vd: ((fw(np.array([0, 1]), k), 3, fw(np.array([0, 1], vd), k)), {}))
        for vs in ((3,), (1,), (), (2, 1), (1, 2), (0,)):
            add(f"one_hot/{k}/vshape{vs}", "one_hot",
                lambda k=k, vs=vs: ((fw(np.array([0, 1]), k), 3, fw(data(vs), k)), {}))
        add(f"one_hot/{k}/i0d", "one_hot", lambda k=k: ((fw(np.array(2), k), 3, fw(np.array([0., 1.]), k)), {}))
        add(f"one_hot/{k}/izero", "one_hot",
            lambda k=k: ((fw(np.zeros((0, 2), "int32"), k), 3, fw(np.array([0., 1.]), k)), {}))
        add(f"one_hot/{k}/irank8", "one_hot",
            lambda k=k: ((fw(np.zeros((1,) * 8, "int32"), k), 3, fw(np.array([0., 1.]), k)), {}))
        add(f"one_hot/{k}/irank7", "one_hot",
            lambda k=k: ((fw(np.zeros((1,) * 7, "int32"), k), 3, fw(np.array([0., 1.]), k)), {}))
    for depth in (0, -1, 2 ** 31, 2 ** 40, 2 ** 70, 1.0, 2.5, float("nan"), "3", None, True, np.int32(3), [3]):
        add(f"one_hot/depth{depth!r}", "one_hot", lambda depth=depth: (
            (np.array([0, 1], "int32"), depth, np.array([0., 1.])), {}))
    for wn, w in weird.items():
        add(f"one_hot/arg_i/{wn}", "one_hot", lambda w=w: ((w, 3, np.array([0., 1.])), {}))
        add(f"one_hot/arg_v/{wn}", "one_hot", lambda w=w: ((np.array([0, 1]), 3, w), {}))
        add(f"one_hot/arg_axis/{wn}", "one_hot", lambda w=w: ((np.array([0, 1]), 3, np.array([0., 1.]), w), {}))
    for name, v in views.items():
        add(f"one_hot/np/{name}", "one_hot", lambda v=v: ((v()[1], 5, np.array([1., 7.], "float32")), {}))
    add("one_hot/np/values_negstride", "one_hot",
        lambda: ((np.array([0, 2]), 3, np.array([3., 4.], "float32")[::-1]), {}))
    add("one_hot/np/values_bcast", "one_hot",
        lambda: ((np.array([0, 2]), 3, np.broadcast_to(np.float32(4), (2,))), {}))
    add("one_hot/mixed", "one_hot", lambda: ((torch.tensor([0, 2]), 3, np.array([3., 4.], "float32")), {}))

    # ---- reverse_subsequences
    for k in kinds:
        for lt in ("uint32", "uint64", "int32", "int64", "float32", "bool"):
            for axis in (0, 1, 2, -1, -2):
                xs = (3, 4, 5)
                a = axis % 3
                for full in (True, False):
                    ls = xs[:a] + (1,) + xs[a + 1:] if full else xs[:a] + xs[a + 1:]
                    lv = (np.arange(int(np.prod(ls))) % (xs[a] + 3)).reshape(ls).astype(lt)
                    add(f"reverse_subsequences/{k}/{lt}/ax{axis}/full{full}", "reverse_subsequences",
                        lambda k=k, lv=lv, axis=axis: ((fw(data((3, 4, 5)), k), fw(lv, k), axis), {}))
        for ls in ((3, 5), (1, 4, 5), (2,), (3, 1, 5, 1), ()):
            add(f"reverse_subsequences/{k}/lshape{ls}", "reverse_subsequences", lambda k=k, ls=ls: (
                (fw(data((3, 4, 5)), k), fw(np.ones(ls, "uint32"), k), 1), {}))
        add(f"reverse_subsequences/{k}/zero", "reverse_subsequences", lambda k=k: (
            (fw(data((0, 4)), k), fw(np.ones((0, 1), "uint32"), k), 1), {}))
        add(f"reverse_subsequences/{k}/zero_axis", "reverse_subsequences", lambda k=k: (
            (fw(data((3, 0)), k), fw(np.ones((3, 1), "uint32"), k), 1), {}))
        add(f"reverse_subsequences/{k}/huge_len", "reverse_subsequences", lambda k=k: (
            (fw(data((3, 4)), k), fw(np.array([2 ** 32 - 1, 2 ** 31, 0], "uint32"), k), 1), {}))
        add(f"reverse_subsequences/{k}/x1d", "reverse_subsequences", lambda k=k: (
            (fw(data((6,)), k), fw(np.array([4], "uint64"), k), 0), {}))
        add(f"reverse_subsequences/{k}/x0d", "reverse_subsequences", lambda k=k: (
            (fw(data(()), k), fw(np.array(1, "uint64"), k), 0), {}))
        for dt in ("bool", "complex64", "int16", "float16"):
            add(f"reverse_subsequences/{k}/xdt{dt}", "reverse_subsequences", lambda k=k, dt=dt: (
                (fw(data((3, 4), dt), k), fw(np.array([2, 3, 4], "uint32"), k), 1), {}))
    for name, v in views.items():
        def rv(v=v):
            x = v()[0]
            return x, np.full(x.shape[:1] + x.shape[2:], 3, "uint64")
        add(f"reverse_subsequences/np/{name}", "reverse_subsequences", lambda rv=rv: ((*rv(), 1), {}))
    for wn, w in weird.items():
        add(f"reverse_subsequences/arg_x/{wn}", "reverse_subsequences",
            lambda w=w: ((w, np.array([1, 2, 0], "uint32"), 1), {}))
        add(f"reverse_subsequences/arg_l/{wn}", "reverse_subsequences", lambda w=w: ((data((3, 4)), w, 1), {}))
        add(f"reverse_subsequences/arg_axis/{wn}", "reverse_subsequences",
            lambda w=w: ((data((3, 4)), np.array([1, 2, 0], "uint32"), w), {}))

    # ---- diagonal_matrix
    for k in kinds:
        for dt in xdts + ["bool", "complex64"]:
            for (b, e, val) in ((0, 1, 1), (1, 0, 5), (-1, 2, 0), (2, 2, 3), (-2 ** 31, 1, 0), (0, 2 ** 31 - 1, 7)):
                add(f"diagonal_matrix/{k}/{dt}/b{b}/e{e}/v{val}", "diagonal_matrix",
                    lambda k=k, dt=dt, b=b, e=e, val=val: ((fw(data((2, 3, 4), dt), k),),
                                                           {"begin": b, "end": e, "value": val}))
        add(f"diagonal_matrix/{k}/x1d", "diagonal_matrix", lambda k=k: ((fw(data((3,)), k),), {}))
        add(f"diagonal_matrix/{k}/x5d", "diagonal_matrix", lambda k=k: ((fw(data((1, 1, 1, 2, 2)), k),), {}))
        add(f"diagonal_matrix/{k}/zero", "diagonal_matrix", lambda k=k: ((fw(data((0, 3)), k),), {}))
        add(f"diagonal_matrix/{k}/shape_ok", "diagonal_matrix",
            lambda k=k: ((fw(data((2, 3)), k),), {"shape": (2, 3), "dtype": "float32"}))
        add(f"diagonal_matrix/{k}/shape_bad", "diagonal_matrix",
            lambda k=k: ((fw(data((2, 3)), k),), {"shape": (3, 2)}))
        add(f"diagonal_matrix/{k}/dtype_bad", "diagonal_matrix",
            lambda k=k: ((fw(data((2, 3)), k),), {"dtype": "int32"}))
    for val in (1.5, 300, -1, 2 ** 70, float("nan"), float("inf"), "1", None, True, np.float32(2), [1]):
        for dt in ("uint8", "float16", "int64", "float32"):
            add(f"diagonal_matrix/value{val!r}/{dt}", "diagonal_matrix",
                lambda val=val, dt=dt: ((data((3, 3), dt),), {"value": val}))
            add(f"diagonal_matrix/gen/value{val!r}/{dt}", "diagonal_matrix",
                lambda val=val, dt=dt: ((), {"shape": (3, 3), "dtype": dt, "value": val}))
    for be in (2 ** 31, -2 ** 31 - 1, 1.0, None, "0", True, np.int64(1), float("nan")):
        add(f"diagonal_matrix/begin{be!r}", "diagonal_matrix", lambda be=be: ((data((3, 3)),), {"begin": be}))
        add(f"diagonal_matrix/end{be!r}", "diagonal_matrix", lambda be=be: ((data((3, 3)),), {"end": be}))
        add(f"diagonal_matrix/gen/begin{be!r}", "diagonal_matrix",
            lambda be=be: ((), {"shape": (2, 2), "begin": be}))
    for shape in ((3, 3), (2, 3, 4), (1, 1, 2, 2), (3,), (1, 1, 1, 1, 1), (0, 3), (2 ** 31, 2 ** 31), (-1, 2),
                  (2.0, 3), None, "ab", 5, [2, 2], np.array([2, 3]), (float("nan"), 2), (2 ** 70, 1),
                  (np.int64(2), 2), (True, 2)):
        add(f"diagonal_matrix/gen/shape{shape!r}", "diagonal_matrix", lambda shape=shape: ((), {"shape": shape}))
    for dt in ("float32", "int8", "uint64", "bool", "complex64", None, 7, "nope", np.float16, "f8"):
        add(f"diagonal_matrix/gen/dtype{dt!r}", "diagonal_matrix",
            lambda dt=dt: ((), {"shape": (2, 3), "dtype": dt}))
    for name, v in views.items():
        add(f"diagonal_matrix/np/{name}", "diagonal_matrix", lambda v=v: ((v()[0],), {"begin": -1, "end": 1}))
    for wn, w in weird.items():
        add(f"diagonal_matrix/arg_x/{wn}", "diagonal_matrix", lambda w=w: ((w,), {}))
    add("diagonal_matrix/x_none", "diagonal_matrix", lambda: ((None,), {"shape": (2, 2)}))
    add("diagonal_matrix/positional2", "diagonal_matrix", lambda: ((data((2, 2)), (2, 2)), {}))

    # ---- the window functions (opendml, opendml.torch, opendml.jax) and the move family (opendml)
    for mod in ("opendml", "opendml.torch") + (("opendml.jax",) if jnp is not None else ()):
        kk = {"opendml": "np", "opendml.torch": "torch", "opendml.jax": "jax"}[mod]
        for dt in ("float32", "float16", "int8", "uint64", "bool", "complex64"):
            x4 = lambda kk=kk, dt=dt: fw(data((1, 2, 5, 6), dt), kk)
            add(f"{mod}:unfold/{dt}/ok", f"{mod}:unfold", lambda x4=x4: ((x4(), 3), {}))
            add(f"{mod}:slice1/{dt}/ok", f"{mod}:slice1",
                lambda x4=x4: ((x4(), (0, 0, 1, 0), (1, 2, 3, 4), (1, 1, 1, 2)), {}))
        x4 = lambda kk=kk: fw(data((1, 2, 5, 6)), kk)
        for args in ((3,), ((2, 3), (1, 2)), ((2, 3), 1, 2), (3, 1, 1, 1, 1), (3, 1, 1, (1, 0), (0, 2)), (0,), (7,),
                     ((2, 3, 4),), (3, 0), (3, 1, 0), (3, 1, 1, -1), ("3",), (None,), (2.0,), (2 ** 40,),
                     (float("nan"),), ([2, 2],), (np.int64(2),), (True,)):
            add(f"{mod}:unfold/args{args!r}", f"{mod}:unfold", lambda x4=x4, args=args: ((x4(), *args), {}))
        for args in (((3, 4), 2), ((3, 4), 2, 2), ((3, 4), (2, 2), 1, 1, 1, 1), ((3, 5), 2), ((3,), 2), (3, 2),
                     ((3, 4), 0), (None, 2), ((2 ** 40, 1), 2), ((3, 4), "2")):
            add(f"{mod}:fold/args{args!r}", f"{mod}:fold",
                lambda kk=kk, args=args: ((fw(data((1, 8, 6)), kk), *args), {}))
        for args in (((0, 0, 1, 0), (1, 2, 3, 4), (1, 1, 1, 2)), ((0, 0, 4, 5), (1, 2, 3, 3), (1, 1, -1, -2)),
                     ((0, 0, 9, 0), (1, 2, 3, 4), (1, 1, 1, 1)), ((0, 0, 1), (1, 2, 3), (1, 1, 1)),
                     ((0, 0, 0, 0), (1, 2, 5, 6), (1, 1, 0, 1)),
                     ((0, 0, 0, 0), (1, 2, 2, 2), (1, 1, 2, 2), (1, 2, 2, 2)),
                     ((0, 0, 0, 0), (1, 2, 2, 2), (1, 1, 2, 2), (1, 2, 4)),
                     ((0, 0, -1, 0), (1, 2, 3, 4), (1, 1, 1, 1)),
                     ((0, 0, 0, 0), (1, 2, 2 ** 40, 1), (1, 1, 1, 1)), ("0000", (1, 2, 3, 4), (1, 1, 1, 1)),
                     (None, (1, 2, 3, 4), (1, 1, 1, 1)), ((0.0, 0, 0, 0), (1, 2, 3, 4), (1, 1, 1, 1))):
            add(f"{mod}:slice1/args{args!r}", f"{mod}:slice1", lambda x4=x4, args=args: ((x4(), *args), {}))
            add(f"{mod}:slice/args{args!r}", f"{mod}:slice", lambda x4=x4, args=args: ((x4(), *args[:3]), {}))
        for args in (((1, 2, 5, 6), (0, 0, 1, 0), (1, 2, 3, 2), (1, 1, 1, 3)),
                     ((1, 2, 5, 6), (0, 0, 4, 5), (1, 2, 3, 2), (1, 1, -1, -3)),
                     ((1, 2, 5, 6), (0, 0, 1, 0), (1, 2, 3, 3), (1, 1, 1, 3)),
                     ((1, 2, 2, 2), (0, 0, 1, 0), (1, 2, 3, 2), (1, 1, 1, 3)),
                     ((1, 2, 5), (0, 0, 1), (1, 2, 3), (1, 1, 1)), (None, (0,) * 4, (1, 2, 3, 2), (1,) * 4)):
            add(f"{mod}:slice_grad/args{args!r}", f"{mod}:slice_grad",
                lambda kk=kk, args=args: ((fw(data((1, 2, 3, 2)), kk), *args), {}))
        for bad in ([1, 2], [[1, 2], [3]], "abc", None, object, 2.5):
            add(f"{mod}:unfold/bad_type{bad!r}", f"{mod}:unfold", lambda bad=bad: ((bad, 3), {}))
            add(f"{mod}:slice_grad/bad_type{bad!r}", f"{mod}:slice_grad",
                lambda bad=bad: ((bad, (2,), (0,), (1,), (1,)), {}))
        add(f"{mod}:unfold/rank2", f"{mod}:unfold", lambda kk=kk: ((fw(data((5, 6)), kk), 3), {}))
        add(f"{mod}:unfold/zero", f"{mod}:unfold", lambda kk=kk: ((fw(data((0, 2, 5, 6)), kk), 3), {}))
    xv = data((4, 6, 5))
    for name, x in {"plain": lambda: xv, "negstride": lambda: xv[::-1, ::-2], "strided": lambda: xv[:, 1::2],
                    "bcast": lambda: np.broadcast_to(data((1, 3, 5)), (4, 3, 5)), "torch": lambda: torch.from_numpy(xv),
                    "torch_t": lambda: torch.from_numpy(xv).transpose(0, 2), "big": lambda: xv.astype(">f4"),
                    "zero": lambda: data((0, 3, 5)), "int8": lambda: xv.astype("int8"), "bool": lambda: xv > 0,
                    "list": lambda: xv.tolist(), "none": lambda: None, "scalar": lambda: 3.0,
                    "0d": lambda: np.float32(2), "rank9": lambda: data((1,) * 9)}.items():
        for fn, args, kw in (("identity", (), {}), ("identity", (2.0, 1.0), {}), ("identity", ("a",), {}),
                             ("cast", ("float16",), {}), ("cast", ("int64",), {}), ("cast", ("bogus",), {}),
                             ("cast", (None,), {}), ("pad", ((0, 1, 1), (1, 0, 2)), {}),
                             ("pad", ((0, 1, 1), (1, 0, 2), "reflect"), {}),
                             ("pad", ((0, 1, 1), (1, 0, 2), "edge"), {}),
                             ("pad", ((0, 1, 1), (1, 0, 2), "symmetric"), {}),
                             ("pad", ((0, 1, 1), (1, 0, 2), "bad"), {}), ("pad", (1, 1, "constant", 7), {}),
                             ("pad", ((0, -1, 0), 0), {}), ("pad", ((9, 9, 9), 0, "reflect"), {}),
                             ("tile", ((1, 2, 1),), {}), ("tile", (2,), {}), ("tile", ((0, 1, 1),), {}),
                             ("tile", ((2 ** 40, 1, 1),), {}), ("split", (1, (1, 2)), {}), ("split", (0, (2, 2)), {}),
                             ("split", (1, (1, 1)), {}), ("split", (5, (1, 1)), {}), ("join", (), {}),
                             ("depth_to_space", (1,), {}), ("space_to_depth", (1,), {}),
                             ("slice", ((0, 0, 0), (2, 2, 2), (1, 1, 1)), {})):
            def mk(x=x, fn=fn, args=args, kw=kw):
                if fn == "join":
                    return ([x(), x()], 1), kw
                return (x(), *args), kw
            add(f"move/{fn}{args!r}/{name}", fn, mk)
    for name, x4 in {"np": lambda: data((1, 4, 2, 3)), "torch": lambda: torch.from_numpy(data((1, 4, 2, 3))),
                     "neg": lambda: data((1, 4, 2, 3))[:, ::-1]}.items():
        for fn in ("depth_to_space", "space_to_depth"):
            for args in ((2,), (2, "CRD"), (2, "bad"), (0,), (3,), (1.5,)):
                add(f"move/{fn}{args!r}/{name}", fn, lambda x4=x4, args=args: ((x4(), *args), {}))
    for n, args in enumerate((([data((2, 3)), data((2, 1))], 1), ([data((2, 3)), data((2, 1))], 0), ([], 0),
                              ([data((2, 3))], 0), ((data((2, 3)), data((2, 3), "int32")), 0),
                              ([data((2, 3)), torch.ones(2, 3)], 0), (data((2, 3)), 0), ([data((2, 3))] * 2, 5))):
        add(f"move/join/{n}",
            "join", lambda args=args: (args, {}))
    return cases


def sequences(np, torch, jnp, dml):
    """(case id, [thunk, ...]): calls made one after the other, each recorded; a call of one shape served from
    the call cache after another (a good call, then a bad index of the same dtypes and shapes, and back), and
    calls under transforms (autograd, jax.jit, jax.grad)."""
    def data(shape, dt="float32"):
        return (np.arange(int(np.prod(shape))) % 23 - 7).astype(dt).reshape(shape)

    seqs = []
    fws = {"np": lambda a: a, "torch": lambda a: torch.from_numpy(np.ascontiguousarray(a))}
    if jnp is not None:
        fws["jax"] = jnp.asarray
    def family(f, it):
        def idx(v):
            v = np.array(v)
            return f((v % 2 ** 32 if it[0] == "u" else v).astype(it))
        calls = {
            "gather": lambda i, **kw: dml.gather(f(data((3, 4))), idx(i), 1, **kw),
            "gather_elements": lambda i, **kw: dml.gather_elements(f(data((1, 4))), idx([i]), 1, **kw),
            "scatter_elements": lambda i, **kw: dml.scatter_elements(f(data((1, 4))), idx([i]), f(data((1, 3))), 1,
                                                                     **kw),
            "gather_nd": lambda i, **kw: dml.gather_nd(f(data((4, 2))), idx([[j] for j in i]), **kw),
            "scatter_nd": lambda i, **kw: dml.scatter_nd(f(data((4, 2))), idx([[j] for j in i]), f(data((3, 2))),
                                                         **kw),
        }
        return calls

    for k, f in fws.items():
        for it in ("int32", "int64", "uint32", "uint64"):
            for name, call in family(f, it).items():
                good = [0, 3, -4 if it[0] == "i" else 1]
                for bad in ([0, 4, 1], [-5, 0, 0], [1, 1, 9]):
                    seqs.append((f"seq/{name}/{k}/{it}/good-bad{bad}-good-bad",
                                 [lambda c=call, g=good: c(g), lambda c=call, b=bad: c(b),
                                  lambda c=call, g=good: c(g), lambda c=call, b=bad: c(b)]))
                seqs.append((f"seq/{name}/{k}/{it}/unchecked", [
                    lambda c=call, g=good: c(g), lambda c=call: c([0, 4, 99], check_indices=False),
                    lambda c=call: c([0, 4, 99]), lambda c=call: c([0, 4, 99], check_indices=False)]))
        seqs.append((f"seq/one_hot/{k}", [lambda f=f: dml.one_hot(f(np.array([0, 2])), 3, f(np.array([0., 1.]))),
                                          lambda f=f: dml.one_hot(f(np.array([9, -9])), 3, f(np.array([0., 1.])))]))
        seqs.append((f"seq/reverse/{k}", [
            lambda f=f: dml.reverse_subsequences(f(data((3, 4))), f(np.array([1, 2, 3], "uint32")), 1),
            lambda f=f: dml.reverse_subsequences(f(data((3, 4))), f(np.array([9, 0, 4], "uint32")), 1)]))
    # PyTorch autograd
    for name, mk in {
        "gather": lambda x: dml.gather(x, torch.tensor([[1, 1], [-1, 0]]), 1),
        "gather_elements": lambda x: dml.gather_elements(x, torch.tensor([[1, 1, 0, 0]]), 0),
        "gather_nd": lambda x: dml.gather_nd(x, torch.tensor([[1, 1], [1, 1], [0, 2]])),
        "scatter_elements": lambda x: dml.scatter_elements(x, torch.tensor([[1, 1, 0, 0]]),
                                                           torch.ones(1, 4, dtype=torch.float64), 0),
        "scatter_nd": lambda x: dml.scatter_nd(x, torch.tensor([[1], [1]]), torch.ones(2, 4, dtype=torch.float64)),
        "reverse_subsequences": lambda x: dml.reverse_subsequences(x, torch.tensor([2, 1, 4], dtype=torch.uint32),
                                                                   1),
        "diagonal_matrix": lambda x: dml.diagonal_matrix(x, begin=0, end=2, value=5),
    }.items():
        def grad(mk=mk):
            x = torch.from_numpy(data((3, 4), "float64")).requires_grad_(True)
            y = mk(x)
            (g,) = torch.autograd.grad(y, x, torch.from_numpy(data(tuple(y.shape), "float64") + 0.5))
            return g
        seqs.append((f"seq/torch_grad/{name}", [grad, grad]))
    if jnp is not None:
        import jax
        for name, mk in {
            "gather": lambda x, i: dml.gather(x, i, 1),
            "gather_elements": lambda x, i: dml.gather_elements(x, i.reshape(1, -1)[:, :4], 0),
            "gather_nd": lambda x, i: dml.gather_nd(x, i.reshape(-1, 1)),
            "one_hot": lambda x, i: dml.one_hot(i, 5, jnp.asarray([0.0, 1.0])) + x.sum(),
        }.items():
            for it, iv in (("good", [0, 1, -1, 2]), ("bad", [0, 7, -9, 2])):
                jit = jax.jit(mk)
                seqs.append((f"seq/jax_jit/{name}/{it}", [
                    lambda jit=jit, iv=iv: jit(jnp.asarray(data((3, 4))), jnp.asarray(np.array(iv, "int32")))] * 2))
                seqs.append((f"seq/jax_grad/{name}/{it}", [
                    lambda mk=mk, iv=iv: jax.grad(lambda x: mk(x, jnp.asarray(np.array(iv, "int32"))).sum())(
                        jnp.asarray(data((3, 4))))] * 2))
        import opendml.jax as djax
        x4 = jnp.asarray(data((2, 2, 5, 6)))
        for name, call in {"unfold": lambda x: djax.unfold(x, (2, 3), (1, 2), 1, (1, 0), 0),
                           "fold": lambda x: djax.fold(djax.unfold(x, 2), (5, 6), 2),
                           "slice1": lambda x: djax.slice1(x, (0, 1, 2, 0), (2, 1, 3, 3), (1, 1, -1, 2)),
                           "slice": lambda x: djax.slice(x, (0, 1, 1, 0), (2, 1, 3, 3), (1, 1, 1, 2)),
                           "slice_grad": lambda x: djax.slice_grad(x, (2, 2, 6, 7), (0, 0, 1, 0), (2, 2, 5, 6),
                                                                   (1, 1, 1, 1)),
                           "bad": lambda x: djax.unfold(x, 9)}.items():
            seqs.append((f"seq/opendml.jax/{name}", [
                lambda call=call: call(x4), lambda call=call: jax.jit(call)(x4),
                lambda call=call: jax.grad(lambda x: (call(x) ** 2).sum())(x4),
                lambda call=call: jax.vmap(call)(jnp.stack([x4, x4 + 1])),
                lambda call=call: djax.Unfold((2, 2))(x4) if name == "unfold" else call(np.asarray(x4))]))
    return seqs


# -- the worker ------------------------------------------------------------------------------------------

def outcome(f, args, kwargs, np):
    try:
        out = f(*args, **kwargs)
    except BaseException as e:                        # noqa: BLE001 - every error is compared
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return ["err", f"{type(e).__module__}.{type(e).__qualname__}", str(e)]
    if isinstance(out, list):                         # split: each output
        return ["list", [outcome(lambda o=o: o, (), {}, np) for o in out]]
    mod = type(out).__module__.split(".")[0]
    try:
        if mod == "torch":
            a = out.detach().cpu().resolve_neg().numpy()
        else:
            a = np.asarray(out)
        data = np.ascontiguousarray(a).tobytes()
        return ["ok", mod, str(a.dtype), list(a.shape), hashlib.sha1(data).hexdigest()]
    except BaseException as e:                        # noqa: BLE001
        return ["unreadable", type(out).__qualname__, repr(e)]


def signatures(mods):
    out = {}
    for m in mods:
        names = sorted(set(getattr(m, "__all__", [])) | {n for n in dir(m) if not n.startswith("_")})
        out[f"{m.__name__}.__all__"] = list(getattr(m, "__all__", []))
        for n in names:
            obj = getattr(m, n, None)
            if not callable(obj) or inspect.ismodule(obj):
                continue
            try:
                sig = inspect.signature(obj)
                params = [[p.name, p.kind.name, repr(p.default)] for p in sig.parameters.values()]
                ann = str(sig)
            except (TypeError, ValueError) as e:
                params, ann = f"no signature: {e}", ""
            doc = (inspect.getdoc(obj) or "").strip().splitlines()
            out[f"{m.__name__}.{n}"] = {"params": params, "annotated": ann, "doc": doc[0] if doc else ""}
    return out


def worker(mode: str) -> None:
    import numpy as np
    import torch
    try:
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
    except ImportError:
        jnp = None
    import opendml as dml
    mods = [dml]
    import opendml.torch as dtorch
    mods.append(dtorch)
    if jnp is not None:
        import opendml.jax as djax
        mods.append(djax)
    if mode == "no_call_cache":
        dml.configure(call_cache=False)
    elif mode == "numpy_kernels":
        dml.configure(cpu_kernels="numpy")
    res = {"signatures": signatures(mods) if mode == "default" else {}, "calls": {}}
    by_name = {m.__name__: m for m in mods}
    for cid, fn, make in battery(np, torch, jnp):
        mname, _, name = fn.rpartition(":")
        f = getattr(by_name[mname or "opendml"], name)
        try:
            args, kwargs = make()
        except Exception as e:                        # noqa: BLE001 - a case this environment cannot build
            res["calls"][cid] = [["unbuildable", repr(e)]] * 2
            continue
        res["calls"][cid] = [outcome(f, args, kwargs, np), outcome(f, args, kwargs, np)]
    for cid, thunks in sequences(np, torch, jnp, dml):
        res["calls"][cid] = [outcome(t, (), {}, np) for t in thunks]
    json.dump(res, sys.stdout)


def run_tree(src: str, mode: str) -> dict:
    env = {**os.environ, "PYTHONPATH": src, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, __file__, "--worker", mode], env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"worker {src} {mode} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout)


def main(old: str, new: str) -> int:
    diffs, per_mode = 0, {}
    for mode in MODES:
        a, b = run_tree(old, mode), run_tree(new, mode)
        if mode == "default":
            sa, sb = a["signatures"], b["signatures"]
            print(f"signatures: {len(sa)} old, {len(sb)} new")
            for key in sorted(set(sa) | set(sb)):
                if sa.get(key) != sb.get(key):
                    diffs += 1
                    old_, new_ = sa.get(key), sb.get(key)
                    if isinstance(old_, dict) and isinstance(new_, dict):
                        old_, new_ = ({f: d[f] for f in d if old_[f] != new_[f]} for d in (old_, new_))
                    print(f"  SIG {key}:\n    old {old_}\n    new {new_}")
        ca, cb = a["calls"], b["calls"]
        n_ok = sum(1 for v in cb.values() if v[0][0] == "ok")
        print(f"[{mode}] calls: {len(cb)} ({n_ok} valid, {len(cb) - n_ok} raising), each called twice")
        for cid in ca:
            ra, rb = ca[cid], cb.get(cid)
            if ra != rb:
                diffs += 1
                print(f"  DIFF {mode} {cid}:\n    old {ra}\n    new {rb}")
            for tree, r in (("old", ra), ("new", rb)):
                if r and not cid.startswith("seq/") and r[0] != r[1]:
                    print(f"  REPEAT {mode} {tree} {cid}:\n    first  {r[0]}\n    repeat {r[1]}")
                    diffs += tree == "new"
        per_mode[mode] = (a["calls"], b["calls"])
    for tree, i in (("old", 0), ("new", 1)):
        base = per_mode["default"][i]
        for mode in MODES[1:]:
            other = per_mode[mode][i]
            for cid in base:
                if base[cid] != other.get(cid):
                    print(f"  MODE {tree} default vs {mode} {cid}:\n    default {base[cid]}\n    "
                          f"{mode} {other.get(cid)}")
                    diffs += tree == "new"
    print(f"{diffs} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        worker(sys.argv[2])
    else:
        sys.exit(main(sys.argv[1], sys.argv[2]))
