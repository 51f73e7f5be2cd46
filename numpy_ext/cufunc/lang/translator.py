"""Python function -> typed IR: the typing walk over a function's AST.

One FunctionTranslator handles one (function, argument types) pair. It walks the function's AST
in two modes:

* collect mode, repeated until the types of all variables and returns stop changing: every
  variable gets the join (NumPy promotion, NEP 50 for weak values) of all types assigned to it.
  Expressions whose operands are not typed yet, and type errors, contribute nothing here (a later
  round may make them well typed);
* strict mode, once, with the final types: errors are raised, and the function is emitted.

This module owns the statements, names, globals and captured arrays, operators, casts, indexing
and the errors at the user's line. Every expression becomes an IR value (ir.py) with its type
and, when folded (fold.py), its constant; calls go through the call tables (calls.py). emit.py
renders the IR as C. Statements become IR statements too (ir.Stmt: Store, If, While, ForStep,
Return, ...), appended to the block being built (self.add, self.sub_block); _finish hands the
body's block to emit.render_block, the one place statement C is written. Temporaries and locals
are declared at the top of the C function.
"""

import ast
import builtins
import hashlib
import operator

import numpy as np

from .. import types as T
from ..errors import TypingError, UnsupportedError
from . import typesys as TS
from . import calls, checks, ir, loops, views
from . import emit
from .cgen import c_ident, sanitize, tuple_struct_name
from . import fold
from .fold import fits, int_range_message
from .ir import NOCONST, RefVarVal, StaticVal, TupleVal, Val, _Bottom
from .source import get_source, located_error

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


_ZERO = Val(None, "0")   # the C literal 0, for (x != 0)


class Unit:
    """State shared by one top-level translate(): translated functions, structs and tables."""

    def __init__(self, fastmath, debug=False):
        self.fastmath = fastmath
        self.debug = debug       # assert statements checked (else compiled away)
        self.funcs = {}          # key -> FuncResult
        self.stack = []          # python functions being translated (recursion check)
        self.structs = {}        # name -> definition text
        self.tables = {}         # name -> definition text


class FuncResult:
    __slots__ = ("name", "definition", "ret_type", "arg_types", "garrays", "deps", "py_func")

    def __init__(self):
        self.deps = []



