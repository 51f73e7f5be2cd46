# Gaussian probability density as a float32 CUDA ufunc (float64 literals inside a float32
# signature), called on a million samples with float32 scalars and once on scalars only.
# After: ContinuumIO/gtc2017-numba, "2 - CUDA Basics.ipynb" (gaussian_pdf). License: not stated.
# Written anew for this corpus with the tutorial's signature, expression and calls.
import math

import numpy as np
from numba import vectorize

from _corpus_data import scaled

SOURCE = "ContinuumIO/gtc2017-numba: 2 - CUDA Basics.ipynb"
LICENSE = "not stated"
DOMAIN = "statistics tutorial"
# The body computes in float64 (Numba types 0.5 as float64) and rounds to float32 once; exp comes
# from two math libraries (libdevice under Numba, CUDA's math headers under NVRTC) and the two
# compilers may fuse differently: at most 1 float32 ulp apart.
TOLERANCE = {"*": {"ulp": 1, "reason": "exp of two math libraries / FMA contraction"}}

SQRT_2PI = np.float32((2 * math.pi) ** 0.5)


@vectorize(['float32(float32, float32, float32)'], target='cuda')
def gaussian_pdf(x, mean, sigma):
    return math.exp(-0.5 * ((x - mean) / sigma) ** 2) / (sigma * SQRT_2PI)


def setup():
    rng = np.random.default_rng(102)
    return {"x": rng.uniform(-3, 3, size=scaled(1_000_000)).astype(np.float32)}


def run(d):
    x = d["x"]
    return {
        "pdf": gaussian_pdf(x, np.float32(0.0), np.float32(1.0)),
        "quick_test": gaussian_pdf(x[0], 0.0, 1.0),
    }
