"""Property-based tests of the kernel language: hypothesis generates random typed expressions and
small programs (if / elif / else, while with bounded trips, for over range with steps of both
signs, augmented assignment, chained comparisons, and / or, conditional expressions, mixed types
and weak literals); each is translated by cufunc.lang.translate, compiled with g++ against the
runtime header and run over edge and random inputs, and must agree 100% (bitwise) with CPython
running it on NumPy scalars. The translations are also compiled with NVRTC (sm_90) at the end.

Programs only use operations whose results are exact (integer and boolean arithmetic, float
+ - * / // %, comparisons, casts), so agreement is exact. Every local variable keeps one NumPy type
in CPython too (assignments are wrapped in a cast to it, as docs/language.md gives each variable one
type), and integer literals are small and non-negative (so CPython never raises OverflowError for
a weak literal).

Deterministic (derandomize=True, no example database): the same programs every run. Batches of
programs share one g++ build; shrinking is off (a failing batch reports every failing program
with its source, each is a few lines).
"""

import importlib.util
import os
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import lang_harness as H

LANG, T = H.import_cufunc()

N_PROGRAMS = 2200     # per run (>= 2,000)
BATCH = 440           # programs per g++ build
N_INPUTS = 24
ARG_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float32", "float64", "bool"]
NUM_TYPES = [t for t in ARG_TYPES if t != "bool"]
STATE = {"programs": 0, "sources": [], "generated": []}


def _sample(dtype):
    return np.dtype(dtype).type(3)


class Expr:
    __slots__ = ("text", "sample", "literal")

    def __init__(self, text, sample, literal=False):
        self.text, self.sample, self.literal = text, sample, literal

    @property
    def dtype(self):
        return np.asarray(self.sample).dtype if not self.literal else None


def _apply(op, a, b):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")  # a DeprecationWarning etc. counts as not allowed
        return eval("a %s b" % op, {"a": a, "b": b})


@st.composite
def exprs(draw, env, depth=2):
    """An expression over the variables in env ({name: dtype}); returns Expr."""
    names = sorted(env)
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        k = draw(st.integers(0, 9))
        if k <= 6 and names:
            n = draw(st.sampled_from(names))
            return Expr(n, _sample(env[n]))
        if k <= 8:
            v = draw(st.integers(0, 100))
            return Expr(str(v), v, literal=True)
        v = draw(st.sampled_from([0.5, 1.5, 2.0, 0.25, 3.75, 10.0]))
        return Expr(repr(v), v, literal=True)
    kind = draw(st.integers(0, 9))
    if kind == 0:  # unary minus / invert
        e = draw(exprs(env, depth - 1))
        if e.literal:
            return e
        op = draw(st.sampled_from(["-", "~"]))
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("error")
                s = -e.sample if op == "-" else ~e.sample
        except Exception:
            return e
        return Expr("(%s%s)" % (op, e.text), s)
    if kind == 1:  # conditional expression, both branches cast to one type
        t = draw(st.sampled_from(NUM_TYPES))
        c = draw(conds(env, depth - 1))
        a = draw(exprs(env, depth - 1))
        b = draw(exprs(env, depth - 1))
        return Expr("(np.%s(%s) if %s else np.%s(%s))" % (t, a.text, c, t, b.text), _sample(t))
    if kind == 2:  # cast
        t = draw(st.sampled_from(NUM_TYPES))
        e = draw(exprs(env, depth - 1))
        return Expr("np.%s(%s)" % (t, e.text), _sample(t))
    if kind == 3:  # builtins that stay exact
        e1 = draw(exprs(env, depth - 1))
        e2 = draw(exprs(env, depth - 1))
        f = draw(st.sampled_from(["min", "max", "abs"]))
        if f == "abs":
            if e1.literal:
                return e1
            return Expr("abs(%s)" % e1.text, abs(e1.sample))
        if e1.literal and e2.literal:
            return e1
        try:
            s = min(e1.sample, e2.sample) if f == "min" else max(e1.sample, e2.sample)
            with np.errstate(all="ignore"):
                np.asarray(e1.sample + e2.sample)  # a type error here: not comparable
        except Exception:
            return e1
        if (np.asarray(e1.sample).dtype != np.asarray(e2.sample).dtype):
            t1 = np.result_type(e1.sample, e2.sample).name
            return Expr("%s(np.%s(%s), np.%s(%s))" % (f, t1, e1.text, t1, e2.text), _sample(t1))
        return Expr("%s(%s, %s)" % (f, e1.text, e2.text), s)
    op = draw(st.sampled_from(["+", "-", "*", "/", "//", "%", "+", "*", "&", "|", "^", "<<", ">>", "**"]))
    a = draw(exprs(env, depth - 1))
    if op == "**":
        b = Expr(str(draw(st.integers(0, 3))), 2, literal=True)
        if b.text == "2" and a.dtype is not None and a.dtype.kind == "f":
            # a float ** 2 is x * x (correctly rounded, NumPy's array meaning), which CPython's
            # scalar pow() misses by 1 ulp in rare cases (seen: prog_1_370); test_lang_differential
            # checks it against np.square
            b = Expr("3", 2, literal=True)
    elif op in ("<<", ">>"):
        b = Expr(str(draw(st.integers(0, 9))), 2, literal=True)
    else:
        b = draw(exprs(env, depth - 1))
    if a.literal and b.literal:
        return a
    try:
        s = _apply(op, a.sample, b.sample)
    except Exception:
        return a
    if isinstance(s, (int, float)) and not isinstance(s, np.generic):
        return a
    return Expr("(%s %s %s)" % (a.text, op, b.text), s)


