"""Typing policies of the translator: NumPy 2 / NEP 50 (``typing="numpy"``, docs/language.md) and
Numba's rules (``typing="numba"``, numba_typing.py).

The translator asks its policy (``Unit.policy``) for the types of literals, operators,
comparisons and joins; everything else (casts, folding, emission) is shared. A device function
is translated with the policy of the unit that calls it.
"""

from .. import types as T
from . import numba_typing as NT
from . import typesys as TS

# the operator names of exprs._BINOPS -> the Numba typing template they use
_NUMBA_CMP = {"<": "ordered", "<=": "ordered", ">": "ordered", ">=": "ordered",
              "==": "unordered", "!=": "unordered"}


class NumpyPolicy:
    """NumPy 2 promotion, NEP 50 weak Python scalars (typesys.py)."""

    name = "numpy"
    numba = False

    def literal(self, t, value):
        return t

    def binop(self, fn, name, a, b):
        """(result type, left operand type, right operand type); OracleError when refused."""
        R = TS.oracle(fn, a, b)
        return R, R, R

    def unop(self, fn, name, a):
        R = TS.oracle(fn, a)
        return R, R

    def compare(self, fn, sym, a, b):
        """(result type, the type both operands are compared in)."""
        return TS.oracle(fn, a, b), TS.compare_type(a, b)

    def join(self, a, b):
        return TS.join(a, b)


class NumbaPolicy:
    """Numba's typing: Python literals are int64/float64/complex128/bool, integer operations
    widen to 64 bits, operand types follow the signature Numba's templates choose."""

    name = "numba"
    numba = True

    def literal(self, t, value):
        if isinstance(t, TS.Weak):
            try:
                return NT.literal_type(value)
            except TypeError:
                return t.concrete
        return t

    @staticmethod
    def _strong(t):
        return TS.concrete(t)

    def _op(self, name, *types):
        sig = NT.op(name, *[self._strong(t) for t in types])
        if sig is None:
            raise TS.OracleError("Numba has no %s for (%s)"
                                 % (name, ", ".join(str(self._strong(t)) for t in types)))
        return sig

    def binop(self, fn, name, a, b):
        sig = self._op(name, a, b)
        return sig[0], sig[1], sig[2]

    def unop(self, fn, name, a):
        sig = self._op(name, a)
        return sig[0], sig[1]

    def compare(self, fn, sym, a, b):
        sig = self._op(_NUMBA_CMP[sym], a, b)
        return T.bool_, sig[1]

    def join(self, a, b):
        r = NT.unify(self._strong(a), self._strong(b))
        if r is None:
            raise TS.OracleError("cannot unify %s and %s" % (a, b))
        return r


POLICIES = {"numpy": NumpyPolicy(), "numba": NumbaPolicy()}


def get(name):
    """The policy object for typing=name ("numpy" or "numba")."""
    try:
        return POLICIES[name]
    except (KeyError, TypeError):
        raise ValueError("typing must be 'numpy' or 'numba', not %r" % (name,)) from None
