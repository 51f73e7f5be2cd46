"""Numba's habits for gufuncs and decorators.

- A NumPy scalar of a wider type at a gufunc's scalar parameter is cast as Numba casts it: Numba
  takes the first loop whose type casts safely *to* the given one, then converts with astype (C
  casting: truncation, wrap-around). A device array of the wrong type stays an error.
- Old-style scalar parameters: a '()' core dimension declared as a 1-element array.
- A guvectorized function returning a value: TypeError at decoration, in Numba's words.
- The wrong number of positional arguments: TypeError saying how many are accepted.
- cuda.jit on a plain function: an error saying what cufunc offers instead, and README lists it.
"""

import os

import numpy as np
import pytest

from cufunc import cuda, guvectorize
from cufunc import _env
from cufunc.errors import UnsupportedError


@guvectorize(["void(int32[:], int32, int32[:])"], "(n),()->(n)")
def add_scalar(a, b, out):
    for i in range(a.shape[0]):
        out[i] = a[i] + b


@guvectorize(["void(int32[:], int32[:], int32[:])"], "(n),()->(n)")
def add_old_style(a, b, out):
    for i in range(a.shape[0]):
        out[i] = a[i] + b[0]


@guvectorize(["void(float32[:], float32, float32[:])", "void(float64[:], float64, float64[:])"],
             "(n),()->(n)")
def scale(a, k, out):
    for i in range(a.shape[0]):
        out[i] = a[i] * k


A = np.arange(5, dtype=np.int32)

# (scalar, expected offset as Numba computes it: np.asarray(scalar).astype(int32))
SCALARS = [
    (2, 2),
    (np.int32(2), 2),
    (np.int64(2), 2),
    (np.int16(-3), -3),
    (np.float64(2.7), 2),                   # truncation, as astype
    (np.int64(2 ** 32 + 3), 3),             # wrap-around, as astype
    (np.array(2, dtype=np.int64), 2),       # a 0-d array is a scalar here
]


def needs_core():
    if _env.core is None:
        pytest.skip("needs cufunc's C extension")


@pytest.mark.parametrize("scalar", [s for s, _ in SCALARS], ids=repr)
@pytest.mark.parametrize("gu", [add_scalar, add_old_style], ids=["scalar", "old-style"])
def test_wider_numpy_scalar_resolves_to_the_loop_without_a_gpu(gu, scalar):
    needs_core()
    src = gu.kernel_source(A, scalar)      # loop selection and casting checks, no GPU
    assert "int32" in src or "int" in src


@pytest.mark.gpu
@pytest.mark.parametrize("scalar,offset", SCALARS, ids=[repr(s) for s, _ in SCALARS])
@pytest.mark.parametrize("gu", [add_scalar, add_old_style], ids=["scalar", "old-style"])
def test_wider_numpy_scalar_is_cast_as_numba_casts_it(gu, scalar, offset):
    r = gu(A, scalar)
    assert r.dtype == np.int32
    np.testing.assert_array_equal(r, A + offset)
    np.testing.assert_array_equal(gu(cuda.to_device(A), scalar).copy_to_host(), A + offset)


def test_numpy_scalar_takes_numpys_loop_where_one_matches_without_a_gpu():
    # Numba's scalar rule is the fallback where no loop takes the inputs under NumPy's casting
    # (test_wider_numpy_scalar_*); where one does, NumPy's rule decides, as for np.add and
    # test_gufunc_scalars.py::test_core_dim_array_with_scalar: a float32 array with np.float64(0.5)
    # runs the float64 loop, with 0.5 or np.float32(0.5) the float32 loop
    needs_core()
    a = np.arange(4, dtype=np.float32)
    for k, t in [(np.float64(0.5), "cf_float64"), (np.float32(0.5), "cf_float32"),
                 (0.5, "cf_float32")]:
        # operand 1 a scalar parameter (S) of the loop type t (gu_kernel.cuh's CF_GU_OPS)
        assert "F(1, S, I, 0, %s, " % t in scale.kernel_source(a, k)


