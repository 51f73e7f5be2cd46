"""ufunc.at on device arrays: np.add.at(d, idx, v) through the twins and
uf.at(...) for any cufunc ufunc, against np.<ufunc>.at on host copies. Repeated indices must
accumulate (the point of at): the index sets here repeat every bin many times.

Methods (cufunc/_at.py): hardware atomics for add/min/max where they exist, an atomicCAS loop
around the ufunc's function elsewhere (on the 32-bit word for 1- and 2-byte types), one thread in
order for complex128. GPU tests run on the GPU machine; kernel sources compile through NVRTC and
argument errors are checked everywhere."""
import numpy as np
import pytest

import cufunc
from cufunc import _at, _twins, cuda, vectorize

gpu = pytest.mark.gpu


def clamp_add(x, y):
    # saturating add: no hardware atomic does this, so the CAS loop runs the body itself
    return min(x + y, 1000)


clamp_add = vectorize(clamp_add)


def mul_add1(x, y):
    return x * y + 1


mul_add1 = vectorize(["int16(int16, int16)", "float32(float32, float32)",
                      "complex128(complex128, complex128)"])(mul_add1)


def _nvrtc():
    try:
        cufunc._core.nvrtc_version()
        return True
    except Exception:  # noqa: BLE001
        return False


# ---- no GPU ------------------------------------------------------------------------------------

@pytest.mark.parametrize("op,dt,mode", [
    (1, "int32", 2), (1, "int64", 2), (1, "uint32", 2), (1, "uint64", 2), (1, "float32", 2),
    (1, "float64", 2), (2, "int32", 3), (3, "uint64", 4), (2, "float32", 0), (3, "float64", 0),
    (0, "int16", 1), (0, "uint8", 1), (1, "bool", 1), (1, "int8", 1), (1, "complex64", 0),
    (1, "complex128", 5), (0, "float32", 0)])
def test_pick_mode(op, dt, mode):
    # add/min/max on the hardware's types use its atomics; floats' min/max and any other function
    # a CAS loop; 1-2 byte types CAS on their word; 16-byte types one thread
    assert cufunc._core._at_pick_mode(op, 1, dt) == mode
    if mode in (2, 3, 4):
        # loop types that differ from the target's (a cast inside): never the hardware atomic
        assert cufunc._core._at_pick_mode(op, 0, dt) in (0, 1)


@pytest.mark.skipif(not _nvrtc(), reason="needs NVRTC")
@pytest.mark.parametrize("uf,a_dt,b_dt,op", [
    (np.add, "float32", None, 1), (np.add, "int64", None, 1), (np.maximum, "int32", None, 3),
    (np.maximum, "float64", None, 3), (np.multiply, "int8", None, 0), (np.add, "bool", None, 1),
    (np.add, "complex128", None, 1), (np.add, "float64", "int32", 1), (np.negative, "int16", None, 0),
    (clamp_add, "int32", "int32", 0), (clamp_add, "uint16", "uint16", 0),
    (mul_add1, "complex128", "complex128", 0)])
@pytest.mark.parametrize("index", ["int32", "int64"])
def test_at_kernels_compile(uf, a_dt, b_dt, op, index):
    u = _twins.twin(uf) if isinstance(uf, np.ufunc) else uf
    src = _at.kernel_source(u, a_dt, b_dt, index_dtype=index, op=op)
    assert "cf_at_run<" in src
    cufunc._core.compile_source(src, ("--fmad=false",), (7, 5))


def test_at_argument_errors_without_gpu():
    with pytest.raises(TypeError, match="DeviceArray"):
        _twins.twin(np.add).at(np.zeros(3), [0], 1)
    with pytest.raises(TypeError, match="second operand"):
        _at.ufunc_at(_twins.twin(np.add), None, [0])


# ---- GPU ---------------------------------------------------------------------------------------

@gpu
def test_histogram_against_numpy():
    rng = np.random.default_rng(15)
    idx = rng.integers(0, 1 << 10, size=1 << 20)
    want = np.zeros(1 << 10, np.int64)
    np.add.at(want, idx, 1)
    d = cuda.to_device(np.zeros(1 << 10, np.int64))
    np.add.at(d, cuda.to_device(idx), 1)            # device indices, through the twin
    np.testing.assert_array_equal(d.copy_to_host(), want)
    d2 = cuda.to_device(np.zeros(1 << 10, np.int64))
    np.add.at(d2, idx, 1)                           # host indices
    np.testing.assert_array_equal(d2.copy_to_host(), want)
    assert want.sum() == 1 << 20


@gpu
@pytest.mark.parametrize("dt", ["int8", "uint8", "int16", "int32", "int64", "uint32", "uint64",
                                "float32", "float64", "complex64", "complex128", "bool"])
