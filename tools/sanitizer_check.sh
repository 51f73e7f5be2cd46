#!/usr/bin/env bash
# compute-sanitizer over a spread of cufunc kernels (tools/sanitizer_workload.py): memcheck (with
# CUDA API errors reported, so a driver call of cufunc's that fails, however harmlessly, counts),
# racecheck, synccheck and initcheck. Passes only with 0 errors from every tool and right results.
# On the GPU machine, from the repository root, after cufunc is installed:
#   bash tools/sanitizer_check.sh            (logs under $OUT or /tmp/gpu_out)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT"
CS=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
[ -x "$CS" ] || { echo "compute-sanitizer not found"; exit 1; }
# A cache of its own, filled first: the sanitizer then sees cache hits too, and its runs stay short.
export CUFUNC_CACHE_DIR=$(mktemp -d /tmp/cufunc-san-cache.XXXXXX)
python3 tools/sanitizer_workload.py > "$OUT/sanitizer_warm.log" 2>&1 || { echo "workload failed"; tail -20 "$OUT/sanitizer_warm.log"; exit 1; }
rc=0
for tool in memcheck racecheck synccheck initcheck; do
  extra=()
  [ "$tool" = memcheck ] && extra=(--report-api-errors all --leak-check no)
  "$CS" --tool "$tool" "${extra[@]}" --error-exitcode 99 python3 tools/sanitizer_workload.py \
    > "$OUT/sanitizer_$tool.log" 2>&1
  c=$?
  summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizer_$tool.log" | tail -1)
  echo "sanitizer $tool: rc=$c ${summary:-no summary line}"
  if [ $c -ne 0 ]; then rc=1; grep -m 30 -E "^=========|WRONG" "$OUT/sanitizer_$tool.log"; fi
done
rm -rf "$CUFUNC_CACHE_DIR"
exit $rc
