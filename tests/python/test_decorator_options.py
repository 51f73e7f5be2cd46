"""Decorator options: an option a decorator does not support is a TypeError naming
every such option, never silently dropped; Numba's options are honoured, accepted as documented
no-ops, or refused; nopython=True warns that it is redundant, nopython=False is a TypeError.
No GPU needed: decoration translates but does not launch."""

import warnings

import numpy as np
import pytest

import cufunc
from cufunc import cuda, errors


def body1(x):
    return x + 1.0


def body2(a, b):
    return a + b


def gu_body(x, out):
    for i in range(x.shape[0]):
        out[i] = x[i]


def make_vectorize(**kw):
    return cufunc.vectorize(["f8(f8)"], **kw)(body1)


def make_vectorize_lazy(**kw):
    return cufunc.vectorize(**kw)(body1)


def make_guvectorize(**kw):
    return cufunc.guvectorize(["void(f8[:], f8[:])"], "(n)->(n)", **kw)(gu_body)


def make_guvectorize_lazy(**kw):
    return cufunc.guvectorize("(n)->(n)", **kw)(gu_body)


def make_jit(**kw):
    return cuda.jit(device=True, **kw)(body1)


def make_jit_sig(**kw):
    return cuda.jit("f8(f8)", device=True, **kw)(body1)


def make_reduce(**kw):
    return cuda.reduce(body2, **kw)


def make_Reduce(**kw):
    return cuda.Reduce(body2, **kw)


MAKERS = {"vectorize": make_vectorize, "vectorize_lazy": make_vectorize_lazy,
          "guvectorize": make_guvectorize, "guvectorize_lazy": make_guvectorize_lazy,
          "cuda.jit": make_jit, "cuda.jit_sig": make_jit_sig, "cuda.reduce": make_reduce,
          "cuda.Reduce": make_Reduce}


@pytest.fixture(params=sorted(MAKERS))
def make(request):
    return MAKERS[request.param]


def test_no_options_work(make):
    assert make() is not None


@pytest.mark.parametrize("options,named", [
    ({"what1": True}, ["what1"]),
    ({"what1": True, "fastmaht": True}, ["fastmaht", "what1"]),
    ({"nogil": True, "parallel": True, "boundscheck": False}, ["boundscheck", "nogil", "parallel"]),
    ({"what1": True, "nopython": True}, ["what1"]),
])
def test_unknown_options_are_type_errors_naming_each(make, options, named):
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # refused before any warning about nopython
        with pytest.raises(TypeError) as ei:
            make(**options)
    msg = str(ei.value)
    for name in named:
        assert repr(name) in msg, msg
    assert "unsupported option" in msg
    assert "supported: " in msg and "nopython" in msg.split("supported: ")[1]


def test_nopython_true_warns_redundant(make):
    with pytest.warns(errors.RedundantOptionWarning, match="nopython=True is redundant") as rec:
        assert make(nopython=True) is not None
    assert len(rec) == 1
    assert issubclass(errors.RedundantOptionWarning, UserWarning)


def test_nopython_warning_points_at_the_callers_line(make):
    with pytest.warns(errors.RedundantOptionWarning) as rec:
        make(nopython=True)
    # stacklevel: the warning names the line that called the decorator, in this file
    assert rec[0].filename == __file__, rec[0].filename


@pytest.mark.parametrize("options,match", [
    ({"nopython": False}, "nopython=False is not supported"),
    ({"nopython": 0}, "nopython=False is not supported"),
    ({"forceobj": True}, "forceobj=True is not supported"),
])
def test_object_mode_is_a_type_error(make, options, match):
    with pytest.raises(TypeError, match=match):
        make(**options)


def test_forceobj_false_is_fine(make):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert make(forceobj=False) is not None


# ---- the options Numba's decorators take, one decision each --------------------------------------

@pytest.mark.parametrize("maker", [make_vectorize, make_vectorize_lazy])
@pytest.mark.parametrize("options", [{"cache": True}, {"cache": False}, {"fastmath": True},
                                     {"identity": 0}, {"identity": "reorderable"},
                                     {"target": "cuda"}, {"target": "gpu"}])
def test_vectorize_accepts_numba_options(maker, options):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        uf = maker(**options)
    if "identity" in options:
        assert uf.identity == options["identity"] or options["identity"] == "reorderable"


