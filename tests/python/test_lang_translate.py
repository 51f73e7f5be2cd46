"""The kernel-language translator (cufunc.lang): every construct and builtin of docs/language.md, for
every type it accepts, translates; result types follow CPython on NumPy scalars; the output is
deterministic; and every translation made here compiles with NVRTC (one batched program) and with
the host C++ compiler. Behaviour (values) is checked by the differential harness
(lang_harness.py); this file checks typing, structure and compilability. No GPU needed."""

import cmath
import ctypes
import importlib
import math
import os
import subprocess
import sys
import types as _pytypes
import warnings

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
TEMPLATES = os.path.join(ROOT, "templates")


import cufunc.lang as L  # noqa: E402
import cufunc.types as T  # noqa: E402
translate, jit, local = L.translate, L.jit, L.local
TypingError, UnsupportedError = L.TypingError, L.UnsupportedError

# --------------------------------------------------------------------------------------------
# compiling generated code

_NVRTC = None


def _core_compile():
    try:
        core = importlib.import_module("cufunc._core")
    except Exception:
        return None
    return getattr(core, "compile_source", None)


def _nvrtc_lib():
    global _NVRTC
    if _NVRTC is None:
        names = []
        for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
            if base:
                names += [os.path.join(base, "lib64", n) for n in ("libnvrtc.so.13",
                                                                     "libnvrtc.so")]
        names += ["libnvrtc.so.13", "libnvrtc.so"]
        for n in names:
            try:
                _NVRTC = ctypes.CDLL(n)
                break
            except OSError:
                continue
        else:
            _NVRTC = False
    return _NVRTC or None


def nvrtc_compile(source, fastmath=False):
    """Compile for sm_90 with NVRTC: (ok, log). cufunc._core.compile_source when the extension
    has it (the product's path, templates embedded), else libnvrtc through ctypes."""
    options = ["-std=c++17"] + (["--use_fast_math"] if fastmath else ["--fmad=false"])
    core = _core_compile()
    if core is not None:
        try:
            core(source, options, (9, 0))
            return True, ""
        except Exception as e:  # CompileError: the message carries the log
            return False, str(e)
    lib = _nvrtc_lib()
    if lib is None:
        pytest.skip("NVRTC is not available (no cufunc._core.compile_source, no libnvrtc)")
    prog = ctypes.c_void_p()
    r = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"lang_test.cu", 0, None,
                               None)
    assert r == 0, "nvrtcCreateProgram failed: %d" % r
    opts = options + ["-arch=sm_90", "-I%s" % TEMPLATES]
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    r = lib.nvrtcCompileProgram(prog, len(opts), arr)
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(max(n.value, 1))
    lib.nvrtcGetProgramLog(prog, buf)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return r == 0, buf.value.decode(errors="replace")


def gxx_check(source, tmp_path):
    path = os.path.join(str(tmp_path), "lang_host.cpp")
    with open(path, "w") as f:
        f.write(source)
    try:
        p = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-Werror=return-type",
                            "-I" + TEMPLATES, path], capture_output=True, text=True)
    except OSError:
        pytest.skip("no g++")
    return p.returncode == 0, p.stderr


def numbered(source):
    return "\n".join("%5d  %s" % (i + 1, l) for i, l in enumerate(source.splitlines()))


# Every translation made by a test in this file is recorded; test_zz_* compile them all.
TRANSLATED = []


def tr(func, argtypes, ret=None, fastmath=False):
    r = translate(func, argtypes, ret, fastmath=fastmath)
    assert r.source.startswith('#include "cufunc/runtime.cuh"\n')
    assert r.name in r.source
    TRANSLATED.append(r)
    return r


def body_of(r):
    """The C text of the entry function only."""
    src = r.source
    start = src.index("#ifndef CF_DEF_%s\n" % r.name)
    return src[start:src.index("#endif", start)]


# --------------------------------------------------------------------------------------------
# CPython reference typing

SCALARS = [T.bool_, T.int8, T.int16, T.int32, T.int64, T.uint8, T.uint16, T.uint32, T.uint64,
           T.float32, T.float64, T.complex64, T.complex128]
REALS = SCALARS[:-2]
INTS = [T.int8, T.int16, T.int32, T.int64, T.uint8, T.uint16, T.uint32, T.uint64]
FLOATS = [T.float32, T.float64]
COMPLEX = [T.complex64, T.complex128]


def sample(t, v=1):
    return t.dtype.type(v)


def cpython_type(func, argtypes, values=None):
    """The cufunc type of what CPython returns for func on NumPy scalars, or the exception."""
    args = [sample(t, 1 if values is None else values[i]) for i, t in enumerate(argtypes)]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            v = func(*args)
        except (TypeError, ValueError, OverflowError) as e:
            return e
    if isinstance(v, bool):
        return T.bool_
    if isinstance(v, int):
        return T.int64
    if isinstance(v, float):
        return T.float64
    if isinstance(v, complex):
        return T.complex128
    if isinstance(v, tuple):
        return T.Tuple(cpython_type(lambda: x, []) for x in v)
    return T.from_dtype(v.dtype)


def check_against_cpython(func, argtypes, values=None):
    """Translate; the return type must be CPython's, or both must reject the types."""
    expect = cpython_type(func, argtypes, values)
    if isinstance(expect, Exception):
        with pytest.raises((TypingError, UnsupportedError)):
            translate(func, argtypes)
        return None
    r = tr(func, argtypes)
    assert r.return_type == expect, "%s%s: got %s, CPython gives %s" % (
        func.__name__, [str(t) for t in argtypes], r.return_type, expect)
    return r


