"""Which loop a call on scalars runs: NEP 50, the same rule for ufuncs and gufuncs, against NumPy.

NumPy (NEP 50): a Python int/float/complex is "weak" beside a typed operand (NumPy scalar, 0-d or
n-d array, device array): it takes the precision of the typed operands, as long as its kind is not
higher than theirs (np.float32 array + 2.0 is float32, but an int8 array + 2.0 is float64 and
np.True_ + 2 is int64). Alone (every input a Python scalar) the scalars are their default types:
int64, float64, complex128 (np.add(2.0, 3.0) is float64).

The oracle is np.add, whose loops for the dtypes cufunc has are the homogeneous loops below in the
same order: the loop cufunc picks must be the one whose dtype np.add gives. The loop is read from
kernel_source(), which resolves the call exactly as the call does and needs no GPU. The GPU tests
check output dtypes and values of real calls. At the end: reduce and accumulate take the
arguments a call takes (DLPack objects, scalars).
"""

import itertools
import re

import numpy as np
import pytest

from cufunc import guvectorize, vectorize

# np.add's loops that cufunc can build, in np.add's order (float16 included; np.longlong/ulonglong
# are the same dtypes as int64/uint64 here).
CHARS = ["?", "b", "B", "h", "H", "i", "I", "l", "L", "e", "f", "d", "F", "D"]
NAMES = [np.dtype(c).name for c in CHARS]


def first(a, b):
    return a


def gfirst(a, b, r):
    r[0] = a


def rowfirst(x, s, r):
    for i in range(x.shape[0]):
        r[i] = x[i]


UF = vectorize(["%s(%s, %s)" % (t, t, t) for t in NAMES])(first)
GU = guvectorize(["void(%s, %s, %s[:])" % (t, t, t) for t in NAMES], "(),()->()")(gfirst)
GU_ROW = guvectorize(["void(%s[:], %s, %s[:])" % (t, t, t) for t in NAMES],
                     "(n),()->(n)")(rowfirst)


def loop_inputs(fn, src, nin):
    """The input dtypes of the loop a kernel was generated for (its '/* name: sig */' line)."""
    m = re.search(r"/\* %s: \w+\(([^)]*)\) \*/" % fn, src)
    assert m, "no loop signature line for %s in the kernel source" % fn
    return [re.sub(r"\[.*\]", "", t.strip()) for t in m.group(1).split(",")][:nin]


PY_SCALARS = [2, 2.0, 2j, True, False, -3, 0.5, -2**63]
NP_SCALARS = [np.dtype(c).type(1) for c in CHARS]
ZERO_D = [np.array(1, c) for c in CHARS]
ARRAYS = [np.ones(3, c) for c in CHARS]
VALUES = PY_SCALARS + NP_SCALARS + ZERO_D + ARRAYS


def describe(v):
    if isinstance(v, np.ndarray):
        return "array(ndim=%d, %s)" % (v.ndim, v.dtype)
    return "%s(%r)" % (type(v).__name__, v)


def outcome(f, a, b):
    """The dtype name f picks, or the exception type a Python int out of range raises."""
    try:
        r = f(a, b)
    except OverflowError:  # NEP 50: -3 is out of bounds for a uint32 operand
        return "OverflowError"
    return r if isinstance(r, str) else r.dtype.name


def mismatches(pick, values_a, values_b):
    bad = []
    for a, b in itertools.product(values_a, values_b):
        expected, got = outcome(np.add, a, b), outcome(pick, a, b)
        if not expected.startswith("OverflowError"):
            assert expected in NAMES  # the oracle's loop is one cufunc has
        if got != expected:
            bad.append("%s, %s: %s (NumPy %s)" % (describe(a), describe(b), got, expected))
    return bad


@pytest.mark.parametrize("engine", ["ufunc", "gufunc"])
def test_python_scalars_alone_are_their_default_types(engine):
    # every input a Python scalar: int64, float64, complex128 and bool, strong
    if engine == "ufunc":
        pick = lambda a, b: loop_inputs("first", UF.kernel_source(a, b), 2)[0]  # noqa: E731
    else:
        pick = lambda a, b: loop_inputs("gfirst", GU.kernel_source(a, b), 2)[0]  # noqa: E731
    assert mismatches(pick, PY_SCALARS, PY_SCALARS) == []


@pytest.mark.parametrize("engine", ["ufunc", "gufunc"])
@pytest.mark.parametrize("a", VALUES, ids=describe)
def test_loop_matches_numpy(engine, a):
    # every kind of first input against every kind of second: Python scalars weak beside typed
    # operands unless their kind is higher, NumPy scalars and 0-d arrays strong
    if engine == "ufunc":
        pick = lambda a, b: loop_inputs("first", UF.kernel_source(a, b), 2)[0]  # noqa: E731
    else:
        pick = lambda a, b: loop_inputs("gfirst", GU.kernel_source(a, b), 2)[0]  # noqa: E731
    assert mismatches(pick, [a], VALUES) == []


