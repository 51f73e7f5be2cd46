"""cufunc calls captured in CUDA graphs: PyTorch's torch.cuda.graph, CuPy's Stream.begin_capture,
cufunc's own Stream.begin_capture, torch.compile(mode="reduce-overhead").

Every engine is captured (ufunc call with out= and with a fresh result, outer, gufunc,
ufunc.reduce / accumulate, cuda.reduce with res=, ufunc.at, NumPy's twins and the operators on
DeviceArrays), with a kernel loaded before the capture (warm) and one first used inside it (cold);
the graph is replayed after new data was copied into its input buffers, and every result is
compared with NumPy's. Calls that cannot be captured (host operands, a host scalar) must raise
GraphCaptureError and leave the capture valid: the capture goes on, ends and replays right.
The first tests need no GPU: the stream argument's checks.
"""
import importlib.util
import itertools
import math
import os
import sys
import tempfile

import numpy as np
import pytest

from cufunc import _core, cuda, errors, vectorize
from cufunc.guvectorize import guvectorize
from gpu_common import slow

_serial = itertools.count()


_FRESH_DIR = tempfile.mkdtemp(prefix="cufunc_graph_test_")


def fresh_ufunc():
    """A ufunc whose kernels no call has loaded yet (a cold call): a new function, in a module
    of its own (its source differs, so do its element-wise and reduction kernels)."""
    n = next(_serial)
    k = 1.0  # x * k + y must stay associative: the reductions and scans regroup their terms
    name = "cf_graph_fresh_%d_%d" % (os.getpid(), n)
    path = os.path.join(_FRESH_DIR, name + ".py")
    with open(path, "w") as f:
        f.write("def body(x, y):\n    return x * %r + y + %d.0 * 0.0\n" % (k, n))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return vectorize(["float32(float32, float32)", "float64(float64, float64)"])(mod.body), k


@vectorize(["float32(float32, float32)", "float64(float64, float64)"])
def hyp(x, y):
    return math.sqrt(x * x + y * y)


@vectorize(["float32(float32, float32)", "float64(float64, float64)"], identity=0)
def plus(x, y):
    return x + y


@guvectorize(["void(float32[:], float32[:], float32[:])"], "(n),(n)->()")
def dot(a, b, out):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * b[i]
    out[0] = s


def add2(a, b):
    return a + b


sum_reduce = cuda.reduce(add2)


# ---- no GPU: the stream argument --------------------------------------------------------------


class CudaStreamObject:
    """Any object speaking the CUDA stream protocol (cuda.core's Stream does)."""

    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def test_stream_argument_accepts_the_protocol():
    _core.check_stream(CudaStreamObject(0))
    _core.check_stream(None)
    _core.check_stream(0)


@pytest.mark.parametrize("bad", [True, 3.5, "s", object(), 12345])
def test_stream_argument_refuses_others(bad):
    with pytest.raises(TypeError, match="stream"):
        _core.check_stream(bad)


def test_graph_capture_error_is_a_runtime_error():
    assert issubclass(errors.GraphCaptureError, RuntimeError)


def test_no_capture_on_this_thread():
    assert _core._capturing() is None


def test_graph_type_and_stream_methods_exist():
    assert hasattr(_core, "Graph")
    for name in ("begin_capture", "end_capture", "is_capturing"):
        assert callable(getattr(_core.Stream, name))


# ---- fixtures --------------------------------------------------------------------------------


@pytest.fixture
def torch():
    t = pytest.importorskip("torch")
    if not t.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    return t


@pytest.fixture
def cupy():
    cp = pytest.importorskip("cupy")
    return cp


def rng(seed=0):
    return np.random.default_rng(seed)


def close(got, want, rtol=1e-5):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=1e-5)


