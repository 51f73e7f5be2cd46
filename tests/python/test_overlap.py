"""Outputs that share memory with inputs: NumPy defines such calls as if
every input were copied before any output is written. Every engine is called with outputs that
alias, partly overlap or are reversed views of its inputs, and the whole buffer afterwards is
compared with NumPy's answer for the same aliasing on a host copy (NumPy's own call where it has
one, which is right by definition; for gufuncs with no NumPy twin, the function applied to copies
of the inputs and assigned to the output view).

Data are small integers, so float32/float64 sums, scans and products are exact and every result
is compared exactly. Sizes are large enough (many blocks, many scan tiles) that a kernel reading
elements another thread has already written shows up as wrong values, not only in theory.

Tests marked gpu run on the GPU machine; the overlap predicate itself is tested without a GPU in
tests/c/test_array.c (test_needs_copy)."""
import numpy as np
import pytest

from cufunc import cuda, vectorize
from cufunc.guvectorize import guvectorize
from gpu_common import host

gpu = pytest.mark.gpu

DTYPES = ["float32", "float64", "int32"]


def _sig(fmt):
    return [fmt.replace("T", t) for t in DTYPES]


def _twice_minus(a, b):
    return a * 2 - b        # not symmetric: swapped or stale operands show


twice_minus = vectorize(_sig("T(T, T)"))(_twice_minus)


def _add(a, b):
    return a + b


add = vectorize(_sig("T(T, T)"), identity=0)(_add)


def _reverse(x, out):
    n = x.shape[0]
    for i in range(n):
        out[i] = x[n - 1 - i]


reverse = guvectorize(_sig("void(T[:], T[:])"), "(n)->(n)")(_reverse)


def _rowsum_in_out(x, out):
    # writes its output before it has read its row: an output inside the row sees its own write
    out[0] = x[0] - x[0]
    for i in range(x.shape[0]):
        out[0] += x[i]


rowsum = guvectorize(_sig("void(T[:], T[:])"), "(n)->()")(_rowsum_in_out)


def _matmul(a, b, c):
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            c[i, j] = 0
            for k in range(a.shape[1]):
                c[i, j] += a[i, k] * b[k, j]


matmul = guvectorize(_sig("void(T[:,:], T[:,:], T[:,:])"), "(m,n),(n,p)->(m,p)")(_matmul)


def _axpy_scalar(x, y, out):
    out[0] = x[0] * 3 - y[0]


axpy = guvectorize(_sig("void(T[:], T[:], T[:])"), "(),()->()")(_axpy_scalar)


def _red_add(a, b):
    return a + b


red_add = cuda.reduce(_red_add)


# ---- the NumPy twins ----------------------------------------------------------------------------

def from_copies(f):
    """NumPy's semantics for a gufunc without a NumPy twin: the inputs copied, then the output."""
    def call(*args, out):
        out[...] = f(*[np.array(a, copy=True) for a in args])
        return out
    return call


NP = {
    "twice_minus": lambda a, b, out: np.subtract(a * 2, b, out=out),
    "reverse": from_copies(lambda x: x[..., ::-1]),
    "rowsum": from_copies(lambda x: x.sum(axis=-1, dtype=x.dtype)),
    "matmul": from_copies(lambda a, b: np.matmul(a, b)),
    "axpy": from_copies(lambda x, y: x * 3 - y),
}


class Eng:
    """The engines as one table: the same call written once, run on cufunc (device or host
    buffer) and on NumPy (host copy)."""

    def __init__(self, numpy):
        self.numpy = numpy

    def __getattr__(self, name):
        if not self.numpy:
            return {"twice_minus": twice_minus, "reverse": reverse, "rowsum": rowsum,
                    "matmul": matmul, "axpy": axpy, "add": add}[name]
        if name == "add":
            return np.add
        return NP[name]


def ufunc_positional(e, b):
    # positional outputs of DeviceArrays take the ufunc's fast path
    n = b.shape[0]
    return e.twice_minus(b[: n - 1], b[1:], b[1:]) if not e.numpy else \
        e.twice_minus(b[: n - 1], b[1:], out=b[1:])


N1 = (1 << 20) + 37        # 1-d buffers: many blocks, many scan tiles, a partial last one
R, C = 2048, 48            # 2-d buffers: rows of a gufunc's core length

