"""The statements of the kernel language: a part of FunctionTranslator (translator.py).

Each Python statement becomes IR statements (ir.Stmt: Store, If, While, ForStep, Return, ...)
appended to the block being built; assignments type their targets (the join of all values a
variable is given, over the passes of translator.run).
"""

import ast

import numpy as np

from .. import types as T
from ..errors import TypingError, UnsupportedError
from . import typesys as TS
from . import checks, ir, loops, views
from . import emit
from .cgen import c_ident, tuple_struct_name
from .ir import StaticVal, TupleVal, Val, _Bottom
from .exprs import _BINOPS


class StmtsMixin:
    """Statements of FunctionTranslator: stmt_<Node> for each supported statement."""

    def stmts(self, body):
        for s in body:
            self.stmt(s)
            # Code after return/break/continue (or a branch that always returns) never runs.
            if isinstance(s, (ast.Return, ast.Break, ast.Continue)) or \
                    not self._falls_through([s]):
                break

    def stmt(self, s):
        m = getattr(self, "stmt_" + type(s).__name__, None)
        if m is None:
            raise self.unsupported(s, _STMT_NAMES.get(type(s).__name__,
                                                     "the statement '%s'" % type(s).__name__))
        if self.strict:
            m(s)
            return
        try:
            m(s)
        except (_Bottom, TypingError, UnsupportedError):
            # Collect mode: a later round may type it; compound statements handle their own
            # parts so that their bodies are still visited.
            pass

    def guard(self, fn, *a):
        """Run fn; in collect mode a failure gives None instead of an exception."""
        if self.strict:
            return fn(*a)
        try:
            return fn(*a)
        except (_Bottom, TypingError, UnsupportedError):
            return None

    def stmt_Pass(self, s):
        pass

    def stmt_Expr(self, s):
        if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return  # a string statement is a comment
        v = self.expr(s.value)
        if isinstance(v, StaticVal):
            return
        if isinstance(v, TupleVal):
            if v.setup:
                self.add(ir.Discard(v.setup, False))
            for it in v.items:
                if not it.simple:
                    self.add(ir.Discard(it, True))
            return
        if not v.simple:
            self.add(ir.Discard(v, True))

    def stmt_Assign(self, s):
        value = self.expr(s.value)
        if len(s.targets) > 1 and not isinstance(value, (StaticVal, TupleVal)):
            setup, value = self.ensure_simple(value)
            if setup:
                self.add(ir.Eval(setup))
        for t in s.targets:
            self.assign(t, value, s)

    def stmt_AnnAssign(self, s):
        if s.value is None:
            return
        self.assign(s.target, self.expr(s.value), s)

    def stmt_AugAssign(self, s):
        fn, sym, name = _BINOPS.get(type(s.op), (None, None, None))
        if fn is None:
            raise self.unsupported(s, "the operator %s=" % type(s.op).__name__)
        tgt = s.target
        if isinstance(tgt, ast.Name):
            cur = self.load_name(tgt)
            rhs = self.expr(s.value)
            self.assign(tgt, self.binop(fn, name, sym, cur, rhs, s), s)
        elif isinstance(tgt, ast.Subscript):
            arr = self.expr(tgt.value)
            if not (isinstance(arr, Val) and isinstance(arr.type, T.Array)):
                raise self._fail(tgt, "augmented assignment to an item of %s is not supported"
                                 % getattr(arr, "type", "this object"), UnsupportedError)
            if arr.type.readonly:
                raise self._fail(tgt, "a captured NumPy array is a read-only constant table")
            items = views.index_items(self, tgt, arr)
            idx = views.element_indices(items, arr)
            if idx is None:      # a view: every element of it
                view = views.make_view(self, arr, items, tgt)
                views.augassign(self, s, view, self.expr(s.value), fn, name, sym)
                return
            # Evaluate array and indices once.
            pre = []
            s_arr, arr = self.ensure_simple_array(arr)
            if s_arr:
                pre.append(s_arr)
            simple_idx = []
            for i in idx:
                st, i2 = self.ensure_simple(i)
                if st:
                    pre.append(st)
                simple_idx.append(i2)
            for p in pre:
                self.add(ir.Eval(p))
            elem = self.element(arr, simple_idx, tgt)
            rhs = self.expr(s.value)
            res = self.cast(self.binop(fn, name, sym, elem, rhs, s), arr.type.dtype, s)
            self.add(ir.Store(elem, res))
        else:
            raise self.unsupported(s, "augmented assignment to this target")

    def ensure_simple_array(self, arr):
        if arr.simple:
            return None, arr
        name = self.temp(arr.type.cname)
        return ir.SetTemp(arr.type, name, arr), Val(arr.type, name, simple=True)

    def assign(self, target, value, stmt):
        if isinstance(target, ast.Name):
            self.assign_name(target.id, value, target)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if any(isinstance(e, ast.Starred) for e in target.elts):
                raise self.unsupported(target, "starred assignment")
            if not isinstance(value, TupleVal):
                raise self._fail(target, "cannot unpack %s into %d names"
                                 % (getattr(value, "type", "this value"), len(target.elts)))
            if len(value.items) != len(target.elts):
                raise self._fail(target, "cannot unpack a tuple of %d items into %d names"
                                 % (len(value.items), len(target.elts)))
            if value.setup:
                self.add(ir.Eval(value.setup))
            # Evaluate every item before assigning any (a, b = b, a).
            items = []
            for it in value.items:
                if it.is_const or len(value.items) == 1:
                    items.append(it)
                    continue
                name = self.temp(it.type.cname)
                self.add(ir.Store(name, it))
                items.append(Val(it.type, name, nonneg=it.nonneg, simple=True))
            for e, it in zip(target.elts, items):
                self.assign(e, it, stmt)
        elif isinstance(target, ast.Subscript):
            self.store_item(target, value)
        elif isinstance(target, ast.Attribute):
            raise self.unsupported(target, "assigning to an attribute")
        elif isinstance(target, ast.Starred):
            raise self.unsupported(target, "starred assignment")
        else:
            raise self.unsupported(target, "this assignment target")

    def assign_name(self, name, value, node):
        if isinstance(value, StaticVal):
            raise self._fail(node, "%s cannot be assigned to a variable (only numbers, tuples "
                             "and arrays can)" % value.name, UnsupportedError)
        vt = value.type
        if isinstance(vt, T.Void):
            raise self._fail(node, "the called function returns nothing (None)")
        old = self.var_types.get(name)
        if self.strict:
            new = old
            try:
                joined = self._join(old, vt, node)
            except TypingError:
                raise self.err(node, "variable '%s' is assigned values of types %s and %s, "
                               "which cannot be unified" % (name, old, vt)) from None
            if joined != old:   # cannot happen at the fixpoint
                raise self.err(node, "internal error: type of %r changed after typing" % name)
        else:
            try:
                new = self._join(old, vt, node)
            except (TypingError, _Bottom):
                self.var_types[name] = old
                raise _Bottom()
            self.var_types[name] = new
        if isinstance(new, T.Tuple):
            v2 = self.cast(value, new, node)
            cn = self.var_c(name)
            if v2.setup:
                self.add(ir.Eval(v2.setup))
            tmps = []
            for i, it in enumerate(v2.items):
                if it.simple:
                    tmps.append(it)
                else:
                    tn = self.temp(it.type.cname)
                    self.add(ir.Store(tn, it))
                    tmps.append(Val(it.type, tn, simple=True))
            for i, it in enumerate(tmps):
                self.add(ir.Store("cf_tv_%s_%d" % (cn, i), it))
            return
        v2 = self.cast(value, new, node)
        if getattr(value, "ref", None) is not None and self.assign_count.get(name) == 1:
            self.var_refs[name] = value.ref
            self.add(ir.RefStore(name, self.var_c(name), v2))
            return
        self.add(ir.Store(self.var_c(name), v2))

    def var_c(self, name):
        return c_ident(name)

    def static_truth(self, node):
        """True/False when a condition is a compile-time constant (a literal, or a global /
        closure number, bool or None, possibly under `not`), else None. Such branches are
        pruned, as Numba does: `if DEBUG:` blocks may hold code the language rejects."""
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            v = self.static_truth(node.operand)
            return None if v is None else not v
        if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, float,
                                                                      type(None))):
            return bool(node.value)
        if isinstance(node, (ast.Name, ast.Attribute)):
            sv = self.static(node)
            if sv is not None and (sv.obj is None or isinstance(
                    sv.obj, (bool, int, float, np.bool_, np.integer, np.floating))):
                return bool(sv.obj)
        return None

    def stmt_If(self, s):
        st = self.static_truth(s.test)
        if st is not None:
            self.stmts(s.body if st else s.orelse)
            return
        # the Python elif chain becomes one If with several branches
        branches = [(self.guard(self.cond, s.test), self.sub_block(s.body))]
        orelse = s.orelse
        while (len(orelse) == 1 and isinstance(orelse[0], ast.If)
               and self.static_truth(orelse[0].test) is None):
            c2 = self.guard(self.cond, orelse[0].test)
            branches.append((c2, self.sub_block(orelse[0].body)))
            orelse = orelse[0].orelse
        self.add(ir.If(branches, self.sub_block(orelse) if orelse else None))

    def stmt_While(self, s):
        if self.static_truth(s.test) is False:
            self.stmts(s.orelse)
            return
        loops.with_else(self, s, lambda: self._while(s))

    def _while(self, s):
        cond = self.guard(self.cond, s.test)
        self.add(ir.While(cond, self.sub_block(s.body)))

    def stmt_For(self, s):
        loops.with_else(self, s, lambda: self._for(s))

    def _for(self, s):
        it = s.iter
        if not (isinstance(it, ast.Call) and isinstance(self.guard_static(it.func), StaticVal)
                and self.guard_static(it.func).obj is range) or \
                not isinstance(s.target, ast.Name):
            # arrays, enumerate, zip, tuples, unpacking targets: loops.py
            return loops.for_loop(self, s)
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise self._fail(it, "range() takes 1 to 3 positional arguments")
        args = [self.guard(self.expr, a) for a in it.args]
        ok = all(a is not None for a in args)
        vals = []
        if ok:
            for a, n in zip(args, it.args):
                a = self.scalar(a, n, "a range() argument")
                if a.type.kind not in "biu":
                    raise self._fail(n, "range() arguments must be integers, not %s" % a.type)
                vals.append(self.cast(a, TS.WEAK_INT, n))
        if len(vals) == 1:
            vals = [self.const_val(0, TS.WEAK_INT, it)] + vals
        if len(vals) == 2:
            vals.append(self.const_val(1, TS.WEAK_INT, it))
        counter = self.temp("cf_int64")
        name = s.target.id
        if not ok:
            self.add(ir.Forever(self.sub_block(s.body)))
            return
        for i, v in enumerate(vals):
            snap, vals[i] = self.snapshot(v)
            if snap:
                self.add(snap)
        start, stop, step = vals
        if step.is_const and step.const in (1, -1):
            loop = ir.ForStep(counter, start, stop, step)
        else:
            loop = ir.ForRange(self.temp("cf_uint64"), self.temp("cf_uint64"), counter, start,
                               stop, step)
        loopval = Val(TS.WEAK_INT, counter, simple=True, nonneg=name in self.nonneg_vars)
        loop.body = self.sub_block(
            s.body, lambda: self.guard(self.assign_name, name, loopval, s.target))
        self.add(loop)

    def snapshot(self, v):
        """(ir.Store or None, Val): v, or v kept in a temporary when it is not a constant."""
        if v.is_const:
            return None, v
        name = self.temp(v.type)
        return ir.Store(name, v), Val(v.type, name, simple=True, nonneg=v.nonneg)

    def guard_static(self, node):
        try:
            return self.static(node)
        except (_Bottom, TypingError, UnsupportedError):
            return None

    def stmt_Break(self, s):
        loops.before_break(self)
        self.add(ir.Break())

    def stmt_Assert(self, s):
        checks.stmt_assert(self, s)

    def stmt_Raise(self, s):
        checks.stmt_raise(self, s)

    def stmt_Continue(self, s):
        self.add(ir.Continue())

    def stmt_Return(self, s):
        if s.value is None or (isinstance(s.value, ast.Constant) and s.value.value is None):
            self.returns_none = True
            if self.strict:
                rt = self.final_return_type()
                if rt != T.void:
                    checks.none_value(self, s, TS.concrete(rt))
                    return
            self.add(ir.Return(None))
            return
        v = self.expr(s.value)
        if isinstance(v, StaticVal):
            raise self._fail(s.value, "cannot return %s" % v.name)
        if isinstance(v.type, T.Array):
            raise self._fail(s.value, "returning an array is not supported (write results "
                             "into an output argument)", UnsupportedError)
        if isinstance(v.type, T.Void):
            raise self._fail(s.value, "the called function returns nothing (None)")
        if not self.strict:
            self.ret_types.append(v.type)
            return
        rt = self.final_return_type()
        self.ret_types.append(v.type)
        if rt == T.void:
            raise self.err(s, "%s is declared to return nothing (void) but returns a value"
                           % self.src.qualname)
        rtc = TS.concrete(rt)
        if isinstance(rtc, T.Tuple):
            if not isinstance(v, TupleVal):
                raise self.err(s.value, "%s returns a tuple elsewhere but %s here"
                               % (self.src.qualname, v.type))
            v2 = self.cast(v, rtc, s.value)
            self.add(ir.ReturnTuple(self.struct(rtc), v2.items, v2.setup))
            return
        if isinstance(v, TupleVal):
            raise self.err(s.value, "%s returns %s elsewhere but a tuple here"
                           % (self.src.qualname, rt))
        v2 = self.cast(v, rtc, s.value, explicit=self.declared_ret is not None)
        self.add(ir.Return(v2))

    def struct(self, tt):
        name = tuple_struct_name(tt)
        if name not in self.unit.structs:
            self.unit.structs[name] = emit.struct_definition(name, tt)
        return name



_STMT_NAMES = {
    "Try": "try", "TryStar": "try", "With": "with", "AsyncWith": "async with",
    "Raise": "raise", "Global": "global", "Nonlocal": "nonlocal", "Delete": "del",
    "Import": "import", "ImportFrom": "import", "FunctionDef": "a nested def",
    "AsyncFunctionDef": "a nested def", "ClassDef": "class", "Assert": "assert",
    "AsyncFor": "async for", "Match": "match",
}
