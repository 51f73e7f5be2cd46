/* cufunc runtime header: the helpers that give translated kernel code Python's and NumPy 2's
 * meaning (templates/cufunc/runtime.cuh; contract in briefs/runtime_contract.md).
 *
 * Every helper is __host__ __device__, so the same generated code compiles with NVRTC for the GPU
 * and with g++ -std=c++17 on the host, where the differential tests run it against CPython.
 * Under NVRTC (__CUDACC_RTC__) no standard header is included: CUDA's builtin math is used.
 *
 * Integer and boolean results, float + - * / // %, casts, shifts, min/max/abs/round are exact
 * (bit for bit what NumPy 2 scalars give on x86-64). Math functions carry the error of the
 * underlying libm (CUDA's documented ulp bounds on the device, glibc on the host); the complex
 * functions follow CPython's cmath / NumPy's npymath algorithms for finite arguments.
 * Kept small on purpose: NVRTC parses this for every kernel. */
#ifndef CUFUNC_RUNTIME_CUH
#define CUFUNC_RUNTIME_CUH

#ifdef __CUDACC__
#define CF_HD __host__ __device__ inline
#else
#include <math.h>
#ifndef __host__
#define __host__
#endif
#ifndef __device__
#define __device__
#endif
#ifndef __global__
#define __global__
#endif
#ifndef __forceinline__
#define __forceinline__ inline
#endif
#define CF_HD inline
#endif

typedef bool cf_bool;
typedef signed char cf_int8;
typedef short cf_int16;
typedef int cf_int32;
typedef long long cf_int64;
typedef unsigned char cf_uint8;
typedef unsigned short cf_uint16;
typedef unsigned int cf_uint32;
typedef unsigned long long cf_uint64;
typedef float cf_float32;
typedef double cf_float64;

#ifndef CF_NO_HALF /* the 2-byte floats; the compiler leaves them out of sources that use none (compile.c) */
/* ---- float16: NumPy's half (npy_half) ----
 * cf_float16 is 2 bytes of IEEE binary16. Arithmetic gives NumPy's float16 meaning: each operation
 * computes in float32 and rounds the result to half (round to nearest even), as NumPy's float16
 * scalar operations and ufunc loops do. Conversions are bit-exact: float32 -> half and
 * double -> half round to nearest even directly (npy_float_to_half / npy_double_to_half; a double
 * is not rounded to float32 first), half -> float32 is exact. On the device float32 <-> half use
 * PTX cvt.rn.f16.f32 / cvt.f32.f16 (same results; a NaN's payload may differ, NaN stays NaN). */
CF_HD unsigned cf_f32_bits(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    unsigned u; __builtin_memcpy(&u, &f, 4); return u;
#endif
}
CF_HD float cf_bits_f32(unsigned u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f; __builtin_memcpy(&f, &u, 4); return f;
#endif
}
CF_HD unsigned long long cf_f64_bits(double d) {
#ifdef __CUDA_ARCH__
    return (unsigned long long)__double_as_longlong(d);
#else
    unsigned long long u; __builtin_memcpy(&u, &d, 8); return u;
#endif
}
/* The magnitude bits m (< 2^(s+1) of a value m * 2^-s half-units) rounded to nearest even. */
CF_HD unsigned cf_rne_shift(unsigned long long m, int s) {
    unsigned long long r = m >> s, rem = m & ((1ULL << s) - 1), halfway = 1ULL << (s - 1);
    return (unsigned)(r + (rem > halfway || (rem == halfway && (r & 1))));
}
CF_HD unsigned short cf_f32_to_f16_soft(float f) {
    unsigned x = cf_f32_bits(f), sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) /* inf, or NaN keeping the top of its payload (as NumPy) */
        return (unsigned short)(sign | (x == 0x7f800000u ? 0x7c00u : (0x7c00u + (x >> 13 & 0x3ffu)) | ((x >> 13 & 0x3ffu) ? 0u : 1u)));
    if (x >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (x < 0x33000000u) return (unsigned short)sign;              /* < 2^-25 rounds to 0 */
    unsigned e = x >> 23, m = (x & 0x7fffffu) | 0x800000u;
    if (e < 113) /* subnormal half: units of 2^-24 */
        return (unsigned short)(sign | cf_rne_shift(m, 126 - e));
    /* normal: the carry of rounding may step into the exponent (and up to inf), as it should */
    return (unsigned short)(sign | (((e - 112) << 10) + cf_rne_shift(m & 0x7fffffu, 13)));
}
CF_HD unsigned short cf_f64_to_f16(double d) {
    unsigned long long x = cf_f64_bits(d);
    unsigned sign = (unsigned)(x >> 48) & 0x8000u;
    x &= 0x7fffffffffffffffULL;
    if (x >= 0x7ff0000000000000ULL) {
        unsigned p = (unsigned)(x >> 42) & 0x3ffu;
        return (unsigned short)(sign | (x == 0x7ff0000000000000ULL ? 0x7c00u : (0x7c00u + p) | (p ? 0u : 1u)));
    }
    if (x >= 0x40effe0000000000ULL) return (unsigned short)(sign | 0x7c00u); /* >= 65520 */
    if (x < 0x3e60000000000000ULL) return (unsigned short)sign;               /* < 2^-25 */
    unsigned e = (unsigned)(x >> 52);
    unsigned long long m = (x & 0xfffffffffffffULL) | 0x10000000000000ULL;
    if (e < 1009)
        return (unsigned short)(sign | cf_rne_shift(m, 1051 - e));
    return (unsigned short)(sign | (((e - 1008) << 10) + cf_rne_shift(m & 0xfffffffffffffULL, 42)));
}
CF_HD float cf_f16_to_f32_soft(unsigned short h) {
    unsigned sign = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return cf_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) { float r = (float)m * 5.9604644775390625e-08f; return sign ? -r : r; }
    return cf_bits_f32(sign | ((e + 112) << 23) | (m << 13));
}
CF_HD unsigned short cf_f32_to_f16(float f) {
#ifdef __CUDA_ARCH__
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
    return cf_f32_to_f16_soft(f);
#endif
}
CF_HD float cf_f16_to_f32(unsigned short h) {
#ifdef __CUDA_ARCH__
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
#else
    return cf_f16_to_f32_soft(h);
#endif
}
/* What the two 2-byte float types (cf_float16, cf_bfloat16) share: integers convert through
 * float32 (exact where the type is finite); each arithmetic operation computes in float32 and
 * rounds back (the type's constructor from float); comparisons are float32's; negation and unary
 * plus work on the bits (NumPy's npy_half_neg, ml_dtypes' likewise). */
#define CF_HALF_INT_CTORS(T, CONV) \
    CF_HD explicit T(signed char x) : bits(CONV((float)x)) {} \
    CF_HD explicit T(short x) : bits(CONV((float)x)) {} \
    CF_HD explicit T(int x) : bits(CONV((float)x)) {} \
    CF_HD explicit T(long x) : bits(CONV((float)x)) {} \
    CF_HD explicit T(long long x) : bits(CONV((float)x)) {} \
    CF_HD explicit T(unsigned char x) : bits(CONV((float)x)) {} \
    CF_HD explicit T(unsigned short x) : bits(CONV((float)x)) {} \
    CF_HD explicit T(unsigned int x) : bits(CONV((float)x)) {} \
    CF_HD explicit T(unsigned long x) : bits(CONV((float)x)) {} \
    CF_HD explicit T(unsigned long long x) : bits(CONV((float)x)) {}
