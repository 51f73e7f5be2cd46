"""The documentation stays true: every ```python block of README.md and docs/*.md runs, and every
script in examples/python/ runs.

A page's blocks run in order in one child process (a file: the translator reads function sources),
so later blocks see what earlier ones defined. A block whose first line is ``# needs a GPU`` (or
``# needs a GPU and cupy``, ``... and cupy, torch``) and every block after it need a GPU: without
one, the blocks before it still run, and the whole page is a GPU test that skips visibly (fails
with CUFUNC_REQUIRE_GPU=1). Modules named after "and", and the third-party modules the blocks
import, are imported first or the test skips naming them.

Examples: on the CPU each script is imported without running its main() (its decorators
translate its kernels: the kernel language, the layouts and the signatures are checked); on the
GPU each runs as a user would run it and must exit 0."""
import glob
import importlib.util
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PAGES = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "python", "*.py")))
NEEDS = re.compile(r"#\s*needs a GPU(?:\s+and\s+(?P<mods>[\w, ]+))?\s*$")


def blocks(path):
    """[(code, needs_gpu, modules)] of the page's ```python blocks, in order."""
    out = []
    for code in re.findall(r"^```python\n(.*?)^```", open(path).read(), re.S | re.M):
        m = NEEDS.match(code.splitlines()[0]) if code.strip() else None
        mods = [x.strip() for x in m.group("mods").split(",")] if m and m.group("mods") else []
        out.append((code, bool(m), mods))
    return out


def imported(codes):
    """The third-party modules the code imports (not the standard library, NumPy or cufunc)."""
    names = set()
    for code in codes:
        names |= set(re.findall(r"^\s*(?:import|from)\s+(\w+)", code, re.M))
    return sorted(n for n in names
                  if n not in sys.stdlib_module_names and n not in ("numpy", "cufunc"))


def split(path):
    """(the blocks that run anywhere, all blocks, modules the GPU part needs)."""
    bl = blocks(path)
    first_gpu = next((i for i, b in enumerate(bl) if b[1]), len(bl))
    mods = sorted({m for b in bl[first_gpu:] for m in b[2]} | set(imported(b[0] for b in bl)))
    return [b[0] for b in bl[:first_gpu]], [b[0] for b in bl], mods


def run_blocks(tmp_path, codes, name):
    script = tmp_path / (re.sub(r"\W", "_", name) + ".py")
    script.write_text("\n\n".join(codes))
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false", PYTHONUNBUFFERED="1")
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                       cwd=str(tmp_path), env=env)
    assert p.returncode == 0, "%s failed:\n%s\n%s" % (name, p.stdout[-4000:], p.stderr[-4000:])
    return p.stdout


PAGE_IDS = [os.path.relpath(p, ROOT) for p in PAGES]
WITH_BLOCKS = [(p, i) for p, i in zip(PAGES, PAGE_IDS) if blocks(p)]


def test_pages_have_examples():
    names = {os.path.relpath(p, ROOT) for p, _ in WITH_BLOCKS}
    for must in ("README.md", "docs/index.md", "docs/language.md", "docs/ufuncs.md",
                 "docs/interop.md", "docs/streams-memory.md", "docs/performance.md"):
        assert must in names, must


@pytest.mark.parametrize("path", [p for p, _ in WITH_BLOCKS], ids=[i for _, i in WITH_BLOCKS])
def test_blocks_compile(path):
    for k, (code, _, _) in enumerate(blocks(path)):
        compile(code, "%s block %d" % (path, k + 1), "exec")


@pytest.mark.parametrize("path", [p for p, _ in WITH_BLOCKS], ids=[i for _, i in WITH_BLOCKS])
def test_blocks_without_gpu_run(tmp_path, path):
    cpu, _, _ = split(path)
    if not cpu:
        pytest.skip("every block of %s needs a GPU (run by test_page_runs_on_gpu)"
                    % os.path.relpath(path, ROOT))
    for m in imported(cpu):
        pytest.importorskip(m)
    run_blocks(tmp_path, cpu, os.path.relpath(path, ROOT) + " (CPU part)")


GPU_PAGES = [(p, i) for p, i in WITH_BLOCKS if len(split(p)[0]) < len(split(p)[1])]


@pytest.mark.gpu
@pytest.mark.parametrize("path", [p for p, _ in GPU_PAGES], ids=[i for _, i in GPU_PAGES])
def test_page_runs_on_gpu(tmp_path, path):
    _, every, mods = split(path)
    for m in mods:
        pytest.importorskip(m)
    run_blocks(tmp_path, every, os.path.relpath(path, ROOT))


