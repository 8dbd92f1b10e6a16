# slice1 tiny step on CUDA: where the time goes, beside flip and unfold.
import time, statistics, torch, sys
import torch.nn.functional as F
import opendml as dml, opendml.torch  # noqa
from opendml.arrays.torch import node, adapter
from opendml.arrays import front
from opendml.runtime import calls
print("node:", node.wait(300), node.status(), flush=True)
shape = (1, 4, 16, 16)
x = torch.randn(shape, device="cuda", requires_grad=True); gs = torch.randn(shape, device="cuda")
gu = torch.randn(1, 36, 256, device="cuda")
S = lambda t: dml.slice1(t, [0, 0, 0, 0], list(shape), [1, 1, -1, 1])
Fl = lambda t: t.flip(2)
U = lambda t: dml.unfold(t, 3, 1, 1, 1, 1)
def bench(f, n=1000, rounds=3):
    for _ in range(100): f()
    torch.cuda.synchronize(); ts = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n): f()
        torch.cuda.synchronize(); ts.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(ts)
def step(op, g):
    def f():
        x.grad = None
        op(x).backward(g)
    return f
def grad_step(op, g):
    return lambda: torch.autograd.grad(op(x), x, g)
def bwd_only(op, g):
    y = op(x)
    return lambda: y.backward(g, retain_graph=True)
cases = [("step slice1", step(S, gs)), ("step flip", step(Fl, gs)), ("step unfold", step(U, gu)),
         ("grad slice1", grad_step(S, gs)), ("grad flip", grad_step(Fl, gs)), ("grad unfold", grad_step(U, gu)),
         ("bwd-only slice1", bwd_only(S, gs)), ("bwd-only flip", bwd_only(Fl, gs)), ("bwd-only unfold", bwd_only(U, gu)),
         ("fwd record slice1", lambda: S(x)), ("fwd record flip", lambda: Fl(x)), ("fwd record unfold", lambda: U(x))]
for name, f in cases:
    print(f"{name:22s} {bench(f):7.2f} us", flush=True)
# adjoint calls served from C on the main thread?
routes = list(adapter._EAGER.values())
for r in routes:
    c = r.adjoint
    g = gs if r.call.name == "slice1" else gu
    print(r.call.name, "adjoint", c[1], c[2], "miss" if c[0](c[1], g, *c[2]) is None else "hit",
          f"{bench(lambda: c[0](c[1], g, *c[2])):.2f} us", flush=True)
# Python-route calls during 200 steps
n = {"kernel": 0, "plan": 0}
k0, p0 = adapter._kernel, front._plan
def kk(*a, **k):
    n["kernel"] += 1; return k0(*a, **k)
def pp(*a, **k):
    n["plan"] += 1; return p0(*a, **k)
adapter._kernel, front._plan = kk, pp
for name, f in (("slice1", step(S, gs)), ("unfold", step(U, gu))):
    n.update(kernel=0, plan=0)
    for _ in range(200): f()
    torch.cuda.synchronize()
    print(name, "python-route calls in 200 steps:", n, flush=True)
