"""Issue 33: a new shape's C route (``calls.move_new``) on PyTorch tensors
does not wait for the C++ node library's tensor accessors. Before, it
declined every call while they were not loaded -- for the first half minute
of a machine's first process (the library builds in the background) and
always with ``torch_node="off"`` -- so a never-seen shape on a GPU took the
Python route (planning through descriptions, about ten times slower) unless
another process had built the library first. Now C reads the same facts
through Python there.

Each case runs in a fresh process with ``OPENDML_TORCH_NODE=off`` (no
accessors, whatever is cached on disk), in the import orders a user may
have (PyTorch alone, CuPy first, opendml first), and checks that every
never-seen shape of SLICE1 and UNFOLD took the C route, gave PyTorch's own
result, and that the call it recorded serves the same shape again; a
negative view (which the route must leave to the Python route) still gives
the right values."""
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from tests.conftest import cuda_available, native_available  # noqa: E402

pytestmark = pytest.mark.skipif(not native_available(), reason="the compiled CPU kernels are not built")

SCRIPT = textwrap.dedent("""
    import sys
    order, device = sys.argv[1], sys.argv[2]
    if order == "cupy-first":
        import cupy  # noqa: F401
    if order == "opendml-first":
        import opendml as dml
        import opendml.torch  # noqa: F401
    import numpy as np
    import torch
    import torch.nn.functional as F
    import opendml as dml
    import opendml.torch  # noqa: F401
    from opendml.arrays import front
    from opendml.arrays.torch import node as torch_node
    from opendml.runtime import calls
    assert torch_node.status().startswith("off"), torch_node.status()
    counts = {"c": 0, "python": 0}
    real = front._new            # the C new-shape route, which the functions offer a call first

    def new_shape(*a, **k):
        out = real(*a, **k)
        counts["python" if out is None else "c"] += 1
        return out
    front._new = new_shape
    rng = np.random.default_rng(7)
    shapes = list(dict.fromkeys((1, int(rng.integers(1, 5)), int(h), int(w))
                                for h, w in rng.integers(8, 40, size=(24, 2))))[:12]
    for s in shapes:
        x = torch.randn(s, device=device)
        got = dml.slice1(x, [0, 0, 0, 0], list(x.shape), [1, 1, -1, 1])
        assert torch.equal(got, x.flip(2)), s
        got = dml.unfold(x, 3, 1, 1, 1, 1)
        assert torch.equal(got, F.unfold(x, 3, padding=1)), s
    assert counts == {"c": 2 * len(shapes), "python": 0}, counts
    # the recorded entries serve the same shapes again (no new-shape call)
    hits = calls.info()["hits"]
    x = torch.randn(shapes[0], device=device)
    assert torch.equal(dml.slice1(x, [0, 0, 0, 0], list(x.shape), [1, 1, -1, 1]), x.flip(2))
    assert calls.info()["hits"] == hits + 1 and counts["c"] == 2 * len(shapes), (calls.info(), counts)
    # a negative view: the route declines, the Python route resolves it
    y = torch.randn(1, 2, 9, 11, device=device)
    neg = torch._neg_view(y)
    assert neg.is_neg()
    assert torch.equal(dml.slice1(neg, [0, 0, 0, 0], list(y.shape), [1, 1, -1, 1]), (-y).flip(2))
    if device == "cuda":
        torch.cuda.synchronize()
    print("ok", counts)
""")


def _run(order: str, device: str) -> None:
    env = dict(os.environ, OPENDML_TORCH_NODE="off")
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env["PYTHONPATH"] = os.pathsep.join([src, os.path.dirname(src)] + [p for p in [env.get("PYTHONPATH")] if p])
    r = subprocess.run([sys.executable, "-c", SCRIPT, order, device], capture_output=True, text=True, timeout=300,
                       env=env)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr


@pytest.mark.parametrize("order", ["torch-first", "opendml-first"])
def test_new_shape_route_without_accessors_cpu(order):
    _run(order, "cpu")


@pytest.mark.cuda
@pytest.mark.skipif(not (torch.cuda.is_available() and cuda_available()), reason="CUDA is not available")
@pytest.mark.parametrize("order", ["torch-first", "cupy-first", "opendml-first"])
def test_new_shape_route_without_accessors_cuda(order):
    _run(order, "cuda")