@st.composite
def conds(draw, env, depth=1):
    kind = draw(st.integers(0, 4))
    a = draw(exprs(env, depth))
    b = draw(exprs(env, depth))
    ops = ["<", "<=", ">", ">=", "==", "!="]
    if kind <= 1:
        return "(%s %s %s)" % (a.text, draw(st.sampled_from(ops)), b.text)
    if kind == 2:  # chained comparison
        c = draw(exprs(env, depth))
        return "(%s %s %s %s %s)" % (a.text, draw(st.sampled_from(ops)), b.text,
                                      draw(st.sampled_from(ops)), c.text)
    if kind == 3:
        c1 = draw(conds(env, 0)) if depth > 0 else "(%s < %s)" % (a.text, b.text)
        c2 = "(%s != %s)" % (a.text, b.text)
        return "(%s %s %s)" % (c1, draw(st.sampled_from(["and", "or"])), c2)
    return "(not (%s > %s))" % (a.text, b.text)


@st.composite
def blocks(draw, env, locals_, depth, indent, loopvars):
    """Statements: assignments (cast to the variable's type), augmented assignments, if/elif/
    else, bounded while, for over range with either sign of step."""
    pad = "    " * indent
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.integers(0, 9 if depth > 0 else 4))
        v = draw(st.sampled_from(sorted(locals_)))
        t = locals_[v]
        if kind <= 2:
            e = draw(exprs(env, 2))
            lines.append("%s%s = np.%s(%s)" % (pad, v, t, e.text))
        elif kind <= 4:
            ops = ["+", "-", "*"] + (["//", "%", "&", "|", "^"] if t[0] in "iu" else ["/", "//", "%"])
            e = draw(exprs(env, 1))
            lines.append("%s%s %s= np.%s(%s)" % (pad, v, draw(st.sampled_from(ops)), t, e.text))
        elif kind <= 6:
            lines.append("%sif %s:" % (pad, draw(conds(env))))
            lines += draw(blocks(env, locals_, depth - 1, indent + 1, loopvars))
            if draw(st.booleans()):
                lines.append("%selif %s:" % (pad, draw(conds(env))))
                lines += draw(blocks(env, locals_, depth - 1, indent + 1, loopvars))
            if draw(st.booleans()):
                lines.append("%selse:" % pad)
                lines += draw(blocks(env, locals_, depth - 1, indent + 1, loopvars))
        elif kind == 7:
            cnt = "n%d" % len(loopvars)
            trips = draw(st.integers(0, 6))
            lines.append("%s%s = 0" % (pad, cnt))
            lines.append("%swhile %s < %d and %s:" % (pad, cnt, trips, draw(conds(env, 0))))
            inner = draw(blocks(env, locals_, depth - 1, indent + 1, loopvars + [cnt]))
            lines += inner
            lines.append("%s    %s += 1" % (pad, cnt))
            if draw(st.booleans()):  # break out of a while too
                lines.insert(len(lines) - 1, "%s    if %s:\n%s        break" % (pad, draw(conds(env, 0)), pad))
        else:
            iv = "i%d" % len(loopvars)
            step = draw(st.sampled_from([1, 2, 3, -1, -2, -3]))
            start = draw(st.integers(-6, 6))
            stop = start + step * draw(st.integers(-1, 6))
            rng_txt = ("range(%d)" % stop if step == 1 and start == 0 and stop >= 0
                       else "range(%d, %d)" % (start, stop) if step == 1
                       else "range(%d, %d, %d)" % (start, stop, step))
            lines.append("%sfor %s in %s:" % (pad, iv, rng_txt))
            env2 = dict(env)
            env2["np.int64(%s)" % iv] = "int64"  # the loop variable, as a typed value
            inner = draw(blocks(env2, locals_, depth - 1, indent + 1, loopvars + [iv]))
            lines += inner
            if draw(st.integers(0, 3)) == 0:
                lines.insert(len(lines), "%s    if %s:\n%s        continue" % (pad, draw(conds(env, 0)), pad))
    return lines


