#!/usr/bin/env bash
# Session 9's device calls (BUILD=1 rebuilds the C extension). MODE=tests: build, the C++ node (timed), every
# CUDA-marked test (TESTS overrides). MODE=bench: benchmarks/gpu_train.py
# (PARTS), benchmarks/gpu_family_small.py, the compiled-operator probe, and
# benchmarks/gpu_family.py where FAMILY=1. MODE=both: the tests, then
# gpu_train (PARTS). Logs land in $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src:$PWD" HYPOTHESIS_STORAGE_DIRECTORY=/tmp/hyp
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git log --oneline -1 2>/dev/null
# REVERT="paths": put those files back to git HEAD of the copy's .git first (where it is current)
if [ -n "${REVERT:-}" ]; then git checkout -q HEAD -- ${REVERT} && echo "reverted ${REVERT}"; fi
if [ "${BUILD:-0}" = 1 ]; then
  python3 setup.py -q build_ext --inplace --force > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
fi
if ! python3 -c "import opendml.runtime.cpu._native" 2>/dev/null; then
  python3 -m pip install -e . --no-build-isolation --no-deps -q > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
fi
python3 -c "import time, opendml.torch as t; t0 = time.time(); ok = t.wait_for_node(); print('node', ok, t.node_status(), f'{time.time() - t0:.1f} s')" 2>&1 | tail -3
if [ "${MODE:-tests}" = both ]; then
  timeout ${TEST_S:-300} python3 -m pytest -q -p no:cacheprovider -m cuda --maxfail=25 ${TESTS:-tests} > "$OUT/gpu-tests.log" 2>&1
  echo "tests rc=$?"; grep -E "passed|failed|Error" "$OUT/gpu-tests.log" | tail -8
  timeout ${TRAIN_S:-330} python3 -m benchmarks.gpu_train --device cuda --parts ${PARTS:-eager,compiled,new,warm} --out "$OUT" 2>&1 | grep -v -i warn | tee "$OUT/train.log"
elif [ "${MODE:-tests}" = tests ]; then
  timeout ${TEST_S:-400} python3 -m pytest -q -p no:cacheprovider -m cuda --maxfail=25 ${TESTS:-tests} > "$OUT/gpu-tests.log" 2>&1
  echo "tests rc=$?"; grep -E "passed|failed|Error" "$OUT/gpu-tests.log" | tail -8
else
  timeout ${TRAIN_S:-330} python3 -m benchmarks.gpu_train --device cuda --parts ${PARTS:-eager,compiled,new,warm} --out "$OUT" 2>&1 | grep -v -i warn | tee "$OUT/train.log"
  timeout ${SMALL_S:-150} python3 -m benchmarks.gpu_family_small --out "$OUT" 2>&1 | grep -v -i warn | tee "$OUT/family-small.log"
  timeout ${PROBE_S:-120} python3 benchmarks/profiles/compiled_op_probe.py 2>&1 | grep -v -i warn | tee "$OUT/compiled-probe.log"
  if [ "${FAMILY:-0}" = 1 ]; then timeout ${FAMILY_S:-200} python3 -m benchmarks.gpu_family --out "$OUT" 2>&1 | grep -v -i warn | tee "$OUT/family.log"; fi
fi
