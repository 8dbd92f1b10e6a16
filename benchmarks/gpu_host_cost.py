"""Host cost per call of small GPU operations (issue 12), on a 1x1x4x4 float32
tensor: 20,000 back-to-back calls of each after 500 warm-up calls, in 5
interleaved rounds of 4,000 (every case once per round, so a host that speeds
up or slows down during the run does not favour one case), one device
synchronisation at the end of each round; the median round, microseconds per
call.

    python benchmarks/gpu_host_cost.py [--out DIR] [--calls N]

Rows: the framework's own ops (torch.flip, F.unfold, torch.empty_like),
opendml's launch path (``CudaBackend.launch`` through
the driver's ``cuLaunchKernel``, and through CuPy's ``Function`` as the
fallback; ``launcher(...)`` building its callable each call), the end-to-end
pattern an adapter would use (``torch.empty_like`` + stream query + launch),
and ``dml.slice1`` on CuPy arrays and PyTorch tensors as the array API stands
(repeated calls: served by the call cache), and again with the call cache off
(``configure(call_cache=False)``: the Python route, plan cache warm).
Writes ``gpu-host-cost.json`` to --out.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent))
sys.path.insert(0, str(ROOT.parent / "src"))

import opendml as dml  # noqa: E402
from opendml.runtime import get_backend  # noqa: E402
from opendml.runtime.cuda import backend as cb, launch as cl  # noqa: E402


def per_call(fn, sync, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - t0) / calls * 1e6


def measure(cases: dict, sync, calls: int, rounds: int = 5, warmup: int = 500) -> dict:
    """Median over interleaved rounds of calls // rounds calls each; a case that
    raises is reported by its error."""
    results, times = {}, {}
    for label, call in cases.items():
        try:
            for _ in range(warmup):
                call()
            sync()
            times[label] = []
        except Exception as exc:
            results[label] = f"{type(exc).__name__}: {exc}"[:160]
    for _ in range(rounds):
        for label in times:
            times[label].append(per_call(cases[label], sync, max(1, calls // rounds)))
    for label, ts in times.items():
        results[label] = statistics.median(ts)
    return {label: results[label] for label in cases}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "results"))
    ap.add_argument("--calls", type=int, default=20000)
    args = ap.parse_args(argv)
    import cupy
    import torch
    F = torch.nn.functional
    x = torch.arange(16, dtype=torch.float32, device="cuda").reshape(1, 1, 4, 4)
    xc = cupy.arange(16, dtype=cupy.float32).reshape(1, 1, 4, 4)
    sync = torch.cuda.synchronize
    desc = dml.Slice1OperatorDesc(dml.TensorDesc(dml.DataType.FLOAT32, [1, 1, 4, 4]), None, [0, 0, 0, 1],
                                  [1, 1, 4, 3], [1, 1, -2, 2])
    plan = desc.lower()
    backend = get_backend("cuda")
    y = torch.empty(1, 1, 2, 2, device="cuda")
    xp, yp = x.data_ptr(), y.data_ptr()
    stream = torch.cuda.current_stream().cuda_stream
    backend.launch(plan, xp, 16, yp, stream)
    sync()
    assert y.flatten().tolist() == [13.0, 15.0, 5.0, 7.0], y   # [[14, 16], [6, 8]] of arange(1, 17)
    raw_stream = torch._C._cuda_getCurrentRawStream

    cases = {
        "torch.flip(x, [2])": lambda: torch.flip(x, [2]),
        "F.unfold(x, 2)": lambda: F.unfold(x, 2),
        "torch.empty_like(x)": lambda: torch.empty_like(x),
        f"opendml launch ({cb.CudaBackend.cache_info(backend)['launch_via']})":
            lambda: backend.launch(plan, xp, 16, yp, stream),
        "opendml launcher(...)(stream)": lambda: backend.launcher(plan, xp, 16, yp)(stream),
        "torch.empty + current stream + opendml launch":
            lambda: backend.launch(plan, xp, 16, torch.empty((1, 1, 2, 2), device="cuda").data_ptr(),
                                   torch.cuda.current_stream().cuda_stream),
        "torch.empty + raw stream + opendml launch":
            lambda: backend.launch(plan, xp, 16, torch.empty((1, 1, 2, 2), device="cuda").data_ptr(),
                                   raw_stream(0)),
        "dml.slice1 (CuPy array)": lambda: dml.slice1(xc, [0, 0, 0, 1], [1, 1, 4, 3], [1, 1, -2, 2]),
        "dml.slice1 (torch tensor)": lambda: dml.slice1(x, [0, 0, 0, 1], [1, 1, 4, 3], [1, 1, -2, 2]),
    }
    # the CuPy-function fallback of the launch path: a new plan object gets a
    # new cached launch, built the fallback way
    saved = cl.LAUNCH_VIA
    try:
        cl.LAUNCH_VIA = "cupy"
        plan2 = desc.lower()
        backend.launch(plan2, xp, 16, yp, stream)
    finally:
        cl.LAUNCH_VIA = saved
    cases["opendml launch (CuPy Function fallback)"] = lambda: backend.launch(plan2, xp, 16, yp, stream)
    # the ctypes cuLaunchKernel path (before the C launch existed)
    try:
        cl.LAUNCH_VIA = "driver"
        plan3 = desc.lower()
        backend.launch(plan3, xp, 16, yp, stream)
    finally:
        cl.LAUNCH_VIA = saved
    cases["opendml launch (ctypes cuLaunchKernel)"] = lambda: backend.launch(plan3, xp, 16, yp, stream)
    results = measure(cases, sync, args.calls)
    # The array API's Python route: the same calls with the call cache off.
    with dml.configure(call_cache=False):
        results.update(measure({
            "dml.slice1 (CuPy array), call cache off": cases["dml.slice1 (CuPy array)"],
            "dml.slice1 (torch tensor), call cache off": cases["dml.slice1 (torch tensor)"],
        }, sync, args.calls))
    results["call cache"] = dml.plan_cache_info()["call_cache"]
    props = cupy.cuda.runtime.getDeviceProperties(0)
    res = {"device_name": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
           "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "cupy": cupy.__version__,
           "calls": args.calls, "us_per_call": results, "launch_via": backend.cache_info()["launch_via"]}
    print(f"host cost per call, 1x1x4x4 float32 ({res['device_name']}, torch {torch.__version__}, "
          f"CuPy {cupy.__version__}; {args.calls} calls after 500 warm-up, median of 5 interleaved rounds)")
    for k, v in results.items():
        print(f"  {k:50s} {v:8.2f} us" if isinstance(v, float) else f"  {k:50s} {v}")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu-host-cost.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
