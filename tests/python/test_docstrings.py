"""Every public name has a numpydoc docstring that validates, so that the API reference the
documentation site generates from the docstrings (docs/api.md) is complete.

The public names: those in ``__all__`` of ``cufunc``, ``cufunc.cuda``, ``cufunc.numba`` and
``cufunc.numba.cuda`` (functions and classes; for an instance, such as ``cuda.local``, its class),
and the public attributes and methods (no leading underscore) of those classes and of their
bases defined by cufunc, those written in C included. Modules are walked through their own
``__all__`` only; names that are Python's own objects (``cufunc.numba.prange`` is ``range``) are
Python's docstrings, not checked here.

Each is checked with ``numpydoc.validate.validate``; every error code counts except the few in
IGNORED, each with its reason. A function or method written in C must also carry a text
signature (the ``name($self, a, b=0)\\n--\\n\\n`` first lines of its C docstring): that is what
lets Python (``inspect.signature``) and so numpydoc compare its parameters with its Parameters
section (PR01, PR02, PR03), as for a Python function.
"""
import inspect

import pytest

numpydoc_validate = pytest.importorskip("numpydoc.validate")
docscrape = pytest.importorskip("numpydoc.docscrape")

import cufunc
import cufunc.cuda
import cufunc.numba

MODULES = [("cufunc", cufunc), ("cufunc.cuda", cufunc.cuda), ("cufunc.numba", cufunc.numba),
           ("cufunc.numba.cuda", cufunc.numba.cuda)]

IGNORED = {
    "ES01": "an extended summary is not required: one line says enough for many attributes and "
            "small functions",
    "SA01": "a See Also section is not required",
    "EX01": "the examples are in the documentation pages, whose code blocks run as tests "
            "(test_docs_examples.py), not in the docstrings",
}

ATTRIBUTE_KINDS = (property, staticmethod, classmethod)


def _is_attribute(obj):
    return (isinstance(obj, ATTRIBUTE_KINDS) or inspect.isfunction(obj)
            or inspect.ismethoddescriptor(obj) or inspect.isdatadescriptor(obj)
            or inspect.isbuiltin(obj))


def _ours(obj):
    mod = getattr(obj, "__module__", None) or ""
    return mod == "cufunc" or mod.startswith("cufunc.")


def public_objects():
    """[(qualified name, object)], each object once (its first name)."""
    out, seen = [], set()

    def add(name, obj):
        if id(obj) not in seen:
            seen.add(id(obj))
            out.append((name, obj))

    def add_class(name, cls):
        add(name, cls)
        for base in cls.__mro__:
            if base is not cls and not _ours(base):
                continue
            for attr, value in vars(base).items():
                if attr.startswith("_") or not _is_attribute(value):
                    continue
                add("%s.%s" % (name, attr), value)

    for mname, mod in MODULES:
        for n in mod.__all__:
            obj = getattr(mod, n)
            if inspect.ismodule(obj):
                continue
            if isinstance(obj, type):
                if _ours(obj):
                    add_class("%s.%s" % (mname, n), obj)
            elif inspect.isfunction(obj) or inspect.isbuiltin(obj):
                if _ours(obj) or getattr(obj, "__self__", None) is not None:
                    add("%s.%s" % (mname, n), obj)
            elif _ours(type(obj)) and not any(o is type(obj) for _, o in out):
                add_class("%s.%s (%s)" % (mname, n, type(obj).__name__), type(obj))
    # a public type reached only through a method: Stream.end_capture() returns a Graph
    graph = getattr(cufunc._env.core, "Graph", None)
    if graph is not None:
        add_class("cufunc.cuda.Graph", graph)
    return out


PUBLIC = public_objects()


def _in_c(obj):
    return inspect.isbuiltin(obj) or type(obj).__name__ in ("method_descriptor",
                                                           "classmethod_descriptor")


def _slot_doc(obj):
    """A __slots__ attribute's docstring: its value in the class's __slots__ dict (where Python's
    help() and Sphinx read it; the member descriptor's own __doc__ stays None)."""
    slots = getattr(obj.__objclass__, "__slots__", None)
    return slots.get(obj.__name__) if isinstance(slots, dict) else None


