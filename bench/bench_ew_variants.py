"""Sweep of the element-wise kernels' tuning knobs (src/ufunc.c), one run on the GPU machine.

For each setting of the environment variables the engine reads once per process

    CUFUNC_EW_BLOCK          threads per block (flat, row-vector and strided kernels)
    CUFUNC_EW_UNROLL         vectors per thread per iteration (flat and row-vector kernels)
    CUFUNC_EW_BLOCKS_PER_SM  grid cap per multiprocessor, 0 for none (one pass over the data)
    CUFUNC_EW_TILE_ROWS      tile kernel: threads along a 32x32 tile's rows
    CUFUNC_EW_TILE_BLOCKS_PER_SM  tile kernel's grid cap per multiprocessor, 0 for none
    CUFUNC_EW_TILE_PRELOAD   tile kernel: in-place inputs loaded before the barrier (1) or after (0)
    CUFUNC_EW_TILE_PIPELINE  tile kernel: resident blocks loop over tiles, next tile's loads early

a child process times the cases those knobs affect (the first three knobs: the first two cases;
the tile knobs: the third; the built-in defaults: all three) and checks results against NumPy:

    * hypot on two 2^26-element float32 device arrays, out= given (12 bytes per element);
    * hypot((4096, 1), (1, 4096)) into a (4096, 4096) output (output + inputs bytes);
    * hypot(A, B.T) on 4096^2 float32, B.T transposed, contiguous output (12 bytes per element).

The parent measures, in the same run, the device-to-device copy bandwidth (read + write) and
PyTorch's torch.hypot on the same cases (when PyTorch sees a GPU), prints every variant as GB/s
beside them (with the kernel shape each case got), the best setting per case, and the best
overall: the element-wise knobs with the highest geometric mean over the first two cases'
fractions of the copy bandwidth, with the tile knobs best for the third. The whole sweep stays under about 3 minutes; --budget
stops it earlier (the variants run so far are still reported).

Usage: python3 bench/bench_ew_variants.py [--quick] [--only tile] [--budget SECONDS] [--reps N]
"""
import argparse
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile
import time

from benchlib import timeit

KNOBS = ("CUFUNC_EW_BLOCK", "CUFUNC_EW_UNROLL", "CUFUNC_EW_BLOCKS_PER_SM",
         "CUFUNC_EW_ROW_BLOCKS_PER_SM", "CUFUNC_EW_TILE_ROWS", "CUFUNC_EW_TILE_BLOCKS_PER_SM",
         "CUFUNC_EW_TILE_PRELOAD", "CUFUNC_EW_TILE_PIPELINE")
N = 1 << 26
M = 4096
CASES = (
    ("contiguous", 12 * N),
    ("broadcast", 4 * M * M + 8 * M),
    ("transposed", 12 * M * M),
)


def kernel_shape(src):
    """Which of src/ufunc.c's kernel shapes a generated source is."""
    for header, shape in (("ew_flat", "flat"), ("ew_tile", "tile"), ("ew_rowvec", "row-vector")):
        if '#include "cufunc/%s.cuh"' % header in src:
            return shape
    return "strided"


def child(reps, cases):
    """Time `cases` with the knobs this process was started with; print one JSON line."""
    import numpy as np
    from cufunc import cuda, vectorize

    @vectorize(["float32(float32, float32)"])
    def hypot(x, y):
        return math.sqrt(x * x + y * y)

    rng = np.random.default_rng(0)
    out = {"gbs": {}, "ok": {}, "kernel": {}}

    if "contiguous" in cases:
        contiguous(np, cuda, hypot, rng, reps, out)
    if "broadcast" in cases or "transposed" in cases:
        square(np, cuda, hypot, rng, reps, out, cases)
    print("RESULT " + json.dumps(out), flush=True)


def contiguous(np, cuda, hypot, rng, reps, out):
    ha = rng.random(N, dtype=np.float32)
    hb = rng.random(N, dtype=np.float32)
    da, db = cuda.to_device(ha), cuda.to_device(hb)
    dout = cuda.device_array(N, np.float32)
    hypot(da, db, out=dout)
    out["ok"]["contiguous"] = bool(np.allclose(dout.copy_to_host(), np.hypot(ha, hb), rtol=1e-6))
    out["kernel"]["contiguous"] = kernel_shape(hypot.kernel_source(da, db))
    t = timeit(lambda: hypot(da, db, out=dout), cuda.synchronize, reps, 5)
    out["gbs"]["contiguous"] = CASES[0][1] / t / 1e9


def square(np, cuda, hypot, rng, reps, out, cases):
    ob = cuda.device_array((M, M), np.float32)
    if "broadcast" in cases:
        broadcast(np, cuda, hypot, rng, reps, out, ob)
    if "transposed" in cases:
        transposed(np, cuda, hypot, rng, reps, out, ob)


