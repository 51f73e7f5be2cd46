"""A cufunc ufunc called in a kernel body means the ufunc.

In CPython on NumPy scalars, ``hyp(x, 2.0)`` inside a body is a ufunc call: the loop is chosen
over the ufunc's declared loops (in order; exact match first, then the first loop every input
reaches by "safe" casting; NEP 50: a Python int/float/complex is weak and takes the loop's type
where it fits its kind), the inputs are cast to the loop's input types, the loop's body runs on
those, and the result has the loop's output type(s). The translated body must mean the same.

The oracle: the same body run by CPython with the inner ufunc replaced by ``emulate(uf)``, a
Python function that applies that rule (written here on its own, not with cufunc._loops), casts
the arguments with NumPy, calls the ufunc's Python function and casts the result to the loop's
output type. The translated bodies run on the host through g++ (lang_harness.run_cases). Each
case also names its expected result dtype, checked by hand, which both the oracle and the
translation must give. cufunc._loops (the C rule asked through cufunc._core, used by the translator) is
checked against NumPy's own resolution on NumPy's loop tables and against the host call's
resolution (``UFunc.kernel_source`` resolves as a call does, without a GPU). GPU tests run the
outer ufuncs on device arrays."""

import math
import re

import numpy as np
import pytest

import lang_harness as H
from cufunc import cuda, guvectorize, vectorize
from cufunc import _core, _loops
from cufunc import types as T
from cufunc.errors import TypingError, UnsupportedError
from cufunc.lang import translate

THIS_FILE = __file__

# ---- the inner ufuncs ---------------------------------------------------------------------------


def _absdiff(a, b):
    # a Python float: inlined as a plain function a float32 call gave float64
    return math.fabs(a - b)


def _lin(a, b):
    return a * 3 + b


def _cmul(a, b):
    return a * b + 1


def _divmod2(a, b):
    return a // b, a % b


def _sumdiff(a, b):
    return a + b, a - b


def _lazy_absdiff(a, b):
    return math.fabs(a - b)


def _lazy_lin(a, b):
    return a * 3 + b


hyp = vectorize(["float32(float32, float32)", "float64(float64, float64)"])(_absdiff)
iadd = vectorize(["int8(int8, int8)", "int64(int64, int64)", "float64(float64, float64)"])(_lin)
float_first = vectorize(["float64(float64, float64)", "int64(int64, int64)"])(_lin)
int_first = vectorize(["int64(int64, int64)", "float64(float64, float64)"])(_lin)
cmul = vectorize(["complex64(complex64, complex64)", "complex128(complex128, complex128)"])(_cmul)
u8add = vectorize(["uint8(uint8, uint8)"])(_lin)
dm = vectorize(["Tuple(int64, int64)(int64, int64)"])(_divmod2)
sd = vectorize(["Tuple(float32, float32)(float32, float32)",
                "Tuple(float64, float64)(float64, float64)"])(_sumdiff)
i32only = vectorize(["int32(int32, int32)"])(_lin)
lazy_absdiff = vectorize(_lazy_absdiff)
lazy_lin = vectorize(_lazy_lin)


@guvectorize(["void(float32, float32, float32[:])", "void(float64, float64, float64[:])"],
             "(),()->()")
def g_absdiff(a, b, out):
    out[0] = math.fabs(a - b)


@guvectorize(["float32(float32, float32)", "float64(float64, float64)"], "(),()->()")
def g_ret_absdiff(a, b):
    return math.fabs(a - b)


@guvectorize(["void(int32[:], int32[:], int32[:])"], "(),()->()")
def g_old_style(a, b, out):
    out[0] = a[0] * 3 + b[0]


@guvectorize(["void(float32, float32, float32[:], float32[:])"], "(),()->(),()")
def g_two(a, b, s, d):
    s[0] = a + b
    d[0] = a - b


@guvectorize(["void(int32, int32[:])"], "()->()")
def g_int32(a, out):
    out[0] = a * 2


@guvectorize(["void(float32[:], float32[:])"], "(n)->()")
def g_sum(a, out):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i]
    out[0] = s


@cuda.jit(device=True)
def dev_absdiff(a, b):
    return math.fabs(a - b)