@pytest.mark.gpu
def test_numpy_scalar_takes_numpys_loop_where_one_matches():
    a = np.arange(4, dtype=np.float32)
    r = scale(a, np.float64(0.5))
    assert r.dtype == np.float64 == np.result_type(a, np.float64(0.5))
    np.testing.assert_array_equal(r, a * np.float64(0.5))
    r = scale(a, np.float32(0.5))
    assert r.dtype == np.float32
    np.testing.assert_array_equal(r, a * np.float32(0.5))


@pytest.mark.gpu
def test_device_array_of_the_wrong_type_stays_an_error():
    with pytest.raises(TypeError, match="int64"):
        add_scalar(A, cuda.to_device(np.array(2, dtype=np.int64)))
    with pytest.raises(TypeError, match="int64"):
        add_scalar(cuda.to_device(A.astype(np.int64)), np.int32(2))


def test_host_array_of_the_wrong_type_at_an_array_parameter_stays_an_error():
    needs_core()
    with pytest.raises(TypeError, match="int64"):
        add_scalar.kernel_source(A.astype(np.int64), 2)


def test_old_style_scalar_declaration_is_accepted():
    assert add_old_style.types == add_scalar.types
    assert add_old_style.signature == "(n),()->(n)"


@pytest.mark.gpu
def test_old_style_scalar_parameter_values():
    np.testing.assert_array_equal(add_old_style(A, 10), A + 10)
    out = np.zeros_like(A)
    add_old_style(A, np.int32(-1), out)
    np.testing.assert_array_equal(out, A - 1)
    # broadcasting over the scalar's loop dimensions, as a '()' operand
    b = np.array([1, 2, 3], dtype=np.int32)
    r = add_old_style(np.tile(A, (3, 1)), b)
    np.testing.assert_array_equal(r, np.tile(A, (3, 1)) + b[:, None])


RETURNING = [
    ("void(int32[:], int32[:])", "(n)->(n)", "return 1"),
    ("void(float32[:], float32[:])", "(n)->()", "return x[0]"),
]


@pytest.mark.parametrize("sig,layout,ret", RETURNING, ids=["int", "float"])
def test_returning_a_value_is_a_typeerror_at_decoration(sig, layout, ret):
    import inspect
    import linecache
    import tempfile
    # the translator reads the function's source: give it a file
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write("def f(x, out):\n    out[0] = x[0]\n    %s\n" % ret)
        path = fh.name
    try:
        ns = {}
        code = compile(open(path).read(), path, "exec")
        exec(code, ns)
        f = ns["f"]
        assert inspect.getsource(f)
        with pytest.raises(TypeError, match="guvectorized functions cannot return values") as ei:
            guvectorize([sig], layout)(f)
        msg = str(ei.value)
        assert "f returns" in msg and layout in msg            # cufunc's detail kept
        assert "output arguments" in msg                       # and what to do instead
    finally:
        os.unlink(path)
        linecache.checkcache(path)


WRONG_COUNTS = [
    ((A,), "takes from 2 to 3 positional arguments but 1 were given"),
    ((A, 1, np.zeros(5, np.int32), 4), "takes from 2 to 3 positional arguments but 4 were given"),
    ((), "takes from 2 to 3 positional arguments but 0 were given"),
]


@pytest.mark.parametrize("args,match", WRONG_COUNTS, ids=["1", "4", "0"])
def test_wrong_number_of_positional_arguments(args, match):
    needs_core()
    with pytest.raises(TypeError, match=match):
        add_scalar(*args)
    with pytest.raises(TypeError, match=match):
        add_scalar.kernel_source(*args)


def test_cuda_jit_kernel_is_an_error_naming_what_cufunc_offers():
    with pytest.raises(UnsupportedError) as ei:
        @cuda.jit
        def kernel(a):
            a[0] = 1
    msg = str(ei.value)
    assert "device=True" in msg and "vectorize" in msg and "guvectorize" in msg
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")).read()
    section = readme[readme.index("## Not supported"):]
    assert "cuda.jit" in section.split("\n## ")[0]
