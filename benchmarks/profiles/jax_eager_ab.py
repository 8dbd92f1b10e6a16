"""Eager JAX-on-GPU rows of ``benchmarks/jax_ops.py`` (UNFOLD and FOLD, 2-D
(8,16,64,64) and 3-D (2,8,32,32,32), 3x3(x3) window, padding 1), timed
longer: median and 10th percentile of 400 calls each after 20 warm-up calls.

For an A/B of two source trees on one machine, run it once per tree with
that tree's ``src`` first on ``PYTHONPATH`` (alternating, several rounds:
per-process noise on a lent GPU host reaches 2x)::

    cd $TREE && PYTHONPATH=$TREE/src:$TREE python $HERE/benchmarks/profiles/jax_eager_ab.py LABEL

(the workloads are ``jax_ops.workloads``, of the tree run).
"""
import statistics
import sys
import time

import jax
import numpy as np

import opendml as dml
from benchmarks.jax_ops import workloads


def main():
    dev = jax.devices("gpu")[0]
    rng = np.random.default_rng(0)
    tag = sys.argv[1] if len(sys.argv) > 1 else "run"
    for name, shape, window in workloads(quick=False):
        x = jax.device_put(rng.standard_normal(shape).astype(np.float32), dev)
        spatial = shape[2:]
        cols = dml.unfold(x, window, 1, 1, 1, 1)
        for op, f in [("unfold", lambda: dml.unfold(x, window, 1, 1, 1, 1)),
                      ("fold", lambda: dml.fold(cols, spatial, window, 1, 1, 1, 1))]:
            for _ in range(20):
                f().block_until_ready()
            ts = []
            for _ in range(400):
                t0 = time.perf_counter()
                f().block_until_ready()
                ts.append(time.perf_counter() - t0)
            print(f"{tag} {name} {op} eager median {statistics.median(ts) * 1e6:8.1f} us  "
                  f"p10 {np.percentile(ts, 10) * 1e6:8.1f} us", flush=True)


if __name__ == "__main__":
    main()
