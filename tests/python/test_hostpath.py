"""The host path's strategies (src/hostpipe.c): each forced in turn gives NumPy's results.

Strategies, flipped at run time through `_core._hostpipe_config` (the same settings as the
CUFUNC_HOST_* / CUFUNC_HOSTPIPE_* environment knobs):
  * staged: every operand packed into the pinned slots (register_min 0), with 1, 2 or the default
    number of copy threads;
  * registered: the user's own arrays page-locked for the call (register_min 1 byte) and DMA'd in
    place, no staging copy; non-contiguous slabs still go through the pinned buffer;
  * already page-locked (cuda.pinned, pinned_array): DMA'd in place without registering;
  * small calls: one chunk (the default sends every host call through the pipeline);
  * pinned results: new NumPy results in cached page-locked blocks (result_pinned_min), written
    by the device-to-host copies directly.
Registration failures (out of memory, already registered: `_core._hostpipe_register_fault`) fall
back to staging with the same results. `_core._hostpipe_last()` tells which strategy ran.
"""
import math

import numpy as np
import pytest

from cufunc import _core, cuda, vectorize

gpu = pytest.mark.gpu


@vectorize(["float32(float32, float32)", "float64(float64, float64)"])
def hypot(x, y):
    return math.sqrt(x * x + y * y)


@vectorize(["Tuple(float64, float64)(float64, float64)"])
def sumdiff(x, y):
    return x + y, x - y


STRATEGIES = {
    "staged, default threads": dict(register_min=0, threads=0, result_pinned_min=0),
    "staged, 1 thread": dict(register_min=0, threads=1, result_pinned_min=0),
    "staged, 2 threads": dict(register_min=0, threads=2, result_pinned_min=0),
    "registered": dict(register_min=1, threads=0, result_pinned_min=0),
    "pinned results": dict(register_min=0, threads=0, result_pinned_min=1),
    # the default (results page-locked) with CUFUNC_HOST_REGISTER_MIN set: inputs registered,
    # the page-locked result used in place, never registered again
    "registered, pinned results": dict(register_min=1, threads=0, result_pinned_min=1),
}


@pytest.fixture
def settings():
    """Restores the pipeline's settings and the fault hooks after the test."""
    before = _core._hostpipe_config()
    try:
        yield
    finally:
        _core._hostpipe_register_fault(0)
        _core._hostpipe_fail_at(-1)
        _core._hostpipe_config(**before)


def use(strategy, chunk_kb=0):
    _core._hostpipe_config(min_kb=0, chunk_kb=chunk_kb, **STRATEGIES[strategy])


def run(fn):
    """fn() through the pipeline: (result, the pipeline's info)."""
    n = _core._hostpipe_last()["calls"]
    r = fn()
    info = _core._hostpipe_last()
    assert info["calls"] == n + 1, "the call did not take the pipeline"
    return r, info


