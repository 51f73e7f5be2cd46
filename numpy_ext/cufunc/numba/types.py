"""``numba.types`` as cufunc.numba spells it: the type objects a signature names.

    from cufunc.numba import types
    types.float32(types.float32, types.int64)         # a Signature
    types.float64[:, :]                               # a 2-d array type
    types.Array(types.float32, 2, "C")                # the same spelled as Numba's class
    types.void(types.float32[:], types.float32[:])    # a gufunc's type-list entry

They are cufunc's type objects (cufunc.types): what cufunc's decorators take, under their Numba
names and aliases.
"""
from .. import types as _T
from ..types import (  # noqa: F401 - re-exported names
    Signature, SignatureError, Type, Void,
    b1, bool_, boolean, c8, c16, complex64, complex128, f2, f4, f8, float16, float32, float64,
    i1, i2, i4, i8, int8, int16, int32, int64, intp, u1, u2, u4, u8, uint8, uint16, uint32,
    uint64, uintp, void)

__all__ = [
    "Type", "Signature", "SignatureError", "Array", "Tuple", "UniTuple", "Boolean", "Integer",
    "Float", "Complex", "NoneType", "from_dtype", "typeof",
    "boolean", "bool_", "b1", "bool",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "intp", "uintp", "intc", "uintc",
    "ssize_t", "size_t", "int_", "uint", "long_", "ulong", "longlong", "ulonglong", "char",
    "uchar", "byte", "short", "ushort",
    "float16", "float32", "float64", "f2", "f4", "f8", "half", "float_", "double",
    "complex64", "complex128", "c8", "c16", "void", "none",
]

# Numba's aliases of the C and NumPy names (numba.types on a 64-bit platform)
bool = boolean  # noqa: A001 - Numba's name
none = void
intc, uintc = int32, uint32
ssize_t, size_t = intp, uintp
int_, uint = intp, uintp
long_, ulong, longlong, ulonglong = int64, uint64, int64, uint64
char, uchar, byte = int8, uint8, uint8
short, ushort = int16, uint16
half, float_, double = float16, float32, float64

# Numba's type classes, for isinstance tests on the type objects
Boolean = Integer = Float = Complex = _T.Scalar
NoneType = _T.Void


def Array(dtype, ndim, layout="A", readonly=False):  # noqa: N802 - Numba's class name
    """Numba's ``types.Array(dtype, ndim, layout)``: layout 'C' (last axis contiguous), 'A' or
    'F' (any layout: cufunc's kernels take any strides)."""
    if layout not in ("A", "C", "F"):
        raise ValueError("Array layout must be 'C', 'F' or 'A', not %r" % (layout,))
    return _T.Array(_T.to_type(dtype), ndim, "C" if layout == "C" else "A", readonly)


def Tuple(types):  # noqa: N802 - Numba's class name
    """Numba's ``types.Tuple([t0, t1, ...])``: several return values."""
    return _T.Tuple([_T.to_type(t) for t in types])


def UniTuple(dtype, count):  # noqa: N802 - Numba's class name
    """Numba's ``types.UniTuple(dtype, count)``: `count` values of one type."""
    return _T.Tuple([_T.to_type(dtype)] * int(count))


def from_dtype(dtype):
    """Give the type of a NumPy dtype (Numba's ``numba.from_dtype``).

    Parameters
    ----------
    dtype : dtype_like
        The dtype.

    Returns
    -------
    Scalar
        The type.
    """
    return _T.from_dtype(dtype)


def typeof(value):
    """Give the type Numba gives a value (``numba.typeof``).

    A NumPy array's Array type (layout 'C' when C-contiguous), a NumPy scalar's dtype, Python
    bool/int/float/complex as boolean, int64, float64, complex128; device arrays by their
    ``__cuda_array_interface__``.

    Parameters
    ----------
    value : object
        The value.

    Returns
    -------
    Type
        Its type.
    """
    import builtins
    import numpy as np
    if isinstance(value, (builtins.bool, np.bool_)):
        return boolean
    if isinstance(value, np.generic):
        return _T.from_dtype(value.dtype)
    if isinstance(value, builtins.int):
        return int64
    if isinstance(value, builtins.float):
        return float64
    if isinstance(value, builtins.complex):
        return complex128
    if isinstance(value, np.ndarray) or hasattr(value, "__cuda_array_interface__"):
        dt = np.dtype(value.dtype)
        ndim = len(value.shape)
        if ndim == 0:
            return _T.from_dtype(dt)
        contiguous = (value.flags.c_contiguous if isinstance(value, np.ndarray)
                      else value.__cuda_array_interface__.get("strides") is None)
        return _T.Array(_T.from_dtype(dt), ndim, "C" if contiguous else "A")
    raise ValueError("cannot determine the cufunc.numba type of %r" % (value,))
