"""Probe (issue 19, compiled layer): where the compiled ``w @ unfold(x)``
layer's host time goes, measured on Inductor's generated wrapper itself:
``python benchmarks/profiles/compiled_wrapper_probe.py``.

For opendml's layer and ``F.unfold``'s, at a tiny shape (host cost only) and
at (16,16,56,56) and (32,64,56,56) on CUDA:

* ``whole``: the compiled function (Dynamo's guards, AOTAutograd's runtime
  wrapper, Inductor's ``call``);
* ``inner``: Inductor's generated ``call(args)`` alone;
* for opendml's layer, the same generated source calling the operator
  through the dispatcher (``torch.ops.opendml_cpp.unfold.default``,
  ``dispatcher``) and through its direct kernel
  (``torch.ops.opendml_cpp._direct_unfold``, ``direct``: what Inductor's
  wrapper calls since session 10, ``arrays/torch_inductor.py``), the latter
  also without the output's ``assert_size_stride`` (``direct, no assert``):
  what the dispatcher entry costs inside the layer;
* on CUDA, the device time of each kernel of one call (torch.profiler).

Median of 11 rounds of 200 calls between synchronisations, microseconds per
call, two interleaved passes (the second reported).
"""
import re
import statistics
import time

import torch
import torch.nn.functional as F
from torch._inductor.codecache import PyCodeCache

import opendml as dml
import opendml.torch
from opendml.runtime import calls


def timed(f, dev, reps=200, rounds=11):
    for _ in range(20):
        f()
    ts = []
    for _ in range(rounds):
        if dev == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            f()
        if dev == "cuda":
            torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) / reps * 1e6)
    return statistics.median(ts)


def compiled(fn, x, wt):
    before = {id(m) for m in PyCodeCache.modules}
    f = torch.compile(fn, fullgraph=True)
    f(x, wt)
    mods = [m for m in PyCodeCache.modules if id(m) not in before and hasattr(m, "call")]
    return f, mods[-1]


def patched(mod, kernel, drop_assert):
    """``mod``'s ``call`` with the operator called as ``kernel`` (its dispatcher name or its direct kernel)."""
    src = open(mod.__file__).read()
    src, n = re.subn(r"torch\.ops\.opendml_cpp\.(unfold\.default|_direct_unfold)\(", kernel + "(", src)
    assert n == 1, [line for line in src.splitlines() if "opendml" in line]
    if drop_assert:
        src = re.sub(r"\n\s*assert_size_stride\(buf1, [^\n]*", "", src)
    ns = {"__name__": "opendml_probe_patched"}
    exec(compile(src, "opendml_probe_patched", "exec"), ns)
    return ns["call"]


def kernel_times(f, dev):
    if dev != "cuda":
        return {}
    for _ in range(5):
        f()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            f()
        torch.cuda.synchronize()
    out = {}
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if t:
            out[e.key[:60]] = t / 20
    return out


def main():
    opendml.torch.wait_for_node()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"device {dev}, torch {torch.__version__}, route after tracing below")
    for shape in [(2, 4, 10, 10), (16, 16, 56, 56), (32, 64, 56, 56)]:
        x = torch.randn(shape, device=dev)
        wt = torch.randn(64, shape[1] * 9, device=dev)
        torch._dynamo.reset()
        ours_f, ours_m = compiled(lambda t, w: w @ dml.unfold(t, 3, 1, 1, 1, 1), x, wt)
        from opendml.arrays.torch import inductor as torch_inductor
        print(f"  route {opendml.torch.compiled_route()}, direct kernels in Inductor's wrapper: "
              f"{torch_inductor.status()}, generated: "
              f"{'direct' if '_direct_unfold' in open(ours_m.__file__).read() else 'dispatcher'}")
        peer_f, peer_m = compiled(lambda t, w: w @ F.unfold(t, 3, 1, 1, 1), x, wt)
        dispatcher = patched(ours_m, "torch.ops.opendml_cpp.unfold.default", False)
        direct = patched(ours_m, "torch.ops.opendml_cpp._direct_unfold", False)
        bare = patched(ours_m, "torch.ops.opendml_cpp._direct_unfold", True)
        ref = ours_f(x, wt)
        for g in (lambda: ours_m.call([x, wt])[0], lambda: dispatcher([x, wt])[0], lambda: direct([x, wt])[0],
                  lambda: bare([x, wt])[0]):
            assert torch.equal(g(), ref)
        rows = {
            "whole opendml": lambda: ours_f(x, wt),
            "whole F.unfold": lambda: peer_f(x, wt),
            "inner opendml": lambda: ours_m.call([x, wt]),
            "inner F.unfold": lambda: peer_m.call([x, wt]),
            "inner opendml dispatcher": lambda: dispatcher([x, wt]),
            "inner opendml direct": lambda: direct([x, wt]),
            "inner opendml direct, no assert": lambda: bare([x, wt]),
        }
        got = {}
        for _ in range(2):                      # two interleaved passes; the second is reported
            for name, f in rows.items():
                got[name] = timed(f, dev)
        for name, us in got.items():
            print(f"{shape} {name:34} {us:8.2f} us")
        if shape[0] > 2:
            for name, f in (("opendml", rows["inner opendml"]), ("F.unfold", rows["inner F.unfold"])):
                k = kernel_times(f, dev)
                print(f"{shape} device time per call, {name}: " + ", ".join(f"{n} {t:.1f} us" for n, t in k.items()))
    x = torch.randn(1, 1, 4, 4, device=dev)
    op = torch.ops.opendml_cpp.unfold.default
    code = calls.OPS["unfold"]
    alone = {
        "dispatcher op": lambda: op(x, [3, 3, 1, 1, 1, 1, 1, 1, 1, 1]),
        "direct kernel": lambda: torch.ops.opendml_cpp._direct_unfold(x, [3, 3, 1, 1, 1, 1, 1, 1, 1, 1]),
        "call cache direct": lambda: calls.call(code, x, [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]),
        "dml.unfold": lambda: dml.unfold(x, 3, 1, 1, 1, 1),
        "torch.empty_strided": lambda: torch.empty_strided((1, 9, 16), (144, 16, 1), device=dev),
        "aten.clone op": lambda: torch.ops.aten.clone.default(x),
    }
    for name, f in alone.items():
        print(f"(1, 1, 4, 4) alone {name:22} {timed(f, dev):8.2f} us")


if __name__ == "__main__":
    main()
