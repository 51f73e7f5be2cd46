# Numba's own CUDA gufunc tests as programs: a matrix-multiply gufunc (void signature built from
# type objects, tuple unpacking of .shape, max_blocksize) called on host arrays, on a mix of host
# and device arrays, with a stream, device_array(stream=) and out=; a dot-product gufunc whose
# accumulator starts as the integer 0 and a tuple-of-tuples argument; an element-wise product
# whose body rebinds `len` and whose output is passed positionally.
# After: numba/numba, numba/cuda/tests/cudapy/test_gufunc.py (matmulcore, gu_reduce,
# numba_dist_cuda). License: BSD-2-Clause. Written anew for this corpus with the tests'
# signatures, bodies and calls.
import numpy as np
from numba import void, float32, float64
from numba import guvectorize
from numba import cuda

from _corpus_data import scaled

SOURCE = "numba/numba: numba/cuda/tests/cudapy/test_gufunc.py"
LICENSE = "BSD-2-Clause"
DOMAIN = "linear algebra (library tests)"
TOLERANCE = {
    "matmul_random": {"ulp": 4, "reason": "FMA contraction of the accumulation C[i, j] += A*B"},
    "gu_reduce_random": {"ulp": 4, "reason": "FMA contraction of the accumulation s += x*y"},
}


def _get_matmulcore_gufunc(dtype=float32, max_blocksize=None):
    @guvectorize([void(dtype[:, :], dtype[:, :], dtype[:, :])],
                 '(m,n),(n,p)->(m,p)',
                 target='cuda')
    def matmulcore(A, B, C):
        m, n = A.shape
        n, p = B.shape
        for i in range(m):
            for j in range(p):
                C[i, j] = 0
                for k in range(n):
                    C[i, j] += A[i, k] * B[k, j]

    gufunc = matmulcore
    if max_blocksize:
        gufunc.max_blocksize = max_blocksize
    return gufunc


matmul32 = _get_matmulcore_gufunc(max_blocksize=512)
matmul64 = _get_matmulcore_gufunc(dtype=float64)


@guvectorize([(float64[:], float64[:], float64[:])], '(n),(n)->()', target='cuda')
def gu_reduce(x, y, r):
    s = 0
    for i in range(len(x)):
        s += x[i] * y[i]
    r[0] = s


@guvectorize(['void(float32[:], float32[:], float32[:])'], '(n),(n)->(n)', target='cuda')
def numba_dist_cuda(a, b, dist):
    len = a.shape[0]
    for i in range(len):
        dist[i] = a[i] * b[i]


def setup():
    rng = np.random.default_rng(112)
    ct = scaled(100001)
    return {
        "A": np.arange(ct * 2 * 4, dtype=np.float32).reshape(ct, 2, 4) % 97,
        "B": np.arange(ct * 4 * 5, dtype=np.float32).reshape(ct, 4, 5) % 89,
        "X": rng.standard_normal((scaled(200000), 3, 3)),
        "Y": rng.standard_normal((3, 3)),
        "x": rng.standard_normal((scaled(100000), 64)),
        "y": rng.standard_normal((scaled(100000), 64)),
        "a": rng.random(scaled(1024 * 1024)).astype('float32'),
        "b": rng.random(scaled(1024 * 1024)).astype('float32'),
    }


def run(d):
    A, B = d["A"], d["B"]
    C_host = matmul32(A, B)
    C_mixed = matmul32(A, cuda.to_device(B)).copy_to_host()
    stream = cuda.stream()
    dA = cuda.to_device(A, stream)
    dB = cuda.to_device(B, stream)
    dC = cuda.device_array(shape=(A.shape[0], 2, 5), dtype=A.dtype, stream=stream)
    dC = matmul32(dA, dB, out=dC, stream=stream)
    C_stream = dC.copy_to_host(stream=stream)
    stream.synchronize()

    tuple_arg = gu_reduce(((1.0, 2.0, 3.0), (4.0, 5.0, 6.0)), ((1.5, 2.5, 3.5), (4.5, 5.5, 6.5)))

    dist = np.zeros(d["a"].shape[0]).astype('float32')
    numba_dist_cuda(d["a"], d["b"], dist)
    return {
        "matmul_host": C_host, "matmul_mixed": C_mixed, "matmul_stream": C_stream,
        "matmul_random": matmul64(d["X"], d["Y"]),
        "gu_reduce_tuples": tuple_arg,
        "gu_reduce_random": gu_reduce(d["x"], d["y"]),
        "dist_positional_out": dist,
    }
