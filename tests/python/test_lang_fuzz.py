"""Fuzzing the translator: every body either translates to code that agrees with CPython, or raises
cufunc's own error at the user's line. Never a Python internal error, never a wrong result.

Hypothesis draws programs (deterministically: derandomize=True, no example database) from a
grammar wider than test_lang_hypothesis.py's: besides typed arithmetic, comparisons, if/elif,
loops and casts it mixes in constructs the language rejects (lists, strings, slices, lambdas in
bodies, comprehensions, try, with, del, global, unknown names and functions, None, tuples where
numbers go, attributes), huge integer literals and folded constants, long sums and elif chains,
and it writes the functions as module-level defs, lambdas (several on one line), nested defs
(closures) and defs that call module-level helpers. The programs are written to a module file
and imported, so the translator reads them from a real source file.

For each program:
- translate() raises: the exception must be a cufunc.errors class (TypingError, UnsupportedError,
  or a subclass) carrying ``cufunc_location`` = (the module's file, a line of this program);
- translate() succeeds: the generated C is built with g++ against the runtime header (one build
  for all programs, lang_harness) and run over edge and random inputs; wherever CPython, running
  the same function object on NumPy scalars, returns a value, the kernel's value is identical
  (bitwise; only exact operations are generated). Inputs where CPython raises (a negative integer
  power, an out-of-range Python integer) are the language's documented departures and skipped.

Bounded for CI: about 350 programs and one g++ build (well under a minute on two cores).
"""

import builtins
import importlib.util
import os
import re
import sys
import warnings

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import lang_harness as H
import cufunc.errors as E
import cufunc.lang as L
import cufunc.types as T

N_PROGRAMS = 350
N_INPUTS = 40
ARG_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float32", "float64", "bool"]
NUM_TYPES = [t for t in ARG_TYPES if t != "bool"]

# constructs the language rejects (docs/language.md "Errors"), and odd but legal ones
NOISE = [
    "[{e}]", "{{{e}: 1}}", "'s'", "f'{{{e}}}'", "(lambda q: q)({e})", "[q for q in range(3)]",
    "{e}[1:2]", "{e}.foo", "unknown_name", "unknown_func({e})", "None", "({e}, {e})",
    "len({e})", "{e} is {e}", "{e} in (1, 2)", "math.sqrt", "np", "(yield {e})",
    "10 ** 20", "2 ** 64", "-2 ** 63", "18446744073709551615", "100000000000000000000",
    "(2 ** 64 - 1)", "(10 ** 20 - 10 ** 20 + 3)", "1 << 70", "int({e})", "float({e})",
    "bool({e})", "complex({e}, 1.0)", "abs({e})", "divmod({e}, 3)",
    "pow({e}, 2)", "helper0({e}, {e})", "helper1({e})", "NP_CONST", "TABLE[2]",
    "np.float32({e})", "np.float16({e})", "math.floor({e})", "({e} if {e} else "
    "{e})", "not {e}", "(a0 := {e})", "{e} @ {e}", "-{e}", "~{e}", "+{e}", "*{e}",
]
NOISE_STMTS = [
    "try:\n{p}    pass\n{p}except Exception:\n{p}    pass", "with x:\n{p}    pass", "del v0",
    "global g", "import math", "assert {e}", "raise ValueError", "v0: int = {e}",
    "for q in [1, 2]:\n{p}    pass", "while True:\n{p}    break", "print({e})",
    "v0 = v0", "v0, v1 = {e}, {e}", "v0, v1 = {e}", "def inner(q):\n{p}    return q",
    "class K:\n{p}    pass", "nonlocal_thing = undefined_thing", "return", "return ({e}, {e})",
    "TABLE[0] = {e}", "a0[0] = {e}", "x = 1; y = 2", "pass", "return None",
]


def _lit(draw):
    k = draw(st.integers(0, 5))
    if k <= 2:
        return str(draw(st.integers(0, 100)))
    if k == 3:
        return repr(draw(st.sampled_from([0.5, 1.5, 2.0, 0.25, 3.75, 10.0, -0.0, 1e300])))
    if k == 4:
        return draw(st.sampled_from(["True", "False", "255", "-1", "65536", "2147483648"]))
    return draw(st.sampled_from(["(-3)", "(-128)", "4294967296", "9223372036854775807"]))


