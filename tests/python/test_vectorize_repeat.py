"""Back-to-back calls: the call path's shortcuts must never serve a stale launch.

Three shortcuts make a loop of small calls cheap:
  * the fast path of UFunc calls (numpy_ext/py_ufunc.c, ufunc_fast): DeviceArrays of one shape
    with the outputs given and input dtypes seen before skip the general call's classification;
    anything else falls back to the general path;
  * the fast path's record of its last launch per ufunc: a call on the very same DeviceArray
    objects (known by their serial numbers, never reused) repeats that launch without any check;
  * the repeat record of the element-wise engine (src/ufunc.c, "repeat launches"): each thread's
    last launch is reused when the ufunc, loop, stream, loop shape and every operand's address,
    dtype, shape, strides (or scalar value) are the same.
Each test runs a sequence of calls in which every call differs from the one before in one respect
that the kernel, its grid or its parameters depend on, with repeats in between, and checks every
result against NumPy. The GPU tests are marked gpu."""
import threading

import numpy as np
import pytest

from cufunc import cuda, vectorize
from cufunc import types as T
from cufunc.vectorize import _loop_from

gpu = pytest.mark.gpu


@vectorize(["float32(float32, float32)", "float64(float64, float64)", "int32(int32, int32)"])
def axpy(x, y):
    return 2 * x + y


@vectorize(["float32(float32, float32)", "float64(float64, float64)"])
def other(x, y):
    return x - y


@vectorize(["Tuple(float64, float64)(float64, float64)"])
def sumdiff(x, y):
    return x + y, x - y


def want_axpy(x, y):
    return (2 * x + y).astype(np.result_type(x, y))


def check(got, want):
    got = got.copy_to_host() if hasattr(got, "copy_to_host") else np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def base_arrays(rng, n=64, dtype=np.float32):
    x = rng.integers(-50, 50, n).astype(dtype)
    y = rng.integers(-50, 50, n).astype(dtype)
    return x, y


def layout_steps(rng):
    """(name, host x, host y, device x, device y, device out): a list of calls, each differing
    from the previous one in one respect."""
    x, y = base_arrays(rng)
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    out = cuda.device_array(64, np.float32)
    out2 = cuda.device_array(64, np.float32)
    big = cuda.device_array(130, np.float32)
    x2, y2 = base_arrays(rng)
    dx2, dy2 = cuda.to_device(x2), cuda.to_device(y2)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    dx64, dy64 = cuda.to_device(x64), cuda.to_device(y64)
    out64 = cuda.device_array(64, np.float64)
    xm, ym = x.reshape(8, 8), y.reshape(8, 8)
    dxm, dym = cuda.to_device(xm), cuda.to_device(ym)
    outm = cuda.device_array((8, 8), np.float32)
    dxf = cuda.to_device(np.asfortranarray(xm))
    steps = [
        ("first", x, y, dx, dy, out),
        ("repeat", x, y, dx, dy, out),
        ("another out", x, y, dx, dy, out2),
        ("other inputs, same layout", x2, y2, dx2, dy2, out2),
        ("repeat", x2, y2, dx2, dy2, out2),
        ("inputs swapped", y2, x2, dy2, dx2, out2),
        ("strided inputs", x[::2], y[::2], dx[::2], dy[::2], big[:32]),
        ("strided out", x[::2], y[::2], dx[::2], dy[::2], big[::4][:32]),
        ("misaligned out (no vector stores)", x, y, dx, dy, big[1:65]),
        ("aligned out again", x, y, dx, dy, big[4:68]),
        ("reversed inputs", x[::-1], y[::-1], dx[::-1], dy[::-1], out),
        ("shorter", x[:63], y[:63], dx[:63], dy[:63], out[:63]),
        ("one element", x[:1], y[:1], dx[:1], dy[:1], out[:1]),
        ("other element", x[5:6], y[5:6], dx[5:6], dy[5:6], out[:1]),
        ("float64 loop", x64, y64, dx64, dy64, out64),
        ("float32 again", x, y, dx, dy, out),
        ("2-D", xm, ym, dxm, dym, outm),
        ("2-D, Fortran-ordered input", xm, ym, dxf, dym, outm),
        ("2-D transposed views", xm.T, ym, dxm.T, dym, outm),
        ("2-D again", xm, ym, dxm, dym, outm),
        ("0-d", x[3], y[3], dx[3:4].reshape(()), dy[3:4].reshape(()), out[:1].reshape(())),
        ("empty", x[:0], y[:0], dx[:0], dy[:0], out[:0]),
        ("back to the first", x, y, dx, dy, out),
    ]
    return steps


