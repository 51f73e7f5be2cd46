"""Every construct docs/language.md rejects, and type errors, fail at translation time with
TypingError or UnsupportedError naming the construct, the user's file and line, and showing the
line with a caret. No GPU needed; nothing here reaches NVRTC."""

import inspect
import math
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


import cufunc.lang as L  # noqa: E402
import cufunc.types as T  # noqa: E402
TypingError, UnsupportedError = L.TypingError, L.UnsupportedError
THIS_FILE = os.path.abspath(__file__)


def line_of(func, marker):
    """The file line of the first source line of func containing marker."""
    lines, first = inspect.getsourcelines(func)
    for i, l in enumerate(lines):
        if marker in l:
            return first + i, l
    raise AssertionError("marker %r not in %s" % (marker, func.__name__))


def check_error(func, argtypes, cls, message, marker, ret=None):
    """translate() raises cls; the message contains `message`, the file and line of `marker`,
    the source line and a caret under the construct."""
    with pytest.raises(cls) as ei:
        L.translate(func, argtypes, ret)
    text = str(ei.value)
    assert message in text, text
    lineno, line = line_of(func, marker)
    assert 'File "%s", line %d' % (THIS_FILE, lineno) in text, text
    shown = [l for l in text.splitlines() if l.strip() == line.strip()]
    assert shown, "source line not shown:\n" + text
    lines = text.splitlines()
    k = lines.index(shown[0])
    caret = lines[k + 1]
    assert set(caret.strip()) == {"^"}, text
    # the caret points into the line, at the marker's construct
    col = caret.index("^") - (len(shown[0]) - len(shown[0].lstrip()))
    src = shown[0].strip()
    assert 0 <= col < len(src)
    assert ei.value.cufunc_location == (THIS_FILE, lineno)
    return text


# --------------------------------------------------------------------------------------------
# unsupported statements

def f_try(x):
    try:  # MARK
        return x
    except Exception:
        return 0


def f_with(x):
    with open("x"):  # MARK
        pass
    return x


def f_global(x):
    global G  # MARK
    return x


def f_nonlocal():
    y = 1

    def inner(x):
        nonlocal y  # MARK
        return x
    return inner


def f_del(x):
    y = x
    del y  # MARK
    return x


def f_import(x):
    import math  # MARK
    return x


def f_import_from(x):
    from math import sqrt  # MARK
    return x


def f_nested_def(x):
    def g(y):  # MARK
        return y
    return x


def f_class(x):
    class C:  # MARK
        pass
    return x


def f_for_tuple_target(x):
    for i, j in range(3):  # MARK
        pass
    return x


def f_starred_assign(x):
    a, *b = x, x  # MARK
    return a


def f_attr_store(x):
    x.real = 1  # MARK
    return x


STATEMENTS = [
    (f_try, "try is not supported"),
    (f_with, "with is not supported"),
    (f_global, "global is not supported"),
    (f_del, "del is not supported"),
    (f_import, "import is not supported"),
    (f_import_from, "import is not supported"),
    (f_nested_def, "a nested def is not supported"),
    (f_class, "class is not supported"),
    (f_starred_assign, "starred"),
    (f_attr_store, "assigning to an attribute is not supported"),
]


@pytest.mark.parametrize("func,message", STATEMENTS, ids=[s[0].__name__ for s in STATEMENTS])
def test_unsupported_statement(func, message):
    check_error(func, [T.float32], UnsupportedError, message, "# MARK")


def test_nonlocal():
    check_error(f_nonlocal(), [T.float32], UnsupportedError, "nonlocal is not supported",
                "# MARK")


# --------------------------------------------------------------------------------------------
# unsupported expressions

def e_lambda(x):
    f = lambda y: y  # MARK  # noqa: E731
    return x


def e_list(x):
    a = [x, x]  # MARK
    return x


def e_dict(x):
    a = {1: x}  # MARK
    return x


def e_set(x):
    a = {x}  # MARK
    return x


def e_listcomp(x):
    a = [i for i in range(3)]  # MARK
    return x


def e_setcomp(x):
    a = {i for i in range(3)}  # MARK
    return x


def e_dictcomp(x):
    a = {i: i for i in range(3)}  # MARK
    return x


def e_genexp(x):
    g = (i for i in range(3))  # MARK
    return x


def e_yield(x):
    yield x  # MARK


def e_string(x):
    s = "abc"  # MARK
    return x


def e_fstring(x):
    s = f"{x}"  # MARK
    return x


def e_is(x):
    return x is None  # MARK


def e_none_value(x):
    y = None  # MARK
    return x


def e_matmul(x):
    return x @ x  # MARK


def e_unknown_call(x):
    return sum((x, x))  # MARK


def e_method_call(x):
    return x.astype(np.int8)  # MARK


def e_kwargs_call(x):
    return round(x, ndigits=2)  # MARK


def e_round_ndigits(x):
    return round(x, 2)  # MARK


def e_pow3(x):
    return pow(x, 2, 3)  # MARK


