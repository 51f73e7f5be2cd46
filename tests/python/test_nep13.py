"""NEP 13: cufunc's UFunc and GUFunc hand calls over to arguments that override __array_ufunc__,
as NumPy's own ufuncs do (py_override.c). No GPU: the hand-over comes before any GPU work."""
import numpy as np
import pytest

from cufunc import guvectorize, vectorize


@vectorize(["float32(float32, float32)", "float64(float64, float64)"], target="cuda")
def hyp(x, y):
    return (x * x + y * y) ** 0.5


@guvectorize(["void(float32[:], float32[:], float32[:])"], "(n),(n)->()", target="cuda")
def dot(a, b, out):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * b[i]
    out[0] = s


class Toy:
    """Records what it is handed."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return ("Toy", ufunc, method, inputs, kwargs)


class SubToy(Toy):
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return ("SubToy", ufunc, method, inputs, kwargs)


class Declines:
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return NotImplemented


class OptedOut:
    __array_ufunc__ = None


class NdSub(np.ndarray):
    """An ndarray subclass with ndarray's own __array_ufunc__: not an override."""


T = Toy()
A = np.ones(3, np.float32)


@pytest.mark.parametrize("call, method, inputs, kwargs", [
    (lambda: hyp(T, 1.0), "__call__", (T, 1.0), {}),
    (lambda: hyp(A, T), "__call__", (A, T), {}),
    (lambda: hyp(1.0, 2.0, T), "__call__", (1.0, 2.0), {"out": (T,)}),
    (lambda: hyp(A, A, out=T), "__call__", (A, A), {"out": (T,)}),
    (lambda: hyp(A, A, out=(T,)), "__call__", (A, A), {"out": (T,)}),
    (lambda: hyp(T, A, out=None, dtype=np.float32), "__call__", (T, A), {"dtype": np.float32}),
    (lambda: hyp(A, A, where=T), "__call__", (A, A), {"where": T}),
    (lambda: hyp.outer(T, A), "outer", (T, A), {}),
    (lambda: hyp.reduce(T), "reduce", (T,), {}),
    (lambda: hyp.reduce(T, 1, None, None, True), "reduce", (T,),
     {"axis": 1, "dtype": None, "keepdims": True}),
    (lambda: hyp.reduce(A, 0, None, T), "reduce", (A,), {"axis": 0, "dtype": None, "out": (T,)}),
    (lambda: hyp.reduce(T, axis=(0, 1), initial=2.0, stream=None), "reduce", (T,),
     {"axis": (0, 1), "initial": 2.0, "stream": None}),
    (lambda: hyp.accumulate(T, axis=1, out=(None,)), "accumulate", (T,), {"axis": 1}),
    (lambda: hyp.accumulate(A, 0, None, T), "accumulate", (A,),
     {"axis": 0, "dtype": None, "out": (T,)}),
    (lambda: dot(T, A), "__call__", (T, A), {}),
    (lambda: dot(A, A, T, axes=[(0,), (0,), ()]), "__call__", (A, A),
     {"out": (T,), "axes": [(0,), (0,), ()]}),
])
def test_handed_over_in_numpys_form(call, method, inputs, kwargs):
    who, ufunc, m, ins, kw = call()
    assert who == "Toy"
    assert m == method
    assert ufunc in (hyp, dot)
    assert len(ins) == len(inputs) and all(a is b for a, b in zip(ins, inputs))
    assert kw.keys() == kwargs.keys()
    for k in kwargs:
        if k == "out":
            assert all(a is b for a, b in zip(kw[k], kwargs[k]))
        else:
            assert kw[k] == kwargs[k] or kw[k] is kwargs[k]


def test_same_form_as_numpy():
    """What np.add hands over is what hyp hands over (method, inputs, keywords)."""
    for args, kw in [((T, 1.0), {}), ((A, A, T), {}), ((A, T), {"out": T}),
                     ((T, A), {"out": None})]:
        _, _, m1, i1, k1 = np.add(*args, **kw)
        _, _, m2, i2, k2 = hyp(*args, **kw)
        assert (m1, len(i1), sorted(k1)) == (m2, len(i2), sorted(k2))
    _, _, m1, i1, k1 = np.add.reduce(T, 0, None, None, True)
    _, _, m2, i2, k2 = hyp.reduce(T, 0, None, None, True)
    assert (m1, k1) == (m2, k2)


def test_subclass_before_superclass_then_left_to_right():
    assert hyp(T, SubToy())[0] == "SubToy"
    assert hyp(SubToy(), T)[0] == "SubToy"
    assert hyp(Declines(), T)[0] == "Toy"   # NotImplemented: the next one


def test_all_declined_is_numpys_type_error():
    with pytest.raises(TypeError) as ours:
        hyp(Declines(), 1.0)
    with pytest.raises(TypeError) as numpys:
        np.add(Declines(), 1.0)
    assert "all returned NotImplemented from __array_ufunc__" in str(ours.value)
    assert str(ours.value).split(": ")[-1] == str(numpys.value).split(": ")[-1]  # the type list


