"""Bad input is reported as such (TypeError, ValueError, ...) naming the argument, and checked
before anything touches the GPU, so these tests run (and must pass) with or without one."""

import numpy as np
import pytest

from cufunc import _core, cuda

KERNEL_SRC = 'extern "C" __global__ void k(float *x, float v) { x[0] = v; }'

UNSUPPORTED_DTYPES = [object, str, bytes, "U3", "S3", "M8[s]", "m8[ms]", [("a", "f4")],
                      np.longdouble, np.clongdouble, ">f4", ">i8", "V8", "f4,i4"]


# ---- shapes, dtypes, orders, streams of the allocating functions ---------------------------------

@pytest.mark.parametrize("shape,exc,match", [
    (-1, ValueError, r"shape: negative extent -1 of axis 0"),
    ((2, -3), ValueError, r"shape: negative extent -3 of axis 1"),
    ((2 ** 62, 2 ** 62), ValueError, r"shape.*too large"),
    ((2 ** 31, 2 ** 31, 2 ** 31), ValueError, r"shape.*too large"),
    ((0, 2 ** 62, 2 ** 62), ValueError, r"shape.*too large"),
    (2 ** 70, ValueError, r"shape.*too large"),
    (2.5, TypeError, r"shape"),
    ("abc", TypeError, r"shape"),
    ((2, 3.0), TypeError, r"shape.*axis 1"),
    ((True,), TypeError, r"shape"),
    (None, TypeError, r"shape"),
    ((1,) * 65, ValueError, r"shape: 65 dimensions"),
])
@pytest.mark.parametrize("fn", ["device_array", "pinned_array", "DeviceNDArray"])
def test_bad_shape(fn, shape, exc, match):
    with pytest.raises(exc, match=match):
        getattr(cuda, fn)(shape)


@pytest.mark.parametrize("dtype", UNSUPPORTED_DTYPES, ids=str)
@pytest.mark.parametrize("fn", ["device_array", "pinned_array"])
def test_unsupported_dtype(fn, dtype):
    with pytest.raises(TypeError, match=r"dtype") as info:
        getattr(cuda, fn)(4, dtype=dtype)
    assert "%s: dtype" % fn in str(info.value)


def test_unsupported_dtype_names_it():
    with pytest.raises(TypeError, match=r"datetime64\[s\] is not supported"):
        cuda.device_array(3, dtype="M8[s]")
    with pytest.raises(TypeError, match=r"object is not supported"):
        cuda.device_array(3, dtype=object)
    with pytest.raises(TypeError, match=r"big-endian"):
        cuda.device_array(3, dtype=">f8")


def test_not_a_dtype():
    with pytest.raises(TypeError, match=r"device_array: dtype: 'no_such_type' is not a dtype"):
        cuda.device_array(3, dtype="no_such_type")


@pytest.mark.parametrize("order,exc", [("X", ValueError), ("CF", ValueError), ("", ValueError),
                                       (3, TypeError)])
def test_bad_order(order, exc):
    with pytest.raises(exc, match="order"):
        cuda.device_array(3, order=order)
    with pytest.raises(exc, match="order"):
        cuda.pinned_array(3, order=order)


BAD_STREAMS = [("x", "got str"), (12345, "not a stream"), (-1, "not a stream"),
               (True, "got bool"), (3.0, "got float"), (object(), "got object"),
               (2 ** 80, "not a stream")]


@pytest.mark.parametrize("stream,match", BAD_STREAMS, ids=lambda v: repr(v)[:20])
def test_bad_stream_argument(stream, match):
    with pytest.raises(TypeError, match="stream: .*" + match):
        cuda.device_array(3, stream=stream)
    with pytest.raises(TypeError, match="stream"):
        cuda.to_device(np.zeros(3), stream=stream)
    with pytest.raises(TypeError, match="stream"):
        cuda.device_array_like(np.zeros(3), stream=stream)
    with pytest.raises(TypeError, match="stream"):
        _core.check_stream(stream)


@pytest.mark.parametrize("stream", [0, None, 1, 2])
def test_good_stream_arguments_pass_the_check(stream):
    _core.check_stream(stream)


def test_stream_protocol_object_passes_the_check():
    class S:
        def __cuda_stream__(self):
            return (0, 0)
    _core.check_stream(S())