def e_min_iterable(x):
    return min(x)  # MARK


def e_range_value(x):
    r = range(3)  # MARK
    return x


def e_array_attr(A):
    return A.dtype  # MARK


def e_partial_index(A):
    return A[0]  # MARK


def e_return_array(A):
    return A  # MARK


EXPRESSIONS = [
    (e_lambda, [T.float32], "lambda is not supported"),
    (e_list, [T.float32], "a list display is not supported"),
    (e_dict, [T.float32], "a dict display is not supported"),
    (e_set, [T.float32], "a set display is not supported"),
    (e_listcomp, [T.float32], "a list comprehension is not supported"),
    (e_setcomp, [T.float32], "a set comprehension is not supported"),
    (e_dictcomp, [T.float32], "a dict comprehension is not supported"),
    (e_genexp, [T.float32], "a generator expression is not supported"),
    (e_yield, [T.float32], "yield is not supported"),
    (e_string, [T.float32], "a string is not supported"),
    (e_fstring, [T.float32], "an f-string is not supported"),
    (e_is, [T.float32], "the operator 'is' is not supported"),
    (e_none_value, [T.float32], "None as a value is not supported"),
    (e_matmul, [T.float32], "the operator '@' is not supported"),
    (e_unknown_call, [T.float32], "calling sum() is not supported"),
    (e_method_call, [T.float32], "method call .astype() is not supported"),
    (e_kwargs_call, [T.float32], "keyword arguments are not supported"),
    (e_round_ndigits, [T.int32], "round() of an integer with ndigits is not supported"),
    (e_pow3, [T.float32], "3-argument form is not supported"),
    (e_min_iterable, [T.float32], "iterables are not supported"),
    (e_range_value, [T.float32], "range() can only be used as the iterable of a for loop"),
    (e_array_attr, [T.float32[:]], "array attribute '.dtype' is not supported"),
    (e_partial_index, [T.float32[:, :]], "returning an array is not supported"),
    (e_return_array, [T.float32[:]], "returning an array is not supported"),
]


@pytest.mark.parametrize("func,args,message", EXPRESSIONS,
                         ids=[s[0].__name__ for s in EXPRESSIONS])
def test_unsupported_expression(func, args, message):
    check_error(func, args, UnsupportedError, message, "# MARK")


# --------------------------------------------------------------------------------------------
# type errors

def t_bitwise_float(x):
    return x & 1  # MARK


def t_floordiv_complex(z):
    return z // 2  # MARK


def t_index_float(A, x):
    return A[x]  # MARK


def t_index_bool(A, b):
    return A[b]  # MARK


def t_unify_tuple_number(x):
    y = (x, x)
    y = x  # MARK
    return x


def t_unify_arrays(A, B):
    C = A
    C = B  # MARK
    return 0


def t_undefined_name(x):
    return x + undefined_thing  # MARK  # noqa: F821


def t_used_before_assignment(x):
    y = y + 1  # MARK  # noqa: F821
    return x


def t_void_returns_value(x):
    return x  # MARK


def t_range_float(x):
    for i in range(x):  # MARK
        pass
    return x


def t_math_complex(z):
    return _math_sqrt(z)  # MARK


def _math_sqrt(z):
    return math.sqrt(z)


def t_bool_negate(b):
    return -b  # MARK


def t_bool_subtract(a, b):
    return a - b  # MARK


def t_store_table(i):
    TABLE[i] = 1  # MARK


TABLE = np.arange(4.0)


def t_literal_overflow(x):
    return x + 1000  # MARK


def t_literal_too_big(x):
    return x + 2 ** 70  # MARK


def t_global_too_big(x):
    return x + BIG  # MARK


BIG = 2 ** 65


def t_wrong_arg_count(x):
    return x  # MARK


def t_unpack_count(x):
    a, b, c = x, x  # MARK
    return a


def t_call_device_bad_args(x):
    return _two_args(x)  # MARK


def _two_args(a, b):
    return a + b


def t_store_tuple_item(x):
    t = (x, x)
    t[0] = 1  # MARK
    return x


def t_local_array_shape(n):
    a = L.local.array(n, np.float32)  # MARK
    return n


def t_local_array_dtype(n):
    a = L.local.array(4, "notatype")  # MARK
    return n


def _void_fn(x):
    pass


def t_void_in_expression(x):
    return _void_fn(x) + 1  # MARK