@pytest.mark.parametrize("options", [{"is_dynamic": True}, {"writable_args": (0,)},
                                     {"writable_args": ("x",)}])
def test_vectorize_refuses_gufunc_options(options):
    with pytest.raises(TypeError, match=repr(next(iter(options)))):
        make_vectorize(**options)


@pytest.mark.parametrize("maker", [make_guvectorize, make_guvectorize_lazy])
@pytest.mark.parametrize("options", [{"cache": True}, {"cache": False}, {"fastmath": True},
                                     {"identity": 0}, {"identity": None}, {"is_dynamic": True},
                                     {"is_dynamic": False}, {"writable_args": ()},
                                     {"target": "cuda"}])
def test_guvectorize_accepts_numba_options(maker, options):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert maker(**options) is not None


@pytest.mark.parametrize("maker", [make_guvectorize, make_guvectorize_lazy])
def test_guvectorize_refuses_writable_args(maker):
    with pytest.raises(TypeError, match="writable_args is not supported"):
        maker(writable_args=(0,))


def test_guvectorize_layout_given_twice():
    with pytest.raises(TypeError, match="layout once"):
        cufunc.guvectorize(["void(f8[:], f8[:])"], "(n)->(n)", layout="(n)->(n)")
    # layout= alone is the layout
    assert cufunc.guvectorize(["void(f8[:], f8[:])"], layout="(n)->(n)")(gu_body).signature \
        == "(n)->(n)"


@pytest.mark.parametrize("options", [{"inline": True}, {"forceinline": True}, {"fastmath": True},
                                     {"debug": False}, {"opt": True}, {"lineinfo": True},
                                     {"cache": True}])
def test_jit_accepts_numba_options(options):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert make_jit(**options) is not None


@pytest.mark.parametrize("options", [{"link": ["x.ptx"]}, {"max_registers": 32}])
def test_jit_refuses_what_it_cannot_do(options):
    with pytest.raises(TypeError, match=repr(next(iter(options)))):
        make_jit(**options)


@pytest.mark.parametrize("target", ["cpu", "parallel", "CUDA", None, "cuda "])
@pytest.mark.parametrize("maker", [make_vectorize, make_guvectorize])
def test_other_targets_are_refused(maker, target):
    with pytest.raises(ValueError, match="target='cuda' only, not %r" % (target,)):
        maker(target=target)


def test_reduce_options_checked_before_the_function():
    # a bad option is reported even when the function is bad too
    with pytest.raises(TypeError, match="unsupported option 'what1'"):
        cuda.Reduce(np.add, what1=1)


# ---- the contraction rule (docs/typing.md): what each typing compiles its loops with -------------

def _loop_options(make):
    """The NVRTC options of the loop a decorator hands the engine (spec[3]), without a GPU."""
    import importlib
    G, R, V = (importlib.import_module("cufunc." + m)  # modules (cufunc.vectorize: the function)
               for m in ("guvectorize", "reduction", "vectorize"))
    from cufunc import types as T
    f32 = T.from_dtype(np.dtype(np.float32))

    def fma(a, b):
        return a * b + a

    def fma3(a, b, out):
        out[0] = a[0] * b[0] + a[0]
    if make == "vectorize":
        return lambda typing, fast=False: V._loop_from(fma, [f32, f32], f32, fast, typing)[0][3]
    if make == "guvectorize":
        arr = T.Array(f32, 1)
        form = G._Form(fma3, "(n),(n)->(n)", *G._parse_layout("(n),(n)->(n)"))
        return lambda typing, fast=False: G._void_loop(fma3, form, [arr, arr, arr], fast,
                                                       typing)[4]
    return lambda typing, fast=False: R._make_compiler(fma, typing)(np.dtype(np.float32))[2]


@pytest.mark.parametrize("make", ["vectorize", "guvectorize", "reduce"])
def test_contraction_follows_the_typing(make):
    """NumPy's typing never contracts a * b + c (--fmad=false); Numba's compiles as numba-cuda
    does (NVRTC's defaults: contraction allowed, exact division and square root); fastmath is
    --use_fast_math for both."""
    opts = _loop_options(make)
    assert tuple(opts("numpy")) == ("--fmad=false",)
    assert tuple(opts("numba")) == ()
    if make != "reduce":
        assert tuple(opts("numpy", True)) == tuple(opts("numba", True)) == ("--use_fast_math",)
