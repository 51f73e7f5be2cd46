"""@vectorize: GPU ufuncs from Python scalar functions, as Numba's ``vectorize(target='cuda')``.

    from cufunc import vectorize

    @vectorize(['float32(float32, float32)', 'float64(float64, float64)'], target='cuda')
    def rel_diff(x, y):
        return 2 * (x - y) / (x + y)

    rel_diff(a, b)                      # NumPy arrays in, NumPy array out
    rel_diff(d_a, d_b, out=d_out)       # device arrays (cufunc, CuPy, PyTorch): no host round trip

With signatures, every loop is translated at decoration, so type errors surface there. Without
signatures (Numba cannot do this), the ufunc translates a loop on the first call for each new
combination of input types, with the result type inferred.

A body may read device arrays bound to globals (a cufunc DeviceArray, a CuPy or PyTorch tensor:
any object with ``__cuda_array_interface__``), as in Numba::

    table = cuda.to_device(np.arange(16, dtype=np.float32))

    @vectorize(['float32(int32)'], target='cuda')
    def lookup(i):
        return table[i]

    lookup(idx)                         # reads table on the device
    table.copy_to_device(new_values)
    lookup(idx)                         # sees new_values

The array is captured by reference when a loop is translated (at decoration with signatures,
on the first call per input types without): the ufunc keeps the array object alive and its
kernels read it in place, so later changes of its *contents* are seen by the next call, while
binding the global name to another array later changes only loops translated after that. The kernel
gets the array's address when it is loaded, not in its source, so the compiled kernel is cached
on disk like any other (cache=True applies) and shared by processes that capture different
arrays. A call on another device than the captured array's raises ValueError naming the array.
NumPy arrays read from globals are different: they are constant tables, copied into the kernel.

The object returned is a cufunc.UFunc: its call path is C (cufunc._core.UFunc); this module only
translates bodies into loops.
"""
import functools

import numpy as np

from . import _core
from . import errors as _errors
from . import _loops
from . import _options
from . import _pickle
from . import types as _T
from .lang import translate as _translate
from .lang.captures import loop_function as _loop_function

__all__ = ["vectorize", "GPUUFunc"]



def _loop_from(pyfunc, argtypes, return_type, fastmath, typing="numpy", debug=False):
    """Translate one loop: (types, source, fn_name, options, captures) for UFunc.add_loop, and
    nout."""
    r = _translate(pyfunc, argtypes, return_type, fastmath=fastmath, debug=debug,
                   **_options.translate_options(typing))
    ret = r.return_type
    if isinstance(ret, _T.Void):
        raise TypeError("vectorize: %s returns nothing; a ufunc body must return a value "
                        "(use guvectorize to write into output arrays)" % pyfunc.__qualname__)
    outs = list(ret.types) if isinstance(ret, _T.Tuple) else [ret]
    for t in list(r.arg_types) + outs:
        if not isinstance(t, _T.Scalar):
            raise TypeError("vectorize: %s: arguments and results of a ufunc must be scalars, "
                            "not %s" % (pyfunc.__qualname__, t))
    source, name, captures = _loop_function(r, pyfunc.__qualname__)
    types = tuple(t.dtype for t in list(r.arg_types) + outs)
    return (types, source, name, _options.compile_options(fastmath, typing), captures), len(outs)


def merge_sources(sources):
    """The loops' sources as one text, each shared definition once.

    Every loop's source repeats what all translations share (the runtime #include, the language's
    prelude, device functions called by several loops); each definition sits in a top-level
    ``#ifndef NAME`` guard named after it. Guarded blocks are kept the first time their guard
    appears, an #include line the first time, other text (a gufunc's unguarded wrapper) always.
    """
    seen, out = set(), []
    for src in sources:
        lines = src.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("#ifndef "):
                depth, j = 0, i
                while j < len(lines):
                    w = lines[j].split(None, 1)[0] if lines[j].strip() else ""
                    if w in ("#if", "#ifdef", "#ifndef"):
                        depth += 1
                    elif w == "#endif":
                        depth -= 1
                        if depth == 0:
                            break
                    j += 1
                key, block = ("guard", line.split()[1]), lines[i:j + 1]
                i = j + 1
            else:
                key, block = ("text", line), [line]
                i += 1
            if key[0] == "guard" or line.startswith("#include"):
                if key in seen:
                    continue
                seen.add(key)
            if block == [""] and out and out[-1] == "":
                continue  # one blank line between blocks
            out.extend(block)
    return "\n".join(out).strip("\n") + "\n"


