# Sourced by tools/ab_bench.sh and tools/ab_call.sh (from the repository root, with OLD, the older
# source tree, and OUT, the log folder, set): builds the older tree into $OLD_SITE (put it first on
# PYTHONPATH to run it) while this tree is installed as usual; both builds' logs go to $OUT.
OLD_SITE=/tmp/ab_old_site
rm -rf "$OLD_SITE"
(cd "$OLD" && python3 -m pip install -q --no-build-isolation --no-deps --target "$OLD_SITE" .) \
  > "$OUT/old_build.log" 2>&1 &
old_pid=$!
python3 -m pip install -q --no-build-isolation --no-deps . > "$OUT/new_build.log" 2>&1 ||
  { tail -30 "$OUT/new_build.log"; exit 1; }
wait $old_pid || { tail -30 "$OUT/old_build.log"; exit 1; }
