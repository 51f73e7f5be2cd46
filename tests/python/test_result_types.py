"""Results come back in the caller's array type: the deliver step of the call
pipeline (numpy_ext/py_call.c, cf_py_call_deliver) wraps fresh device results with the wrapper of
the first foreign device input (cufunc/_interop.py has the rule).

Tables: producers (numpy, cufunc, cupy, torch, jax, numba; each library imported with importorskip,
so a missing one shows as a skip) x engines (ufunc call, outer, gufunc, reduce, accumulate,
cuda.reduce with res=) x out= given or not: type, device, dtype, values. Then zero-copy and
lifetimes (gc), mixed inputs, the caller's stream (a long producer on a torch/CuPy side stream),
the output-type setting, and (no GPU) the selection rule with stand-in library modules.
"""
import gc
import math
import os
import sys
import time
import threading
import types

import numpy as np
import pytest

import cufunc
from cufunc import _core, _interop, cuda, vectorize
from cufunc.guvectorize import guvectorize
from gpu_common import sum_reduce

gpu = pytest.mark.gpu

R, C = 64, 48


@vectorize(["float32(float32, float32)"])
def hyp(x, y):
    return math.sqrt(x * x + y * y)


def _plus(a, b):
    return a + b


add = vectorize(["float32(float32, float32)"], identity=0)(_plus)


@guvectorize(["void(float32[:], float32[:])"], "(n)->()")
def rowsum(x, out):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i]
    out[0] = s


def data(shape=(R, C), seed=0):
    """Small integers as float32: sums are exact in every library."""
    return np.random.default_rng(seed).integers(0, 8, size=shape).astype(np.float32)


# ---- producers ------------------------------------------------------------------------------------

class Lib:
    """One array library: make(h) (a device array of it), empty(shape), host(x) -> NumPy,
    is_type(x), device(x) (comparable), dtype_ok(x) (float32), ptr(x) (the data pointer)."""


def _numpy():
    L = Lib()
    L.name = "numpy"
    L.make = np.asarray
    L.empty = lambda shape: np.empty(shape, np.float32)
    L.host = np.asarray
    L.is_type = lambda x: isinstance(x, np.ndarray)
    L.device = lambda x: "host"
    L.dtype_ok = lambda x: x.dtype == np.float32
    L.ptr = lambda x: x.ctypes.data
    L.sync = lambda: None
    return L


def _cufunc():
    L = Lib()
    L.name = "cufunc"
    L.make = cuda.to_device
    L.empty = lambda shape: cuda.device_array(shape, np.float32)
    L.host = lambda x: x.copy_to_host()
    L.is_type = lambda x: isinstance(x, cuda.DeviceNDArray)
    L.device = lambda x: cuda.get_current_device().id
    L.dtype_ok = lambda x: x.dtype == np.float32
    L.ptr = lambda x: x.__cuda_array_interface__["data"][0]
    L.sync = cuda.synchronize
    return L


def _cupy():
    cp = pytest.importorskip("cupy")
    L = Lib()
    L.name = "cupy"
    L.make = cp.asarray
    L.empty = lambda shape: cp.empty(shape, cp.float32)
    L.host = lambda x: x.get()
    L.is_type = lambda x: isinstance(x, cp.ndarray)
    L.device = lambda x: x.device.id
    L.dtype_ok = lambda x: x.dtype == cp.float32
    L.ptr = lambda x: x.data.ptr
    L.sync = cp.cuda.Device().synchronize
    return L


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.fail("PyTorch is installed but sees no CUDA device while cufunc does")
    L = Lib()
    L.name = "torch"
    L.make = lambda h: torch.as_tensor(h, device="cuda")
    L.empty = lambda shape: torch.empty(shape, dtype=torch.float32, device="cuda")
    L.host = lambda x: x.cpu().numpy()
    L.is_type = lambda x: isinstance(x, torch.Tensor)
    L.device = lambda x: x.device
    L.dtype_ok = lambda x: x.dtype == torch.float32
    L.ptr = lambda x: x.data_ptr()
    L.sync = torch.cuda.synchronize
    return L


def _jax():
    jax = pytest.importorskip("jax")
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus:
        pytest.skip("JAX is installed without a GPU backend")
    L = Lib()
    L.name = "jax"
    L.make = lambda h: jax.device_put(h, gpus[0])
    L.empty = None  # immutable: out= is refused
    L.host = np.asarray
    L.is_type = lambda x: isinstance(x, jax.Array)
    L.device = lambda x: frozenset(x.devices())
    L.dtype_ok = lambda x: x.dtype == np.float32
    L.ptr = lambda x: x.unsafe_buffer_pointer()
    L.sync = lambda: None
    return L