class GPUUFunc(_core.UFunc):
    # A GPU ufunc made by vectorize; called like a NumPy ufunc (see cufunc.vectorize). Its
    # __doc__ is the decorated function's, as for a NumPy ufunc: the base type's descriptor is
    # reused, since a class docstring would shadow it.
    __doc__ = _core.UFunc.__dict__["__doc__"]

    def inspect_cuda(self, *inputs):
        """The generated CUDA C: of every loop's device function (no arguments), or of the
        kernel a call with these inputs would launch."""
        if inputs:
            return self.kernel_source(*inputs)
        return merge_sources(loop[1] for loop in self.loops)

    def __dask_tokenize__(self):
        """Dask's token of this function: its identity (_pickle.dask_token), never a pickle of
        it, also in graphs that reach it before any cufunc call on a dask array did."""
        return _pickle.dask_token(self)

    def __reduce__(self):
        """Pickled as its Python function and signatures (Dask's workers; cufunc/_pickle.py)."""
        return _pickle.reduce(self, "ufunc", _build)

    def at(self, a, indices, b=None):
        """Unbuffered in-place ``a[indices] = self(a[indices], b)`` on a DeviceArray, repeated
        indices accumulating (as np.add.at); see cufunc._at for the method used per type."""
        from ._at import ufunc_at
        return ufunc_at(self, a, indices, b)

    @property
    def signatures(self):
        return ["%s(%s)" % (", ".join(str(t) for t in types[self.nin:]),
                            ", ".join(str(t) for t in types[:self.nin]))
                for types in (loop[0] for loop in self.loops)]


# NEP 50 for a loop compiled on demand (the same rule the kernel language mirrors)
_weak_arg_type = _loops.weak_arg_type


def _make_compiler(pyfunc, fastmath, typing="numpy", debug=False):
    @_errors.user_frames_only
    def compile_loop(in_types, out_dtype):
        strong = [t for t in in_types if isinstance(t, np.dtype)]
        args = [t if isinstance(t, np.dtype) else _weak_arg_type(t, strong) for t in in_types]
        ret = None if out_dtype is None else _T.from_dtype(out_dtype)
        spec, _ = _loop_from(pyfunc, [_T.from_dtype(a) for a in args], ret, fastmath, typing,
                             debug)
        return spec
    return compile_loop


def _count_outputs(pyfunc):
    """The number of outputs of a signature-less ufunc, read off its return statements: a body
    that returns a tuple of n values makes a ufunc with n outputs."""
    import ast
    from .lang.source import get_source
    try:
        fn = get_source(pyfunc).tree   # the exact def or lambda (not the first on its line)
    except TypeError:
        return 1  # no source (UnsupportedError): the translator reports it at the first call
    if isinstance(fn, ast.Lambda):
        return len(fn.body.elts) if isinstance(fn.body, ast.Tuple) else 1
    counts = set()
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return) and node.value is not None:
            counts.add(len(node.value.elts) if isinstance(node.value, ast.Tuple) else 1)
        stack.extend(ast.iter_child_nodes(node))
    if len(counts) > 1:
        raise TypeError("vectorize: %s returns tuples of different lengths" % pyfunc.__qualname__)
    return counts.pop() if counts else 1


def _nargs(pyfunc):
    import inspect
    params = inspect.signature(pyfunc).parameters.values()
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY) for p in params):
        raise TypeError("vectorize: %s must take a fixed number of positional arguments"
                        % pyfunc.__qualname__)
    return len(params)


def _build(pyfunc, signatures, identity, fastmath, typing="numpy", debug=False):
    nin = _nargs(pyfunc)
    if nin < 1:
        raise TypeError("vectorize: %s takes no arguments" % pyfunc.__qualname__)
    name = getattr(pyfunc, "__name__", "ufunc")
    doc = getattr(pyfunc, "__doc__", None)
    specs, nouts = [], set()
    for sig in signatures:
        ret, args = _T.parse_signature(sig)
        if len(args) != nin:
            raise TypeError("vectorize: signature %r has %d arguments, %s takes %d"
                            % (sig, len(args), pyfunc.__qualname__, nin))
        spec, nout = _loop_from(pyfunc, args, ret, fastmath, typing, debug)
        specs.append(spec)
        nouts.add(nout)
    if len(nouts) > 1:
        raise TypeError("vectorize: the signatures of %s disagree on the number of outputs"
                        % pyfunc.__qualname__)
    nout = nouts.pop() if nouts else _count_outputs(pyfunc)
    compiler = None if signatures else _make_compiler(pyfunc, fastmath, typing, debug)
    uf = GPUUFunc(name, nin, nout, identity=identity, doc=doc, compiler=compiler,
                  rules=_options.call_rules(typing))
    for spec in specs:
        uf.add_loop(*spec)
    uf.py_func = pyfunc
    uf.typing = typing
    # what pickling sends
    uf._cf_remake = (pyfunc, list(signatures), identity, fastmath, typing)
    functools.update_wrapper(uf, pyfunc, assigned=("__module__", "__qualname__"), updated=())
    return uf


