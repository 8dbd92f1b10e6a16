"""The array API of the index-driven operators: ``gather``, ``gather_elements``,
``gather_nd``, ``scatter_elements``, ``scatter_nd``, ``one_hot`` and
``reverse_subsequences``, on NumPy arrays (and through the family's
framework routes, ``family.run_list``, on the frameworks it runs).

Each function builds the operator's description (``opendml.ops``) for its
arrays and runs it through the family's framework-neutral call
(``family.FamilyCall``). DirectML gives every tensor of an operator one
DimensionCount; the functions take arrays of the natural ranks (NumPy's
``take``, ``take_along_axis``, ONNX's GatherND and ScatterND) and pad them
with leading 1s (views) to that DimensionCount, then give the result its
natural shape.

Indices are INT32, INT64, UINT32 or UINT64 arrays (DirectML's index types;
``reverse_subsequences``' lengths UINT32 or UINT64). A negative index of a
signed type counts from the end of its dimension. By default every index is
checked first: the first one outside its dimension raises
``opendml.ValidationError`` naming its value and position; with
``check_indices=False`` nothing is checked, and the kernels clamp an
out-of-range index into its dimension (a deterministic result; nothing is
read or written outside an array). Indices traced by ``jax.jit`` have no
values when the call is traced: they are not checked (clamped, as with the
check off); so are PyTorch indices under ``torch.compile``. Indices of another framework than the data are moved to the
data's (NumPy indices for a PyTorch tensor, say). ``one_hot`` defines out-of-range indices
(an all-off row) and ``reverse_subsequences`` clamps long lengths, as
DirectML does: neither checks.

Scatters with repeated indices keep the last update in row-major order of
the indices, on every backend.

Differentiation (PyTorch autograd, JAX): where the data type is a float type
the gathers, the scatters and ``reverse_subsequences`` are linear in their
data inputs; the adjoints are index-driven move programs of their own
(``ops._index.IndexAdjointDesc``): a gather's is an accumulating scatter
(repeated indices add up in row-major order of the indices: the same bytes
every run); a scatter's gathers the updates' gradient (0 for an update a
repeated index overwrote) and zeroes the written positions of the input's; ``reverse_subsequences`` is its own adjoint.
Indices get no gradient.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..model.errors import ValidationError
from ..model.tensor_desc import TensorDesc
from ..ops import (GatherElementsOperatorDesc, GatherNd1OperatorDesc, GatherOperatorDesc, OneHotOperatorDesc,
                   ReverseSubsequencesOperatorDesc, ScatterElementsOperatorDesc, ScatterNdOperatorDesc)
from ..ops._index import IndexAdjointDesc, IndexPrimalDesc
from . import _contract, _dispatch, family_cache
from . import front as family

__all__ = ["gather", "gather_elements", "gather_nd", "scatter_elements", "scatter_nd", "one_hot",
           "reverse_subsequences"]

def _shape(x, where: str, name: str) -> tuple[int, ...]:
    """An array's shape as ints (``_checked`` has made sure it is an array)."""
    return tuple(int(n) for n in x.shape)


def _lead(x, rank: int):
    """``x`` with leading 1s up to ``rank`` dimensions (a view)."""
    shape = tuple(int(n) for n in x.shape)
    if len(shape) == rank:
        return x
    return x.reshape((1,) * (rank - len(shape)) + shape)


def _count(value, where: str, field: str, lo: int, what: str) -> int:
    """An integer argument that is a DirectML field (``field``, in the
    contract's form: ``GATHER: IndexDimensions must ...``)."""
    if isinstance(value, bool):
        raise _contract.field_error(where, field, f"be an integer ({what})", value)
    try:
        v = operator.index(value)
    except TypeError:
        raise _contract.field_error(where, field, f"be an integer ({what})", value) from None
    if v < lo:
        raise _contract.field_error(where, field, f"be >= {lo} ({what})", v)
    return v


def _checked(where: str, x, **others) -> None:
    """The array API's contract (``_contract``): ``x`` (the first array) an
    array of a framework the API takes, of a dtype and rank the operator
    takes; ``others`` (indices, updates, values, lengths) arrays of the
    types the operator's table lists for their tensors."""
    if _contract.framework_of(x) is None:
        raise _contract.not_an_array(x, where, _contract.ARGUMENT[where])
    _contract.check_input(where, x)
    _contract.check_others(where, **others)


