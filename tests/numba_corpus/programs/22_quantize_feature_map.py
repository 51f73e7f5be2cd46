# Fixed-point quantisation of a network's feature maps for low-precision training: a CUDA ufunc
# with one signature string (not a list), float32(float32, int8), whose body multiplies a boolean
# by a float (retyping it), calls pow on an int8 and casts with np.int32; called with a Python int
# bit width on a normalised float32 array.
# After: a public GitHub VGG quantisation experiment found by the code index (numba_quantize,
# quantize_weights_waste, nearestpow2; the index does not name the repository). License: unknown.
# Written anew for this corpus with the script's signature, body and call.
import math

import numpy as np
from numba import vectorize

from _corpus_data import scaled

SOURCE = "public GitHub VGG quantisation experiment (code index file 33163697316, repository not named)"
LICENSE = "unknown"
DOMAIN = "machine learning (quantised training)"


@vectorize('float32(float32, int8)', target='cuda')
def numba_quantize(feature_map, bit_precision):
    flag = feature_map == 1
    delta = 1 / pow(2, bit_precision - 1)
    flag *= delta
    return (np.int32((feature_map + 1) / delta) * delta) - 1 - flag


def nearestpow2(x):
    flag_nag = False
    if x == 0:
        return 0
    if x < 0:
        x = -x
        flag_nag = True
    tmp_ceil = 2**math.ceil(math.log2(x))
    tmp_floor = 2**math.floor(math.log2(x))
    if abs(tmp_ceil - x) > abs(tmp_floor - x):
        return -tmp_floor if flag_nag else tmp_floor
    return -tmp_ceil if flag_nag else tmp_ceil


def quantize_weights_waste(feature_map, precision):
    if precision == 32:
        return feature_map
    shape = feature_map.shape
    max_num = np.abs(feature_map).max()
    norm = nearestpow2(max_num)
    input_quan = feature_map.astype(np.float32)
    fm_quan = numba_quantize((input_quan / norm).astype(np.float32), precision) * norm
    return np.array(fm_quan).reshape(shape).astype('float32')


def setup():
    rng = np.random.default_rng(122)
    fm = rng.standard_normal((scaled(128, 2), 64, 32, 32)).astype(np.float32)
    fm.flat[::997] = 1.0
    return {"feature_map": fm}


def run(d):
    return {"q8": quantize_weights_waste(d["feature_map"], 8),
            "q4": quantize_weights_waste(d["feature_map"], 4)}
