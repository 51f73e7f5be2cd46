"""Signature and layout strings that are not plain signatures: an embedded NUL, a lone
surrogate, a very long text, a long dimension name. Each is refused with cufunc's one
SignatureError, at the right position, through every way a user gives one (parse_signature,
vectorize, guvectorize, GUFunc, the _core parsers). No GPU needed."""

import re

import numpy as np
import pytest

import cufunc
from cufunc import _core, errors
from cufunc import types as T


def type_sig_entry_points():
    def via_vectorize(text):
        cufunc.vectorize([text])(lambda x: x)

    def via_guvectorize_types(text):
        cufunc.guvectorize([text], "()->()")(lambda x, y: None)

    return {"parse_signature": T.parse_signature, "_core": _core.parse_type_signature,
            "vectorize": via_vectorize, "guvectorize": via_guvectorize_types}


def layout_entry_points():
    def via_guvectorize(text):
        cufunc.guvectorize(["void(f8[:], f8[:])"], text)

    def via_guvectorize_layout_kw(text):
        cufunc.guvectorize(layout=text)

    return {"_core": _core.parse_layout, "guvectorize": via_guvectorize,
            "guvectorize_layout_kw": via_guvectorize_layout_kw,
            "GUFunc": lambda text: cufunc.GUFunc("g", text)}


def check_message(exc, text, pos, what):
    """The message names the position, and its last two lines are an excerpt of the text with a
    caret under the character at pos (or just after the end)."""
    msg = str(exc)
    assert msg.startswith("invalid %s: " % what), msg
    assert "at position %d:" % pos in msg, msg
    lines = msg.split("\n")
    excerpt, caret = lines[-2], lines[-1]
    assert excerpt.startswith("    ") and caret.startswith("    ")
    assert caret.strip() == "^" and caret.count("^") == 1
    col = caret.index("^") - 4
    shown = excerpt[4:]
    if pos < len(text):
        c = text[pos]
        want = "?" if (c.isspace() is False and not c.isprintable()) or "\ud800" <= c <= "\udfff" \
            else (" " if c.isspace() else c)
        assert shown[col] == want, (shown, col, want)
    else:
        assert col == len(shown) or shown.endswith("..."), (shown, col)
    return msg


# ---- the class --------------------------------------------------------------------------------

def test_one_signature_error_class():
    assert T.SignatureError is errors.SignatureError
    assert cufunc.SignatureError is errors.SignatureError   # through `from .types import *`
    assert issubclass(errors.SignatureError, ValueError)
    assert issubclass(errors.SignatureError, TypeError)


@pytest.mark.parametrize("entry", sorted(layout_entry_points()))
def test_layout_errors_are_signature_errors(entry):
    # was: a plain ValueError for layouts, SignatureError for type signatures
    fn = layout_entry_points()[entry]
    with pytest.raises(errors.SignatureError) as ei:
        fn("(m,n)->(...")
    check_message(ei.value, "(m,n)->(...", 8, "gufunc signature")   # at the dots, was 11


@pytest.mark.parametrize("entry", sorted(type_sig_entry_points()))
def test_type_signature_errors_are_signature_errors(entry):
    fn = type_sig_entry_points()[entry]
    with pytest.raises(errors.SignatureError) as ei:
        fn("f4(flot32)")
    check_message(ei.value, "f4(flot32)", 3, "type signature")
    assert "unknown type name 'flot32'" in str(ei.value)


# ---- embedded NUL, lone surrogates ---------------------------------------------------------------

BAD_TYPE_TEXTS = [
    ("f4(f4,f4)\x00junk", 9, "embedded NUL character"),
    ("f4(f4,f4)\x00", 9, "embedded NUL character"),
    ("\x00", 0, "embedded NUL character"),
    ("f4(\u00fc\u00fc)\x00", 6, "embedded NUL character"),   # characters, not bytes
    ("f4(f4,\udc80)", 6, "lone surrogate U+DC80"),
    ("\ud800", 0, "lone surrogate U+D800"),
    ("f4(f4)\udfff\x00", 6, "lone surrogate U+DFFF"),
]


@pytest.mark.parametrize("entry", sorted(type_sig_entry_points()))
@pytest.mark.parametrize("text,pos,why", BAD_TYPE_TEXTS, ids=[ascii(t[0]) for t in BAD_TYPE_TEXTS])
def test_type_signature_bad_characters(entry, text, pos, why):
    fn = type_sig_entry_points()[entry]
    with pytest.raises(errors.SignatureError) as ei:
        fn(text)
    msg = check_message(ei.value, text, pos, "type signature")
    assert why in msg


