# Gated selection of a chromagram: per time frame, a float64 CUDA ufunc keeps the values equal to
# the frame's maximum and zeroes the rest; the body rebinds its float64 argument to the integer 0.
# Called row by row on contiguous copies, with a NumPy float64 scalar.
# After: a public GitHub audio-analysis script found by the code index (gated_selection,
# select_max; the index does not name the repository). License: unknown. Written anew for this
# corpus with the script's signature, body and calls.
import numba
import numpy as np

from _corpus_data import scaled

SOURCE = "public GitHub audio-analysis script (code index file 13796895754, repository not named)"
LICENSE = "unknown"
DOMAIN = "audio (music information retrieval)"


def gated_selection(chroma):
    shape = chroma.shape
    new_chroma = []
    for i in range(shape[0]):
        time_chroma = chroma[i]
        max = np.max(time_chroma)
        time_chroma = select_max(np.ascontiguousarray(time_chroma), max)
        new_chroma.append(time_chroma)
    return np.array(new_chroma)


@numba.vectorize(['float64(float64, float64)'], target='cuda')
def select_max(array, max):
    if(array < max):
        array = 0
    return array


def setup():
    rng = np.random.default_rng(121)
    return {"chroma": rng.uniform(0.0, 1.0, (12, scaled(2000)))}


def run(d):
    return {"gated": gated_selection(d["chroma"].T)}
