"""Run the corpus of real Numba GPU-ufunc programs under Numba and under cufunc.numba, and compare.

Every program in programs/ keeps Numba's own import lines (``import numba``, ``from numba import
vectorize, cuda``). It runs in a fresh subprocess per mode, where ``numba`` is bound to:

  numba      the real Numba with numba-cuda (the reference);
  cufunc     cufunc.numba, installed in sys.modules as ``numba`` (and its submodules as
             ``numba.<name>``), so the program text is the one written for Numba;
  numba-cpu  tests/numba_corpus/cpu_numba.py: Numba's CPU target behind the GPU ufunc API, to
             check the programs (their typing and call flow) on a machine without a GPU.

A program defines setup() -> dict of host inputs (synthetic, seeded) and run(data) -> dict of
named results (NumPy arrays or scalars). The worker times the program's definitions (Numba
compiles signatures eagerly) plus the first run() as "compile + first call", then the median of
repeated run() calls as the steady state; setup() and the library import are timed apart.

Results are compared name by name: the same dtype and shape, integers exactly, floating-point
values bit for bit unless the program's TOLERANCE names the result (or "*") with a stated reason:
{"ulp": n} (at most n units in the last place apart) or {"rtol": r, "atol": a}.

Usage:
  python run_corpus.py                      # both modes, all programs, print the table
  python run_corpus.py --json out.json --write-readme
  python run_corpus.py --mode numba-cpu     # the CPU check (no comparison)
  python run_corpus.py --programs 02,14
"""

import argparse
import ast
import importlib.util
import json
import math
import os
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(HERE, "programs")
README = os.path.join(HERE, "README.md")
MODES = ("numba", "cufunc", "numba-cpu")
TABLE_START = "<!-- corpus-table:start -->"
TABLE_END = "<!-- corpus-table:end -->"


# ---- the programs -------------------------------------------------------------------------------

def program_paths(selection=None, folder=PROGRAMS):
    """The corpus programs (NN_name.py), optionally only those whose number or name is listed."""
    names = sorted(n for n in os.listdir(folder) if re.match(r"\d\d_\w+\.py$", n))
    if selection:
        wanted = [s.strip() for s in selection.split(",") if s.strip()]
        names = [n for n in names if any(n.startswith(w) or n[:-3] == w for w in wanted)]
    return [os.path.join(folder, n) for n in names]


def program_info(path):
    """The program's declared metadata and the API it uses, read from its source (no import)."""
    with open(path) as f:
        source = f.read()
    tree = ast.parse(source, filename=path)
    consts = {}
    functions = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("SOURCE", "LICENSE", "DOMAIN", "TOLERANCE"):
                consts[name] = ast.literal_eval(node.value)
        elif isinstance(node, ast.FunctionDef):
            functions.add(node.name)
    return {
        "name": os.path.basename(path)[:-3],
        "source": consts.get("SOURCE", ""),
        "license": consts.get("LICENSE", ""),
        "domain": consts.get("DOMAIN", ""),
        "tolerance": consts.get("TOLERANCE", {}),
        "functions": functions,
        "uses": api_uses(source),
    }


_USES = [
    ("guvectorize", r"\bguvectorize\s*\("),
    ("vectorize", r"(?<!gu)\bvectorize\s*\("),
    ("cuda.reduce", r"cuda\.[Rr]educe\b"),
    ("device fn", r"device\s*=\s*True"),
    ("to_device", r"\bto_device\s*\("),
    ("device_array", r"\bdevice_array(_like)?\s*\("),
    ("out=", r"\bout\s*=\s*[A-Za-z_]"),
    ("stream", r"\bcuda\.stream\s*\("),
    ("pinned", r"\bcuda\.pinned\s*\("),
]


def api_uses(source):
    code = "\n".join(line.split("#", 1)[0] for line in source.splitlines())
    return [label for label, pattern in _USES if re.search(pattern, code)]


