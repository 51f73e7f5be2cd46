"""Reduction benchmarks, one run on the GPU machine, peers beside us, each figure printed
beside its target:

  * the card's device-to-device copy bandwidth (read + write), measured first: the ceiling;
  * cuda.reduce sum, max and a user lambda on 2^28 float32 (GB/s read), beside CuPy's sum (CUB),
    CuPy's ReductionKernel, PyTorch's sum and Numba's cuda.reduce; target >= CuPy's sum and
    >= 15x Numba's cuda.reduce;
  * float64, int64 (2^27 elements) and complex64 (2^27) sums; target >= 90% of copy bandwidth;
  * a cuda.reduce call on 1024 elements with res= on the device (us per call); target <= 6 us,
    beside Numba's call and CuPy's sum;
  * ufunc.reduce over axis 0 and axis 1 of a (16384, 16384) float32 array; target >= 90% of copy
    bandwidth each, beside CuPy's sum over each axis and Numba's ufunc.reduce (2^26 float32);
  * ufunc.accumulate (add) on 2^28 float32 (GB/s read + write); target >= 80% of copy bandwidth,
    beside CuPy's and PyTorch's cumsum.

Reductions count the bytes read; the copy and accumulate count read + write.
Usage: python3 bench/bench_reduce.py [--reps N]
"""
import argparse

import numpy as np

from benchlib import timeit, peers

if not hasattr(np, "row_stack"):          # numba-cuda 0.30 under NumPy >= 2.5
    np.row_stack = np.vstack

from cufunc import cuda, vectorize


@cuda.reduce
def sum_reduce(a, b):
    return a + b


@cuda.reduce
def max_reduce(a, b):
    return a if a > b else b


lambda_reduce = cuda.Reduce(lambda a, b: a + b * 1)


@vectorize(["float32(float32, float32)", "float64(float64, float64)"], identity=0)
def add(a, b):
    return a + b


