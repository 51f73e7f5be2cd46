"""@guvectorize: GPU generalized ufuncs from Python functions, as Numba's
``guvectorize(..., target='cuda')``.

    from cufunc import guvectorize

    @guvectorize(['void(float32[:,:], float32[:,:], float32[:,:])'], '(m,n),(n,p)->(m,p)',
                 target='cuda')
    def matmul(a, b, c):
        for i in range(a.shape[0]):
            for j in range(b.shape[1]):
                s = 0.0
                for k in range(a.shape[1]):
                    s += a[i, k] * b[k, j]
                c[i, j] = s

    matmul(a, b)                        # loop dimensions broadcast as in NumPy: (N,m,n) @ (n,p)
    matmul(d_a, d_b, out=d_c)           # device arrays (cufunc, CuPy, PyTorch): no host round trip

The body gets each argument as an array of its core shape (any strides), or a scalar for an input
declared as one with layout '()'. It writes its results into the output arguments and returns
nothing. A scalar output (layout '()') is written the Numba way, ``out[0] = v``, whether it is
declared ``T[:]`` or ``T``. A function that takes only the inputs may instead *return* its '()'
outputs (a tuple for several): ``@guvectorize(['float32(float32[:])'], '(n)->()')``.

With a type list every loop is translated at decoration. Without one (``@guvectorize('(n)->()')``;
Numba cannot do this), a loop is translated on the first call for each new combination of input
types; outputs take the dtype of ``out=`` when given, else NumPy's result type of the inputs.

The body may read device arrays bound to globals (a cufunc DeviceArray, or any object with
``__cuda_array_interface__``: CuPy, PyTorch), of any dtype and number of dimensions, indexed as
arrays are (``weights[i, j]``, ``weights.shape[0]``)::

    weights = cuda.to_device(w)                         # a (k, n) float32 array

    @guvectorize(['void(int64, float32[:], float32[:])'], '(),(n)->()')
    def row_dot(i, x, out):                             # weights[i, :] . x
        s = 0.0
        for j in range(x.shape[0]):
            s += weights[i, j] * x[j]
        out[0] = s

As in vectorize, the array is captured by reference when a loop is translated: the gufunc keeps
it alive, its kernels read its contents at the time they run (a later ``copy_to_device`` is seen
by the next call), its address is given to the kernel when the kernel is loaded rather than
written in the source (so kernels are cached on disk, cache=True included), and a call on
another device than the array's raises ValueError naming it.

The object returned is a cufunc GUFunc: its call path is C (cufunc._core.GUFunc), which also takes
``out=`` (a tuple for several outputs), ``axes=`` / ``axis=`` as NumPy gufuncs do, ``casting=`` and
``stream=``.
"""
import functools
import inspect

import numpy as np

from . import _core
from . import _loops
from . import _options
from . import _pickle
from . import errors as _errors
from . import types as _T
from .lang import translate as _translate
from .lang.captures import loop_function as _loop_function
from .vectorize import merge_sources

__all__ = ["guvectorize", "GPUGUFunc"]



def _parse_layout(layout):
    """(input core dims, output core dims) from the C parser; ValueError pointing at the error."""
    if not isinstance(layout, str):
        raise TypeError("guvectorize: the layout must be a string like '(m,n),(n,p)->(m,p)', not "
                        "%r" % (layout,))
    return _core.parse_layout(layout)


def _nparams(pyfunc):
    params = inspect.signature(pyfunc).parameters.values()
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY) for p in params):
        raise TypeError("guvectorize: %s must take a fixed number of positional arguments"
                        % pyfunc.__qualname__)
    return len(params)