# --------------------------------------------------------------------------------------------
# operators on every type

def op_add(a, b): return a + b
def op_sub(a, b): return a - b
def op_mul(a, b): return a * b
def op_truediv(a, b): return a / b
def op_floordiv(a, b): return a // b
def op_mod(a, b): return a % b
def op_pow(a, b): return a ** b
def op_lshift(a, b): return a << b
def op_rshift(a, b): return a >> b
def op_and(a, b): return a & b
def op_or(a, b): return a | b
def op_xor(a, b): return a ^ b
def cmp_lt(a, b): return a < b
def cmp_le(a, b): return a <= b
def cmp_eq(a, b): return a == b
def cmp_ne(a, b): return a != b
def cmp_gt(a, b): return a > b
def cmp_ge(a, b): return a >= b


BINARY = [op_add, op_sub, op_mul, op_truediv, op_floordiv, op_mod, op_pow, op_lshift, op_rshift,
          op_and, op_or, op_xor, cmp_lt, cmp_le, cmp_eq, cmp_ne, cmp_gt, cmp_ge]
MIXED_PAIRS = [(T.int8, T.uint8), (T.int16, T.uint16), (T.int32, T.uint32), (T.int64, T.uint64),
               (T.uint64, T.int8), (T.int32, T.float32), (T.int64, T.float32),
               (T.uint64, T.float64), (T.bool_, T.int8), (T.bool_, T.float32),
               (T.float32, T.float64), (T.float32, T.complex64), (T.float64, T.complex64),
               (T.int16, T.complex64), (T.uint8, T.int64), (T.int8, T.bool_)]
PAIRS = [(t, t) for t in SCALARS] + MIXED_PAIRS


@pytest.mark.parametrize("op", BINARY, ids=[f.__name__ for f in BINARY])
def test_binary_operators_all_types(op):
    for a, b in PAIRS:
        check_against_cpython(op, [a, b])


def lit_add(a): return a + 1
def lit_radd(a): return 1 + a
def lit_mulf(a): return a * 2.0
def lit_rsubf(a): return 0.5 - a
def lit_div(a): return a / 2
def lit_floordiv(a): return a // 3
def lit_rmod(a): return 7 % a
def lit_pow(a): return a ** 2
def lit_pow3(a): return a ** 3
def lit_cplx(a): return a * 1j
def lit_bool(a): return a + True
def lit_shift(a): return a << 2
def lit_cmp(a): return a < 300
def lit_cmpf(a): return a == 0.1
def lit_neg(a): return -a
def lit_pos(a): return +a
def lit_inv(a): return ~a
def lit_not(a): return not a


LITERAL_OPS = [lit_add, lit_radd, lit_mulf, lit_rsubf, lit_div, lit_floordiv, lit_rmod, lit_pow,
               lit_pow3, lit_cplx, lit_bool, lit_shift, lit_cmp, lit_cmpf, lit_neg, lit_pos,
               lit_inv, lit_not]


@pytest.mark.parametrize("op", LITERAL_OPS, ids=[f.__name__ for f in LITERAL_OPS])
def test_weak_literals_and_unary_all_types(op):
    # NEP 50: a Python literal takes the other operand's type where it fits.
    for t in SCALARS:
        check_against_cpython(op, [t])


def test_weak_literal_keeps_float32():
    r = tr(lit_mulf, [T.float32])
    assert r.return_type == T.float32
    body = body_of(r)
    assert "2.0f" in body and "cf_float64" not in body and "double" not in body
    r = tr(lit_add, [T.int8])
    assert r.return_type == T.int8 and "cf_int64" not in body_of(r).split("{", 1)[1]


def half_int(i): return i * 0.5
def int_div(i, j): return i / j


def test_int_times_float_literal_and_int_division_are_float64():
    assert tr(half_int, [T.int32]).return_type == T.float64
    assert tr(int_div, [T.int32, T.int32]).return_type == T.float64
    assert tr(int_div, [T.int8, T.int8]).return_type == T.float64


def lit_out_of_range(a): return a + 300


def test_literal_out_of_bounds_is_a_compile_error():
    # NumPy 2 raises OverflowError for np.int8(1) + 300; the translator refuses it up front.
    with pytest.raises(TypingError, match="300 out of bounds for int8"):
        translate(lit_out_of_range, [T.int8])
    assert tr(lit_out_of_range, [T.int16]).return_type == T.int16


def cmp_big(a): return a < 1000
def cmp_neg(a): return a > -1


def test_comparisons_with_python_ints_are_exact():
    # np.int8(1) < 1000 is True and np.uint64(5) > -1 is True in NumPy 2: no wrapping.
    r = tr(cmp_big, [T.int8])
    assert r.return_type == T.bool_
    r = tr(cmp_neg, [T.uint64])
    assert "cf_lang_" in body_of(r)         # the exact signed/unsigned comparison
    r = tr(cmp_neg, [T.int32])
    assert "cf_int64" not in body_of(r).split("{", 1)[1]  # -1 fits int32: compared as int32


def chain3(a, b, c): return a < b <= c
def chain_mixed(a, b): return 0 <= a < b < 10 != a
def chain_calls(a, b): return a < math.sqrt(b) < a + 5


