"""ufunc.at on cufunc device arrays: ``uf.at(a, indices, b)`` applies ``a[i] = uf(a[i], b)`` for
every index, unbuffered, so repeated indices accumulate (a histogram: ``np.add.at(bins, idx, 1)``).
For any cufunc ufunc (``GPUUFunc.at``) and for NumPy's ufuncs on DeviceArrays through their GPU
twins (``np.add.at(d, idx, v)``).

The engine is C (include/cufunc/at.h, src/at.c, templates/cufunc/at.cuh); this module picks the
loop, normalises indices and values and the update method:
- add on int32/int64/uint32/uint64/float32/float64 uses the hardware's atomicAdd, minimum and
  maximum on int32/int64/uint32/uint64 atomicMin/atomicMax (only for NumPy's add/minimum/maximum/
  fmin/fmax twins, whose meaning is known);
- every other function on 4- and 8-byte types: an atomicCAS loop around the ufunc's own scalar
  function (correct for any function: the update is retried when another thread wrote in between);
  1- and 2-byte types: the same on the 32-bit word holding the element;
- 16-byte types (complex128): one GPU thread applies the updates in order (correct, slow).

Indices: an integer, a slice, an integer array (NumPy or device; negative values count from the
end), or a tuple of integers / integer host arrays over the leading axes. Host indices are checked
before anything is written (IndexError, as NumPy); device indices are checked by the kernel, which
skips a bad one and reports it afterwards as IndexError (the valid updates are applied). The call
waits for the GPU (it reads the error flag back), and runs on the legacy default stream.
"""
import numpy as np

from . import _core, _loops

__all__ = ["ufunc_at"]

_DA = _core.DeviceArray
_ENGINES = {}
_OP_ANY, _OP_ADD, _OP_MIN, _OP_MAX = 0, 1, 2, 3
_KNOWN_OPS = {"add": _OP_ADD, "minimum": _OP_MIN, "maximum": _OP_MAX, "fmin": _OP_MIN,
              "fmax": _OP_MAX}
_WEAK = (int, float, complex)
# a Python scalar's dtype before NEP 50 decides whether it stays weak (as a call classifies it)
_WEAK_DTYPE = {int: np.dtype(np.int64), float: np.dtype(np.float64),
               complex: np.dtype(np.complex128)}


def _engine(spec):
    types, source, fn_name, options, captures = spec[:5]
    if captures:
        raise NotImplementedError("ufunc.at: a ufunc whose body reads captured device arrays is "
                                  "not supported yet")
    key = (source, fn_name, tuple(options))
    e = _ENGINES.get(key)
    if e is None:
        e = _ENGINES[key] = _core._at_engine(source, fn_name, tuple(options))
    return e


def _upload(ary, device):
    """A host array copied to ``device`` (the updated array's), whatever the thread's current
    device is: the kernel runs on the array's device and reads its indices and values there."""
    if _core._capturing() is not None:
        from .errors import GraphCaptureError
        raise GraphCaptureError(
            "ufunc.at: host indices or values cannot be captured in a CUDA graph (the capture "
            "was left as it was); pass device arrays (cufunc.cuda.to_device before capturing) "
            "for the indices and the values")
    cur = _core.get_device()
    if cur == device:
        return _core.to_device(ary)
    _core.set_device(device)
    try:
        return _core.to_device(ary)
    finally:
        _core.set_device(cur)


def _same_device(a, other, what):
    if other.device_id != a.device_id:
        raise ValueError("ufunc.at: the %s are on device %d, but the array is on device %d (copy "
                         "them to device %d)" % (what, other.device_id, a.device_id, a.device_id))


