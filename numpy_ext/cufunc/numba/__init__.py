"""cufunc.numba: Numba's namespace for what cufunc implements, so that a program written for
Numba's GPU ufuncs runs after changing only its import line::

    import cufunc.numba as numba                      # was: import numba
    from cufunc.numba import vectorize, cuda          # was: from numba import vectorize, cuda

Functions made here -- ``vectorize``, ``guvectorize``, ``cuda.jit(device=True)``,
``cuda.reduce`` / ``cuda.Reduce`` -- are cufunc's, made with ``typing="numba"``: their bodies
are translated with Numba's typing rules (integer operations in the machine integer, float
literals float64, return types unified over all returns, ...; docs/typing.md) and they are
called with Numba's rules (numba-cuda's ufunc mechanism: its loop choice, scalars converted to
the loop's types, a '()' gufunc argument given as a one-element array; docs/numba.md). The
functions of ``cufunc`` itself keep NumPy's meaning.

``target=`` may be 'cuda' (or 'gpu'), and also Numba's default 'cpu' or 'parallel': cufunc has
no CPU target, so such a ufunc runs on the GPU too (NumPy arrays in, NumPy arrays out, as a CPU
ufunc; Numba's CPU-only options, which do not change results, are accepted and ignored).
``jit`` / ``njit`` functions are plain Python on the host and device functions in bodies.
"""
from .. import types as _T
from ..guvectorize import guvectorize as _guvectorize
from ..vectorize import vectorize as _vectorize
import sys as _sys

from . import _cuda as cuda
from . import errors, types
from . import core  # noqa: F401 - numba.core.errors / numba.core.types

# The cuda namespace lives in _cuda.py and is registered as cufunc.numba.cuda: numba-cuda installs
# an import hook (_numba_cuda_redirector) that takes over every module whose name contains
# "numba.cuda" and recurses without end on one that is not Numba's, so that name must never reach
# the import machinery; found in sys.modules, `import cufunc.numba.cuda` works as usual.
_sys.modules[__name__ + ".cuda"] = cuda
from .types import (  # noqa: F401 - Numba's type objects and aliases
    b1, bool_, boolean, byte, c8, c16, char, complex64, complex128, double, f2, f4, f8,
    float16, float32, float64, float_, from_dtype, half, i1, i2, i4, i8, int8, int16, int32,
    int64, int_, intc, intp, long_, longlong, none, short, size_t, ssize_t, typeof, u1, u2, u4,
    u8, uchar, uint, uint8, uint16, uint32, uint64, uintc, uintp, ulong, ulonglong, ushort,
    void)
from .types import bool  # noqa: F401,A004 - Numba's top-level name

__all__ = ["vectorize", "guvectorize", "jit", "njit", "prange", "cuda", "types", "errors",
           "core", "from_dtype", "typeof"] + [
    n for n in types.__all__ if isinstance(getattr(types, n), (_T.Type,))]

_TARGETS = ("cuda", "gpu", "cpu", "parallel")
# Numba's CPU-target options: they change how a CPU ufunc runs, never its results
_CPU_ONLY = ("nogil", "boundscheck", "error_model", "locals", "looplift", "no_cpython_wrapper",
             "no_cfunc_wrapper", "no_rewrites", "parallel", "inline", "forceinline",
             "_nrt", "debug")


def _gpu_options(where, target, kws):
    if target not in _TARGETS:
        raise ValueError("%s: target=%r: cufunc.numba runs ufuncs on the GPU ('cuda'; 'cpu' and "
                         "'parallel' are taken as 'cuda')" % (where, target))
    if target in ("cpu", "parallel"):
        for k in _CPU_ONLY:
            kws.pop(k, None)
    return kws


def vectorize(ftylist_or_function=(), target="cpu", **kws):
    """Make a GPU ufunc with Numba's typing and call rules (Numba's ``vectorize``).

    ``cufunc.vectorize`` with ``typing='numba'``; see the module docstring for targets.

    Parameters
    ----------
    ftylist_or_function : list or str or callable, optional
        The signatures, or the function (without signatures: loops made per call's types).
    target : str, optional
        Numba's target; every target makes a GPU ufunc here.
    **kws
        Options as ``cufunc.vectorize`` takes them (``identity``, ``fastmath``, ``cache``,
        ``nopython``).

    Returns
    -------
    UFunc or callable
        The ufunc, or a decorator that makes one.
    """
    kws = _gpu_options("vectorize", target, kws)
    return _vectorize(ftylist_or_function, target="cuda", typing="numba", **kws)


def guvectorize(*args, target="cpu", **kws):
    """Make a GPU gufunc with Numba's typing and call rules (Numba's ``guvectorize``).

    Called as ``guvectorize(ftylist, layout, ...)`` or ``guvectorize(layout)``; it is
    ``cufunc.guvectorize`` with ``typing='numba'``.

    Parameters
    ----------
    *args
        The signatures and the layout, as Numba takes them.
    target : str, optional
        Numba's target; every target makes a GPU gufunc here.
    **kws
        Options as ``cufunc.guvectorize`` takes them.

    Returns
    -------
    GUFunc or callable
        The gufunc, or a decorator that makes one.
    """
    kws = _gpu_options("guvectorize", target, kws)
    return _guvectorize(*args, target="cuda", typing="numba", **kws)


def jit(signature_or_function=None, **options):
    """Make a helper function that bodies call (Numba's ``jit`` / ``njit``).

    The function runs as plain Python when called from Python, and is a device function (Numba's
    typing) when a vectorize, guvectorize or reduce body calls it.

    Parameters
    ----------
    signature_or_function : callable or str or list, optional
        The function, or signatures (accepted and ignored: they do not change results).
    **options
        Numba's CPU options, accepted and ignored.

    Returns
    -------
    DeviceFunction or callable
        The device function, or a decorator that makes one.
    """
    def wrap(fn):
        return cuda.jit(fn, device=True)
    if callable(signature_or_function) and hasattr(signature_or_function, "__code__"):
        return wrap(signature_or_function)
    return wrap


njit = jit
# numba.prange in host code: a range (the loop runs in order in CPython)
prange = range
