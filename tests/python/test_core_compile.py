"""compile_source, NVRTC, templates and the kernel cache from Python. No GPU needed."""

import os
import pathlib
import re

import pytest

from cufunc import _core
from cufunc.errors import CompileError

REPO = pathlib.Path(__file__).resolve().parents[2]

FILL = r"""
extern "C" __global__ void fill(float *x, float v, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}
"""

NEEDS_VALUE = r"""
#ifndef VALUE
#error VALUE must be defined
#endif
extern "C" __global__ void k(int *x) { *x = VALUE; }
"""


def test_cubin_for_sm90_without_gpu():
    image, is_ptx = _core.compile_source(FILL, arch=(9, 0))
    assert is_ptx is False
    assert isinstance(image, bytes)
    assert image[:4] == b"\x7fELF"


def test_default_arch_compiles():
    image, is_ptx = _core.compile_source(FILL)
    assert len(image) > 0
    assert image[:4] == b"\x7fELF" or is_ptx


def test_arch_newer_than_nvrtc_gives_ptx():
    image, is_ptx = _core.compile_source(FILL, arch=(99, 0))
    assert is_ptx is True
    assert b".entry fill" in image


def test_arch_older_than_nvrtc_is_not_implemented():
    with pytest.raises(NotImplementedError, match="compute capability 3.5"):
        _core.compile_source(FILL, arch=(3, 5))


def test_options_reach_nvrtc():
    image, _ = _core.compile_source(NEEDS_VALUE, options=["-DVALUE=3"], arch=(9, 0))
    assert image[:4] == b"\x7fELF"
    with pytest.raises(CompileError, match="VALUE must be defined"):
        _core.compile_source(NEEDS_VALUE, arch=(9, 0))


def test_compile_error_has_log_numbered_source_and_options():
    src = 'extern "C" __global__ void k(float *x)\n{\n    x[0] = no_such_name;\n}\n'
    with pytest.raises(CompileError) as info:
        _core.compile_source(src, options=("-DMARKER=1",), arch=(9, 0))
    msg = str(info.value)
    assert "no_such_name" in msg and "undefined" in msg       # the NVRTC log
    assert re.search(r"^\s*3 \| +x\[0\] = no_such_name;", msg, re.M)  # the numbered source
    assert "-DMARKER=1" in msg and "sm_90" in msg               # the options


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(source=b"bytes"), TypeError, "source"),
    (dict(source=3), TypeError, "source"),
    (dict(source="a\0b"), ValueError, "NUL"),
    (dict(source=FILL, options="-O3"), TypeError, "options"),
    (dict(source=FILL, options=[3]), TypeError, "option 0"),
    (dict(source=FILL, options=5), TypeError, "options"),
    (dict(source=FILL, arch=90), TypeError, "arch"),
    (dict(source=FILL, arch=(9,)), TypeError, "arch"),
    (dict(source=FILL, arch=("9", "0")), TypeError, "arch"),
    (dict(source=FILL, arch=(0, 0)), ValueError, "arch"),
    (dict(source=FILL, arch=(9, 12)), ValueError, "arch"),
])
def test_compile_source_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        _core.compile_source(**kwargs)


def test_nvrtc_version_and_path():
    major, minor = _core.nvrtc_version()
    assert major >= 11 and minor >= 0
    assert "nvrtc" in os.path.basename(_core.nvrtc_path())
    assert _core.nvrtc_supports_arch((9, 0)) == 90


def test_templates_are_embedded_faithfully():
    names = _core.template_names()
    assert "cufunc/runtime.cuh" in names
    for name in names:
        on_disk = REPO / "templates" / name
        if on_disk.is_file():
            assert _core.template_source(name) == on_disk.read_text(encoding="utf-8"), name
    h = _core.templates_hash()
    assert re.fullmatch(r"[0-9a-f]{64}", h)
    with pytest.raises(KeyError):
        _core.template_source("cufunc/no_such_file.cuh")
    with pytest.raises(TypeError):
        _core.template_source(3)


def test_cache_key_is_stable_and_discriminating():
    k = _core.cache_key(FILL, arch=(9, 0))
    assert re.fullmatch(r"[0-9a-f]{64}", k)
    assert k == _core.cache_key(FILL, options=(), arch=(9, 0))
    assert k != _core.cache_key(FILL, options=["-DX=1"], arch=(9, 0))
    assert k != _core.cache_key(FILL, arch=(8, 0))
    assert k != _core.cache_key(FILL + " ", arch=(9, 0))


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    """A fresh cache folder for the test; the previous configuration is restored after."""
    monkeypatch.setenv("CUFUNC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("CUFUNC_CACHE", raising=False)
    _core.cache_reconfigure()
    yield tmp_path
    monkeypatch.undo()
    _core.cache_reconfigure()


def test_cache_compiles_once_then_hits_memory_then_disk(private_cache):
    src = FILL + "// cache test %s\n" % private_cache.name
    assert _core.cache_dir() == str(private_cache)
    before = _core.cache_stats()
    image, is_ptx, origin = _core.compile_source(src, arch=(9, 0), cache=True)
    assert origin == 0 and image[:4] == b"\x7fELF"
    again, _, origin = _core.compile_source(src, arch=(9, 0), cache=True)
    assert origin == 1 and again == image
    _core.cache_reconfigure()  # drops the in-memory images, keeps the folder
    from_disk, _, origin = _core.compile_source(src, arch=(9, 0), cache=True)
    assert origin == 2 and from_disk == image
    after = _core.cache_stats()
    assert after["compiles"] - before["compiles"] == 1
    assert after["memory_hits"] - before["memory_hits"] == 1
    assert after["disk_hits"] - before["disk_hits"] == 1
    assert after["disk_writes"] - before["disk_writes"] == 1
    assert any(p.is_file() for p in private_cache.rglob("*"))


def test_cache_can_be_turned_off(private_cache, monkeypatch):
    monkeypatch.setenv("CUFUNC_CACHE", "0")
    _core.cache_reconfigure()
    assert _core.cache_dir() == ""
    _, _, origin = _core.compile_source(FILL + "// off\n", arch=(9, 0), cache=True)
    assert origin == 0
    assert not any(p.is_file() for p in private_cache.rglob("*"))


def test_cache_stats_keys():
    s = _core.cache_stats()
    assert set(s) == {"compiles", "memory_hits", "disk_hits", "disk_writes", "corrupt_entries"}
    assert all(isinstance(v, int) and v >= 0 for v in s.values())
