"""Fuzzing the two signature parsers: random strings, built from the grammar's tokens
mixed with punctuation, whitespace, digits, non-ASCII characters, NULs, lone surrogates and very
long names, and valid signatures mutated by a token. Every input must either parse to what an
independent reference parser (below, written from the grammar in include/cufunc/signature.h)
says, or raise cufunc's one SignatureError at the position the reference finds, with the
reference's reason, an excerpt of bounded length and the caret under the right character. Never
another exception, never a crash.

Bounded for CI: a few thousand examples per test, a few seconds each, no GPU.
"""

import re

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cufunc import _core, errors  # noqa: E402

MAX_ARGS = 32          # CF_SIG_MAX_ARGS: types in a list, operands of a layout
MAX_CORE_DIMS = 32     # CF_SIG_MAX_CORE_DIMS
MAX_NAMES = 64         # CF_SIG_MAX_NAMES
MAX_NAME_LEN = 31      # CF_SIG_MAX_NAME_LEN
MAX_ARRAY_DIMS = 64    # CF_MAX_DIMS
MAX_FIXED = 1 << 40

SETTINGS = settings(max_examples=1200, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])

# ---- the reference parser ------------------------------------------------------------------------

SPACE = set(" \t\n\v\f\r")   # sets: "" (the end) is in no set
WORD = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
DIGITS = set("0123456789")

TYPE_NAMES = {}
for _dt, _names in {
    "bool": "bool b1 bool_ boolean",
    "int8": "int8 i1 b byte", "int16": "int16 i2 h", "int32": "int32 i4 i",
    "int64": "int64 i8 l q int int_ intp",
    "uint8": "uint8 u1 B", "uint16": "uint16 u2 H", "uint32": "uint32 u4 I",
    "uint64": "uint64 u8 L Q uintp",
    "float16": "float16 f2 e half", "float32": "float32 f4 f single",
    "float64": "float64 f8 d double float float_",
    "complex64": "complex64 c8 F", "complex128": "complex128 c16 D complex complex_",
}.items():
    for _n in _names.split():
        TYPE_NAMES[_n] = np.dtype(_dt)


class RefError(Exception):
    def __init__(self, pos, why):
        super().__init__(pos, why)
        self.pos, self.why = pos, why


