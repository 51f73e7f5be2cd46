#!/usr/bin/env bash
# Before/after speed in one GPU run ("speed unchanged or better" after a restructuring): an older source tree
# is built beside this one and the same benchmarks run against each, one after the other, so both
# figures come from the same card, driver and host. Each version runs its own bench/ scripts (the
# figures' definitions did not change; the older scripts know the older API).
#   bash tools/ab_bench.sh OLD_TREE [ORDER] [BENCH ...]
#     OLD_TREE  a source tree of the older version (e.g. `git worktree add /tmp/old <commit>`)
#     ORDER     old,new (default) or new,old: run a second call in the other order (ABBA)
#     BENCH     benchmark scripts (default: bench_call_overhead bench_vectorize bench_reduce
#               bench_guvectorize), run with --reps 7 where they take it
# Logs: $OUT (default /tmp/ab_out)/<version>_<bench>.log; the tables print to stdout.
set -uo pipefail
cd "$(dirname "$0")/.."
OLD=$(cd "${1:?usage: tools/ab_bench.sh OLD_TREE [ORDER] [BENCH ...]}" && pwd)
ORDER=${2:-old,new}; shift 2 2>/dev/null || shift $#
BENCHES=${*:-bench_call_overhead bench_vectorize bench_reduce bench_guvectorize}
OUT=${OUT:-/tmp/ab_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "new: $(git rev-parse --short HEAD 2>/dev/null || echo unknown); old: $OLD"
. tools/ab_build.sh
rc=0
for b in $BENCHES; do
  for v in ${ORDER//,/ }; do
    if [ "$v" = old ]; then tree=$OLD; pp=$OLD_SITE${PYTHONPATH:+:$PYTHONPATH}
    else tree=$PWD; pp=${PYTHONPATH:-}; fi
    # a script the older tree does not have (one written since, against the public API only)
    # runs from this tree against the older build
    [ -f "$tree/bench/$b.py" ] || tree=$PWD
    reps=""; grep -q -- '"--reps"' "$tree/bench/$b.py" && reps="--reps 7"
    echo "== $v $b"
    # each version its own kernel cache: the warm-cache figures then measure that version
    (cd "$tree/bench" && PYTHONPATH=$pp CUFUNC_CACHE_DIR=/tmp/ab_cache_$v timeout 200 \
       python3 "$b.py" $reps) > "$OUT/${v}_$b.log" 2>&1 || { echo "($v $b failed)"; rc=1; }
    grep -E "^\|" "$OUT/${v}_$b.log" | grep -v -- "---" | head -40
  done
done
exit $rc
