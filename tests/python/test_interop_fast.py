"""The fast readers of foreign operands (numpy_ext/py_interop.c) and the C result wrappers.

Without a GPU: the readers' fields are checked against each library's own description (PyTorch's
tensor attributes, CuPy's __cuda_array_interface__ at version 2, which makes no stream query) on
CPU tensors and on CuPy arrays over fake addresses (_core._foreign_interface(obj, 1)). With a GPU:
calls on each kind of operand give what the same call on DeviceArrays gives, in the caller's type.
"""
import math
import sys

import numpy as np
import pytest

import cufunc
from cufunc import _core, _interop, cuda, vectorize

# ---- which types are read fast ------------------------------------------------------------------


def test_reader_for_plain_types():
    assert _interop.reader_for(np.ndarray) is None
    assert _interop.reader_for(int) is None
    assert _interop.interface_for(np.ndarray) is None


def test_reader_for_fake_library_types(monkeypatch):
    import types
    mod = types.ModuleType("torch")
    Tensor = type("Tensor", (), {"__module__": "torch", "__cuda_array_interface__": property(
        lambda self: {})})
    mod.Tensor = Tensor
    monkeypatch.setitem(sys.modules, "torch", mod)
    assert _interop.reader_for(Tensor) == "torch"
    Sub = type("Sub", (Tensor,), {})
    assert _interop.reader_for(Sub) == "torch"
    Own = type("Own", (Tensor,), {"__cuda_array_interface__": property(lambda self: {})})
    assert _interop.reader_for(Own) is None  # its own interface: read through it
    Size = type("Size", (), {"__module__": "torch"})
    assert _interop.reader_for(Size) is None


# ---- PyTorch, on the CPU ------------------------------------------------------------------------

TORCH_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "float16", "bfloat16", "float32", "float64", "complex64", "complex128"]
TYPESTR = {"bool": "|b1", "int8": "|i1", "uint8": "|u1", "bfloat16": "<V2"}


def typestr(name):
    return TYPESTR.get(name) or np.dtype(name).str


def torch_views(torch, t):
    v = [t, t.T, t[1::2, ::3], t[:0], t[2], t[2, 3], t[:, 1:2], t.unsqueeze(1).expand(6, 4, 10)]
    return v


@pytest.fixture(params=["c_api", "attributes"])
def torch_path(request):
    """Both ways of reading a tensor: PyTorch's DLPack C exchange API (PyTorch >= 2.10) and the
    attribute reads (older PyTorch, and what the C API path falls back to)."""
    pytest.importorskip("torch")
    had = _core._interop_c_api()
    if request.param == "c_api" and not had:
        pytest.skip("this PyTorch publishes no DLPack C exchange API (__dlpack_c_exchange_api__)")
    switch = _core._interop_c_api(request.param == "c_api")
    yield request.param
    _core._interop_c_api(switch)


def test_torch_c_api_is_used_when_published():
    torch = pytest.importorskip("torch")
    has = getattr(torch.Tensor, "__dlpack_c_exchange_api__", None) is not None
    assert _core._interop_c_api() == has


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_reader_fields(name, torch_path):
    torch = pytest.importorskip("torch")
    dt = getattr(torch, name, None)
    if dt is None:
        pytest.skip("this PyTorch has no %s" % name)
    t = torch.zeros((6, 10), dtype=torch.float64).to(dt)
    for v in torch_views(torch, t):
        got = _core._foreign_interface(v, 1)
        n = v.element_size()
        assert got["shape"] == tuple(v.shape)
        assert got["strides"] == tuple(s * n for s in v.stride())
        assert got["typestr"] == typestr(name)
        assert got["data"] == ((v.data_ptr() if v.numel() else 0), False)
        assert got["stream"] is None  # test mode: no stream query
        assert _core._foreign_interface(v, 2) is True


def test_torch_reader_refuses_as_pytorch_does(torch_path):
    """What the reader does not describe goes to PyTorch's own interface, with its error, as
    before: CPU tensors (AttributeError: not a device object), requiring grad, conjugated views,
    sparse ones; bfloat16 off the fast path has no interface (DLPack carries it)."""
    torch = pytest.importorskip("torch")
    cpu = torch.ones(3)
    with pytest.raises(AttributeError, match="non-CUDA"):
        _core._foreign_interface(cpu)
    assert _core._foreign_interface(cpu, 2) is True  # test mode reads CPU tensors
    g = torch.ones(3, requires_grad=True)
    assert _core._foreign_interface(g, 2) is False
    c = torch.ones(3, dtype=torch.complex64).conj()
    assert c.is_conj() and _core._foreign_interface(c, 2) is False
    n = torch._neg_view(torch.ones(3)) if hasattr(torch, "_neg_view") else None
    if n is not None:
        assert _core._foreign_interface(n, 2) is False
    s = torch.ones(3).to_sparse()
    assert _core._foreign_interface(s, 2) is False
    b = torch.ones(3, dtype=torch.bfloat16, requires_grad=True)
    with pytest.raises(AttributeError, match="bfloat16"):
        _core._foreign_interface(b, 1)


