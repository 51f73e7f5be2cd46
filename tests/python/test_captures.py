"""Device arrays captured from globals (and closures) by vectorize, guvectorize and cuda.reduce
bodies: read by reference through a descriptor written into each kernel module when it is loaded,
never through the kernel's source.

Without a GPU: the generated loop sources (no pointer in them, the same for any captured array of
a dtype and ndim, compiling with NVRTC inside every engine's kernel), the captures each loop
carries, and the add_loop entry points' checks. With a GPU (marked gpu): values against NumPy in
each engine, mutations seen by the next call, several captures of different dtypes and ndims,
2-d indexing, CuPy arrays, arrays kept alive by the ufunc, one source shared by ufuncs capturing
different arrays, the disk cache serving a process that captures another array, and a capture
on another device than the call's (with two GPUs; the check itself is tested without a GPU in
tests/c/test_loopfn.c, test_wrong_device_is_refused_before_the_gpu)."""
import gc
import json
import os
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

from cufunc import _core, cuda, guvectorize, vectorize
from cufunc import types as T
from cufunc.lang import translate
from cufunc.lang.captures import loop_function

gpu = pytest.mark.gpu

# the modules (the package exports the decorators under the same names), for their loop builders
_guv = sys.modules["cufunc.guvectorize"]
_vec = sys.modules["cufunc.vectorize"]

PTR = 0x7F3A5C2D1000  # a made-up device address: it must never appear in generated source


class FakeDeviceArray:
    """An object exposing __cuda_array_interface__ (what the translator reads), no memory."""

    def __init__(self, dtype, shape, ptr=PTR):
        self.__cuda_array_interface__ = {"typestr": np.dtype(dtype).str, "shape": tuple(shape),
                                         "strides": None, "data": (ptr, False), "version": 3}


def pointer_spellings(ptr):
    return [str(ptr), hex(ptr), "%x" % ptr, "%X" % ptr]


def assert_no_pointer(src, ptr=PTR):
    for s in pointer_spellings(ptr):
        assert s not in src, s


def compile_sm90(src):
    image, is_ptx = _core.compile_source(src, ("--fmad=false",), (9, 0))
    assert len(image) > 0
    return image


# ---- module-level captures (the Numba way: a global device array) ----------------------------

G_TABLE = FakeDeviceArray(np.float32, (16,))
G_GRID = FakeDeviceArray(np.int16, (4, 8), PTR + 4096)


def lookup_global(i):
    return G_TABLE[i]


def two_captures(i, j):
    return G_TABLE[i] * 2 + G_GRID[i, j]


def row_dot(i, x, out):
    s = 0.0
    for j in range(x.shape[0]):
        s += G_GRID[i, j] * x[j]
    out[0] = s


def row_dot_returned(i, x):
    s = 0.0
    for j in range(x.shape[0]):
        s += G_GRID[i, j] * x[j]
    return s


def heaviest(a, b):
    return a if G_TABLE[a] > G_TABLE[b] or (G_TABLE[a] == G_TABLE[b] and a < b) else b


# ---- without a GPU ---------------------------------------------------------------------------

def test_wrapper_has_the_body_parameters_and_reads_constant_descriptors():
    r = translate(two_captures, [T.int32, T.int32])
    src, name, caps = loop_function(r, "two_captures")
    assert name != r.name and name.startswith("cf_cap_")
    assert [c[1] for c in caps] == [G_TABLE, G_GRID]
    assert [c[0] for c in caps] == [name + "_garr0_G_TABLE", name + "_garr1_G_GRID"]
    assert "'G_TABLE' captured by two_captures" in caps[0][2]
    assert "'G_GRID' captured by two_captures" in caps[1][2]
    assert "__constant__ cf_array_ref<cf_float32, 1> %s;" % caps[0][0] in src
    assert "__constant__ cf_array_ref<cf_int16, 2> %s;" % caps[1][0] in src
    assert 'extern "C" {' in src
    assert "%s(cf_int32 a0, cf_int32 a1)" % name in src
    assert_no_pointer(src)
    assert_no_pointer(src, PTR + 4096)
    compile_sm90(src + '\nextern "C" __global__ void k(double *o, int i) { o[0] = %s(i, i); }\n'
                 % name)


