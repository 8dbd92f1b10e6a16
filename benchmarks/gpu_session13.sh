#!/usr/bin/env bash
# Session 13's device call (issue 33), run from the built tree with PYTHONPATH set: the CUDA-marked tests of
# TESTS (TEST_S; K: a -k filter), benchmarks/gpu_h200.py (H200_S; H200_ARGS), the new-shape route reproducer
# in a fresh opendml cache folder (NS_S; repro/newshape_routes.py beside this tree's root, when present), and
# the tiny training step reproducer (TINY_S; repro/eager_tiny.py). 0 skips a step. Logs land in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export HYPOTHESIS_STORAGE_DIRECTORY=/tmp/hyp
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/device.log"
python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])" | tee -a "$OUT/device.log"
if [ "${TEST_S:-150}" != 0 ]; then
    timeout ${TEST_S:-150} python3 -m pytest -q -p no:cacheprovider -m cuda --maxfail=10 ${K:+-k "$K"} ${TESTS:-tests/runtime} > "$OUT/gpu-tests.log" 2>&1
    echo "tests rc=$?"; grep -E "passed|failed|Error|error" "$OUT/gpu-tests.log" | tail -12
fi
if [ "${H200_S:-200}" != 0 ]; then
    timeout ${H200_S:-200} python3 -m benchmarks.gpu_h200 --out "$OUT" ${H200_ARGS:-} 2>&1 | grep -v -i warn | tee "$OUT/gpu-h200.log"
fi
if [ "${NS_S:-120}" != 0 ] && [ -f repro/newshape_routes.py ]; then
    export OPENDML_CACHE_DIR=$(mktemp -d)
    timeout ${NS_S:-120} python3 repro/newshape_routes.py 2>&1 | grep -v -i warn | tee "$OUT/newshape.log"
    echo "--- again, the node library cached" | tee -a "$OUT/newshape.log"
    python3 -c "import opendml.torch as t; print('node', t.wait_for_node(), t.node_status())" 2>&1 | tail -1 | tee -a "$OUT/newshape.log"
    unset OPENDML_CACHE_DIR
fi
if [ "${TINY_S:-0}" != 0 ] && [ -f repro/eager_tiny.py ]; then
    timeout ${TINY_S} python3 repro/eager_tiny.py 2>&1 | grep -v -i warn | tee "$OUT/tiny.log"
fi
