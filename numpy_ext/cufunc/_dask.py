"""cufunc's ufuncs and gufuncs on Dask arrays: lazy graphs whose tasks are cufunc calls.

A cufunc UFunc or GUFunc called with a dask array among its operands hands the call over through
NumPy's override protocol (NEP 13, py_override.c), as NumPy's own ufuncs do. It does not reach
dask's own ``Array.__array_ufunc__``, but ``array_ufunc`` here, its stand-in for cufunc's
functions: dask's finds a multi-output ufunc and ``outer`` by the ufunc's *name* in dask's
namespace (a cufunc ufunc named ``add`` would become NumPy's add) and refuses ``reduce`` and
``accumulate``.

What each method becomes (every task calls the cufunc function on one chunk, of whatever array
type the chunks are: CuPy chunks stay on the GPU, NumPy chunks go through cufunc's host path):
  __call__     one output: da.blockwise as da.elemwise builds it (_elemwise; with out= or
               where=, da.elemwise itself); gufuncs, several outputs: da.apply_gufunc's graph
               (_gufunc), less its one-block concatenation of core dimensions, which would copy
               a CuPy chunk to the worker thread's current device (apply_gufunc itself with
               axes=, axis= or keepdims=)
  outer        da.blockwise over the concatenated indices
  reduce       da.reduction: cufunc's reduce per chunk (keepdims) and to combine the partials
  accumulate   da.cumreduction: cufunc's accumulate per chunk, the ufunc itself to carry the
               running value over (ufuncs with a numeric identity: each row starts from it)

Chunks on several GPUs (CuPy chunks placed on each device, Dask's threaded scheduler): every
chunk's task runs on its chunk's device, whatever the worker thread's current device (a cufunc
call runs where its operands are, and CuPy makes its result there). A reduction's partials stay on
their devices (no host scalar, no synchronisation per task); each combining task moves the few
partials that live on another device than its first one to that device, device to device and
ordered on the GPUs by events (_gather), concatenates them there and reduces: a tree of device
partials, as Dask builds for CuPy's sum, whose root is the one value that comes back. The carry of
an accumulation moves to the next chunk's device the same way. No kernel reads another device's
memory (CuPy's concatenate of arrays on several devices would, on the current one, unordered
with the devices that made them).
The result dtype and meta come from a call on zero-size arrays of the chunks' type, which for
NumPy chunks needs no GPU (cufunc answers empty host calls without the device): graphs are built
anywhere. Dask's own inference (a call on one-element arrays) is never used.

A graph costs what dask's own ufunc path costs (bench/DASK_NOTES.md): a plain call is one meta
call and one dask.array.blockwise whose task per chunk is the ufunc itself (a C partial when
keywords are given), not dask's elemwise, which wraps every chunk's call in _enforce_dtype once a
dtype is given and calls the function a second time for the meta. Dask's token of a cufunc
function is its identity (``token``: the one its pickle carries), not dask's default, a pickle of
the function and its sources on every call.
"""
import contextlib
import functools
import operator

import numpy as np

from . import _pickle

__all__ = ["array_ufunc", "reduce_all", "token"]


# Dask's token of a cufunc function: its identity, built in one place (cufunc/_pickle.py)
token = _pickle.dask_token


def _register_tokens():
    try:
        from dask.tokenize import normalize_token
    except ImportError:  # dask < 2024.2
        try:
            from dask.base import normalize_token
        except ImportError:  # no dask: nothing calls this module's functions
            return
    from ._env import core
    normalize_token.register((core.UFunc, core.GUFunc, core.Reducer))(token)


_register_tokens()


def _da():
    import dask.array as da
    return da


def _meta(x, extra=0):
    """A zero-size array of x's chunk type and dtype, with `extra` more leading axes."""
    from dask.array.utils import meta_from_array
    da = _da()
    if isinstance(x, da.Array):
        return meta_from_array(x._meta, ndim=max(1, x.ndim) + extra, dtype=x.dtype)
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return meta_from_array(x, ndim=max(1, x.ndim) + extra, dtype=x.dtype)
    return x  # a scalar: passed as it is (NEP 50 weak)


def _meta_call(func, inputs, extra=0, **kwargs):
    """func on zero-size stand-ins of the inputs: the results' types (no GPU for NumPy chunks)."""
    return func(*[_meta(x, extra) for x in inputs], **kwargs)