@pytest.mark.parametrize("name", ["add", "multiply", "maximum", "minimum", "subtract"])
def test_twin_at_against_numpy(dt, name):
    u = getattr(np, name)
    rng = np.random.default_rng(3)
    n = 64
    idx = rng.integers(-n, n, size=4096)             # negative indices count from the end
    base = (rng.integers(0, 3, size=n)).astype(dt)
    vals = (rng.integers(0, 2, size=idx.size)).astype(dt)
    if name == "multiply" and np.dtype(dt).kind in "fc":
        vals = (1 + vals * 1e-3).astype(dt)
    want = base.copy()
    try:
        u.at(want, idx, vals)
    except TypeError as e:
        with pytest.raises(type(e)):
            u.at(cuda.to_device(base), idx, vals)
        return
    d = cuda.to_device(base)
    u.at(d, cuda.to_device(idx), cuda.to_device(vals))
    got = d.copy_to_host()
    if np.dtype(dt).kind in "fc":
        np.testing.assert_allclose(got, want, rtol=1e-4 if dt in ("float32", "complex64") else 1e-10)
    else:
        np.testing.assert_array_equal(got, want)


@gpu
def test_float_max_at_propagates_nan_and_min_at():
    a = np.array([0.0, 1.0, 2.0, 3.0], np.float32)
    idx = np.array([0, 0, 1, 2, 2, 2, 3])
    v = np.array([5, np.nan, -1, 7, 8, 1, -2], np.float32)
    for u in (np.maximum, np.minimum, np.fmax, np.fmin):
        want = a.copy()
        u.at(want, idx, v)
        d = cuda.to_device(a)
        u.at(d, idx, v)
        np.testing.assert_array_equal(d.copy_to_host(), want, err_msg=u.__name__)


@gpu
@pytest.mark.parametrize("dt", ["int16", "int32", "uint16", "int64"])
def test_user_ufunc_at_uses_its_body(dt):
    # saturating add through the CAS loop: every repeat of bin 0 counts until the clamp
    idx = np.zeros(5000, np.int64)
    idx[::2] = 1
    want = np.zeros(3, dt)
    for i in idx:
        want[i] = min(int(want[i]) + 1, 1000)
    d = cuda.to_device(np.zeros(3, dt))
    clamp_add.at(d, idx, np.ones(idx.size, dt))
    np.testing.assert_array_equal(d.copy_to_host(), want)


@gpu
def test_complex128_serial_path_in_order():
    # x * y + 1 is not commutative across updates: the serial path applies them in index order
    idx = np.array([0, 1, 0, 0, 1, 2])
    v = np.array([2, 3j, 1 + 1j, -1, 2, 5], np.complex128)
    want = np.ones(3, np.complex128)
    for i, x in zip(idx, v):
        want[i] = want[i] * x + 1
    d = cuda.to_device(np.ones(3, np.complex128))
    mul_add1.at(d, idx, v)
    np.testing.assert_allclose(d.copy_to_host(), want)


@gpu
def test_index_forms():
    h = np.zeros((6, 4), np.float64)
    d = cuda.to_device(h)
    rows = np.array([0, 2, 2, 5, -1])
    v = np.arange(20, dtype=np.float64).reshape(5, 4)
    np.add.at(h, rows, v)                            # rows of a 2-D target, 2-D values
    np.add.at(d, rows, v)
    np.add.at(h, rows, 1.5)                          # a scalar broadcast to every row
    np.add.at(d, rows, 1.5)
    np.add.at(h, slice(1, 5, 2), np.ones(4))         # a slice, values broadcast over rows
    np.add.at(d, slice(1, 5, 2), np.ones(4))
    np.add.at(h, (np.array([0, 0, 3]), np.array([1, 1, -1])), 10.0)   # a tuple over two axes
    np.add.at(d, (np.array([0, 0, 3]), np.array([1, 1, -1])), 10.0)
    np.add.at(h, 4, 2.0)                             # one integer
    np.add.at(d, 4, 2.0)
    np.add.at(h, rows, np.arange(4.0))               # trailing-shape values
    np.add.at(d, cuda.to_device(rows.astype(np.int32)), cuda.to_device(np.arange(4.0)))
    np.testing.assert_array_equal(d.copy_to_host(), h)


@gpu
def test_unary_at():
    h = np.arange(8, dtype=np.int32)
    d = cuda.to_device(h)
    np.negative.at(h, [1, 3, 3])
    np.negative.at(d, [1, 3, 3])
    np.testing.assert_array_equal(d.copy_to_host(), h)


@gpu
def test_out_of_bounds_indices():
    d = cuda.to_device(np.zeros(8, np.float32))
    with pytest.raises(IndexError, match="out of bounds"):
        np.add.at(d, np.array([1, 8]), 1.0)          # host indices: checked before any write
    np.testing.assert_array_equal(d.copy_to_host(), np.zeros(8, np.float32))
    with pytest.raises(IndexError, match="index -9 is out of bounds"):
        np.add.at(d, cuda.to_device(np.array([1, -9])), 1.0)   # device: the kernel reports it
    with pytest.raises(IndexError):
        np.add.at(d, np.array([0.5]), 1.0)


@gpu
def test_at_casting_as_numpy():
    d = cuda.to_device(np.zeros(4, np.int32))
    with pytest.raises(TypeError, match="same_kind"):
        np.add.at(d, [0, 1], 1.5)                     # float64 result into int32, as NumPy
    np.add.at(d, [0, 0], np.int16(3))                # an int16 value into int32: fine
    np.testing.assert_array_equal(d.copy_to_host(), [6, 0, 0, 0])
    f = cuda.to_device(np.zeros(3, np.float32))
    np.add.at(f, [2, 2], 0.25)                       # NEP 50: a Python float stays float32
    np.testing.assert_array_equal(f.copy_to_host(), [0, 0, 0.5])
