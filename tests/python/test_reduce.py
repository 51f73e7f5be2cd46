"""cuda.reduce / cuda.Reduce (Numba's API): sizes around every warp and block boundary, every
dtype, sums, products, min/max, NaN, strided inputs, res=, size=, init=, bad input.

Tolerances: integer and boolean results, min and max are exact (wrap-around integer addition is
associative and commutative, so any order gives NumPy's answer). Float sums are compared with
|got - exact| <= rtol * sum(|x|) (rtol 1e-5 for float32, 1e-13 for float64): the GPU adds in a
tree, NumPy pairwise; neither is the sequential sum.

Tests marked gpu run on the GPU machine; the others (decoration, translation, argument checks)
run everywhere."""
import math

import numpy as np
import pytest

from cufunc import cuda
from cufunc.errors import TypingError, UnsupportedError

gpu = pytest.mark.gpu

SIZES = [1, 31, 32, 33, 127, 128, 129, 255, 256, 257, 1023, 1024, 1025, 4095, 4096, 4097, 65535,
         65536, 65537, 1049728]
PRIMES = [2, 3, 7, 8191, 131071, 524287]
INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT_TYPES = ["float32", "float64"]
COMPLEX_TYPES = ["complex64", "complex128"]
RTOL = {"float32": 1e-5, "float64": 1e-13, "complex64": 1e-5, "complex128": 1e-13}


@cuda.reduce
def sum_reduce(a, b):
    return a + b


@cuda.reduce
def prod_reduce(a, b):
    return a * b


@cuda.reduce
def max_reduce(a, b):
    return a if a > b else b


@cuda.reduce
def min_reduce(a, b):
    return a if a < b else b


@cuda.reduce
def nan_max_reduce(a, b):
    # NaN wins whichever side it is on, so the result does not depend on the order of combining
    return a if (a > b or a != a) else b


sum_lambda = cuda.Reduce(lambda a, b: a + b)


def data(n, dtype, seed=0):
    rng = np.random.default_rng(seed + n)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(n) < 0.001
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = max(info.min, -1000), min(info.max, 1000)
        return rng.integers(lo, hi, n, endpoint=True).astype(dt)
    if dt.kind == "f":
        return (rng.random(n) * 2 - 1).astype(dt)
    return ((rng.random(n) * 2 - 1) + 1j * (rng.random(n) * 2 - 1)).astype(dt)


def check_sum(got, x, init=0):
    dt = x.dtype
    if dt.kind in "iub":
        want = np.add.reduce(x, dtype=dt) if dt.kind != "b" else np.any(x)
        want = dt.type(want + dt.type(init)) if dt.kind != "b" else (want or bool(init))
        assert got == want, (got, want)
        return
    exact = complex(math.fsum(x.real.astype(np.float64)) + float(np.real(init)),
                    math.fsum(np.imag(x).astype(np.float64)) + float(np.imag(init)))
    scale = float(np.sum(np.abs(x.astype(np.complex128)))) + abs(init) + 1e-30
    assert abs(complex(got) - exact) <= RTOL[dt.name] * scale, (got, exact)


# ---- everywhere: decoration, translation, argument checks -------------------------------------

def test_non_binary_functions():
    with pytest.raises(TypeError, match="binary function"):
        cuda.Reduce(lambda a: a)
    with pytest.raises(TypeError, match="binary function"):
        cuda.Reduce(lambda a, b, c: a)

    def star(*args):
        return args[0]
    with pytest.raises(TypeError, match="binary function"):
        cuda.reduce(star)
    with pytest.raises(TypeError):
        cuda.Reduce(42)


def test_decorator_and_class():
    assert isinstance(sum_reduce, cuda.Reduce)
    assert sum_reduce.py_func(2, 3) == 5      # the Python function is kept, as Numba does
    assert "sum_reduce" in repr(sum_reduce)