def _should_delegate(self, inputs, out):
    from dask.array.core import _should_delegate as delegate
    return any(delegate(self, x) for x in tuple(inputs) + tuple(out))


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """dask.array.Array.__array_ufunc__ for cufunc's functions (see the module's docstring)."""
    out = kwargs.get("out", ())
    if _should_delegate(self, inputs, out):
        return NotImplemented
    handler = _METHODS.get(method)
    if handler is None:
        return NotImplemented
    return handler(ufunc, inputs, kwargs)


def _call(ufunc, inputs, kwargs):
    da = _da()
    out = kwargs.pop("out", None)
    where = kwargs.pop("where", True)
    if ufunc.signature is not None or ufunc.nout > 1:
        if out is not None or where is not True:
            return NotImplemented  # as dask's apply_gufunc: no out=, no where=
        signature = ufunc.signature or "%s->%s" % (",".join(["()"] * ufunc.nin),
                                                   ",".join(["()"] * ufunc.nout))
        meta = _meta_call(ufunc, inputs, extra=1, **kwargs)
        if any(k in kwargs for k in ("axes", "axis", "keepdims")):
            return da.apply_gufunc(ufunc, signature, *inputs, meta=meta, **kwargs)
        return _gufunc(ufunc, signature, inputs, meta, kwargs)
    op = functools.partial(ufunc, **kwargs) if kwargs else ufunc
    inputs = [np.asarray(a) if isinstance(a, (list, tuple)) else a for a in inputs]
    meta = _meta_call(op, inputs)
    if out is not None or where is not True:  # dask's elemwise: its out= and where= semantics
        if out is not None:
            out = out[0] if isinstance(out, tuple) and len(out) == 1 else out
        from dask.array.core import elemwise
        return elemwise(op, *inputs, dtype=meta.dtype, out=out, where=where)
    return _elemwise(op, inputs, meta)


def _elemwise(op, inputs, meta):
    """dask's elemwise(op, *inputs) without its per-chunk wrapper and second meta call: meta is
    op's result on the inputs' zero-size stand-ins, so every chunk's result has its dtype already.
    The same broadcasting, indices and graph name as elemwise's."""
    from dask.array.core import blockwise, broadcast_shapes, is_scalar_for_elemwise
    from dask.base import is_dask_collection, tokenize
    from dask.utils import funcname
    args = inputs  # lists already arrays (_call)
    shapes = []
    for a in args:
        shape = getattr(a, "shape", ())
        if not isinstance(shape, tuple) or any(is_dask_collection(n) for n in shape):
            shape = ()  # Delayed shapes, dask dataframe scalars
        shapes.append(shape)
    ndim = len(broadcast_shapes(*shapes))  # raises ValueError on a mismatch
    pairs = []
    for a in args:
        pairs += [a, None if is_scalar_for_elemwise(a) else tuple(range(a.ndim))[::-1]]
    fname = funcname(op)
    name = "%s-%s" % (fname, tokenize(op, meta.dtype, *args, True))
    return blockwise(op, tuple(range(ndim))[::-1], *pairs, name=name, token=fname.strip("_"),
                     dtype=meta.dtype, meta=meta)


class _GufuncTask:
    """One chunk's gufunc call, as _gufunc's blockwise hands it the blocks: an input core
    dimension that the outputs lack comes as a list of its blocks (one: core dimensions are one
    chunk), which is unwrapped here instead of concatenated by dask (a one-block concatenation
    that copies a CuPy chunk to the worker thread's current device, across GPUs)."""

    def __init__(self, ufunc, kwargs):
        self.ufunc, self.kwargs = ufunc, kwargs
        self.__name__ = ufunc.__name__

    def __call__(self, *blocks):
        args = []
        for b in blocks:
            while isinstance(b, (list, tuple)):
                if len(b) != 1:
                    raise ValueError("a gufunc's core dimension spans several chunks")
                b = b[0]
            args.append(b)
        return self.ufunc(*args, **self.kwargs)

    def __dask_tokenize__(self):
        from dask.base import normalize_token
        # the ufunc as dask names it: a cufunc function by its identity (token, registered by
        # _register_tokens), any other (NumPy's, in graph tests) as dask names it
        return "cufunc-gufunc", normalize_token(self.ufunc), normalize_token(self.kwargs)