def problems(name, obj):
    if type(obj).__name__ == "member_descriptor":
        obj = property(doc=_slot_doc(obj))
    res = numpydoc_validate.validate(docscrape.get_doc_object(obj))
    errs = ["%s %s" % (code, msg) for code, msg in res["errors"] if code not in IGNORED]
    if _in_c(obj):
        try:
            inspect.signature(obj)
        except (TypeError, ValueError) as e:
            errs.append("C001 a function written in C has no usable text signature in its "
                        "docstring (%s)" % e)
    return errs


def test_the_walk_reaches_the_c_types_and_their_methods():
    names = {n for n, _ in PUBLIC}
    for must in ("cufunc.vectorize", "cufunc.UFunc", "cufunc.UFunc.reduce", "cufunc.UFunc.types",
                 "cufunc.GUFunc.resolve", "cufunc.cuda.to_device", "cufunc.cuda.Stream.synchronize",
                 "cufunc.cuda.Event.elapsed_time", "cufunc.cuda.DeviceNDArray.copy_to_host",
                 "cufunc.cuda.DeviceNDArray.shape", "cufunc.cuda.RawKernel.compile",
                 "cufunc.Scalar.dtype", "cufunc.numba.cuda.list_devices", "cufunc.cuda.Reduce",
                 "cufunc.cuda.Graph.launch", "cufunc.cuda.local (_Local).array"):
        assert must in names, must
    assert len(PUBLIC) > 200, len(PUBLIC)


def test_every_public_name_has_a_valid_numpydoc_docstring():
    report = []
    for name, obj in PUBLIC:
        errs = problems(name, obj)
        if errs:
            report.append("%s:\n    %s" % (name, "\n    ".join(errs)))
    assert not report, "%d of %d public names:\n%s" % (len(report), len(PUBLIC),
                                                        "\n".join(report))


def test_the_check_fails_on_a_bad_docstring():
    def no_doc(x):
        return x

    def bad(x, y):
        """returns x

        Parameters
        ----------
        x : int
            the value
        z : int
            Not a parameter.
        """
        return x
    assert any(e.startswith("GL08") for e in problems("no_doc", no_doc))
    codes = {e.split()[0] for e in problems("bad", bad)}
    assert {"SS02", "SS03", "PR01", "PR02", "PR08", "PR09", "RT01"} <= codes, codes
    assert "C001" in {e.split()[0] for e in problems("c", cufunc.cuda.Stream.__enter__)}


def _api_page_objects():
    """{id(object): (directive, has :members:)} of the auto* directives of docs/api.md."""
    import os
    import re
    import importlib
    page = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "api.md")
    text = open(page).read()
    out = {}
    for m in re.finditer(r"^\.\. auto(\w+):: ([\w.]+)\n((?:   :\w+:.*\n)*)", text, re.M):
        kind, target, opts = m.groups()
        parts = target.split(".")
        obj = importlib.import_module(parts[0])
        for i, p in enumerate(parts[1:], 2):
            # an attribute first (cufunc.vectorize is the function, not the module)
            obj = (getattr(obj, p) if hasattr(obj, p)
                   else importlib.import_module(".".join(parts[:i])))
        out[id(obj)] = (kind, ":members:" in opts)
    return out


def test_the_api_page_documents_every_public_name():
    """docs/api.md has an autodoc directive for every public function and class (by identity:
    an alias such as cufunc.numba.cuda.to_device is documented once), and its classes with
    public methods or attributes list their members."""
    on_page = _api_page_objects()
    missing, no_members = [], []
    for name, obj in PUBLIC:
        owner = name.rsplit(".", 1)[0]
        if any(n == owner for n, _ in PUBLIC):
            continue                       # a method or attribute: the class's :members:
        if " (" in name:
            continue                       # the class of a namespace object (cuda.local)
        if id(obj) not in on_page:
            missing.append(name)
        elif isinstance(obj, type) and not on_page[id(obj)][1] and any(
                n.startswith(name + ".") for n, _ in PUBLIC):
            no_members.append(name)
    assert not missing, "not in docs/api.md: %s" % missing
    assert not no_members, "classes in docs/api.md without :members:: %s" % no_members