def _host(a) -> np.ndarray | None:
    """The values of an index array, on the host (NumPy), for the index check
    (None for a JAX tracer: see ``_traced``)."""
    if isinstance(a, np.ndarray):
        return a
    if _traced(a):
        return None
    if type(a).__module__.startswith("torch"):   # PyTorch, read past any torch.func transform
        import torch
        unwrap, wrapped = torch._C._functorch.get_unwrapped, torch._C._functorch.is_functorch_wrapped_tensor
        if torch.compiler.is_compiling() or a.device.type == "meta" or \
                isinstance(a, torch._subclasses.fake_tensor.FakeTensor):
            return None                           # traced (torch.compile): no values to check
        with torch._C._DisableFuncTorch():
            t = a.detach()
            while wrapped(t):
                t = unwrap(t)
            return t.cpu().resolve_neg().numpy()
    get = getattr(a, "get", None)
    if get is not None and type(a).__module__.startswith("cupy"):
        return get()
    return np.asarray(a)


def _traced(a) -> bool:
    """Whether ``a`` is a JAX tracer (``jit`` over the indices): its values
    are not known when the call is traced, so they are not checked (the
    kernels clamp them)."""
    return type(a).__module__.startswith("jax") and "Tracer" in type(a).__name__


def check_index_values(values: np.ndarray, bounds, where: str, name: str = "indices", last_axis: bool = False):
    """The first index outside ``[-n, n)`` (signed types) or ``[0, n)``
    (unsigned) raises ``ValidationError`` naming its value and position;
    ``bounds`` is one n, or (``last_axis``) one n per entry of the last
    axis (index tuples)."""
    v = values
    if v is None or v.size == 0:
        return
    n = np.asarray(bounds, dtype=np.int64)
    lo, hi = v.min(), v.max()              # one contiguous pass each: the whole array against the smallest bound
    if last_axis:
        n = n.reshape((1,) * (v.ndim - 1) + (-1,))
        if not ((v.dtype.kind == "u" or int(lo) >= -int(n.min())) and int(hi) < int(n.min())):
            flat = v.reshape(-1, v.shape[-1])
            lo, hi = flat.min(axis=0), flat.max(axis=0)
    # the common case, everything in range, from the extremes alone
    if v.dtype.kind == "u":
        if (hi.astype(np.uint64) < n.reshape(-1).astype(np.uint64)).all():
            return
        bad = v.astype(np.uint64) >= n.astype(np.uint64)
    else:
        nn = n.reshape(-1)
        if ((lo.astype(np.int64) >= -nn) & (hi.astype(np.int64) < nn)).all():
            return
        w = v.astype(np.int64)
        bad = (w < -n) | (w >= n)
    if bad.any():
        flat = int(np.argmax(bad.reshape(-1)))
        pos = np.unravel_index(flat, v.shape)
        at = tuple(int(p) for p in pos)
        bound = int(np.broadcast_to(n, v.shape)[at])
        lo = -bound if v.dtype.kind == "i" else 0
        raise ValidationError(f"{where}: {name}[{', '.join(map(str, at))}] = {int(v[at])} is out of range: it must "
                              f"be in [{lo}, {bound - 1}] (a dimension of size {bound}); pass check_indices=False to "
                              f"skip this check (out-of-range indices are then clamped)")


def _like(a, x, where: str):
    """Index (or values) array ``a`` in data array ``x``'s framework: as
    given where both are of one framework, else its values moved there
    (NumPy indices for a PyTorch tensor, say)."""
    fx, fa = family._framework(x, where), family._framework(a, where)
    if fx is fa:
        return a
    values = _host(a)
    if values is None:
        raise ValidationError(f"{where}: traced JAX indices need JAX data (got {type(x).__module__} data)")
    if fx is None:
        return values
    mod = type(x).__module__
    if mod.startswith("torch"):
        import torch
        return torch.as_tensor(values, device=x.device)
    if mod.startswith("jax"):
        import jax.numpy as jnp
        return jnp.asarray(values)
    if mod.startswith("cupy"):
        import cupy
        return cupy.asarray(values)
    if mod.startswith("dask"):
        import dask.array as da
        return da.from_array(values, chunks=-1)
    return values


