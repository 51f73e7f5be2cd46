"""ufunc.reduce and ufunc.accumulate on vectorize ufuncs, against NumPy's.

Tolerances: integer, bool, min/max results are exact; float64 data here are small integers, so
their sums are exact too; float32 sums are compared with |got - exact| <= 1e-5 * sum(|x|) along
the reduced axes, float32 scans with 1e-4 * cumsum(|x|) (a scan chains tile prefixes one after
the other, so its rounding grows with the number of tiles, as a sequential cumsum's does with n).

Tests marked gpu run on the GPU machine; argument checks (NumPy's messages) run everywhere."""
import itertools

import numpy as np
import pytest

from cufunc import cuda, vectorize
from cufunc.errors import TypingError
from gpu_common import host

gpu = pytest.mark.gpu

INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT_TYPES = ["float32", "float64"]
COMPLEX_TYPES = ["complex64", "complex128"]
NUM_TYPES = INT_TYPES + FLOAT_TYPES + COMPLEX_TYPES


# NumPy's add and multiply: with accumulator="widen", reduce applies NumPy's default accumulator
# rule for them (bool and small integers accumulate in 64 bits). A property of the ufunc, not of
# its name (test_accumulator_is_a_property_not_a_name).
def add(a, b):
    return a + b


add = vectorize(["%s(%s, %s)" % (t, t, t) for t in NUM_TYPES], identity=0)(add)
add.accumulator = "widen"


def multiply(a, b):
    return a * b


multiply = vectorize(["%s(%s, %s)" % (t, t, t) for t in NUM_TYPES], identity=1)(multiply)
multiply.accumulator = "widen"


@vectorize(["%s(%s, %s)" % (t, t, t) for t in INT_TYPES + FLOAT_TYPES])
def maximum(a, b):
    # NaN wins from either side, as np.maximum: the result does not depend on the order
    return a if (a > b or a != a) else b


@vectorize
def dyn_add(a, b):       # no signatures: loops made per dtype, no identity
    return a + b


@vectorize
def floor_div(a, b):
    return a // b


@vectorize(["float64(float64)"])
def neg(a):
    return -a


@vectorize(["Tuple(int64, int64)(int64, int64)"])
def divmod_(a, b):
    return a // b, a % b


def ints(shape, seed=0, lo=-50, hi=50):
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(np.float64)


def all_axes(ndim):
    yield None
    yield ()
    for k in range(1, ndim + 1):
        for c in itertools.combinations(range(ndim), k):
            yield c
    yield -1


def close_f32(got, x, axis, keepdims=False):
    exact = np.add.reduce(x.astype(np.float64), axis=axis, keepdims=keepdims)
    scale = np.add.reduce(np.abs(x.astype(np.float64)), axis=axis, keepdims=keepdims)
    assert np.all(np.abs(np.asarray(got, np.float64) - exact) <= 1e-5 * scale + 1e-30)


# ---- everywhere: argument checks with NumPy's messages ------------------------------------------

def test_non_binary_ufuncs():
    with pytest.raises(ValueError, match="reduce only supported for binary functions"):
        neg.reduce(np.ones(3))
    with pytest.raises(ValueError, match="accumulate only supported for binary functions"):
        neg.accumulate(np.ones(3))
    with pytest.raises(ValueError, match="reduce only supported for functions returning a single value"):
        divmod_.reduce(np.ones(3, np.int64))
    with pytest.raises(ValueError, match="accumulate only supported for functions returning a single value"):
        divmod_.accumulate(np.ones(3, np.int64))


