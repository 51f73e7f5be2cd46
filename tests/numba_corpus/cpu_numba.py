"""Numba's GPU ufunc API served by Numba's CPU target, to check the corpus programs without a GPU.

The corpus runner installs this module as ``numba`` (mode ``numba-cpu``): ``vectorize`` and
``guvectorize`` with ``target='cuda'`` compile for the CPU, ``cuda.jit(device=True)`` becomes
``numba.njit``, ``cuda.reduce`` folds with a jitted binary function, and device arrays are host
arrays behind the DeviceNDArray methods the programs call. Numba's type inference is the same on
both targets, so a program that types here types under numba-cuda; what this cannot show is the
CUDA ufunc mechanism itself (its scalar conversions and launch rules), which only the GPU run
compares. Its results are not part of the corpus table.
"""

import contextlib
import functools

import numpy as np
import numba as _numba

__all__ = list(getattr(_numba, "__all__", ())) + ["cuda", "vectorize", "guvectorize"]


def __getattr__(name):
    # Types (float32, f4, void, ...), numba.types and the rest come from the real module.
    return getattr(_numba, name)


class DeviceArray:
    """A host array standing for a device array (the methods the corpus programs use)."""

    def __init__(self, ary):
        self._ary = ary

    shape = property(lambda self: self._ary.shape)
    dtype = property(lambda self: self._ary.dtype)
    size = property(lambda self: self._ary.size)
    ndim = property(lambda self: self._ary.ndim)
    strides = property(lambda self: self._ary.strides)

    def __len__(self):
        return len(self._ary)

    def copy_to_host(self, ary=None, stream=0):
        if ary is None:
            return self._ary.copy()
        ary[...] = self._ary
        return ary

    def copy_to_device(self, ary, stream=0):
        self._ary[...] = _host(ary)


def _host(x):
    return x._ary if isinstance(x, DeviceArray) else x


def _is_device(x):
    return isinstance(x, DeviceArray)


def _call(ufunc, args, out, scalar_retry):
    """Call a NumPy (g)ufunc on the host arrays behind device arrays, Numba-CUDA style: a device
    input gives a device result; out= may be a device array."""
    on_device = any(_is_device(a) for a in args) or _is_device(out)
    host_args = [_host(a) for a in args]
    kwargs = {} if out is None else {"out": _host(out)}
    try:
        result = ufunc(*host_args, **kwargs)
    except TypeError:
        if not scalar_retry:
            raise
        # Numba's CUDA ufuncs convert a Python scalar to the loop's type; NumPy refuses a float
        # for an integer loop. Retry with scalars cast to the first array's dtype.
        arrays = [a for a in host_args if isinstance(a, np.ndarray)]
        if arrays:
            types = [arrays[0].dtype] * len(host_args)
        else:
            types = [np.dtype(c) for c in ufunc.types[0].split("->")[0]]
        host_args = [a if isinstance(a, np.ndarray) else t.type(a)
                     for a, t in zip(host_args, types)]
        result = ufunc(*host_args, **kwargs)
    if out is not None:
        return out
    if on_device:
        return DeviceArray(np.asarray(result))
    return result


class _UfuncWrapper:
    def __init__(self, ufunc, scalar_retry):
        self._ufunc = ufunc
        self._scalar_retry = scalar_retry
        functools.update_wrapper(self, ufunc, updated=())

    def __call__(self, *args, out=None, stream=0):
        return _call(self._ufunc, args, out, self._scalar_retry)

    @property
    def types(self):
        return self._ufunc.types


def _compile_options(kwargs):
    return {k: v for k, v in kwargs.items() if k in ("nopython", "fastmath", "cache")}


def vectorize(ftylist_or_function=(), **kwargs):
    if callable(ftylist_or_function) and not isinstance(ftylist_or_function, (str, list, tuple)):
        return _UfuncWrapper(_numba.vectorize(**_compile_options(kwargs))(ftylist_or_function),
                             True)
    sigs = ftylist_or_function
    if isinstance(sigs, str):
        sigs = [sigs]

    def wrap(func):
        return _UfuncWrapper(_numba.vectorize(sigs, **_compile_options(kwargs))(func), True)
    return wrap


def guvectorize(*args, **kwargs):
    def wrap(func):
        return _UfuncWrapper(_numba.guvectorize(*args, **_compile_options(kwargs))(func), False)
    return wrap


class _Stream:
    def synchronize(self):
        pass

    @contextlib.contextmanager
    def auto_synchronize(self):
        yield self


class _Reduce:
    def __init__(self, functor):
        op = _numba.njit(functor)

        @_numba.njit
        def fold(a, init, use_init):
            acc = a[0]
            for i in range(1, a.shape[0]):
                acc = op(acc, a[i])
            if use_init:
                acc = op(acc, init)
            return acc
        self._fold = fold

    def __call__(self, arr, size=None, res=None, init=0, stream=0):
        a = np.ascontiguousarray(_host(arr)).ravel()
        if size is not None:
            a = a[:size]
        if a.size == 0:
            value = a.dtype.type(init)
        else:
            value = self._fold(a, a.dtype.type(init), init != 0)
        if res is not None:
            _host(res)[0] = value
            return None
        return value


class _CudaNamespace:
    """The parts of numba.cuda the corpus programs use."""

    DeviceNDArray = DeviceArray

    @staticmethod
    def jit(func_or_sig=None, device=False, inline=False, **kwargs):
        if not device:
            raise NotImplementedError("the CPU check serves device functions, not @cuda.jit kernels")
        if callable(func_or_sig) and not isinstance(func_or_sig, str):
            return _numba.njit(func_or_sig)
        if func_or_sig is None:
            return _numba.njit
        return _numba.njit(func_or_sig)

    @staticmethod
    def reduce(functor):
        return _Reduce(functor)

    Reduce = reduce

    @staticmethod
    def to_device(obj, stream=0, copy=True, to=None):
        ary = np.array(_host(obj), copy=True)
        if not copy:
            ary = np.empty_like(ary)
        return DeviceArray(ary)

    @staticmethod
    def device_array(shape, dtype=np.float64, strides=None, order='C', stream=0):
        return DeviceArray(np.empty(shape, dtype=dtype, order=order))

    @staticmethod
    def device_array_like(ary, stream=0):
        return DeviceArray(np.empty_like(_host(ary)))

    @staticmethod
    def stream():
        return _Stream()

    @staticmethod
    @contextlib.contextmanager
    def pinned(*arylist):
        yield

    @staticmethod
    def is_available():
        return False

    @staticmethod
    def synchronize():
        pass


cuda = _CudaNamespace()