#define CF_HALF_BIN(T, op) \
    CF_HD T operator op(T a, T b) { return T((float)a op (float)b); } \
    CF_HD T &operator op##=(T &a, T b) { return a = a op b; }
#define CF_HALF_CMP(T, op) \
    CF_HD bool operator op(T a, T b) { return (float)a op (float)b; } \
    CF_HD bool operator op(T a, int b) { return (float)a op (float)b; }
#define CF_HALF_OPS(T) \
    CF_HALF_BIN(T, +) CF_HALF_BIN(T, -) CF_HALF_BIN(T, *) CF_HALF_BIN(T, /) \
    CF_HALF_CMP(T, ==) CF_HALF_CMP(T, !=) CF_HALF_CMP(T, <) CF_HALF_CMP(T, <=) \
    CF_HALF_CMP(T, >) CF_HALF_CMP(T, >=) \
    CF_HD T operator-(T a) { return T::from_bits((unsigned short)(a.bits ^ 0x8000u)); } \
    CF_HD T operator+(T a) { return a; }
struct cf_float16 {
    unsigned short bits;
    cf_float16() = default;
    CF_HD explicit cf_float16(float f) : bits(cf_f32_to_f16(f)) {}
    CF_HD explicit cf_float16(double d) : bits(cf_f64_to_f16(d)) {}
    /* integers (and bool) through float32: exact where a half is finite (|x| < 2^24) */
    CF_HD explicit cf_float16(bool x) : bits(x ? 0x3c00 : 0) {}
    CF_HALF_INT_CTORS(cf_float16, cf_f32_to_f16)
    CF_HD explicit operator float() const { return cf_f16_to_f32(bits); }
    CF_HD explicit operator double() const { return (double)cf_f16_to_f32(bits); }
    static CF_HD cf_float16 from_bits(unsigned short b) { cf_float16 h; h.bits = b; return h; }
};
/* A float16 constant from its bits (the translator's literals). */
CF_HD cf_float16 cf_h16(unsigned b) { return cf_float16::from_bits((unsigned short)b); }
CF_HALF_OPS(cf_float16)

/* ---- bfloat16: ml_dtypes' (Eigen's) bfloat16 ----
 * 2 bytes: the top half of a float32. Arithmetic as ml_dtypes: each operation computes in float32
 * and rounds to bfloat16 (nearest even; a NaN becomes the quiet NaN 0x7fc0 with its sign). Every
 * other type converts through float32 first (ml_dtypes does, a double included), exactly. */
CF_HD unsigned short cf_f32_to_bf16(float f) {
    unsigned x = cf_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16 & 0x8000u) | 0x7fc0u);
    return (unsigned short)((x + 0x7fffu + (x >> 16 & 1u)) >> 16);
}
struct cf_bfloat16 {
    unsigned short bits;
    cf_bfloat16() = default;
    CF_HD explicit cf_bfloat16(float f) : bits(cf_f32_to_bf16(f)) {}
    CF_HD explicit cf_bfloat16(double d) : bits(cf_f32_to_bf16((float)d)) {}
    CF_HD explicit cf_bfloat16(bool x) : bits(x ? 0x3f80 : 0) {}
    CF_HALF_INT_CTORS(cf_bfloat16, cf_f32_to_bf16)
    CF_HD explicit cf_bfloat16(cf_float16 h) : bits(cf_f32_to_bf16((float)h)) {}
    CF_HD explicit operator float() const { return cf_bits_f32((unsigned)bits << 16); }
    CF_HD explicit operator double() const { return (double)cf_bits_f32((unsigned)bits << 16); }
    CF_HD explicit operator cf_float16() const { return cf_float16(cf_bits_f32((unsigned)bits << 16)); }
    static CF_HD cf_bfloat16 from_bits(unsigned short b) { cf_bfloat16 h; h.bits = b; return h; }
};
CF_HD cf_bfloat16 cf_bf16(unsigned b) { return cf_bfloat16::from_bits((unsigned short)b); }
CF_HALF_OPS(cf_bfloat16)
#undef CF_HALF_OPS
#undef CF_HALF_CMP
#undef CF_HALF_BIN
#undef CF_HALF_INT_CTORS
#endif

#define CF_PI 3.141592653589793
#define CF_E 2.718281828459045
#define CF_TAU 6.283185307179586
#ifdef __CUDACC_RTC__ /* NVRTC folds these to constants and has no __builtin_huge_val */
#define CF_INF (1.0 / 0.0)
#define CF_NAN (0.0 / 0.0)
#else
#define CF_INF __builtin_huge_val()
#define CF_NAN __builtin_nan("")
#endif

template <typename T> struct cf_complex {
    typedef T value_type;
    T re, im;
    cf_complex() = default;
    CF_HD cf_complex(T r, T i = T(0)) : re(r), im(i) {}
    template <typename U> CF_HD explicit cf_complex(const cf_complex<U> &o) : re((T)o.re), im((T)o.im) {}
};
typedef cf_complex<float> cf_complex64;
typedef cf_complex<double> cf_complex128;

/* A view of a gufunc argument: element (i, j) is at data + i*strides[0] + j*strides[1] bytes. */
template <typename T, int ND> struct cf_array_ref {
    char *data;
    long long shape[ND];
    long long strides[ND];
};
template <typename T> struct cf_array_ref<T, 0> { char *data; };

/* Kinds: 0 bool, 1 signed int, 2 unsigned int, 3 float, 4 complex. W is the type the wrapping
 * arithmetic runs in: unsigned and at least as wide as unsigned int, so that no operation
 * promotes to a signed int that could overflow (undefined behaviour in C++). */
template <typename T> struct cf_num { enum { kind = 4, bits = 0 }; typedef T W; };
#define CF_NUM(T, K, B, WT) \
    template <> struct cf_num<T> { enum { kind = K, bits = B }; typedef WT W; };
CF_NUM(bool, 0, 1, unsigned)
CF_NUM(signed char, 1, 8, unsigned)
CF_NUM(short, 1, 16, unsigned)
CF_NUM(int, 1, 32, unsigned)
CF_NUM(long long, 1, 64, unsigned long long)
CF_NUM(unsigned char, 2, 8, unsigned)
CF_NUM(unsigned short, 2, 16, unsigned)
CF_NUM(unsigned int, 2, 32, unsigned)
CF_NUM(unsigned long long, 2, 64, unsigned long long)
CF_NUM(float, 3, 32, float)
CF_NUM(double, 3, 64, double)
#ifndef CF_NO_HALF
CF_NUM(cf_float16, 3, 16, float)
CF_NUM(cf_bfloat16, 3, 16, float)
#endif
#undef CF_NUM

/* x < 0 without "comparison of unsigned with zero" noise for unsigned T. */
template <typename T> CF_HD bool cf_isneg(T x) { return cf_num<T>::kind == 1 && (x < (T)0) != 0; }

