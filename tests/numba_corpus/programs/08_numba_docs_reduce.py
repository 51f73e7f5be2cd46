# GPU reductions with cuda.reduce, as in Numba's documentation: a decorated binary function and a
# lambda, on host arrays, with init=, on a device array and into a device result (res=).
# After: numba/numba, docs/source/cuda/reduction.rst (sum_reduce). License: BSD-2-Clause.
# Written anew for this corpus with the documentation's definitions and calls.
import numpy
from numba import cuda

from _corpus_data import scaled

SOURCE = "numba/numba: docs/source/cuda/reduction.rst"
LICENSE = "BSD-2-Clause"
DOMAIN = "documentation example"
# Sums of random float64 values depend on the order of the additions: both libraries reduce in a
# tree, in different orders.
TOLERANCE = {
    "random_sum": {"rtol": 1e-12, "reason": "summation order of two tree reductions"},
    "random_sum_device": {"rtol": 1e-12, "reason": "summation order of two tree reductions"},
    "random_sum_res": {"rtol": 1e-12, "reason": "summation order of two tree reductions"},
}


@cuda.reduce
def sum_reduce(a, b):
    return a + b


lambda_sum = cuda.reduce(lambda a, b: a + b)


def setup():
    rng = numpy.random.default_rng(108)
    return {"A": (numpy.arange(1234, dtype=numpy.float64)) + 1,
            "R": rng.random(scaled(4_000_000))}


def run(d):
    A = d["A"]
    got = sum_reduce(A)
    got_lambda = lambda_sum(A)
    got_init = sum_reduce(A, init=10)
    R = d["R"]
    dR = cuda.to_device(R)
    res = cuda.device_array(1, dtype=numpy.float64)
    sum_reduce(dR, res=res)
    return {"arange_sum": numpy.float64(got), "arange_sum_lambda": numpy.float64(got_lambda),
            "arange_sum_init": numpy.float64(got_init),
            "random_sum": numpy.float64(sum_reduce(R)),
            "random_sum_device": numpy.float64(lambda_sum(dR)),
            "random_sum_res": res.copy_to_host()}