def test_bad_axes():
    a = np.ones((3, 4))
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of bounds for array of dimension 2"):
        add.reduce(a, axis=2)
    with pytest.raises(np.exceptions.AxisError):
        add.reduce(a, axis=(0, -3))
    with pytest.raises(ValueError, match="duplicate value in 'axis'"):
        add.reduce(a, axis=(0, 0))
    with pytest.raises(ValueError, match="duplicate value in 'axis'"):
        add.reduce(a, axis=(1, -1))
    with pytest.raises(TypeError):
        add.reduce(a, axis=1.5)
    with pytest.raises(ValueError, match="accumulate does not allow multiple axes"):
        add.accumulate(a, axis=None)
    with pytest.raises(ValueError, match="accumulate does not allow multiple axes"):
        add.accumulate(a, axis=(0, 1))
    with pytest.raises(np.exceptions.AxisError):
        add.accumulate(a, axis=2)
    with pytest.raises(TypeError, match="cannot accumulate on a scalar"):
        add.accumulate(np.float64(1.0))


def test_bad_out():
    a = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="output parameter for reduction operation add has the wrong "
                                         "number of dimensions: Found 2 but expected 1"):
        add.reduce(a, axis=0, out=np.empty((1, 4), np.float32))
    with pytest.raises(ValueError, match=r"must match the operand's when keepdims=True"):
        add.reduce(a, axis=0, keepdims=True, out=np.empty(4, np.float32))
    with pytest.raises(ValueError, match="wrong shape"):
        add.reduce(a, axis=0, out=np.empty(5, np.float32))
    with pytest.raises(ValueError, match="wrong shape"):
        add.accumulate(a, out=np.empty((3, 5), np.float32))
    with pytest.raises(ValueError, match="read-only"):
        ro = np.empty(4, np.float32)
        ro.flags.writeable = False
        add.reduce(a, axis=0, out=ro)


def test_identity_rules():
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum which has no identity"):
        maximum.reduce(np.ones((0, 3)), axis=0)
    with pytest.raises(ValueError, match="reduction operation 'maximum' does not have an identity, so to use a "
                                         "where mask one has to specify 'initial'"):
        maximum.reduce(np.ones((3, 3)), where=np.ones((3, 3), bool))
    with pytest.raises(ValueError, match="zero-size array to reduction operation add which has no identity"):
        add.reduce(np.ones(0), initial=None)   # initial=None switches the identity off
    with pytest.raises(TypeError, match="Cannot cast array data from dtype\\('int64'\\) to dtype\\('bool'\\)"):
        add.reduce(np.ones(3), where=np.array([1, 0, 1]), initial=0)


def test_body_that_does_not_type():
    with pytest.raises(TypingError):
        floor_div.reduce(np.ones(4, np.complex64))
    with pytest.raises(TypeError, match="not supported for the input types"):
        maximum.reduce(np.ones(4, np.complex64))


# ---- on the GPU ---------------------------------------------------------------------------------

SHAPES = [(7,), (5, 6), (3, 4, 5), (2, 3, 4, 5)]


@gpu
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_every_axis_combination(shape, keepdims):
    x = ints(shape)
    d = cuda.to_device(x)
    for axis in all_axes(len(shape)):
        want = np.add.reduce(x, axis=axis, keepdims=keepdims)
        got = add.reduce(x, axis=axis, keepdims=keepdims)
        assert np.shape(got) == want.shape, (axis, np.shape(got), want.shape)
        np.testing.assert_array_equal(got, want)
        dgot = add.reduce(d, axis=axis, keepdims=keepdims)
        assert isinstance(dgot, cuda.DeviceArray)
        np.testing.assert_array_equal(host(dgot), want)
        np.testing.assert_array_equal(host(maximum.reduce(d, axis=axis, keepdims=keepdims)),
                                      np.maximum.reduce(x, axis=axis, keepdims=keepdims))


@gpu
@pytest.mark.parametrize("shape", SHAPES)
def test_every_accumulate_axis(shape):
    x = ints(shape, seed=3)
    d = cuda.to_device(x)
    for axis in range(-len(shape), len(shape)):
        np.testing.assert_array_equal(add.accumulate(x, axis=axis), np.add.accumulate(x, axis=axis))
        np.testing.assert_array_equal(host(maximum.accumulate(d, axis=axis)),
                                      np.maximum.accumulate(x, axis=axis))


