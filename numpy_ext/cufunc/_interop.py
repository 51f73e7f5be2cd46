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
           "interface_for"]

# The values the C side reads (py_call.c): 0 follow the inputs, 1 cufunc DeviceArrays.
_KINDS = {"input": 0, "cufunc": 1}
_NAMES = {v: k for k, v in _KINDS.items()}
# The process-wide default, a one-element list the C side reads when the context variable is
# unset (None): a ContextVar's own default cannot change.
_global = [0]
_output_type = contextvars.ContextVar("cufunc_output_type", default=None)


def _code(kind):
    try:
        return _KINDS[kind]
    except (KeyError, TypeError):
        raise ValueError("output type must be one of %s, not %r"
                         % (", ".join(repr(k) for k in _KINDS), kind)) from None


def set_global_output_type(kind):
    """Set the process-wide output type: ``"input"`` (results in the type of the inputs, the
    default) or ``"cufunc"`` (cufunc DeviceArrays for device inputs). A ``using_output_type``
    block overrides it."""
    _global[0] = _code(kind)


def get_output_type():
    """The output type in effect here: ``"input"`` or ``"cufunc"``."""
    v = _output_type.get()
    return _NAMES[_global[0] if v is None else v]


@contextlib.contextmanager
def using_output_type(kind):
    """A block whose calls return ``kind`` results: ``"cufunc"`` (DeviceArrays, whatever the
    device inputs) or ``"input"`` (the type of the inputs)."""
    token = _output_type.set(_code(kind))
    try:
        yield
    finally:
        _output_type.reset(token)


# ---- the wrapper of each foreign type --------------------------------------------------------

def _torch(mod):
    """torch.from_dlpack does, per call, what this does once: it finds the current stream through
    torch.cuda.current_stream(f"cuda:{i}") (several microseconds of Python, as much as the rest
    of a one-element call). With the raw-stream query PyTorch's own code generation uses, the
    same handshake costs two C calls; the public function where PyTorch lacks them."""
    C = getattr(mod, "_C", None)
    raw = getattr(C, "_cuda_getCurrentRawStream", None)
    take = getattr(C, "_from_dlpack", None)
    if raw is None or take is None:
        return mod.from_dlpack

    def from_cufunc(d):
        s = raw(d.__dlpack_device__()[1])
        # as torch.from_dlpack: the legacy default stream is 1 in the protocol (PyTorch's
        # default stream, 0, is the legacy one); the legacy capsule every PyTorch version takes
        return take(d.__dlpack__(stream=s if s else 1))
    return from_cufunc


def _cupy(mod):
    """cupy.from_dlpack costs about as much as the whole call (several microseconds of Python
    and a stream query). A fresh result is one contiguous allocation: CuPy gets it by address,
    as memory it does not own (the DeviceArray is the owner it keeps alive), after its current
    stream was made to wait for the call's work, which is what the DLPack handshake does."""
    try:
        unowned, pointer = mod.cuda.memory.UnownedMemory, mod.cuda.MemoryPointer
        ndarray, current = mod.ndarray, mod.cuda.get_current_stream
    except AttributeError:
        return mod.from_dlpack

    def from_cufunc(d):
        if not d.is_c_contiguous() or not d.nbytes:
            return mod.from_dlpack(d)
        d._order_for(current().ptr or 1)  # 0 is CuPy's legacy default stream: 1 in the protocol
        mem = unowned(d.ptr, d.nbytes, d, d.device_id)
        return ndarray(d.shape, d.dtype, pointer(mem, 0), d.strides)
    return from_cufunc


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


def wrapper_for(tp):
    """The callable that turns a cufunc DeviceArray result into an array of the library of type
    ``tp`` (an input's type), or None when ``tp`` is not a foreign device array type (results are
    cufunc DeviceArrays). Pure: it reads ``tp.__module__`` and ``sys.modules``, imports nothing
    the input did not come from. The C side caches the answer per type."""
    root = (getattr(tp, "__module__", None) or "").partition(".")[0]
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

def _torch_interface(mod):
    """PyTorch's __cuda_array_interface__ is a Python property (several microseconds) that names
    no stream, so a call also had to ask __dlpack__(stream=1) for the handshake (about 20
    microseconds more per tensor). This builds the same interface (version 3) from the tensor's
    C-level attributes, with the stream PyTorch works on now (its current raw stream: 0 is the
    legacy default stream, 1 in the interface): the call then waits for that stream on the
    device, which is what the handshake did. Tensors this does not describe as PyTorch does
    (CPU, sparse, requiring grad, lazily conjugated or negated, unknown dtypes) get PyTorch's
    own property and its answer or error, as before."""
    C = getattr(mod, "_C", None)
    raw = getattr(C, "_cuda_getCurrentRawStream", None)
    if raw is None:
        return None
    names = {"float16": "<f2", "float32": "<f4", "float64": "<f8", "complex64": "<c8",
             "complex128": "<c16", "bool": "|b1", "uint8": "|u1", "int8": "|i1",
             "int16": "<i2", "int32": "<i4", "int64": "<i8", "uint16": "<u2", "uint32": "<u4",
             "uint64": "<u8"}
    typestr = {getattr(mod, k): (v, int(v[2:])) for k, v in names.items() if hasattr(mod, k)}
    strided = mod.strided
    bf16 = getattr(mod, "bfloat16", None)

    def interface(t):
        ts = typestr.get(t.dtype)
        if ts is None and t.dtype is bf16:
            # the interface has no bfloat16 typestr: DLPack (kDLBfloat) carries it
            raise AttributeError("a bfloat16 tensor is read through DLPack, not the CUDA Array "
                                 "Interface")
        if (ts is None or not t.is_cuda or t.requires_grad or t.layout is not strided
                or t.is_conj() or t.is_neg()):
            return t.__cuda_array_interface__
        n = ts[1]
        return {"shape": tuple(t.shape), "typestr": ts[0],
                "data": (t.data_ptr() if t.numel() else 0, False),
                "strides": tuple([x * n for x in t.stride()]), "version": 3,
                "stream": raw(t.get_device()) or 1}
    return interface


# root module name -> (the types it describes, given the module, -> reader factory)
_READERS = {"torch": ("torch", lambda m, tp: issubclass(tp, m.Tensor), _torch_interface)}


def interface_for(tp):
    """A faster reader of the CUDA Array Interface of inputs of type ``tp`` (a callable: object
    -> the interface dict), or None to read the ``__cuda_array_interface__`` attribute. Pure,
    imports nothing; the C side caches the answer per type (py_call.c)."""
    root = (getattr(tp, "__module__", None) or "").partition(".")[0]
    lib = _READERS.get(root)
    mod = sys.modules.get(lib[0]) if lib else None
    if mod is None:
        return None
    try:
        return lib[2](mod) if lib[1](mod, tp) else None
    except (AttributeError, TypeError):
        return None


def is_immutable(tp):
    """Whether arrays of type ``tp`` cannot be written (JAX): out= with one is a TypeError."""
    root = (getattr(tp, "__module__", None) or "").partition(".")[0]
    return root in ("jax", "jaxlib")
