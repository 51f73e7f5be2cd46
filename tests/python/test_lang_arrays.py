"""Arrays in kernel bodies (docs/language-arrays.md): iteration (`for v in a`, enumerate, zip),
basic indexing that yields views (`a[i]` of an n-d array, `a[i, :]`, `a[:, j]`, slices with
constant or variable bounds and steps), `for/while ... else`, `assert` (compiled away unless
debug=True) and device functions with a path that returns None.

The host cases translate each body with cufunc.lang, compile all of them into one shared
library with g++ (lang_harness.build_shared), run them through ctypes on NumPy arrays (strided
views included) and compare with CPython running the same function on copies of the same NumPy
arrays: NumPy's views and Numba's views share the meaning (a row view writes through, negative
indices wrap, slices clip). The same sources are compiled with NVRTC. The gpu-marked tests run
bodies end to end through @guvectorize."""

import ctypes
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cufunc.lang as L
import cufunc.types as T
from cufunc import cuda

import lang_harness as H

TypingError, UnsupportedError = L.TypingError, L.UnsupportedError
gpu = pytest.mark.gpu


# ---------------------------------------------------------------------------------- bodies

def iter_1d(a, out):
    s = 0.0
    for v in a:
        s += v
    out[0] = s


def iter_rows(a, out):
    s = 0.0
    k = 0
    for row in a:
        for v in row:
            s += v * (k + 1)
        k += 1
    out[0] = s
    out[1] = k


def iter_3d(a, out):
    s = 0.0
    for plane in a:
        for row in plane:
            s += row[0] - row[-1]
    out[0] = s


def enum_1d(a, out):
    for i, v in enumerate(a):
        out[i] = v * i


def enum_start(a, out):
    for i, v in enumerate(a, 3):
        out[i - 3] = v + i


def enum_rows(a, out):
    for i, row in enumerate(a):
        out[i] = row[0] + len(row)


def zip_arrays(a, b, out):
    s = 0.0
    for x, y in zip(a, b):
        s += x * y
    out[0] = s


def zip_three(a, b, c, out):
    for i, (x, y) in enumerate(zip(a, b)):
        out[i] = x - y + c[i]


def zip_range(a, out):
    n = len(a)
    for i, x in zip(range(n - 1, -1, -1), a):
        out[i] = x


def zip_range_step(a, out):
    for k, x in zip(range(2, 100, 3), a):
        out[0] += k * x


def zip_short(a, b, out):
    # zip stops at the shorter: b has fewer items
    n = 0
    for x, y in zip(a, b):
        n += 1
    out[0] = n


def row_view(a, out):
    r = a[1]
    out[0] = r[0] + r[-1]
    out[1] = len(r)
    out[2] = r.shape[0]
    out[3] = a[-1][-2]


def row_write_through(a, out):
    for i in range(a.shape[0]):
        a[i][0] += 1.5
    a[1][2] = 7.0
    r = a[2]
    r[1] = -3.0
    out[0] = a[2, 1]


def index_chain(a, out):
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            out[i] += a[i][j] * (j + 1)


def row_colon(a, out):
    s = 0.0
    for v in a[2, :]:
        s += v
    out[0] = s
    col = a[:, 1]
    out[1] = col[0] + col[-1]
    out[2] = len(col)


def col_sums(a, out):
    for j in range(a.shape[1]):
        c = a[:, j]
        s = 0.0
        for v in c:
            s += v
        out[j] = s


def slices_const(a, out):
    out[0] = a[1:4][0]
    out[1] = len(a[1:4])
    out[2] = a[::2][1]
    out[3] = len(a[::2])
    out[4] = a[::-1][0]
    out[5] = a[-3:][0]
    out[6] = len(a[:-2])
    out[7] = len(a[5:2])
    out[8] = a[6:1:-2][1]
    out[9] = len(a[100:])


def slices_var(a, n, k, out):
    s = 0.0
    for v in a[1:n]:
        s += v
    out[0] = s
    t = 0.0
    for v in a[::k]:
        t += v
    out[1] = t
    out[2] = len(a[n:])
    out[3] = len(a[-n:])
    out[4] = len(a[n::k])


def slice_2d(a, i, n, out):
    r = a[i, 1:n]
    out[0] = len(r)
    s = 0.0
    for v in r:
        s += v
    out[1] = s
    b = a[1:3, ::2]
    out[2] = b.shape[0]
    out[3] = b.shape[1]
    out[4] = b[1, 1]
    out[5] = a[1:][0][0]
    out[6] = a[:, ::-1][0, 0]


def slice_of_slice(a, out):
    b = a[1:][::2]
    out[0] = len(b)
    out[1] = b[1]
    c = a[::-1][1:3]
    out[2] = c[0]
    out[3] = len(c)