def test_chained_comparisons():
    for t in REALS:
        check_against_cpython(chain3, [t, t, t])
    check_against_cpython(chain_mixed, [T.int32, T.float32])
    r = tr(chain_calls, [T.float32, T.float32])
    # the middle operand is evaluated once (stored in a temporary)
    assert body_of(r).count("cf_sqrt(") == 1


def bool_or(a, b): return a or b
def bool_and(a, b): return a and b
def bool_mix(a, b): return (a > 0 and b) or a
def bool_not(a, b): return not (a and b)


def test_and_or_value_semantics():
    for t in SCALARS:
        r = tr(bool_or, [t, t])
        assert r.return_type == t
        tr(bool_and, [t, t])
        assert tr(bool_not, [t, t]).return_type == T.bool_
    assert tr(bool_or, [T.int8, T.float32]).return_type == T.float32
    assert tr(bool_mix, [T.int32, T.int32]).return_type == T.int32
    r = tr(bool_or, [T.float32, T.float32])
    assert "?" in body_of(r)   # short-circuit, value of the first truthy operand


def ifexp(a, b): return a if a > b else b
def ifexp_lit(a): return a if a > 0 else 0


def ifexp_tuple(a, b):
    q, r = divmod(a, b) if b != 0 else (0, a)
    return q * 10 + r


def test_conditional_expression_of_tuples():
    for t in [T.int32, T.uint8, T.float32]:
        assert tr(ifexp_tuple, [t, t]).return_type == t


def test_conditional_expression():
    for t in REALS:
        assert tr(ifexp, [t, t]).return_type == t
    assert tr(ifexp, [T.int32, T.float32]).return_type == T.float64
    assert tr(ifexp_lit, [T.float32]).return_type == T.float32


# --------------------------------------------------------------------------------------------
# builtins

def b_abs(a): return abs(a)
def b_min2(a, b): return min(a, b)
def b_max3(a, b): return max(a, b, 1)
def b_round(a): return round(a)
def b_pow(a, b): return pow(a, b)
def b_divmod(a, b): return divmod(a, b)
def b_int(a): return int(a)
def b_float(a): return float(a)
def b_bool(a): return bool(a)
def b_complex1(a): return complex(a)
def b_complex2(a, b): return complex(a, b)


def _rounds_complex():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # NumPy 2.x before 2.3 warns
        try:
            round(np.complex128(1.5))
            return True
        except TypeError:
            return False


_NP_ROUNDS_COMPLEX = _rounds_complex()   # NumPy before 2.3: round() of a complex scalar works


@pytest.mark.parametrize("t", SCALARS, ids=str)
def test_builtins_one_argument(t):
    for f in (b_abs, b_int, b_float, b_bool, b_complex1):
        check_against_cpython(f, [t])
    if t != T.bool_ and not (t in (T.complex64, T.complex128) and _NP_ROUNDS_COMPLEX):
        # np.bool_ has no __round__; NumPy's complex scalars lost theirs (the kernels follow that)
        check_against_cpython(b_round, [t])


@pytest.mark.parametrize("t", SCALARS, ids=str)
def test_builtins_two_arguments(t):
    for f in (b_min2, b_max3, b_pow, b_divmod):
        if f is b_max3 and t == T.bool_:
            # CPython returns one of the objects (here np.bool_); the translator types min/max
            # by promotion, as docs/language.md says: bool with a Python int is int64.
            assert tr(f, [t, t]).return_type == T.int64
            continue
        check_against_cpython(f, [t, t])
    if t.kind != "c":
        check_against_cpython(b_complex2, [t, t])


def test_builtins_mixed():
    assert tr(b_min2, [T.int8, T.float32]).return_type == T.float32
    assert tr(b_max3, [T.uint8, T.uint8]).return_type == T.uint8
    assert tr(b_divmod, [T.int32, T.int32]).return_type == T.Tuple([T.int32, T.int32])
    assert tr(b_abs, [T.complex64]).return_type == T.float32
    assert tr(b_round, [T.float32]).return_type == T.int64   # Python's round returns an int
    r = tr(b_min2, [T.float32, T.float32])
    assert "cf_min(" in body_of(r)   # Python's min, not fminf


def b_len(A): return len(A)
def b_int0(): return int() + float() + bool() + complex()


def test_len_and_no_argument_constructors():
    assert tr(b_len, [T.float32[:, :]]).return_type == T.int64
    assert tr(b_int0, []).return_type == T.complex128


# --------------------------------------------------------------------------------------------
# math, cmath, numpy functions

MATH1 = ["sqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
         "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "floor",
         "ceil", "trunc", "fabs", "erf", "erfc", "gamma", "lgamma", "isnan", "isinf",
         "isfinite", "degrees", "radians"]
MATH2 = ["atan2", "hypot", "fmod", "remainder", "copysign", "pow"]
CMATH1 = ["sqrt", "exp", "log", "log10", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
          "cosh", "tanh", "asinh", "acosh", "atanh", "phase", "isnan", "isinf", "isfinite"]


def _mk1(mod, name):
    fn = getattr(mod, name)

    def f(x):
        return fn(x)
    f.__name__ = "%s_%s" % (mod.__name__, name)
    return f


def _mk2(mod, name):
    fn = getattr(mod, name)

    def f(x, y):
        return fn(x, y)
    f.__name__ = "%s_%s" % (mod.__name__, name)
    return f


