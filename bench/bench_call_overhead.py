"""Where the time of a one-element call goes (target: within 1.3x of the launch floor), ours beside the peers.

For hypot on one-element float32 device arrays with out= given, each library's call is timed two
ways, on the machine that runs it:
  * queued: batches of 5000 back-to-back calls, each batch ending with a synchronisation (the
    figure bench_vectorize.py reports against the launch floor);
  * CPU alone: 256 calls timed right after the device went idle, before any synchronisation, so
    the launch queue never fills and the clock sees only the host's work.
A Python loop calling an empty lambda is timed too: that much of every figure is the loop itself.
Where "queued" is well above "CPU alone", the GPU (how fast it takes launches from the queue)
sets the pace, not the host.

Usage: python3 bench/bench_call_overhead.py
"""
import math

import numpy as np

from benchlib import timeit, peers, cpu_alone

if not hasattr(np, "row_stack"):          # numba-cuda 0.30 under NumPy >= 2.5
    np.row_stack = np.vstack

from cufunc import cuda, vectorize


@vectorize(["float32(float32, float32)"])
def hypot(x, y):
    return math.sqrt(x * x + y * y)


def main():
    P = peers()
    cases = {}
    a1, b1, o1 = (cuda.to_device(np.ones(1, np.float32)) for _ in range(3))
    cases["cufunc"] = (lambda: hypot(a1, b1, out=o1), cuda.synchronize)
    if "torch" in P:
        torch = P["torch"]
        ta1, tb1, to1 = (torch.ones(1, device="cuda") for _ in range(3))
        cases["PyTorch"] = (lambda: torch.hypot(ta1, tb1, out=to1), torch.cuda.synchronize)
    if "cupy" in P:
        cp = P["cupy"]
        ca1, cb1, co1 = (cp.ones(1, cp.float32) for _ in range(3))
        cases["CuPy"] = (lambda: cp.hypot(ca1, cb1, out=co1), cp.cuda.runtime.deviceSynchronize)
    loop = 1e6 * timeit(lambda: None, lambda: None, 7, 5000)
    print("one-element hypot with out=, microseconds per call")
    print("| library | queued (5000 calls, then sync) | CPU alone (256 calls, no wait) |")
    print("|---|---|---|")
    print("| (empty lambda in the same loop) | %.3f | - |" % loop)
    for name, (fn, sync) in cases.items():
        q = 1e6 * timeit(fn, sync, 7, 5000)
        c = cpu_alone(fn, sync)
        print("| %s | %.2f | %.2f |" % (name, q, c))


if __name__ == "__main__":
    main()
