"""float16 and bfloat16 kernels, one run on the GPU machine:

  * hypot(x, y) on 2^26-element device arrays of float16, bfloat16 and float32, with cufunc's
    @vectorize (float16: NumPy's meaning, hypotf rounded to half; bfloat16: ml_dtypes' meaning):
    GB/s counting the bytes read and written (3 * n * itemsize), beside torch.hypot on float16 and
    bfloat16 (and float32) CUDA tensors when PyTorch is importable;
  * the device-to-device copy bandwidth (bytes read + written) measured in the same run: the
    ceiling. Target: half-precision kernels reach the same bandwidth per byte as float32
    ones (contiguous float16/bfloat16 operands are loaded 8 elements, 16 bytes, at a time).

bfloat16 needs ml_dtypes (its NumPy dtype) for the cufunc rows; torch's rows need only torch.

Usage: python3 bench/bench_half.py [--reps N] [--log2n K]
Without a GPU it says so and exits with status 2 (importing this file needs no GPU).
"""
import argparse
import sys

import numpy as np

from benchlib import peers, timeit


def _kernels():
    """The cufunc ufuncs, made on first use (decoration needs cufunc's extension, not a GPU)."""
    from cufunc import vectorize

    sigs = ["float16(float16, float16)", "float32(float32, float32)"]
    try:
        import ml_dtypes  # noqa: F401 - bfloat16's NumPy dtype
        sigs.append("bfloat16(bfloat16, bfloat16)")
    except ImportError:
        pass

    @vectorize(sigs, target="cuda")
    def hyp(x, y):
        return np.hypot(x, y)

    return hyp


def _dtypes():
    out = [("float16", np.dtype(np.float16)), ("float32", np.dtype(np.float32))]
    try:
        import ml_dtypes
        out.insert(1, ("bfloat16", np.dtype(ml_dtypes.bfloat16)))
    except ImportError:
        print("bfloat16: ml_dtypes is not installed, cufunc's bfloat16 row left out")
    return out


def copy_bandwidth(cuda, n_bytes, reps):
    a = cuda.device_array(n_bytes, np.uint8)
    b = cuda.device_array(n_bytes, np.uint8)
    t = timeit(lambda: b.copy_to_device(a), cuda.synchronize, reps)
    return 2 * n_bytes / t / 1e9


def cufunc_rows(cuda, hyp, n, reps):
    rows = {}
    rng = np.random.default_rng(0)
    x32 = rng.uniform(-100, 100, n).astype(np.float32)
    y32 = rng.uniform(-100, 100, n).astype(np.float32)
    for name, dt in _dtypes():
        x, y = cuda.to_device(x32.astype(dt)), cuda.to_device(y32.astype(dt))
        o = cuda.device_array(n, dt)
        t = timeit(lambda: hyp(x, y, out=o), cuda.synchronize, reps, inner=5)
        rows[name] = 3 * n * dt.itemsize / t / 1e9
        # the result is checked, so a fast wrong kernel cannot pass for a fast one
        got = o.copy_to_host()[:4096].astype(np.float32)
        want = np.hypot(x32[:4096].astype(dt).astype(np.float32),
                        y32[:4096].astype(dt).astype(np.float32)).astype(dt).astype(np.float32)
        ulp = float(np.finfo(np.float16).eps) if name == "float16" else 2.0 ** -7 \
            if name == "bfloat16" else 1e-6
        if not np.allclose(got, want, rtol=ulp, atol=0):
            raise SystemExit("bench_half: cufunc's %s hypot differs from the reference" % name)
    return rows


def torch_rows(torch, n, reps):
    rows = {}
    for name, dt in (("float16", torch.float16), ("bfloat16", torch.bfloat16),
                     ("float32", torch.float32)):
        x = torch.rand(n, device="cuda", dtype=dt)
        y = torch.rand(n, device="cuda", dtype=dt)
        o = torch.empty(n, device="cuda", dtype=dt)
        t = timeit(lambda: torch.hypot(x, y, out=o), torch.cuda.synchronize, reps, inner=5)
        rows[name] = 3 * n * x.element_size() / t / 1e9
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--log2n", type=int, default=26)
    args = ap.parse_args(argv)
    from cufunc import cuda
    if not cuda.is_available():
        print("bench_half: no usable CUDA GPU here (the benchmark needs one); nothing measured")
        return 2
    n = 1 << args.log2n
    card = cuda.get_current_device().name
    card = card.decode() if isinstance(card, bytes) else card
    print("bench_half: hypot on 2^%d elements, %s" % (args.log2n, card))
    copy = copy_bandwidth(cuda, 3 * n * 4, args.reps)
    print("device-to-device copy (read + write): %7.1f GB/s" % copy)
    ours = cufunc_rows(cuda, _kernels(), n, args.reps)
    theirs = {}
    p = peers()
    if "torch" in p:
        theirs = torch_rows(p["torch"], n, args.reps)
    else:
        print("torch: not importable with CUDA here, its rows left out")
    print("%-9s %14s %14s %12s" % ("dtype", "cufunc GB/s", "torch GB/s", "% of copy"))
    for name in ("float16", "bfloat16", "float32"):
        if name not in ours and name not in theirs:
            continue
        o, t = ours.get(name), theirs.get(name)
        print("%-9s %14s %14s %12s" % (name, "%.1f" % o if o else "-", "%.1f" % t if t else "-",
                                        "%.0f%%" % (100 * o / copy) if o else "-"))
    if "float16" in ours and "float32" in ours:
        print("float16 / float32 bandwidth per byte: %.2f (target 1.0)"
              % (ours["float16"] / ours["float32"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
