"""The expressions of the kernel language: a part of FunctionTranslator (translator.py).

Operators (NumPy's promotion and folding of constants), comparisons and boolean operators,
conditional expressions, tuples, attributes of arrays and values, indexing and stores into
array elements. Calls go to calls.py.
"""

import ast
import operator

import numpy as np

from .. import types as T
from ..errors import TypingError, UnsupportedError
from . import typesys as TS
from . import calls, ir, tuples, views
from . import fold
from .fold import fits, int_range_message
from .ir import StaticVal, TupleVal, Val, _Bottom
from .names import _is_value_object

_BINOPS = {
    ast.Add: (operator.add, "+", "add"), ast.Sub: (operator.sub, "-", "sub"),
    ast.Mult: (operator.mul, "*", "mul"), ast.Div: (operator.truediv, "/", "truediv"),
    ast.FloorDiv: (operator.floordiv, "//", "floordiv"), ast.Mod: (operator.mod, "%", "mod"),
    ast.Pow: (operator.pow, "**", "pow"), ast.LShift: (operator.lshift, "<<", "lshift"),
    ast.RShift: (operator.rshift, ">>", "rshift"), ast.BitAnd: (operator.and_, "&", "and"),
    ast.BitOr: (operator.or_, "|", "or"), ast.BitXor: (operator.xor, "^", "xor"),
}
_CMPOPS = {
    ast.Lt: (operator.lt, "<"), ast.LtE: (operator.le, "<="), ast.Gt: (operator.gt, ">"),
    ast.GtE: (operator.ge, ">="), ast.Eq: (operator.eq, "=="), ast.NotEq: (operator.ne, "!="),
}


_UNOP_NAMES = {"-": "neg", "+": "pos", "~": "invert"}
_ZERO = Val(None, "0")   # the C literal 0, for (x != 0)


