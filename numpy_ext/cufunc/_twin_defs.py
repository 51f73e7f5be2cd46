"""The bodies of cufunc's GPU twins of NumPy's ufuncs (see _twins.py), in cufunc's kernel
language. Generated once by hand from the translator's table of NumPy functions, then kept as a
real module so that each body's source can be found (no lambdas, no exec). A body either calls
the NumPy function itself (the language gives it NumPy's meaning) or spells NumPy's meaning out
with the language's operators where the language has no call for it."""
import numpy as np


def sqrt(x):
    return np.sqrt(x)


def exp(x):
    return np.exp(x)


def exp2(x):
    return np.exp2(x)


def expm1(x):
    return np.expm1(x)


def log(x):
    return np.log(x)


def log2(x):
    return np.log2(x)


def log10(x):
    return np.log10(x)


def log1p(x):
    return np.log1p(x)


def sin(x):
    return np.sin(x)


def cos(x):
    return np.cos(x)


def tan(x):
    return np.tan(x)


def arcsin(x):
    return np.arcsin(x)


def arccos(x):
    return np.arccos(x)


def arctan(x):
    return np.arctan(x)


def sinh(x):
    return np.sinh(x)


def cosh(x):
    return np.cosh(x)


def tanh(x):
    return np.tanh(x)


def arcsinh(x):
    return np.arcsinh(x)


def arccosh(x):
    return np.arccosh(x)


def arctanh(x):
    return np.arctanh(x)


def floor(x):
    return np.floor(x)


def ceil(x):
    return np.ceil(x)


def trunc(x):
    return np.trunc(x)


def rint(x):
    return np.rint(x)


def fabs(x):
    return np.fabs(x)


def degrees(x):
    return np.degrees(x)


def radians(x):
    return np.radians(x)


def rad2deg(x):
    return np.rad2deg(x)


def deg2rad(x):
    return np.deg2rad(x)


def absolute(x):
    return np.absolute(x)


def isnan(x):
    return np.isnan(x)


def isinf(x):
    return np.isinf(x)


def isfinite(x):
    return np.isfinite(x)


def conjugate(x):
    return np.conjugate(x)


def square(x):
    return np.square(x)


def negative(x):
    return np.negative(x)


def positive(x):
    return np.positive(x)


def arctan2(x, y):
    return np.arctan2(x, y)


def hypot(x, y):
    return np.hypot(x, y)


def copysign(x, y):
    return np.copysign(x, y)


def fmod(x, y):
    return np.fmod(x, y)


def remainder(x, y):
    return np.remainder(x, y)


def power(x, y):
    return np.power(x, y)


def floor_divide(x, y):
    return np.floor_divide(x, y)


def divide(x, y):
    return np.true_divide(x, y)


def add(x, y):
    return np.add(x, y)


def subtract(x, y):
    return np.subtract(x, y)


def multiply(x, y):
    return np.multiply(x, y)


def ldexp(x, y):
    return np.ldexp(x, y)


def left_shift(x, y):
    return np.left_shift(x, y)


def right_shift(x, y):
    return np.right_shift(x, y)


def bitwise_and(x, y):
    return np.bitwise_and(x, y)


def bitwise_or(x, y):
    return np.bitwise_or(x, y)


def bitwise_xor(x, y):
    return np.bitwise_xor(x, y)

# ---- spelled out with the language's operators -------------------------------------------------

def less(x, y):
    return x < y


def less_equal(x, y):
    return x <= y


def greater(x, y):
    return x > y


def greater_equal(x, y):
    return x >= y


def equal(x, y):
    return x == y


def not_equal(x, y):
    return x != y


def logical_and(x, y):
    return bool(x) and bool(y)


def logical_or(x, y):
    return bool(x) or bool(y)


def logical_xor(x, y):
    return bool(x) != bool(y)


def logical_not(x):
    return not x


def invert(x):
    return ~x


def invert__bool(x):
    # NumPy's invert of a bool is logical not (~True is False, not -2)
    return not x


def maximum(x, y):
    # NaN propagates from either side, as NumPy's maximum; of two equal values (0.0 and -0.0)
    # the second, as NumPy's array loops give
    return x if (x > y or x != x) else y


def minimum(x, y):
    return x if (x < y or x != x) else y


def fmax(x, y):
    # NaN is ignored unless both are NaN, as NumPy's fmax
    return x if (x > y or y != y) else y


def fmin(x, y):
    return x if (x < y or y != y) else y


