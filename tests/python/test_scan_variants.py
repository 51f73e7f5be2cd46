"""The scan (templates/cufunc/reduce.cuh, cf_scan_tiles) under its tuning knobs, each in a child
process: tiny tiles (CUFUNC_SCAN_ITEMS) so that a call has thousands of tiles and long look-backs,
windows of 8 x 32 tiles per look-back step, tiles in block order, a part of each tile in shared
memory (CUFUNC_SCAN_SMEM_ITEMS: tiny, and the default 44), and the shared-memory part off. Results
against NumPy's cumsum / accumulate, exact for integers."""
import os
import subprocess
import sys
import textwrap

import pytest

gpu = pytest.mark.gpu

CHILD = textwrap.dedent("""
    import numpy as np
    from cufunc import cuda, vectorize

    @vectorize(["int32(int32, int32)", "float64(float64, float64)"], identity=0)
    def add(x, y):
        return x + y

    rng = np.random.default_rng(1)
    bad = []
    # sizes: partial last tiles, a tile boundary, many tiles per block; rows (axis=1) and a
    # strided (not prefetched) input beside contiguous ones
    for n in (1, 1023, 1024, 1025, 200003, 1 << 21):
        a = rng.integers(-1000, 1000, n, dtype=np.int32)
        got = add.accumulate(cuda.to_device(a)).copy_to_host()
        if not np.array_equal(got, np.cumsum(a, dtype=np.int32)):
            bad.append(("int32", n))
    m = rng.integers(-9, 9, (37, 70001), dtype=np.int32)
    got = add.accumulate(cuda.to_device(m), axis=1).copy_to_host()
    if not np.array_equal(got, np.cumsum(m, axis=1, dtype=np.int32)):
        bad.append(("rows", m.shape))
    s = rng.integers(-9, 9, 300001, dtype=np.int32)
    got = add.accumulate(cuda.to_device(s)[::3]).copy_to_host()
    if not np.array_equal(got, np.cumsum(s[::3], dtype=np.int32)):
        bad.append(("strided", s[::3].shape))
    f = rng.random(1 << 20)
    got = add.accumulate(cuda.to_device(f)).copy_to_host()
    if not np.allclose(got, np.cumsum(f), rtol=1e-12):
        bad.append(("float64", f.shape))
    # a second launch on the same stream reuses the tile counter the first one reset
    got = add.accumulate(cuda.to_device(a)).copy_to_host()
    if not np.array_equal(got, np.cumsum(a, dtype=np.int32)):
        bad.append(("again", a.shape))
    print("BAD", bad)
""")


@gpu
@pytest.mark.parametrize("env", [
    {"CUFUNC_SCAN_ITEMS": "4", "CUFUNC_SCAN_SLEEP": "20"},
    {"CUFUNC_SCAN_SMEM_ITEMS": "0"},
    {"CUFUNC_SCAN_ITEMS": "4", "CUFUNC_SCAN_LOOKBACK": "8"},
    {"CUFUNC_SCAN_ITEMS": "4", "CUFUNC_SCAN_LOOKBACK": "1", "CUFUNC_SCAN_ORDER": "block"},
    {"CUFUNC_SCAN_ITEMS": "4", "CUFUNC_SCAN_SMEM_ITEMS": "8"},
    {"CUFUNC_SCAN_SMEM_ITEMS": "44"},
], ids=["tiny-tiles-sleep", "registers-only", "tiny-tiles-look-back-8x32", "tiny-tiles-block-order",
        "tiny-tiles-shared-rounds", "shared-rounds"])
def test_scan_drivers(env, tmp_path):
    e = dict(os.environ, CUFUNC_CACHE_DIR=str(tmp_path), **env)
    script = tmp_path / "child.py"   # a file: the translator reads the body's source
    script.write_text(CHILD)
    p = subprocess.run([sys.executable, str(script)], env=e, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "BAD []" in p.stdout, p.stdout[-3000:]
