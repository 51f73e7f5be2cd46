"""The host path: ufunc calls on NumPy arrays, beside the PCIe floor measured in the
same process and the peers (CuPy, PyTorch: asarray -> op -> asnumpy), one table.

Rows:
  * hypot on two 2^26 float32 NumPy arrays, NumPy result: floor = 512 MiB in and 256 MiB out
    overlapped on two streams (pinned); target <= 1.5x the floor;
  * a 5-input float32 ufunc on 2^24 elements (a*b + c*d + e): floor = 320 MiB in, 64 MiB out,
    overlapped; target <= 1.5x;
  * cuda.reduce and add.reduce on a 2^28 float32 NumPy array: floor = 1 GiB pinned in; target
    <= 1.3x;
  * hypot on small NumPy arrays, 10^2 .. 10^5 elements: floor = the same two copies, a launch and a
    wait with pinned buffers and device arrays through cufunc's own API; target <= 20 us at 10^3
    and 10^4, and cost growing with size.
Each cufunc row is measured under every host strategy in the same process
(`_core._hostpipe_config`, the same settings as CUFUNC_HOSTPIPE_MIN_KB, CUFUNC_HOST_THREADS,
CUFUNC_HOST_REGISTER_MIN): the defaults, the whole-array path (min_kb huge), copy threads 1..16,
registration of the user's arrays, new results in cached page-locked blocks
(CUFUNC_HOST_RESULT_PINNED_MIN), and page-locked arrays (cuda.pinned_array, cuda.pinned).

Usage: python3 bench/bench_hostpath.py [--reps N] [--quick]
Without a GPU it says so and exits 0 (importing it needs none).
"""
import argparse
import math
import statistics
import sys
import time

import numpy as np

from benchlib import timeit, peers

try:
    from cufunc import _core, cuda, vectorize
except Exception as exc:  # noqa: BLE001 - reported by main()
    _core = cuda = vectorize = None
    _IMPORT_ERROR = exc
else:
    _IMPORT_ERROR = None

MIB = 1 << 20
WHOLE_ARRAY_KB = 1 << 30       # min_kb so large that no call takes the pipeline


def _ufuncs():
    @vectorize(["float32(float32, float32)"])
    def hypot(x, y):
        return math.sqrt(x * x + y * y)

    @vectorize(["float32(float32, float32, float32, float32, float32)"])
    def five(a, b, c, d, e):
        return a * b + c * d + e

    @vectorize(["float32(float32, float32)"])
    def add(x, y):
        return x + y

    @cuda.reduce
    def sum_reduce(a, b):
        return a + b

    return hypot, five, add, sum_reduce


# ---- floors ------------------------------------------------------------------------------------

def pinned_floor(in_bytes, out_bytes, reps):
    """Seconds for in_bytes host-to-device and out_bytes device-to-host from pinned memory: each
    alone, and both at once on two streams (the overlapped floor)."""
    hin = cuda.pinned_array(max(in_bytes, 1), np.uint8)
    hout = cuda.pinned_array(max(out_bytes, 1), np.uint8)
    hin[:] = 1
    hout[:] = 1
    din = cuda.device_array(max(in_bytes, 1), np.uint8)
    dout = cuda.device_array(max(out_bytes, 1), np.uint8)
    s1, s2 = cuda.stream(), cuda.stream()

    def h2d():
        din.copy_to_device(hin, stream=s1)
        s1.synchronize()

    def d2h():
        dout.copy_to_host(hout, stream=s2)
        s2.synchronize()

    def both():
        din.copy_to_device(hin, stream=s1)
        dout.copy_to_host(hout, stream=s2)
        s1.synchronize()
        s2.synchronize()

    none = lambda: None  # noqa: E731
    t_in = timeit(h2d, none, reps) if in_bytes else 0.0
    t_out = timeit(d2h, none, reps) if out_bytes else 0.0
    t_both = timeit(both, none, reps) if in_bytes and out_bytes else max(t_in, t_out)
    return t_in, t_out, t_both


