"""@guvectorize with small core dimensions: the flat tiles of src/gufunc.c (a tile of
consecutive loop iterations that is one contiguous block, copied through shared memory with
16-byte cp.async units where aligned) against NumPy, for the cross product (3),(3)->(3), the 4x4
matmul, a (2)->(2) and a (3)->() core: loop counts around the tile sizes, bases off 16-byte
alignment, F-ordered, strided and reversed batches (read in place), in place and overlapping out=
(never staged), float32, float64 and int32.

The references compute in the loop's dtype in the body's order, and the kernels contract no
multiply-add (--fmad=false), so float results are compared exactly. Tests marked gpu run on the GPU
machine; the plan and NVRTC tests run everywhere."""
import os
import subprocess
import sys

import numpy as np
import pytest

from cufunc import cuda, _core
from cufunc.guvectorize import guvectorize

gpu = pytest.mark.gpu

TYPES = ["float32", "float64", "int32"]
# around the flat tiles: cross 512, matmul 128, (2)->(2) and (3)->() 1024 (threads run 4
# iterations each) on large loops; tiles over 128 only while the loop makes 1024 of them
SIZES = [1, 2, 127, 128, 129, 1023, 4099, 100003, 1 << 19, (1 << 19) + 1]


@guvectorize(["void(%s[:], %s[:], %s[:])" % (t, t, t) for t in TYPES], "(n),(n)->(n)",
             target="cuda")
def cross(a, b, c):
    x = a[1] * b[2] - a[2] * b[1]
    y = a[2] * b[0] - a[0] * b[2]
    z = a[0] * b[1] - a[1] * b[0]
    c[0] = x
    c[1] = y
    c[2] = z


@guvectorize(["void(%s[:,:], %s[:,:], %s[:,:])" % (t, t, t) for t in TYPES],
             "(m,n),(n,p)->(m,p)", target="cuda")
def matmul(a, b, c):
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            s = a[i, 0] * b[0, j]
            for k in range(1, a.shape[1]):
                s += a[i, k] * b[k, j]
            c[i, j] = s


@guvectorize(["void(%s[:], %s[:])" % (t, t) for t in TYPES], "(n)->(n)", target="cuda")
def rot90(x, y):
    a = x[0]
    b = x[1]
    y[0] = -b
    y[1] = a


@guvectorize(["void(%s[:], %s[:])" % (t, t) for t in TYPES], "(n)->()", target="cuda")
def norm2(x, out):
    out[0] = x[0] * x[0] + x[1] * x[1] + x[2] * x[2]


def cross_ref(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.stack([a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1],
                     a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2],
                     a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]], axis=-1)


def matmul_ref(a, b):
    a, b = np.asarray(a), np.asarray(b)
    c = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]),
                 np.result_type(a, b))
    for i in range(a.shape[-2]):
        for j in range(b.shape[-1]):
            s = a[..., i, 0] * b[..., 0, j]
            for k in range(1, a.shape[-1]):
                s = s + a[..., i, k] * b[..., k, j]
            c[..., i, j] = s
    return c


def rot90_ref(x):
    return np.stack([-x[..., 1], x[..., 0]], axis=-1)


def norm2_ref(x):
    return x[..., 0] * x[..., 0] + x[..., 1] * x[..., 1] + x[..., 2] * x[..., 2]


def rand(dtype, shape, rng):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-1000, 1000, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def plan_of(src, i):
    """(kind, flat) of operand i in a kernel source: 'G', True for a flat staged operand."""
    line = [ln for ln in src.splitlines() if ln.strip().startswith("F(%d, " % i)][0]
    kind = line.split(",")[1].strip()
    flat = None
    for ln in src.splitlines():
        if ln.startswith("#define CF_GU_STAGE_%d " % i):
            flat = ln.split(",")[6].strip() == "1"
    return kind, flat


# ---- everywhere: the plan and NVRTC ------------------------------------------------------------

@pytest.mark.parametrize("dtype", TYPES)
def test_flat_plans_and_compile(dtype):
    n = 100003
    cases = [
        (cross, (np.ones((n, 3), dtype),) * 2, ["G", "G", "G"]),
        (matmul, (np.ones((n, 4, 4), dtype),) * 2, ["G", "G", "G"]),
        (rot90, (np.ones((n, 2), dtype),), ["G", "G"]),
        (norm2, (np.ones((n, 3), dtype),), ["G", "A"]),
    ]
    for g, args, kinds in cases:
        src = g.kernel_source(*args)
        for i, k in enumerate(kinds):
            got = plan_of(src, i)
            assert got[0] == k, (g.__name__, i, got)
            if k == "G":
                assert got[1], (g.__name__, i, "not flat")
        image, is_ptx = _core.compile_source(src, ["--fmad=false"], (9, 0))
        assert len(image) > 0


