"""Getting a function's source and AST, and errors that point at the user's file and line.

The source of a function is found exactly or not at all: a wrong match would translate another
function's body and give a wrong kernel silently (two lambdas on one line, a file edited after
import). get_source therefore

1. reads the text the function's code object was compiled from (linecache, which also knows the
   sources of loaders, IPython cells and anything registered there),
2. parses the whole file and takes the candidate nodes: the defs with the code object's name
   whose first line (first decorator's line) is co_firstlineno, or the lambdas that start on that
   line and, where Python records columns (3.11+: co_positions), whose span holds every position
   of the code object's instructions,
3. confirms each candidate by compiling its text again, at its own line and column and in a scope
   with the same free variables, and comparing the resulting code object with the function's
   (bytecode, constants, names, variables, flags, line and position tables),
4. and raises SourceError (an UnsupportedError) when no candidate is confirmed (no source, the
   file changed since it was imported, a transformed AST) or when several are and their ASTs
   differ (possible on Python 3.10 only, which records no columns: two lambdas on one line with
   the same bytecode). Candidates whose ASTs are identical translate identically; the first is
   used then.
"""

import __future__
import ast
import linecache
import sys
import threading
import types

from ..errors import UnsupportedError

__all__ = ["FunctionSource", "SourceError", "get_source", "located_error", "MAX_NESTING",
           "call_deep"]

# The deepest AST nesting (expression and statement levels, e.g. the terms of x + x + ... + x or
# the branches of an if/elif chain) a function may have. Python's own parser stops at a few
# thousand levels; deeper functions are a located UnsupportedError, never a RecursionError.
MAX_NESTING = 4000

_FUTURE_FLAGS = 0
for _name in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _name).compiler_flag
_CO_NESTED = 0x10


class SourceError(UnsupportedError):
    """The source of a function cannot be found exactly: it is not available (exec, the plain
    interactive prompt), it no longer matches the running code (the file was edited), or it
    cannot be told apart from another function's on the same line."""


class FunctionSource:
    """The parsed source of one Python function.

    ``tree`` is the ast.FunctionDef (or ast.Lambda) as parsed from the whole file: its line and
    column numbers are the file's (``line_offset`` and ``col_offset`` are 0, kept for callers
    that add them); ``lines`` are the file's lines."""

    __slots__ = ("func", "tree", "filename", "line_offset", "col_offset", "lines", "qualname",
                 "mangle_class")

    def __init__(self, func, tree, filename, line_offset, col_offset, lines, mangle_class=None):
        self.func = func
        self.tree = tree
        self.filename = filename
        self.line_offset = line_offset
        self.col_offset = col_offset
        self.lines = lines
        self.qualname = getattr(func, "__qualname__", getattr(func, "__name__", "<function>"))
        # the class whose name mangles __private names in this function (None outside classes)
        self.mangle_class = mangle_class

    def file_line(self, node):
        return getattr(node, "lineno", 1) + self.line_offset

    def location(self, node):
        """'  File "x.py", line 12, in f\\n    <source line>\\n    ^^^' for an AST node."""
        if node is None or not hasattr(node, "lineno"):
            node = self.tree
        rel = node.lineno
        line_no = rel + self.line_offset
        text = self.lines[rel - 1] if 0 < rel <= len(self.lines) else ""
        col = _char_col(text, getattr(node, "col_offset", 0) or 0)
        end_col = getattr(node, "end_col_offset", None)
        if end_col is not None:
            end_col = _char_col(text, end_col)
        if getattr(node, "end_lineno", rel) != rel or end_col is None or end_col <= col:
            end_col = max(len(text.rstrip()), col + 1)
        stripped = text.lstrip()
        lead = len(text) - len(stripped)
        caret = " " * max(col - lead, 0) + "^" * max(end_col - col, 1)
        return '  File "%s", line %d, in %s\n    %s\n    %s' % (
            self.filename, line_no, self.qualname, stripped.rstrip(), caret)


def _char_col(text, byte_col):
    """ast columns count UTF-8 bytes; the caret is drawn in characters."""
    try:
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", "ignore"))
    except Exception:
        return byte_col


def located_error(cls, message, src, node):
    """An exception of ``cls`` whose message ends with the location block."""
    err = cls("%s\n%s" % (message, src.location(node)))
    err.cufunc_location = (src.filename, src.file_line(node) if node is not None else None)
    return err