class Ref:
    """A recursive-descent parser over a Python str, positions in characters."""

    def __init__(self, text):
        self.t, self.p = text, 0
        for i, c in enumerate(text):
            if c == "\x00":
                raise RefError(i, "embedded NUL character")
            if "\ud800" <= c <= "\udfff":
                raise RefError(i, "lone surrogate U+%04X" % ord(c))

    def ch(self, k=0):
        i = self.p + k
        return self.t[i] if i < len(self.t) else ""

    def ws(self):
        while self.ch() in SPACE:
            self.p += 1

    def accept(self, c):
        self.ws()
        if self.ch() == c:
            self.p += 1
            return True
        return False

    def word(self, w):
        self.ws()
        if self.t.startswith(w, self.p) and self.ch(len(w)) not in WORD:
            self.p += len(w)
            return True
        return False

    def fail(self, why, at=None):
        raise RefError(self.p if at is None else at, why)

    def ident(self):
        self.ws()
        n = 0
        while self.ch(n) and (self.ch(n) in WORD or self.ch(n) == "."):
            n += 1
        if n == 0 or self.ch() in DIGITS:
            return None
        name = self.t[self.p:self.p + n]
        self.p += n
        return name

    # -- type signatures
    def scalar(self):
        self.ws()
        at = self.p
        name = self.ident()
        if name is None:
            self.fail("expected a type name")
        n = name
        if len(name) < 64:
            if n.startswith("np."):
                n = n[3:]
            elif n.startswith("numpy."):
                n = n[6:]
            if n in TYPE_NAMES:
                return TYPE_NAMES[n]
        self.fail("unknown type name '%s" % name[:20], at)

    def sig_type(self):
        self.ws()
        at = self.p
        if self.word("void") or self.word("none"):
            self.fail("void is not an argument type", at)
        dt = self.scalar()
        if not self.accept("["):
            return (dt, 0, "A")
        ndim, contig = 0, -1
        while True:
            if ndim == MAX_ARRAY_DIMS:
                self.fail("too many dimensions")
            self.ws()
            if self.t.startswith("::1", self.p):
                if contig >= 0:
                    self.fail("only one axis can be marked ::1")
                contig = ndim
                self.p += 3
            elif not self.accept(":"):
                self.fail("expected ':' or '::1' in an array type")
            ndim += 1
            if self.accept("]"):
                break
            if not self.accept(","):
                self.fail("expected ',' or ']'")
        layout = "A"
        if contig >= 0:
            if contig == ndim - 1:
                layout = "C"
            elif contig == 0:
                layout = "F"
            else:
                self.fail("::1 must mark the first or the last axis")
        return (dt, ndim, layout)

    def type_list(self):
        items = []
        if not self.accept("("):
            self.fail("expected '('")
        if self.accept(")"):
            return items
        while True:
            self.ws()
            if len(items) == MAX_ARGS:
                self.fail("too many types")
            items.append(self.sig_type())
            if self.accept(")"):
                return items
            if not self.accept(","):
                self.fail("expected ',' or ')'")
            if self.accept(")"):
                return items

    def type_signature(self):
        self.ws()
        rets = None
        if self.ch() == "(":
            pass
        elif self.word("void") or self.word("none"):
            rets = []
        elif self.word("UniTuple"):
            if not self.accept("("):
                self.fail("expected '(' after UniTuple")
            t = self.sig_type()
            if not self.accept(","):
                self.fail("expected ', count' in UniTuple(type, count)")
            self.ws()
            at = self.p
            while self.ch() in DIGITS:
                self.p += 1
            digits = self.t[at:self.p]
            count = int(digits) if digits else 0
            if not 1 <= count <= MAX_ARGS:
                self.fail("UniTuple needs a count from 1 to 32", at)
            if not self.accept(")"):
                self.fail("expected ')'")
            rets = [t] * count
        elif self.word("Tuple"):
            rets = self.type_list()
            if not rets:
                self.fail("an empty Tuple cannot be a return type")
        else:
            rets = [self.sig_type()]
        args = self.type_list()
        self.ws()
        if self.t.startswith("->", self.p):
            self.fail("use 'ret(args)' rather than '(args) -> ret'")
        if self.p < len(self.t):
            self.fail("unexpected text after the signature")
        return rets, args

    # -- layouts
    def core_dim(self, names):
        self.ws()
        at = self.p
        if self.ch() in DIGITS:
            while self.ch() in DIGITS:
                self.p += 1
            value = int(self.t[at:self.p])
            if value > MAX_FIXED:
                self.fail("fixed dimension too large", at)
            key = value
        else:
            name = self.ident()
            if name is None or "." in name:
                self.fail("expected a dimension name or size", at)
            if len(name) > MAX_NAME_LEN:
                self.fail("longer than 31 characters", at)
            key = name
        self.ws()
        if self.ch() in ("?", "|"):
            self.fail("flexible ('?') and broadcastable ('|1') core dimensions are not supported")
        if key not in names:
            if len(names) == MAX_NAMES:
                self.fail("too many dimension names", at)
            names.append(key)
        return key

    def core_dims(self, names):
        dims = []
        if not self.accept("("):
            self.fail("expected '('")
        if self.accept(")"):
            return tuple(dims)
        while True:
            self.ws()
            if len(dims) == MAX_CORE_DIMS:
                self.fail("too many core dimensions")
            dims.append(self.core_dim(names))
            if self.accept(")"):
                return tuple(dims)
            if not self.accept(","):
                self.fail("expected ',' or ')'")

    def operands(self, names, nops):
        ops = []
        while True:
            self.ws()
            if nops + len(ops) == MAX_ARGS:
                self.fail("too many operands")
            ops.append(self.core_dims(names))
            if not self.accept(","):
                return ops

    def layout(self):
        names = []
        ins = self.operands(names, 0)
        self.ws()
        if not self.t.startswith("->", self.p):
            self.fail("expected ',' or '->'")
        self.p += 2
        outs = self.operands(names, len(ins))
        self.ws()
        if self.p < len(self.t):
            self.fail("unexpected text after the signature")
        return ins, outs


def ref_parse(text, kind):
    try:
        r = Ref(text)
        return (r.type_signature() if kind == "type" else r.layout()), None
    except RefError as e:
        return None, e


# ---- checking cufunc against it ------------------------------------------------------------------

def shown(c):
    """How the excerpt shows character c."""
    if c in SPACE:
        return " "
    o = ord(c)
    if o < 0x20 or 0x7F <= o < 0xA0 or o in (0x2028, 0x2029) or 0xD800 <= o <= 0xDFFF:
        return "?"
    return c