def _accumulate_row(h, label, frac, add, P, reps, sync, copy_bw):
    """ufunc.accumulate(add) over h beside CuPy's and PyTorch's cumsum: a row of the table."""
    d = cuda.to_device(h)
    o = cuda.device_array(h.size, h.dtype)
    add.accumulate(d[:1 << 20], out=o[:1 << 20])
    ref = np.cumsum(h[:1 << 20].astype(np.float64))
    assert np.all(np.abs(o[:1 << 20].copy_to_host() - ref) <= 1e-4 * ref)
    nbytes = 2 * h.nbytes
    gbs = nbytes / timeit(lambda: add.accumulate(d, out=o), sync, reps, 3) / 1e9
    peer = {}
    if "cupy" in P:
        cp = P["cupy"]
        c, co = cp.asarray(h), cp.empty(h.size, h.dtype)
        peer["CuPy cumsum"] = nbytes / timeit(lambda: cp.cumsum(c, out=co),
                                              cp.cuda.runtime.deviceSynchronize, reps, 3) / 1e9
        del c, co
    if "torch" in P:
        torch = P["torch"]
        t = torch.from_numpy(h).cuda()
        to = torch.empty_like(t)
        peer["PyTorch cumsum"] = nbytes / timeit(lambda: torch.cumsum(t, 0, out=to),
                                                 torch.cuda.synchronize, reps, 3) / 1e9
        del t, to
    return ("ufunc.accumulate add, %s (GB/s, read + write)" % label, gbs, "GB/s",
            ">= %d%% of copy = %.0f" % (round(100 * frac), frac * copy_bw), gbs >= frac * copy_bw,
            peer)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    reps = args.reps
    P = peers()
    rows = []      # (figure, ours, unit, target text, met, peers)
    dev = cuda.get_current_device()
    rng = np.random.default_rng(0)
    sync = cuda.synchronize

    # -- copy bandwidth (the ceiling) --
    big = cuda.device_array(1 << 28, np.float32)
    big2 = cuda.device_array(1 << 28, np.float32)
    copy_bw = 2 * big.nbytes / timeit(lambda: big2.copy_to_device(big), sync, reps) / 1e9
    rows.append(("device-to-device copy, 1 GiB (GB/s, read + write)", copy_bw, "GB/s", "ceiling",
                 None, {}))
    del big, big2

    # -- cuda.reduce on 2^28 float32 --
    n = 1 << 28
    h = rng.random(n, dtype=np.float32)
    d = cuda.to_device(h)
    res = cuda.device_array(1, np.float32)
    nbytes = 4 * n
    want = float(np.sum(h, dtype=np.float64))
    sum_reduce(d, res=res)
    assert abs(float(res.copy_to_host()[0]) - want) <= 1e-5 * want
    t_sum = timeit(lambda: sum_reduce(d, res=res), sync, reps, 5)
    t_sum_host = timeit(lambda: sum_reduce(d), lambda: None, reps, 5)
    t_max = timeit(lambda: max_reduce(d, res=res), sync, reps, 5)
    max_reduce(d, res=res, init=0)
    assert res.copy_to_host()[0] == h.max()
    t_lam = timeit(lambda: lambda_reduce(d, res=res), sync, reps, 5)
    peer = {}
    cub = None
    numba_reduce = None
    if "cupy" in P:
        cp = P["cupy"]
        ca = cp.asarray(h)
        cub = nbytes / timeit(lambda: cp.sum(ca), cp.cuda.runtime.deviceSynchronize, reps, 5) / 1e9
        peer["CuPy sum (CUB)"] = cub
        rk = cp.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0", "bench_sum")
        peer["CuPy ReductionKernel"] = nbytes / timeit(lambda: rk(ca), cp.cuda.runtime.deviceSynchronize,
                                                       reps, 5) / 1e9
    if "torch" in P:
        torch = P["torch"]
        ta = torch.from_numpy(h).cuda()
        peer["PyTorch sum"] = nbytes / timeit(lambda: torch.sum(ta), torch.cuda.synchronize, reps, 5) / 1e9
    if "numba" in P:
        ncuda, nvectorize = P["numba"]
        nred = ncuda.Reduce(lambda a, b: a + b)
        na = ncuda.to_device(h)
        nres = ncuda.device_array(1, np.float32)
        numba_reduce = nbytes / timeit(lambda: nred(na, res=nres), ncuda.synchronize, max(3, reps // 3)) / 1e9
        peer["Numba cuda.reduce"] = numba_reduce

    def target_sum(gbs):
        goals = []
        met = True
        if cub is not None:
            goals.append(">= CuPy CUB %.0f" % cub)
            met &= gbs >= cub
        if numba_reduce is not None:
            goals.append(">= 15x Numba %.0f" % (15 * numba_reduce))
            met &= gbs >= 15 * numba_reduce
        return " and ".join(goals) or ">= CuPy CUB (not installed)", met
    for label, t in [("cuda.reduce sum, 2^28 float32, res= (GB/s)", t_sum),
                     ("cuda.reduce max, 2^28 float32, res= (GB/s)", t_max),
                     ("cuda.reduce user lambda, 2^28 float32, res= (GB/s)", t_lam)]:
        gbs = nbytes / t / 1e9
        text, met = target_sum(gbs)
        rows.append((label, gbs, "GB/s", text, met, peer if "sum" in label else {}))
    rows.append(("cuda.reduce sum, 2^28 float32, host result (GB/s)", nbytes / t_sum_host / 1e9,
                 "GB/s", "-", None, {}))
    del d
    if "cupy" in P:
        del ca

    # -- other dtypes --
    for name, dt, count in [("float64", np.float64, 1 << 27), ("int64", np.int64, 1 << 27),
                            ("complex64", np.complex64, 1 << 27)]:
        if dt == np.int64:
            x = rng.integers(-1000, 1000, count, dtype=np.int64)
        elif dt == np.complex64:
            x = (rng.random(count, dtype=np.float32) + 1j * rng.random(count, dtype=np.float32)).astype(dt)
        else:
            x = rng.random(count)
        dx = cuda.to_device(x)
        rx = cuda.device_array(1, dt)
        if dt == np.int64:
            sum_reduce(dx, res=rx)
            assert rx.copy_to_host()[0] == x.sum()
        gbs = x.nbytes / timeit(lambda: sum_reduce(dx, res=rx), sync, reps, 5) / 1e9
        p2 = {}
        if "cupy" in P:
            cx = cp.asarray(x)
            p2["CuPy sum"] = x.nbytes / timeit(lambda: cp.sum(cx), cp.cuda.runtime.deviceSynchronize,
                                              reps, 5) / 1e9
            del cx
        rows.append(("cuda.reduce sum, 2^27 %s (GB/s)" % name, gbs, "GB/s",
                     ">= 90%% of copy = %.0f" % (0.9 * copy_bw), gbs >= 0.9 * copy_bw, p2))
        del dx, x

    # -- one call on 1024 elements --
    small = cuda.to_device(rng.random(1024, dtype=np.float32))
    sres = cuda.device_array(1, np.float32)
    t_small = timeit(lambda: sum_reduce(small, res=sres), sync, 7, 5000)
    t_small_host = timeit(lambda: sum_reduce(small), lambda: None, 7, 2000)
    p3 = {}
    if "cupy" in P:
        cs = cp.asarray(small.copy_to_host())
        p3["CuPy sum"] = 1e6 * timeit(lambda: cp.sum(cs), cp.cuda.runtime.deviceSynchronize, 7, 5000)
    if "torch" in P:
        ts = torch.from_numpy(small.copy_to_host()).cuda()
        p3["PyTorch sum"] = 1e6 * timeit(lambda: torch.sum(ts), torch.cuda.synchronize, 7, 5000)
    if "numba" in P:
        ns = ncuda.to_device(small.copy_to_host())
        p3["Numba cuda.reduce"] = 1e6 * timeit(lambda: nred(ns, res=nres), ncuda.synchronize, 7, 200)
    rows.append(("cuda.reduce call, 1024 float32, res= on the device (us)", 1e6 * t_small, "us",
                 "<= 6", 1e6 * t_small <= 6, p3))
    rows.append(("cuda.reduce call, 1024 float32, host result (us)", 1e6 * t_small_host, "us", "-",
                 None, {}))

    # -- ufunc.reduce over each axis of (16384, 16384) float32 --
    m = 16384
    hm = rng.random((m, m), dtype=np.float32)
    dm = cuda.to_device(hm)
    for axis in (0, 1):
        o = cuda.device_array(m, np.float32)
        add.reduce(dm, axis=axis, out=o)
        got = o.copy_to_host()
        exact = np.add.reduce(hm.astype(np.float64), axis=axis)
        assert np.all(np.abs(got - exact) <= 1e-5 * exact)
        gbs = hm.nbytes / timeit(lambda: add.reduce(dm, axis=axis, out=o), sync, reps, 3) / 1e9
        p4 = {}
        if "cupy" in P:
            cm = cp.asarray(hm)
            p4["CuPy sum"] = hm.nbytes / timeit(lambda: cp.sum(cm, axis=axis),
                                               cp.cuda.runtime.deviceSynchronize, reps, 3) / 1e9
            del cm
        if "torch" in P:
            tm = torch.from_numpy(hm).cuda()
            p4["PyTorch sum"] = hm.nbytes / timeit(lambda: torch.sum(tm, dim=axis),
                                                  torch.cuda.synchronize, reps, 3) / 1e9
            del tm
        rows.append(("ufunc.reduce axis %d, (16384, 16384) float32 (GB/s)" % axis, gbs, "GB/s",
                     ">= 90%% of copy = %.0f" % (0.9 * copy_bw), gbs >= 0.9 * copy_bw, p4))
    del dm
    n26 = 1 << 26
    h26 = rng.random(n26, dtype=np.float32)
    d26 = cuda.to_device(h26)
    r26 = cuda.device_array((), np.float32)
    gbs = h26.nbytes / timeit(lambda: add.reduce(d26, out=r26), sync, reps, 5) / 1e9
    p5 = {}
    if "numba" in P:
        def numba_add(a, b):   # a named function: Numba's vectorize cannot take a lambda
            return a + b
        nadd = nvectorize(["float32(float32, float32)"], target="cuda")(numba_add)
        n26d = ncuda.to_device(h26)
        p5["Numba ufunc.reduce"] = h26.nbytes / timeit(lambda: nadd.reduce(n26d), ncuda.synchronize,
                                                       max(3, reps // 3)) / 1e9
    rows.append(("ufunc.reduce, 2^26 float32 (GB/s)", gbs, "GB/s", "-", None, p5))
    del d26

    # -- accumulate: 2^28 float32 (>= 88% of copy) and 2^27 float64 (>= 85%) --
    for h, label, frac in ((rng.random(n, dtype=np.float32), "2^28 float32", 0.88),
                           (rng.random(n // 2), "2^27 float64", 0.85)):
        rows.append(_accumulate_row(h, label, frac, add, P, reps, sync, copy_bw))

    print("\ncufunc reductions on %s" % dev.name)
    print("| figure | cufunc | target | met | peers |")
    print("|---|---|---|---|---|")
    for label, ours, unit, target, met, peer in rows:
        ps = ", ".join("%s %.4g" % (k, v) for k, v in peer.items()) or "-"
        mark = "-" if met is None else ("yes" if met else "NO")
        print("| %s | %.4g | %s | %s | %s |" % (label, ours, target, mark, ps))
    print("(copy bandwidth %.0f GB/s measured in this run)" % copy_bw)


if __name__ == "__main__":
    main()
