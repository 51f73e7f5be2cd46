#!/bin/bash
# Gufuncs with small core dimensions: one GPU run (< 5 min on the 16-core box) that
#   1. builds and installs cufunc from this checkout,
#   2. runs the gufunc tests on the GPU (C test_gufunc, then pytest with CUFUNC_REQUIRE_GPU=1),
#   3. runs bench/bench_guvectorize.py twice in separate processes: CUFUNC_GU_SMALL=0 (the plans
#      before the flat tiles) and the default (flat tiles), each with its own copy bandwidth.
# Usage: bash bench/gusmall_check.sh        (PYTHON=... to choose the interpreter; REPS=7)
set -u -o pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
REPS=${REPS:-7}
rc=0
echo "== build"
$PY -m pip install -q --no-build-isolation --no-deps . || exit 1
echo "== C test_gufunc"
if cmake -S . -B build/cmake -DPython3_EXECUTABLE="$(command -v $PY)" >/dev/null &&
   cmake --build build/cmake -j16 --target test_gufunc >/dev/null; then
    CUFUNC_REQUIRE_GPU=1 timeout 120 ./build/cmake/test_gufunc 2>&1 | tail -4 || rc=1
else
    echo "test_gufunc: build failed"; rc=1
fi
echo "== pytest (gufunc tests, CUFUNC_REQUIRE_GPU=1)"
XDIST=""
$PY -c "import xdist" 2>/dev/null && XDIST="-n 8"
CUFUNC_REQUIRE_GPU=1 timeout 240 $PY -m pytest -q $XDIST -p no:cacheprovider \
    tests/python/test_guvectorize_small.py tests/python/test_guvectorize.py \
    tests/python/test_guvectorize_numba_habits.py tests/python/test_gufunc_scalars.py 2>&1 |
    tail -6 || rc=1
for small in 0 1; do
    echo "== bench_guvectorize.py, CUFUNC_GU_SMALL=$small"
    CUFUNC_GU_SMALL=$small timeout 200 $PY bench/bench_guvectorize.py --reps "$REPS" 2>&1 |
        grep -v "^$" | tail -24 || rc=1
done
exit $rc
