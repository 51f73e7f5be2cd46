"""The ``cuda`` namespace, mirroring ``numba.cuda``: devices, streams, device arrays.

    from cufunc import cuda
    d = cuda.to_device(np.arange(10.0))
    s = cuda.stream()
    h = d.copy_to_host(stream=s); s.synchronize()

Every function that needs the GPU raises CudaSupportError when there is none (or no driver); the
checks of its arguments come first, so bad input is reported as such everywhere.
"""

import contextlib
import os
import threading

import numpy as np

from . import _env
from ._env import require_core
from .errors import CudaSupportError

__all__ = [
    "is_available", "detect", "select_device", "get_current_device", "gpus", "close",
    "synchronize", "current_context",
    "stream", "default_stream", "legacy_default_stream", "per_thread_default_stream",
    "external_stream", "Stream",
    "to_device", "device_array", "device_array_like", "pinned_array", "pinned_array_like",
    "as_cuda_array", "is_cuda_array", "from_dlpack", "DeviceNDArray", "DeviceArray",
    "RawKernel", "compile_source", "jit", "local", "const", "Device", "vectorize", "guvectorize",
    "reduce", "Reduce",
    "pinned", "mapped", "mapped_array", "mapped_array_like", "managed_array", "defer_cleanup",
    "event", "event_elapsed_time", "Event", "open_ipc_array", "IpcArrayHandle", "MappedNDArray",
    "ManagedNDArray",
]

_core = _env.core


def _from_core(name):
    """The C function `name`, or (without the extension) a function raising CudaSupportError."""
    if _core is not None:
        return getattr(_core, name)

    def unavailable(*args, **kwargs):
        require_core("cufunc.cuda.%s" % name)

    unavailable.__name__ = name
    unavailable.__qualname__ = name
    return unavailable


# ---- device arrays and memory ------------------------------------------------------------------

to_device = _from_core("to_device")
device_array = _from_core("device_array")
device_array_like = _from_core("device_array_like")
pinned_array = _from_core("pinned_array")
as_cuda_array = _from_core("as_cuda_array")
from_dlpack = _from_core("from_dlpack")
compile_source = _from_core("compile_source")


def is_cuda_array(obj):
    """Tell whether an object exposes ``__cuda_array_interface__`` (no GPU needed).

    Parameters
    ----------
    obj : object
        Any object.

    Returns
    -------
    bool
        True when it has the CUDA Array Interface.
    """
    if _core is not None:
        return _core.is_cuda_array(obj)
    return hasattr(obj, "__cuda_array_interface__")


def pinned_array_like(ary):
    """Allocate a pinned host array with another array's shape, dtype and order.

    Parameters
    ----------
    ary : array_like
        The array to copy the shape, dtype and order of (C, or F when it is F-contiguous).

    Returns
    -------
    numpy.ndarray
        The array, in page-locked memory (uninitialised).
    """
    ary = np.asarray(ary)
    order = "F" if ary.flags.f_contiguous and not ary.flags.c_contiguous else "C"
    return pinned_array(ary.shape, dtype=ary.dtype, order=order)


_CORE_TYPES = ("DeviceNDArray", "DeviceArray", "Stream", "RawKernel", "Event")
if _core is not None:
    DeviceNDArray = DeviceArray = _core.DeviceArray
    Stream = _core.Stream
    RawKernel = _core.RawKernel
    Event = _core.Event
else:
    __all__ = [n for n in __all__ if n not in _CORE_TYPES]


# ---- pinned, mapped and managed host memory (Numba's names) -------------------------------------

def _host_span(ary, what):
    """(first byte address, byte length) of the memory a NumPy array touches."""
    if not isinstance(ary, np.ndarray):
        raise TypeError("%s: expected NumPy arrays, got %s" % (what, type(ary).__name__))
    if ary.size == 0:
        return ary.__array_interface__["data"][0], 0
    lo = hi = 0
    for n, st in zip(ary.shape, ary.strides):
        if st < 0:
            lo += (n - 1) * st
        else:
            hi += (n - 1) * st
    return ary.__array_interface__["data"][0] + lo, hi - lo + ary.itemsize


