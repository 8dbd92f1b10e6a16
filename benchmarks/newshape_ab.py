"""Never-seen (1, C, H, W) float32 shapes on CUDA, opendml beside PyTorch's own op in one process, for comparing
trees (run it once per tree, alternating): ``python3 benchmarks/newshape_ab.py [OPS] [PASS] [--breakdown]``.

Per operator (OPS: comma-separated names below, empty for all): 80 + 16 calls on other shapes first (kernels
compiled or loaded), then 4 rounds of 30 never-seen shapes (C 1-16, H and W 8-200; PASS shifts the seeds so a
second process of the same tree meets other shapes), synchronised at each round's end; the lowest round's
microseconds a call, PyTorch's op timed on the same inputs right after, and how many of 5 further new shapes ran a
function of ``opendml/ops`` in Python (0: the C new-shape route). Absolute times vary between processes on one
machine (seen: PyTorch's flip 9.2-15.3 us on one H200), so compare the ratios. ``--breakdown``: slice1's parts
(the front's C route alone, the call cache's miss, PyTorch's allocation, the CUDA conf callable)."""
import sys, time, json
import numpy as np
import torch
import torch.nn.functional as F
import opendml as dml
import opendml.torch  # noqa
from opendml.arrays.torch import node
print("node ready", node.wait(240), node.status()[:80], flush=True)
dev = "cuda"
only = sys.argv[1].split(",") if len(sys.argv) > 1 and sys.argv[1] else None
breakdown = "--breakdown" in sys.argv
PASS = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 0
def sync(): torch.cuda.synchronize()
x0 = torch.randn(256, 1024, 1024, device=dev); y0 = torch.empty_like(x0)
for _ in range(3): y0.copy_(x0)
sync(); t0 = time.perf_counter()
for _ in range(10): y0.copy_(x0)
sync(); bw = 2 * x0.nbytes * 10 / (time.perf_counter() - t0) / 1e9
del x0, y0
print(f"device {torch.cuda.get_device_name()} copy {bw:.0f} GB/s torch {torch.__version__} dml {dml.__file__}", flush=True)
SEEN = set()
def shapes(seed, k, lo=8, hi=200):
    rng = np.random.default_rng(seed); out = []
    while len(out) < k:
        s = (int(rng.integers(1, 17)), int(rng.integers(8, 201)), int(rng.integers(lo, hi + 1)))
        if s not in SEEN: SEEN.add(s); out.append(s)
    return out
