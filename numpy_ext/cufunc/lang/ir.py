"""The typed values the translator works with (its intermediate representation).

Every expression the translator types becomes one of these:

* Val: a scalar or array value: its cufunc type, its constant value when folded (else NOCONST),
  facts used for shorter C (nonneg, simple), the storage of a table or local array (ref);
* TupleVal: a tuple of Vals (tuples live only at compile time: each item is its own value);
* StaticVal: a compile-time Python object (a module, a function, a type).

and every statement a Stmt (Store, If, While, ForStep, Return, ...; a block is a list of them).
emit.py writes the C of both.

``_Bottom`` is raised for an expression whose type is not known yet (collect passes only).
"""

import threading

from .. import types as T

NOCONST = object()


class _Bottom(Exception):
    """An expression whose type is not known yet (collect mode only)."""


class Val:
    """A scalar or array value: its type, its constant value when folded (else NOCONST) and
    facts for shorter C: nonneg (an integer known to be >= 0), simple (a name or literal: may be
    evaluated twice), ref ((storage, constant shape) of a table or local array), widened (the
    narrower Val this one is an exact widening of).

    A plain Val is a leaf whose C text is given (a variable, a temporary, a parameter); the
    subclasses below are operations on other Vals, which they keep as their fields. Their C
    text (``.c``) is rendered on demand by emit.py (ir.RENDER): typing never reads it, emission
    does, over the finished IR."""

    __slots__ = ("type", "c", "const", "nonneg", "simple", "ref", "widened")

    def __init__(self, type_, c, const=NOCONST, nonneg=False, simple=False, ref=None,
                 widened=None):
        self.type = type_
        self.c = c
        self.const = const
        self.nonneg = nonneg
        self.simple = simple or const is not NOCONST
        self.ref = ref
        self.widened = widened

    @property
    def is_const(self):
        return self.const is not NOCONST


# emit.py fills this: node class -> function(node) -> C text
RENDER = {}


def note_uses(parts):
    """The one place typing looks at how operands will be emitted: a RefVarVal among `parts`
    (operands, or lists of them) is recorded as used, so that its C variable is kept (see
    RefVarVal). Called when a node or a statement is made, with its direct operands."""
    for p in parts:
        if isinstance(p, RefVarVal):
            p.mark_used()
        elif type(p) is list or type(p) is tuple:
            for q in p:
                if isinstance(q, RefVarVal):
                    q.mark_used()


_RENDERING = threading.local()


def _operands(v):
    """The Vals among v's fields (inside lists and tuples too): what its C text is made of."""
    out, todo = [], [getattr(v, f) for f in type(v).fields]
    while todo:
        p = todo.pop()
        if isinstance(p, Val):
            out.append(p)
        elif type(p) is list or type(p) is tuple:
            todo.extend(p)
        elif isinstance(p, TupleVal):
            todo.extend(p.items)
            todo.append(p.setup)
    return out


def _render(self):
    """The C text of a node (its ``.c``). The outermost call renders the node's operands first,
    bottom-up with an explicit stack, and keeps their texts while it lasts, so that no ``.c``
    inside recurses deeply: each level of .c-in-.c passes through C (the property, str.join),
    and CPython 3.12.0-3.12.1 stop C recursion at about 1,500 levels whatever
    sys.getrecursionlimit() says (a 2,000-term sum). The IR is finished when it is rendered
    (typing never reads ``.c``), so a text kept is the text rendered again."""
    memo = getattr(_RENDERING, "memo", None)
    if memo is not None:
        hit = memo.get(id(self))
        return hit[1] if hit is not None else RENDER[type(self)](self)
    memo = _RENDERING.memo = {}
    try:
        seen, stack = set(), [(self, False)]
        while stack:
            node, ready = stack.pop()
            if ready:
                memo[id(node)] = (node, RENDER[type(node)](node))
            elif id(node) not in seen:
                seen.add(id(node))
                stack.append((node, True))
                stack.extend((x, False) for x in _operands(node) if type(x) in RENDER)
        return memo[id(self)][1]
    finally:
        _RENDERING.memo = None


