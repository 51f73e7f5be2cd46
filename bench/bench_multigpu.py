"""Several GPUs of one host: weak scaling of a realistic pipeline per GPU, cufunc beside CuPy, through
three ways of driving the GPUs (the default), and the older hypot/sum tables (--simple).

The pipeline, on each GPU's chunk of N float32 (--log2, default 2^31 or what the GPUs' memory
allows): Black-Scholes in three cufunc ufuncs (d1; the call price; the put from put-call parity),
a gufunc over rows of 1024 (the mean |call - put| of each row), and two reductions (the sum of the
call prices and of the row means, float64 accumulators): two numbers come back. CuPy does the same
with ElementwiseKernels of the same arithmetic, a ReductionKernel for the rows and its own
`sum` for the reductions.

  threads       no scheduler: one Python thread per GPU runs the pipeline on its chunk (the
                baseline: what the GPUs and the libraries allow)
  dask-threads  one process, CuPy chunks on every GPU, Dask's threaded scheduler: cufunc's calls
                on the dask arrays (each task runs on its chunk's device, reductions gather their
                partials device to device); CuPy's steps as map_blocks under the chunk's device
                (CuPy works on its current device) and its sum as dask's reduction of CuPy sums
  distributed-inproc
                dask.distributed's scheduler with one worker per GPU, the workers threads of one
                process (LocalCluster(processes=False)): chunk k made on GPU k by worker k; the
                partials travel between workers as references and are moved device to device as
                under the threaded scheduler
  distributed   dask.distributed, one worker process per GPU (CUDA_VISIBLE_DEVICES per worker,
                no dask-cuda needed): the same graphs; a partial that another worker combines
                travels through the host (serialised, sent over TCP)

Weak scaling: the time of the whole pipeline on 1, 2, 4 GPUs, each with its own chunk; "x1" is
(GPUs x the 1-GPU time) / the time (the targets: 1.9 on 2 GPUs, 3.6 on 4). Best of --reps runs
after a warm one; each timed run is a new graph (never answered from a previous run's results).
The two numbers of cufunc and CuPy are compared (relative difference printed). `--libs
cufunc,cufunc-mb,CuPy` adds cufunc-mb: cufunc's calls in map_blocks steps, a dask graph of the
shape of CuPy's (cufunc_blocks_pipeline says why the two graphs differ).

    python bench/bench_multigpu.py [--gpus 1,2,4] [--log2 31] [--reps 3] [--modes threads,...]
    python bench/bench_multigpu.py --simple [--log2 30]    (hypot and sum tables, distributed)

--simple: weak scaling (2^LOG2 float32 per GPU) and strong scaling (2^STRONG_LOG2 in all) of
cufunc's hypot and sum beside CuPy's np.hypot and .sum on the same dask arrays, through the
distributed scheduler (one worker per GPU; examples/dask_multigpu.py's make_cluster).
"""
import argparse
import contextlib
import math
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

from cufunc import guvectorize, vectorize  # noqa: E402


@vectorize(["float32(float32, float32)"])
def hypot(a, b):
    return math.sqrt(a * a + b * b)


@vectorize(["float32(float32, float32)"], identity=0)
def add(a, b):
    return a + b


# ---- the pipeline: Black-Scholes, a gufunc, two reductions ----------------------------------------

RATE, VOL = 0.02, 0.30
SQRT_HALF = 0.7071067811865476
ROW = 1024


def cnd(d):
    return 0.5 + 0.5 * math.erf(d * SQRT_HALF)


@vectorize(["float32(float32, float32, float32)"])
def bs_d1(S, X, T):
    return (math.log(S / X) + (RATE + 0.5 * VOL * VOL) * T) / (VOL * math.sqrt(T))


@vectorize(["float32(float32, float32, float32, float32)"])
def bs_call(S, X, T, d1):
    d2 = d1 - VOL * math.sqrt(T)
    return S * cnd(d1) - X * math.exp(-RATE * T) * cnd(d2)


@vectorize(["float32(float32, float32, float32, float32)"])
def bs_put(S, X, T, c):
    return c - S + X * math.exp(-RATE * T)


@guvectorize(["void(float32[:], float32[:], float32[:])"], "(n),(n)->()")
def row_spread(c, p, out):
    s = 0.0
    for i in range(c.shape[0]):
        s += abs(c[i] - p[i])
    out[0] = s / c.shape[0]


