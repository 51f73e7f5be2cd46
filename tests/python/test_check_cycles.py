"""tools/check_cycles.py finds a call cycle between object files, and passes a graph without one.

The tool itself runs in tools/test.sh over the real objects of src/; here it gets two tiny
objects, compiled on the spot, so that it is known to fail when a cycle exists."""
import os
import shutil
import subprocess
import sys

import pytest

TOOL = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "check_cycles.py")


def build(tmp_path, sources):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc or not shutil.which("nm"):
        pytest.skip("needs a C compiler and nm")
    for name, text in sources.items():
        (tmp_path / name).write_text(text)
        subprocess.run([cc, "-c", name, "-o", name + ".o"], cwd=tmp_path, check=True)
    return subprocess.run([sys.executable, TOOL, str(tmp_path)], capture_output=True, text=True)


def test_cycle_found(tmp_path):
    r = build(tmp_path, {"a.c": "int b(void); int a(void) { return b(); }\n",
                         "b.c": "int a(void); int b(void) { return a() + 1; }\n",
                         "c.c": "int a(void); int c(void) { return a(); }\n"})
    assert r.returncode == 1, r.stdout
    assert "CYCLE between a.c, b.c" in r.stdout
    assert "a.c -> b.c (b)" in r.stdout and "b.c -> a.c (a)" in r.stdout
    assert "c.c" not in r.stdout.split("CYCLE")[1]


def test_no_cycle(tmp_path):
    r = build(tmp_path, {"a.c": "int b(void); int a(void) { return b(); }\n",
                         "b.c": "int b(void) { return 1; }\n"})
    assert r.returncode == 0, r.stdout
    assert "a.c -> b.c" in r.stdout
    assert "no cycle between 2 files of src/ (calls)" in r.stdout


def test_no_objects(tmp_path):
    r = subprocess.run([sys.executable, TOOL, str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2
