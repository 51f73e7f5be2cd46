"""No call reads an array before the work that produced it, whatever streams the two were queued
on (the three races: inputs, outputs, frees).

Every test queues a long producer (a kernel whose loop runs for tens of milliseconds, a large
asynchronous copy, or a chain of large PyTorch/CuPy matmuls) and then the consumer at once, with no
synchronisation, and checks every value exactly. A consumer that did not wait reads the sentinel
the memory held before (or the pool's leftovers). Each producer asserts that it is still running
when the consumer is queued, so that a test which could not see a race fails instead of passing.

Tables: engines (ufunc call, gufunc call, ufunc.reduce / accumulate / outer, cuda.reduce,
copy_to_host, indexing, the host pipeline) x (producer stream, consumer stream) among the legacy
default stream, the per-thread default stream, cuda.stream() and an external stream (a PyTorch
side stream, else a CuPy non-blocking one). PyTorch, CuPy and Numba are imported with
importorskip: the GPU machine has them (a skip there shows in the -ra summary).
"""
import time

import numpy as np
import pytest

from cufunc import _core, cuda, vectorize
from gpu_common import add, host, rowsum, slow, sum_reduce

pytestmark = pytest.mark.gpu

N = 1 << 20          # elements of the produced array (float64: every value below is exact)
ROWS, COLS = 1024, 1024
SENTINEL = -7.0
STREAM_KINDS = ["legacy", "ptds", "stream", "external"]


def plus_one(x):
    return x + 1.0


add1 = vectorize(["float64(float64)"])(plus_one)


# ---- streams -------------------------------------------------------------------------------------

def _external_factory():
    """A function giving a new non-blocking stream of another library (kept alive by the caller)
    and the cufunc Stream over it; None when neither PyTorch nor CuPy is usable."""
    try:
        import torch
        if torch.cuda.is_available():
            def make():
                ts = torch.cuda.Stream()  # from PyTorch's pool: non-blocking
                return ts, cuda.external_stream(ts.cuda_stream)
            return make
    except ImportError:
        pass
    try:
        import cupy as cp

        def make():
            cs = cp.cuda.Stream(non_blocking=True)
            return cs, cuda.external_stream(cs.ptr)
        return make
    except ImportError:
        return None


class Streams:
    """Makes the stream of each kind; keeps the external libraries' objects alive."""

    def __init__(self):
        self.keep = []
        self.external = _external_factory()

    def make(self, kind):
        """(keyword arguments for a call on this stream, the cufunc Stream to query)."""
        if kind == "legacy":
            return {}, cuda.default_stream()
        if kind == "ptds":
            s = cuda.per_thread_default_stream()
            return {"stream": s}, s
        if kind == "stream":
            s = cuda.stream()
            self.keep.append(s)
            return {"stream": s}, s
        if self.external is None:
            pytest.skip("an external stream needs PyTorch or CuPy")
        owner, s = self.external()
        self.keep.append(owner)
        return {"stream": s}, s


@pytest.fixture
def streams():
    st = Streams()
    yield st
    cuda.synchronize()


@pytest.fixture(scope="module")
def n_iter():
    """Loop count giving a producer of about 60 ms on this GPU (at least 2000)."""
    src = cuda.to_device(np.arange(N, dtype=np.float64))
    out = cuda.device_array(N, np.float64)
    slow(src, 10, out=out)  # compile
    cuda.synchronize()
    n = 2000
    for _ in range(6):  # until a run is long enough for its time to be the loop's, not overhead
        t0 = time.perf_counter()
        slow(src, n, out=out)
        cuda.synchronize()
        dt = time.perf_counter() - t0
        if dt >= 0.02:
            break
        n = min(n * 16, 50_000_000)
    return int(min(max(2000, n * 0.06 / max(dt, 1e-4)), 50_000_000))


def still_running(s):
    assert not s.query(), ("the producer finished before the consumer was queued: this test "
                           "could not see a race (make the producer longer)")


