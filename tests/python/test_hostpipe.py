"""Host-array ufunc calls streamed through overlapped chunks (src/hostpipe.c), against NumPy.

A fixture forces tiny chunks (1 KiB of the largest operand) and no size threshold, so small arrays
cross many chunk boundaries; `_core._hostpipe_last()` shows that a call went through the pipeline
(its `calls` count moves), in how many chunks and on how many streams. Layouts: 1-d, C, F,
strided, negative strides, broadcast, permuted; mixed dtypes (converted in the kernel); several
outputs; out= host arrays of any layout (in place, non-contiguous, overlapping: the whole-array
path); where=; Python scalars; lists; zero-size; stream=. Errors: a failure injected with chunks in
flight, a kernel that does not compile, and device memory running out while the pipeline sets up;
each leaves the process usable and no device memory behind. Speed is for bench/bench_vectorize.py.
"""
import math
import threading

import numpy as np
import pytest

from cufunc import _core, cuda, vectorize
from cufunc.errors import CompileError, CudaAPIError

gpu = pytest.mark.gpu

CHUNK_KB = 1


@vectorize(["float32(float32, float32)", "float64(float64, float64)"])
def hypot(x, y):
    return math.sqrt(x * x + y * y)


@vectorize(["float32(float32, float32)", "float64(float64, float64)", "int64(int64, int64)"])
def muladd(x, y):
    return x * y + x


@vectorize(["Tuple(float64, float64)(float64, float64)",
            "Tuple(float32, float32)(float32, float32)"])
def sumdiff(x, y):
    return x + y, x - y


@pytest.fixture
def tiny_chunks():
    """1 KiB chunks, 3 streams, every call pipelined; the settings restored after."""
    before = _core._hostpipe_config()
    _core._hostpipe_config(chunk_kb=CHUNK_KB, streams=3, min_kb=0)
    try:
        yield
    finally:
        _core._hostpipe_fail_at(-1)
        _core._hostpipe_config(**before)


def calls():
    return _core._hostpipe_last()["calls"]


def pipelined(fn):
    """Run fn(); check it went through the pipeline; return (result, the pipeline's info)."""
    n = calls()
    r = fn()
    info = _core._hostpipe_last()
    assert info["calls"] == n + 1, "the call did not take the pipelined path"
    return r, info


def rand(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        return rng.integers(-50, 50, size=shape).astype(dt)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    return (rng.random(shape) * 10 - 5).astype(dt)


def check_hypot(got, a, b):
    want = np.hypot(np.asarray(a, got.dtype), np.asarray(b, got.dtype))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-6 if got.dtype == np.float32 else 1e-14)


# ---- sizes around chunk boundaries -------------------------------------------------------------

