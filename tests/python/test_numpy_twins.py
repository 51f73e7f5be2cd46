"""NumPy's ufuncs on cufunc DeviceArrays through their GPU twins, against
NumPy on host copies: np.sin(d), np.add(d, 1.5), reduce/accumulate/outer, the operators of
DeviceArray with NumPy's casting and NEP 50 scalars.

The tests marked gpu run on the GPU machine; loop-list construction, NEP 50 resolution, the
TypeError for a ufunc without a twin, and NVRTC compiling every twin's kernels run everywhere
(the last needs NVRTC, not a GPU)."""
import numpy as np
import pytest

import cufunc
from cufunc import _twins, cuda

gpu = pytest.mark.gpu

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]
NP_UFUNCS = sorted({n for n in dir(np) if isinstance(getattr(np, n), np.ufunc)})
TWINNED = [n for n in NP_UFUNCS if _twins.has_twin(getattr(np, n))]
UNARY = [n for n in TWINNED if getattr(np, n).nin == 1]
BINARY = [n for n in TWINNED if getattr(np, n).nin == 2]


def _nvrtc():
    try:
        cufunc._core.nvrtc_version()
        return True
    except Exception:  # noqa: BLE001
        return False


# ---- no GPU: loop lists, resolution, errors ---------------------------------------------------

@pytest.mark.parametrize("name", ["add", "sin", "less", "maximum", "invert", "logical_and"])
def test_loop_list_is_numpys_order_filtered(name):
    u = getattr(np, name)
    loops = _twins.loop_signatures(u)
    numpy_loops = []
    for t in u.types:
        chars = t.replace("->", "")
        if all(c in "?bhilqBHILQefdFD" for c in chars):
            dts = tuple(np.dtype(c) for c in chars)
            if dts not in numpy_loops:
                numpy_loops.append(dts)
    # same order as NumPy's, nothing NumPy lacks, no object/datetime, no repeats; float16 in
    assert loops == [d for d in numpy_loops if d in loops]
    assert len(set(loops)) == len(loops)
    assert all(d.char not in "OMm" for loop in loops for d in loop)
    if any("e" in t for t in u.types):
        assert any(d.char == "e" for loop in loops for d in loop), name
    assert loops, name


def test_loop_list_keeps_complex_ordering():
    # NumPy orders complex numbers lexicographically; the twins spell that order out
    # (_twin_defs.less__complex, maximum__complex, ...)
    assert any(d.kind == "c" for loop in _twins.loop_signatures(np.maximum) for d in loop)
    assert any(d.kind == "c" for loop in _twins.loop_signatures(np.less) for d in loop)
    assert any(d.kind == "c" for loop in _twins.loop_signatures(np.add) for d in loop)
    assert not any(d.kind == "c" for loop in _twins.loop_signatures(np.logaddexp) for d in loop)


@pytest.mark.parametrize("name", ["gcd", "matmul", "divmod", "frexp", "isnat"])
def test_no_twin_is_a_typeerror_naming_the_ufunc(name):
    u = getattr(np, name)
    assert not _twins.has_twin(u)
    with pytest.raises(TypeError, match="'%s' has no GPU twin" % name):
        _twins.twin(u)


def test_twin_identity_and_types():
    assert _twins.twin(np.add).identity == 0
    assert _twins.twin(np.multiply).identity == 1
    assert _twins.twin(np.maximum).identity == "reorderable"
    assert _twins.twin(np.subtract).identity is None
    assert _twins.twin(np.add).types[:3] == ["??->?", "bb->b", "BB->B"]
    assert _twins.twin(np.sin).types == ["e->e", "f->f", "d->d", "F->F", "D->D"]
    assert _twins.twin(np.add) is _twins.twin(np.add)   # made once