class _Form:
    """How a Python function maps onto the layout: 'void' (it takes inputs and outputs and writes
    the outputs) or 'return' (it takes the inputs and returns the '()' outputs)."""

    def __init__(self, pyfunc, layout, core_in, core_out):
        self.name = pyfunc.__qualname__
        self.layout = layout
        self.core_in, self.core_out = core_in, core_out
        self.nin, self.nout = len(core_in), len(core_out)
        n = _nparams(pyfunc)
        if n == self.nin + self.nout:
            self.kind = "void"
        elif n == self.nin and all(len(c) == 0 for c in core_out):
            self.kind = "return"
        else:
            raise TypeError(
                "guvectorize: %s takes %d arguments but the layout %s has %d inputs and %d "
                "outputs: the function takes the inputs then the outputs%s"
                % (self.name, n, layout, self.nin, self.nout,
                   "" if any(core_out) else " (or only the inputs, returning the outputs)"))

    def check_arg(self, i, t):
        """The type the body sees for declared argument i (an output declared as a scalar with
        layout '()' becomes a one-element array) and how the kernel passes it (0: by value, k:
        as a k-d view)."""
        core = self.core_in[i] if i < self.nin else self.core_out[i - self.nin]
        is_out = i >= self.nin
        c = len(core)
        if isinstance(t, _T.Array):
            if t.ndim == c or (c == 0 and t.ndim == 1):
                return t, t.ndim
            raise TypeError("guvectorize: %s: the type list does not match the layout %s: "
                            "argument %d is declared %s (%d-d) but has %d core dimension%s"
                            % (self.name, self.layout, i + 1, t, t.ndim, c, "" if c == 1 else "s"))
        if isinstance(t, _T.Scalar):
            if c != 0:
                raise TypeError("guvectorize: %s: the type list does not match the layout %s: "
                                "argument %d is declared the scalar %s but has %d core "
                                "dimension%s" % (self.name, self.layout, i + 1, t, c,
                                                 "" if c == 1 else "s"))
            if is_out:
                return _T.Array(t, 1), 1
            return t, 0
        raise TypeError("guvectorize: %s: argument %d has type %s; gufunc arguments are scalars "
                        "or arrays" % (self.name, i + 1, t))


def _void_loop(pyfunc, form, argtypes, fastmath, typing="numpy", debug=False):
    """(types, arg_ndim, source, fn_name, options, captures) for a function writing its
    outputs."""
    seen, ndims = [], []
    for i, t in enumerate(argtypes):
        st, nd = form.check_arg(i, t)
        seen.append(st)
        ndims.append(nd)
    r = _translate(pyfunc, seen, None, fastmath=fastmath, debug=debug,
                   **_options.translate_options(typing))
    if not isinstance(r.return_type, _T.Void):
        # Numba's words first (its TypeError says "guvectorized functions cannot return values"),
        # then what cufunc offers instead
        raise TypeError("guvectorized functions cannot return values: %s returns %s with the "
                        "layout %s (a gufunc kernel must have void return type); write the "
                        "results into the output arguments (or declare the outputs as the "
                        "return type and take only the inputs)"
                        % (form.name, r.return_type, form.layout))
    source, name, captures = _loop_function(r, form.name)
    types = tuple((t.dtype if isinstance(t, _T.Array) else t).dtype for t in seen)
    return (types, tuple(ndims), source, name, _options.compile_options(fastmath, typing), captures)


