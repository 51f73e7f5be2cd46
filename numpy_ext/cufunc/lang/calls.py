"""The call tables of the kernel language: which Python callables a kernel may call and what
each means. Builtins (abs, min, max, round, pow, divmod, int, float, bool, complex, len), the math
and cmath functions, the NumPy functions, casts to scalar types (np.float32(x)), cuda.local.array,
device functions (other Python functions, translated on their own), and cufunc ufuncs and
scalar-layout gufuncs, which mean the ufunc call (the loop a host call takes, cufunc._loops).

Each entry is data (a name table) plus a small function ``f(tr, node, ...)`` that types the call
with the translator ``tr`` (its casts, folding and errors) and returns the call's value."""

import ast
import cmath
import math
import operator
import re
import sys
import types as pytypes

import numpy as np

from .. import _loops
from .. import types as T
from ..errors import TypingError, UnsupportedError
from . import numba_typing as NT
from . import typesys as TS
from .cgen import c_string, tuple_struct_name
from .fold import fits, int_range_message
from . import ir
from .ir import StaticVal, TupleVal, Val, _Bottom

# Math functions of the runtime (cf_<name>), one real argument.
_MATH1 = ["sqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
          "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "floor",
          "ceil", "trunc", "fabs", "erf", "erfc", "gamma", "lgamma", "degrees", "radians"]
_MATH2 = ["atan2", "hypot", "fmod", "remainder", "copysign", "pow"]
_CMATH1 = ["sqrt", "exp", "log", "log10", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
           "cosh", "tanh", "asinh", "acosh", "atanh"]
_COMPLEX_FUNCS = set(_CMATH1)

# numpy function -> (runtime name or special tag, number of arguments)
_NP_FUNCS = {}


def _np_table():
    if _NP_FUNCS:
        return _NP_FUNCS
    one = {"sqrt": "sqrt", "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log",
           "log2": "log2", "log10": "log10", "log1p": "log1p", "sin": "sin", "cos": "cos",
           "tan": "tan", "arcsin": "asin", "arccos": "acos", "arctan": "atan", "sinh": "sinh",
           "cosh": "cosh", "tanh": "tanh", "arcsinh": "asinh", "arccosh": "acosh",
           "arctanh": "atanh", "floor": "@floor", "ceil": "@ceil", "trunc": "@trunc",
           "rint": "@round", "fabs": "fabs", "degrees": "degrees", "radians": "radians",
           "rad2deg": "degrees", "deg2rad": "radians", "absolute": "@abs",
           "isnan": "@isnan", "isinf": "@isinf", "isfinite": "@isfinite",
           "conjugate": "@conj", "real": "@real", "imag": "@imag", "square": "@square",
           "negative": "@neg", "positive": "@pos", "round": "@round", "around": "@round",
           "frexp": "@frexp", "modf": "@modf"}
    two = {"arctan2": "atan2", "hypot": "hypot", "copysign": "copysign", "fmod": "fmod",
           "remainder": "@mod", "mod": "@mod", "power": "@pow", "floor_divide": "@floordiv",
           "true_divide": "@truediv", "divide": "@truediv", "add": "@add", "subtract": "@sub",
           "multiply": "@mul", "ldexp": "@ldexp", "left_shift": "@lshift",
           "right_shift": "@rshift", "bitwise_and": "@and", "bitwise_or": "@or",
           "bitwise_xor": "@xor"}
    for table, n in ((one, 1), (two, 2)):
        for name, tag in table.items():
            f = getattr(np, name, None)
            if f is not None and f not in _NP_FUNCS:
                _NP_FUNCS[f] = (tag, n, name)
    return _NP_FUNCS


def _math_table():
    tab = {}
    for n in _MATH1:
        f = getattr(math, n, None)
        if f is not None:
            tab[f] = ("m1", n)
    for n in _MATH2:
        tab[getattr(math, n)] = ("m2", n)
    for n in ("isnan", "isinf", "isfinite"):
        tab[getattr(math, n)] = ("mpred", n)
        tab[getattr(cmath, n)] = ("cpred", n)
    tab[math.ldexp] = ("ldexp", "ldexp")
    tab[math.frexp] = ("frexp", "frexp")
    tab[math.modf] = ("modf", "modf")
    for n in _CMATH1:
        tab[getattr(cmath, n)] = ("c1", n)
    tab[cmath.phase] = ("phase", "phase")
    tab[cmath.polar] = ("polar", "polar")
    tab[cmath.rect] = ("rect", "rect")
    return tab


_MATH = _math_table()


def _numba_objects(space="local", name="array"):
    """numba.cuda.local.array (or another numba.cuda.<space>.<name>), if numba is already
    imported (we never import it ourselves)."""
    nc = sys.modules.get("numba.cuda")
    out = []
    if nc is not None:
        loc = getattr(nc, space, None)
        if loc is not None and hasattr(loc, name):
            out.append(getattr(loc, name))
    return out

def _is_device_function(obj):
    from .device import DeviceFunction
    return isinstance(obj, DeviceFunction)


# CUDA's limit on a thread's local memory (512 KiB on every supported architecture)
_LOCAL_ARRAY_LIMIT = 512 * 1024

def _choose_signature(signatures, types):
    for ret, args in signatures:
        if len(args) == len(types) and all(a == TS.concrete(t) or a == t
                                           for a, t in zip(args, types)):
            return ret, args
    for ret, args in signatures:
        if len(args) == len(types):
            return ret, args
    return None



