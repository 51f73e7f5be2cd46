"""float16 in kernels, with NumPy's meaning.

Host half (no GPU): the translated float16 bodies are compiled with g++ against
templates/cufunc/runtime.cuh (lang_harness) and compared bitwise with CPython on NumPy float16
scalars (NaN == NaN): every unary operation over ALL 65536 float16 bit patterns, the binary
operators over >= 10^5 random pairs plus every pair of edge values; the runtime's conversions
(float32 -> half, float64 -> half directly as npy_double_to_half, half -> everything) against
NumPy's astype. Every translation is also compiled with NVRTC for sm_90 (device code: PTX cvt).

GPU half (marked gpu, skipped here): vectorize / guvectorize / reductions / NumPy twins on float16
device arrays against NumPy.

NumPy's float16 scalar operations compute in float32 and round the result to half after each
operation; so does cufunc's cf_float16. math.* of a float16 gives a Python float (float64), as
CPython does; np.sin etc. of a float16 use NumPy's float16 loops (float32 function, rounded)."""

import ctypes
import importlib.util
import os
import warnings

import numpy as np
import pytest

import lang_harness as H

LANG, T = H.import_cufunc()
N_PAIRS = 120_000
SEED = 16

ALL16 = np.arange(65536, dtype=np.uint16).view(np.float16)
INTS = H.INT_TYPES
OTHERS = ["bool"] + INTS + ["float32", "float64", "complex64", "complex128"]

BINOPS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
          "pow": "**"}
CMPOPS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
# NumPy float16 loops computed by the float32 function of libm and rounded to half: on the host
# (glibc) they agree with NumPy bit for bit where NumPy calls the same libm function
NP_UNARY = ["sqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
            "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
            "floor", "ceil", "trunc", "rint", "fabs", "absolute", "negative", "positive",
            "square", "degrees", "radians", "isnan", "isinf", "isfinite"]
NP_BINARY = ["hypot", "arctan2", "copysign", "fmod", "power", "add",
             "subtract", "multiply", "divide", "floor_divide", "remainder"]
MATH1 = ["sqrt", "exp", "log1p", "sin", "atan", "tanh", "fabs", "erf"]


def _source():
    L = ["import math", "import numpy as np", ""]
    for name, op in BINOPS.items():
        L += ["def op_%s(x, y):" % name, "    return x %s y" % op, ""]
        L += ["def aug_%s(x, y):" % name, "    x %s= y" % op, "    return x", ""]
    for name, op in CMPOPS.items():
        L += ["def cmp_%s(x, y):" % name, "    return x %s y" % op, ""]
    L += ["def neg(x):", "    return -x", "", "def pos(x):", "    return +x", "",
          "def b_abs(x):", "    return abs(x)", "", "def not_(x):", "    return not x", "",
          "def truth(x):", "    return 1 if x else 0", "",
          "def b_min(x, y):", "    return min(x, y)", "", "def b_max(x, y):", "    return max(x, y)", "",
          "def b_int(x):", "    return int(x)", "", "def b_float(x):", "    return float(x)", "",
          "def b_round(x):", "    return round(x)", "",
          "def b_divmod_q(x, y):", "    q, r = divmod(x, y)", "    return q", "",
          "def b_divmod_r(x, y):", "    q, r = divmod(x, y)", "    return r", "",
          "def ident(x):", "    return x", "",
          "def to_f16(x):", "    return np.float16(x)", "",
          "def lit_add1(x):", "    return x + 1", "", "def lit_rsub1(x):", "    return 1 - x", "",
          "def lit_mulf(x):", "    return x * 0.1", "", "def lit_big(x):", "    return x + 1e10", "",
          "def lit_div3(x):", "    return x / 3", "", "def lit_sq(x):", "    return x ** 2", "",
          "def lit_f16(x):", "    return x * np.float16(1.5) + np.float16(0.1)", "",
          "def chain(x):", "    y = x * x", "    y = y - x", "    return y * np.float16(0.5) + x", "",
          "def loop_sum(x, y):", "    s = np.float16(0)", "    for i in range(4):",
          "        s += x * y", "    return s", ""]
    for f in NP_UNARY:
        L += ["def np_%s(x):" % f, "    return np.%s(x)" % f, ""]
    for f in NP_BINARY:
        L += ["def np2_%s(x, y):" % f, "    return np.%s(x, y)" % f, ""]
    for f in MATH1:
        L += ["def m_%s(x):" % f, "    return math.%s(x)" % f, ""]
    L += ["def m_floor(x):", "    return math.floor(x)", "",
          "def m_isnan(x):", "    return math.isnan(x)", ""]
    return "\n".join(L) + "\n"