class FunctionTranslator:
    def __init__(self, unit, pyfunc, argtypes, return_type):
        self.unit = unit
        self.pyfunc = pyfunc
        self.src = get_source(pyfunc)
        self.tree = self.src.tree
        self.argtypes = list(argtypes)
        self.declared_ret = return_type
        self.fastmath = unit.fastmath
        if isinstance(self.tree, ast.Lambda):
            self.body = [ast.Return(value=self.tree.body, lineno=self.tree.body.lineno,
                                    col_offset=self.tree.body.col_offset,
                                    end_lineno=getattr(self.tree.body, "end_lineno", None),
                                    end_col_offset=getattr(self.tree.body, "end_col_offset",
                                                           None))]
        else:
            self.body = self.tree.body
        self._check_signature_shape()
        self.params = [a.arg for a in self.tree.args.args]
        self.locals = self._assigned_names()
        self.locals.update(self.params)
        self.closure = {}
        self.empty_cells = set()
        code = pyfunc.__code__
        if pyfunc.__closure__:
            for name, cell in zip(code.co_freevars, pyfunc.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:
                    # Not assigned yet in the enclosing function: CPython would raise NameError;
                    # a global of the same name must not be taken instead.
                    self.empty_cells.add(name)
        self.globals = pyfunc.__globals__
        self.nonneg_vars = self._nonneg_vars()

    # ----------------------------------------------------------------- errors
    def err(self, node, msg, cls=TypingError):
        return located_error(cls, msg, self.src, node)

    def unsupported(self, node, what):
        return self.err(node, "%s is not supported in cufunc kernel functions" % what,
                        UnsupportedError)

    # ----------------------------------------------------------------- checks and pre-passes
    def _check_signature_shape(self):
        a = self.tree.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults or a.kw_defaults:
            raise self.unsupported(self.tree, "*args, **kwargs, keyword-only, positional-only "
                                   "or default parameters")
        if isinstance(self.tree, ast.AsyncFunctionDef):
            raise self.unsupported(self.tree, "async def")
        n = len(a.args)
        if n != len(self.argtypes):
            raise self.err(self.tree, "%s takes %d argument(s) but the signature gives %d"
                           % (self.src.qualname, n, len(self.argtypes)))

    def _assigned_names(self):
        names = set()
        self.assign_count = {}

        def targets(t):
            if isinstance(t, ast.Name):
                names.add(t.id)
                self.assign_count[t.id] = self.assign_count.get(t.id, 0) + 1
            elif isinstance(t, (ast.Tuple, ast.List)):
                for e in t.elts:
                    targets(e)
            elif isinstance(t, ast.Starred):
                targets(t.value)

        for node in ast.walk(ast.Module(body=list(self.body), type_ignores=[])):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    targets(t)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)):
                targets(node.target)
            elif isinstance(node, ast.NamedExpr):
                targets(node.target)
        return names

    def _static_int(self, node):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self._static_int(node.operand)
            return None if v is None else -v
        if isinstance(node, ast.Name) and node.id not in self.locals:
            v = self._lookup_global(node.id)
            if type(v) is int:
                return v
        return None

    def _nonneg_vars(self):
        """Variables only ever assigned by `for v in range(...)` with a non-negative constant
        start and a positive constant step: indexing with them needs no negative wrap."""
        ok, bad = set(), set()
        for node in ast.walk(ast.Module(body=list(self.body), type_ignores=[])):
            if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                it = node.iter
                good = False
                if (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                        and it.func.id == "range" and not it.keywords and 1 <= len(it.args) <= 3):
                    start = 0 if len(it.args) == 1 else self._static_int(it.args[0])
                    step = 1 if len(it.args) < 3 else self._static_int(it.args[2])
                    good = start is not None and start >= 0 and step is not None and step > 0
                (ok if good else bad).add(node.target.id)
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
                tl = node.targets if isinstance(node, ast.Assign) else [node.target]
                todo = list(tl)
                while todo:
                    t = todo.pop()
                    if isinstance(t, ast.Name):
                        bad.add(t.id)
                    elif isinstance(t, (ast.Tuple, ast.List)):
                        todo.extend(t.elts)
                    elif isinstance(t, ast.Starred):
                        todo.append(t.value)
        return ok - bad - set(self.params if hasattr(self, "params") else ())

    def _mangle(self, name):
        """CPython's private name mangling: in a function written inside ``class C``, ``__x``
        means ``_C__x`` (for globals, closure variables and attributes alike)."""
        cls = self.src.mangle_class
        if cls and name.startswith("__") and not name.endswith("__") and "." not in name:
            stripped = cls.lstrip("_")
            if stripped:
                return "_%s%s" % (stripped, name)
        return name

    def _lookup_global(self, name):
        name = self._mangle(name)
        if name in self.closure:
            return self.closure[name]
        if name in self.empty_cells:
            return NOCONST
        if name in self.globals:
            return self.globals[name]
        return getattr(builtins, name, NOCONST)

    # ----------------------------------------------------------------- driver
    def run(self):
        """Type to a fixpoint, then emit. Returns a FuncResult."""
        self.var_types = {}
        for name, t in zip(self.params, self.argtypes):
            self.var_types[name] = t
        self.garrays = []          # [(obj, Array type, c name)]
        prev = None
        for _ in range(64):
            self.strict = False
            self._reset_pass()
            self._emit_body()
            state = (dict(self.var_types), tuple(self.ret_types))
            if state == prev:
                break
            prev = state
        else:
            raise self.err(self.tree, "the types of this function's variables do not settle "
                           "(internal limit reached)")
        self.collected_rets = list(self.ret_types)
        self.strict = True
        self._reset_pass()
        self._emit_body()
        return self._finish()

    def _reset_pass(self):
        self.block = []            # the statements (ir.Stmt) of the block being built
        self.temps = []            # (ctype, name)
        self.ntemp = 0
        self.local_storage = []    # ir.Declare of each local array's storage
        self.deps = []
        self.ret_types = []
        self.returns_none = False
        self.var_refs = {}
        self.used_ref_vars = set()
        self.loop_else = []        # per enclosing loop: its else clause's break flag, or None

    def _emit_body(self):
        body = self.body
        if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            body = body[1:]
        self.stmts(body)
        if self.strict:
            self._check_end(self.body)

    # ----------------------------------------------------------------- return type
    def final_return_type(self):
        if self.declared_ret is not None:
            return self.declared_ret
        rets = self.collected_rets if self.strict else self.ret_types
        if not rets:
            return T.void
        t = None
        for r in rets:
            t = self._join(t, r, None)
        return t

    def _check_end(self, body):
        rt = self.final_return_type()
        if rt == T.void or not self._falls_through(body):
            return
        if isinstance(self.tree, ast.Lambda):
            return
        # Numba's Optional result: the None path gets checks.none_value's value
        checks.none_value(self, body[-1] if body else self.tree, TS.concrete(rt))

    def _falls_through(self, stmts):
        for s in stmts:
            if isinstance(s, ast.Return):
                return False
            if isinstance(s, ast.If):
                st = self.static_truth(s.test)
                if st is not None:
                    if not self._falls_through(s.body if st else s.orelse):
                        return False
                elif not self._falls_through(s.body) and not self._falls_through(s.orelse):
                    return False
            if isinstance(s, ast.While):
                t = s.test
                if self.static_truth(t) and not any(
                        isinstance(n, ast.Break) for n in self._loop_level_nodes(s.body)):
                    return False
        return True

    def _loop_level_nodes(self, stmts):
        """Nodes of a loop body that belong to this loop (not to nested loops)."""
        out = []
        todo = list(stmts)
        while todo:
            n = todo.pop()
            out.append(n)
            if isinstance(n, (ast.For, ast.While)):
                todo.extend(n.orelse)
                continue
            todo.extend(c for c in ast.iter_child_nodes(n) if isinstance(c, ast.stmt))
        return out

    # ----------------------------------------------------------------- emission utilities
    def add(self, stmt):
        """Append a statement (ir.Stmt) to the block being built."""
        self.block.append(stmt)

    def sub_block(self, body, first=None):
        """The block (a list of ir.Stmt) of the Python statements body; first(), when given,
        adds its statements before them (a for loop's variable)."""
        outer, self.block = self.block, []
        try:
            if first is not None:
                first()
            self.stmts(body)
            return self.block
        finally:
            self.block = outer

    def temp(self, t):
        """A new temporary of type t (declared at the top of the function)."""
        self.ntemp += 1
        name = "cf_t%d" % self.ntemp
        self.temps.append((t.cname if not isinstance(t, str) else t, name))
        return name

    def ensure_simple(self, v):
        """v, or v stored in a temporary when its text is not a plain name or literal; returns
        (setup_expr or None, Val)."""
        if v.simple:
            return None, v
        name = self.temp(v.type)
        return ir.SetTemp(v.type, name, v), Val(v.type, name, nonneg=v.nonneg, simple=True)

    def with_setup(self, setup, v):
        if not setup:
            return v
        return ir.Comma(v.type, setup, v, const=v.const, nonneg=v.nonneg)

    def _join(self, a, b, node):
        if a is None:
            return b
        if b is None:
            return a
        if isinstance(a, T.Scalar) and isinstance(b, T.Scalar):
            return TS.join(a, b)
        if isinstance(a, T.Array) and isinstance(b, T.Array):
            if a.dtype == b.dtype and a.ndim == b.ndim:
                layout = a.layout if a.layout == b.layout else "A"
                return T.Array(a.dtype, a.ndim, layout, a.readonly or b.readonly)
            raise self._fail(node, "cannot unify array types %s and %s" % (a, b))
        if isinstance(a, T.Tuple) and isinstance(b, T.Tuple) and len(a) == len(b):
            return T.Tuple(self._join(x, y, node) for x, y in zip(a.types, b.types))
        raise self._fail(node, "cannot unify the types %s and %s" % (a, b))

    def _fail(self, node, msg, cls=TypingError):
        if not self.strict:
            return _Bottom()
        return self.err(node, msg, cls)

    def check_scalar_type(self, t, node):
        """Every scalar type is a kernel type now (float16 included: cf_float16 in runtime.cuh
        computes each operation in float32 and rounds to half, NumPy's float16 meaning)."""
        return t

    # ----------------------------------------------------------------- casts and constants
    def convert_const(self, value, src, dst, explicit, node):
        """NumPy's conversion of a constant; None when it is left to the runtime cast."""
        try:
            return fold.convert(value, src, dst, explicit)
        except fold.ConstError as e:
            raise self._fail(node, str(e))

    def const_val(self, value, t, node):
        """A Val for the constant `value` of type t."""
        if isinstance(t, TS.Weak) and t.kind == "i" and not -2 ** 63 <= value < 2 ** 63:
            # A constant sub-expression may exceed 64 bits (2**64 - 1); it must be converted
            # to a type it fits before it is used (cast() checks).
            return ir.BigInt(t, const=value)
        nonneg = t.kind in "iub" and int(np.real(value)) >= 0 if t.kind != "c" else False
        return ir.Const(t, const=value, nonneg=nonneg)

    def cast(self, v, t, node, explicit=False):
        """v converted to type t (NumPy's astype meaning)."""
        if isinstance(v, StaticVal):
            raise self._fail(node, "%s is not a value" % v.name)
        if isinstance(v, TupleVal) or isinstance(t, T.Tuple):
            if isinstance(v, TupleVal) and isinstance(t, T.Tuple) and len(v.items) == len(t):
                return TupleVal([self.cast(x, y, node) for x, y in zip(v.items, t.types)],
                                v.setup)
            raise self._fail(node, "cannot convert %s to %s" % (v.type, t))
        if type(v) is ir.BigInt and (
                not -2 ** 63 <= v.const < 2 ** 64 or not (
                    isinstance(t, T.Scalar) and t.kind != "i" and not isinstance(t, TS.Weak))):
            # One rule with literals (LANGUAGE.md): a constant used as a value must fit in 64
            # bits, whatever it is converted to; [2**63, 2**64) only as an unsigned or float.
            raise self._fail(node, int_range_message(v.const, fits(v.const)))
        if v.type == t:
            return v
        if isinstance(v.type, T.Array) or isinstance(t, T.Array):
            if (isinstance(v.type, T.Array) and isinstance(t, T.Array)
                    and v.type.dtype == t.dtype and v.type.ndim == t.ndim):
                return ir.Retype(t, v)
            raise self._fail(node, "cannot convert %s to %s" % (v.type, t))
        if isinstance(t, T.Void):
            raise self._fail(node, "a value cannot be converted to void")
        self.check_scalar_type(t, node)
        if v.is_const:
            c = self.convert_const(v.const, v.type, t, explicit, node)
            if c is not None:
                return self.const_val(c, t, node)
        if v.type.cname == t.cname:
            return ir.Retype(t, v, nonneg=v.nonneg, simple=v.simple)
        if type(v) is ir.BigInt:
            raise self._fail(node, int_range_message(v.const, "int64"))
        if v.widened is not None and v.widened.type.cname == t.cname:
            # narrowing back what was exactly widened (float32 -> float64 -> float32)
            w = v.widened
            return ir.Retype(t, w, nonneg=w.nonneg, simple=w.simple)
        nonneg = v.nonneg and t.kind in "iu" and t.bits >= v.type.bits
        exact = (v.type.kind == t.kind and t.bits > v.type.bits and t.kind in "fc") or (
            v.type.kind in "iu" and t.kind == "i" and t.bits > v.type.bits) or (
            v.type.kind == "u" and t.kind == "u" and t.bits > v.type.bits)
        return ir.Cast(t, v, nonneg=nonneg, widened=v if exact else None)

    def truthy(self, v, node):
        """A C bool expression: Python's truth value of v (a Const for a constant)."""
        v = self.scalar(v, node, "a truth value")
        if v.is_const:
            return ir.Const(TS.WEAK_BOOL, const=bool(v.const))
        k = v.type.kind
        if k == "b":
            return v
        if k == "c":
            return ir.Call(T.bool_, "cf_lang_truthy", [v])
        return ir.Infix(T.bool_, "!=", [v, _ZERO])

    def scalar(self, v, node, what):
        if isinstance(v, StaticVal):
            raise self._fail(node, "%s cannot be used as %s" % (v.name, what))
        if isinstance(v, TupleVal):
            raise self._fail(node, "a tuple cannot be used as %s" % what)
        if isinstance(v.type, T.Array):
            raise self._fail(node, "an array cannot be used as %s (arrays are indexed element "
                             "by element)" % what)
        if isinstance(v.type, T.Void):
            raise self._fail(node, "the called function returns nothing (None); it cannot be "
                             "used as %s" % what)
        return v

    # ----------------------------------------------------------------- statements
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

    # ----------------------------------------------------------------- expressions
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

    def load_name(self, node):
        name = node.id
        if name in self.locals:
            t = self.var_types.get(name)
            if t is None:
                if self.strict:
                    raise self.err(node, "variable '%s' is used before it is assigned a value"
                                   % name)
                raise _Bottom()
            cn = self.var_c(name)
            if isinstance(t, T.Tuple):
                return TupleVal([Val(x, "cf_tv_%s_%d" % (cn, i), simple=True)
                                 for i, x in enumerate(t.types)])
            if name in self.var_refs:
                return RefVarVal(t, cn, self.used_ref_vars, name, simple=True,
                                 ref=self.var_refs[name])
            return Val(t, cn, simple=True, nonneg=name in self.nonneg_vars)
        obj = self._lookup_global(name)
        if obj is NOCONST:
            if self._mangle(name) in self.empty_cells:
                raise self.err(node, "free variable '%s' has no value yet: the enclosing "
                               "function assigns it after this function is compiled (CPython "
                               "would raise NameError here)" % name)
            raise self.err(node, "name '%s' is not defined" % name)
        return self.object_val(obj, name, node)

    expr_Name = load_name

    def object_val(self, obj, name, node):
        """The Val of a captured global (or closure variable, or builtin)."""
        if isinstance(obj, np.generic) and obj.dtype.kind in "biufc":
            t = T.from_dtype(obj.dtype)
            self.check_scalar_type(t, node)
            return self.const_val(obj, t, node)
        if isinstance(obj, bool):
            return self.const_val(obj, TS.WEAK_BOOL, node)
        if isinstance(obj, int):
            if not -2 ** 63 <= obj < 2 ** 64:
                raise self.err(node, int_range_message(obj, name=name))
            return self.const_val(obj, TS.WEAK_INT, node)
        if isinstance(obj, float):
            return self.const_val(obj, TS.WEAK_FLOAT, node)
        if isinstance(obj, complex):
            return self.const_val(obj, TS.WEAK_COMPLEX, node)
        if isinstance(obj, np.generic) and obj.dtype.kind in "biufc":
            t = T.from_dtype(obj.dtype)
            self.check_scalar_type(t, node)
            return self.const_val(obj, t, node)
        if isinstance(obj, tuple):
            items = []
            for i, x in enumerate(obj):
                v = self.object_val(x, "%s[%d]" % (name, i), node)
                if not isinstance(v, Val) or not v.is_const:
                    raise self.err(node, "global tuple '%s' may hold only numbers" % name,
                                   UnsupportedError)
                items.append(v)
            return TupleVal(items)
        if isinstance(obj, np.ndarray):
            return self.table(obj, name, node)
        if hasattr(obj, "__cuda_array_interface__") and not isinstance(obj, type):
            return self.device_array(obj, name, node)
        if obj is None:
            raise self.unsupported(node, "None as a value")
        if isinstance(obj, (str, bytes)):
            raise self.unsupported(node, "a string (global '%s')" % name)
        return StaticVal(obj, name)

    def table(self, arr, name, node):
        """A captured NumPy array: a constant table in the generated source."""
        if arr.dtype.kind not in "biufc":
            raise self.err(node, "global array '%s' has dtype %s, which is not supported"
                           % (name, arr.dtype), UnsupportedError)
        t = T.from_dtype(arr.dtype)
        self.check_scalar_type(t, node)
        if arr.ndim == 0:
            return self.const_val(arr[()], t, node)
        flat = np.ascontiguousarray(arr).reshape(-1)
        h = hashlib.sha256()
        h.update(("%s|%s|" % (t.name, arr.shape)).encode())
        h.update(flat.tobytes())
        cname = "cf_tab_%s_%s" % (sanitize(name)[:24], h.hexdigest()[:12])
        # Complex tables are stored as (re, im) pairs of the real type: a __device__ variable
        # needs a constant initializer and cf_complex's constructor is not constexpr.
        et = t if t.kind != "c" else (T.float32 if t.bits == 64 else T.float64)
        if t.kind == "c":
            flat = np.stack([flat.real, flat.imag], axis=-1).reshape(-1).astype(et.dtype)
        if cname not in self.unit.tables:
            self.unit.tables[cname] = emit.table_definition(cname, name, t, arr.shape, et, flat)
        at = T.Array(t, arr.ndim, "C", readonly=True)
        storage = cname if t.kind != "c" else "((%s *)%s)" % (t.cname, cname)
        return self.ref_val(at, storage, arr.shape, node)

    def ref_val(self, at, storage, shape, node):
        shape = tuple(int(x) for x in shape)
        return ir.ArrayDesc(at, storage, shape, ref=(storage, shape))

    def device_array(self, obj, name, node):
        try:
            cai = obj.__cuda_array_interface__
            dt = np.dtype(cai["typestr"])
            shape = tuple(cai["shape"])
            readonly = bool(cai.get("data", (0, False))[1])
        except Exception as e:
            raise self.err(node, "global '%s' has a malformed __cuda_array_interface__ (%s)"
                           % (name, e))
        if dt.kind not in "biufc":
            raise self.err(node, "global device array '%s' has dtype %s, which is not "
                           "supported" % (name, dt), UnsupportedError)
        if len(shape) == 0:
            raise self.err(node, "global device array '%s' is 0-dimensional" % name,
                           UnsupportedError)
        t = T.Array(T.from_dtype(dt), len(shape), "A", readonly)
        self.check_scalar_type(t.dtype, node)
        for o, at, cn in self.garrays:
            if o is obj:
                return Val(at, cn, simple=True)
        cn = "cf_garr%d_%s" % (len(self.garrays), sanitize(name)[:32])
        self.garrays.append((obj, t, cn))
        return Val(t, cn, simple=True)

    def static(self, node):
        """The compile-time object an expression names (module, function, type) or None."""
        if isinstance(node, ast.Name):
            if node.id in self.locals:
                return None
            obj = self._lookup_global(node.id)
            if obj is NOCONST:
                return None
            return StaticVal(obj, node.id)
        if isinstance(node, ast.Attribute):
            base = self.static(node.value)
            if base is None:
                return None
            try:
                obj = getattr(base.obj, self._mangle(node.attr))
            except AttributeError:
                return None
            return StaticVal(obj, "%s.%s" % (base.name, node.attr))
        return None

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
            raise self._fail(node, "array attribute '.%s' is not supported (only shape, size, "
                             "ndim)" % attr, UnsupportedError)
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
            if isinstance(node.slice, ast.Slice):
                raise self.unsupported(node, "slicing a tuple")
            idx = self.expr(node.slice)
            idx = self.scalar(idx, node.slice, "a tuple index")
            if not idx.is_const or idx.type.kind not in "iu":
                raise self._fail(node.slice, "a tuple index must be a constant integer",
                                 UnsupportedError)
            i = int(idx.const)
            n = len(base.items)
            if not -n <= i < n:
                raise self._fail(node.slice, "tuple index %d out of range (length %d)" % (i, n))
            return self.with_setup(base.setup, base.items[i])
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
        return self.binop(fn, name, sym, a, b, node)

    def binop(self, fn, name, sym, a, b, node, rtype=None):
        a = self.scalar(a, node, "an operand of %s" % sym)
        b = self.scalar(b, node, "an operand of %s" % sym)
        if rtype is None:
            try:
                rtype = TS.oracle(fn, a.type, b.type)
            except TS.OracleError as e:
                raise self._fail(node, "unsupported operand types for %s: %s and %s (%s)"
                                 % (sym, a.type, b.type, e))
        R = self.check_scalar_type(rtype, node)
        if a.is_const and b.is_const:
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
                rtype = TS.oracle(fn, a.type)
            except TS.OracleError as e:
                raise self._fail(node, "bad operand type for unary %s: %s (%s)"
                                 % (sym, a.type, e))
        R = self.check_scalar_type(rtype, node)
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
            R = TS.oracle(fn, a.type, b.type)
        except TS.OracleError as e:
            raise self._fail(node, "unsupported comparison %s between %s and %s (%s)"
                             % (sym, a.type, b.type, e))
        if a.is_const and b.is_const:
            f = self.fold(fn, (a, b), R, node)
            if f is not None:
                return f
        ct = TS.compare_type(a.type, b.type)
        if ct == TS.MIXED_INT or ct == T.int64:
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
        for op in node.ops:
            if type(op) not in _CMPOPS:
                raise self.unsupported(node, "the operator '%s'" % {
                    ast.Is: "is", ast.IsNot: "is not", ast.In: "in",
                    ast.NotIn: "not in"}.get(type(op), type(op).__name__))
        left = self.expr(node.left)
        parts = []
        rt = None
        consts = True
        for i, (op, rnode) in enumerate(zip(node.ops, node.comparators)):
            right = self.expr(rnode)
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
            rt = v.type if rt is None else TS.join(rt, v.type)
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
        # Leading constants decide statically: `1 or b` is the Python int 1, exactly.
        while vals and vals[0].is_const:
            decides = (not bool(vals[0].const)) if is_and else bool(vals[0].const)
            if decides or len(vals) == 1:
                return vals[0]
            vals = vals[1:]
        if len(vals) == 1:
            return vals[0]
        R = None
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
    def expr_Call(self, node):
        return calls.call(self, node)

    def _finish(self):
        rt = self.final_return_type()
        ret_c = TS.concrete(rt)
        if isinstance(ret_c, T.Tuple):
            ret_cname = self.struct(ret_c)
        else:
            ret_cname = ret_c.cname
        params = []
        pre = []
        for name, t in zip(self.params, self.argtypes):
            vt = self.var_types.get(name, t)
            cn = self.var_c(name)
            if vt == t or (isinstance(vt, T.Array) and vt.cname == t.cname):
                params.append("%s %s" % (t.cname, cn))
            else:
                params.append("%s cf_arg_%s" % (t.cname, cn))
                v = self.cast(Val(t, "cf_arg_%s" % cn, simple=True), vt, self.tree)
                if isinstance(v, TupleVal):
                    raise self.err(self.tree, "internal: tuple parameter")
                pre.append(ir.Store(cn, v))
        for obj, at, cn in self.garrays:
            params.append("%s %s" % (at.cname, cn))
        decls = []
        for name in sorted(self.var_types, key=lambda n: (n not in self.params, n)):
            t = self.var_types[name]
            cn = self.var_c(name)
            if name in self.params and self.var_types[name] == self.argtypes[
                    self.params.index(name)]:
                continue
            if isinstance(t, T.Tuple):
                for i, x in enumerate(t.types):
                    decls.append(ir.Declare(x.cname, "cf_tv_%s_%d" % (cn, i)))
            elif name in self.var_refs and name not in self.used_ref_vars:
                continue      # only indexed directly through its storage: no variable needed
            else:
                decls.append(ir.Declare(t.cname, cn))
        decls.extend(self.local_storage)
        for ct, name in self.temps:
            decls.append(ir.Declare(ct, name))
        # rendered only now: a local array variable is written when its value was used
        lines = emit.render_block(decls + pre + self.block, 1, self.used_ref_vars)
        sigtext = "%s(%s)" % (TS.concrete(rt), ", ".join(str(t) for t in self.argtypes))
        res = FuncResult()
        res.name, res.definition = emit.function_definition(
            self.src.qualname, sigtext, self.fastmath, ret_cname, params, lines)
        res.ret_type = rt
        res.arg_types = list(self.argtypes)
        res.garrays = list(self.garrays)
        res.deps = list(self.deps)
        res.py_func = self.pyfunc
        return res



