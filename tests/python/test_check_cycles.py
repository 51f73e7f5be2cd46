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
    assert "no cycle between 2 files of %s/ (calls)" % tmp_path.name in r.stdout


def test_no_objects(tmp_path):
    r = subprocess.run([sys.executable, TOOL, str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2


def test_setuptools_objects_and_removed_sources(tmp_path):
    """Objects named X.o (setuptools, numpy_ext's build) name X.c; with a source folder, an
    object whose source is gone (a file since renamed) is left out, and its cycle with it."""
    objs = tmp_path / "obj"
    objs.mkdir()
    r = build(objs, {"a.c": "int b(void); int a(void) { return b(); }\n",
                     "b.c": "int a(void); int b(void) { return a() + 1; }\n"})
    assert r.returncode == 1 and "CYCLE between a.c.c, b.c.c" not in r.stdout
    for f in ("a.c.o", "b.c.o"):
        os.rename(objs / f, objs / f.replace(".c.o", ".o"))
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.c").write_text("")
    (src / "b.c").write_text("")
    r = subprocess.run([sys.executable, TOOL, str(objs), str(src)], capture_output=True, text=True)
    assert r.returncode == 1 and "CYCLE between a.c, b.c" in r.stdout, r.stdout
    (src / "b.c").unlink()
    r = subprocess.run([sys.executable, TOOL, str(objs), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
    assert "no cycle between 1 files of src/ (calls)" in r.stdout


def run_python(tmp_path, modules):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for name, text in modules.items():
        (pkg / name).write_text(text)
    return subprocess.run([sys.executable, TOOL, "--python", str(pkg)], capture_output=True,
                          text=True)


def test_python_cycle_through_a_function_level_import(tmp_path):
    r = run_python(tmp_path, {"__init__.py": "",
                              "a.py": "from . import b\n",
                              "b.py": "def f():\n    from . import a\n    return a\n"})
    assert r.returncode == 1, r.stdout
    assert "CYCLE between pkg.a, pkg.b" in r.stdout
    assert "pkg.b -> pkg.a (2)" in r.stdout


def test_python_package_attribute_and_extension_module(tmp_path):
    """``from . import NAME``: an edge to the package when its __init__ binds NAME (here a cycle
    through the package), none when NAME is an extension module (no .py, not bound)."""
    mods = {"__init__.py": "from . import a\nversion = 1\n",
            "a.py": "from . import _core\nfrom ._core import thing\n"}
    r = run_python(tmp_path, mods)
    assert r.returncode == 0, r.stdout
    assert "pkg.a ->" not in r.stdout
    mods["a.py"] += "def g():\n    from . import version\n    return version\n"
    r = run_python(tmp_path / "x" if (tmp_path / "x").mkdir() is None else tmp_path, mods)
    assert r.returncode == 1, r.stdout
    assert "CYCLE between pkg, pkg.a" in r.stdout