def _numba():
    pytest.importorskip("numba")
    from numba import cuda as ncuda
    if not ncuda.is_available():
        pytest.skip("Numba sees no CUDA device")
    L = Lib()
    L.name = "numba"
    L.make = ncuda.to_device
    L.empty = lambda shape: ncuda.device_array(shape, np.float32)
    L.host = lambda x: x.copy_to_host()
    L.is_type = lambda x: ncuda.is_cuda_array(x) and type(x).__module__.startswith("numba")
    L.device = lambda x: ncuda.get_current_device().id
    L.dtype_ok = lambda x: x.dtype == np.float32
    L.ptr = lambda x: x.__cuda_array_interface__["data"][0]
    L.sync = ncuda.synchronize
    return L


PRODUCERS = {"numpy": _numpy, "cufunc": _cufunc, "cupy": _cupy, "torch": _torch, "jax": _jax,
             "numba": _numba}
DEVICE_LIBS = ["cufunc", "cupy", "torch", "jax", "numba"]
FOREIGN_LIBS = ["cupy", "torch", "jax", "numba"]


def lib_of(name):
    return PRODUCERS[name]()


# ---- engines: call(x, out) -> result; want(h) -> NumPy's answer; out shape -------------------------

def _kw(out):
    return {} if out is None else {"out": out}


ENGINES = {
    "ufunc": (lambda x, out: hyp(x, x, **_kw(out)), lambda h: np.hypot(h, h), (R, C)),
    "outer": (lambda x, out: hyp.outer(x[0], x[1], **_kw(out)),
              lambda h: np.hypot.outer(h[0], h[1]), (C, C)),
    "gufunc": (lambda x, out: rowsum(x, **_kw(out)), lambda h: h.sum(axis=1), (R,)),
    "reduce": (lambda x, out: add.reduce(x, axis=0, **_kw(out)), lambda h: h.sum(axis=0), (C,)),
    "accumulate": (lambda x, out: add.accumulate(x, axis=0, **_kw(out)),
                   lambda h: np.add.accumulate(h, axis=0), (R, C)),
    # cuda.reduce: res= is its out (Numba's: it returns None); without res= a NumPy scalar
    "cuda_reduce": (lambda x, out: sum_reduce(x[0], **({} if out is None else {"res": out})),
                    lambda h: np.array([h[0].sum()]), (1,)),
}


@gpu
@pytest.mark.parametrize("with_out", [False, True], ids=["new", "out"])
@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("producer", sorted(PRODUCERS))
def test_result_in_the_callers_type(producer, engine, with_out):
    L = lib_of(producer)
    h = data()
    x = L.make(h)
    call, want_of, out_shape = ENGINES[engine]
    want = want_of(h)
    if with_out and producer == "jax":
        import jax.numpy as jnp
        out = jnp.zeros(out_shape, jnp.float32)
        with pytest.raises(TypeError, match="JAX arrays are immutable"):
            call(x, out)
        return
    if with_out and producer == "numpy" and engine == "cuda_reduce":
        with pytest.raises(TypeError, match="res must be a device array"):
            call(x, np.zeros(1, np.float32))
        return
    if with_out:
        out = L.empty(out_shape)
        r = call(x, out)
        if engine == "cuda_reduce":
            assert r is None  # as Numba's: the value is in res
            r = out
        else:
            assert r is out, "an explicit out= is the result itself"
    else:
        r = call(x, None)
        if engine == "cuda_reduce":  # no res=: the value comes back to the host, as in Numba
            assert type(r) is np.float32
            assert r == want[0]
            return
    assert L.is_type(r), "%s in, %s out" % (producer, type(r))
    assert L.dtype_ok(r), r.dtype
    assert L.device(r) == L.device(x)
    L.sync()
    np.testing.assert_allclose(L.host(r), want, rtol=1e-6)


# ---- zero-copy and lifetimes ---------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("producer", FOREIGN_LIBS)
def test_wrapper_is_zero_copy(producer):
    """The wrapper the deliver step uses gives a view of the cufunc allocation, not a copy."""
    L = lib_of(producer)
    x = L.make(data())
    wrap = _core._result_wrapper([x])
    assert wrap is not None
    with cufunc.using_output_type("cufunc"):
        d = hyp(x, x)
    assert isinstance(d, cuda.DeviceNDArray)
    r = wrap(d)
    assert L.is_type(r)
    assert L.ptr(r) == d.__cuda_array_interface__["data"][0]