def _run(name: str, make, arrays, shape, fields=None):
    """Run ``make``'s description on ``arrays``; ``fields`` (every value
    ``make`` reads besides the arrays' dtypes and shapes) lets the NumPy
    route serve a repeated call's description and plan from the family's
    cache."""
    arrays = [arrays[0]] + [_like(a, arrays[0], name) for a in arrays[1:]]
    key = None if fields is None else family_cache.call_key(name, *fields)
    out = family.run_list(family.FamilyCall(name, make, key=key), arrays)[0]
    return out.reshape(shape) if tuple(out.shape) != tuple(shape) else out


def gather(x: Any, indices: Any, axis: int, index_dimensions: int | None = None, *,
           check_indices: bool = True):
    """DML_GATHER: ``x`` taken along ``axis`` at ``indices`` (NumPy's
    ``take``): ``out.shape == x.shape[:axis] + indices.shape[-k:] +
    x.shape[axis + 1:]`` with k = ``index_dimensions``.

    Parameters
    ----------
    x : array
        The data, of an integer or float dtype of 1, 2, 4 or 8 bytes.
    indices : integer array
        Positions along ``axis`` (int32, int64, uint32 or uint64; negative
        values of a signed type count from the end).
    axis : int
        The axis of ``x`` (negative values count from the end).
    index_dimensions : int, optional
        DirectML's IndexDimensions: how many trailing dimensions of
        ``indices`` are meaningful (the others must be 1); default all.
    check_indices : bool, optional
        Check every index first (default); False skips the check
        (out-of-range indices are clamped into the dimension).

    Raises
    ------
    ValidationError
        A bad argument, or (``check_indices``) the first index out of range,
        named with its value and position.
    """
    where = "gather"
    _checked(where, x, indices=indices)
    xs, is_ = _shape(x, where, "x"), _shape(indices, where, "indices")
    rx, ri = len(xs), len(is_)
    a = _contract.axis(axis, rx, where)
    k = ri if index_dimensions is None else _count(index_dimensions, where, "IndexDimensions", 0, "index_dimensions")
    if k > ri:
        raise _contract.field_error(where, "IndexDimensions", f"be <= the indices' number of dimensions {ri} "
                                    "(index_dimensions)", k)
    for d in range(ri - k):
        if is_[d] != 1:
            raise ValidationError(f"{where}: indices.shape[{d}] must be 1 (before the last index_dimensions = {k}); "
                                  f"got {is_[d]}")
    if check_indices and len(xs):
        check_index_values(_host(indices), xs[a], where)
    r = max(rx, ri, rx + k - 1, 1)
    shape = xs[:a] + is_[ri - k:] + xs[a + 1:]
    ap = a + r - len(xs)
    return _run(where, lambda tx, ti: GatherOperatorDesc(tx, ti, None, ap, k),
                [_lead(x, r), _lead(indices, r)], shape, (ap, k))


def gather_elements(x: Any, indices: Any, axis: int, *, check_indices: bool = True):
    """DML_GATHER_ELEMENTS: ``out[..., i, ...] = x[..., indices[..., i, ...],
    ...]`` along ``axis`` (NumPy's ``take_along_axis``; ``indices`` has
    ``x``'s shape but along ``axis``). Indices and ``check_indices`` as for
    ``gather``."""
    where = "gather_elements"
    _checked(where, x, indices=indices)
    xs, is_ = _shape(x, where, "x"), _shape(indices, where, "indices")
    if len(xs) != len(is_):
        raise ValidationError(f"{where}: indices must have x's number of dimensions {len(xs)}; got {len(is_)}")
    a = _contract.axis(axis, len(xs), where)
    if check_indices and len(xs):
        check_index_values(_host(indices), xs[a], where)
    return _run(where, lambda tx, ti: GatherElementsOperatorDesc(tx, ti, None, a), [x, indices], is_, (a,))


