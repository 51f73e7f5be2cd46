"""The translator translates exactly the function it is given, or raises cufunc's own error.

Finding a function's source is where a translator can silently pick the wrong body: two lambdas
on one line, nested defs of one name, a file edited after import, exec'd code, closures over loop
variables, private names mangled in classes. Each case here either translates to code that agrees
with CPython running the same function object (built with g++ by lang_harness, no GPU) or raises
SourceError / TypingError / UnsupportedError with the user's file and line.
"""

import ast
import functools
import importlib.util
import linecache
import os
import sys
import textwrap
import types

import numpy as np
import pytest

import lang_harness as H
import cufunc
import cufunc.lang as L
import cufunc.lang.source as S
import cufunc.types as T
from cufunc.errors import TypingError, UnsupportedError

THIS_FILE = os.path.abspath(__file__)

# -------------------------------------------------------------------------------- the hard
# cases: several lambdas on one line, with the same parameter names
FS = [lambda x: x + 1.0, lambda x: x * 2.0]
G = (lambda x, y: x + y); H2 = (lambda x, y: x * y)  # noqa: E702
THREE = (lambda x: x - 1.0, lambda x: x * 3.0, lambda x: x / 4.0)
NESTED = lambda x: (lambda y: y + 10.0)(x) * 2.0  # noqa: E731  (a lambda in a lambda)
MULTI = (lambda x:
         x * 5.0, lambda x:
         x - 5.0)
UNI = "é"; UNIS = [lambda x: x + 7.0, lambda x: x - 7.0]  # noqa: E702  (columns are bytes)
SAME_CODE = [lambda x: x * (2.0 * 3.0), lambda x: x * 6.0]   # one bytecode on Python 3.10
TUPLE_OUT = [lambda x: (x, x + 1.0), lambda x: x * 2.0]


def _make_closures():
    return [lambda x: x + k for k in (1.0, 2.0, 3.0)]            # one cell: k is 3.0 for all


def _make_bound():
    return [(lambda k: lambda x: x + k)(k) for k in (1.0, 2.0, 3.0)]   # one code, 3 cells


def _outer_a():
    def helper(x):
        return x + 100.0
    return helper


def _outer_b():
    def helper(x):
        return x - 100.0
    return helper


__SCALE = 2.0
_Holder__SCALE = 3.0   # what CPython reads for __SCALE inside class _Holder


class _Holder:
    @staticmethod
    def scaled(x):
        return x * __SCALE  # noqa: F821  (mangled to _Holder__SCALE, as CPython does)

    @staticmethod
    def plain(x):
        return x + 0.5

    def method(self, x):
        return x + 1.0

    def make(self):
        __k = 4.0
        return lambda x: x * __k


def _f8_case(func, nargs=1, ref=None):
    rng = np.random.default_rng(7)
    ins = [H.values_for("float64", 16, rng) for _ in range(nargs)]
    n = min(len(i) for i in ins)
    return H.Case(func, [T.float64] * nargs, None, [i[:n] for i in ins], ref=ref,
                  label=getattr(func, "__qualname__", "f"))


def test_each_lambda_on_a_line_is_its_own():
    """Every lambda translates to its own body: run against CPython over edge and random
    values (picking a neighbour on the line would give other values)."""
    cases = [_f8_case(f) for f in FS + list(THREE) + [MULTI[0], MULTI[1], _nested_inner()] + UNIS]
    cases += [_f8_case(G, 2), _f8_case(H2, 2)]
    cases += [_f8_case(f) for f in _make_bound()]
    cases += [_f8_case(f) for f in _make_closures()]
    cases += [_f8_case(_outer_a()), _f8_case(_outer_b())]
    cases += [_f8_case(_Holder.scaled), _f8_case(_Holder.plain), _f8_case(_Holder().make())]
    failures = H.run_cases(cases, L, nvrtc=False)
    assert not failures, "\n\n".join(failures)


def _nested_inner():
    """The inner lambda of NESTED as a function of its own (same line as the outer one)."""
    code = [c for c in NESTED.__code__.co_consts if isinstance(c, types.CodeType)][0]
    return types.FunctionType(code, globals())