def test_opted_out_operand():
    with pytest.raises(TypeError, match=r"operand 'OptedOut' does not support ufuncs "
                                        r"\(__array_ufunc__=None\)"):
        hyp(A, OptedOut())
    with pytest.raises(TypeError, match="does not support ufuncs"):
        hyp.reduce(OptedOut())


def test_override_error_propagates():
    class Boom:
        def __array_ufunc__(self, *a, **k):
            raise KeyError("boom")
    with pytest.raises(KeyError, match="boom"):
        hyp(Boom(), 1.0)


def test_type_mutated_later_is_seen():
    """The cache of plain types follows changes to the type (its version tag)."""
    class Late:
        pass
    with pytest.raises(Exception) as e:     # not an override: cufunc takes it (and refuses it)
        hyp(Late(), 1.0)
    assert not isinstance(e.value, AssertionError)
    Late.__array_ufunc__ = lambda self, *a, **k: "late"
    assert hyp(Late(), 1.0) == "late"


def test_ndarray_subclass_and_cuda_arrays_are_not_overrides():
    class FakeCupy:  # a device array type with its own __array_ufunc__: computed on by cufunc
        __cuda_array_interface__ = property(lambda self: {"shape": (1,), "typestr": "<f4",
                                                          "data": (0, False), "version": 3})

        def __array_ufunc__(self, *a, **k):
            return "handed over"
    with pytest.raises(Exception) as e:
        hyp(FakeCupy(), FakeCupy())
    assert e.value.args != ("handed over",)
    nd = np.ones(2, np.float32).view(NdSub)
    try:
        got = hyp(nd, nd)                     # cufunc computes: with a GPU, the answer
    except Exception as exc:                  # without one, cufunc's own "needs a GPU" error
        assert not isinstance(exc, TypeError) or "NotImplemented" not in str(exc)
    else:
        np.testing.assert_allclose(np.asarray(got), np.hypot(np.asarray(nd), np.asarray(nd)))


@pytest.mark.parametrize("f, attrs", [
    (hyp, {"nin": 2, "nout": 1, "nargs": 3, "ntypes": 2, "types": ["ff->f", "dd->d"],
           "identity": None, "signature": None, "__name__": "hyp"}),
    (dot, {"nin": 2, "nout": 1, "nargs": 3, "ntypes": 1, "types": ["ff->f"],
           "identity": None, "signature": "(n),(n)->()", "__name__": "dot"}),
])
def test_ufunc_like_attributes(f, attrs):
    ref = np.add if f is hyp else np.vecdot if hasattr(np, "vecdot") else None
    for name, value in attrs.items():
        assert getattr(f, name) == value, name
        if ref is not None:
            assert type(getattr(ref, name)) in (type(value), type(None), int) or value is None
    assert isinstance(f.__doc__, (str, type(None)))


@pytest.mark.parametrize("call", [
    lambda: hyp(np.empty(0, np.float32), np.empty(0, np.float32)),
    lambda: hyp(np.empty((0, 3), np.float64), 1.0),
    lambda: hyp.outer(np.empty(0, np.float32), np.empty(2, np.float32)),
    lambda: hyp.accumulate(np.empty((0, 3), np.float32)),
    lambda: hyp.reduce(np.empty((2, 0), np.float32), axis=0),
    lambda: dot(np.empty((0, 3), np.float32), np.empty((0, 3), np.float32)),
])
def test_empty_host_calls_need_no_gpu(call):
    """Dask infers result types by calling on zero-size arrays: answered without the device."""
    r = call()
    assert isinstance(r, np.ndarray) and r.size == 0 and r.dtype in (np.float32, np.float64)


def test_empty_call_result_types():
    assert hyp(np.empty(0, np.float32), 2.0).dtype == np.float32       # NEP 50: weak scalar
    assert hyp(np.empty(0, np.float32), np.empty(0, np.float64)).dtype == np.float64
    assert hyp.outer(np.empty(2, np.float32), np.empty(0, np.float32)).shape == (2, 0)
    out = np.empty(0, np.float32)
    assert hyp(np.empty(0, np.float32), 1.0, out=out) is out


def test_stream_positional_and_malformed_calls():
    """cufunc's reduce takes stream= as its 8th positional argument: handed over as a keyword.
    A malformed call is reported by the entry itself, override or not."""
    r = hyp.reduce(T, 0, None, None, False, 1.0, True, None)
    assert r[4] == {"axis": 0, "dtype": None, "keepdims": False, "initial": 1.0, "where": True,
                    "stream": None}
    with pytest.raises(TypeError):
        hyp.reduce(T, 0, None, None, False, 1.0, True, None, 9)
    with pytest.raises(TypeError):
        hyp.reduce(T, 0, axis=1)
    with pytest.raises(TypeError):
        hyp(A, A, T, out=T)