def _return_loop(pyfunc, form, in_types, out_types, fastmath, typing="numpy", debug=False):
    """A loop for a function that returns its '()' outputs: the kernel calls a generated wrapper
    that stores the returned value(s) into one-element output views. out_types may be None
    (inferred from the returns)."""
    seen, ndims = [], []
    for i, t in enumerate(in_types):
        st, nd = form.check_arg(i, t)
        seen.append(st)
        ndims.append(nd)
    ret = None
    if out_types is not None:
        ret = out_types[0] if len(out_types) == 1 else _T.Tuple(out_types)
    r = _translate(pyfunc, seen, ret, fastmath=fastmath, debug=debug,
                   **_options.translate_options(typing))
    rt = r.return_type
    outs = list(rt.types) if isinstance(rt, _T.Tuple) else [rt]
    if isinstance(rt, _T.Void):
        # a function that returns nothing meant to write its outputs: it lacks their parameters
        n = len(in_types)
        raise TypeError(
            "guvectorize: %s takes %d parameter%s but the layout %s has %d operand%s (%d input%s "
            "and %d output%s): a function that writes its outputs takes the inputs then the "
            "outputs; one that takes only the inputs must return the output%s"
            % (form.name, n, "" if n == 1 else "s", form.layout, form.nin + form.nout,
               "" if form.nin + form.nout == 1 else "s", form.nin, "" if form.nin == 1 else "s",
               form.nout, "" if form.nout == 1 else "s", "" if form.nout == 1 else "s"))
    if len(outs) != form.nout:
        raise TypeError("guvectorize: %s returns %s, but the layout %s has %d output%s"
                        % (form.name, rt, form.layout, form.nout, "" if form.nout == 1 else "s"))
    for t in outs:
        if not isinstance(t, _T.Scalar):
            raise TypeError("guvectorize: %s returns %s; only scalars can be returned"
                            % (form.name, t))
    source, fn, captures = _loop_function(r, form.name)
    params = ["%s a%d" % (t.cname, i) for i, t in enumerate(seen)]
    params += ["cf_array_ref<%s, 1> o%d" % (t.cname, o) for o, t in enumerate(outs)]
    wrapper = "cf_gu_ret_" + r.name
    body = ["    const auto r = %s(%s);" % (fn, ", ".join("a%d" % i for i in range(len(seen))))]
    for o, t in enumerate(outs):
        field = ".f%d" % o if isinstance(rt, _T.Tuple) else ""
        body.append("    *(%s *)o%d.data = r%s;" % (t.cname, o, field))
    source = "%s\n__device__ inline void %s(%s)\n{\n%s\n}\n" % (
        source, wrapper, ", ".join(params), "\n".join(body))
    types = tuple((t.dtype if isinstance(t, _T.Array) else t).dtype for t in seen)
    types += tuple(t.dtype for t in outs)
    return (types, tuple(ndims) + (1,) * len(outs), source, wrapper,
            _options.compile_options(fastmath, typing),
            captures)


class GPUGUFunc(_core.GUFunc):
    """A GPU generalized ufunc made by guvectorize. Call it like a NumPy gufunc; see
    cufunc.guvectorize."""

    def inspect_cuda(self, *args, **kwargs):
        """The generated CUDA C: of every loop's device function (no arguments), or of the
        kernel a call with these arguments would launch."""
        if args or kwargs:
            return self.kernel_source(*args, **kwargs)
        return merge_sources(loop[2] for loop in self.loops)

    def __dask_tokenize__(self):
        """Dask's token of this function: its identity (_pickle.dask_token), never a pickle of
        it, also in graphs that reach it before any cufunc call on a dask array did."""
        return _pickle.dask_token(self)

    def __reduce__(self):
        """Pickled as its Python function and type list (Dask's workers; cufunc/_pickle.py)."""
        return _pickle.reduce(self, "gufunc", _build)

    @property
    def signatures(self):
        """The loops as Numba writes type lists: 'void(float32[:], float32[:])'."""
        out = []
        for types, ndims in (loop[:2] for loop in self.loops):
            args = []
            for t, nd in zip(types, ndims):
                s = _T.from_dtype(t)
                args.append(str(_T.Array(s, nd)) if nd else str(s))
            out.append("void(%s)" % ", ".join(args))
        return out


# NEP 50 for a loop compiled on demand (the same rule the kernel language mirrors)
_weak_arg_type = _loops.weak_arg_type


def _make_compiler(pyfunc, form, fastmath, typing="numpy", debug=False):
    @_errors.user_frames_only
    def compile_loop(in_types, out_types):
        strong = [t for t in in_types if isinstance(t, np.dtype)]
        dts = [t if isinstance(t, np.dtype) else _weak_arg_type(t, strong) for t in in_types]
        ins = []
        for dt, core in zip(dts, form.core_in):
            s = _T.from_dtype(dt)
            ins.append(_T.Array(s, len(core)) if core else s)
        if form.kind == "return":
            given = [None if o is None else _T.from_dtype(o) for o in out_types]
            return _return_loop(pyfunc, form, ins, None if None in given else given, fastmath,
                                typing, debug)
        default = np.result_type(*dts) if dts else np.dtype(np.float64)
        outs = []
        for o, core in zip(out_types, form.core_out):
            s = _T.from_dtype(default if o is None else o)
            outs.append(_T.Array(s, max(len(core), 1)))
        return _void_loop(pyfunc, form, ins + outs, fastmath, typing, debug)
    return compile_loop


