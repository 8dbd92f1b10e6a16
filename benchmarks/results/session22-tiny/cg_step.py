# callgrind per-step instructions of a tiny training step (run under valgrind --tool=callgrind
# --toggle-collect=math_fsum): python cg_step.py {bw,ag}_{ours,ours_off,flip} | bw_clone STEPS
import sys, torch, opendml as dml, opendml.torch
from opendml.arrays.torch import node as torch_node
opendml.torch.wait_for_node()
lib = torch_node.get()
shape=(1,4,16,16)
x=torch.randn(shape,requires_grad=True); g=torch.randn(shape)
S=[0,0,0,0]; E=list(shape); T=[1,1,-1,1]
which, M = sys.argv[1], int(sys.argv[2])
lib.direct(not which.endswith("off"))
if which.startswith("bw_ours"):
    def f(_):
        x.grad=None; dml.slice1(x,S,E,T).backward(g)
elif which == "bw_flip":
    def f(_):
        x.grad=None; x.flip(2).backward(g)
elif which.startswith("ag_ours"):
    def f(_):
        torch.autograd.grad(dml.slice1(x,S,E,T),x,g)
elif which == "ag_flip":
    def f(_):
        torch.autograd.grad(torch.flip(x,[2]),x,g)
elif which == "bw_clone":
    def f(_):
        x.grad=None; x.clone().backward(g)
for i in range(300): f(i)
import gc; gc.collect()
import math
def h(i):
    f(i)
    return 0.0
math.fsum(map(h, range(M)))