def test_readme_quick_start_needs_numpy_only():
    text = open(os.path.join(ROOT, "README.md")).read()
    section = text[text.index("## Quick start"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    imported = set(re.findall(r"^\s*(?:import|from)\s+(\w+)", code, re.M))
    assert imported <= {"math", "numpy", "cufunc"}, imported


def test_environment_page_names_every_variable():
    # every CUFUNC_* the C core, the extension and the package read is in docs/environment.md
    names = set()
    for pattern in ("src/*.c", "src/*.h", "numpy_ext/*.c", "numpy_ext/cufunc/**/*.py",
                    "tools/build_backend/*.py", "setup.py", "tests/python/conftest.py"):
        for f in glob.glob(os.path.join(ROOT, pattern), recursive=True):
            text = open(f).read()
            names |= set(re.findall(r'(?:getenv|cf_env_long|environ\.get|environ\[|getenv)\(?\s*"'
                                    r'(CUFUNC_[A-Z0-9_]+)"', text))
            names |= set(re.findall(r"^ \*\s+(CUFUNC_[A-Z0-9_]+)\s", text, re.M))
    assert len(names) > 30, sorted(names)
    page = open(os.path.join(ROOT, "docs", "environment.md")).read()
    missing = sorted(n for n in names if n not in page)
    assert not missing, missing


def load_example(path):
    spec = importlib.util.spec_from_file_location("example_" + os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_examples_exist():
    names = {os.path.basename(p) for p in EXAMPLES}
    assert {"black_scholes.py", "image_filter.py", "argmax_reduction.py", "cupy_torch_interop.py",
            "dask_one_gpu.py"} <= names, names


@pytest.mark.parametrize("path", EXAMPLES, ids=[os.path.basename(p) for p in EXAMPLES])
def test_example_translates_without_gpu(path):
    # importing runs the decorators (translation of every kernel), not main()
    mod = load_example(path)
    assert callable(getattr(mod, "main", None)), "%s has no main()" % path
    for name in getattr(mod, "KERNELS", ()):
        k = getattr(mod, name)
        src = k.inspect_cuda()
        assert "CF_LANG_FN" in src, name


@pytest.mark.gpu
@pytest.mark.parametrize("path", EXAMPLES, ids=[os.path.basename(p) for p in EXAMPLES])
def test_example_runs_on_gpu(tmp_path, path):
    for m in getattr(load_example(path), "NEEDS", ()):
        pytest.importorskip(m)
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    p = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=600,
                       cwd=str(tmp_path), env=env)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert "OK" in p.stdout, p.stdout


# ---------------------------------------------------------------- the pages' C and shell blocks

C_FRAGMENT_HEAD = """\
#include <cufunc/cufunc.h>
#include <stdint.h>
#include <stdio.h>
int fragment(void);
int fragment(void)
{
"""
C_FRAGMENT_TRY = "#define TRY(call) do { if ((call) != CF_OK) return 1; } while (0)\n"
# the names the pages' fragments use, declared unless the fragment declares them itself
C_FRAGMENT_NAMES = [
    ("types", "const cf_dtype types[3] = {CF_FLOAT32, CF_FLOAT32, CF_FLOAT32};"),
    ("s", "cf_stream *s = NULL;"), ("u", "cf_ufunc *u = NULL;"), ("r", "cf_reducer *r = NULL;"),
    ("ops", "cf_operand ops[3] = {0};"), ("y", "cf_array y = {0};"), ("res", "uint64_t res = 0;"),
    ("init", "double init = 0;"), ("n", "int64_t n = 1;"), ("steps", "int steps = 1;")]


def c_blocks(path):
    return re.findall(r"^```c\n(.*?)^```", open(path).read(), re.S | re.M)


C_BLOCKS = [(p, k, code) for p in PAGES for k, code in enumerate(c_blocks(p))]


def c_source(code):
    """A whole program as it is; a fragment inside a function that declares the names the pages'
    fragments use (a #define is kept at file level)."""
    if re.search(r"\bint\s+main\s*\(", code):
        return code
    out = C_FRAGMENT_HEAD + ("" if "#define TRY" in code else C_FRAGMENT_TRY)
    for name, decl in C_FRAGMENT_NAMES:
        if not re.search(r"[\w*]\s*\**\s*\b%s\s*(\[|;|=)" % name, code):
            out += "    %s (void)%s;\n" % (decl, name)
    return out + code + "\n    return 0;\n}\n"


def test_pages_have_c_blocks():
    assert any("C_API.md" in p for p, _, _ in C_BLOCKS)


@pytest.mark.parametrize("path,k,code", C_BLOCKS,
                         ids=["%s block %d" % (os.path.relpath(p, ROOT), k + 1)
                              for p, k, _ in C_BLOCKS])
def test_c_block_compiles(tmp_path, path, k, code):
    """Every ```c block compiles against the public headers as C11 (-Wall -Werror): whole
    programs as they are, fragments inside a function declaring the names they use."""
    cc = os.environ.get("CC", "cc")
    src = tmp_path / "block.c"
    src.write_text(c_source(code))
    p = subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-Wno-unused-variable",
                        "-Wno-unused-but-set-variable", "-fsyntax-only",
                        "-I" + os.path.join(ROOT, "include"), str(src)],
                       capture_output=True, text=True)
    assert p.returncode == 0, "%s block %d:\n%s\n%s" % (path, k + 1, p.stderr, src.read_text())