def broadcast(np, cuda, hypot, rng, reps, out, ob):
    hc = rng.random((M, 1), dtype=np.float32)
    hr = rng.random((1, M), dtype=np.float32)
    col, row = cuda.to_device(hc), cuda.to_device(hr)
    hypot(col, row, out=ob)
    out["ok"]["broadcast"] = bool(np.allclose(ob.copy_to_host(), np.hypot(hc, hr), rtol=1e-6))
    out["kernel"]["broadcast"] = kernel_shape(hypot.kernel_source(col, row))
    t = timeit(lambda: hypot(col, row, out=ob), cuda.synchronize, reps, 5)
    out["gbs"]["broadcast"] = CASES[1][1] / t / 1e9


def transposed(np, cuda, hypot, rng, reps, out, ob):
    hs = rng.random((M, M), dtype=np.float32)
    ht = rng.random((M, M), dtype=np.float32)
    sq, sqt = cuda.to_device(hs), cuda.to_device(ht).T
    hypot(sq, sqt, out=ob)
    out["ok"]["transposed"] = bool(np.allclose(ob.copy_to_host(), np.hypot(hs, ht.T), rtol=1e-6))
    out["kernel"]["transposed"] = kernel_shape(hypot.kernel_source(sq, sqt))
    t = timeit(lambda: hypot(sq, sqt, out=ob), cuda.synchronize, reps, 5)
    out["gbs"]["transposed"] = CASES[2][1] / t / 1e9


def parent_figures(reps):
    """Copy bandwidth and PyTorch's figures, measured in this process."""
    import numpy as np
    from cufunc import cuda
    fig = {}
    big = cuda.device_array(1 << 28, np.float32)
    big2 = cuda.device_array(1 << 28, np.float32)
    t = timeit(lambda: big2.copy_to_device(big), cuda.synchronize, reps, 1)
    fig["copy"] = 2 * big.nbytes / t / 1e9
    del big, big2
    cuda.synchronize()
    try:
        import torch
        if not torch.cuda.is_available():
            raise ImportError("no GPU for PyTorch")
    except Exception as e:  # noqa: BLE001
        print("(PyTorch not measured: %s)" % e)
        return fig
    sync = torch.cuda.synchronize
    ta, tb = torch.rand(N, device="cuda"), torch.rand(N, device="cuda")
    to = torch.empty_like(ta)
    fig["torch contiguous"] = CASES[0][1] / timeit(lambda: torch.hypot(ta, tb, out=to), sync, reps, 5) / 1e9
    del ta, tb, to
    tc, tr = torch.rand((M, 1), device="cuda"), torch.rand((1, M), device="cuda")
    tob = torch.empty((M, M), device="cuda")
    fig["torch broadcast"] = CASES[1][1] / timeit(lambda: torch.hypot(tc, tr, out=tob), sync, reps, 5) / 1e9
    ts_, tst = torch.rand((M, M), device="cuda"), torch.rand((M, M), device="cuda").T
    fig["torch transposed"] = CASES[2][1] / timeit(lambda: torch.hypot(ts_, tst, out=tob), sync, reps, 5) / 1e9
    del tc, tr, tob, ts_, tst
    torch.cuda.empty_cache()
    return fig


def variants(quick, only=None):
    """(settings, cases) to run: the built-in defaults first, on every case; only="tile": the
    defaults and the tile knobs alone."""
    every = [c for c, _ in CASES]
    out = [(None, every)]
    if only == "tile":
        for r, p in itertools.product((2, 4, 8), (0, 4, 8, 12, 16)):
            out.append(({"CUFUNC_EW_TILE_ROWS": r, "CUFUNC_EW_TILE_PIPELINE": 1,
                         "CUFUNC_EW_TILE_BLOCKS_PER_SM": p}, ["transposed"]))
        for r, pre in ((4, 1), (4, 0)):
            out.append(({"CUFUNC_EW_TILE_ROWS": r, "CUFUNC_EW_TILE_PIPELINE": 0,
                         "CUFUNC_EW_TILE_PRELOAD": pre}, ["transposed"]))
        return out
    blocks = (128, 256, 512) if not quick else (256,)
    unrolls = (1, 2, 4)
    per_sm = (0, 2, 4, 8) if not quick else (0, 4)
    for b, u, p in itertools.product(blocks, unrolls, per_sm):
        # one cap for both the flat (contiguous) and the row-vector (broadcast) kernels
        out.append(({"CUFUNC_EW_BLOCK": b, "CUFUNC_EW_UNROLL": u, "CUFUNC_EW_BLOCKS_PER_SM": p,
                     "CUFUNC_EW_ROW_BLOCKS_PER_SM": p}, ["contiguous", "broadcast"]))
    rows = (4, 8, 16, 32) if not quick else (8, 16)
    tile_per_sm = (0, 4, 8) if not quick else (0, 4)
    for r, p in itertools.product(rows, tile_per_sm):
        out.append(({"CUFUNC_EW_TILE_ROWS": r, "CUFUNC_EW_TILE_BLOCKS_PER_SM": p}, ["transposed"]))
    return out