def _check_stream_kw(what, kws):
    bad = set(kws) - {"stream"}
    if bad:
        raise TypeError("%s: unexpected keyword argument %r (only stream= is accepted)"
                        % (what, sorted(bad)[0]))
    stream = kws.get("stream", 0)
    if _core is not None:
        _core.check_stream(stream)
    return stream


@contextlib.contextmanager
def _registered(arylist, mapped, what):
    """Page-lock each array's memory (cuMemHostRegister) for the block; what this block
    registered is unregistered on exit, also when the block raises. Arrays already page-locked
    (pinned_array, or an enclosing pinned()) are left as they are."""
    spans = [_host_span(a, what) for a in arylist]  # argument checks first: no GPU needed
    core = require_core(what)
    done = []
    try:
        for ptr, nbytes in spans:
            if nbytes and core.host_register(ptr, nbytes, mapped):
                done.append(ptr)
        yield spans
    finally:
        for ptr in reversed(done):
            core.host_unregister(ptr)


@contextlib.contextmanager
def pinned(*arylist):
    """Page-lock NumPy arrays for the duration of a block.

    Numba's ``cuda.pinned``: copies to and from the arrays, and ufunc calls on them, run as direct
    DMA at full PCIe speed. The arrays are unpinned on exit.

    Parameters
    ----------
    *arylist : numpy.ndarray
        The arrays.

    Yields
    ------
    None
        The block runs with the arrays page-locked.
    """
    with _registered(arylist, False, "pinned"):
        yield


class _MappedView:
    """__cuda_array_interface__ of host memory mapped into the device (keeps the array alive)."""

    def __init__(self, ary, dptr):
        self._ary = ary
        self.__cuda_array_interface__ = {
            "shape": ary.shape, "strides": None if ary.flags.c_contiguous else ary.strides,
            "typestr": ary.dtype.str, "data": (dptr, not ary.flags.writeable), "version": 3,
            "stream": None}


@contextlib.contextmanager
def mapped(*arylist, **kws):
    """Map NumPy arrays into the device for the duration of a block.

    Numba's ``cuda.mapped``: ufuncs, gufuncs and reductions read and write the arrays' own memory
    in place. The arrays are unmapped on exit, also on exceptions.

    Parameters
    ----------
    *arylist : numpy.ndarray
        The arrays.
    **kws
        ``stream=`` only, checked and accepted for Numba compatibility.

    Yields
    ------
    DeviceNDArray or list of DeviceNDArray
        A device view of each array's memory (one, or a list for several).
    """
    _check_stream_kw("mapped", kws)
    with _registered(arylist, True, "mapped"):
        core = _core
        devs = []
        for ary in arylist:
            base = ary.__array_interface__["data"][0]
            dptr = core.host_device_pointer(base) if ary.size else 0
            devs.append(as_cuda_array(_MappedView(ary, dptr)) if ary.size else
                        device_array(ary.shape, ary.dtype))
        yield devs[0] if len(devs) == 1 else devs


class _HostDeviceArray(np.ndarray):
    """A NumPy array over memory the device can use in place; __cuda_array_interface__ names the
    device address of each view, so cufunc's ufuncs, gufuncs and reductions (and CuPy, Numba)
    take it with no copy."""

    def __array_finalize__(self, obj):
        self._cufunc_map = getattr(obj, "_cufunc_map", None)

    @property
    def __cuda_array_interface__(self):
        m = self._cufunc_map
        ai = self.__array_interface__
        # NumPy's own results keep the subclass and its attributes (m * 2 is a new, pageable
        # array): only views inside the mapped block have a device view
        if m is None or not m[0] <= ai["data"][0] < m[0] + max(m[2], 1):
            raise AttributeError("this array is not mapped into the device")
        host_base, dev_base, _ = m
        return {"shape": ai["shape"], "strides": ai["strides"], "typestr": ai["typestr"],
                "data": (dev_base + (ai["data"][0] - host_base), not self.flags.writeable),
                "version": 3, "stream": None}

    @property
    def device_ctypes_pointer(self):
        """The device address of the data, as ``ctypes.c_void_p``."""
        import ctypes
        return ctypes.c_void_p(self.__cuda_array_interface__["data"][0])