@gpu
def test_strided_layouts():
    x = ints((40, 30, 20), seed=5)
    d = cuda.to_device(x)
    views = [(lambda a: a.T), (lambda a: a[::2]), (lambda a: a[:, ::-1]), (lambda a: a[1:, :, ::3]),
             (lambda a: a.transpose(1, 0, 2)), (lambda a: a[::-2, 3:17, 1:2])]
    for v in views:
        xv = v(x)
        for axis in all_axes(3):
            np.testing.assert_array_equal(host(add.reduce(v(d), axis=axis)),
                                          np.add.reduce(xv, axis=axis))
        for axis in range(3):
            np.testing.assert_array_equal(host(add.accumulate(v(d), axis=axis)),
                                          np.add.accumulate(xv, axis=axis))


@gpu
@pytest.mark.parametrize("dtype", ["bool"] + NUM_TYPES)
def test_every_dtype(dtype):
    rng = np.random.default_rng(7)
    dt = np.dtype(dtype)
    shape = (33, 65)
    if dt.kind == "b":
        x = rng.random(shape) < 0.3
    elif dt.kind in "iu":
        x = rng.integers(0 if dt.kind == "u" else -20, 20, shape).astype(dt)
    elif dt.kind == "f":
        x = (rng.random(shape) - 0.5).astype(dt)
    else:
        x = ((rng.random(shape) - 0.5) + 1j * (rng.random(shape) - 0.5)).astype(dt)
    d = cuda.to_device(x)
    for axis in (0, 1, None):
        want = np.add.reduce(x, axis=axis)
        got = host(add.reduce(d, axis=axis))
        assert np.asarray(got).dtype == want.dtype, (dtype, axis)
        if dt.kind in "fc":
            rtol = 1e-5 if dt.itemsize <= 8 and dt.kind == "c" or dtype == "float32" else 1e-12
            scale = np.add.reduce(np.abs(x.astype(np.complex128)), axis=axis)
            assert np.all(np.abs(got - want) <= rtol * scale + 1e-30)
        else:
            np.testing.assert_array_equal(got, want)
        wa = np.add.accumulate(x, axis=axis or 0)
        ga = host(add.accumulate(d, axis=axis or 0))
        assert ga.dtype == wa.dtype
        if dt.kind in "fc":
            scale = np.add.accumulate(np.abs(x.astype(np.complex128)), axis=axis or 0)
            assert np.all(np.abs(ga - wa) <= 1e-4 * scale + 1e-30)
        else:
            np.testing.assert_array_equal(ga, wa)


@gpu
def test_products_min_max_nan():
    x = np.ones((70, 90))
    x[3, 5] = 2
    x[10, 7] = -1
    d = cuda.to_device(x)
    for axis in (0, 1, None):
        np.testing.assert_array_equal(host(multiply.reduce(d, axis=axis)), np.multiply.reduce(x, axis=axis))
        np.testing.assert_array_equal(host(multiply.reduce(d, axis=axis, initial=3)),
                                      np.multiply.reduce(x, axis=axis, initial=3))
    neg_vals = -(ints((50, 60), lo=1, hi=1000))
    dn = cuda.to_device(neg_vals)
    for axis in (0, 1, None):
        np.testing.assert_array_equal(host(maximum.reduce(dn, axis=axis)), neg_vals.max(axis=axis))
    y = np.random.default_rng(2).random((64, 100))
    y[5, 50] = np.nan
    y[40, 3] = np.nan
    dy = cuda.to_device(y)
    for axis in (0, 1, None):
        np.testing.assert_array_equal(host(maximum.reduce(dy, axis=axis)), np.maximum.reduce(y, axis=axis))
        np.testing.assert_array_equal(np.isnan(host(add.reduce(dy, axis=axis))),
                                      np.isnan(np.add.reduce(y, axis=axis)))
    np.testing.assert_array_equal(host(maximum.accumulate(dy, axis=1)), np.maximum.accumulate(y, axis=1))