@st.composite
def programs(draw):
    nargs = draw(st.integers(1, 3))
    argt = [draw(st.sampled_from(ARG_TYPES)) for _ in range(nargs)]
    args = ["a%d" % k for k in range(nargs)]
    env = dict(zip(args, argt))
    # locals: typed ones (cast on every assignment), and a weak-literal accumulator
    locals_ = {}
    body = []
    for k in range(draw(st.integers(1, 2))):
        t = draw(st.sampled_from(NUM_TYPES))
        v = "v%d" % k
        locals_[v] = t
        init = draw(exprs(env, 1))
        body.append("    %s = np.%s(%s)" % (v, t, init.text))
    acc_t = draw(st.sampled_from(["int64", "float64", "int8", "uint16", "float32"]))
    body.append("    acc = %s" % ("0" if acc_t[0] in "iu" else "0.0"))
    env_all = dict(env)
    env_all.update(locals_)
    body += draw(blocks(env_all, locals_, 2, 1, []))
    e = draw(exprs(env_all, 2))
    body.append("    acc += np.%s(%s)" % (acc_t, e.text))
    ret = draw(exprs(dict(env_all, acc=acc_t), 2))
    if draw(st.booleans()):
        body.append("    return %s" % ret.text)
        rtype = None
    else:  # a declared return type: the result is converted to it
        rtype = draw(st.sampled_from(NUM_TYPES))
        body.append("    return %s" % ret.text)
    return argt, rtype, body


def _write_module(batch, progs):
    lines = ["import numpy as np", ""]
    names = []
    for k, (argt, rtype, body) in enumerate(progs):
        name = "prog_%d_%d" % (batch, k)
        names.append(name)
        lines.append("def %s(%s):" % (name, ", ".join("a%d" % j for j in range(len(argt)))))
        lines += body
        lines.append("")
    src = "\n".join(lines) + "\n"
    path = os.path.join(H._cache_dir(), "hyp_batch_%d_%d.py" % (batch, os.getpid()))
    with open(path, "w") as f:
        f.write(src)
    modname = "hyp_batch_%d_%d" % (batch, os.getpid())
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    spec.loader.exec_module(mod)
    return [getattr(mod, n) for n in names]


def _inputs(argt, rng):
    out = []
    for t in argt:
        v = np.concatenate([H.edges(t), H.random_values(t, N_INPUTS, rng),
                            H.random_values(t, N_INPUTS, rng, *((-20 if t[0] == "i" else 0, 20) if t[0] in "iu"
                                                                else (None, None) if t == "bool" else (-3, 8)))])
        out.append(v)
    n = min(len(v) for v in out)
    rng2 = np.random.default_rng(len(out))
    return [rng2.permutation(v)[:max(n, 2 * N_INPUTS)] if len(v) > n else v[:n] for v in out]


@settings(max_examples=N_PROGRAMS, derandomize=True, database=None, deadline=None,
          phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
@given(programs())
def test_generate_programs(prog):
    """Hypothesis draws the programs (deterministically); they are translated, built and run in
    batches by test_random_programs_agree, one g++ build per batch."""
    STATE["generated"].append(prog)


def test_random_programs_agree():
    assert LANG is not None, "cufunc.lang.translate is not importable"
    progs = STATE["generated"]
    assert len(progs) >= 2000, "hypothesis generated only %d programs" % len(progs)
    failures = []
    for batch in range(0, len(progs), BATCH):
        chunk = progs[batch:batch + BATCH]
        funcs = _write_module(batch // BATCH, chunk)
        rng = np.random.default_rng(batch)
        cases = []
        for f, (argt, rtype, body) in zip(funcs, chunk):
            ins = _inputs(argt, rng)
            n = min(len(x) for x in ins)
            cases.append(H.Case(f, [getattr(T, "bool_" if t == "bool" else t) for t in argt],
                                rtype and getattr(T, rtype), [x[:n] for x in ins]))
        failures += H.run_cases(cases, LANG, nvrtc=False)
        STATE["programs"] += len(cases)
        STATE["sources"] += [c.result.source for c in cases if c.result is not None and c.error is None]
    assert not failures, "%d of %d programs disagree:\n\n%s" % (
        len(failures), len(progs), "\n\n".join(f[:2500] for f in failures[:8]))


def test_enough_programs_and_nvrtc():
    """At least 2,000 programs ran, and all their translations compile with NVRTC (sm_90)."""
    assert STATE["programs"] >= 2000, "only %d programs ran" % STATE["programs"]
    if not H.nvrtc_available():
        pytest.fail("NVRTC is not available to check the translations")
    # one program: the sources are include-guarded and concatenable
    src = '#include "cufunc/runtime.cuh"\n' + "\n".join(
        s.replace('#include "cufunc/runtime.cuh"', "") for s in STATE["sources"])
    ok, log = H.nvrtc_compile(src, ("-std=c++17", "--fmad=false"))
    assert ok, log[-4000:]