# ---- PyTorch: torch.cuda.graph ------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("warm", [True, False])
def test_torch_graph_elementwise(torch, warm):
    f, k = fresh_ufunc()
    n = 4099
    h = rng(1).random((2, n), dtype=np.float32)
    x = torch.tensor(h[0], device="cuda")
    y = torch.tensor(h[1], device="cuda")
    out = torch.empty_like(x)
    if warm:
        f(x, y, out=out)
        hyp(x, y)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        f(x, y, out=out)                 # out=
        r = hyp(out, y)                  # a fresh result
        r2 = f(r, x)                     # a chain of fresh results
    for seed in (2, 3):
        h = rng(seed).random((2, n), dtype=np.float32)
        x.copy_(torch.tensor(h[0]))
        y.copy_(torch.tensor(h[1]))
        g.replay()
        torch.cuda.synchronize()
        o = h[0] * k + h[1]
        rr = np.hypot(o, h[1])
        close(out.cpu(), o)
        close(r.cpu(), rr)
        close(r2.cpu(), rr * k + h[0])
    assert isinstance(r2, torch.Tensor)


@pytest.mark.gpu
@pytest.mark.parametrize("warm", [True, False])
def test_torch_graph_every_engine(torch, warm):
    n = 512
    h = rng(4).random((3, n), dtype=np.float32)
    x = torch.tensor(h[0], device="cuda")
    y = torch.tensor(h[1], device="cuda")
    m = torch.tensor(h[2].reshape(16, 32), device="cuda")
    res = torch.zeros(1, device="cuda")
    f, k = fresh_ufunc()

    def calls():
        return (f.outer(x[:8], y[:5]), dot(m, m), f.reduce(m, axis=0), f.accumulate(m, axis=1),
                plus.reduce(m, axis=1), sum_reduce(x, res=res))

    if warm:
        calls()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outer, d, red, acc, red2, none = calls()
    assert none is None
    for seed in (5, 6):
        h = rng(seed).random((3, n), dtype=np.float32)
        x.copy_(torch.tensor(h[0]))
        y.copy_(torch.tensor(h[1]))
        m.copy_(torch.tensor(h[2].reshape(16, 32)))
        res.fill_(-1.0)
        g.replay()
        torch.cuda.synchronize()
        hm = h[2].reshape(16, 32)
        close(outer.cpu(), h[0][:8, None] * k + h[1][None, :5])
        close(d.cpu(), (hm * hm).sum(axis=1), rtol=1e-4)
        want = hm[0]
        for i in range(1, 16):
            want = want * k + hm[i]
        close(red.cpu(), want, rtol=1e-4)
        wacc = hm.copy()
        for j in range(1, 32):
            wacc[:, j] = wacc[:, j - 1] * k + hm[:, j]
        close(acc.cpu(), wacc, rtol=1e-4)
        close(red2.cpu(), hm.sum(axis=1), rtol=1e-4)
        close(res.cpu(), [h[0].sum()], rtol=1e-4)


@pytest.mark.gpu
def test_torch_graph_refused_calls_leave_it_valid(torch):
    x = torch.rand(100, device="cuda")
    out = torch.empty_like(x)
    hyp(x, x, out=out)
    torch.cuda.synchronize()
    host = np.ones(100, np.float32)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        with pytest.raises(errors.GraphCaptureError, match="device arrays"):
            hyp(host, host)
        with pytest.raises(errors.GraphCaptureError, match="res="):
            sum_reduce(x)
        with pytest.raises(errors.GraphCaptureError):
            hyp(x, host)
        hyp(x, x, out=out)
    x.copy_(torch.arange(100, dtype=torch.float32, device="cuda"))
    g.replay()
    torch.cuda.synchronize()
    close(out.cpu(), np.arange(100, dtype=np.float32) * math.sqrt(2))


@pytest.mark.gpu
def test_torch_compile_reduce_overhead(torch):
    try:
        import torch._inductor  # noqa: F401
        import triton  # noqa: F401
    except Exception as e:  # a visible skip: no inductor/triton on this machine
        pytest.skip("torch.compile unavailable: %s" % e)

    def fn(a, b):
        return hyp(a * 2, b) + 1

    cfn = torch.compile(fn, mode="reduce-overhead")
    for i in range(4):
        a = torch.rand(1000, device="cuda") + i
        b = torch.rand(1000, device="cuda")
        got = cfn(a, b)
        torch.cuda.synchronize()
        close(got.cpu(), np.hypot(a.cpu().numpy() * 2, b.cpu().numpy()) + 1, rtol=1e-4)