@gpu
def test_out_where_initial_dtype():
    x = ints((30, 40), seed=9).astype(np.float32)
    d = cuda.to_device(x)
    # out on the device, and on the host
    o = cuda.device_array(40, np.float32)
    assert add.reduce(d, axis=0, out=o) is o
    np.testing.assert_array_equal(o.copy_to_host(), np.add.reduce(x, axis=0))
    h = np.empty(30, np.float64)
    r = add.reduce(x, axis=1, out=h)
    assert r is h
    np.testing.assert_array_equal(h, np.add.reduce(x, axis=1, out=np.empty(30, np.float64)))
    ok = cuda.device_array((1, 40), np.float32)
    add.reduce(d, axis=0, out=ok, keepdims=True)
    np.testing.assert_array_equal(ok.copy_to_host(), np.add.reduce(x, axis=0, keepdims=True))
    add.reduce(d, axis=0, out=(o,))
    # where= with the identity, with initial=, broadcast from one axis
    w = np.random.default_rng(4).random((30, 40)) < 0.5
    for axis in (0, 1, None):
        np.testing.assert_array_equal(host(add.reduce(d, axis=axis, where=w)),
                                      np.add.reduce(x, axis=axis, where=w))
        np.testing.assert_array_equal(host(maximum.reduce(d, axis=axis, where=cuda.to_device(w), initial=-1e9)),
                                      np.maximum.reduce(x, axis=axis, where=w, initial=-1e9))
    wrow = np.arange(40) % 3 == 0
    np.testing.assert_array_equal(host(add.reduce(d, axis=1, where=wrow)), np.add.reduce(x, axis=1, where=wrow))
    np.testing.assert_array_equal(host(add.reduce(d, axis=0, where=False, initial=5)),
                                  np.add.reduce(x, axis=0, where=False, initial=5))
    # initial=
    np.testing.assert_array_equal(host(add.reduce(d, axis=0, initial=5)), np.add.reduce(x, axis=0, initial=5))
    np.testing.assert_array_equal(host(maximum.reduce(d, axis=1, initial=1000)),
                                  np.maximum.reduce(x, axis=1, initial=1000))
    # dtype=
    r64 = add.reduce(d, axis=0, dtype=np.float64)
    assert r64.dtype == np.float64
    np.testing.assert_array_equal(host(r64), np.add.reduce(x, axis=0, dtype=np.float64))
    xi = np.full(300, 100, np.int8)
    assert add.reduce(xi) == np.add.reduce(xi) and add.reduce(xi).dtype == np.int64
    assert add.reduce(xi, dtype=np.int8) == np.add.reduce(xi, dtype=np.int8)   # wraps as NumPy
    assert dyn_add.reduce(xi) == np.add.reduce(xi, dtype=np.int8)               # not named add
    np.testing.assert_array_equal(host(add.accumulate(d, axis=1, dtype=np.float64)),
                                  np.add.accumulate(x, axis=1, dtype=np.float64))


@gpu
def test_empty_and_scalars():
    np.testing.assert_array_equal(add.reduce(np.zeros((0, 3)), axis=0), np.zeros(3))
    assert add.reduce(np.zeros((0, 3)), axis=1).shape == (0,)
    assert maximum.reduce(np.zeros((0, 3)), axis=1).shape == (0,)
    assert add.reduce(np.zeros(0)) == 0
    assert multiply.reduce(np.zeros((2, 0)), axis=None) == 1
    assert maximum.reduce(np.zeros((4, 0)), axis=1, initial=7).tolist() == [7, 7, 7, 7]
    assert add.accumulate(np.zeros((0, 3)), axis=0).shape == (0, 3)
    # 0-d input: axis=0 and None reduce nothing; NumPy folds the identity in
    assert add.reduce(np.float64(2.5)) == 2.5
    assert add.reduce(np.array(2.5), axis=None) == 2.5
    r = add.reduce(np.ones((3, 4)), axis=None)
    assert isinstance(r, np.float64) and r == 12
    dr = add.reduce(cuda.to_device(np.ones((3, 4))), axis=None)
    assert isinstance(dr, cuda.DeviceArray) and dr.shape == () and dr.copy_to_host() == 12


