"""cufunc.numba: Numba's namespace for what cufunc implements, compared with Numba's own (numba
importable on the CPU), and the typing policy carried to every translation. End-to-end: Numba
programs' items 1 and 8-11 through cufunc.numba against numba-cuda on the GPU (skipped, with the
reason, where numba-cuda or the typing policy is missing)."""
import importlib
import inspect
import warnings

import numpy as np
import pytest

import cufunc
import cufunc.lang
import cufunc.numba as cn
from cufunc import types as T
from cufunc.errors import UnsupportedError

if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack   # numba-cuda 0.30 still names it (removed in NumPy 2.x)
numba = pytest.importorskip("numba", reason="numba (the reference namespace) not installed")
pytest.importorskip("numba.cuda", reason="numba.cuda (the reference namespace) not importable")
gpu = pytest.mark.gpu

HAS_TYPING = "typing" in inspect.signature(cufunc.lang.translate).parameters
needs_typing = pytest.mark.skipif(
    not HAS_TYPING, reason="cufunc.lang.translate has no typing= policy in this tree (Numba's "
                           "typing rules are the kernel language's part)")

TYPE_NAMES = ["b1", "bool", "bool_", "boolean", "byte", "c16", "c8", "char", "complex128",
              "complex64", "double", "f4", "f8", "float32", "float64", "i1", "i2", "i4", "i8",
              "int16", "int32", "int64", "int8", "int_", "intc", "intp", "long_", "longlong",
              "short", "size_t", "ssize_t", "u1", "u2", "u4", "u8", "uchar", "uint", "uint16",
              "uint32", "uint64", "uint8", "uintc", "uintp", "ulong", "ulonglong", "ushort"]


def test_both_import_forms():
    from cufunc.numba import cuda, guvectorize, vectorize   # noqa: F401
    import cufunc.numba.cuda
    import cufunc.numba.types
    assert cn.cuda is cufunc.numba.cuda and cn.types is cufunc.numba.types
    from cufunc.numba.core.errors import NumbaPerformanceWarning
    from cufunc.numba.core import types
    assert issubclass(NumbaPerformanceWarning, Warning) and types.float32 == cn.float32
    with warnings.catch_warnings():   # the usual filter of Numba programs works
        warnings.simplefilter("ignore", category=cn.core.errors.NumbaPerformanceWarning)


