"""@vectorize: GPU ufuncs, table-driven against NumPy over dtypes, layouts and keywords.

Tests marked gpu run on the GPU machine (CUFUNC_REQUIRE_GPU=1 makes them fail rather than skip
elsewhere); the rest (decoration, argument checking, loop resolution, generated kernels compiling
with NVRTC) run everywhere, CI included."""
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cufunc
from cufunc import cuda, vectorize
from cufunc.errors import TypingError

gpu = pytest.mark.gpu

INT_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT_TYPES = ["float32", "float64"]
COMPLEX_TYPES = ["complex64", "complex128"]
ALL_TYPES = INT_TYPES + FLOAT_TYPES + COMPLEX_TYPES


def muladd(x, y):
    return x * y + x


MULADD = vectorize(["%s(%s, %s)" % (t, t, t) for t in ALL_TYPES])(muladd)


@vectorize(["float32(float32, float32)", "float64(float64, float64)"])
def hypot_(x, y):
    return math.sqrt(x * x + y * y)


@vectorize(["Tuple(int64, int64)(int64, int64)"])
def divmod_(a, b):
    return a // b, a % b


@vectorize
def dyn_add(x, y):
    """adds"""
    return x + y


def random_array(dtype, shape, rng):
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), size=shape,
                            endpoint=True).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    return rng.standard_normal(shape).astype(dt)


def expected_muladd(a, b):
    """x * y + x as NumPy scalars compute it (docs/language.md's meaning). For complex values that is
    not what NumPy's array loops give: their SIMD complex multiply fuses a multiply and an add
    (FMA), rounding differently from the scalar product, which is written out here."""
    with np.errstate(all="ignore"):
        if a.dtype.kind != "c":
            return a * b + a
        re = a.real * b.real - a.imag * b.imag
        im = a.real * b.imag + a.imag * b.real
        prod = np.empty(np.broadcast_shapes(a.shape, b.shape), a.dtype)
        prod.real, prod.imag = re, im
        return prod + a


