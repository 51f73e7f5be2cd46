"""cufunc's functions on a dask array too large to handle in one piece, on one GPU.

A cufunc ufunc, gufunc or reduction called on a dask array returns a lazy dask array whose tasks
are cufunc calls, one per chunk (NumPy's override protocol, NEP 13). With CuPy installed the
chunks are CuPy arrays and stay on the GPU; without it they are NumPy arrays, copied to the GPU and
back for each chunk.

    python dask_one_gpu.py
"""
import numpy as np

from cufunc import guvectorize, vectorize


@vectorize(["float32(float32, float32)"])
def hypot(x, y):
    return (x * x + y * y) ** 0.5


@guvectorize(["void(float32[:], float32[:])"], "(n)->()")
def row_max(x, res):
    best = x[0]
    for i in range(1, x.shape[0]):
        best = max(best, x[i])
    res[0] = best


KERNELS = ["hypot", "row_max"]
NEEDS = ["dask"]


def main(rows=1 << 14, cols=1024):
    import dask
    import dask.array as da
    try:
        import cupy as xp
    except ImportError:
        xp = np
    dask.config.set(scheduler="threads", num_workers=2)

    host = np.random.default_rng(3).random((rows, cols), dtype=np.float32)
    x = da.from_array(xp.asarray(host), chunks=(rows // 8, cols), asarray=False)
    lazy = hypot(x, x)                                # nothing has run yet
    per_row = row_max(lazy)                           # a gufunc over the core dimension
    total = hypot.reduce(per_row, axis=0)             # a reduction, chunk by chunk
    got_rows, got_total = dask.compute(per_row, total)
    to_np = (lambda a: a.get()) if xp is not np else np.asarray
    want_rows = np.hypot(host, host).max(axis=1)
    assert np.allclose(to_np(got_rows), want_rows, rtol=1e-6)
    want_total = np.sqrt(np.sum(want_rows.astype(np.float64) ** 2))
    assert np.isclose(float(got_total), want_total, rtol=1e-4)
    print("%d chunks of %s arrays; %d row maxima, their hypot-reduce %.3f"
          % (x.npartitions, xp.__name__, rows, float(got_total)))
    print("OK")


if __name__ == "__main__":
    main()
