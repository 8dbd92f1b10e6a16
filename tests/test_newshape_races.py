"""A review's reproducers of this session's new-shape routes, made
deterministic: another thread changes the input between the moment
the array API checks it and the moment C reads its layout (stood in for by
a wrapper around the C call). The C call must
decline fields that do not fit the layout it reads (never a read or write
outside a buffer), and the call then takes the route that validates the
array as it is now."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import opendml as dml  # noqa: E402
import opendml.torch as otorch  # noqa: E402
from opendml import ValidationError  # noqa: E402
from opendml.arrays import front  # noqa: E402
from opendml.runtime import calls  # noqa: E402
from tests.conftest import native_available  # noqa: E402

pytestmark = pytest.mark.skipif(not native_available(), reason="the compiled CPU kernels are not built")


def test_numpy_array_reshaped_between_plan_and_c_call(monkeypatch):
    from opendml.arrays import front  # noqa: E402
    x = np.arange(4096 * 64, dtype=np.float32).reshape(4096, 64)
    real = front._move_new                                # the move route's C call, which lowers in C

    def between(*a):
        x.shape = (64, 4096)
        return real(*a)
    monkeypatch.setattr(front, "_move_new", between)
    calls.clear()
    with pytest.raises(ValidationError, match="SLICE"):
        dml.slice(x, [1000, 0], [3000, 64], [1, 1])       # valid for (4096, 64) only


def test_torch_tensor_resized_between_plan_and_c_call(monkeypatch):
    if not otorch.wait_for_node():
        pytest.skip("the C++ node library is not available")
    big, small = torch.arange(64.0).reshape(1, 1, 64), torch.arange(8 * 8 * 64.0).reshape(8, 8, 64)
    from opendml.arrays import front  # noqa: E402
    x = torch.empty(0)
    x.set_(big)
    real = front._move_new

    def between(*a):
        x.set_(small)
        return real(*a)
    monkeypatch.setattr(front, "_move_new", between)
    calls.clear()
    y = dml.unfold(x, [3], 1)                             # planned for (1, 1, 64); runs on what x is now
    assert tuple(y.shape) == (8, 24, 62)
    assert torch.equal(y, torch.nn.functional.unfold(small.unsqueeze(-1), (3, 1)).reshape(8, 24, 62))


def _resize_before_record(monkeypatch, name, change):
    """Wrap ``calls.<name>`` so that ``change()`` runs just before it records."""
    real = getattr(calls, name)

    def late(*a, **k):
        change()
        return real(*a, **k)
    monkeypatch.setattr(calls, name, late)


def test_numpy_record_refused_when_the_array_changed(monkeypatch):
    x = np.arange(64 * 4096, dtype=np.float32).reshape(64, 4096)
    monkeypatch.setattr(front, "_new", lambda *a: None)                 # the Python route, which records after
    _resize_before_record(monkeypatch, "put_move", lambda: setattr(x, "shape", (4096, 64)))
    calls.clear()
    dml.slice(x, [0, 0], [64, 8], [1, 4])
    assert calls.entry("slice", x, [0, 0], [64, 8], [1, 4]) is None      # nothing keyed on the new layout
    x.shape = (64, 4096)
    assert calls.entry("slice", x, [0, 0], [64, 8], [1, 4]) is None      # nor on the old one


def test_torch_record_refused_when_the_tensor_changed(monkeypatch):
    x = torch.arange(64 * 4096.0).reshape(64, 4096)
    monkeypatch.setattr(front, "_new", lambda *a: None)                 # the route through NumPy views
    _resize_before_record(monkeypatch, "put_move", lambda: x.resize_(64, 8))
    calls.clear()
    y = dml.slice(x, [0, 0], [64, 1000], [1, 4])
    assert tuple(y.shape) == (64, 1000)
    assert calls.entry("slice", x, [0, 0], [64, 1000], [1, 4]) is None   # (64, 8) must not serve this plan
    with pytest.raises(ValidationError):
        dml.slice(x, [0, 0], [64, 1000], [1, 4])


@pytest.mark.cuda
def test_cuda_record_refused_when_the_tensor_changed(monkeypatch):
    if not torch.cuda.is_available():
        pytest.skip("CUDA is not available")
    x = torch.arange(64 * 4096.0, device="cuda").reshape(64, 4096)
    monkeypatch.setattr(front, "_new", lambda *a: None)
    _resize_before_record(monkeypatch, "put_move_cuda", lambda: x.resize_(64, 8))
    calls.clear()
    dml.slice(x, [0, 0], [64, 1000], [1, 4])
    assert calls.entry("slice", x, [0, 0], [64, 1000], [1, 4]) is None
    with pytest.raises(ValidationError):
        dml.slice(x, [0, 0], [64, 1000], [1, 4])
