"""Python function -> typed IR: the typing walk over a function's AST.

One FunctionTranslator handles one (function, argument types) pair. It walks the function's AST
in two modes:

* collect mode, repeated until the types of all variables and returns stop changing: every
  variable gets the join (NumPy promotion, NEP 50 for weak values) of all types assigned to it.
  Expressions whose operands are not typed yet, and type errors, contribute nothing here (a later
  round may make them well typed);
* strict mode, once, with the final types: errors are raised, and the function is emitted.

This module is the driver: the passes (run), the return type, casts and constants, the emission
utilities shared by the parts, and the C function (_finish). FunctionTranslator is composed of
three parts: stmts.py (statements), exprs.py (operators, comparisons, attributes, indexing) and
names.py (names, globals, closure variables and captured arrays). Every expression becomes an IR
value (ir.py) with its type and, when folded (fold.py), its constant; calls go through the call
tables (calls.py), which translate a called Python function through translate_callee. emit.py
renders the IR as C. Statements become IR statements too (ir.Stmt: Store, If, While, ForStep,
Return, ...), appended to the block being built (self.add, self.sub_block); _finish hands the
body's block to emit.render_block, the one place statement C is written. Temporaries and locals
are declared at the top of the C function.
"""

import ast

import numpy as np

from .. import types as T
from ..errors import TypingError, UnsupportedError
from . import typesys as TS
from . import checks, ir
from . import emit
from . import fold
from . import policy as POLICY
from .fold import fits, int_range_message
from .ir import StaticVal, TupleVal, Val, _Bottom
from .source import get_source, located_error
from .stmts import StmtsMixin
from .exprs import ExprsMixin
from .names import NamesMixin

_ZERO = Val(None, "0")   # the C literal 0, for (x != 0)


class Unit:
    """State shared by one top-level translate(): translated functions, structs and tables."""

    def __init__(self, fastmath, policy=None, debug=False):
        self.fastmath = fastmath
        self.policy = policy or POLICY.get("numpy")   # the typing rules (policy.py)
        self.debug = debug       # assert statements checked (else compiled away)
        self.funcs = {}          # key -> FuncResult
        self.stack = []          # python functions being translated (recursion check)
        self.structs = {}        # name -> definition text
        self.tables = {}         # name -> definition text


class FuncResult:
    __slots__ = ("name", "definition", "ret_type", "arg_types", "garrays", "deps", "py_func")

    def __init__(self):
        self.deps = []



class FunctionTranslator(StmtsMixin, ExprsMixin, NamesMixin):
    def __init__(self, unit, pyfunc, argtypes, return_type):
        self.unit = unit
        self.pyfunc = pyfunc
        self.src = get_source(pyfunc)
        self.tree = self.src.tree
        self.argtypes = list(argtypes)
        self.declared_ret = return_type
        self.fastmath = unit.fastmath
        self.policy = unit.policy
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
        if self.policy.numba:
            # Numba unifies strong types: a literal initialiser is int64/float64 already
            a = TS.concrete(a) if a is not None else None
            b = TS.concrete(b) if b is not None else None
        if a is None:
            return b
        if b is None:
            return a
        if isinstance(a, T.Scalar) and isinstance(b, T.Scalar):
            try:
                return self.policy.join(a, b)
            except TS.OracleError as e:
                raise self._fail(node, str(e))
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
        if self.policy.numba and isinstance(t, TS.Weak):
            t = self.policy.literal(t, value)
            if t.kind in "iu" and t.kind != "c" and not -2 ** 63 <= value < 2 ** 64:
                raise self._fail(node, int_range_message(value, fits(value)))
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
            # One rule with literals (docs/language.md): a constant used as a value must fit in 64
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

    def translate_callee(self, pyfunc, argtypes, return_type):
        """The FuncResult of a Python function this one calls (calls.py calls back here, so
        that the call tables need not know the translator)."""
        return translate_function(self.unit, pyfunc, argtypes, return_type)

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
