"""hypot over a dask array of CuPy chunks (issue 15, section 3): a cufunc ufunc on the dask array
(a lazy graph, one cufunc call per chunk, threaded scheduler, one GPU), beside one cufunc call on
the whole CuPy array and beside da.hypot (CuPy's hypot per chunk) on the same dask array.

    python3 bench/bench_dask.py [--log2n 28] [--chunks 16] [--reps 5]

Each dask row builds the graph and runs it with .persist() (the result stays in its CuPy chunks,
as a pipeline would keep it); the '.compute()' row adds dask's concatenation of the chunks into
one array (a device-to-device copy of the whole result). Throughput counts the bytes read and
written once (12 bytes per element). Target: the cufunc-on-dask row at >= 85% of the one-call
row."""
import argparse
import sys

import numpy as np

from benchlib import timeit


def _first(x, y):
    return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2n", type=int, default=28)
    ap.add_argument("--chunks", type=int, default=16)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    try:
        import cupy as cp
        import dask
        import dask.array as da
    except ImportError as e:
        sys.exit("bench_dask needs cupy and dask[array]: %s" % e)
    from cufunc import vectorize

    @vectorize(["float32(float32, float32)"], target="cuda")
    def hyp(x, y):
        return (x * x + y * y) ** 0.5

    n = 1 << a.log2n
    rng = cp.random.default_rng(0)
    cx = rng.random(n, dtype=cp.float32)
    cy = rng.random(n, dtype=cp.float32)
    chunk = n // a.chunks
    dx = da.from_array(cx, chunks=chunk, asarray=False)
    dy = da.from_array(cy, chunks=chunk, asarray=False)
    sync = cp.cuda.Device().synchronize

    # correctness first: every chunk a device array, values as CuPy's
    res = hyp(dx, dy).persist(scheduler="threads")
    blocks = dask.compute(*res.to_delayed().ravel(), scheduler="threads")
    assert all(hasattr(b, "__cuda_array_interface__") for b in blocks), {type(b) for b in blocks}
    k = min(1 << 20, chunk)
    ref = cp.hypot(cx[:k], cy[:k])
    got = cp.asarray(blocks[0])[:k]
    assert float(cp.max(cp.abs(got - ref))) <= 1e-6 * float(cp.max(ref)) + 1e-7
    del res, blocks

    rows = []
    with dask.config.set(scheduler="threads"):
        rows.append(("cufunc hyp, one call on the CuPy array",
                     timeit(lambda: hyp(cx, cy), sync, a.reps)))
        rows.append(("cupy.hypot, one call on the CuPy array",
                     timeit(lambda: cp.hypot(cx, cy), sync, a.reps)))
        rows.append(("cufunc hyp on the dask array, .persist()",
                     timeit(lambda: hyp(dx, dy).persist(), sync, a.reps)))
        rows.append(("da.hypot on the dask array, .persist()",
                     timeit(lambda: da.hypot(dx, dy).persist(), sync, a.reps)))
        # dask's own cost for this graph shape with no GPU work: what bounds the rows above
        rows.append(("dask alone: map_blocks(no-op) on both, .persist()",
                     timeit(lambda: da.map_blocks(_first, dx, dy, dtype=dx.dtype).persist(),
                            sync, a.reps)))
        rows.append(("cufunc hyp on the dask array, .compute()",
                     timeit(lambda: hyp(dx, dy).compute(), sync, a.reps)))
        rows.append(("da.hypot on the dask array, .compute()",
                     timeit(lambda: da.hypot(dx, dy).compute(), sync, a.reps)))
    nbytes = 12 * n
    base = rows[0][1]
    print("hypot, 2^%d float32 (%d chunks of 2^%d), threaded scheduler, %s"
          % (a.log2n, a.chunks, a.log2n - int(np.log2(a.chunks)),
             cp.cuda.runtime.getDeviceProperties(0)["name"].decode()))
    print("%-44s %10s %10s %14s" % ("", "ms", "GB/s", "vs one call"))
    for name, t in rows:
        print("%-44s %10.2f %10.1f %13.0f%%" % (name, t * 1e3, nbytes / t / 1e9, 100 * base / t))
    ratio = base / rows[2][1]
    print("cufunc on dask / one cufunc call: %.0f%% (target >= 85%%): %s"
          % (100 * ratio, "met" if ratio >= 0.85 else "NOT met"))
    print("dask's floor for this graph (no-op chunks): %.2f ms; the one call: %.2f ms"
          % (rows[4][1] * 1e3, base * 1e3))


if __name__ == "__main__":
    main()