/* ---- complex arithmetic (NumPy's scalar algorithms) ---- */
template <typename T> CF_HD cf_complex<T> operator+(cf_complex<T> a, cf_complex<T> b) { return cf_complex<T>(a.re + b.re, a.im + b.im); }
template <typename T> CF_HD cf_complex<T> operator-(cf_complex<T> a, cf_complex<T> b) { return cf_complex<T>(a.re - b.re, a.im - b.im); }
template <typename T> CF_HD cf_complex<T> operator*(cf_complex<T> a, cf_complex<T> b) { return cf_complex<T>(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re); }
template <typename T> CF_HD cf_complex<T> operator-(cf_complex<T> a) { return cf_complex<T>(-a.re, -a.im); }
template <typename T> CF_HD cf_complex<T> operator+(cf_complex<T> a) { return a; }
template <typename T> CF_HD bool operator==(cf_complex<T> a, cf_complex<T> b) { return a.re == b.re && a.im == b.im; }
template <typename T> CF_HD bool operator!=(cf_complex<T> a, cf_complex<T> b) { return !(a == b); }
/* Smith's algorithm exactly as NumPy's complex divide loop (0/0 gives inf/nan per component). */
template <typename T> CF_HD cf_complex<T> operator/(cf_complex<T> a, cf_complex<T> b) {
    T abr = b.re < 0 ? -b.re : b.re, abi = b.im < 0 ? -b.im : b.im;
    if (abr >= abi) {
        if (abr == 0 && abi == 0) { T pz = abr * abr; return cf_complex<T>(a.re / pz, a.im / pz); } /* by +0 */
        T rat = b.im / b.re, scl = T(1) / (b.re + b.im * rat);
        return cf_complex<T>((a.re + a.im * rat) * scl, (a.im - a.re * rat) * scl);
    }
    T rat = b.re / b.im, scl = T(1) / (b.im + b.re * rat);
    return cf_complex<T>((a.re * rat + a.im) * scl, (a.im * rat - a.re) * scl);
}

/* ---- wrapping arithmetic: as NumPy scalars (bool + is or, bool * is and) ---- */
template <typename T> CF_HD T cf_add(T a, T b) { typedef typename cf_num<T>::W W; return (T)((W)a + (W)b); }
template <typename T> CF_HD T cf_sub(T a, T b) { typedef typename cf_num<T>::W W; return (T)((W)a - (W)b); }
template <typename T> CF_HD T cf_mul(T a, T b) { typedef typename cf_num<T>::W W; return (T)((W)a * (W)b); }
template <typename T> CF_HD T cf_neg(T a) { typedef typename cf_num<T>::W W; return (T)(-(W)a); }
template <typename T> CF_HD T cf_truediv(T a, T b) { return a / b; }

/* ---- casts: NumPy astype on x86-64 ---- */
/* cvttsd2si / cvttss2si: truncation, "integer indefinite" (the minimum) when out of range or NaN. */
template <typename F> CF_HD int cf_cvt32(F x) {
    return (x > (F)-2147483649.0 && x < (F)2147483648.0) ? (int)x : (int)(-2147483647 - 1);
}
template <typename F> CF_HD long long cf_cvt64(F x) {
    return (x >= (F)-9223372036854775808.0 && x < (F)9223372036854775808.0) ? (long long)x
                                                                             : (long long)(-9223372036854775807LL - 1);
}
/* gcc's float -> uint64: values >= 2^63 go through x - 2^63 and the top bit is flipped back. */
template <typename F> CF_HD unsigned long long cf_cvtu64(F x) {
    return x >= (F)9223372036854775808.0 ? (unsigned long long)cf_cvt64(x - (F)9223372036854775808.0) ^ 0x8000000000000000ULL
                                         : (unsigned long long)cf_cvt64(x);
}
template <typename To, typename From, int KT = cf_num<To>::kind, int KF = cf_num<From>::kind>
struct cf_caster { static CF_HD To f(From x) { return (To)x; } };
template <typename From, int KF> struct cf_caster<bool, From, 0, KF> { static CF_HD bool f(From x) { return x != (From)0; } };
template <typename From> struct cf_caster<bool, From, 0, 4> { static CF_HD bool f(From x) { return x.re != 0 || x.im != 0; } };
/* int8..int32, uint8, uint16 go through a 32-bit conversion; uint32 and int64 through a 64-bit one. */
template <typename To, typename From> struct cf_caster<To, From, 1, 3> {
    static CF_HD To f(From x) { return sizeof(To) == 8 ? (To)cf_cvt64(x) : (To)cf_cvt32(x); }
};
template <typename To, typename From> struct cf_caster<To, From, 2, 3> {
    static CF_HD To f(From x) { return sizeof(To) == 8 ? (To)cf_cvtu64(x) : sizeof(To) == 4 ? (To)cf_cvt64(x) : (To)cf_cvt32(x); }
};
template <typename To, typename From, int KT> struct cf_caster<To, From, KT, 4> {
    static CF_HD To f(From x) { return cf_caster<To, typename From::value_type>::f(x.re); }
};
template <typename To, typename From, int KF> struct cf_caster<To, From, 4, KF> {
    static CF_HD To f(From x) { return To(cf_caster<typename To::value_type, From>::f(x), 0); }
};
template <typename To, typename From> struct cf_caster<To, From, 4, 4> {
    static CF_HD To f(From x) { return To((typename To::value_type)x.re, (typename To::value_type)x.im); }
};
#ifndef CF_NO_HALF
/* float16 to an integer: as NumPy, the half is widened to float32 and cast from there. */
template <typename To> struct cf_caster<To, cf_float16, 1, 3> { static CF_HD To f(cf_float16 x) { return cf_caster<To, float>::f((float)x); } };
template <typename To> struct cf_caster<To, cf_float16, 2, 3> { static CF_HD To f(cf_float16 x) { return cf_caster<To, float>::f((float)x); } };
template <typename To> struct cf_caster<To, cf_bfloat16, 2, 3> { static CF_HD To f(cf_bfloat16 x) { return cf_caster<To, float>::f((float)x); } };
template <typename To> struct cf_caster<To, cf_bfloat16, 1, 3> { static CF_HD To f(cf_bfloat16 x) { return cf_caster<To, float>::f((float)x); } };
#endif
template <typename To, typename From> CF_HD To cf_cast(From x) { return cf_caster<To, From>::f(x); }

/* ---- floor division and modulo ---- */
/* Integers: Python's floor semantics; x // 0 == x % 0 == 0; MIN // -1 wraps to MIN. */
template <typename T> CF_HD T cf_floordiv(T a, T b) {
    if (b == 0) return 0;
    if (cf_num<T>::kind == 1) {
        if (b == (T)-1) return cf_neg(a);
        T q = (T)(a / b);
        if ((T)(a % b) != 0 && cf_isneg(a) != cf_isneg(b)) q = (T)(q - 1);
        return q;
    }
    return (T)(a / b);
}
template <typename T> CF_HD T cf_mod(T a, T b) {
    if (b == 0) return 0;
    if (cf_num<T>::kind == 1) {
        if (b == (T)-1) return 0;
        T r = (T)(a % b);
        if (r != 0 && cf_isneg(r) != cf_isneg(b)) r = (T)(r + b);
        return r;
    }
    return (T)(a % b);
}