def _libcufunc():
    found = sorted(glob.glob(os.path.join(ROOT, "build", "cmake", "libcufunc.so*")))
    return found[0] if found else None


C_PROGRAMS = [b for b in C_BLOCKS if re.search(r"\bint\s+main\s*\(", b[2])]


@pytest.mark.gpu
@pytest.mark.parametrize("path,k,code", C_PROGRAMS,
                         ids=["%s block %d" % (os.path.relpath(p, ROOT), k + 1)
                              for p, k, _ in C_PROGRAMS])
def test_c_program_runs_on_gpu(tmp_path, path, k, code):
    """A ```c block that is a whole program builds against libcufunc (the CMake build
    tools/test.sh and tools/gpu_check.sh make in build/cmake) and exits 0 on the GPU."""
    lib = _libcufunc()
    if lib is None:
        pytest.skip("build/cmake/libcufunc.so is not built (cmake -S . -B build/cmake)")
    src, exe = tmp_path / "prog.c", tmp_path / "prog"
    src.write_text(code)
    cc = os.environ.get("CC", "cc")
    b = subprocess.run([cc, "-std=c11", "-I" + os.path.join(ROOT, "include"), str(src), "-o",
                        str(exe), lib, "-Wl,-rpath," + os.path.dirname(lib), "-lm"],
                       capture_output=True, text=True)
    assert b.returncode == 0, b.stderr
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert p.returncode == 0, "%s block %d: %s%s" % (path, k + 1, p.stdout, p.stderr)


def shell_blocks(path):
    return re.findall(r"^```(?:sh|bash|console|shell)\n(.*?)^```", open(path).read(), re.S | re.M)


def test_every_shell_block_runs_in_ci():
    """The pages' shell blocks run: a block that installs cufunc (pip install) is run as written
    by tools/package_check.sh (in a fresh venv, in the unpacked sdist, with the CUDA toolkit
    hidden); the C library's build, install and link commands (docs/C_API.md) are what
    tools/gpu_check.sh's examples step runs (cmake configure, build and install into a prefix,
    examples built with find_package and with pkg-config), with its own build folder and prefix;
    any other block's commands must be lines of .ci/run. No page shows code in an indented
    block, which would run nowhere."""
    ci = {l.strip() for l in open(os.path.join(ROOT, ".ci", "run")) if l.strip()}
    check = open(os.path.join(ROOT, "tools", "package_check.sh")).read()
    assert "install block" in check, "tools/package_check.sh runs no page's install block"
    gpu_check = open(os.path.join(ROOT, "tools", "gpu_check.sh")).read()
    c_library = {"cmake -S": "cmake -S", "cmake --build": "cmake --build",
                 "cmake --install": "cmake --install", "export PKG_CONFIG_PATH": "PKG_CONFIG_PATH",
                 "cc ": "pkg-config --cflags --libs cufunc"}
    installs = 0
    for path in PAGES:
        text = open(path).read()
        outside = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
        indented = re.findall(r"(?:^\n)((?:    \S.*\n)+)", outside, re.M)
        assert not indented, "%s: code in an indented block: %s" % (path, indented)
        for block in shell_blocks(path):
            if "pip install" in block:
                installs += 1
                continue
            for line in block.splitlines():
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                if path.endswith("C_API.md"):
                    key = next((k for k in c_library if line.startswith(k)), None)
                    assert key is not None and c_library[key] in gpu_check, \
                        "%s: %r is not what tools/gpu_check.sh runs" % (path, line)
                else:
                    assert line in ci, "%s: %r is not run by .ci/run" % (path, line)
    assert installs >= 2      # README.md and docs/index.md