def produce(streams, kind, n_iter, mode="out"):
    """Queue the long producer on a stream of `kind`: (the produced array, the values it must
    hold, the producer's Stream). mode 'out' writes a sentinel-filled array (allocated on the
    legacy stream) through out=; 'new' returns a new array allocated on the producer's stream."""
    want = np.arange(N, dtype=np.float64)
    src = cuda.to_device(want)
    kw, s = streams.make(kind)
    cuda.synchronize()
    if mode == "out":
        out = cuda.to_device(np.full(N, SENTINEL))
        cuda.synchronize()
        slow(src, n_iter, out=out, **kw)
    else:
        out = slow(src, n_iter, **kw)
    still_running(s)
    return out, want, s


# ---- engines: consumer(d, kw) -> host values; want(w) -> the exact expected values -------------

ENGINES = {
    "ufunc": (lambda d, kw: host(add1(d, **kw)), lambda w: w + 1.0),
    "ufunc_out": (lambda d, kw: host(add1(d, out=cuda.device_array_like(d), **kw)),
                  lambda w: w + 1.0),
    "gufunc": (lambda d, kw: host(rowsum(d.reshape(ROWS, COLS), **kw)),
               lambda w: w.reshape(ROWS, COLS).sum(axis=1)),
    "reduce": (lambda d, kw: host(add.reduce(d, **kw)), lambda w: np.array(w.sum())),
    "accumulate": (lambda d, kw: host(add.accumulate(d, **kw)), lambda w: np.cumsum(w)),
    "outer": (lambda d, kw: host(add.outer(d[-512:], d[-512:], **kw)),
              lambda w: np.add.outer(w[-512:], w[-512:])),
    "cuda_reduce": (lambda d, kw: np.asarray(sum_reduce(d, **kw)), lambda w: np.array(w.sum())),
    "copy_to_host": (lambda d, kw: d.copy_to_host(**kw), lambda w: w),
}

PAIRS = [(p, c) for p in STREAM_KINDS for c in STREAM_KINDS]


@pytest.mark.parametrize("producer,consumer", PAIRS)
@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_consumer_waits_for_producer(streams, n_iter, engine, producer, consumer):
    d, want, _ = produce(streams, producer, n_iter)
    kw, _ = streams.make(consumer)
    run, expected = ENGINES[engine]
    got = run(d, kw)
    np.testing.assert_array_equal(got, expected(want))


@pytest.mark.parametrize("producer,consumer", PAIRS)
@pytest.mark.parametrize("engine", ["ufunc", "gufunc", "cuda_reduce"])
def test_consumer_waits_for_a_new_result(streams, n_iter, engine, producer, consumer):
    """`r = slow(d, stream=s)` then a consumer on another stream (the cuda.reduce case)."""
    d, want, _ = produce(streams, producer, n_iter, mode="new")
    kw, _ = streams.make(consumer)
    run, expected = ENGINES[engine]
    np.testing.assert_array_equal(run(d, kw), expected(want))


@pytest.mark.parametrize("producer", STREAM_KINDS)
def test_indexing_waits_for_producer(streams, n_iter, producer):
    d, want, _ = produce(streams, producer, n_iter)
    assert d[N - 1] == want[N - 1]
    assert d[0] == want[0]


@pytest.mark.parametrize("producer,consumer", PAIRS)
def test_chain_of_writers(streams, n_iter, producer, consumer):
    """A second writer on another stream, then a reader on a third: each waits for the last."""
    d, want, _ = produce(streams, producer, n_iter)
    kw, _ = streams.make(consumer)
    add1(d, out=d, **kw)                    # reads and writes d after the producer
    kw3, _ = streams.make("stream")
    np.testing.assert_array_equal(host(add1(d, **kw3)), want + 2.0)


