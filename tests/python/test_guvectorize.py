"""@guvectorize: GPU generalized ufuncs, against NumPy (np.matmul, sums over an axis, small
linear-algebra kernels, Python loops over the loop dimensions) over dtypes, layouts, broadcasting,
fixed dimensions, several outputs, scalar inputs and outputs, axes=, out= and placement.

Tests marked gpu run on the GPU machine (CUFUNC_REQUIRE_GPU=1 makes them fail rather than skip
elsewhere); the rest (decoration, type lists against layouts, argument and shape checking, the
generated kernels compiling with NVRTC) run everywhere, CI included."""
import math

import numpy as np
import pytest

import cufunc
from cufunc import cuda, _core
from cufunc.guvectorize import guvectorize
from cufunc.errors import TypingError

gpu = pytest.mark.gpu

INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT_TYPES = ["float32", "float64"]
COMPLEX_TYPES = ["complex64", "complex128"]
ALL_TYPES = INT_TYPES + FLOAT_TYPES + COMPLEX_TYPES


def random_array(dtype, shape, rng):
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        lo = 0 if dt.kind == "u" else -8
        return rng.integers(lo, 8, size=shape, endpoint=True).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    return rng.standard_normal(shape).astype(dt)


def _matmul(a, b, c):
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            s = a[i, 0] * b[0, j]
            for k in range(1, a.shape[1]):
                s += a[i, k] * b[k, j]
            c[i, j] = s


MATMUL = guvectorize(["void(%s[:,:], %s[:,:], %s[:,:])" % (t, t, t) for t in ALL_TYPES],
                     "(m,n),(n,p)->(m,p)", target="cuda")(_matmul)


@guvectorize(["void(float32[:], float32[:])", "void(float64[:], float64[:])",
              "void(int64[:], int64[:])"], "(n)->()")
def rowsum(x, out):
    """sums rows"""
    s = x[0] - x[0]
    for i in range(x.shape[0]):
        s += x[i]
    out[0] = s


@guvectorize(["void(float32[:], float32, float32[:])", "void(float64[:], float64, float64[:])"],
             "(n),()->(n)")
def axpy(x, a, y):
    for i in range(x.shape[0]):
        y[i] = a * x[i]


@guvectorize(["void(float64[:], float64[:], float64[:])"], "(n)->(),()")
def minmax(x, lo, hi):
    lo[0] = x[0]
    hi[0] = x[0]
    for i in range(1, x.shape[0]):
        lo[0] = min(lo[0], x[i])
        hi[0] = max(hi[0], x[i])


@guvectorize(["void(float32[:], float32)"], "(3)->()")
def norm3_scalar_out(v, out):
    out[0] = math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])


@guvectorize(["float64(float64[:])"], "(n)->()")
def mean_returned(x):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i]
    return s / x.shape[0]


@guvectorize("(n)->(n)")
def cumsum_dyn(x, out):
    acc = x[0] - x[0]
    for i in range(x.shape[0]):
        acc += x[i]
        out[i] = acc


@guvectorize(["void(float64[:], float64[:])"], "(n)->(n)")
def reverse_local(x, out):
    tmp = cuda.local.array(64, np.float64)
    n = x.shape[0]
    for i in range(n):
        tmp[i] = x[i]
    for i in range(n):
        out[i] = tmp[n - 1 - i]


@guvectorize(["void(float32[:], float32[:])"], "(n)->(n)")
def accumulate_into(x, out):
    for i in range(x.shape[0]):
        out[i] += x[i]


def rowsum_reference(x):
    """The body's order: sequential adds in the array's dtype (cumsum is sequential)."""
    return np.cumsum(x, axis=-1, dtype=x.dtype)[..., -1]


def scalar_product(x, y):
    """x * y as NumPy scalars compute it. For complex arrays NumPy's SIMD loops fuse a multiply
    and an add (FMA) and round differently; the body's meaning (docs/language.md) is the scalar one,
    written out here."""
    if x.dtype.kind != "c":
        return x * y
    p = np.empty(np.broadcast_shapes(x.shape, y.shape), x.dtype)
    p.real = x.real * y.real - x.imag * y.imag
    p.imag = x.real * y.imag + x.imag * y.real
    return p