def test_lambda_in_a_lambda():
    assert _returned(_nested_inner()) == "return (y + 10.0);"
    with pytest.raises(UnsupportedError, match="lambda is not supported") as ei:
        L.translate(NESTED, [T.float64])
    assert str(ei.value).splitlines()[-1].strip() == "^" * len("(lambda y: y + 10.0)") or \
        str(ei.value).splitlines()[-1].strip() == "^" * len("lambda y: y + 10.0")


def _returned(func, types=(T.float64,)):
    """The C expression the entry function returns."""
    r = L.translate(func, list(types))
    body = r.source.split(r.name + "(", 1)[1]
    rets = [l.strip() for l in body.splitlines() if l.strip().startswith("return ")]
    return rets[-1]


def test_lambdas_on_one_line_give_their_own_source():
    assert _returned(FS[0]) == "return (x + 1.0);"
    assert _returned(FS[1]) == "return (x * 2.0);"
    assert _returned(G, [T.float64] * 2) == "return (x + y);"
    assert _returned(H2, [T.float64] * 2) == "return (x * y);"
    assert _returned(_Holder.scaled) == "return (x * 3.0);"


def test_same_bytecode_on_one_line():
    """Python 3.11+ records columns: each lambda is found exactly. Python 3.10 does not, and
    these two compile to the same bytecode with different ASTs: SourceError, never a guess."""
    if sys.version_info >= (3, 11):
        for f in SAME_CODE:
            assert _returned(f) == "return (x * 6.0);"
            assert isinstance(S.get_source(f).tree, ast.Lambda)
        assert S.get_source(SAME_CODE[0]).tree.col_offset < S.get_source(SAME_CODE[1]).tree.col_offset
    else:
        for f in SAME_CODE:
            with pytest.raises(S.SourceError, match="use|def"):
                L.translate(f, [T.float64])


def test_errors_point_at_the_right_lambda():
    """The caret of a located error is under the lambda that was translated."""
    line = [l for l in open(THIS_FILE) if l.startswith("BAD = ")][0]
    for f, construct in zip(BAD, ("[x]", "{x}")):
        with pytest.raises(UnsupportedError) as ei:
            L.translate(f, [T.float64])
        text = str(ei.value)
        shown, caret = text.splitlines()[-2:]
        assert shown.strip() == line.strip()
        col = caret.index("^") - (len(shown) - len(shown.lstrip()))
        assert shown.strip()[col:].startswith(construct), text
        assert ei.value.cufunc_location == (THIS_FILE, BAD_LINE)


BAD_LINE = sys._getframe().f_lineno + 1
BAD = [lambda x: [x], lambda x: {x}]


def test_vectorize_counts_outputs_of_the_right_lambda():
    assert cufunc.vectorize(TUPLE_OUT[0]).nout == 2
    assert cufunc.vectorize(TUPLE_OUT[1]).nout == 1


# -------------------------------------------------------------------------------- closures


def test_closure_cells_are_read_at_compile_time():
    """docs/language.md: captured values are constants when the function is compiled. A lambda in a
    loop shares one cell (CPython gives its last value too); a rebinding after compilation does
    not change what was compiled, and the next compilation sees it."""
    fs = _make_closures()
    assert {_returned(f) for f in fs} == {"return (x + 3.0);"}
    assert [_returned(f) for f in _make_bound()] == [
        "return (x + 1.0);", "return (x + 2.0);", "return (x + 3.0);"]

    def outer():
        k = 1.0
        f = lambda x: x + k  # noqa: E731
        first = _returned(f)
        k = 5.0
        return first, _returned(f)
    assert outer() == ("return (x + 1.0);", "return (x + 5.0);")


k_unbound = 99.0


