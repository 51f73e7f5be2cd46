"""hypot over a dask array of CuPy chunks: a cufunc ufunc on the dask array
(a lazy graph, one cufunc call per chunk, threaded scheduler, one GPU), beside one cufunc call on
the whole CuPy array and beside da.hypot (CuPy's hypot per chunk) on the same dask array.

    python3 bench/bench_dask.py [--log2n 28] [--chunks 16] [--reps 21]
    python3 bench/bench_dask.py --host [--log2n 20]     (no GPU: NumPy chunks, the CPU side)

Each dask row builds the graph and runs it with .persist() (the result stays in its CuPy chunks,
as a pipeline would keep it); the '.compute()' rows add dask's concatenation of the chunks into
one array (a device-to-device copy of the whole result). Throughput counts the bytes read and
written once (12 bytes per element). Target: the cufunc-on-dask row at >= 85% of the one-call
row. The 'dask alone' row is dask's own cost for the same graph shape with no work per chunk
(map_blocks of a function that returns its first argument): no row that goes through dask's
scheduler can be faster, so the rows are also stated above it.

The graph table (both modes) times the graph building alone (no scheduler), counts the tasks
after dask's optimisation and names the callable each chunk's task runs. --host runs the graphs
on NumPy chunks of 2^log2n float32: cufunc's graph (cufunc/_dask.py's, with NumPy's hypot as the
function, since cufunc's host path needs a GPU) beside da.hypot's and the no-op floor, and also
on 16-element chunks, where the chunk work is nothing and what is left is dask's scheduler. On a
shared CPU --host states the fastest batch, not the median."""
import argparse
import sys
import time

import numpy as np

from benchlib import cpu_alone, timeit


def _first(x, y):
    return x


def graph_facts(r):
    """(number of tasks after dask's optimisation, the callable the first chunk's task runs)."""
    import dask
    (o,) = dask.optimize(r)
    g = dict(o.__dask_graph__())
    ntasks = sum(1 for v in g.values()
                 if type(v).__name__ == "Task" or (isinstance(v, tuple) and v and callable(v[0])))
    node = g[next(iter(dask.core.flatten(o.__dask_keys__())))]
    for _ in range(20):
        kind = type(node).__name__
        if kind == "Alias":
            node = g[getattr(node.target, "key", node.target)]
        elif kind == "Task" and getattr(node.func, "__name__", "") == "_execute_subgraph":
            g, node = node.args[0], node.args[0][node.args[1]]
        elif kind == "Task":
            f = node.func
            break
        elif isinstance(node, tuple) and node and callable(node[0]):
            f = node[0]
            break
        else:
            node = g[node]
    else:
        f = None
    name = getattr(f, "__name__", None) or type(f).__name__
    return ntasks, name


def best(fn, reps, inner=1):
    """Fastest seconds per call over `reps` batches of `inner` calls: on a shared CPU (--host) the
    median carries the neighbours' load, the minimum is the cost of the code."""
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        ts.append((time.perf_counter() - t0) / inner)
    return min(ts)


def graph_table(builders, host=False):
    """The graph-building rows: microseconds per build, tasks after optimisation, callable."""
    print("%-44s %10s %8s  %s" % ("graph", "build us", "tasks", "each chunk's task runs"))
    out = {}
    for name, build in builders:
        us = (best(build, 15, 32) * 1e6 if host
              else cpu_alone(build, lambda: None, calls=64, reps=9))
        ntasks, fname = graph_facts(build())
        out[name] = us
        print("%-44s %10.1f %8d  %s" % (name, us, ntasks, fname))
    return out