def _signature_list(ftylist):
    if ftylist is None:
        return []
    if isinstance(ftylist, (str, _T.Signature)):
        return [ftylist]
    if isinstance(ftylist, tuple) and all(isinstance(t, (_T.Type, str, type)) for t in ftylist):
        return [ftylist]  # one Numba-style tuple of argument types
    return list(ftylist)


def _sig_types(sig):
    """(return type or None, [arg types]) of one type-list entry: a string, a Signature, or a
    tuple of argument types (Numba's form without a return type)."""
    if isinstance(sig, tuple) and not (len(sig) == 2 and isinstance(sig[1], (list, tuple))):
        return None, [_T.to_type(t) for t in sig]
    return _T.parse_signature(sig)


def _build(pyfunc, ftylist, layout, fastmath, typing="numpy", debug=False):
    core_in, core_out = _parse_layout(layout)
    if not core_out:
        raise ValueError("guvectorize: the layout %s has no outputs" % layout)
    form = _Form(pyfunc, layout, core_in, core_out)
    specs = []
    for sig in ftylist:
        ret, args = _sig_types(sig)
        if ret is not None and isinstance(ret, _T.Void):
            ret = None
        nargs = form.nin + form.nout
        if form.kind == "void":
            if ret is not None or len(args) != nargs:
                raise TypeError(
                    "guvectorize: %s: the type list does not match the layout %s: signature %s "
                    "has %d argument%s%s, the layout %d inputs and %d outputs (a gufunc returns "
                    "nothing: declare the outputs as arguments)"
                    % (form.name, layout, sig, len(args), "" if len(args) == 1 else "s",
                       " and a return type" if ret is not None else "", form.nin, form.nout))
            specs.append(_void_loop(pyfunc, form, args, fastmath, typing, debug))
        else:
            outs = None
            if ret is not None:
                outs = list(ret.types) if isinstance(ret, _T.Tuple) else [ret]
            if len(args) != form.nin or (outs is not None and len(outs) != form.nout):
                raise TypeError(
                    "guvectorize: %s: the type list does not match the layout %s: signature %s "
                    "should have %d argument%s and %d return value%s"
                    % (form.name, layout, sig, form.nin, "" if form.nin == 1 else "s", form.nout,
                       "" if form.nout == 1 else "s"))
            specs.append(_return_loop(pyfunc, form, args, outs, fastmath, typing, debug))
    name = getattr(pyfunc, "__name__", "gufunc")
    doc = getattr(pyfunc, "__doc__", None)
    compiler = None if ftylist else _make_compiler(pyfunc, form, fastmath, typing, debug)
    gu = GPUGUFunc(name, layout, doc=doc, compiler=compiler, rules=_options.call_rules(typing))
    for spec in specs:
        gu.add_loop(*spec)
    gu.py_func = pyfunc
    gu.typing = typing
    gu._cf_remake = (pyfunc, list(ftylist), layout, fastmath, typing)  # what pickling sends
    gu.__doc__ = doc  # the instance's, over the class docstring
    functools.update_wrapper(gu, pyfunc, assigned=("__module__", "__qualname__"), updated=())
    return gu


