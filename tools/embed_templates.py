#!/usr/bin/env python3
"""Embed templates/ into a C source file: the bytes of every file, its include name, and a SHA-256
over all names and bytes (the template bundle hash that goes into every kernel cache key).

Usage: embed_templates.py TEMPLATES_DIR OUTPUT.c

Include names are paths relative to TEMPLATES_DIR with '/' separators ("cufunc/runtime.cuh"). Files
are taken in sorted order so the output, and the hash, do not depend on the file system's order.
The output is rewritten only when its content changes, so builds stay incremental.
"""
import hashlib
import os
import sys

SUFFIXES = (".cuh", ".cu", ".h")


def collect(root):
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            if fn.endswith(SUFFIXES):
                full = os.path.join(dirpath, fn)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                with open(full, "rb") as f:
                    files.append((rel, f.read()))
    files.sort()
    return files


def c_bytes(data):
    out = []
    for i in range(0, len(data), 20):
        out.append("    " + "".join("%d," % b for b in data[i:i + 20]))
    return "\n".join(out)


def render(files):
    h = hashlib.sha256()
    for name, data in files:
        for field in (name.encode(), data):
            h.update(len(field).to_bytes(8, "little"))
            h.update(field)
    lines = ["/* Generated from templates/ by tools/embed_templates.py (setup.py) or "
             "cmake/embed_templates.c (CMake). Do not edit. */",
             "#include <stddef.h>", ""]
    for i, (name, data) in enumerate(files):
        lines.append("static const char tpl_%d[] = {  /* %s */" % (i, name))
        lines.append(c_bytes(data + b"\0"))
        lines.append("};")
    lines.append("")
    lines.append("const int cf_templates_n = %d;" % len(files))
    lines.append("const char *const cf_templates_names[] = {%s};" %
                 ", ".join('"%s"' % n for n, _ in files) if files else
                 "const char *const cf_templates_names[] = {0};")
    lines.append("const char *const cf_templates_sources[] = {%s};" %
                 ", ".join("tpl_%d" % i for i in range(len(files))) if files else
                 "const char *const cf_templates_sources[] = {0};")
    lines.append("const size_t cf_templates_lengths[] = {%s};" %
                 ", ".join(str(len(d)) for _, d in files) if files else
                 "const size_t cf_templates_lengths[] = {0};")
    lines.append('const char cf_templates_bundle_hash[] = "%s";' % h.hexdigest())
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    text = render(collect(sys.argv[1]))
    out = sys.argv[2]
    try:
        with open(out) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
