"""Where a never-seen CUDA call's host time goes, layer by layer (session 23, the ns helper): each row times
N never-seen (1, C, H, W) float32 shapes on PyTorch CUDA tensors, the cache emptied before each round, the
device synchronised at the end of it (best of R rounds, us per call), entering the call at a lower layer each
time: the array function; the index route's ``offer`` / the family's ``front._new`` (past the cache's miss);
``calls.index_new`` (the index route's wrapper); the C entry itself; the cache's miss alone; and beside them
``torch.empty`` and PyTorch's own op. Every kernel is loaded by a first pass over the same shapes."""
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import opendml as dml
from opendml.arrays import engine, front, index_ops
from opendml.runtime import calls
from opendml.runtime.cpu import backend as cb

N, R = (int(a) for a in (sys.argv[1:3] if len(sys.argv) > 2 else (40, 7)))
nat = cb._load_native()
rng = np.random.default_rng(5)
seen = set()


def shapes(k):
    out = []
    while len(out) < k:
        s = (int(rng.integers(1, 17)), int(rng.integers(8, 201)), int(rng.integers(8, 201)))
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def bench(label, make, fn, warm):
    best = float("inf")
    for _ in range(R):
        args = [make(*s) for s in shapes(N)]
        for a in args:                     # every kernel these shapes name loaded first
            warm(*a)
        calls.clear()
        sync()
        t0 = time.perf_counter()
        for a in args:
            fn(*a)
        sync()
        best = min(best, (time.perf_counter() - t0) / N)
    print(f"{label:46s} {best * 1e6:7.2f} us", flush=True)


dev = sys.argv[3] if len(sys.argv) > 3 else "cuda"
gen = calls.generation
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
ge = calls.OPS["gather_elements"]
c_ge = index_ops._C_INDEX[ge]
mk = lambda c, h, w: (torch.randn(1, c, h, w, device=dev), torch.randint(0, h, (1, c, h, w), device=dev))  # noqa
for ck in (True, False):
    tag = "checked" if ck else "unchecked"
    full = lambda x, i, ck=ck: dml.gather_elements(x, i, 2, check_indices=ck)  # noqa: E731
    bench(f"gather_elements {tag}: dml.gather_elements", mk, full, full)
    bench(f"gather_elements {tag}: index_ops.offer", mk, lambda x, i, ck=ck: index_ops.offer(ge, (x, i), (ck, 2)), full)
    bench(f"gather_elements {tag}: calls.index_new", mk,
          lambda x, i, ck=ck: calls.index_new(ge, c_ge[0], c_ge[1], (x, i), (ck, 2), gen(), 1 << 62), full)
    bench(f"gather_elements {tag}: C entry", mk,
          lambda x, i, ck=ck: nat.call_cache_index_new(ge, c_ge[0], c_ge[1], (x, i), (ck, 2), gen(), 1 << 62,
                                                calls._index_cuda_conf), full)
sc = lambda c, h, w: (torch.randn(1, c, h, w, device=dev), torch.randint(0, h, (1, c, h, w), device=dev),  # noqa
                      torch.randn(1, c, h, w, device=dev))
fulls = lambda x, i, u: dml.scatter_elements(x, i, u, 2)  # noqa: E731
bench("scatter_elements checked: dml.scatter_elements", sc, fulls, fulls)
bench("Tensor.scatter", sc, lambda x, i, u: x.scatter(2, i, u), fulls)
bench("gather_elements: the cache's miss alone", mk, lambda x, i: calls.move(ge, (x, i), True, 2), full)
bench("torch.gather", mk, lambda x, i: x.gather(2, i), full)
bench("torch.empty (1, C, H, W)", mk, lambda x, i: torch.empty(x.shape, device=dev), full)
pad = calls.OPS["pad"]
lower = front._LOWER[pad]
pa = ((0, 0, 1, 2), (0, 0, 2, 1), "reflect", 0)
mp = lambda c, h, w: (torch.randn(1, c, h, w, device=dev),)  # noqa: E731
fullp = lambda x: dml.pad(x, *pa)  # noqa: E731
bench("pad reflect: dml.pad", mp, fullp, fullp)
bench("pad reflect: front._new", mp, lambda x: front._new(pad, x, pa), fullp)
bench("pad reflect: C entry", mp, lambda x: nat.call_cache_move_new(pad, lower, x, pa, gen(), engine.new_settings()[2],
                                                                  front._cuda_conf), fullp)
bench("pad reflect: the cache's miss alone", mp, lambda x: calls.move(pad, x, *pa), fullp)
bench("F.pad reflect", mp, lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect"), fullp)
bench("x.clone()", mp, lambda x: x.clone(), fullp)