class MappedNDArray(_HostDeviceArray):
    """What ``cuda.mapped_array`` returns: host memory mapped into the device.

    A NumPy array subclass; construct it with ``cuda.mapped_array``.

    Parameters
    ----------
    shape, dtype, buffer, offset, strides, order : numpy.ndarray's arguments
        As ``numpy.ndarray`` takes them.
    """


class ManagedNDArray(_HostDeviceArray):
    """What ``cuda.managed_array`` returns: unified memory, for the host and the device.

    A NumPy array subclass; construct it with ``cuda.managed_array``.

    Parameters
    ----------
    shape, dtype, buffer, offset, strides, order : numpy.ndarray's arguments
        As ``numpy.ndarray`` takes them.
    """


def _special(kind, cls, shape, dtype, strides, order, stream, attach_global=True):
    if strides is not None:
        raise NotImplementedError("%s: strides= is not supported; give order= ('C' or 'F')"
                                  % cls.__name__)
    if _core is not None:
        _core.check_stream(stream)
    ary, dptr = require_core(kind + "_array").special_array(kind, shape, dtype, order,
                                                            attach_global)
    view = ary.view(cls)
    view._cufunc_map = (ary.__array_interface__["data"][0], dptr, ary.nbytes)
    return view


def mapped_array(shape, dtype=np.float64, strides=None, order="C", stream=0, portable=False,
                 wc=False):
    """Allocate a NumPy array in page-locked host memory mapped into the device.

    Numba's ``cuda.mapped_array``: passed to a ufunc, gufunc or reduction, the kernel reads and
    writes it in place over PCIe, with no copy.

    Parameters
    ----------
    shape : int or tuple of int
        The shape.
    dtype : dtype_like, optional
        The element type.
    strides : None, optional
        Not supported (NotImplementedError): give ``order``.
    order : {'C', 'F'}, optional
        The memory layout.
    stream : Stream or int, optional
        Checked, for Numba compatibility; the allocation is not stream-ordered.
    portable, wc : bool, optional
        Accepted for Numba compatibility: the memory is always portable, and write-combining is
        not used.

    Returns
    -------
    MappedNDArray
        The array (uninitialised).
    """
    return _special("mapped", MappedNDArray, shape, dtype, strides, order, stream)


def mapped_array_like(ary, stream=0, portable=False, wc=False):
    """Allocate a mapped array with another array's shape, dtype and order.

    Parameters
    ----------
    ary : array_like
        The array to copy the shape, dtype and order of.
    stream : Stream or int, optional
        As for ``mapped_array``.
    portable, wc : bool, optional
        As for ``mapped_array``.

    Returns
    -------
    MappedNDArray
        The array (uninitialised).
    """
    ary = np.asarray(ary)
    order = "F" if ary.flags.f_contiguous and not ary.flags.c_contiguous else "C"
    return mapped_array(ary.shape, ary.dtype, order=order, stream=stream)


def managed_array(shape, dtype=np.float64, strides=None, order="C", stream=0,
                  attach_global=True):
    """Allocate a NumPy array in unified (managed) memory.

    Numba's ``cuda.managed_array``: usable from the host and, with no copy, from ufuncs, gufuncs
    and reductions. Synchronise (``cuda.synchronize()``) before reading on the host what a kernel
    wrote.

    Parameters
    ----------
    shape : int or tuple of int
        The shape.
    dtype : dtype_like, optional
        The element type.
    strides : None, optional
        Not supported (NotImplementedError): give ``order``.
    order : {'C', 'F'}, optional
        The memory layout.
    stream : Stream or int, optional
        Checked, for Numba compatibility.
    attach_global : bool, optional
        Attach the memory for access from any stream (``CU_MEM_ATTACH_GLOBAL``), else to the
        host (``CU_MEM_ATTACH_HOST``).

    Returns
    -------
    ManagedNDArray
        The array (uninitialised).

    Raises
    ------
    MemoryError
        For more than the device has free, before the driver is asked (an oversized managed
        allocation can hang a GPU).
    """
    return _special("managed", ManagedNDArray, shape, dtype, strides, order, stream,
                    attach_global)


