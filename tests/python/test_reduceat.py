"""ufunc.reduceat on cufunc ufuncs and on NumPy's ufuncs called on DeviceArrays (the twins),
against NumPy's reduceat on the same inputs.

NumPy's meaning: out[..., i, ...] reduces a[..., idx[i]:idx[i+1], ...] along `axis`; the last
segment runs to the end; where idx[i] >= idx[i+1] (an empty or reversed segment) the result is
a[..., idx[i], ...] alone. Data are small integers (floats included), so every sum and product
here is exact in every order and results are compared bit for bit.

Segment layouts cover each kernel shape the engine picks: one lane per short segment, 2..32 lanes,
a block per long segment, a long segment split over several blocks, and a thread per output along
a strided axis. Argument checks (NumPy's exceptions; bad indices: IndexError, nothing written) run
everywhere; the rest is marked gpu."""
import numpy as np
import pytest

from cufunc import cuda, vectorize

gpu = pytest.mark.gpu

RNG = np.random.default_rng(27)


def small(shape, dtype, lo=-3, hi=4):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return RNG.integers(0, 2, shape).astype(bool)
    if dt.kind == "u":
        lo = 0
    x = RNG.integers(lo, hi, shape)
    if dt.kind == "c":
        return (x + 1j * RNG.integers(lo, hi, shape)).astype(dt)
    return x.astype(dt)


def random_indices(n, k, ordered):
    """k indices into [0, n): sorted (segments) or in any order (empty and reversed segments)."""
    idx = RNG.integers(0, n, k)
    return np.sort(idx) if ordered else idx


def check(got, want):
    got = got.copy_to_host() if hasattr(got, "copy_to_host") else np.asarray(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)


def add_fn(a, b):
    return a + b


# a cufunc ufunc of its own (not a twin): reduceat is every binary ufunc's method
cf_add = vectorize(["int32(int32, int32)", "float64(float64, float64)"], identity=0)(add_fn)


# ---- argument checks: no GPU needed -----------------------------------------------------------

BAD_INDICES = [
    [0, 8],                                  # past the end
    [-1],                                    # negative
    [3, 2, 9, 1],                            # one bad among good ones
]


@pytest.mark.parametrize("idx", BAD_INDICES)
def test_bad_indices_index_error_nothing_written(idx):
    a = np.arange(8.0)
    out = np.full(len(idx), 7.5)
    with pytest.raises(IndexError) as want:
        np.add.reduceat(a, idx, out=out.copy())
    with pytest.raises(IndexError) as got:
        cf_add.reduceat(a, idx, out=out)
    assert str(got.value) == str(want.value).replace("add.", "add_fn.")
    np.testing.assert_array_equal(out, 7.5)


@pytest.mark.parametrize("call", [
    lambda u: u.reduceat(np.float64(3.0), [0]),                        # a scalar
    lambda u: u.reduceat(np.ones((2, 3)), [0, 1], axis=None),          # several axes
    lambda u: u.reduceat(np.ones((2, 3)), [0, 1], axis=(0, 1)),
    lambda u: u.reduceat(np.ones((2, 3)), [0, 1], axis=2),             # out of bounds
    lambda u: u.reduceat(np.ones(4), [[0, 1]]),                        # 2-d indices
    lambda u: u.reduceat(np.ones(4), 1),                               # 0-d indices
    lambda u: u.reduceat(np.ones(4), np.array([0, 1], np.uint64)),     # not safely intp
    lambda u: u.reduceat(np.ones(4), np.array([0.0, 1.0])),
    lambda u: u.reduceat(np.ones(0), [0]),                             # an empty axis
])
def test_argument_errors_as_numpy(call):
    with pytest.raises(Exception) as want:
        call(np.add)
    with pytest.raises(Exception) as got:
        call(cf_add)
    assert isinstance(got.value, type(want.value)), (got.value, want.value)


def test_unary_ufunc_has_no_reduceat():
    neg = vectorize(["float64(float64)"])(lambda x: -x)
    with pytest.raises(ValueError, match="binary"):
        neg.reduceat(np.ones(4), [0])


def test_empty_indices_and_empty_kept_axes_need_no_gpu():
    # empty results answer with NumPy arrays without touching the GPU (the pipeline's rule)
    check(np.asarray(cf_add.reduceat(np.arange(8.0), [])), np.add.reduceat(np.arange(8.0), []))
    a = np.ones((0, 5))
    check(np.asarray(cf_add.reduceat(a, [0, 2], axis=1)), np.add.reduceat(a, [0, 2], axis=1))


# ---- results ------------------------------------------------------------------------------------

# (n, segments): mean lengths from 1 (a lane per segment) to 2^14 (a block per segment, split)
LAYOUTS = [(64, 64), (1000, 300), (4096, 512), (5000, 40), (1 << 16, 64), (1 << 18, 4),
           (300000, 1), (777, 777)]


