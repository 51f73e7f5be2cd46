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
from gpu_common import add, host, rowsum, slow, sum_reduce

two_gpus = [pytest.mark.gpu, pytest.mark.gpus(2)]

N = 1 << 20


def hyp_body(a, b):
    return (a * a + b * b) ** 0.5


hypot = vectorize(["float64(float64, float64)", "float32(float32, float32)"])(hyp_body)


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


# ---- DLPack's C exchange API: tensors on any device, whatever the library's current device ----

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManaged(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManaged))
_DLManaged._fields_ = [("version", _DLVersion), ("manager_ctx", ctypes.c_void_p),
                       ("deleter", _DELETER), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]
_FROM_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                            ctypes.POINTER(ctypes.POINTER(_DLManaged)))
_TO_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_DLManaged), ctypes.POINTER(ctypes.c_void_p))
_DLT_FROM_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_DLTensor))
_STREAM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int32,
                           ctypes.POINTER(ctypes.c_void_p))


class _APIHeader(ctypes.Structure):
    _fields_ = [("version", _DLVersion), ("prev_api", ctypes.c_void_p)]


class _ExchangeAPI(ctypes.Structure):
    _fields_ = [("header", _APIHeader), ("managed_tensor_allocator", ctypes.c_void_p),
                ("managed_tensor_from_py_object_no_sync", _FROM_PY),
                ("managed_tensor_to_py_object_no_sync", _TO_PY),
                ("dltensor_from_py_object_no_sync", _DLT_FROM_PY),
                ("current_work_stream", _STREAM)]


def exchange_producer(memory, device_type, device_id, stream=0):
    """A tensor type as PyTorch's: __dlpack__ refuses (PyTorch: a tensor off its current device),
    the DLPack C exchange API (a table in a capsule, built here with ctypes) exports `memory`
    (a 1-d float64 buffer: (address, length)) on (device_type, device_id), with `stream` as the
    producer's current stream. Returns (the type, its log: exports, deletes, stream queries)."""
    log = {"exports": 0, "deleted": 0, "streams": []}
    keep = []

    def deleter(m):
        log["deleted"] += 1

    c_deleter = _DELETER(deleter)

    def from_py(obj, out):
        addr, n = memory
        shape = (ctypes.c_int64 * 1)(n)
        m = _DLManaged()
        m.version = _DLVersion(1, 1)
        m.deleter = c_deleter
        m.dl_tensor = _DLTensor(addr, _DLDevice(device_type, device_id), 1,
                                _DLDataType(2, 64, 1), shape, None, 0)   # kDLFloat, 64 bits
        keep.append((m, shape))
        out[0] = ctypes.pointer(m)
        log["exports"] += 1
        return 0

    def to_py(m, out):
        return -1

    def dlt(obj, out):
        return -1

    def current(dev_type, dev_id, out):
        log["streams"].append((dev_type, dev_id))
        out[0] = stream or None
        return 0

    api = _ExchangeAPI(_APIHeader(_DLVersion(1, 1), None), None, _FROM_PY(from_py),
                       _TO_PY(to_py), _DLT_FROM_PY(dlt), _STREAM(current))
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    name = ctypes.create_string_buffer(b"dlpack_exchange_api")
    capsule = new_capsule(ctypes.addressof(api), ctypes.addressof(name), None)

    class Producer:
        __dlpack_c_exchange_api__ = capsule
        _keep = (api, name, keep, c_deleter)

        def __dlpack__(self, stream=None, **kw):
            raise BufferError("Can't export tensors on a different CUDA device index")

        def __dlpack_device__(self):
            return (2, device_id)   # what PyTorch's tensor on a CUDA device says

    return Producer, log


def test_from_dlpack_takes_the_exchange_api_not_dlpack():
    """No GPU: cuda.from_dlpack asks the type's DLPack C exchange API, not __dlpack__ (which
    refuses, as PyTorch's does for a tensor off its current device): a host tensor is then
    refused in cufunc's words, and the producer's tensor released (its deleter ran). With the
    API turned off, __dlpack__ speaks (PyTorch's error)."""
    host = np.arange(8, dtype=np.float64)
    Producer, log = exchange_producer((host.ctypes.data, host.size), 1, 0)   # kDLCPU
    with pytest.raises(TypeError, match="CUDA device memory only"):
        cuda.from_dlpack(Producer())
    assert (log["exports"], log["deleted"]) == (1, 1)
    was = _core._interop_c_api(False)
    try:
        with pytest.raises(Exception) as e:   # PyTorch's BufferError (no GPU here: no device)
            cuda.from_dlpack(Producer())
    finally:
        _core._interop_c_api(was)
    assert log["exports"] == 1, "the exchange API was asked while turned off"
    assert "CUDA device memory only" not in str(e.value)


