#!/usr/bin/env bash
# One batched GPU run (for the device tool): build, the whole test suite with CUFUNC_REQUIRE_GPU=1,
# the demo and the benchmarks. Logs go to $OUT (or /tmp/gpu_out). Usage:
#   bash tools/gpu_check.sh [tests|examples|sanitize|bench|all] [extra pytest args...]
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}; shift || true
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 CUFUNC_REQUIRE_GPU=1
export CUFUNC_CACHE_DIR=${CUFUNC_CACHE_DIR:-/tmp/cufunc-cache}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo '+dirty')" | tee -a "$OUT/gpu.txt"

python3 -m pip install -q --no-build-isolation --no-deps . > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; }
rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  cmake -S . -B build/cmake -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$OUT/cmake.log" 2>&1 &&
  cmake --build build/cmake -j 16 >> "$OUT/cmake.log" 2>&1 || { tail -40 "$OUT/cmake.log"; rc=1; }
  (ctest --test-dir build/cmake --output-on-failure > "$OUT/ctest.log" 2>&1); c=$?
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/ctest.log" | tail -15; [ $c -eq 0 ] || { rc=1; grep -B2 -A20 "FAIL" "$OUT/ctest.log" | head -80; }
  python3 -m cufunc > "$OUT/demo.log" 2>&1; echo "demo rc=$?"; tail -8 "$OUT/demo.log"
  if printf '%s\n' "$@" | grep -qx -- '-n'; then
    # In parallel (pytest-xdist), the tests that take the whole GPU run alone afterwards: beside
    # other workers they would starve them of memory (seen: dozens of out-of-memory failures).
    python3 -m pytest -q -ra tests/python -m "not exclusive" "$@" > "$OUT/pytest.log" 2>&1; p=$?
    python3 -m pytest -q -ra tests/python -m exclusive -p no:cacheprovider >> "$OUT/pytest.log" 2>&1 || p=1
  else
    python3 -m pytest -q -ra tests/python "$@" > "$OUT/pytest.log" 2>&1; p=$?
  fi
  grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -40; grep -E "passed|failed" "$OUT/pytest.log" | tail -2; [ $p -eq 0 ] || rc=1
fi
if [ "$what" = tests ] || [ "$what" = examples ] || [ "$what" = all ]; then
  # The C examples as a C user gets them: libcufunc installed into a prefix, examples/ built
  # against it with find_package (and ew_host with pkg-config), each run: exit 0 and "<name>: ok".
  pfx=/tmp/cufunc-prefix; rm -rf "$pfx" build/examples-installed
  { cmake -S . -B build/cmake-install -DCMAKE_BUILD_TYPE=Release -DCUFUNC_BUILD_TESTS=OFF \
      -DCUFUNC_BUILD_BENCH=OFF -DCUFUNC_BUILD_EXAMPLES=OFF -DCMAKE_INSTALL_PREFIX="$pfx" \
      -DCMAKE_INSTALL_LIBDIR=lib &&
    cmake --build build/cmake-install -j 16 && cmake --install build/cmake-install &&
    cmake -S examples -B build/examples-installed -DCMAKE_PREFIX_PATH="$pfx" &&
    cmake --build build/examples-installed -j 16 &&
    { ! command -v pkg-config > /dev/null || cc examples/ew_host.c -o build/examples-installed/ew_host_pkgconfig \
        $(PKG_CONFIG_PATH="$pfx/lib/pkgconfig" pkg-config --cflags --libs cufunc) -Wl,-rpath,"$pfx/lib"; }
  } > "$OUT/examples_build.log" 2>&1 ||
    { tail -30 "$OUT/examples_build.log"; rc=1; }
  for ex in build/examples-installed/example_* build/examples-installed/ew_host_pkgconfig; do
    [ -x "$ex" ] || continue
    name=$(basename "$ex"); name=${name#example_}; name=${name%_pkgconfig}
    "$ex" > "$OUT/example_$(basename "$ex").log" 2>&1; e=$?
    if [ $e -eq 0 ] && grep -q "^$name: ok$" "$OUT/example_$(basename "$ex").log"; then
      echo "example $(basename "$ex"): ok"
    else
      echo "example $(basename "$ex"): FAILED (exit $e)"; tail -15 "$OUT/example_$(basename "$ex").log"; rc=1
    fi
  done
fi
if [ "$what" = sanitize ] || [ "$what" = all ]; then
  bash tools/sanitizer_check.sh || rc=1
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  for b in bench/bench_*.py; do
    echo "== $b"; timeout 300 python3 "$b" > "$OUT/$(basename "$b" .py).log" 2>&1; echo "rc=$?"
    tail -25 "$OUT/$(basename "$b" .py).log"
  done
fi
exit $rc