def test_no_captures_leaves_the_loop_as_it_is():
    table = np.arange(4, dtype=np.float32)  # a host array: a constant table, not a capture

    def host_lookup(i):
        return table[i]

    r = translate(host_lookup, [T.int32])
    assert loop_function(r, "host_lookup") == (r.source, r.name, ())
    spec, nout = _vec._loop_from(host_lookup, [T.int32], None, False)
    assert spec[4] == () and nout == 1


def test_the_source_does_not_depend_on_the_captured_array():
    """What makes the disk cache serve every process: two different arrays of one dtype and ndim
    give byte-identical loop sources (and kernel sources, and so cache keys)."""
    def make(arr):
        def f(i):
            return arr[i] + 1
        return f

    a = FakeDeviceArray(np.float64, (10,), PTR)
    b = FakeDeviceArray(np.float64, (99,), PTR + (1 << 20))
    sa, _ = _vec._loop_from(make(a), [T.int64], None, False)
    sb, _ = _vec._loop_from(make(b), [T.int64], None, False)
    assert sa[1] == sb[1] and sa[2] == sb[2]
    assert sa[4][0][1] is a and sb[4][0][1] is b
    assert_no_pointer(sa[1], PTR)
    assert_no_pointer(sb[1], PTR + (1 << 20))
    key_a = _core.cache_key(sa[1], sa[3], (9, 0))
    key_b = _core.cache_key(sb[1], sb[3], (9, 0))
    assert key_a == key_b
    # a different dtype or ndim is a different function
    c = FakeDeviceArray(np.float32, (10,))
    d = FakeDeviceArray(np.float64, (10, 2))
    assert _vec._loop_from(make(c), [T.int64], None, False)[0][1] != sa[1]

    def g(i):
        return d[i, 0]
    assert "cf_array_ref<cf_float64, 2>" in _vec._loop_from(g, [T.int64], None, False)[0][1]


def _ufunc_with(spec, nin, nout):
    """A bare _core.UFunc holding the loop's source without its captures: the source stands on its
    own (the descriptors are zero until a module is loaded with them), so its kernels can be
    generated and compiled without a GPU."""
    uf = _core.UFunc("t", nin, nout)
    uf.add_loop(*spec[:4])
    return uf


def test_vectorize_kernels_compile_with_captures():
    spec, nout = _vec._loop_from(two_captures, [T.int32, T.int32], T.float64, False)
    assert [c[1] for c in spec[4]] == [G_TABLE, G_GRID]
    uf = _ufunc_with(spec, 2, nout)
    i = np.arange(12, dtype=np.int32).reshape(3, 4)
    for args in [(i, i), (i[:, ::2], i[:, :2]), (i, np.int32(3)), (i.T, i.T)]:
        src = uf.kernel_source(*args)
        assert spec[4][0][0] in src and spec[4][1][0] in src
        assert_no_pointer(src)
        compile_sm90(src)


def test_signature_less_vectorize_captures_on_translation():
    compile_loop = _vec._make_compiler(lookup_global, False)
    spec = compile_loop((np.dtype(np.int64),), None)
    assert len(spec) == 5 and spec[4][0][1] is G_TABLE
    assert spec[0] == (np.dtype(np.int64), np.dtype(np.float32))


def test_guvectorize_kernels_compile_with_captures():
    layout = "(),(n)->()"
    form = _guv._Form(row_dot, layout, *_guv._parse_layout(layout))
    spec = _guv._void_loop(row_dot, form, [T.int64, T.float32[:], T.float32[:]], False)
    assert len(spec) == 6 and spec[5][0][1] is G_GRID
    form_r = _guv._Form(row_dot_returned, layout, *_guv._parse_layout(layout))
    spec_r = _guv._return_loop(row_dot_returned, form_r, [T.int64, T.float32[:]], [T.float32],
                               False)
    assert spec_r[5][0][1] is G_GRID
    # the return form's wrapper calls the capture wrapper, which passes the descriptor
    assert "cf_cap_" in spec_r[2] and spec_r[3].startswith("cf_gu_ret_")
    for s in (spec, spec_r):
        g = _core.GUFunc("t", "(),(n)->()")
        g.add_loop(*s[:5])
        x = np.ones((100, 8), np.float32)
        i = np.arange(100, dtype=np.int64) % 4
        src = g.kernel_source(i, x)
        assert s[5][0][0] in src
        assert_no_pointer(src, PTR + 4096)
        compile_sm90(src)


