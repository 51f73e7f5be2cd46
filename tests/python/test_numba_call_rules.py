"""Numba's call rules (functions made with typing='numba', i.e. through cufunc.numba): the loop a
call takes, how scalars are converted, the gufunc schedule of '()' arguments given as one-element
arrays, the exception types; and, in both modes, device arrays hashable by identity and device
inputs with a NumPy out=.

The reference for the loop choice is Numba's own code: numba.cuda.deviceufunc (UFuncMechanism,
GeneralizedUFunc, GUFuncEngine), importable without a GPU. The C rule is asked through
UFunc.resolve / GUFunc.resolve (no launch), and through cufunc._loops (the same C functions).

The rule is a flag of the function object (rules='numba'); here it is set on functions built from
the loops of ordinary cufunc.vectorize / guvectorize functions, so these tests do not depend on
the typing policy. End-to-end tests through cufunc.numba are in test_numba_namespace.py.
"""
import collections
import inspect

import numpy as np
import pytest

import cufunc
from cufunc import _loops, cuda, guvectorize, vectorize
from cufunc.guvectorize import GPUGUFunc
from cufunc.vectorize import GPUUFunc

gpu = pytest.mark.gpu
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack   # numba-cuda 0.30 still names it (removed in NumPy 2.x)
deviceufunc = pytest.importorskip("numba.cuda.deviceufunc",
                                  reason="numba (the reference of Numba's rules) not installed")

I16, I32, I64 = np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.int64)
F32, F64, C128, B = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.complex128), \
    np.dtype(np.bool_)


def numba_rules(f):
    """A copy of ufunc/gufunc f with Numba's call rules (the same loops)."""
    if isinstance(f, GPUGUFunc):
        g = GPUGUFunc(f.__name__, f.signature, rules="numba")
        for types, ndims, source, name, captures in f.loops:
            g.add_loop(types, ndims, source, name, ("--fmad=false",), captures)
        return g
    g = GPUUFunc(f.__name__, f.nin, f.nout, rules="numba")
    for loop in f.loops:
        g.add_loop(*loop)
    return g


# ---- the ufunc rule against numba-cuda's UFuncMechanism (CPU) ------------------------------------

@vectorize(["int16(int16, int16)"])
def add_i16(a, b):
    return a + b


@vectorize(["float32(float32, float32)", "float64(float64, float64)"])
def add_f(a, b):
    return a + b


@vectorize(["int32(int32, int32)", "int64(int64, int64)", "float64(float64, float64)"])
def add_ilf(a, b):
    return a + b


@vectorize(["float64(float64, float64)", "float32(float32, float32)"])
def add_f_rev(a, b):
    return a + b


@vectorize(["float64(int64, float64)", "float32(int16, float32)"])
def mixed(a, b):
    return a * b


UFUNCS = [add_i16, add_f, add_ilf, add_f_rev, mixed]
ARGS = [np.zeros(3, I16), np.zeros(3, I32), np.zeros(3, I64), np.zeros(3, F32),
        np.zeros(3, F64), 15.0, 15, 2**40, True, np.float32(2), np.int64(3), np.float64(1.5),
        np.int16(4), np.array(2.0), np.array(7, np.int16)]


def numba_choice(f, args):
    """The input types numba-cuda's UFuncMechanism resolves for these arguments, or TypeError."""
    typemap = collections.OrderedDict(
        (tuple(np.dtype(t) for t in loop[0][:f.nin]), (loop[0][f.nin], None))
        for loop in f.loops)
    m = deviceufunc.UFuncMechanism(typemap, list(args))
    m._fill_arrays()
    m._fill_argtypes()
    m._resolve_signature()
    return tuple(m.argtypes)


def pairs():
    for f in UFUNCS:
        for a in ARGS:
            for b in ARGS:
                yield f, a, b


@pytest.mark.parametrize("f, a, b", list(pairs()),
                         ids=lambda v: getattr(v, "__name__", None) or (
                             "%s%s" % (type(v).__name__, getattr(v, "dtype", ""))))