def test_loops_numpy_resolves_to_are_missing_give_typeerror(monkeypatch):
    # a loop NumPy resolves to that the twin lacks (none today: test_twins_fidelity checks every
    # loop) is a TypeError naming it, never a silently different result type
    tw = _twins.twin(np.fmod)
    loop = tuple(np.dtype(c) for c in "bbb")
    monkeypatch.setattr(tw, "loop_set", tw.loop_set - {loop})
    monkeypatch.setattr(_twins, "_RESOLVED", {})
    with pytest.raises(TypeError, match="numpy.fmod has no loop for NumPy's 'bbb'"):
        _twins._converters(np.fmod, (np.zeros(2, np.int8), np.zeros(2, np.int8)))


def _uses_half(u, args):
    """Whether NumPy's resolved loop for these arguments has a float16 operand or result."""
    keys = tuple(type(x) if type(x) in (int, float, complex) else np.asarray(x).dtype
                 for x in args)
    try:
        dts = u.resolve_dtypes(keys + (None,) * u.nout)
    except TypeError:
        return False   # NumPy has no loop at all: its own TypeError, checked elsewhere
    return any(d.char == "e" for d in dts)


HALF_CASES = [(n, dt) for n in UNARY for dt in DTYPES
              if _uses_half(getattr(np, n), (np.ones(2, dt),))] + \
             [(n, dt) for n in BINARY for dt in DTYPES
              if _uses_half(getattr(np, n), (np.ones(2, dt), np.ones(2, dt)))]


def test_float16_cases_exist():
    # the table below is not empty: NumPy takes float16 loops for bool/int8/uint8 inputs
    assert ("arcsin", "bool") in HALF_CASES and ("hypot", "int8") in HALF_CASES
    assert ("sqrt", "float32") not in HALF_CASES and ("sqrt", "float16") in HALF_CASES


@pytest.mark.parametrize("name,dt", HALF_CASES)
def test_float16_loop_is_numpys(name, dt):
    # NumPy's loop is float16 (np.arcsin(bool) is float16): the twin has it and resolves to it,
    # never to a float32 loop; its kernel compiles (NVRTC, no GPU)
    u = getattr(np, name)
    tw = _twins.twin(u)
    args = (np.ones(2, dt),) * u.nin
    want = [np.dtype(d) for d in u.resolve_dtypes((np.dtype(dt),) * u.nin + (None,) * u.nout)]
    conv_args, extra = _twins._args(u, args)
    got = _emulated_loop(tw, [np.asarray(x).dtype for x in conv_args], extra)
    assert got == want[u.nin:], (name, dt, got, want)
    if _nvrtc():
        spec = [s for s in tw.loops if [np.dtype(t) for t in s[0]] == want][0]
        cufunc._core.compile_source(tw.kernel_source(*conv_args), tuple(spec[3]), (9, 0))


def test_unary_operator_resolves_as_numpy_no_gpu():
    # -bool_array is NumPy's TypeError, with NumPy's message, before any GPU work
    neg = [h for h in _twins._hooks if h.__name__ == "negative"][0]
    h = np.ones(3, bool)
    with pytest.raises(TypeError) as want:
        -h
    with pytest.raises(TypeError) as got:
        neg(h)
    assert str(got.value) == str(want.value)
    assert "boolean negative" in str(got.value)


@pytest.mark.parametrize("dt", ["bool", "int8", "uint16", "int64", "float32", "complex64"])
def test_power_of_python_int_two_is_square(dt):
    # NumPy's ndarray ** 2 is np.square (bool ** 2 is int8, np.power(bool, 2) is int64): the twin
    # operator takes the same route, and square's twin resolves to NumPy's result type
    h = np.ones(3, dt)
    want = (h ** 2).dtype
    args, extra = _twins._args(np.square, (h,))
    assert _emulated_loop(_twins.twin(np.square), [h.dtype], extra) == [want]


