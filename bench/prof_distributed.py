"""Where a dask.distributed graph's time goes, per library: the empty round trip of the cluster,
and the task stream of one run of bench_multigpu.py's graphs (the pipeline, the sum) after two warm
runs, on clusters of 1..N workers (one per GPU, examples/dask_multigpu.py's cluster): when the first
task starts and the last one ends against the wall time, each worker's busy time, and the
transfers between workers (a transfer of a result still being computed waits for its GPU).

    python3 bench/prof_distributed.py 1,2,4 31        # GPU counts, log2 of the float32 per GPU
    LIBS=cufunc python3 bench/prof_distributed.py 2 30

Run from the repository root (it imports bench/bench_multigpu.py and examples/dask_multigpu.py).
"""
import sys, time, statistics, os
import numpy as np
np.row_stack = getattr(np, "row_stack", np.vstack)   # numba-cuda 0.30 under NumPy >= 2.5
sys.path[:0] = [os.path.join(os.getcwd(), "bench"), os.path.join(os.getcwd(), "examples")]
import bench_multigpu as B
from distributed import Client, wait, get_task_stream
from dask_multigpu import make_cluster, worker_setup

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
    log2 = int(sys.argv[2])
    n = 1 << log2
    for g in ngpus:
        for lib in os.environ.get("LIBS", "cufunc,CuPy").split(","):
            cluster, kind = make_cluster(g, use_dask_cuda=False)
            with cluster, Client(cluster) as client:
                client.wait_for_workers(g)
                worker_setup(); client.run(worker_setup)
                addrs = sorted(client.scheduler_info()["workers"])
                rt = []
                for i in range(30):
                    t0 = time.perf_counter(); client.submit(inc, i, pure=False).result(); rt.append(time.perf_counter() - t0)
                print("== %d worker(s), %s: empty round trip median %.2f ms (min %.2f)" % (g, lib, 1e3 * statistics.median(rt), 1e3 * min(rt)), flush=True)
                arrs = dict(zip("SXT", client.persist([B.placed_bs(client, addrs, n, w) for w in "SXT"])))
                wait(list(arrs.values()))
                for what in B.WORK:
                    B.run_dask(what, lib, arrs)
                    B.run_dask(what, lib, arrs)
                    with get_task_stream(client) as ts:
                        t0 = time.time()
                        dt, nums = B.run_dask(what, lib, arrs)
                        t1 = time.time()
                    summarize("%s %s" % (what, lib), t0, t1, ts.data)
                arrs.clear()

if __name__ == "__main__":
    main()
