"""Numba's memory API in cufunc: pinned, mapped, managed memory,
defer_cleanup, events, DeviceNDArray view / split / squeeze / copy_to_host(ary) / __setitem__ /
__len__ / get_ipc_handle and open_ipc_array. Argument checks run without a GPU; the rest is marked
gpu."""

import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from cufunc import cuda, guvectorize, vectorize
from cufunc import _env

N = 1 << 22


@vectorize(["float32(float32)", "float64(float64)", "int32(int32)"])
def twice(x):
    return x * 2


@vectorize(["float32(float32)"])
def slow_twice(x):
    # a long producer: a missing wait shows up as wrong values
    y = x
    for _ in range(2000):
        y = y * 1.0000001 + 0.0
    return x * 2 + (y - y)


@guvectorize(["void(float32[:], float32[:])"], "(n)->()")
def row_sum(x, res):
    acc = 0.0
    for i in range(x.shape[0]):
        acc += x[i]
    res[0] = acc


# ---- argument checks (no GPU) -------------------------------------------------------------------

BAD_CALLS = [
    (lambda: cuda.pinned(1).__enter__(), TypeError, "expected NumPy arrays"),
    (lambda: cuda.pinned(np.ones(3), [1, 2]).__enter__(), TypeError, "expected NumPy arrays"),
    (lambda: cuda.mapped(np.ones(3), bogus=1).__enter__(), TypeError, "bogus"),
    (lambda: cuda.mapped(np.ones(3), stream="x").__enter__(), TypeError, "stream"),
    (lambda: cuda.event_elapsed_time(1, 2), TypeError, "evtstart must be an Event"),
    (lambda: cuda.mapped_array(10, strides=(8,)), NotImplementedError, "strides"),
    (lambda: cuda.managed_array(10, strides=(8,)), NotImplementedError, "strides"),
    (lambda: cuda.mapped_array(-1), ValueError, "negative"),
    (lambda: cuda.managed_array((2, -3)), ValueError, "negative"),
    (lambda: cuda.mapped_array(4, dtype=object), TypeError, "not supported"),
    (lambda: cuda.open_ipc_array(b"12", 3, np.float32).__enter__(), ValueError, "64 bytes"),
    (lambda: cuda.event(timing=True, bogus=1), TypeError, "keyword"),
]


@pytest.mark.parametrize("call,exc,match", BAD_CALLS, ids=range(len(BAD_CALLS)))
def test_argument_checks_need_no_gpu(call, exc, match):
    if _env.core is None:
        pytest.skip("needs cufunc's C extension")
    with pytest.raises(exc, match=match):
        call()


def test_ipc_handle_pickles_and_refuses_its_own_process():
    from cufunc._devarray import IpcArrayHandle
    h = IpcArrayHandle(bytes(range(64)), 16, 4096, (10,), (4,), np.float32, 0, os.getpid())
    h2 = pickle.loads(pickle.dumps(h))
    assert (h2.handle, h2.offset, h2.shape, h2.strides, h2.dtype) == \
        (h.handle, 16, (10,), (4,), np.dtype(np.float32))
    with pytest.raises(ValueError, match="exported by this process"):
        h2.open()
    h2.close()  # closing what was never opened is a no-op


def test_names_exist_as_in_numba():
    for name in ("pinned", "mapped", "mapped_array", "mapped_array_like", "managed_array",
                 "defer_cleanup", "event", "event_elapsed_time", "open_ipc_array",
                 "pinned_array", "pinned_array_like"):
        assert callable(getattr(cuda, name)), name
    if _env.core is not None:
        for meth in ("view", "split", "squeeze", "get_ipc_handle", "copy_to_host",
                     "copy_to_device", "__setitem__", "__len__", "reshape", "ravel"):
            assert hasattr(cuda.DeviceNDArray, meth), meth
        for meth in ("record", "synchronize", "wait", "query", "elapsed_time"):
            assert hasattr(cuda.Event, meth), meth


