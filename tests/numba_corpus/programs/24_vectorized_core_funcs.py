# A package comparing Numba targets: the same core function as a float64 ufunc for the cpu,
# parallel and cuda targets, the CUDA one using math instead of NumPy; the definitions carry
# Python type annotations (a: float, b: float) -> float. Two cores: a hypotenuse and a
# trigonometric expression with an integer constant.
# After: a public GitHub package "numba_vectorization" found by the code index (its core modules
# with _vec_cpu_func / _vec_parallel_func / _vec_cuda_func; the index does not name the
# repository). License: unknown. Written anew for this corpus with the package's signatures,
# bodies and calls.
import math

import numpy as np
from numba import float64, vectorize

from _corpus_data import scaled

SOURCE = "public GitHub package numba_vectorization (code index, repository not named)"
LICENSE = "unknown"
DOMAIN = "benchmarking targets"
TOLERANCE = {"trig": {"ulp": 2, "reason": "sin/cos of two math libraries"},
             "hypot": {"ulp": 1, "reason": "FMA contraction of a**2 + b**2"}}


@vectorize([float64(float64, float64)], target="cuda")
def _vec_cuda_hypot(a: float, b: float) -> float:
    return math.sqrt(a**2 + b**2)


@vectorize([float64(float64, float64)], target="cuda")
def _vec_cuda_trig(a: float, b: float) -> float:
    return math.cos(math.sqrt(a**2 + b**2) + 100 + math.sin(b))


def vec_cuda_hypot(a, b):
    return _vec_cuda_hypot(a, b)


def vec_cuda_trig(a, b):
    return _vec_cuda_trig(a, b)


def setup():
    rng = np.random.default_rng(124)
    n = scaled(4_000_000)
    return {"a": rng.standard_normal(n) * 10, "b": rng.standard_normal(n) * 10}


def run(d):
    return {"hypot": vec_cuda_hypot(d["a"], d["b"]), "trig": vec_cuda_trig(d["a"], d["b"])}