def slice_write(a, out):
    r = a[1:5]
    r[0] = 100.0
    for i in range(len(r)):
        r[i] += 1.0
    a[::3][1] = -5.0
    out[0] = a[1]


def view_fill(a, out):
    a[1, :] = 2.5
    a[:, 0] = -1.0
    a[2][1:] = 9.0
    out[0] = a[1, 1]


def view_copy(a, b, out):
    a[0, :] = b[1, :]
    out[0] = a[0, 2]


def view_3d(a, out):
    p = a[1]
    out[0] = p.shape[0]
    out[1] = p.shape[1]
    out[2] = p[2][1]
    r = a[0, 1]
    out[3] = r[2]
    out[4] = a[1, :, 2][1]
    out[5] = a[-1, -1, -1]


def view_in_loop_var(a, out):
    for i in range(a.shape[0]):
        r = a[i]
        if i % 2 == 0:
            r = a[0]
        out[i] = r[i % a.shape[1]]


def view_size_ndim(a, out):
    r = a[1:3]
    out[0] = r.size
    out[1] = r.ndim
    out[2] = a[1].size


def iter_int(a, out):
    m = a[0]
    for v in a:
        m = max(m, v)
    out[0] = m


def iter_view_of_slice(a, out):
    for i, row in enumerate(a[::-1]):
        out[i] = row[0]


def for_else_break(a, out):
    for v in a:
        if v < 0:
            out[0] = v
            break
    else:
        out[0] = 1000.0


def for_else_range(n, out):
    k = 0
    for i in range(n):
        k += i
        if k > 20:
            break
    else:
        k = -1
    out[0] = k


def while_else(n, out):
    i = 0
    while i < n:
        i += 1
        if i == 7:
            break
    else:
        i = 100 + i
    out[0] = i


def nested_for_else(a, out):
    hits = 0
    for row in a:
        for v in row:
            if v > 0.5:
                break
        else:
            hits += 1
            continue
        hits += 10
    out[0] = hits


def assert_ignored(a, out):
    # without debug=True an assert is compiled away (Numba's CUDA meaning): it does not stop
    # the body even when it is false
    for v in a:
        assert v < -1e300, "never true"
    assert len(a) > 1000
    out[0] = len(a)


def raising(a, out):
    for i, v in enumerate(a):
        if v < 0:
            raise ValueError("negative input")
        out[i] = v


def raising_ref(a, out):
    for i, v in enumerate(a):
        if v < 0:
            return
        out[i] = v


def checked_sqrt(x):
    if x < 0:
        raise ValueError("negative")
    return math.sqrt(x)


def raising_caller(a, out):
    for i in range(len(a)):
        out[i] = checked_sqrt(a[i])


def vsum(v):
    s = 0.0
    for x in v:
        s += x
    return s


def view_to_device_fn(a, out):
    for i in range(a.shape[0]):
        out[i] = vsum(a[i]) + vsum(a[i, ::2]) + vsum(a[:, i % a.shape[1]])


def assert_ignored_ref(a, out):
    out[0] = len(a)


def maybe_double(x):
    if x > 0:
        return x * 2.0


def maybe_int(x):
    if x > 0:
        return x + 1
    return None


def optional_user(a, out):
    for i in range(len(a)):
        out[i] = maybe_double(a[i])


def optional_int_user(a, out):
    for i in range(len(a)):
        out[i] = maybe_int(a[i])


def iter_tuple(a, out):
    for s in a.shape:
        out[0] += s
    for c in (1, 2.5, 3):
        out[1] += c
        if c > 2:
            break


def tuple_target_enum(a, out):
    for p in enumerate(a):
        out[p[0]] = p[1] * 2


TABLE = np.arange(12.0).reshape(3, 4)


def table_rows(out):
    for i, row in enumerate(TABLE):
        out[i] = row[1] + row[-1]
    out[3] = TABLE[2][:2][1]


def local_rows(a, out):
    loc = cuda.local.array((3, 4), np.float64)
    for i in range(3):
        for j in range(4):
            loc[i, j] = a[i] * j
    s = 0.0
    for row in loc:
        s += row[3]
    r = loc[1]
    out[0] = s
    out[1] = r[2] + len(r)


A1, A2, A3 = T.float64[:], T.float64[:, :], T.float64[:, :, :]
I1 = T.int64[:]


def arr(shape, dtype=np.float64, seed=0, lo=-4, hi=5):
    rng = np.random.default_rng(seed)
    return rng.integers(lo, hi, size=shape).astype(dtype)


def strided(a):
    """The same values as a, in a non-contiguous view (every other element of a bigger array,
    last axis reversed): the views must work through byte strides."""
    big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    v = big[..., ::-2]
    v[...] = a
    return v