/* ---- real math: float32 uses the float functions, float64 the double ones ---- */
#define CF_M1(name, f32, f64) \
    CF_HD float cf_##name(float x) { return f32(x); } CF_HD double cf_##name(double x) { return f64(x); }
#define CF_M2(name, f32, f64) \
    CF_HD float cf_##name(float x, float y) { return f32(x, y); } CF_HD double cf_##name(double x, double y) { return f64(x, y); }
CF_M1(sqrt, sqrtf, sqrt) CF_M1(exp, expf, exp) CF_M1(exp2, exp2f, exp2) CF_M1(expm1, expm1f, expm1)
CF_M1(log, logf, log) CF_M1(log2, log2f, log2) CF_M1(log10, log10f, log10) CF_M1(log1p, log1pf, log1p)
CF_M1(sin, sinf, sin) CF_M1(cos, cosf, cos) CF_M1(tan, tanf, tan) CF_M1(asin, asinf, asin)
CF_M1(acos, acosf, acos) CF_M1(atan, atanf, atan) CF_M1(sinh, sinhf, sinh) CF_M1(cosh, coshf, cosh)
CF_M1(tanh, tanhf, tanh) CF_M1(asinh, asinhf, asinh) CF_M1(acosh, acoshf, acosh) CF_M1(atanh, atanhf, atanh)
CF_M1(floor, floorf, floor) CF_M1(ceil, ceilf, ceil) CF_M1(trunc, truncf, trunc) CF_M1(fabs, fabsf, fabs)
CF_M1(erf, erff, erf) CF_M1(erfc, erfcf, erfc) CF_M1(gamma, tgammaf, tgamma) CF_M1(lgamma, lgammaf, lgamma)
CF_M1(round, rintf, rint) /* round half to even in the default rounding mode */
CF_M2(atan2, atan2f, atan2) CF_M2(fmod, fmodf, fmod)
CF_M2(remainder, remainderf, remainder) CF_M2(copysign, copysignf, copysign) CF_M2(pow, powf, pow)
CF_M2(lib_hypot, hypotf, hypot) /* the library's, under cf_hypot's overflow rule below */
#undef CF_M1
#undef CF_M2
/* hypot with C's overflow (glibc's, NumPy's): inf exactly where sqrt(x^2 + y^2) rounds past the
 * largest finite value, whatever a library's hypot does near that threshold (CUDA's is within 2 ulp,
 * not correctly rounded; complex log1p, sign, absolute and log compute |z| with it, and NumPy's
 * |max + 1j| is max, |max + max j| inf). Finite arguments only (inf and NaN: the library's, which
 * follows C99):
 *   - the smaller below 2^-27 (float: 2^-13) of the larger: the larger, which is the correctly
 *     rounded result (the exact one lies within half an ulp of it);
 *   - the larger from 2^512 (float: 2^64): both scaled down by that power of two and the result
 *     back up (only exponents move), so that an overflow happens in the last product, as IEEE
 *     rounds it. */
template <typename T> CF_HD T cf_hypot_scaled(T x, T y, T big, T inv, T tiny, T lib(T, T))
{
    T ax = x < 0 ? -x : x, ay = y < 0 ? -y : y;
    if (!(ax - ax == 0 && ay - ay == 0)) /* inf or NaN */
        return lib(x, y);
    T hi = ax > ay ? ax : ay, lo = ax > ay ? ay : ax;
    if (lo < hi * tiny)
        return hi;
    if (hi >= big)
        return lib(x * inv, y * inv) * big;
    return lib(x, y);
}
CF_HD float cf_hypot(float x, float y)
{
    return cf_hypot_scaled<float>(x, y, 1.8446744073709552e+19f, 5.421010862427522e-20f,
                                  1.220703125e-04f /* 2^-13 */, cf_lib_hypot);
}
CF_HD double cf_hypot(double x, double y)
{
    return cf_hypot_scaled<double>(x, y, 1.3407807929942597e+154, 7.458340731200207e-155,
                                   7.450580596923828e-09 /* 2^-27 */, cf_lib_hypot);
}
/* float: NumPy's npy_degreesf/npy_radiansf multiply by 180.0f / NPY_PIf and NPY_PIf / 180.0f, the
 * float quotients (57.295776f, not the float nearest 180/pi, 57.29578f) */
CF_HD float cf_degrees(float x) { return x * (180.0f / 3.14159265358979323846f); }
CF_HD double cf_degrees(double x) { return x * 57.295779513082320876798; }
CF_HD float cf_radians(float x) { return x * (3.14159265358979323846f / 180.0f); }
CF_HD double cf_radians(double x) { return x * 0.017453292519943295769237; }
CF_HD int cf_clampexp(long long e) { return e > 100000 ? 100000 : e < -100000 ? -100000 : (int)e; }
CF_HD float cf_ldexp(float x, long long e) { return ldexpf(x, cf_clampexp(e)); }
CF_HD double cf_ldexp(double x, long long e) { return ldexp(x, cf_clampexp(e)); }
template <typename T> CF_HD bool cf_isnan(T x) { return x != x; }
template <typename T> CF_HD bool cf_isinf(T x) { return x == (T)CF_INF || x == -(T)CF_INF; }
template <typename T> CF_HD bool cf_isfinite(T x) { return x - x == x - x; }
/* frexp(inf or nan) gives (x, 0) as Python does; the C function leaves the exponent unspecified. */
CF_HD float cf_frexp(float x, long long *e) { int k = 0; float m = cf_isfinite(x) ? frexpf(x, &k) : x; *e = k; return m; }
CF_HD double cf_frexp(double x, long long *e) { int k = 0; double m = cf_isfinite(x) ? frexp(x, &k) : x; *e = k; return m; }
CF_HD float cf_modf(float x, float *ip) { return modff(x, ip); }
CF_HD double cf_modf(double x, double *ip) { return modf(x, ip); }

/* Floats: exactly NumPy's npy_divmod / npy_floor_divide / npy_remainder. */
template <typename T> CF_HD T cf_fdivmod(T a, T b, T *modulus) {
    T mod = cf_fmod(a, b);
    if (!b) { *modulus = mod; return a / b; }
    T div = (a - mod) / b;
    if (mod) {
        if ((b < 0) != (mod < 0)) { mod += b; div -= T(1); }
    } else {
        mod = cf_copysign(T(0), b);
    }
    T fl;
    if (div) {
        fl = cf_floor(div);
        if (div - fl > T(0.5)) fl += T(1);
    } else {
        fl = cf_copysign(T(0), a / b);
    }
    *modulus = mod;
    return fl;
}
CF_HD float cf_floordiv(float a, float b) { float m; return !b ? a / b : cf_fdivmod(a, b, &m); }
CF_HD double cf_floordiv(double a, double b) { double m; return !b ? a / b : cf_fdivmod(a, b, &m); }
CF_HD float cf_mod(float a, float b) { float m; if (!b) return fmodf(a, b); cf_fdivmod(a, b, &m); return m; }
CF_HD double cf_mod(double a, double b) { double m; if (!b) return fmod(a, b); cf_fdivmod(a, b, &m); return m; }

