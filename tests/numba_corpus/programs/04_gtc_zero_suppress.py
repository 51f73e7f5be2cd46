# Zero suppression of an int16 waveform: an int16 ufunc with a variable assigned in both branches,
# called with the threshold as a Python float (the tutorial's call) and as an int16.
# After: ContinuumIO/gtc2017-numba, "2 - CUDA Basics.ipynb" (exercise: zero_suppress).
# License: not stated. Written anew for this corpus with the exercise's signature, body and call.
import numpy as np
from numba import vectorize

from _corpus_data import scaled

SOURCE = "ContinuumIO/gtc2017-numba: 2 - CUDA Basics.ipynb"
LICENSE = "not stated"
DOMAIN = "signal processing tutorial"


@vectorize(['int16(int16, int16)'], target='cuda')
def zero_suppress(waveform_value, threshold):
    if waveform_value < threshold:
        result = 0
    else:
        result = waveform_value
    return result


def setup():
    rng = np.random.default_rng(104)
    n = scaled(1_000_000)
    t = np.arange(n, dtype=np.float64)
    pulses = np.maximum(np.sin(t / (n / 23.0)) - 0.3, 0.0) * 100.0
    noise = rng.normal(size=n) * 15.0
    return {"waveform": (pulses + noise).astype(np.int16)}


def run(d):
    return {
        "float_threshold": zero_suppress(d["waveform"], 15.0),
        "int16_threshold": zero_suppress(d["waveform"], np.int16(15)),
    }
