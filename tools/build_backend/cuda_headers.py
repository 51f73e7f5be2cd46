"""Where the build finds cuda.h and nvrtc.h: a CUDA toolkit, else NVIDIA's pip wheels.

One home for the search, used by setup.py and by the build backend (cufunc_build.py). Only the
headers are needed: libcuda and libnvrtc are loaded at run time with dlopen.

Toolkit folders, in order: $CUDA_HOME/include, $CUDA_PATH/include, /usr/local/cuda/include,
/opt/cuda/include, /usr/include. CUFUNC_IGNORE_TOOLKIT=1 skips them (CI builds that way to prove
the wheels suffice).

Wheel layouts, under any folder of sys.path or the installing environment's site-packages:
CUDA 13 puts both headers in nvidia/cu13/include; CUDA 12 puts cuda.h in
nvidia/cuda_runtime/include and nvrtc.h in nvidia/cuda_nvrtc/include.
"""
import os
import sys
import sysconfig

WHEELS = {
    "13": ["nvidia-cuda-runtime>=13,<14", "nvidia-cuda-nvrtc>=13,<14"],
    "12": ["nvidia-cuda-runtime-cu12>=12.4,<13", "nvidia-cuda-nvrtc-cu12>=12.4,<13"],
}
_WHEEL_INCLUDE_DIRS = ("nvidia/cu13/include", "nvidia/cu12/include", "nvidia/cuda_runtime/include",
                       "nvidia/cuda_nvrtc/include")


def _has(folder, header):
    return os.path.isfile(os.path.join(folder, header))


def toolkit_candidates():
    out = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            out.append(os.path.join(os.environ[var], "include"))
    return out + ["/usr/local/cuda/include", "/opt/cuda/include", "/usr/include"]


def toolkit_include_dirs():
    """[folder] of a toolkit holding both headers, or None (also when CUFUNC_IGNORE_TOOLKIT=1)."""
    if os.environ.get("CUFUNC_IGNORE_TOOLKIT", "") not in ("", "0"):
        return None
    for c in toolkit_candidates():
        if _has(c, "cuda.h") and _has(c, "nvrtc.h"):
            return [c]
    return None


def _site_folders():
    seen = []
    # sys.path: the isolated build environment, where the backend's wheels land. The prefix's own
    # site-packages: wheels installed beforehand into the environment being installed into.
    paths = list(sys.path)
    for scheme_var in ("purelib", "platlib"):
        try:
            paths.append(sysconfig.get_paths(vars={"base": sys.prefix, "platbase": sys.prefix})[scheme_var])
        except (KeyError, ImportError):  # a scheme without it, or no sysconfig data
            pass
    for p in paths:
        if p and os.path.isdir(p) and p not in seen:
            seen.append(p)
    return seen


def wheel_include_dirs():
    """[folder of cuda.h, folder of nvrtc.h] from NVIDIA's wheels (one folder in the CUDA 13
    layout), or None when either header is missing."""
    found = {}
    for site in _site_folders():
        for rel in _WHEEL_INCLUDE_DIRS:
            d = os.path.join(site, rel)
            for h in ("cuda.h", "nvrtc.h"):
                if h not in found and _has(d, h):
                    found[h] = d
    if len(found) < 2:
        return None
    return list(dict.fromkeys([found["cuda.h"], found["nvrtc.h"]]))


def header_wheels():
    """The pip requirements that carry the headers: CUFUNC_CUDA_MAJOR (13 or 12; default 13)."""
    major = os.environ.get("CUFUNC_CUDA_MAJOR", "13")
    if major not in WHEELS:
        raise SystemExit("cufunc: CUFUNC_CUDA_MAJOR must be 12 or 13, not %r" % major)
    return WHEELS[major]


def include_dirs():
    """The folders to compile with, or SystemExit naming every place searched."""
    dirs = toolkit_include_dirs() or wheel_include_dirs()
    if dirs:
        return dirs
    raise SystemExit(
        "cufunc: cuda.h and nvrtc.h not found. Searched the CUDA toolkit folders %s%s and NVIDIA's "
        "pip wheels (%s) under %s. Set CUDA_HOME to a CUDA toolkit, or install the headers with "
        "`pip install %s`."
        % (", ".join(toolkit_candidates()),
           " (skipped: CUFUNC_IGNORE_TOOLKIT is set)" if os.environ.get("CUFUNC_IGNORE_TOOLKIT", "") not in ("", "0") else "",
           ", ".join(_WHEEL_INCLUDE_DIRS), ", ".join(_site_folders()), " ".join('"%s"' % w for w in header_wheels())))


if __name__ == "__main__":
    # CMake's fallback: `python cuda_headers.py --wheels` prints the wheels' folders, ;-separated
    # (a CMake list), and exits 1 when they are not there.
    dirs = wheel_include_dirs() if sys.argv[1:] == ["--wheels"] else include_dirs()
    if not dirs:
        sys.exit(1)
    print(";".join(dirs))