def test_exchange_api_switch_restores_to_on():
    """_interop_c_api(flag) answers the switch as it was, so that setting it back restores it:
    the getter's answer (whether the API is used) is False wherever PyTorch is not loaded, and
    restoring that would leave the exchange API off for every later producer."""
    was = _core._interop_c_api(False)
    try:
        assert _core._interop_c_api() is False
        assert _core._interop_c_api(False) is False
    finally:
        assert _core._interop_c_api(was) is False
    assert was is True, "the exchange API switch was left off by an earlier test"
    Producer, log = exchange_producer((0, 0), 1, 0)   # kDLCPU: refused in cufunc's words
    with pytest.raises(TypeError, match="CUDA device memory only"):
        cuda.from_dlpack(Producer())
    assert log["exports"] == 1


@pytest.mark.gpu
def test_exchange_api_tensor_read_without_dlpack():
    """One GPU: a producer whose __dlpack__ refuses is read through its exchange API, by
    cuda.from_dlpack and as a call's operand (ufunc, reduce, gufunc): values right, the producer's
    current stream asked for on the tensor's device, every export released once its view died."""
    import gc
    x = np.linspace(0.5, 4.0, 4096)
    d = cuda.to_device(x)
    s = cuda.stream()
    Producer, log = exchange_producer((d.device_ctypes_pointer.value, x.size), 2, 0,
                                      stream=int(s.handle))
    p = Producer()
    np.testing.assert_array_equal(cuda.from_dlpack(p).copy_to_host(), x)
    np.testing.assert_allclose(host(hypot(p, p)), np.hypot(x, x))
    np.testing.assert_allclose(float(host(add.reduce(p))), x.sum())
    np.testing.assert_allclose(float(sum_reduce(p)), x.sum())
    gc.collect()
    assert log["exports"] >= 4 and log["deleted"] == log["exports"]
    assert set(log["streams"]) == {(2, 0)}


@pytest.mark.gpu
@pytest.mark.gpus(2)
def test_torch_on_cuda_1_read_with_torch_current_device_0():
    """PyTorch's __dlpack__ refuses a tensor on cuda:1 while its current device is 0; cufunc reads
    it anyway (DLPack's C exchange API) in cuda.from_dlpack, a ufunc, ufunc.reduce, a gufunc,
    cuda.reduce and accumulate; PyTorch's current device stays 0."""
    torch = pytest.importorskip("torch")
    if getattr(torch.Tensor, "__dlpack_c_exchange_api__", None) is None:
        pytest.skip("this PyTorch has no DLPack C exchange API (PyTorch >= 2.10)")
    torch.cuda.set_device(0)
    t = torch.linspace(0.5, 4.0, 64 * 64, device="cuda:1", dtype=torch.float64)
    x = t.cpu().numpy()
    d = cuda.from_dlpack(t)
    assert d.device_id == 1
    np.testing.assert_array_equal(d.copy_to_host(), x)
    r = hypot(t, t)
    assert r.device == torch.device("cuda:1")
    np.testing.assert_allclose(r.cpu().numpy(), np.hypot(x, x))
    np.testing.assert_allclose(float(host(add.reduce(t))), x.sum())
    np.testing.assert_allclose(host(rowsum(t.reshape(64, 64))), x.reshape(64, 64).sum(axis=1))
    np.testing.assert_allclose(float(sum_reduce(t)), x.sum())
    np.testing.assert_allclose(host(add.accumulate(t)), np.cumsum(x))
    assert torch.cuda.current_device() == 0


# ---- Dask: CuPy chunks on every GPU, the threaded scheduler -------------------------------------

def _pointer_device(ptr):
    lib = _libcuda()
    dev = ctypes.c_int(-1)
    assert lib.cuPointerGetAttribute(ctypes.byref(dev), 9, ctypes.c_uint64(ptr)) == 0  # ORDINAL
    return dev.value