# ---- the oracle: the documented rule, written here on its own -----------------------------------

_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}   # NEP 50 kinds: signed and unsigned are one


def _is_weak(x):
    return type(x) in (int, float, complex)


def oracle_loop(uf, args):
    """(loop input dtypes, loop output dtypes or None for 'inferred') of uf called on args."""
    nin = uf.nin
    dts = [np.dtype(type(x)) if _is_weak(x) else np.asarray(x).dtype for x in args]
    weak = [_is_weak(x) for x in args]
    strong = [_RANK[d.kind] for d, w in zip(dts, weak) if not w]
    top = max(strong) if strong else -1
    for k in range(nin):   # a weak scalar stays weak beside a strong input of its kind or higher
        if weak[k] and not (top >= _RANK[dts[k].kind] or (dts[k].kind == "c" and top == 2)):
            weak[k] = False

    def reaches(k, t, exact):
        if weak[k]:
            return t.kind != "b" and _RANK[t.kind] >= _RANK[dts[k].kind]
        return dts[k] == t if exact else np.can_cast(dts[k], t, "safe")

    loops = [tuple(np.dtype(t) for t in lp[0]) for lp in uf.loops]
    dynamic = uf.compiler is not None
    for exact in ((True,) if dynamic else (True, False)):
        for lp in loops:
            if all(reaches(k, lp[k], exact) for k in range(nin)):
                return lp[:nin], lp[nin:]
    if dynamic:   # a new loop: strong types as given, weak ones NEP 50's type beside them
        st = [d for d, w in zip(dts, weak) if not w]
        ins = tuple(np.result_type(*st, type(x)(0)) if w else d
                    for x, d, w in zip(args, dts, weak))
        return ins, None
    raise TypeError("no loop")


def emulate(uf):
    """A Python function that is CPython's meaning of calling uf on NumPy scalars."""
    gufunc = isinstance(uf, _core.GUFunc)

    def call(*args):
        try:
            ins, outs = oracle_loop(uf, args)
        except TypeError:
            if not gufunc:
                raise
            # Numba's habit for NumPy scalars at a gufunc's scalar parameters: the first loop
            # whose types cast safely *to* the strong arguments' types; astype to those
            for lp in (tuple(np.dtype(t) for t in lp[0]) for lp in uf.loops):
                if all(_is_weak(x) or np.can_cast(lp[k], np.asarray(x).dtype, "safe")
                       for k, x in enumerate(args)):
                    args = [x if _is_weak(x) else np.asarray(x).astype(lp[k])[()]
                            for k, x in enumerate(args)]
                    break
            ins, outs = oracle_loop(uf, args)
        vals = [t.type(x) if _is_weak(x) else np.asarray(x).astype(t)[()]
                for x, t in zip(args, ins)]
        if gufunc and uf.py_func.__code__.co_argcount == uf.nin + uf.nout:
            ndims = dict((tuple(np.dtype(t) for t in lp[0]), lp[1]) for lp in uf.loops)
            nd = ndims[ins + outs]
            vals = [np.array([v]) if nd[k] else v for k, v in enumerate(vals)]
            bufs = [np.zeros(1, t) for t in outs]
            uf.py_func(*vals, *bufs)
            res = [b[0] for b in bufs]
        else:
            r = uf.py_func(*vals)
            res = list(r) if isinstance(r, tuple) else [r]
            if outs is None:   # inferred: a Python number is its default type
                outs = [np.asarray(v).dtype for v in res]
        res = [H.to_type(v, t) for v, t in zip(res, outs)]
        return tuple(res) if len(res) > 1 else res[0]
    return call


# ---- the bodies: each made for an inner function (the ufunc, or its emulation) ---------------------


def call1(uf):
    def body(x):
        return uf(x)
    return body


def call2(uf):
    def body(x, y):
        return uf(x, y)
    return body


def call_rc(uf, c):
    """uf(x, c) with c a Python number (a weak literal in the body)."""
    def body(x):
        return uf(x, c)
    return body


def call_lc(uf, c):
    def body(y):
        return uf(c, y)
    return body


def call_cc(uf, a, b):
    def body(x):
        return uf(a, b) + x * 0
    return body


