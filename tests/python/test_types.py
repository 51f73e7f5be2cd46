"""cufunc.types: type objects, signatures, string parsing. Pure Python, no GPU."""

import os
import sys

import numpy as np
import pytest


from cufunc import types as T  # noqa: E402

SCALARS = [
    ("bool", T.bool_, np.bool_, "cf_bool"), ("int8", T.int8, np.int8, "cf_int8"),
    ("int16", T.int16, np.int16, "cf_int16"), ("int32", T.int32, np.int32, "cf_int32"),
    ("int64", T.int64, np.int64, "cf_int64"), ("uint8", T.uint8, np.uint8, "cf_uint8"),
    ("uint16", T.uint16, np.uint16, "cf_uint16"), ("uint32", T.uint32, np.uint32, "cf_uint32"),
    ("uint64", T.uint64, np.uint64, "cf_uint64"), ("float16", T.float16, np.float16, "cf_float16"),
    ("float32", T.float32, np.float32, "cf_float32"),
    ("float64", T.float64, np.float64, "cf_float64"),
    ("complex64", T.complex64, np.complex64, "cf_complex64"),
    ("complex128", T.complex128, np.complex128, "cf_complex128"),
]


@pytest.mark.parametrize("name,t,npt,cname", SCALARS, ids=[s[0] for s in SCALARS])
def test_scalar_attributes(name, t, npt, cname):
    assert t.name == name and str(t) == name and repr(t) == name
    assert t.dtype == np.dtype(npt)
    assert t.cname == cname
    assert T.from_dtype(npt) is t
    assert T.from_dtype(np.dtype(npt)) is t
    assert T.to_type(npt) is t
    assert T.to_type(name) is t
    assert T.to_type(np.dtype(npt).str) is t   # '<f4' etc.


def test_aliases():
    assert T.boolean is T.bool_ and T.b1 is T.bool_
    assert (T.i1, T.i2, T.i4, T.i8) == (T.int8, T.int16, T.int32, T.int64)
    assert (T.u1, T.u2, T.u4, T.u8) == (T.uint8, T.uint16, T.uint32, T.uint64)
    assert (T.f2, T.f4, T.f8) == (T.float16, T.float32, T.float64)
    assert (T.c8, T.c16) == (T.complex64, T.complex128)
    assert T.intp.dtype == np.dtype(np.intp)
    assert T.uintp.dtype == np.dtype(np.uintp)
    assert T.to_type(float) is T.float64 and T.to_type(int) is T.int64
    assert T.to_type(bool) is T.bool_ and T.to_type(complex) is T.complex128
    assert T.to_type("f4") is T.float32 and T.to_type("double") is T.float64
    assert T.to_type("np.float32") is T.float32


def test_equality_and_hash():
    assert T.float32 == T.Scalar("float32", np.float32, "cf_float32")
    assert hash(T.float32) == hash(T.Scalar("float32", np.float32, "cf_float32"))
    assert T.float32 != T.float64
    assert T.float32[:] == T.float32[:] and hash(T.float32[:]) == hash(T.float32[:])
    assert T.float32[:] != T.float32[::1]
    assert T.float32[:] != T.float32[:, :]
    assert T.void == T.Void() and T.void != T.float32
    assert len({T.int8, T.i1, T.int8[:], T.int8[:]}) == 2


def test_array_types():
    a = T.float32[:, :]
    assert isinstance(a, T.Array) and a.ndim == 2 and a.dtype is T.float32 and a.layout == "A"
    assert a.cname == "cf_array_ref<cf_float32, 2>"
    assert str(a) == "float32[:, :]"
    c = T.float64[:, ::1]
    assert c.layout == "C" and str(c) == "float64[:, ::1]"
    assert T.int8[::1].ndim == 1 and T.int8[::1].layout == "C"
    with pytest.raises(TypeError):
        T.float32[1:2]
    with pytest.raises(TypeError):
        T.float32[::1, :]
    with pytest.raises(TypeError):
        T.float32[::2]


def test_signatures_from_calls():
    s = T.float32(T.float32, T.float32)
    assert isinstance(s, T.Signature)
    assert s.return_type is T.float32 and s.args == (T.float32, T.float32)
    ret, args = s
    assert ret is T.float32 and args == [T.float32, T.float32]
    assert str(s) == "float32(float32, float32)"
    v = T.void(T.float32[:], T.float32[:, :])
    assert v.return_type == T.void and v.args == (T.float32[:], T.float32[:, :])
    assert T.int64().args == ()
    assert T.float32(np.float64, "int8").args == (T.float64, T.int8)
    assert T.float32[:](T.float32[:]).return_type == T.float32[:]


