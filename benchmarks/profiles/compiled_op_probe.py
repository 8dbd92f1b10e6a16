"""Probe (issue 19, compiled layer): what the compiled ``w @ unfold(x)`` layer
costs when its unfold is a C++-registered operator (dispatcher -> C++ kernel
-> the call cache) instead of the ``torch.library.custom_op`` (Python
autograd and backend wrappers): ``python benchmarks/profiles/compiled_op_probe.py``.
Builds a probe extension with ``load_inline`` (timed)."""
import time, timeit, torch
from torch.utils.cpp_extension import load_inline
src = r'''
#include <torch/extension.h>
namespace py = pybind11;
static py::object g_fn;
at::Tensor unfold_cpu(const at::Tensor& x, at::IntArrayRef w, at::IntArrayRef s, at::IntArrayRef d, at::IntArrayRef a, at::IntArrayRef b) {
  py::gil_scoped_acquire gil;
  return g_fn(x, w.vec(), s.vec(), d.vec(), a.vec(), b.vec()).cast<at::Tensor>();
}
void set_fn(py::object f) { g_fn = f; }
TORCH_LIBRARY(odmly, m) { m.def("unfold(Tensor x, int[] w, int[] s, int[] d, int[] a, int[] b) -> Tensor"); }
TORCH_LIBRARY_IMPL(odmly, CPU, m) { m.impl("unfold", &unfold_cpu); }
TORCH_LIBRARY_IMPL(odmly, CUDA, m) { m.impl("unfold", &unfold_cpu); }
'''
t=time.time()
ext = load_inline("cop_probe", cpp_sources=[src], functions=["set_fn"], extra_cflags=["-O2"])
print("build", time.time()-t)
import opendml as dml, opendml.torch
from opendml.runtime import calls
code = calls.OPS["unfold"]
def impl(x, w, s, d, a, b):
    out = calls.call(code, x, w, s, d, a, b)
    return out if out is not None else dml.unfold(x, w, s, d, a, b)
ext.set_fn(impl)
@torch.library.register_fake("odmly::unfold")
def _(x, w, s, d, a, b):
    n, c, h, ww = x.shape
    return x.new_empty(n, c * 9, h * ww)
dev = "cuda" if torch.cuda.is_available() else "cpu"
import torch.nn.functional as F
for shape in ([(2,4,10,10)] if dev=="cpu" else [(16,16,56,56),(32,64,56,56)]):
    x = torch.randn(shape, device=dev); wt = torch.randn(64, shape[1]*9, device=dev)
    a = ([3,3],[1,1],[1,1],[1,1],[1,1])
    fns = {"custom_op": torch.compile(lambda t, w: w @ dml.unfold(t, 3, 1, 1, 1, 1), fullgraph=True),
           "C++ op": torch.compile(lambda t, w: w @ torch.ops.odmly.unfold.default(t, *a), fullgraph=True),
           "peer": torch.compile(lambda t, w: w @ F.unfold(t, 3, 1, 1, 1), fullgraph=True)}
    for f in fns.values(): f(x, wt)
    assert torch.equal(fns["C++ op"](x, wt), fns["custom_op"](x, wt))
    def T(f):
        ts=[]
        for _ in range(11):
            if dev=="cuda": torch.cuda.synchronize()
            t0=time.perf_counter()
            for _ in range(50): f()
            if dev=="cuda": torch.cuda.synchronize()
            ts.append((time.perf_counter()-t0)/50*1e6)
        return sorted(ts)[5]
    for n, f in fns.items(): print(shape, n, T(lambda: f(x, wt)))
    print(shape, "op alone custom_op", T(lambda: torch.ops.opendml.unfold.default(x, *a)), "C++ op", T(lambda: torch.ops.odmly.unfold.default(x, *a)))
