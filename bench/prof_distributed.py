"""Where a dask.distributed graph's time goes, per library: the empty round trip of the cluster,
and the task stream of one run of bench_multigpu.py's graphs (the pipeline, the sum) after two warm
runs, on clusters of 1..N workers (one per GPU, examples/dask_multigpu.py's cluster): when the first
task starts and the last one ends against the wall time, each worker's busy time, and the
transfers between workers (a transfer of a result still being computed waits for its GPU).

    python3 bench/prof_distributed.py 1,2,4 31        # GPU counts, log2 of the float32 per GPU
    LIBS=cufunc python3 bench/prof_distributed.py 2 30
    INPROC=1 python3 bench/prof_distributed.py 1,2 31     # the workers threads of this process

Run from the repository root (it imports bench/bench_multigpu.py and examples/dask_multigpu.py).
"""
import os
import statistics
import sys
import time

sys.path[:0] = [os.path.join(os.getcwd(), "bench"), os.path.join(os.getcwd(), "examples")]
import bench_multigpu as B  # noqa: E402
from distributed import get_task_stream  # noqa: E402

def inc(x):
    return x + 1

def summarize(label, t0, t1, data):
    per = {}
    transfers = []
    first = min(ss["start"] for d in data for ss in d["startstops"]) if data else t0
    last = max(ss["stop"] for d in data for ss in d["startstops"]) if data else t1
    for d in data:
        for ss in d["startstops"]:
            if ss["action"] == "compute":
                w = d["worker"]
                per.setdefault(w, []).append((ss["start"], ss["stop"], str(d["key"])))
            else:
                transfers.append((ss["action"], 1e3 * (ss["stop"] - ss["start"]), str(d["key"])[:40]))
    print("  %s: wall %.1f ms; first task starts %.1f ms in, last ends %.1f ms before the end; %d tasks"
          % (label, 1e3 * (t1 - t0), 1e3 * (first - t0), 1e3 * (t1 - last), len(data)))
    for w, items in sorted(per.items()):
        busy = sum(b - a for a, b, _ in items)
        span = max(b for _, b, _ in items) - min(a for a, _, _ in items)
        top = sorted(items, key=lambda t: t[0] - t[1])[:3]
        print("    worker %s: %d tasks, busy %.1f ms over a span of %.1f ms; longest: %s" % (
            w[-5:], len(items), 1e3 * busy, 1e3 * span,
            ", ".join("%s %.1f" % (k.split("'")[1][:24] if "'" in k else k[:24], 1e3 * (b - a)) for a, b, k in top)))
    for a, ms, k in transfers:
        print("    %s %.1f ms %s" % (a, ms, k))

def main():
    ngpus = [int(v) for v in sys.argv[1].split(",")]
    n = 1 << int(sys.argv[2])
    for g in ngpus:
        for lib in os.environ.get("LIBS", "cufunc,CuPy").split(","):
            with B.placed_cluster(g, n, inproc=bool(os.environ.get("INPROC"))) as (
                    client, addrs, arrs):
                rt = []
                for i in range(30):
                    t0 = time.perf_counter()
                    client.submit(inc, i, pure=False).result()
                    rt.append(time.perf_counter() - t0)
                print("== %d worker(s), %s: empty round trip median %.2f ms (min %.2f)"
                      % (g, lib, 1e3 * statistics.median(rt), 1e3 * min(rt)), flush=True)
                for what in B.WORK:
                    B.run_dask(what, lib, arrs)
                    B.run_dask(what, lib, arrs)
                    with get_task_stream(client) as ts:
                        t0 = time.time()
                        B.run_dask(what, lib, arrs)
                        t1 = time.time()
                    summarize("%s %s" % (what, lib), t0, t1, ts.data)


if __name__ == "__main__":
    main()