@pytest.mark.gpu
@pytest.mark.gpus(2)
def test_cupy_results_come_from_the_data_devices_pool():
    """A call on CuPy arrays of device 1 with CuPy's current device 0 (a Dask worker thread's):
    CuPy makes the result on device 1 (its pool there), and device 0's pool gets nothing."""
    cp = pytest.importorskip("cupy")
    with cp.cuda.Device(1):
        x = cp.linspace(0, 1, 1 << 22, dtype=cp.float32)
    with cp.cuda.Device(0):
        pool = cp.get_default_memory_pool()
        before = pool.total_bytes()
        r = hypot(x, x)
        assert pool.total_bytes() == before, "a result block was taken from device 0's pool"
        assert cp.cuda.runtime.getDevice() == 0
    assert r.data.device_id == 1 and r.device.id == 1
    assert _pointer_device(r.data.ptr) == 1
    np.testing.assert_allclose(r.get(), np.hypot(x.get(), x.get()), rtol=1e-6)


def _chunk_on(device, n, seed, ndim=1, dtype=np.float32):
    import cupy as cp
    with cp.cuda.Device(device):
        a = cp.random.RandomState(seed).rand(n, dtype=dtype) + 0.5
        return a.reshape(-1, 64) if ndim == 2 else a


def _dask_on_gpus(n, seed, ndim=1, dtype=np.float32):
    """A dask array of CuPy chunks, chunk k made on GPU k (one per GPU), persisted. (The dtype
    is chosen at birth: CuPy's astype would copy a chunk to CuPy's current device.)"""
    cp = pytest.importorskip("cupy")
    da = pytest.importorskip("dask.array")
    import dask
    ngpu = _core.device_count()
    shape = (n,) if ndim == 1 else (n // 64, 64)
    parts = [da.from_delayed(dask.delayed(_chunk_on)(k, n, seed + k, ndim, dtype), shape=shape,
                             dtype=dtype, meta=cp.empty((0,) * ndim, dtype=dtype))
             for k in range(ngpu)]
    return da.concatenate(parts).persist(scheduler="threads"), ngpu


def _blocks(x):
    import dask
    return dask.compute(*x.to_delayed().ravel(), scheduler="threads")


@pytest.mark.gpu
@pytest.mark.gpus(2)
def test_dask_threads_each_chunk_on_its_gpu():
    """Chunks on every GPU, Dask's threaded scheduler, worker threads whose current device is 0:
    a ufunc, a gufunc and accumulate run on each chunk's device and their results stay there (the
    memory's device, CuPy's idea of it), values as NumPy's."""
    n = 1 << 20
    x, ngpu = _dask_on_gpus(n, 1)
    y, _ = _dask_on_gpus(n, 50)
    cuda.select_device(0)
    for name, make, want in [
        ("ufunc", lambda: hypot(x, y), lambda a, b: np.hypot(a, b)),
        ("accumulate", lambda: add.accumulate(x, dtype=np.float64),
         lambda a, b: np.cumsum(a.astype(np.float64))),
    ]:
        out = _blocks(make().persist(scheduler="threads"))
        assert [o.data.device_id for o in out] == list(range(ngpu)), name
        assert [o.device.id for o in out] == list(range(ngpu)), name
        assert [_pointer_device(o.data.ptr) for o in out] == list(range(ngpu)), name
        got = np.concatenate([o.get() for o in out])
        a = np.concatenate([b.get() for b in _blocks(x)])
        b = np.concatenate([b.get() for b in _blocks(y)])
        np.testing.assert_allclose(got, want(a, b), rtol=1e-5, err_msg=name)
    m, _ = _dask_on_gpus(n, 7, ndim=2, dtype=np.float64)
    rows = _blocks(rowsum(m).persist(scheduler="threads"))
    assert [o.data.device_id for o in rows] == list(range(ngpu))
    want = np.concatenate([b.get() for b in _blocks(m)]).sum(axis=1)
    np.testing.assert_allclose(np.concatenate([o.get() for o in rows]), want, rtol=1e-10)


@pytest.mark.gpu
@pytest.mark.gpus(2)
def test_dask_threads_reductions_over_gpus():
    """ufunc.reduce and cuda.reduce over chunks on every GPU: each chunk's partial made on its
    GPU, gathered device to device, one value at the end, equal to NumPy's; axis=0 of a 2-d array
    whose row chunks live on different GPUs too."""
    n = 1 << 20
    x, ngpu = _dask_on_gpus(n, 3)
    x64, _ = _dask_on_gpus(n, 3, dtype=np.float64)
    a = np.concatenate([b.get() for b in _blocks(x)]).astype(np.float64)
    a64 = np.concatenate([b.get() for b in _blocks(x64)])
    import dask
    total, total2 = dask.compute(add.reduce(x, dtype=np.float64), sum_reduce(x64),
                                 scheduler="threads")
    np.testing.assert_allclose(float(total), a.sum(), rtol=1e-9)
    np.testing.assert_allclose(float(total2), a64.sum(), rtol=1e-9)
    m, _ = _dask_on_gpus(n, 9, ndim=2, dtype=np.float64)
    cols = add.reduce(m, axis=0).compute(scheduler="threads")
    want = np.concatenate([b.get() for b in _blocks(m)]).sum(axis=0)
    np.testing.assert_allclose(cols.get() if hasattr(cols, "get") else cols, want, rtol=1e-9)


class _OnDevice(np.ndarray):
    """A NumPy array that says it lives on a GPU (as CuPy's data.device_id does), for the Dask
    combining steps' logic without GPUs."""

    def __array_finalize__(self, obj):
        self.gpu = getattr(obj, "gpu", None)

    @property
    def data(self):
        return type("Mem", (), {"device_id": self.gpu})()


def _tagged(values, device):
    a = np.asarray(values, dtype=np.float64).view(_OnDevice)
    a.gpu = device
    return a


@pytest.fixture
def fake_moves(monkeypatch):
    """_dask's device-to-device move and device context replaced by recorders (no GPU)."""
    _dask = pytest.importorskip("cufunc._dask")
    moves, contexts = [], []

    def to_device(x, device):
        moves.append((x.gpu, device))
        return _tagged(np.asarray(x), device)

    import contextlib

    def on(device):
        contexts.append(device)
        return contextlib.nullcontext()

    monkeypatch.setattr(_dask, "_to_device", to_device)
    monkeypatch.setattr(_dask, "_on", on)
    return _dask, moves, contexts


def test_dask_combine_gathers_partials_on_one_device(fake_moves):
    """A combining task of ufunc.reduce / cuda.reduce with partials on GPUs 2, 0, 2, 3: the ones
    not on the first one's device are moved there (device to device), concatenated under that
    device, reduced once; partials on one device, or host ones, move nowhere."""
    _dask, moves, contexts = fake_moves
    parts = [_tagged([1.0], 2), _tagged([2.0], 0), _tagged([3.0], 2), _tagged([4.0], 3)]
    r = _dask._reduce_combine(np.add, parts, axis=(0,), keepdims=True)
    assert float(np.asarray(r)[0]) == 10.0
    assert moves == [(0, 2), (3, 2)] and contexts == [2]
    moves.clear(), contexts.clear()
    nested = [[_tagged([[1.0, 2.0]], 1)], [_tagged([[3.0, 4.0]], 0)]]   # 2-d, axes (0, 1)
    r = _dask._reduce_combine(np.add, nested, axis=(0, 1), keepdims=True)
    assert float(np.asarray(r).ravel()[0]) == 10.0 and moves == [(0, 1)] and contexts == [1]
    moves.clear(), contexts.clear()
    same = _dask._reduce_combine(np.add, [_tagged([1.0], 3), _tagged([5.0], 3)], axis=(0,))
    hosts = _dask._reduce_combine(np.add, [np.ones(1), np.ones(1)], axis=(0,))
    assert (float(same), float(hosts), moves, contexts) == (6.0, 2.0, [], [3, None])


def test_dask_accumulate_carry_moves_to_the_chunks_device(fake_moves):
    """cumreduction's binop: the running value moves to the device of the chunk it is added to."""
    _dask, moves, _ = fake_moves
    carry = _dask._Carry(np.add, {})
    r = carry(_tagged([10.0], 0), _tagged([1.0, 2.0], 3))
    np.testing.assert_array_equal(np.asarray(r), [11.0, 12.0])
    assert moves == [(0, 3)]
    carry(np.asarray([1.0]), _tagged([1.0], 2))          # a host value: uploaded by the call
    carry(_tagged([1.0], 2), _tagged([1.0], 2))
    assert moves == [(0, 3)]


def _example_on_workers():
    """examples/dask_multigpu.py's on_workers (the example is a script, not a package module)."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "examples"))
    try:
        from dask_multigpu import on_workers
    finally:
        sys.path.pop(0)
    return on_workers


def _full_block(k, j, n):
    return np.full(n, 10 * k + j, np.float32)


def test_on_workers_keeps_each_block_on_its_worker():
    """examples/dask_multigpu.py's on_workers: block j of worker k is made there and stays there,
    and a call on two such arrays runs where their blocks are (nothing moves between workers).
    dask.annotate around map_blocks lost this placement: Dask merged the making tasks into the
    concatenation's layer and dropped the annotation."""
    distributed = pytest.importorskip("distributed")
    on_workers = _example_on_workers()
    with distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        addrs = sorted(client.scheduler_info()["workers"])
        x, y = (on_workers(client, addrs, _full_block, lambda k, j: (k, j, 4), (4,), 2,
                           np.empty((0,), np.float32), name) for name in ("x", "y"))
        s = client.persist(x + y)
        distributed.wait(s)
        who = client.who_has(distributed.futures_of(s))
        where = [list(who[key]) for key in s.__dask_keys__()]
        assert where == [[a] for a in addrs for _ in range(2)]
        assert set(client.has_what()) == set(addrs)
        moved = client.run(lambda dask_worker: dask_worker.state.transfer_incoming_count_total)
        assert set(moved.values()) == {0}
        np.testing.assert_array_equal(s.compute(), 2 * np.repeat([0, 1, 10, 11, 20, 21], 4))


def _chunk_of_worker(k, j, n):
    """Block j of worker k, made on GPU k (the workers of one process all see every GPU)."""
    return _chunk_on(k, n, 100 * k + j, dtype=np.float64)


def _chunk_device(block):
    return np.array([block.data.device_id], dtype=np.int64)


@pytest.mark.gpu
@pytest.mark.gpus(2)
def test_distributed_workers_in_one_process_keep_each_chunk_on_its_gpu():
    """dask.distributed with its workers as threads of one process (LocalCluster(processes=False),
    docs/multigpu.md), worker k's chunks made on GPU k: a ufunc, a gufunc after a reshape and the
    reductions run on each chunk's GPU and their results stay there; a reduction's partials pass
    between the workers and meet on one GPU; the values are NumPy's."""
    distributed = pytest.importorskip("distributed")
    cp = pytest.importorskip("cupy")
    import dask
    on_workers = _example_on_workers()
    ngpu, n = _core.device_count(), 1 << 16
    with distributed.LocalCluster(n_workers=ngpu, threads_per_worker=1, processes=False,
                                  dashboard_address=None, memory_limit=0) as cluster, \
            distributed.Client(cluster) as client:
        addrs = sorted(client.scheduler_info()["workers"])
        x, y = client.persist([on_workers(client, addrs, _chunk_of_worker,
                                          lambda k, j, s=s: (k, j + s, n), (n,), 2,
                                          cp.empty((0,), cp.float64), name)
                               for s, name in ((0, "x"), (10, "y"))])
        distributed.wait([x, y])
        h = hypot(x, y)
        rows = rowsum(h.reshape(-1, 64))
        one = np.empty((0,), np.int64)
        devices, got_h, got_rows, total, total_r = dask.compute(
            h.map_blocks(_chunk_device, chunks=((1,) * h.numblocks[0],), dtype=np.int64,
                         meta=one),
            h.map_blocks(host, dtype=np.float64, meta=np.empty((0,), np.float64)),
            rows.map_blocks(host, dtype=np.float64, meta=np.empty((0,), np.float64)),
            add.reduce(h, dtype=np.float64), sum_reduce(h))
        a, b = (np.concatenate([host(c) for c in dask.compute(*v.to_delayed().ravel())])
                for v in (x, y))
    assert list(devices) == [k for k in range(ngpu) for _ in range(2)]
    want = np.hypot(a, b)
    np.testing.assert_allclose(got_h, want, rtol=1e-12)
    np.testing.assert_allclose(got_rows, want.reshape(-1, 64).sum(axis=1), rtol=1e-12)
    for got in (total, total_r):
        assert float(host(got)) == pytest.approx(want.sum(), rel=1e-10)


@pytest.mark.gpu
@pytest.mark.gpus(2)
def test_distributed_one_worker_per_gpu(capsys):
    """dask.distributed without dask-cuda, one worker process per GPU (CUDA_VISIBLE_DEVICES per
    worker: examples/dask_multigpu.py's cluster): every block computed on its worker's GPU and
    kept a CuPy array there, reductions combined across the workers, values as NumPy's."""
    pytest.importorskip("distributed")
    pytest.importorskip("cupy")
    here = os.path.dirname(os.path.abspath(__file__))
    # on the path while the workers start: they import the example's functions by name
    sys.path.insert(0, os.path.join(here, "..", "..", "examples"))
    try:
        import dask_multigpu
        rc = dask_multigpu.main(["--rows", "8192", "--no-dask-cuda"])
    finally:
        sys.path.pop(0)
    out = capsys.readouterr().out
    assert rc == 0, out
    n = _core.device_count()
    assert "blocks per GPU: %s" % {g: 2 for g in range(n)} in out, out
