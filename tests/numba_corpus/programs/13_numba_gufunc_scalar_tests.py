# Numba's CUDA tests of gufuncs with scalar core arguments: an int32 row sum whose accumulator
# starts as the float 0. (so it sums in float64 and stores into int32), called with a device
# output made by to_device(copy=False) and without out=; a saxpy '(),(t),(t)->(t)' whose scalar
# is a NumPy float32 or an array of one scalar per row.
# After: numba/numba, numba/cuda/tests/cudapy/test_gufunc_scalar.py (sum_row, saxpy).
# License: BSD-2-Clause. Written anew for this corpus with the tests' signatures, bodies and calls.
import numpy as np
from numba import guvectorize, cuda

from _corpus_data import scaled

SOURCE = "numba/numba: numba/cuda/tests/cudapy/test_gufunc_scalar.py"
LICENSE = "BSD-2-Clause"
DOMAIN = "library tests"
TOLERANCE = {"*": {"ulp": 1, "reason": "FMA contraction of a * x[i] + y[i]"}}


@guvectorize(['void(int32[:], int32[:])'], '(n)->()', target='cuda')
def sum_row(inp, out):
    tmp = 0.
    for i in range(inp.shape[0]):
        tmp += inp[i]
    out[0] = tmp


@guvectorize(['void(float32, float32[:], float32[:], float32[:])'],
             '(),(t),(t)->(t)', target='cuda')
def saxpy(a, x, y, out):
    for i in range(out.shape[0]):
        out[i] = a * x[i] + y[i]


def setup():
    rng = np.random.default_rng(113)
    rows = scaled(1_000_000)
    return {
        "inp": rng.integers(-2**20, 2**20, size=(rows, 3), dtype=np.int32),
        "X": rng.standard_normal((rows, 2)).astype(np.float32),
        "Y": rng.standard_normal((rows, 2)).astype(np.float32),
        "A": rng.standard_normal(rows).astype(np.float32),
    }


def run(d):
    inp = d["inp"]
    out1 = np.empty(inp.shape[0], dtype=inp.dtype)
    out2 = np.empty(inp.shape[0], dtype=inp.dtype)
    dev_inp = cuda.to_device(inp)
    dev_out1 = cuda.to_device(out1, copy=False)
    sum_row(dev_inp, out=dev_out1)
    dev_out2 = sum_row(dev_inp)
    dev_out1.copy_to_host(out1)
    dev_out2.copy_to_host(out2)
    return {
        "sum_row_out": out1, "sum_row_returned": out2,
        "saxpy_scalar": saxpy(np.float32(2), d["X"], d["Y"]),
        "saxpy_flat": saxpy(np.float32(2), d["X"].ravel(), d["Y"].ravel()),
        "saxpy_per_row": saxpy(d["A"], d["X"], d["Y"]),
    }