def label(v):
    if v is None:
        return "defaults"
    short = {"CUFUNC_EW_BLOCK": "block", "CUFUNC_EW_UNROLL": "unroll",
             "CUFUNC_EW_BLOCKS_PER_SM": "per_sm", "CUFUNC_EW_ROW_BLOCKS_PER_SM": "row_per_sm",
             "CUFUNC_EW_TILE_ROWS": "tile_rows",
             "CUFUNC_EW_TILE_BLOCKS_PER_SM": "tile_per_sm",
             "CUFUNC_EW_TILE_PRELOAD": "preload",
             "CUFUNC_EW_TILE_PIPELINE": "pipeline"}
    return " ".join("%s=%s" % (short[k], v[k]) for k in KNOBS if k in v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cases", default=",".join(c for c, _ in CASES), help=argparse.SUPPRESS)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--quick", action="store_true", help="fewer variants")
    ap.add_argument("--only", choices=("tile",), help="sweep only the tile kernel's knobs")
    ap.add_argument("--budget", type=float, default=170.0, help="seconds for the whole sweep")
    args = ap.parse_args()
    if args.child:
        child(args.reps, args.cases.split(","))
        return
    start = time.perf_counter()
    fig = parent_figures(args.reps)
    results = []
    with tempfile.TemporaryDirectory() as cache:
        for v, cases in variants(args.quick, args.only):
            if time.perf_counter() - start > args.budget:
                print("(budget of %.0f s spent: the remaining variants were not run)" % args.budget)
                break
            env = {k: val for k, val in os.environ.items() if k not in KNOBS}
            env["CUFUNC_CACHE_DIR"] = cache
            for k, val in (v or {}).items():
                env[k] = str(val)
            try:
                p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                                    "--reps", str(args.reps), "--cases", ",".join(cases)],
                                   env=env, capture_output=True, text=True, timeout=60)
                line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
                if p.returncode or not line:
                    raise RuntimeError((p.stderr or p.stdout).strip().splitlines()[-1:] or "no result")
                r = json.loads(line[-1][7:])
            except Exception as e:  # noqa: BLE001
                print("variant %s failed: %s" % (label(v), e))
                continue
            results.append((v, r))
            print("%-40s %s" % (label(v), "  ".join("%s %.0f" % (c, g) for c, g in r["gbs"].items())),
                  flush=True)

    copy = fig["copy"]
    print("\nelement-wise kernel variants (GB/s; copy bandwidth %.0f GB/s, read + write)" % copy)
    print("| variant | contiguous hypot 2^26 | broadcast 4096^2 | transposed 4096^2 | results |")
    print("|---|---|---|---|---|")
    if any(k.startswith("torch") for k in fig):
        print("| PyTorch | %s | %s | %s | - |" % tuple(
            "%.0f" % fig["torch " + c] if "torch " + c in fig else "-" for c, _ in CASES))
    print("| copy | %.0f | %.0f | %.0f | - |" % (copy, copy, copy))
    def cell(r, c):
        if c not in r["gbs"]:
            return "-"
        return "%.0f (%.0f%%, %s)" % (r["gbs"][c], 100 * r["gbs"][c] / copy, r["kernel"][c])
    for v, r in results:
        ok = "ok" if all(r["ok"].values()) else "WRONG: " + ", ".join(c for c, good in r["ok"].items() if not good)
        print("| %s | %s | %s |" % (label(v), " | ".join(cell(r, c) for c, _ in CASES), ok))
    good = [(v, r) for v, r in results if all(r["ok"].values())]
    if not good:
        print("no variant produced correct results")
        return
    for c, _ in CASES:
        have = [(v, r) for v, r in good if c in r["gbs"]]
        if not have:
            continue
        v, r = max(have, key=lambda vr: vr[1]["gbs"][c])
        peer = fig.get("torch " + c)
        print("best for %-10s: %-40s %.0f GB/s (%.0f%% of copy%s)" % (
            c, label(v), r["gbs"][c], 100 * r["gbs"][c] / copy,
            ", PyTorch %.0f" % peer if peer else ""))

    def score(r, cases):
        return math.exp(sum(math.log(r["gbs"][c] / copy) for c in cases) / len(cases))
    env = {}
    for cases in (["contiguous", "broadcast"], ["transposed"]):
        have = [(v, r) for v, r in good if all(c in r["gbs"] for c in cases)]
        if not have:
            continue
        v, r = max(have, key=lambda vr: score(vr[1], cases))
        print("best for %s (geometric mean %.1f%% of copy): %s" % (
            " + ".join(cases), 100 * score(r, cases), label(v)))
        if v:
            keys = KNOBS[:3] if "transposed" not in cases else KNOBS[3:]
            env.update({k: v[k] for k in keys if k in v})
    print("best overall, as environment: " + (" ".join("%s=%s" % (k, env[k]) for k in KNOBS if k in env)
                                              or "(the defaults)"))
    print("(elapsed %.0f s)" % (time.perf_counter() - start))


if __name__ == "__main__":
    main()
