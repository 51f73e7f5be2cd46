"""The cost of a cufunc call on dask arrays: the graph of `hyp(x, y)` is as
cheap as the graph of `da.hypot(x, y)` (dask's own ufunc path): as many tasks after dask's
optimisation, each task a direct call of the cufunc ufunc on its chunks (no Python wrapper per
chunk), one meta computation on zero-size arrays while building, and no pickling of the ufunc
(dask's tokenize would otherwise pickle it, sources and all, on every call). out= and where= keep
dask's elemwise semantics. Graph tests need no GPU; compute tests do."""
import numpy as np
import pytest

from cufunc import vectorize

da = pytest.importorskip("dask.array")
import dask  # noqa: E402

from cufunc import _dask  # noqa: E402


@vectorize(["float32(float32, float32)", "float64(float64, float64)"], target="cuda")
def hyp(x, y):
    return (x * x + y * y) ** 0.5


@vectorize(["float32(float32, float32)", "float64(float64, float64)"], target="cuda")
def hyp_twin(x, y):  # the same body: still another function, another graph
    return (x * x + y * y) ** 0.5


@vectorize(["float32(float32, float32)", "float64(float64, float64)"], identity=0, target="cuda")
def add(x, y):
    return x + y


RNG = np.random.default_rng(2)
H1 = RNG.random((64, 48), dtype=np.float32)
H2 = RNG.random((64, 48), dtype=np.float32)


def arrays(xp=np):
    return (da.from_array(xp.asarray(H1), chunks=(16, 24), asarray=False),
            da.from_array(xp.asarray(H2), chunks=(16, 24), asarray=False))


def _task_func(graph, node):
    """The callable a graph node ends up running (aliases followed, dask's fused subgraphs
    opened), in dask's Task form (2024.12 on) or the older tuple form."""
    for _ in range(100):
        kind = type(node).__name__
        if kind == "Alias":
            node = graph[getattr(node.target, "key", node.target)]
        elif kind == "Task":
            if getattr(node.func, "__name__", "") == "_execute_subgraph":
                inner, outkey = node.args[0], node.args[1]
                graph, node = inner, inner[outkey]
            else:
                return node.func
        elif isinstance(node, tuple) and node and callable(node[0]):
            return node[0]
        elif node in graph:  # an old-style alias: the key itself
            node = graph[node]
        else:
            raise AssertionError("not a task: %r" % (node,))
    raise AssertionError("alias loop")


def _optimized(r):
    (o,) = dask.optimize(r)
    graph = dict(o.__dask_graph__())
    keys = list(dask.core.flatten(o.__dask_keys__()))
    ntasks = sum(1 for v in graph.values()
                 if type(v).__name__ == "Task" or (isinstance(v, tuple) and v and callable(v[0])))
    return graph, keys, ntasks


# (cufunc expression, dask's own expression of the same graph shape, the NumPy reference)
SHAPES = [
    ("hyp(x, y)", "da.hypot(x, y)", lambda: np.hypot(H1, H2)),
    ("hyp(x, 2.0)", "da.hypot(x, 2.0)", lambda: np.hypot(H1, np.float32(2))),
    ("hyp(x, y[0])", "da.hypot(x, y[0])", lambda: np.hypot(H1, H2[0])),
    ("hyp(x, H2)", "da.hypot(x, H2)", lambda: np.hypot(H1, H2)),
    ("hyp(x[:, :1], y)", "da.hypot(x[:, :1], y)", lambda: np.hypot(H1[:, :1], H2)),
    ("hyp(x[0, 0], y[0])", "da.hypot(x[0, 0], y[0])", lambda: np.hypot(H1[0, 0], H2[0])),
    ("hyp(x[0, 0], y[0, 0])", "da.hypot(x[0, 0], y[0, 0])", lambda: np.hypot(H1[0, 0], H2[0, 0])),
]


@pytest.mark.parametrize("expr, dask_expr, ref", SHAPES)
def test_graph_as_small_as_dask_ufunc_and_tasks_call_the_ufunc(expr, dask_expr, ref):
    x, y = arrays()
    r, ref = eval(expr), eval(dask_expr)
    assert r.shape == ref.shape and r.chunks == ref.chunks and r.dtype == np.float32
    graph, keys, ntasks = _optimized(r)
    ref_graph, _, ref_ntasks = _optimized(ref)
    assert (len(graph), ntasks) == (len(ref_graph), ref_ntasks)
    funcs = {_task_func(graph, graph[k]) for k in keys}
    assert funcs == {hyp}, funcs  # the ufunc itself per chunk: no _enforce_dtype, no partial


