"""Basic indexing of arrays in kernel bodies: elements and views (docs/language-arrays.md).

``a[i, j]`` with one integer per axis is an element; anything else NumPy calls basic indexing
gives a view: fewer indices than axes (``a[i]`` of a 2-d array is its row), slices with
constant or variable bounds and steps (``a[1:n]``, ``a[::-2]``, ``a[i, 1:n]``, ``a[:, j]``).
A view is a ``cf_array_ref<T, ND>`` value (data pointer, shape, byte strides) like an array
argument, so everything that works on arrays works on views: indexing, iteration, ``len``,
``.shape``, passing to device functions, and stores, which write through to the array viewed.
Negative indices count from the end; slices clip as Python's do; nothing is bounds-checked
(Numba's meaning without boundscheck).

Assigning to a view (``a[i, :] = 0.0``, ``a[0] = b[1]``, ``a[1:3] += x``) is an element loop
over the view: a scalar is broadcast, an array of the view's shape (or broadcast from extent-1
axes) is copied element by element.
"""

import ast

from .. import types as T
from . import typesys as TS
from . import ir
from .fold import fits, int_range_message
from .ir import StaticVal, TupleVal, Val


def index_items(tr, node, arr):
    """The items of the index of node (a Subscript) on the array Val arr: ('i', Val, node) for
    an integer, ('s', ast.Slice) for a slice."""
    sl = node.slice
    elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
    items = []
    for e in elts:
        if isinstance(e, ast.Slice):
            items.append(("s", e))
            continue
        if isinstance(e, ast.Constant) and e.value is None:
            raise tr.unsupported(e, "None (np.newaxis) in an index")
        if isinstance(e, ast.Constant) and e.value is Ellipsis:
            raise tr.unsupported(e, "Ellipsis (...) in an index")
        sv = tr.guard_static(e)
        if sv is not None and sv.obj is None:
            raise tr.unsupported(e, "None (np.newaxis) in an index")
        v = tr.expr(e)
        if isinstance(v, TupleVal):
            for i, x in enumerate(v.items):
                items.append(("i", tr.with_setup(v.setup, x) if i == 0 else x, e))
            continue
        items.append(("i", check_index(tr, v, e), e))
    nd = arr.type.ndim
    if len(items) > nd:
        raise tr._fail(node, "too many indices for a %d-d array: %d given" % (nd, len(items)))
    return items


def check_index(tr, v, e):
    """v as an integer index (checked)."""
    if isinstance(v, Val) and isinstance(v.type, T.Array):
        raise tr._fail(e, "an array index must be an integer or a slice: indexing with an array "
                       "(fancy indexing) is not supported")
    v = tr.scalar(v, e, "an array index")
    if v.type.kind not in "iu":
        raise tr._fail(e, "array index must be an integer, not %s" % v.type)
    if v.is_const and not -2 ** 63 <= int(v.const) < 2 ** 63:
        # the one rule for integer constants: what is used must fit its C type (the
        # constant is written into the index arithmetic as an int64 literal)
        ic = int(v.const)
        raise tr._fail(e, int_range_message(ic, fits(ic), "an array index"))
    return v


def element_indices(items, arr):
    """The index Vals when items index one element of arr, else None (a view)."""
    if len(items) != arr.type.ndim or any(it[0] != "i" for it in items):
        return None
    return [it[1] for it in items]


def _bound(tr, e, what):
    if e is None or (isinstance(e, ast.Constant) and e.value is None):
        return None
    v = tr.expr(e)
    if isinstance(v, (TupleVal, StaticVal)) or isinstance(v.type, (T.Array, T.Void)) or \
            v.type.kind not in "biu":
        raise tr._fail(e, "slice bounds must be integers, not %s"
                       % getattr(v, "type", "this value"))
    if what == "step" and v.is_const and int(v.const) == 0:
        raise tr._fail(e, "slice step cannot be zero")
    return tr.cast(v, T.int64, e, explicit=True)


def make_view(tr, arr, items, node):
    """The view of arr (an array Val) by items (index_items' list; missing trailing axes are
    whole); an element when every axis gets an integer."""
    idx = element_indices(items, arr)
    if idx is not None:
        return tr.element(arr, idx, node)
    parts = []
    for it in items:
        if it[0] == "i":
            parts.append(("i", it[1]))
            continue
        s = it[1]
        lo, hi, step = _bound(tr, s.lower, "lower"), _bound(tr, s.upper, "upper"), \
            _bound(tr, s.step, "step")
        if lo is None and hi is None and step is None:
            parts.append(("s", None, None, None, None, None))
            continue
        again = step
        if step is not None and not step.simple:
            # the step is used twice (the extent, then the stride): set a temporary at the
            # first use, inside the expression (a statement before it would run even where
            # the expression does not: a while condition, a short-circuit operand)
            name = tr.temp(T.int64)
            step, again = ir.SetTemp(T.int64, name, step), Val(T.int64, name, simple=True)
        parts.append(("s", lo, hi, step, tr.temp(T.int64), again))
    for _ in range(arr.type.ndim - len(items)):
        parts.append(("s", None, None, None, None, None))
    setup, arr = tr.ensure_simple_array(arr)
    nd = sum(1 for p in parts if p[0] == "s")
    t = T.Array(arr.type.dtype, nd, "A", arr.type.readonly)
    v = ir.View(t, arr, parts, tr.temp(t))
    return tr.with_setup(setup, v)


