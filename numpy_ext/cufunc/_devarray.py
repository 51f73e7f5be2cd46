"""DeviceNDArray methods written in Python (the C type calls these: hooks cufunc/__init__.py
registers): view, split, squeeze and get_ipc_handle, with Numba's signatures and behaviour, over
two C helpers that make a view of an array's memory (sharing its owner and its pending-write
tracking) and export its IPC handle."""

import numpy as np

from ._env import require_core

_AxisError = getattr(getattr(np, "exceptions", np), "AxisError", None) or np.AxisError


def _normalise_dtype(dtype):
    try:
        return np.dtype(dtype)
    except TypeError as exc:
        raise TypeError("view: %r is not a dtype (%s)" % (dtype, exc)) from None


def view(self, dtype):
    """The same memory seen as `dtype`, no copy (Numba's DeviceNDArray.view). A dtype of another
    size needs a C-contiguous array; the last axis is rescaled, and its byte length must be a
    multiple of the new itemsize."""
    dtype = _normalise_dtype(dtype)
    shape = list(self.shape)
    strides = list(self.strides)
    if self.dtype.itemsize != dtype.itemsize:
        if not self.is_c_contiguous():
            raise ValueError("To change to a dtype of a different size, the array must be "
                             "C-contiguous")
        if self.ndim == 0:
            raise ValueError("Changing the dtype of a 0d array is only supported if the itemsize "
                             "is unchanged")
        shape[-1], rem = divmod(shape[-1] * self.dtype.itemsize, dtype.itemsize)
        if rem != 0:
            raise ValueError("When changing to a larger dtype, its size must be a divisor of the "
                             "total size in bytes of the last axis of the array.")
        strides[-1] = dtype.itemsize
    return require_core("view").devicearray_view(self, 0, shape, strides, dtype, None)


def split(self, section, stream=0):
    """Views of `section` consecutive elements each (the last may be shorter), as a generator,
    for a 1-d array of unit stride (Numba's DeviceNDArray.split)."""
    section = int(section)
    if section <= 0:
        raise ValueError("split: section must be a positive number of elements, not %d" % section)
    if self.ndim != 1:
        raise ValueError("only support 1d array")
    if self.shape[0] > 1 and self.strides[0] != self.dtype.itemsize:
        raise ValueError("only support unit stride")
    core = require_core("split")
    core.check_stream(stream)
    nitem, itemsize = self.shape[0], self.dtype.itemsize
    pieces = [core.devicearray_view(self, begin * itemsize, (min(begin + section, nitem) - begin,),
                            (itemsize,), self.dtype, stream)
              for begin in range(0, nitem, section)]
    return (p for p in pieces)


def squeeze(self, axis=None, stream=0):
    """The view without axes of extent 1 (all, or those named by `axis`; an axis named that is
    not of extent 1 is a ValueError, as in NumPy)."""
    core = require_core("squeeze")
    core.check_stream(stream)
    if axis is None:
        axes = [i for i, n in enumerate(self.shape) if n == 1]
    else:
        axes = [axis] if not isinstance(axis, (tuple, list)) else list(axis)
        norm = []
        for a in axes:
            a = int(a)
            if not -self.ndim <= a < self.ndim:
                raise _AxisError(a, self.ndim)
            a %= self.ndim
            if self.shape[a] != 1:
                raise ValueError("cannot select an axis to squeeze out which has size not equal "
                                 "to one")
            norm.append(a)
        axes = norm
    shape = [n for i, n in enumerate(self.shape) if i not in axes]
    strides = [s for i, s in enumerate(self.strides) if i not in axes]
    return core.devicearray_view(self, 0, shape, strides, self.dtype, stream)


class IpcArrayHandle:
    """What ``DeviceNDArray.get_ipc_handle()`` returns (Numba's IpcArrayHandle).

    It pickles; in another process, ``open()`` (or ``with handle as d:``) gives a DeviceNDArray over
    the same device memory, and ``close()`` releases it. The exporting process must keep the array
    alive while others use it.

    Parameters
    ----------
    handle : bytes
        The 64-byte CUDA IPC handle.
    offset : int
        The array's byte offset in the allocation.
    size : int
        The allocation's size in bytes.
    shape : tuple of int
        The array's shape.
    strides : tuple of int
        The array's strides in bytes.
    dtype : dtype_like
        The array's element type.
    device_id : int
        The exporting device.
    source_pid : int
        The exporting process.
    """

    def __init__(self, handle, offset, size, shape, strides, dtype, device_id, source_pid):
        self.handle = bytes(handle)
        self.offset = offset
        self.size = size
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.dtype = np.dtype(dtype)
        self.device_id = device_id
        self.source_pid = source_pid
        self._mem = None

    def open(self):
        """Open the exporter's memory, in another process.

        CUDA refuses to open a handle in the process that made it.

        Returns
        -------
        DeviceNDArray
            An array over the exporter's memory.
        """
        import os
        if self.source_pid == os.getpid():
            raise ValueError("IpcArrayHandle.open: this handle was exported by this process; "
                             "CUDA IPC opens it only in another process (use the array itself "
                             "here)")
        if self._mem is not None:
            raise ValueError("IpcArrayHandle.open: already open; close() it first")
        mem, arr = require_core("IpcArrayHandle.open").ipc_open(
            self.handle, self.device_id, self.offset, self.shape, self.strides, self.dtype)
        self._mem = mem
        return arr

    def close(self):
        """Release what open() mapped (arrays from it must not be used afterwards)."""
        if self._mem is not None:
            mem, self._mem = self._mem, None
            mem.close()

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()
        return False

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_mem"] = None
        return state

    def __repr__(self):
        return "<cufunc IpcArrayHandle shape=%s dtype=%s device=%d>" % (
            self.shape, self.dtype, self.device_id)


def get_ipc_handle(self):
    """An IpcArrayHandle for this array's memory (Numba's DeviceNDArray.get_ipc_handle).

    cufunc allocates from the stream-ordered pool, which cuIpcGetMemHandle cannot export: an
    array that is the only view of its allocation is moved once into IPC-able memory (cuMemAlloc)
    here, after its pending writes (its .ptr changes); an array sharing its allocation with other
    views is a ValueError naming the way out."""
    import os
    core = require_core("get_ipc_handle")
    handle, offset, size = core.devicearray_ipc_export(self)
    return IpcArrayHandle(handle, offset, size, self.shape, self.strides, self.dtype,
                          self.device_id, os.getpid())