def call(tr, node):
    f = node.func
    if isinstance(f, ast.Attribute) and tr.static(f.value) is None:
        base = tr.expr(f.value)
        if isinstance(base, Val) and isinstance(base.type, T.Scalar):
            if f.attr in ("conjugate", "conj") and not node.args and not node.keywords:
                t = base.type
                if t.kind == "c":
                    return ir.Call(t, "cf_conj", [base])
                return tr.cast(base, TS.oracle(lambda x: x.conjugate(), t), node)
        raise tr._fail(node, "method call .%s() is not supported" % f.attr,
                         UnsupportedError)
    fv = tr.static(f)
    if fv is None:
        v = tr.expr(f)
        raise tr._fail(node, "%s is not callable" % getattr(v, "type", "this value"))
    obj = fv.obj
    if any(obj is x for x in _local_array_objects()):
        return local_array(tr, node)
    if any(obj is x for x in _const_array_objects()):
        return const_array(tr, node)
    if node.keywords:
        raise tr._fail(node, "keyword arguments are not supported in calls to %s"
                         % fv.name, UnsupportedError)
    if any(isinstance(a, ast.Starred) for a in node.args):
        raise tr.unsupported(node, "*args in calls")
    handler = _BUILTIN_HANDLERS.get(id(obj))
    if handler is not None:
        return handler(tr, node, fv.name)
    try:
        mt = _MATH.get(obj)
    except TypeError:
        mt = None
    if mt is not None:
        return math_call(tr, mt[0], mt[1], node, fv.name)
    try:
        npf = _np_table().get(obj)
    except TypeError:
        npf = None
    if npf is not None:
        return np_call(tr, obj, npf, node, fv.name)
    target = _cast_target(obj)
    if target is not None:
        return type_call(tr, target, node, fv.name)
    if _is_device_function(obj):
        return device_call(tr, obj.py_func, obj.signatures, node, fv.name)
    kind = _cufunc_kind(obj)
    if kind is not None:
        return ufunc_call(tr, obj, kind, node)
    tw = _numpy_twin(obj)
    if tw is not None:
        return ufunc_call(tr, tw, "ufunc", node)
    if obj is range:
        raise tr.err(node, "range() can only be used as the iterable of a for loop",
                       UnsupportedError)
    if isinstance(obj, pytypes.FunctionType):
        return device_call(tr, obj, None, node, fv.name)
    py = getattr(obj, "py_func", None)
    if isinstance(py, pytypes.FunctionType):   # e.g. numba.cuda.jit(device=True)
        return device_call(tr, py, None, node, fv.name)
    raise tr.err(node, "calling %s (%s) is not supported in kernel functions"
                   % (fv.name, type(obj).__name__), UnsupportedError)

def args(tr, node, n, name):
    if isinstance(n, int):
        n = (n,)
    if len(node.args) not in n:
        raise tr._fail(node, "%s() takes %s argument(s), %d given"
                         % (name, " or ".join(str(x) for x in n), len(node.args)))
    return [tr.expr(a) for a in node.args]

def real_arg(tr, v, node, fname, allow_complex=False):
    v = tr.scalar(v, node, "an argument of %s()" % fname)
    if v.type.kind == "c" and not allow_complex:
        raise tr._fail(node, "%s() needs a real number, not %s" % (fname, v.type))
    return v

def b_abs(tr, node, name):
    (a,) = args(tr, node, 1, "abs")
    a = tr.scalar(a, node, "an argument of abs()")
    if tr.policy.numba:
        R, ta = _numba_sig(tr, node, "abs", a)
        return unop_abs(tr, tr.cast(a, ta, node, explicit=True), R, node)
    return unop_abs(tr, a, TS.oracle(abs, a.type), node)

def unop_abs(tr, a, R, node):
    tr.check_scalar_type(R, node)
    if a.is_const:
        f = tr.fold(abs, (a,), R, node)
        if f is not None:
            return f
    if a.type.kind == "c":
        return tr.cast(ir.Call(T.float32 if a.type.bits == 64 else T.float64, "cf_abs", [a]),
                       R, node)
    if R.kind == "b":
        return tr.cast(a, R, node)
    ca = tr.cast(a, R, node)
    if R.kind == "u":
        return ca
    return ir.Call(R, "cf_abs", [ca])

def b_minmax(tr, node, name):
    if len(node.args) < 2:
        raise tr._fail(node, "%s() needs two or more arguments here (iterables are not "
                         "supported)" % name, UnsupportedError)
    vals = [tr.scalar(tr.expr(a), a, "an argument of %s()" % name) for a in node.args]
    R = None
    if tr.policy.numba:
        R = NT.unify_all([TS.concrete(v.type) for v in vals])
        if R is None:
            raise tr._fail(node, "%s() of %s: Numba cannot unify these types"
                           % (name, ", ".join(str(v.type) for v in vals)))
    for v in vals if R is None else ():
        R = TS.join(R, v.type)
    tr.check_scalar_type(R, node)
    fn = min if name == "min" else max
    if all(v.is_const for v in vals):
        cv = [tr.cast(v, R, node) for v in vals]
        if all(v.is_const for v in cv):
            return tr.const_val(fn(v.const for v in cv), R, node)
    if R.kind == "c":
        try:   # CPython needs the operands to be ordered (NumPy complex are; Python's not)
            TS.oracle(operator.lt, *[v.type for v in vals[:2]])
        except TS.OracleError as e:
            raise tr._fail(node, "%s() of these values: %s" % (name, e))
    helper = ("cf_lang_c" if R.kind == "c" else "cf_") + name
    acc = tr.cast(vals[0], R, node)
    for v in vals[1:]:
        acc = ir.Call(R, helper, [acc, tr.cast(v, R, node)])
    return acc

def b_round(tr, node, name):
    if len(node.args) == 2:
        return _round_digits(tr, node)
    if len(node.args) != 1:
        raise tr._fail(node, "round() takes a number and an optional ndigits")
    (a,) = args(tr, node, 1, "round")
    a = real_arg(tr, a, node, "round")
    if tr.policy.numba:
        R, ta = _numba_sig(tr, node, "round", a)
        a = tr.cast(a, ta, node, explicit=True)
        return tr.cast(ir.Call(ta, "cf_round", [a]), R, node, explicit=True)
    try:
        R = TS.oracle(round, a.type)
    except TS.OracleError as e:
        raise tr._fail(node, "round() of %s: %s" % (a.type, e))
    if a.is_const:
        f = tr.fold(round, (a,), R, node)
        if f is not None:
            return f
    if a.type.kind == "f":
        return tr.cast(ir.Call(a.type if not isinstance(a.type, TS.Weak) else T.float64,
                               "cf_round", [a]), R, node, explicit=True)
    return tr.cast(a, R, node)

