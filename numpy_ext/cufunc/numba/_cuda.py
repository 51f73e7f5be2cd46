"""``numba.cuda`` as cufunc.numba spells it (imported as cufunc.numba.cuda; the file has another
name because of numba-cuda's import hook, see __init__.py): the host API of cufunc.cuda (devices, streams,
events, device arrays, pinned/mapped/managed memory, IPC) under Numba's names and call rules, and
the device-side names cufunc compiles: ``jit(device=True)`` device functions, ``reduce`` /
``Reduce`` and ``local.array``, all translated with Numba's typing rules.

What numba.cuda has for ``@cuda.jit`` kernels (threadIdx, grid, shared, atomic, syncthreads,
warp intrinsics, compile_ptx, ...) cufunc does not compile: asking for those names raises an
AttributeError that says what to use instead (docs/numba.md).
"""
import contextlib
import types as _pytypes

import numpy as np

from .. import _options
from .. import cuda as _cuda
from .. import reduction as _reduction
from ..cuda import *  # noqa: F401,F403 - the host API, as cufunc.cuda has it
from ..cuda import __all__ as _cuda_all
from ..errors import CudaAPIError, CudaSupportError, UnsupportedError
from . import types  # noqa: F401 - numba.cuda.types

__all__ = sorted(set(_cuda_all) - {"vectorize", "guvectorize"} | {
    "jit", "reduce", "Reduce", "local", "types", "device_array", "pinned_array",
    "from_cuda_array_interface", "list_devices", "is_float16_supported", "is_supported_version",
    "require_context", "profile_start", "profile_stop", "profiling", "CudaSupportError",
    "CudaAPIError", "cudadrv", "devicearray"})

_KERNELS = ("cufunc compiles no @cuda.jit kernels: write the loop as a ufunc (vectorize), a "
            "gufunc (guvectorize) or a reduction (cuda.reduce) from cufunc.numba, or bring the "
            "kernel as CUDA C (cufunc.cuda.RawKernel / compile_source, or CuPy's RawKernel); "
            "see docs/numba.md")


def jit(signature_or_function=None, device=False, **options):
    """Make a device function with Numba's typing (``cuda.jit(device=True)``).

    It is translated with Numba's typing rules when a vectorize, guvectorize or reduce body calls
    it, and runs as plain Python when called from Python. ``cuda.jit`` kernels (``device=False``)
    are an UnsupportedError that says what to use instead.

    Parameters
    ----------
    signature_or_function : callable or str or list, optional
        The function, or signatures.
    device : bool, optional
        Must be True.
    **options
        Numba's options (``inline``, ``fastmath``, ``debug``, ``opt``, ``lineinfo``, ``cache``,
        ``forceinline``), accepted.

    Returns
    -------
    DeviceFunction or callable
        The device function, or a decorator that makes one.
    """
    if not device:
        raise UnsupportedError(_KERNELS)
    return _cuda.jit(signature_or_function, device=True, typing="numba", **options)


class Reduce(_reduction.Reduce):
    """A GPU reduction with Numba's typing rules (Numba's ``cuda.Reduce``).

    Called as ``cufunc.cuda.Reduce`` is: ``r(arr, size=None, res=None, init=0, stream=0)``.

    Parameters
    ----------
    functor : callable
        The binary function.
    **options
        As ``cufunc.cuda.Reduce`` takes them.
    """

    def __new__(cls, functor, **options):
        return super().__new__(cls, functor, typing="numba", **options)

    def __init__(self, functor, **options):
        super().__init__(functor, typing="numba", **options)


def reduce(functor, **options):
    """Make a GPU reduction with Numba's typing rules (Numba's ``cuda.reduce``).

    Usable as a decorator.

    Parameters
    ----------
    functor : callable
        The binary function.
    **options
        ``nopython=True`` is accepted with a RedundantOptionWarning.

    Returns
    -------
    Reduce
        The reduction.
    """
    _options.check("cuda.reduce", options)   # warns at the user's line
    return Reduce(functor)


def __getattr__(name):
    if name == "local":
        from ..lang import local
        globals()["local"] = local
        return local
    if name in _KERNEL_NAMES or name.rstrip("1234x").endswith(_VECTOR_TYPES):
        raise AttributeError("numba.cuda.%s belongs to @cuda.jit kernels: %s" % (name, _KERNELS))
    raise AttributeError("module 'cufunc.numba.cuda' has no attribute %r" % name)


_VECTOR_TYPES = ("char", "short", "int", "long", "longlong", "uchar", "ushort", "uint", "ulong",
                 "ulonglong", "float", "double", "int8", "int16", "int32", "int64", "uint8",
                 "uint16", "uint32", "uint64", "float32", "float64")
_KERNEL_NAMES = frozenset("""
threadIdx blockIdx blockDim gridDim grid gridsize laneid warpsize syncthreads syncthreads_and
syncthreads_count syncthreads_or syncwarp shared const atomic cg threadfence threadfence_block
threadfence_system shfl_sync shfl_up_sync shfl_down_sync shfl_xor_sync all_sync any_sync
eq_sync ballot_sync match_any_sync match_all_sync activemask lanemask_lt nanosleep selp brev clz
ffs popc fma cbrt fp16 libdevice random declare_device compile compile_ptx
compile_for_current_device compile_ptx_for_current_device In Out InOut set_memory_manager
""".split())


