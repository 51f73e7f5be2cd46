"""Tuning run for the scan (ufunc.accumulate) and full-reduction kernels: one run on the GPU
machine, under 3 minutes, the peers and the copy bandwidth measured in the same run.

The engine reads its knobs from the environment once per process (src/reduce.c):

  CUFUNC_SCAN_BLOCK            threads per scan tile                       (default 256)
  CUFUNC_SCAN_ITEMS            elements per thread of a scan tile          (default 32 for 4-byte
                               accumulators, 16 for 8-byte, 8 for 16-byte)
  CUFUNC_SCAN_SLEEP            ns between polls of a look-back state       (default 0)
  CUFUNC_SCAN_MIN_BLOCKS       __launch_bounds__ min blocks per SM of scans (default 4 for 4-byte)
  CUFUNC_SCAN_LOOKBACK         32-tile groups per look-back step (default 1)
  CUFUNC_SCAN_SMEM_ITEMS       elements per thread held in shared memory beside the registers
  CUFUNC_SCAN_ORDER            atomic (drawn from a counter, default) or block (tile = blockIdx.x)
  CUFUNC_REDUCE_BLOCKS_PER_SM  blocks of 512 per SM of full reductions     (default 2)
  CUFUNC_REDUCE_UNROLL         vector loads in flight per thread           (default 4; 2 for
                               1- and 2-byte elements)

so every setting runs in its own child process (this script with --worker), which prints one
RESULT line of JSON. The parent measures the copy bandwidth and the peers (CuPy, PyTorch) first,
then the settings one after the other, and prints a table per figure with the best setting.

Figures: accumulate (add) on 2^28 and 2^24 float32, 2^27 float64 and 2^28 int32, in GB/s counting
read + write (target >= 80% of the copy bandwidth for 2^28 float32); cuda.reduce
sum and max on 2^28 float32 in GB/s read (target >= CuPy's sum).

Usage: python3 bench/bench_scan_variants.py [--reps N] [--budget SECONDS] [--quick] [--scan-only]
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from benchlib import timeit

SCAN_SETTINGS = [
    ("default (256 x 44, 4 blocks/SM, atomic tile draws, look-back 1 x 32)", {}),
    ("+ 44 items in shared memory", {"CUFUNC_SCAN_SMEM_ITEMS": "44"}),
    ("+ 32 items in shared memory", {"CUFUNC_SCAN_SMEM_ITEMS": "32"}),
    ("+ 20 items in shared memory", {"CUFUNC_SCAN_SMEM_ITEMS": "20"}),
    ("256 x 56 (3 blocks/SM) + 44 in shared memory", {"CUFUNC_SCAN_ITEMS": "56",
                                                      "CUFUNC_SCAN_SMEM_ITEMS": "44"}),
    ("256 x 32, 5 blocks/SM + 32 in shared memory", {"CUFUNC_SCAN_ITEMS": "32",
                                                     "CUFUNC_SCAN_MIN_BLOCKS": "5",
                                                     "CUFUNC_SCAN_SMEM_ITEMS": "32"}),
    ("tiles in block order", {"CUFUNC_SCAN_ORDER": "block"}),
    ("look-back 2 x 32", {"CUFUNC_SCAN_LOOKBACK": "2"}),
    ("256 x 48, 4 blocks/SM", {"CUFUNC_SCAN_ITEMS": "48", "CUFUNC_SCAN_MIN_BLOCKS": "4"}),
    ("256 x 40, 4 blocks/SM", {"CUFUNC_SCAN_ITEMS": "40", "CUFUNC_SCAN_MIN_BLOCKS": "4"}),
    ("256 x 32, 4 blocks/SM", {"CUFUNC_SCAN_ITEMS": "32", "CUFUNC_SCAN_MIN_BLOCKS": "4"}),
    ("256 x 32, 5 blocks/SM", {"CUFUNC_SCAN_ITEMS": "32", "CUFUNC_SCAN_MIN_BLOCKS": "5"}),
    ("256 x 24, 6 blocks/SM", {"CUFUNC_SCAN_ITEMS": "24", "CUFUNC_SCAN_MIN_BLOCKS": "6"}),
    ("128 x 44, 8 blocks/SM", {"CUFUNC_SCAN_BLOCK": "128", "CUFUNC_SCAN_ITEMS": "44",
                                            "CUFUNC_SCAN_MIN_BLOCKS": "8"}),
    ("256 x 56 (3 blocks/SM)", {"CUFUNC_SCAN_ITEMS": "56"}),
    ("256 x 44, 4 blocks/SM, sleep 50 ns", {"CUFUNC_SCAN_ITEMS": "44",
                                                         "CUFUNC_SCAN_MIN_BLOCKS": "4",
                                                         "CUFUNC_SCAN_SLEEP": "50"}),
]
# 8-byte accumulators (float64, int64): the default tile is 256 x 16 (32 KiB, no shared-memory
# part, no register cap); 4-byte ones gained from 88 KiB tiles (44 in registers + 44 in shared
# memory, 4 blocks/SM). These make float64 tiles of 48-88 KiB the same ways (read the f64 column;
# CUFUNC_SCAN_ITEMS also changes the 4-byte tiles). `--f64` runs these.
SCAN_SETTINGS_F64 = [
    ("default (8-byte: 256 x 16 + 22 in shared memory, 4 blocks/SM)", {}),
    ("256 x 16, no shared memory, no register cap (before 2026-11-25)",
     {"CUFUNC_SCAN_ITEMS": "16", "CUFUNC_SCAN_SMEM_ITEMS": "0"}),
    ("256 x 16 + 22 in shared memory, 3 blocks/SM",
     {"CUFUNC_SCAN_ITEMS": "16", "CUFUNC_SCAN_SMEM_ITEMS": "22", "CUFUNC_SCAN_MIN_BLOCKS": "3"}),
    ("256 x 16 + 22 in shared memory, 5 blocks/SM",
     {"CUFUNC_SCAN_ITEMS": "16", "CUFUNC_SCAN_SMEM_ITEMS": "22", "CUFUNC_SCAN_MIN_BLOCKS": "5"}),
    ("256 x 14 + 22 in shared memory, 4 blocks/SM",
     {"CUFUNC_SCAN_ITEMS": "14", "CUFUNC_SCAN_SMEM_ITEMS": "22", "CUFUNC_SCAN_MIN_BLOCKS": "4"}),
    ("256 x 18 + 22 in shared memory, 4 blocks/SM",
     {"CUFUNC_SCAN_ITEMS": "18", "CUFUNC_SCAN_SMEM_ITEMS": "22", "CUFUNC_SCAN_MIN_BLOCKS": "4"}),
    ("256 x 20 + 20 in shared memory, 4 blocks/SM",
     {"CUFUNC_SCAN_ITEMS": "20", "CUFUNC_SCAN_SMEM_ITEMS": "20", "CUFUNC_SCAN_MIN_BLOCKS": "4"}),
    ("256 x 16 + 16 in shared memory", {"CUFUNC_SCAN_ITEMS": "16", "CUFUNC_SCAN_SMEM_ITEMS": "16"}),
    ("256 x 16 + 22 in shared memory", {"CUFUNC_SCAN_ITEMS": "16", "CUFUNC_SCAN_SMEM_ITEMS": "22"}),
    ("256 x 22 + 22 in shared memory, 4 blocks/SM",
     {"CUFUNC_SCAN_ITEMS": "22", "CUFUNC_SCAN_SMEM_ITEMS": "22", "CUFUNC_SCAN_MIN_BLOCKS": "4"}),
    ("256 x 16 + 22 in shared memory, 4 blocks/SM",
     {"CUFUNC_SCAN_ITEMS": "16", "CUFUNC_SCAN_SMEM_ITEMS": "22", "CUFUNC_SCAN_MIN_BLOCKS": "4"}),
    ("256 x 24, 4 blocks/SM", {"CUFUNC_SCAN_ITEMS": "24", "CUFUNC_SCAN_MIN_BLOCKS": "4"}),
    ("256 x 22, 4 blocks/SM", {"CUFUNC_SCAN_ITEMS": "22", "CUFUNC_SCAN_MIN_BLOCKS": "4"}),
    ("256 x 16, 4 blocks/SM", {"CUFUNC_SCAN_ITEMS": "16", "CUFUNC_SCAN_MIN_BLOCKS": "4"}),
    ("256 x 32, 3 blocks/SM", {"CUFUNC_SCAN_ITEMS": "32", "CUFUNC_SCAN_MIN_BLOCKS": "3"}),
    ("128 x 22 + 22 in shared memory, 8 blocks/SM",
     {"CUFUNC_SCAN_BLOCK": "128", "CUFUNC_SCAN_ITEMS": "22", "CUFUNC_SCAN_SMEM_ITEMS": "22",
      "CUFUNC_SCAN_MIN_BLOCKS": "8"}),
]
REDUCE_SETTINGS = [
    ("default (2 blocks/SM, unroll 8 for 4-byte elements)", {}),
    ("3 blocks/SM", {"CUFUNC_REDUCE_BLOCKS_PER_SM": "3"}),
    ("4 blocks/SM", {"CUFUNC_REDUCE_BLOCKS_PER_SM": "4"}),
    ("2 blocks/SM, unroll 4", {"CUFUNC_REDUCE_UNROLL": "4"}),
    ("4 blocks/SM, unroll 2", {"CUFUNC_REDUCE_BLOCKS_PER_SM": "4", "CUFUNC_REDUCE_UNROLL": "2"}),
]

N28, N24, N27 = 1 << 28, 1 << 24, 1 << 27
SCAN_FIGURES = [("accumulate f32 2^28", "f32_28"), ("accumulate f32 2^24", "f32_24"),
                ("accumulate f64 2^27", "f64_27"), ("accumulate i32 2^28", "i32_28")]
REDUCE_FIGURES = [("reduce sum f32 2^28", "sum"), ("reduce max f32 2^28", "max")]


def host_data(dtype, n, rng):
    """n elements of dtype: 2^20 random ones repeated (fast to make, fine for timing)."""
    base = 1 << 20
    if dtype == np.int32:
        b = rng.integers(-1000, 1000, base, dtype=np.int32)
    else:
        b = rng.random(base).astype(dtype)
    return np.tile(b, max(1, n // base))[:n]


# ---- a child: one setting, every figure of its kind -------------------------------------------

def worker(kind, reps):
    from cufunc import cuda, vectorize

    sync = cuda.synchronize
    rng = np.random.default_rng(0)
    out = {}
    if kind == "scan":
        @vectorize(["float32(float32, float32)", "float64(float64, float64)",
                    "int32(int32, int32)"], identity=0)
        def add(a, b):
            return a + b

        for key, dt, n in [("f32_28", np.float32, N28), ("f32_24", np.float32, N24),
                           ("f64_27", np.float64, N27), ("i32_28", np.int32, N28)]:
            h = host_data(dt, n, rng)
            d = cuda.to_device(h)
            o = cuda.device_array(n, dt)
            # correctness on the first 2^20 (several tiles, exact for int32), then the timing
            k = 1 << 20
            add.accumulate(d[:k], out=o[:k])
            got = o[:k].copy_to_host()
            if dt == np.int32:
                ok = np.array_equal(got, np.cumsum(h[:k], dtype=np.int32))
            else:
                ref = np.cumsum(h[:k].astype(np.float64))
                ok = bool(np.all(np.abs(got - ref) <= 1e-4 * ref + 1e-3))
            t = timeit(lambda: add.accumulate(d, out=o), sync, reps, 3)
            out[key] = {"gbs": 2 * h.nbytes / t / 1e9, "ok": ok}
            del d, o, h
    else:
        @cuda.reduce
        def sum_reduce(a, b):
            return a + b

        @cuda.reduce
        def max_reduce(a, b):
            return a if a > b else b

        h = host_data(np.float32, N28, rng)
        d = cuda.to_device(h)
        res = cuda.device_array(1, np.float32)
        for key, fn, want in [("sum", sum_reduce, float(np.sum(h, dtype=np.float64))),
                              ("max", max_reduce, float(h.max()))]:
            fn(d, res=res)
            got = float(res.copy_to_host()[0])
            ok = abs(got - want) <= 1e-5 * abs(want) if key == "sum" else got == want
            t = timeit(lambda: fn(d, res=res), sync, reps, 5)
            out[key] = {"gbs": h.nbytes / t / 1e9, "ok": bool(ok)}
    print("RESULT " + json.dumps(out), flush=True)


# ---- the parent: copy bandwidth, peers, then each setting in a child ---------------------------

def peers(reps):
    """Peer figures, keyed as the workers' figures; a peer that cannot do one is left out."""
    rng = np.random.default_rng(0)
    res = {}
    sizes = [("f32_28", np.float32, N28), ("f32_24", np.float32, N24),
             ("f64_27", np.float64, N27), ("i32_28", np.int32, N28)]

    def note(key, name, fn):
        try:
            res.setdefault(key, {})[name] = fn()
        except Exception as e:  # noqa: BLE001
            print("(%s on %s not measured: %s)" % (name, key, str(e).splitlines()[0][:120]))

    try:
        import cupy as cp
    except Exception:  # noqa: BLE001
        cp = None
        print("(CuPy not installed)")
    if cp is not None:
        sync = cp.cuda.runtime.deviceSynchronize
        for key, dt, n in sizes:
            a = cp.asarray(host_data(dt, n, rng))
            o = cp.empty_like(a)
            note(key, "CuPy cumsum",
                 lambda: 2 * a.nbytes / timeit(lambda: cp.cumsum(a, out=o), sync, reps, 3) / 1e9)
            del a, o
        a = cp.asarray(host_data(np.float32, N28, rng))
        note("sum", "CuPy sum", lambda: a.nbytes / timeit(lambda: cp.sum(a), sync, reps, 5) / 1e9)
        note("max", "CuPy max", lambda: a.nbytes / timeit(lambda: cp.max(a), sync, reps, 5) / 1e9)
        del a
        cp.get_default_memory_pool().free_all_blocks()
    try:
        import torch
        if not torch.cuda.is_available():
            torch = None
    except Exception:  # noqa: BLE001
        torch = None
        print("(PyTorch not installed)")
    if torch is not None:
        sync = torch.cuda.synchronize
        for key, dt, n in sizes:
            a = torch.from_numpy(host_data(dt, n, rng)).cuda()
            o = torch.empty_like(a)
            nb = a.numel() * a.element_size()
            note(key, "PyTorch cumsum", lambda: 2 * nb / timeit(
                lambda: torch.cumsum(a, 0, dtype=a.dtype, out=o), sync, reps, 3) / 1e9)
            del a, o
        a = torch.from_numpy(host_data(np.float32, N28, rng)).cuda()
        nb = a.numel() * 4
        note("sum", "PyTorch sum", lambda: nb / timeit(lambda: torch.sum(a), sync, reps, 5) / 1e9)
        note("max", "PyTorch max", lambda: nb / timeit(lambda: torch.max(a), sync, reps, 5) / 1e9)
        del a
        torch.cuda.empty_cache()
    return res


