"""Pickling cufunc's ufuncs and gufuncs, so that Dask's distributed workers (other processes) can
run the tasks of a graph that calls them.

A ufunc made by ``vectorize`` (a gufunc by ``guvectorize``) pickles as what made it: its Python
function, the signatures and the options. The receiving process decorates the function again (the
translation is repeated there; the kernels come from the disk cache when they were compiled before
on that host). A ufunc that is a module's global pickles by name, as functions do, and the receiver
imports it. The function's source file travels with it (its lines), so that a function pickled by
value from a script (``__main__``, through cloudpickle, which Dask uses) can be translated: cloudpickle
renames the file of every function it sends by value to "<dynamic-code>", so the receiver gives the
function (and the functions of the same script it calls: helpers, device functions) their file
names back and puts the lines in linecache when the file is not there. Each process rebuilds a given ufunc once: the pickle carries a token, and the
receiver keeps what it rebuilt by that token (a graph sends the ufunc with every task).

cuda.reduce's Reduce pickles the same way (its functor). A body that reads captured device arrays
cannot travel: the arrays are device memory of this
process. Pickling such a ufunc is a TypeError that says so.

The bottom of the package's import graph: it imports no cufunc module. The object's identity
token (``token``; Dask's token, cufunc/_dask.py, is built from it by ``dask_token``) is made here,
and the pickle names the function that rebuilds the object (vectorize._build,
guvectorize._build, reduction.Reduce: the caller passes its own), so that this module needs none
of them.
"""
import itertools
import linecache
import os
import sys
import threading
import types

_counter = itertools.count()
_REBUILT = {}
_LOCK = threading.Lock()


def _global_name(obj):
    """(module, qualname) when obj is reachable as that module's attribute, else None."""
    mod, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not mod or mod == "__main__" or not qual or "<locals>" in qual:
        return None
    target = sys.modules.get(mod)
    for part in qual.split("."):
        target = getattr(target, part, None)
    return (mod, qual) if target is obj else None


def _functions(f, limit=64):
    """f and the plain functions it reaches through its globals (helpers, device functions'
    Python functions), each once."""
    out, todo, seen = [], [getattr(f, "py_func", f)], set()
    while todo and len(out) < limit:
        g = todo.pop()
        if not isinstance(g, types.FunctionType) or id(g) in seen:
            continue
        seen.add(id(g))
        out.append(g)
        codes = [g.__code__]
        while codes:
            c = codes.pop()
            codes.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
            for name in c.co_names:
                v = g.__globals__.get(name)
                todo.append(getattr(v, "py_func", v))
    return out


def _key(f):
    return (f.__code__.co_qualname if hasattr(f.__code__, "co_qualname") else f.__qualname__,
            f.__code__.co_firstlineno)


def _refile(code, filename):
    consts = tuple(_refile(k, filename) if isinstance(k, types.CodeType) else k
                   for k in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def token(obj):
    """The identity token of a cufunc UFunc, GUFunc or Reducer, made once per object: the token
    its pickle carries (a worker's rebuilt copy keeps it). Two threads at once may make two, one
    kept; a graph is then named twice at most."""
    t = getattr(obj, "_cf_token", None)
    if t is None:
        t = obj._cf_token = "%d-%d-%d" % (os.getpid(), id(obj), next(_counter))
    return t


def dask_token(obj):
    """Dask's token of a cufunc UFunc, GUFunc or Reducer: its identity (``token``), not dask's
    default, a pickle of the object, its function and its source lines, twice, on every call.
    ``__dask_tokenize__`` of each type and cufunc/_dask.py's normalize_token registration."""
    return "cufunc", type(obj).__name__, token(obj)


def reduce(obj, kind, build):
    """obj.__reduce__ for a GPUUFunc ("ufunc") or GPUGUFunc ("gufunc"); build(*obj._cf_remake)
    makes it again in the receiving process (a module-level function: pickled by name)."""
    name = _global_name(obj)
    if name is not None:
        return _by_name, name
    args = getattr(obj, "_cf_remake", None)
    if args is None:
        raise TypeError("cannot pickle %s %r: it was not made by vectorize or guvectorize"
                        % (kind, getattr(obj, "__name__", obj)))
    if any(loop[4] for loop in obj.loops):
        raise TypeError("cannot pickle %s %r: its body reads captured device arrays, which are "
                        "device memory of this process (pass them as arguments instead)"
                        % (kind, obj.__name__))
    files, where = _sources(args[0])
    # settings made after construction (a ufunc's accumulator), set again on the rebuilt object
    state = {k: getattr(obj, k) for k in ("accumulator",) if hasattr(obj, k)}
    return _remake, (build, token(obj), args, files, where, state)


def reduce_reducer(obj, build):
    """Reduce.__reduce__ (cuda.reduce): its functor, and its files' lines as reduce() sends;
    build is the Reduce class."""
    files, where = _sources(obj.functor)
    return _remake, (build, token(obj), (obj.functor, getattr(obj, "typing", "numpy")), files,
                     where)


def _sources(fn):
    files, where = {}, []
    for f in _functions(fn):
        name = f.__code__.co_filename
        if name not in files:
            files[name] = tuple(linecache.getlines(name, f.__globals__))
        where.append((_key(f), name))
    return files, tuple(where)


def _by_name(module, qualname):
    import importlib
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _remake(build, token, args, files, where, state=None):
    with _LOCK:
        obj = _REBUILT.get(token)
        if obj is not None:
            return obj
        for filename, lines in files.items():
            if lines and not linecache.getlines(filename):
                # the file is not here: its lines as the sender read them (mtime None: kept)
                linecache.cache[filename] = (sum(map(len, lines)), None, list(lines), filename)
        names = dict(where)
        for f in _functions(args[0]):
            name = names.get(_key(f))
            if name is not None and f.__code__.co_filename != name:
                f.__code__ = _refile(f.__code__, name)
        obj = build(*args)
        for k, v in (state or {}).items():
            setattr(obj, k, v)
        obj._cf_token = token
        _REBUILT[token] = obj
        return obj