def _node(name, fields, doc):
    """A Val subclass for one operation, with the extra fields given (positional, after the
    type; the facts of Val by keyword). Its __init__ is generated (nodes are made often) and
    records the RefVarVal operands it uses (note_uses); its C text ``.c`` is rendered on demand
    through RENDER, which emit.py fills."""
    args = "".join(", " + f for f in fields)
    sets = "".join("\n    self.%s = %s" % (f, f) for f in fields)
    src = ("def __init__(self, type_%s, const=NOCONST, nonneg=False, simple=False, ref=None,"
           " widened=None):\n"
           "    self.type = type_\n    self.const = const\n"
           "    self.nonneg = nonneg\n    self.simple = simple or const is not NOCONST\n"
           "    self.ref = ref\n    self.widened = widened%s\n"
           "    note_uses((%s))\n" % (args, sets, "".join(f + ", " for f in fields)))
    ns = {"NOCONST": NOCONST, "note_uses": note_uses}
    exec(src, ns)
    return type(name, (Val,), {"__slots__": tuple(fields), "__init__": ns["__init__"],
                               "__doc__": doc, "fields": tuple(fields),
                               "c": property(_render)})


Const = _node("Const", (), "A constant: its value is .const.")
Call = _node("Call", ("fn", "args"), "fn(args...): a runtime function (cf_*) or constructor.")
Cast = _node("Cast", ("x",), "x converted to .type by the runtime's cf_cast (NumPy's astype).")
Retype = _node("Retype", ("x",), "x as another cufunc type of the same C type.")
Infix = _node("Infix", ("op", "xs"), "(x0 op x1 op ...): a C operator on the operands.")
Prefix = _node("Prefix", ("op", "x"), "(op x): a C prefix operator.")
Not = _node("Not", ("x",), "!x, unparenthesized (the condition of a Select).")
CCast = _node("CCast", ("ctype", "x"), "((ctype)x): a C conversion (of a C operator's result).")
Select = _node("Select", ("cond", "a", "b"), "(cond ? a : b).")
Comma = _node("Comma", ("setup", "x"), "(setup, x): setup evaluated first, for its effects.")
SetTemp = _node("SetTemp", ("name", "x"), "(name = x): a temporary set inside an expression.")
Assign = _node("Assign", ("name", "x"),
               "name = x, unparenthesized (an item of a Seq); name: a C name or an lvalue Val.")
Paren = _node("Paren", ("x",), "(x).")
Seq = _node("Seq", ("parts",), "part0, part1, ...: setups evaluated in order.")
Element = _node("Element", ("arr", "idx", "setup"),
                "arr[idx...] of a strided array (an lvalue); setup evaluated first.")
RefElement = _node("RefElement", ("storage", "shape", "idx"),
                   "storage[idx...] of a table or local array (constant C-order shape).")
ArrayDesc = _node("ArrayDesc", ("storage", "shape"),
                  "The cf_array_ref of a table or local array (C order).")
View = _node("View", ("arr", "parts", "name"),
             "A view of the strided array arr (simple) built in the C variable `name` (a "
             "cf_array_ref temporary): parts holds one entry per axis of arr: ('i', index) "
             "removes the axis, ('s', lo, hi, step, start, step2) keeps it sliced (lo/hi/step: "
             "Vals or None for omitted; start: the C name of an int64 temporary for the first "
             "index; step2: the step's second use, for the stride).")
Extent = _node("Extent", ("arr", "k"), "arr.shape[k] of a strided array.")
AddrOf = _node("AddrOf", ("name",), "&name: the address of a temporary (an output argument).")
Field = _node("Field", ("struct", "i"),
              "struct.fI: item I of a tuple held in the struct variable `struct` (a C name).")
FirstItem = _node("FirstItem", ("storage",),
                  "storage[0]: the one item of a 1-element local array (a C name).")


