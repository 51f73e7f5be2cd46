# Integer addition ufunc of the GTC 2017 Numba tutorial: host arrays, broadcasting a column
# against a matrix, and a Python int scalar.
# After: ContinuumIO/gtc2017-numba, "2 - CUDA Basics.ipynb" (add_ufunc). License: not stated in
# the repository. Written anew for this corpus with the tutorial's signature, body and calls.
import numpy as np
from numba import vectorize

from _corpus_data import scaled

SOURCE = "ContinuumIO/gtc2017-numba: 2 - CUDA Basics.ipynb"
LICENSE = "not stated"
DOMAIN = "tutorial"


@vectorize(['int64(int64, int64)'], target='cuda')
def add_ufunc(x, y):
    return x + y


def setup():
    rng = np.random.default_rng(101)
    n = scaled(1_000_000)
    side = scaled(1000, 4)
    return {
        "a": rng.integers(-10**6, 10**6, size=n),
        "b": rng.integers(-10**6, 10**6, size=n),
        "b_col": rng.integers(0, 100, size=side)[:, np.newaxis],
        "c": np.arange(side * side).reshape((side, side)),
    }


def run(d):
    return {
        "a_plus_b": add_ufunc(d["a"], d["b"]),
        "b_col_plus_c": add_ufunc(d["b_col"], d["c"]),
        "a_plus_100": add_ufunc(d["a"], 100),
    }
