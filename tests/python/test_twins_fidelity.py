"""Every GPU twin against NumPy: every twin x every NumPy loop on the types cufunc runs x edge
values x layouts, each result compared with NumPy's on the same inputs within the tolerance that
TOLERANCE below states for that function (the way a backend's every op is checked against its CPU
reference).

Tolerances (one table, `tolerance(name, dtype)`):
  * exact (bit for bit: NaN where NumPy has NaN, signed zeros, infinities): integer, bool and
    comparison loops; + - * / // % fmod, real and complex, as NumPy's scalar arithmetic computes
    them (complex * is NumPy's scalar product, two products and a sum each part; NumPy's own SIMD
    array loop on a CPU with FMA fuses them and is not the reference: the expected value is
    computed element by element with NumPy scalars); degrees, radians, rad2deg, deg2rad (NumPy
    multiplies by 180/pi and pi/180 in the loop's own type); floor, ceil, trunc, rint, sign,
    reciprocal, copysign, ldexp, fabs, absolute of reals, square, negative, positive, conjugate,
    maximum, minimum, fmax, fmin, isnan, isinf, isfinite, signbit, the logical and bitwise ufuncs;
  * math functions of reals: ulps of the result, the bound of CUDA's libdevice function (CUDA Math
    API, "Mathematical Functions" appendix) plus 1 for the reference's own rounding, the table
    test_runtime_header.ULP, which is also the runtime header's own; 2 ulp where that is
    smaller than 2 (NumPy documents no bound); an infinity exactly NumPy's (the largest finite
    value is 1 ulp from inf, and an overflow NumPy has is not a rounding difference);
  * complex functions: each component within k ulps of the larger component's magnitude
    (test_runtime_header.CULP, the runtime's complex algorithms); non-finite components exactly
    NumPy's, which are C99 Annex G's (cos(nan+inf j) = inf+nan j, ...); complex power's k scaled
    by its condition number |b log a|, and only the result's magnitude compared where that number
    passes 1 / eps (no bit of the angle is right: _power_conditioned);
  * float16 loops compute in float32 and round once, as NumPy's do: 1 ulp of float16 for the
    functions that are not exact;
  * logaddexp, logaddexp2: NumPy's formulation (x + log1p(exp(y - x)) with the larger first); the
    result may cancel to near zero, so the error is measured in ulps of max(|x|, |y|, |result|):
    2 (float32, float64), 1 (float16).

Layouts: contiguous, transposed, negative stride, broadcast, 0-d, empty. The CPU part (no GPU)
checks that the table covers every twin and that every twin has every NumPy loop on cufunc's
types: no refusal where NumPy computes."""
import concurrent.futures as cf
import ctypes
import shutil
import warnings

import numpy as np
import pytest

from cufunc import _twins, cuda
import lang_harness as H
from test_runtime_header import CULP, ULP

gpu = pytest.mark.gpu

TWINNED = sorted({getattr(np, n).__name__ for n in dir(np)
                  if isinstance(getattr(np, n), np.ufunc) and _twins.has_twin(getattr(np, n))})

EXACT = frozenset([
    "add", "subtract", "multiply", "divide", "floor_divide", "remainder", "fmod", "copysign",
    "fabs", "negative", "positive", "conjugate", "square", "sign", "reciprocal", "floor", "ceil",
    "trunc", "rint", "degrees", "radians", "rad2deg", "deg2rad", "ldexp", "maximum", "minimum",
    "fmax", "fmin", "less", "less_equal", "greater", "greater_equal", "equal", "not_equal",
    "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or",
    "bitwise_xor", "invert", "left_shift", "right_shift", "isnan", "isinf", "isfinite",
    "signbit"])
# twin -> the runtime's function (its real ulp bound in ULP, its complex one in CULP)
MATH = {
    "sqrt": "sqrt", "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log",
    "log2": "log2", "log10": "log10", "log1p": "log1p", "sin": "sin", "cos": "cos", "tan": "tan",
    "arcsin": "asin", "arccos": "acos", "arctan": "atan", "sinh": "sinh", "cosh": "cosh",
    "tanh": "tanh", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh",
    "arctan2": "atan2", "hypot": "hypot", "power": "pow", "absolute": "hypot",
}
# complex loops whose algorithm is not one of the runtime's complex functions: their bound
CPLX_EXTRA = {"exp2": 8, "expm1": 8, "log1p": 8, "log2": 6, "sign": 2, "absolute": 3}
LOGADDEXP = frozenset(["logaddexp", "logaddexp2"])


