#!/usr/bin/env bash
# The one-element call on CuPy arrays and torch tensors: one GPU run (< 4 minutes) that
# builds, runs the interop GPU tests, then the benchmark and the per-piece profile.
#   bash bench/interop_check.sh        (logs in $OUT, or /tmp/interop_out)
# Prints: the test summary lines, bench/bench_interop.py's table (the target: each foreign call
# within 1.3x of the DeviceArray call, beside cp.hypot and torch.hypot) and prof_interop.py's
# pieces (the readers and wrappers alone).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/interop_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 CUFUNC_REQUIRE_GPU=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export CUFUNC_CACHE_DIR=${CUFUNC_CACHE_DIR:-/tmp/cufunc-cache}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo '+dirty')"
python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__)" 2>&1 | tail -1
python3 -m pip install -q --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 ||
  { tail -50 "$OUT/build.log"; exit 1; }
rc=0
timeout 170 python3 -m pytest -q -ra -p no:cacheprovider tests/python/test_interop_fast.py \
  tests/python/test_devicearray_interop.py tests/python/test_result_types.py \
  tests/python/test_stream_order.py "tests/python/test_float16.py::test_gpu_bfloat16_torch_dlpack" \
  > "$OUT/pytest.log" 2>&1 || rc=1
timeout 60 python3 -m pytest -q -ra -p no:cacheprovider tests/python/test_vectorize.py \
  tests/python/test_overlap.py -k "torch or cupy or foreign or cai" >> "$OUT/pytest.log" 2>&1 || rc=1
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -40; grep -E "passed|failed" "$OUT/pytest.log" | tail -2
echo "== bench/bench_interop.py"
timeout 60 python3 bench/bench_interop.py 2>&1 | tee "$OUT/bench_interop.txt" | tail -14 || rc=1
echo "== bench/prof_interop.py"
timeout 60 python3 bench/prof_interop.py 2>&1 | tee "$OUT/prof_interop.txt" | tail -45 || rc=1
echo "== bench/prof_interop_cpu.py"
timeout 30 python3 bench/prof_interop_cpu.py 2>&1 | tail -20
exit $rc
