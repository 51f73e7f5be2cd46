# Discriminant of quadratic equations: a plain Python function turned into a CUDA ufunc with two
# signatures built from the f4/f8 type aliases of `from numba import *`, called on device arrays
# inside stream.auto_synchronize(), whole and in chunks, with to_device(copy=False) outputs, out=
# and stream=.
# After: ContinuumIO/numbapro-examples, vectorize/cuda_polynomial.py and vectorize/polynomial.py
# (their results were copied back with the since-removed DeviceNDArray.to_host(stream); here
# copy_to_host(host_array, stream=stream)). License: not stated. Written anew for this corpus
# with the example's function, signatures and calls.
import math

import numpy as np
from numba import *
from numba import cuda  # numba's __all__ no longer carries cuda

from _corpus_data import scaled

SOURCE = "ContinuumIO/numbapro-examples: vectorize/cuda_polynomial.py"
LICENSE = "not stated"
DOMAIN = "numerics (vendor example)"
TOLERANCE = {"*": {"ulp": 1, "reason": "FMA contraction of b ** 2 - 4 * a * c"}}


def discriminant(a, b, c):
    return math.sqrt(b ** 2 - 4 * a * c)


cu_discriminant = vectorize([f4(f4, f4, f4), f8(f8, f8, f8)], target='cuda')(discriminant)


def setup():
    rng = np.random.default_rng(120)
    n = scaled(10_000_000)
    return {"A": np.array(rng.random(n), dtype=np.float32),
            "B": np.array(rng.random(n) + 10, dtype=np.float32),
            "C": np.array(rng.random(n), dtype=np.float32)}


def run(d):
    A, B, C = d["A"], d["B"], d["C"]
    D = np.empty(A.shape, dtype=A.dtype)
    stream = cuda.stream()
    with stream.auto_synchronize():
        dA = cuda.to_device(A, stream)
        dB = cuda.to_device(B, stream)
        dC = cuda.to_device(C, stream)
        dD = cuda.to_device(D, stream, copy=False)
        cu_discriminant(dA, dB, dC, out=dD, stream=stream)
        dD.copy_to_host(D, stream=stream)

    D2 = np.empty(A.shape, dtype=A.dtype)
    chunkcount = 10
    sA, sB, sC, sD = (np.split(x, chunkcount) for x in (A, B, C, D2))
    device_ptrs = []
    with stream.auto_synchronize():
        for a, b, c, dd in zip(sA, sB, sC, sD):
            dA = cuda.to_device(a, stream)
            dB = cuda.to_device(b, stream)
            dC = cuda.to_device(c, stream)
            dD = cuda.to_device(dd, stream, copy=False)
            cu_discriminant(dA, dB, dC, out=dD, stream=stream)
            dD.copy_to_host(dd, stream=stream)
            device_ptrs.extend([dA, dB, dC, dD])
    return {"whole": D, "chunked": D2,
            "float64": cu_discriminant(A.astype(np.float64), B.astype(np.float64),
                                       C.astype(np.float64))}