def _gufunc(ufunc, signature, inputs, meta, kwargs):
    """da.apply_gufunc(ufunc, signature, *inputs, meta=meta) without its concatenation of the
    contracted core dimensions (_GufuncTask): the same loop and core dimensions, checks, graph
    shape and outputs. Each chunk's call reads its blocks where they are."""
    from itertools import chain
    from dask.array.core import Array
    from dask.array.gufunc import _parse_gufunc_signature
    from dask.array.utils import meta_from_array
    from dask.core import flatten
    from dask.highlevelgraph import HighLevelGraph
    da = _da()
    in_core, out_core = _parse_gufunc_signature(signature)
    nout = None if isinstance(out_core, tuple) else len(out_core)
    outs = [out_core] if nout is None else out_core
    args = [da.asarray(a) for a in inputs]
    if len(in_core) != len(args):
        raise ValueError("%s takes %d arguments (signature %s), %d given"
                         % (ufunc.__name__, len(in_core), signature, len(args)))
    nloop = [a.ndim - len(cd) for a, cd in zip(args, in_core)]
    if min(nloop) < 0:
        k = nloop.index(min(nloop))
        raise ValueError("%s: input %d has %d dimension(s), its core dimensions %s need %d"
                         % (ufunc.__name__, k, args[k].ndim, in_core[k], len(in_core[k])))
    top = max(nloop)
    loop = tuple("__loopdim%d__" % d for d in range(top))
    dims = [loop[top - n:] + cd for n, cd in zip(nloop, in_core)]
    core = {}
    for a, ds in zip(args, dims):
        for d, size, chunks in zip(ds, a.shape, a.chunks):
            if d in loop:
                continue
            if core.setdefault(d, size) != size:
                raise ValueError("Dimension `'%s'` with different lengths in arrays" % d)
            if len(chunks) > 1:
                raise ValueError("Core dimension `'%s'` consists of multiple chunks. To fix, "
                                 "rechunk into a single chunk along this dimension" % d)
    if any(d not in core for ocd in outs for d in ocd):
        raise ValueError("%s: an output core dimension of %s is in no input"
                         % (ufunc.__name__, signature))
    task = _GufuncTask(ufunc, kwargs)
    tmp = da.blockwise(task, loop, *chain.from_iterable(zip(args, dims)), concatenate=False,
                       meta=meta)
    metas = (meta,) if nout is None else tuple(meta)
    keys = list(flatten(tmp.__dask_keys__()))
    name, tok = keys[0][0].split("-", 1)
    leaves = []
    for i, (ocd, m) in enumerate(zip(outs, metas)):
        core_shape = tuple(core[d] for d in ocd)
        leaf = "%s_%d-%s" % (name, i, tok)
        dsk = {(leaf,) + key[1:] + (0,) * len(ocd): ((operator.getitem, key, i) if nout else key)
               for key in keys}
        graph = HighLevelGraph.from_collections(leaf, dsk, dependencies=[tmp])
        shape = tmp.shape + core_shape
        leaves.append(Array(graph, leaf, chunks=tmp.chunks + tuple((c,) for c in core_shape),
                            shape=shape, meta=meta_from_array(m, len(shape))))
    return leaves[0] if nout is None else tuple(leaves)


def _outer(ufunc, inputs, kwargs):
    da = _da()
    if "out" in kwargs or len(inputs) != 2:
        return NotImplemented
    a, b = (x if isinstance(x, da.Array) else da.asarray(x) for x in inputs)
    ia = tuple(range(a.ndim))
    ib = tuple(range(a.ndim, a.ndim + b.ndim))
    op = functools.partial(ufunc.outer, **kwargs) if kwargs else ufunc.outer
    meta = op(_meta(a), _meta(b))
    return da.blockwise(op, ia + ib, a, ia, b, ib, dtype=meta.dtype,
                        meta=meta.reshape((0,) * (a.ndim + b.ndim)) if a.ndim + b.ndim else None)


def _reduce_chunk(ufunc, x, axis=None, keepdims=False, computing_meta=False, **kw):
    return ufunc.reduce(x, axis=axis, keepdims=keepdims, **kw)


# ---- partials on several GPUs ------------------------------------------------------------------

def _device_of(x):
    """The CUDA device of a CuPy array (its memory's), None for anything else (NumPy chunks)."""
    d = getattr(getattr(x, "data", None), "device_id", None)
    return d if isinstance(d, int) else None


def _on(device):
    """The CuPy device context for work on `device` (CuPy works on its current device), or none."""
    if device is None:
        return contextlib.nullcontext()
    import cupy
    return cupy.cuda.Device(device)


