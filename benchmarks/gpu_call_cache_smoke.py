"""Smoke check of the call cache on CUDA (PyTorch tensors and CuPy arrays):
every operator twice, cache on and off, results equal, hits counted.

    python benchmarks/gpu_call_cache_smoke.py
"""
import sys

import cupy
import numpy as np
import torch

import opendml as dml
from opendml.arrays import cupy_adapter  # noqa: F401 - registers CuPy's hooks

print("cupy stream getter:", cupy_adapter._current_stream_ptr)
x = torch.randn(2, 3, 9, 8, device="cuda")
g = torch.randn(2, 27, 4 * 3, device="cuda")
calls = [
    ("slice", x, ([0, 1, 1, 0], [2, 2, 4, 3], [1, 1, 2, 2])),
    ("slice1", x, ([0, 0, 1, 0], [2, 3, 8, 8], [1, -1, 2, -3])),
    ("unfold", x, (3, 2, 1, 1, 1)),
    ("fold", g, ([8, 6], 3, 2, 1, 1, 1)),
    ("slice_grad", x[:, :, :4], ([2, 3, 12, 8], [0, 0, 2, 0], [2, 3, 7, 8], [1, 1, 2, 1])),
]
bad = 0
for frame in ("torch", "cupy"):
    for name, t, args in calls:
        a = t if frame == "torch" else cupy.asarray(t)
        fn = getattr(dml, name)
        with dml.configure(call_cache=False):
            want = fn(a, *args)
        before = dml.plan_cache_info()["call_cache"]["hits"]
        first, second, third = fn(a, *args), fn(a, *args), fn(a, *args)
        hits = dml.plan_cache_info()["call_cache"]["hits"] - before
        same = all(bool((w == want).all()) and w.shape == want.shape for w in (first, second, third))
        print(f"{frame:6s} {name:10s} equal={same} served={hits}")
        bad += (not same) or hits < 2
print(dml.plan_cache_info())
sys.exit(1 if bad else 0)
