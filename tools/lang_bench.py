"""Translation speed of the kernel language: translate a fixed set of bodies many times and print
the CPU time (process time, best of several rounds). Run it with the tree to measure first on
PYTHONPATH (e.g. an old and a new copy of the cufunc package) to compare versions:
    PYTHONPATH=/path/to/tree python tools/lang_bench.py [rounds] [repeats]"""

import math
import sys
import time

import numpy as np

import cufunc.lang as L
from cufunc.lang import local

TABLE = np.arange(12, dtype=np.float32).reshape(3, 4)


def poly(x, y):
    acc = 0.0
    for i in range(8):
        acc = acc * x + (i + 1) * y
    return acc if acc > 0 else -acc


def mixed(a, b):
    q, r = divmod(a, 7)
    s = math.sqrt(abs(b)) + math.hypot(b, 2.0) + np.float32(q)
    if a > 3 and b < 2.5 or r == 1:
        s += TABLE[a % 3, 1] * 2
    while s > 100:
        s = s / 2
    return min(s, b, 1e30), max(r, 3)


def arrays(x, out):
    tmp = local.array((4, 4), np.float64)
    for i in range(x.shape[0]):
        for j in range(4):
            tmp[i % 4, j] = x[i] * j - x[-1]
    t = 0.0
    for i in range(4):
        t += tmp[i, i] ** 2
    out[0] = t
    out[1] = np.sin(t) + np.power(t, 0.5) + np.floor_divide(t, 3.0)


def bits(a, b):
    c = (a << 3) ^ (b >> 1) | (a & 255)
    d = ~c if c != 0 else -c
    return d % 17, bool(d) or a < b < 100


CASES = [
    (poly, ["float32", "float32"]), (poly, ["float64", "int32"]),
    (mixed, ["int64", "float64"]), (mixed, ["int16", "float32"]),
    (arrays, ["float64[:]", "float64[:]"]), (bits, ["int32", "uint8"]),
    (bits, ["uint16", "int64"]),
]


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    for f, a in CASES:   # warm-up: NumPy oracle caches, source reading
        L.translate(f, a)
    best = None
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(reps):
            for f, a in CASES:
                L.translate(f, a)
        dt = time.process_time() - t0
        best = dt if best is None else min(best, dt)
    n = reps * len(CASES)
    print("%s: %d translations, best round %.3f s CPU, %.3f ms each"
          % (L.__file__, n, best, 1000 * best / n))


if __name__ == "__main__":
    main()