# ---- pinned -------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_pinned_registers_for_the_block_only():
    from cufunc import _core
    a = np.arange(N, dtype=np.float32)
    b = np.arange(1000, dtype=np.int64)[::3]     # strided: its span is registered
    assert not _core.host_is_pinned(a)
    with cuda.pinned(a, b):
        assert _core.host_is_pinned(a) and _core.host_is_pinned(b)
        d = cuda.to_device(a)
        np.testing.assert_array_equal(d.copy_to_host(), a)
        np.testing.assert_array_equal(twice(a), a * 2)      # host-array ufunc call on pinned
        out = np.empty_like(a)
        d.copy_to_host(out)
        np.testing.assert_array_equal(out, a)
    assert not _core.host_is_pinned(a) and not _core.host_is_pinned(b)


@pytest.mark.gpu
def test_pinned_unregisters_on_exceptions_and_leaves_pinned_arrays_alone():
    from cufunc import _core
    a = np.ones(4096, np.float64)
    with pytest.raises(RuntimeError, match="boom"):
        with cuda.pinned(a):
            assert _core.host_is_pinned(a)
            raise RuntimeError("boom")
    assert not _core.host_is_pinned(a)
    p = cuda.pinned_array(1000, np.float32)
    with cuda.pinned(p):              # already page-locked: nothing to register or unregister
        pass
    assert _core.host_is_pinned(p)
    with cuda.pinned(a):
        with cuda.pinned(a):          # nested: the inner block leaves the outer's registration
            pass
        assert _core.host_is_pinned(a)
    assert not _core.host_is_pinned(a)


@pytest.mark.gpu
def test_pinned_async_copy_into_pinned_host_array():
    s = cuda.stream()
    a = np.random.default_rng(0).random(N).astype(np.float32)
    out = np.zeros_like(a)
    with cuda.pinned(a, out):
        d = cuda.to_device(a, stream=s)
        r = slow_twice(d, stream=s)
        r.copy_to_host(out, stream=s)
        s.synchronize()
    np.testing.assert_array_equal(out, a * 2)


# ---- mapped and managed -------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_mapped_array_is_used_in_place(dtype, order):
    m = cuda.mapped_array((512, 300), dtype=dtype, order=order)
    assert isinstance(m, np.ndarray) and isinstance(m, cuda.MappedNDArray)
    assert m.shape == (512, 300) and m.dtype == dtype
    assert m.flags.f_contiguous if order == "F" else m.flags.c_contiguous
    assert cuda.is_cuda_array(m)
    m[...] = np.arange(m.size, dtype=dtype).reshape(m.shape) % 1000
    out = cuda.mapped_array_like(m)
    assert isinstance(out, cuda.MappedNDArray) and out.shape == m.shape
    twice(m, out=out)                  # the kernel reads m and writes out in place, no copy
    cuda.synchronize()
    np.testing.assert_array_equal(out, (m * 2).astype(dtype))
    assert not cuda.is_cuda_array(m * 2)   # NumPy's result: new pageable memory, host data
    np.testing.assert_array_equal(twice(m * 2), (m * 4).astype(dtype))
    assert isinstance(twice(m * 2), np.ndarray)
    r = twice(m[::2, 1:])              # views of mapped memory are mapped too
    assert isinstance(r, cuda.DeviceNDArray)
    np.testing.assert_array_equal(r.copy_to_host(), (m[::2, 1:] * 2).astype(dtype))


class _AskedMapped(cuda.MappedNDArray):
    """A mapped array whose device view is refused, recording that the call asked for it."""
    asked = 0

    @property
    def __cuda_array_interface__(self):
        type(self).asked += 1
        raise AttributeError("not mapped")


def test_mapped_array_inputs_are_asked_for_their_device_view_without_a_gpu():
    # mapped and managed arrays are NumPy subclasses: the call asks each for its device view (so a
    # mapped input is a device operand, with a DeviceArray result as in Numba); a plain ndarray is
    # not asked. An empty call runs on the host without a GPU.
    if _env.core is None:
        pytest.skip("needs cufunc's C extension")
    m = np.zeros(0, np.float32).view(_AskedMapped)
    _AskedMapped.asked = 0
    r = twice(m)
    assert _AskedMapped.asked >= 1
    assert type(r) is np.ndarray and r.shape == (0,) and r.dtype == np.float32