randn = lambda *s: torch.randn(*s, device=dev)
ints = lambda hi, s: torch.randint(0, hi, s, device=dev)
x1 = lambda c, h, w: (randn(1, c, h, w),)
rev = [1, 1, -1, 1]
def cols(c, h, w): return randn(1, c * 9, h * w), [h, w]
def grad(c, h, w): return randn(1, c, (h + 1) // 2, w), [1, c, h, w]
def gather_args(c, h, w): return randn(1, c, h, w), ints(c, (max(1, c // 2),))
def elements_args(c, h, w): return randn(1, c, h, w), ints(h, (1, c, h, w))
def scatter_args(c, h, w): return randn(1, c, h, w), ints(h, (1, c, h, w)), randn(1, c, h, w)
OPS = [
 ("slice1", x1, lambda x: dml.slice1(x, [0, 0, 0, 0], list(x.shape), rev), lambda x: x.flip(2)),
 ("slice", x1, lambda x: dml.slice(x, [0, 0, 0, 0], [1, x.shape[1], x.shape[2], (x.shape[3] + 1) // 2], [1, 1, 1, 2]),
  lambda x: x[..., ::2].contiguous()),
 ("unfold", x1, lambda x: dml.unfold(x, 3, 1, 1, 1, 1), lambda x: F.unfold(x, 3, 1, 1, 1)),
 ("fold", cols, lambda x, hw: dml.fold(x, hw, 3, 1, 1, 1, 1), lambda x, hw: F.fold(x, hw, 3, 1, 1, 1)),
 ("slice_grad", grad, lambda g, s: dml.slice_grad(g, s, [0, 0, 0, 0], s, [1, 1, 2, 1]),
  lambda g, s: g.new_zeros(s).__setitem__((slice(None), slice(None), slice(None, None, 2)), g)),
 ("gather", gather_args, lambda x, i: dml.gather(x, i, 1), lambda x, i: torch.index_select(x, 1, i)),
 ("gather_unchecked", gather_args, lambda x, i: dml.gather(x, i, 1, check_indices=False), lambda x, i: torch.index_select(x, 1, i)),
 ("gather_elements", elements_args, lambda x, i: dml.gather_elements(x, i, 2), lambda x, i: x.gather(2, i)),
 ("scatter_elements", scatter_args, lambda x, i, u: dml.scatter_elements(x, i, u, 2), lambda x, i, u: x.scatter(2, i, u)),
 ("scatter_elements_unchecked", scatter_args, lambda x, i, u: dml.scatter_elements(x, i, u, 2, check_indices=False), lambda x, i, u: x.scatter(2, i, u)),
]
res = {}
import pathlib
OPS_DIR = str(pathlib.Path(dml.__file__).parent / "ops")
def python_lowered(fn, args):
    seen = []
    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(OPS_DIR) and frame.f_code.co_name != "arguments":
            seen.append(frame.f_code.co_name)
    old = sys.getprofile(); sys.setprofile(profile)
    try: fn(*args)
    finally: sys.setprofile(old)
    return bool(seen)
for k, (name, make, ours, peer) in enumerate(OPS):
    if only and name not in only: continue
    try:
        for s in shapes(1000 + k + 100 * PASS, 80) + shapes(2000 + k + 100 * PASS, 16, 201, 256):
            a = make(*s); ours(*a); peer(*a)
        sync()
        best = bp = 1e9
        for r in range(4):
            ins = [make(*s) for s in shapes(3000 + 10 * k + r + 100 * PASS, 30)]
            sync(); t0 = time.perf_counter()
            for a in ins: ours(*a)
            sync(); best = min(best, (time.perf_counter() - t0) / len(ins) * 1e6)
            t0 = time.perf_counter()
            for a in ins: peer(*a)
            sync(); bp = min(bp, (time.perf_counter() - t0) / len(ins) * 1e6)
        res[name] = (best, bp)
        py = sum(python_lowered(ours, make(*s)) for s in shapes(5000 + k, 5))
        print(f"{name:28s} ours {best:6.2f} us  torch {bp:6.2f} us  ratio {best / bp:.2f}  python-lowered {py}/5", flush=True)
    except Exception as e:
        print(name, "ERROR", type(e).__name__, str(e)[:300], flush=True)
if breakdown:
    from opendml.arrays import front
    from opendml.runtime import calls as ccache
    op = ccache.OPS["slice1"]
    def tm(fn, items):
        best = 1e9
        for r in range(3):
            sync(); t0 = time.perf_counter()
            for a in items: fn(a)
            sync(); best = min(best, (time.perf_counter() - t0) / len(items) * 1e6)
        return best
    xs = [randn(1, *s) for s in shapes(7000, 90)]
    n = [0]
    def new_direct(x):
        front._new(op, x, ([0, 0, 0, 0], list(x.shape), rev, None))
    print("breakdown slice1: _cuda_conf %.2f us" % tm(lambda a: front._cuda_conf(), range(300)))
    print("breakdown slice1: torch.empty %.2f us" % tm(lambda x: x.new_empty(x.shape), xs))
    print("breakdown slice1: C cache miss %.2f us" % tm(lambda x: front._cached(op, x, [0, 0, 0, 0], list(x.shape), rev), xs))
    xs2 = [[randn(1, *s) for s in shapes(7100 + r, 30)] for r in range(3)]
    best = 1e9
    for items in xs2:
        sync(); t0 = time.perf_counter()
        for x in items: new_direct(x)
        sync(); best = min(best, (time.perf_counter() - t0) / len(items) * 1e6)
    print("breakdown slice1: front._new direct (the C route) %.2f us" % best)
    xs3 = [[randn(1, *s) for s in shapes(7200 + r, 30)] for r in range(3)]
    best = 1e9
    for items in xs3:
        sync(); t0 = time.perf_counter()
        for x in items: dml.slice1(x, [0, 0, 0, 0], list(x.shape), rev)
        sync(); best = min(best, (time.perf_counter() - t0) / len(items) * 1e6)
    print("breakdown slice1: dml.slice1 full %.2f us" % best, flush=True)
