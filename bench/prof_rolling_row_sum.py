"""The Numba corpus's 14_rolling_row_sum, each step of its run() timed: the host's np.array of a
160 MB strided view, to_device, the gufunc, the copy back and the frees, under numba-cuda or
cufunc.numba (one library per process, bound as the corpus runner binds it). Medians of 20 calls
after a first one, in ms.

    python3 bench/prof_rolling_row_sum.py numba
    python3 bench/prof_rolling_row_sum.py cufunc
    CORPUS_SCALE=0.01 python3 bench/prof_rolling_row_sum.py numba-cpu   # the steps, without a GPU
"""
import os
import sys
import time
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "tests", "numba_corpus")
sys.path.insert(0, CORPUS)
import run_corpus  # noqa: E402

pc = time.perf_counter
STEPS = ["host copy", "np.empty", "to_device", "to_device(copy=False)", "gufunc", "copy back",
         "free input", "free output", "free host copy"]


def timed_run(prog, d, times):
    """The program's run(d), step by step (its own lines, each followed by a clock reading)."""
    cuda = prog.cuda
    t = [pc()]
    x = d["x"]
    Out = np.array(prog.rolling_window(x, 5)); t.append(pc())
    out = np.empty(x.shape[0] - 4, dtype=np.float32); t.append(pc())
    da = cuda.to_device(Out); t.append(pc())
    dev_out = cuda.to_device(out, copy=False); t.append(pc())
    prog.row_sum(da, out=dev_out); t.append(pc())
    dev_out.copy_to_host(out); t.append(pc())
    del da; t.append(pc())
    del dev_out; t.append(pc())
    del Out; t.append(pc())
    times.append(np.diff(t))
    return {"window_sums": out}


def main(lib):
    run_corpus._bind_numba(lib)
    prog = run_corpus._load_program(
        os.path.join(CORPUS, "programs", "14_rolling_row_sum.py"), 0)
    d = prog.setup()
    times, whole = [], []
    timed_run(prog, d, times)
    for _ in range(20):
        t0 = pc()
        timed_run(prog, d, times)
        whole.append(pc() - t0)
    med = np.median(np.array(times[1:]), axis=0) * 1e3
    print("%-6s whole call: median %.1f, min %.1f, max %.1f |" % (
        lib, 1e3 * np.median(whole), 1e3 * min(whole), 1e3 * max(whole)),
        " ".join("%s %.2f" % (n, v) for n, v in zip(STEPS, med)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cufunc")
