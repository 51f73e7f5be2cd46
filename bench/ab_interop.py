"""Interleaved A/B of the result routes of one-element calls on torch tensors and CuPy arrays:
results allocated by the library itself (_core._lib_results(True, torch=True)) against cufunc
DeviceArrays wrapped into its type, 21 rounds of 2000 calls, DeviceArray calls interleaved as the
reference; medians and the paired differences. Needs torch and cupy.

    python3 bench/ab_interop.py
"""
import math, time, statistics as st, numpy as np
from cufunc import cuda, vectorize, _core
import torch, cupy as cp
@vectorize(["float32(float32, float32)"])
def hyp(x, y):
    return math.sqrt(x * x + y * y)
d1, d2 = cuda.to_device(np.ones(1, np.float32)), cuda.to_device(np.ones(1, np.float32))
ta, tb = torch.ones(1, device="cuda"), torch.ones(1, device="cuda")
ca, cb = cp.ones(1, cp.float32), cp.ones(1, cp.float32)
def batch(fn, n=2000):
    t0 = time.perf_counter()
    for _ in range(n): fn()
    cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6
def lib(on):
    _core._lib_results(on, torch=on)
rows = {"DA": [], "torch lib": [], "torch wrapped": [], "cupy lib": [], "cupy wrapped": [],
        "torch.hypot": [], "cp.hypot": []}
for f in (lambda: hyp(d1, d2), lambda: hyp(ta, tb), lambda: hyp(ca, cb)):
    for _ in range(500): f()
for r in range(21):
    rows["DA"].append(batch(lambda: hyp(d1, d2)))
    lib(True); rows["torch lib"].append(batch(lambda: hyp(ta, tb)))
    lib(False); rows["torch wrapped"].append(batch(lambda: hyp(ta, tb)))
    lib(True); rows["cupy lib"].append(batch(lambda: hyp(ca, cb)))
    lib(False); rows["cupy wrapped"].append(batch(lambda: hyp(ca, cb)))
    lib(True)
    rows["torch.hypot"].append(batch(lambda: torch.hypot(ta, tb)))
    rows["cp.hypot"].append(batch(lambda: cp.hypot(ca, cb)))
da = st.median(rows["DA"])
for k, v in rows.items():
    print("%-15s median %6.2f us  min %6.2f  (%.2fx DA median)" % (k, st.median(v), min(v), st.median(v) / da))
for a, b in (("torch lib", "torch wrapped"), ("cupy lib", "cupy wrapped")):
    diffs = [x - y for x, y in zip(rows[a], rows[b])]
    print("%s - %s: median paired difference %.2f us (%d of 21 rounds lib faster)" % (
        a, b, st.median(diffs), sum(d < 0 for d in diffs)))