def call_expr(uf):
    """The result is a strong value: x + result keeps the loop's type."""
    def body(x, y):
        r = uf(x, y)
        return r * 2 + uf(y, x)
    return body


def call_tuple(uf):
    def body(x, y):
        p, q = uf(x, y)
        return p * 10 + q
    return body


def call_true(uf):
    def body(x):
        return uf(x, True)
    return body


def call_in_loop(uf):
    def body(x):
        acc = x
        for i in range(3):
            acc = uf(acc, i)
        return acc
    return body


def with_values(x, y):
    """The pair values of a differential case: edges and random values of each dtype."""
    rng = np.random.default_rng(abs(hash((x, y))) % 2 ** 32)
    return list(H.pairs(x, y, 40, rng))


def one(x):
    rng = np.random.default_rng(abs(hash(x)) % 2 ** 32)
    return [H.values_for(x, 40, rng)]


# (label, maker, maker's extra arguments, inner, argument dtypes, expected result dtype)
CASES_TABLE = [
    # the motivating example: float32 and a Python float take the float32 loop
    ("hyp_f4_lit", call_rc, (2.0,), hyp, ["float32"], "float32"),
    ("hyp_f4_intlit", call_rc, (2,), hyp, ["float32"], "float32"),
    ("hyp_f8_lit", call_rc, (2.0,), hyp, ["float64"], "float64"),
    ("hyp_f4_f4", call2, (), hyp, ["float32", "float32"], "float32"),
    ("hyp_f4_f8", call2, (), hyp, ["float32", "float64"], "float64"),
    # int32 reaches float64 safely, not float32
    ("hyp_i4_i4", call2, (), hyp, ["int32", "int32"], "float64"),
    ("hyp_i2_i2", call2, (), hyp, ["int16", "int16"], "float32"),
    ("hyp_u1_i1", call2, (), hyp, ["uint8", "int8"], "float32"),
    ("hyp_i8_f4", call2, (), hyp, ["int64", "float32"], "float64"),
    ("hyp_bool_lit", call_rc, (1.5,), hyp, ["bool"], "float64"),
    # a Python float beside an integer is float64 (NEP 50): the float64 loop
    ("hyp_u1_flit", call_rc, (2.5,), hyp, ["uint8"], "float64"),
    ("hyp_lit_f4", call_lc, (3.0,), hyp, ["float32"], "float32"),
    ("hyp_lits", call_cc, (2.0, 7.5), hyp, ["float32"], "float64"),
    ("hyp_intlits", call_cc, (2, 7), hyp, ["float32"], "float64"),
    ("hyp_expr", call_expr, (), hyp, ["float32", "float32"], "float32"),
    ("hyp_loop", call_in_loop, (), hyp, ["float32"], "float32"),
    # int8 and weak literals: the int8 loop (wrapping), a float literal goes to float64
    ("iadd_i1_lit", call_rc, (3,), iadd, ["int8"], "int8"),
    ("iadd_i1_neglit", call_rc, (-100,), iadd, ["int8"], "int8"),
    ("iadd_lit_i1", call_lc, (127,), iadd, ["int8"], "int8"),
    ("iadd_i1_flit", call_rc, (3.5,), iadd, ["int8"], "float64"),
    ("iadd_i1_i1", call2, (), iadd, ["int8", "int8"], "int8"),
    ("iadd_i2_i2", call2, (), iadd, ["int16", "int16"], "int64"),
    ("iadd_u1_u1", call2, (), iadd, ["uint8", "uint8"], "int64"),
    ("iadd_u8_u8", call2, (), iadd, ["uint64", "uint64"], "float64"),
    ("iadd_b_b", call2, (), iadd, ["bool", "bool"], "int8"),
    ("iadd_i1_true", call_true, (), iadd, ["int8"], "int8"),
    ("u8add_lit", call_rc, (200,), u8add, ["uint8"], "uint8"),
    # loops with int and float overloads: the order decides (after an exact match)
    ("float_first_i4", call2, (), float_first, ["int32", "int32"], "float64"),
    ("float_first_i8", call2, (), float_first, ["int64", "int64"], "int64"),
    ("int_first_i4", call2, (), int_first, ["int32", "int32"], "int64"),
    ("int_first_f4", call2, (), int_first, ["float32", "float32"], "float64"),
    ("int_first_i4_flit", call_rc, (0.5,), int_first, ["int32"], "float64"),
    # complex: a Python complex beside float32 keeps float32's precision
    ("cmul_f4_clit", call_rc, (1j,), cmul, ["float32"], "complex64"),
    ("cmul_f8_clit", call_rc, (2 - 1j,), cmul, ["float64"], "complex128"),
    ("cmul_f4_f4", call2, (), cmul, ["float32", "float32"], "complex64"),
    ("cmul_c8_lit", call_rc, (2.5,), cmul, ["complex64"], "complex64"),
    # several outputs: a tuple
    ("dm_i4_i4", call_tuple, (), dm, ["int32", "int32"], "int64"),
    ("sd_f4_f4", call_tuple, (), sd, ["float32", "float32"], "float32"),
    ("sd_i1_i1", call_tuple, (), sd, ["int8", "int8"], "float32"),
    # gufuncs with scalar core dimensions: the same rule over their loops
    ("g_absdiff_f4_lit", call_rc, (2.0,), g_absdiff, ["float32"], "float32"),
    ("g_absdiff_i4_i4", call2, (), g_absdiff, ["int32", "int32"], "float64"),
    ("g_ret_f4_lit", call_rc, (2.0,), g_ret_absdiff, ["float32"], "float32"),
    ("g_old_style", call2, (), g_old_style, ["int32", "int16"], "int32"),
    ("g_two", call_tuple, (), g_two, ["float32", "float32"], "float32"),
    # a wider NumPy scalar at a gufunc's scalar parameter: Numba's habit (cast with astype)
    ("g_int32_i8", call1, (), g_int32, ["int64"], "int32"),
    # no declared signatures: the types the host call compiles a loop for
    ("lazy_f4_lit", call_rc, (2.0,), lazy_absdiff, ["float32"], "float64"),
    ("lazy_lin_f4_lit", call_rc, (2.0,), lazy_lin, ["float32"], "float32"),
    ("lazy_lin_i1_lit", call_rc, (5,), lazy_lin, ["int8"], "int8"),
    ("lazy_lin_i2_f4", call2, (), lazy_lin, ["int16", "float32"], "float32"),
]