def check_tolerance_spec(spec):
    """Problems with a TOLERANCE literal (empty when it is well formed)."""
    problems = []
    if not isinstance(spec, dict):
        return ["TOLERANCE is not a dict"]
    for key, entry in spec.items():
        if not isinstance(entry, dict):
            problems.append("%s: not a dict" % key)
            continue
        if not str(entry.get("reason", "")).strip():
            problems.append("%s: no reason" % key)
        has_ulp = "ulp" in entry
        has_rel = "rtol" in entry or "atol" in entry
        if has_ulp == has_rel:
            problems.append("%s: give either ulp or rtol/atol" % key)
        unknown = set(entry) - {"ulp", "rtol", "atol", "reason"}
        if unknown:
            problems.append("%s: unknown keys %s" % (key, sorted(unknown)))
    return problems


# ---- comparing results --------------------------------------------------------------------------

def _contiguous(a):
    # Not np.ascontiguousarray: it turns a 0-d result into shape (1,).
    return a if a.flags.c_contiguous else a.copy(order="C")


def _ordered_bits(a):
    """Floats mapped to integers that order like the floats (adjacent floats differ by 1)."""
    kind = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    i = a.view(kind).astype(np.int64)
    magnitude = i & np.int64((1 << (8 * a.dtype.itemsize - 1)) - 1)
    return np.where(i < 0, -magnitude, i)


def _same_bits(a, b):
    """Element-wise: identical bits, or both NaN (NaN payloads are not compared)."""
    kind = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    a, b = _contiguous(a), _contiguous(b)
    return (a.view(kind) == b.view(kind)) | (np.isnan(a) & np.isnan(b))


def ulp_distance(a, b):
    """Units in the last place between equal-dtype real float arrays (float64 counts; NaN pairs
    count 0, a NaN against a number counts inf)."""
    a, b = _contiguous(a), _contiguous(b)
    oa, ob = _ordered_bits(a), _ordered_bits(b)
    # In integers: float64 cannot hold the ordered bits of float64 values exactly. Opposite signs
    # add magnitudes (in uint64, which holds their sum); the same sign subtracts.
    same_sign = (oa < 0) == (ob < 0)
    with np.errstate(over="ignore"):
        apart = np.abs(oa).astype(np.uint64) + np.abs(ob).astype(np.uint64)
        near = np.abs(np.where(same_sign, oa - ob, 0)).astype(np.uint64)
    dist = np.where(same_sign, near, apart).astype(np.float64)
    na, nb = np.isnan(a), np.isnan(b)
    dist = np.where(na & nb, 0.0, dist)
    dist = np.where(na ^ nb, np.inf, dist)
    return dist


def _components(x):
    return (x.real, x.imag) if np.iscomplexobj(x) else (x,)


def compare_value(key, ref, got, tolerance):
    """(ok, how): how the result `got` compares with the reference `ref`."""
    ref = np.asarray(ref)
    got = np.asarray(got)
    if ref.dtype != got.dtype:
        return False, "dtype %s, Numba %s" % (got.dtype, ref.dtype)
    if ref.shape != got.shape:
        return False, "shape %s, Numba %s" % (got.shape, ref.shape)
    if ref.dtype.kind not in "fc":
        if np.array_equal(ref, got):
            return True, "exact"
        bad = int(np.count_nonzero(ref != got))
        return False, "%d of %d values differ" % (bad, ref.size)
    if ref.size == 0:
        return True, "bitwise"
    same = np.ones(ref.shape, dtype=bool)
    dist = np.zeros(ref.shape)
    for r, g in zip(_components(ref), _components(got)):
        same &= _same_bits(r, g)
        dist = np.maximum(dist, ulp_distance(r, g))
    if same.all():
        return True, "bitwise"
    worst = float(dist.max())
    differing = int(np.count_nonzero(~same))
    spec = tolerance.get(key, tolerance.get("*"))
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN: relmax is NaN, said below
        def wide(a):
            return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
        diff = np.abs(wide(got) - wide(ref))
        scale = np.abs(wide(ref))
        relmax = float(np.nanmax(np.where(scale > 0, diff / np.where(scale > 0, scale, 1), diff)))
        absmax = float(np.nanmax(diff))
    detail = "%d of %d values differ, max %s ulp, max rel %.3g, max abs %.3g" % (
        differing, ref.size, "inf" if math.isinf(worst) else "%d" % worst, relmax, absmax)
    if math.isinf(worst):
        return False, detail + " (NaN against a number)"
    if worst == 0:
        detail += " (only the signs of zeros differ)"
    if spec is None:
        return False, detail + " (no tolerance stated: bit for bit expected)"
    if "ulp" in spec:
        ok = worst <= spec["ulp"]
    else:
        ok = bool(np.allclose(got, ref, rtol=spec.get("rtol", 0.0), atol=spec.get("atol", 0.0),
                              equal_nan=True))
    limit = ("<= %s ulp" % spec["ulp"]) if "ulp" in spec else \
        "rtol %g atol %g" % (spec.get("rtol", 0.0), spec.get("atol", 0.0))
    return ok, "%s; tolerance %s: %s (%s)" % (detail, limit, "within" if ok else "EXCEEDED",
                                              spec.get("reason", ""))