# calls whose results the caller's library allocates itself (cufunc writes into them): CuPy, and
# PyTorch when switched on where it publishes its DLPack C exchange API; the rest are cufunc
# memory, wrapped
LIB_ALLOCATES = {"cupy": lambda: True, "torch": lambda: _core._interop_c_api()}


@pytest.fixture(params=["lib_results", "cufunc_results"])
def lib_results(request):
    """Both ways a call on foreign arrays makes fresh results: allocated by the caller's library
    (PyTorch's allocator switched on for the test), or cufunc DeviceArrays wrapped into the
    library's type (other engines, older PyTorch, PyTorch by default)."""
    had = _core._lib_results()
    on = request.param == "lib_results"
    _core._lib_results(on, torch=on)
    yield on
    _core._lib_results(*had)


@gpu
@pytest.mark.parametrize("producer", FOREIGN_LIBS)
def test_result_keeps_cufunc_memory_alive(producer, lib_results):
    """Delete everything but the result, collect, reuse the freed memory: the result still reads
    its values, and the cufunc allocation is counted until the result goes. A result the
    caller's library allocated is none of cufunc's memory at all."""
    L = lib_of(producer)
    from_lib = lib_results and LIB_ALLOCATES.get(producer, lambda: False)()
    h = data()
    x = L.make(h)
    L.sync()
    gc.collect()
    before = _core.mem_outstanding()
    r = hyp(x, x)
    if from_lib:
        assert _core.mem_outstanding() == before, "the library's result took cufunc memory"
    else:
        assert _core.mem_outstanding() >= before + h.nbytes, "the result is not cufunc memory"
    del x
    gc.collect()
    junk = [cuda.to_device(np.full_like(h, -1.0)) for _ in range(4)]  # reuse anything freed
    cuda.synchronize()
    np.testing.assert_allclose(L.host(r), np.hypot(h, h), rtol=1e-6)
    del junk, r
    gc.collect()
    L.sync()
    assert _core.mem_outstanding() == before, "the result's cufunc memory was not freed with it"


@gpu
@pytest.mark.parametrize("producer", ["cupy", "torch", "numba"])
def test_cufunc_view_keeps_foreign_array_alive(producer):
    L = lib_of(producer)
    h = data()
    x = L.make(h)
    d = cuda.as_cuda_array(x)
    del x
    gc.collect()
    junk = [L.make(np.full_like(h, -1.0)) for _ in range(4)]  # the library reuses freed blocks
    L.sync()
    np.testing.assert_array_equal(d.copy_to_host(), h)
    del junk


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@gpu
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux)")
@pytest.mark.parametrize("producer", ["cupy", "torch"])
def test_no_leak_over_many_calls(producer, lib_results):
    """10^5 calls whose results are dropped at once: cufunc's device memory back where it was,
    host RSS flat (a leaked wrapper, capsule or DeviceArray per call would be megabytes)."""
    L = lib_of(producer)
    x = L.make(data((1, 16)))
    for _ in range(2000):  # warm-up: caches, pools, the library's own allocator
        hyp(x, x)
    L.sync()
    gc.collect()
    mem, rss = _core.mem_outstanding(), rss_bytes()
    for _ in range(100000):
        hyp(x, x)
    L.sync()
    gc.collect()
    assert _core.mem_outstanding() == mem
    assert rss_bytes() - rss < 8 << 20, "host memory grew by %d bytes" % (rss_bytes() - rss)


# ---- mixed inputs --------------------------------------------------------------------------------

MIXED = [
    # (first, second) -> the library of the result: the first foreign device array decides
    (("cufunc", "torch"), "torch"),
    (("numpy", "torch"), "torch"),
    (("torch", "cupy"), "torch"),
    (("cupy", "torch"), "cupy"),
    (("cufunc", "cupy"), "cupy"),
    (("numpy", "cufunc"), "cufunc"),
]


@gpu
@pytest.mark.parametrize("pair, winner", MIXED, ids=["-".join(p) for p, _ in MIXED])
def test_mixed_inputs(pair, winner):
    libs = [lib_of(n) for n in pair]
    h = data()
    r = hyp(libs[0].make(h), libs[1].make(h + 1))
    W = lib_of(winner)
    assert W.is_type(r), type(r)
    np.testing.assert_allclose(W.host(r), np.hypot(h, h + 1), rtol=1e-6)
    out = cuda.device_array((R, C), np.float32)
    assert hyp(libs[0].make(h), libs[1].make(h + 1), out=out) is out  # out= wins