@gpu
@pytest.mark.parametrize("n", [1, 255, 256, 257, 511, 512, 513, 7 * 256 + 1, 10000, 100003])
def test_sizes_around_chunk_boundaries(tiny_chunks, n):
    a, b = rand(n, np.float32, 1), rand(n, np.float32, 2)
    r, info = pipelined(lambda: hypot(a, b))
    assert isinstance(r, np.ndarray) and r.dtype == np.float32
    check_hypot(r, a, b)
    per_chunk = CHUNK_KB * 1024 // 4
    assert info["chunks"] == -(-n // per_chunk)
    assert info["streams"] == min(3, info["chunks"])
    assert info["split_axis"] == 0 and info["rows"] == min(per_chunk, n)


@gpu
def test_counter_shows_several_chunks_on_several_streams(tiny_chunks):
    a, b = rand(50000, np.float32, 3), rand(50000, np.float32, 4)
    r, info = pipelined(lambda: hypot(a, b))
    check_hypot(r, a, b)
    assert info["chunks"] > 1
    assert info["streams"] >= 2
    assert info["streamed"] == 3 and info["resident"] == 0
    assert info["chunk_bytes"] == CHUNK_KB * 1024


# ---- layouts -----------------------------------------------------------------------------------

def _layouts():
    base = rand((70, 90), np.float64, 5)
    other = rand((70, 90), np.float64, 6)
    big = rand((140, 180), np.float64, 7)
    cube = rand((6, 7, 8), np.float64, 8)
    return {
        "C": (base, other),
        "F": (np.asfortranarray(base), other),
        "both F": (np.asfortranarray(base), np.asfortranarray(other)),
        "strided": (big[::2, ::2], other),
        "negative strides": (big[::-2, ::-2], big[1::2, ::-2]),
        "transposed": (rand((90, 70), np.float64, 9).T, other),
        "broadcast row": (base, other[0]),
        "broadcast column": (base[:, :1], other),
        "row and column": (base[:, :1], other[:1, :]),
        "3-d permuted": (cube.transpose(2, 0, 1), rand((8, 6, 7), np.float64, 10)),
        "3-d with broadcast middle": (cube[:, :1, :], rand((6, 7, 8), np.float64, 11)[::-1]),
        "1-d against 2-d": (rand(90, np.float64, 12)[::-1], base),
    }


@gpu
@pytest.mark.parametrize("name", list(_layouts()))
def test_layouts(tiny_chunks, name):
    a, b = _layouts()[name]
    r, info = pipelined(lambda: hypot(a, b))
    check_hypot(r, a, b)
    assert r.flags.c_contiguous
    assert info["chunks"] > 1


@gpu
def test_broadcast_input_is_uploaded_once(tiny_chunks):
    a = rand((200, 100), np.float32, 13)
    row = rand(100, np.float32, 14)
    r, info = pipelined(lambda: hypot(a, row))
    check_hypot(r, a, row)
    assert info["resident"] == 1 and info["streamed"] == 2 and info["chunks"] > 1


@gpu
def test_outer(tiny_chunks):
    a, b = rand(300, np.float64, 15), rand(200, np.float64, 16)
    r, _ = pipelined(lambda: hypot.outer(a, b))
    np.testing.assert_allclose(r, np.hypot.outer(a, b), rtol=1e-14)


# ---- dtypes, outputs, scalars --------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("ta,tb,loop", [
    ("int16", "float32", "float32"),    # int16 reaches float32 safely
    ("int32", "float32", "float64"),    # int32 needs float64
    ("uint8", "float64", "float64"),
    ("int64", "int64", "int64"),
    ("bool", "float32", "float32"),
])
def test_mixed_dtypes_convert_in_the_kernel(tiny_chunks, ta, tb, loop):
    a, b = rand((50, 60), ta, 17), rand((50, 60), tb, 18)[::-1]
    r, _ = pipelined(lambda: muladd(a, b))
    assert r.dtype == np.dtype(loop)
    x, y = a.astype(loop), b.astype(loop)
    np.testing.assert_allclose(r, x * y + x, rtol=1e-6)


@gpu
def test_several_outputs(tiny_chunks):
    a, b = rand((40, 70), np.float64, 19), np.asfortranarray(rand((40, 70), np.float64, 20))
    (s, d), info = pipelined(lambda: sumdiff(a, b))
    np.testing.assert_array_equal(s, a + b)
    np.testing.assert_array_equal(d, a - b)
    assert info["streamed"] == 4


@gpu
def test_several_outputs_into_given_arrays(tiny_chunks):
    a, b = rand(3000, np.float32, 21), rand(3000, np.float32, 22)
    o1 = np.zeros(6000, np.float32)[::2]
    o2 = np.zeros(3000, np.float64)            # the kernel stores float32 results as float64
    res, _ = pipelined(lambda: sumdiff(a, b, out=(o1, o2)))
    assert res[0] is o1 and res[1] is o2
    np.testing.assert_array_equal(o1, a + b)
    np.testing.assert_array_equal(o2, (a - b).astype(np.float64))


