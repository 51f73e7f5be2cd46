# The first GPU ufunc of an image-analysis project's performance test: float32 addition of two
# host arrays, the result bound over a preallocated array.
# After: duraiarun-p/CRUK_Image_Analysis, CRUK_THT/gpu_test_perf_analysis.py. License: not stated.
# Written anew for this corpus with the file's signature, body and call.
import numpy as np
from numba import vectorize

from _corpus_data import scaled

SOURCE = "duraiarun-p/CRUK_Image_Analysis: CRUK_THT/gpu_test_perf_analysis.py"
LICENSE = "not stated"
DOMAIN = "imaging (performance test)"


@vectorize(['float32(float32, float32)'], target='cuda')
def Add(a, b):
    return a + b


def setup():
    rng = np.random.default_rng(111)
    N = scaled(100000)
    return {"ones": np.ones(N, dtype=np.float32),
            "A": rng.random(N).astype(np.float32), "B": rng.random(N).astype(np.float32)}


def run(d):
    A = d["ones"]
    B = np.ones(A.shape, dtype=A.dtype)
    C = np.empty_like(A, dtype=A.dtype)
    C = Add(A, B)
    return {"ones_sum": C, "random_sum": Add(d["A"], d["B"])}