@pytest.mark.gpu
def test_mapped_array_in_gufuncs_and_reductions():
    m = cuda.mapped_array((100, 64), np.float32)
    m[...] = np.random.default_rng(1).random(m.shape)
    res = cuda.mapped_array(100, np.float32)
    row_sum(m, out=res)
    cuda.synchronize()
    np.testing.assert_allclose(res, m.sum(axis=1), rtol=1e-5)
    total = cuda.reduce(lambda a, b: a + b)
    np.testing.assert_allclose(total(m.ravel()), m.sum(), rtol=1e-4)


@pytest.mark.gpu
def test_mapped_context_manager_yields_device_views_of_the_host_arrays():
    a = np.arange(N, dtype=np.float32)
    b = np.zeros(N, np.float32)
    with cuda.mapped(a, b) as (da, db):
        assert isinstance(da, cuda.DeviceNDArray) and da.shape == a.shape
        slow_twice(da, out=db)
        cuda.synchronize()
        np.testing.assert_array_equal(b, a * 2)   # written in place, in host memory
    with cuda.mapped(a) as da:                    # one array: the array, not a list
        assert isinstance(da, cuda.DeviceNDArray)
    from cufunc import _core
    assert not _core.host_is_pinned(a)


@pytest.mark.gpu
def test_managed_array_host_and_device():
    m = cuda.managed_array((1000, 1000), np.float32)
    assert isinstance(m, np.ndarray) and isinstance(m, cuda.ManagedNDArray)
    m[...] = 1.5
    out = cuda.managed_array((1000, 1000), np.float32, attach_global=True)
    twice(m, out=out)
    cuda.synchronize()
    assert (out == 3.0).all()
    r = twice(m)
    np.testing.assert_array_equal(r.copy_to_host(), np.full((1000, 1000), 3.0, np.float32))


@pytest.mark.gpu
def test_managed_array_larger_than_free_memory_is_refused_up_front():
    free, total = cuda.current_context().get_memory_info()
    with pytest.raises(MemoryError, match="cannot allocate"):
        cuda.managed_array(free // 8 + (1 << 28), np.float64)
    # the device is still usable
    np.testing.assert_array_equal(twice(np.arange(10.0)), np.arange(10.0) * 2)


# ---- defer_cleanup ------------------------------------------------------------------------------

@pytest.mark.gpu
def test_defer_cleanup_holds_frees_until_the_outermost_block_ends():
    from cufunc import _core
    start = _core.mem_outstanding()
    with cuda.defer_cleanup():
        with cuda.defer_cleanup():
            d = cuda.device_array(1 << 20, np.float32)
            del d
            assert _core.mem_outstanding() - start >= 4 << 20
        assert _core.defer_cleanup_count() == (1, 1)
        assert _core.mem_outstanding() - start >= 4 << 20    # the inner end frees nothing
    assert _core.defer_cleanup_count() == (0, 0)
    assert _core.mem_outstanding() == start
    with pytest.raises(ZeroDivisionError):
        with cuda.defer_cleanup():
            e = cuda.device_array(100)
            del e
            1 / 0
    assert _core.mem_outstanding() == start and _core.defer_cleanup_count() == (0, 0)


# ---- events -------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_events_time_and_order_work():
    s = cuda.stream()
    x = cuda.to_device(np.ones(N, np.float32), stream=s)
    start, end = cuda.event(), cuda.event(timing=True)
    start.record(stream=s)
    y = slow_twice(x, stream=s)
    end.record(s)
    end.synchronize()
    assert start.query() and end.query()
    t = start.elapsed_time(end)
    assert isinstance(t, float) and t > 0
    assert cuda.event_elapsed_time(start, end) == t
    # wait: work on another stream after the event sees the producer's results
    s2 = cuda.stream()
    end.wait(stream=s2)
    np.testing.assert_array_equal(y.copy_to_host(stream=s2), np.full(N, 2, np.float32))
    e0 = cuda.event()
    e0.record()          # default stream
    e0.wait()
    e0.synchronize()


@pytest.mark.gpu
def test_event_errors():
    a, b = cuda.event(timing=False), cuda.event(timing=False)
    a.record()
    b.record()
    b.synchronize()
    with pytest.raises(ValueError, match="timing=True"):
        a.elapsed_time(b)
    c, d = cuda.event(), cuda.event()
    with pytest.raises(ValueError, match="recorded"):
        c.elapsed_time(d)
    with pytest.raises(TypeError, match="evtend"):
        c.elapsed_time(3)
    with pytest.raises(TypeError):
        c.record(stream="nope")
    assert cuda.event().query()   # never recorded: nothing to wait for


# ---- DeviceNDArray API --------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("src_dtype,shape,dst_dtype,new_shape", [
    (np.float32, (4, 6), np.int32, (4, 6)),
    (np.float64, (3, 4), np.float32, (3, 8)),
    (np.int8, (2, 8), np.int64, (2, 1)),
    (np.complex128, (5,), np.float64, (10,)),
    (np.uint16, (), np.int16, ()),
])
def test_view_reinterprets_without_copy(src_dtype, shape, dst_dtype, new_shape):
    h = (np.arange(int(np.prod(shape))) + 1).astype(src_dtype).reshape(shape)
    d = cuda.to_device(h)
    v = d.view(dst_dtype)
    assert v.shape == new_shape and v.dtype == np.dtype(dst_dtype)
    assert v.ptr == d.ptr
    np.testing.assert_array_equal(v.copy_to_host(), h.view(dst_dtype))