@gpu
@pytest.mark.parametrize("how", ["out=", "positional out", "out=(tuple,)"])
def test_each_call_differs_from_the_last(how):
    rng = np.random.default_rng(1)
    for name, x, y, dx, dy, dout in layout_steps(rng):
        if how == "out=":
            r = axpy(dx, dy, out=dout)
        elif how == "positional out":
            r = axpy(dx, dy, dout)
        else:
            r = axpy(dx, dy, out=(dout,))
        assert r is dout, name
        check(dout, want_axpy(np.asarray(x), np.asarray(y)))


@gpu
def test_new_values_in_the_same_arrays_are_read():
    # the same launch, repeated, must read what the arrays hold now
    dx, dy = cuda.device_array(16, np.float32), cuda.device_array(16, np.float32)
    out = cuda.device_array(16, np.float32)
    for k in range(5):
        x = np.arange(16, dtype=np.float32) * k
        y = np.full(16, k, np.float32)
        dx.copy_to_device(x)
        dy.copy_to_device(y)
        axpy(dx, dy, out=out)
        check(out, want_axpy(x, y))


@gpu
def test_scalars_of_different_values():
    x = np.arange(32, dtype=np.float32)
    dx = cuda.to_device(x)
    out = cuda.device_array(32, np.float32)
    for v in [1.0, 1.0, 2.5, -3.0, 2.5, 0.0]:
        axpy(dx, v, out=out)
        check(out, want_axpy(x, np.float32(v)))
        axpy(v, dx, out=out)
        check(out, (2 * np.float32(v) + x).astype(np.float32))


@gpu
def test_two_ufuncs_interleaved():
    x, y = np.arange(20, dtype=np.float32), np.full(20, 3, np.float32)
    dx, dy, out = cuda.to_device(x), cuda.to_device(y), cuda.device_array(20, np.float32)
    for _ in range(3):
        axpy(dx, dy, out=out)
        check(out, want_axpy(x, y))
        other(dx, dy, out=out)
        check(out, x - y)


@gpu
def test_streams_and_stream_keyword():
    x, y = np.arange(20, dtype=np.float32), np.full(20, 3, np.float32)
    dx, dy, out = cuda.to_device(x), cuda.to_device(y), cuda.device_array(20, np.float32)
    s1, s2 = cuda.stream(), cuda.stream()
    for s in [None, s1, s1, s2, None, s2]:
        out.copy_to_device(np.zeros(20, np.float32))
        if s is None:
            axpy(dx, dy, out=out)
        else:
            axpy(dx, dy, out=out, stream=s)
            s.synchronize()
        check(out, want_axpy(x, y))