@gpu
@pytest.mark.parametrize("n,k", LAYOUTS)
@pytest.mark.parametrize("ordered", [True, False])
def test_segment_layouts_float32_twin(n, k, ordered):
    a = small(n, np.float32)
    idx = random_indices(n, k, ordered)
    check(np.add.reduceat(cuda.to_device(a), idx), np.add.reduceat(a, idx))
    check(np.maximum.reduceat(cuda.to_device(a), idx), np.maximum.reduceat(a, idx))


DTYPES = ["bool", "int8", "uint8", "int16", "int32", "uint32", "int64", "uint64", "float16",
          "float32", "float64", "complex64", "complex128"]
# the twins order no complex values (maximum and minimum of complex numbers: the fidelity suite
# reports those loops), so those pairs are not listed here
PAIRS = [(u, d) for u in (np.add, np.multiply, np.maximum, np.minimum, np.bitwise_or,
                          np.logical_and)
         for d in DTYPES if not (u in (np.maximum, np.minimum) and d.startswith("complex"))]


@gpu
@pytest.mark.parametrize("ufunc,dtype", PAIRS)
def test_every_dtype_and_ufunc(ufunc, dtype):
    a = small(2000, dtype, -1, 2)   # |products| stay small
    idx = np.array([0, 5, 5, 3, 100, 1999, 7, 1500])
    try:
        want = ufunc.reduceat(a, idx)
    except TypeError:
        pytest.skip("NumPy has no %s loop for %s" % (ufunc.__name__, dtype))
    check(ufunc.reduceat(cuda.to_device(a), idx), want)


@gpu
@pytest.mark.parametrize("shape,axis", [((40, 300), 0), ((40, 300), 1), ((40, 300), -1),
                                        ((7, 64, 9), 1), ((7, 64, 9), 0), ((7, 64, 9), 2),
                                        ((3, 1, 500), 2), ((1000, 33), 0)])
def test_axes(shape, axis):
    a = small(shape, np.int32)
    n = shape[axis]
    for idx in (random_indices(n, 5, True), random_indices(n, 9, False), np.arange(n)):
        check(np.add.reduceat(cuda.to_device(a), idx, axis=axis), np.add.reduceat(a, idx, axis))


@gpu
@pytest.mark.parametrize("view", [lambda x: x.T, lambda x: x[::-1], lambda x: x[:, ::-2],
                                  lambda x: x[1:, 3:], lambda x: x[::3]])
def test_layouts_of_the_array(view):
    base = small((300, 40), np.float64)
    a = view(base)
    for axis in (0, 1):
        idx = random_indices(a.shape[axis], 7, False)
        want = np.add.reduceat(a, idx, axis=axis)
        check(cf_add.reduceat(a, idx, axis=axis), want)
        d = view(cuda.to_device(base))
        check(np.add.reduceat(d, idx, axis=axis), want)


@gpu
def test_unaligned_starts_use_the_head():
    a = small(10001, np.float32)
    for off in range(1, 5):
        idx = np.arange(0, 10001 - off, 997) + off % 3
        check(np.add.reduceat(cuda.to_device(a)[off:], idx), np.add.reduceat(a[off:], idx))


@gpu
def test_dtype_and_out():
    a = small(3000, np.int8)
    idx = random_indices(3000, 50, False)
    check(np.add.reduceat(cuda.to_device(a), idx), np.add.reduceat(a, idx))   # int64, NumPy's
    check(np.add.reduceat(cuda.to_device(a), idx, dtype=np.int16),
          np.add.reduceat(a, idx, dtype=np.int16))
    f = small(3000, np.float64)
    check(np.add.reduceat(cuda.to_device(f), idx, dtype=np.float32),
          np.add.reduceat(f, idx, dtype=np.float32))
    out = cuda.device_array(50, np.float32)
    r = np.add.reduceat(cuda.to_device(f), idx, out=out)
    assert r is out
    check(out, np.add.reduceat(f, idx, out=np.empty(50, np.float32)))
    host_out = np.zeros(50)
    r = cf_add.reduceat(f, idx, out=host_out)
    assert r is host_out
    np.testing.assert_array_equal(host_out, np.add.reduceat(f, idx))


@gpu
def test_host_arrays_give_numpy():
    a = small((20, 30), np.float64)
    got = cf_add.reduceat(a, [0, 4, 2, 29], axis=1)
    assert isinstance(got, np.ndarray)
    check(got, np.add.reduceat(a, [0, 4, 2, 29], axis=1))


@gpu
@pytest.mark.parametrize("idt", [np.int64, np.int32, np.uint8, np.int16, np.bool_])
def test_device_indices(idt):
    a = small(256, np.float64)
    idx = np.array([0, 200, 7, 7, 1, 255, 1], idt) if idt is not np.bool_ \
        else np.array([True, False, True])
    check(np.add.reduceat(cuda.to_device(a), cuda.to_device(idx)), np.add.reduceat(a, idx))