# ---- host data for to_device -------------------------------------------------------------------

@pytest.mark.parametrize("obj", [
    object(), None, {"a": 1}, ["a", "b"], np.array(["x"]), np.array([1, 2], dtype=object),
    np.array(["2020-01-01"], dtype="M8[D]"), np.zeros(3, dtype=np.longdouble),
    np.zeros(3, dtype=">f4"), np.zeros(2, dtype=[("a", "f4"), ("b", "i4")]),
], ids=lambda o: type(o).__name__ + ":" + str(getattr(o, "dtype", "")))
def test_to_device_rejects_non_numeric(obj):
    with pytest.raises(TypeError, match="to_device: ary"):
        cuda.to_device(obj)
    with pytest.raises(TypeError, match="device_array_like: ary"):
        cuda.device_array_like(obj)


def test_to_device_to_must_be_a_device_array():
    with pytest.raises(TypeError, match="to_device: to must be a device array"):
        cuda.to_device(np.zeros(3), to=np.zeros(3))


def test_ragged_input_is_rejected():
    with pytest.raises((TypeError, ValueError)):
        cuda.to_device([[1, 2], [3]])


# ---- foreign objects: CUDA Array Interface and DLPack ---------------------------------------------

class CAI:
    def __init__(self, **over):
        self.__cuda_array_interface__ = dict(shape=(4,), typestr="<f4", data=(4096, False),
                                             version=3, strides=None)
        self.__cuda_array_interface__.update(over)


@pytest.mark.parametrize("obj,exc,match", [
    (np.arange(3), TypeError, r"as_cuda_array: obj: numpy.ndarray is not a device array"),
    (object(), TypeError, r"no __cuda_array_interface__"),
    (CAI(mask=np.zeros(4)), NotImplementedError, r"mask"),
    (CAI(stream=0), ValueError, r"stream.*0.*forbids"),
    (CAI(shape=(2, -1)), ValueError, r"negative extent"),
    (CAI(shape=[4]), TypeError, r"shape.*tuple"),
    (CAI(typestr=">f4"), TypeError, r"big-endian"),
    (CAI(typestr="|O"), TypeError, r"not supported"),
    (CAI(typestr=5), TypeError, r"typestr"),
    (CAI(data=4096), TypeError, r"data"),
    (CAI(data=("x", False)), TypeError, r"pointer"),
    (CAI(strides=(4, 4)), TypeError, r"strides"),
    (CAI(shape=(2 ** 40, 2 ** 40)), ValueError, r"too large"),
])
def test_as_cuda_array_bad_input(obj, exc, match):
    with pytest.raises(exc, match=match):
        cuda.as_cuda_array(obj)


def test_cai_must_be_a_dict():
    class Bad:
        __cuda_array_interface__ = [1, 2]
    with pytest.raises(TypeError, match="must be a dict"):
        cuda.as_cuda_array(Bad())


def test_is_cuda_array():
    assert cuda.is_cuda_array(CAI())
    assert not cuda.is_cuda_array(np.arange(3))
    assert not cuda.is_cuda_array(object())
    assert not cuda.is_cuda_array([1, 2])


def test_from_dlpack_refuses_host_arrays():
    with pytest.raises(TypeError, match=r"from_dlpack: obj: the data is on DLPack device CPU"):
        cuda.from_dlpack(np.arange(3.0))


def test_from_dlpack_refuses_other_devices_by_name():
    class OnROCm:
        def __dlpack_device__(self):
            return (10, 0)

        def __dlpack__(self, **kw):
            raise AssertionError("not reached")
    with pytest.raises(TypeError, match="ROCm"):
        cuda.from_dlpack(OnROCm())


def test_from_dlpack_needs_the_protocol():
    with pytest.raises(TypeError, match="does not support DLPack"):
        cuda.from_dlpack([1, 2, 3])


def test_from_dlpack_refuses_host_capsules():
    cap = np.arange(3.0).__dlpack__()
    with pytest.raises((TypeError, Exception), match="CPU|CUDA|not usable|driver"):
        cuda.from_dlpack(cap)


# ---- RawKernel ---------------------------------------------------------------------------------