# the direct graph (cufunc/_dask.py's _elemwise) run with NumPy's hypot on the CPU: the same
# values, chunks and dtypes as dask's elemwise (da.hypot) for every kind of operand
OPERANDS = ["(x, y)", "(x, 2.0)", "(2.0, y)", "(x, y[0])", "(x[:, :1], y)", "(x, H2)",
            "(x[0, 0], y)", "(x[0, 0], y[0, 0])", "(x[0], [0.5] * 48)", "(x[:, :1], y[:1])",
            "(x.astype(np.float64), y)", "(x, y.rechunk((32, 16)))"]


@pytest.mark.parametrize("operands", OPERANDS)
@pytest.mark.parametrize("kwargs", [{}, {"dtype": np.float64}])
def test_direct_graph_computes_as_dask_elemwise(operands, kwargs):
    x, y = arrays()
    inputs = eval(operands)
    r = _dask.array_ufunc(x, np.hypot, "__call__", *inputs, **dict(kwargs))
    ref = da.hypot(*inputs)
    assert (r.shape, r.chunks) == (ref.shape, ref.chunks)
    host = dask.compute(*inputs, scheduler="sync")
    want = np.hypot(*host, **kwargs)  # keywords go to each chunk's call (dask's dtype= does not)
    assert type(r._meta) is np.ndarray and r._meta.ndim == r.ndim and r.dtype == want.dtype
    got = r.compute(scheduler="sync")
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


# gufuncs (and multi-output ufuncs) on dask arrays: cufunc/_dask.py's _gufunc, run with NumPy's own
# gufuncs on the CPU: apply_gufunc's shapes, chunks and values, and no task that concatenates a
# core dimension's blocks (a one-block concatenation copies a CuPy chunk to the current device)
GUFUNCS = [
    ("vecdot", "(n),(n)->()", lambda x, y: (x, y)),
    ("vecdot", "(n),(n)->()", lambda x, y: (x, y[0])),
    ("vecdot", "(n),(n)->()", lambda x, y: (x[:1], y)),
    ("divmod", "(),()->(),()", lambda x, y: (x, y + 0.25)),
    ("matvec", "(m,n),(n)->(m)", lambda x, y: (x.reshape(4, 16, 48), y[0])),
]


def _concatenates(r):
    from dask.array.core import concatenate_axes
    graph = dict(r.__dask_graph__())
    funcs = set()
    for v in graph.values():
        if type(v).__name__ == "Task":
            funcs.add(v.func)
            funcs.update(getattr(a, "func", None) for a in getattr(v, "args", ()))
        elif isinstance(v, tuple) and v and callable(v[0]):
            funcs.add(v[0])
            funcs.update(a[0] for a in v[1:] if isinstance(a, tuple) and a and callable(a[0]))
    return concatenate_axes in funcs or any(getattr(f, "__name__", "") == "concatenate_axes"
                                            for f in funcs)


@pytest.mark.parametrize("name, signature, operands", GUFUNCS)
def test_gufunc_graph_as_apply_gufunc_without_concatenation(name, signature, operands):
    f = getattr(np, name, None)
    if f is None:
        pytest.skip("this NumPy has no np.%s" % name)
    x, y = arrays()
    x = x.rechunk((16, 48))  # core dimensions in one chunk, loop dimensions in several
    y = y.rechunk((16, 48))
    inputs = operands(x, y)
    r = _dask.array_ufunc(x, f, "__call__", *inputs)
    ref = da.apply_gufunc(f, signature, *inputs, output_dtypes=(
        [np.float32] * f.nout if f.nout > 1 else np.float32))
    rs, refs = (r, ref) if f.nout > 1 else ((r,), (ref,))
    host = dask.compute(*inputs, scheduler="sync")
    want = f(*host)
    wants = want if f.nout > 1 else (want,)
    for got, exp, w in zip(rs, refs, wants):
        assert (got.shape, got.chunks, got.dtype) == (exp.shape, exp.chunks, w.dtype)
        assert not _concatenates(got)
        np.testing.assert_array_equal(got.compute(scheduler="sync"), w)
    assert _concatenates(refs[0]) == (signature.split("->")[0] != "(),()")