BAD_LAYOUT_TEXTS = [
    ("(n)->(n)\x00junk", 8, "embedded NUL character"),
    ("(n)->()\x00", 7, "embedded NUL character"),
    ("(\udc80)->()", 1, "lone surrogate U+DC80"),
    ("(n)->(n)\ud83d", 8, "lone surrogate U+D83D"),
]


@pytest.mark.parametrize("entry", sorted(layout_entry_points()))
@pytest.mark.parametrize("text,pos,why", BAD_LAYOUT_TEXTS,
                         ids=[ascii(t[0]) for t in BAD_LAYOUT_TEXTS])
def test_layout_bad_characters(entry, text, pos, why):
    fn = layout_entry_points()[entry]
    with pytest.raises(errors.SignatureError) as ei:
        fn(text)
    msg = check_message(ei.value, text, pos, "gufunc signature")
    assert why in msg


def test_non_ascii_is_an_error_at_its_place_and_shown():
    with pytest.raises(errors.SignatureError) as ei:
        T.parse_signature("f4(f4, f\u00f64)")
    msg = check_message(ei.value, "f4(f4, f\u00f64)", 8, "type signature")
    assert "f\u00f64" in msg   # shown as it is, not escaped


def test_not_a_string():
    with pytest.raises(TypeError, match="must be a string"):
        _core.parse_layout(b"(n)->()")
    with pytest.raises(TypeError, match="must be a string"):
        _core.parse_type_signature(42)


# ---- dimension names --------------------------------------------------------------------------

def test_long_dimension_name():
    ok = "n" * 31
    assert _core.parse_layout("(%s)->(%s)" % (ok, ok)) == ([(ok,)], [(ok,)])
    text = "(m, %s)->()" % ("n" * 32)
    with pytest.raises(errors.SignatureError) as ei:
        cufunc.guvectorize(text)
    msg = check_message(ei.value, text, 4, "gufunc signature")   # was "expected ',' or ')'" at 35
    assert "longer than 31 characters" in msg


def test_fixed_size_with_leading_zeros():
    assert _core.parse_layout("(%s3)->()" % ("0" * 40)) == ([(3,)], [()])


# ---- long texts -------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [200, 10 ** 4, 10 ** 6])
@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_long_type_signature_message_is_an_excerpt(size, where):
    pad = " " * size
    text = {"start": "f4(@" + pad + "f4)", "middle": "f4(" + pad + "@" + pad + ")",
            "end": "f4(" + pad + "f4" + pad + ") @"}[where]
    pos = text.index("@")
    with pytest.raises(errors.SignatureError) as ei:
        T.parse_signature(text)
    msg = check_message(ei.value, text, pos, "type signature")
    assert len(msg) < 300, len(msg)     # was 2x the text


@pytest.mark.parametrize("size", [10 ** 3, 10 ** 6])
def test_long_layout_message_is_an_excerpt(size):
    text = "(" + ",".join("d%d" % (i % 50) for i in range(size // 4)) + ")->(" + "x" * 40 + ")"
    pos = text.index("x" * 40)
    with pytest.raises(errors.SignatureError) as ei:
        cufunc.guvectorize(text)
    msg = str(ei.value)
    assert len(msg) < 300, len(msg)
    # the first error: too many core dimensions in the first operand
    assert "too many core dimensions" in msg
    m = re.search(r"at position (\d+):", msg)
    check_message(ei.value, text, int(m.group(1)), "gufunc signature")
    assert int(m.group(1)) < pos


def test_control_characters_keep_the_caret_on_its_line():
    text = "(n)->\n(n)\x01\u2028"
    with pytest.raises(errors.SignatureError) as ei:
        _core.parse_layout(text)
    msg = str(ei.value)
    assert msg.endswith("\n    (n)-> (n)??\n             ^")
    assert len(msg.splitlines()) == 3


def test_valid_signatures_still_parse():
    assert T.parse_signature(" f4 (\tf4 ,\nf8[:, ::1]) ") == (T.float32,
                                                             [T.float32, T.float64[:, ::1]])
    assert _core.parse_layout("(m,n),(n,p)->(m,p)") == ([("m", "n"), ("n", "p")], [("m", "p")])
    assert np.dtype(_core.parse_type_signature("u1(b1)")[0][0][0]) == np.uint8


def test_type_name_with_a_lone_surrogate():
    # to_type tries the signature parser, then NumPy, which raised a raw UnicodeEncodeError
    with pytest.raises(errors.SignatureError, match="lone surrogate"):
        T.to_type("f4\udc80")
    with pytest.raises(errors.SignatureError, match="lone surrogate"):
        cufunc.guvectorize([("f8[:]", "f8\udc80")], "(n)->()")(lambda x, out: None)