# ---- where Numba's host API differs from cufunc.cuda's ----------------------------------------

def _contiguous_strides(shape, itemsize, order):
    strides, acc = [0] * len(shape), itemsize
    for k in (reversed(range(len(shape))) if order == "C" else range(len(shape))):
        strides[k] = acc
        acc *= max(shape[k], 1)
    return tuple(strides)


def _order_for(shape, dtype, strides, order):
    """Numba's strides= argument: the C or F layout it names (other strides: NotImplementedError,
    cufunc allocates contiguous arrays only)."""
    if strides is None:
        return order
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    strides = (strides,) if isinstance(strides, (int, np.integer)) else tuple(strides)
    item = np.dtype(dtype).itemsize
    for o in ("C", "F"):
        if _contiguous_strides(shape, item, o) == strides:
            return o
    raise NotImplementedError("strides=%r: cufunc.numba allocates C- or F-contiguous arrays only "
                              "(C order here is %r); give order= instead"
                              % (strides, _contiguous_strides(shape, item, "C")))


def device_array(shape, dtype=np.float64, strides=None, order="C", stream=0):
    """Allocate a device array without initialising it (Numba's ``cuda.device_array``).

    Parameters
    ----------
    shape : int or tuple of int
        The shape.
    dtype : dtype_like, optional
        The element type.
    strides : tuple of int, optional
        Contiguous strides only (C or Fortran order); else give ``order``.
    order : {'C', 'F'}, optional
        The memory layout.
    stream : Stream or int, optional
        The stream the allocation is ordered on.

    Returns
    -------
    DeviceNDArray
        The array.
    """
    return _cuda.device_array(shape, dtype, _order_for(shape, dtype, strides, order), stream)


def pinned_array(shape, dtype=np.float64, strides=None, order="C"):
    """Allocate a NumPy array in page-locked host memory (Numba's ``cuda.pinned_array``).

    Parameters
    ----------
    shape : int or tuple of int
        The shape.
    dtype : dtype_like, optional
        The element type.
    strides : tuple of int, optional
        Contiguous strides only (C or Fortran order); else give ``order``.
    order : {'C', 'F'}, optional
        The memory layout.

    Returns
    -------
    numpy.ndarray
        The array (uninitialised).
    """
    return _cuda.pinned_array(shape, dtype, _order_for(shape, dtype, strides, order))


class _Interface:
    def __init__(self, desc, owner):
        self.__cuda_array_interface__ = desc
        self._owner = owner


def from_cuda_array_interface(desc, owner=None, sync=True):
    """View the memory a CUDA Array Interface dict describes as a device array.

    Numba's ``cuda.from_cuda_array_interface``.

    Parameters
    ----------
    desc : dict
        A ``__cuda_array_interface__`` dict.
    owner : object, optional
        The owner of the memory, kept alive by the array.
    sync : bool, optional
        Synchronise the stream the interface names first.

    Returns
    -------
    DeviceNDArray
        The view.
    """
    if not isinstance(desc, dict):
        raise TypeError("from_cuda_array_interface: desc must be a __cuda_array_interface__ "
                        "dict, not %s" % type(desc).__name__)
    return _cuda.as_cuda_array(_Interface(desc, owner), sync=sync)


def list_devices():
    """Give the CUDA devices (Numba's ``cuda.list_devices()``).

    Returns
    -------
    list of Device
        One per device.
    """
    return list(_cuda.gpus)


def is_float16_supported():
    """Tell whether float16 works in kernel bodies.

    Returns
    -------
    bool
        True: it does in cufunc on every supported device.
    """
    return True


def is_supported_version():
    """Tell whether the CUDA toolkit is one cufunc supports.

    Returns
    -------
    bool
        True: cufunc checks NVRTC when it compiles.
    """
    return True


def require_context(fn):
    """Make sure a CUDA context exists when a function runs (Numba's decorator).

    cufunc's calls make one when they need it, so the function is returned as it is.

    Parameters
    ----------
    fn : callable
        The function.

    Returns
    -------
    callable
        ``fn`` itself.
    """
    return fn


def profile_start():
    """Start the profiler (Numba's cuProfilerStart): a no-op here."""


def profile_stop():
    """Stop the profiler (Numba's cuProfilerStop): a no-op here."""


@contextlib.contextmanager
def profiling():
    """Profile a block (Numba's ``profiling()``): a no-op here.

    Profile the whole run with Nsight Systems instead.

    Yields
    ------
    None
        The block runs unchanged.
    """
    yield


def _is_device_array(obj):
    return isinstance(obj, _cuda.DeviceNDArray) if hasattr(_cuda, "DeviceNDArray") else False


# numba.cuda.cudadrv.devicearray.DeviceNDArray and friends, as attribute paths
devicearray = _pytypes.SimpleNamespace(
    DeviceNDArray=getattr(_cuda, "DeviceNDArray", None),
    DeviceRecord=None, is_cuda_ndarray=_is_device_array,
    MappedNDArray=_cuda.MappedNDArray, ManagedNDArray=_cuda.ManagedNDArray)
cudadrv = _pytypes.SimpleNamespace(
    devicearray=devicearray,
    driver=_pytypes.SimpleNamespace(CudaAPIError=CudaAPIError, CudaSupportError=CudaSupportError),
    error=_pytypes.SimpleNamespace(CudaSupportError=CudaSupportError))