def _func_name(func):
    return getattr(func, "__qualname__", getattr(func, "__name__", repr(func)))


def _where(code):
    return 'File "%s", line %d' % (code.co_filename, code.co_firstlineno)


def _source_error(message, code=None):
    err = SourceError(message)
    if code is not None:
        err.cufunc_location = (code.co_filename, code.co_firstlineno)
    return err


# ----------------------------------------------------------------------------- what is translated

def _plain_function(func):
    """The Python function object to translate, or a SourceError saying why ``func`` is not one
    (bound methods, functools.partial, classes, builtins ...)."""
    import functools
    if isinstance(func, types.FunctionType):
        return func
    if isinstance(func, types.MethodType):
        raise _source_error(
            "cannot translate %s: it is a bound method (of %r); its first parameter would be the "
            "object, which a kernel cannot take. Use a plain function or a staticmethod "
            "(Class.method for a staticmethod is a plain function)"
            % (_func_name(func.__func__), type(func.__self__).__name__))
    if isinstance(func, (staticmethod, classmethod)):
        raise _source_error(
            "cannot translate a %s object: take the function from the class (Class.name) or "
            "decorate the plain function" % type(func).__name__)
    if isinstance(func, functools.partial):
        raise _source_error(
            "cannot translate functools.partial(%s, ...): a kernel must be a Python function "
            "with its own parameters. Write a def (or lambda) that takes the remaining "
            "arguments; it may use the bound values as globals or closure variables"
            % _func_name(func.func))
    if isinstance(func, type):
        raise _source_error("cannot translate the class %s: a kernel must be a Python function"
                            % func.__name__)
    raise _source_error("cannot translate %r: it is not a Python function (a def or lambda)"
                        % (func,))


# ----------------------------------------------------------------------------- whole-file parse

_PARSED = {}    # filename -> (text, module imports, {firstline: [function nodes]}, parents)


def _module_imports(mod):
    """The names bound by import statements in the module's own scope. Python 3.11+ compiles
    ``name.attr(...)`` differently when ``name`` came from such an import, so the scope rebuilt
    to confirm a candidate must import the same names."""
    names = set()
    todo = list(mod.body)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                if a.name != "*":
                    names.add(a.asname or a.name.split(".")[0])
            continue
        todo.extend(c for c in ast.iter_child_nodes(n) if isinstance(c, ast.stmt)
                    or type(c).__name__ in ("ExceptHandler", "match_case"))
    return tuple(sorted(names))


def _ast_parse(text, filename):
    return ast.parse(text, filename)


def _parse_file(filename, text, code):
    hit = _PARSED.get(filename)
    if hit is not None and hit[0] == text:
        return hit
    try:
        mod = _ast_parse(text, filename)
    except SyntaxError as e:
        raise _source_error(
            "cannot translate the function at %s: its source file does not parse now (%s); it "
            "was probably edited after it was imported. Reload the module or restart Python"
            % (_where(code), e), code) from None
    except (RecursionError, MemoryError):
        raise _source_error(
            "cannot translate the function at %s: its source file is nested too deeply for "
            "Python's ast module; split deep expressions into several statements"
            % _where(code), code) from None
    by_line = {}
    parents = {}
    todo = [mod]
    while todo:
        n = todo.pop()
        for c in ast.iter_child_nodes(n):
            parents[c] = n
            todo.append(c)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = n.decorator_list[0].lineno if n.decorator_list else n.lineno
            by_line.setdefault(first, []).append(n)
        elif isinstance(n, ast.Lambda):
            by_line.setdefault(n.lineno, []).append(n)
    entry = (text, _module_imports(mod), by_line, parents)
    if len(_PARSED) > 64:
        _PARSED.clear()
    _PARSED[filename] = entry
    return entry


def _instruction_positions(code):
    """(line, end_line, col, end_col) of every instruction with a known column (3.11+), else
    None. The RESUME at the top carries column 0; it says nothing about the span."""
    positions = getattr(code, "co_positions", None)
    if positions is None:
        return None
    out = []
    for p in positions():
        if None in p or p[0] == 0:
            continue
        if p[2] == 0 and p[3] == 0:
            continue
        out.append(p)
    return out


def _inside(node, pos):
    line, end_line, col, end_col = pos
    start = (node.lineno, node.col_offset)
    end = (node.end_lineno, node.end_col_offset)
    return start <= (line, col) and (end_line, end_col) <= end


