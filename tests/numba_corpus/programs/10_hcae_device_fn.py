# A device function compiled eagerly from an explicit signature (inline=True) and called from a
# float32 ufunc; the ufunc is called with Python scalars (as the file does) and with arrays.
# After: zacniewski/Python-optimization-algorithms-with-GPU, hcae_with_cuda/test_device_functions.py.
# License: not stated. Written anew for this corpus with the file's decorators, signatures, body
# and call.
import numpy as np
from numba import vectorize, cuda

from _corpus_data import scaled

SOURCE = "zacniewski/Python-optimization-algorithms-with-GPU: hcae_with_cuda/test_device_functions.py"
LICENSE = "not stated"
DOMAIN = "optimisation (learning code)"
TOLERANCE = {"*": {"ulp": 2, "reason": "powf of two math libraries"}}


@cuda.jit('float32(float32, float32, float32)', device=True, inline=True)
def cu_device_fn(x, y, z):
    return x ** y / z


@vectorize(['float32(float32, float32, float32)'], target='cuda')
def cu_ufunc(x, y, z):
    return cu_device_fn(x, y, z)


def setup():
    rng = np.random.default_rng(110)
    n = scaled(1_000_000)
    return {"x": rng.uniform(0.1, 4.0, n).astype(np.float32),
            "y": rng.uniform(-2.0, 3.0, n).astype(np.float32),
            "z": rng.uniform(0.5, 2.0, n).astype(np.float32)}


def run(d):
    return {"scalars": cu_ufunc(1.0, 2.0, 3.0), "arrays": cu_ufunc(d["x"], d["y"], d["z"])}
