"""Session 31's hostile try: each test pins a defect the try found (a failing test first, then the fix)."""
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
