"""Results in the caller's array type (the deliver step of the call pipeline, numpy_ext/py_call.c).

A call whose inputs include a foreign device array returns its fresh results in that array's
library, without a copy:

=====================================  ===============================================
input (the first foreign device array)  result
=====================================  ===============================================
CuPy ``cupy.ndarray``                   ``cupy.from_dlpack(result)``
PyTorch ``torch.Tensor``                ``torch.from_dlpack(result)`` (same device, dtype)
JAX ``jax.Array``                       ``jax.dlpack.from_dlpack(result)``
Numba ``DeviceNDArray``                 ``numba.cuda.as_cuda_array(result)``
NumPy (every input on the host)         NumPy, as NumPy gives it
anything else                           a cufunc ``DeviceArray``
=====================================  ===============================================

The rule for mixed inputs: the **first** input (in argument order) whose type is one of those
libraries' device arrays decides, as ``__array_priority__`` does for NumPy subclasses; cufunc
DeviceArrays, NumPy arrays and scalars never decide. An explicit ``out=`` always wins: the result
is the out object itself. ``cuda.reduce(..., res=r)`` writes into ``r`` and returns None, as
Numba's does. ``out=`` with a JAX array is a TypeError: JAX arrays are immutable.

Wrapping goes through DLPack (Numba: the CUDA Array Interface), which carries the stream
handshake: the consumer names its current stream and cufunc's ``__dlpack__`` makes that stream
wait for the call's work, so ``torch.sin(hyp(t, t))`` needs no manual synchronisation. The
foreign result keeps the cufunc memory alive (the DLPack capsule, or the CAI owner, holds the
DeviceArray).

To get cufunc DeviceArrays whatever the inputs (code that wants one type), the RAPIDS spelling
(cuML's ``using_output_type``)::

    with cufunc.using_output_type("cufunc"):
        d = hyp(torch_tensor, torch_tensor)        # a cufunc DeviceArray
    cufunc.set_global_output_type("cufunc")         # the same, for every thread, until reset
    cufunc.set_global_output_type("input")          # the default: follow the inputs

The setting is a context variable (per thread and per asyncio task) over a process-wide default.

Cost: the C side looks each input's type up in one dict (type -> wrapper, filled here on the
first call with a new type, see :func:`wrapper_for`), then calls the wrapper once per result.
Nothing here imports a library: the wrapper of a type is taken from the module its input came
from, which ``sys.modules`` already holds.
"""
import contextlib
import contextvars
import sys

__all__ = ["using_output_type", "set_global_output_type", "get_output_type", "wrapper_for",
           "reader_for", "interface_for"]

# The values the C side reads (py_call.c): 0 follow the inputs, 1 cufunc DeviceArrays.
_KINDS = {"input": 0, "cufunc": 1}
_NAMES = {v: k for k, v in _KINDS.items()}
# The process-wide default, a one-element list the C side reads when the context variable is
# unset (None): a ContextVar's own default cannot change. Both, wrapper_for and reader_for reach
# the extension as hooks (registered by cufunc/__init__.py).
_global = [0]
_output_type = contextvars.ContextVar("cufunc_output_type", default=None)


def _code(kind):
    try:
        return _KINDS[kind]
    except (KeyError, TypeError):
        raise ValueError("output type must be one of %s, not %r"
                         % (", ".join(repr(k) for k in _KINDS), kind)) from None


def set_global_output_type(kind):
    """Set the process-wide type of results of calls on device arrays.

    Parameters
    ----------
    kind : {"input", "cufunc"}
        ``"input"`` (the default): results in the array type of the inputs (CuPy in, CuPy out;
        torch in, torch out). ``"cufunc"``: cufunc DeviceArrays whatever the device inputs.

    Notes
    -----
    A ``using_output_type`` block overrides it in its thread or task. NumPy inputs always give
    NumPy results.
    """
    _global[0] = _code(kind)


def get_output_type():
    """The output type in effect here.

    Returns
    -------
    str
        ``"input"`` or ``"cufunc"``: the innermost ``using_output_type`` block's, else the
        process-wide one (``set_global_output_type``).
    """
    v = _output_type.get()
    return _NAMES[_global[0] if v is None else v]


@contextlib.contextmanager
def using_output_type(kind):
    """Make the calls in a ``with`` block return results of one type.

    Parameters
    ----------
    kind : {"input", "cufunc"}
        ``"cufunc"``: DeviceArrays, whatever the device inputs; ``"input"``: the type of the
        inputs.

    Yields
    ------
    None
        Inside the block, results are of the type ``kind`` names.

    Examples
    --------
    ::

        with cufunc.using_output_type("cufunc"):
            r = hypot(torch_tensor, torch_tensor)    # a cufunc DeviceArray
    """
    token = _output_type.set(_code(kind))
    try:
        yield
    finally:
        _output_type.reset(token)


# ---- the wrapper of each foreign type --------------------------------------------------------

def _core_function(name):
    from ._env import core
    return getattr(core, name, None) if core is not None else None


def _torch(mod):
    """torch.from_dlpack does, per call, what this does once: it finds the current stream through
    torch.cuda.current_stream(f"cuda:{i}") (several microseconds of Python, as much as the rest
    of a one-element call). cufunc's C wrapper (_core._as_torch, py_interop.c) asks the raw-stream
    query PyTorch's own code generation uses, exports the result's capsule with that stream (the
    handshake) and hands it to torch._C._from_dlpack: no Python frame. The public function where
    PyTorch lacks them."""
    C = getattr(mod, "_C", None)
    if getattr(C, "_cuda_getCurrentRawStream", None) is None or \
            getattr(C, "_from_dlpack", None) is None:
        return mod.from_dlpack
    return _core_function("_as_torch") or mod.from_dlpack