def matmul_reference(a, b):
    """The body's order over k, in the arrays' dtype, with NumPy's wrapping for integers."""
    a, b = np.broadcast_arrays(a[..., :, :, None], b[..., None, :, :])
    with np.errstate(all="ignore"):
        s = scalar_product(a[..., 0, :], b[..., 0, :])
        for k in range(1, a.shape[-2]):
            s = s + scalar_product(a[..., k, :], b[..., k, :])
    return s


# ---- no GPU needed --------------------------------------------------------------------------

def test_attributes():
    assert rowsum.nin == 1 and rowsum.nout == 1 and rowsum.nargs == 2
    assert rowsum.signature == "(n)->()"
    assert rowsum.types == ["f->f", "d->d", "l->l"] or rowsum.types == ["f->f", "d->d", "q->q"]
    assert rowsum.__name__ == "rowsum" and rowsum.__doc__ == "sums rows"
    assert rowsum.signatures[0] == "void(float32[:], float32[:])"
    assert MATMUL.ntypes == len(ALL_TYPES)
    assert minmax.nout == 2
    assert "GUFunc 'rowsum' (n)->()" in repr(rowsum)
    assert cumsum_dyn.ntypes == 0 and cumsum_dyn.compiler is not None


def test_layout_errors():
    with pytest.raises(ValueError, match=r"\^"):
        guvectorize(["void(float32[:], float32[:])"], "(n)->(")
    with pytest.raises(ValueError):
        guvectorize(["void(float32[:], float32[:])"], "(n)>()")
    with pytest.raises(TypeError, match="layout"):
        guvectorize(["void(float32[:], float32[:])"])
    with pytest.raises(ValueError, match="cuda"):
        guvectorize(["void(float32[:], float32[:])"], "(n)->()", target="cpu")


def test_type_list_must_match_layout():
    def f(x, out):
        out[0] = x[0]
    with pytest.raises(TypeError, match="does not match the layout"):
        guvectorize(["void(float32[:,:], float32[:])"], "(n)->()")(f)
    with pytest.raises(TypeError, match="does not match the layout"):
        guvectorize(["void(float32[:], float32[:], float32[:])"], "(n)->()")(f)
    with pytest.raises(TypeError, match="does not match the layout"):
        guvectorize(["void(float32, float32[:])"], "(n)->()")(f)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        guvectorize(["void(float32[:], float32[:])"], "(n)->()")(lambda a, b, c: None)


def test_body_returning_a_value_is_an_error():
    def f(x, out):
        out[0] = x[0]
        return 1
    with pytest.raises(TypeError, match="gufunc kernel must have void return type"):
        guvectorize(["void(float32[:], float32[:])"], "(n)->()")(f)


def test_body_errors_point_at_the_source():
    def f(x, out):
        out[0] = [x[0]]
    with pytest.raises((TypingError, cufunc.UnsupportedError)):
        guvectorize(["void(float32[:], float32[:])"], "(n)->()")(f)


def test_type_tuples_and_objects():
    from cufunc import float32, void

    def f(x, out):
        out[0] = x[0]
    g1 = guvectorize([(float32[:], float32[:])], "(n)->()")(f)
    g2 = guvectorize([void(float32[:], float32[:])], "(n)->()")(f)
    g3 = guvectorize("void(float32[:], float32[:])", "(n)->()")(f)
    assert g1.types == g2.types == g3.types == ["f->f"]


def test_wrong_number_of_arguments():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(TypeError, match="takes from 1 to 2 positional arguments but 3 were given"):
        rowsum(x, x, x)
    with pytest.raises(TypeError, match="takes from 2 to 3"):
        MATMUL(x)
    with pytest.raises(TypeError, match="invalid keyword"):
        rowsum(x, bogus=1)
    with pytest.raises(ValueError, match="exactly 2 entries"):
        minmax(np.ones(3), out=(None,))


