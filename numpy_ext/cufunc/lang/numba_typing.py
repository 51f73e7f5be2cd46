"""Numba's typing rules, for the ``typing="numba"`` policy of the translator.

Numba types an operation by choosing, among the signatures its typing templates list for the
operator (numba/core/typing/builtins.py, mathdecl.py), the one its arguments convert to most
cheaply: each argument's conversion is exact, promote, safe or unsafe (the casting graph of
numba/core/typeconv/rules.py), a candidate is rated by its count of (unsafe, safe, promote)
conversions, and the lowest rating wins, the first listed on a tie
(numba/core/typing/context.py, resolve_overload). The arguments are then converted to the
chosen signature's argument types and the operation computed there. Integer operations are
listed only for the 64-bit machine integers, so ``int8 + int8`` is int64; Python literals are
int64, float64, complex128 and bool (not NEP 50's weak scalars). A variable, a conditional value
and the return type take the unification of their types (``unify``: NumPy's promote_types for
two numbers, a bool joins the number it converts to safely).

This module knows only cufunc types; it does not import Numba.
"""

import functools
import itertools

import numpy as np

from .. import types as T

EXACT, PROMOTE, SAFE, UNSAFE = 1, 2, 3, 4

_B, _I8, _I16, _I32, _I64 = T.bool_, T.int8, T.int16, T.int32, T.int64
_U8, _U16, _U32, _U64 = T.uint8, T.uint16, T.uint32, T.uint64
_F16, _F32, _F64 = T.float16, T.float32, T.float64
_C64, _C128 = T.complex64, T.complex128

SIGNED = [_I8, _I16, _I32, _I64]
UNSIGNED = [_U8, _U16, _U32, _U64]
REAL = [_F32, _F64]
COMPLEX = [_C64, _C128]
NUMBERS = [_B] + SIGNED + UNSIGNED + [_F16] + REAL + COMPLEX


def _rules():
    """The direct conversions of numba/core/typeconv/rules.py: (from, to, kind)."""
    out = []

    def two(a, b, fwd, back):
        out.append((a, b, fwd))
        if back:
            out.append((b, a, back))

    two(_B, _I8, SAFE, UNSAFE)
    two(_B, _U8, SAFE, UNSAFE)
    for a, b in ((_I8, _I16), (_U8, _U16), (_I16, _I32), (_U16, _U32), (_I32, _I64),
                 (_U32, _U64)):
        two(a, b, PROMOTE, UNSAFE)
    for a, b in ((_U8, _I16), (_U16, _I32), (_U32, _I64), (_I8, _F16), (_I16, _F32),
                 (_I32, _F64), (_I64, _F64), (_U64, _F64)):
        two(a, b, SAFE, UNSAFE)
    two(_I16, _F16, UNSAFE, UNSAFE)
    two(_I32, _F32, UNSAFE, UNSAFE)
    two(_F16, _F32, PROMOTE, UNSAFE)
    two(_F32, _F64, PROMOTE, UNSAFE)
    two(_F32, _C64, SAFE, None)
    two(_F64, _C128, SAFE, None)
    two(_C64, _C128, PROMOTE, UNSAFE)
    return out


def _closure():
    """The conversion kind between every two numbers: over all chains of direct conversions,
    the best of (the worst step of the chain)."""
    idx = {t: i for i, t in enumerate(NUMBERS)}
    n = len(NUMBERS)
    INF = 99
    d = [[INF] * n for _ in range(n)]
    for i in range(n):
        d[i][i] = EXACT
    for a, b, k in _rules():
        d[idx[a]][idx[b]] = min(d[idx[a]][idx[b]], k)
    for k in range(n):
        for i in range(n):
            for j in range(n):
                via = max(d[i][k], d[k][j])
                if via < d[i][j]:
                    d[i][j] = via
    return {(NUMBERS[i], NUMBERS[j]): d[i][j] for i in range(n) for j in range(n)
            if d[i][j] != INF}


_CONV = _closure()


def can_convert(src, dst):
    """Numba's conversion kind from src to dst (EXACT .. UNSAFE), or None."""
    return _CONV.get((src, dst))


def resolve(cases, args, unsafe=True):
    """The case (result, arg types...) Numba's resolve_overload picks for args, or None;
    unsafe=False refuses candidates that need an unsafe conversion (the template's
    ``unsafe_casting = False``)."""
    best, best_rate = None, None
    for case in cases:
        formal = case[1:]
        if len(formal) != len(args):
            continue
        rate = [0, 0, 0]   # unsafe, safe, promote
        for a, f in zip(args, formal):
            c = can_convert(a, f)
            if c is None or (c == UNSAFE and not unsafe):
                break
            if c == UNSAFE:
                rate[0] += 1
            elif c == SAFE:
                rate[1] += 1
            elif c == PROMOTE:
                rate[2] += 1
        else:
            if best_rate is None or rate < best_rate:
                best, best_rate = case, rate
    return best


def _int_result(*ts):
    """choose_result_int: 64 bits (the machine width) or wider, signed if any input is."""
    signed = any(t.kind == "i" for t in ts)
    return _I64 if signed else _U64