@vectorize(["float32(float32, float32)", "float64(float64, float64)"], identity=0)
def add64(a, b):
    return a + b


def cufunc_pipeline(S, X, T):
    """(sum of call prices, sum of row spreads): lazy for dask arrays, device scalars otherwise."""
    d1 = bs_d1(S, X, T)
    c = bs_call(S, X, T, d1)
    p = bs_put(S, X, T, c)
    rows = row_spread(c.reshape(-1, ROW), p.reshape(-1, ROW))
    return add64.reduce(c, dtype=np.float64), add64.reduce(rows, dtype=np.float64)


_CP = {}


def cp_kernels():
    """CuPy's kernels of the same arithmetic (compiled once per process)."""
    if not _CP:
        import cupy as cp
        pre = ("#define RATE 0.02f\n#define VOL 0.30f\n"
               "__device__ float cnd(float d) { return 0.5f + 0.5f * erff(d * 0.70710678f); }\n")
        _CP["d1"] = cp.ElementwiseKernel(
            "float32 S, float32 X, float32 T", "float32 d1",
            "d1 = (logf(S / X) + (RATE + 0.5f * VOL * VOL) * T) / (VOL * sqrtf(T))",
            "bench_bs_d1", preamble=pre)
        _CP["call"] = cp.ElementwiseKernel(
            "float32 S, float32 X, float32 T, float32 d1", "float32 c",
            "float d2 = d1 - VOL * sqrtf(T); c = S * cnd(d1) - X * expf(-RATE * T) * cnd(d2)",
            "bench_bs_call", preamble=pre)
        _CP["put"] = cp.ElementwiseKernel(
            "float32 S, float32 X, float32 T, float32 c", "float32 p",
            "p = c - S + X * expf(-RATE * T)", "bench_bs_put", preamble=pre)
        _CP["spread"] = cp.ReductionKernel(
            "float32 c, float32 p", "float32 y", "fabsf(c - p)", "a + b", "y = a", "0",
            "bench_row_spread")
    return _CP


def _cp_d1(S, X, T):
    with S.device:                       # CuPy works on its current device: the chunk's
        return cp_kernels()["d1"](S, X, T)


def _cp_callp(S, X, T, d1):
    with S.device:
        return cp_kernels()["call"](S, X, T, d1)


def _cp_put(S, X, T, c):
    with S.device:
        return cp_kernels()["put"](S, X, T, c)


def _cp_spread(c, p):
    with c.device:
        rows = cp_kernels()["spread"](c.reshape(-1, ROW), p.reshape(-1, ROW), axis=1)
        rows *= 1.0 / ROW                # the mean (2^-10 of the elements: in place)
        return rows


def cupy_pipeline(S, X, T):
    """CuPy on one chunk, no scheduler: (sum of call prices, sum of row spreads), device scalars."""
    c = _cp_callp(S, X, T, _cp_d1(S, X, T))
    rows = _cp_spread(c, _cp_put(S, X, T, c))
    with S.device:
        return c.sum(dtype=np.float64), rows.sum(dtype=np.float64)


def _cp_sum_chunk(x, axis=None, keepdims=False, computing_meta=False, **kw):
    with x.device:
        return x.sum(axis=axis, keepdims=keepdims, dtype=np.float64)


def _cp_sum_agg(parts, axis=None, keepdims=False, computing_meta=False, **kw):
    # the partials gathered on one device as cufunc's are (cufunc._dask: device to device, ordered
    # by events): CuPy's own concatenation of arrays on several devices would read them from the
    # current device, unordered with the devices that are still making them
    import cupy as cp
    from cufunc._dask import _concatenated
    x, home = _concatenated(parts, axis)
    with cp.cuda.Device(home):
        return x.sum(axis=axis, keepdims=keepdims, dtype=np.float64)