# ---- CuPy: Stream.begin_capture -----------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("warm", [True, False])
def test_cupy_capture(cupy, warm):
    f, k = fresh_ufunc()
    n = 1000
    h = rng(7).random((2, n))
    x = cupy.asarray(h[0])
    y = cupy.asarray(h[1])
    out = cupy.empty_like(x)
    res = cupy.zeros(1)
    m = cupy.asarray(h[0][:960].reshape(30, 32))
    if warm:
        f(x, y, out=out)
        hyp(out, y)
        f.reduce(m, axis=0)
        plus.accumulate(m, axis=1)
        sum_reduce(x, res=res)
    cupy.cuda.Device().synchronize()
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        f(x, y, out=out)
        r = hyp(out, y)
        red = f.reduce(m, axis=0)
        acc = plus.accumulate(m, axis=1)
        sum_reduce(x, res=res, stream=s)
        g = s.end_capture()
    for seed in (8, 9):
        h = rng(seed).random((2, n))
        x.set(h[0])
        y.set(h[1])
        m[...] = x[:960].reshape(30, 32)
        g.launch(s)
        s.synchronize()
        o = h[0] * k + h[1]
        close(out.get(), o)
        close(r.get(), np.hypot(o, h[1]))
        hm = h[0][:960].reshape(30, 32)
        want = hm[0]
        for i in range(1, 30):
            want = want * k + hm[i]
        close(red.get(), want)
        close(acc.get(), np.cumsum(hm, axis=1))
        close(res.get(), [h[0].sum()])


@pytest.mark.gpu
def test_cupy_capture_refused_call_leaves_it_valid(cupy):
    x = cupy.arange(50, dtype=cupy.float64)
    out = cupy.empty_like(x)
    hyp(x, x, out=out)
    s = cupy.cuda.Stream(non_blocking=False)  # blocking: the legacy stream would join it
    with s:
        s.begin_capture()
        with pytest.raises(errors.GraphCaptureError):
            hyp(np.ones(3), np.ones(3))
        hyp(x, x, out=out)
        g = s.end_capture()
    x += 1
    cupy.cuda.Device().synchronize()
    g.launch(s)
    s.synchronize()
    close(out.get(), np.arange(1, 51) * math.sqrt(2))


# ---- cufunc's own streams -----------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("warm", [True, False])
def test_own_stream_capture(warm):
    f, k = fresh_ufunc()
    n = 777
    h = rng(10).random((2, n), dtype=np.float32)
    x = cuda.to_device(h[0])
    y = cuda.to_device(h[1])
    out = cuda.device_array_like(x)
    res = cuda.device_array(1, np.float32)
    m = cuda.to_device(h[0][:768].reshape(24, 32))
    mc = cuda.device_array((24, 32), np.float32)
    a = cuda.to_device(np.zeros(8, np.float32))
    idx = cuda.to_device(np.array([1, 3, 3, 7], np.int64))
    vals = cuda.to_device(np.ones(4, np.float32))
    s = cuda.stream()

    def work():
        f(x, y, out=out)                        # out= (the fast path's arguments)
        r = f(out, y)                           # fresh, chained
        t = np.hypot(r, x)                      # a NumPy twin
        u = t + x * 2                           # operators
        o = hyp.outer(x[:4], y[:3])
        d = dot(m, m)
        red = plus.reduce(m, axis=0)
        acc = plus.accumulate(m, axis=1)
        sum_reduce(x, res=res, stream=s)
        np.add.at(a, idx, vals)                 # ufunc.at, device indices and values
        plus(m, m, out=mc)
        return r, t, u, o, d, red, acc

    if warm:
        work()
        cuda.synchronize()
        a.copy_to_device(np.zeros(8, np.float32))
    s.begin_capture()
    assert s.is_capturing()
    assert _core._capturing() is s
    results = work()
    g = s.end_capture()
    assert not s.is_capturing()
    assert g.node_count >= 11
    g.upload()
    for seed in (11, 12):
        h = rng(seed).random((2, n), dtype=np.float32)
        x.copy_to_device(h[0])
        y.copy_to_device(h[1])
        m.copy_to_device(h[0][:768].reshape(24, 32))
        a.copy_to_device(np.zeros(8, np.float32))
        g.launch(s)
        r, t, u, o, d, red, acc = [v.copy_to_host() for v in results]   # ordered after it
        o_ = h[0] * k + h[1]
        r_ = o_ * k + h[1]
        close(out.copy_to_host(), o_)
        close(r, r_)
        close(t, np.hypot(r_, h[0]))
        close(u, np.hypot(r_, h[0]) + h[0] * 2)
        close(o, np.hypot(h[0][:4, None], h[1][None, :3]))
        hm = h[0][:768].reshape(24, 32)
        close(d, (hm * hm).sum(axis=1), rtol=1e-4)
        close(red, hm.sum(axis=0), rtol=1e-4)
        close(acc, np.cumsum(hm, axis=1), rtol=1e-4)
        close(res.copy_to_host(), [h[0].sum()], rtol=1e-4)
        close(a.copy_to_host(), [0, 1, 0, 2, 0, 0, 0, 1])
        close(mc.copy_to_host(), hm * 2)


