"""The typed values the translator works with (its intermediate representation).

Every expression the translator types becomes one of these:

* Val: a scalar or array value: its cufunc type, its constant value when folded (else NOCONST),
  facts used for shorter C (nonneg, simple), the storage of a table or local array (ref);
* TupleVal: a tuple of Vals (tuples live only at compile time: each item is its own value);
* StaticVal: a compile-time Python object (a module, a function, a type).

``_Bottom`` is raised for an expression whose type is not known yet (collect passes only).
"""

from .. import types as T

NOCONST = object()


class _Bottom(Exception):
    """An expression whose type is not known yet (collect mode only)."""


class Val:
    """A scalar or array value: its type, C expression text and, for constants, the value."""

    __slots__ = ("type", "c", "const", "nonneg", "simple", "ref", "widened")

    def __init__(self, type_, c, const=NOCONST, nonneg=False, simple=False, ref=None,
                 widened=None):
        self.type = type_
        self.c = c
        self.const = const
        self.nonneg = nonneg
        self.simple = simple or const is not NOCONST
        self.ref = ref   # (C array name, constant shape) of a table or local array
        self.widened = widened  # the narrower Val this one is an exact widening of

    @property
    def is_const(self):
        return self.const is not NOCONST


class RefVarVal(Val):
    """A variable holding a local array or table, indexed directly through its storage; its C
    variable is only kept when the value itself is used (passed on, copied)."""

    __slots__ = ("_c", "_used", "_name")

    def __init__(self, type_, c, used, name, **kw):
        Val.__init__(self, type_, None, **kw)
        self._c, self._used, self._name = c, used, name

    @property
    def c(self):
        self._used.add(self._name)
        return self._c

    @c.setter
    def c(self, value):
        pass


class TupleVal:
    """A tuple: its items (Vals) and an optional C expression to evaluate before them."""

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
