"""Tuple operations beyond constant indexing and unpacking (docs/language-arrays.md): a variable
index (``t[i]``, negative counting from the end, not bounds-checked), constant slices
(``t[1:]``), concatenation and repetition (``t + u``, ``t * 3``), ``==`` / ``!=`` between tuples,
and ``x in t`` / ``x not in t``. Tuples live only at compile time (ir.TupleVal: one value per
item), so each of these becomes operations on the items.
"""

import ast
import operator

from .. import types as T
from ..errors import UnsupportedError
from . import typesys as TS
from . import ir
from .ir import StaticVal, TupleVal, Val


def _setup(*setups):
    s = [x for x in setups if x is not None]
    if not s:
        return None
    if len(s) == 1:
        return s[0]
    return ir.Paren(None, ir.Seq(None, s))


def subscript(tr, node, tup):
    """tup[index] for a TupleVal: an item (constant or variable index) or a slice."""
    n = len(tup.items)
    if isinstance(node.slice, ast.Slice):
        bounds = []
        for e in (node.slice.lower, node.slice.upper, node.slice.step):
            if e is None:
                bounds.append(None)
                continue
            k = tr._static_int(e)      # a literal (-1 included, under either typing) or global
            if k is not None:
                bounds.append(k)
                continue
            v = tr.scalar(tr.expr(e), e, "a tuple slice bound")
            if not v.is_const or v.type.kind not in "biu":
                raise tr._fail(e, "a tuple slice needs constant integer bounds",
                               UnsupportedError)
            bounds.append(int(v.const))
        if bounds[2] == 0:
            raise tr._fail(node.slice, "slice step cannot be zero")
        return TupleVal(tup.items[slice(*bounds)], tup.setup)
    idx = tr.scalar(tr.expr(node.slice), node.slice, "a tuple index")
    if idx.type.kind not in "iu":
        raise tr._fail(node.slice, "a tuple index must be an integer, not %s" % idx.type)
    if idx.is_const:
        i = int(idx.const)
        if not -n <= i < n:
            raise tr._fail(node.slice, "tuple index %d out of range (length %d)" % (i, n))
        return tr.with_setup(tup.setup, tup.items[i])
    # a variable index: the items must share a type (Numba's homogeneous tuples)
    t = None
    for it in tup.items:
        it = tr.scalar(it, node, "an item of a tuple indexed by a variable")
        t = tr._join(t, it.type, node)
    if n == 0:
        raise tr._fail(node, "index into an empty tuple")
    st, w = tr.ensure_simple(ir.Call(TS.WEAK_INT, "cf_lang_wrap", [
        tr.cast(idx, T.int64, node, explicit=True), tr.const_val(n, T.int64, node)]))
    acc = tr.cast(tup.items[-1], t, node)
    for k in reversed(range(n - 1)):
        c = ir.Infix(T.bool_, "==", [w, tr.const_val(k, TS.WEAK_INT, node)])
        acc = ir.Select(t, c, tr.cast(tup.items[k], t, node), acc)
    return tr.with_setup(_setup(tup.setup, st), acc)


def binop(tr, name, a, b, node):
    """t + u, t * k, k * t for tuples; None when neither operand is a tuple."""
    if not isinstance(a, TupleVal) and not isinstance(b, TupleVal):
        return None
    if name == "add" and isinstance(a, TupleVal) and isinstance(b, TupleVal):
        return TupleVal(a.items + b.items, _setup(a.setup, b.setup))
    if name == "mul":
        tup, k = (a, b) if isinstance(a, TupleVal) else (b, a)
        if isinstance(k, Val) and isinstance(k.type, T.Scalar) and k.is_const and \
                k.type.kind in "iu":
            if tup.setup is not None:
                raise tr._fail(node, "repeating a computed tuple is not supported",
                               UnsupportedError)
            return TupleVal(tup.items * max(int(k.const), 0))
    raise tr._fail(node, "unsupported operand types for this operator: %s and %s (tuples "
                   "support + with a tuple and * with a constant integer)"
                   % (_tname(a), _tname(b)))


def _tname(v):
    if isinstance(v, TupleVal):
        return "tuple"
    if isinstance(v, StaticVal):
        return v.name
    return str(v.type)


def compare(tr, op, left, right, node):
    """left op right where an operand is a tuple (== / != between tuples, in / not in a
    tuple); None when this is no tuple comparison."""
    if isinstance(op, (ast.In, ast.NotIn)):
        if not isinstance(right, TupleVal):
            raise tr._fail(node, "'in' needs a tuple on its right (here: %s)" % _tname(right),
                           UnsupportedError)
        x = tr.scalar(left, node, "the operand of 'in'")
        st, x = tr.ensure_simple(x)
        parts = [tr.compare(operator.eq, "==", x, it, node) for it in right.items]
        v = _any(tr, parts, node)
        if isinstance(op, ast.NotIn):
            v = tr.const_val(not v.const, TS.WEAK_BOOL, node) if v.is_const else \
                ir.Prefix(TS.WEAK_BOOL, "!", v)
        return tr.with_setup(_setup(right.setup, st), v)
    if not isinstance(left, TupleVal) and not isinstance(right, TupleVal):
        return None
    if not isinstance(op, (ast.Eq, ast.NotEq)) or not (
            isinstance(left, TupleVal) and isinstance(right, TupleVal)):
        raise tr._fail(node, "tuples compare only with == and != to other tuples",
                       UnsupportedError)
    if len(left.items) != len(right.items):
        v = tr.const_val(False, TS.WEAK_BOOL, node)
    else:
        parts = [tr.compare(operator.eq, "==", x, y, node)
                 for x, y in zip(left.items, right.items)]
        v = _all(tr, parts, node)
    if isinstance(op, ast.NotEq):
        v = tr.const_val(not v.const, TS.WEAK_BOOL, node) if v.is_const else \
            ir.Prefix(TS.WEAK_BOOL, "!", v)
    return tr.with_setup(_setup(left.setup, right.setup), v)


def _any(tr, parts, node):
    live = [p for p in parts if not p.is_const]
    if any(p.is_const and p.const for p in parts) or not live:
        return tr.const_val(any(p.is_const and bool(p.const) for p in parts), TS.WEAK_BOOL,
                            node)
    return live[0] if len(live) == 1 else ir.Infix(TS.WEAK_BOOL, "||", live)


def _all(tr, parts, node):
    live = [p for p in parts if not p.is_const]
    if any(p.is_const and not p.const for p in parts) or not live:
        return tr.const_val(all(bool(p.const) for p in parts if p.is_const) and not live,
                            TS.WEAK_BOOL, node)
    return live[0] if len(live) == 1 else ir.Infix(TS.WEAK_BOOL, "&&", live)
