"""Session 31's hostile try: each test pins a defect the try found (a failing test first, then the fix)."""
import numpy as np
import pytest

import opendml as dml


def test_a_buffer_that_cannot_be_allocated_is_an_allocation_error(monkeypatch):
    # docs/guide/reliability.md and docs/reference/errors.md: an output or buffer that cannot be allocated is an
    # AllocationError (a ValidationError and a MemoryError), so `except MemoryError` catches it too
    device = dml.Device("cpu")

    def no_memory(nbytes):
        raise MemoryError(nbytes)
    monkeypatch.setattr(device.backend, "allocate", no_memory)
    for make in (lambda: device.create_buffer(1 << 20),
                 lambda: device.upload([1.0, 2.0]),
                 lambda: device.run(dml.TileOperatorDesc(dml.TensorDesc("FLOAT32", [1]), None, repeats=[4]),
                                    [1.0])):
        with pytest.raises(dml.AllocationError, match=r"create_buffer: could not allocate \d+ bytes on cpu") as info:
            make()
        assert isinstance(info.value, MemoryError) and isinstance(info.value, dml.ValidationError)


@pytest.mark.parametrize("call_cache", [True, False])
def test_a_numpy_scalar_given_as_dtype_reads_as_the_python_number(call_cache):
    # `dtype` takes a DataType's int value, and refuses bools and floats ("numbers are no dtypes"); NumPy's
    # scalars were read by numpy.dtype as their own dtype instead: cast(x, np.int64(1)) gave int64 where
    # cast(x, 1) gives float32 (DataType 1), np.True_ gave an UnsupportedError where True is refused as no dtype
    import numpy as np
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    with dml.configure(call_cache=call_cache):
        for scalar, plain in ((np.int64(1), 1), (np.uint8(11), 11), (np.int16(4), 4)):
            for _ in range(2):
                got = dml.cast(x, scalar)
                assert got.dtype == dml.cast(x, plain).dtype and got.tobytes() == dml.cast(x, plain).tobytes()
                assert dml.diagonal_matrix(shape=(2, 3), dtype=scalar).dtype == \
                    dml.diagonal_matrix(shape=(2, 3), dtype=plain).dtype
        for scalar, plain in ((np.True_, True), (np.float32(1.0), 1.0), (np.float16(11.0), 11.0)):
            for make in (lambda d: dml.cast(x, d), lambda d: dml.diagonal_matrix(shape=(2, 3), dtype=d)):
                with pytest.raises(dml.ValidationError) as want:
                    make(plain)
                with pytest.raises(dml.ValidationError) as got:
                    make(scalar)
                assert type(got.value) is type(want.value)
                assert str(got.value) == str(want.value).replace(repr(plain), repr(scalar))


class _NoIndex:
    """An int-like whose value cannot be read (as a PyTorch meta tensor's or a JAX tracer's cannot)."""

    def __index__(self):
        raise RuntimeError("no value")

    def __repr__(self):
        return "_NoIndex()"


class _NoItems:
    """A sequence whose items cannot be read."""

    def tolist(self):
        raise NotImplementedError("no data")

    def __repr__(self):
        return "_NoItems()"


class _NoIter:
    """A sized sequence whose iteration fails."""

    def __len__(self):
        return 2

    def __iter__(self):
        raise KeyError("no items")

    def __repr__(self):
        return "_NoIter()"


def _int_and_sequence_calls():
    import numpy as np
    x = np.arange(24.0, dtype=np.float32).reshape(4, 6)
    x4 = np.arange(120.0, dtype=np.float32).reshape(2, 3, 4, 5)
    seq = {"slice": lambda v: dml.slice(x, v, [1, 1], [1, 1]),
           "slice1": lambda v: dml.slice1(x, [0, 0], [1, 1], v),
           "unfold": lambda v: dml.unfold(x4, v),
           "fold": lambda v: dml.fold(np.ones((1, 1, 4), np.float32), v, [1, 1]),
           "fold window": lambda v: dml.fold(np.ones((1, 1, 4), np.float32), [2, 2], v),
           "slice_grad": lambda v: dml.slice_grad(np.ones((2, 2), np.float32), v, [0, 0], [2, 2], [1, 1]),
           "pad": lambda v: dml.pad(x, v, 0),
           "tile": lambda v: dml.tile(x, v),
           "split": lambda v: dml.split(x, 1, v),
           "diagonal_matrix": lambda v: dml.diagonal_matrix(shape=v),
           "TensorDesc": lambda v: dml.TensorDesc("FLOAT32", v)}
    one = {"split": lambda v: dml.split(x, v, [1, 5]),
           "join": lambda v: dml.join([x, x], v),
           "depth_to_space": lambda v: dml.depth_to_space(x4, v),
           "gather": lambda v: dml.gather(x, np.array([0]), v),
           "gather_nd": lambda v: dml.gather_nd(x, np.array([[0]]), v),
           "one_hot": lambda v: dml.one_hot(np.array([0, 1]), v, np.array([0.0, 1.0])),
           "reverse_subsequences": lambda v: dml.reverse_subsequences(x, np.full((1, 6), 2, np.uint32), v),
           "diagonal_matrix": lambda v: dml.diagonal_matrix(x, begin=v),
           "create_buffer": lambda v: dml.Device("cpu").create_buffer(v)}
    return seq, one


