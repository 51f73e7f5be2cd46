"""typing="numba": each of Numba's typing rules, against Numba itself; the same bodies under
typing="numpy" keep NumPy's meaning (CPython on NumPy scalars, docs/language.md).

- the casting graph, the unification and every operator's signature choice
  (cufunc/lang/numba_typing.py) against Numba's typing context, for every pair of types;
- bodies, one per rule (literals, widening, division, powers, builtins, math, returns to unify,
  variables, the documented examples of docs/typing.md), compiled by Numba (njit with the NumPy
  error model of its vectorize) and by cufunc: the same return type and the same results bit for
  bit; and the same bodies under typing="numpy" against CPython on NumPy scalars.
"""

import itertools
import math
import operator

import numpy as np
import pytest

import lang_harness as H
import numba_bodies as NB

numba = NB.import_numba()
if numba is None:
    pytest.skip("numba cannot be imported (pip install '.[test]' installs it)",
                allow_module_level=True)

import cufunc.lang as L                                  # noqa: E402
import cufunc.types as T                                 # noqa: E402
from cufunc.errors import TypingError                    # noqa: E402
from cufunc.lang import numba_typing as NT               # noqa: E402


def _nb(t):
    return numba.types.boolean if t.kind == "b" else getattr(numba.types, t.name)


def _ctx():
    from numba.core.registry import cpu_target
    ctx = cpu_target.typing_context
    ctx.refresh()
    return ctx


def test_casting_graph_and_unification_match_numba():
    ctx = _ctx()
    bad = []
    for a, b in itertools.product(NT.NUMBERS, NT.NUMBERS):
        conv = ctx.can_convert(_nb(a), _nb(b))
        mine = NT.can_convert(a, b)
        if (conv is None) != (mine is None) or (conv is not None and int(conv) != mine):
            bad.append("convert %s -> %s: Numba %s, cufunc %s" % (a, b, conv, mine))
        u = ctx.unify_pairs(_nb(a), _nb(b))
        mu = NT.unify(a, b)
        if (u is None) != (mu is None) or (u is not None and u != _nb(mu)):
            bad.append("unify %s, %s: Numba %s, cufunc %s" % (a, b, u, mu))
    assert not bad, "\n".join(bad[:20])


_OPS = [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
        ("truediv", operator.truediv), ("floordiv", operator.floordiv), ("mod", operator.mod),
        ("pow", operator.pow), ("lshift", operator.lshift), ("rshift", operator.rshift),
        ("and", operator.and_), ("or", operator.or_), ("xor", operator.xor),
        ("ordered", operator.lt), ("unordered", operator.eq), ("divmod", divmod),
        ("math2", math.atan2), ("math2", math.hypot), ("copysign", math.copysign),
        ("mathpow", math.pow)]
_UNARY = [("neg", operator.neg), ("pos", operator.pos), ("invert", operator.invert),
          ("abs", abs), ("round", round), ("math1", math.sqrt), ("math1", math.exp),
          ("mathint", math.floor), ("mathpred", math.isnan)]
_TYPES = [t for t in NT.NUMBERS if t != T.float16]


def _numba_sig(ctx, fn, args):
    try:
        sig = ctx.resolve_function_type(fn, tuple(_nb(t) for t in args), {})
    except Exception:
        return None
    return sig


def _same(sig, mine):
    if sig is None or mine is None:
        return sig is None and mine is None
    ret = sig.return_type
    if isinstance(ret, numba.types.BaseTuple):
        ret = ret.types[0]
    return ret == _nb(mine[0]) and all(a == _nb(b) for a, b in zip(sig.args, mine[1:]))


@pytest.mark.parametrize("name,fn", _OPS, ids=[n + "-" + getattr(f, "__name__", "")
                                               for n, f in _OPS])
def test_binary_signatures_match_numba(name, fn):
    ctx = _ctx()
    bad = []
    for a, b in itertools.product(_TYPES, _TYPES):
        sig = _numba_sig(ctx, fn, (a, b))
        mine = NT.op(name, a, b)
        if not _same(sig, mine):
            bad.append("%s(%s, %s): Numba %s, cufunc %s" % (name, a, b, sig, mine))
    assert not bad, "\n".join(bad[:20])


@pytest.mark.parametrize("name,fn", _UNARY, ids=[n + "-" + f.__name__ for n, f in _UNARY])
def test_unary_signatures_match_numba(name, fn):
    ctx = _ctx()
    bad = []
    for a in _TYPES:
        sig = _numba_sig(ctx, fn, (a,))
        mine = NT.op(name, a)
        if not _same(sig, mine):
            bad.append("%s(%s): Numba %s, cufunc %s" % (name, a, sig, mine))
    assert not bad, "\n".join(bad[:20])