def tolerance(name, dtype, in_dtype=None):
    """('exact', 0) | ('ulp', k) | ('cplx', k) | ('scaled', k): the stated bound of twin `name`
    on a loop whose (first) result has dtype `dtype` (and first input `in_dtype`)."""
    dt = np.dtype(dtype)
    if name == "absolute" and in_dtype is not None and np.dtype(in_dtype).kind == "c":
        # |z| is hypot(re, im): NumPy's own (SIMD) or the C library's, both within hypot's bound
        return ("ulp", 1 if dt.itemsize == 2 else max(ULP["hypot"][dt.itemsize // 8], 2))
    if dt.kind in "biu":
        return ("exact", 0)
    if name in EXACT and not (name in ("sign",) and dt.kind == "c"):
        return ("exact", 0)
    if name in LOGADDEXP:
        return ("scaled", 1 if dt.itemsize == 2 else 2)
    if dt.kind == "c":
        if name in CPLX_EXTRA:
            return ("cplx", CPLX_EXTRA[name])
        return ("cplx", CULP[MATH[name]])
    if name == "absolute":
        return ("exact", 0)
    if dt.itemsize == 2:
        return ("ulp", 1)
    k = ULP[MATH[name]][0 if dt.itemsize == 4 else 1]
    return ("ulp", max(k, 2))


def numpy_loops(u):
    """NumPy's loops of ufunc u on the types cufunc runs (no object, datetime, timedelta, long
    double), one per distinct dtype tuple, in NumPy's order."""
    out = []
    for t in u.types:
        chars = t.replace("->", "")
        if all(c in "?bhilqBHILQefdFD" for c in chars):
            d = tuple(np.dtype(c) for c in chars)
            if d not in out:
                out.append(d)
    return out


# ---- CPU: the table covers every twin, every twin every NumPy loop -------------------------------

def test_table_covers_every_twin():
    assert len(TWINNED) >= 70
    missing = [n for n in TWINNED if n not in EXACT and n not in MATH and n not in LOGADDEXP]
    assert not missing, "twins without a stated tolerance: %s" % missing
    for n in TWINNED:
        for loop in numpy_loops(getattr(np, n)):
            tolerance(n, loop[-1])   # every loop's dtype has a bound


@pytest.mark.parametrize("name", TWINNED)
def test_no_refusal_where_numpy_computes(name):
    u = getattr(np, name)
    tw = _twins.twin(u)
    lacking = ["".join(d.char for d in loop) for loop in numpy_loops(u)
               if loop not in tw.loop_set]
    assert not lacking, "the twin of %s has no loop for %s (skipped: %s)" % (
        name, lacking, tw.skipped_loops)


# ---- edge values ---------------------------------------------------------------------------------

def edge_values(dtype):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return np.array([False, True])
    if dt.kind in "iu":
        info = np.iinfo(dt)
        vals = [0, 1, 2, 3, 7, 100, info.max, info.max - 1, info.min]
        if dt.kind == "i":
            vals += [-1, -2, -7, info.min + 1]
        return np.array(sorted(set(v for v in vals if info.min <= v <= info.max)), dt)
    ft = np.dtype(dt.char.lower()) if dt.kind == "c" else dt
    fi = np.finfo(ft)
    real = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -2.5, 3.0, 7.25, 100.0, 1e-3,
            float(fi.tiny), -float(fi.tiny), float(fi.smallest_subnormal), float(fi.max),
            -float(fi.max), 0.7, -0.3, 1.5707963, 3.1415927, 20.0, -20.0]
    if dt.kind == "f":
        return np.array(real, dt)
    part = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-3,
            float(fi.max), float(fi.tiny), 0.999]
    re, im = np.meshgrid(np.array(part, ft), np.array(part, ft))
    z = np.empty(re.size, dt)
    z.real, z.imag = re.ravel(), im.ravel()
    return z


def operands(name, loop, nin):
    """The inputs of one loop over its edge values: each value, or every pair."""
    vals = [edge_values(d) for d in loop[:nin]]
    if nin == 1:
        return vals
    a, b = vals
    if name == "power" and b.dtype.kind == "i":
        b = b[b >= 0]   # NumPy refuses integers to negative integer powers (ValueError)
    if a.size * b.size > 8000:   # complex x complex: every pair of a subset with each full list
        sub_a, sub_b = a[:: max(1, a.size // 40)], b[:: max(1, b.size // 40)]
        x = np.concatenate([np.repeat(sub_a, b.size), np.tile(a, sub_b.size)])
        y = np.concatenate([np.tile(b, sub_a.size), np.repeat(sub_b, a.size)])
        return [x, y]
    return [np.repeat(a, b.size), np.tile(b, a.size)]


def reference(u, name, xs):
    """NumPy's answer. Complex multiply element by element with NumPy scalars (the scalar
    arithmetic; NumPy's SIMD array loop fuses it with FMA on x86-64), and complex square as z * z
    with NumPy scalars, NumPy's scalar formula."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name in ("multiply", "square") and xs[0].dtype.kind == "c":
            # the operands broadcast first (a (13, 1) by (1, 11) product is (13, 11))
            ys = np.broadcast_arrays(*(xs if name == "multiply" else [xs[0], xs[0]]))
            out = np.empty(ys[0].shape, xs[0].dtype)
            for i, (a, b) in enumerate(zip(ys[0].ravel(), ys[1].ravel())):
                out.ravel()[i] = a * b
            return out
        if name == "power" and xs[0].dtype.kind == "f" and xs[0].dtype.itemsize >= 4:
            # exponent 0.5: NumPy takes sqrt where the exponent is one scalar (sqrt(-inf) = nan,
            # sqrt(-0.0) = -0.0) and pow where it is an array (inf, 0.0); the twin gives the
            # first, NumPy's answer to np.power(x, 0.5) (its float16 loop always takes pow)
            r = u(*xs)
            half = np.broadcast_to(xs[1] == 0.5, r.shape)
            return np.where(half, np.sqrt(np.broadcast_to(xs[0], r.shape)), r)
        return u(*xs)


SPECIALS_BY_NUMPY_VERSION = {"arccosh", "arcsin", "arcsinh"}
NUMPY_BEFORE_2_4 = tuple(int(p) for p in np.__version__.split(".")[:2]) < (2, 4)


def _power_conditioned(xs, shape, w, g, err):
    """Complex power is exp(b * log(a)): a rounding of log(a) grows by |b * log(a)| in the result
    (the condition number), so the stated ulps are scaled by it; where it passes 1 / eps of the
    type, no bit of the result's angle is right (the sine and cosine of an argument beyond 2^24
    in float32), and only its magnitude is compared: infinite, zero or finite as NumPy's. Where
    the modulus overflows and NumPy's result has one infinite component, that component must be
    NumPy's exactly and the other, a product with an overflowed modulus, is not compared."""
    with np.errstate(all="ignore"):
        a, b = (np.broadcast_to(x, shape).ravel().astype(np.complex128) for x in xs)
        cond = np.abs(b * np.log(a))
        cond = np.where(np.isfinite(cond), np.maximum(cond, 1.0), np.inf)
        lost = cond > 1.0 / np.finfo(w.real.dtype).eps
        mw, mg = np.abs(w), np.abs(g)
        same_class = (np.isinf(mw) == np.isinf(mg)) & ((mw == 0) == (mg == 0)) & \
            (np.isnan(mw) == np.isnan(mg))
        # the modulus beyond the type's range with one component infinite: the other is that
        # modulus times the cosine or sine of the angle, whatever finite value the overflow left
        # (NumPy's as much as the twin's); the infinite component must be NumPy's exactly
        half = ~lost & np.isinf(mw) & (np.isfinite(w.real) != np.isfinite(w.imag))
        inf_same = np.where(np.isinf(w.real), w.real == g.real,
                            np.isinf(w.imag) & (w.imag == g.imag))
        inf_same = np.where(np.isinf(w.real), inf_same & np.isfinite(g.imag),
                            inf_same & np.isfinite(g.real))
    out = np.where(lost, np.where(same_class, 0.0, np.inf), err / np.where(lost, 1.0, cond))
    return np.where(half, np.where(inf_same, 0.0, np.inf), out)


def compare(name, xs, want, got):
    """Failure messages (empty: within the stated tolerance)."""
    want = np.asarray(want)
    got = np.asarray(got)
    if want.dtype != got.dtype or want.shape != got.shape:
        return ["%s: dtype/shape %s%s, NumPy %s%s" % (name, got.dtype, got.shape, want.dtype,
                                                      want.shape)]
    if want.size == 0:
        return []
    mode, k = tolerance(name, want.dtype, xs[0].dtype)
    w, g = want.ravel(), got.ravel()
    if mode == "exact":
        err = np.where(_same(w, g), 0.0, np.inf)
    elif mode == "ulp":
        # an infinity is NumPy's exactly: the largest finite value lies 1 ulp from inf
        err = np.where(np.isinf(w) != np.isinf(g), np.inf, H.ulp_distance(w, g))
    elif mode == "cplx":
        err = H.complex_error_ulps(w, g)
        if name == "power":
            err = _power_conditioned(xs, want.shape, w, g, err)
    else:   # scaled: ulps of max(|x|, |y|, |result|)
        with np.errstate(all="ignore"):
            bx = [np.broadcast_to(x, want.shape).ravel().astype(w.dtype) for x in xs]
            mag = np.maximum.reduce([np.abs(x) for x in bx] + [np.abs(w)])
            fin = np.isfinite(w) & np.isfinite(g)
            unit = np.spacing(np.where(np.isfinite(mag), mag, 0).astype(w.dtype)).astype(float)
            err = np.where(fin, np.abs(w.astype(float) - g.astype(float)) / unit,
                           H.ulp_distance(w, g))
    if name in SPECIALS_BY_NUMPY_VERSION and NUMPY_BEFORE_2_4 and w.dtype.kind == "c":
        # NumPy before 2.4 answers these functions' special values (a nan or inf component)
        # otherwise than C99 Annex G, which the twins and NumPy 2.4 and later follow (seen with
        # NumPy 2.1.3: arccosh(nan j) = nan+nan j, arcsin(-inf+nan j) = nan-inf j): only the
        # finite inputs are compared there
        with np.errstate(all="ignore"):
            bx = [np.broadcast_to(x, want.shape).ravel() for x in xs]
            special = np.logical_or.reduce([~np.isfinite(x) for x in bx])
        err = np.where(special, 0.0, err)
    bad = np.nonzero(err > k)[0]
    if bad.size == 0:
        return []
    show = []
    for i in bad[:6]:
        args = ", ".join(repr(np.broadcast_to(x, want.shape).ravel()[i]) for x in xs)
        show.append("%s(%s) = %r, NumPy %r" % (name, args, g[i], w[i]))
    return ["%s %s: %d of %d outside %s %d: %s" % (name, want.dtype, bad.size, w.size, mode, k,
                                                   "; ".join(show))]


def _same(w, g):
    """Bit for bit, except that any NaN equals any NaN (NumPy does not fix a NaN's sign or
    payload); complex: each component."""
    if w.dtype.kind == "c":
        return _same(w.real.copy(), g.real.copy()) & _same(w.imag.copy(), g.imag.copy())
    if w.dtype.kind == "f":
        u = np.dtype("u%d" % w.dtype.itemsize)
        return (w.view(u) == g.view(u)) | (np.isnan(w) & np.isnan(g))
    return w == g


# ---- host: every loop's translated body compiled with g++, on the edge values -----------------

def _host_program():
    """One C++ program with every twin loop's device function and an entry per loop (the
    generated sources are made to be concatenated). Returns (source, {(name, loop): entry})."""
    parts = ['#include "cufunc/runtime.cuh"\n']
    entries = {}
    for name in TWINNED:
        tw = _twins.twin(getattr(np, name))
        for spec in tw.loops:
            types = tuple(np.dtype(t) for t in spec[0])
            k = len(entries)
            cn = [H.CNAME.get(t.name, "cf_" + t.name) for t in types]
            nin = len(types) - 1
            params = ", ".join("const %s *a%d" % (cn[j], j) for j in range(nin))
            call = ", ".join("a%d[i]" % j for j in range(nin))
            parts.append(H._strip_include(spec[1]) + "\n")
            parts.append('extern "C" void tw%d(%s, %s *out, long n) {\n'
                         "  for (long i = 0; i < n; i++) out[i] = %s(%s);\n}\n"
                         % (k, params, cn[-1], spec[2], call))
            entries[(name, types)] = "tw%d" % k
    return "".join(parts), entries


_HOST = []


def host_run(name, loop, xs):
    if not _HOST:
        src, entries = _host_program()
        _HOST.append((H.build_shared(src, "twins"), entries))
    lib, entries = _HOST[0]
    fn = getattr(lib, entries[(name, loop)])
    ins = [np.ascontiguousarray(x.astype(loop[j])) for j, x in enumerate(xs)]
    out = np.empty(ins[0].shape, loop[-1])
    fn(*[x.ctypes.data_as(ctypes.c_void_p) for x in ins], out.ctypes.data_as(ctypes.c_void_p),
       ctypes.c_long(out.size))
    return out


@pytest.mark.parametrize("name", TWINNED)
def test_host_translation_every_loop_edge_values(name):
    """The twins' bodies as the kernel language translates them, run on the host (g++ with the
    runtime header over glibc; the GPU's libdevice differs: the gpu test below is the real
    check), against NumPy within the stated tolerance."""
    if shutil.which(H.CXX) is None:
        pytest.skip("no C++ compiler (%s) on this machine" % H.CXX)
    u = getattr(np, name)
    tw = _twins.twin(u)
    fails = []
    for loop in numpy_loops(u):
        if loop not in tw.loop_set:
            continue   # test_no_refusal_where_numpy_computes reports it
        xs = operands(name, loop, u.nin)
        want = reference(u, name, xs)
        fails += compare(name, xs, want, host_run(name, loop, xs))
    assert not fails, "\n".join(fails)


def test_host_hypot_near_overflow_is_c_hypot():
    """The runtime's hypot (|z| of every complex function) scales arguments from 2^64 / 2^512 on,
    so that its overflow is C's whatever the library's hypot does near the threshold: compiled
    with g++, bit for bit against NumPy's np.hypot (the C library's) over the top binades, where
    NumPy's complex log1p, sign and absolute of max + max j overflow to inf."""
    if shutil.which(H.CXX) is None:
        pytest.skip("no C++ compiler (%s) on this machine" % H.CXX)
    lib = H.build_shared('#include "cufunc/runtime.cuh"\n'
                         'extern "C" void hf(const float *x, const float *y, float *o, long n)'
                         ' { for (long i = 0; i < n; i++) o[i] = cf_hypot(x[i], y[i]); }\n'
                         'extern "C" void hd(const double *x, const double *y, double *o, long n)'
                         ' { for (long i = 0; i < n; i++) o[i] = cf_hypot(x[i], y[i]); }\n',
                         "hypot")
    for dt, fn in ((np.float32, lib.hf), (np.float64, lib.hd)):
        fi = np.finfo(dt)
        big = np.array([fi.max, fi.max / 2, fi.max / 1.5, fi.max * 0.7, fi.max / 4, 2.0 ** 64,
                        2.0 ** 64 * 0.99, 2.0 ** 512 if dt is np.float64 else 1e30, 1e300
                        if dt is np.float64 else 1e37, 3.0, 1e-3, 0.0, float(fi.tiny), np.inf,
                        np.nan], dt)
        big = np.concatenate([big, -big])
        x, y = np.repeat(big, big.size), np.tile(big, big.size)
        out = np.empty_like(x)
        fn(x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p),
           out.ctypes.data_as(ctypes.c_void_p), ctypes.c_long(x.size))
        with np.errstate(all="ignore"):
            want = np.hypot(x, y)
        assert _same(want, out).all(), [(a, b, g, w) for a, b, g, w in zip(x, y, out, want)
                                         if not _same(np.array([w]), np.array([g]))[0]][:5]
        assert np.isinf(out[(x == fi.max) & (y == fi.max)]).all()


def test_host_hypot_overflow_with_a_library_an_ulp_high():
    """The overflow rule does not hang on the library's hypot being correctly rounded (CUDA's is
    within 2 ulp): with a stand-in one ulp above the true result, hypot(1, max) and
    hypot(max, 2^-30 max) are still max (NumPy's), hypot(max, max) inf, and nothing finite and
    below the threshold turns inf."""
    if shutil.which(H.CXX) is None:
        pytest.skip("no C++ compiler (%s) on this machine" % H.CXX)
    lib = H.build_shared('#include <cmath>\n#include "cufunc/runtime.cuh"\n'
                         'static double high(double x, double y)'
                         ' { return std::nextafter(std::hypot(x, y), INFINITY); }\n'
                         'extern "C" void hh(const double *x, const double *y, double *o, long n)'
                         ' { for (long i = 0; i < n; i++) o[i] = cf_hypot_scaled<double>(x[i],'
                         ' y[i], 1.3407807929942597e+154, 7.458340731200207e-155,'
                         ' 7.450580596923828e-09, high); }\n', "hypot_high")
    mx = np.finfo(np.float64).max
    x = np.array([1.0, mx, mx, mx / 2, 0.5, mx * 2.0 ** -30, 3.0, mx])
    y = np.array([mx, mx * 2.0 ** -30, mx, mx / 2, -mx, mx, 4.0, 0.0])
    out = np.empty_like(x)
    lib.hh(x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p),
           out.ctypes.data_as(ctypes.c_void_p), ctypes.c_long(x.size))
    with np.errstate(all="ignore"):
        want = np.hypot(x, y)
    assert out[0] == mx and out[1] == mx and out[4] == mx and out[5] == mx and out[7] == mx
    assert np.isinf(out[2])
    assert np.isfinite(out[3]) and H.ulp_distance(np.array([want[3]]), np.array([out[3]]))[0] <= 1
    assert H.ulp_distance(np.array([want[6]]), np.array([out[6]]))[0] <= 1


