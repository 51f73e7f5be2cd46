# Monte Carlo option pricer: one geometric Brownian step per time step as a float64 CUDA ufunc
# (math.exp), driven over the columns of a Fortran-ordered, pinned paths array on one stream:
# device_array(stream=), to_device(column, stream=), the ufunc with Python-float scalars,
# out= and stream=, copy_to_host(column, stream=), and a final stream.synchronize().
# After: ContinuumIO/numbapro-examples, monte_carlo_pricer/pricer_cuda_vectorize.py and driver.py
# (written for NumbaPro: target='gpu', a cuRAND generator and a pooled allocator; here
# target='cuda', NumPy normal draws copied to the device, and plain to_device).
# License: not stated. Written anew for this corpus with the example's signature, body and calls.
import math

import numpy as np
from numba import cuda, vectorize

from _corpus_data import scaled

SOURCE = "ContinuumIO/numbapro-examples: monte_carlo_pricer/pricer_cuda_vectorize.py"
LICENSE = "not stated"
DOMAIN = "finance (option pricing)"
TOLERANCE = {"*": {"rtol": 1e-13, "reason": "exp of two math libraries and FMA contraction, "
                                            "compounded over the time steps"}}

StockPrice = 20.83
StrikePrice = 21.50
Volatility = 0.021
InterestRate = 0.20
Maturity = 5. / 12.


@vectorize(['f8(f8, f8, f8, f8, f8)'], target='cuda')
def step(last, dt, c0, c1, noise):
    return last * math.exp(c0 * dt + c1 * noise)


def monte_carlo_pricer(paths, dt, interest, volatility, normals):
    n = paths.shape[0]
    stream = cuda.stream()
    d_normdist = cuda.device_array(n, dtype=np.double, stream=stream)

    c0 = interest - 0.5 * volatility ** 2
    c1 = volatility * math.sqrt(dt)

    d_last = cuda.to_device(paths[:, 0])
    for j in range(1, paths.shape[1]):
        d_normdist = cuda.to_device(normals[j - 1], stream=stream)
        d_paths = cuda.to_device(paths[:, j], stream=stream)
        step(d_last, dt, c0, c1, d_normdist, out=d_paths, stream=stream)
        d_paths.copy_to_host(paths[:, j], stream=stream)
        d_last = d_paths

    stream.synchronize()


def setup():
    rng = np.random.default_rng(119)
    NumPath, NumStep = scaled(1_000_000), 50
    return {"NumPath": NumPath, "NumStep": NumStep,
            "normals": rng.standard_normal((NumStep, NumPath))}


def run(d):
    NumPath, NumStep = d["NumPath"], d["NumStep"]
    paths = np.zeros((NumPath, NumStep + 1), order='F')
    paths[:, 0] = StockPrice
    DT = Maturity / NumStep
    with cuda.pinned(paths):
        monte_carlo_pricer(paths, DT, InterestRate, Volatility, d["normals"])
    PaidOff = np.maximum(paths[:, -1] - StrikePrice, 0)
    return {"final_prices": paths[:, -1].copy(),
            "option_price": np.float64(np.mean(PaidOff) * math.exp(-InterestRate * Maturity))}