def _candidates(code, by_line):
    nodes = by_line.get(code.co_firstlineno, [])
    if code.co_name == "<lambda>":
        cands = [n for n in nodes if isinstance(n, ast.Lambda)]
        pos = _instruction_positions(code)
        if pos:
            cands = [n for n in cands if all(_inside(n, p) for p in pos)]
    else:
        cands = [n for n in nodes if not isinstance(n, ast.Lambda) and n.name == code.co_name]
    return cands


# ----------------------------------------------------------------------------- confirmation

def _const_key(c):
    if isinstance(c, types.CodeType):
        return ("code", _code_key(c))
    if isinstance(c, tuple):
        return ("tuple", tuple(_const_key(x) for x in c))
    if isinstance(c, frozenset):
        return ("frozenset", tuple(sorted(repr(_const_key(x)) for x in c)))
    if isinstance(c, (float, complex)):
        return (type(c).__name__, repr(c))   # -0.0 and nan are told apart and equal themselves
    return (type(c).__name__, c)


def _code_key(code):
    """Everything of a code object that is fixed by its source text and position, less its
    qualified name and its NESTED flag (which depend on the enclosing scope)."""
    key = [code.co_name, code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
           code.co_nlocals, code.co_flags & ~_CO_NESTED, code.co_code, code.co_names,
           code.co_varnames, code.co_freevars, code.co_cellvars, code.co_firstlineno,
           tuple(_const_key(c) for c in code.co_consts)]
    for attr in ("co_linetable", "co_exceptiontable"):
        key.append(getattr(code, attr, None))
    return tuple(key)


def _enclosing_class(node, parents):
    """The name of the innermost class whose body (or a function in it) holds ``node``: Python
    mangles __private names with it."""
    p = parents.get(node)
    while p is not None:
        if isinstance(p, ast.ClassDef):
            return p.name
        p = parents.get(p)
    return None


def _cut(line, start=None, end=None):
    """line[start:end] in UTF-8 byte columns (ast's columns)."""
    return line.encode("utf-8")[start:end].decode("utf-8", "replace")


def _rebuild_text(code, node, lines, parents, imports):
    """Source text in which ``node`` stands at its own line and column, inside a scope that gives
    it the function's free variables and the class name it is mangled with; None when the
    layout leaves no room for that (then the AST is compiled instead). ``lines`` have no line
    ends."""
    is_lambda = isinstance(node, ast.Lambda)
    first = node.lineno if is_lambda or not node.decorator_list else node.decorator_list[0].lineno
    seg = lines[first - 1:node.end_lineno]
    seg[-1] = _cut(seg[-1], None, node.end_col_offset)
    freevars = [v for v in code.co_freevars if v != "__class__"]
    cls = _enclosing_class(node, parents)
    if is_lambda:
        # the lambda inside parentheses, padded to its column: "<ws>(   lambda x: ...)"
        seg[0] = _cut(seg[0], node.col_offset)
        if cls and freevars:
            head, body_ws = ["class %s:" % cls, " def __cf_scope():"], "  "
        elif cls:
            head, body_ws = ["class %s:" % cls], " "
        elif freevars:
            head, body_ws = ["def __cf_scope():"], " "
        else:
            head, body_ws = [], ""
        pad = node.col_offset - len(body_ws) - 1
        if pad < 0:
            return None
        seg[0] = body_ws + "(" + " " * pad + seg[0]
        seg[-1] += ")"
    else:
        def_line = lines[first - 1]
        body_ws = def_line[:len(def_line) - len(def_line.lstrip())]
        if cls and freevars:
            if len(body_ws) < 2:
                return None
            head = ["class %s:" % cls, body_ws[:1] + "def __cf_scope():"]
        elif cls or freevars or body_ws:
            # an indented def needs a block even without free variables (its NESTED flag is
            # not compared)
            if not body_ws:
                return None
            head = ["class %s:" % cls] if cls else ["def __cf_scope():"]
        else:
            head = []
    head += [body_ws + "%s = None" % v for v in freevars]
    if imports:
        head.insert(0, "import " + ", ".join(imports))
    if len(head) > first - 1:
        return None
    return "\n".join([""] * (first - 1 - len(head)) + head + seg) + "\n"


