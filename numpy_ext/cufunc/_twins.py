"""GPU twins of NumPy's ufuncs, and what DeviceArray does with them.

``np.sin(d)``, ``np.add(d, 1.5)``, ``np.maximum.reduce(d, axis=0)``, ``np.add.accumulate(d)``,
``np.add.reduceat(d, idx)``, ``np.multiply.outer(a, b)`` and ``np.add.at(d, idx, v)`` on cufunc DeviceArrays run on the GPU:
DeviceArray.__array_ufunc__ (NEP 13) hands them to a *twin*, a cufunc ufunc whose body (in
_twin_defs.py) calls the NumPy function, which the kernel language translates with NumPy's meaning.
The operators of DeviceArray (``d + 1``, ``d < e``, ``d += 1``, ``-d``, ``abs(d)``) go through the
same twins. A NumPy ufunc with no twin raises TypeError naming it; nothing is copied to the host
behind the caller's back (``np.asarray(d)`` stays the explicit copy).

A twin is made on first use. Its loops are NumPy's own (``np.add.types``) in NumPy's order, minus
the types cufunc cannot run (object, datetime, timedelta), one loop per distinct dtype tuple ('l'
and 'q' are both int64); float16 loops included (cf_float16 computes in float32 and rounds to half
after each operation, as NumPy's float16 loops do). With NumPy's order,
cufunc's resolution (the first loop the inputs reach by safe casting) is NumPy's. Python scalars
(NEP 50 weak scalars) are resolved by NumPy itself: ``ufunc.resolve_dtypes`` gives the loop NumPy
would pick, and each Python scalar becomes a NumPy scalar of that loop's type before the twin is
called, as NumPy converts it. Where NumPy's loop has a float16 operand or result (np.sqrt of a
bool, int8 or uint8 array), the twin runs that float16 loop, never a different result type. The operators resolve as NumPy's do: ``-d`` and ``abs(d)`` through
NumPy's resolution (``-`` of a bool array is NumPy's TypeError), ``d ** 2`` is ``np.square(d)`` as
NumPy's ``ndarray.__pow__`` makes it (bool ** 2 is int8).

The C side (py_twins.c) forwards DeviceArray's number slots, rich comparison and
``__array_ufunc__`` to the functions in ``_hooks`` below.
"""
import numpy as np

from . import _core
from . import _loops
from . import _twin_defs
from . import types as _T
from .vectorize import GPUUFunc, _loop_from

__all__ = ["twin", "loop_signatures", "has_twin", "array_ufunc"]

_DA = _core.DeviceArray

# Type characters of the loops cufunc runs (float16 'e' included); object, datetime, timedelta and
# strings are no GPU types at all.
_CHARS = frozenset("?bhilqBHILQefdFD")
# Loops of a kind the twin's body does not give NumPy's meaning to (NumPy orders complex numbers
# lexicographically; the language has no ordering of complex values): left out.
_EXCLUDE_KINDS = {
    "logaddexp": "c", "logaddexp2": "c", "floor_divide": "c", "remainder": "c", "fmod": "c",
}
# Identity for reduce: NumPy's ufunc.identity; maximum and minimum have none in NumPy but reduce in
# any order, which cufunc spells 'reorderable'.
_REORDERABLE = frozenset(["maximum", "minimum", "fmax", "fmin"])

_TWINS = {}   # NumPy ufunc -> its twin (a GPUUFunc)
_RESOLVED = {}  # (NumPy ufunc, input keys) -> per-input converter (None: passed as is)


def has_twin(ufunc):
    """Whether cufunc can make a GPU twin of this NumPy ufunc."""
    return isinstance(ufunc, np.ufunc) and hasattr(_twin_defs, ufunc.__name__)


def loop_signatures(ufunc):
    """The twin's loops: NumPy's ``ufunc.types`` in NumPy's order, as tuples of dtypes (inputs,
    then outputs), without the types cufunc cannot run and without repeats (NumPy lists both 'l'
    and 'q', both int64 here). Pure NumPy: no GPU needed."""
    name = ufunc.__name__
    skip = _EXCLUDE_KINDS.get(name, "")
    seen, loops = set(), []
    for t in ufunc.types:
        chars = t.replace("->", "")
        if not all(c in _CHARS for c in chars):
            continue
        dts = tuple(np.dtype(c) for c in chars)
        if any(d.kind in skip for d in dts[:ufunc.nin]) or dts in seen:
            continue
        seen.add(dts)
        loops.append(dts)
    return loops


