"""Exploration: the write ceiling beside the broadcast case (not a benchmark of record)."""
import math, sys
import numpy as np
from benchlib import timeit
from cufunc import cuda, vectorize
import cupy as cp, torch

@vectorize(["float32(float32, float32)"])
def hypot(x, y):
    return math.sqrt(x * x + y * y)

@vectorize(["float32(float32)"])
def ident(x):
    return x

reps = 15
big = cuda.device_array(1 << 28, np.float32); big2 = cuda.device_array(1 << 28, np.float32)
copy = 2 * big.nbytes / timeit(lambda: big2.copy_to_device(big), cuda.synchronize, reps) / 1e9
del big, big2
print("copy 1 GiB: %.0f GB/s" % copy)
for M in ((4096,) if "-q" in sys.argv else (4096, 8192)):
    nb = 4 * M * M
    c = cp.empty((M, M), cp.float32)
    s = cp.cuda.get_current_stream()
    t = timeit(lambda: cp.cuda.runtime.memsetAsync(c.data.ptr, 0, nb, s.ptr), cp.cuda.runtime.deviceSynchronize, reps, 5)
    print("M=%d memset: %.0f GB/s = %.1f%%" % (M, nb / t / 1e9, 100 * nb / t / 1e9 / copy))
    t = timeit(lambda: c.fill(1.5), cp.cuda.runtime.deviceSynchronize, reps, 5)
    print("M=%d cupy fill: %.0f GB/s" % (M, nb / t / 1e9))
    tt = torch.empty((M, M), device="cuda")
    t = timeit(lambda: tt.fill_(1.5), torch.cuda.synchronize, reps, 5)
    print("M=%d torch fill_: %.0f GB/s = %.1f%%" % (M, nb / t / 1e9, 100 * nb / t / 1e9 / copy))
    ob = cuda.device_array((M, M), np.float32)
    col = cuda.to_device(np.random.rand(M, 1).astype(np.float32)); row = cuda.to_device(np.random.rand(1, M).astype(np.float32))
    for inner in (1, 5, 20):
        t = timeit(lambda: hypot(col, row, out=ob), cuda.synchronize, reps, inner)
        print("M=%d ours broadcast inner=%d: %.0f GB/s = %.1f%%" % (M, inner, (nb + 8 * M) / t / 1e9, 100 * (nb + 8 * M) / t / 1e9 / copy))
    t = timeit(lambda: hypot(np.float32(2), np.float32(3), out=ob), cuda.synchronize, reps, 5)
    print("M=%d ours scalars->out (pure write): %.0f GB/s = %.1f%%" % (M, nb / t / 1e9, 100 * nb / t / 1e9 / copy))
    src = cuda.device_array((M, M), np.float32)
    t = timeit(lambda: ident(src, out=ob), cuda.synchronize, reps, 5)
    print("M=%d ours identity (read+write): %.0f GB/s = %.1f%%" % (M, 2 * nb / t / 1e9, 100 * 2 * nb / t / 1e9 / copy))
    print(hypot.kernel_source(col, row)[-1500:] if M == 4096 and "-v" in sys.argv else "", end="")
    del c, tt, ob, src