@pytest.mark.parametrize("producer", ["legacy", "ptds", "stream"])
@pytest.mark.parametrize("consumer", STREAM_KINDS)
def test_numba_style_copy_then_call(streams, producer, consumer):
    """`d = cuda.to_device(h, stream=s); r = hyp(d, d)`: the call never reads d before the copy
    lands (pinned source: the copy is asynchronous; 2**25 float64 take milliseconds)."""
    n = 1 << 25
    h = cuda.pinned_array(n, np.float64)
    h[:] = np.arange(n, dtype=np.float64)
    kw, s = streams.make(producer)
    # an explicit stream makes the copy asynchronous (stream=0 would wait for it)
    d = cuda.to_device(h, stream=s)
    still_running(s)
    ckw, _ = streams.make(consumer)
    r = add(d, d, **ckw)
    np.testing.assert_array_equal(host(r), 2.0 * np.arange(n, dtype=np.float64))


@pytest.mark.parametrize("producer", ["legacy", "ptds", "stream"])
@pytest.mark.parametrize("consumer", STREAM_KINDS)
def test_host_pipeline_reads_after_async_copy_to_host(streams, n_iter, producer, consumer):
    """The host pipeline reads host inputs with the CPU: an asynchronous copy_to_host into pinned
    memory on the legacy, per-thread default or a cufunc stream must have landed first (as a
    kernel call in Numba, whose copy on the legacy stream waits for those streams). An external
    non-blocking producer stream is the user's to synchronise, as in Numba and PyTorch."""
    hp = cuda.pinned_array(N, np.float64)
    hp[:] = SENTINEL
    d, want, s = produce(streams, producer, n_iter)
    d.copy_to_host(hp, stream=s)  # asynchronous: pinned, and a stream is given
    calls = _core._hostpipe_last()["calls"]
    ckw, _ = streams.make(consumer)
    r = add1(hp, **ckw)
    assert _core._hostpipe_last()["calls"] == calls + 1, "the call did not use the host pipeline"
    np.testing.assert_array_equal(r, want + 1.0)


# ---- the CUDA Array Interface and DLPack exports ---------------------------------------------

@pytest.mark.parametrize("producer", STREAM_KINDS)
def test_cai_names_the_pending_stream(streams, n_iter, producer):
    d, want, s = produce(streams, producer, n_iter)
    cai = d.__cuda_array_interface__
    # d was allocated on the legacy stream but last written on the producer's
    expected = {"legacy": 1, "ptds": 2}.get(producer, s.handle)
    assert cai["stream"] == expected and cai["stream"] != 0
    # and the data is in place for a consumer that ignores the stream
    np.testing.assert_array_equal(d.copy_to_host(), want)


# ---- PyTorch -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.fail("PyTorch is installed but sees no CUDA device while cufunc does")
    # Warm-up: the first matmuls load cuBLAS and its kernels on the host while the GPU drains, so a
    # cold first producer can finish before its consumer is queued (seen: "finished too soon").
    torch_busy(torch, rounds=2)
    torch.arange(N, dtype=torch.float64, device="cuda")
    torch.cuda.synchronize()
    return torch


def torch_busy(torch, size=4096, rounds=24):
    """Keep torch's current stream busy for tens of milliseconds (matmuls of size**3)."""
    a = torch.randn(size, size, device="cuda")
    for _ in range(rounds):
        a = a @ a
        a = a / a.abs().max()
    return a


TORCH_ENGINES = {
    "ufunc": (lambda x, kw: host(add1(x, **kw)), lambda w: w + 1.0),
    "gufunc": (lambda x, kw: host(rowsum(x.view(ROWS, COLS), **kw)),
               lambda w: w.reshape(ROWS, COLS).sum(axis=1)),
    "reduce": (lambda x, kw: host(add.reduce(x, **kw)), lambda w: np.array(w.sum())),
    "cuda_reduce": (lambda x, kw: np.asarray(sum_reduce(x, **kw)), lambda w: np.array(w.sum())),
}