def test_scalar_type_call_with_values_casts():
    x = T.float32(3.5)
    assert type(x) is np.float32 and x == 3.5
    assert type(T.int8(300 - 256)) is np.int8
    with pytest.raises(TypeError):
        T.float32(T.float32, 1.0)


PARSE_OK = [
    ("float32(float32, float32)", T.float32, [T.float32, T.float32]),
    ("f4(f4, f4)", T.float32, [T.float32, T.float32]),
    ("f4(f4,f4)", T.float32, [T.float32, T.float32]),
    ("void(f4[:], f4[:,:])", T.void, [T.float32[:], T.float32[:, :]]),
    ("void(float64[:, ::1], int32)", T.void, [T.float64[:, ::1], T.int32]),
    ("int64(int64,)", T.int64, [T.int64]),
    ("  int64 ( int64 , ) ", T.int64, [T.int64]),
    ("bool(b1, boolean, bool_)", T.bool_, [T.bool_, T.bool_, T.bool_]),
    ("c16(c8, complex128)", T.complex128, [T.complex64, T.complex128]),
    ("u8(u1, u2, u4, uint64, i1, i2, i4, i8)", T.uint64,
     [T.uint8, T.uint16, T.uint32, T.uint64, T.int8, T.int16, T.int32, T.int64]),
    ("double(double, single)", T.float64, [T.float64, T.float32]),
    ("np.float32(np.float32)", T.float32, [T.float32]),
    ("float32()", T.float32, []),
    ("(float32, int8)", None, [T.float32, T.int8]),
    ("intp(uintp)", T.intp, [T.uintp]),
    ("Tuple(f4, i8)(f4)", T.Tuple([T.float32, T.int64]), [T.float32]),
    ("UniTuple(f8, 2)(f8)", T.Tuple([T.float64, T.float64]), [T.float64]),
    ("void(f4[::1, :])", T.void, [T.float32[:, :]]),   # Numba's F-order array: any strides here
]


@pytest.mark.parametrize("text,ret,args", PARSE_OK, ids=[p[0] for p in PARSE_OK])
def test_parse_signature(text, ret, args):
    r, a = T.parse_signature(text)
    assert r == ret
    assert a == args


PARSE_BAD = [
    ("float32(float32", "expected ',' or ')'", 15),
    ("float32(flot32)", "unknown type name 'flot32'", 8),
    ("float32(float32) x", "unexpected text after the signature", 17),
    ("float32(float32 float32)", "expected ',' or ')'", 16),
    ("Tuple(f4, i8)(f4", "expected ',' or ')'", 16),
    ("float32(f4[:, 1])", "expected ':' or '::1' in an array type", 14),
    ("float32(f4[:, ::1, :])", "::1 must mark the first or the last axis", 21),
    ("f4(void)", "void is not an argument type", 3),
    ("(f4) -> f4", "use 'ret(args)'", 5),
    ("", "expected a type name", 0),
    ("float32(str)", "unknown type name 'str'", 8),
]


@pytest.mark.parametrize("text,msg,pos", PARSE_BAD, ids=[p[0] or "empty" for p in PARSE_BAD])
def test_parse_signature_errors_say_where(text, msg, pos):
    with pytest.raises(T.SignatureError) as ei:
        T.parse_signature(text)
    s = str(ei.value)
    assert msg in s
    assert "position %d" % pos in s
    lines = s.splitlines()
    # the signature and a caret under the bad character
    assert lines[-2] == "    " + text
    assert lines[-1] == " " * (4 + pos) + "^"


def test_signature_error_is_value_error():
    assert issubclass(T.SignatureError, ValueError)


def test_parse_signature_other_inputs():
    sig = T.float32(T.int8)
    assert T.parse_signature(sig) == (T.float32, [T.int8])
    assert T.parse_signature((T.float64, [np.float32, "i8"])) == (T.float64, [T.float32, T.int64])
    with pytest.raises(TypeError):
        T.parse_signature(42)


def test_from_dtype_errors():
    with pytest.raises(TypeError, match="no cufunc type"):
        T.from_dtype(np.dtype("M8[s]"))
    with pytest.raises(TypeError, match="no cufunc type"):
        T.from_dtype(object)
    with pytest.raises(TypeError):
        T.to_type(object())
    assert T.from_dtype(np.dtype(">f4")) is T.float32


def test_tuple_type():
    t = T.Tuple([T.float32, T.int64])
    assert len(t) == 2 and t[0] is T.float32 and list(t) == [T.float32, T.int64]
    assert t == T.Tuple((T.float32, T.int64)) and hash(t) == hash(T.Tuple((T.float32, T.int64)))
    assert str(t) == "Tuple(float32, int64)"