def check(text, kind):
    fn = _core.parse_type_signature if kind == "type" else _core.parse_layout
    want, err = ref_parse(text, kind)
    try:
        got = fn(text)
    except errors.SignatureError as exc:
        msg = str(exc)
    else:
        assert err is None, "accepted %r; the reference says %r at %d" % (text, err.why, err.pos)
        if kind == "type":
            rets, args = got
            norm = lambda ts: [(np.dtype(d), n, lay) for d, n, lay in ts]  # noqa: E731
            assert (None if rets is None else norm(rets)) == want[0], text
            assert norm(args) == want[1], text
        else:
            assert (list(got[0]), list(got[1])) == (want[0], want[1]), text
        return
    assert err is not None, "refused %r, which the reference parses: %s" % (text, msg)
    what = "type signature" if kind == "type" else "gufunc signature"
    assert msg.startswith("invalid %s: " % what), msg
    m = re.search(r" at position (\d+):\n", msg)
    assert m, msg
    assert int(m.group(1)) == err.pos, (text, msg, err.pos, err.why)
    assert err.why in msg, (text, msg, err.why)
    assert len(msg) < 600, len(msg)
    lines = msg.split("\n")
    assert len(lines) == 3, msg
    excerpt, caret = lines[1][4:], lines[2]
    assert caret.strip() == "^"
    col = caret.index("^") - 4
    if err.pos < len(text):
        assert excerpt[col] == shown(text[err.pos]), (text, msg)
    else:
        assert col == len(excerpt), (text, msg)


# ---- inputs -----------------------------------------------------------------------------------

TYPE_TOKENS = ["f4", "f8", "float32", "int64", "i4", "u1", "b1", "bool", "c16", "np.float64",
               "numpy.int8", "np.", "void", "none", "Tuple", "UniTuple", "int", "float", "x",
               "_y", "object", "voidx", "void.x", "f4.", "9f", "Q", "half"]
LAYOUT_TOKENS = ["m", "n", "p", "k", "_", "n1", "a.b", "3", "0", "007", "1099511627776",
                 "1099511627777", "->", "-", ">", "?", "|1"]
PUNCT = ["(", ")", ",", "[", "]", ":", "::1", "::", "->", " ", "  ", "\t", "\n", "\r", "\x0b",
         "(", ")", ","]
ODD = ["\x00", "\ud800", "\udfff", "\u00fc", "\u20ac", "\U0001d54f", "\u2028", "\x85", "\x01",
       "\x7f", "\u00a0", "\u3000", "33", "32", "99999999999999999999"]


def long_names():
    return st.builds(lambda c, n: c * n, st.sampled_from(["a", "n", "_", "f", "9"]),
                     st.integers(1, 80))


def token_soup(tokens):
    tok = st.one_of(st.sampled_from(tokens), st.sampled_from(PUNCT), st.sampled_from(ODD),
                    long_names())
    return st.lists(tok, max_size=40).map("".join)


@st.composite
def valid_type_sigs(draw):
    def one_type():
        name = draw(st.sampled_from(sorted(TYPE_NAMES) + ["np.float32", "numpy.uint16"]))
        nd = draw(st.integers(0, 3))
        if not nd:
            return name
        axes = [":"] * nd
        if draw(st.booleans()):
            axes[draw(st.sampled_from([0, nd - 1]))] = "::1"
        return name + "[" + ", ".join(axes) + "]"

    args = [one_type() for _ in range(draw(st.integers(0, 4)))]
    ret = draw(st.sampled_from(["", "void", "f4", "Tuple", "UniTuple"]))
    if ret == "Tuple":
        ret = "Tuple(%s)" % ", ".join(one_type() for _ in range(draw(st.integers(1, 3))))
    elif ret == "UniTuple":
        ret = "UniTuple(%s, %d)" % (one_type(), draw(st.integers(1, 32)))
    elif ret == "f4":
        ret = one_type()
    sep = draw(st.sampled_from([",", ", ", " ,\t"]))
    return ret + "(" + sep.join(args) + (draw(st.sampled_from(["", ","])) if args else "") + ")"


