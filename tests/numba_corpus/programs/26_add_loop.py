# A GPU-versus-CPU timing script: a float32 ufunc with a loop that adds a + b a hundred more times
# to a local (c += a + b), over large host arrays of ones, the target chosen by a module variable.
# After: a public GitHub timing script found by the code index (Add with target = 'cuda'; the
# index does not name the repository). License: unknown. Written anew for this corpus with the
# script's signature, body and call (its 1e8 elements reduced to 2e7).
import time

import numpy as np
from numba import vectorize

from _corpus_data import scaled

SOURCE = "public GitHub timing script (code index, repository not named)"
LICENSE = "unknown"
DOMAIN = "benchmarking"

target = 'cuda'


@vectorize(['float32(float32, float32)'], target=target)
def Add(a, b):
    c = a + b
    for i in range(100):
        c += a + b

    return(c)


def setup():
    rng = np.random.default_rng(126)
    N = scaled(int(2E7))
    return {"N": N, "R": rng.random(scaled(1_000_000)).astype(np.float32)}


def run(d):
    N = d["N"]
    dtype_float = np.float32
    A = np.ones(N, dtype=dtype_float)
    B = np.ones(A.shape, dtype=dtype_float)
    C = np.empty_like(A, dtype=dtype_float)
    t0 = time.time()
    C = Add(A, B)
    elapsed = time.time() - t0
    assert elapsed >= 0
    return {"ones": C, "random": Add(d["R"], d["R"])}