TYPE_ERRORS = [
    (t_void_in_expression, [T.float32], None, "the called function returns nothing (None)"),
    (t_bitwise_float, [T.float32], None, "unsupported operand types for &: float32"),
    (t_floordiv_complex, [T.complex64], None, "unsupported operand types for //: complex64"),
    (t_index_float, [T.float32[:], T.float32], None, "array index must be an integer"),
    (t_index_bool, [T.float32[:], T.bool_], None, "array index must be an integer, not bool"),
    (t_unify_tuple_number, [T.float32], None, "variable 'y' is assigned values of types"),
    (t_unify_arrays, [T.float32[:], T.float64[:]], None, "variable 'C' is assigned values"),
    (t_undefined_name, [T.float32], None, "name 'undefined_thing' is not defined"),
    (t_used_before_assignment, [T.float32], None,
     "variable 'y' is used before it is assigned a value"),
    (t_void_returns_value, [T.float32], T.void, "declared to return nothing (void)"),
    (f_for_tuple_target, [T.float32], None, "cannot unpack int (Python) into 2 names"),
    (t_range_float, [T.float32], None, "range() arguments must be integers, not float32"),
    (t_bool_negate, [T.bool_], None, "bad operand type for unary -: bool"),
    (t_bool_subtract, [T.bool_, T.bool_], None, "unsupported operand types for -: bool and bool"),
    (t_store_table, [T.int32], None, "read-only constant table"),
    (t_literal_overflow, [T.int8], None, "Python integer 1000 out of bounds for int8"),
    (t_literal_too_big, [T.int64], None, "does not fit in 64 bits"),
    (t_global_too_big, [T.int64], None, "does not fit in 64 bits"),
    (t_unpack_count, [T.float32], None, "cannot unpack a tuple of 2 items into 3 names"),
    (t_store_tuple_item, [T.float32], None, "tuples are immutable"),
    (t_local_array_shape, [T.int32], None, "shape of a local array must be a constant"),
    (t_local_array_dtype, [T.int32], None, "dtype of a local array must be a scalar type"),
]


@pytest.mark.parametrize("func,args,ret,message", TYPE_ERRORS,
                         ids=[s[0].__name__ for s in TYPE_ERRORS])
def test_type_error(func, args, ret, message):
    with pytest.raises((TypingError, UnsupportedError)) as ei:
        L.translate(func, args, ret)
    check_error(func, args, type(ei.value), message, "# MARK", ret)


def test_typing_error_is_a_type_error():
    assert issubclass(TypingError, TypeError) and issubclass(UnsupportedError, TypeError)


def test_error_in_called_function_points_at_both():
    with pytest.raises(TypingError) as ei:
        L.translate(t_math_complex, [T.complex64])
    text = str(ei.value)
    # the callee's line (math.sqrt of a complex) and the caller's call site are both shown
    assert "needs a real number, not complex64" in text
    assert "return math.sqrt(z)" in text and "return _math_sqrt(z)" in text
    assert "called from" in text


def test_wrong_number_of_arguments():
    with pytest.raises(TypingError, match="takes 1 argument"):
        L.translate(t_wrong_arg_count, [T.float32, T.float32])
    with pytest.raises(TypingError) as ei:
        L.translate(t_call_device_bad_args, [T.float32])
    assert "_two_args takes 2 argument(s) but the signature gives 1" in str(ei.value)
    assert "_two_args(x)" in str(ei.value)


# --------------------------------------------------------------------------------------------
# recursion

def rec_direct(n):
    if n <= 0:
        return 0
    return n + rec_direct(n - 1)  # MARK


def rec_a(n):
    return rec_b(n)  # MARK


def rec_b(n):
    return rec_a(n - 1)


@L.jit(device=True)
def rec_jit(n):
    return rec_jit(n - 1) if n > 0 else 0  # MARK


def test_recursion_is_a_clear_error():
    text = check_error(rec_direct, [T.int32], UnsupportedError, "recursion is not supported",
                       "# MARK")
    assert "rec_direct -> rec_direct" in text
    with pytest.raises(UnsupportedError) as ei:
        L.translate(rec_a, [T.int32])
    assert "recursion is not supported (rec_a -> rec_b -> rec_a)" in str(ei.value)
    check_error(rec_jit.py_func, [T.int32], UnsupportedError, "recursion is not supported",
                "# MARK")


# --------------------------------------------------------------------------------------------
# functions without source

def test_function_without_source():
    ns = {}
    exec("def from_exec(x):\n    return x + 1\n", ns)
    with pytest.raises(UnsupportedError) as ei:
        L.translate(ns["from_exec"], [T.float32])
    msg = str(ei.value)
    assert "from_exec" in msg and "source code is not available" in msg and "exec()" in msg


def test_not_a_function():
    with pytest.raises(UnsupportedError, match="not a Python function"):
        L.translate(len, [T.float32])


def test_bad_argument_types():
    def f(x):
        return x
    with pytest.raises(TypeError):
        L.translate(f, [object()])
    assert L.translate(f, [T.float16]).return_type == T.float16   # float16 is a kernel type
    with pytest.raises(UnsupportedError, match="cannot return arrays"):
        L.translate(f, [T.float32[:]], T.float32[:])


def test_errors_never_reach_nvrtc(monkeypatch):
    # translate() is pure Python: make sure no compile call happens on the error path
    called = []
    core = sys.modules.get("cufunc._core")
    if core is not None and hasattr(core, "compile_source"):
        monkeypatch.setattr(core, "compile_source", lambda *a, **k: called.append(a))
    with pytest.raises(UnsupportedError):
        L.translate(f_try, [T.float32])
    assert not called