_KIND_SUFFIX = {"b": "__bool", "u": "__unsigned", "i": "__int", "c": "__complex"}


def _body(name, dts, nin):
    """The Python body of one loop, where _twin_defs spells a kind of type out differently:
    name__<dtype> (name__complex64) when the inputs share that dtype, else name__bool,
    name__unsigned, name__int or name__complex when they share that kind, else name."""
    kinds = {d.kind for d in dts[:nin]}
    types = {d.name for d in dts[:nin]}
    if len(types) == 1 and hasattr(_twin_defs, name + "__" + next(iter(types))):
        return getattr(_twin_defs, name + "__" + next(iter(types)))
    if len(kinds) == 1 and hasattr(_twin_defs, name + _KIND_SUFFIX.get(next(iter(kinds)), "?")):
        return getattr(_twin_defs, name + _KIND_SUFFIX[next(iter(kinds))])
    return getattr(_twin_defs, name)


def _no_twin(ufunc, what="ufunc"):
    name = getattr(ufunc, "__name__", repr(ufunc))
    return TypeError("cufunc: numpy %s '%s' has no GPU twin, so it cannot run on a cufunc "
                     "DeviceArray (copy to the host explicitly with np.asarray(d) or "
                     "d.copy_to_host())" % (what, name))


# NumPy's accumulators of reduce and accumulate (UFunc.accumulator, cufunc/loops.h's
# cf_accumulator): add and multiply widen bool and small integers to 64 bits, the logical ufuncs
# reduce any type in their bool loop; the others reduce in their (T, T) loop.
_ACCUMULATORS = {np.add: "widen", np.multiply: "widen", np.logical_and: "logical",
                 np.logical_or: "logical", np.logical_xor: "logical"}


def twin(ufunc):
    """The GPU twin of a NumPy ufunc, made on first use (every loop translated then; kernels are
    compiled per launch shape, as for any cufunc ufunc). TypeError naming the ufunc if cufunc has
    none."""
    tw = _TWINS.get(ufunc)
    if tw is not None:
        return tw
    if not has_twin(ufunc):
        raise _no_twin(ufunc)
    name = ufunc.__name__
    identity = "reorderable" if name in _REORDERABLE else ufunc.identity
    tw = GPUUFunc(name, ufunc.nin, ufunc.nout, identity=identity,
                  doc="GPU twin of numpy.%s (cufunc)." % name, compiler=None,
                  accumulator=_ACCUMULATORS.get(ufunc, "loop"))
    skipped = []
    for dts in loop_signatures(ufunc):
        body = _body(name, dts, ufunc.nin)
        args = [_T.from_dtype(d) for d in dts[:ufunc.nin]]
        ret = _T.from_dtype(dts[ufunc.nin])
        try:
            spec, _ = _loop_from(body, args, ret, False)
        except (TypeError, NotImplementedError) as e:
            # a loop the language cannot give NumPy's meaning: left out, as an unsupported type
            skipped.append(("".join(d.char for d in dts), str(e).splitlines()[0]))
            continue
        tw.add_loop(*spec)
    if tw.ntypes == 0:
        raise _no_twin(ufunc)
    tw.py_func = getattr(_twin_defs, name)
    tw.numpy_ufunc = ufunc
    tw.skipped_loops = tuple(skipped)
    tw.loop_set = frozenset(tuple(np.dtype(t) for t in spec[0]) for spec in tw.loops)
    _TWINS[ufunc] = tw
    return tw


# ---- argument conversion --------------------------------------------------------------------

_WEAK = (int, float, complex)
_MISSING = object()


def _weak(k):
    # by identity: np.dtype('float64') == float is True, so `k in _WEAK` would take a float64
    # array for a Python float
    return k is int or k is float or k is complex


def _key(x):
    t = type(x)
    if t is _DA:
        return x.dtype
    if t in _WEAK:
        return t
    if t is bool:
        return np.dtype(bool)
    d = getattr(x, "dtype", None)
    if isinstance(d, np.dtype):
        return d
    return np.asarray(x).dtype


