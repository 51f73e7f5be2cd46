"""Build of the extension cufunc._core: the C core (src/) and the CPython binding (numpy_ext/).

Needs only a C compiler, Python, NumPy's headers and the CUDA headers (cuda.h, nvrtc.h: from a CUDA
toolkit, else from NVIDIA's pip wheels, see tools/build_backend/cuda_headers.py). libcuda and
libnvrtc are NOT linked: the core loads them with dlopen at first use, so `import cufunc` works on a
machine with no GPU and no driver. The templates/ folder is embedded into the binary by
tools/embed_templates.py.

The version has one home, CUFUNC_VERSION_STRING in include/cufunc/cufunc.h (CMake reads it too).
The extension is linked without a RUNPATH (Python's own link line may carry the build machine's)
and without debug information, unless CUFUNC_BUILD_DEBUG=1.
"""
import glob
import os
import re
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_clib import build_clib
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATED = os.path.join("build", "generated", "cf_templates_data.c")
sys.path.insert(0, os.path.join(HERE, "tools", "build_backend"))
import cuda_headers  # noqa: E402 - tools/build_backend/cuda_headers.py


def read_version():
    with open(os.path.join(HERE, "include", "cufunc", "cufunc.h")) as f:
        return re.search(r'#define CUFUNC_VERSION_STRING "([^"]+)"', f.read()).group(1)


def cuda_include_dirs():
    return cuda_headers.include_dirs()


def embed_templates():
    subprocess.check_call([sys.executable, os.path.join(HERE, "tools", "embed_templates.py"),
                           os.path.join(HERE, "templates"), os.path.join(HERE, GENERATED)])


def build_flags():
    import numpy
    return [numpy.get_include()] + cuda_include_dirs()


CFLAGS = ["-std=gnu11", "-O2", "-fvisibility=hidden", "-Wall", "-Wextra",
          "-Wno-unused-parameter", "-Wno-missing-field-initializers"]


class BuildClib(build_clib):
    """The C core (src/) as a static library of position-independent objects, built with src/ and
    templates/ on its include path. The extension links it; it does not see those folders."""

    def build_libraries(self, libraries):
        embed_templates()
        for _, info in libraries:
            info["include_dirs"] = info.get("include_dirs", []) + cuda_include_dirs()
        super().build_libraries(libraries)

class BuildExt(build_ext):
    def run(self):
        self.run_command("build_clib")  # also for `setup.py build_ext --inplace` alone
        super().run()

    def build_extensions(self):
        # the extension is relinked when the core library changed (a change in src/ or templates/
        # alone left the old .so in place: build_ext compares only the extension's own sources)
        clib = self.get_finalized_command("build_clib")
        lib = os.path.join(clib.build_temp if clib.build_clib is None else clib.build_clib,
                           self.compiler.library_filename("cufunc_core"))
        for ext in self.extensions:
            ext.include_dirs += build_flags()
            ext.depends = list(ext.depends) + [lib]
            if os.environ.get("CUFUNC_BUILD_DEBUG", "") in ("", "0"):
                ext.extra_link_args = list(ext.extra_link_args) + ["-Wl,--strip-debug"]
        # No RUNPATH: the extension needs no library of the build machine (libcuda and libnvrtc
        # are dlopen'ed), and a Python built with one (pyenv's -Wl,-rpath,...) would pass it on.
        self.compiler.linker_so = [a for a in self.compiler.linker_so
                                   if not re.match(r"-Wl,(-rpath|-R|--enable-new-dtags)", a)]
        super().build_extensions()


# Two compilations, so that the boundary is kept by the build and not by habit: the core (src/,
# with its private headers) and the binding (numpy_ext/, with its own headers in
# numpy_ext/include/, the public C API in include/ and internal/: what the core offers only the
# binding and the tests; never src/).
core_lib = ("cufunc_core", {
    "sources": sorted(glob.glob("src/*.c")) + [GENERATED],
    "include_dirs": ["include", "internal", "src", "templates"],
    "macros": [("CF_BUILDING_PYTHON", "1")],
    "cflags": CFLAGS + ["-fPIC"],
})

core = Extension(
    "cufunc._core",
    sources=sorted(glob.glob("numpy_ext/*.c")),
    include_dirs=["numpy_ext/include", "include", "internal"],
    depends=sorted(glob.glob("numpy_ext/include/*.h")),
    define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"), ("CF_BUILDING_PYTHON", "1")],
    libraries=["cufunc_core", "dl", "pthread"],
    extra_compile_args=CFLAGS,
)

setup(
    version=read_version(),
    package_dir={"": "numpy_ext"},
    packages=["cufunc", "cufunc.lang", "cufunc.numba", "cufunc.numba.core"],
    libraries=[core_lib],
    ext_modules=[core],
    cmdclass={"build_clib": BuildClib, "build_ext": BuildExt},
)