def test_gufunc_core_dimension_in_several_chunks_refused():
    x, y = arrays()  # chunks (16, 24): the core dimension n = 48 in two chunks
    with pytest.raises(ValueError, match="Core dimension .*n.* consists of multiple chunks"):
        _dask.array_ufunc(x, np.vecdot, "__call__", x, y)


def test_keywords_reach_each_chunk_call():
    x, y = arrays()
    r = hyp(x, y, dtype=np.float64)
    assert r.dtype == np.float64 and type(r._meta) is np.ndarray
    graph, keys, _ = _optimized(r)
    for k in keys:
        f = _task_func(graph, graph[k])
        assert getattr(f, "func", f) is hyp  # a partial is C: no Python layer
        assert getattr(f, "keywords", {}) == {"dtype": np.float64}


class _Counting:
    """A stand-in for a cufunc ufunc that counts its calls (attributes are the ufunc's)."""

    def __init__(self, f):
        self.f, self.calls = f, []

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __call__(self, *args, **kwargs):
        self.calls.append(tuple(getattr(a, "shape", None) for a in args))
        return self.f(*args, **kwargs)


@pytest.mark.parametrize("expr", ["(x, y)", "(x, 2.0)", "(x, y[0])", "(3.0, y)"])
def test_meta_is_computed_once_on_zero_size_arrays(expr):
    x, y = arrays()
    f = _Counting(hyp)
    inputs = eval(expr)
    r = _dask.array_ufunc(x, f, "__call__", *inputs)
    assert isinstance(r, da.Array) and r.dtype == np.float32
    assert len(f.calls) == 1, f.calls
    assert all(s is None or 0 in s for s in f.calls[0])  # no GPU needed: empty host arrays


def _count_pickles(monkeypatch, cls):
    n = []
    orig = cls.__reduce__

    def counting(self):
        n.append(1)
        return orig(self)
    monkeypatch.setattr(cls, "__reduce__", counting)
    return n


@pytest.mark.parametrize("expr", ["hyp(x, y)", "hyp(x, 2.0)", "hyp.outer(x[0], y[:, 0])",
                                  "add.reduce(x, axis=0)", "add.accumulate(x, axis=1)",
                                  "hyp(x, y, out=da.zeros_like(x))"])
def test_graph_building_does_not_pickle_the_ufunc(monkeypatch, expr):
    x, y = arrays()
    pickles = _count_pickles(monkeypatch, type(hyp))
    r = eval(expr)
    assert isinstance(r, da.Array)
    assert pickles == []


def test_graph_names_are_deterministic_and_tell_calls_apart():
    x, y = arrays()
    name = hyp(x, y).name
    assert name == hyp(x, y).name  # the same call: the same keys (dask reuses results)
    others = [hyp(y, x), hyp(x, x), hyp_twin(x, y), hyp(x, y, dtype=np.float64), hyp(x, 2.0),
              hyp(x, 3.0), da.hypot(x, y)]
    names = [name] + [o.name for o in others]
    assert len(set(names)) == len(names), names
    assert hyp.outer(x[0], y[0]).name == hyp.outer(x[0], y[0]).name
    assert hyp.outer(x[0], y[0]).name != hyp_twin.outer(x[0], y[0]).name
    assert add.reduce(x, axis=0).name == add.reduce(x, axis=0).name
    assert add.accumulate(x, axis=1).name == add.accumulate(x, axis=1).name


def _made_here():
    @vectorize(["float32(float32, float32)"], target="cuda")
    def local(x, y):
        return x - y
    return local


def test_tokenize_is_the_ufuncs_identity():
    """dask's token of a cufunc function names the object (as its pickle does: cufunc/_pickle.py),
    cheaply: the same object always the same token, two objects two tokens, also for the same
    body and for functions that are no module's global."""
    from dask.base import tokenize
    from cufunc import cuda, guvectorize

    @cuda.reduce
    def total(p, q):
        return p + q

    @guvectorize(["void(float32[:], float32[:])"], "(n)->()", target="cuda")
    def first(v, out):
        out[0] = v[0]
    a, b = _made_here(), _made_here()
    assert tokenize(hyp) == tokenize(hyp) and tokenize(a) == tokenize(a)
    objs = [hyp, hyp_twin, a, b, total, first]
    assert [tokenize(o) for o in objs] == [tokenize(o) for o in objs]
    assert len({tokenize(o) for o in objs}) == len(objs)


