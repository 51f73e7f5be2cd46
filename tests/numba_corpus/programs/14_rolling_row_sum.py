# Rolling-window sums: a float32 row-sum gufunc whose accumulator starts as the float 0. (so Numba
# sums in float64), applied to a strided rolling-window view copied to the device, with a device
# output allocated by to_device(copy=False) and copied back into a host array.
# After: a public GitHub script found by the code index (file id 48338884952; the index does not
# name its repository). License: unknown. Written anew for this corpus with the script's
# signature, body and calls; the window data is the script's own (an arange).
import numpy as np
from numba import guvectorize, cuda

from _corpus_data import scaled

SOURCE = "public GitHub script (code index file 48338884952, repository not named)"
LICENSE = "unknown"
DOMAIN = "time series"


@guvectorize(['void(float32[:], float32[:])'], '(n)->()', target='cuda')
def row_sum(inp, out):
    temp = 0.
    for i in range(inp.shape[0]):
        temp += inp[i]
    out[0] = temp


def rolling_window(a, window):
    shape = a.shape[:-1] + (a.shape[-1] - window + 1, window)
    strides = a.strides + (a.strides[-1],)
    return np.lib.stride_tricks.as_strided(a, shape=shape, strides=strides)


def setup():
    # Past 2**24 / 5 the float32 window sums are no longer exact: where a float32 accumulator and
    # Numba's float64 one round differently.
    return {"x": np.arange(scaled(8_000_000), dtype=np.float32)}


def run(d):
    x = d["x"]
    Out = np.array(rolling_window(x, 5))
    out = np.empty(x.shape[0] - 4, dtype=np.float32)
    da = cuda.to_device(Out)
    dev_out = cuda.to_device(out, copy=False)
    row_sum(da, out=dev_out)
    dev_out.copy_to_host(out)
    return {"window_sums": out}