def test_core_dimension_mismatch_names_argument_and_dimension():
    a = np.ones((5, 3, 4), np.float32)
    b = np.ones((5, 2), np.float32)
    with pytest.raises(ValueError, match=r"input argument 2 has a mismatch in its core dimension 0 "
                                         r"\('n'\), with gufunc signature \(m,n\),\(n,p\)->\(m,p\) "
                                         r"\(size 5 is different from 4"):
        MATMUL(a, b)
    with pytest.raises(ValueError, match="input argument 2 does not have enough dimensions"):
        MATMUL(a, np.ones(4, np.float32))
    with pytest.raises(ValueError, match="fixed size 3"):
        norm3_scalar_out(np.ones((4, 4), np.float32))
    with pytest.raises(ValueError, match="input argument 1 does not have enough dimensions "
                                         r"\(has 0"):
        rowsum(1.0)


def test_loop_dimensions_that_do_not_broadcast():
    with pytest.raises(ValueError, match="could not be broadcast"):
        MATMUL(np.ones((2, 3, 4), np.float32), np.ones((3, 4, 2), np.float32))


def test_output_dimension_no_input_defines():
    @guvectorize(["void(float64[:], float64[:,:])"], "(n)->(n,k)")
    def spread(x, out):
        for i in range(out.shape[0]):
            for j in range(out.shape[1]):
                out[i, j] = x[i]
    with pytest.raises(ValueError, match=r"output argument 2 has core dimension 1 \('k'\) "
                                         r"unspecified.*out="):
        spread(np.ones(3))


def test_given_output_with_wrong_shape():
    x = np.ones((5, 4), np.float32)
    with pytest.raises(ValueError, match="output argument 2 has loop dimensions"):
        rowsum(x, out=np.empty(1, np.float32))
    with pytest.raises(ValueError, match="output argument 2 has a mismatch|could not be broadcast"):
        cumsum_dyn(x, out=np.empty((5, 3), np.float32))


def test_axes_errors():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(np.exceptions.AxisError, match="out of bounds"):
        rowsum(x, axes=[(2,), ()])
    with pytest.raises(ValueError, match="repeated"):
        MATMUL(np.ones((2, 2, 2), np.float32), np.ones((2, 2), np.float32),
               axes=[(0, 0), (0, 1), (0, 1)])
    with pytest.raises(TypeError, match="both"):
        rowsum(x, axes=[(0,)], axis=0)
    with pytest.raises(TypeError, match="single shared core dimension"):
        MATMUL(x, x, axis=0)


def test_casting_rule():
    x = np.ones((3, 4), np.complex128)
    with pytest.raises(TypeError):
        rowsum(x)  # no loop reaches complex by safe casting
    with pytest.raises(TypeError, match="Cannot cast gufunc 'rowsum' output"):
        rowsum(np.ones((3, 4), np.float64), out=np.empty(3, np.int8))


def test_kernels_compile_with_nvrtc():
    rng = np.random.default_rng(0)
    cases = [
        (rowsum, (np.ones((4096, 1024), np.float32),), "#define CF_GU_STAGE_0 4096, 4112, 0, 16, 1, "),
        (rowsum, (np.ones((4096, 1024), np.float32)[:, ::2],), "F(1, A, O, 1, cf_float32, cf_float32, 0)"),
        (MATMUL, (np.ones((1 << 16, 4, 4), np.float32),) * 2,
         # a flat tile (the batch is one block): element cp.async into 17-word rows, no base table
         ("F(2, G, O, 2, cf_float32, cf_float32, 0)", "#define CF_GU_STAGE_2 64, 68, 17408, 4, 0, 0, 1, ")),
        (MATMUL, (np.ones((1 << 16, 4, 4), np.float32), np.ones((4, 4), np.float32)),
         "F(1, U, I, 2, cf_float32, cf_float32, 0)"),
        (MATMUL, (np.ones((100, 4, 4), np.complex128),) * 2, "cf_complex128"),
        (axpy, (np.ones((100, 8), np.float32), 2.0), "F(1, S, I, 0, cf_float32, cf_float32, 0)"),
        (minmax, (np.ones((100, 8)),), "#define CF_GU_STAGE_0 64, 72, 0, 8, 1, 0, 1, "),
        (norm3_scalar_out, (np.ones((100, 3), np.float32),), "F(1, A, O, 1, cf_float32, cf_float32, 0)"),
        (mean_returned, (rng.random((100, 9)),), "cf_gu_ret_"),
        (reverse_local, (np.ones((100, 16)),), '#include "cufunc/gu_kernel.cuh"'),  # cf_gu
        (cumsum_dyn, (np.ones((100, 16), np.int16),), "cf_int16"),
    ]
    # the kernel is templates/cufunc/gu_kernel.cuh, instantiated by the key's macros (the kind of
    # each operand in CF_GU_OPS, the layout of each staged one in CF_GU_STAGE_<i>)
    for g, args, want in cases:
        src = g.kernel_source(*args)
        for w in (want,) if isinstance(want, str) else want:
            assert w in src, (g.__name__, w)
        assert '#include "cufunc/gu_kernel.cuh"' in src
        image, is_ptx = _core.compile_source(src, ["--fmad=false"], (9, 0))
        assert len(image) > 0