def test_empty_cell_is_an_error_not_a_global():
    """An enclosing variable not assigned yet is not the global of the same name (CPython raises
    NameError when such a lambda runs)."""
    def outer():
        f = lambda x: x + k_unbound  # noqa: E731
        try:
            L.translate(f, [T.float64])
        finally:
            k_unbound = 1.0  # noqa: F841
    with pytest.raises(TypingError, match="free variable 'k_unbound' has no value yet") as ei:
        outer()
    assert ei.value.cufunc_location[0] == THIS_FILE


LOOP_RESULTS = []
for _k in range(3):
    def _loop_body(x):
        return x + _k
    LOOP_RESULTS.append((_loop_body, _returned(_loop_body, [T.int64])))


def test_functions_redefined_in_a_loop():
    """One def run three times: three function objects with one code object. Each compiled
    with the global's value at its compilation; all three find the same (right) source."""
    assert [r for _, r in LOOP_RESULTS] == ["return cf_add(x, %dLL);" % k for k in range(3)]
    assert len({f.__code__ for f, _ in LOOP_RESULTS}) == 1
    assert len({id(f) for f, _ in LOOP_RESULTS}) == 3


def test_nested_defs_of_one_name():
    assert _returned(_outer_a()) == "return (x + 100.0);"
    assert _returned(_outer_b()) == "return (x - 100.0);"


def test_private_names_are_mangled_as_cpython_does():
    assert _Holder.scaled(1.0) == 3.0
    assert _returned(_Holder.scaled) == "return (x * 3.0);"
    assert _returned(_Holder().make()) == "return (x * 4.0);"


# -------------------------------------------------------------------------------- not functions

def _add(x, y):
    return x + y


class _Callable:
    def __call__(self, x):
        return x


@pytest.mark.parametrize("obj, message", [
    (_Holder().method, "bound method"),
    (staticmethod(_add), "staticmethod object"),
    (classmethod(_add), "classmethod object"),
    (functools.partial(_add, 1.0), "functools.partial"),
    (len, "not a Python function"),
    (np.sqrt, "not a Python function"),
    (_Callable(), "not a Python function"),
    (_Callable, "class"),
], ids=["bound-method", "staticmethod", "classmethod", "partial", "builtin", "np-ufunc",
        "callable-object", "class"])
def test_objects_that_are_not_functions(obj, message):
    with pytest.raises(S.SourceError, match=message):
        L.translate(obj, [T.float64])
    assert issubclass(S.SourceError, UnsupportedError)


def test_staticmethod_from_the_class_is_a_function():
    assert _returned(_Holder.plain) == "return (x + 0.5);"


# -------------------------------------------------------------------------------- exec, linecache

def _exec_function(text, filename, register=None):
    ns = {}
    exec(compile(text, filename, "exec"), ns)
    if register is not None:
        linecache.cache[filename] = (len(register), None, register.splitlines(True), filename)
    return ns["f"]


def test_exec_without_source_is_an_error():
    f = _exec_function("def f(x):\n    return x + 1.0\n", "<cufunc-test-exec-1>")
    with pytest.raises(S.SourceError, match="source code is not available") as ei:
        L.translate(f, [T.float64])
    assert ei.value.cufunc_location == ("<cufunc-test-exec-1>", 1)


def test_exec_with_registered_source():
    """The source registered in linecache is used when it is the code's source exactly, and
    refused when it is not."""
    text = "g = 1\nf = (lambda x: x - 2.0); h = (lambda x: x + 2.0)\n"
    try:
        f = _exec_function(text, "<cufunc-test-exec-2>", register=text)
        assert _returned(f) == "return (x - 2.0);"
        f = _exec_function(text, "<cufunc-test-exec-3>",
                           register=text.replace("x - 2.0", "x - 3.0"))
        with pytest.raises(S.SourceError, match="cannot be confirmed"):
            L.translate(f, [T.float64])
    finally:
        for name in ("<cufunc-test-exec-2>", "<cufunc-test-exec-3>"):
            linecache.cache.pop(name, None)


# -------------------------------------------------------------------------------- edited files

