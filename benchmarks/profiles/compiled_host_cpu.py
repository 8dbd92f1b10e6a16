"""Host time per call of the compiled ``w @ unfold(x)`` layer's pieces on the
CPU (issue 19): ``python benchmarks/profiles/compiled_host_cpu.py [N C H W]``.

Side by side, microseconds per call (best of 7 rounds):

* ``C++ op``: ``torch.ops.opendml_cpp.unfold.default(x, [3, 3, 1, ...])``
  called as Inductor's wrapper calls it (a fresh list each call; the
  operator's five int lists packed into one ``int[] args``, which ``run_op``
  splits back into the five lists the call cache keys): PyTorch's Python
  entry to the dispatcher, the Autograd kernel (``record_op``), the CPU
  kernel (``run_op``) and the call cache.
* ``C++ op, no autograd``: the same under ``torch.inference_mode()`` (no
  Autograd kernel).
* ``served dml.unfold``: the array-API call the call cache serves.
* ``call cache``: the call cache's C function alone (``calls.call``).
* ``compiled ours`` / ``compiled F.unfold``: ``torch.compile(fullgraph=True)``
  of ``w @ dml.unfold(x, 3, 1, 1, 1, 1)`` and of ``w @ F.unfold(x, 3, 1, 1, 1)``.
* ``entry, 5 int[]`` / ``entry, 1 int[]``: what PyTorch's Python entry to the
  dispatcher costs with unfold's five ``int[]`` arguments and with the same
  ten ints in one ``int[]``: two throwaway operators (namespace
  ``opendml_probe``) whose kernel returns its input, so the difference is
  the argument conversion (Python -> IValues -> Python) and the
  ``__torch_function__`` checks, per list. (This measurement is why the C++
  window operators take one packed list.)

The default input (1, 1, 3, 3) keeps the kernels' own work small, so the
numbers are host overhead; (16, 16, 56, 56) is the issue's row."""
import sys
import timeit

import torch
import torch.nn.functional as F

import opendml as dml
import opendml.torch
from opendml.arrays.torch import adapter as torch_adapter
from opendml.runtime import calls


def per_call(f, n):
    for _ in range(100):
        f()
    return min(timeit.repeat(f, number=n, repeat=7)) / n * 1e6


def main():
    shape = tuple(int(v) for v in sys.argv[1:5]) or (1, 1, 3, 3)
    assert opendml.torch.wait_for_node(), opendml.torch.node_status()
    ops = torch_adapter.operators()
    assert ops is not torch_adapter._CUSTOM, opendml.torch.compiled_status()
    x = torch.randn(shape)
    w = torch.randn(8, shape[1] * 9)
    n = 20000 if x.numel() < 4096 else 500
    op = ops["unfold"]
    code = calls.OPS["unfold"]
    a = ([3, 3], [1, 1], [1, 1], [1, 1], [1, 1])
    assert str(op._schema) == "opendml_cpp::unfold(Tensor x, int[] args) -> Tensor", op._schema
    rows = {}
    rows["C++ op"] = per_call(lambda: op(x, [3, 3, 1, 1, 1, 1, 1, 1, 1, 1]), n)
    with torch.inference_mode():
        rows["C++ op, no autograd"] = per_call(lambda: op(x, [3, 3, 1, 1, 1, 1, 1, 1, 1, 1]), n)
    rows["served dml.unfold"] = per_call(lambda: dml.unfold(x, 3, 1, 1, 1, 1), n)
    rows["call cache"] = per_call(lambda: calls.call(code, x, *a), n)
    torch._dynamo.reset()
    ours = torch.compile(lambda t, m: m @ dml.unfold(t, 3, 1, 1, 1, 1), fullgraph=True)
    peer = torch.compile(lambda t, m: m @ F.unfold(t, 3, 1, 1, 1), fullgraph=True)
    assert torch.allclose(ours(x, w), peer(x, w), rtol=1e-4, atol=1e-4)
    rows["compiled ours"] = per_call(lambda: ours(x, w), n)
    rows["compiled F.unfold"] = per_call(lambda: peer(x, w), n)
    lib = torch.library.Library("opendml_probe", "DEF")
    lib.define("five(Tensor x, int[] a, int[] b, int[] c, int[] d, int[] e) -> Tensor")
    lib.define("one(Tensor x, int[] a) -> Tensor")
    lib.impl("five", lambda t, *lists: t, "CompositeExplicitAutograd")
    lib.impl("one", lambda t, packed: t, "CompositeExplicitAutograd")
    five, one = torch.ops.opendml_probe.five.default, torch.ops.opendml_probe.one.default
    rows["entry, 5 int[]"] = per_call(lambda: five(x, [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]), n)
    rows["entry, 1 int[]"] = per_call(lambda: one(x, [3, 3, 1, 1, 1, 1, 1, 1, 1, 1]), n)
    print(f"input {shape}, {torch.__version__}, node: {opendml.torch.compiled_status()}")
    for name, us in rows.items():
        print(f"  {name:22} {us:8.2f} us")
    print(f"  compiled ours / F.unfold: {rows['compiled F.unfold'] / rows['compiled ours']:.2f}x of peer speed")


if __name__ == "__main__":
    main()
