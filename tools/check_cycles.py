#!/usr/bin/env python3
"""Fail when the C source files of a folder call each other in a cycle, or the modules of a Python
package import each other in a cycle.

The file-level call graph comes from the object files, not from reading C: `nm` lists what each
object (X.c.o from CMake, X.o from setuptools) defines and what it leaves undefined; X -> Y when X
uses a symbol (a function or a variable) that Y defines. A strongly connected component of more
than one file is a cycle (every behaviour has one home, and homes depend on each other one way).

    python3 tools/check_cycles.py [OBJECT_DIR [SOURCE_DIR]]

OBJECT_DIR defaults to build/cmake/CMakeFiles/cufunc_objects.dir/src (src/, built with cmake
first). tools/test.sh runs it there after ctest, and on numpy_ext's objects as the Python build
left them (build/temp.PLATFORM-TAG/numpy_ext) with SOURCE_DIR numpy_ext: with SOURCE_DIR, an
object whose X.c is not in SOURCE_DIR (a file since removed or renamed) is left out. Prints the
edges, then "no cycle between N files of DIR (calls)" and exits 0, or prints each cycle and exits
1. Exits 2 when there are no objects to read.

    python3 tools/check_cycles.py --python PACKAGE_DIR

reads the imports of every module under PACKAGE_DIR (numpy_ext/cufunc), those inside functions
included (an import deferred into a function still ties the two modules), and prints the cycles
among them the same way. ``from PKG import NAME`` ties the module to PKG.NAME when that is a
module of the package, else to PKG when PKG's __init__.py binds NAME (an attribute: a function,
a constant); a NAME that is neither is a compiled extension module (cufunc._core), which imports
nothing of the package's Python (what it calls in the package is registered with it when the
package is imported: numpy_ext/py_hooks.c).
"""
import ast
import os
import subprocess
import sys

DEFAULT_DIR = "build/cmake/CMakeFiles/cufunc_objects.dir/src"


def symbols(obj):
    """(defined, undefined) global symbol names of one object file."""
    out = subprocess.run(["nm", "--format=posix", obj], check=True, capture_output=True,
                         text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(name)
        elif kind.isupper():  # global: T text, D/B/R data, C common, W/V weak
            defined.add(name)
    return defined, undefined


def _source_name(obj):
    """The source file of an object: "ufunc.c.o" (CMake) and "ufunc.o" (setuptools) -> "ufunc.c"."""
    name = obj[:-len(".o")]
    return name if name.endswith(".c") else name + ".c"


def graph(obj_dir, src_dir=None):
    objs = sorted(f for f in os.listdir(obj_dir) if f.endswith(".o"))
    if src_dir is not None:  # objects of files no longer there: left out
        objs = [f for f in objs if os.path.isfile(os.path.join(src_dir, _source_name(f)))]
    names = {f: _source_name(f) for f in objs}
    table = {names[f]: symbols(os.path.join(obj_dir, f)) for f in objs}
    owner = {}
    for name, (defined, _) in table.items():
        for sym in defined:
            owner.setdefault(sym, name)
    edges = {name: {} for name in table}
    for name, (_, undefined) in table.items():
        for sym in undefined:
            dst = owner.get(sym)
            if dst and dst != name:
                edges[name].setdefault(dst, []).append(sym)
    return edges


def cycles(edges):
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    n = stack.pop()
                    on_stack.discard(n)
                    comp.append(n)
                    if n == node:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return comps


def _dotted(path):
    """The module name of a .py file: its directories up to the last one with an __init__.py."""
    path = os.path.abspath(path)
    parts = [os.path.splitext(os.path.basename(path))[0]]
    d = os.path.dirname(path)
    while os.path.isfile(os.path.join(d, "__init__.py")):
        parts.insert(0, os.path.basename(d))
        d = os.path.dirname(d)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _bound_names(tree):
    """The names a module binds at its top level (outside functions and classes): assignments,
    definitions, imports, also under if/try."""
    names = set()
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
            continue
        for sub in ast.walk(node) if not isinstance(node, ast.Lambda) else ():
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                names.add(sub.id)
        for field in ("body", "orelse", "finalbody", "handlers"):
            todo.extend(getattr(node, field, ()) or ())
    return names


def py_graph(pkg_dir):
    """{module: {imported module: [line numbers]}} over the modules under pkg_dir."""
    files = {}
    for root, _, names in os.walk(pkg_dir):
        for f in sorted(names):
            if f.endswith(".py"):
                path = os.path.join(root, f)
                files[_dotted(path)] = path
    mods = set(files)
    trees = {}
    for mod, path in files.items():
        with open(path, encoding="utf-8") as fh:
            trees[mod] = ast.parse(fh.read(), path)
    packages = {mod for mod, path in files.items() if os.path.basename(path) == "__init__.py"}
    bound = {mod: _bound_names(trees[mod]) for mod in packages}

    def resolve(name):
        """The package module `name` means, or None: outside the package, or an extension module
        (a dotted name under a package that is no .py file there)."""
        if name in mods:
            return name
        head, _, last = name.rpartition(".")
        if head in mods:
            if head in packages and last not in bound[head]:
                return None  # PKG.NAME neither a module file nor bound by PKG: an extension
            return head
        return None

    edges = {m: {} for m in mods}
    for mod, path in files.items():
        is_pkg = mod in packages
        tree = trees[mod]
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".")
                    if not is_pkg:
                        base = base[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    base = ".".join(base)
                else:
                    base = ""
                head = ".".join(x for x in (base, node.module or "") if x)
                if head not in mods and head.rpartition(".")[0] in mods:
                    targets = [head]  # from EXTENSION import NAME: the extension itself
                else:
                    targets = [head + "." + a.name for a in node.names]
            for t in targets:
                dst = resolve(t)
                if dst and dst != mod:
                    edges[mod].setdefault(dst, []).append(str(node.lineno))
    return edges


def report(edges, what):
    for src in sorted(edges):
        if edges[src]:
            print(f"{src} -> {', '.join(sorted(edges[src]))}")
    found = cycles(edges)
    if not found:
        print(f"check_cycles: no cycle between {len(edges)} {what}")
        return 0
    for comp in found:
        print("check_cycles: CYCLE between " + ", ".join(comp) + ":")
        for a in comp:
            for b in comp:
                if b in edges[a]:
                    print(f"    {a} -> {b} ({', '.join(sorted(edges[a][b])[:4])})")
    return 1


def main(argv):
    if len(argv) > 2 and argv[1] == "--python":
        if not os.path.isdir(argv[2]):
            print(f"check_cycles: no package directory {argv[2]}")
            return 2
        return report(py_graph(argv[2]), "modules of " + argv[2] + " (imports)")
    obj_dir = argv[1] if len(argv) > 1 else DEFAULT_DIR
    src_dir = argv[2] if len(argv) > 2 else None
    if not os.path.isdir(obj_dir) or not any(f.endswith(".o") for f in os.listdir(obj_dir)):
        print(f"check_cycles: no object files in {obj_dir} (build first: cmake for src/, "
              "pip install for numpy_ext/)")
        return 2
    label = os.path.basename(os.path.normpath(src_dir or obj_dir))
    return report(graph(obj_dir, src_dir), f"files of {label}/ (calls)")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