def test_ufunc_loop_choice_is_numbas(f, a, b):
    g = numba_rules(f)
    try:
        want = numba_choice(f, (a, b))
    except TypeError:
        with pytest.raises(TypeError):
            g.resolve(a, b)
        want = None
    else:
        assert g.resolve(a, b)[:2] == want
    # the Python mirror agrees
    dts = [np.asarray(v).dtype if not isinstance(v, np.ndarray) else v.dtype for v in (a, b)]
    k = _loops.find([lp[0] for lp in f.loops], 2, dts, _loops.numba_scalars((a, b)),
                    rule="numba-ufunc")
    if want is None:
        assert k < 0
    else:
        assert tuple(f.loops[k][0][:2]) == want


def test_rule_is_a_flag_of_the_function():
    assert add_i16.rules == "numpy" and numba_rules(add_i16).rules == "numba"
    with pytest.raises(ValueError):
        GPUUFunc("f", 1, 1, rules="fortran")
    with pytest.raises(TypeError):   # NEP 50: a Python float does not reach an int16 loop
        add_i16.resolve(np.zeros(3, I16), 15.0)
    assert numba_rules(add_i16).resolve(np.zeros(3, I16), 15.0) == (I16, I16, I16)   # item 1


def test_ambiguous_scalars_are_a_type_error_as_numba():
    # two loops match once the Python scalars are free: Numba refuses ("ambiguous")
    with pytest.raises(TypeError, match="several loops"):
        numba_rules(add_f).resolve(np.float32(2), 3.0)
    with pytest.raises(TypeError):
        numba_choice(add_f, (np.float32(2), 3.0))


def test_arrays_must_match_exactly_as_numba():
    g = numba_rules(add_ilf)
    with pytest.raises(TypeError, match="exactly"):
        g.resolve(np.zeros(3, I16), np.zeros(3, I16))
    assert add_ilf.resolve(np.zeros(3, I16), np.zeros(3, I16))[:2] == (I32, I32)  # NumPy casts


# ---- the gufunc rule against numba-cuda's GeneralizedUFunc (CPU) --------------------------------

@guvectorize(["void(float32[:], float32, float32[:])", "void(float64[:], float64, float64[:])"],
             "(n),()->(n)")
def scale(x, s, out):
    for i in range(x.shape[0]):
        out[i] = x[i] * s


@guvectorize(["void(int16[:], int16, int16[:])"], "(n),()->(n)")
def shift16(x, s, out):
    for i in range(x.shape[0]):
        out[i] = x[i] + s


GU_ARGS = [np.zeros(4, I16), np.zeros(4, I32), np.zeros(4, F32), np.zeros(4, F64)]
GU_SCALARS = [15.0, 15, np.float32(2), np.int64(3), np.zeros(1, F32), np.zeros(1, I16), True]


def numba_gu_choice(f, args):
    kernelmap = collections.OrderedDict(
        (tuple(np.dtype(t) for t in loop[0][:f.nin]), (loop[0][f.nin:], None))
        for loop in f.loops)
    g = deviceufunc.GeneralizedUFunc(kernelmap, None)
    indtypes = tuple(np.asarray(a).dtype for a in args)
    if indtypes in kernelmap:
        return indtypes
    return tuple(g._search_matching_signature(indtypes))


@pytest.mark.parametrize("f", [scale, shift16], ids=lambda f: f.__name__)
@pytest.mark.parametrize("x", GU_ARGS, ids=lambda a: str(a.dtype))
@pytest.mark.parametrize("s", GU_SCALARS, ids=lambda v: "%s%s" % (type(v).__name__,
                                                                   getattr(v, "dtype", "")))
def test_gufunc_loop_choice_is_numbas(f, x, s):
    g = numba_rules(f)
    try:
        want = numba_gu_choice(f, (x, s))
    except TypeError:
        with pytest.raises(TypeError):
            g.resolve(x, s)
        return
    assert g.resolve(x, s)[:2] == want
    dts = [np.asarray(v).dtype for v in (x, s)]
    k = _loops.find([lp[0] for lp in f.loops], 2, dts, None, rule="numba-gufunc")
    assert tuple(f.loops[k][0][:2]) == want