def _inputs(types):
    if len(types) == 1:
        return one(types[0])
    return with_values(*types)


def _make_case(label, maker, extra, inner, types, want):
    body = maker(inner, *extra)
    ref = maker(emulate(inner), *extra)
    return H.Case(body, [T.from_dtype(np.dtype(t)) for t in types], None, _inputs(types),
                  ref=ref, label=label)


CASES = [_make_case(*row) for row in CASES_TABLE]
_RUN = {}


def _run_all():
    if "done" not in _RUN:
        _RUN["failures"] = H.run_cases(CASES)
        _RUN["done"] = True


@pytest.mark.parametrize("row", CASES_TABLE, ids=[r[0] for r in CASES_TABLE])
def test_body_call(row):
    """The translated body gives what CPython gives with the ufunc call's meaning: the values
    (g++ on the host, exact) and the result dtype, which is also the hand-checked one."""
    label, maker, extra, inner, types, want = row
    case = CASES[[r[0] for r in CASES_TABLE].index(label)]
    args = [np.asarray(x[0]).astype(t)[()] for x, t in zip(case.inputs, types)]
    with np.errstate(all="ignore"):
        assert np.asarray(case.ref(*args)).dtype == np.dtype(want), "the oracle disagrees"
    _run_all()
    assert case.error is None, case.error
    assert case.result.return_type.dtype == np.dtype(want)


def test_result_is_strong():
    """The call's value is a typed (strong) value, as a NumPy scalar is: beside a Python float
    it keeps the loop's type."""
    def body(x):
        return hyp(x, 2.0) * 1.5
    r = translate(body, [T.float32])
    assert r.return_type == T.float32


