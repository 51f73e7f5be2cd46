# Element-wise helpers of an IceCube oscillation analysis framework, written as CUDA gufuncs with
# scalar core dimensions and signature strings without a return type ('(f8, f8, f8[:])'); the
# output is always given as out= (a device array) and several bodies read it before writing
# (out[0] *= ...), so the results depend on out's prior contents. One takes an int32 argument.
# After: icecube/pisa, pisa/utils/vectorizer.py (multiply_and_scale, scale, multiply, divide, set,
# square, sqrt, replace). License: Apache-2.0 (PISA). Written anew for this corpus with the file's
# signatures, layouts, bodies and calling convention (device arrays, out=).
import math

import numpy as np
from numba import cuda, guvectorize

from _corpus_data import scaled

SOURCE = "icecube/pisa: pisa/utils/vectorizer.py"
LICENSE = "Apache-2.0"
DOMAIN = "physics (neutrino oscillation analysis)"

TARGET = 'cuda'
signature = '(f8, f8, f8[:])'


@guvectorize([signature], '(),()->()', target=TARGET)
def multiply_and_scale_gufunc(scale, value, out):
    out[0] *= scale * value


@guvectorize([signature], '(),()->()', target=TARGET)
def scale_gufunc(scale, value, out):
    out[0] = scale * value


signature = '(f8, f8[:])'


@guvectorize([signature], '()->()', target=TARGET)
def multiply_gufunc(val, out):
    out[0] *= val


@guvectorize([signature], '()->()', target=TARGET)
def divide_gufunc(val, out):
    if val == 0:
        out[0] = 0
    else:
        out[0] /= val


@guvectorize([signature], '()->()', target=TARGET)
def set_gufunc(val, out):
    out[0] = val


@guvectorize([signature], '()->()', target=TARGET)
def square_gufunc(val, out):
    out[0] = val**2


@guvectorize([signature], '()->()', target=TARGET)
def sqrt_gufunc(val, out):
    out[0] = math.sqrt(val)


signature = '(f8, i4, f8, f8[:])'


@guvectorize([signature], '(),(),()->()', target=TARGET)
def replace_gufunc(counts, min_count, vals, out):
    if counts > min_count:
        out[0] = vals


def setup():
    rng = np.random.default_rng(107)
    n = scaled(2_000_000)
    weights = rng.exponential(1.0, size=n)
    values = rng.uniform(0.5, 2.0, size=n)
    divisors = rng.uniform(0.5, 2.0, size=n)
    divisors[rng.random(n) < 0.1] = 0.0
    counts = rng.poisson(3.0, size=n).astype(np.float64)
    return {"weights": weights, "values": values, "divisors": divisors, "counts": counts}


def run(d):
    weights = cuda.to_device(d["weights"])
    values = cuda.to_device(d["values"])
    divisors = cuda.to_device(d["divisors"])
    counts = cuda.to_device(d["counts"])
    out = cuda.to_device(d["weights"])
    multiply_and_scale_gufunc(0.5, values, out=out)
    multiply_gufunc(values, out=out)
    divide_gufunc(divisors, out=out)
    accumulated = out.copy_to_host()

    scaled_out = cuda.device_array_like(weights)
    scale_gufunc(2.0, values, out=scaled_out)
    square_gufunc(values, out=scaled_out)
    squares = scaled_out.copy_to_host()
    sqrt_gufunc(weights, out=scaled_out)
    roots = scaled_out.copy_to_host()

    replaced = cuda.device_array_like(weights)
    set_gufunc(weights, out=replaced)
    replace_gufunc(counts, 2, values, out=replaced)
    return {"accumulated": accumulated, "squares": squares, "roots": roots,
            "replaced": replaced.copy_to_host()}