def test_import_never_asks_for_a_numba_cuda_name():
    """numba-cuda's import hook (_numba_cuda_redirector) takes every module name containing
    "numba.cuda" and recursed without end on cufunc.numba.cuda: a hook that fails on such names
    must not be reached by importing cufunc.numba (it is not, on a machine with numba-cuda)."""
    import subprocess
    import sys
    code = ("import sys\n"
            "class Trap:\n"
            "    def find_spec(self, name, path, target=None):\n"
            "        if 'numba.cuda' in name and not name.startswith('numba'):\n"
            "            raise RuntimeError('asked for ' + name)\n"
            "sys.meta_path.insert(0, Trap())\n"
            "import cufunc.numba as numba\n"
            "import cufunc.numba.cuda\n"
            "from cufunc.numba import cuda\n"
            "assert cuda is numba.cuda is sys.modules['cufunc.numba.cuda']\n"
            "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


@pytest.mark.parametrize("name", TYPE_NAMES + ["none", "void"])
def test_type_objects_and_aliases_are_numbas(name):
    ours, theirs = getattr(cn, name), getattr(numba, name)
    assert getattr(cn.types, name) is ours
    if name in ("none", "void"):
        assert ours is T.void and str(theirs) == "none"
        return
    assert ours.dtype == np.dtype(str(theirs)), name
    assert T.to_type(theirs) == ours   # Numba's type objects are understood as signatures


@pytest.mark.parametrize("name", ["float16", "f2"])
def test_types_module_has_numba_types_names(name):
    assert getattr(cn.types, name).dtype == np.dtype(str(getattr(numba.types, name)))


@pytest.mark.parametrize("layout", ["C", "A", "F"])
@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_types_array_is_numbas(ndim, layout):
    ours = cn.types.Array(cn.types.float32, ndim, layout)
    theirs = numba.types.Array(numba.types.float32, ndim, layout)
    assert ours == T.to_type(theirs)
    assert ours.ndim == theirs.ndim
    if layout == "C":
        assert ours == cn.float32[(slice(None),) * (ndim - 1) + (slice(None, None, 1),)]


def test_signature_spellings():
    sig = cn.void(cn.float32[:], cn.types.int64, cn.float32[:, :])
    assert T.parse_signature(sig) == T.parse_signature("void(float32[:], int64, float32[:, :])")
    assert T.parse_signature(cn.float64(cn.f4, cn.i8)) == T.parse_signature("f8(f4, i8)")
    assert cn.types.UniTuple(cn.float32, 2) == T.Tuple([T.float32, T.float32])
    assert cn.types.Tuple([cn.int32, cn.float64]) == T.Tuple([T.int32, T.float64])
    assert str(cn.float32[:]) == str(numba.float32[:]).replace("array(float32, 1d, A)",
                                                               "float32[:]")


@pytest.mark.parametrize("value", [1, 2.5, True, 1j, np.float32(1), np.int16(3), np.bool_(1),
                                   np.zeros(3, np.float32), np.zeros((2, 3))[:, ::2],
                                   np.zeros((2, 2), np.int8)])
def test_typeof_and_from_dtype_are_numbas(value):
    assert cn.typeof(value) == T.to_type(numba.typeof(value))
    dt = np.asarray(value).dtype
    assert cn.from_dtype(dt) == T.to_type(numba.from_dtype(dt))


# ---- the cuda namespace -------------------------------------------------------------------------

HOST_API = ["is_available", "detect", "select_device", "get_current_device", "gpus", "close",
            "synchronize", "current_context", "stream", "default_stream",
            "legacy_default_stream", "per_thread_default_stream", "external_stream", "to_device",
            "device_array", "device_array_like", "pinned_array", "pinned_array_like",
            "as_cuda_array", "is_cuda_array", "from_cuda_array_interface", "pinned", "mapped",
            "mapped_array", "mapped_array_like", "managed_array", "defer_cleanup", "event",
            "event_elapsed_time", "open_ipc_array", "jit", "local", "reduce", "Reduce",
            "list_devices", "is_float16_supported", "is_supported_version", "require_context",
            "profile_start", "profile_stop", "profiling", "CudaSupportError", "types"]


@pytest.mark.parametrize("name", HOST_API)
def test_cuda_host_api_names_exist_as_in_numba(name):
    assert hasattr(numba.cuda, name), name      # the list is Numba's
    assert hasattr(cn.cuda, name), name


@pytest.mark.parametrize("name", ["threadIdx", "blockIdx", "grid", "shared", "atomic",
                                  "syncthreads", "shfl_down_sync", "float32x4", "compile_ptx"])
def test_cuda_kernel_names_say_what_to_use(name):
    assert hasattr(numba.cuda, name)
    with pytest.raises(AttributeError, match="RawKernel"):
        getattr(cn.cuda, name)


def test_cuda_jit_device_functions_have_numba_typing():
    @cn.cuda.jit(device=True)
    def f(x):
        return x + 1

    @cn.cuda.jit("float32(float32)", device=True, inline=True)
    def g(x):
        return x * 2

    assert f.typing == "numba" and g.typing == "numba" and f(2) == 3
    assert isinstance(f, cufunc.lang.DeviceFunction)
    with pytest.raises(UnsupportedError, match="RawKernel"):
        cn.cuda.jit(lambda a: None)                      # a kernel
    with pytest.raises(UnsupportedError):
        cn.cuda.jit("void(float32[:])")
    # cufunc's own: NumPy's typing unless asked
    assert cufunc.cuda.jit(device=True)(lambda x: x).typing == "numpy"
    with pytest.raises(ValueError):
        cufunc.cuda.jit(device=True, typing="c")


def test_cuda_reduce_has_numba_typing():
    r = cn.cuda.reduce(lambda a, b: a + b)
    assert isinstance(r, cufunc.cuda.Reduce) and r.typing == "numba"
    assert cn.cuda.Reduce(lambda a, b: a if a > b else b).typing == "numba"
    assert cufunc.cuda.reduce(lambda a, b: a + b).typing == "numpy"
    with pytest.raises(TypeError):
        cn.cuda.reduce(lambda a: a)


def test_device_array_strides_as_numba():
    # C or F strides name an order; others are refused before any allocation
    with pytest.raises(NotImplementedError, match="strides"):
        cn.cuda.device_array((3, 4), np.float32, strides=(4, 8))
    assert cn.cuda._order_for((3, 4), np.float32, (16, 4), "C") == "C"
    assert cn.cuda._order_for((3, 4), np.float32, (4, 12), "C") == "F"


@gpu
def test_device_array_and_to_device_as_numba():
    d = cn.cuda.device_array((3, 4), np.float32, (4, 12))
    assert d.shape == (3, 4) and d.is_f_contiguous()
    h = np.arange(6.0)
    e = cn.cuda.to_device(h, stream=0, copy=True)
    np.testing.assert_array_equal(e.copy_to_host(), h)
    f = cn.cuda.from_cuda_array_interface(e.__cuda_array_interface__, owner=e)
    np.testing.assert_array_equal(f.copy_to_host(), h)
    assert cn.cuda.list_devices()[0].id == 0


# ---- the typing policy reaches every translation --------------------------------------------------

@pytest.fixture
def recorded(monkeypatch):
    """Record the typing= each translation gets (the real translate does the rest, with NumPy's
    typing when this tree's translate has no policy yet)."""
    seen = []
    real = cufunc.lang.translate

    def spy(*args, typing="numpy", **kw):
        seen.append(typing)
        if HAS_TYPING:
            kw["typing"] = typing
        return real(*args, **kw)
    for mod in ("cufunc.vectorize", "cufunc.guvectorize"):
        monkeypatch.setattr(importlib.import_module(mod), "_translate", spy)
    monkeypatch.setattr(cufunc.lang, "translate", spy)
    return seen


def _body(a, b):
    return a + b


def _gbody(x, out):
    s = 0.
    for i in range(x.shape[0]):
        s += x[i]
    out[0] = s


@pytest.mark.parametrize("typing", ["numpy", "numba"])
def test_typing_reaches_translate(recorded, typing):
    f = cufunc.vectorize(["float32(float32, float32)"], typing=typing)(_body)
    g = cufunc.guvectorize(["void(float32[:], float32[:])"], "(n)->()", typing=typing)(_gbody)
    from cufunc import reduction
    reduction._make_compiler(_body, typing)(np.dtype(np.float32))
    assert recorded == [typing] * 3
    assert f.typing == g.typing == typing
    assert f.rules == g.rules == ("numba" if typing == "numba" else "numpy")
    assert f._cf_remake[-1] == g._cf_remake[-1] == typing   # pickles rebuild it the same way


def test_cufunc_numba_decorators_pass_numba_typing(recorded):
    f = cn.vectorize(["float32(float32, float32)"], target="cuda")(_body)
    g = cn.guvectorize(["void(float32[:], float32[:])"], "(n)->()", target="cuda")(_gbody)
    assert recorded == ["numba", "numba"] and f.rules == g.rules == "numba"
    # Numba's default target is the CPU: taken as the GPU, its CPU-only options ignored
    h = cn.vectorize(["float32(float32, float32)"], nogil=True)(_body)
    assert h.rules == "numba"
    with pytest.raises(ValueError):
        cn.vectorize(["float32(float32, float32)"], target="roc")(_body)
    with pytest.raises(ValueError):
        cufunc.vectorize(["float32(float32, float32)"], typing="numbaa")(_body)
    j = cn.njit(_body)
    assert j(2, 3) == 5 and j.typing == "numba"
    assert cn.jit(nopython=True, cache=True)(_body).typing == "numba"


# ---- end to end on the GPU: cufunc.numba against numba-cuda ---------------------------------------

def numba_cuda():
    """numba's cuda module where numba-cuda can run here, else a visible skip."""
    from numba import cuda as ncuda
    if not ncuda.is_available():
        pytest.skip("numba-cuda cannot use a GPU here (the reference of these tests)")
    return ncuda


def item9(values, t):
    return values if values > t else 0.0


def item10(a, b, c):
    return (a - c) * b


def item11(x, out):
    temp = 0.
    for i in range(x.shape[0]):
        temp += x[i]
    out[0] = temp


def item1(a, b):
    return a + b


def item8(x, s, out):
    for i in range(x.shape[0]):
        out[i] = x[i] * s[0]


@gpu
@needs_typing
def test_items_1_and_8_through_cufunc_numba():
    f = cn.vectorize(["int16(int16, int16)"], target="cuda")(item1)
    a = np.arange(-8, 8, dtype=np.int16)
    np.testing.assert_array_equal(f(a, 15.0), a + np.int16(15))
    g = cn.guvectorize([cn.void(cn.float32[:], cn.float32[:], cn.float32[:])], "(n),()->(n)",
                       target="cuda")(item8)
    x, out = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    assert g(x, np.array([2.0], np.float32), out=out) is out
    np.testing.assert_array_equal(out, x * 2)


@gpu
@needs_typing
@pytest.mark.parametrize("item", ["1", "8", "9", "10", "11"])
def test_items_against_numba_cuda(item):
    numba_cuda()
    rng = np.random.default_rng(int(item))
    if item in ("1", "9", "10"):
        fn, sig, args = {
            "1": (item1, ["int16(int16, int16)"],
                  (rng.integers(-100, 100, 1000).astype(np.int16), 15.0)),
            "9": (item9, ["(float32, float32)"],
                  (rng.standard_normal(1000).astype(np.float32), np.float32(0.25))),
            "10": (item10, ["uint16(uint8, uint16, uint8)"],
                   (rng.integers(0, 256, 1000).astype(np.uint8),
                    rng.integers(0, 65536, 1000).astype(np.uint16),
                    rng.integers(0, 256, 1000).astype(np.uint8))),
        }[item]
        want = numba.vectorize(sig, target="cuda")(fn)(*args)
        got = cn.vectorize(sig, target="cuda")(fn)(*args)
    else:
        fn, sig, layout, args = {
            "8": (item8, ["void(float32[:], float32[:], float32[:])"], "(n),()->(n)",
                  (rng.standard_normal(4).astype(np.float32), np.array([1.5], np.float32))),
            "11": (item11, ["void(float32[:], float32[:])"], "(n)->()",
                   (rng.standard_normal((64, 1000)).astype(np.float32),)),
        }[item]
        outs = np.zeros(np.broadcast_shapes(args[0].shape) if item == "8" else (64,), np.float32)
        want = numba.guvectorize(sig, layout, target="cuda")(fn)(*args, outs.copy())
        got = cn.guvectorize(sig, layout, target="cuda")(fn)(*args, outs.copy())
        if want is None:   # numba-cuda may return nothing for a positional output
            pytest.fail("numba-cuda returned no result")
    want, got = np.asarray(want), np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()