@pytest.mark.parametrize("name", MATH1)
def test_math_one_argument(name):
    f = _mk1(math, name)
    for t in [T.float32, T.float64, T.int32, T.int64, T.uint8, T.bool_]:
        r = tr(f, [t])
        expect = {"floor": T.int64, "ceil": T.int64, "trunc": T.int64, "isnan": T.bool_,
                  "isinf": T.bool_, "isfinite": T.bool_}.get(name, T.float64)
        assert r.return_type == expect
        body = body_of(r)
        if t == T.float32 and name not in ("isnan", "isinf", "isfinite"):
            # the float32 CUDA function: the argument is not widened to double first
            assert "cf_cast<cf_float64>(x)" not in body
            assert "cf_%s(x)" % name in body
    for t in COMPLEX:
        with pytest.raises(TypingError, match="real number"):
            translate(f, [t])


@pytest.mark.parametrize("name", MATH2)
def test_math_two_arguments(name):
    f = _mk2(math, name)
    for a, b in [(T.float32, T.float32), (T.float64, T.float64), (T.float32, T.int32),
                 (T.int64, T.int8), (T.float32, T.float64)]:
        r = tr(f, [a, b])
        assert r.return_type == T.float64
    assert "cf_%s(x, y)" % name in body_of(tr(f, [T.float32, T.float32]))


def m_log2arg(x, b): return math.log(x, b)
def m_ldexp(x, i): return math.ldexp(x, i)
def m_frexp(x):
    m, e = math.frexp(x)
    return m, e
def m_modf(x): return math.modf(x)
def m_consts(x): return x * math.pi + math.e - math.tau + (math.inf if x > 0 else math.nan)


def test_math_special_forms():
    assert tr(m_log2arg, [T.float32, T.float32]).return_type == T.float64
    for t in [T.float32, T.float64, T.int32]:
        assert tr(m_ldexp, [t, T.int32]).return_type == T.float64
        assert tr(m_frexp, [t]).return_type == T.Tuple([T.float64, T.int64])
        assert tr(m_modf, [t]).return_type == T.Tuple([T.float64, T.float64])
    r = tr(m_consts, [T.float32])
    assert r.return_type == T.float32      # Python-float constants are weak


@pytest.mark.parametrize("name", CMATH1)
def test_cmath_functions(name):
    f = _mk1(cmath, name)
    for t in [T.complex64, T.complex128, T.float32, T.float64, T.int32]:
        r = tr(f, [t])
        expect = {"phase": T.float64, "isnan": T.bool_, "isinf": T.bool_,
                  "isfinite": T.bool_}.get(name, T.complex128)
        assert r.return_type == expect


def c_polar(z): return cmath.polar(z)
def c_rect(r, p): return cmath.rect(r, p)
def c_parts(z): return z.real + z.imag + z.conjugate() + abs(z)


def test_cmath_special_and_complex_attributes():
    assert tr(c_polar, [T.complex64]).return_type == T.Tuple([T.float64, T.float64])
    assert tr(c_rect, [T.float32, T.float32]).return_type == T.complex128
    for t in SCALARS:
        check_against_cpython(c_parts, [t])


NP1 = ["sqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
       "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
       "floor", "ceil", "trunc", "rint", "fabs", "degrees", "radians", "abs", "absolute",
       "isnan", "isinf", "isfinite", "conjugate", "real", "imag", "square", "negative"]
NP1 += [n for n in ("asin", "acos", "atan", "asinh", "acosh", "atanh") if hasattr(np, n)]
NP2 = ["arctan2", "hypot", "copysign", "fmod", "remainder", "power", "floor_divide",
       "true_divide", "add", "subtract", "multiply", "ldexp"]
NP2 += [n for n in ("atan2", "pow") if hasattr(np, n)]


@pytest.mark.parametrize("name", NP1)
def test_numpy_functions_one_argument(name):
    f = _mk1(np, name)
    for t in SCALARS:
        expect = cpython_type(f, [t])
        try:
            r = translate(f, [t])
        except (TypingError, UnsupportedError) as e:
            # NumPy rejects it, or gives float16 (int8 -> float16), or complex where the
            # runtime has no complex variant
            assert (isinstance(expect, Exception)
                    or (t.kind == "c" and name in ("exp2", "expm1", "log2", "log1p", "fabs",
                                                   "degrees", "radians", "rint"))), (name, t, e)
            continue
        TRANSLATED.append(r)
        assert r.return_type == expect, (name, t)


@pytest.mark.parametrize("name", NP2)
def test_numpy_functions_two_arguments(name):
    f = _mk2(np, name)
    for a, b in [(T.float32, T.float32), (T.float64, T.float64), (T.int32, T.int32),
                 (T.float32, T.int64), (T.uint8, T.int8)]:
        if name == "ldexp":
            a_b = (a, T.int32)
        else:
            a_b = (a, b)
        expect = cpython_type(f, list(a_b))
        try:
            r = translate(f, list(a_b))
        except (TypingError, UnsupportedError):
            assert isinstance(expect, Exception) or (
                name == "fmod" and a_b[0].kind != "f"), (name, a_b)
            continue
        TRANSLATED.append(r)
        assert r.return_type == expect, (name, a_b)


def np_consts(x): return x * np.pi + np.e - (np.inf if x > 0 else np.nan)
def np_frexp(x): return np.frexp(x)
def np_modf(x): return np.modf(x)


