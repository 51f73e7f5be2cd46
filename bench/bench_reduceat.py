"""ufunc.reduceat: 2^26 float32 in 2^10, 2^16 and 2^22 equal segments (np.add.reduceat on a
cufunc DeviceArray, through the twin), beside CuPy's cupy.add.reduceat and, where it is
installed, cuda.compute's segmented_reduce, against the device-to-device copy bandwidth measured
in the same run.

Bytes counted: the array read, the indices read and the results written. Two forms of indices:
  * device indices (a DeviceArray of int64): checked on the device by a kernel the reduction is
    queued behind (NumPy's IndexError, nothing written: the reduction reads the check's verdict
    first); the call waits for the check alone, so the GPU does not idle between the two;
  * host indices (a NumPy int64 array): checked on the host, moved over with the call.
Targets: >= 85% of the copy bandwidth for 2^10 and 2^16 segments, ahead of CuPy at all three
sizes. Each result is checked against NumPy on the host (float32 sums of values in [0, 1):
|got - want| <= 1e-5 * want).

Run: python3 bench/bench_reduceat.py [--reps N]"""
import argparse

import numpy as np

from benchlib import peers, timeit
from cufunc import cuda


def _segmented_reduce():
    """cuda.compute's segmented_reduce, or None (the package is seldom installed)."""
    for mod in ("cuda.compute", "cuda.cccl.parallel.experimental"):
        try:
            m = __import__(mod, fromlist=["segmented_reduce"])
            return getattr(m, "segmented_reduce", None)
        except Exception:  # noqa: BLE001 - absent: reported as such
            continue
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    reps = args.reps
    P = peers()
    sync = cuda.synchronize
    dev = cuda.get_current_device()

    big = cuda.device_array(1 << 28, np.float32)
    big2 = cuda.device_array(1 << 28, np.float32)
    copy_bw = 2 * big.nbytes / timeit(lambda: big2.copy_to_device(big), sync, reps) / 1e9
    del big, big2

    n = 1 << 26
    h = np.random.default_rng(0).random(n, dtype=np.float32)
    d = cuda.to_device(h)
    cp = P.get("cupy")
    cx = cp.asarray(h) if cp is not None else None
    seg_reduce = _segmented_reduce()
    rows = []
    cupy_err = {}   # CuPy's largest relative error against the float64 sums (not asserted)
    for lg in (10, 16, 22):
        k = 1 << lg
        idx = np.arange(0, n, n // k, dtype=np.int64)
        didx = cuda.to_device(idx)
        out = cuda.device_array(k, np.float32)
        want = np.add.reduceat(h.astype(np.float64), idx)
        got = np.add.reduceat(d, didx, out=out).copy_to_host()
        assert np.all(np.abs(got - want) <= 1e-5 * want + 1e-6), "device indices: wrong result"
        got = np.add.reduceat(d, idx, out=out).copy_to_host()
        assert np.all(np.abs(got - want) <= 1e-5 * want + 1e-6), "host indices: wrong result"
        nbytes = h.nbytes + idx.nbytes + 4 * k
        gb_dev = nbytes / timeit(lambda: np.add.reduceat(d, didx, out=out), sync, reps, 10) / 1e9
        gb_host = nbytes / timeit(lambda: np.add.reduceat(d, idx, out=out), sync, reps, 10) / 1e9
        peer = {}
        if cx is not None:
            cidx = cp.asarray(idx)
            cg = cp.add.reduceat(cx, cidx).get()
            cupy_err[lg] = float(np.max(np.abs(cg - want) / np.maximum(want, 1e-30)))
            t = timeit(lambda: cp.add.reduceat(cx, cidx), cp.cuda.Device().synchronize, reps, 10)
            peer["cupy"] = nbytes / t / 1e9
        target = 0.85 * copy_bw if lg < 22 else None
        best = max(gb_dev, gb_host)
        met = (target is None or best >= target) and all(best > v for v in peer.values())
        rows.append((lg, gb_dev, gb_host, peer, target, met))

    print("\nreduceat of 2^26 float32 on %s (GB/s: array read + indices read + results written)"
          % dev.name)
    print("| segments | cufunc, device indices | cufunc, host indices | CuPy add.reduceat | "
          "target | met |")
    print("|---|---|---|---|---|---|")
    for lg, gd, gh, peer, target, met in rows:
        tt = ">= %.0f (85%% of copy), ahead of CuPy" % target if target else "ahead of CuPy"
        print("| 2^%d | %.0f | %.0f | %s | %s | %s |" % (
            lg, gd, gh, "%.0f" % peer["cupy"] if "cupy" in peer else "not installed", tt,
            "yes" if met else "NO"))
    print("(copy bandwidth %.0f GB/s, read + write, measured in this run)" % copy_bw)
    for lg, e in cupy_err.items():
        print("CuPy add.reduceat, 2^%d segments: largest relative error %.2g" % (lg, e))
    print("cuda.compute segmented_reduce: %s" % (
        "installed but not timed here" if seg_reduce is not None else "not installed"))


if __name__ == "__main__":
    main()
