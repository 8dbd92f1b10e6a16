"""``opendml.torch`` and ``opendml.jax`` read their functions from the
registry: the window operators' (the plan route's), not a list written per
operator."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import opendml as dml
from opendml.arrays import _contract

WINDOW = [name for name, b in _contract.BINDING.items() if b.params is not None and b.route == "plan"]


def test_opendml_torch_holds_the_window_functions_and_their_custom_operators():
    pytest.importorskip("torch")
    import opendml.torch as odt
    from opendml.arrays.torch import adapter
    assert WINDOW == ["slice", "slice1", "unfold", "fold", "slice_grad"]
    for name in WINDOW:
        assert getattr(odt, name) is getattr(dml, name)
    for name, op in adapter.CUSTOM_OPS.items():
        assert getattr(odt, f"{name}_op") is op
    assert "slice" not in odt.__all__ and {"slice1", "unfold_op", "Unfold", "split_padding"} <= set(odt.__all__)


def test_opendml_jax_wraps_the_window_functions():
    pytest.importorskip("jax")
    import opendml.jax as dj
    for name in WINDOW:
        fn = getattr(dj, name)
        assert fn.__name__ == name and fn.__module__ == "opendml.jax"
        assert list(inspect.signature(fn).parameters) == list(inspect.signature(getattr(dml, name)).parameters)
        assert fn.__doc__.startswith(f"``opendml.{name}`` on ") and "Parameters" in fn.__doc__
    assert "slice" not in dj.__all__ and {"slice1", "fold", "Fold", "lax_unfold"} <= set(dj.__all__)
    for name in WINDOW:                 # the docs say what the wrapper does: a JAX result, whatever came in
        fn = getattr(dj, name)
        assert str(inspect.signature(fn)).endswith("-> 'jax.Array'")       # not JAX's private class path
        returns = fn.__doc__.split("Returns\n    -------\n")[1].split("\n\n")[0]
        assert returns.startswith("    jax.Array\n") and "a ``jax.Array``" in returns and "Dask" not in returns
        array = next(iter(inspect.signature(fn).parameters))
        assert f"    {array} : jax.Array or array-like\n" in fn.__doc__
    # what jnp.asarray refuses is opendml's error naming the argument (it was JAX's TypeError or ValueError)
    for bad, kind in (("abc", "builtins.str"), (None, "builtins.NoneType"), ([[1, 2], [3]], "builtins.list")):
        with pytest.raises(dml.ValidationError, match=f"unfold: x must be a JAX array .*; got {kind}"):
            dj.unfold(bad, 2)
        with pytest.raises(dml.ValidationError, match=f"slice_grad: grad must be a JAX array .*; got {kind}"):
            dj.slice_grad(bad, (2,), (0,), (1,), (1,))
    out = dj.unfold(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4), 2)     # a NumPy array is converted
    assert type(out).__module__.startswith("jax") and out.shape == (1, 4, 9)
    assert dj.Fold((4, 4), 2)(out).shape == (1, 1, 4, 4)