def test_numpy_constants_and_tuple_functions():
    assert tr(np_consts, [T.float32]).return_type == T.float32
    assert tr(np_frexp, [T.float32]).return_type == T.Tuple([T.float32, T.int32])
    assert tr(np_modf, [T.float64]).return_type == T.Tuple([T.float64, T.float64])


# --------------------------------------------------------------------------------------------
# casts

def cast_np(x): return np.float32(x) + np.int16(x)
def cast_cf(x): return T.float32(x) * T.uint8(x)
def cast_complex(x, y): return np.complex64(x, y)
def cast_bool(x): return np.bool_(x)


@pytest.mark.parametrize("t", SCALARS, ids=str)
def test_type_calls_cast(t):
    check_against_cpython(cast_bool, [t])
    if t.kind != "c":
        assert tr(cast_np, [t]).return_type == T.float32
        assert tr(cast_cf, [t]).return_type == T.float32
        assert tr(cast_complex, [t, t]).return_type == T.complex64


# --------------------------------------------------------------------------------------------
# statements

def st_if(x):
    if x > 10:
        y = x * 2
    elif x > 0:
        y = x + 1
    elif x == 0:
        pass
        y = x
    else:
        y = -x
    return y


def st_while(n):
    """A docstring is ignored."""
    i = 0
    s = 0
    while i < n:
        i += 1
        if i % 3 == 0:
            continue
        if s > 1000:
            break
        s += i
    return s


def st_for(n, step):
    s = 0
    for i in range(n):
        s += i
    for i in range(2, n):
        s -= i
    for i in range(n, -n, -1):
        s += i
    for i in range(0, n, step):
        s ^= i
    for i in range(n, 0, -3):
        s += 2 * i
    for i in range(-5, 100, 7):
        if i > n:
            break
        s += i
    return s


def st_nested(n):
    total = 0.0
    for i in range(n):
        for j in range(i):
            if j == 3:
                continue
            total += i * j
            while total > 100.0:
                total /= 2
    return total


def st_multi_return(x):
    if x < 0:
        return 0
    if x > 100:
        return 100.5
    return x


def st_unpack(x, y):
    a, b = x, y
    a, b = b, a
    c = d = a + b
    e, f, g = a, b, c
    return a - b + c * d + e - f + g


def st_aug(x, y):
    z = x
    z += y
    z -= 1
    z *= y
    z //= 3
    z %= 7
    z **= 2
    z <<= 1
    z >>= 1
    z &= 0xFF
    z |= 3
    z ^= y
    return z


def st_aug_float(x, y):
    z = x
    z += y
    z -= 1
    z *= y
    z /= 3
    z //= 2
    z %= 7
    z **= 2
    return z


def st_annotated(x):
    y: float = x * 2
    return y


def st_var_join(x, n):
    acc = 0
    for i in range(n):
        acc += x
    return acc


def st_var_join2(x):
    v = 1
    if x > 0:
        v = 2.5
    return v


def st_tuple_var(x):
    t = (x, x + 1)
    a = t[0] + t[-1]
    t = (x * 2, x)
    return a + t[1] + len(t)


def st_infinite_loop_return(x):
    while True:
        x += 1
        if x > 10:
            return x


def st_void(A, x):
    A[0] = x
    return


def st_no_return(A, x):
    A[0] = x


def test_statements():
    for t in [T.int32, T.float32, T.uint8, T.float64, T.complex64]:
        tr(st_unpack, [t, t])
    for t in [T.int32, T.float32, T.uint8, T.float64]:
        tr(st_if, [t])
        tr(st_while, [t])
    for t in INTS:
        tr(st_nested, [t])
    for t in INTS:
        tr(st_for, [t, t])
        check_against_cpython(st_aug, [t, t], values=[5, 3])
    for t in FLOATS:
        check_against_cpython(st_aug_float, [t, t], values=[5, 3])
    assert tr(st_multi_return, [T.int32]).return_type == T.float64
    assert tr(st_multi_return, [T.float32]).return_type == T.float32
    assert tr(st_annotated, [T.float32]).return_type == T.float32
    assert tr(st_var_join, [T.float32, T.int32]).return_type == T.float32
    assert tr(st_var_join, [T.int8, T.int32]).return_type == T.int8
    assert tr(st_var_join2, [T.float32]).return_type == T.float64
    assert tr(st_tuple_var, [T.int16]).return_type == T.int16
    assert tr(st_infinite_loop_return, [T.int32]).return_type == T.int32
    assert tr(st_void, [T.float32[:], T.float32]).return_type == T.void
    assert tr(st_no_return, [T.float32[:], T.float32]).return_type == T.void


DEBUG = False


def st_static_branches(x):
    if DEBUG:
        print("x =", x)      # never translated: the branch is pruned
    if not DEBUG:
        y = x + 1
    else:
        y = "unused"
    while False:
        x = [x]
    if True:
        return y
    return


def test_constant_conditions_prune_branches():
    r = tr(st_static_branches, [T.int32])
    assert r.return_type == T.int32
    assert "if (" not in body_of(r)


def test_declared_return_type_converts():
    r = tr(st_multi_return, [T.int32], T.int16)
    assert r.return_type == T.int16
    assert "cf_int16 %s(" % r.name in r.source
    r = tr(half_int, [T.float32], T.float32)
    assert r.return_type == T.float32


def test_range_loops_are_overflow_safe_and_exact():
    r = tr(st_for, [T.int64, T.int64])
    body = body_of(r)
    assert "cf_lang_range_len(" in body        # general step: trip count computed exactly
    assert "++" in body and "--" in body       # unit steps: plain counting loops


