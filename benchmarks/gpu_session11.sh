#!/usr/bin/env bash
# Session 11's device call (session 10's, with a sweep step), one lending: build, the C++ node library (timed),
# the UNFOLD box sweep (sweep_unfold.py with SWEEP_ARGS; skipped when empty),
# the compiled layer's wrapper probe (profiles/compiled_wrapper_probe.py), the
# CUDA-marked tests of TESTS, benchmarks/gpu_train.py (PARTS), then, when
# REGRESS_S is set, the rows issue 19 asks to keep (gpu_torch.py: host cost,
# window, im2col training steps; jax_ops.py on the GPU). Each step has its own
# time limit (SWEEP_S, PROBE_S, TEST_S, TRAIN_S, REGRESS_S; 0 skips). Logs land
# in $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src:$PWD" HYPOTHESIS_STORAGE_DIRECTORY=/tmp/hyp
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
python3 -m pip install -e . --no-build-isolation --no-deps -q > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
python3 -c "import time, opendml.torch as t; t0 = time.time(); ok = t.wait_for_node(); print('node', ok, t.node_status(), f'{time.time() - t0:.1f} s')" 2>&1 | tail -3
if [ -n "${SWEEP_ARGS:-}" ]; then
    timeout ${SWEEP_S:-120} python3 benchmarks/sweep_unfold.py $SWEEP_ARGS 2>&1 | grep -v -i warn | tee "$OUT/sweep.log"
fi
if [ "${PROBE_S:-100}" != 0 ]; then
    timeout ${PROBE_S:-100} python3 benchmarks/profiles/compiled_wrapper_probe.py 2>&1 | grep -v -i warn | tee "$OUT/probe.log"
fi
if [ "${TEST_S:-150}" != 0 ]; then
    timeout ${TEST_S:-150} python3 -m pytest -q -p no:cacheprovider -m cuda --maxfail=10 ${TESTS:-tests/arrays/test_torch_inductor.py} > "$OUT/gpu-tests.log" 2>&1
    echo "tests rc=$?"; grep -E "passed|failed|Error" "$OUT/gpu-tests.log" | tail -8
fi
if [ "${TRAIN_S:-300}" != 0 ]; then
    timeout ${TRAIN_S:-300} python3 -m benchmarks.gpu_train --device cuda --parts ${PARTS:-eager,compiled,new,warm} --out "$OUT" 2>&1 | grep -v -i warn | tee "$OUT/train.log"
fi
if [ -n "${REGRESS_S:-}" ] && [ "$REGRESS_S" != 0 ]; then
    timeout "$REGRESS_S" python3 -m benchmarks.gpu_torch --device cuda --out "$OUT" 2>&1 | grep -v -i warn | tee "$OUT/gpu-torch.log"
    timeout "$REGRESS_S" python3 -m benchmarks.jax_ops --device gpu --out "$OUT" 2>&1 | grep -v -i warn | tee "$OUT/jax.log"
fi
