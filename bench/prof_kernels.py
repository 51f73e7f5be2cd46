"""Run one benchmark workload a few times, for a profiler (ncu) to capture one of its kernels.

    ncu --kernel-name cf_gu --launch-skip 2 --launch-count 1 python3 bench/prof_kernels.py rowsum

Workloads (the benchmarks' shapes): rowsum (guvectorize '(n)->()' over (65536, 1024) float32),
accumulate (add.accumulate over 2^28 float32), transposed (hypot(A, B.T), 4096^2 float32),
hypot (2^26 float32 device arrays), broadcast (hypot of (4096, 1) and (1, 4096) into (4096, 4096)),
fill (hypot of two float32 scalars into (4096, 4096): the same writes with nothing to load). Each runs 5 times; kernels are compiled on the first call.

Usage: python3 bench/prof_kernels.py WORKLOAD
"""
import math
import sys

import numpy as np

from cufunc import cuda, vectorize


def main():
    what = sys.argv[1]
    rng = np.random.default_rng(0)

    @vectorize(["float32(float32, float32)"])
    def hypot(x, y):
        return math.sqrt(x * x + y * y)

    @vectorize(["float32(float32, float32)"], identity=0)
    def add(x, y):
        return x + y

    if what == "rowsum":
        sys.path.insert(0, __file__.rsplit("/", 1)[0])
        from bench_guvectorize import rowsum
        x = cuda.to_device(rng.random((65536, 1024), dtype=np.float32))
        out = cuda.device_array(65536, np.float32)
        run = lambda: rowsum(x, out=out)  # noqa: E731
    elif what == "accumulate":
        a = cuda.to_device(rng.random(1 << 28, dtype=np.float32))
        o = cuda.device_array(1 << 28, np.float32)
        run = lambda: add.accumulate(a, out=o)  # noqa: E731
    elif what == "transposed":
        a = cuda.to_device(rng.random((4096, 4096), dtype=np.float32))
        b = cuda.to_device(rng.random((4096, 4096), dtype=np.float32))
        o = cuda.device_array((4096, 4096), np.float32)
        run = lambda: hypot(a, b.T, out=o)  # noqa: E731
    elif what == "hypot":
        a = cuda.to_device(rng.random(1 << 26, dtype=np.float32))
        b = cuda.to_device(rng.random(1 << 26, dtype=np.float32))
        o = cuda.device_array(1 << 26, np.float32)
        run = lambda: hypot(a, b, out=o)  # noqa: E731
    elif what in ("broadcast", "fill"):
        col = cuda.to_device(rng.random((4096, 1), dtype=np.float32))
        row = cuda.to_device(rng.random((1, 4096), dtype=np.float32))
        o = cuda.device_array((4096, 4096), np.float32)
        if what == "broadcast":
            run = lambda: hypot(col, row, out=o)  # noqa: E731
        else:
            run = lambda: hypot(np.float32(3), np.float32(4), out=o)  # noqa: E731
    else:
        sys.exit("unknown workload %r" % what)
    for _ in range(5):
        run()
    cuda.synchronize()


if __name__ == "__main__":
    main()