# ---- the caller's stream -------------------------------------------------------------------------

N = 1 << 20


def _slow_identity(x, n):
    y = x
    for i in range(n):
        y = y + 1.0
    return y - n


slow = vectorize(["float64(float64, int64)"])(_slow_identity)


def _sized(run_once, sync, target_s, first=1):
    """How many repetitions of run_once(k) (k the count) take about target_s on this GPU: a race
    test's producer and consumer must outlast the host's queueing on any card (an H200 ran the
    fixed-size ones out before the checks)."""
    k = first
    while True:
        t0 = time.perf_counter()
        run_once(k)
        sync()
        dt = time.perf_counter() - t0
        if dt >= target_s / 8 or k >= 1 << 22:
            return max(first, int(k * target_s / max(dt, 1e-6)))
        k *= 4


@gpu
def test_torch_result_on_the_current_torch_stream():
    """torch.sin(hyp(t, t)) on a torch side stream: the result's DLPack export makes that stream
    wait for cufunc's kernel (a long one, after a long torch producer), with no manual sync."""
    torch = lib_of("torch") and sys.modules["torch"]
    a = torch.randn(4096, 4096, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        # warm-up on the side stream itself: cuBLAS's per-stream workspace and the caching
        # allocator's per-stream blocks are made on the host while the GPU drains; a cold first
        # producer finished before its consumer was queued (seen under pytest -n 4)
        for _ in range(2):
            b = a @ a
            (b / b.abs().max()).sum().item()
        # warm-up: the kernels for these sizes compile and load on the host (loading a module may
        # wait for the device: a first call inside the race showed as a host wait)
        w = torch.ones(N, dtype=torch.float64, device="cuda")
        slow(w, 1), hyp(w.float(), w.float())
    torch.cuda.synchronize()
    want = np.arange(N, dtype=np.float64)

    def matmuls(k):
        with torch.cuda.stream(s):
            b = a
            for _ in range(k):
                b = b @ b
                b = b / b.abs().max()
    rounds0 = _sized(matmuls, torch.cuda.synchronize, 0.3)
    w = torch.arange(N, dtype=torch.float64, device="cuda")
    n_slow = _sized(lambda k: slow(w, k), torch.cuda.synchronize, 0.2, 1 << 10)
    # A dry run of the consumers on s: PyTorch's caching allocator gets its blocks for these sizes
    # on s now. A first allocation of a size on a stream is a cudaMalloc, which waited on the host
    # for everything queued (seen: `r * 2` blocked for the whole of cufunc's kernel), and would
    # read as a host wait of cufunc's.
    with torch.cuda.stream(s):
        t = torch.arange(N, dtype=torch.float64, device="cuda")
        y, z = slow(t, 1) * 2, torch.sin(hyp(t.float(), t.float()))
        del t, y, z
    torch.cuda.synchronize()
    tried = []
    for rounds in (rounds0, 3 * rounds0, 9 * rounds0):
        # the race needs the producer still running when the consumer is queued; under pytest -n
        # the host can fall behind (seen twice): try longer producers before giving up
        with torch.cuda.stream(s):
            t0 = time.perf_counter()
            for _ in range(rounds):
                a = a @ a
                a = a / a.abs().max()
            t = torch.arange(N, dtype=torch.float64, device="cuda")  # after the matmuls, on s
            if s.query():
                tried.append("%d matmuls queued in %.1f ms" % (rounds,
                                                              1e3 * (time.perf_counter() - t0)))
                continue
            r = slow(t, n_slow)  # cufunc: after t (its producer's stream), a long kernel
            assert isinstance(r, torch.Tensor)
            y = r * 2  # on s: must wait for cufunc's kernel
            z = torch.sin(hyp(t.float(), t.float()))
            assert not s.query(), "a call on torch tensors waited on the host"
        break
    else:
        pytest.fail("the producer finished too soon to show a race each time: " + "; ".join(tried))
    s.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), want * 2)
    # the reference: sin of the same float32 hypot values (cufunc's hyp on host arrays); sin of
    # arguments near 1.5e6 is too ill-conditioned to compare with NumPy's float64 hypot
    w32 = want.astype(np.float32)
    np.testing.assert_allclose(z.cpu().numpy(), np.sin(hyp(w32, w32)), rtol=1e-4, atol=1e-4)


