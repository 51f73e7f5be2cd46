"""Several GPUs of one host through Dask's distributed scheduler: weak and strong
scaling of cufunc's hypot (a ufunc) and sum (ufunc.reduce), beside CuPy's own np.hypot and .sum on
the same dask arrays.

One worker process per GPU (examples/dask_multigpu.py's make_cluster: dask_cuda's LocalCUDACluster
when installed, else dask.distributed Nannies with CUDA_VISIBLE_DEVICES per worker). The operands
are CuPy arrays made on the workers, one chunk per GPU, pinned to their worker (client.submit with
workers=), persisted before the clock starts. Each timed run is a whole graph through the
scheduler, under new keys (a no-op task per chunk in front: never answered from a previous run's
results): hypot results persisted and waited for (they stay on the GPUs), the sum computed to a
scalar on the client. Best of --reps runs (the first, which rebuilds the ufuncs on the workers and
loads their kernels, is not counted).

  weak:   2**LOG2 float32 per GPU (default 2**30: 4 GiB per operand per GPU), on 1, 2, 4 GPUs
  strong: 2**LOG2 float32 in all, split over the GPUs

Throughput: GB/s of operands moved (hypot 12 bytes per element: two reads and a write; sum 4),
over all GPUs; "x1" is the ratio to the 1-GPU run of the same table (the issue asks for 1.9 and
3.6 on 2 and 4 GPUs, weak scaling). Runs on one GPU too (the 1-GPU rows only).

    python bench/bench_multigpu.py [--gpus 1,2,4] [--log2 30] [--reps 5] [--strong-log2 30]
"""
import argparse
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

from cufunc import vectorize  # noqa: E402


@vectorize(["float32(float32, float32)"])
def hypot(a, b):
    return math.sqrt(a * a + b * b)


@vectorize(["float32(float32, float32)"], identity=0)
def add(a, b):
    return a + b


def make_chunk(seed, n, block_id=None):
    import cupy as cp
    return cp.random.RandomState(seed).rand(n, dtype=cp.float32)


def chunk_max_diff(a, b):
    import cupy as cp
    return cp.asnumpy(cp.abs(a - b).max()).reshape(1).astype(np.float64)


def placed_array(addrs, n_per_gpu, seed):
    """A 1-d dask array of CuPy chunks, chunk k made on worker addrs[k] (dask.annotate) and kept
    there: the calls on it run where the chunks are, no chunk moves."""
    import cupy as cp
    import dask
    import dask.array as da
    parts = []
    for k, a in enumerate(addrs):
        with dask.annotate(workers=[a], allow_other_workers=False):
            parts.append(da.map_blocks(make_chunk, seed * 1000 + k, n_per_gpu,
                                       chunks=((n_per_gpu,),), dtype=np.float32,
                                       meta=cp.empty((0,), dtype=cp.float32),
                                       name="bench-x%d-%d" % (seed, k)))
    return da.concatenate(parts)


def same(block):
    return block


_runs = iter(range(1 << 30))


def fresh(a):
    """a under new keys (a no-op task per chunk, run where the chunk is): each timed run is a new
    graph, never answered from results a previous run left in the workers' memory."""
    return a.map_blocks(same, name="run-%d-%s" % (next(_runs), a.name), dtype=a.dtype,
                        meta=a._meta)