# (name, buffer shape, call(engine, buffer), placements)
CASES = [
    # element-wise ufunc: the control (it copied before this issue)
    ("ufunc out=input", (N1,), lambda e, b: e.twice_minus(b, b[::-1], out=b), "dh"),
    ("ufunc out reversed input", (N1,), lambda e, b: e.twice_minus(b, 1, out=b[::-1]), "dh"),
    ("ufunc out shifted +1", (N1,), lambda e, b: e.twice_minus(b[:-1], b[1:], out=b[1:]), "dh"),
    ("ufunc out shifted -1", (N1,), lambda e, b: e.twice_minus(b[1:], b[:-1], out=b[:-1]), "dh"),
    ("ufunc positional out shifted", (N1,), ufunc_positional, "d"),
    ("ufunc transposed out", (512, 512), lambda e, b: e.twice_minus(b, 1, out=b.T), "dh"),
    # gufunc (n)->(n): the motivating example and its relatives
    ("reverse out=input", (R, C), lambda e, b: e.reverse(b, out=b), "dh"),
    ("reverse out=input, 1 row", (C,), lambda e, b: e.reverse(b, out=b), "dh"),
    ("reverse out reversed rows", (R, C), lambda e, b: e.reverse(b, out=b[::-1]), "dh"),
    ("reverse reversed columns into reversed rows", (R, C),
     lambda e, b: e.reverse(b[:, ::-1], out=b[::-1]), "dh"),
    ("reverse out shifted a row", (R, C), lambda e, b: e.reverse(b[:-1], out=b[1:]), "dh"),
    ("reverse out shifted half a row", (R * C,),
     lambda e, b: e.reverse(b[: (R - 1) * C].reshape(R - 1, C),
                            out=b[C // 2: C // 2 + (R - 1) * C].reshape(R - 1, C)), "dh"),
    ("reverse positional out=input", (R, C), lambda e, b: e.reverse(b, b) if not e.numpy
     else e.reverse(b, out=b), "dh"),
    # gufunc (n)->(): an output inside the rows it reads
    ("rowsum out=first column", (R, C), lambda e, b: e.rowsum(b, out=b[:, 0]), "dh"),
    ("rowsum out=last column reversed", (R, C), lambda e, b: e.rowsum(b, out=b[::-1, -1]), "dh"),
    ("rowsum out=first elements", (R * C,),
     lambda e, b: e.rowsum(b.reshape(R, C), out=b[:R]), "dh"),
    # gufunc (m,n),(n,p)->(m,p): out aliasing an input
    ("matmul out=a", (64, 16, 16), lambda e, b: e.matmul(b, b[::-1], out=b), "dh"),
    ("matmul out=b", (64, 16, 16), lambda e, b: e.matmul(b[::-1], b, out=b), "dh"),
    ("matmul a@a out=a", (64, 16, 16), lambda e, b: e.matmul(b, b, out=b), "dh"),
    ("matmul out=a transposed", (64, 16, 16),
     lambda e, b: e.matmul(b, b[::-1], out=b.transpose(0, 2, 1)), "dh"),
    # gufunc (),()->(): no core dimensions, so out=input is element-wise (no copy needed)
    ("scalar-core out=input", (N1,), lambda e, b: e.axpy(b, b[::-1], out=b), "dh"),
    ("scalar-core out shifted", (N1,), lambda e, b: e.axpy(b[:-1], b[1:], out=b[1:]), "dh"),
    # reduce with out= a view of the input
    ("reduce axis 1 out=first column", (R, C), lambda e, b: e.add.reduce(b, axis=1, out=b[:, 0]), "dh"),
    ("reduce axis 0 out=first row", (C, R), lambda e, b: e.add.reduce(b, axis=0, out=b[0]), "dh"),
    ("reduce axis 0 out=last row reversed", (C, R),
     lambda e, b: e.add.reduce(b, axis=0, out=b[-1, ::-1]), "dh"),
    ("reduce keepdims out=input", (R, 1),
     lambda e, b: e.add.reduce(b, axis=1, keepdims=True, out=b, initial=5), "dh"),
    ("reduce out=flat head", (R * C,),
     lambda e, b: e.add.reduce(b.reshape(C, R), axis=0, out=b[:R]), "dh"),
    # accumulate with out= the input (in place) or overlapping it
    ("accumulate out=input", (N1,), lambda e, b: e.add.accumulate(b, out=b), "dh"),
    ("accumulate out=input axis 0", (R, C), lambda e, b: e.add.accumulate(b, axis=0, out=b), "dh"),
    ("accumulate out=input axis 1", (C, R), lambda e, b: e.add.accumulate(b, axis=1, out=b), "dh"),
    ("accumulate out reversed", (N1,), lambda e, b: e.add.accumulate(b, out=b[::-1]), "dh"),
    ("accumulate out shifted +1", (N1,), lambda e, b: e.add.accumulate(b[:-1], out=b[1:]), "dh"),
    ("accumulate out shifted -1", (N1,), lambda e, b: e.add.accumulate(b[1:], out=b[:-1]), "dh"),
    ("accumulate axis 0 out transposed", (512, 512),
     lambda e, b: e.add.accumulate(b, axis=0, out=b.T), "dh"),
    # outer with out overlapping its inputs
    ("outer out over both inputs", (64 * 64,),
     lambda e, b: e.twice_minus.outer(b[:64], b[32:96], out=b.reshape(64, 64)) if not e.numpy
     else np.subtract.outer(b[:64] * 2, b[32:96], out=b.reshape(64, 64)), "dh"),
    ("outer out shifted", (1024 * 1024 + 1024,),
     lambda e, b: e.twice_minus.outer(b[:1024], b[1:1025], out=b[7: 7 + 1024 * 1024].reshape(1024, 1024))
     if not e.numpy else np.subtract.outer(b[:1024] * 2, b[1:1025],
                                           out=b[7: 7 + 1024 * 1024].reshape(1024, 1024)), "dh"),
    ("outer out=first input as a column", (65,),
     lambda e, b: e.twice_minus.outer(b[:64], b[64:65], out=b[:64].reshape(64, 1)) if not e.numpy
     else np.subtract.outer(b[:64] * 2, b[64:65], out=b[:64].reshape(64, 1)), "dh"),
]


def data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(-3, 4, size=shape).astype(dtype)


def expected(case, base):
    _, _, call, _ = case
    h = base.copy()
    call(Eng(True), h)
    return h


def check(case, dtype, placement, wrap=None):
    name, shape, call, _ = case
    base = data(shape, dtype)
    want = expected(case, base)
    assert not np.array_equal(want, base), "the case must change its buffer"
    buf = cuda.to_device(base) if placement == "d" else base.copy()
    call(Eng(False), buf if wrap is None else wrap(buf))
    got = host(buf)
    bad = np.flatnonzero(got.ravel() != want.ravel())
    assert bad.size == 0, "%s (%s, %s): %d of %d elements wrong, first at flat index %d: %r, " \
        "want %r" % (name, dtype, placement, bad.size, got.size, bad[0], got.ravel()[bad[0]],
                     want.ravel()[bad[0]])


PARAMS = [pytest.param(c, dt, p, id="%s-%s-%s" % (c[0].replace(" ", "_"), dt,
                                                    {"d": "device", "h": "host"}[p]))
          for c in CASES for dt in DTYPES for p in c[3]]


@gpu
@pytest.mark.parametrize("case,dtype,placement", PARAMS)
def test_overlapping_out(case, dtype, placement):
    check(case, dtype, placement)


@pytest.mark.parametrize("case", CASES, ids=[c[0].replace(" ", "_") for c in CASES])
def test_case_changes_its_buffer(case):
    """Every case's NumPy side runs and changes the buffer it aliases (no GPU): a case whose
    answer is its input could not show a kernel that read overwritten data."""
    for dt in DTYPES:
        base = data(case[1], dt)
        assert not np.array_equal(expected(case, base), base)


def test_numpy_twins_are_numpy_semantics():
    """The references themselves: NumPy's own answer equals the from-copies one (no GPU)."""
    b = data((N1,), "int32")
    h1, h2 = b.copy(), b.copy()
    np.add.accumulate(h1[:-1], out=h1[1:])
    h2[1:] = np.cumsum(b[:-1], dtype=np.int32)
    np.testing.assert_array_equal(h1, h2)
    m = data((8, 4, 4), "float64")
    h = m.copy()
    NP["matmul"](h, h, out=h)
    np.testing.assert_array_equal(h, np.matmul(m, m))
    r = data((5, 7), "float32")
    h = r.copy()
    NP["reverse"](h, out=h)
    np.testing.assert_array_equal(h, r[:, ::-1])


# ---- foreign device arrays that alias a DeviceArray's memory --------------------------------------

class Foreign:
    """A device array of another library, as cufunc sees one: only __cuda_array_interface__, over
    the same memory as a DeviceArray (compared by address, not by object)."""

    def __init__(self, d):
        self._keep = d
        self.__cuda_array_interface__ = dict(d.__cuda_array_interface__)


# (name of the case in CASES it is, call(buffer, F)): F makes a foreign view of a DeviceArray
FOREIGN = [
    ("reverse out=input", lambda d, F: reverse(d, out=F(d))),
    ("reverse out shifted a row", lambda d, F: reverse(F(d[:-1]), out=d[1:])),
    ("matmul a@a out=a", lambda d, F: matmul(d, F(d), out=d)),
    ("rowsum out=first column", lambda d, F: rowsum(d, out=F(d[:, 0]))),
    ("reduce axis 1 out=first column", lambda d, F: add.reduce(d, axis=1, out=F(d[:, 0]))),
    ("accumulate out=input", lambda d, F: add.accumulate(F(d), out=d)),
    ("accumulate out reversed", lambda d, F: add.accumulate(d, out=F(d[::-1]))),
    ("ufunc out shifted +1", lambda d, F: twice_minus(d[:-1], d[1:], out=F(d[1:]))),
]
CASE = {c[0]: c for c in CASES}


@gpu
@pytest.mark.parametrize("name,call", FOREIGN, ids=[c[0].replace(" ", "_") for c in FOREIGN])
def test_foreign_alias(name, call):
    """A DeviceArray and a foreign object (only __cuda_array_interface__) over the same memory,
    one as an input and the other as the output: the overlap is found by device addresses, not
    by object identity. The answer is NumPy's for the same case of CASES."""
    case = CASE[name]
    base = data(case[1], "float32")
    want = expected(case, base)
    d = cuda.to_device(base)
    call(d, Foreign)
    np.testing.assert_array_equal(d.copy_to_host(), want)


@gpu
@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_library_alias(lib):
    """A CuPy array / PyTorch tensor and a cufunc DeviceArray over the same memory."""
    mod = pytest.importorskip(lib)
    base = data((R, C), "float32")
    # this test is about addresses, not stream order: every step is synchronised
    if lib == "cupy":
        x = mod.asarray(base)
        sync = mod.cuda.Device().synchronize

        def back(t):
            cuda.synchronize()
            return mod.asnumpy(t)
    else:
        x = mod.as_tensor(base, device="cuda")
        sync = mod.cuda.synchronize

        def back(t):
            cuda.synchronize()
            return t.cpu().numpy()
    sync()
    d = cuda.as_cuda_array(x)
    reverse(d, out=x)                       # input cufunc's, output the library's: same memory
    np.testing.assert_array_equal(back(x), base[:, ::-1])
    reverse(x, out=d[::-1])
    np.testing.assert_array_equal(back(x), base[::-1])
    add.accumulate(x[:-1], out=d[1:])
    want = base[::-1].copy()
    np.add.accumulate(want[:-1], out=want[1:])
    np.testing.assert_array_equal(back(x), want)


# ---- cuda.reduce with res= inside the array it reduces -------------------------------------------

@gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("at", [0, N1 // 2, N1 - 1])
def test_cuda_reduce_res_inside_arr(dtype, at):
    base = data((N1,), dtype)
    d = cuda.to_device(base)
    assert red_add(d, res=d[at: at + 1]) is None
    want = base.copy()
    want[at] = base.sum(dtype=base.dtype)
    np.testing.assert_array_equal(d.copy_to_host(), want)


@gpu
def test_cuda_reduce_res_inside_arr_foreign():
    base = data((N1,), "int32")
    d = cuda.to_device(base)
    red_add(d, res=Foreign(d[5:6]))
    want = base.copy()
    want[5] = base.sum(dtype=base.dtype)
    np.testing.assert_array_equal(d.copy_to_host(), want)


# ---- a where= mask that is also the output ------------------------------------------------------

def _flip(a):
    return not a


flip = vectorize(["bool(bool)"])(_flip)


@gpu
@pytest.mark.parametrize("placement", ["d", "h"])
def test_where_mask_overlapping_out(placement):
    base = (np.arange(N1) % 3 == 0)
    want = base.copy()
    np.logical_not(want[:-1], out=want[1:], where=want[:-1])
    buf = cuda.to_device(base) if placement == "d" else base.copy()
    flip(buf[:-1], out=buf[1:], where=buf[:-1])
    np.testing.assert_array_equal(host(buf), want)
