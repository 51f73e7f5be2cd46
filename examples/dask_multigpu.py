"""cufunc on every GPU of a host, through Dask (README, "Several GPUs").

One Dask worker process per GPU: dask_cuda's LocalCUDACluster when it is installed, else
dask.distributed workers (a SpecCluster of Nannies, what LocalCUDACluster builds) each started with
CUDA_VISIBLE_DEVICES set to its own GPU. A dask array of CuPy chunks is made on the workers (each
chunk born on its worker's GPU: no chunk goes through the host), and cufunc's ufunc, gufunc and
reductions run on it, chunk by chunk, on the GPU that holds the chunk. The results are checked
against NumPy (only here do chunks come to the host).

The tasks carry cufunc's ufuncs: a ufunc pickles as its Python function and signatures
(cufunc/_pickle.py) and each worker makes it again once (the kernels come from the disk cache
after the first worker compiled them).

    python examples/dask_multigpu.py                   # every GPU, 2**24 float32 per GPU
    python examples/dask_multigpu.py --gpus 2 --rows 65536
    python examples/dask_multigpu.py --no-dask-cuda     # dask.distributed workers even with dask_cuda

Prints one line per check and "dask_multigpu: ok" at the end; exit 1 on a wrong value.
"""
import argparse
import math
import os
import sys

import numpy as np

from cufunc import cuda, guvectorize, vectorize

WIDTH = 256                       # float32 per row: the gufunc reduces rows


@vectorize(["float32(float32, float32)", "float64(float64, float64)"])
def hypot(a, b):
    return math.sqrt(a * a + b * b)


@vectorize(["float32(float32, float32)", "float64(float64, float64)"], identity=0)
def add(a, b):
    return a + b


@guvectorize(["void(float32[:], float32[:])"], "(n)->()")
def row_norm(x, out):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * x[i]
    out[0] = math.sqrt(s)


@cuda.reduce
def sum_reduce(a, b):
    return a + b


# ---- what runs on the workers -----------------------------------------------------------------

def make_block(seed, rows, i):
    """Block i, (rows, WIDTH) float32, made as a CuPy array on the worker's GPU."""
    import cupy as cp
    r = cp.arange(i * rows, (i + 1) * rows, dtype=cp.float64)[:, None]
    c = cp.arange(WIDTH, dtype=cp.float64)[None, :]
    return (cp.sin(r * 1e-3 + c * 0.7 + seed) * (1 + seed)).astype(cp.float32)


def where_block(block):
    """(the worker's GPU as this process sees it through CUDA_VISIBLE_DEVICES, whether the block
    is a CuPy array and on which device it is) as a tiny host array."""
    vis = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    gpu = int(vis.split(",")[0]) if vis and vis.split(",")[0].isdigit() else -1
    is_cupy = type(block).__module__.partition(".")[0] == "cupy"
    return np.array([[gpu, int(is_cupy), block.device.id if is_cupy else -1]], dtype=np.int64)


def to_host(block):
    import cupy as cp
    return cp.asnumpy(block)


# ---- the cluster ------------------------------------------------------------------------------

def gpu_count():
    from cufunc import _core
    return _core.device_count()


def make_cluster(ngpu, use_dask_cuda=True):
    """(cluster, what it is): one worker process per GPU, one thread each."""
    if use_dask_cuda:
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError:
            pass
        else:
            return (LocalCUDACluster(CUDA_VISIBLE_DEVICES=list(range(ngpu)), threads_per_worker=1,
                                     dashboard_address=None),
                    "dask_cuda.LocalCUDACluster")
    from distributed import Nanny, Scheduler, SpecCluster
    workers = {
        "gpu-%d" % i: {"cls": Nanny, "options": {
            "nthreads": 1,
            # the GPU first, the others after it: device 0 of the worker is GPU i (as dask_cuda)
            "env": {"CUDA_VISIBLE_DEVICES": ",".join(str((i + k) % ngpu) for k in range(ngpu))},
            "memory_limit": 0,                 # the data is on the GPUs: no host spilling
        }}
        for i in range(ngpu)
    }
    scheduler = {"cls": Scheduler, "options": {"dashboard": False, "dashboard_address": None}}
    return SpecCluster(workers=workers, scheduler=scheduler), "dask.distributed SpecCluster"


def worker_setup():
    """Run in every worker process (client.run) and in the client before CuPy arrays travel
    between processes: distributed rebuilds them through numba.cuda, whose 0.30 release still
    calls np.row_stack, gone from NumPy >= 2.5."""
    import numpy
    if not hasattr(numpy, "row_stack"):
        numpy.row_stack = numpy.vstack


def on_workers(client, addrs, make, args_of, block_shape, blocks_per_worker, meta, name):
    """A dask array of blocks stacked along axis 0, blocks_per_worker of them made on each worker
    of addrs (block j of worker k is make(*args_of(k, j)), run there) and kept there: the tasks
    that use a block then run where it is, and the blocks of two such arrays that a task combines
    are on the same worker (and GPU).

    Futures submitted to each worker (client.submit(workers=...)), not dask.annotate around the
    graph that makes the blocks: Dask's graph optimisation merges those tasks into the
    concatenation's layer and drops their annotation, and the scheduler then places the blocks as
    it likes (x's block k on one worker and y's on another: every task on them copies a block
    through the host)."""
    import dask.array as da
    blocks = []
    for k, addr in enumerate(addrs):
        for j in range(blocks_per_worker):
            fut = client.submit(make, *args_of(k, j), workers=[addr], allow_other_workers=False,
                                pure=False, key="%s-%d-%d" % (name, k, j))
            blocks.append(da.from_delayed(fut, shape=block_shape, dtype=meta.dtype, meta=meta))
    return da.concatenate(blocks)


