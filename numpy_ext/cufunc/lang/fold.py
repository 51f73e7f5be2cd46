"""Constant folding: NumPy's own result for operations on constants, and the range rules of
integer constants (docs/language.md: integers of at most 64 bits). Pure functions of Python and NumPy
values: the translator decides when to fold and turns the results into constant values."""

import math
import warnings

import numpy as np

from .. import types as T
from . import typesys as TS

_PY_OF_KIND = {"b": bool, "i": int, "f": float, "c": complex}


class ConstError(Exception):
    """A constant conversion NumPy refuses (OverflowError); the message is the error's."""


def convert(value, src, dst, explicit):
    """NumPy's conversion of the constant value of type src to type dst (astype meaning when
    explicit, else NEP 50's for weak Python scalars); None when it is left to the run-time cast
    (a float out of an integer's range, a Python int outside 64 bits). ConstError where NumPy
    raises OverflowError."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if dst.kind == "b":
                return bool(value)
            if isinstance(src, TS.Weak) and not explicit:
                if src.kind in "bi" and dst.kind in "iu":
                    v = int(value)
                    info = np.iinfo(dst.dtype)
                    if not info.min <= v <= info.max:
                        raise ConstError("Python integer %d out of bounds for %s "
                                         "(NumPy raises OverflowError here)" % (v, dst.name))
                out = np.array(value, dtype=dst.dtype)[()]
            else:
                if src.kind == "c" and dst.kind != "c":
                    value = complex(value).real
                    src = T.float64
                if src.kind == "f" and dst.kind in "iu":
                    f = float(value)
                    info = np.iinfo(dst.dtype)
                    if not math.isfinite(f) or not info.min <= math.trunc(f) <= info.max:
                        return None
                if isinstance(src, TS.Weak) and src.kind == "i":
                    if not -2 ** 63 <= int(value) < 2 ** 64:
                        return None
                    value = int(value) % 2 ** 64
                    if value >= 2 ** 63:
                        value -= 2 ** 64
                    src = T.int64
                out = np.array(value, dtype=TS.concrete(src).dtype).astype(dst.dtype)[()]
        except OverflowError as e:
            raise ConstError(str(e))
    if isinstance(dst, TS.Weak):
        return _PY_OF_KIND[dst.kind](out)
    return out


def apply(fn, args, R):
    """fn applied to constants [(value, type)]: the result when its type (NumPy's, NEP 50 for
    Python numbers) is exactly R, else None (an exception, a different type: left to run time)."""
    vals = []
    for v, t in args:
        if isinstance(t, TS.Weak):
            v = _PY_OF_KIND[t.kind](v)
        vals.append(v)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            try:
                r = fn(*vals)
            except Exception:
                return None
    try:
        rt = TS.type_of_value(r)
    except TS.OracleError:
        return None
    if rt != R:
        return None
    return r


def fits(value):
    """What an int64 value out of range does not fit in: 64 bits at all, or just int64."""
    return "int64" if -2 ** 63 <= int(value) < 2 ** 64 else "64 bits"


def int_range_message(value, fits="64 bits", role=None, name=None):
    """The one message for an integer constant (literal, global, folded result, index) that does
    not fit where it is used: docs/language.md allows integers of at most 64 bits."""
    text = "the integer %d does not fit in %s" % (value, fits)
    if name is not None:
        text = "the global '%s' = %d does not fit in %s" % (name, value, fits)
    if role is not None:
        text += " (%s is an int64)" % role
    return text
