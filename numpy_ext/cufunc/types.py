"""Type objects for signatures, in the style of Numba's ``numba.types``.

Scalar types (``float32``, ``int64``, ...) are callable and sliceable::

    float32(float32, float32)     # a Signature: return type float32, two float32 arguments
    float32[:, :]                 # a 2-d array type of float32, any layout
    float32[::1]                  # a 1-d C-contiguous array type
    void(float32[:], float32[:])  # a signature of a function returning nothing
    float32(3.5)                  # not a type: casts the value, like np.float32(3.5)

``parse_signature('f4(f4, f4[:, :])')`` turns a string into ``(return_type, [arg_types])``;
``to_type`` accepts a type object, a NumPy dtype or scalar class, a Python number class or a type
name string in NumPy or Numba spelling. This module imports only NumPy (and cufunc.errors), and
ml_dtypes when it is installed (``bfloat16``, whose NumPy dtype it provides).
"""

import numpy as np

# A signature string or type name cannot be parsed: one class for type signatures and gufunc
# layouts, defined with cufunc's other exceptions (cufunc.errors imports nothing).
from .errors import SignatureError

__all__ = [
    "Type", "Scalar", "Void", "Array", "Tuple", "Signature", "SignatureError",
    "bool_", "boolean", "b1",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "intp", "uintp",
    "float16", "float32", "float64", "f2", "f4", "f8",
    "complex64", "complex128", "c8", "c16", "void",
    "from_dtype", "to_type", "parse_signature", "scalar_types",
]


class Type:
    """Base of all type objects. Types compare and hash by value."""

    __slots__ = ()

    def _key(self):
        raise NotImplementedError

    def __eq__(self, other):
        return type(self) is type(other) and self._key() == other._key()

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash((type(self).__name__, self._key()))

    def __repr__(self):
        return self.name

    __str__ = __repr__

    @property
    def name(self):
        """The type's name, as a signature spells it ('float32', 'float32[:, ::1]')."""
        raise NotImplementedError

    def _signature(self, args):
        return Signature(self, tuple(to_type(a) for a in args))


class Scalar(Type):
    """A NumPy scalar type: bool, signed and unsigned integers, floats and complex numbers.

    The module's instances (``float32``, ``int64``, ...) are the ones to use; calling one with types
    makes a Signature (``float32(float32, float32)``), with values it casts as the NumPy scalar type
    does, and indexing it makes an Array type (``float32[:, ::1]``).

    Parameters
    ----------
    name : str
        The type's name ('float32').
    dtype : dtype_like
        Its NumPy dtype.
    cname : str
        Its C type in kernels ('cf_float32').
    kind : str, optional
        'b', 'i', 'u', 'f' or 'c'; the dtype's kind when not given.
    """

    __slots__ = {"_name": None,
                 "dtype": "The NumPy dtype.",
                 "cname": "The C type in kernels ('cf_float32').",
                 "kind": "'b', 'i', 'u', 'f' or 'c' (bfloat16: 'f').",
                 "bits": "The size of one value in bits."}

    def __init__(self, name, dtype, cname, kind=None):
        self._name = name
        self.dtype = np.dtype(dtype)
        self.cname = cname
        # 'b', 'i', 'u', 'f' or 'c' (bfloat16: 'f', though ml_dtypes' dtype has kind 'V')
        self.kind = kind or self.dtype.kind
        self.bits = self.dtype.itemsize * 8

    def _key(self):
        return self._name

    @property
    def name(self):
        """The type's name ('float32')."""
        return self._name

    @property
    def itemsize(self):
        """The size of one value in bytes."""
        return self.dtype.itemsize

    def __call__(self, *args):
        """With type arguments (or none): a Signature returning this type. With values: a cast,
        exactly like calling the NumPy scalar type (so a body runs unchanged in CPython)."""
        if not args or all(_is_type_like(a) for a in args):
            return self._signature(args)
        if any(isinstance(a, Type) for a in args):
            raise TypeError("%s(...): mix of types and values" % self._name)
        return self.dtype.type(*args)

    def __getitem__(self, key):
        return Array(self, *_parse_slices(key))