def test_power_operator_routes_python_int_two_to_square(monkeypatch):
    # NumPy's rule (ndarray.__pow__): only an exact Python int 2 becomes np.square; 2.0, True,
    # np.int64(2) stay np.power. No GPU: the routing is checked with a stand-in array type.
    class Dev:
        pass
    calls = []
    monkeypatch.setattr(_twins, "_DA", Dev)
    monkeypatch.setattr(_twins, "_SQUARE", lambda a: calls.append("square"))
    monkeypatch.setattr(_twins, "_POW", lambda a, b: calls.append(("power", type(b))))
    for b in (2, 2.0, True, np.int64(2), 3):
        _twins._power(Dev(), b)
    assert calls == ["square", ("power", float), ("power", bool), ("power", np.int64),
                     ("power", int)]
    h = np.ones(3, bool)
    assert (h ** 2).dtype == np.int8                                      # NumPy's answers
    if np.lib.NumpyVersion(np.__version__) >= "2.3.0":
        # earlier NumPy 2 took its square fast path for a float 2.0 too (int8 for bool)
        assert (h ** 2.0).dtype == np.float64


def _emulated_loop(tw, in_dtypes, extra):
    """cufunc's resolution (cf_loops_find: first loop reached by safe casting; with dtype=, the
    first loop with that output reached by same_kind casting)."""
    for types in tw.types:
        ins = [np.dtype(c) for c in types.split("->")[0]]
        outs = [np.dtype(c) for c in types.split("->")[1]]
        if "dtype" in extra:
            if outs == [extra["dtype"]] and all(np.can_cast(a, b, "same_kind")
                                                for a, b in zip(in_dtypes, ins)):
                return outs
        elif all(np.can_cast(a, b, "safe") for a, b in zip(in_dtypes, ins)):
            return outs
    return None


SCALARS = [1, -3, 1.5, 2j, True, np.float32(2.5), np.int8(3), np.uint8(200)]


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "true_divide", "power",
                                  "maximum", "less", "floor_divide", "arctan2", "bitwise_and"])
@pytest.mark.parametrize("dt", ["bool", "int8", "uint8", "int32", "uint64", "float32", "float64",
                                "complex64"])
def test_nep50_scalar_resolution_matches_numpy(name, dt):
    # the twin gets each Python scalar as a NumPy scalar of NumPy's resolved type; the twin's
    # own resolution from there must give NumPy's result dtype (NumPy on small host arrays)
    u = getattr(np, name)
    tw = _twins.twin(u)
    h = np.arange(1, 4).astype(dt)
    for s in SCALARS:
        for args in ((h, s), (s, h)):
            try:
                with np.errstate(all="ignore"):
                    want = u(*args).dtype
            except (TypeError, OverflowError) as e:
                with pytest.raises(type(e)):
                    _twins._args(u, args)
                continue
            except ValueError:
                continue   # NumPy's value errors (integers to negative powers) are the host's
            try:
                conv_args, extra = _twins._args(u, args)
            except TypeError:
                assert any(t.kind == "c" for t in (h.dtype, np.asarray(s).dtype)), (name, dt, s)
                continue
            got = _emulated_loop(tw, [np.asarray(x).dtype for x in conv_args], extra)
            assert got == [want], (name, dt, s, got, want)


@pytest.mark.skipif(not _nvrtc(), reason="needs NVRTC")
@pytest.mark.parametrize("name", ["add", "sin", "maximum", "invert", "logaddexp", "sign",
                                  "less_equal", "logical_xor", "power", "remainder"])
def test_twin_kernels_compile(name):
    # every loop of the twin, through NVRTC, without a GPU (all 600+ loops of all twins were
    # checked this way once; here a sample stays in the suite)
    u = getattr(np, name)
    tw = _twins.twin(u)
    for spec in tw.loops:
        ins = [np.zeros(3, dtype=t) for t in spec[0][:u.nin]]
        cufunc._core.compile_source(tw.kernel_source(*ins), tuple(spec[3]), (7, 5))


def test_devicearray_hashes_by_identity_and_has_the_protocol():
    DA = cufunc._core.DeviceArray
    assert DA.__hash__ is not None   # by identity, as Numba's device arrays (dict keys, sets)
    assert "__array_ufunc__" in DA.__dict__
    for op in ("__add__", "__radd__", "__iadd__", "__lt__", "__eq__", "__neg__", "__abs__",
               "__invert__", "__pow__", "__rpow__", "__ipow__", "__rshift__", "__ixor__",
               "__bool__"):
        assert hasattr(DA, op), op


