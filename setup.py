"""Build of the extension cufunc._core: the C core (src/) and the CPython binding (numpy_ext/).

Needs only a C compiler, Python, NumPy's headers and the CUDA headers (cuda.h, nvrtc.h). libcuda and
libnvrtc are NOT linked: the core loads them with dlopen at first use, so `import cufunc` works on a
machine with no GPU and no driver. The templates/ folder is embedded into the binary by
tools/embed_templates.py.
"""
import glob
import os
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATED = os.path.join("build", "generated", "cf_templates_data.c")


def cuda_include_dir():
    candidates = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(os.path.join(os.environ[var], "include"))
    candidates += ["/usr/local/cuda/include", "/opt/cuda/include", "/usr/include"]
    for c in candidates:
        if os.path.isfile(os.path.join(c, "cuda.h")) and os.path.isfile(os.path.join(c, "nvrtc.h")):
            return c
    sys.exit("cufunc: cuda.h and nvrtc.h not found in %s; set CUDA_HOME to the CUDA toolkit "
             "(only its headers are needed to build)" % ", ".join(candidates))


def embed_templates():
    subprocess.check_call([sys.executable, os.path.join(HERE, "tools", "embed_templates.py"),
                           os.path.join(HERE, "templates"), os.path.join(HERE, GENERATED)])


class BuildExt(build_ext):
    def build_extensions(self):
        import numpy
        embed_templates()
        for ext in self.extensions:
            ext.include_dirs += [numpy.get_include(), cuda_include_dir()]
        super().build_extensions()


sources = sorted(glob.glob("src/*.c")) + sorted(glob.glob("numpy_ext/*.c")) + [GENERATED]

core = Extension(
    "cufunc._core",
    sources=sources,
    include_dirs=["include", "src", "templates"],
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"), ("CF_BUILDING_PYTHON", "1")],
    libraries=["dl", "pthread"],
    extra_compile_args=["-std=gnu11", "-O2", "-fvisibility=hidden", "-Wall", "-Wextra",
                        "-Wno-unused-parameter", "-Wno-missing-field-initializers"],
)

setup(
    package_dir={"": "numpy_ext"},
    packages=["cufunc", "cufunc.lang"],
    ext_modules=[core],
    cmdclass={"build_ext": BuildExt},
)
