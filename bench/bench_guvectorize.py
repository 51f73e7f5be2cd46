"""@guvectorize benchmarks, one run on the GPU machine, peers beside us.

  * row sum '(n)->()' over a (65536, 1024) float32 device array (bytes: the input + the output),
    beside Numba's guvectorize(target='cuda') and CuPy's sum(axis=-1);
  * batched 4x4 matrix product '(m,n),(n,p)->(m,p)' over 2^20 float32 pairs (3 x 64 bytes per
    pair), beside Numba and CuPy's matmul;
  * the same two with an input broadcast along a loop dimension, which Numba cannot run (it is given
    the broadcast input materialised, for reference): a weighted row sum '(n),(n)->()' with one
    (1024,) weight vector for all rows, and A @ B with one (4, 4) B for all 2^20 As (bytes counted
    without the broadcast operand);
  * the card's device-to-device copy bandwidth (read + write), measured in the same run: the
    targets are >= 70% of it for the row sum, and >= 7x / >= 5x Numba for row sum / matmul;
  * small cores (flat tiles, bench/GUFUNC_NOTES.md): the cross product (3),(3)->(3) and
    the 4x4 matmul at >= 85% of copy. Both are timed with out= given (the benchmark's figure, as
    Numba is called) and with a fresh output. With out= given, an output is read in first (the
    body may read it, or write only part of it); before the flat tiles the matmul kernel so moved
    4 x 64 B per pair, not the 3 x 64 counted (printed with CUFUNC_GU_SMALL=0); with them, the
    compiler drops the reads of a core the body overwrites.

CUFUNC_GU_SMALL=0 in the environment plans the gufunc kernels as before the flat tiles (A/B:
bench/gusmall_check.sh runs this script both ways).

Usage: python3 bench/bench_guvectorize.py [--reps N]
"""
import argparse
import os

import numpy as np

from benchlib import timeit, peers

if not hasattr(np, "row_stack"):          # numba-cuda 0.30 under NumPy >= 2.5
    np.row_stack = np.vstack

from cufunc import cuda
from cufunc.guvectorize import guvectorize


def rowsum_body(x, out):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i]
    out[0] = s


def wsum_body(x, w, out):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * w[i]
    out[0] = s


def matmul_body(a, b, c):
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            s = 0.0
            for k in range(a.shape[1]):
                s += a[i, k] * b[k, j]
            c[i, j] = s


ROWSUM_SIG = (["void(float32[:], float32[:])"], "(n)->()")
WSUM_SIG = (["void(float32[:], float32[:], float32[:])"], "(n),(n)->()")
MATMUL_SIG = (["void(float32[:,:], float32[:,:], float32[:,:])"], "(m,n),(n,p)->(m,p)")
CROSS_SIG = (["void(float32[:], float32[:], float32[:])"], "(n),(n)->(n)")


def cross_body(a, b, c):
    c[0] = a[1] * b[2] - a[2] * b[1]
    c[1] = a[2] * b[0] - a[0] * b[2]
    c[2] = a[0] * b[1] - a[1] * b[0]

