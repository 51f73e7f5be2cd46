"""C emission: the C text of the translator's IR (ir.py). Expressions render here (ir.RENDER), and
so do the definitions: functions (their C names: a hash of the text), tuple structs, constant
tables, and the whole source of a translation (emit_source). Literal and identifier spelling is
cgen.py's. Every expression's text has exactly the C type of its cufunc
type; Python's evaluation order is kept by C's &&, ||, ?: and the comma operator."""

import hashlib

from .. import types as T
from . import ir
from .cgen import PRELUDE, c_literal, sanitize


def _index_c(i):
    """An index known to be >= 0 as a cf_int64."""
    return i.c if i.type.cname == "cf_int64" else "(cf_int64)(%s)" % i.c


def _index_term(i, arr_c, k):
    """index i of axis k of the strided array arr_c, negative indices counting from the end."""
    if i.is_const:
        ic = int(i.const)
        if ic >= 0:
            ci = "%dLL" % ic
        else:
            ci = "(%s.shape[%d] + %s)" % (arr_c, k, c_literal(ic, T.int64))
    elif i.nonneg or i.type.kind == "u":
        ci = _index_c(i)
    else:
        ci = "cf_lang_wrap(%s, %s.shape[%d])" % (i.c, arr_c, k)
    return "%s * %s.strides[%d]" % (ci, arr_c, k)


def _element(v):
    arr = v.arr
    terms = [_index_term(i, arr.c, k) for k, i in enumerate(v.idx)]
    c = "(*(%s *)(%s.data + %s))" % (v.type.cname, arr.c, " + ".join(terms))
    if v.setup is not None:
        c = "(*(%s, &%s))" % (v.setup.c, c)
    return c


def _view(v):
    """(name.shape[m] = ..., name.strides[m] = ..., name.data = ..., name): the view built in
    its temporary, axis by axis, then used as a value."""
    a, name = v.arr.c, v.name
    seq, terms = [], []
    m = 0
    for k, p in enumerate(v.parts):
        if p[0] == "i":
            terms.append(_index_term(p[1], a, k))
            continue
        _, lo, hi, step, start, again = p
        if lo is None and hi is None and step is None:
            seq.append("%s.shape[%d] = %s.shape[%d]" % (name, m, a, k))
            seq.append("%s.strides[%d] = %s.strides[%d]" % (name, m, a, k))
        else:
            has = (lo is not None) | ((hi is not None) << 1)
            seq.append("%s = cf_lang_slice(%s.shape[%d], %s, %s, %s, %d, &%s.shape[%d])"
                       % (start, a, k, "0LL" if lo is None else lo.c,
                          "0LL" if hi is None else hi.c, "1LL" if step is None else step.c,
                          has, name, m))
            seq.append("%s.strides[%d] = %s.strides[%d]%s"
                       % (name, m, a, k, "" if again is None else " * " + again.c))
            terms.append("%s * %s.strides[%d]" % (start, a, k))
        m += 1
    seq.append("%s.data = %s.data%s" % (name, a, "".join(" + " + t for t in terms)))
    return "(%s, %s)" % (", ".join(seq), name)


def _c_strides(shape, itemsize):
    strides = []
    acc = itemsize
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    strides.reverse()
    return strides


def _ref_element(v):
    shape = v.shape
    strides = _c_strides(shape, 1)
    terms = []
    const_off = 0
    for k, i in enumerate(v.idx):
        if i.is_const:
            ic = int(i.const)
            const_off += (ic + shape[k] if ic < 0 else ic) * strides[k]
            continue
        if i.nonneg or i.type.kind == "u":
            ci = _index_c(i)
        else:
            ci = "cf_lang_wrap(%s, %dLL)" % (i.c, shape[k])
        terms.append(ci if strides[k] == 1 else "%s * %dLL" % (ci, strides[k]))
    if const_off or not terms:
        terms.append("%dLL" % const_off)
    return "%s[%s]" % (v.storage, " + ".join(terms))


def _array_desc(v):
    strides = _c_strides(v.shape, v.type.dtype.itemsize)
    return "%s{(char *)%s, {%s}, {%s}}" % (v.type.cname, v.storage,
                                           ", ".join("%dLL" % s for s in v.shape),
                                           ", ".join("%dLL" % s for s in strides))


def _infix(v):
    return "(%s)" % (" %s " % v.op).join(x.c for x in v.xs)