def copy_bandwidth(reps):
    from cufunc import cuda
    a = cuda.device_array(N28, np.float32)
    b = cuda.device_array(N28, np.float32)
    return 2 * a.nbytes / timeit(lambda: b.copy_to_device(a), cuda.synchronize, reps) / 1e9


def run_child(kind, env_extra, reps, timeout):
    env = dict(os.environ)
    for k in ("CUFUNC_SCAN_BLOCK", "CUFUNC_SCAN_ITEMS", "CUFUNC_SCAN_SLEEP",
              "CUFUNC_SCAN_MIN_BLOCKS", "CUFUNC_SCAN_LOOKBACK",
              "CUFUNC_SCAN_ORDER", "CUFUNC_SCAN_SMEM_ITEMS",
              "CUFUNC_REDUCE_BLOCKS_PER_SM",
              "CUFUNC_REDUCE_UNROLL"):
        env.pop(k, None)
    env.update(env_extra)
    try:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", kind,
                            "--reps", str(reps)], env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out after %d s" % timeout
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):]), None
    return None, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--budget", type=float, default=170.0, help="seconds for the whole run")
    ap.add_argument("--quick", action="store_true", help="the first 3 settings of each kind")
    ap.add_argument("--scan-only", action="store_true", help="the scan settings alone")
    ap.add_argument("--f64", action="store_true", help="the 8-byte scan settings alone")
    ap.add_argument("--worker", choices=["scan", "reduce"])
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.reps)
        return
    t0 = time.perf_counter()
    copy_bw = copy_bandwidth(args.reps)
    peer = peers(args.reps)
    print("copy bandwidth %.0f GB/s (read + write); peers measured in %.0f s"
          % (copy_bw, time.perf_counter() - t0))
    results = {}   # (kind, label) -> figures
    scans, reds = (SCAN_SETTINGS[:3], REDUCE_SETTINGS[:3]) if args.quick else (SCAN_SETTINGS,
                                                                                  REDUCE_SETTINGS)
    if args.f64:
        scans = SCAN_SETTINGS_F64
    if args.scan_only or args.f64:
        reds = []
    # the defaults first, then two scan settings per reduction setting, so that a run cut off by
    # the budget still has some of both
    plan = []
    for i in range(max(len(scans), 2 * len(reds))):
        if i < len(scans):
            plan.append(("scan", scans[i]))
        if i % 2 == 0 and i // 2 < len(reds):
            plan.append(("reduce", reds[i // 2]))
    for kind, (label, env) in plan:
        left = args.budget - (time.perf_counter() - t0)
        if left < 15:
            print("(budget spent: skipped %s setting %r)" % (kind, label))
            continue
        fig, err = run_child(kind, env, args.reps, int(min(90, left)))
        if err:
            print("(%s setting %r failed: %s)" % (kind, label, err))
            continue
        results[(kind, label)] = fig

    print()
    print("| figure | setting | cufunc GB/s | % of copy | correct | peers |")
    print("|---|---|---|---|---|---|")
    best = {}
    for kind, figures in [("scan", SCAN_FIGURES), ("reduce", REDUCE_FIGURES)]:
        for title, key in figures:
            rows = [(label, fig[key]) for (k, label), fig in results.items()
                    if k == kind and key in fig]
            if not rows:
                continue
            ps = ", ".join("%s %.0f" % kv for kv in peer.get(key, {}).items()) or "-"
            top = max(rows, key=lambda r: r[1]["gbs"] if r[1]["ok"] else -1)
            best[key] = top
            for label, v in rows:
                mark = " **best**" if label == top[0] else ""
                print("| %s | %s%s | %.0f | %.1f%% | %s | %s |" % (
                    title, label, mark, v["gbs"], 100 * v["gbs"] / copy_bw,
                    "yes" if v["ok"] else "NO", ps))
    print()
    print("copy bandwidth %.0f GB/s measured in this run; total %.0f s"
          % (copy_bw, time.perf_counter() - t0))
    if "f32_28" in best:
        label, v = best["f32_28"]
        print("best accumulate setting (2^28 float32): %s, %.0f GB/s = %.1f%% of copy (target "
              ">= 80%%: %s)" % (label, v["gbs"], 100 * v["gbs"] / copy_bw,
                                "met" if v["gbs"] >= 0.8 * copy_bw else "NOT met"))
        print("  env: %s" % (dict(dict(scans)[label]) or "(defaults)"))
    if "f64_27" in best:
        label, v = best["f64_27"]
        print("best accumulate setting (2^27 float64): %s, %.0f GB/s = %.1f%% of copy (target "
              ">= 85%%: %s)" % (label, v["gbs"], 100 * v["gbs"] / copy_bw,
                                "met" if v["gbs"] >= 0.85 * copy_bw else "NOT met"))
        print("  env: %s" % (dict(dict(scans)[label]) or "(defaults)"))
    if "max" in best and "sum" in best:
        # the reduction setting that maximises the slower of sum and max
        cands = [(label, fig) for (k, label), fig in results.items() if k == "reduce"
                 and fig["sum"]["ok"] and fig["max"]["ok"]]
        if cands:
            label, fig = max(cands, key=lambda c: min(c[1]["sum"]["gbs"], c[1]["max"]["gbs"]))
            cub = peer.get("sum", {}).get("CuPy sum")
            print("best reduction setting (min of sum, max): %s, sum %.0f, max %.0f GB/s%s"
                  % (label, fig["sum"]["gbs"], fig["max"]["gbs"],
                     "" if cub is None else " (CuPy sum %.0f: %s)" % (
                         cub, "met" if min(fig["sum"]["gbs"], fig["max"]["gbs"]) >= cub
                         else "NOT met")))
            print("  env: %s" % (dict(dict(REDUCE_SETTINGS)[label]) or "(defaults)"))


if __name__ == "__main__":
    main()