def sign(x):
    return 1 if x > 0 else (-1 if x < 0 else (0 if x == 0 else x))


def sign__unsigned(x):
    return 1 if x > 0 else 0


def reciprocal(x):
    return 1 / x


def signbit(x):
    return np.copysign(1.0, x) < 0


def logaddexp(x, y):
    if x == y:
        return x + 0.6931471805599453
    d = x - y
    if d > 0:
        return x + np.log1p(np.exp(-d))
    if d <= 0:
        return y + np.log1p(np.exp(d))
    return d


def logaddexp2(x, y):
    if x == y:
        return x + 1
    d = x - y
    if d > 0:
        return x + np.log1p(np.exp2(-d)) * 1.4426950408889634
    if d <= 0:
        return y + np.log1p(np.exp2(d)) * 1.4426950408889634
    return d


# ---- loops NumPy spells out for one kind of type (_twins._body picks name__<dtype>, then
# name__complex / name__int / name__unsigned / name__bool by the inputs' kind) -------------------

# complex order: NumPy's lexicographic CLT/CLE/CGT/CGE (loops.c.src), NaN parts never ordered

def less__complex(x, y):
    return (x.real < y.real and x.imag == x.imag and y.imag == y.imag) or \
        (x.real == y.real and x.imag < y.imag)


def less_equal__complex(x, y):
    return (x.real < y.real and x.imag == x.imag and y.imag == y.imag) or \
        (x.real == y.real and x.imag <= y.imag)


def greater__complex(x, y):
    return (x.real > y.real and x.imag == x.imag and y.imag == y.imag) or \
        (x.real == y.real and x.imag > y.imag)


def greater_equal__complex(x, y):
    return (x.real > y.real and x.imag == x.imag and y.imag == y.imag) or \
        (x.real == y.real and x.imag >= y.imag)


def maximum__complex(x, y):
    # NumPy: x when a part of x is NaN or x >= y (CGE), else y
    if x.real != x.real or x.imag != x.imag:
        return x
    if (x.real > y.real and x.imag == x.imag and y.imag == y.imag) or \
            (x.real == y.real and x.imag >= y.imag):
        return x
    return y


def minimum__complex(x, y):
    if x.real != x.real or x.imag != x.imag:
        return x
    if (x.real < y.real and x.imag == x.imag and y.imag == y.imag) or \
            (x.real == y.real and x.imag <= y.imag):
        return x
    return y


def fmax__complex(x, y):
    # NumPy: x when a part of y is NaN or x >= y (CGE), else y
    if y.real != y.real or y.imag != y.imag:
        return x
    if (x.real > y.real and x.imag == x.imag and y.imag == y.imag) or \
            (x.real == y.real and x.imag >= y.imag):
        return x
    return y


def fmin__complex(x, y):
    if y.real != y.real or y.imag != y.imag:
        return x
    if (x.real < y.real and x.imag == x.imag and y.imag == y.imag) or \
            (x.real == y.real and x.imag <= y.imag):
        return x
    return y


# NumPy's sign of a complex number: z / |z| with its own special cases (loops.c.src)

def sign__complex64(x):
    r = x.real
    i = x.imag
    a = np.hypot(r, i)
    if a != a:
        return np.complex64(complex(np.nan, np.nan))
    if np.isinf(a):
        if np.isinf(r):
            if np.isinf(i):
                return np.complex64(complex(np.nan, np.nan))
            return np.complex64(1.0 if r > 0 else -1.0)
        return np.complex64(complex(0.0, 1.0 if i > 0 else -1.0))
    if a == 0:
        return np.complex64(0.0)
    return np.complex64(complex(r / a, i / a))


def sign__complex128(x):
    r = x.real
    i = x.imag
    a = np.hypot(r, i)
    if a != a:
        return complex(np.nan, np.nan)
    if np.isinf(a):
        if np.isinf(r):
            if np.isinf(i):
                return complex(np.nan, np.nan)
            return complex(1.0 if r > 0 else -1.0, 0.0)
        return complex(0.0, 1.0 if i > 0 else -1.0)
    if a == 0:
        return complex(0.0, 0.0)
    return complex(r / a, i / a)


# NumPy's reciprocal of a complex number (Smith's division of 1 by z, loops.c.src)

def reciprocal__complex64(x):
    r = x.real
    i = x.imag
    if abs(i) <= abs(r):
        q = i / r
        d = r + i * q
        return np.complex64(complex(np.float32(1) / d, -q / d))
    q = r / i
    d = r * q + i
    return np.complex64(complex(q / d, np.float32(-1) / d))