def test_reduce_loop_with_captures():
    from cufunc import cuda as _cuda
    r = _cuda.Reduce(heaviest)
    source, name, options, caps = r.compiler(np.dtype(np.int64))
    assert caps[0][1] is G_TABLE and "'G_TABLE' captured by heaviest" in caps[0][2]
    assert name.startswith("cf_cap_")
    assert_no_pointer(source)
    compile_sm90(source + '\nextern "C" __global__ void k(long long *o) { o[0] = %s(o[1], o[2]); }'
                 '\n' % name)


def test_add_loop_checks_captures_before_the_gpu():
    uf = _core.UFunc("t", 1, 1)
    src = "__device__ float f(int i) { return i; }\n"
    types = ("int32", "float32")
    host = np.zeros(3, np.float32)
    with pytest.raises(TypeError, match="capture 0 must be a tuple"):
        uf.add_loop(types, src, "f", (), ["sym"])
    with pytest.raises(TypeError, match="capture 0 must be a tuple"):
        uf.add_loop(types, src, "f", (), [("sym",)])
    with pytest.raises(TypeError, match="non-empty str"):
        uf.add_loop(types, src, "f", (), [(b"sym", host)])
    with pytest.raises(TypeError, match="non-empty str"):
        uf.add_loop(types, src, "f", (), [("", host)])
    with pytest.raises(TypeError, match="the array 'h' must be a device array.*numpy.ndarray"):
        uf.add_loop(types, src, "f", (), [("sym", host, "the array 'h'")])
    with pytest.raises(TypeError, match="sequence"):
        uf.add_loop(types, src, "f", (), 5)
    assert uf.ntypes == 0 and uf.loops == ()
    g = _core.GUFunc("t", "(n)->()")
    with pytest.raises(TypeError, match="'h' must be a device array"):
        g.add_loop(("float32", "float32"), (1, 1), src, "f", (), [("sym", host, "'h'")])
    assert g.ntypes == 0 and g.loops == ()
    red = _core.Reducer("t")
    with pytest.raises(TypeError, match="'h' must be a device array"):
        red.add_loop("float32", src, "f", None, [("sym", host, "'h'")])
    assert red.types == ()
    # an empty capture list is no capture
    uf.add_loop(types, src, "f", ("--fmad=false",), ())
    assert uf.loops[0][4] == ()
    g.add_loop(("float32", "float32"), (1, 1), src, "f")
    assert g.loops[0][4] == ()


# ---- on the GPU ------------------------------------------------------------------------------

@gpu
def test_vectorize_reads_a_captured_array_and_sees_mutations():
    h = np.arange(16, dtype=np.float32) * 1.5
    table = cuda.to_device(h)

    @vectorize(["float32(int32)"], target="cuda")
    def lookup(i):
        return table[i]

    idx = np.random.default_rng(0).integers(0, 16, 100003).astype(np.int32)
    np.testing.assert_array_equal(lookup(idx), h[idx])
    new = (np.arange(16, dtype=np.float32) - 7) ** 2
    table.copy_to_device(new)
    np.testing.assert_array_equal(lookup(idx), new[idx])
    d_idx = cuda.to_device(idx)
    np.testing.assert_array_equal(lookup(d_idx).copy_to_host(), new[idx])
    # the loop record carries the capture, and its source has no pointer
    (entry,) = lookup.loops
    (cap,) = entry[4]
    assert cap[1] is table and "'table' captured by" in cap[2]
    assert_no_pointer(entry[1], table.ptr)
    assert_no_pointer(lookup.kernel_source(idx), table.ptr)


@gpu
def test_two_captures_of_different_dtypes_and_ndims():
    rng = np.random.default_rng(1)
    w = rng.standard_normal(32)                             # float64, 1-d
    grid = rng.integers(-100, 100, (32, 24)).astype(np.int16)  # int16, 2-d, indexed [i, j]
    d_w, d_grid = cuda.to_device(w), cuda.to_device(grid)

    @vectorize(["float64(int64, int64)"])
    def mix(i, j):
        return d_w[i] * 2 + d_grid[i, j] - d_grid.shape[1]

    i = rng.integers(0, 32, (300, 7))
    j = rng.integers(0, 24, (300, 7))
    np.testing.assert_array_equal(mix(i, j), w[i] * 2 + grid[i, j] - 24)
    # a strided (non-contiguous) captured view is read through its strides
    d_strided = cuda.to_device(np.repeat(grid, 2, axis=1))[:, ::2]
    assert d_strided.strides == (48 * 2, 2 * 2)

    @vectorize(["int16(int64, int64)"])
    def at_strided(i, j):
        return d_strided[i, j]

    np.testing.assert_array_equal(at_strided(i, j), grid[i, j])