def test_an_argument_whose_value_cannot_be_read_is_a_validation_error():
    # an int or sequence argument whose value cannot be read (a PyTorch meta tensor, a JAX tracer, anything whose
    # __index__ or tolist raises) escaped as the raw RuntimeError, NotImplementedError... of reading it
    torch = pytest.importorskip("torch")
    seq, one = _int_and_sequence_calls()
    meta = torch.tensor([0, 1], device="meta")
    for name, call in seq.items():
        for value in (meta, _NoItems(), _NoIter(), [_NoIndex(), 1], [meta[0], 1]):
            with pytest.raises(dml.ValidationError, match="must .*; got"):
                call(value)
    for name, call in one.items():
        for value in (meta[0], _NoIndex()):
            with pytest.raises(dml.ValidationError, match="must be an integer.*; got"):
                call(value)


def test_configure_names_a_count_whose_value_cannot_be_read():
    # configure's counts raise the documented TypeError, not the RuntimeError of reading a meta tensor
    torch = pytest.importorskip("torch")
    for value in (torch.tensor(2, device="meta"), _NoIndex()):
        with pytest.raises(TypeError, match="configure: threads must be an int"):
            dml.configure(threads=value)


def test_a_jax_tracer_given_for_a_sequence_argument_is_a_validation_error():
    # under jax.jit a traced array given for offsets raised JAX's ConcretizationTypeError from inside opendml;
    # an int argument traced was already refused naming it
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    x = jnp.arange(24.0, dtype=jnp.float32).reshape(4, 6)
    with pytest.raises(dml.ValidationError, match="SLICE: Offsets must be a sequence of integers; got .*cannot be read"):
        jax.jit(lambda x, o: dml.slice(x, o, [1, 1], [1, 1]))(x, jnp.array([0, 1]))
    with pytest.raises(dml.ValidationError, match="TILE: Repeats"):
        jax.jit(lambda x, r: dml.tile(x, r))(x, jnp.array([1, 2]))


def _unaligned(a):
    import numpy as np
    buf = np.zeros(a.nbytes + 1, np.uint8)
    u = np.ndarray(a.shape, a.dtype, buffer=buf, offset=1)
    u[...] = a
    assert not u.flags.aligned
    return u


@pytest.mark.parametrize("dtype", ["float32", "int64", "float16"])
def test_the_call_cache_serves_no_index_pass_a_misaligned_array(dtype):
    # an index function's entry recorded for an aligned array was served to a misaligned one of the same dtype,
    # shape and strides (the key holds no alignment): index.c's typed loads then read misaligned words (undefined
    # behaviour; UBSan halts on it). The C new-shape route already declines such an array (newshape_index.c's
    # ix_layout); the move program's copies read any alignment, and stay served (tests/arrays/test_call_cache.py)
    import numpy as np
    from opendml.runtime import calls
    if not calls.info()["numpy"]:
        pytest.skip("no compiled call cache")
    x = (np.arange(24) % 5).astype(dtype).reshape(4, 6)
    u = _unaligned(x)
    index = np.zeros((4, 6), np.int64)
    for call in (lambda a: dml.gather(a, np.array([2, 0, 1]), 1),
                 lambda a: dml.gather_elements(a, index, 0),
                 lambda a: dml.scatter_elements(np.zeros((4, 6), a.dtype), index, a, 0)):
        want = call(x)
        call(x)
        before = calls.info()["hits"]
        got = call(u)
        assert calls.info()["hits"] == before, "a misaligned array was served from an aligned one's entry"
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", ["float32", "int64", "float16"])
def test_the_index_kernel_reads_no_misaligned_word(monkeypatch, dtype):
    # the Python route ran index.c's pass on a misaligned array as it lies (UBSan: "load of misaligned address"
    # in run_elements); such a pass is NumPy's kernel's, as a pass index.c does not take is
    import numpy as np
    from opendml.runtime import get_backend
    x = (np.arange(24) % 5).astype(dtype).reshape(4, 6)
    u = _unaligned(x)
    index = np.zeros((4, 6), np.int64)
    size = np.dtype(dtype).itemsize
    with dml.configure(call_cache=False):
        backend = get_backend("cpu")                # (each configuration has its own)
        if backend._native is None:
            pytest.skip("no compiled kernels")
        native, seen = backend._native, []

        class Spy:
            def __getattr__(self, name):
                return getattr(native, name)

            def index_run_pass(self, params, src, n_src, dst, n_dst, idx, n_idx):
                seen.append((src, idx))
                return native.index_run_pass(params, src, n_src, dst, n_dst, idx, n_idx)
        monkeypatch.setattr(backend, "_native", Spy())
        for call in (lambda a: dml.gather(a, np.array([2, 0, 1]), 1),
                     lambda a: dml.gather_elements(a, index, 0),
                     lambda a: dml.scatter_elements(np.zeros((4, 6), a.dtype), index, a, 0)):
            want = call(x)
            got = call(u)
            assert got.tobytes() == want.tobytes()
            assert all(src % size == 0 for src, _ in seen), "index.c read a misaligned array"


