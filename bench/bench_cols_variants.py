"""Tuning run for column reductions (ufunc.reduce over a strided axis, the CF_REDUCE_COLS kernel):
one run on the GPU machine, about a minute, the copy bandwidth and PyTorch's sum measured in the
same run.

The engine reads its knobs from the environment once per process (src/reduce.c):

  CUFUNC_REDUCE_COLS_THREADS_PER_SM  threads per SM a split aims at (default 2048)
  CUFUNC_REDUCE_GATHER               partials the last block of a split loads at once (default 8;
                                     before: 1)
  CUFUNC_REDUCE_UNROLL               rows loaded together per thread (default 4 for float32)

so every setting runs in its own child process (this script with --worker), which prints one
RESULT line of JSON. Figures, in GB/s read: add.reduce over axis 0 of (16384, 16384) float32
(target: >= 90% of copy), of (8192, 16384) float64, and a max over axis 0 of the
float32 array (a body with a select), and sums over axis 0 of 2^28 float32 elements in other
shapes, from 1024 to 262144 columns.

Usage: python3 bench/bench_cols_variants.py [--reps N]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

from benchlib import timeit

SETTINGS = [
    ("default (split for 2048 threads/SM, gather 8)", {}),
    ("gather 1 (before)", {"CUFUNC_REDUCE_GATHER": "1"}),
    ("split for 1024 threads/SM", {"CUFUNC_REDUCE_COLS_THREADS_PER_SM": "1024"}),
    ("split for 512 threads/SM", {"CUFUNC_REDUCE_COLS_THREADS_PER_SM": "512"}),
    ("gather 16", {"CUFUNC_REDUCE_GATHER": "16"}),
    ("unroll 2", {"CUFUNC_REDUCE_UNROLL": "2"}),
]


def worker(reps):
    from cufunc import cuda, vectorize

    @vectorize(["float32(float32, float32)", "float64(float64, float64)"], identity=0)
    def add(a, b):
        return a + b

    @vectorize(["float32(float32, float32)"])
    def vmax(a, b):
        return a if a > b else b

    rng = np.random.default_rng(0)
    out = {}
    for name, uf, shape, dt in [("add f32 (16384,16384)", add, (16384, 16384), np.float32),
                                ("add f64 (8192,16384)", add, (8192, 16384), np.float64),
                                ("max f32 (16384,16384)", vmax, (16384, 16384), np.float32),
                                ("add f32 (65536,4096)", add, (65536, 4096), np.float32),
                                ("add f32 (262144,1024)", add, (262144, 1024), np.float32),
                                ("add f32 (4096,65536)", add, (4096, 65536), np.float32),
                                ("add f32 (1024,262144)", add, (1024, 262144), np.float32)]:
        h = rng.random(shape, dtype=dt)
        d = cuda.to_device(h)
        o = cuda.device_array(shape[1], dt)
        uf.reduce(d, axis=0, out=o)
        want = np.max(h, axis=0) if uf is vmax else np.add.reduce(h.astype(np.float64), axis=0)
        got = o.copy_to_host()
        tol = 0 if uf is vmax else 1e-4 * shape[0]
        if not np.allclose(got, want, rtol=1e-5, atol=tol):
            raise SystemExit("wrong result for %s" % name)
        out[name] = h.nbytes / timeit(lambda: uf.reduce(d, axis=0, out=o), cuda.synchronize,
                                      reps, 3) / 1e9
        del d, h
    print("RESULT " + json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--worker", action="store_true")
    args = ap.parse_args()
    if args.worker:
        return worker(args.reps)
    from cufunc import cuda
    big = cuda.device_array(1 << 28, np.float32)
    big2 = cuda.device_array(1 << 28, np.float32)
    copy_bw = 2 * big.nbytes / timeit(lambda: big2.copy_to_device(big), cuda.synchronize, 9) / 1e9
    del big, big2
    peer = "-"
    try:
        import torch
        if torch.cuda.is_available():
            t = torch.rand(16384, 16384, device="cuda")
            peer = "%.0f" % (t.numel() * 4 / timeit(lambda: torch.sum(t, dim=0),
                                                    torch.cuda.synchronize, 9, 3) / 1e9)
            del t
            torch.cuda.empty_cache()
    except ImportError:
        pass
    print("copy %.0f GB/s (read + write); 90%% = %.0f; PyTorch sum(dim=0) (16384,16384) float32: %s GB/s"
          % (copy_bw, 0.9 * copy_bw, peer))
    rows = []
    for label, env in SETTINGS:
        e = dict(os.environ, **env)
        r = subprocess.run([sys.executable, __file__, "--worker", "--reps", str(args.reps)],
                           env=e, capture_output=True, text=True)
        res = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
        if r.returncode or not res:
            rows.append((label, None, (r.stderr or r.stdout).strip().splitlines()[-1:]))
            continue
        rows.append((label, json.loads(res[0][7:]), None))
    names = next((d.keys() for _, d, _ in rows if d), [])
    print("| setting | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for label, d, err in rows:
        if d is None:
            print("| %s | failed: %s |" % (label, err))
        else:
            print("| %s | %s |" % (label, " | ".join("%.0f" % d[n] for n in names)))


if __name__ == "__main__":
    main()