# --------------------------------------------------------------------------------------------
# arrays

def arr_1d(A, B, i):
    B[i] = A[i] * 2 + A[-1]
    B[-i] += A[i - 1]


def arr_2d(A, B):
    m, n = A.shape
    for i in range(m):
        for j in range(n):
            B[i, j] = A[i, j] + A.shape[1] + A.size + A.ndim + len(A)


def arr_3d(A):
    s = 0.0
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            for k in range(A.shape[2]):
                s += A[i, j, k]
    return s


def arr_idx_types(A, i8, u16, i64, b):
    return A[i8] + A[u16] + A[i64] + A[b]


def arr_local(x):
    tmp = local.array(4, np.float32)
    grid = local.array((2, 3), T.int32)
    for i in range(4):
        tmp[i] = x * i
    for i in range(2):
        for j in range(3):
            grid[i, j] = i * 3 + j
    return tmp[3] + tmp[-1] + grid[1, 2] + tmp.shape[0] + grid.size


def arr_complex(Z, out):
    for i in range(Z.shape[0]):
        out[i] = abs(Z[i]) + Z[i].real


def test_arrays_all_element_types():
    for t in SCALARS:
        tr(arr_1d, [t[:], t[:], T.int32])
        tr(arr_2d, [t[:, :], t[:, ::1]])
    for t in SCALARS:
        # s = 0.0; s += A[i, j, k]: the weak 0.0 adopts float32 / complex64
        expect = cpython_type(lambda a: 0.0 + a, [t])
        assert tr(arr_3d, [t[:, :, :]]).return_type == expect


def test_array_index_types_and_wrap():
    r = tr(arr_idx_types, [T.float32[:], T.int8, T.uint16, T.int64, T.int32])
    body = body_of(r)
    assert body.count("cf_lang_wrap(") == 3     # uint16 needs no negative-index wrap
    r = tr(arr_2d, [T.float32[:, :], T.float32[:, :]])
    assert "cf_lang_wrap" not in body_of(r)      # range(...) counters are never negative


def test_local_arrays():
    r = tr(arr_local, [T.float32])
    assert r.return_type == T.float64
    body = body_of(r)
    assert "cf_float32 cf_loc0[4];" in body and "cf_int32 cf_loc1[6];" in body


def test_complex_arrays():
    tr(arr_complex, [T.complex64[:], T.float32[:]])
    tr(arr_complex, [T.complex128[:], T.float64[:]])


# --------------------------------------------------------------------------------------------
# globals

G_INT = 7
G_FLOAT = 0.25
G_BIG = 2 ** 40
G_F32 = np.float32(1.5)
G_U8 = np.uint8(200)
G_TUPLE = (1, 2.5, np.int16(3))
G_TABLE = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
G_ITABLE = np.arange(10, dtype=np.int64) - 5
G_BTABLE = np.array([True, False])
G_CTABLE = np.array([1 + 2j, -3.5j], dtype=np.complex64)


def gl_numbers(x):
    return x * G_INT + G_FLOAT + G_F32 + G_U8 + G_BIG


def gl_tuple(x):
    a, b, c = G_TUPLE
    return x + a + b + c + G_TUPLE[1] + len(G_TUPLE)


def gl_tables(i, j):
    return G_TABLE[i, j] + G_ITABLE[i] + G_ITABLE[-1] + G_BTABLE[j % 2] + G_TABLE.shape[1]


def gl_ctable(i):
    return G_CTABLE[i]


def test_captured_constants():
    r = tr(gl_numbers, [T.float32])
    # G_INT, G_FLOAT, G_BIG are Python numbers (weak); G_F32/G_U8 are NumPy scalars (strong)
    assert r.return_type == cpython_type(gl_numbers, [T.float32])
    assert "7.0f" in body_of(r)
    r = tr(gl_tuple, [T.int32])
    assert r.return_type == cpython_type(gl_tuple, [T.int32])


def test_captured_numpy_arrays_are_constant_tables():
    r = tr(gl_tables, [T.int32, T.int32])
    assert r.return_type == T.float64
    assert "CF_LANG_TABLE cf_float32" in r.source
    assert "1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f" in r.source
    assert "(-5LL), (-4LL)" in r.source
    assert "true, false" in r.source
    r = tr(gl_ctable, [T.int64])
    assert r.return_type == T.complex64
    assert "CF_LANG_TABLE cf_float32" in r.source and "{1.0f, 2.0f, (-0.0f), (-3.5f)}" in r.source


def test_later_changes_to_globals_have_no_effect():
    global G_INT
    r1 = translate(gl_numbers, [T.float32])
    old = G_INT
    try:
        G_INT = 9
        r2 = translate(gl_numbers, [T.float32])
    finally:
        G_INT = old
    assert r1.source != r2.source and "9.0f" in r2.source and "7.0f" in r1.source


class FakeDeviceArray:
    """Anything with __cuda_array_interface__ counts as a device array."""

    def __init__(self, shape, typestr, ptr=0x7000):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (ptr, False), "version": 3, "strides": None}


G_DEV = FakeDeviceArray((16,), "<f4", 0x1234000)
G_DEV2 = FakeDeviceArray((4, 4), "<i4", 0x5678000)


def gl_dev(i):
    return G_DEV[i] + G_DEV2[i % 4, 0]


