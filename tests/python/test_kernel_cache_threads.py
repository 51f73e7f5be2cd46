"""The kernel cache under threads (src/ktable.c, cf_ktable_get): threads calling a function whose
kernel is not compiled yet all get the right result, and the kernel is compiled once; a thread
compiling one kernel does not hold up another thread's call of a kernel already compiled."""

import threading
import time

import numpy as np
import pytest

from cufunc import cuda, guvectorize, vectorize

gpu = pytest.mark.gpu
THREADS = 8


def run_threads(fn, n=THREADS):
    barrier = threading.Barrier(n)
    errors, results = [], [None] * n

    def worker(i):
        try:
            barrier.wait()
            results[i] = fn(i)
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung in the kernel cache"
    assert errors == []
    return results


@gpu
def test_first_calls_from_many_threads_compile_once():
    @vectorize(["float32(float32, float32)"])
    def f(x, y):
        return x * 3 + y

    xs = [cuda.to_device(np.arange(1000, dtype=np.float32) + i) for i in range(THREADS)]
    got = run_threads(lambda i: f(xs[i], xs[i]).copy_to_host())
    for i, g in enumerate(got):
        x = np.arange(1000, dtype=np.float32) + i
        np.testing.assert_array_equal(g, x * np.float32(3) + x)
    assert f.kernel_count == 1


@gpu
def test_gufunc_and_reduce_first_calls_from_many_threads_compile_once():
    @guvectorize(["void(float64[:], float64[:])"], "(n)->()")
    def total(a, out):
        s = 0.0
        for i in range(a.shape[0]):
            s += a[i]
        out[0] = s

    @vectorize(["float64(float64, float64)"], identity=0)
    def add(x, y):
        return x + y

    m = cuda.to_device(np.arange(12.0).reshape(3, 4))
    got = run_threads(lambda i: (total(m).copy_to_host(), add.reduce(m, axis=1).copy_to_host()))
    want = np.arange(12.0).reshape(3, 4).sum(axis=1)
    for g, r in got:
        np.testing.assert_array_equal(g, want)
        np.testing.assert_array_equal(r, want)
    assert total.kernel_count == 1


@gpu
def test_a_compile_does_not_hold_up_calls_of_compiled_kernels():
    @vectorize(["float32(float32)", "float64(float64)"])
    def g(x):
        return x + 1

    a32 = cuda.to_device(np.ones(10, np.float32))
    g(a32)  # float32's kernel compiled
    a64 = cuda.to_device(np.ones(10, np.float64))
    done = threading.Event()
    compile_time = []

    def first_float64_call():
        t = time.perf_counter()
        g(a64)
        cuda.synchronize()
        compile_time.append(time.perf_counter() - t)
        done.set()

    t = threading.Thread(target=first_float64_call)
    t.start()
    calls = 0
    while not done.is_set():   # float32 calls go on while float64's kernel compiles
        np.testing.assert_array_equal(g(a32).copy_to_host(), np.full(10, 2, np.float32))
        calls += 1
    t.join()
    assert g.kernel_count == 2
    # The compile takes tens of milliseconds (NVRTC); a call of a compiled kernel microseconds:
    # had the compile held the ufunc's lock, no float32 call would have finished during it.
    if compile_time[0] > 0.01:
        assert calls > 1, (calls, compile_time)