@st.composite
def exprs(draw, names, depth=2, noise=True):
    """Expression text over ``names`` (typed values: arguments, np.int64(loop var), locals)."""
    if depth <= 0 or draw(st.integers(0, 3)) == 0:
        if names and draw(st.integers(0, 9)) < 7:
            return draw(st.sampled_from(names))
        return _lit(draw)
    kind = draw(st.integers(0, 14 if noise else 12))
    sub = lambda: draw(exprs(names, depth - 1, noise))  # noqa: E731
    if kind <= 4:
        op = draw(st.sampled_from(["+", "-", "*", "/", "//", "%", "&", "|", "^", "+", "*"]))
        return "(%s %s %s)" % (sub(), op, sub())
    if kind == 5:
        return "(%s %s %d)" % (sub(), draw(st.sampled_from(["<<", ">>", "**"])),
                               draw(st.integers(0, 9)))
    if kind == 6:
        return "(%s%s)" % (draw(st.sampled_from(["-", "~", "not ", "+"])), sub())
    if kind == 7:
        ops = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
        if draw(st.booleans()):
            return "(%s %s %s %s %s)" % (sub(), draw(ops), sub(), draw(ops), sub())
        return "(%s %s %s)" % (sub(), draw(ops), sub())
    if kind == 8:
        return "(%s %s %s)" % (sub(), draw(st.sampled_from(["and", "or"])), sub())
    if kind == 9:
        return "(%s if %s else %s)" % (sub(), sub(), sub())
    if kind == 10:
        return "np.%s(%s)" % (draw(st.sampled_from(NUM_TYPES + ["bool_"])), sub())
    if kind == 11:
        f = draw(st.sampled_from(["min", "max", "abs"]))
        return "%s(%s)" % (f, sub()) if f == "abs" else "%s(%s, %s)" % (f, sub(), sub())
    if kind == 12:
        n = draw(st.sampled_from([3] * 20 + [40] * 4 + [700]))   # 700 > the old limit of 500
        return "(" + " + ".join(sub() if i < 2 else names[0] if names else "1"
                                for i in range(n)) + ")"
    return draw(st.sampled_from(NOISE)).format(e=sub())


@st.composite
def blocks(draw, names, typed, depth, indent, nloop, noise):
    """Statements. Locals in ``typed`` ({name: dtype}) are assigned through a cast to their one
    type (docs/language.md gives a variable one type; CPython then agrees)."""
    pad = "    " * indent
    out = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.integers(0, 10 if noise else 8))
        v = draw(st.sampled_from(sorted(typed)))
        t = typed[v]
        if depth <= 0 and 4 <= kind <= 7:
            kind = 0
        if kind <= 2:
            out.append("%s%s = np.%s(%s)" % (pad, v, t, draw(exprs(names, 2, noise))))
        elif kind == 3:
            op = draw(st.sampled_from(["+", "-", "*", "//", "%"]))
            out.append("%s%s %s= np.%s(%s)" % (pad, v, op, t, draw(exprs(names, 1, noise))))
        elif kind <= 5 and depth > 0:
            n_elif = draw(st.sampled_from([0, 1, 2] * 12 + [1100]) if noise
                          else st.integers(0, 2))
            out.append("%sif %s:" % (pad, draw(exprs(names, 1, noise))))
            out += draw(blocks(names, typed, depth - 1, indent + 1, nloop, noise))
            if n_elif > 50:     # a long elif chain: deeper than the old RecursionError
                for i in range(n_elif):
                    out.append("%selif %s == %d:" % (pad, names[0], i))
                    out.append("%s    %s = np.%s(%d)" % (pad, v, t, i % 100))
            else:
                for _ in range(n_elif):
                    out.append("%selif %s:" % (pad, draw(exprs(names, 1, noise))))
                    out += draw(blocks(names, typed, depth - 1, indent + 1, nloop, noise))
            if draw(st.booleans()):
                out.append("%selse:" % pad)
                out += draw(blocks(names, typed, depth - 1, indent + 1, nloop, noise))
        elif kind <= 7 and depth > 0:
            iv = "i%d" % nloop
            step = draw(st.sampled_from([1, 2, -1, -3]))
            start = draw(st.integers(-4, 4))
            stop = start + step * draw(st.integers(-1, 5))
            out.append("%sfor %s in range(%d, %d, %d):" % (pad, iv, start, stop, step))
            inner = names + ["np.int64(%s)" % iv]
            out += draw(blocks(inner, typed, depth - 1, indent + 1, nloop + 1, noise))
            if draw(st.integers(0, 3)) == 0:
                out.append("%s    if %s:\n%s        %s" % (pad, draw(exprs(inner, 1, noise)), pad,
                                                        draw(st.sampled_from(["break",
                                                                              "continue"]))))
        elif kind == 8:
            out.append("%sreturn np.%s(%s)" % (pad, t, draw(exprs(names, 2, noise))))
        else:
            out.append(pad + draw(st.sampled_from(NOISE_STMTS)).format(
                e=draw(exprs(names, 1, noise)), p=pad).replace("\n", "\n"))
    return out