@gpu
def test_casts_outputs_and_several_outputs():
    x, y = np.arange(10, dtype=np.float64), np.full(10, 0.5)
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    o32 = cuda.device_array(10, np.float32)
    o64 = cuda.device_array(10, np.float64)
    for out, dt in [(o64, np.float64), (o32, np.float32), (o32, np.float32), (o64, np.float64)]:
        axpy(dx, dy, out=out)              # float64 loop; a float32 out converts (same_kind)
        check(out, want_axpy(x, y).astype(dt))
    xi = cuda.to_device(np.arange(10, dtype=np.int32))
    axpy(xi, xi, out=cuda.device_array(10, np.int32))
    with pytest.raises(TypeError, match="Cannot cast ufunc 'axpy' output"):
        axpy(dx, dy, out=cuda.device_array(10, np.int32))
    with pytest.raises(TypeError, match="Cannot cast ufunc 'axpy' output"):
        axpy(dx, dy, out=cuda.device_array(10, np.int32))   # again: the loop is now cached
    s, d = cuda.device_array(10), cuda.device_array(10)
    for _ in range(2):
        r = sumdiff(dx, dy, out=(s, d))
        assert r[0] is s and r[1] is d
        check(s, x + y)
        check(d, x - y)
        r = sumdiff(dx, dy, s, d)
        assert r[0] is s and r[1] is d


@gpu
def test_overlap_after_repeats_still_copies_the_input():
    x = np.arange(40, dtype=np.float32)
    for _ in range(3):
        d = cuda.to_device(x)
        axpy(d, d, out=d)                  # the same view: in place
        check(d, 3 * x)
        d = cuda.to_device(x)
        axpy(d[1:], d[1:], out=d[:-1])     # overlapping, shifted: the input is copied first
        want = x.copy()
        want[:-1] = 3 * x[1:]
        check(d, want)


@gpu
def test_broadcasting_and_mixed_inputs_fall_back_correctly():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    row = np.arange(4, dtype=np.float32)
    dx, drow = cuda.to_device(x), cuda.to_device(row)
    out = cuda.device_array((3, 4), np.float32)
    for _ in range(2):
        axpy(dx, drow, out=out)
        check(out, want_axpy(x, row))
        axpy(dx, dx, out=out)
        check(out, want_axpy(x, x))
        axpy(dx, row, out=out)             # a host input beside device ones
        check(out, want_axpy(x, row))
        xi = cuda.to_device(np.arange(12, dtype=np.int16).reshape(3, 4))
        axpy(xi, dx, out=out)              # int16 reaches the float32 loop by safe casting
        check(out, want_axpy(np.arange(12, dtype=np.int16).reshape(3, 4).astype(np.float32), x))


@gpu
def test_bad_calls_on_the_fast_path_shape():
    d = cuda.to_device(np.ones(4, np.float32))
    axpy(d, d, out=cuda.device_array(4, np.float32))
    with pytest.raises(ValueError, match=r"could not be broadcast together with shapes \(4,\) \(4,\) \(5,\)"):
        axpy(d, d, out=cuda.device_array(5, np.float32))
    m = cuda.to_device(np.ones((3, 4), np.float32))
    axpy(m, m, out=cuda.device_array((3, 4), np.float32))
    with pytest.raises(ValueError, match="non-broadcastable output operand with shape \\(4,\\)"):
        axpy(m, m, out=cuda.device_array(4, np.float32))
    with pytest.raises(TypeError, match="invalid keyword"):
        axpy(d, d, out=cuda.device_array(4, np.float32), bogus=1)
    with pytest.raises(TypeError):
        axpy(d, d, d, out=d)               # out given twice
    with pytest.raises(TypeError):
        axpy(d, out=d)