def case(func, argtypes, args, label=None, ref=None):
    """One host case: (label, function, argument types, arguments, reference function)."""
    return (label or func.__name__, func, argtypes, args, ref or func)


CASES = [
    case(iter_1d, [A1, A1], [arr(7), np.zeros(1)]),
    case(iter_1d, [A1, A1], [strided(arr(7)), np.zeros(1)], "iter_1d_strided"),
    case(iter_1d, [A1, A1], [np.zeros(0), np.zeros(1)], "iter_1d_empty"),
    case(iter_rows, [A2, A1], [arr((4, 5)), np.zeros(2)]),
    case(iter_rows, [A2, A1], [strided(arr((4, 5))), np.zeros(2)], "iter_rows_strided"),
    case(iter_3d, [A3, A1], [arr((2, 3, 4)), np.zeros(1)]),
    case(enum_1d, [A1, A1], [arr(6), np.zeros(6)]),
    case(enum_start, [A1, A1], [arr(6), np.zeros(6)]),
    case(enum_rows, [A2, A1], [arr((3, 4)), np.zeros(3)]),
    case(zip_arrays, [A1, A1, A1], [arr(5), arr(5, seed=1), np.zeros(1)]),
    case(zip_three, [A1, A1, A1, A1], [arr(5), arr(5, seed=1), arr(5, seed=2), np.zeros(5)]),
    case(zip_range, [A1, A1], [arr(6), np.zeros(6)]),
    case(zip_range_step, [A1, A1], [arr(6), np.zeros(1)]),
    case(zip_short, [A1, A1, A1], [arr(6), arr(4), np.zeros(1)]),
    case(row_view, [A2, A1], [arr((3, 4)), np.zeros(4)]),
    case(row_view, [A2, A1], [strided(arr((3, 4))), np.zeros(4)], "row_view_strided"),
    case(row_write_through, [A2, A1], [arr((3, 4)), np.zeros(1)]),
    case(row_write_through, [A2, A1], [strided(arr((3, 4))), np.zeros(1)],
         "row_write_through_strided"),
    case(index_chain, [A2, A1], [arr((3, 4)), np.zeros(3)]),
    case(row_colon, [A2, A1], [arr((4, 3)), np.zeros(3)]),
    case(col_sums, [A2, A1], [strided(arr((4, 3))), np.zeros(3)]),
    case(slices_const, [A1, A1], [arr(8), np.zeros(10)]),
    case(slices_const, [A1, A1], [strided(arr(8)), np.zeros(10)], "slices_const_strided"),
    case(slices_var, [A1, T.int64, T.int64, A1], [arr(9), 4, 3, np.zeros(5)]),
    case(slices_var, [A1, T.int64, T.int64, A1], [arr(9), 20, -2, np.zeros(5)],
         "slices_var_clip_negstep"),
    case(slices_var, [A1, T.int32, T.int64, A1], [arr(9), -3, 1, np.zeros(5)],
         "slices_var_negative_bound"),
    case(slice_2d, [A2, T.int64, T.int64, A1], [arr((4, 5)), 2, 4, np.zeros(7)]),
    case(slice_2d, [A2, T.int64, T.int64, A1], [strided(arr((4, 5))), -1, -1, np.zeros(7)],
         "slice_2d_negative"),
    case(slice_of_slice, [A1, A1], [arr(9), np.zeros(4)]),
    case(slice_write, [A1, A1], [arr(9), np.zeros(1)]),
    case(view_fill, [A2, A1], [arr((3, 4)), np.zeros(1)]),
    case(view_copy, [A2, A2, A1], [arr((3, 4)), arr((3, 4), seed=3), np.zeros(1)]),
    case(view_3d, [A3, A1], [arr((2, 3, 4)), np.zeros(6)]),
    case(view_3d, [A3, A1], [strided(arr((2, 3, 4))), np.zeros(6)], "view_3d_strided"),
    case(view_in_loop_var, [A2, A1], [arr((4, 3)), np.zeros(4)]),
    case(view_size_ndim, [A2, A1], [arr((4, 3)), np.zeros(3)]),
    case(iter_int, [I1, I1], [arr(7, np.int64), np.zeros(1, np.int64)]),
    case(iter_view_of_slice, [A2, A1], [arr((4, 3)), np.zeros(4)]),
    case(for_else_break, [A1, A1], [np.array([1.0, 2.0, -3.0, 4.0]), np.zeros(1)]),
    case(for_else_break, [A1, A1], [np.array([1.0, 2.0]), np.zeros(1)], "for_else_nobreak"),
    case(for_else_range, [T.int64, I1], [10, np.zeros(1, np.int64)]),
    case(for_else_range, [T.int64, I1], [3, np.zeros(1, np.int64)], "for_else_range_nobreak"),
    case(while_else, [T.int64, I1], [10, np.zeros(1, np.int64)]),
    case(while_else, [T.int64, I1], [5, np.zeros(1, np.int64)], "while_else_nobreak"),
    case(nested_for_else, [A2, I1], [np.array([[0.0, 0.1], [0.9, 0.0], [0.2, 0.3]]),
                                     np.zeros(1, np.int64)]),
    case(table_rows, [A1], [np.zeros(4)]),
    case(assert_ignored, [A1, A1], [arr(5), np.zeros(1)], ref=assert_ignored_ref),
    case(view_to_device_fn, [A2, A1], [strided(arr((4, 5))), np.zeros(4)]),
    case(raising, [A1, A1], [np.array([1.0, 2.0, -1.0, 3.0]), np.zeros(4)], ref=raising_ref),
    case(iter_tuple, [A2, A1], [arr((3, 4)), np.zeros(2)]),
    case(tuple_target_enum, [A1, A1], [arr(5), np.zeros(5)]),
    case(local_rows, [A1, A1], [arr(3), np.zeros(2)]),
]


