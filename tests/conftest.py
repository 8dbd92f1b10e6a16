import functools
import threading

import pytest


@functools.cache
def cuda_available() -> bool:
    try:
        from opendml.runtime import cuda_status
        return cuda_status()[0]
    except Exception:
        return False


@functools.cache
def native_available() -> bool:
    import opendml as dml
    return dml.config().compiled_available


# "cpu" is the default CPU backend (compiled kernels where built); "cpu-threads"
# forces the compiled kernels to split even tiny work over 3 threads and to take
# UNFOLD's column-tiled path with 3-column tiles; "cpu-numpy" is the NumPy path.
BACKENDS = [pytest.param("cpu", id="cpu"),
            pytest.param("cpu-threads", id="cpu-threads"),
            pytest.param("cpu-numpy", id="cpu-numpy"),
            pytest.param("cuda", id="cuda", marks=pytest.mark.cuda)]


@pytest.fixture(params=BACKENDS)
def backend(request):
    import opendml as dml
    if request.param == "cuda":
        if not cuda_available():
            pytest.skip("CUDA is not available here")
        yield "cuda"
        return
    if request.param == "cpu-threads":
        if not native_available():
            pytest.skip("the compiled CPU kernels are not installed")
        with dml.configure(cpu_kernels="compiled", threads=3, thread_grain_bytes=1, unfold_tile_stride=0,
                           unfold_tile_columns=3):
            yield "cpu"
    elif request.param == "cpu-numpy":
        with dml.configure(cpu_kernels="numpy"):
            yield "cpu"
    else:
        yield "cpu"


def run_in_threads(work, n: int = 4) -> None:
    """``work(k)`` for k in 0..n-1, each in its own thread, all at once; an
    exception raised in any of them fails the test."""
    errors = []

    def run(k):
        try:
            work(k)
        except BaseException as exc:              # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def _examples_scale() -> float:
    import os
    text = os.environ.get("OPENDML_EXAMPLES", "1")
    try:
        scale = float(text)
    except ValueError:
        scale = -1.0
    if not 0 < scale <= 1000:
        raise pytest.UsageError(f"OPENDML_EXAMPLES must be a number in (0, 1000], a multiple of each property "
                                f"test's example count; got {text!r}")
    return scale


def n_examples(n: int) -> int:
    """A property test's Hypothesis example count: ``n``, chosen so that the whole suite runs in under 5 minutes
    on a 2-core machine, times ``OPENDML_EXAMPLES`` (default 1; e.g. ``OPENDML_EXAMPLES=5`` for a deeper run)."""
    return max(1, round(n * _examples_scale()))


def unpack_dual_batches() -> bool:
    """Whether this PyTorch batches ``aten::_unpack_dual`` under ``vmap``, which a compiled ``torch.func.jacfwd``
    or ``hessian`` of opendml's raw operators reaches: PyTorch 2.13 does; 2.11 (the GPU machine's, measured)
    raises "Batching rule not implemented for aten::_unpack_dual"."""
    import torch
    return tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 13)