def small_floor(n, hypot, reps):
    """Microseconds of the small call's floor through cufunc's own API: both inputs in one pinned
    buffer copied in, the kernel on device arrays, the output copied back to pinned, a wait."""
    hin = cuda.pinned_array(2 * n, np.float32)
    hout = cuda.pinned_array(n, np.float32)
    hin[:] = 1
    din = cuda.device_array(2 * n, np.float32)
    dout = cuda.device_array(n, np.float32)
    s = cuda.stream()
    da, db = din[:n], din[n:]

    def once():
        din.copy_to_device(hin, stream=s)
        hypot(da, db, out=dout, stream=s)
        dout.copy_to_host(hout, stream=s)
        s.synchronize()

    return 1e6 * timeit(once, lambda: None, reps, 50)


# ---- cufunc under each host strategy -----------------------------------------------------------

def strategies(quick):
    """(label, _hostpipe_config settings); the defaults first."""
    out = [("default", {}),
           ("whole-array path", dict(min_kb=WHOLE_ARRAY_KB))]
    for t in ([1, 8, 16] if quick else [1, 2, 4, 8, 12, 16]):
        out.append(("%d copy thread%s" % (t, "s" if t > 1 else ""), dict(threads=t)))
    out.append(("register >= 1 MiB", dict(register_min=MIB)))
    out.append(("register >= 64 MiB", dict(register_min=64 * MIB)))
    out.append(("results in ordinary memory", dict(result_pinned_min=0)))
    out.append(("ordinary results, 16 threads", dict(result_pinned_min=0, threads=16)))
    return out


def under(settings, fn, reps, inner=1):
    base = _core._hostpipe_config()
    try:
        _core._hostpipe_config(**settings)
        return timeit(fn, lambda: None, reps, inner)
    finally:
        _core._hostpipe_config(**base)


def peer_times(P, make_cp, make_torch, reps, inner=1):
    out = {}
    if "cupy" in P:
        try:
            out["CuPy"] = timeit(make_cp(P["cupy"]), P["cupy"].cuda.Device().synchronize, reps, inner)
        except Exception as e:  # noqa: BLE001 - a peer that fails is reported, not fatal
            out["CuPy"] = "failed: %s" % e
    if "torch" in P:
        try:
            out["PyTorch"] = timeit(make_torch(P["torch"]), P["torch"].cuda.synchronize, reps, inner)
        except Exception as e:  # noqa: BLE001
            out["PyTorch"] = "failed: %s" % e
    return out


def fmt(t, unit):
    if isinstance(t, str):
        return t
    return "%.1f" % (t * (1e3 if unit == "ms" else 1e6))


def print_row(name, unit, floor, ours, peer, target):
    """One row: the floor, each strategy's figure and its ratio to the floor, the peers."""
    print("\n%s (%s); floor %s %s, target <= %s" % (name, unit, fmt(floor, unit), unit, target))
    for label, t in ours:
        ratio = "" if isinstance(t, str) or not floor else "  %.2fx floor" % (t / floor)
        print("  cufunc %-28s %10s%s" % (label, fmt(t, unit), ratio))
    for label, t in peer.items():
        ratio = "" if isinstance(t, str) or not floor else "  %.2fx floor" % (t / floor)
        print("  %-35s %10s%s" % (label, fmt(t, unit), ratio))
    sys.stdout.flush()


# ---- rows ----------------------------------------------------------------------------------------