def test_body_that_does_not_type():
    floor = cuda.Reduce(lambda a, b: a // b)
    with pytest.raises(TypingError):
        floor(np.ones(4, np.complex64))
    bad_attr = cuda.Reduce(lambda a, b: a.foo)
    with pytest.raises((TypingError, UnsupportedError)):
        bad_attr(np.ones(4))


def test_bad_arguments_without_gpu():
    x = np.arange(10, dtype=np.float32)
    with pytest.raises(ValueError, match="size 11 is larger than the array's length 10"):
        sum_reduce(x, size=11)
    with pytest.raises(ValueError, match="negative"):
        sum_reduce(x, size=-1)
    with pytest.raises(TypeError, match="1-d"):
        sum_reduce(np.ones((2, 3)), size=2)
    with pytest.raises(TypeError, match="res must be a device array"):
        sum_reduce(x, res=np.zeros(1, np.float32))


def test_empty_host_input_returns_init():
    r = sum_reduce(np.zeros(0, np.float32), init=3.5)
    assert r == np.float32(3.5) and isinstance(r, np.float32)
    assert sum_reduce(np.zeros(0, np.int32)) == 0
    assert sum_reduce(np.arange(10, dtype=np.int64), size=0, init=7) == 7
    # init takes the array's type, as Numba does
    assert sum_reduce(np.zeros(0, np.int16), init=2.9) == np.int16(2)
    # the default init, 0 of the array's type (made from zero bytes, not a per-call scalar)
    for dt in (np.int8, np.uint16, np.int32, np.int64, np.float32, np.float64, np.complex64,
               np.complex128):
        r = sum_reduce(np.zeros(0, dt))
        assert type(r) is np.dtype(dt).type and r == 0 and not np.signbit(np.real(r))


# ---- on the GPU --------------------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("n", SIZES + PRIMES)
def test_sum_sizes_float32(n):
    x = data(n, "float32")
    got = sum_reduce(x)
    assert isinstance(got, np.float32)
    check_sum(got, x)
    d = cuda.to_device(x)
    check_sum(sum_reduce(d), x)
    check_sum(sum_lambda(d, init=2), x, init=2)


@gpu
@pytest.mark.parametrize("n", SIZES + PRIMES)
def test_sum_sizes_int64_exact(n):
    x = data(n, "int64")
    d = cuda.to_device(x)
    assert sum_reduce(d) == x.sum()
    assert sum_reduce(d, init=-5) == x.sum() - 5


@gpu
@pytest.mark.parametrize("dtype", ["bool"] + INT_TYPES + FLOAT_TYPES + COMPLEX_TYPES)
@pytest.mark.parametrize("n", [1, 33, 1025, 65537, 1049728])
def test_sum_every_dtype(dtype, n):
    x = data(n, dtype)
    got = sum_reduce(cuda.to_device(x))
    assert got.dtype == x.dtype
    check_sum(got, x)


@gpu
@pytest.mark.parametrize("dtype", INT_TYPES + FLOAT_TYPES + COMPLEX_TYPES)
def test_product_with_and_without_init(dtype):
    n = 70001
    dt = np.dtype(dtype)
    x = np.ones(n, dt)
    idx = np.random.default_rng(1).choice(n, 40, replace=False)
    x[idx[:5]] = 2
    if dt.kind != "u":
        x[idx[5:12]] = -1
    if dt.kind == "c":
        x[idx[12:16]] = 1j
    want = np.prod(x.astype(np.complex128 if dt.kind == "c" else np.float64))
    assert prod_reduce(cuda.to_device(x), init=1) == dt.type(want)
    assert prod_reduce(cuda.to_device(x), init=3) == dt.type(want * 3)
    # Numba's default init is 0: folded in once, it makes any product 0
    assert prod_reduce(cuda.to_device(x)) == 0


@gpu
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "float32", "float64"])
@pytest.mark.parametrize("n", [1, 32, 129, 4097, 1049728])
def test_min_max_of_negative_numbers(dtype, n):
    base = np.abs(data(n, dtype).astype(np.float64))
    x = (-(base % 100) - 1).astype(dtype)   # all negative, small enough for int8
    d = cuda.to_device(x)
    assert max_reduce(d, init=x[0]) == x.max()
    assert min_reduce(d, init=x[0]) == x.min()
    # the default init=0 takes part exactly once: the max of negative numbers and 0 is 0
    assert max_reduce(d) == 0
    assert min_reduce(d) == x.min()