def test_rawkernel_construction_checks():
    with pytest.raises(TypeError, match="source"):
        cuda.RawKernel(b"src", "k")
    with pytest.raises(TypeError, match="name"):
        cuda.RawKernel(KERNEL_SRC, "")
    with pytest.raises(TypeError, match="name"):
        cuda.RawKernel(KERNEL_SRC, 3)
    with pytest.raises(TypeError, match="options"):
        cuda.RawKernel(KERNEL_SRC, "k", options="-O3")
    k = cuda.RawKernel(KERNEL_SRC, "k", options=["-DX=1"])
    assert k.name == "k" and k.source == KERNEL_SRC and k.options == ("-DX=1",)
    assert "k" in repr(k)


@pytest.mark.parametrize("grid,block,args,kw,exc,match", [
    (0, 1, (), {}, ValueError, "grid"),
    (-1, 1, (), {}, ValueError, "grid"),
    ((1, 2, 3, 4), 1, (), {}, ValueError, "grid"),
    (1, (), (), {}, ValueError, "block"),
    ("x", 1, (), {}, TypeError, "grid"),
    (1, 1.5, (), {}, TypeError, "block"),
    (1, (32, "a"), (), {}, TypeError, "block"),
    (1, 1, 5, {}, TypeError, "args must be a tuple"),
    (1, 1, (np.zeros(3),), {}, TypeError, r"args\[0\].*host NumPy array"),
    (1, 1, (1.0, "s"), {}, TypeError, r"args\[1\]: str"),
    (1, 1, (2 ** 70,), {}, OverflowError, r"args\[0\]"),
    (1, 1, (np.longdouble(1),), {}, TypeError, r"args\[0\]"),
    (1, 1, (np.datetime64(1, "s"),), {}, TypeError, r"args\[0\]"),
    (1, 1, (), {"stream": "s"}, TypeError, "stream"),
    (1, 1, (), {"shared_mem": -1}, ValueError, "shared_mem"),
    (1, 1, (), {"shared_mem": 2 ** 33}, ValueError, "shared_mem"),
])
def test_rawkernel_call_checks(grid, block, args, kw, exc, match):
    k = cuda.RawKernel(KERNEL_SRC, "k")
    with pytest.raises(exc, match=match):
        k(grid, block, args, **kw)


# ---- devices, streams --------------------------------------------------------------------------

def test_select_device_argument_type():
    with pytest.raises(TypeError, match="device"):
        cuda.select_device("0")
    with pytest.raises(ValueError, match="device"):
        cuda.select_device(-1)


def test_external_stream_argument_type():
    with pytest.raises(TypeError, match="external_stream: ptr"):
        cuda.external_stream("0x1234")
    with pytest.raises(TypeError, match="external_stream: ptr"):
        cuda.external_stream(None)


def test_stream_type_cannot_be_made_directly():
    with pytest.raises(TypeError):
        cuda.Stream()


# ---- stream= of kernel calls: checked before the GPU is touched (py_call.c, step 4) ------------

def _add(a, b):
    return a + b


def _total(x, r):
    t = 0.0
    for i in range(x.shape[0]):
        t += x[i]
    r[0] = t


def _stream_calls():
    from cufunc import guvectorize, vectorize
    add = vectorize(["float64(float64, float64)"])(_add)
    total = guvectorize(["void(float64[:], float64[:])"], "(n)->()")(_total)
    red = cuda.reduce(_add)
    x = np.ones(3)
    return {
        "ufunc": lambda s: add(x, x, stream=s),
        "outer": lambda s: add.outer(x, x, stream=s),
        "gufunc": lambda s: total(np.ones((2, 3)), stream=s),
        "reduce": lambda s: add.reduce(x, stream=s),
        "accumulate": lambda s: add.accumulate(x, stream=s),
        "cuda.reduce": lambda s: red(x, stream=s),
    }


@pytest.mark.parametrize("call", ["ufunc", "outer", "gufunc", "reduce", "accumulate",
                                  "cuda.reduce"])
@pytest.mark.parametrize("stream,match", BAD_STREAMS[:2], ids=lambda v: repr(v)[:20])
def test_kernel_call_checks_stream_before_the_gpu(call, stream, match):
    # every call takes the pipeline's one place step: a bad stream= is a TypeError with or
    # without a GPU (the ufunc and gufunc calls said CudaSupportError first without one)
    with pytest.raises(TypeError, match="stream: .*" + match):
        _stream_calls()[call](stream)