def compare_results(ref, got, tolerance=None):
    """[(key, ok, how)] for every result name of either side."""
    tolerance = tolerance or {}
    findings = []
    for key in sorted(set(ref) | set(got)):
        if key not in got:
            findings.append((key, False, "missing"))
        elif key not in ref:
            findings.append((key, False, "not produced by Numba"))
        else:
            ok, how = compare_value(key, ref[key], got[key], tolerance)
            findings.append((key, ok, how))
    return findings


def summarize(findings):
    """'bitwise' | 'exact' | 'within tolerance' | 'DIFFERENT' for a list of findings."""
    if not findings:
        return "no results"
    if not all(ok for _, ok, _ in findings):
        return "DIFFERENT"
    if all(how in ("bitwise", "exact") for _, _, how in findings):
        return "bit for bit"
    return "within tolerance"


# ---- the worker (one program, one mode, fresh process) ------------------------------------------

def _bind_numba(mode):
    """Import the library the programs will see as `numba`; returns its description."""
    if mode == "numba":
        if not hasattr(np, "row_stack"):
            # numba-cuda 0.30 still calls np.row_stack, which NumPy 2.4 removed.
            np.row_stack = np.vstack
        import numba
        import numba.cuda  # noqa: F401
        return "numba %s" % numba.__version__
    if mode == "cufunc":
        import cufunc
        import cufunc.numba as target
        _alias("numba", target)
        return "cufunc %s" % getattr(cufunc, "__version__", "?")
    if mode == "numba-cpu":
        sys.path.insert(0, HERE)
        import cpu_numba
        import numba
        _alias("numba", cpu_numba)
        return "numba %s (CPU target)" % numba.__version__
    raise ValueError("unknown mode %r" % mode)


def _alias(name, module):
    """Make `import numba`, `import numba.cuda`, `from numba.types import ...` reach `module`."""
    sys.modules[name] = module
    prefix = module.__name__ + "."
    for full, sub in list(sys.modules.items()):
        if full.startswith(prefix) and sub is not None:
            sys.modules[name + "." + full[len(prefix):]] = sub
    for attr in ("cuda", "types", "typing", "core", "np"):
        sub = getattr(module, attr, None)
        if sub is not None and (name + "." + attr) not in sys.modules:
            sys.modules[name + "." + attr] = sub


def _host_result(value):
    if hasattr(value, "copy_to_host"):
        raise TypeError("run() returned a device array (%s); programs return host values"
                        % type(value).__name__)
    return np.asarray(value)


def _load_program(path, index):
    sys.path.insert(0, PROGRAMS)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    name = "corpus_program_%d" % index
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# The fewest steady calls a median is taken of, whatever the budget. A program whose call is mostly
# its own host work varies from call to call with the host's memory: 14_rolling_row_sum's copy of a
# 160 MB strided view took 77 to 120 ms within one process (H200), so three calls were too few.
MIN_STEADY_RUNS = 5


