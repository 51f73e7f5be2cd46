#!/usr/bin/env python3
"""Fail when the source files of src/ call each other in a cycle.

The file-level call graph comes from the object files, not from reading C: `nm` lists what each
src/X.c.o defines and what it leaves undefined; X -> Y when X uses a symbol that Y defines.
A strongly connected component of more than one file is a cycle (every behaviour has
one home, and homes depend on each other one way).

    python3 tools/check_cycles.py [OBJECT_DIR]

OBJECT_DIR defaults to build/cmake/CMakeFiles/cufunc_objects.dir/src (build with cmake first:
tools/test.sh runs this after ctest). Prints the edges, then "no call cycle between N files" and
exits 0, or prints each cycle and exits 1. Exits 2 when there are no objects to read.
"""
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


def graph(obj_dir):
    objs = sorted(f for f in os.listdir(obj_dir) if f.endswith(".o"))
    names = {f: f[:-len(".o")] for f in objs}  # "ufunc.c.o" -> "ufunc.c"
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


def main(argv):
    obj_dir = argv[1] if len(argv) > 1 else DEFAULT_DIR
    if not os.path.isdir(obj_dir) or not any(f.endswith(".o") for f in os.listdir(obj_dir)):
        print(f"check_cycles: no object files in {obj_dir} (build with cmake first)")
        return 2
    edges = graph(obj_dir)
    for src in sorted(edges):
        if edges[src]:
            print(f"{src} -> {', '.join(sorted(edges[src]))}")
    found = cycles(edges)
    if not found:
        print(f"check_cycles: no call cycle between {len(edges)} files of src/")
        return 0
    for comp in found:
        print("check_cycles: CYCLE between " + ", ".join(comp) + ":")
        for a in comp:
            for b in comp:
                if b in edges[a]:
                    print(f"    {a} -> {b} ({', '.join(sorted(edges[a][b])[:4])})")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
