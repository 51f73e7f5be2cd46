"""Packaging: where the build finds the CUDA headers (a toolkit, else NVIDIA's wheels in their CUDA
13 and CUDA 12 layouts), the one home of the version, and an import failure that says why.

The whole path (sdist, a wheel built from it with the toolkit hidden, a fresh venv, the demo) is
tools/package_check.sh, which CI runs."""

import importlib.util
import os
import re

import pytest

import cufunc
from cufunc import _env

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def load_cuda_headers():
    path = os.path.join(ROOT, "tools", "build_backend", "cuda_headers.py")
    spec = importlib.util.spec_from_file_location("cuda_headers_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def touch(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").close()


@pytest.fixture
def headers(monkeypatch, tmp_path):
    mod = load_cuda_headers()
    site = tmp_path / "site-packages"
    site.mkdir()
    # only this folder is searched (the machine's own site-packages may hold NVIDIA's wheels)
    monkeypatch.setattr(mod, "_site_folders", lambda: [str(site)])
    monkeypatch.setenv("CUFUNC_IGNORE_TOOLKIT", "1")
    return mod, site


@pytest.mark.parametrize("layout, files, expect", [
    ("CUDA 13: one folder", ["nvidia/cu13/include/cuda.h", "nvidia/cu13/include/nvrtc.h"],
     ["nvidia/cu13/include"]),
    ("CUDA 12: two folders", ["nvidia/cuda_runtime/include/cuda.h",
                              "nvidia/cuda_nvrtc/include/nvrtc.h"],
     ["nvidia/cuda_runtime/include", "nvidia/cuda_nvrtc/include"]),
])
def test_headers_from_wheels(headers, layout, files, expect):
    mod, site = headers
    for f in files:
        touch(os.path.join(site, f))
    assert mod.include_dirs() == [os.path.join(site, e) for e in expect], layout


@pytest.mark.parametrize("files", [[], ["nvidia/cu13/include/cuda.h"],
                                   ["nvidia/cuda_nvrtc/include/nvrtc.h"]])
def test_headers_missing_names_every_place_and_the_wheels(headers, files):
    mod, site = headers
    for f in files:
        touch(os.path.join(site, f))
    assert mod.wheel_include_dirs() is None
    with pytest.raises(SystemExit) as e:
        mod.include_dirs()
    msg = str(e.value)
    assert "CUFUNC_IGNORE_TOOLKIT" in msg and str(site) in msg
    assert "nvidia-cuda-runtime" in msg and "nvidia-cuda-nvrtc" in msg


def test_toolkit_first_unless_ignored(headers, monkeypatch, tmp_path):
    mod, site = headers
    kit = tmp_path / "kit"
    touch(os.path.join(kit, "include", "cuda.h"))
    touch(os.path.join(kit, "include", "nvrtc.h"))
    for f in ("nvidia/cu13/include/cuda.h", "nvidia/cu13/include/nvrtc.h"):
        touch(os.path.join(site, f))
    monkeypatch.setenv("CUDA_HOME", str(kit))
    monkeypatch.delenv("CUFUNC_IGNORE_TOOLKIT")
    assert mod.include_dirs() == [os.path.join(kit, "include")]
    monkeypatch.setenv("CUFUNC_IGNORE_TOOLKIT", "1")
    assert mod.include_dirs() == [os.path.join(site, "nvidia/cu13/include")]


@pytest.mark.parametrize("major, names", [("13", ["nvidia-cuda-runtime", "nvidia-cuda-nvrtc"]),
                                          ("12", ["nvidia-cuda-runtime-cu12",
                                                  "nvidia-cuda-nvrtc-cu12"])])
def test_header_wheels_by_major(headers, monkeypatch, major, names):
    mod, _ = headers
    monkeypatch.setenv("CUFUNC_CUDA_MAJOR", major)
    assert [re.split(r"[<>=]", w)[0] for w in mod.header_wheels()] == names


def test_header_wheels_bad_major(headers, monkeypatch):
    mod, _ = headers
    monkeypatch.setenv("CUFUNC_CUDA_MAJOR", "11")
    with pytest.raises(SystemExit, match="12 or 13"):
        mod.header_wheels()


def test_version_has_one_home():
    header = open(os.path.join(ROOT, "include", "cufunc", "cufunc.h")).read()
    version = re.search(r'#define CUFUNC_VERSION_STRING "([^"]+)"', header).group(1)
    assert cufunc.__version__ == version
    pyproject = open(os.path.join(ROOT, "pyproject.toml")).read()
    assert re.search(r'^dynamic = \["version"\]', pyproject, re.M)
    assert not re.search(r'^version\s*=', pyproject, re.M)


def test_metadata_numpy_floor_is_the_import_check():
    pyproject = open(os.path.join(ROOT, "pyproject.toml")).read()
    floor = re.search(r'dependencies = \["numpy>=([0-9.]+)"\]', pyproject).group(1)
    assert tuple(int(p) for p in floor.split(".")) == _env.NUMPY_MIN


@pytest.mark.parametrize("exc, numpy_version, says", [
    (ImportError("whatever"), (1, 26), "needs NumPy >= "),
    (ImportError("/x/_core.so: undefined symbol: PyDataType_ELSIZE"), (2, 3),
     "built against another NumPy or Python"),
    (ModuleNotFoundError("No module named 'cufunc._core'"), (2, 3), "is not built"),
    (ImportError("libfoo.so: cannot open shared object file"), (2, 3), "could not be imported"),
])
def test_import_failure_says_why(exc, numpy_version, says):
    msg = _env.explain_import_error(exc, numpy_version)
    assert says in msg
    assert str(exc) in msg
