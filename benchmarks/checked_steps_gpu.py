"""Where a checked index call's time goes on CUDA (issue 33), in one PyTorch
process: ``python -m benchmarks.checked_steps_gpu [--shapes 30]``.

For gather (axis 1), gather_elements (axis 2) and scatter_elements (axis 2) on
``newshape_gpu``'s never-seen (1, C, H, W) float32 shapes, each printed in
microseconds:

* ``loop``: a call in a loop of never-seen shapes, one synchronisation at the
  end (``newshape_gpu``'s measure), checked, unchecked and PyTorch's op;
* ``sync``: one call then a synchronisation, each shape on its own (a call's
  latency: host, launch, kernels and, checked, the wait for the done word);
* ``kernels``: each kernel's GPU time a call (``torch.profiler``: CUPTI sees the
  launches C makes), and how the checked waits ended (done word, stream);
* host steps: ``torch.empty`` of the output, ``calls.move``'s miss (offer's
  first step), ``calls._index_cuda_conf()`` and ``index.c_settings()``;
* ``large``: the unchecked call on one large shape, ms a call between CUDA
  events (a repeat: the kernels' own speed, to see a kernel change costs none).
"""
from __future__ import annotations

import argparse
import statistics
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", type=int, default=30)
    a = ap.parse_args(argv)
    import torch

    import opendml as dml
    from benchmarks.newshape_gpu import shapes
    from opendml.runtime import calls
    from opendml.runtime.cpu import backend as cpu_backend
    from opendml.runtime.cuda import index
    nat, clock, dev = cpu_backend._load_native(), time.perf_counter, "cuda"
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)

    def ints(hi, shape):
        return torch.randint(0, hi, shape, device=dev)
    cases = {
        "gather axis 1": (lambda c, h, w: (torch.randn(1, c, h, w, device=dev), ints(c, (max(1, c // 2),))),
                          lambda x, i, ck: dml.gather(x, i, 1, check_indices=ck), lambda x, i: x.index_select(1, i)),
        "gather_elements axis 2": (lambda c, h, w: (torch.randn(1, c, h, w, device=dev), ints(h, (1, c, h, w))),
                                   lambda x, i, ck: dml.gather_elements(x, i, 2, check_indices=ck),
                                   lambda x, i: x.gather(2, i)),
        "scatter_elements axis 2": (lambda c, h, w: (torch.randn(1, c, h, w, device=dev), ints(h, (1, c, h, w)),
                                                     torch.randn(1, c, h, w, device=dev)),
                                    lambda x, i, u, ck: dml.scatter_elements(x, i, u, 2, check_indices=ck),
                                    lambda x, i, u: x.scatter(2, i, u))}
    for seed, (name, (make, ours, peer)) in enumerate(cases.items()):
        for sh in shapes(500 + seed, 8, 201, 256):              # warm-up: kernels loaded, on other widths
            args = make(*sh)
            ours(*args, True), ours(*args, False), peer(*args)
        torch.cuda.synchronize()
        row = {}
        for k, (label, fn) in enumerate((("checked", lambda *x, f=ours: f(*x, True)),
                                          ("unchecked", lambda *x, f=ours: f(*x, False)), ("torch", peer)), 1):
            inputs = [make(*sh) for sh in shapes(1000 * seed + k, a.shapes)]
            torch.cuda.synchronize()
            t0 = clock()
            for args in inputs:
                fn(*args)
            torch.cuda.synchronize()
            loop = (clock() - t0) / len(inputs) * 1e6
            inputs = [make(*sh) for sh in shapes(1000 * seed + 10 + k, a.shapes)]
            torch.cuda.synchronize()
            each = []
            for args in inputs:
                t0 = clock()
                fn(*args)
                torch.cuda.synchronize()
                each.append((clock() - t0) * 1e6)
            row[label] = f"loop {loop:5.1f} sync {statistics.median(each):5.1f}"
        print(f"{name:26} " + " | ".join(f"{k} {v}" for k, v in row.items()), flush=True)
        inputs = [make(*sh) for sh in shapes(1000 * seed + 50, a.shapes)]
        try:
            waits = nat.cuda_check_info()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for args in inputs:
                    ours(*args, True)
                torch.cuda.synchronize()
            now = nat.cuda_check_info()
            kern = {}
            for ev in prof.events():
                if ev.device_type == torch.autograd.DeviceType.CUDA:
                    kern.setdefault(ev.name.split("(")[0][:48], []).append(ev.device_time_total)
            print("    kernels a checked call: " + "; ".join(f"{n} {sum(v) / len(inputs):.1f} us (x{len(v)})"
                                                             for n, v in kern.items())
                  + f"; waits ended by the done word {now[0] - waits[0]}, by the stream {now[1] - waits[1]}",
                  flush=True)
        except Exception as e:  # noqa: BLE001 - the profile is a diagnostic: the rows above stand
            print(f"    (no kernel profile: {type(e).__name__}: {e})", flush=True)
    # host steps
    x, i = torch.randn(1, 8, 104, 104, device=dev), ints(104, (1, 8, 104, 104))
    op = calls.OPS["gather_elements"]
    n = 2000
    t0 = clock()
    for _ in range(n):
        torch.empty((1, 8, 104, 104), device=dev)
    t_empty = (clock() - t0) / n * 1e6
    views = [(x[..., :w], i[..., :w]) for w in range(8, 104)] * (n // 96 + 1)
    t0 = clock()
    for xv, iv in views[:n]:
        calls.move(op, (xv, iv), True, 2)
    t_move = (clock() - t0) / n * 1e6
    t0 = clock()
    for _ in range(n):
        calls._index_cuda_conf()
    t_conf = (clock() - t0) / n * 1e6
    t0 = clock()
    for _ in range(n):
        index.c_settings()
    t_set = (clock() - t0) / n * 1e6
    print(f"host us: torch.empty {t_empty:.2f}, calls.move (a repeat or a miss) {t_move:.2f}, "
          f"_index_cuda_conf {t_conf:.2f}, index.c_settings {t_set:.2f}", flush=True)
    # large shapes: the kernels' speed
    x, u = torch.randn(64, 512, 512, device=dev), torch.randn(64, 512, 512, device=dev)
    i = ints(512, (64, 512, 512))
    for name, fn in (("gather_elements (64,512,512) axis 1", lambda: dml.gather_elements(x, i, 1, check_indices=False)),
                     ("scatter_elements (64,512,512) axis 1",
                      lambda: dml.scatter_elements(x, i, u, 1, check_indices=False)),
                     ("Tensor.gather (64,512,512) axis 1", lambda: x.gather(1, i))):
        fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        best = float("inf")
        for _ in range(5):
            start.record()
            for _ in range(10):
                fn()
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) / 10)
        print(f"large: {name} {best:.3f} ms", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