@st.composite
def programs(draw):
    """(kind, argtypes, return type or None, body lines, noise): one function to translate."""
    noise = draw(st.integers(0, 2)) > 0          # a third of the programs are clean
    nargs = draw(st.integers(1, 3))
    argt = [draw(st.sampled_from(ARG_TYPES)) for _ in range(nargs)]
    args = ["a%d" % i for i in range(nargs)]
    kind = draw(st.sampled_from(["def", "def", "lambda", "nested", "helper"]))
    rtype = draw(st.sampled_from([None, None] + NUM_TYPES))
    if kind == "lambda":
        return kind, argt, rtype, [draw(exprs(args, 3, noise))], noise
    typed = {"v0": draw(st.sampled_from(NUM_TYPES)), "v1": draw(st.sampled_from(NUM_TYPES))}
    body = ["v0 = np.%s(%s)" % (typed["v0"], draw(exprs(args, 1, False))),
            "v1 = np.%s(%s)" % (typed["v1"], draw(exprs(args, 1, False)))]
    names = args + ["v0", "v1"] + (["c0"] if kind == "nested" else [])
    if kind == "helper":
        names = names + ["helper0(%s, %s)" % (args[0], args[-1]), "helper1(v0)"]
    body += draw(blocks(names, typed, 2, 0, 0, noise))
    body.append("return %s" % draw(exprs(names, 2, noise)))
    return kind, argt, rtype, body, noise


HEADER = """\
import math
import numpy as np
NP_CONST = np.int16(7)
TABLE = np.array([1.5, -2.0, 3.25, 0.0])
g = 0


def helper0(p, q):
    return p * np.int8(3) + q


def helper1(p):
    if p > 0:
        return p
    return -p


def helper2(p):
    return [p]

"""


def _compiles(lines):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile("\n".join(lines) + "\n", "<fuzz>", "exec")
            return True
        except SyntaxError:
            return False


def _write_programs(progs, path):
    """Module text and, per program, (expression giving the function, first line, last line);
    None for a program that is not valid Python (a noise statement out of place)."""
    lines = HEADER.splitlines()
    where = []
    for k, (kind, argt, rtype, body, noise) in enumerate(progs):
        start = len(lines)
        params = ", ".join("a%d" % i for i in range(len(argt)))
        first = len(lines) + 1
        if kind == "lambda":
            # the fuzzed lambda between two others with the same parameters, on one line
            lines.append("L%d = [lambda %s: %s, lambda %s: %s, lambda %s: 0]"
                         % (k, params, "a0 * 2", params, body[0], params))
            entry = "L%d[1]" % k
        elif kind == "nested":
            lines.append("def make%d():" % k)
            lines.append("    c0 = np.int32(5)")
            lines.append("    def f(%s):" % params)
            lines += ["        " + l for l in "\n".join(body).splitlines()]
            lines.append("    return f")
            entry = "make%d()" % k
        else:
            lines.append("def prog%d(%s):" % (k, params))
            lines += ["    " + l for l in "\n".join(body).splitlines()]
            entry = "prog%d" % k
        if not _compiles(lines[start:]):
            del lines[start:]
            where.append(None)
            continue
        where.append((entry, first, len(lines)))
        lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return where


