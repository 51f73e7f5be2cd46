"""Helpers shared by the benchmark scripts: timing and finding the peers installed beside cufunc.
The scripts run as `python3 bench/<name>.py`, which puts this folder on sys.path."""
import statistics
import time


def cpu_alone(fn, sync, calls=256, reps=9):
    """Median microseconds per call of `calls` calls timed before any synchronisation."""
    fn()
    ts = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        ts.append((time.perf_counter() - t0) / calls)
        sync()
    return 1e6 * statistics.median(ts)


def timeit(fn, sync, reps, inner=1):
    """Median seconds per call of fn: after one warm-up call, `reps` batches of `inner` calls,
    each batch ending with sync() (the device work must be finished before the clock stops)."""
    fn()
    sync()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        ts.append((time.perf_counter() - t0) / inner)
    return statistics.median(ts)


def peers(numba_decorator="vectorize"):
    """The peers importable here with a usable GPU: {"torch": torch, "cupy": cupy,
    "numba": (numba.cuda, numba.<numba_decorator>)}, each only if present."""
    out = {}
    try:
        import torch
        if torch.cuda.is_available():
            out["torch"] = torch
    except Exception:  # noqa: BLE001 - a missing or broken peer is just absent
        pass
    try:
        import cupy
        out["cupy"] = cupy
    except Exception:  # noqa: BLE001
        pass
    try:
        import numba
        from numba import cuda as ncuda
        if ncuda.is_available():
            out["numba"] = (ncuda, getattr(numba, numba_decorator))
    except Exception:  # noqa: BLE001
        pass
    return out
