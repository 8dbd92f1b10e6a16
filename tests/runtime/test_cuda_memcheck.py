"""Memory safety of the CUDA kernels under compute-sanitizer's memcheck: the
data-movement family on odd layouts (``benchmarks/gpu_family_memcheck.py``:
rows 1 to 33 elements wide, every pad mode, odd tiles, joins, splits,
space/depth, transposing identities, casts, on exact-size buffers and on
buffers starting one element into their allocation) and the index kernels
on hostile indices (``benchmarks/gpu_index_memcheck.py``). Each script also
compares every result with the CPU backend's bytes. Skipped where
compute-sanitizer is not installed."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from tests.conftest import cuda_available

ROOT = pathlib.Path(__file__).resolve().parents[2]
SANITIZER = shutil.which("compute-sanitizer") or (
    "/usr/local/cuda/bin/compute-sanitizer" if os.path.exists("/usr/local/cuda/bin/compute-sanitizer") else None)

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not cuda_available(), reason="CUDA is not available here"),
              pytest.mark.skipif(SANITIZER is None, reason="compute-sanitizer is not installed")]


@pytest.mark.parametrize("script", ["gpu_family_memcheck", "gpu_index_memcheck"])
def test_memcheck_clean(script):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    r = subprocess.run([SANITIZER, "--tool", "memcheck", "--leak-check", "no", sys.executable, "-m",
                        f"benchmarks.{script}"], capture_output=True, text=True, timeout=400, cwd=ROOT, env=env)
    out = r.stdout + r.stderr
    assert "ERROR SUMMARY: 0 errors" in out, out[-4000:]
    assert "0 mismatches" in out and r.returncode == 0, out[-4000:]
