"""Typing rules: NumPy 2 promotion with NEP 50 weak Python scalars.

A *weak* type is the type of a Python bool, int, float or complex value (a literal, a Python
builtin's result, a range() counter, a Python-number global). It is represented in C by bool,
int64, float64 or complex128, but in mixed operations it takes the type of the other operand as
NEP 50 says. Operation result types come from NumPy itself: the operation is run once on sample
values of the operand types (``np.float32(1) + 1``) and the type of the result is read; this makes
the typing follow the installed NumPy 2.x exactly, including its quirks (bool arithmetic, int8
true division, shifts of bools)."""

import functools
import warnings

import numpy as np

from .. import types as T

__all__ = ["Weak", "WEAK_BOOL", "WEAK_INT", "WEAK_FLOAT", "WEAK_COMPLEX", "weak_of", "join",
           "oracle", "type_of_value", "compare_type", "concrete", "OracleError"]


class Weak(T.Scalar):
    """The type of a Python bool/int/float/complex value."""

    __slots__ = ("concrete",)

    def __init__(self, name, strong):
        super().__init__(name, strong.dtype, strong.cname)
        self.concrete = strong

    weak = True


T.Scalar.weak = False

WEAK_BOOL = Weak("bool (Python)", T.bool_)
WEAK_INT = Weak("int (Python)", T.int64)
WEAK_FLOAT = Weak("float (Python)", T.float64)
WEAK_COMPLEX = Weak("complex (Python)", T.complex128)
_WEAK_BY_KIND = {"b": WEAK_BOOL, "i": WEAK_INT, "u": WEAK_INT, "f": WEAK_FLOAT,
                 "c": WEAK_COMPLEX}
_WEAK_SAMPLE = {"b": True, "i": 1, "f": 1.0, "c": 1 + 0j}


def weak_of(kind):
    return _WEAK_BY_KIND[kind]


def concrete(t):
    """The strong type a value of type t has once stored (weak -> its default type)."""
    if isinstance(t, Weak):
        return t.concrete
    if isinstance(t, T.Tuple):
        return T.Tuple(concrete(x) for x in t.types)
    return t


class OracleError(TypeError):
    """NumPy/CPython rejects the operation on these types."""


def sample(t):
    if isinstance(t, Weak):
        return _WEAK_SAMPLE[t.kind]
    return t.dtype.type(1)


def type_of_value(v):
    """The cufunc type of a Python or NumPy scalar value."""
    if isinstance(v, np.generic):   # first: np.float64 is a subclass of Python's float
        return T.from_dtype(v.dtype)
    if isinstance(v, bool):
        return WEAK_BOOL
    if isinstance(v, int):
        return WEAK_INT
    if isinstance(v, float):
        return WEAK_FLOAT
    if isinstance(v, complex):
        return WEAK_COMPLEX
    if isinstance(v, np.generic):
        return T.from_dtype(v.dtype)
    if isinstance(v, tuple):
        return T.Tuple(type_of_value(x) for x in v)
    raise OracleError("result of type %s" % type(v).__name__)


@functools.lru_cache(maxsize=None)
def oracle(fn, *types):
    """The type of fn(sample(t1), sample(t2), ...), or OracleError with CPython's message."""
    args = [sample(t) for t in types]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            try:
                v = fn(*args)
            except (TypeError, ValueError, OverflowError, ZeroDivisionError) as e:
                raise OracleError(str(e)) from None
    return type_of_value(v)


def join(a, b):
    """The type of a variable (or conditional value) assigned values of types a and b: NumPy
    promotion, where a weak type contributes only its kind (NEP 50)."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    aw, bw = isinstance(a, Weak), isinstance(b, Weak)
    if aw and bw:
        # the higher kind, as NumPy promotes two Python scalars (bool < int < float < complex;
        # the kind order itself is defined once, by NumPy here and cf_dtype_kind_order in C)
        return weak_of(np.result_type(_WEAK_SAMPLE[a.kind], _WEAK_SAMPLE[b.kind]).kind)
    if aw or bw:
        w, s = (a, b) if aw else (b, a)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return T.from_dtype(np.result_type(s.dtype, _WEAK_SAMPLE[w.kind]))
    return T.from_dtype(np.result_type(a.dtype, b.dtype))


MIXED_INT = "mixed"   # compare an int64 value with a uint64 value exactly


def compare_type(a, b):
    """The type both operands of a comparison are converted to, or MIXED_INT when one side is a
    Python int and the other uint64 (NumPy 2 compares those exactly)."""
    aw, bw = isinstance(a, Weak), isinstance(b, Weak)
    if aw and bw:
        return join(a, b).concrete if join(a, b).kind != "b" else T.bool_
    if aw or bw:
        w, s = (a, b) if aw else (b, a)
        if w.kind in "bi" and s.kind in "iu":
            # NumPy 2 compares Python ints with fixed-width ints exactly.
            return MIXED_INT if s == T.uint64 else T.int64
        return join(a, b)
    if {a.kind, b.kind} == {"i", "u"} and T.uint64 in (a, b):
        # NumPy 2 compares a signed integer with a uint64 exactly (not through float64, their
        # promoted type for arithmetic)
        return MIXED_INT
    return join(a, b)
