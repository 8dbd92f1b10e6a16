#!/usr/bin/env bash
# session 22, the tiny helper's device call (from .devrun/tiny): build, the direct-launch tests, the tiny step
# by the repro's method with direct launches on/off, gpu_train's eager rows, then CUDA tests while time is left
set -uo pipefail
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
export PYTHONPATH=$PWD/src:$PWD HYPOTHESIS_STORAGE_DIRECTORY=/tmp/hyp
mkdir -p repro && cp .devrun/repro/*.py repro/ 2>/dev/null || cp ../repro/*.py repro/
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
(OPENDML_TORCH_NODE=wait timeout 150 python3 -c "from opendml.arrays.torch import node; print('node', node.wait(150), node.status())" > $OUT/node.log 2>&1) &
python3 setup.py -q build_ext --inplace > $OUT/build.log 2>&1; el "build rc=$?"
wait; el "$(tail -1 $OUT/node.log)"
timeout 25 python3 -m pytest -q -p no:cacheprovider -m cuda tests/test_torch_node.py -k "direct or never_planned" > $OUT/direct-tests.log 2>&1
el "direct tests rc=$?"; grep -E "^FAILED|^ERROR|passed|failed" $OUT/direct-tests.log | tail -8
timeout 20 python3 -m benchmarks.gpu_train --parts eager --quick --out $OUT/train 2>&1 | grep -v -i warn > $OUT/gpu-train.log; el "gpu_train"; tail -12 $OUT/gpu-train.log
timeout 35 python3 benchmarks/results/session22-tiny/tiny_ab.py 1 2>&1 | grep -v -i warn > $OUT/tiny-ab.log; el "tiny_ab"; cat $OUT/tiny-ab.log
timeout ${TEST_S:-60} python3 -m pytest -q -p no:cacheprovider -m cuda -n 8 tests/test_torch.py tests/arrays tests/test_torch_node.py tests/test_torch_api.py > $OUT/gpu-tests.log 2>&1
el "tests rc=$?"; grep -E "^FAILED|^ERROR" $OUT/gpu-tests.log | head -20; tail -2 $OUT/gpu-tests.log
