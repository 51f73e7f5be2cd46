# Zero suppression with signatures that give no return type ('(int16, int16)', ...): the result
# type comes from the body, which returns the value or the float literal 0.0. Called, as the
# benchmark's input generator calls it, with int16/float32/float64 pulse trains and 8.0.
# After: numba/numba-examples, examples/waveforms/zero_suppression/gpu.py and impl.py.
# License: BSD-2-Clause (numba-examples). Written anew for this corpus with the file's
# signatures, body and call.
import numpy as np
import numba

from _corpus_data import scaled

SOURCE = "numba/numba-examples: examples/waveforms/zero_suppression/gpu.py"
LICENSE = "BSD-2-Clause"
DOMAIN = "signal processing (benchmark)"


@numba.vectorize(['(int16, int16)', '(float32, float32)', '(float64, float64)'], target='cuda')
def numba_zero_suppression(values, threshold):
    if abs(values) >= threshold:
        return values
    else:
        return 0.0


def setup():
    rng = np.random.default_rng(106)
    size = scaled(1_000_000)
    base = rng.normal(loc=0.0, scale=5.0, size=size)
    base += 50 * np.clip(np.cos(np.linspace(0.0, 1.0, num=size) * np.pi * 10), 0, 1.0)
    return {"int16": base.astype(np.int16), "float32": base.astype(np.float32),
            "float64": base.astype(np.float64)}


def run(d):
    return {name: numba_zero_suppression(d[name], 8.0) for name in ("int16", "float32", "float64")}