OPTIONAL_CASES = [
    # maybe_double returns None for x <= 0: cufunc gives NaN there (docs/language-arrays.md)
    (optional_user, [A1, A1], [np.array([1.5, -2.0, 0.0, 3.0])],
     lambda a: np.where(a > 0, a * 2.0, np.nan)),
    (optional_int_user, [I1, I1], [np.array([1, -2, 0, 3], np.int64)],
     lambda a: np.where(a > 0, a + 1, 0)),
    # a raise in a device function returns its None value to the caller
    (raising_caller, [A1, A1], [np.array([4.0, -1.0, 2.25])],
     lambda a: np.where(a >= 0, np.sqrt(np.abs(a)), np.nan)),
]


# ---------------------------------------------------------------------------------- harness

def _host_entry(k, r):
    """An extern "C" entry: arrays as (data, shape, strides) triples, scalars by pointer."""
    params, setup, call = [], [], []
    for j, t in enumerate(r.arg_types):
        if isinstance(t, T.Array):
            params += ["char *d%d" % j, "const long long *s%d" % j, "const long long *t%d" % j]
            setup.append("%s a%d; a%d.data = d%d;" % (t.cname, j, j, j))
            setup.append("for (int k = 0; k < %d; k++) { a%d.shape[k] = s%d[k]; "
                         "a%d.strides[k] = t%d[k]; }" % (t.ndim, j, j, j, j))
            call.append("a%d" % j)
        else:
            params.append("const %s *p%d" % (t.cname, j))
            call.append("*p%d" % j)
    return ('extern "C" void cfentry%d(%s) {\n  %s\n  %s(%s);\n}\n'
            % (k, ", ".join(params), "\n  ".join(setup), r.name, ", ".join(call)))


def _device_entry(k, r):
    params, call = [], []
    for j, t in enumerate(r.arg_types):
        params.append("%s a%d" % (t.cname, j))
        call.append("a%d" % j)
    return ('extern "C" __global__ void cfkernel%d(%s) { %s(%s); }\n'
            % (k, ", ".join(params), r.name, ", ".join(call)))


def _ctypes_args(r, args):
    out, keep = [], []
    for t, a in zip(r.arg_types, args):
        if isinstance(t, T.Array):
            assert isinstance(a, np.ndarray) and a.ndim == t.ndim and a.dtype == t.dtype.dtype
            shape = np.array(a.shape, np.int64)
            strides = np.array(a.strides, np.int64)
            keep += [shape, strides]
            out += [ctypes.c_void_p(a.ctypes.data), shape.ctypes.data_as(ctypes.c_void_p),
                    strides.ctypes.data_as(ctypes.c_void_p)]
        else:
            s = np.array([a], dtype=t.dtype)
            keep.append(s)
            out.append(s.ctypes.data_as(ctypes.c_void_p))
    return out, keep


def _copy_args(args):
    """Copies of the arguments for one run, keeping each array's layout (a strided view is
    copied into a strided view of a fresh base)."""
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            if a.flags.c_contiguous or a.ndim == 0:
                out.append(a.copy())
            else:
                b = strided(np.ascontiguousarray(a))
                out.append(b)
        else:
            out.append(a)
    return out


def _py_args(argtypes, args):
    return [a if isinstance(t, T.Array) else t.dtype.type(a) for t, a in zip(argtypes, args)]


_BUILT = {}


