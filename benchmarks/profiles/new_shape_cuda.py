"""Where a never-seen shape's time goes on the torch route (issue 19), by
stage: the whole call, the C call alone (``call_cache_move_new``, which
lowers it too), a served repeat, and
PyTorch's peer, each over fresh shapes; then cProfile's top functions.
``python benchmarks/profiles/new_shape_cuda.py [--device cuda|cpu]``."""
import argparse
import cProfile
import pstats
import time

import torch

import opendml as dml
import opendml.torch as otorch
from opendml.runtime import calls


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--count", type=int, default=2000)
    a = p.parse_args()
    dev, n = a.device, a.count
    otorch.wait_for_node()
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    k = [0]

    def fresh():
        k[0] += 1
        return [torch.randn((1, 1 + i % 8, 8 + (i // 8) % 50, 20 + i // 400 + 7 * k[0]), device=dev)
                for i in range(n)]

    def timed(label, fn, xs=None):
        xs = fresh() if xs is None else xs
        sync()
        t0 = time.perf_counter()
        for x in xs:
            fn(x)
        sync()
        print(f"{label:46s} {(time.perf_counter() - t0) / len(xs) * 1e6:8.2f} us", flush=True)
        return xs

    ours = lambda t: dml.slice1(t, [0, 0, 0, 0], list(t.shape), [1, 1, -1, 1])  # noqa: E731
    timed("warm-up (kernels compiled)", ours)
    xs = timed("slice1 reversing H, new shape", ours)
    timed("slice1 reversing H, served repeat", ours, xs)
    timed("flip().contiguous()", lambda t: torch.flip(t, [2]).contiguous())
    from opendml.arrays import front
    from opendml.runtime import get_backend
    op = calls.OPS["slice1"]
    lower, cpu = front._LOWER[op], get_backend("cpu").plain_conf
    pre = [(x, ([0, 0, 0, 0], list(x.shape), [1, 1, -1, 1], None)) for x in fresh()]
    sync()
    t0 = time.perf_counter()
    for x, args in pre:
        calls.move_new(op, lower, x, args, calls.generation(), cpu, front._cuda_conf)
    sync()
    print(f"{'call_cache_move_new alone (+ generation)':46s} {(time.perf_counter() - t0) / n * 1e6:8.2f} us")
    timed("torch.empty of the output", lambda t: torch.empty(t.shape, device=dev))
    timed("calls.call miss", lambda t: calls.call(op, t, [0, 0, 0, 0], [1, 2], [1, 1, -1, 1], None))
    xs = fresh()
    prof = cProfile.Profile()
    prof.enable()
    for x in xs:
        ours(x)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