def _round_digits(tr, node):
    """round(x, ndigits) of a float: NumPy's np.round (what round() does on a NumPy float):
    x * 10**n rounded half to even, divided by 10**n (for n < 0: x / 10**-n rounded, times
    10**-n), in x's type. ndigits must be a constant."""
    a, nd = args(tr, node, 2, "round")
    a = real_arg(tr, a, node, "round")
    n = tr._static_int(node.args[1])   # a literal (-1 included, under either typing) or global
    if n is None and isinstance(nd, Val) and nd.is_const and nd.type.kind in "iub":
        n = int(nd.const)
    if n is None:
        raise tr._fail(node, "round(x, ndigits) needs a constant integer ndigits",
                       UnsupportedError)
    if a.type.kind != "f":
        raise tr._fail(node, "round() of an integer with ndigits is not supported (round a "
                       "float, or use (x // 10**k) * 10**k)", UnsupportedError)
    if abs(n) > 300:
        raise tr._fail(node, "round(): ndigits %d is out of range" % n)
    R = T.float64 if isinstance(a.type, TS.Weak) else a.type
    a = tr.cast(a, R, node)
    f = tr.cast(tr.const_val(10.0 ** abs(n), TS.WEAK_FLOAT, node), R, node)
    if n >= 0:
        y = tr.binop(operator.mul, "mul", "*", a, f, node)
        return tr.binop(operator.truediv, "truediv", "/", ir.Call(R, "cf_round", [y]), f, node)
    y = tr.binop(operator.truediv, "truediv", "/", a, f, node)
    return tr.binop(operator.mul, "mul", "*", ir.Call(R, "cf_round", [y]), f, node)


def b_pow(tr, node, name):
    if len(node.args) != 2:
        raise tr._fail(node, "pow() takes 2 arguments here (the 3-argument form is not "
                         "supported)", UnsupportedError)
    a, b = args(tr, node, 2, "pow")
    return tr.binop(pow, "pow", "**", a, b, node)

def b_divmod(tr, node, name):
    a, b = args(tr, node, 2, "divmod")
    a = tr.scalar(a, node, "an argument of divmod()")
    b = tr.scalar(b, node, "an argument of divmod()")
    sa, a = tr.ensure_simple(a)
    sb, b = tr.ensure_simple(b)
    q = tr.binop(operator.floordiv, "floordiv", "//", a, b, node)
    r = tr.binop(operator.mod, "mod", "%", a, b, node)
    parts = [s for s in (sa, sb) if s]
    setup = ir.Seq(None, parts) if parts else None
    return TupleVal([q, r], setup)

def b_int(tr, node, name):
    if tr.policy.numba and node.args:
        # Numba's int(x): an integer keeps its type; a bool or a float gives int64
        t = TS.concrete(tr.scalar(tr.expr(node.args[0]), node, "an argument of int()").type)
        return _py_cast(tr, node, name, t if t.kind in "iu" else T.int64, int)
    return _py_cast(tr, node, name, TS.WEAK_INT, int)

def b_float(tr, node, name):
    if tr.policy.numba and node.args:
        # Numba's float(x): float64 of an integer, the float type itself of a float
        t = TS.concrete(tr.scalar(tr.expr(node.args[0]), node, "an argument of float()").type)
        if t.kind in "bc":
            raise tr._fail(node, "float() of %s: Numba's float() takes a real number" % t)
        return _py_cast(tr, node, name, t if t.kind == "f" and t.bits >= 32 else T.float64,
                        float)
    return _py_cast(tr, node, name, TS.WEAK_FLOAT, float)

def b_bool(tr, node, name):
    if not node.args:
        return tr.const_val(False, TS.WEAK_BOOL, node)
    (a,) = args(tr, node, 1, "bool")
    t = tr.truthy(a, node)
    if type(t) is ir.Const:
        return tr.const_val(t.const, TS.WEAK_BOOL, node)
    return ir.Retype(TS.WEAK_BOOL, t)

def _py_cast(tr, node, name, R, pyt):
    if not node.args:
        return tr.const_val(pyt(), R, node)
    (a,) = args(tr, node, 1, name)
    a = tr.scalar(a, node, "an argument of %s()" % name)
    try:
        TS.oracle(pyt, a.type)
    except TS.OracleError as e:
        raise tr._fail(node, "%s() of %s: %s" % (name, a.type, e))
    return tr.cast(a, R, node, explicit=True)

def b_complex(tr, node, name):
    if not node.args:
        return tr.const_val(0j, TS.WEAK_COMPLEX, node)
    vals = args(tr, node, (1, 2), "complex")
    if tr.policy.numba:
        # Numba's complex(): complex64 when every argument is float32, else complex128
        ts = [TS.concrete(tr.scalar(v, node, "an argument of complex()").type) for v in vals]
        if any(t.kind == "b" for t in ts):
            raise tr._fail(node, "complex() of bool: Numba's complex() takes numbers")
        return _make_complex(tr, vals, T.complex64 if all(t == T.float32 for t in ts)
                             else T.complex128, node)
    return _make_complex(tr, vals, TS.WEAK_COMPLEX, node)

def _make_complex(tr, vals, R, node):
    if len(vals) == 1:
        a = tr.scalar(vals[0], node, "an argument of complex()")
        return tr.cast(a, R, node, explicit=True)
    a, b = [real_arg(tr, v, node, "complex") for v in vals]
    ft = T.float32 if R.bits == 64 else T.float64
    ca, cb = tr.cast(a, ft, node, explicit=True), tr.cast(b, ft, node, explicit=True)
    if ca.is_const and cb.is_const:
        return tr.const_val(complex(float(ca.const), float(cb.const)), R, node)
    return ir.Call(R, R.cname, [ca, cb])

def b_len(tr, node, name):
    (a,) = args(tr, node, 1, "len")
    if isinstance(a, TupleVal):
        return tr.const_val(len(a.items), TS.WEAK_INT, node)
    if isinstance(a, Val) and isinstance(a.type, T.Array):
        return tr.extent(a, 0)
    raise tr._fail(node, "len() of %s is not supported" % getattr(a, "type", "this"))

def b_print(tr, node, name):
    """print(values and string constants): the device's printf, formatted as Numba's CUDA
    print formats (%f for floats, integers in full, True/False), items separated by spaces.
    The output is printed by the driver when the kernel has run (at the next synchronising
    call), in no particular order between threads."""
    fmt, vals = [], []
    for a in node.args:
        if isinstance(a, ast.Constant) and isinstance(a.value, str):
            fmt.append(a.value.replace("%", "%%"))
            continue
        v = tr.scalar(tr.expr(a), a, "an argument of print()")
        t = TS.concrete(v.type)
        k = t.kind
        if k == "b":
            fmt.append("%s")
            vals.append(ir.Select(None, tr.truthy(v, a), Val(None, '"True"', simple=True),
                                  Val(None, '"False"', simple=True)))
        elif k == "i":
            fmt.append("%lld")
            vals.append(tr.cast(v, T.int64, a, explicit=True))
        elif k == "u":
            fmt.append("%llu")
            vals.append(tr.cast(v, T.uint64, a, explicit=True))
        elif k == "f":
            fmt.append("%f")
            vals.append(tr.cast(v, T.float64, a, explicit=True))
        else:
            st, sv = tr.ensure_simple(tr.cast(v, T.complex128, a, explicit=True))
            fmt.append("(%f%+fj)")
            vals.append(tr.with_setup(st, ir.Call(T.float64, "cf_real", [sv])))
            vals.append(ir.Call(T.float64, "cf_imag", [sv]))
    text = Val(None, c_string(" ".join(fmt) + "\n"), simple=True)
    return ir.Call(T.void, "printf", [text] + vals)