SHAPES = [((4,), (1,)), ((4,), ()), ((3, 4), (1,)), ((3, 4), (3,)), ((1, 4), ()), ((1, 4), (1,)),
          ((2, 4), (2,)), ((4,), (2,)), ((2, 3, 4), (1,)), ((2, 3, 4), (3,))]


@pytest.mark.parametrize("xs, ss", SHAPES, ids=str)
def test_gufunc_schedule_is_numbas(xs, ss):
    """Item 8: the loop dimensions of numba-cuda's GUFuncEngine.schedule (a '()' argument given
    as a one-element array beside a core-shaped one); shapes Numba refuses are ValueErrors in
    both (cufunc broadcasts no further than NumPy does)."""
    engine = deviceufunc.GUFuncEngine.from_signature("(n),()->(n)")
    g = numba_rules(scale)
    x, s = np.zeros(xs, F32), np.zeros(ss, F32)
    try:
        want = engine.schedule([xs, ss]).output_shapes[0]
    except ValueError:
        want = None
    if want is None:
        # Numba refuses; cufunc follows NumPy's broadcasting where it is wider
        try:
            np.broadcast_shapes(xs[:-1], ss)
        except ValueError:
            with pytest.raises(ValueError):
                g.resolve(x, s)
        return
    g.resolve(x, s, out=np.zeros(want, F32))        # binds: the out shape is the schedule's
    with pytest.raises(ValueError):
        g.resolve(x, s, out=np.zeros(want[:-1] + (5,), F32))


def test_gufunc_item8_is_numba_mode_only():
    x, s, out = np.zeros(4, F32), np.zeros(1, F32), np.zeros(4, F32)
    with pytest.raises(ValueError):   # NumPy: loop dimensions (1,)
        scale.resolve(x, s, out=out)
    assert numba_rules(scale).resolve(x, s, out=out) == (F32, F32, F32)


def test_exception_types_at_the_call():
    g = numba_rules(scale)
    with pytest.raises(ValueError):      # core dimensions that do not match (Numba: ValueError)
        g.resolve(np.zeros(4, F32), np.zeros(1, F32), out=np.zeros(5, F32))
    with pytest.raises(ValueError):      # too few dimensions for the core
        g.resolve(np.float32(1), np.float32(1))
    with pytest.raises(TypeError):       # no loop for the inputs (Numba: TypeError)
        g.resolve(np.zeros(4, np.int32), 1.0)
    with pytest.raises(TypeError):       # wrong number of arguments (Numba: TypeError)
        g.resolve(np.zeros(4, F32))
    with pytest.raises(TypeError):
        numba_rules(add_i16).resolve(np.zeros(3, F32), np.zeros(3, F32))


# ---- item 6: device arrays hash by identity (both modes) ----------------------------------------

def test_devicearray_hash_is_identity_on_the_type():
    DA = cufunc._core.DeviceArray
    assert DA.__hash__ is not None
    assert "__eq__" in dir(DA)   # still element-wise (py_twins.c)


@gpu
def test_devicearray_as_dict_key_and_set_member():
    a = cuda.to_device(np.arange(4, dtype=np.float32))
    b = cuda.to_device(np.arange(4, dtype=np.float32))
    assert hash(a) == hash(a) and hash(a) == object.__hash__(a)
    d = {a: "a", b: "b"}
    assert d[a] == "a" and d[b] == "b" and len({a, b, a}) == 2
    assert a in d and b in {b}
    e = a == b                       # == stays element-wise on the device
    assert type(e) is cufunc._core.DeviceArray and e.copy_to_host().all()


# ---- item 7: device inputs with a NumPy out= (both modes) ---------------------------------------