@gpu
def test_python_scalars_beside_arrays(tiny_chunks):
    a = rand(5000, np.float32, 23)
    r, _ = pipelined(lambda: hypot(a, 2.0))
    assert r.dtype == np.float32                # NEP 50: the Python float is weak
    check_hypot(r, a, np.float32(2.0))
    r, _ = pipelined(lambda: muladd(3, a[::-1]))
    np.testing.assert_allclose(r, np.float32(3) * a[::-1] + np.float32(3), rtol=1e-6)


@gpu
def test_list_input(tiny_chunks):
    lst = [float(i) / 7 for i in range(3000)]
    b = rand(3000, np.float32, 24)
    r, _ = pipelined(lambda: hypot(lst, b))
    assert r.dtype == np.float64                # the list is float64, like np.asarray(lst)
    check_hypot(r, np.asarray(lst), b)


@gpu
def test_zero_size(tiny_chunks):
    a = np.empty((0, 5), np.float32)
    r = hypot(a, a)
    assert r.shape == (0, 5) and r.dtype == np.float32
    r = hypot(np.empty(0, np.float64), 1.0)
    assert r.shape == (0,)


# ---- out= ----------------------------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("layout", ["C", "F", "strided", "reversed", "float64 out"])
def test_out_host_arrays_of_any_layout(tiny_chunks, layout):
    a, b = rand((60, 80), np.float32, 25), rand((60, 80), np.float32, 26)
    if layout == "C":
        out = np.zeros((60, 80), np.float32)
    elif layout == "F":
        out = np.zeros((60, 80), np.float32, order="F")
    elif layout == "strided":
        out = np.zeros((120, 240), np.float32)[::2, ::3]
    elif layout == "reversed":
        out = np.zeros((60, 80), np.float32)[::-1, ::-1]
    else:
        out = np.zeros((60, 80), np.float64)
    r, _ = pipelined(lambda: hypot(a, b, out=out))
    assert r is out
    np.testing.assert_allclose(out, np.hypot(a, b).astype(out.dtype), rtol=2e-6)


@gpu
def test_out_in_place(tiny_chunks):
    a, b = rand((60, 80), np.float64, 27), rand((60, 80), np.float64, 28)
    want = np.hypot(a, b)
    r, _ = pipelined(lambda: hypot(a, b, out=a))
    assert r is a
    np.testing.assert_allclose(a, want, rtol=1e-14)


@gpu
def test_out_overlapping_an_input_takes_the_whole_array_path(tiny_chunks):
    a, b = rand(5000, np.float64, 29), rand(5000, np.float64, 30)
    want = np.hypot(a, b)[::-1]
    n = calls()
    hypot(a, b, out=a[::-1])                    # NumPy reads every input before writing
    assert calls() == n
    np.testing.assert_allclose(a, want, rtol=1e-14)


@gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layouts_beyond_the_kernels_axes_take_the_whole_array_path(tiny_chunks, dtype):
    _core._hostpipe_config(chunk_kb=1024)
    a = rand((2,) * 12, dtype, 52).transpose(*range(11, -1, -1))   # 12 axes, none mergeable
    b = rand((2,) * 12, dtype, 53)
    n = calls()
    r = hypot(a, b)
    assert calls() == n and r.dtype == dtype
    check_hypot(r, a, b)
    mask = rand((2,) * 12, bool, 54)
    r = hypot(a, b, where=mask)                 # a new output under a mask, after the refusal
    assert calls() == n and r.dtype == dtype
    np.testing.assert_allclose(r[mask], np.hypot(a, b)[mask], rtol=2e-6)


# ---- where= --------------------------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("mask_layout", ["same", "strided", "broadcast row"])
def test_where_keeps_masked_elements(tiny_chunks, mask_layout):
    a, b = rand((50, 64), np.float32, 31), rand((50, 64), np.float32, 32)
    if mask_layout == "same":
        mask = rand((50, 64), bool, 33)
    elif mask_layout == "strided":
        mask = rand((100, 128), bool, 34)[::2, ::2]
    else:
        mask = rand(64, bool, 35)
    out = np.full((50, 64), -7.0, np.float32)
    r, _ = pipelined(lambda: hypot(a, b, out=out, where=mask))
    assert r is out
    m = np.broadcast_to(mask, out.shape)
    np.testing.assert_allclose(out[m], np.hypot(a, b)[m], rtol=2e-6)
    assert (out[~m] == -7.0).all()