def _to_device(x, device):
    """CuPy array x on `device`: x itself when it is there, else a copy made device to device and
    ordered on the GPUs, not the host: the copy (on `device`'s current stream) waits for the work
    queued on x's device's current stream (the stream x was made on: cufunc's results are ordered
    there), and that stream waits for the copy, so x's memory is not handed out again before the
    copy read it."""
    import cupy as cp
    src = x.data.device_id
    if src == device:
        return x
    with cp.cuda.Device(src):
        x = cp.ascontiguousarray(x)
        made = cp.cuda.Event(disable_timing=True)
        made.record()
        src_stream = cp.cuda.get_current_stream()
    with cp.cuda.Device(device):
        s = cp.cuda.get_current_stream()
        s.wait_event(made)
        y = cp.empty(x.shape, x.dtype)
        if x.nbytes:
            cp.cuda.runtime.memcpyPeerAsync(y.data.ptr, device, x.data.ptr, src, x.nbytes, s.ptr)
        copied = cp.cuda.Event(disable_timing=True)
        copied.record(s)
    with cp.cuda.Device(src):
        src_stream.wait_event(copied)
    return y


def _leaves(parts):
    if isinstance(parts, (list, tuple)):
        for p in parts:
            yield from _leaves(p)
    else:
        yield parts


def _map_leaves(fn, parts):
    if isinstance(parts, (list, tuple)):
        return [_map_leaves(fn, p) for p in parts]
    return fn(parts)


def _gather(parts):
    """(parts, device): Dask's nested list of partials with every device partial on the device of
    the first one (the others moved there by _to_device), and that device (None: host chunks)."""
    devices = [_device_of(p) for p in _leaves(parts)]
    home = next((d for d in devices if d is not None), None)
    if home is not None and any(d not in (None, home) for d in devices):
        parts = _map_leaves(lambda p: p if _device_of(p) in (None, home) else
                            _to_device(p, home), parts)
    return parts, home


def _concatenated(parts, axis):
    """The partials Dask hands a combining task (a nested list over the reduced axes), on one
    device and concatenated there: (array, device)."""
    if not isinstance(parts, (list, tuple)):
        return parts, _device_of(parts)
    from dask.array.core import _concatenate2
    parts, home = _gather(parts)
    axes = sorted(axis) if axis is not None else list(range(_depth(parts)))
    with _on(home):
        return _concatenate2(parts, axes=axes), home


def _depth(parts):
    d = 0
    while isinstance(parts, (list, tuple)):
        parts, d = parts[0], d + 1
    return d


def _reduce_combine(ufunc, parts, axis=None, keepdims=False, computing_meta=False, **kw):
    """Dask's combine and aggregate steps of ufunc.reduce: the partials gathered on one device
    and concatenated there (_concatenated), then reduced by one cufunc call on that device."""
    x, _ = _concatenated(parts, axis)
    return ufunc.reduce(x, axis=axis, keepdims=keepdims, **kw)


def _reduce(ufunc, inputs, kwargs):
    da = _da()
    (x,) = inputs
    if "out" in kwargs or kwargs.get("where", True) is not True:
        return NotImplemented
    axis = kwargs.pop("axis", 0)
    keepdims = kwargs.pop("keepdims", False)
    dtype = kwargs.pop("dtype", None)
    if "initial" in kwargs:
        return NotImplemented  # folded in once: not per chunk
    kw = {} if dtype is None else {"dtype": dtype}
    kw.update(kwargs)  # stream=
    if dtype is None:  # the accumulator type: the loop of (x.dtype, x.dtype)
        m = _meta(x)
        dtype = ufunc(m, m).dtype
    chunk = functools.partial(_reduce_chunk, ufunc, **kw)
    combine = functools.partial(_reduce_combine, ufunc, **{k: v for k, v in kw.items()
                                                           if k != "dtype"})
    from dask.array.utils import meta_from_array
    nd = x.ndim if keepdims else x.ndim - (x.ndim if axis is None else len(np.atleast_1d(axis)))
    meta = meta_from_array(x._meta, ndim=nd, dtype=dtype)
    return da.reduction(x, chunk, combine, axis=axis, keepdims=keepdims, dtype=dtype,
                        combine=combine, meta=meta, concatenate=False)


