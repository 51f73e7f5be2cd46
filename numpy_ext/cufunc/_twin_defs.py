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
    # NaN propagates from either side, as NumPy's maximum
    return x if (x >= y or x != x) else y


def minimum(x, y):
    return x if (x <= y or x != x) else y


def fmax(x, y):
    # NaN is ignored unless both are NaN, as NumPy's fmax
    return x if (x >= y or y != y) else y


def fmin(x, y):
    return x if (x <= y or y != y) else y


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