# ---- GPU: against NumPy ------------------------------------------------------------------------

def _values(dt, n=37, shift=0):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return (np.arange(n) % 3 == 0)
    if dt.kind in "iu":
        return ((np.arange(n) + shift) % 5 + 1).astype(dt)
    if dt.kind == "f":
        return (0.1 + 0.8 * ((np.arange(n) * 7 + shift) % 11) / 11).astype(dt)
    return ((0.1 + 0.8 * (np.arange(n) % 11) / 11) + 0.3j).astype(dt)


def _close(got, want, ctx):
    assert got.dtype == want.dtype, (ctx, got.dtype, want.dtype)
    if want.dtype.kind in "fc":
        # float16: NumPy's loop and the GPU's (float32 function rounded to half) may differ by
        # one half ulp where CUDA's float32 function differs from the host's by an ulp
        rtol = (2e-3 if want.dtype == np.float16 else
                2e-6 if want.dtype in (np.float32, np.complex64) else 1e-12)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, equal_nan=True, err_msg=str(ctx))
    else:
        np.testing.assert_array_equal(got, want, err_msg=str(ctx))


def _check(fn, host_args, dev_args, ctx, ufunc=None):
    try:
        with np.errstate(all="ignore"):
            want = fn(*host_args)
    except (TypeError, OverflowError) as e:
        with pytest.raises(type(e)):
            fn(*dev_args)
        return
    try:
        got = fn(*dev_args)
    except TypeError as e:
        # a loop the language cannot give NumPy's meaning: refused, never a different answer
        assert "has no loop for NumPy's" in str(e), (ctx, e)
        return
    assert type(got) is cufunc._core.DeviceArray, ctx
    _close(got.copy_to_host(), want, ctx)


@gpu
@pytest.mark.parametrize("name", UNARY)
def test_unary_twins_against_numpy(name):
    u = getattr(np, name)
    for dt in DTYPES:
        h = _values(dt)
        _check(u, (h,), (cuda.to_device(h),), (name, dt), u)


@gpu
@pytest.mark.parametrize("name", BINARY)
def test_binary_twins_against_numpy(name):
    u = getattr(np, name)
    for dt in DTYPES:
        a, b = _values(dt), _values(dt, shift=3)
        _check(u, (a, b), (cuda.to_device(a), cuda.to_device(b)), (name, dt), u)
        for s in (2, 1.5):
            _check(u, (a, s), (cuda.to_device(a), s), (name, dt, s), u)
            _check(u, (s, a), (s, cuda.to_device(a)), (name, s, dt), u)


@gpu
@pytest.mark.parametrize("a_dt,b_dt", [("int8", "uint8"), ("int32", "float32"), ("uint64", "int64"),
                                       ("float32", "complex64"), ("bool", "int16")])
def test_mixed_dtypes_follow_numpy(a_dt, b_dt):
    a, b = _values(a_dt), _values(b_dt, shift=1)
    for u in (np.add, np.multiply, np.less, np.true_divide):
        _check(u, (a, b), (cuda.to_device(a), cuda.to_device(b)), (u.__name__, a_dt, b_dt))


@gpu
def test_np_sin_runs_on_the_gpu_not_the_host():
    h = np.linspace(0, 3, 1000, dtype=np.float32)
    d = cuda.to_device(h)
    r = np.sin(d)
    assert type(r) is cufunc._core.DeviceArray
    np.testing.assert_allclose(r.copy_to_host(), np.sin(h), rtol=2e-6, atol=1e-6)
    # np.asarray stays the explicit host copy
    assert type(np.asarray(d)) is np.ndarray
    np.testing.assert_array_equal(np.asarray(d), h)


@gpu
def test_ufunc_without_twin_raises_typeerror():
    d = cuda.to_device(np.arange(6, dtype=np.int64))
    with pytest.raises(TypeError, match="'gcd' has no GPU twin"):
        np.gcd(d, d)
    # reduceat has a twin since it is implemented (test_reduceat.py): it answers as NumPy does
    np.testing.assert_array_equal(np.add.reduceat(d, [0, 2]).copy_to_host(),
                                  np.add.reduceat(np.arange(6), [0, 2]))