def _first_safe_loop(tw, in_dtypes):
    """The loop cufunc's own resolution picks for strong inputs (cf_loops_find: exact match, then
    the first loop every input reaches by safe casting; asked through _loops.find), as a
    dtype tuple."""
    loops = [tuple(np.dtype(t) for t in spec[0]) for spec in tw.loops]
    i = _loops.find(loops, tw.nin, in_dtypes)
    return loops[i] if i >= 0 else None


def _converters(ufunc, inputs):
    """(per input: None or the NumPy scalar type a Python scalar becomes, extra keywords).

    NumPy's own resolution (ufunc.resolve_dtypes, NEP 50) decides, once per combination of input
    types. Python scalars become NumPy scalars of the loop's type, as NumPy converts them. Where
    cufunc's resolution from there (first safe-cast loop in NumPy's order) would differ from
    NumPy's (true_divide of integers: NumPy's own type resolver goes to float64), dtype= names
    NumPy's output. A combination whose NumPy loop the twin lacks (one the language cannot
    translate) is a TypeError, never a silently different result type. NumPy's own TypeErrors
    (-bool) are raised as is."""
    keys = tuple(_key(x) for x in inputs)
    # a Python bool and a bool array share their key (np.dtype(bool)) but convert differently
    # (the bool becomes np.bool_, the array is used as it is): the cache tells them apart
    ck = (ufunc, keys, tuple(type(x) is bool for x in inputs))
    conv = _RESOLVED.get(ck)
    if conv is None:
        dts = tuple(ufunc.resolve_dtypes(keys + (None,) * ufunc.nout))
        tw = twin(ufunc)
        if dts not in tw.loop_set:
            raise TypeError("cufunc: the GPU twin of numpy.%s has no loop for NumPy's '%s' "
                            "(the kernel language cannot give it NumPy's meaning)"
                            % (ufunc.__name__, "".join(d.char for d in dts)))
        scal = tuple(dts[i].type if _weak(k) else None for i, k in enumerate(keys))
        scal = tuple(np.bool_ if k is np.dtype(bool) and type(x) is bool else c
                     for k, c, x in zip(keys, scal, inputs))
        strong = tuple(np.dtype(c) if c is not None else k for k, c in zip(keys, scal))
        extra = {}
        if _first_safe_loop(tw, strong) != dts and ufunc.nout == 1:
            extra = {"dtype": dts[-1]}
        conv = (scal, extra)
        if len(_RESOLVED) > 4096:
            _RESOLVED.clear()
        _RESOLVED[ck] = conv
    return conv


_COMPARISONS = frozenset([np.less, np.less_equal, np.equal, np.not_equal, np.greater,
                          np.greater_equal])


def _scalar(ufunc, c, x):
    try:
        return c(x)
    except OverflowError:
        # NumPy compares an out-of-range Python int with an integer array by value
        # (np.uint8 array < -3 is all False); as a wide NumPy integer the twin does the same
        if ufunc in _COMPARISONS and type(x) is int:
            return np.asarray(x)[()]
        raise


_BY_TYPE = {}   # (ufunc, DeviceArray dtype or Python scalar type, ...) -> _converters' answer


def _args(ufunc, inputs):
    """The inputs as the twin gets them, and extra keywords (see _converters)."""
    fk = [ufunc]
    for x in inputs:
        t = type(x)
        if t is _DA:
            fk.append(x.dtype)
        elif t is float or t is int or t is complex or t is bool:
            fk.append(t)
        else:
            fk = None
            break
    if fk is not None:
        fk = tuple(fk)
        ent = _BY_TYPE.get(fk)
        if ent is None:
            ent = _BY_TYPE[fk] = _converters(ufunc, inputs)
    else:
        ent = _converters(ufunc, inputs)
    scal, extra = ent
    if scal.count(None) == len(scal):
        return inputs, extra
    return [x if c is None else _scalar(ufunc, c, x) for x, c in zip(inputs, scal)], extra


def _foreign(x):
    """An operand that overrides __array_ufunc__ itself (dask, xarray, CuPy, pint...): NEP 13
    says we step aside for it."""
    t = type(x)
    if t is _DA or t in _WEAK or t is bool or isinstance(x, (np.ndarray, np.generic)):
        return False
    au = getattr(t, "__array_ufunc__", _MISSING)
    # __array_ufunc__ = None: the object opts out of ufuncs, so binary operators step aside
    return au is not _MISSING and au is not _DA.__array_ufunc__