_IDENTITIES = {"reorderable", None}


def vectorize(ftylist_or_function=(), target="cuda", identity=None, fastmath=False, cache=True,
              typing="numpy", debug=False, **kws):
    """Make a GPU ufunc from a Python scalar function (Numba's ``vectorize``, target='cuda').

    Parameters
    ----------
    ftylist_or_function : list, str, Signature or callable, optional
        The loops' signatures: strings such as ``'float32(float32, float32)'`` or type objects
        such as ``float32(float32, float32)``, one signature, or the function itself (bare
        ``@vectorize``). Without signatures, a loop is compiled on the first call with each new
        combination of input types.
    target : {"cuda", "gpu"}
        Only the GPU; any other target is a ``ValueError``.
    identity : {0, 1, "reorderable", None} or number, optional
        The value ``ufunc.reduce`` starts from, as Numba's.
    fastmath : bool, optional
        Allow contraction into fused multiply-adds and fast approximate math (CUDA's
        ``--use_fast_math``). Off by default: results follow docs/language.md's rule.
    cache : bool, optional
        Accepted for Numba compatibility and changes nothing: kernels are always cached on disk
        by their generated source (``CUFUNC_CACHE=0`` turns the disk cache off), those of bodies
        reading captured device arrays too (their addresses are not in the source).
    typing : {"numpy", "numba"}, optional
        ``"numpy"`` (the default): the kernel language's NumPy 2 meaning (docs/language.md);
        ``"numba"``: Numba's typing rules and its call rules (its loop choice and scalar conversion): what
        ``cufunc.numba.vectorize`` makes (docs/numba.md, docs/typing.md).
    debug : bool, optional
        Check ``assert`` statements (else compiled away, as Numba does); a failed one stops the
        kernel and the next synchronising call raises ``cufunc.errors.DeviceAssertionError`` (an
        ``AssertionError``; CUDA leaves the context unusable). docs/language-arrays.md.
    **kws
        ``nopython=True`` is accepted with a ``RedundantOptionWarning`` (cufunc always compiles
        without Python objects); ``nopython=False`` and ``forceobj=True`` are a ``TypeError``, as
        is any other keyword (Numba's CPU options ``nogil``, ``parallel``, ... included).

    Returns
    -------
    UFunc or callable
        The ufunc (a ``cufunc.UFunc``), or, when signatures were given, a decorator making it.

    Raises
    ------
    TypingError, UnsupportedError
        The body is outside the kernel language, at the body's line (when signatures are given:
        at decoration; otherwise at the first call).

    Examples
    --------
    ::

        @vectorize(['float32(float32, float32)', 'float64(float64, float64)'])
        def hypot(x, y):
            return math.sqrt(x * x + y * y)

        hypot(a, b)              # NumPy arrays, DeviceArrays, CuPy arrays, torch tensors...
        hypot.reduce(a)          # and NumPy's ufunc methods
    """
    _options.check("vectorize", kws, named=("target", "identity", "fastmath", "cache", "typing",
                                            "debug"))
    _options.check_typing("vectorize", typing)
    if target not in ("cuda", "gpu"):
        raise ValueError("cufunc.vectorize supports target='cuda' only, not %r (for the CPU, "
                         "use numba.vectorize or numpy.vectorize)" % (target,))
    if not (identity in _IDENTITIES or isinstance(identity, (int, float, complex, np.generic))):
        raise ValueError("identity must be a number, 'reorderable' or None, not %r" % (identity,))

    @_errors.user_frames_only
    def wrap(pyfunc, sigs):
        if not callable(pyfunc):
            raise TypeError("vectorize: %r is not a function" % (pyfunc,))
        return _build(pyfunc, sigs, identity, fastmath, typing, bool(debug))

    if callable(ftylist_or_function) and not isinstance(ftylist_or_function,
                                                        (_T.Signature, _T.Type, str)):
        return wrap(ftylist_or_function, [])
    sigs = ftylist_or_function
    if isinstance(sigs, (str, _T.Signature)):
        sigs = [sigs]
    sigs = list(sigs)
    return functools.partial(wrap, sigs=sigs)  # no frame of its own in a traceback
