# Mandelbrot set as a CUDA ufunc over pixel indices: uint8(uint32, f8, f8, f8, f8, uint32, uint32,
# uint32), with integer modulo and true division of uint32 values, a complex accumulator and an
# early return from inside the iteration loop. The caller passes height and width swapped, as
# the example does.
# After: ContinuumIO/numbapro-examples, mandel/mandel_vectorize.py (written for NumbaPro's
# target='gpu'; here target='cuda', Numba's name for it). License: not stated.
# Written anew for this corpus with the example's signature, body and call.
import numpy as np
from numba import vectorize

from _corpus_data import scaled

SOURCE = "ContinuumIO/numbapro-examples: mandel/mandel_vectorize.py"
LICENSE = "not stated"
DOMAIN = "fractals (vendor example)"

sig = 'uint8(uint32, f8, f8, f8, f8, uint32, uint32, uint32)'


@vectorize([sig], target='cuda')
def mandel(tid, min_x, max_x, min_y, max_y, width, height, iters):
    pixel_size_x = (max_x - min_x) / width
    pixel_size_y = (max_y - min_y) / height

    x = tid % width
    y = tid / width

    real = min_x + x * pixel_size_x
    imag = min_y + y * pixel_size_y

    c = complex(real, imag)
    z = 0.0j

    for i in range(iters):
        z = z * z + c
        if (z.real * z.real + z.imag * z.imag) >= 4:
            return i
    return iters


def create_fractal(min_x, max_x, min_y, max_y, width, height, iters):
    tids = np.arange(width * height, dtype=np.uint32)
    return mandel(tids, np.float64(min_x), np.float64(max_x), np.float64(min_y),
                  np.float64(max_y), np.uint32(height), np.uint32(width),
                  np.uint32(iters))


def setup():
    return {"width": scaled(500 * 10, 4), "height": scaled(750 * 10, 4)}


def run(d):
    pixels = create_fractal(-2.0, 1.0, -1.0, 1.0, d["width"], d["height"], 20)
    return {"pixels": pixels}