def test_dynamic_gufunc_compiles_per_input_types():
    n0 = cumsum_dyn.ntypes
    cumsum_dyn.kernel_source(np.ones((3, 4), np.uint16))
    assert cumsum_dyn.ntypes == n0 + 1
    cumsum_dyn.kernel_source(np.ones((3, 4), np.uint16))
    assert cumsum_dyn.ntypes == n0 + 1
    assert "H->H" in cumsum_dyn.types


# ---- on the GPU -------------------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("dtype", ALL_TYPES)
def test_matmul_all_dtypes(dtype):
    rng = np.random.default_rng(1)
    a = random_array(dtype, (37, 3, 5), rng)
    b = random_array(dtype, (37, 5, 2), rng)
    got = MATMUL(a, b)
    assert isinstance(got, np.ndarray) and got.dtype == np.dtype(dtype)
    want = matmul_reference(a, b)
    if np.dtype(dtype).kind in "iu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_array_equal(got, want)  # same order, no FMA: exact
        np.testing.assert_allclose(got, np.matmul(a, b), rtol=1e-4 if "64" in dtype and
                                   dtype != "complex64" else 1e-3, atol=1e-5)


@gpu
@pytest.mark.parametrize("shape_a,shape_b", [
    ((4, 4), (1000, 4, 4)),          # a broadcast along the loop
    ((1000, 4, 4), (4, 4)),          # b broadcast
    ((7, 1, 4, 4), (1, 9, 4, 4)),    # both, outer-product style
    ((3, 2, 3), (3, 2)),             # non-square
    ((2, 4, 4), (2, 4, 4)),          # tiny loop
    ((4, 4), (4, 4)),                # no loop dimensions at all
])
def test_matmul_broadcasting(shape_a, shape_b):
    rng = np.random.default_rng(2)
    a = random_array("float32", shape_a, rng)
    b = random_array("float32", shape_b, rng)
    got = MATMUL(a, b)
    np.testing.assert_array_equal(got, matmul_reference(a, b))
    assert got.shape == np.matmul(a, b).shape


@gpu
@pytest.mark.parametrize("layout", ["C", "F", "transposed_core", "sliced", "negative"])
def test_layouts(layout):
    rng = np.random.default_rng(3)
    a = random_array("float64", (50, 6, 6), rng)
    b = random_array("float64", (50, 6, 6), rng)
    if layout == "F":
        a, b = np.asfortranarray(a), np.asfortranarray(b)
    elif layout == "transposed_core":
        a = np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1)
    elif layout == "sliced":
        a = random_array("float64", (100, 6, 12), rng)[::2, :, ::2]
    elif layout == "negative":
        a, b = a[::-1, ::-1], b[:, :, ::-1]
    got = MATMUL(a, b)
    np.testing.assert_array_equal(got, matmul_reference(a, b))
    # the same from device arrays, which are not copied to contiguous first
    da = cuda.to_device(np.ascontiguousarray(a))
    db = cuda.to_device(np.ascontiguousarray(b))
    np.testing.assert_array_equal(MATMUL(da, db).copy_to_host(), matmul_reference(a, b))
    # a strided device view (every other batch entry and column): read in place
    big = random_array("float64", (100, 6, 12), rng)
    dv = cuda.to_device(big)[::2, :, ::2]
    np.testing.assert_array_equal(MATMUL(dv, db).copy_to_host(),
                                  matmul_reference(big[::2, :, ::2], b))


@gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("n", [1, 3, 31, 1024, 5000])
def test_rowsum_against_numpy(dtype, n):
    rng = np.random.default_rng(4)
    x = random_array(dtype, (257, n), rng)
    got = rowsum(x)
    np.testing.assert_array_equal(got, rowsum_reference(x))
    if np.dtype(dtype).kind == "f":
        # NumPy sums pairwise, the body sequentially: equal within rounding of the sum of |x|
        scale = np.abs(x).sum(axis=-1)
        eps = np.finfo(x.dtype).eps
        assert np.all(np.abs(got - np.sum(x, axis=-1)) <= 4 * n * eps * scale)


@gpu
def test_rowsum_large_on_device():
    rng = np.random.default_rng(5)
    x = rng.random((65536, 1024), dtype=np.float32)
    dx = cuda.to_device(x)
    dout = cuda.device_array(65536, np.float32)
    r = rowsum(dx, out=dout)
    assert r is dout
    np.testing.assert_array_equal(dout.copy_to_host(), rowsum_reference(x))
    # a new device output when out= is not given
    r2 = rowsum(dx)
    assert not isinstance(r2, np.ndarray) and hasattr(r2, "copy_to_host")
    np.testing.assert_array_equal(r2.copy_to_host(), rowsum_reference(x))


@gpu
def test_rowsum_higher_loop_rank_and_axis():
    rng = np.random.default_rng(6)
    x = random_array("float64", (4, 5, 6, 7), rng)
    np.testing.assert_array_equal(rowsum(x), rowsum_reference(x))
    for axis in range(-4, 4):
        want = rowsum_reference(np.moveaxis(x, axis, -1))
        np.testing.assert_array_equal(rowsum(x, axis=axis), want)
        np.testing.assert_array_equal(rowsum(x, axes=[(axis,), ()]), want)
        np.testing.assert_array_equal(rowsum(x, axes=[(axis,)]), want)


@gpu
def test_axes_on_outputs():
    rng = np.random.default_rng(7)
    a = random_array("float32", (4, 4, 10), rng)
    b = random_array("float32", (4, 4, 10), rng)
    got = MATMUL(a, b, axes=[(0, 1), (0, 1), (0, 1)])
    want = np.moveaxis(matmul_reference(np.moveaxis(a, -1, 0), np.moveaxis(b, -1, 0)), 0, -1)
    assert got.shape == (4, 4, 10)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, np.matmul(a, b, axes=[(0, 1), (0, 1), (0, 1)]), rtol=1e-5)
    # the same on the device: the result is a view with the core axes first
    dgot = MATMUL(cuda.to_device(a), cuda.to_device(b), axes=[(0, 1), (0, 1), (0, 1)])
    assert dgot.shape == (4, 4, 10)
    np.testing.assert_array_equal(dgot.copy_to_host(), want)


@gpu
def test_scalar_inputs():
    rng = np.random.default_rng(8)
    x = random_array("float32", (20, 9), rng)
    np.testing.assert_array_equal(axpy(x, 2.5), x * np.float32(2.5))
    assert axpy(x, 2.5).dtype == np.float32  # a Python float is weak (NEP 50)
    a = random_array("float32", (20,), rng)
    np.testing.assert_array_equal(axpy(x, a), x * a[:, None])  # one scalar per loop iteration
    np.testing.assert_array_equal(axpy(x, np.float64(0.5)), (x.astype(np.float64) * 0.5))
    # a scalar per iteration broadcast from a (20, 1) array against (3, 1, 9) rows
    x3 = random_array("float64", (3, 1, 9), rng)
    a2 = random_array("float64", (20,), rng)
    np.testing.assert_array_equal(axpy(x3, a2), x3 * a2[:, None])


@gpu
def test_scalar_outputs_both_ways():
    rng = np.random.default_rng(9)
    v = random_array("float32", (100, 3), rng)
    got = norm3_scalar_out(v)  # declared as a scalar, written out[0]
    want = np.sqrt(v[:, 0] * v[:, 0] + v[:, 1] * v[:, 1] + v[:, 2] * v[:, 2])
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got.shape == (100,) and got.dtype == np.float32
    x = rng.random((10, 7))
    np.testing.assert_allclose(mean_returned(x), x.mean(axis=-1), rtol=1e-14)
    assert rowsum(np.arange(4.0)) == 6.0  # no loop dimensions: a scalar, as NumPy
    assert isinstance(rowsum(np.arange(4.0)), np.floating)