def row_hypot_large(hypot, P, reps, quick):
    n = 1 << 26
    rng = np.random.default_rng(0)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    want = np.hypot(a, b)
    t_in, t_out, t_both = pinned_floor(8 * n, 4 * n, reps)
    print("\npinned floor for 512 MiB in / 256 MiB out: in %.2f ms (%.1f GB/s), out %.2f ms "
          "(%.1f GB/s), both overlapped %.2f ms" % (1e3 * t_in, 8 * n / t_in / 1e9, 1e3 * t_out,
                                                    4 * n / t_out / 1e9, 1e3 * t_both))
    # the first two calls of this size: the first keeps ordinary memory (a size seen once), the
    # second pays cuMemHostAlloc for the page-locked result block the later rows reuse
    _core._hostpipe_config(reset=True)
    hypot(a[:4], b[:4])
    ours = []
    for label in ("default, first call of the size", "default, second call (block made)"):
        t0 = time.perf_counter()
        hypot(a, b)
        ours.append((label, time.perf_counter() - t0))
    for label, cfg in strategies(quick):
        ours.append((label, under(cfg, lambda: hypot(a, b), reps)))
        info = _core._hostpipe_last()
        ours[-1] = (label + (" [%d chunks, %d direct, %d registered]" % (
            info["chunks"], info["direct"], info["registered"]) if "min_kb" not in cfg else ""),
            ours[-1][1])
    assert np.allclose(hypot(a, b), want, rtol=1e-6)
    # page-locked user arrays: the cuda.pinned context, and pinned_array inputs and output
    with cuda.pinned(a, b):
        ours.append(("inputs in cuda.pinned()", timeit(lambda: hypot(a, b), lambda: None, reps)))
    pa, pb, po = (cuda.pinned_array(n, np.float32) for _ in range(3))
    pa[:], pb[:] = a, b
    ours.append(("pinned_array in and out=", timeit(lambda: hypot(pa, pb, out=po), lambda: None,
                                                    reps)))
    assert np.allclose(po, want, rtol=1e-6)
    peer = peer_times(
        P, lambda cp: (lambda: cp.asnumpy(cp.hypot(cp.asarray(a), cp.asarray(b)))),
        lambda torch: (lambda: torch.hypot(torch.from_numpy(a).cuda(),
                                           torch.from_numpy(b).cuda()).cpu().numpy()),
        max(3, reps // 2))
    print_row("hypot, 2 x 2^26 float32 NumPy arrays in and out", "ms", t_both, ours, peer,
              "1.5x floor = %.1f ms" % (1.5e3 * t_both))
    del pa, pb, po


def row_five(five, P, reps, quick):
    n = 1 << 24
    rng = np.random.default_rng(1)
    xs = [rng.random(n, dtype=np.float32) for _ in range(5)]
    want = xs[0] * xs[1] + xs[2] * xs[3] + xs[4]
    t_in, t_out, t_both = pinned_floor(20 * n, 4 * n, reps)
    ours = [(label, under(cfg, lambda: five(*xs), reps)) for label, cfg in strategies(quick)]
    assert np.allclose(five(*xs), want, rtol=1e-5)
    peer = peer_times(
        P, lambda cp: (lambda: cp.asnumpy(_cp5(cp, [cp.asarray(x) for x in xs]))),
        lambda torch: (lambda: _cp5(torch, [torch.from_numpy(x).cuda() for x in xs]).cpu()
                       .numpy()),
        max(3, reps // 2))
    print_row("5 float32 NumPy inputs of 2^24, one output (a*b + c*d + e)", "ms", t_both, ours,
              peer, "1.5x floor = %.1f ms" % (1.5e3 * t_both))


def _cp5(mod, v):
    return v[0] * v[1] + v[2] * v[3] + v[4]


def row_reduce(add, sum_reduce, P, reps):
    n = 1 << 28
    x = np.random.default_rng(2).random(n, dtype=np.float32)
    t_in, _, _ = pinned_floor(4 * n, 0, reps)
    want = float(np.sum(x, dtype=np.float64))
    ours = [("cuda.reduce", timeit(lambda: sum_reduce(x), lambda: None, reps)),
            ("add.reduce", timeit(lambda: add.reduce(x), lambda: None, reps))]
    assert abs(float(sum_reduce(x)) - want) < 1e-3 * abs(want)
    with cuda.pinned(x):
        ours.append(("cuda.reduce, cuda.pinned()", timeit(lambda: sum_reduce(x), lambda: None,
                                                          reps)))
    peer = peer_times(P, lambda cp: (lambda: float(cp.asarray(x).sum())),
                      lambda torch: (lambda: float(torch.from_numpy(x).cuda().sum())),
                      max(3, reps // 2))
    print_row("reduce of a 2^28 float32 NumPy array (1 GiB in)", "ms", t_in, ours, peer,
              "1.3x floor = %.1f ms" % (1.3e3 * t_in))
    del x


def row_small(hypot, P, reps):
    print("\nhypot on small float32 NumPy arrays in and out (us); target <= 20 us at 10^3 and 10^4, "
          "growing with size")
    labels = ["floor (pinned, cufunc API)", "cufunc default", "pinned results >= 64 KiB",
              "cufunc whole-array path",
              "whole: 2 x to_device", "whole: kernel on device", "whole: copy_to_host", "CuPy",
              "PyTorch"]
    print("%-9s" % "n" + "".join(" %14s" % lab[:14] for lab in labels))
    phases = []
    for n in [100, 1000, 3000, 10_000, 30_000, 100_000]:
        rng = np.random.default_rng(n)
        a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
        row = [small_floor(n, hypot, reps)]
        row.append(1e6 * under({}, lambda: hypot(a, b), reps, 50))
        row.append(1e6 * under(dict(result_pinned_min=64 * 1024), lambda: hypot(a, b), reps, 50))
        row.append(1e6 * under(dict(min_kb=WHOLE_ARRAY_KB), lambda: hypot(a, b), reps, 50))
        # the whole-array path's steps, one by one
        row.append(1e6 * timeit(lambda: (cuda.to_device(a), cuda.to_device(b)), cuda.synchronize,
                                reps, 50))
        da, db = cuda.to_device(a), cuda.to_device(b)
        row.append(1e6 * timeit(lambda: hypot(da, db), cuda.synchronize, reps, 50))
        dr = hypot(da, db)
        row.append(1e6 * timeit(lambda: dr.copy_to_host(), lambda: None, reps, 50))
        if "cupy" in P:
            cp = P["cupy"]
            row.append(1e6 * timeit(lambda: cp.asnumpy(cp.hypot(cp.asarray(a), cp.asarray(b))),
                                    lambda: None, reps, 50))
        else:
            row.append(None)
        if "torch" in P:
            torch = P["torch"]
            row.append(1e6 * timeit(lambda: torch.hypot(torch.from_numpy(a).cuda(),
                                                        torch.from_numpy(b).cuda()).cpu().numpy(),
                                    lambda: None, reps, 50))
        else:
            row.append(None)
        print("%-9d" % n + "".join(" %14s" % ("-" if v is None else "%.1f" % v) for v in row))
        sys.stdout.flush()
        assert np.allclose(hypot(a, b), np.hypot(a, b), rtol=1e-6)
        phases.append((n, row[1], pipeline_phases(lambda: hypot(a, b))))
    print("\nwhere the default call's time goes (us, medians of 200 calls; C = cf_ufunc_launch_host "
          "as timed inside it, Python = the call minus C)")
    keys = ["plan", "setup", "issue", "wait", "unpack", "finish", "total"]
    print("%-9s %9s" % ("n", "call") + "".join(" %9s" % k for k in keys) + " %9s" % "Python")
    for n, call, ph in phases:
        if ph is None:
            print("%-9d %9.1f  (not pipelined)" % (n, call))
            continue
        print("%-9d %9.1f" % (n, call) + "".join(" %9.1f" % ph[k] for k in keys) +
              " %9.1f" % (call - ph["total"]))


def pipeline_phases(fn, calls=200):
    """Median of each phase of the pipelined launch over `calls` calls (_core._hostpipe_last's
    phases_us, written by the C pipeline at the end of each call), or None when the call did not
    take the pipeline."""
    seen = {}
    before = _core._hostpipe_last()["calls"]
    for _ in range(calls):
        fn()
        for k, v in _core._hostpipe_last()["phases_us"].items():
            seen.setdefault(k, []).append(v)
    if _core._hostpipe_last()["calls"] - before < calls:
        return None
    return {k: float(np.median(v)) for k, v in seen.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="fewer thread counts")
    ap.add_argument("--only", default="", help="comma list of rows: large,five,reduce,small")
    args = ap.parse_args()
    if _IMPORT_ERROR is not None or not cuda.is_available():
        print("bench_hostpath: no usable GPU (%s); nothing measured"
              % (_IMPORT_ERROR or "cuda.is_available() is False"))
        return 0
    only = set(filter(None, args.only.split(",")))
    hypot, five, add, sum_reduce = _ufuncs()
    P = peers()
    dev = cuda.get_current_device()
    print("bench_hostpath.py on %s; host settings %s; peers: %s" % (
        dev.name, _core._hostpipe_config(), ", ".join(sorted(P)) or "none"))
    t0 = time.perf_counter()
    if not only or "small" in only:
        row_small(hypot, P, args.reps)
    if not only or "large" in only:
        row_hypot_large(hypot, P, args.reps, args.quick)
    if not only or "five" in only:
        row_five(five, P, args.reps, args.quick)
    if not only or "reduce" in only:
        row_reduce(add, sum_reduce, P, args.reps)
    print("\n(%.0f s)" % (time.perf_counter() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
