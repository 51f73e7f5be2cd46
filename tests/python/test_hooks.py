"""The extension reaches its package only through the hooks the package registers when imported
(numpy_ext/py_hooks.c): `import cufunc` loads none of the modules registered through loaders, a
loader runs on first need, and the extension loaded without its package says which hook is
missing instead of importing the package by name. No GPU needed."""
import subprocess
import sys
import textwrap

import pytest

import cufunc

core = cufunc._env.core
pytestmark = pytest.mark.skipif(core is None, reason="needs cufunc's C extension")


def run(tmp_path, code):
    """`code` run as a script of its own (functions in it have their source, for the decorators)."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_import_loads_no_module_registered_by_a_loader(tmp_path):
    out = run(tmp_path, """
        import sys
        import cufunc
        print(*[m in sys.modules for m in ("cufunc._dask", "cufunc._twins", "cufunc._devarray",
                                           "dask")])
    """)
    assert out == ["False"] * 4


def test_dask_hooks_load_on_first_need(tmp_path):
    pytest.importorskip("dask.array")
    out = run(tmp_path, """
        import sys
        import cufunc
        import dask.array as da

        @cufunc.vectorize(["float64(float64)"])
        def inc(a):
            return a + 1

        total = cufunc.cuda.reduce(lambda a, b: a + b)
        x = da.ones(10, chunks=5)
        print("cufunc._dask" in sys.modules)
        print(type(inc(x)).__name__, "cufunc._dask" in sys.modules)  # dask_array_ufunc
        print(type(total(x)).__name__)                              # dask_reduce_all
    """)
    assert out == ["False", "Array", "True", "Array"]


def test_the_extension_alone_names_the_missing_hook(tmp_path):
    out = run(tmp_path, """
        import glob, importlib.util, os, sys
        pkg = os.path.dirname(importlib.util.find_spec("cufunc").origin)  # not imported
        path = glob.glob(os.path.join(pkg, "_core*"))[0]
        m = importlib.util.module_from_spec(importlib.util.spec_from_file_location("cufunc._core",
                                                                                   path))
        assert "cufunc" not in sys.modules
        for f in (lambda: m._raise_status(m.CF_ERR_NO_DRIVER, "x"),
                  lambda: m.parse_type_signature("f4(")):
            try:
                f()
            except RuntimeError as e:
                print(str(e).split()[3])
    """)
    assert out == ["'CudaSupportError'", "'SignatureError'"]


def test_registration_checks_names_and_loaders():
    with pytest.raises(TypeError, match="no hook named 'no_such_hook'"):
        core._register_hooks(no_such_hook=1)
    with pytest.raises(TypeError, match="keyword arguments"):
        core._register_hooks(1)
    with pytest.raises(TypeError, match="loader of 'dask_reduce_all' is not callable"):
        core._register_lazy_hooks(dask_reduce_all=1)
    with pytest.raises(TypeError, match="no hook named"):  # all checked before any is stored
        core._register_hooks(SignatureError=ValueError, no_such_hook=1)
    with pytest.raises(cufunc.errors.SignatureError):
        core.parse_type_signature("f4(")


def test_the_status_codes_raise_the_packages_classes():
    for code, cls in ((core.CF_ERR_NO_DRIVER, cufunc.errors.CudaSupportError),
                      (core.CF_ERR_COMPILE, cufunc.errors.CompileError),
                      (core.CF_ERR_CUDA, cufunc.errors.CudaAPIError),
                      (core.CF_ERR_ASSERT, cufunc.errors.DeviceAssertionError)):
        with pytest.raises(cls, match="^msg$"):
            core._raise_status(code, "msg")