ir.RENDER.update({
    ir.Const: lambda v: c_literal(v.const, v.type),
    # a constant sub-expression beyond 64 bits: cast() refuses it before it is used
    ir.BigInt: lambda v: "cf_int64_out_of_range",
    ir.Call: lambda v: "%s(%s)" % (v.fn, ", ".join(a.c for a in v.args)),
    ir.Cast: lambda v: "cf_cast<%s>(%s)" % (v.type.cname, v.x.c),
    ir.Retype: lambda v: v.x.c,
    ir.Infix: _infix,
    ir.Prefix: lambda v: "(%s%s)" % (v.op, v.x.c),
    ir.Not: lambda v: "!" + v.x.c,
    ir.CCast: lambda v: "((%s)%s)" % (v.ctype, v.x.c),
    ir.Select: lambda v: "(%s ? %s : %s)" % (v.cond.c, v.a.c, v.b.c),
    ir.Comma: lambda v: "(%s, %s)" % (v.setup.c, v.x.c),
    ir.SetTemp: lambda v: "(%s = %s)" % (v.name, v.x.c),
    ir.Assign: lambda v: "%s = %s" % (_c(v.name), v.x.c),
    ir.Paren: lambda v: "(%s)" % v.x.c,
    ir.Seq: lambda v: ", ".join(p.c for p in v.parts),
    ir.Element: _element,
    ir.RefElement: _ref_element,
    ir.ArrayDesc: _array_desc,
    ir.View: _view,
    ir.Extent: lambda v: "%s.shape[%d]" % (v.arr.c, v.k),
    ir.AddrOf: lambda v: "&" + v.name,
    ir.Field: lambda v: "%s.f%d" % (v.struct, v.i),
    ir.FirstItem: lambda v: "%s[0]" % v.storage,
})


def struct_definition(name, tt):
    """The C struct of the Tuple type tt (field fI holds item I)."""
    fields = "".join("    %s f%d;\n" % (t.cname, i) for i, t in enumerate(tt.types))
    return ("#ifndef CF_DEF_%s\n#define CF_DEF_%s\n/* %s: field fI holds item I */\n"
            "struct %s {\n%s};\n#endif\n" % (name, name, tt.name, name, fields))


def table_definition(cname, name, t, shape, et, flat):
    """The constant table cname of the captured global array `name` (type t, shape), whose
    C-order items (flat, of the storage type et: complex as (real, imag) pairs) are stored."""
    vals = ", ".join(c_literal(x, et) for x in flat.tolist()) if flat.size else "0"
    n = max(flat.size, 1)
    return ("#ifndef CF_DEF_%s\n#define CF_DEF_%s\n/* global %s: %s array of shape %s, "
            "C order%s */\nCF_LANG_TABLE %s %s[%d] = {%s};\n#endif\n"
            % (cname, cname, name, t.name, tuple(shape),
               ", (real, imag) pairs" if t.kind == "c" else "", et.cname, cname, n, vals))


def function_definition(qualname, sigtext, fastmath, ret_cname, params, lines):
    """(C name, definition) of one translated function: its parameters ("type name") and body
    lines (render_block's, already indented: declarations, parameter conversions, the body
    statements). The name is the
    qualname plus a hash of the signature, fastmath and the text: the same input always gives
    the same name, different bodies never share one."""
    text = "CF_LANG_FN %s @NAME@(%s)\n{\n%s\n}\n" % (ret_cname, ", ".join(params),
                                                    "\n".join(lines))
    h = hashlib.sha256()
    h.update(qualname.encode())
    h.update(b"\0" + sigtext.encode() + b"\0" + repr(fastmath).encode() + b"\0")
    h.update(text.encode())
    cname = "cf_%s_%s" % (sanitize(qualname.replace("<locals>", ""))[:48], h.hexdigest()[:12])
    return cname, ("#ifndef CF_DEF_%s\n#define CF_DEF_%s\n/* %s: %s */\n%s#endif\n"
                   % (cname, cname, qualname, sigtext.replace("*/", "* /"),
                      text.replace("@NAME@", cname)))