class ExprsMixin:
    """Expressions of FunctionTranslator: expr_<Node> for each supported expression."""

    def expr(self, node):
        m = getattr(self, "expr_" + type(node).__name__, None)
        if m is None:
            raise self.unsupported(node, _EXPR_NAMES.get(type(node).__name__,
                                                         "the expression '%s'"
                                                         % type(node).__name__))
        return m(node)

    def expr_Constant(self, node):
        v = node.value
        if isinstance(v, bool):
            return self.const_val(v, TS.WEAK_BOOL, node)
        if isinstance(v, int):
            if not -2 ** 63 <= v < 2 ** 64:
                raise self.err(node, int_range_message(v))
            return self.const_val(v, TS.WEAK_INT, node)
        if isinstance(v, float):
            return self.const_val(v, TS.WEAK_FLOAT, node)
        if isinstance(v, complex):
            return self.const_val(v, TS.WEAK_COMPLEX, node)
        if isinstance(v, (str, bytes)):
            raise self.unsupported(node, "a string")
        if v is None:
            raise self.unsupported(node, "None as a value")
        raise self.unsupported(node, "the constant %r" % (v,))

    def expr_Attribute(self, node):
        sb = self.static(node.value)
        if sb is not None and not _is_value_object(sb.obj):
            try:
                obj = getattr(sb.obj, self._mangle(node.attr))
            except AttributeError:
                raise self.err(node, "%s has no attribute '%s'" % (sb.name, node.attr))
            return self.object_val(obj, "%s.%s" % (sb.name, node.attr), node)
        base = self.expr(node.value)
        attr = node.attr
        if isinstance(base, Val) and isinstance(base.type, T.Array):
            at = base.type
            if attr == "shape":
                return TupleVal([self.extent(base, k) for k in range(at.ndim)])
            if attr == "ndim":
                return self.const_val(at.ndim, TS.WEAK_INT, node)
            if attr == "size":
                ext = [self.extent(base, k) for k in range(at.ndim)]
                if all(e.is_const for e in ext):
                    return self.const_val(int(np.prod([e.const for e in ext])), TS.WEAK_INT,
                                          node)
                return ir.Infix(TS.WEAK_INT, "*", ext, nonneg=True)
            if attr == "T":
                return views.transpose(self, base)
            raise self._fail(node, "array attribute '.%s' is not supported (only shape, size, "
                             "ndim, T)" % attr, UnsupportedError)
        if isinstance(base, Val) and isinstance(base.type, T.Scalar):
            if attr in ("real", "imag"):
                return self.real_imag(base, attr, node)
            raise self._fail(node, "attribute '.%s' of a %s value is not supported"
                             % (attr, base.type), UnsupportedError)
        if isinstance(base, StaticVal):
            try:
                obj = getattr(base.obj, self._mangle(attr))
            except AttributeError:
                raise self.err(node, "%s has no attribute '%s'" % (base.name, attr))
            return self.object_val(obj, "%s.%s" % (base.name, attr), node)
        raise self._fail(node, "attribute '.%s' of a tuple is not supported" % attr,
                         UnsupportedError)

    def extent(self, arr, k):
        if arr.ref is not None:
            return self.const_val(arr.ref[1][k], TS.WEAK_INT, None)
        return ir.Extent(TS.WEAK_INT, arr, k, nonneg=True, simple=arr.simple)

    def real_imag(self, v, attr, node):
        t = v.type
        if t.kind == "c":
            rt = TS.WEAK_FLOAT if isinstance(t, TS.Weak) else (T.float32 if t.bits == 64
                                                               else T.float64)
            if v.is_const:
                return self.const_val(getattr(complex(v.const), attr), rt, node)
            return ir.Call(rt, "cf_" + attr, [v])
        rt = TS.oracle(operator.attrgetter(attr), t)
        if attr == "real":
            return self.cast(v, rt, node)
        return self.const_val(0, rt, node) if rt.kind != "f" else self.const_val(0.0, rt, node)

    def expr_Subscript(self, node):
        base = self.expr(node.value)
        if isinstance(base, TupleVal):
            return tuples.subscript(self, node, base)
        if isinstance(base, Val) and isinstance(base.type, T.Array):
            return views.subscript(self, node, base)     # an element or a view
        if isinstance(base, StaticVal):
            raise self._fail(node, "%s cannot be indexed" % base.name, UnsupportedError)
        raise self._fail(node, "a %s value cannot be indexed" % base.type)

    def indices(self, node, arr):
        """The index Vals of node (a Subscript) indexing one element of arr."""
        items = views.index_items(self, node, arr)
        idx = views.element_indices(items, arr)
        if idx is None:
            raise self._fail(node, "%d-d array indexed with %d index(es) where one element is "
                             "needed" % (arr.type.ndim, len(items)), UnsupportedError)
        return idx

    def element(self, arr, idx, node):
        """The element lvalue arr[idx...] (indices already checked)."""
        if arr.ref is not None:
            # a table or local array: direct indexing with constant extents
            storage, shape = arr.ref
            return ir.RefElement(arr.type.dtype, storage, shape, idx)
        if not arr.simple and any(not (i.nonneg or i.is_const) for i in idx):
            setup, arr = self.ensure_simple_array(arr)
        else:
            setup = None
        return ir.Element(arr.type.dtype, arr, idx, setup)

    def store_item(self, target, value):
        arr = self.expr(target.value)
        if isinstance(arr, TupleVal):
            raise self._fail(target, "tuples are immutable: cannot assign to an item",
                             UnsupportedError)
        if not (isinstance(arr, Val) and isinstance(arr.type, T.Array)):
            raise self._fail(target, "cannot assign to an item of this value",
                             UnsupportedError)
        if arr.type.readonly:
            raise self._fail(target, "a captured NumPy array is a read-only constant table "
                             "and cannot be assigned to")
        items = views.index_items(self, target, arr)
        idx = views.element_indices(items, arr)
        if idx is None:      # a view: the value broadcast or copied into it
            views.store(self, target, views.make_view(self, arr, items, target), value)
            return
        value = self.scalar(value, target, "an array element")
        elem = self.element(arr, idx, target)
        v = self.cast(value, arr.type.dtype, target)
        self.add(ir.Store(elem, v))

    def expr_Tuple(self, node):
        items = []
        for e in node.elts:
            if isinstance(e, ast.Starred):
                raise self.unsupported(e, "starred expressions")
            v = self.expr(e)
            if isinstance(v, TupleVal):
                raise self._fail(e, "nested tuples are not supported", UnsupportedError)
            if isinstance(v, StaticVal):
                raise self._fail(e, "%s cannot be a tuple item" % v.name)
            if isinstance(v.type, T.Array):
                raise self._fail(e, "arrays cannot be tuple items", UnsupportedError)
            items.append(v)
        return TupleVal(items)

    # arithmetic -----------------------------------------------------------
    def expr_BinOp(self, node):
        entry = _BINOPS.get(type(node.op))
        if entry is None:
            raise self.unsupported(node, "the operator '@'")
        fn, sym, name = entry
        a = self.expr(node.left)
        b = self.expr(node.right)
        t = tuples.binop(self, name, a, b, node)     # t + u, t * 3
        if t is not None:
            return t
        return self.binop(fn, name, sym, a, b, node)

    def binop(self, fn, name, sym, a, b, node, rtype=None):
        a = self.scalar(a, node, "an operand of %s" % sym)
        b = self.scalar(b, node, "an operand of %s" % sym)
        if rtype is None:
            try:
                rtype, ta, tb = self.policy.binop(fn, name, a.type, b.type)
            except TS.OracleError as e:
                raise self._fail(node, "unsupported operand types for %s: %s and %s (%s)"
                                 % (sym, a.type, b.type, e))
        else:
            ta = tb = rtype
        R = self.check_scalar_type(rtype, node)
        if self.policy.numba:
            # Numba converts the operands to its chosen signature's types, then computes
            a, b = self.cast(a, ta, node, explicit=True), self.cast(b, tb, node, explicit=True)
        if a.is_const and b.is_const and not (self.policy.numba and name == "pow"):
            folded = self.fold(fn, (a, b), R, node)
            if folded is not None:
                return folded
        return self.arith(name, a, b, R, node)

    def fold(self, fn, args, R, node):
        """The constant Val of fn(*args) when NumPy gives exactly type R for it, else None."""
        r = fold.apply(fn, [(a.const, a.type) for a in args], R)
        return None if r is None else self.const_val(r, R, node)

    def arith(self, name, a, b, R, node):
        k = R.kind
        if name == "pow" and self.policy.numba and b.type.kind in "iu":
            # Numba's integer power (square and multiply in R; its own negative exponents)
            if k in "iu":
                return ir.Call(R, "cf_lang_nb_ipow", [self.cast(a, R, node),
                                                      self.cast(b, R, node)])
            if k == "f":
                return ir.Call(R, "cf_lang_nb_fpowi", [self.cast(a, R, node), b])
        if name in ("lshift", "rshift") and k in "iu":
            ca, cb = self.cast(a, R, node), self.cast(b, R, node)
            return ir.Call(R, "cf_" + name, [ca, cb])
        ca, cb = self.cast(a, R, node), self.cast(b, R, node)
        if name in ("add", "sub", "mul"):
            if k in "iu":
                return ir.Call(R, "cf_" + name, [ca, cb])
            if k == "b":
                op = {"add": "||", "mul": "&&"}.get(name)
                if op is None:
                    raise self._fail(node, "boolean subtraction is not supported")
                return ir.Infix(R, op, [ca, cb])
            op = {"add": "+", "sub": "-", "mul": "*"}[name]
            return ir.Infix(R, op, [ca, cb])
        if name == "truediv":
            if k not in "fc":
                raise self._fail(node, "internal: true division to %s" % R)
            return ir.Infix(R, "/", [ca, cb])
        if name in ("floordiv", "mod"):
            if k not in "iuf":
                raise self._fail(node, "unsupported operand types for %s: %s"
                                 % ({"floordiv": "//", "mod": "%"}[name], R))
            return ir.Call(R, "cf_" + name, [ca, cb])
        if name == "pow":
            if cb.is_const and k in "iuf" and cb.const == 2:
                st, sa = self.ensure_simple(ca)
                c = ir.Call(R, "cf_mul", [sa, sa]) if k in "iu" else ir.Infix(R, "*", [sa, sa])
                return self.with_setup(st, c)
            if k == "b":
                raise self._fail(node, "internal: power of booleans")
            return ir.Call(R, "cf_pow", [ca, cb])
        if name in ("and", "or", "xor"):
            op = {"and": "&", "or": "|", "xor": "^"}[name]
            if k not in "iub":
                raise self._fail(node, "bitwise %s needs integers or booleans, not %s"
                                 % (op, R))
            c = ir.Infix(R, op, [ca, cb])
            if k == "b" or R.bits < 32:
                c = ir.CCast(R, R.cname, c)
            return c
        raise self._fail(node, "internal: operator %s" % name)

    def expr_UnaryOp(self, node):
        if isinstance(node.op, ast.Not):
            v = self.expr(node.operand)
            t = self.truthy(v, node.operand)
            if v.is_const:
                return self.const_val(not bool(v.const), TS.WEAK_BOOL, node)
            return ir.Prefix(TS.WEAK_BOOL, "!", t)
        fn, sym = {ast.USub: (operator.neg, "-"), ast.UAdd: (operator.pos, "+"),
                   ast.Invert: (operator.invert, "~")}[type(node.op)]
        a = self.scalar(self.expr(node.operand), node, "an operand of unary %s" % sym)
        return self.unop(fn, sym, a, node)

    def unop(self, fn, sym, a, node, rtype=None):
        if rtype is None:
            try:
                rtype, ta = self.policy.unop(fn, _UNOP_NAMES[sym], a.type)
                if self.policy.numba:
                    a = self.cast(a, ta, node, explicit=True)
            except TS.OracleError as e:
                raise self._fail(node, "bad operand type for unary %s: %s (%s)"
                                 % (sym, a.type, e))
        R = self.check_scalar_type(rtype, node)
        if (self.policy.numba and sym in "-~" and a.type.kind in "iu"
                and TS.concrete(a.type) != R):
            # Numba negates and inverts an integer in its own type, then widens the result
            # (numba/cpython/numbers.py: -uint8(100) is 156, -int8(-128) is -128)
            return self.cast(self.unop(fn, sym, a, node, rtype=TS.concrete(a.type)), R, node,
                             explicit=True)
        if a.is_const:
            f = self.fold(fn, (a,), R, node)
            if f is not None:
                return f
        ca = self.cast(a, R, node)
        k = R.kind
        if sym == "+":
            return ca
        if sym == "-":
            if k in "iu":
                return ir.Call(R, "cf_neg", [ca])
            if k == "b":
                raise self._fail(node, "negation of a boolean is not supported")
            return ir.Prefix(R, "-", ca)
        if sym == "~":
            if k == "b":
                return ir.Prefix(R, "!", ca)
            if k not in "iu":
                raise self._fail(node, "bad operand type for unary ~: %s" % a.type)
            c = ir.Prefix(R, "~", ca)
            if R.bits < 32:
                c = ir.CCast(R, R.cname, c)
            return c
        raise self._fail(node, "internal: unary %s" % sym)

    # comparisons and boolean operators -----------------------------------
    def compare(self, fn, sym, a, b, node):
        a = self.scalar(a, node, "an operand of %s" % sym)
        b = self.scalar(b, node, "an operand of %s" % sym)
        try:
            R, ct = self.policy.compare(fn, sym, a.type, b.type)
        except TS.OracleError as e:
            raise self._fail(node, "unsupported comparison %s between %s and %s (%s)"
                             % (sym, a.type, b.type, e))
        if self.policy.numba:
            a, b = self.cast(a, ct, node, explicit=True), self.cast(b, ct, node, explicit=True)
        if a.is_const and b.is_const:
            f = self.fold(fn, (a, b), R, node)
            if f is not None:
                return f
        if (ct == TS.MIXED_INT or ct == T.int64) and not self.policy.numba:
            # A Python int constant that fits the other operand's type compares in that type
            # (same result, no 64-bit arithmetic).
            for w, o in ((a, b), (b, a)):
                if (w.is_const and isinstance(w.type, TS.Weak) and not isinstance(o.type, TS.Weak)
                        and o.type.kind in "iu"):
                    info = np.iinfo(o.type.dtype)
                    if info.min <= int(w.const) <= info.max:
                        ct = o.type
        if ct == TS.MIXED_INT:
            if a.type == T.uint64:
                a, b = b, a
                sym = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}[sym]
            ca, cb = self.cast(a, T.int64, node, explicit=True), b
            fn_su, negate = {"<": ("lt", False), "<=": ("le", False), ">": ("le", True),
                             ">=": ("lt", True), "==": ("eq", False), "!=": ("eq", True)}[sym]
            c = ir.Call(R, "cf_lang_%s_su" % fn_su, [ca, cb])
            return ir.Prefix(R, "!", c) if negate else c
        ca, cb = self.cast(a, ct, node), self.cast(b, ct, node)
        if ct.kind == "c" and sym not in ("==", "!="):
            # NumPy orders complex numbers lexicographically
            fn_c = {"<": "clt", "<=": "cle", ">": "cgt", ">=": "cge"}[sym]
            return ir.Call(R, "cf_lang_" + fn_c, [ca, cb])
        c = ir.Infix(R, sym, [ca, cb])
        if R.cname != "cf_bool":
            c = ir.CCast(R, "cf_bool", c)
        return c

    def expr_Compare(self, node):
        first = None
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq, ast.In,
                                                           ast.NotIn)):
            first = self.expr(node.left), self.expr(node.comparators[0])
            t = tuples.compare(self, node.ops[0], first[0], first[1], node)   # tuples, 'in'
            if t is not None:
                return t
        for op in node.ops:
            if type(op) not in _CMPOPS:
                raise self.unsupported(node, "the operator '%s'" % {
                    ast.Is: "is", ast.IsNot: "is not", ast.In: "in",
                    ast.NotIn: "not in"}.get(type(op), type(op).__name__))
        left = self.expr(node.left) if first is None else first[0]
        parts = []
        rt = None
        consts = True
        for i, (op, rnode) in enumerate(zip(node.ops, node.comparators)):
            right = self.expr(rnode) if first is None else first[1]
            right = self.scalar(right, rnode, "an operand of a comparison")
            if i < len(node.ops) - 1 and not right.simple:
                name = self.temp(right.type)
                assign = ir.SetTemp(right.type, name, right)
                r_use = Val(right.type, name, simple=True)
                fn, sym = _CMPOPS[type(op)]
                v = self.compare(fn, sym, left, assign, node)
                right = r_use
            else:
                fn, sym = _CMPOPS[type(op)]
                v = self.compare(fn, sym, left, right, node)
            consts = consts and v.is_const
            parts.append(v)
            rt = v.type if rt is None else self._join(rt, v.type, node)
            left = right
        if len(parts) == 1:
            return parts[0]
        if consts:
            return self.const_val(all(bool(p.const) for p in parts), rt, node)
        return ir.Infix(rt, "&&", parts)

    def cond(self, node):
        """A C bool expression for a condition (if, while, ternary)."""
        if isinstance(node, ast.BoolOp):
            op = "&&" if isinstance(node.op, ast.And) else "||"
            return ir.Infix(T.bool_, op, [self.cond(v) for v in node.values])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return ir.Prefix(T.bool_, "!", self.cond(node.operand))
        v = self.expr(node)
        return self.truthy(v, node)

    def expr_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)
        vals = [self.scalar(self.expr(v), n, "an operand of %s" % ("and" if is_and else "or"))
                for v, n in zip(node.values, node.values)]
        # Numba types the result as the unification of the operands that can give it: a
        # constant operand's branch is pruned before typing (a deciding constant ends the
        # chain, another one is skipped unless it is the last operand)
        R_all = None
        if self.policy.numba:
            kept = []
            for k, v in enumerate(vals):
                if v.is_const:
                    decides = (not bool(v.const)) if is_and else bool(v.const)
                    if decides or k == len(vals) - 1:
                        kept.append(v)
                        break
                    continue
                kept.append(v)
            vals = kept
            for v in vals:
                R_all = self._join(R_all, v.type, node)
        # Leading constants decide statically: `1 or b` is the Python int 1, exactly.
        while vals and vals[0].is_const:
            decides = (not bool(vals[0].const)) if is_and else bool(vals[0].const)
            if decides or len(vals) == 1:
                return vals[0] if R_all is None else self.cast(vals[0], R_all, node)
            vals = vals[1:]
        if len(vals) == 1:
            return vals[0] if R_all is None else self.cast(vals[0], R_all, node)
        R = R_all
        if R is None:
            for v in vals:
                R = TS.join(R, v.type)
        self.check_scalar_type(R, node)
        # fold from the right: a or (b or c)
        acc = self.cast(vals[-1], R, node)
        for v in reversed(vals[:-1]):
            if v.is_const:
                keep = bool(v.const) if not is_and else not bool(v.const)
                acc = self.cast(v, R, node) if keep else acc
                continue
            st, sv = self.ensure_simple(v)
            t = self.truthy(sv, node)
            first = self.cast(sv, R, node)
            if is_and:
                c = ir.Select(R, ir.Not(T.bool_, t), first, acc)
            else:
                c = ir.Select(R, t, first, acc)
            acc = self.with_setup(st, c)
        return acc

    def expr_IfExp(self, node):
        c = self.cond(node.test)
        a = self.expr(node.body)
        b = self.expr(node.orelse)
        if isinstance(a, TupleVal) and isinstance(b, TupleVal) and len(a.items) == len(b.items):
            return self._tuple_ifexp(c, a, b, node)
        if isinstance(a, TupleVal) or isinstance(b, TupleVal):
            raise self._fail(node, "a conditional expression choosing between a tuple and "
                             "something else is not supported", UnsupportedError)
        if isinstance(a, StaticVal) or isinstance(b, StaticVal):
            raise self._fail(node, "a conditional expression must choose between values")
        R = self._join(a.type, b.type, node)
        if isinstance(R, T.Scalar):
            self.check_scalar_type(R, node)
        if type(c) is ir.Const:   # a constant condition chooses the branch, with its own type
            return a if c.const else b
        ca, cb = self.cast(a, R, node), self.cast(b, R, node)
        return ir.Select(R, c, ca, cb)

    def _tuple_ifexp(self, c, a, b, node):
        types = [self._join(x.type, y.type, node) for x, y in zip(a.items, b.items)]
        for t in types:
            if not isinstance(t, T.Scalar):
                raise self._fail(node, "tuples of arrays are not supported", UnsupportedError)
            self.check_scalar_type(t, node)
        temps = [self.temp(t) for t in types]

        def branch(v):
            parts = [v.setup] if v.setup else []
            for tn, it, t in zip(temps, v.items, types):
                parts.append(ir.Assign(t, tn, self.cast(it, t, node)))
            return ir.Paren(None, ir.Seq(None, parts))
        setup = ir.Select(None, c, branch(a), branch(b))
        return TupleVal([Val(t, tn, simple=True) for t, tn in zip(types, temps)], setup)

    # calls ------------------------------------------------------------------
    def expr_NamedExpr(self, node):
        """(name := value): the variable set inside the expression (a while condition, a
        short-circuit operand: no statement before it could do that); scalars only."""
        name = node.target.id
        v = self.scalar(self.expr(node.value), node, "the value of :=")
        old = self.var_types.get(name)
        if self.strict:
            t = old
        else:
            try:
                t = self._join(old, v.type, node)
            except (TypingError, _Bottom):
                raise _Bottom()
            self.var_types[name] = t
        if not isinstance(t, T.Scalar):
            raise self._fail(node, "variable '%s' is assigned values of types %s and %s, which "
                             "cannot be unified" % (name, old, v.type))
        # the expression's value is the value assigned, with its own type (a literal stays
        # weak), not the variable's; and never a folded constant (the store must stay)
        st, sv = self.ensure_simple(v)
        store = ir.Assign(None, self.var_c(name), self.cast(sv, t, node))
        setup = store if st is None else ir.Paren(None, ir.Seq(None, [st, store]))
        return ir.Comma(sv.type, setup, sv)

    def expr_Call(self, node):
        return calls.call(self, node)



_EXPR_NAMES = {
    "Lambda": "lambda", "List": "a list display", "Dict": "a dict display",
    "Set": "a set display", "ListComp": "a list comprehension",
    "SetComp": "a set comprehension", "DictComp": "a dict comprehension",
    "GeneratorExp": "a generator expression", "Yield": "yield", "YieldFrom": "yield from",
    "Await": "await", "JoinedStr": "an f-string", "FormattedValue": "an f-string",
"Starred": "starred expressions",
    "Slice": "slicing",
}