def translate_function(unit, pyfunc, argtypes, return_type):
    key = (pyfunc, tuple(argtypes), return_type)
    res = unit.funcs.get(key)
    if res is not None:
        return res
    unit.stack.append(pyfunc)
    try:
        ft = FunctionTranslator(unit, pyfunc, argtypes, return_type)
        res = ft.run()
    finally:
        unit.stack.pop()
    unit.funcs[key] = res
    return res



def _is_value_object(obj):
    return isinstance(obj, (bool, int, float, complex, np.generic, np.ndarray, tuple)) or \
        hasattr(obj, "__cuda_array_interface__")




_STMT_NAMES = {
    "Try": "try", "TryStar": "try", "With": "with", "AsyncWith": "async with",
    "Raise": "raise", "Global": "global", "Nonlocal": "nonlocal", "Delete": "del",
    "Import": "import", "ImportFrom": "import", "FunctionDef": "a nested def",
    "AsyncFunctionDef": "a nested def", "ClassDef": "class", "Assert": "assert",
    "AsyncFor": "async for", "Match": "match",
}
_EXPR_NAMES = {
    "Lambda": "lambda", "List": "a list display", "Dict": "a dict display",
    "Set": "a set display", "ListComp": "a list comprehension",
    "SetComp": "a set comprehension", "DictComp": "a dict comprehension",
    "GeneratorExp": "a generator expression", "Yield": "yield", "YieldFrom": "yield from",
    "Await": "await", "JoinedStr": "an f-string", "FormattedValue": "an f-string",
    "NamedExpr": "the walrus operator :=", "Starred": "starred expressions",
    "Slice": "slicing",
}
