import functools

import pytest


@functools.cache
def cuda_available() -> bool:
    try:
        from opendml.backends import cuda_status
        return cuda_status()[0]
    except Exception:
        return False


@functools.cache
def native_available() -> bool:
    from opendml.backends.numpy_backend import NumpyBackend
    return NumpyBackend().kernels == "compiled"


# "cpu" is the default CPU backend (compiled kernels where built); "cpu-threads"
# forces the compiled kernels to split even tiny work over 3 threads and to take
# UNFOLD's column-tiled path with 3-column tiles; "cpu-numpy" is the NumPy path.
BACKENDS = [pytest.param("cpu", id="cpu"),
            pytest.param("cpu-threads", id="cpu-threads"),
            pytest.param("cpu-numpy", id="cpu-numpy"),
            pytest.param("cuda", id="cuda", marks=pytest.mark.cuda)]


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    from opendml import backends
    from opendml.backends.numpy_backend import NumpyBackend
    if request.param == "cuda":
        if not cuda_available():
            pytest.skip("CUDA is not available here")
        return "cuda"
    if request.param == "cpu-threads":
        if not native_available():
            pytest.skip("the compiled CPU kernels are not installed")
        monkeypatch.setitem(backends._BACKENDS, "cpu",
                            NumpyBackend(native=True, threads=3, grain=1, tile_stride=0, tile_columns=3))
    elif request.param == "cpu-numpy":
        monkeypatch.setitem(backends._BACKENDS, "cpu", NumpyBackend(native=False))
    return "cpu"
