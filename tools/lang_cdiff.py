"""Record and compare what the kernel-language translator produces for the lang test corpus.

Used to check that a restructuring of numpy_ext/cufunc/lang/ keeps the generated C byte-identical
(and the error messages identical), and to time translation.

1. As a pytest plugin it records every cufunc.lang.translate() call made by the tests:
       CUFUNC_LANG_RECORD=/tmp/old.jsonl PYTHONPATH=tools python -m pytest -p lang_cdiff \
           tests/python/test_lang_*.py
   One JSON line per call: a key (the function's qualname, a hash of its bytecode and constants,
   the argument and return types, fastmath), and the outcome: the C source, or the exception's
   class and message (file names of the function replaced by <FILE>, so temporary module paths
   do not count). At the end it prints the CPU time spent inside translate() (process time: g++
   and NVRTC subprocesses do not count).
2. As a script it compares two recordings:
       python tools/lang_cdiff.py /tmp/old.jsonl /tmp/new.jsonl
   and prints every key whose outcomes differ (and the keys only one side has).
"""

import hashlib
import json
import os
import re
import sys
import time


def _code_key(code):
    h = hashlib.sha256()

    def add(c):
        h.update(c.co_code)
        h.update(repr(c.co_names).encode())
        h.update(repr(c.co_varnames).encode())
        for k in c.co_consts:
            if hasattr(k, "co_code"):
                add(k)
            else:
                h.update(repr(k).encode())
    add(code)
    return h.hexdigest()[:16]


def _key(pyfunc, argtypes, return_type, fastmath):
    f = getattr(pyfunc, "py_func", pyfunc)
    code = getattr(f, "__code__", None)
    return re.sub(r" at 0x[0-9a-f]+", "", "%s|%s|%s|%s|%s" % (
        getattr(f, "__qualname__", repr(f)), _code_key(code) if code else "?",
        ",".join(str(a) for a in argtypes), return_type, bool(fastmath)))


class _Recorder:
    def __init__(self, path):
        self.out = open(path, "w")
        self.cpu = 0.0
        self.wall = 0.0
        self.calls = 0
        self.depth = 0

    def wrap(self, translate):
        rec = self

        def recording_translate(pyfunc, argtypes, return_type=None, *, fastmath=False):
            argtypes = list(argtypes) if isinstance(argtypes, (list, tuple)) else argtypes
            rec.depth += 1
            c0, w0 = time.process_time(), time.perf_counter()
            try:
                r = translate(pyfunc, argtypes, return_type, fastmath=fastmath)
                outcome = {"source": r.source}
                return r
            except Exception as e:
                f = getattr(pyfunc, "py_func", pyfunc)
                fn = getattr(getattr(f, "__code__", None), "co_filename", None)
                msg = str(e)
                if fn:
                    msg = msg.replace(fn, "<FILE>")
                loc = getattr(e, "cufunc_location", None)
                if loc and fn:
                    loc = ["<FILE>" if loc[0] == fn else loc[0], loc[1]]
                outcome = {"error": type(e).__name__, "message": msg, "location": loc}
                raise
            finally:
                rec.depth -= 1
                if rec.depth == 0:
                    rec.cpu += time.process_time() - c0
                    rec.wall += time.perf_counter() - w0
                    rec.calls += 1
                try:
                    key = _key(pyfunc, argtypes, return_type, fastmath)
                except Exception:   # noqa: BLE001 - odd arguments: the test checks the error
                    key = "unkeyable|%r" % (argtypes,)
                rec.out.write(json.dumps({"key": key, **outcome}) + "\n")

        recording_translate.__wrapped__ = translate
        return recording_translate


_rec = None


def pytest_configure(config):
    global _rec
    path = os.environ.get("CUFUNC_LANG_RECORD")
    if not path:
        return
    import cufunc.lang as L
    _rec = _Recorder(path)
    orig = L.translate
    new = _rec.wrap(orig)
    for name, mod in list(sys.modules.items()):
        if name.startswith("cufunc") and getattr(mod, "translate", None) is orig:
            mod.translate = new
        if name.startswith("cufunc") and getattr(mod, "_translate", None) is orig:
            mod._translate = new


def pytest_unconfigure(config):
    if _rec is not None:
        _rec.out.close()
        sys.stderr.write("lang_cdiff: %d translate() calls, %.3f s CPU, %.3f s wall\n"
                         % (_rec.calls, _rec.cpu, _rec.wall))


def _load(path):
    out = {}
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            key = re.sub(r" at 0x[0-9a-f]+", "", d.pop("key"))
            if "message" in d:   # temporary module names of the tests
                d["message"] = re.sub(r"\w+_\d{6,}\.py", "<TMP>.py", d["message"])
                d["message"] = re.sub(r" at 0x[0-9a-f]+", "", d["message"])
            out.setdefault(key, [])
            if d not in out[key]:
                out[key].append(d)
    return out


def main(argv):
    old, new = _load(argv[1]), _load(argv[2])
    same = diff = 0
    for k in sorted(set(old) & set(new)):
        if old[k] == new[k]:
            same += 1
            continue
        diff += 1
        print("DIFF %s" % k)
        for a, b in zip(old[k], new[k]):
            for field in sorted(set(a) | set(b)):
                x, y = str(a.get(field)), str(b.get(field))
                if x != y:
                    i = next((j for j in range(min(len(x), len(y))) if x[j] != y[j]),
                             min(len(x), len(y)))
                    print("   %s: old ...%s\n   %s  new ...%s" % (field, x[max(0, i - 80):i + 80],
                                                              " " * len(field),
                                                              y[max(0, i - 80):i + 80]))
                    break
    only_old = sorted(set(old) - set(new))
    only_new = sorted(set(new) - set(old))
    for k in only_old:
        print("ONLY OLD %s" % k)
    for k in only_new:
        print("ONLY NEW %s" % k)
    n_src = sum(1 for k in set(old) & set(new) for d in old[k] if "source" in d)
    print("%d keys identical (%d with C source), %d differ, %d only old, %d only new"
          % (same, n_src, diff, len(only_old), len(only_new)))
    return 1 if diff or only_old or only_new else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