def test_device_function_keeps_its_meaning():
    """cuda.jit(device=True) functions are still the Python function on the given types (no loop
    selection): math.fabs gives a Python float, so float64."""
    def body(x):
        return dev_absdiff(x, 2.0)
    assert translate(body, [T.float32]).return_type == T.float64


def test_numpy_ufunc_keeps_its_meaning():
    def body(x):
        return np.hypot(x, 2.0)
    assert translate(body, [T.float32]).return_type == T.float32


def test_inner_loop_is_the_loops_function():
    """The inlined function is the one the inner ufunc's loop compiled (same Python function,
    same types), so its definition is shared rather than a variant."""
    def body(x):
        return hyp(x, 2.0)
    src = translate(body, [T.float32]).source
    assert "/* _absdiff: float32(float32, float32) */" in src
    assert re.search(r"_absdiff_[0-9a-f]+\(x, 2\.0f\)", src), src


# ---- errors -------------------------------------------------------------------------------------


def _host_message(uf, *inputs):
    with pytest.raises(TypeError) as ei:
        uf.kernel_source(*inputs)
    return str(ei.value)


def test_no_loop_is_the_host_calls_error():
    """No loop matches: a located TypingError whose message is the host call's (it names the
    ufunc, the argument types and the loops)."""
    def body(x):
        return i32only(x, 1)
    with pytest.raises(TypingError) as ei:
        translate(body, [T.float32])
    msg = str(ei.value)
    host = _host_message(i32only, np.zeros(2, np.float32), 1)
    assert host in msg, (host, msg)
    assert "ufunc '_lin'" in msg and "(float32, Python int64)" in msg
    assert "(int32, int32) -> (int32)" in msg
    assert ei.value.cufunc_location[0] == THIS_FILE
    assert "return i32only(x, 1)" in msg


def test_no_loop_strong_inputs():
    def body(x, y):
        return i32only(x, y)
    with pytest.raises(TypingError, match=r"\(int64, int32\), and the inputs could not be safely"):
        translate(body, [T.int64, T.int32])


def test_weak_literal_out_of_range():
    """A Python int the loop's type cannot hold: NumPy's OverflowError, at translation."""
    def body(x):
        return iadd(x, 300)
    with pytest.raises(TypingError, match="300 out of bounds for int8"):
        translate(body, [T.int8])

    def body2(x):
        return u8add(x, -1)
    with pytest.raises(TypingError, match="-1 out of bounds for uint8"):
        translate(body2, [T.uint8])


def test_gufunc_needs_scalar_core_dimensions():
    def body(x):
        return g_sum(x)
    with pytest.raises(UnsupportedError) as ei:
        translate(body, [T.float32])
    assert ("called in a kernel body, a gufunc needs scalar core dimensions; g_sum has "
            "(n)->()") in str(ei.value)
    assert ei.value.cufunc_location[0] == THIS_FILE


@pytest.mark.parametrize("maker,types,pattern", [
    (call1, [T.float32], r"ufunc '_absdiff' takes 2 arguments here, 1 given"),
    (call_rc, [T.float32[:]], r"an array cannot be used as an argument of _absdiff"),
])
def test_bad_arguments(maker, types, pattern):
    body = maker(hyp) if maker is call1 else maker(hyp, 2.0)
    with pytest.raises(TypingError, match=pattern):
        translate(body, types)


def test_ufunc_without_python_function():
    raw = _core.UFunc("raw", 1, 1)
    raw.add_loop((np.dtype(np.float32), np.dtype(np.float32)),
                 "__device__ float raw_f(float x) { return x; }", "raw_f")

    def body(x):
        return raw(x)
    with pytest.raises(UnsupportedError, match="ufunc 'raw' has no Python function"):
        translate(body, [T.float32])


# ---- the rule's Python mirror (cufunc._loops) against NumPy and against the C rule ---------------

_NP_DTYPES = [np.dtype(c) for c in "? b h i l B H I L f d F D".split()]
_KEYS = _NP_DTYPES + [int, float, complex]
_WEAK_DT = {int: np.dtype("l"), float: np.dtype("d"), complex: np.dtype("D")}


def _resolve(loops, nin, keys):
    ins = [_WEAK_DT.get(k, k) for k in keys]
    weak = _loops.nep50(ins, [not isinstance(k, np.dtype) for k in keys])
    i = _loops.find(loops, nin, ins, weak)
    return loops[i] if i >= 0 else None


