#!/usr/bin/env bash
# GPU profiling pass (for the device tool): install, then ncu on the named workloads of
# bench/prof_kernels.py (one launch each). Reports go to $OUT/ncu_<workload>.txt.
# Usage: bash tools/prof_run.sh rowsum:cf_gu accumulate:cf_reduce transposed:cf_ew
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 CUFUNC_CACHE_DIR=${CUFUNC_CACHE_DIR:-/tmp/cufunc-cache}
python3 -m pip install -q --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
for spec in "$@"; do
  w=${spec%%:*}; k=${spec#*:}
  python3 bench/prof_kernels.py "$w" >/dev/null 2>&1   # compile once, outside the profiler
  timeout 240 ncu --kernel-name "$k" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section SchedulerStats \
    python3 bench/prof_kernels.py "$w" > "$OUT/ncu_$w.txt" 2>&1
  echo "== $w rc=$?"; grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Warp Cycles Per Issued|Stall|Eligible|Issued Warp|Shared Memory Configuration Size|Dynamic Shared|Static Shared" "$OUT/ncu_$w.txt" | head -30
done
