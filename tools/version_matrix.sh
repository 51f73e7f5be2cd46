#!/usr/bin/env bash
# The supported range's other end. tools/test.sh runs the suite on the machine's Python (3.11, the
# oldest supported) with the newest NumPy; this runs the Python suite (tests/python) on the newest
# supported Python with the oldest supported NumPy, in a fresh venv, against an extension built
# against that NumPy. Both ends together are what pyproject.toml claims: requires-python >= 3.11,
# numpy >= 2.1 (the oldest NumPy for Python 3.13).
# Usage: bash tools/version_matrix.sh [PYTHON [NUMPY [TEST...]]]
#   (defaults: python3.13, numpy==2.1.3, tests/python); TEST: test files or folders, relative to
#   the repository root (pytest node ids too), to run a part of the suite on that Python.
# A Python that is not installed is reported and skipped (exit 0), never silently.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-python3.13}
np_spec=${2:-numpy==2.1.3}
root=$(pwd)
tests=()
for t in "${@:3}"; do tests+=("$root/$t"); done
[ "${#tests[@]}" -eq 0 ] && tests=("$root/tests/python")
# A pyenv shim answers for versions that are installed but not selected: ask pyenv's folder too
# (python3.12 or python3.12.1: an installed version of that prefix).
if ! "$py" -c 'import venv' 2> /dev/null; then
  ver=${py#python}
  for cand in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$ver"*/bin/python3; do
    [ -x "$cand" ] && py=$cand
  done
fi
if ! "$py" -c 'import venv' 2> /dev/null; then
  echo "version matrix: SKIPPED: $py is not installed on this machine"
  exit 0
fi
work=$(mktemp -d /tmp/cufunc-matrix.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$py" -m venv "$work/venv"
pip=("$work/venv/bin/python" -m pip install -q --disable-pip-version-check)
"${pip[@]}" "$np_spec" "setuptools>=77" wheel
"${pip[@]}" --no-build-isolation ".[test]"
echo "== $("$work/venv/bin/python" -c 'import sys, numpy; print("Python", sys.version.split()[0], "NumPy", numpy.__version__)')"
cd "$work"   # the installed package, not the source tree
set +e
"$work/venv/bin/python" -m pytest -q -ra -p no:cacheprovider "${tests[@]}"
rc=$?
set -e
[ "$rc" -eq 5 ] && rc=0
exit "$rc"
