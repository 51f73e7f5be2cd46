"""Loop selection of cufunc's ufuncs and gufuncs, in Python.

The C rule decides every call (src/loopfn.c: ``cf_loops_find``, ``cf_loops_no_match``; which
Python scalars stay weak: ``cf_py_args_nep50`` in numpy_ext/py_args.c; the weak-scalar kind test:
``cf_weak_reaches`` in src/dtype.c). This module is its one Python mirror, for code that must know
the loop a call would take without making the call: the kernel language, where a ufunc called in a
body means the ufunc (lang/calls.py), and the GPU twins (_twins.py). Pure NumPy (the kernel
language may import it; it never imports cufunc._core). tests/python/test_lang_ufunc_calls.py
checks it against the C rule (through ``UFunc.kernel_source``, which resolves as a call does).

The rule, for a call with input dtypes and weak flags (a weak input is a Python int, float or
complex; its dtype is int64, float64 or complex128; a Python bool is a strong bool):

1. NEP 50: a weak input stays weak only beside a typed (strong) input of its kind or higher
   (signed and unsigned integers are one kind), or when it is complex beside floats; otherwise
   it is a strong input of its default type (``np.hypot(3.0, 4.0)`` is float64, an int8 array +
   2.0 is float64).
2. The loops in order: first pass, the first loop whose inputs equal the strong inputs' dtypes
   and whose input kinds the weak inputs reach; second pass (not for a ufunc that compiles loops
   on demand), the first loop every strong input reaches by "safe" casting and every weak input
   by kind. A weak input reaches a loop type of its kind or a higher one (never bool); it then
   takes that type, and a value out of its range is NumPy's OverflowError.

Functions with Numba's call rules (``rules='numba'``, what cufunc.numba makes) choose as
numba-cuda does (``rule=`` of find(): src/loopfn.c's CF_LOOPS_NUMBA_UFUNC / _GUFUNC; which inputs
are scalars: numba_scalars, py_args.c's ``cf_py_args_numba``).
"""
import numpy as np

__all__ = ["nep50", "numba_scalars", "weak_reaches", "find", "no_match_message", "weak_arg_type",
           "gufunc_scalar_fallback", "RULES"]

# find()'s rules: NumPy's, numba-cuda's ufunc mechanism, numba-cuda's gufunc loop search
RULES = ("numpy", "numba-ufunc", "numba-gufunc")

# cf_dtype_kind_order
_KIND_ORDER = {"b": 0, "u": 1, "i": 2, "f": 3, "c": 4}


def _nep50_kind(dt):
    # py_args.c's nep50_kind: signed and unsigned integers are one kind
    k = _KIND_ORDER[dt.kind]
    return k - 1 if k >= 2 else k


def weak_reaches(weak, to):
    """cf_weak_reaches: a weak scalar of dtype `weak` may take the loop type `to`."""
    if to.kind == "b":
        return False
    rw, rt = _KIND_ORDER[weak.kind], _KIND_ORDER[to.kind]
    rw = 1 if rw == 2 else rw
    rt = 1 if rt == 2 else rt
    return rt >= rw


def nep50(in_dtypes, weak):
    """cf_py_args_nep50: the weak flags after NEP 50 (which Python scalars stay weak)."""
    strong_kind = -1
    for dt, w in zip(in_dtypes, weak):
        if not w:
            strong_kind = max(strong_kind, _nep50_kind(dt))
    out = []
    for dt, w in zip(in_dtypes, weak):
        if w:
            k = _nep50_kind(dt)
            if strong_kind < 0 or (k > strong_kind and not (k == 3 and strong_kind == 2)):
                w = False   # its dtype is already int64, float64 or complex128
        out.append(bool(w))
    return tuple(out)


def numba_scalars(values):
    """cf_py_args_numba: which call arguments Numba takes as scalars (converted to the loop's
    type): Python bool/int/float/complex and NumPy number scalars; not np.bool_ nor 0-d arrays,
    which are arrays to Numba."""
    return tuple(isinstance(v, (bool, int, float, complex, np.number)) for v in values)


def _takes(rule, p, dt, w, t):
    if rule == "numba-ufunc":
        return dt == t or (p == 1 and w)
    if rule == "numba-gufunc":
        return dt == t or (p == 1 and bool(np.can_cast(t, dt, "safe")))
    if w:
        return weak_reaches(dt, t)
    return dt == t if p == 0 else bool(np.can_cast(dt, t, "safe"))


def find(loops, nin, in_dtypes, weak=None, passes=2, rule="numpy"):
    """cf_loops_find: the index of the loop (a dtype tuple, inputs first) the inputs take, or -1
    (-2: ambiguous, under Numba's ufunc rule). passes=1: exact matches only (a ufunc that
    compiles loops on demand makes a new loop rather than casting into an older one). rule: one
    of RULES; under the Numba rules weak[k] marks a scalar (numba_scalars)."""
    if rule not in RULES:
        raise ValueError("rule must be one of %s, not %r" % (RULES, rule))
    in_dtypes = [np.dtype(t) for t in in_dtypes]
    for p in range(passes):
        found = -1
        for i, lp in enumerate(loops):
            if not all(_takes(rule, p, in_dtypes[k], weak is not None and weak[k],
                              np.dtype(lp[k])) for k in range(nin)):
                continue
            if rule != "numba-ufunc" or p == 0:
                return i
            if found >= 0:
                return -2   # several loops differ only in the scalars' types
            found = i
        if found >= 0:
            return found
    return -1


def no_match_message(what, name, loops, nin, nout, in_dtypes, weak=None):
    """cf_loops_no_match's message: what a call raises (TypeError) when no loop matches."""
    ins = ", ".join(("Python " if weak is not None and weak[k] else "") + np.dtype(t).name
                    for k, t in enumerate(in_dtypes))
    text = ("%s '%s' not supported for the input types (%s), and the inputs could not be safely "
            "coerced to any supported types according to the casting rule 'safe'; its loops "
            "are:" % (what, name, ins))
    for lp in loops:
        names = [np.dtype(t).name for t in lp]
        text += " (%s) -> (%s)" % (", ".join(names[:nin]), ", ".join(names[nin:nin + nout]))
    if not loops:
        text += " none"
    return text


def weak_arg_type(pytype, strong):
    """The type a loop compiled on demand gives a weak argument (NEP 50): the kind of the other
    inputs where it fits (a float32 array with a Python float: float32); alone, its default
    type (int64, float64, complex128)."""
    if strong:
        return np.result_type(*strong, pytype(0))
    return np.result_type(pytype(0))


def gufunc_scalar_fallback(loops, nin, in_dtypes, weak):
    """py_gufunc.c's numba_scalar_cast, for a gufunc call whose inputs are all scalars, when
    find() matched nothing: Numba's habit, the first loop whose type for each strong input casts
    safely *to* the input's type (a wider NumPy scalar matches a narrower loop; weak inputs are
    not tested here). The strong inputs are then converted to that loop's types (astype) and the
    loop is found again with find(). Returns the converted input dtypes, or None (also when
    every input is weak: the C fallback needs a strong NumPy scalar)."""
    if all(weak[k] for k in range(nin)):
        return None
    for lp in loops:
        if all(weak[k] or np.can_cast(np.dtype(lp[k]), np.dtype(in_dtypes[k]), "safe")
               for k in range(nin)):
            return tuple(np.dtype(in_dtypes[k]) if weak[k] else np.dtype(lp[k])
                         for k in range(nin))
    return None