@gpu
def test_signature_less_vectorize_and_ufunc_reduce():
    h = np.array([3, 1, 4, 1, 5, 9, 2, 6], np.int64)
    rank = cuda.to_device(h)

    @vectorize
    def pick(a, b):   # the element of larger rank (ties: the smaller): associative, commutative
        return a if rank[a] > rank[b] or (rank[a] == rank[b] and a < b) else b

    x = np.random.default_rng(2).integers(0, 8, 5000)
    want = np.where((h[x] > h[x[::-1]]) | ((h[x] == h[x[::-1]]) & (x < x[::-1])), x, x[::-1])
    np.testing.assert_array_equal(pick(x, x[::-1]), want)
    assert pick.reduce(x) == 5                               # rank 9
    rank.copy_to_device(np.array([9, 1, 4, 1, 5, 0, 2, 6], np.int64))
    assert pick.reduce(x) == 0
    assert pick.reduce(x.reshape(50, 100), axis=None) == 0
    assert pick.reduce(cuda.to_device(x.reshape(50, 100)), axis=None).copy_to_host() == 0
    rk = [9, 1, 4, 1, 5, 0, 2, 6]

    def fold(row):
        best = row[0]
        for v in row[1:]:
            best = best if rk[best] > rk[v] or (rk[best] == rk[v] and best < v) else v
        return best
    np.testing.assert_array_equal(pick.reduce(x.reshape(50, 100), axis=1),
                                  [fold(row) for row in x.reshape(50, 100)])


@gpu
def test_guvectorize_reads_captured_arrays():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((6, 5)).astype(np.float32)
    weights = cuda.to_device(w)

    @guvectorize(["void(int64, float32[:], float32[:])"], "(),(n)->()")
    def dot_row(i, x, out):
        s = 0.0
        for j in range(x.shape[0]):
            s += weights[i, j] * x[j]
        out[0] = s

    @guvectorize(["float32(int64, float32[:])"], "(),(n)->()")
    def dot_row_ret(i, x):
        s = 0.0
        for j in range(weights.shape[1]):
            s += weights[i, j] * x[j]
        return s

    @guvectorize(["void(float32[:], float32[:])"], "(n)->(n)")
    def scale_by_first_col(x, out):
        for j in range(x.shape[0]):
            out[j] = x[j] * weights[j % 6, 0]

    i = rng.integers(0, 6, 1000)
    x = rng.standard_normal((1000, 5)).astype(np.float32)
    want = np.einsum("ij,ij->i", w[i], x)
    for g in (dot_row, dot_row_ret):
        np.testing.assert_allclose(g(i, x), want, rtol=1e-5, atol=1e-5)
    xs = rng.standard_normal((40, 12)).astype(np.float32)
    np.testing.assert_allclose(scale_by_first_col(xs), xs * w[np.arange(12) % 6, 0],
                               rtol=1e-6)
    w2 = -w
    weights.copy_to_device(w2)
    np.testing.assert_allclose(dot_row(i, x), -want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dot_row_ret(cuda.to_device(i), cuda.to_device(x)).copy_to_host(),
                               -want, rtol=1e-5, atol=1e-5)
    assert dot_row.loops[0][-1][0][1] is weights


@gpu
def test_cuda_reduce_reads_captured_arrays():
    wh = np.random.default_rng(4).permutation(1000).astype(np.float32)
    w = cuda.to_device(wh)

    @cuda.reduce
    def heaviest_of(a, b):
        return a if w[a] > w[b] or (w[a] == w[b] and a < b) else b

    x = np.arange(1000, dtype=np.int64)
    assert heaviest_of(x, init=0) == int(np.argmax(wh))
    wh2 = wh[::-1].copy()
    w.copy_to_device(wh2)
    assert heaviest_of(cuda.to_device(x), init=0) == int(np.argmax(wh2))
    res = cuda.device_array(1, np.int64)
    heaviest_of(cuda.to_device(x[:500]), res=res, init=0)
    assert res.copy_to_host()[0] == int(np.argmax(wh2[:500]))


