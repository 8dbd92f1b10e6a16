#!/bin/bash
# Call 2: build, the family benchmark with move_padr variants, CUDA tests of the move kernels, the tiny step.
cd .devrun/gpuspeed
export PYTHONUNBUFFERED=1
( time python3 setup.py -q build_ext --inplace -j 16 ) > $OUT/build.log 2>&1
export PYTHONPATH=$PWD/src:$PWD
( python3 -c "from opendml.arrays.torch import node; print(node.wait(300), node.status())" > $OUT/node.log 2>&1 & )
T=../gpuspeed_tools
timeout 75 python3 -m benchmarks.gpu_h200 --out $OUT --reps 7 --variants --pad-rows "2,5,1;2,6,2;2,8,3;1,8,3" > $OUT/h200.log 2>&1
cat $OUT/h200.log | cut -c1-150
python3 $T/choose.py $OUT/gpu-h200.json
timeout 85 python3 -m pytest -q -p no:cacheprovider -m cuda -n 8 --dist loadfile tests/runtime/test_cuda_move.py tests/runtime/test_cuda.py tests/test_family_cuda_cache.py tests/test_family_frameworks.py > $OUT/tests.log 2>&1
echo "tests rc=$?"; tail -4 $OUT/tests.log
timeout 25 python3 $T/tiny.py > $OUT/tiny.log 2>&1; cat $OUT/tiny.log
timeout 30 python3 ../repro/eager_tiny.py > $OUT/eager_tiny.log 2>&1; cat $OUT/eager_tiny.log
timeout 25 python3 -m benchmarks.gpu_train --parts eager --quick --out /tmp/train > $OUT/train.log 2>&1; tail -12 $OUT/train.log