def test_cuda_reduce_graph_does_not_pickle_the_reducer(monkeypatch):
    from cufunc import cuda

    @cuda.reduce
    def total(p, q):
        return p + q
    pickles = _count_pickles(monkeypatch, type(total))
    x, _ = arrays()
    r = total(x)
    assert isinstance(r, da.Array) and r.name == total(x).name
    assert pickles == []


def test_out_replaces_the_out_arrays_graph():
    x, y = arrays()
    z = da.zeros_like(x)
    r = hyp(x, y, out=z)
    assert r is z and z.dtype == np.float32 and z.shape == x.shape
    assert z.name.startswith("hyp-")


def test_out_of_wrong_shape_raises():
    x, y = arrays()
    with pytest.raises(ValueError, match="Mismatched shapes"):
        hyp(x, y, out=da.zeros((1, 48), dtype=np.float32, chunks=(1, 24)))


def test_where_builds_a_lazy_graph():
    x, y = arrays()
    r = hyp(x, y, where=x > 0.5)
    assert isinstance(r, da.Array) and r.dtype == np.float32 and r.shape == x.shape


# ---- on the GPU ------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("xp_name", ["numpy", "cupy"])
def test_compute_out_and_where(xp_name):
    xp = pytest.importorskip(xp_name)
    to_host = getattr(xp, "asnumpy", np.asarray)
    x, y = arrays(xp)
    z = da.from_array(xp.zeros(H1.shape, np.float32), chunks=(16, 24), asarray=False)
    hyp(x, y, out=z)
    np.testing.assert_allclose(to_host(z.compute(scheduler="threads")), np.hypot(H1, H2),
                               rtol=2e-6)
    w = da.from_array(xp.full(H1.shape, -1, np.float32), chunks=(16, 24), asarray=False)
    hyp(x, y, out=w, where=x > 0.5)
    want = np.where(H1 > 0.5, np.hypot(H1, H2), np.float32(-1))
    np.testing.assert_allclose(to_host(w.compute(scheduler="threads")), want, rtol=2e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("xp_name", ["numpy", "cupy"])
@pytest.mark.parametrize("expr, dask_expr, ref", [s for s in SHAPES if "H2" not in s[0]])
def test_compute_matches_numpy(xp_name, expr, dask_expr, ref):
    xp = pytest.importorskip(xp_name)
    x, y = arrays(xp)
    got = eval(expr).compute(scheduler="threads")
    # a 0-d result of NumPy chunks is a NumPy scalar, as NumPy's (and da.hypot's) is
    assert isinstance(got, xp.ndarray) or (xp is np and isinstance(got, np.generic))
    np.testing.assert_allclose(getattr(xp, "asnumpy", np.asarray)(got), ref(), rtol=2e-6)


def test_dask_token_before_any_cufunc_call_on_dask(tmp_path):
    """A graph that reaches a cufunc function before any cufunc call on a dask array did (so
    before cufunc._dask registered its tokens), map_blocks here, still names it by its identity:
    __dask_tokenize__, no pickle. A fresh process, so that nothing was registered yet."""
    import subprocess
    import sys
    import textwrap
    script = tmp_path / "first_graph.py"
    script.write_text(textwrap.dedent('''
        import sys
        import numpy as np
        import dask.array as da
        from cufunc import vectorize

        @vectorize(["float32(float32, float32)"], target="cuda")
        def hyp(x, y):
            return x + y

        n = []
        orig = type(hyp).__reduce__
        type(hyp).__reduce__ = lambda self: (n.append(1), orig(self))[1]
        x = da.ones(8, chunks=4, dtype=np.float32)
        a = da.map_blocks(hyp, x, x, dtype=np.float32)
        b = da.map_blocks(hyp, x, x, dtype=np.float32)
        print("pickles", len(n), "same", a.name == b.name)
    '''))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120)
    assert "pickles 0 same True" in out.stdout, out.stdout + out.stderr
