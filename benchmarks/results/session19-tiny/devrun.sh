#!/bin/bash
# One device call: build both trees, CUDA tests of this tree, then A/B: repro rows (1,4,16,16) and gpu_train eager quick.
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
left() { [ $(( $(date +%s) - T0 )) -lt $1 ]; }
cd "$(dirname "$0")/.."
export OPENDML_TORCH_NODE=wait
echo "tree $(cat tiny/TREE_COMMIT), base $(cat tiny-base/BASE_COMMIT)"
(cd tiny && python3 setup.py -q build_ext --inplace > $OUT/build.log 2>&1; echo "rc=$?" >> $OUT/build.log) &
(cd tiny-base && python3 setup.py -q build_ext --inplace > $OUT/build-base.log 2>&1; echo "rc=$?" >> $OUT/build-base.log) &
(cd tiny && python3 bw.py)
wait; el built; tail -n1 $OUT/build.log $OUT/build-base.log
(cd tiny && PYTHONPATH=$PWD/src timeout 100 python3 -c "from opendml.arrays.torch import node; print(node.wait(95), node.status())" > $OUT/node.log 2>&1) &
(cd tiny-base && PYTHONPATH=$PWD/src timeout 100 python3 -c "from opendml.arrays.torch import node; print(node.wait(95), node.status())" > $OUT/node-base.log 2>&1) &
(cd tiny && PYTHONPATH=$PWD/src:$PWD timeout 70 python3 -m pytest -q -p no:cacheprovider -m cuda -x -n 6 tests/test_torch_node.py tests/arrays/test_call_cache.py tests/test_torch_api.py > $OUT/tests.log 2>&1; echo "tests rc=$?" >> $OUT/tests.log)
el tests; tail -n3 $OUT/tests.log
wait; el nodes; cat $OUT/node.log $OUT/node-base.log
tiny() { (cd $1 && PYTHONPATH=$PWD/src:$PWD timeout 40 python3 ../tiny/tiny_ab.py > $OUT/repro-$2.log 2>&1); el repro-$2; cat $OUT/repro-$2.log; }
gt() { (cd $1 && PYTHONPATH=$PWD/src:$PWD timeout 25 python3 -m benchmarks.gpu_train --parts eager --quick --out $OUT/gt-$2 > $OUT/gt-$2.log 2>&1); el gt-$2; grep -E "^eager|^device" $OUT/gt-$2.log; }
tiny tiny new-1; tiny tiny-base base-1
gt tiny new-1; gt tiny-base base-1
if left 70; then tiny tiny new-2; tiny tiny-base base-2; fi
if left 108; then gt tiny new-2; gt tiny-base base-2; fi
el done