@gpu
def test_cupy_result_on_the_current_cupy_stream():
    cp = lib_of("cupy") and sys.modules["cupy"]
    want = np.arange(N, dtype=np.float64)
    cs = cp.cuda.Stream(non_blocking=True)
    a = cp.random.standard_normal((2048, 2048), dtype=cp.float32)
    sync = cp.cuda.Device().synchronize

    def matmuls(k):
        with cs:
            b = a
            for _ in range(k):
                b = b @ b
                b = b / cp.abs(b).max()
    w = cp.arange(N, dtype=cp.float64)
    matmuls(1), slow(w, 1)  # warm-up: CuPy's kernels load, cufunc's compiles, on the host
    sync()
    rounds = _sized(matmuls, sync, 0.3)
    n_slow = _sized(lambda k: slow(w, k), sync, 0.2, 1 << 10)
    with cs:
        for _ in range(rounds):
            a = a @ a
            a = a / cp.abs(a).max()
        x = cp.arange(N, dtype=cp.float64)
        assert not cs.done, "the producer finished too soon to show a race"
        r = slow(x, n_slow)  # CuPy's interface names cs: ordered on the device, not the host
        assert not cs.done, "a call on CuPy arrays synchronised on the host"
        assert isinstance(r, cp.ndarray)
        y = r * 2  # on cs: must wait for cufunc's kernel
    cs.synchronize()
    np.testing.assert_array_equal(y.get(), want * 2)


# ---- the output-type setting ---------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("producer", FOREIGN_LIBS)
def test_output_type_cufunc(producer):
    L = lib_of(producer)
    h = data()
    x = L.make(h)
    with cufunc.using_output_type("cufunc"):
        for engine in ("ufunc", "outer", "gufunc", "reduce", "accumulate"):
            r = ENGINES[engine][0](x, None)
            assert isinstance(r, cuda.DeviceNDArray), (engine, type(r))
    assert L.is_type(hyp(x, x))
    cufunc.set_global_output_type("cufunc")
    try:
        assert isinstance(hyp(x, x), cuda.DeviceNDArray)
        with cufunc.using_output_type("input"):
            assert L.is_type(hyp(x, x))
    finally:
        cufunc.set_global_output_type("input")


def test_output_type_setting():
    assert cufunc.get_output_type() == "input"
    with cufunc.using_output_type("cufunc"):
        assert cufunc.get_output_type() == "cufunc"
        with cufunc.using_output_type("input"):
            assert cufunc.get_output_type() == "input"
        assert cufunc.get_output_type() == "cufunc"
        seen = []
        t = threading.Thread(target=lambda: seen.append(cufunc.get_output_type()))
        t.start()
        t.join()
        assert seen == ["input"]  # a context setting: not another thread's
    assert cufunc.get_output_type() == "input"
    cufunc.set_global_output_type("cufunc")
    try:
        seen = []
        t = threading.Thread(target=lambda: seen.append(cufunc.get_output_type()))
        t.start()
        t.join()
        assert seen == ["cufunc"]  # the global one: every thread's
    finally:
        cufunc.set_global_output_type("input")
    for bad in ("cupy", None, 1):
        with pytest.raises(ValueError, match="output type must be one of"):
            cufunc.set_global_output_type(bad)
        with pytest.raises(ValueError, match="output type must be one of"):
            with cufunc.using_output_type(bad):
                pass


# ---- the rule, without a GPU: stand-in library modules --------------------------------------------

def fake_lib(monkeypatch, root, cls_name, module=None, attr=None):
    """A stand-in for library `root` in sys.modules: its array class (module `module`) and a
    from_dlpack that tags what it wraps."""
    mod = types.ModuleType(root)
    cls = type(cls_name, (), {"__module__": module or root})
    setattr(mod, attr or cls_name, cls)
    mod.from_dlpack = lambda x, _root=root: (_root, x)
    monkeypatch.setitem(sys.modules, root, mod)
    return cls


RULE = [
    # inputs (by stand-in name) -> the library whose wrapper is chosen (None: DeviceArrays)
    (("float", "numpy"), None),
    (("torch",), "torch"),
    (("cupy", "torch"), "cupy"),
    (("torch", "cupy"), "torch"),
    (("numpy", "float", "cupy"), "cupy"),
    (("other", "torch"), "torch"),  # an unknown CAI class does not decide
    (("other",), None),
]


