"""C text helpers: literals, identifiers, the prelude shared by all generated sources."""

import math
import re

import numpy as np


__all__ = ["c_literal", "c_ident", "c_string", "PRELUDE", "sanitize", "tuple_struct_name"]

_CXX_KEYWORDS = set("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export extern
false float for friend goto if inline int long mutable namespace new noexcept not not_eq nullptr
operator or or_eq private protected public register reinterpret_cast requires restrict return short
signed sizeof static static_assert static_cast struct switch template this thread_local throw true
try typedef typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq
main threadIdx blockIdx blockDim gridDim warpSize isnan isinf isfinite signbit fpclassify
isnormal isgreater isless islessequal isgreaterequal islessgreater isunordered errno assert
offsetof NULL min max std
""".split())


def sanitize(name):
    """A C identifier fragment from any text (qualified names, global names)."""
    s = re.sub(r"[^0-9A-Za-z_]", "_", name)
    s = re.sub(r"_+", "_", s).strip("_")
    return s or "x"


def c_ident(name):
    """The C name of a Python local variable. Names that could clash with C++ keywords, CUDA
    builtins, macros (all-caps names) or our own cf_/py_ names get a 'py_' prefix."""
    if (name in _CXX_KEYWORDS or name.startswith(("cf_", "CF_", "py_", "__")) or name.isupper()
            or not name.isascii() or name.startswith("_")):
        return "py_" + (name if name.isascii() else
                        "".join(c if c.isascii() else "u%04x" % ord(c) for c in name))
    return name


def _int_literal(v, t):
    name = t.cname
    if name == "cf_int64":
        if v == -2 ** 63:
            return "(-9223372036854775807LL - 1)"
        return "%dLL" % v if v >= 0 else "(%dLL)" % v
    if name == "cf_uint64":
        return "%dULL" % v
    if name == "cf_int32":
        if v == -2 ** 31:
            return "(-2147483647 - 1)"
        return "%d" % v if v >= 0 else "(%d)" % v
    if name == "cf_uint32":
        return "%dU" % v
    return "((%s)%d)" % (name, v)


def _float_text(f, single):
    if math.isnan(f):
        return "(%sCF_NAN)" % ("(cf_float32)" if single else "")
    if math.isinf(f):
        s = "(%sCF_INF)" % ("(cf_float32)" if single else "")
        return s if f > 0 else "(-%s)" % s
    if single:
        s = str(np.float32(f))
    else:
        s = repr(float(f))
    if not any(c in s for c in ".en"):
        s += ".0"
    if single:
        s += "f"
    return "(%s)" % s if s.startswith("-") else s


def c_string(text):
    """A C string literal of text (UTF-8; quotes, backslashes, control and non-ASCII bytes
    escaped in octal, so no escape runs into a following digit)."""
    out = []
    for b in text.encode("utf-8"):
        c = chr(b)
        if c in '"\\?':
            out.append("\\" + c)
        elif 32 <= b < 127:
            out.append(c)
        else:
            out.append("\\%03o" % b)
    return '"%s"' % "".join(out)


def c_literal(v, t):
    """The C literal of value v (already a value of type t) with exactly the C type t.cname."""
    k = t.kind
    if k == "b":
        return "true" if bool(v) else "false"
    if k in "iu":
        return _int_literal(int(v), t)
    if k == "f":
        if t.bits == 16:
            # a float16 / bfloat16 constant by its bits: exact, and a constant expression
            bits = int(np.asarray(v, dtype=t.dtype).view(np.uint16))
            return "%s(0x%04x)" % ("cf_bf16" if t.cname == "cf_bfloat16" else "cf_h16", bits)
        return _float_text(float(v), t.bits == 32)
    if k == "c":
        c = complex(v)
        single = t.bits == 64
        return "%s(%s, %s)" % (t.cname, _float_text(c.real, single), _float_text(c.imag, single))
    raise ValueError("no literal for %s" % t)


# Helpers the translator needs beyond the runtime contract. Guarded so that several generated
# sources can be concatenated into one translation unit.
PRELUDE = r"""#ifndef CF_LANG_PRELUDE
#define CF_LANG_PRELUDE
#if defined(__CUDACC__)
#define CF_LANG_FN __device__ inline
#define CF_LANG_TABLE __device__ const
#else
#define CF_LANG_FN inline
#define CF_LANG_TABLE static const
#endif
/* A[i] with Python's negative index meaning (i < 0 counts from the end). */
template <typename I> CF_LANG_FN long long cf_lang_wrap(I i, long long n)
{ return i < 0 ? (long long)i + n : (long long)i; }
/* Truth value of a complex number (Python's bool(z)). */
CF_LANG_FN bool cf_lang_truthy(cf_complex64 z) { return z.re != 0 || z.im != 0; }
CF_LANG_FN bool cf_lang_truthy(cf_complex128 z) { return z.re != 0 || z.im != 0; }
/* NumPy's ordering of complex numbers: lexicographic on (real, imag). */
template <typename T> CF_LANG_FN bool cf_lang_clt(cf_complex<T> a, cf_complex<T> b)
{ return a.re < b.re || (a.re == b.re && a.im < b.im); }
template <typename T> CF_LANG_FN bool cf_lang_cle(cf_complex<T> a, cf_complex<T> b)
{ return a.re < b.re || (a.re == b.re && a.im <= b.im); }
template <typename T> CF_LANG_FN bool cf_lang_cgt(cf_complex<T> a, cf_complex<T> b)
{ return a.re > b.re || (a.re == b.re && a.im > b.im); }
template <typename T> CF_LANG_FN bool cf_lang_cge(cf_complex<T> a, cf_complex<T> b)
{ return a.re > b.re || (a.re == b.re && a.im >= b.im); }
/* Python's min/max of two complex values under that ordering. */
template <typename T> CF_LANG_FN cf_complex<T> cf_lang_cmin(cf_complex<T> a, cf_complex<T> b)
{ return cf_lang_clt(b, a) ? b : a; }
template <typename T> CF_LANG_FN cf_complex<T> cf_lang_cmax(cf_complex<T> a, cf_complex<T> b)
{ return cf_lang_cgt(b, a) ? b : a; }
/* Exact comparisons of a Python int (int64) with a uint64, as NumPy 2 does them. */
CF_LANG_FN bool cf_lang_lt_su(long long a, unsigned long long b) { return a < 0 || (unsigned long long)a < b; }
CF_LANG_FN bool cf_lang_le_su(long long a, unsigned long long b) { return a < 0 || (unsigned long long)a <= b; }
CF_LANG_FN bool cf_lang_eq_su(long long a, unsigned long long b) { return a >= 0 && (unsigned long long)a == b; }
/* Numba's a ** b for an integer exponent (numba/cpython/numbers.py, int_power_impl): square and
 * multiply in the result type. A negative exponent gives, for integers, the most negative value
 * when a is 0 (Numba's result under its NumPy error model), a's power when a is 1 or -1, else 0;
 * for floats 1 / r computed in double. Exponents beyond 65536 go through pow() in double. */
CF_LANG_FN long long cf_lang_nb_ipow(long long a, long long b)
{
    if (b < 0) {
        if (a == 0) return (long long)(1ULL << 63);
        if (a != 1 && a != -1) return 0;
        return (a == -1 && (b & 1)) ? -1 : 1;
    }
    unsigned long long r = 1ULL, p = (unsigned long long)a, e = (unsigned long long)b;
    while (e != 0) { if (e & 1ULL) r *= p; e >>= 1; p *= p; }
    return (long long)r;
}
CF_LANG_FN unsigned long long cf_lang_nb_ipow(unsigned long long a, unsigned long long b)
{
    unsigned long long r = 1ULL;
    while (b != 0) { if (b & 1ULL) r *= a; b >>= 1; a *= a; }
    return r;
}
template <typename F, typename E> CF_LANG_FN F cf_lang_nb_fpowi(F a, E b)
{
    bool inv = b < (E)0;
    unsigned long long e = inv ? 0ULL - (unsigned long long)b : (unsigned long long)b;
    if (e > 65536ULL) return (F)pow((double)a, (double)b);
    F r = (F)1;
    while (e != 0) { if (e & 1ULL) r *= a; e >>= 1; a *= a; }
    return inv ? (F)(1.0 / (double)r) : r;
}
/* Number of iterations of range(start, stop, step), without overflow for any int64 values. */
CF_LANG_FN unsigned long long cf_lang_range_len(long long start, long long stop, long long step)
{
    if (step > 0)
        return start < stop ? ((unsigned long long)stop - (unsigned long long)start - 1ULL) / (unsigned long long)step + 1ULL : 0ULL;
    if (step < 0)
        return start > stop ? ((unsigned long long)start - (unsigned long long)stop - 1ULL) / (0ULL - (unsigned long long)step) + 1ULL : 0ULL;
    return 0ULL;
}
/* Item k of range(start, stop, step) (uint64 arithmetic: C must not overflow int64). */
CF_LANG_FN long long cf_lang_range_item(long long start, long long k, long long step)
{ return (long long)((unsigned long long)start + (unsigned long long)k * (unsigned long long)step); }
/* The index into an axis of extent n that is broadcast (n == 1) against a loop counter k. */
CF_LANG_FN long long cf_lang_bcast(long long k, long long n) { return n == 1 ? 0 : k; }
/* a.T: the axes reversed. */
template <typename T, int N> CF_LANG_FN cf_array_ref<T, N> cf_lang_transpose(cf_array_ref<T, N> a)
{
    cf_array_ref<T, N> r;
    r.data = a.data;
    for (int k = 0; k < N; k++) { r.shape[k] = a.shape[N - 1 - k]; r.strides[k] = a.strides[N - 1 - k]; }
    return r;
}
/* A slice of an axis of n items, Python's meaning (PySlice_AdjustIndices): the first index,
 * and the number of items in *len. has: bit 0 when the start is given, bit 1 the stop. A zero
 * step (refused at compile time when constant) gives an empty slice. */
CF_LANG_FN long long cf_lang_slice(long long n, long long lo, long long hi, long long step,
                                   int has, long long *len)
{
    if (step == 0) { *len = 0; return 0; }
    long long start = step < 0 ? n - 1 : 0, stop = step < 0 ? -1 : n;
    if (has & 1) {
        start = lo;
        if (start < 0) { start += n; if (start < 0) start = step < 0 ? -1 : 0; }
        else if (start >= n) start = step < 0 ? n - 1 : n;
    }
    if (has & 2) {
        stop = hi;
        if (stop < 0) { stop += n; if (stop < 0) stop = step < 0 ? -1 : 0; }
        else if (stop >= n) stop = step < 0 ? n - 1 : n;
    }
    if (step < 0)
        *len = stop < start ? (long long)(((unsigned long long)start - (unsigned long long)stop - 1ULL) / (0ULL - (unsigned long long)step)) + 1 : 0;
    else
        *len = start < stop ? (long long)(((unsigned long long)stop - (unsigned long long)start - 1ULL) / (unsigned long long)step) + 1 : 0;
    return start;
}
/* A failed assert of a function translated with debug=True. On the device: CUDA's device-side
 * assert (the driver prints the message, file, line and thread, stops the kernel, and the next
 * synchronising call returns CUDA_ERROR_ASSERT, which cufunc raises as AssertionError). On a
 * host build: the same message on stderr, then abort(). */
#if defined(__CUDACC__)
CF_LANG_FN void cf_lang_assert_fail(const char *msg, const char *file, unsigned line, const char *fn)
{ __assertfail(msg, file, line, fn, 1); }
#else
#include <cstdio>
#include <cstdlib>
inline void cf_lang_assert_fail(const char *msg, const char *file, unsigned line, const char *fn)
{ std::fprintf(stderr, "%s:%u: %s: Assertion `%s' failed.\n", file, line, fn, msg); std::abort(); }
#endif
#endif
"""


def tuple_struct_name(tt):
    """The C struct holding a value of the Tuple type tt (field fI holds item I)."""
    return "cf_tuple_" + "_".join(t.name for t in tt.types)