@gpu
def test_several_outputs_and_out_tuple():
    rng = np.random.default_rng(10)
    x = rng.standard_normal((30, 11))
    lo, hi = minmax(x)
    np.testing.assert_array_equal(lo, x.min(axis=-1))
    np.testing.assert_array_equal(hi, x.max(axis=-1))
    olo, ohi = np.empty(30), np.empty(30)
    r = minmax(x, out=(olo, ohi))
    assert r[0] is olo and r[1] is ohi
    np.testing.assert_array_equal(olo, x.min(axis=-1))
    dlo, dhi = cuda.device_array(30), cuda.device_array(30)
    r = minmax(cuda.to_device(x), dlo, dhi)
    assert r[0] is dlo and r[1] is dhi
    np.testing.assert_array_equal(dhi.copy_to_host(), x.max(axis=-1))


@gpu
def test_out_contents_are_seen_by_the_body():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = np.full((3, 4), 10, np.float32)
    accumulate_into(x, out=out)
    np.testing.assert_array_equal(out, x + 10)
    dout = cuda.to_device(np.full((3, 4), 1, np.float32))
    accumulate_into(cuda.to_device(x), out=dout)
    np.testing.assert_array_equal(dout.copy_to_host(), x + 1)


@gpu
def test_out_with_larger_loop_broadcasts_inputs():
    x = np.arange(8, dtype=np.float64).reshape(2, 4)
    out = np.empty((3, 2))
    rowsum(x, out=out)
    np.testing.assert_array_equal(out, np.broadcast_to(x.sum(axis=-1), (3, 2)))


@gpu
def test_fixed_dimensions_and_local_arrays():
    rng = np.random.default_rng(11)
    x = rng.random((40, 16))
    np.testing.assert_array_equal(reverse_local(x), x[:, ::-1])


@gpu
def test_dtype_conversion_of_inputs_and_outputs():
    rng = np.random.default_rng(12)
    x = rng.random((50, 33)).astype(np.float32)
    # int16 reaches the float32 loop safely; the kernel sees float32 copies
    xi = (x * 100).astype(np.int16)
    np.testing.assert_array_equal(rowsum(xi), rowsum_reference(xi.astype(np.float32)))
    dxi = cuda.to_device(xi)
    np.testing.assert_array_equal(rowsum(dxi).copy_to_host(), rowsum_reference(xi.astype(np.float32)))
    # a float64 out= from the float32 loop
    out = np.empty(50)
    rowsum(x, out=out)
    np.testing.assert_array_equal(out, rowsum_reference(x).astype(np.float64))


@gpu
def test_placement_and_streams():
    x = np.ones((8, 16), np.float32)
    assert isinstance(rowsum(x), np.ndarray)
    dx = cuda.to_device(x)
    r = rowsum(dx)
    assert not isinstance(r, np.ndarray) and hasattr(r, "copy_to_host")
    s = cuda.stream()
    r = rowsum(dx, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(r.copy_to_host(), np.full(8, 16, np.float32))
    # a host input with a device out= lands on the device
    dout = cuda.device_array(8, np.float32)
    rowsum(x, out=dout)
    np.testing.assert_array_equal(dout.copy_to_host(), np.full(8, 16, np.float32))


@gpu
def test_in_place_and_overlap():
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    dx = cuda.to_device(x)
    cumsum_dyn(dx, out=dx)  # the same view: in place
    np.testing.assert_array_equal(dx.copy_to_host(), np.cumsum(x, axis=-1))


@gpu
@pytest.mark.parametrize("dtype", ["int8", "uint32", "int64", "float32", "complex64"])
def test_dynamic_gufunc(dtype):
    rng = np.random.default_rng(13)
    x = random_array(dtype, (9, 13), rng)
    got = cumsum_dyn(x)
    assert got.dtype == np.dtype(dtype)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, np.cumsum(x, axis=-1, dtype=dtype))


