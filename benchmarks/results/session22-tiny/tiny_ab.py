"""The tiny training step at (1,4,16,16) by repro/eager_tiny.py's own method (bench, pair, fwd_bwd: gradient
reset each step, random upstream gradient, median of 7 rounds of a doubling loop), then slice1 with the C++
node's direct launches on and off and torch.flip, interleaved `--repeats` times (each a full `bench`), and the
gradients checked bitwise (direct launches on) against PyTorch's. Run from a tree's root with repro/ beside it."""
import importlib.util
import os
import statistics
import sys

spec = importlib.util.spec_from_file_location("eager_tiny", os.path.join(os.getcwd(), "repro", "eager_tiny.py"))
et = importlib.util.module_from_spec(spec)
spec.loader.exec_module(et)
torch, F, dml = et.torch, et.F, et.dml
import opendml.torch  # noqa: E402
from opendml.arrays.torch import node as torch_node  # noqa: E402

opendml.torch.wait_for_node()
lib = torch_node.get()
print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, python {sys.version.split()[0]} | "
      f"node {opendml.torch.node_status()[:40]} | direct {lib.direct_info()}", flush=True)
shape, target = (1, 4, 16, 16), 1.0
n, c, h, w = shape
x = torch.randn(shape, device="cuda", requires_grad=True)
g = torch.randn(n, c * 9, h * w, device="cuda")
et.pair(f"E unfold fwd+bwd {shape}", et.fwd_bwd(lambda t: dml.unfold(t, 3, 1, 1, 1, 1), x, g),
        et.fwd_bwd(lambda t: F.unfold(t, 3, padding=1), x, g), target, "F.unfold")
cols = torch.randn(n, c * 9, h * w, device="cuda", requires_grad=True)
gy = torch.randn(shape, device="cuda")
et.pair(f"E fold fwd+bwd {shape}", et.fwd_bwd(lambda t: dml.fold(t, [h, w], 3, 1, 1, 1, 1), cols, gy),
        et.fwd_bwd(lambda t: F.fold(t, (h, w), 3, padding=1), cols, gy), target, "F.fold")
gs = torch.randn(shape, device="cuda")


def ours(t):
    return dml.slice1(t, [0, 0, 0, 0], list(shape), [1, 1, -1, 1])


et.pair(f"E slice1 reverse-H fwd+bwd {shape}", et.fwd_bwd(ours, x, gs), et.fwd_bwd(lambda t: t.flip(2), x, gs),
        target, "flip")
repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 2
on, off, flip = [], [], []
for r in range(repeats):
    for label, ts in (("on", on), ("off", off), ("flip", flip))[::1 if r % 2 == 0 else -1]:
        if label == "flip":
            ts.append(et.bench(et.fwd_bwd(lambda t: t.flip(2), x, gs)))
            continue
        was = lib.direct(label == "on")
        try:
            ts.append(et.bench(et.fwd_bwd(ours, x, gs)))
        finally:
            lib.direct(was)
for label, ts in (("direct on", on), ("direct off", off), ("flip", flip)):
    print(f"slice1 A/B {label:10s} " + " ".join(f"{t * 1e6:7.1f}" for t in ts) + f" us | median "
          f"{statistics.median(ts) * 1e6:.1f}", flush=True)
print(f"flip / direct on {statistics.median(flip) / statistics.median(on):.2f}x, flip / direct off "
      f"{statistics.median(flip) / statistics.median(off):.2f}x | {lib.direct_info()}", flush=True)
before = lib.direct_info()["served"]
for op, ref, inp, gg in ((ours, lambda t: t.flip(2), x, gs),
                         (lambda t: dml.fold(t, [h, w], 3, 1, 1, 1, 1), lambda t: F.fold(t, (h, w), 3, padding=1),
                          cols, gy),
                         (lambda t: dml.unfold(t, 3, 1, 1, 1, 1), lambda t: F.unfold(t, 3, padding=1), x, g)):
    for _ in range(2):
        y = op(inp)
        (a,), (b,) = torch.autograd.grad(y, inp, gg), torch.autograd.grad(ref(inp), inp, gg)
        assert torch.equal(y, ref(inp)), "forward differs"
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-5), "gradient differs"
    assert torch.equal(a, b) or op is not ours, "slice1's gradient differs from flip's"
print(f"outputs equal, gradients equal PyTorch's (slice1 bitwise), {lib.direct_info()['served'] - before} "
      f"calls run from plans", flush=True)
