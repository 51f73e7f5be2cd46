"""Foundation benchmarks, run on the GPU machine:

  * device-to-device copy bandwidth of the card (bytes read + written): the ceiling every later
    benchmark is held against;
  * host-to-device and device-to-host bandwidth of cuda.to_device / copy_to_host on 256 MiB
    pageable NumPy arrays, beside CuPy's and Numba's on the same arrays in the same run, and pinned
    memory (the PCIe ceiling);
  * the first compile of a small kernel with an empty cache, and its load from a warm disk cache
    in a new process.

Prints one table. Usage: python3 bench/bench_foundation.py [--mib 256] [--reps 7]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchlib import timeit

if not hasattr(np, "row_stack"):          # numba-cuda 0.30 under NumPy >= 2.5
    np.row_stack = np.vstack

import cufunc
from cufunc import cuda


def gbps(nbytes, seconds):
    return nbytes / seconds / 1e9


def bench_ours(host, reps):
    out = {}
    d = cuda.to_device(host)
    back = np.empty_like(host)
    out["h2d"] = gbps(host.nbytes, timeit(lambda: d.copy_to_device(host), cuda.synchronize, reps))
    out["h2d_new"] = gbps(host.nbytes, timeit(lambda: cuda.to_device(host), cuda.synchronize, reps))
    out["d2h"] = gbps(host.nbytes, timeit(lambda: d.copy_to_host(back), cuda.synchronize, reps))
    assert np.array_equal(back, host), "cufunc round trip corrupted data"
    pinned = cuda.pinned_array(host.shape, host.dtype)
    pinned[...] = host
    out["h2d_pinned"] = gbps(host.nbytes, timeit(lambda: d.copy_to_device(pinned), cuda.synchronize, reps))
    out["d2h_pinned"] = gbps(host.nbytes, timeit(lambda: d.copy_to_host(pinned), cuda.synchronize, reps))
    return out


def bench_d2d_ours(nbytes, reps):
    n = nbytes // 4
    a = cuda.to_device(np.arange(n, dtype=np.float32))
    b = cuda.device_array(n, np.float32)
    t = timeit(lambda: b.copy_to_device(a), cuda.synchronize, reps)
    return gbps(2 * nbytes, t)


def bench_cupy(host, reps):
    try:
        import cupy as cp
    except Exception as e:  # noqa: BLE001
        return {"error": "CuPy not available: %s" % e}
    out = {}
    sync = cp.cuda.runtime.deviceSynchronize
    d = cp.asarray(host)
    out["h2d"] = gbps(host.nbytes, timeit(lambda: d.set(host), sync, reps))
    out["h2d_new"] = gbps(host.nbytes, timeit(lambda: cp.asarray(host), sync, reps))
    back = np.empty_like(host)
    out["d2h"] = gbps(host.nbytes, timeit(lambda: d.get(out=back), sync, reps))
    # device-to-device copy with CUDA events
    n = 1 << 28
    a = cp.arange(n, dtype=cp.float32)
    b = cp.empty_like(a)
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(reps + 1):
        start.record()
        b[...] = a
        stop.record()
        stop.synchronize()
        ts.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    out["d2d"] = gbps(2 * a.nbytes, statistics.median(ts[1:]))
    return out


def bench_numba(host, reps):
    try:
        from numba import cuda as ncuda
    except Exception as e:  # noqa: BLE001
        return {"error": "Numba not available: %s" % e}
    out = {}
    d = ncuda.to_device(host)
    out["h2d"] = gbps(host.nbytes, timeit(lambda: d.copy_to_device(host), ncuda.synchronize, reps))
    out["h2d_new"] = gbps(host.nbytes, timeit(lambda: ncuda.to_device(host), ncuda.synchronize, reps))
    back = np.empty_like(host)
    out["d2h"] = gbps(host.nbytes, timeit(lambda: d.copy_to_host(back), ncuda.synchronize, reps))
    return out


COMPILE_CHILD = r"""
import json, sys, time
import numpy as np
from cufunc import cuda
import cufunc._core as core
src = sys.argv[1]
x = cuda.device_array(1024, np.float32)     # CUDA initialised before timing
cuda.synchronize()
t0 = time.perf_counter()
k = core.RawKernel(src, "fill")
k((1, 1, 1), (256, 1, 1), (x, np.float32(2.5), np.int32(1024)))
cuda.synchronize()
t1 = time.perf_counter()
assert (x.copy_to_host() == 2.5).all()
print(json.dumps({"seconds": t1 - t0, "stats": core.cache_stats()}))
"""

KERNEL = """
extern "C" __global__ void fill(float *x, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (; i < n; i += gridDim.x * blockDim.x) x[i] = v;
}
"""


def bench_compile():
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, CUFUNC_CACHE_DIR=d)
        # a fresh source each run, so nothing anywhere is warm
        src = KERNEL + "\n// %f\n" % time.time()
        cold = json.loads(subprocess.check_output([sys.executable, "-c", COMPILE_CHILD, src], env=env))
        warm = json.loads(subprocess.check_output([sys.executable, "-c", COMPILE_CHILD, src], env=env))
    return cold, warm


def cupy_compile():
    try:
        import cupy  # noqa: F401
    except Exception:
        return None
    child = r"""