def assert_same(got, want, dtype):
    got = np.asarray(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if np.dtype(dtype).kind in "iub":
        np.testing.assert_array_equal(got, want)
    else:
        # + - * are exact IEEE operations (no FMA contraction): bit-for-bit equal
        np.testing.assert_array_equal(got, want)


# ---- no GPU needed --------------------------------------------------------------------------

def test_attributes():
    assert MULADD.nin == 2 and MULADD.nout == 1 and MULADD.nargs == 3
    assert MULADD.ntypes == len(ALL_TYPES)
    assert MULADD.types[0] == "bb->b" and "ff->f" in MULADD.types and "DD->D" in MULADD.types
    assert MULADD.__name__ == "muladd"
    assert dyn_add.__doc__ == "adds"
    assert divmod_.nout == 2 and divmod_.types == ["ll->ll"]
    assert dyn_add.ntypes == 0 and dyn_add.identity is None
    assert vectorize(["f8(f8, f8)"], identity=0)(muladd).identity == 0
    assert isinstance(MULADD, cufunc.UFunc)


def test_type_errors_at_decoration():
    def bad(x):
        return x[0]
    with pytest.raises(TypingError):
        vectorize(["float32(float32)"])(bad)
    with pytest.raises(TypeError, match="has 1 arguments"):
        vectorize(["float32(float32)"])(muladd)
    with pytest.raises(ValueError, match="target='cuda'"):
        vectorize(["f4(f4, f4)"], target="cpu")
    with pytest.raises(TypeError, match="returns nothing"):
        vectorize(["void(f4)"])(lambda x: None)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: MULADD(np.ones(3)), TypeError, "takes from 2 to 3 positional arguments but 1"),
    (lambda: MULADD(np.ones(3), np.ones(3), np.ones(3), np.ones(3)), TypeError, "but 4 were given"),
    (lambda: MULADD(np.ones(3), np.ones(3), bogus=1), TypeError,
     "'bogus' is an invalid keyword to ufunc 'muladd'"),
    (lambda: MULADD(np.ones((2, 3)), np.ones(4)), ValueError,
     r"operands could not be broadcast together with shapes \(2,3\) \(4,\)"),
    (lambda: MULADD(np.ones(3, bool), np.ones(3, "M8[s]")), TypeError, "datetime64|unsupported"),
    (lambda: MULADD(np.ones(3, object), np.ones(3)), TypeError, "object"),
    (lambda: hypot_(np.ones(3, np.complex64), np.ones(3)), TypeError,
     r"not supported for the input types \(complex64, float64\)"),
    (lambda: MULADD(np.ones(3), np.ones(3), out=np.ones(4)), ValueError,
     r"operands could not be broadcast together with shapes \(3,\) \(3,\) \(4,\)"),
    (lambda: MULADD(np.ones((2, 3)), np.ones(3), out=np.ones(3)), ValueError,
     r"non-broadcastable output operand with shape \(3,\) doesn't match the broadcast shape \(2,3\)"),
    (lambda: MULADD(np.ones(3), np.ones(3), out=(np.ones(3), np.ones(3))), ValueError,
     "exactly 1 entries"),
    (lambda: MULADD(np.ones(3), np.ones(3), np.ones(3), out=np.ones(3)), TypeError,
     "both a positional and keyword"),
    (lambda: MULADD(np.ones(3), np.ones(3), casting="bogus"), ValueError, "casting must be"),
    (lambda: MULADD(np.ones(3), np.ones(3), out=np.ones(3, np.int32)), TypeError,
     r"Cannot cast ufunc 'muladd' output from dtype\('float64'\) to dtype\('int32'\)"),
    (lambda: MULADD(np.ones(3), np.ones(3), out=[1, 2, 3]), TypeError, "return arrays must be"),
    (lambda: MULADD.outer(np.ones(3)), TypeError, "positional arguments"),
    (lambda: MULADD(np.ones(3, np.int8), 1000), OverflowError,
     "Python integer 1000 out of bounds for int8"),
])
def test_bad_calls(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_outer_needs_binary():
    neg = vectorize(["f8(f8)"])(lambda x: -x)
    with pytest.raises(ValueError, match="binary"):
        neg.outer(np.ones(2), np.ones(2))


@pytest.mark.parametrize("dtype", ALL_TYPES)
def test_generated_kernels_compile(dtype):
    """Every kernel shape the call path can pick compiles with NVRTC for sm_90 (no GPU needed)."""
    from cufunc import _core
    a = np.ones((7, 33), dtype)
    cases = [(a, a), (a, a.T.copy().T), (a[:, ::2], a[:, :17]), (a, 3), (a[::-1], a[0])]
    for x, y in cases:
        src = MULADD.kernel_source(x, y)
        assert "#include \"cufunc/ew_" in src  # the kernel: its shape's header
        image, is_ptx = _core.compile_source(src, ("--fmad=false",), (9, 0))
        assert len(image) > 0 and not is_ptx


def test_can_cast_matches_numpy():
    from cufunc import _core
    for a in ALL_TYPES + ["bool"]:
        for b in ALL_TYPES + ["bool"]:
            for rule in ("no", "equiv", "safe", "same_kind", "unsafe"):
                assert _core.can_cast(a, b, rule) == np.can_cast(a, b, rule), (a, b, rule)


def test_inspect_cuda_shows_the_source():
    src = hypot_.inspect_cuda()
    assert "cf_float32 x, cf_float32 y" in src and "cf_float64 x, cf_float64 y" in src
    assert "cf_sqrt(" in src
    flat = hypot_.inspect_cuda(np.ones(64, np.float32), np.ones(64, np.float32))
    assert "#define CF_EW_V 4\n" in flat and '#include "cufunc/ew_flat.cuh"' in flat


# ---- on the GPU -----------------------------------------------------------------------------

LAYOUTS = {
    "C": lambda x: x,
    "F": lambda x: np.asfortranarray(x),
    "strided": lambda x: np.ascontiguousarray(np.repeat(x, 2, axis=1))[:, ::2],
    "reversed": lambda x: np.ascontiguousarray(x[::-1, ::-1])[::-1, ::-1],
    "transposed": lambda x: np.ascontiguousarray(x.T).T,
}


@gpu
@pytest.mark.parametrize("dtype", ALL_TYPES)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("where", ["host", "device"])
def test_dtypes_and_layouts(dtype, layout, where):
    rng = np.random.default_rng(abs(hash((dtype, layout))) % 2**32)
    a = LAYOUTS[layout](random_array(dtype, (37, 129), rng))
    b = LAYOUTS[layout](random_array(dtype, (37, 129), rng))
    want = expected_muladd(a, b)
    if where == "host":
        got = MULADD(a, b)
        assert isinstance(got, np.ndarray)
    else:
        da = cuda.to_device(a)
        db = cuda.to_device(b)
        got = MULADD(da, db)
        assert isinstance(got, cuda.DeviceNDArray)
        got = got.copy_to_host()
    assert_same(got, want, dtype)


@gpu
@pytest.mark.parametrize("shape_a, shape_b", [
    ((4096, 1), (1, 4096)), ((5, 1, 3), (4, 1)), ((), (7,)), ((0,), (0,)), ((3, 0), (1, 0)),
    ((1,), (1,)), ((2, 3, 4, 5, 6), (6,)), ((1000003,), (1000003,)),
])
def test_broadcasting(shape_a, shape_b):
    rng = np.random.default_rng(1)
    a = random_array("float32", shape_a, rng)
    b = random_array("float32", shape_b, rng)
    want = expected_muladd(a, b)
    got = MULADD(cuda.to_device(a), cuda.to_device(b)).copy_to_host()
    assert got.shape == want.shape
    assert_same(got, want, "float32")


@gpu
def test_scalars_are_weak_and_travel_as_parameters():
    x = np.arange(10, dtype=np.float32)
    got = MULADD(x, 2.5)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, x * np.float32(2.5) + x)
    i8 = np.arange(-5, 5, dtype=np.int8)
    got = MULADD(i8, 3)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, i8 * np.int8(3) + i8)
    # a NumPy scalar is strong: float64 scalar with float32 array picks the float64 loop
    got = MULADD(x, np.float64(2.5))
    assert got.dtype == np.float64
    # all scalars: a NumPy scalar comes back, as from a NumPy ufunc
    r = MULADD(np.float32(3), np.float32(4))
    assert isinstance(r, np.float32) and r == np.float32(15)
    r = hypot_(3.0, 4.0)
    assert isinstance(r, np.float64) and r == 5.0


