"""Device arrays on a GPU, table-driven against NumPy: every dtype x layout for the round trips,
views made by indexing compared with the same NumPy indexing, reshape/ravel/transpose, the CUDA
Array Interface and DLPack with cufunc itself, memory (out of memory, leaks), unaligned host data.
Comparisons are exact: copies move bits."""

import gc

import numpy as np
import pytest

from cufunc import _core, cuda

pytestmark = pytest.mark.gpu

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128]
DTYPE_IDS = [np.dtype(d).name for d in DTYPES]


def sample(dtype, shape, seed=0):
    """Random values spanning the dtype (bit patterns that survive only an exact copy)."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    if dtype.kind == "f":
        return (rng.standard_normal(size=shape) * 1000).astype(dtype)
    real = rng.standard_normal(size=shape) * 1000
    imag = rng.standard_normal(size=shape) * 1000
    return (real + 1j * imag).astype(dtype)


def layout(name, dtype):
    """A host array with a given memory layout."""
    if name == "C":
        return sample(dtype, (5, 7))
    if name == "F":
        return np.asfortranarray(sample(dtype, (5, 7)))
    if name == "strided":
        return sample(dtype, (10, 21))[::2, ::3]
    if name == "negative":
        return sample(dtype, (5, 7))[::-1, ::-2]
    if name == "0d":
        return sample(dtype, ())
    if name == "empty":
        return sample(dtype, (0, 3))
    if name == "1d":
        return sample(dtype, (1001,))
    if name == "3d_transposed":
        return sample(dtype, (2, 3, 4)).transpose(2, 0, 1)
    raise AssertionError(name)


LAYOUTS = ["C", "F", "strided", "negative", "0d", "empty", "1d", "3d_transposed"]


def assert_same(actual, expected):
    assert isinstance(actual, np.ndarray)
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)


# ---- round trips -------------------------------------------------------------------------------

@pytest.mark.parametrize("lay", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_round_trip(dtype, lay):
    h = layout(lay, dtype)
    d = cuda.to_device(h)
    assert isinstance(d, cuda.DeviceNDArray)
    assert d.shape == h.shape and d.ndim == h.ndim and d.size == h.size
    assert d.dtype == h.dtype and d.itemsize == h.itemsize and d.nbytes == h.nbytes
    assert d.device_id == cuda.get_current_device().id
    assert_same(d.copy_to_host(), h)
    # Into a given array, C and F.
    for order in "CF":
        out = np.empty(h.shape, dtype=h.dtype, order=order)
        r = d.copy_to_host(out)
        assert r is out
        assert_same(out, h)
    # Back onto the device: from host, from another device array.
    d2 = cuda.device_array_like(h)
    d2.copy_to_device(h)
    assert_same(d2.copy_to_host(), h)
    d3 = cuda.device_array(h.shape, dtype=h.dtype, order="F")
    d3.copy_to_device(d2)
    assert_same(d3.copy_to_host(), h)
    assert_same(np.asarray(d3), h)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_to_device_keeps_order(dtype):
    c = sample(dtype, (4, 6))
    f = np.asfortranarray(c)
    dc, df = cuda.to_device(c), cuda.to_device(f)
    assert dc.is_c_contiguous() and not dc.is_f_contiguous()
    assert df.is_f_contiguous() and not df.is_c_contiguous()
    assert dc.strides == c.strides and df.strides == f.strides
    assert df.copy_to_host().flags.f_contiguous
    assert_same(df.copy_to_host(), c)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_device_array(dtype, order):
    d = cuda.device_array((3, 4, 5), dtype=dtype, order=order)
    ref = np.empty((3, 4, 5), dtype=dtype, order=order)
    assert d.shape == ref.shape and d.strides == ref.strides and d.dtype == ref.dtype
    assert d.is_c_contiguous() == (order == "C") and d.is_f_contiguous() == (order == "F")
    assert d.alloc_size == ref.nbytes
    like = cuda.device_array_like(ref)
    assert like.strides == ref.strides and like.dtype == ref.dtype
    like2 = cuda.device_array_like(d)
    assert like2.strides == d.strides


def test_device_array_shapes():
    assert cuda.device_array(5).shape == (5,)
    assert cuda.device_array(()).shape == ()
    assert cuda.device_array((0,)).size == 0
    assert cuda.device_array([2, 3]).shape == (2, 3)
    assert cuda.device_array(np.int64(4)).shape == (4,)
    assert cuda.device_array(3).dtype == np.float64
    assert cuda.device_array(3, dtype="f4").dtype == np.float32
    assert cuda.DeviceNDArray((2, 3), dtype=np.int32).shape == (2, 3)


def test_to_device_copy_false_and_to():
    h = np.arange(10.0)
    d = cuda.to_device(h, copy=False)
    assert d.shape == h.shape and d.dtype == h.dtype
    target = cuda.device_array(10)
    assert cuda.to_device(h, to=target) is target
    assert_same(target.copy_to_host(), h)
    assert cuda.to_device(target) is target  # a device array is returned as is


def test_to_device_of_python_sequences_and_scalars():
    assert_same(cuda.to_device([1.5, 2.5]).copy_to_host(), np.array([1.5, 2.5]))
    assert_same(cuda.to_device(7).copy_to_host(), np.array(7))
    assert_same(cuda.to_device(np.float32(2)).copy_to_host(), np.array(2, dtype=np.float32))


def test_copy_to_host_checks_destination():
    d = cuda.to_device(np.arange(6.0).reshape(2, 3))
    with pytest.raises(ValueError, match="copy_to_host: ary has shape"):
        d.copy_to_host(np.empty((3, 2)))
    with pytest.raises(TypeError, match="copy_to_host: ary has dtype"):
        d.copy_to_host(np.empty((2, 3), dtype=np.float32))
    with pytest.raises(TypeError, match="NumPy array"):
        d.copy_to_host([0] * 6)
    ro = np.empty((2, 3))
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        d.copy_to_host(ro)


def test_copy_to_device_checks_source():
    d = cuda.device_array((2, 3))
    with pytest.raises(ValueError, match="copy_to_device: ary has shape"):
        d.copy_to_device(np.zeros((3, 2)))
    with pytest.raises(TypeError, match="copy_to_device: ary has dtype"):
        d.copy_to_device(np.zeros((2, 3), dtype=np.float32))
    with pytest.raises(TypeError, match="copy_to_device: ary: dtype object"):
        d.copy_to_device(np.zeros((2, 3), dtype=object))
    with pytest.raises(TypeError, match="has dtype"):
        d.copy_to_device(cuda.device_array((2, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="has shape"):
        d.copy_to_device(cuda.device_array((6,)))
    # Extents of 1 may differ (as in Numba).
    d.copy_to_device(np.arange(6.0).reshape(1, 2, 3))
    assert_same(d.copy_to_host(), np.arange(6.0).reshape(2, 3))
    col = cuda.device_array((3, 1))
    col.copy_to_device(cuda.to_device(np.arange(3.0)))
    assert_same(col.copy_to_host(), np.arange(3.0).reshape(3, 1))


def test_copy_into_strided_view_leaves_the_rest_alone():
    h = np.arange(60, dtype=np.int32).reshape(6, 10)
    d = cuda.to_device(h)
    v = d[1::2, ::-3]
    new = -np.arange(v.size, dtype=np.int32).reshape(v.shape)
    v.copy_to_device(new)
    expected = h.copy()
    expected[1::2, ::-3] = new
    assert_same(d.copy_to_host(), expected)


def test_overlapping_device_copy():
    h = np.arange(20.0)
    d = cuda.to_device(h)
    d[2:12].copy_to_device(d[0:10])
    expected = h.copy()
    expected[2:12] = h[0:10]
    assert_same(d.copy_to_host(), expected)


# ---- indexing ----------------------------------------------------------------------------------

SLICES = [
    np.s_[1:5, 2:7], np.s_[::2, ::-3], np.s_[..., 3], np.s_[None, 2:, ...], np.s_[-1],
    np.s_[:, -1], np.s_[5:1:-2, 1::3], np.s_[2:2], np.s_[:, None, :], np.s_[...],
    np.s_[::-1], np.s_[1, ::2], np.s_[-100:100, -100:100], np.s_[3:, None], np.s_[..., None],
    np.s_[np.int64(2), 1:], np.s_[:, 7:2:-1],
]


@pytest.mark.parametrize("sl", SLICES, ids=repr)
@pytest.mark.parametrize("dtype", [np.float32, np.complex128, np.bool_, np.int16],
                         ids=["float32", "complex128", "bool", "int16"])
def test_slicing_matches_numpy(dtype, sl):
    h = sample(dtype, (6, 8))
    d = cuda.to_device(h)
    v = d[sl]
    expected = h[sl]
    assert v.shape == expected.shape
    assert v.base is d.base  # a view: same owner, no copy
    assert_same(v.copy_to_host(), expected)
    # A view of a view, and of a transposed one.
    assert_same(d.T[sl].copy_to_host(), h.T[sl])
    assert_same(v[...].copy_to_host(), expected)


def test_view_pointers():
    h = np.arange(48, dtype=np.int64).reshape(6, 8)
    d = cuda.to_device(h)
    assert d[2].ptr == d.ptr + 2 * 64
    assert d[:, 3].ptr == d.ptr + 3 * 8
    assert d[::-1].ptr == d.ptr + 5 * 64
    assert d[::-1].strides == (-64, 8)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_scalar_getitem(dtype):
    h = sample(dtype, (4, 5))
    d = cuda.to_device(h)
    for idx in [(0, 0), (3, 4), (-1, -1), (2, -5), (np.int32(1), np.uint8(2))]:
        got = d[idx]
        assert isinstance(got, np.generic) and got.dtype == h.dtype
        assert got == h[idx]
    one = cuda.to_device(h[0])
    assert one[3] == h[0, 3]
    zero_d = cuda.to_device(h[1, 1].reshape(()))
    assert zero_d[()] == h[1, 1]


def test_getitem_errors():
    d = cuda.to_device(np.arange(12.0).reshape(3, 4))
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        d[3]
    with pytest.raises(IndexError, match="index -5 is out of bounds for axis 1"):
        d[0, -5]
    with pytest.raises(IndexError, match="too many indices"):
        d[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        d[..., ...]
    with pytest.raises(IndexError, match="only integers"):
        d["a"]
    with pytest.raises(IndexError, match="only integers"):
        d[1.5]
    with pytest.raises(NotImplementedError, match="boolean"):
        d[True]
    with pytest.raises(NotImplementedError, match="advanced"):
        d[[0, 1]]
    with pytest.raises(NotImplementedError, match="advanced"):
        d[np.array([0, 1])]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        d[::0]
    with pytest.raises(TypeError, match="len"):
        len(cuda.to_device(np.float64(1)))


def test_len_and_iteration():
    h = np.arange(12).reshape(3, 4)
    d = cuda.to_device(h)
    assert len(d) == 3
    rows = [r.copy_to_host() for r in d]
    assert len(rows) == 3
    for r, e in zip(rows, h):
        assert_same(r, e)


SETS = [
    (np.s_[1], 5), (np.s_[::2, 1], [7, 8]), (np.s_[...], 0), (np.s_[:, ::-2], -1.5),
    (np.s_[2, 3], 42), (np.s_[1:3], np.arange(8.0)), (np.s_[:, 0], np.arange(3.0)),
]


@pytest.mark.parametrize("sl,value", SETS, ids=repr)
def test_setitem_matches_numpy(sl, value):
    h = np.arange(24.0).reshape(3, 8)
    d = cuda.to_device(h)
    d[sl] = value
    h[sl] = value
    assert_same(d.copy_to_host(), h)


def test_setitem_from_device_array_and_errors():
    h = np.zeros((3, 4), np.float32)
    d = cuda.to_device(h)
    src = cuda.to_device(np.arange(4, dtype=np.float32))
    d[1] = src
    h[1] = np.arange(4)
    assert_same(d.copy_to_host(), h)
    with pytest.raises(ValueError):
        d[1] = cuda.to_device(np.arange(4.0))  # float64 into float32: cast on the host first
    with pytest.raises(ValueError):
        d[1] = np.arange(5)  # NumPy's broadcasting error
    with pytest.raises(TypeError, match="delete"):
        del d[0]


# ---- reshape, ravel, transpose -----------------------------------------------------------------

@pytest.mark.parametrize("shape,order", [((4, 6), "C"), ((24,), "C"), ((2, 3, 4), "C"),
                                         ((-1, 2), "C"), ((4, 6), "F"), ((2, -1, 3), "F"),
                                         ((1, 24, 1), "C"), ((), None)])
def test_reshape_contiguous(shape, order):
    n = 1 if shape == () else 24
    h = np.arange(float(n)).reshape(6, 4) if n == 24 else np.arange(1.0)
    if order == "F":
        h = np.asfortranarray(h)
    d = cuda.to_device(h)
    kwargs = {} if order is None else {"order": order}
    r = d.reshape(shape, **kwargs)
    e = h.reshape(shape, **kwargs)
    assert r.shape == e.shape
    assert r.base is d.base and r.ptr == d.ptr
    assert_same(r.copy_to_host(), e)
    if shape and len(shape) > 1:
        assert_same(d.reshape(*shape, **kwargs).copy_to_host(), e)


def test_reshape_of_views_without_copy():
    h = np.arange(96.0).reshape(8, 12)
    d = cuda.to_device(h)
    v, hv = d[:, :6], h[:, :6]             # (8, 6), rows not contiguous with each other
    assert_same(v.reshape(8, 2, 3).copy_to_host(), hv.reshape(8, 2, 3))
    assert_same(v.reshape(8, 3, 2).copy_to_host(), hv.reshape(8, 3, 2))
    assert_same(v.reshape(2, 4, 6).copy_to_host(), hv.reshape(2, 4, 6))
    assert_same(d[::2].reshape(4, 2, 6).copy_to_host(), h[::2].reshape(4, 2, 6))
    assert_same(d[:, 0].ravel().copy_to_host(), h[:, 0].ravel())
    # Every other element of whole rows is evenly spaced: one stride, no copy (as in NumPy).
    assert_same(d[:, ::2].reshape(48).copy_to_host(), h[:, ::2].reshape(48))
    with pytest.raises(NotImplementedError, match="copy"):
        v.reshape(48)
    with pytest.raises(NotImplementedError, match="copy"):
        d.T.ravel()
    assert_same(d.T.ravel(order="F").copy_to_host(), h.T.ravel(order="F"))


def test_reshape_errors():
    d = cuda.device_array((4, 6))
    with pytest.raises(ValueError, match="cannot reshape array of size 24 into shape"):
        d.reshape(5, 5)
    with pytest.raises(ValueError, match="one unknown"):
        d.reshape(-1, -1)
    with pytest.raises(ValueError, match="negative"):
        d.reshape(-2, -12)
    with pytest.raises(ValueError, match="order"):
        d.reshape(24, order="K")
    with pytest.raises(TypeError, match="only the keyword argument 'order'"):
        d.reshape(24, copy=False)
    assert cuda.device_array((0, 3)).reshape(3, 0, 5).shape == (3, 0, 5)


def test_ravel():
    h = np.arange(24.0).reshape(2, 3, 4)
    d = cuda.to_device(h)
    assert_same(d.ravel().copy_to_host(), h.ravel())
    f = cuda.to_device(np.asfortranarray(h))
    assert_same(f.ravel(order="F").copy_to_host(), h.ravel(order="F"))
    with pytest.raises(NotImplementedError):
        f.ravel()


def test_transpose():
    h = np.arange(24).reshape(2, 3, 4)
    d = cuda.to_device(h)
    assert_same(d.T.copy_to_host(), h.T)
    assert_same(d.transpose().copy_to_host(), h.transpose())
    assert_same(d.transpose(1, 0, 2).copy_to_host(), h.transpose(1, 0, 2))
    assert_same(d.transpose((2, 0, 1)).copy_to_host(), h.transpose((2, 0, 1)))
    assert_same(d.transpose(-1, 0, 1).copy_to_host(), h.transpose(-1, 0, 1))
    assert d.T.is_f_contiguous()
    with pytest.raises(ValueError, match="axes"):
        d.transpose(0, 0, 1)
    with pytest.raises(ValueError, match="axes"):
        d.transpose(0, 1)


# ---- attributes, repr, __array__ -------------------------------------------------------------------

def test_attributes_and_repr():
    d = cuda.to_device(np.zeros((3, 4), dtype=np.float32))
    r = repr(d)
    assert "(3, 4)" in r and "float32" in r and "device=%d" % d.device_id in r and hex(d.ptr) in r
    assert "strides=" in repr(d[:, ::2])
    assert d.flags["C_CONTIGUOUS"] and not d.flags["F_CONTIGUOUS"]
    assert d.stream == 0
    assert d.device_ctypes_pointer.value == d.ptr
    assert d.readonly is False


def test_array_protocol():
    h = np.arange(6, dtype=np.int32).reshape(2, 3)
    d = cuda.to_device(h)
    assert_same(np.asarray(d), h)
    assert_same(np.asarray(d, dtype=np.float64), h.astype(np.float64))
    assert_same(np.array(d, copy=True), h)
    with pytest.raises(ValueError, match="copy"):
        np.array(d, copy=False)


# ---- the CUDA Array Interface and DLPack with ourselves ---------------------------------------------

class Exposes:
    """Only the CUDA Array Interface of an object (what CuPy or PyTorch would show)."""

    def __init__(self, cai, keep=None):
        self.__cuda_array_interface__ = cai
        self.keep = keep


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_cuda_array_interface(dtype):
    h = sample(dtype, (4, 6))
    d = cuda.to_device(h)
    cai = d.__cuda_array_interface__
    assert cai["version"] == 3
    assert cai["shape"] == (4, 6)
    assert cai["typestr"] == np.dtype(dtype).str
    assert cai["descr"] == [("", np.dtype(dtype).str)]
    assert cai["data"] == (d.ptr, False)
    assert cai["strides"] is None
    assert cai["stream"] == 1  # the legacy default stream: never 0 (CAI v3)
    v = d[::-1, 1::2]
    assert v.__cuda_array_interface__["strides"] == v.strides
    back = cuda.as_cuda_array(Exposes(v.__cuda_array_interface__, keep=d))
    assert back.ptr == v.ptr and back.strides == v.strides and back.dtype == v.dtype
    assert_same(back.copy_to_host(), h[::-1, 1::2])
    assert cuda.is_cuda_array(d) and cuda.is_cuda_array(back)
    assert cuda.as_cuda_array(d) is d


def test_cai_view_keeps_owner_alive_and_sees_writes():
    d = cuda.to_device(np.zeros(8))
    owner = Exposes(d.__cuda_array_interface__, keep=d)
    v = cuda.as_cuda_array(owner)
    assert v.base is owner
    v[3] = 7.0
    assert d[3] == 7.0
    del owner, d
    gc.collect()
    assert v[3] == 7.0


def test_cai_readonly_is_respected():
    d = cuda.to_device(np.zeros(4))
    cai = dict(d.__cuda_array_interface__, data=(d.ptr, True))
    v = cuda.as_cuda_array(Exposes(cai, keep=d))
    assert v.readonly
    with pytest.raises(ValueError, match="read-only"):
        v[0] = 1
    with pytest.raises(ValueError, match="read-only"):
        v.copy_to_device(np.ones(4))


def test_cai_with_host_pointer_is_rejected():
    h = np.zeros(4)
    cai = dict(shape=(4,), typestr="<f8", data=(h.ctypes.data, False), version=3, strides=None)
    with pytest.raises(ValueError, match="as_cuda_array: obj: pointer .* is not device memory"):
        cuda.as_cuda_array(Exposes(cai))


def test_cai_stream_is_synchronised():
    s = cuda.stream()
    d = cuda.to_device(np.arange(1000.0), stream=s)
    cai = d.__cuda_array_interface__
    assert cai["stream"] == s.handle
    v = cuda.as_cuda_array(Exposes(cai, keep=d))  # synchronises s
    assert_same(v.copy_to_host(), np.arange(1000.0))
    cuda.as_cuda_array(Exposes(cai, keep=d), sync=False)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_dlpack_with_ourselves(dtype):
    h = sample(dtype, (3, 5))
    d = cuda.to_device(h)
    assert d.__dlpack_device__() == (2, d.device_id)
    for kwargs in [{}, {"max_version": (1, 0)}, {"max_version": (1, 1)}, {"stream": 1},
                   {"stream": -1}, {"copy": False}, {"dl_device": (2, d.device_id)}]:
        cap = d.__dlpack__(**kwargs)
        name = "dltensor_versioned" if "max_version" in kwargs else "dltensor"
        assert '"%s"' % name in repr(cap)
        back = cuda.from_dlpack(cap)
        assert back.ptr == d.ptr and back.shape == d.shape and back.strides == d.strides
        assert_same(back.copy_to_host(), h)
    v = d[::-1, ::2]
    back = cuda.from_dlpack(v)
    assert back.ptr == v.ptr and back.strides == v.strides
    assert_same(back.copy_to_host(), h[::-1, ::2])


def test_dlpack_copy_and_device_errors():
    d = cuda.to_device(np.arange(6.0))
    copied = cuda.from_dlpack(d.__dlpack__(copy=True, max_version=(1, 0)))
    assert copied.ptr != d.ptr
    assert_same(copied.copy_to_host(), np.arange(6.0))
    with pytest.raises(BufferError):
        d.__dlpack__(dl_device=(1, 0))
    with pytest.raises(ValueError, match="stream=0"):
        d.__dlpack__(stream=0)
    cap = d.__dlpack__()
    cuda.from_dlpack(cap)
    with pytest.raises(ValueError, match="consumed"):
        cuda.from_dlpack(cap)


def test_dlpack_capsule_not_consumed_is_freed():
    before = _core.mem_outstanding()
    d = cuda.device_array(1 << 20)
    caps = [d.__dlpack__(), d.__dlpack__(max_version=(1, 0))]
    del d, caps
    gc.collect()
    assert _core.mem_outstanding() == before


def test_numpy_does_not_take_device_dlpack():
    d = cuda.to_device(np.arange(3.0))
    with pytest.raises((BufferError, RuntimeError, TypeError, ValueError)):
        np.from_dlpack(d)


# ---- memory --------------------------------------------------------------------------------------

def test_out_of_memory_names_the_size_and_recovers():
    with pytest.raises(MemoryError, match="1125899906842624"):
        cuda.device_array(2 ** 50, dtype=np.uint8)
    with pytest.raises(MemoryError, match=str(8 * 2 ** 50)):
        cuda.device_array((2 ** 25, 2 ** 25))  # float64: 8 PiB
    d = cuda.to_device(np.arange(1000.0))
    assert_same(d.copy_to_host(), np.arange(1000.0))


def test_no_leaks():
    gc.collect()
    start = _core.mem_outstanding()
    for i in range(300):
        a = cuda.device_array(1000 + i, dtype=np.float32)
        v = a[::2]
        w = cuda.to_device(np.arange(i + 1))
        x = cuda.from_dlpack(w)
        del a, v, w, x
    for _ in range(50):
        with pytest.raises(MemoryError):
            cuda.device_array(2 ** 50, dtype=np.uint8)
    gc.collect()
    assert _core.mem_outstanding() == start


def test_view_keeps_memory_alive():
    d = cuda.to_device(np.arange(100.0))
    v = d[10:20]
    del d
    gc.collect()
    assert_same(v.copy_to_host(), np.arange(10.0, 20.0))


def test_unaligned_host_arrays():
    values = np.arange(10.0)
    raw = b"\0" + values.tobytes()
    src = np.frombuffer(raw, dtype=np.float64, offset=1)
    assert not src.flags.aligned
    assert_same(cuda.to_device(src).copy_to_host(), values)
    buf = bytearray(len(raw))
    dst = np.frombuffer(buf, dtype=np.float64, offset=1)
    assert not dst.flags.aligned and dst.flags.writeable
    cuda.to_device(values).copy_to_host(dst)
    assert_same(np.array(dst), values)
    strided = np.frombuffer(b"\0" + np.arange(20.0).tobytes(), dtype=np.float64, offset=1)[::2]
    assert_same(cuda.to_device(strided).copy_to_host(), np.arange(20.0)[::2])
    d = cuda.device_array(10)
    d.copy_to_device(src)
    assert_same(d.copy_to_host(), values)


def test_large_copies():
    h = np.random.default_rng(1).random(32 * 2 ** 20 // 8)  # 32 MiB: staged in chunks
    d = cuda.to_device(h)
    assert_same(d.copy_to_host(), h)
    out = cuda.pinned_array(h.shape)
    d.copy_to_host(out)
    assert_same(out, h)


def test_pinned_array():
    p = cuda.pinned_array((3, 4), dtype=np.int16, order="F")
    assert p.shape == (3, 4) and p.dtype == np.int16 and p.flags.f_contiguous
    assert p.flags.writeable
    assert _core.host_is_pinned(p)
    assert not _core.host_is_pinned(np.zeros(100))
    p[...] = np.arange(12).reshape(3, 4)
    assert_same(cuda.to_device(p).copy_to_host(), p.copy())
    like = cuda.pinned_array_like(np.zeros((2, 5), np.float32))
    assert like.shape == (2, 5) and like.dtype == np.float32 and _core.host_is_pinned(like)
    assert cuda.pinned_array(0).size == 0
    view = p[1:]
    del p
    gc.collect()
    assert view.sum() == np.arange(12).reshape(3, 4)[1:].sum()  # the view keeps it alive


# ---- streams with arrays ---------------------------------------------------------------------------

def test_stream_ordered_copies():
    s = cuda.stream()
    h = np.arange(2 ** 20, dtype=np.float32)
    pinned_src = cuda.pinned_array(h.shape, dtype=h.dtype)
    pinned_src[...] = h
    d = cuda.to_device(pinned_src, stream=s)
    assert d.stream is s
    assert d.__cuda_array_interface__["stream"] == s.handle
    out = cuda.pinned_array(h.shape, dtype=h.dtype)
    d.copy_to_host(out, stream=s)
    s.synchronize()
    assert_same(out, h)
    e = cuda.device_array_like(d, stream=s)
    e.copy_to_device(d, stream=s)
    with s.auto_synchronize():
        e2 = e[::2]
        e2.copy_to_host(out[: h.size // 2], stream=s)
    assert_same(out[: h.size // 2], h[::2])


def test_bind():
    s = cuda.stream()
    d = cuda.to_device(np.arange(4.0))
    b = d.bind(s)
    assert b.stream is s and b.ptr == d.ptr
    assert d.bind().stream == 0
