"""Several GPUs in one process.

A call runs on the device of its device operands, whatever the thread's current device: kernels,
outputs, stream and pool of that device. Operands on two devices are a ValueError naming both;
host operands go to the device of the device operands (or the stream's, else the current device).
`with cuda.gpus[k]:` and `cuda.select_device(k)` are per thread. A call on another device leaves
the thread's current CUDA context as it was (CuPy's and PyTorch's current device included).

Tests marked gpus(2) need two GPUs: with fewer they skip (visibly, -ra), even under
CUFUNC_REQUIRE_GPU=1; CUFUNC_REQUIRE_GPUS=2 (the multi-GPU machine's run) makes them fail instead.
The others need one GPU (what one GPU can check: ordinals, the gpus list, per-thread selection,
a user's own context restored) or none (pickling, which Dask's workers need).
"""
import ctypes
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from cufunc import _core, cuda, vectorize
from cufunc.guvectorize import guvectorize

two_gpus = [pytest.mark.gpu, pytest.mark.gpus(2)]

N = 1 << 20


def plus(a, b):
    return a + b


add = vectorize(["float64(float64, float64)", "float32(float32, float32)"], identity=0)(plus)


def hyp_body(a, b):
    return (a * a + b * b) ** 0.5


hypot = vectorize(["float64(float64, float64)", "float32(float32, float32)"])(hyp_body)


def slow_identity(x, n):
    """x, after n dependent additions (exact for |x| + n < 2**53)."""
    y = x
    for i in range(n):
        y = y + 1.0
    return y - n


slow = vectorize(["float64(float64, int64)"])(slow_identity)


@guvectorize(["void(float64[:], float64[:])"], "(n)->()")
def rowsum(x, out):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i]
    out[0] = s


@cuda.reduce
def sum_reduce(a, b):
    return a + b


def host(r):
    """A result as a NumPy array (DeviceArray, CuPy, torch or NumPy)."""
    if hasattr(r, "copy_to_host"):
        return r.copy_to_host()
    if hasattr(r, "get"):
        return r.get()
    if hasattr(r, "cpu"):
        return r.cpu().numpy()
    return np.asarray(r)


def on(device, ary):
    """A DeviceArray copy of a host array on `device`."""
    with cuda.gpus[device]:
        return cuda.to_device(ary)


# ---- the thread's CUDA context, read from the driver (ctypes) --------------------------------------

def _libcuda():
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        pytest.skip("libcuda.so.1 cannot be loaded through ctypes")


def current_context():
    """The calling thread's current CUcontext (an int; 0 when none)."""
    lib = _libcuda()
    ctx = ctypes.c_void_p()
    assert lib.cuCtxGetCurrent(ctypes.byref(ctx)) == 0
    return ctx.value or 0


def context_device():
    lib = _libcuda()
    dev = ctypes.c_int(-1)
    assert lib.cuCtxGetDevice(ctypes.byref(dev)) == 0
    return dev.value


# ---- one GPU: ordinals, the gpus list, per-thread selection --------------------------------------

@pytest.mark.gpu
def test_gpus_list_matches_the_driver():
    n = _core.device_count()
    assert len(cuda.gpus) == n >= 1
    assert [d.id for d in cuda.gpus] == list(range(n))
    assert cuda.gpus[-1].id == n - 1
    with pytest.raises(IndexError, match="there (is|are) %d CUDA device" % n):
        cuda.gpus[n]


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["select_device", "gpus_with", "set_device"])
def test_out_of_range_ordinal_is_a_clear_error(how):
    n = _core.device_count()
    before = cuda.get_current_device().id
    with pytest.raises(Exception, match=r"no CUDA device %d|no device %d" % (n, n)) as e:
        if how == "select_device":
            cuda.select_device(n)
        elif how == "gpus_with":
            with cuda.gpus[n]:
                pass
        else:
            _core.set_device(n)
    assert "there" in str(e.value)   # says how many there are
    assert cuda.get_current_device().id == before


@pytest.mark.gpu
def test_with_gpus_restores_per_thread():
    seen = {}

    def worker():
        seen["thread_start"] = cuda.get_current_device().id
        with cuda.gpus[0]:
            seen["thread_inside"] = cuda.get_current_device().id
        seen["thread_after"] = cuda.get_current_device().id

    with cuda.gpus[0]:
        with cuda.gpus[0]:
            pass
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert cuda.get_current_device().id == 0
    with pytest.raises(RuntimeError):
        with cuda.gpus[0]:
            raise RuntimeError("inside")
    assert cuda.get_current_device().id == 0
    assert seen == {"thread_start": 0, "thread_inside": 0, "thread_after": 0}


