#!/usr/bin/env bash
# One device call: GPU tests, properties on CUDA, compute-sanitizer, benchmarks.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src:$PWD" HYPOTHESIS_STORAGE_DIRECTORY=/tmp/hyp
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import cupy, torch, jax, numpy; print('cupy', cupy.__version__, 'torch', torch.__version__, 'jax', jax.__version__, 'numpy', numpy.__version__)"
(python3 setup.py -q build_ext --inplace >/dev/null 2>&1 && echo "built CPU kernels") || echo "CPU kernels not built"
python3 -m opendml.cli info
python3 -m pytest -q -p no:cacheprovider -m cuda tests 2>&1 | tee "$OUT/gpu-tests.log" | tail -25
python3 -m pytest -q -p no:cacheprovider -k cuda tests/test_properties.py tests/test_examples.py tests/test_device.py 2>&1 | tee "$OUT/gpu-props.log" | tail -25
compute-sanitizer --tool memcheck --leak-check no python3 benchmarks/sanitize.py 2>&1 | tail -6 | tee "$OUT/sanitizer.log"
python3 benchmarks/sweep_copy.py 2>&1 | tail -44
python3 benchmarks/sweep_unfold.py 2>&1 | tail -60
python3 -m benchmarks --device cuda --out "$OUT" 2>/dev/null
