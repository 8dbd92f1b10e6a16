#!/usr/bin/env bash
# Session 7's device call: build, the C++ autograd node (built for the
# device's PyTorch, timed), the CUDA tests of the torch routes, then
# benchmarks/gpu_train.py (PARTS, default every part). Logs land in $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src:$PWD" HYPOTHESIS_STORAGE_DIRECTORY=/tmp/hyp
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m pip install -e . --no-build-isolation --no-deps -q > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
python3 -c "import time, opendml.torch as t; t0 = time.time(); ok = t.wait_for_node(); print('node', ok, t.node_status(), f'{time.time() - t0:.1f} s')" 2>&1 | tail -3
timeout ${TEST_S:-240} python3 -m pytest -q -p no:cacheprovider -m cuda ${TESTS:-tests/test_torch_node.py tests/test_torch_autodiff.py tests/test_torch.py} > "$OUT/gpu-tests.log" 2>&1
echo "tests rc=$?"; tail -4 "$OUT/gpu-tests.log"
timeout ${TRAIN_S:-300} python3 -m benchmarks.gpu_train --device cuda --parts ${PARTS:-eager,compiled,new,warm} --out "$OUT" 2>&1 | grep -v -i warn | tee "$OUT/train.log"