def guvectorize(ftylist=None, signature=None, target="cuda", fastmath=False, cache=True,
                typing="numpy", debug=False, **kws):
    """Make a GPU generalized ufunc from a Python function (Numba's ``guvectorize``).

    Parameters
    ----------
    ftylist : list, str, Signature or None
        The type list: signatures such as ``'void(float32[:, :], float32[:, :], float32[:, :])'``,
        Signature objects (``void(float32[:], float32[:])``), or tuples of argument types; or None
        (or the layout itself, ``@guvectorize('(n)->()')``) to compile a loop on the first call
        with each new combination of input types.
    signature : str
        The layout, ``'(m,n),(n,p)->(m,p)'`` (also accepted as ``layout=``).
    target : {"cuda", "gpu"}
        Only the GPU.
    fastmath : bool, optional
        Allow contraction into fused multiply-adds and fast approximate math.
    cache : bool, optional
        Accepted for Numba compatibility and changes nothing (kernels are always cached on disk).
    typing : {"numpy", "numba"}, optional
        ``"numpy"`` (the default): the kernel language's NumPy 2 meaning (docs/language.md);
        ``"numba"``: Numba's typing rules and its call rules (loop choice, scalar conversion,
        ``'()'`` arguments given as one-element arrays): what ``cufunc.numba.guvectorize``
        makes (docs/numba.md, docs/typing.md).
    debug : bool, optional
        Check ``assert`` statements (else compiled away, as Numba does); a failed one stops the
        kernel and the next synchronising call raises ``cufunc.errors.DeviceAssertionError`` (an
        ``AssertionError``; CUDA leaves the context unusable). docs/language-arrays.md.
    **kws
        Numba's other options: ``identity`` and ``is_dynamic`` are accepted and ignored (a
        gufunc made without a type list already compiles a loop per new input types);
        ``writable_args`` is a ``TypeError`` unless empty (a gufunc writes only its outputs);
        ``nopython=True`` gives a ``RedundantOptionWarning``; ``nopython=False``,
        ``forceobj=True`` and any other keyword are a ``TypeError`` that names it.

    Returns
    -------
    callable
        A decorator making the gufunc (a ``cufunc.GUFunc``).

    Notes
    -----
    The function takes the inputs, then the outputs, and writes the outputs. When every output
    is a scalar (``()``), it may instead take only the inputs and return the outputs. A layout
    with more operands than the function has parameters is a ``TypeError`` that says so.

    Examples
    --------
    ::

        @guvectorize(['void(float32[:], float32[:])'], '(n)->()')
        def row_sum(x, res):
            acc = 0.0
            for i in range(x.shape[0]):
                acc += x[i]
            res[0] = acc
    """
    layout = kws.pop("layout", None)
    if signature is None:
        signature = layout
    elif layout is not None:
        raise TypeError("guvectorize: give the layout once, as signature= or as layout=")
    if kws.get("writable_args"):
        raise TypeError("guvectorize: writable_args is not supported: a cufunc gufunc writes "
                        "only its outputs (declare what it writes as an output)")
    _options.check("guvectorize", kws, named=("ftylist", "signature", "layout", "target",
                                               "fastmath", "cache", "typing", "debug"),
                   accepted=("identity", "is_dynamic", "writable_args"))
    _options.check_typing("guvectorize", typing)
    if target not in ("cuda", "gpu"):
        raise ValueError("cufunc.guvectorize supports target='cuda' only, not %r (for the CPU, "
                         "use numba.guvectorize)" % (target,))
    if signature is None and isinstance(ftylist, str) and "->" in ftylist:
        ftylist, signature = None, ftylist
    if callable(ftylist) and not isinstance(ftylist, (_T.Type, _T.Signature)):
        raise TypeError("guvectorize needs a layout: @guvectorize('(n)->()') or "
                        "@guvectorize([types], '(n)->()')")
    if signature is None:
        raise TypeError("guvectorize needs a layout signature such as '(m,n),(n,p)->(m,p)'")
    _parse_layout(signature)  # a bad layout fails at decoration, pointing at the error
    sigs = _signature_list(ftylist)

    @_errors.user_frames_only
    def wrap(pyfunc):
        if not callable(pyfunc):
            raise TypeError("guvectorize: %r is not a function" % (pyfunc,))
        return _build(pyfunc, sigs, signature, fastmath, typing, bool(debug))
    return wrap
