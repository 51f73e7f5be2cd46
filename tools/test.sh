#!/usr/bin/env bash
# Install cufunc and its test tools, then run every test: the C unit tests (ctest) and pytest.
# This is the README's test command and what CI runs (.ci/run). Works on a machine with no GPU:
# GPU tests skip, visibly; with CUFUNC_REQUIRE_GPU=1 they fail instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# The build needs NumPy and setuptools first (--no-build-isolation builds against the installed
# NumPy), the versions pyproject.toml's build-system asks for (setuptools 77: SPDX license
# metadata); then cufunc with its test extra (pyproject.toml's one list of test dependencies)
# and its docs extra (tools/docs.sh, which CI runs next).
"$PY" -m pip install -q --disable-pip-version-check "numpy>=2.1" "setuptools>=77" wheel
"$PY" -m pip install -q --disable-pip-version-check --no-build-isolation ".[test,docs]"

cmake -S . -B build/cmake -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build build/cmake -j "$(nproc)"
ctest --test-dir build/cmake --output-on-failure
# No call cycle between the files of src/, read from the objects just built; none between the
# files of the binding (numpy_ext/), read from the objects the pip install above left in build/.
"$PY" tools/check_cycles.py build/cmake/CMakeFiles/cufunc_objects.dir/src
"$PY" tools/check_cycles.py "$("$PY" -c 'import sys, sysconfig
print("build/temp.%s-%s/numpy_ext" % (sysconfig.get_platform(), sys.implementation.cache_tag))')" \
  numpy_ext
# No import cycle between the modules of the Python package (the kernel language included),
# imports inside functions counted.
"$PY" tools/check_cycles.py --python numpy_ext/cufunc
# ctest does not print a skipped test's output: say why each skipped (tests/c/check.h's SKIP lines,
# the examples' "needs a GPU").
awk '/^[0-9]+\/[0-9]+ Testing: /{t=$3} /SKIP: | needs a GPU| needs NVRTC/{sub(/^ +/, ""); print t ": " $0}' \
  build/cmake/Testing/Temporary/LastTest.log | sort | uniq -c || true

# Run pytest against the installed package (not the source tree), from a neutral folder.
set +e
"$PY" -m pytest -ra "$@" tests/python
rc=$?
set -e
# 5 = no tests collected: not a failure. Any failed test is.
if [ "$rc" -eq 5 ]; then rc=0; fi
exit "$rc"
