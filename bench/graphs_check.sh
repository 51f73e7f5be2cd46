#!/usr/bin/env bash
# CUDA graphs: one GPU run that builds this tree (and, when given, an older tree beside it), runs
# the capture tests and the related suites, then bench/bench_graphs.py and the eager per-call A/B.
#   bash bench/graphs_check.sh [OLD_TREE]      (logs in $OUT, or /tmp/graphs_out)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/graphs_out}; mkdir -p "$OUT"
OLD=${1:-}
export PYTHONUNBUFFERED=1 CUFUNC_REQUIRE_GPU=1 CUFUNC_CACHE_DIR=${CUFUNC_CACHE_DIR:-/tmp/cufunc-cache}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__)" 2>&1 | tail -1
python3 -m pip install -q --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 ||
  { tail -50 "$OUT/build.log"; exit 1; }
if [ -n "$OLD" ]; then
  (cd "$OLD" && python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/cf_old . \
     > "$OUT/build_old.log" 2>&1) || { tail -30 "$OUT/build_old.log"; OLD=; }
fi
rc=0
# the cuda.core test in a process of its own: importing cuda.core collects garbage
for sel in "not cuda_core" "cuda_core"; do
  timeout 150 python3 -m pytest -q -ra --tb=short -p no:cacheprovider \
    tests/python/test_graph_capture.py -k "$sel" >> "$OUT/pytest_graphs.log" 2>&1 || rc=1
done
grep -E "^(FAILED|ERROR|SKIPPED)" "$OUT/pytest_graphs.log" | head -40
grep -E "passed|failed" "$OUT/pytest_graphs.log" | tail -2
[ ${SHOW_TB:-0} = 1 ] && grep -B2 -A25 -E "^_{5,} test_" "$OUT/pytest_graphs.log" | head -${SHOW_TB_LINES:-200}
[ ${SKIP_RELATED:-0} = 1 ] || timeout 200 python3 -m pytest -q -ra -x -p no:cacheprovider tests/python/test_stream_order.py \
  tests/python/test_interop_fast.py tests/python/test_reduce.py tests/python/test_ufunc_at.py \
  tests/python/test_ufunc_reduce.py tests/python/test_devicearray_interop.py \
  tests/python/test_result_types.py > "$OUT/pytest_related.log" 2>&1 || rc=1
grep -E "^(FAILED|ERROR)" "$OUT/pytest_related.log" | head -30
grep -E "passed|failed" "$OUT/pytest_related.log" | tail -2
if [ ${CTEST:-0} = 1 ]; then
  (cmake -S . -B /tmp/cf_cmake -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$OUT/cmake.log" 2>&1 &&
   cmake --build /tmp/cf_cmake -j 16 --target test_graph test_stream >> "$OUT/cmake.log" 2>&1 &&
   ctest --test-dir /tmp/cf_cmake --output-on-failure -R "^test_(graph|stream)$" \
     > "$OUT/ctest.log" 2>&1) || rc=1
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/ctest.log" | head; tail -3 "$OUT/cmake.log"
fi
echo "== bench/bench_graphs.py"
timeout 120 python3 bench/bench_graphs.py 2>&1 | tee "$OUT/bench_graphs.txt" || rc=1
if [ -n "$OLD" ]; then
  echo "== eager per call, old (main) and new, alternating"
  for i in 1 2 3; do
    echo "-- old"; PYTHONPATH=/tmp/cf_old timeout 60 python3 bench/bench_graphs.py --eager-only 2>&1
    echo "-- new"; timeout 60 python3 bench/bench_graphs.py --eager-only 2>&1
  done | tee "$OUT/eager_ab.txt"
fi
exit $rc
