"""opendml on JAX arrays beside JAX's own im2col, ``lax.conv_general_dilated_patches``.

    python -m benchmarks.jax_ops [--device cpu|gpu] [--quick] [--variants] [--out DIR]

Under ``jax.jit`` opendml takes its pure-lax route (see ``opendml.jax``); on
concrete arrays it runs its own kernels (CPU: the compiled kernels through
NumPy; GPU: the CUDA kernels through CuPy). Each row times, on identical data:

* ``opendml jit``: ``jax.jit`` of the opendml call (the lax route);
* ``opendml eager``: the opendml call on a concrete ``jax.Array`` (the kernels,
  the conversion to and from JAX included);
* ``patches``: ``jax.jit`` of ``conv_general_dilated_patches`` (precision
  HIGHEST, so that the copy is exact) reshaped to UNFOLD's (N, C*K, L); for
  FOLD, the VJP of that function (JAX's col2im); for the training step, the
  same im2col layer with patches in place of ``opendml.unfold``; and
  ``lax.conv_general_dilated`` beside it for scale.

``--variants`` adds rows for the two lax forms of UNFOLD (all window slices
stacked at once; one spatial axis at a time), of which ``opendml.unfold``
picks per platform in 2-D.

The outputs are checked against each other first (UNFOLD: equal; FOLD and the
training step: close, the sums being ordered differently). Speed-up = the
peer's median time over opendml's. Writes ``jax-<device>.json`` to --out
(default ``benchmarks/results``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import platform
import statistics
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent


def timer(fn, min_time=0.5, max_reps=200, min_reps=5):
    """Median wall time of ``fn()`` (which blocks until its result is ready)
    after two untimed calls (compilation, first-touch memory)."""
    fn()
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < min_reps or (time.perf_counter() - start < min_time and len(times) < max_reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def workloads(quick: bool):
    """(name, shape, window) of the UNFOLD/FOLD workloads; 3x3 (3x3x3) windows,
    stride 1, padding 1 on every side."""
    if quick:
        return [("2-D", (2, 8, 32, 32), (3, 3)), ("3-D", (1, 4, 16, 16, 16), (3, 3, 3))]
    return [("2-D", (8, 16, 64, 64), (3, 3)), ("3-D", (2, 8, 32, 32, 32), (3, 3, 3))]


def run(device: str, quick: bool, variants: bool = False):
    import jax
    import jax.numpy as jnp
    from jax import lax

    import opendml as dml

    dev = jax.devices(device)[0]
    rng = np.random.default_rng(0)
    rows = []

    def ready(y):
        return jax.tree_util.tree_map(lambda a: a.block_until_ready(), y)

    def row(workload, op, shape, ours_jit, ours_eager, peers, check):
        t_jit = timer(lambda: ready(ours_jit()))
        t_eager = timer(lambda: ready(ours_eager())) if ours_eager else None
        times = {name: timer(lambda f=f: ready(f())) for name, f in peers.items()}
        r = {"workload": workload, "op": op, "shape": list(shape), "opendml_jit_s": t_jit,
             "opendml_eager_s": t_eager, "peers_s": times, "check": check,
             "speedup_jit": {k: v / t_jit for k, v in times.items()},
             "speedup_eager": {k: v / t_eager for k, v in times.items()} if t_eager else None}
        rows.append(r)
        peer_txt = "  ".join(f"{k} {v * 1e3:9.2f} ms ({v / t_jit:5.2f}x jit"
                             + (f", {v / t_eager:5.2f}x eager)" if t_eager else ")") for k, v in times.items())
        eager_txt = f"{t_eager * 1e3:9.2f}" if t_eager else "      n/a"
        print(f"{workload + ' ' + op:24s} {t_jit * 1e3:9.2f} {eager_txt}   {peer_txt}   [{check}]", flush=True)

    print(f"device {dev} ({dev.platform}), jax {jax.__version__}, {os.cpu_count()} CPUs, "
          f"{platform.processor() or platform.machine()}")
    print(f"{'workload':24s} {'jit ms':>9s} {'eager ms':>9s}   peers (speed-up of opendml = peer time / opendml time)")
    for name, shape, window in workloads(quick):
        d = len(window)
        n, c, *spatial = shape
        k, blocks = math.prod(window), math.prod(spatial)
        pad = [(1, 1)] * d
        x = jax.device_put(rng.standard_normal(shape).astype(np.float32), dev)
        unfold = jax.jit(lambda x: dml.unfold(x, window, 1, 1, 1, 1))

        def patches(x):
            return lax.conv_general_dilated_patches(x, window, (1,) * d, pad,
                                                    precision=lax.Precision.HIGHEST).reshape(n, c * k, blocks)
        patches_jit = jax.jit(patches)
        same = np.array_equal(np.asarray(unfold(x)), np.asarray(patches_jit(x)))
        same_eager = np.array_equal(np.asarray(dml.unfold(x, window, 1, 1, 1, 1)), np.asarray(unfold(x)))
        assert same and same_eager, (same, same_eager)
        row(name, "unfold", shape, lambda: unfold(x), lambda: dml.unfold(x, window, 1, 1, 1, 1),
            {"patches": lambda: patches_jit(x)}, "equal")
        if variants:
            from opendml.arrays import jax_adapter
            args = (window, (1,) * d, (1,) * d, (1,) * d, (1,) * d)
            for form in ("_unfold_stacked", "_unfold_by_axis"):
                f = jax.jit(lambda x, form=form: getattr(jax_adapter, form)(x, *args))
                assert np.array_equal(np.asarray(f(x)), np.asarray(unfold(x)))
                row(name, f"unfold{form[7:]}", shape, lambda f=f: f(x), None, {"patches": lambda: patches_jit(x)},
                    "equal")

        cols = unfold(x)
        fold = jax.jit(lambda c: dml.fold(c, spatial, window, 1, 1, 1, 1))
        col2im = jax.jit(lambda c: jax.vjp(patches, x)[1](c)[0])
        err = float(jnp.max(jnp.abs(fold(cols) - col2im(cols))))
        assert err < 1e-4, err
        assert np.array_equal(np.asarray(dml.fold(cols, spatial, window, 1, 1, 1, 1)), np.asarray(fold(cols)))
        row(name, "fold", cols.shape, lambda: fold(cols), lambda: dml.fold(cols, spatial, window, 1, 1, 1, 1),
            {"patches vjp": lambda: col2im(cols)}, f"max |diff| {err:.1e}")

        # A training step of an im2col convolution layer (32 filters): forward and
        # backward to the input and the weights, under jit.
        w = jax.device_put((rng.standard_normal((32, c * k)) / math.sqrt(c * k)).astype(np.float32), dev)

        def layer(cols_of):
            def loss(x, w):
                y = jnp.einsum("ok,nkl->nol", w, cols_of(x), precision=lax.Precision.HIGHEST)
                return jnp.sum(y * y)
            return jax.jit(jax.grad(loss, argnums=(0, 1)))
        step = layer(lambda x: dml.unfold(x, window, 1, 1, 1, 1))
        step_patches = layer(patches)

        def conv_loss(x, w):
            y = lax.conv_general_dilated(x, w.reshape(32, c, *window), (1,) * d, pad, precision=lax.Precision.HIGHEST)
            return jnp.sum(y * y)
        step_conv = jax.jit(jax.grad(conv_loss, argnums=(0, 1)))
        ours, theirs = step(x, w), step_patches(x, w)
        err = max(float(jnp.max(jnp.abs(a - b)) / (float(jnp.max(jnp.abs(b))) + 1e-30)) for a, b in zip(ours, theirs))
        assert err < 1e-4, err
        row(name, "train step", shape, lambda: step(x, w), None,
            {"patches": lambda: step_patches(x, w), "lax.conv": lambda: step_conv(x, w)},
            f"max rel diff {err:.1e}")
    return {"device": str(dev), "platform": dev.platform, "jax": jax.__version__, "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(), "quick": quick,
            "opendml_cpu_kernels": dml.config().cpu_kernels if hasattr(dml.config(), "cpu_kernels") else None,
            "rows": rows}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    p.add_argument("--quick", action="store_true", help="small shapes")
    p.add_argument("--variants", action="store_true", help="also time both lax forms of UNFOLD")
    p.add_argument("--note", default="", help="a line about the machine, kept in the JSON")
    p.add_argument("--out", default=str(ROOT / "results"))
    args = p.parse_args(argv)
    result = {"note": args.note, **run(args.device, args.quick, args.variants)}
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"jax-{args.device}{'-quick' if args.quick else ''}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
