# guvectorize with a scalar core argument given by a type object (int64, not int64[:]): called with
# a Python int and the input array itself as the output, and on a 2-D array with one scalar per
# row; a float64 twin takes a NumPy scalar and a device array.
# After: a public GitHub learning script found by the code index (g and g2 of numba's
# guvectorize documentation example moved to target='cuda'; the index does not name the
# repository). License: unknown. Written anew for this corpus with the script's signatures,
# bodies and calls.
import numpy as np
from numba import guvectorize, cuda, int64, float64

from _corpus_data import scaled

SOURCE = "public GitHub learning script (code index, repository not named)"
LICENSE = "unknown"
DOMAIN = "tutorial"


@guvectorize([(int64[:], int64, int64[:])], '(n),()->(n)', target='cuda')
def g(x, y, res):
    for i in range(x.shape[0]):
        res[i] = x[i] + y


@guvectorize([(float64[:], float64, float64[:])], '(n),()->(n)', target='cuda')
def g_float(x, y, res):
    for i in range(x.shape[0]):
        res[i] = x[i] + y


def setup():
    rng = np.random.default_rng(118)
    rows = scaled(100_000)
    return {"a": np.arange(scaled(1_000_000)),
            "b": rng.integers(-1000, 1000, size=(rows, 16)),
            "per_row": rng.integers(-1000, 1000, size=rows),
            "f": rng.standard_normal((rows, 16))}


def run(d):
    a = d["a"].copy()
    returned = g(a, 2, a)
    return {
        "in_place": a, "returned": returned,
        "per_row": g(d["b"], d["per_row"]),
        "float_device": g_float(cuda.to_device(d["f"]), np.float64(0.5)).copy_to_host(),
    }