@gpu
def test_loop_selection_by_safe_casting():
    # int16 inputs reach float32 first; int32 needs float64
    got = hypot_(np.array([3, 5], np.int16), np.array([4, 12], np.int16))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [5, 13])
    got = hypot_(np.array([3], np.int32), np.array([4], np.int32))
    assert got.dtype == np.float64


@gpu
@pytest.mark.parametrize("on", ["host", "device"])
def test_out_keyword_and_positional(on):
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    b = np.full((3, 4), 0.5)
    want = expected_muladd(a, b)
    if on == "host":
        out = np.empty((3, 4))
        r = MULADD(a, b, out=out)
        assert r is out
        np.testing.assert_array_equal(out, want)
        out2 = np.empty((4, 3)).T        # non-contiguous host out
        MULADD(a, b, out2)
        np.testing.assert_array_equal(out2, want)
    else:
        da, db = cuda.to_device(a), cuda.to_device(b)
        out = cuda.device_array((3, 4))
        r = MULADD(da, db, out=out)
        assert r is out
        np.testing.assert_array_equal(out.copy_to_host(), want)
        big = cuda.device_array((6, 8))
        view = big[::2, ::2]             # a strided device view as out
        MULADD(da, db, out=view)
        np.testing.assert_array_equal(view.copy_to_host(), want)
        # float64 loop written into a float32 out: converted in the kernel (same_kind)
        o32 = cuda.device_array((3, 4), np.float32)
        MULADD(da, db, out=o32)
        np.testing.assert_array_equal(o32.copy_to_host(), want.astype(np.float32))


@gpu
def test_host_out_with_device_input_is_filled_from_the_device():
    # computed on the device and copied into the NumPy out=, which is returned (as Numba does)
    x = np.arange(3.0)
    d = cuda.to_device(x)
    out = np.empty(3)
    assert MULADD(d, d, out=out) is out
    np.testing.assert_array_equal(out, x * x + x)


@gpu
def test_out_overlapping_input_is_handled_like_numpy():
    x = np.arange(10, dtype=np.float64)
    d = cuda.to_device(x)
    MULADD(d, d, out=d)                  # the same view: in place
    np.testing.assert_array_equal(d.copy_to_host(), x * x + x)
    d = cuda.to_device(x)
    MULADD(d[::-1], d[::-1], out=d)      # overlapping in another order: input copied first
    r = x[::-1]
    np.testing.assert_array_equal(d.copy_to_host(), r * r + r)


@gpu
def test_where_and_dtype_and_casting():
    a = np.arange(8, dtype=np.float32)
    mask = a % 2 == 0
    out = np.full(8, -1, np.float32)
    MULADD(a, a, out=out, where=mask)
    np.testing.assert_array_equal(out, np.where(mask, a * a + a, -1))
    dout = cuda.to_device(np.full(8, -1, np.float32))
    MULADD(cuda.to_device(a), cuda.to_device(a), out=dout, where=cuda.to_device(mask))
    np.testing.assert_array_equal(dout.copy_to_host(), np.where(mask, a * a + a, -1))
    got = MULADD(a, a, dtype=np.float64)
    assert got.dtype == np.float64
    with pytest.raises(TypeError, match="casting rule 'no'"):
        MULADD(a, a, casting="no", dtype=np.float64)


