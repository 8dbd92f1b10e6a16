"""Which bad call of an opendml_cpp operator crashes (a subprocess each)."""
import subprocess, sys, os
CHILD = r'''
import sys, torch, faulthandler
faulthandler.enable()
import opendml as dml, opendml.torch as dmlt
from opendml.arrays.torch import adapter, node as torch_node
with dml.configure(torch_node="wait"):
    assert torch_node.wait(), torch_node.status()
    ops = adapter.operators()
name, i, which = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lists = {"unfold": ([2, 3], [1, 2], [2, 1], [1, 0], [0, 2]), "slice1": ([0, 0, 1, 0], [2, 3, 4, 5], [1, 1, -2, 2])}[name]
shape = {"unfold": (2, 3, 5, 4), "slice1": (2, 3, 5, 6)}[name]
import math; x = torch.arange(float(math.prod(shape))).reshape(shape)
pk = [v for l in lists for v in l]
k = len(lists)
bad = [pk[:-1], pk + [1] * k, [10 ** 6] * len(pk), [-1] * len(pk), [], pk]
op = ops[name] if which == "op" else getattr(torch.ops.opendml_cpp, "_direct_" + name)
print("calling", name, i, which, bad[i], flush=True)
try:
    y = op(x, bad[i]); print("ok", tuple(y.shape))
except Exception as e:
    print("error", type(e).__name__, str(e)[:160])
'''
env = dict(os.environ)
for name in ("unfold", "slice1"):
    for which in ("op", "direct"):
        for i in ([0] if os.environ.get("ONLY0") else range(6)):
            r = subprocess.run([sys.executable, "-c", CHILD, name, str(i), which], capture_output=True, text=True, env=env, timeout=120)
            last = (r.stdout.strip().splitlines() or [""])[-1]
            print(f"{name:7s} {which:6s} bad[{i}] rc={r.returncode} {last[:170]}", flush=True)
            if r.returncode < 0 or r.returncode == 139:
                print("   ", " | ".join(l for l in r.stderr.splitlines() if "File" in l)[:600])
