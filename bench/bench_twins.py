"""NumPy's ufuncs on cufunc DeviceArrays, one run on the GPU machine:

  * np.sin(d) and d + d on 1-element float32 DeviceArrays: per-call time beside the same call of a
    cufunc ufunc (vectorize) on the same arrays; target: within 1.3x of it;
  * the same at 2^26 float32: bandwidth (GB/s, read + write) beside the cufunc ufunc's; target: the
    same bandwidth;
  * np.add.at with 2^24 random int64 indices into 2^16 float32 bins (values float32, on the GPU):
    ms per call, beside cupy.add.at and torch.Tensor.index_add_ (peers where installed). cufunc's
    call waits for the GPU (it reads the bad-index flag back), so every figure includes a sync.

Usage: python3 bench/bench_twins.py [--reps N]
"""
import argparse

import numpy as np

from benchlib import timeit, peers

from cufunc import cuda, vectorize


@vectorize(["float32(float32)"])
def vsin(x):
    return np.sin(x)


@vectorize(["float32(float32, float32)"])
def vadd(x, y):
    return x + y


def sync():
    cuda.synchronize()


def per_call(reps):
    a = cuda.to_device(np.ones(1, np.float32))
    o = cuda.device_array(1, np.float32)
    rows = []
    for label, twin_fn, uf_fn in (
            ("np.sin(d)", lambda: np.sin(a), lambda: vsin(a)),
            ("d + d", lambda: a + a, lambda: vadd(a, a)),
            ("np.sin(d, out=o)", lambda: np.sin(a, out=o), lambda: vsin(a, out=o)),
            ("np.add(d, d, out=o)", lambda: np.add(a, a, out=o), lambda: vadd(a, a, out=o))):
        t_twin = timeit(twin_fn, sync, reps, inner=2000)
        t_uf = timeit(uf_fn, sync, reps, inner=2000)
        rows.append((label, t_twin, t_uf))
        print("%-22s twin %7.2f us   cufunc ufunc %7.2f us   ratio %.2f (target <= 1.3)"
              % (label, t_twin * 1e6, t_uf * 1e6, t_twin / t_uf))
    return rows


def bandwidth(reps):
    n = 1 << 26
    a = cuda.to_device(np.random.default_rng(0).random(n, dtype=np.float32))
    o = cuda.device_array(n, np.float32)
    for label, twin_fn, uf_fn, nbytes in (
            ("np.sin(d, out=o)", lambda: np.sin(a, out=o), lambda: vsin(a, out=o), 8 * n),
            ("np.add(d, d, out=o)", lambda: np.add(a, a, out=o), lambda: vadd(a, a, out=o), 12 * n)):
        t_twin = timeit(twin_fn, sync, reps, inner=5)
        t_uf = timeit(uf_fn, sync, reps, inner=5)
        print("%-22s 2^26 float32: twin %7.1f GB/s   cufunc ufunc %7.1f GB/s"
              % (label, nbytes / t_twin / 1e9, nbytes / t_uf / 1e9))


def add_at(reps):
    nidx, nbins = 1 << 24, 1 << 16
    rng = np.random.default_rng(1)
    idx = rng.integers(0, nbins, size=nidx)
    vals = rng.random(nidx, dtype=np.float32)
    want = np.zeros(nbins, np.float32)
    np.add.at(want, idx, vals)
    d_idx, d_vals = cuda.to_device(idx), cuda.to_device(vals)
    bins = cuda.to_device(np.zeros(nbins, np.float32))
    t = timeit(lambda: np.add.at(bins, d_idx, d_vals), sync, reps)
    print("np.add.at(d, 2^24 idx, 2^24 float32) into 2^16 bins: cufunc %.3f ms" % (t * 1e3))
    check = cuda.to_device(np.zeros(nbins, np.float32))
    np.add.at(check, d_idx, d_vals)
    err = np.abs(check.copy_to_host() - want).max() / np.abs(want).max()
    print("  (relative error against NumPy %.2e: float32 atomics in another order)" % err)
    p = peers()
    if "cupy" in p:
        cp = p["cupy"]
        ci, cv, cb = cp.asarray(idx), cp.asarray(vals), cp.zeros(nbins, cp.float32)
        t = timeit(lambda: cp.add.at(cb, ci, cv), cp.cuda.Device().synchronize, reps)
        print("  cupy.add.at            %.3f ms" % (t * 1e3))
    if "torch" in p:
        torch = p["torch"]
        ti = torch.as_tensor(idx, device="cuda")
        tv = torch.as_tensor(vals, device="cuda")
        tb = torch.zeros(nbins, dtype=torch.float32, device="cuda")
        t = timeit(lambda: tb.index_add_(0, ti, tv), torch.cuda.synchronize, reps)
        print("  torch.index_add_       %.3f ms" % (t * 1e3))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    print("device:", cuda.get_current_device().name)
    per_call(args.reps)
    bandwidth(args.reps)
    add_at(args.reps)


if __name__ == "__main__":
    main()