def _accumulate(ufunc, inputs, kwargs):
    (x,) = inputs
    ident = ufunc.identity
    if "out" in kwargs or ident is None or isinstance(ident, str):
        return NotImplemented  # cumreduction starts each row from the identity
    axis = kwargs.pop("axis", 0)
    dtype = kwargs.pop("dtype", None)
    if dtype is None:
        m = _meta(x)
        dtype = ufunc(m, m).dtype
    extra = dict(kwargs)
    from dask.array.reductions import cumreduction
    return cumreduction(_Accumulate(ufunc, extra), _Carry(ufunc, extra), ident, x, axis=axis,
                        dtype=dtype, method="sequential")


class _Carry:
    """cumreduction's binop: the ufunc on the running value and the next chunk (or the previous
    chunk's last row), the running value first moved to the device of the other operand when the
    chunks live on several GPUs (_to_device: device to device, no host)."""

    def __init__(self, ufunc, extra):
        self.ufunc, self.extra = ufunc, extra
        self.__name__ = ufunc.__name__

    def __call__(self, carry, x):
        d = _device_of(x)
        if d is not None and _device_of(carry) not in (None, d):
            carry = _to_device(carry, d)
        return self.ufunc(carry, x, **self.extra)

    def __dask_tokenize__(self):
        from dask.base import normalize_token
        # the ufunc as dask names it: a cufunc function by its identity (token, registered by
        # _register_tokens), any other (NumPy's, in graph tests) as dask names it
        return "cufunc-carry", normalize_token(self.ufunc), normalize_token(self.extra)


class _Accumulate:
    """ufunc.accumulate of one chunk, as cumreduction calls it. An object, not a closure: dask
    tokenizes a closure by pickling it (the ufunc and its sources) on every call."""

    def __init__(self, ufunc, extra):
        self.ufunc, self.extra = ufunc, extra
        self.__name__ = "%s_accumulate" % ufunc.__name__  # dask names the graph's keys after it

    def __call__(self, block, axis=None, dtype=None):
        return self.ufunc.accumulate(block, axis=axis, dtype=dtype, **self.extra)

    def __dask_tokenize__(self):
        from dask.base import normalize_token
        # the ufunc as dask names it: a cufunc function by its identity (token, registered by
        # _register_tokens), any other (NumPy's, in graph tests) as dask names it
        return "cufunc-accumulate", normalize_token(self.ufunc), normalize_token(self.extra)


def _reduce_all_chunk(reducer, init, stream, c, axis=None, keepdims=False, computing_meta=False,
                      **kw):
    """cuda.reduce of one chunk (or of the partials), in the shape da.reduction expects. A
    device chunk's result stays on the device (res=); a host chunk's is a NumPy scalar."""
    shape = (1,) * c.ndim if keepdims else ()
    if isinstance(c, np.ndarray):
        return np.asarray(reducer(c, init=init, stream=stream)).reshape(shape)
    with _on(_device_of(c)):  # CuPy allocates on its current device: the chunk's
        res = np.empty_like(c, shape=(1,))  # the chunk's array type (__array_function__)
    reducer(c, res=res, init=init, stream=stream)
    return res.reshape(shape)


def _reduce_all_combine(reducer, init, stream, parts, axis=None, keepdims=False,
                        computing_meta=False, **kw):
    """cuda.reduce over the partials: gathered on one device and concatenated there."""
    c, _ = _concatenated(parts, axis)
    return _reduce_all_chunk(reducer, init, stream, c, axis=axis, keepdims=keepdims)


def reduce_all(reducer, arr, size=None, res=None, init=0, stream=0):
    """cuda.reduce on a dask array: a lazy 0-d dask array (da.reduction, cuda.reduce per chunk
    and over the partials). init is folded into each chunk's partial and into their combination:
    the result is one call's when init is an identity of the function (0 for sums, the default)
    or the function is idempotent (max, min)."""
    da = _da()
    from dask.array.utils import meta_from_array
    if res is not None:
        raise TypeError("cuda.reduce on a dask array: res= is not supported (the result is a "
                        "lazy 0-d dask array; compute it into place)")
    if size is not None:
        arr = arr[:size]
    f = functools.partial(_reduce_all_chunk, reducer, init, stream)
    g = functools.partial(_reduce_all_combine, reducer, init, stream)
    return da.reduction(arr, f, g, axis=None, keepdims=False, dtype=arr.dtype, combine=g,
                        concatenate=False, meta=meta_from_array(arr._meta, ndim=0))


_METHODS = {"__call__": _call, "outer": _outer, "reduce": _reduce, "accumulate": _accumulate}