class Void(Type):
    """The return type of functions that return nothing (gufunc bodies, some device functions)."""

    __slots__ = ()

    def _key(self):
        return "void"

    @property
    def name(self):
        """The type's name, 'void'."""
        return "void"

    cname = "void"
    kind = "v"

    def __call__(self, *args):
        return self._signature(args)


class Array(Type):
    """An array of a scalar type with a fixed number of dimensions.

    Made by indexing a scalar type: ``float32[:]``, ``float64[:, ::1]``.

    Parameters
    ----------
    dtype : Scalar
        The element type.
    ndim : int
        The number of dimensions (1 or more).
    layout : {'A', 'C'}, optional
        'C' when the last axis is known to be contiguous ('[::1]'), else 'A'.
    readonly : bool, optional
        True for captured NumPy arrays (constant tables).
    """

    __slots__ = {"dtype": "The element type, a Scalar.",
                 "ndim": "The number of dimensions.",
                 "layout": "'C' when the last axis is known to be contiguous, else 'A'.",
                 "readonly": "True for captured NumPy arrays (constant tables)."}

    def __init__(self, dtype, ndim, layout="A", readonly=False):
        if not isinstance(dtype, Scalar):
            raise TypeError("array element type must be a scalar type, not %r" % (dtype,))
        if not isinstance(ndim, int) or ndim < 1:
            raise ValueError("array ndim must be a positive integer")
        if layout not in ("A", "C"):
            raise ValueError("array layout must be 'A' or 'C'")
        self.dtype = dtype
        self.ndim = ndim
        self.layout = layout
        self.readonly = bool(readonly)

    def _key(self):
        return (self.dtype.name, self.ndim, self.layout, self.readonly)

    @property
    def name(self):
        """The type's name, as a signature spells it ('float32[:, ::1]')."""
        dims = [":"] * self.ndim
        if self.layout == "C":
            dims[-1] = "::1"
        ro = "" if not self.readonly else " (readonly)"
        return "%s[%s]%s" % (self.dtype.name, ", ".join(dims), ro)

    @property
    def cname(self):
        """The C type of the array in kernels ('cf_array_ref<cf_float32, 2>')."""
        return "cf_array_ref<%s, %d>" % (self.dtype.cname, self.ndim)

    kind = "a"

    def __call__(self, *args):
        return self._signature(args)


class Tuple(Type):
    """A tuple of scalar types (several return values, array shapes).

    Parameters
    ----------
    types : iterable of Type
        The item types.
    """

    __slots__ = {"types": "The item types, a tuple."}

    def __init__(self, types):
        self.types = tuple(types)

    def _key(self):
        return self.types

    @property
    def name(self):
        """The type's name ('Tuple(float32, int64)')."""
        return "Tuple(%s)" % ", ".join(t.name for t in self.types)

    kind = "t"

    def __len__(self):
        return len(self.types)

    def __iter__(self):
        return iter(self.types)

    def __getitem__(self, i):
        return self.types[i]


class Signature:
    """A function signature: a return type and argument types.

    Made by calling a type: ``float32(float32, float32)``.

    Parameters
    ----------
    return_type : Type or None
        The return type; None when the signature gives none ('(f4, f4)').
    args : iterable of Type
        The argument types.
    """

    __slots__ = {"return_type": "The return type, or None when the signature gives none.",
                 "args": "The argument types, a tuple."}

    def __init__(self, return_type, args):
        self.return_type = return_type
        self.args = tuple(args)

    def __eq__(self, other):
        return (isinstance(other, Signature) and self.return_type == other.return_type
                and self.args == other.args)

    def __hash__(self):
        return hash((self.return_type, self.args))

    def __iter__(self):
        # allows `ret, args = sig`
        return iter((self.return_type, list(self.args)))

    def __repr__(self):
        ret = "" if self.return_type is None else self.return_type.name
        return "%s(%s)" % (ret, ", ".join(a.name for a in self.args))

    __str__ = __repr__


def _is_type_like(obj):
    return isinstance(obj, (Type, str)) or (isinstance(obj, type) and issubclass(obj, np.generic))


