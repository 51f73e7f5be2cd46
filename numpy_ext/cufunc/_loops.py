"""Loop selection of cufunc's ufuncs and gufuncs, asked of the C resolver.

The rule is defined once, in C (include/cufunc/loops.h, src/loopfn.c: ``cf_loops_find``,
``cf_loops_no_match``, ``cf_loops_nep50``; the kind order: ``cf_dtype_kind_order`` in
src/dtype.c); every engine's call resolves through it. This module asks the same functions,
through ``cufunc._core`` (numpy_ext/py_loops.c), for code that must know the loop a call would
take without making the call: the kernel language, where a ufunc called in a body means the
ufunc (lang/calls.py), the GPU twins (_twins.py) and ufunc.at (_at.py). It keeps no rule of its
own. ``cufunc._core`` is imported on first use (the kernel language imports this module, and
works without the extension until a body calls a cufunc ufunc, which exists only once it is
loaded).

The rule, for a call with input dtypes and weak flags (a weak input is a Python int, float or
complex; its dtype is int64, float64 or complex128; a Python bool is a strong bool):

1. NEP 50 (``nep50``): a weak input stays weak only beside a typed (strong) input of its kind or
   higher (signed and unsigned integers are one kind), or when it is complex beside floats;
   otherwise it is a strong input of its default type (``np.hypot(3.0, 4.0)`` is float64, an
   int8 array + 2.0 is float64).
2. The loops in order (``find``): first pass, the first loop whose inputs equal the strong
   inputs' dtypes and whose input kinds the weak inputs reach; second pass (not for a ufunc that
   compiles loops on demand, ``passes=1``), the first loop every strong input reaches by "safe"
   casting and every weak input by kind. A weak input reaches a loop type of its kind or a
   higher one (never bool); it then takes that type, and a value out of its range is NumPy's
   OverflowError.

Functions with Numba's call rules (``rules='numba'``, what cufunc.numba makes) choose as
numba-cuda does (``rule=`` of find(); which inputs are scalars: numba_scalars, py_args.c's
``cf_py_args_numba``).
"""
import numpy as np

__all__ = ["nep50", "numba_scalars", "find", "no_match_message", "weak_arg_type",
           "gufunc_scalar_fallback", "RULES"]

# find()'s rules: NumPy's, numba-cuda's ufunc mechanism, numba-cuda's gufunc loop search
RULES = ("numpy", "numba-ufunc", "numba-gufunc")


def _core():
    from ._env import core, core_error
    if core is None:
        raise core_error
    return core


def _flags(weak, n):
    return None if weak is None else [int(bool(weak[k])) for k in range(n)]


def nep50(in_dtypes, weak):
    """cf_loops_nep50: the weak flags after NEP 50 (which Python scalars stay weak)."""
    return _core()._loops_nep50(list(in_dtypes), _flags(weak, len(in_dtypes)))


def numba_scalars(values):
    """cf_py_args_numba: which call arguments Numba takes as scalars (converted to the loop's
    type): Python bool/int/float/complex and NumPy number scalars; not np.bool_ nor 0-d arrays,
    which are arrays to Numba."""
    return tuple(isinstance(v, (bool, int, float, complex, np.number)) for v in values)


def find(loops, nin, in_dtypes, weak=None, passes=2, rule="numpy"):
    """cf_loops_find: the index of the loop (a dtype tuple, inputs first) the inputs take, or -1
    (-2: ambiguous, under Numba's ufunc rule). passes=1: exact matches only (a ufunc that
    compiles loops on demand makes a new loop rather than casting into an older one). rule: one
    of RULES; under the Numba rules weak[k] marks a scalar (numba_scalars)."""
    if rule not in RULES:
        raise ValueError("rule must be one of %s, not %r" % (RULES, rule))
    return _core()._loops_find(list(loops), nin, list(in_dtypes), _flags(weak, nin),
                               passes == 1, rule)


def no_match_message(what, name, loops, nin, nout, in_dtypes, weak=None):
    """cf_loops_no_match's message: what a call raises (TypeError) when no loop matches."""
    return _core()._loops_no_match(what, name, list(loops), nin, nout, list(in_dtypes),
                                   _flags(weak, nin))


def weak_arg_type(pytype, strong):
    """The type a loop compiled on demand gives a weak argument (NEP 50): the kind of the other
    inputs where it fits (a float32 array with a Python float: float32); alone, its default
    type (int64, float64, complex128). NumPy's promotion, not a loop search."""
    if strong:
        return np.result_type(*strong, pytype(0))
    return np.result_type(pytype(0))


def gufunc_scalar_fallback(loops, nin, in_dtypes, weak):
    """py_gufunc.c's numba_scalar_cast, for a gufunc call whose inputs are all scalars, when
    find() matched nothing: cf_loops_find's CF_LOOPS_SCALAR_CAST rule, the first loop whose type
    for each strong input casts safely *to* the input's type (a wider NumPy scalar matches a
    narrower loop; weak inputs are not tested here). The strong inputs are then converted to
    that loop's types (astype) and the loop is found again with find(). Returns the converted
    input dtypes, or None (also when every input is weak: the rule needs a strong NumPy
    scalar)."""
    flags = [1 if weak[k] else 2 for k in range(nin)]
    i = _core()._loops_find(list(loops), nin, list(in_dtypes), flags, False, "scalar-cast")
    if i < 0:
        return None
    lp = loops[i]
    return tuple(np.dtype(in_dtypes[k]) if weak[k] else np.dtype(lp[k]) for k in range(nin))