def _lang_int(x):
    """int() as docs/language.md defines it in kernels: a conversion to int64 (NumPy's, which wraps
    integers and gives INT64_MIN for floats out of range), where CPython's int is unbounded."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(x).astype(np.int64)[()]


def _import(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    # The reference (CPython running the functions) sees int() as the language defines it; the
    # translator reads the builtins module itself and is not affected.
    mod.__builtins__ = dict(vars(builtins), int=_lang_int)
    sys.modules[name] = mod
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # "is" with a literal, and the like
        spec.loader.exec_module(mod)
    return mod


def _inputs(argt, rng):
    cols = [np.concatenate([H.edges(t), H.random_values(t, N_INPUTS, rng)]) for t in argt]
    n = max(len(c) for c in cols)
    return [np.resize(rng.permutation(c), n) for c in cols]


def _reference(func, args, rdt):
    """CPython's value converted to the result type, or None where CPython raises."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            v = func(*args)
            if isinstance(v, tuple) or v is None:
                return None
            return H.to_type(v, rdt)
        except Exception:
            return None


def _bad_literals(source):
    """Decimal integer literals in C that do not fit their type: more than 64 bits, or a signed
    LL literal above INT64_MAX (compilers truncate them with at most a warning)."""
    bad = []
    for m in re.finditer(r"(?<![\w.])(\d+)(ULL|LL|U)?(?![\w.])", source):
        v, suffix = int(m.group(1)), m.group(2) or ""
        if v >= 2 ** 64 or (suffix == "LL" and v >= 2 ** 63):
            bad.append(m.group(0))
    return bad


def _check_error(exc, path, first, last):
    """A translation error: cufunc's class, located at a line of the program (or a helper)."""
    if not isinstance(exc, (E.TypingError, E.UnsupportedError)):
        return "not a cufunc error: %s: %s" % (type(exc).__name__, exc)
    loc = getattr(exc, "cufunc_location", None)
    if loc is None:
        return "no cufunc_location on %s: %s" % (type(exc).__name__, exc)
    helper_lines = range(1, HEADER.count("\n") + 1)
    if loc[0] != path or not (first <= loc[1] <= last or loc[1] in helper_lines):
        return "located at %s, not in the program's lines %d-%d: %s" % (loc, first, last, exc)
    if 'File "%s", line %d' % (path, loc[1]) not in str(exc):
        return "the message does not show the location: %s" % exc
    return None


def _elif_chain(n):
    body = ["v0 = np.float64(0.0)", "if a0 == 0:", "    v0 = np.float64(0.5)"]
    for i in range(1, n):
        body += ["elif a0 == %d:" % i, "    v0 = np.float64(%d.25)" % i]
    return body + ["return v0"]


# Programs that must be in every run (regressions of the hardening issue), besides the drawn ones
EXAMPLES = [
    ("lambda", ["int64"], None, [" + ".join(["a0"] * 700)], True),          # RecursionError
    ("def", ["int16"], None, _elif_chain(1100), True),                       # RecursionError
    ("def", ["float64"], None, ["return TABLE[10 ** 20]"], True),            # C literal too big
    ("def", ["float64"], None, ["return helper2(a0)"], True),                # error in a callee
    ("nested", ["float64"], None, ["return a0 + c0 + NP_CONST"], False),
    ("lambda", ["float64", "float64"], None, ["a0 - a1"], False),            # lambdas on a line
]


