"""for loops over anything but a plain ``range()`` into one name, and the ``else`` clause of
``for`` and ``while`` (docs/language-arrays.md).

Iterables: arrays and views (a 1-d array gives its elements, an n-d array its rows as views),
``range(...)``, ``enumerate(it[, start])``, ``zip(it, ...)`` (nested freely: ``for i, (x, y) in
enumerate(zip(a, b))``) and tuples of numbers (``for s in a.shape``). Every such loop is one C
loop over a counter k from 0 to the iterable's length (computed once, before the loop, as
Python computes the iterator once); the target is assigned the iterable's item k at the top of
each pass. zip stops at its shortest input.

``else``: a flag, cleared before the loop and set by a ``break`` of that loop; the else block
runs when it is still clear.
"""

import ast

from .. import types as T
from ..errors import UnsupportedError
from . import typesys as TS
from . import ir, views
from .ir import StaticVal, TupleVal, Val


# ------------------------------------------------------------------------------ else clauses

def with_else(tr, s, build):
    """Run build() (which adds the loop of s) with the loop's break flag on tr.loop_else, then
    add the else block of s, when it has one."""
    flag = None
    if s.orelse:
        flag = tr.temp(T.bool_)
        tr.add(ir.Store(flag, tr.const_val(False, T.bool_, s)))
    tr.loop_else.append(flag)
    try:
        build()
    finally:
        tr.loop_else.pop()
    if flag is not None:
        cond = ir.Prefix(T.bool_, "!", Val(T.bool_, flag, simple=True))
        tr.add(ir.If([(cond, tr.sub_block(s.orelse))], None))


def before_break(tr):
    """The statements a break adds before itself: the loop's flag, when it has an else."""
    if tr.loop_else and tr.loop_else[-1] is not None:
        tr.add(ir.Store(tr.loop_else[-1], tr.const_val(True, T.bool_, None)))


# ------------------------------------------------------------------------------ iterables

class _Iter:
    """An iterable prepared before its loop: length (a simple int64 Val) and item(k)."""

    def __init__(self, length, item):
        self.length = length
        self.item = item


def _snap(tr, v):
    """v kept in a temporary (set now, before the loop) unless it is a constant or a name."""
    if v.simple:
        return v
    name = tr.temp(v.type)
    tr.add(ir.Store(name, v))
    return Val(v.type, name, simple=True, nonneg=v.nonneg)


def _length(tr, v):
    v = tr.cast(v, T.int64, None, explicit=True) if v.type != T.int64 and not v.is_const else v
    return _snap(tr, v)


def _int_arg(tr, node, what):
    v = tr.scalar(tr.expr(node), node, what)
    if v.type.kind not in "biu":
        raise tr._fail(node, "%s must be an integer, not %s" % (what, v.type))
    return _snap(tr, tr.cast(v, TS.WEAK_INT, node))


def _static_callee(tr, node):
    if isinstance(node, ast.Call):
        sv = tr.guard_static(node.func)
        if isinstance(sv, StaticVal):
            return sv.obj
    return None