@gpu
@pytest.mark.parametrize("numba", [False, True], ids=["numpy", "numba"])
def test_ufunc_device_inputs_into_host_out(numba):
    f = numba_rules(add_f) if numba else add_f
    a = np.arange(10, dtype=np.float32)
    out = np.zeros(10, np.float32)
    r = f(cuda.to_device(a), cuda.to_device(a), out=out)
    assert r is out
    np.testing.assert_array_equal(out, a + a)
    # the out= dtype differs: the device result is cast into it, as a host call casts
    out64 = np.zeros(10, np.float64)
    assert f(cuda.to_device(a), cuda.to_device(a), out=out64) is out64
    np.testing.assert_array_equal(out64, (a + a).astype(np.float64))


@gpu
@pytest.mark.parametrize("numba", [False, True], ids=["numpy", "numba"])
def test_gufunc_device_inputs_into_host_out(numba):
    g = numba_rules(scale) if numba else scale
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    s = np.array([1, 2, 3], dtype=np.float32)
    out = np.zeros((3, 4), np.float32)
    r = g(cuda.to_device(x), cuda.to_device(s), out=out)
    assert r is out
    np.testing.assert_array_equal(out, x * s[:, None])


# ---- items 1 and 8 and all-scalar calls, launched ------------------------------------------------

@gpu
def test_item1_python_float_for_an_integer_loop():
    f = numba_rules(add_i16)
    a = np.arange(-5, 5, dtype=np.int16)
    r = f(a, 15.0)
    assert r.dtype == np.int16
    np.testing.assert_array_equal(r, a + np.int16(15))
    # converted as Numba converts it: np.array([15.7], dtype=int16) truncates
    np.testing.assert_array_equal(f(a, 15.7), a + np.array([15.7]).astype(np.int16)[0])
    np.testing.assert_array_equal(f(a, np.float64(3.0)), a + np.int16(3))
    with pytest.raises(OverflowError):            # np.array([70000], dtype=int16) raises too
        f(a, 70000)
    d = f(cuda.to_device(a), 15.0)
    np.testing.assert_array_equal(d.copy_to_host(), a + np.int16(15))


@gpu
def test_all_scalar_ufunc_call_gives_a_one_element_array_as_numba():
    r = numba_rules(add_f)(np.float32(2), np.float32(3))
    assert isinstance(r, np.ndarray) and r.shape == (1,) and r.dtype == np.float32 and r[0] == 5
    assert np.ndim(add_f(np.float32(2), np.float32(3))) == 0    # NumPy's: a scalar


@gpu
def test_item8_scalar_as_one_element_array():
    g = numba_rules(scale)
    x = np.arange(4, dtype=np.float32)
    out = np.zeros(4, np.float32)
    r = g(x, np.array([2.5], np.float32), out=out)
    assert r is out
    np.testing.assert_array_equal(out, x * np.float32(2.5))
    r = g(x, np.array([2.5], np.float32))
    assert r.shape == (4,)
    d = g(cuda.to_device(x), cuda.to_device(np.array([3.0], np.float32)))
    assert d.shape == (4,)
    np.testing.assert_array_equal(d.copy_to_host(), x * 3)
    # a Python float for the float32 '()' argument: Numba's can_cast(float32, float64) rule
    np.testing.assert_array_equal(g(x, 2.0), x * 2)


@gpu
def test_gufunc_downcasts_an_input_as_numba():
    # only an int16 loop, an int32 array: Numba takes the int16 loop (np.can_cast(int16, int32))
    # and converts the input (astype); NumPy's rule refuses the unsafe cast
    g = numba_rules(shift16)
    x = np.arange(-3, 5, dtype=np.int32)
    np.testing.assert_array_equal(g(x, 1), x.astype(np.int16) + 1)
    with pytest.raises(TypeError):
        shift16(x, 1)
    with pytest.raises(TypeError):   # int16 does not cast safely to uint16: no loop
        g(x.astype(np.uint16), 1)


def test_resolve_takes_no_gpu_and_mirrors_signature():
    # resolve() is a method of both types and reports loops as np.dtypes
    assert isinstance(inspect.getdoc(GPUUFunc.resolve), str)
    assert add_f.resolve(np.zeros(2, F32), 1.0) == (F32, F32, F32)
    assert scale.resolve(np.zeros(4, F64), 2.0) == (F64, F64, F64)
