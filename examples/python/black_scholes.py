"""Black-Scholes prices of European call and put options, on NumPy arrays and on device arrays.

One ufunc with two outputs (call, put) and float32 and float64 loops; the normal CDF is a device
function called from the body; the market's rate and volatility are module constants, captured
when the ufunc is compiled. Checked against the same formula in NumPy.

    python black_scholes.py
"""
import math
import time

import numpy as np

from cufunc import cuda, vectorize

RISKFREE = 0.02
VOLATILITY = 0.30


@cuda.jit(device=True)
def norm_cdf(x):
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


@vectorize(["Tuple(float64, float64)(float64, float64, float64)",
            "Tuple(float32, float32)(float32, float32, float32)"])
def black_scholes(spot, strike, years):
    sqrt_t = math.sqrt(years)
    d1 = (math.log(spot / strike) + (RISKFREE + 0.5 * VOLATILITY * VOLATILITY) * years) / (
        VOLATILITY * sqrt_t)
    d2 = d1 - VOLATILITY * sqrt_t
    discount = math.exp(-RISKFREE * years)
    call = spot * norm_cdf(d1) - strike * discount * norm_cdf(d2)
    put = strike * discount * norm_cdf(-d2) - spot * norm_cdf(-d1)
    return call, put


KERNELS = ["black_scholes"]
NEEDS = []


def reference(spot, strike, years):
    erf = np.vectorize(math.erf)
    cdf = lambda x: 0.5 * (1.0 + erf(x / math.sqrt(2.0)))  # noqa: E731
    sqrt_t = np.sqrt(years)
    d1 = (np.log(spot / strike) + (RISKFREE + 0.5 * VOLATILITY ** 2) * years) / (VOLATILITY * sqrt_t)
    d2 = d1 - VOLATILITY * sqrt_t
    discount = np.exp(-RISKFREE * years)
    return (spot * cdf(d1) - strike * discount * cdf(d2),
            strike * discount * cdf(-d2) - spot * cdf(-d1))


def main(n=1 << 20):
    rng = np.random.default_rng(0)
    spot = rng.uniform(5.0, 30.0, n)
    strike = rng.uniform(1.0, 100.0, n)
    years = rng.uniform(0.25, 10.0, n)

    # host arrays in, host arrays out (cufunc copies through page-locked staging)
    call, put = black_scholes(spot, strike, years)
    ref_call, ref_put = reference(spot[:10000], strike[:10000], years[:10000])
    assert np.allclose(call[:10000], ref_call, rtol=1e-9, atol=1e-9)
    assert np.allclose(put[:10000], ref_put, rtol=1e-9, atol=1e-9)

    # device arrays: the data stays on the GPU, results written into given arrays
    d_spot, d_strike, d_years = (cuda.to_device(a.astype(np.float32)) for a in (spot, strike, years))
    d_call, d_put = cuda.device_array(n, np.float32), cuda.device_array(n, np.float32)
    black_scholes(d_spot, d_strike, d_years, out=(d_call, d_put))   # compile and load once
    cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        black_scholes(d_spot, d_strike, d_years, out=(d_call, d_put))
    cuda.synchronize()
    dt = (time.perf_counter() - t0) / 10
    assert np.allclose(d_call.copy_to_host(), call, rtol=1e-3, atol=1e-3)
    assert np.allclose(d_put.copy_to_host(), put, rtol=1e-3, atol=1e-3)
    print("%d options, float32 on the device: %.3f ms a call (%.1f G options/s)"
          % (n, dt * 1e3, n / dt / 1e9))
    print("OK")


if __name__ == "__main__":
    main()