def _load_module():
    src = _source()
    d = H._cache_dir()
    path = os.path.join(d, "f16_cases_%s.py" % H.hashlib.sha256(src.encode()).hexdigest()[:12])
    if not os.path.exists(path):
        with open(path + ".tmp%d" % os.getpid(), "w") as f:
            f.write(src)
        os.replace(path + ".tmp%d" % os.getpid(), path)
    spec = importlib.util.spec_from_file_location("f16_cases", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


M = _load_module()


def _edges16():
    e = H.float_edges(np.float32)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v = np.concatenate([e.astype(np.float16), np.array(
            [65504, -65504, 6.1035e-05, 5.96e-08, -5.96e-08, 0.333, 2048, 2049, 4095, 0.5,
             np.finfo(np.float16).eps, 1e-4], dtype=np.float16)])
    return np.unique(v.view(np.uint16)).view(np.float16)


def _pairs16(n, rng):
    e = _edges16()
    a = np.repeat(e, len(e))
    b = np.tile(e, len(e))
    # random bit patterns (every finite value equally likely, NaN/inf too) plus values of
    # moderate size, where + - * / // % ** give finite interesting results
    ra = rng.integers(0, 65536, n, dtype=np.uint32).astype(np.uint16).view(np.float16)
    rb = rng.integers(0, 65536, n, dtype=np.uint32).astype(np.uint16).view(np.float16)
    k = n // 3
    ra[:k] = rng.uniform(-40, 40, k).astype(np.float16)
    rb[:k] = rng.uniform(-8, 8, k).astype(np.float16)
    return np.concatenate([a, ra]), np.concatenate([b, rb])


def _values_of(dt, rng, n):
    dt = np.dtype(dt)
    v = H.values_for(dt, n, rng)
    if dt.kind in "fc":   # values near the float16 range and its halfway points
        ft = np.float32 if dt in (np.float32, np.complex64) else np.float64
        hs = np.unique(ALL16[np.isfinite(ALL16)].astype(np.float64))
        mids = (hs[:-1] + hs[1:]) / 2
        extra = np.concatenate([mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf),
                                [65519.99, 65520.0, 2.0 ** -25, 2.0 ** -25 * 1.0000001]])
        extra = extra.astype(ft)
        if dt.kind == "c":
            extra = H._mk_complex(extra, np.zeros_like(extra), dt)
        v = np.concatenate([v, extra.astype(dt)])
    if dt.kind in "iu":
        ii = np.iinfo(dt)
        lo, hi = max(ii.min, -70000), min(ii.max, 70000)
        v = np.concatenate([v, np.arange(lo, hi + 1, max(1, (hi - lo) // 5000)).astype(dt)])
    return v


def _expected(case, n):
    rdt = np.dtype(H._np_dtype(case.result.return_type))
    cols = [list(np.asarray(inp).astype(H._np_dtype(t)))
            for inp, t in zip(case.inputs, case.argtypes)]
    fn = case.ref or case.func
    out = np.empty(n, dtype=rdt)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vals = []
        for args in zip(*cols):
            try:
                vals.append(fn(*args))
            except (ValueError, OverflowError, ZeroDivisionError):
                if case.fallback is None:
                    raise
                vals.append(case.fallback(*args))
        try:
            out[:] = np.array(vals).astype(rdt)
        except (OverflowError, TypeError, ValueError):
            for i, v in enumerate(vals):
                out[i] = H.to_type(v, rdt)
    return out


def _comparable(x):
    """bfloat16 (ml_dtypes' dtype has kind 'V') compared through float32: exact and one to one."""
    return x.astype(np.float32) if x.dtype.name == "bfloat16" else x


def run(cases, nvrtc=True):
    """Translate, build once with g++, run; expected values from CPython on NumPy scalars.
    Returns the failure messages."""
    H.translate_all(LANG, cases)
    live = [c for c in cases if c.error is None]
    live, lib = H._compile_batch(live, H._host_program, H._gpp, r"\.cpp:(\d+):\d+: error", "g++")
    for k, c in enumerate(live):
        r = c.result
        n = len(c.inputs[0])
        ins = [np.ascontiguousarray(np.asarray(inp).astype(H._np_dtype(t)))
               for inp, t in zip(c.inputs, r.arg_types)]
        rdt = H._np_dtype(r.return_type)
        got = np.zeros(n, dtype=rdt)
        fn = getattr(lib, "cfentry%d" % k)
        fn.restype = None
        fn(*[x.ctypes.data_as(ctypes.c_void_p) for x in ins],
           got.ctypes.data_as(ctypes.c_void_p), ctypes.c_long(n))
        if c.return_type is not None and H._np_dtype(c.return_type) != rdt:
            c.error = "return type %s, declared %s" % (r.return_type, c.return_type)
            continue
        exp = _expected(c, n)
        exp, got = _comparable(exp), _comparable(got)
        bad, err = H.check_values(c, exp, got)
        if len(bad):
            lines = ["  f(%s): expected %r, got %r" % (H._fmt_inputs(c, i), exp[i], got[i])
                     for i in bad[:5]]
            c.error = "%d of %d results differ:\n%s\n%s" % (len(bad), n, "\n".join(lines),
                                                            r.source[-800:])
    if nvrtc and H.nvrtc_available():
        dev = [c for c in cases if c.result is not None and c.error is None]
        H._compile_batch(dev, H._device_program, H._nvrtc,
                         r"(?:cufunc_test|cufunc_kernel)\.cu\((\d+)\): error", "NVRTC")
    return ["%r: %s" % (c, c.error) for c in cases if c.error]


def _check(cases):
    fails = run(cases)
    assert not fails, "\n\n".join(fails[:6])


# ---- the runtime's conversions (no translation) -------------------------------------------------

_CONV_SRC = r'''#include "cufunc/runtime.cuh"
extern "C" void f32_to_f16(const float *a, unsigned short *o, long n) { for (long i = 0; i < n; i++) o[i] = cf_cast<cf_float16>(a[i]).bits; }
extern "C" void f64_to_f16(const double *a, unsigned short *o, long n) { for (long i = 0; i < n; i++) o[i] = cf_cast<cf_float16>(a[i]).bits; }
extern "C" void f16_to_f32(const unsigned short *a, float *o, long n) { for (long i = 0; i < n; i++) o[i] = cf_cast<float>(cf_h16(a[i])); }
'''


def _conv(name, x, odt):
    lib = H.build_shared(_CONV_SRC, "f16conv")
    x = np.ascontiguousarray(x)
    o = np.zeros(len(x), odt)
    getattr(lib, name)(x.ctypes.data_as(ctypes.c_void_p), o.ctypes.data_as(ctypes.c_void_p),
                       ctypes.c_long(len(x)))
    return o


def test_runtime_half_to_float32_all_patterns():
    got = _conv("f16_to_f32", ALL16.view(np.uint16), np.float32)
    assert H.exact_equal(ALL16.astype(np.float32), got).all()


@pytest.mark.parametrize("ft", [np.float32, np.float64])
def test_runtime_float_to_half_rounds_as_numpy(ft):
    # every halfway point between neighbouring halves and the floats beside them (ties to even,
    # the subnormal range, the overflow threshold 65520), plus random bit patterns
    rng = np.random.default_rng(SEED)
    x = _values_of(ft, rng, 0)
    ib = np.dtype("u%d" % np.dtype(ft).itemsize)
    rnd = rng.integers(0, np.iinfo(ib).max, 1_000_000, dtype=ib, endpoint=True).view(ft)
    x = np.concatenate([x, rnd])
    with np.errstate(all="ignore"):
        x = np.concatenate([x, np.nextafter(x, ft(np.inf)), np.nextafter(x, ft(-np.inf))])
        exp = x.astype(np.float16)
    got = _conv("f32_to_f16" if ft is np.float32 else "f64_to_f16", x, np.uint16).view(np.float16)
    bad = ~H.exact_equal(exp, got)
    assert not bad.any(), list(zip(x[bad][:5], exp[bad][:5], got[bad][:5]))


def test_double_to_half_is_direct_not_through_float32():
    # a double just above a halfway point of two halves that float32 rounds onto the halfway
    # point: through float32 it would round to even (down); NumPy rounds it directly (up)
    x = 1.0 + 2.0 ** -11 + 2.0 ** -40
    assert np.float16(x) != np.float16(np.float32(x))
    got = _conv("f64_to_f16", np.array([x]), np.uint16).view(np.float16)
    assert got[0] == np.float16(x)


# ---- unary operations over all 65536 float16 values ---------------------------------------------

def _unary_cases():
    x = [ALL16]
    cases = []
    for name in ["neg", "pos", "b_abs", "not_", "truth", "ident", "lit_add1", "lit_rsub1",
                 "lit_mulf", "lit_big", "lit_div3", "lit_sq", "lit_f16", "chain", "b_float",
                 "m_isnan"]:
        cases.append(H.Case(getattr(M, name), ["float16"], inputs=x))
    for name in ["b_int", "b_round", "m_floor"]:   # NaN/inf raise in CPython: int64 indefinite
        cases.append(H.Case(getattr(M, name), ["float16"], inputs=[ALL16[np.isfinite(ALL16)]]))
    for f in NP_UNARY:
        cases.append(H.Case(getattr(M, "np_" + f), ["float16"], inputs=x, label="np." + f))
    for f in MATH1:   # float64 results: glibc's double function on the exact widened value
        fb = getattr(np, {"erf": "sqrt"}.get(f, f), None)
        cases.append(H.Case(getattr(M, "m_" + f), ["float16"], inputs=x, label="math." + f,
                            fallback=(lambda v, fb=fb: fb(np.float64(v)))
                            if f != "erf" else None))
    for t in OTHERS:   # casts to every type (astype meaning)
        cases.append(H.Case(M.ident, ["float16"], return_type=t, inputs=x, label="to_" + t))
    return cases


def test_unary_all_float16_values():
    _check(_unary_cases())


def test_casts_to_float16_from_every_type():
    rng = np.random.default_rng(SEED)
    cases = []
    for t in OTHERS:
        v = _values_of(t, rng, 3000)
        cases.append(H.Case(M.to_f16, [t], inputs=[v], label="np.float16(%s)" % t))
        cases.append(H.Case(M.ident, [t], return_type="float16", inputs=[v],
                            label="%s -> float16 (return)" % t))
    _check(cases)


# ---- binary operations: >= 10^5 random pairs plus every pair of edge values ----------------------

def test_binary_operators_float16():
    rng = np.random.default_rng(SEED)
    a, b = _pairs16(N_PAIRS, rng)
    assert len(a) >= 100_000
    cases = []
    for name in BINOPS:
        cases.append(H.Case(getattr(M, "op_" + name), ["float16", "float16"], inputs=[a, b]))
        cases.append(H.Case(getattr(M, "aug_" + name), ["float16", "float16"], inputs=[a, b]))
    for name in CMPOPS:
        cases.append(H.Case(getattr(M, "cmp_" + name), ["float16", "float16"], inputs=[a, b]))
    for name in ["b_min", "b_max", "b_divmod_q", "b_divmod_r", "loop_sum"]:
        cases.append(H.Case(getattr(M, name), ["float16", "float16"], inputs=[a, b]))
    for f in NP_BINARY:
        cases.append(H.Case(getattr(M, "np2_" + f), ["float16", "float16"], inputs=[a, b],
                            label="np." + f))
    _check(cases)


@pytest.mark.parametrize("other", OTHERS)
def test_mixed_with_other_types(other):
    # NumPy's promotion: float16 with int8/uint8/bool stays float16, with int16 or wider ints and
    # float32 it is float32, with float64 float64, with complex complex
    rng = np.random.default_rng(SEED + len(other))
    n = 20_000
    a = rng.integers(0, 65536, n, dtype=np.uint32).astype(np.uint16).view(np.float16)
    a[: n // 2] = rng.uniform(-50, 50, n // 2).astype(np.float16)
    b = H.random_values(other, n, rng)
    if np.dtype(other).kind in "iu":
        b[: n // 2] = rng.integers(-20, 21, n // 2).astype(other) if np.dtype(other).kind == "i" \
            else rng.integers(0, 21, n // 2).astype(other)
    cases = []
    for name in ["add", "sub", "mul", "truediv"]:
        cases.append(H.Case(getattr(M, "op_" + name), ["float16", other], inputs=[a, b]))
        cases.append(H.Case(getattr(M, "op_" + name), [other, "float16"], inputs=[b, a]))
    if np.dtype(other).kind != "c":
        for name in ["floordiv", "mod"]:
            cases.append(H.Case(getattr(M, "op_" + name), ["float16", other], inputs=[a, b]))
        for name in CMPOPS:
            cases.append(H.Case(getattr(M, "cmp_" + name), ["float16", other], inputs=[a, b]))
    _check(cases)


def test_result_types_follow_numpy():
    # typing is NumPy's promotion (NEP 50 for Python literals), checked without running
    cases = [(M.op_add, ["float16", "float16"], np.float16), (M.op_add, ["float16", "int8"], np.float16),
             (M.op_add, ["float16", "int16"], np.float32), (M.op_add, ["float16", "float32"], np.float32),
             (M.op_add, ["float16", "float64"], np.float64), (M.lit_add1, ["float16"], np.float16),
             (M.lit_big, ["float16"], np.float16), (M.m_sin, ["float16"], np.float64),
             (M.np_sin, ["float16"], np.float16), (M.np_sqrt, ["int8"], np.float16),
             (M.np_sqrt, ["uint8"], np.float16), (M.np_sin, ["bool"], np.float16),
             (M.b_float, ["float16"], np.float64), (M.cmp_lt, ["float16", "float16"], np.bool_)]
    for fn, ts, want in cases:
        r = LANG.translate(fn, ts)
        assert np.dtype(r.return_type.dtype) == want, (fn.__name__, ts, r.return_type)


def test_float16_arrays_in_gufunc_bodies_translate():
    def body(a, out):
        s = np.float16(0)
        for i in range(a.shape[0]):
            s += a[i] * a[i]
        out[0] = s
    r = LANG.translate(body, [T.float16[:], T.float16[:]])
    assert "cf_float16" in r.source
    ok, log = H.nvrtc_compile(r.source + "\n", ("-std=c++17", "--fmad=false"))
    assert ok, log


# ---- bfloat16 (ml_dtypes' meaning) ---------------------------------------------------------------

def _ml_dtypes():
    return pytest.importorskip("ml_dtypes", reason="bfloat16 tests need ml_dtypes (pip install "
                               "ml_dtypes): NumPy has no bfloat16 dtype of its own")


def _all_bf16():
    ml = _ml_dtypes()
    return np.arange(65536, dtype=np.uint16).view(np.dtype(ml.bfloat16))


def test_bfloat16_unary_all_values():
    x = [_all_bf16()]
    cases = []
    for name in ["neg", "pos", "b_abs", "not_", "truth", "ident", "lit_add1", "lit_rsub1",
                 "lit_mulf", "lit_div3", "lit_sq", "chain", "b_float", "m_isnan"]:
        cases.append(H.Case(getattr(M, name), ["bfloat16"], inputs=x))
    for f in ["sqrt", "exp", "log", "sin", "cos", "tanh", "floor", "ceil", "trunc", "rint",
              "fabs", "absolute", "negative", "square", "isnan", "isinf", "isfinite"]:
        cases.append(H.Case(getattr(M, "np_" + f), ["bfloat16"], inputs=x, label="np." + f))
    for f in ["sqrt", "sin", "atan"]:
        cases.append(H.Case(getattr(M, "m_" + f), ["bfloat16"], inputs=x, label="math." + f,
                            fallback=lambda v, f=f: getattr(np, f)(np.float64(v))))
    for t in ["bool", "int8", "uint8", "int32", "int64", "uint64", "float16", "float32",
              "float64", "complex64"]:
        cases.append(H.Case(M.ident, ["bfloat16"], return_type=t, inputs=x, label="to_" + t))
    _check(cases)


def test_bfloat16_binary_operators():
    ml = _ml_dtypes()
    bf = np.dtype(ml.bfloat16)
    rng = np.random.default_rng(SEED + 1)
    n = N_PAIRS
    a = rng.integers(0, 65536, n, dtype=np.uint32).astype(np.uint16).view(bf)
    b = rng.integers(0, 65536, n, dtype=np.uint32).astype(np.uint16).view(bf)
    k = n // 3
    a[:k] = rng.uniform(-40, 40, k).astype(bf)
    b[:k] = rng.uniform(-8, 8, k).astype(bf)
    cases = []
    for name in BINOPS:
        cases.append(H.Case(getattr(M, "op_" + name), ["bfloat16", "bfloat16"], inputs=[a, b]))
    for name in CMPOPS:
        cases.append(H.Case(getattr(M, "cmp_" + name), ["bfloat16", "bfloat16"], inputs=[a, b]))
    for name in ["b_min", "b_max", "loop_sum", "aug_add", "aug_mul"]:
        cases.append(H.Case(getattr(M, name), ["bfloat16", "bfloat16"], inputs=[a, b]))
    for f in ["hypot", "arctan2", "copysign", "fmod", "power", "add", "multiply", "divide",
              "floor_divide", "remainder"]:
        cases.append(H.Case(getattr(M, "np2_" + f), ["bfloat16", "bfloat16"], inputs=[a, b],
                            label="np." + f))
    # ml_dtypes' promotion: with int8/uint8/bool it stays bfloat16, float32 and float64 win
    rng2 = np.random.default_rng(3)
    for other in ["int8", "uint8", "bool", "float32", "float64"]:
        o = H.random_values(other, n // 4, rng2)
        cases.append(H.Case(M.op_add, ["bfloat16", other], inputs=[a[: n // 4], o]))
        cases.append(H.Case(M.op_mul, [other, "bfloat16"], inputs=[o, a[: n // 4]]))
    _check(cases)


def test_bfloat16_casts_from_every_type():
    ml = _ml_dtypes()
    rng = np.random.default_rng(SEED)
    cases = []
    for t in ["bool", "int8", "int16", "int64", "uint64", "float16", "float32", "float64"]:
        v = _values_of(t, rng, 3000)
        cases.append(H.Case(M.ident, [t], return_type="bfloat16", inputs=[v],
                            label="%s -> bfloat16" % t))
    cases.append(H.Case(M.lit_add1, ["bfloat16"], inputs=[_all_bf16()]))
    _check(cases)
    assert ml.bfloat16(1) + 1.5 == np.float32(2.5)   # ml_dtypes: a Python float makes float32


def test_bfloat16_types_and_kernels():
    ml = _ml_dtypes()
    assert T.bfloat16 is not None and T.bfloat16.kind == "f" and T.bfloat16.cname == "cf_bfloat16"
    assert T.to_type("bfloat16") == T.bfloat16 and T.from_dtype(ml.bfloat16) == T.bfloat16
    assert T.parse_signature("bfloat16(bfloat16, bf16)") == (T.bfloat16, [T.bfloat16] * 2)
    if not H.nvrtc_available():
        pytest.skip("needs NVRTC")
    from cufunc import vectorize

    @vectorize(["bfloat16(bfloat16, bfloat16)"], target="cuda")
    def f(x, y):
        return np.hypot(x, y) * x

    a = np.ones(1 << 12, ml.bfloat16)
    for args in [(a, a), (a[::2], a[1::2]), (a, ml.bfloat16(2)), (a.astype(np.int8), a)]:
        src = f.kernel_source(*args)
        assert "cf_bfloat16" in src
        _nvrtc_ok(src)
    assert "#define CF_EW_V 8" in f.kernel_source(a, a)


# ---- the engines' float16 kernels, compiled with NVRTC (no GPU) -----------------------------------

def _nvrtc_ok(src):
    ok, log = H.nvrtc_compile(src, ("-std=c++17", "--fmad=false"))
    assert ok, log[-3000:]


needs_nvrtc = pytest.mark.skipif(not H.nvrtc_available(), reason="needs NVRTC (no GPU needed)")


@needs_nvrtc
@pytest.mark.parametrize("sig", ["float16(float16, float16)", "f2(f2, f2)", "half(half, half)",
                                 "e(e, e)"])
def test_vectorize_float16_kernels_compile(sig):
    from cufunc import vectorize

    @vectorize([sig], target="cuda")
    def f(x, y):
        return x * y + np.float16(1)

    assert f.types == ["ee->e"]
    a = np.ones(1 << 12, np.float16)
    m = a.reshape(64, 64)
    for args in [(a, a), (a[::2], a[1::2]), (m, m.T), (a, np.float16(2)), (a, 2.5),
                 (a.astype(np.int8), a)]:
        src = f.kernel_source(*args)
        assert "cf_float16" in src
        _nvrtc_ok(src)
    # contiguous float16 operands move 8 halves (16 bytes) per vector load, as float32 moves 4
    assert "#define CF_EW_V 8" in f.kernel_source(a, a)


@needs_nvrtc
def test_vectorize_float16_without_signatures_compiles_on_demand():
    from cufunc import vectorize

    @vectorize(target="cuda")
    def f(x, y):
        return np.hypot(x, y)

    a = np.ones(100, np.float16)
    src = f.kernel_source(a, a)
    assert f.types == ["ee->e"]
    _nvrtc_ok(src)


@needs_nvrtc
def test_guvectorize_float16_kernels_compile():
    from cufunc import guvectorize

    @guvectorize(["void(float16[:], float16[:], float16[:])"], "(n),(n)->()", target="cuda")
    def dot(x, y, out):
        s = np.float16(0)
        for i in range(x.shape[0]):
            s += x[i] * y[i]
        out[0] = s

    b = np.ones((64, 32), np.float16)
    for args in [(b, b), (b[:, ::2], b[:, 1::2]), (b.astype(np.float32)[:, :1], b)]:
        try:
            src = dot.kernel_source(*args)
        except TypeError as e:   # float32 does not cast safely to float16: NumPy's rule
            assert "not supported for the input types" in str(e)
            continue
        _nvrtc_ok(src)


# ---- GPU: the engines ---------------------------------------------------------------------------

def _f16_data(n, seed=3):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-4, 4, n).astype(np.float16), rng.uniform(0.5, 4, n).astype(np.float16))


@pytest.mark.gpu
@pytest.mark.parametrize("sig", ["float16(float16, float16)", "f2(f2, f2)", "half(half, half)"])
def test_gpu_vectorize_float16(sig):
    from cufunc import cuda, vectorize

    @vectorize([sig], target="cuda")
    def f(x, y):
        return x * y + x / y - np.float16(0.5)

    a, b = _f16_data(1 << 20)
    exp = a * b + a / b - np.float16(0.5)
    got = f(a, b)                                   # host arrays
    assert got.dtype == np.float16 and np.array_equal(got.view(np.uint16), exp.view(np.uint16))
    da, db = cuda.to_device(a), cuda.to_device(b)
    got = f(da, db).copy_to_host()                  # device arrays (vector loads of 8 halves)
    assert np.array_equal(got.view(np.uint16), exp.view(np.uint16))
    got = f(da[1:-3:3], db[2::3][: len(a[1:-3:3])]).copy_to_host()   # strided
    assert np.array_equal(got.view(np.uint16), (a[1:-3:3] * b[2::3][: len(a[1:-3:3])]
                                                + a[1:-3:3] / b[2::3][: len(a[1:-3:3])]
                                                - np.float16(0.5)).view(np.uint16))
    got = f(da, np.float16(1.5)).copy_to_host()     # a float16 scalar parameter
    assert np.array_equal(got.view(np.uint16), (a * np.float16(1.5) + a / np.float16(1.5)
                                                - np.float16(0.5)).view(np.uint16))


@pytest.mark.gpu
def test_gpu_vectorize_all_float16_values_unary():
    from cufunc import vectorize

    @vectorize(["float16(float16)"], target="cuda")
    def f(x):
        return np.sqrt(x) + (-x) * np.float16(2)

    with np.errstate(all="ignore"):
        exp = np.sqrt(ALL16) + (-ALL16) * np.float16(2)
    got = f(ALL16)
    assert H.exact_equal(exp, got).all()


@pytest.mark.gpu
def test_gpu_vectorize_mixed_loops_and_casts():
    from cufunc import vectorize

    @vectorize(["float32(float16, float32)", "float16(float16, int8)"], target="cuda")
    def g(x, y):
        return x + y

    a, _ = _f16_data(100_000)
    b32 = np.linspace(-3, 3, len(a)).astype(np.float32)
    b8 = (np.arange(len(a)) % 200 - 100).astype(np.int8)
    assert H.exact_equal(a + b32, g(a, b32)).all()
    r = g(a, b8)
    assert r.dtype == np.float16 and H.exact_equal(a + b8, r).all()


@pytest.mark.gpu
def test_gpu_guvectorize_float16():
    from cufunc import cuda, guvectorize

    @guvectorize(["void(float16[:], float16[:], float16[:])"], "(n),(n)->()", target="cuda")
    def dot(x, y, out):
        s = np.float16(0)
        for i in range(x.shape[0]):
            s += x[i] * y[i]
        out[0] = s

    a, b = _f16_data(4096 * 64)
    a, b = a.reshape(4096, 64), b.reshape(4096, 64)
    exp = np.empty(4096, np.float16)
    for r in range(4096):   # the body's order: float16 after each step
        s = np.float16(0)
        for i in range(64):
            s += a[r, i] * b[r, i]
        exp[r] = s
    assert H.exact_equal(exp, dot(a, b)).all()
    assert H.exact_equal(exp, dot(cuda.to_device(a), cuda.to_device(b)).copy_to_host()).all()


@pytest.mark.gpu
def test_gpu_reductions_float16():
    """add.reduce of float16: NumPy accumulates in float16 with pairwise summation; cufunc's tree
    reduction also rounds to float16 after each addition but in another order, so the results
    agree within the rounding error of a float16 sum: a few ulps of sum(|x|) (checked with
    |err| <= n_levels * eps16 * sum(|x|), n_levels = log2(n) + 1)."""
    from cufunc import cuda, vectorize

    @vectorize(["float16(float16, float16)"], target="cuda")
    def add(x, y):
        return x + y

    rng = np.random.default_rng(5)
    x = rng.uniform(0, 1, 1 << 12).astype(np.float16)
    exact = float(x.astype(np.float64).sum())
    tol = (np.log2(len(x)) + 1) * float(np.finfo(np.float16).eps) * float(np.abs(x).astype(np.float64).sum())
    r = add.reduce(cuda.to_device(x))
    r = np.asarray(r.copy_to_host() if hasattr(r, "copy_to_host") else r)
    assert r.dtype == np.float16 and abs(float(r) - exact) <= tol, (r, exact, tol)
    red = cuda.reduce(lambda a, b: a + b)
    r2 = red(cuda.to_device(x))
    assert abs(float(r2) - exact) <= tol
    # max is exact in any order
    mx = cuda.reduce(lambda a, b: max(a, b))
    assert mx(cuda.to_device(x)) == x.max()
    # accumulate: a sequential float16 sum in the same order when the scan is exact (integers)
    # (every partial sum an integer <= 2048, which float16 holds exactly: any order gives it)
    xi = rng.integers(0, 3, 1000).astype(np.float16)
    acc = add.accumulate(cuda.to_device(xi)).copy_to_host()
    assert H.exact_equal(np.add.accumulate(xi), acc).all()


@pytest.mark.gpu
def test_gpu_numpy_twins_float16():
    from cufunc import cuda
    a, b = _f16_data(1 << 16)
    da, db = cuda.to_device(a), cuda.to_device(b)
    for got, exp in [((da + db).copy_to_host(), a + b), ((da * db).copy_to_host(), a * b),
                     (np.sin(da).copy_to_host(), np.sin(a)), (np.sqrt(db).copy_to_host(), np.sqrt(b)),
                     (np.hypot(da, db).copy_to_host(), np.hypot(a, b))]:
        assert got.dtype == np.float16
        assert H.exact_equal(exp, got).all() or np.max(H.ulp_distance(exp, got)) <= 1


@pytest.mark.gpu
def test_gpu_bfloat16_ml_dtypes_arrays():
    ml = _ml_dtypes()
    from cufunc import cuda, vectorize

    @vectorize(["bfloat16(bfloat16, bfloat16)"], target="cuda")
    def f(x, y):
        return x * y + x

    rng = np.random.default_rng(9)
    a = rng.uniform(-4, 4, 1 << 20).astype(ml.bfloat16)
    b = rng.uniform(-4, 4, 1 << 20).astype(ml.bfloat16)
    exp = (a * b + a).astype(np.float32)      # ml_dtypes' loops: float32, rounded per operation
    got = f(a, b)
    assert got.dtype == np.dtype(ml.bfloat16)
    assert H.exact_equal(exp, got.astype(np.float32)).all()
    got = f(cuda.to_device(a), cuda.to_device(b)).copy_to_host()
    assert H.exact_equal(exp, got.astype(np.float32)).all()


@pytest.mark.gpu
def test_gpu_bfloat16_torch_dlpack():
    torch = pytest.importorskip("torch", reason="the DLPack bfloat16 test needs PyTorch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    from cufunc import cuda, vectorize

    @vectorize(["bfloat16(bfloat16, bfloat16)"], target="cuda")
    def hyp(x, y):
        return np.hypot(x, y)

    x = torch.linspace(-3, 3, 1 << 20, device="cuda", dtype=torch.bfloat16)
    y = torch.linspace(1, 2, 1 << 20, device="cuda", dtype=torch.bfloat16)
    r = hyp(x, y)                               # DLPack kDLBfloat in, a torch tensor out
    assert isinstance(r, torch.Tensor) and r.dtype == torch.bfloat16
    want = torch.hypot(x.float(), y.float()).bfloat16()   # float32 then rounded, as ml_dtypes
    diff = (r.float() - want.float()).abs() / want.float().abs().clamp_min(1e-30)
    assert float(diff.max()) <= 2 ** -8          # at most one bfloat16 ulp (CUDA's hypotf)
    d = cuda.from_dlpack(x)                     # import: a cufunc DeviceArray of bfloat16
    assert d.dtype.name == "bfloat16"
    back = torch.from_dlpack(d)                 # export: kDLBfloat again
    assert back.dtype == torch.bfloat16 and torch.equal(back, x)
