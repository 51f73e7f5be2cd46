"""The Numba corpus's 14_rolling_row_sum, each step of its run() timed: the host's np.array of a
160 MB strided view, to_device, the gufunc, the copy back and the frees, under numba-cuda or
cufunc.numba (one library per process). Medians of 20 calls after a first one, in ms.

    python3 bench/prof_rolling_row_sum.py numba
    python3 bench/prof_rolling_row_sum.py cufunc
"""
import sys, time, numpy as np
np.row_stack = getattr(np, "row_stack", np.vstack)   # numba-cuda 0.30 under NumPy >= 2.5
lib = sys.argv[1]
if lib == "numba":
    from numba import cuda, guvectorize
else:
    from cufunc.numba import cuda, guvectorize
@guvectorize(['void(float32[:], float32[:])'], '(n)->()', target='cuda')
def row_sum(inp, out):
    temp = 0.
    for i in range(inp.shape[0]):
        temp += inp[i]
    out[0] = temp
def rw(a, w):
    return np.lib.stride_tricks.as_strided(a, shape=a.shape[:-1] + (a.shape[-1] - w + 1, w), strides=a.strides + (a.strides[-1],))
pc = time.perf_counter
def run(d, T):
    t0 = pc()
    x = d["x"]
    Out = np.array(rw(x, 5)); t1 = pc()
    out = np.empty(x.shape[0] - 4, dtype=np.float32); t2 = pc()
    da = cuda.to_device(Out); t3 = pc()
    dev_out = cuda.to_device(out, copy=False); t4 = pc()
    row_sum(da, out=dev_out); t5 = pc()
    dev_out.copy_to_host(out); t6 = pc()
    del da; t7 = pc()
    del dev_out; t8 = pc()
    del Out; t9 = pc()
    T.append(np.diff([t0, t1, t2, t3, t4, t5, t6, t7, t8, t9]))
    return {"window_sums": out}
d = {"x": np.arange(8_000_000, dtype=np.float32)}
T = []
run(d, T)
tot = []
for r in range(20):
    t0 = pc(); run(d, T); tot.append(pc() - t0)
names = ["hostcopy", "np.empty", "to_device", "todev(copy=False)", "gufunc", "to_host", "del da", "del dev_out", "del Out"]
med = np.median(np.array(T[1:]), axis=0) * 1e3
print("%-6s total med %.1f min %.1f max %.1f |" % (lib, 1e3*np.median(tot), 1e3*min(tot), 1e3*max(tot)),
      " ".join("%s %.2f" % (n, v) for n, v in zip(names, med)), flush=True)