def _build(cases, typing="numpy"):
    """Translate every case (with one typing policy) and build them all into one library
    (cached per test session)."""
    key = tuple(c[0] for c in cases) + (typing,)
    if key in _BUILT:
        return _BUILT[key]
    results = [L.translate(c[1], c[2], typing=typing) for c in cases]
    src = ['#include "cufunc/runtime.cuh"\n']
    dev = ['#include "cufunc/runtime.cuh"\n']
    for k, r in enumerate(results):
        body = H._strip_include(r.source)
        src += [body, _host_entry(k, r)]
        dev += [body, _device_entry(k, r)]
    lib = H.build_shared("".join(src), "langarr")
    _BUILT[key] = (results, lib, "".join(dev))
    return _BUILT[key]


ALL = CASES + [case(f, ts, a + [np.zeros(len(a[0]), a[0].dtype)], "opt_" + f.__name__)
               for f, ts, a, _ in OPTIONAL_CASES]


def _run_host(idx, typing="numpy"):
    results, lib, _ = _build(ALL, typing)
    label, func, argtypes, args, _ = ALL[idx]
    r = results[idx]
    got_args = _copy_args(args)
    cargs, keep = _ctypes_args(r, got_args)
    fn = getattr(lib, "cfentry%d" % idx)
    fn.restype = None
    fn(*cargs)
    return got_args


TYPINGS = ["numpy", "numba"]


@pytest.mark.parametrize("typing", TYPINGS)
@pytest.mark.parametrize("idx", range(len(CASES)), ids=[c[0] for c in CASES])
def test_host_against_python(idx, typing):
    """Both typing policies: these bodies work on float64 and int64 arrays, where NumPy's and
    Numba's rules give the same values."""
    label, func, argtypes, args, ref = CASES[idx]
    got = _run_host(idx, typing)
    want = _copy_args(args)
    ref(*_py_args(argtypes, want))
    for g, w, t in zip(got, want, argtypes):
        if isinstance(t, T.Array):
            np.testing.assert_array_equal(g, w, err_msg=label)


@pytest.mark.parametrize("typing", TYPINGS)
@pytest.mark.parametrize("k", range(len(OPTIONAL_CASES)),
                         ids=[c[0].__name__ for c in OPTIONAL_CASES])
def test_optional_return(k, typing):
    """A device function that returns None on some path: the caller gets NaN there (0 for an
    integer result) where Numba's kernel leaves the element unwritten (debug=False)."""
    func, argtypes, args, ref = OPTIONAL_CASES[k]
    idx = len(CASES) + k
    got = _run_host(idx, typing)
    np.testing.assert_array_equal(got[-1], ref(args[0]))


def test_optional_return_type():
    """The result type of a function that may fall off its end is the type of its other
    returns (Numba: Optional(float64); here float64, the None path giving NaN)."""
    r = L.translate(maybe_double, [T.float64])
    assert r.return_type == T.float64
    r = L.translate(maybe_int, [T.int64])
    assert r.return_type == T.int64
    # NumPy's meaning: float32 * 2.0 stays float32 (NEP 50)
    assert L.translate(maybe_double, [T.float32]).return_type == T.float32


@pytest.mark.skipif(not H.nvrtc_available(), reason="NVRTC is not available here")
@pytest.mark.parametrize("typing", TYPINGS)
def test_nvrtc_compiles_all(typing):
    _, _, dev = _build(ALL, typing)
    ok, log = H.nvrtc_compile(dev, ("-std=c++17", "--fmad=false"))
    assert ok, log[-4000:]


# ---------------------------------------------------------------------------------- typing

def test_view_types():
    """The views' types: a[i] of an n-d array is an (n-1)-d array; slices keep the rank."""
    def f(a, out):
        out[0] = a[0][0]
    src = L.translate(f, [A2, A1]).source
    assert "cf_array_ref<cf_float64, 1>" in src


# ---------------------------------------------------------------------------------- more of
# what Numba accepts in device code (host-run against CPython on NumPy scalars)

WEIGHTS = (0.5, 1.5, 2.5, 4.0)


def walrus(x):
    if (y := x * 2) > 1:
        return y
    n = 0
    while (n := n + 1) < 5:
        x += n
    return x


def in_tuple(x):
    return 1.0 if x in (1.0, 2.0, -3.5) else (2.0 if x not in (0.0, 4.0) else 3.0)


def tuple_var_index(i):
    return WEIGHTS[i % 4] + WEIGHTS[-(i % 4) - 1]


def tuple_ops(x):
    t = (x, x + 1, x + 2) + (x * 2,)
    u = t[1:]
    v = t[::-1]
    same = (x, 1.0) == (x, 1.0)
    diff = (x, 1.0) != (x, 2.0)
    w = (x,) * 3
    return u[0] + v[0] + len(w) + same + diff + len(t[5:])


def numpy_twins(x):
    return np.maximum(x, 1.0) + np.minimum(x, -2.0) + np.sign(x) + np.fmax(x, 0.5) + \
        np.logical_and(x > 0, x < 3)