def _loop(uf, a_dtype, b_key):
    """The loop spec (types, source, fn_name, options, captures) ufunc.at uses."""
    nin = uf.nin
    keys = (a_dtype,) if nin == 1 else (a_dtype, b_key)
    npuf = getattr(uf, "numpy_ufunc", None)
    if npuf is not None:
        # a twin: NumPy's own resolution, then the twin's loop of those types
        want = tuple(npuf.resolve_dtypes(keys + (None,)))
        for spec in uf.loops:
            if tuple(np.dtype(t) for t in spec[0]) == want:
                return spec
        raise TypeError("cufunc: the GPU twin of numpy.%s has no loop %s"
                        % (npuf.__name__, "".join(d.char for d in want)))
    # the loop the ufunc's call takes (the C resolver, cufunc/loops.h): NEP 50 for a Python
    # scalar, exact matches first, then safe casts; a ufunc that compiles on demand takes exact
    # matches only, else compiles a loop for these types
    loops = uf.loops
    dynamic = getattr(uf, "compiler", None) is not None
    pytype = [any(k is t for t in _WEAK) for k in keys]   # by identity: dtype == float holds
    dts = [_WEAK_DTYPE[k] if p else np.dtype(k) for k, p in zip(keys, pytype)]
    weak = _loops.nep50(dts, pytype)
    i = _loops.find([spec[0] for spec in loops], nin, dts, weak, 1 if dynamic else 2)
    if i >= 0:
        return loops[i]
    if dynamic:
        # a ufunc that compiles on demand: its loop for these types, translated now
        return uf.compiler(tuple(keys), None)
    raise TypeError("ufunc.at: ufunc '%s' has no loop for %s" % (uf.__name__, keys))


def _merge(shape, strides, what):
    """One (extent, stride) for axes that NumPy could ravel without a copy, else NotImplemented."""
    extent = int(np.prod(shape)) if shape else 1
    for k in range(len(shape) - 1):
        if shape[k + 1] != 1 and shape[k] != 1 and strides[k] != strides[k + 1] * shape[k + 1]:
            raise NotImplementedError("ufunc.at: the %s axes of the target must be contiguous-like"
                                      % what)
    stride = 0
    for e, s in zip(reversed(shape), reversed(strides)):
        if e != 1:
            stride = s
            break
    return extent, stride


def _host_index(indices, shape):
    """Host indices -> (flat int64 index array over the leading k axes, k, index shape)."""
    if not isinstance(indices, tuple):
        indices = (indices,)
    k = len(indices)
    if k > len(shape):
        raise IndexError("too many indices for array: array is %d-dimensional, but %d were "
                         "indexed" % (len(shape), k))
    comps = []
    for axis, ix in enumerate(indices):
        if isinstance(ix, slice):
            if k > 1:
                raise NotImplementedError("ufunc.at: a slice inside a tuple of indices")
            ix = np.arange(*ix.indices(shape[axis]))
        ix = np.asarray(ix)
        if ix.dtype.kind not in "iu":
            raise IndexError("arrays used as indices must be of integer type")
        ix = ix.astype(np.int64)
        n = shape[axis]
        bad = (ix < -n) | (ix >= n)
        if bad.any():
            raise IndexError("index %d is out of bounds for axis %d with size %d"
                             % (ix[bad].flat[0], axis, n))
        comps.append(np.where(ix < 0, ix + n, ix))
    comps = np.broadcast_arrays(*comps)
    ishape = comps[0].shape
    flat = np.ravel_multi_index(tuple(c.ravel() for c in comps), shape[:k]) if k > 1 \
        else comps[0].ravel()
    return np.ascontiguousarray(flat, dtype=np.int64), k, ishape


def _device_index(ix):
    if ix.dtype.kind not in "iu":
        raise IndexError("arrays used as indices must be of integer type")
    if ix.dtype not in (np.dtype(np.int32), np.dtype(np.int64)) or not ix.is_c_contiguous():
        # a contiguous int64 copy, on the GPU (NumPy's positive on a DeviceArray: its GPU twin)
        ix = np.positive(ix, dtype=np.int64)
    return ix.reshape(ix.size), ix.shape


