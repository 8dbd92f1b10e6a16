"""Checked index calls on CUDA (``check_indices=True``, the default) against
their unchecked twins and PyTorch's own ops, in one PyTorch process:

* never-seen shapes: ``(1, C, H, W)`` float32 with C, H and W random (W from
  8 to 200), each shape called once, microseconds a call (synchronised
  before and after: what a caller waits for), median over the shapes, for
  ``dml.gather`` (axis 1) against ``index_select``, ``gather_elements``
  (axis 2) against ``Tensor.gather``, ``gather_nd`` against advanced
  indexing; which route served each call (``C``: no description built);
* the same calls repeated on one shape (call-cache hits), timed the same way;
* the embedding row: a 1M x 256 float32 table, 1M indices, checked and
  unchecked against ``index_select`` (ms a call between CUDA events).

``python -m benchmarks.gpu_index_checked [--shapes 40] [--reps 5]``; prints
the device, its copy bandwidth and every row.
"""
from __future__ import annotations

import argparse
import statistics
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", type=int, default=40, help="never-seen shapes a row")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    import torch

    import opendml as dml
    from benchmarks.gpu_h200 import timed_pair
    from opendml.arrays import engine

    dev = torch.device("cuda")
    big = [torch.randn(256, 1024, 1024, device=dev)]
    big.append(torch.empty_like(big[0]))
    t_copy, = timed_pair([lambda: big[1].copy_(big[0])], args.reps, torch)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  copy "
          f"{2 * big[0].nbytes / (t_copy * 1e-3) / 1e9:.0f} GB/s", flush=True)
    big.clear()
    g = torch.Generator(device="cpu").manual_seed(0)

    def ints(n, shape):
        return torch.randint(0, n, shape, generator=g).to(dev)

    def gather(c, h, w, check):
        x, i = torch.randn(1, c, h, w, device=dev), ints(c, (max(1, c // 2),))
        return lambda: dml.gather(x, i, 1, check_indices=check), lambda: torch.index_select(x, 1, i)

    def elements(c, h, w, check):
        x, i = torch.randn(1, c, h, w, device=dev), ints(w, (1, c, h, w))
        return lambda: dml.gather_elements(x, i, 3, check_indices=check), lambda: x.gather(3, i)

    def nd(c, h, w, check):
        x, i = torch.randn(1, c, h, w, device=dev), ints(c, (max(1, c // 2), 2))
        i[:, 0] = 0
        return lambda: dml.gather_nd(x, i, check_indices=check), lambda: x[i[:, 0], i[:, 1]]

    described = [0]
    real = engine.Call.describe

    def counting(self, *a, **k):
        described[0] += 1
        return real(self, *a, **k)
    engine.Call.describe = counting

    def once(fn):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e6

    shapes = set()
    for _ in range(6):                              # kernels compiled and loaded, on shapes not timed below
        for make in (gather, elements, nd):
            for check in (True, False):
                ours, theirs = make(3 + _, 9 + _, 17 + 3 * _, check)
                ours(), theirs()
                shapes.add((3 + _, 9 + _, 17 + 3 * _))
    for name, make in (("gather axis 1", gather), ("gather_elements axis 3", elements), ("gather_nd", nd)):
        for check in (True, False):
            new, peer, c_served = [], [], 0
            for _ in range(args.shapes):
                while (s := (int(torch.randint(1, 64, ())), int(torch.randint(8, 64, ())),
                             int(torch.randint(8, 201, ())))) in shapes:
                    pass
                shapes.add(s)
                ours, theirs = make(*s, check)
                before = described[0]
                new.append(once(ours))
                c_served += described[0] == before
                peer.append(once(theirs))
            ours, theirs = make(32, 32, 96, check)
            ours()
            rep = statistics.median(once(ours) for _ in range(200))
            prep = statistics.median(once(theirs) for _ in range(200))
            a, b = statistics.median(new), statistics.median(peer)
            label = f"{name} {'checked' if check else 'unchecked'}"
            print(f"{label:34s} new shape {a:6.1f} us / torch {b:5.1f} us ({b / a:.2f}x) C {c_served}/{args.shapes}"
                  f"   repeat {rep:6.1f} us / torch {prep:5.1f} us ({prep / rep:.2f}x)", flush=True)
    engine.Call.describe = real
    table = torch.randn(1 << 20, 256, device=dev)
    idx = torch.randint(0, 1 << 20, (1 << 20,), device=dev)
    t = timed_pair([lambda: dml.gather(table, idx, 0), lambda: dml.gather(table, idx, 0, check_indices=False),
                    lambda: torch.index_select(table, 0, idx)], args.reps, torch)
    nbytes = 2 * idx.numel() * 256 * 4 + idx.nbytes
    print(f"embedding 1M x 256, 1M indices: checked {t[0]:.3f} ms, unchecked {t[1]:.3f} ms, index_select "
          f"{t[2]:.3f} ms (checked {t[2] / t[0]:.2f}x index_select; {nbytes / (t[0] * 1e-3) / 1e9:.0f} GB/s)",
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