@pytest.mark.gpu
def test_view_errors_as_numba():
    d = cuda.to_device(np.zeros((4, 6), np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        d[:, ::2].view(np.float64)
    with pytest.raises(ValueError, match="divisor"):
        cuda.to_device(np.zeros((4, 3), np.float32)).view(np.float64)
    with pytest.raises(TypeError):
        d.view("not a dtype")


@pytest.mark.gpu
@pytest.mark.parametrize("n,section", [(10, 3), (9, 3), (5, 8), (1, 1), (0, 4)])
def test_split(n, section):
    h = np.arange(n, dtype=np.float64)
    d = cuda.to_device(h)
    parts = list(d.split(section))
    expect = [h[i:i + section] for i in range(0, n, section)]
    assert [p.shape for p in parts] == [e.shape for e in expect]
    for p, e in zip(parts, expect):
        np.testing.assert_array_equal(p.copy_to_host(), e)
    if parts:
        parts[-1][:] = -1                # views: writes reach the parent
        assert (d.copy_to_host()[-len(expect[-1]):] == -1).all()


@pytest.mark.gpu
def test_split_errors_and_stream():
    d = cuda.to_device(np.zeros((4, 4)))
    with pytest.raises(ValueError, match="1d"):
        list(d.split(2))
    with pytest.raises(ValueError, match="unit stride"):
        list(cuda.to_device(np.zeros(10))[::2].split(2))
    with pytest.raises(ValueError, match="positive"):
        cuda.to_device(np.zeros(10)).split(0)
    s = cuda.stream()
    parts = list(cuda.to_device(np.zeros(10)).split(5, stream=s))
    assert all(p.stream is s for p in parts)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,axis,expect", [
    ((1, 3, 1, 2), None, (3, 2)),
    ((1, 3, 1, 2), 0, (3, 1, 2)),
    ((1, 3, 1, 2), (0, 2), (3, 2)),
    ((1, 3, 1, 2), -2, (1, 3, 2)),
    ((1, 1), None, ()),
    ((4,), None, (4,)),
])
def test_squeeze(shape, axis, expect):
    h = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    d = cuda.to_device(h)
    s = d.squeeze(axis=axis)
    assert s.shape == expect == np.squeeze(h, axis=axis).shape
    np.testing.assert_array_equal(s.copy_to_host(), np.squeeze(h, axis=axis))


@pytest.mark.gpu
def test_squeeze_errors():
    d = cuda.to_device(np.zeros((1, 3)))
    with pytest.raises(ValueError, match="size not equal to one"):
        d.squeeze(axis=1)
    with pytest.raises((IndexError, ValueError)):
        d.squeeze(axis=5)


