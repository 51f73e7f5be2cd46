"""CUDA graphs: a chain of 100 small dependent cufunc calls, eager and captured then replayed,
beside the same chain of PyTorch operations under torch.cuda.graph (docs/cuda-graphs.md).

Per size (1 element to 2**16), microseconds per call of:
  * cufunc on torch tensors, fresh results (y = hyp(y, x), 100 times): eager; replayed from a
    torch.cuda.graph capture (GPU timeline, CUDA events around 50 replays);
  * cufunc on DeviceArrays with out= (ping-pong buffers), captured on a cufunc Stream and
    replayed with Graph.launch: per call and per kernel node (node_count of the graph);
  * cufunc on DeviceArrays, fresh results, captured on a cufunc Stream (allocation and free
    nodes in the graph): per call and per node;
  * torch.hypot, the same chain, eager and under torch.cuda.graph.
The target: a replayed cufunc call <= 1.5 us per kernel node.

--eager-only prints the eager per-call figures only (one-element calls: queued back to back, and
the host's time alone, benchlib.cpu_alone), for the before/after comparison of two builds in one
run (bench/graphs_check.sh alternates them).

Usage: python3 bench/bench_graphs.py [--eager-only]
"""
import math
import statistics
import sys
import time

import numpy as np

from benchlib import cpu_alone, timeit
from cufunc import cuda, vectorize

CHAIN = 100
SIZES = [1, 1 << 8, 1 << 12, 1 << 16]
REPLAYS = 50


@vectorize(["float32(float32, float32)"])
def hyp(x, y):
    return math.sqrt(x * x + y * y) * 0.5


def median_us(fn, sync, reps=7, inner=1, per=1):
    """Median microseconds per call (benchlib.timeit), divided by `per` calls in each fn()."""
    return 1e6 * timeit(fn, sync, reps, inner) / per


def eager_only(torch):
    """One-element calls, queued back to back (the CPU sets the pace): the eager per-call cost."""
    a = cuda.to_device(np.ones(1, np.float32))
    b = cuda.to_device(np.ones(1, np.float32))
    c = cuda.device_array(1, np.float32)
    sync = cuda.synchronize
    rows = [("DeviceArray out=", lambda: hyp(a, b, out=c)),
            ("DeviceArray fresh", lambda: hyp(a, b)),
            ("DeviceArray stream=", lambda: hyp(a, b, out=c, stream=s))]
    s = cuda.stream()
    if torch is not None:
        ta = torch.ones(1, device="cuda")
        tb = torch.ones(1, device="cuda")
        tc = torch.empty(1, device="cuda")
        rows += [("torch out=", lambda: hyp(ta, tb, out=tc)), ("torch fresh", lambda: hyp(ta, tb))]
        tsync = torch.cuda.synchronize
    for name, fn in rows:
        sy = tsync if name.startswith("torch") else sync
        queued = median_us(fn, sy, reps=15, inner=2000)
        alone = cpu_alone(fn, sy, calls=256, reps=31)
        print("eager %-20s %7.3f us/call queued %7.3f us/call CPU alone" % (name, queued, alone))


def event_us(torch, replay, reps=REPLAYS):
    """GPU timeline microseconds per replay, by CUDA events around `reps` replays."""
    replay()
    torch.cuda.synchronize()
    e0 = torch.cuda.Event(enable_timing=True)
    e1 = torch.cuda.Event(enable_timing=True)
    best = []
    for _ in range(5):
        e0.record()
        for _ in range(reps):
            replay()
        e1.record()
        e1.synchronize()
        best.append(e0.elapsed_time(e1) * 1e3 / reps)
    return statistics.median(best)


def own_graph(n, fresh):
    x = cuda.to_device(np.full(n, 0.5, np.float32))
    y0 = cuda.to_device(np.ones(n, np.float32))
    buf = [cuda.device_array(n, np.float32), cuda.device_array(n, np.float32)]
    hyp(x, y0, out=buf[0])
    s = cuda.stream()
    s.begin_capture()
    if fresh:
        y = y0
        for _ in range(CHAIN):
            y = hyp(y, x)
    else:
        hyp(x, y0, out=buf[0])
        for i in range(CHAIN - 1):
            hyp(buf[i % 2], x, out=buf[(i + 1) % 2])
    g = s.end_capture()
    g.upload()
    return g, s


def main():
    if "--eager-only" in sys.argv:
        try:
            import torch
            torch = torch if torch.cuda.is_available() else None
        except ImportError:
            torch = None
        eager_only(torch)
        return
    import torch
    dev = torch.cuda.get_device_name()
    print("device: %s; chain of %d dependent calls; us per call (replays: GPU timeline)"
          % (dev, CHAIN))
    hdr = ("%8s | %9s %9s | %9s %9s %6s | %9s %6s | %9s %9s"
           % ("n", "cf eager", "cf torchG", "cf ownG", "/node", "nodes", "cf fresh", "nodes",
              "th eager", "th graph"))
    print(hdr)
    print("-" * len(hdr))
    for n in SIZES:
        x = torch.full((n,), 0.5, device="cuda")
        y0 = torch.ones(n, device="cuda")

        def chain_cf():
            y = y0
            for _ in range(CHAIN):
                y = hyp(y, x)
            return y

        def chain_th():
            y = y0
            for _ in range(CHAIN):
                y = torch.hypot(y, x) * 0.5
            return y

        def chain_th1():
            y = y0
            for _ in range(CHAIN):
                y = torch.hypot(y, x)
            return y

        cf_eager = median_us(chain_cf, torch.cuda.synchronize, per=CHAIN)
        th_eager = median_us(chain_th1, torch.cuda.synchronize, per=CHAIN)
        chain_cf()
        chain_th1()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out_cf = chain_cf()
        gt = torch.cuda.CUDAGraph()
        with torch.cuda.graph(gt):
            out_th = chain_th1()
        g.replay()
        torch.cuda.synchronize()
        want = chain_cf()
        torch.cuda.synchronize()
        assert torch.allclose(out_cf, want), "replayed chain differs from the eager one"
        cf_graph = event_us(torch, g.replay) / CHAIN
        th_graph = event_us(torch, gt.replay) / CHAIN
        del out_th
        go, so = own_graph(n, fresh=False)
        own = event_us(torch, lambda: go.launch(so)) / CHAIN
        nodes = go.node_count
        gf, sf = own_graph(n, fresh=True)
        fresh = event_us(torch, lambda: gf.launch(sf)) / CHAIN
        fnodes = gf.node_count
        print("%8d | %9.2f %9.2f | %9.2f %9.2f %6d | %9.2f %6d | %9.2f %9.2f"
              % (n, cf_eager, cf_graph, own, own * CHAIN / nodes, nodes, fresh, fnodes,
                 th_eager, th_graph))
    print("cf eager: cufunc on torch tensors, fresh results; cf torchG: the same chain replayed "
          "from torch.cuda.graph;\ncf ownG: DeviceArrays with out=, captured on a cufunc Stream "
          "(per call, per node); cf fresh: fresh results\non a cufunc Stream (allocation and free "
          "nodes included); th: torch.hypot, eager and under torch.cuda.graph.")


if __name__ == "__main__":
    main()