@gpu
@pytest.mark.parametrize("idx", BAD_INDICES)
def test_bad_device_indices_nothing_written(idx):
    a = cuda.to_device(np.arange(8.0))
    out = cuda.to_device(np.full(len(idx), 7.5))
    with pytest.raises(IndexError) as want:
        np.add.reduceat(np.arange(8.0), idx)
    with pytest.raises(IndexError) as got:
        np.add.reduceat(a, cuda.to_device(np.array(idx)), out=out)
    assert str(got.value) == str(want.value)
    np.testing.assert_array_equal(out.copy_to_host(), 7.5)


@gpu
def test_cufunc_ufunc_and_output_overlap():
    a = small(1000, np.int32)
    idx = random_indices(1000, 20, False)
    # a ufunc of its own reduces in its int32 loop (NumPy widens only for add and multiply)
    check(cf_add.reduceat(cuda.to_device(a), idx), np.add.reduceat(a, idx, dtype=np.int32))
    # out= a view of the array itself: computed as from a copy (NumPy's meaning)
    d = cuda.to_device(a.astype(np.float64))
    h = a.astype(np.float64)
    want = np.add.reduceat(h, idx)
    np.add.reduceat(d, idx, out=d[:20])
    check(d[:20], want)


def test_comparisons_do_not_reduce_logical_ufuncs_do():
    # NumPy reduces logical_and/or/xor of any type in their bool loop and refuses comparisons;
    # the twins' loop choice (made before any GPU work) follows it
    from cufunc import _twins
    a = np.ones(4)
    for u in (np.less, np.equal):
        with pytest.raises(TypeError):
            u.reduceat(a, [0, 2])
        with pytest.raises(TypeError):
            _twins.twin(u).reduceat(a, [0, 2])
    assert np.logical_and.reduceat(a, [0, 2]).dtype == bool


@gpu
def test_device_indices_after_bad_ones_and_many_calls():
    # the device check leaves its scratch as it found it: a bad call, then good ones on the same
    # stream (each queued behind its own check), every kernel shape, results as NumPy's
    a = small(1 << 16, np.float32)
    d = cuda.to_device(a)
    bad = cuda.to_device(np.array([0, 5, 1 << 16]))
    out = cuda.to_device(np.full(3, 7.5, np.float32))
    with pytest.raises(IndexError, match="index 65536 out-of-bounds"):
        np.add.reduceat(d, bad, out=out)
    np.testing.assert_array_equal(out.copy_to_host(), 7.5)
    for n_seg in (1, 4, 64, 4096, 1 << 16):   # split blocks, a block, lanes, a lane per segment
        idx = np.sort(RNG.integers(0, 1 << 16, n_seg))
        di = cuda.to_device(idx)
        got = [np.add.reduceat(d, di) for _ in range(3)]
        for g in got:
            check(g, np.add.reduceat(a, idx))
    # the first bad position is the one reported (NumPy reports the first)
    idx = np.array([3, -4, 9, 1 << 20, -1])
    with pytest.raises(IndexError) as want:
        np.add.reduceat(a, idx)
    with pytest.raises(IndexError) as got:
        np.add.reduceat(d, cuda.to_device(idx))
    assert str(got.value) == str(want.value)


@gpu
def test_device_indices_from_threads():
    # concurrent calls on one stream each wait for their own check and read their own verdict
    # (a verdict kept in the stream's scratch was read by another thread's reduction queued
    # between a check and its reduction: good indices then wrote nothing)
    import concurrent.futures as cfut
    a = small(5000, np.int32)
    d = cuda.to_device(a)
    cases = [np.sort(RNG.integers(0, 5000, k)) for k in (3, 50, 700, 5000)] * 16
    cases += [np.array([0, 5000 + k]) for k in range(16)]
    cases = [cases[i] for i in RNG.permutation(len(cases))]

    def one(idx):
        try:
            return np.add.reduceat(d, cuda.to_device(idx)).copy_to_host()
        except IndexError as e:
            return str(e)

    with cfut.ThreadPoolExecutor(12) as ex:
        results = list(ex.map(one, cases))
    for idx, r in zip(cases, results):
        try:
            want = np.add.reduceat(a, idx)
        except IndexError as e:
            assert r == str(e)
            continue
        np.testing.assert_array_equal(r, want)


@gpu
def test_device_indices_refused_in_a_graph_capture():
    from cufunc import errors
    a = cuda.to_device(np.arange(8.0))
    idx = cuda.to_device(np.array([0, 4]))
    out = cuda.device_array(2, np.float64)
    s = cuda.stream()
    cf_add.reduceat(a, idx, out=out)        # compiled outside the capture
    s.begin_capture()
    try:
        with pytest.raises(errors.GraphCaptureError, match="device indices"):
            cf_add.reduceat(a, idx, out=out, stream=s)
    finally:
        s.end_capture()
