"""Probe (issue 19, compiled layer): what the compiled ``w @ unfold(x)`` layer
costs with each operator route opendml has for traced calls, beside the same
layer on ``F.unfold``: ``python benchmarks/profiles/compiled_op_probe.py``.

* ``custom_op``: ``dml.unfold`` traced with ``torch_node="off"``, so the graph
  holds ``opendml::unfold``, the ``torch.library.custom_op`` (Python autograd
  and backend wrappers, then the array API's call-cache lookup).
* ``C++ op``: ``dml.unfold`` traced with the node library loaded, so the graph
  holds ``opendml_cpp::unfold``, the dispatcher operator of
  ``arrays/torch/node.cpp`` (C++ Autograd and backend kernels; the backend
  kernel calls the call cache's C function, Python only on a miss).

Also the operator alone (eager, no graph), each route. Median of 11 rounds
of 50 calls between synchronisations, microseconds per call.
(The first version of this probe measured a prototype: ``load_inline`` of an
operator whose kernel called back into Python once, 0.86x vs custom_op's
0.66x on an H100.)"""
import time

import torch
import torch.nn.functional as F

import opendml as dml
import opendml.torch
from opendml.arrays.torch import adapter as torch_adapter


def timed(f, dev):
    ts = []
    for _ in range(11):
        if dev == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(50):
            f()
        if dev == "cuda":
            torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) / 50 * 1e6)
    return sorted(ts)[5]


def main():
    t = time.time()
    ready = opendml.torch.wait_for_node()
    print(f"node library: {opendml.torch.node_status()} (ready: {ready}, {time.time() - t:.1f} s)")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    a = ([3, 3], [1, 1], [1, 1], [1, 1], [1, 1])
    for shape in ([(2, 4, 10, 10), (16, 16, 56, 56)] if dev == "cpu" else [(16, 16, 56, 56), (32, 64, 56, 56)]):
        x = torch.randn(shape, device=dev)
        wt = torch.randn(64, shape[1] * 9, device=dev)

        def ours(t, w):
            return w @ dml.unfold(t, 3, 1, 1, 1, 1)
        torch._dynamo.reset()
        fns, routes = {}, {}
        with dml.configure(torch_node="off"):
            fns["custom_op"] = torch.compile(lambda t, w: ours(t, w), fullgraph=True)
            fns["custom_op"](x, wt)
            routes["custom_op"] = opendml.torch.compiled_route()
        fns["C++ op"] = torch.compile(lambda t, w: ours(t, w), fullgraph=True)
        fns["C++ op"](x, wt)
        routes["C++ op"] = opendml.torch.compiled_route()
        fns["peer"] = torch.compile(lambda t, w: w @ F.unfold(t, 3, 1, 1, 1), fullgraph=True)
        fns["peer"](x, wt)
        assert torch.equal(fns["C++ op"](x, wt), fns["custom_op"](x, wt))
        times = {n: timed(lambda f=f: f(x, wt), dev) for n, f in fns.items()}
        for n, us in times.items():
            print(f"{shape} {n:10} {us:9.1f} us  {times['peer'] / us:5.2f}x of peer  route {routes.get(n, 'aten')}")
        ops = torch_adapter.operators()
        alone = {"custom_op": timed(lambda: torch.ops.opendml.unfold.default(x, *a), dev)}
        if ops is not torch_adapter._CUSTOM:
            alone["C++ op"] = timed(lambda: torch_adapter.call_op(ops, "unfold", x, *a), dev)   # packed lists
        alone["F.unfold"] = timed(lambda: F.unfold(x, 3, 1, 1, 1), dev)
        print(f"{shape} op alone: " + ", ".join(f"{n} {us:.1f} us" for n, us in alone.items()))


if __name__ == "__main__":
    main()