def gpu_array(client, addrs, rows_per_gpu, chunks_per_gpu, seed):
    """A (len(addrs) * rows_per_gpu, WIDTH) float32 dask array of CuPy chunks, those of worker k
    made by worker k (on_workers) and so on its GPU; the cufunc calls on them then run where their
    chunks are."""
    import cupy as cp
    rows = rows_per_gpu // chunks_per_gpu
    return on_workers(client, addrs, make_block,
                      lambda k, j: (seed, rows, k * chunks_per_gpu + j), (rows, WIDTH),
                      chunks_per_gpu, cp.empty((0, 0), dtype=cp.float32), "x%d" % seed)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, default=0, help="GPUs to use (default: all)")
    ap.add_argument("--rows", type=int, default=1 << 16, help="rows of 256 float32 per GPU")
    ap.add_argument("--chunks-per-gpu", type=int, default=2)
    ap.add_argument("--no-dask-cuda", action="store_true")
    args = ap.parse_args(argv)

    import cupy as cp
    import dask
    import dask.array as da
    from distributed import Client, wait

    ngpu = args.gpus or gpu_count()
    cluster, kind = make_cluster(ngpu, not args.no_dask_cuda)
    ok = True
    with cluster, Client(cluster) as client:
        client.wait_for_workers(ngpu)
        worker_setup()
        client.run(worker_setup)
        print("%s: %d workers, one per GPU" % (kind, len(client.scheduler_info()["workers"])))
        addrs = sorted(client.scheduler_info()["workers"])
        x = gpu_array(client, addrs, args.rows, args.chunks_per_gpu, 0)
        y = gpu_array(client, addrs, args.rows, args.chunks_per_gpu, 1)
        x, y = client.persist([x, y])
        wait([x, y])
        gpu_x, gpu_y = (da.map_blocks(where_block, a, dtype=np.int64, chunks=(1, 3),
                                      meta=np.empty((0, 0), np.int64))[:, 0].compute()
                        for a in (x, y))
        if list(gpu_x) != list(gpu_y) or len(set(gpu_x)) != ngpu:
            print("FAILED: x's and y's chunks are not side by side on every GPU: %s, %s"
                  % (list(gpu_x), list(gpu_y)))
            ok = False

        h = hypot(x, y)                         # a lazy dask array of cufunc calls (NEP 13)
        norms = row_norm(h)                     # gufunc: one value per row
        total = add.reduce(norms, axis=0, dtype=np.float64)
        col = add.reduce(h, axis=0)             # a (WIDTH,) float32 column sum
        total_r = sum_reduce(h.ravel())         # cuda.reduce on the whole array
        h_twin = np.hypot(x, y)                 # CuPy's own hypot, for comparison
        placed = da.map_blocks(where_block, h, dtype=np.int64, chunks=(1, 3),
                               meta=np.empty((0, 0), np.int64))
        h_host = h.map_blocks(to_host, dtype=np.float32, meta=np.empty((0, 0), np.float32))
        xh, yh = (a.map_blocks(to_host, dtype=np.float32, meta=np.empty((0, 0), np.float32))
                  for a in (x, y))
        got = dask.compute(placed, h_host, norms.map_blocks(to_host, dtype=np.float32,
                                                            meta=np.empty((0,), np.float32)),
                           total, col, total_r, xh, yh, h_twin.map_blocks(
                               to_host, dtype=np.float32, meta=np.empty((0, 0), np.float32)))
        placed, h_host, norms_host, total_v, col_v, total_r_v, xh, yh, twin_host = got

        gpus_used = sorted(set(int(g) for g in placed[:, 0]))
        all_cupy = bool(placed[:, 1].all()) and set(placed[:, 2]) == {0}
        print("blocks per GPU:", {g: int((placed[:, 0] == g).sum()) for g in gpus_used},
              "(every block a CuPy array on its worker's device 0: %s)" % all_cupy)
        if ngpu > 1 and len(gpus_used) != ngpu or not all_cupy:
            print("FAILED: the blocks did not run on every GPU, or left the GPU")
            ok = False

        want_h = np.hypot(xh, yh)
        checks = [
            ("hypot (ufunc)", h_host, want_h, 1e-6),
            ("row_norm (gufunc)", norms_host,
             np.sqrt((want_h.astype(np.float64) ** 2).sum(axis=1)), 1e-4),
            ("add.reduce of the norms (float64)", float(total_v),
             np.sqrt((want_h.astype(np.float64) ** 2).sum(axis=1)).sum(), 1e-5),
            ("add.reduce axis=0", cp.asnumpy(col_v) if hasattr(col_v, "get") else col_v,
             want_h.astype(np.float64).sum(axis=0), 1e-4),
            ("cuda.reduce", float(cp.asnumpy(total_r_v) if hasattr(total_r_v, "get")
                                  else total_r_v), want_h.astype(np.float64).sum(), 1e-4),
            ("CuPy's np.hypot on the same dask arrays", twin_host, want_h, 1e-6),
        ]
        for name, got_v, want, rtol in checks:
            good = np.allclose(got_v, want, rtol=rtol, atol=rtol * float(np.abs(want).max()))
            print("%-42s %s" % (name, "ok" if good else "WRONG"))
            ok &= good
    print("dask_multigpu: %s" % ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