@st.composite
def valid_layouts(draw):
    names = st.one_of(st.sampled_from(["m", "n", "p", "k", "q1", "_n"]),
                      st.integers(0, 64).map(str))
    def ops():
        operand = st.lists(names, max_size=3).map(lambda d: "(" + ",".join(d) + ")")
        return st.lists(operand, min_size=1, max_size=4).map(",".join)
    return draw(ops()) + draw(st.sampled_from(["->", " -> "])) + draw(ops())


def mutated(base, tokens):
    """A valid text with one token inserted, one character deleted, or one replaced."""
    @st.composite
    def mutate(draw):
        text = draw(base)
        i = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        tok = draw(st.one_of(st.sampled_from(tokens), st.sampled_from(PUNCT), st.sampled_from(ODD)))
        if op == "insert":
            return text[:i] + tok + text[i:]
        if op == "delete":
            return text[:i] + text[i + 1:]
        return text[:i] + tok + text[i + 1:]
    return mutate()


def many(tokens, kind):
    """A text repeating pieces so that the count limits (32 types, 32 dims, 64 names) are met."""
    @st.composite
    def build(draw):
        piece = draw(st.sampled_from(tokens))
        n = draw(st.sampled_from([30, 31, 32, 33, 63, 64, 65, 100]))
        shape = draw(st.sampled_from(["list", "nested", "operands"]))
        if kind == "type":
            if shape == "nested":   # array dimensions: 64 at most
                return "f4(f4[" + ", ".join([":"] * n) + "])"
            return "f4(" + ", ".join([piece] * n) + ")"
        if shape == "operands":     # operands: 32 at most, in and out together
            k = draw(st.integers(0, n))
            return ",".join(["(%s)" % piece] * k) + "->" + ",".join(["()"] * max(n - k, 1))
        if shape == "nested":       # distinct names over several operands: 64 at most
            ops = ["(" + ",".join("d%d" % i for i in range(j, min(j + 30, n))) + ")"
                   for j in range(0, n, 30)]
            return ",".join(ops) + "->()"
        distinct = draw(st.booleans())
        dims = ",".join(("d%d" % i) if distinct else piece for i in range(n))
        return "(" + dims + ")->()"
    return build()


# ---- the tests --------------------------------------------------------------------------------

@SETTINGS
@given(st.one_of(token_soup(TYPE_TOKENS), mutated(valid_type_sigs(), TYPE_TOKENS),
                 valid_type_sigs(), st.text(max_size=30),
                 many(["f4", "f4[:]", "x"], "type")))
def test_type_signature_parser(text):
    check(text, "type")


@SETTINGS
@given(st.one_of(token_soup(LAYOUT_TOKENS), mutated(valid_layouts(), LAYOUT_TOKENS),
                 valid_layouts(), st.text(max_size=30),
                 many(["n", "3", "m"], "layout")))
def test_layout_parser(text):
    check(text, "layout")


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.integers(0, 3), st.integers(10, 200_000), st.sampled_from(["type", "layout"]))
def test_huge_texts(where, size, kind):
    # the message stays short, the caret right, however long the text
    body = {"type": "f4(" + "f4, " * 3 + "f4)", "layout": "(m,n)->(m)"}[kind]
    pad = " " * size
    text = [pad + body + "@", body[:3] + pad + "@" + body, "@" + pad + body,
            body + pad + "\x00"][where]
    check(text, kind)


# A few inputs that found faults, kept as plain cases.
@pytest.mark.parametrize("text,kind", [
    ("f4(f4,f4)\x00junk", "type"), ("(m,n)->(...", "layout"), ("(" + "a" * 40 + ")->()", "layout"),
    ("f4(f4,\udc80)", "type"), ("(%s3)->()" % ("0" * 40), "layout"),
    ("UniTuple(f4, 333)(f4)", "type"),
    ("f4(" + "x" * 70 + ")", "type"), ("void.x(f4)", "type"), ("f4(f4[::1, ::1])", "type"),
    ("f4(f4[:, ::1, :])", "type"), ("Tuple()(f4)", "type"), ("Tuple(f4, i8[::1])(f4)", "type"),
    ("f4(f4[" + ", ".join([":"] * 65) + "])", "type"), ("()" + ",()" * 32 + "->()", "layout"),
    (",".join("(%s)" % ",".join("d%d_%d" % (j, i) for i in range(20)) for j in range(4)) + "->()",
     "layout"),
    ("(n?)->()", "layout"), ("(n|1)->()", "layout"), ("(n)->(n) x", "layout"),
])
def test_known_cases(text, kind):
    check(text, kind)
