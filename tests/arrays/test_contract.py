"""The array API's contract (issue 31): one fault, one exception class and one
sentence, for every operator the registry binds to an array function and on
every framework. The operators and their example calls come from the
registry (``OPERATORS`` and each class's ``BINDING``), never from a list
here, so a new operator is checked without an edit to this file."""
import inspect
import math
import re

import numpy as np
import pytest

import opendml as dml
import opendml.arrays
from opendml.ops import OPERATORS
from opendml.ops._spec import binding_of

#: (operator name, class, binding) for every operator with an array function.
BOUND = [(name, cls, binding_of(cls)) for name, cls in OPERATORS.items() if binding_of(cls) is not None]
IDS = [b.function for _, _, b in BOUND]

ARRAYS = "a NumPy, CuPy, PyTorch, JAX or Dask array"
#: DirectML's 11 element types as the messages list them, in order.
NAMES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def newest(cls):
    return [r for r in cls.SUPPORT if r.level <= max(dml.FeatureLevel)][-1]


def supported(cls, slot=None) -> list[str]:
    """The types the newest table lists for the DirectML tensor ``slot``
    (None: the data types)."""
    row = newest(cls)
    types = {t.numpy_dtype.name for t in (row.types if slot is None else row.types_of(slot))}
    return [n for n in NAMES if n in types]


def example_dtype(cls, binding) -> str:
    """float32 where the array argument's tensor takes it, else its first type
    (ONE_HOT's indices: int32)."""
    types = supported(cls, binding.slot)
    return "float32" if "float32" in types else types[0]


def possessive(argument: str) -> str:
    return argument + ("'" if argument.endswith("s") else "'s")


def ranks_of(binding, cls) -> range:
    """The ranks the array argument may have: the table's, less the axes the
    operator adds (ONE_HOT's)."""
    ranks = newest(cls).ranks
    return range(max(0, ranks.start - binding.added_axes), ranks.stop - binding.added_axes)


# -- frameworks ---------------------------------------------------------------------------------------

def _numpy(a):
    return a


def _torch(a):
    torch = pytest.importorskip("torch")
    return torch.from_numpy(a.copy())


def _jax(a):
    jnp = pytest.importorskip("jax.numpy")
    return jnp.asarray(a)