@gpu
def test_several_outputs():
    a = np.array([7, -7, 7, -7, 5], np.int64)
    b = np.array([2, 2, -2, -2, 0], np.int64)
    q, r = divmod_(a, b)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(q, np.floor_divide(a, b))
        np.testing.assert_array_equal(r, np.remainder(a, b))
    dq = cuda.device_array(5, np.int64)
    dr = cuda.device_array(5, np.int64)
    res = divmod_(cuda.to_device(a), cuda.to_device(b), out=(dq, dr))
    assert res[0] is dq and res[1] is dr
    np.testing.assert_array_equal(dq.copy_to_host(), q)


@gpu
def test_outer():
    a = np.arange(5, dtype=np.float64)
    b = np.arange(3, dtype=np.float64) + 0.5
    np.testing.assert_array_equal(MULADD.outer(a, b), np.multiply.outer(a, b) + a[:, None])
    got = MULADD.outer(cuda.to_device(a), cuda.to_device(b)).copy_to_host()
    np.testing.assert_array_equal(got, np.multiply.outer(a, b) + a[:, None])


@gpu
def test_signature_less_ufunc_compiles_per_input_types():
    i8 = np.array([100, 27], np.int8)
    got = dyn_add(i8, i8)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, i8 + i8)       # wraps like NumPy
    f = np.array([0.5], np.float32)
    assert dyn_add(f, 1.0).dtype == np.float32
    assert dyn_add(f, f.astype(np.float64)).dtype == np.float64
    assert dyn_add.ntypes == 3
    dyn_add(i8, i8)
    assert dyn_add.ntypes == 3                          # cached


@gpu
def test_foreign_device_arrays():
    cp = pytest.importorskip("cupy")
    a = cp.arange(1000, dtype=cp.float32)
    got = MULADD(a, a)
    assert isinstance(got, cp.ndarray)  # results in the caller's array type
    np.testing.assert_array_equal(got.get(), expected_muladd(a.get(), a.get()))
    torch = pytest.importorskip("torch")
    t = torch.arange(1000, dtype=torch.float64, device="cuda")
    got = MULADD(t, t)
    assert isinstance(got, torch.Tensor)
    got = got.cpu().numpy()
    np.testing.assert_array_equal(got, expected_muladd(t.cpu().numpy(), t.cpu().numpy()))
    out = torch.empty(1000, dtype=torch.float64, device="cuda")
    MULADD(t, t, out=out)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), got)


@gpu
def test_more_than_2_to_the_31_elements():
    n = (1 << 31) + 5
    out = cuda.device_array(n, np.uint8)
    add = vectorize(["uint8(uint8, uint8)"])(lambda x, y: x + y)
    add(np.uint8(200), np.uint8(100), out=out)          # scalars broadcast over a 64-bit loop
    assert out[0] == 44 and out[n - 1] == 44 and out[n // 2] == 44


@gpu
def test_disk_cache_serves_a_new_process(tmp_path):
    script = textwrap.dedent("""
        import json, numpy as np
        from cufunc import vectorize, _core
        @vectorize(['float32(float32, float32)'])
        def f(x, y):
            return x - 3 * y
        r = f(np.arange(4, dtype=np.float32), np.ones(4, np.float32))
        assert (r == np.arange(4) - 3).all()
        print(json.dumps(_core.cache_stats()))
    """)
    env = dict(os.environ, CUFUNC_CACHE_DIR=str(tmp_path / "cache"), CUFUNC_CACHE="1")
    prog = tmp_path / "prog.py"          # a file: the translator reads the function's source
    prog.write_text(script)
    import json
    first = json.loads(subprocess.check_output([sys.executable, str(prog)], env=env))
    second = json.loads(subprocess.check_output([sys.executable, str(prog)], env=env))
    assert first["compiles"] >= 1
    assert second["compiles"] == 0 and second["disk_hits"] >= 1


@gpu
def test_empty_and_zero_d():
    e = np.empty((0, 3), np.float32)
    got = MULADD(e, e)
    assert got.shape == (0, 3) and got.dtype == np.float32
    z = np.array(2.0, np.float32)
    r = MULADD(cuda.to_device(np.ones(3, np.float32)), z)
    np.testing.assert_array_equal(r.copy_to_host(), np.full(3, 3, np.float32))
