"""The corpus of real Numba GPU-ufunc programs (tests/numba_corpus): every program that Numba runs
also runs under cufunc.numba, with Numba's results.

CPU side: each program is well formed (parses, declares its source, license and tolerances with
reasons, imports numba by Numba's own import lines); the runner's comparison is tested on cases
that must fail; with Numba installed, every program runs on Numba's CPU target behind the GPU
ufunc API (tests/numba_corpus/cpu_numba.py), which checks the programs' typing and calls.
GPU side (marked gpu): each program runs once under numba-cuda and once under cufunc.numba, each
in a fresh process, and the results are compared by the runner's rules.
"""

import importlib.util
import os
import re

import numpy as np
import pytest

from conftest import REQUIRE_GPU

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "numba_corpus")


def _load_runner():
    spec = importlib.util.spec_from_file_location(
        "numba_corpus_runner", os.path.join(CORPUS, "run_corpus.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


runner = _load_runner()
PROGRAMS = runner.program_paths()
IDS = [os.path.basename(p)[:-3] for p in PROGRAMS]

# Programs where numba-cuda's own answer is wrong or numba-cuda does not run, measured on an H100
# against numba-cuda 0.30 (2026-11-27; tests/numba_corpus/README.md, "Known gaps", has each
# cause). A strict xfail: when an entry stops failing the test reports XPASS as a failure, and
# the entry must go.
KNOWN_GAPS = {
    "15_camera_calibrate": "numba-cuda's answer is wrong here: a uint16(uint8, uint16, uint8) "
                           "ufunc with 2-d operands broadcast over a 3-d stack differs from "
                           "NumPy's arithmetic in 24,570 of 24,576 elements (4x64x96), "
                           "cufunc.numba's in none; on 2-d calls numba-cuda agrees",
    "16_camera_calibrate_device_fn": "as 15 (numba-cuda's 3-d broadcast)",
    "30_pisa_two_nu_osc": "numba-cuda 0.30 itself fails on the program (KeyError: <ufunc "
                          "'sqrt'>: np.sqrt in a device function)",
}


# ---- the programs are well formed ----------------------------------------------------------------

def test_corpus_has_at_least_twenty_programs():
    assert len(PROGRAMS) >= 20, IDS


@pytest.mark.parametrize("path", PROGRAMS, ids=IDS)
def test_program_is_well_formed(path):
    info = runner.program_info(path)
    assert info["source"].strip(), "SOURCE names the public program this one follows"
    assert info["license"].strip(), "LICENSE (or 'not stated' / 'unknown')"
    assert info["domain"].strip()
    assert {"setup", "run"} <= info["functions"]
    assert runner.check_tolerance_spec(info["tolerance"]) == []
    assert set(info["uses"]) & {"vectorize", "guvectorize", "cuda.reduce"}, info["uses"]
    with open(path) as f:
        text = f.read()
    # The program text is the one written for Numba: the runner, not the program, picks the
    # library behind `numba`.
    assert re.search(r"^(import numba\b|from numba import )", text, re.M)
    assert "cufunc" not in text
    # Something in it runs on the GPU: a CUDA target (given directly or through a variable, as
    # some programs do) or a cuda.reduce.
    assert re.search(r"""\b_?(target|TARGET)\s*=\s*['"]cuda['"]|cuda\.[Rr]educe""", text)


def test_api_uses_are_read_from_code_not_comments():
    assert runner.api_uses("# cuda.to_device(x) in a comment\nf = vectorize(['f4(f4)'])") == \
        ["vectorize"]
    assert runner.api_uses("@guvectorize([], '(n)->()')\ny = g(x, out=o, stream=s)") == \
        ["guvectorize", "out="]


@pytest.mark.parametrize("spec, problem", [
    ({"x": {"ulp": 1}}, "no reason"),
    ({"x": {"ulp": 1, "rtol": 1e-6, "reason": "r"}}, "either ulp or rtol/atol"),
    ({"x": {"reason": "r"}}, "either ulp or rtol/atol"),
    ({"x": {"ulp": 1, "reason": "r", "abs": 2}}, "unknown keys"),
    ({"x": 3}, "not a dict"),
])
def test_tolerance_spec_rejects(spec, problem):
    problems = runner.check_tolerance_spec(spec)
    assert problems and problem in problems[0]


# ---- the comparison ------------------------------------------------------------------------------

def _next_up(x, n=1):
    x = np.asarray(x)
    for _ in range(n):
        x = np.nextafter(x, np.asarray(np.inf, dtype=x.dtype))
    return x


def test_identical_floats_are_bit_for_bit():
    a = np.linspace(-3, 3, 101, dtype=np.float32)
    findings = runner.compare_results({"r": a}, {"r": a.copy()})
    assert findings == [("r", True, "bitwise")]
    assert runner.summarize(findings) == "bit for bit"


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_one_ulp_fails_without_a_tolerance(dtype):
    a = np.linspace(1, 2, 7).astype(dtype)
    b = a.copy()
    b[3] = _next_up(a[3])
    ok, how = runner.compare_value("r", a, b, {})
    assert not ok and "1 of 7 values differ, max 1 ulp" in how


def test_ulp_tolerance_admits_its_bound_and_not_more():
    a = np.array([1.0, -1.0, 1e-300, 0.0], dtype=np.float64)
    one = np.array([_next_up(v) for v in a])
    two = np.array([_next_up(v, 2) for v in a])
    tol = {"r": {"ulp": 1, "reason": "test"}}
    assert runner.compare_value("r", a, one, tol)[0]
    ok, how = runner.compare_value("r", a, two, tol)
    assert not ok and "EXCEEDED" in how


def test_ulp_distance_counts_across_zero():
    tiny = np.array([np.finfo(np.float32).smallest_subnormal], dtype=np.float32)
    assert runner.ulp_distance(-tiny, tiny)[0] == 2
    assert runner.ulp_distance(np.float32([0.0]), np.float32([-0.0]))[0] == 0


def test_star_tolerance_applies_to_every_result_unless_named():
    a = np.ones(4, dtype=np.float32)
    b = _next_up(a, 2)
    tol = {"*": {"ulp": 2, "reason": "all"}, "strict": {"ulp": 1, "reason": "one"}}
    assert runner.compare_value("other", a, b, tol)[0]
    assert not runner.compare_value("strict", a, b, tol)[0]


def test_rtol_tolerance():
    a = np.array([1.0, 100.0])
    tol = {"r": {"rtol": 1e-6, "reason": "order"}}
    assert runner.compare_value("r", a, a * (1 + 1e-7), tol)[0]
    assert not runner.compare_value("r", a, a * (1 + 1e-5), tol)[0]


@pytest.mark.parametrize("ref, got, word", [
    (np.float32([1, 2]), np.float64([1, 2]), "dtype"),
    (np.float64(3.0), np.float64([3.0]), "shape"),
    (np.int16([1, 2, 3]), np.int16([1, 2, 4]), "1 of 3 values differ"),
    (np.uint8([255]), np.uint8([254]), "values differ"),
    (np.bool_([True]), np.bool_([False]), "values differ"),
    (np.float32([np.nan, 1]), np.float32([1, 1]), "NaN against a number"),
    (np.float64([0.0]), np.float64([-0.0]), "signs of zeros"),
    (np.complex64([1 + 1j]), np.complex64([1 + np.nextafter(np.float32(1), np.float32(2)) * 1j]),
     "max 1 ulp"),
])
def test_differences_fail(ref, got, word):
    ok, how = runner.compare_value("r", ref, got, {})
    assert not ok and word in how, how


def test_nan_against_a_number_fails_even_with_a_tolerance():
    ok, how = runner.compare_value("r", np.float64([np.nan]), np.float64([0.0]),
                                   {"r": {"rtol": 1.0, "reason": "loose"}})
    assert not ok and "NaN" in how


def test_nan_against_nan_agrees():
    a = np.float64([np.nan, 2.0])
    assert runner.compare_value("r", a, a.copy(), {}) == (True, "bitwise")


def test_missing_and_extra_results_fail():
    findings = runner.compare_results({"a": np.int64(1), "b": np.int64(2)},
                                      {"a": np.int64(1), "c": np.int64(3)})
    assert findings == [("a", True, "exact"), ("b", False, "missing"),
                        ("c", False, "not produced by Numba")]
    assert runner.summarize(findings) == "DIFFERENT"


def test_summary_names_tolerated_results():
    a = np.float32([1, 2])
    findings = runner.compare_results({"x": a}, {"x": _next_up(a)},
                                      {"x": {"ulp": 1, "reason": "r"}})
    assert findings[0][1] and runner.summarize(findings) == "within tolerance"


# ---- the runner's timing ----------------------------------------------------------------------------

STEADY_PROGRAM = """
CALLS = []
def setup():
    return {"n": 3}
def run(d):
    CALLS.append(1)
    return {"x": d["n"]}
"""


@pytest.mark.parametrize("repeat, budget_s, expected", [
    (10, 0.0, "min"),     # no budget: still the minimum number of calls
    (3, 0.0, 3),          # --repeat caps it
    (7, 60.0, 7),         # budget to spare: --repeat calls
])
def test_steady_call_is_the_median_of_enough_calls(tmp_path, repeat, budget_s, expected):
    path = tmp_path / "99_steady.py"
    path.write_text(STEADY_PROGRAM)
    record = runner.run_one(str(path), 9999, repeat, budget_s)
    assert record["stage"] == "done", record.get("traceback")
    want = runner.MIN_STEADY_RUNS if expected == "min" else expected
    assert record["steady_runs"] == want
    assert runner.MIN_STEADY_RUNS >= 5


# ---- the programs run (CPU: Numba's CPU target; GPU: numba-cuda against cufunc.numba) -------------

def test_programs_run_on_numbas_cpu_target():
    pytest.importorskip("numba", reason="Numba is the reference this check runs the programs on")
    env = dict(os.environ, CORPUS_SCALE="0.002")
    runs = runner.run_mode("numba-cpu", PROGRAMS, repeat=1, budget_s=0.0, timeout_s=900,
                           env=env, one_process=True)
    failed = {name: rec["error"] for name, rec in runs.items() if rec.get("error")}
    assert not failed
    assert sorted(runs) == sorted(IDS)


def test_loop_types_are_numbas():
    """Every ufunc and gufunc of the corpus gets Numba's loop types under cufunc.numba (the
    result dtypes of Numba's typing: no GPU needed, both compile listed signatures when the
    decorator runs), against Numba's CPU target, which shares numba-cuda's type inference."""
    pytest.importorskip("numba", reason="Numba is the reference of the loop types")
    pytest.importorskip("cufunc.numba", reason="this build has no cufunc.numba, whose loop types "
                        "the check compares")
    rows = runner.compare_loop_types(PROGRAMS)
    assert [r for r in rows if not r[1]] == []
    assert len(rows) == len(PROGRAMS)


def _require_numba_cuda():
    try:
        if not hasattr(np, "row_stack"):
            np.row_stack = np.vstack
        import numba.cuda  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - the reason is the skip's message
        if REQUIRE_GPU:
            pytest.fail("CUFUNC_REQUIRE_GPU=1 but numba-cuda (the reference) is not importable: "
                        "%s" % exc, pytrace=False)
        pytest.skip("needs numba-cuda as the reference: %s" % exc)


@pytest.mark.gpu
@pytest.mark.parametrize("path", [
    pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[i]))
    if i in KNOWN_GAPS else p for p, i in zip(PROGRAMS, IDS)], ids=IDS)
def test_program_gives_numbas_results_under_cufunc_numba(path):
    _require_numba_cuda()
    name = os.path.basename(path)[:-3]
    ref = runner.run_mode("numba", [path], repeat=1, budget_s=0.0)[name]
    if ref.get("error"):
        pytest.fail("Numba itself fails on the program: %s" % ref["error"], pytrace=False)
    got = runner.run_mode("cufunc", [path], repeat=1, budget_s=0.0)[name]
    assert not got.get("error"), "%s\n%s" % (got.get("error"), got.get("traceback", ""))
    info = runner.program_info(path)
    findings = runner.compare_results(ref["results"], got["results"], info["tolerance"])
    bad = [(k, how) for k, ok, how in findings if not ok]
    assert not bad
