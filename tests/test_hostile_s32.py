"""Session 32's hostile try of framework inputs: each test pins a defect the try found (a failing test first, then
the fix)."""
import re

import numpy as np
import pytest

import opendml as dml

X = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)

# np.timedelta64 is a subclass of np.signedinteger, but a duration: where a number is read it was taken through
# int()/float(), which raise a bare TypeError for a unit of its own ("int() argument must be ... not
# 'datetime.timedelta'") and read a count of no unit (np.timedelta64(2)) as the number 2
DURATION_CALLS = [
    (lambda v: dml.cast(X, v), ValueError, r"^cast: dtype must be a NumPy, PyTorch or JAX dtype"),
    (lambda v: dml.diagonal_matrix(shape=(2, 3), dtype=v), ValueError, r"^diagonal_matrix: dtype must be a NumPy"),
    (lambda v: dml.identity(X, v), ValueError, r"^ELEMENT_WISE_IDENTITY: ScaleBias.Scale must be a number; got "),
    (lambda v: dml.identity(X, 1.0, v), ValueError, r"^ELEMENT_WISE_IDENTITY: ScaleBias.Bias must be a number; "),
    (lambda v: dml.pad(X, [0, 0, 1, 1], [0, 0, 1, 1], value=v), ValueError, r"^PADDING1: PaddingValue must be a "
                                                                            r"number; got "),
    (lambda v: dml.diagonal_matrix(X, value=v), ValueError, r"^DIAGONAL_MATRIX1: Value must be a number; got "),
    (lambda v: dml.tile(X, v), ValueError, r"^TILE: Repeats must be a sequence of integers; got "),
    (lambda v: dml.unfold(X, v), ValueError, r"^UNFOLD: WindowSizes must be a sequence of integers; got "),
    (lambda v: dml.cpu_output_cache(v), TypeError, r"^cpu_output_cache: limit must be an int \(bytes\) or None; "),
]


@pytest.mark.parametrize("call_cache", [True, False])
@pytest.mark.parametrize("duration", [np.timedelta64(2), np.timedelta64(2, "D"), np.timedelta64("NaT")],
                         ids=["no-unit", "days", "NaT"])
@pytest.mark.parametrize("call, error, message", DURATION_CALLS,
                         ids=["cast", "diagonal-dtype", "scale", "bias", "pad-value", "diagonal-value", "tile",
                              "unfold", "output-cache"])
def test_a_numpy_duration_is_no_number(call, error, message, duration, call_cache):
    with dml.configure(call_cache=call_cache):
        for _ in range(2):                # (a repeat: the call cache never serves it)
            with pytest.raises(error, match=message) as info:
                call(duration)
            assert isinstance(info.value, dml.DmlError) or error is TypeError


# A 0-d PyTorch bool tensor's __index__ gives 0 or 1: it was read as that int wherever an int is read, where True,
# np.True_, np.array(True) and JAX's bools are refused
BOOL_AS_INT_CALLS = [
    (lambda v: dml.gather(X, np.array([0]), v), r"^gather: axis must be an integer; got "),
    (lambda v: dml.split(X, v, [2, 2]), r"^split: axis must be an integer; got "),
    (lambda v: dml.space_to_depth(X, v), r"^SPACE_TO_DEPTH1: BlockSize must be an integer; got "),
    (lambda v: dml.tile(X, [1, 1, v, 1]), r"^TILE: Repeats\[2\] must be an integer; got "),
    (lambda v: dml.tile(X, v), r"^TILE: Repeats must be a sequence of integers; got "),
    (lambda v: dml.slice(X, [0, 0, v, 0], [1, 1, 2, 2], [1, 1, 1, 1]), r"^SLICE: Offsets\[2\] must be an integer; "),
    (lambda v: dml.unfold(X, [v, 2]), r"^UNFOLD: WindowSizes\[0\] must be an integer; got "),
    (lambda v: dml.fold(np.ones((1, 4, 9), np.float32), [4, 4], [2, v]), r"^FOLD: WindowSizes\[1\] must be an "),
    (lambda v: dml.split(X, 2, [v, 3]), r"^SPLIT: OutputTensors\[0\].Sizes\[2\] must be an int >= 1 \(sizes\[0\]\)"),
    (lambda v: dml.one_hot(np.array([0]), v, np.array([0.0, 1.0])), r"^ONE_HOT: OutputTensor's size along Axis must "
                                                                    r"be an integer \(depth\); got "),
    (lambda v: dml.diagonal_matrix(X, begin=v), r"^DIAGONAL_MATRIX1: DiagonalFillBegin must be an integer; got "),
    (lambda v: dml.gather(X, np.array([[0]]), 1, v), r"^GATHER: IndexDimensions must be an integer "),
]