def b_unsupported(tr, node, name):
    raise tr.err(node, "calling %s() is not supported in kernel functions" % name,
                   UnsupportedError)

# math / cmath -----------------------------------------------------------
def _math_ct(tr, vals, node, fname):
    """Compute type of a math.* call: float32 when every typed argument is float32 (Python
    numbers adapt), else float64."""
    ct = None
    for v in vals:
        v = real_arg(tr, v, node, "math." + fname)
        t = v.type
        if isinstance(t, TS.Weak):
            continue
        ct = T.float32 if (t == T.float32 and ct in (None, T.float32)) else T.float64
    return ct or T.float64

def _numba_sig(tr, node, opname, *vals):
    """(result type, argument types...) of Numba's typing template `opname` for vals."""
    types = [TS.concrete(v.type) for v in vals]
    sig = NT.op(opname, *types)
    if sig is None:
        raise tr._fail(node, "Numba has no signature of %s for (%s)"
                       % (opname, ", ".join(str(t) for t in types)))
    return sig


_NUMBA_MATH2 = {"atan2": "math2", "hypot": "math2", "copysign": "copysign", "pow": "mathpow"}


def _numba_math(tr, kind, fname, node, shown):
    """A math.* call typed by Numba's mathdecl templates, or None where cufunc's own typing
    applies (functions Numba types elsewhere)."""
    if kind == "m1" and len(node.args) == 1 and fname in NT.MATH1:
        (x,) = args(tr, node, 1, shown)
        x = real_arg(tr, x, node, shown)
        if fname in ("floor", "ceil", "trunc"):
            R, ta = _numba_sig(tr, node, "mathint", x)
            cx = tr.cast(x, ta, node, explicit=True)
            if ta.kind in "iu":
                return tr.cast(cx, R, node, explicit=True)
            return tr.cast(ir.Call(ta, "cf_" + fname, [cx]), R, node, explicit=True)
        R, ta = _numba_sig(tr, node, "math1", x)
        cx = tr.cast(x, ta, node, explicit=True)
        # an integer argument is converted to R first, as Numba's implementations do
        return ir.Call(R, "cf_" + fname, [tr.cast(cx, R, node, explicit=True)])
    if kind == "m2" and fname in _NUMBA_MATH2:
        vals = [real_arg(tr, v, node, shown) for v in args(tr, node, 2, shown)]
        R, ta, tb = _numba_sig(tr, node, _NUMBA_MATH2[fname], *vals)
        ca = tr.cast(tr.cast(vals[0], ta, node, explicit=True), R, node, explicit=True)
        cb = tr.cast(tr.cast(vals[1], tb, node, explicit=True), R, node, explicit=True)
        return ir.Call(R, "cf_" + fname, [ca, cb])
    if kind == "mpred":
        (x,) = args(tr, node, 1, shown)
        x = real_arg(tr, x, node, shown)
        R, ta = _numba_sig(tr, node, "mathpred", x)
        if ta.kind in "iu":
            return tr.const_val(fname == "isfinite", R, node)
        return ir.Call(R, "cf_" + fname, [tr.cast(x, ta, node, explicit=True)])
    return None