def _import_file(path, name):
    spec = importlib.util.spec_from_file_location(name, str(path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("edit", [
    "def f(x):\n    return x + 2.0\n",            # same place, other body
    "\ndef f(x):\n    return x + 1.0\n",          # same body, moved down a line
    "def f(x):\n    return x + 1.0 +\n",          # no longer parses
    "fs = [lambda x: x * 9.0, lambda x: x + 1.0]\n",
], ids=["other-body", "moved", "broken", "lambdas"])
def test_file_edited_after_import(tmp_path, edit):
    """The source file no longer matches the running code: SourceError, not the new body."""
    path = tmp_path / ("edited_%s.py" % abs(hash(edit)))
    path.write_text("def f(x):\n    return x + 1.0\n")
    mod = _import_file(path, path.stem)
    linecache.checkcache(str(path))
    path.write_text(edit)
    os.utime(path, (1, 1))      # a different mtime even within the clock's resolution
    linecache.checkcache(str(path))
    with pytest.raises(S.SourceError, match="edited after it was imported") as ei:
        L.translate(mod.f, [T.float64])
    assert ei.value.cufunc_location == (str(path), 1)


def test_file_edited_after_its_source_was_read(tmp_path):
    """linecache still holds the text the code was compiled from: that text is the right one."""
    path = tmp_path / "edited_late.py"
    path.write_text("def f(x):\n    return x + 1.0\n")
    mod = _import_file(path, "edited_late")
    assert _returned(mod.f) == "return (x + 1.0);"
    path.write_text("def f(x):\n    return x + 2.0\n")
    assert _returned(mod.f) == "return (x + 1.0);"


def test_pytest_rewritten_assert_is_translated():
    """pytest rewrites asserts, so such a def's code never matches its source; the one def at
    that line is taken as written, and its assert translated (compiled away without debug=True,
    checked with it, at the assert's own line)."""
    def with_assert(x):
        assert x > 0
        return x
    assert "cf_lang_assert_fail(\"" not in L.translate(with_assert, [T.float64]).source
    src = L.translate(with_assert, [T.float64], debug=True).source
    assert "test_lang_source.py:%d" % (with_assert.__code__.co_firstlineno + 1) in src


# -------------------------------------------------------------------------------- layouts

def test_fallback_layouts(tmp_path):
    """Layouts the rebuilt text cannot hold (a lambda at column 0 inside a closure, a def with a
    one-space indent in a class) are confirmed by compiling the AST instead."""
    path = tmp_path / "layouts.py"
    path.write_text(textwrap.dedent("""\
        def outer(k):
            return (
        lambda x: x + k)
        class C:
         @staticmethod
         def f(x):
          return x * 3.0
        """))
    mod = _import_file(path, "layouts_mod")
    f = mod.outer(2.0)
    lines = linecache.getlines(str(path))
    _, imports, by_line, parents = S._parse_file(str(path), "".join(lines), f.__code__)
    node = S._candidates(f.__code__, by_line)[0]
    assert S._rebuild_text(f.__code__, node, [l.rstrip("\n") for l in lines], parents,
                           imports) is None
    assert _returned(f) == "return (x + 2.0);"
    assert _returned(mod.C.f) == "return (x * 3.0);"


# -------------------------------------------------------------------------------- deep bodies

def _deep_module(tmp_path, name, body_lines):
    path = tmp_path / (name + ".py")
    path.write_text("def f(x):\n" + "".join("    %s\n" % l for l in body_lines))
    return _import_file(path, name).f, str(path)


def _sum(n):
    return ["return " + " + ".join(["x"] * n)]


def _elif(n):
    lines = ["if x == 0:", "    return 0.0"]
    for i in range(1, n):
        lines += ["elif x == %d:" % i, "    return %d.5" % i]
    return lines + ["else:", "    return -1.0"]


def test_deep_sum_and_elif_chain_translate_and_run(tmp_path):
    """A 2000-term sum and a 1000-branch elif chain translate (they used to raise a bare
    RecursionError at 500 terms), agree with CPython (g++), and NVRTC accepts them."""
    f_sum, _ = _deep_module(tmp_path, "deep_sum", _sum(2000))
    f_elif, _ = _deep_module(tmp_path, "deep_elif", _elif(1000))
    rng = np.random.default_rng(1)
    x = np.concatenate([np.arange(-3, 1005, dtype=np.float64), H.values_for("float64", 20, rng)])
    cases = [H.Case(f_sum, [T.float64], None, [x]), H.Case(f_elif, [T.float64], None, [x])]
    failures = H.run_cases(cases, L, nvrtc=True)
    assert not failures, "\n".join(f[:3000] for f in failures)
    assert sys.getrecursionlimit() < S._DEEP_RECURSION      # restored after the deep run


def test_deep_integer_and_call_chains_translate(tmp_path):
    """Chains whose C is nested calls (int32 wrap-around adds, floor divisions), not only
    operators, translate as deep as a float sum: CPython 3.12.0-3.12.1 stop recursion through C
    at about 1,500 levels, so rendering the C must not recurse level by level."""
    bodies = {"int_sum": ["return " + " + ".join(["x", "1"] * 1000)],
              "floordiv": ["return " + " // ".join(["x"] * 1000)],
              "assigned": ["v = " + " + ".join(["x"] * 2000), "return v * v"]}
    for name, body in bodies.items():
        f, _ = _deep_module(tmp_path, "deep_" + name, body)
        for t in (T.int32, T.float64):
            src = L.translate(f, [t]).source
            assert src.count("(") >= 1000, (name, t)


def test_rendering_a_deep_expression_needs_no_deep_stack():
    """The C text of a 3,000-level expression renders within a recursion limit of a few hundred
    frames above the caller (the rendering keeps an explicit stack)."""
    from cufunc.lang import ir
    x = ir.Val(T.float64, "x", simple=True)
    v = x
    for _ in range(3000):
        v = ir.Infix(T.float64, "+", [v, x])
    w = ir.Call(T.float64, "f", [v])
    for _ in range(3000):
        w = ir.Call(T.float64, "f", [w, x])

    def depth():
        f, n = sys._getframe(), 0
        while f is not None:
            f, n = f.f_back, n + 1
        return n
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth() + 200)
    try:
        text, called = v.c, w.c
    finally:
        sys.setrecursionlimit(old)
    assert text == "(" * 3000 + "x" + " + x)" * 3000
    assert called.startswith("f(" * 3001 + "(" * 3000 + "x + x)") and called.endswith(", x)" * 3000)


def test_errors_in_deep_bodies_keep_their_class_and_line(tmp_path):
    """A construct the language rejects, found during the deep-stack run, is raised as usual."""
    f, path = _deep_module(tmp_path, "deep_error", ["v = " + " + ".join(["x"] * 1500),
                                                    "return v + 'text'"])
    with pytest.raises(UnsupportedError, match="a string is not supported") as ei:
        L.translate(f, [T.float64])
    assert ei.value.cufunc_location == (path, 3)


def test_deeper_than_the_limit_is_a_located_error(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "MAX_NESTING", 300)
    f, path = _deep_module(tmp_path, "deep_limit", _sum(400))
    with pytest.raises(UnsupportedError, match="nested 40[0-9] levels deep, more than the 300") \
            as ei:
        L.translate(f, [T.float64])
    assert ei.value.cufunc_location == (path, 2)
    f, path = _deep_module(tmp_path, "deep_limit_elif", _elif(400))
    with pytest.raises(UnsupportedError, match="levels deep") as ei:
        L.translate(f, [T.float64])
    assert ei.value.cufunc_location[0] == path and ei.value.cufunc_location[1] > 500


def test_recursion_limit_reached_is_a_located_error(tmp_path, monkeypatch):
    """Should the deep run still exhaust the recursion limit, the error is cufunc's, located."""
    monkeypatch.setattr(S, "_DEEP_RECURSION", 1100)
    f, path = _deep_module(tmp_path, "deep_recursion", _sum(2000))
    with pytest.raises(UnsupportedError, match="nested too deeply to translate") as ei:
        L.translate(f, [T.float64])
    assert not isinstance(ei.value, RecursionError)
    assert ei.value.cufunc_location == (path, 2)


def test_ast_parse_recursion_is_a_source_error(tmp_path, monkeypatch):
    """Python's own parser gives up on very deep files (RecursionError 'during ast
    construction'): SourceError naming the function, not a RecursionError."""
    f, path = _deep_module(tmp_path, "deep_parse", _sum(3))

    def parse(*a, **k):
        raise RecursionError("maximum recursion depth exceeded during ast construction")
    monkeypatch.setattr(S, "_ast_parse", parse)
    with pytest.raises(S.SourceError, match="nested too deeply for Python's ast") as ei:
        L.translate(f, [T.float64])
    assert ei.value.cufunc_location == (path, 1)


# -------------------------------------------------------------------------------- integer constants

BIG = 10 ** 20


def i_index_folded(a):
    return a[10 ** 20]  # MARK


def i_index_literal(a):
    return a[100000000000000000000]  # MARK


def i_index_global(a):
    return a[BIG]  # MARK


def i_index_uint64_max(a):
    return a[2 ** 64 - 1]  # MARK


def i_index_above_int64(a):
    return a[2 ** 63]  # MARK


def i_index_below_int64(a):
    return a[-2 ** 63 - 1]  # MARK


def i_local_extent(a):
    t = cufunc.cuda.local.array(10 ** 20, np.float64)  # MARK
    return t[0]


def i_add_folded(a):
    return a[0] + 10 ** 20  # MARK


def i_add_literal(a):
    return a[0] + 100000000000000000000  # MARK


def _line_of(func):
    import inspect
    lines, first = inspect.getsourcelines(func)
    return first + [i for i, l in enumerate(lines) if "MARK" in l][0]


BEYOND = "the integer 100000000000000000000 does not fit in 64 bits"


@pytest.mark.parametrize("func, message", [
    (i_index_folded, BEYOND),
    (i_index_literal, BEYOND),
    (i_index_global, "the global 'BIG' = 100000000000000000000 does not fit in 64 bits"),
    (i_index_uint64_max, "the integer 18446744073709551615 does not fit in int64 (an array "
                         "index is an int64)"),
    (i_index_above_int64, "the integer 9223372036854775808 does not fit in int64"),
    (i_index_below_int64, "the integer -9223372036854775809 does not fit in 64 bits"),
    (i_local_extent, "does not fit in 64 bits (a local array extent is an int64)"),
    (i_add_folded, BEYOND),
    (i_add_literal, BEYOND),
], ids=lambda v: getattr(v, "__name__", "")[:30])
def test_integer_constants_one_rule(func, message):
    """Folded, literal and global integers out of range are the same located error wherever
    they are used (an index used to be written as an out-of-range C literal)."""
    with pytest.raises(TypingError) as ei:
        L.translate(func, [T.float64[:]])
    assert message in str(ei.value), str(ei.value)
    assert ei.value.cufunc_location == (THIS_FILE, _line_of(func))


def i_index_int64_min(a):
    return a[-2 ** 63] + a[2 ** 63 - 1] + a[-1] + a[2 ** 64 - 2 ** 64 + 1]


def test_integer_constant_indices_in_range_compile():
    r = L.translate(i_index_int64_min, [T.float64[:]])
    assert "9223372036854775808" not in r.source.split(r.name, 1)[1]
    ok, log = H.nvrtc_compile(r.source + '\nextern "C" __global__ void k(cf_float64 *o, '
                              '%s a) { *o = %s(a); }\n' % (T.float64[:].cname, r.name),
                              ("-std=c++17", "--fmad=false"))
    assert ok, log


def i_local_too_big(a):
    t = cufunc.cuda.local.array((1024, 1024), np.float64)  # MARK
    return t[0, 0]


def test_local_array_larger_than_cuda_allows():
    with pytest.raises(UnsupportedError, match="larger than the 524288 bytes") as ei:
        L.translate(i_local_too_big, [T.float64[:]])
    assert ei.value.cufunc_location == (THIS_FILE, _line_of(i_local_too_big))
