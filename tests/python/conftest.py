"""Shared pytest set-up: the `gpu` marker and fixture.

A test that needs a CUDA GPU is marked ``@pytest.mark.gpu`` (or takes the ``gpu`` fixture, which
returns the current cufunc.cuda Device). Without a usable GPU it is skipped with the reason shown
in the summary (run pytest with -ra); with CUFUNC_REQUIRE_GPU=1 (the GPU machine's CI) it fails
instead, so a broken driver set-up cannot pass as "all skipped".

Importing cufunc is deferred to the first check, so suites that do not need it (the kernel
language's, the runtime header's) are unaffected by the state of the C extension.
"""

import os
import time

import pytest

REQUIRE_GPU = os.environ.get("CUFUNC_REQUIRE_GPU", "") == "1"
# The multi-GPU machine's run sets CUFUNC_REQUIRE_GPUS=2 (or 4): a test marked gpus(n) then fails
# when fewer than n GPUs are visible, instead of skipping (CUFUNC_REQUIRE_GPU=1 alone does not
# ask for several: on a one-GPU machine those tests skip, visibly, and the rest must pass).
try:
    REQUIRE_GPUS = int(os.environ.get("CUFUNC_REQUIRE_GPUS", "0") or 0)
except ValueError:
    REQUIRE_GPUS = 0

# JAX takes 75% of the GPU's memory when it starts, and keeps it: under pytest -n the worker that
# ran a JAX test held 60 GiB of an 80 GB card (105 GiB of an H200's 139: the drop CUFUNC_TEST_MEMLOG
# showed) and the other workers ran out of memory. Allocate on demand instead (set before any test
# module can import jax; an explicit setting in the environment wins).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

_state = None


def gpu_state():
    """(available, reason): whether cufunc can use a GPU here, and why not."""
    global _state
    if _state is None:
        try:
            import cufunc
            from cufunc import _env
        except Exception as exc:  # noqa: BLE001 - reported as the skip reason
            _state = (False, "cufunc cannot be imported: %s: %s" % (type(exc).__name__, exc))
        else:
            if _env.core is None:
                _state = (False, "cufunc's C extension is not importable: %s" % _env.core_error)
            elif cufunc.cuda.is_available():
                _state = (True, "")
            else:
                _state = (False, _env.core.unavailable_reason() or "no CUDA device")
    return _state


def require_gpu():
    ok, reason = gpu_state()
    if ok:
        return
    if REQUIRE_GPU:
        pytest.fail("CUFUNC_REQUIRE_GPU=1 but no usable CUDA GPU: %s" % reason, pytrace=False)
    pytest.skip("needs a CUDA GPU: %s" % reason)


def gpu_count():
    """How many GPUs cufunc sees (0 without a usable one)."""
    if not gpu_state()[0]:
        return 0
    from cufunc import _env
    return _env.core.device_count()


def require_gpus(n):
    """Skip (or fail: no GPU at all under CUFUNC_REQUIRE_GPU=1, fewer than n under
    CUFUNC_REQUIRE_GPUS >= n) unless at least n GPUs are usable."""
    require_gpu()
    have = gpu_count()
    if have >= n:
        return
    why = "needs %d CUDA GPUs, %d visible (CUDA_VISIBLE_DEVICES=%s)" % (
        n, have, os.environ.get("CUDA_VISIBLE_DEVICES", "unset"))
    if REQUIRE_GPUS >= n:
        pytest.fail("CUFUNC_REQUIRE_GPUS=%d but the test %s" % (REQUIRE_GPUS, why), pytrace=False)
    pytest.skip(why)


def pytest_configure(config):
    # Also declared in pyproject.toml; repeated here so the marker exists under any rootdir.
    config.addinivalue_line(
        "markers",
        "gpu: needs a CUDA GPU (skipped without one, unless CUFUNC_REQUIRE_GPU=1, which makes it "
        "fail)")
    config.addinivalue_line(
        "markers",
        "gpus(n): needs n CUDA GPUs (skipped with fewer, unless CUFUNC_REQUIRE_GPUS >= n; implies "
        "gpu)")
    config.addinivalue_line(
        "markers",
        "exclusive: takes the whole GPU (fills its memory): never run beside other GPU work; "
        "tools/gpu_check.sh runs these alone after a parallel (-n) run")


def pytest_runtest_setup(item):
    if item.get_closest_marker("gpu") is not None:
        require_gpu()
    several = item.get_closest_marker("gpus")
    if several is not None:
        require_gpus(several.args[0] if several.args else 2)


@pytest.fixture
def gpu():
    """The current cufunc.cuda Device; skips (or fails, with CUFUNC_REQUIRE_GPU=1) without one."""
    require_gpu()
    from cufunc import cuda
    return cuda.get_current_device()


# ---- tests share the GPU with other processes (pytest -n) -----------------------------------------
# Every memory pool in a process keeps what it once had (cufunc's stream-ordered pool, CuPy's,
# PyTorch's caching allocator): a worker's footprint grows to the peak of any test it ran, and under
# pytest -n the other workers ran out of memory (seen: 360 failures, one worker holding 60 GiB).
# After each GPU test, the pools of the libraries the test used hand their kept memory back. A
# test's own assertions are untouched; this only returns memory nothing references.

@pytest.fixture(autouse=True)
def _return_kept_gpu_memory(request):
    yield
    if request.node.get_closest_marker("gpu") is None or not gpu_state()[0]:
        return
    import sys
    cp = sys.modules.get("cupy")
    if cp is not None:
        try:
            cp.get_default_memory_pool().free_all_blocks()
        except Exception:  # noqa: BLE001 - a peer's failure here is not the test's
            pass
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001
            pass
    from cufunc import _env
    for device in range(_env.core.device_count() if request.node.get_closest_marker("gpus")
                        else 1):
        _env.core.mem_trim(device)


# ---- where a parallel GPU run's memory went (opt-in) ---------------------------------------------
# CUFUNC_TEST_MEMLOG=DIR: after each test, one line per test in DIR/mem-<pid>.txt: the test, the
# device memory cufunc's pools hold for live arrays in this process, and the device's free memory.
# A worker whose tests run the card out of memory for the others (seen: one process holding 60 GiB
# under pytest -n 4) shows which test made its footprint jump.
_MEMLOG = os.environ.get("CUFUNC_TEST_MEMLOG")


if _MEMLOG:
    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(item, nextitem):
        try:
            from cufunc import _env
            core = _env.core
            out = core.mem_outstanding() if core is not None else -1
            free = core.mem_info(0)[0] if core is not None and gpu_state()[0] else -1
        except Exception:  # noqa: BLE001 - a diagnostic must not fail the test
            out = free = -2
        with open(os.path.join(_MEMLOG, "mem-%d.txt" % os.getpid()), "a") as f:
            f.write("%.3f\t%s\t%d\t%d\n" % (time.time(), item.nodeid, out, free))
