if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl; export PYTHONPATH=/tmp/site; fi
# Dask in one device call, under 3 minutes: the build, the Dask tests with
# CUFUNC_REQUIRE_GPU=1 (GPU tests fail instead of skipping), then bench/bench_dask.py (hypot over
# 2^28 float32 in 16 CuPy chunks, threaded scheduler: the graph table, the timing table and the
# summary lines) and its --host rows (the CPU side alone, NumPy chunks). Logs in $OUT
# (default /tmp/dask_out).
#   bash bench/dask_check.sh
# (The first line is the wheel step as the lead's device calls want it: the GPU box has no network.)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/dask_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 CUFUNC_REQUIRE_GPU=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export CUFUNC_CACHE_DIR=${CUFUNC_CACHE_DIR:-/tmp/cufunc-cache}
t0=$(date +%s)
step() { echo "== [$(( $(date +%s) - t0 ))s] $*"; }
rc=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo '+dirty')"
python3 -c "
import importlib
for m in ('dask', 'cupy', 'xarray'):
    try:
        print(m, importlib.import_module(m).__version__)
    except ImportError as e:
        print(m, 'MISSING:', e)"

step "build"
python3 -m pip install -q --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 ||
  { tail -50 "$OUT/build.log"; exit 1; }

step "tests (test_dask_graph.py, test_dask_xarray.py; xarray's file skips whole without xarray)"
timeout 100 python3 -m pytest -q -ra -p no:cacheprovider tests/python/test_dask_graph.py \
  tests/python/test_dask_xarray.py > "$OUT/pytest.log" 2>&1 || rc=1
grep -E "^(FAILED|ERROR|SKIPPED)" "$OUT/pytest.log" | head -40
grep -E "passed|failed|error" "$OUT/pytest.log" | tail -2

step "bench/bench_dask.py"
timeout 60 python3 bench/bench_dask.py 2>&1 | tee "$OUT/bench_dask.txt" || rc=1

step "bench/bench_dask.py --host (CPU side, NumPy chunks)"
timeout 30 python3 bench/bench_dask.py --host 2>&1 | tee "$OUT/bench_dask_host.txt" || rc=1
step "done (rc=$rc)"
exit $rc
