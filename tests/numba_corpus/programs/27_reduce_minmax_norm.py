# Reductions in two numerical codes: min and max as cuda.reduce lambdas with init= taken from the
# data, on device arrays (a 2-D molecular-dynamics neighbour-list builder), and a p-norm whose sum
# reduction is created inside the function on every call and applied to a flattened host array.
# After: public GitHub scripts found by the code index (buildNeighbourList_cuda with min_cuda /
# max_cuda; p_norm with reduced_sum; the index does not name the repositories). The coordinates'
# split into x and y, done there by a @cuda.jit kernel, is done here by host slicing and to_device.
# License: unknown. Written anew for this corpus with the scripts' reductions and calls.
import numpy as np
from numba import cuda

from _corpus_data import scaled

SOURCE = "public GitHub molecular-dynamics and numerics scripts (code index, repositories not named)"
LICENSE = "unknown"
DOMAIN = "physics (molecular dynamics), numerics"
TOLERANCE = {"p_norm": {"rtol": 1e-5, "reason": "float32 summation order of two tree reductions"}}

min_cuda = cuda.reduce(lambda a, b: min(a, b))
max_cuda = cuda.reduce(lambda a, b: max(a, b))


def bounding_box(ats):
    nat = ats.shape[0]
    atsx = cuda.to_device(np.ascontiguousarray(ats[:, 0]))
    atsy = cuda.to_device(np.ascontiguousarray(ats[:, 1]))
    assert atsx.shape[0] == nat
    minx = min_cuda(atsx, init=ats[0, 0])
    miny = min_cuda(atsy, init=ats[0, 1])
    maxx = max_cuda(atsx, init=ats[0, 0])
    maxy = max_cuda(atsy, init=ats[0, 1])
    return minx, miny, maxx, maxy


def p_norm(ap, p):
    d_ap_out_flatten = (np.abs(ap) ** p).astype(np.float32).flatten()
    reduced_sum = cuda.reduce(lambda a, b: a + b)
    reduced_ap = reduced_sum(d_ap_out_flatten)
    rst = reduced_ap ** (1 / p)
    return rst


def setup():
    rng = np.random.default_rng(127)
    return {"ats": rng.uniform(-50.0, 50.0, (scaled(2_000_000), 2)),
            "ap": rng.standard_normal((scaled(1024, 4), 1024)).astype(np.float32)}


def run(d):
    box = bounding_box(d["ats"])
    return {"box": np.array(box, dtype=np.float64),
            "p_norm": np.float32(p_norm(d["ap"], 2))}
