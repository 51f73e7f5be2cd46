"""The environment report and the discovery of NVIDIA's pip wheels for NVRTC (no GPU needed)."""

import sys

import pytest

from cufunc import _env, cuda
from cufunc.errors import CudaSupportError


def test_nvrtc_wheel_dirs_found_on_sys_path(tmp_path, monkeypatch):
    for rel in ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib", "nvidia/cu12/lib"):
        d = tmp_path / rel
        d.mkdir(parents=True)
    (tmp_path / "nvidia/cu13/lib/libnvrtc.so.13").write_bytes(b"")
    (tmp_path / "nvidia/cuda_nvrtc/lib/libnvrtc.so.12").write_bytes(b"")
    # nvidia/cu12/lib has no libnvrtc: not reported.
    monkeypatch.setattr(sys, "path", [str(tmp_path), str(tmp_path / "missing")])
    found = _env.nvrtc_wheel_dirs()
    assert found == [str(tmp_path / "nvidia/cuda_nvrtc/lib"), str(tmp_path / "nvidia/cu13/lib")]


def test_environment_report():
    env = _env.environment()
    assert env["core"] is None
    assert env["templates_hash"] and len(env["templates_hash"]) == 64
    lines = _env.format_environment(env)
    text = "\n".join(lines)
    assert text.startswith("cufunc ")
    assert "NVRTC:" in text and "kernel cache:" in text
    if cuda.is_available():
        assert env["driver"] and env["devices"]
        assert "device 0:" in text
    else:
        assert env["driver_error"] and "not usable" in text


def test_require_core_message(monkeypatch):
    monkeypatch.setattr(_env, "core", None)
    monkeypatch.setattr(_env, "core_error", ImportError("simulated"))
    with pytest.raises(CudaSupportError, match="simulated.*build_ext"):
        _env.require_core("cufunc.cuda.to_device")