@contextlib.contextmanager
def defer_cleanup():
    """Hold back the freeing of device memory until the block ends.

    Numba's ``cuda.defer_cleanup``: memory whose last reference dies in the block is freed when the
    block (the outermost, when nested) ends. cufunc's frees are stream-ordered and never
    synchronise, so this is rarely needed for speed; it keeps the memory allocated, as Numba
    documents.

    Yields
    ------
    None
        The block runs with frees held back.
    """
    core = require_core("defer_cleanup")
    core.defer_cleanup_enter()
    try:
        yield
    finally:
        core.defer_cleanup_exit()


# ---- events ------------------------------------------------------------------------------------

event = _from_core("event")


def event_elapsed_time(evtstart, evtend):
    """Give the time between two recorded timing events.

    Numba's ``cuda.event_elapsed_time``.

    Parameters
    ----------
    evtstart, evtend : Event
        The events, made with ``timing=True`` and recorded.

    Returns
    -------
    float
        Milliseconds from ``evtstart`` to ``evtend``.
    """
    if _core is not None and not isinstance(evtstart, _core.Event):
        raise TypeError("event_elapsed_time: evtstart must be an Event, got %s"
                        % type(evtstart).__name__)
    return evtstart.elapsed_time(evtend)


# ---- IPC ---------------------------------------------------------------------------------------

@contextlib.contextmanager
def open_ipc_array(handle, shape, dtype, strides=None, offset=0):
    """Open another process's device memory as a device array for a block.

    Numba's ``cuda.open_ipc_array``.

    Parameters
    ----------
    handle : bytes or sequence of int or IpcArrayHandle
        The 64-byte IPC handle (an IpcArrayHandle's ``.handle``).
    shape : int or tuple of int
        The array's shape.
    dtype : dtype_like
        The array's element type.
    strides : tuple of int, optional
        The strides in bytes; C order when not given.
    offset : int, optional
        The byte offset of the array in the memory.

    Yields
    ------
    DeviceNDArray
        The array; the memory is closed when the block ends.
    """
    from ._devarray import IpcArrayHandle
    device = None
    if isinstance(handle, IpcArrayHandle):
        device = handle.device_id
        offset = offset or handle.offset
        handle = handle.handle
    raw = bytes(bytearray(handle))
    if len(raw) != 64:
        raise ValueError("open_ipc_array: an IPC handle has 64 bytes, not %d" % len(raw))
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if strides is None:
        strides, acc = [], dtype.itemsize
        for n in reversed(shape):
            strides.insert(0, acc)
            acc *= n
    h = IpcArrayHandle(raw, offset, None, shape, strides, dtype,
                       get_current_device().id if device is None else device, -1)
    try:
        yield h.open()
    finally:
        h.close()


# ---- streams -----------------------------------------------------------------------------------
#
# Ordering, as in Numba and more: stream() makes a blocking stream, which the legacy default
# stream (where a call without stream= runs) and it wait for each other's earlier work. Beyond
# that, cufunc remembers for each device allocation the stream of the last work that writes it,
# and makes any call or copy on another stream wait for that work first (no event at all when the
# two streams are one, or ordered by CUDA as above). Foreign arrays are ordered after their
# producer too: the stream named by __cuda_array_interface__, else the DLPack handshake
# (PyTorch). So no call reads an array before the work that produced it, on any streams.

stream = _from_core("stream")
default_stream = _from_core("default_stream")
legacy_default_stream = _from_core("legacy_default_stream")
per_thread_default_stream = _from_core("per_thread_default_stream")
external_stream = _from_core("external_stream")


# ---- devices -----------------------------------------------------------------------------------

def is_available():
    """Tell whether the CUDA driver loads and at least one device exists.

    Never raises.

    Returns
    -------
    bool
        True when kernels can run.
    """
    return _core is not None and _core.is_available()


_selection = threading.local()