@pytest.mark.parametrize("uf", [np.add, np.multiply, np.subtract, np.hypot, np.arctan2,
                                np.maximum, np.copysign, np.floor_divide, np.power, np.fmod,
                                np.logaddexp, np.bitwise_and, np.left_shift],
                         ids=lambda u: u.__name__)
def test_mirror_is_numpys_rule_on_numpys_loops(uf):
    """With NumPy's loop tables in NumPy's order, the rule picks NumPy's loop (resolve_dtypes,
    NEP 50) for every pair of strong dtypes and Python scalars; the one exception is NumPy's own
    type resolver refusing bool - bool."""
    loops = []
    for t in uf.types:
        dts = tuple(np.dtype(c) for c in t.replace("->", ""))
        if not any(d.kind in "OMm" for d in dts) and dts not in loops:
            loops.append(dts)
    bad = []
    for a in _KEYS:
        for b in _KEYS:
            try:
                want = tuple(uf.resolve_dtypes((a, b, None)))
            except TypeError:
                want = None
            got = _resolve(loops, 2, (a, b))
            if got != want and not (uf is np.subtract and a == b == np.dtype(bool)):
                bad.append((a, b, got, want))
    assert not bad, bad[:10]


def test_mirror_safe_casting_is_cufuncs():
    for a in _NP_DTYPES:
        for b in _NP_DTYPES:
            assert bool(np.can_cast(a, b, "safe")) == bool(_core.can_cast(a, b, "safe")), (a, b)


_OPS = re.compile(r"F\(sfx, pfx, (\d+), \w, \w, \w+, (\w+), \d+\)")


def _host_loop(uf, keys):
    """The loop dtypes a host call with these inputs (a dtype: a 4-element array; a Python type: a
    scalar of it) takes, read off the kernel it would launch (no GPU needed)."""
    inputs = [k(1) if not isinstance(k, np.dtype) else np.ones(4, k) for k in keys]
    src = uf.kernel_source(*inputs)
    ops = dict((int(i), c) for i, c in _OPS.findall(src))
    return tuple(np.dtype(ops[i][3:] if ops[i] != "cf_bool" else "bool")
                 for i in range(uf.nin + uf.nout))


@pytest.mark.parametrize("uf", [hyp, iadd, float_first, int_first, cmul, u8add, i32only],
                         ids=lambda u: u.signatures[0])
def test_mirror_is_the_host_calls_rule(uf):
    """cufunc._loops picks the loop the host call picks (cf_loops_find, cf_py_args_nep50) for
    every combination of argument kinds, and fails where the call fails."""
    loops = [tuple(np.dtype(t) for t in lp[0]) for lp in uf.loops]
    for a in _KEYS:
        for b in _KEYS:
            got = _resolve(loops, 2, (a, b))
            try:
                host = _host_loop(uf, (a, b))
            except (TypeError, OverflowError):
                host = None
            assert got == host, (uf.signatures, a, b, got, host)


def test_lazy_ufunc_compiles_what_the_body_inlines():
    """A ufunc without signatures: the body inlines the Python function on the types the host
    call compiles its new loop for."""
    fresh_host = vectorize(_lazy_lin)
    fresh_body = vectorize(_lazy_lin)
    for keys, maker, extra, argt in [
            ((np.dtype("float32"), float), call_rc, (2.0,), [T.float32]),
            ((np.dtype("int8"), int), call_rc, (5,), [T.int8]),
            ((np.dtype("int16"), np.dtype("float32")), call2, (), [T.int16, T.float32]),
            ((np.dtype("uint8"), float), call_rc, (2.5,), [T.uint8])]:
        host = _host_loop(fresh_host, keys)
        r = translate(maker(fresh_body, *extra), argt)
        assert r.return_type.dtype == host[-1], (keys, r.return_type, host)
        sig = "%s(%s)" % (host[-1].name, ", ".join(d.name for d in host[:2]))
        assert "/* _lazy_lin: %s */" % sig in r.source, (sig, r.source)


def _lazy_gv(a, b, out):
    out[0] = a * 2 + b