def run_one(path, index, repeat, budget_s):
    """Run one program in this process: its results and timings (or the failure)."""
    record = {"program": os.path.basename(path)[:-3], "stage": "define"}
    try:
        t0 = time.perf_counter()
        module = _load_program(path, index)
        t_define = time.perf_counter() - t0
        record["stage"] = "setup"
        data = module.setup()
        record["stage"] = "run"
        t0 = time.perf_counter()
        first = module.run(data)
        t_first = time.perf_counter() - t0
        record["results"] = {k: _host_result(v) for k, v in first.items()}
        record["result_types"] = {k: type(v).__name__ for k, v in first.items()}
        record["stage"] = "repeat"
        times = []
        spent = 0.0
        while len(times) < repeat and (spent < budget_s or len(times) < MIN_STEADY_RUNS):
            t0 = time.perf_counter()
            module.run(data)
            dt = time.perf_counter() - t0
            times.append(dt)
            spent += dt
        record["define_s"] = t_define
        record["first_run_s"] = t_first
        record["compile_first_s"] = t_define + t_first
        record["steady_s"] = statistics.median(times)
        record["steady_runs"] = len(times)
        record["stage"] = "done"
    except BaseException as exc:  # noqa: BLE001 - a program's failure is a result
        record["error"] = "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0]
                                      if str(exc).strip() else "")
        record["traceback"] = traceback.format_exc(limit=12)[-4000:]
    return record


def loop_types_of(module):
    """{global name: the loop types ('ff->f', ...)} of the program's ufuncs and gufuncs."""
    found = {}
    for name, value in sorted(vars(module).items()):
        if name.startswith("__") or isinstance(value, type):
            continue
        try:
            types = getattr(value, "types", None)
        except Exception:  # noqa: BLE001 - an object without loops
            continue
        # A reduction object may have an empty list: only objects with loops count.
        if isinstance(types, (list, tuple)) and types and all(isinstance(t, str) for t in types):
            found[name] = list(types)
    return found


def types_one(path, index):
    """Define one program (no data, no call: no GPU needed) and read its loops' types."""
    record = {"program": os.path.basename(path)[:-3], "stage": "define"}
    try:
        record["types"] = loop_types_of(_load_program(path, index))
        record["stage"] = "done"
    except BaseException as exc:  # noqa: BLE001 - a program's failure is a result
        record["error"] = "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0]
                                      if str(exc).strip() else "")
        record["traceback"] = traceback.format_exc(limit=12)[-4000:]
    return record


def worker_main(mode, paths, out_path, repeat, budget_s, types_only=False):
    t0 = time.perf_counter()
    try:
        library = _bind_numba(mode)
        import_error = None
    except BaseException as exc:  # noqa: BLE001
        library, import_error = None, "%s: %s\n%s" % (type(exc).__name__, exc,
                                                      traceback.format_exc(limit=8))
    t_import = time.perf_counter() - t0
    records = []
    for index, path in enumerate(paths):
        if import_error:
            records.append({"program": os.path.basename(path)[:-3], "stage": "import",
                            "error": import_error.splitlines()[0], "traceback": import_error})
        else:
            records.append(types_one(path, index) if types_only else
                           run_one(path, index, repeat, budget_s))
    with open(out_path, "wb") as f:
        pickle.dump({"mode": mode, "library": library, "import_s": t_import,
                     "records": records}, f)