/* ---- power ---- */
/* Integers: square-and-multiply with wrapping; a negative exponent gives 0 unless a is 1 or -1. */
template <typename T> CF_HD T cf_pow(T a, T b) {
    typedef typename cf_num<T>::W W;
    if (cf_isneg(b)) return a == 1 ? (T)1 : (cf_isneg(a) && a == (T)-1) ? ((b & 1) ? a : (T)1) : (T)0;
    W r = 1, p = (W)a;
    while (b != 0) {
        if (b & 1) r *= p;
        p *= p;
        b = (T)(b >> 1);
    }
    return (T)r;
}

/* numpy.power (np.pow) differs from the ** operator in one place: its float loops compute an
 * exponent of 0.5 as sqrt (so (-inf) ** 0.5 is nan, (-0.0) ** 0.5 is -0.0). */
template <typename T> CF_HD T cf_np_power(T a, T b) { return cf_pow(a, b); }
CF_HD float cf_np_power(float a, float b) { return b == 0.5f ? cf_sqrt(a) : cf_pow(a, b); }
CF_HD double cf_np_power(double a, double b) { return b == 0.5 ? cf_sqrt(a) : cf_pow(a, b); }

#ifndef CF_NO_HALF
/* ---- 2-byte float math: NumPy's float16 loops and ml_dtypes' bfloat16 ones compute in float32
 * and round the result to the type (power included: no sqrt shortcut for numpy.power) ---- */
#define CF_H1(T, name) CF_HD T cf_##name(T x) { return T(cf_##name((float)x)); }
#define CF_H2(T, name) CF_HD T cf_##name(T x, T y) { return T(cf_##name((float)x, (float)y)); }
#define CF_HALF_MATH(T)                                                                            \
    CF_H1(T, sqrt) CF_H1(T, exp) CF_H1(T, exp2) CF_H1(T, expm1) CF_H1(T, log) CF_H1(T, log2)       \
    CF_H1(T, log10) CF_H1(T, log1p) CF_H1(T, sin) CF_H1(T, cos) CF_H1(T, tan) CF_H1(T, asin)       \
    CF_H1(T, acos) CF_H1(T, atan) CF_H1(T, sinh) CF_H1(T, cosh) CF_H1(T, tanh) CF_H1(T, asinh)     \
    CF_H1(T, acosh) CF_H1(T, atanh) CF_H1(T, floor) CF_H1(T, ceil) CF_H1(T, trunc) CF_H1(T, erf)   \
    CF_H1(T, erfc) CF_H1(T, gamma) CF_H1(T, lgamma) CF_H1(T, round) CF_H1(T, degrees)             \
    CF_H1(T, radians) CF_H2(T, atan2) CF_H2(T, hypot) CF_H2(T, fmod) CF_H2(T, remainder)           \
    CF_H2(T, floordiv) CF_H2(T, mod) CF_H2(T, pow)                                                 \
    CF_HD T cf_fabs(T x) { return T::from_bits((unsigned short)(x.bits & 0x7fffu)); }              \
    CF_HD T cf_abs(T x) { return cf_fabs(x); }                                                     \
    CF_HD T cf_copysign(T x, T y) {                                                                \
        return T::from_bits((unsigned short)((x.bits & 0x7fffu) | (y.bits & 0x8000u)));           \
    }                                                                                              \
    CF_HD T cf_np_power(T a, T b) { return cf_pow(a, b); }
CF_HALF_MATH(cf_float16)
CF_HALF_MATH(cf_bfloat16)
#undef CF_HALF_MATH
#undef CF_H1
#undef CF_H2
CF_HD cf_float16 cf_ldexp(cf_float16 x, long long e) { return cf_float16(cf_ldexp((float)x, e)); }
CF_HD cf_float16 cf_frexp(cf_float16 x, long long *e) { return cf_float16(cf_frexp((float)x, e)); }
CF_HD cf_float16 cf_modf(cf_float16 x, cf_float16 *ip) {
    float i, r = cf_modf((float)x, &i); *ip = cf_float16(i); return cf_float16(r);
}
#endif

/* ---- shifts: counts outside [0, bits) give 0 (<<) or the sign fill (>>) ---- */
template <typename T> CF_HD T cf_lshift(T a, T b) {
    typedef typename cf_num<T>::W W;
    return (unsigned long long)b < (unsigned long long)cf_num<T>::bits ? (T)((W)a << b) : (T)0;
}
template <typename T> CF_HD T cf_rshift(T a, T b) {
    return (unsigned long long)b < (unsigned long long)cf_num<T>::bits ? (T)(a >> b) : cf_isneg(a) ? (T)-1 : (T)0;
}

/* ---- Python's builtin min / max on two values (NaN handling follows these expressions) ---- */
template <typename T> CF_HD T cf_min(T a, T b) { return b < a ? b : a; }
template <typename T> CF_HD T cf_max(T a, T b) { return b > a ? b : a; }
template <typename T> CF_HD T cf_abs(T a) { return cf_isneg(a) ? cf_neg(a) : a; }
CF_HD float cf_abs(float a) { return fabsf(a); }
CF_HD double cf_abs(double a) { return fabs(a); }

/* ---- complex math ---- */
template <typename T> struct cf_fp;
template <> struct cf_fp<float> {
    static CF_HD float max() { return 3.40282346638528859812e+38f; }
    static CF_HD float tiny() { return 1.17549435082228750797e-38f; } /* smallest normal */
    static CF_HD float log_max() { return 88.7228391f; }
    enum { mant = 24 };
};
template <> struct cf_fp<double> {
    static CF_HD double max() { return 1.7976931348623157e308; }
    static CF_HD double tiny() { return 2.2250738585072014e-308; }
    static CF_HD double log_max() { return 709.782712893384; }
    enum { mant = 53 };
};
template <typename T> CF_HD T cf_real(cf_complex<T> z) { return z.re; }
template <typename T> CF_HD T cf_imag(cf_complex<T> z) { return z.im; }
template <typename T> CF_HD cf_complex<T> cf_conj(cf_complex<T> z) { return cf_complex<T>(z.re, -z.im); }
template <typename T> CF_HD T cf_abs(cf_complex<T> z) { return cf_hypot(z.re, z.im); }
template <typename T> CF_HD T cf_phase(cf_complex<T> z) { return cf_atan2(z.im, z.re); }
template <typename T> CF_HD cf_complex<T> cf_rect(T r, T phi) { return cf_complex<T>(r * cf_cos(phi), r * cf_sin(phi)); }
template <typename T> CF_HD bool cf_isnan(cf_complex<T> z) { return cf_isnan(z.re) || cf_isnan(z.im); }
template <typename T> CF_HD bool cf_isinf(cf_complex<T> z) { return cf_isinf(z.re) || cf_isinf(z.im); }
template <typename T> CF_HD bool cf_isfinite(cf_complex<T> z) { return cf_isfinite(z.re) && cf_isfinite(z.im); }
/* log(1/2 * hypot(x, y)) + 2 log 2: log|z| for |z| near overflow. */
template <typename T> CF_HD T cf_loghyp4(T x, T y) { return cf_log(cf_hypot(x / 2, y / 2)) + T(2 * 0.693147180559945309417); }

