"""Exchange of device memory with PyTorch and CuPy, both directions, through both protocols
(__cuda_array_interface__ and DLPack), without copies; and running on their streams.

Each library is imported with importorskip: the GPU machine has both, so a skip there shows in
the -ra summary."""

import numpy as np
import pytest

from cufunc import cuda

pytestmark = pytest.mark.gpu

TORCH_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32",
                "float64", "complex64", "complex128"]
CUPY_DTYPES = TORCH_DTYPES + ["uint16", "uint32", "uint64"]


def sample(dtype, shape=(6, 10), seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    if dtype.kind == "f":
        return (rng.standard_normal(shape) * 100).astype(dtype)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


# ---- PyTorch -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.fail("PyTorch is installed but sees no CUDA device while cufunc does")
    return torch


def torch_dtype(torch, name):
    return getattr(torch, "bool" if name == "bool" else name)


def to_numpy(torch, t):
    return t.cpu().numpy()


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_to_cufunc_via_cai(torch, name):
    h = sample(name)
    t = torch.from_numpy(h).cuda()
    d = cuda.as_cuda_array(t)
    assert d.ptr == t.data_ptr() and d.shape == tuple(t.shape) and d.dtype == h.dtype
    np.testing.assert_array_equal(d.copy_to_host(), h)
    tv = t[1::2, ::3]  # PyTorch has no negative strides
    dv = cuda.as_cuda_array(tv)
    np.testing.assert_array_equal(dv.copy_to_host(), to_numpy(torch, tv))
    # Same memory: a write through cufunc shows in the tensor.
    d[0, 0] = h[1, 1]
    torch.cuda.synchronize()
    assert to_numpy(torch, t)[0, 0] == h[1, 1]


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_fast_interface_says_what_pytorchs_says(torch, name):
    """cufunc reads tensors through _interop.interface_for (C-level attributes, no Python
    property): the same interface as PyTorch's own, plus the stream PyTorch works on now."""
    from cufunc import _interop
    read = _interop.interface_for(torch.Tensor)
    assert read is not None
    t = torch.from_numpy(sample(name)).cuda()
    for v in (t, t[1::2, ::3], t.T, t[:0], t[2]):
        mine, theirs = read(v), v.__cuda_array_interface__
        assert mine["shape"] == theirs["shape"] and mine["typestr"] == theirs["typestr"]
        assert mine["data"] == theirs["data"]
        n = v.element_size()
        want = theirs["strides"] or tuple(x * n for x in v.stride())
        assert mine["strides"] == want, (mine, theirs)
        assert mine["stream"] == 1  # PyTorch's default stream is the legacy one
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        assert read(t)["stream"] == s.cuda_stream
    g = t.float().requires_grad_() if name.startswith("float") else None
    if g is not None:  # PyTorch's own answer (its error), as before
        with pytest.raises(RuntimeError, match="requires grad"):
            read(g)
    with pytest.raises(AttributeError):
        read(torch.zeros(3))  # a CPU tensor has no interface


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_to_cufunc_via_dlpack(torch, name):
    h = sample(name)
    t = torch.from_numpy(h).cuda()
    d = cuda.from_dlpack(t)
    assert d.ptr == t.data_ptr() and d.dtype == h.dtype
    np.testing.assert_array_equal(d.copy_to_host(), h)
    tv = t.t()
    dv = cuda.from_dlpack(tv)
    assert dv.strides == tuple(s * h.itemsize for s in tv.stride())
    np.testing.assert_array_equal(dv.copy_to_host(), h.T)
    legacy = cuda.from_dlpack(torch.utils.dlpack.to_dlpack(t))
    assert legacy.ptr == t.data_ptr()


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_cufunc_to_torch_via_cai(torch, name):
    h = sample(name)
    d = cuda.to_device(h)
    t = torch.as_tensor(d, device="cuda")
    assert t.data_ptr() == d.ptr and t.dtype == torch_dtype(torch, name)
    np.testing.assert_array_equal(to_numpy(torch, t), h)
    # A strided view (PyTorch has no negative strides, so positive ones).
    v = d[::2, 1::3]
    tv = torch.as_tensor(v, device="cuda")
    assert tv.data_ptr() == v.ptr
    np.testing.assert_array_equal(to_numpy(torch, tv), h[::2, 1::3])


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_cufunc_to_torch_via_dlpack(torch, name):
    h = sample(name)
    d = cuda.to_device(h)
    t = torch.from_dlpack(d)
    assert t.data_ptr() == d.ptr and t.dtype == torch_dtype(torch, name)
    np.testing.assert_array_equal(to_numpy(torch, t), h)
    t2 = torch.utils.dlpack.from_dlpack(d.__dlpack__())
    assert t2.data_ptr() == d.ptr
    tv = torch.from_dlpack(d.T)
    assert tuple(tv.stride()) == tuple(s // h.itemsize for s in d.T.strides)
    np.testing.assert_array_equal(to_numpy(torch, tv), h.T)
    # The tensor keeps the memory alive after the cufunc array is gone.
    del d
    import gc
    gc.collect()
    np.testing.assert_array_equal(to_numpy(torch, t), h)


def test_torch_sees_work_queued_on_our_stream(torch):
    s = cuda.stream()
    n = 1 << 22
    h = cuda.pinned_array(n, dtype=np.float32)
    h[...] = np.arange(n, dtype=np.float32)
    d = cuda.to_device(h, stream=s)          # asynchronous: pinned source, our stream
    t = torch.from_dlpack(d)                 # torch's stream waits for ours
    assert float(t[-1].item()) == n - 1
    assert float(t.sum(dtype=torch.float64).item()) == float(np.arange(n, dtype=np.float64).sum())


def test_running_on_a_torch_stream(torch):
    ts = torch.cuda.Stream()
    s = cuda.external_stream(ts.cuda_stream)
    assert s.handle == ts.cuda_stream
    n = 1 << 22
    with torch.cuda.stream(ts):
        t = torch.arange(n, device="cuda", dtype=torch.float32) * 3  # queued on ts
    d = cuda.as_cuda_array(t)
    out = np.empty(n, dtype=np.float32)
    d.copy_to_host(out, stream=s)            # ordered after torch's kernel on the same stream
    s.synchronize()
    np.testing.assert_array_equal(out, np.arange(n, dtype=np.float32) * 3)
    # And the other way: our copy on ts, torch's reduction after it on ts.
    e = cuda.device_array(n, dtype=np.float32, stream=s)
    e.copy_to_device(np.ones(n, dtype=np.float32), stream=s)
    with torch.cuda.stream(ts):
        total = torch.as_tensor(e, device="cuda").sum().item()
    assert total == n


# ---- CuPy ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.mark.parametrize("name", CUPY_DTYPES)
def test_cupy_to_cufunc_both_protocols(cp, name):
    h = sample(name)
    a = cp.asarray(h)
    for d in (cuda.as_cuda_array(a), cuda.from_dlpack(a)):
        assert d.ptr == a.data.ptr and d.dtype == h.dtype and d.shape == h.shape
        np.testing.assert_array_equal(d.copy_to_host(), h)
    av = a[::-2, 1::3]
    for dv in (cuda.as_cuda_array(av), cuda.from_dlpack(av)):
        assert dv.ptr == av.data.ptr and dv.strides == av.strides
        np.testing.assert_array_equal(dv.copy_to_host(), h[::-2, 1::3])
    d = cuda.as_cuda_array(a)
    d[2, 3] = h[0, 0]
    cp.cuda.runtime.deviceSynchronize()
    assert cp.asnumpy(a)[2, 3] == h[0, 0]


@pytest.mark.parametrize("name", CUPY_DTYPES)
def test_cufunc_to_cupy_both_protocols(cp, name):
    h = sample(name)
    d = cuda.to_device(h)
    for a in (cp.asarray(d), cp.from_dlpack(d)):
        assert a.data.ptr == d.ptr and a.dtype == h.dtype
        np.testing.assert_array_equal(cp.asnumpy(a), h)
    v = d[::-2, 1::3]
    for av in (cp.asarray(v), cp.from_dlpack(v)):
        assert av.data.ptr == v.ptr and av.strides == v.strides
        np.testing.assert_array_equal(cp.asnumpy(av), h[::-2, 1::3])


def test_running_on_a_cupy_stream(cp):
    cs = cp.cuda.Stream(non_blocking=True)
    s = cuda.external_stream(cs.ptr)
    n = 1 << 22
    with cs:
        a = cp.arange(n, dtype=cp.float64) * 2
    out = np.empty(n)
    cuda.as_cuda_array(a, sync=False).copy_to_host(out, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(out, np.arange(n, dtype=np.float64) * 2)


def test_cupy_honours_our_cai_stream(cp):
    s = cuda.stream()
    n = 1 << 22
    src = cuda.pinned_array(n)
    src[...] = 5.0
    d = cuda.to_device(src, stream=s)        # async on our stream; CAI names it
    assert d.__cuda_array_interface__["stream"] == s.handle
    a = cp.asarray(d)                        # CuPy synchronises on the named stream
    assert float(a.sum()) == 5.0 * n
