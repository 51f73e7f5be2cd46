# The same camera calibration through a CUDA device function called from a ufunc
# uint16(uint8, uint8, uint16), as the benchmark's GPU variant does (its device function takes
# (img, ff, bg) and the ufunc passes (data_cube, background, flatfield) in that order).
# After: the public GitHub camera-calibration benchmark of 15_camera_calibrate.py (its
# Numba CUDA variant). License: unknown. Written anew for this corpus with the script's
# decorators, signature, bodies and call.
import numpy as np
from numba import cuda, vectorize

from _corpus_data import scaled

SOURCE = "public GitHub camera-calibration benchmark (code index, repository not named)"
LICENSE = "unknown"
DOMAIN = "imaging (camera calibration)"


@cuda.jit(device=True)
def calibrate_gpu(img, ff, bg):
    return (img - bg) * ff


@vectorize(['uint16(uint8, uint8, uint16)'], target='cuda')
def vector_gpu(data_cube, background, flatfield):
    return calibrate_gpu(data_cube, background, flatfield)


def setup():
    rng = np.random.default_rng(116)
    h, w = scaled(540, 4), scaled(720, 4)
    return {
        "data_cube": rng.integers(0, 255, (14, h, w), dtype=np.uint8),
        "background": rng.integers(0, 255, (h, w), dtype=np.uint8),
        "flatfield": (255. * rng.random((h, w))).astype(np.uint16),
    }


def run(d):
    return {"calibrated": vector_gpu(d["data_cube"], d["background"], d["flatfield"])}