@gpu
@pytest.mark.parametrize("n", [1, 100, 65537, 1049728])
def test_nan_propagation(n):
    x = data(n, "float64")
    x[n // 2] = np.nan
    d = cuda.to_device(x)
    assert np.isnan(sum_reduce(d))
    assert np.isnan(nan_max_reduce(d, init=-np.inf))
    assert np.isnan(np.maximum.reduce(x))  # what NumPy's own reduction gives
    y = data(n, "float32")
    y[0] = np.nan
    assert np.isnan(nan_max_reduce(cuda.to_device(y), init=0))


@gpu
def test_non_contiguous_inputs():
    x = data(300007, "float64")
    d = cuda.to_device(x)
    for view, host in [(d[::2], x[::2]), (d[1::3], x[1::3]), (d[::-1], x[::-1]),
                       (d[5:200000], x[5:200000])]:
        check_sum(sum_reduce(view), host)
    m = data(512 * 300, "int32").reshape(512, 300)
    dm = cuda.to_device(m)
    assert sum_reduce(dm.T) == m.sum(dtype=np.int32)
    assert sum_reduce(dm[:, ::7]) == m[:, ::7].sum(dtype=np.int32)
    assert sum_reduce(dm[::-3, 1:]) == m[::-3, 1:].sum(dtype=np.int32)
    # a host array that is not contiguous is copied over contiguously
    check_sum(sum_reduce(x[::5]), x[::5])


@gpu
def test_res_on_device_returns_none():
    x = data(1049728, "float32")
    d = cuda.to_device(x)
    res = cuda.device_array(3, np.float32)
    assert sum_reduce(d, res=res) is None
    check_sum(res.copy_to_host()[0], x)
    res2 = cuda.to_device(np.full(1, 9, np.int64))
    xi = data(4097, "int64")
    assert sum_reduce(cuda.to_device(xi), res=res2, init=1) is None
    assert res2.copy_to_host()[0] == xi.sum() + 1
    # an empty input writes init into res
    assert sum_reduce(cuda.to_device(np.zeros(0, np.int64)), res=res2, init=4) is None
    assert res2.copy_to_host()[0] == 4


@gpu
def test_res_bad():
    d = cuda.to_device(np.ones(10, np.float32))
    with pytest.raises(TypeError, match="res has dtype float64"):
        sum_reduce(d, res=cuda.device_array(1, np.float64))
    with pytest.raises(ValueError, match="no element"):
        sum_reduce(d, res=cuda.device_array(0, np.float32))


@gpu
@pytest.mark.parametrize("size", [0, 1, 31, 1000, 4096])
def test_size(size):
    x = data(4096, "int32")
    d = cuda.to_device(x)
    assert sum_reduce(d, size=size) == x[:size].sum(dtype=np.int32)
    assert sum_reduce(x, size=size, init=1) == x[:size].sum(dtype=np.int32) + 1


@gpu
def test_repeated_launches_reset_the_ticket():
    # many blocks finish through the atomic ticket; each launch must leave it reset
    x = data(1 << 22, "int64")
    d = cuda.to_device(x)
    want = x.sum()
    for _ in range(5):
        assert sum_reduce(d) == want
    s = cuda.stream()
    res = cuda.device_array(1, np.int64)
    for _ in range(5):
        sum_reduce(d, res=res, stream=s)
    s.synchronize()
    assert res.copy_to_host()[0] == want


@gpu
def test_stream_and_foreign_arrays():
    x = data(100003, "float32")
    s = cuda.stream()
    d = cuda.to_device(x, stream=s)
    check_sum(sum_reduce(d, stream=s), x)
    cp = pytest.importorskip("cupy")
    c = cp.asarray(x)
    check_sum(sum_reduce(c), x)


@gpu
def test_lambda_and_closure_constants():
    scale = 2

    def scaled_max(a, b):
        return max(a, b) * 1 + 0 * scale

    r = cuda.Reduce(scaled_max)
    x = data(5000, "int64")
    assert r(cuda.to_device(x), init=x[0]) == x.max()
    big = cuda.Reduce(lambda a, b: a if a > b else b)
    assert big(x, init=x[0]) == x.max()
