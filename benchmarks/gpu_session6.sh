#!/usr/bin/env bash
# Session 6's device call: build, the CUDA tests of the routes this session
# changed (eager autograd and forward AD, argument snapshots, call cache,
# runtime and hostile-input tests, the family on CUDA), then benchmarks/gpu_train.py and the host
# cost / training-step rows of benchmarks/gpu_torch.py. Logs land in $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src:$PWD" HYPOTHESIS_STORAGE_DIRECTORY=/tmp/hyp
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m pip install -e . --no-build-isolation --no-deps -q > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
timeout ${TEST_S:-300} python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_torch_autodiff.py tests/test_torch.py \
    tests/arrays/test_snapshot.py tests/arrays/test_call_cache.py tests/runtime tests/test_family_frameworks.py \
    tests/test_family_examples.py tests/test_family_properties.py tests/test_examples.py > "$OUT/gpu-tests.log" 2>&1
echo "tests rc=$?"; tail -15 "$OUT/gpu-tests.log"
timeout ${TRAIN_S:-200} python3 -m benchmarks.gpu_train --device cuda --out "$OUT" 2>&1 | grep -v -i warn | tee "$OUT/train.log"
timeout ${TORCH_S:-120} python3 -m benchmarks.gpu_torch --device cuda --out "$OUT" > "$OUT/gpu-torch.log" 2>&1
echo "gpu_torch rc=$?"; grep -i -E "slice1|unfold|step|window" "$OUT/gpu-torch.log" | head -30
