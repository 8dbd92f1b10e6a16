"""The repro's rows at (1,4,16,16) only, by its own method (repro/eager_tiny.py: bench, pair, fwd_bwd;
gradient reset each step, random upstream gradient); run from a tree's root."""
import importlib.util, os, sys
here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("eager_tiny", os.path.join(here, "..", "repro", "eager_tiny.py"))
et = importlib.util.module_from_spec(spec)
spec.loader.exec_module(et)
torch, F, dml = et.torch, et.F, et.dml
import opendml.torch
opendml.torch.wait_for_node()
print("tree", os.getcwd(), "| opendml", os.path.dirname(dml.__file__), "| node", opendml.torch.node_status()[:60],
      flush=True)
shape, target = (1, 4, 16, 16), 1.0
n, c, h, w = shape
x = torch.randn(shape, device="cuda", requires_grad=True)
g = torch.randn(n, c * 9, h * w, device="cuda")
assert torch.equal(dml.unfold(x, 3, 1, 1, 1, 1), F.unfold(x, 3, padding=1))
et.pair(f"E unfold fwd+bwd {shape}", et.fwd_bwd(lambda t: dml.unfold(t, 3, 1, 1, 1, 1), x, g),
        et.fwd_bwd(lambda t: F.unfold(t, 3, padding=1), x, g), target, "F.unfold")
cols = torch.randn(n, c * 9, h * w, device="cuda", requires_grad=True)
gy = torch.randn(shape, device="cuda")
et.pair(f"E fold fwd+bwd {shape}", et.fwd_bwd(lambda t: dml.fold(t, [h, w], 3, 1, 1, 1, 1), cols, gy),
        et.fwd_bwd(lambda t: F.fold(t, (h, w), 3, padding=1), cols, gy), target, "F.fold")
gs = torch.randn(shape, device="cuda")
et.pair(f"E slice1 reverse-H fwd+bwd {shape}",
        et.fwd_bwd(lambda t: dml.slice1(t, [0, 0, 0, 0], list(shape), [1, 1, -1, 1]), x, gs),
        et.fwd_bwd(lambda t: t.flip(2), x, gs), target, "flip")
# the gradients, exact: the same bytes as PyTorch's own op's (flip and unfold's adjoints are copies)
for op, ref, inp, gg in ((lambda t: dml.slice1(t, [0, 0, 0, 0], list(shape), [1, 1, -1, 1]), lambda t: t.flip(2), x, gs),
                         (lambda t: dml.fold(t, [h, w], 3, 1, 1, 1, 1), lambda t: F.fold(t, (h, w), 3, padding=1), cols, gy)):
    (a,), (b,) = torch.autograd.grad(op(inp), inp, gg), torch.autograd.grad(ref(inp), inp, gg)
    assert torch.equal(a, b), "gradient differs"
print("gradients equal PyTorch's (slice1 vs flip, fold vs F.fold): True", flush=True)
