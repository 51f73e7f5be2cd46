"""Without a usable driver: import works, is_available() is False, detect() says why, and every
function that needs the GPU raises CudaSupportError with a clear message.

Runs everywhere: a child process is pointed at a libcuda that does not exist
(CUFUNC_DRIVER_PATH), so this also runs on the GPU machine.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import cufunc

SCRIPT = textwrap.dedent(r"""
    import json, numpy as np
    from cufunc import cuda, errors, _core

    class FakeCAI:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (4096, False),
                                    "version": 3, "strides": None}

    class FakeDLPackCUDA:
        def __dlpack_device__(self):
            return (2, 0)
        def __dlpack__(self, **kw):
            raise AssertionError("must not be reached without a driver")

    kernel = cuda.RawKernel('extern "C" __global__ void k(float *x) {}', "k")
    checks = {
        "stream": lambda: cuda.stream(),
        "default_stream": lambda: cuda.default_stream(),
        "legacy_default_stream": lambda: cuda.legacy_default_stream(),
        "external_stream": lambda: cuda.external_stream(0),
        "to_device": lambda: cuda.to_device(np.arange(3.0)),
        "to_device_empty": lambda: cuda.to_device(np.zeros(0)),
        "device_array": lambda: cuda.device_array((2, 3), dtype=np.float32),
        "device_array_like": lambda: cuda.device_array_like(np.zeros(3)),
        "DeviceNDArray": lambda: cuda.DeviceNDArray((3,)),
        "pinned_array": lambda: cuda.pinned_array(10),
        "as_cuda_array": lambda: cuda.as_cuda_array(FakeCAI()),
        "from_dlpack": lambda: cuda.from_dlpack(FakeDLPackCUDA()),
        "synchronize": lambda: cuda.synchronize(),
        "select_device": lambda: cuda.select_device(0),
        "get_current_device": lambda: cuda.get_current_device(),
        "current_context": lambda: cuda.current_context(),
        "device_props": lambda: _core.device_props(0),
        "mem_info": lambda: _core.mem_info(),
        "driver_version": lambda: _core.driver_version(),
        "RawKernel_call": lambda: kernel(1, 1, (np.float32(1),)),
        "RawKernel_compile": lambda: kernel.compile(),
    }
    results = {}
    for name, fn in checks.items():
        try:
            fn()
            results[name] = "no error"
        except Exception as exc:
            results[name] = "%s: %s" % (type(exc).__name__, exc)
    print(json.dumps({
        "available": cuda.is_available(),
        "reason": _core.unavailable_reason(),
        "detect": cuda.detect(),
        "ngpus": len(cuda.gpus),
        "is_cuda_array": cuda.is_cuda_array(FakeCAI()),
        "results": results,
    }))
""")

BOGUS = "/nonexistent/cufunc-test/libcuda.so.1"


@pytest.fixture(scope="module")
def report():
    env = dict(os.environ, CUFUNC_DRIVER_PATH=BOGUS)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(cufunc.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([pkg_parent] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    data = json.loads(lines[-1])
    data["printed"] = "\n".join(lines[:-1])
    return data


def test_not_available(report):
    assert report["available"] is False
    assert BOGUS in report["reason"]
    assert report["ngpus"] == 0


def test_detect_says_why(report):
    assert report["detect"] is False
    assert "CUDA is not available" in report["printed"] and BOGUS in report["printed"]


def test_pure_checks_still_work(report):
    assert report["is_cuda_array"] is True


@pytest.mark.parametrize("name", [
    "stream", "default_stream", "legacy_default_stream", "external_stream", "to_device",
    "to_device_empty", "device_array", "device_array_like", "DeviceNDArray", "pinned_array",
    "as_cuda_array", "from_dlpack", "synchronize", "select_device", "get_current_device",
    "current_context", "device_props", "mem_info", "driver_version", "RawKernel_call",
    "RawKernel_compile",
])
def test_gpu_function_raises_cuda_support_error(report, name):
    msg = report["results"][name]
    assert msg.startswith("CudaSupportError: "), msg
    # Clear: says what is wrong (the driver could not be loaded) and where it looked.
    assert "driver" in msg and BOGUS in msg, msg


# ---- a library that is not a CUDA driver, a driver with no device ---------------------------------

def run_with_driver(driver_path, script, tmp_path, **env_extra):
    """Run script (a file, so that its functions have source) in a child with CUFUNC_DRIVER_PATH
    set; the JSON it prints last."""
    path = tmp_path / "probe.py"
    path.write_text(script)
    env = dict(os.environ, CUFUNC_DRIVER_PATH=driver_path, **env_extra)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(cufunc.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([pkg_parent] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


# Each check is a call a user makes; the message must name that call, not an internal step.
CALLS_SCRIPT = textwrap.dedent(r"""
    import json
    import numpy as np
    import cufunc
    from cufunc import cuda, _core

    @cufunc.vectorize(["f8(f8, f8)"])
    def hypot(x, y):
        return (x * x + y * y) ** 0.5

    @cufunc.guvectorize(["void(f8[:], f8[:])"], "(n)->()")
    def total(x, out):
        s = 0.0
        for i in range(x.shape[0]):
            s += x[i]
        out[0] = s

    def add(a, b):
        return a + b

    summed = cuda.reduce(add)
    checks = {
        "hypot": lambda: hypot(np.ones(3), np.ones(3)),
        "hypot_large": lambda: hypot(np.ones(1 << 20), np.ones(1 << 20)),
        "hypot.reduce": lambda: hypot.reduce(np.ones(3)),
        "total": lambda: total(np.ones((2, 3))),
        "add": lambda: summed(np.ones(3)),
        "to_device": lambda: cuda.to_device(np.ones(3)),
        "device_array": lambda: cuda.device_array(3),
        "get_device": lambda: cuda.get_current_device(),
    }
    results = {}
    for name, fn in checks.items():
        try:
            fn()
            results[name] = "no error"
        except Exception as exc:
            results[name] = "%s: %s" % (type(exc).__name__, exc)
    print(json.dumps({"available": cuda.is_available(), "reason": _core.unavailable_reason(),
                      "results": results}))