def _dask(a):
    da = pytest.importorskip("dask.array")
    return da.from_array(a, chunks=tuple(max(1, n // 2) for n in a.shape) if a.ndim else ())


def _cupy(a):
    cupy = pytest.importorskip("cupy")
    if not cupy.cuda.is_available():
        pytest.skip("no CUDA device")
    return cupy.asarray(a)


def _torch_cuda(a):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return torch.from_numpy(a.copy()).cuda()


FRAMEWORKS = {"numpy": _numpy, "torch": _torch, "jax": _jax, "dask": _dask, "cupy": _cupy, "torch_cuda": _torch_cuda}

#: How each framework writes a dtype in a message (``bool`` / ``torch.bool``).
DTYPE_TEXT = {"numpy": str, "torch": lambda d: f"torch.{d}", "jax": str, "dask": str, "cupy": str,
              "torch_cuda": lambda d: f"torch.{d}"}


def host(y, framework: str) -> np.ndarray:
    """A result as a NumPy array."""
    if framework == "dask":
        y = y.compute()
    if framework == "cupy":
        return y.get()
    if framework.startswith("torch"):
        return y.cpu().numpy()
    return np.asarray(y)


def array(framework: str, shape, dtype="float32"):
    a = (np.arange(math.prod(shape)) % 7).astype(dtype).reshape(shape)
    return FRAMEWORKS[framework](a)


def bad_dtype_array(framework: str, shape, dtype: str):
    """An array of ``dtype``, which DirectML lacks or the operator's table does not list."""
    if framework.startswith("torch"):
        FRAMEWORKS[framework](np.zeros(1))             # skips where the framework or its device is missing
        import torch
        return torch.zeros(shape, dtype=getattr(torch, dtype), device="cuda" if framework == "torch_cuda" else "cpu")
    if framework == "cupy":
        FRAMEWORKS[framework](np.zeros(1))
        import cupy
        return cupy.zeros(shape, dtype)
    if framework == "jax":
        jnp = pytest.importorskip("jax.numpy")
        return jnp.zeros(shape, getattr(jnp, "bool_" if dtype == "bool" else dtype))
    return FRAMEWORKS[framework](np.zeros(shape, dtype))


def others(binding) -> dict:
    """The binding's further arrays (indices, updates...) as NumPy arrays."""
    return {name: np.array(values, dtype) for name, (slot, values, dtype) in binding.others.items()}


def call(binding, inputs, **changes):
    """The binding's example call on ``inputs`` (and the binding's further
    arrays), with ``changes`` to its arguments."""
    fn = getattr(dml, binding.function)
    args = {**others(binding), **binding.args, **changes}
    if binding.array == "arrays":
        return fn(list(inputs), **args)
    (x,) = inputs
    return fn(x, **args)


def example_inputs(binding, framework="numpy", dtype=None):
    dtype = dtype or example_dtype(OPERATORS_BY_FUNCTION[binding.function], binding)
    return [array(framework, s, dtype) for s in binding.inputs]


OPERATORS_BY_FUNCTION = {b.function: cls for _, cls, b in BOUND}


def argument(binding, i=0):
    return f"arrays[{i}]" if binding.array == "arrays" else binding.array


def raises(cls, pattern, f):
    with pytest.raises(cls) as info:
        f()
    assert type(info.value) is cls, f"{type(info.value).__name__}: {info.value}"
    text = str(info.value).split("\n")[0]           # JAX appends notes under jit
    assert re.fullmatch(pattern, text), f"{text!r} does not match {pattern!r}"
    return text


# -- the registry binds every array function -------------------------------------------------------------

def test_every_array_function_is_bound_once_and_declares_its_arguments():
    functions = [b.function for _, _, b in BOUND]
    assert len(functions) == len(set(functions))
    helpers = {"cpu_output_cache", "plan_cache_info", "adapter_for"}
    assert set(opendml.arrays.__all__) - helpers == set(functions)
    for name, cls, b in BOUND:
        fn = getattr(dml, b.function)
        params = list(inspect.signature(fn).parameters)
        assert params[0] == b.array, name
        assert set(b.args) | set(b.others) <= set(params[1:]), name
        assert set(params[1:]) - set(b.args) - set(b.others) <= {p for p, v in inspect.signature(fn).parameters.items()
                                                  if v.default is not inspect.Parameter.empty}, name


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("name, cls, binding", BOUND, ids=IDS)
def test_the_examples_run_and_agree_across_frameworks(name, cls, binding, framework):
    want = call(binding, example_inputs(binding))
    got = call(binding, example_inputs(binding, framework))
    want, got = (want, got) if isinstance(want, list) else ([want], [got])
    for w, g in zip(want, got):
        assert np.array_equal(host(g, framework), w)


# -- not an array ---------------------------------------------------------------------------------------

NOT_ARRAYS = [[[1.0, 2.0], [3.0, 4.0]], 3.0, np.float32(2), "abc", None]


@pytest.mark.parametrize("bad", NOT_ARRAYS, ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("name, cls, binding", BOUND, ids=IDS)
def test_a_non_array_is_one_validation_error(name, cls, binding, bad):
    inputs = [bad] * len(binding.inputs)
    got = f"{type(bad).__module__}.{type(bad).__qualname__}"
    raises(dml.ValidationError, rf"{binding.function}: {re.escape(argument(binding))} must be {ARRAYS}; "
                                rf"got {re.escape(got)}", lambda: call(binding, inputs))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_lone_array_is_not_a_sequence_of_arrays(framework):
    """Issue 34 item 7: ``join(tensor, 0)`` took a lone tensor as the list of its slices."""
    for name, cls, binding in BOUND:
        if binding.array != "arrays":
            continue
        x = array(framework, (2, 3, 4))
        kind = f"{type(x).__module__}.{type(x).__qualname__}"
        raises(dml.ValidationError, rf"{binding.function}: arrays must be a sequence of arrays \(a list or tuple\); "
                                    rf"got a {re.escape(kind)} \(a lone array: pass \[x\]\)",
               lambda: getattr(dml, binding.function)(x, **binding.args))
        for empty in ([], ()):
            raises(dml.ValidationError, rf"{binding.function}: arrays must be a non-empty sequence of arrays; got .*",
                   lambda: getattr(dml, binding.function)(empty, **binding.args))


# -- dtypes ---------------------------------------------------------------------------------------------

BAD_DTYPES = {"numpy": ["bool", "complex64"], "torch": ["bool", "bfloat16", "complex64"],
              "jax": ["bool", "bfloat16"], "dask": ["bool"], "cupy": ["bool", "complex64"],
              "torch_cuda": ["bool", "bfloat16"]}


def _unsupported(cls, framework, slot=None):
    """The framework's dtypes without a DirectML type, and the DirectML types the
    operator's newest table does not list for ``slot`` (TILE's float64)."""
    return BAD_DTYPES[framework] + [n for n in NAMES if n not in supported(cls, slot)]


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("name, cls, binding", BOUND, ids=IDS)
def test_an_unsupported_dtype_is_one_unsupported_error_naming_the_supported_types(name, cls, binding, framework):
    dtypes = _unsupported(cls, framework, binding.slot)
    if framework == "jax":
        import jax
        if not jax.config.jax_enable_x64:                 # JAX makes 32-bit arrays of the 64-bit types then
            dtypes = [d for d in dtypes if not d.endswith("64") or d == "complex64"]
    for dtype in dtypes:
        inputs = [bad_dtype_array(framework, s, dtype) for s in binding.inputs]
        text = DTYPE_TEXT[framework](dtype)
        raises(dml.UnsupportedError,
               rf"{binding.function}: {re.escape(possessive(argument(binding)))} dtype {re.escape(text)} is not "
               rf"supported by {cls.OPERATOR} at feature level 6_4 \(supported: "
               rf"{', '.join(supported(cls, binding.slot))}\)",
               lambda: call(binding, inputs))


@pytest.mark.parametrize("name, cls, binding", BOUND, ids=IDS)
def test_an_unsupported_jax_dtype_reads_the_same_under_jit(name, cls, binding):
    jax = pytest.importorskip("jax")
    for dtype in ("bool", "bfloat16"):
        inputs = [bad_dtype_array("jax", s, dtype) for s in binding.inputs]
        pattern = (rf"{binding.function}: {re.escape(possessive(argument(binding)))} dtype {dtype} is not supported "
                   rf"by {cls.OPERATOR} at feature level 6_4 \(supported: {', '.join(supported(cls, binding.slot))}\)")
        raises(dml.UnsupportedError, pattern, lambda: call(binding, inputs))
        raises(dml.UnsupportedError, pattern, lambda: jax.jit(lambda *xs: call(binding, xs))(*inputs))


# -- further arrays (indices, updates, values, sequence lengths) ------------------------------------------

OTHERS = [(name, cls, b, other) for name, cls, b in BOUND for other in b.others]


@pytest.mark.parametrize("bad", NOT_ARRAYS, ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("name, cls, binding, other", OTHERS, ids=[f"{b.function}-{o}" for _, _, b, o in OTHERS])
def test_a_further_non_array_is_one_validation_error(name, cls, binding, other, bad):
    got = f"{type(bad).__module__}.{type(bad).__qualname__}"
    raises(dml.ValidationError, rf"{binding.function}: {other} must be {ARRAYS}; got {re.escape(got)}",
           lambda: call(binding, example_inputs(binding), **{other: bad}))


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("name, cls, binding, other", OTHERS, ids=[f"{b.function}-{o}" for _, _, b, o in OTHERS])
def test_a_further_arrays_unsupported_dtype_names_its_tensors_types(name, cls, binding, other, framework):
    """Indices of a type the table does not list for IndicesTensor (bool,
    int16...) name the index types; updates and values the data types."""
    slot, values, _ = binding.others[other]
    shape = np.shape(values)
    dtypes = _unsupported(cls, framework, slot)
    if framework == "jax":
        import jax
        if not jax.config.jax_enable_x64:
            dtypes = [d for d in dtypes if not d.endswith("64") or d == "complex64"]
    for dtype in dtypes:
        bad = bad_dtype_array(framework, shape, dtype)
        text = DTYPE_TEXT[framework](dtype)
        raises(dml.UnsupportedError,
               rf"{binding.function}: {re.escape(possessive(other))} dtype {re.escape(text)} is not supported by "
               rf"{cls.OPERATOR} at feature level 6_4 \(supported: {', '.join(supported(cls, slot))}\)",
               lambda: call(binding, example_inputs(binding, framework), **{other: bad}))


# -- ranks ----------------------------------------------------------------------------------------------

def _bad_ranks(cls, binding):
    ranks = ranks_of(binding, cls)
    return sorted(r for r in {0, ranks.start - 1, ranks.stop} if r >= 0 and r not in ranks)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("name, cls, binding", BOUND, ids=IDS)
def test_a_wrong_rank_is_one_validation_error(name, cls, binding, framework):
    ranks = ranks_of(binding, cls)
    want = str(ranks.start) if len(ranks) == 1 else f"{ranks.start} to {ranks.stop - 1}"
    for rank in _bad_ranks(cls, binding):
        if framework == "dask" and rank == 0:
            continue                                  # a 0-d Dask array has no chunks to give
        shape = (1,) * rank
        inputs = [array(framework, shape, example_dtype(cls, binding)) for _ in binding.inputs]
        raises(dml.ValidationError,
               rf"{binding.function}: {re.escape(argument(binding))} must have {want} dimensions for "
               rf"{cls.OPERATOR}; got {rank} \(shape {re.escape(str(list(shape)))}\)", lambda: call(binding, inputs))


# -- empty arrays ---------------------------------------------------------------------------------------

def _emptied(shape) -> tuple:
    return (0,) + tuple(shape[1:])


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("name, cls, binding", BOUND, ids=IDS)
def test_an_empty_array_is_one_validation_error_naming_the_argument(name, cls, binding, framework):
    """An array with a dimension of size 0 read ``TensorDesc: Sizes[0] must be
    in [1, 4294967295]; got 0``, naming neither the function nor the argument;
    a call of the same dtype and rank that passed first must not let it by."""
    dtype = example_dtype(cls, binding)
    call(binding, example_inputs(binding, framework))
    shape = _emptied(binding.inputs[0])
    inputs = [array(framework, shape, dtype)] + example_inputs(binding, framework)[1:]
    raises(dml.ValidationError,
           rf"{binding.function}: {re.escape(argument(binding))} must have no dimension of size 0 \(DirectML's "
           rf"tensor sizes are >= 1\); got shape {re.escape(str(list(shape)))}", lambda: call(binding, inputs))


@pytest.mark.parametrize("name, cls, binding, other", OTHERS, ids=[f"{b.function}-{o}" for _, _, b, o in OTHERS])
def test_an_empty_further_array_is_one_validation_error_naming_it(name, cls, binding, other):
    slot, values, dtype = binding.others[other]
    shape = _emptied(np.shape(values))
    call(binding, example_inputs(binding))
    raises(dml.ValidationError,
           rf"{binding.function}: {other} must have no dimension of size 0 \(DirectML's tensor sizes are >= 1\); "
           rf"got shape {re.escape(str(list(shape)))}",
           lambda: call(binding, example_inputs(binding), **{other: np.zeros(shape, dtype)}))


@pytest.mark.parametrize("framework", ["numpy", "torch"])
@pytest.mark.parametrize("name, cls, binding", BOUND, ids=IDS)
def test_a_broadcast_view_of_more_than_uint32_elements_is_one_validation_error(name, cls, binding, framework):
    """A broadcast view holds more elements than a DirectML tensor may (UINT32)
    in a few bytes; it read ``TensorDesc: Sizes[0] must be in [1, 4294967295]``."""
    dtype = example_dtype(cls, binding)
    call(binding, example_inputs(binding, framework))
    shape = (2 ** 32 + 1,) + tuple(binding.inputs[0][1:])
    if framework == "torch":
        torch = pytest.importorskip("torch")
        big = torch.zeros((1,) * len(shape), dtype=getattr(torch, dtype)).expand(shape)
    else:
        big = np.broadcast_to(np.zeros((1,) * len(shape), dtype), shape)
    inputs = [big] + example_inputs(binding, framework)[1:]
    raises(dml.ValidationError,
           rf"{binding.function}: {re.escape(argument(binding))} must have at most 4294967295 elements \(DirectML's "
           rf"tensor element count is a UINT32\); got {math.prod(shape)} \(shape {re.escape(str(list(shape)))}\)",
           lambda: call(binding, inputs))


# -- axes -----------------------------------------------------------------------------------------------

AXIS_FORMS = [r"axis must be an integer; got .+",
              r"axis must be in \[-\d+, \d+\] for arrays of \d+ dimensions; got -?\d+"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("name, cls, binding", [b for b in BOUND if "axis" in b[2].args],
                         ids=[b.function for _, _, b in BOUND if "axis" in b.args])
def test_a_bad_axis_is_one_validation_error(name, cls, binding, framework):
    rank = len(binding.inputs[0]) + binding.added_axes       # ONE_HOT's axis is the output's
    for bad, form in ((rank, 1), (-rank - 1, 1), ("0", 0), (1.0, 0), (True, 0), (None, 0)):
        text = raises(dml.ValidationError, rf"{binding.function}: {AXIS_FORMS[form]}",
                      lambda: call(binding, example_inputs(binding, framework), axis=bad))
        if form == 1:
            assert text.endswith(f"for arrays of {rank} dimensions; got {bad}")


# -- fields ---------------------------------------------------------------------------------------------

#: Values of the wrong kind or out of range for a field.
BAD_FIELDS = ["a", -1, 2 ** 70, 1.5, [], [-1], [1.5, 2], ["a"], {"a": 1}, object()]
FIELD_FORM = r"{op}: [A-Z][A-Za-z]*(\[\d+\])?(\.[A-Za-z]+(\[\d+\])?)*('s)? .*"


def _field_params(binding):
    fn = getattr(dml, binding.function)
    return [p for p in list(inspect.signature(fn).parameters)[1:]
            if p not in ("axis", "dtype", "check_indices") and p not in binding.others]


@pytest.mark.parametrize("name, cls, binding", BOUND, ids=IDS)
def test_a_bad_field_is_one_validation_error_naming_the_directml_field(name, cls, binding):
    """Every argument but the arrays, an axis, a dtype and the index check's
    switch (tests/test_index_ops.py checks it is a bool) is a field of the
    operator: a bad value is a ValidationError in the descriptions' form
    (``<OPERATOR>: <Field>[i] must ...; got ...``), the same text on every
    framework, or a valid call."""
    others = [f for f in ("torch", "jax") if _available(f)]
    for param in _field_params(binding):
        for bad in BAD_FIELDS:
            try:
                call(binding, example_inputs(binding), **{param: bad})
            except dml.DmlError as e:
                assert type(e) is dml.ValidationError, (param, bad, repr(e))
                assert re.fullmatch(FIELD_FORM.format(op=cls.OPERATOR), str(e)), (param, bad, str(e))
                assert "; got " in str(e) or " got " in str(e), (param, bad, str(e))
                for framework in others:
                    with pytest.raises(dml.ValidationError) as info:
                        call(binding, example_inputs(binding, framework), **{param: bad})
                    assert str(info.value).split("\n")[0] == str(e), (framework, param, bad)


def _available(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


# -- dtype arguments ------------------------------------------------------------------------------------

def _dtype_bindings():
    return [b for b in BOUND if "dtype" in b[2].args]


def _spellings(framework: str, name: str) -> list:
    """Every way a user of ``framework`` writes the dtype ``name``."""
    out = [np.dtype(name), getattr(np, name), name, np.dtype(name).str, dml.DataType.from_numpy(name),
           dml.DataType.from_numpy(name).name, "DML_TENSOR_DATA_TYPE_" + dml.DataType.from_numpy(name).name]
    if framework == "torch":
        import torch
        out.append(getattr(torch, name))
    if framework == "jax":
        import jax.numpy as jnp
        out += [getattr(jnp, name), jnp.dtype(name)]
    return out


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("name, cls, binding", _dtype_bindings(), ids=[b.function for _, _, b in _dtype_bindings()])
def test_every_dtype_spelling_is_accepted(name, cls, binding, framework):
    """``dml.cast(t, torch.float64)`` was refused (NumPy dtypes only)."""
    FRAMEWORKS[framework](np.zeros(1))                 # skips where the framework or its device is missing
    spellings = {f: _spellings(f, "int16") for f in ("numpy", "torch", "jax") if _available(f)}
    want = call(binding, example_inputs(binding), dtype="int16")
    want = want if isinstance(want, list) else [want]
    for source, values in spellings.items():            # a PyTorch dtype for a NumPy array and so on
        for spelling in values:
            got = call(binding, example_inputs(binding, framework), dtype=spelling)
            got = got if isinstance(got, list) else [got]
            for w, g in zip(want, got):
                assert str(g.dtype).removeprefix("torch.") == "int16", (source, spelling)
                assert np.array_equal(host(g, framework), w), (source, spelling)


def test_unsupported_dtype_arguments_name_the_supported_types():
    for name, cls, binding in _dtype_bindings():
        x = example_inputs(binding)
        bad = [np.complex64, "bool", np.dtype("bool"), dml.DataType.INT4, dml.DataType.UINT4]
        if _available("torch"):
            import torch
            bad += [torch.bfloat16, torch.bool, torch.complex64]
        if _available("ml_dtypes"):
            import ml_dtypes
            bad += [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn]
        for spelling in bad:
            raises(dml.UnsupportedError, rf"{binding.function}: dtype \S+ is not supported by {cls.OPERATOR} at "
                                         rf"feature level 6_4 \(supported: {', '.join(supported(cls))}\)",
                   lambda: call(binding, x, dtype=spelling))
        for junk in ("nope", 99, -1, 1.5, None, [np.float32], True):
            raises(dml.ValidationError, rf"{binding.function}: dtype must be a NumPy, PyTorch or JAX dtype, or a "
                                        rf"DataType, its int value or its name; got .+",
                   lambda: call(binding, x, dtype=junk))


def test_a_dtype_that_equals_an_int_is_not_taken_for_it():
    # DataType.FLOAT32 == 1 == True: a remembered spelling must not make 1 or True a dtype of the spelling reader
    # (the dtype arguments take an exact int that is a DataType's value, as torch.compile passes a member: 1 is
    # FLOAT32 there, True never)
    from opendml.arrays._contract import data_type
    x = np.zeros(3, np.float32)
    assert dml.cast(x, dml.DataType.FLOAT32).dtype == np.float32
    for spelling in (1, True):
        with pytest.raises(TypeError):
            data_type(spelling)
    assert dml.cast(x.astype(np.float64), 1).dtype == np.float32
    with pytest.raises(dml.ValidationError, match=r"^cast: dtype must be"):
        dml.cast(x, True)


# -- tile's repeats: NumPy's rule (issue 34 item 8) -------------------------------------------------------

TILE_CASES = [((3, 4), 2), ((3, 4), [2]), ((3, 4), (2,)), ((3, 4), [2, 3]), ((2, 3, 4), [2, 1]), ((2, 3, 4), 3),
              ((5,), 2), ((2, 1, 3), np.int64(2)), ((2, 3), np.array([2]))]


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("shape, repeats", TILE_CASES, ids=str)
def test_tile_follows_numpy_for_a_scalar_or_shorter_repeats(shape, repeats, framework):
    """``dml.tile(x, 2)`` on a (3, 4) array gave (6, 8); ``np.tile`` gives (3, 8)."""
    x = array(framework, shape)
    got = dml.tile(x, repeats)
    want = np.tile(array("numpy", shape), repeats)
    assert tuple(got.shape) == want.shape
    assert np.array_equal(host(got, framework), want)


def test_tile_refuses_more_repeats_than_axes():
    # (it said "must have 2 entries (one per dimension)", where fewer are taken)
    for repeats in ([1, 2, 2], (1, 1, 1, 1), np.array([1, 2, 2])):
        with pytest.raises(dml.ValidationError, match=r"^TILE: Repeats must have at most 2 entries \(repeats: one per "
                                                       r"axis of x, fewer get ones prepended, as numpy.tile's\); "
                                                       rf"got {len(repeats)}$"):
            dml.tile(array("numpy", (3, 4)), repeats)


def test_tile_keeps_its_gradient_under_the_numpy_rule():
    torch = pytest.importorskip("torch")
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4).requires_grad_()
    y = dml.tile(x, 2)
    assert y.shape == (3, 8)
    y.backward(torch.ones_like(y))
    assert torch.equal(x.grad, torch.full((3, 4), 2.0))
    assert x.tile(2).shape == y.shape                    # PyTorch's own tile reads an int the same way


# -- the DirectML flow: an unsupported DataType in a description, for every registered operator ---------

def _unsupported_descriptions():
    """(operator, slot, DataType, the description's JSON form) for every
    registered operator (those without an array function included), every
    input slot of its first bundled example, and every DataType its newest
    support table does not list for that slot: a data slot's type changed
    with every tensor of the same type (so the operator's equal-type rules
    hold), an index slot's alone."""
    import copy
    from tests.test_engine_registry import _examples
    out = []
    for name, cls in OPERATORS.items():
        ex = _examples(name)[0]
        row = newest(cls)
        for slot in [s.json for s in cls.SLOTS if s.role == "input" and s.json in ex]:
            value = ex[slot]
            first = (value[0] if isinstance(value, list) else value)["DataType"]
            own = any(n == slot for n, _ in row.slot_types)
            for t in dml.DataType:
                if t.name in ("UNKNOWN", "UINT4", "INT4") or t in row.types_of(slot):
                    continue
                form = copy.deepcopy(ex)
                for key, v in form.items():
                    for tensor in (v if isinstance(v, list) else [v]):
                        if isinstance(tensor, dict) and "Sizes" in tensor and tensor.get("DataType") == first \
                                and (key == slot or not own):
                            tensor["DataType"] = t.name
                out.append((name, slot, t, form))
    return out


UNSUPPORTED_DESCRIPTIONS = _unsupported_descriptions()

@pytest.mark.parametrize("name", sorted({n for n, *_ in UNSUPPORTED_DESCRIPTIONS}))
def test_an_unsupported_data_type_in_a_description_is_one_unsupported_error(name):
    """The JSON form, ``Device``, ``opendml run`` and DxDispatch read
    descriptions: a tensor of a type the newest table does not list is an
    UnsupportedError naming the tensor, the type, the level and the
    supported types, for every operator and every tensor."""
    from opendml import jsonform
    for op, slot, t, form in UNSUPPORTED_DESCRIPTIONS:
        if op != name:
            continue
        with pytest.raises(dml.DmlError) as info:
            jsonform.from_json(form).validate(max(dml.FeatureLevel))
        text = str(info.value)
        assert type(info.value) is dml.UnsupportedError, (slot, t.name, text)
        m = re.fullmatch(rf"{op}: {slot}(\[\d+\])?\.DataType {t.name} is not supported at feature level "
                         rf"{max(dml.FeatureLevel).name[3:]} \(supported: ([A-Z0-9, ]+)\)(; .*)?", text)
        assert m, (slot, t.name, text)
        assert set(m.group(2).split(", ")) == {x.name for x in newest(OPERATORS[op]).types_of(slot)}, text


def test_a_nested_tensor_after_a_plain_one_of_its_dtype_and_rank_is_refused_by_name():
    # the checks passed for (function, dtype, rank) were skipped for a tensor whose shape cannot be read
    torch = pytest.importorskip("torch")
    nested = torch.nested.nested_tensor([torch.ones(2, 3), torch.ones(3, 3)])
    assert nested.dim() == 3
    dml.gather(torch.ones(2, 3, 3), torch.tensor([0, 1]), 0)
    for _ in range(3):
        with pytest.raises(dml.UnsupportedError, match="^gather: nested PyTorch tensors are not supported"):
            dml.gather(nested, torch.tensor([0, 1]), 0)


@pytest.mark.parametrize("call, message", [
    (lambda: dml.slice_grad(np.ones((1, 2), np.float32), (1, 0), [0, 0], [1, 2], [1, 1]),
     r"^SLICE_GRAD: OutputGradientTensor.Sizes\[1\] must be in \[1, 4294967295\]; got 0 "
     r"\(OutputGradientTensor.Sizes = input_sizes\)$"),
    (lambda: dml.slice_grad(np.ones((1, 2), np.float32), 3, [0, 0], [1, 2], [1, 1]),
     r"^SLICE_GRAD: OutputGradientTensor.Sizes must be a sequence of integers; got int "
     r"\(OutputGradientTensor.Sizes = input_sizes\)$"),
    (lambda: dml.slice1(np.ones((2, 2), np.float32), [0, 0], [2, 2], [1, 1], [1, 2.0]),
     r"^SLICE1: OutputTensor.Sizes\[1\] must be an integer; got 2.0 of type float "
     r"\(OutputTensor.Sizes = output_sizes\)$"),
    (lambda: dml.fold(np.ones((1, 4, 1), np.float32), [0, 2], 2),
     r"^FOLD: OutputTensor.Sizes\[2\] must be in \[1, 4294967295\]; got 0 "
     r"\(OutputTensor.Sizes = x's N, C and output_sizes\)$"),
    (lambda: dml.one_hot(np.zeros(3, np.int32), 2 ** 32, np.array([0, 1], np.float32)),
     r"^ONE_HOT: OutputTensor.Sizes\[1\] must be in \[1, 4294967295\]; got 4294967296 "
     r"\(OutputTensor.Sizes = indices.shape with depth at axis\)$"),
    (lambda: dml.diagonal_matrix(shape=(2 ** 20, 2 ** 20), dtype="float32"),
     r"^DIAGONAL_MATRIX1: OutputTensor: the element count \(product of Sizes \[1048576, 1048576\]\) must be <= "
     r"4294967295; got 1099511627776 \(OutputTensor.Sizes = shape\)$"),
    (lambda: dml.slice_grad(np.ones((2, 2), np.float32), [1, 4, 4], [0, 0], [2, 2], [1, 1]),
     r"^SLICE_GRAD: OutputGradientTensor.DimensionCount must equal InputGradientTensor.DimensionCount; got 3 != 2 "
     r"\(OutputGradientTensor.Sizes = input_sizes\)$"),
    (lambda: dml.slice1(np.ones((2, 2), np.float32), [0, 0], [2, 2], [1, 1], [2, 2, 1]),
     r"^SLICE1: OutputTensor.DimensionCount must equal InputTensor.DimensionCount; got 3 != 2 "
     r"\(OutputTensor.Sizes = output_sizes\)$"),
], ids=["slice_grad-size", "slice_grad-int", "slice1", "fold", "one_hot", "diagonal_matrix", "slice_grad-rank",
        "slice1-rank"])
def test_an_output_shape_argument_is_named_in_its_tensors_error(call, message):
    """An output shape the function builds from an argument (``input_sizes``, ``output_sizes``, ``depth``,
    ``shape``) names that argument as the user spelt it after DirectML's field, as a derived output names its origin
    (the messages named only ``OutputGradientTensor.Sizes[1]``, which the call never spells)."""
    for _ in range(2):                    # the second call as the first (the caches hold no error)
        with pytest.raises(dml.ValidationError, match=message):
            call()