import json, sys, time, cupy as cp
src = sys.argv[1]
x = cp.zeros(1024, cp.float32); cp.cuda.runtime.deviceSynchronize()
t0 = time.perf_counter()
k = cp.RawKernel(src, "fill")
k((1,), (256,), (x, cp.float32(2.5), cp.int32(1024)))
cp.cuda.runtime.deviceSynchronize()
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, CUPY_CACHE_DIR=d)
        src = KERNEL + "\n// %f\n" % time.time()
        cold = json.loads(subprocess.check_output([sys.executable, "-c", child, src], env=env))
        warm = json.loads(subprocess.check_output([sys.executable, "-c", child, src], env=env))
    return cold, warm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    if not cuda.is_available():
        sys.exit("no CUDA GPU: this benchmark needs one")
    dev = cuda.get_current_device()
    n = args.mib * (1 << 20) // 4
    rng = np.random.default_rng(0)
    host = rng.random(n, dtype=np.float32)

    d2d = bench_d2d_ours(1 << 30, args.reps)
    ours = bench_ours(host, args.reps)
    cp_ = bench_cupy(host, args.reps)
    nb = bench_numba(host, args.reps)
    cold, warm = bench_compile()
    cpc = cupy_compile()

    print("\ncufunc %s on %s (cc %d.%d)" % (cufunc.__version__, dev.name, *dev.compute_capability))
    print("| figure | cufunc | CuPy | Numba |")
    print("|---|---|---|---|")

    def f(d, k):
        if "error" in d:
            return "n/a"
        return "%.1f" % d[k] if k in d else "-"
    print("| device-to-device copy, 1 GiB (GB/s, read+write) | %.0f | %s | - |" % (d2d, f(cp_, "d2d") if "d2d" in cp_ else "n/a"))
    for key, label in (("h2d", "host-to-device, %d MiB pageable, into existing (GB/s)"),
                       ("h2d_new", "to_device, %d MiB pageable, new array (GB/s)"),
                       ("d2h", "device-to-host, %d MiB pageable (GB/s)")):
        print("| %s | %.1f | %s | %s |" % (label % args.mib, ours[key], f(cp_, key), f(nb, key)))
    print("| host-to-device, %d MiB pinned (GB/s) | %.1f | - | - |" % (args.mib, ours["h2d_pinned"]))
    print("| device-to-host, %d MiB pinned (GB/s) | %.1f | - | - |" % (args.mib, ours["d2h_pinned"]))
    print("| first compile + launch, empty cache (s) | %.3f | %s | - |" % (
        cold["seconds"], "%.3f" % cpc[0]["seconds"] if cpc else "n/a"))
    print("| load from warm disk cache + launch, new process (ms) | %.2f | %s | - |" % (
        warm["seconds"] * 1e3, "%.2f" % (cpc[1]["seconds"] * 1e3) if cpc else "n/a"))
    print("cache stats: cold %s / warm %s" % (cold["stats"], warm["stats"]))
    for name, d in (("CuPy", cp_), ("Numba", nb)):
        if "error" in d:
            print(name + ": " + d["error"])


if __name__ == "__main__":
    main()
