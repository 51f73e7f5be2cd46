"""A spread of cufunc kernels for compute-sanitizer (tools/sanitizer_check.sh): every engine, small,
odd-sized, strided, broadcast and host-array calls, each checked against NumPy so that a run that
computes wrong values fails even when the sanitizer reports nothing. Sizes are small: memcheck slows
kernels down by one or two orders of magnitude."""
import math
import sys

import numpy as np

from cufunc import cuda, guvectorize, vectorize

rng = np.random.default_rng(7)
failures = []


def check(name, got, want, rtol=1e-5):
    got = got.copy_to_host() if hasattr(got, "copy_to_host") else np.asarray(got)
    ok = np.allclose(got, want, rtol=rtol, atol=1e-6)
    print("%-34s %s" % (name, "ok" if ok else "WRONG"))
    if not ok:
        failures.append(name)


@vectorize(["float32(float32, float32)", "float64(float64, float64)", "int32(int32, int32)"],
           target="cuda")
def hyp(x, y):
    return math.sqrt(x * x + y * y) if x > -1000000 else x + y


@vectorize(["float64(float64, float64)", "float32(float32, float32)", "int32(int32, int32)"],
           target="cuda")
def add(x, y):
    return x + y


@guvectorize(["void(float32[:], float32[:])", "void(float64[:], float64[:])"], "(n)->()",
             target="cuda")
def row_sum(x, res):
    acc = 0.0
    for i in range(x.shape[0]):
        acc += x[i]
    res[0] = acc


@guvectorize(["void(float32[:,:], float32[:,:], float32[:,:])"], "(m,n),(n,p)->(m,p)",
             target="cuda")
def matmul(a, b, c):
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            acc = 0.0
            for k in range(a.shape[1]):
                acc += a[i, k] * b[k, j]
            c[i, j] = acc


def main():
    for n in (1, 33, 1000, 4099, 1 << 16):
        for dt in (np.float32, np.float64):
            a = rng.random(n).astype(dt)
            b = rng.random(n).astype(dt)
            da, db = cuda.to_device(a), cuda.to_device(b)
            check("hyp dev n=%d %s" % (n, dt.__name__), hyp(da, db), np.hypot(a, b))
            check("hyp host n=%d %s" % (n, dt.__name__), hyp(a, b), np.hypot(a, b))
            check("hyp strided n=%d" % n, hyp(da[::2], db[::-2][: len(a[::2])]),
                  np.hypot(a[::2], b[::-2][: len(a[::2])]))
            check("add.reduce n=%d %s" % (n, dt.__name__), add.reduce(da), a.sum(), rtol=1e-4)
            check("add.accumulate n=%d %s" % (n, dt.__name__), add.accumulate(da), np.cumsum(a),
                  rtol=1e-4)
            check("cuda.reduce n=%d %s" % (n, dt.__name__), cuda.reduce(lambda x, y: x + y)(da),
                  a.sum(), rtol=1e-4)
    for shape in ((3, 5), (64, 129), (257, 31), (1024, 1024)):
        m = rng.random(shape).astype(np.float32)
        dm = cuda.to_device(m)
        check("broadcast %s" % (shape,), hyp(dm, cuda.to_device(m[:1])), np.hypot(m, m[:1]))
        check("transposed %s" % (shape,), hyp(dm.T, dm.T), np.hypot(m.T, m.T))
        check("reduce axis0 %s" % (shape,), add.reduce(dm, axis=0), m.sum(axis=0), rtol=1e-4)
        check("reduce axis1 %s" % (shape,), add.reduce(dm, axis=1), m.sum(axis=1), rtol=1e-4)
        check("row_sum %s" % (shape,), row_sum(dm), m.sum(axis=1), rtol=1e-4)
    v = rng.random(257).astype(np.float64)
    check("outer", add.outer(cuda.to_device(v[:31]), cuda.to_device(v)), np.add.outer(v[:31], v))
    ai = rng.integers(-1000, 1000, 4099).astype(np.int32)
    check("int32 add", add(cuda.to_device(ai), cuda.to_device(ai[::-1].copy())), ai + ai[::-1])
    a = rng.random((4099, 4, 4)).astype(np.float32)
    b = rng.random((4099, 4, 4)).astype(np.float32)
    check("matmul 4x4", matmul(cuda.to_device(a), cuda.to_device(b)), a @ b, rtol=1e-4)
    big = rng.random(1 << 22).astype(np.float32)  # past the host pipeline's threshold
    check("hyp host pipeline 2^22", hyp(big, big), np.hypot(big, big))
    s = cuda.stream()
    d = cuda.to_device(big[:4099], stream=s)
    check("hyp on a stream", hyp(d, d, stream=s), np.hypot(big[:4099], big[:4099]))
    cuda.synchronize()
    if failures:
        print("WRONG RESULTS:", ", ".join(failures))
        return 1
    print("sanitizer workload: all %s" % "ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