rowsum = guvectorize(*ROWSUM_SIG, target="cuda")(rowsum_body)
wsum = guvectorize(*WSUM_SIG, target="cuda")(wsum_body)
matmul = guvectorize(*MATMUL_SIG, target="cuda")(matmul_body)
cross = guvectorize(*CROSS_SIG, target="cuda")(cross_body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    reps = args.reps
    P = peers("guvectorize")
    rows = []
    dev = cuda.get_current_device()
    rng = np.random.default_rng(0)

    # -- copy bandwidth (the ceiling) --
    big = cuda.device_array(1 << 28, np.float32)
    big2 = cuda.device_array(1 << 28, np.float32)
    t = timeit(lambda: big2.copy_to_device(big), cuda.synchronize, reps)
    copy_bw = 2 * big.nbytes / t / 1e9
    rows.append(("device-to-device copy, 1 GiB (GB/s, read + write)", copy_bw, {}))
    del big, big2

    if "numba" in P:
        ncuda, nguvectorize = P["numba"]
        n_rowsum = nguvectorize(*ROWSUM_SIG, target="cuda")(rowsum_body)
        n_wsum = nguvectorize(*WSUM_SIG, target="cuda")(wsum_body)
        n_matmul = nguvectorize(*MATMUL_SIG, target="cuda")(matmul_body)

    # -- row sum --
    R, N = 65536, 1024
    hx = rng.random((R, N), dtype=np.float32)
    want = np.cumsum(hx, axis=-1, dtype=np.float32)[:, -1]
    dx = cuda.to_device(hx)
    dout = cuda.device_array(R, np.float32)
    rowsum(dx, out=dout)
    assert np.array_equal(dout.copy_to_host(), want)
    nbytes = 4 * R * N + 4 * R
    t_ours = timeit(lambda: rowsum(dx, out=dout), cuda.synchronize, reps, 5)
    ours = nbytes / t_ours / 1e9
    peer = {}
    if "numba" in P:
        nx, no = ncuda.to_device(hx), ncuda.device_array(R, np.float32)
        n_rowsum(nx, no)
        assert np.allclose(no.copy_to_host(), want, rtol=1e-5)
        peer["Numba"] = nbytes / timeit(lambda: n_rowsum(nx, no), ncuda.synchronize, reps, 2) / 1e9
    if "cupy" in P:
        cp = P["cupy"]
        cx, co = cp.asarray(hx), cp.empty(R, cp.float32)
        peer["CuPy sum(axis=-1)"] = nbytes / timeit(lambda: cp.sum(cx, axis=-1, out=co),
                                                    cp.cuda.runtime.deviceSynchronize, reps, 5) / 1e9
    rows.append(("row sum (n)->(), (65536, 1024) float32 (GB/s)", ours, peer))
    if "Numba" in peer:
        rows.append(("  row sum: cufunc / Numba (target >= 7x)", ours / peer["Numba"], {}))
    rows.append(("  row sum: fraction of copy bandwidth (target >= 0.70)", ours / copy_bw, {}))

    # -- weighted row sum, weights broadcast along the loop --
    hw = rng.random(N, dtype=np.float32)
    dw = cuda.to_device(hw)
    wsum(dx, dw, out=dout)
    wwant = np.cumsum(hx * hw, axis=-1, dtype=np.float32)[:, -1]
    assert np.array_equal(dout.copy_to_host(), wwant)
    t_ours = timeit(lambda: wsum(dx, dw, out=dout), cuda.synchronize, reps, 5)
    peer = {}
    if "numba" in P:
        nw = ncuda.to_device(np.ascontiguousarray(np.broadcast_to(hw, (R, N))))
        n_wsum(nx, nw, no)
        peer["Numba (weights materialised)"] = nbytes / timeit(
            lambda: n_wsum(nx, nw, no), ncuda.synchronize, reps, 2) / 1e9
    rows.append(("weighted row sum (n),(n)->(), weights (1024,) broadcast (GB/s, x + out)",
                 nbytes / t_ours / 1e9, peer))
    del dx, dout

    # -- batched 4x4 matmul --
    B = 1 << 20
    ha = rng.random((B, 4, 4), dtype=np.float32)
    hb = rng.random((B, 4, 4), dtype=np.float32)
    da, db = cuda.to_device(ha), cuda.to_device(hb)
    dc = cuda.device_array((B, 4, 4), np.float32)
    matmul(da, db, out=dc)
    assert np.allclose(dc.copy_to_host(), np.matmul(ha, hb), rtol=1e-5)
    nbytes = 3 * 64 * B
    t_ours = timeit(lambda: matmul(da, db, out=dc), cuda.synchronize, reps, 5)
    ours = mm_bw = nbytes / t_ours / 1e9
    peer = {}
    if "numba" in P:
        na, nb, nc = ncuda.to_device(ha), ncuda.to_device(hb), ncuda.device_array((B, 4, 4), np.float32)
        n_matmul(na, nb, nc)
        peer["Numba"] = nbytes / timeit(lambda: n_matmul(na, nb, nc), ncuda.synchronize, reps, 2) / 1e9
    if "cupy" in P:
        cp = P["cupy"]
        ca, cb, cc = cp.asarray(ha), cp.asarray(hb), cp.empty((B, 4, 4), cp.float32)
        peer["CuPy matmul"] = nbytes / timeit(lambda: cp.matmul(ca, cb, out=cc),
                                              cp.cuda.runtime.deviceSynchronize, reps, 5) / 1e9
    rows.append(("batched 4x4 matmul, 2^20 float32 pairs (GB/s, 3 x 64 B per pair)", ours, peer))
    if "Numba" in peer:
        rows.append(("  matmul: cufunc / Numba (target >= 5x)", ours / peer["Numba"], {}))
    # the same with a fresh output (allocated from the pool by each call): C is not read in
    got = matmul(da, db)
    assert np.allclose(got.copy_to_host(), np.matmul(ha, hb), rtol=1e-5)
    del got
    mm_fresh = nbytes / timeit(lambda: matmul(da, db), cuda.synchronize, reps, 5) / 1e9
    rows.append(("batched 4x4 matmul, fresh output (GB/s, 3 x 64 B per pair)", mm_fresh, {}))

    # -- matmul with one B for all As --
    hb1 = rng.random((4, 4), dtype=np.float32)
    db1 = cuda.to_device(hb1)
    matmul(da, db1, out=dc)
    assert np.allclose(dc.copy_to_host(), np.matmul(ha, hb1), rtol=1e-5)
    nbytes = 2 * 64 * B
    t_ours = timeit(lambda: matmul(da, db1, out=dc), cuda.synchronize, reps, 5)
    peer = {}
    if "numba" in P:
        nb1 = ncuda.to_device(np.ascontiguousarray(np.broadcast_to(hb1, (B, 4, 4))))
        peer["Numba (B materialised, GB/s of A + C)"] = nbytes / timeit(
            lambda: n_matmul(na, nb1, nc), ncuda.synchronize, reps, 2) / 1e9
    rows.append(("4x4 matmul, B (4, 4) broadcast over 2^20 As (GB/s, A + C)", nbytes / t_ours / 1e9,
                 peer))

    cp = P.get("cupy")
    torch = P.get("torch")
    # -- cross product (3),(3)->(3) over 2^24 rows (>= 85% of copy) --
    R = 1 << 24
    hx, hy = rng.random((R, 3), dtype=np.float32), rng.random((R, 3), dtype=np.float32)
    dx, dy = cuda.to_device(hx), cuda.to_device(hy)
    dz = cuda.device_array((R, 3), np.float32)
    cross(dx, dy, out=dz)
    assert np.allclose(dz.copy_to_host(), np.cross(hx, hy), rtol=1e-5, atol=1e-6)
    nbytes = 3 * hx.nbytes
    ours = nbytes / timeit(lambda: cross(dx, dy, out=dz), cuda.synchronize, reps, 5) / 1e9
    peer = {}
    if "numba" in P:
        n_cross = nguvectorize(*CROSS_SIG, target="cuda")(cross_body)
        nx, ny, nz = ncuda.to_device(hx), ncuda.to_device(hy), ncuda.device_array((R, 3), np.float32)
        n_cross(nx, ny, nz)
        peer["Numba"] = nbytes / timeit(lambda: n_cross(nx, ny, nz), ncuda.synchronize, reps, 2) / 1e9
        del nx, ny, nz
    if "cupy" in P:
        cx, cy = cp.asarray(hx), cp.asarray(hy)
        peer["CuPy cross"] = nbytes / timeit(lambda: cp.cross(cx, cy), cp.cuda.runtime.deviceSynchronize,
                                             reps, 2) / 1e9
        del cx, cy
    if "torch" in P:
        tx, ty = torch.from_numpy(hx).cuda(), torch.from_numpy(hy).cuda()
        tz = torch.empty_like(tx)
        peer["PyTorch linalg.cross"] = nbytes / timeit(lambda: torch.linalg.cross(tx, ty, out=tz),
                                                       torch.cuda.synchronize, reps, 2) / 1e9
        del tx, ty, tz
    rows.append(("cross product (3),(3)->(3), 2^24 float32 rows (GB/s, x + y + out)", ours, peer))
    got = cross(dx, dy)
    assert np.allclose(got.copy_to_host(), np.cross(hx, hy), rtol=1e-5, atol=1e-6)
    del got
    cross_fresh = nbytes / timeit(lambda: cross(dx, dy), cuda.synchronize, reps, 5) / 1e9
    rows.append(("cross product, fresh output (GB/s, x + y + out)", cross_fresh, {}))
    rows.append(("  cross: fraction of copy bandwidth (target >= 0.85)", ours / copy_bw, {}))
    rows.append(("  cross, fresh output: fraction of copy bandwidth", cross_fresh / copy_bw, {}))
    rows.append(("  4x4 matmul: fraction of copy bandwidth (target >= 0.85)", mm_bw / copy_bw, {}))
    if os.environ.get("CUFUNC_GU_SMALL") == "0":
        # the plan before the flat tiles reads C in first with out= given: 4 x 64 B moved per pair
        rows.append(("  4x4 matmul out=: bytes moved (4 x 64 B, C read in) / copy",
                     mm_bw * 4 / 3 / copy_bw, {}))
    rows.append(("  4x4 matmul, fresh output: fraction of copy bandwidth", mm_fresh / copy_bw, {}))
    del dx, dy, dz

    print("\ncufunc guvectorize on %s (CUFUNC_GU_SMALL=%s)" % (dev.name,
                                                             os.environ.get("CUFUNC_GU_SMALL", "1")))
    print("| figure | cufunc | peers |")
    print("|---|---|---|")
    for label, val, peer in rows:
        ps = ", ".join("%s %.3g" % (k, v) for k, v in peer.items()) or "-"
        print("| %s | %.3g | %s |" % (label, val, ps))
    print("(copy bandwidth %.0f GB/s)" % copy_bw)


if __name__ == "__main__":
    main()