@pytest.mark.parametrize("consumer", ["legacy", "ptds", "stream", "torch_current"])
@pytest.mark.parametrize("engine", sorted(TORCH_ENGINES))
def test_torch_side_stream_to_cufunc(torch, streams, engine, consumer):
    want = np.arange(N, dtype=np.float64)
    ts = torch.cuda.Stream()
    with torch.cuda.stream(ts):
        torch_busy(torch)
        x = torch.arange(N, dtype=torch.float64, device="cuda")  # queued after the matmuls
        assert not ts.query(), "the producer finished too soon to show a race"
        if consumer == "torch_current":
            kw = {"stream": cuda.external_stream(ts.cuda_stream)}
        else:
            kw, _ = streams.make(consumer)
        run, expected = TORCH_ENGINES[engine]
        got = run(x, kw)
    np.testing.assert_array_equal(got, expected(want))


@pytest.mark.parametrize("protocol", ["as_tensor", "from_dlpack"])
@pytest.mark.parametrize("producer", STREAM_KINDS)
def test_cufunc_to_torch_side_stream(torch, streams, n_iter, protocol, producer):
    d, want, _ = produce(streams, producer, n_iter)
    ts = torch.cuda.Stream()
    with torch.cuda.stream(ts):
        t = torch.as_tensor(d, device="cuda") if protocol == "as_tensor" else torch.from_dlpack(d)
        y = t * 2
    ts.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), want * 2)


# ---- CuPy ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cp():
    cp = pytest.importorskip("cupy")
    # warm-up: CuPy compiles its kernels on first use (see torch's fixture), arange's too
    cupy_busy(cp, rounds=2)
    cp.arange(N, dtype=cp.float64)
    cp.cuda.Device().synchronize()
    return cp


def cupy_busy(cp, size=4096, rounds=24):
    a = cp.random.standard_normal((size, size), dtype=cp.float32)
    for _ in range(rounds):
        a = a @ a
        a = a / cp.abs(a).max()
    return a


@pytest.mark.parametrize("consumer", ["legacy", "ptds", "stream"])
@pytest.mark.parametrize("engine", ["ufunc", "reduce", "cuda_reduce"])
def test_cupy_side_stream_to_cufunc(cp, streams, engine, consumer):
    want = np.arange(N, dtype=np.float64)
    cs = cp.cuda.Stream(non_blocking=True)
    with cs:
        cupy_busy(cp)
        x = cp.arange(N, dtype=cp.float64)
        assert not cs.done, "the producer finished too soon to show a race"
        kw, _ = streams.make(consumer)
        run, expected = TORCH_ENGINES[engine]
        got = run(x, kw)
    np.testing.assert_array_equal(got, expected(want))


@pytest.mark.parametrize("producer", STREAM_KINDS)
def test_cufunc_to_cupy_side_stream(cp, streams, n_iter, producer):
    d, want, _ = produce(streams, producer, n_iter)
    cs = cp.cuda.Stream(non_blocking=True)
    with cs:
        y = cp.asarray(d) * 2
    cs.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(y), want * 2)


# ---- Numba ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def numba_cuda():
    np.row_stack = np.vstack  # numba-cuda 0.30 still calls it; NumPy 2.x deprecates it
    pytest.importorskip("numba")
    from numba import cuda as ncuda
    if not ncuda.is_available():
        pytest.fail("Numba is installed but sees no CUDA device while cufunc does")
    return ncuda


@pytest.mark.parametrize("consumer", STREAM_KINDS)
def test_numba_stream_copy_to_cufunc(numba_cuda, streams, consumer):
    """Numba's own stream and array: `s = numba.cuda.stream(); d = numba.cuda.to_device(h,
    stream=s); hyp(d, d)` with no synchronisation."""
    n = 1 << 25
    h = numba_cuda.pinned_array(n, np.float64)
    h[:] = np.arange(n, dtype=np.float64)
    ns = numba_cuda.stream()
    d = numba_cuda.to_device(h, stream=ns)
    kw, _ = streams.make(consumer)
    r = add(d, d, **kw)
    np.testing.assert_array_equal(host(r), 2.0 * np.arange(n, dtype=np.float64))