def round_digits(x):
    return round(x, 2) + round(x, 0) + round(x, -1)


def iter_shape(a, out):
    k = 0
    for n in a.shape:
        k = k * 10 + n
    out[0] = k
    out[1] = len(a.T)
    out[2] = a.T[1, 0]
    out[3] = a.T.shape[0]


CONST_TABLE = np.array([3.0, 1.0, 4.0, 1.0, 5.0])


def const_table(out):
    t = cuda.const.array_like(CONST_TABLE)
    for i, v in enumerate(t):
        out[i] = v * 2


def test_scalar_constructs():
    F, I = T.float64, T.int64
    rng = np.random.default_rng(7)
    xs = np.concatenate([[1.0, 2.0, -3.5, 0.0, 4.0, 0.25, -1.0], rng.uniform(-5, 5, 40)])
    cases = [H.Case(walrus, [F], inputs=[xs]),
             H.Case(in_tuple, [F], inputs=[xs]),
             H.Case(tuple_var_index, [I], inputs=[np.arange(-9, 9)]),
             H.Case(tuple_ops, [F], inputs=[xs]),
             H.Case(numpy_twins, [F], inputs=[xs]),
             H.Case(round_digits, [F], inputs=[np.concatenate([xs * 1000, [2.675, 1.005,
                                                                     0.125, -2.5, 1e300]])]),
             H.Case(round_digits, [T.float32], inputs=[xs.astype(np.float32) * 100])]
    # Numba's typing gives the same values for float64 and int64 arguments
    cases += [H.Case(c.func, c.argtypes, inputs=c.inputs, typing="numba",
                     label=c.label + "_numba") for c in list(cases)
              if all(t in (F, I) for t in c.argtypes)]
    failures = H.run_cases(cases)
    assert not failures, "\n".join(failures)


def test_array_constructs():
    for func, argtypes, args in [(iter_shape, [A2, A1], [arr((3, 4)), np.zeros(4)]),
                                 (const_table, [A1], [np.zeros(5)])]:
        r = L.translate(func, argtypes)
        lib = H.build_shared(r.source + _host_entry(0, r), "langarr1")
        got = _copy_args(args)
        cargs, keep = _ctypes_args(r, got)
        lib.cfentry0.restype = None
        lib.cfentry0(*cargs)
        want = _copy_args(args)
        func(*want)
        np.testing.assert_array_equal(got[-1], want[-1], err_msg=func.__name__)


def printing(x, i, b, z):
    print("x =", x, "i:", i, b, z, "100%")


