"""The data-movement family on small PyTorch CPU tensors, beside PyTorch's
own ops: ``python -m benchmarks.cpu_family_torch [--out DIR] [--reps N]``.

Host cost per repeated call (1x4x16x16 float32; both timed in interleaved
rounds, minimum over rounds); outputs checked equal first. speed-up =
PyTorch's time / opendml's (above 1: opendml faster). Writes
``family-torch-cpu.json`` to --out (``benchmarks/results`` by default).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import platform
import time

import numpy as np
import torch
import torch.nn.functional as F

import opendml as dml

ROOT = pathlib.Path(__file__).resolve().parent


def cases(x):
    return [
        ("identity", lambda: dml.identity(x), lambda: x.clone()),
        ("identity scale 2 bias 1", lambda: dml.identity(x, 2.0, 1.0), lambda: x * 2 + 1),
        ("cast float32->float16", lambda: dml.cast(x, np.float16), lambda: x.to(torch.float16)),
        ("pad reflect 1", lambda: dml.pad(x, [0, 0, 1, 1], [0, 0, 1, 1], "reflect"),
         lambda: F.pad(x, (1, 1, 1, 1), mode="reflect")),
        ("join 2 on axis 1", lambda: dml.join([x, x], 1), lambda: torch.cat([x, x], 1)),
        ("split 2 on axis 1", lambda: dml.split(x, 1, [2, 2]),
         lambda: [t.contiguous() for t in torch.split(x, [2, 2], 1)]),
        ("tile (1,1,2,2)", lambda: dml.tile(x, [1, 1, 2, 2]), lambda: x.repeat(1, 1, 2, 2)),
        ("space_to_depth 2 CRD", lambda: dml.space_to_depth(x, 2, "CRD"), lambda: F.pixel_unshuffle(x, 2)),
    ]


def timed_pair(fa, fb, reps, rounds):
    ta, tb = [], []
    for _ in range(rounds):
        for fn, ts in ((fa, ta), (fb, tb)):
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            ts.append((time.perf_counter() - t0) / reps)
    return min(ta), min(tb)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(ROOT / "results"))
    p.add_argument("--reps", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=7)
    a = p.parse_args(argv)
    x = torch.randn(1, 4, 16, 16)
    rows = []
    print(f"{platform.machine()}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}")
    for name, ours, peer in cases(x):
        got, want = ours(), peer()
        got, want = (got, want) if isinstance(got, list) else ([got], [want])
        assert all(torch.equal(g, w) for g, w in zip(got, want)), name
        t_ours, t_peer = timed_pair(ours, peer, a.reps, a.rounds)
        rows.append({"operation": name, "opendml_us": t_ours * 1e6, "torch_us": t_peer * 1e6,
                     "speedup": t_peer / t_ours})
        print(f"{name:28} opendml {t_ours * 1e6:7.2f} us   torch {t_peer * 1e6:7.2f} us   {t_peer / t_ours:5.2f}x")
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "family-torch-cpu.json").write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "rows": rows},
                                                          indent=1))


if __name__ == "__main__":
    main()