def subscript(tr, node, arr):
    """arr[index] (a Subscript expression on an array Val): an element or a view."""
    return make_view(tr, arr, index_items(tr, node, arr), node)


def transpose(tr, arr):
    """arr.T: the same data with the axes reversed (shape and strides)."""
    if arr.type.ndim == 1:
        return arr
    t = T.Array(arr.type.dtype, arr.type.ndim, "A", arr.type.readonly)
    return ir.Call(t, "cf_lang_transpose", [arr])


# ------------------------------------------------------------------------------ stores

def each_element(tr, view, body):
    """Nested loops over every element of the simple array Val `view`; body(elem) adds the
    statements for one element (elem: the element lvalue Val). Returns nothing; adds the
    loops to the block being built."""
    nd = view.type.ndim
    counters = [tr.temp("cf_int64") for _ in range(nd)]
    ks = [Val(TS.WEAK_INT, c, simple=True, nonneg=True) for c in counters]
    outer, tr.block = tr.block, []
    try:
        body(ks)
        block = tr.block
    finally:
        tr.block = outer
    one, zero = tr.const_val(1, TS.WEAK_INT, None), tr.const_val(0, TS.WEAK_INT, None)
    for k in reversed(range(nd)):
        loop = ir.ForStep(counters[k], zero, tr.extent(view, k), one)
        loop.body = block
        block = [loop]
    for stmt in block:
        tr.add(stmt)


def _source_element(tr, src, ks, nd):
    """src's element at the loop counters ks (of an nd-d target), src's axes aligned with the
    target's last axes and broadcast where src has extent 1."""
    off = nd - src.type.ndim
    idx = [ir.Call(TS.WEAK_INT, "cf_lang_bcast", [ks[off + k], tr.extent(src, k)], nonneg=True)
           for k in range(src.type.ndim)]
    return tr.element(src, idx, None)


def _prepare(tr, target, view, value):
    if view.type.readonly:
        raise tr._fail(target, "a captured NumPy array is a read-only constant table and "
                       "cannot be assigned to")
    setup, view = tr.ensure_simple_array(view)
    if setup is not None:
        tr.add(ir.Eval(setup))
    if isinstance(value, Val) and isinstance(value.type, T.Array):
        if value.type.ndim > view.type.ndim:
            raise tr._fail(target, "cannot assign a %d-d array to a %d-d view"
                           % (value.type.ndim, view.type.ndim))
        s2, value = tr.ensure_simple_array(value)
        if s2 is not None:
            tr.add(ir.Eval(s2))
        return view, value
    value = tr.scalar(value, target, "the value assigned to a view")
    if not value.is_const:
        name = tr.temp(value.type)
        tr.add(ir.Store(name, value))
        value = Val(value.type, name, simple=True, nonneg=value.nonneg)
    return view, value


def store(tr, target, view, value):
    """view[...] = value for a view target (a Subscript giving a view): a scalar is broadcast
    to every element, an array copied element by element (no overlap handling: a source that
    overlaps the view gives what the element order gives)."""
    view, value = _prepare(tr, target, view, value)
    dt = view.type.dtype
    nd = view.type.ndim

    def body(ks):
        src = value
        if isinstance(value.type, T.Array):
            src = _source_element(tr, value, ks, nd)
        tr.add(ir.Store(tr.element(view, ks, target), tr.cast(src, dt, target)))
    each_element(tr, view, body)


def augassign(tr, s, view, rhs, fn, name, sym):
    """view[...] op= rhs, element by element (rhs: a scalar or an array, broadcast as store)."""
    view, rhs = _prepare(tr, s.target, view, rhs)
    dt = view.type.dtype
    nd = view.type.ndim

    def body(ks):
        src = rhs
        if isinstance(rhs.type, T.Array):
            src = _source_element(tr, rhs, ks, nd)
        elem = tr.element(view, ks, s)
        tr.add(ir.Store(elem, tr.cast(tr.binop(fn, name, sym, elem, src, s), dt, s)))
    each_element(tr, view, body)
