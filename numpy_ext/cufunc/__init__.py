"""cufunc: GPU ufuncs, gufuncs and reductions from plain Python functions, compiled with NVRTC and
run through the CUDA Driver API. The API mirrors Numba's CUDA target:

    from cufunc import cuda, float32
    d = cuda.to_device(np.arange(10, dtype=np.float32))

``import cufunc`` needs only NumPy: the C extension (cufunc._core) and the CUDA libraries are
loaded when first needed, and functions that need a GPU raise CudaSupportError without one.
"""

import importlib.util as _importlib_util

from . import errors
from .errors import CompileError, CudaAPIError, CudaSupportError, TypingError, UnsupportedError

# The type objects (float32, int64[:], ...), written by the kernel-language side.
if _importlib_util.find_spec(__name__ + ".types") is not None:
    from . import types
    from .types import *  # noqa: F401,F403 - the public names listed in types.__all__

from . import cuda
from . import _env

# One home for the version: CUFUNC_VERSION_STRING in include/cufunc/cufunc.h (cufunc._env reads it)
__version__ = _env.version
# Results in the caller's array type (CuPy, PyTorch, JAX, Numba in: the same out), or always
# cufunc DeviceArrays: see cufunc._interop.
from ._interop import get_output_type, set_global_output_type, using_output_type

__all__ = ["__version__", "cuda", "errors", "CompileError", "CudaAPIError", "CudaSupportError",
           "TypingError", "UnsupportedError", "vectorize", "guvectorize", "UFunc", "GUFunc",
           "using_output_type", "set_global_output_type", "get_output_type"]


def _register_hooks(core):
    """Register with the C extension what it calls in the package (numpy_ext/py_hooks.c): it
    imports no module of the package by name. The exception classes are registered by _env, which
    imports the extension; the rest lives in modules above _env, so here. _devarray, _twins and
    _dask are registered by loaders, which import them when the extension first needs them (an
    array method, an operator on DeviceArrays, a dask array): `import cufunc` loads none of them,
    and _dask imports dask."""
    from . import _interop

    def devarray():
        from . import _devarray
        return _devarray

    def twins():
        from . import _twins
        return _twins

    def dask():
        from . import _dask
        return _dask

    core._register_hooks(
        interop_wrapper_for=_interop.wrapper_for, interop_reader_for=_interop.reader_for,
        interop_output_type=_interop._output_type, interop_global_output_type=_interop._global)
    core._register_lazy_hooks(
        devarray_view=lambda: devarray().view, devarray_split=lambda: devarray().split,
        devarray_squeeze=lambda: devarray().squeeze,
        devarray_get_ipc_handle=lambda: devarray().get_ipc_handle,
        twins_hooks=lambda: twins()._hooks, twins_fast=lambda: twins()._FAST,
        twins_hook_ufuncs=lambda: twins()._hook_ufuncs,
        dask_array_ufunc=lambda: dask().array_ufunc, dask_reduce_all=lambda: dask().reduce_all)


if _env.core is not None:
    _register_hooks(_env.core)
    from ._core import GUFunc, UFunc
    from .guvectorize import guvectorize
    from .vectorize import vectorize
else:
    def vectorize(*args, **kwargs):
        """Unavailable: cufunc's C extension could not be imported (cufunc._env.core_error says why)."""
        _env.require_core("cufunc.vectorize")

    def guvectorize(*args, **kwargs):
        """Unavailable: cufunc's C extension could not be imported (cufunc._env.core_error says why)."""
        _env.require_core("cufunc.guvectorize")
    UFunc = GUFunc = None
if "types" in globals():
    __all__ += ["types"] + list(types.__all__)