@pytest.mark.parametrize("call_cache", [True, False])
@pytest.mark.parametrize("call, message", BOOL_AS_INT_CALLS,
                         ids=["axis", "split-axis", "block", "tile-entry", "tile-whole", "slice-offset", "unfold",
                              "fold", "split-size", "depth", "begin", "index-dimensions"])
def test_a_torch_bool_tensor_is_no_int(call, message, call_cache):
    torch = pytest.importorskip("torch")
    with dml.configure(call_cache=call_cache):
        for flag in (torch.tensor(True), torch.tensor(False)):
            for _ in range(2):
                with pytest.raises(dml.ValidationError, match=message):
                    call(flag)


def test_configure_refuses_a_torch_bool_tensor_as_a_count():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"^configure: threads must be an int; got torch.Tensor"):
        dml.configure(threads=torch.tensor(True))


# A masked array was refused, late, as "array API: masked arrays are not supported ...; pass x.filled(value) or
# x.data explicitly" whichever argument it was (the indices, join's second array); a Dask array of masked chunks got
# that error only at compute(). The error names the function and the argument, when the call (or graph) is made.
MASKED_CALLS = [
    (lambda m: dml.identity(m), "identity", "x"),
    (lambda m: dml.slice(m, [0, 0, 0, 0], [1, 1, 2, 2], [1, 1, 1, 1]), "slice", "x"),
    (lambda m: dml.join([X, m], 1), "join", "arrays[1]"),
    (lambda m: dml.gather(X, m.astype(np.int64), 2), "gather", "indices"),
    (lambda m: dml.scatter_nd(X, np.array([[0, 0, 1]]), m[0, 0, :1]), "scatter_nd", "updates"),
    (lambda m: dml.one_hot(m.astype(np.int64), 4, np.array([0.0, 1.0])), "one_hot", "indices"),
    (lambda m: dml.one_hot(np.array([0]), 4, m[0, 0, 0, :2]), "one_hot", "values"),
]


@pytest.mark.parametrize("call_cache", [True, False])
@pytest.mark.parametrize("call, function, argument", MASKED_CALLS, ids=[f"{c[1]}-{c[2]}" for c in MASKED_CALLS])
def test_a_masked_array_is_refused_by_its_name(call, function, argument, call_cache):
    masked = np.ma.masked_array(X % 4, mask=X > 7)
    with dml.configure(call_cache=call_cache):
        call(np.asarray(masked))      # the plain array of that call first: a passed dtype and rank skip no check
        for _ in range(2):
            with pytest.raises(dml.ValidationError, match=rf"^{function}: masked arrays are not supported "
                                                          rf"\({re.escape(argument)} is one: its mask would be "
                                                          rf"dropped\); pass {re.escape(argument)}.filled\(value\) "
                                                          rf"or {re.escape(argument)}.data$"):
                call(masked)


@pytest.mark.parametrize("call, function, argument", MASKED_CALLS, ids=[f"{c[1]}-{c[2]}" for c in MASKED_CALLS])
def test_a_dask_array_of_masked_chunks_is_refused_when_the_graph_is_built(call, function, argument):
    da = pytest.importorskip("dask.array")
    masked = da.from_array(np.ma.masked_array(X % 4, mask=X > 7), chunks=2, asarray=False)
    if function == "join":                # (every array of one framework)
        call = lambda m: dml.join([da.from_array(X, chunks=2), m], 1)   # noqa: E731
    call(da.from_array(X % 4, chunks=2))
    with pytest.raises(dml.ValidationError, match=rf"^{function}: masked arrays are not supported "
                                                  rf"\({re.escape(argument)} is one"):
        call(masked)


def test_a_numpy_scalar_input_of_a_compiled_function_is_the_documented_limitation():
    """docs/guide/pytorch.md said every NumPy scalar Dynamo passes on as a 0-d tensor is read as its value; one that
    is an input of the compiled function (or a global it reads) holds none in the trace and fails to compile, where
    eager takes it. The guide says so now, and that a Python number passed instead works; this pins both."""
    torch = pytest.importorskip("torch")
    x = torch.arange(16.0).reshape(1, 1, 4, 4)

    def f(v, s):
        return dml.identity(v, s)
    assert torch.equal(f(x, np.float32(0.5)), dml.identity(x, 0.5))
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"Scale must be a number") as info:
        torch.compile(f, backend="aot_eager")(x, np.float32(0.5))
    assert type(info.value).__module__.startswith("torch._dynamo")
    torch._dynamo.reset()
    assert torch.equal(torch.compile(f, backend="aot_eager")(x, float(np.float32(0.5))), dml.identity(x, 0.5))


def _read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