def math_call(tr, kind, fname, node, shown):
    if tr.policy.numba:
        r = _numba_math(tr, kind, fname, node, shown)
        if r is not None:
            return r
    if kind == "m1":
        nargs = (1, 2) if fname == "log" else 1
        vals = args(tr, node, nargs, shown)
        ct = _math_ct(tr, vals, node, fname)
        if fname == "log" and len(vals) == 2:
            x, base = [tr.cast(v, ct, node) for v in vals]
            r = ir.Infix(ct, "/", [ir.Call(ct, "cf_log", [x]), ir.Call(ct, "cf_log", [base])])
            return tr.cast(r, TS.WEAK_FLOAT, node)
        (x,) = vals
        if fname in ("floor", "ceil", "trunc"):
            if x.type.kind in "biu":
                if (not isinstance(x.type, TS.Weak) and x.type.bits == 64
                        and fname != "trunc"):
                    # CPython converts a NumPy int64/uint64 to float first (no __floor__).
                    # (It raises for math.trunc, which has no float fallback: the trunc of
                    # an integer is the integer, exactly.)
                    x = tr.cast(x, T.float64, node)
                return tr.cast(x, TS.WEAK_INT, node, explicit=True)
            if x.is_const:
                f = tr.fold(getattr(math, fname), (x,), TS.WEAK_INT, node)
                if f is not None:
                    return f
            cx = tr.cast(x, ct, node)
            return tr.cast(ir.Call(ct, "cf_" + fname, [cx]), TS.WEAK_INT, node,
                             explicit=True)
        if x.is_const:
            f = tr.fold(getattr(math, fname), (x,), TS.WEAK_FLOAT, node)
            if f is not None:
                return f
        cx = tr.cast(x, ct, node)
        return tr.cast(ir.Call(ct, "cf_" + fname, [cx]), TS.WEAK_FLOAT, node)
    if kind == "m2":
        vals = args(tr, node, 2, shown)
        ct = _math_ct(tr, vals, node, fname)
        if all(v.is_const for v in vals):
            f = tr.fold(getattr(math, fname), tuple(vals), TS.WEAK_FLOAT, node)
            if f is not None:
                return f
        a, b = [tr.cast(v, ct, node) for v in vals]
        return tr.cast(ir.Call(ct, "cf_" + fname, [a, b]), TS.WEAK_FLOAT, node)
    if kind in ("mpred", "cpred"):
        (x,) = args(tr, node, 1, shown)
        x = real_arg(tr, x, node, shown, allow_complex=(kind == "cpred"))
        if x.type.kind in "biu":
            return tr.const_val(fname == "isfinite", TS.WEAK_BOOL, node)
        if x.is_const:
            f = tr.fold(getattr(math if kind == "mpred" else cmath, fname), (x,),
                          TS.WEAK_BOOL, node)
            if f is not None:
                return f
        return ir.Call(TS.WEAK_BOOL, "cf_" + fname, [x])
    if kind == "ldexp":
        x, e = args(tr, node, 2, shown)
        _math_ct(tr, [x], node, fname)
        ct = T.float64   # exact in double; float32 would overflow where Python does not
        e = tr.scalar(e, node, "an argument of math.ldexp()")
        if e.type.kind not in "biu":
            raise tr._fail(node, "math.ldexp() exponent must be an integer, not %s"
                             % e.type)
        cx = tr.cast(x, ct, node)
        ce = tr.cast(e, T.int64, node, explicit=True)
        return tr.cast(ir.Call(ct, "cf_ldexp", [cx, ce]), TS.WEAK_FLOAT, node)
    if kind == "frexp":
        (x,) = args(tr, node, 1, shown)
        ct = _math_ct(tr, [x], node, fname)
        cx = tr.cast(x, ct, node)
        m, e = tr.temp(ct), tr.temp("cf_int64")
        return TupleVal([tr.cast(Val(ct, m, simple=True), TS.WEAK_FLOAT, node),
                         Val(TS.WEAK_INT, e, simple=True)],
                        ir.SetTemp(ct, m, ir.Call(ct, "cf_frexp", [cx, ir.AddrOf(None, e)])))
    if kind == "modf":
        (x,) = args(tr, node, 1, shown)
        ct = _math_ct(tr, [x], node, fname)
        cx = tr.cast(x, ct, node)
        fr, ip = tr.temp(ct), tr.temp(ct)
        return TupleVal([tr.cast(Val(ct, fr, simple=True), TS.WEAK_FLOAT, node),
                         tr.cast(Val(ct, ip, simple=True), TS.WEAK_FLOAT, node)],
                        ir.SetTemp(ct, fr, ir.Call(ct, "cf_modf", [cx, ir.AddrOf(None, ip)])))
    # cmath
    if kind == "c1":
        nargs = (1, 2) if fname == "log" else 1
        vals = args(tr, node, nargs, shown)
        ct = _cmath_ct(tr, vals, node)
        if fname == "log" and len(vals) == 2:
            x, base = [tr.cast(v, ct, node) for v in vals]
            r = ir.Infix(ct, "/", [ir.Call(ct, "cf_log", [x]), ir.Call(ct, "cf_log", [base])])
            return tr.cast(r, TS.WEAK_COMPLEX, node)
        cx = tr.cast(vals[0], ct, node)
        return tr.cast(ir.Call(ct, "cf_" + fname, [cx]), TS.WEAK_COMPLEX, node)
    if kind == "phase":
        (x,) = args(tr, node, 1, shown)
        ct = _cmath_ct(tr, [x], node)
        cx = tr.cast(x, ct, node)
        rt = T.float32 if ct == T.complex64 else T.float64
        return tr.cast(ir.Call(rt, "cf_phase", [cx]), TS.WEAK_FLOAT, node)
    if kind == "polar":
        (x,) = args(tr, node, 1, shown)
        ct = _cmath_ct(tr, [x], node)
        cx = tr.cast(x, ct, node)
        rt = T.float32 if ct == T.complex64 else T.float64
        st, sx = tr.ensure_simple(cx)
        r = tr.cast(ir.Call(rt, "cf_abs", [sx]), TS.WEAK_FLOAT, node)
        p = tr.cast(ir.Call(rt, "cf_phase", [sx]), TS.WEAK_FLOAT, node)
        return TupleVal([r, p], st)
    if kind == "rect":
        r, phi = args(tr, node, 2, shown)
        ct = _math_ct(tr, [r, phi], node, fname)
        cr, cp = tr.cast(r, ct, node), tr.cast(phi, ct, node)
        cty = T.complex64 if ct == T.float32 else T.complex128
        return tr.cast(ir.Call(cty, "cf_rect", [cr, cp]), TS.WEAK_COMPLEX, node)
    raise tr.err(node, "internal: math kind %s" % kind)

def _cmath_ct(tr, vals, node):
    single = True
    for v in vals:
        v = tr.scalar(v, node, "a cmath argument")
        t = v.type
        if isinstance(t, TS.Weak):
            continue
        if t not in (T.float32, T.complex64):
            single = False
    if all(isinstance(tr.scalar(v, node, "x").type, TS.Weak) for v in vals):
        single = False
    return T.complex64 if single else T.complex128

