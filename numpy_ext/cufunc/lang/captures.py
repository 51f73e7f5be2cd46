"""Device arrays captured from globals, as the engines (vectorize, guvectorize, cuda.reduce) pass
them to their kernels.

translate() gives a function that takes each captured device array as a trailing
``cf_array_ref<T, ND>`` parameter. ``loop_function`` wraps it into a function with the body's own
parameters, which every engine calls like any loop function: the wrapper passes, for each
captured array, an ``extern "C" __constant__`` variable that holds the array's descriptor (data
pointer, shape, byte strides). The variables are written when a kernel module is loaded (the
engines' add_loop ``captures``: cufunc/_core, cf_module_load_globals in C), never spelled in the
source, so the source and the compiled kernel are the same whatever array is captured: the disk
cache serves every process, and the kernel reads the array's contents at the time it runs.
``__constant__`` because kernels only read the descriptor: the constant cache broadcasts it to
every thread and the compiler may keep it in registers across the outputs' stores.
"""

from .. import types as _T

__all__ = ["loop_function"]


def _return_cname(r):
    rt = r.return_type
    if isinstance(rt, _T.Tuple):
        return r.return_struct
    return rt.cname


def _global_name(c_param):
    # translate() names a captured array's parameter cf_garr<i>_<the global's name>
    parts = c_param.split("_", 2)
    return parts[2] if len(parts) == 3 and parts[1].startswith("garr") else c_param


def loop_function(r, owner):
    """(source, fn_name, captures) of a loop from the TranslationResult ``r``.

    Without captured device arrays: ``r.source, r.name, ()``. With them: ``source`` is
    ``r.source`` plus a wrapper ``fn_name`` taking ``r.arg_types`` and returning
    ``r.return_type``; ``captures`` holds ``(symbol, array, label)`` for each captured array, in
    the order of ``r.device_array_globals``: the variable the wrapper reads, the array object, and
    what error messages call it (``owner`` names the function that captured it)."""
    if not r.device_array_globals:
        return r.source, r.name, ()
    wrapper = "cf_cap_" + (r.name[3:] if r.name.startswith("cf_") else r.name)
    params = ["%s a%d" % (t.cname, i) for i, t in enumerate(r.arg_types)]
    decls, args, captures = [], ["a%d" % i for i in range(len(r.arg_types))], []
    for (c_param, obj), at in zip(r.device_array_globals, r.device_array_types):
        symbol = "%s_%s" % (wrapper, c_param[3:] if c_param.startswith("cf_") else c_param)
        decls.append("__constant__ %s %s;" % (at.cname, symbol))
        args.append(symbol)
        captures.append((symbol, obj, "the global device array '%s' captured by %s"
                         % (_global_name(c_param), owner)))
    call = "%s(%s)" % (r.name, ", ".join(args))
    body = call + ";" if isinstance(r.return_type, _T.Void) else "return " + call + ";"
    names = ", ".join(_global_name(c) for c, _ in r.device_array_globals)
    source = (
        "%s#ifndef CF_DEF_%s\n#define CF_DEF_%s\n"
        "/* %s with its captured device arrays (%s): their descriptors are written into these "
        "variables when a kernel module is loaded */\n"
        "extern \"C\" {\n%s\n}\n"
        "CF_LANG_FN %s %s(%s)\n{\n    %s\n}\n#endif\n"
        % (r.source, wrapper, wrapper, r.name, names.replace("*/", "* /"), "\n".join(decls),
           _return_cname(r), wrapper, ", ".join(params), body))
    return source, wrapper, tuple(captures)