def test_torch_subclass_is_read(torch_path):
    torch = pytest.importorskip("torch")

    class Mine(torch.Tensor):
        pass
    m = torch.arange(6.0).reshape(2, 3).as_subclass(Mine)
    assert _interop.reader_for(Mine) == "torch"
    got = _core._foreign_interface(m.T, 1)
    assert got["shape"] == (3, 2) and got["strides"] == (4, 12)
    assert got["data"][0] == m.data_ptr()


def test_torch_cpu_tensor_in_a_call_is_refused_as_before():
    """A CPU tensor is no device operand (PyTorch's interface raises AttributeError for it, so
    the reader hands it there): the call takes its DLPack route, whose import refuses CPU memory,
    the same TypeError as before the fast reader, with no GPU needed."""
    torch = pytest.importorskip("torch")

    @vectorize(["float32(float32, float32)"])
    def hyp2(x, y):
        return math.sqrt(x * x + y * y)
    t = torch.ones(4)
    with pytest.raises(TypeError, match="DLPack device CPU"):
        hyp2(t, t)


# ---- CuPy, on the CPU (arrays over fake addresses; no GPU work) ------------------------------------

CUPY_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float16", "float32", "float64", "complex64", "complex128"]


@pytest.fixture
def cupy_v2(monkeypatch):
    cupy = pytest.importorskip("cupy")
    # version 2: CuPy's interface names no stream, so it needs no device to be read here
    monkeypatch.setattr(cupy._util, "CUDA_ARRAY_INTERFACE_EXPORT_VERSION", 2)
    return cupy


def fake_cupy(cupy, shape, dtype, base=1 << 20):
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    mem = cupy.cuda.UnownedMemory(base, max(n, 1), None, 0)
    return cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(mem, 0))


def cai_view(cai, itemsize):
    """An interface's view as cufunc's parser makes it: strides None are C-contiguous ones."""
    strides = cai["strides"]
    if strides is None:
        strides, acc = [], itemsize
        for e in reversed(cai["shape"]):
            strides.insert(0, acc)
            acc *= max(e, 1)
        strides = tuple(strides)
    return cai["shape"], strides, cai["typestr"], cai["data"]


@pytest.mark.parametrize("name", CUPY_DTYPES)
def test_cupy_reader_says_what_cupys_interface_says(cupy_v2, name):
    cupy = cupy_v2
    a = fake_cupy(cupy, (6, 10), name)
    views = [a, a.T, a[1::2, ::3], a[::-1], a[:, ::-2], a[:0], a[2], a[2, 3], a[:, 1:2],
             a[1:2], a.reshape(6, 1, 10)]
    for v in views:
        got = _core._foreign_interface(v, 1)
        want = cai_view(v.__cuda_array_interface__, v.itemsize)
        assert (got["shape"], got["strides"], got["typestr"], got["data"]) == want, v.strides
        assert got["stream"] is None


def test_cupy_subclass_and_unsupported_dtype(cupy_v2):
    cupy = cupy_v2

    class Mine(cupy.ndarray):
        pass
    assert _interop.reader_for(Mine) == "cupy"
    a = fake_cupy(cupy, (3, 4), np.float32)
    m = a.view(Mine)
    assert _core._foreign_interface(m, 2) is True
    assert _core._foreign_interface(m, 1)["data"] == (a.data.ptr, False)
    # a dtype cufunc does not take: CuPy's own interface (and later cufunc's parser's error)
    d = fake_cupy(cupy, (3,), np.dtype("datetime64[ns]"))
    assert _core._foreign_interface(d, 2) is False
    assert _core._foreign_interface(d)["typestr"] == d.dtype.str


def test_cupy_interface_version_is_read_per_call(cupy_v2, monkeypatch):
    """CuPy's CUPY_CUDA_ARRAY_INTERFACE_EXPORT_VERSION: 2 names no stream, 3 the current stream;
    anything else is CuPy's own error, through its interface."""
    cupy = cupy_v2
    a = fake_cupy(cupy, (3,), np.float32)
    monkeypatch.setattr(cupy._util, "CUDA_ARRAY_INTERFACE_EXPORT_VERSION", 7)
    assert _core._foreign_interface(a, 2) is False
    with pytest.raises(ValueError, match="EXPORT_VERSION"):
        _core._foreign_interface(a)


