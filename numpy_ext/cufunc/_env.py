"""Loading the C extension, and the environment report (``python -m cufunc``, ``cuda.detect()``).

The extension ``cufunc._core`` is imported here, once, and a failure is remembered instead of
raised: ``import cufunc``, ``cufunc.types`` and ``cufunc.lang`` work without it, and only the
functions that need the GPU or NVRTC raise (CudaSupportError, naming the import error).

Before NVRTC's first use, the lib folders of NVIDIA's pip wheels (``nvidia-cuda-nvrtc`` and the
CUDA 13 ``nvidia/cu13`` layout) are added to the core's NVRTC search path, so a pip-only
installation finds libnvrtc without CUDA_HOME.
"""

import glob
import importlib
import os
import sys

from . import errors
from .errors import CudaSupportError

# The oldest NumPy the extension works with: it is built against NumPy 2's C API (one build serves
# every NumPy 2.x), and the host semantics it follows are NumPy 2's (NEP 50 promotion).
NUMPY_MIN = (2, 1)


def _numpy_version():
    import numpy
    return tuple(int(p) for p in numpy.__version__.split(".")[:2] if p.isdigit())


def explain_import_error(exc, numpy_version=None):
    """Why cufunc._core could not be imported, in words a user can act on.

    A NumPy older than NUMPY_MIN, an extension built for another Python or NumPy (an undefined
    symbol, a wrong ABI tag), and an extension that is simply missing read differently: a
    missing one is "not built"; the others say what to change.
    """
    nv = numpy_version if numpy_version is not None else _numpy_version()
    msg = str(exc)
    if nv < NUMPY_MIN:
        import numpy
        return ("cufunc needs NumPy >= %s, and this is NumPy %s (%s); upgrade NumPy"
                % (".".join(map(str, NUMPY_MIN)), numpy.__version__, msg))
    if "undefined symbol" in msg:
        return ("cufunc's C extension was built against another NumPy or Python than this one "
                "(a symbol is missing: %s); rebuild cufunc here (pip install --force-reinstall "
                "--no-binary cufunc cufunc, or pip install . in the source tree)" % msg)
    if isinstance(exc, ModuleNotFoundError) or "No module named" in msg:
        return ("cufunc's C extension (cufunc._core) is not built: %s; install cufunc with pip, "
                "or build it in the source tree with `python setup.py build_ext --inplace`" % msg)
    return "cufunc's C extension (cufunc._core) could not be imported: %s" % msg


try:
    # import_module, not `from . import`: its error names the missing module plainly.
    core = importlib.import_module(__package__ + "._core")
    core_error = None
except ImportError as exc:  # not built, built for another Python or NumPy, or NumPy too old
    core = None
    core_error = ImportError(explain_import_error(exc))
    core_error.__cause__ = exc

if core is not None:
    # The exception classes the extension raises (it imports no module of the package: what it
    # calls in the package is registered with it), registered at once, before anything calls it:
    # any of its functions that fails raises one of them, this module calls it below (the NVRTC
    # folders), and the modules importing this one may call it before the package has finished
    # importing (its own init raises none of them). What else it calls lives in modules above
    # this one: cufunc/__init__.py registers that.
    core._register_hooks(
        CudaSupportError=errors.CudaSupportError, CudaAPIError=errors.CudaAPIError,
        CompileError=errors.CompileError, DeviceAssertionError=errors.DeviceAssertionError,
        GraphCaptureError=errors.GraphCaptureError, SignatureError=errors.SignatureError)

# One home for the version: CUFUNC_VERSION_STRING in include/cufunc/cufunc.h, compiled into the
# extension and written into the package metadata by setup.py (cufunc.__version__ is this).
if core is not None:
    version = core.__version__
else:
    try:
        from importlib.metadata import version as _dist_version
        version = _dist_version(__package__)
    except Exception:  # noqa: BLE001 - a source tree with no metadata and no extension
        version = "unknown"

# Wheel layouts, relative to a site-packages folder.
_NVRTC_WHEEL_DIRS = (
    "nvidia/cuda_nvrtc/lib",
    "nvidia/cuda_nvrtc/lib64",
    "nvidia/cu13/lib",
    "nvidia/cu13/lib64",
    "nvidia/cu12/lib",
)


def nvrtc_wheel_dirs():
    """Existing lib folders of NVIDIA wheels that hold libnvrtc, over sys.path."""
    found = []
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        for rel in _NVRTC_WHEEL_DIRS:
            d = os.path.join(entry, rel)
            if d not in found and glob.glob(os.path.join(d, "libnvrtc.so*")):
                found.append(d)
    return found


def _register_nvrtc_wheels():
    for d in nvrtc_wheel_dirs():
        try:
            core.nvrtc_add_search_dir(d)
        except Exception:  # noqa: BLE001 - a bad folder must not break import
            pass