""")

# A stand-in for libcuda: cuInit and cuGetProcAddress_v2, which hands out functions for every
# entry point cufunc asks for. FAKE_CUDA_MODE: 0 cuInit succeeds and there are no devices; 1
# cuInit fails with CUDA_ERROR_NO_DEVICE (what drivers do when CUDA_VISIBLE_DEVICES hides every
# GPU); 2 one entry point (cuStreamGetCtx) is missing, as in a driver older than cufunc needs.
FAKE_DRIVER_C = r"""
#include <stdlib.h>
#include <string.h>
static int mode(void) { const char *m = getenv("FAKE_CUDA_MODE"); return m ? atoi(m) : 0; }
int cuInit(unsigned flags) { (void)flags; return mode() == 1 ? 100 : 0; }
static int init(unsigned flags) { return cuInit(flags); }
static int count(int *n) { *n = 0; return 0; }
static int version(int *v) { *v = 12040; return 0; }
static int ename(int r, const char **s)
{ *s = r == 100 ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN"; return 0; }
static int estr(int r, const char **s)
{ *s = r == 100 ? "no CUDA-capable device is detected" : "unknown error"; return 0; }
static int no_device(void) { return 100; }
int cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags,
                        int *status)
{
    (void)ver; (void)flags;
    if (mode() == 2 && strcmp(sym, "cuStreamGetCtx") == 0) {
        *pfn = 0;
        if (status) *status = 1;
        return 500;
    }
    void *f = (void *)no_device;
    if (!strcmp(sym, "cuInit")) f = (void *)init;
    else if (!strcmp(sym, "cuDeviceGetCount")) f = (void *)count;
    else if (!strcmp(sym, "cuDriverGetVersion")) f = (void *)version;
    else if (!strcmp(sym, "cuGetErrorName")) f = (void *)ename;
    else if (!strcmp(sym, "cuGetErrorString")) f = (void *)estr;
    *pfn = f;
    if (status) *status = 0;
    return 0;
}
"""


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    import shutil
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc/gcc) to build the stand-in CUDA driver")
    d = tmp_path_factory.mktemp("fakecuda")
    (d / "fake.c").write_text(FAKE_DRIVER_C)
    lib = d / "libfakecuda.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(d / "fake.c")], check=True,
                   capture_output=True, timeout=120)
    return str(lib)


def test_a_library_that_is_not_a_driver(tmp_path):
    # was: "CUDA driver at libc.so.6 is too old: it lacks cuInit"
    rep = run_with_driver("libc.so.6", CALLS_SCRIPT, tmp_path)
    assert rep["available"] is False
    for text in [rep["reason"]] + list(rep["results"].values()):
        assert "libc.so.6 is not a CUDA driver" in text, text
        assert "too old" not in text, text
    assert rep["results"]["to_device"].startswith("CudaSupportError: to_device: ")


@pytest.mark.parametrize("mode,cause", [("0", "cuDeviceGetCount: 0"),
                                        ("1", "cuInit: CUDA_ERROR_NO_DEVICE")])
def test_no_device_names_the_users_call(fake_driver, tmp_path, mode, cause):
    # was: "default stream: no CUDA device: the driver reports none", for every call
    rep = run_with_driver(fake_driver, CALLS_SCRIPT, tmp_path, FAKE_CUDA_MODE=mode,
                          CUDA_VISIBLE_DEVICES="")
    assert rep["available"] is False
    names = {"hypot_large": "hypot", "hypot.reduce": "hypot"}
    for call, msg in rep["results"].items():
        want = "CudaSupportError: %s: no CUDA device: " % names.get(call, call)
        assert msg.startswith(want), (call, msg)
        assert "default stream" not in msg, msg
        assert fake_driver in msg and cause in msg, msg
        assert "CUDA_VISIBLE_DEVICES is ''" in msg, msg


def test_driver_missing_an_entry_point_is_too_old(fake_driver, tmp_path):
    rep = run_with_driver(fake_driver, CALLS_SCRIPT, tmp_path, FAKE_CUDA_MODE="2")
    assert rep["available"] is False
    assert "is too old: it lacks cuStreamGetCtx" in rep["reason"]
    assert rep["results"]["hypot"].startswith("CudaSupportError: hypot: CUDA driver at ")
    assert "too old: it lacks cuStreamGetCtx" in rep["results"]["hypot"]