# ---- on the GPU: calls on each kind of operand ----------------------------------------------------

@vectorize(["float32(float32, float32)", "float64(float64, float64)",
            "complex64(complex64, complex64)"])
def hyp(x, y):
    return x * x + y * y


@vectorize(["bool(bool, bool)"])
def band(x, y):
    return x and y


@vectorize
def divmod2(x, y):
    return x // y, x % y


def torch_cases(torch):
    dev = "cuda"
    base = torch.arange(60, dtype=torch.float32, device=dev).reshape(6, 10) / 7
    return {
        "contiguous": base,
        "transposed": base.T,
        "strided": base[1::2, ::3],
        "zero_d": base[2, 3],
        "zero_size": base[:0],
        "expanded": base[:, :1].expand(6, 10),
        "float64": base.double(),
        "complex64": (base + 1j * base).to(torch.complex64),
    }


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["contiguous", "transposed", "strided", "zero_d", "zero_size",
                                  "expanded", "float64", "complex64"])
def test_gpu_torch_call_matches_devicearray_call(case, torch_path):
    torch = pytest.importorskip("torch")
    x = torch_cases(torch)[case]
    r = hyp(x, x)
    assert isinstance(r, torch.Tensor) and r.device == x.device and r.dtype == x.dtype
    assert tuple(r.shape) == tuple(x.shape)
    want = hyp(cuda.as_cuda_array(x.contiguous()), cuda.as_cuda_array(x.contiguous()))
    np.testing.assert_allclose(r.cpu().numpy(), want.copy_to_host(), rtol=1e-6)


@pytest.mark.gpu
def test_gpu_torch_bool_and_bfloat16_calls(torch_path):
    torch = pytest.importorskip("torch")
    a = torch.tensor([True, False, True, True], device="cuda")
    b = torch.tensor([True, True, False, True], device="cuda")
    r = band(a, b)
    assert isinstance(r, torch.Tensor) and r.dtype == torch.bool
    assert r.cpu().tolist() == [True, False, False, True]
    pytest.importorskip("ml_dtypes")

    @vectorize(["bfloat16(bfloat16, bfloat16)"])
    def badd(x, y):
        return x + y
    x = torch.linspace(-3, 3, 1000, device="cuda", dtype=torch.bfloat16)
    r = badd(x, x)  # read by the fast reader (bfloat16 needs no interface typestr)
    assert isinstance(r, torch.Tensor) and r.dtype == torch.bfloat16
    assert torch.equal(r, x + x)


@pytest.mark.gpu
def test_gpu_torch_requires_grad_is_refused_as_before(torch_path):
    torch = pytest.importorskip("torch")
    g = torch.ones(4, device="cuda", requires_grad=True)
    with pytest.raises(Exception) as e:
        hyp(g, g)
    assert "grad" in str(e.value)


@pytest.mark.gpu
def test_gpu_torch_subclass_call(torch_path):
    torch = pytest.importorskip("torch")

    class Mine(torch.Tensor):
        pass
    x = torch.ones(8, device="cuda").as_subclass(Mine)
    r = hyp(x, x)
    assert isinstance(r, torch.Tensor)
    assert r.cpu().tolist() == [2.0] * 8


@pytest.mark.gpu
def test_gpu_torch_side_stream_producer_is_waited_for(torch_path):
    """A long producer on PyTorch's side stream: the fast reader names that stream, the call
    waits for it on the device, and the result is read on the same stream without a sync."""
    torch = pytest.importorskip("torch")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        m = torch.rand(2048, 2048, device="cuda")
        for _ in range(8):
            m = m @ m
            m = m / m.abs().max()
        x = m[:1].flatten().contiguous() * 0 + 3.0
        r = hyp(x, x)
        got = r.cpu()
    assert got.tolist() == [18.0] * x.numel()


@pytest.mark.gpu
def test_gpu_torch_result_keeps_memory_and_frees_it(torch_path):
    """A torch tensor over a cufunc result (either path; with the caller's library allocating
    results off, as for the other engines): the memory lives as long as the tensor, whatever
    else is freed and reused meanwhile, and goes back with it."""
    import gc
    torch = pytest.importorskip("torch")
    x = torch.arange(1 << 16, dtype=torch.float32, device="cuda")
    want = x * x + x * x
    torch.cuda.synchronize()
    gc.collect()
    before = _core.mem_outstanding()
    had = _core._lib_results()
    _core._lib_results(False, torch=False)
    try:
        r = hyp(x, x)
    finally:
        _core._lib_results(*had)
    assert isinstance(r, torch.Tensor)
    assert _core.mem_outstanding() >= before + 4 * x.numel(), "the result is not cufunc memory"
    del x
    gc.collect()
    junk = [cuda.to_device(np.full(1 << 16, -1.0, np.float32)) for _ in range(4)]
    cuda.synchronize()
    assert torch.equal(r, want)
    del junk, r
    gc.collect()
    torch.cuda.synchronize()
    assert _core.mem_outstanding() == before