@pytest.mark.gpu
def test_a_users_own_context_is_restored_after_a_call():
    """cufunc works in primary contexts; a thread whose current context is one the user created
    (cuCtxCreate) gets it back when the call ends (cf_context_restore). One GPU shows it."""
    lib = _libcuda()
    create = getattr(lib, "cuCtxCreate_v2", None)
    if create is None:
        pytest.skip("this driver exports no cuCtxCreate_v2")
    d = cuda.to_device(np.arange(N, dtype=np.float64))
    out = {}

    def worker():
        ctx = ctypes.c_void_p()
        assert create(ctypes.byref(ctx), 0, 0) == 0   # current on this thread now
        try:
            mine = ctx.value
            r = add(d, d)                       # pipeline
            add(d, d, out=r)                    # the C fast path
            out["values"] = r.copy_to_host()    # a copy
            del r                               # a free
            out["after"] = current_context()
            out["mine"] = mine
        finally:
            lib.cuCtxDestroy_v2(ctx)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    np.testing.assert_array_equal(out["values"], 2 * np.arange(N, dtype=np.float64))
    assert out["after"] == out["mine"]


@pytest.mark.gpu
def test_no_context_switch_on_the_current_device():
    d = cuda.to_device(np.arange(16, dtype=np.float64))
    add(d, d)
    before = current_context()
    r = add(d, d)
    add(d, d, out=r)
    assert current_context() == before != 0
    assert r.device_id == 0


# ---- no GPU: ufuncs travel to Dask's worker processes ------------------------------------------

PICKLE_SCRIPT = '''
import math, sys
import cloudpickle
from cufunc import vectorize, guvectorize, cuda

def helper(a):
    return a * a

@vectorize(["float32(float32, float32)", "float64(float64, float64)"], identity=0)
def hyp(a, b):
    return math.sqrt(helper(a) + helper(b))

@guvectorize(["void(float64[:], float64[:])"], "(n)->()")
def rowsum(x, out):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i]
    out[0] = s

@vectorize
def lazy(a):
    return helper(a) + 1

@cuda.reduce
def total(a, b):
    return helper(a) + b

sys.stdout.buffer.write(cloudpickle.dumps((hyp, rowsum, lazy, total, hyp.inspect_cuda())))
'''


def test_ufuncs_pickle_by_value_to_a_process_without_the_script(tmp_path):
    """A script's ufuncs (cloudpickle, as Dask sends a graph) are rebuilt in another process,
    where the script file no longer exists: same loops, same generated code, one rebuild per
    ufunc however many tasks carry it."""
    pytest.importorskip("cloudpickle")
    script = tmp_path / "made_here.py"
    script.write_text(PICKLE_SCRIPT)
    blob = subprocess.run([sys.executable, str(script)], capture_output=True, check=True).stdout
    script.unlink()
    check = textwrap.dedent('''
        import pickle, sys
        from cufunc.lang.source import get_source
        data = sys.stdin.buffer.read()
        hyp, rowsum, lazy, total, source = pickle.loads(data)
        again = pickle.loads(data)[0]
        get_source(total.py_func)            # cuda.reduce translates on first use: its source
        get_source(lazy.py_func)             # the same for a signature-less ufunc
        print(hyp.types, hyp.identity, rowsum.signature, rowsum.types, lazy.types,
              hyp.inspect_cuda() == source, again is hyp, hyp.__name__, type(total).__name__)
    ''')
    p = subprocess.run([sys.executable, "-c", check], input=blob, capture_output=True)
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout.decode().split() == ["['ff->f',", "'dd->d']", "0", "(n)->()", "['d->d']",
                                         "[]", "True", "True", "hyp", "Reduce"]


