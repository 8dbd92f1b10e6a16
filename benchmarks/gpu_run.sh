#!/usr/bin/env bash
# One device call: build the CPU extension, GPU tests, property tests on CUDA,
# compute-sanitizer memcheck on odd layouts, tuning sweeps, host cost, the
# FOLD/SLICE_GRAD benchmark and the benchmark suite. Everything lands in $OUT
# (at most 8 files come back from the device tool):
#   run.log              everything printed, step by step
#   tests.log            pytest output (GPU tests and property tests)
#   results-cuda.json/png   python -m benchmarks --device cuda
#   gpu-fold.json/png       benchmarks/gpu_fold.py (issue 11 rows and targets)
#   gpu-host-cost.json      benchmarks/gpu_host_cost.py (issue 12 host cost)
#   results-torch-cuda.json/png  benchmarks/gpu_torch.py (host cost, window, training steps)
# STEPS selects steps (default: all, in this order):
#   STEPS="build tests props sanitize sweeps host torch fold suite" bash benchmarks/gpu_run.sh
# SWEEPS_ALL=1 adds the copy and UNFOLD sweeps to the FOLD sweep.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src:$PWD" HYPOTHESIS_STORAGE_DIRECTORY=/tmp/hyp
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
STEPS=${STEPS:-build tests props sanitize sweeps host torch fold suite}
exec > >(tee -a "$OUT/run.log") 2>&1
has() { [[ " $STEPS " == *" $1 "* ]]; }
step() { echo; echo "== $* ($(date +%T), ${SECONDS}s)"; }

step environment
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader
python3 -c "import cupy, torch, numpy; print('cupy', cupy.__version__, 'torch', torch.__version__, 'numpy', numpy.__version__)"
python3 -c "import jax; print('jax', jax.__version__)" 2>/dev/null || echo "no jax"

if has build; then
  step "build the CPU extension in place"
  if python3 -m pip install -e . --no-build-isolation --no-deps -q >/tmp/build.log 2>&1; then
    echo "pip install -e . (CPU kernels built)"
  elif python3 setup.py -q build_ext --inplace >>/tmp/build.log 2>&1; then
    echo "setup.py build_ext --inplace"
  else
    echo "CPU kernels not built:"; tail -8 /tmp/build.log
  fi
  python3 -m opendml.cli info
fi

if has tests; then
  step "GPU tests (pytest -m cuda tests)"
  timeout 300 python3 -m pytest -q -p no:cacheprovider -m cuda tests 2>&1 | tee -a "$OUT/tests.log" | tail -30
fi

if has props; then
  step "property tests on CUDA"
  timeout 180 python3 -m pytest -q -p no:cacheprovider -k cuda tests/test_properties.py tests/test_examples.py \
    tests/test_device.py 2>&1 | tee -a "$OUT/tests.log" | tail -15
fi

if has sanitize; then
  step "compute-sanitizer memcheck: copies and UNFOLD"
  timeout 180 compute-sanitizer --tool memcheck --leak-check no python3 benchmarks/sanitize.py 2>&1 | tail -6
  step "compute-sanitizer memcheck: FOLD and SLICE_GRAD"
  timeout 240 compute-sanitizer --tool memcheck --leak-check no python3 benchmarks/gpu_sanitize_fold.py 2>&1 | tail -6
fi

if has sweeps; then
  step "FOLD / SLICE_GRAD kernel sweep"
  timeout 150 python3 benchmarks/sweep_fold.py 2>&1 | tail -60
  if [[ -n "${SWEEPS_ALL:-}" ]]; then
    step "copy sweep"; timeout 120 python3 benchmarks/sweep_copy.py 2>&1 | tail -44
    step "UNFOLD sweep"; timeout 120 python3 benchmarks/sweep_unfold.py 2>&1 | tail -60
  fi
fi

if has host; then
  step "host cost per call"
  timeout 120 python3 benchmarks/gpu_host_cost.py --out "$OUT" 2>&1 | tail -20
fi

if has torch; then
  step "opendml inside PyTorch: host cost, window, training steps"
  timeout 300 python3 -m benchmarks.gpu_torch --device cuda --out "$OUT" 2>&1 | tail -24
fi

if has fold; then
  step "FOLD and SLICE_GRAD beside PyTorch"
  timeout 180 python3 benchmarks/gpu_fold.py --out "$OUT" 2>&1 | tail -12
fi

if has suite; then
  step "benchmark suite"
  timeout 300 python3 -m benchmarks --device cuda --out "$OUT" 2>/dev/null | tail -40
fi
step done
