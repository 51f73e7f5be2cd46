"""The PEP 517 build backend of cufunc: setuptools' own, plus the CUDA headers when there is no
toolkit.

Building needs only two headers, cuda.h and nvrtc.h. Where no CUDA toolkit provides them (a machine
with only the NVIDIA driver, a C compiler and pip), the build asks pip for NVIDIA's wheels that
carry them, in its isolated build environment: nvidia-cuda-runtime and nvidia-cuda-nvrtc, CUDA 13 by
default, CUDA 12 with CUFUNC_CUDA_MAJOR=12. setup.py then finds them there (cuda_include_dirs).
So `pip install "cufunc[cuda13]"` is one command on such a machine.
"""
from setuptools import build_meta as _orig
from setuptools.build_meta import *  # noqa: F401,F403 - every hook setuptools defines


def _header_wheels():
    import cuda_headers  # beside this file: pyproject's backend-path puts its folder on sys.path
    if cuda_headers.toolkit_include_dirs() is not None:
        return []
    return cuda_headers.header_wheels()


def get_requires_for_build_wheel(config_settings=None):
    return _orig.get_requires_for_build_wheel(config_settings) + _header_wheels()


def get_requires_for_build_editable(config_settings=None):
    return _orig.get_requires_for_build_editable(config_settings) + _header_wheels()