def _parse_slices(key):
    """float32[:, ::1] -> (2, 'C'). Only full slices, with step 1 allowed on the last axis."""
    if not isinstance(key, tuple):
        key = (key,)
    if not key:
        raise TypeError("array type needs at least one dimension")
    layout = "A"
    for i, s in enumerate(key):
        if not isinstance(s, slice) or s.start is not None or s.stop is not None:
            raise TypeError("array types are written with full slices, e.g. float32[:, :]")
        if s.step is not None:
            if s.step != 1 or i != len(key) - 1:
                raise TypeError("only the last axis may be marked contiguous, e.g. float32[:, ::1]")
            layout = "C"
    return len(key), layout


bool_ = Scalar("bool", np.bool_, "cf_bool")
int8 = Scalar("int8", np.int8, "cf_int8")
int16 = Scalar("int16", np.int16, "cf_int16")
int32 = Scalar("int32", np.int32, "cf_int32")
int64 = Scalar("int64", np.int64, "cf_int64")
uint8 = Scalar("uint8", np.uint8, "cf_uint8")
uint16 = Scalar("uint16", np.uint16, "cf_uint16")
uint32 = Scalar("uint32", np.uint32, "cf_uint32")
uint64 = Scalar("uint64", np.uint64, "cf_uint64")
float16 = Scalar("float16", np.float16, "cf_float16")
float32 = Scalar("float32", np.float32, "cf_float32")
float64 = Scalar("float64", np.float64, "cf_float64")
complex64 = Scalar("complex64", np.complex64, "cf_complex64")
complex128 = Scalar("complex128", np.complex128, "cf_complex128")
void = Void()

boolean = b1 = bool_
i1, i2, i4, i8 = int8, int16, int32, int64
u1, u2, u4, u8 = uint8, uint16, uint32, uint64
f2, f4, f8 = float16, float32, float64
c8, c16 = complex64, complex128
intp = {4: int32, 8: int64}[np.dtype(np.intp).itemsize]
uintp = {4: uint32, 8: uint64}[np.dtype(np.uintp).itemsize]

scalar_types = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                float16, float32, float64, complex64, complex128)

# bfloat16: NumPy has none; with ml_dtypes installed (JAX's bfloat16), its dtype. Without it the
# name is not a type (a torch/JAX bfloat16 tensor still moves through DLPack, but a NumPy view of
# it, and kernels typed from NumPy, need ml_dtypes).
try:
    import ml_dtypes as _ml_dtypes
except ImportError:   # pragma: no cover - depends on the environment
    _ml_dtypes = None
bfloat16 = (Scalar("bfloat16", _ml_dtypes.bfloat16, "cf_bfloat16", kind="f")
            if _ml_dtypes is not None else None)
if bfloat16 is not None:
    scalar_types = scalar_types + (bfloat16,)

_BY_DTYPE = {t.dtype: t for t in scalar_types}

# Names accepted in strings, beyond what np.dtype() understands.
_NAMES = {
    "bool": bool_, "bool_": bool_, "boolean": bool_, "b1": bool_,
    "int8": int8, "int16": int16, "int32": int32, "int64": int64,
    "uint8": uint8, "uint16": uint16, "uint32": uint32, "uint64": uint64,
    "i1": int8, "i2": int16, "i4": int32, "i8": int64,
    "u1": uint8, "u2": uint16, "u4": uint32, "u8": uint64,
    "intp": intp, "uintp": uintp,
    "float16": float16, "float32": float32, "float64": float64,
    "f2": float16, "f4": float32, "f8": float64,
    "complex64": complex64, "complex128": complex128, "c8": complex64, "c16": complex128,
    "half": float16, "single": float32, "double": float64,
    "void": void, "none": void,
}
if bfloat16 is not None:
    _NAMES["bfloat16"] = _NAMES["bf16"] = bfloat16


def from_dtype(dtype):
    """Give the scalar type of a NumPy dtype.

    Parameters
    ----------
    dtype : dtype_like
        A NumPy dtype, or anything ``numpy.dtype`` accepts.

    Returns
    -------
    Scalar
        The scalar type.
    """
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError("not a NumPy dtype: %r (%s)" % (dtype, e)) from None
    try:
        return _BY_DTYPE[dt.newbyteorder("=")]
    except KeyError:
        raise TypeError("dtype %s has no cufunc type (supported: bool, integers, floats, "
                        "complex)" % dt) from None