@gpu
@pytest.mark.parametrize("shape,axis", [((4, 300001), 1), ((300001, 4), 0), ((64, 100003), 0),
                                        ((100003, 64), 1), ((3, 1 << 20), 1), ((1 << 20, 3), 0),
                                        ((2048, 2048), 0), ((2048, 2048), 1), ((7, 9, 100000), (0, 2))])
def test_large_layouts(shape, axis):
    # exercises split rows, split columns (the last block of a tile combines), warp rows
    xi = np.random.default_rng(11).integers(-1000, 1000, shape).astype(np.int64)
    d = cuda.to_device(xi)
    for _ in range(2):   # the tickets must be reset for the next launch
        np.testing.assert_array_equal(host(add.reduce(d, axis=axis)), np.add.reduce(xi, axis=axis))
    xf = xi.astype(np.float32) / 7
    close_f32(host(add.reduce(cuda.to_device(xf), axis=axis)), xf, axis)


@gpu
@pytest.mark.parametrize("n", [1, 31, 32, 33, 255, 256, 257, 4095, 4096, 4097, 65537, 1049728,
                               (1 << 22) + 3])
def test_accumulate_1d(n):
    xi = np.random.default_rng(n).integers(-100, 100, n).astype(np.int64)
    d = cuda.to_device(xi)
    for _ in range(2):   # tile counter and look-back flags are reused by the next launch
        np.testing.assert_array_equal(host(add.accumulate(d)), np.cumsum(xi))
    xf = (np.random.default_rng(n).random(n) - 0.5).astype(np.float32)
    got = host(add.accumulate(cuda.to_device(xf)))
    exact = np.cumsum(xf.astype(np.float64))
    assert np.all(np.abs(got - exact) <= 1e-4 * np.cumsum(np.abs(xf.astype(np.float64))) + 1e-30)


@gpu
def test_accumulate_out_in_place_and_rows():
    x = np.random.default_rng(5).integers(-9, 9, (8, 1 << 18)).astype(np.int32)
    d = cuda.to_device(x)
    o = cuda.device_array(x.shape, np.int64)
    assert add.accumulate(d, axis=1, out=o) is o
    np.testing.assert_array_equal(o.copy_to_host(), np.add.accumulate(x, axis=1, dtype=np.int64))
    add.accumulate(d, axis=1, out=d)    # in place
    np.testing.assert_array_equal(d.copy_to_host(), np.add.accumulate(x, axis=1))
    h = np.empty((8, 1 << 18), np.int64)
    assert add.accumulate(x, axis=0, out=h) is h
    np.testing.assert_array_equal(h, np.add.accumulate(x, axis=0, dtype=np.int64))
    wide = np.random.default_rng(6).integers(-9, 9, (50, 20000)).astype(np.int64)
    np.testing.assert_array_equal(host(add.accumulate(cuda.to_device(wide), axis=0)),
                                  np.add.accumulate(wide, axis=0))


@gpu
def test_dynamic_ufunc_compiles_reduce_loops():
    for dt in ("int32", "float64", "complex64", "uint8"):
        x = np.arange(1, 50).astype(dt)
        assert dyn_add.reduce(x) == np.add.reduce(x, dtype=dt)
        np.testing.assert_array_equal(dyn_add.accumulate(x), np.add.accumulate(x, dtype=dt))