def _compiled_candidates(code_obj, name):
    """The code objects named ``name`` defined directly in the scopes _rebuild_text made."""
    out = []
    todo = [code_obj]
    while todo:
        c = todo.pop()
        for k in c.co_consts:
            if isinstance(k, types.CodeType):
                if k.co_name == name:
                    out.append(k)
                elif k.co_name in ("__cf_scope",) or not k.co_name.startswith("<"):
                    todo.append(k)
    return out


def _compile_candidate(code, node, lines, parents, imports):
    """The code object Python makes from ``node``'s text at its place, or None."""
    flags = code.co_flags & _FUTURE_FLAGS
    text = _rebuild_text(code, node, [l.rstrip("\r\n") for l in lines], parents, imports)
    try:
        if text is not None:
            top = compile(text, code.co_filename, "exec", flags, dont_inherit=True)
        else:
            top = _compile_ast(code, node, parents, imports, flags)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    found = _compiled_candidates(top, code.co_name)
    if len(found) != 1:
        return None
    return found[0]


def _compile_ast(code, node, parents, imports, flags):
    """Fallback of _compile_candidate for layouts _rebuild_text cannot write: the same scopes
    built as AST nodes around ``node`` (positions kept)."""
    loc = dict(lineno=node.lineno, col_offset=0, end_lineno=node.lineno, end_col_offset=0)
    target = node if not isinstance(node, ast.Lambda) else ast.Expr(value=node, **loc)
    body = [ast.Assign(targets=[ast.Name(id=v, ctx=ast.Store(), **loc)],
                       value=ast.Constant(value=None, **loc), **loc)
            for v in code.co_freevars if v != "__class__"] + [target]
    if len(body) > 1:
        args = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                             kw_defaults=[], kwarg=None, defaults=[])
        body = [ast.FunctionDef(name="__cf_scope", args=args, body=body, decorator_list=[],
                                returns=None, type_comment=None, **loc)]
        if sys.version_info >= (3, 12):
            body[0].type_params = []
    cls = _enclosing_class(node, parents)
    if cls:
        kw = dict(name=cls, bases=[], keywords=[], body=body, decorator_list=[], **loc)
        if sys.version_info >= (3, 12):
            kw["type_params"] = []
        body = [ast.ClassDef(**kw)]
    if imports:
        body.insert(0, ast.Import(names=[ast.alias(name=n) for n in imports], **loc))
    mod = ast.Module(body=body, type_ignores=[])
    return compile(mod, code.co_filename, "exec", flags, dont_inherit=True)


# ----------------------------------------------------------------------------- get_source

def _nesting_depth(node):
    """(depth, deepest node with a position) of an AST, without recursion."""
    best, deepest = 0, node
    todo = [(node, 1, node)]
    while todo:
        n, d, located = todo.pop()
        if hasattr(n, "lineno"):
            located = n
        if d > best:
            best, deepest = d, located
        for c in ast.iter_child_nodes(n):
            todo.append((c, d + 1, located))
    return best, deepest


def _find(func, code, lines):
    """(node, class, candidates): the confirmed AST node of ``func`` in ``lines`` and the class
    that mangles its private names; or (None, reason, candidates)."""
    text = "".join(lines)
    _, imports, by_line, parents = _parse_file(code.co_filename, text, code)
    cands = _candidates(code, by_line)
    if not cands:
        return None, "no definition of it starts at that line", cands
    want = _code_key(code)
    confirmed = []
    for n in cands:
        c = _compile_candidate(code, n, lines, parents, imports)
        if c is not None and _code_key(c) == want:
            confirmed.append(n)
    if not confirmed:
        return None, "the source at that line compiles to different code", cands
    if len(confirmed) > 1:
        dumps = {ast.dump(n) for n in confirmed}
        if len(dumps) > 1:
            raise _source_error(
                "cannot translate the lambda at %s: %d lambdas on that line compile to the same "
                "code and this Python (%d.%d) records no columns to tell them apart. Define it "
                "with a def (or put each lambda on its own line)"
                % (_where(code), len(confirmed), sys.version_info[0], sys.version_info[1]),
                code)
    return confirmed[0], _enclosing_class(confirmed[0], parents), cands