def _nd_rank(xs, is_, b):
    q = is_[-1] if is_ else 0
    return max(len(xs), len(is_), len(is_) - 1 + len(xs) - b - q, 1)


def gather_nd(x: Any, indices: Any, batch_dimensions: int = 0, *, check_indices: bool = True):
    """DML_GATHER_ND1 (ONNX GatherND): ``indices``' last axis holds index
    tuples of q entries into ``x``'s dimensions after the first
    ``batch_dimensions`` (which both arrays share); ``out.shape ==
    indices.shape[:-1] + x.shape[batch_dimensions + q:]``."""
    where = "gather_nd"
    _checked(where, x, indices=indices)
    xs, is_ = _shape(x, where, "x"), _shape(indices, where, "indices")
    b = _count(batch_dimensions, where, "BatchDimensionCount", 0, "batch_dimensions")
    if not is_:
        raise ValidationError(f"{where}: indices must have at least one dimension (the index tuples); got 0")
    if b >= len(is_):
        raise _contract.field_error(where, "BatchDimensionCount", f"be < the indices' number of dimensions "
                                    f"{len(is_)} (batch_dimensions)", b)
    q = is_[-1]
    if not 1 <= q <= len(xs) - b:
        raise ValidationError(f"{where}: indices.shape[-1] (the tuple size) must be in [1, x.ndim - "
                              f"batch_dimensions] = [1, {len(xs) - b}]; got {q}")
    if check_indices:
        check_index_values(_host(indices), xs[b:b + q], where, last_axis=True)
    r = _nd_rank(xs, is_, b)
    shape = is_[:-1] + xs[b + q:]
    return _run(where, lambda tx, ti: GatherNd1OperatorDesc(tx, ti, None, len(xs), len(is_), b),
                [_lead(x, r), _lead(indices, r)], shape, (len(xs), len(is_), b))


def scatter_elements(x: Any, indices: Any, updates: Any, axis: int, *, check_indices: bool = True):
    """DML_SCATTER_ELEMENTS: a copy of ``x`` with ``out[..., indices[..., i,
    ...], ...] = updates[..., i, ...]`` along ``axis`` (``indices`` and
    ``updates`` of one shape, ``x``'s but along ``axis``). Where indices
    repeat, the last update in row-major order wins. Indices and
    ``check_indices`` as for ``gather``."""
    where = "scatter_elements"
    _checked(where, x, indices=indices, updates=updates)
    xs, is_ = _shape(x, where, "x"), _shape(indices, where, "indices")
    if len(xs) != len(is_):
        raise ValidationError(f"{where}: indices must have x's number of dimensions {len(xs)}; got {len(is_)}")
    a = _contract.axis(axis, len(xs), where)
    if check_indices and len(xs):
        check_index_values(_host(indices), xs[a], where)
    return _run(where, lambda tx, ti, tu: ScatterElementsOperatorDesc(tx, ti, tu, None, a), [x, indices, updates],
                xs, (a,))


def scatter_nd(x: Any, indices: Any, updates: Any, *, check_indices: bool = True):
    """DML_SCATTER_ND (ONNX ScatterND): a copy of ``x`` with the sub-blocks at
    ``indices``' tuples (its last axis, q entries) replaced by ``updates``
    (shape ``indices.shape[:-1] + x.shape[q:]``). Where tuples repeat, the last
    update in row-major order wins."""
    where = "scatter_nd"
    _checked(where, x, indices=indices, updates=updates)
    xs, is_, us = _shape(x, where, "x"), _shape(indices, where, "indices"), _shape(updates, where, "updates")
    if not is_:
        raise ValidationError(f"{where}: indices must have at least one dimension (the index tuples); got 0")
    q = is_[-1]
    if not 1 <= q <= len(xs):
        raise ValidationError(f"{where}: indices.shape[-1] (the tuple size) must be in [1, x.ndim] = "
                              f"[1, {len(xs)}]; got {q}")
    want = is_[:-1] + xs[q:]
    if us != want:
        raise ValidationError(f"{where}: updates.shape must be indices.shape[:-1] + x.shape[q:] = {list(want)}; "
                              f"got {list(us)}")
    if check_indices:
        check_index_values(_host(indices), xs[:q], where, last_axis=True)
    r = max(_nd_rank(xs, is_, 0), len(us))
    return _run(where, lambda tx, ti, tu: ScatterNdOperatorDesc(tx, ti, tu, None, len(xs), len(is_)),
                [_lead(x, r), _lead(indices, r), _lead(updates, r)], xs, (len(xs), len(is_)))


