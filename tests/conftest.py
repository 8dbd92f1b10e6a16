import functools

import pytest


@functools.cache
def cuda_available() -> bool:
    try:
        from opendml.backends import cuda_status
        return cuda_status()[0]
    except Exception:
        return False


BACKENDS = [pytest.param("cpu", id="cpu"),
            pytest.param("cuda", id="cuda", marks=pytest.mark.cuda)]


@pytest.fixture(params=BACKENDS)
def backend(request):
    if request.param == "cuda" and not cuda_available():
        pytest.skip("CUDA is not available here")
    return request.param