@gpu
def test_one_source_for_ufuncs_capturing_different_arrays():
    """Same function text, different arrays: one source, one compiled image, but each ufunc
    reads its own array (a module of its own per captured values)."""
    def make(table):
        @vectorize(["float32(int32)"])
        def lookup(i):
            return table[i] * 2
        return lookup

    a = cuda.to_device(np.arange(8, dtype=np.float32))
    b = cuda.to_device(np.arange(8, dtype=np.float32) + 100)
    fa, fb = make(a), make(b)
    assert fa.loops[0][1] == fb.loops[0][1]
    idx = np.array([0, 3, 7, 3], np.int32)
    np.testing.assert_array_equal(fa(idx), np.array([0, 6, 14, 6], np.float32))
    np.testing.assert_array_equal(fb(idx), np.array([200, 206, 214, 206], np.float32))
    np.testing.assert_array_equal(fa(idx), np.array([0, 6, 14, 6], np.float32))
    a.copy_to_device(np.full(8, 5, np.float32))
    np.testing.assert_array_equal(fa(idx), np.full(4, 10, np.float32))
    np.testing.assert_array_equal(fb(idx), np.array([200, 206, 214, 206], np.float32))


KEEP = None


def read_keep(i):
    return KEEP[i] + 1


@gpu
def test_the_ufunc_keeps_the_captured_array_alive():
    global KEEP
    KEEP = cuda.to_device(np.arange(10, dtype=np.int32))
    ref = weakref.ref(KEEP)
    uf = vectorize(["int32(int32)"])(read_keep)
    KEEP = None                 # the global no longer holds it: the ufunc does
    gc.collect()
    assert ref() is not None
    # fresh allocations must not land on the captured array's memory
    junk = [cuda.to_device(np.full(10, -1, np.int32)) for _ in range(8)]
    np.testing.assert_array_equal(uf(np.arange(10, dtype=np.int32)), np.arange(1, 11))
    del junk, uf
    gc.collect()
    assert ref() is None


@gpu
def test_captured_cupy_array():
    cp = pytest.importorskip("cupy", reason="CuPy is not installed on this machine")
    h = np.linspace(-1, 1, 64).astype(np.float32)
    c = cp.asarray(h)

    @vectorize(["float32(int64)"])
    def from_cupy(i):
        return c[i] * c[i]

    idx = np.arange(0, 64, 3)
    np.testing.assert_allclose(from_cupy(idx), h[idx] ** 2, rtol=1e-6)
    c[:] = cp.asarray(h * 2)
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_allclose(from_cupy(idx), (2 * h[idx]) ** 2, rtol=1e-6)
    assert from_cupy.loops[0][4][0][1] is c


@gpu
def test_captured_array_on_another_device():
    if len(cuda.gpus) < 2:
        pytest.skip("needs 2 GPUs (the check itself: tests/c/test_loopfn.c, "
                    "test_wrong_device_is_refused_before_the_gpu)")
    with cuda.gpus[1]:
        far = cuda.to_device(np.arange(4, dtype=np.float32))

    @vectorize(["float32(int32)"])
    def reads_far(i):
        return far[i]

    with cuda.gpus[0]:
        near = cuda.to_device(np.arange(4, dtype=np.int32))
        with pytest.raises(ValueError, match="'far' captured by .*reads_far is on device 1, "
                                             "but the kernel runs on device 0"):
            reads_far(near)
    with cuda.gpus[1]:
        np.testing.assert_array_equal(reads_far(np.arange(4, dtype=np.int32)),
                                      np.arange(4, dtype=np.float32))


@gpu
def test_disk_cache_serves_a_process_capturing_another_array(tmp_path):
    script = textwrap.dedent("""
        import json, sys, numpy as np
        from cufunc import vectorize, cuda, _core
        offset = float(sys.argv[1])
        table = cuda.to_device(np.arange(32, dtype=np.float64) + offset)
        @vectorize(['float64(int32)'], cache=True)
        def f(i):
            return table[i] * 3
        r = f(np.arange(32, dtype=np.int32))
        assert (r == (np.arange(32) + offset) * 3).all(), r
        print(json.dumps(_core.cache_stats()))
    """)
    env = dict(os.environ, CUFUNC_CACHE_DIR=str(tmp_path / "cache"), CUFUNC_CACHE="1")
    prog = tmp_path / "prog.py"
    prog.write_text(script)
    first = json.loads(subprocess.check_output([sys.executable, str(prog), "0"], env=env))
    second = json.loads(subprocess.check_output([sys.executable, str(prog), "1000"], env=env))
    assert first["compiles"] >= 1
    assert second["compiles"] == 0 and second["disk_hits"] >= 1