def test_unknown_typing_is_refused():
    with pytest.raises(ValueError, match="typing"):
        L.translate(item10, ["uint8", "uint16", "uint8"], "uint16", typing="Numba")


# ---- bodies, one or more per rule ---------------------------------------------------------


def item9(values, limit):            # docs/typing.md: a signature without a return type
    if values > limit:
        return values
    return 0.0


def item10(a, b, c):                 # integer operations widen to int64
    return (a - c) * b


def item11(x, y):                    # a float64 accumulator over float32 values
    temp = 0.
    for i in range(3):
        temp += x
        temp += y
    return temp


def lit_int(a, b):
    return a + 1


def lit_float(a, b):
    return a * 0.5 + b


def mixed(a, b):
    return a + b


def true_div(a, b):
    return a / b


def floor_div(a, b):
    return a // b + a % b


def power_lit(a, b):
    return a ** 3 + b ** 2


def power_neg(a, b):
    return a ** -2


def neg(a, b):
    return -a + ~b


def bools(a, b):
    return (a + b) - (a & b)


def compare(a, b):
    return (a < b) + (a == b) * 2


def builtins_(a, b):
    return abs(a) + min(a, b) - max(a, b, 1) + round(a)


def casts(a, b):
    return int(a) + float(b)


def maths(a, b):
    return math.sqrt(abs(a)) + math.floor(b) + math.atan2(a, 1)


def returns(a, b):
    if a > b:
        return a
    if b > 3:
        return b
    return 1


def logic(a, b):
    return (a and b) or 2


def branches(a, b):
    v = 0
    if a > 1:
        v = a
    else:
        v = 2.5
    return v


def _inputs(argt, n=24, seed=5):
    return NB.inputs(argt, n, seed)


# (function, argument types, declared return type or None)
RULES = [
    (item9, ["float32", "float32"], None),
    (item10, ["uint8", "uint16", "uint8"], "uint16"),
    (item11, ["float32", "float32"], None),
    (lit_int, ["int8", "int8"], None), (lit_int, ["uint64", "int8"], None),
    (lit_int, ["float32", "int8"], None),
    (lit_float, ["float32", "float32"], None), (lit_float, ["int16", "float32"], None),
    (mixed, ["int32", "float32"], None), (mixed, ["int16", "float32"], None),
    (mixed, ["int64", "uint64"], None), (mixed, ["uint8", "uint8"], None),
    (mixed, ["bool", "bool"], None), (mixed, ["int8", "uint8"], None),
    (true_div, ["int8", "int8"], None), (true_div, ["float32", "int16"], None),
    (true_div, ["bool", "bool"], None),
    (floor_div, ["int8", "int8"], None), (floor_div, ["float32", "float32"], None),
    (floor_div, ["uint16", "int32"], None),
    (power_lit, ["int8", "int8"], None), (power_lit, ["float32", "float32"], None),
    (power_lit, ["uint8", "uint8"], None), (power_neg, ["float32", "int8"], None),
    (power_neg, ["int32", "int8"], None),
    (neg, ["uint8", "uint8"], None), (neg, ["int8", "int8"], None),
    (neg, ["bool", "bool"], None),
    (bools, ["bool", "bool"], None), (bools, ["bool", "int8"], None),
    (compare, ["int64", "uint64"], None), (compare, ["float32", "int32"], None),
    (builtins_, ["int8", "int8"], None), (builtins_, ["float32", "int16"], None),
    (builtins_, ["int8", "uint8"], None),
    (casts, ["int16", "float32"], None), (casts, ["float32", "uint8"], None),
    (maths, ["float32", "float32"], None), (maths, ["int8", "float64"], None),
    (returns, ["int8", "uint8"], None), (returns, ["float32", "int8"], None),
    (logic, ["int8", "float32"], None), (logic, ["float32", "float32"], None),
    (branches, ["int8", "int8"], None), (branches, ["float32", "float32"], None),
]


def _numba_results(fn, argt, ret, ins):
    sig = tuple(getattr(numba.types, t) if t != "bool" else numba.types.boolean for t in argt)
    if ret is not None:
        sig = getattr(numba.types, ret)(*sig)
    d = numba.njit(sig, error_model="numpy")(fn)
    rt = str(numba.types.unliteral(d.nopython_signatures[0].return_type))
    vals = []
    n = len(ins[0])
    for i in range(n):
        try:
            vals.append(d(*[c[i] for c in ins]))
        except ZeroDivisionError:   # 0 ** -2 raises on Numba's CPU target; not compared
            vals.append(None)
    return rt, vals


