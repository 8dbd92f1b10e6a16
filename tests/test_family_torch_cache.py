"""The data-movement family on PyTorch CPU tensors: a call with nothing for
autograd to record runs the NumPy path on views of the tensors, so its
repeated calls are served by the family's caches (the C call cache first);
every answer and error equals the uncached route's."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import opendml as dml  # noqa: E402
from opendml.arrays import planner  # noqa: E402
from opendml.model.errors import ValidationError  # noqa: E402
from opendml.runtime import calls as ccache  # noqa: E402


def served() -> int:
    return planner.info()["hits"] + ccache.info()["hits"]


CALLS = [
    ("identity", lambda t: dml.identity(t)),
    ("identity scale/bias", lambda t: dml.identity(t, scale=2.0, bias=-1.0)),
    ("cast", lambda t: dml.cast(t, np.float16)),
    ("pad reflect", lambda t: dml.pad(t, [0, 0, 1, 2], [0, 0, 2, 1], "reflect")),
    ("pad constant", lambda t: dml.pad(t, 1, 1, "constant", 3.5)),
    ("join", lambda t: dml.join([t, t * 2], 1)),
    ("split", lambda t: dml.split(t, 2, [1, 3])),
    ("tile", lambda t: dml.tile(t, [1, 2, 1, 2])),
    ("space_to_depth", lambda t: dml.space_to_depth(t, 2)),
    ("depth_to_space", lambda t: dml.depth_to_space(t, 2, "CRD")),
]
LAYOUTS = {
    "packed": lambda: torch.randn(1, 4, 4, 6),
    "transposed": lambda: torch.randn(1, 4, 6, 4).transpose(2, 3),
    "flipped": lambda: torch.randn(1, 4, 4, 6).flip(3),
    "strided": lambda: torch.randn(2, 4, 8, 6)[::2, :, ::2],
    "negative view": lambda: torch._neg_view(torch.randn(1, 4, 4, 6)),
    "requires_grad under no_grad": lambda: torch.randn(1, 4, 4, 6, requires_grad=True),
}


def _listed(out):
    return out if isinstance(out, list) else [out]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name,fn", CALLS, ids=[c[0] for c in CALLS])
def test_repeated_torch_cpu_calls_are_served_and_equal_the_uncached_route(name, fn, layout):
    x = LAYOUTS[layout]()
    with torch.no_grad():
        with dml.configure(call_cache=False):
            want = _listed(fn(x))
        got = [_listed(fn(x)) for _ in range(3)]
        before = served()
        got.append(_listed(fn(x)))
        assert served() > before                     # the last call was served by a cache
    for outs in got:
        assert len(outs) == len(want)
        for a, b in zip(outs, want):
            assert type(a) is torch.Tensor and a.dtype == b.dtype and a.shape == b.shape and a.is_contiguous()
            assert torch.equal(a, b) and a.grad_fn is None
            assert a.data_ptr() != x.data_ptr()
    assert got[-1][0].data_ptr() != got[-2][0].data_ptr()   # new outputs every call


def test_served_calls_follow_changed_arguments_and_keep_the_errors():
    x = torch.randn(1, 4, 4, 6)
    sizes = [1, 3]
    for _ in range(3):
        a, b = dml.split(x, 2, sizes)
    assert a.shape[2] == 1
    sizes[:] = [2, 2]
    a, b = dml.split(x, 2, sizes)
    assert a.shape[2] == 2 and torch.equal(torch.cat([a, b], 2), x)
    for cache in (True, False):
        with dml.configure(call_cache=cache):
            for _ in range(2):
                with pytest.raises(ValidationError) as e:
                    dml.split(x, 2, [1, 2])
            if cache:
                first = str(e.value)
            else:
                assert str(e.value) == first


def test_autograd_still_records_family_calls():
    x = torch.randn(1, 4, 4, 6, requires_grad=True)
    for _ in range(3):
        y = dml.pad(x, 1, 1, "reflect")
    assert y.grad_fn is not None
    (g,) = torch.autograd.grad(y.sum(), x)
    with dml.configure(call_cache=False):
        (g2,) = torch.autograd.grad(dml.pad(x, 1, 1, "reflect").sum(), x)
    assert torch.equal(g, g2)


def test_the_c_entry_takes_only_plain_cpu_tensors_of_one_framework():
    x = torch.randn(1, 4, 4, 6)
    for _ in range(3):
        dml.join([x, x], 1)                          # recorded and served for plain tensors
    for _ in range(2):
        with pytest.raises(ValidationError, match="one framework"):
            dml.join([x, x.numpy()], 1)
    g = torch.randn(1, 4, 4, 6, requires_grad=True)
    y = dml.join([x, g], 1)                          # the second needs a derivative: autograd records
    assert y.grad_fn is not None
    (gg,) = torch.autograd.grad(y.sum(), g)
    assert torch.equal(gg, torch.ones_like(g))
    m = torch.empty(1, 4, 4, 6, device="meta")
    assert dml.join([m, m], 1).device.type == "meta"
    for _ in range(3):
        split = dml.split(x, 1, [1, 3])
    assert [type(t) for t in split] == [torch.Tensor, torch.Tensor] and torch.equal(torch.cat(split, 1), x)


def test_served_calls_under_threads():
    import threading
    xs = [torch.randn(1, 4, 4 + k, 6) for k in range(4)]
    want = [F_pad(x) for x in xs]
    errors = []

    def work(k):
        try:
            for _ in range(200):
                assert torch.equal(dml.pad(xs[k % 4], [0, 0, 1, 2], [0, 0, 2, 1], "reflect"), want[k % 4])
        except Exception as e:                       # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def F_pad(x):
    import torch.nn.functional as F
    return F.pad(x, (2, 1, 1, 2), mode="reflect")


@pytest.mark.parametrize("name,args", [
    ("slice1", ([0, 0, 1, 1], [1, 4, 8, 8], [1, 1, -1, 2], None)),
    ("unfold", ([2, 2], 1, 1, 1, 0)),
])
def test_the_first_five_on_torch_take_the_move_entries(name, args):
    """Issue 31: a first-five call on a PyTorch CPU tensor is recorded as every operator's is, a move entry keyed as
    the tensor's NumPy view, which the first five's lookup (``calls.call``) and the family's (``calls.move``) serve
    alike, on the tensor and on its view (before, PyTorch had its own entries, which neither view nor
    ``calls.move`` found)."""
    fn, code = getattr(dml, name), ccache.OPS[name]
    x = torch.randn(1, 4, 16, 16)[:, :, :, ::1]
    ccache.clear()
    want = fn(x, *args)
    entry, view_entry = ccache.entry(name, x, *args), ccache.entry(name, x.numpy(), *args)
    assert entry is not None and entry == view_entry
    for lookup in (ccache.call, ccache.move):
        before = ccache.info()["hits"]
        got = lookup(code, x, *args)
        assert type(got) is torch.Tensor and torch.equal(got, want) and ccache.info()["hits"] == before + 1
        assert np.array_equal(lookup(code, x.numpy(), *args), want.numpy())
    with pytest.raises(ValidationError):
        fn(x, *args[:-1], -1) if name == "unfold" else fn(x, [0, 0, 9, 0], *args[1:])
