#!/usr/bin/env bash
# Session 16's final device call, run from the built tree with PYTHONPATH set: every CUDA-marked test
# (TEST_S seconds), benchmarks/gpu_h200.py (H200_S: the family on 256 MiB tensors; H200_ARGS more arguments), benchmarks/gpu_index.py (INDEX_S), benchmarks/newshape_gpu.py (NS_S; its own --budget),
# and the tiny training step reproducer when repro/eager_tiny.py sits beside the tree (TINY_S). 0 skips a
# step. Logs land in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export HYPOTHESIS_STORAGE_DIRECTORY=/tmp/hyp
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/device.log"
python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])" | tee -a "$OUT/device.log"
# the C++ autograd node built (about half a minute, in the background) before anything is timed
(OPENDML_TORCH_NODE=wait timeout 200 python3 -c "from opendml.arrays.torch import node; print('node', node.wait(200), node.status())" \
    > "$OUT/node.log" 2>&1) &
if [ "${TEST_S:-190}" != 0 ]; then
    timeout ${TEST_S:-190} python3 -m pytest -q -p no:cacheprovider -m cuda -n 8 --dist loadfile ${TESTS:-tests} \
        > "$OUT/gpu-tests.log" 2>&1
    echo "tests rc=$?"; grep -E "^FAILED|^ERROR|passed|failed" "$OUT/gpu-tests.log" | tail -15
fi
wait; cat "$OUT/node.log"
if [ "${H200_S:-70}" != 0 ]; then
    timeout ${H200_S:-70} python3 -m benchmarks.gpu_h200 --out "$OUT" --reps 10 ${H200_ARGS:-} 2>&1 | grep -v -i warn \
        | tee "$OUT/gpu-h200.log" | tail -40
fi
if [ "${INDEX_S:-90}" != 0 ]; then
    timeout ${INDEX_S:-90} python3 -m benchmarks.gpu_index --out "$OUT" --reps 5 2>&1 | grep -v -i warn \
        | tee "$OUT/gpu-index.log" | tail -40
fi
if [ "${TINY_S:-50}" != 0 ] && [ -f repro/eager_tiny.py ]; then
    timeout ${TINY_S:-50} python3 repro/eager_tiny.py 2>&1 | grep -v -i warn | tee "$OUT/tiny.log"
fi
if [ "${TRAIN_S:-30}" != 0 ]; then                # the project's own tiny-step method
    timeout ${TRAIN_S:-30} python3 -m benchmarks.gpu_train --parts eager --quick --out "$OUT/train" 2>&1 \
        | grep -v -i warn | tee "$OUT/gpu-train.log" | tail -20
fi
if [ "${NS_S:-200}" != 0 ]; then
    timeout $((${NS_S:-200} + 30)) python3 -m benchmarks.newshape_gpu --out "$OUT" --budget ${NS_S:-200} 2>&1 \
        | grep -v -i warn | tee "$OUT/newshape-gpu.log" | tail -60
fi
