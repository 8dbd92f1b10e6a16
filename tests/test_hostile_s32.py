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
