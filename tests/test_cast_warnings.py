"""CAST from floats to integers raises no Python warning on either CPU backend.

A signalling NaN, infinity or a value out of the destination's range is
defined by CAST's rules (NaN -> 0, out of range saturates): the NumPy kernels
give the compiled kernels' bytes and, like them, say nothing. A warning is an
exception here (``warnings.simplefilter("error")``, as under ``-W error``).
"""
import warnings

import numpy as np
import pytest

import opendml as dml
from tests.conftest import native_available

FLOATS = [np.float16, np.float32, np.float64]
INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
WORD = {2: np.uint16, 4: np.uint32, 8: np.uint64}
SIGNALLING = {2: [0x7C01, 0xFC01, 0x7D55], 4: [0x7F800001, 0xFF800001, 0x7FA00000],
              8: [0x7FF0000000000001, 0xFFF0000000000001, 0x7FF4000000000000]}
QUIET = {2: [0x7E00, 0xFE00], 4: [0x7FC00000, 0xFFC00001], 8: [0x7FF8000000000000, 0xFFF8000000000001]}


def hostile(dt) -> np.ndarray:
    """Signalling and quiet NaNs, infinities, values beyond every integer
    range and values at the edges, in float type ``dt``."""
    dt = np.dtype(dt)
    vals = [np.inf, -np.inf, 1e300, -1e300, 1e30, -1e30, 2.0 ** 64, -2.0 ** 64, 2.0 ** 63, -2.0 ** 63 - 4096,
            2.0 ** 32, 2.0 ** 31, -2.0 ** 31 - 1, 65536.0, 65504.0, 32768.0, -32769.0, 256.0, 255.9, 128.0,
            -129.0, -0.9, -1.0, 0.5, -0.0, 3.7, -3.7]
    with np.errstate(all="ignore"):
        base = np.array(vals, np.float64).astype(dt)
    bits = np.array(SIGNALLING[dt.itemsize] + QUIET[dt.itemsize], WORD[dt.itemsize]).view(dt)
    return np.concatenate([bits, base])


def cast_on(kernels: str, x, dtype):
    with dml.configure(cpu_kernels=kernels):
        return dml.cast(x, dtype)


@pytest.mark.parametrize("src", FLOATS, ids=lambda t: np.dtype(t).name)
def test_float_to_integer_cast_warns_on_neither_backend(src):
    x = hostile(src)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for dst in INTS + FLOATS:
            got = cast_on("numpy", x, dst)
            # CAST's rule, stated independently: truncate, saturate, NaN -> 0
            if np.dtype(dst).kind in "iu":
                info = np.iinfo(dst)
                with np.errstate(all="ignore"):
                    t = np.trunc(x.astype(np.float64)).tolist()
                want = [0 if v != v else int(info.max) if v >= float(info.max) + 1 else
                        int(info.min) if v < float(info.min) else int(v) for v in t]
                assert got.tolist() == want, (np.dtype(src).name, np.dtype(dst).name)
            if native_available():
                assert cast_on("compiled", x, dst).tobytes() == got.tobytes(), (np.dtype(src).name,
                                                                                 np.dtype(dst).name)


def test_strided_and_reversed_signalling_nan_cast_is_silent():
    """The same through a strided, reversed view (the move program's other
    route into the conversion)."""
    x = np.repeat(hostile(np.float32), 3)[::-3]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = cast_on("numpy", x, np.int32)
        if native_available():
            assert cast_on("compiled", x, np.int32).tobytes() == got.tobytes()
    assert got[-1] == 0 and got[-2] == 0      # the first two elements of hostile(): signalling NaNs


def test_a_warning_from_opendml_code_fails_the_suite():
    """pyproject.toml's filterwarnings makes any warning raised from an
    opendml module an error in the test suite, so no test can pass while
    opendml leaks one."""
    with pytest.raises(RuntimeWarning, match="leaked"):
        warnings.warn_explicit("leaked", RuntimeWarning, "numpy_kernels.py", 1,
                               module="opendml.runtime.cpu.numpy_kernels")