class Device:
    """A CUDA device.

    Attributes: ``id``, ``name``, ``compute_capability``, ``total_memory``, ``uuid``, and the
    driver's attribute names in capitals (``MULTIPROCESSOR_COUNT``, ``WARP_SIZE``,
    ``MAX_THREADS_PER_BLOCK``, ...). As a context manager it makes itself the current device of
    this thread and restores the previous one on exit.

    Parameters
    ----------
    ordinal : int
        The device's ordinal.
    """

    def __init__(self, ordinal):
        self.id = ordinal
        self._props = None

    def _get_props(self):
        if self._props is None:
            self._props = require_core("Device").device_props(self.id)
        return self._props

    @property
    def name(self):
        """The device's name, as the driver gives it."""
        return self._get_props()["name"]

    @property
    def compute_capability(self):
        """The compute capability, a tuple ``(major, minor)``."""
        return self._get_props()["compute_capability"]

    @property
    def total_memory(self):
        """The device's memory in bytes."""
        return self._get_props()["total_memory"]

    @property
    def uuid(self):
        """The device's UUID, as a string ('GPU-...')."""
        return self._get_props()["uuid"]

    def __getattr__(self, attr):
        if attr.isupper():
            props = self._get_props()
            if attr in props:
                return props[attr]
        raise AttributeError("%s has no attribute %r" % (type(self).__name__, attr))

    def get_memory_info(self):
        """Give the device's free and total memory.

        Returns
        -------
        tuple of int
            ``(free, total)`` bytes.
        """
        return require_core("Device.get_memory_info").mem_info(self.id)

    def synchronize(self):
        """Wait for all work on this device."""
        require_core("Device.synchronize").device_synchronize(self.id)

    def select(self):
        """Make this device current on this thread.

        Returns
        -------
        Device
            The device itself.
        """
        require_core("Device.select").set_device(self.id)
        return self

    def __enter__(self):
        stack = getattr(_selection, "stack", None)
        if stack is None:
            stack = _selection.stack = []
        core = require_core("Device")
        stack.append(core.get_device())
        core.set_device(self.id)
        return self

    def __exit__(self, *exc):
        require_core("Device").set_device(_selection.stack.pop())
        return False

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(("cufunc.Device", self.id))

    def __repr__(self):
        try:
            return "<CUDA device %d '%s'>" % (self.id, self.name)
        except Exception:  # noqa: BLE001 - repr must not raise
            return "<CUDA device %d>" % self.id


class _DeviceList:
    """``cuda.gpus``: the devices, indexable and iterable; ``gpus.current`` is this thread's."""

    def __len__(self):
        if not is_available():
            return 0
        return _core.device_count()

    def __getitem__(self, i):
        n = len(self)
        if isinstance(i, slice):
            return [Device(k) for k in range(n)[i]]
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("there are %d CUDA devices; no device %d" % (n, i))
        return Device(i)

    def __iter__(self):
        return iter([Device(i) for i in range(len(self))])

    @property
    def current(self):
        """The Device current on this thread."""
        return get_current_device()

    def __repr__(self):
        return "<cufunc gpus: %s>" % list(self)


gpus = _DeviceList()


def select_device(device_id):
    """Make a device current on this thread.

    Parameters
    ----------
    device_id : int
        The device's ordinal.

    Returns
    -------
    Device
        The device.
    """
    require_core("select_device").set_device(device_id)
    return Device(device_id)


def get_current_device():
    """Give the device current on this thread.

    Returns
    -------
    Device
        Device 0 unless another was selected.
    """
    return Device(require_core("get_current_device").get_device())


def synchronize():
    """Wait for all work on the current device."""
    require_core("synchronize").device_synchronize()


def close():
    """Wait for all work on every device to finish.

    Numba destroys its contexts here; cufunc uses each device's primary context, shared with CuPy
    and PyTorch, which stays retained for the life of the process, so closing means draining.
    """
    core = require_core("close")
    if not core.is_available():
        return
    for i in range(core.device_count()):
        core.device_synchronize(i)


class _Context:
    """What ``cuda.current_context()`` returns: the current device's primary context."""

    def __init__(self, device):
        self.device = device

    def get_memory_info(self):
        return self.device.get_memory_info()

    def synchronize(self):
        self.device.synchronize()

    def __repr__(self):
        return "<cufunc primary context of %r>" % (self.device,)


def current_context():
    """The current device's primary context, as Numba's ``cuda.current_context()``.

    Returns
    -------
    object
        Has ``device``, ``get_memory_info()`` (free and total bytes) and ``synchronize()``.
    """
    return _Context(get_current_device())


