"""Where a never-seen shape's time goes on CUDA: cProfile of dml.unfold and
dml.slice1 on 600 new shapes each (after one warm-up shape per kernel), the
top functions by own time and by cumulative time.

    python benchmarks/profiles/cold_cuda.py
"""
import cProfile
import pstats
import time

import torch

import opendml as dml


def shapes(k, w0):
    return [(1, 1 + i % 8, 8 + (i // 8) % 50, w0 + i // 400) for i in range(k)]


def main():
    dml.unfold(torch.randn(1, 2, 9, 9, device="cuda"), 3, 1, 1, 1, 1)
    dml.slice1(torch.randn(1, 2, 9, 9, device="cuda"), [0, 0, 0, 0], [1, 2, 9, 9], [1, 1, -1, 1])
    for name, fn, w0 in (("unfold", lambda t: dml.unfold(t, 3, 1, 1, 1, 1), 20),
                         ("slice1", lambda t: dml.slice1(t, [0, 0, 0, 0], list(t.shape), [1, 1, -1, 1]), 30)):
        xs = [torch.randn(s, device="cuda") for s in shapes(600, w0)]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for x in xs[:300]:
            fn(x)
        torch.cuda.synchronize()
        print(f"{name}: {(time.perf_counter() - t0) / 300 * 1e6:.1f} us per new shape (no profiler)")
        pr = cProfile.Profile()
        pr.enable()
        for x in xs[300:]:
            fn(x)
        torch.cuda.synchronize()
        pr.disable()
        st = pstats.Stats(pr)
        st.sort_stats("tottime").print_stats(18)
        st.sort_stats("cumtime").print_stats(25)


if __name__ == "__main__":
    main()