def _cupy(mod):
    """cupy.from_dlpack costs about as much as the whole call (several microseconds of Python
    and a stream query). A fresh result is one contiguous allocation: CuPy gets it by address
    (_core._as_cupy, py_interop.c), as memory it does not own (UnownedMemory keeps the DeviceArray
    alive), after CuPy's current stream was made to wait for the call's work, which is what the
    DLPack handshake does; other results through cupy.from_dlpack."""
    try:
        mod.cuda.memory.UnownedMemory, mod.cuda.MemoryPointer, mod.ndarray
    except AttributeError:
        return mod.from_dlpack
    return _core_function("_as_cupy") or mod.from_dlpack


def _jax(mod):
    import jax.dlpack  # the input came from JAX: it is imported (jaxlib alone: JAX's own)
    return jax.dlpack.from_dlpack


def _numba(mod):
    # numba.cuda.cudadrv.devicearray.DeviceNDArray: only its device arrays (numba itself is
    # imported, since its array is here); as_cuda_array consumes the CAI and keeps the owner
    if "numba.cuda" not in sys.modules:
        return None
    return sys.modules["numba.cuda"].as_cuda_array


# root module name -> (the types that are device arrays, given the module, -> wrapper factory)
_LIBS = {
    "torch": ("torch", lambda m, tp: issubclass(tp, m.Tensor), _torch),
    "cupy": ("cupy", lambda m, tp: issubclass(tp, m.ndarray), _cupy),
    "jax": ("jax", None, _jax),
    "jaxlib": ("jaxlib", None, _jax),
    "numba": ("numba", lambda m, tp: tp.__name__ in ("DeviceNDArray", "MappedNDArray",
                                                   "DeviceRecord"), _numba),
}


def _is_jax_array(tp):
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(getattr(jax, "Array", None), type):
        return issubclass(tp, jax.Array)
    return tp.__name__ in ("ArrayImpl", "Array")


def _root(tp, table):
    """The root module name of the first class in tp's MRO that comes from a library in
    ``table`` (a subclass of torch.Tensor defined elsewhere is PyTorch's), or ''."""
    for c in getattr(tp, "__mro__", None) or (tp,):
        root = (getattr(c, "__module__", None) or "").partition(".")[0]
        if root in table:
            return root
    return ""


def wrapper_for(tp):
    """The callable that turns a cufunc DeviceArray result into an array of the library of type
    ``tp`` (an input's type), or None when ``tp`` is not a foreign device array type (results are
    cufunc DeviceArrays). Pure: it reads ``tp.__module__`` and ``sys.modules``, imports nothing
    the input did not come from. The C side caches the answer per type. A subclass of one of
    those types (defined anywhere) is its library's: the result is the library's base type."""
    root = _root(tp, _LIBS)
    lib = _LIBS.get(root)
    if lib is None:
        return None
    mod = sys.modules.get(lib[0])
    if mod is None:
        return None
    try:
        if root in ("jax", "jaxlib"):
            ok = _is_jax_array(tp)
        else:
            ok = lib[1](mod, tp)
    except (AttributeError, TypeError):
        return None
    return lib[2](mod) if ok else None


# ---- reading foreign inputs fast ---------------------------------------------------------------

def _torch_reads(mod, tp):
    # a subclass that defines its own interface is read through it
    return (issubclass(tp, mod.Tensor) and getattr(tp, "__cuda_array_interface__", None)
            is getattr(mod.Tensor, "__cuda_array_interface__", None))


def _cupy_reads(mod, tp):
    return (issubclass(tp, mod.ndarray) and getattr(tp, "__cuda_array_interface__", None)
            is getattr(mod.ndarray, "__cuda_array_interface__", None))


# root module name -> (the module, the types whose objects cufunc reads without their interface)
_READERS = {"torch": ("torch", _torch_reads), "cupy": ("cupy", _cupy_reads)}


def reader_for(tp):
    """Which of cufunc's C readers (numpy_ext/py_interop.c) reads objects of type ``tp``:
    ``"torch"`` (a tensor's C-level attributes, as PyTorch's __cuda_array_interface__ would
    describe it, with PyTorch's current stream), ``"cupy"`` (a cupy.ndarray's C-level getters,
    as its interface would, with CuPy's current stream), or None (the ``__cuda_array_interface__``
    attribute). Pure, imports nothing; the C side caches the answer per type. A reader hands an
    object it does not describe as the library does (a CPU or sparse tensor, one requiring grad,
    a dtype cufunc does not take) to the library's own interface, and its answer or error."""
    root = _root(tp, _READERS)
    lib = _READERS.get(root)
    mod = sys.modules.get(lib[0]) if lib else None
    if mod is None:
        return None
    try:
        return root if lib[1](mod, tp) else None
    except (AttributeError, TypeError):
        return None


def interface_for(tp):
    """The interface cufunc reads from objects of type ``tp``, as a callable (object -> the
    interface dict: ``_core._foreign_interface``, the C reader's view written out as a version 3
    interface with its stream), or None when cufunc reads the ``__cuda_array_interface__``
    attribute itself. For tests and diagnostics: a call reads the view without any dict."""
    if reader_for(tp) is None:
        return None
    return _core_function("_foreign_interface")


def is_immutable(tp):
    """Whether arrays of type ``tp`` cannot be written (JAX): out= with one is a TypeError."""
    root = (getattr(tp, "__module__", None) or "").partition(".")[0]
    return root in ("jax", "jaxlib")
