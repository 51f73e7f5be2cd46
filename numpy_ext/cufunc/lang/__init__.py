"""The cufunc kernel language: Python function -> typed IR -> CUDA C (see docs/language.md).

    from cufunc.lang import translate, jit, local
    r = translate(f, [float32, float32])
    r.source, r.name, r.return_type, r.arg_types, r.device_array_globals

This package imports only NumPy and the standard library (not cufunc._core)."""

from .. import types as _T
from ..errors import TypingError, UnsupportedError
from ..errors import user_frames_only as _user_frames_only
from . import typesys as _TS
from . import policy as _policy
from . import device as _device
from .device import DeviceFunction, const, jit, local
from .source import SourceError, call_deep as _call_deep
from .emit import emit_source as _emit_source
from .translator import Unit as _Unit
from .translator import translate_function as _translate_function

__all__ = ["translate", "jit", "local", "const", "DeviceFunction", "TranslationResult", "inspect_cuda",
           "TypingError", "UnsupportedError", "SourceError"]


class TranslationResult:
    """What translate() returns.

    source     complete CUDA C (starts with #include "cufunc/runtime.cuh"); byte-identical for
               the same input; safe to concatenate with other results into one translation unit
               (every definition is wrapped in an #ifndef guard named after it).
    name       C name of the entry function.
    return_type, arg_types   cufunc types (return_type may be void or a Tuple).
    return_struct            for a Tuple return: the C struct name; field fI holds item I, of
                             the C type of return_type[I]; else None.
    device_array_globals     [(c_param_name, obj)] for captured device arrays (see translate).
    device_array_types       the matching cufunc Array types.
    """

    __slots__ = ("source", "name", "return_type", "arg_types", "return_struct",
                 "device_array_globals", "device_array_types", "fastmath", "typing")

    def __repr__(self):
        return "<TranslationResult %s: %s(%s)>" % (self.name, self.return_type,
                                                    ", ".join(map(str, self.arg_types)))


def _arg_types(argtypes):
    out = []
    for a in argtypes:
        t = _T.to_type(a)
        if isinstance(t, (_T.Void, _T.Tuple)):
            raise TypeError("%s is not an argument type" % t)
        out.append(t)
    return out


@_user_frames_only  # a translation error shows the user's line, not the translator's frames
def translate(pyfunc, argtypes, return_type=None, *, fastmath=False, typing="numpy",
              debug=False):
    """Translate ``pyfunc`` for the argument types ``argtypes`` into CUDA C.

    argtypes: cufunc types (or anything cufunc.types.to_type accepts): scalars, passed to the C
    function by value, and array types (``float32[:, :]``), passed as ``cf_array_ref<T, ND>`` by
    value (data pointer, shape and byte strides). return_type: None to infer it (the promotion
    of all returned values; void when nothing is returned), else the type every return value is
    converted to. A tuple return gives a Tuple return type and a C struct ``cf_tuple_<t0>_<t1>...``
    with fields ``f0, f1, ...`` (result.return_struct).

    The C function is::

        CF_LANG_FN <ret> <name>(<arg0>, <arg1>, ..., <garr0>, <garr1>, ...)

    where CF_LANG_FN is ``__device__ inline`` under CUDA (``inline`` for a host compiler), and
    the trailing ``garr`` parameters are the device arrays the function (or anything it calls)
    reads from globals: for each entry ``(c_param_name, obj)`` of
    ``result.device_array_globals``, in order, one parameter of type
    ``cf_array_ref<T, ND>`` (``result.device_array_types[i]`` gives T and ND) which the kernel
    fills from ``obj.__cuda_array_interface__`` (data pointer, shape, strides in bytes; for a
    C-contiguous array without strides, the C-order strides): the engines wrap the function with
    ``cufunc.lang.captures.loop_function``, whose descriptors are written when a kernel module is
    loaded. Nothing about these arrays but their dtype and ndim is in the source, so the compiled
    kernel can be cached on disk.

    debug=True checks assert statements (else they are compiled away) and makes a None
    returned where a number is needed fail the same way (lang/checks.py).

    Raises TypingError / UnsupportedError (pointing at the user's file and line) for programs
    outside the kernel language. The kernel must be compiled with --fmad=false unless
    fastmath=True (no contraction of a*b+c, as docs/language.md requires).

    typing: "numpy" (NumPy 2 promotion with NEP 50 Python scalars, docs/language.md) or "numba"
    (Numba's typing rules: Python literals are int64/float64, integer operations widen to
    64 bits, the return type unifies all returns; docs/typing.md). Functions the body calls are
    translated with the same rules.

    The source is found exactly (cufunc.lang.source): SourceError (an UnsupportedError) when it
    is not available or cannot be told apart (several lambdas on one line on Python 3.10, a file
    edited after import). Bodies nested up to source.MAX_NESTING (4000) levels deep translate
    (a 2000-term sum, a 1000-branch elif chain); deeper ones are an UnsupportedError at the
    user's line.
    """
    if isinstance(pyfunc, DeviceFunction):
        pyfunc = pyfunc.py_func
    types = _arg_types(argtypes)
    pol = _policy.get(typing)
    ret = None if return_type is None else _T.to_type(return_type)
    if isinstance(ret, _T.Array):
        raise UnsupportedError("functions cannot return arrays (write into an output argument)")
    def run():
        unit = _Unit(bool(fastmath), pol, bool(debug))
        return unit, _translate_function(unit, pyfunc, types, ret)
    # deep bodies (long sums, long elif chains) run with a deep stack; never a RecursionError
    unit, res = _call_deep(run, pyfunc)
    out = TranslationResult()
    out.source = _emit_source(unit, res)
    out.name = res.name
    out.return_type = _TS.concrete(res.ret_type)
    out.arg_types = list(types)
    out.return_struct = ("cf_tuple_" + "_".join(t.name for t in out.return_type.types)
                         if isinstance(out.return_type, _T.Tuple) else None)
    out.device_array_globals = [(cn, obj) for obj, at, cn in res.garrays]
    out.device_array_types = [at for obj, at, cn in res.garrays]
    out.fastmath = bool(fastmath)
    out.typing = pol.name
    return out


_device._translate = translate


def inspect_cuda(pyfunc, signature, fastmath=False):
    """The generated CUDA C of a Python function (a ufunc body, a device function) for one
    signature: 'float32(float32, float32)', a Signature, or a list of argument types."""
    if isinstance(signature, (list, tuple)) and not (
            len(signature) == 2 and isinstance(signature[1], (list, tuple))):
        ret, args = None, list(signature)
    else:
        ret, args = _T.parse_signature(signature)
    return translate(pyfunc, args, ret, fastmath=fastmath).source