def _single_out(kwargs):
    out = kwargs.get("out")
    if isinstance(out, tuple):
        if len(out) == 1:
            kwargs["out"] = out[0]
        elif all(o is None for o in out):
            del kwargs["out"]
    elif out is None and "out" in kwargs:
        del kwargs["out"]
    return kwargs


def _reduce_dtype(ufunc, a, kwargs):
    # NumPy's accumulators (add and multiply widen small integers) are the twin's own
    # (accumulator=, _ACCUMULATORS): only dtype=None is dropped here
    if "dtype" in kwargs and kwargs["dtype"] is None:
        del kwargs["dtype"]
    return kwargs


# (NumPy ufunc, dtype of each input) -> (twin, extra keywords) for calls whose inputs are all
# DeviceArrays: the per-call path of np.sin(d) and d + d is one dict look-up on top of the twin's
_FAST = {}


def _fast_key(ufunc, inputs):
    key = [ufunc]
    for x in inputs:
        if type(x) is not _DA:
            return None
        key.append(x.dtype)
    return tuple(key)


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """DeviceArray.__array_ufunc__ (NEP 13): NumPy's ufunc on the GPU through its twin."""
    if method == "__call__":
        fk = _fast_key(ufunc, inputs)
        ent = _FAST.get(fk) if fk is not None else None
        if ent is not None:
            if not kwargs:
                return ent[0](*inputs, **ent[1])
            out = kwargs.get("out")
            if len(kwargs) == 1 and type(out) is tuple and len(out) == 1 and type(out[0]) is _DA:
                return ent[0](*inputs, out=out[0], **ent[1])
    for x in inputs + tuple(kwargs.get("out", ()) or ()):
        if _foreign(x):
            return NotImplemented
    if isinstance(ufunc, (_core.UFunc, _core.GUFunc)):
        # a cufunc ufunc handed to us (NEP 13 dispatch must treat DeviceArray as NumPy treats
        # ndarray: not an override; this is for a direct call): it runs on DeviceArrays itself
        kwargs = _single_out(kwargs)
        return getattr(ufunc, method)(*inputs, **kwargs)
    if not isinstance(ufunc, np.ufunc):
        raise _no_twin(ufunc)
    tw = twin(ufunc)
    kwargs = _single_out(kwargs)
    if kwargs.pop("subok", True) is not True:
        raise TypeError("cufunc: subok=False is not supported on DeviceArrays")
    for k in ("signature", "order"):
        if kwargs.get(k) not in (None, "K"):
            raise TypeError("cufunc: numpy.%s(%s=...) is not supported on DeviceArrays"
                            % (ufunc.__name__, k))
        kwargs.pop(k, None)
    if method == "__call__":
        args, extra = _args(ufunc, inputs)
        fk = _fast_key(ufunc, inputs)
        if fk is not None:
            _FAST[fk] = (tw, extra)
        if extra and "dtype" not in kwargs:
            kwargs.update(extra)
        return tw(*args, **kwargs)
    if method == "reduce":
        return tw.reduce(*inputs, **_reduce_dtype(ufunc, inputs[0], kwargs))
    if method == "accumulate":
        return tw.accumulate(*inputs, **_reduce_dtype(ufunc, inputs[0], kwargs))
    if method == "reduceat":
        return tw.reduceat(*inputs, **_reduce_dtype(ufunc, inputs[0], kwargs))
    if method == "outer":
        args, extra = _args(ufunc, inputs)
        if extra and "dtype" not in kwargs:
            kwargs.update(extra)
        return tw.outer(*args, **kwargs)
    if method == "at":
        return tw.at(*inputs, **kwargs)  # GPUUFunc.at: cufunc/_at.py
    raise TypeError("cufunc: numpy.%s.%s is not supported on DeviceArrays (no GPU twin of the "
                    "method)" % (ufunc.__name__, method))


# ---- DeviceArray's operators ------------------------------------------------------------------

