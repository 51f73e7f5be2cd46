"""The cuda namespace on a GPU: devices, selection, streams, RawKernel launches."""

import gc
import threading

import numpy as np
import pytest

from cufunc import _core, cuda

pytestmark = pytest.mark.gpu


# ---- devices -------------------------------------------------------------------------------------

def test_is_available_and_detect(capsys):
    assert cuda.is_available()
    assert cuda.detect() is True
    out = capsys.readouterr().out
    assert "Found %d CUDA devices" % len(cuda.gpus) in out
    assert "Compute Capability" in out and "[SUPPORTED]" in out
    assert "%d/%d devices are supported" % (len(cuda.gpus), len(cuda.gpus)) in out


def test_current_device_properties():
    dev = cuda.get_current_device()
    assert isinstance(dev, cuda.Device)
    assert dev.id == _core.get_device()
    assert isinstance(dev.name, str) and dev.name
    major, minor = dev.compute_capability
    assert major >= 5 and 0 <= minor <= 9
    assert dev.MULTIPROCESSOR_COUNT > 0
    assert dev.WARP_SIZE == 32
    assert dev.MAX_THREADS_PER_BLOCK >= 512
    assert dev.total_memory > 2 ** 30
    assert dev.uuid.startswith("GPU-")
    free, total = dev.get_memory_info()
    assert 0 < free <= total
    assert abs(total - dev.total_memory) <= dev.total_memory // 100
    assert cuda.current_context().get_memory_info()[1] == total
    with pytest.raises(AttributeError):
        dev.NO_SUCH_ATTRIBUTE
    assert str(dev.id) in repr(dev)


def test_gpus_list():
    n = len(cuda.gpus)
    assert n == _core.device_count() >= 1
    assert [g.id for g in cuda.gpus] == list(range(n))
    assert cuda.gpus[0] == cuda.Device(0)
    assert cuda.gpus[-1].id == n - 1
    with pytest.raises(IndexError):
        cuda.gpus[n]
    assert cuda.gpus.current == cuda.get_current_device()


def test_gpus_context_manager_restores_selection():
    before = cuda.get_current_device().id
    last = cuda.gpus[len(cuda.gpus) - 1]
    with last as dev:
        assert dev is last
        assert cuda.get_current_device().id == last.id
        with cuda.gpus[0]:
            assert cuda.get_current_device().id == 0
            d = cuda.device_array(4)
            assert d.device_id == 0
        assert cuda.get_current_device().id == last.id
    assert cuda.get_current_device().id == before


def test_select_device():
    before = cuda.get_current_device().id
    try:
        assert cuda.select_device(0).id == 0
        assert cuda.get_current_device().id == 0
        with pytest.raises(Exception) as info:
            cuda.select_device(len(cuda.gpus) + 5)
        assert type(info.value).__name__ == "CudaSupportError"
    finally:
        cuda.select_device(before)


def test_selection_is_per_thread():
    seen = []

    def worker():
        seen.append(cuda.get_current_device().id)
    with cuda.gpus[len(cuda.gpus) - 1]:
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert seen == [0]


@pytest.mark.skipif("len(__import__('cufunc').cuda.gpus) < 2")
def test_arrays_on_another_device():
    with cuda.gpus[1]:
        d1 = cuda.to_device(np.arange(5.0))
    assert d1.device_id == 1
    d0 = cuda.device_array(5)
    with pytest.raises(ValueError, match="device 1.*device 0"):
        d0.copy_to_device(d1)
    assert np.array_equal(d1.copy_to_host(), np.arange(5.0))
    k = cuda.RawKernel('extern "C" __global__ void k(double *x) {}', "k")
    with pytest.raises(ValueError, match=r"args\[0\]: the array lives on device 1"):
        k(1, 1, (d1,))
    with cuda.gpus[1]:
        s1 = cuda.stream()
    with pytest.raises(ValueError, match="stream"):
        d0.copy_to_host(stream=s1)


def test_synchronize_and_close():
    cuda.to_device(np.arange(10.0))
    cuda.synchronize()
    cuda.close()
    # Still usable afterwards: primary contexts stay.
    assert np.array_equal(cuda.to_device(np.arange(3)).copy_to_host(), np.arange(3))


# ---- streams -------------------------------------------------------------------------------------

def test_streams():
    s = cuda.stream()
    assert isinstance(s, cuda.Stream)
    assert s.handle != 0 and s.ptr == s.handle and int(s) == s.handle
    assert s.device_id == cuda.get_current_device().id
    assert not s.is_default and not s.is_external
    assert s.__cuda_stream__() == (0, s.handle)
    s.synchronize()
    assert s.query() is True
    assert "stream" in repr(s)
    d = cuda.default_stream()
    assert d.handle == 0 and d.is_default
    d.synchronize()
    assert cuda.legacy_default_stream().handle == 1
    assert cuda.per_thread_default_stream().handle == 2
    other = cuda.stream()
    s.wait_stream(other)
    with pytest.raises(TypeError):
        s.wait_stream(3)


def test_auto_synchronize():
    s = cuda.stream()
    h = np.arange(1 << 20, dtype=np.float64)
    out = cuda.pinned_array(h.shape)
    with s.auto_synchronize() as ctx:
        assert ctx is s
        d = cuda.to_device(h, stream=s)
        d.copy_to_host(out, stream=s)
    assert np.array_equal(out, h)


