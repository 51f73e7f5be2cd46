# Device memory management with ufuncs: to_device inputs, a device_array output passed as out=,
# copy_to_host; then the make_pulses ufunc (math.sin, max with a float literal) chained into
# add_ufunc with a Python float scalar, first on host arrays and then with every step on the device.
# After: ContinuumIO/gtc2017-numba, "3 - Memory Management.ipynb" (add_ufunc, make_pulses and the
# exercise). License: not stated. Written anew for this corpus with the notebook's signatures,
# bodies and call patterns.
import math

import numpy as np
from numba import cuda, vectorize

from _corpus_data import scaled

SOURCE = "ContinuumIO/gtc2017-numba: 3 - Memory Management.ipynb"
LICENSE = "not stated"
DOMAIN = "tutorial (memory management)"
TOLERANCE = {
    "pulses_host": {"ulp": 2, "reason": "sin of two math libraries; FMA contraction"},
    "waveform_host": {"ulp": 2, "reason": "adds the tolerated pulses"},
    "waveform_device": {"ulp": 2, "reason": "adds the tolerated pulses"},
}


@vectorize(['float32(float32, float32)'], target='cuda')
def add_ufunc(x, y):
    return x + y


@vectorize(['float32(float32, float32, float32)'], target='cuda')
def make_pulses(i, period, amplitude):
    return max(math.sin(i / period) - 0.3, 0.0) * amplitude


def setup():
    rng = np.random.default_rng(105)
    n = scaled(1_000_000)
    return {
        "x": np.arange(n).astype(np.float32),
        "noise": (rng.normal(size=n) * 3).astype(np.float32),
        "t": np.arange(n, dtype=np.float32),
    }


def run(d):
    x = d["x"]
    y = 2 * x
    n = x.shape[0]
    x_device = cuda.to_device(x)
    y_device = cuda.to_device(y)
    out_device = cuda.device_array(shape=(n,), dtype=np.float32)
    add_ufunc(x_device, y_device, out=out_device)
    out_host = out_device.copy_to_host()
    returned = add_ufunc(x_device, y_device)

    period = n / 23
    pulses = make_pulses(d["t"], period, 100.0)
    waveform = add_ufunc(pulses, d["noise"])

    t_device = cuda.to_device(d["t"])
    noise_device = cuda.to_device(d["noise"])
    pulses_device = cuda.device_array_like(t_device)
    waveform_device = cuda.device_array_like(t_device)
    make_pulses(t_device, period, 100.0, out=pulses_device)
    add_ufunc(pulses_device, noise_device, out=waveform_device)
    return {
        "out_host": out_host,
        "returned_device": returned.copy_to_host(),
        "pulses_host": pulses,
        "waveform_host": waveform,
        "waveform_device": waveform_device.copy_to_host(),
    }