def rand(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    return (rng.random(shape) * 10 - 5).astype(dtype)


def layouts():
    big = rand((600, 900), np.float64, 1)
    base = rand((300, 450), np.float64, 2)
    return {
        "1-d": (rand(200_000, np.float64, 3), rand(200_000, np.float64, 4)),
        "C": (base, rand((300, 450), np.float64, 5)),
        "F": (np.asfortranarray(base), rand((300, 450), np.float64, 6)),
        "strided": (big[::2, ::2], base),
        "reversed": (big[::-2, ::-2], big[1::2, ::-2]),
        "broadcast row": (base, base[0]),
    }


@gpu
@pytest.mark.parametrize("chunk_kb", [0, 64])
@pytest.mark.parametrize("layout", list(layouts()))
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_strategies_match_numpy(settings, strategy, layout, chunk_kb):
    use(strategy, chunk_kb)
    a, b = layouts()[layout]
    r, info = run(lambda: hypot(a, b))
    if "pinned results" in strategy:
        # a size's first result is ordinary memory (cf_hostpipe_result_wanted); from its second
        # call on, a page-locked block
        assert r.base is None and info["direct"] == info["registered"]
        np.testing.assert_allclose(r, np.hypot(a, b), rtol=1e-14)
        r, info = run(lambda: hypot(a, b))
    np.testing.assert_allclose(r, np.hypot(a, b), rtol=1e-14)
    if strategy == "registered":
        assert info["register_failed"] == 0
        # the new C-order output is contiguous: always registered and DMA'd in place; strided
        # inputs never are (only dense operands are registered)
        assert info["registered"] >= 1 and info["direct"] >= info["registered"]
        if layout in ("strided", "reversed"):
            assert info["registered"] == (2 if layout == "strided" else 1)
    elif strategy == "registered, pinned results":
        assert info["register_failed"] == 0, info
        assert r.base is not None and info["direct"] >= info["registered"] + 1
    elif strategy == "pinned results":
        assert info["registered"] == 0 and info["direct"] == 1   # the new output, page-locked
        assert r.flags.c_contiguous and r.flags.writeable and r.base is not None
    else:
        assert info["registered"] == 0 and info["direct"] == 0


@gpu
@pytest.mark.parametrize("strategy", list(STRATEGIES))
@pytest.mark.parametrize("out_layout", ["C", "F", "strided", "reversed", "in place"])
def test_out_arrays(settings, strategy, out_layout):
    use(strategy, 64)
    a, b = rand((256, 384), np.float64, 7), rand((256, 384), np.float64, 8)
    want = np.hypot(a, b)
    if out_layout == "C":
        out = np.zeros_like(a)
    elif out_layout == "F":
        out = np.zeros(a.shape, order="F")
    elif out_layout == "strided":
        out = np.zeros((512, 768))[::2, ::2]
    elif out_layout == "reversed":
        out = np.zeros_like(a)[::-1, ::-1]
    else:
        out = a
    r, _ = run(lambda: hypot(a, b, out=out))
    assert r is out
    np.testing.assert_allclose(out, want, rtol=1e-14)


@gpu
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_where_and_two_outputs(settings, strategy):
    use(strategy, 64)
    a, b = rand(300_000, np.float64, 9), rand(300_000, np.float64, 10)
    mask = rand(300_000, np.float64, 11) > 0
    out = np.full(a.shape, -7.0)
    run(lambda: hypot(a, b, out=out, where=mask))
    np.testing.assert_allclose(out[mask], np.hypot(a, b)[mask], rtol=1e-14)
    assert (out[~mask] == -7.0).all()
    (s, d), _ = run(lambda: sumdiff(a, b))
    np.testing.assert_array_equal(s, a + b)
    np.testing.assert_array_equal(d, a - b)


@gpu
def test_overlapping_output_still_takes_the_whole_array_path(settings):
    use("registered", 64)
    a, b = rand(100_000, np.float64, 12), rand(100_000, np.float64, 13)
    want = np.hypot(a, b)[::-1]
    n = _core._hostpipe_last()["calls"]
    hypot(a, b, out=a[::-1])
    assert _core._hostpipe_last()["calls"] == n
    np.testing.assert_allclose(a, want, rtol=1e-14)


@gpu
def test_operands_sharing_pages_are_registered_together(settings):
    """Two views of one buffer that meet inside a page, and an output right after them: one
    registration covers them (a page can only be registered once)."""
    use("registered", 64)
    buf = rand(3 * 100_003, np.float64, 14)
    a, b, out = buf[:100_003], buf[100_003:200_006], buf[200_006:]
    want = np.hypot(a, b)
    r, info = run(lambda: hypot(a, b, out=out))
    np.testing.assert_allclose(out, want, rtol=1e-14)
    assert info["registered"] == 3 and info["register_failed"] == 0 and info["direct"] == 3


@gpu
@pytest.mark.parametrize("mode", [1, 2])
def test_registration_failure_falls_back_to_staging(settings, mode):
    use("registered", 64)
    _core._hostpipe_register_fault(mode)
    a, b = rand(300_000, np.float64, 15), rand(300_000, np.float64, 16)
    r, info = run(lambda: hypot(a, b))
    np.testing.assert_allclose(r, np.hypot(a, b), rtol=1e-14)
    assert info["registered"] == 0 and info["direct"] == 0 and info["register_failed"] == 3
    # and the next call, with registration working, still right
    _core._hostpipe_register_fault(0)
    r, info = run(lambda: hypot(a, b))
    np.testing.assert_allclose(r, np.hypot(a, b), rtol=1e-14)
    assert info["registered"] == 3


@gpu
def test_read_only_input_registered_or_staged(settings):
    """Read-only pages (an array over bytes) may refuse registration: either way, right results."""
    use("registered", 64)
    a = np.frombuffer(rand(200_000, np.float64, 17).tobytes(), np.float64)
    b = rand(200_000, np.float64, 18)
    r, info = run(lambda: hypot(a, b))
    np.testing.assert_allclose(r, np.hypot(a, b), rtol=1e-14)
    assert info["registered"] + info["register_failed"] == 3


@gpu
@pytest.mark.parametrize("register_min", [0, 1])
def test_page_locked_arrays_are_dma_d_in_place(settings, register_min):
    """pinned_array and cuda.pinned(): used in place (no staging, no registration of ours)."""
    # new results in ordinary memory: the last call's output is the one registered, or not
    _core._hostpipe_config(min_kb=0, chunk_kb=64, register_min=register_min, result_pinned_min=0)
    n = 200_000
    a = cuda.pinned_array(n, np.float64)
    a[:] = rand(n, np.float64, 19)
    b = rand(n, np.float64, 20)
    out = cuda.pinned_array(n, np.float64)
    r, info = run(lambda: hypot(a, b, out=out))
    np.testing.assert_allclose(out, np.hypot(a, b), rtol=1e-14)
    assert info["direct"] == (3 if register_min else 2)
    assert info["registered"] == (1 if register_min else 0)     # b only, when asked
    with cuda.pinned(b):
        r, info = run(lambda: hypot(a, b))
        np.testing.assert_allclose(r, np.hypot(a, b), rtol=1e-14)
        assert info["direct"] >= 2                               # a and b
        # the new output only: registered, or refused by the driver and staged instead (a 0 was
        # seen on the GPU machine; likely the heap put the output on a page that b's registration
        # by cuda.pinned already holds); never used in place unregistered
        assert info["registered"] + info["register_failed"] == (1 if register_min else 0)


@gpu
@pytest.mark.parametrize("n", [1, 1000, 10_000, 100_000])
def test_small_calls_take_one_chunk(settings, n):
    _core._hostpipe_config(reset=True)
    a, b = rand(n, np.float32, 21), rand(n, np.float32, 22)
    r, info = run(lambda: hypot(a, b))
    np.testing.assert_allclose(r, np.hypot(a, b), rtol=2e-6)
    assert info["chunks"] == 1 and info["direct"] == 0


@gpu
def test_failure_with_registered_operands_unregisters(settings):
    """An injected failure mid-pipeline with registered operands: the error, then the same memory
    registers again at the next call (nothing was left registered)."""
    use("registered", 64)
    a, b = rand(300_000, np.float64, 23), rand(300_000, np.float64, 24)
    out = np.zeros_like(a)
    _core._hostpipe_fail_at(3)
    with pytest.raises(Exception):
        hypot(a, b, out=out)
    _core._hostpipe_fail_at(-1)
    r, info = run(lambda: hypot(a, b, out=out))
    np.testing.assert_allclose(out, np.hypot(a, b), rtol=1e-14)
    assert info["registered"] == 3 and info["register_failed"] == 0


@gpu
def test_pinned_results_come_back_to_the_cache(settings):
    _core._hostpipe_config(min_kb=0, chunk_kb=64, result_pinned_min=64 * 1024)
    a, b = rand(300_000, np.float64, 25), rand(300_000, np.float64, 26)
    hypot(a, b)                               # a size's first result: ordinary memory
    before = _core._hostpipe_result_stats()
    r, info = run(lambda: hypot(a, b))
    np.testing.assert_allclose(r, np.hypot(a, b), rtol=1e-14)
    assert info["direct"] == 1
    held = _core._hostpipe_result_stats()
    assert held["outstanding"] >= before["outstanding"] + r.nbytes
    r2 = r[::2].copy()                        # results behave as NumPy arrays
    r[:] = 0                                  # writable; the copy is independent
    assert (r2 != 0).all()
    del r
    back = _core._hostpipe_result_stats()
    assert back["outstanding"] == before["outstanding"]
    assert back["cached"] >= before["cached"]
    small = rand(1000, np.float64, 27)        # under the threshold: ordinary memory
    r, info = run(lambda: hypot(small, small))
    assert r.base is None
    np.testing.assert_allclose(r, np.hypot(small, small), rtol=1e-14)


@gpu
def test_default_settings_put_results_of_1_mib_in_page_locked_blocks(settings, monkeypatch):
    monkeypatch.delenv("CUFUNC_HOST_RESULT_PINNED_MIN", raising=False)
    _core._hostpipe_config(reset=True)
    a = rand(1 << 18, np.float32, 28)          # 1 MiB result
    r, info = run(lambda: hypot(a, a))         # its first call: ordinary memory
    assert info["direct"] == 0 and r.base is None
    np.testing.assert_allclose(r, np.hypot(a, a), rtol=1e-6)
    r, info = run(lambda: hypot(a, a))         # its second: page-locked, written by the DMA
    assert info["direct"] == 1 and r.base is not None and not r.flags.owndata
    np.testing.assert_allclose(r, np.hypot(a, a), rtol=1e-6)
    for _ in range(2):                         # 4 bytes short: ordinary NumPy memory, always
        s, info = run(lambda: hypot(a[:-1], a[:-1]))
        assert info["direct"] == 0 and s.base is None
    np.testing.assert_allclose(s, np.hypot(a[:-1], a[:-1]), rtol=1e-6)
    phases = info["phases_us"]                 # where the call's time went (bench_hostpath.py)
    assert set(phases) == {"plan", "setup", "issue", "wait", "unpack", "finish", "total"}
    assert all(v >= 0 for v in phases.values())
    assert phases["total"] >= sum(v for k, v in phases.items() if k != "total") - 1e-3


def test_host_knobs_are_checked_and_reset_from_the_environment(monkeypatch):
    """No GPU needed: the knobs through _hostpipe_config and the environment."""
    before = _core._hostpipe_config()
    try:
        with pytest.raises(ValueError, match="threads"):
            _core._hostpipe_config(threads=66)
        with pytest.raises(ValueError, match="register_min"):
            _core._hostpipe_config(register_min=-1)
        assert _core._hostpipe_config() == before
        got = _core._hostpipe_config(threads=3, register_min=1 << 20)
        assert got["threads"] == 3 and got["register_min"] == 1 << 20
        monkeypatch.setenv("CUFUNC_HOST_THREADS", "5")
        monkeypatch.setenv("CUFUNC_HOST_REGISTER_MIN", "4096")
        monkeypatch.setenv("CUFUNC_HOSTPIPE_MIN_KB", "8")
        got = _core._hostpipe_config(reset=True)
        assert got["threads"] == 5 and got["register_min"] == 4096 and got["min_kb"] == 8
        monkeypatch.delenv("CUFUNC_HOST_THREADS")
        monkeypatch.delenv("CUFUNC_HOST_REGISTER_MIN")
        monkeypatch.delenv("CUFUNC_HOSTPIPE_MIN_KB")
        got = _core._hostpipe_config(reset=True)
        assert got["threads"] == 0 and got["register_min"] == 0 and got["min_kb"] == 0
        assert got["result_pinned_min"] == 1 << 20  # the default: results >= 1 MiB page-locked
    finally:
        _core._hostpipe_config(**before)
