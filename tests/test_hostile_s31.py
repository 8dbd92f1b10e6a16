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