def reciprocal__complex128(x):
    r = x.real
    i = x.imag
    if abs(i) <= abs(r):
        q = i / r
        d = r + i * q
        return complex(1.0 / d, -q / d)
    q = r / i
    d = r * q + i
    return complex(q / d, -1.0 / d)


# reciprocal of integers: NumPy converts 1.0 / x to the integer type; 1.0 / 0 is inf, which
# x86-64 converts to the smallest int32 / int64 (0 once narrowed to 8 or 16 bits)

def reciprocal__int(x):
    return 1 if x == 1 else (-1 if x == -1 else 0)


def reciprocal__int32(x):
    if x == 0:
        return np.int32(-2147483648)
    return 1 if x == 1 else (-1 if x == -1 else 0)


def reciprocal__int64(x):
    if x == 0:
        return np.int64(-9223372036854775807 - 1)
    return 1 if x == 1 else (-1 if x == -1 else 0)


def reciprocal__unsigned(x):
    return 1 if x == 1 else 0


# fmod of integers: C's %, the sign of the dividend; NumPy gives 0 for a zero divisor

def fmod__int(x, y):
    r = x % y
    if r != 0 and (r < 0) != (x < 0):
        r = r - y
    return r


def fmod__unsigned(x, y):
    return x % y


# complex loops NumPy computes from real functions (funcs.inc.src)

def rint__complex(x):
    return complex(np.rint(x.real), np.rint(x.imag))


def rint__complex64(x):
    return np.complex64(complex(np.rint(x.real), np.rint(x.imag)))


def exp2__complex64(x):
    return np.exp(np.complex64(complex(x.real * np.float32(0.6931471805599453),
                                       x.imag * np.float32(0.6931471805599453))))


def exp2__complex128(x):
    return np.exp(complex(x.real * 0.6931471805599453, x.imag * 0.6931471805599453))


def expm1__complex64(x):
    a = np.sin(x.imag / np.float32(2))
    return np.complex64(complex(np.expm1(x.real) * np.cos(x.imag) - np.float32(2) * a * a,
                                np.exp(x.real) * np.sin(x.imag)))


def expm1__complex128(x):
    a = np.sin(x.imag / 2.0)
    return complex(np.expm1(x.real) * np.cos(x.imag) - 2.0 * a * a,
                   np.exp(x.real) * np.sin(x.imag))


def log1p__complex64(x):
    r1 = x.real + np.float32(1)
    return np.complex64(complex(np.log(np.hypot(r1, x.imag)), np.arctan2(x.imag, r1)))


def log1p__complex128(x):
    r1 = x.real + 1.0
    return complex(np.log(np.hypot(r1, x.imag)), np.arctan2(x.imag, r1))


def log2__complex64(x):
    z = np.log(x)
    return np.complex64(complex(z.real * np.float32(1.4426950408889634),
                                z.imag * np.float32(1.4426950408889634)))


def log2__complex128(x):
    z = np.log(x)
    return complex(z.real * 1.4426950408889634, z.imag * 1.4426950408889634)


# float16 logaddexp: NumPy computes in float32 and rounds once

def logaddexp__float16(x, y):
    a = np.float32(x)
    b = np.float32(y)
    if a == b:
        return np.float16(a + np.float32(0.6931471805599453))
    d = a - b
    if d > 0:
        return np.float16(a + np.log1p(np.exp(-d)))
    if d <= 0:
        return np.float16(b + np.log1p(np.exp(d)))
    return np.float16(d)


def logaddexp2__float16(x, y):
    a = np.float32(x)
    b = np.float32(y)
    if a == b:
        return np.float16(a + np.float32(1))
    d = a - b
    if d > 0:
        return np.float16(a + np.log1p(np.exp2(-d)) * np.float32(1.4426950408889634))
    if d <= 0:
        return np.float16(b + np.log1p(np.exp2(d)) * np.float32(1.4426950408889634))
    return np.float16(d)


# float16 maximum/minimum/fmax/fmin: NumPy's float16 loops give the first of two equal values
# (0.0, -0.0), its float32/float64 array loops the second

def maximum__float16(x, y):
    return x if (x >= y or x != x) else y


def minimum__float16(x, y):
    return x if (x <= y or x != x) else y


def fmax__float16(x, y):
    return x if (x >= y or y != y) else y


def fmin__float16(x, y):
    return x if (x <= y or y != y) else y
