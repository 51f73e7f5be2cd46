"""The environment: every CUFUNC_* variable is a row of one table (src/env.h CF_KNOBS), read in one
place, listed by ``_core.knobs()`` and ``python -m cufunc --knobs``; invalid values keep the default."""

import os
import re
import subprocess
import sys

import pytest

from cufunc import _core

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
C_DIRS = [os.path.join(ROOT, "src"), os.path.join(ROOT, "numpy_ext")]
# The loaders read their own paths before anything else can run; env.c is the table's reader.
GETENV_ALLOWED = {"env.c", "driver.c", "nvrtc.c"}


def c_files():
    for d in C_DIRS:
        for name in sorted(os.listdir(d)):
            if name.endswith((".c", ".h")):
                yield os.path.join(d, name)


def knobs_in(env=None):
    """_core.knobs() in a fresh process with `env` added (the integer knobs are read now, but
    some engines cache them per process: a child sees exactly the given environment)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("CUFUNC_")}
    full.update(env or {})
    code = "import json; from cufunc import _core; print(json.dumps(_core.knobs()))"
    out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                         check=True, cwd="/").stdout
    import json
    return {k["name"]: k for k in json.loads(out)}


def test_getenv_only_in_the_environment_reader_and_the_loaders():
    offenders = []
    for path in c_files():
        if os.path.basename(path) in GETENV_ALLOWED:
            continue
        with open(path) as f:
            for i, line in enumerate(f, 1):
                if re.search(r"\bgetenv\s*\(", line):
                    offenders.append("%s:%d" % (os.path.relpath(path, ROOT), i))
    assert offenders == []


def test_every_variable_the_c_code_names_is_in_the_table():
    table = {k["name"] for k in _core.knobs()}
    named = set()
    for path in c_files():
        with open(path) as f:
            named |= set(re.findall(r'"(CUFUNC_[A-Z0-9_]+)"', f.read()))
    assert named - table == set()
    assert len(table) == len(_core.knobs())  # no name twice


def test_table_rows_are_well_formed():
    for k in _core.knobs():
        assert k["name"].startswith("CUFUNC_") and k["doc"], k
        assert k["kind"] in ("int", "power of two", "multiple of 32", "text"), k
        if k["kind"] != "text":
            assert k["lowest"] <= k["highest"], k


@pytest.mark.parametrize("name, text, expect", [
    ("CUFUNC_EW_BLOCK", "512", 512),          # valid
    ("CUFUNC_EW_BLOCK", "33", 256),           # in bounds, not a multiple of 32: the default
    ("CUFUNC_EW_BLOCK", "2048", 256),         # out of bounds
    ("CUFUNC_EW_BLOCK", "x", 256),            # not a number
    ("CUFUNC_SCAN_BLOCK", "128", 128),
    ("CUFUNC_SCAN_BLOCK", "96", 0),           # not a power of two: automatic
    ("CUFUNC_HOSTPIPE_STREAMS", "5", 5),
    ("CUFUNC_HOSTPIPE_STREAMS", "1", 3),      # under the lowest
    ("CUFUNC_COPY_THREADS", "0", 0),
    ("CUFUNC_COPY_THREADS", "", -1),          # empty: unset
])
def test_integer_knob_values(name, text, expect):
    k = knobs_in({name: text})[name]
    assert k["value"] == expect
    assert k["text"] == text


def test_text_setting_is_reported_as_set():
    k = knobs_in({"CUFUNC_CACHE_DIR": "/tmp/somewhere"})["CUFUNC_CACHE_DIR"]
    assert k["kind"] == "text" and k["text"] == "/tmp/somewhere"
    assert knobs_in()["CUFUNC_CACHE_DIR"]["text"] is None


def test_main_lists_every_knob_and_the_ones_set():
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUFUNC_")}
    out = subprocess.run([sys.executable, "-m", "cufunc", "--knobs"], env=env, cwd="/",
                         capture_output=True, text=True, check=True).stdout
    for k in _core.knobs():
        assert k["name"] in out
    env["CUFUNC_EW_BLOCK"] = "33"
    out = subprocess.run([sys.executable, "-m", "cufunc"], env=env, cwd="/",
                         capture_output=True, text=True).stdout
    assert re.search(r"CUFUNC_EW_BLOCK\s+256 \('33' ignored", out), out


def test_test_control_rejects_unknown_hooks():
    with pytest.raises(ValueError, match="no test hook named 'nope'"):
        _core._test_control("nope", None)
    _core._test_control("cache_write_pause", None)  # off: accepted