_MACHINE = [_I64, _U64]
_INT_BINOP = [(_int_result(a, b), a, b) for a, b in itertools.product(_MACHINE, _MACHINE)]
_REAL_SAME = [(t, t, t) for t in REAL]
_CPLX_SAME = [(t, t, t) for t in COMPLEX]

CASES = {
    "add": _INT_BINOP + _REAL_SAME + _CPLX_SAME,
    "sub": _INT_BINOP + _REAL_SAME + _CPLX_SAME,
    "mul": _INT_BINOP + _REAL_SAME + _CPLX_SAME,
    "mod": _INT_BINOP + _REAL_SAME,
    "floordiv": _INT_BINOP + _REAL_SAME,
    "truediv": [(_F64, a, b) for a, b in itertools.product(_MACHINE, _MACHINE)]
    + _REAL_SAME + _CPLX_SAME,
    "pow": _INT_BINOP + [(_F32, _F32, t) for t in (_I32, _I64, _U64)]
    + [(_F64, _F64, t) for t in (_I32, _I64, _U64)] + _REAL_SAME + _CPLX_SAME,
    # shifts: only the left operand's signedness matters; the right is a 64-bit integer
    "lshift": [(_I64, t, r) for t in SIGNED for r in (_U64, _I64)]
    + [(_U64, t, r) for t in UNSIGNED for r in (_U64, _I64)],
    "and": [(_B, _B, _B)] + _INT_BINOP,
    "neg": [(_int_result(t), t) for t in UNSIGNED] + [(_int_result(t), t) for t in SIGNED]
    + [(t, t) for t in REAL] + [(t, t) for t in COMPLEX] + [(_I64, _B)],
    "invert": [(_B, _B)] + [(_int_result(t), t) for t in UNSIGNED]
    + [(_int_result(t), t) for t in SIGNED],
    "ordered": [(_B, _B, _B)] + [(_B, t, t) for t in SIGNED + UNSIGNED + REAL],
    "abs": [(t, t) for t in SIGNED + UNSIGNED + REAL] + [(_F32, _C64), (_F64, _C128)],
    "round": [(_I64, _F32), (_I64, _F64)],
    "divmod": [(t, t, t) for t in _MACHINE + REAL],
    # mathdecl.py
    "math1": [(_F64, _I64), (_F64, _U64), (_F32, _F32), (_F64, _F64)],
    "math2": [(_F64, _I64, _I64), (_F64, _U64, _U64), (_F32, _F32, _F32), (_F64, _F64, _F64)],
    "mathpow": [(_F64, _F64, _I64), (_F64, _F64, _U64), (_F32, _F32, _F32),
                (_F64, _F64, _F64)],
    "copysign": [(_F32, _F32, _F32), (_F64, _F64, _F64)],
    "mathint": [(_I64, _I64), (_I64, _I64), (_U64, _U64), (_I64, _F32), (_I64, _F64)],
    "mathpred": [(_B, _I64), (_B, _U64), (_B, _F32), (_B, _F64)],
}
CASES["rshift"] = CASES["lshift"]
CASES["or"] = CASES["xor"] = CASES["and"]
CASES["pos"] = CASES["neg"]
CASES["unordered"] = CASES["ordered"] + [(_B, t, t) for t in COMPLEX]
# the one-argument math functions of mathdecl.py (Math_unary, Math_converter)
MATH1 = {"exp", "expm1", "fabs", "sqrt", "log", "log1p", "log10", "log2", "sin", "cos", "tan",
         "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "degrees",
         "radians", "erf", "erfc", "gamma", "lgamma", "exp2", "floor", "ceil", "trunc"}


# templates declaring unsafe_casting = False (bitwise operators: no float operands)
SAFE_ONLY = {"lshift", "rshift", "and", "or", "xor", "invert"}


@functools.lru_cache(maxsize=None)
def op(name, *args):
    """(result, arg types...) of Numba's operator `name` on args, or None (a typing error)."""
    return resolve(CASES[name], tuple(args), unsafe=name not in SAFE_ONLY)


def unify(a, b):
    """Numba's unification of two scalar types (unify_pairs), or None."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    if a.kind != "b" and b.kind != "b":
        # Number.unify: NumPy's promote_types (int64 with uint64 is float64)
        return T.from_dtype(np.promote_types(a.dtype, b.dtype))
    ab, ba = can_convert(a, b), can_convert(b, a)
    if ab is not None and ab <= SAFE:
        return b
    if ba is not None and ba <= SAFE:
        return a
    return None


def unify_all(types):
    """unify_types: sorted by bit width, then pairwise."""
    ts = sorted(types, key=lambda t: t.bits if t.kind != "b" else 0)
    r = ts[0]
    for t in ts[1:]:
        r = unify(r, t)
        if r is None:
            return None
    return r


def literal_type(value):
    """The type Numba gives a Python literal (its Literal type's non-literal form)."""
    if isinstance(value, bool):
        return _B
    if isinstance(value, int):
        return _I64 if value < 2 ** 63 else _U64
    if isinstance(value, float):
        return _F64
    if isinstance(value, complex):
        return _C128
    raise TypeError(value)