def to_type(obj):
    """Give the cufunc type of a type-like object.

    Parameters
    ----------
    obj : object
        A type object, a NumPy dtype or scalar class, a Python number class (float -> float64,
        int -> int64, bool -> bool, complex -> complex128), a type name ('float32', 'f4',
        'float32[:, :]') or a Numba type (by its name).

    Returns
    -------
    Type
        The type.
    """
    if isinstance(obj, Type):
        return obj
    if isinstance(obj, str):
        try:
            rets, args = _c_parse("(" + obj + ")")
            if rets is None and len(args) == 1:
                return _from_parsed(args[0])
            raise SignatureError("not a single type: %r" % (obj,))
        except SignatureError:
            try:
                dt = np.dtype(obj)
            except UnicodeError:   # a lone surrogate: NumPy's raw UnicodeEncodeError otherwise
                raise SignatureError("not a type name: %s (it has a lone surrogate)"
                                     % ascii(obj[:60])) from None
            return from_dtype(dt)
    if obj is float:
        return float64
    if obj is int:
        return int64
    if obj is bool:
        return bool_
    if obj is complex:
        return complex128
    if obj is None:
        return void
    if isinstance(obj, np.dtype) or (isinstance(obj, type) and issubclass(obj, np.generic)):
        return from_dtype(obj)
    mod = type(obj).__module__ or ""
    if mod.startswith("numba"):
        # numba types print as their names: float32, int64, array(float32, 2d, C), none
        name = str(obj)
        if name in _NAMES:
            return _NAMES[name]
        ndim = getattr(obj, "ndim", None)
        dt = getattr(obj, "dtype", None)
        if ndim is not None and dt is not None:
            layout = "C" if getattr(obj, "layout", "A") == "C" else "A"
            return Array(to_type(dt), ndim, layout)
    raise TypeError("cannot make a cufunc type from %r" % (obj,))


def parse_signature(sig):
    """Parse a type signature.

    Accepts NumPy and Numba spellings ('f4(f4, f4)', 'void(f4[:], f4[:, :])', 'int64(int64,)'),
    a signature without a return type ('(f4, f4)': the return type is None), a Signature, or a
    tuple ``(return_type, [args])``.

    Parameters
    ----------
    sig : str or Signature or tuple
        The signature.

    Returns
    -------
    tuple
        ``(return_type, [argument types])``: 'float32(float32, float32)' gives
        ``(float32, [float32, float32])``.

    Raises
    ------
    SignatureError
        Pointing at the bad character.
    """
    if isinstance(sig, Signature):
        return sig.return_type, list(sig.args)
    if isinstance(sig, tuple) and len(sig) == 2 and isinstance(sig[1], (list, tuple)):
        ret = None if sig[0] is None else to_type(sig[0])
        return ret, [to_type(a) for a in sig[1]]
    if not isinstance(sig, str):
        raise TypeError("a signature is a string like 'float32(float32)' or a Signature, not %r"
                        % (sig,))
    rets, args = _c_parse(sig)
    if rets is None:
        ret = None
    elif not rets:
        ret = void
    elif len(rets) == 1:
        ret = _from_parsed(rets[0])
    else:
        ret = Tuple([_from_parsed(r) for r in rets])
    return ret, [_from_parsed(a) for a in args]


def _c_parse(text):
    """Parse a signature string with the C parser (src/signature.c, through cufunc._core):
    (returns, args) with returns None (not written), [] (void) or a list, each type a tuple
    (numpy dtype, ndim, layout). Errors become SignatureError with the position and a caret."""
    from . import _env
    if _env.core is None:
        _env.require_core("parsing the signature %r" % (text,))
    try:
        return _env.core.parse_type_signature(text)
    except (ValueError, TypeError) as exc:
        raise SignatureError(str(exc)) from None


def _from_parsed(t):
    dtype, ndim, layout = t
    scalar = from_dtype(dtype)
    # the kernel language knows 'C' (last axis ::1) and 'A'; an F-marked array is 'A' here
    return scalar if ndim == 0 else Array(scalar, ndim, "C" if layout == "C" else "A")