@pytest.mark.gpu
@pytest.mark.parametrize("nout", [1, 2])
@pytest.mark.parametrize("alloc", ["pytorch", "cufunc"])
def test_gpu_torch_results_allocated_by_pytorch(nout, alloc, torch_path):
    """With PyTorch's allocator switched on (_lib_results(torch=True); off by default, as it was
    no faster) and its C exchange API, fresh results come from PyTorch's allocator (cufunc's pool
    untouched, torch.cuda.memory_allocated grows), on the inputs' device, with the right values;
    otherwise they are cufunc memory, wrapped."""
    import gc
    torch = pytest.importorskip("torch")
    x = torch.arange(4096, dtype=torch.float32, device="cuda") / 7
    y = x + 1
    torch.cuda.synchronize()
    gc.collect()
    mem, tmem = _core.mem_outstanding(), torch.cuda.memory_allocated()
    f = hyp if nout == 1 else divmod2
    had = _core._lib_results(torch=alloc == "pytorch")
    try:
        r = f(x, y)
    finally:
        _core._lib_results(*had)
    rs = (r,) if nout == 1 else r
    assert all(isinstance(t, torch.Tensor) and t.device == x.device for t in rs)
    if torch_path == "c_api" and alloc == "pytorch":
        assert _core.mem_outstanding() == mem
        assert torch.cuda.memory_allocated() >= tmem + 4 * x.numel() * nout
    else:
        assert _core.mem_outstanding() >= mem + 4 * x.numel() * nout
    if nout == 1:
        torch.testing.assert_close(r, x * x + y * y)
    else:
        torch.testing.assert_close(rs[0], torch.floor_divide(x, y))
        torch.testing.assert_close(rs[1], torch.remainder(x, y))




def cupy_slow_threes(cp):
    """2048 threes made at the end of a long chain of matmuls on CuPy's current stream: a
    consumer that does not wait for that stream reads garbage."""
    m = cp.random.rand(2048, 2048, dtype=cp.float32)
    for _ in range(8):
        m = m @ m
        m = m / cp.abs(m).max()
    return m[0] * 0 + 3


@pytest.mark.gpu
def test_gpu_cupy_results_allocated_by_cupy():
    """CuPy results come from CuPy's own allocator (cufunc's pool untouched), on a side stream
    too: the launch waits for CuPy's current stream, which then waits for the launch."""
    import gc
    cp = pytest.importorskip("cupy")
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cupy_slow_threes(cp)
        gc.collect()
        mem = _core.mem_outstanding()
        r = hyp(x, x)
        assert _core.mem_outstanding() == mem
        assert isinstance(r, cp.ndarray)
        got = cp.asnumpy(r, stream=s)
    s.synchronize()
    assert got.tolist() == [18.0] * x.size


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["contiguous", "transposed", "negative", "zero_d", "zero_size",
                                  "complex64", "subclass"])
def test_gpu_cupy_call_matches_devicearray_call(case):
    cp = pytest.importorskip("cupy")
    base = cp.arange(60, dtype=cp.float32).reshape(6, 10) / 7

    class Mine(cp.ndarray):
        pass
    x = {"contiguous": base, "transposed": base.T, "negative": base[::-1, ::-2],
         "zero_d": base[2, 3], "zero_size": base[:0], "complex64": base.astype(cp.complex64),
         "subclass": base.view(Mine)}[case]
    r = hyp(x, x)
    assert isinstance(r, cp.ndarray) and r.dtype == x.dtype and r.shape == x.shape
    xc = cp.ascontiguousarray(x)
    with cufunc.using_output_type("cufunc"):
        want = hyp(xc, xc).copy_to_host()
    np.testing.assert_allclose(cp.asnumpy(r), want, rtol=1e-6)


@pytest.mark.gpu
def test_gpu_cupy_side_stream_producer_is_waited_for():
    cp = pytest.importorskip("cupy")
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cupy_slow_threes(cp)
        r = hyp(x, x)
        got = cp.asnumpy(r, stream=s)
        s.synchronize()
    assert (got == 18.0).all()
