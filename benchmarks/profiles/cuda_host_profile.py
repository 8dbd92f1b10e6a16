"""Where the host time goes on CUDA (issue 19): ``python benchmarks/profiles/cuda_host_profile.py``.

1. New shapes: cProfile of ``dml.unfold`` and ``dml.slice1`` on 300 CUDA
   tensors of shapes never seen (top functions by own time).
2. Eager parts at (1,4,16,16): forward alone with ``requires_grad``, forward
   without, ``autograd.grad`` of a recorded output, against PyTorch's ops, and
   the building blocks the call cache calls (``new_empty``, the raw stream).
"""
import cProfile, pstats, statistics, time
import torch
import torch.nn.functional as F
import opendml as dml
import opendml.torch as ot

dev = "cuda" if torch.cuda.is_available() else "cpu"
print("node", ot.wait_for_node(), ot.node_status())


def shapes(k, w0):
    return [(1, 1 + i % 8, 8 + (i // 8) % 50, w0 + i // 400) for i in range(k)]


for name, fn, w0 in [("unfold", lambda t: dml.unfold(t, 3, 1, 1, 1, 1), 300),
                     ("slice1", lambda t: dml.slice1(t, [0, 0, 0, 0], list(t.shape), [1, 1, -1, 1]), 400)]:
    xs = [torch.randn(s, device=dev) for s in shapes(300, w0)]
    fn(xs[0])
    pr = cProfile.Profile()
    torch.cuda.synchronize() if dev == "cuda" else None
    t0 = time.perf_counter()
    pr.enable()
    for x in xs[1:]:
        fn(x)
    pr.disable()
    print(f"\n== new shape {name}: {(time.perf_counter() - t0) / 299 * 1e6:.1f} us/call under the profiler")
    pstats.Stats(pr).sort_stats("tottime").print_stats(28)


def T(f, reps=200, rounds=9):
    ts = []
    for _ in range(rounds):
        if dev == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            f()
        if dev == "cuda":
            torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) / reps * 1e6)
    return statistics.median(ts)


x = torch.randn(1, 4, 16, 16, device=dev, requires_grad=True)
xn = x.detach()
y_d = dml.unfold(x, 3, 1, 1, 1, 1)
y_t = F.unfold(x, 3, 1, 1, 1)
g = torch.randn_like(y_t)
s_d = dml.slice1(x, [0, 0, 0, 0], [1, 4, 16, 16], [1, 1, -1, 1])
s_t = torch.flip(x, [2])
gs = torch.randn_like(s_t)
rows = [
    ("unfold fwd, grad", lambda: dml.unfold(x, 3, 1, 1, 1, 1), lambda: F.unfold(x, 3, 1, 1, 1)),
    ("unfold fwd, no grad", lambda: dml.unfold(xn, 3, 1, 1, 1, 1), lambda: F.unfold(xn, 3, 1, 1, 1)),
    ("unfold fwd+bwd", lambda: torch.autograd.grad(dml.unfold(x, 3, 1, 1, 1, 1), x, g),
     lambda: torch.autograd.grad(F.unfold(x, 3, 1, 1, 1), x, g)),
    ("unfold bwd only (retain)", lambda: torch.autograd.grad(y_d, x, g, retain_graph=True),
     lambda: torch.autograd.grad(y_t, x, g, retain_graph=True)),
    ("slice1 fwd, grad", lambda: dml.slice1(x, [0, 0, 0, 0], [1, 4, 16, 16], [1, 1, -1, 1]), lambda: torch.flip(x, [2])),
    ("slice1 fwd+bwd", lambda: torch.autograd.grad(dml.slice1(x, [0, 0, 0, 0], [1, 4, 16, 16], [1, 1, -1, 1]), x, gs),
     lambda: torch.autograd.grad(torch.flip(x, [2]), x, gs)),
    ("slice1 bwd only (retain)", lambda: torch.autograd.grad(s_d, x, gs, retain_graph=True),
     lambda: torch.autograd.grad(s_t, x, gs, retain_graph=True)),
    ("clone fwd+bwd (floor)", lambda: torch.autograd.grad(x.clone(), x, gs),
     lambda: torch.autograd.grad(x * 1.0, x, gs)),
]
print("\n== eager parts, (1,4,16,16), us per call: opendml | torch")
for n, a, b in rows:
    for _ in range(50):
        a(); b()
    print(f"{n:28s} {T(a):8.2f} {T(b):8.2f}")
print(f"{'x.new_empty((1,36,256))':28s} {T(lambda: xn.new_empty((1, 36, 256))):8.2f}")
print(f"{'torch.empty_like':28s} {T(lambda: torch.empty_like(xn)):8.2f}")
if dev == "cuda":
    print(f"{'_cuda_getCurrentRawStream':28s} {T(lambda: torch._C._cuda_getCurrentRawStream(0)):8.2f}")
print(f"{'x.data_ptr()':28s} {T(lambda: xn.data_ptr()):8.2f}")