def iterable(tr, node):
    """The _Iter of the expression node (statements computing it are added now)."""
    fn = _static_callee(tr, node)
    if fn is range:
        if node.keywords or not 1 <= len(node.args) <= 3:
            raise tr._fail(node, "range() takes 1 to 3 positional arguments")
        vals = [_int_arg(tr, a, "a range() argument") for a in node.args]
        if len(vals) == 1:
            vals = [tr.const_val(0, TS.WEAK_INT, node)] + vals
        if len(vals) == 2:
            vals.append(tr.const_val(1, TS.WEAK_INT, node))
        start, stop, step = vals
        if step.is_const and int(step.const) == 0:
            raise tr._fail(node.args[2], "range() arg 3 must not be zero")
        n = _length(tr, ir.CCast(T.int64, "cf_int64", ir.Call(
            T.uint64, "cf_lang_range_len", [start, stop, step])))
        nonneg = start.is_const and int(start.const) >= 0 and step.is_const and \
            int(step.const) > 0
        return _Iter(n, lambda k: ir.Call(TS.WEAK_INT, "cf_lang_range_item", [start, k, step],
                                          nonneg=nonneg))
    if fn is enumerate:
        args = list(node.args)
        for kw in node.keywords:
            if kw.arg != "start":
                raise tr._fail(node, "enumerate() takes no keyword argument '%s'" % kw.arg)
            args.append(kw.value)
        if not 1 <= len(args) <= 2:
            raise tr._fail(node, "enumerate() takes an iterable and an optional start")
        inner = iterable(tr, args[0])
        start = _int_arg(tr, args[1], "the start of enumerate()") if len(args) == 2 else \
            tr.const_val(0, TS.WEAK_INT, node)
        one = tr.const_val(1, TS.WEAK_INT, node)
        nonneg = start.is_const and int(start.const) >= 0
        return _Iter(inner.length, lambda k: [
            ir.Call(TS.WEAK_INT, "cf_lang_range_item", [start, k, one], nonneg=nonneg),
            inner.item(k)])
    if fn is zip:
        if node.keywords:
            raise tr._fail(node, "zip() takes no keyword arguments", UnsupportedError)
        inners = [iterable(tr, a) for a in node.args]
        if not inners:
            return _Iter(tr.const_val(0, T.int64, node), lambda k: [])
        n = inners[0].length
        for it in inners[1:]:
            m = it.length
            n = _snap(tr, ir.Select(T.int64, ir.Infix(T.bool_, "<", [m, n]), m, n))
        return _Iter(n, lambda k: [it.item(k) for it in inners])
    v = tr.expr(node)
    if isinstance(v, TupleVal):
        return _tuple_iter(tr, v, node)
    if isinstance(v, StaticVal):
        raise tr._fail(node, "cannot iterate over %s" % v.name)
    if isinstance(v.type, T.Array):
        # kept in a temporary: Python iterates the array the expression gave, even when the
        # body assigns another array to the variable
        name = tr.temp(v.type)
        tr.add(ir.Store(name, v))
        arr = Val(v.type, name, simple=True)
        n = _length(tr, tr.extent(arr, 0))
        if arr.type.ndim == 1:
            return _Iter(n, lambda k: tr.element(arr, [k], node))
        return _Iter(n, lambda k: views.make_view(tr, arr, [("i", k, node)], node))
    raise tr._fail(node, "cannot iterate over a %s value" % v.type)


def _tuple_iter(tr, v, node):
    """A tuple of numbers: its items stored in a local C array before the loop."""
    n = len(v.items)
    if v.setup is not None:
        tr.add(ir.Eval(v.setup))
    if n == 0:
        return _Iter(tr.const_val(0, T.int64, node), lambda k: None)
    t = None
    for it in v.items:
        it = tr.scalar(it, node, "an item of a tuple iterated over")
        t = tr._join(t, it.type, node)
    t = TS.concrete(t)
    name = "cf_t%d_items" % (tr.ntemp + 1)
    tr.ntemp += 1
    tr.local_storage.append(ir.Declare(t.cname, name, n))
    for i, it in enumerate(v.items):
        tr.add(ir.Store(ir.RefElement(t, name, (n,), [tr.const_val(i, TS.WEAK_INT, node)]),
                        tr.cast(it, t, node)))
    return _Iter(tr.const_val(n, T.int64, node),
                 lambda k: ir.RefElement(t, name, (n,), [k]))


# ------------------------------------------------------------------------------ targets

def _leaves(item):
    if isinstance(item, list):
        out = []
        for x in item:
            sub = _leaves(x)
            if sub is None:
                return None
            out.extend(sub)
        return out if all(not isinstance(x, list) for x in item) else None
    return [item]


def assign_target(tr, target, item, stmt):
    """Assign one item of an iterable (a Val, or a list for enumerate/zip items) to target."""
    if item is None:
        return
    if isinstance(item, list):
        if isinstance(target, (ast.Tuple, ast.List)):
            if len(target.elts) != len(item):
                raise tr._fail(target, "cannot unpack %d values into %d names"
                               % (len(item), len(target.elts)))
            for t, it in zip(target.elts, item):
                assign_target(tr, t, it, stmt)
            return
        leaves = _leaves(item)
        if leaves is None or any(isinstance(x.type, T.Array) for x in leaves):
            raise tr._fail(target, "a tuple of arrays or of tuples cannot be held in one "
                           "name: unpack the items of enumerate() and zip() into names "
                           "(for i, v in enumerate(a))", UnsupportedError)
        tr.assign(target, TupleVal(leaves), stmt)
        return
    tr.assign(target, item, stmt)


# ------------------------------------------------------------------------------ the loop

def for_loop(tr, s):
    """A for loop over any iterable (see the module docstring)."""
    src = tr.guard(iterable, tr, s.iter)
    if src is None:       # collect pass: the iterable is not typed yet; visit the body
        tr.add(ir.Forever(tr.sub_block(s.body)))
        return
    counter = tr.temp("cf_int64")
    k = Val(TS.WEAK_INT, counter, simple=True, nonneg=True)
    loop = ir.ForStep(counter, tr.const_val(0, TS.WEAK_INT, s), src.length,
                      tr.const_val(1, TS.WEAK_INT, s))
    loop.body = tr.sub_block(s.body, lambda: tr.guard(
        lambda: assign_target(tr, s.target, src.item(k), s.target)))
    tr.add(loop)