# numpy functions ----------------------------------------------------------
def np_call(tr, obj, entry, node, shown):
    tag, n, npname = entry
    vals = [tr.scalar(v, node, "an argument of %s()" % shown)
            for v in args(tr, node, n, shown)]
    try:
        if tr.policy.numba:
            # Numba resolves NumPy's loops for its own (strong) types; it has no float16 loops
            R = TS.oracle(obj, *[TS.concrete(v.type) for v in vals])
            if R == T.float16:
                R = T.float32
        else:
            R = TS.oracle(obj, *[v.type for v in vals])
    except TS.OracleError as e:
        raise tr._fail(node, "%s() does not accept %s (%s)"
                         % (shown, ", ".join(str(v.type) for v in vals), e))
    if isinstance(R, T.Tuple):
        for t in R.types:
            tr.check_scalar_type(t, node)
    else:
        tr.check_scalar_type(R, node)
    if tag.startswith("@"):
        op = tag[1:]
        if op in _BIN_NAMES:
            r = tr.binop(obj, op, _BIN_NAMES[op], vals[0], vals[1], node, rtype=R)
            if op == "pow" and R.kind == "f" and type(r) is ir.Call and r.fn == "cf_pow":
                # numpy.power, not **: its float loops take sqrt for an exponent of 0.5
                r = ir.Call(r.type, "cf_np_power", r.args)
            return r
        if op == "neg":
            return tr.unop(obj, "-", vals[0], node, rtype=R)
        if op == "pos":
            return tr.cast(vals[0], R, node)
        (x,) = vals[:1]
        if op in ("floor", "ceil", "trunc", "round"):
            if R.kind in "biu":
                return tr.cast(x, R, node)
            if R.kind == "c":
                raise tr._fail(node, "%s() of complex numbers is not supported" % shown,
                                 UnsupportedError)
            cx = tr.cast(x, R, node)
            return ir.Call(R, "cf_" + op, [cx])
        if op == "abs":
            return unop_abs(tr, x, R, node)
        if op in ("isnan", "isinf", "isfinite"):
            if x.type.kind in "biu":
                return tr.const_val(op == "isfinite", R, node)
            return tr.cast(ir.Call(T.bool_, "cf_" + op, [x]), R, node)
        if op == "conj":
            if x.type.kind == "c":
                return tr.cast(ir.Call(x.type, "cf_conj", [x]), R, node)
            return tr.cast(x, R, node)
        if op in ("real", "imag"):
            return tr.cast(tr.real_imag(x, op, node), R, node)
        if op == "square":
            return tr.binop(np.multiply, "mul", "*", x, x, node, rtype=R) \
                if x.simple else _square(tr, x, R, node)
        if op == "ldexp":
            cx = tr.cast(vals[0], R, node)
            ce = tr.cast(vals[1], T.int64, node, explicit=True)
            return ir.Call(R, "cf_ldexp", [cx, ce])
        if op == "frexp":
            ct = R.types[0]
            cx = tr.cast(x, ct, node)
            m, e = tr.temp(ct), tr.temp("cf_int64")
            return TupleVal([Val(ct, m, simple=True),
                             tr.cast(Val(T.int64, e, simple=True), R.types[1], node)],
                            ir.SetTemp(ct, m, ir.Call(ct, "cf_frexp", [cx, ir.AddrOf(None, e)])))
        if op == "modf":
            ct = R.types[0]
            cx = tr.cast(x, ct, node)
            fr, ip = tr.temp(ct), tr.temp(ct)
            return TupleVal([Val(ct, fr, simple=True), Val(ct, ip, simple=True)],
                            ir.SetTemp(ct, fr, ir.Call(ct, "cf_modf", [cx, ir.AddrOf(None, ip)])))
        raise tr.err(node, "internal: numpy op %s" % op)
    if R.kind == "c" and tag not in _COMPLEX_FUNCS:
        raise tr._fail(node, "%s() of complex numbers is not supported" % shown,
                         UnsupportedError)
    if R.kind not in "fc":
        raise tr._fail(node, "%s() gives %s here, which is not supported" % (shown, R),
                         UnsupportedError)
    if tag == "fmod" and R.kind != "f":
        raise tr._fail(node, "np.fmod() of integers is not supported", UnsupportedError)
    cv = [tr.cast(v, R, node) for v in vals]
    return ir.Call(R, "cf_" + tag, cv)

def _square(tr, x, R, node):
    st, sx = tr.ensure_simple(x)
    return tr.with_setup(st, tr.binop(np.multiply, "mul", "*", sx, sx, node, rtype=R))

# casts ----------------------------------------------------------------------
def type_call(tr, target, node, shown):
    if isinstance(target, T.Array) or isinstance(target, T.Void):
        raise tr.err(node, "%s cannot be called in a kernel function" % shown,
                       UnsupportedError)
    tr.check_scalar_type(target, node)
    if not node.args:
        return tr.const_val(target.dtype.type(0), target, node)
    vals = args(tr, node, (1, 2) if target.kind == "c" else 1, shown)
    if target.kind == "c":
        return _make_complex(tr, vals, target, node)
    (a,) = vals
    a = tr.scalar(a, node, "an argument of %s()" % shown)
    return tr.cast(a, target, node, explicit=True)

# local arrays -------------------------------------------------------------
def local_array(tr, node):
    args = list(node.args)
    kw = {k.arg: k.value for k in node.keywords}
    if set(kw) - {"shape", "dtype"} or len(args) + len(kw) != 2:
        raise tr.err(node, "cuda.local.array(shape, dtype) takes exactly a shape and a "
                       "dtype")
    shape_node = args[0] if args else kw.get("shape")
    dtype_node = args[1] if len(args) > 1 else kw.get("dtype")
    if shape_node is None or dtype_node is None:
        raise tr.err(node, "cuda.local.array(shape, dtype) takes exactly a shape and a "
                       "dtype")
    sv = tr.expr(shape_node)
    if isinstance(sv, TupleVal):
        items = sv.items
    else:
        items = [sv]
    shape = []
    for it in items:
        if not (isinstance(it, Val) and it.is_const and it.type.kind in "iu"):
            raise tr.err(shape_node, "the shape of a local array must be a constant "
                           "integer or tuple of constant integers")
        if int(it.const) < 0:
            raise tr.err(shape_node, "negative dimension in a local array shape")
        if int(it.const) >= 2 ** 63:
            raise tr.err(shape_node, int_range_message(int(it.const), fits(it.const),
                                                          "a local array extent"))
        shape.append(int(it.const))
    if not shape:
        raise tr.err(shape_node, "a local array needs at least one dimension",
                       UnsupportedError)
    dt = tr.static(dtype_node)
    target = _cast_target(dt.obj) if dt is not None else None
    if target is None:
        try:
            target = T.to_type(dt.obj) if dt is not None else None
        except TypeError:
            target = None
    if not isinstance(target, T.Scalar):
        raise tr.err(dtype_node, "the dtype of a local array must be a scalar type such "
                       "as float32 or np.float32")
    tr.check_scalar_type(target, dtype_node)
    n = 1
    for d in shape:
        n *= d
    if n * target.itemsize > _LOCAL_ARRAY_LIMIT:
        raise tr.err(node, "a local array of %d bytes is larger than the %d bytes of local "
                       "memory a CUDA thread can have" % (n * target.itemsize,
                                                          _LOCAL_ARRAY_LIMIT),
                       UnsupportedError)
    storage = "cf_loc%d" % len(tr.local_storage)
    tr.local_storage.append(ir.Declare(target.cname, storage, max(n, 1)))
    at = T.Array(target, len(shape), "C")
    return tr.ref_val(at, storage, shape, node)

# device functions ----------------------------------------------------------
def device_call(tr, pyfunc, signatures, node, shown):
    vals = []
    for a, n in zip(args(tr, node, len(node.args), shown), node.args):
        if isinstance(a, StaticVal):
            raise tr._fail(n, "%s cannot be passed to a function" % a.name,
                             UnsupportedError)
        if isinstance(a, TupleVal):
            raise tr._fail(n, "tuples cannot be passed to device functions",
                             UnsupportedError)
        vals.append(a)
    types = [v.type for v in vals]
    ret = None
    if signatures:
        sig = _choose_signature(signatures, types)
        if sig is None:
            raise tr._fail(node, "%s has no signature accepting (%s)"
                             % (shown, ", ".join(str(t) for t in types)))
        ret, argt = sig
        if len(argt) != len(vals):
            raise tr._fail(node, "%s takes %d argument(s), %d given"
                             % (shown, len(argt), len(vals)))
        vals = [tr.cast(v, t, node) for v, t in zip(vals, argt)]
        types = list(argt)
    return _inline(tr, pyfunc, vals, types, ret, node)