def test_power_condition_rule():
    """_power_conditioned: a well-conditioned power keeps its ulps; a huge |b log a| compares only
    the magnitude's class (an infinity of another sign passes, a finite result for NumPy's
    infinity does not)."""
    a = np.array([0.5 + 0.5j, -2.5 - 1j, -2.5 - 1j], np.complex64)
    b = np.array([1 + 0j, 3.4028235e38j, 3.4028235e38j], np.complex64)
    inf = np.float32(np.inf)
    w = np.array([0.5 + 0.5j, complex(-inf, inf), complex(-inf, inf)], np.complex64)
    g = np.array([0.5 + 0.5j, complex(inf, -inf), 1 + 1j], np.complex64)
    err = _power_conditioned([a, b], (3,), w, g, H.complex_error_ulps(w, g))
    assert err[0] == 0 and err[1] == 0 and np.isinf(err[2])
    w2 = np.array([1 + 1j], np.complex128)
    g2 = np.array([complex(1 + 6 * np.spacing(1.0), 1)], np.complex128)
    a2, b2 = np.array([0.001 + 1j]), np.array([0.5 + 3j])   # |b log a| about 4.8
    e2 = _power_conditioned([a2, b2], (1,), w2, g2, H.complex_error_ulps(w2, g2))
    assert 1 < e2[0] < 2   # 6 ulps over a condition number of 4.8
    big = np.float32(3.4028235e38)
    a3 = np.array([complex(-1, big)] * 3, np.complex64)
    b3 = np.array([complex(1, 1.1754944e-38)] * 3, np.complex64)
    w3 = np.array([complex(2.569e31, inf)] * 3, np.complex64)
    g3 = np.array([complex(-1.487e31, inf), complex(-1.487e31, -inf), complex(inf, 1.0)],
                  np.complex64)
    e3 = _power_conditioned([a3, b3], (3,), w3, g3, H.complex_error_ulps(w3, g3))
    assert e3[0] == 0 and np.isinf(e3[1]) and np.isinf(e3[2])


