"""cufunc's functions on Dask and xarray objects: lazy graphs built anywhere (no GPU needed to
build them: meta comes from empty host calls), computed by cufunc per chunk (GPU tests)."""
import numpy as np
import pytest

from cufunc import guvectorize, vectorize

da = pytest.importorskip("dask.array")
xr = pytest.importorskip("xarray")
import dask  # noqa: E402


@vectorize(["float32(float32, float32)", "float64(float64, float64)"], target="cuda")
def hyp(x, y):
    return (x * x + y * y) ** 0.5


@vectorize(["float32(float32, float32)", "float64(float64, float64)"], identity=0, target="cuda")
def add(x, y):
    return x + y


@vectorize(["float32(float32, float32)"], target="cuda")
def mx(x, y):
    return x if x > y else y


@vectorize(target="cuda")
def divmod_(x, y):
    return x // y, x % y


@guvectorize(["void(float32[:], float32[:], float32[:])"], "(n),(n)->()", target="cuda")
def dot(a, b, out):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * b[i]
    out[0] = s


RNG = np.random.default_rng(1)
H1 = RNG.random((100, 60), dtype=np.float32)
H2 = RNG.random((100, 60), dtype=np.float32)


def chunks_of(h, xp):
    return da.from_array(xp.asarray(h), chunks=(25, 30), asarray=False)


# (expression, the NumPy reference, result shape)
CASES = [
    ("hyp(x, y)", lambda a, b: np.hypot(a, b), (100, 60)),
    ("hyp(x, 2.0)", lambda a, b: np.hypot(a, np.float32(2)), (100, 60)),
    ("hyp(x, y[0])", lambda a, b: np.hypot(a, b[0]), (100, 60)),
    ("dot(x.rechunk((25, 60)), y.rechunk((25, 60)))", lambda a, b: (a * b).sum(-1), (100,)),
    ("mx.reduce(x, axis=0)", lambda a, b: a.max(0), (60,)),
    ("add.reduce(x, axis=(0, 1))", lambda a, b: a.sum(), ()),
    ("add.reduce(x, axis=1, keepdims=True)", lambda a, b: a.sum(1, keepdims=True), (100, 1)),
    ("add.accumulate(x, axis=1)", lambda a, b: np.cumsum(a, 1), (100, 60)),
    ("hyp.outer(x[0], y[:, 0])", lambda a, b: np.hypot.outer(a[0], b[:, 0]), (60, 100)),
]


@pytest.mark.parametrize("expr, ref, shape", CASES)
def test_graph_is_lazy_and_typed_without_gpu(expr, ref, shape):
    x, y = chunks_of(H1, np), chunks_of(H2, np)
    r = eval(expr)
    assert isinstance(r, da.Array)
    assert r.shape == shape and r.dtype == np.float32
    assert type(r._meta) is np.ndarray


def test_multi_output_ufunc_graph():
    x = chunks_of(H1, np) + 1
    q, m = divmod_(x, 0.5)
    assert isinstance(q, da.Array) and isinstance(m, da.Array)
    assert q.dtype == np.float32 and q.shape == (100, 60)


def test_named_like_a_numpy_ufunc_is_still_cufuncs():
    """dask's own __array_ufunc__ looks a ufunc up by name: a cufunc named 'add' (here with a
    float64 result where NumPy's add gives float32) must stay cufunc's, in outer too."""
    @vectorize(["float64(float32, float32)"], target="cuda")
    def add(x, y):
        return x - y
    x = chunks_of(H1, np)
    assert add.outer(x[0], x[:, 0]).dtype == np.float64
    assert add(x, x).dtype == np.float64


def test_xarray_keeps_coordinates_and_stays_lazy():
    X = xr.DataArray(chunks_of(H1, np), dims=("a", "b"), coords={"a": np.arange(100)})
    r = hyp(X, X)
    assert isinstance(r, xr.DataArray) and isinstance(r.data, da.Array)
    assert list(r.coords["a"].values) == list(range(100)) and r.dims == ("a", "b")