def _rewritten_assert(func, cands):
    """pytest rewrites the assert statements of test modules, so a def with an assert in such a
    module never compiles to its own source's code: the one candidate at the def's line, when it
    has an assert and pytest's rewriting marks the module, is taken as the source (the rest of
    the def cannot be told from what runs; its asserts are translated from the source)."""
    if "@py_builtins" not in func.__globals__ or len(cands) != 1:
        return None
    if any(isinstance(n, ast.Assert) for n in ast.walk(cands[0])):
        return cands[0]
    return None


def get_source(func):
    """The exact source of ``func`` (see the module docstring). Raises SourceError (an
    UnsupportedError) when it is not available or cannot be confirmed, and UnsupportedError at
    the user's line when the function is nested deeper than MAX_NESTING."""
    func = _plain_function(func)
    code = func.__code__
    filename = code.co_filename
    lines = linecache.getlines(filename, func.__globals__)
    node = info = None
    cands = []
    if lines:
        node, info, cands = _find(func, code, lines)
        if node is None:
            # The cache may hold an older text, or a newer file was read: look once more.
            linecache.checkcache(filename)
            fresh = linecache.getlines(filename, func.__globals__)
            if fresh and fresh != lines:
                lines = fresh
                node, info, cands = _find(func, code, lines)
    if not lines:
        raise _source_error(
            "cannot translate %s: its source code is not available (%s). Functions defined with "
            "exec() or at the plain interactive prompt have no source file; define it in a file "
            "(or in IPython/Jupyter, which keep the source), or register the exact source text "
            "in linecache under the code's file name" % (_func_name(func), _where(code)), code)
    if node is None:
        node = _rewritten_assert(func, cands)
        info = None
    if node is None:
        raise _source_error(
            "cannot translate %s: its source at %s cannot be confirmed to be the code that runs "
            "(%s). The file was probably edited after it was imported (reload the module or "
            "restart Python); for a lambda written among other code, define it with a def"
            % (_func_name(func), _where(code), info), code)
    src = FunctionSource(func, node, filename, 0, 0, [l.rstrip("\r\n") for l in lines],
                         mangle_class=info)
    depth, deepest = _nesting_depth(node)
    if depth > MAX_NESTING:
        raise located_error(
            UnsupportedError, "%s is nested %d levels deep, more than the %d levels the "
            "translator supports; split the expression or the if/elif chain into several "
            "statements or functions" % (src.qualname, depth, MAX_NESTING), src, deepest)
    return src


# ----------------------------------------------------------------------------- deep functions

# The translator recurses over the AST, a few Python frames per level: a 2000-term sum needs
# more than Python's default recursion limit (1000). call_deep runs such a translation again in a
# thread with a large stack (so the C stack cannot overflow, which a raised limit alone risks on
# Python 3.10) and a raised recursion limit.
_DEEP_STACK = 512 << 20
_DEEP_RECURSION = 120000
_DEEP_LOCK = threading.Lock()


def call_deep(fn, func):
    """fn() for the translation of ``func``; a RecursionError is retried with a deep stack, and
    one that still happens becomes an UnsupportedError located at the deepest node of ``func``,
    never a bare RecursionError."""
    try:
        return fn()
    except RecursionError:
        pass
    out = {}

    def target():
        try:
            out["value"] = fn()
        except BaseException as e:   # handed to the calling thread
            out["error"] = e

    with _DEEP_LOCK:
        old_limit = sys.getrecursionlimit()
        old_stack = threading.stack_size()
        sys.setrecursionlimit(max(old_limit, _DEEP_RECURSION))
        try:
            try:
                threading.stack_size(_DEEP_STACK)
            except (ValueError, RuntimeError):
                pass                 # the platform refuses the size: the default stack then
            try:
                t = threading.Thread(target=target, name="cufunc-deep-translate", daemon=True)
                t.start()
            finally:
                threading.stack_size(old_stack)
            t.join()
        finally:
            sys.setrecursionlimit(old_limit)
    err = out.get("error")
    if isinstance(err, RecursionError):
        raise _too_deep(func) from None
    if err is not None:
        raise err
    return out["value"]


def _too_deep(func):
    try:
        src = get_source(func)
    except UnsupportedError as e:
        return e
    depth, deepest = _nesting_depth(src.tree)
    return located_error(
        UnsupportedError, "%s is nested too deeply to translate (%d levels; Python's recursion "
        "limit was reached); split the expression or the if/elif chain into several statements "
        "or functions" % (src.qualname, depth), src, deepest)
