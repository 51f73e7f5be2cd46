"""One loop resolver: the Python package asks the C one (include/cufunc/loops.h through
cufunc._core, numpy_ext/py_loops.c) and keeps no rule of its own; the order of dtype kinds has
one home (src/dtype.c's cf_dtype_kind_order); reduce accumulators are a property of the ufunc
(UFunc.accumulator), not of its name.

The rule itself is checked against NumPy and against the host call in
test_lang_ufunc_calls.py and test_numba_call_rules.py, and in C by tests/c/test_loops.c."""
import os
import re

import numpy as np
import pytest

from cufunc import _core, _loops, cuda, vectorize

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

L = [tuple(np.dtype(c) for c in t) for t in ("iii", "lll", "fff", "ddd", "FFF")]


def test_python_resolver_is_the_c_one():
    # _loops.find / nep50 / no_match_message answer what the C functions answer
    assert _loops.find(L, 2, ["b", "b"]) == _core._loops_find(L, 2, ["b", "b"]) == 0
    assert _loops.find(L, 2, ["b", "b"], passes=1) == -1          # lazy: compile one
    assert _loops.find(L, 2, ["f", "d"], [False, True]) == 2      # NEP 50: float32 loop
    assert _loops.find(L, 2, ["b", "b"], [True, True], rule="numba-ufunc") == -2
    assert _loops.find(L, 2, ["d", "l"], rule="numba-gufunc") == 0
    assert _loops.nep50(["b", "d"], [False, True]) == (False, False)
    assert _loops.nep50(["f", "D"], [False, True]) == (False, True)
    msg = _loops.no_match_message("ufunc", "f", L[:1], 2, 1, ["D", "d"], [False, True])
    assert msg == ("ufunc 'f' not supported for the input types (complex128, Python float64), "
                   "and the inputs could not be safely coerced to any supported types according "
                   "to the casting rule 'safe'; its loops are: (int32, int32) -> (int32)")
    # the scalar-cast fallback (py_gufunc.c's numba_scalar_cast) is the C rule too
    assert _loops.gufunc_scalar_fallback(L, 2, ["f", "d"], [False, False]) == (
        np.dtype("f"), np.dtype("f"))
    assert _loops.gufunc_scalar_fallback(L, 2, ["d", "d"], [True, True]) is None
    with pytest.raises(ValueError, match="rule must be one of"):
        _core._loops_find(L, 2, ["b", "b"], None, False, "cupy")


def test_the_package_keeps_no_rule_of_its_own():
    # _loops.py asks the extension; no safe-cast test or kind table of its own
    src = open(os.path.join(ROOT, "numpy_ext", "cufunc", "_loops.py")).read()
    assert "can_cast" not in src and "_KIND_ORDER" not in src and "_core()._loops_find" in src


_KIND_TABLE = [
    re.compile(r"""["']b["']\s*:\s*0\s*,\s*["']u["']\s*:\s*1"""),   # {"b": 0, "u": 1, ...}
    re.compile(r"""case\s+'b'\s*:\s*return\s+0\s*;"""),              # switch on the kind char
]


def test_kind_order_has_one_home():
    """The order of dtype kinds (bool < unsigned < signed < float < complex, and NEP 50's with
    the integers one kind) is written only in src/dtype.c; everything else derives from it
    (cf_dtype_nep50_kind, cf_weak_reaches, cf_loops_*) or asks NumPy (lang/typesys.py)."""
    homes = []
    for top in ("src", "numpy_ext", "include"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".c", ".h", ".py")):
                    path = os.path.join(dirpath, f)
                    text = open(path, encoding="utf-8").read()
                    if any(p.search(text) for p in _KIND_TABLE):
                        homes.append(os.path.relpath(path, ROOT))
    assert homes == [os.path.join("src", "dtype.c")], homes


def test_accumulator_is_a_property_not_a_name():
    @vectorize(["int8(int8, int8)", "int64(int64, int64)"])
    def add(a, b):
        return a + b
    assert add.accumulator == "loop"        # named add, but a ufunc of its own
    add.accumulator = "widen"
    assert add.accumulator == "widen"
    with pytest.raises(ValueError, match="accumulator must be"):
        add.accumulator = "sum"
    with pytest.raises(ValueError, match="accumulator must be"):
        _core.UFunc("f", 2, 1, accumulator="int64")
    assert _core.UFunc("f", 2, 1, accumulator="logical").accumulator == "logical"
    from cufunc import _twins
    assert _twins.twin(np.add).accumulator == "widen"
    assert _twins.twin(np.multiply).accumulator == "widen"
    assert _twins.twin(np.logical_or).accumulator == "logical"
    assert _twins.twin(np.maximum).accumulator == "loop"


@pytest.mark.gpu
def test_accumulator_decides_the_reduction_dtype():
    x = np.arange(-60, 60, dtype=np.int8)

    @vectorize(["int8(int8, int8)", "int64(int64, int64)"])
    def add(a, b):
        return a + b

    @vectorize(["int8(int8, int8)", "int64(int64, int64)"])
    def plus(a, b):
        return a + b
    plus.accumulator = "widen"
    d = cuda.to_device(x)
    r = add.reduce(d)                      # its int8 loop: the name does not widen
    r = np.asarray(r.copy_to_host() if hasattr(r, "copy_to_host") else r)
    assert r.dtype == np.int8 and int(r) == int(x.sum(dtype=np.int8))
    r = plus.reduce(d)                     # NumPy's add rule, by property
    r = np.asarray(r.copy_to_host() if hasattr(r, "copy_to_host") else r)
    assert r.dtype == np.int64 and int(r) == int(np.add.reduce(x))
    a = plus.accumulate(d)
    assert a.dtype == np.int64
    np.testing.assert_array_equal(a.copy_to_host(), np.add.accumulate(x))
    # the twin of np.add, through NumPy's own call
    t = np.add.reduce(d)
    t = np.asarray(t.copy_to_host() if hasattr(t, "copy_to_host") else t)
    assert t.dtype == np.int64 and int(t) == int(np.add.reduce(x))


def test_pickle_keeps_the_accumulator():
    """A ufunc sent by value (cloudpickle, as Dask ships a graph to its workers) is rebuilt with
    the accumulator set on it after construction, so a worker's reduce widens as the sender's."""
    cloudpickle = pytest.importorskip("cloudpickle")

    def make():
        @vectorize(["int8(int8, int8)"])
        def add(a, b):
            return a + b
        return add
    add = make()
    add.accumulator = "widen"
    back = cloudpickle.loads(cloudpickle.dumps(add))
    assert back is not add and back.accumulator == "widen"
    plain = make()
    assert cloudpickle.loads(cloudpickle.dumps(plain)).accumulator == "loop"
