# A script that defines the same CUDA ufunc name twice, through the numba module namespace
# (numba.vectorize, numba.float32(numba.float64, numba.float64)): the second definition, which
# returns float32 from float64 inputs, is the one called. The body uses math.pow with 1./2 and
# math.exp.
# After: a public GitHub benchmark script found by the code index (func_numba_gpu; the index does
# not name the repository). License: unknown. Written anew for this corpus with the script's
# signatures, body and call.
import math

import numba
import numpy as np

from _corpus_data import scaled

SOURCE = "public GitHub benchmark script (code index, repository not named)"
LICENSE = "unknown"
DOMAIN = "benchmarking"
TOLERANCE = {"*": {"ulp": 1, "reason": "pow/exp of two math libraries (float64, rounded to the "
                                       "result type)"}}


@numba.vectorize(['float64(float64, float64)'], target='cuda')
def func_numba_gpu(a, b):
    return math.pow(a*b, 1./2)/math.exp(a*b/1000)


first_definition = func_numba_gpu


@numba.vectorize([numba.float32(numba.float64, numba.float64)], target='cuda')
def func_numba_gpu(a, b):
    return math.pow(a*b, 1./2)/math.exp(a*b/1000)


def setup():
    rng = np.random.default_rng(125)
    n = scaled(4_000_000)
    return {"a": rng.uniform(0, 100, n), "b": rng.uniform(0, 100, n)}


def run(d):
    return {"float32_result": func_numba_gpu(d["a"], d["b"]),
            "float64_result": first_definition(d["a"], d["b"])}