/* npy_csqrt (the C99 algorithm glibc and CPython also follow). */
template <typename T> CF_HD cf_complex<T> cf_sqrt(cf_complex<T> z) {
    T a = z.re, b = z.im, t;
    if (a == 0 && b == 0) return cf_complex<T>(0, b);
    if (cf_isinf(b)) return cf_complex<T>((T)CF_INF, b);
    if (cf_isnan(a)) return cf_complex<T>(a, (b - b) / (b - b));
    if (cf_isinf(a))
        return a < 0 ? cf_complex<T>(cf_fabs(b - b), cf_copysign(a, b)) : cf_complex<T>(a, cf_copysign(b - b, b));
    bool scale = cf_fabs(a) >= cf_fp<T>::max() / T(2.41421356237309504880) || cf_fabs(b) >= cf_fp<T>::max() / T(2.41421356237309504880);
    if (scale) { a *= T(0.25); b *= T(0.25); }
    cf_complex<T> r;
    if (a >= 0) {
        t = cf_sqrt((a + cf_hypot(a, b)) * T(0.5));
        r = cf_complex<T>(t, b / (2 * t));
    } else {
        t = cf_sqrt((-a + cf_hypot(a, b)) * T(0.5));
        r = cf_complex<T>(cf_fabs(b) / (2 * t), cf_copysign(t, b));
    }
    if (scale) { r.re *= 2; r.im *= 2; }
    return r;
}

/* cexp: npy_cexp's special cases; past exp's overflow threshold exp(x/2)^2 keeps a finite
 * exp(x) * cos(y) finite. */
template <typename T> CF_HD cf_complex<T> cf_exp(cf_complex<T> z) {
    T x = z.re, y = z.im;
    if (cf_isnan(x)) return y == 0 ? z : cf_complex<T>(x, cf_copysign((T)CF_NAN, y));
    if (y == 0) return cf_complex<T>(cf_exp(x), y);
    if (cf_isinf(x) && !cf_isfinite(y)) return x > 0 ? cf_complex<T>(x, (T)CF_NAN) : cf_complex<T>(0, 0);
    if (!cf_isfinite(y)) return cf_complex<T>((T)CF_NAN, cf_copysign((T)CF_NAN, y));
    T c = cf_cos(y), s = cf_sin(y), e;
    if (x > cf_fp<T>::log_max() - T(1) && cf_isfinite(x)) {
        e = cf_exp(x * T(0.5));
        return cf_complex<T>(c * e * e, s * e * e);
    }
    e = cf_exp(x);
    return cf_complex<T>(e * c, e * s);
}

/* clog: CPython's algorithm (rescaling for huge and subnormal |z|, log1p near |z| == 1). */
template <typename T> CF_HD cf_complex<T> cf_log(cf_complex<T> z) {
    T ax = cf_fabs(z.re), ay = cf_fabs(z.im), rr;
    if (cf_isnan(ax) && cf_isfinite(ay)) return cf_complex<T>(ax, (T)CF_NAN);
    if (cf_isinf(ax) || cf_isinf(ay)) {
        rr = (T)CF_INF;
    } else if (ax > cf_fp<T>::max() / 4 || ay > cf_fp<T>::max() / 4) {
        rr = cf_log(cf_hypot(ax / 2, ay / 2)) + T(0.693147180559945309417);
    } else if (ax < cf_fp<T>::tiny() && ay < cf_fp<T>::tiny()) {
        if (ax > 0 || ay > 0) {
            rr = cf_log(cf_hypot(cf_ldexp(ax, (long long)cf_fp<T>::mant), cf_ldexp(ay, (long long)cf_fp<T>::mant))) -
                 T(cf_fp<T>::mant) * T(0.693147180559945309417);
        } else {
            rr = -(T)CF_INF;
        }
    } else {
        T h = cf_hypot(ax, ay);
        if (T(0.71) <= h && h <= T(1.73)) {
            T am = ax > ay ? ax : ay, an = ax > ay ? ay : ax;
            rr = cf_log1p((am - 1) * (am + 1) + an * an) / 2;
        } else {
            rr = cf_log(h);
        }
    }
    return cf_complex<T>(rr, cf_atan2(z.im, z.re));
}
template <typename T> CF_HD cf_complex<T> cf_log10(cf_complex<T> z) {
    cf_complex<T> l = cf_log(z);
    return cf_complex<T>(l.re / T(2.302585092994045684018), l.im / T(2.302585092994045684018));
}

/* sinh/cosh(x + iy) = (sinh x cos y, cosh x sin y) / (cosh x cos y, sinh x sin y) as CPython.
 * Where cosh x may overflow, sinh|x| = cosh x = h * (h / 2) with h = exp(|x| / 2), multiplied
 * into cos y / sin y one factor at a time so that finite results stay finite. y == 0 keeps the
 * imaginary zero (and its sign) for every x. */