def best_of(reps, fn):
    fn()                                 # warm: ufuncs rebuilt on the workers, kernels loaded
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def run_config(ngpu, n_per_gpu, reps, use_dask_cuda):
    """{op: seconds} for one cluster of ngpu workers and n_per_gpu float32 per GPU."""
    import dask
    from distributed import Client, wait
    from dask_multigpu import make_cluster
    cluster, kind = make_cluster(ngpu, use_dask_cuda)
    with cluster, Client(cluster) as client:
        client.wait_for_workers(ngpu)
        addrs = sorted(client.scheduler_info()["workers"])
        x, y = client.persist([placed_array(addrs, n_per_gpu, 1),
                               placed_array(addrs, n_per_gpu, 2)])
        wait([x, y])
        held = sorted(len(v) for v in client.has_what().values())
        assert held == [2] * ngpu, "the operands are not one chunk each per worker: %s" % held

        def persist_wait(make):
            def go():
                r = client.persist(make(fresh(x), fresh(y)))
                wait(r)
                del r
            return go

        def compute(make):
            return lambda: float(dask.compute(make(fresh(x)))[0])

        t = {
            "cufunc hypot": best_of(reps, persist_wait(hypot)),
            "CuPy hypot": best_of(reps, persist_wait(np.hypot)),
            "cufunc sum": best_of(reps, compute(lambda a: add.reduce(a, axis=0))),
            "CuPy sum": best_of(reps, compute(lambda a: a.sum())),
        }
        ours_h, theirs_h = hypot(x, y), np.hypot(x, y)
        ours_s, theirs_s = add.reduce(x, axis=0), x.sum()
        # the two libraries agree (on the GPUs: only one float per chunk comes back)
        diff = float(dask.compute(ours_h.map_blocks(chunk_max_diff, theirs_h, dtype=np.float64,
                                                    chunks=(1,), meta=np.empty((0,))))[0].max())
        s_ours, s_theirs = dask.compute(ours_s, theirs_s)
        rel = abs(float(s_ours) - float(s_theirs)) / max(abs(float(s_theirs)), 1e-30)
        t["_check"] = (diff, rel, kind)
    return t


TABLE_OPS = [("cufunc hypot", 12), ("CuPy hypot", 12), ("cufunc sum", 4), ("CuPy sum", 4)]


def print_table(title, rows, per_gpu_of):
    print("\n%s" % title)
    print("| GPUs | float32 per GPU | " + " | ".join("%s: GB/s, x1, ms" % op for op, _ in TABLE_OPS)
          + " |")
    print("|---|---|" + "---|" * len(TABLE_OPS))
    base = {}
    for ngpu, t in rows:
        n_total = per_gpu_of(ngpu) * ngpu
        cells = []
        for op, nbytes in TABLE_OPS:
            gbs = n_total * nbytes / t[op] / 1e9
            base.setdefault(op, gbs)
            cells.append("%.1f, %.2f, %.1f" % (gbs, gbs / base[op], t[op] * 1e3))
        print("| %d | 2^%d | %s |" % (ngpu, round(math.log2(per_gpu_of(ngpu))), " | ".join(cells)))
    for ngpu, t in rows:
        diff, rel, kind = t["_check"]
        print("  %d GPU(s), %s: max |cufunc - CuPy| hypot %.3g, sum relative difference %.3g"
              % (ngpu, kind, diff, rel))


def main(argv=None):
    from cufunc import _core
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", default="1,2,4", help="GPU counts (those above what is present "
                    "are left out)")
    ap.add_argument("--log2", type=int, default=30, help="weak scaling: 2**LOG2 float32 per GPU")
    ap.add_argument("--strong-log2", type=int, default=30, help="strong scaling: 2**N in all")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-strong", action="store_true")
    ap.add_argument("--no-dask-cuda", action="store_true")
    args = ap.parse_args(argv)
    have = _core.device_count()
    counts = [g for g in (int(v) for v in args.gpus.split(",")) if 1 <= g <= have]
    from cufunc import cuda
    names = [cuda.gpus[i].name for i in range(have)]
    print("bench_multigpu: %d GPU(s) present (%s); GPU counts run: %s"
          % (have, ", ".join(sorted(set(names))), counts))
    weak = [(g, run_config(g, 1 << args.log2, args.reps, not args.no_dask_cuda)) for g in counts]
    print_table("Weak scaling: 2^%d float32 per GPU (best of %d, through the distributed "
                "scheduler)" % (args.log2, args.reps), weak, lambda g: 1 << args.log2)
    if not args.no_strong:
        strong = [(g, run_config(g, (1 << args.strong_log2) // g, args.reps,
                                 not args.no_dask_cuda)) for g in counts]
        print_table("Strong scaling: 2^%d float32 in all" % args.strong_log2, strong,
                    lambda g: (1 << args.strong_log2) // g)
    missing = [g for g in (int(v) for v in args.gpus.split(",")) if g not in counts]
    if missing:
        print("\n(GPU counts %s were not run: %d GPU(s) present)" % (missing, have))


if __name__ == "__main__":
    main()
