import subprocess, sys, statistics
code = r'''
import time, numpy as np, opendml as dml
rng = np.random.default_rng(0)
xf = rng.standard_normal((2, 1, 2**21 // 4)).astype(np.float32)
for _ in range(20): dml.unfold(xf, [1024], [256])
best = []
for r in range(15):
    t = time.perf_counter()
    for _ in range(20): dml.unfold(xf, [1024], [256])
    best.append((time.perf_counter() - t) / 20 * 1e3)
print(min(best), statistics.median(best)) if False else print(min(best), sorted(best)[len(best)//2])
'''
trees = {"A": "/tmp/ab-old", "B": "/work/main"}
res = {k: [] for k in trees}
for rnd in range(6):
    for k, t in trees.items():
        out = subprocess.run([sys.executable, "-c", "import statistics\n" + code], capture_output=True, text=True,
                             env={"PYTHONPATH": t + "/src", "PATH": "/usr/bin:/bin"}, cwd="/tmp")
        res[k].append(tuple(map(float, out.stdout.split())) if out.returncode == 0 else out.stderr[-300:])
for k, v in res.items():
    print(k, v)
mins = {k: statistics.median(x[0] for x in v) for k, v in res.items()}
print("median of per-process best ms:", mins, "B/A", mins["B"] / mins["A"])