def test_print_host():
    """print() is the device's printf with Numba's formats (%f, integers in full, True/False);
    a host build prints the same line."""
    code = textwrap.dedent("""
        import ctypes, sys, numpy as np
        sys.path.insert(0, %r)
        import test_lang_arrays as M, lang_harness as H, cufunc.lang as L, cufunc.types as T
        r = L.translate(M.printing, [T.float32, T.int16, T.bool_, T.complex128])
        lib = H.build_shared(r.source + M._host_entry(0, r), "langprint")
        cargs, keep = M._ctypes_args(r, [1.5, -7, True, 1 - 2j])
        lib.cfentry0.restype = None
        lib.cfentry0(*cargs)
    """ % os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "x = 1.500000 i: -7 True (1.000000-2.000000j) 100%\n", p.stdout
    if H.nvrtc_available():
        r = L.translate(printing, [T.float32, T.int16, T.bool_, T.complex128])
        ok, log = H.nvrtc_compile(r.source + _device_entry(0, r), ("-std=c++17",))
        assert ok, log


# ---------------------------------------------------------------------------------- errors

def e_fancy(a, b, out):
    out[0] = a[b][0]  # MARK


def e_none_index(a, out):
    out[0] = a[None][0]  # MARK


def e_ellipsis(a, out):
    out[0] = a[...][0]  # MARK


def e_step_zero(a, out):
    out[0] = a[::0][0]  # MARK


def e_float_bound(a, x, out):
    out[0] = a[x:][0]  # MARK


def e_too_many(a, out):
    out[0] = a[0, 1]  # MARK


def e_iter_scalar(x, out):
    for v in x:  # MARK
        out[0] = v


def e_zip_scalar(a, x, out):
    for v, w in zip(a, x):  # MARK
        out[0] = v


def e_enum_target(a, out):
    for p in enumerate(a):  # MARK
        out[0] = 1.0    # a row of a 2-d array is a view: (int, view) is no tuple of numbers


def e_unpack_count(a, out):
    for i, v, w in enumerate(a):  # MARK
        out[0] = v


def e_return_view(a):
    return a[0]  # MARK


def e_view_as_number(a, out):
    out[0] = a[0] + 1.0  # MARK


def e_store_shape(a, b, out):
    a[0, :] = b  # MARK


def e_readonly_view(out):
    TABLE[0][1] = 2.0  # MARK


def e_zip_keywords(a, out):
    for v in zip(a, strict=True):  # MARK
        out[0] = v


def e_assert_message(x, out):
    assert x > 0, x  # MARK
    out[0] = x


def e_is_none(x):
    return maybe_double(x) is None  # MARK


ERRORS = [
    (e_fancy, [A2, I1, A1], "an array index must be an integer or a slice", TypingError),
    (e_none_index, [A2, A1], "None (np.newaxis) in an index is not supported",
     UnsupportedError),
    (e_ellipsis, [A2, A1], "Ellipsis (...) in an index is not supported", UnsupportedError),
    (e_step_zero, [A1, A1], "slice step cannot be zero", TypingError),
    (e_float_bound, [A1, T.float64, A1], "slice bounds must be integers", TypingError),
    (e_too_many, [A1, A1], "too many indices for a 1-d array", TypingError),
    (e_iter_scalar, [T.float64, A1], "cannot iterate over a float64 value", TypingError),
    (e_zip_scalar, [A1, T.float64, A1], "cannot iterate over a float64 value", TypingError),
    (e_enum_target, [A2, A1], "unpack the items of enumerate() and zip()", UnsupportedError),
    (e_unpack_count, [A1, A1], "cannot unpack 2 values into 3 names", TypingError),
    (e_return_view, [A2], "returning an array is not supported", UnsupportedError),
    (e_view_as_number, [A2, A1], "an array cannot be used as an operand", TypingError),
    (e_store_shape, [A2, A2, A1], "cannot assign a 2-d array to a 1-d view", TypingError),
    (e_readonly_view, [A1], "read-only", TypingError),
    (e_zip_keywords, [A1, A1], "zip() takes no keyword arguments", UnsupportedError),
    (e_assert_message, [T.float64, A1], "the message of an assert must be a string",
     UnsupportedError),
    (e_is_none, [T.float64], "the operator 'is' is not supported", UnsupportedError),
]


@pytest.mark.parametrize("func,argtypes,message,cls", ERRORS, ids=[e[0].__name__ for e in ERRORS])
def test_errors(func, argtypes, message, cls):
    with pytest.raises(cls) as ei:
        L.translate(func, argtypes)
    text = str(ei.value)
    assert message in text, text
    assert "# MARK" in text, text          # the user's line is shown
    assert ei.value.cufunc_location[0] == os.path.abspath(__file__)


# ---------------------------------------------------------------------------------- assert

def checked(x, out):
    assert x >= 0, "x must be >= 0"
    assert x < 100
    out[0] = x


def test_assert_debug_source():
    """With debug=True each assert becomes a check whose failure names the assertion and its
    line; without it nothing of the assert is in the source."""
    plain = L.translate(checked, [T.float64, A1]).source
    assert 'cf_lang_assert_fail("' not in plain
    dbg = L.translate(checked, [T.float64, A1], debug=True).source
    assert dbg.count('cf_lang_assert_fail("') == 2
    line = checked.__code__.co_firstlineno + 1
    assert "x must be >= 0" in dbg
    assert "test_lang_arrays.py:%d" % line in dbg
    assert "assert x < 100" in dbg
    ok, log = H.nvrtc_compile(dbg, ("-std=c++17", "--fmad=false")) if H.nvrtc_available() \
        else (True, "")
    assert ok, log


def test_assert_debug_host_passes():
    """debug=True asserts that hold do not change the result (host build)."""
    r = L.translate(checked, [T.float64, A1], debug=True)
    src = (r.source + _host_entry(0, r))
    lib = H.build_shared(src, "langassert")
    out = np.zeros(1)
    cargs, keep = _ctypes_args(r, [5.0, out])
    lib.cfentry0.restype = None
    lib.cfentry0(*cargs)
    assert out[0] == 5.0


def test_assert_debug_host_fails():
    """A failed assert in a host build prints the assertion and its line and aborts (the
    device build stops the kernel instead); run in a child process."""
    code = textwrap.dedent("""
        import ctypes, sys, numpy as np
        sys.path.insert(0, %r)
        import test_lang_arrays as M, lang_harness as H, cufunc.lang as L, cufunc.types as T
        r = L.translate(M.checked, [T.float64, M.A1], debug=True)
        lib = H.build_shared(r.source + M._host_entry(0, r), "langassert")
        out = np.zeros(1)
        cargs, keep = M._ctypes_args(r, [-1.0, out])
        lib.cfentry0.restype = None
        lib.cfentry0(*cargs)
        print("NOT STOPPED")
    """ % os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode != 0
    assert "NOT STOPPED" not in p.stdout
    line = checked.__code__.co_firstlineno + 1
    assert "x must be >= 0" in p.stderr and "test_lang_arrays.py:%d" % line in p.stderr, p.stderr


def test_decorators_pass_debug():
    """vectorize/guvectorize(debug=True) check the body's asserts (the kernel compiles with
    NVRTC); without debug the kernel has none. No GPU needed."""
    from cufunc import _core, guvectorize, vectorize

    def half(x):
        assert x >= 0, "x must not be negative"
        return x / 2

    for debug in (False, True):
        uf = vectorize(["float64(float64)"], debug=debug)(half)
        src = uf.kernel_source(np.ones(4))
        assert ('cf_lang_assert_fail("' in src) == debug
        if debug:
            image, _ = _core.compile_source(src, ("--fmad=false",), (9, 0))
            assert len(image) > 0

    def rows(a, out):
        for i, row in enumerate(a):
            assert len(row) > 0
            out[i] = row[0]

    gu = guvectorize(["void(float64[:, :], float64[:])"], "(m,n)->(m)", debug=True)(rows)
    src = gu.kernel_source(np.ones((5, 3, 4)))
    assert src.count('cf_lang_assert_fail("') == 1
    image, _ = _core.compile_source(src, ("--fmad=false",), (9, 0))
    assert len(image) > 0


# ---------------------------------------------------------------------------------- GPU

@gpu
def test_gpu_views_and_iteration():
    from cufunc import guvectorize

    @guvectorize(["void(float64[:, :], float64[:])"], "(m,n)->(n)")
    def colsum_rows(a, out):
        for j in range(len(out)):
            out[j] = 0.0
        for row in a:
            for j, v in enumerate(row):
                out[j] += v

    @guvectorize(["void(float64[:, :], int64, float64[:])"], "(m,n),()->(m)")
    def tail_sums(a, k, out):
        for i, row in enumerate(a):
            s = 0.0
            for v in row[k:]:
                s += v
            out[i] = s

    @guvectorize(["void(float64[:, :], float64[:, :])"], "(m,n)->(m,n)")
    def bump(a, out):
        for i in range(a.shape[0]):
            for j in range(a.shape[1]):
                out[i, j] = a[i, j]
        for i in range(out.shape[0]):
            out[i][0] += 1.0
        out[:, -1] = -2.0

    rng = np.random.default_rng(5)
    a = rng.standard_normal((50, 6, 7))
    av = a[:, ::-1, ::2]                        # strided input
    np.testing.assert_array_equal(colsum_rows(av), _colsum_ref(av))
    ks = np.array([0, 2, -2, 9] * 12 + [1, -9])
    want = np.array([[row[k:].sum() for row in m] for m, k in zip(av, ks)])
    np.testing.assert_allclose(tail_sums(av, ks), want, rtol=1e-12, atol=1e-12)
    got = bump(av)
    ref = av.copy()
    ref[:, :, 0] += 1.0
    ref[:, :, -1] = -2.0
    np.testing.assert_array_equal(got, ref)


def _colsum_ref(a):
    out = np.zeros(a.shape[::2])
    for b in range(a.shape[0]):
        for row in a[b]:
            for j, v in enumerate(row):
                out[b, j] += v
    return out


@gpu
def test_gpu_assert_compiled_away_without_debug():
    from cufunc import guvectorize

    @guvectorize(["void(float64[:], float64[:])"], "(n)->()")
    def total(a, out):
        s = 0.0
        for v in a:
            assert v > 1e300
            s += v
        out[0] = s

    a = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(total(a), a.sum(axis=1))


@gpu
def test_gpu_assert_debug_raises(tmp_path):
    """debug=True: a failed assert stops the kernel; the call raises AssertionError naming the
    assertion and its line. CUDA's device-side assert leaves the context unusable, so this runs
    in a child process."""
    code = textwrap.dedent("""
        import numpy as np, cufunc
        from cufunc import guvectorize

        @guvectorize(["void(float64[:], float64[:])"], "(n)->()", debug=True)
        def positive_sum(a, out):
            s = 0.0
            for v in a:
                assert v >= 0, "negative input"
                s += v
            out[0] = s

        print("OK", positive_sum(np.arange(8.0).reshape(2, 4)).tolist())
        try:
            positive_sum(np.array([[1.0, -1.0]]))
            cufunc.cuda.synchronize()
        except AssertionError as e:
            print("RAISED", type(e).__name__, isinstance(e, cufunc.errors.CudaAPIError), e)
        else:
            print("NOT RAISED")
    """)
    path = tmp_path / "cf_assert_child.py"
    path.write_text(code)
    p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert "OK [6.0, 22.0]" in out, out
    assert "RAISED DeviceAssertionError True" in out, out
    assert "context unusable" in out, out
    assert "negative input" in out and "cf_assert_child.py:9" in out, out