@gpu
def test_where_with_a_new_output(tiny_chunks):
    a, b = rand(4000, np.float64, 36), rand(4000, np.float64, 37)
    mask = rand(4000, bool, 38)
    r, _ = pipelined(lambda: hypot(a, b, where=mask))
    np.testing.assert_allclose(r[mask], np.hypot(a, b)[mask], rtol=1e-14)


@gpu
def test_where_false_writes_nothing(tiny_chunks):
    a = rand(3000, np.float64, 39)
    out = np.full(3000, 5.0)
    hypot(a, a, out=out, where=False)
    assert (out == 5.0).all()


# ---- streams and threads -------------------------------------------------------------------------

@gpu
def test_stream_orders_after_earlier_work(tiny_chunks):
    _core._hostpipe_config(chunk_kb=256)
    n = 1 << 22
    s = cuda.stream()
    src = rand(n, np.float32, 40)
    d = cuda.to_device(src)
    h = cuda.pinned_array(n, np.float32)
    h[:] = 0
    d.copy_to_host(h, stream=s)                 # asynchronous into pinned memory
    b = rand(n, np.float32, 41)
    r, info = pipelined(lambda: hypot(h, b, stream=s))
    check_hypot(r, src, b)
    assert info["chunks"] > 1


@gpu
def test_two_threads(tiny_chunks):
    a, b = rand(20000, np.float64, 42), rand(20000, np.float64, 43)
    want = np.hypot(a, b)
    results, errors = [None] * 4, []

    def work(i):
        try:
            results[i] = hypot(a[::-1] if i % 2 else a, b[::-1] if i % 2 else b)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    for i, r in enumerate(results):
        np.testing.assert_allclose(r, want[::-1] if i % 2 else want, rtol=1e-14)


@gpu
def test_default_settings_pipeline_a_large_call():
    _core._hostpipe_config(reset=True)
    cfg = _core._hostpipe_config()
    assert cfg["streams"] >= 2
    # over the threshold with the inputs alone, and over two chunks (min_kb is 0 by default;
    # chunk_kb 0 is automatic, at most CF_HOSTPIPE_AUTO_CHUNK, 8 MiB)
    chunk = cfg["chunk_kb"] * 1024 or 8 << 20
    n = max(cfg["min_kb"] * 1024 // 8, 3 * chunk // 4) + 1000
    a, b = rand(n, np.float32, 44), rand(n, np.float32, 45)
    r, info = pipelined(lambda: hypot(a, b))
    check_hypot(r, a, b)
    assert info["chunks"] >= 2 and info["streams"] >= 2
    small = rand(1000, np.float32, 46)
    r, info = pipelined(lambda: hypot(small, small))  # small calls too, in one chunk
    check_hypot(r, small, small)
    assert info["chunks"] == 1 and info["streams"] == 1
    _core._hostpipe_config(min_kb=4096)        # the knob still gives the old split
    try:
        before = calls()
        check_hypot(hypot(small, small), small, small)
        assert calls() == before
    finally:
        _core._hostpipe_config(reset=True)


# ---- errors leave the process usable -------------------------------------------------------------

@gpu
def test_failure_with_chunks_in_flight(tiny_chunks):
    a, b = rand(40000, np.float32, 47), rand(40000, np.float32, 48)
    check_hypot(hypot(a, b), a, b)
    before = _core.mem_outstanding()
    _core._hostpipe_fail_at(7)
    with pytest.raises(CudaAPIError, match="injected failure before chunk 7"):
        hypot(a, b)
    _core._hostpipe_fail_at(-1)
    assert _core.mem_outstanding() == before
    r, info = pipelined(lambda: hypot(a, b))
    check_hypot(r, a, b)
    assert info["chunks"] > 7


@gpu
def test_kernel_that_does_not_compile(tiny_chunks):
    u = _core.UFunc("broken", 2, 1)
    u.add_loop((np.float32, np.float32, np.float32),
               "__device__ float broken(float a, float b) { return a +; }\n", "broken")
    a = rand(5000, np.float32, 49)
    before = _core.mem_outstanding()
    with pytest.raises(CompileError):
        u(a, a)
    assert _core.mem_outstanding() == before
    r, _ = pipelined(lambda: hypot(a, a))
    check_hypot(r, a, a)


@gpu
@pytest.mark.exclusive  # fills the whole card: other processes on the GPU would run out too
def test_device_memory_running_out_while_setting_up(tmp_path):
    """Fill the device, give 256 MiB back, and ask for three slots of 3 x 40 MiB: two fit, the
    third's buffer cannot be had. MemoryError, the first two slots' buffers back in the pool; with
    the memory free again, the same call works. In a child process: a card filled to the last
    megabyte by this process would leave the tests after it (and their child processes, which
    need memory for a context of their own) without memory."""
    import os
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    code = ("import sys; sys.path.insert(0, %r); import test_hostpipe as t; "
            "t._memory_running_out(); print('CHILD OK')" % here)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, CUFUNC_CACHE_DIR=str(tmp_path)))
    assert p.returncode == 0 and "CHILD OK" in p.stdout, (p.stdout + p.stderr)[-4000:]