def _inline(tr, pyfunc, vals, types, ret, node):
    """The call of pyfunc translated for these argument types (and return type, or None to
    infer it) on the values vals: a Val, or a TupleVal for a function returning a tuple."""
    if pyfunc in tr.unit.stack:
        chain = " -> ".join(f.__qualname__ for f in tr.unit.stack + [pyfunc])
        raise tr._fail(node, "recursion is not supported (%s)" % chain, UnsupportedError)
    try:
        res = tr.translate_callee(pyfunc, types, ret)
    except (TypingError, UnsupportedError) as e:
        if not tr.strict:
            raise _Bottom()
        err = type(e)("%s\n(in %s, called from:)\n%s"
                      % (e, pyfunc.__qualname__, tr.src.location(node)))
        # the construct's own file and line (in the called function), as every error has
        err.cufunc_location = getattr(e, "cufunc_location", None) or (
            tr.src.filename, tr.src.file_line(node))
        raise err from None
    if res.name not in tr.deps:
        tr.deps.append(res.name)
    cargs = list(vals)
    for obj, at, cn in res.garrays:
        mine = None
        for o2, at2, cn2 in tr.garrays:
            if o2 is obj:
                mine = cn2
        if mine is None:
            mine = "cf_garr%d_%s" % (len(tr.garrays), cn.split("_", 2)[-1])
            tr.garrays.append((obj, at, mine))
        cargs.append(Val(at, mine, simple=True))
    rt = res.ret_type
    c = ir.Call(rt, res.name, cargs)
    if isinstance(rt, T.Void):
        return c
    if isinstance(rt, T.Tuple):
        tmp = tr.temp(tuple_struct_name(TS.concrete(rt)))
        tr.struct(TS.concrete(rt))
        return TupleVal([ir.Field(t, tmp, i, simple=True)
                         for i, t in enumerate(rt.types)], ir.SetTemp(None, tmp, c))
    return c



# cufunc ufuncs and gufuncs called in a body -------------------------------------------------
def _cufunc_kind(obj):
    """'ufunc' or 'gufunc' for a cufunc UFunc or GUFunc (vectorize, guvectorize), else None.
    The language never imports cufunc._core: such an object exists only once it is loaded."""
    core = sys.modules.get("cufunc._core")
    if core is None:
        return None
    if isinstance(obj, core.UFunc):
        return "ufunc"
    if isinstance(obj, core.GUFunc):
        return "gufunc"
    return None


def _numpy_twin(obj):
    """cufunc's GPU twin of a NumPy ufunc that the table of NumPy functions does not name
    (np.maximum, np.sign, np.cbrt, ...), called in a body like a cufunc ufunc: NumPy's loop
    choice, the twin's body inlined. None for anything else, or before cufunc._core is loaded
    (the language never imports it; the twins need it)."""
    if not isinstance(obj, np.ufunc) or sys.modules.get("cufunc._core") is None:
        return None
    import importlib
    twins = importlib.import_module("cufunc._twins")
    if not twins.has_twin(obj):
        return None
    try:
        return twins.twin(obj)
    except TypeError:
        return None


def _scalar_layout(layout):
    return re.fullmatch(r"\(\)(,\(\))*->\(\)(,\(\))*", layout.replace(" ", "")) is not None


_WEAK_PYTYPE = {"i": int, "f": float, "c": complex}


def _ufunc_loop(tr, obj, kind, vals, node):
    """The loop a host call of obj on values of these types takes, by cufunc's own rule
    (cufunc._loops, which asks the C resolver: cf_loops_find and cf_loops_nep50): (values,
    input types, output types or None where the loop is inferred from the body, per-argument
    ndim: 1 where the Python function takes a '()' argument as a 1-element array). A ufunc made
    without signatures takes the types its host call compiles a new loop for."""
    nin, name = obj.nin, obj.__name__
    dts, weak = [], []
    for v in vals:
        # a Python int/float/complex is weak (NEP 50); a Python bool is a strong bool, as the
        # host call classifies it
        weak.append(isinstance(v.type, TS.Weak) and v.type.kind != "b")
        dts.append(np.dtype(TS.concrete(v.type).dtype))
    weak = _loops.nep50(dts, weak)
    loops = [tuple(np.dtype(t) for t in lp[0]) for lp in obj.loops]
    dynamic = obj.compiler is not None
    i = _loops.find(loops, nin, dts, weak, 1 if dynamic else 2)
    if i < 0 and kind == "gufunc" and not dynamic:
        # every argument is a scalar here: a gufunc's host call then has Numba's habit
        conv = _loops.gufunc_scalar_fallback(loops, nin, dts, weak)
        if conv is not None:
            vals = [v if d == c else tr.cast(v, T.from_dtype(c), node, explicit=True)
                    for v, d, c in zip(vals, dts, conv)]
            dts = list(conv)
            i = _loops.find(loops, nin, dts, weak, 2)
    if i >= 0:
        lp = loops[i]
        ndim = list(obj.loops[i][1]) if kind == "gufunc" else [0] * nin
        return (vals, [T.from_dtype(d) for d in lp[:nin]],
                [T.from_dtype(d) for d in lp[nin:]], ndim)
    if not dynamic:
        raise tr._fail(node, _loops.no_match_message(kind, name, loops, nin, obj.nout, dts,
                                                     weak))
    strong = [d for d, w in zip(dts, weak) if not w]
    ins = [_loops.weak_arg_type(_WEAK_PYTYPE[d.kind], strong) if w else d
           for d, w in zip(dts, weak)]
    outs = None
    if kind == "gufunc" and obj.py_func.__code__.co_argcount == nin + obj.nout:
        # guvectorize's compiler: outputs of NumPy's result type of the inputs
        outs = [T.from_dtype(np.result_type(*ins))] * obj.nout
    return (vals, [T.from_dtype(d) for d in ins], outs,
            [0] * nin + ([1] * obj.nout if outs is not None else []))


