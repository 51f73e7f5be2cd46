#!/usr/bin/env bash
# One GPU run for the host path (< 4 minutes on the 16-core GPU machine): build, the C
# measurements (bench_hostpath.c: copy pool, pinned DMA, registration, small round trips), the
# Python rows under every host strategy beside the floors and the peers (bench_hostpath.py), then
# the host path's GPU tests. Everything prints to stdout; logs of the builds go to $OUT (default
# /tmp/hostpath_out). Usage: bash bench/bench_hostpath.sh   (PYTHON=... to pick the interpreter)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/hostpath_out}; mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 CUFUNC_CACHE_DIR=${CUFUNC_CACHE_DIR:-/tmp/cufunc-cache}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo '+dirty'); $(nproc) CPUs; THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null); $(uname -r)"
lscpu 2>/dev/null | grep -E "Model name|Socket|NUMA node\(s\)" | tr -s ' '
t0=$SECONDS
# the extension and the C programs build at once (both compile src/)
$PY -m pip install -q --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 &
pip_pid=$!
{ cmake -S . -B build/hostpath -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$(command -v "$PY")" &&
  cmake --build build/hostpath -j 12 --target bench_hostpath test_hostpipe; } > "$OUT/cmake.log" 2>&1 ||
  { tail -40 "$OUT/cmake.log"; wait $pip_pid; exit 1; }
wait $pip_pid || { tail -40 "$OUT/build.log"; exit 1; }
echo "== built in $((SECONDS - t0)) s"
rc=0
echo "== bench_hostpath (C)"; timeout 90 build/hostpath/bench_hostpath --reps 5 || rc=1
echo "== bench_hostpath.py"; timeout 120 $PY bench/bench_hostpath.py --reps 7 || rc=1
echo "== tests (CUFUNC_REQUIRE_GPU=1)"
CUFUNC_REQUIRE_GPU=1 timeout 60 build/hostpath/test_hostpipe 2>&1 | grep -E "FAIL|SKIP|tests," || rc=1
CUFUNC_REQUIRE_GPU=1 timeout 100 $PY -m pytest -q -ra -p no:cacheprovider tests/python/test_hostpath.py \
  tests/python/test_hostpipe.py 2>&1 | grep -E "^(FAILED|ERROR)|passed|failed|Error" | head -40
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
echo "== done in $((SECONDS - t0)) s, rc=$rc"
exit $rc
