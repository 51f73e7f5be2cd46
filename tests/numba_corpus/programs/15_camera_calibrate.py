# Camera calibration of a stack of 8-bit images: (image - background) * flatfield as a CUDA ufunc
# uint16(uint8, uint16, uint8), broadcasting 2-D background and flatfield over the 3-D stack.
# The uint8 subtraction goes negative wherever the background is brighter than the image.
# After: a public GitHub camera-calibration benchmark found by the code index (its
# "Camera Calibration" README and scripts; the index does not name the repository).
# License: unknown. Written anew for this corpus with the script's signature, body and call.
import numpy as np
from numba import vectorize, uint16, uint8

from _corpus_data import scaled

SOURCE = "public GitHub camera-calibration benchmark (code index, repository not named)"
LICENSE = "unknown"
DOMAIN = "imaging (camera calibration)"


@vectorize([uint16(uint8, uint16, uint8)], target='cuda')
def calibrate(data_cube, flatfield, bg):
    return (data_cube - bg) * flatfield


def setup():
    rng = np.random.default_rng(115)
    h, w = scaled(540, 4), scaled(720, 4)
    return {
        "data_cube": rng.integers(0, 255, (14, h, w), dtype=np.uint8),
        "bg": rng.integers(0, 255, (h, w), dtype=np.uint8),
        "flatfield": (2**8. * rng.random((h, w))).astype(np.uint16),
    }


def run(d):
    return {"calibrated": calibrate(d["data_cube"], d["flatfield"], d["bg"])}
