"""A review's reproducers of this session's new-shape routes, made
deterministic: another thread changes the input between the moment
``plain_plan`` checks the fields against its shape and the moment C reads
its layout (stood in for by a wrapper around the C call). The C call must
decline fields that do not fit the layout it reads (never a read or write
outside a buffer), and the call then takes the route that validates the
array as it is now."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import opendml as dml  # noqa: E402
import opendml.torch as otorch  # noqa: E402
from opendml import ValidationError  # noqa: E402
from opendml.arrays import numpy_adapter, torch_adapter  # noqa: E402
from opendml.runtime import calls  # noqa: E402
from tests.conftest import native_available  # noqa: E402

pytestmark = pytest.mark.skipif(not native_available(), reason="the compiled CPU kernels are not built")


def test_numpy_array_reshaped_between_plan_and_c_call(monkeypatch):
    x = np.arange(4096 * 64, dtype=np.float32).reshape(4096, 64)
    real = numpy_adapter._numpy_new

    def between(*a):
        x.shape = (64, 4096)
        return real(*a)
    monkeypatch.setattr(numpy_adapter, "_numpy_new", between)
    calls.clear()
    with pytest.raises(ValidationError, match="SLICE"):
        dml.slice(x, [1000, 0], [3000, 64], [1, 1])       # valid for (4096, 64) only


def test_torch_tensor_resized_between_plan_and_c_call(monkeypatch):
    if not otorch.wait_for_node():
        pytest.skip("the C++ node library is not available")
    big, small = torch.arange(64.0).reshape(1, 1, 64), torch.arange(8 * 8 * 64.0).reshape(8, 8, 64)
    x = torch.empty(0)
    x.set_(big)
    real = torch_adapter._torch_new

    def between(*a):
        x.set_(small)
        return real(*a)
    monkeypatch.setattr(torch_adapter, "_torch_new", between)
    calls.clear()
    y = dml.unfold(x, [3], 1)                             # planned for (1, 1, 64); runs on what x is now
    assert tuple(y.shape) == (8, 24, 62)
    assert torch.equal(y, torch.nn.functional.unfold(small.unsqueeze(-1), (3, 1)).reshape(8, 24, 62))