def run_mode(mode, paths, repeat=20, budget_s=1.0, timeout_s=600, env=None, one_process=False,
             types_only=False):
    """Run programs under `mode`, each in a fresh process (or all in one, for the quick CPU check).
    Returns {program name: record}, each record with its library import time. types_only: only
    define the programs and read their loops' types (record["types"]), which needs no GPU."""
    groups = [paths] if one_process else [[p] for p in paths]
    out = {}
    for group in groups:
        with tempfile.TemporaryDirectory() as tmp:
            out_path = os.path.join(tmp, "result.pkl")
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", mode,
                   "--result", out_path, "--repeat", str(repeat), "--budget", str(budget_s)]
            if types_only:
                cmd.append("--types-only")
            cmd += group
            started = time.perf_counter()
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                                      env=env)
                tail = (proc.stdout + proc.stderr)[-3000:]
                crashed = proc.returncode != 0
            except subprocess.TimeoutExpired as exc:
                tail = "timed out after %d s: %s" % (timeout_s, (exc.stderr or b"")[-1000:])
                crashed = True
            wall = time.perf_counter() - started
            if os.path.exists(out_path):
                with open(out_path, "rb") as f:
                    payload = pickle.load(f)
                for rec in payload["records"]:
                    rec["library"] = payload["library"]
                    rec["import_s"] = payload["import_s"]
                    rec["process_s"] = wall
                    out[rec["program"]] = rec
            else:
                for p in group:
                    name = os.path.basename(p)[:-3]
                    out[name] = {"program": name, "stage": "process",
                                 "error": "the worker process died (exit %s)" % (
                                     "timeout" if not crashed else proc.returncode),
                                 "traceback": tail}
    return out


# ---- the report ---------------------------------------------------------------------------------

def _ms(seconds):
    if seconds is None:
        return "-"
    ms = seconds * 1e3
    return "%.2f" % ms if ms < 10 else "%.1f" % ms if ms < 1000 else "%.0f" % ms


def _ratio(numba_s, cufunc_s):
    """Numba's time over cufunc's (above 1: cufunc is faster)."""
    if not numba_s or not cufunc_s:
        return "-"
    return "%.2fx" % (numba_s / cufunc_s)


def compare_modes(paths, ref_runs, got_runs):
    rows = []
    for path in paths:
        info = program_info(path)
        name = info["name"]
        ref, got = ref_runs.get(name, {}), got_runs.get(name, {})
        row = {"program": name, "source": info["source"], "license": info["license"],
               "domain": info["domain"], "uses": info["uses"],
               "numba_first_s": ref.get("compile_first_s"), "numba_steady_s": ref.get("steady_s"),
               "cufunc_first_s": got.get("compile_first_s"),
               "cufunc_steady_s": got.get("steady_s"),
               "numba_error": ref.get("error"), "cufunc_error": got.get("error"),
               "numba_traceback": ref.get("traceback"), "cufunc_traceback": got.get("traceback"),
               "findings": []}
        if ref.get("error") and got.get("error"):
            row["agreement"] = "both failed"
        elif ref.get("error"):
            row["agreement"] = "Numba failed"
        elif got.get("error"):
            row["agreement"] = "cufunc failed (%s)" % got.get("stage")
        else:
            row["findings"] = compare_results(ref["results"], got["results"], info["tolerance"])
            row["agreement"] = summarize(row["findings"])
        rows.append(row)
    return rows


def compare_loop_types(paths, env=None):
    """[(program, ok, how)]: the loop types of every ufunc and gufunc a program defines, under
    cufunc.numba and under Numba's CPU target (which shares Numba's type inference with
    numba-cuda). Defining needs no GPU: both compile listed signatures when the decorator runs."""
    ref = run_mode("numba-cpu", paths, env=env, one_process=True, types_only=True)
    got = run_mode("cufunc", paths, env=env, one_process=True, types_only=True)
    rows = []
    for path in paths:
        name = os.path.basename(path)[:-3]
        r, g = ref.get(name, {}), got.get(name, {})
        if r.get("error") or g.get("error"):
            rows.append((name, False, "Numba: %s; cufunc: %s" % (r.get("error") or "ok",
                                                                g.get("error") or "ok")))
            continue
        diffs = ["%s: %s, Numba %s" % (k, g["types"].get(k), r["types"].get(k))
                 for k in sorted(set(r["types"]) | set(g["types"]))
                 if r["types"].get(k) != g["types"].get(k)]
        rows.append((name, not diffs, "; ".join(diffs) if diffs else
                     "%d loops" % sum(len(v) for v in r["types"].values())))
    return rows