template <typename T> CF_HD cf_complex<T> cf_sinhcosh(cf_complex<T> z, bool is_cosh) {
    T x = z.re, y = z.im;
    if (!cf_isfinite(x) || !cf_isfinite(y)) {
        /* C99 Annex G's special values as NumPy gives them (glibc's csinh/ccosh) */
        const T nan = (T)CF_NAN, inf = (T)CF_INF;
        if (cf_isnan(x)) return cf_complex<T>(nan, y == 0 ? y : nan);
        if (cf_isinf(x)) {
            if (y == 0) return cf_complex<T>(is_cosh ? inf : x, is_cosh ? y * cf_copysign(T(1), x) : y);
            if (!cf_isfinite(y)) return cf_complex<T>(inf, nan);
            return is_cosh ? cf_complex<T>(inf * cf_cos(y), x * cf_sin(y))
                           : cf_complex<T>(x * cf_cos(y), inf * cf_sin(y));
        }
        /* x finite, y infinite or NaN */
        if (x == 0) return is_cosh ? cf_complex<T>(nan, T(0)) : cf_complex<T>(x, nan);
        return cf_complex<T>(nan, nan);
    }
    if (y == 0) return is_cosh ? cf_complex<T>(cf_cosh(x), y * cf_copysign(T(1), x)) : cf_complex<T>(cf_sinh(x), y);
    T c = cf_cos(y), s = cf_sin(y);
    if (cf_fabs(x) > cf_fp<T>::log_max() - T(1)) {
        T h = cf_exp(cf_fabs(x) * T(0.5)), h2 = h * T(0.5), sg = cf_copysign(T(1), x);
        return is_cosh ? cf_complex<T>(c * h * h2, s * h * h2 * sg) : cf_complex<T>(c * h * h2 * sg, s * h * h2);
    }
    T sh = cf_sinh(x), ch = cf_cosh(x);
    return is_cosh ? cf_complex<T>(c * ch, s * sh) : cf_complex<T>(c * sh, s * ch);
}
template <typename T> CF_HD cf_complex<T> cf_sinh(cf_complex<T> z) { return cf_sinhcosh(z, false); }
template <typename T> CF_HD cf_complex<T> cf_cosh(cf_complex<T> z) { return cf_sinhcosh(z, true); }
/* tanh: CPython's formula (tx (1 + ty^2), ty sech^2 x) / (1 + tx^2 ty^2). */
template <typename T> CF_HD cf_complex<T> cf_tanh(cf_complex<T> z) {
    T x = z.re, y = z.im;
    if (!cf_isfinite(y) && !cf_isinf(x)) {
        /* Annex G: tanh(+-0 + i inf/nan) = +-0 + i nan; otherwise nan + i nan */
        const T nan = (T)CF_NAN;
        return cf_complex<T>(x == 0 ? x : nan, nan);
    }
    if (cf_isinf(x) && !cf_isfinite(y)) return cf_complex<T>(cf_copysign(T(1), x), cf_copysign(T(0), y));
    if (cf_isnan(x)) return cf_complex<T>(x, y == 0 ? y : (T)CF_NAN);
    if (cf_isinf(x) && cf_isfinite(y)) return cf_complex<T>(cf_copysign(T(1), x), cf_copysign(T(0), T(2) * cf_sin(y) * cf_cos(y)));
    if (cf_fabs(x) > cf_fp<T>::log_max() / 2) {
        return cf_complex<T>(cf_copysign(T(1), x), T(4) * cf_sin(y) * cf_cos(y) * cf_exp(T(-2) * cf_fabs(x)));
    }
    T tx = cf_tanh(x), ty = cf_tan(y), cx = T(1) / cf_cosh(x), txty = tx * ty, den = T(1) + txty * txty;
    return cf_complex<T>(tx * (T(1) + ty * ty) / den, ((ty / den) * cx) * cx);
}
/* f(z) = -i g(iz) for the circular functions; i z = (-y, x). */
template <typename T> CF_HD cf_complex<T> cf_mul_i(cf_complex<T> z) { return cf_complex<T>(-z.im, z.re); }
template <typename T> CF_HD cf_complex<T> cf_mul_negi(cf_complex<T> z) { return cf_complex<T>(z.im, -z.re); }
template <typename T> CF_HD cf_complex<T> cf_sin(cf_complex<T> z) {
    if (!cf_isfinite(z.re) && cf_isinf(z.im)) return cf_complex<T>((T)CF_NAN, (T)CF_INF);
    return cf_mul_negi(cf_sinh(cf_mul_i(z)));
}
template <typename T> CF_HD cf_complex<T> cf_cos(cf_complex<T> z) { return cf_cosh(cf_mul_i(z)); }
template <typename T> CF_HD cf_complex<T> cf_tan(cf_complex<T> z) { return cf_mul_negi(cf_tanh(cf_mul_i(z))); }

/* Inverse functions: CPython's cmath algorithms (Kahan's branch cuts). */
template <typename T> CF_HD bool cf_huge(cf_complex<T> z) {
    return cf_fabs(z.re) > cf_fp<T>::max() / 4 || cf_fabs(z.im) > cf_fp<T>::max() / 4;
}
/* Annex G's special values of asinh, acosh, acos (glibc's casinh, cacosh, cacos: NumPy's). */
template <typename T> CF_HD bool cf_asinh_special(cf_complex<T> z, cf_complex<T> &r) {
    T x = z.re, y = z.im;
    if (cf_isfinite(x) && cf_isfinite(y)) return false;
    const T nan = (T)CF_NAN, inf = (T)CF_INF, pi2 = T(1.57079632679489661923), pi4 = T(0.78539816339744830962);
    if (cf_isnan(x)) r = y == 0 ? cf_complex<T>(nan, y) : cf_isinf(y) ? cf_complex<T>(inf, nan) : cf_complex<T>(nan, nan);
    else if (cf_isnan(y)) r = cf_isinf(x) ? cf_complex<T>(x, nan) : cf_complex<T>(nan, nan);
    else if (cf_isinf(x)) r = cf_complex<T>(x, cf_isinf(y) ? cf_copysign(pi4, y) : cf_copysign(T(0), y));
    else r = cf_complex<T>(cf_copysign(inf, x), cf_copysign(pi2, y));
    return true;
}
template <typename T> CF_HD bool cf_acosh_special(cf_complex<T> z, cf_complex<T> &r) {
    T x = z.re, y = z.im;
    if (cf_isfinite(x) && cf_isfinite(y)) return false;
    const T nan = (T)CF_NAN, inf = (T)CF_INF, pi = T(3.14159265358979323846), pi2 = T(1.57079632679489661923),
            pi4 = T(0.78539816339744830962);
    if (cf_isnan(x)) r = cf_isinf(y) ? cf_complex<T>(inf, nan) : cf_complex<T>(nan, nan);
    else if (cf_isnan(y)) r = cf_isinf(x) ? cf_complex<T>(inf, nan) : x == 0 ? cf_complex<T>(nan, pi2) : cf_complex<T>(nan, nan);
    else if (cf_isinf(x)) r = cf_complex<T>(inf, cf_copysign(cf_isinf(y) ? (x > 0 ? pi4 : 3 * pi4) : (x > 0 ? T(0) : pi), y));
    else r = cf_complex<T>(inf, cf_copysign(pi2, y));
    return true;
}
template <typename T> CF_HD bool cf_acos_special(cf_complex<T> z, cf_complex<T> &r) {
    T x = z.re, y = z.im;
    if (cf_isfinite(x) && cf_isfinite(y)) return false;
    const T nan = (T)CF_NAN, inf = (T)CF_INF, pi = T(3.14159265358979323846), pi2 = T(1.57079632679489661923),
            pi4 = T(0.78539816339744830962);
    if (cf_isnan(x)) r = cf_isinf(y) ? cf_complex<T>(nan, -y) : cf_complex<T>(nan, nan);
    else if (cf_isnan(y)) r = cf_isinf(x) ? cf_complex<T>(nan, -inf) : x == 0 ? cf_complex<T>(pi2, nan) : cf_complex<T>(nan, nan);
    else if (cf_isinf(x)) r = cf_complex<T>(cf_isinf(y) ? (x > 0 ? pi4 : 3 * pi4) : (x > 0 ? T(0) : pi), -cf_copysign(inf, y));
    else r = cf_complex<T>(pi2, -y);
    return true;
}
template <typename T> CF_HD cf_complex<T> cf_asinh(cf_complex<T> z) {
    cf_complex<T> sv;
    if (cf_asinh_special(z, sv)) return sv;
    if (cf_huge(z)) {
        T l = cf_loghyp4(z.re, z.im);
        return cf_complex<T>(z.im >= 0 ? cf_copysign(l, z.re) : -cf_copysign(l, -z.re), cf_atan2(z.im, cf_fabs(z.re)));
    }
    cf_complex<T> s1 = cf_sqrt(cf_complex<T>(1 + z.im, -z.re)), s2 = cf_sqrt(cf_complex<T>(1 - z.im, z.re));
    return cf_complex<T>(cf_asinh(s1.re * s2.im - s2.re * s1.im), cf_atan2(z.im, s1.re * s2.re - s1.im * s2.im));
}
/* asin(+-inf + i nan) = nan + i inf and sin(x + i inf) = nan + i inf for x inf or NaN: the signs
 * glibc (NumPy) gives where Annex G leaves them unspecified and -i g(iz) would flip them */
