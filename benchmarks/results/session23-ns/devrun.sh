#!/usr/bin/env bash
# session 23, the ns helper's device call (run from /work/main's root, this tree in .devrun/ns): main and this
# branch built side by side; newshape_gpu --variants both on each, main first; layers_gpu.py on each; then
# this branch's CUDA tests of the never-seen routes.
set -uo pipefail
T0=$SECONDS
ROOT=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/device.log
python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])" | tee -a $OUT/device.log
for t in . .devrun/ns; do (cd $t && python3 setup.py -q build_ext --inplace > /tmp/b-$(basename $t).log 2>&1 || tail -20 /tmp/b-$(basename $t).log) & done
wait; echo "built $((SECONDS-T0)) s"
for t in . .devrun/ns; do (cd $t && PYTHONPATH=$PWD/src timeout 150 python3 -c "from opendml.arrays.torch import node; print('$t node', node.wait(150), node.status())" 2>&1 | tail -1) & done
wait; echo "nodes $((SECONDS-T0)) s"
L=.devrun/ns/benchmarks/results/session23-ns/layers_gpu.py
for t in main ns; do
  d=$ROOT; [ $t = ns ] && d=$ROOT/.devrun/ns
  mkdir -p $OUT/$t
  echo "== newshape_gpu $t ($((SECONDS-T0)) s)"
  (cd $d && PYTHONPATH=$d/src:$d timeout 85 python3 -m benchmarks.newshape_gpu --out $OUT/$t --budget 50 --variants both > $OUT/$t/ns.log 2>&1)
  grep -v -i warn $OUT/$t/ns.log | grep -E "both +(warm|fresh)|copy" | head -70
done
for t in main ns; do
  d=$ROOT; [ $t = ns ] && d=$ROOT/.devrun/ns
  echo "== layers $t ($((SECONDS-T0)) s)"
  (cd $d && PYTHONPATH=$d/src:$d timeout 40 python3 $ROOT/$L 40 7 2>&1 | grep -v -i warn | tee $OUT/$t/layers.log)
done
echo "== tests ($((SECONDS-T0)) s)"
(cd .devrun/ns && PYTHONPATH=$PWD/src:$PWD HYPOTHESIS_STORAGE_DIRECTORY=/tmp/hyp timeout 75 python3 -m pytest -q -p no:cacheprovider -m cuda -n 14 tests/test_family_cuda_new.py tests/test_index_cuda_new.py tests/test_family_cuda_cache.py tests/arrays/test_index_call_cache.py > $OUT/tests.log 2>&1; echo "tests rc=$?"; grep -E "^FAILED|^ERROR" $OUT/tests.log | head; tail -1 $OUT/tests.log)
echo "done $((SECONDS-T0)) s"