def _collect():
    progs = list(EXAMPLES)

    @settings(max_examples=N_PROGRAMS, derandomize=True, database=None, deadline=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(programs())
    def collect(p):
        progs.append(p)
    collect()
    return progs


def test_fuzz_translator():
    progs = _collect()
    assert len(progs) >= N_PROGRAMS * 0.9, len(progs)
    path = os.path.join(H._cache_dir(), "fuzz_programs_%d.py" % os.getpid())
    where = _write_programs(progs, path)
    mod = _import(path, "cufunc_fuzz_programs_%d" % os.getpid())
    problems, cases, outcomes = [], [], {"translated": 0, "rejected": 0}
    assert sum(w is not None for w in where) >= N_PROGRAMS * 0.8, "too few valid programs"
    for (kind, argt, rtype, body, noise), w in zip(progs, where):
        if w is None:
            continue
        entry, first, last = w
        func = eval(entry, vars(mod))
        types = [getattr(T, "bool_" if t == "bool" else t) for t in argt]
        ret = getattr(T, rtype) if rtype else None
        try:
            r = L.translate(func, types, ret)
        except Exception as exc:     # judged below: must be cufunc's own, located
            outcomes["rejected"] += 1
            msg = _check_error(exc, path, first, last)
            if msg:
                problems.append("%s (lines %d-%d): %s" % (entry, first, last, msg))
            continue
        outcomes["translated"] += 1
        bad = _bad_literals(r.source)
        if bad or "cf_int64_out_of_range" in r.source:
            problems.append("%s: out-of-range integer literals in the C source: %s"
                            % (entry, bad or "cf_int64_out_of_range"))
            continue                 # running it would read wild memory
        if not isinstance(r.return_type, T.Scalar):
            continue                 # tuples and void: translated, nothing to run here
        case = H.Case(func, types, ret, None, label=entry)
        case.result = r
        case.argt = argt
        cases.append(case)
    live, lib = H._compile_batch(cases, H._host_program, H._gpp, r"\.cpp:(\d+):\d+: error",
                                 "g++")
    problems += ["%s: %s" % (c.label, c.error[:3000]) for c in cases if c.error]
    # every program is translated: CPython's reference runs now use the language's min/max
    mod.min, mod.max = _promoting(builtins.min), _promoting(builtins.max)
    rng = np.random.default_rng(2024)
    compared = 0
    for k, c in enumerate(live):
        ins = _inputs(c.argt, rng)
        msg, n = _run(c, lib, k, ins)
        compared += n
        if msg:
            problems.append(msg)
    assert not problems, "%d problems in %d programs:\n\n%s" % (
        len(problems), len(progs), "\n\n".join(problems[:10]))
    # the grammar must exercise both outcomes and real comparisons
    assert outcomes["translated"] >= N_PROGRAMS // 5, outcomes
    assert outcomes["rejected"] >= N_PROGRAMS // 5, outcomes
    assert compared >= 1000, compared


def _promoting(fn):
    """min/max as the kernel language means them (docs/language.md's typing rule): the arguments
    promoted to one type (NumPy 2 with NEP 50's weak Python scalars), then CPython's min/max of
    those. CPython's own min(1.5, np.int32(x)) returns one of its arguments unchanged, so its
    type would depend on the values."""
    def f(*args):
        rt = np.result_type(*args)
        return fn(*[np.array(a, dtype=rt)[()] for a in args])
    return f


def _run(case, lib, k, ins):
    """Run the built entry k over ``ins``; the first disagreement with CPython, and how many
    inputs were compared."""
    import ctypes
    r = case.result
    rdt = np.dtype(H._np_dtype(r.return_type))
    args = [np.ascontiguousarray(x.astype(H._np_dtype(t))) for x, t in zip(ins, r.arg_types)]
    n = len(args[0])
    out = np.zeros(n, dtype=rdt)
    fn = getattr(lib, "cfentry%d" % k)
    fn.restype = None
    fn(*[a.ctypes.data_as(ctypes.c_void_p) for a in args], out.ctypes.data_as(ctypes.c_void_p),
       ctypes.c_long(n))
    compared = 0
    for i in range(n):
        scal = [a[i] for a in args]
        exp = _reference(case.func, scal, rdt)
        if exp is None:
            continue
        compared += 1
        e = np.array([exp], dtype=rdt)
        if not H.exact_equal(e, out[i:i + 1])[0]:
            return ("%s: f(%s) = %r in CPython, %r from the kernel\n--- generated ---\n%s"
                    % (case.label, ", ".join(repr(s) for s in scal), e[0], out[i],
                       r.source[-2500:])), compared
    return None, compared
