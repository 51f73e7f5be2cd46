# A CUDA device function returning a tuple, called twice from a float32 ufunc (distance between
# points given in polar coordinates).
# After: ContinuumIO/gtc2017-numba, "2 - CUDA Basics.ipynb" (polar_to_cartesian, polar_distance).
# License: not stated. Written anew for this corpus with the tutorial's signature, bodies and call.
import math

import numpy as np
from numba import cuda, vectorize

from _corpus_data import scaled

SOURCE = "ContinuumIO/gtc2017-numba: 2 - CUDA Basics.ipynb"
LICENSE = "not stated"
DOMAIN = "geometry tutorial"
# x1 - x2 (and y1 - y2) is one fused multiply-add in both builds of this program, but not of the
# same product: numba-cuda's machine code rounds rho2 * cos(theta2) and fuses rho1 * cos(theta1),
# the NVRTC build the other way round (tests/numba_corpus/README.md, "Known gaps"). Each
# difference may then move by one product's rounding and its own (ulp(1.5) + 2 * ulp(3) / 2 =
# 3.6e-7, with |x|, |y| <= 1.5), the distance by at most sqrt(2) * 3.6e-7 plus the roundings of
# the sum and of the result: 1.1e-6. The cancellation in x1 - x2 makes that many ulp of a short
# distance, so the bound is absolute.
TOLERANCE = {"*": {"atol": 1.1e-6,
                   "reason": "FMA contraction of the other product in x1 - x2 and y1 - y2: at most "
                             "one product's rounding per difference (docs/typing.md)"}}


@cuda.jit(device=True)
def polar_to_cartesian(rho, theta):
    x = rho * math.cos(theta)
    y = rho * math.sin(theta)
    return x, y


@vectorize(['float32(float32, float32, float32, float32)'], target='cuda')
def polar_distance(rho1, theta1, rho2, theta2):
    x1, y1 = polar_to_cartesian(rho1, theta1)
    x2, y2 = polar_to_cartesian(rho2, theta2)
    return ((x1 - x2) ** 2 + (y1 - y2) ** 2) ** 0.5


def setup():
    rng = np.random.default_rng(103)
    n = scaled(1_000_000)
    return {
        "rho1": rng.uniform(0.5, 1.5, size=n).astype(np.float32),
        "theta1": rng.uniform(-np.pi, np.pi, size=n).astype(np.float32),
        "rho2": rng.uniform(0.5, 1.5, size=n).astype(np.float32),
        "theta2": rng.uniform(-np.pi, np.pi, size=n).astype(np.float32),
    }


def run(d):
    return {"distance": polar_distance(d["rho1"], d["theta1"], d["rho2"], d["theta2"])}