def ufunc_at(uf, a, indices, b=None):
    """``uf.at(a, indices, b)`` on a cufunc DeviceArray ``a`` (module docstring)."""
    if uf.nout != 1 or uf.nin not in (1, 2):
        raise TypeError("ufunc.at: only ufuncs of 1 or 2 inputs and one output (%s has %d, %d)"
                        % (uf.__name__, uf.nin, uf.nout))
    if uf.nin == 2 and b is None:
        raise TypeError("ufunc.at: second operand needed for ufunc %s" % uf.__name__)
    if uf.nin == 1 and b is not None:
        raise TypeError("ufunc.at: second operand provided when ufunc is unary")
    if type(a) is not _DA:
        raise TypeError("ufunc.at: the first argument must be a cufunc DeviceArray, not %s"
                        % type(a).__name__)
    if a.readonly:
        raise ValueError("ufunc.at: the array is read-only")
    shape, strides = tuple(a.shape), tuple(a.strides)
    if type(indices) is _DA:
        _same_device(a, indices, "indices")
        keep_ix, ishape = _device_index(indices)
        k = 1
        if not shape:
            raise IndexError("too many indices for array: array is 0-dimensional")
    else:
        flat, k, ishape = _host_index(indices, shape)
        keep_ix = flat
    extent, a_index = _merge(shape[:k], strides[:k], "indexed")
    inner, a_inner = _merge(shape[k:], strides[k:], "trailing")
    nindex = int(np.prod(ishape)) if ishape else 1
    full = tuple(ishape) + shape[k:]
    # the values, and the loop
    b_key, b_dev, b_index, b_inner = a.dtype, None, 0, 0
    if uf.nin == 2:
        if type(b) is _DA:
            _same_device(a, b, "values")
            b_key = b.dtype
        elif type(b) in _WEAK:
            b_key = type(b)
        else:
            b = np.asarray(b)
            b_key = b.dtype
    spec = _loop(uf, a.dtype, b_key)
    types = [np.dtype(t) for t in spec[0]]
    out_t = types[-1]
    if not np.can_cast(out_t, a.dtype, "same_kind"):
        raise TypeError("Cannot cast ufunc '%s' output from %r to %r with casting rule "
                        "'same_kind'" % (uf.__name__, out_t, a.dtype))
    if uf.nin == 2:
        if type(b) is not _DA:
            hb = np.asarray(b, dtype=types[1]) if b_key in (int, float, complex) and not isinstance(b_key, np.dtype) else np.asarray(b)
            try:
                np.broadcast_shapes(hb.shape, full)
            except ValueError:
                raise ValueError("ufunc.at: values of shape %s cannot be broadcast to %s"
                                 % (hb.shape, full)) from None
            if hb.size == 1:
                hb = hb.reshape(1)
            elif hb.shape != full:
                hb = np.ascontiguousarray(np.broadcast_to(hb, full))
            b = _upload(np.ascontiguousarray(hb), a.device_id)
        if np.broadcast_shapes(b.shape, full) != full:
            raise ValueError("ufunc.at: values of shape %s cannot be broadcast to %s"
                             % (b.shape, full))
        isz = b.dtype.itemsize
        if b.size == 1:
            b_index = b_inner = 0
        elif b.shape == full and b.is_c_contiguous():
            b_index, b_inner = inner * isz, isz
        elif tuple(b.shape) == shape[k:] and b.is_c_contiguous():
            b_index, b_inner = 0, isz
        else:
            raise NotImplementedError("ufunc.at: device values must have the full shape %s, the "
                                      "trailing shape, or one element, and be contiguous" % (full,))
        b_dev = b
    same = all(t == a.dtype for t in types) and (b_dev is None or b_dev.dtype == a.dtype)
    op = _KNOWN_OPS.get(uf.__name__, _OP_ANY) if getattr(uf, "numpy_ufunc", None) is not None \
        else _OP_ANY
    mode = _core._at_pick_mode(op, 1 if same else 0, a.dtype.name)
    if nindex == 0 or inner == 0:
        return None
    ix_dev = keep_ix if type(keep_ix) is _DA else _upload(keep_ix, a.device_id)
    t = [types[0].name, types[1].name if uf.nin == 2 else types[0].name, out_t.name]
    call = (uf.nin, tuple(t), a.ptr, a.dtype.name, extent, inner, a_index, a_inner, ix_dev.ptr,
            ix_dev.dtype.name, nindex, b_dev.ptr if b_dev is not None else 0,
            b_dev.dtype.name if b_dev is not None else a.dtype.name, b_index, b_inner, mode)
    _core._at_launch(_engine(spec), call, a.device_id)
    return None


def kernel_source(uf, a_dtype, b_dtype=None, index_dtype=np.int64, mode=None, op=_OP_ANY):
    """The CUDA C of the at-kernel for these dtypes (no GPU): for tests and inspection."""
    a_dtype = np.dtype(a_dtype)
    spec = _loop(uf, a_dtype, np.dtype(b_dtype) if b_dtype is not None else a_dtype)
    types = [np.dtype(t) for t in spec[0]]
    if mode is None:
        mode = _core._at_pick_mode(op, 1 if all(t == a_dtype for t in types) else 0, a_dtype.name)
    t = [types[0].name, types[1].name if uf.nin == 2 else types[0].name, types[-1].name]
    call = (uf.nin, tuple(t), 0, a_dtype.name, 1, 1, 0, 0, 0, np.dtype(index_dtype).name, 1, 0,
            np.dtype(b_dtype or a_dtype).name, 0, 0, mode)
    return _core._at_source(_engine(spec), call)
