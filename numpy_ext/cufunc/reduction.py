"""cuda.reduce and cuda.Reduce: reductions on the GPU with a binary Python function, as Numba's.

    from cufunc import cuda

    @cuda.reduce
    def sum_reduce(a, b):
        return a + b

    total = sum_reduce(np.arange(1000, dtype=np.float32))     # a host (NumPy) scalar
    sum_reduce(d_arr, res=d_res)                              # into d_res[0], nothing waits
    big = cuda.Reduce(lambda a, b: a if a > b else b)         # lambdas too

The function is translated by the kernel language (docs/language.md) for the array's dtype, with both
arguments and the result of that dtype (a body that does not type for it raises TypingError on
the first call with that dtype). The GPU combines elements in no fixed order -- vector lanes,
threads, warps and blocks each fold their own share, then the shares are combined -- so the
function must be **associative and commutative**; with a function that is not, the result is
undefined (it differs from a sequential fold). Floating-point sums are associative only up to
rounding: they differ from NumPy's pairwise sums in the last bits.

Calling ``r(arr, size=None, res=None, init=0, stream=0)``:

* arr: a host or device array of any numeric dtype (bool, integers, floats, complex), of any
  shape and strides (all elements are reduced, read in place without a copy);
* size: reduce only the first ``size`` elements of a 1-d array;
* init: the initial value, converted to the array's dtype (``arr.dtype.type(init)``) and folded
  in exactly once: result = f(init, f-reduction of the elements); an empty array gives init;
* res: a device array of the array's dtype: the result goes to ``res[0]`` on the device, the call
  returns None and does not wait for the GPU; without res the call returns a NumPy scalar;
* stream: 0 (the default stream), a cufunc Stream, or any object with ``__cuda_stream__``.

The whole reduction is one kernel launch (the last block to finish combines the blocks' partial
results), reading the array with 16-byte vector loads where it is contiguous and aligned.

The function may read device arrays bound to globals (a cufunc DeviceArray, or any object with
``__cuda_array_interface__``), e.g. a weight table indexed by the values::

    w = cuda.to_device(weights)                  # the array's int64 values index w
    @cuda.reduce
    def heaviest(a, b):                          # the value of largest weight, smallest on ties
        return a if w[a] > w[b] or (w[a] == w[b] and a < b) else b

They are captured by reference when the function is translated for a dtype (first call with that
dtype): the reduction keeps them alive and reads their contents at the time the kernel runs (a
later ``copy_to_device`` is seen by the next call). Their addresses reach the kernel when it is
loaded, not through its source, so kernels stay cached on disk; a call on another device than a
captured array's raises ValueError naming it.
"""
import inspect

from . import _env
from . import errors as _errors
from . import _options
from . import _pickle
from . import types as _T

__all__ = ["Reduce", "reduce"]

_core = _env.core


def _check_binary(functor):
    if not callable(functor):
        raise TypeError("cuda.reduce: %r is not a function" % (functor,))
    py = getattr(functor, "py_func", functor)   # a cuda.jit(device=True) function
    try:
        params = list(inspect.signature(py).parameters.values())
    except (TypeError, ValueError):
        raise TypeError("cuda.reduce: %r has no Python signature; pass a Python function or a "
                        "lambda of two arguments" % (functor,)) from None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) != 2 or len(positional) != 2:
        name = getattr(py, "__qualname__", repr(py))
        raise TypeError("cuda.reduce: %s must be a binary function (two positional arguments), "
                        "it takes %d" % (name, len(params)))
    return py


def _make_compiler(pyfunc, typing="numpy"):
    @_errors.user_frames_only
    def compile_loop(dtype):
        from .lang import translate
        from .lang.captures import loop_function
        t = _T.from_dtype(dtype)
        r = translate(pyfunc, [t, t], t, **_options.translate_options(typing))
        source, name, captures = loop_function(r, getattr(pyfunc, "__qualname__", "reduce"))
        return (source, name, _options.compile_options(False, typing), captures)
    return compile_loop


if _core is not None:
    _Base = _core.Reducer
else:
    class _Base:
        """Stands in for cufunc._core.Reducer when the C extension is missing."""

        def __new__(cls, *args, **kwargs):
            return object.__new__(cls)

        def __call__(self, *args, **kwargs):
            _env.require_core("cuda.reduce")


class Reduce(_Base):
    """A GPU reduction with a binary function (Numba's ``cuda.Reduce``).

    ``Reduce(functor)`` checks that the functor takes two arguments; it is translated per dtype on
    first use. Call it as ``r(arr, size=None, res=None, init=0, stream=0)``: it reduces the first
    ``size`` elements of the 1-d array ``arr`` from ``init``, and returns the result (or writes it
    to the device array ``res``).

    Parameters
    ----------
    functor : callable
        The binary function, associative and commutative.
    typing : {'numpy', 'numba'}, optional
        "numpy" (the default) or "numba" (Numba's typing rules: what ``cufunc.numba.cuda.Reduce``
        makes).
    **options
        Numba's Reduce takes no options, nor does this one: ``nopython=True`` is accepted with a
        RedundantOptionWarning, any other keyword is a TypeError naming it.
    """

    def __new__(cls, functor, typing="numpy", **options):
        _options.check("cuda.Reduce", options, named=("typing",))
        _options.check_typing("cuda.Reduce", typing)
        py = _check_binary(functor)
        name = getattr(py, "__name__", "reduce")
        if name == "<lambda>":
            name = "lambda"
        if _core is None:
            self = _Base.__new__(cls)
        else:
            self = _Base.__new__(cls, name, _make_compiler(py, typing))
        return self

    def __init__(self, functor, typing="numpy", **options):
        # options: checked in __new__
        self.functor = functor
        self.typing = typing
        self.py_func = _check_binary(functor)
        self.__doc__ = getattr(self.py_func, "__doc__", None)

    def __dask_tokenize__(self):
        """Dask's token of this function: its identity (_pickle.dask_token), never a pickle of
        it, also in graphs that reach it before any cufunc call on a dask array did."""
        return _pickle.dask_token(self)

    def __reduce__(self):
        # by its function, with the source lines a process without the file needs (Dask's
        # workers: cufunc/_pickle.py)
        return _pickle.reduce_reducer(self, Reduce)


def reduce(functor, typing="numpy", **options):
    """Make a GPU reduction from a binary Python function (Numba's ``cuda.reduce``).

    Parameters
    ----------
    functor : callable
        A function of two scalars returning one, associative and commutative (cufunc combines
        values in whatever order its kernels find fastest). Its body is in the kernel language
        (docs/language.md); it is compiled for each dtype it is called on.
    typing : {"numpy", "numba"}, optional
        The body's typing rules: NumPy's (the default) or Numba's (what
        ``cufunc.numba.cuda.reduce`` makes; docs/typing.md).
    **options
        Numba's options: none has an effect; an unknown one is a ``TypeError``.

    Returns
    -------
    Reduce
        Call it as ``r(arr, size=None, res=None, init=0, stream=0)``: the reduction of a 1-d
        array (NumPy, device or foreign GPU array), or of its first ``size`` elements, starting
        from ``init``; written into the device array ``res`` when given.

    Examples
    --------
    As a decorator::

        @cuda.reduce
        def max_reduce(a, b):
            return a if a > b else b

        max_reduce(cuda.to_device(np.arange(10.0)))   # 9.0
    """
    _options.check("cuda.reduce", options, named=("typing",))   # warns here, at the user's line
    return Reduce(functor, typing=typing)