# NumPy indices given with another framework's data move to that framework: torch.as_tensor refused a reversed
# (negative-stride) or big-endian NumPy array with its bare ValueError, jax.numpy.asarray a big-endian one with a
# TypeError, and a read-only one made PyTorch warn (UserWarning: "The given NumPy array is not writable")
HOST_INDICES = {
    "reversed": lambda: np.arange(3)[::-1],
    "negative-strides": lambda: np.array([[2, 0, 1]])[:, ::-1][:, ::-1][0],
    "big-endian": lambda: np.array([2, 0, 1], ">i8"),
    "read-only": lambda: _read_only(np.array([2, 0, 1])),
}


@pytest.mark.parametrize("framework", ["torch", "jax"])
@pytest.mark.parametrize("kind", sorted(HOST_INDICES))
def test_numpy_indices_of_any_layout_move_to_the_datas_framework(kind, framework):
    import warnings
    module = pytest.importorskip(framework)
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = module.asarray(data) if framework == "torch" else pytest.importorskip("jax.numpy").asarray(data)
    indices = HOST_INDICES[kind]()
    plain = np.ascontiguousarray(indices, dtype=np.int64)
    calls = {"gather": lambda v, i: dml.gather(v, i, 1),
             "gather_elements": lambda v, i: dml.gather_elements(v, np.broadcast_to(i.reshape(1, 3, 1), (2, 3, 4)), 1),
             "scatter_elements": lambda v, i: dml.scatter_elements(v, np.broadcast_to(i.reshape(1, 3, 1), (2, 3, 4)),
                                                                  v * -1, 1)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name, call in calls.items():
            for _ in range(2):
                got = call(x, indices)
                assert type(got) is type(x), name
                assert np.array_equal(np.asarray(got), call(data, plain)), name


@pytest.mark.parametrize("value", [np.datetime64(2, "s"), np.datetime64("NaT"), np.void(b"ab")],
                         ids=["datetime", "NaT", "void"])
def test_a_numpy_scalar_value_is_no_dtype(value):
    # numpy.dtype reads a NumPy scalar as its own type: a datetime64 or void value given as `dtype` was refused as
    # an unsupported dtype named by the value ("cast: dtype 1970-01-01T00:00:02 is not supported by CAST"), where a
    # value is no dtype (session 31 refused NumPy's numbers so); a NumPy string is a name, read as one
    for call, function in ((lambda d: dml.cast(X, d), "cast"),
                           (lambda d: dml.diagonal_matrix(shape=(2, 3), dtype=d), "diagonal_matrix")):
        with pytest.raises(dml.ValidationError, match=rf"^{function}: dtype must be a NumPy, PyTorch or JAX dtype, "
                                                      r"or a DataType, its int value or its name; got "):
            call(value)
        assert call(np.str_("float16")).dtype == np.float16


WINDOW_CALLS = {
    "slice": lambda a: dml.slice(a, [0, 0, 0, 1], [1, 1, 3, 2], [1, 1, 1, 2]),
    "slice1": lambda a: dml.slice1(a, [0, 0, 0, 0], [1, 1, 4, 4], [1, 1, -1, 2]),
    "unfold": lambda a: dml.unfold(a, 2),
    "fold": lambda a: dml.fold(a.reshape(1, 4, 4), [3, 3], 2),
    "slice_grad": lambda a: dml.slice_grad(a, [1, 1, 5, 5], [0, 0, 1, 0], [1, 1, 4, 4], [1, 1, 1, 1]),
    "identity": lambda a: dml.identity(a),
}


@pytest.mark.parametrize("name", sorted(WINDOW_CALLS))
def test_a_weakly_typed_jax_array_gives_a_strong_result_on_every_route(name):
    # the window operators' lax forms (under jit, vmap, grad) kept a weakly typed input's weak type, which their
    # eager calls (opendml's kernels) and the other functions (a host callback) do not: `+ jnp.float16(1)` then
    # gave float16 under jit and float32 eagerly
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    f = WINDOW_CALLS[name]
    weak = jax.lax.broadcast(jnp.asarray(2.0), (1, 1, 4, 4))
    assert weak.weak_type
    eager = f(weak)
    for route in (jax.jit(f), lambda a: jax.vmap(f)(a[None])[0], jax.jit(lambda a: jax.vmap(f)(a[None])[0])):
        got = route(weak)
        assert got.weak_type == eager.weak_type is False, name
        assert (got + jnp.float16(1)).dtype == (eager + jnp.float16(1)).dtype == jnp.float32, name
        assert np.array_equal(np.asarray(got), np.asarray(eager))
    grad = jax.grad(lambda a: jnp.sum(f(a) ** 2))(weak)
    assert np.array_equal(np.asarray(grad), np.asarray(jax.jit(jax.grad(lambda a: jnp.sum(f(a) ** 2)))(weak)))
