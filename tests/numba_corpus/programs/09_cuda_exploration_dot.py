# A dot product from an element-wise product ufunc (vectorize with no target, so Numba compiles it
# for the CPU) and a @cuda.reduce sum on the GPU.
# After: chq-matteo/cuda-exploration, basics/dot.py. License: not stated. Written anew for this
# corpus with the file's decorators, signatures and calls.
import numpy
from numba import cuda, vectorize, float32

from _corpus_data import scaled

SOURCE = "chq-matteo/cuda-exploration: basics/dot.py"
LICENSE = "not stated"
DOMAIN = "linear algebra (learning code)"
TOLERANCE = {"random_dot": {"rtol": 1e-5, "reason": "float32 summation order of two tree reductions"}}


@cuda.reduce
def sum(a, b):
    return a + b


@vectorize([float32(float32, float32)])
def product(a, b):
    return a * b


def dot(A, B):
    assert(len(A) == len(B))
    C = numpy.zeros(len(A), dtype=numpy.float32)
    C = product(A, B)
    return sum(C)


def setup():
    rng = numpy.random.default_rng(109)
    N = scaled(10 ** 6)
    return {"ones": numpy.ones(N, dtype=numpy.float32),
            "A": rng.random(N).astype(numpy.float32), "B": rng.random(N).astype(numpy.float32)}


def run(d):
    return {"ones_dot": numpy.float32(dot(d["ones"], d["ones"])),
            "product": product(d["A"], d["B"]),
            "random_dot": numpy.float32(dot(d["A"], d["B"]))}