def test_a_module_global_ufunc_pickles_by_name(tmp_path, monkeypatch):
    (tmp_path / "mgpu_mod.py").write_text(textwrap.dedent('''
        from cufunc import vectorize

        @vectorize(["float64(float64)"])
        def twice(a):
            return a + a
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    import mgpu_mod
    data = pickle.dumps(mgpu_mod.twice)
    assert b"mgpu_mod" in data and len(data) < 200
    assert pickle.loads(data) is mgpu_mod.twice


# ---- two GPUs: every engine on device 1 while device 0 is current -------------------------------

def _engines():
    x = np.linspace(0.5, 4.0, 4096)
    y = np.linspace(-3.0, 1.0, 4096)
    m = np.arange(64 * 33, dtype=np.float64).reshape(64, 33)
    idx = np.array([0, 5, 5, 7, 4095, 5])

    def at_host(d):
        np.add.at(d["x"], idx, 2.0)        # the twin's ufunc.at; host indices and values
        return d["x"]

    def at_cufunc(d):
        add.at(d["x"], on(1, idx), on(1, np.full(idx.size, 3.0)))
        return d["x"]

    def want_at(v):
        r = x.copy()
        np.add.at(r, idx, v)
        return r

    return [
        ("ufunc", lambda d: hypot(d["x"], d["y"]), np.hypot(x, y)),
        ("ufunc_host_operand", lambda d: hypot(d["x"], y), np.hypot(x, y)),
        ("ufunc_out", lambda d: add(d["x"], d["y"], out=d["o"]), x + y),
        ("gufunc", lambda d: rowsum(d["m"]), m.sum(axis=1)),
        ("reduce", lambda d: add.reduce(d["m"], axis=1), m.sum(axis=1)),
        ("accumulate", lambda d: add.accumulate(d["x"]), np.cumsum(x)),  # rtol below
        ("outer", lambda d: add.outer(d["x"][:17], d["y"][:9]), np.add.outer(x[:17], y[:9])),
        ("cuda_reduce", lambda d: sum_reduce(d["x"]), x.sum()),
        ("twin", lambda d: np.hypot(d["x"], d["y"]), np.hypot(x, y)),
        ("operator", lambda d: d["x"] * d["y"] + d["x"], x * y + x),
        ("twin_reduce", lambda d: np.add.reduce(d["m"], axis=0), m.sum(axis=0)),
        ("ufunc_at_host_operands", at_host, want_at(2.0)),
        ("ufunc_at_device_operands", at_cufunc, want_at(3.0)),
    ], dict(x=x, y=y, m=m)


ENGINES, DATA = _engines()


@pytest.mark.parametrize("name,call,want", ENGINES, ids=[e[0] for e in ENGINES])
@pytest.mark.gpu
@pytest.mark.gpus(2)
def test_engine_runs_on_the_operands_device(name, call, want):
    d = {k: on(1, v) for k, v in DATA.items()}
    d["o"] = on(1, np.zeros_like(DATA["x"]))
    cuda.select_device(0)
    ctx0 = current_context()
    r = call(d)
    assert cuda.get_current_device().id == 0
    assert current_context() == ctx0, "the call left another device's context current"
    if hasattr(r, "device_id"):
        assert r.device_id == 1
    np.testing.assert_allclose(host(r), want, rtol=1e-10)


MIXED = [
    ("ufunc", lambda a0, a1: hypot(a0, a1), "argument 2 is on device 1.*runs on device 0"),
    ("ufunc_reversed", lambda a0, a1: hypot(a1, a0), "argument 2 is on device 0.*runs on device 1"),
    ("ufunc_out", lambda a0, a1: add(a0, a0, out=a1), "out.* is on device 1.*runs on device 0"),
    ("ufunc_where", lambda a0, a1: add(a0, a0, where=a1 > 1.0), "where is on device 1"),
    ("fast_path_out", lambda a0, a1: add(a1, a1, a0), "device 0.*device 1|device 1.*device 0"),
    ("gufunc", lambda a0, a1: rowsum(a0.reshape(64, 64), out=a1[:64]), "device 1.*device 0"),
    ("reduce_out", lambda a0, a1: add.reduce(a0.reshape(64, 64), axis=1, out=a1[:64]),
     "device 1.*device 0"),
    ("twin", lambda a0, a1: np.add(a0, a1), "device 1.*device 0"),
    ("operator", lambda a0, a1: a0 + a1, "device 1.*device 0"),
    ("ufunc_at_values", lambda a0, a1: add.at(a0, [1, 2], a1[:2]),
     "values are on device 1, but the array is on device 0"),
    ("ufunc_at_indices", lambda a0, a1: add.at(a0, on(1, np.array([1, 2])), 1.0),
     "indices are on device 1, but the array is on device 0"),
    ("stream", lambda a0, a1: add(a0, a0, stream=_stream_on(1)),
     "stream belongs to device 1, the data to device 0"),
]


def _stream_on(device):
    with cuda.gpus[device]:
        return cuda.stream()


@pytest.mark.parametrize("name,call,match", MIXED, ids=[m[0] for m in MIXED])
@pytest.mark.gpu
@pytest.mark.gpus(2)
def test_operands_on_two_devices_are_refused(name, call, match):
    a0 = on(0, np.arange(4096, dtype=np.float64))
    a1 = on(1, np.arange(4096, dtype=np.float64))
    before1 = a1.copy_to_host()
    with pytest.raises(ValueError, match=match):
        call(a0, a1)
    np.testing.assert_array_equal(a1.copy_to_host(), before1)   # nothing written


@pytest.mark.gpu
@pytest.mark.gpus(2)
def test_host_operands_go_to_the_stream_or_current_device():
    x = np.arange(N, dtype=np.float64)
    s1 = _stream_on(1)
    cuda.select_device(0)
    np.testing.assert_array_equal(add(x, x, stream=s1), 2 * x)   # the stream's device
    with cuda.gpus[1]:
        d = cuda.to_device(x)
        e = cuda.device_array(4)
        np.testing.assert_array_equal(add(x, x), 2 * x)           # the current device
    assert (d.device_id, e.device_id) == (1, 1)
    assert cuda.to_device(x).device_id == 0
    r = add(d, x)                       # host operand follows the device operand
    assert r.device_id == 1
    np.testing.assert_array_equal(r.copy_to_host(), 2 * x)


@pytest.mark.gpu
@pytest.mark.gpus(2)
def test_select_device_is_per_thread():
    barrier = threading.Barrier(2)
    seen = {}

    def worker(k):
        cuda.select_device(k)
        barrier.wait()
        d = cuda.to_device(np.full(8, float(k)))
        seen[k] = (cuda.get_current_device().id, d.device_id, host(add(d, d))[0])
        barrier.wait()

    ts = [threading.Thread(target=worker, args=(k,)) for k in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert seen == {0: (0, 0, 0.0), 1: (1, 1, 2.0)}
    assert cuda.get_current_device().id == 0   # the main thread's is untouched


@pytest.fixture(scope="module")
def n_iter():
    """Loop count for a producer of about 50 ms on device 0 (at least 2000)."""
    src = on(0, np.arange(N, dtype=np.float64))
    out = cuda.device_array(N, np.float64)
    slow(src, 10, out=out)
    cuda.synchronize()
    n = 2000
    for _ in range(6):
        t0 = time.perf_counter()
        slow(src, n, out=out)
        cuda.synchronize()
        dt = time.perf_counter() - t0
        if dt >= 0.02:
            break
        n = min(n * 16, 50_000_000)
    return int(min(max(2000, n * 0.05 / max(dt, 1e-4)), 50_000_000))


@pytest.mark.gpu
@pytest.mark.gpus(2)
def test_eight_threads_drive_every_gpu(n_iter):
    """8 threads over all GPUs, each with its own arrays and stream: a long producer, then
    consumers queued at once (no host synchronisation): every value exact, every result on the
    thread's device, and no thread sees another's device as current."""
    ngpu = _core.device_count()
    barrier = threading.Barrier(8)
    errors, results = [], {}

    def worker(t):
        try:
            k = t % ngpu
            cuda.select_device(k)
            s = cuda.stream()
            base = np.arange(N, dtype=np.float64) + t
            src = cuda.to_device(base, stream=s)
            barrier.wait()
            p = slow(src, n_iter, stream=s)            # long: consumers must wait for it
            q = add(p, p, stream=s)
            r = rowsum(q.reshape(1024, 1024), stream=s)
            total = add.reduce(q, stream=s)
            got = (q.copy_to_host(stream=s), r.copy_to_host(stream=s), host(total))
            s.synchronize()
            results[t] = (k, cuda.get_current_device().id, q.device_id, r.device_id, got)
        except Exception as exc:  # noqa: BLE001 - reported below with its thread
            errors.append((t, repr(exc)))

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    assert not errors, errors
    for t, (k, cur, qd, rd, (q, r, total)) in sorted(results.items()):
        base = np.arange(N, dtype=np.float64) + t
        assert (cur, qd, rd) == (k, k, k), t
        np.testing.assert_array_equal(q, 2 * base)
        np.testing.assert_array_equal(r, (2 * base).reshape(1024, 1024).sum(axis=1))
        assert float(total) == float((2 * base).sum())


@pytest.mark.gpu
@pytest.mark.gpus(2)
def test_captured_array_of_another_device_is_a_clear_error():
    """The capture check for real (tests/python/test_captures.py has it with device 0 current):
    here the call's operands decide the device, not the current one."""
    table1 = on(1, np.arange(16, dtype=np.float64) * 1.5)

    @vectorize(["float64(int32)"])
    def lookup(i):
        return table1[i]

    idx = np.arange(32, dtype=np.int32) % 16
    with pytest.raises(ValueError, match="'table1' captured by .*lookup is on device 1, but the "
                                         "kernel runs on device 0"):
        lookup(on(0, idx))
    cuda.select_device(0)
    r = lookup(on(1, idx))                       # current device 0, operands on 1: runs on 1
    assert r.device_id == 1
    np.testing.assert_array_equal(r.copy_to_host(), idx * 1.5)


@pytest.mark.gpu
@pytest.mark.gpus(2)
def test_cupy_arrays_on_device_1():
    cp = pytest.importorskip("cupy")
    with cp.cuda.Device(1):
        x = cp.linspace(0, 1, N, dtype=cp.float32)
        s = cp.cuda.Stream(non_blocking=True)
    with cp.cuda.Device(0):
        r = hypot(x, x)                                      # current: 0, data: 1
        assert cp.cuda.runtime.getDevice() == 0, "the call moved CuPy's current device"
        assert isinstance(r, cp.ndarray) and r.device.id == 1
        total = add.reduce(x)
    with cp.cuda.Device(1), s:
        r2 = hypot(x, x)                                     # CuPy's stream of device 1
        s.synchronize()
    with cp.cuda.Device(0):
        s0 = cp.cuda.Stream(non_blocking=True)
        with s0:
            # CuPy's array interface names its current device's stream (s0, device 0) for data
            # on device 1: waited for across devices
            r3 = hypot(x, x)
            assert cp.cuda.runtime.getDevice() == 0
        s0.synchronize()
    np.testing.assert_allclose(r3.get(), np.hypot(x.get(), x.get()), rtol=1e-6)
    want = np.hypot(x.get(), x.get())
    np.testing.assert_allclose(r.get(), want, rtol=1e-6)
    np.testing.assert_allclose(r2.get(), want, rtol=1e-6)
    np.testing.assert_allclose(float(host(total)), float(x.get().astype(np.float64).sum()),
                               rtol=1e-4)


@pytest.mark.gpu
@pytest.mark.gpus(2)
def test_torch_tensors_on_cuda_1():
    torch = pytest.importorskip("torch")
    t = torch.linspace(0, 1, N, device="cuda:1", dtype=torch.float64)
    torch.cuda.set_device(0)
    r = hypot(t, t)
    assert torch.cuda.current_device() == 0, "the call moved PyTorch's current device"
    assert r.device == torch.device("cuda:1")
    s = torch.cuda.Stream(device="cuda:1")
    with torch.cuda.stream(s):
        r2 = add(t, t)
    s.synchronize()
    np.testing.assert_allclose(r.cpu().numpy(), np.hypot(t.cpu().numpy(), t.cpu().numpy()))
    np.testing.assert_array_equal(r2.cpu().numpy(), 2 * t.cpu().numpy())


@pytest.mark.gpu
@pytest.mark.gpus(2)
def test_dlpack_on_device_1():
    d = on(1, np.arange(1000, dtype=np.float32))
    assert d.__dlpack_device__() == (2, 1)
    back = cuda.from_dlpack(d)
    assert back.device_id == 1
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(d)
    assert t.device == torch.device("cuda:1")
    t2 = torch.arange(10, device="cuda:1", dtype=torch.float32)
    imported = cuda.from_dlpack(t2)
    assert imported.device_id == 1
    np.testing.assert_array_equal(host(add(imported, imported)), 2 * np.arange(10))
    with pytest.raises(Exception, match="device"):
        d.__dlpack__(dl_device=(2, 0))      # no cross-device export


@pytest.mark.gpu
@pytest.mark.gpus(2)
def test_other_device_work_leaves_the_current_context():
    """Copies, frees, synchronize and memory queries of device 1 from a thread whose current
    device is 0: the driver's current context stays device 0's (CuPy/PyTorch read it)."""
    cuda.select_device(0)
    ctx0 = current_context()
    assert context_device() == 0
    d1 = on(1, np.arange(N, dtype=np.float64))
    assert current_context() == ctx0
    d1.copy_to_host()
    d1.copy_to_device(np.zeros(N))
    assert current_context() == ctx0
    cuda.gpus[1].synchronize()
    cuda.gpus[1].get_memory_info()
    assert current_context() == ctx0
    del d1
    import gc
    gc.collect()
    assert current_context() == ctx0 and context_device() == 0
