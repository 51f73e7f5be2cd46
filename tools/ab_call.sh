#!/usr/bin/env bash
# The one-element call time of an older build beside this one, in alternating fresh processes:
# the figure a change to the call path can move, measured finer than tools/ab_bench.sh does
# (no peers imported, many processes, the order swapped every round so that a drift of the card
# or the host falls on both versions alike).
#   bash tools/ab_call.sh OLD_TREE [ROUNDS]     (default 12 rounds: 24 processes)
# Each process: 2000 warm-up calls, then the median of 9 batches of 5000 `hypot(a, b, out=o)` on
# 1-element float32 device arrays, in microseconds per call. Log: $OUT (default /tmp/ab_out).
set -uo pipefail
cd "$(dirname "$0")/.."
OLD=$(cd "${1:?usage: tools/ab_call.sh OLD_TREE [ROUNDS]}" && pwd)
ROUNDS=${2:-12}
OUT=${OUT:-/tmp/ab_out}; mkdir -p "$OUT"
. tools/ab_build.sh
PROBE=$(mktemp -d)/one_call.py
cat > "$PROBE" <<'PY'
import math, time
import numpy as np
from cufunc import cuda, vectorize

@vectorize(["float32(float32, float32)"])
def hypot(x, y):
    return math.sqrt(x * x + y * y)

a, b, o = (cuda.to_device(np.ones(1, np.float32)) for _ in range(3))
for _ in range(2000):
    hypot(a, b, out=o)
cuda.synchronize()
batches = []
for _ in range(9):
    t = time.perf_counter()
    for _ in range(5000):
        hypot(a, b, out=o)
    cuda.synchronize()
    batches.append((time.perf_counter() - t) / 5000 * 1e6)
print("%.3f" % sorted(batches)[4])
PY
: > "$OUT/ab_call.txt"
for i in $(seq 1 "$ROUNDS"); do
  if [ $((i % 2)) = 0 ]; then order="new old"; else order="old new"; fi
  for v in $order; do
    if [ "$v" = old ]; then pp=$OLD_SITE; else pp=""; fi
    us=$(cd "$(dirname "$PROBE")" && PYTHONPATH=$pp CUFUNC_CACHE_DIR=/tmp/ab_cache_$v \
         python3 "$PROBE" 2>&1 | tail -1)
    echo "$i $v $us" | tee -a "$OUT/ab_call.txt"
  done
done
python3 - "$OUT/ab_call.txt" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
for v in ("old", "new"):
    xs = [float(r[2]) for r in rows if r[1] == v]
    print("%s: median %.3f us, mean %.3f, least %.3f (%d processes)"
          % (v, statistics.median(xs), statistics.mean(xs), min(xs), len(xs)))
PY
