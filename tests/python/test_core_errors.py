"""cufunc._core without a GPU: status-code mapping, module surface, imports."""

import pytest

import cufunc
from cufunc import _core, errors

MAPPING = [
    ("CF_ERR_INVALID", ValueError),
    ("CF_ERR_TYPE", TypeError),
    ("CF_ERR_NOMEM", MemoryError),
    ("CF_ERR_DEVICE_NOMEM", MemoryError),
    ("CF_ERR_NO_DRIVER", errors.CudaSupportError),
    ("CF_ERR_NO_DEVICE", errors.CudaSupportError),
    ("CF_ERR_NO_NVRTC", errors.CudaSupportError),
    ("CF_ERR_FORK", errors.CudaSupportError),
    ("CF_ERR_COMPILE", errors.CompileError),
    ("CF_ERR_CUDA", errors.CudaAPIError),
    ("CF_ERR_IO", OSError),
    ("CF_ERR_UNSUPPORTED", NotImplementedError),
    ("CF_ERR_RANGE", IndexError),
]


@pytest.mark.parametrize("name,exc", MAPPING)
def test_status_maps_to_exception(name, exc):
    code = getattr(_core, name)
    assert code < 0
    assert _core.status_name(code) == name
    with pytest.raises(exc, match="the message") as info:
        _core._raise_status(code, "the message")
    # Exactly the mapped class, not a broader one that happens to match.
    assert type(info.value) is exc


def test_status_codes_are_distinct():
    codes = [getattr(_core, name) for name, _ in MAPPING]
    assert len(set(codes)) == len(codes)
    assert _core.CF_OK == 0 and _core.status_name(0) == "CF_OK"


def test_error_classes():
    assert issubclass(errors.CudaSupportError, RuntimeError)
    assert issubclass(errors.CudaAPIError, RuntimeError)
    assert issubclass(errors.CompileError, RuntimeError)
    assert issubclass(errors.TypingError, TypeError)
    assert cufunc.CudaSupportError is errors.CudaSupportError


def test_versions_agree():
    assert cufunc.__version__ == _core.__version__
    assert _core.MAX_DIMS == 64


def test_pure_python_subpackages_import():
    import cufunc.lang  # noqa: F401
    import cufunc.types as T
    assert cufunc.float32 is T.float32


def test_cuda_namespace_has_numba_names():
    from cufunc import cuda
    for name in ["is_available", "detect", "select_device", "get_current_device", "gpus",
                 "close", "synchronize", "stream", "default_stream", "external_stream",
                 "to_device", "device_array", "device_array_like", "pinned_array",
                 "as_cuda_array", "is_cuda_array", "from_dlpack", "DeviceNDArray", "Stream",
                 "RawKernel"]:
        assert hasattr(cuda, name), name
    assert cuda.DeviceNDArray is _core.DeviceArray


def test_cuda_jit_and_local_come_from_lang():
    from cufunc import cuda, lang
    # cuda.jit is lang.jit with the typing policy (typing=) recorded on the device function
    f = cuda.jit(device=True)(lambda x: x)
    assert isinstance(f, lang.DeviceFunction) and f.typing == "numpy"
    assert cuda.local is lang.local


@pytest.mark.parametrize("dtype,name,size", [
    ("bool", "bool", 1), ("int8", "int8", 1), ("i2", "int16", 2), ("int32", "int32", 4),
    ("int64", "int64", 8), ("u1", "uint8", 1), ("uint16", "uint16", 2), ("uint32", "uint32", 4),
    ("u8", "uint64", 8), ("float16", "float16", 2), ("f4", "float32", 4),
    ("float64", "float64", 8), ("complex64", "complex64", 8), ("c16", "complex128", 16),
])
def test_dtype_info(dtype, name, size):
    import numpy as np
    info = _core.dtype_info(dtype)
    assert info["name"] == name
    assert info["itemsize"] == size == np.dtype(dtype).itemsize
    assert info["typestr"] == np.dtype(dtype).str


def test_host_allocation_failures_raise_memoryerror():
    # The core's allocator can be told to fail; the failure must surface as MemoryError, and
    # the process must stay usable after.
    src = 'extern "C" __global__ void k() {}'
    _core.nvrtc_init()
    _core._test_fail_alloc_after(1, True)
    try:
        with pytest.raises(MemoryError, match="bytes"):
            _core.compile_source(src, arch=(9, 0))
    finally:
        _core._test_fail_alloc_after(0)
    image, _ = _core.compile_source(src, arch=(9, 0))
    assert image[:4] == b"\x7fELF"