@pytest.mark.parametrize("names, winner", RULE, ids=["-".join(n) for n, _ in RULE])
def test_the_first_foreign_device_array_decides(monkeypatch, names, winner):
    Tensor = fake_lib(monkeypatch, "torch", "Tensor")
    ndarray = fake_lib(monkeypatch, "cupy", "ndarray", module="cupy._core.core")
    Other = type("Other", (), {"__module__": "somelib"})
    make = {"float": lambda: 1.5, "numpy": lambda: np.ones(3, np.float32), "torch": Tensor,
            "cupy": ndarray, "other": Other}
    wrap = _core._result_wrapper([make[n]() for n in names])
    if winner is None:
        assert wrap is None
    else:
        assert wrap("r") == (winner, "r")
    with cufunc.using_output_type("cufunc"):
        assert _core._result_wrapper([make[n]() for n in names]) is None


def test_wrapper_for_imports_nothing(monkeypatch):
    for root in ("torch", "cupy", "jax", "jaxlib", "numba"):
        monkeypatch.delitem(sys.modules, root, raising=False)
    for module in ("torch", "cupy._core.core", "jaxlib.xla_extension", "numba.cuda.cudadrv"):
        tp = type("X", (), {"__module__": module})
        assert _interop.wrapper_for(tp) is None
    for root in ("torch", "cupy", "jax", "jaxlib", "numba"):
        assert root not in sys.modules
    assert _interop.wrapper_for(np.ndarray) is None
    assert _interop.wrapper_for(int) is None


def test_not_a_device_array_class_of_the_library(monkeypatch):
    fake_lib(monkeypatch, "torch", "Tensor")
    Size = type("Size", (), {"__module__": "torch"})  # torch, but not a tensor
    assert _interop.wrapper_for(Size) is None


def _real_types(name):
    """(the library's device array type, the wrapper cufunc should pick) of an installed library;
    no GPU needed."""
    if name == "cupy":
        pytest.importorskip("cupy")
        return sys.modules["cupy"].ndarray, None  # cufunc's wrapper by address (see _interop._cupy)
    if name == "jax":
        pytest.importorskip("jax")
        import jax.dlpack
        import jax.numpy as jnp
        return type(jnp.zeros(1)), jax.dlpack.from_dlpack
    if name == "numba":
        pytest.importorskip("numba")
        from numba import cuda as ncuda
        from numba.cuda.cudadrv.devicearray import DeviceNDArray
        return DeviceNDArray, ncuda.as_cuda_array
    torch = pytest.importorskip("torch")
    return torch.Tensor, None  # a wrapper of cufunc's over torch._C (see _interop._torch)


@pytest.mark.parametrize("name", ["cupy", "jax", "numba", "torch"])
def test_the_real_libraries_types(name):
    tp, want = _real_types(name)
    got = _interop.wrapper_for(tp)
    assert got is want if want is not None else callable(got)


def test_out_real_jax_array_is_a_type_error():
    pytest.importorskip("jax")
    import jax.numpy as jnp
    with pytest.raises(TypeError, match="cannot be a JAX array.*JAX arrays are immutable"):
        hyp(data(), data(), out=jnp.zeros((R, C), jnp.float32))


JAX_OUTS = [
    ("ufunc", lambda h, o: hyp(h, h, out=o), "ufunc 'hyp': out 0"),
    ("ufunc_positional", lambda h, o: hyp(h, h, o), "out 0"),
    ("outer", lambda h, o: hyp.outer(h[0], h[1], out=o), "out 0"),
    ("gufunc", lambda h, o: rowsum(h, out=o), "out 0"),
    ("reduce", lambda h, o: add.reduce(h, axis=0, out=o), "out"),
    ("accumulate", lambda h, o: add.accumulate(h, axis=0, out=o), "out"),
    ("cuda_reduce", lambda h, o: sum_reduce(h[0], res=o), "res"),
]


@pytest.mark.parametrize("engine, call, what", JAX_OUTS, ids=[e for e, _, _ in JAX_OUTS])
def test_out_jax_array_is_a_type_error(engine, call, what):
    """Refused while classifying, before the GPU: JAX arrays are immutable."""
    ArrayImpl = type("ArrayImpl", (), {"__module__": "jaxlib.xla_extension"})
    with pytest.raises(TypeError, match="cannot be a JAX array.*JAX arrays are immutable") as e:
        call(data(), ArrayImpl())
    assert what in str(e.value)


# The README's and docs' code blocks run in tests/python/test_docs_examples.py.