@gpu
def test_out_and_where_keywords():
    h = np.arange(10, dtype=np.float64)
    d = cuda.to_device(h)
    o = cuda.device_array(10, np.float64)
    r = np.multiply(d, 2.0, out=o)
    assert r is o
    np.testing.assert_array_equal(o.copy_to_host(), h * 2)
    r = np.add(d, d, out=(o,))
    assert r is o
    np.testing.assert_array_equal(o.copy_to_host(), h * 2)


@gpu
@pytest.mark.parametrize("dt", ["int8", "int32", "uint16", "float32", "float64", "bool"])
def test_reduce_accumulate_outer(dt):
    h = _values(dt, n=60).reshape(6, 10)
    d = cuda.to_device(h)
    for u in (np.add, np.multiply, np.maximum, np.minimum):
        for axis in (0, 1, None):
            _check(lambda x: u.reduce(x, axis=axis), (h,), (d,), (u.__name__, "reduce", axis))
        _check(lambda x: u.accumulate(x, axis=1), (h,), (d,), (u.__name__, "accumulate"))
    a, b = _values(dt, n=5), _values(dt, n=7, shift=2)
    _check(np.multiply.outer, (a, b), (cuda.to_device(a), cuda.to_device(b)), ("outer", dt))
    _check(np.subtract.outer, (a, b), (cuda.to_device(a), cuda.to_device(b)), ("outer", dt))


# ---- operators --------------------------------------------------------------------------------

BINOPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b, "//": lambda a, b: a // b, "%": lambda a, b: a % b,
    "**": lambda a, b: a ** b, "&": lambda a, b: a & b, "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


@gpu
@pytest.mark.parametrize("op", sorted(BINOPS))
@pytest.mark.parametrize("dt", ["bool", "int8", "int64", "uint32", "float32", "float64", "complex128"])
def test_binary_operators(op, dt):
    f = BINOPS[op]
    a, b = _values(dt), _values(dt, shift=2)
    da, db = cuda.to_device(a), cuda.to_device(b)
    _check(f, (a, b), (da, db), (op, dt))
    for s in (2, 1.5, True):
        _check(f, (a, s), (da, s), (op, dt, s))
        _check(f, (s, a), (s, da), (op, s, dt))     # reflected
    _check(f, (a, b), (da, b), (op, dt, "host"))    # a NumPy array beside: uploaded, result on GPU


@gpu
@pytest.mark.parametrize("dt", ["bool", "int8", "int64", "uint8", "float32", "complex64"])
def test_unary_operators(dt):
    h = _values(dt)
    d = cuda.to_device(h)
    for name, f in (("neg", lambda x: -x), ("pos", lambda x: +x), ("abs", abs),
                    ("invert", lambda x: ~x)):
        _check(f, (h,), (d,), (name, dt))


@gpu
def test_comparisons_give_bool_device_arrays():
    d = cuda.to_device(np.arange(5, dtype=np.float32))
    r = d < 2
    assert type(r) is cufunc._core.DeviceArray and r.dtype == np.bool_
    np.testing.assert_array_equal(r.copy_to_host(), np.arange(5) < 2)
    e = d == d
    assert e.dtype == np.bool_ and e.copy_to_host().all()
    assert (d == None) is False   # noqa: E711 - Python's answer, as for a NumPy array's ==
    assert (d == "text") is False
    assert hash(d) == object.__hash__(d) and {d: 1}[d] == 1 and d in {d}   # identity hash
    # NumPy's truth rule: `d in [e]` must not answer from the length
    with pytest.raises(ValueError, match="ambiguous"):
        bool(d < 2)
    with pytest.raises(ValueError, match="ambiguous"):
        d in [cuda.to_device(np.zeros(5, np.float32))]
    assert bool(cuda.to_device(np.array([3.0]))) is True
    assert bool(cuda.to_device(np.array([0]))) is False


