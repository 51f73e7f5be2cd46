"""``assert`` and the None path of a function that returns values elsewhere
(docs/language-arrays.md).

assert: compiled away unless the function is translated with debug=True (Numba's CUDA meaning:
"only has an effect when debug=True"); the condition is then not even typed. With debug=True a
false condition calls cf_lang_assert_fail (cgen.PRELUDE): CUDA's device-side assert, which
prints the assertion, its file and line and the thread, stops the kernel and makes the next
synchronising call fail with CUDA_ERROR_ASSERT; cufunc raises that as
cufunc.errors.DeviceAssertionError (an AssertionError). Its message lists the debug assertions
compiled in this process (SITES, filled here), and says that CUDA leaves the context unusable.

Why a device-side assert rather than a flag the host reads after each call: the assert needs no
change to the engines' launch paths, costs nothing when it holds, stops the failing thread at
once (so nothing after it runs on a state the assertion rejected), and its message (text, file,
line, thread) reaches the user even when the failing call's result is never read. Its price,
a context that cannot be used again, is CUDA's for every device-side assert; the error says so.

None path: Numba types a function that returns a value on some paths and None on others
(`return`, `return None`, or falling off the end) as Optional(T); a caller that uses None as a
number fails there (on CUDA without debug the error is dropped and the result is unwritten).
cufunc gives the function the type T and the None path a value of that type: NaN for floats
and complex numbers, 0 for integers, False for booleans, so the place is visible in the
results; with debug=True it fails like an assert, naming the function and the line.
"""

import ast
import math
import os

from .. import types as T
from ..errors import UnsupportedError
from . import typesys as TS
from . import ir
from .cgen import c_string
from .ir import Val

# (file, line) -> (message, function qualname) of every assertion translated with debug=True
# in this process: DeviceAssertionError's message lists them.
SITES = {}


def _fail_call(tr, node, message):
    """The statement calling cf_lang_assert_fail for node, with message."""
    file = tr.src.filename
    line = tr.src.file_line(node)
    SITES[(file, line)] = (message, tr.src.qualname)
    text = "%s (%s:%d)" % (message, os.path.basename(file), line)
    args = [Val(None, c_string(text), simple=True), Val(None, c_string(file), simple=True),
            Val(None, "%dU" % line, simple=True), Val(None, c_string(tr.src.qualname),
                                                       simple=True)]
    return ir.Eval(ir.Call(T.void, "cf_lang_assert_fail", args))


def stmt_assert(tr, s):
    """assert test[, "message"]."""
    msg = s.msg
    if msg is not None and not (isinstance(msg, ast.Constant) and isinstance(msg.value, str)):
        raise tr.err(msg, "the message of an assert must be a string constant (a kernel cannot "
                     "format values into it)", UnsupportedError)
    if not tr.unit.debug:
        return
    cond = tr.cond(s.test)
    if msg is not None:
        message = msg.value
    else:
        message = "assert " + ast.unparse(s.test)
    if type(cond) is ir.Const:
        if cond.const:
            return
        tr.add(_fail_call(tr, s, message))
        return
    tr.add(ir.If([(ir.Prefix(T.bool_, "!", cond), [_fail_call(tr, s, message)])], None))


def none_value(tr, node, rt):
    """The statements returning None from a function whose other returns give rt (see the
    module docstring); rt is concrete."""
    if isinstance(rt, T.Tuple):
        raise tr.err(node, "%s returns None here but a tuple %s elsewhere (a tuple cannot "
                     "stand for None)" % (tr.src.qualname, rt))
    if tr.unit.debug:
        tr.add(_fail_call(tr, node, "%s returned None where a %s is needed"
                          % (tr.src.qualname, rt)))
    tr.add(ir.Return(_none_const(tr, node, rt)))


def _none_const(tr, node, rt):
    """The value that stands for None in a function returning rt."""
    k = rt.kind
    if k == "f":
        return tr.const_val(math.nan, rt, node)
    if k == "c":
        return tr.const_val(complex(math.nan, math.nan), rt, node)
    if k == "b":
        return tr.const_val(False, rt, node)
    return tr.const_val(0, rt, node)


def stmt_raise(tr, s):
    """raise: the function stops there, as Numba's does on CUDA without debug (an exception
    raised in device code ends the thread's work; nothing reaches the host). A body returns
    (what it wrote stays written), a function returning values returns its None value
    (none_value's: NaN, 0, False). With debug=True it fails like an assert whose message is the
    raise statement."""
    what = "raise" if s.exc is None else "raise " + ast.unparse(s.exc)
    if tr.unit.debug:
        tr.add(_fail_call(tr, s, what))
    if not tr.strict:
        tr.add(ir.Return(None))
        return
    rt = tr.final_return_type()
    if rt == T.void:
        tr.add(ir.Return(None))
        return
    rt = TS.concrete(rt)
    if isinstance(rt, T.Tuple):
        raise tr.err(s, "%s raises here but returns a tuple %s elsewhere (a tuple function "
                     "cannot stop without a value)" % (tr.src.qualname, rt), UnsupportedError)
    tr.add(ir.Return(_none_const(tr, s, rt)))