def test_out_given_small_core_read_per_thread():
    """out= contents must be visible to the body (it may read them, or write part of a core):
    a flat output of at most 64 bytes is read by each thread into registers (LD 2), where the
    compiler drops the reads a body overwrites first (the cross product: no global load left
    but the inputs' cp.async); a body that writes part of its core keeps them."""
    x = np.ones((1 << 20, 3), np.float32)
    src = cross.kernel_source(x, x, out=np.empty_like(x))
    assert plan_of(src, 0) == ("G", True) and plan_of(src, 2) == ("G", True)
    assert "#define CF_GU_STAGE_2 12, 12, 12288, 16, 2, 0, 1, (3)" in src
    m = np.ones((5000, 4, 4), np.float32)
    assert "#define CF_GU_STAGE_2 64, 68, 17408, 4, 2, 0, 1, (4, 4)" in matmul.kernel_source(
        m, m, out=m.copy())


def test_switch_off_plans_as_before():
    """CUFUNC_GU_SMALL=0: cores under 32 bytes in place, the 4x4 matmul with base-offset tables."""
    code = ("import numpy as np, sys; sys.path.insert(0, %r); import test_guvectorize_small as t;"
            "x = np.ones((5000, 3), np.float32); m = np.ones((5000, 4, 4), np.float32);"
            "print(t.plan_of(t.cross.kernel_source(x, x), 0), t.plan_of(t.matmul.kernel_source(m, m), 0))"
            % os.path.dirname(__file__))
    out = {}
    for val in ("0", "1"):
        env = dict(os.environ, CUFUNC_GU_SMALL=val)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        out[val] = r.stdout.strip()
    assert out["0"] == "('A', None) ('G', False)", out
    assert out["1"] == "('G', True) ('G', True)", out


# ---- on the GPU --------------------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("n", SIZES)
def test_cross_sizes(dtype, n):
    rng = np.random.default_rng(n)
    a, b = rand(dtype, (n, 3), rng), rand(dtype, (n, 3), rng)
    da, db = cuda.to_device(a), cuda.to_device(b)
    want = cross_ref(a, b)
    np.testing.assert_array_equal(cross(da, db).copy_to_host(), want)      # fresh output
    dc = cuda.to_device(np.full((n, 3), 7, dtype))
    cross(da, db, out=dc)                                                  # out= given
    np.testing.assert_array_equal(dc.copy_to_host(), want)
    if dtype == "float32":
        np.testing.assert_allclose(want, np.cross(a, b), rtol=1e-5, atol=1e-5)


@gpu
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("n", [1, 127, 128, 129, 1023, 100003])
def test_matmul4_sizes(dtype, n):
    rng = np.random.default_rng(n + 1)
    a, b = rand(dtype, (n, 4, 4), rng), rand(dtype, (n, 4, 4), rng)
    da, db = cuda.to_device(a), cuda.to_device(b)
    want = matmul_ref(a, b)
    np.testing.assert_array_equal(matmul(da, db).copy_to_host(), want)
    dc = cuda.to_device(np.zeros((n, 4, 4), dtype))
    matmul(da, db, out=dc)
    np.testing.assert_array_equal(dc.copy_to_host(), want)
    # b broadcast (one (4, 4) for all): 'U' beside flat a and c
    np.testing.assert_array_equal(matmul(da, db[0]).copy_to_host(), matmul_ref(a, b[0]))


@gpu
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("n", [1, 1023, 100003, (1 << 20) - 1, 1 << 20, (1 << 20) + 1])
def test_small_cores_2_and_3(dtype, n):
    rng = np.random.default_rng(n + 2)
    x2, x3 = rand(dtype, (n, 2), rng), rand(dtype, (n, 3), rng)
    np.testing.assert_array_equal(rot90(cuda.to_device(x2)).copy_to_host(), rot90_ref(x2))
    np.testing.assert_array_equal(norm2(cuda.to_device(x3)).copy_to_host(), norm2_ref(x3))


def _views(dtype, n, rng):
    """name -> (device view, the same values on the host) for the layouts a batch can have."""
    big = rand(dtype, (2 * n + 2, 3), rng)
    dbig = cuda.to_device(big)
    f = np.asfortranarray(rand(dtype, (n, 3), rng))
    return {
        "a[1:] (one row off 16-byte alignment)": (dbig[1:n + 1], big[1:n + 1]),
        "a[2:]": (dbig[2:n + 2], big[2:n + 2]),
        "every other row (a[::2])": (dbig[::2][:n], big[::2][:n]),
        "reversed rows (a[::-1])": (dbig[::-1][:n], big[::-1][:n]),
        "F-ordered": (cuda.to_device(f), f),
    }