def test_external_stream():
    mine = cuda.stream()
    ext = cuda.external_stream(mine.handle)
    assert ext.handle == mine.handle and ext.is_external
    d = cuda.to_device(np.arange(100), stream=ext)
    assert np.array_equal(d.copy_to_host(stream=ext), np.arange(100))
    ext.synchronize()

    class ProtocolStream:
        def __cuda_stream__(self):
            return (0, mine.handle)
    via_protocol = cuda.external_stream(ProtocolStream())
    assert via_protocol.handle == mine.handle
    d2 = cuda.to_device(np.arange(7), stream=ProtocolStream())
    assert isinstance(d2.stream, cuda.Stream) and d2.stream.handle == mine.handle
    assert np.array_equal(d2.copy_to_host(), np.arange(7))
    assert cuda.external_stream(mine) is mine


def test_stream_arguments_accept_1_and_2():
    for st in (1, 2):
        d = cuda.to_device(np.arange(10), stream=st)
        out = np.zeros(10, dtype=d.dtype)
        d.copy_to_host(out, stream=st)
        cuda.synchronize()
        assert np.array_equal(out, np.arange(10))


def test_streams_are_freed():
    gc.collect()
    for _ in range(200):
        s = cuda.stream()
        d = cuda.device_array(100, stream=s)
        del s, d
    gc.collect()


# ---- RawKernel -----------------------------------------------------------------------------------

SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float *x, const float *y, float *out, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
"""


def test_rawkernel_saxpy():
    n = 100_003
    rng = np.random.default_rng(3)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    out = cuda.device_array(n, dtype=np.float32)
    k = cuda.RawKernel(SAXPY, "saxpy")
    k((n + 255) // 256, 256, (np.float32(2.0), dx, dy, out, n))
    np.testing.assert_allclose(out.copy_to_host(), np.float32(2.0) * x + y, rtol=1e-6)
    # On a stream, with a list of args and a CAI object as an argument.

    class Exposes:
        def __init__(self, a):
            self.__cuda_array_interface__ = a.__cuda_array_interface__
    s = cuda.stream()
    out2 = cuda.device_array(n, dtype=np.float32, stream=s)
    k(((n + 127) // 128, 1, 1), (128,), [np.float32(-1.0), Exposes(dx), dy, out2, np.int64(n)],
      stream=s)
    s.synchronize()
    np.testing.assert_allclose(out2.copy_to_host(), y - x, rtol=1e-6)
    attrs = k.attributes
    assert attrs["max_threads_per_block"] > 0 and attrs["num_regs"] > 0


SCALAR_CTYPES = {
    "bool": "bool", "int8": "signed char", "int16": "short", "int32": "int",
    "int64": "long long", "uint8": "unsigned char", "uint16": "unsigned short",
    "uint32": "unsigned int", "uint64": "unsigned long long", "float16": "unsigned short",
    "float32": "float", "float64": "double", "complex64": "float2", "complex128": "double2",
}


@pytest.mark.parametrize("name", list(SCALAR_CTYPES))
def test_rawkernel_scalar_arguments_have_exact_bytes(name):
    ctype = SCALAR_CTYPES[name]
    src = ('extern "C" __global__ void put(%s v, %s *out, long long guard, long long *g)\n'
           '{ *out = v; *g = guard; }' % (ctype, ctype))
    k = cuda.RawKernel(src, "put")
    dtype = np.dtype(name)
    if dtype.kind == "b":
        value = np.True_
    elif dtype.kind == "c":
        value = dtype.type(1.5 - 2.25j)
    elif dtype.kind in "if":
        value = dtype.type(-3)
    else:
        value = dtype.type(200)
    out = cuda.device_array(1, dtype=dtype)
    g = cuda.device_array(1, dtype=np.int64)
    k(1, 1, (value, out, 123456789012, g))
    assert out.copy_to_host().tobytes() == np.asarray(value, dtype=dtype).tobytes()
    assert g[0] == 123456789012


def test_rawkernel_python_scalars():
    src = ('extern "C" __global__ void put(long long i, double f, bool b, double2 c, double *out)'
           '{ out[0] = (double)i; out[1] = f; out[2] = b ? 1.0 : 0.0; out[3] = c.x; out[4] = c.y; }')
    k = cuda.RawKernel(src, "put")
    out = cuda.device_array(5)
    k(1, 1, (-(2 ** 40), 0.25, True, 3 - 4j, out))
    assert np.array_equal(out.copy_to_host(), [-(2.0 ** 40), 0.25, 1.0, 3.0, -4.0])


def test_rawkernel_errors_on_the_gpu():
    with pytest.raises(Exception) as info:
        cuda.RawKernel('extern "C" __global__ void k() { syntax error }', "k")(1, 1, ())
    assert type(info.value).__name__ == "CompileError"
    k = cuda.RawKernel('extern "C" __global__ void k() {}', "not_there")
    with pytest.raises(ValueError, match="no kernel named 'not_there'"):
        k(1, 1, ())
    good = cuda.RawKernel('extern "C" __global__ void k() {}', "k")
    with pytest.raises(ValueError, match="block"):
        good(1, 4096, ())  # more threads per block than any GPU has
    good(1, 1, ())
    cuda.synchronize()


# ---- fork ----------------------------------------------------------------------------------------

def test_use_after_fork_is_a_clear_error():
    import os
    from cufunc.errors import CudaSupportError
    d = cuda.to_device(np.arange(3.0))
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            try:
                cuda.device_array(3)
            except CudaSupportError as exc:
                code = 0 if "fork" in str(exc) else 2
            del d  # dropping the parent's memory in the child is silent, not a crash
            gc.collect()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert d.copy_to_host()[2] == 2.0
