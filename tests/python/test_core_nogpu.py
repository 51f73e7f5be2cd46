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