def _lazy_gr(a, b):
    return a * 2 + b


@pytest.mark.parametrize("pyfunc", [_lazy_gv, _lazy_gr], ids=["void", "return"])
def test_lazy_gufunc_compiles_what_the_body_inlines(pyfunc):
    """A gufunc without a type list, '(),()->()': the body inlines the Python function on the
    types of the loop the host call compiles (outputs of NumPy's result type of the inputs for a
    function writing its outputs, inferred for one returning them)."""
    for keys, maker, extra, argt in [
            ((np.dtype("int16"), int), call_rc, (3,), [T.int16]),
            ((np.dtype("float32"), float), call_rc, (3.5,), [T.float32]),
            ((np.dtype("int8"), np.dtype("float32")), call2, (), [T.int8, T.float32])]:
        host_gu = guvectorize("(),()->()")(pyfunc)
        host_gu.kernel_source(*[k(1) if not isinstance(k, np.dtype) else np.ones(3, k)
                                for k in keys])
        (types, ndims), = [lp[:2] for lp in host_gu.loops]
        r = translate(maker(guvectorize("(),()->()")(pyfunc), *extra), argt)
        assert r.return_type.dtype == types[-1], (keys, r.return_type, types)
        ins = ", ".join(np.dtype(t).name for t in types[:2])
        sig = ("void(%s, %s[:])" % (ins, np.dtype(types[2]).name) if pyfunc is _lazy_gv
               else "%s(%s)" % (np.dtype(types[2]).name, ins))
        assert "/* %s: %s */" % (pyfunc.__name__, sig) in r.source, (sig, r.source)


# ---- on the GPU ---------------------------------------------------------------------------------


@vectorize(["float32(float32)"])
def gpu_outer_hyp(x):
    return hyp(x, 2.0) + hyp(2.0, x)


@vectorize(["int8(int8)"])
def gpu_outer_iadd(i):
    return iadd(i, 100)


@vectorize(["int64(int32, int32)"])
def gpu_outer_dm(x, y):
    q, r = dm(x, y)
    return q * 1000 + r


@vectorize(["float32(float32, float32)"])
def gpu_outer_gufunc(x, y):
    s, d = g_two(x, y)
    return g_absdiff(s, 2.0) * d


GPU_TABLE = [
    (gpu_outer_hyp, ["float32"]),
    (gpu_outer_iadd, ["int8"]),
    (gpu_outer_dm, ["int32", "int32"]),
    (gpu_outer_gufunc, ["float32", "float32"]),
]


@pytest.mark.gpu
@pytest.mark.parametrize("outer,types", GPU_TABLE, ids=[o.__name__ for o, _ in GPU_TABLE])
def test_gpu_outer_ufunc(gpu, outer, types):
    """The outer ufunc on device arrays gives the oracle's values (the body run by CPython with
    each inner call emulated), in its declared type."""
    ins = _inputs(types)
    if types == ["int32", "int32"]:
        ins[1] = np.where(ins[1] == 0, 7, ins[1]).astype(np.int32)
    ref_body = {gpu_outer_hyp: lambda x: emulate(hyp)(x, 2.0) + emulate(hyp)(2.0, x),
                gpu_outer_iadd: lambda i: emulate(iadd)(i, 100),
                gpu_outer_dm: lambda x, y: (lambda q, r: q * 1000 + r)(*emulate(dm)(x, y)),
                gpu_outer_gufunc: lambda x, y: (lambda s, d: emulate(g_absdiff)(s, 2.0) * d)(
                    *emulate(g_two)(x, y))}[outer]
    out_t = np.dtype(outer.types[0][-1])
    with np.errstate(all="ignore"):
        want = np.array([H.to_type(ref_body(*[np.asarray(a[i]).astype(t)[()]
                                                for a, t in zip(ins, types)]), out_t)
                         for i in range(len(ins[0]))])
    d_ins = [cuda.to_device(np.ascontiguousarray(a.astype(t))) for a, t in zip(ins, types)]
    got = outer(*d_ins).copy_to_host()
    assert got.dtype == out_t
    assert H.exact_equal(want, got).all(), (want[:8], got[:8])