@pytest.mark.gpu
def test_own_capture_refusals_leave_it_valid():
    x = cuda.to_device(np.arange(10, dtype=np.float64))
    out = cuda.device_array_like(x)
    hyp(x, x, out=out)
    s = cuda.stream()
    s.begin_capture()
    try:
        with pytest.raises(errors.GraphCaptureError, match="device arrays"):
            hyp(np.ones(10), x)
        with pytest.raises(errors.GraphCaptureError, match="res="):
            sum_reduce(x)
        with pytest.raises(errors.GraphCaptureError):
            np.add.at(out, np.array([1, 2]), 1.0)
        hyp(x, x, out=out)
    finally:
        g = s.end_capture()
    x.copy_to_device(np.arange(10, 20, dtype=np.float64))
    g.launch(s)
    close(out.copy_to_host(), np.arange(10, 20) * math.sqrt(2))


@pytest.mark.gpu
def test_own_graph_orders_after_other_streams_and_before_later_work(cupy):
    """The graph's launch waits for a write queued on a non-blocking stream just before it, and
    work after the launch reads what it wrote."""
    n = 1 << 16
    x = cuda.to_device(np.zeros(n))
    out = cuda.device_array_like(x)
    s = cuda.stream()
    s.begin_capture()
    hyp(x, x, out=out)
    g = s.end_capture()
    side = cupy.cuda.Stream(non_blocking=True)
    for k in range(3):
        src = cuda.to_device(np.full(n, 3.0 + k))
        slow(src, 20000, out=x, stream=CudaStreamObject(side.ptr))  # tens of ms on `side`
        g.launch(s)
        close(out.copy_to_host(), np.full(n, 3.0 + k) * math.sqrt(2))


@pytest.mark.gpu
def test_stream_argument_protocol_objects_and_cuda_core():
    s = cuda.stream()
    x = cuda.to_device(np.arange(5, dtype=np.float32))
    r = hyp(x, x, stream=CudaStreamObject(s.handle))
    s.synchronize()
    close(r.copy_to_host(), np.arange(5) * math.sqrt(2))
    with pytest.raises(TypeError, match="__cuda_stream__"):
        hyp(x, x, stream=type("Bad", (), {"__cuda_stream__": lambda self: 5})())
    core = pytest.importorskip("cuda.core")
    if not hasattr(core, "Device"):
        core = pytest.importorskip("cuda.core.experimental")
    dev = core.Device()
    dev.set_current()
    cs = dev.create_stream()
    r = hyp(x, x, stream=cs)
    cs.sync()
    close(r.copy_to_host(), np.arange(5) * math.sqrt(2))