@jit(device=True)
def dev_reads_global(i):
    return G_DEV[i] * 2


def gl_dev_nested(i):
    return dev_reads_global(i) + G_DEV2[0, i]


def test_captured_device_arrays_are_parameters():
    r = tr(gl_dev, [T.int32])
    names = [n for n, _ in r.device_array_globals]
    assert [o for _, o in r.device_array_globals] == [G_DEV, G_DEV2]
    assert r.device_array_types == [T.float32[:], T.int32[:, :]]
    head = body_of(r).split("\n")
    sig = [l for l in head if r.name + "(" in l][0]
    assert sig.endswith("cf_int32 i, cf_array_ref<cf_float32, 1> %s, "
                        "cf_array_ref<cf_int32, 2> %s)" % tuple(names))
    # no pointer value in the source: the kernel stays cacheable
    assert "1234000" not in r.source and hex(0x1234000) not in r.source
    # nested: the callee's device array comes through the caller's parameters
    r = tr(gl_dev_nested, [T.int32])
    assert [o for _, o in r.device_array_globals] == [G_DEV, G_DEV2] or \
        [o for _, o in r.device_array_globals] == [G_DEV2, G_DEV]


# --------------------------------------------------------------------------------------------
# device functions

@jit(device=True)
def d_plain(a, b):
    return a * b + 1


@jit("float32(float32, float32)", device=True)
def d_sig(a, b):
    return a - b


@jit(device=True)
def d_tuple(a, b):
    return a + b, a - b


def d_module_level(x):
    return x * 3


@jit(device=True)
def d_writes(A, i, v):
    A[i] = v


def d_calls(x, y, A):
    p, m = d_tuple(x, y)
    d_writes(A, 0, p)
    return d_plain(x, y) + d_sig(x, y) + d_module_level(m) + d_plain(x, 2)


def d_shared_a(x): return d_plain(x, x)
def d_shared_b(x): return d_plain(x, x) + 1


def test_device_functions():
    r = tr(d_calls, [T.float32, T.float32, T.float32[:]])
    assert r.return_type == T.float32
    # d_plain typed per call site: (float32, float32) and (float32, Python int)
    assert r.source.count("/* d_plain: ") == 2
    assert "struct cf_tuple_float32_float32" in r.source
    r64 = tr(d_calls, [T.float64, T.int32, T.float64[:]])
    assert r64.return_type == T.float64   # d_sig converts its arguments to float32
    # the same callee used by two functions: one definition when pasted together
    a, b = tr(d_shared_a, [T.int32]), tr(d_shared_b, [T.int32])
    both = a.source + b.source
    callee = [l for l in both.splitlines() if l.startswith("CF_LANG_FN") and "d_plain" in l]
    assert len(set(callee)) == 1


def test_device_function_objects():
    assert d_plain(2, 3) == 7                        # runs the Python function
    assert isinstance(d_plain, L.DeviceFunction)
    assert d_plain.__name__ == "d_plain"
    src = d_sig.inspect_cuda()                       # the one declared signature
    assert "cf_float32" in src and src.startswith('#include "cufunc/runtime.cuh"')
    src2 = d_plain.inspect_cuda("int8(int8, int8)")
    assert "cf_int8" in src2
    assert d_plain.inspect_cuda([T.float32, T.float32]) == translate(
        d_plain, [T.float32, T.float32]).source
    with pytest.raises(TypeError):
        d_plain.inspect_cuda()                       # no signature to choose
    assert L.inspect_cuda(d_module_level, "float32(float32)") == translate(
        d_module_level, [T.float32], T.float32).source
    f = jit(d_module_level, device=True)
    assert isinstance(f, L.DeviceFunction) and f(2) == 6
    with pytest.raises(UnsupportedError, match="device=True"):
        jit(d_module_level)
    with pytest.raises(TypeError):
        jit(device=True, bogus=1)
    with pytest.raises(ValueError):   # SignatureError
        jit("float32(float32", device=True)


class NumbaLikeDispatcher:
    """What numba.cuda.jit(device=True) returns: an object with .py_func."""

    def __init__(self, f):
        self.py_func = f


nb_dev = NumbaLikeDispatcher(d_module_level)


def d_numba_like(x):
    return nb_dev(x)


def test_numba_style_device_function():
    assert tr(d_numba_like, [T.int16]).return_type == T.int16


def _cufunc_cuda():
    try:
        return importlib.import_module("cufunc.cuda")
    except Exception:
        return None


CUDA = _cufunc_cuda()


def body_cuda_namespace(x):
    a = CUDA.local.array((2, 2), CUDA_F32)
    a[1, 1] = x
    return cuda_dev(a[1, 1])


CUDA_F32 = T.float32
cuda_dev = CUDA.jit(device=True)(d_module_level) if CUDA is not None else None


def test_cufunc_cuda_namespace():
    if CUDA is None:
        pytest.skip("cufunc.cuda does not import here")
    # cuda.local is the language's; cuda.jit wraps lang.jit (it adds typing=) and makes the same
    # DeviceFunction
    assert CUDA.local is local
    assert isinstance(cuda_dev, L.DeviceFunction) and cuda_dev.typing == "numpy"
    assert tr(body_cuda_namespace, [T.float32]).return_type == T.float32


class _FakeNumbaLocal:
    @staticmethod
    def array(shape, dtype):
        raise AssertionError("not called at translation time")


def body_numba_local(x):
    a = numba_cuda.local.array(3, np.int16)
    a[0] = x
    return a[0]