def test_reference_of_a_broadcast_complex_product():
    # NumPy's scalar products over the broadcast shape: (13, 1) x (1, 11) is (13, 11)
    a = (np.arange(13) + 1j).astype(np.complex128)[:, None]
    b = (2 - 1j * np.arange(11)).astype(np.complex128)[None, :]
    want = reference(np.multiply, "multiply", [a, b])
    assert want.shape == (13, 11)
    assert want[4, 7] == a[4, 0] * b[0, 7]


# ---- layouts -------------------------------------------------------------------------------------

def layouts(xs):
    """(label, host inputs, device inputs) per layout."""
    d = [cuda.to_device(x) for x in xs]
    n = xs[0].size
    out = [("contiguous", xs, d)]
    m = max(1, n // 7)
    two = [np.resize(x, (7, m)) for x in xs]
    out.append(("transposed", [t.T for t in two], [cuda.to_device(t).T for t in two]))
    out.append(("negative stride", [x[::-1] for x in xs], [e[::-1] for e in d]))
    if len(xs) == 2:
        a, b = xs[0][:13], xs[1][:11]
        out.append(("broadcast", [a[:, None], b[None, :]],
                    [cuda.to_device(a[:, None]), cuda.to_device(b[None, :])]))
    else:
        a = np.resize(xs[0], (1, 9))
        out.append(("broadcast", [np.broadcast_to(a, (4, 9))], None))
    out.append(("0-d", [np.asarray(x[min(3, n - 1)]) for x in xs],
                [cuda.to_device(np.asarray(x[min(3, n - 1)])) for x in xs]))
    out.append(("empty", [x[:0] for x in xs], [e[:0] for e in d]))
    return out


def run_twin(u, label, hx, dx):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dx is None:   # a broadcast input: through out= of the full shape
            full = hx[0]
            src = cuda.to_device(np.ascontiguousarray(full[:1]))
            want_dt = u(full[:1]).dtype
            out = cuda.device_array(full.shape, want_dt)
            u(src, out=out)
            return out.copy_to_host()
        r = u(*dx)
        return r.copy_to_host() if hasattr(r, "copy_to_host") else np.asarray(r)


def one_case(name, j):
    u = getattr(np, name)
    loop = numpy_loops(u)[j]
    xs = operands(name, loop, u.nin)
    fails = []
    # the layouts for the first loop of each kind (the kernel of each layout compiles per loop)
    first_of_kind = [i for i, lp in enumerate(numpy_loops(u))
                     if lp[0].kind not in {x[0].kind for x in numpy_loops(u)[:i]}]
    try:
        todo = layouts(xs) if j in first_of_kind else [("contiguous", xs,
                                                        [cuda.to_device(x) for x in xs])]
        for label, hx, dx in todo:
            # np.array copies keep a 0-d input 0-d (np.ascontiguousarray would make it 1-d)
            hc = [np.array(h) for h in hx]
            want = reference(u, name, hc)
            if u.nout > 1:
                want = want[0]
            got = run_twin(u, label, hx, dx)
            fails += ["[%s] %s" % (label, f) for f in compare(name, hc, want, got)]
    except TypeError as e:
        fails.append("%s %s: refused: %s" % (name, "".join(d.char for d in loop), e))
    return fails


MAX_LOOPS = max(len(numpy_loops(getattr(np, n))) for n in TWINNED)


@gpu
@pytest.mark.parametrize("j", range(MAX_LOOPS))
def test_gpu_every_twin_loop_j_edge_values_layouts(j):
    """Loop j (NumPy's order) of every twin that has one, on the GPU: edge values, and for the
    first loop of each kind of type every layout."""
    todo = [n for n in TWINNED if j < len(numpy_loops(getattr(np, n)))]
    for n in todo:
        _twins.twin(getattr(np, n))   # made once, before the threads
    fails = []
    # NVRTC compiles a kernel per loop and layout; launches that compile let go of the GIL, and
    # the twins' compiles run in parallel threads
    with cf.ThreadPoolExecutor(8) as ex:
        for f in ex.map(lambda n: one_case(n, j), todo):
            fails += f
    assert not fails, "%d disagreements:\n%s" % (len(fails), "\n".join(fails))


@gpu
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_gpu_complex_power_infinite_exponent_intermediates(dtype):
    """Complex power with an infinite or NaN part in the exponent is exp(b * log(a)) with Annex G's
    product: the result hangs on the signs and zeros of log(a)'s parts and on |a| near overflow.
    The same cases as the loop test, with the GPU's log(a) and |a| beside NumPy's in the message
    of any disagreement (which intermediate differs)."""
    loop = (np.dtype(dtype),) * 3
    xs = operands("power", loop, 2)
    keep = ~np.isfinite(xs[1])
    a, b = xs[0][keep], xs[1][keep]
    want = reference(np.power, "power", [a, b])
    got = np.power(cuda.to_device(a), cuda.to_device(b)).copy_to_host()
    k = tolerance("power", want.dtype)[1]
    bad = np.nonzero(H.complex_error_ulps(want, got) > k)[0]
    if bad.size:
        with np.errstate(all="ignore"):
            la_np, ab_np = np.log(a[bad]), np.abs(a[bad])
        la = np.log(cuda.to_device(a[bad])).copy_to_host()
        ab = np.abs(cuda.to_device(a[bad])).copy_to_host()
        rows = ["power(%r, %r) = %r, NumPy %r; log(a) %r, NumPy %r; |a| %r, NumPy %r"
                % (a[i], b[i], got[i], want[i], la[j], la_np[j], ab[j], ab_np[j])
                for j, i in enumerate(bad[:8])]
        pytest.fail("%d of %d outside cplx %d:\n%s" % (bad.size, a.size, k, "\n".join(rows)))
