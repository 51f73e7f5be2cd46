"""`python -m cufunc`, the demo: environment report, then a real kernel (GPU) or an NVRTC compile
(no GPU). Run in child processes; the no-GPU variants force the driver away, so they run
everywhere."""

import os
import subprocess
import sys

import pytest

import cufunc

BOGUS_DRIVER = "/nonexistent/cufunc-demo/libcuda.so.1"


def run_demo(**env_over):
    env = dict(os.environ)
    env.update(env_over)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(cufunc.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([pkg_parent] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, "-m", "cufunc"], env=env, capture_output=True,
                          text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def check_environment_lines(out):
    assert "cufunc %s" % cufunc.__version__ in out
    assert "CUDA driver:" in out
    assert "NVRTC:" in out
    assert "kernel cache:" in out
    assert "templates:    sha256 " in out


def test_demo_without_gpu_compiles_with_nvrtc():
    rc, out = run_demo(CUFUNC_DRIVER_PATH=BOGUS_DRIVER)
    assert rc == 0, out
    check_environment_lines(out)
    assert "no CUDA GPU found: " in out and BOGUS_DRIVER in out
    assert "compiled the saxpy kernel for sm_90 without a GPU: CUBIN of" in out
    assert "OK" in out


def test_demo_without_gpu_or_nvrtc_fails_clearly():
    rc, out = run_demo(CUFUNC_DRIVER_PATH=BOGUS_DRIVER,
                       CUFUNC_NVRTC_PATH="/nonexistent/cufunc-demo/libnvrtc.so")
    assert rc == 1, out
    assert "NVRTC is missing" in out


def test_demo_reports_cache_off():
    rc, out = run_demo(CUFUNC_DRIVER_PATH=BOGUS_DRIVER, CUFUNC_CACHE="0")
    assert rc == 0, out
    assert "disk cache off" in out


def test_demo_here():
    """As the user runs it: exit 0 either way, and the right branch for this machine."""
    rc, out = run_demo()
    assert rc == 0, out
    check_environment_lines(out)
    if cufunc.cuda.is_available():
        assert "saxpy on " in out and "\nOK" in out
    else:
        assert "no CUDA GPU found" in out


@pytest.mark.gpu
def test_demo_runs_a_kernel_on_the_gpu():
    rc, out = run_demo()
    assert rc == 0, out
    assert "device 0:" in out and "compute capability" in out
    assert "saxpy on " in out and "max abs error" in out
    assert out.rstrip().endswith("OK")
