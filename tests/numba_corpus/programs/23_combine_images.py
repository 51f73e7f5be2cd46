# Image compositing: a float32 CUDA ufunc clamping the sum of two images to [0, 1] with the
# builtins max and min and float literals, over 2-D grey-level images.
# After: a public GitHub GPU image-processing experiment by Vincent Bonnet found by the code index
# ("Efficient 2D Stencil Computations Using CUDA", CombineImages; the index does not name the
# repository). License: unknown. Written anew for this corpus with the script's signature and body.
import numpy as np
from numba import cuda, vectorize  # noqa: F401 (as the script imports)

from _corpus_data import scaled

SOURCE = "public GitHub image-processing experiment by Vincent Bonnet (code index, repository not named)"
LICENSE = "unknown"
DOMAIN = "imaging (compositing)"


@vectorize(['float32(float32, float32)'], target='cuda')
def CombineImages(a, b):
    return max(min(a+b, 1.0), 0.0)


def setup():
    rng = np.random.default_rng(123)
    side = scaled(2048, 4)
    return {"gx": rng.uniform(-0.5, 1.0, (side, side)).astype(np.float32),
            "gy": rng.uniform(-0.5, 1.0, (side, side)).astype(np.float32)}


def run(d):
    return {"combined": CombineImages(d["gx"], d["gy"])}