def emit_source(unit, entry):
    """The complete CUDA C text for entry and everything it calls, callees first."""
    out = ['#include "cufunc/runtime.cuh"\n', PRELUDE]
    for name in sorted(unit.structs):
        out.append(unit.structs[name])
    for name in sorted(unit.tables):
        out.append(unit.tables[name])
    by_name = {r.name: r for r in unit.funcs.values()}
    done = set()

    def visit(r):
        if r.name in done:
            return
        done.add(r.name)
        for d in r.deps:
            visit(by_name[d])
        out.append(r.definition)

    visit(entry)
    return "\n".join(out)


# ---------------------------------------------------------------------------- statements
def _c(x):
    """The C text of a statement's part: a Val, or a C name given as text."""
    return x if isinstance(x, str) else x.c


def _cond(c):
    return "true" if c is None else c.c


def _render_if(s, pad, out, keep):
    for i, (cond, block) in enumerate(s.branches):
        out.append(pad + ("if (%s) {" if i == 0 else "} else if (%s) {") % _cond(cond))
        _render(block, pad + "    ", out, keep)
    if s.orelse:
        out.append(pad + "} else {")
        _render(s.orelse, pad + "    ", out, keep)
    out.append(pad + "}")


def _render_for_step(s, pad, out, keep):
    op, inc = ("<", "++") if s.step.const == 1 else (">", "--")
    out.append(pad + "for (%s = %s; %s %s %s; %s%s) {" % (s.counter, s.start.c, s.counter, op,
                                                         s.stop.c, inc, s.counter))
    _render(s.body, pad + "    ", out, keep)
    out.append(pad + "}")


def _render_for_range(s, pad, out, keep):
    out.append(pad + "%s = cf_lang_range_len(%s, %s, %s);" % (s.n, s.start.c, s.stop.c,
                                                              s.step.c))
    out.append(pad + "for (%s = 0; %s < %s; ++%s) {" % (s.k, s.k, s.n, s.k))
    out.append(pad + "    %s = (cf_int64)((cf_uint64)%s + %s * (cf_uint64)%s);"
               % (s.counter, s.start.c, s.k, s.step.c))
    _render(s.body, pad + "    ", out, keep)
    out.append(pad + "}")


def _render_loop(head, s, pad, out, keep):
    out.append(pad + head)
    _render(s.body, pad + "    ", out, keep)
    out.append(pad + "}")


def _render_return_tuple(s):
    body = "%s{%s}" % (s.struct, ", ".join(x.c for x in s.items))
    if s.setup is not None:
        body = "(%s, %s)" % (s.setup.c, body)
    return "return %s;" % body


# statement class -> function(stmt) -> one line of C (simple statements)
_LINE = {
    ir.Declare: lambda s: ("%s %s{};" % (s.ctype, s.name) if s.n is None
                           else "%s %s[%d];" % (s.ctype, s.name, s.n)),
    ir.Eval: lambda s: "%s;" % s.x.c,
    ir.Discard: lambda s: ("(void)(%s);" if s.paren else "(void)%s;") % s.x.c,
    ir.Store: lambda s: "%s = %s;" % (_c(s.dst), s.x.c),
    ir.RefStore: lambda s: "%s = %s;" % (_c(s.dst), s.x.c),
    ir.Break: lambda s: "break;",
    ir.Continue: lambda s: "continue;",
    ir.Return: lambda s: "return;" if s.x is None else "return %s;" % s.x.c,
    ir.ReturnTuple: _render_return_tuple,
}

# statement class -> function(stmt, pad, out, keep) appending its lines (compound statements)
_BLOCK = {
    ir.If: _render_if,
    ir.While: lambda s, pad, out, keep: _render_loop("while (%s) {" % _cond(s.cond), s, pad,
                                                     out, keep),
    ir.ForStep: _render_for_step,
    ir.ForRange: _render_for_range,
    ir.Forever: lambda s, pad, out, keep: _render_loop("for (;;) {", s, pad, out, keep),
}


def _render(block, pad, out, keep):
    for s in block:
        f = _LINE.get(type(s))
        if f is not None:
            if type(s) is ir.RefStore and s.var not in keep:
                continue    # the variable is only indexed through its storage
            out.append(pad + f(s))
        else:
            _BLOCK[type(s)](s, pad, out, keep)


def render_block(block, indent=1, used_refs=()):
    """The C lines (indented by `indent` levels of four spaces) of a block of statements
    (ir.Stmt). A RefStore is written only when its variable is in used_refs."""
    out = []
    _render(block, "    " * indent, out, used_refs)
    return out
