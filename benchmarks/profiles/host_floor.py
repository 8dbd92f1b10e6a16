"""Where the host time of an eager forward + backward goes (issue 19):
``python benchmarks/profiles/host_floor.py [--device cuda]``.

Rows, per shape, each ``torch.autograd.grad(f(x), x, g)``: a native clone
(no backward kernel: the floor of the harness), ``torch.flip``, a Python
``autograd.Function`` doing flip both ways, a C++ ``autograd::Function``
doing flip both ways, the same C++ node calling Python callables (what a
node that calls opendml's call cache would pay), and ``dml.slice1``. Also
the compiled layer's parts. Builds a probe extension with
``torch.utils.cpp_extension.load_inline`` (timed).
"""
import argparse, statistics, sys, time
import torch
import torch.nn.functional as F
import opendml as dml

SRC = r'''
#include <torch/extension.h>
namespace py = pybind11;
using torch::autograd::AutogradContext; using torch::autograd::variable_list;
struct Flip : public torch::autograd::Function<Flip> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x) { return x.flip({2}); }
  static variable_list backward(AutogradContext* ctx, variable_list g) { return {g[0].flip({2})}; }
};
struct Call : public torch::autograd::Function<Call> {
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor x, py::object fwd, py::object bwd) {
    torch::Tensor y = fwd(x).cast<torch::Tensor>();
    auto* keep = new py::object(bwd);
    ctx->saved_data["p"] = (int64_t)(intptr_t)keep;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    py::gil_scoped_acquire gil;
    auto* keep = (py::object*)(intptr_t)ctx->saved_data["p"].toInt();
    torch::Tensor r = (*keep)(g[0]).cast<torch::Tensor>();
    delete keep;
    return {r, torch::Tensor(), torch::Tensor()};
  }
};
torch::Tensor flip_fn(torch::Tensor x) { return Flip::apply(x); }
torch::Tensor call_fn(torch::Tensor x, py::object f, py::object b) { return Call::apply(x, f, b); }
'''


class PyFlip(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.flip(2)

    @staticmethod
    def backward(ctx, g):
        return g.flip(2)


def timed(fn, dev, reps=50, rounds=11):
    for _ in range(5):
        fn()
    if dev == "cuda":
        torch.cuda.synchronize()
    ts = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        if dev == "cuda":
            torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) / reps)
    return statistics.median(ts) * 1e6


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    dev = p.parse_args().device
    from torch.utils.cpp_extension import load_inline
    t = time.time()
    ext = load_inline("odml_floor_probe", cpp_sources=[SRC], functions=["flip_fn", "call_fn"], extra_cflags=["-O2"])
    print(f"probe extension build {time.time() - t:.1f} s", flush=True)
    flip2 = lambda t: t.flip(2)
    for shape in [(1, 4, 16, 16), (8, 64, 56, 56), (32, 64, 56, 56)]:
        x = torch.randn(shape, device=dev, requires_grad=True)
        g = torch.randn(shape, device=dev)
        cases = {
            "clone (floor)": lambda t: t.clone(),
            "torch.flip": lambda t: torch.flip(t, [2]),
            "python Function flip": PyFlip.apply,
            "C++ Function flip": ext.flip_fn,
            "C++ Function -> python callables": lambda t: ext.call_fn(t, flip2, flip2),
            "dml.slice1": lambda t: dml.slice1(t, [0, 0, 0, 0], list(shape), [1, 1, -1, 1]),
        }
        for name, f in cases.items():
            us = timed(lambda: torch.autograd.grad(f(x), x, g), dev)
            print(f"eager {shape} {name:36} {us:8.1f} us", flush=True)
        xd = x.detach()
        for name, f in [("forward flip", lambda: torch.flip(xd, [2])),
                        ("forward dml.slice1", lambda: dml.slice1(xd, [0, 0, 0, 0], list(shape), [1, 1, -1, 1]))]:
            print(f"fwd   {shape} {name:36} {timed(f, dev):8.1f} us", flush=True)
    for shape in [(16, 16, 56, 56), (32, 64, 56, 56)]:
        n, c, h, w = shape
        x = torch.randn(shape, device=dev)
        wt = torch.randn(64, c * 9, device=dev)
        cols = dml.unfold(x, 3, 1, 1, 1, 1)
        torch._dynamo.reset()
        ours = torch.compile(lambda t, w: w @ dml.unfold(t, 3, 1, 1, 1, 1), fullgraph=True)
        peer = torch.compile(lambda t, w: w @ F.unfold(t, 3, 1, 1, 1), fullgraph=True)
        rows = [("matmul alone w @ cols", lambda: wt @ cols),
                ("dml.unfold alone", lambda: dml.unfold(x, 3, 1, 1, 1, 1)),
                ("torch.ops.opendml.unfold", lambda: torch.ops.opendml.unfold.default(x, [3, 3], [1, 1], [1, 1], [1, 1], [1, 1])),
                ("F.unfold alone", lambda: F.unfold(x, 3, 1, 1, 1)),
                ("eager w @ dml.unfold", lambda: wt @ dml.unfold(x, 3, 1, 1, 1, 1)),
                ("compiled ours", lambda: ours(x, wt)),
                ("compiled peer", lambda: peer(x, wt))]
        for name, f in rows:
            print(f"layer {shape} {name:36} {timed(f, dev):8.1f} us", flush=True)
    if dev == "cuda":
        cols = torch.empty(32 * 576 * 3136, device=dev)
        dst = torch.empty_like(cols)
        us = timed(lambda: dst.copy_(cols), dev)
        print(f"copy 231 MB d2d {us:.1f} us = {2 * cols.numel() * 4 / us / 1e3:.0f} GB/s")


if __name__ == "__main__":
    main()
