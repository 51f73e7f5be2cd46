#!/usr/bin/env bash
# The package as a user gets it: `python -m build` makes the sdist and then a wheel from that sdist,
# with the CUDA toolkit out of sight (a private mount namespace with an empty tmpfs over every
# /usr/local/cuda* folder), so the build's cuda.h and nvrtc.h come from NVIDIA's pip wheels, which
# the build backend fetches. The wheel is then checked (no RUNPATH, no debug info, only libc
# needed, the license inside) and installed with the cuda13 extra into a fresh venv, where
# `python -m cufunc` runs the demo: with the toolkit still hidden, NVRTC comes from the wheel too.
# Then the pages' install block (README.md, docs/index.md) runs as written in the unpacked sdist.
# Without `unshare` (not root) the build hides the toolkit with CUFUNC_IGNORE_TOOLKIT=1 instead, and
# says so. Usage: bash tools/package_check.sh   (about 6 minutes on 2 cores; needs PyPI)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
work=$(mktemp -d /tmp/cufunc-pkg.XXXXXX)
trap 'rm -rf "$work"' EXIT

"$PY" -m venv "$work/tools"
"$work/tools/bin/pip" install -q --disable-pip-version-check build

# Inside the namespace: the toolkit folders are empty, and nothing may find the headers there.
inner=$(cat <<'INNER'
set -euo pipefail
for d in /usr/local/cuda*; do [ -d "$d" ] && [ ! -L "$d" ] && mount -t tmpfs none "$d"; done
if [ -e /usr/local/cuda/include/cuda.h ]; then echo "the toolkit is still visible" >&2; exit 1; fi
echo "== toolkit hidden: $(ls -d /usr/local/cuda* 2>/dev/null | tr '\n' ' ')"
"$WORK/tools/bin/python" -m build -o "$WORK/dist" . > "$WORK/build.log" 2>&1 ||
  { tail -40 "$WORK/build.log"; exit 1; }
grep -E "Successfully built|nvidia-cuda" "$WORK/build.log" | tail -3 || true
"$PY" -m venv "$WORK/user"
cd "$WORK"   # not the source tree: the installed package must be the one imported
wheel=$(ls "$WORK"/dist/*.whl)
"$WORK/user/bin/pip" install -q --disable-pip-version-check "$wheel[cuda13]"
"$WORK/user/bin/python" -m cufunc
# Each install block of the pages (```sh blocks with `pip install` in README.md and docs/*.md,
# identical ones once), run as written in a fresh copy of the unpacked sdist: a user's checkout.
sdist=$(ls "$WORK"/dist/*.tar.gz)
for b in "$WORK"/blocks/*.sh; do
  co=$(mktemp -d "$WORK/checkout.XXXXXX")
  tar xzf "$sdist" -C "$co" --strip-components=1
  echo "== install block $(basename "$b" .sh), run in the unpacked sdist:"; sed 's/^/   /' "$b"
  (cd "$co" && bash -e "$b") > "$WORK/block.log" 2>&1 || { tail -40 "$WORK/block.log"; exit 1; }
  tail -2 "$WORK/block.log"
done
INNER
)
# the install blocks, taken from the pages of this tree
mkdir "$work/blocks"
"$PY" - "$work/blocks" <<'PYEND'
import glob, re, sys
seen = []
for page in ["README.md"] + sorted(glob.glob("docs/*.md")):
    for block in re.findall(r"^```sh\n(.*?)^```", open(page).read(), re.S | re.M):
        if "pip install" in block and block not in seen:
            seen.append(block)
if not seen:
    sys.exit("no install block found in README.md or docs/*.md")
for i, block in enumerate(seen):
    open("%s/block%d.sh" % (sys.argv[1], i + 1), "w").write(block)
PYEND
export WORK="$work" PY
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
  unshare -m bash -c "$inner"
else
  echo "== no mount namespace here: CUFUNC_IGNORE_TOOLKIT=1 hides the toolkit from the build only"
  CUFUNC_IGNORE_TOOLKIT=1 bash -c "${inner//mount -t tmpfs none \"\$d\"/true}"
fi

whl=$(ls "$work"/dist/*.whl)
sdist=$(ls "$work"/dist/*.tar.gz)
echo "== $(basename "$sdist"), $(basename "$whl")"
listing=$(tar tzf "$sdist")
for must in include/cufunc/cufunc.h templates/cufunc/runtime.cuh tools/embed_templates.py \
            tools/build_backend/cufunc_build.py src/ufunc.c numpy_ext/_coremodule.c LICENSE; do
  grep -q "/$must\$" <<<"$listing" || { echo "sdist lacks $must" >&2; exit 1; }
done
mkdir "$work/unz" && (cd "$work/unz" && "$PY" -m zipfile -e "$whl" .)
so=$(ls "$work"/unz/cufunc/_core*.so)
dyn=$(readelf -d "$so")
if grep -qiE "RPATH|RUNPATH" <<<"$dyn"; then echo "the extension has a RUNPATH:" >&2; grep -iE "RPATH|RUNPATH" <<<"$dyn" >&2; exit 1; fi
needed=$(grep NEEDED <<<"$dyn" | sed 's/.*\[\(.*\)\]/\1/' | tr '\n' ' ')
if readelf -S "$so" | grep -q "\.debug_"; then echo "the extension carries debug info" >&2; exit 1; fi
ls "$work"/unz/cufunc-*.dist-info/licenses/LICENSE > /dev/null
grep -q "^License-Expression: BSD-3-Clause" "$work"/unz/cufunc-*.dist-info/METADATA
echo "== wheel: no RUNPATH, no debug info, needs only: $needed; LICENSE and License-Expression in"
echo "package check: passed"