def cupy_dask_pipeline(S, X, T):
    """The CuPy pipeline as a dask graph of the same shape as cufunc's: a map_blocks per step,
    each under its chunk's device (CuPy works on its current device), the sums dask's reduction
    of CuPy sums (partials gathered on one device, _cp_sum_agg)."""
    import cupy as cp
    import dask.array as da
    meta1 = cp.empty((0,), dtype=cp.float32)
    d1 = da.map_blocks(_cp_d1, S, X, T, dtype=np.float32, meta=meta1)
    c = da.map_blocks(_cp_callp, S, X, T, d1, dtype=np.float32, meta=meta1)
    p = da.map_blocks(_cp_put, S, X, T, c, dtype=np.float32, meta=meta1)
    rows = da.map_blocks(_cp_spread, c, p, dtype=np.float32, meta=meta1,
                         chunks=(tuple(n // ROW for n in S.chunks[0]),))

    def total(a):
        return da.reduction(a, _cp_sum_chunk, _cp_sum_agg, dtype=np.float64,
                            meta=cp.empty((), dtype=cp.float64), concatenate=False)
    return total(c), total(rows)


def _cf_spread(c, p):
    return row_spread(c.reshape(-1, ROW), p.reshape(-1, ROW))


def cufunc_blocks_pipeline(S, X, T):
    """cufunc's pipeline as a dask graph of CuPy's shape (cupy_dask_pipeline): a map_blocks per
    step, the rows' reshape inside the gufunc's step, cufunc's reductions. cufunc_pipeline's graph
    is longer: Dask fuses no step across a reshape or across a gufunc's core dimension, so the
    reshapes and the row step are tasks of their own, each a message to and from the scheduler."""
    import dask.array as da
    meta1 = S._meta
    d1 = da.map_blocks(bs_d1, S, X, T, dtype=np.float32, meta=meta1)
    c = da.map_blocks(bs_call, S, X, T, d1, dtype=np.float32, meta=meta1)
    p = da.map_blocks(bs_put, S, X, T, c, dtype=np.float32, meta=meta1)
    rows = da.map_blocks(_cf_spread, c, p, dtype=np.float32, meta=meta1,
                         chunks=(tuple(n // ROW for n in S.chunks[0]),))
    return add64.reduce(c, dtype=np.float64), add64.reduce(rows, dtype=np.float64)


def cufunc_sum(S, X, T):
    return (add64.reduce(S, dtype=np.float64),)


def cupy_sum(S, X, T):
    with S.device:
        return (S.sum(dtype=np.float64),)


def cupy_dask_sum(S, X, T):
    import cupy as cp
    import dask.array as da
    return (da.reduction(S, _cp_sum_chunk, _cp_sum_agg, dtype=np.float64,
                         meta=cp.empty((), dtype=cp.float64), concatenate=False),)


# what: (cufunc on a chunk or on dask arrays, CuPy on a chunk, CuPy as a dask graph, cufunc as
# a dask graph of CuPy's shape)
WORK = {"pipeline": (cufunc_pipeline, cupy_pipeline, cupy_dask_pipeline, cufunc_blocks_pipeline),
        "sum": (cufunc_sum, cupy_sum, cupy_dask_sum, cufunc_sum)}
# the libraries: cufunc, CuPy, and cufunc-mb (cufunc's calls in map_blocks steps: the same chunk
# calls as cufunc's, in a dask graph of the shape of CuPy's); WORK's entry for one chunk, for
# dask arrays
CHUNK_FN = {"cufunc": 0, "cufunc-mb": 0, "CuPy": 1}
DASK_FN = {"cufunc": 0, "cufunc-mb": 3, "CuPy": 2}


def rand_chunk(seed, n):
    """n float32 in [0, 1) from `seed`, made with CuPy on the current device."""
    import cupy as cp
    return cp.random.RandomState(seed).rand(n, dtype=cp.float32)


def chunk_max_diff(a, b):
    import cupy as cp
    return cp.asnumpy(cp.abs(a - b).max()).reshape(1).astype(np.float64)


def placed(client, addrs, make, args_of, n, name):
    """A 1-d dask array of CuPy float32 chunks of n, chunk k made by make(*args_of(k)) on worker
    addrs[k] and kept there (examples/dask_multigpu.py's on_workers): the calls on it run where
    the chunks are, no chunk moves."""
    import cupy as cp
    from dask_multigpu import on_workers
    return on_workers(client, addrs, make, lambda k, j: args_of(k), (n,), 1,
                      cp.empty((0,), dtype=cp.float32), name)


def placed_array(client, addrs, n_per_gpu, seed):
    """Uniform [0, 1) chunks of n_per_gpu, one per worker (placed)."""
    return placed(client, addrs, rand_chunk, lambda k: (seed * 1000 + k, n_per_gpu), n_per_gpu,
                  "bench-x%d" % seed)


def assert_placed(client, addrs, arrays):
    """Chunk k of every persisted 1-d array is held by worker addrs[k], and by it alone."""
    from distributed import futures_of
    for a in arrays:
        who = client.who_has(futures_of(a))
        where = [list(who.get(key, ())) for key in a.__dask_keys__()]
        assert where == [[w] for w in addrs], "chunks not one per worker in order: %s" % where


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
        x, y = client.persist([placed_array(client, addrs, n_per_gpu, 1),
                               placed_array(client, addrs, n_per_gpu, 2)])
        wait([x, y])
        assert_placed(client, addrs, [x, y])

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


# ---- the pipeline's runs ------------------------------------------------------------------------

RANGES = {"S": (5.0, 30.0), "X": (1.0, 100.0), "T": (0.25, 10.0)}


def bs_chunk(which, seed, n):
    """One GPU's chunk of an input (spot S, strike X, years T), made on the current device."""
    lo, hi = RANGES[which]
    u = rand_chunk(seed, n)
    u *= hi - lo
    u += lo
    return u


def seed_of(which, k):
    return 1000 * k + ord(which)


def to_float(x):
    if hasattr(x, "get"):
        return float(x.get())
    if hasattr(x, "copy_to_host"):
        return float(x.copy_to_host())
    return float(x)


def local_inputs(ngpu, n):
    """{"S": [chunk on GPU 0, on GPU 1, ...], "X": ..., "T": ...} made in this process."""
    import cupy as cp
    out = {w: [] for w in "SXT"}
    for k in range(ngpu):
        with cp.cuda.Device(k):
            for w in "SXT":
                out[w].append(bs_chunk(w, seed_of(w, k), n))
            cp.cuda.Device(k).synchronize()
    return out


def run_threads(what, lib, chunks, ngpu):
    """No scheduler: one thread per GPU, each the work on its chunk and its numbers back (its GPU
    only; summed over the GPUs here). (seconds, numbers)."""
    barrier = threading.Barrier(ngpu + 1, timeout=300)
    res, errors = [None] * ngpu, []
    run = WORK[what][CHUNK_FN[lib]]

    def work(k):
        try:
            S, X, T = (chunks[w][k] for w in "SXT")
            barrier.wait()
            res[k] = [to_float(v) for v in run(S, X, T)]
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            errors.append(repr(e))
        finally:
            barrier.wait()

    ts = [threading.Thread(target=work, args=(k,)) for k in range(ngpu)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    barrier.wait()
    dt = time.perf_counter() - t0
    for t in ts:
        t.join()
    if errors:
        raise RuntimeError("threads: %s" % errors)
    return dt, tuple(sum(r[i] for r in res) for i in range(len(res[0])))


def local_dask_inputs(chunks, ngpu, n):
    """Dask arrays over this process's chunks (chunk k on GPU k), the chunks themselves in the
    graph. Not da.from_array: it copies every array it is given (x.copy()), and CuPy makes the
    copy on the current device, so every chunk would move to GPU 0 (and every task run there)."""
    import dask.array as da
    out = {}
    for w in "SXT":
        name = "bs-%s-%d-%d" % (w, ngpu, n)
        out[w] = da.Array({(name, k): chunks[w][k] for k in range(ngpu)}, name,
                          chunks=((n,) * ngpu,), dtype=np.float32, meta=chunks[w][0][:0])
    return out


def run_dask(what, lib, arrs, **compute_kw):
    """The work as one dask graph (new keys each time), computed: (seconds, numbers)."""
    import dask
    t0 = time.perf_counter()
    S, X, T = (fresh(arrs[w]) for w in "SXT")
    lazy = WORK[what][DASK_FN[lib]](S, X, T)
    out = tuple(to_float(v) for v in dask.compute(*lazy, **compute_kw))
    return time.perf_counter() - t0, out


def timed(reps, fn):
    """(best seconds of reps after a warm run, the last numbers) of fn() -> (seconds, numbers);
    None, with the traceback printed, when it fails (the other runs go on)."""
    try:
        fn()
        best, nums = None, None
        for _ in range(reps):
            dt, nums = fn()
            best = dt if best is None else min(best, dt)
        return best, nums
    except Exception:  # noqa: BLE001 - printed; the table shows the run as missing
        import traceback
        traceback.print_exc()
        return None


def bs_chunk_on(device, which, seed, n):
    """bs_chunk made on `device` (workers of one process all see every GPU; a worker process
    per GPU sees its own as device 0)."""
    import cupy as cp
    with cp.cuda.Device(device):
        return bs_chunk(which, seed, n)


def placed_bs(client, addrs, n, which, inproc=False):
    """Input `which`, one chunk of n per worker (placed) on the worker's own GPU: device k for
    worker k (inproc: workers of one process), else the worker process's device 0."""
    return placed(client, addrs, bs_chunk_on,
                  lambda k: (k if inproc else 0, which, seed_of(which, k), n), n,
                  "bs-%s-%d" % (which, n))


def chunk_device(block):
    return np.array([block.data.device_id], dtype=np.int64)


def chunk_devices(a):
    """The CUDA device of each chunk of a 1-d dask array of CuPy chunks, as its worker sees it."""
    return [int(d) for d in a.map_blocks(chunk_device, chunks=((1,) * a.numblocks[0],),
                                         dtype=np.int64, meta=np.empty((0,), np.int64)).compute()]


def new_cluster(ngpu, inproc):
    """A cluster of one worker (one thread) per GPU: worker processes (examples/dask_multigpu.py's
    make_cluster, no dask-cuda), or, inproc, workers that are threads of this process."""
    if inproc:
        from distributed import LocalCluster
        return LocalCluster(n_workers=ngpu, threads_per_worker=1, processes=False,
                            dashboard_address=None, memory_limit=0)
    from dask_multigpu import make_cluster
    return make_cluster(ngpu, use_dask_cuda=False)[0]


@contextlib.contextmanager
def placed_cluster(ngpu, n, inproc=False):
    """(client, worker addresses, {"S", "X", "T": dask arrays}) on a new cluster of one worker per
    GPU (new_cluster), each input's chunk k of n made on worker k's GPU and kept on worker k
    (both checked). The inputs' futures are released before the cluster closes."""
    from distributed import Client, wait
    from dask_multigpu import worker_setup
    with new_cluster(ngpu, inproc) as cluster, Client(cluster) as client:
        client.wait_for_workers(ngpu)
        worker_setup()
        client.run(worker_setup)
        addrs = sorted(client.scheduler_info()["workers"])
        arrs = dict(zip("SXT", client.persist([placed_bs(client, addrs, n, w, inproc)
                                               for w in "SXT"])))
        wait(list(arrs.values()))
        assert_placed(client, addrs, list(arrs.values()))
        want = list(range(ngpu)) if inproc else [0] * ngpu
        for a in arrs.values():
            got = chunk_devices(a)
            assert got == want, "chunks on devices %s, not %s" % (got, want)
        try:
            yield client, addrs, arrs
        finally:
            arrs.clear()


def run_distributed(ngpu, n, reps, libs, inproc=False):
    """{(what, lib): (seconds, numbers)} on a cluster of one worker per GPU (new_cluster)."""
    out = {}
    with placed_cluster(ngpu, n, inproc) as (client, addrs, arrs):
        for what in WORK:
            for lib in libs:
                out[what, lib] = timed(reps, lambda: run_dask(what, lib, arrs))
    return out


PIPE_MODES = ("threads", "dask-threads", "distributed-inproc", "distributed")


T0 = time.perf_counter()


def in_own_process(fn, *args):
    """fn(*args) in a new (spawned) Python process: its result, or {} with the error printed."""
    import multiprocessing
    try:
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            return pool.apply(fn, args)
    except Exception:  # noqa: BLE001 - printed; the table shows the runs as missing
        import traceback
        traceback.print_exc()
        return {}


def run_local(local, counts, n, reps, libs=("cufunc", "CuPy")):
    """{(what, mode, lib, ngpu): (seconds, numbers) or None} of the runs in one process
    (threads, dask-threads); the chunks die with it."""
    results = {}
    chunks = local_inputs(max(counts), n)
    for g in counts:
        sub = {w: chunks[w][:g] for w in "SXT"}
        arrs = local_dask_inputs(sub, g, n)
        for what in WORK:
            for lib in libs:
                if "threads" in local:
                    results[what, "threads", lib, g] = timed(
                        reps, lambda: run_threads(what, lib, sub, g))
                if "dask-threads" in local:
                    results[what, "dask-threads", lib, g] = timed(
                        reps, lambda: run_dask(what, lib, arrs, scheduler="threads"))
        print("  local runs on %d GPU(s), %s, done (%.0f s)" % (g, ",".join(libs),
                                                                time.perf_counter() - T0),
              flush=True)
    return results


def pipeline_main(args, have):
    import cupy as cp
    counts = [g for g in (int(v) for v in args.gpus.split(",")) if 1 <= g <= have]
    top = max(counts)
    free = min(cp.cuda.Device(k).mem_info[0] for k in range(top))
    log2 = args.log2 or 31
    # three inputs, three intermediates and a spare, with a margin
    while log2 > 20 and 7 * 4 * (1 << log2) > 0.85 * free:
        log2 -= 1
    n = 1 << log2
    modes = [m for m in args.modes.split(",") if m]
    libs = tuple(v for v in args.libs.split(",") if v)
    print("pipeline: 2^%d float32 per GPU (%.1f GiB per input), GPU counts %s, modes %s, best "
          "of %d" % (log2, n * 4 / 2 ** 30, counts, modes, args.reps))
    results = {}   # (what, mode, lib, ngpu) -> (seconds, numbers) or None (failed)
    local = [m for m in modes if m in ("threads", "dask-threads")]
    # Each library in processes of its own: neither's memory pool holds the GPUs' memory while
    # the other runs, and neither library's state can touch the other's figures.
    for lib in libs if local else ():
        results.update(in_own_process(run_local, local, counts, n, args.reps, (lib,)))
    for mode in ("distributed-inproc", "distributed"):
        if mode not in modes:
            continue
        for g in counts:
            for lib in libs:     # a new cluster per library (inproc: in a process of its own)
                if mode == "distributed-inproc":
                    got = in_own_process(run_distributed, g, n, args.reps, (lib,), True)
                else:
                    try:
                        got = run_distributed(g, n, args.reps, (lib,))
                    except Exception:  # noqa: BLE001 - printed; the other runs go on
                        import traceback
                        traceback.print_exc()
                        got = {}
                for (what, lib_), r in got.items():
                    results[what, mode, lib_, g] = r
                print("  %s runs on %d GPU(s), %s, done (%.0f s)"
                      % (mode, g, lib, time.perf_counter() - T0), flush=True)
    titles = {"pipeline": "the pipeline (Black-Scholes in 3 ufuncs, a gufunc over rows of %d, "
                          "2 sums)" % ROW,
              "sum": "a sum alone (float32 in, float64 accumulator): cufunc's add.reduce, "
                     "CuPy's sum"}
    for what in WORK:
        print("\nWeak scaling, %s, 2^%d float32 per GPU: ms per run (x1 = GPUs x the 1-GPU time "
              "/ the time)" % (titles[what], log2))
        print("| mode | library | " + " | ".join("%d GPU%s" % (g, "s" if g > 1 else "")
                                                for g in counts) + " |")
        print("|---|---|" + "---|" * len(counts))
        for mode in modes:
            for lib in libs:
                first = results.get((what, mode, lib, counts[0]))
                base = first[0] / counts[0] if first else None
                cells = []
                for g in counts:
                    r = results.get((what, mode, lib, g))
                    cells.append("failed" if r is None else "%.1f" % (r[0] * 1e3) if base is None
                                 else "%.1f (x%.2f)" % (r[0] * 1e3, g * base / r[0]))
                print("| %s | %s | %s |" % (mode, lib, " | ".join(cells)))
        worst = 0.0
        for (w, mode, lib, g), r in results.items():
            theirs = results.get((w, mode, "CuPy", g))
            if w != what or lib == "CuPy" or r is None or theirs is None:
                continue
            for a, b in zip(r[1], theirs[1]):
                worst = max(worst, abs(a - b) / max(abs(b), 1e-30))
        print("  largest relative difference cufunc vs CuPy: %.3g" % worst)
        ref = results.get((what, modes[0], "cufunc", counts[-1]))
        if ref:
            print("  the numbers on %d GPUs (%s, cufunc): %s"
                  % (counts[-1], modes[0], ", ".join("%.7g" % v for v in ref[1])))


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
    ap.add_argument("--log2", type=int, default=0, help="weak scaling: 2**LOG2 float32 per GPU "
                    "(default: the pipeline 31, or less if the GPUs' memory asks; --simple 30)")
    ap.add_argument("--simple", action="store_true", help="the hypot and sum tables instead")
    ap.add_argument("--modes", default=",".join(PIPE_MODES), help="the pipeline's modes")
    ap.add_argument("--libs", default="cufunc,CuPy", help="the pipeline's libraries: cufunc, "
                    "CuPy, cufunc-mb (cufunc's calls in a dask graph of CuPy's shape)")
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
    if not args.simple:
        return pipeline_main(args, have)
    args.log2 = args.log2 or 30
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