def _local1(tr, t, node):
    """A 1-element local array of type t: (its storage's C name, the array value, typed as a
    loop's '()' parameter: any layout)."""
    storage = "cf_loc%d" % len(tr.local_storage)
    tr.local_storage.append(ir.Declare(t.cname, storage, 1))
    ref = tr.ref_val(T.Array(t, 1, "C"), storage, (1,), node)
    return storage, tr.cast(ref, T.Array(t, 1), node)


def _ufunc_results(tr, r, nout, name, node):
    """The call's value as the host call gives it: nout typed (strong) values, a tuple for
    several."""
    items = r.items if isinstance(r, TupleVal) else [r]
    # (a loop inferred from the body, for a ufunc without signatures, may return anything)
    if len(items) != nout or not all(isinstance(x.type, T.Scalar) for x in items):
        raise tr._fail(node, "the ufunc '%s' returns %s here, but it has %d scalar output%s"
                       % (name, getattr(r, "type", "this"), nout, "" if nout == 1 else "s"))
    items = [tr.cast(x, TS.concrete(x.type), node) for x in items]
    if isinstance(r, TupleVal):
        return TupleVal(items, r.setup)
    return items[0]


def ufunc_call(tr, obj, kind, node):
    """A cufunc ufunc (or gufunc with scalar core dimensions) called in a body means the call
    CPython makes on NumPy scalars: the loop the host call takes (_ufunc_loop), the arguments
    cast to its input types, the loop's Python function on them, the results in the loop's
    output types (a tuple for several outputs)."""
    name, nin, nout = obj.__name__, obj.nin, obj.nout
    pyfunc = getattr(obj, "py_func", None)
    if not isinstance(pyfunc, pytypes.FunctionType):
        raise tr.err(node, "%s '%s' has no Python function (its loops are CUDA C), so a kernel "
                     "body cannot call it" % (kind, name), UnsupportedError)
    if kind == "gufunc" and not _scalar_layout(obj.signature):
        raise tr.err(node, "called in a kernel body, a gufunc needs scalar core dimensions; "
                     "%s has %s" % (name, obj.signature), UnsupportedError)
    if len(node.args) != nin:
        raise tr.err(node, "%s '%s' takes %d argument%s here, %d given (in a kernel body a "
                     "ufunc returns its outputs)" % (kind, name, nin, "" if nin == 1 else "s",
                                                     len(node.args)))
    vals = [tr.scalar(tr.expr(a), a, "an argument of %s" % name) for a in node.args]
    vals, in_t, out_t, ndim = _ufunc_loop(tr, obj, kind, vals, node)
    vals = [tr.cast(v, t, node) for v, t in zip(vals, in_t)]
    void_form = kind == "gufunc" and pyfunc.__code__.co_argcount == nin + nout
    setup, params, ptypes, outs = [], [], [], []
    for v, t, nd in zip(vals, in_t, ndim):
        if nd:   # an old-style '()' input declared as a 1-element array
            storage, arr = _local1(tr, t, node)
            setup.append(ir.Assign(None, ir.FirstItem(t, storage), v))
            params.append(arr)
            ptypes.append(arr.type)
        else:
            params.append(v)
            ptypes.append(t)
    ret = None
    if void_form:
        for t in out_t:
            storage, arr = _local1(tr, t, node)
            params.append(arr)
            ptypes.append(arr.type)
            outs.append(ir.FirstItem(t, storage, simple=True))
    elif out_t is not None:
        ret = out_t[0] if nout == 1 else T.Tuple(out_t)
    r = _inline(tr, pyfunc, params, ptypes, ret, node)
    if void_form:
        setup.append(r)
        r = TupleVal(outs, ir.Seq(None, setup)) if nout > 1 else \
            tr.with_setup(ir.Seq(None, setup), outs[0])
    else:
        r = _ufunc_results(tr, r, nout, name, node)
        if setup:
            if isinstance(r, TupleVal):
                parts = setup + ([r.setup] if r.setup else [])
                r = TupleVal(r.items, ir.Seq(None, parts))
            else:
                r = tr.with_setup(ir.Seq(None, setup), r)
    return r



_BUILTIN_HANDLERS = {
    id(abs): b_abs, id(min): b_minmax, id(max): b_minmax, id(round): b_round,
    id(pow): b_pow, id(divmod): b_divmod, id(int): b_int, id(float): b_float,
    id(bool): b_bool, id(complex): b_complex, id(len): b_len,
    id(print): b_print, id(sum): b_unsupported, id(map): b_unsupported,
    id(zip): b_unsupported, id(enumerate): b_unsupported, id(sorted): b_unsupported,
    id(iter): b_unsupported, id(next): b_unsupported, id(isinstance): b_unsupported,
    id(getattr): b_unsupported, id(list): b_unsupported, id(tuple): b_unsupported,
    id(dict): b_unsupported, id(set): b_unsupported, id(str): b_unsupported,
    id(any): b_unsupported, id(all): b_unsupported, id(hash): b_unsupported,
    id(id): b_unsupported, id(type): b_unsupported, id(open): b_unsupported,
}

_BIN_NAMES = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//",
              "mod": "%", "pow": "**", "lshift": "<<", "rshift": ">>", "and": "&",
              "or": "|", "xor": "^"}


def _cast_target(obj):
    """The scalar type a callable names as a cast (np.float32, cufunc.float32, numba types)."""
    if isinstance(obj, (T.Scalar, T.Array, T.Void)):
        return obj
    if isinstance(obj, type) and issubclass(obj, np.generic):
        try:
            return T.from_dtype(obj)
        except TypeError:
            return None
    mod = type(obj).__module__ or ""
    if mod.startswith("numba"):
        try:
            return T.to_type(obj)
        except TypeError:
            return None
    return None


def _local_array_objects():
    from . import device
    return [device.local.array] + _numba_objects()


def _const_array_objects():
    from . import device
    return [device.const.array_like] + _numba_objects("const", "array_like")


def const_array(tr, node):
    """cuda.const.array_like(ARY): ARY, a global NumPy array, is a constant table already."""
    if node.keywords or len(node.args) != 1:
        raise tr.err(node, "cuda.const.array_like(ary) takes exactly one array", UnsupportedError)
    v = tr.expr(node.args[0])
    if not (isinstance(v, Val) and isinstance(v.type, T.Array) and v.type.readonly):
        raise tr.err(node, "cuda.const.array_like needs a global NumPy array (captured as a "
                     "constant table)", UnsupportedError)
    return v
