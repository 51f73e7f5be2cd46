#!/usr/bin/env bash
# The fresh-machine test: the README's two set-up commands, each in a brand-new `python3 -m venv`
# with nothing installed, on a clean clone of HEAD (only committed work is checked, as CI sees it).
# A green run in a developer's own environment has hidden a missing dependency before.
# Usage: bash tools/fresh_venv_check.sh [demo|tests|both]   (default both; tests take minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-both}
work=$(mktemp -d /tmp/cufunc-fresh.XXXXXX)
trap 'rm -rf "$work"' EXIT
git clone -q . "$work/src"
# The two commands exactly as the README gives them: the first fenced shell block after the
# sentence that introduces each, its lines joined with &&.
readme_block() {  # the phrase that precedes the block
  python3 - "$1" <<'PY'
import re, sys
text = open("README.md").read()
at = text.find(sys.argv[1])
m = re.search(r"```sh\n(.*?)```", text[at:], re.S) if at >= 0 else None
print(" && ".join(l.strip() for l in m.group(1).splitlines() if l.strip()) if m else "")
PY
}
demo_cmd=$(readme_block "install and run the demo")
test_cmd=$(readme_block "To run all the tests")
[ -n "$demo_cmd" ] && [ -n "$test_cmd" ] || { echo "README: set-up commands not found" >&2; exit 2; }

run_in_fresh_venv() {  # name, command
  local venv="$work/venv-$1"
  python3 -m venv "$venv"
  echo "== fresh venv ($1): $2"
  (cd "$work/src" && export PATH="$venv/bin:$PATH" VIRTUAL_ENV="$venv" PYTHON="$venv/bin/python" &&
   unset PYTHONPATH && bash -c "$2")
}
rc=0
if [ "$what" = demo ] || [ "$what" = both ]; then run_in_fresh_venv demo "$demo_cmd" || rc=1; fi
if [ "$what" = tests ] || [ "$what" = both ]; then run_in_fresh_venv tests "$test_cmd" || rc=1; fi
echo "fresh venv check: $([ $rc -eq 0 ] && echo passed || echo FAILED)"
exit $rc
