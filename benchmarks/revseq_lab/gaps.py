"""Where a user's reverse_subsequences call spends what its kernel does not:
per case (opendml's reversals, torch.flip and a 256 MiB copy), the timed us
a call (CUDA events around 5 back-to-back calls after a synchronisation, as
benchmarks.gpu_h200.timed_pair, and around 50), the profiler's kernel time
(median of 6 calls) and kernels a call, and the host us of a call: the first
after a synchronisation (median of 7) and back to back (a call that waited
for the previous kernel would take about a kernel's time). Run twice in one
process: as imported (on a fresh machine opendml's C++ PyTorch library is
still compiling in the background) and after ``opendml.torch.wait_for_node``.

    python -m benchmarks.revseq_lab.gaps [dml,flip,copy: cases whose label holds one]
"""
from __future__ import annotations

import statistics
import time

import torch

import opendml as dml
from benchmarks.gpu_h200 import timed_pair


def events_ms(fn, loop, reps=7):
    """Median ms a call: ``loop`` calls back to back between CUDA events (gpu_h200.timed_pair)."""
    return timed_pair([fn], reps, torch, loop)[0]


def host_us(fn, n=12):
    torch.cuda.synchronize()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e6)
    torch.cuda.synchronize()
    return out


def timeline(fn, n=6):
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    ks, api = [], {}
    for e in prof.events():
        dt = str(getattr(e, "device_type", ""))
        if dt.endswith("CUDA"):
            ks.append((e.time_range.start, e.time_range.end, e.name[:40]))
        elif e.name.startswith(("cu", "cuda")):
            s = api.setdefault(e.name, [0, 0.0])
            s[0] += 1
            s[1] += e.time_range.elapsed_us()
    ks.sort()
    durs = [(b - a) for a, b, _ in ks]
    gaps = [ks[i + 1][0] - ks[i][1] for i in range(len(ks) - 1)]
    return ks, durs, gaps, api


def first_us(fn, n=7):
    """Host us of the first call after a synchronisation (median of n)."""
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(out)


def main():
    import sys
    import opendml.torch as odt
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    big = torch.randn(256, 1024, 1024, device=dev)
    big_out = torch.empty_like(big)
    t_copy = events_ms(lambda: big_out.copy_(big), 5)
    bw = 2 * big.nbytes / (t_copy * 1e-3) / 1e9
    del big, big_out
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__} copy {bw:.0f} GB/s", flush=True)
    x6 = torch.randn(512, 256, 512, device=dev)
    x7 = torch.randn(4096, 4096, 8, device=dev)
    o6 = torch.empty_like(x6)
    cases = []
    for label, x, axis, bound in (("axis 0", x6, 0, 512), ("axis 1", x6, 1, 256), ("axis 2", x6, 2, 512),
                                  ("4096x4096x8 axis 2", x7, 2, 8)):
        shape = [1 if d == axis else s for d, s in enumerate(x.shape)]
        n = torch.randint(0, bound + 1, shape, device=dev, generator=g).to(torch.uint32)
        cases.append((f"dml {label}", (lambda x=x, n=n, a=axis: dml.reverse_subsequences(x, n, a)),
                      2 * x.nbytes + n.nbytes))
        cases.append((f"flip {label}", (lambda x=x, a=axis: torch.flip(x, [a])), 2 * x.nbytes))
    cases.append(("copy_ 256 MiB", lambda: o6.copy_(x6), 2 * x6.nbytes))
    cases.append(("empty_like+copy_ 256 MiB", lambda: torch.empty_like(x6).copy_(x6), 2 * x6.nbytes))
    pick = sys.argv[1].split(",") if len(sys.argv) > 1 else None
    cases = [c for c in cases if pick is None or any(p in c[0] for p in pick)]
    from opendml.runtime import calls
    for phase in ("as imported", "after wait_for_node"):
        if phase != "as imported":
            t = time.perf_counter()
            odt.wait_for_node()
            print(f"waited {time.perf_counter() - t:.1f} s", flush=True)
        print(f"== {phase}: node {odt.node_status()[:60]}", flush=True)
        for label, fn, nbytes in cases:
            t5, t50 = events_ms(fn, 5), events_ms(fn, 50, reps=3)
            h = host_us(fn)
            f1 = first_us(fn)
            ks, durs, gaps, api = timeline(fn)
            k = statistics.median(durs) / 1e3 if durs else float("nan")
            print(f"{label:26s} timed5 {t5 * 1e3:6.1f} us ({nbytes / (t5 * 1e-3) / 1e9 / bw:.3f}) timed50 "
                  f"{t50 * 1e3:6.1f} us ({nbytes / (t50 * 1e-3) / 1e9 / bw:.3f}) kernel {k * 1e3:6.1f} us "
                  f"({nbytes / (k * 1e-3) / 1e9 / bw:.3f}) host first {f1:.1f} steady {statistics.median(h[2:]):.1f}"
                  f" kernels/call {len(ks) / 6:.1f}", flush=True)
    print("call cache:", calls.info(), flush=True)


if __name__ == "__main__":
    main()