def host_main(a):
    """No GPU: the CPU side of the graphs, on NumPy chunks."""
    import dask
    import dask.array as da
    from cufunc import vectorize
    from cufunc import _dask

    @vectorize(["float32(float32, float32)"], target="cuda")
    def hyp(x, y):
        return (x * x + y * y) ** 0.5

    n = 1 << a.log2n
    rng = np.random.default_rng(0)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    dx = da.from_array(x, chunks=n // a.chunks, asarray=False)
    dy = da.from_array(y, chunks=n // a.chunks, asarray=False)
    print("dask %s, NumPy chunks: 2^%d float32 in %d chunks (no GPU: cufunc's graph runs NumPy's "
          "hypot per chunk)" % (dask.__version__, a.log2n, a.chunks))
    graph_table([
        ("cufunc hyp(dx, dy)", lambda: hyp(dx, dy)),
        ("cufunc hyp(dx, 2.0)", lambda: hyp(dx, 2.0)),
        ("cufunc's graph with np.hypot", lambda: _dask._call(np.hypot, (dx, dy), {})),
        ("da.hypot(dx, dy)", lambda: da.hypot(dx, dy)),
        ("dask alone: map_blocks(no-op)", lambda: da.map_blocks(_first, dx, dy, dtype=dx.dtype)),
    ], host=True)
    m = 16 * a.chunks
    sx = da.from_array(x[:m], chunks=16, asarray=False)
    sy = da.from_array(y[:m], chunks=16, asarray=False)
    for label, (p, q) in [("2^%d float32" % a.log2n, (dx, dy)), ("16-element chunks", (sx, sy))]:
        rows = [("cufunc's graph with np.hypot", lambda: _dask._call(np.hypot, (p, q), {})),
                ("da.hypot", lambda: da.hypot(p, q)),
                ("dask alone: map_blocks(no-op)",
                 lambda: da.map_blocks(_first, p, q, dtype=p.dtype))]
        print("%-44s %10s %10s" % (".persist(), threads, " + label, "ms", "above floor"))
        with dask.config.set(scheduler="threads"):
            ts = [(name, best(lambda: build().persist(), a.reps)) for name, build in rows]
        floor = ts[-1][1]
        for name, t in ts:
            print("%-44s %10.3f %10.3f" % (name, t * 1e3, (t - floor) * 1e3))
    floor_steps(sx, sy, a.reps)


def floor_steps(sx, sy, reps):
    """Where dask's floor goes: the no-op graph on 16-element chunks, step by step."""
    import dask
    import dask.array as da
    import dask.threaded
    from dask.order import order

    def build():
        return da.map_blocks(_first, sx, sy, dtype=sx.dtype)
    g = dict(dask.optimize(build())[0].__dask_graph__())
    keys = list(g)
    steps = [("building the graph", build),
             ("building + dask.optimize (materialised)",
              lambda: dict(dask.optimize(build())[0].__dask_graph__())),
             ("dask.order of the optimised graph", lambda: order(g)),
             ("running it: sync scheduler", lambda: dask.get(g, keys)),
             ("running it: threaded scheduler", lambda: dask.threaded.get(g, keys)),
             (".persist() whole: sync", lambda: build().persist(scheduler="sync")),
             (".persist() whole: threads", lambda: build().persist(scheduler="threads"))]
    print("%-44s %10s" % ("dask's floor, step by step (16-element chunks)", "ms"))
    for name, f in steps:
        print("%-44s %10.3f" % (name, best(f, reps) * 1e3))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2n", type=int, default=None)
    ap.add_argument("--chunks", type=int, default=16)
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--host", action="store_true", help="no GPU: NumPy chunks, the CPU side")
    a = ap.parse_args()
    if a.host:
        a.log2n = 20 if a.log2n is None else a.log2n
        return host_main(a)
    a.log2n = 28 if a.log2n is None else a.log2n
    try:
        import cupy as cp
        import dask
        import dask.array as da
    except ImportError as e:
        sys.exit("bench_dask needs cupy and dask[array]: %s" % e)
    from cufunc import vectorize

    @vectorize(["float32(float32, float32)"], target="cuda")
    def hyp(x, y):
        return (x * x + y * y) ** 0.5

    n = 1 << a.log2n
    rng = cp.random.default_rng(0)
    cx = rng.random(n, dtype=cp.float32)
    cy = rng.random(n, dtype=cp.float32)
    chunk = n // a.chunks
    dx = da.from_array(cx, chunks=chunk, asarray=False)
    dy = da.from_array(cy, chunks=chunk, asarray=False)
    sync = cp.cuda.Device().synchronize

    # correctness first: every chunk a device array, values as CuPy's
    res = hyp(dx, dy).persist(scheduler="threads")
    blocks = dask.compute(*res.to_delayed().ravel(), scheduler="threads")
    assert all(hasattr(b, "__cuda_array_interface__") for b in blocks), {type(b) for b in blocks}
    k = min(1 << 20, chunk)
    ref = cp.hypot(cx[:k], cy[:k])
    got = cp.asarray(blocks[0])[:k]
    assert float(cp.max(cp.abs(got - ref))) <= 1e-6 * float(cp.max(ref)) + 1e-7
    del res, blocks

    print("hypot, 2^%d float32 (%d chunks of 2^%d), threaded scheduler, %s, dask %s"
          % (a.log2n, a.chunks, a.log2n - int(np.log2(a.chunks)),
             cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), dask.__version__))
    builds = graph_table([
        ("cufunc hyp(dx, dy)", lambda: hyp(dx, dy)),
        ("da.hypot(dx, dy)", lambda: da.hypot(dx, dy)),
        ("dask alone: map_blocks(no-op)", lambda: da.map_blocks(_first, dx, dy, dtype=dx.dtype)),
    ])
    built = {"cufunc": hyp(dx, dy), "hypot": da.hypot(dx, dy),
             "noop": da.map_blocks(_first, dx, dy, dtype=dx.dtype)}
    rows = []
    with dask.config.set(scheduler="threads"):
        rows.append(("cufunc hyp, one call on the CuPy array",
                     timeit(lambda: hyp(cx, cy), sync, a.reps)))
        rows.append(("cupy.hypot, one call on the CuPy array",
                     timeit(lambda: cp.hypot(cx, cy), sync, a.reps)))
        rows.append(("cufunc hyp on the dask array, .persist()",
                     timeit(lambda: hyp(dx, dy).persist(), sync, a.reps)))
        rows.append(("da.hypot on the dask array, .persist()",
                     timeit(lambda: da.hypot(dx, dy).persist(), sync, a.reps)))
        # dask's own cost for this graph shape with no GPU work: what bounds the rows above
        rows.append(("dask alone: map_blocks(no-op) on both, .persist()",
                     timeit(lambda: da.map_blocks(_first, dx, dy, dtype=dx.dtype).persist(),
                            sync, a.reps)))
        # the same graphs built once: .persist() alone (dask's optimisation, order, scheduler)
        rows.append(("cufunc hyp, graph built once, .persist()",
                     timeit(lambda: built["cufunc"].persist(), sync, a.reps)))
        rows.append(("da.hypot, graph built once, .persist()",
                     timeit(lambda: built["hypot"].persist(), sync, a.reps)))
        rows.append(("dask alone, graph built once, .persist()",
                     timeit(lambda: built["noop"].persist(), sync, a.reps)))
        rows.append(("cufunc hyp on the dask array, .compute()",
                     timeit(lambda: hyp(dx, dy).compute(), sync, a.reps)))
        rows.append(("da.hypot on the dask array, .compute()",
                     timeit(lambda: da.hypot(dx, dy).compute(), sync, a.reps)))
    nbytes = 12 * n
    base = rows[0][1]
    print("%-52s %10s %10s %14s" % ("", "ms", "GB/s", "vs one call"))
    for name, t in rows:
        print("%-52s %10.2f %10.1f %13.0f%%" % (name, t * 1e3, nbytes / t / 1e9, 100 * base / t))
    t = dict(rows)
    cuf, hyd, floor = (t["cufunc hyp on the dask array, .persist()"],
                       t["da.hypot on the dask array, .persist()"],
                       t["dask alone: map_blocks(no-op) on both, .persist()"])
    ratio = base / cuf
    print("cufunc on dask / one cufunc call: %.0f%% (target >= 85%%): %s"
          % (100 * ratio, "met" if ratio >= 0.85 else "NOT met"))
    print("dask's floor for this graph (no-op chunks): %.2f ms; the one call: %.2f ms; "
          "best possible through dask: %.0f%% of the one call"
          % (floor * 1e3, base * 1e3, 100 * base / floor))
    print("above dask's own floor: cufunc %.2f ms, da.hypot %.2f ms (the one call: %.2f ms)"
          % ((cuf - floor) * 1e3, (hyd - floor) * 1e3, base * 1e3))
    print("graph building: cufunc %.0f us, da.hypot %.0f us, no-op %.0f us"
          % (builds["cufunc hyp(dx, dy)"], builds["da.hypot(dx, dy)"],
             builds["dask alone: map_blocks(no-op)"]))


if __name__ == "__main__":
    main()