def test_rules_give_numbas_types_and_results():
    lang, _ = H.import_cufunc()
    cases = []
    for fn, argt, ret in RULES:
        ins = _inputs(argt)
        c = H.Case(fn, argt, ret, inputs=ins, typing="numba",
                   label="%s(%s)" % (fn.__name__, ", ".join(argt)))
        c.numba = _numba_results(fn, argt, ret, ins)
        cases.append(c)
    out = NB.host_results(cases, lang)
    bad = []
    for c in cases:
        if c.error is not None:
            bad.append("%s: %s" % (c.label, c.error[:400]))
            continue
        rt, vals = c.numba
        mine_t, mine = out[id(c)]
        if mine_t != rt:
            bad.append("%s: return type %s, Numba %s" % (c.label, mine_t, rt))
            continue
        for i, v in enumerate(vals):
            if v is not None and not H.exact_equal(np.array([v], dtype=rt), mine[i:i + 1])[0]:
                bad.append("%s at %s: cufunc %r, Numba %r" % (
                    c.label, [x[i] for x in c.inputs], mine[i], v))
                break
    assert not bad, "\n".join(bad)


NUMPY_TYPES = {
    # the documented examples keep NumPy's meaning under typing="numpy"
    ("item9", ("float32", "float32")): "float32",
    ("item11", ("float32", "float32")): "float32",
    ("lit_int", ("int8", "int8")): "int8",
    ("lit_float", ("float32", "float32")): "float32",
    ("mixed", ("uint8", "uint8")): "uint8",
}


def test_same_bodies_keep_numpy_meaning():
    cases = []
    for fn, argt, ret in RULES:
        if fn in (power_neg, neg, bools, casts) or "bool" in argt or (
                fn is builtins_ and argt[0] != argt[1]) or fn is maths:
            # NumPy refuses or raises on some of these inputs (docs/language.md departures), and
            # CPython's min/max of mixed NumPy scalars return one of them unconverted; math
            # functions of float32 use the float32 function (test_lang_translate.py's ulp bounds)
            continue
        c = H.Case(fn, argt, ret, inputs=_inputs(argt), label=fn.__name__)
        cases.append(c)
    failures = H.run_cases(cases, nvrtc=False)
    assert not failures, "\n\n".join(failures[:5])
    for (name, argt), want in NUMPY_TYPES.items():
        fn = globals()[name]
        assert str(L.translate(fn, list(argt)).return_type) == want


def test_item10_values():
    """uint16(uint8, uint16, uint8) with (a - c) * b: a - c is int64 under Numba's rules."""
    a = np.array([1, 200, 5], np.uint8)
    b = np.array([3, 2, 1000], np.uint16)
    c = np.array([2, 100, 9], np.uint8)
    case = H.Case(item10, ["uint8", "uint16", "uint8"], "uint16", inputs=[a, b, c],
                  typing="numba")
    (_, got), = NB.host_results([case], H.import_cufunc()[0]).values()
    want = ((a.astype(np.int64) - c) * b).astype(np.uint16)     # Numba: int64, then uint16
    assert got.tolist() == want.tolist()
    case = H.Case(item10, ["uint8", "uint16", "uint8"], "uint16", inputs=[a, b, c])
    (_, got), = NB.host_results([case], H.import_cufunc()[0]).values()
    with np.errstate(all="ignore"):
        numpy_meaning = ((a - c) * b).astype(np.uint16)         # uint8 wraps at 256
    assert got.tolist() == numpy_meaning.tolist() and got.tolist() != want.tolist()


def accumulate(x):
    temp = 0.
    for i in range(x.shape[0]):
        temp += x[i]
    return temp


def test_item11_accumulator_type_over_an_array():
    f32 = T.float32[:]
    assert L.translate(accumulate, [f32], typing="numba").return_type == T.float64
    assert L.translate(accumulate, [f32]).return_type == T.float32


def helper_dev(x):
    return x + 1


def calls_helper(a):
    return helper_dev(a)


def test_called_functions_take_the_callers_typing():
    assert L.translate(calls_helper, ["int8"], typing="numba").return_type == T.int64
    assert L.translate(calls_helper, ["int8"]).return_type == T.int8


def bad_float_of_bool(a):
    return float(a)


def test_numba_refusals_are_typing_errors():
    # Numba's float() takes numbers only (not bool); NumPy's float(np.True_) is 1.0
    with pytest.raises(TypingError):
        L.translate(bad_float_of_bool, ["bool"], typing="numba")
    assert L.translate(bad_float_of_bool, ["bool"]).return_type == T.float64
