"""@vectorize benchmarks, one run on the GPU machine, peers beside us.

  * hypot on two 2^26-element float32 device arrays (12 bytes per element moved), beside PyTorch,
    CuPy and Numba, and the card's device-to-device copy bandwidth (read + write);
  * a call on one-element device arrays with out= given (per-call overhead), beside CuPy, PyTorch
    and Numba; the bare launch floor comes from the C program bench_launch (same run);
  * hypot from NumPy arrays in and out (PCIe both ways), streamed through overlapped chunks
    (src/hostpipe.c: the chunk count and streams used are printed beside it, and the whole-array
    path's time for comparison; a sweep over chunk sizes and stream counts follows the table);
  * broadcast (4096, 1) with (1, 4096), and a transposed (non-contiguous) input;
  * the first call of a new signature (NVRTC compile) and the first call in a new process with a
    warm disk cache.

Usage: python3 bench/bench_vectorize.py [--reps N]
"""
import argparse
import math

import numpy as np

from bench_first_call import first_call_rows
from benchlib import timeit, peers

if not hasattr(np, "row_stack"):          # numba-cuda 0.30 under NumPy >= 2.5
    np.row_stack = np.vstack

from cufunc import _core, cuda, vectorize


@vectorize(["float32(float32, float32)", "float64(float64, float64)"])
def hypot(x, y):
    return math.sqrt(x * x + y * y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    reps = args.reps
    P = peers()
    rows = []
    dev = cuda.get_current_device()
    n = 1 << 26
    rng = np.random.default_rng(0)
    ha = rng.random(n, dtype=np.float32)
    hb = rng.random(n, dtype=np.float32)
    want = np.hypot(ha, hb)

    # -- copy bandwidth (the ceiling) --
    big = cuda.device_array(1 << 28, np.float32)
    big2 = cuda.device_array(1 << 28, np.float32)
    t = timeit(lambda: big2.copy_to_device(big), cuda.synchronize, reps)
    copy_bw = 2 * big.nbytes / t / 1e9
    rows.append(("device-to-device copy, 1 GiB (GB/s, read + write)", copy_bw, {}))
    del big, big2

    # -- hypot on device arrays --
    da, db = cuda.to_device(ha), cuda.to_device(hb)
    dout = cuda.device_array(n, np.float32)
    hypot(da, db, out=dout)
    assert np.allclose(dout.copy_to_host(), want, rtol=1e-6)
    t_out = timeit(lambda: hypot(da, db, out=dout), cuda.synchronize, reps, 5)
    t_new = timeit(lambda: hypot(da, db), cuda.synchronize, reps, 5)
    peer = {}
    if "torch" in P:
        torch = P["torch"]
        ta, tb = torch.from_numpy(ha).cuda(), torch.from_numpy(hb).cuda()
        to = torch.empty_like(ta)
        peer["PyTorch"] = 12 * n / timeit(lambda: torch.hypot(ta, tb, out=to),
                                          torch.cuda.synchronize, reps, 5) / 1e9
    if "cupy" in P:
        cp = P["cupy"]
        ca, cb = cp.asarray(ha), cp.asarray(hb)
        co = cp.empty_like(ca)
        peer["CuPy"] = 12 * n / timeit(lambda: cp.hypot(ca, cb, out=co),
                                       cp.cuda.runtime.deviceSynchronize, reps, 5) / 1e9
    if "numba" in P:
        ncuda, nvectorize = P["numba"]
        def numba_hypot(x, y):    # a named function: Numba's vectorize cannot take a lambda
            return math.sqrt(x * x + y * y)
        nh = nvectorize(["float32(float32, float32)"], target="cuda")(numba_hypot)
        na, nb = ncuda.to_device(ha), ncuda.to_device(hb)
        no = ncuda.device_array(n, np.float32)
        peer["Numba"] = 12 * n / timeit(lambda: nh(na, nb, out=no), ncuda.synchronize, reps, 5) / 1e9
    rows.append(("hypot, 2^26 float32 device arrays, out= given (GB/s)", 12 * n / t_out / 1e9, peer))
    rows.append(("hypot, 2^26 float32 device arrays, new output (GB/s)", 12 * n / t_new / 1e9, {}))

    # -- one-element calls --
    a1, b1, o1 = (cuda.to_device(np.ones(1, np.float32)) for _ in range(3))
    t1 = timeit(lambda: hypot(a1, b1, out=o1), cuda.synchronize, 7, 5000)
    peer = {}
    if "torch" in P:
        ta1, tb1, to1 = (torch.ones(1, device="cuda") for _ in range(3))
        peer["PyTorch"] = 1e6 * timeit(lambda: torch.hypot(ta1, tb1, out=to1),
                                       torch.cuda.synchronize, 7, 5000)
    if "cupy" in P:
        ca1, cb1, co1 = (cp.ones(1, cp.float32) for _ in range(3))
        peer["CuPy"] = 1e6 * timeit(lambda: cp.hypot(ca1, cb1, out=co1),
                                    cp.cuda.runtime.deviceSynchronize, 7, 5000)
    if "numba" in P:
        na1, nb1, no1 = (ncuda.to_device(np.ones(1, np.float32)) for _ in range(3))
        peer["Numba"] = 1e6 * timeit(lambda: nh(na1, nb1, out=no1), ncuda.synchronize, 7, 500)
    rows.append(("call on 1-element device arrays, out= given (us)", 1e6 * t1, peer))

    # -- NumPy in, NumPy out --
    calls = _core._hostpipe_last()["calls"]
    th = timeit(lambda: hypot(ha, hb), lambda: None, max(3, reps // 3))
    pipe = _core._hostpipe_last()
    if pipe["calls"] == calls:                 # the call did not take the pipelined path
        pipe = dict(pipe, chunks=0, streams=0)
    assert np.allclose(hypot(ha, hb), want, rtol=1e-6)
    cfg = _core._hostpipe_config()
    _core._hostpipe_config(min_kb=1 << 30)     # every call below 1 TiB: the whole-array path
    tw = timeit(lambda: hypot(ha, hb), lambda: None, max(3, reps // 3))
    _core._hostpipe_config(**cfg)
    peer = {"pipeline chunks": pipe["chunks"], "streams": pipe["streams"],
            "whole-array path (ms)": 1e3 * tw}
    if "cupy" in P:
        peer["CuPy"] = 1e3 * timeit(lambda: cp.asnumpy(cp.hypot(cp.asarray(ha), cp.asarray(hb))),
                                    lambda: None, max(3, reps // 3))
    if "torch" in P:
        peer["PyTorch"] = 1e3 * timeit(
            lambda: torch.hypot(torch.from_numpy(ha).cuda(), torch.from_numpy(hb).cuda()).cpu().numpy(),
            lambda: None, max(3, reps // 3))
    if "numba" in P:
        peer["Numba"] = 1e3 * timeit(lambda: nh(ha, hb), lambda: None, max(3, reps // 3))
    rows.append(("hypot, 2^26 float32 NumPy arrays in and out (ms)", 1e3 * th, peer))
    del da, db, dout

    # -- broadcast and transposed --
    m = 4096
    col = cuda.to_device(rng.random((m, 1), dtype=np.float32))
    row = cuda.to_device(rng.random((1, m), dtype=np.float32))
    ob = cuda.device_array((m, m), np.float32)
    tb_ = timeit(lambda: hypot(col, row, out=ob), cuda.synchronize, reps, 5)
    peer = {}
    if "cupy" in P:
        cc, cr, cob = cp.asarray(col.copy_to_host()), cp.asarray(row.copy_to_host()), cp.empty((m, m), cp.float32)
        peer["CuPy"] = (4 * m * m + 8 * m) / timeit(lambda: cp.hypot(cc, cr, out=cob),
                                                   cp.cuda.runtime.deviceSynchronize, reps, 5) / 1e9
    if "torch" in P:
        tc, tr, tob = torch.from_numpy(col.copy_to_host()).cuda(), torch.from_numpy(row.copy_to_host()).cuda(), torch.empty((m, m), device="cuda")
        peer["PyTorch"] = (4 * m * m + 8 * m) / timeit(lambda: torch.hypot(tc, tr, out=tob),
                                                      torch.cuda.synchronize, reps, 5) / 1e9
    rows.append(("broadcast (4096,1) with (1,4096) (GB/s, output + inputs)", (4 * m * m + 8 * m) / tb_ / 1e9, peer))
    sq = cuda.to_device(rng.random((m, m), dtype=np.float32))
    sqt = cuda.to_device(rng.random((m, m), dtype=np.float32)).T
    tt = timeit(lambda: hypot(sq, sqt, out=ob), cuda.synchronize, reps, 5)
    peer = {}
    if "cupy" in P:
        cs, cst = cp.asarray(sq.copy_to_host()), cp.asarray(rng.random((m, m), dtype=np.float32)).T
        peer["CuPy"] = 12 * m * m / timeit(lambda: cp.hypot(cs, cst, out=cob),
                                           cp.cuda.runtime.deviceSynchronize, reps, 5) / 1e9
    if "torch" in P:
        ts_, tst = torch.from_numpy(sq.copy_to_host()).cuda(), torch.rand((m, m), device="cuda").T
        peer["PyTorch"] = 12 * m * m / timeit(lambda: torch.hypot(ts_, tst, out=tob),
                                              torch.cuda.synchronize, reps, 5) / 1e9
    rows.append(("hypot with a transposed 4096^2 input (GB/s, 12 B/element)", 12 * m * m / tt / 1e9, peer))

    # -- compile and warm-cache first call in new processes (medians: bench_first_call.py) --
    rows += first_call_rows(5)

    print("\ncufunc vectorize on %s" % dev.name)
    print("| figure | cufunc | peers |")
    print("|---|---|---|")
    for label, ours, peer in rows:
        ps = ", ".join("%s %.3g" % (k, v) for k, v in peer.items()) or "-"
        print("| %s | %.3g | %s |" % (label, ours, ps))
    print("(copy bandwidth %.0f GB/s)" % copy_bw)
    hostpipe_sweep(ha, hb, want, max(3, reps // 3))


def hostpipe_sweep(ha, hb, want, reps):
    """hypot on the 2^26 float32 NumPy arrays over chunk sizes and stream counts (the defaults'
    evidence: bench/HOSTPIPE_NOTES.md)."""
    cfg = _core._hostpipe_config()
    print("\nhost-array pipeline, hypot on two 2^26 float32 NumPy arrays (ms)")
    print("| chunk MiB | S=2 | S=3 | S=4 |")
    print("|---|---|---|---|")
    try:
        for chunk_mib in (2, 4, 8, 16, 32):
            ts = []
            for streams in (2, 3, 4):
                _core._hostpipe_config(chunk_kb=chunk_mib * 1024, streams=streams, min_kb=0)
                ts.append(1e3 * timeit(lambda: hypot(ha, hb), lambda: None, reps))
                assert np.allclose(hypot(ha, hb), want, rtol=1e-6)
            print("| %d | %s |" % (chunk_mib, " | ".join("%.2f" % t for t in ts)))
    finally:
        _core._hostpipe_config(**cfg)


if __name__ == "__main__":
    main()