BigInt = _node("BigInt", (), "A Python-int constant outside int64: it must be converted to a "
              "type it fits (an unsigned or a float) before it is used.")


class RefVarVal(Val):
    """A variable holding a local array or table, indexed directly through its storage; its C
    variable is only kept when the value itself is used (passed on, copied): note_uses records
    that when a node or statement takes it as an operand."""

    __slots__ = ("_used", "_name")

    def __init__(self, type_, c, used, name, **kw):
        Val.__init__(self, type_, c, **kw)
        self._used, self._name = used, name

    def mark_used(self):
        self._used.add(self._name)


class TupleVal:
    """A tuple: its items (Vals) and an optional setup (a Val evaluated before them)."""

    __slots__ = ("items", "setup")

    def __init__(self, items, setup=None):
        self.items = list(items)
        self.setup = setup

    @property
    def type(self):
        return T.Tuple(v.type for v in self.items)


class StaticVal:
    """A compile-time Python object: a module, a function, a type, a namespace."""

    __slots__ = ("obj", "name")

    def __init__(self, obj, name):
        self.obj = obj
        self.name = name

    @property
    def type(self):
        raise _Bottom()


# ---------------------------------------------------------------------------- statements
# The translator builds a function body as a list of these (a block); emit.py writes their C
# (emit.render_block), the one place statement C is written. Expressions in them are the Vals
# above; a block is a plain list of statements.

class Stmt:
    """A statement. ``fields`` names its parts (for walking the tree). A part that is a
    RefVarVal is recorded as used when the statement is made (note_uses)."""

    __slots__ = ()
    fields = ()

    def __init__(self, *args):
        for f in self.fields:
            setattr(self, f, None)
        for f, a in zip(self.fields, args):
            if isinstance(a, RefVarVal):
                a.mark_used()
            setattr(self, f, a)


def _stmt(name, fields, doc):
    return type(name, (Stmt,), {"__slots__": tuple(fields), "fields": tuple(fields),
                                "__doc__": doc})


Declare = _stmt("Declare", ("ctype", "name", "n"),
                "ctype name{}; (a local, value-initialized) or, with n, ctype name[n]; "
                "(the storage of a local array).")
Eval = _stmt("Eval", ("x",), "x; : an expression evaluated for its effects (a setup).")
Discard = _stmt("Discard", ("x", "paren"),
                "(void)(x); (or (void)x; without paren): a value computed and dropped.")
Store = _stmt("Store", ("dst", "x"), "dst = x; (dst: a variable's C name, or an lvalue Val).")
RefStore = _stmt("RefStore", ("var", "dst", "x"),
                 "dst = x; of a variable holding a local array or table: kept only when the "
                 "variable `var` itself is used (else it is indexed through its storage).")
If = _stmt("If", ("branches", "orelse"),
           "if (c0) {b0} else if (c1) {b1} ... else {orelse}: branches is a list of (cond, "
           "block), cond None meaning true (an untyped condition of a collect pass); orelse "
           "a block or None.")
While = _stmt("While", ("cond", "body"), "while (cond) {body}; cond None means true.")
ForStep = _stmt("ForStep", ("counter", "start", "stop", "step", "body"),
                "for (counter = start; counter < stop; ++counter) {body} (step 1), or with > and "
                "-- (step -1): range() with a constant unit step.")
ForRange = _stmt("ForRange", ("n", "k", "counter", "start", "stop", "step", "body"),
                 "range() with any step: n = cf_lang_range_len(start, stop, step) iterations "
                 "over k, counter = start + k * step (in uint64, wrapping as C must not overflow "
                 "int64).")
Forever = _stmt("Forever", ("body",), "for (;;) {body}: a loop whose range is not typed yet "
                "(collect passes only).")
Break = _stmt("Break", (), "break;")
Continue = _stmt("Continue", (), "continue;")
Return = _stmt("Return", ("x",), "return x; (return; when x is None).")
ReturnTuple = _stmt("ReturnTuple", ("struct", "items", "setup"),
                    "return struct{items...}; of a tuple (the setup evaluated first).")