template <typename T> CF_HD cf_complex<T> cf_asin(cf_complex<T> z) {
    if (cf_isinf(z.re) && cf_isnan(z.im)) return cf_complex<T>(z.im, (T)CF_INF);
    return cf_mul_negi(cf_asinh(cf_mul_i(z)));
}
template <typename T> CF_HD cf_complex<T> cf_acos(cf_complex<T> z) {
    cf_complex<T> sv;
    if (cf_acos_special(z, sv)) return sv;
    if (cf_huge(z)) {
        T l = cf_loghyp4(z.re, z.im);
        return cf_complex<T>(cf_atan2(cf_fabs(z.im), z.re), z.re < 0 ? -cf_copysign(l, z.im) : cf_copysign(l, -z.im));
    }
    cf_complex<T> s1 = cf_sqrt(cf_complex<T>(1 - z.re, -z.im)), s2 = cf_sqrt(cf_complex<T>(1 + z.re, z.im));
    return cf_complex<T>(2 * cf_atan2(s1.re, s2.re), cf_asinh(s2.re * s1.im - s2.im * s1.re));
}
template <typename T> CF_HD cf_complex<T> cf_acosh(cf_complex<T> z) {
    cf_complex<T> sv;
    if (cf_acosh_special(z, sv)) return sv;
    if (cf_huge(z)) return cf_complex<T>(cf_loghyp4(z.re, z.im), cf_atan2(z.im, z.re));
    cf_complex<T> s1 = cf_sqrt(cf_complex<T>(z.re - 1, z.im)), s2 = cf_sqrt(cf_complex<T>(z.re + 1, z.im));
    return cf_complex<T>(cf_asinh(s1.re * s2.re + s1.im * s2.im), 2 * cf_atan2(s1.im, s2.re));
}
template <typename T> CF_HD cf_complex<T> cf_atanh(cf_complex<T> z) {
    if (z.re < 0) return -cf_atanh(-z);
    T x = z.re, ay = cf_fabs(z.im), half_pi = T(1.57079632679489661923);
    if (cf_isnan(x) || cf_isnan(ay)) {
        if (cf_isinf(x) || cf_isinf(ay)) return cf_complex<T>(cf_copysign(T(0), x), cf_isnan(z.im) ? z.im : cf_copysign(half_pi, z.im));
        if (x == 0) return cf_complex<T>(x, (T)CF_NAN); /* Annex G: atanh(+-0 + i nan) = +-0 + i nan */
        return cf_complex<T>((T)CF_NAN, (T)CF_NAN);
    }
    if (x > cf_sqrt(cf_fp<T>::max() / 4) || ay > cf_sqrt(cf_fp<T>::max() / 4)) {
        T h = cf_hypot(x / 2, z.im / 2);
        T re = cf_isinf(h) ? T(0) : x / 4 / h / h;
        return cf_complex<T>(re, -cf_copysign(half_pi, -z.im));
    }
    if (x == 1 && ay < cf_sqrt(cf_fp<T>::tiny())) {
        if (ay == 0) return cf_complex<T>((T)CF_INF, z.im);
        return cf_complex<T>(-cf_log(cf_sqrt(ay) / cf_sqrt(cf_hypot(ay, T(2)))), cf_copysign(cf_atan2(T(2), -ay) / 2, z.im));
    }
    return cf_complex<T>(cf_log1p(4 * x / ((1 - x) * (1 - x) + ay * ay)) / 4, -cf_atan2(-2 * z.im, (1 - x) * (1 + x) - ay * ay) / 2);
}
template <typename T> CF_HD cf_complex<T> cf_atan(cf_complex<T> z) { return cf_mul_negi(cf_atanh(cf_mul_i(z))); }

/* C99 Annex G.5.1's multiplication (what C's `*` of complex values is, and so glibc's cpow's
 * b * clog(a)): a product that comes out NaN + i NaN from an infinite factor is recomputed with
 * the infinities boxed to +-1, so that it is infinite as the standard says. */
template <typename T> CF_HD cf_complex<T> cf_mul_c99(cf_complex<T> z, cf_complex<T> w) {
    T a = z.re, b = z.im, c = w.re, d = w.im;
    T ac = a * c, bd = b * d, ad = a * d, bc = b * c;
    T x = ac - bd, y = ad + bc;
    if (cf_isnan(x) && cf_isnan(y)) {
        bool again = false;
        if (cf_isinf(a) || cf_isinf(b)) {
            a = cf_copysign(cf_isinf(a) ? T(1) : T(0), a);
            b = cf_copysign(cf_isinf(b) ? T(1) : T(0), b);
            if (cf_isnan(c)) c = cf_copysign(T(0), c);
            if (cf_isnan(d)) d = cf_copysign(T(0), d);
            again = true;
        }
        if (cf_isinf(c) || cf_isinf(d)) {
            c = cf_copysign(cf_isinf(c) ? T(1) : T(0), c);
            d = cf_copysign(cf_isinf(d) ? T(1) : T(0), d);
            if (cf_isnan(a)) a = cf_copysign(T(0), a);
            if (cf_isnan(b)) b = cf_copysign(T(0), b);
            again = true;
        }
        if (!again && (cf_isinf(ac) || cf_isinf(bd) || cf_isinf(ad) || cf_isinf(bc))) {
            if (cf_isnan(a)) a = cf_copysign(T(0), a);
            if (cf_isnan(b)) b = cf_copysign(T(0), b);
            if (cf_isnan(c)) c = cf_copysign(T(0), c);
            if (cf_isnan(d)) d = cf_copysign(T(0), d);
            again = true;
        }
        if (again) {
            x = (T)CF_INF * (a * c - b * d);
            y = (T)CF_INF * (a * d + b * c);
        }
    }
    return cf_complex<T>(x, y);
}

/* npy_cpow: 1 for a zero exponent, 0 ** b, exact repeated multiplication for integral exponents
 * with |n| < 100, else exp(b log a) as glibc's cpow. */
template <typename T> CF_HD cf_complex<T> cf_pow(cf_complex<T> a, cf_complex<T> b) {
    if (b.re == 0 && b.im == 0) return cf_complex<T>(1, 0);
    if (a.re == 0 && a.im == 0) return b.re > 0 ? cf_complex<T>(0, 0) : cf_complex<T>((T)CF_NAN, (T)CF_NAN);
    if (b.im == 0 && b.re > -100 && b.re < 100 && (T)(long long)b.re == b.re) {
        long long n = (long long)b.re;
        if (n == 1) return a;
        if (n == 2) return a * a;
        if (n == 3) return a * (a * a);
        if (n < 0) n = -n;
        cf_complex<T> acc(1, 0), p = a;
        for (long long mask = 1;; mask <<= 1) {
            if (n & mask) acc = acc * p;
            if (n < (mask << 1)) break;
            p = p * p;
        }
        return b.re < 0 ? cf_complex<T>(1, 0) / acc : acc;
    }
    return cf_exp(cf_mul_c99(b, cf_log(a)));
}

#endif /* CUFUNC_RUNTIME_CUH */