@gpu
def test_inplace_operators_write_into_the_array():
    h = np.arange(8, dtype=np.float32)
    d = cuda.to_device(h)
    ptr = d.ptr
    d0 = d
    d += 1
    d *= 2.5
    d -= d
    d += np.float32(3)
    assert d is d0 and d.ptr == ptr and d.dtype == np.float32
    np.testing.assert_array_equal(d.copy_to_host(), np.full(8, 3, np.float32))
    i = cuda.to_device(np.arange(8, dtype=np.int32))
    i0 = i
    i += 1
    i <<= 2
    i //= 3
    i **= 2
    assert i is i0 and i.dtype == np.int32
    hi = np.arange(8, dtype=np.int32)
    hi += 1
    hi <<= 2
    hi //= 3
    hi **= 2
    np.testing.assert_array_equal(i.copy_to_host(), hi)


@gpu
def test_inplace_same_kind_casting_as_numpy():
    i = cuda.to_device(np.arange(8, dtype=np.int32))
    with pytest.raises(TypeError, match="same_kind|cast"):
        i += 1.5
    with pytest.raises(TypeError):
        i /= 2                       # true_divide gives float64: not same_kind into int32
    np.testing.assert_array_equal(i.copy_to_host(), np.arange(8, dtype=np.int32))
    f = cuda.to_device(np.ones(4, np.float32))
    f += np.ones(4, np.float64)      # float64 -> float32 is same_kind: allowed, as NumPy
    np.testing.assert_array_equal(f.copy_to_host(), np.full(4, 2, np.float32))


@gpu
def test_nep50_python_scalars_keep_the_array_dtype():
    d = cuda.to_device(np.arange(4, dtype=np.float32))
    assert (d + 1.5).dtype == np.float32
    assert (d * 2).dtype == np.float32
    u8 = cuda.to_device(np.arange(4, dtype=np.uint8))
    assert (u8 + 1).dtype == np.uint8
    assert (u8 + 1.5).dtype == np.float64
    with pytest.raises(OverflowError):
        u8 + 300
    assert (u8 + np.int64(1)).dtype == np.int64   # a NumPy scalar is strong


@gpu
def test_unknown_operand_gives_python_typeerror():
    d = cuda.to_device(np.arange(4, dtype=np.float32))

    class Other:
        __array_ufunc__ = None

    with pytest.raises(TypeError):
        d + Other()


@pytest.mark.parametrize("dt", ["float64", "int64", "complex128", "float32"])
def test_arrays_of_default_dtypes_are_not_taken_for_python_scalars(dt):
    # np.dtype('float64') == float holds: the weak-scalar test must be by identity
    h = np.zeros(3, dt)
    for other in (1.5, 2, h):
        args, _ = _twins._args(np.add, (h, other))
        assert args[0] is h
        assert _twins._converters(np.add, (h, other))[0][0] is None


@pytest.mark.parametrize("name", ["bitwise_and", "add", "multiply", "true_divide", "equal"])
def test_python_bool_and_bool_array_are_told_apart_whatever_the_order(name):
    # A Python bool and a bool array have the same dtype; the resolution cache once took one for
    # the other, so after `True & d`, `d & True` converted the array with np.bool_(d): a silent
    # copy to the host (seen on the GPU: a NumPy array back from a DeviceArray operator)
    uf = getattr(np, name)
    h = np.array([True, False, True])
    for order in [(True, h), (h, True), (True, h)]:
        scal, _ = _twins._converters(uf, order)
        want = tuple(np.bool_ if x is True else None for x in order)
        assert scal == want, (name, order, scal)
        args, _ = _twins._args(uf, order)
        assert [a is h for a in args] == [x is h for x in order], (name, order)


@gpu
@pytest.mark.parametrize("op", sorted(BINOPS))
def test_bool_operators_with_python_bool_on_either_side(op):
    f = BINOPS[op]
    a = _values("bool")
    da = cuda.to_device(a)
    for s_first in (True, False, True):
        args, dargs = ((True, a), (True, da)) if s_first else ((a, True), (da, True))
        _check(f, args, dargs, (op, s_first))