numba_cuda = _pytypes.SimpleNamespace(local=_FakeNumbaLocal())


def test_numba_cuda_local_array_is_recognised(monkeypatch):
    # a body written for numba (cuda = numba.cuda) still works; numba itself is never imported
    fake = _pytypes.ModuleType("numba.cuda")
    fake.local = numba_cuda.local
    monkeypatch.setitem(sys.modules, "numba.cuda", fake)
    r = tr(body_numba_local, [T.int16])
    assert "cf_int16 cf_loc0[3];" in r.source
    monkeypatch.delitem(sys.modules, "numba.cuda")
    with pytest.raises(UnsupportedError):
        translate(body_numba_local, [T.int16])


def test_local_array_in_python():
    a = local.array((2, 3), np.float32)
    assert a.shape == (2, 3) and a.dtype == np.float32
    assert local.array(4, T.int64).dtype == np.int64


# --------------------------------------------------------------------------------------------
# closures, lambdas

def make_closure(k):
    def inner(x):
        return x * k
    return inner


def test_closure_variables_are_constants():
    f = make_closure(3)
    r = tr(f, [T.int8])
    assert r.return_type == T.int8 and "((cf_int8)3)" in body_of(r)


lam = lambda x, y: x * y + 2  # noqa: E731


def test_lambda_body():
    assert tr(lam, [T.float32, T.float32]).return_type == T.float32


# --------------------------------------------------------------------------------------------
# names, determinism, result shape

def test_result_shape():
    r = tr(op_add, [T.float32, T.int16])
    assert r.name.startswith("cf_op_add_")
    assert r.arg_types == [T.float32, T.int16]
    assert r.return_type == T.float32
    assert r.device_array_globals == []
    assert r.return_struct is None
    r = tr(b_divmod, [T.int32, T.int32])
    assert r.return_struct == "cf_tuple_int32_int32"
    assert "struct cf_tuple_int32_int32 {\n    cf_int32 f0;\n    cf_int32 f1;\n};" in r.source
    # argument types may be given as NumPy types or strings
    assert translate(op_add, [np.float32, "int16"]).source == \
        translate(op_add, [T.float32, T.int16]).source


DETERMINISM = [(st_for, [T.int64, T.int32]), (d_calls, [T.float32, T.float32, T.float32[:]]),
               (gl_tables, [T.int32, T.int32]), (arr_local, [T.float32]),
               (gl_dev, [T.int32]), (st_unpack, [T.float64, T.float64])]


def determinism_dump():
    out = []
    for f, args in DETERMINISM:
        r = translate(f, args)
        out.append(r.name + "\n" + r.source)
    return "\n=====\n".join(out)


def test_deterministic_in_process():
    assert determinism_dump() == determinism_dump()
    for f, args in DETERMINISM:
        assert "0x" not in translate(f, args).source.replace("0x1.", "")  # no addresses


def test_deterministic_across_processes():
    code = ("import sys; sys.path.insert(0, %r); import test_lang_translate as m; "
            "sys.stdout.write(m.determinism_dump())" % HERE)
    env = dict(os.environ, PYTHONHASHSEED="12345")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=HERE)
    assert p.returncode == 0, p.stderr
    assert p.stdout == determinism_dump()


def test_different_signatures_different_names():
    a = translate(op_add, [T.float32, T.float32])
    b = translate(op_add, [T.float64, T.float64])
    c = translate(op_add, [T.float32, T.float32], T.float64)
    assert len({a.name, b.name, c.name}) == 3


def test_fastmath_flag_changes_name():
    a = translate(op_mul, [T.float32, T.float32])
    b = tr(op_mul, [T.float32, T.float32], fastmath=True)
    assert a.name != b.name


def test_float32_stays_float32():
    def saxpy(a, x, y):
        return a * x + y
    r = tr(saxpy, [T.float32, T.float32, T.float32])
    body = body_of(r).split("{", 1)[1]
    assert "64" not in body and "double" not in body


# --------------------------------------------------------------------------------------------
# everything above compiles

def _all_sources():
    seen = set()
    parts = []
    for r in TRANSLATED:
        if r.fastmath:
            continue
        if r.source not in seen:
            seen.add(r.source)
            parts.append(r.source)
    return "\n".join(parts)


def _standalone_batch():
    """When this test runs alone, translate a representative set first."""
    if len(TRANSLATED) < 50:
        for f in (test_statements, test_arrays_all_element_types, test_device_functions,
                  test_captured_numpy_arrays_are_constant_tables, test_local_arrays,
                  test_captured_device_arrays_are_parameters):
            f()
        for op in BINARY:
            test_binary_operators_all_types(op)


def test_zz_everything_compiles_with_nvrtc():
    _standalone_batch()
    src = _all_sources()
    ok, log = nvrtc_compile(src)
    assert ok, "NVRTC rejected generated code (a translator bug):\n%s\n%s" % (
        log[:6000], numbered(src)[:20000])
    fm = [r.source for r in TRANSLATED if r.fastmath]
    if fm:
        ok, log = nvrtc_compile("\n".join(fm), fastmath=True)
        assert ok, log[:6000]


def test_zz_everything_compiles_with_host_compiler(tmp_path):
    _standalone_batch()
    src = _all_sources()
    ok, log = gxx_check(src, tmp_path)
    assert ok, "g++ rejected generated code:\n%s" % log[:6000]