_HUGE = 10**5000          # more digits than Python prints (sys.get_int_max_str_digits: 4300)


@pytest.mark.parametrize("call", [
    lambda b: dml.slice(np.ones((2, 2)), [0, b], [1, 1], [1, 1]),
    lambda b: dml.slice1(np.ones((2, 2)), [0, 0], [1, 1], [1, -b]),
    lambda b: dml.tile(np.ones((2, 2), np.float32), [1, b]),
    lambda b: dml.pad(np.ones((2, 2)), [0, b], [0, 0]),
    lambda b: dml.unfold(np.ones((1, 1, 4, 4), np.float32), 3, b),
    lambda b: dml.fold(np.ones((1, 18, 4), np.float32), [4, 4], [3, b]),
    lambda b: dml.join([np.ones(2), np.ones(2)], b),
    lambda b: dml.split(np.ones((2, 4)), 1, [b, 1]),
    lambda b: dml.gather(np.ones((2, 2)), np.array([0]), b),
    lambda b: dml.one_hot(np.array([0, 1]), b, np.array([0., 1.], np.float32)),
    lambda b: dml.diagonal_matrix(shape=(2, b)),
    lambda b: dml.TensorDesc("FLOAT32", [1, b]),
    lambda b: dml.calc_buffer_tensor_size("FLOAT32", [b]),
    lambda b: dml.Device("cpu").create_buffer(b),
    lambda b: dml.configure(threads=b),
], ids=["slice", "slice1", "tile", "pad", "unfold", "fold", "join", "split", "gather", "one_hot", "diagonal_matrix",
        "TensorDesc", "calc_buffer_tensor_size", "create_buffer", "configure"])
@pytest.mark.parametrize("sign", [1, -1])
def test_an_integer_too_long_to_print_is_a_validation_error_naming_its_size(call, sign):
    # an int of more digits than Python prints made the error message itself raise ValueError ("Exceeds the limit
    # (4300 digits) for integer string conversion"); every int a description reads stays below 2**INT_BITS
    for _ in range(2):                    # the second call as the first (the caches hold no error)
        # (an output's sizes the function makes from an argument name it after: " (OutputTensor.Sizes = ...)")
        with pytest.raises(dml.ValidationError, match=r"an integer of 16610 bits( \(\w+\.Sizes = [^()]*\))?$") as info:
            call(sign * _HUGE)
        assert len(str(info.value)) < 200


def test_the_command_line_names_an_integer_too_long_to_print(tmp_path):
    import json
    import subprocess
    import sys
    spec = {"Operator": "PADDING", "InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 4]},
            "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 8, 10]}, "PaddingMode": "CONSTANT",
            "PaddingValue": 9, "StartPadding": [0, 0, 1, 2], "EndPadding": [0, 0, 3, 4]}
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(spec).replace("[0, 0, 1, 2]", "[0, 0, 1, " + "9" * 4200 + "]"))
    r = subprocess.run([sys.executable, "-m", "opendml", "validate", str(path)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "StartPadding[3] must be an integer of at most 1024 bits; got an integer of " \
        "13953 bits" in r.stderr