def _memory_running_out():
    before_cfg = _core._hostpipe_config()
    _core._hostpipe_config(chunk_kb=40 * 1024, streams=3, min_kb=0)
    n = 3 * 40 * (1 << 20) // 4                 # three 40 MiB chunks per operand
    a, b = rand(n, np.float32, 50), rand(n, np.float32, 51)
    total = cuda.get_current_device().total_memory
    fillers = []
    try:
        r, info = pipelined(lambda: hypot(a, b))   # the kernel loaded, the pinned buffers made
        check_hypot(r, a, b)
        assert info["chunks"] == 3 and info["streams"] == 3
        before = _core.mem_outstanding()
        for size in (1 << 30, 1 << 28, 1 << 24):
            while True:
                try:
                    fillers.append(cuda.device_array(size, np.uint8))
                except MemoryError:
                    break
        # under 16 MiB is left: make it 256 MiB more
        quarter = [i for i, f in enumerate(fillers) if f.size == 1 << 28]
        if quarter:
            del fillers[quarter[-1]]
        else:
            del fillers[[i for i, f in enumerate(fillers) if f.size == 1 << 30][-1]]
            fillers += [cuda.device_array(1 << 28, np.uint8) for _ in range(3)]
        with pytest.raises(MemoryError):
            hypot(a, b)
        assert _core.mem_outstanding() == before + sum(f.size for f in fillers)
        fillers.clear()
        assert _core.mem_outstanding() == before
        r, _ = pipelined(lambda: hypot(a, b))
        check_hypot(r, a, b)
    finally:
        fillers.clear()
        _core._hostpipe_config(**before_cfg)
        # The pool keeps what it reserved (all of the card by now) for reuse; an allocation larger
        # than the card makes it hand the unused part back, so later module loads find memory.
        with pytest.raises(MemoryError):
            cuda.device_array(2 * total, np.uint8)


def test_config_is_checked():
    before = _core._hostpipe_config()
    try:
        with pytest.raises(ValueError, match="streams"):
            _core._hostpipe_config(streams=1)
        with pytest.raises(ValueError, match="chunk"):
            _core._hostpipe_config(chunk_kb=1 << 21)
        assert _core._hostpipe_config() == before
        assert _core._hostpipe_config(chunk_kb=64, streams=4)["streams"] == 4
    finally:
        _core._hostpipe_config(**before)
    info = _core._hostpipe_last()
    assert set(info) == {"calls", "chunks", "streams", "split_axis", "rows", "streamed",
                         "resident", "chunk_bytes", "direct", "registered", "register_failed", "phases_us"}