@gpu
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("n", [511, 1025, 30001])
def test_cross_layouts(dtype, n):
    rng = np.random.default_rng(7)
    b = rand(dtype, (n, 3), rng)
    db = cuda.to_device(b)
    for name, (dv, hv) in _views(dtype, n, rng).items():
        want = cross_ref(hv, b)
        np.testing.assert_array_equal(cross(dv, db).copy_to_host(), want, err_msg=name)
        np.testing.assert_array_equal(cross(db, dv).copy_to_host(), cross_ref(b, hv),
                                      err_msg=name)
        # an output view with the same layout
        big = cuda.to_device(np.zeros((2 * n + 2, 3), dtype))
        out = big[1:n + 1] if name.startswith("a[1:]") or name == "a[2:]" else big[::2][:n]
        cross(dv, db, out=out)
        np.testing.assert_array_equal(out.copy_to_host(), want, err_msg=name)
    # the plan: a C-contiguous batch is staged flat; strided and F-ordered ones are read in place
    views = _views(dtype, n, rng)
    assert plan_of(cross.kernel_source(views["a[1:] (one row off 16-byte alignment)"][0], db), 0) == ("G", True)
    for name in ("every other row (a[::2])", "reversed rows (a[::-1])", "F-ordered"):
        assert plan_of(cross.kernel_source(views[name][0], db), 0)[0] == "A", name


@gpu
@pytest.mark.parametrize("dtype", TYPES)
def test_matmul4_layouts(dtype):
    rng = np.random.default_rng(8)
    n = 1025
    big = rand(dtype, (2 * n + 1, 4, 4), rng)
    dbig = cuda.to_device(big)
    b = rand(dtype, (n, 4, 4), rng)
    db = cuda.to_device(b)
    f = np.asfortranarray(rand(dtype, (n, 4, 4), rng))
    for name, dv, hv in [("a[1:]", dbig[1:n + 1], big[1:n + 1]),
                         ("a[::2]", dbig[::2][:n], big[::2][:n]),
                         ("a[::-1]", dbig[::-1][:n], big[::-1][:n]),
                         ("F-ordered", cuda.to_device(f), f)]:
        np.testing.assert_array_equal(matmul(dv, db).copy_to_host(), matmul_ref(hv, b),
                                      err_msg=name)


@gpu
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("n", [1, 513, 1025, 30001])
def test_cross_in_place_and_overlapping_out(dtype, n):
    """NumPy's rule: as if every input were copied before any output is written."""
    rng = np.random.default_rng(9)
    a, b = rand(dtype, (n, 3), rng), rand(dtype, (n, 3), rng)
    da, db = cuda.to_device(a), cuda.to_device(b)
    cross(da, db, out=da)                                   # in place on a
    np.testing.assert_array_equal(da.copy_to_host(), cross_ref(a, b))
    db2 = cuda.to_device(b)
    cross(cuda.to_device(a), db2, out=db2)                  # in place on b
    np.testing.assert_array_equal(db2.copy_to_host(), cross_ref(a, b))
    # out shifted one row against a in the same buffer
    big = rand(dtype, (n + 1, 3), rng)
    dbig = cuda.to_device(big)
    cross(dbig[1:], db, out=dbig[:-1])
    np.testing.assert_array_equal(dbig.copy_to_host()[:-1], cross_ref(big[1:], b))
    np.testing.assert_array_equal(dbig.copy_to_host()[-1], big[-1])
    # out shifted the other way
    dbig = cuda.to_device(big)
    cross(dbig[:-1], db, out=dbig[1:])
    np.testing.assert_array_equal(dbig.copy_to_host()[1:], cross_ref(big[:-1], b))
    np.testing.assert_array_equal(dbig.copy_to_host()[0], big[0])


@gpu
def test_out_given_keeps_what_the_body_does_not_write():
    """A body that writes part of its core: with out= given the other elements keep their values
    (flat tiles load a staged output given by out= first)."""
    @guvectorize(["void(float32[:,:], float32[:,:])"], "(m,n)->(m,n)", target="cuda")
    def diag_only(a, c):
        for i in range(a.shape[0]):
            c[i, i] = a[i, i] * 2
    rng = np.random.default_rng(10)
    n = 1025
    a = rand("float32", (n, 4, 4), rng)
    c0 = rand("float32", (n, 4, 4), rng)
    dc = cuda.to_device(c0)
    diag_only(cuda.to_device(a), out=dc)
    want = c0.copy()
    for i in range(4):
        want[:, i, i] = a[:, i, i] * 2
    np.testing.assert_array_equal(dc.copy_to_host(), want)
    assert plan_of(diag_only.kernel_source(cuda.to_device(a), out=dc), 1) == ("G", True)


@gpu
def test_host_arrays_and_broadcast_loops():
    """Host inputs (uploaded C-contiguous) and a 2-D loop where b broadcasts over the outer axis
    (a and out are blocks, b is not: in place)."""
    rng = np.random.default_rng(11)
    a = rand("float32", (64, 1000, 3), rng)
    b = rand("float32", (1000, 3), rng)
    np.testing.assert_array_equal(cross(a, b), cross_ref(a, b))
    np.testing.assert_array_equal(cross(cuda.to_device(a), cuda.to_device(b)).copy_to_host(),
                                  cross_ref(a, b))