if core is not None:
    _register_nvrtc_wheels()


def require_core(what="this function"):
    """The extension module, or CudaSupportError saying why it is missing."""
    if core is None:
        msg = str(core_error)
        if "pip install" not in msg:  # say how to get it, whatever the import said
            msg += ("; install cufunc with pip, or build it in the source tree with "
                    "`python setup.py build_ext --inplace`")
        raise CudaSupportError("%s needs cufunc's C extension: %s" % (what, msg))
    return core


def _human_bytes(n):
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    v = float(n)
    u = 0
    while v >= 1024 and u < len(units) - 1:
        v /= 1024
        u += 1
    return "%.1f %s" % (v, units[u])


def environment():
    """A dict describing the installation: versions, library paths, devices, cache.

    Never raises: what cannot be read is reported as an error string under the same key.
    """
    import numpy as np

    env = {
        "cufunc": version,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "core": None if core is not None else str(core_error),
        "driver": None, "driver_path": None, "driver_error": None,
        "nvrtc": None, "nvrtc_path": None, "nvrtc_error": None,
        "devices": [], "cache_dir": None, "templates_hash": None,
    }
    if core is None:
        return env
    reason = core.unavailable_reason()
    if reason is None:
        v = core.driver_version()
        env["driver"] = "%d.%d" % (v // 1000, (v % 1000) // 10)
        env["driver_path"] = core.driver_path()
        for i in range(core.device_count()):
            env["devices"].append(core.device_props(i))
    else:
        env["driver_error"] = reason
    try:
        env["nvrtc"] = "%d.%d" % core.nvrtc_version()
        env["nvrtc_path"] = core.nvrtc_path()
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        env["nvrtc_error"] = str(exc)
    env["cache_dir"] = core.cache_dir()
    env["templates_hash"] = core.templates_hash()
    env["knobs_set"] = [k for k in core.knobs() if k["text"] is not None]
    return env


def format_knobs(knobs):
    """The table of CUFUNC_* variables (``_core.knobs()``) as lines of text: name, value in
    effect (or the text as set), default and bounds, and what each changes."""
    lines = []
    for k in knobs:
        if k["kind"] == "text":
            now = "%r" % k["text"] if k["text"] is not None else "unset"
            lines.append("  %-34s %-12s %s" % (k["name"], now, k["doc"]))
        else:
            auto = not (k["lowest"] <= k["default"] <= k["highest"])
            default = "auto" if auto else str(k["default"])
            now = "auto" if auto and k["value"] == k["default"] else str(k["value"])
            rule = "" if k["kind"] == "int" else ", a %s" % k["kind"]
            if k["text"] is not None and str(k["value"]) != k["text"].strip():
                now += " (%r ignored: not in %d..%d%s)" % (k["text"], k["lowest"], k["highest"],
                                                            rule)
            lines.append("  %-34s %-12s %s [default %s, %d..%d%s]"
                         % (k["name"], now, k["doc"], default, k["lowest"], k["highest"], rule))
    return lines


def format_environment(env):
    """The report of environment() as lines of text."""
    lines = ["cufunc %s (Python %s, NumPy %s)" % (env["cufunc"], env["python"], env["numpy"])]
    if env["core"] is not None:
        lines.append("  C extension:  NOT LOADED: %s" % env["core"])
        return lines
    if env["driver"] is not None:
        lines.append("  CUDA driver:  %s (%s)" % (env["driver"], env["driver_path"]))
    else:
        lines.append("  CUDA driver:  not usable: %s" % env["driver_error"])
    if env["nvrtc"] is not None:
        lines.append("  NVRTC:        %s (%s)" % (env["nvrtc"], env["nvrtc_path"]))
    else:
        lines.append("  NVRTC:        not usable: %s" % env["nvrtc_error"])
    for p in env["devices"]:
        lines.append("  device %d:     %s, compute capability %d.%d, %d SMs, %s, %s"
                     % (p["id"], p["name"], p["compute_capability"][0],
                        p["compute_capability"][1], p["MULTIPROCESSOR_COUNT"],
                        _human_bytes(p["total_memory"]), p["uuid"]))
    if env["driver"] is not None and not env["devices"]:
        lines.append("  devices:      none")
    if env["cache_dir"]:
        lines.append("  kernel cache: %s (disk cache on)" % env["cache_dir"])
    else:
        lines.append("  kernel cache: in memory only (disk cache off: CUFUNC_CACHE=0 or the "
                     "folder is not writable)")
    lines.append("  templates:    sha256 %s" % env["templates_hash"])
    if env.get("knobs_set"):
        lines.append("  settings from the environment (`python -m cufunc --knobs` lists all):")
        lines.extend(format_knobs(env["knobs_set"]))
    else:
        lines.append("  settings:     no CUFUNC_* variable set (`python -m cufunc --knobs` lists "
                     "them)")
    return lines