@gpu
def test_python_loop_reference_over_loop_dimensions():
    """A small np.linalg-style kernel (Cholesky of SPD 3x3 matrices) against a Python loop."""
    @guvectorize(["void(float64[:,:], float64[:,:])"], "(n,n)->(n,n)")
    def cholesky(a, l):
        n = a.shape[0]
        for i in range(n):
            for j in range(n):
                l[i, j] = 0.0
        for j in range(n):
            s = a[j, j]
            for k in range(j):
                s -= l[j, k] * l[j, k]
            l[j, j] = math.sqrt(s)
            for i in range(j + 1, n):
                t = a[i, j]
                for k in range(j):
                    t -= l[i, k] * l[j, k]
                l[i, j] = t / l[j, j]
    rng = np.random.default_rng(14)
    m = rng.standard_normal((6, 5, 3, 3))
    spd = m @ np.swapaxes(m, -1, -2) + 3 * np.eye(3)
    got = cholesky(spd)
    for idx in np.ndindex(6, 5):
        np.testing.assert_allclose(got[idx], np.linalg.cholesky(spd[idx]), rtol=1e-12, atol=1e-12)


@gpu
def test_numpy_scalars_are_strong_python_scalars_weak():
    """NEP 50, as in vectorize: np.float64(2) picks the float64 loop for a float32 array, a
    Python float keeps float32 (np.float64 is a Python float subclass, which must not make it
    weak)."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert axpy(x, 2.0).dtype == np.float32
    assert axpy(x, np.float64(2.0)).dtype == np.float64
    np.testing.assert_array_equal(axpy(x, np.float64(2.0)), x.astype(np.float64) * 2)


# ---- two outputs that share memory ----------------------------------------------------------

@guvectorize(["void(float64[:], float64[:], float64[:])"], "(n)->(n),(n)")
def rev_and_twice(x, r, t):
    n = x.shape[0]
    for i in range(n):
        r[i] = x[n - 1 - i]
        t[i] = 2.0 * x[i]


@guvectorize(["void(float64, float64[:], float64[:])"], "()->(),()")
def halve_and_double(x, h, d):
    d[0] = 2.0 * x
    h[0] = 0.5 * x


def alias_cases(z):
    """Pairs of outputs that share memory, views of z, a (4, 8) array."""
    return [
        (z, z),                      # the same array
        (z, z[:, ::-1]),             # reversed view
        (z[:2], z[1:3]),             # partly overlapping rows
        (z[:, 1:], z[:, :-1]),       # shifted by one element
    ]


def _outs_overlap_check(z, fn, x):
    for outs in alias_cases(z):
        xin = x[: outs[0].shape[0], : outs[0].shape[-1]]
        with pytest.raises(ValueError, match="outputs 0 and 1 .*share memory"):
            fn(xin, out=outs)


@pytest.mark.parametrize("fn", [rev_and_twice, halve_and_double], ids=["core", "no-core"])
def test_outputs_sharing_memory_raise_host(fn):
    # two outputs written to the same memory: which value lands where would depend on the order
    # the body writes them, and with core dimensions on the order of the threads; refused before
    # any GPU work (host out= arrays need no GPU to check)
    _outs_overlap_check(np.zeros((4, 8)), fn, np.arange(32.0).reshape(4, 8))


@gpu
@pytest.mark.parametrize("fn", [rev_and_twice, halve_and_double], ids=["core", "no-core"])
def test_outputs_sharing_memory_raise_device(fn):
    x = cuda.to_device(np.arange(32.0).reshape(4, 8))
    z0 = np.full((4, 8), 7.0)
    z = cuda.to_device(z0)
    _outs_overlap_check(z, fn, x)
    np.testing.assert_array_equal(z.copy_to_host(), z0)  # nothing written


@gpu
def test_disjoint_outputs_of_one_array_work():
    # two halves of one array are separate outputs: no error, both right
    x = np.arange(32.0).reshape(4, 8)
    z = cuda.to_device(np.zeros((8, 8)))
    rev_and_twice(cuda.to_device(x), out=(z[:4], z[4:]))
    got = z.copy_to_host()
    np.testing.assert_array_equal(got[:4], x[:, ::-1])
    np.testing.assert_array_equal(got[4:], 2 * x)