def format_table(rows):
    head = ("| # | program | source | uses | first call, ms: Numba / cufunc (speed-up) | "
            "steady call, ms: Numba / cufunc (speed-up) | results |\n"
            "|---|---|---|---|---:|---:|---|\n")
    lines = []
    for row in rows:
        num, _, short = row["program"].partition("_")
        lines.append("| %s | %s | %s | %s | %s / %s (%s) | %s / %s (%s) | %s |" % (
            num, short, row["source"].replace("|", "/"), ", ".join(row["uses"]),
            _ms(row["numba_first_s"]), _ms(row["cufunc_first_s"]),
            _ratio(row["numba_first_s"], row["cufunc_first_s"]),
            _ms(row["numba_steady_s"]), _ms(row["cufunc_steady_s"]),
            _ratio(row["numba_steady_s"], row["cufunc_steady_s"]), row["agreement"]))
    return head + "\n".join(lines) + "\n"


def format_details(rows):
    out = []
    for row in rows:
        bad = [(k, how) for k, ok, how in row["findings"] if not ok]
        tol = [(k, how) for k, ok, how in row["findings"] if ok and how not in ("bitwise", "exact")]
        if row["numba_error"] or row["cufunc_error"] or bad or tol:
            out.append("%s:" % row["program"])
            if row["numba_error"]:
                out.append("  Numba: %s" % row["numba_error"])
            if row["cufunc_error"]:
                out.append("  cufunc: %s" % row["cufunc_error"])
            for k, how in bad:
                out.append("  %s: %s" % (k, how))
            for k, how in tol:
                out.append("  %s: %s" % (k, how))
    return "\n".join(out)


def write_readme_table(table, header_note):
    with open(README) as f:
        text = f.read()
    start, end = text.index(TABLE_START), text.index(TABLE_END)
    new = text[:start] + TABLE_START + "\n" + header_note + "\n\n" + table + text[end:]
    with open(README, "w") as f:
        f.write(new)


def _jsonable(rows, runs):
    def clean(rec):
        return {k: v for k, v in rec.items() if k != "results"}
    return {"rows": [dict(r, findings=[list(f) for f in r["findings"]]) for r in rows],
            "runs": {mode: {n: clean(r) for n, r in recs.items()} for mode, recs in runs.items()}}


def save_records(folder, mode, records):
    """One pickle per program and mode (results included), rewritten as records arrive."""
    os.makedirs(os.path.join(folder, mode), exist_ok=True)
    for name, rec in records.items():
        with open(os.path.join(folder, mode, name + ".pkl"), "wb") as f:
            pickle.dump(rec, f)