def detect():
    """Print the CUDA devices, as ``numba.cuda.detect()`` does.

    Returns
    -------
    bool
        True when every device is usable.
    """
    if _core is None:
        print("CUDA is not available: %s" % _env.core_error)
        return False
    reason = _core.unavailable_reason()
    if reason is not None:
        print("CUDA is not available: %s" % reason)
        return False
    n = _core.device_count()
    print("Found %d CUDA devices" % n)
    supported = 0
    for i in range(n):
        p = _core.device_props(i)
        cc = p["compute_capability"]
        try:
            ok = _core.nvrtc_supports_arch(cc) > 0
            status = "[SUPPORTED]" if ok else "[NOT SUPPORTED by this NVRTC]"
        except CudaSupportError as exc:
            ok = False
            status = "[NVRTC MISSING: %s]" % exc
        supported += ok
        print("id %d    %-40s %s" % (i, repr(p["name"]), status))
        print("%40s: %d.%d" % ("Compute Capability", cc[0], cc[1]))
        print("%40s: %d" % ("PCI Device ID", p["PCI_DEVICE_ID"]))
        print("%40s: %d" % ("PCI Bus ID", p["PCI_BUS_ID"]))
        print("%40s: %s" % ("UUID", p["uuid"]))
        print("%40s: %d" % ("Multiprocessors", p["MULTIPROCESSOR_COUNT"]))
        print("%40s: %.1f GiB" % ("Memory", p["total_memory"] / 2**30))
    print("Summary:")
    print("\t%d/%d devices are supported" % (supported, n))
    return supported == n


# ---- the kernel language's device-side names, provided by cufunc.lang ----------------------------

def jit(signature_or_function=None, device=False, typing="numpy", **options):
    """Make a device function (``cuda.jit(device=True)``) that kernel bodies call.

    The function runs as plain Python when called from Python, and is translated when a body calls
    it, with the typing policy ``typing`` (the function's ``typing`` attribute).

    Parameters
    ----------
    signature_or_function : callable or str or list, optional
        The function (``@cuda.jit(device=True)`` without arguments decorates directly), or
        signatures (accepted; the body is typed at each call site).
    device : bool, optional
        Must be True: cufunc makes no ``cuda.jit`` kernels.
    typing : {'numpy', 'numba'}, optional
        "numpy" (the default) or "numba" (Numba's typing rules: what ``cufunc.numba.cuda.jit``
        makes).
    **options
        Numba's options of device functions (``inline``, ``fastmath``, ``debug``, ...).

    Returns
    -------
    DeviceFunction or callable
        The device function, or a decorator that makes one.
    """
    from . import _options, lang
    _options.check_typing("cuda.jit", typing)
    # nopython/forceobj checked here, after the other options, so that the warning names the
    # caller's line
    modes = {k: options.pop(k) for k in ("nopython", "forceobj") if k in options}
    made = lang.jit(signature_or_function, device=device, **options)
    _options.check("cuda.jit", modes)
    if isinstance(made, lang.DeviceFunction):
        made.typing = typing
        return made

    def decorate(func):
        fn = made(func)
        fn.typing = typing
        return fn
    return decorate


def __getattr__(name):
    # Imported lazily: cufunc.lang imports this package's modules, and lang is optional here.
    if name in ("local", "const"):
        from . import lang
        value = getattr(lang, name)
        globals()[name] = value
        return value
    if name in ("vectorize", "guvectorize", "reduce", "Reduce"):
        # from the modules (not the package attributes of the same names, which are the
        # functions), imported on first use
        import importlib
        module = {"vectorize": "vectorize", "guvectorize": "guvectorize"}.get(name, "reduction")
        value = getattr(importlib.import_module(__package__ + "." + module), name)
        globals()[name] = value
        return value
    if name == "IpcArrayHandle":
        from ._devarray import IpcArrayHandle
        globals()[name] = IpcArrayHandle
        return IpcArrayHandle
    if name in _CORE_TYPES:
        # An AttributeError (so hasattr() and `import *` behave) that says why.
        try:
            require_core("cufunc.cuda.%s" % name)
        except CudaSupportError as exc:
            raise AttributeError(str(exc)) from None
    raise AttributeError("module 'cufunc.cuda' has no attribute %r" % name)