@gpu
def test_threads_each_keep_their_own_last_launch():
    errors = []

    def worker(seed):
        try:
            rng = np.random.default_rng(seed)
            n = 32 + seed
            x, y = base_arrays(rng, n)
            dx, dy = cuda.to_device(x), cuda.to_device(y)
            out = cuda.device_array(n, np.float32)
            for k in range(200):
                if k % 7 == 0:
                    x, y = base_arrays(rng, n)
                    dx, dy = cuda.to_device(x), cuda.to_device(y)
                axpy(dx, dy, out=out)
                cuda.synchronize()
                got = out.copy_to_host()
                if not np.array_equal(got, want_axpy(x, y)):
                    errors.append((seed, k))
                    return
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append((seed, repr(exc)))

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@gpu
@pytest.mark.parametrize("shape_kind", ["flat", "row-vector", "tile"])
def test_chains_of_large_dependent_calls(shape_kind):
    # Large launches are programmatic dependent launches (src/ufunc.c, CUFUNC_EW_PDL): a kernel
    # may be scheduled while its predecessor drains and must wait for it before reading. Each
    # call here reads what the one before wrote, with no synchronisation in between.
    m = 1024
    rng = np.random.default_rng(7)
    x = rng.integers(-4, 4, (m, m)).astype(np.float32)
    a, b = cuda.to_device(x), cuda.device_array((m, m), np.float32)
    col = cuda.to_device(np.ones((m, 1), np.float32))
    want = x.copy()
    for k in range(12):
        src, dst = (a, b) if k % 2 == 0 else (b, a)
        if shape_kind == "flat":
            axpy(src, src, out=dst)                    # dst = 3 src (exact: below 2^24)
            want = 3 * want
        elif shape_kind == "row-vector":
            other(src, col, out=dst)                   # dst = src - 1 (column broadcast)
            want = want - 1
        else:
            other(src.T, col, out=dst)                 # a transposed read: the tile kernel
            want = want.T - 1
    check(a, want.astype(np.float32))          # the 12th call (k = 11) wrote a


@gpu
def test_new_arrays_at_the_addresses_of_freed_ones():
    # The pool hands freed memory straight back: new arrays at the same addresses, of another
    # dtype, length or layout, are new objects and must not repeat the old launch.
    rng = np.random.default_rng(3)
    cases = [(np.float32, 64, 1), (np.float64, 64, 1), (np.float32, 64, 1), (np.float32, 40, 1),
             (np.float32, 64, 2), (np.int32, 64, 1), (np.float32, 64, 1)]
    for dt, n, step in cases * 2:
        x, y = base_arrays(rng, n * step, dt)
        dx, dy = cuda.to_device(x), cuda.to_device(y)
        out = cuda.device_array(n, dt)
        for _ in range(2):
            axpy(dx[::step], dy[::step], out=out)
            check(out, want_axpy(x[::step], y[::step]))
        del dx, dy, out


@gpu
def test_views_of_the_same_memory_are_distinct():
    x = np.arange(64, dtype=np.float32)
    d, out = cuda.to_device(x), cuda.device_array(64, np.float32)
    for view, hv in [(d, x), (d[:], x), (d[::-1], x[::-1]), (d.reshape(8, 8).ravel(), x), (d, x)]:
        for _ in range(2):
            axpy(view, view, out=out)
            check(out, want_axpy(hv, hv))


def negated_sum(x, y):
    return -(x + y)


@gpu
def test_a_new_loop_clears_the_record():
    # A float32 call on a ufunc with only a float64 loop casts into it; once a float32 loop is
    # added, the same call on the same arrays must take the new, exact, loop.
    @vectorize(["float64(float64, float64)"])
    def add(x, y):
        return x + y

    x, y = np.arange(16, dtype=np.float32), np.full(16, 2, np.float32)
    dx, dy, out = cuda.to_device(x), cuda.to_device(y), cuda.device_array(16, np.float32)
    for _ in range(2):
        add(dx, dy, out=out)
        check(out, x + y)
    spec, _ = _loop_from(negated_sum, [T.float32, T.float32], T.float32, False)
    add.add_loop(*spec)
    for _ in range(2):
        add(dx, dy, out=out)
        check(out, -(x + y))


@gpu
def test_threads_sharing_one_set_of_arrays():
    # The record belongs to the ufunc, not to a thread: every thread repeats the same launch.
    x, y = base_arrays(np.random.default_rng(5), 48)
    dx, dy, out = cuda.to_device(x), cuda.to_device(y), cuda.device_array(48, np.float32)
    errors = []

    def worker():
        try:
            for _ in range(100):
                axpy(dx, dy, out=out)
            cuda.synchronize()
            if not np.array_equal(out.copy_to_host(), want_axpy(x, y)):
                errors.append("wrong result")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