def one_hot(indices: Any, depth: int, values: Any, axis: int = -1):
    """DML_ONE_HOT (ONNX OneHot): a new axis of size ``depth`` at ``axis``
    (of the output: -1 appends it) holding ``values[1]`` (on) at each index
    and ``values[0]`` (off) elsewhere; the output's dtype is ``values``'. A
    negative index of a signed type counts from the end; an index outside
    ``[-depth, depth)`` gives an all-off row (no check)."""
    where = "one_hot"
    _checked(where, indices, values=values)
    is_ = _shape(indices, where, "indices")
    depth = _count(depth, where, "OutputTensor's size along Axis", 1, "depth")
    vs = _shape(values, where, "values")
    if len(vs) != 1 or vs[0] != 2:
        raise ValidationError(f"{where}: values must be a two-element array [off, on]; got shape {list(vs)}")
    ro = len(is_) + 1
    a = _contract.axis(axis, ro, where)
    shape = is_[:a] + (depth,) + is_[a:]
    ind = indices.reshape(is_[:a] + (1,) + is_[a:])
    val = _lead(values, ro)

    def make(ti, tv):
        return OneHotOperatorDesc(ti, tv, _contract.sizes_of(where, "OutputTensor",
                                                             lambda: TensorDesc(tv.data_type, shape)), a)
    return _run(where, make, [ind, val], shape, (shape, a))


def reverse_subsequences(x: Any, sequence_lengths: Any, axis: int):
    """DML_REVERSE_SUBSEQUENCES: along ``axis``, the first L elements of each
    sequence reversed (L from ``sequence_lengths``, uint32 or uint64, of
    ``x``'s shape with 1 along ``axis``, or without that axis); lengths past
    the axis are clamped to it."""
    where = "reverse_subsequences"
    _checked(where, x, sequence_lengths=sequence_lengths)
    xs, ls = _shape(x, where, "x"), _shape(sequence_lengths, where, "sequence_lengths")
    a = _contract.axis(axis, len(xs), where)
    if len(ls) == len(xs) - 1:
        sequence_lengths = sequence_lengths.reshape(ls[:a] + (1,) + ls[a:])
    return _run(where, lambda tx, tl: ReverseSubsequencesOperatorDesc(tx, tl, None, a), [x, sequence_lengths], xs,
                (a,))


def index_adjoint(primal, wrt: int, grad, indices):
    """The adjoint of ``primal`` (an index-driven description) with respect to
    its input ``wrt``, applied to ``grad`` (the output's cotangent), for
    ``indices`` (the primal's index array): an array of that input's shape."""
    shape = primal.inputs[wrt].sizes
    return _run(f"{primal.OPERATOR.lower()}_adjoint",
                lambda tg, ti: IndexAdjointDesc(primal, wrt, tg, ti),
                [_lead(grad, len(shape)), indices], shape)


def index_primal(primal, wrt: int, data, indices):
    """``primal``'s linear part as a function of its input ``wrt`` alone (the
    other data inputs zero), on ``data``: the adjoint of ``index_adjoint``."""
    shape = primal.outputs[0].sizes
    return _run(f"{primal.OPERATOR.lower()}_linear", lambda td, ti: IndexPrimalDesc(primal, wrt, td, ti),
                [data, indices], shape)


# What the operator modules' ``adjoint`` methods call (``family.ADJOINT_API``,
# the namespace ``opendml.ops._spec.AdjointApi`` documents), as the family's
# own functions are registered there.
for _name in ("index_adjoint", "index_primal", "reverse_subsequences"):
    setattr(family._AdjointApi, _name, staticmethod(globals()[_name]))

# torch.compile takes these functions into a graph whole (``_dispatch.enter_graph_whole``).
_dispatch.enter_graph_whole([globals()[_name] for _name in __all__])