def _binary(ufunc):
    def op(a, b):
        if type(a) is _DA and type(b) is _DA:
            ent = _FAST.get((ufunc, a.dtype, b.dtype))
            if ent is not None:
                return ent[0](a, b, **ent[1])
        if _foreign(b) or _foreign(a):
            return NotImplemented
        args, extra = _args(ufunc, (a, b))
        tw = twin(ufunc)
        fk = _fast_key(ufunc, (a, b))
        if fk is not None:
            _FAST[fk] = (tw, extra)
        return tw(*args, **extra)
    op.__name__ = ufunc.__name__
    return op


def _inplace(ufunc):
    def op(a, b):
        if _foreign(b):
            return NotImplemented
        # NumPy's a += b: np.add(a, b, out=a) with the same_kind rule for the output
        args, extra = _args(ufunc, (a, b))
        return twin(ufunc)(*args, out=a, **extra)
    op.__name__ = "i" + ufunc.__name__
    return op


def _unary(ufunc):
    def op(a):
        ent = _FAST.get((ufunc, a.dtype))
        if ent is not None:
            return ent[0](a, **ent[1])
        # NumPy's resolution first: -bool is NumPy's TypeError
        args, extra = _args(ufunc, (a,))
        tw = twin(ufunc)
        _FAST[(ufunc, a.dtype)] = (tw, extra)
        return tw(*args, **extra)
    op.__name__ = ufunc.__name__
    return op


def _square_exponent(a, b):
    # NumPy's ndarray.__pow__ computes a ** 2 (a Python int exactly) as np.square(a): for a bool
    # array that is square's first loop, int8, where np.power(a, 2) gives int64
    return type(a) is _DA and type(b) is int and b == 2


def _power(a, b, mod=None):
    if mod is not None:
        return NotImplemented
    if _square_exponent(a, b):
        return _SQUARE(a)
    return _POW(a, b)


def _ipower(a, b, mod=None):
    if mod is not None:
        return NotImplemented
    if _square_exponent(a, b):
        return twin(np.square)(a, out=a)   # NumPy's a **= 2: np.square(a, out=a)
    return _IPOW(a, b)


_BINARY = (np.add, np.subtract, np.multiply, np.true_divide, np.floor_divide, np.remainder,
           np.power, np.left_shift, np.right_shift, np.bitwise_and, np.bitwise_or, np.bitwise_xor)
_POW = _binary(np.power)
_IPOW = _inplace(np.power)
_SQUARE = _unary(np.square)
_COMPARE = (np.less, np.less_equal, np.equal, np.not_equal, np.greater, np.greater_equal)


def _compare(ufunc):
    op = _binary(ufunc)
    eq = ufunc in (np.equal, np.not_equal)

    def cmp(a, b):
        if b is None or a is None:
            return NotImplemented   # d == None: Python's identity answer, not an elementwise one
        if not eq:
            return op(a, b)
        try:
            return op(a, b)
        except TypeError:
            # d == "text", d == object(): no loop; Python's answer (identity), as NumPy's
            return NotImplemented
    return cmp


def _bool(a):
    n = a.size
    if n != 1:
        raise ValueError("The truth value of an array with more than one element is ambiguous. "
                         "Use a.any() or a.all()" if n else
                         "The truth value of an empty array is ambiguous. Use `array.size > 0` "
                         "to check that an array is not empty.")
    return bool(a.copy_to_host().reshape(-1)[0])   # one element read back: an explicit sync


# The order py_twins.c reads them in (TW_* there): __array_ufunc__, 12 binary operators, their 12
# in-place forms, 4 unary ones, 6 comparisons in Py_LT..Py_GE order, bool(). _hooks, _FAST and
# _hook_ufuncs reach the extension as hooks (registered by cufunc/__init__.py).
_hooks = ((array_ufunc,)
          + tuple(_power if u is np.power else _binary(u) for u in _BINARY)
          + tuple(_ipower if u is np.power else _inplace(u) for u in _BINARY)
          + tuple(_unary(u) for u in (np.negative, np.positive, np.absolute, np.invert))
          + tuple(_compare(u) for u in _COMPARE)
          + (_bool,))
# The ufunc behind each hook (None where there is none), for py_twins.c's short-cut: it looks a
# repeated call on DeviceArrays up in _FAST under the keys the hooks store.
_hook_ufuncs = ((None,) + _BINARY + (None,) * len(_BINARY)
                + (np.negative, np.positive, np.absolute, np.invert) + _COMPARE + (None,))
assert len(_hook_ufuncs) == len(_hooks)
