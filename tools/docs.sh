#!/usr/bin/env bash
# Build the documentation site (docs/ -> build/docs/html) with warnings as errors. Needs the docs
# extra (pip install ".[docs]") and cufunc installed (the API reference imports it).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -m sphinx -W --keep-going -q -b html docs build/docs/html "$@"
echo "docs: built without warnings in build/docs/html"