@pytest.mark.parametrize("big", [2**63, 2**64 - 1, -2**63 - 1, 10**30])
def test_huge_python_int_with_python_float(big):
    # NumPy converts a Python int beside a Python float straight to float64 (np.add(2**63, 2.0));
    # it was once kept as int64 on its way into the float64 loop and overflowed
    assert np.add(big, 2.0) == float(big) + 2.0
    for f, name in ((UF, "first"), (GU, "gfirst")):
        assert loop_inputs(name, f.kernel_source(big, 2.0), 2)[0] == "float64"


@pytest.mark.parametrize("big", [2**63, 2**64])
def test_huge_python_ints_alone_overflow_as_in_numpy(big):
    with pytest.raises(OverflowError):
        np.add(big, 1)
    for f in (UF, GU):
        with pytest.raises(OverflowError):
            f.kernel_source(big, 1)


@pytest.mark.parametrize("row", ARRAYS, ids=describe)
def test_core_dim_array_with_scalar(row):
    # (n),()->(n): an array for the core dimension and a scalar for the scalar core dimension;
    # float32 array + 2.0 runs float32, + np.float64(2.0) runs float64, as np.add does
    pick = lambda a, b: loop_inputs("rowfirst", GU_ROW.kernel_source(a, b), 2)[0]  # noqa: E731
    assert mismatches(pick, [row], PY_SCALARS + NP_SCALARS + ZERO_D) == []


# ---- real calls (GPU) -----------------------------------------------------------------------

@guvectorize(["void(float32, float32, float32[:])", "void(float64, float64, float64[:])"],
             "(),()->()")
def gadd(a, b, r):
    r[0] = a + b


@guvectorize(["void(float32[:], float32, float32[:])", "void(float64[:], float64, float64[:])"],
             "(n),()->(n)")
def row_add(x, s, r):
    for i in range(x.shape[0]):
        r[i] = x[i] + s


@vectorize(["float32(float32, float32)", "float64(float64, float64)"])
def uadd(a, b):
    return a + b


TINY = 1e-10  # lost in float32 next to 1.0, kept in float64


@pytest.mark.gpu
@pytest.mark.parametrize("fn", [gadd, uadd], ids=["gufunc", "ufunc"])
@pytest.mark.parametrize("args, dtype", [
    ((1.0, TINY), np.float64),                          # Python floats alone: float64
    ((1, TINY), np.float64),
    ((np.float32(1.0), TINY), np.float32),              # weak beside a float32 scalar
    ((np.float32(1.0), np.float64(TINY)), np.float64),  # NumPy scalars are strong
    ((np.int8(1), TINY), np.float64),                   # a float beside an int: float64
])
def test_scalar_call_dtype_and_value(fn, args, dtype):
    expected = np.add(*args)
    assert expected.dtype == dtype
    r = fn(*args)
    r = r.copy_to_host() if hasattr(r, "copy_to_host") else np.asarray(r)
    assert r.dtype == dtype
    assert r == expected


@pytest.mark.gpu
@pytest.mark.parametrize("scalar, dtype", [
    (TINY, np.float32),                # weak: the array's float32
    (np.float64(TINY), np.float64),    # strong
    (np.array(TINY), np.float64),      # a 0-d array is strong
    (np.float32(TINY), np.float32),
])
def test_row_with_scalar_dtype_and_value(scalar, dtype):
    from cufunc import cuda
    h = np.ones(1000, np.float32)
    expected = np.add(h, scalar)
    assert expected.dtype == dtype
    r = row_add(cuda.to_device(h), scalar)
    assert r.dtype == dtype
    np.testing.assert_array_equal(r.copy_to_host(), expected)


# ---- reduce and accumulate take what a call takes ----------------------------------------------

class DLPackOnly:
    """An array known only through DLPack (as a JAX array or another library's would be)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def _error(f):
    try:
        f()
    except Exception as e:  # noqa: BLE001 - the error itself is compared
        return type(e), str(e)
    return None


@pytest.mark.parametrize("method", ["reduce", "accumulate"])
def test_reduce_takes_dlpack_objects_as_a_call_does(method):
    # a DLPack object is imported as device memory by a call; reduce/accumulate did not look at
    # __dlpack__ and took it for an object array ("dtype object is not supported"). A host
    # DLPack object is refused the same way by both (no GPU needed to see it).
    x = DLPackOnly(np.arange(5.0))
    call_err = _error(lambda: uadd(x, 1.0))
    assert call_err is not None and "DLPack" in call_err[1]
    err = _error(lambda: getattr(uadd, method)(x))
    assert err is not None and err[0] is call_err[0] and "DLPack" in err[1], err


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["reduce", "accumulate"])
def test_reduce_of_dlpack_device_object(method):
    from cufunc import cuda
    h = np.random.default_rng(3).standard_normal((64, 33))
    d = DLPackOnly(cuda.to_device(h))
    r = getattr(uadd, method)(d, axis=1)
    np.testing.assert_allclose(r.copy_to_host(), getattr(np.add, method)(h, axis=1), rtol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("value", [2.0, np.float32(2.5), np.array(1.5), np.float64(3.0)],
                         ids=describe)
def test_reduce_of_scalars(value):
    # a Python or NumPy scalar reduces as the 0-d array NumPy makes of it
    for axis in (None, (), 0):
        expected = np.add.reduce(value, axis=axis)
        got = uadd.reduce(value, axis=axis)
        assert type(got) is type(expected) and got == expected, (axis, got, expected)