@pytest.mark.gpu
def test_copy_to_host_setitem_len():
    h = np.arange(12, dtype=np.int32).reshape(3, 4)
    d = cuda.to_device(h)
    assert len(d) == 3
    out = np.empty_like(h)
    assert d.copy_to_host(out) is out
    np.testing.assert_array_equal(out, h)
    s = cuda.stream()
    out2 = cuda.pinned_array_like(h)
    assert d.copy_to_host(ary=out2, stream=s) is out2
    s.synchronize()
    np.testing.assert_array_equal(out2, h)
    d[0] = 7                                  # scalar
    d[1, :] = np.array([1, 2, 3, 4])          # host array
    d[2] = cuda.to_device(np.array([9, 9, 9, 9], np.int32))   # device array
    d[:, 3] = 5                               # broadcast scalar into a strided view
    np.testing.assert_array_equal(d.copy_to_host(),
                                  [[7, 7, 7, 5], [1, 2, 3, 5], [9, 9, 9, 5]])
    with pytest.raises(TypeError):
        len(cuda.to_device(np.float32(1)))


@pytest.mark.gpu
def test_cuda_array_interface_v3_names_the_stream():
    s = cuda.stream()
    d = cuda.to_device(np.ones(1000), stream=s)
    cai = d.__cuda_array_interface__
    assert cai["version"] == 3 and "stream" in cai
    assert cai["stream"] == s.handle
    d2 = cuda.device_array(10)
    assert d2.__cuda_array_interface__["stream"] == 1   # the legacy default stream


# ---- IPC ----------------------------------------------------------------------------------------

CHILD = textwrap.dedent('''
    import pickle, sys
    import numpy as np
    from cufunc import cuda
    handle = pickle.loads(sys.stdin.buffer.read())
    with handle as d:
        total = float(d.copy_to_host().sum())
        d[:] = 7.0
        cuda.synchronize()
    with cuda.open_ipc_array(handle.handle, handle.shape, handle.dtype, offset=handle.offset) as d:
        first = float(d.copy_to_host()[0])
    print(total, first)
''')


@pytest.mark.gpu
def test_ipc_second_process_uses_the_same_memory():
    h = np.arange(1 << 16, dtype=np.float64)
    d = cuda.to_device(h)
    handle = d.get_ipc_handle()           # pool memory: moved into IPC-able memory first
    assert len(handle.handle) == 64 and handle.shape == h.shape
    np.testing.assert_array_equal(d.copy_to_host(), h)
    p = subprocess.run([sys.executable, "-c", CHILD], input=pickle.dumps(handle),
                       capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    total, first = map(float, p.stdout.split())
    assert total == h.sum() and first == 7.0
    assert (d.copy_to_host() == 7.0).all()       # the child's writes are in our memory
    with pytest.raises(ValueError, match="exported by this process"):
        handle.open()


@pytest.mark.gpu
def test_ipc_of_a_shared_allocation_is_refused_with_the_way_out():
    d = cuda.to_device(np.zeros(100))
    v = d[10:]
    with pytest.raises(ValueError, match="other views share it"):
        v.get_ipc_handle()
    del v
    h = d.get_ipc_handle()                  # sole view again: exported
    assert len(h.handle) == 64
    h2 = d.get_ipc_handle()                 # already IPC-able: same memory
    assert h2.offset == h.offset


@pytest.mark.gpu
@pytest.mark.parametrize("expose", [
    lambda d: d.__cuda_array_interface__,
    lambda d: d.ptr,
    lambda d: d.device_ctypes_pointer,
    lambda d: d.__dlpack__(),
], ids=["cai", "ptr", "ctypes", "dlpack"])
def test_ipc_never_moves_memory_whose_address_was_handed_out(expose):
    d = cuda.to_device(np.arange(100.0))
    expose(d)
    with pytest.raises(ValueError, match="address was handed out"):
        d.get_ipc_handle()
    # the way out the message names: an exportable copy
    e = cuda.device_array_like(d)
    e.copy_to_device(d)
    h = e.get_ipc_handle()
    assert len(h.handle) == 64
    np.testing.assert_array_equal(e.copy_to_host(), np.arange(100.0))
