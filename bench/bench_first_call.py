"""The first call of a new ufunc: with an empty kernel cache (translation, NVRTC, module load,
launch) and in a new process with a warm disk cache (translation, cache read, module load,
launch). Each figure is the median of --procs fresh processes (one process is one sample: a
single one moved by 2x between runs of a restructuring's A/B). Uses only vectorize, to_device and
synchronize, so it runs against older builds too (tools/ab_bench.sh).

Usage: python3 bench/bench_first_call.py [--procs N]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

CHILD = textwrap.dedent("""
    import json, math, sys, time, numpy as np
    from cufunc import cuda, vectorize
    x = cuda.to_device(np.ones(1024, np.float32)); cuda.synchronize()
    t0 = time.perf_counter()
    @vectorize(['float32(float32, float32)'])
    def f(a, b):
        return math.sqrt(a * a + b * b) + %s
    t1 = time.perf_counter()
    r = f(x, x); cuda.synchronize()
    t2 = time.perf_counter()
    print(json.dumps({"decorate": t1 - t0, "first_call": t2 - t1}))
""")


def _run(prog, cache):
    env = dict(os.environ, CUFUNC_CACHE_DIR=cache)
    return json.loads(subprocess.check_output([sys.executable, prog], env=env))


def first_call_rows(procs=5):
    """[(label, median, {peer-style extras})] for the cold and the warm first call."""
    cold, warm = [], []
    with tempfile.TemporaryDirectory() as d:
        for i in range(procs):
            prog = os.path.join(d, "first_call_%d.py" % i)   # a file: the translator reads it
            with open(prog, "w") as f:
                f.write(CHILD % repr(0.125 * (i + 1)))         # a new signature's source each
            cache = os.path.join(d, "cache_%d" % i)
            cold.append(_run(prog, cache))                     # empty cache: compiles
            warm.append(_run(prog, cache))                     # the same source: a cache hit
    med = lambda rs, k: statistics.median(r[k] for r in rs)   # noqa: E731
    return [("first call of a new signature, empty cache (s)", med(cold, "first_call"),
             {"decorate (translate)": med(cold, "decorate")}),
            ("first call in a new process, warm disk cache (ms)", 1e3 * med(warm, "first_call"),
             {"decorate (translate, ms)": 1e3 * med(warm, "decorate")})]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=7)
    args = ap.parse_args()
    try:
        from cufunc import cuda
        if not cuda.is_available():
            raise RuntimeError("no GPU")
    except Exception as e:  # noqa: BLE001
        print("bench_first_call: no usable GPU here (%s); nothing measured" % e)
        return
    print("| figure (median of %d processes) | cufunc | |" % args.procs)
    print("|---|---|---|")
    for label, v, extra in first_call_rows(args.procs):
        print("| %s | %.3g | %s |" % (label, v, ", ".join("%s %.3g" % kv for kv in extra.items())))


if __name__ == "__main__":
    main()