def load_saved(folder, mode):
    out = {}
    base = os.path.join(folder, mode)
    if os.path.isdir(base):
        for fname in sorted(os.listdir(base)):
            if fname.endswith(".pkl"):
                with open(os.path.join(base, fname), "rb") as f:
                    rec = pickle.load(f)
                out[rec["program"]] = rec
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=MODES + ("both",), default="both")
    ap.add_argument("--programs", help="comma-separated numbers or names (default: all)")
    ap.add_argument("--dir", help="run the NN_*.py programs of this folder instead (for example "
                                  "gaps/, the minimal reproductions)")
    ap.add_argument("--repeat", type=int, default=20, help="steady-state calls at most")
    ap.add_argument("--budget", type=float, default=1.0,
                    help="seconds of steady-state calls per program (at least %d calls)"
                         % MIN_STEADY_RUNS)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per program process")
    ap.add_argument("--json", help="write the rows and raw records here")
    ap.add_argument("--write-readme", action="store_true",
                    help="replace the table in tests/numba_corpus/README.md")
    ap.add_argument("--note", default="", help="the line above the table (date, card, commit)")
    ap.add_argument("--pair", default="numba,cufunc",
                    help="reference and compared modes (default numba,cufunc; "
                         "numba-cpu,numba-cpu exercises the runner without a GPU)")
    ap.add_argument("--save", help="keep every record (results included) under this folder")
    ap.add_argument("--from-saved", help="compare records kept by --save instead of running")
    ap.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--types-only", action="store_true",
                    help="compare the loop types of the programs' ufuncs (no GPU needed): "
                         "cufunc.numba against Numba's CPU target (same type inference)")
    ap.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        worker_main(args.worker, args.paths, args.result, args.repeat, args.budget,
                    args.types_only)
        return 0

    paths = program_paths(args.programs, os.path.abspath(args.dir) if args.dir else PROGRAMS)
    if args.types_only:
        rows = compare_loop_types(paths)
        for name, ok, how in rows:
            print("%-40s %s %s" % (name, "same" if ok else "DIFFERENT", how))
        print("%d programs: %d with Numba's loop types" % (len(rows), sum(ok for _, ok, _ in rows)))
        return 0 if all(ok for _, ok, _ in rows) else 1
    if args.mode in ("numba", "cufunc", "numba-cpu"):
        runs = run_mode(args.mode, paths, args.repeat, args.budget, args.timeout)
        failed = 0
        for name, rec in runs.items():
            if rec.get("error"):
                failed += 1
                print("%-40s FAILED at %s: %s" % (name, rec.get("stage"), rec["error"]))
                print("    " + rec.get("traceback", "").strip().replace("\n", "\n    ")[-1500:])
            else:
                print("%-40s ok  first %s ms  steady %s ms  (%s)" % (
                    name, _ms(rec["compile_first_s"]), _ms(rec["steady_s"]),
                    ", ".join("%s %s%s" % (k, v.dtype, list(v.shape))
                              for k, v in rec["results"].items())))
        print("%d programs, %d failed (%s)" % (len(runs), failed, args.mode))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(_jsonable([], {args.mode: runs}), f, indent=1, default=str)
        return 1 if failed else 0

    ref_mode, got_mode = args.pair.split(",")
    if args.from_saved:
        ref = load_saved(args.from_saved, "numba")
        got = load_saved(args.from_saved, "cufunc")
        paths = [p for p in paths if os.path.basename(p)[:-3] in ref or
                 os.path.basename(p)[:-3] in got]
    else:
        ref, got = {}, {}
        # Program by program, Numba then cufunc, each saved as soon as it ran: a run cut short
        # keeps the pairs it finished.
        for path in paths:
            ref.update(run_mode(ref_mode, [path], args.repeat, args.budget, args.timeout))
            got.update(run_mode(got_mode, [path], args.repeat, args.budget, args.timeout))
            if args.save:
                save_records(args.save, "numba", ref)
                save_records(args.save, "cufunc", got)
            name = os.path.basename(path)[:-3]
            print("%-40s numba: %s   cufunc: %s" % (
                name, ref[name].get("error") or "ok", got[name].get("error") or "ok"), flush=True)
    rows = compare_modes(paths, ref, got)
    table = format_table(rows)
    print(table)
    print(format_details(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(_jsonable(rows, {"numba": ref, "cufunc": got}), f, indent=1, default=str)
    if args.write_readme:
        write_readme_table(table, args.note)
    agree = sum(1 for r in rows if r["agreement"] in ("bit for bit", "within tolerance"))
    print("%d programs: %d agree, %d Numba failures, %d cufunc failures, %d differ" % (
        len(rows), agree, sum(1 for r in rows if r["agreement"] in ("Numba failed", "both failed")),
        sum(1 for r in rows if r["agreement"].startswith("cufunc failed")),
        sum(1 for r in rows if r["agreement"] == "DIFFERENT")))
    return 0 if agree == sum(1 for r in rows if not r["numba_error"]) else 1


if __name__ == "__main__":
    sys.exit(main())