def test_xarray_apply_ufunc_gufunc_parallelized():
    X = xr.DataArray(chunks_of(H1, np).rechunk((25, 60)), dims=("a", "b"))
    r = xr.apply_ufunc(dot, X, X, input_core_dims=[["b"], ["b"]], dask="parallelized",
                       output_dtypes=[np.float32])
    assert isinstance(r.data, da.Array) and r.dims == ("a",) and r.dtype == np.float32


def test_unsupported_methods_raise_type_error():
    x = chunks_of(H1, np)
    with pytest.raises(TypeError, match="NotImplemented"):
        hyp.accumulate(x)   # no identity: dask's cumreduction needs one


# ---- on the GPU ------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("expr, ref, shape", CASES)
def test_compute_numpy_chunks(expr, ref, shape):
    x, y = chunks_of(H1, np), chunks_of(H2, np)
    got = eval(expr).compute(scheduler="threads")
    assert isinstance(got, (np.ndarray, np.generic))
    np.testing.assert_allclose(got, ref(H1, H2), rtol=2e-5, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("expr, ref, shape", CASES)
def test_compute_cupy_chunks_stay_on_gpu(expr, ref, shape):
    cp = pytest.importorskip("cupy")
    x, y = chunks_of(H1, cp), chunks_of(H2, cp)
    r = eval(expr)
    blocks = dask.compute(*r.to_delayed().ravel(), scheduler="threads")
    for b in blocks:  # every result chunk a device array: no chunk went through the host
        assert hasattr(b, "__cuda_array_interface__"), type(b)
    got = r.compute(scheduler="threads")
    np.testing.assert_allclose(cp.asnumpy(cp.asarray(got)), ref(H1, H2), rtol=2e-5, atol=1e-4)


@pytest.mark.gpu
def test_xarray_gufunc_parallelized_on_cupy_chunks():
    cp = pytest.importorskip("cupy")
    X = xr.DataArray(chunks_of(H1, cp).rechunk((25, 60)), dims=("a", "b"))
    r = xr.apply_ufunc(dot, X, X, input_core_dims=[["b"], ["b"]], dask="parallelized",
                       output_dtypes=[np.float32])
    got = r.data.compute(scheduler="threads")
    assert hasattr(got, "__cuda_array_interface__")
    np.testing.assert_allclose(cp.asnumpy(cp.asarray(got)), (H1 * H1).sum(-1), rtol=2e-5)


@pytest.mark.gpu
def test_xarray_numpy_backed_computes():
    X = xr.DataArray(H1, dims=("a", "b"), coords={"a": np.arange(100)})
    r = hyp(X, X)
    assert isinstance(r, xr.DataArray)
    np.testing.assert_allclose(r.values, np.hypot(H1, H1), rtol=2e-6)


# ---- cuda.reduce ----------------------------------------------------------------------------

def _sum_reducer():
    from cufunc import cuda

    @cuda.reduce
    def total(a, b):
        return a + b
    return total


def test_cuda_reduce_graph_without_gpu():
    total = _sum_reducer()
    x = chunks_of(H1, np)
    r = total(x)
    assert isinstance(r, da.Array) and r.shape == () and r.dtype == np.float32
    assert total(x.ravel(), size=100).shape == ()
    with pytest.raises(TypeError, match="res= is not supported"):
        total(x, res=np.empty(1, np.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("xp_name", ["numpy", "cupy"])
def test_cuda_reduce_compute(xp_name):
    xp = pytest.importorskip(xp_name)
    total = _sum_reducer()
    x = chunks_of(H1, xp)
    got = total(x).compute(scheduler="threads")
    if xp_name == "cupy":
        assert hasattr(got, "__cuda_array_interface__")
        got = xp.asnumpy(got)
    np.testing.assert_allclose(float(got), H1.astype(np.float64).sum(), rtol=1e-4)


# The README's and docs' code blocks run in tests/python/test_docs_examples.py.
