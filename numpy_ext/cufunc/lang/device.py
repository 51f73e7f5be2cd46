"""Device functions (cuda.jit(device=True)) and per-thread local arrays (cuda.local.array)."""

import functools

import numpy as np

from .. import _options
from .. import types as T
from ..errors import UnsupportedError

__all__ = ["DeviceFunction", "jit", "local"]


def _normalize_signatures(sig):
    if sig is None:
        return None
    if isinstance(sig, (list,)):
        sigs = sig
    else:
        sigs = [sig]
    out = []
    for s in sigs:
        ret, args = T.parse_signature(s)
        out.append((ret, tuple(args)))
    return out


# cufunc.lang.translate, registered by the package when it is imported (always before a
# DeviceFunction can exist): this module stays below the translator, which reads DeviceFunction.
_translate = None


class DeviceFunction:
    """A Python function usable from kernel bodies, like Numba's cuda.jit(device=True).

    It is translated on demand when a body calls it, once per combination of argument types
    (or with its fixed signature, the arguments being converted to it). Called from Python it
    runs the original function, so a body can be checked in CPython on NumPy scalars."""

    def __init__(self, py_func, signatures=None, **options):
        if isinstance(py_func, DeviceFunction):
            py_func = py_func.py_func
        if not callable(py_func) or not hasattr(py_func, "__code__"):
            raise TypeError("cuda.jit(device=True) decorates a Python function, not %r"
                            % (py_func,))
        self.py_func = py_func
        self.signatures = _normalize_signatures(signatures)
        self.options = dict(options)
        functools.update_wrapper(self, py_func)

    def __call__(self, *args, **kwargs):
        return self.py_func(*args, **kwargs)

    def __repr__(self):
        return "<cufunc device function %s>" % getattr(self.py_func, "__qualname__", "?")

    def translate(self, signature=None, fastmath=None, typing="numpy"):
        """The TranslationResult for a signature (a string, Signature or argument-type list);
        without one, the function's only declared signature. typing: "numpy" or "numba"
        (called from a body, the function takes the typing of that body's translation)."""
        ret, args = self._resolve(signature)
        fm = self.options.get("fastmath", False) if fastmath is None else fastmath
        return _translate(self.py_func, args, ret, fastmath=bool(fm), typing=typing,
                          debug=bool(self.options.get("debug", False)))

    def inspect_cuda(self, signature=None):
        """The generated CUDA C for a signature (see translate())."""
        return self.translate(signature).source

    def _resolve(self, signature):
        if signature is None:
            if self.signatures and len(self.signatures) == 1:
                return self.signatures[0]
            raise TypeError("%s: give the signature to inspect, e.g. 'float32(float32)'"
                            % self.py_func.__qualname__)
        if isinstance(signature, (list, tuple)) and not (
                len(signature) == 2 and isinstance(signature[1], (list, tuple))):
            return None, [T.to_type(a) for a in signature]
        ret, args = T.parse_signature(signature)
        return ret, args


def jit(signature_or_function=None, device=False, **options):
    """cufunc's cuda.jit: device functions only (``device=True``), with or without a signature:

        @cuda.jit(device=True)
        def f(x, y): ...
        @cuda.jit('float32(float32, float32)', device=True)
        def g(x, y): ...
        h = cuda.jit(py_function, device=True)

    Options Numba accepts (inline, fastmath, debug, opt, lineinfo, cache) are accepted; fastmath
    is used by inspect_cuda, the others have no effect."""
    if not device:
        raise UnsupportedError(
            "cufunc.cuda.jit makes device functions only: use cuda.jit(device=True). For "
            "kernels over arrays use cufunc.vectorize / guvectorize.")
    known = {"inline", "fastmath", "debug", "opt", "lineinfo", "cache", "forceinline"}
    # unknown options: a TypeError naming them; nopython=True: a warning that it is redundant
    _options.check("cuda.jit", options, named=("device",), accepted=known)
    options = {k: v for k, v in options.items() if k in known}
    if callable(signature_or_function) and hasattr(signature_or_function, "__code__"):
        return DeviceFunction(signature_or_function, None, **options)
    if isinstance(signature_or_function, DeviceFunction):
        return DeviceFunction(signature_or_function.py_func, None, **options)
    sigs = signature_or_function

    def decorate(func):
        return DeviceFunction(func, sigs, **options)

    _normalize_signatures(sigs)  # fail early on a bad signature
    return decorate


class _Local:
    """The namespace ``cuda.local``: per-thread arrays in kernel bodies."""

    __slots__ = ()

    @staticmethod
    def array(shape, dtype):
        """Make a per-thread array in a kernel body.

        In plain Python it returns a NumPy array of zeros, so bodies also run in CPython.

        Parameters
        ----------
        shape : int or tuple of int
            The shape, a constant.
        dtype : type or dtype_like
            The element type (a cufunc type or a NumPy dtype).

        Returns
        -------
        array
            The array (a NumPy array in plain Python).
        """
        try:
            dt = T.to_type(dtype).dtype
        except TypeError:
            dt = np.dtype(dtype)
        return np.zeros(shape, dtype=dt)

    def __repr__(self):
        return "<cufunc cuda.local>"


local = _Local()


class _Const:
    """The namespace ``cuda.const``: constant tables in kernel bodies."""

    __slots__ = ()

    @staticmethod
    def array_like(ary):
        """Name a global NumPy array as a constant table in a kernel body.

        That is what a captured global NumPy array already is (read-only). In plain Python it returns
        the array.

        Parameters
        ----------
        ary : numpy.ndarray
            A global NumPy array.

        Returns
        -------
        numpy.ndarray
            ``ary``.
        """
        return ary


const = _Const()
